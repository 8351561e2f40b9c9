/*
 * meta_group.h - cache groups (SCHEMA.md "Cache groups"): the mounts of a
 * volume that name one group share their disk caches. What the metadata
 * keeps of a group is who is in it: each member's node id (stable: it
 * names the member's cache, so a remount of the same cache is the same
 * member and owns the same blocks), the address peers reach it at, its
 * weight (its cache's size) and the session that holds the membership.
 * A member is alive while its session is (the stall-safe rule of the
 * sessions: SCHEMA.md "Sessions"); a dead one drops out of the listing at
 * once and its record goes with the session's cleanup.
 *
 * And the group secret: 32 random bytes kept with the volume's settings,
 * made on first use, from which the members derive the key that
 * authenticates their requests to each other (fs/store/peer.h). Only
 * holders of the metadata can read it; it is never printed, logged, or
 * carried in status's output.
 *
 * Group names: 1 to 64 of [A-Za-z0-9._-]; EINVAL otherwise.
 */
#ifndef GRANARY_META_GROUP_H
#define GRANARY_META_GROUP_H

#include <stddef.h>
#include <stdint.h>

#include "meta/meta.h"

#define META_GROUP_NAME_MAX 64
#define META_GROUP_ADDR_MAX 64 /* "HOST:PORT", an IPv6 host in [] */
#define META_GROUP_SECRET   32

struct meta_group_member {
	uint64_t node;	/* the member's cache id (never 0) */
	uint64_t sid;	/* the session holding the membership */
	char addr[META_GROUP_ADDR_MAX]; /* where peers reach it; "" when it
					   serves nothing */
	uint64_t weight; /* bytes of cache it gives the group; 0: it takes
			    from the group and serves nothing */
	int64_t joined;	 /* server time of its join (unix seconds) */
	int64_t heartbeat; /* its session's last heartbeat (unix seconds) */
};

/* The volume's group secret, made (random, once, atomically: two clients
 * asking at once get the same) when there is none yet. */
int meta_group_secret(struct meta *m, unsigned char key[META_GROUP_SECRET]);

/* Enter group as self (self->sid is taken from the session; joined and
 * heartbeat are the server's): a record of node in the group, replacing
 * one of the same node (a remount, or a member whose session died).
 * Needs a session (EINVAL without). EEXIST: node is in the group under a
 * live session other than this one (the same cache mounted twice). */
int meta_group_join(struct meta *m, const char *group,
		    const struct meta_group_member *self);

/* Leave group: the record of node goes if this session holds it. 0 also
 * when there was none. */
int meta_group_leave(struct meta *m, const char *group, uint64_t node);

/* The live members of group, sorted by node, in *out (malloc'd, *n of
 * them; NULL and 0 when none). One round trip. */
int meta_group_members(struct meta *m, const char *group,
		       struct meta_group_member **out, size_t *n);

/* The names of the groups that have records (live or not), for status:
 * *names a malloc'd array of malloc'd strings; free with
 * meta_group_names_free. */
int meta_group_names(struct meta *m, char ***names, size_t *n);
void meta_group_names_free(char **names, size_t n);

#endif
