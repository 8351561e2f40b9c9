/*
 * meta_snap.h - the metadata API of snapshots (copy-on-write copies of a
 * file or a tree) and dataset versions (read-only snapshots kept at
 * DIR/.versions/TAG). Types and errors: meta.h.
 */
#ifndef GRANARY_META_SNAP_H
#define GRANARY_META_SNAP_H

#include "meta/meta.h"

/* ---- snapshots ------------------------------------------------------- */
/*
 * Who asks for a snapshot or a version, for the permission checks of the
 * copy (cp -a semantics: every file of the source readable, every
 * directory readable and searchable; EACCES otherwise, and nothing is
 * made). groups[0] is the primary gid, then the supplementary groups. A
 * NULL cred (root, the tools) checks nothing.
 */
struct meta_cred {
	uint32_t uid;
	uint32_t ngroups;
	const uint32_t *groups;
};

struct meta_snapshot_stats {
	uint64_t files, dirs, others; /* inodes made (the top one included) */
	uint64_t bytes;		      /* sum of the file lengths */
};
/*
 * Make dst_name in directory dst_parent a copy-on-write copy of src (a
 * file, symlink, special file, or a directory tree): metadata only, the
 * data shared through slice reference counts, so that writes, truncates
 * and deletes on either side never show in the other. Attributes, xattrs
 * and symlink targets are copied as they are (owners included, as cp -a
 * run by root would); ctime of the copies is now; hard links inside a tree
 * stay links to one inode inside the copy. With a cred (not root), as cp
 * -a run by that user: an owner it is not and a group it is not in become
 * its own uid and gid, which clears the set-id bits, and security.* and
 * trusted.* xattrs are not copied.
 *
 * Atomic for the namespace: the copy is built detached (its top inode
 * listed in `snapshots` with this session) and linked under dst_name in
 * one last step; EEXIST if dst_name exists then (or at the start), and the
 * detached copy is deleted again on any error. A client that dies half way
 * leaves a detached copy that meta_snapshot_cleanup deletes once the
 * session is dead. Errors: ENOENT (src or dst_parent), ENOTDIR, EEXIST,
 * EINVAL (dst_parent inside the tree of src), EACCES (cred may not read
 * all of src; see struct meta_cred), EDQUOT (the copy's inodes or
 * stored bytes do not fit in a quota above dst_parent: it counts there as
 * a copy would, meta_quota.h), ECANCELED (the half-made copy
 * was taken for dead and deleted by a cleaner: this client stalled for
 * longer than the session TTL), or a metadata error. st may be NULL.
 */
int meta_snapshot(struct meta *m, const struct meta_cred *cred, uint64_t src,
		  uint64_t dst_parent, const char *dst_name,
		  struct meta_snapshot_stats *st);
/* Delete the detached copies of snapshots whose client is gone (its
 * session dead or closed); *n (may be NULL) is how many. */
int meta_snapshot_cleanup(struct meta *m, size_t *n);

/*
 * Give the empty regular file dst (length 0) the data of file src, shared
 * copy-on-write as a snapshot shares it (copy_file_range of a whole file
 * inside the volume). EINVAL when dst is not empty or is src, EISDIR,
 * ENOENT. *a (may be NULL) receives dst's new attributes.
 */
int meta_clone_data(struct meta *m, uint64_t src, uint64_t dst,
		    struct meta_attr *a);

/* ---- dataset versions ------------------------------------------------ */
/*
 * A version is a read-only snapshot of a directory, kept with it: DIR's
 * versions are the entries of a directory reached by looking up META_VERSIONS
 * in DIR (DIR/.versions/TAG), never listed by readdir. The name is reserved:
 * creating or renaming to it gives EINVAL. Read-only is the client's to
 * enforce (fs/vfs/); the engine keeps the tree and a record per version
 * with its stats, so that listing them costs one read. Removing DIR removes
 * its versions (deleted in the background by meta_snapshot_cleanup).
 */
#define META_TAG_MAX	     200
#define META_VERSION_MSG_MAX 4096

struct meta_version {
	char tag[META_TAG_MAX + 1];
	uint64_t top;	 /* the version's root directory */
	int64_t created; /* server unix seconds */
	struct meta_snapshot_stats st;
	char *msg; /* NUL-terminated, maybe empty */
};

/* Tags: 1..META_TAG_MAX printable bytes, no '/', not starting with '.';
 * EINVAL otherwise (ENAMETOOLONG when too long). */
int meta_version_tag_check(const char *tag);
/*
 * Record dir as it is now as version tag, with msg (may be NULL; at most
 * META_VERSION_MSG_MAX bytes, else EINVAL): a snapshot of the tree (see
 * meta_snapshot for what it copies and costs, and its consistency while
 * the tree changes). EEXIST when tag exists, ENOTDIR, ENOENT, EACCES (cred
 * may not read all of dir). st may be NULL.
 */
int meta_version_create(struct meta *m, const struct meta_cred *cred,
			uint64_t dir, const char *tag, const char *msg,
			struct meta_snapshot_stats *st);
/* One version, or all of dir's (any order, *n 0 when none); free the
 * result with meta_versions_free. ENOENT: no such version. */
int meta_version_get(struct meta *m, uint64_t dir, const char *tag,
		     struct meta_version **out);
int meta_version_list(struct meta *m, uint64_t dir, struct meta_version **out,
		      size_t *n);
void meta_versions_free(struct meta_version *v, size_t n); /* NULL-safe */
/* Delete version tag of dir: gone from the namespace at once, its tree
 * deleted before return (or by a later meta_snapshot_cleanup). In a
 * sticky dir (mode 01000), as unlink(2) there, only cred's uid owning the
 * version (its top directory) or dir may: EPERM otherwise, checked in the
 * script that removes it. cred NULL (root, the tools): no check. */
int meta_version_rm(struct meta *m, const struct meta_cred *cred, uint64_t dir,
		    const char *tag);
/*
 * Make dir's content version tag's again: first dir as it is is recorded
 * as version save_tag (EEXIST if taken), then a copy of tag's tree
 * replaces dir's entries in one step (dir keeps its inode, attributes and
 * versions; the versions of its subdirectories go with the old entries).
 * Files open in dir keep their data until closed, as if unlinked. cred
 * must be able to read both dir's tree and tag's (EACCES).
 */
int meta_version_restore(struct meta *m, const struct meta_cred *cred,
			 uint64_t dir, const char *tag, const char *save_tag);

#endif
