/*
 * test_qgate.c - the client's quota gates (fs/vfs/quota.c over
 * fs/vfs/space.c): a take over a chain takes from every gate or from none,
 * a refusal is EDQUOT, a limit changed or lifted is seen at the next take,
 * and done/drop/changed reach every gate of the chain (the usage each gate
 * reads is a counter of the test's); and, against a real redis-server
 * (GRANARY_TEST_REDIS, database 16), the handle over the volume's quotas:
 * free and empty with none, a quota set or deleted seen at the next tick,
 * chains with their gates, the statfs reading.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/vfs/quota.h"
#include "fs/vfs/space.h"
#include "tests/unit/testvol.h"
#include "meta/meta.h"
#include "meta/meta_volume.h"

#define MiB (1ull << 20)

struct fake {
	uint64_t used;	  /* what the "volume" counts for this quota */
	uint64_t pending; /* last published */
	int trips;
};

static int fake_usage(void *arg, uint64_t pending, uint64_t *used)
{
	struct fake *f = arg;
	f->pending = pending;
	f->trips++;
	*used = f->used;
	return 0;
}

/* a chain of n gates, limits lim[i] (0: an inode-only quota, no gate) */
static void chain_make(struct quota_chain *c, struct fake *f,
		       const uint64_t *lim, size_t n)
{
	memset(c, 0, sizeof(*c));
	c->c.n = n;
	for (size_t i = 0; i < n; i++) {
		c->c.q[i] = 100 + i;
		if (lim[i])
			cr_assert_eq(space_open(lim[i], "test", fake_usage,
						&f[i], &c->gate[i]),
				     0);
	}
}

static void chain_free(struct quota_chain *c)
{
	for (size_t i = 0; i < c->c.n; i++)
		space_free(c->gate[i]);
}

Test(qgate, empty_chain_is_free)
{
	struct quota_chain c;
	memset(&c, 0, sizeof(c));
	cr_assert_eq(quota_take(&c, 1ull << 40), 0);
	quota_done(&c, 1ull << 40);
	quota_drop(&c, 1);
	quota_changed(&c);
	/* and a volume that never had a quota: no handle at all */
	cr_assert_eq(quota_chain_of(NULL, 12, &c), 0);
	cr_assert_eq(c.c.n, 0);
	cr_assert_not(quota_active(NULL));
}

Test(qgate, take_all_or_none)
{
	struct fake f[3] = {{0}, {0}, {0}};
	uint64_t lim[3] = {64 * MiB, 0, 16 * MiB};
	struct quota_chain c;
	chain_make(&c, f, lim, 3);

	cr_assert_eq(quota_take(&c, 10 * MiB), 0);
	/* the outer quota (16 MiB) refuses: the inner one keeps nothing */
	cr_assert_eq(quota_take(&c, 8 * MiB), EDQUOT);
	f[0].used = 0;
	space_changed(c.gate[0]);
	space_changed(c.gate[2]);
	cr_assert_eq(quota_take(&c, 4 * MiB), 0);
	/* both gates published 14 MiB pending: the refused 8 were undone */
	cr_assert_eq(f[0].pending, 10 * MiB);
	cr_assert_eq(f[2].pending, 10 * MiB);
	space_changed(c.gate[0]);
	space_changed(c.gate[2]);
	cr_assert_eq(quota_take(&c, 0), 0);
	cr_assert_eq(quota_take(&c, 1), 0); /* reads again: 14 MiB now */
	cr_assert_eq(f[0].pending, 14 * MiB);
	cr_assert_eq(f[2].pending, 14 * MiB);
	chain_free(&c);
}

Test(qgate, done_drop_and_changed)
{
	struct fake f[2] = {{0}, {0}};
	uint64_t lim[2] = {8 * MiB, 8 * MiB};
	struct quota_chain c;
	chain_make(&c, f, lim, 2);

	cr_assert_eq(quota_take(&c, 6 * MiB), 0);
	quota_drop(&c, 6 * MiB); /* never committed: the room is back */
	cr_assert_eq(quota_take(&c, 8 * MiB), 0);
	quota_done(&c, 8 * MiB); /* committed: the volume counts them */
	f[0].used = f[1].used = 8 * MiB;
	cr_assert_eq(quota_take(&c, 1), EDQUOT);
	/* space freed: seen at once */
	f[0].used = f[1].used = 2 * MiB;
	quota_changed(&c);
	cr_assert_eq(quota_take(&c, 6 * MiB), 0);
	chain_free(&c);
}

Test(qgate, limit_changed_and_lifted)
{
	struct fake f = {0};
	uint64_t lim = 8 * MiB;
	struct quota_chain c;
	chain_make(&c, &f, &lim, 1);

	cr_assert_eq(quota_take(&c, 8 * MiB), 0);
	cr_assert_eq(quota_take(&c, 1 * MiB), EDQUOT);
	space_set_limit(c.gate[0], 16 * MiB);
	int trips = f.trips;
	cr_assert_eq(quota_take(&c, 1 * MiB), 0);
	cr_assert_gt(f.trips, trips, "a new limit reads the usage again");
	space_set_limit(c.gate[0], 0);
	trips = f.trips;
	cr_assert_eq(quota_take(&c, 1ull << 40), 0);
	cr_assert_eq(f.trips, trips, "no limit: no round trip");
	/* set again: the bytes still pending count */
	space_set_limit(c.gate[0], 10 * MiB);
	cr_assert_eq(quota_take(&c, 2 * MiB), EDQUOT);
	cr_assert_eq(quota_take(&c, 1 * MiB), 0);
	chain_free(&c);
}

/* ---- the handle over a volume's quotas (Redis) ----------------------- */

#define DB 16 /* free in tests/unit: see the other test files */

static struct meta *fresh_volume(void)
{
	return testvol_fresh(DB, "qgate", 0);
}

static uint64_t mkdir_in(struct meta *m, uint64_t parent, const char *name)
{
	uint64_t ino = 0;
	cr_assert_eq(meta_mknod(m, parent, name, META_DIR, 0755, 0, 0, 0, NULL,
				&ino, NULL),
		     0);
	return ino;
}

Test(qgate, volume_quotas)
{
	struct meta *m = fresh_volume();
	uint64_t a = mkdir_in(m, META_ROOT_INO, "a");
	uint64_t b = mkdir_in(m, a, "b");
	struct quota *q;
	struct quota_chain c;
	struct meta_quota mq;

	/* none yet: inactive, every chain empty, statfs has nothing */
	cr_assert_eq(quota_open(m, 0, &q), 0);
	cr_assert_not(quota_active(q));
	cr_assert_eq(quota_chain_of(q, b, &c), 0);
	cr_assert_eq(c.c.n, 0);
	cr_assert_eq(quota_statfs(q, a, &mq), ENOENT);

	/* set: seen at the next tick, with a gate */
	cr_assert_eq(meta_quota_set(m, a, 8 * MiB, 10, NULL), 0);
	cr_assert_eq(quota_chain_of(q, b, &c), 0);
	cr_assert_eq(c.c.n, 0, "before the tick, nothing changed");
	quota_tick(q);
	cr_assert(quota_active(q));
	cr_assert_eq(quota_chain_of(q, b, &c), 0);
	cr_assert_eq(c.c.n, 1);
	cr_assert_eq(c.c.q[0], a);
	cr_assert_not_null(c.gate[0]);
	cr_assert_eq(quota_take(&c, 8 * MiB), 0);
	cr_assert_eq(quota_take(&c, 1), EDQUOT);
	quota_drop(&c, 8 * MiB);
	cr_assert_eq(quota_statfs(q, a, &mq), 0);
	cr_assert_eq(mq.max_space, 8 * MiB);
	cr_assert_eq(mq.max_inodes, 10);
	/* b was there before: a new quota's usage starts at 0 (the CLI
	 * counts the tree) */
	cr_assert_eq(mq.used_inodes, 0);
	cr_assert_eq(quota_statfs(q, b, &mq), ENOENT);

	/* a quota nested below: nearest first; inodes only: no gate */
	cr_assert_eq(meta_quota_set(m, b, 0, 5, NULL), 0);
	quota_tick(q);
	cr_assert_eq(quota_chain_of(q, b, &c), 0);
	cr_assert_eq(c.c.n, 2);
	cr_assert_eq(c.c.q[0], b);
	cr_assert_eq(c.c.q[1], a);
	cr_assert_null(c.gate[0]);
	cr_assert_not_null(c.gate[1]);

	/* the outer one deleted: the gate a node may hold limits nothing */
	struct quota_chain held = c;
	cr_assert_eq(meta_quota_delete(m, a), 0);
	quota_tick(q);
	cr_assert_eq(quota_take(&held, 1ull << 40), 0);
	quota_drop(&held, 1ull << 40);
	cr_assert_eq(quota_chain_of(q, b, &c), 0);
	cr_assert_eq(c.c.n, 1);
	cr_assert_eq(c.c.q[0], b);
	cr_assert_eq(quota_statfs(q, a, &mq), ENOENT);

	/* a directory gone: no chain, and the error */
	cr_assert_eq(quota_chain_of(q, 999999, &c), ENOENT);
	cr_assert_eq(c.c.n, 0);
	quota_free(q);
	meta_close(m);
}
