package timing

import (
	"sync"
	"sync/atomic"
)

// Meter accumulates, per device, the cycles and operation counts each stage
// charges. Charge is lock-free and allocation-free, safe from any number of
// workers at once.
//
// A goroutine that charges for every packet takes a shard of its own with
// Local. A shard adds in plain memory and Publish moves its sums into the
// counters the readers see: three atomic adds per charge, five charges a
// packet, were an eighth of the one-daemon ib_write_bw CPU profile
// (docs/performance.md "The meter's shards"). The readers sum the shards.
type Meter struct {
	model  Model
	stages [NumStages]stageCounters

	root    *Meter                   // the meter a shard belongs to (nil: m is a root)
	pending *[NumStages]StageStats   // a shard's charges not yet published
	memo    *[NumStages]costMemo     // a shard's last price per stage
	mu      sync.Mutex               // serialises Local on a root
	shards  atomic.Pointer[[]*Meter] // a root's shards, copied on write
}

// stageCounters is padded to its own cache line: workers charging
// different stages must not contend.
type stageCounters struct {
	count  atomic.Uint64
	bytes  atomic.Uint64
	cycles atomic.Uint64
	_      [64 - 3*8]byte
}

// costMemo is the last price a shard asked its model for, per stage. The
// packets of a stream are priced on the same sizes over and over, and a
// price is a 128-bit multiply and divide (Linear.Cost): remembering the
// last one took the meter from 4–10 % to 1–4 % of one daemon's CPU at 64 KiB
// WRITEs (docs/performance.md "Three per-packet costs"). Model.Cost is a
// function of the stage and the byte count alone, so the memo is exact.
type costMemo struct {
	bytes int
	cost  Cycles
	set   bool
}

// StageStats is what a Meter accumulated for one stage.
type StageStats struct {
	Count  uint64 // operations charged
	Bytes  uint64 // bytes passed to Charge (negative counts as 0)
	Cycles Cycles // cycles charged
}

// Snapshot is a copy of a Meter's counters.
type Snapshot struct {
	Stages [NumStages]StageStats
	Total  Cycles
}

// NewMeter returns a meter pricing stages with m (nil: E810()).
func NewMeter(m Model) *Meter {
	if m == nil {
		m = E810()
	}
	return &Meter{model: m}
}

// Local returns a new shard of m for one goroutine at a time: its charges
// count in m's Stage, Snapshot and Total once the shard's owner calls
// Publish, and Reset zeroes what it has published. A shard of a shard
// belongs to the same root. Shards live as long as their root: make one
// per long-lived goroutine, not per operation.
func (m *Meter) Local() *Meter {
	r := m.rootOf()
	l := &Meter{model: r.model, root: r, pending: new([NumStages]StageStats), memo: new([NumStages]costMemo)}
	r.mu.Lock()
	defer r.mu.Unlock()
	var next []*Meter
	if old := r.shards.Load(); old != nil {
		next = append(next, *old...)
	}
	next = append(next, l)
	r.shards.Store(&next)
	return l
}

// own returns the counters charged on m itself, without its shards.
func (m *Meter) own(s Stage) StageStats {
	st := &m.stages[s]
	return StageStats{Count: st.count.Load(), Bytes: st.bytes.Load(), Cycles: Cycles(st.cycles.Load())}
}

// rootOf returns the meter m is a shard of, or m.
func (m *Meter) rootOf() *Meter {
	if m.root != nil {
		return m.root
	}
	return m
}

// each calls f for the root of m and for every shard of it.
func (m *Meter) each(f func(*Meter)) {
	r := m.rootOf()
	f(r)
	if sh := r.shards.Load(); sh != nil {
		for _, l := range *sh {
			f(l)
		}
	}
}

// Model returns the meter's model.
func (m *Meter) Model() Model { return m.model }

// Charge prices one operation of stage s on bytes bytes, adds it to the
// stage's counters and returns its cost. An unknown stage charges nothing.
func (m *Meter) Charge(s Stage, bytes int) Cycles {
	if s >= NumStages {
		return 0
	}
	if p := m.pending; p != nil {
		var c Cycles
		if mc := &m.memo[s]; mc.set && mc.bytes == bytes {
			c = mc.cost
		} else {
			c = m.model.Cost(s, bytes)
			*mc = costMemo{bytes: bytes, cost: c, set: true}
		}
		ps := &p[s]
		ps.Count++
		ps.Bytes += uint64(max(bytes, 0))
		ps.Cycles += c
		return c
	}
	c := m.model.Cost(s, bytes)
	st := &m.stages[s]
	st.count.Add(1)
	st.bytes.Add(uint64(max(bytes, 0)))
	st.cycles.Add(uint64(c))
	return c
}

// Publish moves a shard's charges into the counters Stage and Snapshot
// read; the shard's owner calls it when a run of work ends. On a root it
// does nothing.
func (m *Meter) Publish() {
	p := m.pending
	if p == nil {
		return
	}
	for i := range p {
		ps := &p[i]
		if ps.Count == 0 {
			continue
		}
		st := &m.stages[i]
		st.count.Add(ps.Count)
		st.bytes.Add(ps.Bytes)
		st.cycles.Add(uint64(ps.Cycles))
		*ps = StageStats{}
	}
}

// Stage returns the counters of one stage (zero for an unknown stage).
func (m *Meter) Stage(s Stage) StageStats {
	if s >= NumStages {
		return StageStats{}
	}
	var t StageStats
	m.each(func(l *Meter) {
		o := l.own(s)
		t.Count += o.Count
		t.Bytes += o.Bytes
		t.Cycles += o.Cycles
	})
	return t
}

// Snapshot copies every stage's counters. Stages are read one after the
// other, so a snapshot taken while workers charge is not atomic across
// stages.
func (m *Meter) Snapshot() Snapshot {
	var s Snapshot
	for i := range s.Stages {
		s.Stages[i] = m.Stage(Stage(i))
		s.Total += s.Stages[i].Cycles
	}
	return s
}

// Total returns the cycles charged over all stages.
func (m *Meter) Total() Cycles { return m.Snapshot().Total }

// Reset zeroes the counters, the shards' too.
func (m *Meter) Reset() {
	m.each(func(l *Meter) {
		for i := range l.stages {
			st := &l.stages[i]
			st.count.Store(0)
			st.bytes.Store(0)
			st.cycles.Store(0)
		}
	})
}
