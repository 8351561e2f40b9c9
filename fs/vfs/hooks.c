/*
 * hooks.c - the production build's fault injection: none (hooks.h).
 */
#include "fs/vfs/hooks.h"

int hooks_snapshot_kill_after(void)
{
	return 0;
}

unsigned hooks_stage_delay_ms(void)
{
	return 0;
}

int hooks_kill_before_commit(void)
{
	return 0;
}

unsigned hooks_compact_delay(void)
{
	return 0;
}

unsigned hooks_trash_period(void)
{
	return 0;
}

long hooks_trash_skew(void)
{
	return 0;
}

unsigned hooks_session_ttl(void)
{
	return 0;
}

unsigned hooks_plan_idle(void)
{
	return 0;
}
