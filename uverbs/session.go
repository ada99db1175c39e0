package uverbs

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/irdma-emu/irdma-emu/attach"
	"github.com/irdma-emu/irdma-emu/driver"
)

// Session is one uverbs file (one attach connection) and, after
// GET_CONTEXT, its ucontext: the objects it created, the memory it handed
// over, its doorbell page and event files. The transport calls Command,
// Mmap and Mem one at a time and Close last; the driver's event
// callbacks and the data plane's Poll run concurrently with them and touch
// only the event files and the doorbell page.
type Session struct {
	p    *Provider
	peer *attach.Peer
	id   uint64
	log  *zap.Logger

	uctx     *driver.UContext // nil until GET_CONTEXT
	rawAttrs bool             // IRDMA_ALLOC_UCTX_USE_RAW_ATTR
	dbPage   *doorbellPage
	db       atomic.Pointer[doorbellPage] // what Poll sees
	async    atomic.Pointer[eventFile]    // the async event file, once GET_CONTEXT made it
	ntf      atomic.Pointer[notifier]     // the post notification, once NOTIFY made it

	// hmu guards h for readers outside the command path (Resources, the
	// netlink resource dumps); Command and Close hold it while they run.
	hmu      sync.Mutex
	h        handleTable
	channels []*compChannel
	mem      memMap
	mapIO    uint64                                // bytes mapped through /proc/self/mem
	qpIDs    atomic.Pointer[map[uint32]*driver.QP] // the context's QPs by id, for Poll and Quiesce
	qpHi     atomic.Uint32                         // the highest id qpIDs ever held: the bound of a notified bit's ids
	closing  atomic.Bool                           // no more events once set
	closed   bool
}

func newSession(p *Provider, peer *attach.Peer) *Session {
	s := &Session{p: p, peer: peer, id: p.nextID.Add(1)}
	f := []zap.Field{zap.Uint64("session", s.id)}
	if peer.Cred != nil {
		f = append(f, zap.Int32("pid", peer.Cred.Pid))
	}
	if peer.Hello.Program != "" {
		f = append(f, zap.String("program", peer.Hello.Program))
	}
	s.log = p.log.With(f...)
	empty := map[uint32]*driver.QP{}
	s.qpIDs.Store(&empty)
	return s
}

// method describes one write() command as the uapi declares it
// (uverbs_cmd.c: UAPI_DEF_WRITE_*): its request and response sizes, whether
// the request starts with a response pointer and carries provider data.
type method struct {
	name     string
	ex       bool
	reqSize  int
	respSize int
	hasResp  bool
	hasUdata bool
	destroy  bool // a destroy, allowed on a disassociated file
	// afterPosts: the command takes effect after the work the program
	// posted before it (takeUpPosted).
	afterPosts bool
	// srq: the method needs the device's SRQ verbs
	// (UAPI_DEF_METHOD_NEEDS_FN(create_srq) and siblings), which irdma
	// registers for GEN_3 alone; elsewhere it is notsupp.
	srq     bool
	handler func(*Session, *bundle) error
}

// notsupp is the uapi's notsupp_method: a command the device does not
// implement (or that does not exist below num_write). It is not extended
// whatever the command's flag says, and answers -EOPNOTSUPP once its
// header passed verify_hdr.
var notsupp = &method{name: "notsupp", handler: func(*Session, *bundle) error { return eOPNOTSUPP }}

var (
	writeMethods   [numWrite]*method
	writeExMethods [numWriteEx]*method
)

func init() {
	io := func(name string, req, resp int, udata bool, h func(*Session, *bundle) error) *method {
		return &method{name: name, reqSize: req, respSize: resp, hasResp: true, hasUdata: udata, handler: h}
	}
	in := func(name string, req int, h func(*Session, *bundle) error) *method {
		return &method{name: name, reqSize: req, handler: h}
	}
	ex := func(name string, req, resp int, h func(*Session, *bundle) error) *method {
		return &method{name: name, ex: true, reqSize: req, respSize: resp, hasResp: resp > 0, handler: h}
	}
	w := &writeMethods
	w[cmdGetContext] = io("GET_CONTEXT", szGetContext, szGetContextResp, true, (*Session).getContext)
	w[cmdQueryDevice] = io("QUERY_DEVICE", szQueryDevice, szQueryDeviceResp, false, (*Session).queryDevice)
	w[cmdQueryPort] = io("QUERY_PORT", szQueryPort, szQueryPortResp, false, (*Session).queryPort)
	w[cmdAllocPD] = io("ALLOC_PD", szAllocPD, szAllocPDResp, true, (*Session).allocPD)
	w[cmdDeallocPD] = in("DEALLOC_PD", szDeallocPD, (*Session).deallocPD)
	w[cmdCreateAH] = io("CREATE_AH", szCreateAH, szCreateAHResp, true, (*Session).createAH)
	w[cmdDestroyAH] = in("DESTROY_AH", szDestroyAH, (*Session).destroyAH)
	w[cmdRegMR] = io("REG_MR", szRegMR, szRegMRResp, true, (*Session).regMR)
	w[cmdDeregMR] = in("DEREG_MR", szDeregMR, (*Session).deregMR)
	w[cmdAllocMW] = io("ALLOC_MW", szAllocMW, szAllocMWResp, true, (*Session).allocMW)
	w[cmdDeallocMW] = in("DEALLOC_MW", szDeallocMW, (*Session).deallocMW)
	w[cmdCreateCompChannel] = io("CREATE_COMP_CHANNEL", szCreateCompChannel, szCompChannelResp, false, (*Session).createCompChannel)
	w[cmdCreateCQ] = io("CREATE_CQ", szCreateCQ, szCreateCQResp, true, (*Session).createCQ)
	w[cmdResizeCQ] = io("RESIZE_CQ", szResizeCQ, szResizeCQResp, true, (*Session).resizeCQ)
	w[cmdDestroyCQ] = io("DESTROY_CQ", szDestroyCQ, szDestroyCQResp, false, (*Session).destroyCQ)
	w[cmdPollCQ] = io("POLL_CQ", szPollCQ, szPollCQResp, false, (*Session).pollCQ)
	w[cmdReqNotifyCQ] = in("REQ_NOTIFY_CQ", szReqNotifyCQ, (*Session).reqNotifyCQ)
	w[cmdCreateQP] = io("CREATE_QP", szCreateQP, szCreateQPResp, true, (*Session).createQP)
	w[cmdQueryQP] = io("QUERY_QP", szQueryQP, szQueryQPResp, false, (*Session).queryQP)
	w[cmdModifyQP] = in("MODIFY_QP", szModifyQP, (*Session).modifyQP)
	w[cmdDestroyQP] = io("DESTROY_QP", szDestroyQP, szDestroyQPResp, false, (*Session).destroyQP)
	w[cmdPostSend] = io("POST_SEND", szPostSend, szPostSendResp, false, (*Session).postSend)
	w[cmdPostRecv] = io("POST_RECV", szPostRecv, szPostRecvResp, false, (*Session).postRecv)
	w[cmdAttachMcast] = in("ATTACH_MCAST", szAttachMcast, (*Session).attachMcast)
	w[cmdDetachMcast] = in("DETACH_MCAST", szAttachMcast, (*Session).detachMcast)
	w[cmdOpenQP] = io("OPEN_QP", szOpenQP, szOpenQPResp, true, (*Session).openQP)
	w[cmdReregMR] = io("REREG_MR", szReregMR, szReregMRResp, true, (*Session).reregMR)
	w[cmdCreateSRQ] = io("CREATE_SRQ", szCreateSRQ, szCreateSRQResp, true, (*Session).createSRQ)
	w[cmdCreateXSRQ] = io("CREATE_XSRQ", szCreateXSRQ, szCreateSRQResp, true, (*Session).createXSRQ)
	w[cmdModifySRQ] = &method{name: "MODIFY_SRQ", reqSize: szModifySRQ, hasUdata: true, handler: (*Session).modifySRQ}
	w[cmdQuerySRQ] = io("QUERY_SRQ", szQuerySRQ, szQuerySRQResp, false, (*Session).querySRQ)
	w[cmdDestroySRQ] = io("DESTROY_SRQ", szDestroySRQ, szDestroySRQResp, false, (*Session).destroySRQ)
	w[cmdPostSRQRecv] = io("POST_SRQ_RECV", szPostSRQRecv, szPostSRQRecvResp, false, (*Session).postSRQRecv)
	for _, c := range []int{cmdCreateSRQ, cmdCreateXSRQ, cmdModifySRQ, cmdQuerySRQ, cmdDestroySRQ, cmdPostSRQRecv} {
		w[c].srq = true
	}
	// Not offered: MODIFY_AH, QUERY_AH, REG_SMR, QUERY_MR, BIND_MW and
	// PEEK_CQ have no write handler at all; the SRQ commands need
	// ops.create_srq, the XRCD ones
	// ops.alloc_xrcd (UAPI_DEF_METHOD_NEEDS_FN), which the driver lacks.
	for _, c := range []int{cmdDeallocPD, cmdDestroyAH, cmdDeregMR, cmdDeallocMW, cmdDestroyCQ, cmdDestroyQP,
		cmdDetachMcast, cmdDestroySRQ} {
		w[c].destroy = true
	}
	// Commands that end what a posted WQE may still use: the QP's state,
	// an AH a UD send names, an MR or MW it reads, a group it sends to.
	for _, c := range []int{cmdDestroyAH, cmdDeregMR, cmdDeallocMW, cmdModifyQP, cmdDestroyQP, cmdDetachMcast, cmdReregMR} {
		w[c].afterPosts = true
	}
	for i := range w {
		if w[i] == nil {
			w[i] = notsupp
		}
	}
	x := &writeExMethods
	x[exCmdQueryDevice] = ex("EX_QUERY_DEVICE", szExQueryDevice, szExQueryDeviceRespM, (*Session).exQueryDevice)
	x[exCmdCreateCQ] = ex("EX_CREATE_CQ", szExCreateCQ, szExCreateCQResp, (*Session).exCreateCQ)
	x[exCmdCreateQP] = ex("EX_CREATE_QP", szExCreateQPReqM, szExCreateQPResp, (*Session).exCreateQP)
	x[exCmdModifyQP] = ex("EX_MODIFY_QP", szModifyQP, szExModifyQPResp, (*Session).exModifyQP)
	x[exCmdModifyQP].afterPosts = true
	// EX_MODIFY_CQ needs ops.modify_cq; flows, WQs and indirection tables
	// their ops: none is implemented by irdma.
	for i := range x {
		if x[i] == nil {
			x[i] = notsupp
		}
	}
}

// uapiGetMethod is rdma_core.h:uapi_get_method.
func uapiGetMethod(command uint32) (*method, error) {
	idx := command & cmdMask
	if command&^(cmdFlagExtended|cmdMask) != 0 {
		return nil, eINVAL
	}
	if command&cmdFlagExtended != 0 {
		if idx >= numWriteEx {
			return nil, eOPNOTSUPP
		}
		return writeExMethods[idx], nil
	}
	if idx >= numWrite {
		return nil, eOPNOTSUPP
	}
	return writeMethods[idx], nil
}

// bundle is uverbs_attr_bundle for a write() command: the core request
// and response (ucore) and the provider's data (driver_udata).
type bundle struct {
	m        *method
	count    int    // the write() length
	in       []byte // ucore.inbuf, ucore.inlen bytes
	outLen   int    // ucore.outlen
	respAddr uint64 // ucore.outbuf
	udIn     []byte // driver_udata.inbuf, inlen bytes
	udOutLen int    // driver_udata.outlen

	core    []byte // what uverbs_response wrote: outLen bytes
	drv     []byte // what ib_copy_to_udata wrote (at respAddr+outLen)
	fds     []attach.FD
	cleanup []func() // undo on failure (descriptors to close)
}

// request is uverbs_request: the first n bytes of the core request,
// zero-extended; bytes beyond n must be zero (-EOPNOTSUPP).
func (a *bundle) request(n int) ([]byte, error) {
	req := make([]byte, n)
	copy(req, a.in)
	if len(a.in) > n && !cleared(a.in[n:]) {
		return nil, eOPNOTSUPP
	}
	return req, nil
}

// respond is uverbs_response: the response truncated to ucore.outlen, or
// zero-filled up to it.
func (a *bundle) respond(resp []byte) {
	a.core = make([]byte, a.outLen)
	copy(a.core, resp)
}

// responseLength is uverbs_response_length for the write_ex commands.
func (a *bundle) responseLength(size int) uint32 { return uint32(min(a.outLen, size)) }

// udata returns the provider request, min(len, inlen) bytes copied into a
// zeroed struct of n bytes (ib_copy_from_udata with min()).
func (a *bundle) udata(n int) []byte {
	b := make([]byte, n)
	copy(b, a.udIn)
	return b
}

// udataOut is ib_copy_to_udata(udata, resp, min(sizeof(resp), outlen)).
func (a *bundle) udataOut(resp []byte) {
	a.drv = append([]byte(nil), resp[:min(len(resp), a.udOutLen)]...)
}

// Command implements attach.Session: one write() on the uverbs file
// (uverbs_main.c:ib_uverbs_write).
func (s *Session) Command(cmd []byte) (reply attach.CmdReply) {
	s.hmu.Lock()
	defer s.hmu.Unlock()
	if s.closed {
		return attach.CmdReply{Status: -int32(syscall.EIO)}
	}
	var a *bundle
	defer func() {
		if r := recover(); r != nil {
			// A bug of ours must not take the daemon down with it.
			s.p.panics.Add(1)
			s.log.Error("uverbs: panic in a command", zap.Any("panic", r), zap.ByteString("stack", debug.Stack()))
			if a != nil {
				a.undo()
			}
			reply = attach.CmdReply{Status: -int32(syscall.EIO)}
		}
	}()
	var err error
	a, err = s.parse(cmd)
	if err == nil && s.p.quiesced.Load() && !a.m.destroy {
		err = eIO // disassociated: only destroys still run
	}
	if err == nil && a.m.afterPosts {
		s.takeUpPosted()
	}
	if err == nil {
		err = a.m.handler(s, a)
	}
	if err != nil {
		if a != nil {
			a.undo()
		}
		st := errnoOf(err)
		if s.log.Core().Enabled(zap.DebugLevel) {
			name := "?"
			if a != nil {
				name = a.m.name
			} else if len(cmd) >= 4 {
				name = fmt.Sprintf("command %#x", le.Uint32(cmd))
			}
			s.log.Debug("uverbs: command failed", zap.String("cmd", name), zap.String("errno", syscall.Errno(-st).Error()))
		}
		return attach.CmdReply{Status: st}
	}
	r := attach.CmdReply{Status: int32(len(cmd)), FDs: a.fds}
	if a.respAddr != 0 && (a.core != nil || a.drv != nil) {
		resp := a.core
		if a.drv != nil {
			resp = make([]byte, a.outLen+len(a.drv))
			copy(resp, a.core)
			copy(resp[a.outLen:], a.drv)
		}
		r.RespAddr, r.Resp = a.respAddr, resp
	}
	return r
}

// undo closes the descriptors a failed command had prepared.
func (a *bundle) undo() {
	for _, fd := range a.fds {
		if fd.File != nil {
			fd.File.Close()
		}
	}
	a.fds = nil
	for _, f := range a.cleanup {
		f()
	}
	a.cleanup = nil
}

func errnoOf(err error) int32 {
	var e syscall.Errno
	if errors.As(err, &e) && e != 0 {
		return -int32(e)
	}
	return -int32(syscall.EIO)
}

// parse is ib_uverbs_write up to the handler: the header, the method,
// verify_hdr, and the split into core request/response and provider data.
func (s *Session) parse(buf []byte) (*bundle, error) {
	count := len(buf)
	if count < cmdHdrSize {
		return nil, eINVAL
	}
	command := le.Uint32(buf)
	inWords := int(le.Uint16(buf[4:]))
	outWords := int(le.Uint16(buf[6:]))
	m, err := uapiGetMethod(command)
	if err != nil {
		return nil, err
	}
	if m.srq && !s.p.srq {
		m = notsupp
	}
	a := &bundle{m: m, count: count}
	if m.ex {
		if count < cmdHdrSize+exCmdHdrSize {
			return nil, eINVAL
		}
		response := le.Uint64(buf[8:])
		pIn := int(le.Uint16(buf[16:]))
		pOut := int(le.Uint16(buf[18:]))
		reserved := le.Uint32(buf[20:])
		// verify_hdr, extended form: sizes in 8-byte words, headers
		// excluded.
		body := count - cmdHdrSize - exCmdHdrSize
		if (inWords+pIn)*8 != body {
			return nil, eINVAL
		}
		if inWords*8 < m.reqSize {
			return nil, eNOSPC
		}
		if reserved != 0 {
			return nil, eINVAL
		}
		if response != 0 {
			if outWords == 0 && pOut == 0 {
				return nil, eINVAL
			}
			if outWords*8 < m.respSize {
				return nil, eNOSPC
			}
			if response+uint64(outWords+pOut)*8 < response {
				return nil, eFAULT // access_ok
			}
		} else if outWords != 0 || pOut != 0 {
			return nil, eINVAL
		}
		rest := buf[cmdHdrSize+exCmdHdrSize:]
		a.in = rest[:inWords*8]
		a.udIn = rest[inWords*8:]
		a.respAddr = response
		a.outLen = outWords * 8
		a.udOutLen = pOut * 8
		return a, nil
	}
	// verify_hdr, legacy form: in_words counts the header, 4-byte words.
	if inWords*4 != count {
		return nil, eINVAL
	}
	if count < m.reqSize+cmdHdrSize {
		// rdma-core v18/v19 sent DESTROY_CQ as 16 bytes; the kernel
		// accepts it and reads the rest of the struct from beyond the
		// buffer. Here the missing bytes read as zero.
		if command == cmdDestroyCQ && count == 16 {
			b := make([]byte, 24)
			copy(b, buf)
			buf, count = b, 24
		} else {
			return nil, eNOSPC
		}
	}
	if outWords*4 < m.respSize {
		return nil, eNOSPC
	}
	inLen := count - cmdHdrSize
	outLen := outWords * 4
	body := buf[cmdHdrSize:count]
	if m.hasUdata {
		a.udIn = body[m.reqSize:]
		inLen = m.reqSize
	}
	if m.hasResp {
		a.respAddr = le.Uint64(body)
		if m.hasUdata {
			a.udOutLen = outLen - m.respSize
			outLen = m.respSize
		}
		if a.respAddr == 0 {
			// copy_to_user(NULL) would fail: -EFAULT (the kernel finds
			// out after the command ran, and undoes it).
			return nil, eFAULT
		}
	} else {
		outLen = 0
	}
	a.in = body[:inLen]
	a.outLen = outLen
	return a, nil
}

// Mmap implements attach.Session: ib_uverbs_mmap → irdma_mmap. The only
// entry of a context is its doorbell page (push pages are not offered:
// push mode is off).
func (s *Session) Mmap(req attach.MmapRequest) (*os.File, uint64, error) {
	if s.closed {
		return nil, 0, eIO
	}
	if s.uctx == nil || s.dbPage == nil {
		return nil, 0, eINVAL // ib_uverbs_get_ucontext_file
	}
	// rdma_user_mmap_entry_get: the key must name an entry, the mapping
	// be shared and as long as the entry (one page).
	if req.Offset != dbMmapKey || req.Length == 0 || req.Length > pageSize || req.Flags&unix.MAP_SHARED == 0 {
		return nil, 0, eINVAL
	}
	f, err := attach.DupFile(s.dbPage.f)
	if err != nil {
		return nil, 0, eMFILE
	}
	return f, 0, nil
}

// ownsQP reports whether a QP id belongs to this context.
func (s *Session) ownsQP(id uint32) bool {
	_, ok := (*s.qpIDs.Load())[id]
	return ok
}

func (s *Session) setQPID(q *driver.QP, add bool) {
	old := *s.qpIDs.Load()
	m := make(map[uint32]*driver.QP, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	if add {
		m[q.ID()] = q
		if q.ID() > s.qpHi.Load() {
			s.qpHi.Store(q.ID())
		}
	} else {
		delete(m, q.ID())
	}
	s.qpIDs.Store(&m)
}

// kickIfPolled wakes a parked data plane when this context now needs its
// doorbell page polled with backoff (Provider.Park): it has a QP and no
// way to notify.
func (s *Session) kickIfPolled() {
	if dp := s.p.cfg.DataPlane; dp != nil && s.ntf.Load() == nil && len(*s.qpIDs.Load()) == 1 {
		dp.Kick()
	}
}

// asyncEvent queues a struct ib_uverbs_async_event_desc on the context's
// async event file (ib_uverbs_async_handler).
func (s *Session) asyncEvent(cnt *eventCounter, element uint64, typ uint32) {
	if s.closing.Load() {
		return
	}
	ef := s.async.Load()
	if ef == nil {
		return
	}
	var rec [szAsyncEventDesc]byte
	put64(rec[:], 0, element)
	put32(rec[:], 8, typ)
	if !ef.push(cnt, rec[:]) {
		s.log.Warn("uverbs: async event lost (event file full or closed)", zap.Uint32("event", typ))
	}
}

// Close implements attach.Session: the last close of the uverbs file
// (uverbs_destroy_ufile_hw with RDMA_REMOVE_CLOSE). Every object goes, in
// an order that needs no retry: multicast attachments and QPs, then AHs
// and MWs, CQs, MRs, PDs; then the event files, the doorbell page, the
// memory mappings and the ucontext (irdma_dealloc_ucontext).
func (s *Session) Close() {
	s.hmu.Lock()
	defer s.hmu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	s.closing.Store(true)
	s.stopNotify()
	s.db.Store(nil) // no new doorbell scans
	d := s.p.d
	each := func(k objKind, f func(id uint32, v any)) {
		for id, o := range s.h.objs {
			if o.kind == k {
				f(id, o.v)
			}
		}
	}
	each(kindQP, func(id uint32, v any) {
		qo := v.(*qpObj)
		for _, m := range qo.mcast {
			if err := d.DetachMcast(qo.qp, driver.GID(m.gid)); err != nil {
				s.log.Debug("uverbs: close: detach mcast", zap.Error(err))
			}
		}
		qo.mcast = nil
		qo.dead.Store(true)
		if err := d.DestroyQP(qo.qp); err != nil {
			s.log.Warn("uverbs: close: destroy QP", zap.Uint32("qpn", qo.qp.ID()), zap.Error(err))
		}
		s.h.remove(id)
	})
	// SRQs once no QP uses them (ib_destroy_srq_user refuses a used one).
	each(kindSRQ, func(id uint32, v any) {
		so := v.(*srqObj)
		so.dead.Store(true)
		if err := d.DestroySRQ(so.srq); err != nil {
			s.log.Warn("uverbs: close: destroy SRQ", zap.Uint32("srq", so.srq.ID()), zap.Error(err))
		}
		s.h.remove(id)
	})
	each(kindAH, func(id uint32, v any) {
		if err := d.DestroyAH(v.(*ahObj).ah); err != nil {
			s.log.Warn("uverbs: close: destroy AH", zap.Error(err))
		}
		s.h.remove(id)
	})
	each(kindMW, func(id uint32, v any) {
		if err := d.DeallocMW(v.(*mwObj).mw); err != nil {
			s.log.Warn("uverbs: close: dealloc MW", zap.Error(err))
		}
		s.h.remove(id)
	})
	each(kindCQ, func(id uint32, v any) {
		co := v.(*cqObj)
		co.dead.Store(true)
		if _, _, err := d.DestroyCQ(co.cq); err != nil {
			s.log.Warn("uverbs: close: destroy CQ", zap.Uint32("cq", co.cq.ID()), zap.Error(err))
		}
		s.h.remove(id)
	})
	each(kindMR, func(id uint32, v any) {
		mo := v.(*mrObj)
		if err := d.DeregMR(mo.mr); err != nil {
			s.log.Warn("uverbs: close: dereg MR", zap.Error(err))
		}
		s.unmapIO(mo.io)
		s.h.remove(id)
	})
	each(kindPD, func(id uint32, v any) {
		if err := d.DeallocPD(v.(*pdObj).pd); err != nil {
			s.log.Warn("uverbs: close: dealloc PD", zap.Error(err))
		}
		s.h.remove(id)
	})
	// Off the provider's list (Sessions counts it until its objects are
	// gone); once remove returns no doorbell scan holds the page.
	s.p.remove(s)
	for _, ch := range s.channels {
		ch.ef.close()
	}
	s.channels = nil
	if ef := s.async.Load(); ef != nil {
		ef.close()
	}
	if s.dbPage != nil {
		s.dbPage.close()
		s.dbPage = nil
	}
	for _, r := range s.mem.ranges {
		if err := s.p.mem.Unmap(r.r); err != nil {
			s.log.Debug("uverbs: close: unmap MEM range", zap.Error(err))
		}
	}
	s.mem = memMap{}
	if s.uctx != nil {
		if err := d.DeallocUContext(s.uctx); err != nil {
			s.log.Debug("uverbs: close: dealloc ucontext", zap.Error(err))
		}
		s.uctx = nil
	}
	if s.peer.Mem != nil {
		s.peer.Mem.Close()
	}
	s.log.Debug("uverbs: closed")
}

// String names the session in logs.
func (s *Session) String() string { return fmt.Sprintf("uverbs session %d", s.id) }
