/*
 * bigbuf.c - a small stack of freed block-sized buffers, handed out again
 * before new ones are mapped (see bigbuf.h for why).
 */
#include "lib/bigbuf.h"

#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>

/* Leaf lock; nothing is called while holding it. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static void *kept[BIGBUF_KEEP]; /* protected by lock */
static size_t kept_size[BIGBUF_KEEP];
static int nkept;

void *bigbuf_alloc(size_t n)
{
	if (n < BIGBUF_MIN)
		return malloc(n ? n : 1);
	pthread_mutex_lock(&lock);
	/* the newest that fits, and not twice too big: a 16 MiB buffer is
	 * not spent on a 1 MiB block */
	for (int i = nkept - 1; i >= 0; i--) {
		if (kept_size[i] < n || kept_size[i] / 2 > n)
			continue;
		void *p = kept[i];
		kept[i] = kept[nkept - 1];
		kept_size[i] = kept_size[nkept - 1];
		nkept--;
		pthread_mutex_unlock(&lock);
		return p;
	}
	pthread_mutex_unlock(&lock);
	/* page-aligned, so that a block can be written with O_DIRECT */
	void *p;
	return posix_memalign(&p, BIGBUF_ALIGN, n) ? NULL : p;
}

void bigbuf_free(void *p)
{
	if (!p)
		return;
	size_t size = malloc_usable_size(p);
	if (size >= BIGBUF_MIN) {
		pthread_mutex_lock(&lock);
		if (nkept < BIGBUF_KEEP) {
			kept[nkept] = p;
			kept_size[nkept++] = size;
			p = NULL;
		}
		pthread_mutex_unlock(&lock);
	}
	free(p);
}
