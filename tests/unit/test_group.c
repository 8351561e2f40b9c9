/*
 * test_group.c - the cache group store (fs/store/group.h) in one process:
 * three or four members, each a group store over its own disk cache (a
 * temp dir) over one shared mem:// store, each serving on 127.0.0.1.
 * Every byte read from any member is checked against a shadow copy, and
 * the store's gets are counted: a cold epoch read by every member fetches
 * each object once. Members stop, restart, refuse, go silent, hold bad
 * copies and join; readers never see an error for it.
 */
#include "fs/store/crypt.h"
#include "fs/store/diskcache.h"
#include "fs/store/group.h"
#include "fs/store/objstore.h"
#include "fs/store/peer.h"
#include "lib/errors.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NS	 "vol-grp"
#define STORE	 "mem://group-test"
#define MAXM	 5
#define GIB	 (1ull << 30)
#define TIMEOUT	 5000 /* a request's deadline here: generous, no timing */
#define NTHREADS 4    /* reader threads per member */
#define PACK_PFX "p/" /* fetched whole by the owner's cache */
#define MAX_OBJS 256

/* ---- helpers ------------------------------------------------------------- */

static const unsigned char secret[PEER_SECRET_LEN] =
    "the group's secret for the tests";
static const unsigned char wrong_secret[PEER_SECRET_LEN] =
    "another group's secret, 32 byte";

static uint64_t rnd_next(uint64_t *st)
{
	uint64_t z = (*st += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static uint64_t test_seed(void)
{
	static uint64_t seed;
	if (!seed) {
		const char *e = getenv("GRANARY_TEST_SEED");
		seed = e ? strtoull(e, NULL, 0) : (uint64_t)time(NULL);
		fprintf(stderr,
			"test_group: seed %" PRIu64 " (GRANARY_TEST_SEED)\n",
			seed);
	}
	return seed;
}

/* ---- the objects: in the store, and their shadow --------------------------
 */

struct obj {
	char key[64];
	unsigned char *data;
	size_t len;
	int pack; /* read by ranges */
};

static struct obj objs[MAX_OBJS];
static int nobjs;
static struct objstore *writer; /* a handle of the store, for puts */

static void add_obj(const char *key, size_t len, int pack, uint64_t *rng)
{
	struct obj *o = &objs[nobjs++];

	cr_assert_leq(nobjs, MAX_OBJS);
	snprintf(o->key, sizeof(o->key), "%s", key);
	o->len = len;
	o->pack = pack;
	o->data = malloc(len ? len : 1);
	cr_assert_not_null(o->data);
	for (size_t i = 0; i < len; i += 8) {
		uint64_t x = rnd_next(rng);
		memcpy(o->data + i, &x, len - i < 8 ? len - i : 8);
	}
	cr_assert_eq(objstore_put(writer, key, o->data, len), 0);
}

/* Blocks of up to 4 MiB, small objects, and packs (read by ranges). */
static void make_objs(int blocks, int small, int packs)
{
	uint64_t rng = test_seed() ^ (uint64_t)nobjs * 7919;
	char key[64];
	int base = nobjs;

	for (int i = 0; i < blocks; i++) {
		snprintf(key, sizeof(key), "b/%d/%d_0", (base + i) % 5,
			 base + i);
		add_obj(key, (1u << 20) + rnd_next(&rng) % (3u << 20), 0, &rng);
	}
	for (int i = 0; i < small; i++) {
		snprintf(key, sizeof(key), "s/%d", base + i);
		add_obj(key, 1 + rnd_next(&rng) % 65536, 0, &rng);
	}
	for (int i = 0; i < packs; i++) {
		snprintf(key, sizeof(key), PACK_PFX "%d", base + i);
		add_obj(key, (256u << 10) + rnd_next(&rng) % (768u << 10), 1,
			&rng);
	}
}

/* ---- members ----------------------------------------------------------- */

struct member {
	struct objstore *g;	/* the group store (owns cache) */
	struct objstore *top;	/* what readers use: g, or a sealing layer */
	struct objstore *cache; /* its disk cache, while g is open */
	uint64_t node;
	char dir[128];
	char addr[64]; /* where it served last */
};

static struct member M[MAXM];
static char root[64];
static uint64_t closed_gets; /* store gets of members closed since */

struct mopts {
	const unsigned char *secret; /* NULL: the group's */
	const char *listen;	     /* NULL: 127.0.0.1:0; "-": serve nothing */
	int keep_copies;
	unsigned connect_ms, timeout_ms, down_ms;
};

static void open_member(int i, const struct mopts *mo)
{
	static const struct mopts none;
	struct member *m = &M[i];
	struct objstore *store, *cache, *g;
	const char *listen;

	if (!mo)
		mo = &none;
	if (!root[0]) {
		strcpy(root, "/tmp/granary-grp-XXXXXX");
		cr_assert_not_null(mkdtemp(root));
	}
	snprintf(m->dir, sizeof(m->dir), "%s/m%d", root, i);
	m->node = 0x1000 + (uint64_t)i;
	cr_assert_eq(objstore_open(STORE, NULL, &store), 0);
	struct diskcache_opts dco = {.dirs = m->dir,
				     .ns = NS,
				     .size = 4 * GIB,
				     .free_ratio = 0.01,
				     .min_age = 600,
				     .whole_prefix = PACK_PFX,
				     .whole_est = 1u << 20};
	cr_assert_eq(diskcache_open(store, &dco, &cache), 0);
	listen = !mo->listen		   ? "127.0.0.1:0"
		 : strcmp(mo->listen, "-") ? mo->listen
					   : NULL;
	struct group_opts go = {.node = m->node,
				.secret = mo->secret ? mo->secret : secret,
				.listen = listen,
				.weight = GIB,
				.keep_copies = mo->keep_copies,
				.connect_timeout_ms = mo->connect_ms,
				.timeout_ms =
				    mo->timeout_ms ? mo->timeout_ms : TIMEOUT,
				.down_ms = mo->down_ms};
	cr_assert_eq(group_open(cache, &go, &g), 0);
	m->g = m->top = g;
	m->cache = cache;
	snprintf(m->addr, sizeof(m->addr), "%s", group_addr(g));
	cr_assert_eq(!!listen, !!*m->addr);
}

static uint64_t gets_of(struct objstore *cache)
{
	struct objstore_stats st;
	objstore_get_stats(diskcache_backend(cache), &st);
	return st.gets;
}

static void close_member(int i)
{
	if (!M[i].top)
		return;
	closed_gets += gets_of(M[i].cache);
	objstore_close(M[i].top);
	M[i].g = M[i].top = M[i].cache = NULL;
}

/* Gets the store saw, from every member ever opened. */
static uint64_t store_gets(void)
{
	uint64_t n = closed_gets;
	for (int i = 0; i < MAXM; i++)
		if (M[i].g)
			n += gets_of(M[i].cache);
	return n;
}

/* The open members of [0, n) in the list of each of them. */
static void set_members(int n)
{
	struct group_member list[MAXM];
	size_t k = 0;

	for (int i = 0; i < n; i++) {
		if (!M[i].g)
			continue;
		list[k] =
		    (struct group_member){.node = M[i].node, .weight = GIB};
		snprintf(list[k].addr, sizeof(list[k].addr), "%s", M[i].addr);
		k++;
	}
	for (int i = 0; i < n; i++)
		if (M[i].g)
			group_set_members(M[i].g, list, k);
}

static struct group_stats gstats(int i)
{
	struct group_stats st;
	group_get_stats(M[i].g, &st);
	return st;
}

static struct diskcache_stats cstats(int i)
{
	struct diskcache_stats st;
	diskcache_get_stats(M[i].cache, &st);
	return st;
}

static int rm_one(const char *path, const struct stat *st, int flag,
		  struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

static void teardown(void)
{
	for (int i = 0; i < MAXM; i++)
		close_member(i);
	objstore_close(writer);
	writer = NULL;
	for (int i = 0; i < nobjs; i++)
		free(objs[i].data);
	nobjs = 0;
	closed_gets = 0;
	if (root[0])
		nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	root[0] = '\0';
}

static void setup(void)
{
	cr_assert_eq(objstore_open(STORE, NULL, &writer), 0);
}

/* Which member owns key, as member `from` sees it (-1: none). */
static int owner_of(int from, const char *key)
{
	char addr[64];
	int self;

	if (group_owner(M[from].g, key, &self, addr, sizeof(addr)))
		return -1;
	if (self)
		return from;
	for (int i = 0; i < MAXM; i++)
		if (M[i].g && !strcmp(M[i].addr, addr))
			return i;
	return -2; /* an address of no member */
}

/* ---- reading and checking --------------------------------------------------
 */

static atomic_int bad_bytes, read_errors;

/* Read o through s (whole as a view, or a pack by a few ranges) and check
 * every byte; 0, or what was wrong (also counted). */
static int read_check(struct objstore *s, const struct obj *o, uint64_t *rng)
{
	if (!o->pack) {
		struct objstore_view v;
		int err = objstore_get_view(s, o->key, &v);
		if (err) {
			fprintf(stderr, "get_view '%s': %s\n", o->key,
				gr_strerror(err));
			atomic_fetch_add(&read_errors, 1);
			return err;
		}
		if (v.len != o->len || memcmp(v.data, o->data, o->len)) {
			atomic_fetch_add(&bad_bytes, 1);
			objstore_view_release(&v);
			return EILSEQ;
		}
		objstore_view_verified(&v);
		objstore_view_release(&v);
		return 0;
	}
	for (int k = 0; k < 3; k++) {
		uint64_t off = rnd_next(rng) % o->len;
		size_t len =
		    1 + rnd_next(rng) %
			    (o->len - off < 100000 ? o->len - off : 100000);
		void *data = NULL;
		size_t got = 0;
		int err = objstore_get(s, o->key, off, len, &data, &got);
		if (err) {
			fprintf(stderr, "get '%s' %" PRIu64 "+%zu: %s\n",
				o->key, off, len, gr_strerror(err));
			atomic_fetch_add(&read_errors, 1);
			return err;
		}
		if (got != len || memcmp(data, o->data + off, len)) {
			atomic_fetch_add(&bad_bytes, 1);
			free(data);
			return EILSEQ;
		}
		free(data);
	}
	return 0;
}

/* One reader thread: every object in its own shuffled order, `rounds`
 * times (and on until until_ms); each read timed. */
struct reader {
	pthread_t t;
	int member;
	uint64_t seed;
	int rounds;
	atomic_int *progress;
	int64_t max_ms; /* out: the longest read */
	int slow;	/* out: reads that took over slow_ms */
	int64_t slow_ms;
	int64_t until_ms; /* > 0: go on reading until then */
};

static void shuffle(int *ix, int n, uint64_t *rng)
{
	for (int i = n - 1; i > 0; i--) {
		int j = (int)(rnd_next(rng) % (uint64_t)(i + 1)), t = ix[i];
		ix[i] = ix[j];
		ix[j] = t;
	}
}

static void *reader_run(void *arg)
{
	struct reader *r = arg;
	uint64_t rng = r->seed;
	int ix[MAX_OBJS];

	for (int i = 0; i < nobjs; i++)
		ix[i] = i;
	for (int round = 0;
	     round < r->rounds || (r->until_ms && now_ms() < r->until_ms);
	     round++) {
		shuffle(ix, nobjs, &rng);
		for (int i = 0; i < nobjs; i++) {
			const struct obj *o = &objs[ix[i]];
			int64_t t0 = now_ms();
			read_check(M[r->member].top, o, &rng);
			int64_t dt = now_ms() - t0;
			if (dt > r->max_ms)
				r->max_ms = dt;
			if (r->slow_ms && dt > r->slow_ms)
				r->slow++;
			if (r->progress)
				atomic_fetch_add(r->progress, 1);
		}
	}
	return NULL;
}

static void readers_start(struct reader *rs, int n, const int *members,
			  int nmembers, int rounds)
{
	for (int i = 0; i < n; i++) {
		if (!rs[i].seed)
			rs[i].seed = test_seed() * 31 + (uint64_t)i;
		rs[i].member = members[i % nmembers];
		rs[i].rounds = rounds;
		cr_assert_eq(pthread_create(&rs[i].t, NULL, reader_run, &rs[i]),
			     0);
	}
}

static void readers_join(struct reader *rs, int n)
{
	for (int i = 0; i < n; i++)
		pthread_join(rs[i].t, NULL);
}

/* Every member of [0, n) reads every object with NTHREADS threads. */
static void epoch(int n)
{
	struct reader rs[MAXM * NTHREADS];
	int members[MAXM], k = 0;

	memset(rs, 0, sizeof(rs));
	for (int i = 0; i < n; i++)
		if (M[i].g)
			members[k++] = i;
	readers_start(rs, k * NTHREADS, members, k, 1);
	readers_join(rs, k * NTHREADS);
}

static void expect_clean_reads(void)
{
	cr_assert_eq(atomic_load(&read_errors), 0, "reads failed");
	cr_assert_eq(atomic_load(&bad_bytes), 0, "bytes read back wrong");
}

/* The first whole object (not a pack) that member `owner` owns. */
static const struct obj *owned_by(int owner, int from)
{
	for (int i = 0; i < nobjs; i++)
		if (!objs[i].pack && owner_of(from, objs[i].key) == owner)
			return &objs[i];
	cr_assert_fail("no object owned by member %d", owner);
	return NULL;
}

/* ---- a cold epoch, every byte, each object once -----------------------------
 */

Test(group, epoch_fetches_each_object_once, .init = setup, .fini = teardown,
     .timeout = 240)
{
	for (int i = 0; i < 3; i++)
		open_member(i, NULL);
	set_members(3);
	make_objs(12, 40, 4);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(gstats(i).members, 3);

	uint64_t g0 = store_gets();
	epoch(3);
	expect_clean_reads();
	/* every object fetched by its owner once, for all */
	cr_assert_eq(store_gets() - g0, (uint64_t)nobjs,
		     "the store saw %" PRIu64 " gets for %d objects",
		     store_gets() - g0, nobjs);
	uint64_t hits = 0, served = 0, fetches = 0, owned = 0;
	for (int i = 0; i < 3; i++) {
		struct group_stats st = gstats(i);
		cr_assert_eq(st.peer_errors + st.peer_skipped + st.peer_misses,
			     0);
		hits += st.peer_hits;
		served += st.served;
		fetches += st.served_fetches;
		owned += st.self_owned;
		cr_assert_gt(st.peer_lat.count, 0);
	}
	cr_assert_gt(hits, 0);
	cr_assert_eq(served, hits, "every peer hit was served by a member");
	cr_assert_gt(fetches, 0);
	cr_assert_gt(owned, 0);
	/* each object is in its owner's cache, and nowhere else */
	for (int k = 0; k < nobjs; k++) {
		int o = owner_of(0, objs[k].key);
		cr_assert_geq(o, 0);
		for (int i = 0; i < 3; i++) {
			cr_assert_eq(owner_of(i, objs[k].key), o,
				     "members agree on owners");
			cr_assert_eq(
			    diskcache_contains(M[i].cache, objs[k].key), i == o,
			    "'%s' in member %d's cache", objs[k].key, i);
		}
	}

	/* a second epoch: from the owners' caches, the store not asked */
	epoch(3);
	expect_clean_reads();
	cr_assert_eq(store_gets() - g0, (uint64_t)nobjs);
}

/* ---- one cold key, many readers at once --------------------------------- */

struct one_key {
	pthread_t t;
	struct objstore *s;
	const struct obj *o;
	pthread_barrier_t *b;
};

static void *one_key_run(void *arg)
{
	struct one_key *k = arg;
	uint64_t rng = 1;

	pthread_barrier_wait(k->b);
	read_check(k->s, k->o, &rng);
	return NULL;
}

Test(group, one_cold_key_one_fetch, .init = setup, .fini = teardown,
     .timeout = 120)
{
	for (int i = 0; i < 3; i++)
		open_member(i, NULL);
	set_members(3);
	make_objs(6, 0, 0);
	for (int k = 0; k < nobjs; k++) {
		struct one_key ks[8];
		pthread_barrier_t b;
		uint64_t g0 = store_gets();

		pthread_barrier_init(&b, NULL, 8);
		for (int i = 0; i < 8; i++) {
			ks[i] = (struct one_key){
			    .s = M[i % 3].g, .o = &objs[k], .b = &b};
			pthread_create(&ks[i].t, NULL, one_key_run, &ks[i]);
		}
		for (int i = 0; i < 8; i++)
			pthread_join(ks[i].t, NULL);
		pthread_barrier_destroy(&b);
		expect_clean_reads();
		cr_assert_eq(store_gets() - g0, 1,
			     "'%s': %" PRIu64 " store gets for 8 readers",
			     objs[k].key, store_gets() - g0);
	}
}

/* ---- a member stops in the middle, and comes back -------------------------
 */

Test(group, member_stops_and_restarts, .init = setup, .fini = teardown,
     .timeout = 240)
{
	struct mopts mo = {.connect_ms = 200, .timeout_ms = 1000};
	struct reader rs[2 * NTHREADS];
	atomic_int progress = 0;
	int readers_on[2] = {0, 1};

	for (int i = 0; i < 3; i++)
		open_member(i, &mo);
	set_members(3);
	make_objs(8, 60, 3);
	epoch(3); /* every object at its owner */
	expect_clean_reads();
	uint64_t g0 = store_gets();
	cr_assert_eq(g0, (uint64_t)nobjs);
	int owned2 = 0;
	for (int k = 0; k < nobjs; k++)
		owned2 += owner_of(0, objs[k].key) == 2;
	cr_assert_gt(owned2, 0);

	/* members 0 and 1 read on; member 2 stops under them */
	memset(rs, 0, sizeof(rs));
	for (int i = 0; i < 2 * NTHREADS; i++) {
		rs[i].progress = &progress;
		rs[i].until_ms = now_ms() + 3000;
	}
	readers_start(rs, 2 * NTHREADS, readers_on, 2, 2);
	while (atomic_load(&progress) < nobjs / 2)
		sleep_ms(1);
	close_member(2);
	readers_join(rs, 2 * NTHREADS);
	expect_clean_reads();

	/* no read waited longer than a connect and a deadline (1 s + 64 MiB
	 * at 100 KiB/ms for a whole object: 1.86 s), give or take a
	 * loaded machine */
	int64_t max_ms = 0;
	for (int i = 0; i < 2 * NTHREADS; i++)
		if (rs[i].max_ms > max_ms)
			max_ms = rs[i].max_ms;
	cr_assert_lt(max_ms, 3 * 1860, "a read waited %" PRId64 " ms", max_ms);
	/* skipped after its failures: the threads under way when it
	 * stopped, then a probe a window (1 s, 2 s, ...) */
	for (int i = 0; i < 2; i++) {
		struct group_stats st = gstats(i);
		cr_assert_gt(st.peer_errors, 0);
		cr_assert_leq(st.peer_errors, NTHREADS + 6,
			      "member %d: %" PRIu64 " failed asks", i,
			      st.peer_errors);
		cr_assert_gt(st.peer_skipped, 0);
	}

	/* back, at the same address with the same cache: it owns the same
	 * keys and serves them from its cache; the others find it back
	 * with their next probe */
	char addr[64];
	snprintf(addr, sizeof(addr), "%s", M[2].addr);
	mo.listen = addr;
	open_member(2, &mo);
	cr_assert_str_eq(M[2].addr, addr);
	set_members(3);
	const struct obj *o2 = owned_by(2, 0);
	for (int i = 0; i < 2; i++) {
		int64_t until = now_ms() + 60000;
		int here, in = 0;
		while (group_where(M[i].g, o2->key, &here, &in) &&
		       now_ms() < until)
			sleep_ms(50);
		cr_assert_eq(in, 1, "member %d sees member 2 back", i);
	}
	uint64_t g1 = store_gets();
	epoch(3);
	expect_clean_reads();
	cr_assert_eq(store_gets(), g1, "nothing fetched again");
	struct group_stats st2 = gstats(2);
	cr_assert_gt(st2.served, 0);
	cr_assert_eq(st2.served_fetches, 0);
}

/* ---- a member that accepts and never answers --------------------------------
 */

Test(group, silent_member_costs_bounded_waits, .init = setup, .fini = teardown,
     .timeout = 120)
{
	struct mopts mo = {
	    .connect_ms = 200, .timeout_ms = 300, .down_ms = 500};
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t sl = sizeof(sa);
	struct reader rs[NTHREADS];
	int on[1] = {0};
	int l = socket(AF_INET, SOCK_STREAM, 0);

	cr_assert_geq(l, 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(bind(l, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(listen(l, 1024), 0); /* never accepted */
	cr_assert_eq(getsockname(l, (struct sockaddr *)&sa, &sl), 0);

	open_member(0, &mo);
	make_objs(0, 40, 0);
	struct group_member list[2] = {{.node = M[0].node, .weight = 1},
				       {.node = 0x5117, .weight = GIB}};
	snprintf(list[0].addr, sizeof(list[0].addr), "%s", M[0].addr);
	snprintf(list[1].addr, sizeof(list[1].addr), "127.0.0.1:%u",
		 ntohs(sa.sin_port));
	group_set_members(M[0].g, list, 2);

	/* the deadline of a whole get: 300 ms + 64 MiB at 100 KiB/ms */
	const int64_t wait_ms = 200 + 300 + 655;
	memset(rs, 0, sizeof(rs));
	int64_t t0 = now_ms();
	for (int i = 0; i < NTHREADS; i++) {
		rs[i].slow_ms = 250;
		rs[i].until_ms = t0 + 4000;
	}
	readers_start(rs, NTHREADS, on, 1, 1);
	readers_join(rs, NTHREADS);
	int64_t secs = (now_ms() - t0 + 999) / 1000;
	expect_clean_reads();

	int slow = 0;
	int64_t max_ms = 0;
	for (int i = 0; i < NTHREADS; i++) {
		slow += rs[i].slow;
		if (rs[i].max_ms > max_ms)
			max_ms = rs[i].max_ms;
	}
	struct group_stats st = gstats(0);
	cr_log_info("silent member: %d slow reads of %" PRIu64
		    " skipped, %" PRIu64 " failed, longest %" PRId64 " ms",
		    slow, st.peer_skipped, st.peer_errors, max_ms);
	cr_assert_lt(max_ms, 3 * wait_ms, "a read waited %" PRId64 " ms",
		     max_ms);
	/* each thread waited once when it went silent, then only the
	 * probes (one a window of 0.5 s, 1 s, 2 s, ...) */
	cr_assert_geq(st.peer_errors, 1);
	cr_assert_leq(st.peer_errors, (uint64_t)(NTHREADS + 2 * secs),
		      "%" PRIu64 " failed asks in %" PRId64 " s",
		      st.peer_errors, secs);
	cr_assert_leq(slow, NTHREADS + 2 * secs);
	cr_assert_gt(st.peer_skipped, 10 * st.peer_errors);
	close(l);
}

/* ---- a bad copy on the owner ------------------------------------------------
 */

/* The file of key's entry in member's cache. */
static void entry_path(int member, const char *key, char *buf, size_t cap)
{
	cr_assert(member >= 0 && member < MAXM);
	cr_assert_lt(strlen(M[member].dir) + strlen(key) + sizeof(NS) + 2, cap);
	snprintf(buf, cap, "%s/%s/%s", M[member].dir, NS, key);
}

static void corrupt_entry(int member, const char *key)
{
	char path[512];
	unsigned char junk[64];
	struct stat st;

	entry_path(member, key, path, sizeof(path));
	int fd = open(path, O_WRONLY);
	cr_assert_geq(fd, 0, "open '%s': %s", path, strerror(errno));
	cr_assert_eq(fstat(fd, &st), 0);
	memset(junk, 0xa5, sizeof(junk));
	cr_assert_eq(pwrite(fd, junk, sizeof(junk), st.st_size / 2),
		     (ssize_t)sizeof(junk));
	close(fd);
}

Test(group, bad_copy_reported_and_read_from_store, .init = setup,
     .fini = teardown, .timeout = 120)
{
	for (int i = 0; i < 3; i++)
		open_member(i, NULL);
	set_members(3);
	make_objs(6, 10, 0);
	epoch(3);
	expect_clean_reads();

	const struct obj *o = owned_by(0, 1);
	corrupt_entry(0, o->key);
	uint64_t g0 = store_gets();
	uint64_t rng = 5;
	cr_assert_eq(read_check(M[1].g, o, &rng), EILSEQ,
		     "the bad copy reaches the reader");
	atomic_store(&bad_bytes, 0);
	/* the reader's check failed: a copy of a peer's, so 0 (read again) */
	cr_assert_eq(objstore_evict_bad(M[1].g, o->key), 0);
	cr_assert_eq(gstats(1).bad_from_peers, 1);
	int64_t until = now_ms() + 10000;
	while (cstats(0).bad_entries == 0 && now_ms() < until)
		sleep_ms(10);
	cr_assert_eq(cstats(0).bad_entries, 1, "the owner dropped its copy");
	cr_assert_eq(diskcache_contains(M[0].cache, o->key), 0);
	/* read again: right, from the store, once */
	cr_assert_eq(read_check(M[1].g, o, &rng), 0);
	cr_assert_eq(store_gets() - g0, 1);
	/* the owner's own bad copy (read locally) is dropped by it */
	const struct obj *o2 = owned_by(2, 2);
	corrupt_entry(2, o2->key);
	cr_assert_eq(read_check(M[2].g, o2, &rng), EILSEQ);
	atomic_store(&bad_bytes, 0);
	cr_assert_eq(objstore_evict_bad(M[2].g, o2->key), 0);
	cr_assert_eq(cstats(2).bad_entries, 1);
	cr_assert_eq(read_check(M[2].g, o2, &rng), 0);
	/* a key not got from a peer: its local copy's business, no report */
	objstore_evict_bad(M[1].g, owned_by(1, 1)->key);
	cr_assert_eq(gstats(1).bad_from_peers, 1);
	cr_assert_eq(diskcache_contains(M[1].cache, owned_by(1, 1)->key), 0);
	expect_clean_reads();
}

/* The same through the sealing layer: members hold ciphertext, and the
 * reader's check is the GCM tag of each chunk. */
Test(group, encrypted_members_exchange_ciphertext, .init = setup,
     .fini = teardown, .timeout = 120)
{
	unsigned char key[CRYPT_KEY_LEN];
	struct objstore *plain, *sealed;

	for (size_t i = 0; i < sizeof(key); i++)
		key[i] = (unsigned char)(i * 7 + 1);
	for (int i = 0; i < 3; i++) {
		open_member(i, NULL);
		cr_assert_eq(objstore_crypt_open(M[i].g, key, &M[i].top), 0);
		cr_assert_eq(group_of(M[i].top), M[i].g);
	}
	cr_assert_eq(group_of(M[0].cache), NULL);
	set_members(3);
	/* the objects are put sealed; the shadow is the plain bytes */
	cr_assert_eq(objstore_open(STORE, NULL, &plain), 0);
	cr_assert_eq(objstore_crypt_open(plain, key, &sealed), 0);
	struct objstore *w = writer;
	writer = sealed;
	make_objs(4, 20, 0);
	writer = w;
	objstore_close(sealed);

	uint64_t g0 = store_gets();
	epoch(3);
	expect_clean_reads();
	cr_assert_eq(store_gets() - g0, (uint64_t)nobjs);
	/* the owners' files hold no plain bytes */
	for (int k = 0; k < nobjs; k++) {
		char path[512];
		entry_path(owner_of(0, objs[k].key), objs[k].key, path,
			   sizeof(path));
		FILE *f = fopen(path, "rb");
		cr_assert_not_null(f, "'%s' at its owner", path);
		unsigned char *buf = malloc(objs[k].len + 4096);
		size_t n = fread(buf, 1, objs[k].len + 4096, f);
		fclose(f);
		cr_assert_gt(n, objs[k].len, "sealed: longer than plain");
		cr_assert_null(memmem(buf, n, objs[k].data,
				      objs[k].len < 32 ? objs[k].len : 32));
		free(buf);
	}
	/* a bad copy at the owner: the tag fails, the reader gets the
	 * right bytes from the store, the owner drops its copy */
	const struct obj *o = owned_by(0, 1);
	corrupt_entry(0, o->key);
	uint64_t g1 = store_gets(), rng = 3;
	cr_assert_eq(read_check(M[1].top, o, &rng), 0);
	cr_assert_eq(store_gets() - g1, 1);
	cr_assert_eq(gstats(1).bad_from_peers, 1);
	int64_t until = now_ms() + 10000;
	while (cstats(0).bad_entries == 0 && now_ms() < until)
		sleep_ms(10);
	cr_assert_eq(cstats(0).bad_entries, 1);
}

/* ---- a member with another secret -------------------------------------------
 */

Test(group, wrong_secret_refused, .init = setup, .fini = teardown,
     .timeout = 120)
{
	struct mopts bad = {.secret = wrong_secret};

	for (int i = 0; i < 3; i++)
		open_member(i, NULL);
	open_member(3, &bad);
	set_members(3); /* the group's three know each other */
	struct group_member list[4];
	for (int i = 0; i < 4; i++) {
		list[i] =
		    (struct group_member){.node = M[i].node, .weight = GIB};
		snprintf(list[i].addr, sizeof(list[i].addr), "%s", M[i].addr);
	}
	group_set_members(M[3].g, list, 4);
	make_objs(4, 30, 2);

	uint64_t rng = 9;
	for (int k = 0; k < nobjs; k++)
		cr_assert_eq(read_check(M[3].g, &objs[k], &rng), 0);
	expect_clean_reads();
	uint64_t refused = 0;
	for (int i = 0; i < 3; i++)
		refused += gstats(i).refused_auth;
	struct group_stats st = gstats(3);
	cr_assert_geq(refused, 1);
	cr_assert_eq(refused, st.peer_errors, "each refusal seen by both");
	/* skipped after its first refusal (a second one a window later) */
	cr_assert_gt(st.peer_skipped, st.peer_errors);
	cr_assert_eq(st.peer_hits, 0);
	/* the group itself is not disturbed */
	epoch(3);
	expect_clean_reads();
}

/* ---- a member joins -------------------------------------------------------
 */

Test(group, join_moves_only_the_new_share, .init = setup, .fini = teardown,
     .timeout = 240)
{
	enum { KEYS = 2000 };
	static int before[KEYS];
	char key[64];

	for (int i = 0; i < 3; i++)
		open_member(i, NULL);
	set_members(3);
	make_objs(6, 40, 3);
	epoch(3);
	expect_clean_reads();
	for (int k = 0; k < KEYS; k++) {
		snprintf(key, sizeof(key), "k/%d", k);
		before[k] = owner_of(0, key);
		cr_assert_geq(before[k], 0);
	}
	int objs_before[MAX_OBJS];
	for (int k = 0; k < nobjs; k++)
		objs_before[k] = owner_of(0, objs[k].key);

	open_member(3, NULL);
	set_members(4);
	int moved = 0;
	for (int k = 0; k < KEYS; k++) {
		snprintf(key, sizeof(key), "k/%d", k);
		int now = owner_of(0, key);
		for (int i = 1; i < 4; i++)
			cr_assert_eq(owner_of(i, key), now);
		if (now != before[k]) {
			cr_assert_eq(now, 3, "'%s' moved from %d to %d", key,
				     before[k], now);
			moved++;
		}
	}
	/* a quarter, give or take */
	cr_assert(moved > KEYS / 8 && moved < KEYS * 3 / 8, "%d of %d moved",
		  moved, KEYS);
	int to3 = 0;
	for (int k = 0; k < nobjs; k++) {
		int now = owner_of(0, objs[k].key);
		cr_assert(now == objs_before[k] || now == 3);
		to3 += now == 3;
	}
	/* an epoch on four: only what the new member now owns is fetched */
	uint64_t g0 = store_gets();
	epoch(4);
	expect_clean_reads();
	cr_assert_eq(store_gets() - g0, (uint64_t)to3);
}

/* ---- copies kept by the reader, or not
 * ---------------------------------------- */

Test(group, keep_copies, .init = setup, .fini = teardown, .timeout = 120)
{
	struct mopts keep = {.keep_copies = 1};

	open_member(0, &keep);
	open_member(1, NULL);
	open_member(2, NULL);
	set_members(3);
	make_objs(4, 20, 0);
	uint64_t rng = 1;
	for (int k = 0; k < nobjs; k++) {
		cr_assert_eq(read_check(M[0].g, &objs[k], &rng), 0);
		cr_assert_eq(read_check(M[1].g, &objs[k], &rng), 0);
	}
	diskcache_sync(M[0].cache);
	int kept = 0;
	for (int k = 0; k < nobjs; k++) {
		int o = owner_of(0, objs[k].key);
		/* 0 keeps what it read from others; 1 only what it owns */
		cr_assert_eq(diskcache_contains(M[0].cache, objs[k].key), 1);
		cr_assert_eq(diskcache_contains(M[1].cache, objs[k].key),
			     o == 1);
		kept += o != 0;
	}
	cr_assert_gt(kept, 0);
	/* read again: 0 from its own cache, 1 from the owners */
	struct group_stats s0 = gstats(0), s1 = gstats(1);
	for (int k = 0; k < nobjs; k++) {
		cr_assert_eq(read_check(M[0].g, &objs[k], &rng), 0);
		cr_assert_eq(read_check(M[1].g, &objs[k], &rng), 0);
	}
	cr_assert_eq(gstats(0).peer_hits, s0.peer_hits);
	cr_assert_gt(gstats(1).peer_hits, s1.peer_hits);

	/* a view released unchecked keeps nothing */
	const struct obj *o = owned_by(2, 0);
	cr_assert_eq(objstore_evict(M[0].g, o->key), 0);
	cr_assert_eq(diskcache_contains(M[0].cache, o->key), 0);
	struct objstore_view v;
	cr_assert_eq(objstore_get_view(M[0].g, o->key, &v), 0);
	objstore_view_release(&v);
	diskcache_sync(M[0].cache);
	cr_assert_eq(diskcache_contains(M[0].cache, o->key), 0);
	expect_clean_reads();
}

/* ---- warmup, where, owners --------------------------------------------------
 */

Test(group, warm_and_where, .init = setup, .fini = teardown, .timeout = 120)
{
	int here, in;

	for (int i = 0; i < 3; i++)
		open_member(i, NULL);
	set_members(3);
	make_objs(3, 20, 2);
	uint64_t g0 = store_gets();
	for (int k = 0; k < nobjs; k++) {
		cr_assert_eq(group_where(M[1].g, objs[k].key, &here, &in), 0);
		cr_assert_eq(in, 0);
		cr_assert_eq(here, 0);
	}
	cr_assert_eq(store_gets(), g0, "where fetches nothing");
	/* warm everything from member 1: each object lands at its owner */
	for (int k = 0; k < nobjs; k++)
		cr_assert_eq(group_warm(M[1].g, objs[k].key), 0);
	cr_assert_eq(store_gets() - g0, (uint64_t)nobjs);
	for (int k = 0; k < nobjs; k++) {
		int o = owner_of(1, objs[k].key);
		cr_assert_eq(diskcache_contains(M[o].cache, objs[k].key), 1);
		for (int i = 0; i < 3; i++) {
			cr_assert_eq(
			    group_where(M[i].g, objs[k].key, &here, &in), 0);
			cr_assert_eq(in, 1);
			cr_assert_eq(here, i == o);
		}
		cr_assert_eq(group_warm(M[2].g, objs[k].key), 0);
	}
	cr_assert_eq(store_gets() - g0, (uint64_t)nobjs, "warm once");
	epoch(3);
	expect_clean_reads();
	cr_assert_eq(store_gets() - g0, (uint64_t)nobjs);
	cr_assert_eq(group_warm(M[1].g, "s/no-such-object"), ENOENT);
	void *d;
	size_t n;
	for (int i = 0; i < 3; i++)
		cr_assert_eq(
		    objstore_get(M[i].g, "s/no-such-object", 0, 0, &d, &n),
		    ENOENT);
}

/* A group of takers only: no owner, reads through the local cache. */
Test(group, takers_only, .init = setup, .fini = teardown, .timeout = 60)
{
	struct mopts take = {.listen = "-"};
	char addr[64];
	int self, here, in;

	open_member(0, &take);
	open_member(1, &take);
	cr_assert_str_eq(group_addr(M[0].g), "");
	set_members(2);
	make_objs(1, 5, 1);
	cr_assert_eq(
	    group_owner(M[0].g, objs[0].key, &self, addr, sizeof(addr)),
	    ENOENT);
	uint64_t rng = 2;
	for (int i = 0; i < 2; i++)
		for (int k = 0; k < nobjs; k++)
			cr_assert_eq(read_check(M[i].g, &objs[k], &rng), 0);
	diskcache_sync(M[0].cache);
	/* each keeps its own copy, as on one node */
	cr_assert_eq(store_gets(), 2 * (uint64_t)nobjs);
	cr_assert_eq(group_where(M[0].g, objs[0].key, &here, &in), 0);
	cr_assert_eq(here, 1);
	/* a taker with a serving member: owns nothing, reads from it */
	open_member(2, NULL);
	set_members(3);
	cr_assert_eq(owner_of(0, objs[0].key), 2);
	cr_assert_eq(owner_of(2, objs[0].key), 2);
}

/* The members' list: duplicates, node 0, no address, weight 0. */
Test(group, member_list_rules, .init = setup, .fini = teardown, .timeout = 60)
{
	char key[32];

	open_member(0, NULL);
	open_member(1, NULL);
	/* alone (no list yet): this node owns everything */
	cr_assert_eq(owner_of(0, "k/1"), 0);
	struct group_member list[5] = {
	    {.node = M[1].node, .weight = GIB},
	    {.node = 0, .weight = GIB, .addr = "127.0.0.1:1"},
	    {.node = 0x77, .weight = GIB, .addr = ""},
	    {.node = 0x78, .weight = 0, .addr = "127.0.0.1:2"},
	    {.node = M[1].node, .weight = GIB, .addr = "127.0.0.1:3"},
	};
	snprintf(list[0].addr, sizeof(list[0].addr), "%s", M[1].addr);
	group_set_members(M[0].g, list, 5);
	/* 0 (not listed, but serving) and 1 share the keys; the rest never
	 * own (node 0 and the second 1 are dropped) */
	cr_assert_eq(gstats(0).members, 4);
	int n0 = 0, n1 = 0;
	for (int k = 0; k < 400; k++) {
		snprintf(key, sizeof(key), "k/%d", k);
		int o = owner_of(0, key);
		cr_assert(o == 0 || o == 1, "'%s' owned by %d", key, o);
		n0 += o == 0;
		n1 += o == 1;
	}
	cr_assert_gt(n0, 100);
	cr_assert_gt(n1, 100);
}
