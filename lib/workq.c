/*
 * workq.c - the one background-job facility (see workq.h): an intrusive
 * singly linked FIFO with a bound, one mutex, and the threads that serve
 * it. Queueing allocates nothing; the bound makes producers wait (push) or
 * give up (trypush) instead of growing the queue.
 */
#include "lib/workq.h"

#include "lib/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WORKQ_MAX_THREADS 256
#define WORKQ_NAME_MAX	  15 /* what pthread_setname_np takes */

struct workq {
	char name[WORKQ_NAME_MAX + 1];
	pthread_t *threads;
	int nthreads; /* started; only open and close touch it */
	size_t cap;

	/* A leaf lock: no job runs and nothing else is locked under it. */
	pthread_mutex_t lock;
	pthread_cond_t work; /* a job was queued, or closing */
	pthread_cond_t room; /* a job left the queue: push may go on */
	pthread_cond_t idle; /* nothing queued or running: drain may return */
	STAILQ_HEAD(, workq_job) jobs;		      /* protected by lock */
	size_t queued, running;			      /* protected by lock */
	int closing;				      /* protected by lock */
	unsigned long long done, full_waits, refused; /* protected by lock */
};

static void *workq_main(void *arg)
{
	struct workq *q = arg;
	pthread_setname_np(pthread_self(), q->name);
	pthread_mutex_lock(&q->lock);
	for (;;) {
		while (STAILQ_EMPTY(&q->jobs) && !q->closing)
			pthread_cond_wait(&q->work, &q->lock);
		/* close drains: a worker stops only when nothing is left */
		if (STAILQ_EMPTY(&q->jobs))
			break;
		struct workq_job *job = STAILQ_FIRST(&q->jobs);
		STAILQ_REMOVE_HEAD(&q->jobs, link);
		q->queued--;
		q->running++;
		pthread_cond_signal(&q->room);
		pthread_mutex_unlock(&q->lock);

		/* job may be freed by run(): not touched after it */
		job->run(job);

		pthread_mutex_lock(&q->lock);
		q->running--;
		q->done++;
		if (!q->queued && !q->running)
			pthread_cond_broadcast(&q->idle);
	}
	pthread_mutex_unlock(&q->lock);
	return NULL;
}

int workq_open(const char *name, int nthreads, size_t cap, struct workq **out)
{
	if (!name || !out || nthreads < 1 || nthreads > WORKQ_MAX_THREADS ||
	    cap < 1)
		return EINVAL;
	struct workq *q = calloc(1, sizeof(*q));
	if (!q)
		return ENOMEM;
	q->threads = calloc((size_t)nthreads, sizeof(*q->threads));
	if (!q->threads) {
		free(q);
		return ENOMEM;
	}
	snprintf(q->name, sizeof(q->name), "%s", name);
	STAILQ_INIT(&q->jobs);
	q->cap = cap;
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->work, NULL);
	pthread_cond_init(&q->room, NULL);
	pthread_cond_init(&q->idle, NULL);
	int err = 0;
	for (; q->nthreads < nthreads; q->nthreads++) {
		err = pthread_create(&q->threads[q->nthreads], NULL, workq_main,
				     q);
		if (err)
			goto fail_threads;
	}
	*out = q;
	return 0;

fail_threads:
	/* nothing was queued: close stops the started workers at once */
	workq_close(q);
	return err;
}

void workq_close(struct workq *q)
{
	if (!q)
		return;
	pthread_mutex_lock(&q->lock);
	q->closing = 1;
	pthread_cond_broadcast(&q->work);
	/* producers waiting for room give up with ECANCELED */
	pthread_cond_broadcast(&q->room);
	pthread_mutex_unlock(&q->lock);
	for (int i = 0; i < q->nthreads; i++)
		pthread_join(q->threads[i], NULL);
	gr_assert(STAILQ_EMPTY(&q->jobs) && !q->queued && !q->running);
	pthread_cond_destroy(&q->idle);
	pthread_cond_destroy(&q->room);
	pthread_cond_destroy(&q->work);
	pthread_mutex_destroy(&q->lock);
	free(q->threads);
	free(q);
}

/* With q->lock held and room known: append job and wake one worker. */
static void workq_append(struct workq *q, struct workq_job *job)
{
	STAILQ_INSERT_TAIL(&q->jobs, job, link);
	q->queued++;
	pthread_cond_signal(&q->work);
}

static int workq_push_locked(struct workq *q, struct workq_job *job, int wait)
{
	int waited = 0;
	while (!q->closing && q->queued >= q->cap) {
		if (!wait) {
			q->refused++;
			return EAGAIN;
		}
		if (!waited++)
			q->full_waits++;
		pthread_cond_wait(&q->room, &q->lock);
	}
	if (q->closing) {
		q->refused++;
		return ECANCELED;
	}
	workq_append(q, job);
	return 0;
}

int workq_push(struct workq *q, struct workq_job *job)
{
	gr_assert(job && job->run);
	pthread_mutex_lock(&q->lock);
	int err = workq_push_locked(q, job, 1);
	pthread_mutex_unlock(&q->lock);
	return err;
}

int workq_trypush(struct workq *q, struct workq_job *job)
{
	gr_assert(job && job->run);
	pthread_mutex_lock(&q->lock);
	int err = workq_push_locked(q, job, 0);
	pthread_mutex_unlock(&q->lock);
	return err;
}

void workq_drain(struct workq *q)
{
	pthread_mutex_lock(&q->lock);
	while (q->queued || q->running)
		pthread_cond_wait(&q->idle, &q->lock);
	pthread_mutex_unlock(&q->lock);
}

void workq_get_stats(struct workq *q, struct workq_stats *st)
{
	pthread_mutex_lock(&q->lock);
	st->queued = q->queued;
	st->running = q->running;
	st->done = q->done;
	st->full_waits = q->full_waits;
	st->refused = q->refused;
	pthread_mutex_unlock(&q->lock);
}
