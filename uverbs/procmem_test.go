package uverbs_test

import (
	"bytes"
	"testing"

	"github.com/irdma-emu/irdma-emu/emu/mr"
)

// TestArenaMRWithoutProcMem: a buffer registered inside a MEM range (the
// preload's arena) is reached by the device with loads and stores of the
// shared mapping — no /proc/self/mem call at REG_MR nor for any DMA to or
// from it — while the same traffic to a buffer registered outside it costs
// system calls on the program's /proc/self/mem (Stats.ProcMemCalls).
func TestArenaMRWithoutProcMem(t *testing.T) {
	e := newEnv(t)
	c := e.open(t)
	c.ok(c.raw(getContextCmd(5, 0)), "GET_CONTEXT")
	c.ok(c.raw(allocPDCmd()), "ALLOC_PD")
	a := c.arena(0x40000)
	heap := make([]byte, 3*4096)
	for _, tc := range []struct {
		name      string
		addr      uint64
		mem       []byte // the program's view of the buffer
		procCalls bool   // /proc/self/mem calls expected
	}{
		{"arena", a.addr + 0x30000, a.mem[0x30000 : 0x30000+8192], false},
		{"heap", addrOf(heap), heap[:8192], true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.p.Stats().ProcMemCalls
			r := c.ok(c.raw(regMRCmd(tc.addr, 8192, 0, 7, 0, 0, 0, 0)), "REG_MR")
			lkey := u32(r.resp, 4)
			rec, ok := e.dev.MRs().Get(lkey >> 8)
			if !ok {
				t.Fatalf("MR %#x not in the device", lkey)
			}
			spans, err := e.dev.MRs().Translate(lkey, rec.PD, 0, tc.addr+100, 5000,
				mr.AccessLocalRead|mr.AccessLocalWrite, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			// The device writes (a WRITE's payload placed), the program
			// sees it; the program writes, the device reads it.
			want := bytes.Repeat([]byte(tc.name), 5000/len(tc.name)+1)[:5000]
			off := 0
			for _, s := range spans {
				if err := e.dev.Mem().Write(s.IOVA, want[off:off+int(s.Len)]); err != nil {
					t.Fatal(err)
				}
				off += int(s.Len)
			}
			if !bytes.Equal(tc.mem[100:5100], want) {
				t.Fatal("the program does not see the device's write")
			}
			copy(tc.mem[100:5100], bytes.ToUpper(want))
			got := make([]byte, 5000)
			off = 0
			for _, s := range spans {
				if err := e.dev.Mem().Read(s.IOVA, got[off:off+int(s.Len)]); err != nil {
					t.Fatal(err)
				}
				off += int(s.Len)
			}
			if !bytes.Equal(got, bytes.ToUpper(want)) {
				t.Fatal("the device does not read the program's bytes")
			}
			calls := e.p.Stats().ProcMemCalls - before
			t.Logf("%s: %d /proc/self/mem calls", tc.name, calls)
			if tc.procCalls != (calls > 0) {
				t.Errorf("%s: %d /proc/self/mem calls, want any: %v", tc.name, calls, tc.procCalls)
			}
		})
	}
}
