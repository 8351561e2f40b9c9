/*
 * space.h - a client's gate on a byte limit that every client of a volume
 * shares (the volume's capacity today, directory quotas later): a write is
 * refused with ENOSPC before it is accepted, so that a write() that
 * succeeded is never lost or refused at close.
 *
 * Each client judges from its own view: the usage read from the volume
 * (read again when older than SPACE_REFRESH_NS, or after space_changed),
 * plus what it committed since that reading, plus what it has accepted and
 * not committed yet. One client alone never passes the limit; other
 * clients' bytes are seen once committed and read, so the limit can be
 * overshot by what they hold accepted and uncommitted plus what they
 * commit within one refresh interval (docs/operations.md, "Capacity").
 *
 * Thread-safe; the gate's lock is a leaf (taken under node locks). The
 * usage callback is called with it held.
 */
#ifndef GRANARY_SPACE_H
#define GRANARY_SPACE_H

#include <stdint.h>

#define SPACE_REFRESH_NS 1000000000LL /* a reading is good for 1 s */

struct space;

/* The bytes used now (e.g. the volume's usedspace); 0 or an errno. */
typedef int (*space_usage_fn)(void *arg, uint64_t *used);

/* limit 0: no limit, every call below is free and never refuses. */
int space_open(uint64_t limit, space_usage_fn usage, void *arg,
	       struct space **out);
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

#endif
