/*
 * compact.c - chunk compaction (compact.h): the chunk's visible extents
 * (slice.h) grouped into runs of adjacent bytes, each run read block by
 * block through the chunk store and put as the blocks of a fresh slice,
 * then the list switched by meta_compact_chunk.
 */
#include "fs/data/compact.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "fs/data/slice.h"
#include "lib/log.h"
#include "meta/meta_objects.h"

/* Bytes [pos, pos+len) of the chunk from its visible extents e[0..n) into
 * buf (every byte of the range lies in some extent: runs have no gaps). */
static int read_range(struct chunkstore *cs, const struct meta_slice *e,
		      size_t n, uint32_t pos, uint32_t len, char *buf)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t a = e[i].pos > pos ? e[i].pos : pos;
		uint32_t b = e[i].pos + e[i].len < pos + len
				 ? e[i].pos + e[i].len
				 : pos + len;
		if (a >= b)
			continue;
		uint32_t off = e[i].off + (a - e[i].pos);
		int err;
		if (e[i].pack) {
			struct chunkstore_frame f = {e[i].pack, e[i].poff,
						     e[i].plen};
			err =
			    chunkstore_read_frame(cs, e[i].id, e[i].size, &f,
						  off, b - a, buf + (a - pos));
		} else {
			err = chunkstore_read(cs, e[i].id, e[i].size, off,
					      b - a, buf + (a - pos));
		}
		if (err)
			return err;
	}
	return 0;
}

/* One fresh slice with the bytes of run [pos, pos+len): its blocks put. */
static int write_run(struct meta *m, struct chunkstore *cs,
		     const struct meta_slice *e, size_t n, uint32_t pos,
		     uint32_t len, char *buf, struct meta_slice *out)
{
	uint32_t bs = chunkstore_block_size(cs);
	int err = meta_new_slice_id(m, &out->id);

	if (err)
		return err;
	out->size = out->len = len;
	out->pos = pos;
	out->off = 0;
	out->pack = 0;
	out->poff = out->plen = 0;
	for (uint32_t idx = 0; (uint64_t)idx * bs < len; idx++) {
		uint32_t o = idx * bs, k = len - o < bs ? len - o : bs;
		err = read_range(cs, e, n, pos + o, k, buf);
		if (!err)
			err = chunkstore_put_block(cs, out->id, idx, buf, k);
		if (err) {
			chunkstore_delete(cs, out->id, len);
			return err;
		}
	}
	return 0;
}

int compact_chunk(struct meta *m, struct chunkstore *cs, uint64_t ino,
		  uint32_t idx, size_t min_recs, uint32_t delay,
		  struct compact_result *res)
{
	struct meta_slice *s = NULL, *e = NULL, *runs = NULL;
	struct meta_chunk_tag tag;
	size_t n = 0, ne = 0, nr = 0, done = 0;
	char *buf = NULL;
	int err;

	memset(res, 0, sizeof *res);
	err = meta_compact_read(m, ino, idx, &s, &n, &tag);
	if (err)
		return err;
	res->before = n;
	if (n < (min_recs ? min_recs : COMPACT_MIN_RECS))
		goto out;
	err = slice_resolve(s, n, &e, &ne);
	if (err)
		goto out;
	/* runs of adjacent extents; a run longer than a slice may be cannot
	 * happen: a chunk is at most META_CHUNK_SIZE */
	runs = calloc(ne ? ne : 1, sizeof *runs);
	if (!runs) {
		err = ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < ne; i++) {
		if (nr && runs[nr - 1].pos + runs[nr - 1].len == e[i].pos)
			runs[nr - 1].len += e[i].len;
		else
			runs[nr++] = (struct meta_slice){.pos = e[i].pos,
							 .len = e[i].len};
	}
	if (2 * nr >= n)
		goto out; /* as fragmented as its list: nothing to gain */
	buf = malloc(chunkstore_block_size(cs));
	if (!buf) {
		err = ENOMEM;
		goto out;
	}
	for (; done < nr; done++) {
		err = write_run(m, cs, e, ne, runs[done].pos, runs[done].len,
				buf, &runs[done]);
		if (err)
			goto undo;
	}
	err = meta_compact_chunk(m, ino, idx, &tag, runs, nr,
				 delay ? delay : META_COMPACT_DELAY);
	if (err == EAGAIN || err == ENOENT || err == EINVAL || err == EROFS)
		goto undo; /* certainly not switched */
	if (err) {
		/* the switch may have happened (a connection lost with the
		 * answer): the fresh slices may be referenced now, so they
		 * stay; if they are not, gc finds them */
		log_warn("compaction of chunk %" PRIu32 " of inode %" PRIu64
			 ": %s; its fresh slices are left for gc if unused",
			 idx, ino, gr_strerror(err));
		goto out;
	}
	res->after = nr;
	for (size_t i = 0; i < nr; i++)
		res->bytes += runs[i].len;
	goto out;
undo:
	/* the fresh slices are referenced by nothing */
	for (size_t i = 0; i < done; i++)
		chunkstore_delete(cs, runs[i].id, runs[i].size);
out:
	free(buf);
	free(runs);
	free(e);
	free(s);
	return err;
}
