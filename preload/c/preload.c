/* libirdma-emu-preload: the fake uverbs character device.
 *
 * /dev/infiniband/uverbsN (for each N the fake sysfs tree under SYSFS_PATH
 * describes) is faked for stat and friends; open() connects to the daemon's
 * attach socket (IRDMA_EMU_SOCKET), says HELLO with /proc/self/mem, and
 * returns the connection's socket as the device descriptor. write() on it
 * forwards the uverbs command and copies the response back, mmap() maps the
 * memfd the daemon returns, ioctl() answers ENOTTY (libibverbs then uses the
 * write() ABI), read() answers EINVAL. Every other descriptor and path goes
 * straight to libc: the fast path is one bounds check and one load.
 *
 * Descriptors are recognised by number (a table indexed by fd) and then by
 * identity (st_dev/st_ino of the socket, recorded at open), so numbers
 * closed behind our back (close_range, closefrom, raw syscalls) and reused
 * are never mistaken for ours.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "iemu.h"

struct iemu_env iemu_env;
pid_t iemu_pid;

/* ---------------------------------------------------------------------
 * Real functions
 */

void *iemu_real_slow(void **slot, const char *name)
{
	void *f = dlsym(RTLD_NEXT, name);
	__atomic_store_n(slot, f, __ATOMIC_RELEASE);
	return f;
}

static void *real_open, *real_open64, *real_openat, *real_openat64;
static void *real___open_2, *real___open64_2, *real___openat_2, *real___openat64_2;
static void *real_write, *real_read, *real_ioctl, *real_close, *real_mmap, *real_mmap64;
static void *real_dup, *real_dup2, *real_dup3, *real_fcntl;

#define CALL_REAL(fn, ...)                                                    \
	({                                                                    \
		__typeof__(&fn) f_ = REAL(fn);                                \
		f_ ? f_(__VA_ARGS__) : (errno = ENOSYS, -1);                  \
	})

/* Internal helpers use raw system calls so that they never re-enter the
 * interposers (and never go through another preload's). */
static int sys_close(int fd) { return (int)syscall(SYS_close, fd); }
static int sys_fstat(int fd, struct stat *st) { return (int)syscall(SYS_fstat, fd, st); }

/* ---------------------------------------------------------------------
 * Environment and debugging
 */

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void copy_env(char *dst, size_t n, const char *name)
{
	const char *v = getenv(name);
	dst[0] = 0;
	if (v == NULL || v[0] == 0)
		return;
	if (strlen(v) >= n) {
		iemu_dbg("%s is too long (%zu bytes, at most %zu): ignored", name, strlen(v), n - 1);
		return;
	}
	memcpy(dst, v, strlen(v) + 1);
}

static void do_init(void)
{
	const char *d = getenv("IRDMA_EMU_DEBUG");
	iemu_pid = (pid_t)syscall(SYS_getpid);
	iemu_env.debug = d != NULL && d[0] != 0 && strcmp(d, "0") != 0;
	copy_env(iemu_env.sock, sizeof iemu_env.sock, "IRDMA_EMU_SOCKET");
	copy_env(iemu_env.sysfs, sizeof iemu_env.sysfs, "SYSFS_PATH");
	iemu_env.active = iemu_env.sock[0] != 0 && iemu_env.sysfs[0] != 0;
	d = getenv("IRDMA_EMU_ARENA");
	iemu_env.arena = IEMU_ARENA_ALL;
	if (!iemu_env.active || (d != NULL && strcmp(d, "0") == 0))
		iemu_env.arena = IEMU_ARENA_OFF;
	else if (d != NULL && strcmp(d, "rings") == 0)
		iemu_env.arena = IEMU_ARENA_RINGS;
	else if (d != NULL && d[0] != 0 && strcmp(d, "1") != 0 && strcmp(d, "all") != 0)
		iemu_dbg("IRDMA_EMU_ARENA=%s: not 0, rings, 1 or all; taken as all", d);
	iemu_env.arena_min = IEMU_ARENA_MIN_DEFAULT;
	d = getenv("IRDMA_EMU_ARENA_MIN");
	if (d != NULL && d[0] != 0) {
		char *end;
		unsigned long long v;
		errno = 0;
		v = strtoull(d, &end, 0);
		if (errno == 0 && end != d && *end == 0 && v > 0)
			iemu_env.arena_min = v < IEMU_PAGE ? IEMU_PAGE : (size_t)v;
		else
			iemu_dbg("IRDMA_EMU_ARENA_MIN=%s: not a positive byte count; %u taken", d,
				 IEMU_ARENA_MIN_DEFAULT);
	}
	d = getenv("IRDMA_EMU_NOTIFY");
	iemu_env.notify = iemu_env.active && !(d != NULL && strcmp(d, "0") == 0);
	if (iemu_env.debug)
		iemu_dbg("active=%d socket=%s sysfs=%s arena=%s (program buffers from %zu bytes) notify=%d",
			 iemu_env.active, iemu_env.sock, iemu_env.sysfs,
			 iemu_env.arena == IEMU_ARENA_ALL ? "all" : iemu_env.arena == IEMU_ARENA_RINGS ? "rings" : "off",
			 iemu_env.arena_min, iemu_env.notify);
}

void iemu_init(void)
{
	pthread_once(&init_once, do_init);
}

void iemu_dbg(const char *fmt, ...)
{
	char buf[768];
	va_list ap;
	int n, m;

	if (!iemu_env.debug)
		return;
	n = snprintf(buf, sizeof buf, "irdma-emu-preload[%d]: ", (int)iemu_pid);
	if (n < 0)
		return;
	va_start(ap, fmt);
	m = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (m < 0)
		return;
	n += m;
	if ((size_t)n > sizeof buf - 2)
		n = sizeof buf - 2;
	buf[n++] = '\n';
	if (syscall(SYS_write, 2, buf, (size_t)n) < 0)
		return;
}

/* ---------------------------------------------------------------------
 * The fake character devices
 */

/* read_dev reads a sysfs "MAJ:MIN" file of the tree into *rdev. */
static int read_dev(const char *file, dev_t *rdev)
{
	char buf[32];
	unsigned maj, min;
	long n;
	int fd;

	fd = (int)syscall(SYS_openat, AT_FDCWD, file, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	do
		n = syscall(SYS_read, fd, buf, sizeof buf - 1);
	while (n < 0 && errno == EINTR);
	sys_close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	if (sscanf(buf, "%u:%u", &maj, &min) != 2)
		return -1;
	*rdev = makedev(maj, min);
	return 0;
}

/* fake_cm: "/dev/infiniband/rdma_cm" when the tree has
 * class/misc/rdma_cm/dev. Its device number is the host's own rdma_cm's
 * when the host has one (librdmacm compares st_rdev with what the
 * kernel's netlink says, check_abi_version_nl), else the tree's. */
static int fake_cm(dev_t *rdev)
{
	char file[640];
	struct stat st;

	if (snprintf(file, sizeof file, "%s/class/misc/rdma_cm/dev", iemu_env.sysfs) >= (int)sizeof file)
		return -1;
	if (read_dev(file, rdev) < 0)
		return -1;
	if (syscall(SYS_newfstatat, AT_FDCWD, "/dev/infiniband/rdma_cm", &st, 0) == 0 && S_ISCHR(st.st_mode))
		*rdev = st.st_rdev;
	return IEMU_CM_IDX;
}

/* fake_index returns N for "/dev/infiniband/uverbsN" when the sysfs tree
 * has class/infiniband_verbs/uverbsN/dev, and its device number;
 * IEMU_CM_IDX for "/dev/infiniband/rdma_cm" (fake_cm); else -1. */
static int fake_index(const char *path, dev_t *rdev)
{
	static const char prefix[] = "/dev/infiniband/uverbs";
	static const char cmpath[] = "/dev/infiniband/rdma_cm";
	char file[640];
	int idx = 0, i;

	if (path == NULL || path[0] != '/' || strncmp(path, "/dev/infiniband/", 16) != 0)
		return -1;
	iemu_init();
	if (!iemu_env.active)
		return -1;
	if (strcmp(path, cmpath) == 0)
		return fake_cm(rdev);
	if (strncmp(path, prefix, sizeof prefix - 1) != 0)
		return -1;
	path += sizeof prefix - 1;
	for (i = 0; path[i] >= '0' && path[i] <= '9'; i++) {
		if (i == 4)
			return -1;
		idx = idx * 10 + (path[i] - '0');
	}
	if (i == 0 || path[i] != 0)
		return -1;
	if (snprintf(file, sizeof file, "%s/class/infiniband_verbs/uverbs%d/dev",
		     iemu_env.sysfs, idx) >= (int)sizeof file)
		return -1;
	if (read_dev(file, rdev) < 0)
		return -1;
	return idx;
}

/* The identity of a fake device, the same for stat(path) and fstat(fd).
 * IEMU_CM_IDX stands for rdma_cm (uverbs indexes are below 10000). */
#define FAKE_DEV makedev(0, 6) /* devtmpfs-like */
#define FAKE_INO(idx) ((ino_t)0x75766500u + (ino_t)(idx))

#define FILL_STAT(st, idx, rdev)                                              \
	do {                                                                  \
		memset((st), 0, sizeof *(st));                                \
		(st)->st_dev = FAKE_DEV;                                      \
		(st)->st_ino = FAKE_INO(idx);                                 \
		(st)->st_mode = S_IFCHR | 0666;                               \
		(st)->st_nlink = 1;                                           \
		(st)->st_rdev = (rdev);                                       \
		(st)->st_blksize = 4096;                                      \
	} while (0)

/* ---------------------------------------------------------------------
 * Connections and the descriptor table
 */

#define FDTAB_SIZE 65536
#define CONN_MAX_FDS 16

struct conn {
	pthread_mutex_t lock; /* one request at a time on the socket */
	pid_t owner;          /* the process that opened it */
	dev_t sdev;           /* identity of the socket */
	ino_t sino;
	int idx;           /* N of uverbsN */
	dev_t rdev;        /* its device number */
	uint32_t features; /* HELLO reply's features (IEMU_FEATURE_*) */
	/* An rdma_cm channel: the program's descriptor (the one in the
	 * table) is the readiness pipe the daemon signals; requests go over
	 * sock, which the program never sees. -1 for uverbs, whose
	 * descriptor is the socket itself. */
	int sock;
	dev_t kdev; /* identity of sock: a range close may have taken its */
	ino_t kino; /* number, which must then not be closed again */
	uint32_t token; /* the daemon's name of the channel (MIGRATE_ID) */
	/* Under tab_lock: */
	unsigned refs; /* table entries + borrowers */
	int fds[CONN_MAX_FDS];
	int nfds;
	struct conn *next;
	/* Under lock: */
	uint32_t seq;
	int dead; /* errno once the connection is unusable */
	unsigned char *buf; /* receive buffer, IEMU_MAX_MSG bytes */
};

static struct conn *fdtab[FDTAB_SIZE];
static struct conn *conns; /* every live connection, under tab_lock */
static pthread_mutex_t tab_lock = PTHREAD_MUTEX_INITIALIZER;

static inline int maybe_ours(int fd)
{
	return (unsigned)fd < FDTAB_SIZE && __atomic_load_n(&fdtab[fd], __ATOMIC_ACQUIRE) != NULL;
}

static int same_file(int fd, const struct conn *c)
{
	struct stat st;
	return sys_fstat(fd, &st) == 0 && st.st_dev == c->sdev && st.st_ino == c->sino;
}

static void conn_free(struct conn *c)
{
	struct conn **pp;
	for (pp = &conns; *pp != NULL; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	/* A child of fork never touches its parent's locks. */
	if (c->owner == iemu_pid)
		pthread_mutex_destroy(&c->lock);
	if (c->sock >= 0) {
		/* The last descriptor of an rdma_cm channel went: close its
		 * connection, unless a close_range/closefrom took the number
		 * and it now names something else. */
		struct stat st;
		if (sys_fstat(c->sock, &st) == 0 && st.st_dev == c->kdev && st.st_ino == c->kino)
			sys_close(c->sock);
	}
	free(c->buf);
	free(c);
}

/* drop_entry forgets table entry fd; tab_lock held. */
static void drop_entry(int fd)
{
	struct conn *c = fdtab[fd];
	int i;

	if (c == NULL)
		return;
	__atomic_store_n(&fdtab[fd], NULL, __ATOMIC_RELEASE);
	for (i = 0; i < c->nfds; i++)
		if (c->fds[i] == fd) {
			c->fds[i] = c->fds[--c->nfds];
			break;
		}
	if (--c->refs == 0)
		conn_free(c);
}

/* add_entry makes fd (a new descriptor of c's socket) ours; tab_lock held.
 * Any stale entry at fd is dropped first. */
static int add_entry(int fd, struct conn *c)
{
	if ((unsigned)fd >= FDTAB_SIZE || c->nfds == CONN_MAX_FDS)
		return -1;
	drop_entry(fd);
	c->fds[c->nfds++] = fd;
	c->refs++;
	__atomic_store_n(&fdtab[fd], c, __ATOMIC_RELEASE);
	return 0;
}

/* conn_get returns the connection behind fd with a reference, or NULL when
 * fd is not ours (a stale entry is dropped on the way). */
static struct conn *conn_get(int fd)
{
	struct conn *c;

	if (!maybe_ours(fd))
		return NULL;
	pthread_mutex_lock(&tab_lock);
	c = fdtab[fd];
	if (c != NULL && !same_file(fd, c)) {
		iemu_dbg("fd %d was closed behind our back; forgetting it", fd);
		drop_entry(fd);
		c = NULL;
	}
	if (c != NULL)
		c->refs++;
	pthread_mutex_unlock(&tab_lock);
	return c;
}

static void conn_put(struct conn *c)
{
	pthread_mutex_lock(&tab_lock);
	if (--c->refs == 0)
		conn_free(c);
	pthread_mutex_unlock(&tab_lock);
}

/* ---------------------------------------------------------------------
 * Messages
 */

static void put32(unsigned char *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }
static uint32_t get32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t get64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }

static void close_fds(const int *fds, int n)
{
	for (int i = 0; i < n; i++)
		sys_close(fds[i]);
}

/* wait_io waits for the socket when the program made it non-blocking. */
static int wait_io(int fd, short ev)
{
	struct pollfd p = { .fd = fd, .events = ev };
	int r;
	do
		r = poll(&p, 1, -1);
	while (r < 0 && errno == EINTR);
	return r < 0 ? -errno : 0;
}

/* transact sends one request (with at most one descriptor) and reads its
 * reply into c->buf; c->lock held. The reply's payload is c->buf+IEMU_HDR,
 * *plen bytes; received descriptors (close-on-exec) go to rfds. Returns 0,
 * or a negative errno after which the connection is unusable. */
static int transact(struct conn *c, int fd, unsigned type, const void *payload, size_t len,
		    int sendfd, size_t *plen, int *rfds, int *nrfds)
{
	unsigned char hdr[IEMU_HDR];
	struct iovec iov[2];
	struct msghdr mh;
	union {
		char buf[CMSG_SPACE(sizeof(int) * (IEMU_MAX_FDS + 8))];
		struct cmsghdr align;
	} cm;
	struct cmsghdr *ch;
	uint32_t seq = ++c->seq;
	ssize_t n;
	int r;

	*nrfds = 0;
	put32(hdr, IEMU_MAGIC);
	put32(hdr + 4, type); /* type, flags 0 */
	put32(hdr + 8, seq);
	put32(hdr + 12, (uint32_t)len);
	iov[0].iov_base = hdr;
	iov[0].iov_len = sizeof hdr;
	iov[1].iov_base = (void *)payload;
	iov[1].iov_len = len;
	memset(&mh, 0, sizeof mh);
	mh.msg_iov = iov;
	mh.msg_iovlen = len ? 2 : 1;
	if (sendfd >= 0) {
		memset(&cm, 0, sizeof cm);
		mh.msg_control = cm.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int));
		ch = CMSG_FIRSTHDR(&mh);
		ch->cmsg_level = SOL_SOCKET;
		ch->cmsg_type = SCM_RIGHTS;
		ch->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(ch), &sendfd, sizeof(int));
	}
	for (;;) {
		n = sendmsg(fd, &mh, MSG_NOSIGNAL);
		if (n >= 0)
			break;
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN && (r = wait_io(fd, POLLOUT)) == 0)
			continue;
		return -errno;
	}
	if ((size_t)n != sizeof hdr + len)
		return -EIO;

	iov[0].iov_base = c->buf;
	iov[0].iov_len = IEMU_MAX_MSG;
	memset(&mh, 0, sizeof mh);
	mh.msg_iov = iov;
	mh.msg_iovlen = 1;
	mh.msg_control = cm.buf;
	mh.msg_controllen = sizeof cm.buf;
	for (;;) {
		n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
		if (n >= 0)
			break;
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN && (r = wait_io(fd, POLLIN)) == 0)
			continue;
		return -errno;
	}
	for (ch = CMSG_FIRSTHDR(&mh); ch != NULL; ch = CMSG_NXTHDR(&mh, ch)) {
		size_t k, cnt;
		if (ch->cmsg_level != SOL_SOCKET || ch->cmsg_type != SCM_RIGHTS)
			continue;
		cnt = (ch->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (k = 0; k < cnt; k++) {
			int f;
			memcpy(&f, CMSG_DATA(ch) + k * sizeof(int), sizeof(int));
			if (*nrfds < IEMU_MAX_FDS)
				rfds[(*nrfds)++] = f;
			else
				sys_close(f);
		}
	}
	if (n == 0) {
		close_fds(rfds, *nrfds);
		*nrfds = 0;
		return -ECONNRESET; /* the daemon closed the connection */
	}
	if ((mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || (size_t)n < IEMU_HDR ||
	    get32(c->buf) != IEMU_MAGIC || get32(c->buf + 4) != type || get32(c->buf + 8) != seq ||
	    get32(c->buf + 12) != (uint32_t)n - IEMU_HDR) {
		close_fds(rfds, *nrfds);
		*nrfds = 0;
		return -EPROTO;
	}
	*plen = (size_t)n - IEMU_HDR;
	return 0;
}

/* begin locks c for a request; it fails for a connection inherited across
 * fork (the verbs rule: a child never uses its parent's context) or one
 * that broke. Thread cancellation is held off until end(): a request
 * abandoned half way would leave the lock taken and the replies out of
 * step. */
static int begin(struct conn *c, int *cancel)
{
	if (c->owner != iemu_pid) {
		iemu_dbg("a fork child used its parent's device descriptor: EIO");
		return -EIO;
	}
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, cancel);
	pthread_mutex_lock(&c->lock);
	if (c->dead) {
		pthread_mutex_unlock(&c->lock);
		pthread_setcancelstate(*cancel, NULL);
		return -EIO;
	}
	return 0;
}

static void end(struct conn *c, int cancel)
{
	pthread_mutex_unlock(&c->lock);
	pthread_setcancelstate(cancel, NULL);
}

static void broke(struct conn *c, int err)
{
	iemu_dbg("connection to the daemon lost (%s): the device is gone", strerror(-err));
	c->dead = -err;
}

static int send_mem(struct conn *c, int fd, uintptr_t addr, size_t len, uint64_t fdoff, int memfd)
{
	unsigned char p[24];
	int rfds[IEMU_MAX_FDS], nrfds, r;
	size_t plen;

	put64(p, addr);
	put64(p + 8, len);
	put64(p + 16, fdoff);
	r = transact(c, fd, IEMU_T_MEM, p, sizeof p, memfd, &plen, rfds, &nrfds);
	if (r < 0) {
		broke(c, r);
		return r;
	}
	close_fds(rfds, nrfds);
	if (plen != 4) {
		broke(c, -EPROTO);
		return -EPROTO;
	}
	r = (int)get32(c->buf + IEMU_HDR);
	if (r != 0)
		iemu_dbg("MEM %#lx+%zu refused: %s", (unsigned long)addr, len, strerror(-r));
	return r;
}

void iemu_announce_mem(uintptr_t addr, size_t len, uint64_t fdoff, int memfd)
{
	struct {
		struct conn *c;
		int fd;
	} *list = NULL;
	size_t n = 0, cap = 0, i;
	struct conn *c;

	pthread_mutex_lock(&tab_lock);
	for (c = conns; c != NULL; c = c->next)
		if (c->owner == iemu_pid && c->nfds > 0 && c->sock < 0)
			cap++;
	if (cap > 0 && (list = malloc(cap * sizeof *list)) == NULL)
		iemu_dbg("arena: no memory to announce a piece: the device cannot reach it");
	for (c = conns; list != NULL && c != NULL && n < cap; c = c->next) {
		if (c->owner != iemu_pid || c->nfds == 0 || c->sock >= 0)
			continue;
		c->refs++;
		list[n].c = c;
		list[n++].fd = c->fds[0];
	}
	pthread_mutex_unlock(&tab_lock);
	for (i = 0; i < n; i++) {
		int cancel;
		c = list[i].c;
		if (begin(c, &cancel) == 0) {
			if (same_file(list[i].fd, c))
				send_mem(c, list[i].fd, addr, len, fdoff, memfd);
			end(c, cancel);
		}
		conn_put(c);
	}
	free(list);
}

/* overlap reports whether byte ranges [a, a+an) and [b, b+bn) meet. */
static int overlap(uint64_t a, uint64_t an, uint64_t b, uint64_t bn)
{
	return a < b + bn && b < a + an;
}

int iemu_notify_request(int fd, int *efd, struct iemu_notify_page *np)
{
	unsigned char p[8];
	int rfds[IEMU_MAX_FDS], nrfds = 0, r, cancel;
	size_t plen;
	struct conn *c = conn_get(fd);
	uint32_t flags = 0, poff = 0, coff = 0, qoff = 0, qbits = 0;
	uint64_t pgoff = 0;
	void *m;

	if (c == NULL)
		return -ENOTSUP;
	if (!(c->features & IEMU_FEATURE_NOTIFY)) {
		conn_put(c);
		return -ENOTSUP;
	}
	if ((r = begin(c, &cancel)) < 0) {
		conn_put(c);
		return r;
	}
	memset(p, 0, sizeof p); /* flags, reserved */
	p[0] = IEMU_NOTIFY_QP_BITS; /* name the QP that posted */
	r = transact(c, fd, IEMU_T_NOTIFY, p, sizeof p, -1, &plen, rfds, &nrfds);
	if (r < 0) {
		broke(c, r);
	} else if (plen == 4) {
		r = (int32_t)get32(c->buf + IEMU_HDR); /* an error reply: the daemon dropped us */
		broke(c, -EPROTO);
		r = r < 0 ? r : -EPROTO;
	} else if (plen != 32) {
		broke(c, -EPROTO);
		r = -EPROTO;
	} else if ((r = (int32_t)get32(c->buf + IEMU_HDR)) == 0) {
		flags = get32(c->buf + IEMU_HDR + 4);
		poff = get32(c->buf + IEMU_HDR + 8);
		coff = get32(c->buf + IEMU_HDR + 12);
		pgoff = get64(c->buf + IEMU_HDR + 16);
		qoff = get32(c->buf + IEMU_HDR + 24);
		qbits = get32(c->buf + IEMU_HDR + 28);
		/* The checks of attach.ParseNotifyReply. */
		if (nrfds != 2 || (flags & ~(uint32_t)IEMU_NOTIFY_QP_BITS) != 0 || poff % 4 != 0 ||
		    (uint64_t)poff + 4 > IEMU_PAGE || coff % 8 != 0 || (uint64_t)coff + 16 > IEMU_PAGE ||
		    pgoff % IEMU_PAGE != 0 || overlap(poff, 4, coff, 16))
			r = -EPROTO;
		else if (!(flags & IEMU_NOTIFY_QP_BITS) && (qoff != 0 || qbits != 0))
			r = -EPROTO;
		else if ((flags & IEMU_NOTIFY_QP_BITS) &&
			 (qbits == 0 || qbits % 64 != 0 || qoff % 8 != 0 || (uint64_t)qoff + qbits / 8 > IEMU_PAGE ||
			  overlap(qoff, qbits / 8, poff, 4) || overlap(qoff, qbits / 8, coff, 16)))
			r = -EPROTO;
	} else if (r > 0) {
		r = -EPROTO;
	}
	end(c, cancel);
	conn_put(c);
	if (r == 0) {
		m = (void *)syscall(SYS_mmap, NULL, (size_t)IEMU_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED,
				    rfds[1], (off_t)pgoff);
		if (m == MAP_FAILED) {
			r = -errno;
		} else {
			*efd = rfds[0];
			np->page = m;
			np->polling = (volatile uint32_t *)((char *)m + poff);
			np->counters = (uint64_t *)(void *)((char *)m + coff);
			np->bits = (flags & IEMU_NOTIFY_QP_BITS) ? (uint64_t *)(void *)((char *)m + qoff) : NULL;
			np->nbits = (flags & IEMU_NOTIFY_QP_BITS) ? qbits : 0;
			sys_close(rfds[1]);
			return 0;
		}
	}
	close_fds(rfds, nrfds);
	return r;
}

/* ---------------------------------------------------------------------
 * open
 */

/* discard frees a connection that never made it into the table. */
static void discard(struct conn *c, int fd)
{
	if (c->sock >= 0 && c->sock != fd)
		sys_close(c->sock);
	pthread_mutex_destroy(&c->lock);
	free(c->buf);
	free(c);
	sys_close(fd);
}

static int open_device_nocancel(int idx, dev_t rdev, int flags);
static int open_cm_nocancel(dev_t rdev, int flags);

static int open_device(int idx, dev_t rdev, int flags)
{
	int cancel, fd, err;

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	fd = idx == IEMU_CM_IDX ? open_cm_nocancel(rdev, flags) : open_device_nocancel(idx, rdev, flags);
	err = errno;
	pthread_setcancelstate(cancel, NULL);
	errno = err;
	return fd;
}

static int open_device_nocancel(int idx, dev_t rdev, int flags)
{
	struct sockaddr_un sa;
	struct conn *c;
	struct stat st;
	unsigned char hello[16 + IEMU_NAME];
	char device[IEMU_NAME];
	int rfds[IEMU_MAX_FDS], nrfds, fd, memfd, r, afd, i;
	uintptr_t aaddr;
	size_t alen, plen;
	uint64_t aoff;

	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path, iemu_env.sock, strlen(iemu_env.sock) + 1);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | ((flags & O_CLOEXEC) ? SOCK_CLOEXEC : 0), 0);
	if (fd < 0) {
		r = errno;
		iemu_dbg("socket: %s", strerror(r));
		errno = r;
		return -1;
	}
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		iemu_dbg("open uverbs%d: cannot reach the daemon at %s: %s", idx, iemu_env.sock,
			 strerror(errno));
		sys_close(fd);
		errno = ENXIO;
		return -1;
	}
	if (fd >= FDTAB_SIZE || sys_fstat(fd, &st) < 0) {
		sys_close(fd);
		errno = EMFILE;
		return -1;
	}
	c = calloc(1, sizeof *c);
	if (c != NULL)
		c->buf = malloc(IEMU_MAX_MSG);
	if (c == NULL || c->buf == NULL) {
		free(c);
		sys_close(fd);
		errno = ENOMEM;
		return -1;
	}
	pthread_mutex_init(&c->lock, NULL);
	c->sock = -1;
	c->owner = iemu_pid;
	c->sdev = st.st_dev;
	c->sino = st.st_ino;
	c->idx = idx;
	c->rdev = rdev;

	/* /proc/self/mem lets the daemon reach buffers registered anywhere. */
	memfd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/mem", O_RDWR | O_CLOEXEC);
	if (memfd < 0)
		iemu_dbg("cannot open /proc/self/mem (%s): memory registered outside the arena "
			 "will be unreachable by the device", strerror(errno));
	memset(hello, 0, sizeof hello);
	put32(hello, IEMU_VERSION);
	put32(hello + 4, (uint32_t)iemu_pid);
	for (i = 0; program_invocation_short_name != NULL && i < IEMU_NAME - 1 &&
		    program_invocation_short_name[i] != 0;
	     i++)
		hello[16 + i] = (unsigned char)program_invocation_short_name[i];
	r = transact(c, fd, IEMU_T_HELLO, hello, sizeof hello, memfd, &plen, rfds, &nrfds);
	if (memfd >= 0)
		sys_close(memfd);
	device[0] = 0;
	if (r == 0) {
		close_fds(rfds, nrfds);
		if (plen == 16 + IEMU_NAME) {
			r = (int32_t)get32(c->buf + IEMU_HDR);
			c->features = get32(c->buf + IEMU_HDR + 12);
			memcpy(device, c->buf + IEMU_HDR + 16, IEMU_NAME);
			device[IEMU_NAME - 1] = 0;
		} else if (plen == 4) {
			r = (int32_t)get32(c->buf + IEMU_HDR);
		} else {
			r = -EPROTO;
		}
		if (r > 0)
			r = -EPROTO;
	}
	if (r != 0) {
		iemu_dbg("open uverbs%d: the daemon refused: %s", idx, strerror(-r));
		discard(c, fd);
		errno = (r == -ECONNRESET || r == -EPIPE) ? ENXIO : -r;
		return -1;
	}

	/* Tell the new connection about the arena before anyone can use it;
	 * holding the arena lock until the connection is listed keeps a
	 * concurrent growth from being missed. */
	iemu_arena_lock();
	if (iemu_arena_extent(&aaddr, &alen, &aoff, &afd) &&
	    send_mem(c, fd, aaddr, alen, aoff, afd) < 0 && c->dead) {
		iemu_arena_unlock();
		discard(c, fd);
		errno = ENXIO;
		return -1;
	}
	pthread_mutex_lock(&tab_lock);
	r = add_entry(fd, c);
	if (r == 0) {
		c->next = conns;
		conns = c;
	}
	pthread_mutex_unlock(&tab_lock);
	iemu_arena_unlock();
	if (r != 0) {
		discard(c, fd);
		errno = EMFILE;
		return -1;
	}
	iemu_dbg("open uverbs%d: fd %d, device %s", idx, fd, device);
	return fd;
}

/* open_cm_nocancel opens /dev/infiniband/rdma_cm: a connection to the
 * same daemon with HELLO flag IEMU_HELLO_RDMACM (one event channel, the
 * kernel's ucma_file), then the daemon's readiness pipe, which becomes the
 * program's descriptor (docs/cm.md "The channel"): poll, epoll and select
 * on it see POLLIN exactly while events are queued. */
static int open_cm_nocancel(dev_t rdev, int flags)
{
	struct sockaddr_un sa;
	struct conn *c;
	struct stat st;
	unsigned char hello[16 + IEMU_NAME], chan[8];
	int rfds[IEMU_MAX_FDS], nrfds, sock, memfd, r, i, pfd = -1;
	size_t plen;

	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path, iemu_env.sock, strlen(iemu_env.sock) + 1);
	sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (sock < 0)
		return -1;
	if (connect(sock, (struct sockaddr *)&sa, sizeof sa) < 0) {
		iemu_dbg("open rdma_cm: cannot reach the daemon at %s: %s", iemu_env.sock, strerror(errno));
		sys_close(sock);
		errno = ENODEV;
		return -1;
	}
	c = calloc(1, sizeof *c);
	if (c != NULL)
		c->buf = malloc(IEMU_MAX_MSG);
	if (c == NULL || c->buf == NULL) {
		free(c);
		sys_close(sock);
		errno = ENOMEM;
		return -1;
	}
	pthread_mutex_init(&c->lock, NULL);
	c->sock = sock;
	if (sys_fstat(sock, &st) == 0) {
		c->kdev = st.st_dev;
		c->kino = st.st_ino;
	}
	c->owner = iemu_pid;
	c->idx = IEMU_CM_IDX;
	c->rdev = rdev;

	/* /proc/self/mem: the daemon reads SET_OPTION's optval and writes
	 * responses through it, so that a bad pointer is EFAULT as in the
	 * kernel (copy_from_user/copy_to_user). */
	memfd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/mem", O_RDWR | O_CLOEXEC);
	memset(hello, 0, sizeof hello);
	put32(hello, IEMU_VERSION);
	put32(hello + 4, (uint32_t)iemu_pid);
	put32(hello + 8, IEMU_HELLO_RDMACM);
	for (i = 0; program_invocation_short_name != NULL && i < IEMU_NAME - 1 &&
		    program_invocation_short_name[i] != 0;
	     i++)
		hello[16 + i] = (unsigned char)program_invocation_short_name[i];
	r = transact(c, sock, IEMU_T_HELLO, hello, sizeof hello, memfd, &plen, rfds, &nrfds);
	if (memfd >= 0)
		sys_close(memfd);
	if (r == 0) {
		close_fds(rfds, nrfds);
		if (plen == 16 + IEMU_NAME) {
			r = (int32_t)get32(c->buf + IEMU_HDR);
			c->features = get32(c->buf + IEMU_HDR + 12);
			if (r == 0 && !(c->features & IEMU_FEATURE_RDMACM))
				r = -ENODEV; /* a daemon that does not serve rdma_cm */
		} else {
			r = plen == 4 ? (int32_t)get32(c->buf + IEMU_HDR) : -EPROTO;
		}
		if (r > 0)
			r = -EPROTO;
	}
	if (r == 0) {
		/* The channel: the daemon's private first command. */
		put32(chan, 0x49454d01u);
		put32(chan + 4, 8u << 16); /* in 0, out 8 */
		r = transact(c, sock, IEMU_T_CMD, chan, sizeof chan, -1, &plen, rfds, &nrfds);
		if (r == 0) {
			unsigned char *p = c->buf + IEMU_HDR;
			if (plen != 24 + 4 + 8 || (int32_t)get32(p) < 0 || get32(p + 4) != 1 || nrfds != 1 ||
			    get32(p + 16) != 8 || get32(p + 24) != 4) {
				close_fds(rfds, nrfds);
				r = plen >= 4 && (int32_t)get32(p) < 0 ? (int32_t)get32(p) : -EPROTO;
			} else {
				c->token = get32(p + 28);
				pfd = rfds[0];
			}
		}
	}
	if (r != 0) {
		iemu_dbg("open rdma_cm: the daemon refused: %s", strerror(-r));
		discard(c, -1);
		errno = (r == -ECONNRESET || r == -EPIPE) ? ENODEV : -r;
		return -1;
	}
	if (!(flags & O_CLOEXEC)) {
		CALL_REAL(fcntl, pfd, F_SETFD, 0);
		CALL_REAL(fcntl, sock, F_SETFD, 0);
	}
	if (flags & O_NONBLOCK)
		CALL_REAL(fcntl, pfd, F_SETFL, O_NONBLOCK);
	if (pfd >= FDTAB_SIZE || sys_fstat(pfd, &st) < 0) {
		sys_close(pfd);
		discard(c, -1);
		errno = EMFILE;
		return -1;
	}
	c->sdev = st.st_dev;
	c->sino = st.st_ino;
	pthread_mutex_lock(&tab_lock);
	r = add_entry(pfd, c);
	if (r == 0) {
		c->next = conns;
		conns = c;
	}
	pthread_mutex_unlock(&tab_lock);
	if (r != 0) {
		sys_close(pfd);
		discard(c, -1);
		errno = EMFILE;
		return -1;
	}
	iemu_dbg("open rdma_cm: fd %d, channel %u", pfd, c->token);
	return pfd;
}

static int do_open(const char *path, int flags, mode_t mode, int dirfd, int at,
		   int (*real)(const char *, int, ...), int (*realat)(int, const char *, int, ...))
{
	dev_t rdev;
	int idx = fake_index(path, &rdev);

	if (idx >= 0)
		return open_device(idx, rdev, flags);
	if (at) {
		if (realat == NULL) {
			errno = ENOSYS;
			return -1;
		}
		return realat(dirfd, path, flags, mode);
	}
	if (real == NULL) {
		errno = ENOSYS;
		return -1;
	}
	return real(path, flags, mode);
}

static int needs_mode(int flags)
{
	return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE;
}

#define OPEN_MODE(flags)                                                      \
	mode_t mode = 0;                                                      \
	if (needs_mode(flags)) {                                              \
		va_list ap;                                                   \
		va_start(ap, flags);                                          \
		mode = va_arg(ap, mode_t);                                    \
		va_end(ap);                                                   \
	}

IEMU_API int open(const char *path, int flags, ...)
{
	OPEN_MODE(flags);
	return do_open(path, flags, mode, 0, 0, REAL(open), NULL);
}

IEMU_API int open64(const char *path, int flags, ...)
{
	OPEN_MODE(flags);
	return do_open(path, flags, mode, 0, 0, REAL(open64), NULL);
}

IEMU_API int openat(int dirfd, const char *path, int flags, ...)
{
	OPEN_MODE(flags);
	return do_open(path, flags, mode, dirfd, 1, NULL, REAL(openat));
}

IEMU_API int openat64(int dirfd, const char *path, int flags, ...)
{
	OPEN_MODE(flags);
	return do_open(path, flags, mode, dirfd, 1, NULL, REAL(openat64));
}

/* The _FORTIFY_SOURCE entry points. */
int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int dirfd, const char *path, int flags);
int __openat64_2(int dirfd, const char *path, int flags);

#define FORTIFY_OPEN(name, ...)                                               \
	dev_t rdev;                                                           \
	int idx = fake_index(path, &rdev);                                    \
	if (idx >= 0)                                                         \
		return open_device(idx, rdev, flags);                         \
	return CALL_REAL(name, __VA_ARGS__)

IEMU_API int __open_2(const char *path, int flags) { FORTIFY_OPEN(__open_2, path, flags); }
IEMU_API int __open64_2(const char *path, int flags) { FORTIFY_OPEN(__open64_2, path, flags); }
IEMU_API int __openat_2(int dirfd, const char *path, int flags)
{
	FORTIFY_OPEN(__openat_2, dirfd, path, flags);
}
IEMU_API int __openat64_2(int dirfd, const char *path, int flags)
{
	FORTIFY_OPEN(__openat64_2, dirfd, path, flags);
}

/* ---------------------------------------------------------------------
 * write, read, ioctl, mmap
 */

/* copy_out copies the response into the program, as copy_to_user does: a
 * bad address is EFAULT, never a crash. */
static int copy_out(uint64_t addr, const void *src, size_t len)
{
	struct iovec l = { .iov_base = (void *)src, .iov_len = len };
	struct iovec r = { .iov_base = (void *)(uintptr_t)addr, .iov_len = len };
	ssize_t n = syscall(SYS_process_vm_writev, iemu_pid, &l, 1UL, &r, 1UL, 0UL);

	if (n == (ssize_t)len)
		return 0;
	if (n < 0 && (errno == ENOSYS || errno == EPERM)) {
		/* A seccomp filter forbids it: copy directly. */
		memcpy((void *)(uintptr_t)addr, src, len);
		return 0;
	}
	return -EFAULT;
}

static ssize_t do_cmd(struct conn *c, int fd, const void *buf, size_t count)
{
	int rfds[IEMU_MAX_FDS], nrfds = 0, r, i, cancel;
	uint32_t nfd, rlen;
	int32_t status;
	uint64_t raddr;
	unsigned char *p, *resp;
	size_t plen;

	if (count > IEMU_MAX_MSG - IEMU_HDR)
		return -EINVAL;
	r = begin(c, &cancel);
	if (r < 0)
		return r;
	r = transact(c, c->sock >= 0 ? c->sock : fd, IEMU_T_CMD, buf, count, -1, &plen, rfds, &nrfds);
	if (r < 0) {
		broke(c, r);
		r = -EIO;
		goto out;
	}
	p = c->buf + IEMU_HDR;
	if (plen == 4) { /* protocol error: the daemon drops us */
		r = (int32_t)get32(p);
		broke(c, r < 0 ? r : -EPROTO);
		r = -EIO;
		goto out;
	}
	r = -EPROTO;
	if (plen < 24)
		goto bad;
	status = (int32_t)get32(p);
	nfd = get32(p + 4);
	raddr = get64(p + 8);
	rlen = get32(p + 16);
	if (nfd != (uint32_t)nrfds || 24 + 4 * (uint64_t)nfd + rlen != plen)
		goto bad;
	resp = p + 24 + 4 * nfd;
	for (i = 0; i < nrfds; i++) {
		uint32_t off = get32(p + 24 + 4 * i);
		if ((uint64_t)off + 4 > rlen)
			goto bad;
		memcpy(resp + off, &rfds[i], 4);
	}
	if (status < 0) {
		r = status;
		goto out;
	}
	if (raddr != 0 && rlen > 0) {
		if (copy_out(raddr, resp, rlen) < 0) {
			r = -EFAULT;
			goto out;
		}
		nrfds = 0; /* the descriptors now belong to the program */
	}
	r = status;
	goto out;
bad:
	broke(c, -EPROTO);
	r = -EIO;
out:
	close_fds(rfds, nrfds);
	end(c, cancel);
	return r;
}

/* The interposers keep their fast path (not our descriptor) free of
 * anything but a bounds check, a load and the call to libc; the slow paths
 * are out of line. */

/* rdma_cm commands the preload looks at (rdma_user_cm.h). */
#define UCMA_GET_EVENT 12u
#define UCMA_MIGRATE_ID 18u
#define UCMA_MIGRATE_FD_OFF (8 + 12) /* hdr, response, id, then fd */

/* closed_wait is GET_EVENT's wait once another thread of the program has
 * closed the channel under it (rping's main thread destroys its event
 * channel while its cm thread waits for one more event, then exits): the
 * kernel's wait holds the file and goes on (ucma_get_event), so this
 * thread waits on too instead of reporting an error the program would act
 * on — rping's cm thread exited 255 on an EAGAIN here, the -1 of a failed
 * F_GETFL read as O_NONBLOCK. It ends with EINTR if poll reports one. */
static ssize_t closed_wait(void)
{
	while (poll(NULL, 0, -1) < 0 && errno != EINTR)
		;
	return -EINTR;
}

/* cm_cmd sends one rdma_cm command. Two need the preload:
 *  - GET_EVENT blocks in the kernel until an event is queued: the daemon
 *    answers EAGAIN at once, and unless the program's descriptor is
 *    O_NONBLOCK we wait for it to poll readable and ask again; a signal
 *    ends the wait with EINTR (wait_event_interruptible).
 *  - MIGRATE_ID names the old channel by the program's descriptor
 *    number, which means nothing to the daemon: it gets the channel's
 *    token instead (or a code for "not open" / "not an rdma_cm file"). */
static ssize_t cm_cmd(struct conn *c, int fd, const void *buf, size_t count)
{
	unsigned char mig[64];
	uint32_t cmd = count >= 4 ? get32(buf) : ~0u;
	struct pollfd pf;
	ssize_t r;

	if (cmd == UCMA_MIGRATE_ID && count >= UCMA_MIGRATE_FD_OFF + 4 && count <= sizeof mig) {
		int ofd = (int)get32((const unsigned char *)buf + UCMA_MIGRATE_FD_OFF);
		struct conn *o = conn_get(ofd);
		uint32_t tok;

		if (o != NULL && o->sock >= 0)
			tok = o->token;
		else if (o == NULL && CALL_REAL(fcntl, ofd, F_GETFD) < 0)
			tok = 0xffffffffu; /* not an open descriptor */
		else
			tok = 0xfffffffeu; /* open, not an rdma_cm channel */
		if (o != NULL)
			conn_put(o);
		memcpy(mig, buf, count);
		put32(mig + UCMA_MIGRATE_FD_OFF, tok);
		return do_cmd(c, fd, mig, count);
	}
	for (;;) {
		int fl;

		r = do_cmd(c, fd, buf, count);
		if (r != -EAGAIN || cmd != UCMA_GET_EVENT)
			return r;
		fl = CALL_REAL(fcntl, fd, F_GETFL);
		if (fl < 0)
			return closed_wait();
		if (fl & O_NONBLOCK)
			return r;
		pf.fd = fd;
		pf.events = POLLIN;
		pf.revents = 0;
		if (poll(&pf, 1, -1) < 0)
			return -errno;
		if (pf.revents & POLLNVAL)
			return closed_wait();
	}
}

__attribute__((noinline)) static ssize_t write_slow(int fd, const void *buf, size_t count)
{
	struct conn *c = conn_get(fd);
	ssize_t r;

	if (c == NULL)
		return CALL_REAL(write, fd, buf, count);
	r = c->sock >= 0 ? cm_cmd(c, fd, buf, count) : do_cmd(c, fd, buf, count);
	conn_put(c);
	if (r < 0) {
		errno = (int)-r;
		return -1;
	}
	return r;
}

IEMU_API ssize_t write(int fd, const void *buf, size_t count)
{
	if (UNLIKELY(maybe_ours(fd)))
		return write_slow(fd, buf, count);
	return CALL_REAL(write, fd, buf, count);
}

/* not_ours_after_all: fd's entry was stale (and is gone now). */
__attribute__((noinline)) static int not_ours_after_all(int fd)
{
	struct conn *c = conn_get(fd);

	if (c == NULL)
		return 1;
	conn_put(c);
	return 0;
}

IEMU_API ssize_t read(int fd, void *buf, size_t count)
{
	if (UNLIKELY(maybe_ours(fd)) && !not_ours_after_all(fd)) {
		errno = EINVAL; /* uverbs files have no read */
		return -1;
	}
	return CALL_REAL(read, fd, buf, count);
}

/* ioctl's third argument is read as a pointer, as glibc's ioctl reads it. */
IEMU_API int ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (UNLIKELY(maybe_ours(fd)) && !not_ours_after_all(fd)) {
		/* No RDMA_VERBS_IOCTL: libibverbs falls back to the write() ABI. */
		errno = ENOTTY;
		return -1;
	}
	return CALL_REAL(ioctl, fd, req, arg);
}

static void *do_mmap(struct conn *c, int fd, void *addr, size_t len, int prot, int flags, off_t off)
{
	unsigned char p[24];
	int rfds[IEMU_MAX_FDS], nrfds = 0, r;
	size_t plen;
	void *m = MAP_FAILED;
	int err = 0, cancel;

	r = begin(c, &cancel);
	if (r < 0) {
		errno = -r;
		return MAP_FAILED;
	}
	put64(p, (uint64_t)off);
	put64(p + 8, len);
	put32(p + 16, (uint32_t)prot);
	put32(p + 20, (uint32_t)flags);
	r = transact(c, c->sock >= 0 ? c->sock : fd, IEMU_T_MMAP, p, sizeof p, -1, &plen, rfds, &nrfds);
	if (r < 0) {
		broke(c, r);
		err = EIO;
	} else if (plen == 4) {
		broke(c, -EPROTO);
		err = EIO;
	} else if (plen != 16) {
		broke(c, -EPROTO);
		err = EIO;
	} else if ((int32_t)get32(c->buf + IEMU_HDR) < 0) {
		err = -(int32_t)get32(c->buf + IEMU_HDR);
	} else if (nrfds != 1) {
		broke(c, -EPROTO);
		err = EIO;
	} else {
		__typeof__(&mmap) rm = REAL(mmap);
		uint64_t foff = get64(c->buf + IEMU_HDR + 8);
		if (rm == NULL)
			err = ENOSYS;
		else if ((m = rm(addr, len, prot, flags, rfds[0], (off_t)foff)) == MAP_FAILED)
			err = errno;
	}
	end(c, cancel);
	close_fds(rfds, nrfds);
	if (m == MAP_FAILED)
		errno = err;
	return m;
}

/* mmap_slow returns 0 when fd turned out not to be ours. */
__attribute__((noinline)) static int mmap_slow(void **res, void *addr, size_t len, int prot, int flags,
					       int fd, off_t off)
{
	struct conn *c = conn_get(fd);

	if (c == NULL)
		return 0;
	*res = do_mmap(c, fd, addr, len, prot, flags, off);
	conn_put(c);
	return 1;
}

IEMU_API void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	__typeof__(&mmap) rm;
	void *m;

	if (UNLIKELY(maybe_ours(fd)) && mmap_slow(&m, addr, len, prot, flags, fd, off))
		return m;
	rm = REAL(mmap);
	if (rm == NULL) {
		errno = ENOSYS;
		return MAP_FAILED;
	}
	return rm(addr, len, prot, flags, fd, off);
}

IEMU_API void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off64_t off)
{
	__typeof__(&mmap64) rm;
	void *m;

	if (UNLIKELY(maybe_ours(fd)) && mmap_slow(&m, addr, len, prot, flags, fd, (off_t)off))
		return m;
	rm = REAL(mmap64);
	if (rm == NULL) {
		errno = ENOSYS;
		return MAP_FAILED;
	}
	return rm(addr, len, prot, flags, fd, off);
}

/* ---------------------------------------------------------------------
 * close, dup, fcntl, close_range
 */

__attribute__((noinline)) static int close_slow(int fd)
{
	int r, err;

	pthread_mutex_lock(&tab_lock);
	/* Ours or stale, the entry goes; the descriptor is closed under the
	 * lock so that its number cannot be registered again meanwhile. */
	drop_entry(fd);
	r = CALL_REAL(close, fd);
	err = errno;
	pthread_mutex_unlock(&tab_lock);
	errno = err;
	return r;
}

IEMU_API int close(int fd)
{
	iemu_notify_fd_closing((unsigned)fd, (unsigned)fd);
	if (UNLIKELY(maybe_ours(fd)))
		return close_slow(fd);
	return CALL_REAL(close, fd);
}

/* dup_common registers newfd (just made by a dup of oldfd) when oldfd is
 * ours; tab_lock held. newfd's previous entry, if any, is gone either way
 * (dup2 closed it). */
static int dup_common(struct conn *c, int newfd)
{
	if (newfd < 0)
		return newfd;
	if ((unsigned)newfd < FDTAB_SIZE)
		drop_entry(newfd);
	if (c != NULL && add_entry(newfd, c) < 0) {
		CALL_REAL(close, newfd);
		errno = EMFILE;
		return -1;
	}
	return newfd;
}

IEMU_API int dup(int oldfd)
{
	struct conn *c;
	int r, err;

	if (!maybe_ours(oldfd) || (c = conn_get(oldfd)) == NULL)
		return CALL_REAL(dup, oldfd);
	pthread_mutex_lock(&tab_lock);
	r = dup_common(c, CALL_REAL(dup, oldfd));
	err = errno;
	pthread_mutex_unlock(&tab_lock);
	conn_put(c);
	errno = err;
	return r;
}

IEMU_API int dup2(int oldfd, int newfd)
{
	struct conn *c = NULL;
	int r, err;

	if (oldfd != newfd)
		iemu_notify_fd_closing((unsigned)newfd, (unsigned)newfd);
	if (oldfd == newfd || (!maybe_ours(oldfd) && !maybe_ours(newfd)))
		return CALL_REAL(dup2, oldfd, newfd);
	c = conn_get(oldfd);
	pthread_mutex_lock(&tab_lock);
	r = dup_common(c, CALL_REAL(dup2, oldfd, newfd));
	err = errno;
	pthread_mutex_unlock(&tab_lock);
	if (c != NULL)
		conn_put(c);
	errno = err;
	return r;
}

IEMU_API int dup3(int oldfd, int newfd, int flags)
{
	struct conn *c = NULL;
	int r, err;

	if (oldfd != newfd)
		iemu_notify_fd_closing((unsigned)newfd, (unsigned)newfd);
	if (oldfd == newfd || (!maybe_ours(oldfd) && !maybe_ours(newfd)))
		return CALL_REAL(dup3, oldfd, newfd, flags);
	c = conn_get(oldfd);
	pthread_mutex_lock(&tab_lock);
	r = dup_common(c, CALL_REAL(dup3, oldfd, newfd, flags));
	err = errno;
	pthread_mutex_unlock(&tab_lock);
	if (c != NULL)
		conn_put(c);
	errno = err;
	return r;
}

/* do_fcntl forwards one fcntl: with pointer argument arg if non-NULL, else
 * the int iv (ignored by commands without an argument). */
static int do_fcntl(int (*rf)(int, int, ...), int fd, int cmd, void *arg, int iv)
{
	struct conn *c;
	int r, err;

	if (rf == NULL) {
		errno = ENOSYS;
		return -1;
	}
	if (arg != NULL)
		return rf(fd, cmd, arg);
	if ((cmd != F_DUPFD && cmd != F_DUPFD_CLOEXEC) || !maybe_ours(fd) ||
	    (c = conn_get(fd)) == NULL)
		return rf(fd, cmd, iv);
	pthread_mutex_lock(&tab_lock);
	r = dup_common(c, rf(fd, cmd, iv));
	err = errno;
	pthread_mutex_unlock(&tab_lock);
	conn_put(c);
	errno = err;
	return r;
}

/* fcntl's third argument: none, an int, or a pointer, by command. Unknown
 * commands are forwarded with it read as a pointer, which is how glibc's
 * own fcntl reads it. */
#define FCNTL_BODY(fn)                                                        \
	va_list ap;                                                           \
	void *arg = NULL;                                                     \
	switch (cmd) {                                                        \
	case F_GETFD: case F_GETFL: case F_GETOWN: case F_GETSIG:             \
	case F_GETLEASE: case F_GETPIPE_SZ: case F_GET_SEALS:                 \
		return do_fcntl(REAL(fn), fd, cmd, NULL, 0);                  \
	case F_DUPFD: case F_DUPFD_CLOEXEC: case F_SETFD: case F_SETFL:       \
	case F_SETOWN: case F_SETSIG: case F_SETLEASE: case F_NOTIFY:         \
	case F_SETPIPE_SZ: case F_ADD_SEALS: {                                \
		int v;                                                        \
		va_start(ap, cmd);                                            \
		v = va_arg(ap, int);                                          \
		va_end(ap);                                                   \
		return do_fcntl(REAL(fn), fd, cmd, NULL, v);                  \
	}                                                                     \
	default:                                                              \
		va_start(ap, cmd);                                            \
		arg = va_arg(ap, void *);                                     \
		va_end(ap);                                                   \
		return do_fcntl(REAL(fn), fd, cmd, arg, 0);                   \
	}

IEMU_API int fcntl(int fd, int cmd, ...) { FCNTL_BODY(fcntl) }

#if __GLIBC_PREREQ(2, 28)
static void *real_fcntl64;
IEMU_API int fcntl64(int fd, int cmd, ...) { FCNTL_BODY(fcntl64) }
#endif

#if __GLIBC_PREREQ(2, 34)
static void *real_close_range, *real_closefrom;

/* forget_range drops every entry in [lo, hi] after the descriptors were
 * closed by libc. */
static void forget_range(unsigned lo, unsigned hi)
{
	struct conn *c, *next;
	int i;

	pthread_mutex_lock(&tab_lock);
	for (c = conns; c != NULL; c = next) {
		c->refs++; /* keep c while its entries go */
		for (i = c->nfds - 1; i >= 0; i--)
			if ((unsigned)c->fds[i] >= lo && (unsigned)c->fds[i] <= hi)
				drop_entry(c->fds[i]);
		next = c->next;
		if (--c->refs == 0)
			conn_free(c);
	}
	pthread_mutex_unlock(&tab_lock);
}

IEMU_API int close_range(unsigned first, unsigned last, int flags)
{
	int r;

	if (!(flags & CLOSE_RANGE_CLOEXEC))
		iemu_notify_fd_closing(first, last);
	r = CALL_REAL(close_range, first, last, flags);
	if (r == 0 && !(flags & CLOSE_RANGE_CLOEXEC))
		forget_range(first, last);
	return r;
}

IEMU_API void closefrom(int lowfd)
{
	__typeof__(&closefrom) f = REAL(closefrom);
	if (f == NULL)
		return;
	iemu_notify_fd_closing(lowfd < 0 ? 0 : (unsigned)lowfd, ~0u);
	f(lowfd);
	forget_range(lowfd < 0 ? 0 : (unsigned)lowfd, ~0u);
}
#endif

/* ---------------------------------------------------------------------
 * stat and friends
 */

__attribute__((noinline)) static int fake_fd_slow(int fd, int *idx, dev_t *rdev)
{
	struct conn *c = conn_get(fd);

	if (c == NULL)
		return 0;
	*idx = c->idx;
	*rdev = c->rdev;
	conn_put(c);
	return 1;
}

/* fake_fd: fd is one of our device descriptors; *idx and *rdev say which. */
static inline int fake_fd(int fd, int *idx, dev_t *rdev)
{
	return UNLIKELY(maybe_ours(fd)) && fake_fd_slow(fd, idx, rdev);
}

/* fake_at: the (dirfd, path, flags) of an *at call name a fake device. */
static int fake_at(int dirfd, const char *path, int flags, int *idx, dev_t *rdev)
{
	if (path != NULL && path[0] == 0 && (flags & AT_EMPTY_PATH))
		return fake_fd(dirfd, idx, rdev);
	return (*idx = fake_index(path, rdev)) >= 0;
}

#if __GLIBC_PREREQ(2, 33)
static void *real_stat, *real_stat64, *real_lstat, *real_lstat64;
static void *real_fstat, *real_fstat64, *real_fstatat, *real_fstatat64;

#define STAT_PATH(name, type)                                                 \
	IEMU_API int name(const char *path, type *st)                         \
	{                                                                     \
		dev_t rdev;                                                   \
		int idx = fake_index(path, &rdev);                            \
		if (idx < 0)                                                  \
			return CALL_REAL(name, path, st);                     \
		FILL_STAT(st, idx, rdev);                                     \
		return 0;                                                     \
	}
STAT_PATH(stat, struct stat)
STAT_PATH(stat64, struct stat64)
STAT_PATH(lstat, struct stat)
STAT_PATH(lstat64, struct stat64)

#define STAT_FD(name, type)                                                   \
	IEMU_API int name(int fd, type *st)                                   \
	{                                                                     \
		dev_t rdev;                                                   \
		int idx;                                                      \
		if (!fake_fd(fd, &idx, &rdev))                                \
			return CALL_REAL(name, fd, st);                       \
		FILL_STAT(st, idx, rdev);                                     \
		return 0;                                                     \
	}
STAT_FD(fstat, struct stat)
STAT_FD(fstat64, struct stat64)

#define STAT_AT(name, type)                                                   \
	IEMU_API int name(int dirfd, const char *path, type *st, int flags)   \
	{                                                                     \
		dev_t rdev;                                                   \
		int idx;                                                      \
		if (!fake_at(dirfd, path, flags, &idx, &rdev))                \
			return CALL_REAL(name, dirfd, path, st, flags);       \
		FILL_STAT(st, idx, rdev);                                     \
		return 0;                                                     \
	}
STAT_AT(fstatat, struct stat)
STAT_AT(fstatat64, struct stat64)
#endif

#if __GLIBC_PREREQ(2, 28)
static void *real_statx;
IEMU_API int statx(int dirfd, const char *path, int flags, unsigned int mask, struct statx *stx)
{
	dev_t rdev;
	int idx;

	if (!fake_at(dirfd, path, flags, &idx, &rdev))
		return CALL_REAL(statx, dirfd, path, flags, mask, stx);
	memset(stx, 0, sizeof *stx);
	stx->stx_mask = STATX_BASIC_STATS & ~(unsigned)STATX_BLOCKS;
	stx->stx_blksize = 4096;
	stx->stx_nlink = 1;
	stx->stx_mode = S_IFCHR | 0666;
	stx->stx_ino = FAKE_INO(idx);
	stx->stx_rdev_major = major(rdev);
	stx->stx_rdev_minor = minor(rdev);
	stx->stx_dev_major = major(FAKE_DEV);
	stx->stx_dev_minor = minor(FAKE_DEV);
	return 0;
}
#endif

/* glibc before 2.33 compiled stat() into programs as calls to __xstat & co;
 * binaries built then still call them (now compat symbols of libc). */
#if defined(__x86_64__) || defined(__aarch64__)
#if defined(__x86_64__)
#define GLIBC_BASE "GLIBC_2.2.5"
#else
#define GLIBC_BASE "GLIBC_2.17"
#endif
int __xstat(int ver, const char *path, struct stat *st);
int __xstat64(int ver, const char *path, struct stat64 *st);
int __lxstat(int ver, const char *path, struct stat *st);
int __lxstat64(int ver, const char *path, struct stat64 *st);
int __fxstat(int ver, int fd, struct stat *st);
int __fxstat64(int ver, int fd, struct stat64 *st);
int __fxstatat(int ver, int dirfd, const char *path, struct stat *st, int flags);
int __fxstatat64(int ver, int dirfd, const char *path, struct stat64 *st, int flags);

static void *compat_sym(void **slot, const char *name)
{
	void *f = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
	if (f == NULL) {
		f = dlvsym(RTLD_NEXT, name, GLIBC_BASE);
		if (f == NULL)
			f = dlsym(RTLD_NEXT, name);
		__atomic_store_n(slot, f, __ATOMIC_RELEASE);
	}
	return f;
}

#define COMPAT(fn) ((__typeof__(&fn))compat_sym((void **)&real_##fn, #fn))
#define CALL_COMPAT(fn, ...)                                                  \
	({                                                                    \
		__typeof__(&fn) f_ = COMPAT(fn);                              \
		f_ ? f_(__VA_ARGS__) : (errno = ENOSYS, -1);                  \
	})

static void *real___xstat, *real___xstat64, *real___lxstat, *real___lxstat64;
static void *real___fxstat, *real___fxstat64, *real___fxstatat, *real___fxstatat64;

#define XSTAT_PATH(name, type)                                                \
	IEMU_API int name(int ver, const char *path, type *st)                \
	{                                                                     \
		dev_t rdev;                                                   \
		int idx = fake_index(path, &rdev);                            \
		if (idx < 0)                                                  \
			return CALL_COMPAT(name, ver, path, st);              \
		FILL_STAT(st, idx, rdev);                                     \
		return 0;                                                     \
	}
XSTAT_PATH(__xstat, struct stat)
XSTAT_PATH(__xstat64, struct stat64)
XSTAT_PATH(__lxstat, struct stat)
XSTAT_PATH(__lxstat64, struct stat64)

#define XSTAT_FD(name, type)                                                  \
	IEMU_API int name(int ver, int fd, type *st)                          \
	{                                                                     \
		dev_t rdev;                                                   \
		int idx;                                                      \
		if (!fake_fd(fd, &idx, &rdev))                                \
			return CALL_COMPAT(name, ver, fd, st);                \
		FILL_STAT(st, idx, rdev);                                     \
		return 0;                                                     \
	}
XSTAT_FD(__fxstat, struct stat)
XSTAT_FD(__fxstat64, struct stat64)

#define XSTAT_AT(name, type)                                                  \
	IEMU_API int name(int ver, int dirfd, const char *path, type *st, int flags) \
	{                                                                     \
		dev_t rdev;                                                   \
		int idx;                                                      \
		if (!fake_at(dirfd, path, flags, &idx, &rdev))                \
			return CALL_COMPAT(name, ver, dirfd, path, st, flags); \
		FILL_STAT(st, idx, rdev);                                     \
		return 0;                                                     \
	}
XSTAT_AT(__fxstatat, struct stat)
XSTAT_AT(__fxstatat64, struct stat64)
#endif

/* ---------------------------------------------------------------------
 * fork and start-up
 */

static void fork_prepare(void)
{
	iemu_arena_lock();
	pthread_mutex_lock(&tab_lock);
	iemu_notify_lock();
}

static void fork_parent(void)
{
	iemu_notify_unlock();
	pthread_mutex_unlock(&tab_lock);
	iemu_arena_unlock();
}

static void fork_child(void)
{
	/* The inherited connections stay in the table (so that close() and
	 * fstat() work on them) but belong to the parent: begin() refuses
	 * them. The arena becomes a private copy; a new one starts on the
	 * first ring the child allocates after opening the device anew. */
	iemu_pid = (pid_t)syscall(SYS_getpid);
	iemu_arena_fork_child();
	iemu_notify_unlock();
	pthread_mutex_unlock(&tab_lock);
	iemu_arena_unlock();
}

__attribute__((constructor)) static void iemu_ctor(void)
{
	iemu_init();
	iemu_arena_init();
	if (pthread_atfork(fork_prepare, fork_parent, fork_child) != 0)
		iemu_dbg("pthread_atfork failed: a fork child may deadlock in the preload");
}

__attribute__((destructor)) static void iemu_dtor(void)
{
	iemu_arena_report();
	iemu_notify_report();
}
