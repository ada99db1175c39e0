package timing

import (
	"math"
	"math/bits"
)

// Ps is virtual time in picoseconds: the unit of the simulated-time mode
// (emu/sim). An integer, never a float, so that a run is the same on every
// machine; an int64 holds 106 days of it.
type Ps int64

// Units of Ps.
const (
	Picosecond  Ps = 1
	Nanosecond  Ps = 1000
	Microsecond Ps = 1000 * Nanosecond
	Millisecond Ps = 1000 * Microsecond
	Second      Ps = 1000 * Millisecond
)

// BytesAt is the time n bytes take at bytesPerSec, rounded up to a whole
// picosecond (n ≤ 0 or a rate of 0 takes no time; saturating).
func BytesAt(n int, bytesPerSec uint64) Ps {
	if n <= 0 || bytesPerSec == 0 {
		return 0
	}
	c := ceilMulDiv(uint64(n), uint64(Second), bytesPerSec)
	if c > math.MaxInt64 {
		return math.MaxInt64
	}
	return Ps(c)
}

// Pipeline holds the parameters of the E810's data path as timed resources
// (docs/timing.md, "The pipeline model", gives each one's source: a public
// fact, a derivation from one, a named assumption, or a fit). emu/sim
// builds its resources from it; the Linear stage costs of E810 are derived
// from the same numbers, so that the stats counters and the simulator
// agree.
type Pipeline struct {
	// LinkBitsPerSec is the Ethernet rate.
	LinkBitsPerSec uint64
	// FrameOverhead is what the wire carries per frame beyond the frame's
	// bytes from the destination MAC to the ICRC: FCS, preamble+SFD and the
	// inter-frame gap.
	FrameOverhead int
	// Propagation is the one-way delay of the cable (overridden by the
	// scenario's --delay).
	Propagation Ps

	// PCIeBytesPerSec is the data rate of each PCIe direction after
	// TLP/DLLP overhead.
	PCIeBytesPerSec uint64
	// PCIeRead is the round trip of a DMA read before its data starts to
	// return: request TLP up, host memory, completion down.
	PCIeRead Ps
	// PCIeWrite is a posted write becoming visible in host memory (and a
	// posted MMIO store, the doorbell, reaching the device).
	PCIeWrite Ps
	// MaxReadRequest is the largest DMA read request (MRRS); a payload is
	// read in requests of at most this many bytes.
	MaxReadRequest int
	// QPReadRequests bounds the DMA read requests one QP's transmit engine
	// has outstanding: the mechanism behind the single-QP limit
	// (Little's law: window / round trip).
	QPReadRequests int
	// DeviceReadTags bounds the read requests the whole function has
	// outstanding (PCIe tags).
	DeviceReadTags int

	// TxFixed and TxBytesPerSec price the transmit packet engine per
	// packet: header build, segmentation, ICRC.
	TxFixed       Ps
	TxBytesPerSec uint64
	// RxFixed and RxBytesPerSec price the receive parser per packet:
	// parse, ICRC check, QP lookup, PSN and key checks.
	RxFixed       Ps
	RxBytesPerSec uint64
	// WQEBytes is one SQ/RQ WQE quantum read by a WQE fetch; CQEBytes one
	// CQE written.
	WQEBytes, CQEBytes int
	// CQPCommand is the firmware time of one control command.
	CQPCommand Ps

	// HostPost is the host CPU time of posting one work request
	// (building the WQE in the ring); HostPoll the time of one CQ poll
	// that finds a CQE. They are the program's, not the device's.
	HostPost, HostPoll Ps
}

// E810Pipeline returns the default E810-like pipeline (docs/timing.md).
func E810Pipeline() Pipeline {
	return Pipeline{
		LinkBitsPerSec:  E810LinkBitsPerSec,
		FrameOverhead:   E810FrameOverhead,
		Propagation:     10 * Nanosecond,
		PCIeBytesPerSec: E810PCIeBytesPerSec,
		PCIeRead:        E810PCIeRead,
		PCIeWrite:       E810PCIeRead / 2,
		MaxReadRequest:  512,
		QPReadRequests:  8,
		DeviceReadTags:  256,
		TxFixed:         20 * Nanosecond,
		TxBytesPerSec:   E810InternalBytesPerSec,
		RxFixed:         30 * Nanosecond,
		RxBytesPerSec:   E810InternalBytesPerSec,
		WQEBytes:        32,
		CQEBytes:        32,
		CQPCommand:      3 * Microsecond,
		HostPost:        50 * Nanosecond,
		HostPoll:        30 * Nanosecond,
	}
}

// Wire is the serialisation time of a frame of frameBytes (destination
// MAC to ICRC) at the link rate, with the per-frame overhead.
func (p *Pipeline) Wire(frameBytes int) Ps {
	return BytesAt(frameBytes+p.FrameOverhead, p.LinkBitsPerSec/8)
}

// PCIe is the time n bytes occupy one direction of the bus.
func (p *Pipeline) PCIe(n int) Ps { return BytesAt(n, p.PCIeBytesPerSec) }

// Tx is the packet engine's time for a packet of n bytes (UDP payload).
func (p *Pipeline) Tx(n int) Ps { return p.TxFixed + BytesAt(n, p.TxBytesPerSec) }

// Rx is the receive parser's time for a packet of n bytes (UDP payload).
func (p *Pipeline) Rx(n int) Ps { return p.RxFixed + BytesAt(n, p.RxBytesPerSec) }

// Server is one timed resource served first come, first served: a bus
// direction, the wire, a packet engine, the host CPU. Serve reserves it;
// its counters give the utilisation.
type Server struct {
	Free  Ps     // when the resource is next idle
	Busy  Ps     // time spent serving
	Ops   uint64 // operations served
	Bytes uint64 // bytes moved (the caller's count)
}

// Serve occupies the resource for svc from at, or from when it is free if
// later, and returns the service's start and end.
func (s *Server) Serve(at, svc Ps, bytes int) (start, end Ps) {
	start = max(at, s.Free)
	end = satAddPs(start, svc)
	s.Free = end
	s.Busy += svc
	s.Ops++
	s.Bytes += uint64(max(bytes, 0))
	return start, end
}

func satAddPs(a, b Ps) Ps {
	s, c := bits.Add64(uint64(a), uint64(b), 0)
	if c != 0 || s > math.MaxInt64 {
		return math.MaxInt64
	}
	return Ps(s)
}

// Linear returns the per-stage cost model that the device's Meter
// charges (the stats counters), derived from the same parameters: a
// stage's fixed part is its latency in the pipeline, its byte part the
// occupancy of the resource it uses. The device clock is 1 GHz
// (E810ClockHz), so a cycle is a nanosecond.
func (p Pipeline) Linear() *Linear {
	cyc := func(t Ps) Cycles { return Cycles(max(t, 0) / Nanosecond) }
	pcie := func(t Ps) StageCost { return StageCost{Fixed: cyc(t), BytesPerSec: p.PCIeBytesPerSec} }
	return &Linear{
		ClockHz: E810ClockHz,
		Stages: [NumStages]StageCost{
			Doorbell:       {Fixed: cyc(p.PCIeWrite)},
			WQEFetch:       pcie(p.PCIeRead),
			PayloadDMARead: pcie(p.PCIeRead),
			PacketBuild:    {Fixed: cyc(p.TxFixed), BytesPerSec: p.TxBytesPerSec},
			// The Serialise stage is charged the UDP payload; the frame
			// around it adds Ethernet, IPv4 and UDP headers.
			Serialise:       {Overhead: p.FrameOverhead + E810WireOverhead - E810FrameOverhead, BytesPerSec: p.LinkBitsPerSec / 8},
			Receive:         {Fixed: cyc(p.RxFixed), BytesPerSec: p.RxBytesPerSec},
			PayloadDMAWrite: pcie(p.PCIeWrite),
			CQEWrite:        pcie(p.PCIeWrite),
			Event:           pcie(2 * p.PCIeWrite),
			CQPCommand:      pcie(p.CQPCommand),
		},
	}
}
