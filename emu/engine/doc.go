// Package engine runs the data plane of one emulated device: a fixed set of
// worker goroutines that run the QPs' transports (emu/qp Transport), the
// port's receive path from its link, the transmit batching, the doorbell
// hints and the valid-bit rescan of active QPs. docs/dataplane.md is the
// long form; this is the map.
//
// # Workers and queues
//
// QPs hash onto Config.Workers workers by QPN (qpn mod workers), so a QP's
// packets, doorbells and timer expiries are processed in order by one
// goroutine, and an idle QP costs nothing: no goroutine, no timer, no
// queue until it has traffic (gVisor's dispatcher with fixed processors).
// Each worker has a lock-free intrusive MPSC ready queue of QPs; a QP is in
// it at most once. Each QP has a bounded inbox of received packets (Vyukov
// MPMC array, allocated with its first packet); a full inbox drops and
// counts. A worker pops the ready QPs, runs each for a bounded burst
// (received packets, responses, SQ), sends the packets it built in
// batches on the link, and queues the QP again if work remains.
//
// # Receive path (rxe_rcv / hdr_check order)
//
// link → Receiver.Receive (the link's goroutine) → wire.ParseFrame → ICRC
// (the link's per-packet status; verified here when unchecked) →
// destination IP one of the port's GIDs → DestQP: 0 dropped, 0xFFFFFF
// multicast through emu/ah's groups, otherwise the QP table (QPN 1 is the
// GSI QP) → opcode transport matches the QP type → the QP's inbox → its
// worker. The QP's state, the RC address pair, the P_Key and the UD Q_Key
// are checked by the worker (they read the QP's context cache). Every drop
// is counted by reason.
//
// # Loopback
//
// A frame the device sends to one of the port's GIDs (Config.GIDs, an
// atomic snapshot) does not go to the link: the worker that built it passes
// it through the same receive path, after showing it to the link's
// link.Looper (a capture). A multicast frame goes to the link and, when the
// device has a group of its address, as a copy to the local members. The
// decision is per frame (loopback.go; docs/dataplane.md "Loopback"). The
// workers build frames unsealed and flush computes the ICRC of those that
// leave the device; one kept inside gets none unless the link captures,
// and the gate checks none (link.ICRCInDevice).
//
// # Doorbells and the rescan
// # Doorbells, polling and parking
//
// A WQEALLOC write (its QP id in [19:0]) marks the QP ready. Doorbells are
// hints: stores of one value coalesce, and the kernel suppresses them while
// it believes the device busy (docs/hw-datapath.md "Doorbells"); the
// published SQ tail and a last look at the SQ after publishing close that
// race. The user doorbell pages are shared memory nothing traps: they are
// DoorbellSources, polled by every worker that polls — after each round
// while busy, and for ScanConfig.Poll after its last work, with its active
// QPs rescanned by valid bit. Then the worker parks: it sleeps until
// kicked, with no timer. When the last worker parks, the NotifyingSources
// are told Park (their posters notify from then on) and polled once more,
// so a post that saw "polling" just before is not lost; the first worker
// to wake tells them Unpark. Only a source whose posters cannot notify
// keeps a parked worker on a backoff timer (MinBackoff doubling to
// MaxBackoff). docs/dataplane.md "Idle and wake-up on post".
//
// # Control and data
//
// MODIFY_QP, FLUSH_WQES and DESTROY_QP reach the data plane through the
// QP's Transport (qp.QP.Transport, BeginControl/EndControl): the CQP claims the QP (an atomic word the worker also
// claims for each run, waiting only for a run in progress), the transport
// hands its consumer indices back, the control operation runs, and
// EndControl releases and wakes the QP. No lock is held while a WQE
// becomes packets.
//
// # Timers and time
//
// Retransmission, RNR and ACK-delay timers are per QP, on the device's
// injectable clock (timing.Clock); a clock callback only sets an event bit
// and wakes the worker. With Config.Stepped there are no goroutines: the
// caller drives Poll, which with a timing.Manual clock and link.NewPair
// makes runs deterministic.
//
// # Lifecycle
//
//	e, _ := engine.New(dev, engine.Config{})
//	e.AttachLink(l)   // before Start
//	e.Start()
//	...
//	e.Close()         // before dev.Close
package engine
