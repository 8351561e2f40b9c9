/*
 * codec.h - the on-store block format: a header, then either one payload
 * checked as a whole (v1, LZ4) or raw bytes in checksummed 4 KiB segments
 * that can be fetched and checked a run at a time (v2, uncompressed).
 *
 * Every block that granary writes to an object store or a cache disk is
 * wrapped by codec_encode() and checked by codec_decode() (whole block) or
 * codec_range_copy() (a run of segments); bytes whose checksum does not
 * match are reported, never returned as data.
 *
 * Both versions start with a 24-byte header, little endian:
 *   0  magic "GRB1" (4)       4  version u8 (1 or 2)
 *
 * Version 1: written for blocks that LZ4 shrinks by at least 1/8; older
 * granary also wrote uncompressed blocks this way, still read.
 *   5  flags u8 (CODEC_F_LZ4)    6  reserved u16 (0)
 *   8  raw length u32           12  stored length u32 (payload bytes)
 *  16  XXH3-64 of the raw bytes (8)
 *  24  payload: an LZ4 block with CODEC_F_LZ4, else the raw bytes
 * One checksum over the whole block: a read of 4 KiB from a compressed
 * block fetches and decodes the whole block.
 *
 * Version 2: every block stored uncompressed (CODEC_NONE, or LZ4 saved
 * less than 1/8). n = ceil(raw / 4096) segments.
 *   5  flags u8 (0)              6  log2 of the segment size u8 (12)
 *   7  reserved u8 (0)
 *   8  raw length u32           12  stored length u32 (4 n + raw)
 *  16  header checksum (8): XXH3-64 of the table, seeded with the XXH3-64
 *      of header bytes 0..15
 *  24  table: n u32, entry i = low 32 bits of the XXH3-64 of segment i's
 *      raw bytes seeded with i (a segment served from the wrong place fails)
 *  24 + 4 n  the raw bytes; segment i is raw [4096 i, min(4096 (i + 1), raw))
 * A ranged reader GETs the prefix (header + table, codec_prefix_len(): 4120
 * bytes for a 4 MiB block), then the segments covering what it wants.
 */
#ifndef GRANARY_CODEC_H
#define GRANARY_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "lib/errors.h"

#define CODEC_HDR_SIZE 24   /* both versions */
#define CODEC_VERSION  2    /* newest version understood and written */
#define CODEC_F_LZ4    0x01 /* v1: payload is an LZ4 block */
#define CODEC_SEG_SIZE 4096 /* v2: bytes per checksummed segment */

/* Errors: a positive errno, or CODEC_ECORRUPT, CODEC_EVERSION
 * (lib/errors.h). */

enum codec_compress { CODEC_NONE = 0, CODEC_LZ4 = 1 };

/* Largest encoded size of raw_len bytes: size the output buffer with it. */
size_t codec_bound(size_t raw_len);

/*
 * Encode raw[0..raw_len) into out (at least codec_bound(raw_len) bytes).
 * With CODEC_LZ4 the payload is compressed (v1) only when that saves at
 * least 1/8 of the raw bytes (a block of 256 KiB or more only when a try of
 * 8 windows of it promises that; codec.c); otherwise the block is v2.
 * raw_len must be <= 64 MiB. Returns 0 and sets *out_len, or an error.
 */
int codec_encode(const void *raw, size_t raw_len, enum codec_compress c,
		 void *out, size_t *out_len);

/*
 * codec_encode without copying the raw bytes of a block stored raw: it is
 * laid out as a v2 block where it is, its header and table written into
 * the codec_prefix_len(raw_len) bytes just before raw, which the caller
 * owns. With CODEC_LZ4 the block is compressed into lz (codec_bound()
 * bytes) instead when that pays, as codec_encode() decides. *blk is where
 * the block starts (lz, or raw - codec_prefix_len(raw_len)) and *blk_len
 * its length. EINVAL as codec_encode(), or for LZ4 without lz.
 */
int codec_encode_inplace(void *raw, size_t raw_len, enum codec_compress c,
			 void *lz, void **blk, size_t *blk_len);

/*
 * codec_encode without copying the raw bytes of a block stored raw, for a
 * caller that writes the block out with a gather (pwritev): with CODEC_LZ4
 * the block is compressed into lz (codec_bound() bytes) when that pays, as
 * codec_encode() decides, and *lz_len is its length; otherwise *lz_len is
 * 0 and the block is the codec_prefix_len(raw_len) bytes written at prefix
 * followed by raw itself. EINVAL as codec_encode(), or for LZ4 without lz.
 */
int codec_encode_gather(const void *raw, size_t raw_len, enum codec_compress c,
			void *lz, size_t *lz_len, void *prefix);
/* Encoded length (header included) of the block whose first avail bytes
 * (at least CODEC_HDR_SIZE) are at hdr, from its header fields alone (the
 * checksums are checked by a decode): to walk blocks laid end to end, as in
 * a pack. CODEC_ECORRUPT when the header is not one. */
int codec_frame_len(const void *hdr, size_t avail, size_t *len);
/* Raw length declared by a block's header, after checking magic and sizes
 * (and for v2 the header checksum). */
int codec_raw_len(const void *blk, size_t blk_len, size_t *raw_len);

/*
 * Decode blk[0..blk_len) into raw (raw_cap bytes). Verifies magic, version,
 * lengths and every checksum: returns CODEC_ECORRUPT for any mismatch or
 * truncation, CODEC_EVERSION for an unknown version, ENOSPC if raw_cap is
 * too small. Thread-safe, no allocation.
 */
int codec_decode(const void *blk, size_t blk_len, void *raw, size_t raw_cap,
		 size_t *raw_len);

/*
 * Check a whole block where it lies, without copying it: for a block
 * stored raw (v2, or v1 without LZ4) verify every checksum and point *raw
 * at its raw bytes inside blk; for a compressed one set *raw to NULL (then
 * decode it with codec_decode()). *raw_len is the raw length either way.
 * Errors as codec_decode(). Thread-safe, no allocation.
 */
int codec_view(const void *blk, size_t blk_len, const void **raw,
	       size_t *raw_len);

/* ---- ranged reads (v2) ---- */

/* Bytes at the start of a v2 block of raw_len bytes holding its header and
 * table; fetching that many from any block is enough for codec_parse(). */
size_t codec_prefix_len(size_t raw_len);

/* What codec_parse() found. Plain data; table points into the bytes given
 * to codec_parse() and is valid as long as they are. */
struct codec_layout {
	int ranged;		    /* v2: segments can be read alone */
	uint32_t raw_len;	    /* declared by the header */
	uint32_t seg_size;	    /* v2 */
	uint32_t payload_off;	    /* v2: block offset of raw byte 0 */
	const unsigned char *table; /* v2: the checked segment table */
};

/*
 * Parse the first n bytes of a block (n: what a GET of codec_prefix_len()
 * bytes returned; more is fine). v2: checks the header and its checksum
 * over the table; v1: checks the header fields it can without the payload
 * and says ranged = 0 (decode the whole block instead). CODEC_ECORRUPT,
 * CODEC_EVERSION as codec_decode().
 */
int codec_parse(const void *prefix, size_t n, struct codec_layout *l);

/* The bytes of the block to GET, [*off, *off + *len), for raw bytes
 * [raw_off, raw_off + raw_len) of a v2 block: the segments covering them.
 * EINVAL: not v2, empty, or past the raw length. */
int codec_range(const struct codec_layout *l, uint32_t raw_off,
		uint32_t raw_len, uint64_t *off, size_t *len);

/*
 * Check the segments in got[0..n) (the bytes codec_range() named for the
 * same raw range) and copy raw bytes [raw_off, raw_off + raw_len) to dst.
 * CODEC_ECORRUPT if n is not the length asked for or a segment fails its
 * checksum; dst is written only on success. Thread-safe, no allocation.
 */
int codec_range_copy(const struct codec_layout *l, uint32_t raw_off,
		     uint32_t raw_len, const void *got, size_t n, void *dst);

#endif
