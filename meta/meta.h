/*
 * meta.h - the metadata API: volume settings, inodes, directory entries,
 * chunk slice lists, xattrs, client sessions and data reclamation.
 *
 * One engine today: Redis (meta/redis_*.c, schema in meta/SCHEMA.md). Every
 * call that changes more than one key is atomic (one Lua script). All calls
 * are thread-safe: a pool of connections serves FUSE's worker threads, and
 * a connection that fails is re-opened (Redis restarts are survived).
 *
 * Errors: 0, a positive errno (as ext4 would give it), or META_E*.
 */
#ifndef GRANARY_META_H
#define GRANARY_META_H

#include <stddef.h>
#include <stdint.h>

#include "lib/errors.h"

#define META_ROOT_INO	    1
#define META_CHUNK_SIZE	    (64u << 20) /* a file is cut into chunks by offset */
#define META_FORMAT_VERSION 2
#define META_NAME_MAX	    255

/* Errors: a positive errno, or a META_E* code (lib/errors.h). */

enum meta_type {
	META_FILE = 1,
	META_DIR,
	META_SYMLINK,
	META_FIFO,
	META_BLK,
	META_CHR,
	META_SOCK
};

struct meta_attr {
	uint8_t type;  /* enum meta_type */
	uint16_t mode; /* permission bits incl. setuid/setgid/sticky (07777) */
	uint32_t uid, gid, nlink, rdev;
	uint64_t length;
	uint64_t stored; /* regular files: bytes of data they hold (written or
			    fallocated, less punched; an upper bound, never
			    above length; SCHEMA.md); others: length */
	uint64_t parent; /* directories: their parent; others: 0 */
	int64_t atime, mtime, ctime;	    /* seconds */
	uint32_t atimens, mtimens, ctimens; /* nanoseconds */
};

/*
 * A slice reference in a chunk: bytes [pos, pos+len) of the chunk are bytes
 * [off, off+len) of slice `id`, whose stored length is `size`. id 0 is a
 * hole (reads as zeros). Newer entries of a chunk cover older ones.
 *
 * A slice is stored either as blocks of its own (pack 0) or, when small, as
 * one encoded frame inside a pack object shared with other slices: bytes
 * [poff, poff+plen) of pack `pack`.
 */
struct meta_slice {
	uint64_t id;
	uint32_t size, off, len, pos;
	uint64_t pack;
	uint32_t poff, plen;
};

struct meta_chunk_slice {
	uint32_t idx; /* chunk index: file offset / META_CHUNK_SIZE */
	struct meta_slice s;
};

struct meta_volume {
	char name[256];
	char uuid[40];
	char storage[1024];   /* storage URL, without credentials */
	char access_key[256]; /* may be empty: taken from the environment */
	char secret_key[256];
	uint32_t block_size; /* bytes, <= 16 MiB */
	uint32_t compress;   /* enum codec_compress */
	uint32_t format_version;
	uint64_t capacity; /* bytes, 0 = unlimited */
	int64_t created;   /* unix seconds */
};

struct meta_opts {
	int pool_size;	 /* connections; 0 = 8 */
	int read_only;	 /* refuse changes to files and the namespace with
			    EROFS; sessions and opens are still recorded */
	int session_ttl; /* seconds without heartbeat before a session is
			    dead; 0 = 60 */
};

struct meta;

int meta_open(const char *url, const struct meta_opts *opts, struct meta **out);
void meta_close(struct meta *m); /* NULL-safe; ends the session if any */
/* The URL with any password replaced by "****", for messages. */
void meta_url_redact(const char *url, char *buf, size_t cap);

/* ---- volume ---------------------------------------------------------- */
/* Write settings and the root directory; META_EEXIST unless force (force
 * wipes every granary key in the database first). */
int meta_format(struct meta *m, const struct meta_volume *v, int force);
/* META_EVERSION (logged: what to do) when the volume's format is not
 * META_FORMAT_VERSION; v is filled all the same. */
int meta_load_volume(struct meta *m, struct meta_volume *v);
/*
 * Rewrite a volume of an older format version into META_FORMAT_VERSION
 * (SCHEMA.md, "Upgrades"), in place. Refused with EBUSY while a client
 * has it mounted (a session with a heartbeat within the session TTL). An
 * interrupted upgrade is finished by running it again; the volume's
 * format_version changes last. *from gets the version found (= current:
 * nothing was done), *n the records rewritten.
 */
int meta_upgrade(struct meta *m, uint32_t *from, uint64_t *n);
struct meta_usage {
	uint64_t used_bytes; /* the stored bytes of every file (usedspace) */
	uint64_t inodes;
};
int meta_usage(struct meta *m, struct meta_usage *u);
/*
 * For a client's capacity gate (fs/space.h), in one round trip: publish
 * the bytes this session has accepted and not committed yet (0 clears
 * them; nothing is published without a session), and read the volume's
 * usedspace and the bytes every other session has published. A session's
 * bytes are removed when it closes or is cleaned up as dead.
 */
int meta_space_usage(struct meta *m, uint64_t pending, uint64_t *used,
		     uint64_t *others);

/* ---- sessions -------------------------------------------------------- */
/* Register this client (starts a heartbeat thread; cleans up sessions of
 * dead clients: their open files, their orphaned inodes). */
int meta_session_open(struct meta *m, const char *mountpoint);
int meta_session_close(struct meta *m);
uint64_t meta_session_id(struct meta *m);
struct meta_session {
	uint64_t sid;
	char host[256], mountpoint[1024];
	int64_t pid, started, heartbeat;
	uint64_t staged_packs, staged_bytes; /* see meta_session_staged */
};
/* Publish how much this session holds staged on its node and not yet in
 * the store (writeback), for `granary status`; 0, 0 clears it. */
int meta_session_staged(struct meta *m, uint64_t packs, uint64_t bytes);
int meta_list_sessions(struct meta *m, struct meta_session **out, size_t *n);
/* Remove sessions whose heartbeat is older than the TTL; *n cleaned. */
int meta_clean_sessions(struct meta *m, size_t *n);

/* ---- namespace ------------------------------------------------------- */
int meta_getattr(struct meta *m, uint64_t ino, struct meta_attr *a);
int meta_lookup(struct meta *m, uint64_t parent, const char *name,
		uint64_t *ino, struct meta_attr *a);
/* meta_lookup that also hands out the slice list of chunk 0 (oldest first,
 * malloc'd, NULL with *n 0 when empty) in the same round trip: for
 * read-only clients, a small file is then one lookup away from its data. */
int meta_lookup_chunk0(struct meta *m, uint64_t parent, const char *name,
		       uint64_t *ino, struct meta_attr *a,
		       struct meta_slice **s, size_t *n);

#define META_SET_MODE	   0x01
#define META_SET_UID	   0x02
#define META_SET_GID	   0x04
#define META_SET_ATIME	   0x08
#define META_SET_MTIME	   0x10
#define META_SET_ATIME_NOW 0x20
#define META_SET_MTIME_NOW 0x40
#define META_SET_CTIME	   0x80 /* touch ctime only */
/* Change the fields named in `set` (values from in); ctime is updated.
 * chown clears setuid/setgid on non-directories as the kernel expects. */
int meta_setattr(struct meta *m, uint64_t ino, int set,
		 const struct meta_attr *in, struct meta_attr *out);
/* Set the length; data past a shorter length is released, and reads of a
 * later extension return zeros. */
int meta_truncate(struct meta *m, uint64_t ino, uint64_t length,
		  struct meta_attr *out);
/* mode 0 or FALLOC_FL_KEEP_SIZE (others EOPNOTSUPP); extends the length to
 * off+len unless KEEP_SIZE. */
int meta_fallocate(struct meta *m, uint64_t ino, int mode, uint64_t off,
		   uint64_t len, struct meta_attr *out);

/* Create a node of `type` (symlink: target). mode has the umask applied.
 * The new inode inherits the parent's gid (and dirs its setgid bit) when
 * the parent is setgid. EEXIST, ENOENT, ENOTDIR, ENAMETOOLONG. */
int meta_mknod(struct meta *m, uint64_t parent, const char *name, uint8_t type,
	       uint16_t mode, uint32_t uid, uint32_t gid, uint32_t rdev,
	       const char *symlink, uint64_t *ino, struct meta_attr *a);
/* meta_mknod of a regular file that also registers an open of it by this
 * session (as meta_file_open would), in the same round trip. *pa (may be
 * NULL) receives the parent's attributes as the create left them. */
int meta_create(struct meta *m, uint64_t parent, const char *name,
		uint16_t mode, uint32_t uid, uint32_t gid, uint64_t *ino,
		struct meta_attr *a, struct meta_attr *pa);
/* Remove a non-directory entry. If that was the last link and the file is
 * open by any live session, the inode stays (nlink 0) until the last
 * meta_file_close; otherwise its data is queued for reclamation. */
int meta_unlink(struct meta *m, uint64_t parent, const char *name);
int meta_rmdir(struct meta *m, uint64_t parent, const char *name);
/* flags: 0, RENAME_NOREPLACE or RENAME_EXCHANGE (linux/fs.h values). */
int meta_rename(struct meta *m, uint64_t parent, const char *name,
		uint64_t newparent, const char *newname, unsigned flags);
int meta_link(struct meta *m, uint64_t ino, uint64_t newparent,
	      const char *newname, struct meta_attr *a);
int meta_readlink(struct meta *m, uint64_t ino, char **target); /* malloc */

struct meta_dirent {
	uint64_t ino;
	uint8_t type;
	char *name;
	struct meta_attr attr;	   /* filled only with plus */
	struct meta_slice *chunk0; /* plus, files: chunk 0's slices (or NULL) */
	size_t nchunk0;
};
/* All entries of a directory ("." and ".." not included). */
int meta_readdir(struct meta *m, uint64_t ino, int plus,
		 struct meta_dirent **ents, size_t *n);
void meta_dirents_free(struct meta_dirent *ents, size_t n);

/* ---- files ----------------------------------------------------------- */
/* Register an open of ino by this session (keeps an unlinked inode alive)
 * and return fresh attributes (close-to-open). */
int meta_file_open(struct meta *m, uint64_t ino, struct meta_attr *a);
/* Drop this session's open; reclaims the inode if it was unlinked. */
int meta_file_close(struct meta *m, uint64_t ino);
/* meta_file_close that also tells whether the inode was deleted (its data
 * then waits for meta_reclaim). freed may be NULL. */
int meta_file_release(struct meta *m, uint64_t ino, int *freed);
/* meta_file_release of n inodes in one round trip (a client's closes,
 * batched: a file may appear more than once, once per open dropped);
 * *freed (may be NULL) counts the inodes deleted. */
int meta_files_release(struct meta *m, const uint64_t *inos, size_t n,
		       size_t *freed);
/* The slice list of one chunk, oldest first (caller frees *s). */
int meta_read_chunk(struct meta *m, uint64_t ino, uint32_t idx,
		    struct meta_slice **s, size_t *n);
/* A new globally unique slice id (handed out in batches). */
int meta_new_slice_id(struct meta *m, uint64_t *id);
/* Append slices (in order) and raise the length to cover them; sets mtime
 * and ctime. *a receives the new attributes if a is not NULL. */
int meta_write(struct meta *m, uint64_t ino, const struct meta_chunk_slice *s,
	       size_t n, struct meta_attr *a);

/* ---- xattrs ---------------------------------------------------------- */
/* flags: XATTR_CREATE / XATTR_REPLACE. ENODATA when missing. */
int meta_setxattr(struct meta *m, uint64_t ino, const char *name,
		  const void *value, size_t size, int flags);
int meta_getxattr(struct meta *m, uint64_t ino, const char *name, void **value,
		  size_t *size);
/* Names, each NUL-terminated, concatenated (malloc'd). */
int meta_listxattr(struct meta *m, uint64_t ino, char **names, size_t *size);
int meta_removexattr(struct meta *m, uint64_t ino, const char *name);

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
 * all of src; see struct meta_cred), ECANCELED (the half-made copy
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
#define META_VERSIONS	     ".versions"
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
 * deleted before return (or by a later meta_snapshot_cleanup). */
int meta_version_rm(struct meta *m, uint64_t dir, const char *tag);
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

/* ---- packs ----------------------------------------------------------- */
/* Packs get their ids from the slice id sequence (meta_new_slice_id). */
#define META_PACK_OPEN (UINT64_C(1) << 52) /* total of a pack still filling */
/*
 * Record the total bytes of pack `pack` (the sum of its frames). Before a
 * pack's first slice is committed, its total must be recorded: a pack still
 * being filled gets META_PACK_OPEN, then its real total when sealed. The
 * dead bytes of a pack (frames whose slice lost its last reference) are
 * counted by meta_reclaim; *dead is set to 1 when they already cover the
 * total: the pack is forgotten and its object must be deleted (or never
 * uploaded). A total of 0 (a pack that got no frame) forgets the pack.
 * dead may be NULL.
 */
int meta_pack_total(struct meta *m, uint64_t pack, uint64_t total, int *dead);
/* Total and dead bytes of a pack; ENOENT when the volume does not know it
 * (never recorded, or already reclaimed). */
int meta_pack_usage(struct meta *m, uint64_t pack, uint64_t *total,
		    uint64_t *dead);

/*
 * Writeback against reclamation by any client (SCHEMA.md, "Staging"): name
 * an object staged on this node's disk (kind 'b': block idx of slice id;
 * kind 'p': pack id) before anything that references it is committed, and
 * say when it is in the store, or never will be (done). While a dead
 * slice or pack has an object named, meta_reclaim keeps its record back:
 * a delete before the staged put would leave the object behind.
 */
int meta_staging_mark(struct meta *m, char kind, uint64_t id, uint32_t idx);
int meta_staging_done(struct meta *m, char kind, uint64_t id, uint32_t idx);

/* ---- reclamation ----------------------------------------------------- */
/*
 * Advance background reclamation (deleted inodes, truncated chunks) and
 * hand out up to cap objects that no longer have any reference: the caller
 * deletes them. An entry with pack == 0 is a slice (delete its blocks); one
 * with id == 0 and pack != 0 is a whole pack whose every frame is dead
 * (delete the pack object). A dead frame of a pack that still has live
 * frames only adds to the pack's dead bytes. *n = 0 when there is nothing
 * left to do.
 */
int meta_reclaim(struct meta *m, struct meta_slice *dead, size_t cap,
		 size_t *n);

#endif
