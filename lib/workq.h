/*
 * workq.h - the one background-job facility of granary (after Redis's
 * bio.c): a bounded FIFO of jobs served by a fixed set of threads. Every
 * pool of the client (uploaders, prefetchers, packers, staging uploads,
 * disk cache fillers) is a workq; what differs between them (memory
 * budgets, retries, what a job does) stays with its owner.
 *
 * Jobs are intrusive: the caller embeds a struct workq_job in its own
 * item and finds the item again with container_of-style arithmetic in
 * run(), so that queueing allocates nothing. A job is owned by the queue
 * from push until run() is called; run() may free the item.
 *
 * Thread-safe. The queue's lock is a leaf: run() is called without it, and
 * no callback runs while it is held.
 */
#ifndef GRANARY_WORKQ_H
#define GRANARY_WORKQ_H

#include <stddef.h>
#include <sys/queue.h>

struct workq_job {
	STAILQ_ENTRY(workq_job) link;	    /* the queue's */
	void (*run)(struct workq_job *job); /* called once, on a worker */
};

struct workq;

/*
 * Start nthreads (1..256) workers named name (at most 15 characters, for
 * top and gdb) over a queue of at most cap (>= 1) jobs waiting. EINVAL,
 * ENOMEM, or pthread_create's error (no thread is left running then).
 */
int workq_open(const char *name, int nthreads, size_t cap, struct workq **out);
/*
 * Finish every job queued, then stop the workers and free the queue.
 * Pushes after this started fail with ECANCELED. NULL-safe. Must not be
 * called from a job.
 */
void workq_close(struct workq *q);

/* Queue job, waiting while the queue is full: 0, or ECANCELED once
 * workq_close has started (job not queued). */
int workq_push(struct workq *q, struct workq_job *job);
/* Queue job if there is room now: 0, EAGAIN (full) or ECANCELED. */
int workq_trypush(struct workq *q, struct workq_job *job);
/* Wait until nothing is queued or running (jobs pushed meanwhile are
 * waited for too). */
void workq_drain(struct workq *q);

struct workq_stats {
	size_t queued;				      /* waiting now */
	size_t running;				      /* in run() now */
	unsigned long long done, full_waits, refused; /* since open */
};
void workq_get_stats(struct workq *q, struct workq_stats *st);

#endif
