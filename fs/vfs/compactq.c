/*
 * compactq.c - background compaction (compactq.h): commit counters in a
 * fixed table (a collision only makes a chunk checked sooner), jobs on a
 * work queue of one thread.
 */
#include "fs/vfs/compactq.h"

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "fs/data/compact.h"
#include "fs/vfs/hooks.h"
#include "lib/hash.h"
#include "lib/log.h"
#include "lib/workq.h"

#define SLOTS 4096 /* commit counters */
#define QUEUE 64   /* chunks waiting */

struct compactq {
	struct meta *m;
	struct chunkstore *cs;
	struct workq *q;
	_Atomic uint32_t ctr[SLOTS];
	_Atomic int stopping;
	_Atomic uint64_t queued, compacted, bytes, dropped, errors;
};

struct job {
	struct workq_job job; /* first */
	struct compactq *cq;
	uint64_t ino;
	uint32_t idx;
};

static void job_run(struct workq_job *wj)
{
	struct job *j = (struct job *)wj;
	struct compactq *cq = j->cq;
	struct compact_result r;

	if (!atomic_load(&cq->stopping)) {
		int err = compact_chunk(cq->m, cq->cs, j->ino, j->idx, 0,
					hooks_compact_delay(), &r);
		if (err && err != EAGAIN && err != ENOENT) {
			atomic_fetch_add(&cq->errors, 1);
			log_warn("compaction of chunk %" PRIu32
				 " of inode %" PRIu64 ": %s",
				 j->idx, j->ino, gr_strerror(err));
		} else if (!err && r.bytes) {
			atomic_fetch_add(&cq->compacted, 1);
			atomic_fetch_add(&cq->bytes, r.bytes);
			atomic_fetch_add(&cq->dropped, r.before - r.after);
			log_debug("compacted chunk %" PRIu32
				  " of inode %" PRIu64 ": %zu records to %zu",
				  j->idx, j->ino, r.before, r.after);
		}
	}
	free(j);
}

int compactq_open(struct meta *m, struct chunkstore *cs, struct compactq **out)
{
	struct compactq *cq = calloc(1, sizeof *cq);
	if (!cq)
		return ENOMEM;
	cq->m = m;
	cq->cs = cs;
	int err = workq_open("gr-compact", 1, QUEUE, &cq->q);
	if (err) {
		free(cq);
		return err;
	}
	*out = cq;
	return 0;
}

void compactq_close(struct compactq *q)
{
	if (!q)
		return;
	atomic_store(&q->stopping, 1); /* queued jobs only free themselves */
	workq_close(q->q);
	free(q);
}

void compactq_note(struct compactq *q, uint64_t ino, uint32_t idx)
{
	if (!q)
		return;
	uint64_t h = hash_mix64(ino ^ (uint64_t)idx * 0x9e3779b97f4a7c15ull);
	uint32_t c = atomic_fetch_add(&q->ctr[h % SLOTS], 1) + 1;
	if (c % COMPACTQ_EVERY)
		return;
	struct job *j = malloc(sizeof *j);
	if (!j)
		return;
	*j = (struct job){.job.run = job_run, .cq = q, .ino = ino, .idx = idx};
	if (workq_trypush(q->q, &j->job)) {
		free(j);
		return;
	}
	atomic_fetch_add(&q->queued, 1);
}

void compactq_get_stats(struct compactq *q, struct compactq_stats *st)
{
	st->queued = atomic_load(&q->queued);
	st->compacted = atomic_load(&q->compacted);
	st->bytes = atomic_load(&q->bytes);
	st->records_dropped = atomic_load(&q->dropped);
	st->errors = atomic_load(&q->errors);
}
