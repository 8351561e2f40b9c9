/*
 * test_quota.c - the quota API of the Redis engine (meta/meta_quota.h)
 * against a real redis-server (GRANARY_TEST_REDIS): set, get, list,
 * delete, adjust, the chain of a directory, the generation, the gate's
 * round trip (pending bytes per session), and the data calls charging
 * the chain of the file's directory (the chain a client sends only for a
 * file from before the parent field). The namespace's accounting is in
 * test_quota_ns.c.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdarg.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "lib/errors.h"
#include "meta/meta.h"
#include "meta/meta_quota.h"
#include "meta/meta_snap.h"
#include "meta/meta_volume.h"
#include "tests/unit/testvol.h"

#define DB 61 /* each test wipes it with format --force */

/* A handle on the test database, a fresh volume when format. */
static struct meta *open_db(int format)
{
	return format ? testvol_fresh(DB, "quota", 0) : testvol_open(DB);
}

static uint64_t mk(struct meta *m, uint64_t parent, const char *name,
		   uint8_t type)
{
	uint64_t ino = 0;
	int err = meta_mknod(
	    m, parent, name, type, type == META_DIR ? 0755 : 0644, 0, 0, 0,
	    type == META_SYMLINK ? "target" : NULL, &ino, NULL);
	cr_assert_eq(err, 0, "mknod %s: %s", name, gr_strerror(err));
	return ino;
}

static void write_at(struct meta *m, const struct meta_qchain *c, uint64_t ino,
		     uint32_t pos, uint32_t len)
{
	struct meta_chunk_slice s = {0};
	uint64_t id;

	cr_assert_eq(meta_new_slice_id(m, &id), 0);
	s.s =
	    (struct meta_slice){.id = id, .size = len, .len = len, .pos = pos};
	cr_assert_eq(meta_write_q(m, c, ino, &s, 1, NULL), 0);
}

static struct meta_quota get(struct meta *m, uint64_t ino)
{
	struct meta_quota q;
	int err = meta_quota_get(m, ino, &q);
	cr_assert_eq(err, 0, "quota of %llu: %s", (unsigned long long)ino,
		     gr_strerror(err));
	return q;
}

static uint64_t gen(struct meta *m)
{
	uint64_t g;
	cr_assert_eq(meta_quota_gen(m, &g), 0);
	return g;
}

Test(quota, set_get_list_delete)
{
	struct meta *m = open_db(1);
	uint64_t a = mk(m, META_ROOT_INO, "a", META_DIR);
	uint64_t b = mk(m, META_ROOT_INO, "b", META_DIR);
	uint64_t f = mk(m, META_ROOT_INO, "f", META_FILE);
	struct meta_quota q, *l;
	size_t n;
	int created = -1;

	cr_assert_eq(gen(m), 0);
	cr_assert_eq(meta_quota_get(m, a, &q), ENOENT);
	cr_assert_eq(meta_quota_list(m, &l, &n), 0);
	cr_assert_eq(n, 0);
	cr_assert_null(l);

	int err = meta_quota_set(m, a, 1 << 20, 100, &created);
	cr_assert_eq(err, 0, "%s", gr_strerror(err));
	cr_assert_eq(created, 1);
	uint64_t g1 = gen(m);
	cr_assert_gt(g1, 0);
	q = get(m, a);
	cr_assert_eq(q.ino, a);
	cr_assert_eq(q.max_space, 1 << 20);
	cr_assert_eq(q.max_inodes, 100);
	cr_assert_eq(q.used_space, 0);
	cr_assert_eq(q.used_inodes, 0);

	/* changing the limits keeps the usage; the same limits change
	 * nothing, not even the generation */
	cr_assert_eq(meta_quota_adjust(m, a, 4096, 3), 0);
	cr_assert_eq(meta_quota_set(m, a, 2 << 20, 0, &created), 0);
	cr_assert_eq(created, 0);
	q = get(m, a);
	cr_assert_eq(q.max_space, 2 << 20);
	cr_assert_eq(q.max_inodes, 0);
	cr_assert_eq(q.used_space, 4096);
	cr_assert_eq(q.used_inodes, 3);
	uint64_t g2 = gen(m);
	cr_assert_gt(g2, g1);
	cr_assert_eq(meta_quota_set(m, a, 2 << 20, 0, NULL), 0);
	cr_assert_eq(gen(m), g2);

	cr_assert_eq(meta_quota_set(m, b, 0, 7, NULL), 0);
	cr_assert_eq(meta_quota_list(m, &l, &n), 0);
	cr_assert_eq(n, 2);
	cr_assert_eq(l[0].ino, a); /* by inode */
	cr_assert_eq(l[1].ino, b);
	cr_assert_eq(l[1].max_inodes, 7);
	free(l);

	/* the usage reads 0, never below */
	cr_assert_eq(meta_quota_adjust(m, b, -5, -5), 0);
	q = get(m, b);
	cr_assert_eq(q.used_space, 0);
	cr_assert_eq(q.used_inodes, 0);

	cr_assert_eq(meta_quota_delete(m, a), 0);
	cr_assert_gt(gen(m), g2);
	cr_assert_eq(meta_quota_get(m, a, &q), ENOENT);
	cr_assert_eq(meta_quota_delete(m, a), ENOENT);
	cr_assert_eq(meta_quota_adjust(m, a, 1, 1), ENOENT);
	/* set again: a fresh usage */
	cr_assert_eq(meta_quota_set(m, a, 0, 10, &created), 0);
	cr_assert_eq(created, 1);
	cr_assert_eq(get(m, a).used_inodes, 0);

	/* what cannot have a quota */
	cr_assert_eq(meta_quota_set(m, META_ROOT_INO, 1, 1, NULL), EINVAL);
	cr_assert_eq(meta_quota_set(m, f, 1, 1, NULL), ENOTDIR);
	cr_assert_eq(meta_quota_set(m, 999999, 1, 1, NULL), ENOENT);
	cr_assert_eq(meta_quota_set(m, a, UINT64_C(1) << 60, 1, NULL), EINVAL);
	meta_close(m);
}

Test(quota, chain_and_nesting)
{
	struct meta *m = open_db(1);
	struct meta_qchain c;
	uint64_t d[10];

	d[0] = META_ROOT_INO;
	for (int i = 1; i < 10; i++) {
		char name[16];
		snprintf(name, sizeof name, "d%u", (unsigned)i % 10);
		d[i] = mk(m, d[i - 1], name, META_DIR);
	}
	cr_assert_eq(meta_quota_chain(m, d[9], &c), 0);
	cr_assert_eq(c.n, 0);
	cr_assert_eq(meta_quota_set(m, d[2], 0, 100, NULL), 0);
	cr_assert_eq(meta_quota_set(m, d[5], 0, 100, NULL), 0);
	cr_assert_eq(meta_quota_chain(m, d[9], &c), 0);
	cr_assert_eq(c.n, 2);
	cr_assert_eq(c.q[0], d[5]); /* nearest first */
	cr_assert_eq(c.q[1], d[2]);
	cr_assert_eq(meta_quota_chain(m, d[5], &c), 0);
	cr_assert_eq(c.n, 2);
	cr_assert_eq(c.q[0], d[5]);
	cr_assert_eq(meta_quota_chain(m, d[4], &c), 0);
	cr_assert_eq(c.n, 1);
	cr_assert_eq(c.q[0], d[2]);
	cr_assert_eq(meta_quota_chain(m, d[1], &c), 0);
	cr_assert_eq(c.n, 0);
	uint64_t f = mk(m, d[9], "f", META_FILE);
	cr_assert_eq(meta_quota_chain(m, f, &c), ENOTDIR);
	cr_assert_eq(meta_quota_chain(m, 999999, &c), ENOENT);

	/* at most META_QUOTA_NEST above any directory: set from the top
	 * down and from the bottom up, the ninth is refused either way */
	uint64_t e[META_QUOTA_NEST + 2];
	e[0] = mk(m, META_ROOT_INO, "deep", META_DIR);
	for (int i = 1; i < META_QUOTA_NEST + 2; i++)
		e[i] = mk(m, e[i - 1], "x", META_DIR);
	for (int i = 1; i <= META_QUOTA_NEST; i++)
		cr_assert_eq(meta_quota_set(m, e[i], 0, 1000, NULL), 0);
	cr_assert_eq(meta_quota_set(m, e[META_QUOTA_NEST + 1], 0, 1, NULL),
		     EMLINK);
	cr_assert_eq(meta_quota_set(m, e[0], 0, 1, NULL), EMLINK);
	cr_assert_eq(meta_quota_chain(m, e[META_QUOTA_NEST + 1], &c), 0);
	cr_assert_eq(c.n, META_QUOTA_NEST);
	meta_close(m);
}

/* A raw command on the test database; the reply's integer (0 else). */
static long long raw(const char *fmt, ...)
{
	redisContext *c = redisConnectUnix(testvol_sock());
	va_list ap;

	cr_assert(c && !c->err);
	freeReplyObject(redisCommand(c, "SELECT %d", DB));
	va_start(ap, fmt);
	redisReply *r = redisvCommand(c, fmt, ap);
	va_end(ap);
	cr_assert(r);
	long long v = r->type == REDIS_REPLY_INTEGER ? r->integer : 0;
	freeReplyObject(r);
	redisFree(c);
	return v;
}

/* write, truncate, fallocate and clone charge the chain of the file's
 * directory by the stored bytes' change, whatever chain the client sends
 * (its parent hint may be stale); a file with no name left charges none */
Test(quota, data_calls_charge_the_files_chain)
{
	struct meta *m = open_db(1);
	uint64_t top = mk(m, META_ROOT_INO, "top", META_DIR);
	uint64_t sub = mk(m, top, "sub", META_DIR);
	struct meta_qchain c, none = {0}, other;
	struct meta_attr a;

	cr_assert_eq(meta_quota_set(m, top, 1 << 30, 0, NULL), 0);
	cr_assert_eq(meta_quota_set(m, sub, 1 << 30, 0, NULL), 0);
	cr_assert_eq(meta_quota_chain(m, sub, &c), 0);
	cr_assert_eq(c.n, 2);
	cr_assert_eq(meta_quota_chain(m, top, &other), 0);
	uint64_t f = mk(m, sub, "f", META_FILE);

	write_at(m, &c, f, 0, 100000);
	cr_assert_eq(get(m, sub).used_space, 100000);
	cr_assert_eq(get(m, top).used_space, 100000);
	/* an overwrite counts again up to the length: no change here */
	write_at(m, &c, f, 0, 50000);
	cr_assert_eq(get(m, sub).used_space, 100000);
	/* told nothing, or another chain: charged where the file is */
	write_at(m, &none, f, 100000, 1000);
	write_at(m, NULL, f, 101000, 1000);
	write_at(m, &other, f, 102000, 1000);
	cr_assert_eq(get(m, sub).used_space, 103000);
	cr_assert_eq(get(m, top).used_space, 103000);

	cr_assert_eq(meta_truncate_q(m, &other, f, 30000, &a), 0);
	/* stored went 103000 -> 30000 */
	cr_assert_eq(get(m, sub).used_space, 30000);
	cr_assert_eq(get(m, top).used_space, 30000);

	cr_assert_eq(meta_fallocate_q(m, NULL, f, 0, 30000, 20000, &a), 0);
	cr_assert_eq(a.length, 50000);
	cr_assert_eq(get(m, sub).used_space, 50000);
	cr_assert_eq(get(m, top).used_space, 50000);

	uint64_t g = mk(m, sub, "g", META_FILE);
	cr_assert_eq(meta_clone_data_q(m, &none, f, g, &a), 0);
	cr_assert_eq(get(m, sub).used_space, 50000 + 50000);
	cr_assert_eq(get(m, top).used_space, 50000 + 50000);

	/* a file from before the parent field (made by an older client):
	 * the chain the client sends, as it was */
	uint64_t h = mk(m, sub, "h", META_FILE);
	cr_assert_eq(raw("HDEL n%llu %llu", (unsigned long long)h / 32,
			 (unsigned long long)(64 + h % 32)),
		     1, "the parent field is where SCHEMA.md says");
	write_at(m, &none, h, 0, 7);
	cr_assert_eq(get(m, sub).used_space, 100000);
	write_at(m, &other, h, 7, 7);
	cr_assert_eq(get(m, sub).used_space, 100000);
	cr_assert_eq(get(m, top).used_space, 100007);
	meta_close(m);
}

/* The gate's round trip: a session's pending bytes count for the other
 * sessions, not for itself, and go with the session */
Test(quota, usage_pending_per_session)
{
	struct meta *m = open_db(1), *o = open_db(0);
	uint64_t top = mk(m, META_ROOT_INO, "top", META_DIR);
	struct meta_quota q;

	cr_assert_eq(meta_quota_set(m, top, 1 << 20, 50, NULL), 0);
	cr_assert_eq(meta_quota_adjust(m, top, 1000, 2), 0);
	cr_assert_eq(meta_session_open(m, "/mnt/a"), 0);
	cr_assert_eq(meta_session_open(o, "/mnt/b"), 0);

	cr_assert_eq(meta_quota_usage(m, top, 5000, &q), 0);
	cr_assert_eq(q.max_space, 1 << 20);
	cr_assert_eq(q.max_inodes, 50);
	cr_assert_eq(q.used_space, 1000); /* its own pending not counted */
	cr_assert_eq(q.used_inodes, 2);
	cr_assert_eq(meta_quota_usage(o, top, 0, &q), 0);
	cr_assert_eq(q.used_space, 6000);
	cr_assert_eq(get(m, top).pending, 5000);
	cr_assert_eq(meta_quota_usage(o, top, 700, &q), 0);
	cr_assert_eq(get(m, top).pending, 5700);
	cr_assert_eq(meta_quota_usage(m, top, 0, &q), 0);
	cr_assert_eq(q.used_space, 1700);
	cr_assert_eq(meta_quota_usage(m, top, 300, &q), 0);

	/* a closed session's pending bytes stop counting */
	cr_assert_eq(meta_session_close(o), 0);
	cr_assert_eq(get(m, top).pending, 300);
	cr_assert_eq(meta_quota_usage(m, top, 0, &q), 0);
	cr_assert_eq(get(m, top).pending, 0);

	cr_assert_eq(meta_quota_delete(m, top), 0);
	cr_assert_eq(meta_quota_usage(m, top, 0, &q), ENOENT);
	meta_close(o);
	meta_close(m);
}
