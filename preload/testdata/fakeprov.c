/* A stand-in for libirdma's ring allocations (irdma_alloc_hw_buf): built as
 * libirdma-fake.so so that the preload's caller check sees "libirdma" in
 * the object's name. Like irdma_alloc_hw_buf, it does more after memalign
 * returns, so the call is not compiled as a tail call (a tail call would
 * make memalign's return address the caller's). */
#include <malloc.h>
#include <stdlib.h>

int fake_allocs;

void *fake_hw_alloc(size_t size)
{
	void *buf = memalign(4096, size);

	if (buf != NULL)
		fake_allocs++;
	return buf;
}

void fake_hw_free(void *p)
{
	free(p);
	fake_allocs--;
}
