/* libirdma-emu-preload: NETLINK_RDMA sockets answered by the daemon.
 *
 * socket(AF_NETLINK, SOCK_RAW|SOCK_DGRAM, NETLINK_RDMA) returns a
 * SOCK_SEQPACKET connection to the daemon's attach socket whose HELLO
 * carries IEMU_HELLO_NETLINK (docs/attach.md "Netlink connections"). After
 * the HELLO reply the connection is the netlink socket: every datagram the
 * program sends reaches the daemon unchanged and every datagram the daemon
 * sends is a netlink reply the program reads unchanged, so send, recv,
 * poll, select, epoll, MSG_PEEK, MSG_TRUNC and non-blocking reads are the
 * socket's own. The preload holds no netlink logic: it only makes the
 * socket look like a netlink socket where a unix socket differs —
 * bind/getsockname/connect/getpeername speak sockaddr_nl, recvmsg and
 * recvfrom report the kernel (nl_pid 0) as the sender, SOL_NETLINK options
 * are accepted, SO_DOMAIN/SO_PROTOCOL/SO_TYPE answer as netlink, and a send
 * to a daemon that is gone fails with ECONNREFUSED instead of raising
 * SIGPIPE. Without the daemon, or with one that predates netlink
 * (no IEMU_FEATURE_NETLINK in the HELLO reply), or with
 * IRDMA_EMU_NETLINK=0, the program gets the host's real netlink socket.
 *
 * Descriptors are recognised like the device's (preload.c): a table by
 * number, confirmed by the socket's identity (st_dev/st_ino), so a number
 * closed behind our back and reused is never mistaken for ours; no close
 * hook is needed. Only the descriptor socket() returned is ours: a dup of
 * it behaves as the unix socket it is for the calls above.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "iemu.h"

#ifndef NETLINK_RDMA
#define NETLINK_RDMA 20
#endif
#ifndef SOL_NETLINK
#define SOL_NETLINK 270
#endif

#define NL_MAX_FD 65536

struct nlsock {
	uint64_t dev, ino; /* identity of the connection; ino 0: not ours */
	uint32_t port;     /* nl_pid: what getsockname reports, nlmsg_pid of the replies */
	uint32_t groups;   /* nl_groups as bound (no events are sent) */
	int bound;         /* the program bound it or sent on it: its port is fixed */
};

static struct nlsock *nl_tab; /* NL_MAX_FD entries, allocated with the first socket */
static pthread_mutex_t nl_mu = PTHREAD_MUTEX_INITIALIZER;
static int nl_first_used;     /* the process's pid was given as a port id */
static uint32_t nl_rover = (uint32_t)-4096; /* netlink_autobind's next negative id */

static void *real_socket, *real_bind, *real_getsockname, *real_getpeername, *real_connect;
static void *real_setsockopt, *real_getsockopt, *real_recvmsg, *real_recvfrom;
static void *real_send, *real_sendto, *real_sendmsg;

/* ours returns the socket's entry if fd is one of our netlink sockets. */
static struct nlsock *ours(int fd)
{
	struct nlsock *t = __atomic_load_n(&nl_tab, __ATOMIC_ACQUIRE);
	struct stat st;

	if (__builtin_expect(t == NULL, 1) || fd < 0 || fd >= NL_MAX_FD)
		return NULL;
	if (__atomic_load_n(&t[fd].ino, __ATOMIC_ACQUIRE) == 0)
		return NULL;
	if (syscall(SYS_fstat, fd, &st) != 0 || (uint64_t)st.st_ino != t[fd].ino ||
	    (uint64_t)st.st_dev != t[fd].dev) {
		__atomic_store_n(&t[fd].ino, 0, __ATOMIC_RELEASE); /* closed and reused */
		return NULL;
	}
	return &t[fd];
}

static uint32_t next_port(void)
{
	uint32_t p;

	pthread_mutex_lock(&nl_mu);
	if (!nl_first_used) {
		nl_first_used = 1;
		p = (uint32_t)syscall(SYS_getpid);
	} else {
		p = nl_rover--;
	}
	pthread_mutex_unlock(&nl_mu);
	return p;
}

static int full_send(int fd, const void *b, size_t n)
{
	ssize_t r;

	do
		r = (ssize_t)syscall(SYS_sendto, fd, b, n, MSG_NOSIGNAL, NULL, 0);
	while (r < 0 && errno == EINTR);
	return r == (ssize_t)n ? 0 : -1;
}

/* nl_open connects to the daemon and says HELLO for a netlink socket
 * with port id port. Returns the descriptor or -1 (errno kept for the
 * debug message). */
static int nl_open(int type, uint32_t port)
{
	unsigned char msg[IEMU_HDR + 80], rep[IEMU_HDR + 80 + 16];
	struct sockaddr_un sa;
	struct stat st;
	uint32_t v;
	ssize_t r;
	int fd, i, cloexec = (type & SOCK_CLOEXEC) ? SOCK_CLOEXEC : 0;

	fd = (int)syscall(SYS_socket, AF_UNIX, SOCK_SEQPACKET | cloexec, 0);
	if (fd < 0)
		return -1;
	if (fd >= NL_MAX_FD)
		goto fail;
	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path, iemu_env.sock, strlen(iemu_env.sock) + 1);
	do
		r = syscall(SYS_connect, fd, &sa, sizeof sa);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		goto fail;

	memset(msg, 0, sizeof msg);
	v = IEMU_MAGIC;
	memcpy(msg, &v, 4);
	msg[4] = IEMU_T_HELLO;
	v = 80;
	memcpy(msg + 12, &v, 4);
	v = IEMU_VERSION;
	memcpy(msg + IEMU_HDR, &v, 4);
	v = (uint32_t)syscall(SYS_getpid);
	memcpy(msg + IEMU_HDR + 4, &v, 4);
	v = IEMU_HELLO_NETLINK;
	memcpy(msg + IEMU_HDR + 8, &v, 4);
	memcpy(msg + IEMU_HDR + 12, &port, 4);
	for (i = 0; program_invocation_short_name != NULL && i < IEMU_NAME - 1 &&
		    program_invocation_short_name[i] != 0;
	     i++)
		msg[IEMU_HDR + 16 + i] = (unsigned char)program_invocation_short_name[i];
	if (full_send(fd, msg, sizeof msg) != 0)
		goto fail;
	do
		r = (ssize_t)syscall(SYS_recvfrom, fd, rep, sizeof rep, 0, NULL, NULL);
	while (r < 0 && errno == EINTR);
	if (r != (ssize_t)(IEMU_HDR + 80)) {
		errno = r < 0 ? errno : EPROTO;
		goto fail;
	}
	memcpy(&v, rep + IEMU_HDR, 4); /* status */
	if (v != 0) {
		errno = -(int32_t)v;
		goto fail;
	}
	memcpy(&v, rep + IEMU_HDR + 12, 4); /* features */
	if (!(v & IEMU_FEATURE_NETLINK)) {
		errno = EPROTONOSUPPORT; /* a daemon that predates netlink */
		goto fail;
	}
	if ((type & SOCK_NONBLOCK) && syscall(SYS_fcntl, fd, F_SETFL, O_RDWR | O_NONBLOCK) != 0)
		goto fail;
	if (syscall(SYS_fstat, fd, &st) != 0)
		goto fail;

	pthread_mutex_lock(&nl_mu);
	if (nl_tab == NULL) {
		struct nlsock *t = calloc(NL_MAX_FD, sizeof *t);
		if (t == NULL) {
			pthread_mutex_unlock(&nl_mu);
			errno = ENOMEM;
			goto fail;
		}
		__atomic_store_n(&nl_tab, t, __ATOMIC_RELEASE);
	}
	nl_tab[fd].dev = (uint64_t)st.st_dev;
	nl_tab[fd].port = port;
	nl_tab[fd].groups = 0;
	nl_tab[fd].bound = 0;
	__atomic_store_n(&nl_tab[fd].ino, (uint64_t)st.st_ino, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&nl_mu);
	iemu_dbg("netlink: NETLINK_RDMA socket %d answered by the daemon (port %u)", fd, port);
	return fd;

fail:
	i = errno;
	syscall(SYS_close, fd);
	errno = i;
	return -1;
}

static int netlink_wanted(void)
{
	const char *d;

	iemu_init();
	if (!iemu_env.active)
		return 0;
	d = getenv("IRDMA_EMU_NETLINK");
	return !(d != NULL && strcmp(d, "0") == 0);
}

IEMU_API int socket(int domain, int type, int protocol)
{
	int base = type & ~(SOCK_CLOEXEC | SOCK_NONBLOCK);

	if (UNLIKELY(domain == AF_NETLINK && protocol == NETLINK_RDMA &&
		     (base == SOCK_RAW || base == SOCK_DGRAM)) &&
	    netlink_wanted()) {
		int fd = nl_open(type, next_port());
		if (fd >= 0)
			return fd;
		iemu_dbg("netlink: the daemon does not answer NETLINK_RDMA (%s): the host's socket",
			 strerror(errno));
	}
	return REAL(socket)(domain, type, protocol);
}

static void put_nl(struct sockaddr *addr, socklen_t *len, uint32_t pid, uint32_t groups)
{
	struct sockaddr_nl nl;

	if (addr == NULL || len == NULL)
		return;
	memset(&nl, 0, sizeof nl);
	nl.nl_family = AF_NETLINK;
	nl.nl_pid = pid;
	nl.nl_groups = groups;
	memcpy(addr, &nl, *len < sizeof nl ? *len : sizeof nl);
	*len = sizeof nl;
}

/* port_taken reports whether another of our sockets has port id port
 * (netlink_insert's -EADDRINUSE). */
static int port_taken(int fd, uint32_t port)
{
	int i;

	for (i = 0; i < NL_MAX_FD; i++)
		if (i != fd && ours(i) != NULL && nl_tab[i].port == port)
			return 1;
	return 0;
}

/* rebind gives the unbound socket fd the port id the program chose: a new
 * connection whose HELLO names it takes the descriptor's place (dup3 keeps
 * the number and close-on-exec, the file status flags are copied), so the
 * daemon stamps its replies with that id, as the kernel does. */
static int rebind(int fd, uint32_t port)
{
	int fdfl = (int)syscall(SYS_fcntl, fd, F_GETFD);
	int fl = (int)syscall(SYS_fcntl, fd, F_GETFL);
	int nfd, e;

	if (fdfl < 0 || fl < 0)
		return -1;
	nfd = nl_open(SOCK_RAW | ((fdfl & FD_CLOEXEC) ? SOCK_CLOEXEC : 0), port);
	if (nfd < 0)
		return -1;
	if (syscall(SYS_fcntl, nfd, F_SETFL, fl) != 0 ||
	    syscall(SYS_dup3, nfd, fd, (fdfl & FD_CLOEXEC) ? O_CLOEXEC : 0) < 0) {
		e = errno;
		__atomic_store_n(&nl_tab[nfd].ino, 0, __ATOMIC_RELEASE);
		syscall(SYS_close, nfd);
		errno = e;
		return -1;
	}
	pthread_mutex_lock(&nl_mu);
	nl_tab[fd].dev = nl_tab[nfd].dev;
	nl_tab[fd].port = port;
	nl_tab[fd].groups = 0;
	nl_tab[fd].bound = 1;
	__atomic_store_n(&nl_tab[fd].ino, nl_tab[nfd].ino, __ATOMIC_RELEASE);
	__atomic_store_n(&nl_tab[nfd].ino, 0, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&nl_mu);
	syscall(SYS_close, nfd);
	iemu_dbg("netlink: socket %d bound to port %u", fd, port);
	return 0;
}

IEMU_API int bind(int fd, const struct sockaddr *addr, socklen_t len)
{
	struct nlsock *s = ours(fd);
	struct sockaddr_nl nl;

	if (s == NULL)
		return REAL(bind)(fd, addr, len);
	/* netlink_bind: a sockaddr_nl. Port id 0 keeps the one the socket
	 * was given (netlink_autobind's); another one is taken if the socket
	 * is not bound yet (libnl binds to a port of its own choosing,
	 * nl_connect) and nobody has it, else -EINVAL (a bound socket) or
	 * -EADDRINUSE. */
	if (addr == NULL || len < sizeof nl) {
		errno = EINVAL;
		return -1;
	}
	memcpy(&nl, addr, sizeof nl);
	if (nl.nl_family != AF_NETLINK) {
		errno = EINVAL;
		return -1;
	}
	if (nl.nl_pid != 0 && nl.nl_pid != s->port) {
		if (__atomic_load_n(&s->bound, __ATOMIC_ACQUIRE)) {
			errno = EINVAL;
			return -1;
		}
		if (port_taken(fd, nl.nl_pid)) {
			errno = EADDRINUSE;
			return -1;
		}
		if (rebind(fd, nl.nl_pid) != 0)
			return -1;
		s = &nl_tab[fd];
	}
	__atomic_store_n(&s->bound, 1, __ATOMIC_RELEASE);
	s->groups = nl.nl_groups;
	return 0;
}

IEMU_API int getsockname(int fd, struct sockaddr *addr, socklen_t *len)
{
	struct nlsock *s = ours(fd);

	if (s == NULL)
		return REAL(getsockname)(fd, addr, len);
	put_nl(addr, len, s->port, s->groups);
	return 0;
}

IEMU_API int getpeername(int fd, struct sockaddr *addr, socklen_t *len)
{
	if (ours(fd) == NULL)
		return REAL(getpeername)(fd, addr, len);
	put_nl(addr, len, 0, 0); /* the kernel */
	return 0;
}

IEMU_API int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	struct nlsock *s = ours(fd);

	if (s == NULL)
		return REAL(connect)(fd, addr, len);
	/* netlink_connect: AF_UNSPEC disconnects, AF_NETLINK sets the default
	 * destination; only the kernel (nl_pid 0) is reachable here. */
	if (addr == NULL || len < sizeof(sa_family_t)) {
		errno = EINVAL;
		return -1;
	}
	if (addr->sa_family == AF_UNSPEC)
		return 0;
	if (addr->sa_family != AF_NETLINK || len < sizeof(struct sockaddr_nl)) {
		errno = EINVAL;
		return -1;
	}
	return 0;
}

IEMU_API int setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
	if (level != SOL_NETLINK || ours(fd) == NULL)
		return REAL(setsockopt)(fd, level, name, val, len);
	/* NETLINK_EXT_ACK, NETLINK_CAP_ACK, NETLINK_GET_STRICT_CHK, group
	 * membership: accepted. The daemon always caps its acknowledgements
	 * (NLM_F_CAPPED) and sends no events. */
	if (val == NULL || len < sizeof(int)) {
		errno = EINVAL;
		return -1;
	}
	return 0;
}

IEMU_API int getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	int v;

	if ((level != SOL_NETLINK && level != SOL_SOCKET) || ours(fd) == NULL)
		return REAL(getsockopt)(fd, level, name, val, len);
	if (level == SOL_SOCKET) {
		switch (name) {
		case SO_DOMAIN:
			v = AF_NETLINK;
			break;
		case SO_PROTOCOL:
			v = NETLINK_RDMA;
			break;
		case SO_TYPE:
			v = SOCK_RAW;
			break;
		default:
			return REAL(getsockopt)(fd, level, name, val, len);
		}
	} else {
		v = 0;
	}
	if (val == NULL || len == NULL || *len < sizeof v) {
		errno = EINVAL;
		return -1;
	}
	memcpy(val, &v, sizeof v);
	*len = sizeof v;
	return 0;
}

IEMU_API ssize_t recvmsg(int fd, struct msghdr *m, int flags)
{
	void *name;
	socklen_t namelen;
	ssize_t r;

	if (ours(fd) == NULL || m == NULL)
		return REAL(recvmsg)(fd, m, flags);
	name = m->msg_name;
	namelen = m->msg_namelen;
	m->msg_name = NULL;
	m->msg_namelen = 0;
	r = REAL(recvmsg)(fd, m, flags);
	m->msg_name = name;
	m->msg_namelen = namelen;
	if (r >= 0 && name != NULL)
		put_nl(name, &m->msg_namelen, 0, 0);
	return r;
}

IEMU_API ssize_t recvfrom(int fd, void *buf, size_t n, int flags, struct sockaddr *src, socklen_t *srclen)
{
	ssize_t r;

	if (ours(fd) == NULL)
		return REAL(recvfrom)(fd, buf, n, flags, src, srclen);
	r = REAL(recvfrom)(fd, buf, n, flags, NULL, NULL);
	if (r >= 0 && src != NULL)
		put_nl(src, srclen, 0, 0);
	return r;
}

/* Sends: the unix socket ignores the destination (the daemon is the
 * kernel); a daemon gone must not raise SIGPIPE, which netlink never does. */
static ssize_t sent(ssize_t r)
{
	if (r < 0 && errno == EPIPE)
		errno = ECONNREFUSED;
	return r;
}

/* sending binds the socket for good (netlink_sendmsg autobinds). */
static int sending(int fd)
{
	struct nlsock *s = ours(fd);

	if (s == NULL)
		return 0;
	__atomic_store_n(&s->bound, 1, __ATOMIC_RELEASE);
	return 1;
}

IEMU_API ssize_t send(int fd, const void *buf, size_t n, int flags)
{
	if (!sending(fd))
		return REAL(send)(fd, buf, n, flags);
	return sent(REAL(send)(fd, buf, n, flags | MSG_NOSIGNAL));
}

IEMU_API ssize_t sendto(int fd, const void *buf, size_t n, int flags, const struct sockaddr *dst, socklen_t dstlen)
{
	if (!sending(fd))
		return REAL(sendto)(fd, buf, n, flags, dst, dstlen);
	return sent(REAL(sendto)(fd, buf, n, flags | MSG_NOSIGNAL, NULL, 0));
}

IEMU_API ssize_t sendmsg(int fd, const struct msghdr *m, int flags)
{
	struct msghdr c;

	if (m == NULL || !sending(fd))
		return REAL(sendmsg)(fd, m, flags);
	c = *m;
	c.msg_name = NULL;
	c.msg_namelen = 0;
	return sent(REAL(sendmsg)(fd, &c, flags | MSG_NOSIGNAL));
}
