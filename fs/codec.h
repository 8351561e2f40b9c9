/*
 * codec.h - the on-store block format: header + (optionally LZ4) payload.
 *
 * Every block that granary writes to an object store or a cache disk is
 * wrapped by codec_encode() and checked by codec_decode(); a block whose
 * checksum does not match is reported, never returned as data.
 *
 * Header (little endian, CODEC_HDR_SIZE bytes):
 *   0  magic "GRB1" (4)      4  version u8 (1)     5  flags u8 (CODEC_F_*)
 *   6  reserved u16 (0)      8  raw length u32    12  stored length u32
 *  16  XXH3-64 of the raw bytes (8)
 */
#ifndef GRANARY_CODEC_H
#define GRANARY_CODEC_H

#include <stddef.h>
#include <stdint.h>

#define CODEC_HDR_SIZE 24
#define CODEC_VERSION  1
#define CODEC_F_LZ4    0x01 /* payload is an LZ4 block */

/* Project-specific errors (negative); positive values are errno. */
#define CODEC_ECORRUPT (-101) /* bad magic, length, or checksum */
#define CODEC_EVERSION (-102) /* written by a newer granary */

enum codec_compress { CODEC_NONE = 0, CODEC_LZ4 = 1 };

/* Largest encoded size of raw_len bytes: size the output buffer with it. */
size_t codec_bound(size_t raw_len);

/*
 * Encode raw[0..raw_len) into out (at least codec_bound(raw_len) bytes).
 * With CODEC_LZ4 the payload is compressed only when that saves space.
 * raw_len must be <= 64 MiB. Returns 0 and sets *out_len, or an error.
 */
int codec_encode(const void *raw, size_t raw_len, enum codec_compress c,
		 void *out, size_t *out_len);

/* Encoded length (header included) of the block whose first avail bytes
 * (at least CODEC_HDR_SIZE) are at hdr: to walk blocks laid end to end, as
 * in a pack. CODEC_ECORRUPT when the header is not one. */
int codec_frame_len(const void *hdr, size_t avail, size_t *len);
/* Raw length declared by a block's header, after checking magic and sizes. */
int codec_raw_len(const void *blk, size_t blk_len, size_t *raw_len);

/*
 * Decode blk[0..blk_len) into raw (raw_cap bytes). Verifies magic, version,
 * lengths and the XXH3 checksum: returns CODEC_ECORRUPT for any mismatch or
 * truncation, CODEC_EVERSION for an unknown version, ENOSPC if raw_cap is
 * too small. Thread-safe, no allocation.
 */
int codec_decode(const void *blk, size_t blk_len, void *raw, size_t raw_cap,
		 size_t *raw_len);

const char *codec_strerror(int err);

#endif
