// Package cqp is the device's control QP: CQP bring-up through the
// CCQPHIGH/CCQPLOW/CCQPSTATUS registers, the 64-byte WQE ring, the
// execution of every CQP opcode, and the completions (CQPTAIL,
// CQPERRCODES and, once the CCQ exists, one CCQE per WQE).
//
// Sources: the Linux irdma driver (ctrl.c builders, defs.h masks), as
// docs/hw-controlpath.md records it; see the citations at each field.
//
// # Ring
//
// The driver writes CCQPHIGH then CCQPLOW with the address of a 64-byte CQP
// host context; the CCQPLOW write is the trigger (docs/hw-controlpath.md
// "Bring-up order"). The engine reads the context (ring size, ring base, HW
// version, completion context at +24, protocol) and sets CCQPSTATUS to
// CCQP_DONE, or to CCQP_ERR with CQPERRCODES for a bad context. Writing zero
// to both registers destroys the CQP (CCQPSTATUS reads 0 again).
//
// WQEs are consumed in ring order while the header's valid bit (qword3
// b63) equals the expected polarity, 1 on the first lap, flipped at every
// wrap. CQPDB writes are hints that wake the engine; the engine never
// counts them. For every consumed WQE, in this order:
//
//  1. the opcode runs and yields a Status and an OP_RETVAL;
//  2. if the CCQ (CQ 0) exists, one CCQE is written to it (qword1 = the
//     host context's +24 verbatim, docs/hw-controlpath.md "CQP
//     completion"; qword2 [31:0] OP_RETVAL; qword3 minor, major (errors
//     only), WQE index, ERROR). The CCQ's own CREATE_CQ completes on the
//     CCQ; its DESTROY_CQ does not (the driver polls registers, "CQP
//     completion");
//  3. CQPERRCODES gets the codes of a failed WQE (0 after a good one) and
//     CQPTAIL WQTAIL moves by exactly one, with CQP_OP_ERR set only for a
//     failed WQE (never sticky: "CQP completion");
//  4. actions that follow a completion run (AE QP_SUSPEND_COMPLETE).
//
// timing.CQPCommand is charged once per WQE.
//
// Bad input never stops the engine: every refusal is a Status (see
// docs/cqp-errors.md) and the next WQE runs normally.
package cqp
