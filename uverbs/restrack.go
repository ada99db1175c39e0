package uverbs

import (
	"sort"

	"github.com/irdma-emu/irdma-emu/driver"
)

// Resource kinds as the kernel's resource tracking (restrack) counts and
// lists them: what `rdma resource show` reports through netlink
// (nldev.c fill_res_*_entry). QPs are numbered by QP number as on Linux;
// CQs and PDs by the device's ids and contexts by session, where Linux
// uses restrack's cyclic ids; MRs by a device-wide id from 0 like
// restrack's (libirdma's ring registrations have no STag).
type (
	// ResQP is one QP.
	ResQP struct {
		PID          uint32
		Port         uint8 // 0 until a modify with IB_QP_PORT
		QPN          uint32
		DestQPN      uint32
		RQPSN, SQPSN uint32
		Type         uint8 // ib_qp_type
		State        uint8 // ib_qp_state
		PDN          uint32
		Ctx          uint64
	}
	// ResCQ is one CQ.
	ResCQ struct {
		PID   uint32
		CQN   uint32
		CQE   uint32 // ib_cq.cqe: the size the program asked for, as irdma reports it
		Users uint64 // QPs using it as send or receive CQ (each counts)
		Ctx   uint64
	}
	// ResMR is one memory region.
	ResMR struct {
		PID        uint32
		MRN        uint32 // a device-wide id from 0, as restrack's (ring registrations have no STag)
		LKey, RKey uint32
		Length     uint64
		PDN        uint32
		Ctx        uint64
	}
	// ResPD is one protection domain.
	ResPD struct {
		PID   uint32
		PDN   uint32
		Users uint64 // objects created on it (QPs, MRs, MWs, AHs): ib_pd.usecnt
		Ctx   uint64
	}
	// ResSRQ is one shared receive queue (GEN_3).
	ResSRQ struct {
		PID  uint32
		SRQN uint32
		PDN  uint32
		QPNs []uint32 // the QPs bound to it (ib_srq.usecnt of them), ascending
		Ctx  uint64
	}
	// ResCtx is one user context (a session with GET_CONTEXT done).
	ResCtx struct {
		PID uint32
		Ctx uint64
	}
)

// Resources is a snapshot of every session's objects.
type Resources struct {
	QPs  []ResQP
	CQs  []ResCQ
	MRs  []ResMR
	PDs  []ResPD
	SRQs []ResSRQ
	Ctxs []ResCtx
}

// Resources lists the objects of every open context, in id order. It
// takes each session's lock in turn (a command in progress finishes
// first), so every session's part is consistent.
func (p *Provider) Resources() Resources {
	var r Resources
	for _, s := range *p.sessions.Load() {
		s.resources(&r)
	}
	sort.Slice(r.QPs, func(i, j int) bool { return r.QPs[i].QPN < r.QPs[j].QPN })
	sort.Slice(r.CQs, func(i, j int) bool { return r.CQs[i].CQN < r.CQs[j].CQN })
	sort.Slice(r.MRs, func(i, j int) bool { return r.MRs[i].MRN < r.MRs[j].MRN })
	sort.Slice(r.PDs, func(i, j int) bool { return r.PDs[i].PDN < r.PDs[j].PDN })
	sort.Slice(r.SRQs, func(i, j int) bool { return r.SRQs[i].SRQN < r.SRQs[j].SRQN })
	sort.Slice(r.Ctxs, func(i, j int) bool { return r.Ctxs[i].Ctx < r.Ctxs[j].Ctx })
	return r
}

func (s *Session) resources(r *Resources) {
	s.hmu.Lock()
	defer s.hmu.Unlock()
	if s.closed || s.uctx == nil {
		return
	}
	var pid uint32
	if s.peer.Cred != nil {
		pid = uint32(s.peer.Cred.Pid)
	} else {
		pid = s.peer.Hello.PID
	}
	r.Ctxs = append(r.Ctxs, ResCtx{PID: pid, Ctx: s.id})
	pdUsers := map[*pdObj]uint64{}
	cqUsers := map[*cqObj]uint64{}
	srqQPs := map[*srqObj][]uint32{}
	for _, o := range s.h.objs {
		switch v := o.v.(type) {
		case *qpObj:
			pdUsers[v.pd]++
			cqUsers[v.scq]++
			cqUsers[v.rcq]++
			if v.srq != nil {
				srqQPs[v.srq] = append(srqQPs[v.srq], v.qp.ID())
			}
		case *srqObj:
			pdUsers[v.pd]++ // ib_create_srq_user takes the PD
		case *mrObj:
			pdUsers[v.pd]++
		case *mwObj:
			pdUsers[v.pd]++
		case *ahObj:
			pdUsers[v.pd]++
		}
	}
	for _, o := range s.h.objs {
		switch v := o.v.(type) {
		case *srqObj:
			qpns := srqQPs[v]
			sort.Slice(qpns, func(i, j int) bool { return qpns[i] < qpns[j] })
			r.SRQs = append(r.SRQs, ResSRQ{PID: pid, SRQN: v.srq.ID(), PDN: v.pd.pd.ID(), QPNs: qpns, Ctx: s.id})
		case *pdObj:
			r.PDs = append(r.PDs, ResPD{PID: pid, PDN: v.pd.ID(), Users: pdUsers[v], Ctx: s.id})
		case *cqObj:
			r.CQs = append(r.CQs, ResCQ{PID: pid, CQN: v.cq.ID(), CQE: uint32(v.cq.CQE()), Users: cqUsers[v], Ctx: s.id})
		case *mrObj:
			r.MRs = append(r.MRs, ResMR{PID: pid, MRN: v.resID, LKey: v.mr.LKey(), RKey: v.mr.RKey(),
				Length: v.mr.Length(), PDN: v.pd.pd.ID(), Ctx: s.id})
		case *qpObj:
			a, _ := s.p.d.QueryQP(v.qp)
			q := ResQP{PID: pid, Port: v.port, QPN: v.qp.ID(), Type: uint8(v.qp.Type()), State: uint8(a.QPState),
				PDN: v.pd.pd.ID(), Ctx: s.id, SQPSN: a.SQPSN}
			if v.qp.Type() == driver.QPTypeRC {
				q.DestQPN, q.RQPSN = a.DestQPNum, a.RQPSN
			}
			r.QPs = append(r.QPs, q)
		}
	}
}
