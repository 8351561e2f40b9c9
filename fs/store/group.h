/*
 * group.h - a cache group as an object store decorator: the node's disk
 * cache, shared with the other members of its group. group_open() wraps
 * the node's disk cache (diskcache.h) and hands out a store whose gets go
 *   - to the local cache when it holds the key whole;
 *   - else to the key's owner (lib/rendezvous.h over the live members,
 *     weighted by the cache each gives): this node's own cache when it is
 *     the owner (fetched from the store once and kept), another member's
 *     over the network (fs/store/peer.h) when not;
 *   - to the store itself (diskcache_backend) when the owner cannot
 *     answer: down, slow, refusing, or its copy failed the reader's check.
 * So a block is fetched from the store once for the whole group and kept
 * on one member, and a peer's failure costs a read a bounded wait
 * (peer.h's timeouts) and a store fetch, never an error. A member that
 * fails is skipped (its keys go to the store directly) for a while that
 * doubles while it keeps failing, from down_ms up to 30 s; the first
 * request after that is the test of whether it is back.
 *
 * What a reader got from a peer is not kept in its own cache unless
 * keep_copies: a group holds each block once, so it holds as much as the
 * sum of its members' caches, and a peer on the cluster's network answers
 * nearly as fast as the local disk. keep_copies trades that capacity for
 * local reads of what this node reads again (docs/operations.md).
 *
 * Puts, deletes, heads, lists and evictions go to the local cache (and
 * through it to the store): a group changes where reads come from, not
 * what the store holds. objstore_evict_bad() of a key got from a peer
 * tells that peer (its copy is dropped there) and reads the key from the
 * store next. Encrypted volumes stack the sealing layer above this one:
 * members hold and move ciphertext.
 *
 * The members are the metadata's to know (meta_group.h): the caller
 * passes the live ones with group_set_members() whenever it reads them
 * (a mount: at every heartbeat), this node included or not.
 */
#ifndef GRANARY_GROUP_H
#define GRANARY_GROUP_H

#include <stddef.h>
#include <stdint.h>

#include "fs/store/objstore.h"
#include "lib/metric.h"

struct group_member {
	uint64_t node;	  /* cache id, never 0 */
	char addr[64];	  /* "HOST:PORT" it serves at */
	uint64_t weight;  /* bytes of cache it gives; 0: never an owner */
};

struct group_opts {
	uint64_t node;		     /* this member's cache id */
	const unsigned char *secret; /* PEER_SECRET_LEN bytes */
	/* where to serve the others ("HOST:PORT", port 0: any free one);
	 * NULL: serve nothing and own nothing (a member that only takes) */
	const char *listen;
	uint64_t weight; /* this node's share; ignored when listen is NULL */
	int keep_copies; /* also keep in the local cache what peers gave */
	unsigned connect_timeout_ms, timeout_ms; /* peer.h's; 0: its own */
	unsigned down_ms; /* a failed member is first skipped this long (0:
			     1000) */
};

struct group_stats {
	/* reads of this node: answered by a peer, not there (404, the peer
	 * fetched nothing), failed (down, timeout, refused, bad), skipped
	 * (the owner marked down: straight to the store) */
	uint64_t peer_hits, peer_misses, peer_errors, peer_skipped;
	uint64_t peer_bytes, bad_from_peers;
	struct metric_hist peer_lat;
	/* of the others: requests served, bytes sent, fetched from the store
	 * for them, refused for a bad signature */
	uint64_t served, served_bytes, served_fetches, refused_auth;
	/* owner reads that went to this node's own cache */
	uint64_t self_owned;
	uint64_t members; /* live, as last set */
};

/*
 * Wrap cache (a disk cache from diskcache_open; ownership passes, as
 * between the cache and its backend: closing the group closes both; on
 * error cache is left to the caller). Starts the server when o->listen
 * is set. Errors: the server's (peer_server_start), ENOMEM, EINVAL (a
 * cache that is not a disk cache, node 0, no secret).
 */
int group_open(struct objstore *cache, const struct group_opts *o,
	       struct objstore **out);
/* Where this member serves ("HOST:PORT"); "" when it serves nothing. */
const char *group_addr(struct objstore *g);
/* The live members, from the metadata (copied). Keys move to their new
 * owners at once; reads under way finish where they started. */
void group_set_members(struct objstore *g, const struct group_member *m,
		       size_t n);
/* Who owns key now: *self 1 when this node does; else the owner's
 * address in addr (cap bytes). ENOENT when no member can own (a group of
 * takers only). */
int group_owner(struct objstore *g, const char *key, int *self, char *addr,
		size_t cap);
/* Warm key at its owner (a peer's warm request, or a fetch into the
 * local cache when this node owns it); returns when the owner has it, or
 * on its error. For granary warmup: each block fetched from the store
 * once, landing where the group will read it. */
int group_warm(struct objstore *g, const char *key);
/* Where key is now: *here 1 when this node's cache holds it whole, and
 * *in_group 1 when its owner's does (asked with a HEAD; no fetch). */
int group_where(struct objstore *g, const char *key, int *here,
		int *in_group);
void group_get_stats(struct objstore *g, struct group_stats *st);
/* The group store of a stack (g itself, or NULL when s is not one). */
struct objstore *group_of(struct objstore *s);

#endif
