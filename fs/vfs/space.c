/*
 * space.c - the client's gate on a byte limit shared by every client
 * (space.h): a reading of the volume (its usage and the other clients'
 * pending bytes), taken once per SPACE_REFRESH_NS or per step of bytes
 * accepted, plus this client's commits since and its pending bytes.
 */
#include <errno.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/log.h"
#include "fs/vfs/space.h"

struct space {
	uint64_t limit; /* 0: none; atomic, written under lock */
	uint64_t step;	/* a reading is taken again after accepting this;
			   protected by lock */
	char what[48];	/* the limit, in messages */
	space_usage_fn usage;
	void *arg;
	pthread_mutex_t lock; /* leaf; protects the fields below */
	pthread_cond_t read;  /* a round trip ended */
	uint64_t used;	      /* the last reading */
	int64_t read_ns;      /* when (monotonic) it was asked; 0: stale */
	uint64_t changed;     /* space_changed calls (stale after a trip) */
	uint64_t committed;   /* bytes this client committed since */
	uint64_t taken;	      /* bytes accepted since the reading was asked */
	uint64_t pending;     /* accepted, not committed yet */
	uint64_t told;	      /* pending as last published */
	int busy;	      /* a round trip is under way (one at a time, so
				 that publishes land in order) */
};

static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint64_t step_of(uint64_t limit)
{
	uint64_t step = limit / 64;
	if (step < SPACE_STEP_MIN)
		step = SPACE_STEP_MIN;
	if (step > SPACE_STEP_MAX)
		step = SPACE_STEP_MAX;
	return step;
}

/* The limit, read without the lock: a gate with none is free (every call
 * returns at once). */
static uint64_t limit_of(const struct space *s)
{
	return __atomic_load_n(&s->limit, __ATOMIC_RELAXED);
}

int space_open(uint64_t limit, const char *what, space_usage_fn usage,
	       void *arg, struct space **out)
{
	struct space *s = calloc(1, sizeof(*s));
	if (!s)
		return ENOMEM;
	s->limit = limit;
	s->step = step_of(limit);
	snprintf(s->what, sizeof(s->what), "%s", what);
	s->usage = usage;
	s->arg = arg;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->read, NULL);
	*out = s;
	return 0;
}

void space_free(struct space *s)
{
	if (!s)
		return;
	pthread_cond_destroy(&s->read);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

/* Publish the pending bytes and take a reading; s->lock held, dropped for
 * the round trip (s->busy set). What was committed before it was asked is
 * in the reading and leaves s->committed; commits meanwhile stay counted,
 * maybe twice, which errs on the safe side. Bytes accepted meanwhile
 * count toward the next step. */
static void round_trip(struct space *s)
{
	uint64_t pending = s->pending, committed = s->committed;
	uint64_t taken = s->taken, changed = s->changed, used;
	int64_t asked = mono_ns();

	s->busy = 1;
	pthread_mutex_unlock(&s->lock);
	int err = s->usage(s->arg, pending, &used);
	pthread_mutex_lock(&s->lock);
	s->busy = 0;
	pthread_cond_broadcast(&s->read);
	s->taken -= taken;
	if (err) {
		log_warn("cannot read the usage of %s: %s; its limit is "
			 "judged from the last reading",
			 s->what, strerror(err > 0 ? err : EIO));
		s->read_ns = asked; /* not again at once, nor per step */
		return;
	}
	s->used = used;
	s->committed -= committed;
	s->told = pending;
	/* space freed while the trip was under way may not be in it */
	s->read_ns = changed == s->changed ? asked : 0;
}

int space_take(struct space *s, uint64_t bytes)
{
	int err = 0;
	if (!limit_of(s) || !bytes)
		return 0;
	pthread_mutex_lock(&s->lock);
	for (;;) {
		int none = !s->read_ns;
		int step = s->taken && s->taken + bytes > s->step;
		if (!none && !step && mono_ns() - s->read_ns < SPACE_REFRESH_NS)
			break;
		if (!s->busy)
			round_trip(s);
		else if (none || step)
			pthread_cond_wait(&s->read, &s->lock);
		else
			break; /* only old: the trip under way will do */
	}
	uint64_t view = s->used + s->committed + s->pending;
	/* (a limit lifted meanwhile refuses nothing) */
	if (s->limit && (view > s->limit || bytes > s->limit - view))
		err = ENOSPC;
	else {
		s->pending += bytes;
		s->taken += bytes;
	}
	pthread_mutex_unlock(&s->lock);
	return err;
}

void space_done(struct space *s, uint64_t bytes)
{
	if (!limit_of(s) || !bytes)
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
	if (!limit_of(s) || !bytes)
		return;
	pthread_mutex_lock(&s->lock);
	s->pending -= bytes < s->pending ? bytes : s->pending;
	pthread_mutex_unlock(&s->lock);
}

void space_changed(struct space *s)
{
	if (!limit_of(s))
		return;
	pthread_mutex_lock(&s->lock);
	s->read_ns = 0;
	s->changed++;
	pthread_mutex_unlock(&s->lock);
}

void space_set_limit(struct space *s, uint64_t limit)
{
	pthread_mutex_lock(&s->lock);
	if (limit != s->limit) {
		__atomic_store_n(&s->limit, limit, __ATOMIC_RELAXED);
		s->step = step_of(limit);
		s->read_ns = 0;
		s->changed++;
	}
	pthread_mutex_unlock(&s->lock);
}

void space_tick(struct space *s)
{
	if (!limit_of(s))
		return;
	pthread_mutex_lock(&s->lock);
	if (!s->busy && s->pending != s->told &&
	    mono_ns() - s->read_ns >= SPACE_REFRESH_NS)
		round_trip(s);
	pthread_mutex_unlock(&s->lock);
}
