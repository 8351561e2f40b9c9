/*
 * test_codec.c - the block format: round trips of every shape of data, LZ4
 * only when it pays, the v2 layout byte by byte, ranged reads of segments
 * at every boundary, v1 blocks still read, and no corruption (bit flip,
 * truncation, misplaced segment) ever decoding into bytes the caller could
 * mistake for data.
 */
#include "fs/store/codec.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "lib/endian.h"

/* Encoded size of an uncompressed (v2) block of n raw bytes. */
#define V2_LEN(n)                                                              \
	(CODEC_HDR_SIZE + 4 * (((n) + CODEC_SEG_SIZE - 1) / CODEC_SEG_SIZE) +  \
	 (n))

static uint64_t seed_from_env(void)
{
	const char *s = getenv("GRANARY_SEED");
	uint64_t seed = s ? strtoull(s, NULL, 0) : 20240601;
	fprintf(stderr, "test_codec: seed %llu (set GRANARY_SEED to change)\n",
		(unsigned long long)seed);
	return seed;
}

static uint64_t rnd_next(uint64_t *st)
{
	/* splitmix64: fixed and portable, so a seed reproduces a failure */
	uint64_t z = (*st += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void fill_random(void *buf, size_t len, uint64_t *st)
{
	unsigned char *p = buf;
	for (size_t i = 0; i < len; i++)
		p[i] = (unsigned char)rnd_next(st);
}

static void fill_text(void *buf, size_t len)
{
	static const char words[] = "the quick brown fox jumps over the lazy "
				    "dog while granary stores blocks ";
	unsigned char *p = buf;
	for (size_t i = 0; i < len; i++)
		p[i] = (unsigned char)
		    words[(i * 7 + i / 13) % (sizeof(words) - 1)];
}

/* Encode, check the header fields a reader would see, decode, compare. */
static void round_trip(const void *raw, size_t len, enum codec_compress c,
		       int expect_lz4)
{
	size_t bound = codec_bound(len), blen = 0, out = 0, rl = 0;
	unsigned char *blk = malloc(bound), *back = malloc(len + 1);

	cr_assert(blk && back);
	cr_assert_eq(codec_encode(raw, len, c, blk, &blen), 0);
	cr_assert_leq(blen, bound);
	cr_assert_eq(memcmp(blk, "GRB1", 4), 0);
	/* v1 only for LZ4; everything uncompressed is range-readable v2 */
	cr_assert_eq(blk[4], blk[5] & CODEC_F_LZ4 ? 1 : 2);
	if (blk[4] == 2)
		cr_assert_eq(blen, V2_LEN(len));
	if (expect_lz4 >= 0)
		cr_assert_eq(!!(blk[5] & CODEC_F_LZ4), expect_lz4,
			     "len %zu: lz4 flag %d, expected %d", len,
			     blk[5] & CODEC_F_LZ4, expect_lz4);
	if (blk[5] & CODEC_F_LZ4)
		cr_assert_leq(blen, CODEC_HDR_SIZE + len - len / 8,
			      "LZ4 kept although it saves less than 1/8");
	cr_assert_eq(codec_raw_len(blk, blen, &rl), 0);
	cr_assert_eq(rl, len);
	cr_assert_eq(codec_decode(blk, blen, back, len + 1, &out), 0);
	cr_assert_eq(out, len);
	cr_assert(len == 0 || memcmp(back, raw, len) == 0);
	free(blk);
	free(back);
}

Test(codec, round_trip_empty)
{
	round_trip("", 0, CODEC_NONE, 0);
	round_trip("", 0, CODEC_LZ4, 0);
	round_trip(NULL, 0, CODEC_LZ4, 0);
}

Test(codec, round_trip_one_byte)
{
	round_trip("x", 1, CODEC_NONE, 0);
	round_trip("x", 1, CODEC_LZ4, 0);
}

Test(codec, round_trip_compressible)
{
	size_t len = 256 * 1024;
	unsigned char *raw = malloc(len);
	fill_text(raw, len);
	round_trip(raw, len, CODEC_LZ4, 1);
	round_trip(raw, len, CODEC_NONE, 0);
	memset(raw, 0, len);
	round_trip(raw, len, CODEC_LZ4, 1);
	free(raw);
}

Test(codec, round_trip_incompressible)
{
	uint64_t st = seed_from_env();
	size_t len = 256 * 1024;
	unsigned char *raw = malloc(len);
	fill_random(raw, len, &st);
	round_trip(raw, len, CODEC_LZ4, 0); /* random: LZ4 must back off */
	round_trip(raw, len, CODEC_NONE, 0);
	free(raw);
}

Test(codec, round_trip_block_size)
{
	uint64_t st = seed_from_env();
	size_t len = 4 << 20; /* granary's block size */
	unsigned char *raw = malloc(len);
	fill_text(raw, len / 2);
	fill_random(raw + len / 2, len / 2, &st);
	round_trip(raw, len, CODEC_LZ4, 1);
	fill_random(raw, len, &st);
	round_trip(raw, len, CODEC_LZ4, 0);
	free(raw);
}

Test(codec, round_trip_max_and_too_big)
{
	size_t len = 64u << 20, blen;
	unsigned char *raw = calloc(1, len + 1),
		      *blk = malloc(codec_bound(len + 1));
	cr_assert(raw && blk);
	round_trip(raw, len, CODEC_LZ4, 1);
	cr_assert_eq(codec_encode(raw, len + 1, CODEC_LZ4, blk, &blen), EINVAL);
	free(raw);
	free(blk);
}

Test(codec, many_sizes_random_mix)
{
	uint64_t st = seed_from_env();
	unsigned char *raw = malloc(70000);
	for (int i = 0; i < 300; i++) {
		size_t len = rnd_next(&st) % 70000;
		if (rnd_next(&st) & 1)
			fill_text(raw, len);
		else
			fill_random(raw, len, &st);
		round_trip(raw, len, rnd_next(&st) & 1 ? CODEC_LZ4 : CODEC_NONE,
			   -1);
	}
	free(raw);
}

/* Decode a damaged block into a buffer pre-filled with a pattern: it must
 * fail, and the caller's buffer must not have taken the decoded bytes.
 * With benign_ok, success is allowed if the bytes are exactly right (an LZ4
 * match offset flipped to an identical earlier copy decodes the same data);
 * returns 1 when that happened. */
static int expect_rejected(const unsigned char *blk, size_t blen,
			   const unsigned char *raw, size_t len,
			   const char *what, size_t where, int benign_ok)
{
	unsigned char out[4096];
	size_t got = 12345;

	cr_assert_leq(len, sizeof(out));
	memset(out, 0xA5, sizeof(out));
	int err = codec_decode(blk, blen, out, sizeof(out), &got);
	if (benign_ok && err == 0) {
		cr_assert(got == len && !memcmp(out, raw, len),
			  "%s at %zu: decode succeeded with wrong bytes", what,
			  where);
		return 1;
	}
	cr_assert(err == CODEC_ECORRUPT || err == CODEC_EVERSION,
		  "%s at %zu: decode returned %d (%s), want corrupt", what,
		  where, err, gr_strerror(err));
	cr_assert_eq(got, 12345, "%s at %zu: raw_len set on failure", what,
		     where);
	if (len)
		cr_assert(memcmp(out, raw, len) != 0,
			  "%s at %zu: decoded bytes handed back", what, where);
	return 0;
}

static void flip_every_bit(enum codec_compress c, int want_lz4)
{
	unsigned char raw[2000], blk[V2_LEN(sizeof(raw))];
	size_t blen;

	fill_text(raw, sizeof(raw));
	if (!want_lz4) {
		uint64_t st = 7;
		fill_random(raw, sizeof(raw), &st);
	}
	cr_assert_eq(codec_encode(raw, sizeof(raw), c, blk, &blen), 0);
	cr_assert_eq(!!(blk[5] & CODEC_F_LZ4), want_lz4);
	size_t benign = 0;
	for (size_t bit = 0; bit < blen * 8; bit++) {
		/* Header bits: always caught. LZ4 payload bits: caught unless
		 * the result is byte-for-byte the original. */
		int payload = bit >= CODEC_HDR_SIZE * 8 && want_lz4;
		blk[bit / 8] ^= (unsigned char)(1u << (bit % 8));
		benign += expect_rejected(blk, blen, raw, sizeof(raw),
					  "bit flip", bit, payload);
		blk[bit / 8] ^= (unsigned char)(1u << (bit % 8));
	}
	cr_assert_lt(benign * 20, blen * 8, "too many undetected flips: %zu",
		     benign);
	/* and the pristine block still decodes */
	unsigned char out[sizeof(raw)];
	size_t got;
	cr_assert_eq(codec_decode(blk, blen, out, sizeof(out), &got), 0);
	cr_assert_eq(memcmp(out, raw, sizeof(raw)), 0);
}

Test(codec, every_bit_flip_detected_lz4)
{
	flip_every_bit(CODEC_LZ4, 1);
}

Test(codec, every_bit_flip_detected_plain)
{
	flip_every_bit(CODEC_NONE, 0);
}

Test(codec, every_truncation_detected)
{
	unsigned char raw[1500], blk[2][V2_LEN(sizeof(raw))];
	size_t blen[2];
	uint64_t st = 11;

	fill_text(raw, sizeof(raw));
	cr_assert_eq(
	    codec_encode(raw, sizeof(raw), CODEC_LZ4, blk[0], &blen[0]), 0);
	fill_random(raw + 700, 100, &st);
	cr_assert_eq(
	    codec_encode(raw, sizeof(raw), CODEC_NONE, blk[1], &blen[1]), 0);
	for (int b = 0; b < 2; b++) {
		for (size_t n = 0; n < blen[b]; n++) {
			expect_rejected(blk[b], n, raw, sizeof(raw),
					"truncation", n, 0);
			size_t rl;
			cr_assert_neq(codec_raw_len(blk[b], n, &rl), 0,
				      "raw_len accepted a block cut at %zu", n);
		}
	}
	/* a trailing byte is corruption too */
	unsigned char longer[sizeof(blk[1]) + 1];
	memcpy(longer, blk[1], blen[1]);
	longer[blen[1]] = 0;
	size_t rl;
	cr_assert_eq(codec_raw_len(longer, blen[1] + 1, &rl), CODEC_ECORRUPT);
}

Test(codec, newer_version_reported)
{
	unsigned char blk[V2_LEN(4)], out[4];
	size_t blen, got;

	cr_assert_eq(codec_encode("abcd", 4, CODEC_NONE, blk, &blen), 0);
	blk[4] = CODEC_VERSION + 1;
	cr_assert_eq(codec_decode(blk, blen, out, sizeof(out), &got),
		     CODEC_EVERSION);
	cr_assert_eq(codec_raw_len(blk, blen, &got), CODEC_EVERSION);
	cr_assert_str_neq(gr_strerror(CODEC_EVERSION), "");
	cr_assert_str_neq(gr_strerror(CODEC_ECORRUPT), "");
	cr_assert_str_eq(gr_strerror(ENOSPC), strerror(ENOSPC));
}

Test(codec, short_output_buffer_is_enospc)
{
	unsigned char raw[1000], blk[V2_LEN(sizeof(raw))], out[1000];
	size_t blen, got = 777;

	fill_text(raw, sizeof(raw));
	for (int c = 0; c < 2; c++) {
		cr_assert_eq(codec_encode(raw, sizeof(raw), c, blk, &blen), 0);
		memset(out, 0x5A, sizeof(out));
		got = 777;
		cr_assert_eq(
		    codec_decode(blk, blen, out, sizeof(raw) - 1, &got),
		    ENOSPC);
		cr_assert_eq(got, 777);
		cr_assert_neq(memcmp(out, raw, sizeof(raw) - 1), 0,
			      "data handed back despite ENOSPC");
		cr_assert_eq(codec_decode(blk, blen, out, sizeof(raw), &got),
			     0);
		cr_assert_eq(got, sizeof(raw));
	}
}

Test(codec, bad_arguments)
{
	unsigned char blk[CODEC_HDR_SIZE + 8];
	size_t blen;

	cr_assert_eq(codec_encode(NULL, 5, CODEC_NONE, blk, &blen), EINVAL);
	cr_assert_eq(codec_encode("abc", 3, 7, blk, &blen), EINVAL);
	cr_assert_eq(codec_decode(NULL, 0, blk, sizeof(blk), &blen),
		     CODEC_ECORRUPT);
}

/* ---- v2: segments and ranged reads ---- */

/* Re-seal a v2 header after a deliberate change, as a newer encoder
 * would: the checksum as codec.h documents it. */
static void reseal_v2(unsigned char *blk, size_t raw_len)
{
	size_t tlen = 4 * ((raw_len + CODEC_SEG_SIZE - 1) / CODEC_SEG_SIZE);
	st64(blk + 16, XXH3_64bits_withSeed(blk + CODEC_HDR_SIZE, tlen,
					    XXH3_64bits(blk, 16)));
}

/* An encoded random (incompressible) block of len bytes. */
static unsigned char *v2_block(size_t len, uint64_t seed, unsigned char **raw,
			       size_t *blen)
{
	unsigned char *blk = malloc(codec_bound(len));
	*raw = malloc(len ? len : 1);
	cr_assert(blk && *raw);
	fill_random(*raw, len, &seed);
	cr_assert_eq(codec_encode(*raw, len, CODEC_LZ4, blk, blen), 0);
	cr_assert_eq(blk[4], 2);
	return blk;
}

Test(codec, v2_layout_as_documented)
{
	size_t len = 3 * CODEC_SEG_SIZE + 100, blen, tlen = 16;
	unsigned char *raw, *blk = v2_block(len, 31, &raw, &blen);

	cr_assert_eq(blen, CODEC_HDR_SIZE + tlen + len);
	cr_assert_eq(memcmp(blk, "GRB1", 4), 0);
	cr_assert_eq(blk[5], 0, "flags");
	cr_assert_eq(blk[6], 12, "log2 segment size");
	cr_assert_eq(blk[7], 0);
	cr_assert_eq(ld32(blk + 8), len);
	cr_assert_eq(ld32(blk + 12), tlen + len);
	cr_assert_eq(ld64(blk + 16), XXH3_64bits_withSeed(
					 blk + 24, tlen, XXH3_64bits(blk, 16)));
	for (size_t i = 0; i < 4; i++) {
		size_t n = i < 3 ? CODEC_SEG_SIZE : 100;
		cr_assert_eq(ld32(blk + 24 + 4 * i),
			     (uint32_t)XXH3_64bits_withSeed(
				 raw + i * CODEC_SEG_SIZE, n, i),
			     "table entry %zu", i);
	}
	cr_assert_eq(memcmp(blk + 24 + tlen, raw, len), 0, "payload is raw");
	cr_assert_eq(codec_prefix_len(len), 24 + tlen);
	cr_assert_eq(codec_prefix_len(4u << 20), 24 + 4096,
		     "the table of a 4 MiB block is 4 KiB");
	cr_assert_eq(codec_prefix_len(0), 24);
	free(raw);
	free(blk);
}

Test(codec, lz4_kept_only_when_it_saves_an_eighth)
{
	uint64_t st = seed_from_env();
	size_t len = 1 << 20, blen;
	unsigned char *raw = malloc(len), *blk = malloc(codec_bound(len));

	/* ~5% zeros: LZ4 saves a little, not enough */
	fill_random(raw, len, &st);
	memset(raw, 0, len / 20);
	cr_assert_eq(codec_encode(raw, len, CODEC_LZ4, blk, &blen), 0);
	cr_assert_eq(blk[4], 2, "a block LZ4 barely shrinks must stay ranged");
	/* half zeros: worth compressing */
	memset(raw, 0, len / 2);
	cr_assert_eq(codec_encode(raw, len, CODEC_LZ4, blk, &blen), 0);
	cr_assert_eq(blk[4], 1);
	cr_assert_eq(blk[5], CODEC_F_LZ4);
	cr_assert_lt(blen, len * 7 / 8);
	free(raw);
	free(blk);
}

/* A block of 4 MiB is first tried in 8 windows of 16 KiB spread over it
 * (codec.c): a compressible quarter anywhere is found and the block
 * compressed; random bytes are stored raw without a full try; what
 * compresses only between two windows is stored raw (the documented cost),
 * and every block round-trips. */
Test(codec, lz4_probe_finds_compressible_quarters)
{
	uint64_t st = seed_from_env();
	size_t len = 4 << 20, q = len / 4;
	size_t stride = (len - (16 << 10)) / 7; /* the windows' spacing */
	unsigned char *raw = malloc(len);

	cr_assert(raw);
	for (int i = 0; i < 4; i++) {
		fill_random(raw, len, &st);
		fill_text(raw + i * q, q);
		round_trip(raw, len, CODEC_LZ4, 1);
	}
	fill_random(raw, len, &st);
	round_trip(raw, len, CODEC_LZ4, 0);
	/* zeros from just past window 3 to just before window 4: a bit
	 * more than 1/8 of the block, which a full try would compress */
	memset(raw + 3 * stride + (16 << 10) + 64, 0,
	       stride - (16 << 10) - 128);
	cr_assert_gt(stride - (16 << 10) - 128, len / 8);
	round_trip(raw, len, CODEC_LZ4, 0);
	free(raw);
}

/* A version 1 block as granary wrote them before v2: no compression. */
static size_t v1_plain(const unsigned char *raw, size_t len, unsigned char *blk)
{
	memcpy(blk, "GRB1", 4);
	blk[4] = 1;
	blk[5] = blk[6] = blk[7] = 0;
	for (int i = 0; i < 4; i++) {
		blk[8 + i] = (unsigned char)(len >> (8 * i));
		blk[12 + i] = (unsigned char)(len >> (8 * i));
	}
	st64(blk + 16, XXH3_64bits(raw, len));
	memcpy(blk + 24, raw, len);
	return 24 + len;
}

Test(codec, v1_blocks_still_decode)
{
	unsigned char raw[9000], blk[24 + sizeof(raw)], out[sizeof(raw)];
	uint64_t st = 3;
	size_t got = 0, rl;
	struct codec_layout l;

	fill_random(raw, sizeof(raw), &st);
	size_t blen = v1_plain(raw, sizeof(raw), blk);
	cr_assert_eq(codec_decode(blk, blen, out, sizeof(out), &got), 0);
	cr_assert_eq(got, sizeof(raw));
	cr_assert_eq(memcmp(out, raw, sizeof(raw)), 0);
	cr_assert_eq(codec_raw_len(blk, blen, &rl), 0);
	cr_assert_eq(rl, sizeof(raw));
	/* its prefix says: read me whole */
	cr_assert_eq(codec_parse(blk, codec_prefix_len(sizeof(raw)), &l), 0);
	cr_assert_eq(l.ranged, 0);
	cr_assert_eq(l.raw_len, sizeof(raw));
	uint64_t off;
	size_t n;
	cr_assert_eq(codec_range(&l, 0, 10, &off, &n), EINVAL);
	/* and its checksum still guards it */
	blk[24 + 5000] ^= 4;
	memset(out, 0xA5, sizeof(out));
	cr_assert_eq(codec_decode(blk, blen, out, sizeof(out), &got),
		     CODEC_ECORRUPT);
	cr_assert_neq(memcmp(out, raw, sizeof(raw)), 0);

	/* v1 LZ4, as still written for compressible blocks */
	fill_text(raw, sizeof(raw));
	unsigned char lz[V2_LEN(sizeof(raw))];
	cr_assert_eq(codec_encode(raw, sizeof(raw), CODEC_LZ4, lz, &blen), 0);
	cr_assert_eq(lz[4], 1);
	cr_assert_eq(codec_parse(lz, blen, &l), 0);
	cr_assert_eq(l.ranged, 0);
	cr_assert_eq(codec_decode(lz, blen, out, sizeof(out), &got), 0);
	cr_assert_eq(memcmp(out, raw, sizeof(raw)), 0);
}

Test(codec, v2_every_prefix_flip_and_cut_rejected)
{
	size_t len = 5 * CODEC_SEG_SIZE + 77, blen;
	unsigned char *raw, *blk = v2_block(len, 41, &raw, &blen);
	size_t plen = codec_prefix_len(len);
	struct codec_layout l;

	cr_assert_eq(codec_parse(blk, plen, &l), 0);
	cr_assert_eq(l.ranged, 1);
	cr_assert_eq(l.raw_len, len);
	cr_assert_eq(l.payload_off, plen);
	for (size_t bit = 0; bit < plen * 8; bit++) {
		blk[bit / 8] ^= (unsigned char)(1u << (bit % 8));
		int err = codec_parse(blk, plen, &l);
		cr_assert(err == CODEC_ECORRUPT || err == CODEC_EVERSION,
			  "prefix bit %zu flipped: parse returned %d", bit,
			  err);
		blk[bit / 8] ^= (unsigned char)(1u << (bit % 8));
	}
	for (size_t n = 0; n < plen; n++)
		cr_assert_eq(codec_parse(blk, n, &l), CODEC_ECORRUPT,
			     "prefix cut at %zu accepted", n);
	cr_assert_eq(codec_parse(blk, blen, &l), 0, "more than the prefix");
	free(raw);
	free(blk);
}

Test(codec, v2_newer_segment_size_is_a_version_error)
{
	size_t len = 2 * CODEC_SEG_SIZE, blen, got;
	unsigned char *raw, *blk = v2_block(len, 43, &raw, &blen);
	unsigned char *out = malloc(len);
	struct codec_layout l;

	/* a sealed header with fields we do not know: from the future */
	blk[6] = 13;
	reseal_v2(blk, len);
	cr_assert_eq(codec_parse(blk, blen, &l), CODEC_EVERSION);
	cr_assert_eq(codec_decode(blk, blen, out, len, &got), CODEC_EVERSION);
	blk[6] = 12;
	blk[5] = 0x80;
	reseal_v2(blk, len);
	cr_assert_eq(codec_decode(blk, blen, out, len, &got), CODEC_EVERSION);
	/* the same change unsealed: damage */
	blk[5] = 0;
	blk[6] = 13;
	cr_assert_eq(codec_decode(blk, blen, out, len, &got), CODEC_ECORRUPT);
	free(out);
	free(raw);
	free(blk);
}

/* Read raw [off, off+n) the way the chunk store does: range, slice of the
 * block, copy; and check the damaged variants of the fetched bytes. */
static void ranged_read_ok(const struct codec_layout *l,
			   const unsigned char *blk, size_t blen,
			   const unsigned char *raw, uint32_t off, uint32_t n)
{
	uint64_t boff;
	size_t bl;
	unsigned char *dst = malloc(n + 2 * CODEC_SEG_SIZE);

	cr_assert_eq(codec_range(l, off, n, &boff, &bl), 0, "range %u+%u", off,
		     n);
	cr_assert_eq((boff - l->payload_off) % CODEC_SEG_SIZE, 0,
		     "range %u+%u not segment aligned", off, n);
	cr_assert_leq(boff - l->payload_off, off);
	cr_assert_geq(boff - l->payload_off + bl, (uint64_t)off + n);
	cr_assert_lt(bl, (size_t)n + 2 * CODEC_SEG_SIZE, "fetches too much");
	cr_assert_leq(boff + bl, blen);
	memset(dst, 0xA5, n);
	cr_assert_eq(codec_range_copy(l, off, n, blk + boff, bl, dst), 0,
		     "copy %u+%u", off, n);
	cr_assert_eq(memcmp(dst, raw + off, n), 0, "bytes %u+%u", off, n);

	/* short, long, or the neighbouring segments: never data */
	memset(dst, 0xA5, n);
	cr_assert_eq(codec_range_copy(l, off, n, blk + boff, bl - 1, dst),
		     CODEC_ECORRUPT);
	if (boff + bl < blen)
		cr_assert_eq(
		    codec_range_copy(l, off, n, blk + boff, bl + 1, dst),
		    CODEC_ECORRUPT);
	if (boff + CODEC_SEG_SIZE + bl <= blen)
		cr_assert_eq(codec_range_copy(l, off, n,
					      blk + boff + CODEC_SEG_SIZE, bl,
					      dst),
			     CODEC_ECORRUPT, "shifted segments %u+%u", off, n);
	for (uint32_t i = 0; i < n; i++)
		cr_assert_eq(dst[i], 0xA5, "dst written on failure");
	free(dst);
}

Test(codec, v2_ranges_at_segment_boundaries)
{
	const uint32_t S = CODEC_SEG_SIZE, len = 6 * S + 100;
	size_t blen;
	unsigned char *raw, *blk = v2_block(len, 47, &raw, &blen);
	struct codec_layout l;
	const uint32_t offs[] = {0,	    1,	       S - 1,	  S,
				 S + 1,	    2 * S - 1, 2 * S,	  5 * S - 1,
				 6 * S - 1, 6 * S,     6 * S + 1, len - 1};
	const uint32_t lens[] = {1, 2, S - 1, S, S + 1, 2 * S, 3 * S + 7};

	cr_assert_eq(codec_parse(blk, codec_prefix_len(len), &l), 0);
	for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++)
		for (size_t j = 0; j < sizeof(lens) / sizeof(lens[0]); j++)
			if (lens[j] <= len - offs[i])
				ranged_read_ok(&l, blk, blen, raw, offs[i],
					       lens[j]);
	ranged_read_ok(&l, blk, blen, raw, 0, len);	/* all of it */
	ranged_read_ok(&l, blk, blen, raw, 6 * S, 100); /* short last seg */

	uint64_t boff;
	size_t bl;
	cr_assert_eq(codec_range(&l, 0, 0, &boff, &bl), EINVAL);
	cr_assert_eq(codec_range(&l, len - 1, 2, &boff, &bl), EINVAL);
	cr_assert_eq(codec_range(&l, len, 1, &boff, &bl), EINVAL);
	free(raw);
	free(blk);
}

Test(codec, v2_payload_flip_fails_only_its_segment)
{
	const uint32_t S = CODEC_SEG_SIZE, len = 4 * S + 333;
	size_t blen;
	unsigned char *raw, *blk = v2_block(len, 53, &raw, &blen);
	unsigned char *dst = malloc(S);
	struct codec_layout l;

	cr_assert_eq(codec_parse(blk, codec_prefix_len(len), &l), 0);
	for (uint32_t at = 0; at < len; at += 37) {
		uint32_t seg = at / S, other = (seg + 1) % 5;
		uint32_t n = seg == 4 ? 333 : S, on = other == 4 ? 333 : S;
		uint64_t boff;
		size_t bl;
		blk[l.payload_off + at] ^= (unsigned char)(1u << (at % 8));
		cr_assert_eq(codec_range(&l, seg * S, n, &boff, &bl), 0);
		cr_assert_eq(
		    codec_range_copy(&l, seg * S, n, blk + boff, bl, dst),
		    CODEC_ECORRUPT, "flip at raw %u not caught", at);
		/* a small read inside the damaged segment too */
		cr_assert_eq(codec_range_copy(&l, at, 1, blk + boff, bl, dst),
			     CODEC_ECORRUPT);
		/* other segments are still readable */
		cr_assert_eq(codec_range(&l, other * S, on, &boff, &bl), 0);
		cr_assert_eq(
		    codec_range_copy(&l, other * S, on, blk + boff, bl, dst),
		    0);
		cr_assert_eq(memcmp(dst, raw + other * S, on), 0);
		blk[l.payload_off + at] ^= (unsigned char)(1u << (at % 8));
	}
	free(dst);
	free(raw);
	free(blk);
}

Test(codec, v2_random_ranges_match)
{
	uint64_t st = seed_from_env();
	const uint32_t len = 4u << 20;
	size_t blen;
	unsigned char *raw, *blk = v2_block(len, st, &raw, &blen);
	unsigned char *dst = malloc(256 << 10);
	struct codec_layout l;

	cr_assert_eq(codec_parse(blk, codec_prefix_len(len), &l), 0);
	for (int i = 0; i < 2000; i++) {
		uint32_t off = (uint32_t)(rnd_next(&st) % len);
		uint32_t n = (uint32_t)(rnd_next(&st) % (256 << 10)) + 1;
		uint64_t boff;
		size_t bl;
		if (n > len - off)
			n = len - off;
		cr_assert_eq(codec_range(&l, off, n, &boff, &bl), 0);
		cr_assert_eq(codec_range_copy(&l, off, n, blk + boff, bl, dst),
			     0);
		cr_assert_eq(memcmp(dst, raw + off, n), 0,
			     "range %u+%u differs", off, n);
	}
	free(dst);
	free(raw);
	free(blk);
}

Test(codec, view_checks_in_place)
{
	unsigned char raw[9000], blk[V2_LEN(sizeof(raw))];
	const void *v = NULL;
	size_t blen, rl = 0;
	uint64_t st = 11;

	/* v2: the raw bytes where they lie, checked */
	fill_random(raw, sizeof(raw), &st);
	cr_assert_eq(codec_encode(raw, sizeof(raw), CODEC_LZ4, blk, &blen), 0);
	cr_assert_eq(codec_view(blk, blen, &v, &rl), 0);
	cr_assert_eq(rl, sizeof(raw));
	cr_assert(v > (const void *)blk && v < (const void *)(blk + blen));
	cr_assert_eq(memcmp(v, raw, sizeof(raw)), 0);
	/* any flipped bit, header, table or payload, is refused */
	for (size_t bit = 0; bit < blen * 8; bit += 61) {
		blk[bit / 8] ^= (unsigned char)(1u << (bit % 8));
		int err = codec_view(blk, blen, &v, &rl);
		cr_assert(err == CODEC_ECORRUPT || err == CODEC_EVERSION,
			  "bit %zu: view returned %d", bit, err);
		blk[bit / 8] ^= (unsigned char)(1u << (bit % 8));
	}
	cr_assert_eq(codec_view(blk, blen - 1, &v, &rl), CODEC_ECORRUPT);

	/* v1 stored raw: the same, under its one checksum */
	blen = v1_plain(raw, sizeof(raw), blk);
	cr_assert_eq(codec_view(blk, blen, &v, &rl), 0);
	cr_assert_eq(v, blk + CODEC_HDR_SIZE);
	blk[CODEC_HDR_SIZE + 4000] ^= 1;
	cr_assert_eq(codec_view(blk, blen, &v, &rl), CODEC_ECORRUPT);

	/* compressed: no view, the length to decode into */
	fill_text(raw, sizeof(raw));
	cr_assert_eq(codec_encode(raw, sizeof(raw), CODEC_LZ4, blk, &blen), 0);
	cr_assert_eq(blk[5] & CODEC_F_LZ4, CODEC_F_LZ4);
	v = blk;
	cr_assert_eq(codec_view(blk, blen, &v, &rl), 0);
	cr_assert_null(v);
	cr_assert_eq(rl, sizeof(raw));
	cr_assert_eq(codec_view(blk, blen, NULL, &rl), EINVAL);
}

/* Encode raw (n bytes, room before it) both ways: the same block, at
 * where (NULL: just before raw). */
static void expect_inplace(unsigned char *raw, size_t n, enum codec_compress c,
			   unsigned char *lz, const unsigned char *where)
{
	unsigned char *ref = malloc(codec_bound(n));
	size_t blen, ilen;
	void *blk = NULL;

	cr_assert_eq(codec_encode(raw, n, c, ref, &blen), 0);
	cr_assert_eq(codec_encode_inplace(raw, n, c, lz, &blk, &ilen), 0);
	cr_assert_eq(blk, where ? where : raw - codec_prefix_len(n));
	cr_assert_eq(ilen, blen);
	cr_assert_eq(memcmp(blk, ref, blen), 0, "not the block encode makes");
	free(ref);
}

Test(codec, inplace_is_the_same_block)
{
	enum { N = 9000 };
	size_t pre = codec_prefix_len(N);
	unsigned char *room = malloc(pre + N), *raw = room + pre;
	unsigned char *lz = malloc(codec_bound(N));
	uint64_t st = 21;
	void *blk;
	size_t ilen;

	/* stored raw: header and table land just before the bytes */
	fill_random(raw, N, &st);
	expect_inplace(raw, N, CODEC_NONE, NULL, NULL);
	fill_random(raw, N, &st);
	expect_inplace(raw, N, CODEC_LZ4, lz, NULL);
	/* compressed: into lz */
	fill_text(raw, N);
	expect_inplace(raw, N, CODEC_LZ4, lz, lz);
	cr_assert_eq(codec_encode_inplace(raw, N, CODEC_LZ4, NULL, &blk, &ilen),
		     EINVAL);
	free(room);
	free(lz);
}

/* A gathered block (prefix then the raw bytes, or an LZ4 block in lz) is
 * the block codec_encode makes, byte for byte. */
static void expect_gather(const unsigned char *raw, size_t n,
			  enum codec_compress c, int compressed)
{
	unsigned char *ref = malloc(codec_bound(n));
	unsigned char *lz = malloc(codec_bound(n));
	unsigned char *pre = malloc(codec_prefix_len(n));
	size_t blen, lzlen = 1;

	cr_assert_eq(codec_encode(raw, n, c, ref, &blen), 0);
	cr_assert_eq(codec_encode_gather(raw, n, c, lz, &lzlen, pre), 0);
	if (compressed) {
		cr_assert_eq(lzlen, blen);
		cr_assert_eq(memcmp(lz, ref, blen), 0, "not the LZ4 block");
	} else {
		size_t plen = codec_prefix_len(n);
		cr_assert_eq(lzlen, 0, "an incompressible block went to lz");
		cr_assert_eq(plen + n, blen);
		cr_assert_eq(memcmp(pre, ref, plen), 0, "not the prefix");
		cr_assert_eq(memcmp(raw, ref + plen, n), 0);
	}
	free(pre);
	free(lz);
	free(ref);
}

Test(codec, gather_is_the_same_block)
{
	enum { N = 9000 };
	unsigned char *raw = malloc(N);
	uint64_t st = 33;
	size_t lzlen;
	unsigned char pre[64];

	fill_random(raw, N, &st);
	expect_gather(raw, N, CODEC_NONE, 0);
	expect_gather(raw, N, CODEC_LZ4, 0);
	expect_gather(raw, 1, CODEC_LZ4, 0);
	expect_gather(raw, 0, CODEC_NONE, 0);
	fill_text(raw, N);
	expect_gather(raw, N, CODEC_LZ4, 1);
	cr_assert_eq(codec_encode_gather(raw, N, CODEC_LZ4, NULL, &lzlen, pre),
		     EINVAL, "LZ4 without lz");
	cr_assert_eq(codec_encode_gather(raw, N, CODEC_NONE, NULL, NULL, pre),
		     EINVAL);
	free(raw);
}

/*
 * The bytes of a v2 block are the on-store format: whichever XXH3 code
 * the host runs (SSE2, or AVX2 through the x86 dispatcher), a block of
 * given contents encodes to the same bytes that earlier builds wrote.
 */
Test(codec, v2_block_bytes_are_stable)
{
	size_t len = 3 * CODEC_SEG_SIZE + 77, blen;
	unsigned char *raw = malloc(len), *blk = malloc(V2_LEN(len));
	uint64_t st = 7;

	cr_assert(raw && blk);
	fill_random(raw, len, &st);
	cr_assert_eq(codec_encode(raw, len, CODEC_NONE, blk, &blen), 0);
	cr_assert_eq(blen, V2_LEN(len));
	cr_assert_eq(XXH64(blk, blen, 0), 0x6c187745955fcc84ull);
	free(raw);
	free(blk);
}
