/*
 * test_compact.c - chunk compaction (fs/data/compact.c, meta's
 * compact_chunk script) against a real redis-server (GRANARY_TEST_REDIS,
 * database 7) and an in-memory store: a chunk of hundreds of small
 * appends becomes one slice with the same bytes; records appended during
 * a compaction stay, a truncate makes it give up; the replaced slices
 * wait out their delay before reclamation hands them out (or gc --delete,
 * ahead of it when nobody is mounted); random overwrites and holes read
 * back the same after a compaction.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fs/data/compact.h"
#include "fs/data/slice.h"
#include "fs/store/codec.h"
#include "fs/store/objstore.h"
#include "gc/gc.h"
#include "meta/meta_objects.h"
#include "meta/meta_snap.h"
#include "meta/meta_volume.h"

#define DB 7
#define BS (64u << 10) /* small blocks: runs span several */

static struct meta *m;
static struct objstore *store;
static struct chunkstore *cs;
static char url[4200];

static void setup(void)
{
	const char *u = getenv("GRANARY_TEST_REDIS");
	struct meta_volume v = {.block_size = BS};
	struct chunkstore_opts co = {.block_size = BS};

	if (!u || strncmp(u, "unix://", 7))
		cr_skip_test("GRANARY_TEST_REDIS unset (no redis to test on)");
	snprintf(url, sizeof url, "unix://%.*s?db=%d", (int)strcspn(u + 7, "?"),
		 u + 7, DB);
	cr_assert_eq(meta_open(url, NULL, &m), 0);
	snprintf(v.name, sizeof v.name, "compact");
	snprintf(v.storage, sizeof v.storage, "mem://");
	cr_assert_eq(meta_format(m, &v, 1), 0);
	cr_assert_eq(objstore_open("mem://", NULL, &store), 0);
	cr_assert_eq(chunkstore_open(store, &co, &cs), 0);
}

static void teardown(void)
{
	chunkstore_close(cs);
	objstore_close(store);
	meta_close(m);
}

TestSuite(compact, .init = setup, .fini = teardown, .timeout = 120);

static uint64_t mkfile(const char *name)
{
	uint64_t ino;
	cr_assert_eq(
	    meta_mknod(m, 1, name, META_FILE, 0644, 0, 0, 0, NULL, &ino, NULL),
	    0);
	return ino;
}

/* Write bytes [pos, pos+len) of chunk 0 of ino as one slice of its own
 * (blocks put, then the record committed), as a writer does. */
static uint64_t put(uint64_t ino, uint32_t pos, const char *data, uint32_t len)
{
	struct meta_chunk_slice w = {0};
	cr_assert_eq(meta_new_slice_id(m, &w.s.id), 0);
	for (uint32_t i = 0; i * BS < len; i++) {
		uint32_t k = len - i * BS < BS ? len - i * BS : BS;
		cr_assert_eq(
		    chunkstore_put_block(cs, w.s.id, i, data + i * BS, k), 0);
	}
	w.s.size = w.s.len = len;
	w.s.pos = pos;
	cr_assert_eq(meta_write(m, ino, &w, 1, NULL), 0);
	return w.s.id;
}

/* A hole [pos, pos+len) of chunk 0 (what a punch writes). */
static void hole(uint64_t ino, uint32_t pos, uint32_t len)
{
	struct meta_chunk_slice w = {0};
	w.s.len = len;
	w.s.pos = pos;
	cr_assert_eq(meta_write(m, ino, &w, 1, NULL), 0);
}

/* What chunk 0 of ino reads as, its length bytes, into a malloc'd buf. */
static char *read_back(uint64_t ino, uint64_t *len, size_t *nrecs)
{
	struct meta_attr a;
	struct meta_slice *s, *e;
	size_t n, ne;

	cr_assert_eq(meta_getattr(m, ino, &a), 0);
	*len = a.length;
	char *buf = calloc(1, a.length + 1);
	cr_assert(buf);
	cr_assert_eq(meta_read_chunk(m, ino, 0, &s, &n), 0);
	cr_assert_eq(slice_resolve(s, n, &e, &ne), 0);
	for (size_t i = 0; i < ne; i++) {
		int err;
		if (e[i].pos >= a.length)
			continue;
		uint32_t k = e[i].len;
		if (e[i].pos + k > a.length)
			k = (uint32_t)(a.length - e[i].pos);
		if (e[i].pack) {
			struct chunkstore_frame f = {e[i].pack, e[i].poff,
						     e[i].plen};
			err =
			    chunkstore_read_frame(cs, e[i].id, e[i].size, &f,
						  e[i].off, k, buf + e[i].pos);
		} else {
			err = chunkstore_read(cs, e[i].id, e[i].size, e[i].off,
					      k, buf + e[i].pos);
		}
		cr_assert_eq(err, 0, "read of slice %" PRIu64 ": %s", e[i].id,
			     gr_strerror(err));
	}
	*nrecs = n;
	free(e);
	free(s);
	return buf;
}

static void expect_reads(uint64_t ino, const char *shadow, uint64_t len,
			 size_t max_recs)
{
	uint64_t got_len;
	size_t n;
	char *buf = read_back(ino, &got_len, &n);
	cr_assert_eq(got_len, len, "length %" PRIu64 ", want %" PRIu64, got_len,
		     len);
	for (uint64_t i = 0; i < len; i++)
		cr_assert_eq(buf[i], shadow[i], "byte %" PRIu64 " differs", i);
	cr_expect_leq(n, max_recs, "%zu records left", n);
	free(buf);
}

static void fill(char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1103515245 + 12345;
		p[i] = (char)(seed >> 16);
	}
}

Test(compact, appends_become_one_slice)
{
	enum { N = 300, PIECE = 777 };
	static char shadow[N * PIECE];
	uint64_t ino = mkfile("log");
	struct compact_result r;

	fill(shadow, sizeof shadow, 1);
	for (int i = 0; i < N; i++)
		put(ino, i * PIECE, shadow + i * PIECE, PIECE);
	expect_reads(ino, shadow, sizeof shadow, N);

	cr_assert_eq(compact_chunk(m, cs, ino, 0, 0, 1, &r), 0);
	cr_expect_eq(r.before, N);
	cr_expect_eq(r.after, 1);
	cr_expect_eq(r.bytes, sizeof shadow);
	expect_reads(ino, shadow, sizeof shadow, 1);

	/* the old slices wait out their delay, then all come out */
	struct meta_slice dead[64];
	size_t n, total = 0;
	cr_assert_eq(meta_reclaim(m, dead, 64, &n), 0);
	cr_expect_eq(n, 0, "%zu slices handed out before the delay", n);
	sleep(2);
	do {
		cr_assert_eq(meta_reclaim(m, dead, 64, &n), 0);
		for (size_t i = 0; i < n; i++)
			chunkstore_delete(cs, dead[i].id, dead[i].size);
		total += n;
	} while (n);
	cr_expect_eq(total, N, "%zu slices reclaimed", total);
	/* and the file still reads from its new slice alone */
	expect_reads(ino, shadow, sizeof shadow, 1);

	/* a short list is left alone */
	cr_assert_eq(compact_chunk(m, cs, ino, 0, 0, 1, &r), 0);
	cr_expect_eq(r.bytes, 0);
}

Test(compact, appended_meanwhile_stays_dropped_meanwhile_gives_up)
{
	enum { N = 100, PIECE = 100 };
	static char shadow[(N + 1) * PIECE];
	uint64_t ino = mkfile("f");
	struct meta_chunk_tag tag;
	struct meta_slice *s;
	size_t n;

	fill(shadow, sizeof shadow, 2);
	for (int i = 0; i < N; i++)
		put(ino, i * PIECE, shadow + i * PIECE, PIECE);
	cr_assert_eq(meta_compact_read(m, ino, 0, &s, &n, &tag), 0);
	cr_assert_eq(n, N);
	free(s);
	/* a write lands between the read and the switch */
	put(ino, N * PIECE, shadow + N * PIECE, PIECE);
	/* the switch: the first N records become one fresh slice */
	uint64_t id = put(mkfile("scratch"), 0, shadow, N * PIECE);
	struct meta_slice fresh = {
	    .id = id, .size = N * PIECE, .len = N * PIECE, .pos = 0};
	cr_assert_eq(meta_compact_chunk(m, ino, 0, &tag, &fresh, 1, 60), 0);
	expect_reads(ino, shadow, sizeof shadow, 2);

	/* a truncate that only cuts appends a hole: the start stays, and so
	 * does the compaction's right to switch it */
	cr_assert_eq(meta_truncate(m, ino, N * PIECE / 2, NULL), 0);
	expect_reads(ino, shadow, N * PIECE / 2, 3);
	/* one that drops the chunk: the compaction is refused */
	cr_assert_eq(meta_compact_read(m, ino, 0, &s, &n, &tag), 0);
	free(s);
	cr_assert_eq(meta_truncate(m, ino, 0, NULL), 0);
	put(ino, 0, shadow, PIECE);
	cr_expect_eq(meta_compact_chunk(m, ino, 0, &tag, &fresh, 1, 60),
		     EAGAIN);
	expect_reads(ino, shadow, PIECE, 1);
}

/* Random overwrites and punched holes against a shadow copy; compaction
 * keeps every byte and every hole, and leaves one record per run. */
Test(compact, randomized_overwrites_and_holes)
{
	enum { SIZE = 600000, OPS = 400 };
	static char shadow[SIZE], data[SIZE];
	uint64_t ino = mkfile("rnd");
	uint64_t len = 0;
	struct compact_result r;

	srand(20261201);
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < OPS; i++) {
			uint32_t pos = (uint32_t)rand() % (SIZE - 1);
			uint32_t k = 1 + (uint32_t)rand() % 5000;
			if (pos + k > SIZE)
				k = SIZE - pos;
			if (rand() % 5 == 0 && pos + k <= len) {
				hole(ino, pos, k);
				memset(shadow + pos, 0, k);
				continue;
			}
			fill(data, k, (unsigned)rand());
			put(ino, pos, data, k);
			memcpy(shadow + pos, data, k);
			if (pos + k > len)
				len = pos + k;
		}
		expect_reads(ino, shadow, len, (size_t)-1);
		cr_assert_eq(compact_chunk(m, cs, ino, 0, 0, 60, &r), 0);
		cr_expect_gt(r.bytes, 0, "round %d: nothing compacted", round);
		cr_expect_lt(r.after, r.before / 2);
		expect_reads(ino, shadow, len, r.after);
	}
}

/* granary gc --compact: every long list of the volume, none other. */
Test(compact, gc_compacts_the_long_lists)
{
	enum { N = 150, PIECE = 333 };
	static char shadow[N * PIECE];
	uint64_t a = mkfile("long"), b = mkfile("short");
	struct gc_opts o = {.min_age = 3600, .compact = 1, .block_size = BS};
	struct gc_report r;

	fill(shadow, sizeof shadow, 3);
	for (int i = 0; i < N; i++)
		put(a, i * PIECE, shadow + i * PIECE, PIECE);
	for (int i = 0; i < 10; i++)
		put(b, i * PIECE, shadow + i * PIECE, PIECE);
	cr_assert_eq(gc_run(m, store, &o, &r), 0);
	cr_expect_eq(r.long_chunks, 1);
	cr_expect_eq(r.compacted, 1);
	cr_expect_eq(r.records_before, N);
	cr_expect_eq(r.records_after, 1);
	cr_expect_eq(r.compacted_bytes, sizeof shadow);
	cr_expect_eq(r.compact_errors, 0);
	expect_reads(a, shadow, sizeof shadow, 1);
	expect_reads(b, shadow, 10 * PIECE, 10);
	/* without --compact they are only counted */
	o.compact = 0;
	for (int i = 0; i < N; i++)
		put(b, i * PIECE, shadow + i * PIECE, PIECE);
	cr_assert_eq(gc_run(m, store, &o, &r), 0);
	cr_expect_eq(r.long_chunks, 1);
	cr_expect_eq(r.compacted, 0);
}

/* A pack three quarters dead is rewritten: its live frames are copied
 * into a new pack and the records moved; the files read the same; the
 * old pack, referenced by nothing, goes at the next gc --delete. */
Test(compact, gc_rewrites_mostly_dead_packs)
{
	enum { FILES = 8, PIECE = 3000 };
	static char data[FILES][PIECE];
	char pack[FILES * (PIECE + 4096)], key[128];
	uint32_t poff[FILES], plen[FILES], at = 0;
	uint64_t ino[FILES], P;
	struct gc_opts o = {.min_age = 0, .compact = 1, .block_size = BS};
	struct gc_report r;

	cr_assert_eq(meta_new_slice_id(m, &P), 0);
	for (int i = 0; i < FILES; i++) {
		size_t n;
		fill(data[i], PIECE, 10 + (unsigned)i);
		cr_assert_eq(
		    codec_encode(data[i], PIECE, CODEC_NONE, pack + at, &n), 0);
		poff[i] = at;
		plen[i] = (uint32_t)n;
		at += (uint32_t)n;
	}
	cr_assert_eq(meta_pack_total(m, P, at, NULL), 0);
	chunkstore_pack_key(P, key, sizeof key);
	cr_assert_eq(objstore_put(store, key, pack, at), 0);
	for (int i = 0; i < FILES; i++) {
		char name[16];
		struct meta_chunk_slice w = {0};
		snprintf(name, sizeof name, "p%d", i);
		ino[i] = mkfile(name);
		cr_assert_eq(meta_new_slice_id(m, &w.s.id), 0);
		w.s.size = w.s.len = PIECE;
		w.s.pack = P;
		w.s.poff = poff[i];
		w.s.plen = plen[i];
		cr_assert_eq(meta_write(m, ino[i], &w, 1, NULL), 0);
	}
	/* six of eight die */
	for (int i = 2; i < FILES; i++) {
		char name[16];
		snprintf(name, sizeof name, "p%d", i);
		cr_assert_eq(meta_unlink(m, 1, name), 0);
	}
	struct meta_slice dead[16];
	size_t n;
	do
		cr_assert_eq(meta_reclaim(m, dead, 16, &n), 0);
	while (n);

	cr_assert_eq(gc_run(m, store, &o, &r), 0);
	cr_expect_eq(r.packs_half_dead, 1);
	cr_expect_eq(r.packs_rewritten, 1);
	cr_expect_eq(r.frames_moved, 2);
	cr_expect_eq(r.pack_bytes_before, at);
	cr_expect_eq(r.pack_bytes_after, plen[0] + plen[1]);
	for (int i = 0; i < 2; i++)
		expect_reads(ino[i], data[i], PIECE, 1);
	/* the old pack is referenced by nothing: the next gc deletes it */
	o.compact = 0;
	o.delete = 1;
	cr_assert_eq(gc_run(m, store, &o, &r), 0);
	cr_expect_eq(r.deleted, 1);
	cr_expect_eq(r.pack_dead_bytes, 0);
	uint64_t size;
	cr_expect_eq(objstore_head(store, key, &size), ENOENT);
	for (int i = 0; i < 2; i++)
		expect_reads(ino[i], data[i], PIECE, 1);
	/* and the new pack dies with its files as any pack does */
	cr_assert_eq(meta_unlink(m, 1, "p0"), 0);
	cr_assert_eq(meta_unlink(m, 1, "p1"), 0);
	size_t packs = 0;
	do {
		cr_assert_eq(meta_reclaim(m, dead, 16, &n), 0);
		for (size_t i = 0; i < n; i++)
			packs += dead[i].pack != 0 && dead[i].id == 0;
	} while (n);
	cr_expect_eq(packs, 1, "%zu whole packs handed out", packs);
}

/* A copy that shares the file's slices (as a snapshot or a clone does)
 * keeps them when the file is compacted: they outlive the delay, both
 * read back, and they go once the copy goes too. */
Test(compact, a_copy_keeps_the_shared_slices)
{
	enum { N = 100, PIECE = 500 };
	static char shadow[N * PIECE];
	uint64_t a = mkfile("orig"), b = mkfile("copy");
	struct compact_result r;
	struct meta_slice dead[64];
	size_t n, total = 0;

	fill(shadow, sizeof shadow, 4);
	for (int i = 0; i < N; i++)
		put(a, i * PIECE, shadow + i * PIECE, PIECE);
	cr_assert_eq(meta_clone_data(m, a, b, NULL), 0);
	cr_assert_eq(compact_chunk(m, cs, a, 0, 0, 1, &r), 0);
	cr_assert_eq(r.after, 1);
	sleep(2);
	cr_assert_eq(meta_reclaim(m, dead, 64, &n), 0);
	cr_expect_eq(n, 0, "%zu shared slices handed out", n);
	expect_reads(a, shadow, sizeof shadow, 1);
	expect_reads(b, shadow, sizeof shadow, N);
	/* the copy gone, its (the old) slices go */
	cr_assert_eq(meta_unlink(m, 1, "copy"), 0);
	do {
		cr_assert_eq(meta_reclaim(m, dead, 64, &n), 0);
		total += n;
	} while (n);
	cr_expect_eq(total, N, "%zu slices reclaimed after the copy went",
		     total);
	expect_reads(a, shadow, sizeof shadow, 1);
}

/* Whether the one block of a slice of len bytes (< BS) is in the store. */
static int block_there(uint64_t id, uint32_t len)
{
	char key[128];
	uint64_t size;

	chunkstore_key(id, 0, len, key, sizeof key);
	return objstore_head(store, key, &size) == 0;
}

/* granary gc --delete does what a mounted client's reclaimer does, for a
 * volume nobody mounts: the slices a compaction replaced go once their
 * delay is over, whatever --min-age; before it, only with --min-age 0 and
 * no live session (a reader holding the old list is a mounted client). */
Test(compact, gc_delete_reclaims_the_replaced_slices)
{
	enum { N = 100, PIECE = 500 };
	static char shadow[N * PIECE];
	uint64_t a = mkfile("a"), b = mkfile("b"), ida[N], idb[N];
	struct gc_opts o = {.min_age = 3600, .delete = 1, .block_size = BS};
	struct compact_result r;
	struct gc_report g;
	struct meta *client;

	fill(shadow, sizeof shadow, 5);
	for (int i = 0; i < N; i++) {
		ida[i] = put(a, i * PIECE, shadow + i * PIECE, PIECE);
		idb[i] = put(b, i * PIECE, shadow + i * PIECE, PIECE);
	}
	cr_assert_eq(compact_chunk(m, cs, a, 0, 0, 0, &r), 0); /* an hour */
	cr_assert_eq(r.after, 1);
	cr_assert_eq(compact_chunk(m, cs, b, 0, 0, 1, &r), 0); /* 1 s */
	cr_assert_eq(r.after, 1);
	sleep(2);

	/* a client is mounted: b's slices are ripe and go, a's wait */
	cr_assert_eq(meta_open(url, NULL, &client), 0);
	cr_assert_eq(meta_session_open(client, "/mnt/elsewhere"), 0);
	cr_assert_eq(gc_run(m, store, &o, &g), 0);
	cr_expect_eq(g.reclaimed, N, "reclaimed %" PRIu64, g.reclaimed);
	cr_expect_eq(g.delayed, N, "delayed %" PRIu64, g.delayed);
	cr_expect_eq(g.delete_errors, 0);
	cr_expect(block_there(ida[0], PIECE) && block_there(ida[N - 1], PIECE));
	cr_expect(!block_there(idb[0], PIECE) && !block_there(idb[N - 1], PIECE));
	/* --min-age 0 does not take a's while it may read them */
	o.min_age = 0;
	cr_assert_eq(gc_run(m, store, &o, &g), 0);
	cr_expect_eq(g.reclaimed, 0);
	cr_expect_eq(g.delayed, N);
	cr_expect_eq(g.delayed_clients, 1);
	cr_expect(block_there(ida[0], PIECE));

	/* nobody mounted: --min-age 0 takes them all; the files read the
	 * same from their fresh slices */
	meta_close(client);
	cr_assert_eq(gc_run(m, store, &o, &g), 0);
	cr_expect_eq(g.reclaimed, N, "reclaimed %" PRIu64, g.reclaimed);
	cr_expect_eq(g.delayed, 0);
	cr_expect_eq(g.delete_errors, 0);
	for (int i = 0; i < N; i++)
		cr_expect(!block_there(ida[i], PIECE), "slice %d is left", i);
	expect_reads(a, shadow, sizeof shadow, 1);
	expect_reads(b, shadow, sizeof shadow, 1);
	cr_assert_eq(gc_run(m, store, &o, &g), 0);
	cr_expect_eq(g.leaked, 0);
	cr_expect_eq(g.reclaimed, 0);
}

/* gc --compact rewrites a pack that is old; the old pack's age for a
 * later gc --delete counts from the rewrite, not from its upload: a reader
 * holding the old records reads it for --min-age from then on. */
Test(compact, a_rewritten_pack_ages_from_the_rewrite)
{
	enum { FILES = 8, PIECE = 3000, AGE = 3 };
	static char data[FILES][PIECE];
	char pack[FILES * (PIECE + 4096)], key[128];
	uint32_t poff[FILES], plen[FILES], at = 0;
	uint64_t ino[FILES], P, size;
	struct gc_opts o = {.min_age = AGE, .compact = 1, .block_size = BS};
	struct gc_report r;

	cr_assert_eq(meta_new_slice_id(m, &P), 0);
	for (int i = 0; i < FILES; i++) {
		size_t n;
		fill(data[i], PIECE, 30 + (unsigned)i);
		cr_assert_eq(
		    codec_encode(data[i], PIECE, CODEC_NONE, pack + at, &n), 0);
		poff[i] = at;
		plen[i] = (uint32_t)n;
		at += (uint32_t)n;
	}
	cr_assert_eq(meta_pack_total(m, P, at, NULL), 0);
	chunkstore_pack_key(P, key, sizeof key);
	cr_assert_eq(objstore_put(store, key, pack, at), 0);
	for (int i = 0; i < FILES; i++) {
		char name[16];
		struct meta_chunk_slice w = {0};
		snprintf(name, sizeof name, "q%d", i);
		ino[i] = mkfile(name);
		cr_assert_eq(meta_new_slice_id(m, &w.s.id), 0);
		w.s.size = w.s.len = PIECE;
		w.s.pack = P;
		w.s.poff = poff[i];
		w.s.plen = plen[i];
		cr_assert_eq(meta_write(m, ino[i], &w, 1, NULL), 0);
	}
	for (int i = 2; i < FILES; i++) {
		char name[16];
		snprintf(name, sizeof name, "q%d", i);
		cr_assert_eq(meta_unlink(m, 1, name), 0);
	}
	struct meta_slice dead[16];
	size_t n;
	do
		cr_assert_eq(meta_reclaim(m, dead, 16, &n), 0);
	while (n);

	/* the pack is older than --min-age: rewritten */
	sleep(AGE + 1);
	cr_assert_eq(gc_run(m, store, &o, &r), 0);
	cr_assert_eq(r.packs_rewritten, 1);
	/* at once, a gc --delete of the same --min-age: the old pack stays,
	 * as old as the rewrite (the bound is generous: a gc run here takes
	 * milliseconds, the --min-age is 3 s) */
	o.compact = 0;
	o.delete = 1;
	cr_assert_eq(gc_run(m, store, &o, &r), 0);
	cr_expect_eq(r.deleted, 0, "deleted %" PRIu64, r.deleted);
	cr_expect_eq(r.retired, 1);
	cr_expect_eq(objstore_head(store, key, &size), 0,
		     "the old pack went at the first gc --delete");
	for (int i = 0; i < 2; i++)
		expect_reads(ino[i], data[i], PIECE, 1);
	/* once --min-age has passed since the rewrite, it goes, and its
	 * retirement with it */
	sleep(AGE + 1);
	cr_assert_eq(gc_run(m, store, &o, &r), 0);
	cr_expect_eq(r.deleted, 1, "deleted %" PRIu64, r.deleted);
	cr_expect_eq(objstore_head(store, key, &size), ENOENT);
	for (int i = 0; i < 2; i++)
		expect_reads(ino[i], data[i], PIECE, 1);
	o.delete = 0;
	cr_assert_eq(gc_run(m, store, &o, &r), 0);
	cr_expect_eq(r.retired, 0);
	cr_expect_eq(r.young, 0);
}
