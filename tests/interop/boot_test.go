// Package interop runs rdma-core programs against a real Linux soft-RoCE
// (rdma_rxe) peer in a QEMU guest built from Debian packages (see
// docs/interop.md and the guest package). These tests need root, /dev/net/tun
// and QEMU; they skip, loudly, without them and with -short.
package interop

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/tests/interop/guest"
)

// TestImageCache checks that a second build finds the image in the cache
// and reports both durations.
func TestImageCache(t *testing.T) {
	img := guest.ImageT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	again, err := guest.BuildImage(ctx, guest.BuildOptions{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("DURATION image warm cache: %v", time.Since(start).Round(time.Millisecond))
	if !again.Cached || again.Key != img.Key {
		t.Errorf("second build: cached=%v key=%s, want the cached image %s", again.Cached, again.Key, img.Key)
	}
	if img.BuildTime > 0 {
		t.Logf("DURATION image build recorded in the cache manifest: %v", img.BuildTime.Round(time.Millisecond))
	}
	for _, want := range []string{"rdma_rxe", "ib_uverbs", "virtio_net", "crc32_generic"} {
		if !contains(img.Modules, want) {
			t.Errorf("module %s not in the image's load order %v", want, img.Modules)
		}
	}
}

// bringup runs in the guest right after rxe0 is active: it records what a
// person would look at to see that the device is usable.
const bringup = `
step devinfo ibv_devinfo -v -d rxe0
step rdma_link rdma link show rxe0/1
step gid1 cat /sys/class/infiniband/rxe0/ports/1/gids/1
step gid1_type cat /sys/class/infiniband/rxe0/ports/1/gid_attrs/types/1
step ping ping -c 3 -W 5 "$EMU_HOST"
`

// TestGuestBoot is scenario 1: the guest boots, rxe0 is PORT_ACTIVE,
// ibv_devinfo lists it with the link-local GID at index 0 and the
// IPv4-mapped GID of the guest's address at index 1, and the guest and the
// host side reach each other.
func TestGuestBoot(t *testing.T) {
	v := guest.StartT(t, guest.Config{Scripts: []guest.Script{{Name: "10-bringup", Body: bringup}}})
	v.WaitReadyT(t, 3*time.Minute)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if rc, err := v.WaitScenario(ctx, "10-bringup"); err != nil || rc != 0 {
		t.Fatalf("bring-up script: rc=%d err=%v", rc, err)
	}

	devinfo := mustStep(t, v, "devinfo")
	for _, want := range []string{"hca_id:\trxe0", "transport:\t\t\tInfiniBand (0)", "PORT_ACTIVE (4)", "link_layer:\t\tEthernet", "active_mtu:\t\t1024 (3)"} {
		if !strings.Contains(devinfo, want) {
			t.Errorf("ibv_devinfo -v lacks %q", want)
		}
	}
	gids := guest.ParseGIDs(devinfo)
	if len(gids) < 2 {
		t.Fatalf("ibv_devinfo -v lists %d GIDs, want at least 2 (fe80:: and ::ffff:<address>):\n%s", len(gids), devinfo)
	}
	if !strings.HasPrefix(gids[0], "fe80::") {
		t.Errorf("GID[0] = %q, want the fe80:: link-local GID", gids[0])
	}
	if want := "::ffff:" + v.GuestAddr().String(); gids[1] != want {
		t.Errorf("GID[1] = %q, want %q", gids[1], want)
	}
	if !strings.Contains(devinfo, "GID[  1]:\t\t::ffff:"+v.GuestAddr().String()+", RoCE v2") {
		t.Errorf("GID[1] is not listed as RoCE v2")
	}
	a := v.GuestAddr().As4()
	if got, want := strings.TrimSpace(mustStep(t, v, "gid1")), fmt.Sprintf("0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x", a[0], a[1], a[2], a[3]); got != want {
		t.Errorf("sysfs gids/1 = %q, want %q", got, want)
	}
	if got := strings.TrimSpace(mustStep(t, v, "gid1_type")); got != "RoCE v2" {
		t.Errorf("sysfs gid type 1 = %q, want RoCE v2", got)
	}
	if link := mustStep(t, v, "rdma_link"); !strings.Contains(link, "state ACTIVE") || !strings.Contains(link, "netdev eth0") {
		t.Errorf("rdma link: %q", link)
	}
	if ping := mustStep(t, v, "ping"); !strings.Contains(ping, " 0% packet loss") {
		t.Errorf("guest -> host ping: %q", ping)
	}

	// And the other way: the host side connects to a TCP server in the
	// guest, which announces itself on the console once it listens.
	srv, err := v.Start(`nc -l -p 7777 -e /bin/echo hello-from-guest & p=$!
wait_listen 7777 30 && emu_notify "hello server listening"
wait $p`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.WaitMarker(ctx, "hello server listening"); err != nil {
		t.Fatal(err)
	}
	conn, err := v.Netns().DialContext(ctx, "tcp", netip.AddrPortFrom(v.GuestAddr(), 7777).String())
	if err != nil {
		t.Fatalf("host -> guest TCP: %v", err)
	}
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	got, err := io.ReadAll(conn)
	conn.Close()
	if err != nil || string(got) != "hello-from-guest\n" {
		t.Errorf("host -> guest TCP: read %q, %v", got, err)
	}
	if r, err := srv.Wait(ctx); err != nil || r.RC != 0 {
		t.Errorf("guest nc server: rc=%d err=%v\n%s", r.RC, err, r.Output)
	}
	// The agent under load: concurrent requests, each arriving while
	// earlier ones finish, must all come back with their own output.
	const workers, each = 3, 8
	errc := make(chan error, workers)
	for w := 0; w < workers; w++ {
		go func() {
			for i := 0; i < each; i++ {
				want := fmt.Sprintf("worker %d request %d", w, i)
				r, err := v.Run(ctx, fmt.Sprintf("echo '%s'; exit %d", want, i))
				if err == nil && (r.Output != want+"\n" || r.RC != i) {
					err = fmt.Errorf("request %q: rc=%d output %q", want, r.RC, r.Output)
				}
				if err != nil {
					errc <- err
					return
				}
			}
			errc <- nil
		}()
	}
	for w := 0; w < workers; w++ {
		if err := <-errc; err != nil {
			t.Errorf("agent: %v", err)
		}
	}

	t.Logf("DURATION scenario boot checks (after PORT_ACTIVE): %v", time.Since(start).Round(time.Millisecond))
}

// mustStep returns the output of a step of the scenario scripts that
// exited 0.
func mustStep(t *testing.T, v *guest.VM, name string) string {
	t.Helper()
	s, ok := v.Step(name)
	if !ok {
		t.Fatalf("step %s did not run", name)
	}
	if s.RC != 0 {
		t.Errorf("step %s: rc=%d\n%s", name, s.RC, s.Output)
	}
	return s.Output
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
