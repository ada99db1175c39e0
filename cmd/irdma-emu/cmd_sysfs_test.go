package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSysfsCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tree")
	var out, errb bytes.Buffer
	code := dispatch([]string{"sysfs", "--device", "irdma3", "--uverbs", "2", "--mac", "02:fc:00:00:00:01",
		"--ip", "192.0.2.2, 2001:db8::7", dir}, &out, &errb)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "irdma3 (uverbs2) node_guid 00fc:00ff:fe00:0001, 3 GIDs") {
		t.Errorf("output %q", out.String())
	}
	for rel, want := range map[string]string{
		"class/infiniband_verbs/uverbs2/ibdev":              "irdma3\n",
		"class/infiniband_verbs/uverbs2/dev":                "231:194\n",
		"class/infiniband/irdma3/ports/1/gids/1":            "0000:0000:0000:0000:0000:ffff:c000:0202\n",
		"class/infiniband/irdma3/ports/1/gids/2":            "2001:0db8:0000:0000:0000:0000:0000:0007\n",
		"class/infiniband/irdma3/ports/1/state":             "4: ACTIVE\n",
		"class/infiniband/irdma3/ports/1/gid_attrs/ndevs/2": "lo\n",
	} {
		b, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil || string(b) != want {
			t.Errorf("%s = %q (%v), want %q", rel, b, err, want)
		}
	}
	// Rewrite with the link down: replaced in place.
	out.Reset()
	if code := dispatch([]string{"sysfs", "--device", "irdma3", "--uverbs", "2", "--down", dir}, &out, &errb); code != exitOK {
		t.Fatalf("rewrite: %d %s", code, errb.String())
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "class/infiniband/irdma3/ports/1/state")); string(b) != "1: DOWN\n" {
		t.Errorf("state after --down: %q", b)
	}
	for _, bad := range [][]string{
		{"sysfs"},
		{"sysfs", "--ip", "nonsense", dir},
		{"sysfs", "--mac", "zz", dir},
		{"sysfs", "a", "b"},
	} {
		if code := dispatch(bad, &out, &errb); code != exitUsage {
			t.Errorf("%v: exit %d", bad, code)
		}
	}
	if code := dispatch([]string{"sysfs", "--device", "a/b", dir}, &out, &errb); code != exitFail {
		t.Errorf("bad device name: exit %d", code)
	}
}
