package uverbs

import (
	"container/heap"
	"sync/atomic"

	"github.com/irdma-emu/irdma-emu/driver"
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
)

// The objects of a context, by handle. As in the kernel (one xarray per
// uverbs file, XA_FLAGS_ALLOC, rdma_core.c:alloc_begin_idr_uobject), every
// type shares one handle space and a new object takes the lowest free
// handle; descriptors (completion channels, the async file) are not
// handles.

type objKind uint8

const (
	kindPD objKind = iota + 1
	kindMR
	kindMW
	kindCQ
	kindQP
	kindAH
	kindSRQ
)

type pdObj struct {
	pd *driver.PD
}

type mrObj struct {
	mr      *driver.MR
	pd      *pdObj
	io      *hostmem.Region // MapIO mapping made for the registration, if any
	regType uint16
	// resID numbers the MR as restrack does (rdma_restrack_add: a
	// device-wide id from 0): libirdma's ring registrations have no
	// STag to name them by (restrack.go).
	resID uint32
}

type mwObj struct {
	mw *driver.MW
	pd *pdObj
}

type cqObj struct {
	handle     uint32
	cq         *driver.CQ
	userHandle uint64
	ch         *compChannel // nil: no completion channel
	comp       eventCounter // completion events read (comp_events_reported)
	async      eventCounter // async events read (async_events_reported)
	shadowVA   uint64       // user_shadow_area
	dead       atomic.Bool
}

type qpObj struct {
	handle     uint32
	qp         *driver.QP
	userHandle uint64
	qpType     uint8
	pd         *pdObj
	scq, rcq   *cqObj
	srq        *srqObj // the SRQ its receives come from, if any
	port       uint8   // qp->port: set by a modify with IB_QP_PORT
	cap        driver.QPCap
	mcast      []mcastEntry
	async      eventCounter // events_reported
	dead       atomic.Bool
}

// srqObj is a shared receive queue (ib_usrq_object).
type srqObj struct {
	handle     uint32
	srq        *driver.SRQ
	userHandle uint64
	pd         *pdObj
	async      eventCounter // events_reported
	dead       atomic.Bool
}

type mcastEntry struct {
	gid  [16]byte
	mlid uint16
}

type ahObj struct {
	ah         *driver.AH
	pd         *pdObj
	userHandle uint64
}

// compChannel is a completion channel (ib_uverbs_completion_event_file).
type compChannel struct {
	ef  *eventFile
	ino uint64 // identity of the pipe, to recognise the program's descriptor
	dev uint64
}

type object struct {
	kind objKind
	v    any
}

// handleTable is the context's idr.
type handleTable struct {
	objs map[uint32]object
	free idHeap // freed handles below next
	next uint32
}

func (t *handleTable) alloc(o object) uint32 {
	if t.objs == nil {
		t.objs = map[uint32]object{}
	}
	var id uint32
	if t.free.Len() > 0 {
		id = heap.Pop(&t.free).(uint32)
	} else {
		id = t.next
		t.next++
	}
	t.objs[id] = o
	return id
}

func (t *handleTable) remove(id uint32) {
	if _, ok := t.objs[id]; !ok {
		return
	}
	delete(t.objs, id)
	if id+1 == t.next {
		t.next--
		// Handles freed earlier just below the top are now above it.
		for t.next > 0 {
			if _, used := t.objs[t.next-1]; used {
				break
			}
			t.next--
		}
		t.free.dropFrom(t.next)
		return
	}
	heap.Push(&t.free, id)
}

func (t *handleTable) len() int { return len(t.objs) }

// lookup is rdma_lookup_get_uobject for a read or destroy: ENOENT for a
// handle that names nothing, EINVAL for one of another type.
func (t *handleTable) lookup(id uint32, k objKind) (any, error) {
	o, ok := t.objs[id]
	if !ok {
		return nil, eNOENT
	}
	if o.kind != k {
		return nil, eINVAL
	}
	return o.v, nil
}

// idHeap is a min-heap of free handles.
type idHeap []uint32

func (h idHeap) Len() int           { return len(h) }
func (h idHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h idHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *idHeap) Push(x any)        { *h = append(*h, x.(uint32)) }
func (h *idHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// dropFrom removes every handle ≥ top (they are above the high-water mark).
func (h *idHeap) dropFrom(top uint32) {
	kept := (*h)[:0]
	for _, id := range *h {
		if id < top {
			kept = append(kept, id)
		}
	}
	*h = kept
	heap.Init(h)
}
