/*
 * test_lock.c - the lock scripts of the Redis engine (meta/meta_lock.h,
 * meta/lua/lock_*.lua) against a real redis-server: conflicts by type and
 * range, owners that never conflict with themselves, the split of a range
 * by an unlock and the merge of a re-lock, flock apart from POSIX locks,
 * F_GETLK, the locks of a closed or dead session, a call sent again with
 * its request id applied once, and the liveness rule: a stall of the
 * server takes no lock from a live holder, a holder silent for the TTL
 * while the server ran loses its locks and is told so.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <hiredis/hiredis.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "lib/errors.h"
#include "meta/meta_lock.h"
#include "meta/meta_volume.h"
#include "meta/meta.h"

/* test-only hooks of meta/redis_session.c and meta/redis_lock.c */
void meta_redis_test_kill_session(struct meta *m);
int meta_redis_test_lock_req(struct meta *m, enum meta_lock_kind kind,
			     uint64_t ino, uint64_t owner,
			     const struct meta_lock *lk, uint64_t req);

#define DB_L 14 /* free in tests/unit: see the other test files */

/* A connection of the test's own to the database of lopen. */
static redisContext *raw(void)
{
	const char *u = getenv("GRANARY_TEST_REDIS");
	char path[4096];
	redisContext *c;
	redisReply *r;

	snprintf(path, sizeof path, "%.*s", (int)strcspn(u + 7, "?"), u + 7);
	c = redisConnectUnix(path);
	cr_assert(c && !c->err, "raw connect to %s", path);
	r = redisCommand(c, "SELECT %d", DB_L);
	cr_assert(r && r->type == REDIS_REPLY_STATUS);
	freeReplyObject(r);
	return c;
}

/* A command of words without spaces, printf-formatted. */
static void raw_do(redisContext *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void raw_do(redisContext *c, const char *fmt, ...)
{
	char cmd[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	redisReply *r = redisCommand(c, cmd);
	cr_assert(r && r->type != REDIS_REPLY_ERROR, "%s: %s", cmd,
		  r ? r->str : c->errstr);
	freeReplyObject(r);
}

static long long now_ms(void)
{
	struct timeval tv;
	gettimeofday(&tv, NULL);
	return tv.tv_sec * 1000LL + tv.tv_usec / 1000;
}

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

/* A lock_set sent twice with one request id (a resend after a lost reply)
 * changes the locks once; an older id after a newer one (a stale copy)
 * changes nothing. */
Test(lock, replay_applies_once)
{
	/* h sends the calls by hand; m, another client, looks */
	struct meta *h = lopen(60, 1), *m = lopen(60, 0);
	struct meta_lock a = {.type = WR, .start = 0, .end = 9, .pid = 501};
	struct meta_lock b = a, u = {.type = UN, .start = 5, .end = 9};
	struct meta_lock c;

	cr_assert_eq(meta_redis_test_lock_req(h, P, 7, 1, &a, 100), 0);
	b.pid = 502; /* shows whether the resend was applied */
	cr_assert_eq(meta_redis_test_lock_req(h, P, 7, 1, &b, 100), 0);
	c = get(m, 3, WR, 0, 0);
	cr_assert(c.type == WR && c.pid == 501, "pid %u", c.pid);
	/* the owner unlocks [5, 9]; the lock's copy must not take it back */
	cr_assert_eq(meta_redis_test_lock_req(h, P, 7, 1, &u, 101), 0);
	cr_assert_eq(meta_redis_test_lock_req(h, P, 7, 1, &a, 100), 0);
	cr_assert_eq(set(m, P, 3, WR, 5, 9, NULL), 0, "[5, 9] locked again");
	cr_assert_eq(set(m, P, 3, UN, 0, META_LOCK_EOF, NULL), 0);
	/* a lock after the unlock; the unlock's copy must not drop it */
	a.start = 5;
	cr_assert_eq(meta_redis_test_lock_req(h, P, 7, 1, &a, 102), 0);
	cr_assert_eq(meta_redis_test_lock_req(h, P, 7, 1, &u, 101), 0);
	cr_assert_eq(set(m, P, 3, WR, 7, 7, &c), EAGAIN, "[5, 9] unlocked");
	cr_assert(c.start == 0 && c.end == 9);
	/* an unlock of everything sent twice: nothing left, nothing back */
	u.start = 0;
	u.end = META_LOCK_EOF;
	cr_assert_eq(meta_redis_test_lock_req(h, P, 7, 1, &u, 103), 0);
	cr_assert_eq(meta_redis_test_lock_req(h, P, 7, 1, &u, 103), 0);
	cr_assert_eq(get(m, 3, WR, 0, META_LOCK_EOF).type, UN);
	/* a lock's copy after an unlock that left the owner no field: the
	 * session's floor tells it from a new call */
	cr_assert_eq(meta_redis_test_lock_req(h, F, 7, 1, &a, 104), 0);
	cr_assert_eq(meta_redis_test_lock_req(h, F, 7, 1, &u, 105), 0);
	cr_assert_eq(meta_redis_test_lock_req(h, F, 7, 1, &a, 104), 0);
	cr_assert_eq(set(m, F, 3, WR, 0, 0, NULL), 0, "flock taken back");
	meta_close(h);
	meta_close(m);
}

/* The liveness rule (lib/lock.lua live_floor): a holder that did not
 * renew is dead only when the server ran scripts meanwhile. The session
 * TTL is 60 s, so the heartbeat threads stay out of the way; the test
 * moves the holder's heartbeat and the server's liveness clock back. */
Test(lock, stall_keeps_holder_dead_holder_told)
{
	struct meta *a = lopen(60, 1), *b = lopen(60, 0);
	uint64_t asid = meta_session_id(a);
	redisContext *r = raw();
	struct meta_session *ss;
	struct meta_lock c;
	size_t n;

	cr_assert_eq(set(a, F, 1, WR, 0, 0, NULL), 0);
	/* a stall: no script for 100 s, in which a could not renew */
	raw_do(r, "ZADD sessions %lld %lld", now_ms() / 1000 - 100,
	       (long long)asid);
	raw_do(r, "HSET liveclock t %lld", now_ms() - 100000);
	cr_assert_eq(set(b, F, 2, WR, 0, 0, &c), EAGAIN,
		     "a live holder lost its lock to a server stall");
	cr_assert_eq(c.sid, asid);
	cr_assert_eq(meta_clean_sessions(b, &n), 0);
	cr_assert_eq(n, 0, "a session cleaned up for a server stall");
	cr_assert_eq(meta_list_sessions(b, &ss, &n), 0);
	for (size_t i = 0; i < n; i++)
		cr_expect(!ss[i].stale, "session %lu stale after a stall",
			  (unsigned long)ss[i].sid);
	free(ss);

	/* the server ran (a script 50 ms ago, no stall) while a was silent
	 * for 100 s: a is dead, b gets the lock */
	raw_do(r, "HDEL liveclock s");
	raw_do(r, "HSET liveclock t %lld", now_ms() - 50);
	raw_do(r, "ZADD sessions %lld %lld", now_ms() / 1000 - 100,
	       (long long)asid);
	cr_assert_eq(meta_list_sessions(b, &ss, &n), 0);
	int seen = 0;
	for (size_t i = 0; i < n; i++)
		if (ss[i].sid == asid) {
			cr_expect(ss[i].stale, "a silent session not stale");
			seen = 1;
		}
	cr_assert(seen);
	free(ss);
	cr_assert_eq(set(b, F, 2, WR, 0, 0, NULL), 0,
		     "the lock of a dead holder still counts");
	/* a is told at its next lock call, which renews it, and until it
	 * unlocks the whole file; then it locks as anyone would */
	cr_assert_eq(set(a, F, 1, RD, 0, 0, NULL), META_ELOCKLOST);
	cr_assert_eq(set(a, F, 1, WR, 0, 0, NULL), META_ELOCKLOST);
	cr_assert_eq(set(a, F, 1, UN, 0, 0, NULL), META_ELOCKLOST);
	cr_assert_eq(set(a, F, 1, WR, 0, 0, &c), EAGAIN);
	cr_assert_eq(c.sid, meta_session_id(b));
	/* another owner of a, that held nothing, was not concerned */
	cr_assert_eq(set(a, P, 9, WR, 0, 0, NULL), 0);
	cr_assert_eq(set(a, P, 9, UN, 0, META_LOCK_EOF, NULL), 0);
	redisFree(r);
	meta_close(a);
	meta_close(b);
}
