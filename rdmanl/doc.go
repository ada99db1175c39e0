// Package rdmanl is the kernel's RDMA netlink device interface (NLDEV,
// drivers/infiniband/core/nldev.c) for the emulated device: it answers the
// NETLINK_RDMA datagrams a program sends — the iproute2 `rdma` tool,
// libibverbs' device enumeration (libibverbs/ibdev_nl.c), librdmacm's
// character-device query — from what the daemon knows, in the kernel's
// formats: the device, its port, the character devices, the resources
// (restrack), the statistics and the system settings.
//
// The wire format is netlink's (include/uapi/linux/netlink.h: nlmsghdr,
// nlattr with 4-byte alignment, NLMSG_ERROR/NLMSG_DONE) with the NLDEV
// commands and attributes of include/uapi/rdma/rdma_netlink.h. The
// package is a protocol, not a transport: Responder.Handle takes one
// datagram and returns the datagrams to send back (the daemon's attach
// server carries them, docs/attach.md "Netlink connections").
package rdmanl
