/*
 * test_namecache.c - the read-only name cache (fs/namecache.c): names put
 * come back with their inode, attributes and chunk 0; past the bound only
 * part of the cache is evicted, and names used since the clock last passed
 * them still hit; bytes stay within the bound, name lengths counted; many
 * threads getting and putting at once get back what was put.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fs/vfs/namecache.h"

#define KiB   (1ull << 10)
#define HOUR  (3600ll * 1000000000)
#define ROOT  1
#define SMALL (64 * KiB)

static struct namecache *open_nc(uint64_t max, unsigned stripes, int64_t ttl)
{
	struct namecache_opts o = {
	    .max_bytes = max, .ttl_ns = ttl, .stripes = stripes};
	struct namecache *nc = NULL;

	cr_assert_eq(namecache_open(&o, &nc), 0);
	cr_assert_not_null(nc);
	return nc;
}

static struct namecache_stats stats(struct namecache *nc)
{
	struct namecache_stats st;

	namecache_get_stats(nc, &st);
	return st;
}

/* What name i maps to: ino, length and chunk 0 all derive from i, so that
 * a reader can tell a wrong entry from the right one. */
static void value_of(uint64_t i, uint64_t *ino, struct meta_attr *a,
		     struct meta_slice *s, size_t *n)
{
	memset(a, 0, sizeof(*a));
	*ino = i * 7 + 3;
	a->type = META_FILE;
	a->mode = 0644;
	a->nlink = 1;
	a->length = i;
	*n = i % 3;
	for (size_t k = 0; k < *n; k++)
		s[k] = (struct meta_slice){
		    .id = i * 10 + k, .len = (uint32_t)i, .pack = i};
}

static int put_i(struct namecache *nc, uint64_t parent, const char *name,
		 uint64_t i)
{
	struct meta_attr a;
	struct meta_slice s[3];
	uint64_t ino;
	size_t n;

	value_of(i, &ino, &a, s, &n);
	return namecache_put(nc, parent, name, ino, &a, s, n);
}

/* 1 on a hit carrying name i's value, 0 on a clean miss, -1 on anything
 * else (a wrong value, a miss that left output behind). No assertions:
 * worker threads call it. */
static int lookup_i(struct namecache *nc, uint64_t parent, const char *name,
		    uint64_t i)
{
	struct meta_attr a, wa;
	struct meta_slice *s = (void *)1, ws[3];
	uint64_t ino, wino;
	size_t n = 1, wn;
	int ok;

	if (!namecache_get(nc, parent, name, &ino, &a, &s, &n))
		return !s && !n ? 0 : -1;
	value_of(i, &wino, &wa, ws, &wn);
	ok = ino == wino && a.length == wa.length && a.mode == wa.mode &&
	     n == wn && (n ? s && !memcmp(s, ws, n * sizeof(*s)) : !s);
	free(s);
	return ok ? 1 : -1;
}

static int get_i(struct namecache *nc, uint64_t parent, const char *name,
		 uint64_t i)
{
	int r = lookup_i(nc, parent, name, i);

	cr_assert_neq(r, -1, "'%s' is not what was put", name);
	return r;
}

static char *img(char *buf, uint64_t i)
{
	sprintf(buf, "n01440764_%06llu.JPEG", (unsigned long long)i);
	return buf;
}

Test(namecache, put_get_replace_clear)
{
	struct namecache *nc = open_nc(SMALL, 1, HOUR);
	uint64_t empty = stats(nc).bytes;

	cr_assert_eq(get_i(nc, ROOT, "a", 5), 0);
	cr_assert_eq(put_i(nc, ROOT, "a", 5), 0);
	cr_assert_eq(put_i(nc, ROOT, "b", 6), 0);
	cr_assert_eq(put_i(nc, 2, "a", 7), 0); /* same name, other dir */
	cr_assert_eq(get_i(nc, ROOT, "a", 5), 1);
	cr_assert_eq(get_i(nc, ROOT, "b", 6), 1);
	cr_assert_eq(get_i(nc, 2, "a", 7), 1);
	cr_assert_eq(get_i(nc, 3, "a", 7), 0);
	cr_assert_eq(get_i(nc, ROOT, "ab", 5), 0);

	/* a second put of a name replaces it: one entry, the new value */
	cr_assert_eq(put_i(nc, ROOT, "a", 8), 0);
	cr_assert_eq(get_i(nc, ROOT, "a", 8), 1);
	struct namecache_stats st = stats(nc);
	cr_assert_eq(st.entries, 3);
	cr_assert_eq(st.hits, 4);
	cr_assert_eq(st.misses, 3);
	cr_assert_eq(st.evictions, 0);
	cr_assert_eq(st.max_bytes, SMALL);
	cr_assert_eq(st.bytes, empty + namecache_entry_cost(1, 8 % 3) +
				   namecache_entry_cost(1, 6 % 3) +
				   namecache_entry_cost(1, 7 % 3));
	namecache_check(nc);

	namecache_clear(nc);
	cr_assert_eq(get_i(nc, ROOT, "a", 8), 0);
	cr_assert_eq(get_i(nc, 2, "a", 7), 0);
	st = stats(nc);
	cr_assert_eq(st.entries, 0);
	cr_assert_eq(st.bytes, empty);
	cr_assert_eq(put_i(nc, ROOT, "a", 9), 0); /* usable after a clear */
	cr_assert_eq(get_i(nc, ROOT, "a", 9), 1);
	namecache_check(nc);
	namecache_close(nc);
	namecache_close(NULL);
}

Test(namecache, expires_after_ttl)
{
	struct namecache *nc = open_nc(SMALL, 1, 20 * 1000000);

	cr_assert_eq(put_i(nc, ROOT, "x", 1), 0);
	cr_assert_eq(get_i(nc, ROOT, "x", 1), 1);
	nanosleep(&(struct timespec){.tv_nsec = 60 * 1000000}, NULL);
	cr_assert_eq(get_i(nc, ROOT, "x", 1), 0);
	struct namecache_stats st = stats(nc);
	cr_assert_eq(st.expired, 1);
	cr_assert_eq(st.entries, 0);
	namecache_close(nc);
}

Test(namecache, open_checks)
{
	struct namecache_opts o = {.ttl_ns = HOUR, .stripes = 3};
	struct namecache *nc = (void *)1;

	cr_assert_eq(namecache_open(&o, &nc), EINVAL); /* not a power of 2 */
	cr_assert_null(nc);
	o.stripes = 512;
	cr_assert_eq(namecache_open(&o, &nc), EINVAL);
	o.stripes = 1;
	o.max_bytes = 100; /* not one entry */
	cr_assert_eq(namecache_open(&o, &nc), EINVAL);

	o.max_bytes = 0; /* the default */
	o.stripes = 0;
	cr_assert_eq(namecache_open(&o, &nc), 0);
	struct namecache_stats st = stats(nc);
	cr_assert_eq(st.max_bytes, NAMECACHE_DEFAULT_SIZE);
	cr_assert_leq(st.bytes, NAMECACHE_DEFAULT_SIZE / 16, "buckets: %llu",
		      (unsigned long long)st.bytes);
	namecache_close(nc);
}

Test(namecache, default_holds_imagenet)
{
	/* 1.28M training names, one slice each, with room to spare (the
	 * buckets take at most 1/32 of the bound) */
	uint64_t imagenet = 1281167 * namecache_entry_cost(20, 1);
	cr_assert_lt(imagenet * 3 / 2, NAMECACHE_DEFAULT_SIZE * 31 / 32);
#if defined(__x86_64__)
	/* as documented: 224 bytes, 2.3M names in the default bound */
	cr_assert_eq(namecache_entry_cost(20, 1), 224);
	cr_assert_leq(2300000ull * 224, NAMECACHE_DEFAULT_SIZE * 31 / 32);
#endif
}

Test(namecache, too_big_is_refused)
{
	struct namecache *nc = open_nc(SMALL, 1, HOUR);
	char longname[300];
	struct meta_attr a = {0};
	struct meta_slice *many = calloc(4096, sizeof(*many));

	memset(longname, 'x', 256);
	longname[256] = 0;
	cr_assert_eq(put_i(nc, ROOT, "keep", 1), 0);
	cr_assert_eq(namecache_put(nc, ROOT, longname, 2, &a, NULL, 0), EFBIG);
	/* 4096 slices (160 KiB) cannot fit in 64 KiB: refused, and nothing
	 * evicted for it */
	cr_assert_eq(namecache_put(nc, ROOT, "frag", 3, &a, many, 4096), EFBIG);
	cr_assert_eq(get_i(nc, ROOT, "keep", 1), 1);
	cr_assert_eq(stats(nc).evictions, 0);
	free(many);
	namecache_close(nc);
}

/* Names of one length that fit in a SMALL one-stripe cache: put until the
 * first eviction. */
static uint64_t capacity(void)
{
	struct namecache *nc = open_nc(SMALL, 1, HOUR);
	char name[64];
	uint64_t i;

	for (i = 0; stats(nc).evictions == 0; i++)
		cr_assert_eq(put_i(nc, ROOT, img(name, i), 3), 0);
	namecache_close(nc);
	return i - 1; /* put i-1 evicted: i-1 fitted */
}

/*
 * The issue: past the bound a put evicts one name, not all of them, and
 * the clock evicts names not used since it last passed, keeping those that
 * were read. A cache that starts over fails at the first put past the bound
 * (entries drop to 1) and again when the used names are gone; a FIFO fails
 * at the end (the names read are the oldest).
 */
Test(namecache, past_the_bound_recent_names_hit)
{
	uint64_t c = capacity(), half;
	struct namecache *nc = open_nc(SMALL, 1, HOUR);
	char name[64];
	struct namecache_stats st;

	cr_assert_gt(c, 100, "only %llu names in 64 KiB",
		     (unsigned long long)c);
	half = c / 2;
	for (uint64_t i = 0; i < c; i++) /* value of every name: 3 */
		cr_assert_eq(put_i(nc, ROOT, img(name, i), 3), 0);
	st = stats(nc);
	cr_assert_eq(st.evictions, 0);
	cr_assert_eq(st.entries, c);

	/* one past the bound: the oldest name goes, and only it */
	cr_assert_eq(put_i(nc, ROOT, img(name, c), 3), 0);
	st = stats(nc);
	cr_assert_eq(st.entries, c, "%llu names left of %llu",
		     (unsigned long long)st.entries, (unsigned long long)c);
	cr_assert_eq(st.evictions, 1);
	cr_assert_leq(st.bytes, SMALL);

	/* an epoch reads the older half... */
	for (uint64_t i = 1; i <= half; i++)
		cr_assert_eq(get_i(nc, ROOT, img(name, i), 3), 1,
			     "'%s' evicted", name);
	/* ...while as many new names come in */
	for (uint64_t i = c + 1; i <= c + half; i++)
		cr_assert_eq(put_i(nc, ROOT, img(name, i), 3), 0);
	st = stats(nc);
	cr_assert_eq(st.evictions, 1 + half);
	cr_assert_eq(st.entries, c);
	cr_assert_leq(st.bytes, SMALL);
	namecache_check(nc);

	/* the names read are all still there, and the new ones; the ones
	 * nobody read went */
	for (uint64_t i = 1; i <= half; i++)
		cr_assert_eq(get_i(nc, ROOT, img(name, i), 3), 1,
			     "'%s' read, then evicted", name);
	for (uint64_t i = c + 1; i <= c + half; i++)
		cr_assert_eq(get_i(nc, ROOT, img(name, i), 3), 1,
			     "'%s' evicted", name);
	cr_assert_eq(get_i(nc, ROOT, img(name, half + 1), 3), 0);
	cr_assert_eq(get_i(nc, ROOT, img(name, 0), 3), 0);
	st = stats(nc);
	cr_assert_eq(st.hits, 2 * half + half);
	cr_assert_eq(st.misses, 2);
	namecache_close(nc);
}

/* Long names cost more: fewer fit, and the bound holds either way. */
Test(namecache, bound_counts_name_lengths)
{
	uint64_t fit[2];
	size_t lens[2] = {8, 200};

	for (int k = 0; k < 2; k++) {
		struct namecache *nc = open_nc(SMALL, 1, HOUR);
		uint64_t empty = stats(nc).bytes, i;
		char name[256];
		struct namecache_stats st;

		for (i = 0; i < 2000; i++) {
			snprintf(name, sizeof(name), "%0*llu", (int)lens[k],
				 (unsigned long long)i);
			cr_assert_eq(put_i(nc, ROOT, name, 3), 0);
			cr_assert_leq(stats(nc).bytes, SMALL);
		}
		st = stats(nc);
		fit[k] = st.entries;
		cr_assert_eq(st.evictions, 2000 - st.entries);
		cr_assert_eq(st.bytes,
			     empty + st.entries *
					 namecache_entry_cost(lens[k], 3 % 3));
		/* full: another entry of that size would not fit */
		cr_assert_gt(st.bytes + namecache_entry_cost(lens[k], 0),
			     SMALL);
		namecache_check(nc);
		namecache_close(nc);
	}
	cr_assert_lt(fit[1] * 2, fit[0], "200-byte names: %llu, 8-byte: %llu",
		     (unsigned long long)fit[1], (unsigned long long)fit[0]);
}

/* ---- threads ------------------------------------------------------------ */

#define NTHREADS 8
#define NOPS	 40000
#define NNAMES	 3000

struct worker {
	struct namecache *nc;
	unsigned seed;
	int clears; /* this one also clears now and then */
	uint64_t gets, hits, wrong, failed_puts;
};

static void *work(void *arg)
{
	struct worker *w = arg;
	char name[64];

	for (int op = 0; op < NOPS; op++) {
		uint64_t i = (uint64_t)rand_r(&w->seed) % NNAMES;
		uint64_t parent = ROOT + i % 5;
		snprintf(name, sizeof(name), "d%llu-f%llu",
			 (unsigned long long)parent, (unsigned long long)i);
		int r = lookup_i(w->nc, parent, name, i);
		w->gets++;
		if (r == 1)
			w->hits++;
		else if (r < 0)
			w->wrong++;
		else if (put_i(w->nc, parent, name, i))
			w->failed_puts++;
		if (w->clears && op % 5000 == 4999)
			namecache_clear(w->nc);
	}
	return NULL;
}

Test(namecache, threads_get_what_was_put)
{
	/* 4 stripes of 16 KiB: about 300 of the 3000 names fit, so puts
	 * evict all along while others read */
	struct namecache *nc = open_nc(SMALL, 4, HOUR);
	struct worker w[NTHREADS];
	pthread_t t[NTHREADS];
	uint64_t gets = 0, hits = 0, wrong = 0, failed = 0;

	for (int k = 0; k < NTHREADS; k++) {
		w[k] = (struct worker){
		    .nc = nc, .seed = 1234u + (unsigned)k, .clears = k == 0};
		cr_assert_eq(pthread_create(&t[k], NULL, work, &w[k]), 0);
	}
	for (int k = 0; k < NTHREADS; k++) {
		pthread_join(t[k], NULL);
		gets += w[k].gets;
		hits += w[k].hits;
		wrong += w[k].wrong;
		failed += w[k].failed_puts;
	}
	cr_assert_eq(wrong, 0, "%llu hits returned another name's value",
		     (unsigned long long)wrong);
	cr_assert_eq(failed, 0);
	namecache_check(nc);
	struct namecache_stats st = stats(nc);
	cr_assert_eq(st.hits + st.misses, gets);
	cr_assert_eq(st.hits, hits);
	cr_assert_gt(st.hits, 0);
	cr_assert_gt(st.evictions, 0);
	cr_assert_leq(st.bytes, SMALL);
	namecache_close(nc);
}
