package interop

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"testing"

	"github.com/google/gopacket/pcapgo"
)

// A second ICRC implementation, written for the tests from IBTA vol. 1
// annex A17 (RoCEv2) §A17.3.3 and independent of emu/wire, so that a
// capture of irdma-emu's packets is not judged by irdma-emu's own ICRC
// code alone. The rules (also what rxe's rxe_icrc.c:rxe_icrc_hdr does):
// the CRC-32 of Ethernet's FCS (IEEE 802.3, reflected, initial value and
// final XOR all ones) over 8 bytes of all ones standing for the absent
// LRH, the IP header with its variant fields set to all ones (IPv4: type of
// service, time to live, header checksum; IPv6: traffic class, flow label,
// hop limit), the UDP header with its checksum set to all ones, the BTH with
// its FECN/BECN/reserved byte (byte 4) set to all ones, and the rest of the
// packet up to the ICRC; the ICRC is carried least significant byte first.

// errNotRoCE marks a frame that is not a RoCEv2 packet (ARP, ICMP, …).
var errNotRoCE = errors.New("not RoCEv2")

// refICRC returns the ICRC a RoCEv2 Ethernet frame carries and the one the
// annex's rules give.
func refICRC(frame []byte) (carried, computed uint32, err error) {
	if len(frame) < 14 {
		return 0, 0, errNotRoCE
	}
	ethType, off := binary.BigEndian.Uint16(frame[12:]), 14
	for ethType == 0x8100 || ethType == 0x88a8 { // VLAN tags
		if len(frame) < off+4 {
			return 0, 0, errNotRoCE
		}
		ethType, off = binary.BigEndian.Uint16(frame[off+2:]), off+4
	}
	var ip []byte  // the IP header, masked
	var udp []byte // the UDP datagram (header and payload) as long as the IP header says
	switch ethType {
	case 0x0800:
		if len(frame) < off+20 || frame[off]>>4 != 4 {
			return 0, 0, errNotRoCE
		}
		ihl := int(frame[off]&0x0f) * 4
		total := int(binary.BigEndian.Uint16(frame[off+2:]))
		if frame[off+9] != 17 || ihl < 20 || total < ihl || len(frame) < off+total {
			return 0, 0, errNotRoCE
		}
		ip = append([]byte(nil), frame[off:off+ihl]...)
		ip[1] = 0xff                // type of service
		ip[8] = 0xff                // time to live
		ip[10], ip[11] = 0xff, 0xff // header checksum
		udp = frame[off+ihl : off+total]
	case 0x86dd:
		if len(frame) < off+40 || frame[off+6] != 17 {
			return 0, 0, errNotRoCE
		}
		plen := int(binary.BigEndian.Uint16(frame[off+4:]))
		if len(frame) < off+40+plen {
			return 0, 0, errNotRoCE
		}
		ip = append([]byte(nil), frame[off:off+40]...)
		ip[0] |= 0x0f                          // traffic class, high nibble
		ip[1], ip[2], ip[3] = 0xff, 0xff, 0xff // traffic class, flow label
		ip[7] = 0xff                           // hop limit
		udp = frame[off+40 : off+40+plen]
	default:
		return 0, 0, errNotRoCE
	}
	if len(udp) < 8 || binary.BigEndian.Uint16(udp[2:]) != 4791 {
		return 0, 0, errNotRoCE
	}
	ulen := int(binary.BigEndian.Uint16(udp[4:]))
	if ulen < 8+12+4 || ulen > len(udp) {
		return 0, 0, fmt.Errorf("UDP length %d of %d bytes: too short for BTH and ICRC", ulen, len(udp))
	}
	udp = udp[:ulen]
	buf := make([]byte, 0, 8+len(ip)+len(udp))
	buf = append(buf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
	buf = append(buf, ip...)
	start := len(buf)
	buf = append(buf, udp[:len(udp)-4]...)
	buf[start+6], buf[start+7] = 0xff, 0xff // UDP checksum
	buf[start+8+4] = 0xff                   // BTH byte 4: FECN, BECN, reserved
	return binary.LittleEndian.Uint32(udp[len(udp)-4:]), crc32.ChecksumIEEE(buf), nil
}

// readFrames returns the frames of a pcap file.
func readFrames(file string) ([][]byte, error) {
	fh, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	r, err := pcapgo.NewReader(fh)
	if err != nil {
		return nil, err
	}
	var frames [][]byte
	for {
		data, _, err := r.ReadPacketData()
		if err == io.EOF {
			return frames, nil
		}
		if err != nil {
			return frames, fmt.Errorf("frame %d: %w", len(frames)+1, err)
		}
		frames = append(frames, data)
	}
}

// refCheckCapture recomputes the ICRC of every RoCEv2 packet of a pcap
// file: how many there are and which frames (1-based) carry a wrong one.
func refCheckCapture(file string) (packets int, bad []string, err error) {
	frames, err := readFrames(file)
	for i, data := range frames {
		carried, computed, e := refICRC(data)
		if errors.Is(e, errNotRoCE) {
			continue
		}
		packets++
		if e != nil || carried != computed {
			bad = append(bad, fmt.Sprintf("frame %d: carried %#08x, computed %#08x %v", i+1, carried, computed, e))
		}
	}
	return packets, bad, err
}

// TestRefICRCOnRxeCapture proves the reference implementation on traffic of
// two real rdma_rxe devices (testdata/captures/README.md): all 1531 RoCEv2
// packets, every ICRC computed by rxe; and a flipped payload bit is seen.
func TestRefICRCOnRxeCapture(t *testing.T) {
	const file = "../../testdata/captures/rxe-rc-uc-ud-ipv4-mtu1024.pcap"
	n, bad, err := refCheckCapture(file)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1531 || len(bad) != 0 {
		t.Fatalf("%d RoCEv2 packets (want 1531), %d bad: %v", n, len(bad), bad)
	}
	frames, err := readFrames(file)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, data := range frames {
		if _, _, err := refICRC(data); err != nil {
			continue
		}
		for _, i := range []int{len(data) / 2, 14 + 20 + 8 + 2, 14 + 20 + 8 + 11} { // payload, BTH P_Key, BTH PSN
			c := append([]byte(nil), data...)
			c[i] ^= 0x10
			if carried, computed, err := refICRC(c); err == nil && carried == computed {
				t.Fatalf("a flipped bit at byte %d went unnoticed", i)
			}
		}
		// The variant fields do not count: a changed TTL or FECN/BECN byte
		// keeps the ICRC.
		for _, i := range []int{14 + 8, 14 + 20 + 8 + 4} {
			c := append([]byte(nil), data...)
			c[i] ^= 0x40
			if carried, computed, err := refICRC(c); err != nil || carried != computed {
				t.Fatalf("a changed variant byte %d changed the ICRC: %v", i, err)
			}
		}
		if checked++; checked == 50 {
			break
		}
	}
	if checked != 50 {
		t.Fatalf("mutated %d packets, want 50", checked)
	}
}
