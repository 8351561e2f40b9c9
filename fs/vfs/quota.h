/*
 * quota.h - the client's view of the volume's directory quotas
 * (meta/meta_quota.h): which quotas a write into a directory counts
 * against (its chain), and one byte gate (space.h) per quota with a byte
 * limit, so that a write past a quota is refused (EDQUOT) before its bytes
 * are accepted, as the capacity refuses with ENOSPC.
 *
 * Free on a volume that never had a quota (its generation is 0): no call
 * below costs a round trip then, and a chain is empty. Otherwise
 * quota_tick, about once a second, reads the generation; when it changed
 * it reloads the limits and forgets every cached chain. A directory's
 * chain is cached for one generation (at most QUOTA_CHAINS_MAX
 * directories, then the cache starts over). Gates live as long as the
 * handle (a quota deleted keeps a gate with no limit), so that a chain
 * held by a node stays valid across reloads.
 *
 * Bound: what space.h says of the capacity holds for each quota: one
 * client never passes a byte limit; several writing at once may pass it
 * by about one step each (docs/operations.md, "Quotas: enforcement").
 *
 * Thread-safe. The handle's lock is taken under node->lock; only a gate's
 * lock is taken under it (a limit changed), and it is never held across
 * a round trip (vfs_int.h has the whole order).
 */
#ifndef GRANARY_QUOTA_H
#define GRANARY_QUOTA_H

#include <stdint.h>

#include "meta/meta_quota.h"

#define QUOTA_CHAINS_MAX 4096 /* directories whose chain is cached */

struct quota;
struct space;

/* The quotas a directory's changes count against, nearest first, with
 * each one's byte gate (NULL: no byte limit known). A value: copied into
 * the node that writes, valid for the handle's life. */
struct quota_chain {
	struct meta_qchain c; /* what the data scripts are told */
	struct space *gate[META_QUOTA_NEST];
};

/* read_only: no gates, no generation reads (statfs only). One round trip
 * (the generation), two when the volume has quotas (their list). */
int quota_open(struct meta *m, int read_only, struct quota **out);
void quota_free(struct quota *q); /* NULL-safe */
/* Does the volume have (or did it ever have) a quota? Free. */
int quota_active(const struct quota *q);
/* The generation whose limits this client enforces (the volume's
 * quotagen when it last read it; 0: no quota yet). Free. */
uint64_t quota_generation(const struct quota *q);
/* About every second, from a background thread: reload on a new
 * generation; publish the gates' pending bytes (space_tick). */
void quota_tick(struct quota *q);

/* The chain of directory dir (volume inode; 0: unknown, empty chain).
 * Empty and free when the volume has no quota; else from the cache or one
 * round trip. ENOENT, ENOTDIR (dir is gone: then empty too). */
int quota_chain_of(struct quota *q, uint64_t dir, struct quota_chain *out);
/* Directory dir moved (a rename): its cached chain may be wrong. */
void quota_forget(struct quota *q, uint64_t dir);

/* space_take on every gate of c (nothing taken when one refuses): 0 or
 * EDQUOT. */
int quota_take(const struct quota_chain *c, uint64_t bytes);
void quota_done(const struct quota_chain *c, uint64_t bytes);
void quota_drop(const struct quota_chain *c, uint64_t bytes);
/* Space was freed below c's quotas: read them again before the next take. */
void quota_changed(const struct quota_chain *c);

/* The quota of directory dir, for statfs: 0 and *out (used_space without
 * pending bytes), or ENOENT when dir has none. A reading is kept about a
 * second; free when dir has no quota. */
int quota_statfs(struct quota *q, uint64_t dir, struct meta_quota *out);

#endif
