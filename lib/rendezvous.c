/*
 * rendezvous.c - weighted rendezvous hashing (rendezvous.h). It runs on
 * every block a cache group reads, over every member: one XXH3 of the
 * key and one log() per member, no allocation (bench/rdv_cost.c prints
 * the cost per call: 20-25 ns a member). Members agree on owners as long
 * as their log() agrees; libms that differ in the last bit could only
 * split a near tie, which costs a store fetch, never a wrong byte.
 */
#include "lib/rendezvous.h"

#include <math.h>

#include <xxhash.h>

/* rdv_rank keeps the scores of its best k on the stack up to this k;
 * above it (never in practice: k is a few copies) it picks in passes. */
#define RANK_STACK 64

/* XXH3-64 of the key seeded with the member's id, its top 53 bits
 * mapped into (0, 1) open: (h + 1/2) / 2^53, never 0 nor 1, so that
 * -ln(u) is finite and above 0. */
static double unit_of(uint64_t id, const void *key, size_t klen)
{
	uint64_t h = XXH3_64bits_withSeed(key, klen, id);

	return ((double)(h >> 11) + 0.5) * 0x1p-53;
}

static int has_weight(const struct rdv_member *m)
{
	return m->weight > 0; /* NaN and negatives own nothing either */
}

double rdv_score(const struct rdv_member *m, const void *key, size_t klen)
{
	if (!has_weight(m))
		return 0;
	return m->weight / -log(unit_of(m->id, key, klen));
}

/* Does (score a, id ia) come before (score b, id ib)? Higher scores
 * first; equal scores (a collision of both hashes) to the lower id, so
 * that the order is total and the same whatever the members' order. */
static int beats(double a, uint64_t ia, double b, uint64_t ib)
{
	return a > b || (a == b && ia < ib);
}

int rdv_owner(const struct rdv_member *m, size_t n, const void *key,
	      size_t klen)
{
	double best = 0;
	int who = -1;

	for (size_t i = 0; i < n; i++) {
		if (!has_weight(&m[i]))
			continue;
		double s = rdv_score(&m[i], key, klen);
		if (who < 0 || beats(s, m[i].id, best, m[who].id)) {
			best = s;
			who = (int)i;
		}
	}
	return who;
}

/* k above RANK_STACK: pass j picks the best member that comes after
 * pick j - 1 in the order of beats(); k passes over the members. */
static size_t rank_passes(const struct rdv_member *m, size_t n, const void *key,
			  size_t klen, size_t *out, size_t k)
{
	double last = 0;
	size_t got = 0;

	for (; got < k; got++) {
		double best = 0;
		size_t who = n;
		for (size_t i = 0; i < n; i++) {
			if (!has_weight(&m[i]))
				continue;
			double s = rdv_score(&m[i], key, klen);
			if (got && !beats(last, m[out[got - 1]].id, s, m[i].id))
				continue;
			if (who == n || beats(s, m[i].id, best, m[who].id)) {
				best = s;
				who = i;
			}
		}
		if (who == n)
			break;
		out[got] = who;
		last = best;
	}
	return got;
}

size_t rdv_rank(const struct rdv_member *m, size_t n, const void *key,
		size_t klen, size_t *out, size_t k)
{
	double sc[RANK_STACK];
	size_t got = 0;

	if (k > n)
		k = n;
	if (k > RANK_STACK)
		return rank_passes(m, n, key, klen, out, k);
	/* insertion into the best k so far, best first */
	for (size_t i = 0; i < n && k; i++) {
		if (!has_weight(&m[i]))
			continue;
		double s = rdv_score(&m[i], key, klen);
		size_t j = got;
		while (j > 0 && beats(s, m[i].id, sc[j - 1], m[out[j - 1]].id))
			j--;
		if (j == k)
			continue;
		size_t end = got < k ? got : k - 1;
		for (size_t t = end; t > j; t--) {
			sc[t] = sc[t - 1];
			out[t] = out[t - 1];
		}
		sc[j] = s;
		out[j] = i;
		if (got < k)
			got++;
	}
	return got;
}
