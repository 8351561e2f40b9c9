/*
 * test_packer.c - small slices packed into shared objects over a mem://
 * store: frame layout and decoding, the pack size bound, many writers
 * sharing packs (against shadow copies), holders sealing a pack early,
 * batches whose members meet in one pack past the window,
 * store and metadata errors, bad options; in writeback, that a put returns
 * only once an fdatasync covered its frame, that puts share fdatasyncs,
 * and what a failed fdatasync does. Pack ids come from a counter and the
 * metadata is a fake that records every total it is given.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "meta/meta_objects.h"
#include "meta/meta_snap.h"
#include "meta/meta_volume.h"
#include "fs/data/chunkstore.h"
#include "fs/store/codec.h"
#include "fs/data/packer.h"
#include "meta/meta.h"

#define KB	 (1u << 10)
#define MB	 (1u << 20)
#define KEY_CAP	 96
#define MAXTOTAL 1024

/* ---- fake metadata: ids from a counter, totals recorded ---- */

struct total_call {
	uint64_t pack, total;
};

static struct {
	pthread_mutex_t lock;
	uint64_t next_id; /* last id handed out */
	int id_err;	  /* new_id fails with this, if set */
	int total_err;	  /* total fails with this, if set */
	struct total_call calls[MAXTOTAL];
	size_t ncalls;
} fk = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int fk_new_id(void *arg, uint64_t *id)
{
	(void)arg;
	pthread_mutex_lock(&fk.lock);
	int err = fk.id_err;
	if (!err)
		*id = ++fk.next_id;
	pthread_mutex_unlock(&fk.lock);
	return err;
}

static int fk_total(void *arg, uint64_t pack, uint64_t total, int *dead)
{
	(void)arg;
	if (dead)
		*dead = 0;
	pthread_mutex_lock(&fk.lock);
	int err = fk.total_err;
	if (!err && fk.ncalls < MAXTOTAL)
		fk.calls[fk.ncalls++] = (struct total_call){pack, total};
	pthread_mutex_unlock(&fk.lock);
	return err;
}

static const struct packer_cbs fk_cbs = {.new_id = fk_new_id,
					 .total = fk_total};

static uint64_t fk_last_id(void)
{
	pthread_mutex_lock(&fk.lock);
	uint64_t id = fk.next_id;
	pthread_mutex_unlock(&fk.lock);
	return id;
}

/* The total recorded for pack, or 0; fails the test if it was recorded
 * more than once. */
static uint64_t fk_total_of(uint64_t pack)
{
	uint64_t t = 0;
	int seen = 0;

	pthread_mutex_lock(&fk.lock);
	for (size_t i = 0; i < fk.ncalls; i++)
		if (fk.calls[i].pack == pack) {
			t = fk.calls[i].total;
			seen++;
		}
	pthread_mutex_unlock(&fk.lock);
	cr_assert_leq(seen, 1, "total of pack %" PRIu64 " recorded %d times",
		      pack, seen);
	return t;
}

/* ---- fixture ---- */

static struct objstore *store;
static struct chunkstore *cs;

static void setup(void)
{
	struct chunkstore_opts o = {
	    .block_size = 64 * KB, .compress = CODEC_LZ4, .mem_cache_bytes = 0};

	pthread_mutex_lock(&fk.lock);
	fk.next_id = 1000;
	fk.id_err = fk.total_err = 0;
	fk.ncalls = 0;
	pthread_mutex_unlock(&fk.lock);
	cr_assert_eq(objstore_open("mem://", NULL, &store), 0);
	/* no memory cache: every read is a ranged get of the pack */
	cr_assert_eq(chunkstore_open(store, &o, &cs), 0);
}

static void teardown(void)
{
	chunkstore_close(cs);
	objstore_close(store);
	cs = NULL;
	store = NULL;
}

static struct packer *popen_(uint32_t pack_size, unsigned window_ms,
			     enum codec_compress c)
{
	struct packer_opts o = {
	    .pack_size = pack_size, .window_ms = window_ms, .compress = c};
	struct packer *p = NULL;

	int err = packer_open(store, &o, &fk_cbs, &p);
	cr_assert_eq(err, 0, "packer_open: %s", strerror(err));
	return p;
}

/* ---- data ---- */

static uint64_t seed_from_env(const char *test)
{
	const char *e = getenv("GRANARY_SEED");
	uint64_t seed = e ? strtoull(e, NULL, 0) : 0x9ac4e7ull;

	printf("test_packer %s: seed %" PRIu64
	       " (set GRANARY_SEED to repeat)\n",
	       test, seed);
	fflush(stdout);
	return seed ? seed : 1;
}

static uint64_t xs(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* n bytes of random data with runs of one byte here and there: some of
 * it compresses, some does not. */
static unsigned char *gen(uint64_t *s, size_t n)
{
	unsigned char *b = malloc(n ? n : 1);

	cr_assert(b);
	for (size_t i = 0; i < n;) {
		uint64_t r = xs(s);
		size_t run = (r & 3) == 0 ? 1 + (r >> 8) % 300 : 1;
		for (size_t k = 0; k < run && i < n; k++, i++)
			b[i] = (unsigned char)(r >> 32);
		if (run == 1)
			for (int k = 1; k < 4 && i < n; k++, i++)
				b[i] = (unsigned char)(r >> (8 * k + 32));
	}
	return b;
}

/* ---- checks ---- */

static uint64_t pack_size_of(uint64_t pack)
{
	char key[KEY_CAP];
	uint64_t size = 0;

	chunkstore_pack_key(pack, key, sizeof(key));
	int err = objstore_head(store, key, &size);
	cr_assert_eq(err, 0, "pack '%s': %s", key, gr_strerror(err));
	return size;
}

/* The frame of it, got straight from the store, decodes to raw[0..len). */
static void expect_frame(const struct packer_item *it, const char *what)
{
	char key[KEY_CAP];
	void *blk = NULL;
	size_t got = 0, rl = 0;

	chunkstore_pack_key(it->at.pack, key, sizeof(key));
	cr_assert_eq(
	    objstore_get(store, key, it->at.off, it->at.len, &blk, &got), 0,
	    "%s: get '%s' %" PRIu32 "+%" PRIu32, what, key, it->at.off,
	    it->at.len);
	cr_assert_eq(got, it->at.len, "%s: short frame", what);
	unsigned char *raw = malloc(it->len + 1);
	int err = codec_decode(blk, got, raw, it->len + 1, &rl);
	cr_assert_eq(err, 0, "%s: decode: %s", what, gr_strerror(err));
	cr_assert_eq(rl, it->len, "%s: decoded %zu bytes, want %" PRIu32, what,
		     rl, it->len);
	cr_assert_eq(memcmp(raw, it->raw, it->len), 0, "%s: bytes differ",
		     what);
	free(raw);
	free(blk);
}

/* Bytes [off, off+len) of the item read as slice `id` through a chunkstore
 * equal its raw bytes. */
static void expect_read(struct chunkstore *c, uint64_t id,
			const struct packer_item *it, uint32_t off,
			uint32_t len, const char *what)
{
	unsigned char *buf = malloc(len + 1);
	int err = chunkstore_read_frame(c, id, it->len, &it->at, off, len, buf);

	cr_assert_eq(err, 0, "%s: read_frame %" PRIu32 "+%" PRIu32 ": %s", what,
		     off, len, strerror(err));
	cr_assert_eq(memcmp(buf, (const char *)it->raw + off, len), 0,
		     "%s: bytes %" PRIu32 "+%" PRIu32 " differ", what, off,
		     len);
	free(buf);
}

static int cmp_at(const void *a, const void *b)
{
	const struct chunkstore_frame *x = a, *y = b;
	if (x->pack != y->pack)
		return x->pack < y->pack ? -1 : 1;
	return x->off < y->off ? -1 : x->off > y->off;
}

/*
 * Frames of every pack are contiguous from offset 0 and end where the
 * object does, whose size is the total recorded for it. Returns the number
 * of packs; *max_obj is the largest object.
 */
static size_t expect_tiling(const struct packer_item *items, size_t n,
			    uint64_t *max_obj)
{
	struct chunkstore_frame *f = malloc(n * sizeof(*f));
	size_t packs = 0;

	*max_obj = 0;
	for (size_t i = 0; i < n; i++)
		f[i] = items[i].at;
	qsort(f, n, sizeof(*f), cmp_at);
	for (size_t i = 0; i < n;) {
		uint64_t end = 0, pack = f[i].pack;
		cr_assert_neq(pack, 0, "an item got no pack");
		for (; i < n && f[i].pack == pack; i++) {
			cr_assert_eq(f[i].off, end,
				     "pack %" PRIu64 ": frame at %" PRIu32
				     ", previous one ends at %" PRIu64,
				     pack, f[i].off, end);
			cr_assert_gt(f[i].len, CODEC_HDR_SIZE);
			end += f[i].len;
		}
		uint64_t size = pack_size_of(pack);
		cr_assert_eq(size, end,
			     "pack %" PRIu64 ": object of %" PRIu64
			     " bytes, frames end at %" PRIu64,
			     pack, size, end);
		cr_assert_eq(fk_total_of(pack), size,
			     "pack %" PRIu64 ": total recorded", pack);
		if (size > *max_obj)
			*max_obj = size;
		packs++;
	}
	free(f);
	return packs;
}

static size_t count_cb_n;

static int count_cb(void *arg, const char *key, uint64_t size, int64_t mtime)
{
	(void)mtime;
	(void)arg;
	(void)key;
	(void)size;
	count_cb_n++;
	return 0;
}

static size_t count_objects(const char *prefix)
{
	count_cb_n = 0;
	cr_assert_eq(objstore_list(store, prefix, count_cb, NULL), 0);
	return count_cb_n;
}

/* ---- layout ---- */

Test(packer, layout, .init = setup, .fini = teardown)
{
	struct packer *p = popen_(4 * MB, 10000, CODEC_LZ4);
	uint64_t seed = seed_from_env("layout");
	unsigned char *a = gen(&seed, 1000), *c = gen(&seed, 17);
	unsigned char *b = calloc(1, 70 * KB); /* zeros: compresses */
	struct packer_item it[3] = {
	    {.raw = a, .len = 1000},
	    {.raw = b, .len = 70 * KB},
	    {.raw = c, .len = 17},
	};
	struct packer_stats st;

	/* nobody holds: the pack is sealed at once, no window to wait */
	cr_assert_eq(packer_put(p, it, 3), 0);
	uint64_t pack = it[0].at.pack;
	cr_assert_neq(pack, 0);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(it[i].at.pack, pack, "item %d in another pack", i);
	cr_expect_eq(it[0].at.off, 0);
	cr_expect_eq(it[1].at.off, it[0].at.len);
	cr_expect_eq(it[2].at.off, it[1].at.off + it[1].at.len);
	cr_expect_lt(it[1].at.len, 10 * KB, "zeros were not compressed");
	uint64_t size = pack_size_of(pack);
	cr_expect_eq(size, (uint64_t)it[2].at.off + it[2].at.len);
	cr_assert_eq(fk.ncalls, 1, "total recorded %zu times", fk.ncalls);
	cr_expect_eq(fk.calls[0].pack, pack);
	cr_expect_eq(fk.calls[0].total, size);
	cr_expect_eq(count_objects("packs/"), 1);
	cr_expect_eq(count_objects("blocks/"), 0);

	for (int i = 0; i < 3; i++) {
		char what[32];
		snprintf(what, sizeof(what), "item %d", i);
		expect_frame(&it[i], what);
		expect_read(cs, 1 + i, &it[i], 0, it[i].len, what);
	}
	/* partial ranges: each a ranged get of the frame (no memory cache) */
	expect_read(cs, 1, &it[0], 0, 1, "first byte");
	expect_read(cs, 1, &it[0], 999, 1, "last byte");
	expect_read(cs, 1, &it[0], 123, 456, "middle");
	expect_read(cs, 2, &it[1], 64 * KB - 3, 6 * KB + 3, "tail of item 1");
	expect_read(cs, 3, &it[2], 5, 12, "tail of item 2");
	unsigned char x;
	cr_expect_eq(chunkstore_read_frame(cs, 3, 17, &it[2].at, 10, 8, &x),
		     EINVAL, "a range past the slice");

	packer_get_stats(p, &st);
	cr_expect_eq(st.packs, 1);
	cr_expect_eq(st.frames, 3);
	cr_expect_eq(st.bytes, size);
	cr_expect_eq(st.errors, 0);

	/* a second put makes a second pack, from offset 0 again */
	struct packer_item one = {.raw = c, .len = 17};
	cr_assert_eq(packer_put(p, &one, 1), 0);
	cr_expect_neq(one.at.pack, pack);
	cr_expect_eq(one.at.off, 0);
	expect_frame(&one, "second pack");
	cr_expect_eq(packer_put(p, NULL, 0), 0, "nothing to pack");
	packer_close(p);
	free(a);
	free(b);
	free(c);
}

/* A frame that a chunkstore reads with the memory cache on: the first read
 * caches it whole, a partial read after it is served from the cache. */
Test(packer, read_through_cache, .init = setup, .fini = teardown)
{
	struct chunkstore_opts o = {.block_size = 64 * KB,
				    .compress = CODEC_NONE,
				    .mem_cache_bytes = 4 * MB};
	struct chunkstore *cc;
	struct packer *p = popen_(64 * KB, 0, CODEC_NONE);
	uint64_t seed = seed_from_env("read_through_cache");
	unsigned char *a = gen(&seed, 5000);
	struct packer_item it = {.raw = a, .len = 5000};

	cr_assert_eq(chunkstore_open(store, &o, &cc), 0);
	cr_assert_eq(packer_put(p, &it, 1), 0);
	expect_read(cc, 77, &it, 0, 5000, "whole");
	/* the frame is cached whole: no second get, even with the pack gone */
	cr_assert_eq(chunkstore_delete_pack(cc, it.at.pack), 0);
	expect_read(cc, 77, &it, 4000, 1000, "cached tail");
	struct chunkstore_stats st;
	chunkstore_get_stats(cc, &st);
	cr_expect_eq(st.gets, 1);
	cr_expect_eq(st.dels, 1);
	cr_expect_eq(count_objects("packs/"), 0);
	chunkstore_close(cc);
	packer_close(p);
	free(a);
}

/* ---- the pack size bound ---- */

Test(packer, pack_size, .init = setup, .fini = teardown)
{
	const uint32_t ps = 64 * KB;
	struct packer *p = popen_(ps, 0, CODEC_NONE);
	uint64_t seed = seed_from_env("pack_size");
	struct packer_item it[30];
	unsigned char *raw[30];
	uint32_t max_frame = 0;
	uint64_t max_obj;

	/* 12 items in one call, then 18 in calls of three */
	for (int i = 0; i < 30; i++) {
		uint32_t len = 1 + (uint32_t)(xs(&seed) % (20 * KB));
		raw[i] = gen(&seed, len);
		it[i] = (struct packer_item){.raw = raw[i], .len = len};
	}
	cr_assert_eq(packer_put(p, it, 12), 0);
	for (int i = 12; i < 30; i += 3)
		cr_assert_eq(packer_put(p, it + i, 3), 0);
	for (int i = 0; i < 30; i++) {
		char what[32];
		snprintf(what, sizeof(what), "item %d", i);
		expect_frame(&it[i], what);
		if (it[i].at.len > max_frame)
			max_frame = it[i].at.len;
	}
	size_t packs = expect_tiling(it, 30, &max_obj);
	cr_log_info("30 items: %zu packs, largest %" PRIu64 " bytes", packs,
		    max_obj);
	/* the first call alone holds more than a pack (nobody holds: each
	 * call then seals what it left open) */
	uint64_t first = 0;
	for (int i = 0; i < 12; i++)
		first += it[i].at.len;
	if (first > ps)
		cr_expect_neq(it[0].at.pack, it[11].at.pack);
	cr_expect_geq(packs, 7);
	/* no pack above the size by more than one frame */
	cr_expect_leq(max_obj, (uint64_t)ps + max_frame);
	cr_expect_eq(count_objects("packs/"), packs);
	struct packer_stats st;
	packer_get_stats(p, &st);
	cr_expect_eq(st.packs, packs);
	cr_expect_eq(st.frames, 30);
	packer_close(p);
	for (int i = 0; i < 30; i++)
		free(raw[i]);
}

/*
 * An item whose frame alone exceeds pack_size arrives while another
 * caller's pack is open: it seals that pack and then its own. The packer
 * must take both (packer_put may be given slices up to --pack-max, which
 * can exceed the pack size).
 */
struct bg_put {
	struct packer *p;
	struct packer_item *it;
	size_t n;
	int err;
};

static void *bg_put_main(void *arg)
{
	struct bg_put *b = arg;
	b->err = packer_put(b->p, b->it, b->n);
	return NULL;
}

Test(packer, oversized_item_seals_an_open_pack, .init = setup, .fini = teardown,
     .timeout = 30)
{
	struct packer *p = popen_(64 * KB, 10000, CODEC_NONE);
	uint64_t seed = seed_from_env("oversized_item_seals_an_open_pack");
	unsigned char *small = gen(&seed, 100), *big = gen(&seed, 80 * KB);
	struct packer_item s = {.raw = small, .len = 100};
	struct packer_item b = {.raw = big, .len = 80 * KB};
	struct bg_put bg = {.p = p, .it = &s, .n = 1};
	pthread_t t;

	/* two holders: the small item's pack waits for a second frame */
	packer_hold(p, 2);
	uint64_t id0 = fk_last_id();
	pthread_create(&t, NULL, bg_put_main, &bg);
	/* its pack exists (new_id runs under the lock that the append is
	 * done under): the big put below finds the small frame in it */
	while (fk_last_id() == id0)
		sched_yield();
	cr_assert_eq(packer_put(p, &b, 1), 0);
	pthread_join(t, NULL);
	cr_assert_eq(bg.err, 0);
	packer_hold(p, -2);
	cr_expect_neq(s.at.pack, b.at.pack);
	expect_frame(&s, "small");
	expect_frame(&b, "big");
	expect_read(cs, 1, &s, 0, 100, "small");
	expect_read(cs, 2, &b, 0, 80 * KB, "big");
	cr_expect_eq(count_objects("packs/"), 2);
	packer_close(p);
	free(small);
	free(big);
}

/* ---- many writers ---- */

#define NTHREADS 8
#define NITEMS	 40

struct worker {
	struct packer *p;
	uint64_t seed;
	struct packer_item it[NITEMS];
	unsigned char *raw[NITEMS];
	int err;
};

/* No asserts off the main thread: errors are kept and checked after. */
static void *worker_main(void *arg)
{
	struct worker *w = arg;

	packer_hold(w->p, 1);
	for (int i = 0; i < NITEMS && !w->err;) {
		int n = 1 + (int)(xs(&w->seed) % 4);
		if (n > NITEMS - i)
			n = NITEMS - i;
		w->err = packer_put(w->p, w->it + i, (size_t)n);
		i += n;
	}
	packer_hold(w->p, -1);
	return NULL;
}

Test(packer, concurrent_vs_shadow, .init = setup, .fini = teardown,
     .timeout = 60)
{
	struct packer *p = popen_(1 * MB, 50, CODEC_LZ4);
	uint64_t seed = seed_from_env("concurrent_vs_shadow");
	struct worker *w = calloc(NTHREADS, sizeof(*w));
	struct packer_item *all = malloc(NTHREADS * NITEMS * sizeof(*all));
	pthread_t t[NTHREADS];
	uint64_t max_obj;
	uint32_t max_frame = 0;

	for (int k = 0; k < NTHREADS; k++) {
		w[k].p = p;
		w[k].seed = xs(&seed) | 1;
		for (int i = 0; i < NITEMS; i++) {
			uint32_t len = 1 + (uint32_t)(xs(&seed) % (200 * KB));
			/* a few tiny ones */
			if (i % 10 == 3)
				len = 1 + len % 64;
			w[k].raw[i] = gen(&seed, len);
			w[k].it[i] = (struct packer_item){.raw = w[k].raw[i],
							  .len = len};
		}
	}
	for (int k = 0; k < NTHREADS; k++)
		pthread_create(&t[k], NULL, worker_main, &w[k]);
	for (int k = 0; k < NTHREADS; k++)
		pthread_join(t[k], NULL);

	size_t n = 0;
	for (int k = 0; k < NTHREADS; k++) {
		cr_assert_eq(w[k].err, 0, "thread %d: %s", k,
			     strerror(w[k].err));
		for (int i = 0; i < NITEMS; i++) {
			char what[48];
			snprintf(what, sizeof(what), "thread %d item %d", k, i);
			expect_read(cs, (uint64_t)k * 1000 + (uint64_t)i + 1,
				    &w[k].it[i], 0, w[k].it[i].len, what);
			if (w[k].it[i].at.len > max_frame)
				max_frame = w[k].it[i].at.len;
			all[n++] = w[k].it[i];
		}
	}
	size_t packs = expect_tiling(all, n, &max_obj);
	struct packer_stats st;
	packer_get_stats(p, &st);
	cr_log_info("%zu items in %zu packs (largest %" PRIu64 " bytes)", n,
		    packs, max_obj);
	printf("test_packer concurrent_vs_shadow: %zu items in %zu packs\n", n,
	       packs);
	cr_expect_lt(packs, n, "every item got a pack of its own");
	cr_expect_leq(max_obj, (uint64_t)(1 * MB) + max_frame);
	cr_expect_eq(st.frames, n);
	cr_expect_eq(st.packs, packs);
	cr_expect_eq(st.errors, 0);
	cr_expect_eq(fk.ncalls, packs);
	cr_expect_eq(count_objects("packs/"), packs);
	uint64_t bytes = 0;
	for (size_t i = 0; i < fk.ncalls; i++)
		bytes += fk.calls[i].total;
	cr_expect_eq(st.bytes, bytes);
	packer_close(p);
	for (int k = 0; k < NTHREADS; k++)
		for (int i = 0; i < NITEMS; i++)
			free(w[k].raw[i]);
	free(all);
	free(w);
}

/* ---- holders ---- */

/* The only holder puts: nobody else can add a frame, so every put seals
 * its pack at once. With a 10 s window, waiting it out would time the
 * test out. */
Test(packer, sole_holder_does_not_wait, .init = setup, .fini = teardown,
     .timeout = 20)
{
	struct packer *p = popen_(4 * MB, 10000, CODEC_LZ4);
	unsigned char data[300];
	struct packer_item it[5];

	memset(data, 'x', sizeof(data));
	packer_hold(p, 1);
	for (int i = 0; i < 5; i++) {
		it[i] = (struct packer_item){.raw = data, .len = 100 + i};
		cr_assert_eq(packer_put(p, &it[i], 1), 0);
	}
	packer_hold(p, -1);
	for (int i = 0; i < 5; i++)
		expect_frame(&it[i], "sequential put");
	cr_expect_eq(count_objects("packs/"), 5, "one pack per put");
	cr_expect_eq(fk.ncalls, 5);
	packer_close(p);
}

/* Two holders that both put meet in one pack, sealed when the second
 * frame is in (long before the window is over). */
Test(packer, holders_meet_in_one_pack, .init = setup, .fini = teardown,
     .timeout = 20)
{
	struct packer *p = popen_(4 * MB, 10000, CODEC_LZ4);
	unsigned char d1[1000], d2[2000];
	struct packer_item a = {.raw = d1, .len = sizeof(d1)};
	struct packer_item b = {.raw = d2, .len = sizeof(d2)};
	struct bg_put bg = {.p = p, .it = &a, .n = 1};
	pthread_t t;

	memset(d1, 1, sizeof(d1));
	memset(d2, 2, sizeof(d2));
	packer_hold(p, 2);
	pthread_create(&t, NULL, bg_put_main, &bg);
	cr_assert_eq(packer_put(p, &b, 1), 0);
	pthread_join(t, NULL);
	cr_assert_eq(bg.err, 0);
	packer_hold(p, -2);
	cr_expect_eq(a.at.pack, b.at.pack, "two holders, two packs");
	cr_expect_eq(count_objects("packs/"), 1);
	expect_frame(&a, "first");
	expect_frame(&b, "second");
	packer_close(p);
}

/* A second holder never puts: the put completes when the window is over. */
Test(packer, idle_holder_window, .init = setup, .fini = teardown, .timeout = 20)
{
	struct packer *p = popen_(4 * MB, 200, CODEC_NONE);
	unsigned char d[500];
	struct packer_item it = {.raw = d, .len = sizeof(d)};

	memset(d, 7, sizeof(d));
	packer_hold(p, 1); /* an idle writer */
	packer_hold(p, 1); /* this one */
	cr_assert_eq(packer_put(p, &it, 1), 0);
	packer_hold(p, -1);
	expect_frame(&it, "after the window");
	cr_expect_eq(fk.ncalls, 1);
	/* the idle writer lets go: the next put does not wait at all */
	packer_hold(p, -1);
	cr_assert_eq(packer_put(p, &it, 1), 0);
	cr_expect_eq(count_objects("packs/"), 2);
	packer_close(p);
}

/* A holder waiting for an idle one is released when the idle one lets go
 * (packer_hold -1), before the 10 s window. */
struct late_release {
	struct packer *p;
	uint64_t id0;
};

static void *release_main(void *arg)
{
	struct late_release *r = arg;
	while (fk_last_id() == r->id0)
		sched_yield();
	packer_hold(r->p, -1);
	return NULL;
}

Test(packer, release_wakes_waiters, .init = setup, .fini = teardown,
     .timeout = 20)
{
	struct packer *p = popen_(4 * MB, 10000, CODEC_NONE);
	unsigned char d[500];
	struct packer_item it = {.raw = d, .len = sizeof(d)};
	struct late_release r = {.p = p, .id0 = fk_last_id()};
	pthread_t t;

	memset(d, 9, sizeof(d));
	packer_hold(p, 2);
	pthread_create(&t, NULL, release_main, &r);
	cr_assert_eq(packer_put(p, &it, 1), 0);
	pthread_join(t, NULL);
	packer_hold(p, -1);
	expect_frame(&it, "released");
	packer_close(p);
}

/* ---- batches (packer_put_batch) ---- */

#define BATCH_N 4

struct member {
	struct packer *p;
	struct packer_item it;
	struct packer_batch b;
	int delay_ms; /* before its put */
	int items;    /* 0: nothing to pack */
	int err;
};

static void *member_main(void *arg)
{
	struct member *m = arg;
	usleep((useconds_t)m->delay_ms * 1000);
	m->err = packer_put_batch(m->p, m->items ? &m->it : NULL,
				  (size_t)m->items, &m->b);
	return NULL;
}

/* Members that flush 20 ms apart, past a 1 ms window, with an idle holder
 * that keeps the holders' rule from sealing: one pack all the same, as
 * soon as the last one came (packed by the window, each would have a
 * pack of its own). */
Test(packer, batch_meets_past_the_window, .init = setup, .fini = teardown,
     .timeout = 20)
{
	struct packer *p = popen_(4 * MB, 1, CODEC_LZ4);
	unsigned char d[BATCH_N][700];
	struct member m[BATCH_N];
	pthread_t t[BATCH_N];

	packer_hold(p, 1 + BATCH_N); /* the idle writer, and the members */
	for (int i = 0; i < BATCH_N; i++) {
		memset(d[i], 'a' + i, sizeof(d[i]));
		m[i] = (struct member){
		    .p = p,
		    .it = {.raw = d[i], .len = (uint32_t)(100 + 150 * i)},
		    .b = {.id = 0x5eed, .n = BATCH_N},
		    .delay_ms = 20 * i,
		    .items = 1};
		pthread_create(&t[i], NULL, member_main, &m[i]);
	}
	for (int i = 0; i < BATCH_N; i++)
		pthread_join(t[i], NULL);
	packer_hold(p, -(1 + BATCH_N));
	for (int i = 0; i < BATCH_N; i++) {
		cr_assert_eq(m[i].err, 0, "member %d: %s", i,
			     strerror(m[i].err));
		expect_frame(&m[i].it, "member");
		cr_expect_eq(m[i].it.at.pack, m[0].it.at.pack,
			     "member %d in pack %" PRIu64 ", member 0 in %" PRIu64,
			     i, m[i].it.at.pack, m[0].it.at.pack);
	}
	cr_expect_eq(count_objects("packs/"), 1);
	packer_close(p);
}

/* A member with nothing to pack (an empty file) comes with no items: the
 * others' pack is sealed then, long before a 10 s window. */
Test(packer, batch_member_without_frames, .init = setup, .fini = teardown,
     .timeout = 20)
{
	struct packer *p = popen_(4 * MB, 10000, CODEC_NONE);
	unsigned char d[2][300];
	struct member m[3];
	pthread_t t[3];

	packer_hold(p, 3); /* an idle writer, and the two with data */
	for (int i = 0; i < 3; i++) {
		memset(d[i % 2], 'x' + i, sizeof(d[0]));
		m[i] = (struct member){.p = p,
				       .it = {.raw = d[i % 2], .len = 300},
				       .b = {.id = 77, .n = 3},
				       .delay_ms = 30 * i,
				       .items = i < 2};
		pthread_create(&t[i], NULL, member_main, &m[i]);
	}
	for (int i = 0; i < 3; i++) {
		pthread_join(t[i], NULL);
		cr_assert_eq(m[i].err, 0);
	}
	packer_hold(p, -3);
	cr_expect_eq(m[0].it.at.pack, m[1].it.at.pack);
	expect_frame(&m[0].it, "first");
	expect_frame(&m[1].it, "second");
	cr_expect_eq(count_objects("packs/"), 1);
	packer_close(p);
}

/* A member that never comes: the pack is put at its batch's bound (200 ms
 * after it opened) rather than waited on for ever; a batch of one, or of
 * id 0, is no batch. */
Test(packer, batch_member_missing, .init = setup, .fini = teardown,
     .timeout = 8)
{
	struct packer *p = popen_(4 * MB, 1, CODEC_NONE);
	unsigned char d[400];
	struct packer_item it = {.raw = d, .len = sizeof(d)};
	struct packer_batch b = {.id = 9, .n = 5};

	memset(d, 3, sizeof(d));
	packer_hold(p, 2); /* an idle writer, and this one */
	cr_assert_eq(packer_put_batch(p, &it, 1, &b), 0);
	expect_frame(&it, "alone in its batch");
	struct packer_batch none = {.id = 0, .n = 5}, one = {.id = 10, .n = 1};
	cr_assert_eq(packer_put_batch(p, &it, 1, &none), 0);
	cr_assert_eq(packer_put_batch(p, &it, 1, &one), 0);
	cr_expect_eq(count_objects("packs/"), 3);
	packer_hold(p, -2);
	packer_close(p);
}

/* ---- errors ---- */

Test(packer, store_errors, .init = setup, .fini = teardown)
{
	struct packer *p = popen_(4 * MB, 0, CODEC_LZ4);
	unsigned char d[3000];
	struct packer_item it[2] = {{.raw = d, .len = 1000},
				    {.raw = d, .len = 3000}};
	struct packer_stats st;

	memset(d, 'q', sizeof(d));
	store->fail_next = 1; /* EIO */
	cr_expect_eq(packer_put(p, it, 2), EIO);
	cr_expect_eq(fk.ncalls, 0, "a pack that is not stored was recorded");
	cr_expect_eq(count_objects("packs/"), 0);

	store->fail_next = 1;
	store->fail_err = ETIMEDOUT;
	cr_expect_eq(packer_put(p, it, 2), EIO, "a store error is EIO");
	store->fail_next = 1;
	store->fail_err = ENOSPC;
	cr_expect_eq(packer_put(p, it, 2), ENOSPC, "ENOSPC passes through");
	cr_expect_eq(fk.ncalls, 0);
	packer_get_stats(p, &st);
	cr_expect_eq(st.errors, 3);
	cr_expect_eq(st.packs, 0);
	cr_expect_eq(st.frames, 0);

	/* and it works again */
	store->fail_err = 0;
	cr_assert_eq(packer_put(p, it, 2), 0);
	expect_frame(&it[0], "after errors");
	expect_frame(&it[1], "after errors");
	cr_expect_eq(fk.ncalls, 1);
	cr_expect_eq(count_objects("packs/"), 1);
	packer_close(p);
}

/* Every caller with a frame in a pack that fails gets the error. */
Test(packer, error_reaches_every_user, .init = setup, .fini = teardown,
     .timeout = 20)
{
	struct packer *p = popen_(4 * MB, 10000, CODEC_NONE);
	unsigned char d[100];
	struct packer_item a = {.raw = d, .len = 50}, b = {.raw = d, .len = 60};
	struct bg_put bg = {.p = p, .it = &a, .n = 1};
	pthread_t t;

	memset(d, 3, sizeof(d));
	store->fail_next = 1;
	store->fail_err = ENOSPC;
	packer_hold(p, 2);
	pthread_create(&t, NULL, bg_put_main, &bg);
	int err = packer_put(p, &b, 1);
	pthread_join(t, NULL);
	packer_hold(p, -2);
	cr_expect_eq(a.at.pack, b.at.pack);
	cr_expect_eq(err, ENOSPC);
	cr_expect_eq(bg.err, ENOSPC);
	cr_expect_eq(fk.ncalls, 0);
	packer_close(p);
}

Test(packer, metadata_errors, .init = setup, .fini = teardown)
{
	struct packer *p = popen_(4 * MB, 0, CODEC_LZ4);
	unsigned char d[100];
	struct packer_item it = {.raw = d, .len = sizeof(d)};
	struct packer_stats st;

	memset(d, 5, sizeof(d));
	fk.total_err = EIO;
	cr_expect_eq(packer_put(p, &it, 1), EIO, "total not recorded");
	fk.total_err = ENOSPC;
	cr_expect_eq(packer_put(p, &it, 1), ENOSPC);
	fk.total_err = 0;
	fk.id_err = EIO;
	cr_expect_eq(packer_put(p, &it, 1), EIO, "no pack id");
	fk.id_err = 0;
	packer_get_stats(p, &st);
	cr_expect_eq(st.packs, 0);
	cr_expect_eq(st.errors, 2);
	cr_assert_eq(packer_put(p, &it, 1), 0);
	expect_frame(&it, "after errors");
	cr_expect_eq(fk.ncalls, 1);
	packer_close(p);
}

Test(packer, bad_options, .init = setup, .fini = teardown)
{
	struct packer_opts o = {.pack_size = 4 * MB, .window_ms = 10};
	struct packer_cbs nocb = {.new_id = fk_new_id};
	struct packer *p = (struct packer *)&o;

	cr_expect_eq(packer_open(NULL, &o, &fk_cbs, &p), EINVAL);
	cr_expect_null(p, "*out is set on failure");
	cr_expect_eq(packer_open(store, NULL, &fk_cbs, &p), EINVAL);
	cr_expect_eq(packer_open(store, &o, NULL, &p), EINVAL);
	cr_expect_eq(packer_open(store, &o, &fk_cbs, NULL), EINVAL);
	cr_expect_eq(packer_open(store, &o, &nocb, &p), EINVAL, "no total");
	nocb = (struct packer_cbs){.total = fk_total};
	cr_expect_eq(packer_open(store, &o, &nocb, &p), EINVAL, "no new_id");
	o.pack_size = 64 * KB - 1;
	cr_expect_eq(packer_open(store, &o, &fk_cbs, &p), EINVAL, "too small");
	o.pack_size = 64 * MB + 1;
	cr_expect_eq(packer_open(store, &o, &fk_cbs, &p), EINVAL, "too large");
	o.pack_size = 0;
	cr_expect_eq(packer_open(store, &o, &fk_cbs, &p), EINVAL, "zero");
	o.pack_size = 4 * MB;
	o.window_ms = UINT_MAX;
	cr_expect_eq(packer_open(store, &o, &fk_cbs, &p), EINVAL, "window");
	o.window_ms = 10;
	o.compress = (enum codec_compress)7;
	cr_expect_eq(packer_open(store, &o, &fk_cbs, &p), EINVAL, "compress");
	o.compress = CODEC_NONE;

	/* the bounds themselves are fine */
	o.pack_size = 64 * KB;
	cr_assert_eq(packer_open(store, &o, &fk_cbs, &p), 0);
	cr_expect_eq(packer_put(NULL, NULL, 0), EINVAL);
	cr_expect_eq(packer_put(p, NULL, 1), EINVAL);
	cr_expect_eq(packer_put(p, NULL, 0), 0);
	packer_close(p);
	o.pack_size = 64 * MB;
	cr_assert_eq(packer_open(store, &o, &fk_cbs, &p), 0);
	packer_close(p);
	packer_close(NULL);
}

/* ---- writeback: staged frames and their fdatasync ---- */

/*
 * fdatasync, interposed: libgranary.a is linked into this program, whose
 * own definition wins. Each call may wait and may fail; one that succeeds
 * keeps a copy of the pack file as it was when the call started: the bytes
 * a crash right after it would have left on the disk.
 */
#define IMAGES 64

static struct {
	pthread_mutex_t lock;
	unsigned delay_us;
	int fail, fail_left; /* the next fail_left calls fail with fail */
	int calls;
	struct {
		uint64_t pack;
		unsigned char *img;
		size_t len;
	} durable[IMAGES];
} fsy = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* The pack id of a staging file descriptor, or 0. */
static uint64_t fd_pack(int fd)
{
	char lnk[64], path[PATH_MAX];
	snprintf(lnk, sizeof(lnk), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(lnk, path, sizeof(path) - 1);
	if (n <= 0)
		return 0;
	path[n] = '\0';
	const char *base = strrchr(path, '/');
	char *end;
	uint64_t id = strtoull(base ? base + 1 : path, &end, 10);
	return strcmp(end, ".pack") ? 0 : id;
}

int fdatasync(int fd)
{
	uint64_t pack = fd_pack(fd);
	struct stat st;
	unsigned char *img = NULL;
	size_t len = 0;

	if (pack && fstat(fd, &st) == 0) {
		len = (size_t)st.st_size;
		img = malloc(len ? len : 1);
		cr_assert(img);
		cr_assert_eq(pread(fd, img, len, 0), (ssize_t)len);
	}
	pthread_mutex_lock(&fsy.lock);
	unsigned delay = fsy.delay_us;
	int fail = fsy.fail_left > 0 ? fsy.fail : 0;
	fsy.fail_left -= fsy.fail_left > 0;
	fsy.calls++;
	pthread_mutex_unlock(&fsy.lock);
	if (delay)
		usleep(delay);
	if (fail || syscall(SYS_fdatasync, fd)) {
		free(img);
		errno = fail ? fail : errno;
		return -1;
	}
	if (!pack)
		return 0;
	pthread_mutex_lock(&fsy.lock);
	int i = 0;
	while (i < IMAGES && fsy.durable[i].pack && fsy.durable[i].pack != pack)
		i++;
	cr_assert_lt(i, IMAGES, "too many packs for the test");
	if (fsy.durable[i].len <= len) { /* syncs may end out of order */
		free(fsy.durable[i].img);
		fsy.durable[i].pack = pack;
		fsy.durable[i].img = img;
		fsy.durable[i].len = len;
		img = NULL;
	}
	pthread_mutex_unlock(&fsy.lock);
	free(img);
	return 0;
}

/* it's frame is whole in the durable bytes of its staging file. */
static void expect_durable(const struct packer_item *it, const char *what)
{
	unsigned char *raw = malloc(it->len + 1);
	size_t rl = 0;
	int err = -1;

	pthread_mutex_lock(&fsy.lock);
	for (int i = 0; i < IMAGES && fsy.durable[i].pack; i++)
		if (fsy.durable[i].pack == it->at.pack &&
		    fsy.durable[i].len >= (size_t)it->at.off + it->at.len)
			err = codec_decode(fsy.durable[i].img + it->at.off,
					   it->at.len, raw, it->len + 1, &rl);
	pthread_mutex_unlock(&fsy.lock);
	cr_assert_eq(err, 0,
		     "%s: frame %" PRIu64 "+%" PRIu32
		     " not durable when its put returned (%d)",
		     what, it->at.pack, it->at.off, err);
	cr_assert_eq(rl, it->len);
	cr_assert_eq(memcmp(raw, it->raw, it->len), 0, "%s: bytes differ",
		     what);
	free(raw);
}

static char wb_dir[64];

/* A writeback packer staging in a new wb_dir, with the pack size,
 * compression, uploaders and max_staged given. */
static struct packer *popen_wb_with(uint32_t pack_size, int uploaders,
				    int max_staged, enum codec_compress c,
				    const struct packer_cbs *cbs)
{
	struct packer_opts o = {.pack_size = pack_size,
				.window_ms = 2000,
				.compress = c,
				.stage_dir = wb_dir,
				.uploaders = uploaders,
				.max_staged = max_staged};
	struct packer *p = NULL;

	snprintf(wb_dir, sizeof(wb_dir), "/tmp/granary-pk.XXXXXX");
	cr_assert_not_null(mkdtemp(wb_dir));
	int err = packer_open(store, &o, cbs, &p);
	cr_assert_eq(err, 0, "packer_open: %s", strerror(err));
	return p;
}

static struct packer *popen_wb(enum codec_compress c)
{
	return popen_wb_with(256 * KB, 2, 8, c, &fk_cbs);
}

static void close_wb(struct packer *p)
{
	char cmd[128];

	packer_close(p);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", wb_dir);
	cr_assert_eq(system(cmd), 0);
}

#define WB_THREADS 4
#define WB_PUTS	   30

struct wb_writer {
	struct packer *p;
	uint64_t seed;
	struct packer_item it[WB_PUTS];
	int err;
};

static void *wb_writer_main(void *arg)
{
	struct wb_writer *w = arg;

	for (int i = 0; i < WB_PUTS && !w->err; i++) {
		size_t len = 1000 + xs(&w->seed) % (20 * KB);
		w->it[i] = (struct packer_item){.raw = gen(&w->seed, len),
						.len = (uint32_t)len};
		packer_hold(w->p, 1);
		w->err = packer_put(w->p, &w->it[i], 1);
		packer_hold(w->p, -1);
		if (!w->err)
			expect_durable(&w->it[i], "concurrent put");
	}
	return NULL;
}

/* A put returns only once an fdatasync that started after its frame was
 * written is over, and puts made at once share fdatasyncs. */
Test(packer, writeback_put_returns_after_its_fdatasync, .init = setup,
     .fini = teardown, .timeout = 60)
{
	uint64_t seed =
	    seed_from_env("writeback_put_returns_after_its_fdatasync");
	struct wb_writer w[WB_THREADS];
	pthread_t t[WB_THREADS];

	fsy.delay_us = 2000; /* a slow disk: others arrive meanwhile */
	for (int c = 0; c < 2; c++) {
		struct packer *p = popen_wb(c ? CODEC_LZ4 : CODEC_NONE);
		int calls0 = fsy.calls;
		for (int i = 0; i < WB_THREADS; i++) {
			w[i] = (struct wb_writer){.p = p,
						  .seed = seed + 7919 * i + c};
			pthread_create(&t[i], NULL, wb_writer_main, &w[i]);
		}
		for (int i = 0; i < WB_THREADS; i++) {
			pthread_join(t[i], NULL);
			cr_assert_eq(w[i].err, 0, "put: %s",
				     strerror(w[i].err));
		}
		int syncs = fsy.calls - calls0;
		cr_expect_lt(syncs, WB_THREADS * WB_PUTS * 3 / 4,
			     "%d fdatasyncs for %d puts: not shared", syncs,
			     WB_THREADS * WB_PUTS);
		/* and the store gets every frame */
		cr_assert_eq(packer_sync(p), 0);
		for (int i = 0; i < WB_THREADS; i++)
			for (int k = 0; k < WB_PUTS; k++) {
				expect_frame(&w[i].it[k], "uploaded");
				free((void *)w[i].it[k].raw);
			}
		close_wb(p);
	}
}

/* Uploads that lag: recording a sealed pack's total (done just before its
 * upload) takes a while. */
static int slow_total(void *arg, uint64_t pack, uint64_t total, int *dead)
{
	if (total != META_PACK_OPEN)
		usleep(3000);
	return fk_total(arg, pack, total, dead);
}

/* Writers that wait for room while uploads lag (max_staged) each look at
 * the open pack again when they wake: a pack another writer opened
 * meanwhile is used or sealed, never left open, so that every frame is
 * uploaded and a sync returns. */
Test(packer, writeback_writers_waiting_for_room, .init = setup,
     .fini = teardown, .timeout = 60)
{
	struct packer_cbs cbs = fk_cbs;
	struct wb_writer w[WB_THREADS];
	pthread_t t[WB_THREADS];

	cbs.total = slow_total;
	/* the least pack size; one upload at a time, one sealed pack */
	struct packer *p = popen_wb_with(64 * KB, 1, 1, CODEC_NONE, &cbs);
	for (int i = 0; i < WB_THREADS; i++) {
		w[i] = (struct wb_writer){.p = p, .seed = 99 + 7919 * i};
		pthread_create(&t[i], NULL, wb_writer_main, &w[i]);
	}
	for (int i = 0; i < WB_THREADS; i++) {
		pthread_join(t[i], NULL);
		cr_assert_eq(w[i].err, 0, "put: %s", strerror(w[i].err));
	}
	/* a pack left open would keep this from returning */
	cr_assert_eq(packer_sync(p), 0);
	struct packer_stats st;
	packer_get_stats(p, &st);
	cr_expect_eq(st.staged_packs, 0, "%" PRIu64 " packs still staged",
		     st.staged_packs);
	for (int i = 0; i < WB_THREADS; i++)
		for (int k = 0; k < WB_PUTS; k++) {
			expect_frame(&w[i].it[k], "uploaded");
			free((void *)w[i].it[k].raw);
		}
	close_wb(p);
}

/* A put whose fdatasync fails reports EIO; what was put before stays, and
 * later puts go to a new pack and succeed. */
Test(packer, writeback_failed_fdatasync, .init = setup, .fini = teardown,
     .timeout = 60)
{
	uint64_t seed = seed_from_env("writeback_failed_fdatasync");
	struct packer *p = popen_wb(CODEC_LZ4);
	struct packer_item a = {.raw = gen(&seed, 5000), .len = 5000};
	struct packer_item b = {.raw = gen(&seed, 6000), .len = 6000};
	struct packer_item c = {.raw = gen(&seed, 7000), .len = 7000};

	cr_assert_eq(packer_put(p, &a, 1), 0);
	expect_durable(&a, "before the failure");
	fsy.fail = EIO;
	fsy.fail_left = 1;
	cr_expect_eq(packer_put(p, &b, 1), EIO, "a failed fdatasync is EIO");
	cr_assert_eq(packer_put(p, &c, 1), 0, "a put after the failure");
	expect_durable(&c, "after the failure");
	cr_expect_eq(b.at.pack, a.at.pack);
	cr_expect_neq(c.at.pack, b.at.pack,
		      "a put after a failed fdatasync went to the same pack");
	cr_assert_eq(packer_sync(p), 0);
	expect_frame(&a, "put before the failure");
	expect_frame(&c, "put after the failure");
	free((void *)a.raw);
	free((void *)b.raw);
	free((void *)c.raw);
	close_wb(p);
}

/* ---- naming staged packs for other clients' reclamation ---- */

static struct {
	pthread_mutex_t lock;
	int marks, dones, in_store, fail_done;
} pst = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int pst_staged(void *arg, uint64_t pack, int done)
{
	char key[128];
	uint64_t size;
	int err = 0;

	(void)arg;
	chunkstore_pack_key(pack, key, sizeof(key));
	pthread_mutex_lock(&pst.lock);
	if (!done)
		pst.marks++;
	else if (pst.fail_done > 0)
		pst.fail_done--, err = EIO;
	else
		pst.dones++, pst.in_store += !objstore_head(store, key, &size);
	pthread_mutex_unlock(&pst.lock);
	return err;
}

/* Every staged pack is named before a frame of it is durable, and said
 * done once it is in the store; a failed done makes the upload run again. */
Test(packer, writeback_names_staged_packs, .init = setup, .fini = teardown,
     .timeout = 60)
{
	struct packer_cbs cbs = fk_cbs;
	struct packer_item it[12];
	uint64_t seed = 42;

	cbs.staged = pst_staged;
	pst.marks = pst.dones = pst.in_store = 0;
	pst.fail_done = 1;
	struct packer *p = popen_wb_with(64 * KB, 2, 8, CODEC_NONE, &cbs);
	for (int i = 0; i < 12; i++) {
		it[i] = (struct packer_item){.raw = gen(&seed, 20 * KB),
					     .len = 20 * KB};
		cr_assert_eq(packer_put(p, &it[i], 1), 0);
		pthread_mutex_lock(&pst.lock);
		cr_expect_geq(pst.marks, 1 + (int)(it[i].at.pack - 1001),
			      "pack %" PRIu64 " holds a durable frame, "
			      "unnamed",
			      it[i].at.pack);
		pthread_mutex_unlock(&pst.lock);
	}
	int err = packer_sync(p);
	for (int i = 0; err && i < 5; i++)
		err = packer_sync(p);
	cr_assert_eq(err, 0);
	close_wb(p);
	cr_expect_gt(pst.marks, 1, "12 frames of 20K in packs of 64K");
	cr_expect_eq(pst.fail_done, 0);
	cr_expect_eq(pst.dones, pst.marks, "every named pack is done");
	cr_expect_eq(pst.in_store, pst.dones, "done before the put");
	for (int i = 0; i < 12; i++) {
		expect_frame(&it[i], "uploaded");
		free((void *)it[i].raw);
	}
}

/* ---- staging files used again ---- */

static int slot_has(const char *dir, const char *prefix)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	cr_assert_not_null(d, "opendir %s", dir);
	while ((e = readdir(d)))
		n += !strncmp(e->d_name, prefix, strlen(prefix));
	closedir(d);
	return n;
}

/* An uploaded pack's staging file is written over by the next pack (an
 * fdatasync there costs no journal commit); an unmount leaves none; a
 * reused file found after a crash, an earlier pack's bytes still past its
 * own frames, is uploaded whole and every committed frame reads back. */
Test(packer, writeback_reuses_staging_files, .init = setup, .fini = teardown,
     .timeout = 60)
{
	uint64_t seed = seed_from_env("writeback_reuses_staging_files");
	struct packer *p = popen_wb_with(256 * KB, 1, 8, CODEC_NONE, &fk_cbs);
	char slot[PATH_MAX], path[PATH_MAX + 64], copy[PATH_MAX + 128];
	struct packer_item big[4], small;
	struct stat st;

	snprintf(slot, sizeof(slot), "%s", packer_stage_dir(p));
	for (int i = 0; i < 4; i++) {
		big[i] = (struct packer_item){.raw = gen(&seed, 50 * KB),
					      .len = 50 * KB};
		cr_assert_eq(packer_put(p, &big[i], 1), 0);
	}
	cr_assert_eq(packer_sync(p), 0);
	snprintf(path, sizeof(path), "%s/spare0", slot);
	for (int i = 0; i < 200 && stat(path, &st); i++)
		usleep(10000); /* renamed just after the upload's end */
	cr_assert_eq(stat(path, &st), 0, "no spare staging file after upload");
	ino_t ino = st.st_ino;
	off_t old_size = st.st_size;
	cr_assert_geq(old_size, 200 * KB);

	small =
	    (struct packer_item){.raw = gen(&seed, 10 * KB), .len = 10 * KB};
	cr_assert_eq(packer_put(p, &small, 1), 0);
	cr_assert_neq(small.at.pack, big[0].at.pack);
	expect_durable(&small, "in a reused file");
	snprintf(path, sizeof(path), "%s/%" PRIu64 ".pack", slot,
		 small.at.pack);
	cr_assert_eq(stat(path, &st), 0);
	cr_expect_eq(st.st_ino, ino, "the new pack is not in the spare file");
	cr_expect_eq(st.st_size, old_size, "the reused file was cut");
	cr_expect_eq(slot_has(slot, "spare"), 0, "the spare is still there");

	/* what a crash would leave: copied before the unmount uploads it */
	snprintf(copy, sizeof(copy), "%s/crash", wb_dir);
	char cmd[3 * PATH_MAX];
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", path, copy);
	cr_assert_eq(system(cmd), 0);
	packer_close(p);
	cr_expect_eq(slot_has(slot, "spare"), 0, "spare left after unmount");
	cr_expect_eq(slot_has(slot, "1"), 0, "staged pack left after unmount");
	cr_assert_eq(rename(copy, path), 0);
	snprintf(copy, sizeof(copy), "%s/spare3", slot);
	cr_assert_eq(rename(path, copy), 0);
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", copy, path);
	cr_assert_eq(system(cmd), 0); /* and a spare of the dead mount */

	struct packer_opts o = {.pack_size = 256 * KB,
				.window_ms = 2000,
				.compress = CODEC_NONE,
				.stage_dir = wb_dir,
				.uploaders = 1,
				.max_staged = 8};
	fk.ncalls = 0;
	cr_assert_eq(packer_open(store, &o, &fk_cbs, &p), 0);
	struct packer_stats ps;
	packer_get_stats(p, &ps);
	cr_expect_eq(ps.recovered, 1);
	cr_assert_eq(packer_sync(p), 0);
	cr_expect_eq(slot_has(slot, "spare3"), 0, "a dead mount's spare kept");
	cr_expect_eq(fk_total_of(small.at.pack), (uint64_t)old_size,
		     "the recovered pack's total is not its file's size");
	cr_expect_eq(pack_size_of(small.at.pack), (uint64_t)old_size);
	expect_frame(&small, "recovered from a reused file");
	for (int i = 0; i < 4; i++) {
		expect_frame(&big[i], "the pack before it");
		free((void *)big[i].raw);
	}
	free((void *)small.raw);
	close_wb(p);
}

/* Nobody syncs: the window job seals the open pack once its window is
 * over, and an upload that fails goes back to the queue and is tried
 * again, with one uploader serving both. */
Test(packer, writeback_window_seals_and_failed_upload_retries, .init = setup,
     .fini = teardown, .timeout = 60)
{
	struct packer *p = popen_wb_with(256 * KB, 1, 8, CODEC_NONE, &fk_cbs);
	unsigned char d[5000];
	struct packer_item it = {.raw = d, .len = sizeof(d)};
	struct packer_stats st;

	memset(d, 'w', sizeof(d));
	store->fail_next = 1; /* the first upload */
	cr_assert_eq(packer_put(p, &it, 1), 0);
	for (packer_get_stats(p, &st); st.packs == 0; packer_get_stats(p, &st))
		usleep(10000);
	cr_expect_eq(st.errors, 1, "the failed upload was not counted");
	cr_expect_eq(st.staged_packs, 0);
	cr_expect_eq(count_objects("packs/"), 1);
	expect_frame(&it, "sealed by its window, uploaded on retry");
	close_wb(p);
}
