/*
 * test_diskcache_rank.c - the disk cache's eviction that knows the future
 * (diskcache.h, "The future"): demoted entries first, then unplanned ones by
 * the LRU and min_age, then planned ones the furthest ahead first, KEEP
 * never, fills refused when needed later than all they would evict; the
 * ranker set and unset under parallel fills; and two shuffled epochs over a
 * dataset twice the cache's size, with and without a ranker. Its own file:
 * test_diskcache.c is at the size limit of a .c file.
 */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "fs/store/diskcache.h"

#define NS   "vol-1"
#define KEEP DISKCACHE_RANK_KEEP
#define NONE DISKCACHE_RANK_NONE

/* ---- fixtures ---- */

static char root[64];	    /* mkdtemp */
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
	strcpy(root, "/tmp/granary-dcr-XXXXXX");
	cr_assert_not_null(mkdtemp(root));
}

static void teardown(void)
{
	objstore_close(dc);
	dc = NULL;
	if (root[0])
		nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	root[0] = '\0';
}

static struct objstore *open_mem(void)
{
	struct objstore *m;

	cr_assert_eq(objstore_open("mem://", NULL, &m), 0);
	return m;
}

static struct objstore *open_cache(struct objstore *backend, uint64_t size,
				   unsigned min_age)
{
	struct diskcache_opts o = {
	    .dirs = root, .ns = NS, .size = size, .min_age = min_age};
	struct objstore *c = NULL;

	cr_assert_eq(diskcache_open(backend, &o, &c), 0);
	return c;
}

static uint64_t test_seed(void)
{
	const char *s = getenv("GRANARY_SEED");

	return s ? strtoull(s, NULL, 0) : 34;
}

/* Object i's key; index_of() gives i back (the test rankers' lookup). */
static void key_of(int i, char *buf, size_t cap)
{
	snprintf(buf, cap, "blocks/0/%d/%d_0", i % 7, i);
}

static int index_of(const char *key)
{
	const char *s = strrchr(key, '/');

	return s ? atoi(s + 1) : -1;
}

/* Deterministic bytes of object i. */
static unsigned char *make_data(int i, size_t len)
{
	unsigned char *p = malloc(len ? len : 1);
	uint64_t x = XXH3_64bits(&i, sizeof(i)) ^ test_seed();

	cr_assert(p);
	for (size_t k = 0; k < len; k++) {
		x += 0x9e3779b97f4a7c15ull;
		uint64_t z = x;
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
		p[k] = (unsigned char)(z >> 56);
	}
	return p;
}

static void put_obj(struct objstore *b, int i, size_t len)
{
	char key[64];
	unsigned char *d = make_data(i, len);

	key_of(i, key, sizeof(key));
	cr_assert_eq(objstore_put(b, key, d, len), 0);
	free(d);
}

/* Get object i through the cache: 0 if its bytes came back right.
 * Threads use it (they cannot cr_assert). */
static int read_obj(struct objstore *c, int i, size_t len)
{
	char key[64];
	void *got = NULL;
	size_t n = 0;
	unsigned char *want = make_data(i, len);

	key_of(i, key, sizeof(key));
	int bad = objstore_get(c, key, 0, 0, &got, &n) || n != len ||
		  memcmp(got, want, len);
	free(got);
	free(want);
	return bad;
}

static void expect_obj(int i, size_t len)
{
	cr_assert_eq(read_obj(dc, i, len), 0, "object %d read wrong", i);
}

static int has(int i)
{
	char key[64];

	key_of(i, key, sizeof(key));
	return diskcache_contains(dc, key);
}

static void demote(int i)
{
	char key[64];

	key_of(i, key, sizeof(key));
	diskcache_demote(dc, key);
}

static struct diskcache_stats cstats(void)
{
	struct diskcache_stats st;

	diskcache_get_stats(dc, &st);
	return st;
}

static uint64_t backend_gets(void)
{
	struct objstore_stats st;

	objstore_get_stats(diskcache_backend(dc), &st);
	return st.gets;
}

/* Regular files under root (temp files included). */
static uint64_t du_files;

static int du_one(const char *path, const struct stat *st, int flag,
		  struct FTW *ftw)
{
	(void)path;
	(void)ftw;
	if (flag == FTW_F && S_ISREG(st->st_mode))
		du_files++;
	return 0;
}

static uint64_t files_on_disk(void)
{
	du_files = 0;
	nftw(root, du_one, 16, FTW_PHYS);
	return du_files;
}

/* ---- a ranker from a table: tbl[i] is object i's rank ---- */

#define TBL_MAX 64
static uint64_t tbl[TBL_MAX];

static void tbl_reset(void)
{
	for (int i = 0; i < TBL_MAX; i++)
		tbl[i] = NONE;
}

static uint64_t tbl_rank(void *arg, const char *key)
{
	int i = index_of(key);

	(void)arg;
	return i >= 0 && i < TBL_MAX ? tbl[i] : NONE;
}

/* A cache of 4 objects of 1000 bytes, objects 0..3 read into it in
 * order (0 the oldest), 8 in the store. */
static void four(unsigned min_age, int ranked)
{
	struct objstore *m = open_mem();

	make_root();
	for (int i = 0; i < 8; i++)
		put_obj(m, i, 1000);
	dc = open_cache(m, 4000, min_age);
	if (ranked)
		diskcache_set_ranker(dc, tbl_rank, NULL, NULL);
	for (int i = 0; i < 4; i++)
		expect_obj(i, 1000);
	cr_assert_eq(cstats().entries, 4);
}

/* ---- demote ---- */

static void demote_case(int ranked)
{
	tbl_reset();
	four(3600, ranked); /* every entry young: none may go by the LRU */
	demote(2);
	demote(7); /* not cached: nothing to count */
	cr_assert_eq(cstats().demoted, 1);
	expect_obj(4, 1000);
	cr_assert(has(4), "a fill found no room: demoted 2 not evicted");
	cr_assert_not(has(2));
	cr_assert(has(0) && has(1) && has(3));
	struct diskcache_stats st = cstats();
	cr_assert_eq(st.evictions, 1);
	cr_assert_eq(st.evict_demoted, 1);
	cr_assert_eq(st.evict_planned, 0);
	cr_assert_eq(st.fill_skips, 0);

	/* a hit clears the mark */
	demote(3);
	expect_obj(3, 1000);
	expect_obj(5, 1000);
	cr_assert_not(has(5));
	cr_assert(has(3) && has(0) && has(1) && has(4));
	st = cstats();
	cr_assert_eq(st.fill_skips, 1);
	cr_assert_eq(st.evictions, 1);
	cr_assert_eq(st.demoted, 2);

	/* two demoted: one goes, the others stay */
	demote(0);
	demote(1);
	expect_obj(5, 1000);
	cr_assert(has(5) && has(3) && has(4));
	cr_assert_eq(has(0) + has(1), 1);
	st = cstats();
	cr_assert_eq(st.evict_demoted, 2);
	cr_assert_eq(st.entries, 4);
	cr_assert_eq(st.bytes, 4000);
	cr_assert_eq(files_on_disk(), 4);
}

Test(diskcache, rank_demote_evicts_first, .fini = teardown)
{
	demote_case(0);
}

Test(diskcache, rank_demote_evicts_first_ranked, .fini = teardown)
{
	demote_case(1);
}

/* The plans changed (epoch 2's order replaced epoch 1's): entries they
 * had demoted are needed again; their marks do not count while they are
 * ranked, and count again once no plan needs them. */
Test(diskcache, rank_stale_marks_passed_over, .fini = teardown)
{
	tbl_reset();
	four(3600, 1);
	for (int i = 0; i < 4; i++)
		demote(i); /* epoch 1 passed them all: 3 the oldest now */
	tbl[0] = 20;
	tbl[1] = 30;
	tbl[2] = 40; /* the new order needs 2 last */
	tbl[3] = 10;
	tbl[4] = KEEP;
	expect_obj(4, 1000);
	cr_assert(has(4));
	cr_assert_not(has(2), "a stale mark evicted an entry needed sooner");
	cr_assert(has(0) && has(1) && has(3));
	struct diskcache_stats st = cstats();
	cr_assert_eq(st.evictions, 1);
	cr_assert_eq(st.evict_planned, 1);
	cr_assert_eq(st.evict_demoted, 0);
	/* no plan needs 1 now: its mark counts again, before any rank */
	tbl[1] = NONE;
	tbl[5] = KEEP;
	expect_obj(5, 1000);
	cr_assert(has(5));
	cr_assert_not(has(1));
	cr_assert(has(0) && has(3) && has(4));
	st = cstats();
	cr_assert_eq(st.evictions, 2);
	cr_assert_eq(st.evict_demoted, 1);
	cr_assert_eq(st.evict_planned, 1);
}

/* A fetch ahead asks for room first: free room, demoted or unplanned
 * entries, never a planned one (it would be fetched again later). */
Test(diskcache, rank_room_ahead_takes_no_planned, .fini = teardown)
{
	char key[64];

	tbl_reset();
	for (int i = 0; i < 4; i++)
		tbl[i] = 10 * (uint64_t)(i + 1);
	four(3600, 1);
	key_of(4, key, sizeof(key));
	tbl[4] = KEEP;
	cr_assert_not(diskcache_room(dc, key, 1000), "room by a planned entry");
	tbl[1] = NONE;
	demote(1); /* passed, needed by no plan */
	cr_assert(diskcache_room(dc, key, 1000));
	cr_assert_not(diskcache_room(dc, key, 2000));
	cr_assert_eq(cstats().evictions, 0, "a question evicted");
	expect_obj(4, 1000);
	cr_assert(has(4) && !has(1));
	cr_assert(has(0) && has(2) && has(3));
}

/* ---- KEEP, furthest ahead, refused fills ---- */

Test(diskcache, rank_keep_never_evicted, .fini = teardown)
{
	tbl_reset();
	for (int i = 0; i < 4; i++)
		tbl[i] = KEEP;
	four(0, 1);	     /* plain LRU would evict 0 */
	expect_obj(4, 1000); /* unplanned */
	cr_assert_not(has(4));
	tbl[4] = KEEP;
	expect_obj(4, 1000); /* in a window too: still no room */
	cr_assert_not(has(4));
	demote(2); /* demoted, but in a window: stays */
	expect_obj(5, 1000);
	cr_assert_not(has(5));
	for (int i = 0; i < 4; i++)
		cr_assert(has(i), "KEEP entry %d evicted", i);
	struct diskcache_stats st = cstats();
	cr_assert_eq(st.evictions, 0);
	cr_assert_eq(st.fill_skips, 3);

	/* one of them leaves the window: it may go */
	tbl[1] = 100;
	expect_obj(4, 1000);
	cr_assert(has(4));
	cr_assert_not(has(1));
	cr_assert(has(0) && has(2) && has(3));
	st = cstats();
	cr_assert_eq(st.evictions, 1);
	cr_assert_eq(st.evict_planned, 1);
	cr_assert_eq(st.evict_demoted, 0);
}

Test(diskcache, rank_furthest_ahead_first, .fini = teardown)
{
	tbl_reset();
	tbl[0] = 30;
	tbl[1] = 10;
	tbl[2] = 40;
	tbl[3] = 20;
	four(3600, 1); /* planned entries go, min_age or not */
	tbl[4] = 5;
	expect_obj(4, 1000);
	cr_assert(has(4));
	cr_assert_not(has(2), "the entry needed furthest ahead stayed");
	cr_assert(has(0) && has(1) && has(3));
	tbl[5] = KEEP;
	expect_obj(5, 1000);
	cr_assert(has(5));
	cr_assert_not(has(0));
	cr_assert(has(1) && has(3) && has(4));
	struct diskcache_stats st = cstats();
	cr_assert_eq(st.evictions, 2);
	cr_assert_eq(st.evict_planned, 2);
	cr_assert_eq(st.fill_ranked_out, 0);
}

Test(diskcache, rank_unplanned_before_planned, .fini = teardown)
{
	tbl_reset();
	tbl[0] = 10;
	tbl[1] = 20;
	tbl[2] = 30;
	four(0, 1); /* 3 unplanned, the most recently used */
	tbl[4] = KEEP;
	expect_obj(4, 1000);
	cr_assert(has(4));
	cr_assert_not(has(3));
	cr_assert(has(0) && has(1) && has(2));
	struct diskcache_stats st = cstats();
	cr_assert_eq(st.evictions, 1);
	cr_assert_eq(st.evict_planned, 0);
	tbl[5] = 1;
	expect_obj(5, 1000); /* now only planned ones: the furthest */
	cr_assert(has(5));
	cr_assert_not(has(2));
	cr_assert_eq(cstats().evict_planned, 1);
}

Test(diskcache, rank_young_unplanned_guarded, .fini = teardown)
{
	tbl_reset();
	tbl[0] = 10;
	tbl[1] = 20;
	four(3600, 1); /* 2 and 3 unplanned and young */
	tbl[4] = KEEP;
	expect_obj(4, 1000);
	cr_assert(has(4));
	cr_assert_not(has(1));
	cr_assert(has(0) && has(2) && has(3));
	tbl[5] = KEEP;
	expect_obj(5, 1000);
	cr_assert_not(has(0));
	cr_assert(has(2) && has(3) && has(4) && has(5));
	tbl[6] = KEEP;
	expect_obj(6, 1000); /* 2 and 3 are young, 4 and 5 KEEP */
	cr_assert_not(has(6));
	cr_assert(has(2) && has(3) && has(4) && has(5));
	struct diskcache_stats st = cstats();
	cr_assert_eq(st.evict_planned, 2);
	cr_assert_eq(st.evictions, 2);
	cr_assert_eq(st.fill_skips, 1);
}

Test(diskcache, rank_refused_when_needed_later, .fini = teardown)
{
	tbl_reset();
	tbl[0] = 10;
	tbl[1] = 20;
	tbl[2] = 30;
	tbl[3] = 40;
	four(0, 1);
	tbl[4] = 50;
	expect_obj(4, 1000); /* read right, not cached */
	cr_assert_not(has(4));
	for (int i = 0; i < 4; i++)
		cr_assert(has(i), "entry %d evicted for one needed later", i);
	struct diskcache_stats st = cstats();
	cr_assert_eq(st.fill_ranked_out, 1);
	cr_assert_eq(st.fill_skips, 1);
	cr_assert_eq(st.evictions, 0);
	/* unplanned: needed later than anything planned */
	tbl[4] = NONE;
	expect_obj(4, 1000);
	cr_assert_not(has(4));
	cr_assert_eq(cstats().fill_ranked_out, 2);
	/* needed sooner than the furthest: that one goes */
	tbl[4] = 35;
	expect_obj(4, 1000);
	cr_assert(has(4));
	cr_assert_not(has(3));
	st = cstats();
	cr_assert_eq(st.fill_ranked_out, 2);
	cr_assert_eq(st.evict_planned, 1);
	cr_assert_eq(st.entries, 4);
	cr_assert_eq(files_on_disk(), 4);
}

/* ---- with a ranker that ranks nothing, the cache is today's ---- */

struct trace {
	uint64_t hits, misses, fills, fill_skips, evictions, bytes;
	char has[40];
};

/* A fixed mix of gets over 40 objects of several sizes in a cache of
 * about a third of them. */
static void trace_run(unsigned min_age, int ranked, struct trace *t)
{
	struct objstore *m = open_mem();
	unsigned seed = (unsigned)test_seed();

	make_root();
	for (int i = 0; i < 40; i++)
		put_obj(m, i, 1000 + 97 * (size_t)i);
	dc = open_cache(m, 20000, min_age);
	if (ranked)
		diskcache_set_ranker(dc, tbl_rank, NULL, NULL);
	for (int n = 0; n < 600; n++) {
		/* skewed: low numbers more often */
		int i = (int)(rand_r(&seed) % 40);
		if (n % 3)
			i = i * i / 40;
		expect_obj(i, 1000 + 97 * (size_t)i);
	}
	struct diskcache_stats st = cstats();
	t->hits = st.hits;
	t->misses = st.misses;
	t->fills = st.fills;
	t->fill_skips = st.fill_skips;
	t->evictions = st.evictions;
	t->bytes = st.bytes;
	for (int i = 0; i < 40; i++)
		t->has[i] = (char)has(i);
	cr_assert_eq(st.evict_demoted + st.evict_planned + st.fill_ranked_out +
			 st.demoted,
		     0);
	teardown();
}

Test(diskcache, rank_none_is_today, .fini = teardown)
{
	static const unsigned ages[] = {0, 3600};

	tbl_reset();
	for (size_t a = 0; a < 2; a++) {
		struct trace plain, ranked;
		trace_run(ages[a], 0, &plain);
		trace_run(ages[a], 1, &ranked);
		cr_assert_gt(plain.fill_skips + plain.evictions, 0);
		cr_assert_eq(memcmp(&plain, &ranked, sizeof(plain)), 0,
			     "min_age %u: a ranker of nothing changed the "
			     "cache (evictions %llu vs %llu)",
			     ages[a], (unsigned long long)plain.evictions,
			     (unsigned long long)ranked.evictions);
	}
}

/* ---- set and unset while fills run ---- */

#define TH_OBJS	   64
#define TH_LEN	   2048
#define TH_THREADS 4
#define TH_ROUNDS  200

struct rk {
	int dead;     /* set once the ranker is replaced */
	int inflight; /* calls under way */
};
static struct rk rks[TH_ROUNDS];
static int th_stop, th_bad, th_late; /* __atomic */
static uint64_t th_calls;	     /* __atomic */

static uint64_t th_rank(void *arg, const char *key)
{
	struct rk *r = arg;
	uint64_t h = XXH3_64bits(key, strlen(key)) ^ (uint64_t)(r - rks);

	__atomic_add_fetch(&r->inflight, 1, __ATOMIC_ACQ_REL);
	if (__atomic_load_n(&r->dead, __ATOMIC_ACQUIRE))
		__atomic_add_fetch(&th_late, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&th_calls, 1, __ATOMIC_RELAXED);
	sched_yield(); /* a call that lasts */
	__atomic_sub_fetch(&r->inflight, 1, __ATOMIC_ACQ_REL);
	switch (h % 8) {
	case 0:
		return KEEP;
	case 1:
		return NONE;
	default:
		return 1 + h % 1000;
	}
}

static void *th_reader(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	char key[64];

	while (!__atomic_load_n(&th_stop, __ATOMIC_ACQUIRE)) {
		int i = (int)(rand_r(&seed) % TH_OBJS);
		if (rand_r(&seed) % 2) { /* a view, filled by the fillers */
			struct objstore_view v;
			unsigned char *want = make_data(i, TH_LEN);
			key_of(i, key, sizeof(key));
			if (objstore_get_view(dc, key, &v) || v.len != TH_LEN ||
			    memcmp(v.data, want, TH_LEN))
				__atomic_add_fetch(&th_bad, 1,
						   __ATOMIC_RELAXED);
			objstore_view_verified(&v);
			objstore_view_release(&v);
			free(want);
		} else if (read_obj(dc, i, TH_LEN)) {
			__atomic_add_fetch(&th_bad, 1, __ATOMIC_RELAXED);
		}
		if (rand_r(&seed) % 4 == 0) {
			key_of((int)(rand_r(&seed) % TH_OBJS), key,
			       sizeof(key));
			diskcache_demote(dc, key);
		}
	}
	return NULL;
}

Test(diskcache, rank_set_unset_under_fills, .fini = teardown, .timeout = 120)
{
	struct objstore *m = open_mem();
	pthread_t t[TH_THREADS];

	make_root();
	for (int i = 0; i < TH_OBJS; i++)
		put_obj(m, i, TH_LEN);
	dc = open_cache(m, 16 * TH_LEN, 0);
	for (int i = 0; i < TH_THREADS; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, th_reader,
					    (void *)(uintptr_t)(test_seed() +
								(uint64_t)i)),
			     0);
	struct rk *old = NULL;
	for (int r = 0; r < TH_ROUNDS; r++) {
		/* replaced directly, or unset first */
		if (r % 2)
			diskcache_set_ranker(dc, NULL, NULL, NULL);
		diskcache_set_ranker(dc, th_rank, NULL, &rks[r]);
		if (old) {
			if (__atomic_load_n(&old->inflight, __ATOMIC_ACQUIRE))
				__atomic_add_fetch(&th_late, 1,
						   __ATOMIC_RELAXED);
			__atomic_store_n(&old->dead, 1, __ATOMIC_RELEASE);
		}
		old = &rks[r];
		usleep(2000);
	}
	diskcache_set_ranker(dc, NULL, NULL, NULL);
	cr_assert_eq(__atomic_load_n(&old->inflight, __ATOMIC_ACQUIRE), 0);
	__atomic_store_n(&old->dead, 1, __ATOMIC_RELEASE);
	usleep(20000); /* fills without a ranker */
	__atomic_store_n(&th_stop, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < TH_THREADS; i++)
		pthread_join(t[i], NULL);
	diskcache_sync(dc);

	struct diskcache_stats st = cstats();
	cr_log_info("set/unset: %llu ranker calls, %llu evictions (%llu "
		    "demoted, %llu planned), %llu refused by rank",
		    (unsigned long long)th_calls,
		    (unsigned long long)st.evictions,
		    (unsigned long long)st.evict_demoted,
		    (unsigned long long)st.evict_planned,
		    (unsigned long long)st.fill_ranked_out);
	cr_assert_eq(th_bad, 0, "%d reads failed or gave wrong bytes", th_bad);
	cr_assert_eq(th_late, 0, "%d calls of a ranker after it was replaced",
		     th_late);
	cr_assert_gt(th_calls, 0, "the ranker was never asked");
	cr_assert_gt(st.evict_planned, 0);
	cr_assert_leq(st.bytes, 16 * TH_LEN);
	cr_assert_eq(st.bytes, st.entries * TH_LEN);
	cr_assert_eq(files_on_disk(), st.entries);
	for (int i = 0; i < TH_OBJS; i++)
		if (has(i))
			expect_obj(i, TH_LEN);
}

/* ---- two epochs over a dataset twice the cache's size ---- */

#define SIM_LEN	   4096
#define SIM_C	   256	       /* objects the cache holds */
#define SIM_N	   (2 * SIM_C) /* objects in the dataset */
#define SIM_WINDOW 4	       /* the reader's place and 3 ahead: KEEP */

/* The plan of the epoch being read: a test's stand-in for plans_rank. */
struct sim {
	int order[SIM_N]; /* the epoch's permutation */
	int pos[SIM_N];	  /* object -> its place in order */
	int place;	  /* next to read; __atomic */
};

static uint64_t sim_rank(void *arg, const char *key)
{
	struct sim *s = arg;
	int i = index_of(key);

	if (i < 0 || i >= SIM_N)
		return NONE;
	int d = s->pos[i] - __atomic_load_n(&s->place, __ATOMIC_ACQUIRE);
	if (d < 0)
		return NONE; /* read already this epoch */
	if (d < SIM_WINDOW)
		return KEEP;
	return (uint64_t)d * SIM_LEN; /* bytes ahead */
}

struct sim_case {
	const char *name;
	unsigned min_age;
	int ranked, demoted; /* a ranker; demote what was read */
	int ahead;	     /* objects fetched ahead of the reader */
};

/* Epoch 1 then epoch 2, each a new permutation; the backend gets of
 * epoch 2. */
static uint64_t sim_run(const struct sim_case *c, unsigned seed)
{
	struct objstore *m = open_mem();
	struct sim *s = calloc(1, sizeof(*s));
	char fetched[SIM_N];
	uint64_t gets = 0;

	cr_assert(s);
	make_root();
	for (int i = 0; i < SIM_N; i++)
		put_obj(m, i, SIM_LEN);
	dc = open_cache(m, SIM_C * SIM_LEN, c->min_age);
	if (c->ranked)
		diskcache_set_ranker(dc, sim_rank, NULL, s);
	for (int i = 0; i < SIM_N; i++)
		s->order[i] = i;
	for (int e = 0; e < 2; e++) {
		for (int i = SIM_N - 1; i > 0; i--) {
			int j = (int)(rand_r(&seed) % (unsigned)(i + 1));
			int tmp = s->order[i];
			s->order[i] = s->order[j];
			s->order[j] = tmp;
		}
		for (int k = 0; k < SIM_N; k++)
			s->pos[s->order[k]] = k;
		__atomic_store_n(&s->place, 0, __ATOMIC_RELEASE);
		memset(fetched, 0, sizeof(fetched));
		uint64_t before = backend_gets();
		for (int k = 0; k < SIM_N; k++) {
			/* the window: each object fetched once an epoch */
			for (int j = k + 1; j <= k + c->ahead && j < SIM_N;
			     j++) {
				if (fetched[j] || has(s->order[j]))
					continue;
				fetched[j] = 1;
				expect_obj(s->order[j], SIM_LEN);
			}
			expect_obj(s->order[k], SIM_LEN);
			__atomic_store_n(&s->place, k + 1, __ATOMIC_RELEASE);
			if (c->demoted)
				demote(s->order[k]);
		}
		gets = backend_gets() - before;
	}
	struct diskcache_stats st = cstats();
	cr_log_info("%-34s epoch 2: %4llu fetches (minimum %d); evictions "
		    "%llu (%llu demoted, %llu planned), refused %llu (%llu "
		    "by rank)",
		    c->name, (unsigned long long)gets, SIM_N - SIM_C,
		    (unsigned long long)st.evictions,
		    (unsigned long long)st.evict_demoted,
		    (unsigned long long)st.evict_planned,
		    (unsigned long long)st.fill_skips,
		    (unsigned long long)st.fill_ranked_out);
	teardown();
	free(s);
	return gets;
}

Test(diskcache, rank_epochs_twice_the_cache, .fini = teardown, .timeout = 300)
{
	static const struct sim_case cases[] = {
	    {"no ranker, min_age 600", 600, 0, 0, 0},
	    {"no ranker, min_age 0 (plain LRU)", 0, 0, 0, 0},
	    {"no ranker, min_age 600, ahead 3", 600, 0, 0, 3},
	    {"no ranker, min_age 0, ahead 3", 0, 0, 0, 3},
	    {"ranker, min_age 0, no demote", 0, 1, 0, 0},
	    {"ranker, min_age 600, no demote", 600, 1, 0, 0},
	    {"ranker + demote, min_age 600", 600, 1, 1, 0},
	    {"ranker + demote, min_age 600, ahead 3", 600, 1, 1, 3},
	    {"ranker + demote, min_age 0, ahead 3", 0, 1, 1, 3},
	};
	const uint64_t least = SIM_N - SIM_C;
	unsigned seed = (unsigned)test_seed();

	cr_log_info("%d objects of %d bytes, a cache of %d, seed %u", SIM_N,
		    SIM_LEN, SIM_C, seed);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint64_t gets = sim_run(&cases[i], seed);
		cr_assert_geq(gets, least);
		if (cases[i].demoted)
			cr_assert_leq(gets, least + least / 10,
				      "%s: %llu fetches in epoch 2, more than "
				      "10%% over the least (%llu)",
				      cases[i].name, (unsigned long long)gets,
				      (unsigned long long)least);
	}
}

/* A cache of size bytes over m holding objects 0..n-1 of 1000 bytes,
 * ranked by tbl (and passed), whose ranged misses of "blocks/" are
 * fetched whole by policy (a pack's frames). */
static void open_whole(struct objstore *m, uint64_t size, int n,
		       diskcache_passed_fn passed)
{
	struct diskcache_opts o = {.dirs = NULL,
				   .ns = NS,
				   .size = size,
				   .min_age = 3600,
				   .whole_prefix = "blocks/",
				   .whole_est = 1000};

	tbl_reset();
	make_root();
	o.dirs = root;
	for (int i = 0; i < n; i++)
		put_obj(m, i, 1000);
	cr_assert_eq(diskcache_open(m, &o, &dc), 0);
	diskcache_set_ranker(dc, tbl_rank, passed, NULL);
}

/* A ranged get of an object cached whole by policy (a pack's frame) that
 * misses, in a cache holding only planned entries: the range passes
 * through, the whole object is not fetched to evict one of them (it would
 * be fetched again later; the range costs only its bytes). */
Test(diskcache, rank_range_passes_planned_by, .fini = teardown)
{
	unsigned char *want = make_data(4, 1000);
	char key[64];
	void *got = NULL;
	size_t n = 0;

	open_whole(open_mem(), 4000, 8, NULL);
	for (int i = 0; i < 4; i++)
		expect_obj(i, 1000);
	for (int i = 0; i < 4; i++)
		tbl[i] = 10 * (uint64_t)(i + 1);
	tbl[4] = KEEP;
	uint64_t g0 = backend_gets();
	key_of(4, key, sizeof(key));
	cr_assert_eq(objstore_get(dc, key, 100, 200, &got, &n), 0);
	cr_assert_eq(n, 200);
	cr_assert_eq(memcmp(got, want + 100, 200), 0);
	free(got);
	free(want);
	cr_assert_eq(backend_gets() - g0, 1);
	cr_assert_not(has(4), "fetched whole, evicting a planned entry");
	cr_assert(has(0) && has(1) && has(2) && has(3));
	cr_assert_eq(cstats().evict_planned, 0);
	/* a demoted entry is room: then it is fetched whole */
	tbl[3] = NONE;
	demote(3);
	key_of(5, key, sizeof(key));
	tbl[5] = KEEP;
	got = NULL;
	cr_assert_eq(objstore_get(dc, key, 0, 10, &got, &n), 0);
	free(got);
	cr_assert(has(5));
	cr_assert_not(has(3));
	cr_assert_eq(cstats().evict_planned, 0);
}

/* tbl_passed: the objects whose tbl_gone is set were partly read */
static int tbl_gone[TBL_MAX];
static int tbl_passed(void *arg, const char *key)
{
	int i = index_of(key);

	(void)arg;
	return i >= 0 && i < TBL_MAX && tbl_gone[i];
}

/* A ranged get that misses, of an object the plans' readers read some of
 * already (passed): the range passes through even with room for the
 * whole object (its other frames were read); one not passed is fetched
 * whole and cached, as before. */
Test(diskcache, rank_passed_range_not_whole, .fini = teardown)
{
	unsigned char *want = make_data(1, 1000);
	char key[64];
	void *got = NULL;
	size_t n = 0;

	memset(tbl_gone, 0, sizeof(tbl_gone));
	open_whole(open_mem(), 40000, 4, tbl_passed);
	tbl[1] = 50;
	tbl_gone[1] = 1;
	uint64_t g0 = backend_gets();
	key_of(1, key, sizeof(key));
	cr_assert_eq(objstore_get(dc, key, 300, 400, &got, &n), 0);
	cr_assert_eq(n, 400);
	cr_assert_eq(memcmp(got, want + 300, 400), 0);
	free(got);
	free(want);
	cr_assert_eq(backend_gets() - g0, 1);
	cr_assert_not(has(1), "fetched whole although partly read");
	/* not passed: whole, cached */
	tbl[2] = 50;
	key_of(2, key, sizeof(key));
	got = NULL;
	cr_assert_eq(objstore_get(dc, key, 0, 10, &got, &n), 0);
	free(got);
	cr_assert(has(2));
	/* no ranker: the passed hook goes with it */
	diskcache_set_ranker(dc, NULL, tbl_passed, NULL);
	tbl_gone[3] = 1;
	key_of(3, key, sizeof(key));
	got = NULL;
	cr_assert_eq(objstore_get(dc, key, 0, 10, &got, &n), 0);
	free(got);
	cr_assert(has(3));
}
