package rdmanl

import "syscall"

// resKind is one row of nldev.c's fill_entries table.
type resKind struct {
	table, entry uint16 // the nest of the message, the nest of one object
	id           uint16 // the attribute a doit names the object by
	perDev       bool   // NLDEV_PER_DEV: no port filter
}

var resKinds = map[uint16]resKind{
	CmdResQPGet:  {AttrResQP, AttrResQPEntry, AttrResLQPN, false},
	CmdResCQGet:  {AttrResCQ, AttrResCQEntry, AttrResCQN, true},
	CmdResMRGet:  {AttrResMR, AttrResMREntry, AttrResMRN, true},
	CmdResPDGet:  {AttrResPD, AttrResPDEntry, AttrResPDN, true},
	CmdResCtxGet: {AttrResCtx, AttrResCtxEntry, AttrResCtxN, true},
	CmdResSRQGet: {AttrResSRQ, AttrResSRQEntry, AttrResSRQN, true},
}

// entry is one object ready to be written: its id and its fill function.
type entry struct {
	id   uint32
	port uint32 // QPs: the port it is bound to (0: none yet)
	fill func(w *writer)
}

func (r *Responder) owner(w *writer, o Owner) {
	// fill_res_name_pid: a user object's pid; a kernel object's name.
	if o.KernName != "" {
		w.str(AttrResKernName, o.KernName)
	} else {
		w.u32(AttrResPID, o.PID)
	}
}

func (r *Responder) entries(cmd uint16) []entry {
	res := r.Src.Resources()
	var out []entry
	switch cmd {
	case CmdResQPGet:
		for _, q := range res.QPs {
			q := q
			out = append(out, entry{q.LQPN, q.Port, func(w *writer) { r.qp(w, q) }})
		}
	case CmdResCQGet:
		for _, c := range res.CQs {
			c := c
			out = append(out, entry{c.CQN, 0, func(w *writer) {
				w.u32(AttrResCQE, c.CQE)
				w.u64(AttrResUsecnt, c.Users)
				w.u32(AttrResCQN, c.CQN)
				if c.KernName == "" {
					w.u32(AttrResCtxN, c.CtxN)
				}
				r.owner(w, c.Owner)
			}})
		}
	case CmdResMRGet:
		for _, m := range res.MRs {
			m := m
			out = append(out, entry{m.MRN, 0, func(w *writer) {
				if r.Admin {
					w.u32(AttrResRKey, m.RKey)
					w.u32(AttrResLKey, m.LKey)
				}
				w.u64(AttrResMRLen, m.Length)
				w.u32(AttrResMRN, m.MRN)
				if m.KernName == "" {
					w.u32(AttrResPDN, m.PDN)
				}
				r.owner(w, m.Owner)
			}})
		}
	case CmdResPDGet:
		for _, p := range res.PDs {
			p := p
			out = append(out, entry{p.PDN, 0, func(w *writer) {
				if r.Admin {
					w.u32(AttrResLocalDMALKey, p.LocalDMALKey)
				}
				w.u64(AttrResUsecnt, p.Users)
				w.u32(AttrResPDN, p.PDN)
				if p.KernName == "" {
					w.u32(AttrResCtxN, p.CtxN)
				}
				r.owner(w, p.Owner)
			}})
		}
	case CmdResSRQGet:
		for _, s := range res.SRQs {
			s := s
			out = append(out, entry{s.SRQN, 0, func(w *writer) { r.srq(w, s) }})
		}
	case CmdResCtxGet:
		for _, c := range res.Ctxs {
			c := c
			out = append(out, entry{c.CtxN, 0, func(w *writer) {
				w.u32(AttrResCtxN, c.CtxN)
				r.owner(w, c.Owner)
			}})
		}
	}
	return out
}

// srq is fill_res_srq_entry for a basic SRQ (no CQ: ib_srq_has_cq is
// false), with fill_res_srq_qps: the QPs bound to it as runs of
// consecutive QP numbers (fill_res_range_qp_entry: one number as LQPN, a
// run as MIN_RANGE and MAX_RANGE; the table nest even when empty).
func (r *Responder) srq(w *writer, s SRQ) {
	w.u32(AttrResSRQN, s.SRQN)
	w.u8(AttrResType, SRQTypeBasic)
	w.u32(AttrResPDN, s.PDN)
	t := w.nest(AttrResQP)
	run := func(lo, hi uint32) {
		e := w.nest(AttrResQPEntry)
		if lo == hi {
			w.u32(AttrResLQPN, lo)
		} else {
			w.u32(AttrMinRange, lo)
			w.u32(AttrMaxRange, hi)
		}
		w.endNest(e)
	}
	for i := 0; i < len(s.QPNs); {
		j := i
		for j+1 < len(s.QPNs) && s.QPNs[j+1] == s.QPNs[j]+1 {
			j++
		}
		run(s.QPNs[i], s.QPNs[j])
		i = j + 1
	}
	w.endNest(t)
	r.owner(w, s.Owner)
}

// qp is fill_res_qp_entry.
func (r *Responder) qp(w *writer, q QP) {
	if q.Port != 0 {
		w.u32(AttrPortIndex, q.Port)
	}
	w.u32(AttrResLQPN, q.LQPN)
	rcuc := q.Type == QPTypeRC || q.Type == QPTypeUC
	if rcuc {
		w.u32(AttrResRQPN, q.RQPN)
		w.u32(AttrResRQPSN, q.RQPSN)
	}
	w.u32(AttrResSQPSN, q.SQPSN)
	if rcuc {
		w.u8(AttrResPathMigState, q.PathMigState)
	}
	w.u8(AttrResType, q.Type)
	w.u8(AttrResState, q.State)
	if q.KernName == "" {
		w.u32(AttrResPDN, q.PDN)
	}
	r.owner(w, q.Owner)
}

// resDump is res_get_common_dumpit: one device, its objects in messages
// of at most goodSize bytes, each message the device's handle and a table
// nest; no message at all when no object matches.
func (r *Responder) resDump(h Header, cmd uint16, a Attrs) ([][]byte, syscall.Errno) {
	k := resKinds[cmd]
	d, e := r.device(a)
	if e != 0 {
		return nil, e
	}
	port, e := r.port(a, d)
	if e != 0 {
		return nil, e
	}
	var msgs [][]byte
	var w writer
	var table int
	open := false
	for _, en := range r.entries(cmd) {
		if port != 0 && !k.perDev && en.port != port {
			continue // fill_res_qp_entry's -EAGAIN: another port
		}
		if open && len(w.b) > goodSize-256 {
			w.endNest(table)
			w.end()
			msgs = append(msgs, w.b)
			w, open = writer{}, false
		}
		if !open {
			w.begin(Type(cmd), flagMulti, h.Seq(), r.Port)
			r.handle(&w, d)
			table = w.nest(k.table)
			open = true
		}
		n := w.nest(k.entry)
		en.fill(&w)
		w.endNest(n)
	}
	if open {
		w.endNest(table)
		w.end()
		msgs = append(msgs, w.b)
	}
	return msgs, 0
}

// resDoit is res_get_common_doit: one object by id.
func (r *Responder) resDoit(h Header, cmd uint16, a Attrs) ([]byte, syscall.Errno) {
	k := resKinds[cmd]
	d, e := r.device(a)
	if e != 0 {
		return nil, e
	}
	id, ok, err := a.U32(k.id)
	if err != nil || !ok {
		return nil, syscall.EINVAL
	}
	port, e := r.port(a, d)
	if e != 0 {
		return nil, e
	}
	if (port != 0 && k.perDev) || (port == 0 && !k.perDev) {
		return nil, syscall.EINVAL
	}
	for _, en := range r.entries(cmd) {
		if en.id != id {
			continue
		}
		if port != 0 && en.port != port {
			return nil, syscall.EAGAIN
		}
		var w writer
		w.begin(Type(cmd), 0, h.Seq(), r.Port)
		r.handle(&w, d)
		en.fill(&w)
		w.end()
		return w.b, 0
	}
	return nil, syscall.ENOENT // rdma_restrack_get_byid
}
