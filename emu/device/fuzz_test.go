package device_test

import (
	"encoding/binary"
	"testing"

	"github.com/irdma-emu/irdma-emu/emu/device"
	"github.com/irdma-emu/irdma-emu/emu/device/devtest"
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
	"github.com/irdma-emu/irdma-emu/emu/profile"
	"github.com/irdma-emu/irdma-emu/emu/regs"
)

// realOpcodes are the CQP opcodes irdma issues on GEN_2 (and the few it
// defines without a builder); the fuzzer picks among them most of the time.
var realOpcodes = []uint8{
	0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x09, 0x0a, 0x0d, 0x0f, 0x11, 0x12, 0x13, 0x15,
	0x16, 0x18, 0x19, 0x1b, 0x1c, 0x1e, 0x1f, 0x20, 0x21, 0x22, 0x23, 0x25, 0x26, 0x27,
	0x28, 0x29, 0x2a, 0x2b, 0x2c, 0x2d, 0x2e, 0x2f,
}

// fuzzChunk is one WQE of fuzz input: a selector byte and 64 WQE bytes.
const fuzzChunk = 1 + 64

// fuzzWQE turns a chunk into a WQE: the opcode biased to real ones, some
// qwords replaced by addresses inside the scratch area, none pointing at
// the regions the test harness itself depends on (CQP ring, CCQ, CEQ,
// AEQ, host context), and CQ ops kept off the CCQ (CQ 0).
func fuzzWQE(e *devtest.Env, chunk []byte) [8]uint64 {
	sel := chunk[0]
	var w [8]uint64
	for i := range w {
		w[i] = binary.LittleEndian.Uint64(chunk[1+8*i:])
	}
	op := uint64(w[3] >> 32 & 0x3f)
	if sel < 0xe0 {
		op = uint64(realOpcodes[int(sel)%len(realOpcodes)])
	}
	w[3] = w[3]&^(0x3f<<32) | op<<32
	// Bias the address-bearing qwords (2, 4, 5, 6) into scratch memory.
	scr := uint64(e.Scratch.IOVA())
	for i, q := range []int{2, 4, 5, 6} {
		if sel>>(4+uint(i))&1 == 1 {
			w[q] = scr + (w[q]%(devtest.ScratchSize-8192))&^63
		}
	}
	// Small object indices most of the time, so that creates succeed.
	if sel&0x8 == 0 {
		w[3] &^= 0xff_ffc0
	}
	if op == 0x03 || op == 0x04 || op == 0x05 {
		if w[3]&0x7ffff == 0 {
			w[3] |= 1
		}
		if sel&0x4 == 0 {
			w[0] &= 0xff // small CQs
		}
	}
	protected := []*hostmem.Region{e.Ring, e.CCQ, e.CCQSh, e.CEQ, e.AEQ, e.HostCtx}
	for i := range w {
		if i == 3 {
			continue
		}
		for _, r := range protected {
			if a := hostmem.IOVA(w[i] &^ 0xfff); a >= r.IOVA()&^0xfff && a < r.End() {
				w[i] = scr + w[i]%4096
			}
		}
	}
	return w
}

// FuzzCQPWQE feeds random CQP WQEs to a brought-up device: no panic, no
// hang (each WQE completes within the harness timeout), CQPTAIL advances
// by exactly one per WQE, and a good WQE still succeeds afterwards. An
// input of odd length runs on the GEN_3 profile (where STag WQEs' b61 is
// REMOTE_ATOMIC_EN and the QP context has GEN_3 fields), even on GEN_2.
func FuzzCQPWQE(f *testing.F) {
	for _, op := range realOpcodes {
		seed := make([]byte, fuzzChunk)
		seed[0] = byte(indexOf(op))
		binary.LittleEndian.PutUint64(seed[1+24:], uint64(op)<<32|1)
		f.Add(seed)
		f.Add(append(seed, 0))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// The real emu/mr and emu/ah tables sit behind the CQP.
		cfg := device.Config{}
		if len(data)%2 == 1 {
			cfg.Profile = profile.GEN3()
		}
		e := devtest.Bringup(t, devtest.Options{Config: cfg})
		for n := 0; len(data) >= fuzzChunk && n < 8; n++ {
			w := fuzzWQE(e, data[:fuzzChunk])
			data = data[fuzzChunk:]
			before := e.Dev.Read32(regs.CQPTAIL) & regs.CQPTAIL_WQTAIL
			c := e.Exec(w) // fails the test on a hang
			if got := c.Tail & regs.CQPTAIL_WQTAIL; got != (before+1)%devtest.RingSize {
				t.Fatalf("CQPTAIL %d after %d", got, before)
			}
			if c.Error != (c.Tail&regs.CQPTAIL_CQP_OP_ERR != 0) {
				t.Fatalf("CCQE error %v but CQPTAIL %#x", c.Error, c.Tail)
			}
		}
		e.MustOK(e.Exec(devtest.SHMCPagesAllocated()), "good WQE after fuzz input")
	})
}

func indexOf(op uint8) int {
	for i, o := range realOpcodes {
		if o == op {
			return i
		}
	}
	return 0
}
