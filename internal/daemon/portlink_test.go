package daemon

import (
	"reflect"
	"testing"

	"github.com/irdma-emu/irdma-emu/emu/link/udp"
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
