/*
 * test_group_meta.c - cache groups in the metadata (meta/meta_group.h,
 * meta/lua/group_*.lua) against a real redis-server: join, list, leave;
 * one node held by two live sessions (EEXIST), a dead holder replaced;
 * the members of a dead session dropped from the listing at once and
 * their records by its cleanup (by the TTL, by the liveness rule, by
 * unmount, by fsck's repair after a cleanup that knew no groups); a
 * stall of the server drops no live member; the group secret made once,
 * the same for callers at once; names, nodes, addresses and weights
 * checked.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "gc/fsck.h"
#include "lib/errors.h"
#include "meta/meta_fsck.h"
#include "meta/meta_group.h"
#include "meta/meta_volume.h"
#include "meta/meta.h"

/* test-only hook of meta/redis_session.c */
void meta_redis_test_kill_session(struct meta *m);

#define DB	 17 /* each test wipes it with format --force */
#define BIG_NODE 0xfedcba9876543210ull /* above 2^53: no Lua number */

/* A connection of the test's own to the database DB. */
static redisContext *raw(void)
{
	const char *u = getenv("GRANARY_TEST_REDIS");
	char path[4096];
	redisContext *c;
	redisReply *r;

	snprintf(path, sizeof path, "%.*s", (int)strcspn(u + 7, "?"), u + 7);
	c = redisConnectUnix(path);
	cr_assert(c && !c->err, "raw connect to %s", path);
	r = redisCommand(c, "SELECT %d", DB);
	cr_assert(r && r->type == REDIS_REPLY_STATUS);
	freeReplyObject(r);
	return c;
}

/* A command of words without spaces, printf-formatted; its reply. */
static redisReply *raw_cmd(redisContext *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static redisReply *raw_cmd(redisContext *c, const char *fmt, ...)
{
	char cmd[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	redisReply *r = redisCommand(c, cmd);
	cr_assert(r && r->type != REDIS_REPLY_ERROR, "%s: %s", cmd,
		  r ? r->str : c->errstr);
	return r;
}

#define raw_do(c, ...) freeReplyObject(raw_cmd(c, __VA_ARGS__))

/* The integer reply of a command. */
static long long raw_int(redisContext *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static long long raw_int(redisContext *c, const char *fmt, ...)
{
	char cmd[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	redisReply *r = raw_cmd(c, "%s", cmd);
	cr_assert_eq(r->type, REDIS_REPLY_INTEGER, "%s", cmd);
	long long v = r->integer;
	freeReplyObject(r);
	return v;
}

static long long now_ms(void)
{
	struct timeval tv;
	gettimeofday(&tv, NULL);
	return tv.tv_sec * 1000LL + tv.tv_usec / 1000;
}

/* A handle with a session of the given TTL, on a fresh volume if
 * format. */
static struct meta *gopen(int ttl, int format)
{
	const char *u = getenv("GRANARY_TEST_REDIS");
	char url[4200];
	struct meta_opts o = {.session_ttl = ttl};
	struct meta *m = NULL;

	if (!u || !*u)
		cr_skip_test("GRANARY_TEST_REDIS unset (no redis to test on)");
	snprintf(url, sizeof url, "unix://%.*s?db=%d", (int)strcspn(u + 7, "?"),
		 u + 7, DB);
	cr_assert_eq(meta_open(url, &o, &m), 0, "meta_open %s", url);
	if (format) {
		struct meta_volume v;
		memset(&v, 0, sizeof v);
		snprintf(v.name, sizeof v.name, "groups");
		snprintf(v.storage, sizeof v.storage, "mem://");
		int err = meta_format(m, &v, 1);
		cr_assert_eq(err, 0, "format: %s", gr_strerror(err));
	}
	cr_assert_eq(meta_session_open(m, "/test"), 0);
	return m;
}

static int join(struct meta *m, const char *g, uint64_t node, const char *addr,
		uint64_t weight)
{
	struct meta_group_member self = {.node = node, .weight = weight};
	snprintf(self.addr, sizeof self.addr, "%s", addr);
	return meta_group_join(m, g, &self);
}

/* The nodes listed in g, as "n1 n2 ..." (sorted by the API). */
static void listed(struct meta *m, const char *g, char *buf, size_t cap)
{
	struct meta_group_member *v;
	size_t n, len = 0;

	cr_assert_eq(meta_group_members(m, g, &v, &n), 0);
	buf[0] = '\0';
	for (size_t i = 0; i < n; i++)
		len += (size_t)snprintf(buf + len, cap - len, "%s%llu",
					i ? " " : "",
					(unsigned long long)v[i].node);
	free(v);
}

#define cr_assert_listed(m, g, want)                                           \
	do {                                                                   \
		char got_[256];                                                \
		listed(m, g, got_, sizeof got_);                               \
		cr_assert_str_eq(got_, want, "members of %s", g);              \
	} while (0)

Test(group_meta, join_list_leave)
{
	struct meta *a = gopen(60, 1), *b = gopen(60, 0);
	struct meta_group_member *v;
	redisContext *r = raw();
	char **names;
	size_t n;
	long long t0 = now_ms() / 1000;

	cr_assert_eq(meta_group_names(a, &names, &n), 0);
	cr_assert_eq(n, 0);
	cr_assert_null(names);
	cr_assert_eq(join(a, "train", BIG_NODE, "10.0.0.1:7070", 3200ull << 30),
		     0);
	cr_assert_eq(join(b, "train", 7, "[fd00::2]:7070", 1ull << 40), 0);
	cr_assert_eq(join(b, "eval.v2", 8, "", 0), 0); /* a taker only */

	cr_assert_eq(meta_group_members(b, "train", &v, &n), 0);
	cr_assert_eq(n, 2);
	cr_assert_eq(v[0].node, 7);
	cr_assert_eq(v[0].sid, meta_session_id(b));
	cr_assert_str_eq(v[0].addr, "[fd00::2]:7070");
	cr_assert_eq(v[0].weight, 1ull << 40);
	cr_assert_eq(v[1].node, BIG_NODE, "a node id above 2^53 kept whole");
	cr_assert_eq(v[1].sid, meta_session_id(a));
	cr_assert_str_eq(v[1].addr, "10.0.0.1:7070");
	cr_assert_eq(v[1].weight, 3200ull << 30);
	for (int i = 0; i < 2; i++) {
		cr_assert(v[i].joined >= t0 - 5 && v[i].joined <= t0 + 60,
			  "joined %lld", (long long)v[i].joined);
		cr_assert(v[i].heartbeat >= t0 - 5 && v[i].heartbeat <= t0 + 60,
			  "heartbeat %lld", (long long)v[i].heartbeat);
	}
	free(v);
	cr_assert_listed(a, "eval.v2", "8");
	cr_assert_listed(a, "nothing", "");
	cr_assert_eq(meta_group_names(a, &names, &n), 0);
	cr_assert_eq(n, 2);
	cr_assert_str_eq(names[0], "eval.v2");
	cr_assert_str_eq(names[1], "train");
	meta_group_names_free(names, n);

	/* a leaves; leaving what another session holds changes nothing */
	cr_assert_eq(meta_group_leave(a, "train", BIG_NODE), 0);
	cr_assert_eq(meta_group_leave(a, "train", 7), 0);
	cr_assert_eq(meta_group_leave(a, "train", 12345), 0);
	cr_assert_listed(a, "train", "7");
	cr_assert_eq(meta_group_leave(b, "train", 7), 0);
	cr_assert_eq(meta_group_leave(b, "eval.v2", 8), 0);
	cr_assert_listed(a, "train", "");
	cr_assert_eq(meta_group_names(a, &names, &n), 0);
	cr_assert_eq(n, 0);
	/* nothing left behind */
	cr_assert_eq(raw_int(r,
			     "EXISTS cgtrain cgeval.v2 cgroups sg%llu sg%llu",
			     (unsigned long long)meta_session_id(a),
			     (unsigned long long)meta_session_id(b)),
		     0);
	redisFree(r);
	meta_close(a);
	meta_close(b);
}

/* The same node under two live sessions (one cache mounted twice):
 * EEXIST; its own session joins again (a new address); unmount drops
 * the record, and the other takes the node. */
Test(group_meta, node_held_by_one_live_session)
{
	struct meta *a = gopen(60, 1), *b = gopen(60, 0);
	struct meta_group_member *v;
	redisContext *r = raw();
	size_t n;

	cr_assert_eq(join(a, "g", 5, "127.0.0.1:1", 10), 0);
	cr_assert_eq(join(b, "g", 5, "127.0.0.2:1", 10), EEXIST);
	cr_assert_eq(join(a, "g", 5, "127.0.0.1:2", 20), 0);
	cr_assert_eq(meta_group_members(b, "g", &v, &n), 0);
	cr_assert_eq(n, 1);
	cr_assert_str_eq(v[0].addr, "127.0.0.1:2");
	cr_assert_eq(v[0].weight, 20);
	cr_assert_eq(v[0].sid, meta_session_id(a));
	free(v);
	/* unmount: the session's end takes its records */
	uint64_t asid = meta_session_id(a);
	cr_assert_eq(meta_session_close(a), 0);
	cr_assert_listed(b, "g", "");
	cr_assert_eq(
	    raw_int(r, "EXISTS cgg cgroups sg%llu", (unsigned long long)asid),
	    0);
	cr_assert_eq(join(b, "g", 5, "127.0.0.2:1", 10), 0);
	cr_assert_listed(a, "g", "5");
	redisFree(r);
	meta_close(a);
	meta_close(b);
}

/* A crashed member (its heartbeat stopped) with a TTL of 1 s: out of the
 * listing, its node free to take, its record gone with the cleanup of
 * its session (the other client's heartbeat, or meta_clean_sessions). */
Test(group_meta, dead_session_dropped_and_cleaned)
{
	struct meta *a = gopen(1, 1), *b = gopen(1, 0);
	redisContext *r = raw();
	size_t n;

	cr_assert_eq(join(a, "g", 5, "127.0.0.1:1", 10), 0);
	cr_assert_eq(join(a, "g", 6, "127.0.0.1:1", 10), 0);
	cr_assert_eq(join(b, "g", 9, "127.0.0.2:1", 10), 0);
	uint64_t asid = meta_session_id(a);
	cr_assert_listed(b, "g", "5 6 9");
	meta_redis_test_kill_session(a);
	sleep(3);
	cr_assert_listed(b, "g", "9");
	cr_assert_eq(join(b, "g", 5, "127.0.0.2:1", 10), 0);
	cr_assert_eq(meta_clean_sessions(b, &n), 0);
	cr_assert_eq(raw_int(r, "HEXISTS cgg 6"), 0);
	cr_assert_eq(raw_int(r, "EXISTS sg%llu", (unsigned long long)asid), 0);
	cr_assert_eq(raw_int(r, "HLEN cgg"), 2);
	cr_assert_listed(b, "g", "5 9");
	redisFree(r);
	meta_close(a);
	meta_close(b);
}

/* The liveness rule (lib/live.lua), with a TTL of 60 s so that the
 * heartbeat threads stay out of the way; the test moves a's heartbeat
 * and the liveness clock back. A stall of the server longer than the TTL
 * drops no member; a member silent for the TTL while the server ran is
 * dropped, its node taken by another session (the dead holder's record
 * replaced) or its record removed by the cleanup. */
Test(group_meta, stall_keeps_members_silence_drops_them)
{
	struct meta *a = gopen(60, 1), *b = gopen(60, 0);
	uint64_t asid = meta_session_id(a);
	redisContext *r = raw();
	size_t n;

	cr_assert_eq(join(a, "g", 5, "127.0.0.1:1", 10), 0);
	cr_assert_eq(join(a, "g", 6, "127.0.0.1:1", 10), 0);
	meta_redis_test_kill_session(a); /* no heartbeat from here */
	/* a stall: no script for 100 s, in which a could not renew */
	raw_do(r, "ZADD sessions %lld %llu", now_ms() / 1000 - 100,
	       (unsigned long long)asid);
	raw_do(r, "HSET liveclock t %lld", now_ms() - 100000);
	cr_assert_listed(b, "g", "5 6");
	cr_assert_eq(join(b, "g", 5, "127.0.0.2:1", 10), EEXIST);
	cr_assert_eq(meta_clean_sessions(b, &n), 0);
	cr_assert_eq(n, 0, "a session cleaned up for a server stall");
	cr_assert_listed(b, "g", "5 6");

	/* the server ran (a script 50 ms ago, no stall) while a was silent
	 * for 100 s: a is dead */
	raw_do(r, "HDEL liveclock s");
	raw_do(r, "HSET liveclock t %lld", now_ms() - 50);
	raw_do(r, "ZADD sessions %lld %llu", now_ms() / 1000 - 100,
	       (unsigned long long)asid);
	cr_assert_listed(b, "g", "");
	cr_assert_eq(join(b, "g", 5, "127.0.0.2:1", 10), 0,
		     "the node of a dead holder is still held");
	cr_assert_eq(
	    raw_int(r, "SISMEMBER sg%llu 5:g", (unsigned long long)asid), 0,
	    "the replaced record still in the dead session's set");
	cr_assert_listed(b, "g", "5");
	cr_assert_eq(raw_int(r, "HEXISTS cgg 6"), 1, "left to the cleanup");
	cr_assert_eq(meta_clean_sessions(b, &n), 0);
	cr_assert_eq(n, 1);
	cr_assert_eq(raw_int(r, "HEXISTS cgg 6"), 0);
	cr_assert_eq(raw_int(r, "EXISTS sg%llu", (unsigned long long)asid), 0);
	cr_assert_listed(b, "g", "5");
	redisFree(r);
	meta_close(a);
	meta_close(b);
}

/* What fsck reported of session sid. */
struct found {
	uint64_t sid;
	int n, fixed;
};

static void on_problem(void *arg, const struct fsck_problem *p)
{
	struct found *f = arg;
	if (p->kind == FSCK_SESSION && p->id == f->sid) {
		f->n++;
		f->fixed += p->fix == FSCK_FIX_DONE;
	}
}

/* A session cleaned up by a client that knew no groups leaves records:
 * never listed, found by fsck (its walk of session ids) and removed by
 * its repair. */
Test(group_meta, fsck_removes_records_of_gone_sessions)
{
	struct meta *a = gopen(60, 1), *b = gopen(60, 0);
	uint64_t asid = meta_session_id(a);
	redisContext *r = raw();
	struct fsck_report rep;
	struct found f = {asid, 0, 0};
	struct fsck_opts o = {
	    .block_size = 4 << 20, .problem = on_problem, .problem_arg = &f};

	cr_assert_eq(join(a, "g", 5, "127.0.0.1:1", 10), 0);
	cr_assert_eq(join(a, "h", 6, "127.0.0.1:1", 10), 0);
	cr_assert_eq(join(b, "h", 7, "127.0.0.2:1", 10), 0);
	meta_redis_test_kill_session(a);
	/* what an older cleanup did: the session and its set went */
	raw_do(r, "ZREM sessions %llu", (unsigned long long)asid);
	raw_do(r, "DEL sg%llu", (unsigned long long)asid);
	cr_assert_listed(b, "g", "");
	cr_assert_listed(b, "h", "7");

	cr_assert_eq(fsck_run(b, NULL, &o, &rep), 0);
	cr_assert_eq(f.n, 1, "fsck saw session %llu %d times",
		     (unsigned long long)asid, f.n);
	cr_assert_eq(f.fixed, 0);
	o.repair = 1;
	f.n = 0;
	cr_assert_eq(fsck_run(b, NULL, &o, &rep), 0);
	cr_assert_eq(f.fixed, 1);
	cr_assert_eq(raw_int(r, "EXISTS cgg"), 0);
	cr_assert_eq(raw_int(r, "HLEN cgh"), 1);
	cr_assert_eq(raw_int(r, "SISMEMBER cgroups g"), 0);
	cr_assert_listed(b, "h", "7");
	/* the live member's is no problem; a repair of a session alive
	 * again is refused */
	cr_assert_eq(meta_fsck_fix_session(b, meta_session_id(b)), EAGAIN);
	f.n = 0;
	cr_assert_eq(fsck_run(b, NULL, &o, &rep), 0);
	cr_assert_eq(rep.problems, 0);
	redisFree(r);
	meta_close(a);
	meta_close(b);
}

/* A member whose session was cleaned away (its heartbeat will register
 * it again) joins: the session is registered again first, and the
 * record counts. */
Test(group_meta, join_renews_a_session_cleaned_away)
{
	struct meta *a = gopen(60, 1);
	uint64_t asid = meta_session_id(a);
	redisContext *r = raw();

	raw_do(r, "ZREM sessions %llu", (unsigned long long)asid);
	cr_assert_eq(join(a, "g", 5, "127.0.0.1:1", 10), 0);
	cr_assert_eq(meta_session_id(a), asid);
	cr_assert_eq(
	    raw_int(r, "ZRANK sessions %llu", (unsigned long long)asid), 0,
	    "registered again");
	cr_assert_listed(a, "g", "5");
	redisFree(r);
	meta_close(a);
}

Test(group_meta, names_and_arguments_checked)
{
	struct meta *a = gopen(60, 1);
	struct meta_group_member *v, self = {.node = 1};
	char name[80];
	size_t n;

	memset(name, 'x', sizeof name);
	name[64] = '\0';
	cr_assert_eq(join(a, name, 1, "h:1", 1), 0, "64 characters");
	cr_assert_listed(a, name, "1");
	name[64] = 'x';
	name[65] = '\0';
	cr_assert_eq(join(a, name, 1, "h:1", 1), EINVAL, "65 characters");
	cr_assert_eq(meta_group_members(a, name, &v, &n), EINVAL);
	cr_assert_eq(meta_group_leave(a, name, 1), EINVAL);
	static const char *bad[] = {"", "a b", "a:b", "a/b", "é", "a\n"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		cr_assert_eq(join(a, bad[i], 1, "h:1", 1), EINVAL, "'%s'",
			     bad[i]);
		cr_assert_eq(meta_group_members(a, bad[i], &v, &n), EINVAL);
		cr_assert_eq(meta_group_leave(a, bad[i], 1), EINVAL);
	}
	cr_assert_eq(meta_group_join(a, NULL, &self), EINVAL);
	cr_assert_eq(join(a, "A-Z.a_z-09", 1, "h:1", 1), 0);
	/* node 0, a weight Lua cannot hold, an address without its NUL */
	cr_assert_eq(join(a, "g", 0, "h:1", 1), EINVAL);
	cr_assert_eq(join(a, "g", 1, "h:1", (1ull << 53) + 1), EINVAL);
	memset(self.addr, 'a', sizeof self.addr);
	cr_assert_eq(meta_group_join(a, "g", &self), EINVAL);
	/* no session: no join; a leave holds nothing to drop */
	cr_assert_eq(meta_session_close(a), 0);
	cr_assert_eq(join(a, "g", 1, "h:1", 1), EINVAL);
	cr_assert_eq(meta_group_leave(a, "g", 1), 0);
	meta_close(a);
}

/* ---- the secret ------------------------------------------------------- */

struct secret_call {
	struct meta *m;
	pthread_barrier_t *go;
	unsigned char key[META_GROUP_SECRET];
	int err;
};

static void *secret_thread(void *arg)
{
	struct secret_call *c = arg;
	pthread_barrier_wait(c->go);
	c->err = meta_group_secret(c->m, c->key);
	return NULL;
}

/* Made once: callers at once get the same, later callers too; kept in
 * the settings as 64 hex digits. */
Test(group_meta, secret_made_once)
{
	enum { CALLERS = 6, ROUNDS = 5 };
	struct secret_call c[CALLERS];
	pthread_t t[CALLERS];
	pthread_barrier_t go;
	redisContext *r = raw();

	for (int i = 0; i < CALLERS; i++)
		c[i].m = gopen(60, i == 0);
	for (int round = 0; round < ROUNDS; round++) {
		if (round) {
			raw_do(r, "HDEL setting group_secret");
		}
		pthread_barrier_init(&go, NULL, CALLERS);
		for (int i = 0; i < CALLERS; i++) {
			c[i].go = &go;
			pthread_create(&t[i], NULL, secret_thread, &c[i]);
		}
		for (int i = 0; i < CALLERS; i++)
			pthread_join(t[i], NULL);
		pthread_barrier_destroy(&go);
		for (int i = 0; i < CALLERS; i++) {
			cr_assert_eq(c[i].err, 0);
			cr_assert_eq(
			    memcmp(c[i].key, c[0].key, META_GROUP_SECRET), 0,
			    "round %d: caller %d got another", round, i);
		}
		/* as the settings hold it */
		redisReply *v = raw_cmd(r, "HGET setting group_secret");
		char hex[2 * META_GROUP_SECRET + 1];
		for (int i = 0; i < META_GROUP_SECRET; i++)
			snprintf(hex + 2 * i, 3, "%02x", c[0].key[i]);
		cr_assert_eq(v->type, REDIS_REPLY_STRING);
		cr_assert_str_eq(v->str, hex);
		freeReplyObject(v);
		/* and later */
		unsigned char again[META_GROUP_SECRET];
		cr_assert_eq(meta_group_secret(c[1].m, again), 0);
		cr_assert_eq(memcmp(again, c[0].key, sizeof again), 0);
	}
	/* random, not a constant: a new volume has another */
	unsigned char first[META_GROUP_SECRET], other[META_GROUP_SECRET];
	memcpy(first, c[0].key, sizeof first);
	for (int i = 0; i < CALLERS; i++)
		meta_close(c[i].m);
	struct meta *m = gopen(60, 1);
	cr_assert_eq(meta_group_secret(m, other), 0);
	cr_assert_neq(memcmp(first, other, sizeof first), 0);
	/* no volume, no secret (none made in an empty database) */
	raw_do(r, "FLUSHDB");
	cr_assert_eq(meta_group_secret(m, other), ENODEV);
	cr_assert_eq(raw_int(r, "DBSIZE"), 0);
	redisFree(r);
	meta_close(m);
}
