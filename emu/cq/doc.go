// Package cq holds the device's completion side: completion queues (CQs)
// and their CQE writer, the completion event queues (CEQs) and the
// asynchronous event queue (AEQ).
//
// Layouts are GEN_2 (E810): the CQ shadow area and 32-byte CQEs with the
// extension in the next ring slot as uk.c reads them (docs/hw-datapath.md "CQ
// shadow area and arming", "CQ ring and valid bit", "CQE layout", "CQE
// extension"), and the CEQE, AEQE and AE codes as ctrl.c and hw.c read them
// (docs/hw-controlpath.md "CEQE", "AEQE", "AE codes"; the arm bits and the
// raw CQ context of CQ AEQEs are the subtle points).
//
// # Writing a CQE
//
// CQ.Post writes one CQE: the extension slot first (when EXTCQE is set),
// then qwords 0–2, then qword 3 with the valid bit at the CQ's current
// polarity, as one atomic 64-bit store. Software polls the valid bit and
// reads the rest after a barrier (rdma-core uk.c irdma_uk_cq_poll_cmpl), so
// the valid store is the publication point. The polarity starts at 1 and
// flips every time the producer index wraps to 0.
//
// Before writing, a CQ created with CHKOVERFLOW reads the software head
// from shadow qword 0 [19:0] (IRDMA_CQ_DBSA_CQEIDX); a CQE that would fill
// the ring (at most size−1 entries in use) is not written and AE
// CQ_OPERATION_ERROR (0x0203) is posted with the CQ's raw context and id
// (docs/hw-controlpath.md "AEQE"), once per overflow episode.
//
// After writing, the CQ reads its arm word, shadow qword 4: ARM_NEXT b14
// (notify on any completion), ARM_NEXT_SE b15 (set on every arm; alone it
// means solicited only), ARM_SEQ_NUM [17:16] (incremented on every arm).
// The arm state is read from memory when a CQE is written, never inferred
// from doorbells: a CQARM store is only a hint. One CEQE is written per
// arm: when the sequence number differs from the one last notified and the
// CQE qualifies, the CQ's context goes to its CEQ and the sequence number
// is remembered.
//
// # Concurrency
//
// Several producers (the CQP's CCQ writer, data-plane workers completing
// different QPs into one CQ) may post to the same CQ. A per-CQ mutex
// serialises them; it is taken after all packet processing, for the
// duration of a few 64-bit stores, and never while holding another CQ's or
// queue's lock except the CEQ/AEQ lock it nests (CQ → CEQ, CQ → AEQ; never
// the other way). Lookups in a Table are lock-free.
package cq
