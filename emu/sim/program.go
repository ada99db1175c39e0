package sim

import (
	"fmt"

	"github.com/irdma-emu/irdma-emu/driver"
	"github.com/irdma-emu/irdma-emu/driver/uk"
	"github.com/irdma-emu/irdma-emu/emu/timing"
)

// The programs: perftest's posting and polling through the driver's
// kernel verbs, charged to the host CPU.

func (e *Endpoint) host() *timing.Server { return &e.Node.NIC.Res[ResHost] }

// postSend posts k work requests of one kind and tells the model.
func (e *Endpoint) postSend(sc *Scenario, peer *Endpoint, k int, size int, inline bool, first int, iters int, now timing.Ps) error {
	e.wrs = e.wrs[:0]
	if len(e.sges) < k {
		e.sges = make([]driver.SGE, k)
	}
	for i := 0; i < k; i++ {
		idx := first + i
		e.sges[i] = driver.SGE{Addr: uint64(e.Buf.IOVA()), Length: uint32(size), LKey: e.MR.LKey()}
		wr := driver.SendWR{WrID: uint64(idx), SGList: e.sges[i : i+1]}
		switch sc.Verb {
		case "write":
			wr.Opcode = uk.WRRDMAWrite
		case "read":
			wr.Opcode = uk.WRRDMARead
		case "send":
			wr.Opcode = uk.WRSend
		}
		if sc.Verb != "send" {
			wr.RemoteAddr, wr.RKey = uint64(peer.Buf.IOVA()), peer.MR.RKey()
		}
		if (idx+1)%sc.CQMod == 0 || idx == iters-1 {
			wr.Flags |= uk.SendSignaled
		}
		if inline {
			// The kernel gathers an inline payload from the SGEs' virtual
			// addresses (irdma_post_send); here, from the buffer.
			wr.Flags |= uk.SendInline
			wr.InlineData = e.Buf.Bytes()[:size]
		}
		e.wrs = append(e.wrs, wr)
	}
	start, end := e.host().Serve(now, timing.Ps(k)*e.Node.s.p.HostPost, 0)
	e.Node.s.tr.span(e.Node.Idx, trackHost, "post", start, end, e.QP.ID())
	e.Node.s.dirty = true
	if n, err := e.Node.Drv.PostSend(e.QP, e.wrs); err != nil || n != k {
		return fmt.Errorf("sim: PostSend: %d of %d: %v", n, k, err)
	}
	e.Model.Post(k, end)
	return nil
}

func (e *Endpoint) postRecv(k, size int, now timing.Ps) error {
	e.rwrs = e.rwrs[:0]
	for i := 0; i < k; i++ {
		if len(e.rsges) <= i {
			e.rsges = append(e.rsges, driver.SGE{})
		}
		// The whole buffer: a receive posted for one size may take a SEND
		// of the next (the QPs serve every size of a run).
		e.rsges[i] = driver.SGE{Addr: uint64(e.Buf.IOVA()), Length: uint32(e.Buf.Len()), LKey: e.MR.LKey()}
		e.rwrs = append(e.rwrs, driver.RecvWR{WrID: uint64(i), SGList: e.rsges[i : i+1]})
	}
	e.host().Serve(now, timing.Ps(k)*e.Node.s.p.HostPost, 0)
	e.Node.s.dirty = true
	if n, err := e.Node.Drv.PostRecv(e.QP, e.rwrs); err != nil || n != k {
		return fmt.Errorf("sim: PostRecv: %d of %d: %v", n, k, err)
	}
	e.recvs += k
	return nil
}

// poll takes the CQEs of c the model has made visible.
func (e *Endpoint) poll(c *driver.CQ, w *CQWatch, consumed *int, now timing.Ps) ([]driver.WorkCompletion, timing.Ps, error) {
	k := w.Visible - *consumed
	if k <= 0 {
		return nil, now, nil
	}
	wcs, err := e.Node.Drv.PollCQ(c, k)
	if err != nil {
		return nil, now, err
	}
	*consumed += len(wcs)
	if c == e.RCQ {
		e.recvs -= len(wcs)
	}
	start, end := e.host().Serve(now, e.Node.s.p.HostPoll, 0)
	e.Node.s.tr.span(e.Node.Idx, trackHost, "poll", start, end, e.QP.ID())
	for _, wc := range wcs {
		if wc.Status != uk.WCSuccess {
			return wcs, end, fmt.Errorf("sim: completion error on QP %d: %+v", e.QP.ID(), wc)
		}
	}
	return wcs, end, nil
}
