/*
 * space.c - the client's gate on a byte limit shared by every client
 * (space.h): a view of the usage, read at most once per SPACE_REFRESH_NS,
 * plus this client's commits since and its pending bytes.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/log.h"
#include "fs/space.h"

struct space {
	uint64_t limit; /* 0: none */
	space_usage_fn usage;
	void *arg;
	pthread_mutex_t lock; /* leaf; protects the fields below */
	uint64_t used;	      /* the last reading */
	int64_t read_ns;      /* when (monotonic); 0: read at next take */
	uint64_t committed;   /* bytes this client committed since */
	uint64_t pending;     /* accepted, not committed yet */
};

static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int space_open(uint64_t limit, space_usage_fn usage, void *arg,
	       struct space **out)
{
	struct space *s = calloc(1, sizeof(*s));
	if (!s)
		return ENOMEM;
	s->limit = limit;
	s->usage = usage;
	s->arg = arg;
	pthread_mutex_init(&s->lock, NULL);
	*out = s;
	return 0;
}

void space_free(struct space *s)
{
	if (!s)
		return;
	pthread_mutex_destroy(&s->lock);
	free(s);
}

/* A fresh reading when the last is too old; s->lock held. The lock stays
 * held through the round trip: a commit counted after it is counted on
 * top of a reading that may include it already, which errs on the safe
 * side, never the other. */
static void refresh(struct space *s)
{
	int64_t now = mono_ns();
	uint64_t used;
	if (s->read_ns && now - s->read_ns < SPACE_REFRESH_NS)
		return;
	int err = s->usage(s->arg, &used);
	if (err) {
		log_warn("cannot read the volume's usage: %s; the capacity "
			 "is judged from the last reading",
			 strerror(err > 0 ? err : EIO));
		s->read_ns = now; /* not again at once */
		return;
	}
	s->used = used;
	s->committed = 0;
	s->read_ns = now;
}

int space_take(struct space *s, uint64_t bytes)
{
	int err = 0;
	if (!s->limit || !bytes)
		return 0;
	pthread_mutex_lock(&s->lock);
	refresh(s);
	uint64_t view = s->used + s->committed + s->pending;
	if (view > s->limit || bytes > s->limit - view)
		err = ENOSPC;
	else
		s->pending += bytes;
	pthread_mutex_unlock(&s->lock);
	return err;
}

void space_done(struct space *s, uint64_t bytes)
{
	if (!s->limit || !bytes)
		return;
	pthread_mutex_lock(&s->lock);
	if (bytes > s->pending)
		bytes = s->pending;
	s->pending -= bytes;
	s->committed += bytes;
	pthread_mutex_unlock(&s->lock);
}

void space_drop(struct space *s, uint64_t bytes)
{
	if (!s->limit || !bytes)
		return;
	pthread_mutex_lock(&s->lock);
	s->pending -= bytes < s->pending ? bytes : s->pending;
	pthread_mutex_unlock(&s->lock);
}

void space_changed(struct space *s)
{
	if (!s->limit)
		return;
	pthread_mutex_lock(&s->lock);
	s->read_ns = 0;
	pthread_mutex_unlock(&s->lock);
}
