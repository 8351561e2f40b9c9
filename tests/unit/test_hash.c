/*
 * test_hash.c - the intrusive hash table finds what was inserted and
 * nothing else, through growth (or none: fixed), under colliding hashes,
 * and against a plain array model over a long random run.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "lib/hash.h"

struct item {
	int marker; /* before the node: hash_entry must subtract */
	struct hash_node hn;
	uint64_t key;
	int seen;
};

static int match_key(const struct hash_node *n, const void *key)
{
	return hash_entry(n, struct item, hn)->key == *(const uint64_t *)key;
}

static struct item *find(struct hash *h, uint64_t hash, uint64_t key)
{
	struct hash_node *n = hash_find(h, hash, match_key, &key);
	return n ? hash_entry(n, struct item, hn) : NULL;
}

static size_t walk_count(struct hash *h)
{
	size_t n = 0;
	for (struct hash_node *x = hash_first(h); x; x = hash_next(h, x))
		n++;
	return n;
}

Test(hash, init_rejects_bad_bits)
{
	struct hash h;
	cr_assert_eq(hash_init(&h, 0), EINVAL);
	cr_assert_eq(hash_init(&h, 31), EINVAL);
	cr_assert_eq(hash_init(&h, 1), 0);
	cr_assert_null(hash_first(&h));
	hash_release(&h);
}

Test(hash, insert_find_remove)
{
	struct hash h;
	struct item a = {.key = 1}, b = {.key = 2};

	cr_assert_eq(hash_init(&h, 4), 0);
	cr_assert_null(find(&h, hash_mix64(1), 1));
	hash_insert(&h, &a.hn, hash_mix64(1));
	hash_insert(&h, &b.hn, hash_mix64(2));
	cr_assert_eq(hash_count(&h), 2);
	cr_assert_eq(find(&h, hash_mix64(1), 1), &a);
	cr_assert_eq(find(&h, hash_mix64(2), 2), &b);
	/* the right hash with the wrong key, and the reverse */
	cr_assert_null(find(&h, hash_mix64(1), 2));
	cr_assert_null(find(&h, hash_mix64(3), 1));
	/* match NULL: the hash alone */
	cr_assert_eq(hash_find(&h, hash_mix64(2), NULL, NULL), &b.hn);
	hash_remove(&h, &a.hn);
	cr_assert_null(find(&h, hash_mix64(1), 1));
	cr_assert_eq(find(&h, hash_mix64(2), 2), &b);
	cr_assert_eq(hash_count(&h), 1);
	cr_assert_eq(walk_count(&h), 1);
	hash_remove(&h, &b.hn);
	cr_assert_null(hash_first(&h));
	hash_release(&h);
}

/* From 2 buckets to thousands: every entry stays findable, the walk sees
 * each once, and the table did grow (chains of about one). */
Test(hash, growth_keeps_every_entry)
{
	enum { N = 20000 };
	struct hash h;
	struct item *it = calloc(N, sizeof(*it));

	cr_assert_eq(hash_init(&h, 1), 0);
	for (uint64_t i = 0; i < N; i++) {
		it[i].key = i * 7919; /* plain integers as hashes */
		hash_insert(&h, &it[i].hn, it[i].key);
		if (i % 997 == 0)
			for (uint64_t j = 0; j <= i; j++)
				cr_assert_eq(find(&h, it[j].key, it[j].key),
					     &it[j]);
	}
	cr_assert_geq((size_t)1 << h.bits, (size_t)N);
	for (uint64_t i = 0; i < N; i++)
		cr_assert_eq(find(&h, it[i].key, it[i].key), &it[i]);
	for (struct hash_node *x = hash_first(&h); x; x = hash_next(&h, x))
		hash_entry(x, struct item, hn)->seen++;
	for (uint64_t i = 0; i < N; i++)
		cr_assert_eq(it[i].seen, 1, "entry %llu seen %d times",
			     (unsigned long long)i, it[i].seen);
	hash_release(&h);
	free(it);
}

/* A fixed table keeps its buckets past a load of 1, finds every entry in
 * its longer chains, and hash_clear empties it for new inserts. */
Test(hash, fixed_never_grows_and_clears)
{
	enum { N = 1000 };
	struct hash h;
	struct item *it = calloc(N, sizeof(*it));

	cr_assert_eq(hash_init_fixed(&h, 4), 0);
	for (uint64_t i = 0; i < N; i++) {
		it[i].key = i;
		hash_insert(&h, &it[i].hn, hash_mix64(i));
	}
	cr_assert_eq(h.bits, 4);
	for (uint64_t i = 0; i < N; i++)
		cr_assert_eq(find(&h, hash_mix64(i), i), &it[i]);
	cr_assert_eq(walk_count(&h), N);
	hash_clear(&h);
	cr_assert_eq(hash_count(&h), 0);
	cr_assert_null(hash_first(&h));
	cr_assert_null(find(&h, hash_mix64(1), 1));
	hash_insert(&h, &it[1].hn, hash_mix64(1));
	cr_assert_eq(find(&h, hash_mix64(1), 1), &it[1]);
	cr_assert_eq(walk_count(&h), 1);
	cr_assert_eq(h.bits, 4);
	hash_release(&h);
	free(it);
}

/* Every entry under one hash: the match alone tells them apart,
 * hash_find_next visits each, and removing from the middle of the chain
 * keeps the rest. */
Test(hash, colliding_hashes)
{
	enum { N = 500 };
	struct hash h;
	struct item *it = calloc(N, sizeof(*it));

	cr_assert_eq(hash_init(&h, 3), 0);
	for (uint64_t i = 0; i < N; i++) {
		it[i].key = i;
		hash_insert(&h, &it[i].hn, 42);
	}
	for (uint64_t i = 0; i < N; i++)
		cr_assert_eq(find(&h, 42, i), &it[i]);
	cr_assert_null(find(&h, 42, N));
	/* hash_find_next: each of them once, from the first */
	size_t seen = 0;
	for (struct hash_node *x = hash_find(&h, 42, NULL, NULL); x;
	     x = hash_find_next(x, 42, NULL, NULL)) {
		hash_entry(x, struct item, hn)->seen++;
		seen++;
	}
	cr_assert_eq(seen, N);
	for (uint64_t i = 0; i < N; i++)
		cr_assert_eq(it[i].seen, 1);
	uint64_t k = 7;
	cr_assert_null(hash_find_next(&find(&h, 42, 7)->hn, 42, match_key, &k));
	for (uint64_t i = 0; i < N; i += 2)
		hash_remove(&h, &it[i].hn);
	for (uint64_t i = 0; i < N; i++)
		cr_assert_eq(find(&h, 42, i), i % 2 ? &it[i] : NULL);
	cr_assert_eq(hash_count(&h), N / 2);
	cr_assert_eq(walk_count(&h), N / 2);
	hash_release(&h);
	free(it);
}

/* Removing each node during a walk, as the owners' close does. */
Test(hash, remove_while_walking)
{
	enum { N = 3000 };
	struct hash h;
	struct item *it = calloc(N, sizeof(*it));

	cr_assert_eq(hash_init(&h, 2), 0);
	for (uint64_t i = 0; i < N; i++) {
		it[i].key = i;
		hash_insert(&h, &it[i].hn, hash_mix64(i) & 0xff);
	}
	struct hash_node *x, *next;
	size_t n = 0;
	for (x = hash_first(&h); x; x = next) {
		next = hash_next(&h, x);
		hash_remove(&h, x);
		n++;
	}
	cr_assert_eq(n, N);
	cr_assert_eq(hash_count(&h), 0);
	cr_assert_null(hash_first(&h));
	hash_release(&h);
	free(it);
}

/* A long random run of inserts, removes and lookups against an array of
 * which keys are in; hashes from a small range so that chains collide. */
Test(hash, random_against_model)
{
	enum { KEYS = 4096, OPS = 200000 };
	struct hash h;
	struct item *it = calloc(KEYS, sizeof(*it));
	char *in = calloc(KEYS, 1);
	size_t count = 0;
	unsigned seed = 20;

	cr_assert_eq(hash_init(&h, 1), 0);
	for (int op = 0; op < OPS; op++) {
		uint64_t k = (uint64_t)rand_r(&seed) % KEYS;
		uint64_t hv = hash_mix64(k) % 1500; /* collisions */
		switch (rand_r(&seed) % 3) {
		case 0:
			if (!in[k]) {
				it[k].key = k;
				hash_insert(&h, &it[k].hn, hv);
				in[k] = 1;
				count++;
			}
			break;
		case 1:
			if (in[k]) {
				hash_remove(&h, &it[k].hn);
				in[k] = 0;
				count--;
			}
			break;
		default:
			cr_assert_eq(find(&h, hv, k), in[k] ? &it[k] : NULL,
				     "op %d key %llu", op,
				     (unsigned long long)k);
		}
		cr_assert_eq(hash_count(&h), count);
	}
	for (uint64_t k = 0; k < KEYS; k++)
		cr_assert_eq(find(&h, hash_mix64(k) % 1500, k),
			     in[k] ? &it[k] : NULL);
	cr_assert_eq(walk_count(&h), count);
	hash_release(&h);
	free(in);
	free(it);
}
