package qp_test

import (
	"bytes"
	"errors"
	"sync"
	"testing"

	"github.com/irdma-emu/irdma-emu/emu/cq"
	"github.com/irdma-emu/irdma-emu/emu/device/devtest"
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
	"github.com/irdma-emu/irdma-emu/emu/qp"
	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// progMemory stands for a program's /proc/<pid>/mem as a MapIO region
// reaches it: every access is a call, which it counts; reads at or beyond
// failAt fail as an unmapped page does (EIO).
type progMemory struct {
	mu     sync.Mutex
	buf    []byte
	reads  int
	failAt int64
}

var errUnmapped = errors.New("input/output error")

func (m *progMemory) ReadAt(p []byte, off int64) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reads++
	if m.failAt > 0 && off+int64(len(p)) > m.failAt {
		return 0, errUnmapped
	}
	return copy(p, m.buf[off:]), nil
}

func (m *progMemory) WriteAt(p []byte, off int64) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return copy(m.buf[off:], p), nil
}

// progMR registers a 64 KiB region of program memory and makes it the
// rig's STag for postSQ.
func progMR(t *testing.T, r *rig, pm *progMemory) hostmem.IOVA {
	t.Helper()
	for i := range pm.buf {
		pm.buf[i] = byte(i*7 + i>>8)
	}
	reg, err := r.env.Mem.MapIO(pm, pm, 0, len(pm.buf), "program")
	if err != nil {
		t.Fatal(err)
	}
	r.stag = r.env.RegMR(2, 0x43, 5, reg, devtest.RightsAll)
	return reg.IOVA()
}

func payloads(fs []wire.Frame) []byte {
	var b []byte
	for _, f := range fs {
		b = append(b, f.Packet.Payload...)
	}
	return b
}

// TestReadAheadProgramMemory: a message in a program's memory (reached
// through a MapIO region, one system call per access) is read with one
// call for its first packet and one for the rest, and the packets carry
// its bytes; a retransmission reads memory again.
func TestReadAheadProgramMemory(t *testing.T) {
	r := newRig(t, qp.Tunables{RTO: rto}, nil)
	pm := &progMemory{buf: make([]byte, 64<<10)}
	va := progMR(t, r, pm)
	const n = 20 * 1024 // 20 packets at the rig's 1024-byte MTU
	r.postSQ(opWrite, 0, 0x1000, 0x99, uint64(va), n)
	r.run()
	fs := r.sent()
	if len(fs) != 20 || !bytes.Equal(payloads(fs), pm.buf[:n]) {
		t.Fatalf("%d packets, payload equal %v", len(fs), bytes.Equal(payloads(fs), pm.buf[:n]))
	}
	if pm.reads != 2 {
		t.Errorf("%d reads of program memory for a 20-packet message, want 2", pm.reads)
	}
	// The program changes its buffer (after the send, which IBTA leaves
	// undefined until the completion); a go-back-N sends what memory holds
	// then, read afresh.
	for i := range pm.buf[:n] {
		pm.buf[i] ^= 0xff
	}
	r.advance(rto)
	fs = r.sent()
	if len(fs) != 20 || !bytes.Equal(payloads(fs), pm.buf[:n]) {
		t.Fatalf("retransmission: %d packets, payload equal %v", len(fs), bytes.Equal(payloads(fs), pm.buf[:n]))
	}
	if pm.reads != 4 {
		t.Errorf("%d reads after the retransmission, want 4", pm.reads)
	}
}

// TestReadAheadFault: memory that fails part way through a message fails
// the packet that reaches it, as without the read ahead: the packets
// before it go out, then the WQE completes in error.
func TestReadAheadFault(t *testing.T) {
	r := newRig(t, qp.Tunables{}, nil)
	pm := &progMemory{buf: make([]byte, 64<<10), failAt: 8*1024 + 100}
	va := progMR(t, r, pm)
	idx := r.postSQ(opWrite, 0, 0x1000, 0x99, uint64(va), 20*1024)
	r.run()
	if fs := r.sent(); len(fs) != 8 || !bytes.Equal(payloads(fs), pm.buf[:8*1024]) {
		t.Fatalf("%d packets before the fault, want 8", len(fs))
	}
	r.wantCQE("fault", func(c cq.CQE) bool { return c.Error && c.SQ && uint32(c.WQEIdx) == idx })
	if st := r.env.Dev.QPs().Get(3).State(); st != qp.StateError {
		t.Fatalf("state %v", st)
	}
}
