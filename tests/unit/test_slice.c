/*
 * test_slice.c - slice_resolve: hand-written cases, then thousands of random
 * slice lists checked byte by byte against a painter that applies the
 * slices oldest first onto an array.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/data/slice.h"

#define S(i, sz, o, l, p)                                                      \
	((struct meta_slice){.id = i, .size = sz, .off = o, .len = l, .pos = p})

static void expect(const struct meta_slice *in, size_t n,
		   const struct meta_slice *want, size_t nwant)
{
	struct meta_slice *out = NULL;
	size_t nout = 99;

	cr_assert_eq(slice_resolve(in, n, &out, &nout), 0);
	cr_assert_eq(nout, nwant, "got %zu extents, want %zu", nout, nwant);
	for (size_t i = 0; i < nwant; i++) {
		cr_expect_eq(out[i].id, want[i].id, "extent %zu id", i);
		cr_expect_eq(out[i].size, want[i].size, "extent %zu size", i);
		cr_expect_eq(out[i].off, want[i].off, "extent %zu off", i);
		cr_expect_eq(out[i].len, want[i].len, "extent %zu len", i);
		cr_expect_eq(out[i].pos, want[i].pos, "extent %zu pos", i);
	}
	free(out);
}

Test(slice, empty)
{
	struct meta_slice *out = (void *)1;
	size_t nout = 7;

	cr_assert_eq(slice_resolve(NULL, 0, &out, &nout), 0);
	cr_assert_eq(nout, 0);
	cr_assert_null(out);
}

Test(slice, one)
{
	struct meta_slice in[] = {S(5, 100, 10, 50, 200)};
	expect(in, 1, in, 1);
}

Test(slice, newer_overwrites_middle)
{
	struct meta_slice in[] = {S(1, 100, 0, 100, 0), S(2, 10, 0, 10, 40)};
	struct meta_slice want[] = {S(1, 100, 0, 40, 0), S(2, 10, 0, 10, 40),
				    S(1, 100, 50, 50, 50)};
	expect(in, 2, want, 3);
}

Test(slice, older_does_not_cover_newer)
{
	/* Same two slices, other age order: the big one wins everywhere. */
	struct meta_slice in[] = {S(2, 10, 0, 10, 40), S(1, 100, 0, 100, 0)};
	struct meta_slice want[] = {S(1, 100, 0, 100, 0)};
	expect(in, 2, want, 1);
}

Test(slice, exact_cover)
{
	struct meta_slice in[] = {S(1, 100, 0, 100, 0), S(2, 300, 200, 100, 0)};
	struct meta_slice want[] = {S(2, 300, 200, 100, 0)};
	expect(in, 2, want, 1);
}

Test(slice, hole_hides_data)
{
	struct meta_slice in[] = {S(1, 100, 0, 100, 0), S(0, 0, 0, 30, 20)};
	struct meta_slice want[] = {S(1, 100, 0, 20, 0), S(1, 100, 50, 50, 50)};
	expect(in, 2, want, 2);
}

Test(slice, hole_then_newer_data)
{
	struct meta_slice in[] = {S(1, 100, 0, 100, 0), S(0, 0, 0, 100, 0),
				  S(3, 10, 0, 10, 90)};
	struct meta_slice want[] = {S(3, 10, 0, 10, 90)};
	expect(in, 3, want, 1);
}

Test(slice, adjacent)
{
	struct meta_slice in[] = {S(1, 50, 0, 50, 0), S(2, 50, 0, 50, 50)};
	expect(in, 2, in, 2);
}

Test(slice, gap_between)
{
	struct meta_slice in[] = {S(2, 50, 0, 50, 100), S(1, 50, 0, 50, 0)};
	struct meta_slice want[] = {S(1, 50, 0, 50, 0), S(2, 50, 0, 50, 100)};
	expect(in, 2, want, 2);
}

Test(slice, identical_pos)
{
	struct meta_slice in[] = {S(1, 100, 0, 100, 10), S(2, 20, 0, 20, 10)};
	struct meta_slice want[] = {S(2, 20, 0, 20, 10), S(1, 100, 20, 80, 30)};
	expect(in, 2, want, 2);
}

Test(slice, newer_overlaps_tail_and_head)
{
	struct meta_slice in[] = {S(1, 100, 0, 100, 0), S(2, 100, 0, 100, 200),
				  S(3, 200, 0, 200, 50)};
	struct meta_slice want[] = {S(1, 100, 0, 50, 0), S(3, 200, 0, 200, 50),
				    S(2, 100, 50, 50, 250)};
	expect(in, 3, want, 3);
}

Test(slice, zero_length_ignored)
{
	struct meta_slice in[] = {S(1, 100, 0, 100, 0), S(2, 10, 0, 0, 50)};
	struct meta_slice want[] = {S(1, 100, 0, 100, 0)};
	expect(in, 2, want, 1);
}

Test(slice, chunk_end)
{
	/* A slice ending exactly at the end of a 64 MiB chunk. */
	uint32_t c = META_CHUNK_SIZE;
	struct meta_slice in[] = {S(1, c, 0, c, 0),
				  S(2, 4096, 0, 4096, c - 4096)};
	struct meta_slice want[] = {S(1, c, 0, c - 4096, 0),
				    S(2, 4096, 0, 4096, c - 4096)};
	expect(in, 2, want, 2);
}

/* ---- randomized against a painter ---- */

static uint64_t rng;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static uint64_t seed_from_env(void)
{
	const char *e = getenv("GRANARY_SEED");
	uint64_t seed = e ? strtoull(e, NULL, 0) : 0x5eed1234ull;

	printf("test_slice: seed %" PRIu64 " (set GRANARY_SEED to repeat)\n",
	       seed);
	fflush(stdout);
	return seed ? seed : 1;
}

/* Paint in[] oldest first into owner[] (index + 1, 0 = never written),
 * resolve, and check every byte of the range against the painting. */
static void check_random(const struct meta_slice *in, size_t n, uint32_t range,
			 uint32_t *owner)
{
	struct meta_slice *out = NULL;
	size_t nout = 0;

	memset(owner, 0, range * sizeof(*owner));
	for (size_t i = 0; i < n; i++)
		for (uint32_t x = in[i].pos; x < in[i].pos + in[i].len; x++)
			owner[x] = (uint32_t)i + 1;

	cr_assert_eq(slice_resolve(in, n, &out, &nout), 0);
	uint32_t at = 0;
	for (size_t k = 0; k < nout; k++) {
		const struct meta_slice *e = &out[k];
		cr_assert_gt(e->len, 0, "empty extent %zu", k);
		cr_assert_geq(e->pos, at, "extent %zu overlaps or is unsorted",
			      k);
		cr_assert_leq(e->pos + e->len, range);
		cr_assert_neq(e->id, 0, "a hole was emitted");
		cr_assert_leq(e->off + e->len, e->size,
			      "extent past its slice");
		/* Bytes skipped before this extent: holes only. */
		for (; at < e->pos; at++) {
			uint32_t o = owner[at];
			cr_assert(o == 0 || in[o - 1].id == 0,
				  "byte %u of slice %u not emitted", at, o - 1);
		}
		for (uint32_t x = e->pos; x < e->pos + e->len; x++) {
			uint32_t o = owner[x];
			cr_assert_neq(o, 0, "byte %u emitted but never written",
				      x);
			const struct meta_slice *s = &in[o - 1];
			cr_assert_eq(e->id, s->id,
				     "byte %u: id %" PRIu64 " want %" PRIu64, x,
				     e->id, s->id);
			cr_assert_eq(
			    e->off + (x - e->pos), s->off + (x - s->pos),
			    "byte %u maps to the wrong slice offset", x);
		}
		at = e->pos + e->len;
	}
	for (; at < range; at++) {
		uint32_t o = owner[at];
		cr_assert(o == 0 || in[o - 1].id == 0, "byte %u not emitted",
			  at);
	}
	free(out);
}

/* One slice in `longs` is long (up to the whole range), the rest short:
 * the painter's cost is the sum of the lengths. */
static void random_list(struct meta_slice *in, size_t n, uint32_t range,
			unsigned longs)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t pos = (uint32_t)(rnd() % range);
		uint32_t max = range - pos;
		/* Mostly short writes, some long ones. */
		uint32_t len = rnd() % longs
				   ? (uint32_t)(rnd() % (max < 64 ? max : 64))
				   : (uint32_t)(rnd() % max) + 1;
		uint32_t off = (uint32_t)(rnd() % 1000);
		uint64_t id = rnd() % 10 ? i + 1 : 0; /* 10% holes */
		/* Sometimes the same id twice, adjacent: extents may merge. */
		if (i && rnd() % 20 == 0 && in[i - 1].id) {
			const struct meta_slice *p = &in[i - 1];
			if (p->pos + p->len < range) {
				pos = p->pos + p->len;
				len = (uint32_t)(rnd() % (range - pos) % 4096) +
				      1;
				id = p->id;
				off = p->off + p->len;
			}
		}
		in[i] =
		    S(id, off + len + (uint32_t)(rnd() % 50), off, len, pos);
		if (id == 0)
			in[i].size = in[i].off = 0;
	}
}

Test(slice, random_small)
{
	enum { CASES = 5000, MAXN = 40, RANGE = 512 };
	struct meta_slice in[MAXN];
	uint32_t owner[RANGE];

	rng = seed_from_env();
	for (int c = 0; c < CASES; c++) {
		size_t n = (size_t)(rnd() % (MAXN + 1));
		random_list(in, n, RANGE, 4);
		check_random(in, n, RANGE, owner);
	}
}

Test(slice, random_many_slices)
{
	/* Thousands of slices in one chunk, as a heavily rewritten file has. */
	enum { N = 5000, RANGE = 1 << 20 };
	struct meta_slice *in = malloc(N * sizeof(*in));
	uint32_t *owner = malloc(RANGE * sizeof(*owner));

	cr_assert(in && owner);
	rng = seed_from_env() ^ 0xabcdef;
	for (int c = 0; c < 4; c++) {
		random_list(in, N, RANGE, 200);
		check_random(in, N, RANGE, owner);
	}
	free(owner);
	free(in);
}
