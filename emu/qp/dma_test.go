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
	mu        sync.Mutex
	buf       []byte
	reads     int
	writes    int
	failAt    int64 // reads at or beyond fail (0: none)
	failWrite int64 // writes at or beyond fail (0: none)
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
	m.writes++
	if m.failWrite > 0 && off+int64(len(p)) > m.failWrite {
		return 0, errUnmapped
	}
	return copy(m.buf[off:], p), nil
}

func (m *progMemory) bytes(off, n int) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]byte(nil), m.buf[off:off+n]...)
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

// writePackets injects a WRITE of len(data) bytes at va (R_Key stag) from
// PSN psn as path-MTU packets, and returns the PSN after it.
func writePackets(r *rig, psn wire.PSN, va uint64, stag uint32, data []byte, end bool) wire.PSN {
	const mtu = 1024
	for off := 0; off < len(data); off += mtu {
		n := min(mtu, len(data)-off)
		first, last := off == 0, off+n == len(data) && end
		op := wire.RCRDMAWriteMiddle
		switch {
		case first && last:
			op = wire.RCRDMAWriteOnly
		case first:
			op = wire.RCRDMAWriteFirst
		case last:
			op = wire.RCRDMAWriteLast
		}
		pf := wire.PacketFields{BTH: wire.BTHFields{Opcode: op, PSN: psn, AckReq: last}}
		if first {
			pf.RETH = wire.RETHFields{VA: va, RKey: stag, DMALen: uint32(len(data))}
			if !end {
				pf.RETH.DMALen = uint32(len(data) + mtu) // a LAST is still to come
			}
		}
		r.inject(pf, data[off:off+n])
		psn = psn.Next()
	}
	return psn
}

// TestWriteBehindProgramMemory: the packets of a WRITE into a program's
// memory are stored with one call for the message (two with its last
// cache line last) instead of one or two per packet, the bytes all there
// before the ACK goes; a message that has not ended when the QP's
// received packets run out is stored then all the same.
func TestWriteBehindProgramMemory(t *testing.T) {
	r := newRig(t, qp.Tunables{}, nil)
	pm := &progMemory{buf: make([]byte, 64<<10)}
	va := progMR(t, r, pm)
	data := bytes.Repeat([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9}, 20*1024/9+1)[:20*1024]
	next := writePackets(r, peerPSN, uint64(va), r.stag, data, true)
	r.run()
	r.expect("one ACK", pkt{wire.RCAcknowledge, next.Sub(1), false, ackSyn, 0})
	if !bytes.Equal(pm.bytes(0, len(data)), data) {
		t.Fatal("WRITE payload not in program memory")
	}
	if pm.writes != 2 {
		t.Errorf("%d stores into program memory for a 20-packet WRITE, want 2", pm.writes)
	}
	// Half a message (no LAST yet): stored at the end of the run.
	pm.writes = 0
	part := bytes.Repeat([]byte{0xee}, 4*1024)
	writePackets(r, next, uint64(va)+32<<10, r.stag, part, false)
	r.run()
	if !bytes.Equal(pm.bytes(32<<10, len(part)), part) || pm.writes != 2 {
		t.Errorf("unfinished WRITE: stored %v in %d calls", bytes.Equal(pm.bytes(32<<10, len(part)), part), pm.writes)
	}
}

// TestWriteBehindFault: a store into program memory that fails fails the
// QP with a remote operational error NAK, as a failed placement did.
func TestWriteBehindFault(t *testing.T) {
	r := newRig(t, qp.Tunables{}, nil)
	pm := &progMemory{buf: make([]byte, 64<<10), failWrite: 16 << 10}
	va := progMR(t, r, pm)
	next := writePackets(r, peerPSN, uint64(va)+12<<10, r.stag, make([]byte, 8*1024), true)
	r.run()
	r.expect("NAK", pkt{wire.RCAcknowledge, next.Sub(1), false, wire.NAKSyndrome(wire.NAKRemoteOperationalError), 0})
	q0, q1, ok := r.env.PollAEQ()
	if ae := cq.DecodeAEQE(q0, q1); !ok || ae.Code != qp.AELCEQPCatastrophic || ae.Source != cq.AESourceInRR {
		t.Fatalf("AE %+v", ae)
	}
	if st := r.env.Dev.QPs().Get(3).State(); st != qp.StateError {
		t.Fatalf("state %v", st)
	}
}
