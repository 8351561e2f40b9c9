/*
 * reader.c - read a byte range of a file: for each chunk it touches, fetch
 * the slice list, resolve the visible extents and copy them out of the
 * chunk store, zero-filling the holes. One chunk at a time through
 * read_chunk(), the place where readahead will hook in.
 */
#include "reader.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "slice.h"

/* Fill dst with bytes [pos, pos+len) of chunk idx (len inside the chunk). */
static int read_chunk(struct chunkstore *cs, uint64_t ino, uint32_t idx,
		      uint32_t pos, uint32_t len, char *dst, reader_chunk_fn fn,
		      void *arg)
{
	struct meta_slice *list = NULL, *ext = NULL;
	size_t n = 0, next = 0;
	uint64_t end = (uint64_t)pos + len;
	int err;

	err = fn(arg, ino, idx, &list, &n);
	if (err)
		return err;
	err = slice_resolve(list, n, &ext, &next);
	free(list);
	if (err)
		return err;

	/* Extents are sorted and disjoint: zero the gaps as we go. */
	uint64_t at = pos;
	for (size_t i = 0; i < next && at < end; i++) {
		const struct meta_slice *e = &ext[i];
		uint64_t es = e->pos, ee = (uint64_t)e->pos + e->len;
		if (ee <= at)
			continue;
		if (es >= end)
			break;
		if (es > at) {
			memset(dst + (at - pos), 0, es - at);
			at = es;
		}
		uint64_t stop = ee < end ? ee : end;
		err = chunkstore_read(cs, e->id, e->size,
				      e->off + (uint32_t)(at - es),
				      (uint32_t)(stop - at), dst + (at - pos));
		if (err == EINVAL)
			err = EIO; /* the slice record points past its slice */
		if (err)
			goto free_ext;
		at = stop;
	}
	if (at < end)
		memset(dst + (at - pos), 0, end - at);
free_ext:
	free(ext);
	return err;
}

int reader_read(struct chunkstore *cs, uint64_t ino, uint64_t length,
		uint64_t off, size_t len, void *buf, size_t *got,
		reader_chunk_fn fn, void *arg)
{
	char *dst = buf;
	uint64_t end;
	int err;

	if (!got)
		return EINVAL;
	*got = 0;
	if (!cs || !fn || (!buf && len))
		return EINVAL;
	if (off >= length || len == 0)
		return 0;
	end = length - off < len ? length : off + len;

	for (uint64_t at = off; at < end;) {
		uint32_t idx = (uint32_t)(at / META_CHUNK_SIZE);
		uint32_t pos = (uint32_t)(at % META_CHUNK_SIZE);
		uint64_t n = META_CHUNK_SIZE - pos;
		if (n > end - at)
			n = end - at;
		err = read_chunk(cs, ino, idx, pos, (uint32_t)n, dst, fn, arg);
		if (err)
			return err;
		dst += n;
		at += n;
	}
	*got = (size_t)(end - off);
	return 0;
}
