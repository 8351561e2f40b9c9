/*
 * meta_quota.h - directory quotas (SCHEMA.md "Quotas"): a limit on the
 * stored bytes and on the inodes below a directory, kept for every client
 * by the metadata's scripts.
 *
 * A quota's usage counts what is below its directory (not the directory
 * itself): every inode once, and the stored bytes of regular files (what
 * st_blocks and the volume's usedspace count). The namespace scripts find
 * the quotas above a directory themselves (the "chain", nearest first) and
 * keep the usage exact: mknod, link, unlink, rmdir, rename, the trash.
 * Data scripts (write, truncate, fallocate, clone) charge the chain of the
 * file's parent field, the directory the namespace scripts keep for each
 * regular file (SCHEMA.md), in the same script: another client's rename
 * or rm moves the charge at once. The client checks its writes against
 * the limits of the chain it believes in (struct meta_qchain, from
 * meta_quota_chain and its parent hint) before it accepts them
 * (fs/vfs/quota.c); that chain is charged only for a file from before
 * the parent field. A commit never fails for a quota.
 *
 * The rules that keep usage exact without walking trees:
 *   - a name never moves between different chains but for a regular file
 *     or symlink with one link, an empty directory, or a directory that
 *     has a quota itself (its usage is known): anything else is EXDEV,
 *     which mv(1) turns into a copy, as on XFS/ext4 project quotas;
 *   - a hard link is made only inside the chain of the file (EXDEV); a
 *     file with several names is charged to that one chain;
 *   - the trash, versions (DIR/.versions) and the root are outside every
 *     quota: no quota on them, and what moves there leaves its quotas;
 *   - a snapshot counts in the quotas above its destination, as a copy.
 * Setting a quota on a non-empty directory starts its usage at 0: the
 * caller counts the tree and adds the count (meta_quota_adjust). Changes
 * made meanwhile in the tree may be counted twice or not at all; `quota
 * check --repair` on a quiet tree makes it exact.
 *
 * EDQUOT: mknod, link, rename into a chain whose inodes (or, for a rename,
 * bytes) would pass a limit, and mknod when a chain's bytes are used up.
 */
#ifndef GRANARY_META_QUOTA_H
#define GRANARY_META_QUOTA_H

#include <stddef.h>
#include <stdint.h>

#include "meta/meta.h"

#define META_QUOTA_NEST 8 /* quotas above any one directory, at most */

struct meta_quota {
	uint64_t ino;	      /* the quota's directory */
	uint64_t max_space;   /* bytes; 0: no limit */
	uint64_t max_inodes;  /* 0: no limit */
	uint64_t used_space;  /* stored bytes of the files below (>= 0) */
	uint64_t used_inodes; /* inodes below, the directory not counted */
	uint64_t pending;     /* bytes clients accepted for writing and
				 did not commit yet (meta_quota_usage: the
				 other sessions'; get and list: all) */
};

/* The quotas whose limits a change in a directory counts against,
 * nearest first. n 0: none. dir and gen: the directory and the quotas'
 * generation meta_quota_chain read it for (0: not known); a data script
 * takes the chain as it is while the file's parent field is dir and the
 * generation has not moved (one read), and finds the file's own
 * otherwise. */
struct meta_qchain {
	size_t n;
	uint64_t q[META_QUOTA_NEST];
	uint64_t dir, gen;
};

/* Create or change the quota of directory ino. *created (may be NULL): 1
 * when it had none (usage 0: count the tree, meta_quota_adjust). ENOENT,
 * ENOTDIR, EINVAL (the root, the trash, inside a version or the trash),
 * EMLINK (would put more than META_QUOTA_NEST quotas above a directory).
 * Bumps the generation. */
int meta_quota_set(struct meta *m, uint64_t ino, uint64_t max_space,
		   uint64_t max_inodes, int *created);
/* ENOENT: ino has no quota. */
int meta_quota_get(struct meta *m, uint64_t ino, struct meta_quota *q);
/* Every quota, by inode; *out malloc'd (NULL when *n is 0). */
int meta_quota_list(struct meta *m, struct meta_quota **out, size_t *n);
/* Remove ino's quota (its usage too); ENOENT when none. Bumps the
 * generation. A directory's quota also goes when the directory does. */
int meta_quota_delete(struct meta *m, uint64_t ino);
/* Add ds bytes and di inodes to ino's usage (a count's correction);
 * usage below 0 reads as 0. ENOENT when no quota. */
int meta_quota_adjust(struct meta *m, uint64_t ino, int64_t ds, int64_t di);

/* The chain of directory dir (dir's own quota first, if any). ENOENT,
 * ENOTDIR. Inside the trash or a version: n 0. */
int meta_quota_chain(struct meta *m, uint64_t dir, struct meta_qchain *c);
/* The quotas' generation: changes when a quota is set or deleted, and when
 * a rename moves a quota's directory under other quotas; a client's cached
 * chains and limits are stale when it changed. 0 before any quota. */
int meta_quota_gen(struct meta *m, uint64_t *gen);
/* A client's gate round trip for quota ino (fs/vfs/space.h's usage
 * callback): publishes pending, the bytes this session accepted for the
 * quota and did not commit yet (kept per session; dropped with it), and
 * reads the quota: used_space then includes the other sessions' pending
 * bytes. ENOENT when the quota is gone. Without a session pending is not
 * published. */
int meta_quota_usage(struct meta *m, uint64_t ino, uint64_t pending,
		     struct meta_quota *q);

/* The data changes of meta.h with the chain the client believes the
 * file's stored bytes count in (c NULL or n 0: none, as the plain calls).
 * The scripts charge the chain of the file's parent field instead, and
 * c only for a file without one (made before the field); nothing for a
 * file with no name left, or in the trash. Never EDQUOT. */
int meta_write_q(struct meta *m, const struct meta_qchain *c, uint64_t ino,
		 const struct meta_chunk_slice *s, size_t n,
		 struct meta_attr *a);
int meta_truncate_q(struct meta *m, const struct meta_qchain *c, uint64_t ino,
		    uint64_t length, struct meta_attr *out);
int meta_fallocate_q(struct meta *m, const struct meta_qchain *c, uint64_t ino,
		     int mode, uint64_t off, uint64_t len,
		     struct meta_attr *out);
/* meta_link (meta.h) told a directory that holds a name of ino (hint;
 * 0: not known): EXDEV when newparent's chain is not the file's (that of
 * its parent field; of hint for a file without one, no check when 0). */
int meta_link_q(struct meta *m, uint64_t hint, uint64_t ino, uint64_t newparent,
		const char *newname, struct meta_attr *a);
/* meta_clone_data (meta_snap.h): dst's stored bytes count in c. */
int meta_clone_data_q(struct meta *m, const struct meta_qchain *c, uint64_t src,
		      uint64_t dst, struct meta_attr *a);

#endif
