/*
 * test_diskcache.c - the disk cache over a mem:// store in temp dirs: hits
 * and ranges, the size limit under parallel fills, LRU and the min_age
 * guard, index rebuild, bad entries (also through a real chunk store), a
 * full disk and free_ratio on tiny tmpfs mounts, writes, deletes, two dirs.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "tests/unit/pagecache.h"
#include "fs/data/chunkstore.h"
#include "fs/store/diskcache.h"
#include "fs/store/diskcache_int.h"
#include "lib/workq.h"

#define NS "vol-1"

/* ---- fixtures: a temp dir (maybe a tmpfs), the cache, cleanup ---- */

static char root[64];	    /* mkdtemp */
static int mounted;	    /* root is a tmpfs we mounted */
static struct objstore *dc; /* the cache under test */

static int rm_one(const char *path, const struct stat *st, int flag,
		  struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

static void make_root(void)
{
	strcpy(root, "/tmp/granary-dc-XXXXXX");
	cr_assert_not_null(mkdtemp(root));
}

static void teardown(void)
{
	objstore_close(dc);
	dc = NULL;
	if (mounted) {
		umount2(root, MNT_DETACH);
		mounted = 0;
	}
	if (root[0])
		nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	root[0] = '\0';
}

/* A tmpfs of `size` at root, in a mount namespace of this test process
 * (Criterion forks one per test) so even a crash cannot leave it mounted;
 * teardown unmounts it as well. */
static void mount_tmpfs(const char *size)
{
	char opts[64];

	make_root();
	if (unshare(CLONE_NEWNS) == 0)
		mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL);
	snprintf(opts, sizeof(opts), "size=%s,mode=0700", size);
	if (mount("tmpfs", root, "tmpfs", 0, opts)) {
		int err = errno;
		teardown();
		cr_skip_test("cannot mount a tmpfs (%s): this test needs root",
			     strerror(err));
	}
	mounted = 1;
}

static struct objstore *open_mem(const char *url)
{
	struct objstore *m;

	cr_assert_eq(objstore_open(url, NULL, &m), 0);
	return m;
}

static struct objstore *open_cache(struct objstore *backend, const char *dirs,
				   uint64_t size, unsigned min_age,
				   double free_ratio, int cache_writes)
{
	struct diskcache_opts o = {.dirs = dirs,
				   .ns = NS,
				   .size = size,
				   .free_ratio = free_ratio,
				   .min_age = min_age,
				   .cache_writes = cache_writes};
	struct objstore *c = NULL;

	cr_assert_eq(diskcache_open(backend, &o, &c), 0);
	cr_assert_not_null(c);
	return c;
}

/* ---- data ---- */

static uint64_t test_seed(void)
{
	static uint64_t seed;
	if (!seed) {
		const char *s = getenv("GRANARY_SEED");
		seed = s ? strtoull(s, NULL, 0) : 20240611;
		fprintf(stderr,
			"test_diskcache: seed %llu (set GRANARY_SEED to "
			"change)\n",
			(unsigned long long)seed);
	}
	return seed;
}

static void key_of(int i, char *buf, size_t cap)
{
	snprintf(buf, cap, "blocks/0/%d/%d_0", i % 7, i);
}

/* Deterministic bytes for (key, version). */
static unsigned char *make_data(const char *key, int version, size_t len)
{
	unsigned char *p = malloc(len ? len : 1);
	uint64_t x = XXH3_64bits(key, strlen(key)) ^ test_seed() ^
		     ((uint64_t)version * 0x9e3779b97f4a7c15ull);

	cr_assert(p);
	for (size_t i = 0; i < len; i++) {
		x += 0x9e3779b97f4a7c15ull;
		uint64_t z = x;
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
		p[i] = (unsigned char)(z >> 56);
	}
	return p;
}

static void put_backend(struct objstore *b, int i, size_t len)
{
	char key[64];
	key_of(i, key, sizeof(key));
	unsigned char *d = make_data(key, 0, len);
	cr_assert_eq(objstore_put(b, key, d, len), 0);
	free(d);
}

/* Get object i whole through the cache and check its bytes. */
static void expect_obj(struct objstore *c, int i, size_t len)
{
	char key[64];
	void *got = NULL;
	size_t n = 0;

	key_of(i, key, sizeof(key));
	unsigned char *want = make_data(key, 0, len);
	cr_assert_eq(objstore_get(c, key, 0, 0, &got, &n), 0, "get '%s'", key);
	cr_assert_eq(n, len, "'%s': %zu bytes, want %zu", key, n, len);
	cr_assert_eq(memcmp(got, want, len), 0, "'%s': bytes differ", key);
	free(got);
	free(want);
}

static int contains(struct objstore *c, int i)
{
	char key[64];
	key_of(i, key, sizeof(key));
	return diskcache_contains(c, key);
}

static struct diskcache_stats cstats(struct objstore *c)
{
	struct diskcache_stats st;
	diskcache_get_stats(c, &st);
	return st;
}

static uint64_t backend_gets(struct objstore *c)
{
	struct objstore_stats st;
	objstore_get_stats(diskcache_backend(c), &st);
	return st.gets;
}

/* What is on disk under a directory: regular files, bytes, temp files. */
struct du {
	uint64_t files, bytes, temps;
};
static struct du du_acc;

static int du_one(const char *path, const struct stat *st, int flag,
		  struct FTW *ftw)
{
	(void)ftw;
	if (flag != FTW_F || !S_ISREG(st->st_mode))
		return 0;
	if (!strncmp(path + ftw->base, ".tmp.", 5))
		du_acc.temps++;
	du_acc.files++;
	du_acc.bytes += (uint64_t)st->st_size;
	return 0;
}

static pthread_mutex_t du_lock = PTHREAD_MUTEX_INITIALIZER;

static struct du du(const char *dir)
{
	struct du r;
	pthread_mutex_lock(&du_lock);
	memset(&du_acc, 0, sizeof(du_acc));
	nftw(dir, du_one, 16, FTW_PHYS);
	r = du_acc;
	pthread_mutex_unlock(&du_lock);
	return r;
}

/* Path of object i's cache file (single directory root). */
static void entry_path(int i, char *buf, size_t cap)
{
	char key[64];
	key_of(i, key, sizeof(key));
	snprintf(buf, cap, "%s/" NS "/%s", root, key);
}

static void write_file(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	cr_assert_geq(fd, 0, "open '%s': %s", path, strerror(errno));
	cr_assert_eq(write(fd, data, len), (ssize_t)len);
	close(fd);
}

/* ---- basics ---- */

Test(diskcache, rejects_bad_opts, .fini = teardown)
{
	struct objstore *m = open_mem("mem://");
	struct objstore *c = (void *)1;
	struct diskcache_opts o = {.dirs = "/tmp", .ns = NS, .size = 0};
	char file[96];

	make_root();
	cr_assert_eq(diskcache_open(m, &o, &c), EINVAL);
	cr_assert_null(c);
	o.size = 1 << 20;
	o.ns = "a/b";
	cr_assert_eq(diskcache_open(m, &o, &c), EINVAL);
	o.ns = NS;
	o.dirs = "/tmp::/tmp";
	cr_assert_eq(diskcache_open(m, &o, &c), EINVAL);
	/* a directory that cannot be created: under a regular file */
	snprintf(file, sizeof(file), "%s/plain", root);
	write_file(file, "x", 1);
	o.dirs = file;
	cr_assert_eq(diskcache_open(m, &o, &c), ENOTDIR);
	cr_assert_null(c);
	objstore_close(m); /* on failure the backend stays ours */
}

Test(diskcache, hit_after_miss, .fini = teardown)
{
	struct objstore *m = open_mem("mem://");
	make_root();
	for (int i = 0; i < 10; i++)
		put_backend(m, i, 1000 + 977 * (size_t)i);
	dc = open_cache(m, root, 64 << 20, 600, 0.1, 0);
	cr_assert_eq(diskcache_backend(dc), m);
	cr_assert_str_eq(dc->url, "mem://");

	for (int i = 0; i < 10; i++) {
		cr_assert_not(contains(dc, i));
		expect_obj(dc, i, 1000 + 977 * (size_t)i);
		cr_assert(contains(dc, i));
	}
	cr_assert_eq(backend_gets(dc), 10);
	for (int round = 0; round < 3; round++)
		for (int i = 0; i < 10; i++)
			expect_obj(dc, i, 1000 + 977 * (size_t)i);
	cr_assert_eq(backend_gets(dc), 10, "a hit reached the backend");

	struct diskcache_stats st = cstats(dc);
	uint64_t total = 0;
	for (int i = 0; i < 10; i++)
		total += 1000 + 977 * (uint64_t)i;
	cr_assert_eq(st.misses, 10);
	cr_assert_eq(st.hits, 30);
	cr_assert_eq(st.hit_bytes, 3 * total);
	cr_assert_eq(st.fills, 10);
	cr_assert_eq(st.fill_skips, 0);
	cr_assert_eq(st.entries, 10);
	cr_assert_eq(st.bytes, total);
	struct du d = du(root);
	cr_assert_eq(d.files, 10);
	cr_assert_eq(d.bytes, total);

	/* head from the index, list and missing keys from the backend */
	char key[64];
	uint64_t size = 0;
	struct objstore_stats bs;
	key_of(3, key, sizeof(key));
	cr_assert_eq(objstore_head(dc, key, &size), 0);
	cr_assert_eq(size, 1000 + 977 * 3);
	objstore_get_stats(m, &bs);
	cr_assert_eq(bs.heads, 0);
	void *p = NULL;
	size_t n = 0;
	cr_assert_eq(objstore_get(dc, "blocks/nope", 0, 0, &p, &n), ENOENT);
	cr_assert_eq(objstore_head(dc, "blocks/nope", &size), ENOENT);
	cr_assert_not(diskcache_contains(dc, "blocks/nope"));
}

/* A store outage under the cache: the cache makes one attempt per request
 * and neither retries nor gives up itself; the store below rides the
 * outage out and gives up each request once, whatever the cache's own
 * window. */
Test(diskcache, outage_given_up_once, .fini = teardown, .timeout = 30)
{
	struct objstore *m = open_mem("mem://");
	struct objstore_stats st;
	char key[64];
	void *p = NULL;
	size_t n = 0;

	make_root();
	put_backend(m, 1, 5000);
	dc = open_cache(m, root, 64 << 20, 600, 0.1, 0);
	objstore_set_retry_window(m, 400);
	objstore_set_retry_window(dc, 60000); /* not the cache's to use */
	m->fail_err = OBJSTORE_EUNREACH;
	m->fail_next = 100000;
	key_of(1, key, sizeof(key));
	time_t t0 = time(NULL);
	cr_assert_eq(objstore_get(dc, key, 0, 0, &p, &n), OBJSTORE_EUNREACH);
	cr_assert_eq(objstore_get(dc, key, 0, 0, &p, &n), OBJSTORE_EUNREACH);
	cr_assert_leq(time(NULL) - t0, 5, "the cache retried on its own");
	objstore_get_stats(dc, &st);
	cr_assert_eq(st.gave_up, 0, "the cache gave up %llu times",
		     (unsigned long long)st.gave_up);
	cr_assert_eq(st.retries, 0);
	objstore_get_stats(m, &st);
	cr_assert_eq(st.gave_up, 2);
	m->fail_next = 0;
}

Test(diskcache, ranges, .fini = teardown)
{
	const size_t len = 100000;
	struct objstore *m = open_mem("mem://");
	char key[64];
	struct {
		uint64_t off;
		size_t len;
	} r[] = {{0, 1},       {0, len},   {0, len + 10}, {1, 0},
		 {4095, 4097}, {99999, 0}, {99999, 5},	  {len, 0},
		 {len + 7, 3}, {50000, 1}};

	make_root();
	put_backend(m, 1, len);
	key_of(1, key, sizeof(key));
	unsigned char *want = make_data(key, 0, len);
	dc = open_cache(m, root, 64 << 20, 600, 0, 0);

	/* a range miss passes through and does not fill */
	for (size_t pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < sizeof(r) / sizeof(r[0]); i++) {
			void *got = NULL;
			size_t n = 0, exp = 0;
			if (r[i].off < len) {
				exp = len - r[i].off;
				if (r[i].len && r[i].len < exp)
					exp = r[i].len;
			}
			cr_assert_eq(
			    objstore_get(dc, key, r[i].off, r[i].len, &got, &n),
			    0);
			cr_assert_not_null(got);
			cr_assert_eq(n, exp, "[%llu, +%zu): %zu bytes",
				     (unsigned long long)r[i].off, r[i].len, n);
			cr_assert_eq(memcmp(got, want + r[i].off, n), 0);
			free(got);
		}
		if (pass == 0) {
			cr_assert_not(contains(dc, 1));
			cr_assert_eq(backend_gets(dc), 10);
			expect_obj(dc, 1, len); /* now fills */
			cr_assert(contains(dc, 1));
		}
	}
	cr_assert_eq(backend_gets(dc), 11,
		     "a range of a cached object "
		     "reached the backend");
	cr_assert_eq(cstats(dc).hits, 10);
	free(want);
}

/* ---- size limit, LRU, min_age ---- */

#define PAR_OBJS    160
#define PAR_THREADS 8
#define PAR_LIMIT   (1u << 20)
#define PAR_MAXOBJ  (48u << 10)

/* Whole pages, so that the tmpfs block count is the byte count. */
static size_t par_len(int i)
{
	return 4096 *
	       (1 + (size_t)(XXH3_64bits(&i, sizeof(i)) % (PAR_MAXOBJ / 4096)));
}

/* Bytes in use on the tmpfs at root: one atomic number, unlike a walk of
 * the tree while files come and go. */
static uint64_t tmpfs_used(void)
{
	struct statvfs sv;
	if (statvfs(root, &sv))
		return 0;
	return (uint64_t)(sv.f_blocks - sv.f_bfree) * sv.f_frsize;
}

static int par_stop, par_bad; /* __atomic */

/* Threads do not cr_assert (it cannot unwind another thread): they count
 * what went wrong and the test checks the count. */
static void *par_reader(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	char key[64];

	for (int n = 0; n < 250; n++) {
		int i = (int)(rand_r(&seed) % PAR_OBJS);
		size_t len = par_len(i), got = 0;
		void *p = NULL;
		key_of(i, key, sizeof(key));
		unsigned char *want = make_data(key, 0, len);
		if (n % 2) { /* a view, filled from by the filler thread */
			struct objstore_view v;
			if (objstore_get_view(dc, key, &v) || v.len != len ||
			    memcmp(v.data, want, len))
				__atomic_add_fetch(&par_bad, 1,
						   __ATOMIC_RELAXED);
			objstore_view_verified(&v);
			objstore_view_release(&v);
		} else if (objstore_get(dc, key, 0, 0, &p, &got) ||
			   got != len || memcmp(p, want, len)) {
			__atomic_add_fetch(&par_bad, 1, __ATOMIC_RELAXED);
		}
		free(p);
		free(want);
	}
	return NULL;
}

struct par_worst {
	uint64_t index_bytes, disk_bytes;
};

static void *par_watch(void *arg)
{
	struct par_worst *w = arg;

	while (!__atomic_load_n(&par_stop, __ATOMIC_ACQUIRE)) {
		struct diskcache_stats st = cstats(dc);
		if (st.bytes > w->index_bytes)
			w->index_bytes = st.bytes;
		uint64_t used = tmpfs_used();
		if (used > w->disk_bytes)
			w->disk_bytes = used;
		usleep(500);
	}
	return NULL;
}

Test(diskcache, size_limit_parallel, .fini = teardown)
{
	struct objstore *m = open_mem("mem://");
	pthread_t t[PAR_THREADS], w;
	struct par_worst worst = {0, 0};

	mount_tmpfs("32m");
	for (int i = 0; i < PAR_OBJS; i++)
		put_backend(m, i, par_len(i));
	dc = open_cache(m, root, PAR_LIMIT, 0, 0, 0);
	uint64_t base = tmpfs_used();
	cr_assert_eq(pthread_create(&w, NULL, par_watch, &worst), 0);
	for (int i = 0; i < PAR_THREADS; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, par_reader,
					    (void *)(uintptr_t)(test_seed() +
								(uint64_t)i)),
			     0);
	for (int i = 0; i < PAR_THREADS; i++)
		pthread_join(t[i], NULL);
	diskcache_sync(dc);
	__atomic_store_n(&par_stop, 1, __ATOMIC_RELEASE);
	pthread_join(w, NULL);

	struct diskcache_stats st = cstats(dc);
	struct du d = du(root);
	cr_assert_eq(par_bad, 0, "%d reads failed or gave wrong bytes",
		     par_bad);
	cr_assert_leq(worst.index_bytes, PAR_LIMIT);
	/* directories may take blocks too: the end state tells how many.
	 * The index holds the limit (above); the disk, one object more
	 * being filled, and the entries evicted while a reader copies from
	 * them (a copying hit does not pin its entry: the file's blocks go
	 * at its close), one per reader at most (seen: 5 pages over the
	 * one object, once in 20 runs) */
	uint64_t dirs = tmpfs_used() - base - d.bytes;
	cr_assert_leq(worst.disk_bytes - base - dirs,
		      PAR_LIMIT + PAR_MAXOBJ * (1 + PAR_THREADS),
		      "%llu bytes on disk at one point",
		      (unsigned long long)(worst.disk_bytes - base - dirs));
	fprintf(stderr,
		"size_limit_parallel: at most %llu of %u bytes on "
		"disk, %llu evictions\n",
		(unsigned long long)(worst.disk_bytes - base - dirs), PAR_LIMIT,
		(unsigned long long)st.evictions);
	cr_assert_leq(d.bytes, PAR_LIMIT);
	cr_assert_eq(d.bytes, st.bytes);
	cr_assert_eq(d.files, st.entries);
	cr_assert_eq(d.temps, 0);
	cr_assert_gt(st.evictions, 0);
	cr_assert_gt(st.hits, 0);
	cr_assert_eq(st.hits + st.misses, PAR_THREADS * 250);
	/* what the index says is there is there, and right */
	for (int i = 0; i < PAR_OBJS; i++)
		if (contains(dc, i))
			expect_obj(dc, i, par_len(i));
	cr_assert_eq(cstats(dc).hits, st.hits + st.entries);
}

/* ---- views ---- */

static int view_of(struct objstore *c, int i, size_t len,
		   struct objstore_view *v)
{
	char key[64];
	key_of(i, key, sizeof(key));
	unsigned char *want = make_data(key, 0, len);
	int err = objstore_get_view(c, key, v);
	if (!err) {
		cr_assert_eq(v->len, len, "'%s': %zu bytes, want %zu", key,
			     v->len, len);
		cr_assert_eq(memcmp(v->data, want, len), 0,
			     "'%s': bytes differ", key);
	}
	free(want);
	return err;
}

Test(diskcache, view_fills_once_verified, .fini = teardown)
{
	struct objstore *m = open_mem("mem://");
	struct objstore_view v;

	make_root();
	put_backend(m, 1, 300000);
	dc = open_cache(m, root, 16 << 20, 600, 0, 0);
	/* released unchecked (a reader found it corrupt): not cached */
	cr_assert_eq(view_of(dc, 1, 300000, &v), 0);
	cr_assert_not(v.mapped);
	objstore_view_release(&v);
	diskcache_sync(dc);
	cr_assert_not(contains(dc, 1));
	cr_assert_eq(du(root).files, 0);
	/* checked: written by the filler from these bytes */
	cr_assert_eq(view_of(dc, 1, 300000, &v), 0);
	objstore_view_verified(&v);
	objstore_view_release(&v);
	diskcache_sync(dc);
	cr_assert(contains(dc, 1));
	cr_assert_eq(cstats(dc).fills, 1);
	/* a hit is the cache file mapped, without the backend */
	uint64_t gets = backend_gets(dc);
	cr_assert_eq(view_of(dc, 1, 300000, &v), 0);
	cr_assert(v.mapped);
	objstore_view_release(&v);
	cr_assert_eq(backend_gets(dc), gets);
	cr_assert_eq(cstats(dc).hits, 1);
}

/* A fill from a page-aligned buffer (here the mapping of a file:// object)
 * goes to the disk without a copy in the page cache: the entry reads back
 * right, and at most its last, partial page was left there. */
Test(diskcache, fill_bypasses_page_cache, .fini = teardown)
{
	char sdir[64] = "/tmp/granary-dcs-XXXXXX", url[96], path[256];
	const size_t len = (4u << 20) + 100;
	struct objstore_view v;
	struct statfs sf;

	make_root();
	cr_assert_eq(statfs(root, &sf), 0);
	if (sf.f_type == TMPFS_MAGIC)
		cr_skip_test("%s is a tmpfs: its files live in the page cache",
			     root);
	cr_assert_not_null(mkdtemp(sdir));
	snprintf(url, sizeof(url), "file://%s", sdir);
	struct objstore *f = open_mem(url);
	put_backend(f, 1, len);
	dc = open_cache(f, root, 64 << 20, 600, 0, 0);
	cr_assert_eq(view_of(dc, 1, len, &v), 0);
	cr_assert(v.mapped);
	objstore_view_verified(&v);
	objstore_view_release(&v);
	diskcache_sync(dc);
	cr_assert(contains(dc, 1));
	entry_path(1, path, sizeof(path));
	size_t n = resident_pages(path);
	cr_assert_leq(n, 1, "%zu of the entry's pages are in the page cache",
		      n);
	expect_obj(dc, 1, len);
	objstore_close(dc);
	dc = NULL;
	nftw(sdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* A hit mapped by a reader holds the file's blocks: LRU eviction passes
 * it by, and an entry retired while mapped (evicted by a user) keeps
 * counting against the limit until the last view goes. */
Test(diskcache, mapped_entry_is_pinned, .fini = teardown)
{
	enum { LEN = 64 << 10, LIMIT = 4 * LEN };
	struct objstore *m = open_mem("mem://");
	struct objstore_view v, w;
	char key[64];

	make_root();
	for (int i = 0; i < 16; i++)
		put_backend(m, i, LEN);
	dc = open_cache(m, root, LIMIT, 0, 0, 0);
	cr_assert_eq(view_of(dc, 0, LEN, &v), 0);
	objstore_view_verified(&v);
	objstore_view_release(&v);
	diskcache_sync(dc);
	cr_assert_eq(view_of(dc, 0, LEN, &v), 0);
	cr_assert(v.mapped, "a hit is a mapping");
	objstore_view_ref(&v, &w); /* a second holder of the same bytes */
	objstore_view_release(&v);
	/* the oldest entry, but mapped: everything else is evicted first */
	for (int i = 1; i < 8; i++)
		expect_obj(dc, i, LEN);
	cr_assert(contains(dc, 0), "a mapped entry was evicted");
	cr_assert_leq(du(root).bytes, LIMIT);
	cr_assert_eq(cstats(dc).entries, 4);
	/* retired while mapped: gone from the index, but its bytes are
	 * still on disk through the mapping, so they still count */
	key_of(0, key, sizeof(key));
	cr_assert_eq(objstore_evict(dc, key), 0);
	cr_assert_not(contains(dc, 0));
	for (int i = 8; i < 12; i++)
		expect_obj(dc, i, LEN);
	cr_assert_leq(cstats(dc).bytes + LEN, LIMIT,
		      "the mapped bytes were not counted");
	char *want = (char *)make_data(key, 0, LEN);
	cr_assert_eq(memcmp(w.data, want, LEN), 0, "the mapping changed");
	free(want);
	objstore_view_release(&w);
	/* released: its room is free again */
	for (int i = 12; i < 16; i++)
		expect_obj(dc, i, LEN);
	cr_assert_eq(cstats(dc).entries, 4);
	cr_assert_eq(cstats(dc).bytes, LIMIT);
}

/* A job that keeps a filler busy until released. */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int held;
} hold = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};

static void hold_run(struct workq_job *job)
{
	(void)job;
	pthread_mutex_lock(&hold.lock);
	while (hold.held)
		pthread_cond_wait(&hold.cond, &hold.lock);
	pthread_mutex_unlock(&hold.lock);
}

Test(diskcache, full_fill_queue_fills_inline, .fini = teardown)
{
	enum { N = 48, LEN = 512 << 10 };
	struct objstore *m = open_mem("mem://");
	struct objstore_view v[N];

	make_root();
	for (int i = 0; i < N; i++)
		put_backend(m, i, LEN);
	dc = open_cache(m, root, 64 << 20, 600, 0, 0);
	for (int i = 0; i < N; i++)
		cr_assert_eq(view_of(dc, i, LEN, &v[i]), 0);
	/* the fillers busy elsewhere (a slow disk): the queue fills, and
	 * the readers write the rest themselves */
	struct workq_job busy[FILLERS];
	struct workq *q = dc_of(dc)->fillers;
	struct workq_stats qs;
	hold.held = 1;
	for (int i = 0; i < FILLERS; i++) {
		busy[i].run = hold_run;
		cr_assert_eq(workq_push(q, &busy[i]), 0);
	}
	do {
		sched_yield();
		workq_get_stats(q, &qs);
	} while (qs.running < FILLERS);
	for (int i = 0; i < N; i++)
		objstore_view_verified(&v[i]);
	pthread_mutex_lock(&hold.lock);
	hold.held = 0;
	pthread_cond_broadcast(&hold.cond);
	pthread_mutex_unlock(&hold.lock);
	/* the readers' bytes are all there, however filled */
	for (int i = 0; i < N; i++) {
		char key[64];
		key_of(i, key, sizeof(key));
		unsigned char *want = make_data(key, 0, LEN);
		cr_assert_eq(memcmp(v[i].data, want, LEN), 0);
		free(want);
		objstore_view_release(&v[i]);
	}
	diskcache_sync(dc);
	struct diskcache_stats st = cstats(dc);
	cr_assert_eq(st.fill_inline, N - FILLQ_MAX,
		     "all but a full queue's fills written by the readers");
	cr_assert_eq(st.fills, N, "every verified view is cached");
	cr_assert_eq(st.entries, N);
	cr_assert_eq(du(root).files, N);
	/* and served from the cache, right */
	uint64_t gets = backend_gets(dc);
	for (int i = 0; i < N; i++)
		expect_obj(dc, i, LEN);
	cr_assert_eq(backend_gets(dc), gets);
}

Test(diskcache, lru_order, .fini = teardown)
{
	struct objstore *m = open_mem("mem://");
	make_root();
	for (int i = 0; i < 8; i++)
		put_backend(m, i, 1000);
	dc = open_cache(m, root, 4000, 0, 0, 0);
	for (int i = 0; i < 4; i++)
		expect_obj(dc, i, 1000); /* 0 1 2 3 */
	expect_obj(dc, 0, 1000);	 /* 1 2 3 0 */
	expect_obj(dc, 4, 1000);	 /* evicts 1 */
	cr_assert_not(contains(dc, 1));
	cr_assert(contains(dc, 0) && contains(dc, 2) && contains(dc, 3) &&
		  contains(dc, 4));
	expect_obj(dc, 2, 1000); /* 3 0 4 2 */
	expect_obj(dc, 5, 1000); /* evicts 3 */
	expect_obj(dc, 6, 1000); /* evicts 0 */
	cr_assert_not(contains(dc, 3));
	cr_assert_not(contains(dc, 0));
	cr_assert(contains(dc, 4) && contains(dc, 2) && contains(dc, 5) &&
		  contains(dc, 6));
	struct diskcache_stats st = cstats(dc);
	cr_assert_eq(st.evictions, 3);
	cr_assert_eq(st.entries, 4);
	cr_assert_eq(st.bytes, 4000);
	struct du d = du(root);
	cr_assert_eq(d.files, 4);
	cr_assert_eq(d.bytes, 4000);
	/* an object larger than the whole cache is never admitted */
	put_backend(m, 7, 5000);
	expect_obj(dc, 7, 5000);
	cr_assert_not(contains(dc, 7));
	cr_assert_eq(cstats(dc).entries, 4);
}

/* Epochs over 20 objects in shuffled order with room for 10. */
static void epochs(unsigned min_age, uint64_t *hits_per_epoch)
{
	struct objstore *m = open_mem("mem://");
	unsigned seed = (unsigned)test_seed();
	int order[20];

	make_root();
	for (int i = 0; i < 20; i++)
		put_backend(m, i, 2000);
	dc = open_cache(m, root, 10 * 2000, min_age, 0, 0);
	for (int i = 0; i < 20; i++)
		order[i] = i;
	for (int e = 0; e < 4; e++) {
		uint64_t before = cstats(dc).hits;
		for (int i = 19; i > 0; i--) {
			int j = (int)(rand_r(&seed) % (unsigned)(i + 1));
			int tmp = order[i];
			order[i] = order[j];
			order[j] = tmp;
		}
		for (int i = 0; i < 20; i++)
			expect_obj(dc, order[i], 2000);
		hits_per_epoch[e] = cstats(dc).hits - before;
	}
}

Test(diskcache, min_age_guard, .fini = teardown)
{
	uint64_t hits[4];
	struct objstore *m = open_mem("mem://");

	make_root();
	for (int i = 0; i < 20; i++)
		put_backend(m, i, 2000);
	dc = open_cache(m, root, 10 * 2000, 3600, 0, 0);
	for (int i = 0; i < 10; i++)
		expect_obj(dc, i, 2000);
	cr_assert_eq(cstats(dc).fill_skips, 0);
	for (int i = 10; i < 20; i++)
		expect_obj(dc, i, 2000); /* full of young entries */
	struct diskcache_stats st = cstats(dc);
	cr_assert_eq(st.fill_skips, 10);
	cr_assert_eq(st.evictions, 0);
	for (int i = 0; i < 20; i++)
		cr_assert_eq(contains(dc, i), i < 10, "object %d", i);
	uint64_t gets = backend_gets(dc);
	for (int i = 0; i < 10; i++)
		expect_obj(dc, i, 2000);
	cr_assert_eq(backend_gets(dc), gets);
	objstore_close(dc);
	dc = NULL;
	teardown();

	/* shuffled epochs: the stable subset hits every time */
	epochs(3600, hits);
	for (int e = 1; e < 4; e++)
		cr_assert_eq(hits[e], 10, "epoch %d: %llu hits", e,
			     (unsigned long long)hits[e]);
	cr_assert_eq(cstats(dc).evictions, 0);
}

Test(diskcache, min_age_zero_is_plain_lru, .fini = teardown)
{
	struct objstore *m = open_mem("mem://");

	make_root();
	for (int i = 0; i < 20; i++)
		put_backend(m, i, 2000);
	dc = open_cache(m, root, 10 * 2000, 0, 0, 0);
	for (int i = 0; i < 20; i++)
		expect_obj(dc, i, 2000);
	for (int i = 0; i < 20; i++)
		cr_assert_eq(contains(dc, i), i >= 10, "object %d", i);
	struct diskcache_stats st = cstats(dc);
	cr_assert_eq(st.evictions, 10);
	cr_assert_eq(st.fill_skips, 0);
	cr_assert_eq(st.fills, 20);
}

/* ---- rebuild ---- */

Test(diskcache, rebuild_after_reopen, .fini = teardown)
{
	struct objstore *m = open_mem("mem://dc-rebuild");
	char path[PATH_MAX];

	make_root();
	for (int i = 0; i < 50; i++)
		put_backend(m, i, 100 + 37 * (size_t)i);
	dc = open_cache(m, root, 64 << 20, 600, 0, 0);
	for (int i = 0; i < 50; i++)
		expect_obj(dc, i, 100 + 37 * (size_t)i);
	struct diskcache_stats before = cstats(dc);
	objstore_close(dc); /* closes m too */

	dc =
	    open_cache(open_mem("mem://dc-rebuild"), root, 64 << 20, 600, 0, 0);
	struct diskcache_stats after = cstats(dc);
	cr_assert_eq(after.entries, before.entries);
	cr_assert_eq(after.bytes, before.bytes);
	for (int i = 0; i < 50; i++) {
		cr_assert(contains(dc, i));
		expect_obj(dc, i, 100 + 37 * (size_t)i);
	}
	cr_assert_eq(backend_gets(dc), 0, "the backend was asked");
	cr_assert_eq(cstats(dc).hits, 50);
	objstore_close(dc);

	/* LRU order comes from mtimes; a smaller limit trims the oldest */
	time_t base = time(NULL) - 100000;
	for (int i = 0; i < 50; i++) {
		struct timespec ts[2] = {{base + 50 - i, 0},
					 {base + 50 - i, 0}};
		entry_path(i, path, sizeof(path));
		cr_assert_eq(utimensat(AT_FDCWD, path, ts, 0), 0);
	}
	uint64_t keep = 0;
	for (int i = 0; i < 10; i++)
		keep += 100 + 37 * (uint64_t)i; /* the newest: 0..9 */
	dc = open_cache(open_mem("mem://dc-rebuild"), root, keep, 600, 0, 0);
	for (int i = 0; i < 50; i++)
		cr_assert_eq(contains(dc, i), i < 10, "object %d", i);
	cr_assert_eq(du(root).bytes, keep);
	cr_assert_eq(cstats(dc).bytes, keep);
}

Test(diskcache, temp_files_removed_at_open, .fini = teardown)
{
	char path[PATH_MAX];

	make_root();
	snprintf(path, sizeof(path), "%s/" NS, root);
	cr_assert_eq(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/" NS "/blocks", root);
	cr_assert_eq(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/" NS "/.tmp.123.4", root);
	write_file(path, "torn", 4);
	snprintf(path, sizeof(path), "%s/" NS "/blocks/.tmp.1.1", root);
	write_file(path, "half a block", 12);
	snprintf(path, sizeof(path), "%s/" NS "/blocks/kept", root);
	write_file(path, "whole", 5);

	dc = open_cache(open_mem("mem://"), root, 1 << 20, 600, 0, 0);
	struct du d = du(root);
	cr_assert_eq(d.temps, 0);
	cr_assert_eq(d.files, 1);
	struct diskcache_stats st = cstats(dc);
	cr_assert_eq(st.entries, 1);
	cr_assert_eq(st.bytes, 5);
	cr_assert(diskcache_contains(dc, "blocks/kept"));
	void *p = NULL;
	size_t n = 0;
	cr_assert_eq(objstore_get(dc, "blocks/kept", 0, 0, &p, &n), 0);
	cr_assert_eq(n, 5);
	cr_assert_eq(memcmp(p, "whole", 5), 0);
	free(p);
}

Test(diskcache, rebuild_is_fast, .fini = teardown)
{
	enum { N = 20000 };
	char path[PATH_MAX];
	struct timespec t0, t1;

	make_root();
	for (int i = 0; i < N; i++) {
		entry_path(i, path, sizeof(path));
		if (i < 7) {
			char dir[PATH_MAX];
			snprintf(dir, sizeof(dir), "%s/" NS, root);
			mkdir(dir, 0700);
			snprintf(dir, sizeof(dir), "%s/" NS "/blocks", root);
			mkdir(dir, 0700);
			snprintf(dir, sizeof(dir), "%s/" NS "/blocks/0", root);
			mkdir(dir, 0700);
			*strrchr(path, '/') = '\0';
			cr_assert_eq(mkdir(path, 0700), 0);
			entry_path(i, path, sizeof(path));
		}
		write_file(path, "0123456789", 10);
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	dc = open_cache(open_mem("mem://"), root, 1 << 30, 600, 0, 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double s = (double)(t1.tv_sec - t0.tv_sec) +
		   (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	cr_assert_eq(cstats(dc).entries, N);
	cr_assert_eq(cstats(dc).bytes, 10ull * N);
	cr_assert_lt(s, 1.0, "indexing %d entries took %.2f s", N, s);
}

/* ---- bad entries ---- */

Test(diskcache, corrupt_entry_evicted_and_refetched, .fini = teardown)
{
	struct objstore *m = open_mem("mem://");
	char path[PATH_MAX], key[64];
	void *p = NULL;
	size_t n = 0;

	make_root();
	put_backend(m, 1, 5000);
	key_of(1, key, sizeof(key));
	dc = open_cache(m, root, 1 << 20, 600, 0, 0);
	expect_obj(dc, 1, 5000);
	cr_assert_eq(backend_gets(dc), 1);

	/* garbage of the same size is served (the chunk store checks) */
	entry_path(1, path, sizeof(path));
	unsigned char junk[5000];
	memset(junk, 0xa5, sizeof(junk));
	write_file(path, junk, sizeof(junk));
	cr_assert_eq(objstore_get(dc, key, 0, 0, &p, &n), 0);
	cr_assert_eq(memcmp(p, junk, n), 0);
	free(p);
	cr_assert_eq(objstore_evict_bad(dc, key), 0);
	cr_assert_not(contains(dc, 1));
	cr_assert_eq(access(path, F_OK), -1, "the bad file is still there");
	cr_assert_eq(cstats(dc).bad_entries, 1);
	expect_obj(dc, 1, 5000);
	cr_assert_eq(backend_gets(dc), 2);
	cr_assert(contains(dc, 1));
	expect_obj(dc, 1, 5000);
	cr_assert_eq(backend_gets(dc), 2, "the repaired entry is not used");
	cr_assert_eq(objstore_evict_bad(dc, "blocks/not-cached"), 0);

	/* a truncated file is noticed by the read itself */
	write_file(path, junk, 100);
	expect_obj(dc, 1, 5000);
	cr_assert_eq(backend_gets(dc), 3);
	cr_assert_eq(cstats(dc).bad_entries, 2);
	expect_obj(dc, 1, 5000);
	cr_assert_eq(backend_gets(dc), 3);

	/* so is a file that vanished */
	cr_assert_eq(unlink(path), 0);
	expect_obj(dc, 1, 5000);
	cr_assert_eq(backend_gets(dc), 4);
	cr_assert(contains(dc, 1));
	cr_assert_eq(du(root).files, 1);
}

Test(diskcache, chunkstore_repairs_corrupt_entry, .fini = teardown)
{
	const uint32_t bs = 64 << 10, len = 50000;
	struct chunkstore_opts co = {.block_size = bs,
				     .compress = CODEC_NONE,
				     .mem_cache_bytes = 1 << 20};
	struct chunkstore *cs;
	char key[96], path[PATH_MAX];
	unsigned char *raw = make_data("chunk", 0, len), *buf = malloc(len);

	make_root();
	dc = open_cache(open_mem("mem://"), root, 16 << 20, 600, 0, 0);
	cr_assert_eq(chunkstore_open(dc, &co, &cs), 0);
	cr_assert_eq(chunkstore_put_block(cs, 77, 0, raw, len), 0);
	cr_assert_eq(chunkstore_read(cs, 77, len, 0, len, buf), 0);
	cr_assert_eq(memcmp(buf, raw, len), 0);
	chunkstore_close(cs);
	diskcache_sync(dc); /* the fill runs on the filler thread */
	chunkstore_key(77, 0, len, key, sizeof(key));
	cr_assert(diskcache_contains(dc, key));
	uint64_t gets = backend_gets(dc);

	/* flip bytes in the middle of the cached block */
	snprintf(path, sizeof(path), "%s/" NS "/%s", root, key);
	int fd = open(path, O_WRONLY);
	cr_assert_geq(fd, 0);
	cr_assert_eq(pwrite(fd, "GARBAGE!", 8, 20000), 8);
	close(fd);

	cr_assert_eq(chunkstore_open(dc, &co, &cs), 0); /* no memory cache */
	memset(buf, 0, len);
	cr_assert_eq(chunkstore_read(cs, 77, len, 0, len, buf), 0);
	cr_assert_eq(memcmp(buf, raw, len), 0, "wrong bytes after repair");
	struct chunkstore_stats cst;
	chunkstore_get_stats(cs, &cst);
	cr_assert_eq(cst.corrupt, 1);
	chunkstore_close(cs);
	diskcache_sync(dc);
	cr_assert_eq(cstats(dc).bad_entries, 1);
	cr_assert_eq(backend_gets(dc), gets + 1);
	cr_assert(diskcache_contains(dc, key));

	/* the entry is good again: a fresh chunk store hits it */
	void *want = NULL, *have = NULL;
	size_t wn = 0, hn = 0;
	cr_assert_eq(objstore_get(diskcache_backend(dc), key, 0, 0, &want, &wn),
		     0);
	cr_assert_eq(objstore_get(dc, key, 0, 0, &have, &hn), 0);
	cr_assert_eq(hn, wn);
	cr_assert_eq(memcmp(have, want, wn), 0);
	free(want);
	free(have);
	cr_assert_eq(chunkstore_open(dc, &co, &cs), 0);
	cr_assert_eq(chunkstore_read(cs, 77, len, 0, len, buf), 0);
	cr_assert_eq(memcmp(buf, raw, len), 0);
	chunkstore_get_stats(cs, &cst);
	cr_assert_eq(cst.corrupt, 0);
	chunkstore_close(cs);
	free(raw);
	free(buf);
}

/* `granary warmup --evict` drops healthy entries by request (the
 * "granary.evict" xattr calls objstore_evict()): they count as evicted,
 * not as bad; an entry that fails its checksum still counts as bad. */
Test(diskcache, evict_by_request_is_not_bad, .fini = teardown)
{
	const uint32_t bs = 64 << 10, len = 30000;
	const int n = 5;
	struct chunkstore_opts co = {
	    .block_size = bs, .compress = CODEC_NONE, .mem_cache_bytes = 0};
	struct chunkstore *cs;
	char key[96], path[PATH_MAX];
	unsigned char *raw = make_data("evict", 0, len), *buf = malloc(len);

	make_root();
	dc = open_cache(open_mem("mem://"), root, 16 << 20, 600, 0, 0);
	cr_assert_eq(chunkstore_open(dc, &co, &cs), 0);
	for (int i = 0; i < n; i++) {
		cr_assert_eq(chunkstore_put_block(cs, 100 + i, 0, raw, len), 0);
		cr_assert_eq(chunkstore_read(cs, 100 + i, len, 0, len, buf), 0);
	}
	chunkstore_close(cs);
	diskcache_sync(dc);
	cr_assert_eq(cstats(dc).entries, (uint64_t)n);

	/* healthy entries dropped by request: evicted, not one is bad */
	for (int i = 0; i < n - 1; i++) {
		chunkstore_key(100 + i, 0, len, key, sizeof(key));
		cr_assert_eq(objstore_evict(dc, key), 0);
		cr_assert_not(diskcache_contains(dc, key));
	}
	cr_assert_eq(objstore_evict(dc, "blocks/not-cached"), 0);
	struct diskcache_stats st = cstats(dc);
	cr_assert_eq(st.bad_entries, 0, "%llu healthy entries counted as bad",
		     (unsigned long long)st.bad_entries);
	cr_assert_eq(st.evicted, (uint64_t)n - 1);
	cr_assert_eq(st.evictions, 0);
	cr_assert_eq(st.entries, 1);

	/* the last one corrupted: the chunk store's read finds it bad */
	chunkstore_key(100 + n - 1, 0, len, key, sizeof(key));
	snprintf(path, sizeof(path), "%s/" NS "/%s", root, key);
	int fd = open(path, O_WRONLY);
	cr_assert_geq(fd, 0);
	cr_assert_eq(pwrite(fd, "GARBAGE!", 8, 10000), 8);
	close(fd);
	cr_assert_eq(chunkstore_open(dc, &co, &cs), 0);
	cr_assert_eq(chunkstore_read(cs, 100 + n - 1, len, 0, len, buf), 0);
	cr_assert_eq(memcmp(buf, raw, len), 0, "wrong bytes after repair");
	chunkstore_close(cs);
	diskcache_sync(dc);
	st = cstats(dc);
	cr_assert_eq(st.bad_entries, 1);
	cr_assert_eq(st.evicted, (uint64_t)n - 1,
		     "a bad entry counted as evicted");
	free(raw);
	free(buf);
}

/* ---- full disks ---- */

Test(diskcache, full_disk_never_fails_reads, .fini = teardown)
{
	struct objstore *m = open_mem("mem://");

	mount_tmpfs("2m");
	for (int i = 0; i < 60; i++)
		put_backend(m, i, 64 << 10);
	dc = open_cache(m, root, 64 << 20, 0, 0, 0);
	for (int round = 0; round < 2; round++)
		for (int i = 0; i < 60; i++)
			expect_obj(dc, i, 64 << 10);
	struct diskcache_stats st = cstats(dc);
	struct du d = du(root);
	cr_assert_gt(st.fill_skips, 0);
	cr_assert_gt(st.entries, 0);
	cr_assert_gt(st.hits, 0);
	cr_assert_eq(d.temps, 0, "temp files left");
	cr_assert_eq(d.files, st.entries);
	cr_assert_eq(d.bytes, st.bytes);
	/* what is cached is whole */
	for (int i = 0; i < 60; i++)
		if (contains(dc, i))
			expect_obj(dc, i, 64 << 10);
}

Test(diskcache, free_ratio_keeps_half_free, .fini = teardown)
{
	struct objstore *m = open_mem("mem://");
	struct statvfs sv;

	mount_tmpfs("4m");
	for (int i = 0; i < 100; i++)
		put_backend(m, i, 64 << 10);
	dc = open_cache(m, root, 64 << 20, 0, 0.5, 0);
	for (int i = 0; i < 100; i++) {
		expect_obj(dc, i, 64 << 10);
		cr_assert_eq(statvfs(root, &sv), 0);
		cr_assert_geq((double)sv.f_bavail, 0.5 * (double)sv.f_blocks,
			      "after %d: %llu of %llu blocks free", i,
			      (unsigned long long)sv.f_bavail,
			      (unsigned long long)sv.f_blocks);
	}
	struct diskcache_stats st = cstats(dc);
	cr_assert_gt(st.entries, 20, "the cache stayed nearly empty");
	cr_assert_gt(st.evictions, 0);
	cr_assert_eq(du(root).temps, 0);
	/* the newest are the ones kept */
	cr_assert(contains(dc, 99));
	cr_assert_not(contains(dc, 0));
}

/* ---- writes, deletes, dirs ---- */

Test(diskcache, cache_writes, .fini = teardown)
{
	char key[64];
	void *p = NULL;
	size_t n = 0;

	make_root();
	dc = open_cache(open_mem("mem://"), root, 1 << 20, 600, 0, 1);
	key_of(1, key, sizeof(key));
	unsigned char *v0 = make_data(key, 0, 3000),
		      *v1 = make_data(key, 1, 2000);
	cr_assert_eq(objstore_put(dc, key, v0, 3000), 0);
	cr_assert(diskcache_contains(dc, key));
	expect_obj(dc, 1, 3000);
	cr_assert_eq(backend_gets(dc), 0);
	cr_assert_eq(cstats(dc).fills, 1);

	/* a put replaces the cached copy */
	cr_assert_eq(objstore_put(dc, key, v1, 2000), 0);
	cr_assert_eq(objstore_get(dc, key, 0, 0, &p, &n), 0);
	cr_assert_eq(n, 2000);
	cr_assert_eq(memcmp(p, v1, 2000), 0);
	free(p);
	cr_assert_eq(backend_gets(dc), 0);
	cr_assert_eq(du(root).bytes, 2000);

	/* without cache_writes a put only drops what was cached */
	objstore_close(dc);
	dc = open_cache(open_mem("mem://"), root, 1 << 20, 600, 0, 0);
	cr_assert(diskcache_contains(dc, key)); /* from the last run */
	cr_assert_eq(objstore_put(dc, key, v0, 3000), 0);
	cr_assert_not(diskcache_contains(dc, key));
	expect_obj(dc, 1, 3000);
	cr_assert_eq(backend_gets(dc), 1);
	free(v0);
	free(v1);
}

Test(diskcache, del_drops_entry, .fini = teardown)
{
	struct objstore *m = open_mem("mem://");
	char key[64], path[PATH_MAX];
	void *p = NULL;
	size_t n = 0;

	make_root();
	put_backend(m, 2, 4000);
	dc = open_cache(m, root, 1 << 20, 600, 0, 0);
	expect_obj(dc, 2, 4000);
	key_of(2, key, sizeof(key));
	entry_path(2, path, sizeof(path));
	cr_assert_eq(access(path, F_OK), 0);
	cr_assert_eq(objstore_del(dc, key), 0);
	cr_assert_not(diskcache_contains(dc, key));
	cr_assert_eq(access(path, F_OK), -1);
	cr_assert_eq(objstore_get(dc, key, 0, 0, &p, &n), ENOENT);
	cr_assert_eq(objstore_del(dc, key), 0);
	struct diskcache_stats st = cstats(dc);
	cr_assert_eq(st.entries, 0);
	cr_assert_eq(st.bytes, 0);
}

Test(diskcache, two_dirs, .fini = teardown)
{
	struct objstore *m = open_mem("mem://");
	char dirs[160], a[80], b[80], path[PATH_MAX];

	make_root();
	snprintf(a, sizeof(a), "%s/nvme0", root);
	snprintf(b, sizeof(b), "%s/nvme1/sub", root); /* created too */
	snprintf(dirs, sizeof(dirs), "%s:%s", a, b);
	for (int i = 0; i < 64; i++)
		put_backend(m, i, 1000);
	dc = open_cache(m, dirs, 1 << 20, 600, 0, 0);
	for (int i = 0; i < 64; i++)
		expect_obj(dc, i, 1000);
	struct du da = du(a), db = du(b);
	cr_assert_gt(da.files, 10);
	cr_assert_gt(db.files, 10);
	cr_assert_eq(da.files + db.files, 64);
	for (int i = 0; i < 64; i++) {
		char key[64];
		key_of(i, key, sizeof(key));
		const char *d = XXH3_64bits(key, strlen(key)) % 2 ? b : a;
		snprintf(path, sizeof(path), "%s/" NS "/%s", d, key);
		cr_assert_eq(access(path, F_OK), 0, "'%s' missing", path);
	}
	objstore_close(dc);
	dc = open_cache(open_mem("mem://"), dirs, 1 << 20, 600, 0, 0);
	cr_assert_eq(cstats(dc).entries, 64);
	cr_assert_eq(cstats(dc).bytes, 64000);
}

/* ---- the namespaces of before a restore ---- */

static int exists(const char *dir, const char *name)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return access(p, F_OK) == 0;
}

/* A namespace a restore left behind is renamed aside at once (never
 * opened again) and removed in the background, with what an earlier sweep
 * left; the kept namespace, another volume's and a name that only starts
 * like the prefix stay. */
Test(diskcache, sweep_old_namespaces, .fini = teardown)
{
	char a[80], b[80], dirs[170], p[PATH_MAX];
	const char *old[] = {NS, NS ".0123", ".sweep-" NS ".77"};
	const char *stay[] = {NS ".abcd", "vol-2", NS "-x", "vol-2.abcd"};

	make_root();
	snprintf(a, sizeof(a), "%s/nvme0", root);
	snprintf(b, sizeof(b), "%s/nvme1", root);
	snprintf(dirs, sizeof(dirs), "%s:%s", a, b);
	cr_assert_eq(mkdir(a, 0700), 0);
	cr_assert_eq(mkdir(b, 0700), 0);
	for (int d = 0; d < 2; d++)
		for (size_t i = 0; i < 3 + 4; i++) {
			const char *n = i < 3 ? old[i] : stay[i - 3];
			snprintf(p, sizeof(p), "%s/%s", d ? b : a, n);
			cr_assert_eq(mkdir(p, 0700), 0);
			for (int f = 0; f < 50; f++) {
				char fp[PATH_MAX + 64];
				snprintf(fp, sizeof(fp), "%s/sub%d", p, f % 5);
				mkdir(fp, 0700);
				snprintf(fp, sizeof(fp), "%s/sub%d/k%d", p,
					 f % 5, f);
				int fd = open(fp, O_CREAT | O_WRONLY, 0600);
				cr_assert_geq(fd, 0);
				close(fd);
			}
		}
	struct diskcache_sweep *sw = NULL;
	cr_assert_eq(diskcache_sweep_start(dirs, NS, NS ".abcd", &sw), 0);
	cr_assert_not_null(sw);
	for (int d = 0; d < 2; d++) {
		const char *dir = d ? b : a;
		cr_assert(!exists(dir, NS), "%s/" NS " is still there", dir);
		cr_assert(!exists(dir, NS ".0123"));
		for (size_t i = 0; i < 4; i++)
			cr_assert(exists(dir, stay[i]), "%s/%s went", dir,
				  stay[i]);
	}
	/* the job removes the renamed ones: generous, it takes ms */
	for (int t = 0; t < 1000; t++) {
		int left = 0;
		for (int d = 0; d < 2; d++)
			left += exists(d ? b : a, ".sweep-" NS) +
				exists(d ? b : a, ".sweep-" NS ".0123") +
				exists(d ? b : a, ".sweep-" NS ".77");
		if (!left)
			break;
		usleep(10000);
	}
	for (int d = 0; d < 2; d++) {
		const char *dir = d ? b : a;
		cr_assert(!exists(dir, ".sweep-" NS));
		cr_assert(!exists(dir, ".sweep-" NS ".0123"));
		cr_assert(!exists(dir, ".sweep-" NS ".77"));
		for (size_t i = 0; i < 4; i++)
			cr_assert(exists(dir, stay[i]));
	}
	diskcache_sweep_stop(sw);
	/* nothing left to sweep: no job */
	cr_assert_eq(diskcache_sweep_start(dirs, NS, NS ".abcd", &sw), 0);
	cr_assert_null(sw);
}

/* ---- randomized, against a shadow copy ---- */

Test(diskcache, random_ops_vs_shadow, .fini = teardown)
{
	enum { KEYS = 40, OPS = 3000 };
	struct objstore *m = open_mem("mem://dc-random");
	int version[KEYS]; /* -1: absent */
	size_t lens[KEYS];
	unsigned seed = (unsigned)test_seed();

	make_root();
	for (int i = 0; i < KEYS; i++)
		version[i] = -1;
	dc = open_cache(m, root, 200 << 10, 0, 0, 1);
	for (int op = 0; op < OPS; op++) {
		int i = (int)(rand_r(&seed) % KEYS),
		    what = (int)(rand_r(&seed) % 100);
		char key[64];
		key_of(i, key, sizeof(key));
		if (what < 15) {
			int v = version[i] + 1 + (int)(rand_r(&seed) % 3);
			size_t len = rand_r(&seed) % (20 << 10);
			unsigned char *d = make_data(key, v, len);
			cr_assert_eq(objstore_put(dc, key, d, len), 0);
			free(d);
			version[i] = v;
			lens[i] = len;
		} else if (what < 20) {
			cr_assert_eq(objstore_del(dc, key), 0);
			version[i] = -1;
		} else if (what < 23) {
			cr_assert_eq(objstore_evict(dc, key), 0);
		} else if (what < 24) {
			objstore_close(dc);
			dc = open_cache(open_mem("mem://dc-random"), root,
					200 << 10, 0, 0, rand_r(&seed) % 2);
		} else {
			int whole = what < 70;
			uint64_t off = whole ? 0 : rand_r(&seed) % (21 << 10);
			size_t len = whole ? 0 : rand_r(&seed) % (8 << 10);
			void *p = NULL;
			size_t n = 0;
			int err = objstore_get(dc, key, off, len, &p, &n);
			if (version[i] < 0) {
				cr_assert_eq(err, ENOENT, "op %d: key %d", op,
					     i);
				continue;
			}
			cr_assert_eq(err, 0, "op %d: key %d", op, i);
			size_t exp = off < lens[i] ? lens[i] - off : 0;
			if (len && len < exp)
				exp = len;
			unsigned char *want =
			    make_data(key, version[i], lens[i]);
			cr_assert_eq(n, exp, "op %d: key %d [%llu, +%zu)", op,
				     i, (unsigned long long)off, len);
			cr_assert_eq(memcmp(p, want + off, n), 0,
				     "op %d: key %d bytes differ", op, i);
			free(want);
			free(p);
		}
	}
	struct diskcache_stats st = cstats(dc);
	struct du d = du(root);
	cr_assert_leq(st.bytes, 200 << 10);
	cr_assert_eq(d.bytes, st.bytes);
	cr_assert_eq(d.files, st.entries);
	cr_assert_eq(d.temps, 0);
}

/* ---- packs: ranged gets of one object fetch it whole, once ---- */

struct pack_reader {
	pthread_t t;
	struct objstore *c;
	const char *key;
	const unsigned char *want;
	size_t len;
	int i;
	pthread_barrier_t *b;
	int bad;
};

static void *pack_read(void *arg)
{
	struct pack_reader *r = arg;
	size_t off = (size_t)r->i * (r->len / 8), n = r->len / 8;
	void *got = NULL;
	size_t gn = 0;

	pthread_barrier_wait(r->b);
	r->bad = objstore_get(r->c, r->key, off, n, &got, &gn) || gn != n ||
		 memcmp(got, r->want + off, n);
	free(got);
	return NULL;
}

/* Readers of the frames of one pack at once: one whole fetch from the
 * store, also for a reader that misses just before the fill lands and
 * asks just after (a hit then, not a ranged get passed through). */
Test(diskcache, pack_ranges_fetch_once, .fini = teardown, .timeout = 120)
{
	struct objstore *m = open_mem("mem://");
	struct diskcache_opts o = {.dirs = NULL,
				   .ns = NS,
				   .size = 1ull << 30,
				   .free_ratio = 0.01,
				   .min_age = 600,
				   .whole_prefix = "p/",
				   .whole_est = 1 << 20};
	enum { PACKS = 300, LEN = 64 << 10 };
	char key[32];

	make_root();
	o.dirs = root;
	cr_assert_eq(diskcache_open(m, &o, &dc), 0);
	for (int p = 0; p < PACKS; p++) {
		struct pack_reader rs[8];
		pthread_barrier_t b;
		snprintf(key, sizeof(key), "p/%d", p);
		unsigned char *d = make_data(key, 0, LEN);
		cr_assert_eq(objstore_put(m, key, d, LEN), 0);
		uint64_t g0 = backend_gets(dc);
		pthread_barrier_init(&b, NULL, 8);
		for (int i = 0; i < 8; i++) {
			rs[i] = (struct pack_reader){.c = dc,
						     .key = key,
						     .want = d,
						     .len = LEN,
						     .i = i,
						     .b = &b};
			pthread_create(&rs[i].t, NULL, pack_read, &rs[i]);
		}
		for (int i = 0; i < 8; i++) {
			pthread_join(rs[i].t, NULL);
			cr_assert_eq(rs[i].bad, 0);
		}
		pthread_barrier_destroy(&b);
		cr_assert_eq(backend_gets(dc) - g0, 1,
			     "pack %d: %llu gets from the store", p,
			     (unsigned long long)(backend_gets(dc) - g0));
		free(d);
	}
}

static void *whole_read(void *arg)
{
	struct pack_reader *r = arg;
	void *got = NULL;
	size_t gn = 0;

	pthread_barrier_wait(r->b);
	r->bad = objstore_get(r->c, r->key, 0, 0, &got, &gn) || gn != r->len ||
		 memcmp(got, r->want, r->len);
	free(got);
	return NULL;
}

/* A whole get (a plan's fetch ahead) and readers of the pack's frames at
 * once: the readers take their ranges from the whole fetch, one get from
 * the store (they fetched their ranges too: epoch 1 with a plan read 1.16
 * bytes a stored byte). */
Test(diskcache, whole_get_joined_by_ranges, .fini = teardown, .timeout = 120)
{
	struct objstore *m = open_mem("mem://");
	struct diskcache_opts o = {.dirs = NULL,
				   .ns = NS,
				   .size = 1ull << 30,
				   .free_ratio = 0.01,
				   .min_age = 600,
				   .whole_prefix = "p/",
				   .whole_est = 1 << 20};
	enum { PACKS = 300, LEN = 256 << 10 };
	char key[32];
	int more = 0;

	make_root();
	o.dirs = root;
	cr_assert_eq(diskcache_open(m, &o, &dc), 0);
	for (int p = 0; p < PACKS; p++) {
		struct pack_reader rs[8];
		pthread_barrier_t b;
		snprintf(key, sizeof(key), "p/%d", p);
		unsigned char *d = make_data(key, 0, LEN);
		cr_assert_eq(objstore_put(m, key, d, LEN), 0);
		uint64_t g0 = backend_gets(dc);
		pthread_barrier_init(&b, NULL, 8);
		for (int i = 0; i < 8; i++) {
			rs[i] = (struct pack_reader){.c = dc,
						     .key = key,
						     .want = d,
						     .len = LEN,
						     .i = i,
						     .b = &b};
			pthread_create(&rs[i].t, NULL,
				       i ? pack_read : whole_read, &rs[i]);
		}
		for (int i = 0; i < 8; i++) {
			pthread_join(rs[i].t, NULL);
			cr_assert_eq(rs[i].bad, 0);
		}
		pthread_barrier_destroy(&b);
		more += backend_gets(dc) - g0 > 1;
		free(d);
	}
	cr_assert_eq(more, 0, "%d packs of %d were got more than once", more,
		     PACKS);
}
