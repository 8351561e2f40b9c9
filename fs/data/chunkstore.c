/*
 * chunkstore.c - slices as blocks in an object store, behind a bounded
 * in-memory cache of decoded blocks. The cache also coalesces misses: the
 * first reader of a cold block fetches it, later readers of the same block
 * wait for that fetch instead of issuing their own. A small pool of
 * prefetch threads runs the same fetch path from a bounded queue, so a
 * reader that arrives while a prefetch of its block is in flight waits for
 * it too. Small reads of blocks not in memory are ranged reads (ranged.c);
 * what the two files share is in chunkstore_int.h.
 */
#include "fs/data/chunkstore.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <time.h>

#include "fs/data/chunkstore_int.h"
#include "lib/bigbuf.h"
#include "lib/fsutil.h"
#include "lib/hash.h"
#include "lib/log.h"
#include "lib/workq.h"

#define BLOCK_MIN      (64u << 10)
#define BLOCK_MAX      (16u << 20)
#define PF_THREADS_MAX 64
#define PF_QUEUE_MIN   64 /* entries; at least 4 per thread */
/* How long a read waits for a pack that is not in the store yet: a
 * writeback client uploads its packs within its pack window and then some. */
#define PACK_WAIT_MS 15000

enum centry_state { CE_LOADING, CE_READY, CE_FAILED };

/*
 * One block, decoded. Lives in the hash table while `hashed`; on the LRU
 * list only while ready and unused (refs == 0). An entry with refs > 0 is
 * never freed; one that was unhashed while in use is freed by its last
 * release. All fields but id/idx/len are protected by chunkstore->lock;
 * data is immutable once state is CE_READY.
 */
struct centry {
	struct hash_node hn;	 /* in the table while hashed */
	TAILQ_ENTRY(centry) lru; /* while on_lru */
	uint64_t id;
	uint32_t idx, len;
	struct chunkstore_frame fr; /* fr.pack 0: a block of its own */
	void *mem; /* what the block's bytes live in (freed with it) */
	struct objstore_view view; /* or these (released with it) */
	const void *data; /* the raw bytes, len of them, inside mem or view */
	int refs;
	int state; /* enum centry_state */
	int err;   /* CE_FAILED: what waiters return */
	int hashed, on_lru;
	int by_prefetch;     /* loaded by a prefetch thread */
	pthread_cond_t done; /* broadcast when state leaves CE_LOADING */
};

struct pf_req {
	struct workq_job job; /* first; queued while seq != 0 */
	struct chunkstore *cs;
	uint64_t seq; /* 0: a free slot; else the request's number */
	uint64_t id;
	uint32_t idx, len;
	struct chunkstore_frame fr;
};

/* ---- keys ---- */

void chunkstore_key(uint64_t id, uint32_t idx, uint32_t len, char *buf,
		    size_t cap)
{
	/* Two levels of prefixes keep any listing or directory of the store
	 * to about a thousand entries per level. */
	snprintf(buf, cap,
		 "blocks/%" PRIu64 "/%" PRIu64 "/%" PRIu64 "_%" PRIu32
		 "_%" PRIu32,
		 id / 1000000, (id / 1000) % 1000, id, idx, len);
}

void chunkstore_pack_key(uint64_t pack, char *buf, size_t cap)
{
	snprintf(buf, cap, "packs/%" PRIu64 "/%" PRIu64 "/%" PRIu64,
		 pack / 1000000, (pack / 1000) % 1000, pack);
}

/* A decimal number up to the next `stop` (0: the end); advances *p. */
static int key_u64(const char **p, char stop, uint64_t *v)
{
	const char *q = *p;
	uint64_t x = 0;

	if (*q < '0' || *q > '9' || (*q == '0' && q[1] >= '0' && q[1] <= '9'))
		return 0; /* no digits, or a leading zero */
	for (; *q >= '0' && *q <= '9'; q++) {
		if (x > (UINT64_MAX - 9) / 10)
			return 0;
		x = x * 10 + (uint64_t)(*q - '0');
	}
	if (*q != stop)
		return 0;
	*p = stop ? q + 1 : q;
	*v = x;
	return 1;
}

int chunkstore_parse_key(const char *key, struct chunkstore_keyinfo *k)
{
	const char *p;
	uint64_t a, b, id, idx = 0, len = 0;
	int block;

	if (strncmp(key, "blocks/", 7) == 0)
		block = 1, p = key + 7;
	else if (strncmp(key, "packs/", 6) == 0)
		block = 0, p = key + 6;
	else
		return 0;
	if (!key_u64(&p, '/', &a) || !key_u64(&p, '/', &b) ||
	    !key_u64(&p, block ? '_' : 0, &id) ||
	    (block && (!key_u64(&p, '_', &idx) || !key_u64(&p, 0, &len))) ||
	    a != id / 1000000 || b != (id / 1000) % 1000 || idx > UINT32_MAX ||
	    len > UINT32_MAX)
		return 0;
	*k = (struct chunkstore_keyinfo){.pack = !block,
					 .id = id,
					 .idx = (uint32_t)idx,
					 .len = (uint32_t)len};
	return 1;
}

static const struct chunkstore_frame no_frame;

static uint32_t block_len(const struct chunkstore *cs, uint32_t size,
			  uint32_t idx)
{
	uint64_t start = (uint64_t)idx * cs->o.block_size;
	uint64_t left = size - start;

	return left < cs->o.block_size ? (uint32_t)left : cs->o.block_size;
}

/* ---- open / close ---- */

static void pf_run(struct workq_job *job);
static void pf_stop_all(struct chunkstore *cs);

int chunkstore_open(struct objstore *store, const struct chunkstore_opts *o,
		    struct chunkstore **out)
{
	struct chunkstore *cs;
	int err = ENOMEM;

	if (!out)
		return EINVAL;
	*out = NULL;
	if (!store || !o || o->block_size < BLOCK_MIN ||
	    o->block_size > BLOCK_MAX ||
	    (o->compress != CODEC_NONE && o->compress != CODEC_LZ4) ||
	    o->prefetch_threads < 0 || o->prefetch_threads > PF_THREADS_MAX)
		return EINVAL;
	cs = calloc(1, sizeof(*cs));
	if (!cs)
		return ENOMEM;
	if (hash_init(&cs->table, 8))
		goto free_cs;
	TAILQ_INIT(&cs->lru);
	cs->store = store;
	cs->o = *o;
	pthread_mutex_init(&cs->lock, NULL);
	pthread_mutex_init(&cs->pf_lock, NULL);
	if (ranged_init(cs))
		goto free_pf; /* err is ENOMEM */
	if (o->prefetch_threads > 0) {
		size_t n = (size_t)o->prefetch_threads;
		cs->pf_cap = 4 * n > PF_QUEUE_MIN ? 4 * n : PF_QUEUE_MIN;
		cs->pf_slots = calloc(cs->pf_cap, sizeof(*cs->pf_slots));
		cs->pf_busy = calloc(n, sizeof(*cs->pf_busy));
		cs->pf_nrecent = 2 * n;
		cs->pf_recent = calloc(cs->pf_nrecent, sizeof(*cs->pf_recent));
		if (!cs->pf_slots || !cs->pf_busy || !cs->pf_recent)
			goto free_pf;
		for (size_t i = 0; i < cs->pf_cap; i++)
			cs->pf_slots[i] =
			    (struct pf_req){.job.run = pf_run, .cs = cs};
		err = workq_open("gr-prefetch", o->prefetch_threads, cs->pf_cap,
				 &cs->pf_q);
		if (err) {
			log_err("cannot start prefetch threads: %s",
				strerror(err));
			goto free_pf;
		}
		cs->pf_nthreads = o->prefetch_threads;
	}
	*out = cs;
	return 0;

free_pf:
	free(cs->pf_busy);
	free(cs->pf_recent);
	free(cs->pf_slots);
	pthread_mutex_destroy(&cs->pf_lock);
	ranged_release(cs);
	pthread_mutex_destroy(&cs->lock);
	hash_release(&cs->table);
free_cs:
	free(cs);
	return err;
}

static void centry_free(struct centry *e)
{
	pthread_cond_destroy(&e->done);
	bigbuf_free(e->mem);
	objstore_view_release(&e->view);
	free(e);
}

void chunkstore_close(struct chunkstore *cs)
{
	if (!cs)
		return;
	/* First: the workers are the only other holders of entries. */
	pf_stop_all(cs);
	free(cs->pf_busy);
	free(cs->pf_recent);
	free(cs->pf_slots);
	pthread_mutex_destroy(&cs->pf_lock);
	struct hash_node *n, *next;
	for (n = hash_first(&cs->table); n; n = next) {
		struct centry *e = hash_entry(n, struct centry, hn);
		next = hash_next(&cs->table, n);
		gr_assert(e->refs == 0);
		centry_free(e);
	}
	hash_release(&cs->table);
	ranged_release(cs);
	pthread_mutex_destroy(&cs->lock);
	free(cs);
}

uint32_t chunkstore_block_size(const struct chunkstore *cs)
{
	return cs->o.block_size;
}

void chunkstore_get_stats(struct chunkstore *cs, struct chunkstore_stats *st)
{
	st->gets = __atomic_load_n(&cs->st.gets, __ATOMIC_RELAXED);
	st->get_bytes = __atomic_load_n(&cs->st.get_bytes, __ATOMIC_RELAXED);
	st->puts = __atomic_load_n(&cs->st.puts, __ATOMIC_RELAXED);
	st->put_bytes = __atomic_load_n(&cs->st.put_bytes, __ATOMIC_RELAXED);
	st->dels = __atomic_load_n(&cs->st.dels, __ATOMIC_RELAXED);
	st->cache_hits = __atomic_load_n(&cs->st.cache_hits, __ATOMIC_RELAXED);
	st->cache_misses =
	    __atomic_load_n(&cs->st.cache_misses, __ATOMIC_RELAXED);
	st->corrupt = __atomic_load_n(&cs->st.corrupt, __ATOMIC_RELAXED);
	st->prefetched = __atomic_load_n(&cs->st.prefetched, __ATOMIC_RELAXED);
	st->prefetch_drops =
	    __atomic_load_n(&cs->st.prefetch_drops, __ATOMIC_RELAXED);
	st->ranged_reads =
	    __atomic_load_n(&cs->st.ranged_reads, __ATOMIC_RELAXED);
	st->cache_evictions =
	    __atomic_load_n(&cs->st.cache_evictions, __ATOMIC_RELAXED);
	pthread_mutex_lock(&cs->lock);
	st->cache_bytes = cs->cached_bytes;
	st->cache_entries = hash_count(&cs->table);
	pthread_mutex_unlock(&cs->lock);
}

/* ---- cache table and LRU (all under cs->lock) ---- */

static int centry_match(const struct hash_node *n, const void *key)
{
	const struct centry *e = hash_entry(n, struct centry, hn);
	const struct block_key *k = key;

	return e->id == k->id && e->idx == k->idx;
}

static struct centry *find(struct chunkstore *cs, uint64_t id, uint32_t idx)
{
	struct block_key k = {id, idx};
	struct hash_node *n =
	    hash_find(&cs->table, block_hash(id, idx), centry_match, &k);

	return n ? hash_entry(n, struct centry, hn) : NULL;
}

int chunkstore_cached(struct chunkstore *cs, uint64_t id, uint32_t idx)
{
	pthread_mutex_lock(&cs->lock);
	int known = find(cs, id, idx) != NULL;
	pthread_mutex_unlock(&cs->lock);
	return known;
}

static void lru_remove(struct chunkstore *cs, struct centry *e)
{
	if (!e->on_lru)
		return;
	TAILQ_REMOVE(&cs->lru, e, lru);
	e->on_lru = 0;
}

/* Take e out of the table; freed now if unused, else by its last release. */
static void unhash(struct chunkstore *cs, struct centry *e)
{
	hash_remove(&cs->table, &e->hn);
	e->hashed = 0;
	if (e->state == CE_READY)
		cs->cached_bytes -= e->len;
	lru_remove(cs, e);
	if (e->refs == 0)
		centry_free(e);
}

/* Blocks in use are not on the LRU list, so the cache can exceed its bound
 * by the blocks that readers hold at this moment, never by more. */
static void evict(struct chunkstore *cs)
{
	struct centry *e;

	while (cs->cached_bytes > cs->o.mem_cache_bytes &&
	       (e = TAILQ_LAST(&cs->lru, centry_lru))) {
		unhash(cs, e);
		__atomic_add_fetch(&cs->st.cache_evictions, 1,
				   __ATOMIC_RELAXED);
	}
}

static void drop_cached(struct chunkstore *cs, uint64_t id, uint32_t idx)
{
	pthread_mutex_lock(&cs->lock);
	struct centry *e = find(cs, id, idx);
	if (e)
		unhash(cs, e);
	pthread_mutex_unlock(&cs->lock);
	ranged_drop(cs, id, idx);
}

/* ---- fetch ---- */

/* A fetched block: its raw bytes (data) inside the buffer to free (mem) or
 * the view to release (v). */
struct fetched {
	void *mem;
	const void *data;
	struct objstore_view v;
};

static int fetch_once(struct chunkstore *cs, uint64_t id, uint32_t idx,
		      uint32_t len, const struct chunkstore_frame *fr,
		      int quiet, struct fetched *out);

/* The object holding a block or frame, and the byte range of it to get
 * (len 0: all of it). */
static void object_of(uint64_t id, uint32_t idx, uint32_t len,
		      const struct chunkstore_frame *fr, char *key,
		      uint64_t *off, size_t *n)
{
	if (fr->pack) {
		chunkstore_pack_key(fr->pack, key, KEY_CAP);
		*off = fr->off;
		*n = fr->len;
	} else {
		chunkstore_key(id, idx, len, key, KEY_CAP);
		*off = 0;
		*n = 0;
	}
}

/*
 * Get and check one block of len raw bytes. A block stored raw is kept
 * where the store put it (no copy: the checksums are checked in place); a
 * compressed one is decoded into a buffer of its own. A block that fails
 * its check may be a bad local copy (a disk cache entry): the copy is
 * evicted and the block fetched once more from the store. A frame that
 * its pack is too short for (EAGAIN from fetch_once) is fetched once
 * more too, from the store after a moment when there is no local copy.
 * quiet: a missing block is no news (a prefetch of a file deleted meanwhile;
 * a reader that needs the block fetches it again and says so).
 */
static int fetch(struct chunkstore *cs, uint64_t id, uint32_t idx, uint32_t len,
		 const struct chunkstore_frame *fr, int quiet,
		 struct fetched *out)
{
	int err = fetch_once(cs, id, idx, len, fr, quiet, out);
	if (err == CODEC_ECORRUPT || err == EAGAIN) {
		char key[KEY_CAP];
		uint64_t off;
		size_t n;
		object_of(id, idx, len, fr, key, &off, &n);
		if (objstore_evict_bad(cs->store, key) == 0) {
			err = fetch_once(cs, id, idx, len, fr, quiet, out);
		} else if (err == EAGAIN) {
			/* no local copy to blame: a torn answer of the store
			 * (a server that rewrites an object in place while a
			 * retried put runs) is asked again a moment later */
			struct timespec ts = {0, 200 * 1000000L};
			nanosleep(&ts, NULL);
			err = fetch_once(cs, id, idx, len, fr, quiet, out);
		}
	}
	return err == CODEC_ECORRUPT || err == EAGAIN ? EIO : err;
}

/* A whole object comes as a view (mapped where the store has files, no
 * copy), a range of one into a buffer (*blk). */
static int get_object(struct chunkstore *cs, const char *key, uint64_t off,
		      size_t want, void **blk, size_t *got,
		      struct objstore_view *v)
{
	if (want)
		return objstore_get(cs->store, key, off, want, blk, got);
	int err = objstore_get_view(cs->store, key, v);
	*got = err ? 0 : v->len;
	return err;
}

/* The checks of a fetched block, run under fsutil_guard_sigbus() when its
 * bytes are a file mapping: a disk error while reading them is an EIO. */
struct check {
	const void *blk;
	size_t n;
	uint32_t len;
	const void *view; /* out: the raw bytes in blk, or NULL: compressed */
	void *raw;	  /* a compressed block is decoded into this */
	size_t raw_len;
};

static int check_view(void *arg)
{
	struct check *c = arg;

	return codec_view(c->blk, c->n, &c->view, &c->raw_len);
}

static int check_decode(void *arg)
{
	struct check *c = arg;

	return codec_decode(c->blk, c->n, c->raw, c->len, &c->raw_len);
}

static int run_check(int (*fn)(void *), struct check *c, int mapped)
{
	return mapped ? fsutil_guard_sigbus(fn, c) : fn(c);
}

/*
 * Until when (fsutil_mono_ms()) a read of slice id (or pack) may wait for
 * its object to reach the store. One deadline per slice or pack, shared by
 * every read of it: the first read that misses sets it wait_ms ahead (and
 * *first); reads that miss while it runs, or up to wait_ms after it passed,
 * keep it, so they get their EIO by then too instead of waiting wait_ms
 * each. Without that a reader waited twice: the kernel reads a page again
 * after a failed readahead, and that read waited as long as the first.
 */
static int64_t missing_deadline(struct chunkstore *cs, uint64_t id, int pack,
				int wait_ms, int *first)
{
	int64_t now = fsutil_mono_ms(), deadline;
	struct missing *slot = &cs->missing[0];

	pthread_mutex_lock(&cs->lock);
	for (int i = 0; i < MISSING_SLOTS; i++) {
		struct missing *s = &cs->missing[i];
		if (s->id == id && s->pack == pack) {
			slot = s;
			break;
		}
		if (s->deadline < slot->deadline)
			slot = s; /* the oldest, if id has none */
	}
	*first = !(slot->id == id && slot->pack == pack &&
		   now < slot->deadline + wait_ms);
	if (*first) {
		slot->id = id;
		slot->pack = pack;
		slot->deadline = now + wait_ms;
	}
	deadline = slot->deadline;
	pthread_mutex_unlock(&cs->lock);
	return deadline;
}

static int fetch_once(struct chunkstore *cs, uint64_t id, uint32_t idx,
		      uint32_t len, const struct chunkstore_frame *fr,
		      int quiet, struct fetched *out)
{
	char key[KEY_CAP];
	void *blk = NULL, *raw = NULL;
	struct objstore_view v = {0};
	size_t got = 0, want;
	uint64_t off;
	int err;

	object_of(id, idx, len, fr, key, &off, &want);
	err = ENOENT;
	if (fr->pack && cs->o.staged_get) {
		err = cs->o.staged_get(cs->o.staged_arg, fr->pack, fr->off,
				       fr->len, &blk);
		got = err ? 0 : fr->len;
	} else if (!fr->pack && cs->o.staged_block) {
		err = cs->o.staged_block(cs->o.staged_arg, id, idx, &blk, &got);
	}
	if (err == ENOENT) {
		int wait_ms =
		    fr->pack ? PACK_WAIT_MS : (int)cs->o.block_wait_ms;
		err = get_object(cs, key, off, want, &blk, &got, &v);
		/* Another client's writeback pack or block may still be on
		 * its way to the store: a reader waits for it a while. */
		int first = 0;
		int64_t deadline =
		    err == ENOENT && !quiet && wait_ms > 0
			? missing_deadline(cs, fr->pack ? fr->pack : id,
					   fr->pack != 0, wait_ms, &first)
			: 0;
		for (int64_t ms = 100, left;
		     err == ENOENT && (left = deadline - fsutil_mono_ms()) > 0;
		     ms = ms < 2000 ? ms * 2 : ms) {
			if (first)
				log_info("slice %" PRIu64 " is not in '%s' "
					 "yet: waiting up to %d ms for its "
					 "upload",
					 id, key, wait_ms);
			first = 0;
			if (ms > left)
				ms = left;
			struct timespec ts = {ms / 1000,
					      (ms % 1000) * 1000000L};
			nanosleep(&ts, NULL);
			err = get_object(cs, key, off, want, &blk, &got, &v);
		}
	}
	STAT_ADD(cs, gets, 1);
	if (!err && want && got != want) {
		log_err("slice %" PRIu64 ": pack '%s' ends before its frame "
			"(bytes %" PRIu32 "+%" PRIu32 ", got %zu)",
			id, key, fr->off, fr->len, got);
		free(blk);
		return EAGAIN; /* fetch() tries once more */
	}
	if (err) {
		if (err == ENOENT && fr->pack)
			log_msg(quiet ? LOG_DEBUG : LOG_ERR,
				"slice %" PRIu64 " is missing from pack '%s' "
				"(bytes %" PRIu32 "+%" PRIu32 ")",
				id, key, fr->off, fr->len);
		else if (err == ENOENT)
			log_msg(quiet ? LOG_DEBUG : LOG_ERR,
				"block '%s' is missing from the object store",
				key);
		else
			/* an outage's give-up is the store's to log */
			log_msg(objstore_transient(err) ? LOG_DEBUG : LOG_ERR,
				"cannot read block '%s': %s", key,
				gr_strerror(err));
		return err == ENOMEM ? ENOMEM : EIO;
	}
	STAT_ADD(cs, get_bytes, got);
	struct check c = {blk ? blk : v.data, got, len, NULL, NULL, 0};
	err = run_check(check_view, &c, v.mapped);
	if (!err && c.raw_len != len)
		err = CODEC_ECORRUPT; /* declares other bytes than its key */
	/* a compressed block is decoded into a buffer of its own */
	if (!err && !c.view) {
		raw = malloc(len ? len : 1);
		if (!raw) {
			err = ENOMEM;
			goto free_blk;
		}
		c.raw = raw;
		err = run_check(check_decode, &c, v.mapped);
		if (!err && c.raw_len != len)
			err = CODEC_ECORRUPT;
	}
	if (err) {
		if (err == CODEC_ECORRUPT || err == EIO)
			STAT_ADD(cs, corrupt, 1);
		if (err == EIO) /* SIGBUS: the disk under a mapping failed */
			log_err("cannot read block '%s': %s", key,
				strerror(err));
		else if (err != CODEC_ECORRUPT)
			log_err("cannot decode block '%s': %s", key,
				gr_strerror(err));
		else if (fr->pack)
			log_err("corrupt slice %" PRIu64 " in pack '%s' "
				"(bytes %" PRIu32 "+%" PRIu32 "): %s",
				id, key, fr->off, fr->len, gr_strerror(err));
		else
			log_err("corrupt block '%s' (%zu bytes stored, "
				"%" PRIu32 " raw expected): %s",
				key, got, len, gr_strerror(err));
		/* corruption is told apart: fetch() may retry it (a local
		 * copy that cannot be read counts as corrupt) */
		err = err == ENOMEM			    ? err
		      : err == CODEC_ECORRUPT || err == EIO ? CODEC_ECORRUPT
							    : EIO;
		goto free_raw;
	}
	/* checked: a disk cache may keep these very bytes now */
	objstore_view_verified(&v);
	if (c.view) {
		out->mem = blk;
		out->data = c.view;
		out->v = v; /* blk or v, the other is empty */
	} else {
		free(blk);
		objstore_view_release(&v);
		out->mem = raw;
		out->data = raw;
	}
	return 0;

free_raw:
	free(raw);
free_blk:
	free(blk);
	objstore_view_release(&v);
	return err;
}

/* A new loading entry for the block, hashed, referenced once by the caller,
 * who must then call entry_load(). Under cs->lock. */
static struct centry *entry_new(struct chunkstore *cs, uint64_t id,
				uint32_t idx, uint32_t len,
				const struct chunkstore_frame *fr,
				int by_prefetch)
{
	struct centry *e = calloc(1, sizeof(*e));

	if (!e)
		return NULL;
	e->id = id;
	e->idx = idx;
	e->len = len;
	e->fr = *fr;
	e->refs = 1;
	e->state = CE_LOADING;
	e->hashed = 1;
	e->by_prefetch = by_prefetch;
	pthread_cond_init(&e->done, NULL);
	gr_assert(!find(cs, id, idx));
	hash_insert(&cs->table, &e->hn, block_hash(id, idx));
	return e;
}

/* Fetch the block of a new entry and wake its waiters. On success the
 * caller keeps its reference; on failure it is dropped and the entry leaves
 * the table, so that the next reader tries the store again. */
static int entry_load(struct chunkstore *cs, struct centry *e)
{
	struct fetched f = {0};
	int err = fetch(cs, e->id, e->idx, e->len, &e->fr, e->by_prefetch, &f);

	pthread_mutex_lock(&cs->lock);
	if (err) {
		e->state = CE_FAILED;
		e->err = err;
		if (e->hashed)
			unhash(cs, e); /* refs > 0: stays alive */
		pthread_cond_broadcast(&e->done);
		if (--e->refs == 0)
			centry_free(e);
		pthread_mutex_unlock(&cs->lock);
		return err;
	}
	e->mem = f.mem;
	e->view = f.v;
	e->data = f.data;
	e->state = CE_READY;
	if (e->hashed)
		cs->cached_bytes += e->len;
	pthread_cond_broadcast(&e->done);
	pthread_mutex_unlock(&cs->lock);
	return 0;
}

/* A referenced, ready entry for block idx of slice id, fetching it (once,
 * whoever asks concurrently, prefetch threads included) on a miss. */
static int block_get(struct chunkstore *cs, uint64_t id, uint32_t idx,
		     uint32_t len, const struct chunkstore_frame *fr,
		     struct centry **out)
{
	struct centry *e;
	int err;

	pthread_mutex_lock(&cs->lock);
	while ((e = find(cs, id, idx))) {
		e->refs++;
		lru_remove(cs, e);
		while (e->state == CE_LOADING)
			pthread_cond_wait(&e->done, &cs->lock);
		if (e->state == CE_READY) {
			STAT_ADD(cs, cache_hits, 1);
			pthread_mutex_unlock(&cs->lock);
			*out = e;
			return 0;
		}
		err = e->err;
		int retry = e->by_prefetch;
		if (--e->refs == 0 && !e->hashed)
			centry_free(e);
		/* A failed prefetch is not this reader's answer: it fetches
		 * (and reports) for itself. The failed entry is unhashed, so
		 * the loop finds a newer one or none. */
		if (!retry) {
			pthread_mutex_unlock(&cs->lock);
			return err;
		}
	}
	e = entry_new(cs, id, idx, len, fr, 0);
	if (!e) {
		pthread_mutex_unlock(&cs->lock);
		return ENOMEM;
	}
	STAT_ADD(cs, cache_misses, 1);
	pthread_mutex_unlock(&cs->lock);

	err = entry_load(cs, e);
	if (err)
		return err;
	*out = e;
	return 0;
}

static void block_put(struct chunkstore *cs, struct centry *e)
{
	pthread_mutex_lock(&cs->lock);
	gr_assert(e->refs > 0);
	if (--e->refs == 0) {
		if (!e->hashed) {
			centry_free(e);
		} else {
			TAILQ_INSERT_HEAD(&cs->lru, e, lru);
			e->on_lru = 1;
			evict(cs);
		}
	}
	pthread_mutex_unlock(&cs->lock);
}

/* ---- prefetch ---- */

/* Fetch one queued block unless it got cached or in flight meanwhile. */
static void prefetch_one(struct chunkstore *cs, const struct pf_req *r)
{
	struct centry *e = NULL;

	pthread_mutex_lock(&cs->lock);
	if (!find(cs, r->id, r->idx))
		e = entry_new(cs, r->id, r->idx, r->len, &r->fr, 1);
	pthread_mutex_unlock(&cs->lock);
	if (e && entry_load(cs, e) == 0)
		block_put(cs, e); /* onto the LRU like any block read */
}

/* Under pf_lock: how much of the workers' time slice id has had lately:
 * its fetches in flight and its share of the requests taken last. */
static size_t pf_share(const struct chunkstore *cs, uint64_t id)
{
	size_t n = 0;

	for (int k = 0; k < cs->pf_nthreads; k++)
		n += cs->pf_busy[k] == id;
	for (size_t k = 0; k < cs->pf_nrecent; k++)
		n += cs->pf_recent[k] == id;
	return n;
}

/*
 * Under pf_lock, with mine a slot whose job a worker runs: take the
 * request to fetch next, and free mine. Several files read at once share
 * the workers fairly: the oldest request of the slice that had the least
 * of them lately goes first, so one reader's deep window cannot keep the
 * others waiting behind it. (Slices stand for readers: a sequential reader
 * is inside one slice, or two, at a time.) The request taken may be
 * another slot's, whose job is still queued: mine's request moves there,
 * so that every queued job still stands for one request.
 */
static struct pf_req pf_take(struct chunkstore *cs, struct pf_req *mine)
{
	struct pf_req *best = NULL;
	size_t best_share = SIZE_MAX;

	for (size_t i = 0; i < cs->pf_cap; i++) {
		struct pf_req *s = &cs->pf_slots[i];
		if (!s->seq)
			continue;
		size_t share = pf_share(cs, s->id);
		if (share < best_share ||
		    (share == best_share && s->seq < best->seq)) {
			best = s;
			best_share = share;
		}
	}
	gr_assert(best && mine->seq);
	struct pf_req r = *best;
	if (best != mine) {
		best->seq = mine->seq;
		best->id = mine->id;
		best->idx = mine->idx;
		best->len = mine->len;
		best->fr = mine->fr;
	}
	mine->seq = 0;
	cs->pf_n--;
	cs->pf_recent[cs->pf_at] = r.id;
	cs->pf_at = (cs->pf_at + 1) % cs->pf_nrecent;
	return r;
}

/* A job of the prefetch queue: fetch the request pf_take chooses. */
static void pf_run(struct workq_job *job)
{
	struct pf_req *mine = (struct pf_req *)job;
	struct chunkstore *cs = mine->cs;
	int slot;

	pthread_mutex_lock(&cs->pf_lock);
	struct pf_req r = pf_take(cs, mine);
	if (cs->pf_stop) {
		/* closing drops what is queued */
		pthread_mutex_unlock(&cs->pf_lock);
		return;
	}
	/* a free slot: there is one per worker */
	for (slot = 0; cs->pf_busy[slot]; slot++)
		;
	cs->pf_busy[slot] = r.id ? r.id : UINT64_MAX;
	pthread_mutex_unlock(&cs->pf_lock);
	prefetch_one(cs, &r);
	pthread_mutex_lock(&cs->pf_lock);
	cs->pf_busy[slot] = 0;
	pthread_mutex_unlock(&cs->pf_lock);
}

/* Drop what is queued, let each worker finish the block it is on, join. */
static void pf_stop_all(struct chunkstore *cs)
{
	pthread_mutex_lock(&cs->pf_lock);
	cs->pf_stop = 1;
	pthread_mutex_unlock(&cs->pf_lock);
	workq_close(cs->pf_q);
	cs->pf_q = NULL;
	cs->pf_nthreads = 0;
}

/* Under pf_lock: is the block waiting in the queue already? */
static int pf_queued(const struct chunkstore *cs, uint64_t id, uint32_t idx)
{
	for (size_t i = 0; i < cs->pf_cap; i++) {
		const struct pf_req *q = &cs->pf_slots[i];
		if (q->seq && q->id == id && q->idx == idx)
			return 1;
	}
	return 0;
}

/* Queue r unless its block is cached, in flight or queued already.
 * Returns -1 when the queue is full (the caller counts the drop). */
static int pf_enqueue(struct chunkstore *cs, const struct pf_req *r)
{
	struct pf_req *s = NULL;

	/* The two locks are never held together; a block that starts
	 * loading between the checks is skipped by the worker. */
	pthread_mutex_lock(&cs->lock);
	int known = find(cs, r->id, r->idx) != NULL;
	pthread_mutex_unlock(&cs->lock);
	if (known)
		return 0;

	pthread_mutex_lock(&cs->pf_lock);
	if (pf_queued(cs, r->id, r->idx)) {
		pthread_mutex_unlock(&cs->pf_lock);
		return 0;
	}
	for (size_t i = 0; cs->pf_n < cs->pf_cap && i < cs->pf_cap; i++)
		if (!cs->pf_slots[i].seq) {
			s = &cs->pf_slots[i];
			break;
		}
	if (!s || cs->pf_stop) {
		pthread_mutex_unlock(&cs->pf_lock);
		return -1;
	}
	s->seq = ++cs->pf_seq;
	s->id = r->id;
	s->idx = r->idx;
	s->len = r->len;
	s->fr = r->fr;
	cs->pf_n++;
	/* a free slot's job is not queued, and the slots are the queue's
	 * cap: this cannot be refused (a full queue is a full slot set) */
	int err = workq_trypush(cs->pf_q, &s->job);
	gr_assert(err == 0);
	pthread_mutex_unlock(&cs->pf_lock);
	STAT_ADD(cs, prefetched, 1);
	return 0;
}

void chunkstore_prefetch(struct chunkstore *cs, uint64_t id, uint32_t size,
			 uint32_t off, uint32_t len)
{
	uint32_t bs, first, last;

	if (!cs || cs->pf_nthreads == 0 || len == 0 || off >= size)
		return;
	if (len > size - off)
		len = size - off;
	bs = cs->o.block_size;
	first = off / bs;
	last = (uint32_t)(((uint64_t)off + len - 1) / bs);
	for (uint32_t i = first; i <= last; i++) {
		struct pf_req r = {.id = id,
				   .idx = i,
				   .len = block_len(cs, size, i),
				   .fr = no_frame};
		if (pf_enqueue(cs, &r)) {
			STAT_ADD(cs, prefetch_drops, last - i + 1);
			return;
		}
	}
}

/* ---- public ---- */

/* Encode and put one block: copied into a buffer of its own, or with
 * room (chunkstore_headroom() bytes before raw) in place when it is stored
 * raw; durable on return, or (lazy) at the next sync. */
static int put_block(struct chunkstore *cs, uint64_t id, uint32_t idx,
		     void *raw, uint32_t len, int room, int lazy)
{
	char key[KEY_CAP];
	size_t enc_len = 0;
	void *enc = NULL, *blk = NULL;
	int err;

	if (!cs || (!raw && len) || len > cs->o.block_size)
		return EINVAL;
	/* in place, only a compressed block needs a buffer */
	if (!room || cs->o.compress != CODEC_NONE) {
		enc = bigbuf_alloc(codec_bound(len));
		if (!enc)
			return ENOMEM;
	}
	if (room) {
		err = codec_encode_inplace(raw, len, cs->o.compress, enc, &blk,
					   &enc_len);
	} else {
		err = codec_encode(raw, len, cs->o.compress, enc, &enc_len);
		blk = enc;
	}
	chunkstore_key(id, idx, len, key, sizeof(key));
	if (err) {
		log_err("cannot encode block '%s': %s", key, gr_strerror(err));
		goto free_enc;
	}
	err = lazy ? objstore_put_lazy(cs->store, key, blk, enc_len)
		   : objstore_put(cs->store, key, blk, enc_len);
	if (err) {
		log_err("cannot upload block '%s': %s", key, gr_strerror(err));
		goto free_enc;
	}
	STAT_ADD(cs, puts, 1);
	STAT_ADD(cs, put_bytes, enc_len);
	/* Slice ids are never reused, so a cached copy can only be an older
	 * attempt of the same bytes; drop it anyway rather than trust that. */
	drop_cached(cs, id, idx);
free_enc:
	bigbuf_free(enc);
	return err;
}

int chunkstore_put_block(struct chunkstore *cs, uint64_t id, uint32_t idx,
			 const void *raw, uint32_t len)
{
	/* not written to: without room the block is copied */
	return put_block(cs, id, idx, (void *)(uintptr_t)raw, len, 0, 0);
}

size_t chunkstore_headroom(const struct chunkstore *cs)
{
	return codec_prefix_len(cs->o.block_size);
}

int chunkstore_put_block_inplace(struct chunkstore *cs, uint64_t id,
				 uint32_t idx, void *raw, uint32_t len)
{
	return put_block(cs, id, idx, raw, len, 1, 0);
}

int chunkstore_put_block_lazy(struct chunkstore *cs, uint64_t id, uint32_t idx,
			      void *raw, uint32_t len, int inplace)
{
	return put_block(cs, id, idx, raw, len, inplace, 1);
}

int chunkstore_sync(struct chunkstore *cs)
{
	int err = objstore_sync(cs->store);

	if (err)
		log_err("cannot make the blocks put durable: %s",
			gr_strerror(err));
	return err;
}

/* A pin of bytes that are in no cache: a free-standing entry owning buf,
 * freed by its release. */
static struct chunkstore_pin *pin_buffer(void *buf, uint32_t len)
{
	struct centry *e = calloc(1, sizeof(*e));

	if (!e)
		return NULL;
	pthread_cond_init(&e->done, NULL);
	e->mem = buf;
	e->data = buf;
	e->len = len;
	e->refs = 1;
	e->state = CE_READY;
	return (struct chunkstore_pin *)e;
}

void chunkstore_unpin(struct chunkstore *cs, struct chunkstore_pin *pin)
{
	if (pin)
		block_put(cs, (struct centry *)pin);
}

/*
 * Bytes [off, off+len) of slice (id, size), block by block: copied to dst,
 * or, with dst NULL, handed to fn where they are (pinned).
 */
static int read_blocks(struct chunkstore *cs, uint64_t id, uint32_t size,
		       uint32_t off, uint32_t len, char *dst,
		       chunkstore_run_fn fn, void *arg)
{
	uint32_t bs = cs->o.block_size;
	uint32_t first = off / bs;
	uint32_t last = (uint32_t)(((uint64_t)off + len - 1) / bs);

	for (uint32_t i = first; i <= last; i++) {
		uint64_t bstart = (uint64_t)i * bs;
		uint64_t from = off > bstart ? off : bstart;
		uint64_t to = (uint64_t)off + len < bstart + bs
				  ? (uint64_t)off + len
				  : bstart + bs;
		uint32_t n = (uint32_t)(to - from);
		uint32_t boff = (uint32_t)(from - bstart);
		uint32_t blen = block_len(cs, size, i);
		struct centry *e = NULL;
		int err = RANGE_WHOLE;

		/* A small piece of a block not in memory: its segments only;
		 * to hand them out they need a buffer of their own. */
		if (dst) {
			err = ranged_read(cs, id, i, blen, boff, n, dst);
		} else if (n < blen / RANGE_FRACTION) {
			char *buf = malloc(n);
			if (!buf)
				return ENOMEM;
			err = ranged_read(cs, id, i, blen, boff, n, buf);
			struct chunkstore_pin *pin = NULL;
			if (!err && !(pin = pin_buffer(buf, n)))
				err = ENOMEM;
			if (err) {
				free(buf);
			} else {
				err = fn(arg, buf, n, pin);
				if (err)
					return err;
				continue;
			}
		}
		if (err != RANGE_WHOLE) {
			if (err)
				return err;
			dst += n;
			continue;
		}
		err = block_get(cs, id, i, blen, &no_frame, &e);
		if (err)
			return err;
		const char *at = (const char *)e->data + boff;
		if (dst) {
			memcpy(dst, at, n);
			dst += n;
			block_put(cs, e);
		} else if ((err = fn(arg, at, n, (struct chunkstore_pin *)e))) {
			return err;
		}
	}
	return 0;
}

int chunkstore_read(struct chunkstore *cs, uint64_t id, uint32_t size,
		    uint32_t off, uint32_t len, void *buf)
{
	if (!cs || (!buf && len) || (uint64_t)off + len > size)
		return EINVAL;
	if (len == 0)
		return 0;
	return read_blocks(cs, id, size, off, len, buf, NULL, NULL);
}

int chunkstore_read_pinned(struct chunkstore *cs, uint64_t id, uint32_t size,
			   uint32_t off, uint32_t len, chunkstore_run_fn fn,
			   void *arg)
{
	if (!cs || !fn || (uint64_t)off + len > size)
		return EINVAL;
	if (len == 0)
		return 0;
	return read_blocks(cs, id, size, off, len, NULL, fn, arg);
}

int chunkstore_delete(struct chunkstore *cs, uint64_t id, uint32_t size)
{
	uint32_t n;
	int first_err = 0;

	if (!cs)
		return EINVAL;
	n = (uint32_t)(((uint64_t)size + cs->o.block_size - 1) /
		       cs->o.block_size);
	/* before the deletes: see the order in fs/data/stage.h */
	if (cs->o.staged_drop)
		cs->o.staged_drop(cs->o.staged_arg, id);
	for (uint32_t i = 0; i < n; i++) {
		char key[KEY_CAP];
		int err;

		drop_cached(cs, id, i);
		chunkstore_key(id, i, block_len(cs, size, i), key, sizeof(key));
		err = objstore_del(cs->store, key);
		if (err) {
			log_err("cannot delete block '%s': %s", key,
				gr_strerror(err));
			if (!first_err)
				first_err = err;
			continue;
		}
		STAT_ADD(cs, dels, 1);
	}
	return first_err;
}

/* ---- packed slices ---- */

/* The frame's cached entry (block 0 of its slice: slice ids are unique,
 * and a slice is either packed or in blocks, never both); *e NULL when
 * there is nothing to read. */
static int frame_get(struct chunkstore *cs, uint64_t id, uint32_t size,
		     const struct chunkstore_frame *f, uint32_t off,
		     uint32_t len, struct centry **e)
{
	*e = NULL;
	if (!cs || !f || !f->pack || (uint64_t)off + len > size)
		return EINVAL;
	return len ? block_get(cs, id, 0, size, f, e) : 0;
}

int chunkstore_read_frame(struct chunkstore *cs, uint64_t id, uint32_t size,
			  const struct chunkstore_frame *f, uint32_t off,
			  uint32_t len, void *buf)
{
	struct centry *e;

	if (!buf && len)
		return EINVAL;
	int err = frame_get(cs, id, size, f, off, len, &e);
	if (err || !e)
		return err;
	memcpy(buf, (const char *)e->data + off, len);
	block_put(cs, e);
	return 0;
}

int chunkstore_read_frame_pinned(struct chunkstore *cs, uint64_t id,
				 uint32_t size,
				 const struct chunkstore_frame *f, uint32_t off,
				 uint32_t len, chunkstore_run_fn fn, void *arg)
{
	struct centry *e;

	if (!fn)
		return EINVAL;
	int err = frame_get(cs, id, size, f, off, len, &e);
	if (err || !e)
		return err;
	return fn(arg, (const char *)e->data + off, len,
		  (struct chunkstore_pin *)e);
}

void chunkstore_prefetch_frame(struct chunkstore *cs, uint64_t id,
			       uint32_t size, const struct chunkstore_frame *f)
{
	if (!cs || cs->pf_nthreads == 0 || !f || !f->pack)
		return;
	/* a frame is cached as block 0 of its slice */
	struct pf_req r = {.id = id, .idx = 0, .len = size, .fr = *f};
	if (pf_enqueue(cs, &r))
		STAT_ADD(cs, prefetch_drops, 1);
}

int chunkstore_delete_pack(struct chunkstore *cs, uint64_t pack)
{
	char key[KEY_CAP];
	int err;

	if (!cs || !pack)
		return EINVAL;
	chunkstore_pack_key(pack, key, sizeof(key));
	err = objstore_del(cs->store, key);
	if (err) {
		log_err("cannot delete pack '%s': %s", key, gr_strerror(err));
		return err;
	}
	STAT_ADD(cs, dels, 1);
	return 0;
}
