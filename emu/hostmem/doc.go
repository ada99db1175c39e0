// Package hostmem is host memory as the emulated device sees it: a bus of
// regions mapped at bus addresses (IOVAs) that the device assigns itself.
//
// The device reaches host memory only through the addresses the driver
// programs into contexts, WQEs and PBLEs. On real hardware those are the
// results of dma_map_* / dma_alloc_coherent; here they are IOVAs handed out by
// a Memory. Programs' virtual addresses collide across programs, so they are
// never bus addresses: a client buffer registered with ibv_reg_mr is mapped at
// a fresh IOVA and the MR's PBLEs carry that IOVA.
//
// # Regions
//
// A Region is one contiguous IOVA range backed by one of:
//
//   - a memfd created by Alloc (the driver half's dma_alloc_coherent: CQP
//     ring, CCQ, HMC backing pages, kernel QP/CQ rings);
//   - a shareable descriptor mapped by Map (a client's memfd rings and
//     shadow areas, passed over the attach socket with SCM_RIGHTS);
//   - an io.ReaderAt / io.WriterAt mapped by MapIO (a client's
//     /proc/<pid>/mem descriptor for buffers it registers with ibv_reg_mr;
//     see docs of MapIO for the write-ordering rule).
//
// The first two are "mapped" regions: the daemon holds a MAP_SHARED mapping,
// Bytes and Slice give zero-copy access and Load64/Store64 are real atomic
// instructions on the shared page, visible to every process that maps the
// same memfd.
//
// # IOVA scheme
//
// IOVAs are handed out by a bump allocator starting at 4 GiB (1<<32), page
// aligned (or more, on request), with one unmapped guard page after every
// region, and never reused:
//
//   - zero (and everything below 4 GiB) is never a valid address, so an
//     unset address field faults instead of hitting memory;
//   - every IOVA needs its upper 32 bits, so a driver or device that drops
//     them (CCQPHIGH/CCQPLOW, PBLE and context fields) faults at once;
//   - an access that runs off the end of a region lands in the guard gap,
//     never in the neighbouring region;
//   - a stale IOVA kept after Unmap (a use-after-free DMA) faults forever
//     instead of aliasing a newer region, as with an IOMMU that never
//     recycles addresses. 2^64-2^32 bytes of space is not exhausted in
//     practice; if it ever is, Alloc fails with ErrNoSpace.
//
// # Accesses
//
// Every access must lie within one region; an access that starts in one
// region and ends in another (or in a gap) faults, as a DMA crossing an
// unmapped IOMMU page would. A zero-length access touches no memory and
// always succeeds, whatever its address (a zero-length SGE has no address).
// All accesses are bounds-checked against the region; errors are
// *FaultError values satisfying errors.Is(err, ErrFault), never panics,
// whatever the input (negative or huge lengths, IOVAs near 2^64).
//
// Multi-byte values (Load64, Store64, …) are little-endian words in host
// byte order; the package supports little-endian hosts only, as the device
// model's structures are little-endian.
//
// Region lookup is on the data path. It is lock-free and allocation-free: an
// immutable sorted table of regions behind an atomic.Pointer, replaced
// copy-on-write by Alloc, Map, MapIO and Unmap under a mutex, searched by
// binary search.
//
// # Unmap and memory safety
//
// Unmap removes the region from the table, so later lookups fault. A reader
// that loaded the old table may still hold the region; each access therefore
// takes a reference on the region for the duration of the copy (one atomic
// add before, one after) and fails cleanly with ReasonUnmapped once the
// region is marked dead. The munmap itself is deferred until the last
// in-flight access drops its reference, so no copy can touch an unmapped
// page. This is real munmap: the address range and the memfd pages are
// returned to the kernel as soon as no reader holds them.
//
// Bytes and Slice hand out slices that escape this reference counting. A
// region that has ever given out such a slice is therefore not munmapped on
// Unmap: its pages are replaced atomically (mmap MAP_FIXED) by private
// anonymous pages and its memfd is closed, which returns the shared memory to
// the kernel, while the address range stays reserved until Memory.Close. A
// stale slice then reads zeros and its writes go nowhere; it never faults.
// Slices must not be used after Memory.Close.
//
// A shared mapping can also raise SIGBUS when another process truncates the
// file under it. Alloc seals its memfds against shrinking (F_SEAL_SHRINK),
// and Map adds the seal to a client's memfd when the kernel allows it
// (memfds created with MFD_ALLOW_SEALING); such regions cannot fault. For a
// descriptor that cannot be sealed, every access runs under
// runtime/debug.SetPanicOnFault, so a truncation becomes a *FaultError with
// ReasonBus instead of killing the daemon. (The guard costs about 50 ns per
// access, which is why sealed regions skip it.)
package hostmem
