/*
 * hooks.h - fault injection for the integration tests. The installed
 * granary links fs/vfs/hooks.c, whose hooks do nothing and read nothing;
 * the test build of the binary ($(O)/tests/hooks/granary) links
 * tests/hooks/hooks.c instead, which takes them from GRANARY_TEST_*
 * variables. Called once per use; cheap.
 */
#ifndef GRANARY_HOOKS_H
#define GRANARY_HOOKS_H

/* Kill this client (SIGKILL) after this many steps of a snapshot; 0:
 * never (tests/integ/t0120: a client dying half way). */
int hooks_snapshot_kill_after(void);
/* Hold each upload of a staged block back this long (writeback tests
 * that kill a client while blocks are only staged). */
unsigned hooks_stage_delay_ms(void);
/* Kill this client (SIGKILL) when it is about to commit a big file's
 * slice, its blocks in the store (tests/integ/t0160: the leak gc finds). */
int hooks_kill_before_commit(void);
/* Seconds the slices a background compaction replaced wait before
 * reclamation; 0: META_COMPACT_DELAY (tests/integ/t0162). */
unsigned hooks_compact_delay(void);
/* Seconds between a client's turns at purging the trash; 0: the default
 * (mount.c). And seconds the purge's clock runs ahead of the server's,
 * so that what was just removed counts as days old (tests/integ/t0175). */
unsigned hooks_trash_period(void);
long hooks_trash_skew(void);

/* The session TTL in seconds, after which a dead client's opens and
 * locks go; 0: the default (60 s). Every client of a volume must use one
 * value (tests/integ/t0190: a killed lock holder). */
unsigned hooks_session_ttl(void);

/* Seconds without a planned open after which a plan ends; 0: the
 * default (PLAN_IDLE_S; tests/integ/t0272). */
unsigned hooks_plan_idle(void);

#endif
