/*
 * ranged.c - small reads of blocks that are not in the chunk store's
 * memory cache: only the segments that cover the read are fetched, with
 * the block's segment table kept in a bounded table cache (see below for
 * when the whole block is fetched instead). Part of the chunk store
 * (chunkstore_int.h); its lock, tlock, is a leaf.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/queue.h>

#include "fs/data/chunkstore.h"
#include "fs/data/chunkstore_int.h"
#include "lib/errors.h"
#include "lib/hash.h"
#include "lib/log.h"

/* The table cache: 1024 chains to start with, 4096 entries at most. */
#define TC_BUCKET_BITS 10
#define TC_MAX_ENTRIES 4096

/*
 * A small read of a block that is not in the memory cache fetches only the
 * segments that cover it (codec.h v2): one GET of the block's prefix
 * (header and segment table, 4 KiB for a 4 MiB block, kept in a bounded
 * table cache so that later reads of the block need one GET), then one
 * ranged GET per read. The whole block is fetched (and cached) instead:
 *  - for a piece of 1/4 of the block or more (RANGE_FRACTION): the saving would
 * be under 4x for an extra round trip, and the kernel's readahead requests (at
 * most max_readahead, 1 MiB, a quarter of the default block) stay whole, so
 *    sequential reads through the page cache fill the memory cache;
 *  - for blocks under 64 KiB (the smallest block size): two round trips to
 *    save a few KiB;
 *  - when the block is in the memory cache or on its way there;
 *  - for v1 (compressed) blocks: their prefix says so, and the table cache
 *    keeps that verdict, so only the first small read pays for it;
 *  - when the access pattern asks for the block: the third read in a row
 *    that starts where the previous one ended (a stream inside the block,
 *    which readahead does not cover: it starts at the next block), or once
 *    the ranged reads of the block have fetched as many bytes as the block
 *    holds (ski rental: a hot block costs at most twice one whole fetch,
 *    and then lives in the memory cache).
 * Ranged reads fill no cache but the table cache: the kernel's page cache
 * keeps what was read.
 */
#define RANGE_MIN_BLOCK	 (64u << 10)
#define RANGE_STREAM_RUN 2 /* reads continuing the previous one */
#define TC_CAP_MIN	 (256u << 10)
#define TC_CAP_MAX	 (16u << 20)

/*
 * The parsed prefix of one block. Hashed while in the table; on the LRU
 * list exactly while hashed. An entry with refs > 0 is never freed; one
 * evicted or dropped while in use is freed by its last table_put(). All
 * fields are protected by tlock, except id/idx/len/prefix/l, immutable
 * once hashed.
 */
struct tentry {
	struct hash_node hn;	 /* in tc_table while hashed */
	TAILQ_ENTRY(tentry) lru; /* in tc_lru while hashed */
	uint64_t id;
	uint32_t idx, len;
	void *prefix;	       /* header + table as fetched; NULL for v1 */
	struct codec_layout l; /* l.table points into prefix */
	size_t cost;	       /* bytes charged to tc_bytes */
	int refs, hashed;
	/* The first reader that misses hashes the entry loading and fetches
	 * the prefix; readers of the block meanwhile wait for it (tc_loaded)
	 * and share its table, or its error (err, set when the fetch failed:
	 * the entry has left the table then, so a later read fetches anew). */
	int loading, err;
	uint64_t rented;   /* bytes of ranged GETs since the last whole read */
	uint32_t next_off; /* where a read continuing the last one starts */
	unsigned run;	   /* reads in a row that continued the previous */
};

int ranged_init(struct chunkstore *cs)
{
	size_t cap = cs->o.mem_cache_bytes / 16;

	pthread_mutex_init(&cs->tlock, NULL);
	pthread_cond_init(&cs->tc_loaded, NULL);
	TAILQ_INIT(&cs->tc_lru);
	/* 1/16 of the memory cache: 16 MiB holds the tables of 16 GiB of
	 * 4 MiB blocks; a store without a memory cache still gets some. */
	cs->tc_cap = cap < TC_CAP_MIN	? TC_CAP_MIN
		     : cap > TC_CAP_MAX ? TC_CAP_MAX
					: cap;
	return hash_init(&cs->tc_table, TC_BUCKET_BITS);
}

static void tentry_free(struct tentry *t)
{
	free(t->prefix);
	free(t);
}

void ranged_release(struct chunkstore *cs)
{
	struct hash_node *n, *next;

	for (n = hash_first(&cs->tc_table); n; n = next) {
		struct tentry *t = hash_entry(n, struct tentry, hn);
		next = hash_next(&cs->tc_table, n);
		gr_assert(t->refs == 0);
		tentry_free(t);
	}
	hash_release(&cs->tc_table);
	pthread_cond_destroy(&cs->tc_loaded);
	pthread_mutex_destroy(&cs->tlock);
}

static int tentry_match(const struct hash_node *n, const void *key)
{
	const struct tentry *t = hash_entry(n, struct tentry, hn);
	const struct block_key *k = key;

	return t->id == k->id && t->idx == k->idx;
}

/* Under tlock. */
static struct tentry *tfind(struct chunkstore *cs, uint64_t id, uint32_t idx)
{
	struct block_key k = {id, idx};
	struct hash_node *n =
	    hash_find(&cs->tc_table, block_hash(id, idx), tentry_match, &k);

	return n ? hash_entry(n, struct tentry, hn) : NULL;
}

/* Under tlock: out of the table, freed now if unused. */
static void tunhash(struct chunkstore *cs, struct tentry *t)
{
	hash_remove(&cs->tc_table, &t->hn);
	t->hashed = 0;
	TAILQ_REMOVE(&cs->tc_lru, t, lru);
	cs->tc_bytes -= t->cost;
	if (t->refs == 0)
		tentry_free(t);
}

void ranged_drop(struct chunkstore *cs, uint64_t id, uint32_t idx)
{
	pthread_mutex_lock(&cs->tlock);
	struct tentry *t = tfind(cs, id, idx);
	if (t)
		tunhash(cs, t);
	pthread_mutex_unlock(&cs->tlock);
}

/* Under tlock: a new entry (one reference, the caller's), or the one a
 * concurrent reader of the block put there first. */
static struct tentry *tinsert(struct chunkstore *cs, struct tentry *n)
{
	struct tentry *t = tfind(cs, n->id, n->idx);

	if (t) {
		tentry_free(n);
		t->refs++;
		return t;
	}
	hash_insert(&cs->tc_table, &n->hn, block_hash(n->id, n->idx));
	n->hashed = 1;
	TAILQ_INSERT_HEAD(&cs->tc_lru, n, lru);
	cs->tc_bytes += n->cost;
	while ((cs->tc_bytes > cs->tc_cap ||
		hash_count(&cs->tc_table) > TC_MAX_ENTRIES) &&
	       (t = TAILQ_LAST(&cs->tc_lru, tentry_lru)) != n)
		tunhash(cs, t);
	return n;
}

/* Under tlock: drop a reference; an entry out of the table goes with its
 * last one. */
static void tput_locked(struct tentry *t)
{
	gr_assert(t->refs > 0);
	if (--t->refs == 0 && !t->hashed)
		tentry_free(t);
}

/* The fetch of t's prefix ended with err (0: t->l and t->prefix are set,
 * cost bytes more to charge): wake its waiters; a failed entry leaves the
 * table and the caller's reference is dropped. */
static void table_loaded(struct chunkstore *cs, struct tentry *t, int err,
			 size_t cost)
{
	pthread_mutex_lock(&cs->tlock);
	t->loading = 0;
	t->err = err;
	if (!err && t->hashed)
		cs->tc_bytes += cost;
	if (!err)
		t->cost += cost;
	pthread_cond_broadcast(&cs->tc_loaded);
	if (err) {
		if (t->hashed)
			tunhash(cs, t); /* refs > 0: stays alive */
		tput_locked(t);
	}
	pthread_mutex_unlock(&cs->tlock);
}

/* Fetch and parse the prefix of t's block into t. Errors: RANGE_WHOLE,
 * CODEC_ECORRUPT (counted and logged), EIO, ENOMEM; *pcost the bytes it
 * keeps. */
static int table_fetch(struct chunkstore *cs, const char *key, struct tentry *t,
		       size_t *pcost)
{
	struct codec_layout l;
	void *pfx = NULL;
	size_t got = 0;
	int err;

	err = objstore_get(cs->store, key, 0, codec_prefix_len(t->len), &pfx,
			   &got);
	STAT_ADD(cs, gets, 1);
	if (err == ENOENT && cs->o.block_wait_ms)
		return RANGE_WHOLE; /* maybe not put yet: fetch() waits */
	if (err) {
		if (err == ENOENT)
			log_err("block '%s' is missing from the object store",
				key);
		else
			/* an outage's give-up is the store's to log */
			log_msg(objstore_transient(err) ? LOG_DEBUG : LOG_ERR,
				"cannot read block '%s': %s", key,
				gr_strerror(err));
		return err == ENOMEM ? ENOMEM : EIO;
	}
	STAT_ADD(cs, get_bytes, got);
	err = codec_parse(pfx, got, &l);
	if (!err && l.raw_len != t->len)
		err = CODEC_ECORRUPT; /* declares other bytes than its key */
	if (err) {
		if (err == CODEC_ECORRUPT) {
			STAT_ADD(cs, corrupt, 1);
			log_err("corrupt header of block '%s' (%zu bytes read, "
				"%" PRIu32 " raw expected): %s",
				key, got, t->len, gr_strerror(err));
		} else {
			log_err("cannot decode block '%s': %s", key,
				gr_strerror(err));
			err = EIO;
		}
		free(pfx);
		return err;
	}
	t->l = l;
	*pcost = 0;
	if (l.ranged) {
		t->prefix = pfx;
		*pcost = got;
	} else {
		free(pfx); /* a v1 block: only the verdict is kept */
		t->l.table = NULL;
	}
	return 0;
}

/* The referenced table entry of a block, fetching its prefix on a miss
 * (once, whoever asks meanwhile: they wait for it); *cached tells whether
 * this reader did not fetch it. Errors: as table_fetch(). */
static int table_get(struct chunkstore *cs, const char *key, uint64_t id,
		     uint32_t idx, uint32_t len, struct tentry **out,
		     int *cached)
{
	struct tentry *t;
	size_t cost = 0;
	int err;

	pthread_mutex_lock(&cs->tlock);
	t = tfind(cs, id, idx);
	if (t) {
		t->refs++;
		TAILQ_REMOVE(&cs->tc_lru, t, lru);
		TAILQ_INSERT_HEAD(&cs->tc_lru, t, lru);
		while (t->loading)
			pthread_cond_wait(&cs->tc_loaded, &cs->tlock);
		err = t->err;
		if (err)
			tput_locked(t);
		pthread_mutex_unlock(&cs->tlock);
		*cached = 1;
		*out = err ? NULL : t;
		return err;
	}
	t = calloc(1, sizeof(*t));
	if (!t) {
		pthread_mutex_unlock(&cs->tlock);
		return ENOMEM;
	}
	t->id = id;
	t->idx = idx;
	t->len = len;
	t->refs = 1;
	t->loading = 1;
	t->next_off = UINT32_MAX; /* no read yet */
	t->cost = sizeof(*t);
	t = tinsert(cs, t);
	pthread_mutex_unlock(&cs->tlock);
	*cached = 0;

	err = table_fetch(cs, key, t, &cost);
	table_loaded(cs, t, err, cost);
	*out = err ? NULL : t;
	return err;
}

static void table_put(struct chunkstore *cs, struct tentry *t)
{
	pthread_mutex_lock(&cs->tlock);
	tput_locked(t);
	pthread_mutex_unlock(&cs->tlock);
}

/* Account a read of [off, off + n) that would GET span bytes; 1 if the
 * pattern asks for the whole block instead (see the rules above). */
static int table_wants_whole(struct chunkstore *cs, struct tentry *t,
			     uint32_t off, uint32_t n, size_t span)
{
	int whole;

	pthread_mutex_lock(&cs->tlock);
	t->run = off == t->next_off ? t->run + 1 : 0;
	t->next_off = off + n;
	whole = t->run >= RANGE_STREAM_RUN || t->rented + span > t->len;
	if (whole) {
		t->rented = 0;
		t->run = 0;
	} else {
		t->rented += span;
	}
	pthread_mutex_unlock(&cs->tlock);
	return whole;
}

/* One attempt; *cached: the table came from the table cache. Returns 0,
 * RANGE_WHOLE, CODEC_ECORRUPT, EIO or ENOMEM. */
static int ranged_once(struct chunkstore *cs, const char *key, uint64_t id,
		       uint32_t idx, uint32_t len, uint32_t off, uint32_t n,
		       void *dst, int *cached)
{
	struct tentry *t;
	void *data = NULL;
	uint64_t boff;
	size_t span, got = 0;
	int err;

	err = table_get(cs, key, id, idx, len, &t, cached);
	if (err)
		return err;
	if (!t->l.ranged) {
		err = RANGE_WHOLE;
		goto put_table;
	}
	err = codec_range(&t->l, off, n, &boff, &span);
	gr_assert(err == 0); /* off + n <= len == raw_len */
	if (table_wants_whole(cs, t, off, n, span)) {
		err = RANGE_WHOLE;
		goto put_table;
	}
	err = objstore_get(cs->store, key, boff, span, &data, &got);
	STAT_ADD(cs, gets, 1);
	if (err) {
		if (err == ENOENT)
			log_err("block '%s' is missing from the object store",
				key);
		else
			/* an outage's give-up is the store's to log */
			log_msg(objstore_transient(err) ? LOG_DEBUG : LOG_ERR,
				"cannot read block '%s': %s", key,
				gr_strerror(err));
		err = err == ENOMEM ? ENOMEM : EIO;
		goto put_table;
	}
	STAT_ADD(cs, get_bytes, got);
	err = codec_range_copy(&t->l, off, n, data, got, dst);
	if (err) {
		err = CODEC_ECORRUPT; /* the only way good arguments fail */
		STAT_ADD(cs, corrupt, 1);
		log_err("corrupt block '%s' (%zu bytes at %" PRIu64
			", %zu read): %s",
			key, span, boff, got, gr_strerror(err));
	} else {
		STAT_ADD(cs, ranged_reads, 1);
	}
	free(data);
put_table:
	table_put(cs, t);
	return err;
}

int ranged_read(struct chunkstore *cs, uint64_t id, uint32_t idx, uint32_t len,
		uint32_t off, uint32_t n, void *dst)
{
	char key[KEY_CAP];
	int cached = 0, err;

	if (len < RANGE_MIN_BLOCK || n >= len / RANGE_FRACTION)
		return RANGE_WHOLE;
	/* Nothing is cheaper than a block in memory or on its way; if it
	 * leaves meanwhile, block_get() fetches it again: no harm. */
	if (chunkstore_cached(cs, id, idx))
		return RANGE_WHOLE;
	/* a block staged on this node is read from its local file */
	if (cs->o.staged_block &&
	    cs->o.staged_block(cs->o.staged_arg, id, idx, NULL, NULL) == 0)
		return RANGE_WHOLE;

	chunkstore_key(id, idx, len, key, sizeof(key));
	err = ranged_once(cs, key, id, idx, len, off, n, dst, &cached);
	if (err == CODEC_ECORRUPT) {
		/* As fetch(): the bytes may be a bad local copy (a disk cache
		 * entry, or the table we kept): drop it, ask once more. */
		ranged_drop(cs, id, idx);
		if (objstore_evict_bad(cs->store, key) == 0 || cached)
			err = ranged_once(cs, key, id, idx, len, off, n, dst,
					  &cached);
		if (err == CODEC_ECORRUPT)
			ranged_drop(cs, id, idx);
	}
	return err == CODEC_ECORRUPT ? EIO : err;
}
