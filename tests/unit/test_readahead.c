/*
 * test_readahead.c - the readahead policy on synthetic read streams: the
 * window grows by doubling on a stream and each block is asked for once,
 * random reads ask for nothing, EOF clips, and slightly reordered reads
 * (the kernel's own readahead) still count as a stream.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fs/data/readahead.h"

#define KiB (1ull << 10)
#define MiB (1ull << 20)
#define BS  (4 * MiB)
#define MAX (32 * MiB)

/* Which blocks were issued, and how often; checks every issued range. */
struct tally {
	uint64_t length;
	unsigned char count[256];
	uint64_t calls, bytes;
};

static void read_at(struct readahead *ra, struct tally *t, uint64_t off,
		    size_t len)
{
	uint64_t po, pl;

	readahead_update(ra, off, len, t->length, BS, MAX, &po, &pl);
	if (pl == 0)
		return;
	cr_assert_eq(po % BS, 0, "prefetch at %llu is not block-aligned",
		     (unsigned long long)po);
	cr_assert(po + pl == t->length || pl % BS == 0,
		  "prefetch [%llu, +%llu) is not whole blocks",
		  (unsigned long long)po, (unsigned long long)pl);
	cr_assert_leq(po + pl, t->length, "prefetch past EOF");
	cr_assert_geq(po, off + len, "prefetch of what is being read");
	t->calls++;
	t->bytes += pl;
	for (uint64_t b = po / BS; b * BS < po + pl; b++) {
		cr_assert_lt(b, 256);
		t->count[b]++;
	}
}

Test(readahead, stream_doubles_to_max_and_issues_once)
{
	struct readahead ra;
	struct tally t = {.length = 100 * MiB};
	const uint64_t rs = 128 * KiB;
	uint64_t expect = 2 * BS;

	readahead_init(&ra);
	for (uint64_t off = 0; off < t.length; off += rs) {
		read_at(&ra, &t, off, rs);
		cr_assert_eq(ra.window, expect, "after read at %llu: %llu",
			     (unsigned long long)off,
			     (unsigned long long)ra.window);
		if (expect < MAX)
			expect *= 2;
		/* Always at least the window ahead, or up to EOF. */
		uint64_t want = off + rs + ra.window;
		if (want > t.length)
			want = t.length;
		cr_assert_geq(
		    ra.issued + BS, want, "issued %llu lags behind %llu",
		    (unsigned long long)ra.issued, (unsigned long long)want);
	}
	/* Block 0 is read by the first read itself; every other block is
	 * asked for exactly once. */
	cr_assert_eq(t.count[0], 0);
	for (uint64_t b = 1; b < t.length / BS; b++)
		cr_assert_eq(t.count[b], 1, "block %llu issued %u times",
			     (unsigned long long)b, t.count[b]);
	cr_assert_eq(t.bytes, t.length - BS);
}

Test(readahead, random_reads_issue_nothing)
{
	struct readahead ra;
	struct tally t = {.length = 1024 * MiB};
	uint64_t x = 12345;

	readahead_init(&ra);
	/* The first read far from 0 is not a stream either. */
	for (int i = 0; i < 1000; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		uint64_t off = ((x >> 20) % (t.length / (4 * KiB))) * 4 * KiB;
		if (i == 0)
			off = 500 * MiB;
		/* shuffled reads that happen to follow on would be a stream */
		if (off <= ra.next + 128 * KiB &&
		    off + 4 * KiB + 128 * KiB >= ra.next)
			continue;
		read_at(&ra, &t, off, 4 * KiB);
		cr_assert_eq(ra.window, 0);
	}
	cr_assert_eq(t.calls, 0, "%llu prefetches for random reads",
		     (unsigned long long)t.calls);
}

Test(readahead, random_then_stream_starts_over)
{
	struct readahead ra;
	struct tally t = {.length = 512 * MiB};
	uint64_t po, pl;

	readahead_init(&ra);
	for (uint64_t off = 0; off < 8 * MiB; off += MiB)
		read_at(&ra, &t, off, MiB);
	cr_assert_eq(ra.window, MAX);

	/* A jump: nothing ahead, the window is gone. */
	readahead_update(&ra, 300 * MiB, 4 * KiB, t.length, BS, MAX, &po, &pl);
	cr_assert_eq(pl, 0);
	cr_assert_eq(ra.window, 0);
	cr_assert_eq(ra.seq, 0);

	/* Reading on from there starts a new stream at two blocks. */
	readahead_update(&ra, 300 * MiB + 4 * KiB, 124 * KiB, t.length, BS, MAX,
			 &po, &pl);
	cr_assert_eq(ra.window, 2 * BS);
	cr_assert_eq(po, 300 * MiB + BS - (300 * MiB) % BS);
	cr_assert_eq(pl, BS, "%llu", (unsigned long long)pl);
	readahead_update(&ra, 300 * MiB + 128 * KiB, 128 * KiB, t.length, BS,
			 MAX, &po, &pl);
	cr_assert_eq(ra.window, 4 * BS);

	/* Back to the old stream's place: a jump again, nothing issued. */
	readahead_update(&ra, 8 * MiB, MiB, t.length, BS, MAX, &po, &pl);
	cr_assert_eq(pl, 0);
	cr_assert_eq(ra.window, 0);
}

Test(readahead, clipped_at_eof)
{
	struct readahead ra;
	struct tally t = {.length = 10 * MiB + 5};
	uint64_t po, pl;

	readahead_init(&ra);
	read_at(&ra, &t, 0, 128 * KiB);		/* window 8 MiB: block 1 */
	read_at(&ra, &t, 128 * KiB, 128 * KiB); /* 16 MiB: up to EOF */
	cr_assert_eq(ra.issued, t.length);
	cr_assert_eq(t.count[1], 1);
	cr_assert_eq(t.count[2], 1, "the short last block is issued");
	for (uint64_t off = 256 * KiB; off < t.length; off += 128 * KiB)
		read_at(&ra, &t, off, 128 * KiB);
	cr_assert_eq(t.count[1], 1);
	cr_assert_eq(t.count[2], 1);
	cr_assert_eq(t.bytes, t.length - BS);

	/* A small file read whole: nothing beyond it. */
	readahead_init(&ra);
	readahead_update(&ra, 0, 128 * KiB, 100 * KiB, BS, MAX, &po, &pl);
	cr_assert_eq(pl, 0);
	/* Reads past EOF ask for nothing. */
	readahead_update(&ra, 128 * KiB, 128 * KiB, 100 * KiB, BS, MAX, &po,
			 &pl);
	cr_assert_eq(pl, 0);
}

Test(readahead, out_of_order_stays_a_stream)
{
	struct readahead ra;
	struct tally t = {.length = 200 * MiB};
	const uint64_t rs = 128 * KiB;

	readahead_init(&ra);
	/* Pairs swapped: 0, 2, 1, 4, 3, 6, 5, ... (in units of rs) */
	uint64_t n = t.length / rs;
	for (uint64_t i = 0; i < n; i++) {
		uint64_t k = i == 0 ? 0 : (i % 2 ? i + 1 : i - 1);
		if (k >= n)
			k = i;
		read_at(&ra, &t, k * rs, rs);
		cr_assert_neq(ra.window, 0, "stream lost at read %llu",
			      (unsigned long long)i);
	}
	cr_assert_eq(ra.window, MAX);
	for (uint64_t b = 1; b < t.length / BS; b++)
		cr_assert_eq(t.count[b], 1, "block %llu issued %u times",
			     (unsigned long long)b, t.count[b]);

	/* A jump forward within the tolerance is still the stream. */
	uint64_t po, pl;
	readahead_init(&ra);
	readahead_update(&ra, 0, rs, t.length, BS, MAX, &po, &pl);
	readahead_update(&ra, 2 * rs, rs, t.length, BS, MAX, &po, &pl);
	cr_assert_eq(ra.window, 4 * BS);
	/* Just beyond it is not: four reads of the size read. */
	readahead_update(&ra, 3 * rs + 4 * rs + 1, rs, t.length, BS, MAX, &po,
			 &pl);
	cr_assert_eq(ra.window, 0);

	/* 1 MiB requests of a 4 MiB kernel readahead, as the daemon's
	 * threads take them: up to three ahead of the one expected */
	readahead_init(&ra);
	memset(t.count, 0, sizeof(t.count));
	t.calls = t.bytes = 0;
	static const int order[] = {0, 1, 3, 2, 4, 7, 6, 5, 8, 9, 11, 10};
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		read_at(&ra, &t, (uint64_t)order[i] * MiB, MiB);
		cr_assert_neq(ra.window, 0, "stream lost at read %zu", i);
	}
	/* small reads keep the small tolerance */
	readahead_init(&ra);
	readahead_update(&ra, 0, 4 * KiB, t.length, BS, MAX, &po, &pl);
	readahead_update(&ra, 128 * KiB + 4 * KiB + 1, 4 * KiB, t.length, BS,
			 MAX, &po, &pl);
	cr_assert_eq(ra.next, 128 * KiB + 8 * KiB + 1,
		     "a jump kept the stream");
	cr_assert_eq(ra.run, 4 * KiB);
}

Test(readahead, rereading_one_spot_does_not_grow)
{
	struct readahead ra;
	struct tally t = {.length = 100 * MiB};

	readahead_init(&ra);
	for (int i = 0; i < 50; i++)
		read_at(&ra, &t, 0, 4 * KiB);
	/* A small read at 0 may start a stream, but it is no stream yet:
	 * nothing is asked for ahead, however often the spot is re-read. */
	cr_assert_eq(ra.window, 0);
	cr_assert_eq(t.bytes, 0, "a re-read header fetched %llu bytes ahead",
		     (unsigned long long)t.bytes);
	/* Reading on from it is: 64 KiB in, the window opens. */
	for (uint64_t off = 4 * KiB; off < 64 * KiB; off += 4 * KiB) {
		read_at(&ra, &t, off, 4 * KiB);
		cr_assert_eq(ra.window, off + 4 * KiB < 64 * KiB ? 0 : 2 * BS,
			     "after the read at %llu", (unsigned long long)off);
	}
	cr_assert_eq(t.bytes, BS);
}

Test(readahead, small_random_reads_landing_close_are_no_stream)
{
	struct readahead ra;
	struct tally t = {.length = 32 * MiB};

	readahead_init(&ra);
	/* shuffled 4 KiB reads, each within the tolerance of the one before
	 * but not contiguous: a sample index read in a clustered order */
	uint64_t off = 10 * MiB;
	for (int i = 0; i < 15; i++) {
		read_at(&ra, &t, off, 4 * KiB);
		off += (i % 3 + 1) * 32 * KiB;
	}
	cr_assert_eq(ra.window, 0);
	cr_assert_eq(t.calls, 0, "%llu prefetches for scattered small reads",
		     (unsigned long long)t.calls);
}
