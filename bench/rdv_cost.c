/*
 * rdv_cost.c - what placement in a cache group costs per block read:
 * rdv_owner (the owner of a key) and rdv_rank of 2 (the owner and the
 * next to ask) over 4, 16 and 64 members of mixed weights, keys shaped
 * like the store's block keys. Prints ns per call, best of 3 rounds;
 * compare with a block read from a peer's cache (hundreds of us).
 *
 *   rdv_cost [CALLS]   (default 1000000)
 */
#include <stdio.h>
#include <stdlib.h>

#include "lib/fsutil.h"
#include "lib/rendezvous.h"

#define KEYS 4096

static char keys[KEYS][48];
static size_t klen[KEYS];
static volatile size_t sink;

/* ns per call of rdv_owner (rank 0) or rdv_rank of `rank` over n
 * members, best of 3 rounds of calls. */
static double cost(const struct rdv_member *m, size_t n, size_t rank,
		   long calls)
{
	double best = 0;

	for (int round = 0; round < 3; round++) {
		int64_t t0 = fsutil_mono_ns();
		size_t acc = 0, out[2];
		for (long i = 0; i < calls; i++) {
			size_t k = (size_t)i % KEYS;
			if (rank)
				acc += rdv_rank(m, n, keys[k], klen[k], out,
						rank) +
				       out[0];
			else
				acc +=
				    (size_t)rdv_owner(m, n, keys[k], klen[k]);
		}
		sink = acc;
		double ns = (double)(fsutil_mono_ns() - t0) / (double)calls;
		if (!round || ns < best)
			best = ns;
	}
	return best;
}

int main(int argc, char **argv)
{
	static struct rdv_member m[64];
	static const size_t sizes[] = {4, 16, 64};
	long calls = argc > 1 ? atol(argv[1]) : 1000000;

	if (calls <= 0) {
		fprintf(stderr, "usage: rdv_cost [CALLS]\n");
		return 2;
	}
	for (int i = 0; i < KEYS; i++)
		klen[i] = (size_t)snprintf(keys[i], sizeof keys[i],
					   "chunks/0/%d/%d_%d_4194304",
					   i / 1000, i * 7919, i % 16);
	for (int i = 0; i < 64; i++) {
		m[i].id = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
		m[i].weight = (double)(1 + i % 4) * 1e12; /* 1-4 TB caches */
	}
	printf("| members | rdv_owner ns/call | rdv_rank of 2 ns/call |\n");
	printf("|---|---|---|\n");
	for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
		printf("| %zu | %.0f | %.0f |\n", sizes[s],
		       cost(m, sizes[s], 0, calls),
		       cost(m, sizes[s], 2, calls));
	return 0;
}
