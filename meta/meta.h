/*
 * meta.h - the metadata API: opening an engine, inodes, directory entries,
 * chunk slice lists and xattrs, and the types every part of the API uses.
 * The rest: meta_volume.h (volume settings, usage, sessions), meta_snap.h
 * (snapshots, versions), meta_objects.h (packs, staging, reclamation).
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
#include "lib/metric.h"

#define META_ROOT_INO	    1
#define META_CHUNK_SIZE	    (64u << 20) /* a file is cut into chunks by offset */
#define META_FORMAT_VERSION 2
#define META_NAME_MAX	    255
/* the name that reaches a directory's versions (meta_snap.h): reserved */
#define META_VERSIONS ".versions"
/* the trash at the root of the volume (meta_trash.h): reserved there */
#define META_TRASH ".trash"

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
/* How long a call that did not run (the server was down, restarting,
 * loading its data or busy) is sent again before its error, in seconds
 * (0: at once, the default without sentinels), unless the URL sets
 * failover_timeout: a mount rides out a Redis restart (SCHEMA.md
 * "Connections"). A change sent when the connection failed may have run
 * and still fails at once. */
void meta_set_retry_window(struct meta *m, int seconds);
/* The URL with any password replaced by "****", for messages: every
 * scheme but unix://, the password running from the first ':' of the user
 * information (or its start) to its last '@'. */
void meta_url_redact(const char *url, char *buf, size_t cap);
/* Where that password is: 1 with url[*off, *off + *len), else 0. */
int meta_url_password(const char *url, size_t *off, size_t *len);
/* Round trips to the server since open (pipelines sent and answered, or
 * lost with their connection: errors), with their latency. */
struct meta_round_trips {
	uint64_t count, errors;
	struct metric_hist lat;
};
void meta_get_round_trips(struct meta *m, struct meta_round_trips *out);

/* ---- namespace ------------------------------------------------------- */
int meta_getattr(struct meta *m, uint64_t ino, struct meta_attr *a);
/* meta_getattr that also tells, in *trash_dir, the hour directory of the
 * trash that holds file ino (0: in no trash), in the same round trip
 * (trash_dir NULL: meta_getattr). */
int meta_getattr_trash(struct meta *m, uint64_t ino, struct meta_attr *a,
		       uint64_t *trash_dir);
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
/* What an unlink or a rename left, in the same round trip: for a client
 * to answer the kernel's next GETATTR of the directories from it. */
struct meta_ns_after {
	uint64_t trashed; /* the inode moved into the trash (meta_trash.h),
			     0: none */
	int have;	  /* pa (and npa) were handed out (never for a
			     directory of the trash: unlink) */
	int dirs;	  /* rename: a directory moved or was replaced, or
			     a name left the trash */
	struct meta_attr pa, npa; /* parent's, newparent's (rename) */
};
int meta_unlink_after(struct meta *m, uint64_t parent, const char *name,
		      struct meta_ns_after *out);
int meta_rename_after(struct meta *m, uint64_t parent, const char *name,
		      uint64_t newparent, const char *newname, unsigned flags,
		      struct meta_ns_after *out);
int meta_readlink(struct meta *m, uint64_t ino, char **target); /* malloc */

struct meta_dirent {
	uint64_t ino;
	uint8_t type;
	char *name;
	struct meta_attr attr;	   /* filled only with plus */
	struct meta_slice *chunk0; /* plus, files: chunk 0's slices (or NULL) */
	size_t nchunk0;
	uint8_t noxattr; /* plus: the inode had no xattr at all */
};
/* All entries of a directory ("." and ".." not included). */
int meta_readdir(struct meta *m, uint64_t ino, int plus,
		 struct meta_dirent **ents, size_t *n);
void meta_dirents_free(struct meta_dirent *ents, size_t n);

/* ---- files ----------------------------------------------------------- */
/* Register an open of ino by this session (keeps an unlinked inode alive)
 * and return fresh attributes (close-to-open); *trash_dir (trash_dir may
 * be NULL) as meta_getattr_trash's. */
int meta_file_open(struct meta *m, uint64_t ino, struct meta_attr *a,
		   uint64_t *trash_dir);
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

#endif
