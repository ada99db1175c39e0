package client

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/irdma-emu/irdma-emu/driver/uk"
)

// CompChannel is a completion channel: a descriptor the daemon created
// that yields one ib_uverbs_comp_event_desc per event.
type CompChannel struct {
	ctx *Context
	f   *os.File
	fd  int32 // the number the daemon knows it by (patched into the response)
}

// CreateCompChannel is ibv_create_comp_channel.
func (c *Context) CreateCompChannel() (*CompChannel, error) {
	var core wbuf
	core.u64(c.respAddr())
	r, files, err := c.exec(legacyCmd(cmdCreateCompChannel, core, nil, 4), 4)
	if err != nil {
		return nil, err
	}
	if len(files) != 1 {
		for _, f := range files {
			f.Close()
		}
		return nil, fmt.Errorf("client: CREATE_COMP_CHANNEL returned %d descriptors: %w", len(files), syscall.EPROTO)
	}
	return &CompChannel{ctx: c, f: files[0], fd: int32(r.u32(0))}, nil
}

// Destroy is ibv_destroy_comp_channel: the descriptor is closed (CQs
// using it must be destroyed first).
func (ch *CompChannel) Destroy() error { return ch.f.Close() }

// GetEvent is ibv_get_cq_event: it waits up to timeout (forever if
// timeout < 0) for the next completion event and returns its CQ, which is
// disarmed (ReqNotify again to get another event).
func (ch *CompChannel) GetEvent(timeout time.Duration) (*CQ, error) {
	var b [compEventSize]byte
	if err := readRecord(ch.f, b[:], timeout); err != nil {
		return nil, err
	}
	h := le.Uint64(b[:])
	ch.ctx.mu.Lock()
	cq := ch.ctx.cqs[h]
	ch.ctx.mu.Unlock()
	if cq == nil {
		return nil, fmt.Errorf("client: completion event for unknown CQ handle %#x: %w", h, syscall.EPROTO)
	}
	cq.events.Add(1)
	cq.cqEvent()
	return cq, nil
}

// CQ is a completion queue with its ring and shadow area in shared memory.
type CQ struct {
	ctx     *Context
	ch      *CompChannel
	handle  uint32 // uverbs cq_handle
	uhandle uint64 // user_handle: what completion events name
	id      uint32 // irdma cq_id
	cqe     int    // what the caller asked for
	ring    []byte
	shadow  []byte
	ringMR  *MR
	shMR    *MR

	// mu is iwucq->lock: polling, arming, and the posts of every QP whose
	// completions come here (see QP), because the uk layer's rings share
	// state between the producer and this consumer.
	mu       sync.Mutex
	uk       *uk.CQ
	isArmed  bool
	armSol   bool
	skipArm  bool
	skipSol  bool
	events   atomic.Uint64 // completion events received
	polled   uint64
	info     uk.CQPollInfo
	qpsBound int

	// sendQPs are the QPs whose send completions come here, for
	// doorbell retries (see retryDoorbells); guarded by mu.
	sendQPs    []*QP
	emptyPolls uint32
	lastRetry  time.Time
}

// CreateCQ is ibv_create_cq as libirdma 44 does it: the ring of
// get_cq_size(cqe) 32-byte CQEs ((cqe+1)·2, at least 4) in whole pages
// registered with reg_type CQ on the provider's PD; with
// IRDMA_FEATURE_CQ_RESIZE the 64-byte shadow area in a page of its own,
// registered separately (cq_pages 1), else right after the ring; then
// CREATE_CQ with user_cq_buf and user_shadow_area. ch may be nil.
func (c *Context) CreateCQ(cqe int, ch *CompChannel, compVector int) (*CQ, error) {
	lim := c.uctx.Limits
	if cqe < 1 || cqe > lim.MaxCQSize {
		return nil, fmt.Errorf("client: CQ of %d entries (1..%d): %w", cqe, lim.MaxCQSize, syscall.EINVAL)
	}
	size := cqe + 1
	if c.uctx.HWRev > 1 {
		size *= 2 // an extended CQE takes the next slot on GEN_2
	}
	size = max(size, 4) // IRDMA_U_MINCQ_SIZE
	total := roundPage(size * uk.CQESize)
	cqPages := total / pageSize
	resize := c.uctx.FeatureFlags&FeatureCQResize != 0
	if !resize {
		total += uk.ShadowAreaSize
	}
	cq := &CQ{ctx: c, ch: ch, cqe: cqe, uhandle: c.nextHandle()}
	fail := func(err error) (*CQ, error) {
		cq.release()
		return nil, err
	}
	var err error
	if cq.ring, err = c.arena.alloc(total); err != nil {
		return nil, err
	}
	if cq.ringMR, err = c.pd0.regMR(addrOf(cq.ring), uint64(total), AccessLocalWrite, memRegCQ, uint16(cqPages), 0, 0); err != nil {
		return fail(err)
	}
	if resize {
		if cq.shadow, err = c.arena.alloc(uk.ShadowAreaSize); err != nil {
			return fail(err)
		}
		if cq.shMR, err = c.pd0.regMR(addrOf(cq.shadow), uk.ShadowAreaSize, AccessLocalWrite, memRegCQ, 1, 0, 0); err != nil {
			return fail(err)
		}
	} else {
		cq.shadow = cq.ring[cqPages*pageSize : cqPages*pageSize+uk.ShadowAreaSize]
	}
	chFD := int32(-1)
	if ch != nil {
		chFD = ch.fd
	}
	var core, udata wbuf
	core.u64(c.respAddr())
	core.u64(cq.uhandle)
	core.u32(uint32(size))
	core.u32(uint32(compVector))
	core.u32(uint32(chFD))
	core.u32(0)
	udata.u64(addrOf(cq.ring))
	udata.u64(addrOf(cq.shadow))
	n := createCQRespSize + irdmaCreateCQResp
	c.mu.Lock()
	c.cqs[cq.uhandle] = cq // before the command: an event may follow at once
	c.mu.Unlock()
	r, err := c.run(legacyCmd(cmdCreateCQ, core, udata, n), n)
	if err != nil {
		return fail(err)
	}
	cq.handle, cq.id = r.u32(0), r.u32(8)
	if cq.uk, err = uk.NewCQ(uk.CQConfig{ID: cq.id, Ring: cq.ring[:size*uk.CQESize], Shadow: cq.shadow[:uk.ShadowAreaSize]}); err != nil {
		cq.destroyCmd()
		return fail(err)
	}
	return cq, nil
}

// release frees what CreateCQ allocated (registrations and memory).
func (cq *CQ) release() {
	c := cq.ctx
	c.mu.Lock()
	delete(c.cqs, cq.uhandle)
	c.mu.Unlock()
	if cq.ringMR != nil {
		cq.ringMR.Dereg()
	}
	if cq.ring != nil {
		c.arena.free(cq.ring)
	}
	if cq.shMR != nil {
		cq.shMR.Dereg()
		c.arena.free(cq.shadow)
	}
}

func (cq *CQ) destroyCmd() (rbuf, error) {
	var core wbuf
	core.u64(cq.ctx.respAddr())
	core.u32(cq.handle)
	core.u32(0)
	return cq.ctx.run(legacyCmd(cmdDestroyCQ, core, nil, destroyCQRespSize), destroyCQRespSize)
}

// Destroy is ibv_destroy_cq: DESTROY_CQ, then the ring and shadow
// registrations and memory. Destroy the QPs using it first.
func (cq *CQ) Destroy() error {
	cq.mu.Lock()
	bound := cq.qpsBound
	cq.mu.Unlock()
	if bound > 0 {
		return fmt.Errorf("client: CQ %d still has %d QPs: %w", cq.id, bound, syscall.EBUSY)
	}
	r, err := cq.destroyCmd()
	if err != nil {
		return err
	}
	// The daemon reports how many completion events it delivered; every
	// one was consumed here or is still unread in the channel, so unlike
	// libibverbs there is nothing to wait for.
	_ = r.u32(0)
	cq.release()
	return nil
}

// ID is irdma's CQ number; Handle the uverbs handle.
func (cq *CQ) ID() uint32 { return cq.id }

// Handle is the uverbs handle.
func (cq *CQ) Handle() uint32 { return cq.handle }

// Size is the number of CQEs the ring holds (what CREATE_CQ asked for).
func (cq *CQ) Size() int { return int(cq.uk.Size()) }

// Events is the number of completion events received for this CQ.
func (cq *CQ) Events() uint64 { return cq.events.Load() }

// Poll is ibv_poll_cq: up to len(wcs) completions, polled from the ring in
// shared memory with no command (irdma_upoll_cq: uk poll, CQEs of destroyed
// QPs skipped). It returns how many it filled. A poll that finds nothing
// may ring the doorbell again for this CQ's QPs with unfinished sends
// (retryDoorbells; Context.SetDoorbellRetry).
func (cq *CQ) Poll(wcs []WorkCompletion) (int, error) {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	n := 0
	for n < len(wcs) {
		err := cq.uk.PollCmpl(&cq.info)
		if err == nil {
			wcs[n] = makeWC(&cq.info)
			n++
			cq.polled++
			continue
		}
		if errors.Is(err, uk.ErrCQEmpty) {
			if n == 0 {
				cq.retryDoorbells()
			}
			break
		}
		if errors.Is(err, uk.ErrQPDestroyed) {
			continue
		}
		return n, err
	}
	return n, nil
}

// ReqNotify is ibv_req_notify_cq (irdma_uarm_cq): it arms the CQ for the
// next completion (or the next solicited one) through the shadow area and
// the CQ doorbell — no command. A CQ already armed is only re-armed to
// promote a solicited-only arm; otherwise the request is remembered and
// applied when the pending event is consumed.
func (cq *CQ) ReqNotify(solicitedOnly bool) error {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if cq.isArmed {
		if cq.armSol && !solicitedOnly {
			cq.arm(uk.NotifyAny)
		} else {
			cq.skipArm = true
			cq.skipSol = solicitedOnly
		}
		return nil
	}
	n := uk.NotifyAny
	if solicitedOnly {
		n = uk.NotifySolicited
	}
	cq.arm(n)
	return nil
}

// arm is irdma_arm_cq; cq.mu is held.
func (cq *CQ) arm(n uk.Notify) {
	cq.isArmed = true
	cq.armSol = true
	cq.skipArm = false
	cq.skipSol = true
	id := cq.uk.RequestNotification(n)
	cq.ctx.ring(dbCQOffset, id)
}

// cqEvent is irdma_cq_event: an event consumed disarms the CQ, unless an
// arm request came while it was pending.
func (cq *CQ) cqEvent() {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if cq.skipArm {
		cq.arm(uk.NotifyAny)
	} else {
		cq.isArmed = false
	}
}

// WaitEvent waits for the next completion event of this CQ on its
// channel (events of other CQs on the same channel are an error here:
// use CompChannel.GetEvent to serve several CQs).
func (cq *CQ) WaitEvent(timeout time.Duration) error {
	if cq.ch == nil {
		return fmt.Errorf("client: CQ %d has no completion channel: %w", cq.id, syscall.EINVAL)
	}
	got, err := cq.ch.GetEvent(timeout)
	if err != nil {
		return err
	}
	if got != cq {
		return fmt.Errorf("client: event for CQ %d while waiting on CQ %d: %w", got.id, cq.id, syscall.EPROTO)
	}
	return nil
}

// retryDoorbells rings again, at most every Context.DoorbellRetry, for
// each QP of this CQ with send work the device has not completed, while
// polls find nothing. libirdma rings once per post; but the doorbell page
// has one SQ word for the whole context, so when two QPs post back to back
// the second store can replace the first before the device reads it, and
// a QP the device is not already scanning then waits forever (the daemon
// reads the word, not a queue of stores). Doorbells are hints: an extra one
// costs the device one SQ scan. Called with cq.mu held, which also guards
// the SQ state of the QPs in sendQPs.
func (cq *CQ) retryDoorbells() {
	cq.emptyPolls++
	if cq.emptyPolls&63 != 0 || len(cq.sendQPs) == 0 {
		return
	}
	every := time.Duration(cq.ctx.dbRetry.Load())
	if every <= 0 {
		return
	}
	now := time.Now()
	if now.Sub(cq.lastRetry) < every {
		return
	}
	cq.lastRetry = now
	for _, q := range cq.sendQPs {
		if q.uk.SQHead() != q.uk.SQTail() {
			cq.ctx.ringSQ(q.uk.ID())
		}
	}
}

// bind and unbind keep the uk CQ's map from completion context to QP.
func (cq *CQ) bind(ctx uint64, q *QP, send bool) {
	cq.mu.Lock()
	cq.uk.BindQP(ctx, q.uk)
	cq.qpsBound++
	if send {
		cq.sendQPs = append(cq.sendQPs, q)
	}
	cq.mu.Unlock()
}

func (cq *CQ) unbind(ctx uint64, q *QP) {
	cq.mu.Lock()
	// irdma_clean_cqes: unpolled CQEs of the QP are skipped from now on.
	cq.uk.Clean(ctx)
	cq.uk.UnbindQP(ctx)
	cq.qpsBound--
	for i, x := range cq.sendQPs {
		if x == q {
			cq.sendQPs = append(cq.sendQPs[:i], cq.sendQPs[i+1:]...)
			break
		}
	}
	cq.mu.Unlock()
}
