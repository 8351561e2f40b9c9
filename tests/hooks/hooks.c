/*
 * hooks.c - the test build's fault injection (fs/vfs/hooks.h), from
 * GRANARY_TEST_SNAPSHOT_KILL_AFTER, GRANARY_TEST_STAGE_DELAY_MS,
 * GRANARY_TEST_KILL_BEFORE_COMMIT, GRANARY_TEST_COMPACT_DELAY,
 * GRANARY_TEST_TRASH_PERIOD, GRANARY_TEST_TRASH_SKEW,
 * GRANARY_TEST_SESSION_TTL and GRANARY_TEST_PLAN_IDLE.  Linked
 * into $(O)/tests/hooks/granary only, ahead of the library, whose
 * do-nothing hooks it replaces.
 */
#include <stdlib.h>

#include "fs/vfs/hooks.h"

int hooks_snapshot_kill_after(void)
{
	const char *v = getenv("GRANARY_TEST_SNAPSHOT_KILL_AFTER");
	return v ? atoi(v) : 0;
}

unsigned hooks_stage_delay_ms(void)
{
	const char *v = getenv("GRANARY_TEST_STAGE_DELAY_MS");
	return v ? (unsigned)strtoul(v, NULL, 10) : 0;
}

int hooks_kill_before_commit(void)
{
	const char *v = getenv("GRANARY_TEST_KILL_BEFORE_COMMIT");
	return v && atoi(v) != 0;
}

unsigned hooks_compact_delay(void)
{
	const char *v = getenv("GRANARY_TEST_COMPACT_DELAY");
	return v ? (unsigned)strtoul(v, NULL, 10) : 0;
}

unsigned hooks_trash_period(void)
{
	const char *v = getenv("GRANARY_TEST_TRASH_PERIOD");
	return v ? (unsigned)strtoul(v, NULL, 10) : 0;
}

long hooks_trash_skew(void)
{
	const char *v = getenv("GRANARY_TEST_TRASH_SKEW");
	return v ? strtol(v, NULL, 10) : 0;
}

unsigned hooks_session_ttl(void)
{
	const char *v = getenv("GRANARY_TEST_SESSION_TTL");
	return v ? (unsigned)strtoul(v, NULL, 10) : 0;
}

unsigned hooks_plan_idle(void)
{
	const char *v = getenv("GRANARY_TEST_PLAN_IDLE");
	return v ? (unsigned)strtoul(v, NULL, 10) : 0;
}
