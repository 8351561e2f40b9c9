/*
 * slice.c - resolve a chunk's slice list into visible extents.
 *
 * A sweep over the slice boundaries with a max-heap of the slices covering
 * the current point, keyed by age: O(n log n) in the number of slices and
 * independent of their byte lengths, so chunks with thousands of small
 * overwrites resolve quickly.
 */
#include "fs/data/slice.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- max-heap of indexes into in[] (higher index = newer) ---- */

struct heap {
	size_t *v;
	size_t n;
};

static void heap_push(struct heap *h, size_t x)
{
	size_t i = h->n++;

	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (h->v[p] >= x)
			break;
		h->v[i] = h->v[p];
		i = p;
	}
	h->v[i] = x;
}

static void heap_pop(struct heap *h)
{
	size_t x = h->v[--h->n], i = 0;

	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= h->n)
			break;
		if (c + 1 < h->n && h->v[c + 1] > h->v[c])
			c++;
		if (h->v[c] <= x)
			break;
		h->v[i] = h->v[c];
		i = c;
	}
	if (h->n)
		h->v[i] = x;
}

/* ---- sweep ---- */

/* A slice's start, sorted by position so the sweep meets slices in order. */
struct start {
	uint32_t pos;
	size_t idx;
};

static int by_pos(const void *a, const void *b)
{
	uint32_t pa = ((const struct start *)a)->pos;
	uint32_t pb = ((const struct start *)b)->pos;

	return pa < pb ? -1 : pa > pb;
}

static int by_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int slice_resolve(const struct meta_slice *in, size_t n,
		  struct meta_slice **out, size_t *nout)
{
	struct start *order = NULL;
	size_t nlive = 0, npts = 0, nres = 0, cap;
	uint64_t *pts = NULL;
	struct meta_slice *res = NULL;
	struct heap h = {0};
	int err = ENOMEM;

	*out = NULL;
	*nout = 0;
	if (n == 0)
		return 0;

	order = malloc(n * sizeof(*order));
	pts = malloc(2 * n * sizeof(*pts));
	h.v = malloc(n * sizeof(*h.v));
	if (!order || !pts || !h.v)
		goto free_all;
	for (size_t i = 0; i < n; i++) {
		if (in[i].len == 0)
			continue;
		order[nlive++] = (struct start){in[i].pos, i};
		pts[npts++] = in[i].pos;
		pts[npts++] = (uint64_t)in[i].pos + in[i].len;
	}
	if (nlive == 0) {
		err = 0;
		goto free_all;
	}
	qsort(order, nlive, sizeof(*order), by_pos);
	qsort(pts, npts, sizeof(*pts), by_u64);

	/* Each elementary segment yields at most one extent. */
	cap = npts;
	res = malloc(cap * sizeof(*res));
	if (!res)
		goto free_all;

	size_t next = 0; /* next slice of order[] to enter the heap */
	for (size_t p = 0; p + 1 < npts; p++) {
		uint64_t x = pts[p], end = pts[p + 1];
		if (x == end)
			continue;
		while (next < nlive && order[next].pos <= x)
			heap_push(&h, order[next++].idx);
		/* Lazily drop slices that ended at or before x. */
		while (h.n && (uint64_t)in[h.v[0]].pos + in[h.v[0]].len <= x)
			heap_pop(&h);
		if (!h.n)
			continue;
		const struct meta_slice *s = &in[h.v[0]];
		if (s->id == 0)
			continue; /* a hole hides what is under it */
		struct meta_slice *last = nres ? &res[nres - 1] : NULL;
		if (last && last->id == s->id && last->size == s->size &&
		    (uint64_t)last->pos + last->len == x &&
		    (uint64_t)last->off + last->len == s->off + (x - s->pos)) {
			last->len += (uint32_t)(end - x);
			continue;
		}
		res[nres++] = (struct meta_slice){
		    .id = s->id,
		    .size = s->size,
		    .off = s->off + (uint32_t)(x - s->pos),
		    .len = (uint32_t)(end - x),
		    .pos = (uint32_t)x,
		    .pack = s->pack,
		    .poff = s->poff,
		    .plen = s->plen,
		};
	}
	err = 0;
	if (nres) {
		*out = res;
		*nout = nres;
		res = NULL;
	}

free_all:
	free(res);
	free(h.v);
	free(pts);
	free(order);
	return err;
}
