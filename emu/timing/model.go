package timing

import (
	"fmt"
	"math"
	"math/bits"
	"time"
)

// Cycles counts device clock cycles.
type Cycles uint64

// Duration converts c to time at a device clock of hz cycles per second,
// rounding down and saturating at the largest Duration. hz == 0 gives 0.
func (c Cycles) Duration(hz uint64) time.Duration {
	if hz == 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(c), uint64(time.Second))
	if hi >= hz {
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, hz)
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(q)
}

// CyclesIn returns the cycles of a device clock of hz cycles per second that
// fit in d, rounding up (d ≤ 0 gives 0).
func CyclesIn(d time.Duration, hz uint64) Cycles {
	if d <= 0 {
		return 0
	}
	return ceilMulDiv(uint64(d), hz, uint64(time.Second))
}

// Stage is a step of the device pipeline that costs cycles. Each stage's
// byte argument is described with its constant.
type Stage uint8

const (
	// Doorbell: a doorbell store reaching the device and the QP being
	// scheduled (bytes ignored).
	Doorbell Stage = iota
	// WQEFetch: a DMA read of WQE bytes (quanta × 32) from an SQ, RQ or
	// the CQP ring.
	WQEFetch
	// PayloadDMARead: a DMA read of payload bytes from host memory (SEND and
	// WRITE sources, READ responses). Not charged for inline data.
	PayloadDMARead
	// PacketBuild: building one packet of bytes (RoCEv2 UDP payload: BTH …
	// ICRC), headers and ICRC included.
	PacketBuild
	// Serialise: wire time of one packet at link rate; bytes is the RoCEv2
	// UDP payload (BTH … ICRC) and the model adds the per-packet overhead
	// (Ethernet, IPv4, UDP, preamble, inter-frame gap).
	Serialise
	// Receive: parsing and checking one received packet of bytes (UDP
	// payload): ICRC, QP lookup, PSN and key checks.
	Receive
	// PayloadDMAWrite: a DMA write of payload bytes to host memory (RECV
	// buffers, WRITE targets, READ response sinks, atomics).
	PayloadDMAWrite
	// CQEWrite: a DMA write of one CQE (32 bytes; 64 with the extension) or
	// CCQE.
	CQEWrite
	// Event: a CEQE or AEQE write (bytes of the entry) plus the MSI-X
	// message.
	Event
	// CQPCommand: executing one CQP WQE; bytes is the host memory the
	// command reads or writes besides its WQE (contexts, FPM buffers).
	CQPCommand

	// NumStages is the number of stages.
	NumStages = iota
)

var stageNames = [NumStages]string{
	"doorbell", "wqe-fetch", "payload-dma-read", "packet-build", "serialise",
	"receive", "payload-dma-write", "cqe-write", "event", "cqp-command",
}

func (s Stage) String() string {
	if s < NumStages {
		return stageNames[s]
	}
	return fmt.Sprintf("Stage(%d)", uint8(s))
}

// Model prices the stages of one device. Implementations must be safe for
// concurrent use, must not allocate in Cost, and must return 0 for a stage
// ≥ NumStages and treat a negative byte count as 0. Cost is a function of
// its arguments alone, the same answer for the same stage and byte count
// for as long as the model is in use: a Meter's shards remember the last
// price per stage.
type Model interface {
	// Cost returns the cycles one operation of stage s on bytes bytes
	// costs: its latency from start to completion if nothing else is in
	// flight. How operations overlap (pipelining, several QPs) is the
	// caller's decision.
	Cost(s Stage, bytes int) Cycles
	// Hz returns the device clock frequency, cycles per second.
	Hz() uint64
}

// StageCost is the cost of one stage in a Linear model:
//
//	Fixed + ceil((bytes + Overhead) × Hz / BytesPerSec)
//
// The fixed part is latency (a PCIe round trip, a firmware step); the byte
// part is occupancy of a bus or of the link.
type StageCost struct {
	Fixed       Cycles
	Overhead    int    // bytes added to every operation (per-packet wire overhead)
	BytesPerSec uint64 // throughput of the byte part; 0: no byte part
}

// Linear is a Model with a fixed cost plus a throughput term per stage. Its
// zero value costs nothing; E810 returns the default device.
type Linear struct {
	ClockHz uint64
	Stages  [NumStages]StageCost
}

// Hz returns the device clock frequency.
func (m *Linear) Hz() uint64 { return m.ClockHz }

// Cost implements Model.
func (m *Linear) Cost(s Stage, bytes int) Cycles {
	if s >= NumStages {
		return 0
	}
	c := &m.Stages[s]
	if c.BytesPerSec == 0 || m.ClockHz == 0 {
		return c.Fixed
	}
	n := uint64(max(bytes, 0))
	if o := c.Overhead; o > 0 {
		n = satAdd(n, uint64(o))
	}
	return Cycles(satAdd(uint64(c.Fixed), uint64(ceilMulDiv(n, m.ClockHz, c.BytesPerSec))))
}

// Default E810-like parameters (docs/timing.md explains each).
const (
	// E810ClockHz: 1 GHz, so one cycle is one nanosecond. The E810 core clock
	// is not public; 1 GHz is the hca_core_clock the driver reports for GEN_3
	// (verbs.c irdma_query_device; docs/hw-datapath.md "GEN_2 capabilities")
	// and keeps the tables readable.
	E810ClockHz = 1_000_000_000
	// E810LinkBitsPerSec: 100 GbE (E810-CQDA2, docs/roce.md "Wire overhead
	// and E810 figures").
	E810LinkBitsPerSec = 100_000_000_000
	// E810WireOverhead: bytes on the wire outside the RoCEv2 UDP payload:
	// preamble+SFD 8, Ethernet header 14, FCS 4, inter-frame gap 12, IPv4 20,
	// UDP 8 (docs/roce.md "Wire overhead and E810 figures": 82 bytes with BTH
	// and ICRC).
	E810WireOverhead = E810FrameOverhead + 14 + 20 + 8
	// E810PCIeBytesPerSec: PCIe 4.0 x16, 16 GT/s × 16 lanes × 128/130 =
	// 31.5 GB/s per direction, less TLP/DLLP overhead at 256-byte payloads
	// (about 9 %): 28 GB/s.
	E810PCIeBytesPerSec = 28_000_000_000
	// E810InternalBytesPerSec: the packet engine moves 64 bytes per cycle
	// (a 512-bit datapath at 1 GHz), an assumption.
	E810InternalBytesPerSec = 64 * E810ClockHz
	// E810FrameOverhead: what the wire carries per frame besides the frame
	// from the destination MAC to the ICRC: FCS 4, preamble+SFD 8,
	// inter-frame gap 12 (IEEE 802.3 clause 4). With Ethernet 14, IPv4 20,
	// UDP 8, BTH 12 and ICRC 4 inside the frame this is the 82 bytes per
	// packet of docs/roce.md "Wire overhead and E810 figures".
	E810FrameOverhead = 24
	// E810PCIeRead: the DMA read round trip, the one parameter fitted to
	// Intel's single-QP figure (docs/timing.md "Calibration"); it lands
	// inside the 0.5–1 µs that published PCIe measurements report.
	E810PCIeRead = 650 * Nanosecond
)

// E810 returns the default E810-like stage costs: those of
// E810Pipeline (docs/timing.md).
func E810() *Linear { return E810Pipeline().Linear() }

// ceilMulDiv returns ceil(a×b/d) with a 128-bit intermediate, saturating.
func ceilMulDiv(a, b, d uint64) Cycles {
	hi, lo := bits.Mul64(a, b)
	if hi >= d {
		return math.MaxUint64
	}
	q, r := bits.Div64(hi, lo, d)
	if r != 0 {
		if q == math.MaxUint64 {
			return math.MaxUint64
		}
		q++
	}
	return Cycles(q)
}

func satAdd(a, b uint64) uint64 {
	s, c := bits.Add64(a, b, 0)
	if c != 0 {
		return math.MaxUint64
	}
	return s
}
