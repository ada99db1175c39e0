/* libirdma-emu-preload: the post notification (docs/attach.md "NOTIFY",
 * docs/preload.md "Wake-up on post", docs/dataplane.md "Idle and wake-up
 * on post").
 *
 * The doorbell page is shared memory: the provider's doorbell store
 * (libirdma's irdma_uk_qp_post_wr, db_wr32) reaches the daemon only while
 * its engine polls. So the preload interposes libibverbs' ibv_open_device:
 * once the real one returned a context on our device, it asks NOTIFY on
 * the context's connection and replaces the context's ops.post_send — what
 * the inline ibv_post_send calls (libibverbs/verbs.h) — with a wrapper
 * that calls the provider's, then, after a full fence, reads the notify
 * page's polling word and, only when the daemon says it is parked
 * (virtio's notification suppression), sets the QP's bit in the page and
 * writes the eventfd, so that the daemon looks at that QP alone. ops.bind_mw — what the
 * inline ibv_bind_mw calls for a type-1 window — is wrapped the same way:
 * libirdma's irdma_ubind_mw posts a BIND_MW WQE and rings the SQ doorbell
 * through its own irdma_upost_send, not through ops.post_send, so without
 * the wrapper a parked daemon never sees the bind. post_recv is left alone:
 * irdma has no RQ doorbell (irdma_uk_post_receive writes none) and the
 * device reads the RQ when a packet arrives.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "iemu.h"

/* The public struct ibv_context and the head of struct ibv_qp as
 * rdma-core declares them (libibverbs/verbs.h, identical in rdma-core 44
 * and 65): the legacy struct ibv_context_ops of 32 function pointers, of
 * which post_send is the 26th, then cmd_fd. They are ABI: programs
 * compiled against any rdma-core call ops.post_send through the inline
 * ibv_post_send. Declared here so that the preload needs no libibverbs-dev
 * to build. */
struct ibv_context;
struct ibv_qp {
	struct ibv_context *context;
	void *qp_context, *pd, *send_cq, *recv_cq, *srq;
	uint32_t handle;
	uint32_t qp_num; /* irdma's QP id: the value libirdma writes to the SQ doorbell */
};
typedef int (*post_send_fn)(struct ibv_qp *qp, void *wr, void **bad_wr);
typedef int (*bind_mw_fn)(struct ibv_qp *qp, void *mw, void *mw_bind);
struct ibv_context_ops {
	void *before[8]; /* _compat_query_device … alloc_mw */
	bind_mw_fn bind_mw;
	void *middle[16]; /* dealloc_mw … _compat_destroy_qp */
	post_send_fn post_send;
	void *post_recv;
	void *after[5]; /* _compat_create_ah … _compat_async_event */
};
struct ibv_context {
	void *device;
	struct ibv_context_ops ops;
	int cmd_fd;
	int async_fd;
	int num_comp_vectors;
};
_Static_assert(offsetof(struct ibv_context, ops) == 8, "ibv_context.ops");
_Static_assert(offsetof(struct ibv_context, ops.bind_mw) == 8 + 8 * 8, "ops.bind_mw");
_Static_assert(offsetof(struct ibv_context, ops.post_send) == 8 + 25 * 8, "ops.post_send");
_Static_assert(sizeof(struct ibv_context_ops) == 32 * 8, "ibv_context_ops");
_Static_assert(offsetof(struct ibv_context, cmd_fd) == 8 + 32 * 8, "ibv_context.cmd_fd");
_Static_assert(offsetof(struct ibv_qp, qp_num) == 52, "ibv_qp.qp_num");

/* One context that notifies. ctx is the key (NULL: a free slot); the rest
 * is written before ctx is published and read after it is loaded. */
struct notify {
	struct ibv_context *ctx;
	post_send_fn orig;
	bind_mw_fn orig_bind; /* NULL: the provider has none */
	volatile uint32_t *polling; /* the daemon's word: 1 polling, 0 parked */
	uint64_t *counters;         /* notified, suppressed */
	uint64_t *bits;             /* a bit per QP id modulo nbits; NULL: the daemon names none */
	uint32_t nbits;
	void *page;
	int efd; /* -1 once lost */
};

#define NOTIFY_MAX 64
static struct notify notifies[NOTIFY_MAX];
static unsigned notify_hi; /* slots ever used (acquire/release) */
static pthread_mutex_t notify_lock = PTHREAD_MUTEX_INITIALIZER;
static post_send_fn any_orig; /* the provider's post_send, for a lost context */
static bind_mw_fn any_orig_bind; /* the provider's bind_mw, for a lost context */
static uint64_t notify_errors;  /* eventfd writes that failed */
static uint64_t notified_gone, suppressed_gone; /* counts of closed contexts (notify_lock) */

static struct notify *find(const struct ibv_context *ctx)
{
	unsigned n = __atomic_load_n(&notify_hi, __ATOMIC_ACQUIRE);
	for (unsigned i = 0; i < n; i++)
		if (__atomic_load_n(&notifies[i].ctx, __ATOMIC_ACQUIRE) == ctx)
			return &notifies[i];
	return NULL;
}

/* kick tells a parked daemon that qp's SQ doorbell was rung. */
static void kick(struct notify *n, const struct ibv_qp *qp)
{
	int err;

	/* The WQEs and the doorbell store before the read of the daemon's
	 * word; the daemon stores "parked" before its last poll of the
	 * doorbell page with the same fence. Either its poll sees the
	 * doorbell or this load sees "parked". */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (__builtin_expect(*n->polling != 0, 1)) {
		__atomic_fetch_add(&n->counters[1], 1, __ATOMIC_RELAXED);
		return;
	}
	if (n->bits != NULL) {
		/* Name the QP before the eventfd is written. A bit already set
		 * is a notification the daemon has not taken yet: its pass over
		 * the bits, after the write that follows that bit, serves this
		 * post too. */
		uint32_t b = qp->qp_num % n->nbits;
		uint64_t m = (uint64_t)1 << (b % 64);
		if (__atomic_fetch_or(&n->bits[b / 64], m, __ATOMIC_SEQ_CST) & m) {
			__atomic_fetch_add(&n->counters[0], 1, __ATOMIC_RELAXED);
			return;
		}
	}
	err = errno;
	{
		uint64_t one = 1;
		int fd = __atomic_load_n(&n->efd, __ATOMIC_ACQUIRE);
		/* The eventfd is non-blocking: at worst EAGAIN, when the
		 * daemon has not read 2^64-2 notifications. */
		if (fd >= 0 && syscall(SYS_write, fd, &one, sizeof one) == (long)sizeof one)
			__atomic_fetch_add(&n->counters[0], 1, __ATOMIC_RELAXED);
		else
			__atomic_fetch_add(&notify_errors, 1, __ATOMIC_RELAXED);
	}
	errno = err;
}

/* post_send is the wrapper every context that notifies gets as
 * ops.post_send. */
static int post_send(struct ibv_qp *qp, void *wr, void **bad_wr)
{
	struct notify *n = find(qp->context);
	int r;

	if (UNLIKELY(n == NULL)) {
		/* Only a post on a context closed meanwhile gets here (a bug of
		 * the program); the provider's own function still answers. */
		post_send_fn f = __atomic_load_n(&any_orig, __ATOMIC_ACQUIRE);
		return f != NULL ? f(qp, wr, bad_wr) : EINVAL;
	}
	r = n->orig(qp, wr, bad_wr);
	kick(n, qp);
	return r;
}

/* bind_mw is the wrapper a context that notifies gets as ops.bind_mw
 * when its provider has one. ibv_bind_mw calls it through the window's
 * context (mw->context), which is the QP's: verbs.h checks mw->pd against
 * the MR's PD, and a PD belongs to one context. */
static int bind_mw(struct ibv_qp *qp, void *mw, void *mw_bind)
{
	struct notify *n = find(qp->context);
	int r;

	if (UNLIKELY(n == NULL || n->orig_bind == NULL)) {
		bind_mw_fn f = __atomic_load_n(&any_orig_bind, __ATOMIC_ACQUIRE);
		return f != NULL ? f(qp, mw, mw_bind) : EINVAL;
	}
	r = n->orig_bind(qp, mw, mw_bind);
	kick(n, qp);
	return r;
}

/* setup asks NOTIFY for a context just opened on our device and wraps its
 * post_send. Any failure leaves the context as it was: the daemon then
 * polls its doorbell page with backoff. */
static void setup(struct ibv_context *ctx)
{
	struct notify *n = NULL;
	struct iemu_notify_page np;
	int efd, r;
	unsigned i;

	if (!iemu_env.notify || ctx->ops.post_send == NULL || ctx->ops.post_send == post_send)
		return;
	r = iemu_notify_request(ctx->cmd_fd, &efd, &np);
	if (r < 0) {
		if (r != -ENOTSUP)
			iemu_dbg("NOTIFY refused (%s): the daemon polls this context's doorbells", strerror(-r));
		return;
	}
	pthread_mutex_lock(&notify_lock);
	for (i = 0; i < NOTIFY_MAX; i++)
		if (notifies[i].ctx == NULL && notifies[i].page == NULL) {
			n = &notifies[i];
			break;
		}
	if (n == NULL) {
		pthread_mutex_unlock(&notify_lock);
		iemu_dbg("more than %d contexts: this one does not notify", NOTIFY_MAX);
		syscall(SYS_munmap, np.page, (size_t)IEMU_PAGE);
		syscall(SYS_close, efd);
		return;
	}
	n->orig = ctx->ops.post_send;
	n->orig_bind = ctx->ops.bind_mw != bind_mw ? ctx->ops.bind_mw : NULL;
	n->polling = np.polling;
	n->counters = np.counters;
	n->bits = np.bits;
	n->nbits = np.nbits;
	n->page = np.page;
	__atomic_store_n(&n->efd, efd, __ATOMIC_RELEASE);
	__atomic_store_n(&any_orig, n->orig, __ATOMIC_RELEASE);
	if (n->orig_bind != NULL)
		__atomic_store_n(&any_orig_bind, n->orig_bind, __ATOMIC_RELEASE);
	__atomic_store_n(&n->ctx, ctx, __ATOMIC_RELEASE);
	if (i >= notify_hi)
		__atomic_store_n(&notify_hi, i + 1, __ATOMIC_RELEASE);
	ctx->ops.post_send = post_send;
	if (n->orig_bind != NULL)
		ctx->ops.bind_mw = bind_mw;
	pthread_mutex_unlock(&notify_lock);
	iemu_dbg("context %p notifies (eventfd %d%s)", (void *)ctx, efd, np.bits != NULL ? ", naming its QPs" : "");
}

/* forget undoes setup for a context about to be closed: its post_send
 * back to the provider's, the slot free, the eventfd closed and the page
 * unmapped (a post racing the close of its own context is the program's
 * use after free, as it is without the preload). */
static void forget(struct ibv_context *ctx)
{
	struct notify *n;
	int efd;

	pthread_mutex_lock(&notify_lock);
	n = find(ctx);
	if (n == NULL) {
		pthread_mutex_unlock(&notify_lock);
		return;
	}
	ctx->ops.post_send = n->orig;
	if (n->orig_bind != NULL)
		ctx->ops.bind_mw = n->orig_bind;
	n->orig_bind = NULL;
	__atomic_store_n(&n->ctx, NULL, __ATOMIC_RELEASE);
	efd = __atomic_exchange_n(&n->efd, -1, __ATOMIC_ACQ_REL);
	if (efd >= 0)
		syscall(SYS_close, efd);
	notified_gone += __atomic_load_n(&n->counters[0], __ATOMIC_RELAXED);
	suppressed_gone += __atomic_load_n(&n->counters[1], __ATOMIC_RELAXED);
	syscall(SYS_munmap, n->page, (size_t)IEMU_PAGE);
	n->page = NULL;
	n->polling = NULL;
	n->counters = NULL;
	n->bits = NULL;
	n->nbits = 0;
	pthread_mutex_unlock(&notify_lock);
}

void iemu_notify_lock(void) { pthread_mutex_lock(&notify_lock); }
void iemu_notify_unlock(void) { pthread_mutex_unlock(&notify_lock); }

void iemu_notify_fd_closing(unsigned lo, unsigned hi)
{
	unsigned n = __atomic_load_n(&notify_hi, __ATOMIC_ACQUIRE), i;
	int moved;

	/* The fast path of close(): no eventfd in the range. */
	for (i = 0; i < n; i++) {
		int fd = __atomic_load_n(&notifies[i].efd, __ATOMIC_ACQUIRE);
		if (fd >= 0 && (unsigned)fd >= lo && (unsigned)fd <= hi)
			break;
	}
	if (i == n)
		return;
	pthread_mutex_lock(&notify_lock);
	for (i = 0; i < n; i++) {
		int fd = notifies[i].efd;
		if (fd < 0 || (unsigned)fd < lo || (unsigned)fd > hi)
			continue;
		/* The program closes a number it does not know is ours (a bug,
		 * or closefrom before exec). Keep the eventfd at another number
		 * when there is one above the range; otherwise the context is
		 * losing its socket too and may as well lose this. */
		moved = hi < (unsigned)INT32_MAX ? (int)syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, (long)hi + 1) : -1;
		__atomic_store_n(&notifies[i].efd, moved, __ATOMIC_RELEASE);
		iemu_dbg("the program closes the notification eventfd %d: %s %d", fd,
			 moved >= 0 ? "moved to" : "lost, was", moved >= 0 ? moved : fd);
	}
	pthread_mutex_unlock(&notify_lock);
}

void iemu_notify_report(void)
{
	uint64_t notified, suppressed;
	unsigned n = __atomic_load_n(&notify_hi, __ATOMIC_ACQUIRE);

	if (!iemu_env.debug || n == 0)
		return;
	notified = notified_gone;
	suppressed = suppressed_gone;
	for (unsigned i = 0; i < n; i++)
		if (notifies[i].ctx != NULL && notifies[i].counters != NULL) {
			notified += __atomic_load_n(&notifies[i].counters[0], __ATOMIC_RELAXED);
			suppressed += __atomic_load_n(&notifies[i].counters[1], __ATOMIC_RELAXED);
		}
	iemu_dbg("posts: %llu notified, %llu needed none (the daemon polled), %llu notifications failed",
		 (unsigned long long)notified, (unsigned long long)suppressed,
		 (unsigned long long)__atomic_load_n(&notify_errors, __ATOMIC_RELAXED));
}

/* ---------------------------------------------------------------------
 * libibverbs interposers. iemu.map gives them the version IBVERBS_1.1, the
 * one every program since rdma-core's first releases binds
 * (libibverbs/libibverbs.map.in): a binary bound to the IBVERBS_1.0
 * compatibility symbols (another struct layout) goes to libibverbs
 * untouched.
 */

static void *real_ibv_open_device, *real_ibv_close_device;

static void *next_verbs(void **slot, const char *name)
{
	void *f = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
	if (f == NULL) {
		f = dlvsym(RTLD_NEXT, name, "IBVERBS_1.1");
		if (f == NULL) {
			/* libibverbs loaded RTLD_LOCAL by a dlopen'ed object (a
			 * Python extension: pyverbs) is not in the global scope
			 * RTLD_NEXT searches, yet the program's call reached us:
			 * take the copy that is loaded, never load one. */
			void *h = dlopen("libibverbs.so.1", RTLD_LAZY | RTLD_NOLOAD);
			if (h != NULL) {
				f = dlvsym(h, name, "IBVERBS_1.1");
				dlclose(h);
			}
		}
		__atomic_store_n(slot, f, __ATOMIC_RELEASE);
	}
	return f;
}

IEMU_API struct ibv_context *ibv_open_device(void *device)
{
	struct ibv_context *(*f)(void *) = (struct ibv_context * (*)(void *))
		next_verbs(&real_ibv_open_device, "ibv_open_device");
	struct ibv_context *ctx;

	if (f == NULL) {
		errno = ENOSYS;
		return NULL;
	}
	ctx = f(device);
	if (ctx != NULL && iemu_env.active) {
		int err = errno;
		setup(ctx);
		errno = err;
	}
	return ctx;
}

IEMU_API int ibv_close_device(struct ibv_context *ctx)
{
	int (*f)(struct ibv_context *) = (int (*)(struct ibv_context *))
		next_verbs(&real_ibv_close_device, "ibv_close_device");

	if (f == NULL)
		return ENOSYS;
	if (ctx != NULL)
		forget(ctx);
	return f(ctx);
}
