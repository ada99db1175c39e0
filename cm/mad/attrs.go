package mad

// The CM message layouts, IBTA Vol 1 §12.6 (Tables 106–120). Offsets
// are absolute in the MAD: HeaderSize + the table's byte offset.

// MsgResponse says which message an MRA or REJ answers (IBTA §12.6.6
// "Message MRAed", §12.6.7 "Message Rejected"; cm.c enum cm_msg_response).
type MsgResponse uint8

const (
	MsgREQ   MsgResponse = 0
	MsgREP   MsgResponse = 1
	MsgOther MsgResponse = 2 // LAP, or a REJ after the connection formed
)

// Private data field sizes (the kernel's enum ib_cm_data_size).
const (
	REQPrivateDataSize     = 92
	MRAPrivateDataSize     = 222
	REJPrivateDataSize     = 148
	REJARISize             = 72
	REPPrivateDataSize     = 196
	RTUPrivateDataSize     = 224
	DREQPrivateDataSize    = 220
	DREPPrivateDataSize    = 224
	SIDRREQPrivateDataSize = 216
	SIDRREPInfoSize        = 72
	SIDRREPPrivateDataSize = 136
)

// Comm IDs: every connection message but SIDR begins with the sender's
// and the receiver's communication IDs (a REQ has only the first).
const (
	offLocalCommID  = HeaderSize + 0
	offRemoteCommID = HeaderSize + 4
)

// CommIDs is the view shared by MRA, REJ, REP, RTU, DREQ and DREP.
type CommIDs []byte

func (m CommIDs) LocalCommID() uint32      { return be32(m, offLocalCommID) }
func (m CommIDs) RemoteCommID() uint32     { return be32(m, offRemoteCommID) }
func (m CommIDs) SetLocalCommID(v uint32)  { put32(m, offLocalCommID, v) }
func (m CommIDs) SetRemoteCommID(v uint32) { put32(m, offRemoteCommID, v) }

// REQ (Table 106).
const (
	offREQServiceID     = HeaderSize + 8
	offREQLocalCAGUID   = HeaderSize + 16
	offREQLocalQKey     = HeaderSize + 28
	offREQLocalQPN      = HeaderSize + 32 // 24 bits
	offREQRespResources = HeaderSize + 35
	offREQLocalEECN     = HeaderSize + 36 // 24 bits; ECE vendor ID in newer kernels
	offREQInitDepth     = HeaderSize + 39
	offREQRemoteEECN    = HeaderSize + 40 // 24 bits
	offREQByte43        = HeaderSize + 43 // remote CM response timeout:5, transport:2, flow control:1
	offREQStartingPSN   = HeaderSize + 44 // 24 bits
	offREQByte47        = HeaderSize + 47 // local CM response timeout:5, retry count:3
	offREQPKey          = HeaderSize + 48
	offREQByte50        = HeaderSize + 50 // path MTU:4, RDC exists:1, RNR retry count:3
	offREQByte51        = HeaderSize + 51 // max CM retries:4, SRQ:1, extended transport:3
	offREQPrimary       = HeaderSize + 52
	offREQAlternate     = HeaderSize + 96
	offREQPrivateData   = HeaderSize + 140
	pathLocalLID        = 0
	pathRemoteLID       = 2
	pathLocalGID        = 4
	pathRemoteGID       = 20
	pathFlowLabel       = 36 // top 20 bits of the word; packet rate: low 6 bits of byte 39
	pathPacketRate      = 39
	pathTrafficClass    = 40
	pathHopLimit        = 41
	pathSL              = 42 // SL:4, subnet local:1
	pathLocalACKTimeout = 43 // 5 bits
	pathSize            = 44
)

// REQ is a view of a REQ MAD.
type REQ []byte

func (m REQ) LocalCommID() uint32            { return be32(m, offLocalCommID) }
func (m REQ) ServiceID() uint64              { return be64(m, offREQServiceID) }
func (m REQ) LocalCAGUID() uint64            { return be64(m, offREQLocalCAGUID) }
func (m REQ) LocalQKey() uint32              { return be32(m, offREQLocalQKey) }
func (m REQ) LocalQPN() uint32               { return be24(m, offREQLocalQPN) }
func (m REQ) ResponderResources() uint8      { return m[offREQRespResources] }
func (m REQ) LocalEECN() uint32              { return be24(m, offREQLocalEECN) }
func (m REQ) InitiatorDepth() uint8          { return m[offREQInitDepth] }
func (m REQ) RemoteEECN() uint32             { return be24(m, offREQRemoteEECN) }
func (m REQ) RemoteCMResponseTimeout() uint8 { return bits(m, offREQByte43, 0, 5) }
func (m REQ) TransportServiceType() uint8    { return bits(m, offREQByte43, 5, 2) }
func (m REQ) FlowControl() bool              { return bits(m, offREQByte43, 7, 1) == 1 }
func (m REQ) StartingPSN() uint32            { return be24(m, offREQStartingPSN) }
func (m REQ) LocalCMResponseTimeout() uint8  { return bits(m, offREQByte47, 0, 5) }
func (m REQ) RetryCount() uint8              { return bits(m, offREQByte47, 5, 3) }
func (m REQ) PKey() uint16                   { return be16(m, offREQPKey) }
func (m REQ) PathMTU() uint8                 { return bits(m, offREQByte50, 0, 4) }
func (m REQ) RDCExists() bool                { return bits(m, offREQByte50, 4, 1) == 1 }
func (m REQ) RNRRetryCount() uint8           { return bits(m, offREQByte50, 5, 3) }
func (m REQ) MaxCMRetries() uint8            { return bits(m, offREQByte51, 0, 4) }
func (m REQ) SRQ() bool                      { return bits(m, offREQByte51, 4, 1) == 1 }
func (m REQ) ExtTransportType() uint8        { return bits(m, offREQByte51, 5, 3) }
func (m REQ) Primary() Path                  { return Path(m[offREQPrimary:offREQAlternate]) }
func (m REQ) Alternate() Path                { return Path(m[offREQAlternate:offREQPrivateData]) }
func (m REQ) PrivateData() []byte            { return m[offREQPrivateData:Size] }

func (m REQ) SetLocalCommID(v uint32)            { put32(m, offLocalCommID, v) }
func (m REQ) SetServiceID(v uint64)              { put64(m, offREQServiceID, v) }
func (m REQ) SetLocalCAGUID(v uint64)            { put64(m, offREQLocalCAGUID, v) }
func (m REQ) SetLocalQKey(v uint32)              { put32(m, offREQLocalQKey, v) }
func (m REQ) SetLocalQPN(v uint32)               { put24(m, offREQLocalQPN, v) }
func (m REQ) SetResponderResources(v uint8)      { m[offREQRespResources] = v }
func (m REQ) SetInitiatorDepth(v uint8)          { m[offREQInitDepth] = v }
func (m REQ) SetRemoteCMResponseTimeout(v uint8) { setBits(m, offREQByte43, 0, 5, v) }
func (m REQ) SetTransportServiceType(v uint8)    { setBits(m, offREQByte43, 5, 2, v) }
func (m REQ) SetFlowControl(v bool)              { setBits(m, offREQByte43, 7, 1, flag(v)) }
func (m REQ) SetStartingPSN(v uint32)            { put24(m, offREQStartingPSN, v) }
func (m REQ) SetLocalCMResponseTimeout(v uint8)  { setBits(m, offREQByte47, 0, 5, v) }
func (m REQ) SetRetryCount(v uint8)              { setBits(m, offREQByte47, 5, 3, v) }
func (m REQ) SetPKey(v uint16)                   { put16(m, offREQPKey, v) }
func (m REQ) SetPathMTU(v uint8)                 { setBits(m, offREQByte50, 0, 4, v) }
func (m REQ) SetRNRRetryCount(v uint8)           { setBits(m, offREQByte50, 5, 3, v) }
func (m REQ) SetMaxCMRetries(v uint8)            { setBits(m, offREQByte51, 0, 4, v) }
func (m REQ) SetSRQ(v bool)                      { setBits(m, offREQByte51, 4, 1, flag(v)) }

// Path is a view of a REQ's primary or alternate path (44 bytes).
type Path []byte

func (p Path) LocalLID() uint16  { return be16(p, pathLocalLID) }
func (p Path) RemoteLID() uint16 { return be16(p, pathRemoteLID) }
func (p Path) LocalGID() (g [16]byte) {
	copy(g[:], p[pathLocalGID:pathLocalGID+16])
	return g
}
func (p Path) RemoteGID() (g [16]byte) {
	copy(g[:], p[pathRemoteGID:pathRemoteGID+16])
	return g
}
func (p Path) FlowLabel() uint32       { return be32(p, pathFlowLabel) >> 12 }
func (p Path) PacketRate() uint8       { return bits(p, pathPacketRate, 2, 6) }
func (p Path) TrafficClass() uint8     { return p[pathTrafficClass] }
func (p Path) HopLimit() uint8         { return p[pathHopLimit] }
func (p Path) SL() uint8               { return bits(p, pathSL, 0, 4) }
func (p Path) SubnetLocal() bool       { return bits(p, pathSL, 4, 1) == 1 }
func (p Path) LocalACKTimeout() uint8  { return bits(p, pathLocalACKTimeout, 0, 5) }
func (p Path) SetLocalLID(v uint16)    { put16(p, pathLocalLID, v) }
func (p Path) SetRemoteLID(v uint16)   { put16(p, pathRemoteLID, v) }
func (p Path) SetLocalGID(g [16]byte)  { copy(p[pathLocalGID:], g[:]) }
func (p Path) SetRemoteGID(g [16]byte) { copy(p[pathRemoteGID:], g[:]) }
func (p Path) SetFlowLabel(v uint32) {
	w := be32(p, pathFlowLabel)&0xfff | (v&0xfffff)<<12
	put32(p, pathFlowLabel, w)
}
func (p Path) SetPacketRate(v uint8)      { setBits(p, pathPacketRate, 2, 6, v) }
func (p Path) SetTrafficClass(v uint8)    { p[pathTrafficClass] = v }
func (p Path) SetHopLimit(v uint8)        { p[pathHopLimit] = v }
func (p Path) SetSL(v uint8)              { setBits(p, pathSL, 0, 4, v) }
func (p Path) SetSubnetLocal(v bool)      { setBits(p, pathSL, 4, 1, flag(v)) }
func (p Path) SetLocalACKTimeout(v uint8) { setBits(p, pathLocalACKTimeout, 0, 5, v) }

// MRA (Table 107).
const (
	offMRAMsgMRAed      = HeaderSize + 8 // 2 bits
	offMRAServiceTimout = HeaderSize + 9 // 5 bits
	offMRAPrivateData   = HeaderSize + 10
)

// MRA is a view of an MRA MAD.
type MRA []byte

func (m MRA) CommIDs() CommIDs              { return CommIDs(m) }
func (m MRA) MessageMRAed() MsgResponse     { return MsgResponse(bits(m, offMRAMsgMRAed, 0, 2)) }
func (m MRA) ServiceTimeout() uint8         { return bits(m, offMRAServiceTimout, 0, 5) }
func (m MRA) PrivateData() []byte           { return m[offMRAPrivateData:Size] }
func (m MRA) SetMessageMRAed(v MsgResponse) { setBits(m, offMRAMsgMRAed, 0, 2, uint8(v)) }
func (m MRA) SetServiceTimeout(v uint8)     { setBits(m, offMRAServiceTimout, 0, 5, v) }

// REJ (Table 108).
const (
	offREJMsgRejected = HeaderSize + 8 // 2 bits
	offREJInfoLength  = HeaderSize + 9 // 7 bits
	offREJReason      = HeaderSize + 10
	offREJARI         = HeaderSize + 12
	offREJPrivateData = HeaderSize + 84
)

// REJ is a view of a REJ MAD.
type REJ []byte

func (m REJ) CommIDs() CommIDs                 { return CommIDs(m) }
func (m REJ) MessageRejected() MsgResponse     { return MsgResponse(bits(m, offREJMsgRejected, 0, 2)) }
func (m REJ) RejectedInfoLength() uint8        { return bits(m, offREJInfoLength, 0, 7) }
func (m REJ) Reason() uint16                   { return be16(m, offREJReason) }
func (m REJ) ARI() []byte                      { return m[offREJARI:offREJPrivateData] }
func (m REJ) PrivateData() []byte              { return m[offREJPrivateData:Size] }
func (m REJ) SetMessageRejected(v MsgResponse) { setBits(m, offREJMsgRejected, 0, 2, uint8(v)) }
func (m REJ) SetRejectedInfoLength(v uint8)    { setBits(m, offREJInfoLength, 0, 7, v) }
func (m REJ) SetReason(v uint16)               { put16(m, offREJReason, v) }

// REP (Table 110).
const (
	offREPLocalQKey   = HeaderSize + 8
	offREPLocalQPN    = HeaderSize + 12 // 24 bits
	offREPLocalEECN   = HeaderSize + 16 // 24 bits
	offREPStartingPSN = HeaderSize + 20 // 24 bits
	offREPRespRes     = HeaderSize + 24
	offREPInitDepth   = HeaderSize + 25
	offREPByte26      = HeaderSize + 26 // target ACK delay:5, failover accepted:2, flow control:1
	offREPByte27      = HeaderSize + 27 // RNR retry count:3, SRQ:1
	offREPLocalCAGUID = HeaderSize + 28
	offREPPrivateData = HeaderSize + 36
)

// REP is a view of a REP MAD.
type REP []byte

func (m REP) CommIDs() CommIDs              { return CommIDs(m) }
func (m REP) LocalQKey() uint32             { return be32(m, offREPLocalQKey) }
func (m REP) LocalQPN() uint32              { return be24(m, offREPLocalQPN) }
func (m REP) LocalEECN() uint32             { return be24(m, offREPLocalEECN) }
func (m REP) StartingPSN() uint32           { return be24(m, offREPStartingPSN) }
func (m REP) ResponderResources() uint8     { return m[offREPRespRes] }
func (m REP) InitiatorDepth() uint8         { return m[offREPInitDepth] }
func (m REP) TargetACKDelay() uint8         { return bits(m, offREPByte26, 0, 5) }
func (m REP) FailoverAccepted() uint8       { return bits(m, offREPByte26, 5, 2) }
func (m REP) FlowControl() bool             { return bits(m, offREPByte26, 7, 1) == 1 }
func (m REP) RNRRetryCount() uint8          { return bits(m, offREPByte27, 0, 3) }
func (m REP) SRQ() bool                     { return bits(m, offREPByte27, 3, 1) == 1 }
func (m REP) LocalCAGUID() uint64           { return be64(m, offREPLocalCAGUID) }
func (m REP) PrivateData() []byte           { return m[offREPPrivateData:Size] }
func (m REP) SetLocalQKey(v uint32)         { put32(m, offREPLocalQKey, v) }
func (m REP) SetLocalQPN(v uint32)          { put24(m, offREPLocalQPN, v) }
func (m REP) SetStartingPSN(v uint32)       { put24(m, offREPStartingPSN, v) }
func (m REP) SetResponderResources(v uint8) { m[offREPRespRes] = v }
func (m REP) SetInitiatorDepth(v uint8)     { m[offREPInitDepth] = v }
func (m REP) SetTargetACKDelay(v uint8)     { setBits(m, offREPByte26, 0, 5, v) }
func (m REP) SetFailoverAccepted(v uint8)   { setBits(m, offREPByte26, 5, 2, v) }
func (m REP) SetFlowControl(v bool)         { setBits(m, offREPByte26, 7, 1, flag(v)) }
func (m REP) SetRNRRetryCount(v uint8)      { setBits(m, offREPByte27, 0, 3, v) }
func (m REP) SetSRQ(v bool)                 { setBits(m, offREPByte27, 3, 1, flag(v)) }
func (m REP) SetLocalCAGUID(v uint64)       { put64(m, offREPLocalCAGUID, v) }

// RTU (Table 111) and DREP (Table 113): the comm IDs and private data.
const offRTUPrivateData = HeaderSize + 8

// RTU is a view of an RTU MAD.
type RTU []byte

func (m RTU) CommIDs() CommIDs    { return CommIDs(m) }
func (m RTU) PrivateData() []byte { return m[offRTUPrivateData:Size] }

// DREP is a view of a DREP MAD.
type DREP []byte

func (m DREP) CommIDs() CommIDs    { return CommIDs(m) }
func (m DREP) PrivateData() []byte { return m[offRTUPrivateData:Size] }

// DREQ (Table 112).
const (
	offDREQRemoteQPN   = HeaderSize + 8 // 24 bits (QPN or EECN)
	offDREQPrivateData = HeaderSize + 12
)

// DREQ is a view of a DREQ MAD.
type DREQ []byte

func (m DREQ) CommIDs() CommIDs      { return CommIDs(m) }
func (m DREQ) RemoteQPN() uint32     { return be24(m, offDREQRemoteQPN) }
func (m DREQ) PrivateData() []byte   { return m[offDREQPrivateData:Size] }
func (m DREQ) SetRemoteQPN(v uint32) { put24(m, offDREQRemoteQPN, v) }

// SIDR_REQ (Table 119).
const (
	offSIDRRequestID      = HeaderSize + 0
	offSIDRREQPKey        = HeaderSize + 4
	offSIDRREQServiceID   = HeaderSize + 8
	offSIDRREQPrivateData = HeaderSize + 16
)

// SIDRREQ is a view of a SIDR_REQ MAD.
type SIDRREQ []byte

func (m SIDRREQ) RequestID() uint32     { return be32(m, offSIDRRequestID) }
func (m SIDRREQ) PKey() uint16          { return be16(m, offSIDRREQPKey) }
func (m SIDRREQ) ServiceID() uint64     { return be64(m, offSIDRREQServiceID) }
func (m SIDRREQ) PrivateData() []byte   { return m[offSIDRREQPrivateData:Size] }
func (m SIDRREQ) SetRequestID(v uint32) { put32(m, offSIDRRequestID, v) }
func (m SIDRREQ) SetPKey(v uint16)      { put16(m, offSIDRREQPKey, v) }
func (m SIDRREQ) SetServiceID(v uint64) { put64(m, offSIDRREQServiceID, v) }

// SIDR_REP (Table 120).
const (
	offSIDRREPStatus      = HeaderSize + 4
	offSIDRREPInfoLength  = HeaderSize + 5
	offSIDRREPQPN         = HeaderSize + 8 // 24 bits
	offSIDRREPServiceID   = HeaderSize + 12
	offSIDRREPQKey        = HeaderSize + 20
	offSIDRREPInfo        = HeaderSize + 24
	offSIDRREPPrivateData = HeaderSize + 96
)

// SIDRREP is a view of a SIDR_REP MAD.
type SIDRREP []byte

func (m SIDRREP) RequestID() uint32     { return be32(m, offSIDRRequestID) }
func (m SIDRREP) Status() uint8         { return m[offSIDRREPStatus] }
func (m SIDRREP) InfoLength() uint8     { return m[offSIDRREPInfoLength] }
func (m SIDRREP) QPN() uint32           { return be24(m, offSIDRREPQPN) }
func (m SIDRREP) ServiceID() uint64     { return be64(m, offSIDRREPServiceID) }
func (m SIDRREP) QKey() uint32          { return be32(m, offSIDRREPQKey) }
func (m SIDRREP) Info() []byte          { return m[offSIDRREPInfo:offSIDRREPPrivateData] }
func (m SIDRREP) PrivateData() []byte   { return m[offSIDRREPPrivateData:Size] }
func (m SIDRREP) SetRequestID(v uint32) { put32(m, offSIDRRequestID, v) }
func (m SIDRREP) SetStatus(v uint8)     { m[offSIDRREPStatus] = v }
func (m SIDRREP) SetInfoLength(v uint8) { m[offSIDRREPInfoLength] = v }
func (m SIDRREP) SetQPN(v uint32)       { put24(m, offSIDRREPQPN, v) }
func (m SIDRREP) SetServiceID(v uint64) { put64(m, offSIDRREPServiceID, v) }
func (m SIDRREP) SetQKey(v uint32)      { put32(m, offSIDRREPQKey, v) }
