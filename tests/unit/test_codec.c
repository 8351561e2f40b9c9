/*
 * test_codec.c - the block format: round trips of every shape of data, LZ4
 * only when it pays, and no corruption (bit flip, truncation) ever decoding
 * into bytes the caller could mistake for data.
 */
#include "../../fs/codec.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
	cr_assert_eq(blk[4], CODEC_VERSION);
	if (expect_lz4 >= 0)
		cr_assert_eq(!!(blk[5] & CODEC_F_LZ4), expect_lz4,
			     "len %zu: lz4 flag %d, expected %d", len,
			     blk[5] & CODEC_F_LZ4, expect_lz4);
	if (blk[5] & CODEC_F_LZ4)
		cr_assert_lt(blen, CODEC_HDR_SIZE + len,
			     "LZ4 kept although it does not save space");
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
		  where, err, codec_strerror(err));
	cr_assert_eq(got, 12345, "%s at %zu: raw_len set on failure", what,
		     where);
	if (len)
		cr_assert(memcmp(out, raw, len) != 0,
			  "%s at %zu: decoded bytes handed back", what, where);
	return 0;
}

static void flip_every_bit(enum codec_compress c, int want_lz4)
{
	unsigned char raw[2000], blk[CODEC_HDR_SIZE + sizeof(raw)];
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
	unsigned char raw[1500], blk[2][CODEC_HDR_SIZE + sizeof(raw)];
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
	unsigned char blk[CODEC_HDR_SIZE + 4], out[4];
	size_t blen, got;

	cr_assert_eq(codec_encode("abcd", 4, CODEC_NONE, blk, &blen), 0);
	blk[4] = CODEC_VERSION + 1;
	cr_assert_eq(codec_decode(blk, blen, out, sizeof(out), &got),
		     CODEC_EVERSION);
	cr_assert_eq(codec_raw_len(blk, blen, &got), CODEC_EVERSION);
	cr_assert_str_neq(codec_strerror(CODEC_EVERSION), "");
	cr_assert_str_neq(codec_strerror(CODEC_ECORRUPT), "");
	cr_assert_str_eq(codec_strerror(ENOSPC), strerror(ENOSPC));
}

Test(codec, short_output_buffer_is_enospc)
{
	unsigned char raw[1000], blk[CODEC_HDR_SIZE + sizeof(raw)], out[1000];
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
