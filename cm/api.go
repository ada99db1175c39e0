// Package cm is the IBTA communication manager (IBTA Vol 1 chapter 12) of
// one irdma-emu device: the equivalent of the kernel's
// drivers/infiniband/core/cm.c together with the part of the MAD layer
// (mad.c) that carries CM MADs on the GSI QP (QP 1). It speaks the CM
// protocol on the wire (REQ, MRA, REJ, REP, RTU, DREQ, DREP, SIDR_REQ,
// SIDR_REP, in RoCEv2 UD SENDs between the two ends' QP1) and runs the
// connection state machine with its response timeouts, retries and
// timewait on an injectable clock (emu/timing).
//
// The RDMA CM above it (IP addressing, service IDs from port spaces, the
// cma_hdr private data, address and route resolution) is a consumer of this
// package, as cma.c is a consumer of ib_cm; cm knows nothing of IP.
//
// # API (modelled on the kernel's include/rdma/ib_cm.h)
//
//	kernel                     cm
//	ib_create_cm_id            (*Manager).CreateID(handler, context)
//	ib_destroy_cm_id           (*ID).Destroy
//	ib_cm_listen               (*ID).Listen(serviceID, mask)
//	ib_send_cm_req             (*ID).SendREQ(*REQParam)
//	ib_send_cm_rep             (*ID).SendREP(*REPParam)
//	ib_send_cm_rtu             (*ID).SendRTU(privateData)
//	ib_send_cm_rej             (*ID).SendREJ(reason, ari, privateData)
//	ib_send_cm_mra             (*ID).SendMRA(serviceTimeout, privateData)
//	ib_send_cm_dreq            (*ID).SendDREQ(privateData)
//	ib_send_cm_drep            (*ID).SendDREP(privateData)
//	ib_send_cm_sidr_req        (*ID).SendSIDRREQ(*SIDRREQParam)
//	ib_send_cm_sidr_rep        (*ID).SendSIDRREP(*SIDRREPParam)
//	ib_cm_notify(COMM_EST)     (*ID).Established
//	ib_cm_init_qp_attr         (*ID).InitQPAttr(QPState)
//
// # How events reach the consumer
//
// Every ID has a Handler, given at CreateID. The Manager calls it for each
// event of that ID, one event at a time for the whole Manager (so events of
// one ID arrive in order, and two handlers never run at once), never while
// holding its own lock: a handler may call any method of any ID, including
// Destroy of its own ID. A handler that returns a non-nil error has its ID
// destroyed after it returns, as a non-zero return of a kernel cm_handler
// does. Handlers must not block for long (queue the event to a channel of
// your own): they run on the goroutine that delivered the MAD or fired the
// timer, and every other event of the device waits for them. Once Destroy
// has returned no new handler call starts for that ID; a call already
// running on another goroutine may still be finishing.
//
// A REQ (or SIDR_REQ) that matches a listening ID creates a new ID, in
// state REQ_RCVD (SIDR_REQ_RCVD), with the listener's Handler and Context;
// the event is delivered on the new ID with Event.Listen naming the
// listener, exactly as cm_req_handler does. The consumer then answers on
// the new ID with SendREP, SendREJ or SendMRA, or destroys it (which sends
// REJ, as ib_destroy_cm_id does for REQ_RCVD). A new ID whose handler
// returns an error is destroyed with a REJ (consumer reject).
//
// # Private data
//
// Private data given to a Send method may be shorter than the message's
// private data field (it is zero-padded) but never longer: the limits are
// the IBTA field sizes, the kernel's enum ib_cm_data_size (REQ 92, MRA 222,
// REJ 148, REP 196, RTU 224, DREQ 220, DREP 224, SIDR_REQ 216, SIDR_REP
// 136; REJ ARI and SIDR_REP additional information 72). Received private
// data is always the whole field (the wire carries no length), as the
// kernel delivers it.
//
// # Errors
//
// Send methods return ErrInvalidState when the ID is in the wrong state for
// the message (the kernel's -EINVAL), ErrPrivateDataTooLong for an
// over-long private data or ARI, ErrDestroyed for a destroyed ID, and the
// transport's error when the MAD cannot be posted.
package cm

import (
	"errors"
	"time"

	"github.com/irdma-emu/irdma-emu/emu/timing"
)

// Private data and information field sizes (IBTA Vol 1 §12.6; the kernel's
// enum ib_cm_data_size in include/rdma/ib_cm.h).
const (
	REQPrivateDataSize     = 92
	MRAPrivateDataSize     = 222
	REJPrivateDataSize     = 148
	REPPrivateDataSize     = 196
	RTUPrivateDataSize     = 224
	DREQPrivateDataSize    = 220 // DREQ carries the remote QPN, 4 bytes less than RTU/DREP
	DREPPrivateDataSize    = 224
	SIDRREQPrivateDataSize = 216
	SIDRREPPrivateDataSize = 136
	REJARILength           = 72
	SIDRREPInfoLength      = 72
)

// MRAFlagDelay is the kernel's IB_CM_MRA_FLAG_DELAY: or-ed into SendMRA's
// service timeout, the MRA is sent only when a duplicate arrives.
const MRAFlagDelay = 0x80

// Defaults taken from the kernel.
const (
	// DefaultCMResponseTimeout is cma.c's CMA_CM_RESPONSE_TIMEOUT: the
	// IBTA time exponent 20 (4.096 µs × 2^20 ≈ 4.3 s).
	DefaultCMResponseTimeout = 20
	// DefaultMaxCMRetries is cma.c's CMA_MAX_CM_RETRIES.
	DefaultMaxCMRetries = 15
	// MaxCMRetriesLimit is the widest value of the 4-bit Max CM Retries
	// field of a REQ (IBTA Vol 1 §12.6.5).
	MaxCMRetriesLimit = 15
)

// State is the state of an ID, named after the kernel's enum ib_cm_state
// (IBTA Vol 1 §12.9 connection state diagrams).
type State uint8

const (
	StateIdle State = iota
	StateListen
	StateREQSent
	StateREQRcvd
	StateMRAREQSent // we sent MRA for a received REQ
	StateMRAREQRcvd // the peer sent MRA for our REQ
	StateREPSent
	StateREPRcvd
	StateMRAREPSent // we sent MRA for a received REP
	StateMRAREPRcvd // the peer sent MRA for our REP
	StateEstablished
	StateDREQSent
	StateDREQRcvd
	StateTimewait
	StateSIDRREQSent
	StateSIDRREQRcvd
)

// EventType is the kernel's enum ib_cm_event_type (the subset cm serves:
// no LAP/APR, see docs/cm.md).
type EventType uint8

const (
	EventREQError EventType = iota + 1
	EventREQReceived
	EventREPError
	EventREPReceived
	EventRTUReceived
	EventUserEstablished // Established() was called (ib_cm_notify COMM_EST)
	EventDREQError
	EventDREQReceived
	EventDREPReceived
	EventTimewaitExit
	EventMRAReceived
	EventREJReceived
	EventSIDRREQError
	EventSIDRREQReceived
	EventSIDRREPReceived
)

// QPType is the transport service a REQ asks for (IBTA Vol 1 §12.6.5
// Transport Service Type).
type QPType uint8

const (
	QPTypeRC QPType = 0
	QPTypeUC QPType = 1
)

// MTU is the IBTA path MTU enumeration (1: 256 … 5: 4096), as in
// ibv_mtu / enum ib_mtu.
type MTU uint8

const (
	MTU256  MTU = 1
	MTU512  MTU = 2
	MTU1024 MTU = 3
	MTU2048 MTU = 4
	MTU4096 MTU = 5
)

// Path is the primary path of a connection on RoCE: the part of a
// sa_path_rec a RoCEv2 REQ carries and a QP's address vector needs. There
// is no alternate path (APM is not supported, docs/cm.md).
type Path struct {
	SGID         [16]byte // our GID (the REQ's primary local port GID)
	DGID         [16]byte // the peer's GID
	SGIDIndex    uint8    // index of SGID in the port's GID table
	FlowLabel    uint32   // 20 bits
	TrafficClass uint8
	HopLimit     uint8
	PKey         uint16 // 0xFFFF on RoCE
	MTU          MTU
	SL           uint8 // 4 bits; carried in the REQ, unused by RoCE
	// PacketLifeTime is the IBTA time exponent of the subnet's packet
	// lifetime (cm.c derives the local ACK timeout from it).
	PacketLifeTime uint8
	// DMAC is the next hop's MAC address for the peer's GID; zero means
	// "resolve it" (the transport resolves it from DGID as an AH does).
	DMAC [6]byte
	// Rate is the IBTA static rate enumeration (the REQ's packet rate);
	// 0 means "port current".
	Rate uint8
}

// REQParam is the kernel's struct ib_cm_req_param for RoCE.
type REQParam struct {
	Path      Path
	ServiceID uint64
	QPN       uint32 // our QP (24 bits)
	QPType    QPType
	// StartingPSN (24 bits) is, as in cm.c, the first PSN this side's
	// receive queue expects: the peer's send queue starts there
	// (InitQPAttr gives it as our RTR rq_psn and the peer's RTS sq_psn).
	StartingPSN uint32
	PrivateData []byte // ≤ REQPrivateDataSize
	// ResponderResources: RDMA READ/atomics we accept (our
	// max_dest_rd_atomic); InitiatorDepth: those we issue (max_rd_atomic).
	ResponderResources uint8
	InitiatorDepth     uint8
	// RemoteCMResponseTimeout: how long the peer may take to answer us;
	// LocalCMResponseTimeout: how long we take to answer. IBTA time
	// exponents (5 bits); 0 means DefaultCMResponseTimeout.
	RemoteCMResponseTimeout uint8
	LocalCMResponseTimeout  uint8
	FlowControl             bool
	// LocalACKTimeout is the QP's ACK timeout exponent (5 bits); 0 means
	// "derive it from Path.PacketLifeTime" as cm_format_req does.
	LocalACKTimeout uint8
	RetryCount      uint8 // 3 bits
	RNRRetryCount   uint8 // 3 bits
	// MaxCMRetries is how often the REQ is sent again without an answer
	// (4 bits); 0 means DefaultMaxCMRetries.
	MaxCMRetries uint8
	SRQ          bool
}

// REPParam is the kernel's struct ib_cm_rep_param.
type REPParam struct {
	QPN uint32
	// StartingPSN: the first PSN our receive queue expects (the active
	// side's send PSN), as REQParam.StartingPSN.
	StartingPSN        uint32
	PrivateData        []byte // ≤ REPPrivateDataSize
	ResponderResources uint8
	InitiatorDepth     uint8
	FailoverAccepted   uint8 // 2 bits (0 accepted, 1 rejected, 2 not supported); RDMA CM sends 0
	FlowControl        bool
	RNRRetryCount      uint8
	SRQ                bool
}

// SIDRREQParam is the kernel's struct ib_cm_sidr_req_param.
type SIDRREQParam struct {
	Path      Path
	ServiceID uint64
	// Timeout is the response timeout in milliseconds (as the kernel's
	// timeout_ms); 0 means the time exponent DefaultCMResponseTimeout.
	Timeout      time.Duration
	MaxCMRetries uint8
	PrivateData  []byte // ≤ SIDRREQPrivateDataSize
}

// SIDRStatus is the SIDR_REP status (IBTA Vol 1 §12.11.2 Table 110; the
// kernel's enum ib_cm_sidr_status).
type SIDRStatus uint8

const (
	SIDRSuccess       SIDRStatus = 0
	SIDRUnsupported   SIDRStatus = 1 // service ID not supported (no listener)
	SIDRReject        SIDRStatus = 2 // rejected by the service provider
	SIDRNoQP          SIDRStatus = 3
	SIDRRedirect      SIDRStatus = 4
	SIDRUnsupportedVr SIDRStatus = 5 // unsupported class version
)

// SIDRREPParam is the kernel's struct ib_cm_sidr_rep_param.
type SIDRREPParam struct {
	QPN         uint32
	QKey        uint32
	Status      SIDRStatus
	Info        []byte // ≤ SIDRREPInfoLength
	PrivateData []byte // ≤ SIDRREPPrivateDataSize
}

// RejReason is the REJ reason code (IBTA Vol 1 §12.6.7.2 Table 112; the
// kernel's enum ib_cm_rej_reason). Only the codes cm sends or a consumer
// is likely to test are named; any 16-bit value passes through.
type RejReason uint16

const (
	RejNoQP                 RejReason = 1
	RejNoEEC                RejReason = 2
	RejNoResources          RejReason = 3
	RejTimeout              RejReason = 4 // sent by cm when a peer's REP never gets our RTU in time (cm.c: REP timeout)
	RejUnsupported          RejReason = 5
	RejInvalidCommID        RejReason = 6
	RejInvalidCommInstance  RejReason = 7
	RejInvalidServiceID     RejReason = 8
	RejInvalidTransportType RejReason = 9
	RejStaleConn            RejReason = 10
	RejRDCNotExist          RejReason = 11
	RejInvalidGID           RejReason = 12
	RejInvalidLID           RejReason = 13
	RejInvalidSL            RejReason = 14
	RejInvalidTrafficClass  RejReason = 15
	RejInvalidHopLimit      RejReason = 16
	RejInvalidPacketRate    RejReason = 17
	RejInvalidAltGID        RejReason = 18
	RejInvalidAltLID        RejReason = 19
	RejInvalidAltSL         RejReason = 20
	RejInvalidAltTC         RejReason = 21
	RejInvalidAltHopLimit   RejReason = 22
	RejInvalidAltPacketRate RejReason = 23
	RejPortCMRedirect       RejReason = 24
	RejPortRedirect         RejReason = 25
	RejInvalidMTU           RejReason = 26
	RejInsufficientRespRes  RejReason = 27
	RejConsumerDefined      RejReason = 28
	RejInvalidRNRRetry      RejReason = 29
	RejDuplicateLocalCommID RejReason = 30
	RejInvalidClassVersion  RejReason = 31
	RejInvalidFlowLabel     RejReason = 32
	RejInvalidAltFlowLabel  RejReason = 33
	RejVendorOUI            RejReason = 35 // ib_cm.h IB_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED
)

// REQEvent is the kernel's struct ib_cm_req_event_param. As there, the
// fields are from the receiver's point of view: ResponderResources is the
// requester's initiator depth and InitiatorDepth its responder resources;
// LocalCMResponseTimeout is the REQ's remote one and the reverse.
type REQEvent struct {
	ServiceID uint64
	// Path is the path as seen from this side: SGID is our GID, DGID the
	// requester's, DMAC the requester's MAC as the GSI packet arrived
	// from it; MTU, flow label, traffic class, hop limit, SL, packet
	// lifetime from the REQ's primary path.
	Path                    Path
	RemoteCAGUID            uint64
	RemoteQKey              uint32
	RemoteQPN               uint32
	QPType                  QPType
	StartingPSN             uint32
	ResponderResources      uint8
	InitiatorDepth          uint8
	LocalCMResponseTimeout  uint8
	FlowControl             bool
	RemoteCMResponseTimeout uint8
	LocalACKTimeout         uint8
	RetryCount              uint8
	RNRRetryCount           uint8
	MaxCMRetries            uint8
	SRQ                     bool
}

// REPEvent is the kernel's struct ib_cm_rep_event_param.
type REPEvent struct {
	RemoteCAGUID       uint64
	RemoteQKey         uint32
	RemoteQPN          uint32
	StartingPSN        uint32
	ResponderResources uint8
	InitiatorDepth     uint8
	TargetACKDelay     uint8
	FailoverAccepted   uint8
	FlowControl        bool
	RNRRetryCount      uint8
	SRQ                bool
}

// REJEvent is the kernel's struct ib_cm_rej_event_param plus the ARI.
type REJEvent struct {
	Reason RejReason
	ARI    []byte // the whole ARI field; ARILength says how much is meaningful
	// ARILength is the REJ's Additional Rejection Information Length.
	ARILength uint8
}

// MRAEvent is the kernel's struct ib_cm_mra_event_param.
type MRAEvent struct {
	ServiceTimeout uint8 // IBTA time exponent
}

// SIDRREQEvent is the kernel's struct ib_cm_sidr_req_event_param.
type SIDRREQEvent struct {
	ServiceID uint64
	PKey      uint16
	Path      Path // as in REQEvent.Path, from the GSI packet's GRH
}

// SIDRREPEvent is the kernel's struct ib_cm_sidr_rep_event_param.
type SIDRREPEvent struct {
	Status SIDRStatus
	QKey   uint32
	QPN    uint32
	Info   []byte
}

// Event is one ib_cm_event. Exactly the parameter field of its Type is
// set; PrivateData is set for every event received from the wire (the
// whole private data field of the message).
type Event struct {
	Type EventType
	// Listen is the listening ID a REQ or SIDR_REQ matched
	// (REQReceived, SIDRREQReceived); the event itself is delivered on
	// the new ID.
	Listen *ID

	REQ     *REQEvent
	REP     *REPEvent
	REJ     *REJEvent
	MRA     *MRAEvent
	SIDRREQ *SIDRREQEvent
	SIDRREP *SIDRREPEvent

	PrivateData []byte

	// Err is set for the *Error events: ErrTimeout when the retries ran
	// out (the kernel's IB_WC_RESP_TIMEOUT_ERR send status).
	Err error
}

// Handler receives the events of an ID (see the package comment). A
// non-nil error destroys the ID after the handler returns.
type Handler func(id *ID, ev *Event) error

// QPState names the QP state InitQPAttr is asked for.
type QPState uint8

const (
	QPStateInit QPState = 1
	QPStateRTR  QPState = 2
	QPStateRTS  QPState = 3
)

// QPAttr is what InitQPAttr fills in (ib_cm_init_qp_attr): the fields
// valid for the requested state are named by the Mask bits.
type QPAttr struct {
	Mask QPAttrMask
	// INIT
	PKeyIndex   uint16
	Port        uint8
	AccessFlags uint32 // IB_ACCESS_REMOTE_WRITE (| READ | ATOMIC with responder resources)
	// RTR
	Path            Path // the address vector: DGID, SGID index, flow label, TC, hop limit, DMAC
	PathMTU         MTU
	DestQPN         uint32
	RQPSN           uint32
	MaxDestRdAtomic uint8
	MinRNRTimer     uint8
	// RTS
	Timeout     uint8 // local ACK timeout exponent
	RetryCount  uint8
	RNRRetry    uint8
	SQPSN       uint32
	MaxRdAtomic uint8
}

// QPAttrMask bits, with the values of enum ib_qp_attr_mask / ibv_qp_attr_mask.
type QPAttrMask uint32

const (
	QPAttrState           QPAttrMask = 1 << 0
	QPAttrAccessFlags     QPAttrMask = 1 << 3
	QPAttrPKeyIndex       QPAttrMask = 1 << 4
	QPAttrPort            QPAttrMask = 1 << 5
	QPAttrAV              QPAttrMask = 1 << 7
	QPAttrPathMTU         QPAttrMask = 1 << 8
	QPAttrTimeout         QPAttrMask = 1 << 9
	QPAttrRetryCnt        QPAttrMask = 1 << 10
	QPAttrRNRRetry        QPAttrMask = 1 << 11
	QPAttrRQPSN           QPAttrMask = 1 << 12
	QPAttrMaxQPRdAtomic   QPAttrMask = 1 << 13
	QPAttrMinRNRTimer     QPAttrMask = 1 << 15
	QPAttrSQPSN           QPAttrMask = 1 << 16
	QPAttrMaxDestRdAtomic QPAttrMask = 1 << 17
	QPAttrDestQPN         QPAttrMask = 1 << 20
)

// Errors of the API.
var (
	ErrInvalidState       = errors.New("cm: ID in the wrong state for this call")
	ErrPrivateDataTooLong = errors.New("cm: private data or information longer than the message's field")
	ErrDestroyed          = errors.New("cm: ID destroyed")
	ErrBusy               = errors.New("cm: service ID already listened on")
	ErrTimeout            = errors.New("cm: no response from the peer (retries exhausted)")
	ErrClosed             = errors.New("cm: manager closed")
)

// Addr is where a MAD goes or came from: the peer's QP1 on RoCEv2.
type Addr struct {
	SGIDIndex    uint8
	SGID         [16]byte
	DGID         [16]byte
	FlowLabel    uint32
	TrafficClass uint8
	HopLimit     uint8
	DMAC         [6]byte // zero: resolve from DGID
	// RemoteQPN is the peer's GSI QP: 1 (received MADs: the source QP).
	RemoteQPN uint32
	PKeyIndex uint16
}

// Transport carries MADs to and from the GSI QP: the daemon's agent
// (internal/daemon/cm.go) implements it on the driver's QP1; tests may use
// two Managers wired back to back. Send must not call back into the
// Manager; received MADs are handed to (*Manager).Deliver.
type Transport interface {
	// SendMAD posts one 256-byte MAD as a UD SEND to the peer's QP1
	// (P_Key 0xFFFF, Q_Key 0x80010000).
	SendMAD(to Addr, mad []byte) error
}

// Config configures a Manager.
type Config struct {
	Transport Transport
	Clock     timing.Clock
	// CAGUID is the device's node GUID (the REQ/REP Local CA GUID).
	CAGUID uint64
	// Port is the device's port number (1).
	Port uint8
	// MaxIDs bounds the IDs the Manager holds at once (a REQ flood is
	// rejected with RejNoResources beyond it); 0 means 4096.
	MaxIDs int
	// Timewait overrides the timewait duration (0: derived from the
	// connection's local ACK timeout as cm.c:cm_enter_timewait does).
	Timewait time.Duration
	// CAACKDelay is the device's local CA ACK delay exponent (irdma: 0),
	// sent as a REP's target ACK delay and used in cm_ack_timeout.
	CAACKDelay uint8
	// LookupGID finds a GID in the port's GID table: a REQ naming a GID
	// we do not have is rejected with RejInvalidGID (cm.c
	// cm_init_av_by_path failing in cm_req_handler). nil accepts any.
	LookupGID func(gid [16]byte) (index uint8, ok bool)
}

// Stats are the Manager's counters (exposed in the daemon's stats).
type Stats struct {
	MADsReceived      uint64 // every MAD handed to Deliver
	MADsSent          uint64 // every MAD posted, retransmissions included
	Retransmits       uint64 // REQ/REP/DREQ/SIDR_REQ sent again on timeout
	Timeouts          uint64 // retries exhausted
	DropTruncated     uint64 // shorter than a MAD
	DropBadHeader     uint64 // wrong base version, class, class version or method
	DropBadAttribute  uint64 // attribute ID not a CM message we serve
	DropUnknownCommID uint64 // no ID for the remote/local comm ID (REP/RTU/DREQ/... for nothing)
	AfterDestroy      uint64 // a message for an ID destroyed while its timewait runs (e.g. the DREP to a destroyed DREQ_SENT ID)
	DropUnexpected    uint64 // a message the ID's state does not expect (answered or ignored per §12.9)
	DropDuplicate     uint64 // a retransmitted REQ/REP/DREQ recognised and answered or ignored
	DropNoResources   uint64 // REQ refused: MaxIDs reached (REQ flood)
	SendErrors        uint64 // the transport refused a MAD
	REJSent           uint64
	REJReceived       uint64
	StaleRejected     uint64 // REQ/REP from a remote QPN or comm ID still connected to another ID
	IDs               uint64 // IDs alive now (gauge)
	Timewaits         uint64 // connections in timewait now (gauge; they outlive their IDs)
}

// Manager is the CM of one device: its IDs, listeners, timers and
// counters. It is safe for concurrent use.
type Manager struct {
	mgr
}

// NewManager returns a Manager sending through cfg.Transport.
func NewManager(cfg Config) (*Manager, error) { return newManager(cfg) }

// CreateID is ib_create_cm_id: a new ID in state Idle whose events go to
// h. context is the consumer's (Context / SetContext).
func (m *Manager) CreateID(h Handler, context any) (*ID, error) { return m.createID(h, context) }

// Deliver hands one received MAD to the Manager (the GSI QP's receive
// path). from is the address to answer the sender at, as an AH made from
// the GRH and the completion would be (ib_init_ah_attr_from_wc): SGID our
// GID (the GRH's destination) with its SGIDIndex, DGID the sender's GID,
// DMAC the frame's source MAC, RemoteQPN the source QP, HopLimit for the
// answer. mad is copied if kept; bad MADs are counted and dropped.
func (m *Manager) Deliver(from Addr, mad []byte) { m.deliver(from, mad) }

// Stats returns a snapshot of the counters.
func (m *Manager) Stats() Stats { return m.stats() }

// Close destroys every ID (sending DREQ/REJ as Destroy does) and stops the
// timers; later calls fail with ErrClosed.
func (m *Manager) Close() { m.close() }

// ID is a CM identifier (the kernel's struct ib_cm_id).
type ID struct {
	id
}

// Context returns the consumer context given at CreateID (or inherited
// from the listener).
func (c *ID) Context() any { return c.context() }

// SetContext replaces the consumer context.
func (c *ID) SetContext(v any) { c.setContext(v) }

// State returns the ID's current state.
func (c *ID) State() State { return c.state() }

// LocalCommID and RemoteCommID are the IBTA communication IDs (the
// kernel's cm_id->local_id / remote_id); RemoteCommID is 0 until known.
func (c *ID) LocalCommID() uint32  { return c.localCommID() }
func (c *ID) RemoteCommID() uint32 { return c.remoteCommID() }

// ServiceID is the service ID listened on, requested, or received.
func (c *ID) ServiceID() uint64 { return c.serviceID() }

// Listen is ib_cm_listen: REQs and SIDR_REQs whose service ID s satisfies
// s&mask == serviceID&mask create new IDs on this one (mask 0 means all
// ones). ErrBusy if an overlapping listen exists (cm.c's -EBUSY).
func (c *ID) Listen(serviceID, mask uint64) error { return c.listen(serviceID, mask) }

// SendREQ is ib_send_cm_req (Idle → REQ_SENT). The REQ is retransmitted
// every remote CM response timeout (plus the packet lifetime) up to
// MaxCMRetries times; then EventREQError with ErrTimeout.
func (c *ID) SendREQ(p *REQParam) error { return c.sendREQ(p) }

// SendREP is ib_send_cm_rep (REQ_RCVD or MRA_REQ_SENT → REP_SENT).
func (c *ID) SendREP(p *REPParam) error { return c.sendREP(p) }

// SendRTU is ib_send_cm_rtu (REP_RCVD or MRA_REP_SENT → ESTABLISHED).
func (c *ID) SendRTU(privateData []byte) error { return c.sendRTU(privateData) }

// SendREJ is ib_send_cm_rej: valid in REQ_SENT, REQ_RCVD, REP_SENT,
// REP_RCVD and the MRA states. The ID returns to Idle, or enters timewait
// from REP_SENT / MRA_REP_RCVD (the peer may hold a QP for it already).
func (c *ID) SendREJ(reason RejReason, ari, privateData []byte) error {
	return c.sendREJ(reason, ari, privateData)
}

// SendMRA is ib_send_cm_mra: in REQ_RCVD (→ MRA_REQ_SENT) or REP_RCVD
// (→ MRA_REP_SENT), asking the peer to wait serviceTimeout (an IBTA time
// exponent, low 5 bits) longer. With MRAFlagDelay set in serviceTimeout
// the MRA is not sent now, only in answer to a duplicate REQ/REP (what
// cma.c's CMA_CM_MRA_SETTING asks for).
func (c *ID) SendMRA(serviceTimeout uint8, privateData []byte) error {
	return c.sendMRA(serviceTimeout, privateData)
}

// SendDREQ is ib_send_cm_dreq (Established → DREQ_SENT), retransmitted
// like a REQ; then EventDREQError and timewait.
func (c *ID) SendDREQ(privateData []byte) error { return c.sendDREQ(privateData) }

// SendDREP is ib_send_cm_drep (DREQ_RCVD → timewait).
func (c *ID) SendDREP(privateData []byte) error { return c.sendDREP(privateData) }

// SendSIDRREQ is ib_send_cm_sidr_req (Idle → SIDR_REQ_SENT).
func (c *ID) SendSIDRREQ(p *SIDRREQParam) error { return c.sendSIDRREQ(p) }

// SendSIDRREP is ib_send_cm_sidr_rep (SIDR_REQ_RCVD → Idle).
func (c *ID) SendSIDRREP(p *SIDRREPParam) error { return c.sendSIDRREP(p) }

// Established is ib_cm_notify(IB_EVENT_COMM_EST): the QP received a packet
// before the RTU did (REP_SENT / MRA_REP_RCVD → ESTABLISHED, with
// EventUserEstablished).
func (c *ID) Established() error { return c.established() }

// InitQPAttr is ib_cm_init_qp_attr: the QP attributes for moving the
// consumer's QP to state s, from the REQ/REP exchanged so far.
func (c *ID) InitQPAttr(s QPState) (QPAttr, error) { return c.initQPAttr(s) }

// Destroy is ib_destroy_cm_id: it sends what the state demands (REJ in
// REQ_RCVD/REP_SENT/…, DREQ in Established, SIDR_REP reject in
// SIDR_REQ_RCVD), stops the ID's timers and frees it; no event is
// delivered on it afterwards. Destroying twice is a no-op.
func (c *ID) Destroy() { c.destroy() }
