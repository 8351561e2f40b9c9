/*
 * test_lock.c - the lock scripts of the Redis engine (meta/meta_lock.h,
 * meta/lua/lock_*.lua) against a real redis-server: conflicts by type and
 * range, owners that never conflict with themselves, the split of a range
 * by an unlock and the merge of a re-lock, flock apart from POSIX locks,
 * F_GETLK, and the locks of a closed or dead session.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/errors.h"
#include "meta/meta_lock.h"
#include "meta/meta_volume.h"
#include "meta/meta.h"

/* test-only hook of meta/redis_session.c */
void meta_redis_test_kill_session(struct meta *m);

#define DB_L 14 /* free in tests/unit: see the other test files */

static struct meta *lopen(int ttl, int format)
{
	const char *u = getenv("GRANARY_TEST_REDIS");
	char url[4200];
	struct meta_opts o = {.session_ttl = ttl};
	struct meta *m = NULL;

	if (!u || !*u)
		cr_skip_test("GRANARY_TEST_REDIS unset (no redis to test on)");
	snprintf(url, sizeof url, "unix://%.*s?db=%d", (int)strcspn(u + 7, "?"),
		 u + 7, DB_L);
	cr_assert_eq(meta_open(url, &o, &m), 0, "meta_open %s", url);
	if (format) {
		struct meta_volume v;
		memset(&v, 0, sizeof v);
		snprintf(v.name, sizeof v.name, "locks");
		snprintf(v.storage, sizeof v.storage, "mem://");
		v.block_size = 4 << 20;
		int err = meta_format(m, &v, 1);
		cr_assert_eq(err, 0, "format: %s", gr_strerror(err));
	}
	cr_assert_eq(meta_session_open(m, "/test"), 0);
	return m;
}

static int set(struct meta *m, int kind, uint64_t owner, int type, uint64_t s,
	       uint64_t e, struct meta_lock *c)
{
	struct meta_lock lk = {.type = type,
			       .start = s,
			       .end = e,
			       .pid = (uint32_t)(1000 + owner)};
	return meta_lock_set(m, kind, 7, owner, &lk, c);
}

static struct meta_lock get(struct meta *m, uint64_t owner, int type,
			    uint64_t s, uint64_t e)
{
	struct meta_lock lk = {.type = type, .start = s, .end = e}, c;
	cr_assert_eq(meta_lock_get(m, 7, owner, &lk, &c), 0);
	return c;
}

#define P  META_LOCK_POSIX
#define F  META_LOCK_FLOCK
#define RD META_LOCK_RD
#define WR META_LOCK_WR
#define UN META_LOCK_UN

Test(lock, conflicts_by_type_and_range)
{
	struct meta *m = lopen(60, 1);
	struct meta_lock c;

	cr_assert_eq(set(m, P, 1, WR, 0, 99, NULL), 0);
	cr_assert_eq(set(m, P, 1, RD, 200, 299, NULL), 0);
	cr_assert_eq(set(m, P, 2, WR, 50, 59, &c), EAGAIN);
	cr_assert(c.type == WR && c.start == 0 && c.end == 99 && c.pid == 1001,
		  "conflict %d %lu %lu %u", c.type, (unsigned long)c.start,
		  (unsigned long)c.end, c.pid);
	cr_assert_eq(c.sid, meta_session_id(m));
	cr_assert_eq(set(m, P, 2, WR, 100, 199, NULL), 0); /* touching */
	cr_assert_eq(set(m, P, 2, RD, 250, 260, NULL), 0); /* read-read */
	cr_assert_eq(set(m, P, 3, WR, 299, 299, &c), EAGAIN);
	cr_assert_eq(set(m, P, 3, RD, 0, 0, &c), EAGAIN); /* read-write */
	cr_assert_eq(set(m, P, 3, WR, 300, META_LOCK_EOF, NULL), 0);
	/* ends past the largest one are cut to it: still a conflict */
	cr_assert_eq(set(m, P, 1, RD, 1000, UINT64_MAX, &c), EAGAIN);
	cr_assert_eq(c.end, META_LOCK_EOF);
	/* an owner never conflicts with itself: write over its own read */
	cr_assert_eq(set(m, P, 1, WR, 200, 299, NULL), EAGAIN); /* 2 reads */
	cr_assert_eq(set(m, P, 2, UN, 0, META_LOCK_EOF, NULL), 0);
	cr_assert_eq(set(m, P, 1, WR, 200, 299, NULL), 0);
	c = get(m, 2, RD, 250, 250);
	cr_assert(c.type == WR && c.start == 200 && c.end == 299);
	c = get(m, 1, WR, 0, 299); /* its own locks are no conflict */
	cr_assert_eq(c.type, UN);
	meta_close(m);
}

Test(lock, unlock_splits_relock_merges)
{
	struct meta *m = lopen(60, 1);
	struct meta_lock c;

	cr_assert_eq(set(m, P, 1, WR, 0, 99, NULL), 0);
	cr_assert_eq(set(m, P, 1, UN, 40, 59, NULL), 0);
	cr_assert_eq(set(m, P, 2, WR, 45, 50, NULL), 0);
	c = get(m, 3, WR, 0, META_LOCK_EOF);
	cr_assert(c.start == 0 && c.end == 39, "%lu-%lu",
		  (unsigned long)c.start, (unsigned long)c.end);
	c = get(m, 3, WR, 60, 60);
	cr_assert(c.type == WR && c.start == 60 && c.end == 99);
	cr_assert_eq(set(m, P, 2, UN, 0, META_LOCK_EOF, NULL), 0);
	/* the hole filled again: one range 0..99 */
	cr_assert_eq(set(m, P, 1, WR, 40, 59, NULL), 0);
	c = get(m, 3, RD, 99, 99);
	cr_assert(c.start == 0 && c.end == 99, "%lu-%lu",
		  (unsigned long)c.start, (unsigned long)c.end);
	/* a read lock inside a write one splits it in three by type */
	cr_assert_eq(set(m, P, 1, RD, 10, 19, NULL), 0);
	cr_assert_eq(set(m, P, 3, RD, 12, 15, NULL), 0);
	c = get(m, 3, RD, 0, 99);
	cr_assert(c.type == WR && c.start == 0 && c.end == 9);
	cr_assert_eq(set(m, P, 3, UN, 0, META_LOCK_EOF, NULL), 0);
	cr_assert_eq(set(m, P, 1, UN, 0, META_LOCK_EOF, NULL), 0);
	c = get(m, 3, WR, 0, META_LOCK_EOF);
	cr_assert_eq(c.type, UN);
	meta_close(m);
}

Test(lock, flock_apart_from_posix)
{
	struct meta *m = lopen(60, 1);
	struct meta_lock c;

	cr_assert_eq(set(m, F, 1, WR, 0, 0, NULL), 0);
	cr_assert_eq(set(m, P, 2, WR, 0, 10, NULL), 0); /* other table */
	cr_assert_eq(set(m, F, 2, RD, 0, 0, &c), EAGAIN);
	cr_assert(c.type == WR && c.start == 0 && c.end == META_LOCK_EOF);
	cr_assert_eq(set(m, F, 1, RD, 0, 0, NULL), 0); /* downgrade */
	cr_assert_eq(set(m, F, 2, RD, 0, 0, NULL), 0);
	cr_assert_eq(set(m, F, 2, WR, 0, 0, NULL), EAGAIN);
	cr_assert_eq(set(m, F, 1, UN, 0, 0, NULL), 0);
	cr_assert_eq(set(m, F, 2, WR, 0, 0, NULL), 0); /* upgrade */
	meta_close(m);
}

Test(lock, sessions)
{
	struct meta *a = lopen(1, 1), *b = lopen(1, 0);
	struct meta_lock c;

	/* the same kernel owner number on two clients: two owners */
	cr_assert_eq(set(a, P, 5, WR, 0, 9, NULL), 0);
	cr_assert_eq(set(b, P, 5, WR, 5, 5, &c), EAGAIN);
	cr_assert_eq(c.sid, meta_session_id(a));
	/* a closed session's locks go with it */
	cr_assert_eq(meta_session_close(a), 0);
	cr_assert_eq(set(b, P, 5, WR, 5, 5, NULL), 0);
	cr_assert_eq(meta_session_open(a, "/test"), 0);
	cr_assert_eq(set(a, F, 1, WR, 0, 0, NULL), 0);
	cr_assert_eq(set(b, F, 1, WR, 0, 0, NULL), EAGAIN);
	/* a session silent for its TTL: its locks stop counting */
	meta_redis_test_kill_session(a);
	sleep(3);
	cr_assert_eq(set(b, F, 1, WR, 0, 0, NULL), 0);
	/* its cleanup (b's heartbeat may have run it already) */
	size_t n = 0;
	cr_assert_eq(meta_clean_sessions(b, &n), 0);
	cr_assert_eq(set(b, F, 1, UN, 0, 0, NULL), 0);
	meta_close(a);
	meta_close(b);
}

Test(lock, needs_a_session)
{
	struct meta *m = lopen(60, 1);
	struct meta_lock lk = {.type = WR, .end = 1};
	cr_assert_eq(meta_session_close(m), 0);
	cr_assert_eq(meta_lock_set(m, P, 7, 1, &lk, NULL), EINVAL);
	meta_close(m);
}
