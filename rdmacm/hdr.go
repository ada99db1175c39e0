package rdmacm

import "net/netip"

// cmaHdr is the RDMA CM's header at the start of a REQ's or SIDR_REQ's
// private data (cma.c struct cma_hdr, 36 bytes): the IP addresses and the
// source port of the connection, which a RoCE REQ does not otherwise
// carry.
//
//	0  u8      cma_version (CMA_VERSION 0x00)
//	1  u8      ip_version in bits 7:4 (4 or 6)
//	2  be16    port: the active side's source port
//	4  [16]u8  src_addr: IPv6, or IPv4 in the last 4 bytes
//	20 [16]u8  dst_addr
type cmaHdr []byte

const (
	cmaHdrSize = 36
	cmaVersion = 0x00
	hdrVersion = 0
	hdrIPVer   = 1
	hdrPort    = 2
	hdrSrc     = 4
	hdrDst     = 20
)

// putCmaHdr is cma_format_hdr.
func putCmaHdr(b []byte, src, dst sockAddr) {
	h := cmaHdr(b[:cmaHdrSize])
	clear(h)
	h[hdrVersion] = cmaVersion
	be.PutUint16(h[hdrPort:], src.port)
	if !src.v6 && src.ip().Is4() {
		h[hdrIPVer] = 4 << 4
		s, d := src.ip().As4(), dst.ip().As4()
		copy(h[hdrSrc+12:], s[:])
		copy(h[hdrDst+12:], d[:])
		return
	}
	h[hdrIPVer] = 6 << 4
	s, d := src.addr.As16(), dst.addr.As16()
	copy(h[hdrSrc:], s[:])
	copy(h[hdrDst:], d[:])
}

// parseCmaHdr reads the header of a received REQ: the requester's address
// and port, and the address it asked for. ok is false for a header that
// is short, of another version, or of an unknown IP version
// (cma_save_ip_info / cma_check_hdr refuse those).
func parseCmaHdr(b []byte, dstPort uint16) (src, dst sockAddr, ok bool) {
	if len(b) < cmaHdrSize || b[hdrVersion] != cmaVersion {
		return src, dst, false
	}
	h := cmaHdr(b)
	switch h[hdrIPVer] >> 4 {
	case 4:
		src = sockAddr{addr: netip.AddrFrom4([4]byte(h[hdrSrc+12 : hdrSrc+16])), port: be.Uint16(h[hdrPort:])}
		dst = sockAddr{addr: netip.AddrFrom4([4]byte(h[hdrDst+12 : hdrDst+16])), port: dstPort}
	case 6:
		src = sockAddr{v6: true, addr: netip.AddrFrom16([16]byte(h[hdrSrc : hdrSrc+16])), port: be.Uint16(h[hdrPort:])}
		dst = sockAddr{v6: true, addr: netip.AddrFrom16([16]byte(h[hdrDst : hdrDst+16])), port: dstPort}
	default:
		return src, dst, false
	}
	return src, dst, true
}
