/*
 * test_closer.c - batched releases of closed files (fs/closer.c) against a
 * real redis-server (GRANARY_TEST_REDIS, database 30): files unlinked while
 * open are deleted once the closer has sent their releases, in a few
 * script calls rather than one per file, and the freed callback hears of it.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "meta/meta_objects.h"
#include "meta/meta_snap.h"
#include "meta/meta_volume.h"
#include "fs/vfs/closer.h"

#define DB     30
#define NFILES 100

static char sock[4096];

static struct meta *fresh_volume(void)
{
	const char *u = getenv("GRANARY_TEST_REDIS");
	char url[4200];
	struct meta_volume v = {.block_size = 4 << 20};
	struct meta *m = NULL;

	if (!u || strncmp(u, "unix://", 7))
		cr_skip_test("GRANARY_TEST_REDIS unset (no redis to test on)");
	snprintf(sock, sizeof sock, "%.*s", (int)strcspn(u + 7, "?"), u + 7);
	snprintf(url, sizeof url, "unix://%s?db=%d", sock, DB);
	cr_assert_eq(meta_open(url, NULL, &m), 0);
	snprintf(v.name, sizeof v.name, "closer");
	snprintf(v.storage, sizeof v.storage, "mem://");
	cr_assert_eq(meta_format(m, &v, 1), 0);
	return m;
}

/* EVALSHA calls the server has run so far */
/* Scripts the server ran, as functions (FCALL) or with EVALSHA. */
static long long scripts_run(redisContext *c)
{
	static const char *const keys[] = {"cmdstat_fcall:calls=",
					   "cmdstat_evalsha:calls="};
	redisReply *r = redisCommand(c, "INFO commandstats");
	long long n = 0;

	cr_assert(r && r->type == REDIS_REPLY_STRING);
	for (int i = 0; i < 2; i++) {
		const char *s = strstr(r->str, keys[i]);
		if (s)
			n += atoll(s + strlen(keys[i]));
	}
	freeReplyObject(r);
	return n;
}

static atomic_int freed_calls;

static void on_freed(void *arg)
{
	(void)arg;
	atomic_fetch_add(&freed_calls, 1);
}

Test(closer, releases_in_batches)
{
	struct meta *m = fresh_volume();
	redisContext *rc = redisConnectUnix(sock);
	struct closer *c;
	struct meta_attr a;
	uint64_t ino[NFILES];

	cr_assert(rc && !rc->err);
	cr_assert_eq(meta_session_open(m, "/mnt/closer"), 0);
	for (int i = 0; i < NFILES; i++) {
		char name[16];
		snprintf(name, sizeof name, "f%d", i);
		cr_assert_eq(
		    meta_create(m, 1, name, 0644, 0, 0, &ino[i], &a, NULL), 0);
		cr_assert_eq(meta_unlink(m, 1, name), 0);
	}
	cr_assert_eq(closer_open(m, 20, on_freed, NULL, &c), 0);
	long long before = scripts_run(rc);
	for (int i = 0; i < NFILES; i++)
		closer_add(c, ino[i]);
	closer_close(c);
	long long calls = scripts_run(rc) - before;

	for (int i = 0; i < NFILES; i++)
		cr_expect_eq(meta_getattr(m, ino[i], &a), ENOENT,
			     "file %d not deleted after its release", i);
	cr_expect_lt(calls, NFILES / 4, "%lld script calls for %d releases",
		     calls, NFILES);
	cr_expect_geq(atomic_load(&freed_calls), 1);
	cr_expect_leq(atomic_load(&freed_calls), calls);
	redisFree(rc);
	meta_close(m);
}
