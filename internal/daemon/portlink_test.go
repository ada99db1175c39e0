package daemon

import (
	"bytes"
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/google/gopacket/pcapgo"

	"github.com/irdma-emu/irdma-emu/emu/link"
	"github.com/irdma-emu/irdma-emu/emu/link/udp"
	"github.com/irdma-emu/irdma-emu/emu/timing"
	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// TestAddCountersEveryField: the counters of a reopened link are summed
// field by field, so a counter added to udp.Counters and left out of
// addCounters would reset at every reopen (a --fault change). Every
// integer of the struct, in arrays and nested structs too, gets its own
// value; the sum of two copies must be each doubled.
func TestAddCountersEveryField(t *testing.T) {
	var one udp.Counters
	n := uint64(0)
	var fill func(v reflect.Value)
	fill = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Uint64:
			n++
			v.SetUint(n)
		case reflect.Struct:
			for i := range v.NumField() {
				fill(v.Field(i))
			}
		case reflect.Array:
			for i := range v.Len() {
				fill(v.Index(i))
			}
		default:
			t.Fatalf("udp.Counters has a %v field: extend this test", v.Kind())
		}
	}
	fill(reflect.ValueOf(&one).Elem())
	sum := one
	addCounters(&sum, one)
	var check func(path string, got, base reflect.Value)
	check = func(path string, got, base reflect.Value) {
		switch got.Kind() {
		case reflect.Uint64:
			if got.Uint() != 2*base.Uint() {
				t.Errorf("%s: %d after adding %d to itself", path, got.Uint(), base.Uint())
			}
		case reflect.Struct:
			for i := range got.NumField() {
				check(path+"."+got.Type().Field(i).Name, got.Field(i), base.Field(i))
			}
		case reflect.Array:
			for i := range got.Len() {
				check(path+"[]", got.Index(i), base.Index(i))
			}
		}
	}
	check("Counters", reflect.ValueOf(sum), reflect.ValueOf(one))
}

// returned counts the returns of a payload loan.
type returned int

func (r *returned) Return() { *r++ }

// TestLoopedSealsForCapture: a frame the device kept for itself reaches
// the capture as the wire would carry it even when the capture began
// after the device asked Capturing — unsealed, its payload still lent
// (link.Packet.Lend): Looped seals it first, so the capture has the
// payload under a good ICRC, and the loan ends there.
func TestLoopedSealsForCapture(t *testing.T) {
	var out bytes.Buffer
	c, err := newCapture(&out, false, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	pl := &portLink{clock: timing.NewManual()}
	pl.cap.Store(c)

	pool := link.NewPool(0)
	p := pool.Get()
	ff := wire.FrameFields{Dst: wire.MAC{2, 0, 0, 0, 0, 1}, Src: wire.MAC{2, 0, 0, 0, 0, 1},
		SrcIP: netip.MustParseAddr("10.9.0.1"), DstIP: netip.MustParseAddr("10.9.0.1"), HopLimit: 64, SrcPort: 0xc000}
	pf := wire.PacketFields{BTH: wire.BTHFields{Opcode: wire.RCSendOnly, DestQP: 7, PKey: 0xffff}}
	m, err := wire.EncodeFrame(p.Buf(), &ff, &pf, 12, &p.Frame)
	if err != nil {
		t.Fatal(err)
	}
	p.Data, p.Unsealed = p.Buf()[:m], true
	var loan returned
	p.Lend([]byte("lent payload"), &loan)

	pl.Looped([]*link.Packet{p})
	if err := c.flush(); err != nil {
		t.Fatal(err)
	}
	if p.Lent() != nil || loan != 1 {
		t.Fatalf("after Looped: lent %q, %d returns; want the loan ended once", p.Lent(), loan)
	}
	r, err := pcapgo.NewReader(&out)
	if err != nil {
		t.Fatal(err)
	}
	data, _, err := r.ReadPacketData()
	if err != nil {
		t.Fatal(err)
	}
	var f wire.Frame
	if err := wire.ParseFrame(data, &f); err != nil {
		t.Fatal(err)
	}
	if string(f.Packet.Payload) != "lent payload" || f.VerifyICRC() != nil {
		t.Fatalf("captured payload %q, ICRC %v; want the lent bytes under a good ICRC", f.Packet.Payload, f.VerifyICRC())
	}
	p.Release()
}
