/*
 * codec.c - wrap blocks in the on-store format of codec.h and check them on
 * the way back. Decoding trusts nothing in the block: every header field is
 * validated, LZ4 runs in its bounds-checked mode, and the XXH3 of the result
 * must match before the caller may use a single byte.
 */
#include "codec.h"

#include <errno.h>
#include <lz4.h>
#include <string.h>
#include <xxhash.h>

#define CODEC_MAGIC   "GRB1"
#define CODEC_MAX_RAW (64u << 20)

/* ---- little-endian helpers (the format is LE on every host) ---- */

static void put_u16(unsigned char *p, uint16_t v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
}

static void put_u32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static void put_u64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint16_t get_u16(const unsigned char *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t get_u32(const unsigned char *p)
{
	uint32_t v = 0;
	for (int i = 3; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

static uint64_t get_u64(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

/* ---- encode ---- */

size_t codec_bound(size_t raw_len)
{
	/* Compression is kept only when it is strictly smaller, so the
	 * payload never exceeds the raw bytes. */
	return CODEC_HDR_SIZE + raw_len;
}

int codec_encode(const void *raw, size_t raw_len, enum codec_compress c,
		 void *out, size_t *out_len)
{
	unsigned char *hdr = out;
	unsigned char *payload = hdr + CODEC_HDR_SIZE;
	size_t stored = raw_len;
	uint8_t flags = 0;

	if ((!raw && raw_len) || !out || !out_len)
		return EINVAL;
	if (raw_len > CODEC_MAX_RAW || (c != CODEC_NONE && c != CODEC_LZ4))
		return EINVAL;

	if (c == CODEC_LZ4 && raw_len > 1) {
		/* A capacity of raw_len - 1 makes LZ4 give up (return 0) as
		 * soon as the result would not save at least one byte. */
		int n = LZ4_compress_default(raw, (char *)payload, (int)raw_len,
					     (int)(raw_len - 1));
		if (n > 0) {
			stored = (size_t)n;
			flags |= CODEC_F_LZ4;
		}
	}
	if (!(flags & CODEC_F_LZ4) && raw_len)
		memcpy(payload, raw, raw_len);

	memcpy(hdr, CODEC_MAGIC, 4);
	hdr[4] = CODEC_VERSION;
	hdr[5] = flags;
	put_u16(hdr + 6, 0);
	put_u32(hdr + 8, (uint32_t)raw_len);
	put_u32(hdr + 12, (uint32_t)stored);
	put_u64(hdr + 16, XXH3_64bits(raw, raw_len));
	*out_len = CODEC_HDR_SIZE + stored;
	return 0;
}

/* ---- decode ---- */

/* Check everything the header can tell on its own. */
static int check_header(const unsigned char *hdr, size_t blk_len,
			size_t *raw_len, size_t *stored_len)
{
	if (!hdr || blk_len < CODEC_HDR_SIZE)
		return CODEC_ECORRUPT;
	if (memcmp(hdr, CODEC_MAGIC, 4))
		return CODEC_ECORRUPT;
	if (hdr[4] != CODEC_VERSION)
		/* 0 was never written; anything above is from the future. */
		return hdr[4] > CODEC_VERSION ? CODEC_EVERSION : CODEC_ECORRUPT;
	uint8_t flags = hdr[5];
	if (flags & ~CODEC_F_LZ4)
		return CODEC_ECORRUPT;
	if (get_u16(hdr + 6) != 0)
		return CODEC_ECORRUPT;
	uint32_t raw = get_u32(hdr + 8), stored = get_u32(hdr + 12);
	if (raw > CODEC_MAX_RAW)
		return CODEC_ECORRUPT;
	if ((size_t)stored != blk_len - CODEC_HDR_SIZE)
		return CODEC_ECORRUPT; /* truncated or trailing bytes */
	/* The encoder keeps LZ4 only when it is strictly smaller. */
	if (flags & CODEC_F_LZ4 ? stored >= raw || stored == 0 : stored != raw)
		return CODEC_ECORRUPT;
	*raw_len = raw;
	*stored_len = stored;
	return 0;
}

int codec_frame_len(const void *hdr, size_t avail, size_t *len)
{
	const unsigned char *h = hdr;

	if (!h || avail < CODEC_HDR_SIZE)
		return CODEC_ECORRUPT;
	size_t stored = get_u32(h + 12);
	/* the whole header is checked against this very length */
	int err = check_header(h, CODEC_HDR_SIZE + stored, &(size_t){0},
			       &(size_t){0});
	if (err)
		return err;
	*len = CODEC_HDR_SIZE + stored;
	return 0;
}

int codec_raw_len(const void *blk, size_t blk_len, size_t *raw_len)
{
	size_t raw, stored;
	int err = check_header(blk, blk_len, &raw, &stored);

	if (err)
		return err;
	if (raw_len)
		*raw_len = raw;
	return 0;
}

int codec_decode(const void *blk, size_t blk_len, void *raw, size_t raw_cap,
		 size_t *raw_len)
{
	const unsigned char *hdr = blk;
	const unsigned char *payload = hdr + CODEC_HDR_SIZE;
	size_t rlen, stored;
	int err;

	err = check_header(hdr, blk_len, &rlen, &stored);
	if (err)
		return err;
	if (!raw && rlen)
		return EINVAL;
	if (rlen > raw_cap) {
		if (!(hdr[5] & CODEC_F_LZ4) || !raw_cap)
			return ENOSPC;
		/* The length is not covered by the checksum: if the payload
		 * decodes whole into the smaller buffer, the header lied. */
		int n = LZ4_decompress_safe((const char *)payload, raw,
					    (int)stored, (int)raw_cap);
		memset(raw, 0, raw_cap);
		return n >= 0 ? CODEC_ECORRUPT : ENOSPC;
	}
	uint64_t want = get_u64(hdr + 16);

	if (!(hdr[5] & CODEC_F_LZ4)) {
		/* Check before copying: the caller's buffer is never touched
		 * by a corrupt block. */
		if (XXH3_64bits(payload, rlen) != want)
			return CODEC_ECORRUPT;
		if (rlen)
			memcpy(raw, payload, rlen);
	} else {
		int n = LZ4_decompress_safe((const char *)payload, raw,
					    (int)stored, (int)rlen);
		if (n < 0 || (size_t)n != rlen ||
		    XXH3_64bits(raw, rlen) != want) {
			/* No scratch buffer (no allocation): wipe what LZ4
			 * wrote so garbage cannot be mistaken for data. */
			memset(raw, 0, rlen);
			return CODEC_ECORRUPT;
		}
	}
	if (raw_len)
		*raw_len = rlen;
	return 0;
}

const char *codec_strerror(int err)
{
	switch (err) {
	case 0:
		return "success";
	case CODEC_ECORRUPT:
		return "block is corrupt (bad magic, length or checksum)";
	case CODEC_EVERSION:
		return "block was written by a newer granary (unknown format "
		       "version); upgrade granary";
	default:
		return err > 0 ? strerror(err) : "unknown codec error";
	}
}
