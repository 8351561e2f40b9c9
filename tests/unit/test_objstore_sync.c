/*
 * test_objstore_sync.c - durability in batches (objstore_put_lazy and
 * objstore_sync, issue 35): lazy puts readable at once on every backend,
 * syncs and lazy puts from many threads at once on a file:// pool in both
 * of its modes (syncfs, fdatasync), a sync that fails because the file
 * system under the pool is full (a loop device whose backing file lies on
 * a full tmpfs: a real writeback error) and what the syncs after it say,
 * the wrappers' fault hook and retries, and the decorators (disk cache,
 * cache group, sealing) passing both down to the store under them.
 */
#include "fs/store/crypt.h"
#include "fs/store/diskcache.h"
#include "fs/store/group.h"
#include "fs/store/objstore.h"
#include "fs/store/peer.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#define KB (1u << 10)
#define MB (1u << 20)

/* ---- helpers ---- */

static uint64_t rnd_next(uint64_t *st)
{
	uint64_t z = (*st += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void fill(void *buf, size_t len, uint64_t seed)
{
	unsigned char *p = buf;
	uint64_t st = seed;
	for (size_t i = 0; i < len; i++)
		p[i] = (unsigned char)rnd_next(&st);
}

static char root[64]; /* per test; removed by fini */

static const char *tmp_root(void)
{
	if (!root[0]) {
		snprintf(root, sizeof(root), "/tmp/granary-osync.XXXXXX");
		cr_assert_not_null(mkdtemp(root));
	}
	return root;
}

static int sh(const char *fmt, const char *a, const char *b)
{
	char cmd[3 * PATH_MAX];
	snprintf(cmd, sizeof(cmd), fmt, a, b);
	return system(cmd);
}

static void fullfs_down(void);

static void fini(void)
{
	fullfs_down();
	if (root[0])
		sh("rm -rf '%s'%s", root, "");
	root[0] = '\0';
	unsetenv("GRANARY_FILE_SYNC");
}

TestSuite(objstore_sync, .fini = fini);

/* A file:// pool of two directories under the test's root, syncing as
 * mode ("syncfs" or "fdatasync") says. */
static struct objstore *open_pool(const char *mode, const char *name)
{
	char url[3 * PATH_MAX];
	struct objstore *s;

	setenv("GRANARY_FILE_SYNC", mode, 1);
	snprintf(url, sizeof(url), "file://%s/%s-a:%s/%s-b", tmp_root(), name,
		 tmp_root(), name);
	cr_assert_eq(objstore_open(url, NULL, &s), 0, "open %s", url);
	unsetenv("GRANARY_FILE_SYNC");
	return s;
}

static void expect_object(struct objstore *s, const char *key, const void *want,
			  size_t len)
{
	void *data = NULL;
	size_t got = 0;
	uint64_t size = 0;

	cr_assert_eq(objstore_get(s, key, 0, 0, &data, &got), 0, "get %s", key);
	cr_assert_eq(got, len, "%s: %zu bytes, want %zu", key, got, len);
	cr_assert(len == 0 || !memcmp(data, want, len), "%s: other bytes", key);
	free(data);
	cr_assert_eq(objstore_head(s, key, &size), 0);
	cr_assert_eq(size, len);
}

static int count_key(void *arg, const char *key, uint64_t size, int64_t mt)
{
	(void)key;
	(void)size;
	(void)mt;
	(*(int *)arg)++;
	return 0;
}

/* ---- lazy puts are objects at once ---- */

static const size_t sizes[] = {0, 1, 4095, 4096, 4097, MB + 3, 4 * MB};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

/* Put one object of each size lazily (from a page-aligned buffer, so
 * that file:// writes the whole pages past the page cache, as it does
 * for blocks) and read each back before any sync. */
static void lazy_visible(struct objstore *s, const char *prefix, int temps)
{
	unsigned char *buf = aligned_alloc(4096, 4 * MB);
	char key[128];
	int n = 0;

	cr_assert_not_null(buf);
	for (size_t i = 0; i < NSIZES; i++) {
		snprintf(key, sizeof(key), "%s/obj%zu", prefix, i);
		fill(buf, sizes[i], i + 1);
		cr_assert_eq(objstore_put_lazy(s, key, buf, sizes[i]), 0);
		expect_object(s, key, buf, sizes[i]);
	}
	cr_assert_eq(objstore_list(s, prefix, count_key, &n), 0);
	cr_assert_eq(n, (int)NSIZES, "listed %d of %zu", n, NSIZES);
	if (temps) { /* no temp file left behind: each is renamed */
		n = 0;
		cr_assert_eq(objstore_list_temps(s, count_key, &n), 0);
		cr_assert_eq(n, 0, "%d temp files left", n);
	}
	cr_assert_eq(objstore_sync(s), 0);
	for (size_t i = 0; i < NSIZES; i++) {
		snprintf(key, sizeof(key), "%s/obj%zu", prefix, i);
		fill(buf, sizes[i], i + 1);
		expect_object(s, key, buf, sizes[i]);
	}
	struct objstore_stats st;
	objstore_get_stats(s, &st);
	cr_assert_eq(st.puts, NSIZES, "lazy puts are counted as puts");
	cr_assert_eq(st.syncs, 1);
	cr_assert_eq(st.errors, 0);
	free(buf);
}

Test(objstore_sync, lazy_puts_visible_at_once_file)
{
	const char *modes[] = {"syncfs", "fdatasync"};

	for (int m = 0; m < 2; m++) {
		struct objstore *s = open_pool(modes[m], modes[m]);
		lazy_visible(s, "blocks/a", 1);
		objstore_close(s);
	}
}

Test(objstore_sync, lazy_puts_visible_at_once_mem)
{
	struct objstore *s;

	cr_assert_eq(objstore_open("mem://", NULL, &s), 0);
	lazy_visible(s, "blocks/a", 0);
	objstore_close(s);
}

/* On S3 a lazy put is a put (the PUT acknowledged is durable) and a sync
 * does nothing. */
Test(objstore_sync, lazy_puts_visible_at_once_s3)
{
	const char *s3 = getenv("GRANARY_TEST_S3");
	char url[PATH_MAX];
	struct objstore *s;

	if (!s3 || !*s3) {
		fprintf(stderr, "test_objstore_sync: GRANARY_TEST_S3 is not "
				"set: s3 case skipped\n");
		cr_skip_test("GRANARY_TEST_S3 not set (use tests/run-unit.sh)");
	}
	snprintf(url, sizeof(url), "%s/granary-test/sync-%d", s3,
		 (int)getpid());
	cr_assert_eq(objstore_open(url, NULL, &s), 0);
	lazy_visible(s, "blocks/a", 0);
	for (size_t i = 0; i < NSIZES; i++) {
		char key[64];
		snprintf(key, sizeof(key), "blocks/a/obj%zu", i);
		objstore_del(s, key);
	}
	objstore_close(s);
}

Test(objstore_sync, nothing_to_sync)
{
	struct objstore *s = open_pool("syncfs", "empty");

	cr_assert_eq(objstore_sync(s), 0);
	cr_assert_eq(objstore_sync(s), 0);
	objstore_close(s);
}

/* ---- many threads putting and syncing at once ---- */

#define THREADS 8
#define ROUNDS	40
#define PER	3

struct racer {
	struct objstore *s;
	int id;
	int errs; /* syncs or puts that failed */
	size_t n; /* objects put */
	size_t len[ROUNDS * PER];
};

static size_t racer_len(int id, size_t k)
{
	uint64_t st = (uint64_t)id * 1000003u + k;
	size_t len = rnd_next(&st) % (192 * KB);
	return k % 17 == 0 ? 4 * MB : len; /* now and then a whole block */
}

static void *race(void *arg)
{
	struct racer *r = arg;
	unsigned char *buf = aligned_alloc(4096, 4 * MB);
	char key[64];

	for (int round = 0; round < ROUNDS; round++) {
		int nput = 1 + round % PER;
		for (int i = 0; i < nput; i++) {
			size_t k = r->n, len = racer_len(r->id, k);
			snprintf(key, sizeof(key), "blocks/t%d/%zu", r->id % 3,
				 (size_t)r->id * 1000 + k);
			fill(buf, len, (uint64_t)r->id << 32 | k);
			r->errs += objstore_put_lazy(r->s, key, buf, len) != 0;
			r->len[r->n++] = len;
		}
		r->errs += objstore_sync(r->s) != 0;
	}
	free(buf);
	return NULL;
}

static void racing(const char *mode)
{
	struct objstore *s = open_pool(mode, mode);
	struct racer *r = calloc(THREADS, sizeof(*r));
	pthread_t t[THREADS];
	unsigned char *buf = malloc(4 * MB);
	char key[64];

	for (int i = 0; i < THREADS; i++) {
		r[i] = (struct racer){.s = s, .id = i};
		cr_assert_eq(pthread_create(&t[i], NULL, race, &r[i]), 0);
	}
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < THREADS; i++) {
		cr_assert_eq(r[i].errs, 0, "%s: thread %d: %d errors", mode, i,
			     r[i].errs);
		for (size_t k = 0; k < r[i].n; k++) {
			snprintf(key, sizeof(key), "blocks/t%d/%zu", i % 3,
				 (size_t)i * 1000 + k);
			fill(buf, r[i].len[k], (uint64_t)i << 32 | k);
			expect_object(s, key, buf, r[i].len[k]);
		}
	}
	struct objstore_stats st;
	objstore_get_stats(s, &st);
	cr_assert_eq(st.syncs, THREADS * ROUNDS);
	cr_assert_eq(st.errors, 0);
	/* a sync with nothing new after them all */
	cr_assert_eq(objstore_sync(s), 0);
	free(buf);
	free(r);
	objstore_close(s);
}

Test(objstore_sync, concurrent_puts_and_syncs_syncfs, .timeout = 120)
{
	racing("syncfs");
}

Test(objstore_sync, concurrent_puts_and_syncs_fdatasync, .timeout = 120)
{
	racing("fdatasync");
}

/* ---- a file system that fills up under the pool ---- */

/*
 * An ext4 file system on a loop device whose sparse backing file lies on
 * a small tmpfs: once the tmpfs is full, the loop device's writes fail
 * and the kernel's writeback of the pool's files fails with them, which
 * is what fsync, fdatasync and syncfs then report (ENOSPC from the loop
 * device, or EIO). Root, losetup and mkfs.ext4 needed, else skipped.
 */
static struct fullfs {
	char tmpfs[256], mnt[256], loop[64];
	int tmpfs_on, mnt_on;
} fullfs_at; /* taken down by fini too */

static void fullfs_down(void)
{
	struct fullfs *f = &fullfs_at;

	if (f->mnt_on)
		umount2(f->mnt, MNT_DETACH);
	if (f->loop[0])
		sh("losetup -d '%s'%s", f->loop, "");
	if (f->tmpfs_on)
		umount2(f->tmpfs, MNT_DETACH);
	memset(f, 0, sizeof(*f));
}

static int fullfs_up(void)
{
	struct fullfs *f = &fullfs_at;
	char backing[PATH_MAX + 16], out[PATH_MAX + 16];

	memset(f, 0, sizeof(*f));
	if (geteuid() != 0)
		return 0;
	snprintf(f->tmpfs, sizeof(f->tmpfs), "%s/tmpfs", tmp_root());
	snprintf(f->mnt, sizeof(f->mnt), "%s/ext4", tmp_root());
	mkdir(f->tmpfs, 0755);
	mkdir(f->mnt, 0755);
	if (mount("tmpfs", f->tmpfs, "tmpfs", 0, "size=48m"))
		return 0;
	f->tmpfs_on = 1;
	snprintf(backing, sizeof(backing), "%s/backing", f->tmpfs);
	snprintf(out, sizeof(out), "%s/loop", tmp_root());
	if (truncate(backing, 0) && errno != ENOENT)
		goto fail;
	int fd = open(backing, O_CREAT | O_WRONLY, 0600);
	if (fd < 0 || ftruncate(fd, 128 * MB)) {
		if (fd >= 0)
			close(fd);
		goto fail;
	}
	close(fd);
	if (sh("losetup -f --show '%s' >'%s' 2>/dev/null", backing, out))
		goto fail;
	FILE *lf = fopen(out, "r");
	if (!lf || !fgets(f->loop, sizeof(f->loop), lf)) {
		if (lf)
			fclose(lf);
		goto fail;
	}
	fclose(lf);
	f->loop[strcspn(f->loop, "\n")] = '\0';
	if (sh("mkfs.ext4 -q -F '%s' >/dev/null 2>&1%s", f->loop, ""))
		goto fail;
	if (mount(f->loop, f->mnt, "ext4", 0, NULL))
		goto fail;
	f->mnt_on = 1;
	return 1;

fail:
	fullfs_down();
	return 0;
}

/* Fill the tmpfs under the loop device's backing file. */
static void fullfs_fill(void)
{
	struct fullfs *f = &fullfs_at;
	char path[PATH_MAX + 16];
	static char zeros[MB];

	snprintf(path, sizeof(path), "%s/filler", f->tmpfs);
	int fd = open(path, O_CREAT | O_WRONLY, 0600);
	cr_assert_geq(fd, 0);
	while (write(fd, zeros, sizeof(zeros)) > 0)
		;
	close(fd);
}

struct syncer {
	struct objstore *s;
	pthread_barrier_t *go;
	int err;
};

static void *sync_main(void *arg)
{
	struct syncer *y = arg;
	pthread_barrier_wait(y->go);
	y->err = objstore_sync(y->s);
	return NULL;
}

static void full_fs(const char *mode)
{
	char url[PATH_MAX + 16], key[64];
	struct objstore *s;

	if (!fullfs_up()) {
		fprintf(stderr, "test_objstore_sync: cannot set up a loop "
				"device on a tmpfs (needs root, losetup, "
				"mkfs.ext4): full file system case skipped\n");
		cr_skip_test("no loop device on a tmpfs (needs root)");
	}
	setenv("GRANARY_FILE_SYNC", mode, 1);
	snprintf(url, sizeof(url), "file://%s/pool", fullfs_at.mnt);
	cr_assert_eq(objstore_open(url, NULL, &s), 0);
	unsetenv("GRANARY_FILE_SYNC");

	/* what was synced before the disk filled stays good */
	char small[1000];
	memset(small, 7, sizeof(small));
	cr_assert_eq(objstore_put_lazy(s, "blocks/0/before", small, 1000), 0);
	cr_assert_eq(objstore_sync(s), 0);

	/* lazy puts into the page cache, then no room under it */
	for (int i = 0; i < 64; i++) {
		snprintf(key, sizeof(key), "blocks/%d/k%d", i % 4, i);
		cr_assert_eq(objstore_put_lazy(s, key, small, sizeof(small)),
			     0);
	}
	fullfs_fill();

	/* every sync asked for at once fails: the one that ran, and those
	 * that waited for it (and for the next one) */
	enum { N = 4 };
	pthread_t t[N];
	struct syncer y[N];
	pthread_barrier_t go;
	pthread_barrier_init(&go, NULL, N);
	for (int i = 0; i < N; i++) {
		y[i] = (struct syncer){s, &go, 0};
		cr_assert_eq(pthread_create(&t[i], NULL, sync_main, &y[i]), 0);
	}
	for (int i = 0; i < N; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&go);
	/* and one after them, with nothing put since: the kernel reports
	 * a writeback error once per file descriptor, the store keeps it */
	int later = objstore_sync(s);
	struct objstore_stats st;
	objstore_get_stats(s, &st);
	objstore_close(s);
	fullfs_down();

	for (int i = 0; i < N; i++)
		cr_assert(y[i].err == ENOSPC || y[i].err == EIO,
			  "%s: sync %d on a full file system: %d (%s)", mode, i,
			  y[i].err, strerror(y[i].err));
	cr_assert(later == ENOSPC || later == EIO,
		  "%s: a sync after the failed one: %d", mode, later);
	cr_assert_eq(st.syncs, 1 + N + 1);
	cr_assert_geq(st.errors, N + 1);
}

Test(objstore_sync, full_fs_fails_sync_syncfs, .timeout = 60)
{
	full_fs("syncfs");
}

Test(objstore_sync, full_fs_fails_sync_fdatasync, .timeout = 60)
{
	full_fs("fdatasync");
}

/* ---- the wrappers: fault hook, retries ---- */

Test(objstore_sync, injected_fault_and_retry)
{
	struct objstore *s;
	struct objstore_stats st;

	cr_assert_eq(objstore_open("mem://", NULL, &s), 0);
	s->fail_err = EIO;
	s->fail_next = 1;
	cr_assert_eq(objstore_sync(s), EIO);
	cr_assert_eq(objstore_sync(s), 0);
	/* a transient error is ridden out, as a put's is */
	objstore_set_retry_window(s, 5000);
	s->fail_err = OBJSTORE_EUNREACH;
	s->fail_next = 1;
	cr_assert_eq(objstore_sync(s), 0);
	objstore_get_stats(s, &st);
	cr_assert_eq(st.syncs, 3);
	cr_assert_eq(st.errors, 1);
	cr_assert_eq(st.retries, 1);
	objstore_close(s);
}

/* ---- decorators pass both down ---- */

/* A store that counts what reaches it, over a mem:// one. */
struct rec {
	struct objstore base; /* first */
	struct objstore *inner;
	int puts, lazy, syncs, sync_err;
};

static struct rec *rec_of(struct objstore *s)
{
	return (struct rec *)s;
}

static int rec_get(struct objstore *s, const char *key, uint64_t off,
		   size_t len, void **data, size_t *got)
{
	return objstore_get(rec_of(s)->inner, key, off, len, data, got);
}

static int rec_put(struct objstore *s, const char *key, const void *data,
		   size_t len)
{
	rec_of(s)->puts++;
	return objstore_put(rec_of(s)->inner, key, data, len);
}

static int rec_put_lazy(struct objstore *s, const char *key, const void *data,
			size_t len)
{
	rec_of(s)->lazy++;
	return objstore_put(rec_of(s)->inner, key, data, len);
}

static int rec_sync(struct objstore *s)
{
	rec_of(s)->syncs++;
	return rec_of(s)->sync_err;
}

static int rec_del(struct objstore *s, const char *key)
{
	return objstore_del(rec_of(s)->inner, key);
}

static int rec_head(struct objstore *s, const char *key, uint64_t *size)
{
	return objstore_head(rec_of(s)->inner, key, size);
}

static int rec_list(struct objstore *s, const char *prefix, objstore_list_fn fn,
		    void *arg)
{
	return objstore_list(rec_of(s)->inner, prefix, fn, arg);
}

static void rec_close(struct objstore *s)
{
	objstore_close(rec_of(s)->inner);
	free(s);
}

static const struct objstore_ops rec_ops = {
    .scheme = "rec",
    .get = rec_get,
    .put = rec_put,
    .put_lazy = rec_put_lazy,
    .sync = rec_sync,
    .del = rec_del,
    .head = rec_head,
    .list = rec_list,
    .close = rec_close,
};

/* The stack of a mount: store, disk cache, cache group, sealing. */
Test(objstore_sync, decorators_pass_down)
{
	struct rec *r = calloc(1, sizeof(*r));
	struct objstore *cache, *grp, *top;
	unsigned char key[CRYPT_KEY_LEN], secret[PEER_SECRET_LEN];
	char dirs[PATH_MAX];

	cr_assert_not_null(r);
	r->base.ops = &rec_ops;
	r->base.url = strdup("rec://");
	cr_assert_eq(objstore_open("mem://", NULL, &r->inner), 0);
	snprintf(dirs, sizeof(dirs), "%s/cache", tmp_root());
	struct diskcache_opts dco = {.dirs = dirs,
				     .ns = "vol",
				     .size = 64 * MB,
				     .free_ratio = 0.0,
				     .cache_writes = 1};
	cr_assert_eq(diskcache_open(&r->base, &dco, &cache), 0);
	memset(secret, 5, sizeof(secret));
	struct group_opts go = {.node = 1, .secret = secret};
	cr_assert_eq(group_open(cache, &go, &grp), 0);
	memset(key, 9, sizeof(key));
	cr_assert_eq(objstore_crypt_open(grp, key, &top), 0);

	cr_assert_eq(objstore_put_lazy(top, "blocks/1/lazy", "abc", 3), 0);
	cr_assert_eq(r->lazy, 1, "the lazy put reached the store as one");
	cr_assert_eq(r->puts, 0);
	expect_object(top, "blocks/1/lazy", "abc", 3);
	cr_assert_eq(objstore_put(top, "blocks/1/put", "de", 2), 0);
	cr_assert_eq(r->puts, 1);
	cr_assert_eq(r->lazy, 1);

	cr_assert_eq(objstore_sync(top), 0);
	cr_assert_eq(r->syncs, 1, "the sync reached the store");
	r->sync_err = ENOSPC;
	cr_assert_eq(objstore_sync(top), ENOSPC, "its error comes back up");
	cr_assert_eq(r->syncs, 2);
	objstore_close(top);
}
