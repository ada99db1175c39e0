package qp

// The requester's window. A QP sends no new packet while its next PSN is
// a window ahead of the oldest unacknowledged one. Nothing tells the
// device that the path is full — the link drops what the receiver's
// socket buffer cannot hold, where a RoCE fabric would pause (PFC) or
// mark (ECN, for DCQCN) — so the window reacts to loss, as TCP's does
// (RFC 5681 §3.1): it starts at initialWindow (or the limit, if smaller)
// and doubles every round trip (each PSN acknowledged opens it by one) up
// to Tunables.MaxUnackedPSNs; each go-back-N a timeout or a NAK starts
// halves it, down to minWindow, and from there each window's worth of
// PSNs acknowledged opens it by one. Sixteen QPs with rxe's fixed 128
// PSNs each (8 MiB at a 4 KiB MTU) overran a receiving socket's 4 MiB and
// went back a window at a time; halving them on loss cut the
// retransmissions tenfold (docs/performance.md "The requester window").
// An RNR NAK is the receiver's state, not the path's: it cuts nothing.

const (
	// initialWindow is the window at RTS when MaxUnackedPSNs allows more:
	// rxe's fixed one (RXE_MAX_UNACKED_PSNS).
	initialWindow = 128
	// minWindow is the smallest window a loss leaves.
	minWindow = 16
)

// windowOpen starts the window (at RTS).
func (r *requester) windowOpen(t *Transport) {
	limit := t.dp.Tun.MaxUnackedPSNs
	r.cwnd, r.ssthresh = min(initialWindow, limit), limit
	r.cwndAcc, r.lastUna = 0, r.una
}

// window returns the window in force, in PSNs.
func (r *requester) window(t *Transport) int32 {
	if limit := t.dp.Tun.MaxUnackedPSNs; r.cwnd == 0 || r.cwnd > limit {
		return int32(limit)
	}
	return int32(r.cwnd)
}

// windowCut halves the window at the start of a go-back-N; it grows by
// one PSN a window from there.
func (r *requester) windowCut(t *Transport, ctx *Ctx) {
	r.ssthresh = max(uint32(r.window(t))/2, min(minWindow, t.dp.Tun.MaxUnackedPSNs))
	r.cwnd = r.ssthresh
	r.cwndAcc, r.lastUna = 0, r.una
	t.count(ctx, CntWindowCuts, 1)
}

// windowGrow counts the PSNs acknowledged since the last call and opens
// the window: by as many below ssthresh, by one for each window's worth
// above it.
func (r *requester) windowGrow(t *Transport) {
	acked := r.una.Diff(r.lastUna)
	r.lastUna = r.una
	limit := t.dp.Tun.MaxUnackedPSNs
	if acked <= 0 || r.cwnd >= limit {
		return
	}
	if r.cwnd < r.ssthresh {
		r.cwnd = min(r.cwnd+uint32(acked), r.ssthresh)
		return
	}
	r.cwndAcc += uint32(acked)
	for r.cwnd < limit && r.cwndAcc >= r.cwnd {
		r.cwndAcc -= r.cwnd
		r.cwnd++
	}
	if r.cwnd >= limit {
		r.cwndAcc = 0
	}
}
