package main

import (
	"encoding/binary"

	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// Captures of a daemon's segmentation offload sends.
//
// On lo and veth a GSO send reaches a capture uncut: one IP packet whose
// UDP payload is a run of RoCEv2 packets of one length but for a shorter
// last one (docs/transport.md "Segmentation offload"). Nothing in the
// bytes gives that length, so decode finds it: the first length at which
// every cut starts a BTH of version 0 with the first packet's P_Key, the
// last packet is no longer than the others, and the first packet's ICRC
// holds over the headers the kernel's cut gives it. It then decodes each
// packet as the kernel's cut would have carried it: IP and UDP lengths of
// its own, IPv4 IDs counting up from the send's (af_inet.c
// inet_gso_segment). A packet whose ICRC is bad for another reason has no
// such length (a false match is a 2^-32 chance per candidate).

// maxGSOPacket bounds the packet length tried: the largest PMTU and the
// longest headers (BTH, RETH, ImmDt, ICRC) with room to spare.
const maxGSOPacket = wire.MaxPMTU + 64

// ipOffset returns where the IP header of a captured frame of link type lt
// starts, and its EtherType.
func ipOffset(lt linkType, data []byte) (off int, etherType uint16, ok bool) {
	switch lt {
	case linkTypeEthernet:
		if len(data) < wire.EthernetSize {
			return 0, 0, false
		}
		off, etherType = wire.EthernetSize, binary.BigEndian.Uint16(data[12:])
		if etherType == wire.EtherTypeVLAN {
			if len(data) < off+wire.VLANSize {
				return 0, 0, false
			}
			etherType = binary.BigEndian.Uint16(data[off+2:])
			off += wire.VLANSize
		}
	case linkTypeLinuxSLL:
		if len(data) < sllHeaderSize {
			return 0, 0, false
		}
		off, etherType = sllHeaderSize, binary.BigEndian.Uint16(data[14:])
	case linkTypeLinuxSLL2:
		if len(data) < sll2HeaderSize {
			return 0, 0, false
		}
		off, etherType = sll2HeaderSize, binary.BigEndian.Uint16(data[0:])
	case linkTypeRaw, linkTypeIPv4, linkTypeIPv6, linkTypeRawBSD, linkTypeRawOpen:
		if len(data) < 1 {
			return 0, 0, false
		}
		etherType = wire.EtherTypeIPv4
		if data[0]>>4 == 6 {
			etherType = wire.EtherTypeIPv6
		}
	default:
		return 0, 0, false
	}
	return off, etherType, true
}

// cutGSO returns the packets of a GSO send captured uncut in data, each
// as a whole Ethernet frame with the headers the kernel's cut gives it,
// or false if data is not one.
func cutGSO(lt linkType, data []byte) ([][]byte, bool) {
	off, et, ok := ipOffset(lt, data)
	if !ok {
		return nil, false
	}
	ip := data[off:]
	if et != wire.EtherTypeIPv4 && et != wire.EtherTypeIPv6 || len(ip) < 1 || (et == wire.EtherTypeIPv4) != (ip[0]>>4 == 4) {
		return nil, false
	}
	hl, ok := wire.GSOHeaderLen(ip, len(ip))
	if !ok {
		return nil, false
	}
	total := int(binary.BigEndian.Uint16(ip[2:])) // IPv4 total length
	if et == wire.EtherTypeIPv6 {
		total = wire.IPv6Size + int(binary.BigEndian.Uint16(ip[4:]))
	}
	if total > len(ip) || total < hl+2*wire.MinPacketSize ||
		wire.UDP(ip[hl-wire.UDPSize:]).DestinationPort() != wire.RoCEv2Port {
		return nil, false
	}
	run := ip[hl:total]
	size, ok := gsoSize(ip[:hl], run)
	if !ok {
		return nil, false
	}
	var out [][]byte
	for k, at := 0, 0; at < len(run); k, at = k+1, at+size {
		n := min(size, len(run)-at)
		f := make([]byte, wire.EthernetSize+hl+n)
		eth := wire.Ethernet(f)
		if lt == linkTypeEthernet {
			copy(f[:12], data[:12]) // the MACs; a VLAN tag is left out
		}
		binary.BigEndian.PutUint16(eth[12:], et)
		copy(f[wire.EthernetSize:], ip[:hl])
		copy(f[wire.EthernetSize+hl:], run[at:at+n])
		wire.SetGSOSegmentHeaders(f[wire.EthernetSize:wire.EthernetSize+hl], n, uint16(k))
		out = append(out, f)
	}
	return out, true
}

// gsoSize finds the packet length of a run (see the file comment).
func gsoSize(hdr, run []byte) (int, bool) {
	if len(run) < wire.BTHSize {
		return 0, false
	}
	pkey := binary.BigEndian.Uint16(run[2:])
	probe := make([]byte, len(hdr))
next:
	for size := wire.MinPacketSize; size < len(run) && size <= maxGSOPacket; size += 4 {
		if last := len(run) % size; last != 0 && (last < wire.MinPacketSize || last%4 != 0) {
			continue
		}
		for at := size; at < len(run); at += size {
			if run[at+1]&0x0f != 0 || binary.BigEndian.Uint16(run[at+2:]) != pkey {
				continue next
			}
		}
		copy(probe, hdr)
		wire.SetGSOSegmentHeaders(probe, size, 0)
		pkt := run[:size]
		udp := wire.UDP(probe[len(probe)-wire.UDPSize:])
		var icrc uint32
		if probe[0]>>4 == 6 {
			icrc = wire.ICRCIPv6(wire.IPv6(probe), udp, pkt)
		} else {
			icrc = wire.ICRCIPv4(wire.IPv4(probe[:len(probe)-wire.UDPSize]), udp, pkt)
		}
		if icrc == binary.LittleEndian.Uint32(pkt[size-wire.ICRCSize:]) {
			return size, true
		}
	}
	return 0, false
}
