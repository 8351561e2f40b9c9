/*
 * groupd.h - a mount's membership of its cache group (fs_opts.cache_group,
 * docs/operations.md "Cache groups"): the node id of its cache, the group
 * store (fs/store/group.h) put over the disk cache, the join, the members
 * read again every GROUPD_REFRESH_MS by a thread of its own (a tick, not a
 * job: lib/workq.h serves jobs) and handed to the group store, and the
 * leave at unmount. Also the fan-out of warmup's requests to the owners
 * (groupd_keys), on a work queue of its own.
 *
 * Order in a mount: groupd_stack() once the disk cache is open (before
 * the sealing layer goes above it), groupd_start() once the session is
 * open, groupd_close() before the session closes.
 */
#ifndef GRANARY_VFS_GROUPD_H
#define GRANARY_VFS_GROUPD_H

#include <stddef.h>
#include <stdint.h>

struct fs;
struct groupd;

#define GROUPD_REFRESH_MS 2000		  /* members read this often */
#define GROUPD_NODE_FILE  ".granary-node" /* in the first cache dir */
#define GROUPD_FANOUT	  16 /* warmup's requests to owners at once */

/*
 * The node id of the cache whose first directory is dir: the 16 hex
 * digits of dir/.granary-node, made there (random, never 0, mode 0600,
 * atomically: two mounts racing get the same) when there is none. path
 * (cap bytes) gets the file's path. EINVAL: the file holds something
 * else (remove it: the cache gets a new id).
 */
int groupd_node_id(const char *dir, uint64_t *node, char *path, size_t cap);

/*
 * Put the group store over fs->store, which is the disk cache
 * (fs->disk_cache): fs->store and fs->group are the group store from then
 * on, and fs->groupd is set. dirs are the cache's directories, size its
 * limit (the node's weight). On failure msg (cap bytes) says why, and
 * fs->store is still the disk cache.
 */
int groupd_stack(struct fs *fs, const char *dirs, uint64_t size, char *msg,
		 size_t cap);

/*
 * Join the group (the session must be open), read its members once and
 * start the refresher. EEXIST (msg says which session holds the node):
 * this cache is a member under another live session, which is refused
 * unless that session is a mount of this node that died (its process is
 * gone): the refresher then joins once it expires.
 */
int groupd_start(struct fs *fs, char *msg, size_t cap);

/* Stop the refresher, leave the group. NULL-safe. */
void groupd_close(struct groupd *g);

/* The group's name and this member's node id. */
const char *groupd_name(const struct groupd *g);
uint64_t groupd_node(const struct groupd *g);

/*
 * For warmup, n keys at once (up to GROUPD_FANOUT in flight): warm 1:
 * group_warm() each, res[i] its error (0: its owner has it); warm 0:
 * group_where() each, res[i] = 1 (here) | 2 (at its owner), or -error.
 * Returns when every key is done. Thread-safe.
 */
void groupd_keys(struct groupd *g, int warm, const char *const *keys, size_t n,
		 int *res);

#endif
