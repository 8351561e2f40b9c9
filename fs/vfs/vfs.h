/*
 * vfs.h - the client's file system, below FUSE: what the FUSE adapter
 * (fs/fuse/) calls, one function per operation, with no FUSE type in
 * sight. It keeps the node table, open handles, the name cache, the
 * control plane (virtual xattrs), the capacity gate and the reclaimer, and
 * reaches metadata through meta.h and data through fs/data/.
 *
 * Inode numbers are the kernel's: VFS_ROOT_ID stands for the mounted root
 * (the volume root, or --subdir); every other number is the volume's.
 * Functions return 0 or an error (a positive errno, or a project code of
 * lib/errors.h, which the adapter answers as EIO). Attribute results carry
 * the timeout the kernel may keep them for. All of it is thread-safe.
 */
#ifndef GRANARY_VFS_H
#define GRANARY_VFS_H

#include <stddef.h>
#include <stdint.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "fs/fs.h"

#define VFS_ROOT_ID 1 /* FUSE_ROOT_ID */

/* vfs_setattr's set: the kernel's FUSE_SET_ATTR_* bits */
#define VFS_SET_MODE	  (1 << 0)
#define VFS_SET_UID	  (1 << 1)
#define VFS_SET_GID	  (1 << 2)
#define VFS_SET_SIZE	  (1 << 3)
#define VFS_SET_ATIME	  (1 << 4)
#define VFS_SET_MTIME	  (1 << 5)
#define VFS_SET_ATIME_NOW (1 << 7)
#define VFS_SET_MTIME_NOW (1 << 8)
#define VFS_SET_CTIME	  (1 << 10)
/* vfs_rename's flags: renameat2's */
#define VFS_RENAME_NOREPLACE (1 << 0)
#define VFS_RENAME_EXCHANGE  (1 << 1)

struct fs;
struct vfs_fh;
struct vfs_dh;

/* What the kernel side offers the vfs, set by the adapter before the
 * first request: cache invalidations, and whether a direct_io open may
 * be mapped shared (fusedev.h). */
struct vfs_kernel {
	void (*inval_inode)(void *arg, uint64_t ino, off_t off, off_t len);
	void (*inval_entry)(void *arg, uint64_t parent, const char *name);
	int (*dio_mmap)(void *arg);
	void *arg;
};

/* Who asks. groups (supplementary, may be NULL) are needed only by the
 * control operations (vfs_ctl_wants_groups). pid: the calling process
 * in the daemon's pid namespace (0: not known, another namespace). */
struct vfs_caller {
	uint32_t uid, gid;
	uint32_t ngroups;
	const uint32_t *groups;
	uint32_t pid;
};

/* A name the kernel now knows (one more lookup of ino: vfs_forget). */
struct vfs_entry {
	uint64_t ino;
	struct stat attr;
	double attr_timeout, entry_timeout;
};

/* How an open is served. */
struct vfs_open {
	struct vfs_fh *fh;
	int keep_cache; /* the kernel may keep the pages it has */
	int direct_io;	/* reads and writes go past the page cache */
};

/* ---- life ----------------------------------------------------------- */
/* Everything below FUSE: metadata, store, caches, pools, session. On
 * failure, msg (cap bytes) says why, without secrets. */
int vfs_open_fs(const struct fs_opts *o, struct fs **out, char *msg,
		size_t cap);
void vfs_set_kernel(struct fs *fs, const struct vfs_kernel *k);
/* The mount is up: start the background work (reclamation). */
void vfs_started(struct fs *fs);
/* Write back every buffered write (the kernel's destroy, the unmount). */
void vfs_flush_all(struct fs *fs);
/* After the unmount: flush, stop and free everything. NULL-safe. */
void vfs_close_fs(struct fs *fs);
/* EIO once the volume is gone from under this client (restored from a
 * dump while mounted, its database emptied or given another volume: the
 * log says which), for good: the adapter then answers every request with
 * it, but the forgets and the releases, which it still hands on. Else 0.
 * Lock-free. */
int vfs_gone(struct fs *fs);
int vfs_read_only(const struct fs *fs);
uint64_t vfs_direct_read(const struct fs *fs); /* UINT64_MAX: off */
const char *vfs_volume_name(const struct fs *fs);

/* ---- the operations, counted (metrics.h) ---------------------------- */
/* The kernel's requests the adapter answers, by kind; X(name) each. */
#define VFS_OPS(X)                                                            \
	X(lookup) X(forget) X(getattr) X(setattr) X(readlink) X(mknod)        \
	X(mkdir) X(symlink) X(unlink) X(rmdir) X(rename) X(link) X(open)      \
	X(create) X(read) X(write) X(flush) X(fsync) X(release)               \
	X(fallocate) X(copy_file_range) X(getlk) X(setlk) X(flock)            \
	X(opendir) X(readdir) X(readdirplus) X(releasedir) X(fsyncdir)        \
	X(statfs) X(access) X(setxattr) X(getxattr) X(listxattr)              \
	X(removexattr)
#define VFS_OP_ENUM(n) VFS_OP_##n,
enum vfs_op { VFS_OPS(VFS_OP_ENUM) VFS_OP_N };
#undef VFS_OP_ENUM
const char *vfs_op_name(enum vfs_op op);
/*
 * The adapter answered a request: op on inode ino (for an op with a name,
 * the directory's, and name the entry's; else name NULL) with err (0 or a
 * positive errno, as answered), ns nanoseconds after it came, bytes the
 * data it moved (read, write). Counted for the metrics, and written to
 * the access log when it is on. Lock-free but for the access log's copy
 * of its line; any thread.
 */
void vfs_op_done(struct fs *fs, enum vfs_op op, uint64_t ino,
		 const char *name, int err, uint64_t ns, uint64_t bytes);

/* ---- names and attributes ------------------------------------------- */
/* The trash (META_TRASH at the volume's root) is root's: other callers'
 * lookups and listings do not find it. */
int vfs_lookup(struct fs *fs, const struct vfs_caller *c, uint64_t parent,
	       const char *name, struct vfs_entry *e);
void vfs_forget(struct fs *fs, uint64_t ino, uint64_t nlookup);
int vfs_getattr(struct fs *fs, uint64_t ino, struct stat *st, double *timeout);
/* set: VFS_SET_* bits */
int vfs_setattr(struct fs *fs, uint64_t ino, const struct stat *in, int set,
		struct stat *st, double *timeout);
int vfs_readlink(struct fs *fs, uint64_t ino, char **target); /* malloc */
/* mknod, mkdir (S_IFDIR in mode), symlink (link != NULL) */
int vfs_mknod(struct fs *fs, const struct vfs_caller *c, uint64_t parent,
	      const char *name, mode_t mode, dev_t rdev, const char *link,
	      struct vfs_entry *e);
int vfs_unlink(struct fs *fs, uint64_t parent, const char *name);
int vfs_rmdir(struct fs *fs, uint64_t parent, const char *name);
int vfs_rename(struct fs *fs, uint64_t parent, const char *name,
	       uint64_t newparent, const char *newname, unsigned flags);
int vfs_link(struct fs *fs, uint64_t ino, uint64_t newparent,
	     const char *newname, struct vfs_entry *e);
int vfs_statfs(struct fs *fs, struct statvfs *sv);

/* ---- files ---------------------------------------------------------- */
/* c (may be NULL): who opens; an open for reading moves the epoch plans
 * that name the file (plan.h) */
int vfs_open(struct fs *fs, const struct vfs_caller *c, uint64_t ino, int flags,
	     struct vfs_open *o);
int vfs_create(struct fs *fs, const struct vfs_caller *c, uint64_t parent,
	       const char *name, mode_t mode, int flags, struct vfs_entry *e,
	       struct vfs_open *o);
/* An open the kernel never saw (its reply was interrupted). */
void vfs_open_undo(struct fs *fs, struct vfs_fh *fh);
/*
 * Read: emit(arg, iov, n) once with the bytes (in pieces: cached blocks
 * are not copied); EOF gives n 0. The pieces are valid during emit only.
 */
int vfs_read(struct fs *fs, struct vfs_fh *fh, uint64_t off, size_t size,
	     void (*emit)(void *arg, const struct iovec *iov, int n),
	     void *arg);
int vfs_write(struct fs *fs, const struct vfs_caller *c, struct vfs_fh *fh,
	      const char *buf, size_t size, uint64_t off);
int vfs_flush(struct fs *fs, struct vfs_fh *fh);
void vfs_release(struct fs *fs, struct vfs_fh *fh);
int vfs_fallocate(struct fs *fs, struct vfs_fh *fh, int mode, off_t off,
		  off_t len);
/* *copied: bytes shared; EOPNOTSUPP when it is not a whole-file copy */
int vfs_copy_file_range(struct fs *fs, struct vfs_fh *in, off_t off_in,
			struct vfs_fh *out, off_t off_out, size_t len,
			int flags, size_t *copied);

/* ---- directories ---------------------------------------------------- */
/* keep: the kernel may cache the listing (read-only mounts) */
int vfs_opendir(struct fs *fs, uint64_t ino, struct vfs_dh **dh, int *keep);
/*
 * Entries from offset off (1 ".", 2 "..", then the names): add(arg, name,
 * st, e, next) for each until it returns nonzero (the buffer is full);
 * with plus, e (NULL for . and ..) is a lookup the kernel takes when add
 * returns 0.
 */
int vfs_readdir(struct fs *fs, const struct vfs_caller *c, struct vfs_dh *dh,
		uint64_t ino, off_t off, int plus,
		int (*add)(void *arg, const char *name, const struct stat *st,
			   const struct vfs_entry *e, off_t next),
		void *arg);
void vfs_releasedir(struct fs *fs, struct vfs_dh *dh);

/* ---- xattrs, and the control plane in them -------------------------- */
/* Does a request for xattr name need the caller's groups? (every
 * control operation, "granary.*": ctl.c checks the caller itself) */
int vfs_ctl_wants_groups(const char *name);
int vfs_setxattr(struct fs *fs, const struct vfs_caller *c, uint64_t ino,
		 const char *name, const void *value, size_t size, int flags);
/* *value malloc'd. value NULL: only the size is asked (a probe: the
 * adapter's request of size 0); *size may then be more than the value
 * will be, and the epoch plans' calls that change something do nothing
 * (plan.h), as a caller that probes asks again with a buffer. */
int vfs_getxattr(struct fs *fs, const struct vfs_caller *c, uint64_t ino,
		 const char *name, void **value, size_t *size);
int vfs_listxattr(struct fs *fs, uint64_t ino, char **names, size_t *size);
/* system.* names (ctl.c): a set is EOPNOTSUPP, a removal the owner's or
 * root's (EPERM) */
int vfs_removexattr(struct fs *fs, const struct vfs_caller *c, uint64_t ino,
		    const char *name);

/* ---- file locks (lock.c) ---------------------------------------------- */
/*
 * flock(2) and fcntl(2) locks, granted through the metadata: they hold
 * between every client of the volume. owner is the kernel's lock owner
 * (per open file for flock, per process for POSIX locks). A request that
 * waits (flock without LOCK_NB, F_SETLKW) polls with a backoff of 5 ms
 * doubling up to 100 ms, asks w (may be NULL) between tries whether the
 * caller gave up (then EINTR), and fails with ENOLCK when VFS_LOCK_WAITERS
 * requests wait already. Without waiting, a lock in the way is EAGAIN.
 */
/* The FUSE loop's worker threads at most (fs/fuse/session.c): each
 * request that waits (an fsync for its pack's PUT, a lock) holds one. */
#define VFS_FUSE_THREADS 128
#define VFS_LOCK_WAITERS 24 /* of those */
struct vfs_wait {
	int (*interrupted)(void *arg);
	void *arg;
};
/* op: LOCK_SH, LOCK_EX or LOCK_UN, with LOCK_NB */
int vfs_flock(struct fs *fs, uint64_t ino, uint64_t owner, int op,
	      const struct vfs_wait *w);
/* F_GETLK: *f (SEEK_SET) becomes a lock in the way, or l_type F_UNLCK;
 * l_pid is the holder's pid on its own node */
int vfs_getlk(struct fs *fs, uint64_t ino, uint64_t owner, struct flock *f);
/* F_SETLK (sleep 0), F_SETLKW (sleep 1) through open file fh; l_pid is
 * the caller's. An owner that never closes fh (an open file description's
 * own locks, F_OFD_SETLK) loses its locks at fh's release (vfs_release). */
int vfs_setlk(struct fs *fs, struct vfs_fh *fh, uint64_t ino, uint64_t owner,
	      const struct flock *f, int sleep, const struct vfs_wait *w);
/* The owner's locks end: its POSIX locks (flock 0) on a flush of a close
 * of fh, its flock lock (flock 1) on the release of the open file. */
void vfs_lock_close(struct fs *fs, struct vfs_fh *fh, uint64_t ino,
		    uint64_t owner, int flock);

#endif
