/*
 * space.h - a client's gate on a byte limit that every client of a volume
 * shares (the volume's capacity today, directory quotas later): a write is
 * refused with ENOSPC before it is accepted, so that a write() that
 * succeeded is never lost or refused at close.
 *
 * Each client judges from its own view: a reading of the volume (its usage
 * plus the bytes the other clients have published as accepted and not yet
 * committed), plus what this client committed since, plus what it has
 * accepted and not committed. The same round trip publishes this client's
 * accepted-and-uncommitted bytes for the others. A reading is taken again
 * when it is SPACE_REFRESH_NS old, after space_changed, and whenever this
 * client has accepted one step of bytes since the last one (the limit / 64,
 * between SPACE_STEP_MIN and SPACE_STEP_MAX); space_tick publishes what
 * changed while no write came.
 *
 * Bound: one client alone never passes the limit. Several clients writing
 * at once can pass it by, for each other client, the lesser of one step
 * and what it accepts in about one second (SPACE_REFRESH_NS plus a round
 * trip): the client that took the last reading saw every other client's
 * bytes but those it accepted since its own last round trip
 * (docs/operations.md, "Capacity").
 *
 * Thread-safe; the gate's lock is a leaf (taken under node locks) and is
 * never held across the usage callback: one round trip at a time runs
 * with the lock dropped, in the thread that needed it (a writer, with its
 * node lock held, or space_tick's). Writers meanwhile go on with the last
 * reading, but wait for it when they used up their step or have none.
 */
#ifndef GRANARY_SPACE_H
#define GRANARY_SPACE_H

#include <stdint.h>

#define SPACE_REFRESH_NS 1000000000LL /* a reading is good for 1 s */
#define SPACE_STEP_MIN	 (4ull << 20)
#define SPACE_STEP_MAX	 (64ull << 20)

struct space;

/* Publish this client's accepted-and-uncommitted bytes (pending) and read
 * the bytes used now plus those the other clients published, in one round
 * trip; 0 or an errno. */
typedef int (*space_usage_fn)(void *arg, uint64_t pending, uint64_t *used);

/* limit 0: no limit, every call below is free and never refuses. what
 * names the limit in messages ("the volume", "the quota of inode 12"; a
 * copy is kept). */
int space_open(uint64_t limit, const char *what, space_usage_fn usage,
	       void *arg, struct space **out);
/* The limit changed (a quota set again): the step follows, and the next
 * space_take reads the usage again. Bytes pending stay pending. */
void space_set_limit(struct space *s, uint64_t limit);
void space_free(struct space *s); /* NULL-safe */

/* Accept bytes more (pending until space_done or space_drop), or ENOSPC
 * when they would take the usage past the limit. A usage that cannot be
 * read leaves the last reading in force (the commit will tell). */
int space_take(struct space *s, uint64_t bytes);
/* Pending bytes were committed: they count as used until the next reading
 * (which sees them). */
void space_done(struct space *s, uint64_t bytes);
/* Pending bytes will never be committed (dropped, or failed). */
void space_drop(struct space *s, uint64_t bytes);
/* This client freed space (unlink, truncate, punch): read the usage again
 * before the next space_take, so that the space is there at once. */
void space_changed(struct space *s);
/* Call about every SPACE_REFRESH_NS from a background thread: publishes
 * the pending bytes when they changed since the last round trip and that
 * is SPACE_REFRESH_NS old (a client that stopped writing, or committed). */
void space_tick(struct space *s);

#endif
