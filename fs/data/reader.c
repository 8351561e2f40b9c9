/*
 * reader.c - read a byte range of a file: for each chunk it touches, fetch
 * the slice list, resolve the visible extents and copy them out of the
 * chunk store, zero-filling the holes. Prefetch walks the same extents and
 * asks the chunk store to fetch them in the background instead.
 */
#include "fs/data/reader.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fs/data/slice.h"

/* ---- walking a range ---- */

/*
 * Called for each piece of the range in order: bytes [at, at+n) of the file
 * are bytes [soff, soff+n) of slice e, or a hole when e is NULL (soff 0).
 * A non-zero return stops the walk and is returned.
 */
typedef int (*piece_fn)(void *ctx, const struct meta_slice *e, uint32_t soff,
			uint64_t at, uint64_t n);

/* Walk bytes [pos, pos+len) of chunk idx (len inside the chunk). */
static int walk_chunk(uint64_t ino, uint32_t idx, uint32_t pos, uint32_t len,
		      reader_chunk_fn fn, void *arg, piece_fn piece, void *ctx)
{
	struct meta_slice *list = NULL, *ext = NULL;
	size_t n = 0, next = 0;
	uint64_t base = (uint64_t)idx * META_CHUNK_SIZE;
	uint64_t end = (uint64_t)pos + len;
	int err;

	err = fn(arg, ino, idx, &list, &n);
	if (err)
		return err;
	err = slice_resolve(list, n, &ext, &next);
	free(list);
	if (err)
		return err;

	/* Extents are sorted and disjoint: the gaps are the holes. */
	uint64_t at = pos;
	for (size_t i = 0; i < next && at < end; i++) {
		const struct meta_slice *e = &ext[i];
		uint64_t es = e->pos, ee = (uint64_t)e->pos + e->len;
		if (ee <= at)
			continue;
		if (es >= end)
			break;
		if (es > at) {
			err = piece(ctx, NULL, 0, base + at, es - at);
			if (err)
				goto free_ext;
			at = es;
		}
		uint64_t stop = ee < end ? ee : end;
		err = piece(ctx, e, e->off + (uint32_t)(at - es), base + at,
			    stop - at);
		if (err)
			goto free_ext;
		at = stop;
	}
	if (at < end)
		err = piece(ctx, NULL, 0, base + at, end - at);
free_ext:
	free(ext);
	return err;
}

/* Walk [off, end) of the file, chunk by chunk. */
static int walk(uint64_t ino, uint64_t off, uint64_t end, reader_chunk_fn fn,
		void *arg, piece_fn piece, void *ctx)
{
	for (uint64_t at = off; at < end;) {
		uint32_t idx = (uint32_t)(at / META_CHUNK_SIZE);
		uint32_t pos = (uint32_t)(at % META_CHUNK_SIZE);
		uint64_t n = META_CHUNK_SIZE - pos;
		if (n > end - at)
			n = end - at;
		int err =
		    walk_chunk(ino, idx, pos, (uint32_t)n, fn, arg, piece, ctx);
		if (err)
			return err;
		at += n;
	}
	return 0;
}

/* ---- read ---- */

struct read_ctx {
	struct chunkstore *cs;
	char *buf; /* holds the file's bytes from off */
	uint64_t off;
};

static int read_piece(void *ctx, const struct meta_slice *e, uint32_t soff,
		      uint64_t at, uint64_t n)
{
	struct read_ctx *r = ctx;
	char *dst = r->buf + (at - r->off);

	if (!e) {
		memset(dst, 0, n);
		return 0;
	}
	int err;
	if (e->pack) {
		struct chunkstore_frame f = {e->pack, e->poff, e->plen};
		err = chunkstore_read_frame(r->cs, e->id, e->size, &f, soff,
					    (uint32_t)n, dst);
	} else {
		err = chunkstore_read(r->cs, e->id, e->size, soff, (uint32_t)n,
				      dst);
	}
	return err == EINVAL ? EIO : err; /* the record points past its slice */
}

/* Walk [off, off+len) of a file of `length` bytes, clipped to it, and say
 * in *got how much that was. */
static int walk_read(uint64_t ino, uint64_t length, uint64_t off, size_t len,
		     size_t *got, reader_chunk_fn fn, void *arg, piece_fn piece,
		     void *ctx)
{
	if (off >= length || len == 0)
		return 0;
	uint64_t end = length - off < len ? length : off + len;
	int err = walk(ino, off, end, fn, arg, piece, ctx);
	if (!err)
		*got = (size_t)(end - off);
	return err;
}

int reader_read(struct chunkstore *cs, uint64_t ino, uint64_t length,
		uint64_t off, size_t len, void *buf, size_t *got,
		reader_chunk_fn fn, void *arg)
{
	struct read_ctx r = {cs, buf, off};

	if (!got)
		return EINVAL;
	*got = 0;
	if (!cs || !fn || (!buf && len))
		return EINVAL;
	return walk_read(ino, length, off, len, got, fn, arg, read_piece, &r);
}

/* ---- read without copying ---- */

/* Holes are handed out as runs of this, a piece at a time. */
static const char zeros[64u << 10];

struct pin_ctx {
	struct chunkstore *cs;
	chunkstore_run_fn fn;
	void *arg;
};

static int pinned_piece(void *ctx, const struct meta_slice *e, uint32_t soff,
			uint64_t at, uint64_t n)
{
	struct pin_ctx *p = ctx;
	int err = 0;
	(void)at;

	if (!e) {
		for (uint64_t k; n && !err; n -= k) {
			k = n < sizeof(zeros) ? n : sizeof(zeros);
			err = p->fn(p->arg, zeros, (size_t)k, NULL);
		}
		return err;
	}
	if (e->pack) {
		struct chunkstore_frame f = {e->pack, e->poff, e->plen};
		err = chunkstore_read_frame_pinned(p->cs, e->id, e->size, &f,
						   soff, (uint32_t)n, p->fn,
						   p->arg);
	} else {
		err = chunkstore_read_pinned(p->cs, e->id, e->size, soff,
					     (uint32_t)n, p->fn, p->arg);
	}
	return err == EINVAL ? EIO : err; /* the record points past its slice */
}

int reader_read_pinned(struct chunkstore *cs, uint64_t ino, uint64_t length,
		       uint64_t off, size_t len, size_t *got,
		       chunkstore_run_fn run, void *run_arg, reader_chunk_fn fn,
		       void *arg)
{
	struct pin_ctx p = {cs, run, run_arg};

	if (!got)
		return EINVAL;
	*got = 0;
	if (!cs || !fn || !run)
		return EINVAL;
	return walk_read(ino, length, off, len, got, fn, arg, pinned_piece, &p);
}

/* ---- prefetch ---- */

static int prefetch_piece(void *ctx, const struct meta_slice *e, uint32_t soff,
			  uint64_t at, uint64_t n)
{
	(void)at;
	if (e && e->pack) {
		struct chunkstore_frame f = {e->pack, e->poff, e->plen};
		chunkstore_prefetch_frame(ctx, e->id, e->size, &f);
	} else if (e) {
		chunkstore_prefetch(ctx, e->id, e->size, soff, (uint32_t)n);
	}
	return 0;
}

int reader_prefetch(struct chunkstore *cs, uint64_t ino, uint64_t length,
		    uint64_t off, uint64_t len, reader_chunk_fn fn, void *arg)
{
	if (!cs || !fn)
		return EINVAL;
	if (off >= length || len == 0)
		return 0;
	uint64_t end = length - off < len ? length : off + len;
	return walk(ino, off, end, fn, arg, prefetch_piece, cs);
}
