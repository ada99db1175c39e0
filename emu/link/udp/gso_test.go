package udp_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/irdma-emu/irdma-emu/emu/link"
	"github.com/irdma-emu/irdma-emu/emu/link/udp"
	"github.com/irdma-emu/irdma-emu/emu/wire"
	"github.com/irdma-emu/irdma-emu/internal/netport/nstest"
)

// tunFCSUM is TUN_F_CSUM (include/uapi/linux/if_tun.h): the tap takes
// packets whose checksum is left to it, which UDP GSO needs from the
// egress device.
const tunFCSUM = 0x01

// openTap creates tap device name in ns (IFF_TAP|IFF_NO_PI: whole Ethernet
// frames, no packet information) with the offloads given (TUNSETOFFLOAD),
// up, with addr/24 and a static neighbour for peer, and returns its file
// descriptor: what the kernel puts on that wire, read frame by frame.
func openTap(t *testing.T, ns *nstest.NS, name string, offloads int, addr, peer string) int {
	t.Helper()
	fd := -1
	err := ns.Do(func() error {
		var err error
		if fd, err = unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0); err != nil {
			return err
		}
		ifr, err := unix.NewIfreq(name)
		if err != nil {
			return err
		}
		ifr.SetUint16(unix.IFF_TAP | unix.IFF_NO_PI)
		if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
			return err
		}
		return unix.IoctlSetInt(fd, unix.TUNSETOFFLOAD, offloads)
	})
	if err != nil {
		t.Fatalf("tap %s: %v", name, err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	ns.Sysctl(t, "net.ipv6.conf."+name+".disable_ipv6", "1")
	ns.AddAddr(t, name, addr+"/24")
	ns.SetUp(t, name, true)
	ns.Run(t, "ip", "neigh", "replace", peer, "lladdr", "02:00:00:00:00:02", "dev", name)
	return fd
}

// readRoCE reads n RoCEv2 frames (UDP to 4791) from a tap, skipping
// anything else, within a few seconds.
func readRoCE(t *testing.T, fd, n int) [][]byte {
	t.Helper()
	var out [][]byte
	buf := make([]byte, 65536)
	deadline := time.Now().Add(5 * time.Second)
	for len(out) < n && time.Now().Before(deadline) {
		k, err := unix.Read(fd, buf)
		if errors.Is(err, unix.EAGAIN) {
			time.Sleep(2 * time.Millisecond)
			continue
		}
		if err != nil {
			t.Fatalf("read tap: %v", err)
		}
		f := buf[:k]
		if k < wire.EthernetSize+wire.IPv4MinimumSize+wire.UDPSize ||
			binary.BigEndian.Uint16(f[12:]) != wire.EtherTypeIPv4 || f[wire.EthernetSize+9] != wire.IPProtocolUDP ||
			wire.UDP(f[wire.EthernetSize+wire.IPv4MinimumSize:]).DestinationPort() != wire.RoCEv2Port {
			continue
		}
		out = append(out, append([]byte(nil), f...))
	}
	if len(out) < n {
		t.Fatalf("read %d RoCEv2 frames from the tap, want %d", len(out), n)
	}
	return out
}

// TestGSOOnTheWire sends runs of equal frames and a shorter last one
// through a tap, the kernel's wire, and checks every frame there against
// its real IP header: its ICRC is good (what rxe behind a real NIC
// checks), and its IPv4 ID is the one the link sealed it for. The tap
// takes no GSO, so the kernel cuts each send in software before the device
// (validate_xmit_skb), numbering the IDs from the send's 0
// (inet_gso_segment); with checksum offload or without (Linux 6.18 then
// checksums in software too). TestGSORefused has the kernel refusing.
func TestGSOOnTheWire(t *testing.T) {
	nstest.NeedRoot(t)
	for _, c := range []struct {
		name     string
		offloads int
		refused  bool
	}{
		{"tap with checksum offload", tunFCSUM, false},
		{"tap without offloads", 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ns := nstest.New(t)
			fd := openTap(t, ns, "tap0", c.offloads, "192.0.2.1", "192.0.2.2")
			src, dst := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
			a := newLink(t, udp.Config{Addrs: []netip.Addr{src}, Mode: udpMode, NetNS: ns.Path()})
			const run = 12
			send := func(first int) {
				var pkts []*link.Packet
				for i := range run {
					size := 1000
					if i == run-1 {
						size = 200
					}
					pkts = append(pkts, build(t, a.Pool(), frameSpec{op: wire.RCSendOnly, src: src, dst: dst, payload: size, seq: uint32(first + i)}))
				}
				if err := a.Send(pkts); err != nil {
					t.Fatal(err)
				}
			}
			send(0)
			send(run)
			frames := readRoCE(t, fd, 2*run)
			for i, f := range frames {
				ip := wire.IPv4(f[wire.EthernetSize:])
				udpH := wire.UDP(f[wire.EthernetSize+wire.IPv4MinimumSize:])
				pkt := f[wire.EthernetSize+wire.IPv4MinimumSize+wire.UDPSize : wire.EthernetSize+int(ip.TotalLength())]
				want := uint16(i % run)
				if c.refused {
					want = 0
				}
				if ip.ID() != want {
					t.Errorf("frame %d: IP ID %d, want %d", i, ip.ID(), want)
				}
				if got, stored := wire.ICRCIPv4(ip, udpH, pkt), binary.LittleEndian.Uint32(pkt[len(pkt)-wire.ICRCSize:]); got != stored {
					t.Errorf("frame %d (ID %d): ICRC %#08x on the wire, computed %#08x", i, ip.ID(), stored, got)
				}
				if psn := wire.BTH(pkt).PSN(); psn != wire.PSN(i) {
					t.Errorf("frame %d: PSN %d", i, psn)
				}
			}
			st := a.Counters()
			if st.TxDropped() != 0 {
				t.Errorf("drops %v", st.TxDrops)
			}
			switch {
			case c.refused && (st.GSORefused != 1 || st.GSOSends != 1):
				t.Errorf("%d GSO sends, %d refused; want the first tried and refused, then none", st.GSOSends, st.GSORefused)
			case !c.refused && (st.GSORefused != 0 || st.GSOSends != 2 || st.GSOFrames != 2*run):
				t.Errorf("%d GSO sends of %d frames, %d refused; want 2 of %d", st.GSOSends, st.GSOFrames, st.GSORefused, 2*run)
			}
		})
	}
}

// TestGSOExchange: between two links on loopback, a burst of frames of
// three sizes goes out as GSO sends (runs of at most 64 equal frames, the
// last of a run possibly shorter) and arrives uncut at the receiver, which
// cuts it into the same frames in the same order with good ICRCs: a UDP
// socket with UDP_GRO and the packet socket with its virtio header, over
// IPv4 and IPv6. IPv4 frames carry the ID of their place in their send,
// as the kernel's own cut would give them.
func TestGSOExchange(t *testing.T) {
	sizes := make([]int, 0, 100)
	for range 70 {
		sizes = append(sizes, 900)
	}
	sizes = append(sizes, 100) // ends the second run, shorter
	for range 29 {
		sizes = append(sizes, 256)
	}
	// The runs: 64 × 900; 6 × 900 and the 100; 29 × 256.
	runStart := []int{0, 64, 71}
	for _, recv := range []udp.IO{udp.IOUDP, udp.IOPacket} {
		for _, v6 := range []bool{false, true} {
			mode := udp.Mode{Send: udp.IOUDP, Recv: recv}
			t.Run(fmt.Sprintf("%v,v6=%v", mode, v6), func(t *testing.T) {
				if recv == udp.IOPacket {
					nstest.NeedRoot(t)
				}
				src, dst := lo2, lo3
				a := newLink(t, udp.Config{Addrs: []netip.Addr{src}, Mode: mode})
				b := newLink(t, udp.Config{Addrs: []netip.Addr{dst}, Mode: mode})
				if v6 {
					src, dst = lo6, lo6
					a = newLink(t, udp.Config{Addrs: []netip.Addr{lo6}, Mode: mode})
					b = a
				}
				rb := newRecorder()
				b.Attach(rb)
				var sent [][]byte
				var pkts []*link.Packet
				for i, size := range sizes {
					p := build(t, a.Pool(), frameSpec{op: wire.RCSendOnly, src: src, dst: dst, payload: size, seq: uint32(i)})
					_, roce := roceOf(t, p.Data)
					sent = append(sent, bytes.Clone(roce))
					pkts = append(pkts, p)
				}
				if err := a.Send(pkts); err != nil {
					t.Fatal(err)
				}
				waitFor(t, "frames", func() bool { return rb.n() == len(sizes) })
				run := 0
				for i, g := range rb.got() {
					if run+1 < len(runStart) && i == runStart[run+1] {
						run++
					}
					// The ICRC of an IPv4 frame was moved to its ID.
					f, roce := roceOf(t, g.data)
					if n := len(roce) - wire.ICRCSize; !bytes.Equal(roce[:n], sent[i][:n]) {
						t.Fatalf("frame %d: RoCEv2 part differs:\nsent % x\ngot  % x", i, sent[i], roce)
					}
					if g.icrc != link.ICRCGood || f.VerifyICRC() != nil {
						t.Errorf("frame %d: ICRC status %v, VerifyICRC %v", i, g.icrc, f.VerifyICRC())
					}
					if !v6 && (f.IPv4.ID() != uint16(i-runStart[run]) || !f.IPv4.IsChecksumValid()) {
						t.Errorf("frame %d: IPv4 ID %d (checksum ok %v), want %d", i, f.IPv4.ID(), f.IPv4.IsChecksumValid(), i-runStart[run])
					}
				}
				ca, cb := a.Counters(), b.Counters()
				if ca.GSOSends != 3 || ca.GSOFrames != uint64(len(sizes)) || ca.TxDropped() != 0 {
					t.Errorf("sender: %d GSO sends of %d frames, drops %v; want 3 of %d", ca.GSOSends, ca.GSOFrames, ca.TxDrops, len(sizes))
				}
				if cb.GROReceives != 3 || cb.GROFrames != uint64(len(sizes)) || cb.RxDropped() != 0 {
					t.Errorf("receiver: %d datagrams cut into %d frames, drops %v; want 3 into %d", cb.GROReceives, cb.GROFrames, cb.RxDrops, len(sizes))
				}
			})
		}
	}
}
