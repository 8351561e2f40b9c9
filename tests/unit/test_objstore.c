/*
 * test_objstore.c - one behaviour suite run against every backend (mem://,
 * a file:// pool of three directories, and s3 at $GRANARY_TEST_S3), then
 * what only one backend can get wrong: URL parsing, credentials and bucket
 * errors, unreachable servers, disk full and crash leftovers.
 */
#include "tests/unit/pagecache.h"
#include "lib/fsutil.h"
#include "fs/store/objstore.h"
#include "fs/store/owner.h"
#include "lib/log.h"

#include <criterion/criterion.h>
#include <linux/magic.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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

static char tmp_root[64]; /* per test process; removed at the end */

static void rm_rf(const char *path)
{
	char cmd[PATH_MAX + 32];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
	if (system(cmd) != 0)
		fprintf(stderr, "warning: could not remove %s\n", path);
}

static const char *make_tmp_root(void)
{
	if (!tmp_root[0]) {
		snprintf(tmp_root, sizeof(tmp_root),
			 "/tmp/granary-objstore.XXXXXX");
		cr_assert_not_null(mkdtemp(tmp_root));
	}
	return tmp_root;
}

static void cleanup_tmp(void)
{
	if (tmp_root[0])
		rm_rf(tmp_root);
	tmp_root[0] = '\0';
}

static char mounted_dir[PATH_MAX]; /* a tmpfs to unmount after the test */
static pid_t private_pid;	   /* a private s3rver to kill */
static void mute_stop(void);	   /* a silent listener to stop */
static int private_s3rver(int strict);

/* Runs after every test, passed or failed: nothing outlives a test. */
static void test_fini(void)
{
	if (private_pid > 0) {
		kill(private_pid, SIGTERM);
		waitpid(private_pid, NULL, 0);
		private_pid = 0;
	}
	mute_stop();
	if (mounted_dir[0])
		umount2(mounted_dir, MNT_DETACH);
	mounted_dir[0] = '\0';
	cleanup_tmp();
}

TestSuite(objstore, .fini = test_fini);

/* The URL each backend is tested at; NULL (after cr_skip) when absent. */
static void backend_url(const char *kind, char *url, size_t n)
{
	if (!strcmp(kind, "mem")) {
		snprintf(url, n, "mem://");
	} else if (!strcmp(kind, "file")) {
		const char *r = make_tmp_root();
		snprintf(url, n, "file://%s/d0:%s/d1:%s/d2", r, r, r);
	} else {
		/* s3: s3rver, V4 (taken unchecked); s3v2: s3rver, V2;
		 * s3v4: the V4-verifying front (svc_start_s3v4) */
		const char *env = strcmp(kind, "s3v4") ? "GRANARY_TEST_S3"
						       : "GRANARY_TEST_S3V4";
		const char *s3 = getenv(env);
		if (!s3 || !*s3) {
			fprintf(stderr,
				"test_objstore: %s is not set: %s case "
				"skipped (run through tests/run-unit.sh)\n",
				env, kind);
			cr_skip_test("%s not set (use tests/run-unit.sh)", env);
		}
		snprintf(url, n, "%s/granary-test/unit-%d%s", s3, (int)getpid(),
			 strcmp(kind, "s3v2") ? "" : "?sig=v2");
	}
}

/* The credentials the V4 front accepts (it knows no others). */
static struct objstore_creds v4_creds(void)
{
	struct objstore_creds c = {getenv("GRANARY_TEST_S3V4_ACCESS_KEY"),
				   getenv("GRANARY_TEST_S3V4_SECRET_KEY"),
				   NULL};
	return c;
}

static struct objstore *open_backend(const char *kind)
{
	char url[PATH_MAX * 3 + 64];
	struct objstore *s = NULL;
	struct objstore_creds v4 = v4_creds();

	backend_url(kind, url, sizeof(url));
	int err = objstore_open(url, strcmp(kind, "s3v4") ? NULL : &v4, &s);
	cr_assert_eq(err, 0, "open '%s': %s", url, gr_strerror(err));
	return s;
}

static void close_backend(struct objstore *s)
{
	objstore_close(s);
	cleanup_tmp();
}

/* get and compare against want[0..want_len) */
static void expect_get(struct objstore *s, const char *key, uint64_t off,
		       size_t len, const void *want, size_t want_len)
{
	void *data = NULL;
	size_t got = 99;
	int err = objstore_get(s, key, off, len, &data, &got);

	cr_assert_eq(err, 0, "get '%s' @%llu+%zu: %s", key,
		     (unsigned long long)off, len, gr_strerror(err));
	cr_assert_not_null(data);
	cr_assert_eq(got, want_len, "get '%s' @%llu+%zu: %zu bytes, want %zu",
		     key, (unsigned long long)off, len, got, want_len);
	if (want_len)
		cr_assert_eq(memcmp(data, want, want_len), 0,
			     "get '%s' @%llu+%zu: wrong bytes", key,
			     (unsigned long long)off, len);
	free(data);
}

static void expect_missing(struct objstore *s, const char *key)
{
	void *data = (void *)1;
	size_t got = 99;
	uint64_t size;

	cr_assert_eq(objstore_get(s, key, 0, 0, &data, &got), ENOENT,
		     "get of missing '%s' is not ENOENT", key);
	cr_assert_null(data);
	cr_assert_eq(objstore_head(s, key, &size), ENOENT);
}

/* ---- the behaviour suite ---- */

static void suite_basic(struct objstore *s)
{
	const char *msg = "hello, granary world";
	size_t mlen = strlen(msg);
	uint64_t size = 0;

	cr_assert_eq(objstore_probe(s), 0);
	expect_missing(s, "basic");
	cr_assert_eq(objstore_put(s, "basic", msg, mlen), 0);
	expect_get(s, "basic", 0, 0, msg, mlen);
	cr_assert_eq(objstore_head(s, "basic", &size), 0);
	cr_assert_eq(size, mlen);

	/* ranges: middle, to the end, short at the end, at/past the end */
	expect_get(s, "basic", 7, 7, msg + 7, 7);
	expect_get(s, "basic", 7, 0, msg + 7, mlen - 7);
	expect_get(s, "basic", mlen - 3, 100, msg + mlen - 3, 3);
	expect_get(s, "basic", mlen, 0, NULL, 0);
	expect_get(s, "basic", mlen + 10, 5, NULL, 0);
	expect_get(s, "basic", 0, 1, msg, 1);

	/* overwrite with something shorter: no old tail survives */
	cr_assert_eq(objstore_put(s, "basic", "xyz", 3), 0);
	expect_get(s, "basic", 0, 0, "xyz", 3);
	cr_assert_eq(objstore_head(s, "basic", &size), 0);
	cr_assert_eq(size, 3);

	/* empty object */
	cr_assert_eq(objstore_put(s, "empty", NULL, 0), 0);
	cr_assert_eq(objstore_head(s, "empty", &size), 0);
	cr_assert_eq(size, 0);
	expect_get(s, "empty", 0, 0, NULL, 0);

	/* delete, and delete again */
	cr_assert_eq(objstore_del(s, "basic"), 0);
	expect_missing(s, "basic");
	cr_assert_eq(objstore_del(s, "basic"), 0);
	cr_assert_eq(objstore_del(s, "never-was"), 0);
	cr_assert_eq(objstore_del(s, "empty"), 0);
}

static void suite_large(struct objstore *s)
{
	size_t len = 8 << 20;
	unsigned char *buf = malloc(len);

	fill(buf, len, 42);
	cr_assert_eq(objstore_put(s, "large/obj", buf, len), 0);
	expect_get(s, "large/obj", 0, 0, buf, len);
	expect_get(s, "large/obj", 5 << 20, 1 << 20, buf + (5 << 20), 1 << 20);
	expect_get(s, "large/obj", len - 10, 0, buf + len - 10, 10);
	uint64_t size;
	cr_assert_eq(objstore_head(s, "large/obj", &size), 0);
	cr_assert_eq(size, len);
	cr_assert_eq(objstore_del(s, "large/obj"), 0);
	free(buf);
}

static void suite_keys(struct objstore *s)
{
	static const char *keys[] = {"a/b/c",
				     "a/b/d",
				     "a/x",
				     "top",
				     "deep/1/2/3/4/5/6/leaf",
				     ".dotfile",
				     "punct/a-b_c.d+e=f,g@h~i:j"};
	static const char *bad[] = {
	    "",	     "/abs",  "a/../b",	    "..",	".",	       "a//b",
	    "a/",    "a/./b", "with space", "tab\tkey", "caf\xc3\xa9", "nl\n",
	    "bang!", "q?x",   "h#x",	    "p%20"};
	size_t n = sizeof(keys) / sizeof(keys[0]);

	for (size_t i = 0; i < n; i++)
		cr_assert_eq(objstore_put(s, keys[i], keys[i], strlen(keys[i])),
			     0, "put '%s'", keys[i]);
	for (size_t i = 0; i < n; i++)
		expect_get(s, keys[i], 0, 0, keys[i], strlen(keys[i]));
	cr_assert_eq(objstore_del(s, "a/b/c"), 0);
	expect_missing(s, "a/b/c");
	expect_get(s, "a/b/d", 0, 0, "a/b/d", 5);
	/* a prefix of a key is not an object */
	expect_missing(s, "a/b");
	expect_missing(s, "deep/1");

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		void *d;
		size_t got;
		uint64_t size;
		cr_assert_eq(objstore_put(s, bad[i], "x", 1), EINVAL,
			     "put of bad key '%s' accepted", bad[i]);
		cr_assert_eq(objstore_get(s, bad[i], 0, 0, &d, &got), EINVAL);
		cr_assert_eq(objstore_head(s, bad[i], &size), EINVAL);
		cr_assert_eq(objstore_del(s, bad[i]), EINVAL);
	}
	char longkey[1100];
	memset(longkey, 'k', sizeof(longkey) - 1);
	longkey[sizeof(longkey) - 1] = '\0';
	cr_assert_eq(objstore_put(s, longkey, "x", 1), EINVAL);

	for (size_t i = 0; i < n; i++)
		cr_assert_eq(objstore_del(s, keys[i]), 0);
}

static unsigned char conc_shared[1000]; /* written before threads start */

struct conc_arg {
	struct objstore *s;
	int id;
	int failures;
};

#define CONC_THREADS 8
#define CONC_ROUNDS  25

static void *conc_worker(void *p)
{
	struct conc_arg *a = p;
	unsigned char buf[20000];
	char key[64];

	for (int r = 0; r < CONC_ROUNDS; r++) {
		snprintf(key, sizeof(key), "conc/t%d/k%d", a->id, r % 5);
		size_t len = 1000 + (size_t)(a->id * 997 + r * 131) % 19000;
		fill(buf, len, (uint64_t)(a->id * 1000 + r));
		int err = objstore_put(a->s, key, buf, len);
		if (err) {
			fprintf(stderr, "thread %d: put '%s': %s\n", a->id, key,
				gr_strerror(err));
			a->failures++;
			continue;
		}
		void *d = NULL;
		size_t got = 0;
		err = objstore_get(a->s, key, 0, 0, &d, &got);
		if (err || got != len || memcmp(d, buf, len)) {
			fprintf(stderr,
				"thread %d: get '%s' after put: %s, %zu bytes "
				"of %zu%s\n",
				a->id, key, err ? gr_strerror(err) : "ok", got,
				len,
				!err && got == len ? ", different bytes" : "");
			a->failures++;
		}
		free(d);
		d = NULL;
		/* everyone reads the shared object, which never changes */
		err = objstore_get(a->s, "conc/shared", 100, 50, &d, &got);
		if (err || got != 50 || memcmp(d, conc_shared + 100, 50)) {
			fprintf(stderr,
				"thread %d: get of the shared object: %s\n",
				a->id, err ? gr_strerror(err) : "wrong bytes");
			a->failures++;
		}
		free(d);
	}
	return NULL;
}

static void suite_concurrent(struct objstore *s)
{
	pthread_t th[CONC_THREADS];
	struct conc_arg args[CONC_THREADS];
	unsigned char *shared = conc_shared;

	fill(shared, sizeof(conc_shared), 7);
	cr_assert_eq(
	    objstore_put(s, "conc/shared", shared, sizeof(conc_shared)), 0);
	for (int i = 0; i < CONC_THREADS; i++) {
		args[i] = (struct conc_arg){s, i, 0};
		cr_assert_eq(
		    pthread_create(&th[i], NULL, conc_worker, &args[i]), 0);
	}
	/* every thread joined before any assertion: a failed one leaves
	 * this frame, and threads still running would go on with its
	 * args[] (their store, id and counts) reused by other frames */
	for (int i = 0; i < CONC_THREADS; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < CONC_THREADS; i++)
		cr_assert_eq(args[i].failures, 0, "thread %d: %d failures", i,
			     args[i].failures);
	expect_get(s, "conc/shared", 100, 50, shared + 100, 50);
	for (int i = 0; i < CONC_THREADS; i++) {
		for (int k = 0; k < 5; k++) {
			char key[64];
			snprintf(key, sizeof(key), "conc/t%d/k%d", i, k);
			cr_assert_eq(objstore_del(s, key), 0);
		}
	}
	cr_assert_eq(objstore_del(s, "conc/shared"), 0);
}

/* ---- randomized test against a shadow copy ---- */

#define SHADOW_KEYS 200

struct shadow {
	unsigned char *data[SHADOW_KEYS]; /* NULL: absent */
	size_t len[SHADOW_KEYS];
};

struct listed {
	struct shadow *sh;
	int seen[SHADOW_KEYS];
	int count;
	int bad;
};

static int list_cb(void *arg, const char *key, uint64_t size, int64_t mtime)
{
	(void)mtime;
	struct listed *l = arg;
	int i;

	if (sscanf(key, "rnd/%d", &i) != 1 || i < 0 || i >= SHADOW_KEYS) {
		l->bad++;
		return 0;
	}
	if (!l->sh->data[i] || l->sh->len[i] != size || l->seen[i])
		l->bad++;
	l->seen[i] = 1;
	l->count++;
	return 0;
}

static void suite_random(struct objstore *s, int ops, int check_list)
{
	const char *env = getenv("GRANARY_SEED");
	uint64_t seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL);
	uint64_t st = seed;
	struct shadow *sh = calloc(1, sizeof(*sh));
	char key[32];

	fprintf(stderr,
		"test_objstore: random suite seed %llu (rerun with "
		"GRANARY_SEED=%llu)\n",
		(unsigned long long)seed, (unsigned long long)seed);
	for (int op = 0; op < ops; op++) {
		int i = (int)(rnd_next(&st) % SHADOW_KEYS);
		int what = (int)(rnd_next(&st) % 10);
		snprintf(key, sizeof(key), "rnd/%d", i);
		if (what < 4) { /* put or overwrite */
			size_t len = rnd_next(&st) % 3 ? rnd_next(&st) % 4096
						       : rnd_next(&st) % 150000;
			unsigned char *buf = malloc(len ? len : 1);
			fill(buf, len, rnd_next(&st));
			cr_assert_eq(objstore_put(s, key, buf, len), 0,
				     "op %d: put %s (seed %llu)", op, key,
				     (unsigned long long)seed);
			free(sh->data[i]);
			sh->data[i] = buf;
			sh->len[i] = len;
		} else if (what < 5) { /* delete */
			cr_assert_eq(objstore_del(s, key), 0);
			free(sh->data[i]);
			sh->data[i] = NULL;
		} else if (what < 9) { /* range get */
			if (!sh->data[i]) {
				expect_missing(s, key);
				continue;
			}
			size_t n = sh->len[i];
			uint64_t off = rnd_next(&st) % (n + 10);
			size_t len =
			    rnd_next(&st) % 4 ? rnd_next(&st) % (n + 10) : 0;
			size_t want = off >= n ? 0 : n - (size_t)off;
			if (len && len < want)
				want = len;
			expect_get(s, key, off, len,
				   want ? sh->data[i] + off : NULL, want);
		} else { /* head */
			uint64_t size;
			int err = objstore_head(s, key, &size);
			if (!sh->data[i]) {
				cr_assert_eq(err, ENOENT);
			} else {
				cr_assert_eq(err, 0);
				cr_assert_eq(size, sh->len[i]);
			}
		}
	}
	if (check_list) {
		struct listed *l = calloc(1, sizeof(*l));
		int expected = 0;
		l->sh = sh;
		cr_assert_eq(objstore_list(s, "rnd/", list_cb, l), 0);
		for (int i = 0; i < SHADOW_KEYS; i++)
			expected += sh->data[i] != NULL;
		cr_assert_eq(l->bad, 0, "list reported unknown or stale keys");
		cr_assert_eq(l->count, expected, "list: %d keys, shadow %d",
			     l->count, expected);
		free(l);
	}
	for (int i = 0; i < SHADOW_KEYS; i++) {
		if (sh->data[i]) {
			snprintf(key, sizeof(key), "rnd/%d", i);
			expect_get(s, key, 0, 0, sh->data[i], sh->len[i]);
			cr_assert_eq(objstore_del(s, key), 0);
		}
		free(sh->data[i]);
	}
	free(sh);
}

static void suite_faults(struct objstore *s)
{
	void *d;
	size_t got;

	cr_assert_eq(objstore_put(s, "fault", "abc", 3), 0);
	s->fail_next = 2;
	s->fail_err = ETIMEDOUT;
	cr_assert_eq(objstore_get(s, "fault", 0, 0, &d, &got), ETIMEDOUT);
	cr_assert_eq(objstore_put(s, "fault", "zz", 2), ETIMEDOUT);
	expect_get(s, "fault", 0, 0, "abc", 3); /* failed put changed nothing */
	s->fail_next = 1;
	s->fail_err = OBJSTORE_EUNREACH;
	objstore_set_retry_window(s, 0); /* no retries: the error at once */
	cr_assert_eq(objstore_probe(s), OBJSTORE_EUNREACH);
	objstore_set_retry_window(s, OBJSTORE_RETRY_WINDOW_MS);
	s->fail_next = 1;
	s->fail_err = 0; /* no error given: EIO */
	cr_assert_eq(objstore_del(s, "fault"), EIO);
	cr_assert_eq(s->fail_next, 0);
	cr_assert_eq(objstore_del(s, "fault"), 0);
}

struct list_stop {
	int calls;
};

static int list_stop_cb(void *arg, const char *key, uint64_t size,
			int64_t mtime)
{
	(void)mtime;
	struct list_stop *l = arg;
	(void)key;
	(void)size;
	return ++l->calls == 2 ? 4242 : 0;
}

struct list_collect {
	char keys[16][64];
	uint64_t sizes[16];
	int n;
};

static int list_collect_cb(void *arg, const char *key, uint64_t size,
			   int64_t mtime)
{
	/* the time of the put, as the store says it */
	cr_assert(mtime > (int64_t)time(NULL) - 3600 &&
		      mtime <= (int64_t)time(NULL) + 60,
		  "%s: mtime %lld", key, (long long)mtime);
	struct list_collect *l = arg;
	cr_assert_lt(l->n, 16);
	snprintf(l->keys[l->n], sizeof(l->keys[0]), "%s", key);
	l->sizes[l->n++] = size;
	return 0;
}

static int find_listed(struct list_collect *l, const char *key, uint64_t size)
{
	for (int i = 0; i < l->n; i++)
		if (!strcmp(l->keys[i], key))
			return l->sizes[i] == size;
	return 0;
}

static void suite_list(struct objstore *s)
{
	static const char *keys[] = {"ls/a",  "ls/b/1", "ls/b/2",
				     "ls/bb", "lsx",	"other/ls/a"};
	struct list_collect l;

	for (size_t i = 0; i < 6; i++)
		cr_assert_eq(objstore_put(s, keys[i], keys[i], i), 0);
	memset(&l, 0, sizeof(l));
	cr_assert_eq(objstore_list(s, "ls/", list_collect_cb, &l), 0);
	cr_assert_eq(l.n, 4);
	cr_assert(find_listed(&l, "ls/a", 0) && find_listed(&l, "ls/b/1", 1) &&
		  find_listed(&l, "ls/b/2", 2) && find_listed(&l, "ls/bb", 3));
	memset(&l, 0, sizeof(l));
	cr_assert_eq(objstore_list(s, "ls/b", list_collect_cb, &l), 0);
	cr_assert_eq(l.n, 3, "prefix 'ls/b' should match ls/b/1 ls/b/2 ls/bb");
	memset(&l, 0, sizeof(l));
	cr_assert_eq(objstore_list(s, "", list_collect_cb, &l), 0);
	cr_assert_eq(l.n, 6);
	memset(&l, 0, sizeof(l));
	cr_assert_eq(objstore_list(s, "nothing/", list_collect_cb, &l), 0);
	cr_assert_eq(l.n, 0);

	struct list_stop st = {0};
	cr_assert_eq(objstore_list(s, "", list_stop_cb, &st), 4242);
	cr_assert_eq(st.calls, 2);
	for (size_t i = 0; i < 6; i++)
		cr_assert_eq(objstore_del(s, keys[i]), 0);
	memset(&l, 0, sizeof(l));
	cr_assert_eq(objstore_list(s, "", list_collect_cb, &l), 0);
	cr_assert_eq(l.n, 0);
}

#define RUN(kind, body)                                                        \
	do {                                                                   \
		struct objstore *s = open_backend(kind);                       \
		body;                                                          \
		close_backend(s);                                              \
	} while (0)

#define BEHAVIOUR(kind, ops)                                                   \
	Test(objstore, kind##_basic)                                           \
	{                                                                      \
		RUN(#kind, suite_basic(s));                                    \
	}                                                                      \
	Test(objstore, kind##_large)                                           \
	{                                                                      \
		RUN(#kind, suite_large(s));                                    \
	}                                                                      \
	Test(objstore, kind##_keys)                                            \
	{                                                                      \
		RUN(#kind, suite_keys(s));                                     \
	}                                                                      \
	Test(objstore, kind##_concurrent)                                      \
	{                                                                      \
		RUN(#kind, suite_concurrent(s));                               \
	}                                                                      \
	Test(objstore, kind##_random_shadow)                                   \
	{                                                                      \
		RUN(#kind, suite_random(s, ops, strncmp(#kind, "s3", 2)));     \
	}                                                                      \
	Test(objstore, kind##_faults)                                          \
	{                                                                      \
		RUN(#kind, suite_faults(s));                                   \
	}

BEHAVIOUR(mem, 3000)
BEHAVIOUR(file, 2000)
BEHAVIOUR(s3, 800)
BEHAVIOUR(s3v2, 300)
BEHAVIOUR(s3v4, 300)

Test(objstore, mem_list)
{
	RUN("mem", suite_list(s));
}

Test(objstore, file_list)
{
	RUN("file", suite_list(s));
}

/* ---- URLs ---- */

/* Reading a view's bytes under the guard. */
struct view_sum {
	const unsigned char *p;
	size_t n;
	uint64_t sum;
};

static int sum_bytes(void *arg)
{
	struct view_sum *s = arg;
	for (size_t i = 0; i < s->n; i += 512)
		s->sum += s->p[i];
	return 0;
}

/* A file:// store says which file system its objects are files on (the
 * mount leaves a store on its cache's disk uncached); others never do. */
Test(objstore, on_dev)
{
	struct objstore *f = open_backend("file"), *m = open_backend("mem");
	struct stat st, proc;

	cr_assert_eq(stat(make_tmp_root(), &st), 0);
	cr_assert_eq(stat("/proc", &proc), 0);
	cr_assert_neq(st.st_dev, proc.st_dev);
	cr_expect_eq(objstore_on_dev(f, st.st_dev), 1);
	cr_expect_eq(objstore_on_dev(f, proc.st_dev), 0);
	cr_expect_eq(objstore_on_dev(m, st.st_dev), 0);
	cr_expect_eq(objstore_on_dev(NULL, st.st_dev), 0);
	objstore_close(f);
	objstore_close(m);
}

Test(objstore, file_view_mapped_and_guarded)
{
	enum { LEN = 1 << 20 };
	struct objstore *s = open_backend("file");
	struct objstore_view v, w;
	unsigned char *data = malloc(LEN);
	char path[PATH_MAX];

	fill(data, LEN, 7);
	cr_assert_eq(objstore_put(s, "blocks/0/0/9_0_1", data, LEN), 0);
	cr_assert_eq(objstore_get_view(s, "blocks/0/0/9_0_1", &v), 0);
	cr_assert(v.mapped);
	cr_assert_eq(v.len, LEN);
	cr_assert_eq(memcmp(v.data, data, LEN), 0);
	cr_assert_eq(objstore_get_view(s, "blocks/0/0/nope", &w), ENOENT);
	/* the bytes live as long as a reference does */
	objstore_view_ref(&v, &w);
	objstore_view_release(&v);
	cr_assert_eq(memcmp(w.data, data, LEN), 0);

	/* the file shrinks under the mapping (a failing disk reads the
	 * same way): reading it is an EIO, not a crash */
	int found = 0;
	for (int d = 0; d < 3 && !found; d++) {
		snprintf(path, sizeof(path), "%s/d%d/blocks/0/0/9_0_1",
			 tmp_root, d);
		found = truncate(path, 0) == 0;
	}
	cr_assert(found, "the object's file was not found");
	struct view_sum vs = {w.data, LEN, 0};
	cr_assert_eq(fsutil_guard_sigbus(sum_bytes, &vs), EIO);
	/* and the guard is not left armed */
	struct view_sum ok = {data, LEN, 0};
	cr_assert_eq(fsutil_guard_sigbus(sum_bytes, &ok), 0);
	cr_assert_gt(ok.sum, 0);
	objstore_view_release(&w);
	free(data);
	close_backend(s);
}

Test(objstore, malformed_urls)
{
	static const char *bad[] = {
	    "",
	    "nope://x",
	    "mem:/x",
	    "MEM://",
	    "mem://a/b",
	    "mem://a?b",
	    "file://",
	    "file://relative/dir",
	    "file://host/dir",
	    "file:///a::/b",
	    "file:///a:",
	    "file:///a:relative",
	    "file:///tmp/x:/tmp/x",
	    "file:///tmp/x?y",
	    "s3://",
	    "s3://host",
	    "s3://host/",
	    "s3:///bucket",
	    "s3://host:/bucket",
	    "s3://host:0/bucket",
	    "s3://host:65536/bucket",
	    "s3://host:12a/bucket",
	    "s3://host:99999999/bucket",
	    "s3://user:secret@host/bucket",
	    "s3://[::1/bucket",
	    "s3+http://127.0.0.1:9000//prefix",
	    "s3+http://127.0.0.1:9000/bucket/../x",
	    "s3+http://127.0.0.1:9000/bucket//x",
	    "s3+http://127.0.0.1:9000/bucket?x=1",
	    "s3+http://127.0.0.1:9000/b!d",
	    "s3+https://host/bucket",
	    "http://host/bucket",
	};
	struct objstore_creds creds = {"AK", "SK", NULL};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct objstore *s = (struct objstore *)1;
		int err = objstore_open(bad[i], &creds, &s);
		cr_expect_eq(err, OBJSTORE_EURL, "'%s': got %d (%s)", bad[i],
			     err, gr_strerror(err));
		cr_expect_null(s, "'%s': *out not cleared", bad[i]);
		if (!err)
			objstore_close(s);
	}
	struct objstore *s;
	cr_assert_eq(objstore_open(NULL, &creds, &s), OBJSTORE_EURL);
}

Test(objstore, good_urls_open)
{
	static const char *good[] = {
	    "mem://",
	    "mem://vol-1.test_x",
	    "s3://s3.example.com/bucket",
	    "s3://minio_1:9000/bucket/some/prefix/",
	    "s3+http://127.0.0.1:9000/bucket/p",
	    "s3+http://[::1]:9000/bucket",
	};
	struct objstore_creds creds = {"AK", "SK", NULL};

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		struct objstore *s = NULL;
		int err = objstore_open(good[i], &creds, &s);
		cr_expect_eq(err, 0, "'%s': %s", good[i], gr_strerror(err));
		objstore_close(s);
	}
	objstore_close(NULL);
}

Test(objstore, strerror_texts)
{
	cr_assert(strstr(gr_strerror(OBJSTORE_EAUTH), "GRANARY_S3_SECRET_KEY"));
	cr_assert(
	    strstr(gr_strerror(OBJSTORE_ENOCREDS), "GRANARY_S3_ACCESS_KEY"));
	cr_assert_str_eq(gr_strerror(ENOENT), strerror(ENOENT));
	int codes[] = {OBJSTORE_EURL, OBJSTORE_ENOBUCKET, OBJSTORE_EUNREACH,
		       OBJSTORE_ESERVER, -999};
	for (size_t i = 0; i < 5; i++)
		cr_assert_gt(strlen(gr_strerror(codes[i])), 10);
}

/* ---- the volume marker ---- */

Test(objstore, owner_marker_round_trip)
{
	struct objstore *s;
	struct objstore_owner w = {"0c5e2a7e-1111-4222-8333-944455556666",
				   "data.set-1"},
			      r;
	static const char *bad[] = {"", "granary volume\n",
				    "granary volume\nname=x\n",
				    "something else\nuuid=a\nname=b\n",
				    "granary volume\nuuid=\nname=b\n"};

	cr_assert_eq(objstore_open("mem://", NULL, &s), 0);
	cr_assert_eq(objstore_owner_get(s, &r), ENOENT);
	cr_assert_eq(objstore_owner_put(s, &w), 0);
	memset(&r, 0, sizeof(r));
	cr_assert_eq(objstore_owner_get(s, &r), 0);
	cr_expect_str_eq(r.uuid, w.uuid);
	cr_expect_str_eq(r.name, w.name);

	/* fields in any order, other lines ignored */
	const char *other = "granary volume\nname=n2\nfuture=1\nuuid=u2";
	cr_assert_eq(objstore_put(s, OBJSTORE_OWNER_KEY, other, strlen(other)),
		     0);
	cr_assert_eq(objstore_owner_get(s, &r), 0);
	cr_expect_str_eq(r.uuid, "u2");
	cr_expect_str_eq(r.name, "n2");

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_assert_eq(
		    objstore_put(s, OBJSTORE_OWNER_KEY, bad[i], strlen(bad[i])),
		    0);
		cr_expect_eq(objstore_owner_get(s, &r), EINVAL,
			     "marker '%s' accepted", bad[i]);
	}
	/* a name that would end the line early is refused */
	snprintf(w.name, sizeof(w.name), "a\nuuid=evil");
	cr_expect_eq(objstore_owner_put(s, &w), EINVAL);
	objstore_close(s);
}

/* A file:// pool keeps its marker in every directory, so that each says
 * which volume it belongs to (format looks at one directory at a time). */
Test(objstore, file_marker_in_every_dir)
{
	struct objstore *s = open_backend("file"), *one;
	struct objstore_owner w = {"0c5e2a7e-1111-4222-8333-944455556666",
				   "pooled"},
			      r;
	char url[PATH_MAX + 16], p[PATH_MAX];
	struct stat st;

	cr_assert_eq(objstore_owner_put(s, &w), 0);
	for (int d = 0; d < 3; d++) {
		snprintf(url, sizeof(url), "file://%s/d%d", tmp_root, d);
		memset(&r, 0, sizeof(r));
		cr_assert_eq(objstore_owner_at(url, NULL, &r), 0, "d%d", d);
		cr_expect_str_eq(r.uuid, w.uuid);
		cr_expect_str_eq(r.name, "pooled");
		cr_assert_eq(objstore_open(url, NULL, &one), 0);
		cr_assert_eq(objstore_owner_get(one, &r), 0, "d%d alone", d);
		objstore_close(one);
	}
	cr_assert_eq(objstore_owner_get(s, &r), 0);
	/* a failed format takes it back out of every directory */
	cr_assert_eq(objstore_del(s, OBJSTORE_OWNER_KEY), 0);
	for (int d = 0; d < 3; d++) {
		snprintf(p, sizeof(p), "%s/d%d/" OBJSTORE_OWNER_KEY, tmp_root,
			 d);
		cr_expect_neq(stat(p, &st), 0, "marker left in d%d", d);
	}
	cr_assert_eq(objstore_owner_get(s, &r), ENOENT);
	/* any other key still lives in one directory */
	cr_assert_eq(objstore_put(s, "x/" OBJSTORE_OWNER_KEY, "v", 1), 0);
	int found = 0;
	for (int d = 0; d < 3; d++) {
		snprintf(p, sizeof(p), "%s/d%d/x/" OBJSTORE_OWNER_KEY, tmp_root,
			 d);
		found += stat(p, &st) == 0;
	}
	cr_expect_eq(found, 1);
	close_backend(s);
}

/* The marker of a place is read without making anything: a missing
 * directory is no marker, and stays missing. */
Test(objstore, owner_at_creates_nothing)
{
	struct objstore_owner r;
	char url[PATH_MAX + 16], p[PATH_MAX];
	struct stat st;

	snprintf(p, sizeof(p), "%s/absent", make_tmp_root());
	snprintf(url, sizeof(url), "file://%s", p);
	cr_assert_eq(objstore_owner_at(url, NULL, &r), ENOENT);
	cr_assert_neq(stat(p, &st), 0, "owner_at created '%s'", p);
	snprintf(url, sizeof(url), "file://%s/f", tmp_root);
	snprintf(p, sizeof(p), "%s/f", tmp_root);
	FILE *f = fopen(p, "w");
	cr_assert_not_null(f);
	fclose(f);
	cr_assert_eq(objstore_owner_at(url, NULL, &r), ENOENT, "a file");
	cr_assert_eq(objstore_owner_at("mem://", NULL, &r), ENOENT);
	cr_assert_eq(objstore_owner_at("nope://x", NULL, &r), OBJSTORE_EURL);
}

/* ---- places: the overlap check's URLs ---- */

static void expect_place(const char *url, size_t i, const char *want)
{
	char out[256];
	int err = objstore_url_place(url, i, out, sizeof(out));

	cr_assert_eq(err, 0, "place %zu of '%s': %s", i, url, gr_strerror(err));
	cr_expect_str_eq(out, want, "place %zu of '%s'", i, url);
}

/* Walk url up to its top: each parent in turn, then ENOENT. */
static void expect_parents(const char *url, const char *const *want)
{
	char a[256], b[256];
	size_t n = 0;

	snprintf(a, sizeof(a), "%s", url);
	for (; want[n]; n++) {
		int err = objstore_url_parent(a, b, sizeof(b));
		cr_assert_eq(err, 0, "parent of '%s': %s", a, gr_strerror(err));
		cr_expect_str_eq(b, want[n], "parent of '%s'", a);
		memcpy(a, b, sizeof(a));
	}
	cr_expect_eq(objstore_url_parent(a, b, sizeof(b)), ENOENT,
		     "'%s' has a parent: '%s'", a, b);
}

Test(objstore, url_place)
{
	char out[256];

	expect_place("file:///a/b", 0, "file:///a/b");
	expect_place("file:///a/b/", 0, "file:///a/b");
	expect_place("file:///", 0, "file:///");
	expect_place("file:///d1:/d2//:/x/y", 0, "file:///d1");
	expect_place("file:///d1:/d2//:/x/y", 1, "file:///d2");
	expect_place("file:///d1:/d2//:/x/y", 2, "file:///x/y");
	cr_expect_eq(objstore_url_place("file:///d1:/d2", 2, out, 256), ENOENT);
	cr_expect_eq(objstore_url_place("file:///a", 1, out, 256), ENOENT);
	expect_place("s3://h:9000/bkt/p/q/", 0, "s3://h:9000/bkt/p/q");
	expect_place("s3+http://h/bkt", 0, "s3+http://h/bkt");
	cr_expect_eq(objstore_url_place("s3://h/bkt", 1, out, 256), ENOENT);
	expect_place("mem://x", 0, "mem://x");
	cr_expect_eq(objstore_url_place("mem://x", 1, out, 256), ENOENT);
	static const char *bad[] = {"",		  "nope://x",	"file://",
				    "file://rel", "file:///a:", "file:///a::/b",
				    "s3://h",	  "s3://h/",	"s3:///b",
				    "s3://h//b"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int err = OBJSTORE_EURL;
		for (size_t j = 0; j < 3 && err != ENOENT; j++)
			if ((err = objstore_url_place(bad[i], j, out, 256)) &&
			    err != ENOENT)
				break;
		cr_expect_eq(err, OBJSTORE_EURL, "'%s' accepted", bad[i]);
	}
	cr_expect_eq(objstore_url_place("file:///long/dir", 0, out, 16),
		     ENAMETOOLONG);
}

Test(objstore, url_parent)
{
	char out[256];

	expect_parents(
	    "file:///a/b/c",
	    (const char *[]){"file:///a/b", "file:///a", "file:///", NULL});
	expect_parents("file:///a//b/",
		       (const char *[]){"file:///a", "file:///", NULL});
	/* lexical: ".." is a component, the walk still passes "/" */
	expect_parents(
	    "file:///a/../b",
	    (const char *[]){"file:///a/..", "file:///a", "file:///", NULL});
	expect_parents("file:///", (const char *[]){NULL});
	expect_parents(
	    "s3://h:9000/bkt/a/b/",
	    (const char *[]){"s3://h:9000/bkt/a", "s3://h:9000/bkt", NULL});
	expect_parents("s3+http://127.0.0.1:1/bkt/a",
		       (const char *[]){"s3+http://127.0.0.1:1/bkt", NULL});
	expect_parents("s3://h/bkt/", (const char *[]){NULL});
	expect_parents("mem://x", (const char *[]){NULL});
	/* a pool has no one parent: its places each have theirs */
	cr_expect_eq(objstore_url_parent("file:///a/b:/c", out, 256), EINVAL);
	cr_expect_eq(objstore_url_parent("nope://x", out, 256), OBJSTORE_EURL);
	cr_expect_eq(objstore_url_parent("s3://h", out, 256), OBJSTORE_EURL);
	cr_expect_eq(objstore_url_parent("file://rel/x", out, 256),
		     OBJSTORE_EURL);
	cr_expect_eq(objstore_url_parent("s3://h/bkt/a", out, 8), ENAMETOOLONG);
}

/* ---- mem:// sharing ---- */

Test(objstore, mem_named_shared_unnamed_private)
{
	struct objstore *a, *b, *c, *d;
	uint64_t size;

	cr_assert_eq(objstore_open("mem://shared", NULL, &a), 0);
	cr_assert_eq(objstore_open("mem://shared", NULL, &b), 0);
	cr_assert_eq(objstore_put(a, "k", "v", 1), 0);
	cr_assert_eq(objstore_head(b, "k", &size), 0);
	objstore_close(a);
	objstore_close(b);
	cr_assert_eq(objstore_open("mem://shared", NULL, &a), 0);
	cr_assert_eq(objstore_head(a, "k", &size), 0, "named store forgotten");
	objstore_close(a);

	cr_assert_eq(objstore_open("mem://", NULL, &c), 0);
	cr_assert_eq(objstore_open("mem://", NULL, &d), 0);
	cr_assert_eq(objstore_put(c, "k", "v", 1), 0);
	cr_assert_eq(objstore_head(d, "k", &size), ENOENT);
	objstore_close(c);
	objstore_close(d);
}

/* ---- file:// specifics ---- */

/* Count regular files under dir; names holding `needle` go to *tmp. */
static int count_files(const char *dir, const char *needle, int *tmp)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	if (!d)
		return 0;
	while ((de = readdir(d))) {
		char p[PATH_MAX];
		struct stat st;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		if (lstat(p, &st))
			continue;
		if (S_ISDIR(st.st_mode)) {
			n += count_files(p, needle, tmp);
		} else {
			if (tmp && strstr(de->d_name, needle))
				(*tmp)++;
			n++;
		}
	}
	closedir(d);
	return n;
}

Test(objstore, file_spreads_across_dirs)
{
	struct objstore *s = open_backend("file");
	char key[64], p[PATH_MAX];
	int per_dir[3], total = 0, tmp = 0;

	for (int i = 0; i < 90; i++) {
		snprintf(key, sizeof(key), "spread/%02d/obj-%d", i % 7, i);
		cr_assert_eq(objstore_put(s, key, key, strlen(key)), 0);
	}
	for (int d = 0; d < 3; d++) {
		snprintf(p, sizeof(p), "%s/d%d", tmp_root, d);
		per_dir[d] = count_files(p, ".granary-tmp.", &tmp);
		total += per_dir[d];
		cr_assert_gt(per_dir[d], 10, "dir d%d holds only %d of 90", d,
			     per_dir[d]);
	}
	cr_assert_eq(total, 90, "objects stored twice or lost: %d", total);
	cr_assert_eq(tmp, 0, "temp files left behind after put");

	/* each object is a plain file under exactly one of the dirs */
	for (int i = 0; i < 90; i++) {
		int found = 0;
		snprintf(key, sizeof(key), "spread/%02d/obj-%d", i % 7, i);
		for (int d = 0; d < 3; d++) {
			struct stat st;
			snprintf(p, sizeof(p), "%s/d%d/%s", tmp_root, d, key);
			found += stat(p, &st) == 0 && S_ISREG(st.st_mode);
		}
		cr_assert_eq(found, 1, "'%s' found in %d dirs", key, found);
	}
	/* the same pool reopened (another process) finds everything */
	objstore_close(s);
	char url[PATH_MAX * 3 + 32];
	backend_url("file", url, sizeof(url));
	cr_assert_eq(objstore_open(url, NULL, &s), 0);
	expect_get(s, "spread/03/obj-10", 0, 0, "spread/03/obj-10", 16);
	close_backend(s);
}

Test(objstore, file_ignores_crash_leftovers)
{
	struct objstore *s = open_backend("file");
	char p[PATH_MAX];

	cr_assert_eq(objstore_put(s, "x/y", "data", 4), 0);
	/* a crash between create and rename leaves a temp file behind */
	for (int d = 0; d < 3; d++) {
		snprintf(p, sizeof(p), "%s/d%d/x", tmp_root, d);
		mkdir(p, 0755);
		snprintf(p, sizeof(p), "%s/d%d/x/.granary-tmp.00000000deadbeef",
			 tmp_root, d);
		int fd = open(p, O_WRONLY | O_CREAT, 0644);
		cr_assert_geq(fd, 0);
		cr_assert_eq(write(fd, "torn", 4), 4);
		close(fd);
	}
	struct list_collect l;
	memset(&l, 0, sizeof(l));
	cr_assert_eq(objstore_list(s, "", list_collect_cb, &l), 0);
	cr_assert_eq(l.n, 1);
	cr_assert_str_eq(l.keys[0], "x/y");
	expect_get(s, "x/y", 0, 0, "data", 4);
	/* keys cannot impersonate temp files */
	cr_assert_eq(objstore_put(s, "x/.granary-tmp.1", "a", 1), EINVAL);
	close_backend(s);
}

/* An object put from a page-aligned buffer (a whole block of a big file)
 * goes to the disk without a copy in the page cache, all but its last
 * partial page; it reads back right, as does one from an unaligned
 * buffer, and one shorter than a page. */
Test(objstore, file_aligned_put_bypasses_page_cache)
{
	const size_t lens[] = {(1u << 20) + 77, 1u << 20, 3000, (1u << 20) + 5};
	struct objstore *s = open_backend("file");
	struct statfs sf;
	unsigned char *buf;

	cr_assert_eq(statfs(tmp_root, &sf), 0);
	if (sf.f_type == TMPFS_MAGIC)
		cr_skip_test("%s is a tmpfs: its files live in the page cache",
			     tmp_root);
	cr_assert_eq(posix_memalign((void **)&buf, 4096, (2u << 20) + 4096), 0);
	for (int i = 0; i < 4; i++) {
		char key[32], path[PATH_MAX];
		/* the last one starts 1 byte past a page: a plain write */
		unsigned char *b = buf + (i == 3);
		fill(b, lens[i], 1000 + (uint64_t)i);
		snprintf(key, sizeof(key), "big/k%d", i);
		cr_assert_eq(objstore_put(s, key, b, lens[i]), 0);
		expect_get(s, key, 0, 0, b, lens[i]);
		int d = 0;
		for (; d < 3; d++) {
			snprintf(path, sizeof(path), "%s/d%d/%s", tmp_root, d,
				 key);
			if (access(path, F_OK) == 0)
				break;
		}
		cr_assert_lt(d, 3, "no file for '%s'", key);
		if (i == 3)
			continue; /* cached: nothing to say about its pages */
		/* the get above read it back through the page cache */
		int fd = open(path, O_RDONLY);
		cr_assert_eq(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
		close(fd);
		cr_assert_eq(objstore_put(s, key, b, lens[i]), 0);
		size_t n = resident_pages(path);
		cr_assert_leq(n, 1,
			      "'%s' (%zu bytes): %zu pages in the page "
			      "cache after its put",
			      key, lens[i], n);
		expect_get(s, key, 0, 0, b, lens[i]);
	}
	free(buf);
	close_backend(s);
}

Test(objstore, file_failed_put_leaves_nothing)
{
	char url[PATH_MAX];
	struct objstore *s;

	/* one directory, so that "clash" and "clash/inner" meet */
	snprintf(url, sizeof(url), "file://%s/single", make_tmp_root());
	cr_assert_eq(objstore_open(url, NULL, &s), 0);
	void *d;
	size_t got;
	int tmp = 0;

	/* rename onto a directory fails after the data was written */
	cr_assert_eq(objstore_put(s, "clash/inner", "in", 2), 0);
	int err = objstore_put(s, "clash", "outer", 5);
	cr_assert(err == EISDIR || err == ENOTEMPTY || err == EEXIST,
		  "put onto a directory: %d", err);
	cr_assert_eq(objstore_get(s, "clash", 0, 0, &d, &got), ENOENT);
	cr_assert_eq(count_files(tmp_root, ".granary-tmp.", &tmp), 1);
	cr_assert_eq(tmp, 0, "temp file left behind by a failed put");
	/* and a key under an object cannot be created */
	cr_assert_eq(objstore_put(s, "clash/inner/deeper", "x", 1), ENOTDIR);
	expect_get(s, "clash/inner", 0, 0, "in", 2);
	close_backend(s);
}

/* Mount a small tmpfs at dir (root only); 0 if it cannot be done. */
static int mount_small(const char *dir, const char *size, int ro)
{
	if (geteuid() != 0)
		return 0;
	char opt[32];
	snprintf(opt, sizeof(opt), "size=%s", size);
	if (mount("tmpfs", dir, "tmpfs", 0, opt))
		return 0;
	snprintf(mounted_dir, sizeof(mounted_dir), "%s", dir);
	if (ro && mount(NULL, dir, NULL, MS_REMOUNT | MS_RDONLY, opt)) {
		umount2(dir, MNT_DETACH);
		mounted_dir[0] = '\0';
		return 0;
	}
	return 1;
}

Test(objstore, file_disk_full_is_enospc)
{
	char dir[PATH_MAX], url[PATH_MAX + 16];
	struct objstore *s;
	int tmp = 0;

	snprintf(dir, sizeof(dir), "%s/full", make_tmp_root());
	cr_assert_eq(mkdir(dir, 0755), 0);
	if (!mount_small(dir, "1m", 0)) {
		cleanup_tmp();
		fprintf(stderr, "test_objstore: cannot mount a small tmpfs "
				"(needs root): disk-full case skipped\n");
		cr_skip_test("cannot mount a small tmpfs (needs root)");
	}
	snprintf(url, sizeof(url), "file://%s", dir);
	cr_assert_eq(objstore_open(url, NULL, &s), 0);
	cr_assert_eq(objstore_put(s, "k", "old", 3), 0);
	size_t len = 2 << 20;
	unsigned char *big = calloc(1, len);
	int err = objstore_put(s, "k", big, len);
	int err2 = objstore_put(s, "new/key", big, len);
	free(big);
	expect_get(s, "k", 0, 0, "old", 3); /* old object intact */
	uint64_t size;
	cr_assert_eq(objstore_head(s, "new/key", &size), ENOENT);
	int files = count_files(dir, ".granary-tmp.", &tmp);
	objstore_close(s);
	umount2(dir, MNT_DETACH);
	cleanup_tmp();
	cr_assert_eq(err, ENOSPC, "overwrite on a full disk: %d", err);
	cr_assert_eq(err2, ENOSPC, "new object on a full disk: %d", err2);
	cr_assert_eq(tmp, 0, "temp file left behind on ENOSPC");
	cr_assert_eq(files, 1);
}

Test(objstore, file_read_only_dir_fails_cleanly)
{
	char dir[PATH_MAX], url[PATH_MAX + 16];
	struct objstore *s;
	int tmp = 0, mounted;

	snprintf(dir, sizeof(dir), "%s/ro", make_tmp_root());
	cr_assert_eq(mkdir(dir, 0755), 0);
	mounted = mount_small(dir, "1m", 1);
	if (!mounted && geteuid() != 0)
		cr_assert_eq(chmod(dir, 0555),
			     0); /* as a user, a mode does it */
	else if (!mounted)
		cr_skip_test("cannot make a read-only directory as root");
	snprintf(url, sizeof(url), "file://%s", dir);
	cr_assert_eq(objstore_open(url, NULL, &s), 0);
	int err = objstore_put(s, "a/b", "data", 4);
	cr_assert(err == EROFS || err == EACCES, "put to read-only: %d", err);
	cr_assert_neq(objstore_probe(s), 0);
	uint64_t size;
	cr_assert_eq(objstore_head(s, "a/b", &size), ENOENT);
	cr_assert_eq(count_files(dir, ".granary-tmp.", &tmp), 0);
	objstore_close(s);
	if (mounted)
		umount2(dir, MNT_DETACH);
	else
		chmod(dir, 0755);
	cleanup_tmp();
}

Test(objstore, file_open_errors)
{
	char url[PATH_MAX * 2 + 16];
	struct objstore *s = NULL;
	const char *r = make_tmp_root();

	/* a missing last component is created ... */
	snprintf(url, sizeof(url), "file://%s/new-dir", r);
	cr_assert_eq(objstore_open(url, NULL, &s), 0);
	objstore_close(s);
	/* ... a missing parent is an error */
	snprintf(url, sizeof(url), "file://%s/no/such/parent", r);
	cr_assert_eq(objstore_open(url, NULL, &s), ENOENT);
	/* a file where a directory should be */
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/plain", r);
	int fd = open(p, O_WRONLY | O_CREAT, 0644);
	close(fd);
	snprintf(url, sizeof(url), "file://%s/ok:%s", r, p);
	cr_assert_eq(objstore_open(url, NULL, &s), ENOTDIR);
	cleanup_tmp();
}

/* ---- s3 specifics ---- */

static const char *s3_base(void)
{
	const char *s3 = getenv("GRANARY_TEST_S3");
	if (!s3 || !*s3) {
		fprintf(stderr,
			"test_objstore: GRANARY_TEST_S3 is not set: s3 "
			"case skipped (run through tests/run-unit.sh)\n");
		cr_skip_test("GRANARY_TEST_S3 not set (use tests/run-unit.sh)");
	}
	return s3;
}

static int probe_with(const char *url, const char *ak, const char *sk)
{
	struct objstore_creds creds = {ak, sk, NULL};
	struct objstore *s;
	int err = objstore_open(url, &creds, &s);

	cr_assert_eq(err, 0, "open '%s': %s", url, gr_strerror(err));
	err = objstore_probe(s);
	objstore_close(s);
	return err;
}

/* On a strict s3rver of the test's own: the shared one accepts any secret
 * (tests/lib/services.sh). */
Test(objstore, s3_wrong_secret_is_eauth, .timeout = 90)
{
	char url[512];
	snprintf(url, sizeof(url),
		 "s3+http://127.0.0.1:%d/granary-test?sig=v2",
		 private_s3rver(1));
	cr_assert_eq(probe_with(url, "S3RVER", "not-the-secret"),
		     OBJSTORE_EAUTH);
	cr_assert_eq(probe_with(url, "S3RVER", "S3RVER"), 0);
}

Test(objstore, s3_wrong_access_key_is_eauth)
{
	char url[512];
	snprintf(url, sizeof(url), "%s/granary-test", s3_base());
	cr_assert_eq(probe_with(url, "NOBODY", "S3RVER"), OBJSTORE_EAUTH);
}

Test(objstore, s3_missing_bucket_is_enobucket)
{
	char url[512];
	snprintf(url, sizeof(url), "%s/no-such-bucket-%d", s3_base(),
		 (int)getpid());
	cr_assert_eq(probe_with(url, "S3RVER", "S3RVER"), OBJSTORE_ENOBUCKET);
}

/* A loopback port nobody listens on. */
static int closed_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t alen = sizeof(a);

	cr_assert_geq(fd, 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
	close(fd); /* bound, never listened: now closed */
	return ntohs(a.sin_port);
}

Test(objstore, s3_refused_is_erefused_quickly)
{
	char url[128];
	struct timespec t0, t1;

	snprintf(url, sizeof(url), "s3+http://127.0.0.1:%d/granary-test",
		 closed_port());
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int err = probe_with(url, "S3RVER", "S3RVER");
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double secs = (double)(t1.tv_sec - t0.tv_sec) +
		      (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	cr_assert_eq(err, OBJSTORE_EREFUSED, "got %d (%s)", err,
		     gr_strerror(err));
	cr_assert_lt(secs, 8.0, "took %.1f s to give up", secs);
}

Test(objstore, s3_no_credentials_is_enocreds)
{
	struct objstore *s = NULL;

	unsetenv("GRANARY_S3_ACCESS_KEY");
	unsetenv("GRANARY_S3_SECRET_KEY");
	unsetenv("AWS_ACCESS_KEY_ID");
	unsetenv("AWS_SECRET_ACCESS_KEY");
	cr_assert_eq(objstore_open("s3://example.com/bucket", NULL, &s),
		     OBJSTORE_ENOCREDS);
	struct objstore_creds half = {"AK", NULL, NULL};
	cr_assert_eq(objstore_open("s3://example.com/bucket", &half, &s),
		     OBJSTORE_ENOCREDS);
	setenv("AWS_ACCESS_KEY_ID", "AK", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "SK", 1);
	cr_assert_eq(objstore_open("s3://example.com/bucket", NULL, &s), 0);
	objstore_close(s);
}

/* The pair a mount takes from the environment (it overrides the keys kept
 * in the volume settings): GRANARY_S3_* whole, else AWS_* whole. */
Test(objstore, env_creds_order)
{
	struct objstore_creds c = {"kept", "kept", NULL};

	unsetenv("GRANARY_S3_ACCESS_KEY");
	unsetenv("GRANARY_S3_SECRET_KEY");
	unsetenv("AWS_ACCESS_KEY_ID");
	unsetenv("AWS_SECRET_ACCESS_KEY");
	cr_assert_eq(objstore_env_creds(&c), OBJSTORE_ENOCREDS);
	cr_assert_str_eq(c.access_key, "kept");
	setenv("GRANARY_S3_ACCESS_KEY", "GAK", 1); /* half a pair */
	setenv("AWS_ACCESS_KEY_ID", "AAK", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "ASK", 1);
	cr_assert_eq(objstore_env_creds(&c), 0);
	cr_assert_str_eq(c.access_key, "AAK");
	cr_assert_str_eq(c.secret_key, "ASK");
	setenv("GRANARY_S3_SECRET_KEY", "GSK", 1);
	cr_assert_eq(objstore_env_creds(&c), 0);
	cr_assert_str_eq(c.access_key, "GAK");
	cr_assert_str_eq(c.secret_key, "GSK");
}

Test(objstore, s3_prefix_is_prepended)
{
	char url[512];
	struct objstore *a, *b;

	snprintf(url, sizeof(url), "%s/granary-test/unit-%d/p1", s3_base(),
		 (int)getpid());
	cr_assert_eq(objstore_open(url, NULL, &a), 0);
	snprintf(url, sizeof(url), "%s/granary-test/unit-%d", s3_base(),
		 (int)getpid());
	cr_assert_eq(objstore_open(url, NULL, &b), 0);
	cr_assert_eq(objstore_put(a, "k", "in-prefix", 9), 0);
	expect_get(b, "p1/k", 0, 0, "in-prefix", 9);
	expect_missing(b, "k");
	cr_assert_eq(objstore_del(a, "k"), 0);
	objstore_close(a);
	objstore_close(b);
}

/*
 * A server that accepts connections and never answers: every s3 request to
 * it must end at its deadline (GRANARY_S3_TIMEOUT) with OBJSTORE_ETIMEDOUT,
 * however long curl itself would wait.
 */
#define MUTE_MAX_CONNS 64

static struct {
	int lfd, port;
	int conns[MUTE_MAX_CONNS]; /* held open, never read */
	int nconns;		   /* protected by: only the thread writes */
	int stop;		   /* atomic: set by mute_stop */
	int running;
	pthread_t thr;
} mute = {.lfd = -1};

static void *mute_main(void *arg)
{
	struct pollfd pfd = {.fd = mute.lfd, .events = POLLIN};

	(void)arg;
	while (!__atomic_load_n(&mute.stop, __ATOMIC_ACQUIRE)) {
		if (poll(&pfd, 1, 50) <= 0)
			continue;
		int fd = accept(mute.lfd, NULL, NULL);
		if (fd < 0)
			continue;
		if (mute.nconns < MUTE_MAX_CONNS)
			mute.conns[mute.nconns++] = fd;
		else
			close(fd); /* more than any test makes */
	}
	return NULL;
}

static int mute_start(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t alen = sizeof(a);

	mute.lfd = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert_geq(mute.lfd, 0);
	cr_assert_eq(bind(mute.lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(listen(mute.lfd, 16), 0);
	cr_assert_eq(getsockname(mute.lfd, (struct sockaddr *)&a, &alen), 0);
	mute.port = ntohs(a.sin_port);
	cr_assert_eq(pthread_create(&mute.thr, NULL, mute_main, NULL), 0);
	mute.running = 1;
	return mute.port;
}

static void mute_stop(void)
{
	if (mute.running) {
		__atomic_store_n(&mute.stop, 1, __ATOMIC_RELEASE);
		pthread_join(mute.thr, NULL);
		mute.running = 0;
	}
	for (int i = 0; i < mute.nconns; i++)
		close(mute.conns[i]);
	mute.nconns = 0;
	if (mute.lfd >= 0)
		close(mute.lfd);
	mute.lfd = -1;
}

static double secs_since(const struct timespec *t0)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) +
	       (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

static struct objstore *open_mute(const char *timeout)
{
	struct objstore_creds creds = {"S3RVER", "S3RVER", NULL};
	struct objstore *s = NULL;
	char url[128];

	snprintf(url, sizeof(url), "s3+http://127.0.0.1:%d/granary-test",
		 mute_start());
	cr_assert_eq(setenv("GRANARY_S3_TIMEOUT", timeout, 1), 0);
	cr_assert_eq(objstore_open(url, &creds, &s), 0);
	unsetenv("GRANARY_S3_TIMEOUT"); /* read at open only */
	objstore_set_retry_window(s, 3000);
	return s;
}

/* The first failing call retries its timeouts for the 3 s window (3
 * tries of ~1 s here): it must neither give up at once nor wait for
 * curl's own limits. The calls after it, in the same outage, fail at
 * once (fast), their window being the outage's. */
static void expect_timeout(const char *what, int err, double secs, int fast)
{
	cr_assert_eq(err, OBJSTORE_ETIMEDOUT, "%s: got %d (%s)", what, err,
		     gr_strerror(err));
	if (fast) {
		cr_assert_lt(secs, 2.0, "%s took %.1f s after the window", what,
			     secs);
		return;
	}
	cr_assert_geq(secs, 2.5, "%s gave up after %.1f s: no retries?", what,
		      secs);
	cr_assert_lt(secs, 6.0, "%s took %.1f s: deadline not kept", what,
		     secs);
}

Test(objstore, s3_silent_server_times_out, .timeout = 60)
{
	struct objstore *s = open_mute("1");
	struct timespec t0, t;
	void *data = NULL;
	size_t got = 0;
	char *buf = malloc(64 * 1024);

	cr_assert_not_null(buf);
	fill(buf, 64 * 1024, 7);
	clock_gettime(CLOCK_MONOTONIC, &t0);

	clock_gettime(CLOCK_MONOTONIC, &t);
	int err = objstore_get(s, "k", 0, 0, &data, &got);
	expect_timeout("get", err, secs_since(&t), 0);
	cr_assert_null(data);

	clock_gettime(CLOCK_MONOTONIC, &t);
	err = objstore_put(s, "k", buf, 64 * 1024);
	expect_timeout("put", err, secs_since(&t), 1);

	clock_gettime(CLOCK_MONOTONIC, &t);
	err = objstore_probe(s);
	expect_timeout("probe", err, secs_since(&t), 1);

	double total = secs_since(&t0);
	cr_assert_lt(total, 20.0, "took %.1f s in all", total);
	objstore_close(s);
	free(buf);
	mute_stop();
}

/* A timed-out request throws away its thread's request context; the next
 * requests on the same thread, to a healthy store, must work. */
Test(objstore, s3_works_after_a_timeout, .timeout = 60)
{
	const char *base = s3_base();
	struct objstore *mute_s = open_mute("0.3"), *s;
	char url[512];
	uint64_t size = 0;
	void *data = NULL;
	size_t got = 0, len = 3 * 1024 * 1024 + 17;
	unsigned char *buf = malloc(len);

	cr_assert_not_null(buf);
	fill(buf, len, 11);
	cr_assert_eq(objstore_head(mute_s, "k", &size), OBJSTORE_ETIMEDOUT);
	objstore_close(mute_s);
	mute_stop();

	snprintf(url, sizeof(url), "%s/granary-test/unit-%d/after", base,
		 (int)getpid());
	/* 1 s + 1 s per MiB: a 3 MiB body gets 4 s, plenty on loopback */
	cr_assert_eq(setenv("GRANARY_S3_TIMEOUT", "1", 1), 0);
	cr_assert_eq(objstore_open(url, NULL, &s), 0);
	unsetenv("GRANARY_S3_TIMEOUT");
	cr_assert_eq(objstore_put(s, "big", buf, len), 0);
	expect_get(s, "big", 0, 0, buf, len);
	expect_get(s, "big", 1000, 5000, buf + 1000, 5000);
	cr_assert_eq(objstore_head(s, "big", &size), 0);
	cr_assert_eq(size, len);
	cr_assert_eq(objstore_del(s, "big"), 0);
	expect_missing(s, "big");
	cr_assert_eq(objstore_get(s, "big", 0, 0, &data, &got), ENOENT);
	objstore_close(s);
	free(buf);
}

/*
 * Private s3rvers, killed (by PID) at the end of the test: a lenient one
 * (--allow-mismatched-signatures) lists, a strict one refuses a wrong
 * secret, and neither can do both: s3rver signs a bucket-level request as
 * "/bucket" where libs3 signs "/bucket/" (tests/lib/services.sh). The
 * shared one, $GRANARY_TEST_S3, is lenient; these tests do not rely on it.
 */
static const char *find_s3rver(void)
{
	static char path[PATH_MAX];
	const char *env = getenv("GRANARY_S3RVER");
	if (env && access(env, X_OK) == 0)
		return env;
	if (access(".deps/node_modules/.bin/s3rver", X_OK) == 0)
		return ".deps/node_modules/.bin/s3rver";
	/* __FILE__ is tests/unit/test_objstore.c, relative or absolute */
	snprintf(path, sizeof(path), "%s", __FILE__);
	char *cut = strstr(path, "tests/unit/");
	if (cut) {
		snprintf(cut, sizeof(path) - (size_t)(cut - path),
			 ".deps/node_modules/.bin/s3rver");
		if (access(path, X_OK) == 0)
			return path;
	}
	return NULL;
}

static int wait_listening(int port, double secs)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	for (int i = 0; i < (int)(secs * 20); i++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		int ok = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
		close(fd);
		if (ok)
			return 1;
		usleep(50000);
	}
	return 0;
}

/* Start a private s3rver (strict: checking signatures) with the bucket
 * granary-test; its port. Skips the test when s3rver is not installed. */
static int private_s3rver(int strict)
{
	const char *bin = find_s3rver();
	char dir[PATH_MAX], port_s[16];

	if (!bin) {
		fprintf(stderr, "test_objstore: s3rver not found (run "
				"tools/install-deps.sh): case skipped\n");
		cr_skip_test("s3rver not found");
	}
	snprintf(dir, sizeof(dir), "%s/s3rver", make_tmp_root());
	cr_assert_eq(mkdir(dir, 0755), 0);
	int port = closed_port();
	snprintf(port_s, sizeof(port_s), "%d", port);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);
		dup2(null, 1);
		dup2(null, 2);
		/* ListObjectsV2 continuation tokens are DES-encrypted: OpenSSL
		 * 3's legacy provider (as tests/lib/services.sh) */
		setenv("NODE_OPTIONS", "--openssl-legacy-provider", 1);
		/* strict: the flag left out (argv ends at its NULL) */
		char *argv[] = {(char *)bin,
				"-d",
				dir,
				"-a",
				"127.0.0.1",
				"-p",
				port_s,
				"--silent",
				"--configure-bucket",
				"granary-test",
				strict ? NULL : "--allow-mismatched-signatures",
				NULL};
		execv(bin, argv);
		_exit(127);
	}
	private_pid = pid;
	cr_assert(wait_listening(port, 30), "private s3rver did not start");
	return port;
}

static int count_cb(void *arg, const char *key, uint64_t size, int64_t mtime)
{
	(void)mtime;
	int *n = arg;
	(void)size;
	if (!strncmp(key, "many/", 5))
		(*n)++;
	return 0;
}

/* More than one page (1000 keys each): pagination must neither lose nor
 * repeat keys, and a callback's error stops it. */
static void list_pages(struct objstore *s)
{
	char key[32];
	int n = 1203, seen = 0;
	for (int i = 0; i < n; i++) {
		snprintf(key, sizeof(key), "many/%05d", i);
		cr_assert_eq(objstore_put(s, key, "", 0), 0);
	}
	cr_assert_eq(objstore_list(s, "many/", count_cb, &seen), 0);
	cr_assert_eq(seen, n, "listed %d of %d keys", seen, n);
	struct list_stop st = {0};
	cr_assert_eq(objstore_list(s, "many/", list_stop_cb, &st), 4242);
}

Test(objstore, s3_list_on_lenient_s3rver, .timeout = 90)
{
	char url[128];
	int port = private_s3rver(0);

	struct objstore *s;
	struct objstore_creds creds = {"S3RVER", "S3RVER", NULL};
	snprintf(url, sizeof(url), "s3+http://127.0.0.1:%d/granary-test/lst",
		 port);
	cr_assert_eq(objstore_open(url, &creds, &s), 0);
	suite_list(s);

	list_pages(s);
	objstore_close(s);
}

/* ---- retries through outages (the wrappers' policy, on mem://) ---- */

static struct objstore *open_retry(unsigned window_ms)
{
	struct objstore *s = NULL;

	cr_assert_eq(objstore_open("mem://", NULL, &s), 0);
	objstore_set_retry_window(s, window_ms);
	cr_assert_eq(objstore_put(s, "k", "abc", 3), 0);
	return s;
}

static void expect_retries(struct objstore *s, uint64_t retries,
			   uint64_t gave_up)
{
	struct objstore_stats st;

	objstore_get_stats(s, &st);
	cr_assert_eq(st.retries, retries, "retries %llu, want %llu",
		     (unsigned long long)st.retries,
		     (unsigned long long)retries);
	cr_assert_eq(st.gave_up, gave_up, "gave_up %llu, want %llu",
		     (unsigned long long)st.gave_up,
		     (unsigned long long)gave_up);
}

/* An outage shorter than the window is a pause: every request kind comes
 * through it, one attempt per injected failure plus the one that works. */
Test(objstore, retry_rides_out_transient_errors, .timeout = 30)
{
	struct objstore *s = open_retry(60000);
	struct objstore_view v;
	uint64_t size = 0;
	void *d = NULL;
	size_t got = 0;

	s->fail_err = OBJSTORE_ESERVER;
	s->fail_next = 4;
	cr_assert_eq(objstore_get(s, "k", 0, 0, &d, &got), 0);
	cr_assert_eq(got, 3);
	cr_assert_eq(memcmp(d, "abc", 3), 0);
	free(d);
	cr_assert_eq(s->fail_next, 0);
	expect_retries(s, 4, 0);

	s->fail_err = OBJSTORE_EUNREACH;
	s->fail_next = 2;
	cr_assert_eq(objstore_put(s, "k2", "xy", 2), 0);
	s->fail_next = 2;
	cr_assert_eq(objstore_head(s, "k2", &size), 0);
	cr_assert_eq(size, 2);
	s->fail_next = 2;
	cr_assert_eq(objstore_get_view(s, "k2", &v), 0);
	cr_assert_eq(v.len, 2);
	objstore_view_release(&v);
	s->fail_next = 2;
	cr_assert_eq(objstore_del(s, "k2"), 0);
	cr_assert_eq(objstore_head(s, "k2", &size), ENOENT);
	expect_retries(s, 12, 0);
	objstore_close(s);
}

/* An outage longer than the window: the store's error after a few tries
 * (100, 200 ms... pauses fit a 400 ms window 2 to 4 times), counted once
 * as given up; the next request starts a window of its own. */
Test(objstore, retry_gives_up_after_window, .timeout = 30)
{
	struct objstore *s = open_retry(400);
	void *d = NULL;
	size_t got = 0;

	s->fail_err = OBJSTORE_EUNREACH;
	s->fail_next = 1000;
	cr_assert_eq(objstore_get(s, "k", 0, 0, &d, &got), OBJSTORE_EUNREACH);
	cr_assert_null(d);
	int tries = 1000 - s->fail_next;
	cr_assert(tries >= 3 && tries <= 5, "%d tries in a 400 ms window",
		  tries);
	expect_retries(s, (uint64_t)tries - 1, 1);

	/* the store is back: the outage ends with the first answer (after
	 * the pause that follows a closed window's last attempt) */
	s->fail_next = 0;
	usleep(1200 * 1000);
	cr_assert_eq(objstore_get(s, "k", 0, 0, &d, &got), 0);
	free(d);
	s->fail_next = 1;
	cr_assert_eq(objstore_get(s, "k", 0, 0, &d, &got), 0);
	free(d);
	cr_assert_eq(s->fail_next, 0);
	expect_retries(s, (uint64_t)tries, 1);

	/* window 0: one attempt, as a backend's own retries would be */
	objstore_set_retry_window(s, 0);
	s->fail_next = 1;
	cr_assert_eq(objstore_put(s, "k", "z", 1), OBJSTORE_EUNREACH);
	cr_assert_eq(s->fail_next, 0);
	expect_retries(s, (uint64_t)tries, 2);
	objstore_close(s);
}

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The window is the outage's, not each request's: requests one after
 * another in one outage (a reader after a failed prefetch, the kernel
 * reading a page again after a failed readahead) wait one window in all,
 * and after it fail at once, without an attempt, but for one attempt a
 * second after the last one ended; a request that began before the
 * outage keeps its own window. */
Test(objstore, retry_window_is_the_outage, .timeout = 30)
{
	struct objstore *s = open_retry(1500);
	void *d = NULL;
	size_t got = 0;

	s->fail_err = OBJSTORE_ESERVER;
	s->fail_next = 100000;
	double t0 = mono_s();
	cr_assert_eq(objstore_get(s, "k", 0, 0, &d, &got), OBJSTORE_ESERVER);
	double first = mono_s() - t0;
	cr_assert_geq(first, 0.5, "the first request gave up after %.2f s",
		      first);
	/* more requests until the window closed: each ends by then */
	while (mono_s() - t0 < 1.5)
		cr_assert_eq(objstore_get(s, "k", 0, 0, &d, &got),
			     OBJSTORE_ESERVER);
	double all = mono_s() - t0;
	cr_assert_lt(all, 3.0, "one outage took %.2f s for a 1.5 s window",
		     all);
	/* closed: no attempt, the outage's error at once */
	int left = s->fail_next;
	t0 = mono_s();
	cr_assert_eq(objstore_get(s, "k", 0, 0, &d, &got), OBJSTORE_ESERVER);
	cr_assert_eq(objstore_put(s, "k2", "x", 1), OBJSTORE_ESERVER);
	cr_assert_lt(mono_s() - t0, 0.5);
	cr_assert_eq(s->fail_next, left, "a closed window tried the store");
	/* a second after the last attempt, one request tries again */
	usleep(1100 * 1000);
	cr_assert_eq(objstore_get(s, "k", 0, 0, &d, &got), OBJSTORE_ESERVER);
	cr_assert_eq(s->fail_next, left - 1);
	cr_assert_eq(objstore_get(s, "k", 0, 0, &d, &got), OBJSTORE_ESERVER);
	cr_assert_eq(s->fail_next, left - 1);
	/* and finds the store back: the outage is over */
	s->fail_next = 0;
	usleep(1100 * 1000);
	cr_assert_eq(objstore_get(s, "k", 0, 0, &d, &got), 0);
	free(d);
	s->fail_next = 2;
	cr_assert_eq(objstore_put(s, "k2", "y", 1), 0, "a new outage");
	cr_assert_eq(s->fail_next, 0);
	objstore_close(s);
}

/* Errors that no retry can cure come back from the first attempt, however
 * long the window. */
Test(objstore, retry_not_for_permanent_errors, .timeout = 30)
{
	int perm[] = {
	    OBJSTORE_EAUTH, OBJSTORE_ENOBUCKET, EIO, ETIMEDOUT, EACCES, ENOSPC};
	struct objstore *s = open_retry(60000);
	void *d = NULL;
	size_t got = 0;

	for (size_t i = 0; i < sizeof(perm) / sizeof(perm[0]); i++) {
		s->fail_err = perm[i];
		s->fail_next = 5;
		cr_assert_eq(objstore_get(s, "k", 0, 0, &d, &got), perm[i]);
		cr_assert_eq(s->fail_next, 4, "%s retried",
			     gr_strerror(perm[i]));
		cr_assert_eq(objstore_put(s, "k", "q", 1), perm[i]);
		cr_assert_eq(s->fail_next, 3);
	}
	s->fail_next = 0;
	/* a missing object is ENOENT at once */
	cr_assert_eq(objstore_get(s, "nope", 0, 0, &d, &got), ENOENT);
	expect_retries(s, 0, 0);
	cr_assert(!objstore_transient(0) && !objstore_transient(ENOENT) &&
		  !objstore_transient(OBJSTORE_EAUTH) &&
		  objstore_transient(OBJSTORE_EUNREACH) &&
		  objstore_transient(OBJSTORE_ESERVER));
	objstore_close(s);
}

/* The tools' window comes from the environment. */
Test(objstore, retry_window_from_env)
{
	struct objstore *s = NULL;

	cr_assert_eq(setenv("GRANARY_IO_RETRY_WINDOW", "7", 1), 0);
	cr_assert_eq(objstore_open("mem://", NULL, &s), 0);
	cr_assert_eq(s->retry_window_ms, 7000);
	objstore_close(s);
	cr_assert_eq(setenv("GRANARY_IO_RETRY_WINDOW", "soon", 1), 0);
	cr_assert_eq(objstore_open("mem://", NULL, &s), 0);
	cr_assert_eq(s->retry_window_ms, OBJSTORE_RETRY_WINDOW_MS);
	objstore_close(s);
	unsetenv("GRANARY_IO_RETRY_WINDOW");
	cr_assert_eq(objstore_open("mem://", NULL, &s), 0);
	cr_assert_eq(s->retry_window_ms, OBJSTORE_RETRY_WINDOW_MS);
	objstore_close(s);
}

/* ---- s3 over libcurl: the V4 front, URL options, errors by cause ---- */

static const char *v4_base(void)
{
	const char *u = getenv("GRANARY_TEST_S3V4");
	if (!u || !*u) {
		fprintf(stderr, "test_objstore: GRANARY_TEST_S3V4 is not set: "
				"case skipped (run through tests/run-unit.sh)\n");
		cr_skip_test("GRANARY_TEST_S3V4 not set (use tests/run-unit.sh)");
	}
	return u;
}

/* Open url (at the front: its credentials, or sk as the secret) with no
 * retry window, so that each error is the first attempt's. */
static struct objstore *open_v4(const char *url, const char *sk)
{
	struct objstore_creds c = v4_creds();
	struct objstore *s = NULL;

	if (sk)
		c.secret_key = sk;
	int err = objstore_open(url, &c, &s);
	cr_assert_eq(err, 0, "open '%s': %s", url, gr_strerror(err));
	objstore_set_retry_window(s, 0);
	return s;
}

/* Run op on a store whose warnings go to a file, and hand back what was
 * logged (malloc'd). */
static char *logged_probe(struct objstore *s, int *err)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/log", make_tmp_root());
	cr_assert_eq(log_open(path, LOG_INFO), 0);
	*err = objstore_probe(s);
	log_open(NULL, LOG_INFO);
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f);
	char *text = calloc(1, 65536);
	size_t n = fread(text, 1, 65535, f);
	text[n] = '\0';
	fclose(f);
	return text;
}

/* Every kind of request, V4-signed, accepted by the verifying front: the
 * behaviour suites (s3v4_*) above; here a body over 8 MiB (hashed: plain
 * HTTP), more than one page of listing (continuation-token), and keys with
 * every allowed punctuation character listed back exactly. */
Test(objstore, s3v4_big_body_pages_and_punctuation, .timeout = 120)
{
	char url[512];
	snprintf(url, sizeof(url), "%s/granary-test/unit-%d/v4", v4_base(),
		 (int)getpid());
	struct objstore *s = open_v4(url, NULL);
	size_t len = 9 << 20;
	unsigned char *buf = malloc(len);

	fill(buf, len, 9);
	cr_assert_eq(objstore_put(s, "nine", buf, len), 0);
	expect_get(s, "nine", 0, 0, buf, len);
	expect_get(s, "nine", len - 100, 1000, buf + len - 100, 100);
	expect_get(s, "nine", len, 10, NULL, 0);
	cr_assert_eq(objstore_del(s, "nine"), 0);
	free(buf);

	const char *odd = "p/-_.~+=,@:/x";
	struct list_collect l;
	memset(&l, 0, sizeof(l));
	cr_assert_eq(objstore_put(s, odd, "o", 1), 0);
	cr_assert_eq(objstore_list(s, "p/-_.~+=,@:", list_collect_cb, &l), 0);
	cr_assert_eq(l.n, 1);
	cr_assert_str_eq(l.keys[0], odd);
	cr_assert_eq(objstore_del(s, odd), 0);

	list_pages(s);
	objstore_close(s);
}

/* A wrong secret is refused at once: not retried through the window. */
Test(objstore, s3v4_wrong_secret_is_eauth_at_once)
{
	char url[512];
	struct timespec t0;
	snprintf(url, sizeof(url), "%s/granary-test", v4_base());
	struct objstore *s = open_v4(url, "not-the-secret");
	objstore_set_retry_window(s, 10000);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	cr_assert_eq(objstore_probe(s), OBJSTORE_EAUTH);
	cr_assert_lt(secs_since(&t0), 2.0, "took %.1f s", secs_since(&t0));
	objstore_close(s);

	struct objstore_creds c = {"NOBODY", "x", NULL};
	cr_assert_eq(objstore_open(url, &c, &s), 0);
	cr_assert_eq(objstore_probe(s), OBJSTORE_EAUTH);
	objstore_close(s);
}

/* A region the server does not take: EAUTH, and the log says which one
 * it wants. Also the region an AWS host name implies. */
Test(objstore, s3v4_wrong_region_is_eauth_naming_it)
{
	char url[512], ct[64];
	int err;
	snprintf(url, sizeof(url), "%s/granary-test?region=eu-west-1",
		 v4_base());
	struct objstore *s = open_v4(url, NULL);
	char *log = logged_probe(s, &err);
	cr_assert_eq(err, OBJSTORE_EAUTH, "got %s", gr_strerror(err));
	cr_assert(strstr(log, "AuthorizationHeaderMalformed"), "%s", log);
	cr_assert(strstr(log, "region 'us-east-1'"), "%s", log);
	free(log);
	objstore_close(s);

	/* s3.eu-west-1.amazonaws.com signs for eu-west-1 (refused here),
	 * s3.amazonaws.com for us-east-1 (taken) */
	snprintf(ct, sizeof(ct), "127.0.0.1:%s",
		 getenv("GRANARY_TEST_S3V4_PORT"));
	cr_assert_eq(setenv("GRANARY_S3_CONNECT_TO", ct, 1), 0);
	s = open_v4("s3+http://s3.eu-west-1.amazonaws.com/granary-test", NULL);
	cr_assert_eq(objstore_probe(s), OBJSTORE_EAUTH);
	objstore_close(s);
	s = open_v4("s3+http://s3.amazonaws.com/granary-test", NULL);
	cr_assert_eq(objstore_probe(s), 0);
	objstore_close(s);
	unsetenv("GRANARY_S3_CONNECT_TO");
}

/* Virtual-hosted style through the front: the bucket in the signed Host,
 * connected to loopback by GRANARY_S3_CONNECT_TO. */
Test(objstore, s3v4_virtual_hosted)
{
	char url[512], ct[64];
	snprintf(ct, sizeof(ct), "127.0.0.1:%s", getenv("GRANARY_TEST_S3V4_PORT")
		 ? getenv("GRANARY_TEST_S3V4_PORT") : "1");
	v4_base();
	snprintf(url, sizeof(url),
		 "s3+http://s3.amazonaws.com/granary-test/unit-%d/vh"
		 "?style=virtual",
		 (int)getpid());
	cr_assert_eq(setenv("GRANARY_S3_CONNECT_TO", ct, 1), 0);
	struct objstore *s = open_v4(url, NULL);
	unsetenv("GRANARY_S3_CONNECT_TO"); /* read at open */
	suite_basic(s);
	suite_list(s);
	objstore_close(s);
}

/* Temporary credentials (STS): the front takes its temporary key only
 * with the session token, signed. Given in creds, or in the environment
 * with its own pair (AWS_SESSION_TOKEN with AWS_*, GRANARY_S3_SESSION_TOKEN
 * with GRANARY_S3_*), the token goes with every kind of request. */
Test(objstore, s3v4_session_token)
{
	const char *tak = getenv("GRANARY_TEST_S3V4_TEMP_ACCESS_KEY");
	const char *tsk = getenv("GRANARY_TEST_S3V4_TEMP_SECRET_KEY");
	const char *tok = getenv("GRANARY_TEST_S3V4_SESSION_TOKEN");
	struct objstore_creds c = {tak, tsk, tok};
	struct objstore *s;
	char url[512];

	snprintf(url, sizeof(url), "%s/granary-test/unit-%d/sts", v4_base(),
		 (int)getpid());
	if (!tak || !tsk || !tok)
		cr_skip_test("the V4 front has no temporary key (an old "
			     "tests/lib/services.sh?)");
	cr_assert_eq(objstore_open(url, &c, &s), 0);
	objstore_set_retry_window(s, 0);
	suite_basic(s);
	suite_list(s);
	objstore_close(s);

	/* without the token, with another one, or a token with a key that
	 * is no temporary one: refused */
	struct objstore_creds bad[] = {
	    {tak, tsk, NULL},
	    {tak, tsk, "not-the-token"},
	    {getenv("GRANARY_TEST_S3V4_ACCESS_KEY"),
	     getenv("GRANARY_TEST_S3V4_SECRET_KEY"), tok},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		cr_assert_eq(objstore_open(url, &bad[i], &s), 0);
		objstore_set_retry_window(s, 0);
		int err = objstore_put(s, "k", "v", 1);
		cr_expect_eq(err, OBJSTORE_EAUTH, "case %zu: %s", i,
			     gr_strerror(err));
		objstore_close(s);
	}

	/* from the environment: each pair with its own token */
	unsetenv("GRANARY_S3_ACCESS_KEY");
	unsetenv("GRANARY_S3_SECRET_KEY");
	setenv("AWS_ACCESS_KEY_ID", tak, 1);
	setenv("AWS_SECRET_ACCESS_KEY", tsk, 1);
	setenv("AWS_SESSION_TOKEN", tok, 1);
	cr_assert_eq(objstore_open(url, NULL, &s), 0);
	objstore_set_retry_window(s, 0);
	cr_expect_eq(objstore_put(s, "aws", "v", 1), 0);
	cr_expect_eq(objstore_del(s, "aws"), 0);
	objstore_close(s);
	setenv("GRANARY_S3_ACCESS_KEY", tak, 1);
	setenv("GRANARY_S3_SECRET_KEY", tsk, 1);
	unsetenv("AWS_SESSION_TOKEN"); /* not GRANARY_S3_*'s */
	cr_assert_eq(objstore_open(url, NULL, &s), 0);
	objstore_set_retry_window(s, 0);
	cr_expect_eq(objstore_put(s, "g", "v", 1), OBJSTORE_EAUTH);
	objstore_close(s);
	setenv("GRANARY_S3_SESSION_TOKEN", tok, 1);
	cr_assert_eq(objstore_open(url, NULL, &s), 0);
	objstore_set_retry_window(s, 0);
	cr_expect_eq(objstore_put(s, "g", "v", 1), 0);
	cr_expect_eq(objstore_del(s, "g"), 0);
	objstore_close(s);
}

/* V2 signs the token too (an x-amz-* header): s3rver checks V2
 * signatures with every x-amz-* header in them, and takes any token. */
Test(objstore, s3v2_session_token_is_signed)
{
	struct objstore_creds c = {"S3RVER", "S3RVER", "tok/en+with=marks"};
	struct objstore *s;
	char url[PATH_MAX * 3 + 64];

	backend_url("s3v2", url, sizeof(url));
	cr_assert_eq(objstore_open(url, &c, &s), 0);
	objstore_set_retry_window(s, 0);
	cr_assert_eq(objstore_put(s, "tok", "v", 1), 0);
	expect_get(s, "tok", 0, 0, "v", 1);
	cr_assert_eq(objstore_del(s, "tok"), 0);
	objstore_close(s);
	cleanup_tmp();
}

Test(objstore, s3v4_missing_bucket_is_enobucket)
{
	char url[512];
	snprintf(url, sizeof(url), "%s/no-such-bucket-%d", v4_base(),
		 (int)getpid());
	struct objstore *s = open_v4(url, NULL);
	cr_assert_eq(objstore_probe(s), OBJSTORE_ENOBUCKET);
	objstore_close(s);
}

Test(objstore, s3_bad_host_name_is_edns)
{
	struct objstore_creds c = {"S3RVER", "S3RVER", NULL};
	struct objstore *s;
	cr_assert_eq(objstore_open("s3+http://no-such-host.invalid/b", &c, &s),
		     0);
	objstore_set_retry_window(s, 0);
	int err = objstore_probe(s);
	cr_assert_eq(err, OBJSTORE_EDNS, "got %s", gr_strerror(err));
	objstore_close(s);
}

/* An s3:// (TLS) URL at a plain-HTTP server says so. */
Test(objstore, s3_tls_url_at_plain_http_is_eplain)
{
	const char *port = getenv("GRANARY_TEST_S3_PORT");
	struct objstore_creds c = {"S3RVER", "S3RVER", NULL};
	struct objstore *s;
	char url[128];
	if (!port)
		s3_base();
	snprintf(url, sizeof(url), "s3://127.0.0.1:%s/granary-test", port);
	cr_assert_eq(objstore_open(url, &c, &s), 0);
	objstore_set_retry_window(s, 0);
	int err = objstore_probe(s);
	cr_assert_eq(err, OBJSTORE_EPLAIN, "got %s", gr_strerror(err));
	objstore_close(s);
}

/* V2 is verified by a strict s3rver: listings too (signed "/bucket"). */
Test(objstore, s3v2_list_on_strict_s3rver, .timeout = 90)
{
	char url[128];
	struct objstore_creds c = {"S3RVER", "S3RVER", NULL};
	struct objstore *s;
	snprintf(url, sizeof(url),
		 "s3+http://127.0.0.1:%d/granary-test/lst?sig=v2",
		 private_s3rver(1));
	cr_assert_eq(objstore_open(url, &c, &s), 0);
	suite_list(s);
	objstore_close(s);
}

Test(objstore, s3_url_options)
{
	static const char *good[] = {
	    "s3://h/bkt?region=eu-west-1",
	    "s3://h/bkt/p?sig=v2",
	    "s3://h/bkt?sig=v4&style=path",
	    "s3://h:9000/bkt/p/?style=virtual&region=us-east-2&sig=v2",
	};
	static const char *bad[] = {
	    "s3://h/bkt?",		"s3://h/bkt?x=1",
	    "s3://h/bkt?sig=v3",	"s3://h/bkt?style=",
	    "s3://h/bkt?region=EU_1",	"s3://h/bkt?sig=v4&",
	    "s3://h/B_d?style=virtual", "s3://h/bkt?region",
	};
	struct objstore_creds c = {"AK", "SK", NULL};
	struct objstore *s;
	char out[256];

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		cr_assert_eq(objstore_open(good[i], &c, &s), 0, "%s", good[i]);
		cr_assert_str_eq(s->url, good[i]); /* shown with its options */
		objstore_close(s);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(objstore_open(bad[i], &c, &s), OBJSTORE_EURL,
			     "%s", bad[i]);
	/* places: where the objects lie, the options left out */
	expect_place("s3://h/bkt/p/?region=eu-west-1", 0, "s3://h/bkt/p");
	expect_place("s3+http://h/bkt?sig=v2", 0, "s3+http://h/bkt");
	cr_assert_eq(objstore_url_parent("s3://h/bkt/a/b?sig=v2", out, 256), 0);
	cr_assert_str_eq(out, "s3://h/bkt/a");
	cr_assert_eq(objstore_url_parent("s3://h/bkt?sig=v2", out, 256),
		     ENOENT);
	cr_assert_eq(objstore_url_place("s3://h?x=/bkt", 0, out, 256),
		     OBJSTORE_EURL);
}

Test(objstore, s3_ca_bundle_must_be_readable)
{
	struct objstore_creds c = {"AK", "SK", NULL};
	struct objstore *s;
	cr_assert_eq(setenv("GRANARY_S3_CA_BUNDLE", "/no/such/ca.pem", 1), 0);
	int err = objstore_open("s3://h/bkt", &c, &s);
	unsetenv("GRANARY_S3_CA_BUNDLE");
	cr_assert_eq(err, ENOENT, "got %s", gr_strerror(err));
}
