/*
 * closer.c - batched releases of closed files (see closer.h): one thread
 * that sleeps while releases gather and sends them as one script call.
 */
#include "fs/vfs/closer.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/log.h"

#define CLOSER_BATCH 512 /* inodes per script call: a few ms of Redis */

struct closer {
	struct meta *m;
	unsigned delay_ms;
	void (*freed)(void *arg);
	void *arg;
	pthread_t thread;

	pthread_mutex_t lock; /* leaf */
	pthread_cond_t cond;  /* the queue became non-empty, or stop */
	uint64_t *q;	      /* protected by lock */
	size_t n, cap;	      /* protected by lock */
	int stop;	      /* protected by lock */
};

static void release(struct closer *c, const uint64_t *inos, size_t n)
{
	size_t freed = 0;
	int err = meta_files_release(c->m, inos, n, &freed);

	/* the opens stay registered until this client's session ends;
	 * META_EGONE: the volume went from under this client, which said so,
	 * and nothing of it is registered in what is there now */
	if (err && err != META_EGONE)
		log_err("cannot release %zu closed files (first inode %llu): "
			"%s",
			n, (unsigned long long)inos[0], gr_strerror(err));
	if (freed && c->freed)
		c->freed(c->arg);
}

static void *closer_main(void *arg)
{
	pthread_setname_np(pthread_self(), "gr-closer");
	struct closer *c = arg;
	uint64_t batch[CLOSER_BATCH];

	pthread_mutex_lock(&c->lock);
	for (;;) {
		while (!c->n && !c->stop)
			pthread_cond_wait(&c->cond, &c->lock);
		if (!c->n)
			break; /* stop, and nothing left */
		if (!c->stop && c->n < CLOSER_BATCH && c->delay_ms) {
			/* let the releases of the files written meanwhile
			 * join this one */
			struct timespec ts = {
			    .tv_sec = c->delay_ms / 1000,
			    .tv_nsec = (long)(c->delay_ms % 1000) * 1000000};
			pthread_mutex_unlock(&c->lock);
			nanosleep(&ts, NULL);
			pthread_mutex_lock(&c->lock);
		}
		size_t k = c->n < CLOSER_BATCH ? c->n : CLOSER_BATCH;
		memcpy(batch, c->q, k * sizeof(*batch));
		memmove(c->q, c->q + k, (c->n - k) * sizeof(*c->q));
		c->n -= k;
		pthread_mutex_unlock(&c->lock);
		release(c, batch, k);
		pthread_mutex_lock(&c->lock);
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

int closer_open(struct meta *m, unsigned delay_ms, void (*freed)(void *arg),
		void *arg, struct closer **out)
{
	struct closer *c = calloc(1, sizeof(*c));
	int err;

	*out = NULL;
	if (!c)
		return ENOMEM;
	c->m = m;
	c->delay_ms = delay_ms;
	c->freed = freed;
	c->arg = arg;
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cond, NULL);
	err = pthread_create(&c->thread, NULL, closer_main, c);
	if (err) {
		pthread_cond_destroy(&c->cond);
		pthread_mutex_destroy(&c->lock);
		free(c);
		return err;
	}
	*out = c;
	return 0;
}

void closer_add(struct closer *c, uint64_t ino)
{
	pthread_mutex_lock(&c->lock);
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 256;
		uint64_t *q = realloc(c->q, cap * sizeof(*q));
		if (!q) {
			pthread_mutex_unlock(&c->lock);
			release(c, &ino, 1);
			return;
		}
		c->q = q;
		c->cap = cap;
	}
	c->q[c->n++] = ino;
	if (c->n == 1)
		pthread_cond_signal(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

void closer_close(struct closer *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	c->stop = 1;
	pthread_cond_signal(&c->cond);
	pthread_mutex_unlock(&c->lock);
	pthread_join(c->thread, NULL);
	pthread_cond_destroy(&c->cond);
	pthread_mutex_destroy(&c->lock);
	free(c->q);
	free(c);
}
