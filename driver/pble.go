package driver

import (
	"sort"
	"sync"
	"syscall"
)

// pblePool is pble.c's irdma_hmc_pble_rsrc: the PBLE HMC object carved
// into chunks as it is backed. PBLE index = (FPM address − PBLE base) / 8
// (fpm_to_idx). The pool starts on the first 4 KB boundary of the object
// (irdma_hmc_init_pble) and grows lazily, one chunk per add_pble_prm call:
// up to the end of the current 2 MB SD, or the end of the object. Unlike
// pble.c, which backs a partial SD with a PAGED SD of 4 KB pages, every
// SD here is DIRECT (a 2 MB contiguous page is always available to us);
// the device sees the same PBLE contents at the same FPM addresses.
type pblePool struct {
	d        *Device
	mu       sync.Mutex
	base     uint64 // PBLE object FPM base
	cnt      uint32 // committed PBLE count
	nextFPM  uint64 // first FPM address not yet in a chunk
	limitFPM uint64
	chunks   []*pbleChunk
	// maxChunk caps a chunk in PBLEs (0: no cap beyond the SD). Tests use
	// it to exercise level-2 allocations without 256K-PBLE lists.
	maxChunk uint32
	inUse    uint32
}

type pbleChunk struct {
	firstIdx uint32 // PBLE index of the chunk's first entry
	n        uint32
	free     []pbleExtent // sorted, coalesced
}

type pbleExtent struct{ idx, n uint32 }

// pbleLevel is enum irdma_pble_level.
type pbleLevel uint8

const (
	pbleLevel0 pbleLevel = 0
	pbleLevel1 pbleLevel = 1
	pbleLevel2 pbleLevel = 2
)

// pbleAlloc is irdma_pble_alloc: a level-1 run, or a level-2 root run
// whose entries hold the PBLE indices of up to-512-entry leaves.
type pbleAlloc struct {
	level  pbleLevel
	total  uint32
	l1     pbleExtent // level 1: the run of total PBLEs
	root   pbleExtent // level 2
	leaves []pbleExtent
}

// firstIdx is what goes in a WQE's FIRSTPMPBLIDX: the level-1 run or the
// level-2 root.
func (a *pbleAlloc) firstIdx() uint32 {
	if a.level == pbleLevel2 {
		return a.root.idx
	}
	return a.l1.idx
}

func newPBLEPool(d *Device) *pblePool {
	o := d.hmc.Obj[hmcPBLE]
	start := (o.Base + 4095) &^ 4095
	return &pblePool{d: d, base: o.Base, cnt: o.Cnt, nextFPM: start, limitFPM: o.Base + uint64(o.Cnt)*8}
}

// grow is add_pble_prm: back the next chunk of the object (programming
// its SD if it is not valid yet) and add it to the pool.
func (p *pblePool) grow() error {
	if p.nextFPM+4096 > p.limitFPM {
		return syscall.ENOMEM
	}
	sd := p.nextFPM / hmcDirectBPSize
	end := min((sd+1)*hmcDirectBPSize, p.limitFPM)
	end &^= 4095 // whole 4 KB pages of PBLEs
	if end <= p.nextFPM {
		return syscall.ENOMEM
	}
	n := uint32((end - p.nextFPM) / 8)
	if p.maxChunk != 0 && n > p.maxChunk {
		n = p.maxChunk
		end = p.nextFPM + uint64(n)*8
	}
	added, err := p.d.sds.backRange(uint32(sd), uint32(sd)+1)
	if err != nil {
		return err
	}
	if len(added) > 0 {
		if err := p.d.sds.program(added, true); err != nil {
			return err
		}
	}
	first := uint32((p.nextFPM - p.base) / 8)
	p.chunks = append(p.chunks, &pbleChunk{firstIdx: first, n: n, free: []pbleExtent{{first, n}}})
	p.nextFPM = end
	return nil
}

// takeRun finds n contiguous free PBLEs in one chunk (gen_pool_alloc).
func (p *pblePool) takeRun(n uint32) (pbleExtent, bool) {
	for _, c := range p.chunks {
		for i, e := range c.free {
			if e.n < n {
				continue
			}
			got := pbleExtent{e.idx, n}
			if e.n == n {
				c.free = append(c.free[:i], c.free[i+1:]...)
			} else {
				c.free[i] = pbleExtent{e.idx + n, e.n - n}
			}
			p.inUse += n
			return got, true
		}
	}
	return pbleExtent{}, false
}

func (p *pblePool) putRun(x pbleExtent) {
	if x.n == 0 {
		return
	}
	for _, c := range p.chunks {
		if x.idx < c.firstIdx || x.idx+x.n > c.firstIdx+c.n {
			continue
		}
		c.free = append(c.free, x)
		sort.Slice(c.free, func(i, j int) bool { return c.free[i].idx < c.free[j].idx })
		merged := c.free[:1]
		for _, e := range c.free[1:] {
			last := &merged[len(merged)-1]
			if last.idx+last.n == e.idx {
				last.n += e.n
			} else {
				merged = append(merged, e)
			}
		}
		c.free = merged
		p.inUse -= x.n
		return
	}
}

// getLvl1Lvl2 is get_lvl1_lvl2_pble: a level-1 run first; if that fails
// and more than 512 PBLEs are wanted (and level 2 is allowed), a level-2
// allocation: a root of ceil(cnt/512) entries, each holding the PBLE
// index of a leaf of up to 512 (get_lvl2_pble).
func (p *pblePool) getLvl1Lvl2(cnt uint32, lvl1Only bool) (*pbleAlloc, bool) {
	if run, ok := p.takeRun(cnt); ok {
		return &pbleAlloc{level: pbleLevel1, total: cnt, l1: run}, true
	}
	if lvl1Only || cnt <= pblePerPage {
		return nil, false
	}
	leafCnt := (cnt + pblePerPage - 1) / pblePerPage
	root, ok := p.takeRun(leafCnt)
	if !ok {
		return nil, false
	}
	a := &pbleAlloc{level: pbleLevel2, total: cnt, root: root}
	rem := cnt
	for i := uint32(0); i < leafCnt; i++ {
		n := min(rem, pblePerPage)
		leaf, ok := p.takeRun(n)
		if !ok {
			p.freeLocked(a)
			return nil, false
		}
		a.leaves = append(a.leaves, leaf)
		rem -= n
	}
	// Root entries hold leaf PBLE indices (get_lvl2_pble: *addr = leaf->idx).
	for i, leaf := range a.leaves {
		p.write(root.idx+uint32(i), uint64(leaf.idx))
	}
	return a, true
}

// get is irdma_get_pble: allocate cnt PBLEs, growing the pool as needed.
func (p *pblePool) get(cnt uint32, lvl1Only bool) (*pbleAlloc, error) {
	if cnt == 0 {
		return nil, syscall.EINVAL
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if a, ok := p.getLvl1Lvl2(cnt, lvl1Only); ok {
		return a, nil
	}
	tries := cnt/(hmcDirectBPSize/8) + 2
	for range tries {
		if err := p.grow(); err != nil {
			return nil, err
		}
		if a, ok := p.getLvl1Lvl2(cnt, lvl1Only); ok {
			return a, nil
		}
	}
	return nil, syscall.ENOMEM
}

func (p *pblePool) freeLocked(a *pbleAlloc) {
	switch a.level {
	case pbleLevel1:
		p.putRun(a.l1)
	case pbleLevel2:
		for _, l := range a.leaves {
			p.putRun(l)
		}
		p.putRun(a.root)
	}
	a.level = pbleLevel0
}

// free is irdma_free_pble.
func (p *pblePool) free(a *pbleAlloc) {
	if a == nil {
		return
	}
	p.mu.Lock()
	p.freeLocked(a)
	p.mu.Unlock()
}

// write stores one PBLE.
func (p *pblePool) write(idx uint32, v uint64) {
	fpm := p.base + uint64(idx)*8
	a, ok := p.d.sds.hostAddr(fpm)
	if !ok {
		p.d.log.Error("PBLE write to unbacked FPM address", u64Field("fpm", fpm))
		return
	}
	p.d.store64(a, v)
}

// read loads one PBLE (tests and diagnostics).
func (p *pblePool) read(idx uint32) uint64 {
	a, ok := p.d.sds.hostAddr(p.base + uint64(idx)*8)
	if !ok {
		return 0
	}
	return p.d.load64(a)
}

// fill writes the page addresses into the allocation (irdma_copy_user_pgaddrs
// with irdma_next_pbl_addr): level 1 in order; level 2 leaf after leaf.
func (p *pblePool) fill(a *pbleAlloc, pages []uint64) {
	switch a.level {
	case pbleLevel1:
		for i, pg := range pages {
			if uint32(i) >= a.total {
				break
			}
			p.write(a.l1.idx+uint32(i), pg)
		}
	case pbleLevel2:
		for i, pg := range pages {
			if uint32(i) >= a.total {
				break
			}
			leaf := a.leaves[i/pblePerPage]
			p.write(leaf.idx+uint32(i%pblePerPage), pg)
		}
	}
}

// setPage is irdma_set_page: write page i of a fast-register MR's list.
func (p *pblePool) setPage(a *pbleAlloc, i uint32, pg uint64) {
	switch a.level {
	case pbleLevel1:
		p.write(a.l1.idx+i, pg)
	case pbleLevel2:
		p.write(a.leaves[i/pblePerPage].idx+i%pblePerPage, pg)
	}
}
