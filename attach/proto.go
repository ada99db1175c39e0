package attach

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// Protocol constants (docs/attach.md).
const (
	// Magic is the first word of every message: the bytes "IDEA".
	Magic uint32 = 0x41454449
	// HeaderSize is the size of the message header.
	HeaderSize = 16
	// MaxMessage is the largest message, header included.
	MaxMessage = 64 << 10
	// MaxPayload is the largest payload.
	MaxPayload = MaxMessage - HeaderSize
	// Version is the protocol version HELLO carries.
	Version = 1
	// MaxFDs is the most descriptors one message may carry (CMD replies;
	// requests carry at most one).
	MaxFDs = 8
	// NameSize is the size of the fixed name fields (HELLO's program, the
	// reply's device).
	NameSize = 64
)

// Type is a message type. A reply carries the type and seq of its request.
type Type uint16

// Message types.
const (
	TypeHello Type = 1 // first message: client identity, /proc/self/mem
	TypeCmd   Type = 2 // one uverbs write() command
	TypeMmap  Type = 3 // mmap of the uverbs descriptor
	TypeMem   Type = 4 // a piece of shared memory handed over
	// TypeNotify asks for the post notification: an eventfd and a shared
	// page (docs/attach.md "NOTIFY"). Offered when the HELLO reply has
	// FeatureNotify.
	TypeNotify Type = 5
)

// Features are the bits of the HELLO reply's features word (the former
// reserved word: a daemon that predates them sends 0, and a client that
// predates them never looked at it).
const (
	// FeatureNotify: the daemon answers NOTIFY.
	FeatureNotify uint32 = 1 << 0
	// FeatureRdmaCM: the daemon serves /dev/infiniband/rdma_cm (a HELLO
	// with HelloRdmaCM opens an RDMA CM event channel, docs/cm.md).
	FeatureRdmaCM uint32 = 1 << 1
	// FeatureNetlink: the daemon accepted a HELLO with HelloNetlink; the
	// connection now carries raw NETLINK_RDMA messages (docs/attach.md
	// "Netlink connections"). Only set in the reply to such a HELLO.
	FeatureNetlink uint32 = 1 << 2
)

// HELLO flags: what the connection opens.
const (
	// HelloRdmaCM: this connection is an open of /dev/infiniband/rdma_cm
	// (one RDMA CM event channel, the kernel's ucma_file), not of a
	// uverbs device. Its CMD messages carry rdma_ucm commands.
	HelloRdmaCM uint32 = 1 << 0
	// HelloNetlink: this connection is a NETLINK_RDMA socket of the
	// program, not an open of a uverbs device. After the HELLO reply
	// every message in both directions is a raw netlink datagram.
	HelloNetlink uint32 = 1 << 1
)

func (t Type) String() string {
	switch t {
	case TypeHello:
		return "HELLO"
	case TypeCmd:
		return "CMD"
	case TypeMmap:
		return "MMAP"
	case TypeMem:
		return "MEM"
	case TypeNotify:
		return "NOTIFY"
	}
	return fmt.Sprintf("type(%d)", uint16(t))
}

// Known reports whether t is a request type of the protocol.
func (t Type) Known() bool { return t >= TypeHello && t <= TypeNotify }

// maxRequestFDs is how many descriptors a request of each type may carry.
func (t Type) maxRequestFDs() int {
	switch t {
	case TypeHello, TypeMem:
		return 1
	}
	return 0
}

// Fixed payload sizes.
const (
	HelloSize       = 16 + NameSize // u32 version, pid, flags, reserved; program
	HelloReplySize  = 16 + NameSize // s32 status; u32 version, abi_version, reserved; device
	CmdReplyMin     = 24            // CMD reply without fd offsets and response
	MmapSize        = 24            // u64 offset, length; u32 prot, flags
	MmapReplySize   = 16            // s32 status, u32 reserved, u64 fd_offset
	MemSize         = 24            // u64 addr, length, fd_offset
	StatusSize      = 4             // s32 status: MEM's reply and every error reply
	NotifySize      = 8             // u32 flags, reserved
	NotifyReplySize = 32            // s32 status; u32 flags, polling_off, counters_off; u64 page_offset; u32 qp_bits_off, qp_bits
)

// ErrMalformed is wrapped by every error about a message's form.
var ErrMalformed = errors.New("attach: malformed message")

func malformed(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, a...)...)
}

var le = binary.LittleEndian

// Header is the 16-byte message header; the magic is implicit.
type Header struct {
	Type  Type
	Flags uint16 // 0
	Seq   uint32 // chosen by the client, echoed in the reply
	Len   uint32 // payload bytes after the header
}

// Append appends the header's 16 bytes.
func (h Header) Append(b []byte) []byte {
	b = le.AppendUint32(b, Magic)
	b = le.AppendUint16(b, uint16(h.Type))
	b = le.AppendUint16(b, h.Flags)
	b = le.AppendUint32(b, h.Seq)
	return le.AppendUint32(b, h.Len)
}

// ParseHeader reads a header. It checks the magic only; ParseMessage checks
// the rest.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, malformed("%d bytes, shorter than a header", len(b))
	}
	h := Header{
		Type:  Type(le.Uint16(b[4:])),
		Flags: le.Uint16(b[6:]),
		Seq:   le.Uint32(b[8:]),
		Len:   le.Uint32(b[12:]),
	}
	if m := le.Uint32(b); m != Magic {
		return h, malformed("bad magic %#08x", m)
	}
	return h, nil
}

// ParseMessage splits a whole message into its header and payload and checks
// the magic, the flags, the size limit and that the length field matches.
// It does not check the type. The header is returned even with an error
// when it could be read, so that an error reply can echo its seq.
func ParseMessage(b []byte) (Header, []byte, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return h, nil, err
	}
	switch {
	case len(b) > MaxMessage:
		return h, nil, malformed("%d bytes, more than %d", len(b), MaxMessage)
	case h.Flags != 0:
		return h, nil, malformed("flags %#x", h.Flags)
	case uint64(h.Len) != uint64(len(b)-HeaderSize):
		return h, nil, malformed("length field %d, payload %d bytes", h.Len, len(b)-HeaderSize)
	}
	return h, b[HeaderSize:], nil
}

// AppendMessage appends a header for payload and the payload.
func AppendMessage(b []byte, t Type, seq uint32, payload []byte) []byte {
	b = Header{Type: t, Seq: seq, Len: uint32(len(payload))}.Append(b)
	return append(b, payload...)
}

func appendName(b []byte, s string) []byte {
	var n [NameSize]byte
	copy(n[:NameSize-1], s) // keep a terminating NUL for C readers
	return append(b, n[:]...)
}

func parseName(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// Hello is the HELLO request.
type Hello struct {
	Version uint32 // Version
	PID     uint32 // the client's pid, for logs
	Flags   uint32 // HelloRdmaCM, HelloNetlink or 0
	// Port is the netlink port id the program's socket reports
	// (getsockname, nlmsg_pid of the replies) for HelloNetlink; 0
	// otherwise (the word was reserved and sent as 0).
	Port    uint32
	Program string // the program's name, for logs (at most 63 bytes kept)
}

// Append appends the HELLO payload.
func (m Hello) Append(b []byte) []byte {
	b = le.AppendUint32(b, m.Version)
	b = le.AppendUint32(b, m.PID)
	b = le.AppendUint32(b, m.Flags)
	b = le.AppendUint32(b, m.Port)
	return appendName(b, m.Program)
}

// ParseHello reads a HELLO payload.
func ParseHello(p []byte) (Hello, error) {
	if len(p) != HelloSize {
		return Hello{}, malformed("HELLO payload %d bytes, want %d", len(p), HelloSize)
	}
	return Hello{
		Version: le.Uint32(p),
		PID:     le.Uint32(p[4:]),
		Flags:   le.Uint32(p[8:]),
		Port:    le.Uint32(p[12:]),
		Program: parseName(p[16:]),
	}, nil
}

// HelloReply is the reply to HELLO.
type HelloReply struct {
	Status     int32  // 0 or a negative errno
	Version    uint32 // the daemon's protocol version
	ABIVersion uint32 // uverbs driver ABI (5 for irdma)
	Features   uint32 // Feature* bits: what the daemon offers beyond version 1's messages
	Device     string // the device's name, e.g. irdma0
}

// Append appends the HELLO reply payload.
func (m HelloReply) Append(b []byte) []byte {
	b = le.AppendUint32(b, uint32(m.Status))
	b = le.AppendUint32(b, m.Version)
	b = le.AppendUint32(b, m.ABIVersion)
	b = le.AppendUint32(b, m.Features)
	return appendName(b, m.Device)
}

// ParseHelloReply reads a HELLO reply payload (full form only; see
// ParseStatus for error replies).
func ParseHelloReply(p []byte) (HelloReply, error) {
	if len(p) != HelloReplySize {
		return HelloReply{}, malformed("HELLO reply %d bytes, want %d", len(p), HelloReplySize)
	}
	return HelloReply{
		Status:     int32(le.Uint32(p)),
		Version:    le.Uint32(p[4:]),
		ABIVersion: le.Uint32(p[8:]),
		Features:   le.Uint32(p[12:]),
		Device:     parseName(p[16:]),
	}, nil
}

// CmdReplyWire is the CMD reply as it travels: the descriptors themselves
// go beside it, one per offset, in the same order.
type CmdReplyWire struct {
	Status    int32    // what write() returns: the command length or a negative errno
	RespAddr  uint64   // where the client copies Resp; 0 for none
	FDOffsets []uint32 // where descriptor i's number goes inside Resp
	Resp      []byte   // the response bytes
}

// Check reports whether the reply can be sent: at most MaxFDs offsets, each
// s32 slot inside the response, and the whole message within MaxMessage.
func (m CmdReplyWire) Check() error {
	if len(m.FDOffsets) > MaxFDs {
		return malformed("CMD reply with %d descriptors, at most %d", len(m.FDOffsets), MaxFDs)
	}
	for i, off := range m.FDOffsets {
		if uint64(off)+4 > uint64(len(m.Resp)) {
			return malformed("CMD reply fd_off[%d]=%d outside a %d-byte response", i, off, len(m.Resp))
		}
	}
	if n := HeaderSize + CmdReplyMin + 4*len(m.FDOffsets) + len(m.Resp); n > MaxMessage {
		return malformed("CMD reply of %d bytes, more than %d", n, MaxMessage)
	}
	return nil
}

// Append appends the CMD reply payload. It does not check; see Check.
func (m CmdReplyWire) Append(b []byte) []byte {
	b = le.AppendUint32(b, uint32(m.Status))
	b = le.AppendUint32(b, uint32(len(m.FDOffsets)))
	b = le.AppendUint64(b, m.RespAddr)
	b = le.AppendUint32(b, uint32(len(m.Resp)))
	b = le.AppendUint32(b, 0)
	for _, off := range m.FDOffsets {
		b = le.AppendUint32(b, off)
	}
	return append(b, m.Resp...)
}

// ParseCmdReply reads a CMD reply payload (full form only) and checks it as
// Check does. Resp aliases p.
func ParseCmdReply(p []byte) (CmdReplyWire, error) {
	if len(p) < CmdReplyMin {
		return CmdReplyWire{}, malformed("CMD reply %d bytes, shorter than %d", len(p), CmdReplyMin)
	}
	nfd := le.Uint32(p[4:])
	respLen := le.Uint32(p[16:])
	if nfd > MaxFDs {
		return CmdReplyWire{}, malformed("CMD reply with %d descriptors, at most %d", nfd, MaxFDs)
	}
	want := uint64(CmdReplyMin) + 4*uint64(nfd) + uint64(respLen)
	if want != uint64(len(p)) {
		return CmdReplyWire{}, malformed("CMD reply %d bytes, its fields say %d", len(p), want)
	}
	m := CmdReplyWire{
		Status:   int32(le.Uint32(p)),
		RespAddr: le.Uint64(p[8:]),
	}
	if nfd > 0 {
		m.FDOffsets = make([]uint32, nfd)
		for i := range m.FDOffsets {
			m.FDOffsets[i] = le.Uint32(p[CmdReplyMin+4*i:])
		}
	}
	m.Resp = p[CmdReplyMin+4*int(nfd):]
	if err := m.Check(); err != nil {
		return CmdReplyWire{}, err
	}
	return m, nil
}

// MmapRequest is the MMAP request: the arguments of the program's mmap().
type MmapRequest struct {
	Offset uint64 // the mmap key (e.g. irdma's db_mmap_key)
	Length uint64
	Prot   uint32 // PROT_* as the program passed them
	Flags  uint32 // MAP_* as the program passed them
}

// Append appends the MMAP payload.
func (m MmapRequest) Append(b []byte) []byte {
	b = le.AppendUint64(b, m.Offset)
	b = le.AppendUint64(b, m.Length)
	b = le.AppendUint32(b, m.Prot)
	return le.AppendUint32(b, m.Flags)
}

// ParseMmap reads an MMAP payload.
func ParseMmap(p []byte) (MmapRequest, error) {
	if len(p) != MmapSize {
		return MmapRequest{}, malformed("MMAP payload %d bytes, want %d", len(p), MmapSize)
	}
	return MmapRequest{
		Offset: le.Uint64(p),
		Length: le.Uint64(p[8:]),
		Prot:   le.Uint32(p[16:]),
		Flags:  le.Uint32(p[20:]),
	}, nil
}

// MmapReply is the reply to MMAP; the memfd travels beside it.
type MmapReply struct {
	Status   int32
	FDOffset uint64 // where in the memfd the mapping starts
}

// Append appends the MMAP reply payload.
func (m MmapReply) Append(b []byte) []byte {
	b = le.AppendUint32(b, uint32(m.Status))
	b = le.AppendUint32(b, 0)
	return le.AppendUint64(b, m.FDOffset)
}

// ParseMmapReply reads an MMAP reply payload (full form only).
func ParseMmapReply(p []byte) (MmapReply, error) {
	if len(p) != MmapReplySize {
		return MmapReply{}, malformed("MMAP reply %d bytes, want %d", len(p), MmapReplySize)
	}
	return MmapReply{Status: int32(le.Uint32(p)), FDOffset: le.Uint64(p[8:])}, nil
}

// MemRequest is the MEM request; the memfd travels beside it.
type MemRequest struct {
	Addr     uint64 // the range's address in the client
	Length   uint64
	FDOffset uint64 // the memfd offset mapped at Addr
}

// Append appends the MEM payload.
func (m MemRequest) Append(b []byte) []byte {
	b = le.AppendUint64(b, m.Addr)
	b = le.AppendUint64(b, m.Length)
	return le.AppendUint64(b, m.FDOffset)
}

// ParseMem reads a MEM payload.
func ParseMem(p []byte) (MemRequest, error) {
	if len(p) != MemSize {
		return MemRequest{}, malformed("MEM payload %d bytes, want %d", len(p), MemSize)
	}
	return MemRequest{Addr: le.Uint64(p), Length: le.Uint64(p[8:]), FDOffset: le.Uint64(p[16:])}, nil
}

// AppendStatus appends a 4-byte status payload: MEM's reply, and the short
// form every error reply takes.
func AppendStatus(b []byte, status int32) []byte {
	return le.AppendUint32(b, uint32(status))
}

// ParseStatus reads a reply's leading status. A reply whose payload is
// exactly StatusSize bytes is a status-only reply: MEM's normal reply, or an
// error reply to any request (the connection is closed after a protocol
// error).
func ParseStatus(p []byte) (int32, error) {
	if len(p) < StatusSize {
		return 0, malformed("reply of %d bytes has no status", len(p))
	}
	return int32(le.Uint32(p)), nil
}

// NotifyRequest is the NOTIFY request.
type NotifyRequest struct {
	Flags uint32 // 0 or NotifyQPBits
}

// NotifyQPBits, in NOTIFY's flags, asks that notifications name the QP;
// in the reply's, grants it. With it the page holds a bit per QP id
// (QPBits bits from QPBitsOff, id modulo QPBits): the client sets the
// posting QP's bit before it writes the eventfd, and the daemon wakes the
// QPs whose bits it clears instead of every QP of the context.
const NotifyQPBits uint32 = 1 << 0

// Append appends the NOTIFY payload.
func (m NotifyRequest) Append(b []byte) []byte {
	b = le.AppendUint32(b, m.Flags)
	return le.AppendUint32(b, 0)
}

// ParseNotify reads a NOTIFY payload: flags hold no bit but NotifyQPBits,
// the reserved word is 0.
func ParseNotify(p []byte) (NotifyRequest, error) {
	if len(p) != NotifySize {
		return NotifyRequest{}, malformed("NOTIFY payload %d bytes, want %d", len(p), NotifySize)
	}
	m := NotifyRequest{Flags: le.Uint32(p)}
	if m.Flags&^NotifyQPBits != 0 || le.Uint32(p[4:]) != 0 {
		return NotifyRequest{}, malformed("NOTIFY flags %#x reserved %#x", m.Flags, le.Uint32(p[4:]))
	}
	return m, nil
}

// NotifyReply is the reply to NOTIFY; on success an eventfd and a memfd
// travel beside it, in that order. The page is NotifyPageSize bytes of
// the memfd at PageOffset: the daemon keeps the u32 at PollingOff 1 while
// it polls the context's doorbells and 0 when a post must be notified;
// the client counts its notifications and the posts it did not notify in
// the two u64 at CountersOff. With NotifyQPBits in Flags, the QPBits bits
// at QPBitsOff (u64 words, bit id%64 of word id/64 for QP id modulo
// QPBits) name the QPs notified; without it both are 0.
type NotifyReply struct {
	Status      int32
	Flags       uint32 // 0 or NotifyQPBits
	PollingOff  uint32
	CountersOff uint32
	PageOffset  uint64
	QPBitsOff   uint32
	QPBits      uint32
}

// NotifyPageSize is the size of the notify page.
const NotifyPageSize = 4096

// Append appends the NOTIFY reply payload.
func (m NotifyReply) Append(b []byte) []byte {
	b = le.AppendUint32(b, uint32(m.Status))
	b = le.AppendUint32(b, m.Flags)
	b = le.AppendUint32(b, m.PollingOff)
	b = le.AppendUint32(b, m.CountersOff)
	b = le.AppendUint64(b, m.PageOffset)
	b = le.AppendUint32(b, m.QPBitsOff)
	return le.AppendUint32(b, m.QPBits)
}

// ParseNotifyReply reads a NOTIFY reply payload (full form only) and
// checks that the words it names lie inside the page, aligned and apart.
func ParseNotifyReply(p []byte) (NotifyReply, error) {
	if len(p) != NotifyReplySize {
		return NotifyReply{}, malformed("NOTIFY reply %d bytes, want %d", len(p), NotifyReplySize)
	}
	m := NotifyReply{Status: int32(le.Uint32(p)), Flags: le.Uint32(p[4:]), PollingOff: le.Uint32(p[8:]),
		CountersOff: le.Uint32(p[12:]), PageOffset: le.Uint64(p[16:]), QPBitsOff: le.Uint32(p[24:]), QPBits: le.Uint32(p[28:])}
	if m.Status != 0 {
		return m, nil
	}
	if m.Flags&^NotifyQPBits != 0 || m.PollingOff%4 != 0 || m.PollingOff+4 > NotifyPageSize ||
		m.CountersOff%8 != 0 || m.CountersOff+16 > NotifyPageSize || m.PageOffset%NotifyPageSize != 0 ||
		overlap(m.PollingOff, 4, m.CountersOff, 16) {
		return NotifyReply{}, malformed("NOTIFY reply flags %#x, polling word %d, counters %d, page %#x",
			m.Flags, m.PollingOff, m.CountersOff, m.PageOffset)
	}
	if m.Flags&NotifyQPBits == 0 {
		if m.QPBitsOff != 0 || m.QPBits != 0 {
			return NotifyReply{}, malformed("NOTIFY reply names QP bits %d+%d without the flag", m.QPBitsOff, m.QPBits)
		}
		return m, nil
	}
	n := m.QPBits / 8
	if m.QPBits == 0 || m.QPBits%64 != 0 || m.QPBitsOff%8 != 0 || m.QPBits > 8*NotifyPageSize ||
		m.QPBitsOff > NotifyPageSize-n || overlap(m.QPBitsOff, n, m.PollingOff, 4) || overlap(m.QPBitsOff, n, m.CountersOff, 16) {
		return NotifyReply{}, malformed("NOTIFY reply names QP bits %d+%d", m.QPBitsOff, m.QPBits)
	}
	return m, nil
}

// overlap reports whether byte ranges [a, a+an) and [b, b+bn) meet.
func overlap(a, an, b, bn uint32) bool { return a < b+bn && b < a+an }
