/* Exercises the preload's mechanics against the canned attach server of
 * preload_test.go. Each step prints "ok <name>" or "FAIL <name>: why" and
 * the program exits 1 on the first failure. Test commands (first word of
 * the command header) are answered by the test server:
 *   0x0000  GET_CONTEXT-like: response {fd, 1, 0, fd} at the address in the
 *           command's second qword, the two fds patched by the preload
 *   0x1001  check that the first MMAP page holds the bytes given
 *   0x1002  check that the arena (MEM ranges) holds the bytes given at addr
 *   0x1003  check through /proc/self/mem that the bytes given are at addr
 *   0x1004  report whether addr lies in a MEM range (status 1 or 0 + len)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#define DEV "/dev/infiniband/uverbs0"

void *fake_hw_alloc(size_t size); /* libirdma-fake.so */
void fake_hw_free(void *p);

static int failed;

#define CHECK(name, cond, ...)                                                \
	do {                                                                  \
		if (cond) {                                                   \
			printf("ok %s\n", name);                              \
		} else {                                                      \
			printf("FAIL %s: ", name);                            \
			printf(__VA_ARGS__);                                  \
			printf(" (errno %s)\n", strerror(errno));             \
			fflush(stdout);                                       \
			exit(1);                                              \
		}                                                             \
		fflush(stdout);                                               \
	} while (0)

struct tcmd {
	uint32_t command;
	uint16_t in_words, out_words;
	uint64_t addr;
	uint32_t len, pad;
	unsigned char data[64];
};

static ssize_t tcmd(int fd, uint32_t command, const void *addr, const void *data, uint32_t len)
{
	struct tcmd c;
	memset(&c, 0, sizeof c);
	c.command = command;
	c.in_words = sizeof c / 4;
	c.addr = (uint64_t)(uintptr_t)addr;
	c.len = len;
	if (len > sizeof c.data)
		len = sizeof c.data;
	if (data != NULL)
		memcpy(c.data, data, len);
	return write(fd, &c, sizeof c);
}

static int is_fd(int fd) { return fcntl(fd, F_GETFD) >= 0; }

/* threads: commands from several threads on shared and private
 * descriptors while others allocate provider rings (arena growth sends MEM
 * on every connection) and churn descriptors. */
#define NTHREADS 4
#define ITERS 300
static int shared_fd;

static void *worker(void *arg)
{
	long id = (long)arg;
	int own = open(DEV, O_RDWR | O_CLOEXEC);
	if (own < 0)
		return (void *)1;
	for (int i = 0; i < ITERS; i++) {
		int fd = (i & 1) ? own : shared_fd;
		if (tcmd(fd, 0x0fff, NULL, NULL, 0) >= 0 || errno != ENOSYS)
			return (void *)2;
		if (id == 0 && i % 50 == 0) {
			unsigned char *r = fake_hw_alloc((size_t)(i + 1) * 16384);
			if (r == NULL)
				return (void *)3;
			memcpy(r, "threadring", 10);
			if (tcmd(own, 0x1002, r, "threadring", 10) <= 0 ||
			    tcmd(shared_fd, 0x1002, r, "threadring", 10) <= 0)
				return (void *)4;
			fake_hw_free(r);
		}
		if (id == 1 && i % 10 == 0) {
			int d = dup(shared_fd);
			if (d < 0 || tcmd(d, 0x0fff, NULL, NULL, 0) >= 0 || errno != ENOSYS)
				return (void *)5;
			close(d);
		}
		if (id == 2) {
			int p[2];
			if (pipe(p) != 0 || write(p[1], "x", 1) != 1)
				return (void *)6;
			close(p[0]);
			close(p[1]);
		}
	}
	close(own);
	return NULL;
}

static int threads(void)
{
	pthread_t th[NTHREADS];
	void *ret;
	int bad = 0;

	shared_fd = open(DEV, O_RDWR | O_CLOEXEC);
	CHECK("threads-open", shared_fd >= 0, "open");
	for (long i = 0; i < NTHREADS; i++)
		pthread_create(&th[i], NULL, worker, (void *)i);
	for (int i = 0; i < NTHREADS; i++) {
		pthread_join(th[i], &ret);
		if (ret != NULL) {
			printf("thread %d failed at step %ld\n", i, (long)ret);
			bad = 1;
		}
	}
	CHECK("threads", !bad, "a thread failed");
	close(shared_fd);
	printf("done\n");
	return 0;
}

static int in_arena(int fd, const void *p) { return tcmd(fd, 0x1004, p, NULL, 0) == 1; }

static long rss_anon_kib(void)
{
	char line[256];
	long v = -1;
	FILE *f = fopen("/proc/self/status", "r");

	while (f != NULL && fgets(line, sizeof line, f) != NULL)
		if (sscanf(line, "RssAnon: %ld kB", &v) == 1)
			break;
	if (f != NULL)
		fclose(f);
	return v;
}

/* policy WHICH: who gets the arena under IRDMA_EMU_ARENA /
 * IRDMA_EMU_ARENA_MIN as preload_test.go sets them: "all" (the default:
 * page-aligned program buffers of at least a page), "min" (at least 16 KiB),
 * "rings" and "off" (no program buffer). The provider's allocations get it
 * in every mode but "off". */
static int policy(const char *which)
{
	int all = strcmp(which, "all") == 0, min = strcmp(which, "min") == 0;
	int off = strcmp(which, "off") == 0;
	int fd = open(DEV, O_RDWR | O_CLOEXEC);
	void *p = NULL;

	CHECK("policy-open", fd >= 0, "open");
	unsigned char *ring = fake_hw_alloc(64);
	CHECK("policy-ring", ring != NULL && in_arena(fd, ring) == !off, "provider ring %p", (void *)ring);
	fake_hw_free(ring);

	/* what a program's page-aligned buffer gets, by size and function */
	struct {
		const char *name;
		size_t size;
		int want;
	} cases[] = {
		{ "memalign-64", 64, 0 },  /* below a page: never */
		{ "memalign-4k", 4096, all },
		{ "memalign-8k", 8192, all },
		{ "memalign-16k", 16384, all || min },
		{ "memalign-128k", 131072, all || min }, /* perftest -s 65536 */
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		unsigned char *b = memalign(4096, cases[i].size);
		CHECK(cases[i].name, b != NULL && ((uintptr_t)b & 4095) == 0 && in_arena(fd, b) == cases[i].want,
		      "%p in the arena: %d, want %d", (void *)b, in_arena(fd, b), cases[i].want);
		memset(b, 0x5a, cases[i].size);
		free(b);
	}
	CHECK("posix-memalign", posix_memalign(&p, 8192, 65536) == 0 && ((uintptr_t)p & 8191) == 0 &&
					in_arena(fd, p) == (all || min),
	      "%p", p);
	free(p);
	p = aligned_alloc(4096, 65536);
	CHECK("aligned-alloc", p != NULL && in_arena(fd, p) == (all || min), "%p", p);
	free(p);
	p = valloc(65536);
	CHECK("valloc", p != NULL && ((uintptr_t)p & 4095) == 0 && in_arena(fd, p) == (all || min), "%p", p);
	free(p);
	p = malloc(1 << 20); /* no alignment asked: libc */
	CHECK("malloc-not-arena", p != NULL && !in_arena(fd, p), "%p", p);
	free(p);
	p = memalign(2048, 1 << 20); /* below a page of alignment: libc */
	CHECK("memalign-2k-align", p != NULL && !in_arena(fd, p), "%p", p);
	free(p);
	if (!(all || min)) {
		close(fd);
		printf("done\n");
		return 0;
	}

	/* a buffer in the arena: the daemon sees the program's stores; free
	 * gives a large block's pages back (zeros when reused), keeps a small
	 * one's (as the heap does) */
	unsigned char *large = memalign(4096, 256 << 10);
	memcpy(large + (256 << 10) - 8, "largebf", 8);
	CHECK("large-shared", tcmd(fd, 0x1002, large + (256 << 10) - 8, "largebf", 8) > 0, "daemon cannot see it");
	uintptr_t largea = (uintptr_t)large; /* compared after the free */
	free(large);
	large = memalign(4096, 256 << 10);
	CHECK("large-reuse-zero", (uintptr_t)large == largea && large[(256 << 10) - 8] == 0, "%p vs %#lx",
	      (void *)large, (unsigned long)largea);
	unsigned char *buf = memalign(4096, 65536);
	memcpy(buf + 65536 - 8, "progbuf", 8);
	CHECK("buffer-shared", tcmd(fd, 0x1002, buf + 65536 - 8, "progbuf", 8) > 0, "daemon cannot see it");
	CHECK("usable-size", malloc_usable_size(buf) == 65536, "%zu", malloc_usable_size(buf));
	uintptr_t bufa = (uintptr_t)buf; /* compared after the free */
	free(buf);
	unsigned char *again = memalign(4096, 65536);
	CHECK("buffer-reuse-kept", (uintptr_t)again == bufa && memcmp(again + 65536 - 8, "progbuf", 8) == 0,
	      "%p vs %#lx", (void *)again, (unsigned long)bufa);
	/* a provider ring on a freed program block starts zeroed */
	free(again);
	unsigned char *ring2 = fake_hw_alloc(65536);
	CHECK("ring-on-freed-zero", (uintptr_t)ring2 == bufa && ring2[65536 - 8] == 0, "%p", (void *)ring2);
	fake_hw_free(ring2);
	free(large);
	again = memalign(4096, 65536);
	bufa = (uintptr_t)again; /* first fit: where large was */

	/* realloc leaves the arena (into libc's heap) with the bytes */
	memcpy(again, "realloc-me", 10);
	unsigned char *moved = realloc(again, 100000);
	CHECK("realloc-grow", moved != NULL && memcmp(moved, "realloc-me", 10) == 0 && !in_arena(fd, moved),
	      "%p", (void *)moved);
	free(moved);
	again = memalign(4096, 65536);
	CHECK("realloc-freed", (uintptr_t)again == bufa, "the arena block was not freed by realloc: %p", (void *)again);
	memcpy(again, "shrink", 6);
	moved = reallocarray(again, 2, 8);
	CHECK("reallocarray-shrink", moved != NULL && memcmp(moved, "shrink", 6) == 0 && !in_arena(fd, moved),
	      "%p", (void *)moved);
	free(moved);
	again = memalign(4096, 65536);
	CHECK("realloc-zero", (uintptr_t)again == bufa && realloc(again, 0) == NULL, "realloc(p, 0)");
	again = memalign(4096, 65536);
	CHECK("realloc-zero-freed", (uintptr_t)again == bufa, "%p", (void *)again);
	free(again);

	/* fork: the child gets a private copy of a program buffer (its write
	 * reaches neither the parent nor the daemon), and the arena's untouched
	 * pages cost the child no memory (holes stay holes) */
	unsigned char *pb = memalign(4096, 1 << 20);
	unsigned char *hole = memalign(4096, 64u << 20); /* never touched */
	CHECK("fork-buffers", pb != NULL && hole != NULL && in_arena(fd, pb) && in_arena(fd, hole), "alloc");
	memcpy(pb, "parent-buf", 10);
	long before = rss_anon_kib();
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		long after = rss_anon_kib();
		if (memcmp(pb, "parent-buf", 10) != 0)
			_exit(20);
		if (before < 0 || after < 0 || after - before > 16 * 1024)
			_exit(21);
		memcpy(pb, "child-buf!", 10);
		free(hole); /* the child's own copy */
		_exit(0);
	}
	int status = 0;
	CHECK("fork-child", pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
				    WEXITSTATUS(status) == 0,
	      "child status %#x", status);
	CHECK("fork-private", memcmp(pb, "parent-buf", 10) == 0 && tcmd(fd, 0x1002, pb, "parent-buf", 10) > 0,
	      "the child's write reached the parent's buffer");
	free(pb);
	free(hole);
	close(fd);
	printf("done\n");
	return 0;
}

int main(int argc, char **argv)
{
	struct stat st, st2;
	uint32_t resp[4];
	ssize_t n;
	int fd, fd2, fd3, r;
	const char *mode = argc > 1 ? argv[1] : "all";

	(void)failed;
	if (strcmp(mode, "threads") == 0)
		return threads();
	if (strcmp(mode, "policy") == 0 && argc > 2)
		return policy(argv[2]);
	if (strcmp(mode, "nodump") == 0) {
		CHECK("nodump", prctl(PR_SET_DUMPABLE, 0) == 0, "prctl");
		fd = open(DEV, O_RDWR | O_CLOEXEC);
		CHECK("open-nodump", fd >= 0, "fd %d", fd);
		CHECK("cmd-nodump", tcmd(fd, 0x0fff, NULL, NULL, 0) < 0 && errno == ENOSYS, "command");
		close(fd);
		printf("done\n");
		return 0;
	}
	if (strcmp(mode, "unreachable") == 0) {
		fd = open(DEV, O_RDWR | O_CLOEXEC);
		CHECK("open-unreachable", fd < 0 && errno == ENXIO, "fd %d", fd);
		return 0;
	}

	/* stat family on the fake node */
	CHECK("stat", stat(DEV, &st) == 0 && S_ISCHR(st.st_mode) && major(st.st_rdev) == 231 &&
			      minor(st.st_rdev) == 192,
	      "mode %o rdev %u:%u", st.st_mode, major(st.st_rdev), minor(st.st_rdev));
	CHECK("lstat", lstat(DEV, &st2) == 0 && st2.st_rdev == st.st_rdev, "lstat");
	CHECK("fstatat", fstatat(AT_FDCWD, DEV, &st2, 0) == 0 && st2.st_rdev == st.st_rdev, "fstatat");
	{
		struct statx sx;
		CHECK("statx", statx(AT_FDCWD, DEV, 0, STATX_BASIC_STATS, &sx) == 0 &&
				       S_ISCHR(sx.stx_mode) && sx.stx_rdev_major == 231 &&
				       sx.stx_rdev_minor == 192,
		      "statx");
	}
	CHECK("stat-other-index", stat("/dev/infiniband/uverbs7", &st2) < 0 && errno == ENOENT,
	      "uverbs7 exists?");

	/* arena allocation before the device is open: announced at HELLO */
	unsigned char *early = fake_hw_alloc(8192);
	CHECK("arena-early-alloc", early != NULL && ((uintptr_t)early & 4095) == 0, "%p", (void *)early);
	memcpy(early, "early-ring", 10);

	fd = open(DEV, O_RDWR | O_CLOEXEC);
	CHECK("open", fd >= 0, "fd %d", fd);
	printf("fd %d\n", fd);
	CHECK("fstat", fstat(fd, &st2) == 0 && S_ISCHR(st2.st_mode) && st2.st_rdev == st.st_rdev &&
			       st2.st_ino == st.st_ino,
	      "mode %o", st2.st_mode);
	CHECK("fcntl-cloexec", (fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0, "no FD_CLOEXEC");
	{
		char buf[64];
		CHECK("ioctl-enotty", ioctl(fd, 0xc0181b01UL, buf) < 0 && errno == ENOTTY, "ioctl");
		CHECK("read-einval", read(fd, buf, sizeof buf) < 0 && errno == EINVAL, "read");
	}

	/* a command whose reply passes two descriptors */
	memset(resp, 0xee, sizeof resp);
	n = tcmd(fd, 0, resp, NULL, 0);
	CHECK("cmd-status", n == (ssize_t)sizeof(struct tcmd), "write returned %zd", n);
	CHECK("cmd-fd-patched", is_fd((int)resp[0]) && is_fd((int)resp[3]) && resp[0] != resp[3] &&
				       resp[1] == 1 && resp[2] == 0,
	      "resp %x %x %x %x", resp[0], resp[1], resp[2], resp[3]);
	CHECK("cmd-fd-cloexec", (fcntl((int)resp[0], F_GETFD) & FD_CLOEXEC) != 0, "no FD_CLOEXEC");
	CHECK("cmd-fd-works", write((int)resp[0], "via-fd", 6) == 6, "write to passed fd");
	close((int)resp[0]);
	close((int)resp[3]);
	CHECK("cmd-enosys", tcmd(fd, 0x0fff, NULL, NULL, 0) < 0 && errno == ENOSYS, "unknown command");

	/* mmap: a shared page the server sees */
	{
		volatile uint32_t *db = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0x10000);
		CHECK("mmap", db != MAP_FAILED, "mmap");
		db[0] = 17;
		db[16] = 0x11223344;
		uint32_t want[17] = { 17 };
		want[16] = 0x11223344;
		CHECK("mmap-shared", tcmd(fd, 0x1001, NULL, want, sizeof want) > 0, "server does not see the page");
		CHECK("munmap", munmap((void *)db, 4096) == 0, "munmap");
	}

	/* the arena: provider allocations are shared, the program's are not */
	CHECK("arena-early-seen", tcmd(fd, 0x1002, early, "early-ring", 10) > 0, "server cannot read %p",
	      (void *)early);
	unsigned char *ring = fake_hw_alloc(3 * 4096 + 100);
	CHECK("arena-alloc", ring != NULL && ((uintptr_t)ring & 4095) == 0, "%p", (void *)ring);
	memcpy(ring + 3 * 4096 + 90, "ring-tail!", 10);
	CHECK("arena-shared", tcmd(fd, 0x1002, ring + 3 * 4096 + 90, "ring-tail!", 10) > 0,
	      "server cannot read the ring");
	unsigned char *big = fake_hw_alloc(3u << 20); /* grows the arena */
	CHECK("arena-grow", big != NULL, "big");
	memcpy(big + (3u << 20) - 8, "bigtail", 8);
	CHECK("arena-grow-shared", tcmd(fd, 0x1002, big + (3u << 20) - 8, "bigtail", 8) > 0, "big tail");
	/* below a page of alignment: the program's, in libc (mode policy
	 * tests the program's page-aligned buffers) */
	void *own = memalign(64, 8192);
	CHECK("own-memalign", own != NULL, "memalign");
	CHECK("own-not-arena", tcmd(fd, 0x1004, own, NULL, 0) == 0, "program memalign(64) went to the arena");
	void *own2 = NULL;
	CHECK("own-posix-memalign", posix_memalign(&own2, 2048, 4096) == 0 && tcmd(fd, 0x1004, own2, NULL, 0) == 0,
	      "posix_memalign");
	memcpy(own, "procmem!", 8);
	CHECK("procmem", tcmd(fd, 0x1003, own, "procmem!", 8) > 0, "server cannot read via /proc/self/mem");
	free(own);
	free(own2);
	fake_hw_free(ring);
	unsigned char *again = fake_hw_alloc(4096);
	CHECK("arena-reuse", again == ring && again[0] == 0, "%p vs %p", (void *)again, (void *)ring);
	fake_hw_free(again);
	fake_hw_free(big);
	fake_hw_free(early);

	/* dup family */
	fd2 = dup(fd);
	CHECK("dup", fd2 >= 0 && tcmd(fd2, 0x0fff, NULL, NULL, 0) < 0 && errno == ENOSYS, "dup");
	fd3 = fcntl(fd, F_DUPFD_CLOEXEC, 100);
	CHECK("fcntl-dupfd", fd3 >= 100 && tcmd(fd3, 0x0fff, NULL, NULL, 0) < 0 && errno == ENOSYS, "dupfd");
	CHECK("dup-fstat", fstat(fd3, &st2) == 0 && S_ISCHR(st2.st_mode), "fstat on dup");
	r = dup2(fd, 200);
	CHECK("dup2", r == 200 && ioctl(200, 0, NULL) < 0 && errno == ENOTTY, "dup2");
	/* dup2 of a regular file over one of ours: no longer ours */
	{
		int nul = open("/dev/null", O_WRONLY);
		CHECK("dup2-over", dup2(nul, 200) == 200 && write(200, "x", 1) == 1 && fstat(200, &st2) == 0 &&
					   S_ISCHR(st2.st_mode) && st2.st_rdev != st.st_rdev,
		      "dup2 over ours");
		close(nul);
		close(200);
	}
	close(fd3);
	close(fd);
	CHECK("dup-survives-close", tcmd(fd2, 0x0fff, NULL, NULL, 0) < 0 && errno == ENOSYS, "after close");
	fd = fd2;

	/* fork: the child may not use the parent's connection, may open anew;
	 * it gets a private copy of the arena, without MADV_DONTFORK pages */
	unsigned char *pr = fake_hw_alloc(4096);
	unsigned char *df = fake_hw_alloc(4096);
	CHECK("dontfork", pr != NULL && df != NULL && madvise(df, 4096, MADV_DONTFORK) == 0, "madvise");
	memcpy(pr, "parent", 6);
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		if (memcmp(pr, "parent", 6) != 0)
			_exit(16);
		memcpy(pr, "child!", 6);
		pid_t g = fork();
		if (g == 0) {
			df[0] = 1; /* must fault: the page did not follow the fork */
			_exit(0);
		}
		int gs = 0;
		if (g < 0 || waitpid(g, &gs, 0) != g || !WIFSIGNALED(gs) || WTERMSIG(gs) != SIGSEGV)
			_exit(17);
		if (tcmd(fd, 0x0fff, NULL, NULL, 0) >= 0 || errno != EIO)
			_exit(10);
		void *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0x10000);
		if (m != MAP_FAILED || errno != EIO)
			_exit(11);
		if (ioctl(fd, 0, NULL) >= 0 || errno != ENOTTY)
			_exit(12);
		int cfd = open(DEV, O_RDWR | O_CLOEXEC);
		if (cfd < 0)
			_exit(13);
		if (tcmd(cfd, 0x0fff, NULL, NULL, 0) >= 0 || errno != ENOSYS)
			_exit(14);
		unsigned char *cr = fake_hw_alloc(4096);
		memcpy(cr, "child-ring", 10);
		if (tcmd(cfd, 0x1002, cr, "child-ring", 10) <= 0)
			_exit(15);
		close(cfd);
		close(fd);
		_exit(0);
	}
	int status = 0;
	CHECK("fork", pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
			      WEXITSTATUS(status) == 0,
	      "child status %#x", status);
	CHECK("parent-after-fork", tcmd(fd, 0x0fff, NULL, NULL, 0) < 0 && errno == ENOSYS, "parent");
	CHECK("arena-private-in-child", memcmp(pr, "parent", 6) == 0 && tcmd(fd, 0x1002, pr, "parent", 6) > 0,
	      "the child's write reached the parent's arena");
	madvise(df, 4096, MADV_DOFORK);
	fake_hw_free(pr);
	fake_hw_free(df);

	/* close_range closes ours behind the close() hook; a reused number is
	 * then an ordinary descriptor */
	CHECK("close_range", close_range((unsigned)fd, (unsigned)fd, 0) == 0, "close_range");
	{
		int p[2];
		char c;
		CHECK("pipe", pipe(p) == 0, "pipe");
		if (p[1] != fd) {
			CHECK("dup2-reuse", dup2(p[1], fd) == fd, "dup2");
			close(p[1]);
		}
		CHECK("reused-write", write(fd, "z", 1) == 1 && read(p[0], &c, 1) == 1 && c == 'z',
		      "write to the reused number went astray");
		CHECK("reused-fstat", fstat(fd, &st2) == 0 && S_ISFIFO(st2.st_mode), "fstat of reused");
		close(fd);
		close(p[0]);
	}

	/* a raw close(2) behind every hook, then the number reused */
	fd = open(DEV, O_RDWR | O_CLOEXEC);
	CHECK("reopen", fd >= 0, "open");
	CHECK("raw-close", syscall(SYS_close, fd) == 0, "raw close");
	{
		int p[2], avail = -1;
		char c = 0;
		/* pipe() takes the lowest free numbers: the read end gets fd */
		CHECK("raw-pipe", pipe(p) == 0 && p[0] == fd, "pipe %d %d, fd %d", p[0], p[1], fd);
		CHECK("raw-reused-write", write(p[1], "q", 1) == 1, "write");
		CHECK("raw-reused-ioctl", ioctl(p[0], FIONREAD, &avail) == 0 && avail == 1, "FIONREAD %d", avail);
		CHECK("raw-reused-read", read(p[0], &c, 1) == 1 && c == 'q', "read %c", c);
		CHECK("raw-reused-fstat", fstat(p[0], &st2) == 0 && S_ISFIFO(st2.st_mode), "fstat");
		close(p[0]);
		close(p[1]);
	}
	printf("done\n");
	return 0;
}
