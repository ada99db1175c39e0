/* libirdma-emu-preload: the shared arena for the provider's rings and the
 * program's large page-aligned buffers.
 *
 * libirdma allocates the memory the device polls — SQ/RQ rings with their
 * shadow area, CQ rings, CQ shadow areas — with memalign(4096, ...)
 * (irdma_alloc_hw_buf in providers/irdma/uverbs.c) and registers it with
 * REG_MR of reg_type QP or CQ. The daemon must reach it zero-copy, so
 * page-aligned allocations whose caller lies in an object named libirdma*
 * are served from a memfd mapped MAP_SHARED, and every piece of that memfd
 * is announced to the daemon with a MEM message (docs/preload.md).
 * Programs allocate their data buffers the same way (perftest's
 * host_memory_allocate_buffer: memalign(page size, size); ibv_rc_pingpong:
 * memalign(page_size, size)), so page-aligned allocations of at least
 * IRDMA_EMU_ARENA_MIN bytes from any caller are served too (unless
 * IRDMA_EMU_ARENA=rings): a registration inside the arena is plain loads
 * and stores for the daemon instead of a system call per packet. Every
 * other allocation goes to libc untouched.
 *
 * Layout: one address range of ARENA_RESERVE bytes is reserved PROT_NONE at
 * the first such allocation; the memfd is mapped at its start and grows
 * (ftruncate, then one more MAP_FIXED piece) as needed, so memfd offset and
 * address differ by a constant and free() recognises arena pointers with one
 * range check. The memfd is sparse: a piece costs memory only where it is
 * touched; free gives blocks of ARENA_KEEP_BELOW bytes or more back to it.
 * Allocations are whole pages (a 64-byte shadow area gets a page of
 * its own, so it shares its page with nothing else).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "iemu.h"

#define ARENA_RESERVE (4ULL << 30) /* address space, not memory */
#define ARENA_MIN_GROW (1UL << 20)
#define ARENA_KEEP_BELOW (128UL << 10) /* free keeps smaller blocks' pages (glibc's mmap threshold) */
#define PROBE_PAGES 4096 /* mincore window when copying the arena in a fork child */

struct ext {
	uintptr_t addr;
	size_t len;
	int used;
};

static struct {
	pthread_mutex_t lock;
	uintptr_t lo;    /* reservation start; read without the lock by free() */
	int failed;      /* reservation impossible: never retry */
	int memfd;       /* -1 until the first piece */
	dev_t mdev;      /* its identity: the program may close it behind */
	ino_t mino;      /* our back (closefrom) and reuse the number */
	uintptr_t start; /* address of memfd offset 0 */
	size_t fsize;    /* memfd size: bytes mapped from start */
	uintptr_t live;  /* below: never allocated from again (fork, lost memfd) */
	uintptr_t shared; /* from here up the mapping is MAP_SHARED */
	struct ext *ext; /* sorted by address, covering [lo, start+fsize) */
	size_t n, cap;
	/* statistics, for IRDMA_EMU_DEBUG */
	unsigned long allocs, frees, fallbacks, pieces, buffers, reallocs;
	size_t inuse, peak;
} A = { .lock = PTHREAD_MUTEX_INITIALIZER, .memfd = -1 };

static void *real_memalign, *real_posix_memalign, *real_aligned_alloc, *real_free, *real_realloc,
	*real_malloc_usable_size, *real_valloc, *real_pvalloc, *real_malloc;

/* dlsym may itself call free; such a free during the lookup of free leaks
 * its block rather than recursing. */
static __thread int resolving_free __attribute__((tls_model("initial-exec")));

/* The provider's text, cached once found. */
static uintptr_t prov_lo, prov_hi;
static char prov_name[64];

void iemu_arena_init(void)
{
	/* Resolve early, before anything but the loader can call free. */
	resolving_free = 1;
	(void)iemu_real_slow(&real_free, "free");
	resolving_free = 0;
	(void)REAL(memalign);
	(void)REAL(posix_memalign);
	(void)REAL(aligned_alloc);
	(void)REAL(realloc);
	(void)REAL(malloc);
	(void)REAL(malloc_usable_size);
	(void)REAL(valloc);
	(void)REAL(pvalloc);
}

void iemu_arena_lock(void) { pthread_mutex_lock(&A.lock); }
void iemu_arena_unlock(void) { pthread_mutex_unlock(&A.lock); }

static inline int in_arena(const void *p)
{
	uintptr_t lo = __atomic_load_n(&A.lo, __ATOMIC_ACQUIRE);
	return lo != 0 && (uintptr_t)p >= lo && (uintptr_t)p - lo < ARENA_RESERVE;
}

/* memfd_ok checks that A.memfd is still our memfd. When the program closed
 * it (closefrom, close_range, a raw close), the pieces mapped so far stay
 * shared with the connections that know them, but no new connection can be
 * told about them: they are retired as after a fork, and the next piece
 * starts a new memfd. */
static int memfd_ok(void)
{
	struct stat st;

	if (A.memfd < 0)
		return 0;
	if (syscall(SYS_fstat, A.memfd, &st) == 0 && st.st_dev == A.mdev && st.st_ino == A.mino)
		return 1;
	iemu_dbg("arena: the memfd (fd %d) was closed behind our back; starting a new one", A.memfd);
	A.memfd = -1; /* the number is not ours any more: never close it */
	A.live = A.start + A.fsize;
	A.start = A.live;
	A.fsize = 0;
	return 0;
}

int iemu_arena_extent(uintptr_t *addr, size_t *len, uint64_t *fdoff, int *memfd)
{
	if (!memfd_ok() || A.fsize == 0)
		return 0;
	*addr = A.start;
	*len = A.fsize;
	*fdoff = 0;
	*memfd = A.memfd;
	return 1;
}

/* ---------------------------------------------------------------------
 * Who is calling
 */

struct find {
	uintptr_t pc, lo, hi;
	int found;
};

static int phdr_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	struct find *f = data;
	uintptr_t lo = UINTPTR_MAX, hi = 0;
	int has = 0;

	(void)size;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t a, b;
		if (ph->p_type != PT_LOAD)
			continue;
		a = info->dlpi_addr + ph->p_vaddr;
		b = a + ph->p_memsz;
		if (a < lo)
			lo = a;
		if (b > hi)
			hi = b;
		if (f->pc >= a && f->pc < b)
			has = 1;
	}
	if (!has)
		return 0;
	f->lo = lo;
	f->hi = hi;
	f->found = 1;
	return 1;
}

/* from_provider: the return address pc lies in an object whose file name
 * contains "libirdma". Called without any lock of ours (dladdr and
 * dl_iterate_phdr take the loader's lock). */
static int from_provider(uintptr_t pc)
{
	uintptr_t hi = __atomic_load_n(&prov_hi, __ATOMIC_ACQUIRE);
	const char *base;
	struct find f;
	Dl_info di;

	if (hi != 0 && pc < hi && pc >= __atomic_load_n(&prov_lo, __ATOMIC_RELAXED))
		return 1;
	if (dladdr((void *)pc, &di) == 0 || di.dli_fname == NULL)
		return 0;
	base = strrchr(di.dli_fname, '/');
	base = base != NULL ? base + 1 : di.dli_fname;
	if (strstr(base, "libirdma") == NULL)
		return 0;
	memset(&f, 0, sizeof f);
	f.pc = pc;
	dl_iterate_phdr(phdr_cb, &f);
	pthread_mutex_lock(&A.lock);
	if (f.found && prov_hi == 0) {
		size_t k = strlen(base);
		if (k >= sizeof prov_name)
			k = sizeof prov_name - 1;
		memcpy(prov_name, base, k);
		prov_name[k] = 0;
		__atomic_store_n(&prov_lo, f.lo, __ATOMIC_RELAXED);
		__atomic_store_n(&prov_hi, f.hi, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&A.lock);
	return 1;
}

/* ---------------------------------------------------------------------
 * The allocator (A.lock held)
 */

static int reserve_ext(size_t more)
{
	struct ext *e;
	size_t cap;

	if (A.n + more <= A.cap)
		return 0;
	cap = A.cap ? 2 * A.cap : 32;
	while (cap < A.n + more)
		cap *= 2;
	e = realloc(A.ext, cap * sizeof *e);
	if (e == NULL)
		return -1;
	A.ext = e;
	A.cap = cap;
	return 0;
}

static void insert_ext(size_t i, uintptr_t addr, size_t len, int used)
{
	memmove(&A.ext[i + 1], &A.ext[i], (A.n - i) * sizeof *A.ext);
	A.ext[i].addr = addr;
	A.ext[i].len = len;
	A.ext[i].used = used;
	A.n++;
}

static void remove_ext(size_t i)
{
	memmove(&A.ext[i], &A.ext[i + 1], (A.n - i - 1) * sizeof *A.ext);
	A.n--;
}

/* take carves len bytes aligned to align out of a free live extent. */
static void *take(size_t align, size_t len)
{
	for (size_t i = 0; i < A.n; i++) {
		struct ext *e = &A.ext[i];
		uintptr_t a, end;
		if (e->used || e->addr < A.live)
			continue;
		a = (e->addr + align - 1) & ~(uintptr_t)(align - 1);
		end = e->addr + e->len;
		if (a < e->addr || a > end || end - a < len)
			continue;
		if (reserve_ext(2) < 0)
			return NULL;
		e = &A.ext[i];
		if (a > e->addr) {
			insert_ext(i, e->addr, a - e->addr, 0);
			i++;
			e = &A.ext[i];
			e->addr = a;
			e->len = end - a;
		}
		if (e->len > len)
			insert_ext(i + 1, a + len, e->len - len, 0);
		e = &A.ext[i];
		e->len = len;
		e->used = 1;
		return (void *)a;
	}
	return NULL;
}

static int grow(size_t need)
{
	size_t add, round = ARENA_MIN_GROW;
	uintptr_t at;
	void *m;

	if (A.lo == 0) {
		m = (void *)syscall(SYS_mmap, NULL, (size_t)ARENA_RESERVE, PROT_NONE,
				    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0L);
		if (m == MAP_FAILED) {
			iemu_dbg("arena: cannot reserve %llu bytes of address space (%s): provider "
				 "rings stay in the heap, unreachable zero-copy",
				 (unsigned long long)ARENA_RESERVE, strerror(errno));
			A.failed = 1;
			return -1;
		}
		A.start = A.live = A.shared = (uintptr_t)m;
		__atomic_store_n(&A.lo, (uintptr_t)m, __ATOMIC_RELEASE);
	}
	if (!memfd_ok()) {
		struct stat st;
		int fd = (int)syscall(SYS_memfd_create, "irdma-emu-arena", MFD_CLOEXEC | MFD_ALLOW_SEALING);
		if (fd < 0) {
			iemu_dbg("arena: memfd_create: %s", strerror(errno));
			return -1;
		}
		if (syscall(SYS_fstat, fd, &st) < 0) {
			syscall(SYS_close, fd);
			return -1;
		}
		A.memfd = fd;
		A.mdev = st.st_dev;
		A.mino = st.st_ino;
		A.start = A.live;
		A.fsize = 0;
	}
	add = need > A.fsize ? need : A.fsize;
	add = (add + round - 1) & ~(round - 1);
	at = A.start + A.fsize;
	if (at + add > A.lo + ARENA_RESERVE) {
		add = (need + IEMU_PAGE - 1) & ~(size_t)(IEMU_PAGE - 1);
		if (at + add > A.lo + ARENA_RESERVE) {
			iemu_dbg("arena: full (%llu bytes)", (unsigned long long)ARENA_RESERVE);
			return -1;
		}
	}
	if (reserve_ext(1) < 0)
		return -1;
	if (syscall(SYS_ftruncate, A.memfd, (off_t)(A.fsize + add)) < 0) {
		iemu_dbg("arena: ftruncate: %s", strerror(errno));
		return -1;
	}
	/* The daemon maps the memfd: it must never shrink under it. */
	if (A.fsize == 0 && syscall(SYS_fcntl, A.memfd, F_ADD_SEALS, F_SEAL_SHRINK) < 0)
		iemu_dbg("arena: F_SEAL_SHRINK: %s", strerror(errno));
	m = (void *)syscall(SYS_mmap, (void *)at, add, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
			    A.memfd, (off_t)A.fsize);
	if (m == MAP_FAILED) {
		iemu_dbg("arena: mmap: %s", strerror(errno));
		return -1;
	}
	if (A.n > 0 && !A.ext[A.n - 1].used && A.ext[A.n - 1].addr >= A.live &&
	    A.ext[A.n - 1].addr + A.ext[A.n - 1].len == at)
		A.ext[A.n - 1].len += add;
	else
		insert_ext(A.n, at, add, 0);
	iemu_announce_mem(at, add, A.fsize, A.memfd);
	A.fsize += add;
	A.pieces++;
	iemu_dbg("arena: piece %lu: %zu bytes at %#lx (memfd offset %zu)", A.pieces, add,
		 (unsigned long)at, A.fsize - add);
	return 0;
}

static void *arena_alloc(size_t align, size_t size, uintptr_t pc, int prov, const char *fn)
{
	size_t len;
	void *p = NULL;

	if (size == 0 || size > ARENA_RESERVE)
		return NULL;
	len = (size + IEMU_PAGE - 1) & ~(size_t)(IEMU_PAGE - 1);
	pthread_mutex_lock(&A.lock);
	if (!A.failed) {
		p = take(align, len);
		if (p == NULL && grow(len + align - IEMU_PAGE) == 0)
			p = take(align, len);
	}
	if (p != NULL) {
		A.allocs++;
		A.buffers += !prov;
		A.inuse += len;
		if (A.inuse > A.peak)
			A.peak = A.inuse;
	} else {
		A.fallbacks++;
	}
	pthread_mutex_unlock(&A.lock);
	/* The provider's rings start zeroed (no stale valid bits): the pages
	 * may be a freed block's. */
	if (p != NULL && prov)
		memset(p, 0, len);
	if (!iemu_env.debug)
		return p;
	if (prov && p != NULL)
		iemu_dbg("arena: %s(%zu, %zu) from %s+%#lx -> %p", fn, align, size, prov_name,
			 (unsigned long)(pc - prov_lo), p);
	else if (prov)
		iemu_dbg("arena: %s(%zu, %zu) from %s+%#lx not served: falling back to libc", fn, align,
			 size, prov_name, (unsigned long)(pc - prov_lo));
	else if (p != NULL)
		iemu_dbg("arena: %s(%zu, %zu) from the program (%#lx) -> %p", fn, align, size,
			 (unsigned long)pc, p);
	else
		iemu_dbg("arena: %s(%zu, %zu) from the program (%#lx) not served: falling back to libc",
			 fn, align, size, (unsigned long)pc);
	return p;
}

/* find_alloc returns the index of the allocation that starts at a, or
 * A.n when none does (A.lock held). */
static size_t find_alloc(uintptr_t a)
{
	size_t lo = 0, hi = A.n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (A.ext[mid].addr < a)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == A.n || A.ext[lo].addr != a || !A.ext[lo].used)
		return A.n;
	return lo;
}

/* alloc_len returns the length of the arena allocation at p, 0 if p is not
 * the start of one. */
static size_t alloc_len(const void *p)
{
	size_t i, len = 0;

	pthread_mutex_lock(&A.lock);
	i = find_alloc((uintptr_t)p);
	if (i < A.n)
		len = A.ext[i].len;
	pthread_mutex_unlock(&A.lock);
	return len;
}

__attribute__((noinline)) static void arena_free(void *p)
{
	uintptr_t a = (uintptr_t)p;
	size_t i;
	struct ext *e;

	pthread_mutex_lock(&A.lock);
	i = find_alloc(a);
	if (i == A.n) {
		pthread_mutex_unlock(&A.lock);
		iemu_dbg("arena: free(%p) is no arena allocation: ignored", p);
		return;
	}
	e = &A.ext[i];
	e->used = 0;
	A.frees++;
	A.inuse -= e->len;
	/* Give large blocks' pages back, as glibc munmaps its mmapped chunks;
	 * smaller ones keep theirs for the next allocation, as heap chunks
	 * do (a page fault on shared memory after MADV_REMOVE costs more
	 * than the reuse saves: docs/preload.md). */
	if (e->len >= ARENA_KEEP_BELOW &&
	    madvise((void *)e->addr, e->len, e->addr >= A.live ? MADV_REMOVE : MADV_DONTNEED) < 0)
		iemu_dbg("arena: madvise: %s", strerror(errno));
	/* Merge with free neighbours on the same side of the fork line. */
	if (i + 1 < A.n && !A.ext[i + 1].used && (A.ext[i + 1].addr >= A.live) == (a >= A.live) &&
	    e->addr + e->len == A.ext[i + 1].addr) {
		e->len += A.ext[i + 1].len;
		remove_ext(i + 1);
	}
	if (i > 0 && !A.ext[i - 1].used && (A.ext[i - 1].addr >= A.live) == (a >= A.live) &&
	    A.ext[i - 1].addr + A.ext[i - 1].len == a) {
		A.ext[i - 1].len += A.ext[i].len;
		remove_ext(i);
	}
	pthread_mutex_unlock(&A.lock);
}

/* ---------------------------------------------------------------------
 * fork
 */

/* privatize replaces [a, a+len) of the shared mapping by a private copy,
 * read from the memfd (holes read as zeros without allocating) or, for a
 * retired piece whose memfd is gone, from the mapping itself. */
static void privatize(uintptr_t a, size_t len, int from_fd)
{
	void *tmp = (void *)syscall(SYS_mmap, NULL, len, PROT_READ | PROT_WRITE,
				    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0L);
	size_t done = 0;
	long n;

	if (tmp == MAP_FAILED) {
		iemu_dbg("arena: fork: no memory for a private copy: the child shares the arena");
		return;
	}
	if (!from_fd)
		memcpy(tmp, (void *)a, len);
	/* Copy only the memfd's data: its holes (pages never touched, or
	 * given back by free) stay untouched zero pages of the copy, so a
	 * child does not pay memory for the arena's unused part. */
	while (from_fd && done < len) {
		off_t at = (off_t)(a - A.start + done), data, hole;
		data = (off_t)syscall(SYS_lseek, A.memfd, at, SEEK_DATA);
		if (data < 0 || (size_t)(data - at) >= len - done)
			break; /* ENXIO: no data up to the end */
		hole = (off_t)syscall(SYS_lseek, A.memfd, data, SEEK_HOLE);
		if (hole < 0 || (size_t)(hole - at) > len - done)
			hole = at + (off_t)(len - done);
		done += (size_t)(data - at);
		while (at = (off_t)(a - A.start + done), at < hole) {
			n = syscall(SYS_pread64, A.memfd, (char *)tmp + done, (size_t)(hole - at), at);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break;
			done += (size_t)n;
		}
		if (at < hole)
			break; /* a read error: the rest reads as zeros */
	}
	if (syscall(SYS_mremap, tmp, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)a) == -1) {
		iemu_dbg("arena: fork: mremap: %s", strerror(errno));
		syscall(SYS_munmap, tmp, len);
	}
}

/* Pages marked MADV_DONTFORK (ibv_fork_init) are absent in the child; the
 * hole is reserved again so that nothing else lands in the arena's range. */
static void rehole(uintptr_t a, size_t len)
{
	syscall(SYS_mmap, (void *)a, len, PROT_NONE,
		MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0L);
}

static void privatize_range(uintptr_t a, uintptr_t end, int from_fd)
{
	unsigned char vec[PROBE_PAGES];
	uintptr_t run, p;
	int mapped, prev;

	while (a < end) {
		size_t win = end - a > (size_t)PROBE_PAGES * IEMU_PAGE ? (size_t)PROBE_PAGES * IEMU_PAGE
								       : end - a;
		if (syscall(SYS_mincore, (void *)a, win, vec) == 0) {
			privatize(a, win, from_fd);
			a += win;
			continue;
		}
		/* Some pages are not there: go page by page, run by run. */
		run = a;
		prev = -1;
		for (p = a; p <= a + win; p += IEMU_PAGE) {
			mapped = p < a + win && syscall(SYS_mincore, (void *)p, (size_t)IEMU_PAGE, vec) == 0;
			if (p < a + win && mapped == prev)
				continue;
			if (prev == 1)
				privatize(run, p - run, from_fd);
			else if (prev == 0)
				rehole(run, p - run);
			run = p;
			prev = mapped;
		}
		a += win;
	}
}

void iemu_arena_fork_child(void)
{
	int have;

	if (A.lo == 0)
		return;
	have = memfd_ok(); /* may retire a piece whose memfd is gone */
	/* The child gets what fork gives private memory: a copy, which the
	 * parent's device no longer reaches and the child cannot corrupt. */
	privatize_range(A.shared, A.start, 0);
	if (have)
		privatize_range(A.start, A.start + A.fsize, 1);
	if (have)
		syscall(SYS_close, A.memfd);
	A.memfd = -1;
	A.live = A.shared = A.start = A.start + A.fsize;
	A.fsize = 0;
}

void iemu_arena_report(void)
{
	if (A.allocs == 0 && A.fallbacks == 0)
		return;
	iemu_dbg("arena: %lu allocations (%lu of them program buffers; %zu bytes at peak, %zu still "
		 "in use), %lu frees, %lu reallocs out of the arena, %lu pieces (%zu bytes of memfd), "
		 "%lu fallbacks to libc",
		 A.allocs, A.buffers, A.peak, A.inuse, A.frees, A.reallocs, A.pieces, A.fsize,
		 A.fallbacks);
}

/* ---------------------------------------------------------------------
 * Interposed allocation functions
 */

/* wanted decides who gets the arena: a page-aligned allocation (a power
 * of two, at least a page) called from the provider (its rings, any size),
 * or, with IRDMA_EMU_ARENA unset or "all", one of at least
 * IRDMA_EMU_ARENA_MIN bytes from any caller (the program's data buffers).
 * Returns 0 (libc), 1 (the provider) or 2 (a program buffer). */
static inline int wanted(size_t align, size_t size, uintptr_t pc)
{
	if (align < IEMU_PAGE || (align & (align - 1)) != 0 || size == 0)
		return 0;
	iemu_init();
	if (iemu_env.arena == IEMU_ARENA_OFF)
		return 0;
	if (from_provider(pc))
		return 1;
	return iemu_env.arena == IEMU_ARENA_ALL && size >= iemu_env.arena_min ? 2 : 0;
}

IEMU_API void *memalign(size_t align, size_t size)
{
	uintptr_t pc = (uintptr_t)__builtin_return_address(0);
	__typeof__(&memalign) f;
	void *p;
	int w = wanted(align, size, pc);

	if (w && (p = arena_alloc(align, size, pc, w == 1, "memalign")) != NULL)
		return p;
	f = REAL(memalign);
	if (f == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	return f(align, size);
}

IEMU_API int posix_memalign(void **out, size_t align, size_t size)
{
	uintptr_t pc = (uintptr_t)__builtin_return_address(0);
	__typeof__(&posix_memalign) f;
	void *p;
	int w = wanted(align, size, pc);

	if (w && (p = arena_alloc(align, size, pc, w == 1, "posix_memalign")) != NULL) {
		*out = p;
		return 0;
	}
	f = REAL(posix_memalign);
	return f != NULL ? f(out, align, size) : ENOMEM;
}

IEMU_API void *aligned_alloc(size_t align, size_t size)
{
	uintptr_t pc = (uintptr_t)__builtin_return_address(0);
	__typeof__(&aligned_alloc) f;
	void *p;
	int w = wanted(align, size, pc);

	if (w && (p = arena_alloc(align, size, pc, w == 1, "aligned_alloc")) != NULL)
		return p;
	f = REAL(aligned_alloc);
	if (f == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	return f(align, size);
}

/* valloc and pvalloc are page-aligned by definition (older programs
 * allocate DMA buffers with them); pvalloc also rounds the size up to a
 * page. */
IEMU_API void *valloc(size_t size)
{
	uintptr_t pc = (uintptr_t)__builtin_return_address(0);
	__typeof__(&valloc) f;
	void *p;
	int w = wanted(IEMU_PAGE, size, pc);

	if (w && (p = arena_alloc(IEMU_PAGE, size, pc, w == 1, "valloc")) != NULL)
		return p;
	f = REAL(valloc);
	if (f == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	return f(size);
}

IEMU_API void *pvalloc(size_t size)
{
	uintptr_t pc = (uintptr_t)__builtin_return_address(0);
	__typeof__(&pvalloc) f;
	size_t rounded = (size + IEMU_PAGE - 1) & ~(size_t)(IEMU_PAGE - 1);
	void *p;
	int w = rounded >= size ? wanted(IEMU_PAGE, rounded ? rounded : IEMU_PAGE, pc) : 0;

	if (w && (p = arena_alloc(IEMU_PAGE, rounded ? rounded : IEMU_PAGE, pc, w == 1, "pvalloc")) != NULL)
		return p;
	f = REAL(pvalloc);
	if (f == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	return f(size);
}

/* realloc of an arena allocation moves it to libc's heap (realloc keeps
 * no alignment, and a grown block could not stay in place anyway): the
 * bytes are copied and the arena pages freed. A registration of the old
 * range goes on reaching the freed arena pages, as a NIC goes on reaching
 * pinned pages after free(); the program must not realloc a registered
 * buffer in either case. */
__attribute__((noinline)) static void *arena_realloc(void *p, size_t size)
{
	__typeof__(&malloc) m = REAL(malloc);
	size_t len = alloc_len(p);
	void *q;

	if (len == 0) {
		/* Not an allocation's start: libc would abort ("invalid pointer"). */
		iemu_dbg("arena: realloc(%p) is no arena allocation", p);
		abort();
	}
	if (size == 0) { /* glibc: realloc(p, 0) frees p and returns NULL */
		arena_free(p);
		return NULL;
	}
	q = m != NULL ? m(size) : NULL;
	if (q == NULL) {
		errno = ENOMEM;
		return NULL; /* p stays valid */
	}
	memcpy(q, p, size < len ? size : len);
	arena_free(p);
	pthread_mutex_lock(&A.lock);
	A.reallocs++;
	pthread_mutex_unlock(&A.lock);
	return q;
}

IEMU_API void *realloc(void *p, size_t size)
{
	__typeof__(&realloc) f;

	if (UNLIKELY(in_arena(p)))
		return arena_realloc(p, size);
	f = REAL(realloc);
	if (f == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	return f(p, size);
}

IEMU_API void *reallocarray(void *p, size_t n, size_t size)
{
	size_t total;

	if (__builtin_mul_overflow(n, size, &total)) {
		errno = ENOMEM;
		return NULL;
	}
	return realloc(p, total);
}

IEMU_API size_t malloc_usable_size(void *p)
{
	__typeof__(&malloc_usable_size) f;

	if (UNLIKELY(in_arena(p)))
		return alloc_len(p);
	f = REAL(malloc_usable_size);
	return f != NULL ? f(p) : 0;
}

__attribute__((noinline)) static void free_unresolved(void *p)
{
	__typeof__(&free) f;

	if (resolving_free)
		return;
	resolving_free = 1;
	f = (__typeof__(&free))iemu_real_slow(&real_free, "free");
	resolving_free = 0;
	if (f != NULL)
		f(p);
}

IEMU_API void free(void *p)
{
	__typeof__(&free) f;

	if (UNLIKELY(in_arena(p))) {
		arena_free(p);
		return;
	}
	f = (__typeof__(&free))__atomic_load_n(&real_free, __ATOMIC_ACQUIRE);
	if (UNLIKELY(f == NULL)) {
		free_unresolved(p);
		return;
	}
	f(p);
}
