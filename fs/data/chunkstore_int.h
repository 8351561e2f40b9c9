/*
 * chunkstore_int.h - what the files of the chunk store share: its state
 * (struct chunkstore) and the calls between the block cache and prefetch
 * (chunkstore.c) and the ranged reads with their table cache (ranged.c).
 * Not for use outside fs/data/chunkstore.c and fs/data/ranged.c.
 *
 * Locks: cs->lock, cs->pf_lock and cs->tlock are leaves, never held
 * together, and no I/O or decoding happens under any of them.
 */
#ifndef GRANARY_CHUNKSTORE_INT_H
#define GRANARY_CHUNKSTORE_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "fs/data/chunkstore.h"
#include "lib/hash.h"
#include "lib/workq.h"

#define KEY_CAP	      96 /* an object key, chunkstore_key's or a pack's */
#define MISSING_SLOTS 32 /* slices and packs waited for at once */

#define STAT_ADD(cs, f, v)                                                     \
	__atomic_fetch_add(&(cs)->st.f, (v), __ATOMIC_RELAXED)

/* The hash of block idx of slice id, in both caches. */
static inline uint64_t block_hash(uint64_t id, uint32_t idx)
{
	return hash_mix64(id ^ ((uint64_t)idx * 0x9e3779b97f4a7c15ull));
}

struct block_key {
	uint64_t id;
	uint32_t idx;
};

struct chunkstore {
	struct objstore *store; /* borrowed */
	struct chunkstore_opts o;

	/* Leaf lock: nothing else is taken while holding it, and no I/O or
	 * decoding happens under it. */
	pthread_mutex_t lock;
	struct hash table; /* centry by (id, idx); protected by lock */
	/* most recently used first; protected by lock */
	TAILQ_HEAD(centry_lru, centry) lru;
	size_t cached_bytes; /* ready hashed entries; protected by lock */
	/* Slices and packs missing from the store that reads wait for (see
	 * missing_deadline()); protected by lock. */
	struct missing {
		uint64_t id; /* slice, or pack when pack is set; 0: free */
		int pack;
		int64_t deadline; /* fsutil_mono_ms() */
	} missing[MISSING_SLOTS];

	/* Prefetch: pf_cap request slots, each queued to pf_q (a workq of
	 * pf_nthreads workers) while it holds a request; full slots are
	 * the drop. Which request a job fetches is the pool's choice
	 * (pf_take, for fairness), not the queue's order. Lock order:
	 * pf_lock is a leaf too, never held together with lock; the
	 * workq's lock is a leaf. */
	struct workq *pf_q;
	pthread_mutex_t pf_lock;
	struct pf_req *pf_slots; /* pf_cap of them; protected by pf_lock */
	size_t pf_cap, pf_n;	 /* slots holding a request; pf_lock */
	uint64_t pf_seq;	 /* last request number; pf_lock */
	int pf_stop;		 /* protected by pf_lock */
	uint64_t *pf_busy;   /* slice each worker fetches (0: none); pf_lock */
	uint64_t *pf_recent; /* slices of the last pf_nrecent requests taken */
	size_t pf_nrecent, pf_at; /* ring of them; protected by pf_lock */
	int pf_nthreads;	  /* written only by open and close */

	/* Ranged reads: block prefixes (header + segment table), see
	 * ranged.c. Leaf lock: never held with another; tc_loaded waits on
	 * it (for a prefix another reader fetches) and nothing else. */
	pthread_mutex_t tlock;
	pthread_cond_t tc_loaded; /* a loading tentry loaded or failed */
	struct hash tc_table;	  /* tentry by (id, idx); protected by tlock */
	/* most recently used first; protected by tlock */
	TAILQ_HEAD(tentry_lru, tentry) tc_lru;
	size_t tc_bytes; /* protected by tlock */
	size_t tc_cap;	 /* bytes; set at open */

	struct chunkstore_stats st; /* updated with __atomic builtins */
};

/* chunkstore.c: is the block in the memory cache or on its way there? */
int chunkstore_cached(struct chunkstore *cs, uint64_t id, uint32_t idx);

/* ranged.c: the table cache's lifecycle (ranged_init: 0 or ENOMEM, and
 * ranged_release either way), forgetting a block's table (its block was
 * put again or deleted), and the reads. */
int ranged_init(struct chunkstore *cs);
void ranged_release(struct chunkstore *cs);
void ranged_drop(struct chunkstore *cs, uint64_t id, uint32_t idx);
#define RANGE_WHOLE (-1) /* ranged_read(): read the whole block instead */
/* Reads of 1/RANGE_FRACTION of a block or more fetch it whole (ranged.c
 * says why); read_blocks() gives smaller pinned ones a buffer. */
#define RANGE_FRACTION 4
/* Copy bytes [off, off + n) of block idx (len raw bytes) of slice id to
 * dst with a ranged read, or say RANGE_WHOLE: fetch the whole block.
 * Errors: EIO, ENOMEM. */
int ranged_read(struct chunkstore *cs, uint64_t id, uint32_t idx, uint32_t len,
		uint32_t off, uint32_t n, void *dst);

#endif
