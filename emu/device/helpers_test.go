package device_test

import (
	"encoding/binary"
	"errors"
	"sync"
	"testing"

	"github.com/irdma-emu/irdma-emu/emu/cq"
	"github.com/irdma-emu/irdma-emu/emu/cqp"
	"github.com/irdma-emu/irdma-emu/emu/device/devtest"
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
)

// hmcBacking returns the host address of object idx of the commit slot at
// commitOff, computed the way the driver does from the COMMIT_FPM_VAL
// write-back (base = [63:32]·512) and the QUERY_FPM_VAL size exponent, in
// the direct SD pages the test programmed.
func hmcBacking(t *testing.T, e *devtest.Env, commitOff int, idx uint64) hostmem.IOVA {
	t.Helper()
	base := (binary.LittleEndian.Uint64(e.Commit[commitOff:]) >> 32) * 512
	size := uint64(1) << (binary.LittleEndian.Uint64(e.Query[commitOff+8:]) >> 32 & 0x3f)
	fpm := base + idx*size
	sd := fpm / (2 << 20)
	if sd >= uint64(len(e.SDs)) {
		t.Fatalf("object beyond the SDs")
	}
	return e.SDs[sd].IOVA() + hostmem.IOVA(fpm%(2<<20))
}

func read(t *testing.T, e *devtest.Env, a hostmem.IOVA, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if err := e.Mem.Read(a, b); err != nil {
		t.Fatal(err)
	}
	return b
}

func load(t *testing.T, e *devtest.Env, a hostmem.IOVA) uint64 {
	t.Helper()
	v, err := e.Mem.Load64(a)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func wantStatus(t *testing.T, what string, c devtest.Completion, major, minor uint16) {
	t.Helper()
	if c.Major != major || c.Minor != minor || c.Error != (major != 0) {
		t.Errorf("%s: got major %#x minor %#x error %v, want %#x/%#x", what, c.Major, c.Minor, c.Error, major, minor)
	}
}

// cqRes is a CQ's memory in the scratch area.
type cqRes struct {
	id     uint32
	ring   hostmem.IOVA
	shadow hostmem.IOVA
	size   uint32
	head   uint32
	pol    uint64
}

// createCQ issues CREATE_CQ for a normal CQ (ENCEQEMASK 1, CEQ 0).
func createCQ(t *testing.T, e *devtest.Env, id, size uint32, ctx uint64) (*cqRes, devtest.Completion) {
	t.Helper()
	r := &cqRes{id: id, size: size, ring: e.Scr(int(size)*32, 256), shadow: e.Scr(64, 64), pol: 1 << 63}
	c := e.Exec([8]uint64{
		0: uint64(size),     // qw0: cq_size
		1: ctx,              // qw1: CQ context
		2: uint64(size / 2), // qw2: SHADOW_READ_THRESHOLD
		4: uint64(r.ring),   // qw4: ring PA
		5: uint64(r.shadow), // qw5: shadow PA
		3: 0x03<<32 | // OPCODE CREATE_CQ
			uint64(id) | // CQID [18:0]
			0<<22 | // CEQID [31:22] = 0
			1<<46 | // CHKOVERFLOW
			1<<48 | // ENCEQEMASK
			1<<49, // CEQIDVALID
	})
	return r, c
}

// poll returns the next CQE of r (base qwords) if valid.
func (r *cqRes) poll(t *testing.T, e *devtest.Env) ([4]uint64, bool) {
	t.Helper()
	var q [4]uint64
	a := r.ring + hostmem.IOVA(r.head)*32
	q[3] = load(t, e, a+24)
	if q[3]&(1<<63) != r.pol {
		return q, false
	}
	for i := range 3 {
		q[i] = load(t, e, a+hostmem.IOVA(8*i))
	}
	r.head++
	if r.head == r.size {
		r.head, r.pol = 0, r.pol^1<<63
	}
	if err := e.Mem.Store64(r.shadow, uint64(r.head)); err != nil {
		t.Fatal(err)
	}
	return q, true
}

// fakeMR records what the CQP decoded; it refuses a second allocation of
// the same index with a status, as the STag table would.
type fakeMR struct {
	mu     sync.Mutex
	allocs []cqp.STagAlloc
	regs   []cqp.MRReg
	valid  map[uint32]bool
}

var errSTagValid = &cqp.Error{Status: cqp.Fail(cqp.MinorSTagValid), Reason: "fake: STag valid"}

func (f *fakeMR) AllocSTag(a cqp.STagAlloc) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.valid[a.Index] {
		return errSTagValid
	}
	f.valid[a.Index] = true
	f.allocs = append(f.allocs, a)
	return nil
}

func (f *fakeMR) RegisterNonShared(r cqp.MRReg) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.valid[r.Index] {
		return errSTagValid
	}
	f.valid[r.Index] = true
	f.regs = append(f.regs, r)
	return nil
}

func (f *fakeMR) Dealloc(idx, pd uint32, isMR bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.valid[idx] {
		return errors.New("fake: not valid")
	}
	delete(f.valid, idx)
	return nil
}

type fakeAH struct {
	mu    sync.Mutex
	arp   map[uint32][6]byte
	ahs   map[uint32]cqp.AH
	mcast map[uint32]cqp.McastGroup
}

func (f *fakeAH) SetARP(idx uint32, mac [6]byte, valid, permanent bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if valid {
		f.arp[idx] = mac
	} else {
		delete(f.arp, idx)
	}
	return nil
}
func (f *fakeAH) AddAH(a cqp.AH) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ahs[a.Index] = a
	return nil
}
func (f *fakeAH) DelAH(idx uint32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.ahs, idx)
	return nil
}
func (f *fakeAH) CreateMcast(g cqp.McastGroup) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mcast[g.Index] = g
	return nil
}
func (f *fakeAH) ModifyMcast(g cqp.McastGroup) error { return f.CreateMcast(g) }
func (f *fakeAH) DestroyMcast(idx uint32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.mcast, idx)
	return nil
}

func newFakes() (*fakeMR, *fakeAH) {
	return &fakeMR{valid: map[uint32]bool{}},
		&fakeAH{arp: map[uint32][6]byte{}, ahs: map[uint32]cqp.AH{}, mcast: map[uint32]cqp.McastGroup{}}
}

// cqpCQE is an ordinary successful SQ CQE for direct CQ writer tests.
func cqpCQE() cq.CQE {
	e := cq.CQE{QPCtx: 0x1234, SQ: true, Op: 0x03}
	e.SetQPID(5)
	return e
}
