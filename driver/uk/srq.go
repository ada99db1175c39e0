package uk

import (
	"fmt"
	"math/bits"
	"sync"
)

// SRQDepth is irdma_get_srqdepth (uk.c): roundup_pow2((size << shift) + 1)
// quanta, at least min_hw_wq_size << shift; more than max_hw_srq_quanta
// is invalid.
func SRQDepth(lim Limits, size uint32, shift uint8) (uint32, error) {
	if lim.MaxSRQQuanta == 0 {
		return 0, ErrInvalid
	}
	return wqDepth(uint64(size)<<shift+RQReserve, lim.MinWQSize<<shift, lim.MaxSRQQuanta)
}

// SRQConfig describes a kernel-mode SRQ (irdma_srq_uk_init_info).
type SRQConfig struct {
	Limits Limits
	ID     uint32
	// Ring is depth quanta of 32 bytes: size = depth >> Shift WQEs.
	Ring  []byte
	Shift uint8
	// Shadow is the SRQ shadow area: qword0 the producer index in WQEs.
	Shadow     []byte
	MaxFragCnt int // max_srq_frag_cnt
}

// SRQ is the uk SRQ producer (irdma_srq_uk). The ring's tail moves when a
// CQ poll reports one of its WQEs (IRDMA_RING_MOVE_TAIL in
// irdma_uk_cq_poll_cmpl), which may run on another CQ than the one that
// posts: the ring is guarded by its own lock here.
type SRQ struct {
	lim     Limits
	id      uint32
	buf     []byte
	shadow  []byte
	mult    uint32
	maxFrag int

	mu  sync.Mutex
	r   ring
	pol uint8
}

// NewSRQ is irdma_uk_srq_init: the ring empty, polarity 0 (the first lap
// is written with VALID 1, since index 0 toggles it).
func NewSRQ(cfg SRQConfig) (*SRQ, error) {
	if cfg.MaxFragCnt < 0 || cfg.MaxFragCnt > cfg.Limits.MaxWQFrags || cfg.Shift > 3 {
		return nil, fmt.Errorf("uk: SRQ frag count %d / shift %d: %w", cfg.MaxFragCnt, cfg.Shift, ErrInvalid)
	}
	mult := uint32(1) << cfg.Shift
	q := uint32(len(cfg.Ring) / QuantumSize)
	if len(cfg.Ring)%QuantumSize != 0 || q%mult != 0 || q/mult < 2 || bits.OnesCount32(q) != 1 || len(cfg.Shadow) < 8 {
		return nil, fmt.Errorf("uk: SRQ ring of %d bytes, shadow of %d: %w", len(cfg.Ring), len(cfg.Shadow), ErrInvalid)
	}
	return &SRQ{lim: cfg.Limits, id: cfg.ID, buf: cfg.Ring, shadow: cfg.Shadow, mult: mult,
		maxFrag: cfg.MaxFragCnt, r: ring{size: q / mult}}, nil
}

// ID is the SRQ number.
func (s *SRQ) ID() uint32 { return s.id }

// Size is the ring size in WQEs.
func (s *SRQ) Size() uint32 { return s.r.size }

// Posted is how many WQEs are posted and not yet completed.
func (s *SRQ) Posted() uint32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.r.used()
}

// PostReceive is irdma_uk_srq_post_receive (rdma-core uk.c): the WQE at
// index head × (1 << shift) quanta gets the SGEs in fragment slots (an
// empty pad slot after an even count, counted in ADDFRAGCNT only on
// GEN_2), the wr_id in qword2, and a header of ADDFRAGCNT | VALID stored
// last; then (index + 1) mod size goes to shadow qword0, the SRQ's only
// doorbell. ErrInvalid for too many SGEs, ErrNoMem for a full ring.
func (s *SRQ) PostReceive(wrID uint64, sges []SGE) error {
	if len(sges) > s.maxFrag {
		return ErrInvalid
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.r.full() {
		return ErrNoMem
	}
	idx := s.r.head.Load()
	s.r.head.Store((idx + 1) % s.r.size)
	if idx == 0 {
		s.pol ^= 1
	}
	off := int(idx*s.mult) * QuantumSize
	w := s.buf[off : off+int(s.mult)*QuantumSize]
	var first *SGE
	if len(sges) > 0 {
		first = &sges[0]
	}
	setFragment(w, 0, first, s.pol)
	b := QuantumSize
	for i := 1; i < len(sges); i++ {
		setFragment(w, b, &sges[i], s.pol)
		b += 16
	}
	addl := uint64(0)
	if len(sges) > 1 {
		addl = uint64(len(sges) - 1)
	}
	if n := len(sges); n != 0 && n%2 == 0 {
		setFragment(w, b, nil, s.pol)
		if !s.lim.PadFragUncounted {
			addl++
		}
	}
	put64(w, 16, wrID)
	store64(w, 24, addl<<sqAddFragCntShift|uint64(s.pol)<<sqValidShift)
	store64(s.shadow, 0, uint64((idx+1)%s.r.size))
	return nil
}

// PostRecv is irdma_post_srq_recv's loop: each receive in order until the
// first that fails, whose index it returns with the error.
func (s *SRQ) PostRecv(wrs []RecvWR) (posted int, err error) {
	for i := range wrs {
		if err := s.PostReceive(wrs[i].WrID, wrs[i].SGList); err != nil {
			return i, err
		}
	}
	return len(wrs), nil
}

// retire is the CQ poll's IRDMA_RING_MOVE_TAIL for one SRQ completion.
func (s *SRQ) retire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.r.moreWork() {
		s.r.tail.Store((s.r.tail.Load() + 1) % s.r.size)
	}
}
