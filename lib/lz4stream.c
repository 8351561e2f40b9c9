/*
 * lz4stream.c - LZ4 frames over callback streams (lz4stream.h), with
 * liblz4's frame API (lz4frame.h): 64 KiB blocks, linked, with a content
 * checksum so that a damaged stream is told apart from a short one.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <lz4frame.h>

#include "lib/lz4stream.h"

#define STEP (64u << 10) /* input handed to liblz4 at once */

static const unsigned char lz4_magic[4] = {0x04, 0x22, 0x4d, 0x18};

/* ---- sink ------------------------------------------------------------ */

struct lz4stream_sink {
	LZ4F_cctx *cctx;
	LZ4F_preferences_t prefs;
	lz4stream_write_fn out;
	void *out_arg;
	unsigned char *buf; /* compressed bytes on their way out */
	size_t cap;
	int begun; /* the frame header is out */
	int err;   /* sticky */
};

int lz4stream_sink_open(lz4stream_write_fn out, void *out_arg,
			struct lz4stream_sink **s)
{
	struct lz4stream_sink *k = calloc(1, sizeof *k);

	*s = NULL;
	if (!k)
		return ENOMEM;
	k->prefs.frameInfo.blockSizeID = LZ4F_max64KB;
	k->prefs.frameInfo.contentChecksumFlag = LZ4F_contentChecksumEnabled;
	k->cap = LZ4F_compressBound(STEP, &k->prefs) + LZ4F_HEADER_SIZE_MAX;
	k->buf = malloc(k->cap);
	if (!k->buf) {
		free(k);
		return ENOMEM;
	}
	if (LZ4F_isError(
		LZ4F_createCompressionContext(&k->cctx, LZ4F_VERSION))) {
		free(k->buf);
		free(k);
		return EIO;
	}
	k->out = out;
	k->out_arg = out_arg;
	*s = k;
	return 0;
}

/* n bytes of buf out, the first error kept */
static int sink_out(struct lz4stream_sink *k, size_t n)
{
	if (!k->err && n)
		k->err = k->out(k->out_arg, k->buf, n);
	return k->err;
}

static int sink_begin(struct lz4stream_sink *k)
{
	size_t n;

	if (k->begun)
		return k->err;
	k->begun = 1;
	n = LZ4F_compressBegin(k->cctx, k->buf, k->cap, &k->prefs);
	if (LZ4F_isError(n))
		return k->err = EIO;
	return sink_out(k, n);
}

int lz4stream_sink_write(void *arg, const void *p, size_t n)
{
	struct lz4stream_sink *k = arg;
	const unsigned char *q = p;

	if (sink_begin(k))
		return k->err;
	while (n && !k->err) {
		size_t step = n < STEP ? n : STEP;
		size_t z =
		    LZ4F_compressUpdate(k->cctx, k->buf, k->cap, q, step, NULL);
		if (LZ4F_isError(z))
			return k->err = EIO;
		sink_out(k, z);
		q += step;
		n -= step;
	}
	return k->err;
}

int lz4stream_sink_close(struct lz4stream_sink *k)
{
	int err;

	if (!k)
		return 0;
	if (!sink_begin(k)) {
		size_t z = LZ4F_compressEnd(k->cctx, k->buf, k->cap, NULL);
		if (LZ4F_isError(z))
			k->err = EIO;
		else
			sink_out(k, z);
	}
	err = k->err;
	LZ4F_freeCompressionContext(k->cctx);
	free(k->buf);
	free(k);
	return err;
}

/* ---- source ---------------------------------------------------------- */

enum { SRC_NEW, SRC_PLAIN, SRC_LZ4 };

struct lz4stream_source {
	lz4stream_read_fn in;
	void *in_arg;
	LZ4F_dctx *dctx; /* SRC_LZ4 only */
	int mode;
	int eof;      /* in gave its end */
	int in_frame; /* bytes of a frame given to liblz4, its end not seen */
	size_t pos, len;
	unsigned char buf[STEP]; /* bytes read from in, not handed on */
};

int lz4stream_source_open(lz4stream_read_fn in, void *in_arg,
			  struct lz4stream_source **s)
{
	struct lz4stream_source *c = calloc(1, sizeof *c);

	*s = c;
	if (!c)
		return ENOMEM;
	c->in = in;
	c->in_arg = in_arg;
	return 0;
}

/* More of in into buf (at len): 0, or a negative errno. */
static ssize_t source_fill(struct lz4stream_source *c)
{
	ssize_t n;

	if (c->pos == c->len)
		c->pos = c->len = 0;
	if (c->eof || c->len == sizeof c->buf)
		return 0;
	n = c->in(c->in_arg, c->buf + c->len, sizeof c->buf - c->len);
	if (n < 0)
		return n;
	if (n == 0)
		c->eof = 1;
	c->len += (size_t)n;
	return 0;
}

/* The first bytes tell: an LZ4 frame's magic, or anything else. */
static ssize_t source_sniff(struct lz4stream_source *c)
{
	while (c->len < sizeof lz4_magic && !c->eof) {
		ssize_t e = source_fill(c);
		if (e < 0)
			return e;
	}
	if (c->len >= sizeof lz4_magic &&
	    !memcmp(c->buf, lz4_magic, sizeof lz4_magic)) {
		if (LZ4F_isError(LZ4F_createDecompressionContext(&c->dctx,
								 LZ4F_VERSION)))
			return -ENOMEM;
		c->mode = SRC_LZ4;
	} else {
		c->mode = SRC_PLAIN;
	}
	return 0;
}

static ssize_t source_lz4(struct lz4stream_source *c, void *p, size_t cap)
{
	for (;;) {
		if (c->pos == c->len) {
			if (c->eof)
				return c->in_frame ? -EBADMSG : 0;
			ssize_t e = source_fill(c);
			if (e < 0)
				return e;
			continue;
		}
		size_t dst = cap, src = c->len - c->pos;
		size_t hint = LZ4F_decompress(c->dctx, p, &dst, c->buf + c->pos,
					      &src, NULL);
		if (LZ4F_isError(hint))
			return -EBADMSG;
		c->pos += src;
		c->in_frame = hint != 0;
		if (dst)
			return (ssize_t)dst;
	}
}

ssize_t lz4stream_source_read(void *arg, void *p, size_t cap)
{
	struct lz4stream_source *c = arg;

	if (c->mode == SRC_NEW) {
		ssize_t e = source_sniff(c);
		if (e < 0)
			return e;
	}
	if (!cap)
		return 0;
	if (c->mode == SRC_LZ4)
		return source_lz4(c, p, cap);
	if (c->pos < c->len) {
		size_t n = c->len - c->pos < cap ? c->len - c->pos : cap;
		memcpy(p, c->buf + c->pos, n);
		c->pos += n;
		return (ssize_t)n;
	}
	return c->eof ? 0 : c->in(c->in_arg, p, cap);
}

int lz4stream_source_compressed(const struct lz4stream_source *c)
{
	return c->mode == SRC_LZ4;
}

void lz4stream_source_close(struct lz4stream_source *c)
{
	if (!c)
		return;
	if (c->dctx)
		LZ4F_freeDecompressionContext(c->dctx);
	free(c);
}
