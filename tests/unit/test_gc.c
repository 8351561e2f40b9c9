/*
 * test_gc.c - gc/gc.c against a real redis-server (GRANARY_TEST_REDIS,
 * database 5) and an in-memory store: the objects a volume references stay,
 * the others are reported as leaked (or young), and --delete removes
 * exactly those; a randomized volume ends with a store that holds exactly
 * what its metadata references.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "fs/data/chunkstore.h"
#include "fs/store/objstore.h"
#include "gc/gc.h"
#include "meta/meta_objects.h"
#include "meta/meta_snap.h"
#include "meta/meta_volume.h"

#define DB 5
#define BS (4u << 20) /* the volume's block size */

static struct meta *fresh_volume(void)
{
	const char *u = getenv("GRANARY_TEST_REDIS");
	struct meta_volume v = {.block_size = BS};
	struct meta *m = NULL;
	char url[4200];

	if (!u || strncmp(u, "unix://", 7))
		cr_skip_test("GRANARY_TEST_REDIS unset (no redis to test on)");
	snprintf(url, sizeof url, "unix://%.*s?db=%d", (int)strcspn(u + 7, "?"),
		 u + 7, DB);
	cr_assert_eq(meta_open(url, NULL, &m), 0);
	snprintf(v.name, sizeof v.name, "gc");
	snprintf(v.storage, sizeof v.storage, "mem://");
	cr_assert_eq(meta_format(m, &v, 1), 0);
	return m;
}

static struct objstore *store(void)
{
	struct objstore *s;
	cr_assert_eq(objstore_open("mem://", NULL, &s), 0);
	return s;
}

static void put_obj(struct objstore *s, const char *key, size_t len)
{
	char *buf = calloc(1, len ? len : 1);
	cr_assert(buf);
	cr_assert_eq(objstore_put(s, key, buf, len), 0, "put %s", key);
	free(buf);
}

static int exists(struct objstore *s, const char *key)
{
	uint64_t size;
	return objstore_head(s, key, &size) == 0;
}

/* The blocks of a slice of size bytes, put. */
static void put_blocks(struct objstore *s, uint64_t id, uint32_t size)
{
	char key[128];
	for (uint32_t idx = 0; idx * BS < size; idx++) {
		uint32_t len = size - idx * BS < BS ? size - idx * BS : BS;
		chunkstore_key(id, idx, len, key, sizeof key);
		put_obj(s, key, 64); /* what is in them does not matter */
	}
}

static int block_exists(struct objstore *s, uint64_t id, uint32_t idx,
			uint32_t size)
{
	char key[128];
	uint32_t len = size - idx * BS < BS ? size - idx * BS : BS;
	chunkstore_key(id, idx, len, key, sizeof key);
	return exists(s, key);
}

static int pack_exists(struct objstore *s, uint64_t pack)
{
	char key[128];
	chunkstore_pack_key(pack, key, sizeof key);
	return exists(s, key);
}

static void put_pack(struct objstore *s, uint64_t pack, size_t len)
{
	char key[128];
	chunkstore_pack_key(pack, key, sizeof key);
	put_obj(s, key, len);
}

static uint64_t new_id(struct meta *m)
{
	uint64_t id;
	cr_assert_eq(meta_new_slice_id(m, &id), 0);
	return id;
}

static uint64_t mkfile(struct meta *m, const char *name)
{
	uint64_t ino;
	cr_assert_eq(
	    meta_mknod(m, 1, name, META_FILE, 0644, 0, 0, 0, NULL, &ino, NULL),
	    0);
	return ino;
}

/* A file name of one slice of size bytes at offset 0 (its blocks put). */
static uint64_t file_of(struct meta *m, struct objstore *s, const char *name,
			uint32_t size, uint64_t *ino)
{
	struct meta_chunk_slice w = {0};
	uint64_t f = mkfile(m, name);

	w.s.id = new_id(m);
	w.s.size = w.s.len = size;
	put_blocks(s, w.s.id, size);
	cr_assert_eq(meta_write(m, f, &w, 1, NULL), 0);
	if (ino)
		*ino = f;
	return w.s.id;
}

/* A file of one packed slice: bytes [poff, poff+plen) of pack. */
static uint64_t packed_file(struct meta *m, const char *name, uint64_t pack,
			    uint32_t poff, uint32_t plen)
{
	struct meta_chunk_slice w = {0};
	uint64_t f = mkfile(m, name);

	w.s.id = new_id(m);
	w.s.size = w.s.len = plen - 20;
	w.s.pack = pack;
	w.s.poff = poff;
	w.s.plen = plen;
	cr_assert_eq(meta_write(m, f, &w, 1, NULL), 0);
	return w.s.id;
}

static struct gc_report run(struct meta *m, struct objstore *s, int64_t age,
			    int del)
{
	struct gc_opts o = {.min_age = age, .delete = del, .threads = 4};
	struct gc_report r;
	int err = gc_run(m, s, &o, &r);
	cr_assert_eq(err, 0, "gc_run: %s", gr_strerror(err));
	return r;
}

Test(gc, leaked_young_live_pending_and_other)
{
	struct meta *m = fresh_volume();
	struct objstore *s = store();
	uint64_t a, b, P, P2, lost, staged, doomed;

	/* live: a file of two blocks, two files in one pack */
	uint64_t big = file_of(m, s, "big", BS + 1000, NULL);
	P = new_id(m);
	cr_assert_eq(meta_pack_total(m, P, 300, NULL), 0);
	put_pack(s, P, 300);
	a = packed_file(m, "p1", P, 0, 100);
	b = packed_file(m, "p2", P, 100, 200);
	/* staged by a client: its block is in the store before the commit */
	staged = new_id(m);
	cr_assert_eq(meta_staging_mark(m, 'b', staged, 0), 0);
	put_blocks(s, staged, 500);
	/* waiting for reclamation: gc without --delete leaves it be */
	doomed = file_of(m, s, "doomed", 700, NULL);
	cr_assert_eq(meta_unlink(m, 1, "doomed"), 0);
	struct meta_slice none[1];
	size_t n;
	cr_assert_eq(meta_reclaim(m, none, 0, &n), 0);
	/* leaked: a block never committed, a pack no record names */
	lost = new_id(m);
	put_blocks(s, lost, 2000);
	P2 = new_id(m);
	cr_assert_eq(meta_pack_total(m, P2, 400, NULL), 0);
	put_pack(s, P2, 400);
	/* not ours */
	put_obj(s, "blocks/notes.txt", 10);

	struct gc_report r = run(m, s, 0, 0);
	cr_expect_eq(r.objects, 7, "objects %" PRIu64, r.objects);
	cr_expect_eq(r.live, 5, "live %" PRIu64, r.live); /* 2 + P + 2 */
	cr_expect_eq(r.leaked, 2, "leaked %" PRIu64, r.leaked);
	cr_expect_eq(r.leaked_bytes, 64 + 400);
	cr_expect_eq(r.young, 0);
	cr_expect_eq(r.other, 1);
	cr_expect_eq(r.pending, 1, "pending %" PRIu64, r.pending);
	cr_expect_eq(r.packs, 1);
	cr_expect_eq(r.pack_bytes, 300);
	cr_expect_eq(r.pack_dead_bytes, 0);
	cr_expect_eq(r.deleted, 0);
	cr_expect_neq(r.leaked_oldest, 0);

	/* an hour's grace: nothing is leaked yet */
	r = run(m, s, 3600, 0);
	cr_expect_eq(r.leaked, 0);
	cr_expect_eq(r.young, 2);
	/* with --delete, reclamation runs first, as in a mounted client: the
	 * dead slice goes whatever the grace (it has no reference) */
	r = run(m, s, 3600, 1);
	cr_expect_eq(r.deleted, 0);
	cr_expect_eq(r.reclaimed, 1, "reclaimed %" PRIu64, r.reclaimed);
	cr_expect_eq(r.pending, 0);
	cr_expect_not(block_exists(s, doomed, 0, 700));
	cr_expect(block_exists(s, lost, 0, 2000) && pack_exists(s, P2));

	/* delete: exactly the two go, and the pack's total with it */
	r = run(m, s, 0, 1);
	cr_expect_eq(r.deleted, 2, "deleted %" PRIu64, r.deleted);
	cr_expect_eq(r.deleted_bytes, 64 + 400);
	cr_expect_eq(r.delete_errors, 0);
	cr_expect_not(block_exists(s, lost, 0, 2000));
	cr_expect_not(pack_exists(s, P2));
	uint64_t t, d;
	cr_expect_eq(meta_pack_usage(m, P2, &t, &d), ENOENT);
	cr_expect(block_exists(s, big, 0, BS + 1000));
	cr_expect(block_exists(s, big, 1, BS + 1000));
	cr_expect(pack_exists(s, P));
	cr_expect(block_exists(s, staged, 0, 500));
	cr_expect(exists(s, "blocks/notes.txt"));
	cr_expect_eq(meta_pack_usage(m, P, &t, &d), 0);
	(void)a;
	(void)b;

	r = run(m, s, 0, 1);
	cr_expect_eq(r.leaked, 0);
	cr_expect_eq(r.deleted, 0);
	objstore_close(s);
	meta_close(m);
}

/* A pack whose frames were not all committed (a client killed between
 * its put and the commit, or a recovered staged pack): the frames nothing
 * references are dead bytes. */
Test(gc, pack_dead_bytes)
{
	struct meta *m = fresh_volume();
	struct objstore *s = store();
	uint64_t P = new_id(m), Q = new_id(m);

	cr_assert_eq(meta_pack_total(m, P, 1000, NULL), 0);
	put_pack(s, P, 1000);
	packed_file(m, "one", P, 0, 100);
	cr_assert_eq(meta_pack_total(m, Q, 1000, NULL), 0);
	put_pack(s, Q, 1000);
	packed_file(m, "x", Q, 0, 300);
	packed_file(m, "y", Q, 300, 400);

	struct gc_report r = run(m, s, 0, 0);
	cr_expect_eq(r.packs, 2);
	cr_expect_eq(r.pack_bytes, 2000);
	cr_expect_eq(r.pack_dead_bytes, 900 + 300);
	cr_expect_eq(r.packs_half_dead, 1);
	cr_expect_eq(r.leaked, 0);
	objstore_close(s);
	meta_close(m);
}

/* A snapshot copy shares its source's slices: deleting the source leaves
 * them referenced by the copy, and a shared frame counts once. */
Test(gc, shared_slices_count_once)
{
	struct meta *m = fresh_volume();
	struct objstore *s = store();
	uint64_t P = new_id(m), f;

	cr_assert_eq(meta_pack_total(m, P, 200, NULL), 0);
	put_pack(s, P, 200);
	packed_file(m, "small", P, 0, 200);
	uint64_t id = file_of(m, s, "big", 3000, &f);
	/* a second file referencing the same slices (one reference more
	 * each), as a copy does */
	uint64_t g = mkfile(m, "copy");
	cr_assert_eq(meta_clone_data(m, f, g, NULL), 0);
	cr_assert_eq(meta_unlink(m, 1, "big"), 0);

	struct gc_report r = run(m, s, 0, 1);
	cr_expect_eq(r.leaked, 0);
	cr_expect_eq(r.deleted, 0);
	cr_expect(block_exists(s, id, 0, 3000));
	cr_expect_eq(r.pack_dead_bytes, 0);
	objstore_close(s);
	meta_close(m);
}

/* Random volumes: files of one or more slices (some overwritten, some
 * deleted and reclaimed with their objects deleted, some packed), objects
 * leaked at random; after gc --delete the store holds exactly the objects
 * of the slices the files reference. */
Test(gc, randomized_store_matches_metadata, .timeout = 120)
{
	struct meta *m = fresh_volume();
	struct objstore *s = store();
	enum { NF = 60 };
	uint64_t ino[NF] = {0};
	unsigned seed = 20261201;
	uint64_t live_ids[4 * NF], leaked_ids[NF];
	uint32_t live_size[4 * NF], leaked_size[NF];
	size_t nlive = 0, nleaked = 0;

	srand(seed);
	for (int i = 0; i < NF; i++) {
		char name[16];
		snprintf(name, sizeof name, "f%d", i);
		ino[i] = mkfile(m, name);
		int slices = 1 + rand() % 3;
		for (int k = 0; k < slices; k++) {
			struct meta_chunk_slice w = {0};
			w.s.id = new_id(m);
			w.s.size = w.s.len = 1 + (uint32_t)rand() % (2 * BS);
			w.idx = (uint32_t)(rand() % 2);
			put_blocks(s, w.s.id, w.s.size);
			cr_assert_eq(meta_write(m, ino[i], &w, 1, NULL), 0);
			live_ids[nlive] = w.s.id;
			live_size[nlive++] = w.s.size;
		}
		if (rand() % 4 == 0) {
			uint64_t id = new_id(m);
			leaked_size[nleaked] = 1 + (uint32_t)rand() % (2 * BS);
			put_blocks(s, id, leaked_size[nleaked]);
			leaked_ids[nleaked++] = id;
		}
	}
	/* delete a third of the files; reclamation deletes their objects */
	for (int i = 0; i < NF; i += 3) {
		char name[16];
		snprintf(name, sizeof name, "f%d", i);
		cr_assert_eq(meta_unlink(m, 1, name), 0);
	}
	struct meta_slice dead[16];
	size_t n;
	do {
		cr_assert_eq(meta_reclaim(m, dead, 16, &n), 0);
		for (size_t j = 0; j < n; j++) {
			char key[128];
			for (uint32_t idx = 0; idx * BS < dead[j].size; idx++) {
				uint32_t left = dead[j].size - idx * BS;
				chunkstore_key(dead[j].id, idx,
					       left < BS ? left : BS, key,
					       sizeof key);
				cr_assert_eq(objstore_del(s, key), 0);
			}
			for (size_t k = 0; k < nlive; k++)
				if (live_ids[k] == dead[j].id)
					live_ids[k] = 0;
		}
	} while (n);

	struct gc_report r = run(m, s, 0, 1);
	uint64_t leaked_blocks = 0;
	for (size_t k = 0; k < nleaked; k++)
		leaked_blocks += (leaked_size[k] + BS - 1) / BS;
	cr_expect_eq(r.leaked, leaked_blocks,
		     "leaked %" PRIu64 ", made %" PRIu64, r.leaked,
		     leaked_blocks);
	cr_expect_eq(r.deleted, r.leaked);
	for (size_t k = 0; k < nleaked; k++)
		cr_expect_not(block_exists(s, leaked_ids[k], 0, leaked_size[k]),
			      "leaked %" PRIu64 " still there", leaked_ids[k]);
	uint64_t blocks = 0;
	for (size_t k = 0; k < nlive; k++) {
		if (!live_ids[k])
			continue;
		for (uint32_t idx = 0; idx * BS < live_size[k]; idx++, blocks++)
			cr_expect(
			    block_exists(s, live_ids[k], idx, live_size[k]),
			    "live slice %" PRIu64 " block %u gone", live_ids[k],
			    idx);
	}
	/* and nothing else */
	r = run(m, s, 0, 0);
	cr_expect_eq(r.objects, blocks,
		     "store %" PRIu64 ", referenced %" PRIu64, r.objects,
		     blocks);
	cr_expect_eq(r.leaked, 0);
	objstore_close(s);
	meta_close(m);
}

/* The temp files of puts a crash left half done in a file:// pool: those
 * older than --min-age are reported and deleted, a young one (a put under
 * way, perhaps) is left, and no object is touched. */
Test(gc, stale_temp_files_of_a_file_pool)
{
	struct meta *m = fresh_volume();
	char dir[] = "/tmp/gc-temps.XXXXXX", url[128], path[256];
	struct objstore *s;

	cr_assert(mkdtemp(dir));
	snprintf(url, sizeof url, "file://%s", dir);
	cr_assert_eq(objstore_open(url, NULL, &s), 0);
	uint64_t id = file_of(m, s, "f", 1000, NULL);
	/* a stale temp file beside a block, and a young one */
	snprintf(path, sizeof path,
		 "%s/blocks/0/0/.granary-tmp.00000000000000aa", dir);
	FILE *f = fopen(path, "w");
	cr_assert(f);
	fputs("half a block", f);
	fclose(f);
	struct timeval old[2] = {{time(NULL) - 7200, 0},
				 {time(NULL) - 7200, 0}};
	cr_assert_eq(utimes(path, old), 0);
	char young[256];
	snprintf(young, sizeof young, "%s/.granary-tmp.00000000000000bb", dir);
	f = fopen(young, "w");
	cr_assert(f);
	fclose(f);

	struct gc_report r = run(m, s, 3600, 0);
	cr_expect_eq(r.temps, 1);
	cr_expect_eq(r.temps_bytes, 12);
	cr_expect_eq(r.leaked, 0);
	r = run(m, s, 3600, 1);
	cr_expect_eq(r.temps_deleted, 1);
	cr_expect_eq(access(path, F_OK), -1, "the stale temp file is there");
	cr_expect_eq(access(young, F_OK), 0, "the young temp file is gone");
	cr_expect(block_exists(s, id, 0, 1000));
	r = run(m, s, 3600, 0);
	cr_expect_eq(r.temps, 0);
	/* --min-age 0 takes leaked objects at once, never a young temp file:
	 * it may be a live client's put */
	r = run(m, s, 0, 1);
	cr_expect_eq(r.temps_deleted, 0);
	cr_expect_eq(access(young, F_OK), 0,
		     "--min-age 0 took a young temp file");
	/* a name that is no temp file of the pool is refused */
	cr_expect_eq(objstore_del_temp(s, "0:blocks/0/0/1_0_1000"), EINVAL);
	cr_expect_eq(objstore_del_temp(s, "0:../x/.granary-tmp.1"), EINVAL);
	cr_expect(block_exists(s, id, 0, 1000));
	objstore_close(s);
	meta_close(m);
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	cr_expect_eq(system(cmd), 0);
}
