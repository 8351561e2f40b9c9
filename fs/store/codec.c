/*
 * codec.c - wrap blocks in the on-store format of codec.h and check them on
 * the way back. Decoding trusts nothing in the block: every header field is
 * validated, LZ4 runs in its bounds-checked mode, and the checksums must
 * match before the caller may use a single byte. Uncompressed blocks get
 * per-segment checksums (v2) so that a small read can fetch and check a few
 * KiB instead of the whole block.
 */
#include "fs/store/codec.h"

#include <errno.h>
#include <lz4.h>
#include <string.h>
#include <xxhash.h>
#if defined(__x86_64__)
/* libxxhash's run-time dispatch: XXH3 with AVX2 or AVX-512 where the CPU
 * has them (about 1.5x the SSE2 code on block checksums); same values */
#include <xxh_x86dispatch.h>
#endif

#include "lib/endian.h"

#define CODEC_MAGIC   "GRB1"
#define CODEC_MAX_RAW (64u << 20)
#define SEG_SHIFT     12 /* CODEC_SEG_SIZE == 1 << SEG_SHIFT */

/* ---- v2 pieces ---- */

static size_t nsegs(size_t raw_len)
{
	return (raw_len + CODEC_SEG_SIZE - 1) / CODEC_SEG_SIZE;
}

static size_t table_len(size_t raw_len)
{
	return 4 * nsegs(raw_len);
}

static uint32_t seg_sum(const unsigned char *seg, size_t len, size_t i)
{
	/* Seeded with the index: the right bytes at the wrong place fail. */
	return (uint32_t)XXH3_64bits_withSeed(seg, len, (uint64_t)i);
}

/* Covers the fields that say where everything is, and the table. */
static uint64_t header_sum(const unsigned char *hdr, const unsigned char *table,
			   size_t tlen)
{
	return XXH3_64bits_withSeed(table, tlen, XXH3_64bits(hdr, 16));
}

/* ---- encode ---- */

size_t codec_bound(size_t raw_len)
{
	/* LZ4 is kept only when it is smaller than the raw bytes, so the
	 * largest block is a v2 one. */
	return CODEC_HDR_SIZE + table_len(raw_len) + raw_len;
}

static void encode_v1_lz4(const void *raw, size_t raw_len, size_t stored,
			  unsigned char *hdr)
{
	memcpy(hdr, CODEC_MAGIC, 4);
	hdr[4] = 1;
	hdr[5] = CODEC_F_LZ4;
	st16(hdr + 6, 0);
	st32(hdr + 8, (uint32_t)raw_len);
	st32(hdr + 12, (uint32_t)stored);
	st64(hdr + 16, XXH3_64bits(raw, raw_len));
}

/* The header and table of a v2 block of raw at hdr; returns the length of
 * the whole block (the raw bytes follow the table). */
static size_t write_v2_prefix(const unsigned char *raw, size_t raw_len,
			      unsigned char *hdr)
{
	unsigned char *table = hdr + CODEC_HDR_SIZE;
	size_t tlen = table_len(raw_len);

	for (size_t i = 0, off = 0; off < raw_len; i++, off += CODEC_SEG_SIZE) {
		size_t n = raw_len - off < CODEC_SEG_SIZE ? raw_len - off
							  : CODEC_SEG_SIZE;
		st32(table + 4 * i, seg_sum(raw + off, n, i));
	}
	memcpy(hdr, CODEC_MAGIC, 4);
	hdr[4] = 2;
	hdr[5] = 0;
	hdr[6] = SEG_SHIFT;
	hdr[7] = 0;
	st32(hdr + 8, (uint32_t)raw_len);
	st32(hdr + 12, (uint32_t)(tlen + raw_len));
	st64(hdr + 16, header_sum(hdr, table, tlen));
	return CODEC_HDR_SIZE + tlen + raw_len;
}

static size_t encode_v2(const unsigned char *raw, size_t raw_len,
			unsigned char *hdr)
{
	unsigned char *payload = hdr + CODEC_HDR_SIZE + table_len(raw_len);

	if (raw_len && payload != raw) /* not laid out in place */
		memcpy(payload, raw, raw_len);
	return write_v2_prefix(raw, raw_len, hdr);
}

/*
 * Whether LZ4 may pay on a block (scratch: PROBE_WIN bytes): a block of
 * PROBE_MIN bytes or more is first tried in PROBE_N windows of PROBE_WIN
 * spread evenly over it, and taken as incompressible when they save less
 * than 1/16 of their bytes, half what the whole block must save. That
 * passes over bf16 weights, encrypted or already compressed data at the
 * cost of compressing 1/32 of a 4 MiB block, where a full try on them runs
 * LZ4 through 7/8 of it to find out. It misses what compresses only
 * between the windows: such a block is stored raw.
 */
#define PROBE_WIN (16u << 10)
#define PROBE_N	  8
#define PROBE_MIN (2 * PROBE_N * PROBE_WIN)
static int lz4_may_pay(const unsigned char *raw, size_t raw_len, char *scratch)
{
	size_t saved = 0, stride;

	if (raw_len < PROBE_MIN)
		return 1;
	stride = (raw_len - PROBE_WIN) / (PROBE_N - 1);
	for (size_t i = 0; i < PROBE_N; i++) {
		int n = LZ4_compress_default((const char *)raw + i * stride,
					     scratch, (int)PROBE_WIN,
					     (int)PROBE_WIN);
		if (n > 0)
			saved += PROBE_WIN - (size_t)n;
	}
	return saved >= PROBE_N * PROBE_WIN / 16;
}

/* A v1 LZ4 block of raw into hdr, if that pays: 1 and *out_len, else 0.
 * hdr has room for codec_bound(raw_len) bytes. */
static int encode_lz4(const void *raw, size_t raw_len, unsigned char *hdr,
		      size_t *out_len)
{
	if (raw_len < 2 ||
	    !lz4_may_pay(raw, raw_len, (char *)hdr + CODEC_HDR_SIZE))
		return 0;
	/* A block LZ4 shrinks by less than 1/8 is stored raw: the little
	 * space saved is not worth making every small read of it fetch the
	 * whole block. LZ4 gives up (returns 0) as soon as the result would
	 * not fit the capacity, quickly on incompressible bytes. */
	size_t save = raw_len / 8 ? raw_len / 8 : 1;
	int n = LZ4_compress_default(raw, (char *)hdr + CODEC_HDR_SIZE,
				     (int)raw_len, (int)(raw_len - save));
	if (n <= 0)
		return 0;
	encode_v1_lz4(raw, raw_len, (size_t)n, hdr);
	*out_len = CODEC_HDR_SIZE + (size_t)n;
	return 1;
}

static int encode_args_ok(const void *raw, size_t raw_len,
			  enum codec_compress c)
{
	return (raw || !raw_len) && raw_len <= CODEC_MAX_RAW &&
	       (c == CODEC_NONE || c == CODEC_LZ4);
}

int codec_encode(const void *raw, size_t raw_len, enum codec_compress c,
		 void *out, size_t *out_len)
{
	if (!out || !out_len || !encode_args_ok(raw, raw_len, c))
		return EINVAL;
	if (c == CODEC_LZ4 && encode_lz4(raw, raw_len, out, out_len))
		return 0;
	*out_len = encode_v2(raw, raw_len, out);
	return 0;
}

int codec_encode_inplace(void *raw, size_t raw_len, enum codec_compress c,
			 void *lz, void **blk, size_t *blk_len)
{
	if (!raw || !blk || !blk_len || !encode_args_ok(raw, raw_len, c) ||
	    (c == CODEC_LZ4 && !lz))
		return EINVAL;
	if (c == CODEC_LZ4 && encode_lz4(raw, raw_len, lz, blk_len)) {
		*blk = lz;
		return 0;
	}
	unsigned char *hdr = (unsigned char *)raw - codec_prefix_len(raw_len);
	*blk_len = encode_v2(raw, raw_len, hdr);
	*blk = hdr;
	return 0;
}

int codec_encode_gather(const void *raw, size_t raw_len, enum codec_compress c,
			void *lz, size_t *lz_len, void *prefix)
{
	if (!lz_len || !prefix || !encode_args_ok(raw, raw_len, c) ||
	    (c == CODEC_LZ4 && !lz))
		return EINVAL;
	*lz_len = 0;
	if (c == CODEC_LZ4 && encode_lz4(raw, raw_len, lz, lz_len))
		return 0;
	write_v2_prefix(raw, raw_len, prefix);
	return 0;
}

/* ---- decode ---- */

/* v1: everything the header can tell without the payload. */
static int check_v1_fields(const unsigned char *hdr, size_t *raw_len,
			   size_t *stored_len)
{
	uint8_t flags = hdr[5];
	if (flags & ~CODEC_F_LZ4)
		return CODEC_ECORRUPT;
	if (ld16(hdr + 6) != 0)
		return CODEC_ECORRUPT;
	uint32_t raw = ld32(hdr + 8), stored = ld32(hdr + 12);
	if (raw > CODEC_MAX_RAW)
		return CODEC_ECORRUPT;
	/* The encoder keeps LZ4 only when it is strictly smaller. */
	if (flags & CODEC_F_LZ4 ? stored >= raw || stored == 0 : stored != raw)
		return CODEC_ECORRUPT;
	*raw_len = raw;
	*stored_len = stored;
	return 0;
}

/* v2: header and table, given the first n bytes of the block. The
 * checksum is checked before any field is believed, so that a damaged
 * field reads as corruption and only a sealed one as a newer format. */
static int check_v2_prefix(const unsigned char *hdr, size_t n, size_t *raw_len)
{
	uint32_t raw = ld32(hdr + 8);
	if (raw > CODEC_MAX_RAW)
		return CODEC_ECORRUPT;
	size_t tlen = table_len(raw);
	if (n < CODEC_HDR_SIZE + tlen)
		return CODEC_ECORRUPT;
	if (ld64(hdr + 16) != header_sum(hdr, hdr + CODEC_HDR_SIZE, tlen))
		return CODEC_ECORRUPT;
	if (hdr[5] != 0 || hdr[6] != SEG_SHIFT || hdr[7] != 0)
		return CODEC_EVERSION; /* flags or segments we do not know */
	if (ld32(hdr + 12) != tlen + raw)
		return CODEC_ECORRUPT;
	*raw_len = raw;
	return 0;
}

/* Magic and version; *version is 1 or 2 on success. */
static int check_magic(const unsigned char *hdr, size_t n, int *version)
{
	if (!hdr || n < CODEC_HDR_SIZE)
		return CODEC_ECORRUPT;
	if (memcmp(hdr, CODEC_MAGIC, 4))
		return CODEC_ECORRUPT;
	if (hdr[4] == 0)
		return CODEC_ECORRUPT; /* never written */
	if (hdr[4] > CODEC_VERSION)
		return CODEC_EVERSION;
	*version = hdr[4];
	return 0;
}

/* Check everything of a whole block but its payload checksums. */
static int check_header(const unsigned char *hdr, size_t blk_len, int *version,
			size_t *raw_len, size_t *stored_len)
{
	int err = check_magic(hdr, blk_len, version);

	if (err)
		return err;
	if (*version == 1)
		err = check_v1_fields(hdr, raw_len, stored_len);
	else
		err = check_v2_prefix(hdr, blk_len, raw_len);
	if (err)
		return err;
	if (*version == 2)
		*stored_len = ld32(hdr + 12);
	if ((size_t)*stored_len != blk_len - CODEC_HDR_SIZE)
		return CODEC_ECORRUPT; /* truncated or trailing bytes */
	return 0;
}

int codec_frame_len(const void *hdr, size_t avail, size_t *len)
{
	const unsigned char *h = hdr;
	size_t raw, stored;
	int version;
	int err = check_magic(h, avail, &version);

	if (err)
		return err;
	if (version == 1) {
		err = check_v1_fields(h, &raw, &stored);
		if (err)
			return err;
	} else {
		raw = ld32(h + 8);
		stored = ld32(h + 12);
		if (raw > CODEC_MAX_RAW || stored != table_len(raw) + raw)
			return CODEC_ECORRUPT;
	}
	*len = CODEC_HDR_SIZE + stored;
	return 0;
}

int codec_raw_len(const void *blk, size_t blk_len, size_t *raw_len)
{
	size_t raw, stored;
	int version;
	int err = check_header(blk, blk_len, &version, &raw, &stored);

	if (err)
		return err;
	if (raw_len)
		*raw_len = raw;
	return 0;
}

/* The segments in raw[0..len), the first being segment number first,
 * against the table. */
static int check_segments(const unsigned char *table, const unsigned char *raw,
			  size_t first, size_t len)
{
	for (size_t i = 0, off = 0; off < len; i++, off += CODEC_SEG_SIZE) {
		size_t n =
		    len - off < CODEC_SEG_SIZE ? len - off : CODEC_SEG_SIZE;
		if (seg_sum(raw + off, n, first + i) !=
		    ld32(table + 4 * (first + i)))
			return CODEC_ECORRUPT;
	}
	return 0;
}

static int decode_v1(const unsigned char *hdr, size_t rlen, size_t stored,
		     void *raw, size_t raw_cap)
{
	const unsigned char *payload = hdr + CODEC_HDR_SIZE;

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
	uint64_t want = ld64(hdr + 16);

	if (!(hdr[5] & CODEC_F_LZ4)) {
		/* Check before copying: the caller's buffer is never touched
		 * by a corrupt block. */
		if (XXH3_64bits(payload, rlen) != want)
			return CODEC_ECORRUPT;
		if (rlen)
			memcpy(raw, payload, rlen);
		return 0;
	}
	int n = LZ4_decompress_safe((const char *)payload, raw, (int)stored,
				    (int)rlen);
	if (n < 0 || (size_t)n != rlen || XXH3_64bits(raw, rlen) != want) {
		/* No scratch buffer (no allocation): wipe what LZ4 wrote so
		 * garbage cannot be mistaken for data. */
		memset(raw, 0, rlen);
		return CODEC_ECORRUPT;
	}
	return 0;
}

int codec_decode(const void *blk, size_t blk_len, void *raw, size_t raw_cap,
		 size_t *raw_len)
{
	const unsigned char *hdr = blk;
	size_t rlen, stored;
	int version, err;

	err = check_header(hdr, blk_len, &version, &rlen, &stored);
	if (err)
		return err;
	if (!raw && rlen)
		return EINVAL;
	if (version == 1) {
		err = decode_v1(hdr, rlen, stored, raw, raw_cap);
	} else if (rlen > raw_cap) {
		err = ENOSPC; /* the length is sealed by the header checksum */
	} else {
		const unsigned char *table = hdr + CODEC_HDR_SIZE;
		const unsigned char *payload = table + table_len(rlen);
		err = check_segments(table, payload, 0, rlen);
		if (!err && rlen)
			memcpy(raw, payload, rlen);
	}
	if (err)
		return err;
	if (raw_len)
		*raw_len = rlen;
	return 0;
}

int codec_view(const void *blk, size_t blk_len, const void **raw,
	       size_t *raw_len)
{
	const unsigned char *hdr = blk;
	size_t rlen, stored;
	int version, err;

	if (!raw || !raw_len)
		return EINVAL;
	err = check_header(hdr, blk_len, &version, &rlen, &stored);
	if (err)
		return err;
	const unsigned char *payload = hdr + CODEC_HDR_SIZE;
	if (version == 1 && (hdr[5] & CODEC_F_LZ4)) {
		*raw = NULL;
	} else if (version == 1) {
		if (XXH3_64bits(payload, rlen) != ld64(hdr + 16))
			return CODEC_ECORRUPT;
		*raw = payload;
	} else {
		err =
		    check_segments(payload, payload + table_len(rlen), 0, rlen);
		if (err)
			return err;
		*raw = payload + table_len(rlen);
	}
	*raw_len = rlen;
	return 0;
}

/* ---- ranged reads ---- */

size_t codec_prefix_len(size_t raw_len)
{
	if (raw_len > CODEC_MAX_RAW)
		raw_len = CODEC_MAX_RAW;
	return CODEC_HDR_SIZE + table_len(raw_len);
}

int codec_parse(const void *prefix, size_t n, struct codec_layout *l)
{
	const unsigned char *hdr = prefix;
	size_t raw, stored;
	int version, err;

	if (!l)
		return EINVAL;
	err = check_magic(hdr, n, &version);
	if (err)
		return err;
	memset(l, 0, sizeof(*l));
	if (version == 1) {
		err = check_v1_fields(hdr, &raw, &stored);
		if (err)
			return err;
		l->raw_len = (uint32_t)raw;
		return 0;
	}
	err = check_v2_prefix(hdr, n, &raw);
	if (err)
		return err;
	l->ranged = 1;
	l->raw_len = (uint32_t)raw;
	l->seg_size = CODEC_SEG_SIZE;
	l->payload_off = (uint32_t)(CODEC_HDR_SIZE + table_len(raw));
	l->table = hdr + CODEC_HDR_SIZE;
	return 0;
}

int codec_range(const struct codec_layout *l, uint32_t raw_off,
		uint32_t raw_len, uint64_t *off, size_t *len)
{
	if (!l || !l->ranged || !off || !len || raw_len == 0 ||
	    raw_off > l->raw_len || raw_len > l->raw_len - raw_off)
		return EINVAL;
	uint64_t first = raw_off / l->seg_size;
	uint64_t end = ((uint64_t)raw_off + raw_len + l->seg_size - 1) /
		       l->seg_size * l->seg_size;
	if (end > l->raw_len)
		end = l->raw_len;
	*off = l->payload_off + first * l->seg_size;
	*len = (size_t)(end - first * l->seg_size);
	return 0;
}

int codec_range_copy(const struct codec_layout *l, uint32_t raw_off,
		     uint32_t raw_len, const void *got, size_t n, void *dst)
{
	uint64_t off;
	size_t want;
	int err = codec_range(l, raw_off, raw_len, &off, &want);

	if (err)
		return err;
	if (n != want)
		return CODEC_ECORRUPT; /* short: the object is truncated */
	if (!got || !dst)
		return EINVAL;
	size_t first = raw_off / l->seg_size;
	err = check_segments(l->table, got, first, n);
	if (err)
		return err;
	memcpy(dst,
	       (const unsigned char *)got + (raw_off - first * l->seg_size),
	       raw_len);
	return 0;
}
