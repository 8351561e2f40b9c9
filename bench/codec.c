/*
 * codec.c - what granary's block encoding costs the CPU, per kind of data:
 * blocks of 4 MiB taken in turn from a working set larger than the CPU's
 * caches (as an uploader meets them), encoded without compression
 * (checksums and copy), with LZ4 (what a volume does by default), and
 * copied with memcpy (the floor), all in the same run. Prints a markdown
 * table; the last columns are the ratios that matter: LZ4's cost over the
 * plain encoding, and the size stored.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fs/store/codec.h"

static const char usage[] =
    "usage: codec [-m MIB] [-r ROUNDS]\n"
    "\n"
    "Encode a working set of MIB MiB (default 256) in 4 MiB blocks, ROUNDS\n"
    "times (default 3, the fastest kept), for each kind of data: random\n"
    "bytes, bf16 weights, text, and random bytes with one quarter text.\n";

#define BLOCK (4u << 20)

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void fill_random(unsigned char *p, size_t n)
{
	for (size_t i = 0; i + 8 <= n; i += 8) {
		uint64_t v = next();
		memcpy(p + i, &v, 8);
	}
}

/* Weights as a trained model has them: normal, sd 0.02, kept as bf16 (the
 * top 16 bits of the float). */
static void fill_bf16(unsigned char *p, size_t n)
{
	for (size_t i = 0; i + 2 <= n; i += 2) {
		double u1 = ((double)(next() >> 11) + 1) / 9007199254740993.0;
		double u2 = (double)(next() >> 11) / 9007199254740992.0;
		float f =
		    (float)(0.02 * sqrt(-2 * log(u1)) * cos(2 * M_PI * u2));
		uint32_t b;
		memcpy(&b, &f, 4);
		p[i] = (unsigned char)(b >> 16);
		p[i + 1] = (unsigned char)(b >> 24);
	}
}

static void fill_text(unsigned char *p, size_t n)
{
	static const char *const w[] = {"epoch", "loss",    "the",
					"model", "weights", "of",
					"step",	 "grad",    "lr"};
	size_t i = 0;

	while (i < n) {
		const char *s = w[next() % 9];
		for (size_t j = 0; s[j] && i < n; j++)
			p[i++] = (unsigned char)s[j];
		if (i < n)
			p[i++] = next() % 8 ? ' ' : '\n';
	}
}

static void fill_quarter(unsigned char *p, size_t n)
{
	fill_random(p, n);
	for (size_t b = 0; b + BLOCK <= n; b += BLOCK)
		fill_text(p + b + (b / BLOCK % 4) * (BLOCK / 4), BLOCK / 4);
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* MiB/s of the best round; *stored gets the bytes encoded (mode 2: none). */
static double run(const unsigned char *set, size_t n, int mode, int rounds,
		  unsigned char *out, double *stored)
{
	double best = 0;

	for (int r = 0; r < rounds; r++) {
		size_t total = 0, len;
		double t0 = now();
		for (size_t b = 0; b + BLOCK <= n; b += BLOCK) {
			if (mode == 2) {
				memcpy(out, set + b, BLOCK);
				len = BLOCK;
			} else if (codec_encode(set + b, BLOCK,
						mode ? CODEC_LZ4 : CODEC_NONE,
						out, &len)) {
				fprintf(stderr, "codec: encode failed\n");
				exit(1);
			}
			total += len;
		}
		double mibs = (double)n / (1 << 20) / (now() - t0);
		if (mibs > best)
			best = mibs;
		*stored = (double)total / (double)n;
	}
	return best;
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		void (*fill)(unsigned char *, size_t);
	} kinds[] = {{"random bytes", fill_random},
		     {"bf16 weights", fill_bf16},
		     {"text", fill_text},
		     {"random, one quarter text", fill_quarter}};
	size_t mib = 256;
	int rounds = 3, c;

	while ((c = getopt(argc, argv, "m:r:h")) != -1) {
		if (c == 'm' && atoi(optarg) >= 4)
			mib = (size_t)atoi(optarg);
		else if (c == 'r' && atoi(optarg) >= 1)
			rounds = atoi(optarg);
		else {
			fputs(usage, c == 'h' ? stdout : stderr);
			return c == 'h' ? 0 : 2;
		}
	}
	size_t n = mib << 20;
	unsigned char *set = malloc(n), *out = malloc(codec_bound(BLOCK));
	if (!set || !out) {
		fprintf(stderr, "codec: out of memory\n");
		return 1;
	}
	printf("Blocks of 4 MiB from a working set of %zu MiB, best of %d "
	       "rounds (MiB/s of raw bytes)\n\n",
	       mib, rounds);
	printf("| data | memcpy | encode, no compression | encode, LZ4 | "
	       "LZ4 / no compression | stored / raw with LZ4 |\n");
	printf("|---|---|---|---|---|---|\n");
	for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
		double s0, s1, s2;
		kinds[k].fill(set, n);
		double cp = run(set, n, 2, rounds, out, &s2);
		double none = run(set, n, 0, rounds, out, &s0);
		double lz = run(set, n, 1, rounds, out, &s1);
		printf("| %s | %.0f | %.0f | %.0f | %.2fx | %.3f |\n",
		       kinds[k].name, cp, none, lz, lz / none, s1);
	}
	free(set);
	free(out);
	return 0;
}
