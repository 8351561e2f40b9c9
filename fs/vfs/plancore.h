/*
 * plancore.h - the bookkeeping of the epoch plans (plan.h), without
 * threads, locks or I/O: the planned lists, the readers' places, the
 * windows, what to fetch or list next, the ranks of object keys and the
 * figures. plan.c holds its lock around every call and does the I/O
 * (metadata, store, disk cache, /proc) outside it; this file is pure, so
 * that tests/unit/test_plancore.c checks plan.h's rules directly.
 *
 * A planned file is a position in its plan: its inode, its bytes (its
 * length at the add), the 64-bit hashes of its objects' keys
 * (plancore_key_hash) once listed, and its state:
 *
 *   added --pick--> started --done--> ready (in the disk cache)
 *     |                |                |
 *     +----------------+----------------+--opened--> opened (counted)
 *   place passes it: in the trail (behind the place, not yet settled);
 *   retire (the place a window's bytes further on): settled: wasted if
 *   prefetched and never opened, its objects demoted if no plan needs
 *   them (ahead, or in a trail for a file not yet opened); an opened
 *   file's objects are demoted sooner, PC_TRAIL_FILES files and
 *   PC_TRAIL_BYTES behind the place.
 *
 * Invariants (plancore_check verifies them; the unit tests call it):
 *   1. trail <= place <= n; next >= place once a pick looked at it.
 *   2. ahead is the bytes of the ready files at positions >= place.
 *   3. Every position of every plan is in the chain of its inode, once;
 *      every key hash of a position is a use of its object, once per time
 *      it is listed.
 *   4. files is the sum of the plans' n, held the sum of their nheld;
 *      files + held at most PLAN_FILES_MAX.
 */
#ifndef GRANARY_VFS_PLANCORE_H
#define GRANARY_VFS_PLANCORE_H

#include <stddef.h>
#include <stdint.h>

#include "fs/vfs/plan.h"

struct plancore;

/* A position: slot of its plan (6 bits) and index in its list. */
typedef uint32_t pc_ref;
#define PC_NOREF UINT32_MAX

/* flags of a planned file */
#define PF_LISTED     0x01 /* its key hashes are all known */
#define PF_STARTED    0x02 /* handed to a fetcher */
#define PF_READY      0x04 /* its objects are in the cache (fetch done) */
#define PF_PREFETCHED 0x08 /* the fetch brought bytes from the store */
#define PF_OPENED     0x10 /* a reader opened it (counted) */
#define PF_LISTING    0x20 /* handed to a lister */

struct pc_file {
	uint64_t ino;
	uint64_t off; /* bytes of the files before it in its plan */
	union {
		uint64_t one;	/* nkeys == 1 */
		uint64_t *many; /* nkeys > 1 (malloc'd) */
	} key;
	char *names; /* once fetched: its keys, each NUL-ended, nkeys of
			them, until it is retired (for diskcache_demote) */
	uint32_t nkeys;
	pc_ref next;   /* the next position naming the same inode */
	uint8_t flags; /* PF_* */
};

struct pc_plan {
	/* the core's */
	uint64_t id;
	uint64_t gen; /* bumped by a clear: jobs of before are moot */
	int slot;
	struct pc_file *f;
	size_t n, cap;
	uint64_t total;	   /* bytes of all its files */
	size_t place;	   /* files passed by its readers */
	size_t next;	   /* the first position >= place not yet started */
	size_t lnext;	   /* the first position >= next not yet listed */
	size_t trail;	   /* the first position not yet retired */
	size_t dnext;	   /* the first position >= trail not yet looked
			      at for an early demote (retire) */
	uint64_t window;   /* bytes it wants (PLAN_WINDOW_MIN, doubling) */
	uint64_t grown_at; /* the place's offset when it last grew */
	uint64_t ahead, prefetched, used, wasted, waited, ready;
	int stalled;	 /* plancore_stalled: no fetch until it moves */
	int64_t last_ns; /* its last planned open (or add, clear): idle */
	/* files added for positions past its end (plancore_add_at), by
	 * position modulo PC_HOLD_MAX; NULL while none */
	struct pc_held *held;
	size_t nheld;
	/* the caller's (plan.c): its owner */
	uint32_t uid;
	int32_t pid;	    /* 0: not checked */
	uint64_t pid_start; /* the owner's start time (/proc/PID/stat) */
};

/* A file of an add. keys: the hashes of its objects known now (NULL, 0:
 * listed later); listed: they are all of them. */
struct pc_add {
	uint64_t ino, len;
	const uint64_t *keys;
	size_t nkeys;
	int listed;
};

/* A file held for a position past its plan's end (its keys its own). */
struct pc_held {
	struct pc_add v;
	int used;
};

#define PC_LIST_BATCH_MAX 32   /* files one lister takes */
#define PC_HOLD_MAX	  4096 /* positions held past a plan's end */
/* An opened file's objects are demoted once the place is this many
 * files and bytes (at most a window) past it; others a window past. */
#define PC_TRAIL_FILES 32
#define PC_TRAIL_BYTES (4ull << 20)

/* Work handed out by plancore_pick: fetch (list 0) or list (list 1)
 * files [pos, pos + count) of plan id as it was at gen. */
struct pc_job {
	uint64_t id, gen;
	size_t pos, count;
	int list;
	uint64_t ino[PC_LIST_BATCH_MAX], len[PC_LIST_BATCH_MAX];
};

/* What plancore_opened leaves to its caller, outside the lock: keys to
 * demote (malloc'd strings), and the files it counted as opened fetched
 * ahead, whose objects the cache must still hold (plancore_evicted when
 * it does not: their plan, position and keys, names a malloc'd copy). */
struct pc_seen {
	uint64_t id, gen;
	size_t pos;
	char *names;
};
struct pc_demote {
	char **key;
	size_t n, cap;
	struct pc_seen seen[PLAN_MAX];
	size_t nseen;
};
void plancore_demote_release(struct pc_demote *d);
/* The file of s, counted as opened ready, found an object of it evicted
 * before its open: counted wasted and waited instead of used and ready. */
void plancore_evicted(struct plancore *c, const struct pc_seen *s);

uint64_t plancore_key_hash(const char *key);

/* window_max: all windows together (>= 1). ENOMEM. */
int plancore_open(uint64_t window_max, struct plancore **out);
void plancore_close(struct plancore *c); /* ends every plan; NULL-safe */

/* A new, empty plan with the next id: ENOSPC at PLAN_MAX plans. */
int plancore_new(struct plancore *c, int64_t now, struct pc_plan **out);
struct pc_plan *plancore_find(struct plancore *c, uint64_t id);
/* The plans in slot order: first with prev NULL. */
struct pc_plan *plancore_next(struct plancore *c, const struct pc_plan *prev);
/* Append files to p, all or none: ENOSPC past PLAN_FILES_MAX, ENOMEM. */
int plancore_add(struct plancore *c, struct pc_plan *p, const struct pc_add *v,
		 size_t n, int64_t now);
/* File v for position pos of p (the ordered get form of an add, plan.h):
 * appended when pos is p->n, with the files held for the positions after
 * it; held (its keys copied) when pos is further on, until the files
 * before it come. EEXIST pos is taken (planned, or held), EAGAIN pos is
 * PC_HOLD_MAX or more past the end, ENOSPC, ENOMEM. */
int plancore_add_at(struct plancore *c, struct pc_plan *p, size_t pos,
		    const struct pc_add *v, int64_t now);
/* Empty p (the files held too); its place goes back to the start (the
 * window stays). */
void plancore_clear(struct plancore *c, struct pc_plan *p, int64_t now);
/* p is gone (freed). */
void plancore_end(struct plancore *c, struct pc_plan *p);

/*
 * ino was opened for reading by a process whose tree (itself, its parent,
 * ... : ntree pids, 0 when not known) is tree: the plans naming ino at or
 * after their place move past it (plan.h's rule of the process tree), or
 * a plan that names it in its trail unopened counts the open. Keys of
 * files retired by the move that no plan needs ahead are appended to d.
 * Returns the plans moved or counted.
 */
int plancore_opened(struct plancore *c, uint64_t ino, const int32_t *tree,
		    size_t ntree, int64_t now, struct pc_demote *d);
/* 0: no plan names ino; 1: one plan does; 2: several do. */
int plancore_naming(const struct plancore *c, uint64_t ino);

/* The next work, round-robin between the plans: (lists < list_max) up
 * to PC_LIST_BATCH_MAX files past a window to list; else a file inside
 * a window to fetch. 1 with *j, or 0. */
int plancore_pick(struct plancore *c, unsigned lists, unsigned list_max,
		  struct pc_job *j);
/*
 * A job ended. keys: the hashes of the objects of its files in a row,
 * nk[i] of them for file j->pos + i (NULL: not listed, the old ones
 * stay). A fetch (j->list 0, one file): ready 1 when its objects are in
 * the cache, fetched 1 when it brought bytes from the store, names their
 * keys' strings (taken: freed here; may be NULL). A job of a plan
 * cleared or gone since changes nothing.
 */
void plancore_done(struct plancore *c, const struct pc_job *j, int ready,
		   int fetched, const uint64_t *keys, const size_t *nk,
		   char *names);

/* The fetch j found no room in the cache but by evicting what a plan
 * needs (diskcache_room): its file is to be fetched again, and its plan
 * fetches nothing until its place moves or plancore_unstall. */
void plancore_stalled(struct plancore *c, const struct pc_job *j);
void plancore_unstall(struct plancore *c); /* every plan */
/* The bytes of the planned files between the readers' place and the
 * file of fetch j (0 at or behind the place); UINT64_MAX when j's plan
 * is gone or replaced. */
uint64_t plancore_ahead_of(struct plancore *c, const struct pc_job *j);

/* The ranker (diskcache.h) of a key hash. */
uint64_t plancore_rank(const struct plancore *c, uint64_t h);
/*
 * As plancore_rank at time now, but while a list is still coming (a plan
 * made, cleared or added to less than PC_BUILD_NS ago) a key no plan
 * names yet ranks PC_RANK_COMING, not NONE: needed, furthest ahead. A
 * --replace adds the next epoch's list over a fraction of a second;
 * ranked NONE meanwhile (its demote mark of the epoch before counting),
 * what the files not yet added need was evicted first, by the fetches
 * ahead of the files already added (epoch 2 1.6x the minimum).
 */
uint64_t plancore_rank_at(const struct plancore *c, uint64_t h, int64_t now);
#define PC_RANK_COMING (DISKCACHE_RANK_NONE - 1)
#define PC_BUILD_NS    (500 * 1000000ll) /* a tick (plan.h) */
/* Does a plan name the object of hash h at a position its readers have
 * passed? (Not in the cache then, it was read by ranges, or evicted:
 * fetched whole for the files ahead, it costs more than their ranges.) */
int plancore_passed(const struct plancore *c, uint64_t h);
uint64_t plancore_window(const struct plancore *c, const struct pc_plan *p);
void plancore_info(const struct plancore *c, const struct pc_plan *p,
		   int64_t now, struct plan_info *pi);
void plancore_stats(const struct plancore *c, struct plans_stats *st);
/* Abort if an invariant above does not hold (tests). */
void plancore_check(const struct plancore *c);

#endif
