/*
 * plan_int.h - what the two files of the epoch plans share: struct plans
 * (plan.c: the registry, fetchers, ticker, readers, ranker; plan_ctl.c:
 * the control calls) and their helpers. Not for use outside them.
 */
#ifndef GRANARY_VFS_PLAN_INT_H
#define GRANARY_VFS_PLAN_INT_H

#include <pthread.h>
#include <stdint.h>

#include "fs/vfs/plan.h"
#include "fs/vfs/plancore.h"

#define PLAN_LISTERS 4	 /* fetchers that may list ahead at once */
#define PLAN_TICK_MS 500 /* owner checks and idle ends this often */

struct workq;

struct plans {
	struct fs *fs;
	uint64_t window_max;
	unsigned idle_s;
	/* a leaf: nothing is taken under it, no call into the metadata, a
	 * store or the disk cache is made with it held (plan.h) */
	pthread_mutex_t lock;
	/* signalled when a key's fetch ends, and at close */
	pthread_cond_t cond;
	pthread_cond_t tick_cond; /* the ticker's: signalled at close */
	struct plancore *core;	  /* protected by lock */
	unsigned jobs, lists;	  /* queued or running; protected by lock */
	/* the keys being fetched (their hashes), one fetch each at once;
	 * protected by lock */
	struct {
		uint64_t h;
		int used;
	} flight[PLAN_THREADS];
	/* bytes the fetches ahead between their room check and their
	 * fill's end may take in the disk cache; the packs they fetched,
	 * their bytes (a pack's size before its fetch: at least its
	 * frames' end, and the mean); protected by lock */
	uint64_t pending, pack_bytes, packs;
	int stopping;	  /* protected by lock */
	struct workq *q;  /* the fetchers */
	pthread_t ticker; /* owner checks, idle ends */
	int ticking;
	int64_t warned_ns; /* atomic: the last fetch error logged */
};

/* Hand the fetchers what the plans need next (takes and drops lock). */
void plans_pump(struct plans *p);
/* End the plans whose owner process is gone (the ticker; a listing first). */
void plans_reap(struct plans *p);
/* Of process pid: its parent, its start time (clock ticks after boot),
 * whether it is a zombie (exited). ENOENT when there is none. Any
 * pointer may be NULL. */
int plan_proc_stat(int32_t pid, int32_t *ppid, uint64_t *start, int *zombie);
/* The process (thread group) of thread pid: the kernel tells FUSE the
 * calling thread's id; pid itself when it cannot be read. */
int32_t plan_proc_tgid(int32_t pid);

#endif
