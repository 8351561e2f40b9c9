/*
 * diskcache.h - a read cache of objects on the node's local disks (NVMe),
 * as a decorator over an object store: diskcache_open() wraps a store and
 * hands out a struct objstore that serves gets from local files when it
 * can, and fills them from the store when it cannot.
 *
 * Entries are whole objects (encoded blocks: their XXH3 is checked by the
 * chunk store on every read; a bad entry is dropped through
 * objstore_evict() and fetched again). The index is rebuilt from the
 * directories at open, so a remount or a crash keeps the warm cache. The
 * size limit holds also under parallel fills (never more than one object
 * over); a full disk, or a fill that fails, means no caching, never a failed
 * read.
 *
 * Whole-object views (objstore_get_view): a hit maps the entry's file (no
 * copy); a miss fills the cache from the backend's view once the reader
 * calls objstore_view_verified(), on filler threads fed by a bounded
 * queue (FILLQ_MAX): when it is full the reader writes the entry itself.
 * A view released unverified (it failed its checksum) fills nothing.
 *
 * Eviction: least recently used, with an admission guard for training
 * epochs. A dataset larger than the cache read once per epoch in shuffled
 * order would make plain LRU churn (each block evicted just before its next
 * use, hit rate about (C/N)^2 / 2 for cache C and data N); so an entry used
 * within the last `min_age` seconds is never evicted to admit a new one: the
 * cache then keeps a stable subset and hits C/N, and writes nothing new. An
 * entry unused for min_age is evicted as usual, so a new dataset replaces
 * an old one.
 */
#ifndef GRANARY_DISKCACHE_H
#define GRANARY_DISKCACHE_H

#include <stddef.h>
#include <stdint.h>
#include "fs/store/objstore.h"

struct diskcache_opts {
	const char *dirs;  /* "DIR[:DIR...]"; entries spread by key hash */
	const char *ns;	   /* subdirectory per volume (its uuid) */
	uint64_t size;	   /* byte limit over all dirs; must be > 0 */
	double free_ratio; /* keep this fraction of each disk free (0.1) */
	unsigned min_age;  /* seconds; see the eviction rule above (600) */
	int cache_writes;  /* also keep what is put through the cache */
	/* A ranged get of a key under this prefix (NULL: none) that misses
	 * fetches and caches the whole object when the cache would admit
	 * whole_est bytes: for packs, whose other frames the same epoch will
	 * read. Other ranged gets pass through uncached. */
	const char *whole_prefix;
	uint64_t whole_est;
};

struct diskcache_stats {
	uint64_t hits, misses, hit_bytes;
	uint64_t fills, fill_skips; /* skipped: full, guarded, disk error */
	uint64_t fill_inline;	    /* of fills: by the reader, queue full */
	/* ranged gets answered from a whole fetch of their object that was
	 * in flight (a pack fetched once for its concurrent readers) */
	uint64_t flight_waits;
	uint64_t evictions; /* by the LRU, to make room */
	/* of evictions: demoted entries, planned entries (the furthest
	 * ahead); fills refused because their own rank was further */
	uint64_t evict_demoted, evict_planned, fill_ranked_out;
	uint64_t demoted; /* diskcache_demote calls that found an entry */
	uint64_t evicted;   /* by request (objstore_evict) */
	/* dropped because they failed their checksum (objstore_evict_bad)
	 * or could not be read back whole */
	uint64_t bad_entries;
	uint64_t entries, bytes; /* now */
};

/*
 * Wrap backend (ownership passes to the cache: objstore_close() of *out
 * closes both; on error the backend is left to the caller). Creates the
 * directories if needed and indexes what they hold. ns must be one path
 * component. Errors: a directory that cannot be created or read.
 */
int diskcache_open(struct objstore *backend, const struct diskcache_opts *o,
		   struct objstore **out);
/* The wrapped store (for counting the gets that reached it). */
struct objstore *diskcache_backend(struct objstore *cache);
void diskcache_get_stats(struct objstore *cache, struct diskcache_stats *st);
/* Wait until the fills queued by objstore_view_verified() are written. */
void diskcache_sync(struct objstore *cache);
/* 1 if key is cached whole, 0 if not. */
int diskcache_contains(struct objstore *cache, const char *key);
/*
 * For a cache group's server (group.h): key's entry opened for reading,
 * to be sent with sendfile: *fd (the caller's to close) and *size. The fd
 * stays valid after an eviction unlinks the file (its blocks are freed at
 * the close, so what the caller holds open is bounded by its own count of
 * open answers). A hit, counted as one. ENOENT when key is not cached
 * whole (an entry that is not of its indexed size is dropped).
 */
int diskcache_open_entry(struct objstore *cache, const char *key, int *fd,
			 uint64_t *size);
/*
 * A fill from bytes got elsewhere (a cache group's peer), as a view's
 * miss fills the cache: diskcache_fill_begin() before fetching them (a
 * put, delete or eviction of key meanwhile makes the fill moot; NULL:
 * nothing to fill, the key is cached or being filled), then either
 * diskcache_fill_hang() on the view that holds them, so that they are
 * written once the reader calls objstore_view_verified() (nothing if the
 * view is released unchecked), or diskcache_fill_cancel() when the fetch
 * failed. Both take a NULL fill.
 */
void *diskcache_fill_begin(struct objstore *cache, const char *key);
void diskcache_fill_hang(struct objstore *cache, void *fill,
			 struct objstore_view *v);
void diskcache_fill_cancel(struct objstore *cache, void *fill);

/*
 * The future, from the epoch plans (fs/vfs/plan.h). A ranker says of a
 * key when it is needed next: DISKCACHE_RANK_KEEP (0) while it is inside
 * a plan's window (never evicted), a rank (larger: needed later) when a
 * plan names it ahead, DISKCACHE_RANK_NONE when no plan does.
 *
 * With a ranker set, making room takes, in this order: demoted entries
 * (diskcache_demote: the plans are done with them), then entries ranked
 * NONE by the LRU rule above (min_age still guards them: another reader,
 * not planned, may be using them), then planned entries, the one needed
 * furthest ahead first, among the SCAN_MAX oldest of the LRU (an
 * approximation of Belady's rule that costs a bounded walk); KEEP entries
 * never. A fill whose own rank is further ahead than every entry it would
 * have to evict is not admitted (it would push out something needed
 * sooner). A ranker that ranks everything NONE (no plans) leaves the
 * rules above exactly as they were.
 *
 * passed (may be NULL) says of a key whether the plans' readers have read
 * some of it already in their current pass (a file of a pack behind
 * them): a ranged get of it that misses then passes through rather than
 * fetch the whole object by whole_prefix's rule, whose other frames it
 * was to bring were read (epoch 2: the first files of a pack read by
 * ranges while the cache was full, the last one fetched the pack whole).
 *
 * Both are called with the cache's lock held: they must be quick and must
 * not call into the cache. diskcache_set_ranker(cache, NULL, NULL, NULL)
 * unsets them; it returns once no call of the old ones is under way.
 */
#define DISKCACHE_RANK_KEEP 0
#define DISKCACHE_RANK_NONE UINT64_MAX
typedef uint64_t (*diskcache_rank_fn)(void *arg, const char *key);
typedef int (*diskcache_passed_fn)(void *arg, const char *key);
void diskcache_set_ranker(struct objstore *cache, diskcache_rank_fn rank,
			  diskcache_passed_fn passed, void *arg);
/* The plans are done with key: its entry (if any) goes to the old end of
 * the LRU, marked to be evicted before any other, min_age or not. A later
 * hit of it clears the mark; while the ranker ranks key other than NONE
 * (the plans changed and need it again), the mark does not count.
 * Counted in diskcache_stats.demoted. */
void diskcache_demote(struct objstore *cache, const char *key);
/* Would a fill of len bytes for key be admitted now without evicting an
 * entry the ranker ranks other than NONE (free room, demoted or unplanned
 * entries)? The plans ask before a fetch ahead of their readers: to evict
 * a planned entry for it is to fetch that entry again later, and without
 * the fetch ahead the reader's own fetch brings the bytes once. 1 (yes)
 * where cache is no disk cache. */
int diskcache_room(struct objstore *cache, const char *key, uint64_t len);

/*
 * The namespaces a volume no longer uses (diskcache_sweep.c): in each
 * directory of dirs ("DIR[:DIR...]"), every DIR/<prefix> and
 * DIR/<prefix>.<anything> but DIR/<keep> (a load gives a restored volume
 * a new namespace: its objects of before must never be served) is
 * renamed at once to DIR/.sweep-<name>, never opened again, and removed
 * by a background job, with what an earlier sweep left. *out is NULL
 * when there was nothing to remove. diskcache_sweep_stop() (NULL-safe)
 * stops the job at its next file; the next sweep removes the rest.
 */
struct diskcache_sweep;
int diskcache_sweep_start(const char *dirs, const char *prefix,
			  const char *keep, struct diskcache_sweep **out);
void diskcache_sweep_stop(struct diskcache_sweep *sw);

#endif
