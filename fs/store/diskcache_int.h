/*
 * diskcache_int.h - what the disk cache's files share (diskcache.c: the
 * decorator's operations, fills, whole fetches, open; diskcache_index.c:
 * the index of entries, the LRU, admission against the size and the
 * disk's free space, and the index rebuilt from the directories at open;
 * diskcache_rank.c: eviction by the plans' ranker, demoted entries).
 * Not for use outside fs/store/diskcache*.c.
 */
#ifndef GRANARY_DISKCACHE_INT_H
#define GRANARY_DISKCACHE_INT_H

#include "fs/store/diskcache.h"
#include "lib/hash.h"
#include "lib/workq.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/queue.h>
#include <time.h>
#include <xxhash.h>

#define KEY_MAX 1024
/* Temp files: TMP_PREFIX + pid + counter, in the directory of their key.
 * The index scan skips and removes them; keys with a component starting
 * with the prefix pass through uncached. */
#define TMP_PREFIX	 ".tmp."
#define TMP_PREFIX_LEN	 (sizeof(TMP_PREFIX) - 1)
#define ENOSPC_PAUSE_MS	 10000	/* no fills for this long after ENOSPC */
#define STATVFS_EVERY_MS 1000	/* free space is asked at most this often */
#define LOWSPACE_LOG_MS	 600000 /* fills refused for room: logged this often */
#define ADMIT_ROUNDS	 4	/* evict-and-retry rounds before giving up */
#define SCAN_MAX	 4096	/* LRU entries looked at per admission */
/* Fills waiting for the fillers (a workq); beyond them the reader writes the
 * entry itself, as a plain get does (a cold pass must leave the cache
 * whole: a dropped fill is a second fetch from the store next epoch). Each
 * holds its object's bytes: 16 blocks of 4 MiB, most of them shared with
 * the chunk store's memory cache. */
#define FILLQ_MAX 16
#define FILLERS	  2 /* threads writing them: one falls behind 8 streams */
/* Whole fetches of packs (get_whole) that ranged gets of the same object
 * can wait for at once; beyond them a ranged get passes through. */
#define FLIGHTS 32

#define STAT_ADD(dc, f, n)                                                     \
	__atomic_add_fetch(&(dc)->st.f, (n), __ATOMIC_RELAXED)

enum dc_state {
	DC_FILLING,  /* being written; not served, not on the LRU */
	DC_READY,    /* served; on the LRU; counted in entries/bytes */
	DC_DROPPING, /* file being unlinked; hashed so nobody refills it */
};

/* Kept small: there is one per cached object (a few hundred bytes of
 * memory for millions of entries would be too much). The hash node keeps
 * the key's hash (8 bytes) so that neither growth nor removal hashes the
 * key again. */
struct dc_entry {
	struct hash_node hn;	    /* in the index while hashed */
	TAILQ_ENTRY(dc_entry) link; /* LRU (READY), or a list to reap */
	uint64_t size;
	int64_t last_use; /* CLOCK_REALTIME seconds (file mtime at open) */
	uint16_t dir;
	uint8_t state; /* enum dc_state */
	uint8_t stale; /* FILLING: deleted/put/evicted meanwhile, roll back */
	/* Views mapping the file (a hit through objstore_get_view): while
	 * any is alive, LRU eviction passes the entry by, and a retired
	 * entry keeps counting in `dropping` after its unlink (the mapping
	 * holds the disk blocks) until the last view goes (orphan: out of
	 * the hash, freed by the unpin). Protected by lock. */
	uint32_t pins;
	uint8_t orphan;
	/* diskcache_demote: evicted before any other; a hit clears it
	 * (diskcache_rank.c). Protected by lock. */
	uint8_t demoted;
	char key[];
};

/* Free space of one file system (dirs on the same device share one):
 * fstatvfs at most every STATVFS_EVERY_MS (by the thread that wins the CAS
 * on stat_ms), adjusted in between by what fills reserve and evictions
 * retire, so that parallel fills see each other. */
struct dc_space {
	int fd;		   /* a dir on it (not owned) */
	int64_t stat_ms;   /* atomic */
	int64_t avail;	   /* bytes; protected by lock */
	uint64_t total;	   /* bytes, 0 = unknown; protected by lock */
	uint64_t frsize;   /* block size, set at open */
	uint64_t inflight; /* reserved, not yet committed; protected by lock */
};

/* A verified object to write as the FILLING placeholder ph's file. */
struct fill_req {
	struct workq_job job; /* first: queued to the fillers */
	struct diskcache *dc;
	SLIST_ENTRY(fill_req) free; /* fq_free; protected by fq_lock */
	struct dc_entry *ph;
	struct objstore_view v; /* a reference of its own */
};

/*
 * A whole fetch in flight (get_whole), for the ranged gets of the same
 * object that miss meanwhile: they wait for it and copy their range from
 * its bytes instead of getting it from the backend too (readers of other
 * frames of a pack being fetched, a prefetch and a reader). key NULL: a
 * free slot. All fields protected by lock; the bytes are immutable once
 * done and freed only when waiters is back to 0.
 */
struct dc_flight {
	const char *key; /* the fetcher's, valid while the slot is taken */
	int done, err;	 /* err: the backend's, once done */
	unsigned waiters;
	const void *data; /* the whole object, n bytes, once done with 0 */
	size_t n;
	pthread_cond_t cv; /* done set; waiters back to 0 */
};

struct dc_dir {
	char *path; /* DIR/<ns> */
	int fd;	    /* O_DIRECTORY on path; entries are *at() relative */
	dev_t dev;
	struct dc_space *sp; /* own, or an earlier dir's on the same device */
	struct dc_space own;
};

struct diskcache {
	struct objstore base;	  /* first: objstore_* see only this */
	struct objstore *backend; /* owned */
	struct diskcache_opts o;  /* dirs, ns point at nothing after open */
	char *whole_prefix;	  /* o.whole_prefix (a copy) */
	struct dc_dir *dirs;
	size_t ndirs;

	/*
	 * Lock order: lock is a leaf, but for the ranker, which is called
	 * with it held and takes its own lock after it (plan.h). It is never
	 * held during file I/O or a backend call: a fill reserves space under
	 * it, writes without it and commits or rolls back under it again.
	 */
	pthread_mutex_t lock;
	struct hash index; /* dc_entry by key; protected by lock */
	/* READY entries, most recently used first; protected by lock */
	TAILQ_HEAD(dc_list, dc_entry) lru;
	uint64_t reserved;	 /* FILLING bytes; protected by lock */
	uint64_t dropping;	 /* DROPPING bytes; protected by lock */
	int64_t nofill_until_ms; /* after ENOSPC; protected by lock */
	int64_t lowspace_log_ms; /* next low-space warning; protected by lock */
	struct diskcache_stats st; /* counters atomic; entries/bytes
				      protected by lock */
	/* Whole fetches that ranged gets wait for; protected by lock (their
	 * condition variables wait on it: still a leaf, nothing is taken
	 * while holding it and nobody waits on them while holding another
	 * lock). */
	struct dc_flight flights[FLIGHTS];

	/* The plans' ranker (diskcache_set_ranker; NULL: none), called only
	 * with lock held, so that replacing it waits out the calls under
	 * way. Protected by lock. */
	diskcache_rank_fn rank;
	diskcache_passed_fn passed; /* NULL unless rank is set */
	void *rank_arg;
	/* A ranked admission's candidates (diskcache_rank.c), here so that
	 * nothing is allocated under the lock. Protected by lock. */
	struct dc_cand {
		struct dc_entry *e;
		uint64_t rank;
	} cand[SCAN_MAX];

	/*
	 * Verified views waiting to be written (objstore_view_verified):
	 * jobs of a workq of FILLERS threads, at most FILLQ_MAX waiting. A
	 * request is taken from the free list when queued and given back
	 * when written: one per waiting fill and one per filler suffice.
	 * Lock order: fq_lock is a leaf too, never held with lock nor
	 * during a fill; the workq's lock is a leaf.
	 */
	struct workq *fillers; /* NULL: readers write their fills */
	pthread_mutex_t fq_lock;
	struct fill_req fq[FILLQ_MAX + FILLERS];
	SLIST_HEAD(, fill_req) fq_free; /* protected by fq_lock */
};

/* ---- small helpers ---- */

static inline int64_t now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME_COARSE, &ts);
	return (int64_t)ts.tv_sec;
}

static inline int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline uint64_t round_up(uint64_t n, uint64_t unit)
{
	return unit ? (n + unit - 1) / unit * unit : n;
}

static inline uint64_t dc_key_hash(const char *key)
{
	return XXH3_64bits(key, strlen(key));
}

static inline struct diskcache *dc_of(struct objstore *s)
{
	return (struct diskcache *)s;
}

/* ---- index: hash table and LRU (diskcache_index.c; caller holds lock) ---- */

/* h: dc_key_hash(key). */
struct dc_entry *dc_find(struct diskcache *dc, uint64_t h, const char *key);
void dc_lru_touch(struct diskcache *dc, struct dc_entry *e);
struct dc_entry *dc_entry_new(const char *key, size_t klen);
void dc_retire(struct diskcache *dc, struct dc_entry *e);
/* lock NOT held: unlinks the files, then takes lock to forget them */
void dc_reap(struct diskcache *dc, struct dc_list *list);

/* ---- admission (diskcache_index.c; caller holds lock but where said) ---- */

enum { ADMIT, EVICT, SKIP }; /* what dc_admit decided */

/* Retire e to make room, chained on *out; counted (planned: chosen by its
 * rank). */
void dc_evict_one(struct diskcache *dc, struct dc_entry *e, struct dc_list *out,
		  int planned);

int dc_admit(struct diskcache *dc, struct dc_entry *ph, uint64_t len,
	     int may_evict, struct dc_list *victims);
int dc_space_low(const struct diskcache *dc, const struct dc_space *sp);
double dc_free_pct(const struct dc_space *sp);
/* Would an entry of len bytes be admitted now (evicting what may go)?
 * lock NOT held. */
int dc_would_admit(struct diskcache *dc, const char *key, uint64_t len);
/* how: DC_AHEAD, without evicting an entry a plan needs (diskcache_room);
 * DC_UNREAD too, not when the ranker's passed(key) says the plans'
 * readers read some of it (get_whole) */
#define DC_AHEAD  1
#define DC_UNREAD 2
int dc_would_admit_as(struct diskcache *dc, const char *key, uint64_t len,
		      int how);
/* lock NOT held */
void dc_refresh_space(struct diskcache *dc, struct dc_space *sp);

/* ---- ranked eviction (diskcache_rank.c; caller holds lock) ---- */

#define DC_RANKED_OUT 1 /* dc_pick_ranked: the newcomer is needed later */

/* As pick() (diskcache_index.c) with a ranker set: choose what to evict
 * so that need bytes come free, and need_disk on sp; key is the
 * newcomer's. 0: enough (with out, retired and chained on *out), -1: not
 * enough, DC_RANKED_OUT: only by evicting planned entries all needed
 * sooner than key. With out NULL only tell; key NULL (out NULL too): a
 * fetch ahead's question, planned entries are not taken (-1). */
int dc_pick_ranked(struct diskcache *dc, const struct dc_space *sp, int64_t now,
		   int64_t need, int64_t need_disk, const char *key,
		   struct dc_list *out);

/* ---- open (diskcache_index.c) ---- */

/* Walk every directory into the index (LRU by mtime), trimmed to size. */
int dc_rebuild(struct diskcache *dc);

#endif
