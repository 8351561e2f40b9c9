/*
 * testvol.h - for unit tests of the metadata: the test Redis's socket
 * (GRANARY_TEST_REDIS, set by tests/run-unit.sh; the test is skipped
 * without it) and handles on a database of it, fresh or as it is.
 */
#ifndef GRANARY_TEST_TESTVOL_H
#define GRANARY_TEST_TESTVOL_H

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "meta/meta.h"
#include "meta/meta_volume.h"

/* The socket path of the test Redis. */
static inline const char *testvol_sock(void)
{
	static char sock[4096];
	const char *u = getenv("GRANARY_TEST_REDIS");
	if (!u || !*u)
		cr_skip_test(
		    "GRANARY_TEST_REDIS unset (run tests/run-unit.sh)");
	cr_assert(strncmp(u, "unix://", 7) == 0);
	size_t n = strcspn(u + 7, "?");
	cr_assert(n < sizeof sock);
	memcpy(sock, u + 7, n);
	sock[n] = '\0';
	return sock;
}

/* A handle on database db of the test Redis, as it is. */
static inline struct meta *testvol_open(int db)
{
	char url[4200];
	struct meta *m = NULL;

	snprintf(url, sizeof url, "unix://%s?db=%d", testvol_sock(), db);
	cr_assert_eq(meta_open(url, NULL, &m), 0);
	return m;
}

/* A handle on a fresh volume NAME in database db (format --force wipes
 * it), on mem://, keeping removed files `days` days in the trash. */
static inline struct meta *testvol_fresh(int db, const char *name,
					 uint32_t days)
{
	struct meta *m = testvol_open(db);
	struct meta_volume v;

	memset(&v, 0, sizeof v);
	snprintf(v.name, sizeof v.name, "%s", name);
	snprintf(v.storage, sizeof v.storage, "mem://");
	v.trash_days = days;
	cr_assert_eq(meta_format(m, &v, 1), 0);
	return m;
}

#endif
