/*
 * test_chunkstore.c - blocks of slices in a mem:// store: ranges across
 * block boundaries, compression, the memory cache (hits, bound), single
 * flight of concurrent misses, corrupt and missing blocks, delete,
 * background prefetch (no double fetch, bounded queue, clean close), and
 * ranged reads (bytes fetched for small reads, the table cache, when a
 * block is read whole after all, corrupt segments, random read-back), and
 * the frames of one pack read at once through a disk cache (one GET).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fs/data/chunkstore.h"
#include "fs/store/diskcache.h"

#define BS    (64u << 10)
#define WHOLE (BS / 4) /* the smallest read that fetches a block whole */

/* ---- a store wrapper that counts gets and can slow them down ---- */

struct slow_store {
	struct objstore base; /* first */
	struct objstore *inner;
	int gets;	   /* __atomic */
	int delay_us;	   /* per get */
	int hold;	   /* __atomic; set: gets wait until it is cleared */
	const char *alias; /* set: every get reads this key instead */
	/* >= 0: gets see this byte of every object flipped, like a bad
	 * local copy, until the next evict */
	long bad_at;
	uint64_t order[64]; /* slice of each block get, in order */
	int norder;	    /* __atomic */
	int fail; /* __atomic; set: gets fail with it after the hold */
};

static int slow_get(struct objstore *s, const char *key, uint64_t off,
		    size_t len, void **data, size_t *got)
{
	struct slow_store *w = (struct slow_store *)s;

	__atomic_fetch_add(&w->gets, 1, __ATOMIC_RELAXED);
	unsigned long long id;
	if (sscanf(key, "blocks/%*u/%*u/%llu_", &id) == 1) {
		int i = __atomic_fetch_add(&w->norder, 1, __ATOMIC_RELAXED);
		if (i < 64)
			w->order[i] = id;
	}
	if (w->delay_us)
		usleep((useconds_t)w->delay_us);
	while (__atomic_load_n(&w->hold, __ATOMIC_RELAXED))
		usleep(1000);
	int fail = __atomic_load_n(&w->fail, __ATOMIC_RELAXED);
	if (fail)
		return fail;
	int err = objstore_get(w->inner, w->alias ? w->alias : key, off, len,
			       data, got);
	long at = __atomic_load_n(&w->bad_at, __ATOMIC_RELAXED);
	if (!err && at >= 0 && (uint64_t)at >= off && (uint64_t)at < off + *got)
		((unsigned char *)*data)[at - (long)off] ^= 0x40;
	return err;
}

static int slow_evict(struct objstore *s, const char *key, int bad)
{
	struct slow_store *w = (struct slow_store *)s;
	(void)key;
	(void)bad;
	return __atomic_exchange_n(&w->bad_at, -1, __ATOMIC_RELAXED) >= 0
		   ? 0
		   : ENOENT;
}

static int slow_put(struct objstore *s, const char *key, const void *data,
		    size_t len)
{
	return objstore_put(((struct slow_store *)s)->inner, key, data, len);
}

static int slow_del(struct objstore *s, const char *key)
{
	return objstore_del(((struct slow_store *)s)->inner, key);
}

static int slow_head(struct objstore *s, const char *key, uint64_t *size)
{
	return objstore_head(((struct slow_store *)s)->inner, key, size);
}

static int slow_list(struct objstore *s, const char *prefix,
		     objstore_list_fn fn, void *arg)
{
	return objstore_list(((struct slow_store *)s)->inner, prefix, fn, arg);
}

static void slow_close(struct objstore *s)
{
	(void)s; /* the test owns it */
}

static const struct objstore_ops slow_ops = {
    .scheme = "slow",
    .get = slow_get,
    .put = slow_put,
    .del = slow_del,
    .head = slow_head,
    .list = slow_list,
    .evict = slow_evict,
    .close = slow_close,
};

/* ---- fixtures ---- */

static struct objstore *mem;
static struct slow_store slow;
static struct chunkstore *cs;

static void setup_cs_bs(enum codec_compress c, size_t cache, int threads,
			uint32_t bs)
{
	struct chunkstore_opts o = {.block_size = bs,
				    .compress = c,
				    .mem_cache_bytes = cache,
				    .prefetch_threads = threads};

	cr_assert_eq(objstore_open("mem://", NULL, &mem), 0);
	memset(&slow, 0, sizeof(slow));
	slow.base.ops = &slow_ops;
	slow.inner = mem;
	slow.bad_at = -1;
	cr_assert_eq(chunkstore_open(&slow.base, &o, &cs), 0);
}

static void setup_cs_pf(enum codec_compress c, size_t cache, int threads)
{
	setup_cs_bs(c, cache, threads, BS);
}

static void setup_cs(enum codec_compress c, size_t cache)
{
	setup_cs_pf(c, cache, 0);
}

static void teardown_cs(void)
{
	chunkstore_close(cs);
	cs = NULL;
	objstore_close(mem);
	mem = NULL;
}

static void fill_random(unsigned char *p, size_t n, uint64_t seed)
{
	uint64_t x = seed | 1;

	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = (unsigned char)x;
	}
}

/* Store a slice of size bytes as blocks, the way the writer does. */
static void put_slice(uint64_t id, const unsigned char *data, uint32_t size)
{
	const uint32_t bs = chunkstore_block_size(cs);

	for (uint32_t i = 0; (uint64_t)i * bs < size; i++) {
		uint32_t len = size - i * bs < bs ? size - i * bs : bs;
		cr_assert_eq(
		    chunkstore_put_block(cs, id, i, data + (size_t)i * bs, len),
		    0);
	}
}

static void expect_range(uint64_t id, const unsigned char *data, uint32_t size,
			 uint32_t off, uint32_t len)
{
	unsigned char *buf = malloc(len + 1);

	cr_assert(buf);
	cr_assert_eq(chunkstore_read(cs, id, size, off, len, buf), 0,
		     "read [%u, +%u) of %u", off, len, size);
	cr_assert_eq(memcmp(buf, data + off, len), 0, "bytes [%u, +%u) differ",
		     off, len);
	free(buf);
}

static struct chunkstore_stats stats(void)
{
	struct chunkstore_stats st;
	chunkstore_get_stats(cs, &st);
	return st;
}

/* ---- tests ---- */

Test(chunkstore, key_layout)
{
	char key[96];

	chunkstore_key(1234567890, 3, 65536, key, sizeof(key));
	cr_assert_str_eq(key, "blocks/1234/567/1234567890_3_65536");
	chunkstore_key(7, 0, 10, key, sizeof(key));
	cr_assert_str_eq(key, "blocks/0/0/7_0_10");
}

Test(chunkstore, rejects_bad_opts)
{
	struct objstore *s;
	struct chunkstore *c = (void *)1;
	struct chunkstore_opts o = {.block_size = 1000};

	cr_assert_eq(objstore_open("mem://", NULL, &s), 0);
	cr_assert_eq(chunkstore_open(s, &o, &c), EINVAL);
	cr_assert_null(c);
	objstore_close(s);
}

static void ranges_roundtrip(enum codec_compress c, int compressible)
{
	const uint32_t size = 3 * BS + 3392; /* last block short */
	unsigned char *data = malloc(size);

	setup_cs(c, 1 << 20);
	cr_assert(data);
	fill_random(data, size, 42);
	if (compressible)
		for (uint32_t i = 0; i < size; i++)
			data[i] = (unsigned char)(data[i] % 16 ? 'a' : data[i]);
	put_slice(9, data, size);
	struct chunkstore_stats st = stats();
	cr_assert_eq(st.puts, 4);
	if (c == CODEC_LZ4 && compressible)
		cr_assert_lt(st.put_bytes, size / 2, "LZ4 did not compress");
	else
		cr_assert_geq(st.put_bytes, size, "stored less than raw");

	expect_range(9, data, size, 0, size);
	expect_range(9, data, size, BS - 100, 200);	 /* boundary */
	expect_range(9, data, size, BS - 1, 2 * BS + 2); /* three blocks */
	expect_range(9, data, size, 3 * BS, 3392);	 /* short block */
	expect_range(9, data, size, size - 1, 1);	 /* last byte */
	expect_range(9, data, size, 12345, 0);
	/* Past the slice is a caller bug, not data. */
	unsigned char b[2];
	cr_assert_eq(chunkstore_read(cs, 9, size, size - 1, 2, b), EINVAL);
	free(data);
	teardown_cs();
}

Test(chunkstore, ranges_plain)
{
	ranges_roundtrip(CODEC_NONE, 0);
}
Test(chunkstore, ranges_lz4_random)
{
	ranges_roundtrip(CODEC_LZ4, 0);
}
Test(chunkstore, ranges_lz4_compressible)
{
	ranges_roundtrip(CODEC_LZ4, 1);
}

Test(chunkstore, cache_hits)
{
	unsigned char data[BS], buf[WHOLE];

	setup_cs(CODEC_LZ4, 4 * BS);
	fill_random(data, BS, 1);
	put_slice(1, data, BS);

	/* a large read caches the block; a small one then uses it */
	cr_assert_eq(chunkstore_read(cs, 1, BS, 10, WHOLE, buf), 0);
	cr_assert_eq(stats().gets, 1);
	cr_assert_eq(stats().cache_misses, 1);
	cr_assert_eq(chunkstore_read(cs, 1, BS, 500, 100, buf), 0);
	cr_assert_eq(memcmp(buf, data + 500, 100), 0);
	cr_assert_eq(stats().gets, 1, "second read went to the store");
	cr_assert_eq(stats().cache_hits, 1);
	cr_assert_eq(slow.gets, 1);
	teardown_cs();
}

Test(chunkstore, cache_bound)
{
	const uint32_t size = 4 * BS;
	unsigned char *data = malloc(size), buf[WHOLE];

	setup_cs(CODEC_NONE, 2 * BS); /* room for two blocks */
	fill_random(data, size, 2);
	put_slice(2, data, size);
	for (uint32_t i = 0; i < 4; i++)
		cr_assert_eq(chunkstore_read(cs, 2, size, i * BS, WHOLE, buf),
			     0);
	cr_assert_eq(stats().gets, 4);
	/* The two newest are cached, the two oldest were evicted: so the
	 * figures of the memory cache say. */
	struct chunkstore_stats cst;
	chunkstore_get_stats(cs, &cst);
	cr_assert_eq(cst.cache_entries, 2);
	cr_assert_eq(cst.cache_bytes, 2 * BS);
	cr_assert_eq(cst.cache_evictions, 2);
	cr_assert_eq(chunkstore_read(cs, 2, size, 3 * BS, 10, buf), 0);
	cr_assert_eq(chunkstore_read(cs, 2, size, 2 * BS, 10, buf), 0);
	cr_assert_eq(stats().gets, 4);
	cr_assert_eq(chunkstore_read(cs, 2, size, 0, WHOLE, buf), 0);
	cr_assert_eq(memcmp(buf, data, 10), 0);
	cr_assert_eq(stats().gets, 5, "evicted block was not fetched again");
	free(data);
	teardown_cs();
}

Test(chunkstore, no_cache)
{
	unsigned char data[BS], buf[WHOLE];

	setup_cs(CODEC_NONE, 0);
	fill_random(data, BS, 3);
	put_slice(3, data, BS);
	cr_assert_eq(chunkstore_read(cs, 3, BS, 0, WHOLE, buf), 0);
	cr_assert_eq(chunkstore_read(cs, 3, BS, 0, WHOLE, buf), 0);
	cr_assert_eq(memcmp(buf, data, 10), 0);
	cr_assert_eq(stats().gets, 2);
	teardown_cs();
}

/* ---- single flight ---- */

#define READERS 16

struct sf {
	pthread_barrier_t start;
	const unsigned char *data;
	int bad; /* __atomic */
};

static void *sf_reader(void *arg)
{
	struct sf *sf = arg;
	unsigned char *buf = malloc(BS);

	pthread_barrier_wait(&sf->start);
	if (!buf || chunkstore_read(cs, 4, BS, 0, BS, buf) ||
	    memcmp(buf, sf->data, BS))
		__atomic_fetch_add(&sf->bad, 1, __ATOMIC_RELAXED);
	free(buf);
	return NULL;
}

static void single_flight(size_t cache)
{
	unsigned char *data = malloc(BS);
	pthread_t t[READERS];
	struct sf sf = {.data = data};

	setup_cs(CODEC_LZ4, cache);
	fill_random(data, BS, 4);
	put_slice(4, data, BS);
	slow.delay_us = 200 * 1000; /* all readers arrive during the fetch */
	pthread_barrier_init(&sf.start, NULL, READERS);
	for (int i = 0; i < READERS; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, sf_reader, &sf), 0);
	for (int i = 0; i < READERS; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&sf.start);
	cr_assert_eq(sf.bad, 0, "%d readers got an error or wrong bytes",
		     sf.bad);
	cr_assert_eq(slow.gets, 1, "%d gets for one cold block", slow.gets);
	cr_assert_eq(stats().gets, 1);
	free(data);
	teardown_cs();
}

Test(chunkstore, single_flight)
{
	single_flight(1 << 20);
}
Test(chunkstore, single_flight_without_cache)
{
	single_flight(0);
}

/* ---- damage ---- */

static void flip_stored_bit(uint64_t id, uint32_t idx, uint32_t len, size_t at,
			    void **orig, size_t *orig_len)
{
	char key[96];
	void *d;
	size_t n;

	chunkstore_key(id, idx, len, key, sizeof(key));
	cr_assert_eq(objstore_get(mem, key, 0, 0, &d, &n), 0);
	*orig = malloc(n);
	memcpy(*orig, d, n);
	*orig_len = n;
	((unsigned char *)d)[at % n] ^= 0x10;
	cr_assert_eq(objstore_put(mem, key, d, n), 0);
	free(d);
}

static void corrupt_block(enum codec_compress c, size_t at)
{
	unsigned char data[BS], buf[BS];
	void *orig;
	size_t orig_len;
	char key[96];

	setup_cs(c, 1 << 20);
	fill_random(data, BS, 5);
	memset(data, 'z', BS / 2); /* compressible half */
	put_slice(5, data, BS);
	flip_stored_bit(5, 0, BS, at, &orig, &orig_len);

	/* whole-block reads: see ranged_corrupt_segment for small ones */
	cr_assert_eq(chunkstore_read(cs, 5, BS, 0, BS, buf), EIO);
	cr_assert_eq(stats().corrupt, 1);
	/* Not cached: the next read goes to the store and fails again. */
	cr_assert_eq(chunkstore_read(cs, 5, BS, 0, BS, buf), EIO);
	cr_assert_eq(stats().corrupt, 2);
	cr_assert_eq(stats().gets, 2);

	/* Repaired in the store: read succeeds, with the right bytes. */
	chunkstore_key(5, 0, BS, key, sizeof(key));
	cr_assert_eq(objstore_put(mem, key, orig, orig_len), 0);
	cr_assert_eq(chunkstore_read(cs, 5, BS, 0, BS, buf), 0);
	cr_assert_eq(memcmp(buf, data, BS), 0);
	cr_assert_eq(stats().corrupt, 2);
	free(orig);
	teardown_cs();
}

Test(chunkstore, corrupt_payload_plain)
{
	corrupt_block(CODEC_NONE, 5000);
}
Test(chunkstore, corrupt_payload_lz4)
{
	corrupt_block(CODEC_LZ4, 30);
}
Test(chunkstore, corrupt_header)
{
	corrupt_block(CODEC_NONE, 17);
}

Test(chunkstore, truncated_block)
{
	unsigned char data[BS], buf[BS];
	char key[96];
	void *d;
	size_t n;

	setup_cs(CODEC_NONE, 1 << 20);
	fill_random(data, BS, 6);
	put_slice(6, data, BS);
	chunkstore_key(6, 0, BS, key, sizeof(key));
	cr_assert_eq(objstore_get(mem, key, 0, 0, &d, &n), 0);
	cr_assert_eq(objstore_put(mem, key, d, n - 1), 0);
	free(d);
	cr_assert_eq(chunkstore_read(cs, 6, BS, 0, BS, buf), EIO);
	cr_assert_eq(stats().corrupt, 1);
	/* a small read of the cut segment fails too; the segments before
	 * it are intact and checked one by one, so they still read */
	cr_assert_eq(chunkstore_read(cs, 6, BS, BS - 10, 10, buf), EIO);
	cr_assert_eq(stats().corrupt, 2);
	cr_assert_eq(chunkstore_read(cs, 6, BS, 100, 10, buf), 0);
	cr_assert_eq(memcmp(buf, data + 100, 10), 0);
	cr_assert_eq(stats().ranged_reads, 1);
	teardown_cs();
}

Test(chunkstore, missing_block)
{
	const uint32_t size = 2 * BS;
	unsigned char *data = malloc(size), buf[10];
	char key[96];

	setup_cs(CODEC_NONE, 1 << 20);
	cr_assert_eq(chunkstore_read(cs, 77, 100, 0, 10, buf), EIO);
	fill_random(data, size, 7);
	put_slice(7, data, size);
	chunkstore_key(7, 1, BS, key, sizeof(key));
	cr_assert_eq(objstore_del(mem, key), 0);
	cr_assert_eq(chunkstore_read(cs, 7, size, 0, 10, buf), 0);
	cr_assert_eq(chunkstore_read(cs, 7, size, BS - 5, 10, buf), EIO);
	cr_assert_eq(stats().corrupt, 0);
	free(data);
	teardown_cs();
}

Test(chunkstore, store_error_is_eio)
{
	unsigned char data[BS], buf[10];

	setup_cs(CODEC_NONE, 1 << 20);
	fill_random(data, BS, 8);
	put_slice(8, data, BS);
	mem->fail_err = ETIMEDOUT;
	mem->fail_next = 1;
	cr_assert_eq(chunkstore_read(cs, 8, BS, 0, 10, buf), EIO);
	cr_assert_eq(chunkstore_read(cs, 8, BS, 0, 10, buf), 0);
	cr_assert_eq(memcmp(buf, data, 10), 0);
	teardown_cs();
}

static int count_key(void *arg, const char *key, uint64_t size, int64_t mtime)
{
	(void)mtime;
	(void)key;
	(void)size;
	(*(int *)arg)++;
	return 0;
}

Test(chunkstore, delete_all_blocks)
{
	const uint32_t size = 3 * BS + 1;
	unsigned char *data = malloc(size), buf[10];
	int n = 0;

	setup_cs(CODEC_LZ4, 1 << 20);
	fill_random(data, size, 9);
	put_slice(9, data, size);
	put_slice(10, data, BS); /* another slice, kept */
	cr_assert_eq(objstore_list(mem, "blocks/", count_key, &n), 0);
	cr_assert_eq(n, 5);

	/* Cached before the delete: must not be served afterwards. */
	cr_assert_eq(chunkstore_read(cs, 9, size, 0, 10, buf), 0);
	cr_assert_eq(chunkstore_delete(cs, 9, size), 0);
	cr_assert_eq(stats().dels, 4);
	n = 0;
	cr_assert_eq(objstore_list(mem, "blocks/", count_key, &n), 0);
	cr_assert_eq(n, 1);
	cr_assert_eq(chunkstore_read(cs, 9, size, 0, 10, buf), EIO);
	cr_assert_eq(chunkstore_read(cs, 9, size, size - 1, 1, buf), EIO);
	cr_assert_eq(chunkstore_read(cs, 10, BS, 0, 10, buf), 0);
	/* Deleting again is fine: missing blocks are not an error. */
	cr_assert_eq(chunkstore_delete(cs, 9, size), 0);
	free(data);
	teardown_cs();
}

/* ---- blocks not in the store yet ---- */

/* A block another client has not uploaded yet (writeback) is waited for
 * up to block_wait_ms, once per slice: a read of the same slice that
 * comes right after (the kernel retries a failed readahead page by page;
 * a read spans several blocks) fails at once instead of waiting again. */
Test(chunkstore, missing_slice_waited_for_once)
{
	const uint32_t size = 2 * BS;
	unsigned char *data = malloc(size), *buf = malloc(size);
	struct chunkstore_opts o = {
	    .block_size = BS, .compress = CODEC_NONE, .block_wait_ms = 1500};

	setup_cs(CODEC_NONE, 0);
	chunkstore_close(cs);
	cr_assert_eq(chunkstore_open(&slow.base, &o, &cs), 0);
	fill_random(data, size, 21);

	cr_assert_eq(chunkstore_read(cs, 21, size, 0, BS, buf), EIO);
	int g = slow.gets;
	cr_assert_geq(g, 2, "the first read did not wait (%d gets)", g);
	cr_assert_eq(chunkstore_read(cs, 21, size, 0, BS, buf), EIO);
	cr_assert_eq(slow.gets, g + 1, "the read again waited: %d gets",
		     slow.gets - g);
	cr_assert_eq(chunkstore_read(cs, 21, size, BS, BS, buf), EIO);
	cr_assert_eq(slow.gets, g + 2,
		     "another block of the slice waited: "
		     "%d gets",
		     slow.gets - g - 1);

	/* another slice waits on its own */
	g = slow.gets;
	cr_assert_eq(chunkstore_read(cs, 22, BS, 0, BS, buf), EIO);
	cr_assert_geq(slow.gets, g + 2, "slice 22 did not wait");

	/* uploaded at last: read at once */
	put_slice(21, data, size);
	cr_assert_eq(chunkstore_read(cs, 21, size, 0, size, buf), 0);
	cr_assert_eq(memcmp(buf, data, size), 0);
	free(data);
	free(buf);
	teardown_cs();
}

/* ---- prefetch ---- */

/* Wait (bounded) until the store has seen n gets and they are done. */
static void wait_gets(uint64_t n)
{
	for (int i = 0; i < 2000 && stats().gets < n; i++)
		usleep(1000);
	cr_assert_eq(stats().gets, n, "%llu gets, expected %llu",
		     (unsigned long long)stats().gets, (unsigned long long)n);
}

static void prefetch_then_read(int threads, int settle_us)
{
	const uint32_t size = 8 * BS;
	unsigned char *data = malloc(size), *buf = malloc(size);

	setup_cs_pf(CODEC_LZ4, 16 * BS, threads);
	fill_random(data, size, 11);
	put_slice(11, data, size);
	slow.delay_us = 20 * 1000;
	chunkstore_prefetch(cs, 11, size, 0, size);
	cr_assert_eq(stats().prefetched, 8);
	/* settle: until every prefetch is in flight (its get begun), not a
	 * fixed time, which a loaded machine overran (4 of 8 found) */
	for (int i = 0; settle_us && i < 2000 &&
			__atomic_load_n(&slow.gets, __ATOMIC_RELAXED) < 8;
	     i++)
		usleep(1000);
	/* Reads arrive while the prefetches are queued or in flight. */
	for (uint32_t i = 0; i < 8; i++)
		cr_assert_eq(
		    chunkstore_read(cs, 11, size, i * BS, BS, buf + i * BS), 0);
	cr_assert_eq(memcmp(buf, data, size), 0);
	wait_gets(8);
	cr_assert_eq(slow.gets, 8, "%d gets for 8 blocks", slow.gets);
	if (settle_us)
		cr_assert_geq(stats().cache_hits, 6,
			      "only %llu of 8 reads found the prefetch",
			      (unsigned long long)stats().cache_hits);
	/* All cached now. */
	uint64_t hits = stats().cache_hits;
	cr_assert_eq(chunkstore_read(cs, 11, size, 0, size, buf), 0);
	cr_assert_eq(stats().cache_hits, hits + 8);
	cr_assert_eq(slow.gets, 8);
	cr_assert_eq(stats().prefetch_drops, 0);
	free(data);
	free(buf);
	teardown_cs();
}

Test(chunkstore, prefetch_in_flight_is_waited_for)
{
	/* every block in flight when the reads come */
	prefetch_then_read(8, 5000);
}

Test(chunkstore, prefetch_races_reads)
{
	/* reads overtake a queue that two threads work through */
	prefetch_then_read(2, 0);
}

Test(chunkstore, prefetch_shares_the_workers_between_readers)
{
	const uint32_t size = 6 * BS;
	unsigned char *data = malloc(size);

	/* one worker, a reader far ahead (slice 41, six blocks queued),
	 * then another (slice 42) asks for two */
	setup_cs_pf(CODEC_NONE, 16 * BS, 1);
	fill_random(data, size, 40);
	put_slice(41, data, size);
	put_slice(42, data, 2 * BS);
	slow.delay_us = 10 * 1000;
	chunkstore_prefetch(cs, 41, size, 0, size);
	chunkstore_prefetch(cs, 42, 2 * BS, 0, 2 * BS);
	wait_gets(8);
	/* the second reader does not wait for the first one's window:
	 * its blocks come in turn with the first one's, not after them */
	int first = -1, second = -1;
	for (int i = 0; i < 8; i++) {
		if (slow.order[i] == 42 && first < 0)
			first = i;
		else if (slow.order[i] == 42)
			second = i;
	}
	cr_assert(first >= 0 && first <= 2, "slice 42 first fetched %dth",
		  first + 1);
	cr_assert(second >= 0 && second <= 4, "slice 42 fetched %dth again",
		  second + 1);
	free(data);
	teardown_cs();
}

Test(chunkstore, prefetch_skips_cached_and_queued)
{
	const uint32_t size = 4 * BS + 100;
	unsigned char *data = malloc(size), buf[WHOLE];

	setup_cs_pf(CODEC_NONE, 16 * BS, 1);
	fill_random(data, size, 12);
	put_slice(12, data, size);
	cr_assert_eq(chunkstore_read(cs, 12, size, BS + 5, WHOLE, buf), 0);
	slow.delay_us = 20 * 1000;
	/* Block 1 is cached; the same range twice queues each block once;
	 * a range past the slice is clipped. */
	chunkstore_prefetch(cs, 12, size, 0, size);
	chunkstore_prefetch(cs, 12, size, 10, size);
	chunkstore_prefetch(cs, 12, size, size - 1, 1000);
	cr_assert_eq(stats().prefetched, 4);
	wait_gets(5);
	usleep(50 * 1000);
	cr_assert_eq(slow.gets, 5);
	for (uint32_t off = 0; off < size; off += BS / 2)
		expect_range(12, data, size, off, size - off < 10 ? 1 : 10);
	cr_assert_eq(slow.gets, 5, "a prefetched block was fetched again");
	/* All cached: prefetch queues nothing. */
	chunkstore_prefetch(cs, 12, size, 0, size);
	cr_assert_eq(stats().prefetched, 4);
	free(data);
	teardown_cs();
}

/* The store's gets are held for the whole test: a prefetch that waited
 * for room in the full queue (room comes only when the worker finishes a
 * get) would never return, and the test would time out. */
Test(chunkstore, prefetch_queue_full_drops_without_blocking, .timeout = 60)
{
	const uint32_t nblk = 200, size = nblk * BS;
	unsigned char *data = malloc(size);

	setup_cs_pf(CODEC_NONE, 4 * BS, 1);
	fill_random(data, size, 13);
	put_slice(13, data, size);
	__atomic_store_n(&slow.hold, 1, __ATOMIC_RELAXED);

	chunkstore_prefetch(cs, 13, size, 0, size);
	struct chunkstore_stats st = stats();
	cr_assert_gt(st.prefetch_drops, 0);
	cr_assert_eq(st.prefetched + st.prefetch_drops, nblk);
	cr_assert_leq(st.prefetched, 65, "queue holds %llu",
		      (unsigned long long)st.prefetched);

	/* Still full: a second call drops again, at once. */
	chunkstore_prefetch(cs, 13, size, 100 * BS, 50 * BS);
	cr_assert_eq(stats().prefetch_drops, st.prefetch_drops + 50);
	cr_assert_eq(stats().prefetched, st.prefetched);
	cr_assert_leq(slow.gets, 1, "%d gets started while held", slow.gets);

	/* Close drops the queue: it waits for the fetch in flight, and
	 * fetches none of the sixty queued. */
	__atomic_store_n(&slow.hold, 0, __ATOMIC_RELAXED);
	teardown_cs();
	cr_assert_leq(slow.gets, 3, "%d gets after close", slow.gets);
	free(data);
}

Test(chunkstore, prefetch_off_without_threads)
{
	unsigned char data[BS];

	setup_cs_pf(CODEC_NONE, 16 * BS, 0);
	fill_random(data, BS, 14);
	put_slice(14, data, BS);
	chunkstore_prefetch(cs, 14, BS, 0, BS);
	usleep(30 * 1000);
	cr_assert_eq(slow.gets, 0);
	cr_assert_eq(stats().prefetched, 0);
	cr_assert_eq(stats().prefetch_drops, 0);
	teardown_cs();
}

Test(chunkstore, prefetch_failure_is_not_the_readers)
{
	unsigned char data[BS], buf[BS];

	setup_cs_pf(CODEC_NONE, 16 * BS, 1);
	fill_random(data, BS, 15);
	put_slice(15, data, BS);
	/* The prefetch's get fails; a reader waiting on it fetches anew. */
	slow.delay_us = 20 * 1000;
	mem->fail_err = ETIMEDOUT;
	mem->fail_next = 1;
	chunkstore_prefetch(cs, 15, BS, 0, BS);
	usleep(5000);
	cr_assert_eq(chunkstore_read(cs, 15, BS, 0, BS, buf), 0);
	cr_assert_eq(memcmp(buf, data, BS), 0);
	cr_assert_eq(slow.gets, 2);

	/* A missing block: prefetch fails quietly, the read says EIO. */
	chunkstore_prefetch(cs, 99, BS, 0, BS);
	usleep(5000);
	cr_assert_eq(chunkstore_read(cs, 99, BS, 0, 10, buf), EIO);
	teardown_cs();
}

/* Readers and prefetches of random ranges over several slices with a cache
 * that holds a few blocks: every byte read matches the slice written. */
#define PF_SLICES  4
#define PF_READERS 3

struct pf_mix {
	unsigned char *data[PF_SLICES];
	uint32_t size[PF_SLICES];
	int bad; /* __atomic */
};

struct pf_thread {
	struct pf_mix *m;
	uint64_t seed;
};

static void *pf_mixer(void *arg)
{
	struct pf_mix *m = ((struct pf_thread *)arg)->m;
	uint64_t x = ((struct pf_thread *)arg)->seed | 1;
	unsigned char *buf = malloc(2 * BS);

	for (int i = 0; i < 300 && buf; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		int sl = (int)(x % PF_SLICES);
		uint32_t size = m->size[sl];
		uint32_t off = (uint32_t)((x >> 8) % size);
		uint32_t len = (uint32_t)((x >> 32) % (2 * BS));
		if (len > size - off)
			len = size - off;
		if ((x >> 60) & 1) {
			chunkstore_prefetch(cs, 100 + sl, size, off, 4 * BS);
		} else if (chunkstore_read(cs, 100 + sl, size, off, len, buf) ||
			   memcmp(buf, m->data[sl] + off, len)) {
			__atomic_fetch_add(&m->bad, 1, __ATOMIC_RELAXED);
		}
	}
	free(buf);
	return NULL;
}

Test(chunkstore, prefetch_random_integrity)
{
	struct pf_mix m = {.bad = 0};
	const char *env = getenv("GRANARY_SEED");
	uint64_t seed = env ? strtoull(env, NULL, 0) : 20240611;
	pthread_t t[PF_READERS];
	struct pf_thread ta[PF_READERS];

	fprintf(stderr, "prefetch_random_integrity: seed %llu\n",
		(unsigned long long)seed);
	setup_cs_pf(CODEC_LZ4, 4 * BS, 2);
	for (int i = 0; i < PF_SLICES; i++) {
		m.size[i] = (uint32_t)(3 * BS + (seed >> i) % (5 * BS) + 1);
		m.data[i] = malloc(m.size[i]);
		cr_assert(m.data[i]);
		fill_random(m.data[i], m.size[i], seed + (uint64_t)i);
		if (i % 2) /* half compressible */
			memset(m.data[i], 'q', m.size[i] / 3);
		put_slice(100 + (uint64_t)i, m.data[i], m.size[i]);
	}
	slow.delay_us = 300;
	for (int i = 0; i < PF_READERS; i++) {
		ta[i].m = &m;
		ta[i].seed = seed + (uint64_t)i * 0x9e3779b97f4a7c15ull;
		cr_assert_eq(pthread_create(&t[i], NULL, pf_mixer, &ta[i]), 0);
	}
	for (int i = 0; i < PF_READERS; i++)
		pthread_join(t[i], NULL);
	cr_assert_eq(m.bad, 0, "%d reads failed or differed (seed %llu)", m.bad,
		     (unsigned long long)seed);
	cr_assert_gt(stats().prefetched, 0);
	teardown_cs();
	for (int i = 0; i < PF_SLICES; i++)
		free(m.data[i]);
}

/* ---- ranged reads ---- */

#define BIG   (1u << 20) /* block size of the ranged tests */
#define PAGE  4096u
#define TABLE (CODEC_HDR_SIZE + 4 * (BIG / CODEC_SEG_SIZE)) /* per block */

static uint64_t seed_of(const char *test, uint64_t dflt)
{
	const char *env = getenv("GRANARY_SEED");
	uint64_t seed = env ? strtoull(env, NULL, 0) : dflt;

	fprintf(stderr, "%s: seed %llu (set GRANARY_SEED to change)\n", test,
		(unsigned long long)seed);
	return seed;
}

/* Forget what the chunk store keeps about block 0 of slice id (the memory
 * cache entry and the table): putting it again does. */
static void table_forget(uint64_t id, const unsigned char *data)
{
	cr_assert_eq(chunkstore_put_block(cs, id, 0, data, BIG), 0);
}

static uint64_t rnd(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/* Bytes the store handed out, counted by its own wrapper. */
static uint64_t store_bytes(void)
{
	struct objstore_stats st;
	objstore_get_stats(&slow.base, &st);
	return st.get_bytes;
}

Test(chunkstore, ranged_random_small_reads_fetch_twice_at_most)
{
	const uint32_t nblk = 8, size = nblk * BIG, reads = 400;
	unsigned char *data = malloc(size), buf[2 * PAGE];
	uint64_t x = seed_of("ranged_random_small_reads", 20240701) | 1;
	uint64_t asked = 0;

	setup_cs_bs(CODEC_LZ4, 64 * BIG, 0, BIG); /* incompressible: v2 */
	fill_random(data, size, 21);
	put_slice(21, data, size);
	for (uint32_t i = 0; i < reads; i++) {
		/* half page aligned, half anywhere; inside one block */
		uint32_t off = (uint32_t)(rnd(&x) % nblk) * BIG +
			       (uint32_t)(rnd(&x) % (BIG - PAGE));
		if (i % 2)
			off &= ~(PAGE - 1);
		cr_assert_eq(chunkstore_read(cs, 21, size, off, PAGE, buf), 0);
		cr_assert_eq(memcmp(buf, data + off, PAGE), 0, "read at %u",
			     off);
		asked += PAGE;
	}
	struct chunkstore_stats st = stats();
	cr_assert_eq(st.get_bytes, store_bytes());
	cr_assert_leq(st.get_bytes, 2 * asked + nblk * TABLE,
		      "%llu bytes fetched for %llu read",
		      (unsigned long long)st.get_bytes,
		      (unsigned long long)asked);
	cr_assert_eq(st.ranged_reads, reads, "a read fetched a whole block");
	/* one table per block, then one GET per read */
	cr_assert_eq(st.gets, reads + nblk);
	cr_assert_eq(st.cache_misses, 0);
	free(data);
	teardown_cs();
}

Test(chunkstore, ranged_table_is_fetched_once)
{
	unsigned char *data = malloc(BIG), buf[PAGE];

	setup_cs_bs(CODEC_NONE, 64 * BIG, 0, BIG);
	fill_random(data, BIG, 22);
	put_slice(22, data, BIG);
	cr_assert_eq(chunkstore_read(cs, 22, BIG, 5 * PAGE, PAGE, buf), 0);
	cr_assert_eq(stats().gets, 2);
	cr_assert_eq(stats().get_bytes, TABLE + PAGE);
	cr_assert_eq(chunkstore_read(cs, 22, BIG, 100 * PAGE + 1, 10, buf), 0);
	cr_assert_eq(memcmp(buf, data + 100 * PAGE + 1, 10), 0);
	cr_assert_eq(stats().gets, 3, "the table was fetched again");
	cr_assert_eq(stats().get_bytes, TABLE + 2 * PAGE);
	/* a piece across a segment boundary: both segments */
	cr_assert_eq(chunkstore_read(cs, 22, BIG, 7 * PAGE - 3, 6, buf), 0);
	cr_assert_eq(memcmp(buf, data + 7 * PAGE - 3, 6), 0);
	cr_assert_eq(stats().get_bytes, TABLE + 4 * PAGE);
	free(data);
	teardown_cs();
}

/* Run fn on n threads (args: n elements of size bytes), all started while
 * the store holds every GET, so that they all miss at once. */
static void run_held(int n, void *(*fn)(void *), void *args, size_t size)
{
	pthread_t t[16];

	cr_assert_leq(n, 16);
	__atomic_store_n(&slow.hold, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < n; i++)
		cr_assert_eq(
		    pthread_create(&t[i], NULL, fn, (char *)args + i * size),
		    0);
	usleep(200 * 1000); /* all of them miss while the first GET waits */
	__atomic_store_n(&slow.hold, 0, __ATOMIC_RELAXED);
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
}

/* Small reads of one cold block that miss at once wait for one fetch of
 * its table: one GET of the prefix, then one ranged GET each. A failed
 * fetch of the table fails them all; the next read fetches it again. */
#define TABLE_READERS 8

struct tr {
	const unsigned char *data;
	int want; /* what every read returns */
	int bad;  /* __atomic */
};

struct tr_arg {
	struct tr *tr;
	int i;
};

static void *tr_reader(void *arg)
{
	struct tr_arg *a = arg;
	unsigned char buf[PAGE];
	uint32_t off = (uint32_t)a->i * 16 * PAGE + 100;

	int err = chunkstore_read(cs, 23, BIG, off, PAGE, buf);
	if (err != a->tr->want ||
	    (!err && memcmp(buf, a->tr->data + off, PAGE)))
		__atomic_fetch_add(&a->tr->bad, 1, __ATOMIC_RELAXED);
	return NULL;
}

/* TABLE_READERS small reads at once, while the store holds the first
 * GET; the GETs they made. */
static int tr_read_all(struct tr *tr)
{
	struct tr_arg a[TABLE_READERS];
	int gets = slow.gets;

	tr->bad = 0;
	for (int i = 0; i < TABLE_READERS; i++)
		a[i] = (struct tr_arg){tr, i};
	run_held(TABLE_READERS, tr_reader, a, sizeof(a[0]));
	return slow.gets - gets;
}

Test(chunkstore, ranged_table_is_fetched_once_by_concurrent_reads)
{
	unsigned char *data = malloc(BIG);
	struct tr tr = {.data = data};
	int gets;

	setup_cs_bs(CODEC_NONE, 64 * BIG, 0, BIG);
	fill_random(data, BIG, 23);
	put_slice(23, data, BIG);

	tr.want = EIO;
	slow.fail = EIO;
	gets = tr_read_all(&tr);
	cr_assert_eq(tr.bad, 0, "%d readers did not get EIO", tr.bad);
	cr_assert_eq(gets, 1, "%d GETs for one failed table", gets);

	tr.want = 0;
	slow.fail = 0;
	gets = tr_read_all(&tr);
	cr_assert_eq(tr.bad, 0, "%d readers got an error or wrong bytes",
		     tr.bad);
	cr_assert_eq(stats().ranged_reads, TABLE_READERS);
	cr_assert_eq(gets, 1 + TABLE_READERS,
		     "%d GETs: the table was fetched more than once", gets);
	teardown_cs();
	free(data);
}

Test(chunkstore, ranged_short_last_block)
{
	const uint32_t size = BIG + 300 * 1000 + 7; /* last block 300007 B */
	unsigned char *data = malloc(size), buf[PAGE];

	setup_cs_bs(CODEC_NONE, 64 * BIG, 0, BIG);
	fill_random(data, size, 23);
	put_slice(23, data, size);
	for (uint32_t back = 1; back < 3 * PAGE; back += 1111) {
		uint32_t n = back < PAGE ? back : PAGE;
		cr_assert_eq(chunkstore_read(cs, 23, size, size - back, n, buf),
			     0);
		cr_assert_eq(memcmp(buf, data + size - back, n), 0);
	}
	cr_assert_eq(stats().cache_misses, 0);
	cr_assert_gt(stats().ranged_reads, 0);
	free(data);
	teardown_cs();
}

Test(chunkstore, ranged_not_for_large_reads_cached_or_small_blocks)
{
	const uint32_t size = 2 * BIG + 60000; /* last block under 64 KiB */
	unsigned char *data = malloc(size), *buf = malloc(BIG);

	setup_cs_bs(CODEC_NONE, 64 * BIG, 0, BIG);
	fill_random(data, size, 24);
	put_slice(24, data, size);
	/* a quarter of the block: whole, cached */
	cr_assert_eq(chunkstore_read(cs, 24, size, 10, BIG / 4, buf), 0);
	cr_assert_eq(stats().gets, 1);
	cr_assert_eq(stats().cache_misses, 1);
	/* just under a quarter of the other block: ranged */
	cr_assert_eq(chunkstore_read(cs, 24, size, BIG, BIG / 4 - 1, buf), 0);
	cr_assert_eq(memcmp(buf, data + BIG, BIG / 4 - 1), 0);
	cr_assert_eq(stats().ranged_reads, 1);
	cr_assert_lt(stats().get_bytes, BIG + TABLE + BIG / 4 + PAGE);
	/* a small read of the cached block: a hit, no GET */
	uint64_t gets = stats().gets;
	cr_assert_eq(chunkstore_read(cs, 24, size, BIG / 2, 100, buf), 0);
	cr_assert_eq(memcmp(buf, data + BIG / 2, 100), 0);
	cr_assert_eq(stats().gets, gets);
	cr_assert_eq(stats().cache_hits, 1);
	/* the short last block is fetched whole */
	cr_assert_eq(chunkstore_read(cs, 24, size, 2 * BIG + 5, 10, buf), 0);
	cr_assert_eq(stats().gets, gets + 1);
	cr_assert_eq(stats().cache_misses, 2);
	cr_assert_eq(stats().ranged_reads, 1);
	free(buf);
	free(data);
	teardown_cs();
}

Test(chunkstore, ranged_compressed_block_is_read_whole)
{
	unsigned char *data = malloc(BIG), buf[PAGE];

	setup_cs_bs(CODEC_LZ4, 64 * BIG, 0, BIG);
	memset(data, 'c', BIG);
	fill_random(data, BIG / 4, 25); /* compresses well: v1 */
	put_slice(25, data, BIG);
	cr_assert_lt(stats().put_bytes, BIG * 7 / 8);
	cr_assert_eq(chunkstore_read(cs, 25, BIG, 3 * PAGE, PAGE, buf), 0);
	cr_assert_eq(memcmp(buf, data + 3 * PAGE, PAGE), 0);
	/* its prefix says v1, then the whole block */
	cr_assert_eq(stats().gets, 2);
	cr_assert_eq(stats().ranged_reads, 0);
	cr_assert_eq(chunkstore_read(cs, 25, BIG, 9 * PAGE, PAGE, buf), 0);
	cr_assert_eq(stats().gets, 2, "cached block fetched again");
	free(data);
	teardown_cs();

	/* with no memory cache, the verdict is kept: one GET per read */
	data = malloc(BIG);
	setup_cs_bs(CODEC_LZ4, 0, 0, BIG);
	memset(data, 'c', BIG);
	put_slice(26, data, BIG);
	cr_assert_eq(chunkstore_read(cs, 26, BIG, 0, PAGE, buf), 0);
	cr_assert_eq(chunkstore_read(cs, 26, BIG, PAGE * 7, PAGE, buf), 0);
	cr_assert_eq(chunkstore_read(cs, 26, BIG, PAGE * 2, PAGE, buf), 0);
	cr_assert_eq(memcmp(buf, data, PAGE), 0);
	cr_assert_eq(stats().gets, 4);
	free(data);
	teardown_cs();
}

Test(chunkstore, ranged_stream_in_a_block_is_read_whole)
{
	unsigned char *data = malloc(BIG), buf[PAGE];

	setup_cs_bs(CODEC_NONE, 64 * BIG, 0, BIG);
	fill_random(data, BIG, 27);
	put_slice(27, data, BIG);
	/* small sequential reads (O_DIRECT-like): the third goes whole */
	for (uint32_t i = 0; i < 8; i++) {
		cr_assert_eq(chunkstore_read(cs, 27, BIG, 40 * PAGE + i * PAGE,
					     PAGE, buf),
			     0);
		cr_assert_eq(memcmp(buf, data + 40 * PAGE + i * PAGE, PAGE), 0);
	}
	cr_assert_eq(stats().ranged_reads, 2);
	cr_assert_eq(stats().cache_misses, 1);
	cr_assert_eq(stats().cache_hits, 5);
	cr_assert_eq(stats().gets, 4); /* table, 2 ranged, 1 whole */
	free(data);
	teardown_cs();
}

Test(chunkstore, ranged_hot_block_is_bought)
{
	unsigned char *data = malloc(BIG), buf[PAGE];

	setup_cs_bs(CODEC_NONE, 64 * BIG, 0, BIG);
	fill_random(data, BIG, 28);
	put_slice(28, data, BIG);
	/* the same page again and again (no page cache in front of us) */
	for (int i = 0; i < 1000; i++) {
		cr_assert_eq(chunkstore_read(cs, 28, BIG, 77 * PAGE, PAGE, buf),
			     0);
		cr_assert_eq(memcmp(buf, data + 77 * PAGE, PAGE), 0);
	}
	struct chunkstore_stats st = stats();
	cr_assert_eq(st.cache_misses, 1, "the hot block was never cached");
	cr_assert_eq(st.ranged_reads, BIG / PAGE);
	/* ski rental: at most twice the price of reading it whole once */
	cr_assert_leq(st.get_bytes, 2 * (uint64_t)codec_bound(BIG) + TABLE);
	free(data);
	teardown_cs();
}

Test(chunkstore, ranged_corrupt_segment_then_repaired)
{
	unsigned char *data = malloc(BIG), buf[PAGE];
	void *orig;
	size_t orig_len;
	char key[96];

	setup_cs_bs(CODEC_NONE, 64 * BIG, 0, BIG);
	fill_random(data, BIG, 29);
	put_slice(29, data, BIG);
	/* table cached by a good read */
	cr_assert_eq(chunkstore_read(cs, 29, BIG, 0, PAGE, buf), 0);
	/* damage raw byte 10 * PAGE + 5 in the store */
	flip_stored_bit(29, 0, BIG, TABLE + 10 * PAGE + 5, &orig, &orig_len);
	cr_assert_eq(chunkstore_read(cs, 29, BIG, 10 * PAGE, 100, buf), EIO);
	/* the kept table might have been the bad copy: asked again once */
	cr_assert_eq(stats().corrupt, 2);
	cr_assert_eq(stats().gets, 2 + 3);
	cr_assert_eq(chunkstore_read(cs, 29, BIG, 10 * PAGE + 4000, 10, buf),
		     EIO);
	/* the other segments are fine */
	cr_assert_eq(chunkstore_read(cs, 29, BIG, 11 * PAGE, PAGE, buf), 0);
	cr_assert_eq(memcmp(buf, data + 11 * PAGE, PAGE), 0);
	cr_assert_eq(chunkstore_read(cs, 29, BIG, 9 * PAGE, PAGE, buf), 0);

	/* repaired in the store: the same read succeeds */
	chunkstore_key(29, 0, BIG, key, sizeof(key));
	cr_assert_eq(objstore_put(mem, key, orig, orig_len), 0);
	uint64_t bad = stats().corrupt;
	cr_assert_eq(chunkstore_read(cs, 29, BIG, 10 * PAGE, 100, buf), 0);
	cr_assert_eq(memcmp(buf, data + 10 * PAGE, 100), 0);
	/* and a whole read sees the repaired block too */
	unsigned char *all = malloc(BIG);
	cr_assert_eq(chunkstore_read(cs, 29, BIG, 0, BIG, all), 0);
	cr_assert_eq(memcmp(all, data, BIG), 0);
	cr_assert_eq(stats().corrupt, bad);
	free(all);
	free(orig);
	free(data);
	teardown_cs();
}

Test(chunkstore, ranged_corrupt_header_is_eio)
{
	unsigned char *data = malloc(BIG), buf[PAGE];
	void *orig;
	size_t orig_len;

	setup_cs_bs(CODEC_NONE, 64 * BIG, 0, BIG);
	fill_random(data, BIG, 30);
	put_slice(30, data, BIG);
	for (size_t at = 0; at < TABLE; at += 97) {
		flip_stored_bit(30, 0, BIG, at, &orig, &orig_len);
		cr_assert_eq(chunkstore_read(cs, 30, BIG, 3 * PAGE, 10, buf),
			     EIO, "flip at %zu", at);
		char key[96];
		chunkstore_key(30, 0, BIG, key, sizeof(key));
		cr_assert_eq(objstore_put(mem, key, orig, orig_len), 0);
		free(orig);
		cr_assert_eq(chunkstore_read(cs, 30, BIG, 3 * PAGE, 10, buf),
			     0);
		cr_assert_eq(memcmp(buf, data + 3 * PAGE, 10), 0);
		table_forget(30, data);
	}
	free(data);
	teardown_cs();
}

Test(chunkstore, ranged_bad_local_copy_is_refetched)
{
	unsigned char *data = malloc(BIG), buf[PAGE];

	setup_cs_bs(CODEC_NONE, 64 * BIG, 0, BIG);
	fill_random(data, BIG, 31);
	put_slice(31, data, BIG);
	/* a cache below us serves a bad copy until evicted */
	slow.bad_at = TABLE + 20 * PAGE + 9;
	cr_assert_eq(chunkstore_read(cs, 31, BIG, 20 * PAGE, PAGE, buf), 0);
	cr_assert_eq(memcmp(buf, data + 20 * PAGE, PAGE), 0);
	cr_assert_eq(stats().corrupt, 1);
	cr_assert_eq(slow.bad_at, -1, "not evicted");
	/* the same with a bad table */
	table_forget(31, data);
	slow.bad_at = 30;
	cr_assert_eq(chunkstore_read(cs, 31, BIG, 50 * PAGE, 9, buf), 0);
	cr_assert_eq(memcmp(buf, data + 50 * PAGE, 9), 0);
	cr_assert_eq(stats().corrupt, 2);
	free(data);
	teardown_cs();
}

Test(chunkstore, ranged_table_cache_is_bounded)
{
	const uint32_t n = 3000; /* tables of 64 KiB blocks, > 256 KiB */
	unsigned char data[BS], buf[16];
	char key[96];

	setup_cs(CODEC_NONE, 0); /* no memory cache: the smallest table cache */
	fill_random(data, BS, 32);
	put_slice(32, data, BS);
	chunkstore_key(32, 0, BS, key, sizeof(key));
	slow.alias = key; /* every block id reads that one object */
	for (uint32_t id = 1000; id < 1000 + n; id++)
		cr_assert_eq(chunkstore_read(cs, id, BS, 100, 16, buf), 0);
	cr_assert_eq(stats().gets, 2 * n);
	/* the newest table is kept, the oldest was evicted */
	cr_assert_eq(chunkstore_read(cs, 1000 + n - 1, BS, 200, 16, buf), 0);
	cr_assert_eq(stats().gets, 2 * n + 1);
	cr_assert_eq(chunkstore_read(cs, 1000, BS, 200, 16, buf), 0);
	cr_assert_eq(memcmp(buf, data + 200, 16), 0);
	cr_assert_eq(stats().gets, 2 * n + 3);
	teardown_cs();
}

/* Readers of random ranges, small and large, over compressible and
 * incompressible slices of 1 MiB blocks, with prefetches and a memory
 * cache of a few blocks: every byte matches the shadow copy. */
struct rr_mix {
	unsigned char *data[PF_SLICES];
	uint32_t size[PF_SLICES];
	int bad; /* __atomic */
};

struct rr_thread {
	struct rr_mix *m;
	uint64_t seed;
};

static void *rr_mixer(void *arg)
{
	struct rr_mix *m = ((struct rr_thread *)arg)->m;
	uint64_t x = ((struct rr_thread *)arg)->seed | 1;
	unsigned char *buf = malloc(2 * BIG);

	for (int i = 0; i < 400 && buf; i++) {
		int sl = (int)(rnd(&x) % PF_SLICES);
		uint32_t size = m->size[sl];
		uint32_t off = (uint32_t)(rnd(&x) % size), len;
		switch (rnd(&x) % 8) {
		case 0:
			len = (uint32_t)(rnd(&x) % (2 * BIG)); /* large */
			break;
		case 1:
			len = (uint32_t)(rnd(&x) % (BIG / 4)); /* medium */
			break;
		case 2: /* a short sequential run */
			len = PAGE;
			for (int k = 0; k < 4 && off + len <= size; k++) {
				if (chunkstore_read(cs, 200 + sl, size, off,
						    len, buf) ||
				    memcmp(buf, m->data[sl] + off, len))
					__atomic_fetch_add(&m->bad, 1,
							   __ATOMIC_RELAXED);
				off += len;
			}
			continue;
		case 3:
			chunkstore_prefetch(cs, 200 + sl, size, off, BIG);
			continue;
		default:
			len = (uint32_t)(rnd(&x) % (3 * PAGE)) + 1; /* small */
		}
		if (len > size - off)
			len = size - off;
		if (chunkstore_read(cs, 200 + sl, size, off, len, buf) ||
		    memcmp(buf, m->data[sl] + off, len))
			__atomic_fetch_add(&m->bad, 1, __ATOMIC_RELAXED);
	}
	free(buf);
	return NULL;
}

Test(chunkstore, ranged_random_integrity)
{
	struct rr_mix m = {.bad = 0};
	uint64_t seed = seed_of("ranged_random_integrity", 20240702);
	pthread_t t[PF_READERS];
	struct rr_thread ta[PF_READERS];

	setup_cs_bs(CODEC_LZ4, 3 * BIG, 2, BIG);
	for (int i = 0; i < PF_SLICES; i++) {
		m.size[i] = (uint32_t)(2 * BIG + (seed >> i) % (3 * BIG) + 1);
		m.data[i] = malloc(m.size[i]);
		cr_assert(m.data[i]);
		fill_random(m.data[i], m.size[i], seed + (uint64_t)i);
		if (i % 2) /* compressible: v1 blocks, read whole */
			memset(m.data[i], 'q', m.size[i] * 2 / 5);
		put_slice(200 + (uint64_t)i, m.data[i], m.size[i]);
	}
	slow.delay_us = 100;
	for (int i = 0; i < PF_READERS; i++) {
		ta[i].m = &m;
		ta[i].seed = seed + (uint64_t)i * 0x9e3779b97f4a7c15ull;
		cr_assert_eq(pthread_create(&t[i], NULL, rr_mixer, &ta[i]), 0);
	}
	for (int i = 0; i < PF_READERS; i++)
		pthread_join(t[i], NULL);
	cr_assert_eq(m.bad, 0, "%d reads failed or differed (seed %llu)", m.bad,
		     (unsigned long long)seed);
	struct chunkstore_stats st = stats();
	cr_assert_gt(st.ranged_reads, 0);
	cr_assert_gt(st.cache_hits, 0);
	cr_assert_eq(st.corrupt, 0);
	teardown_cs();
	for (int i = 0; i < PF_SLICES; i++)
		free(m.data[i]);
}

/* ---- zero-copy reads ---- */

struct runs {
	struct chunkstore_pin *pin[16];
	const void *data[16];
	size_t len[16];
	int n;
	int fail_at; /* return EINTR for this run (-1: never) */
};

static int keep_run(void *arg, const void *data, size_t len,
		    struct chunkstore_pin *pin)
{
	struct runs *r = arg;

	cr_assert_lt(r->n, 16);
	r->pin[r->n] = pin;
	r->data[r->n] = data;
	r->len[r->n] = len;
	return r->n++ == r->fail_at ? EINTR : 0;
}

static void unpin_runs(struct runs *r)
{
	for (int i = 0; i < r->n; i++)
		chunkstore_unpin(cs, r->pin[i]);
	r->n = 0;
}

Test(chunkstore, pinned_runs_are_the_bytes_and_stay_put)
{
	const uint32_t size = 3 * BS + 3392;
	unsigned char *data = malloc(size), buf[WHOLE];
	struct runs r = {.fail_at = -1};

	setup_cs(CODEC_NONE, BS); /* room for one block */
	fill_random(data, size, 31);
	put_slice(31, data, size);

	/* one run per block touched, each the slice's bytes */
	cr_assert_eq(chunkstore_read_pinned(cs, 31, size, BS - 100, BS + 200,
					    keep_run, &r),
		     0);
	cr_assert_eq(r.n, 3);
	cr_assert_eq(r.len[0], 100);
	cr_assert_eq(r.len[1], BS);
	cr_assert_eq(r.len[2], 100);
	cr_assert_eq(memcmp(r.data[0], data + BS - 100, 100), 0);
	cr_assert_eq(memcmp(r.data[1], data + BS, BS), 0);
	cr_assert_eq(memcmp(r.data[2], data + 2 * BS, 100), 0);
	/* the small pieces of blocks not cached came by ranged reads */
	cr_assert_eq(stats().ranged_reads, 2);

	/* reading the rest through a one-block cache evicts everything
	 * unpinned, but not the pinned block: its bytes stay valid */
	cr_assert_eq(chunkstore_read(cs, 31, size, 0, WHOLE, buf), 0);
	cr_assert_eq(chunkstore_read(cs, 31, size, 2 * BS, WHOLE, buf), 0);
	cr_assert_eq(memcmp(r.data[1], data + BS, BS), 0);
	uint64_t gets = stats().gets;
	cr_assert_eq(chunkstore_read(cs, 31, size, BS, WHOLE, buf), 0);
	cr_assert_eq(stats().gets, gets, "the pinned block was evicted");
	unpin_runs(&r);
	cr_assert_eq(chunkstore_read(cs, 31, size, 0, WHOLE, buf), 0);
	cr_assert_eq(chunkstore_read(cs, 31, size, BS, WHOLE, buf), 0);
	cr_assert_eq(stats().gets, gets + 2, "unpinned block still cached");
	free(data);
	teardown_cs(); /* asserts that no entry is still referenced */
}

Test(chunkstore, pinned_errors)
{
	const uint32_t size = 2 * BS;
	unsigned char *data = malloc(size);
	struct runs r = {.fail_at = -1};
	char key[96];

	setup_cs(CODEC_LZ4, 4 * BS);
	fill_random(data, size, 32);
	put_slice(32, data, size);
	/* fn's error stops the read and comes back; the runs so far are
	 * fn's to unpin */
	r.fail_at = 0;
	cr_assert_eq(
	    chunkstore_read_pinned(cs, 32, size, 0, size, keep_run, &r), EINTR);
	cr_assert_eq(r.n, 1);
	unpin_runs(&r);
	/* a missing block is EIO after the runs before it */
	r.fail_at = -1;
	chunkstore_key(32, 1, BS, key, sizeof(key));
	cr_assert_eq(objstore_del(mem, key), 0);
	cr_assert_eq(
	    chunkstore_read_pinned(cs, 32, size, 10, size - 10, keep_run, &r),
	    EIO);
	cr_assert_eq(r.n, 1);
	cr_assert_eq(memcmp(r.data[0], data + 10, BS - 10), 0);
	unpin_runs(&r);
	cr_assert_eq(
	    chunkstore_read_pinned(cs, 32, size, size - 1, 2, keep_run, &r),
	    EINVAL);
	cr_assert_eq(r.n, 0);
	free(data);
	teardown_cs();
}

/* ---- a pack that reads short ---- */

struct repair {
	const char *key;
	const void *enc;
	size_t n;
};

static void *put_later(void *arg)
{
	struct repair *r = arg;
	usleep(50 * 1000);
	cr_assert_eq(objstore_put(mem, r->key, r->enc, r->n), 0);
	return NULL;
}

/* A pack that ends before a frame (a torn answer of the store: s3rver
 * rewrites an object in place while a retried put runs) is read once
 * more a moment later: a repaired pack reads right, one that stays short
 * is EIO after exactly one more GET. */
Test(chunkstore, short_pack_is_read_again)
{
	unsigned char raw[3000], out[3000], enc[4096];
	struct chunkstore_frame f = {.pack = 77, .off = 100};
	char key[96];
	size_t n;
	pthread_t th;

	setup_cs(CODEC_NONE, 0);
	fill_random(raw, sizeof raw, 9);
	cr_assert_eq(codec_encode(raw, sizeof raw, CODEC_NONE, enc, &n), 0);
	unsigned char *pack = calloc(1, 100 + n);
	memcpy(pack + 100, enc, n);
	f.len = (uint32_t)n;
	chunkstore_pack_key(77, key, sizeof key);

	cr_assert_eq(objstore_put(mem, key, pack, 100 + n / 2), 0);
	struct repair r = {key, pack, 100 + n};
	pthread_create(&th, NULL, put_later, &r);
	int gets = slow.gets;
	cr_expect_eq(
	    chunkstore_read_frame(cs, 5, sizeof raw, &f, 0, sizeof raw, out),
	    0);
	pthread_join(th, NULL);
	cr_expect_eq(memcmp(out, raw, sizeof raw), 0);
	cr_expect_eq(slow.gets - gets, 2, "%d gets", slow.gets - gets);

	cr_assert_eq(objstore_put(mem, key, pack, 100 + n - 1), 0);
	gets = slow.gets;
	cr_expect_eq(
	    chunkstore_read_frame(cs, 6, sizeof raw, &f, 0, sizeof raw, out),
	    EIO);
	cr_expect_eq(slow.gets - gets, 2, "%d gets", slow.gets - gets);
	free(pack);
	teardown_cs();
}

/* ---- the frames of one pack, read at once through a disk cache ---- */

#define PACK_FRAMES 8
#define FRAME_RAW   (16u << 10)

struct pk {
	struct chunkstore_frame f[PACK_FRAMES];
	unsigned char raw[PACK_FRAMES][FRAME_RAW];
	uint64_t slice0; /* frame i is slice slice0 + i */
	int want;	 /* what every read must return */
	int bad;	 /* __atomic */
};

struct pk_arg {
	struct pk *pk;
	int i;
};

static void *pk_reader(void *arg)
{
	struct pk_arg *a = arg;
	struct pk *pk = a->pk;
	unsigned char buf[FRAME_RAW];

	int err = chunkstore_read_frame(cs, pk->slice0 + a->i, FRAME_RAW,
					&pk->f[a->i], 0, FRAME_RAW, buf);
	if (err != pk->want || (!err && memcmp(buf, pk->raw[a->i], FRAME_RAW)))
		__atomic_fetch_add(&pk->bad, 1, __ATOMIC_RELAXED);
	return NULL;
}

/* Every frame read by a thread of its own while the store holds the
 * first GET; the bad reads. */
static int pk_read_all(struct pk *pk)
{
	struct pk_arg a[PACK_FRAMES];

	pk->bad = 0;
	for (int i = 0; i < PACK_FRAMES; i++)
		a[i] = (struct pk_arg){pk, i};
	run_held(PACK_FRAMES, pk_reader, a, sizeof(a[0]));
	return pk->bad;
}

/* Readers of different frames of a pack that miss at once (readers in
 * shuffled order, the prefetch) wait for one whole fetch of the pack by the
 * disk cache: one GET, not one more per frame. A failed fetch fails all of
 * them, and a later read fetches again. */
Test(chunkstore, pack_frames_fetched_once_through_disk_cache, .timeout = 60)
{
	static struct pk pk;
	char dir[] = "/tmp/granary-cs-dc.XXXXXX", key[96], cmd[128];
	unsigned char enc[FRAME_RAW + 4096];
	unsigned char *pack = malloc(PACK_FRAMES * sizeof(enc));
	struct objstore *dc = NULL;
	size_t at = 0, n;

	cr_assert(pack);
	cr_assert(mkdtemp(dir));
	cr_assert_eq(objstore_open("mem://", NULL, &mem), 0);
	memset(&slow, 0, sizeof(slow));
	slow.base.ops = &slow_ops;
	slow.inner = mem;
	slow.bad_at = -1;
	struct diskcache_opts dco = {.dirs = dir,
				     .ns = "vol",
				     .size = 64 << 20,
				     .min_age = 600,
				     .whole_prefix = "packs/",
				     .whole_est = 1 << 20};
	cr_assert_eq(diskcache_open(&slow.base, &dco, &dc), 0);
	struct chunkstore_opts o = {.block_size = BS,
				    .compress = CODEC_NONE,
				    .mem_cache_bytes = 1 << 20};
	cr_assert_eq(chunkstore_open(dc, &o, &cs), 0);

	for (uint64_t p = 77; p <= 78; p++) {
		at = 0;
		for (int i = 0; i < PACK_FRAMES; i++) {
			fill_random(pk.raw[i], FRAME_RAW, p * 100 + i);
			cr_assert_eq(codec_encode(pk.raw[i], FRAME_RAW,
						  CODEC_NONE, enc, &n),
				     0);
			memcpy(pack + at, enc, n);
			pk.f[i] = (struct chunkstore_frame){
			    .pack = p, .off = at, .len = (uint32_t)n};
			at += n;
		}
		chunkstore_pack_key(p, key, sizeof key);
		cr_assert_eq(objstore_put(mem, key, pack, at), 0);
	}

	/* pack 78 (the frames above): the GET fails for all readers */
	pk.slice0 = 200;
	pk.want = EIO;
	slow.fail = EIO;
	cr_assert_eq(pk_read_all(&pk), 0, "%d readers did not get EIO", pk.bad);
	cr_assert_eq(slow.gets, 1, "%d GETs for one failed pack", slow.gets);
	/* and a later read tries the store again, and gets it once */
	slow.fail = 0;
	pk.want = 0;
	cr_assert_eq(pk_read_all(&pk), 0,
		     "%d readers got an error or wrong "
		     "bytes",
		     pk.bad);
	cr_assert_eq(slow.gets, 2, "%d GETs in all for one pack read twice",
		     slow.gets - 1);
	struct diskcache_stats st;
	diskcache_get_stats(dc, &st);
	cr_assert_geq(st.flight_waits, 2 * (PACK_FRAMES - 1) - 2,
		      "%llu ranged gets waited for the pack",
		      (unsigned long long)st.flight_waits);
	cr_assert(diskcache_contains(dc, key));

	chunkstore_close(cs);
	cs = NULL;
	objstore_close(dc); /* closes nothing of slow's: the test owns it */
	objstore_close(mem);
	mem = NULL;
	free(pack);
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	cr_assert_eq(system(cmd), 0);
}
