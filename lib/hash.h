/*
 * hash.h - the one hash table of granary: intrusive chains keyed by a
 * 64-bit hash, with the caller's match telling entries of equal hash
 * apart. The caches and tables of the client (block cache, ranged-read
 * table cache, disk cache index, node table, name cache) are built on it; their
 * LRU lists are <sys/queue.h> TAILQs (most recently used at the head, evicted
 * from TAILQ_LAST), not a copy of their own.
 *
 * The caller embeds a struct hash_node in its entry and finds the entry
 * again with hash_entry() (container_of). The table keeps each node's
 * hash, so growing never calls back into the caller and removal needs
 * only the node. The table doubles its buckets past a load of 1; a failed
 * allocation there only leaves chains longer, so inserting cannot fail.
 * A table made by hash_init_fixed never grows: its owner counts the
 * buckets against a bound of its own (the name cache).
 * Buckets are taken from the top bits of hash * 2^64/phi (Fibonacci
 * hashing), so a plain integer key (an inode number) is a good hash too.
 *
 * Not thread-safe: the owner's lock protects the table and its nodes.
 */
#ifndef GRANARY_HASH_H
#define GRANARY_HASH_H

#include <stddef.h>
#include <stdint.h>

struct hash_node {
	struct hash_node *next; /* the table's */
	uint64_t hash;		/* the table's: set by hash_insert */
};

/* Embedded in its owner: hash_init, then hash_release. Fields are the
 * table's. */
struct hash {
	struct hash_node **buckets;
	size_t count;	   /* nodes in the table */
	unsigned bits;	   /* 2^bits buckets */
	unsigned max_bits; /* grows up to 2^max_bits buckets */
};

/* The entry of type `type` whose member `member` is the node n. */
#define hash_entry(n, type, member)                                            \
	((type *)(void *)((char *)(n)-offsetof(type, member)))

/* True when node n is the entry key names (n->hash equals its hash). */
typedef int (*hash_match_fn)(const struct hash_node *n, const void *key);

/* An empty table of 2^bits buckets to start with (bits 1..30): 0, EINVAL
 * or ENOMEM. */
int hash_init(struct hash *h, unsigned bits);
/* The same, but the table keeps its 2^bits buckets for good: past a load
 * of 1 its chains only get longer. */
int hash_init_fixed(struct hash *h, unsigned bits);
/* Free the buckets; the nodes still in the table are the caller's (walk
 * them with hash_first/hash_next first to free them). */
void hash_release(struct hash *h);
/* Empty the table without visiting its nodes (they are the caller's); it
 * keeps its buckets, and touches them only when it held nodes. */
void hash_clear(struct hash *h);

/* The first node of hash `hash` that match accepts for key (match NULL:
 * any node of that hash), or NULL. */
struct hash_node *hash_find(const struct hash *h, uint64_t hash,
			    hash_match_fn match, const void *key);
/* The next node after n (found under hash) of that hash that match
 * accepts, or NULL: for a table of several entries per hash (the staged
 * blocks of one slice). */
struct hash_node *hash_find_next(const struct hash_node *n, uint64_t hash,
				 hash_match_fn match, const void *key);
/* Add n (not in any table) under hash; a node of the same key may be
 * there already: the caller looks first when keys must be unique. */
void hash_insert(struct hash *h, struct hash_node *n, uint64_t hash);
/* Take n, which must be in h, out of it (aborts when it is not). */
void hash_remove(struct hash *h, struct hash_node *n);

static inline size_t hash_count(const struct hash *h)
{
	return h->count;
}

/*
 * Every node, in no particular order: for (n = hash_first(h); n; n = next)
 * { next = hash_next(h, n); ... }. Removing (and freeing) the current node
 * is allowed once next is taken; inserting during a walk is not.
 */
struct hash_node *hash_first(const struct hash *h);
struct hash_node *hash_next(const struct hash *h, const struct hash_node *n);

/* A well-mixed 64-bit hash of x (splitmix64's finalizer), for keys made of
 * integers: hash_mix64(id ^ idx * C) for a pair. */
static inline uint64_t hash_mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

#endif
