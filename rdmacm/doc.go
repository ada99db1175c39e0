// Package rdmacm is the RDMA connection manager of one irdma-emu device as
// programs see it through /dev/infiniband/rdma_cm: the kernel's
// drivers/infiniband/core/ucma.c (the write() command ABI librdmacm speaks,
// event channels, DESTROY_ID's event count, MIGRATE_ID) together with the
// part of cma.c a RoCE device needs (IP addressing, port spaces and IP
// service IDs, the cma_hdr private-data header, address and route
// resolution without a subnet administrator, the id state machine,
// INIT_QP_ATTR, listens with wildcard and several listeners, the UDP port
// space with SIDR, multicast joins, DEVICE_REMOVAL at shutdown).
//
// The IBTA CM protocol on the wire (REQ/REP/RTU/REJ/DREQ/DREP/SIDR MADs on
// QP1) is the cm package's; this package is its consumer, as cma.c is
// ib_cm's. Programs' QPs stay theirs: librdmacm creates and modifies them
// through uverbs with the attributes INIT_QP_ATTR returns, so nothing here
// touches a QP.
//
// One Provider serves one device; each open of /dev/infiniband/rdma_cm (an
// attach connection whose HELLO carries attach.HelloRdmaCM) is one
// Channel, the kernel's struct ucma_file. docs/cm.md describes what is
// served and what is not.
package rdmacm
