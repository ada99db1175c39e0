// Package attach is the transport between a client process and the daemon:
// the attach protocol of docs/attach.md on a SOCK_SEQPACKET unix socket,
// with file descriptors passed by SCM_RIGHTS.
//
// One connection stands for one open of /dev/infiniband/uverbsN. The C
// preload (preload/) speaks it from under an unmodified rdma-core program;
// Conn speaks it from Go. The daemon serves it with Listen and a Handler:
// the transport checks every message (magic, type, flags, length, how many
// descriptors) and calls the Handler's Session with well-formed requests
// only, one at a time per connection, in order. What a uverbs command
// means is the Session's business; this package never looks inside one.
//
// # Codec
//
// Every message is a 16-byte Header and a payload; the Append* functions
// build them and the Parse* functions read them, checking lengths and never
// panicking, whatever the input. Integers are little-endian.
//
// # Descriptors
//
// Descriptors received with a message belong to it: the server closes every
// descriptor it does not hand to the Session, and a Session owns the files it
// is given (Peer.Mem, the memfd of a MEM request). Files a Session returns
// in a reply (CmdReply.FDs, Mmap's memfd) belong to the server from then on:
// it sends them and closes them. A Session that keeps using such a
// descriptor passes a duplicate (DupFile).
//
// # Run directory
//
// The daemon keeps, per device, its socket and the fake sysfs tree under one
// run directory (RunDir, /run/irdma-emu by default): <dir>/<device>.sock and
// <dir>/<device>/sysfs. SocketPath and SysfsPath name them.
package attach
