package cm

import (
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/irdma-emu/irdma-emu/cm/mad"
	"github.com/irdma-emu/irdma-emu/emu/timing"
)

// remoteKey names a peer's connection end: its CA GUID and its comm ID
// (cm.c's remote_id_table) or its QPN (remote_qp_table).
type remoteKey struct {
	guid uint64
	n    uint32
}

// sidrKey names a SIDR_REQ being served: the requester's GID and request
// ID (cm.c's remote_sidr_table keys on the port GID / LID and the ID).
type sidrKey struct {
	gid [16]byte
	id  uint32
}

// timewait is cm.c's cm_timewait_info: the remote identity of a
// connection, in the remote tables while the connection lives (duplicate
// REQ / REP, stale QPN detection), then, from cm_enter_timewait, only a
// timer that keeps the local comm ID reserved. It outlives its ID.
type timewait struct {
	local     uint32
	remote    uint32
	guid      uint64
	remoteQPN uint32
	inRemote  bool
	inQPN     bool
	waiting   bool // in the timewait period
	timer     timing.Timer
	id        *ID // nil once the ID is destroyed
}

// work is one deferred action, run outside the lock in order: a MAD to
// send, or an event to deliver.
type work struct {
	to  Addr
	mad []byte
	id  *ID
	ev  *Event
}

type mgr struct {
	cfg   Config
	clock timing.Clock

	mu       sync.Mutex
	closed   bool
	ids      map[uint32]*ID
	tws      map[uint32]*timewait
	byRemote map[remoteKey]*timewait
	byQPN    map[remoteKey]*timewait
	sidr     map[sidrKey]*ID
	listens  []*ID
	next     uint32
	st       Stats
	q        []work
	draining bool
}

// tidHigh is the high half of our transaction IDs (cm.c:cm_form_tid puts
// the MAD agent's hi_tid there; ours is fixed).
const tidHigh = 1 << 32

func newManager(cfg Config) (*Manager, error) {
	if cfg.Transport == nil {
		return nil, errors.New("cm: Config.Transport is nil")
	}
	if cfg.Clock == nil {
		cfg.Clock = timing.NewWall()
	}
	if cfg.MaxIDs <= 0 {
		cfg.MaxIDs = 4096
	}
	if cfg.Port == 0 {
		cfg.Port = 1
	}
	m := &Manager{}
	m.cfg, m.clock = cfg, cfg.Clock
	m.ids = map[uint32]*ID{}
	m.tws = map[uint32]*timewait{}
	m.byRemote = map[remoteKey]*timewait{}
	m.byQPN = map[remoteKey]*timewait{}
	m.sidr = map[sidrKey]*ID{}
	// cm.c allocates local IDs cyclically and XORs a random operand in:
	// IDs of a restarted CM do not repeat the last run's.
	m.next = rand.Uint32()
	return m, nil
}

// allocLocked returns a free local comm ID: not 0 (a REJ's "unknown"),
// not live, not held by a timewait.
func (m *mgr) allocLocked() uint32 {
	for {
		m.next++
		n := m.next
		if n == 0 {
			continue
		}
		if _, ok := m.ids[n]; ok {
			continue
		}
		if _, ok := m.tws[n]; ok {
			continue
		}
		return n
	}
}

func (m *mgr) newIDLocked(h Handler, ctx any) *ID {
	c := &ID{}
	c.m = m
	c.self = c
	c.handler = h
	c.ctx = ctx
	c.local = m.allocLocked()
	m.ids[c.local] = c
	m.st.IDs++
	return c
}

func (m *mgr) createID(h Handler, ctx any) (*ID, error) {
	if h == nil {
		return nil, errors.New("cm: nil handler")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	if len(m.ids) >= m.cfg.MaxIDs {
		return nil, errors.New("cm: too many IDs")
	}
	return m.newIDLocked(h, ctx), nil
}

// sendLocked queues a MAD for the transport.
func (m *mgr) sendLocked(to Addr, b []byte) {
	m.st.MADsSent++
	m.q = append(m.q, work{to: to, mad: b})
}

// eventLocked queues an event for c's handler.
func (m *mgr) eventLocked(c *ID, ev *Event) {
	m.q = append(m.q, work{id: c, ev: ev})
}

// unlockAndDrain releases the lock and, unless another goroutine is
// already doing it, runs the queued sends and events in order. Handlers
// and the transport run without the lock held.
func (m *mgr) unlockAndDrain() {
	if m.draining {
		m.mu.Unlock()
		return
	}
	m.draining = true
	for len(m.q) > 0 {
		w := m.q[0]
		m.q[0] = work{}
		m.q = m.q[1:]
		if w.ev == nil {
			m.mu.Unlock()
			err := m.cfg.Transport.SendMAD(w.to, w.mad)
			m.mu.Lock()
			if err != nil {
				m.st.SendErrors++
			}
			continue
		}
		c := w.id
		if c.destroyed {
			continue
		}
		m.mu.Unlock()
		err := c.handler(c.self, w.ev)
		if err != nil {
			c.destroyWith(err)
		}
		m.mu.Lock()
	}
	m.q = m.q[:0]
	m.draining = false
	m.mu.Unlock()
}

func (m *mgr) stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.st
	s.Timewaits = 0
	for _, tw := range m.tws {
		if tw.waiting {
			s.Timewaits++
		}
	}
	return s
}

func (m *mgr) close() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	ids := make([]*ID, 0, len(m.ids))
	for _, c := range m.ids {
		ids = append(ids, c)
	}
	m.mu.Unlock()
	for _, c := range ids {
		c.Destroy()
	}
	m.mu.Lock()
	m.closed = true
	for k, tw := range m.tws {
		if tw.timer != nil {
			tw.timer.Stop()
		}
		delete(m.tws, k)
	}
	m.unlockAndDrain()
}

// findListenLocked is cm.c:cm_find_listen: the listener whose masked
// service ID the REQ's matches.
func (m *mgr) findListenLocked(sid uint64) *ID {
	for _, l := range m.listens {
		if sid&l.mask == l.sid {
			return l
		}
	}
	return nil
}

// twLocked returns c's timewait record, making one.
func (m *mgr) twLocked(c *ID) *timewait {
	if c.tw == nil {
		c.tw = &timewait{local: c.local, id: c}
		m.tws[c.local] = c.tw
	}
	return c.tw
}

// insertRemoteLocked puts c's remote identity in the remote tables
// (cm_insert_remote_id, cm_insert_remote_qpn). It returns the record
// already holding the comm ID (a duplicate) or the QPN (a stale
// connection), inserting nothing then.
func (m *mgr) insertRemoteLocked(c *ID) (dup, stale *timewait) {
	tw := m.twLocked(c)
	tw.remote, tw.guid, tw.remoteQPN = c.remote, c.remoteGUID, c.remoteQPN
	rk := remoteKey{tw.guid, tw.remote}
	if o := m.byRemote[rk]; o != nil && o != tw {
		return o, nil
	}
	qk := remoteKey{tw.guid, tw.remoteQPN}
	if o := m.byQPN[qk]; o != nil && o != tw {
		return nil, o
	}
	m.byRemote[rk], m.byQPN[qk] = tw, tw
	tw.inRemote, tw.inQPN = true, true
	return nil, nil
}

// removeRemoteLocked is cm.c:cm_remove_remote.
func (m *mgr) removeRemoteLocked(tw *timewait) {
	if tw.inRemote {
		delete(m.byRemote, remoteKey{tw.guid, tw.remote})
		tw.inRemote = false
	}
	if tw.inQPN {
		delete(m.byQPN, remoteKey{tw.guid, tw.remoteQPN})
		tw.inQPN = false
	}
}

// resetToIdleLocked is cm.c:cm_reset_to_idle: back to Idle, the remote
// identity and the timewait record dropped.
func (m *mgr) resetToIdleLocked(c *ID) {
	c.stopMsgLocked()
	c.st = StateIdle
	if tw := c.tw; tw != nil {
		m.removeRemoteLocked(tw)
		if !tw.waiting {
			delete(m.tws, tw.local)
		}
		tw.id = nil
		c.tw = nil
	}
}

// enterTimewaitLocked is cm.c:cm_enter_timewait: the remote identity
// leaves the tables (a new connection from the same QPN is not stale once
// this one is over), and after the timewait the ID, if it still exists,
// returns to Idle with EventTimewaitExit.
func (m *mgr) enterTimewaitLocked(c *ID) {
	c.stopMsgLocked()
	c.st = StateTimewait
	tw := m.twLocked(c)
	m.removeRemoteLocked(tw)
	if tw.waiting {
		return
	}
	tw.waiting = true
	d := m.cfg.Timewait
	if d <= 0 {
		d = convertToDuration(c.localACKTimeout)
	}
	tw.timer = m.clock.AfterFunc(d, func() { m.timewaitExpired(tw) })
}

func (m *mgr) timewaitExpired(tw *timewait) {
	m.mu.Lock()
	if m.tws[tw.local] != tw || !tw.waiting {
		m.mu.Unlock()
		return
	}
	delete(m.tws, tw.local)
	tw.waiting = false
	if c := tw.id; c != nil && !c.destroyed && c.tw == tw {
		c.tw = nil
		if c.st == StateTimewait {
			c.st = StateIdle
			m.eventLocked(c, &Event{Type: EventTimewaitExit})
		}
	}
	m.unlockAndDrain()
}

// armMsgLocked starts the response timer of c's outstanding message: it
// is sent again every timeout until retries run out (the MAD layer's
// ib_post_send_mad with timeout_ms and retries, as cm.c uses it).
func (m *mgr) armMsgLocked(c *ID, msg []byte, timeout time.Duration, retries int) {
	c.stopMsgLocked()
	c.msg, c.msgTimeout, c.msgRetries = msg, timeout, retries
	c.msgGen++
	gen := c.msgGen
	c.msgTimer = m.clock.AfterFunc(timeout, func() { m.msgExpired(c, gen) })
}

// rearmMsgLocked gives the outstanding message a new timeout (an MRA's
// service timeout: cm.c ib_modify_mad), keeping its retries.
func (m *mgr) rearmMsgLocked(c *ID, timeout time.Duration) {
	if c.msg == nil {
		return
	}
	if c.msgTimer != nil {
		c.msgTimer.Stop()
	}
	c.msgTimeout = timeout
	c.msgGen++
	gen := c.msgGen
	c.msgTimer = m.clock.AfterFunc(timeout, func() { m.msgExpired(c, gen) })
}

func (m *mgr) msgExpired(c *ID, gen uint64) {
	m.mu.Lock()
	if c.destroyed || c.msgGen != gen || c.msg == nil {
		m.mu.Unlock()
		return
	}
	if c.msgRetries > 0 {
		c.msgRetries--
		m.st.Retransmits++
		m.sendLocked(c.av, c.msg)
		c.msgGen++
		gen := c.msgGen
		c.msgTimer = m.clock.AfterFunc(c.msgTimeout, func() { m.msgExpired(c, gen) })
		m.unlockAndDrain()
		return
	}
	// cm.c:cm_process_send_error with IB_WC_RESP_TIMEOUT_ERR.
	m.st.Timeouts++
	c.msg, c.msgTimer = nil, nil
	switch c.st {
	case StateREQSent, StateMRAREQRcvd:
		m.resetToIdleLocked(c)
		m.eventLocked(c, &Event{Type: EventREQError, Err: ErrTimeout})
	case StateREPSent, StateMRAREPRcvd:
		m.resetToIdleLocked(c)
		m.eventLocked(c, &Event{Type: EventREPError, Err: ErrTimeout})
	case StateDREQSent:
		m.enterTimewaitLocked(c)
		m.eventLocked(c, &Event{Type: EventDREQError, Err: ErrTimeout})
	case StateSIDRREQSent:
		c.st = StateIdle
		m.eventLocked(c, &Event{Type: EventSIDRREQError, Err: ErrTimeout})
	}
	m.unlockAndDrain()
}

// newMAD returns a zeroed MAD with a CM header.
func newMAD(attr mad.AttrID, tid uint64) []byte {
	b := make([]byte, mad.Size)
	mad.Header(b).InitCM(attr, tid)
	return b
}
