package rdmanl

import (
	"syscall"
)

// goodSize is how much a dump puts in one datagram before it starts the
// next: NLMSG_GOODSIZE, about a page less the skb overhead. Readers size
// their buffers for it (libmnl's MNL_SOCKET_BUFFER_SIZE is 8 KiB).
const goodSize = 3776

// chardevTypeSize is RDMA_NLDEV_ATTR_CHARDEV_TYPE_SIZE, the policy length
// of the client name in GET_CHARDEV.
const chardevTypeSize = 32

// Responder answers one program's NETLINK_RDMA socket.
type Responder struct {
	Src Source
	// Port is the socket's netlink port id: every reply carries it as
	// nlmsg_pid (NETLINK_CB(skb).portid), and libmnl checks it.
	Port uint32
	// Admin is netlink_capable(CAP_NET_ADMIN) of the socket's opener:
	// keys are reported to it only.
	Admin bool
}

// Handle answers one datagram as netlink_rcv_skb and rdma_nl_rcv_msg do:
// each request message in turn; a non-request or a control message gets
// only its acknowledgement (if asked); a dump gets its messages and
// NLMSG_DONE; a do gets its reply and, with NLM_F_ACK, an acknowledgement;
// an error gets NLMSG_ERROR with the negative errno. Replies are grouped
// into datagrams of at most goodSize bytes where a message allows.
func (r *Responder) Handle(dgram []byte) [][]byte {
	var out [][]byte
	for _, h := range Split(dgram) {
		out = append(out, r.one(h)...)
	}
	return out
}

func (r *Responder) one(h Header) [][]byte {
	flags := h.Flags()
	if flags&flagRequest == 0 || h.Type() < nlmsgMinType {
		if flags&flagAck != 0 {
			return [][]byte{r.ack(h, 0)}
		}
		return nil
	}
	attrs, perr := ParseAttrs(h[HeaderLen:])
	client, cmd := h.Type()>>10, h.Type()&0x3ff
	if client != Client {
		// Other clients (iWARP port mapper, local services) are not
		// registered here: rdma_nl_rcv_msg finds no callbacks.
		return [][]byte{r.ack(h, -int32(syscall.EINVAL))}
	}
	if perr != nil {
		return [][]byte{r.ack(h, -int32(syscall.EINVAL))}
	}
	if flags&flagDump != 0 {
		msgs, errno := r.dump(h, cmd, attrs)
		return r.pack(h, msgs, errno)
	}
	msg, errno := r.do(h, cmd, attrs)
	if errno != 0 {
		return [][]byte{r.ack(h, -int32(errno))}
	}
	out := [][]byte{msg}
	if flags&flagAck != 0 {
		out = append(out, r.ack(h, 0))
	}
	return out
}

// ack is netlink_ack: NLMSG_ERROR with the error (0 acknowledges) and the
// request's header only (as with NETLINK_CAP_ACK: NLM_F_CAPPED).
func (r *Responder) ack(h Header, errno int32) []byte {
	var w writer
	w.begin(nlmsgError, flagCapped, h.Seq(), r.Port)
	w.b = le.AppendUint32(w.b, uint32(errno))
	w.b = append(w.b, h[:HeaderLen]...)
	w.end()
	return w.b
}

// pack groups a dump's messages into datagrams and ends it with
// NLMSG_DONE carrying errno (0, or the dump's error: netlink_dump_done).
func (r *Responder) pack(h Header, msgs [][]byte, errno syscall.Errno) [][]byte {
	var w writer
	w.begin(nlmsgDone, flagMulti, h.Seq(), r.Port)
	w.b = le.AppendUint32(w.b, uint32(-int32(errno)))
	w.end()
	done := w.b
	var out [][]byte
	var cur []byte
	for _, m := range msgs {
		if len(cur) > 0 && len(cur)+len(m) > goodSize {
			out = append(out, cur)
			cur = nil
		}
		cur = append(cur, m...)
	}
	if len(cur)+len(done) > goodSize && len(cur) > 0 {
		out = append(out, cur)
		cur = nil
	}
	return append(out, append(cur, done...))
}

// device checks the request's device index (ib_device_get_by_index).
func (r *Responder) device(a Attrs) (Device, syscall.Errno) {
	idx, ok, err := a.U32(AttrDevIndex)
	d := r.Src.Device()
	if err != nil || !ok || idx != d.Index {
		return d, syscall.EINVAL
	}
	return d, 0
}

// port checks the request's port index (rdma_is_port_valid); 0 when absent.
func (r *Responder) port(a Attrs, d Device) (uint32, syscall.Errno) {
	p, ok, err := a.U32(AttrPortIndex)
	if err != nil {
		return 0, syscall.EINVAL
	}
	if !ok {
		return 0, 0
	}
	if p < 1 || p > d.Ports {
		return 0, syscall.EINVAL
	}
	return p, 0
}

func (r *Responder) handle(w *writer, d Device) {
	w.u32(AttrDevIndex, d.Index)
	w.str(AttrDevName, d.Name)
}

// do answers a request without NLM_F_DUMP (the nldev_cb_table doit
// callbacks).
func (r *Responder) do(h Header, cmd uint16, a Attrs) ([]byte, syscall.Errno) {
	var w writer
	switch cmd {
	case CmdGet: // nldev_get_doit
		d, e := r.device(a)
		if e != 0 {
			return nil, e
		}
		w.begin(Type(CmdGet), 0, h.Seq(), r.Port)
		r.devInfo(&w, d)
	case CmdPortGet: // nldev_port_get_doit
		d, e := r.device(a)
		if e != 0 {
			return nil, e
		}
		p, e := r.port(a, d)
		if e != 0 || p == 0 {
			return nil, syscall.EINVAL
		}
		w.begin(Type(CmdPortGet), 0, h.Seq(), r.Port)
		if e := r.portInfo(&w, d, p); e != 0 {
			return nil, e
		}
	case CmdResGet: // nldev_res_get_doit
		d, e := r.device(a)
		if e != 0 {
			return nil, e
		}
		w.begin(Type(CmdResGet), 0, h.Seq(), r.Port)
		r.resInfo(&w, d)
	case CmdResQPGet, CmdResCQGet, CmdResMRGet, CmdResPDGet, CmdResCtxGet, CmdResSRQGet:
		return r.resDoit(h, cmd, a)
	case CmdGetChardev: // nldev_get_chardev
		return r.chardev(h, a)
	case CmdSysGet: // nldev_sys_get_doit
		w.begin(Type(CmdSysGet), 0, h.Seq(), r.Port)
		r.sysInfo(&w)
	case CmdStatGet: // nldev_stat_get_doit, the port's default counters
		return r.statGet(h, a)
	case CmdSet, CmdNewLink, CmdDelLink, CmdSysSet, CmdStatSet, CmdStatDel, CmdNewDev, CmdDelDev, CmdFRMRPoolSet:
		// Changes (rename, netns, counters binding, links): the
		// emulated device offers none; the kernel's -EPERM for an
		// unprivileged caller comes first.
		if !r.Admin {
			return nil, syscall.EPERM
		}
		return nil, syscall.EOPNOTSUPP
	default:
		// Registered without a doit (raw dumps, status) or unknown:
		// rdma_nl_rcv_msg's -EINVAL.
		return nil, syscall.EINVAL
	}
	w.end()
	return w.b, 0
}

// dump answers a request with NLM_F_DUMP (the dumpit callbacks).
func (r *Responder) dump(h Header, cmd uint16, a Attrs) ([][]byte, syscall.Errno) {
	d := r.Src.Device()
	switch cmd {
	case CmdGet: // nldev_get_dumpit: every device
		var w writer
		w.begin(Type(CmdGet), flagMulti, h.Seq(), r.Port)
		r.devInfo(&w, d)
		w.end()
		return [][]byte{w.b}, 0
	case CmdPortGet: // nldev_port_get_dumpit: the ports of one device
		d, e := r.device(a)
		if e != 0 {
			return nil, e
		}
		var msgs [][]byte
		for p := uint32(1); p <= d.Ports; p++ {
			var w writer
			w.begin(Type(CmdPortGet), flagMulti, h.Seq(), r.Port)
			if e := r.portInfo(&w, d, p); e != 0 {
				return msgs, e
			}
			w.end()
			msgs = append(msgs, w.b)
		}
		return msgs, 0
	case CmdResGet: // nldev_res_get_dumpit: every device's summary
		var w writer
		w.begin(Type(CmdResGet), flagMulti, h.Seq(), r.Port)
		r.resInfo(&w, d)
		w.end()
		return [][]byte{w.b}, 0
	case CmdResQPGet, CmdResCQGet, CmdResMRGet, CmdResPDGet, CmdResCtxGet, CmdResSRQGet:
		return r.resDump(h, cmd, a)
	case CmdSysGet:
		var w writer
		w.begin(Type(CmdSysGet), flagMulti, h.Seq(), r.Port)
		r.sysInfo(&w)
		w.end()
		return [][]byte{w.b}, 0
	case CmdStatGet: // nldev_stat_get_dumpit: counter objects; we bind none
		if _, e := r.device(a); e != 0 {
			return nil, e
		}
		return nil, 0
	default:
		return nil, syscall.EINVAL
	}
}

// devInfo is fill_dev_info.
func (r *Responder) devInfo(w *writer, d Device) {
	r.handle(w, d)
	w.u32(AttrPortIndex, d.Ports)
	w.u64(AttrCapFlags, d.CapFlags)
	if d.FWVersion != "" {
		w.str(AttrFWVersion, d.FWVersion)
	}
	w.u64(AttrNodeGUID, d.NodeGUID)
	w.u64(AttrSysImageGUID, d.SysImageGUID)
	w.u8(AttrDevNodeType, d.NodeType)
	if d.Protocol != "" {
		w.str(AttrDevProtocol, d.Protocol)
	}
	w.u8(AttrDevDim, 0) // net_dim off: irdma does not use it
}

// portInfo is fill_port_info for a RoCE port.
func (r *Responder) portInfo(w *writer, d Device, n uint32) syscall.Errno {
	p, ok := r.Src.Port(n)
	if !ok {
		return syscall.EINVAL
	}
	r.handle(w, d)
	w.u32(AttrPortIndex, n)
	w.u8(AttrPortState, p.State)
	w.u8(AttrPortPhysState, p.PhysState)
	if p.Netdev != "" {
		w.u32(AttrNdevIndex, p.NetdevIndex)
		w.str(AttrNdevName, p.Netdev)
	}
	return 0
}

// resInfo is fill_res_info: the count of every restrack type.
func (r *Responder) resInfo(w *writer, d Device) {
	res := r.Src.Resources()
	r.handle(w, d)
	t := w.nest(AttrResSummary)
	for _, e := range []struct {
		name string
		n    int
	}{{"pd", len(res.PDs)}, {"cq", len(res.CQs)}, {"qp", len(res.QPs)}, {"cm_id", 0}, {"mr", len(res.MRs)}, {"ctx", len(res.Ctxs)}, {"srq", len(res.SRQs)}} {
		en := w.nest(AttrResSummaryEntry)
		w.str(AttrResSummaryEntryName, e.name)
		w.u64(AttrResSummaryEntryCurr, uint64(e.n))
		w.endNest(en)
	}
	w.endNest(t)
}

// sysInfo is nldev_sys_get_doit.
func (r *Responder) sysInfo(w *writer) {
	w.u8(AttrSysNetnsMode, 1) // ib_devices_shared_netns default
	w.u8(AttrSysPrivQKeyMode, 0)
	cof := uint8(0)
	if r.Src.CopyOnFork() {
		cof = 1
	}
	w.u8(AttrSysCopyOnFork, cof)
}

// chardev is nldev_get_chardev: the uverbs device of a device, or a
// global client's device.
func (r *Responder) chardev(h Header, a Attrs) ([]byte, syscall.Errno) {
	name, ok, err := a.String(AttrChardevType, chardevTypeSize)
	if err != nil || !ok {
		return nil, syscall.EINVAL
	}
	var c Chardev
	var driverID uint32
	var withDriver bool
	if _, has := a[AttrDevIndex]; has {
		d, e := r.device(a)
		if e != 0 {
			return nil, e
		}
		if _, e := r.port(a, d); e != 0 {
			return nil, e
		}
		if name != "uverbs" {
			return nil, syscall.EOPNOTSUPP // ib_get_client_nl_info: no such client of the device
		}
		c, driverID, withDriver = d.Uverbs, d.DriverID, true
	} else {
		var found bool
		if c, found = r.Src.Chardev(name); !found {
			return nil, syscall.EOPNOTSUPP
		}
	}
	var w writer
	w.begin(Type(CmdGetChardev), 0, h.Seq(), r.Port)
	w.u64(AttrChardev, c.Encode())
	w.u64(AttrChardevABI, c.ABI)
	w.str(AttrChardevName, c.Name)
	if withDriver {
		w.u32(AttrUverbsDriverID, driverID) // ib_uverbs_get_nl_info
	}
	w.end()
	return w.b, 0
}

// statGet is stat_get_doit_default_counter: the port's hardware counters.
func (r *Responder) statGet(h Header, a Attrs) ([]byte, syscall.Errno) {
	d, e := r.device(a)
	if e != 0 {
		return nil, e
	}
	if _, has := a[AttrStatRes]; has {
		// Counter objects bound to QPs (rdma statistic qp): none here.
		return nil, syscall.EINVAL
	}
	p, e := r.port(a, d)
	if e != 0 || p == 0 {
		return nil, syscall.EINVAL
	}
	cs, err := r.Src.Counters(p)
	if err != nil {
		return nil, syscall.EIO
	}
	var w writer
	w.begin(Type(CmdStatGet), 0, h.Seq(), r.Port)
	r.handle(&w, d)
	w.u32(AttrPortIndex, p)
	t := w.nest(AttrStatHWCounters)
	for _, c := range cs {
		en := w.nest(AttrStatHWCounterEntry)
		w.str(AttrStatHWCounterName, c.Name)
		w.u64(AttrStatHWCounterValue, c.Value)
		w.endNest(en)
	}
	w.endNest(t)
	w.end()
	return w.b, 0
}
