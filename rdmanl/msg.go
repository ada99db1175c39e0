package rdmanl

import (
	"bytes"
	"encoding/binary"
	"errors"
)

var le = binary.LittleEndian // netlink is host order; the project runs on little-endian hosts (x86_64, aarch64)

// HeaderLen is sizeof(struct nlmsghdr).
const HeaderLen = 16

// Header is a view of struct nlmsghdr: len, type, flags, seq, pid.
type Header []byte

func (h Header) Len() uint32   { return le.Uint32(h[0:]) }
func (h Header) Type() uint16  { return le.Uint16(h[4:]) }
func (h Header) Flags() uint16 { return le.Uint16(h[6:]) }
func (h Header) Seq() uint32   { return le.Uint32(h[8:]) }
func (h Header) PID() uint32   { return le.Uint32(h[12:]) }

// align4 is NLMSG_ALIGN / NLA_ALIGN.
func align4(n int) int { return (n + 3) &^ 3 }

// Split cuts a datagram into its messages as netlink_rcv_skb walks it:
// a message shorter than a header, or longer than what is left, ends the
// walk (the kernel ignores the rest silently).
func Split(b []byte) []Header {
	var out []Header
	for len(b) >= HeaderLen {
		h := Header(b)
		n := int(h.Len())
		if n < HeaderLen || n > len(b) {
			break
		}
		out = append(out, Header(b[:n]))
		next := align4(n)
		if next > len(b) {
			break
		}
		b = b[next:]
	}
	return out
}

// attrHeaderLen is sizeof(struct nlattr).
const attrHeaderLen = 4

// nlaTypeMask clears NLA_F_NESTED and NLA_F_NET_BYTEORDER.
const nlaTypeMask = 0x3fff

var errAttr = errors.New("rdmanl: malformed attribute")

// Attrs are the attributes of one level, by type (the last of a type
// wins, as nla_parse keeps it).
type Attrs map[uint16][]byte

// ParseAttrs reads a run of nlattrs as the kernel's liberal nla_parse
// does: unknown types are kept (and ignored by the caller); bytes left
// over that do not form an attribute (a length below the header or past
// the end) are an error, -EINVAL.
func ParseAttrs(b []byte) (Attrs, error) {
	a := Attrs{}
	for len(b) > 0 {
		if len(b) < attrHeaderLen {
			return nil, errAttr
		}
		n := int(le.Uint16(b))
		if n < attrHeaderLen || n > len(b) {
			return nil, errAttr
		}
		a[le.Uint16(b[2:])&nlaTypeMask] = b[attrHeaderLen:n]
		next := align4(n)
		if next >= len(b) {
			break
		}
		b = b[next:]
	}
	return a, nil
}

// U32 returns a u32 attribute; ok is false when it is absent. A payload
// shorter than 4 bytes is an error (validate_nla: -ERANGE).
func (a Attrs) U32(t uint16) (v uint32, ok bool, err error) {
	p, ok := a[t]
	if !ok {
		return 0, false, nil
	}
	if len(p) < 4 {
		return 0, true, errAttr
	}
	return le.Uint32(p), true, nil
}

// String returns a string attribute up to its NUL (NLA_NUL_STRING);
// one without a NUL within max bytes is an error.
func (a Attrs) String(t uint16, max int) (s string, ok bool, err error) {
	p, ok := a[t]
	if !ok {
		return "", false, nil
	}
	i := bytes.IndexByte(p, 0)
	if i < 0 || i > max {
		return "", true, errAttr
	}
	return string(p[:i]), true, nil
}

// writer builds netlink messages.
type writer struct {
	b     []byte
	start int // offset of the open message's header
}

func (w *writer) begin(typ, flags uint16, seq, pid uint32) {
	w.start = len(w.b)
	w.b = le.AppendUint32(w.b, 0) // patched by end
	w.b = le.AppendUint16(w.b, typ)
	w.b = le.AppendUint16(w.b, flags)
	w.b = le.AppendUint32(w.b, seq)
	w.b = le.AppendUint32(w.b, pid)
}

func (w *writer) end() {
	le.PutUint32(w.b[w.start:], uint32(len(w.b)-w.start))
}

func (w *writer) attr(t uint16, p []byte) {
	w.b = le.AppendUint16(w.b, uint16(attrHeaderLen+len(p)))
	w.b = le.AppendUint16(w.b, t)
	w.b = append(w.b, p...)
	for len(w.b)%4 != 0 {
		w.b = append(w.b, 0)
	}
}

func (w *writer) u8(t uint16, v uint8)   { w.attr(t, []byte{v}) }
func (w *writer) u32(t uint16, v uint32) { w.attr(t, le.AppendUint32(nil, v)) }

// u64 is nla_put_u64_64bit: no pad attribute on hosts with efficient
// unaligned access (nla_need_padding_for_64bit), which x86_64 and arm64 are.
func (w *writer) u64(t uint16, v uint64) { w.attr(t, le.AppendUint64(nil, v)) }

// str is nla_put_string: the bytes and a NUL.
func (w *writer) str(t uint16, s string) { w.attr(t, append([]byte(s), 0)) }

// nlaFNested is NLA_F_NESTED.
const nlaFNested = 0x8000

// nest opens a nested attribute: nla_nest_start, which marks it
// NLA_F_NESTED (since Linux 5.2; readers mask the flag off).
func (w *writer) nest(t uint16) int {
	off := len(w.b)
	w.b = le.AppendUint16(w.b, 0)
	w.b = le.AppendUint16(w.b, t|nlaFNested)
	return off
}

func (w *writer) endNest(off int) {
	le.PutUint16(w.b[off:], uint16(len(w.b)-off))
}
