/*
 * redis_rec.c - the engine's binary records (SCHEMA.md, "Records"): the
 * inode record's attributes, the slice records of a chunk, and the
 * numbers of replies. Pure functions over bytes.
 */
#include <stdlib.h>
#include <string.h>

#include "meta/redis_int.h"

static int64_t ld40s(const uint8_t *p)
{
	uint64_t v = (uint64_t)ld32(p) | (uint64_t)p[4] << 32;
	if (v & (1ull << 39))
		v |= ~0ull << 40;
	return (int64_t)v;
}

/* Decodes the attributes at the head of an inode record; chunk 0's slice
 * records may follow them (a whole value from MGET). */
static int attr_unpack(const char *s, size_t n, struct meta_attr *a)
{
	const uint8_t *p = (const uint8_t *)s;
	uint64_t pr;

	if (n < ATTR_LEN || p[0] != 1)
		return META_EPROTO;
	memset(a, 0, sizeof *a);
	a->type = p[1];
	a->mode = (uint16_t)(p[2] | p[3] << 8);
	a->uid = ld32(p + 4);
	a->gid = ld32(p + 8);
	a->nlink = ld32(p + 12);
	a->length = ld64(p + 16);
	/* dirs: parent, devices: rdev, files: stored bytes + 1 (0: not
	 * known, a file from before the field: its length) */
	pr = ld64(p + 24);
	a->stored = a->length;
	if (a->type == META_DIR)
		a->parent = pr;
	else if (a->type == META_BLK || a->type == META_CHR)
		a->rdev = (uint32_t)pr;
	else if (a->type == META_FILE && pr != 0 && pr - 1 < a->length)
		a->stored = pr - 1;
	a->atime = ld40s(p + 32);
	a->atimens = ld32(p + 37);
	a->mtime = ld40s(p + 41);
	a->mtimens = ld32(p + 46);
	a->ctime = ld40s(p + 50);
	a->ctimens = ld32(p + 55);
	return 0;
}

int redis_reply_attr(const redisReply *r, struct meta_attr *a)
{
	struct meta_attr tmp;
	if (r->type != REDIS_REPLY_STRING)
		return META_EPROTO;
	return attr_unpack(r->str, (size_t)r->len, a ? a : &tmp);
}

/* Packs s at p (room for REC_MAX); returns the bytes used. A whole slice
 * (what the writer commits) takes a short form: it keeps a small file's
 * inode record, with chunk 0 behind the attributes, in 76 bytes (92 when
 * the slice sits in a pack). Forms: 1 full, 2 short, 3 short in a pack,
 * 4 full in a pack. */
size_t redis_rec_pack(uint8_t *p, const struct meta_slice *s)
{
	int whole = s->off == 0 && s->len == s->size;
	size_t n;

	p[0] = s->pack ? (whole ? 3 : 4) : (whole ? 2 : 1);
	st32(p + 1, s->pos);
	st64(p + 5, s->id);
	st32(p + 13, s->size);
	n = REC_SHORT_LEN;
	if (!whole) {
		st32(p + 17, s->off);
		st32(p + 21, s->len);
		n = REC_LEN;
	}
	if (s->pack) {
		st64(p + n, s->pack);
		st32(p + n + 8, s->poff);
		st32(p + n + 12, s->plen);
		n += REC_PACK_EXTRA;
	}
	return n;
}

/* Unpacks the record at s (n bytes left); returns its length, 0 if it is
 * corrupt or cut short. */
size_t redis_rec_unpack(const char *s, size_t n, struct meta_slice *out)
{
	const uint8_t *p = (const uint8_t *)s;
	size_t want;
	int whole, packed;

	if (n < REC_SHORT_LEN || p[0] < 1 || p[0] > 4)
		return 0;
	whole = p[0] == 2 || p[0] == 3;
	packed = p[0] >= 3;
	want =
	    (whole ? REC_SHORT_LEN : REC_LEN) + (packed ? REC_PACK_EXTRA : 0);
	if (n < want)
		return 0;
	*out = (struct meta_slice){0};
	out->pos = ld32(p + 1);
	out->id = ld64(p + 5);
	out->size = ld32(p + 13);
	if (whole) {
		out->len = out->size;
	} else {
		out->off = ld32(p + 17);
		out->len = ld32(p + 21);
	}
	if (packed) {
		const uint8_t *q = p + want - REC_PACK_EXTRA;
		out->pack = ld64(q);
		out->poff = ld32(q + 8);
		out->plen = ld32(q + 12);
		if (!out->pack || !out->plen)
			return 0;
	}
	return want;
}

/* ---- replies ---- */

uint64_t redis_field_u64(const redisReply *r)
{
	char buf[32];
	size_t n =
	    (size_t)r->len < sizeof buf - 1 ? (size_t)r->len : sizeof buf - 1;
	memcpy(buf, r->str, n);
	buf[n] = '\0';
	return strtoull(buf, NULL, 10);
}

uint64_t redis_reply_u64(const redisReply *r)
{
	if (r->type == REDIS_REPLY_INTEGER)
		return r->integer > 0 ? (uint64_t)r->integer : 0;
	if (r->type == REDIS_REPLY_STRING && r->str[0] != '-')
		return redis_field_u64(r);
	return 0;
}
