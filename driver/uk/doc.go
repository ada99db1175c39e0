// Package uk is the driver half's counterpart of irdma's uk.c: the layer
// the irdma kernel driver and libirdma share, which writes SQ/RQ WQEs into
// the rings in host memory, rings (or skips) the SQ doorbell, and consumes
// CQEs. The driver's kernel-mode PostSend, PostRecv and PollCQ are built
// on it.
//
// It writes what the kernel path (irdma_post_send → irdma_uk_*) writes,
// GEN_2 (E810) layout, bit for bit; the tests pin it to the bytes the
// real, unmodified libirdma wrote (testdata/libirdma-wqe.json). It is
// written from uk.c and defs.h as docs/hw-datapath.md records them, separately
// from the device model's decoder in emu/qp: the two sides of the hardware
// interface must not share code, so this package imports nothing of emu/.
//
// Memory: the rings and shadow areas are plain []byte (the driver half
// passes the Bytes() of host-memory regions it allocated). Every WQE is
// written body first and header qword last with a 64-bit atomic store,
// and the device's words (CQE valid qwords, the QP shadow's hardware SQ
// tail) are read with 64-bit atomic loads; see mem.go.
//
// Concurrency: like irdma's uk layer, a QP or CQ is not safe for
// concurrent use; the caller serialises (irdma holds iwqp->lock around
// posts and iwcq->lock around polls).
package uk
