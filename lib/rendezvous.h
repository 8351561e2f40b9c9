/*
 * rendezvous.h - weighted rendezvous (highest random weight) hashing: which
 * member of a set owns a key. Each member scores every key with a hash of
 * (key, member id) scaled by its weight; the highest score owns it. A
 * member that joins takes only keys from the others in proportion to its
 * weight, and one that leaves gives away only its own keys: no other key
 * moves. Scores are w / -ln(u), u the hash mapped into (0, 1), so that a
 * member of twice the weight owns twice the keys.
 *
 * Pure functions, no state, thread-safe. Ids must be distinct; the order of
 * the members does not change the answer.
 */
#ifndef GRANARY_RENDEZVOUS_H
#define GRANARY_RENDEZVOUS_H

#include <stddef.h>
#include <stdint.h>

struct rdv_member {
	uint64_t id;	/* stable across restarts (a node's cache id) */
	double weight;	/* > 0 to own keys; 0: never an owner */
};

/* The score of key for member m (0 when its weight is 0). */
double rdv_score(const struct rdv_member *m, const void *key, size_t klen);

/* The index in m[0..n) of key's owner, or -1 when no member has a weight
 * above 0. Ties (a hash collision) go to the lower id. */
int rdv_owner(const struct rdv_member *m, size_t n, const void *key,
	      size_t klen);

/* The k (at most) best owners of key in order, their indexes in out;
 * returns how many (members of weight 0 are never listed). For copies
 * kept on a few members, and for the next one to ask when the first is
 * down. */
size_t rdv_rank(const struct rdv_member *m, size_t n, const void *key,
		size_t klen, size_t *out, size_t k);

#endif
