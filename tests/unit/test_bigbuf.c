/*
 * test_bigbuf.c - freed block buffers come back for blocks of about their
 * size, a bounded number of them, and anything malloc'd may be given back.
 */
#include <criterion/criterion.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "lib/bigbuf.h"

#define MiB (1u << 20)

Test(bigbuf, freed_buffer_serves_the_next_block)
{
	char *a = bigbuf_alloc(4 * MiB + 4120);

	cr_assert_not_null(a);
	cr_assert_geq(malloc_usable_size(a), 4 * MiB + 4120);
	memset(a, 7, 4 * MiB + 4120);
	bigbuf_free(a);
	char *b = bigbuf_alloc(4 * MiB);
	cr_assert_eq(b, a, "a kept buffer was not used again");
	/* a buffer in use is nobody else's */
	char *c = bigbuf_alloc(4 * MiB);
	cr_assert_neq(c, b);
	free(b); /* plain free is fine too */
	bigbuf_free(c);
	bigbuf_free(NULL);
}

Test(bigbuf, sizes_must_fit)
{
	char *big = bigbuf_alloc(16 * MiB);

	bigbuf_free(big);
	/* not spent on a block of a quarter of its size */
	char *small = bigbuf_alloc(4 * MiB);
	cr_assert_neq(small, big);
	/* nor handed out too small */
	char *bigger = bigbuf_alloc(17 * MiB);
	cr_assert_neq(bigger, big);
	cr_assert_geq(malloc_usable_size(bigger), 17 * MiB);
	char *again = bigbuf_alloc(16 * MiB);
	cr_assert_eq(again, big);
	bigbuf_free(small);
	bigbuf_free(bigger);
	bigbuf_free(again);
	/* below BIGBUF_MIN: plain malloc, never a kept block */
	char *tiny = bigbuf_alloc(100);
	cr_assert_not_null(tiny);
	cr_assert_lt(malloc_usable_size(tiny), BIGBUF_MIN);
	bigbuf_free(tiny);
	void *none = bigbuf_alloc(0);
	cr_assert_not_null(none);
	bigbuf_free(none);
}

Test(bigbuf, keeps_a_bounded_number)
{
	enum { N = BIGBUF_KEEP + 4 };
	void *p[N], *q[N];

	for (int i = 0; i < N; i++)
		cr_assert_not_null(p[i] = bigbuf_alloc(2 * MiB));
	for (int i = 0; i < N; i++)
		bigbuf_free(p[i]);
	/* the kept ones come back first, then new ones are made */
	for (int i = 0; i < N; i++) {
		cr_assert_not_null(q[i] = bigbuf_alloc(2 * MiB));
		int kept = 0;
		for (int k = 0; k < N; k++)
			kept |= q[i] == p[k];
		if (i < BIGBUF_KEEP)
			cr_assert(kept, "buffer %d is not one kept", i);
	}
	for (int i = 0; i < N; i++)
		bigbuf_free(q[i]);
}
