package rdmacm

import (
	"testing"

	"github.com/irdma-emu/irdma-emu/attach"
)

// FuzzCommand feeds arbitrary write() buffers to a live channel (with
// ids, a listener and a connection attempt in place): nothing may panic,
// and every answer is the write's length or a negative errno.
func FuzzCommand(f *testing.F) {
	seed := func(cmd uint32, body []byte) []byte {
		b := make([]byte, HdrSize+len(body))
		le.PutUint32(b, cmd)
		le.PutUint16(b[4:], uint16(len(body)))
		le.PutUint16(b[6:], 0xffff)
		copy(b[HdrSize:], body)
		return b
	}
	for c := uint32(0); c < numCmds; c++ {
		f.Add(seed(c, make([]byte, 300)))
	}
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		w := newWire()
		d := newDevice(t, w, "10.0.0.1", 1)
		s, _, err := d.p.Open(&attach.Peer{Hello: attach.Hello{Version: 1, Flags: attach.HelloRdmaCM}})
		if err != nil {
			t.Fatal(err)
		}
		ch := s.(*Channel)
		defer ch.Close()
		c := &channel{t: t, ch: ch, resp: make([]byte, 4096)}
		h := c.createID(1, PSTCP)
		_ = c.bindIP(h, "10.0.0.1:7000")
		_ = c.listen(h, 1)
		h2 := c.createID(2, PSUDP)
		_ = c.resolveIP(h2, "10.0.0.1:7000", 100)
		// Responses go back in the reply (no /proc/self/mem): pointers in
		// the input are never dereferenced here.
		r := ch.Command(b)
		if r.Status >= 0 && int(r.Status) != len(b) {
			t.Fatalf("status %d for %d bytes", r.Status, len(b))
		}
	})
}
