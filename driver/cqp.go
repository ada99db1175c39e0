package driver

import (
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/irdma-emu/irdma-emu/emu/regs"
)

// cqpCompl is irdma_ccq_cqe_info / the request's compl_info.
type cqpCompl struct {
	OpRetVal uint32
	Major    uint16
	Minor    uint16
	Error    bool
	Opcode   uint8
}

// cqpRequest is irdma_cqp_request: one posted WQE a caller waits for. The
// WQE index maps back to it (scratch_array[wqe_idx]).
type cqpRequest struct {
	done   chan struct{}
	compl  cqpCompl
	opcode uint8
}

// cqp is the control QP (irdma_sc_cqp + irdma_cqp): a 2048-entry ring of
// 64-byte WQEs in host memory, its host context, and the UPDATE_PE_SDS
// overflow buffer.
type cqp struct {
	d       *Device
	ring    dmaMem
	sdbuf   dmaMem
	ctxPA   uint64
	ctxVal  uint64 // CQP completion context: echoed in CCQE qw1
	size    uint32
	mu      sync.Mutex // dev->cqp_lock: head, tail, polarity, scratch
	head    uint32
	tail    uint32
	pol     uint8
	scratch [cqpSQSize]*cqpRequest
	posted  uint64 // WQEs posted (for tests and diagnostics)
}

// cqpCtxMagic is the value this driver puts in the CQP host context's
// completion-context qword (irdma puts its irdma_sc_cqp pointer there).
const cqpCtxMagic uint64 = 0x49524d4143515021 // "IRMACQP!"

func (c *cqp) used() uint32 { return (c.head + c.size - c.tail) % c.size }

// post is irdma_sc_cqp_get_next_send_wqe_idx + the builder + irdma_sc_cqp_post_sq:
// take the next slot (toggling the polarity when handing out slot 0), let
// build fill it for that index, store qw0–2 and qw4–7, then qw3 with the
// valid bit, then ring CQPDB with the new head. A full ring (used ==
// size − 1, IRDMA_RING_FULL_ERR) waits for completions, up to the
// command timeout.
func (c *cqp) post(req *cqpRequest, build func(idx uint32) (cqpWQE, error)) (uint32, error) {
	d := c.d
	deadline := d.clock.Now() + d.cqpTimeout
	interval := pollIntervalMin
	for {
		c.mu.Lock()
		if c.used() < c.size-1 {
			break
		}
		c.mu.Unlock()
		if d.ccqReady() {
			d.ccq.process()
		}
		if d.clock.Now() >= deadline {
			return 0, syscall.ETIMEDOUT
		}
		time.Sleep(interval)
		interval = min(2*interval, pollIntervalMax)
	}
	defer c.mu.Unlock()
	idx := c.head
	pol := c.pol
	if idx == 0 {
		pol ^= 1
	}
	w, err := build(idx)
	if err != nil {
		return 0, err
	}
	c.pol = pol
	c.head = (c.head + 1) % c.size
	if req != nil {
		req.opcode = uint8(w[3]>>cqpHdrOpcodeShift) & 0x3f
	}
	c.scratch[idx] = req
	base := c.ring.at(int(idx) * cqpWQESize)
	for i, q := range w {
		if i == 3 {
			continue
		}
		d.store64(base+8*hostIOVA(i), q)
	}
	// Header last, after the body (dma_wmb in every irdma builder).
	d.store64(base+24, w[3]|uint64(pol)<<63)
	c.posted++
	d.trace("cqp post", idx, w)
	d.hw.Write32(d.regs.CQPDB, c.head)
	return idx, nil
}

// readTail is irdma_get_cqp_reg_info: CQPTAIL's WQTAIL and CQP_OP_ERR.
func (c *cqp) readTail() (tail uint32, opErr bool) {
	v := c.d.hw.Read32(c.d.regs.CQPTAIL)
	return v & regs.CQPTAIL_WQTAIL, v&regs.CQPTAIL_CQP_OP_ERR != 0
}

// execPoll posts one WQE and waits for it by register polling
// (ctrl.c:irdma_cqp_poll_registers): success when WQTAIL moves from the
// value read before the doorbell, -EIO with CQPERRCODES when CQP_OP_ERR is
// set, -ETIMEDOUT on the clock. Used before the CCQ exists, for the CCQ's
// own destroy and for the SD updates after it is gone.
func (c *cqp) execPoll(build func(idx uint32) (cqpWQE, error)) error {
	d := c.d
	before, _ := c.readTail()
	if _, err := c.post(nil, build); err != nil {
		return err
	}
	deadline := d.clock.Now() + d.cqpTimeout
	interval := pollIntervalMin
	for {
		tail, opErr := c.readTail()
		if opErr {
			codes := d.hw.Read32(d.regs.CQPERRCODES)
			c.advanceTail()
			return &CQPError{Major: uint16(codes >> 16), Minor: uint16(codes)}
		}
		if tail != before {
			c.advanceTail()
			return nil
		}
		if d.clock.Now() >= deadline {
			return syscall.ETIMEDOUT
		}
		time.Sleep(interval)
		interval = min(2*interval, pollIntervalMax)
	}
}

func (c *cqp) advanceTail() {
	c.mu.Lock()
	if c.used() > 0 {
		c.scratch[c.tail] = nil
		c.tail = (c.tail + 1) % c.size
	}
	c.mu.Unlock()
}

// exec posts one WQE and waits for its CCQE (irdma_handle_cqp_op →
// irdma_wait_event): it polls the CCQ itself between waits, as
// irdma_wait_event calls irdma_cqp_ce_handler, so a completion is seen
// even without an interrupt. An error completion is -EIO (wrapped in a
// *CQPError carrying the codes); no completion within the timeout is
// -ETIMEDOUT.
func (c *cqp) exec(build func(idx uint32) (cqpWQE, error)) (cqpCompl, error) {
	d := c.d
	if !d.ccqReady() {
		return cqpCompl{}, c.execPoll(build)
	}
	req := &cqpRequest{done: make(chan struct{})}
	if _, err := c.post(req, build); err != nil {
		return cqpCompl{}, err
	}
	return c.wait(req)
}

func (c *cqp) wait(req *cqpRequest) (cqpCompl, error) {
	d := c.d
	deadline := d.clock.Now() + d.cqpTimeout
	interval := pollIntervalMin
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		d.ccq.process()
		select {
		case <-req.done:
			if req.compl.Error {
				return req.compl, &CQPError{Major: req.compl.Major, Minor: req.compl.Minor, Opcode: req.compl.Opcode}
			}
			return req.compl, nil
		default:
		}
		if d.clock.Now() >= deadline {
			return cqpCompl{}, syscall.ETIMEDOUT
		}
		if timer == nil {
			timer = time.NewTimer(interval)
		} else {
			timer.Reset(interval)
		}
		select {
		case <-req.done:
		case <-timer.C:
		}
		interval = min(2*interval, pollIntervalMax)
	}
}

// CQPError is a CQP command that completed with an error. It unwraps to
// syscall.EIO, the errno irdma_sc_poll_for_cqp_op_done / irdma_handle_cqp_op
// return for an error CCQE (or CQP_OP_ERR when register polling).
type CQPError struct {
	Major, Minor uint16
	Opcode       uint8
}

func (e *CQPError) Error() string {
	return fmt.Sprintf("irdma: CQP op %#x failed: major %#x minor %#x", e.Opcode, e.Major, e.Minor)
}

// Unwrap returns syscall.EIO.
func (e *CQPError) Unwrap() error { return syscall.EIO }

// ccq is the CQP's completion queue (cq_id 0, 2050 32-byte CCQEs).
type ccq struct {
	d      *Device
	ring   dmaMem
	shadow dmaMem // 64 bytes: +0 head, +32 arm word
	size   uint32
	ctx    uint64 // CREATE_CQ qw1 value
	mu     sync.Mutex
	head   uint32
	pol    uint8 // starts 1 (irdma_sc_ccq_init)
	ready  bool
}

// process is irdma_cqp_ce_handler over irdma_sc_ccq_get_cqe_info: consume
// every valid CCQE, hand its codes to the request its WQE index names,
// move the CCQ head (polarity flips on wrap), publish it in shadow qword 0,
// advance the CQP tail, and re-arm the CCQ if anything was consumed.
func (q *ccq) process() int {
	d := q.d
	q.mu.Lock()
	n := 0
	for {
		base := q.ring.at(int(q.head) * cqeSize)
		qw3 := d.load64(base + 24)
		if uint8(qw3>>63) != q.pol {
			break
		}
		ctx := d.load64(base + 8)
		ret := d.load64(base + 16)
		idx := uint32(qw3>>32) & 0x7fff // IRDMA_CQ_WQEIDX [46:32]
		compl := cqpCompl{
			OpRetVal: uint32(ret),
			Minor:    uint16(qw3),
			Error:    qw3&(1<<55) != 0,
		}
		if compl.Error {
			compl.Major = uint16(qw3 >> 16)
		}
		q.head++
		if q.head == q.size {
			q.head = 0
			q.pol ^= 1
		}
		d.store64(q.shadow.at(0), uint64(q.head))
		n++
		if ctx != d.cqp.ctxVal || idx >= d.cqp.size {
			// irdma would dereference both (ctrl.c:irdma_sc_ccq_get_cqe_info;
			// docs/hw-controlpath.md "CQP completion"); we log and drop.
			d.log.Error("CCQE with bad context or WQE index", u64Field("ctx", ctx), u64Field("wqe_idx", uint64(idx)))
			continue
		}
		c := d.cqp
		c.mu.Lock()
		req := c.scratch[idx]
		c.scratch[idx] = nil
		compl.Opcode = uint8(d.load64(c.ring.at(int(idx)*cqpWQESize+24))>>cqpHdrOpcodeShift) & 0x3f
		if c.used() > 0 {
			c.tail = (c.tail + 1) % c.size
		}
		c.mu.Unlock()
		if compl.Error {
			d.cqpErrs[compl.Opcode&0x3f].Add(1)
			d.cqpLastErr[compl.Opcode&0x3f].Store(uint32(compl.Major)<<16 | uint32(compl.Minor))
		}
		if compl.Error && !nonCritCQPErr(compl.Major, compl.Minor) {
			d.log.Warn("CQP error completion", u64Field("opcode", uint64(compl.Opcode)),
				u64Field("major", uint64(compl.Major)), u64Field("minor", uint64(compl.Minor)))
		}
		if req != nil {
			req.compl = compl
			close(req.done)
		}
	}
	if n > 0 && q.ready {
		q.armLocked()
	}
	q.mu.Unlock()
	return n
}

// armLocked is irdma_sc_ccq_arm: bump ARM_SEQ_NUM [17:16] in the shadow
// arm word (+32), keep SW_CQ_SELECT and ARM_NEXT_SE, set ARM_NEXT, then
// write the CQ id (0) to CQARM.
func (q *ccq) armLocked() {
	d := q.d
	a := q.shadow.at(32)
	t := d.load64(a)
	seq := (t>>16)&3 + 1
	v := (seq&3)<<16 | t&0x3fff | t&(1<<15) | 1<<14
	d.store64(a, v)
	d.hw.Write32(d.regs.CQARM, 0)
}

// nonCritCQPErr is utils.c:irdma_noncrit_err_list (newest list;
// docs/hw-controlpath.md "CQP error codes"): errors the driver only logs at
// debug level.
func nonCritCQPErr(major, minor uint16) bool {
	if major != 0xffff {
		return false
	}
	switch minor {
	case 0x8002, 0x8006, 0x8007, 0x8009, 0x800a, 0x0200:
		return true
	}
	return false
}
