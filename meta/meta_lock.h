/*
 * meta_lock.h - file locks granted through the metadata, so that they hold
 * between clients: BSD flock locks and POSIX record locks, one table of
 * each per inode (SCHEMA.md "Locks"). A lock belongs to an owner, the pair
 * (this handle's session, the kernel's lock owner); an owner never
 * conflicts with itself. The check for a conflict and the grant are one
 * script. Locks of a dead session (no heartbeat for its TTL while redis
 * ran: SCHEMA.md "Sessions") stop counting at once and are removed with
 * the session (meta_clean_sessions, meta_session_close).
 * Needs a session (meta_session_open): EINVAL without one.
 *
 * A call whose connection fails is sent again (within the URL's failover
 * window) and applies once: it carries a request id. An owner's calls are
 * made one at a time (concurrent ones wait for each other).
 */
#ifndef GRANARY_META_LOCK_H
#define GRANARY_META_LOCK_H

#include <stdint.h>

#include "meta/meta.h"

/* "to the end of the file": the largest offset a lock names (2^52; the
 * scripts' numbers are doubles). Larger ends are cut to it. */
#define META_LOCK_EOF (UINT64_C(1) << 52)

enum meta_lock_type {
	META_LOCK_UN = 0, /* unlock */
	META_LOCK_RD = 1, /* shared */
	META_LOCK_WR = 2, /* exclusive */
};

enum meta_lock_kind {
	META_LOCK_FLOCK = 'f', /* flock(2): the whole file, per open file */
	META_LOCK_POSIX = 'p', /* fcntl(2) record locks: ranges */
};

/* A lock: type, the range [start, end] (end inclusive), and its holder's
 * pid (on the holder's node) and session. */
struct meta_lock {
	int type;
	uint64_t start, end;
	uint32_t pid;
	uint64_t sid;
};

/*
 * Set (lk->type RD or WR) or remove (UN) owner's lock of kind on lk's
 * range of ino; pid is lk->pid. 0: done. EAGAIN: another owner's lock is
 * in the way, described in *conflict (may be NULL); nothing changed.
 * A flock lock's range is ignored (always the whole file).
 * An unlock always succeeds: one redis cannot take now is queued and sent
 * again (the heartbeat, and before the owner's next call) until it gets
 * through. META_ELOCKLOST: the owner held a lock when this session was
 * found dead (others may hold it now); its calls fail so, an unlock being
 * done all the same, until it unlocks the whole file (a close does).
 * EIO or another error of a lock: it may or may not have been granted.
 */
int meta_lock_set(struct meta *m, enum meta_lock_kind kind, uint64_t ino,
		  uint64_t owner, const struct meta_lock *lk,
		  struct meta_lock *conflict);

/* F_GETLK: would owner get POSIX lock lk (RD or WR) on ino? 0 and
 * conflict->type META_LOCK_UN when so, else a lock in the way. */
int meta_lock_get(struct meta *m, uint64_t ino, uint64_t owner,
		  const struct meta_lock *lk, struct meta_lock *conflict);

#endif
