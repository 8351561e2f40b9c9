/*
 * test_stage.c - blocks of big files staged on a local disk (writeback):
 * staged reads, background uploads and sync, recovery of the files an
 * earlier mount left, a slice dropped before or during its upload, the
 * byte bound, a failing staging disk, bad options. The store is mem://
 * behind a gate that can hold puts back.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/data/chunkstore.h"
#include "fs/store/codec.h"
#include "fs/data/stage.h"

#define KB	(1u << 10)
#define KEY_CAP 96

/* ---- a store whose puts wait at a gate ---- */

static struct gate {
	struct objstore base; /* first */
	struct objstore *inner;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int open;    /* puts go through */
	int waiting; /* puts held at the gate now */
	int fail;    /* puts fail with this, if set */
} g = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

static int g_get(struct objstore *s, const char *key, uint64_t off, size_t len,
		 void **data, size_t *got)
{
	(void)s;
	return objstore_get(g.inner, key, off, len, data, got);
}

static int g_put(struct objstore *s, const char *key, const void *data,
		 size_t len)
{
	(void)s;
	pthread_mutex_lock(&g.lock);
	g.waiting++;
	pthread_cond_broadcast(&g.cond);
	while (!g.open)
		pthread_cond_wait(&g.cond, &g.lock);
	g.waiting--;
	int err = g.fail;
	pthread_mutex_unlock(&g.lock);
	return err ? err : objstore_put(g.inner, key, data, len);
}

static int g_del(struct objstore *s, const char *key)
{
	(void)s;
	return objstore_del(g.inner, key);
}

static int g_head(struct objstore *s, const char *key, uint64_t *size)
{
	(void)s;
	return objstore_head(g.inner, key, size);
}

static int g_list(struct objstore *s, const char *prefix, objstore_list_fn fn,
		  void *arg)
{
	(void)s;
	return objstore_list(g.inner, prefix, fn, arg);
}

static void g_close(struct objstore *s)
{
	(void)s;
}

static const struct objstore_ops gate_ops = {
    .scheme = "gate",
    .get = g_get,
    .put = g_put,
    .del = g_del,
    .head = g_head,
    .list = g_list,
    .close = g_close,
};

static void gate_set(int open)
{
	pthread_mutex_lock(&g.lock);
	g.open = open;
	pthread_cond_broadcast(&g.cond);
	pthread_mutex_unlock(&g.lock);
}

/* Wait until n puts are held at the gate (no time limit: the test's). */
static void gate_wait_for(int n)
{
	pthread_mutex_lock(&g.lock);
	while (g.waiting < n)
		pthread_cond_wait(&g.cond, &g.lock);
	pthread_mutex_unlock(&g.lock);
}

/* ---- fixture ---- */

static char dir[64];

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/granary-stage.XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	cr_assert_eq(objstore_open("mem://", NULL, &g.inner), 0);
	g.base.ops = &gate_ops;
	g.open = 1;
	g.waiting = 0;
	g.fail = 0;
}

static void teardown(void)
{
	char cmd[128];

	gate_set(1);
	objstore_close(g.inner);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	cr_expect_eq(system(cmd), 0);
}

static struct stage *open_stage(uint64_t max_bytes, int uploaders)
{
	struct stage_opts o = {.dir = dir,
			       .compress = CODEC_LZ4,
			       .block_size = 64 * KB,
			       .uploaders = uploaders,
			       .max_bytes = max_bytes};
	struct stage *st;

	cr_assert_eq(stage_open(&g.base, &o, &st), 0);
	return st;
}

/* Incompressible bytes, a function of seed. */
static void fill(unsigned char *p, size_t n, unsigned seed)
{
	uint64_t x = 0x9e3779b97f4a7c15ull * (seed + 1);
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = (unsigned char)x;
	}
}

/* The object of block (id, idx, len) decodes to raw[0..len). */
static void expect_object(uint64_t id, uint32_t idx, const unsigned char *raw,
			  uint32_t len)
{
	char key[KEY_CAP];
	void *enc = NULL, *out = malloc(len + 1);
	size_t n = 0, got = 0;

	chunkstore_key(id, idx, len, key, sizeof(key));
	cr_assert_eq(objstore_get(g.inner, key, 0, 0, &enc, &n), 0,
		     "object '%s' is not in the store", key);
	cr_assert_eq(codec_decode(enc, n, out, len, &got), 0);
	cr_assert_eq(got, len);
	cr_assert_eq(memcmp(out, raw, len), 0, "'%s' differs", key);
	free(enc);
	free(out);
}

static int in_store(uint64_t id, uint32_t idx, uint32_t len)
{
	char key[KEY_CAP];
	uint64_t size;

	chunkstore_key(id, idx, len, key, sizeof(key));
	return objstore_head(g.inner, key, &size) == 0;
}

static int file_exists(uint64_t id, uint32_t idx, uint32_t len)
{
	char path[160];

	snprintf(path, sizeof(path),
		 "%s/%" PRIu64 "_%" PRIu32 "_%" PRIu32 ".blk", dir, id, idx,
		 len);
	return access(path, F_OK) == 0;
}

/* ---- tests ---- */

Test(stage, staged_read_then_upload, .init = setup, .fini = teardown)
{
	unsigned char raw[3][64 * KB];
	uint32_t len[3] = {64 * KB, 64 * KB, 1000};
	struct stage_stats ss;
	struct stage *st;

	gate_set(0);
	st = open_stage(1u << 20, 2);
	for (uint32_t i = 0; i < 3; i++) {
		fill(raw[i], len[i], i);
		cr_assert_eq(stage_put(st, 7, i, raw[i], len[i]), 0);
		cr_assert(file_exists(7, i, len[i]));
	}
	cr_assert_eq(stage_durable(st), 0);
	stage_get_stats(st, &ss);
	cr_assert_eq(ss.staged_blocks, 3);
	/* read from the staging file while the store has nothing */
	for (uint32_t i = 0; i < 3; i++) {
		void *enc = NULL, *out = malloc(len[i]);
		size_t n = 0, got = 0;
		cr_assert_eq(stage_get(st, 7, i, NULL, NULL), 0);
		cr_assert_eq(stage_get(st, 7, i, &enc, &n), 0);
		cr_assert_eq(codec_decode(enc, n, out, len[i], &got), 0);
		cr_assert_eq(memcmp(out, raw[i], len[i]), 0);
		cr_assert_not(in_store(7, i, len[i]));
		free(enc);
		free(out);
	}
	cr_assert_eq(stage_get(st, 7, 3, NULL, NULL), ENOENT);
	cr_assert_eq(stage_get(st, 8, 0, NULL, NULL), ENOENT);
	gate_set(1);
	cr_assert_eq(stage_sync(st), 0);
	for (uint32_t i = 0; i < 3; i++) {
		expect_object(7, i, raw[i], len[i]);
		cr_assert_not(file_exists(7, i, len[i]));
		cr_assert_eq(stage_get(st, 7, i, NULL, NULL), ENOENT);
	}
	stage_get_stats(st, &ss);
	cr_assert_eq(ss.staged_blocks, 0);
	cr_assert_eq(ss.blocks, 3);
	stage_close(st);
}

Test(stage, recovery_uploads_whole_blocks_only, .init = setup, .fini = teardown)
{
	unsigned char raw[64 * KB], enc[64 * KB + 256];
	size_t n = 0;
	char path[160];
	struct stage_stats ss;

	/* what a killed mount leaves: two whole blocks, one cut short */
	fill(raw, sizeof(raw), 3);
	cr_assert_eq(codec_encode(raw, sizeof(raw), CODEC_LZ4, enc, &n), 0);
	for (uint32_t i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "%s/%u_%u_%u.blk", dir, 42u, i,
			 64u * KB);
		int fd = open(path, O_WRONLY | O_CREAT, 0600);
		cr_assert_geq(fd, 0);
		size_t w = i == 2 ? n / 2 : n;
		cr_assert_eq(write(fd, enc, w), (ssize_t)w);
		close(fd);
	}
	/* and names that are not staged blocks */
	snprintf(path, sizeof(path), "%s/lock", dir);
	close(open(path, O_WRONLY | O_CREAT, 0600));
	snprintf(path, sizeof(path), "%s/9.pack", dir);
	close(open(path, O_WRONLY | O_CREAT, 0600));

	struct stage *st = open_stage(1u << 20, 1);
	stage_get_stats(st, &ss);
	cr_assert_eq(ss.recovered, 2);
	cr_assert_eq(stage_sync(st), 0);
	expect_object(42, 0, raw, 64 * KB);
	expect_object(42, 1, raw, 64 * KB);
	cr_assert_not(in_store(42, 2, 64 * KB), "a cut block was uploaded");
	cr_assert_not(file_exists(42, 2, 64 * KB), "a cut block was kept");
	cr_assert_eq(access(path, F_OK), 0, "a pack file was touched");
	stage_close(st);
}

Test(stage, close_uploads_everything, .init = setup, .fini = teardown)
{
	unsigned char raw[64 * KB];
	struct stage *st = open_stage(1u << 20, 2);

	fill(raw, sizeof(raw), 5);
	for (uint32_t i = 0; i < 8; i++)
		cr_assert_eq(stage_put(st, 11, i, raw, sizeof(raw)), 0);
	stage_close(st);
	for (uint32_t i = 0; i < 8; i++) {
		expect_object(11, i, raw, sizeof(raw));
		cr_assert_not(file_exists(11, i, sizeof(raw)));
	}
}

Test(stage, failed_uploads_stay_for_the_next_mount, .init = setup,
     .fini = teardown, .timeout = 60)
{
	unsigned char raw[64 * KB];
	struct stage *st = open_stage(1u << 20, 1);

	g.fail = EIO;
	fill(raw, sizeof(raw), 6);
	cr_assert_eq(stage_put(st, 12, 0, raw, sizeof(raw)), 0);
	cr_assert_eq(stage_sync(st), EIO);
	stage_close(st); /* a few tries, then gives up */
	cr_assert(file_exists(12, 0, sizeof(raw)));
	g.fail = 0;
	st = open_stage(1u << 20, 1);
	cr_assert_eq(stage_sync(st), 0);
	expect_object(12, 0, raw, sizeof(raw));
	cr_assert_not(file_exists(12, 0, sizeof(raw)));
	stage_close(st);
}

Test(stage, dropped_before_upload_is_never_put, .init = setup, .fini = teardown)
{
	unsigned char raw[64 * KB];
	struct stage_stats ss;

	gate_set(0);
	struct stage *st = open_stage(1u << 20, 1);
	fill(raw, sizeof(raw), 7);
	/* the first block holds the only uploader at the gate */
	cr_assert_eq(stage_put(st, 20, 0, raw, sizeof(raw)), 0);
	gate_wait_for(1);
	cr_assert_eq(stage_put(st, 21, 0, raw, sizeof(raw)), 0);
	cr_assert_eq(stage_put(st, 21, 1, raw, 100), 0);
	stage_drop(st, 21);
	gate_set(1);
	cr_assert_eq(stage_sync(st), 0);
	expect_object(20, 0, raw, sizeof(raw));
	cr_assert_not(in_store(21, 0, sizeof(raw)));
	cr_assert_not(in_store(21, 1, 100));
	cr_assert_not(file_exists(21, 0, sizeof(raw)));
	stage_get_stats(st, &ss);
	cr_assert_eq(ss.dropped, 2);
	stage_close(st);
}

Test(stage, dropped_during_upload_is_deleted, .init = setup, .fini = teardown)
{
	unsigned char raw[64 * KB];

	gate_set(0);
	struct stage *st = open_stage(1u << 20, 1);
	fill(raw, sizeof(raw), 8);
	cr_assert_eq(stage_put(st, 30, 0, raw, sizeof(raw)), 0);
	gate_wait_for(1); /* its put has started */
	/* the reclaimer's order: stage_drop, then delete the objects */
	stage_drop(st, 30);
	char key[KEY_CAP];
	chunkstore_key(30, 0, sizeof(raw), key, sizeof(key));
	objstore_del(g.inner, key); /* nothing there yet */
	gate_set(1);
	cr_assert_eq(stage_sync(st), 0);
	cr_assert_not(in_store(30, 0, sizeof(raw)), "orphan object left");
	stage_close(st);
}

struct putter {
	struct stage *st;
	int n, done; /* done: __atomic */
};

static void *put_main(void *arg)
{
	struct putter *p = arg;
	unsigned char raw[64 * KB];

	fill(raw, sizeof(raw), 9);
	for (int i = 0; i < p->n; i++)
		cr_assert_eq(
		    stage_put(p->st, 40, (uint32_t)i, raw, sizeof(raw)), 0);
	__atomic_store_n(&p->done, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

Test(stage, bound_makes_writers_wait, .init = setup, .fini = teardown,
     .timeout = 60)
{
	struct stage_stats ss;
	struct putter p = {.n = 10};
	pthread_t t;

	gate_set(0);
	/* incompressible 64 KiB blocks: three fit in 200 KiB */
	p.st = open_stage(200 * KB, 1);
	cr_assert_eq(pthread_create(&t, NULL, put_main, &p), 0);
	gate_wait_for(1);
	/* staged stays within the bound while the writer waits for room */
	for (int i = 0; i < 50; i++) {
		stage_get_stats(p.st, &ss);
		cr_assert_leq(ss.staged_bytes, 200 * KB);
		usleep(2000);
	}
	cr_assert_not(__atomic_load_n(&p.done, __ATOMIC_SEQ_CST),
		      "10 blocks staged past a bound of 3");
	gate_set(1);
	pthread_join(t, NULL);
	cr_assert_eq(stage_sync(p.st), 0);
	unsigned char raw[64 * KB];
	fill(raw, sizeof(raw), 9);
	for (uint32_t i = 0; i < 10; i++)
		expect_object(40, i, raw, sizeof(raw));
	stage_close(p.st);
}

Test(stage, failing_disk_puts_at_once, .init = setup, .fini = teardown)
{
	unsigned char raw[64 * KB];
	struct stage_stats ss;
	char sub[96];

	/* a staging directory that is gone: every file write fails */
	snprintf(sub, sizeof(sub), "%s/slot", dir);
	cr_assert_eq(mkdir(sub, 0700), 0);
	struct stage_opts o = {.dir = sub,
			       .compress = CODEC_NONE,
			       .block_size = 64 * KB,
			       .uploaders = 1,
			       .max_bytes = 1u << 20};
	struct stage *st;
	cr_assert_eq(stage_open(&g.base, &o, &st), 0);
	cr_assert_eq(rmdir(sub), 0);
	fill(raw, sizeof(raw), 10);
	cr_assert_eq(stage_put(st, 50, 0, raw, sizeof(raw)), 0);
	expect_object(50, 0, raw, sizeof(raw)); /* in the store on return */
	stage_get_stats(st, &ss);
	cr_assert_eq(ss.direct, 1);
	cr_assert_eq(ss.staged_blocks, 0);
	/* and when the store fails too, the error is the put's */
	g.fail = EIO;
	cr_assert_eq(stage_put(st, 50, 1, raw, sizeof(raw)), EIO);
	g.fail = 0;
	stage_close(st);
}

Test(stage, bad_options, .init = setup, .fini = teardown)
{
	struct stage_opts o = {.dir = dir,
			       .compress = CODEC_LZ4,
			       .block_size = 64 * KB,
			       .uploaders = 1,
			       .max_bytes = 1u << 20};
	struct stage *st = (void *)1;

	cr_assert_eq(stage_open(NULL, &o, &st), EINVAL);
	cr_assert_null(st);
	o.uploaders = 0;
	cr_assert_eq(stage_open(&g.base, &o, &st), EINVAL);
	o.uploaders = 1;
	o.max_bytes = 0;
	cr_assert_eq(stage_open(&g.base, &o, &st), EINVAL);
	o.max_bytes = 1;
	o.dir = "/nonexistent/granary-stage";
	cr_assert_eq(stage_open(&g.base, &o, &st), ENOENT);
	o.dir = dir;
	cr_assert_eq(stage_open(&g.base, &o, &st), 0);
	unsigned char big[64 * KB + 1] = {0};
	cr_assert_eq(stage_put(st, 1, 0, big, sizeof(big)), EINVAL);
	cr_assert_eq(stage_put(st, 0, 0, big, 10), EINVAL);
	stage_close(st);
	stage_close(NULL);
	cr_assert_eq(stage_sync(NULL), 0);
	cr_assert_eq(stage_get(NULL, 1, 0, NULL, NULL), ENOENT);
}

/* ---- naming staged blocks for other clients' reclamation ---- */

static struct named {
	pthread_mutex_t lock;
	int marks, dones;
	int in_store_at_done;	  /* the object was in the store at each done */
	int fail_mark, fail_done; /* fail the next N calls */
} nm = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int named_cb(void *arg, uint64_t id, uint32_t idx, int done)
{
	uint32_t len = (uint32_t)(uintptr_t)arg;
	int err = 0;

	pthread_mutex_lock(&nm.lock);
	if (!done) {
		if (nm.fail_mark > 0) {
			nm.fail_mark--;
			err = EIO;
		} else {
			nm.marks++;
		}
	} else if (nm.fail_done > 0) {
		nm.fail_done--;
		err = EIO;
	} else {
		nm.dones++;
		nm.in_store_at_done += in_store(id, idx, len);
	}
	pthread_mutex_unlock(&nm.lock);
	return err;
}

Test(stage, blocks_are_named_until_in_the_store, .init = setup,
     .fini = teardown)
{
	enum { LEN = 10 * KB };
	unsigned char raw[LEN];
	struct stage_opts o = {.dir = dir,
			       .compress = CODEC_LZ4,
			       .block_size = 64 * KB,
			       .uploaders = 2,
			       .max_bytes = 1 << 20,
			       .cb_arg = (void *)(uintptr_t)LEN,
			       .staged = named_cb};
	struct stage *st;
	struct stage_stats ss;

	memset(&nm.marks, 0, sizeof(nm) - offsetof(struct named, marks));
	cr_assert_eq(stage_open(&g.base, &o, &st), 0);
	fill(raw, LEN, 1);
	/* a failed mark: the block goes to the store at once, unnamed */
	nm.fail_mark = 1;
	cr_assert_eq(stage_put(st, 8, 0, raw, LEN), 0);
	cr_expect(in_store(8, 0, LEN));
	cr_expect_not(file_exists(8, 0, LEN));
	stage_get_stats(st, &ss);
	cr_expect_eq(ss.direct, 1);
	cr_expect_eq(nm.marks, 0);
	/* named before stage_put returns, done only after the put */
	gate_set(0);
	cr_assert_eq(stage_put(st, 7, 0, raw, LEN), 0);
	cr_expect_eq(nm.marks, 1, "named before stage_put returns");
	gate_wait_for(1);
	cr_expect_eq(nm.dones, 0, "done before the put");
	/* a failed done: the upload is tried again, the file kept till then */
	nm.fail_done = 1;
	gate_set(1);
	int err = stage_sync(st);
	for (int i = 0; err && i < 5; i++)
		err = stage_sync(st);
	cr_assert_eq(err, 0);
	stage_get_stats(st, &ss);
	cr_expect_geq(ss.errors, 1, "the failed done counts as a failure");
	cr_expect_eq(nm.fail_done, 0);
	cr_expect_eq(nm.dones, 1);
	cr_expect_eq(nm.in_store_at_done, 1, "done came before the put");
	cr_expect_not(file_exists(7, 0, LEN));
	expect_object(7, 0, raw, LEN);
	stage_close(st);
}
