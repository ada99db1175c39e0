/* libirdma-emu-preload: internal declarations shared by the C files.
 *
 * The preload stands in for the kernel's uverbs character device; see
 * docs/preload.md for what it does and docs/attach.md for the protocol it
 * speaks. Only the interposed libc symbols are exported
 * (-fvisibility=hidden; IEMU_API marks them).
 */
#ifndef IEMU_H
#define IEMU_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the attach protocol is little-endian; big-endian hosts are not supported"
#endif
#if __SIZEOF_POINTER__ != 8
#error "64-bit (LP64) only"
#endif

#define IEMU_API __attribute__((visibility("default")))

/* Attach protocol (docs/attach.md). */
#define IEMU_MAGIC 0x41454449u
#define IEMU_VERSION 1u
#define IEMU_HDR 16u
#define IEMU_MAX_MSG 65536u
#define IEMU_MAX_FDS 8
#define IEMU_NAME 64
enum { IEMU_T_HELLO = 1, IEMU_T_CMD = 2, IEMU_T_MMAP = 3, IEMU_T_MEM = 4, IEMU_T_NOTIFY = 5 };
#define IEMU_FEATURE_NOTIFY 1u /* HELLO reply features: NOTIFY answered */
#define IEMU_NOTIFY_QP_BITS 1u /* NOTIFY flags: notifications name the QP */
#define IEMU_FEATURE_RDMACM 2u /* HELLO reply features: /dev/infiniband/rdma_cm served */
#define IEMU_CM_IDX 100000     /* the fake index of /dev/infiniband/rdma_cm */
#define IEMU_HELLO_RDMACM 1u   /* HELLO flags: this connection is an rdma_cm channel */
#define IEMU_FEATURE_NETLINK 4u /* HELLO reply features: this connection is a netlink socket (netlink.c) */
#define IEMU_HELLO_NETLINK 2u   /* HELLO flags: this connection is a NETLINK_RDMA socket */

#define IEMU_PAGE 4096u

/* IRDMA_EMU_ARENA: "0" off; "rings" the provider's ring allocations only;
 * unset, "1" or "all" also the program's page-aligned buffers of at least
 * IRDMA_EMU_ARENA_MIN bytes (default IEMU_ARENA_MIN_DEFAULT). */
enum { IEMU_ARENA_OFF = 0, IEMU_ARENA_RINGS = 1, IEMU_ARENA_ALL = 2 };
#define IEMU_ARENA_MIN_DEFAULT 4096u

/* Process-wide state, set once by iemu_init. */
struct iemu_env {
	int active;            /* IRDMA_EMU_SOCKET and SYSFS_PATH both set */
	int debug;             /* IRDMA_EMU_DEBUG */
	int arena;             /* IEMU_ARENA_*: who gets the shared arena (IRDMA_EMU_ARENA) */
	size_t arena_min;      /* smallest program buffer served from it (IRDMA_EMU_ARENA_MIN) */
	int notify;            /* wrap post_send to notify a parked daemon (IRDMA_EMU_NOTIFY != 0) */
	char sock[108];        /* sockaddr_un path */
	char sysfs[512];       /* SYSFS_PATH */
};
extern struct iemu_env iemu_env;
extern pid_t iemu_pid; /* this process; updated in a fork child */

void iemu_init(void);
void iemu_dbg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Real libc functions (the next definition after ours), looked up once. */
void *iemu_real_slow(void **slot, const char *name) __attribute__((noinline));
static inline void *iemu_real(void **slot, const char *name)
{
	void *f = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
	return __builtin_expect(f != NULL, 1) ? f : iemu_real_slow(slot, name);
}
#define REAL(fn) ((__typeof__(&fn))iemu_real((void **)&real_##fn, #fn))
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

/* Arena (arena.c). The arena lock orders before the fd-table lock. */
void iemu_arena_init(void);
void iemu_arena_lock(void);
void iemu_arena_unlock(void);
/* With the arena lock held: the part of the arena that new connections are
 * told about with one MEM. Returns 0 when there is none. */
int iemu_arena_extent(uintptr_t *addr, size_t *len, uint64_t *fdoff, int *memfd);
void iemu_arena_fork_child(void);
void iemu_arena_report(void);

/* preload.c: NOTIFY on the connection behind the device descriptor fd
 * (docs/attach.md), asking that notifications name the QP. On success
 * *efd is the eventfd and *np the notify page mapped read-write with its
 * words. Returns 0, -ENOTSUP when fd is not ours or the daemon does not
 * offer NOTIFY, or another negative errno. */
/* The notify page's words, as NOTIFY's reply names them: bits is NULL
 * (nbits 0) when the daemon names no QP (docs/attach.md "NOTIFY"). */
struct iemu_notify_page {
	void *page;
	volatile uint32_t *polling;
	uint64_t *counters;
	uint64_t *bits;
	uint32_t nbits;
};
int iemu_notify_request(int fd, int *efd, struct iemu_notify_page *np);

/* notify.c: descriptors in [lo, hi] are about to be closed (or replaced by
 * dup2) by the program: move a notification eventfd out of the way. */
void iemu_notify_fd_closing(unsigned lo, unsigned hi);
void iemu_notify_report(void);
void iemu_notify_lock(void); /* fork: after the fd-table lock */
void iemu_notify_unlock(void);

/* preload.c: announce a new arena piece to every connection of this process
 * (called with the arena lock held). */
void iemu_announce_mem(uintptr_t addr, size_t len, uint64_t fdoff, int memfd);

#endif
