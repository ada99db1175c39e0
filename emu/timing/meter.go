package timing

import "sync/atomic"

// Meter accumulates, per device, the cycles and operation counts each stage
// charges. Charge is lock-free and allocation-free, safe from any number of
// workers at once.
type Meter struct {
	model  Model
	stages [NumStages]stageCounters
}

// stageCounters is padded to its own cache line: workers charging
// different stages must not contend.
type stageCounters struct {
	count  atomic.Uint64
	bytes  atomic.Uint64
	cycles atomic.Uint64
	_      [64 - 3*8]byte
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

// Model returns the meter's model.
func (m *Meter) Model() Model { return m.model }

// Charge prices one operation of stage s on bytes bytes, adds it to the
// stage's counters and returns its cost. An unknown stage charges nothing.
func (m *Meter) Charge(s Stage, bytes int) Cycles {
	if s >= NumStages {
		return 0
	}
	c := m.model.Cost(s, bytes)
	st := &m.stages[s]
	st.count.Add(1)
	st.bytes.Add(uint64(max(bytes, 0)))
	st.cycles.Add(uint64(c))
	return c
}

// Stage returns the counters of one stage (zero for an unknown stage).
func (m *Meter) Stage(s Stage) StageStats {
	if s >= NumStages {
		return StageStats{}
	}
	st := &m.stages[s]
	return StageStats{Count: st.count.Load(), Bytes: st.bytes.Load(), Cycles: Cycles(st.cycles.Load())}
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

// Reset zeroes the counters.
func (m *Meter) Reset() {
	for i := range m.stages {
		st := &m.stages[i]
		st.count.Store(0)
		st.bytes.Store(0)
		st.cycles.Store(0)
	}
}
