/*
 * test_rendezvous.c - weighted rendezvous hashing (lib/rendezvous.h) over
 * 100,000 keys: each key has one owner, the best scorer; shares follow
 * the weights; a member that joins takes keys only for itself, about its
 * share, and one that leaves gives away only its own, each to the member
 * ranked second; the members' order changes nothing; weight 0 never
 * owns; ties go to the lower id; rdv_rank agrees with rdv_owner on both
 * of its paths (a few copies, and more than its stack holds).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "lib/rendezvous.h"

#define KEYS 100000

/* Keys shaped like the store's block keys. */
static size_t key_of(int i, char *buf, size_t cap)
{
	return (size_t)snprintf(buf, cap, "chunks/%d/%d/%d_0_4194304",
				i / 1000000, i / 1000 % 1000, i);
}

/* Distinct, unordered ids like nodes' cache ids. */
static uint64_t id_of(int i)
{
	return 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1) ^ 0x5bd1e995u;
}

/* The id of key i's owner among m[0..n), 0 for none. */
static uint64_t owner_id(const struct rdv_member *m, size_t n, int i)
{
	char k[64];
	size_t kl = key_of(i, k, sizeof k);
	int o = rdv_owner(m, n, k, kl);
	return o < 0 ? 0 : m[o].id;
}

Test(rendezvous, one_owner_shares_follow_weights)
{
	struct rdv_member m[4];
	size_t count[4] = {0};

	for (int i = 0; i < 4; i++)
		m[i] = (struct rdv_member){id_of(i), (double)(i + 1)};
	for (int i = 0; i < KEYS; i++) {
		char k[64];
		size_t kl = key_of(i, k, sizeof k);
		int o = rdv_owner(m, 4, k, kl);
		cr_assert(o >= 0 && o < 4, "key %d: owner %d", i, o);
		/* the owner is the one best scorer */
		double so = rdv_score(&m[o], k, kl);
		for (int j = 0; j < 4; j++)
			if (j != o)
				cr_assert(rdv_score(&m[j], k, kl) < so,
					  "key %d: %d scores as %d", i, j, o);
		count[o]++;
	}
	/* 10/20/30/40 %, within 5 % of each share */
	for (int i = 0; i < 4; i++) {
		double share = (double)count[i] / KEYS, want = (i + 1) / 10.0;
		cr_expect(fabs(share - want) < want * 0.05,
			  "weight %d owns %.4f, not %.2f", i + 1, share, want);
	}
}

Test(rendezvous, equal_weights_even_shares)
{
	struct rdv_member m[16];
	size_t count[16] = {0};

	for (int i = 0; i < 16; i++)
		m[i] = (struct rdv_member){id_of(i), 3.2e12};
	for (int i = 0; i < KEYS; i++) {
		char k[64];
		size_t kl = key_of(i, k, sizeof k);
		count[rdv_owner(m, 16, k, kl)]++;
	}
	for (int i = 0; i < 16; i++)
		cr_expect(fabs(count[i] * 16.0 / KEYS - 1) < 0.05,
			  "member %d owns %zu of %d", i, count[i], KEYS);
}

/* A member joins: a key moves only to it; about its share moves. */
Test(rendezvous, join_moves_keys_only_to_the_new_member)
{
	struct rdv_member m[5];
	size_t moved = 0;

	for (int i = 0; i < 5; i++)
		m[i] = (struct rdv_member){id_of(i), (double)(i + 1)};
	for (int i = 0; i < KEYS; i++) {
		uint64_t before = owner_id(m, 4, i), after = owner_id(m, 5, i);
		if (before == after)
			continue;
		cr_assert_eq(after, m[4].id, "key %d moved between old members",
			     i);
		moved++;
	}
	/* weight 5 of 15 */
	double share = (double)moved / KEYS;
	cr_expect(fabs(share - 1 / 3.0) < 0.05 / 3, "moved %.4f", share);
}

/* A member leaves: exactly its keys move, each to the member ranked
 * second for it before. */
Test(rendezvous, leave_moves_only_its_keys_to_the_second)
{
	struct rdv_member m[4], rest[3];
	size_t moved = 0, had = 0;

	for (int i = 0; i < 4; i++)
		m[i] = (struct rdv_member){id_of(i), (double)(i + 1)};
	/* the member of weight 3 leaves */
	rest[0] = m[0];
	rest[1] = m[1];
	rest[2] = m[3];
	for (int i = 0; i < KEYS; i++) {
		char k[64];
		size_t kl = key_of(i, k, sizeof k), r[2];
		cr_assert_eq(rdv_rank(m, 4, k, kl, r, 2), 2);
		uint64_t before = m[r[0]].id, after = owner_id(rest, 3, i);
		if (before == m[2].id) {
			had++;
			cr_assert_eq(after, m[r[1]].id, "key %d", i);
		} else {
			cr_assert_eq(after, before, "key %d moved", i);
		}
		moved += after != before;
	}
	cr_assert_eq(moved, had);
	cr_expect(fabs((double)moved / KEYS - 0.3) < 0.015, "moved %zu", moved);
}

Test(rendezvous, order_of_members_changes_nothing)
{
	struct rdv_member m[8], rev[8], rot[8];

	for (int i = 0; i < 8; i++)
		m[i] = (struct rdv_member){id_of(i), (double)(1 + i % 3)};
	for (int i = 0; i < 8; i++) {
		rev[i] = m[7 - i];
		rot[i] = m[(i + 3) % 8];
	}
	for (int i = 0; i < KEYS; i += 7) {
		char k[64];
		size_t kl = key_of(i, k, sizeof k), a[8], b[8], c[8];
		cr_assert_eq(owner_id(m, 8, i), owner_id(rev, 8, i));
		cr_assert_eq(owner_id(m, 8, i), owner_id(rot, 8, i));
		cr_assert_eq(rdv_rank(m, 8, k, kl, a, 8), 8);
		cr_assert_eq(rdv_rank(rev, 8, k, kl, b, 8), 8);
		cr_assert_eq(rdv_rank(rot, 8, k, kl, c, 8), 8);
		for (int j = 0; j < 8; j++) {
			cr_assert_eq(m[a[j]].id, rev[b[j]].id);
			cr_assert_eq(m[a[j]].id, rot[c[j]].id);
		}
	}
}

Test(rendezvous, weight_zero_never_owns)
{
	struct rdv_member m[4] = {
	    {id_of(0), 0}, {id_of(1), 2}, {id_of(2), -1}, {id_of(3), NAN}};
	size_t r[4];

	for (int i = 0; i < 10000; i++) {
		char k[64];
		size_t kl = key_of(i, k, sizeof k);
		cr_assert_eq(rdv_owner(m, 4, k, kl), 1);
		cr_assert_eq(rdv_rank(m, 4, k, kl, r, 4), 1);
		cr_assert_eq(r[0], 1);
		cr_assert_eq(rdv_score(&m[0], k, kl), 0);
	}
	/* nobody with a weight, nobody at all */
	m[1].weight = 0;
	cr_assert_eq(rdv_owner(m, 4, "k", 1), -1);
	cr_assert_eq(rdv_rank(m, 4, "k", 1, r, 4), 0);
	cr_assert_eq(rdv_owner(m, 0, "k", 1), -1);
	cr_assert_eq(rdv_rank(m, 0, "k", 1, r, 4), 0);
	cr_assert_eq(rdv_rank(m, 4, "k", 1, r, 0), 0);
}

/* Equal scores (infinite weights stand for a collision) go to the lower
 * id, whatever the order. */
Test(rendezvous, ties_to_the_lower_id)
{
	struct rdv_member a[3] = {{9, INFINITY}, {3, INFINITY}, {5, 1}};
	struct rdv_member b[3] = {{3, INFINITY}, {9, INFINITY}, {5, 1}};
	size_t r[3];

	cr_assert_eq(a[rdv_owner(a, 3, "x", 1)].id, 3);
	cr_assert_eq(b[rdv_owner(b, 3, "x", 1)].id, 3);
	cr_assert_eq(rdv_rank(a, 3, "x", 1, r, 3), 3);
	cr_assert(a[r[0]].id == 3 && a[r[1]].id == 9 && a[r[2]].id == 5);
}

/* rdv_rank: best first, the first is rdv_owner's, a shorter rank is a
 * prefix of a longer one, on the stack path (k <= 64) and the path in
 * passes (k above it) alike. */
Test(rendezvous, rank_agrees_with_owner)
{
	static struct rdv_member m[100];
	size_t all[100], few[3], top[64];

	for (int i = 0; i < 100; i++)
		m[i] = (struct rdv_member){id_of(i), (double)(1 + i % 7)};
	m[50].weight = 0;
	for (int i = 0; i < 2000; i++) {
		char k[64];
		size_t kl = key_of(i, k, sizeof k);
		cr_assert_eq(rdv_rank(m, 100, k, kl, all, 100), 99);
		cr_assert_eq(rdv_rank(m, 100, k, kl, few, 3), 3);
		cr_assert_eq(rdv_rank(m, 100, k, kl, top, 64), 64);
		cr_assert_eq(all[0], (size_t)rdv_owner(m, 100, k, kl));
		for (int j = 0; j < 99; j++) {
			cr_assert_neq(all[j], 50);
			if (j)
				cr_assert(rdv_score(&m[all[j - 1]], k, kl) >=
					  rdv_score(&m[all[j]], k, kl));
			if (j < 3)
				cr_assert_eq(few[j], all[j]);
			if (j < 64)
				cr_assert_eq(top[j], all[j]);
		}
	}
}
