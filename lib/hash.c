/*
 * hash.c - the intrusive hash table of hash.h: singly linked chains in a
 * power-of-two array of buckets, doubled past a load of 1 unless fixed.
 */
#include "lib/hash.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/log.h"

#define HASH_BITS_MAX 30

static size_t bucket_of(unsigned bits, uint64_t hash)
{
	return (size_t)((hash * 0x9e3779b97f4a7c15ull) >> (64 - bits));
}

int hash_init(struct hash *h, unsigned bits)
{
	h->buckets = NULL;
	h->count = 0;
	h->bits = 0;
	h->max_bits = HASH_BITS_MAX;
	if (bits < 1 || bits > HASH_BITS_MAX)
		return EINVAL;
	h->buckets = calloc((size_t)1 << bits, sizeof(*h->buckets));
	if (!h->buckets)
		return ENOMEM;
	h->bits = bits;
	return 0;
}

int hash_init_fixed(struct hash *h, unsigned bits)
{
	int err = hash_init(h, bits);

	if (!err)
		h->max_bits = bits;
	return err;
}

void hash_release(struct hash *h)
{
	free(h->buckets);
	h->buckets = NULL;
	h->count = 0;
	h->bits = 0;
}

void hash_clear(struct hash *h)
{
	if (h->count)
		memset(h->buckets, 0,
		       ((size_t)1 << h->bits) * sizeof(*h->buckets));
	h->count = 0;
}

struct hash_node *hash_find(const struct hash *h, uint64_t hash,
			    hash_match_fn match, const void *key)
{
	struct hash_node *n = h->buckets[bucket_of(h->bits, hash)];

	for (; n; n = n->next)
		if (n->hash == hash && (!match || match(n, key)))
			return n;
	return NULL;
}

struct hash_node *hash_find_next(const struct hash_node *n, uint64_t hash,
				 hash_match_fn match, const void *key)
{
	/* the nodes of one hash share a chain */
	for (n = n->next; n; n = n->next)
		if (n->hash == hash && (!match || match(n, key)))
			return (struct hash_node *)n;
	return NULL;
}

/* Double the buckets (up to max_bits); failing only keeps the chains
 * longer. */
static void grow(struct hash *h)
{
	unsigned bits = h->bits + 1;
	size_t oldn = (size_t)1 << h->bits;

	if (bits > h->max_bits)
		return;
	struct hash_node **nb = calloc((size_t)1 << bits, sizeof(*nb));
	if (!nb)
		return;
	for (size_t i = 0; i < oldn; i++) {
		struct hash_node *n = h->buckets[i], *next;
		for (; n; n = next) {
			next = n->next;
			size_t b = bucket_of(bits, n->hash);
			n->next = nb[b];
			nb[b] = n;
		}
	}
	free(h->buckets);
	h->buckets = nb;
	h->bits = bits;
}

void hash_insert(struct hash *h, struct hash_node *n, uint64_t hash)
{
	size_t b = bucket_of(h->bits, hash);

	n->hash = hash;
	n->next = h->buckets[b];
	h->buckets[b] = n;
	if (++h->count > (size_t)1 << h->bits)
		grow(h);
}

void hash_remove(struct hash *h, struct hash_node *n)
{
	struct hash_node **p = &h->buckets[bucket_of(h->bits, n->hash)];

	while (*p && *p != n)
		p = &(*p)->next;
	gr_assert(*p == n);
	*p = n->next;
	n->next = NULL;
	h->count--;
}

static struct hash_node *first_from(const struct hash *h, size_t b)
{
	for (size_t nb = (size_t)1 << h->bits; b < nb; b++)
		if (h->buckets[b])
			return h->buckets[b];
	return NULL;
}

struct hash_node *hash_first(const struct hash *h)
{
	return h->count ? first_from(h, 0) : NULL;
}

struct hash_node *hash_next(const struct hash *h, const struct hash_node *n)
{
	if (n->next)
		return n->next;
	return first_from(h, bucket_of(h->bits, n->hash) + 1);
}
