package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/irdma-emu/irdma-emu/client"
	"github.com/irdma-emu/irdma-emu/internal/daemon"
)

// perfQP is one QP of the test with its own CQ and buffer. The buffer is
// [target | source | atomic result slots]: the target is what the peer
// writes, reads and atomically updates (or where receives land), the
// source what this side sends or writes, or where its READs land.
type perfQP struct {
	qp     *client.QP
	cq     *client.CQ
	buf    []byte
	mr     *client.MR
	psn    uint32
	region int
	remote qpInfo
	recvs  int // receives posted and not yet completed
}

func (q *perfQP) target(n int) []byte { return q.buf[:n] }
func (q *perfQP) source(n int) []byte { return q.buf[q.region : q.region+n] }
func (q *perfQP) slot(i int) int      { return 2*q.region + 8*i }

type perfSession struct {
	o    *perfOptions
	ctx  *client.Context
	w    *perfWire
	pd   *client.PD
	qps  []*perfQP
	gidx int
	gid  client.GID
	mtu  client.MTU
	ctl  *daemon.Client
	rows []perfRow
}

// sideResult is what one side measured for one size.
type sideResult struct {
	Bytes     uint64  `json:"bytes"`
	Msgs      uint64  `json:"msgs"`
	ElapsedNs int64   `json:"elapsed_ns"`
	PeakBps   float64 `json:"peak_bps"`
	Check     string  `json:"check,omitempty"`
}

func (s *perfSession) isServer() bool { return s.o.server == "" }

func (s *perfSession) close() {
	for _, q := range s.qps {
		if q.qp != nil {
			q.qp.Destroy()
		}
		if q.cq != nil {
			q.cq.Destroy()
		}
		if q.mr != nil {
			q.mr.Dereg()
		}
	}
	if s.pd != nil {
		s.pd.Dealloc()
	}
	if s.ctl != nil {
		s.ctl.Close()
	}
}

func (s *perfSession) run() error {
	o := s.o
	if o.Verb == "atomic" && !s.ctx.AtomicsSupported() {
		return errors.New("the device does not offer atomics (IRDMA_FEATURE_ATOMIC_OPS): start the daemon with atomics enabled")
	}
	if err := s.setup(); err != nil {
		return err
	}
	if !o.noModel {
		if c, err := daemon.Dial(o.controlPath(s.ctx)); err == nil {
			s.ctl = c
		} else if !s.isServer() {
			fmt.Fprintf(o.stderr, " (no modelled E810 figures: %v)\n", err)
		}
	}
	s.printHeader()
	if err := s.exchange(); err != nil {
		return err
	}
	s.printTableHead()
	for _, size := range o.Sizes {
		var err error
		if s.isServer() {
			err = s.serveSize()
		} else {
			err = s.runSize(size)
		}
		if err != nil {
			return err
		}
	}
	if !s.isServer() {
		if err := s.w.send(perfMsg{Op: "bye"}); err != nil {
			return err
		}
	} else if _, err := s.w.recv("bye"); err != nil {
		return err
	}
	fmt.Fprint(o.stdout, resultLine)
	s.printModel()
	for _, r := range s.rows {
		if r.check != "" {
			return fmt.Errorf("data check failed: %s", r.check)
		}
	}
	return nil
}

func (s *perfSession) setup() error {
	o := s.o
	var err error
	if s.pd, err = s.ctx.AllocPD(); err != nil {
		return fmt.Errorf("Couldn't allocate PD: %v", err)
	}
	port := uint8(o.ibPort)
	pa, err := s.ctx.QueryPort(port)
	if err != nil {
		return fmt.Errorf("Couldn't query port %d: %v", o.ibPort, err)
	}
	s.mtu = pa.ActiveMTU
	if o.MTU != 0 {
		if m := client.MTUFromBytes(o.MTU); m <= pa.ActiveMTU || pa.ActiveMTU == 0 {
			s.mtu = m
		}
	}
	if s.gidx, s.gid, err = pickGID(s.ctx, port, o.gidx); err != nil {
		return err
	}
	maxSize := 0
	for _, sz := range o.Sizes {
		maxSize = max(maxSize, sz)
	}
	access := client.AccessLocalWrite | client.AccessRemoteWrite | client.AccessRemoteRead
	if o.Verb == "atomic" {
		access |= client.AccessRemoteAtomic
	}
	sendWR := max(o.TxDepth, 2)
	recvWR := 1
	if o.Verb == "send" {
		recvWR = o.RxDepth
	}
	for i := 0; i < o.QPs; i++ {
		q := &perfQP{psn: rand.Uint32() & 0xffffff, region: roundUp8(max(maxSize, 8))}
		s.qps = append(s.qps, q)
		if q.buf, err = s.ctx.AllocBuffer(2*q.region + 8*sendWR); err != nil {
			return fmt.Errorf("Couldn't allocate %d bytes: %v", 2*q.region+8*sendWR, err)
		}
		if q.mr, err = s.pd.RegMR(q.buf, access); err != nil {
			return fmt.Errorf("Couldn't register MR: %v", err)
		}
		if q.cq, err = s.ctx.CreateCQ(sendWR+recvWR+1, nil, 0); err != nil {
			return fmt.Errorf("Couldn't create CQ: %v", err)
		}
		q.qp, err = s.pd.CreateQP(client.QPInitAttr{SendCQ: q.cq, RecvCQ: q.cq, Type: client.QPTypeRC,
			Cap: client.QPCapabilities{MaxSendWR: uint32(sendWR), MaxRecvWR: uint32(recvWR), MaxSendSGE: 1, MaxRecvSGE: 1,
				MaxInlineData: uint32(o.Inline)}})
		if err != nil {
			return fmt.Errorf("Couldn't create QP: %v", err)
		}
		err = q.qp.Modify(&client.QPAttr{State: client.QPSInit, PortNum: port, AccessFlags: access &^ client.AccessLocalWrite},
			client.AttrState|client.AttrPKeyIndex|client.AttrPort|client.AttrAccessFlags)
		if err != nil {
			return fmt.Errorf("Failed to modify QP to INIT: %v", err)
		}
	}
	return nil
}

func roundUp8(n int) int { return (n + 7) &^ 7 }

func (s *perfSession) infos() []qpInfo {
	var l []qpInfo
	for _, q := range s.qps {
		l = append(l, qpInfo{QPN: q.qp.QPN(), PSN: q.psn, GID: s.gid.String(), VA: q.mr.Addr, RKey: q.mr.RKey, Len: uint64(q.region)})
	}
	return l
}

// exchange swaps the QPs' addresses (client first) and connects them.
func (s *perfSession) exchange() error {
	var rem []qpInfo
	if !s.isServer() {
		if err := s.w.send(perfMsg{Op: "qps", QPs: s.infos()}); err != nil {
			return err
		}
		m, err := s.w.recv("qps")
		if err != nil {
			return err
		}
		rem = m.QPs
	} else {
		m, err := s.w.recv("qps")
		if err != nil {
			return err
		}
		rem = m.QPs
		if err := s.w.send(perfMsg{Op: "qps", QPs: s.infos()}); err != nil {
			return err
		}
	}
	if len(rem) != len(s.qps) {
		return fmt.Errorf("peer has %d QPs, this side %d", len(rem), len(s.qps))
	}
	for i, q := range s.qps {
		q.remote = rem[i]
		if uint64(q.region) > q.remote.Len {
			return fmt.Errorf("peer buffer of %d bytes for %d", q.remote.Len, q.region)
		}
		s.printAddr("local", s.infos()[i])
		s.printAddr("remote", rem[i])
		if err := s.connect(q); err != nil {
			return err
		}
	}
	return nil
}

func (s *perfSession) connect(q *perfQP) error {
	o := s.o
	dgid, err := client.ParseGID(q.remote.GID)
	if err != nil {
		return err
	}
	a := &client.QPAttr{State: client.QPSRTR, PathMTU: s.mtu, DestQPN: q.remote.QPN, RQPSN: q.remote.PSN,
		MaxDestRdAtomic: uint8(o.Outs), MinRNRTimer: 12,
		AH: client.AHAttr{IsGlobal: true, DGID: dgid, SGIDIndex: uint8(s.gidx), HopLimit: 0xff, PortNum: uint8(o.ibPort)}}
	if err := q.qp.Modify(a, client.AttrState|client.AttrAV|client.AttrPathMTU|client.AttrDestQPN|client.AttrRQPSN|
		client.AttrMaxDestRdAtomic|client.AttrMinRNRTimer); err != nil {
		return fmt.Errorf("Failed to modify QP %#x to RTR: %v", q.qp.QPN(), err)
	}
	a.State, a.Timeout, a.RetryCnt, a.RNRRetry, a.SQPSN, a.MaxRdAtomic = client.QPSRTS, uint8(o.Timeout), 7, 7, q.psn, uint8(o.Outs)
	if err := q.qp.Modify(a, client.AttrState|client.AttrTimeout|client.AttrRetryCnt|client.AttrRNRRetry|
		client.AttrSQPSN|client.AttrMaxQPRdAtomic); err != nil {
		return fmt.Errorf("Failed to modify QP %#x to RTS: %v", q.qp.QPN(), err)
	}
	return nil
}

// pattern fills b with the bytes side ("c" or "s") sends at this size.
func pattern(b []byte, seed uint64, size int, side byte) {
	r := rand.New(rand.NewPCG(seed^uint64(size)*0x9e3779b97f4a7c15, uint64(side)))
	i := 0
	for ; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], r.Uint64())
	}
	for v := r.Uint64(); i < len(b); i++ {
		b[i] = byte(v)
		v >>= 8
	}
}

func sideByte(server bool) byte {
	if server {
		return 's'
	}
	return 'c'
}

// roles of one side for the current test.
func (s *perfSession) sends() bool { return !s.isServer() || s.o.Bidir || (s.o.Lat && s.pingpongLat()) }
func (s *perfSession) receives() bool {
	return s.o.Verb == "send" && (s.isServer() || s.o.Bidir || s.o.Lat)
}

// pingpongLat: latency tests where both sides act (write and send).
func (s *perfSession) pingpongLat() bool { return s.o.Verb == "write" || s.o.Verb == "send" }

// prepare readies this side for a size: patterns, cleared targets, posted
// receives, atomic counters.
func (s *perfSession) prepare(size int) error {
	o := s.o
	for _, q := range s.qps {
		clear(q.target(size))
		pattern(q.source(size), o.Seed, size, sideByte(s.isServer()))
		if o.Verb == "read" {
			// The peer reads this side's target.
			pattern(q.target(size), o.Seed, size, sideByte(s.isServer()))
		}
		if o.Verb == "atomic" {
			binary.LittleEndian.PutUint64(q.buf, 0)
		}
		if s.receives() {
			if err := s.postRecvs(q, size, o.RxDepth-q.recvs); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *perfSession) postRecvs(q *perfQP, size, n int) error {
	if n <= 0 {
		return nil
	}
	wrs := make([]client.RecvWR, n)
	for i := range wrs {
		wrs[i] = client.RecvWR{WrID: recvWRID, SGList: []client.SGE{q.mr.SGE(0, q.region)}}
	}
	k, err := q.qp.PostRecv(wrs)
	q.recvs += k
	if err != nil {
		return fmt.Errorf("Couldn't post receive: %v", err)
	}
	return nil
}

const recvWRID = 1 << 63

// runSize is the client's side of one size.
func (s *perfSession) runSize(size int) error {
	if err := s.prepare(size); err != nil {
		return err
	}
	if err := s.w.send(perfMsg{Op: "size", Size: size}); err != nil {
		return err
	}
	if _, err := s.w.recv("ready"); err != nil {
		return err
	}
	before := s.snapshot()
	res, lat, err := s.measure(size)
	if err != nil {
		return err
	}
	after := s.snapshot()
	if s.o.Check && s.o.Verb != "atomic" {
		res.Check = s.checkData(size)
	}
	local := diffStages(before, after)
	if err := s.w.send(perfMsg{Op: "done", Result: &res, Stages: local}); err != nil {
		return err
	}
	m, err := s.w.recv("result")
	if err != nil {
		return err
	}
	s.addRow(size, res, m.Result, lat, local, m.Stages)
	return nil
}

// serveSize is the server's side of one size.
func (s *perfSession) serveSize() error {
	m, err := s.w.recv("size")
	if err != nil {
		return err
	}
	size := m.Size
	if size < 1 || size > s.qps[0].region {
		return fmt.Errorf("size %d from the client", size)
	}
	if err := s.prepare(size); err != nil {
		return err
	}
	before := s.snapshot()
	if err := s.w.send(perfMsg{Op: "ready"}); err != nil {
		return err
	}
	var res sideResult
	if s.o.Bidir || s.receives() || (s.o.Lat && s.pingpongLat()) {
		// The server's own iteration times in a latency test are not
		// latencies (it answers); the client reports them.
		if res, _, err = s.measure(size); err != nil {
			return err
		}
	}
	done, err := s.w.recv("done")
	if err != nil {
		return err
	}
	after := s.snapshot()
	if s.o.Check {
		res.Check = s.checkData(size)
	}
	stages := diffStages(before, after)
	if err := s.w.send(perfMsg{Op: "result", Result: &res, Stages: stages}); err != nil {
		return err
	}
	cres := sideResult{}
	if done.Result != nil {
		cres = *done.Result
	}
	s.addRow(size, cres, &res, nil, stages, done.Stages)
	return nil
}

// checkData compares what landed in this side's buffers with what the peer
// sent (every byte), and atomic counters with the operations done.
func (s *perfSession) checkData(size int) string {
	o := s.o
	peer := sideByte(!s.isServer())
	want := make([]byte, size)
	pattern(want, o.Seed, size, peer)
	for i, q := range s.qps {
		var got []byte
		switch {
		case o.Verb == "atomic":
			if s.isServer() {
				if v := binary.LittleEndian.Uint64(q.buf); v != uint64(o.Iters) {
					return fmt.Sprintf("QP %d: counter %d after %d atomics", i, v, o.Iters)
				}
			}
			continue
		case o.Verb == "read":
			if s.isServer() && !o.Bidir {
				continue
			}
			got = q.source(size) // READ sinks
		case o.Verb == "write" && o.Lat:
			// The last byte is the iteration marker.
			got, want = q.target(size)[:size-1], want[:size-1]
		default:
			if !s.isServer() && !o.Bidir && !o.Lat {
				continue // the client's targets were not written
			}
			got = q.target(size)
		}
		if !bytes.Equal(got, want) {
			n := 0
			for j := range got {
				if got[j] != want[j] {
					n++
				}
			}
			return fmt.Sprintf("QP %d size %d: %d of %d bytes differ", i, size, n, len(got))
		}
	}
	return ""
}

// measure runs this side's part of the test on every QP in parallel.
func (s *perfSession) measure(size int) (sideResult, []time.Duration, error) {
	type out struct {
		r     qpRun
		lat   []time.Duration
		err   error
		start time.Time
		end   time.Time
	}
	outs := make([]out, len(s.qps))
	var wg sync.WaitGroup
	for i, q := range s.qps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := &outs[i]
			if s.o.Lat {
				o.lat, o.start, o.end, o.err = s.latLoop(q, size)
			} else {
				o.r, o.err = s.bwLoop(q, size)
				o.start, o.end = o.r.start, o.r.end
			}
		}()
	}
	wg.Wait()
	var res sideResult
	var lat []time.Duration
	var first, last time.Time
	for i := range outs {
		o := &outs[i]
		if o.err != nil {
			return res, nil, fmt.Errorf("QP %#x: %w", s.qps[i].qp.QPN(), o.err)
		}
		if first.IsZero() || o.start.Before(first) {
			first = o.start
		}
		if o.end.After(last) {
			last = o.end
		}
		res.Bytes += o.r.bytes
		res.Msgs += o.r.msgs
		res.PeakBps += o.r.peakBps
		lat = append(lat, o.lat...)
	}
	res.ElapsedNs = int64(last.Sub(first))
	return res, lat, nil
}

// qpRun is one QP's bandwidth run.
type qpRun struct {
	bytes, msgs uint64
	start, end  time.Time
	peakBps     float64
}

// wrFor builds the work request of operation i of this side.
func (s *perfSession) wrFor(q *perfQP, size, i int, signaled bool) client.SendWR {
	o := s.o
	w := client.SendWR{WrID: uint64(i)}
	if signaled {
		w.Flags = client.SendSignaled
	}
	if size <= o.Inline && (o.Verb == "write" || o.Verb == "send") {
		w.Flags |= client.SendInline
	}
	switch o.Verb {
	case "write":
		w.Opcode, w.SGList = client.WRRDMAWrite, []client.SGE{q.mr.SGE(q.region, size)}
		w.RemoteAddr, w.RKey = q.remote.VA, q.remote.RKey
	case "read":
		w.Opcode, w.SGList = client.WRRDMARead, []client.SGE{q.mr.SGE(q.region, size)}
		w.RemoteAddr, w.RKey = q.remote.VA, q.remote.RKey
	case "send":
		w.Opcode, w.SGList = client.WRSend, []client.SGE{q.mr.SGE(q.region, size)}
	case "atomic":
		w.SGList = []client.SGE{q.mr.SGE(q.slot(i%max(o.TxDepth, 2)), 8)}
		w.RemoteAddr, w.RKey = q.remote.VA, q.remote.RKey
		if o.Atomic == "CMP_AND_SWAP" {
			// In-order execution makes the chain i → i+1 always succeed.
			w.Opcode, w.CompareAdd, w.Swap = client.WRAtomicCmpAndSwp, uint64(i), uint64(i+1)
		} else {
			w.Opcode, w.CompareAdd = client.WRAtomicFetchAndAdd, 1
		}
	}
	return w
}

// bwLoop is perftest's run_iter_bw for one QP: keep up to TX depth
// operations outstanding, request a completion every CQ-moderation
// operations, and (send) keep the receive queue full.
func (s *perfSession) bwLoop(q *perfQP, size int) (qpRun, error) {
	o := s.o
	var r qpRun
	doSend := s.sends()
	doRecv := s.receives()
	iters := o.Iters
	depth := o.TxDepth
	mod := o.CQMod
	scnt, ccnt, rcnt := 0, 0, 0
	if !doSend {
		scnt, ccnt = iters, iters
	}
	if !doRecv {
		rcnt = iters
	}
	wcs := make([]client.WorkCompletion, 64)
	wrs := make([]client.SendWR, 0, depth)
	lastBatch := time.Time{}
	r.start = time.Now()
	for spins := 0; ccnt < iters || rcnt < iters; {
		if doSend && scnt < iters && scnt-ccnt < depth {
			wrs = wrs[:0]
			for scnt < iters && scnt-ccnt < depth && len(wrs) < cap(wrs) {
				sig := (scnt+1)%mod == 0 || scnt == iters-1
				wrs = append(wrs, s.wrFor(q, size, scnt, sig))
				scnt++
			}
			if n, err := q.qp.PostSend(wrs); err != nil {
				return r, fmt.Errorf("Couldn't post send (%d of %d): %v", n, len(wrs), err)
			}
			if lastBatch.IsZero() {
				lastBatch = time.Now()
				r.start = lastBatch
			}
		}
		n, err := q.cq.Poll(wcs)
		if err != nil {
			return r, fmt.Errorf("poll CQ failed: %v", err)
		}
		if n == 0 {
			pollPause(spins)
			spins++
			continue
		}
		spins = 0
		for i := range wcs[:n] {
			w := &wcs[i]
			if err := w.Err(); err != nil {
				return r, fmt.Errorf("Completion with error: %v", err)
			}
			if w.WrID&recvWRID != 0 {
				rcnt++
				q.recvs--
				if q.recvs < o.RxDepth/2 && rcnt+q.recvs < iters {
					if err := s.postRecvs(q, size, o.RxDepth-q.recvs); err != nil {
						return r, err
					}
				}
				continue
			}
			idx := int(w.WrID)
			if o.Check && o.Verb == "atomic" {
				slot := q.slot(idx % max(o.TxDepth, 2))
				if v := binary.LittleEndian.Uint64(q.buf[slot:]); v != uint64(idx) {
					return r, fmt.Errorf("data check failed: atomic %d returned %d, want %d", idx, v, idx)
				}
			}
			now := time.Now()
			batch := idx + 1 - ccnt
			if dt := now.Sub(lastBatch); dt > 0 && batch == mod {
				r.peakBps = max(r.peakBps, float64(batch*size)/dt.Seconds())
			}
			lastBatch = now
			ccnt = idx + 1
		}
	}
	r.end = time.Now()
	if doSend {
		r.msgs = uint64(iters)
		r.bytes = uint64(iters) * uint64(size)
	} else {
		r.msgs = uint64(rcnt)
		r.bytes = uint64(rcnt) * uint64(size)
	}
	if r.peakBps == 0 && r.end.After(r.start) {
		r.peakBps = float64(r.bytes) / r.end.Sub(r.start).Seconds()
	}
	return r, nil
}

// spinByte waits until the byte at b[i] equals v. It loads the aligned
// 32-bit word holding it atomically: the peer's device writes the buffer
// from another process. While it waits it rings q's doorbell again now and
// then, as CQ polls do (client.CQ.Poll), since nothing polls q's CQ here.
func spinByte(q *perfQP, b []byte, i int, v byte, deadline time.Time) error {
	base := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	addr := base + uintptr(i)
	word := addr &^ 3
	if word < base || word+4 > base+uintptr(len(b)+4) {
		return errors.New("bad marker position")
	}
	p := (*uint32)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(b)), int(word-base)))
	shift := 8 * (addr - word)
	for spins := 0; ; spins++ {
		if byte(atomic.LoadUint32(p)>>shift) == v {
			return nil
		}
		pollPause(spins)
		if spins&0xfff == 0xfff {
			if time.Now().After(deadline) {
				return errors.New("timed out waiting for the peer's write")
			}
			q.qp.RingDoorbell()
		}
	}
}

// pollOne waits for one completion of q's CQ.
func pollOne(q *perfQP, deadline time.Time) (client.WorkCompletion, error) {
	var wc [1]client.WorkCompletion
	if _, err := waitCQ(q.cq, wc[:], deadline, "a completion"); err != nil {
		return wc[0], err
	}
	return wc[0], wc[0].Err()
}

// latLoop is the ping-pong of ib_write_lat / ib_send_lat, or the
// one-at-a-time operations of ib_read_lat / ib_atomic_lat, for one QP.
// The client times each iteration.
func (s *perfSession) latLoop(q *perfQP, size int) ([]time.Duration, time.Time, time.Time, error) {
	o := s.o
	client_ := !s.isServer()
	lat := make([]time.Duration, 0, o.Iters)
	deadline := time.Now().Add(10 * time.Minute)
	if o.timeout > 0 {
		deadline = time.Now().Add(o.timeout)
	}
	start := time.Now()
	src := q.source(size)
	pending := 0 // the one signaled send not yet completed
	retire := func(block bool) error {
		for pending > 0 {
			var wc [4]client.WorkCompletion
			var n int
			var err error
			if block {
				n, err = waitCQ(q.cq, wc[:], time.Time{}, "")
			} else {
				n, err = q.cq.Poll(wc[:])
			}
			if err != nil {
				return err
			}
			for i := range wc[:n] {
				if err := wc[i].Err(); err != nil {
					return err
				}
				if wc[i].WrID&recvWRID != 0 {
					return errors.New("receive completion while retiring sends")
				}
				pending--
			}
			if n == 0 {
				return nil // not blocking: nothing more yet
			}
		}
		return nil
	}
	waitRecv := func() error {
		for {
			var wc [4]client.WorkCompletion
			n, err := waitCQ(q.cq, wc[:], deadline, "a receive")
			if err != nil {
				return err
			}
			got := false
			for i := range wc[:n] {
				if err := wc[i].Err(); err != nil {
					return err
				}
				if wc[i].WrID&recvWRID != 0 {
					got = true
					q.recvs--
				} else {
					pending--
				}
			}
			if got {
				if q.recvs < o.RxDepth/2 {
					return s.postRecvs(q, size, o.RxDepth-q.recvs)
				}
				return nil
			}
		}
	}
	post := func(i int) error {
		if err := retire(true); err != nil {
			return err
		}
		_, err := q.qp.PostSend([]client.SendWR{s.wrFor(q, size, i, true)})
		pending++
		return err
	}
	for k := 1; k <= o.Iters; k++ {
		marker := byte(k)
		t0 := time.Now()
		switch o.Verb {
		case "write":
			if client_ {
				src[size-1] = marker
				if err := post(k); err != nil {
					return nil, start, time.Now(), err
				}
				if err := spinByte(q, q.target(size), size-1, marker, deadline); err != nil {
					return nil, start, time.Now(), err
				}
			} else {
				if err := spinByte(q, q.target(size), size-1, marker, deadline); err != nil {
					return nil, start, time.Now(), err
				}
				src[size-1] = marker
				if err := post(k); err != nil {
					return nil, start, time.Now(), err
				}
			}
		case "send":
			if client_ {
				if err := post(k); err != nil {
					return nil, start, time.Now(), err
				}
				if err := waitRecv(); err != nil {
					return nil, start, time.Now(), err
				}
			} else {
				if err := waitRecv(); err != nil {
					return nil, start, time.Now(), err
				}
				if err := post(k); err != nil {
					return nil, start, time.Now(), err
				}
			}
		default: // read, atomic: the client alone, one operation at a time
			i := k - 1
			if _, err := q.qp.PostSend([]client.SendWR{s.wrFor(q, size, i, true)}); err != nil {
				return nil, start, time.Now(), err
			}
			if _, err := pollOne(q, deadline); err != nil {
				return nil, start, time.Now(), err
			}
			if o.Check && o.Verb == "atomic" {
				slot := q.slot(i % max(o.TxDepth, 2))
				if v := binary.LittleEndian.Uint64(q.buf[slot:]); v != uint64(i) {
					return nil, start, time.Now(), fmt.Errorf("data check failed: atomic %d returned %d", i, v)
				}
			}
		}
		lat = append(lat, time.Since(t0))
	}
	if err := retire(true); err != nil {
		return nil, start, time.Now(), err
	}
	return lat, start, time.Now(), nil
}
