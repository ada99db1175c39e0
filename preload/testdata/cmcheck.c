/* cmcheck: /dev/infiniband/rdma_cm through the preload, with the raw
 * rdma_ucm commands (no librdmacm): the fake character device, EAGAIN with
 * O_NONBLOCK, a blocked GET_EVENT ended by a signal (EINTR), poll and
 * epoll readiness following the event queue, MIGRATE_ID naming a channel
 * by descriptor, a bad response pointer (EFAULT), and a GET_EVENT that
 * waits on while another thread closes the channel. Prints "ok" or dies
 * with the failed check. argv[1]: an address of the device. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHECK(c)                                                              \
	do {                                                                  \
		if (!(c)) {                                                   \
			fprintf(stderr, "cmcheck: line %d: %s (errno %d %s)\n", __LINE__, #c, errno, strerror(errno)); \
			exit(1);                                              \
		}                                                             \
	} while (0)

struct hdr { uint32_t cmd; uint16_t in, out; };

static ssize_t cmd(int fd, uint32_t c, void *body, uint16_t in, uint16_t out)
{
	unsigned char b[512];
	struct hdr h = { c, in, out };
	memcpy(b, &h, 8);
	memcpy(b + 8, body, in);
	return write(fd, b, 8 + in);
}

static uint32_t create_id(int fd, uint64_t uid)
{
	unsigned char b[24] = { 0 };
	uint32_t id = ~0u;
	uint64_t resp = (uintptr_t)&id;
	uint16_t ps = 0x0106;
	memcpy(b, &uid, 8);
	memcpy(b + 8, &resp, 8);
	memcpy(b + 16, &ps, 2);
	CHECK(cmd(fd, 0, b, 24, 4) == 32);
	return id;
}

static void resolve(int fd, uint32_t id, const char *ip)
{
	unsigned char b[64] = { 0 };
	struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons(9) };
	uint32_t ms = 2000;
	inet_pton(AF_INET, ip, &dst.sin_addr);
	memcpy(b + 28, &dst, sizeof dst);
	memcpy(b + 56, &id, 4);
	memcpy(b + 60, &ms, 4);
	CHECK(cmd(fd, 3, b, 64, 0) == 72);
}

static ssize_t get_event(int fd, void *resp)
{
	uint64_t r = (uintptr_t)resp;
	return cmd(fd, 12, &r, 8, 336);
}

static void onalarm(int sig) { (void)sig; }

/* waiter waits for an event on wfd; werr: -1 while it waits, then 0 or
 * the errno it ended with. */
static int wfd;
static volatile int werr = -1;

static void *waiter(void *arg)
{
	unsigned char ev[336];
	ssize_t r;

	(void)arg;
	errno = 0;
	r = get_event(wfd, ev);
	werr = r == -1 ? errno : 0;
	return NULL;
}

int main(int argc, char **argv)
{
	unsigned char ev[336];
	struct stat st, st2;
	struct pollfd p;
	struct epoll_event ee = { .events = EPOLLIN }, got;
	struct sigaction sa;
	uint32_t id, ev_type;
	int fd, fd2, ep;

	CHECK(argc == 2);
	CHECK(stat("/dev/infiniband/rdma_cm", &st) == 0 && S_ISCHR(st.st_mode));
	fd = open("/dev/infiniband/rdma_cm", O_RDWR | O_CLOEXEC);
	CHECK(fd >= 0);
	CHECK(fstat(fd, &st2) == 0 && S_ISCHR(st2.st_mode) && st2.st_rdev == st.st_rdev && st2.st_ino == st.st_ino);

	/* Nothing queued: not readable, EAGAIN when non-blocking. */
	p.fd = fd;
	p.events = POLLIN;
	CHECK(poll(&p, 1, 0) == 0);
	CHECK(fcntl(fd, F_SETFL, O_NONBLOCK) == 0);
	errno = 0;
	CHECK(get_event(fd, ev) == -1 && errno == EAGAIN);
	CHECK(fcntl(fd, F_SETFL, 0) == 0);

	/* Blocking: a signal without SA_RESTART ends the wait with EINTR. */
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = onalarm;
	CHECK(sigaction(SIGALRM, &sa, NULL) == 0);
	alarm(1);
	errno = 0;
	CHECK(get_event(fd, ev) == -1 && errno == EINTR);

	/* An event makes the descriptor readable for poll and epoll. */
	ep = epoll_create1(EPOLL_CLOEXEC);
	CHECK(ep >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ee) == 0);
	CHECK(epoll_wait(ep, &got, 1, 0) == 0);
	id = create_id(fd, 0x1234);
	resolve(fd, id, argv[1]);
	CHECK(epoll_wait(ep, &got, 1, 5000) == 1);
	CHECK(poll(&p, 1, 0) == 1 && (p.revents & POLLIN));
	/* A response the kernel cannot write is EFAULT, and the event stays. */
	errno = 0;
	CHECK(get_event(fd, (void *)8) == -1 && errno == EFAULT);
	CHECK(poll(&p, 1, 0) == 1);
	CHECK(get_event(fd, ev) == 16);
	memcpy(&ev_type, ev + 12, 4);
	CHECK(ev_type == 0); /* ADDR_RESOLVED */
	CHECK(poll(&p, 1, 0) == 0);

	/* MIGRATE_ID names the old channel by its descriptor. */
	fd2 = open("/dev/infiniband/rdma_cm", O_RDWR);
	CHECK(fd2 >= 0);
	{
		unsigned char b[16];
		uint32_t n = ~0u, ofd = (uint32_t)fd, bad = 1000;
		uint64_t r = (uintptr_t)&n;
		memcpy(b, &r, 8);
		memcpy(b + 8, &id, 4);
		memcpy(b + 12, &bad, 4);
		errno = 0;
		CHECK(cmd(fd2, 18, b, 16, 4) == -1 && errno == ENOENT); /* not an open descriptor */
		memcpy(b + 12, &ofd, 4);
		CHECK(cmd(fd2, 18, b, 16, 4) == 24 && n == 1);
	}
	/* Unknown command and short write: EINVAL. */
	errno = 0;
	CHECK(cmd(fd, 99, ev, 0, 0) == -1 && errno == EINVAL);
	errno = 0;
	CHECK(write(fd, ev, 4) == -1 && errno == EINVAL);
	close(ep);
	close(fd);
	close(fd2);

	/* Last: a channel the main thread closes while another thread waits
	 * for an event on it, then the process exits (rping's teardown). The
	 * kernel's wait holds the file and goes on until the exit ends the
	 * thread; it reports nothing the program would act on. */
	{
		pthread_t th;

		wfd = open("/dev/infiniband/rdma_cm", O_RDWR | O_CLOEXEC);
		CHECK(wfd >= 0);
		CHECK(pthread_create(&th, NULL, waiter, NULL) == 0);
		usleep(200000);
		CHECK(werr == -1);
		close(wfd);
		usleep(300000);
		CHECK(werr == -1);
	}
	printf("ok\n");
	exit(0); /* with the waiter still waiting */
}
