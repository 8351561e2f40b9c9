/*
 * namecache.c - the read-only name cache (namecache.h): lib/hash tables
 * split into lock stripes, each stripe with a clock that evicts just
 * enough of its least recently used names to stay within its share of the
 * bound.
 *
 * Invariants (namecache_check verifies them):
 *   1. An entry is in the table and on the clock of one stripe, or in
 *      neither: then the thread that unlinked it owns it (on a local list
 *      through its clock links) and frees it after dropping the lock.
 *   2. That stripe is the one its hash names (stripe_of), and the table
 *      finds it under that hash; a stripe holds one entry per
 *      (parent, name).
 *   3. A stripe's entries and bytes are the count and the summed
 *      entry_cost of its clock, and its table holds as many; bytes <=
 *      budget once a put returns. The table is fixed (hash_init_fixed):
 *      its buckets, counted out of the stripe's share at open, never
 *      grow.
 *
 * An entry's life:
 *
 *   namecache_put --> on the clock, ref 0 --namecache_get--> ref 1
 *                          ^   |                               |
 *                          |   +------ evict_one (ref 0) ------+--> freed
 *                          +-- evict_one clears ref, requeues -+
 *
 *   A put of the same name, an expired get, evict_one on an expired entry
 *   and namecache_clear also unlink and free it.
 *
 * The clock is a queue: its head is the hand. A hit only sets ref (no list
 * move, the lock held for a compare and a copy); the hand, under a put,
 * gives a referenced entry a second chance by clearing ref and moving it to
 * the tail, and evicts the first one it finds unreferenced or expired.
 */
#include "fs/vfs/namecache.h"
#include "lib/fsutil.h"
#include "lib/hash.h"
#include "lib/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <xxhash.h>

/* Bucket array sizing: one bucket per this many bytes of a stripe's share
 * (about one entry's cost: chains of one or two), at most 2^30 (lib/hash's
 * limit). */
#define BYTES_PER_BUCKET 256
/* Auto striping: up to this many stripes, each at least STRIPE_MIN bytes. */
#define STRIPES_AUTO 64
#define STRIPES_MAX  256
#define STRIPE_MIN   (1u << 20)

struct nc_entry {
	struct hash_node hn;	     /* in its stripe's table; the hash */
	TAILQ_ENTRY(nc_entry) clock; /* the clock, or a list to free */
	uint64_t parent, ino;
	int64_t expires_ns;
	struct meta_attr attr;
	uint16_t nslices; /* chunk 0's, in slices[] */
	uint8_t namelen;  /* name follows slices[], NUL-terminated */
	uint8_t ref;	  /* used since the hand last passed it */
	struct meta_slice slices[];
};

#if defined(__x86_64__) || defined(__aarch64__)
_Static_assert(sizeof(struct nc_entry) == 152,
	       "namecache.h gives an entry's cost: update it");
#endif

TAILQ_HEAD(nc_clock, nc_entry);

struct nc_stripe {
	pthread_mutex_t lock;  /* leaf */
	struct hash table;     /* protected by lock; fixed buckets */
	struct nc_clock clock; /* protected by lock; head: the hand */
	uint64_t bytes;	       /* protected by lock: entries' cost */
	uint64_t entries;      /* protected by lock */
	uint64_t hits, misses, evictions, expired; /* protected by lock */
	uint64_t budget;	/* the stripe's share, less its buckets */
} __attribute__((aligned(64))); /* stripes do not share cache lines */

struct namecache {
	struct nc_stripe *stripes;
	unsigned nstripes; /* a power of two */
	uint64_t max_bytes;
	uint64_t bucket_bytes; /* all stripes' bucket arrays */
	int64_t ttl_ns;
};

/* ---- entries ------------------------------------------------------------ */

static char *entry_name(struct nc_entry *e)
{
	return (char *)&e->slices[e->nslices];
}

static size_t entry_size(size_t namelen, size_t n)
{
	return sizeof(struct nc_entry) + n * sizeof(struct meta_slice) +
	       namelen + 1;
}

size_t namecache_entry_cost(size_t namelen, size_t n)
{
	/* glibc: an 8-byte chunk header, chunks in 16-byte steps, 32 at
	 * least; malloc_usable_size() + 8 agrees on x86-64 */
	size_t c = (entry_size(namelen, n) + 8 + 15) & ~(size_t)15;
	return c < 32 ? 32 : c;
}

static uint64_t name_hash(uint64_t parent, const char *name, size_t len)
{
	return XXH3_64bits_withSeed(name, len, parent);
}

static struct nc_stripe *stripe_of(struct namecache *nc, uint64_t h)
{
	return &nc->stripes[(h >> 56) & (nc->nstripes - 1)];
}

struct nc_key {
	uint64_t parent;
	const char *name;
	size_t len;
};

static int match_name(const struct hash_node *n, const void *key)
{
	struct nc_entry *e = hash_entry(n, struct nc_entry, hn);
	const struct nc_key *k = key;

	return e->parent == k->parent && e->namelen == k->len &&
	       !memcmp(entry_name(e), k->name, k->len);
}

/* lock held */
static struct nc_entry *find(struct nc_stripe *st, uint64_t h, uint64_t parent,
			     const char *name, size_t len)
{
	struct nc_key k = {parent, name, len};
	struct hash_node *n = hash_find(&st->table, h, match_name, &k);

	return n ? hash_entry(n, struct nc_entry, hn) : NULL;
}

/* lock held: take e out of the table and off the clock; the caller frees
 * it. */
static void unlink_entry(struct nc_stripe *st, struct nc_entry *e)
{
	hash_remove(&st->table, &e->hn);
	TAILQ_REMOVE(&st->clock, e, clock);
	st->bytes -= namecache_entry_cost(e->namelen, e->nslices);
	st->entries--;
}

/* lock held, clock not empty: move the hand until it frees one entry,
 * which goes on *dead. Ends within two turns: the first clears every ref
 * it passes. */
static void evict_one(struct nc_stripe *st, int64_t now, struct nc_clock *dead)
{
	for (;;) {
		struct nc_entry *e = TAILQ_FIRST(&st->clock);
		gr_assert(e != NULL);
		int live = e->expires_ns > now;
		if (e->ref && live) {
			e->ref = 0;
			TAILQ_REMOVE(&st->clock, e, clock);
			TAILQ_INSERT_TAIL(&st->clock, e, clock);
			continue;
		}
		unlink_entry(st, e);
		if (live)
			st->evictions++;
		else
			st->expired++;
		TAILQ_INSERT_TAIL(dead, e, clock);
		return;
	}
}

static void free_list(struct nc_clock *dead)
{
	struct nc_entry *e;

	while ((e = TAILQ_FIRST(dead))) {
		TAILQ_REMOVE(dead, e, clock);
		free(e);
	}
}

/* ---- API ---------------------------------------------------------------- */

int namecache_open(const struct namecache_opts *o, struct namecache **out)
{
	uint64_t max = o->max_bytes ? o->max_bytes : NAMECACHE_DEFAULT_SIZE;
	unsigned ns = o->stripes;
	struct namecache *nc;

	*out = NULL;
	if (!ns)
		for (ns = STRIPES_AUTO; ns > 1 && max / ns < STRIPE_MIN;)
			ns /= 2;
	if (ns > STRIPES_MAX || (ns & (ns - 1)))
		return EINVAL;
	uint64_t share = max / ns;
	unsigned bits = 0;
	while ((2ull << bits) <= share / BYTES_PER_BUCKET && bits < 30)
		bits++;
	uint64_t nb = 1ull << (bits ? bits : 1); /* lib/hash: 2 at least */
	uint64_t bucket_bytes = nb * sizeof(struct hash_node *);
	if (share <= bucket_bytes + namecache_entry_cost(0, 0))
		return EINVAL; /* not even one entry would fit */

	nc = calloc(1, sizeof(*nc));
	if (!nc)
		return ENOMEM;
	nc->nstripes = ns;
	nc->max_bytes = max;
	nc->ttl_ns = o->ttl_ns;
	nc->stripes = aligned_alloc(64, ns * sizeof(*nc->stripes));
	if (!nc->stripes)
		goto free_nc;
	memset(nc->stripes, 0, ns * sizeof(*nc->stripes));
	for (unsigned i = 0; i < ns; i++) {
		struct nc_stripe *st = &nc->stripes[i];
		if (hash_init_fixed(&st->table, bits ? bits : 1)) {
			nc->nstripes = i;
			goto free_stripes;
		}
		pthread_mutex_init(&st->lock, NULL);
		TAILQ_INIT(&st->clock);
		st->budget = share - bucket_bytes;
		nc->bucket_bytes += bucket_bytes;
	}
	*out = nc;
	return 0;

free_stripes:
	namecache_close(nc);
	return ENOMEM;
free_nc:
	free(nc);
	return ENOMEM;
}

void namecache_close(struct namecache *nc)
{
	if (!nc)
		return;
	namecache_clear(nc);
	for (unsigned i = 0; i < nc->nstripes; i++) {
		pthread_mutex_destroy(&nc->stripes[i].lock);
		hash_release(&nc->stripes[i].table);
	}
	free(nc->stripes);
	free(nc);
}

int namecache_put(struct namecache *nc, uint64_t parent, const char *name,
		  uint64_t ino, const struct meta_attr *a,
		  const struct meta_slice *s, size_t n)
{
	size_t len = strlen(name);
	if (len > UINT8_MAX || n > UINT16_MAX)
		return EFBIG;
	uint64_t h = name_hash(parent, name, len);
	struct nc_stripe *st = stripe_of(nc, h);
	size_t cost = namecache_entry_cost(len, n);
	if (cost > st->budget)
		return EFBIG;

	struct nc_entry *e = malloc(entry_size(len, n));
	if (!e)
		return ENOMEM;
	int64_t now = fsutil_mono_ns();
	e->parent = parent;
	e->ino = ino;
	e->expires_ns = now + nc->ttl_ns;
	e->attr = *a;
	e->nslices = (uint16_t)n;
	e->namelen = (uint8_t)len;
	e->ref = 0;
	if (n)
		memcpy(e->slices, s, n * sizeof(*s));
	memcpy(entry_name(e), name, len + 1);

	struct nc_clock dead = TAILQ_HEAD_INITIALIZER(dead);
	pthread_mutex_lock(&st->lock);
	struct nc_entry *old = find(st, h, parent, name, len);
	if (old) { /* a refresh, not an eviction */
		unlink_entry(st, old);
		TAILQ_INSERT_TAIL(&dead, old, clock);
	}
	while (st->bytes + cost > st->budget)
		evict_one(st, now, &dead);
	hash_insert(&st->table, &e->hn, h);
	TAILQ_INSERT_TAIL(&st->clock, e, clock);
	st->bytes += cost;
	st->entries++;
	pthread_mutex_unlock(&st->lock);
	free_list(&dead);
	return 0;
}

int namecache_get(struct namecache *nc, uint64_t parent, const char *name,
		  uint64_t *ino, struct meta_attr *a, struct meta_slice **s,
		  size_t *n)
{
	size_t len = strlen(name);
	uint64_t h = name_hash(parent, name, len);
	struct nc_stripe *st = stripe_of(nc, h);
	int64_t now = fsutil_mono_ns();
	struct nc_entry *e, *expired = NULL;
	int hit = 0;

	*s = NULL;
	*n = 0;
	pthread_mutex_lock(&st->lock);
	e = find(st, h, parent, name, len);
	if (e && e->expires_ns <= now) {
		unlink_entry(st, e);
		st->expired++;
		expired = e;
	} else if (e) {
		*s = e->nslices ? malloc(e->nslices * sizeof(**s)) : NULL;
		if (*s || !e->nslices) {
			if (e->nslices)
				memcpy(*s, e->slices, e->nslices * sizeof(**s));
			*n = e->nslices;
			*ino = e->ino;
			*a = e->attr;
			if (!e->ref) /* spare the cache line when set */
				e->ref = 1;
			hit = 1;
		}
	}
	if (hit)
		st->hits++;
	else
		st->misses++;
	pthread_mutex_unlock(&st->lock);
	free(expired);
	return hit;
}

void namecache_clear(struct namecache *nc)
{
	for (unsigned i = 0; i < nc->nstripes; i++) {
		struct nc_stripe *st = &nc->stripes[i];
		struct nc_clock all = TAILQ_HEAD_INITIALIZER(all);
		struct nc_entry *e;

		pthread_mutex_lock(&st->lock);
		TAILQ_CONCAT(&all, &st->clock, clock);
		hash_clear(&st->table); /* spares a new cache's pages */
		st->bytes = 0;
		st->entries = 0;
		pthread_mutex_unlock(&st->lock);
		while ((e = TAILQ_FIRST(&all))) {
			TAILQ_REMOVE(&all, e, clock);
			free(e);
		}
	}
}

void namecache_get_stats(struct namecache *nc, struct namecache_stats *out)
{
	memset(out, 0, sizeof(*out));
	out->max_bytes = nc->max_bytes;
	out->bytes = nc->bucket_bytes;
	for (unsigned i = 0; i < nc->nstripes; i++) {
		struct nc_stripe *st = &nc->stripes[i];
		pthread_mutex_lock(&st->lock);
		out->hits += st->hits;
		out->misses += st->misses;
		out->evictions += st->evictions;
		out->expired += st->expired;
		out->entries += st->entries;
		out->bytes += st->bytes;
		pthread_mutex_unlock(&st->lock);
	}
}

void namecache_check(struct namecache *nc)
{
	for (unsigned i = 0; i < nc->nstripes; i++) {
		struct nc_stripe *st = &nc->stripes[i];
		uint64_t bytes = 0, entries = 0, chained = 0;
		struct hash_node *n;
		struct nc_entry *e;

		pthread_mutex_lock(&st->lock);
		TAILQ_FOREACH(e, &st->clock, clock) {
			const char *name = entry_name(e);
			uint64_t h = name_hash(e->parent, name, e->namelen);
			gr_assert(strlen(name) == e->namelen);
			gr_assert(e->hn.hash == h);	   /* 2 */
			gr_assert(stripe_of(nc, h) == st); /* 2 */
			gr_assert(find(st, h, e->parent, name, e->namelen) ==
				  e); /* 1, 2 */
			bytes += namecache_entry_cost(e->namelen, e->nslices);
			entries++;
		}
		for (n = hash_first(&st->table); n;
		     n = hash_next(&st->table, n))
			chained++;
		gr_assert(chained == entries);		      /* 1 */
		gr_assert(hash_count(&st->table) == entries); /* 3 */
		gr_assert(bytes == st->bytes);		      /* 3 */
		gr_assert(entries == st->entries);
		gr_assert(st->bytes <= st->budget);
		pthread_mutex_unlock(&st->lock);
	}
}
