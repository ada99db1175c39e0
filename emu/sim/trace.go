package sim

import (
	"bufio"
	"fmt"
	"io"
	"strconv"

	"github.com/irdma-emu/irdma-emu/emu/timing"
)

// The trace is Chrome's trace-event format (the JSON Object Format of the
// "Trace Event Format" document, which Perfetto's JSON importer reads): one
// process per device, one thread per resource, per QP and per CQ;
// complete events ("X") for the time a resource serves an operation and
// for a packet's life from build to the end of its serialisation, instant
// events ("i") for CQEs becoming visible and lost frames. Timestamps are
// microseconds, printed from the integer picoseconds with six decimals,
// so the file is as deterministic as the run.

// Track ids within a device's process.
const (
	trackDoorbell  = 1
	trackPCIeRead  = 2
	trackTxEngine  = 3
	trackWire      = 4
	trackRxParser  = 5
	trackPCIeWrite = 6
	trackHost      = 7
)

var trackNames = map[int]string{
	trackDoorbell: "doorbell / WQE fetch", trackPCIeRead: "PCIe read", trackTxEngine: "tx packet engine",
	trackWire: "MAC + wire", trackRxParser: "rx parser", trackPCIeWrite: "PCIe write", trackHost: "host CPU",
}

func qpTrack(qpn uint32) int { return 1000 + int(qpn) }
func cqTrack(id uint32) int  { return 100000 + int(id) }

// tracer writes trace events; its zero value (no writer) records nothing.
type tracer struct {
	w      *bufio.Writer
	n      uint64
	limit  uint64
	named  map[[2]int]bool
	first  bool
	err    error
	buf    []byte
	Events uint64 // events written
	Capped bool   // the event limit was reached
}

func newTracer(w io.Writer, limit uint64) *tracer {
	if w == nil {
		return &tracer{}
	}
	t := &tracer{w: bufio.NewWriterSize(w, 1<<16), limit: limit, named: map[[2]int]bool{}, first: true}
	t.raw(`{"displayTimeUnit":"ns","traceEvents":[`)
	return t
}

func (t *tracer) on() bool { return t != nil && t.w != nil && !t.Capped }

func (t *tracer) raw(s string) {
	if t.err == nil {
		_, t.err = t.w.WriteString(s)
	}
}

func (t *tracer) sep() {
	if t.first {
		t.first = false
		t.raw("\n")
	} else {
		t.raw(",\n")
	}
}

// us formats picoseconds as microseconds with six decimals.
func us(b []byte, p timing.Ps) []byte {
	if p < 0 {
		b = append(b, '-')
		p = -p
	}
	b = strconv.AppendInt(b, int64(p/timing.Microsecond), 10)
	b = append(b, '.')
	frac := int64(p % timing.Microsecond)
	s := strconv.AppendInt(nil, frac, 10)
	for i := len(s); i < 6; i++ {
		b = append(b, '0')
	}
	return append(b, s...)
}

func (t *tracer) name(pid, tid int) {
	k := [2]int{pid, tid}
	if t.named[k] {
		return
	}
	t.named[k] = true
	if !t.named[[2]int{pid, -1}] {
		t.named[[2]int{pid, -1}] = true
		t.sep()
		t.raw(fmt.Sprintf(`{"ph":"M","pid":%d,"tid":0,"name":"process_name","args":{"name":"device %d"}}`, pid+1, pid))
	}
	var n string
	switch {
	case tid >= 100000:
		n = fmt.Sprintf("CQ %d", tid-100000)
	case tid >= 1000:
		n = fmt.Sprintf("QP %d", tid-1000)
	default:
		n = trackNames[tid]
	}
	t.sep()
	t.raw(fmt.Sprintf(`{"ph":"M","pid":%d,"tid":%d,"name":"thread_name","args":{"name":%q}}`, pid+1, tid, n))
}

func (t *tracer) count() bool {
	t.n++
	t.Events++
	if t.limit > 0 && t.n >= t.limit {
		t.Capped = true
	}
	return true
}

// span records a complete event of resource tid on device pid.
func (t *tracer) span(pid, tid int, name string, start, end timing.Ps, qpn uint32) {
	if !t.on() {
		return
	}
	t.name(pid, tid)
	t.sep()
	b := t.buf[:0]
	b = append(b, `{"ph":"X","pid":`...)
	b = strconv.AppendInt(b, int64(pid+1), 10)
	b = append(b, `,"tid":`...)
	b = strconv.AppendInt(b, int64(tid), 10)
	b = append(b, `,"name":"`...)
	b = append(b, name...)
	b = append(b, `","ts":`...)
	b = us(b, start)
	b = append(b, `,"dur":`...)
	b = us(b, end-start)
	b = append(b, `,"args":{"qp":`...)
	b = strconv.AppendUint(b, uint64(qpn), 10)
	b = append(b, `}}`...)
	t.buf = b
	t.write(b)
	t.count()
}

// packet records a frame's span with its opcode and PSN.
func (t *tracer) packet(pid, tid int, f *flight, start, end timing.Ps) {
	if !t.on() {
		return
	}
	t.name(pid, tid)
	t.sep()
	b := t.buf[:0]
	b = append(b, `{"ph":"X","pid":`...)
	b = strconv.AppendInt(b, int64(pid+1), 10)
	b = append(b, `,"tid":`...)
	b = strconv.AppendInt(b, int64(tid), 10)
	b = append(b, `,"name":"`...)
	b = append(b, f.op.String()...)
	if f.retx {
		b = append(b, " (retransmit)"...)
	}
	b = append(b, `","ts":`...)
	b = us(b, start)
	b = append(b, `,"dur":`...)
	b = us(b, end-start)
	b = append(b, `,"args":{"qp":`...)
	b = strconv.AppendUint(b, uint64(f.q.QPN), 10)
	b = append(b, `,"psn":`...)
	b = strconv.AppendUint(b, uint64(f.psn), 10)
	b = append(b, `,"bytes":`...)
	b = strconv.AppendInt(b, int64(f.udp), 10)
	b = append(b, `}}`...)
	t.buf = b
	t.write(b)
	t.count()
}

// instant records an instant event.
func (t *tracer) instant(pid, tid int, name string, at timing.Ps) {
	if !t.on() {
		return
	}
	t.name(pid, tid)
	t.sep()
	b := t.buf[:0]
	b = append(b, `{"ph":"i","s":"t","pid":`...)
	b = strconv.AppendInt(b, int64(pid+1), 10)
	b = append(b, `,"tid":`...)
	b = strconv.AppendInt(b, int64(tid), 10)
	b = append(b, `,"name":"`...)
	b = append(b, name...)
	b = append(b, `","ts":`...)
	b = us(b, at)
	b = append(b, `}`...)
	t.buf = b
	t.write(b)
	t.count()
}

// close ends the JSON document.
func (t *tracer) close() error {
	if t == nil || t.w == nil {
		return nil
	}
	t.raw("\n]}\n")
	if t.err == nil {
		t.err = t.w.Flush()
	}
	return t.err
}

func (t *tracer) write(b []byte) {
	if t.err == nil {
		_, t.err = t.w.Write(b)
	}
}
