package hmc

import "github.com/irdma-emu/irdma-emu/emu/hostmem"

// ObjectIOVA resolves object idx of type t to the bus address of its first
// byte: FPM address = base + idx·size; SD = FPM / 2 MB; a direct SD adds the
// offset within its 2 MB page; a paged SD reads PD entry (FPM mod 2 MB) / 4
// KB from its PD page in host memory and adds the offset within the 4 KB
// backing page (docs/hw-controlpath.md "SD and PD backing"). The whole object
// lies in one backing page (objects of up to 4 KB are size-aligned; the 8 KB
// APBVT entry is resolvable only in a direct SD), so the caller may access
// Size(t) bytes from the returned address.
//
// Errors wrap ErrNotCommitted, ErrBadType, ErrIndex, ErrSDInvalid,
// ErrPDInvalid, ErrSpansPages or ErrFault. It takes no lock and allocates
// only when it fails.
func (h *HMC) ObjectIOVA(t ObjType, idx uint32) (hostmem.IOVA, error) {
	l := h.st.Load()
	if l == nil {
		return 0, &Error{Op: "ObjectIOVA", Err: ErrNotCommitted, Type: t, Index: idx}
	}
	if int(t) >= NumObjTypes {
		return 0, &Error{Op: "ObjectIOVA", Err: ErrBadType, Type: t, Index: idx}
	}
	if idx >= l.count[t] {
		return 0, &Error{Op: "ObjectIOVA", Err: ErrIndex, Type: t, Index: idx, Count: l.count[t]}
	}
	size := uint64(h.q.Objects[t].Size)
	fpm := l.base[t] + uint64(idx)*size
	sd := fpm / DirectBPSize
	off := fpm % DirectBPSize
	if sd >= uint64(len(l.sds)) { // cannot happen: the layout spans the table
		return 0, &Error{Op: "ObjectIOVA", Err: ErrSDInvalid, Type: t, Index: idx, SD: uint32(sd)}
	}
	w := l.sds[sd].Load()
	if w&sdDataValid == 0 {
		return 0, &Error{Op: "ObjectIOVA", Err: ErrSDInvalid, Type: t, Index: idx, SD: uint32(sd)}
	}
	pa := w & sdDataAddrMask
	if w&sdDataDirect != 0 {
		return hostmem.IOVA(pa + off), nil
	}
	pd := off / PagedBPSize
	if pd >= w>>sdDataBPShift&sdDataBPMask {
		return 0, &Error{Op: "ObjectIOVA", Err: ErrPDInvalid, Type: t, Index: idx, SD: uint32(sd), PD: uint32(pd)}
	}
	if off%PagedBPSize+size > PagedBPSize {
		return 0, &Error{Op: "ObjectIOVA", Err: ErrSpansPages, Type: t, Index: idx, SD: uint32(sd), PD: uint32(pd)}
	}
	e, err := h.mem.Load64(hostmem.IOVA(pa + pd*8))
	if err != nil {
		return 0, &Error{Op: "ObjectIOVA", Err: ErrFault, Type: t, Index: idx, SD: uint32(sd), PD: uint32(pd), Cause: err}
	}
	if e&pdEntryValid == 0 {
		return 0, &Error{Op: "ObjectIOVA", Err: ErrPDInvalid, Type: t, Index: idx, SD: uint32(sd), PD: uint32(pd)}
	}
	return hostmem.IOVA(e&pdEntryAddrMask + off%PagedBPSize), nil
}
