/*
 * namecache.h - the name cache of read-only mounts: (parent, name) -> inode,
 * its attributes and chunk 0's slice list, kept for the entry timeout so
 * that a kernel that dropped its dentries (memory pressure) looks a name up
 * again without a metadata round trip, epoch after epoch.
 *
 * The cache is bounded in bytes, not entries. When a put would go past the
 * bound, a clock (second chance) evicts just enough of the least recently
 * used names; it never starts over, so a dataset larger than the cache
 * keeps most of it cached.
 *
 * Cost of one entry (x86-64, glibc): a single allocation of a 152-byte
 * header (hash node and clock links, parent, inode, expiry, meta_attr),
 * 40 bytes per chunk-0 slice and the name with its NUL, rounded up as malloc
 * does (+8, to 16 bytes). The hash buckets (lib/hash tables that never
 * grow), 8 bytes per 256 to 512 bytes of the bound, are allocated at open
 * (pages touched as names come) and count against the bound: at most 1/32
 * of it. An ImageNet file
 * ("n01440764_10026.JPEG", one slice) costs 224 bytes: its 1.28M training
 * names take 274 MiB, and the default bound (512 MiB) holds 2.3M such
 * names.
 * namecache_entry_cost() gives the exact figure for a name.
 *
 * Nothing here invalidates a name: read-only mounts serve a dataset nobody
 * changes meanwhile, and an entry simply expires ttl_ns after its put.
 *
 * Thread-safe. The cache is split into stripes by hash, each with its own
 * lock, hash table, clock and share of the bound; a stripe's lock is a leaf
 * (nothing else is taken under it). A hit only sets the entry's reference
 * bit: it never moves list nodes.
 */
#ifndef GRANARY_NAMECACHE_H
#define GRANARY_NAMECACHE_H

#include <stddef.h>
#include <stdint.h>

#include "meta/meta.h"

/* default bound: 2.3M ImageNet-like names (ImageNet has 1.28M) */
#define NAMECACHE_DEFAULT_SIZE (512ull << 20)

struct namecache;

struct namecache_opts {
	uint64_t max_bytes; /* entries and buckets stay within this; 0: the
			       default (NAMECACHE_DEFAULT_SIZE) */
	int64_t ttl_ns;	    /* a name is served this long after its put */
	unsigned stripes;   /* lock stripes, a power of two up to 256; 0:
			       from max_bytes (64 for a bound of 64 MiB or
			       more; each stripe gets at least 1 MiB) */
};

struct namecache_stats {
	uint64_t hits, misses; /* gets; an expired name is a miss */
	uint64_t evictions;    /* names evicted to stay within the bound */
	uint64_t expired;      /* names dropped because their ttl ran out */
	uint64_t entries;      /* names cached now */
	uint64_t bytes;	       /* their cost, buckets included */
	uint64_t max_bytes;    /* the bound */
};

/* Returns 0, EINVAL (bad stripes, or a bound too small for its buckets)
 * or ENOMEM. */
int namecache_open(const struct namecache_opts *o, struct namecache **out);
/* Free every entry and the cache. NULL-safe. No call may be running. */
void namecache_close(struct namecache *nc);

/*
 * Remember parent/name -> ino with its attributes and chunk 0's n slices
 * (copied), replacing what was cached for that name. Evicts older names
 * when the bound is reached. Returns 0, ENOMEM, or EFBIG when the entry
 * alone is more than a stripe may hold (then nothing is cached).
 */
int namecache_put(struct namecache *nc, uint64_t parent, const char *name,
		  uint64_t ino, const struct meta_attr *a,
		  const struct meta_slice *s, size_t n);
/*
 * 1 when parent/name is cached and not expired: fills *ino, *a, and *s
 * with a malloc'd copy of chunk 0's slices (NULL when *n is 0; the caller
 * frees it). 0 otherwise (also when that copy cannot be allocated), with
 * *s NULL and *n 0.
 */
int namecache_get(struct namecache *nc, uint64_t parent, const char *name,
		  uint64_t *ino, struct meta_attr *a, struct meta_slice **s,
		  size_t *n);
/* Drop every name (counters other than entries and bytes stay). */
void namecache_clear(struct namecache *nc);

/* Counters, summed over the stripes one at a time (not a snapshot). */
void namecache_get_stats(struct namecache *nc, struct namecache_stats *st);
/* What a name of namelen bytes with n chunk-0 slices costs, buckets
 * aside. */
size_t namecache_entry_cost(size_t namelen, size_t n);
/* Walk every stripe and abort (file and line) on a broken invariant (see
 * namecache.c). O(entries): for tests. */
void namecache_check(struct namecache *nc);

#endif
