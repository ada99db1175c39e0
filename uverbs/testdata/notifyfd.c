/* notifyfd: a program that opens the device through the real libibverbs
 * (under the preload) and checks what the preload does with the
 * notification eventfd NOTIFY gave it (docs/preload.md "Wake-up on post"):
 * the context has one; a close() of its number by a careless program
 * succeeds and the eventfd moves to another number rather than vanish;
 * dup2() over the new number likewise; ibv_close_device closes it. Prints
 * "ok" and exits 0, or says what failed and exits 1. No libibverbs-dev:
 * the few prototypes are declared here. */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct ibv_device;
struct ibv_context;
struct ibv_device **ibv_get_device_list(int *num);
struct ibv_context *ibv_open_device(struct ibv_device *device);
int ibv_close_device(struct ibv_context *context);

/* eventfds lists this process's eventfd descriptors. */
static int eventfds(int *out, int max)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (d == NULL)
		return -1;
	while ((e = readdir(d)) != NULL) {
		char p[300], l[64];
		ssize_t k;
		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof p, "/proc/self/fd/%s", e->d_name);
		k = readlink(p, l, sizeof l - 1);
		if (k < 0)
			continue;
		l[k] = 0;
		if (strcmp(l, "anon_inode:[eventfd]") == 0 && n < max)
			out[n++] = atoi(e->d_name);
	}
	closedir(d);
	return n;
}

static int fail(const char *what)
{
	printf("FAIL: %s\n", what);
	return 1;
}

int main(void)
{
	int num = 0, fds[8], n, first, second, spare;
	struct ibv_device **list = ibv_get_device_list(&num);
	struct ibv_context *ctx;

	if (list == NULL || num < 1)
		return fail("no device");
	ctx = ibv_open_device(list[0]);
	if (ctx == NULL)
		return fail("ibv_open_device");
	if ((n = eventfds(fds, 8)) != 1)
		return fail("not exactly one eventfd after ibv_open_device");
	first = fds[0];
	if (close(first) != 0)
		return fail("close of the eventfd's number");
	if ((n = eventfds(fds, 8)) != 1 || fds[0] == first)
		return fail("the eventfd did not move on close");
	second = fds[0];
	spare = dup(0);
	if (spare < 0 || dup2(spare, second) != second)
		return fail("dup2 over the eventfd's number");
	close(second);
	close(spare);
	if ((n = eventfds(fds, 8)) != 1 || fds[0] == second)
		return fail("the eventfd did not move on dup2");
	if (ibv_close_device(ctx) != 0)
		return fail("ibv_close_device");
	if ((n = eventfds(fds, 8)) != 0)
		return fail("an eventfd left after ibv_close_device");
	printf("ok\n");
	return 0;
}
