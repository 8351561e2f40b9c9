/*
 * ops.c - the FUSE adapter: one handler per low-level operation, each
 * turning the request into one call of the vfs (fs/vfs/vfs.h) and its
 * result into exactly one reply. Errors become replies in one place
 * (reply_err). Kernel inode numbers pass through unchanged: the vfs maps
 * FUSE_ROOT_ID (VFS_ROOT_ID) to the mounted root.
 */
#include "fs/fuse/adapter.h"

#include <errno.h>
#include <linux/fs.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/errors.h"
#include "lib/fsutil.h"
#include "lib/log.h"

_Static_assert(FUSE_ROOT_ID == VFS_ROOT_ID, "root inode");
_Static_assert(FUSE_SET_ATTR_MODE == VFS_SET_MODE &&
		   FUSE_SET_ATTR_UID == VFS_SET_UID &&
		   FUSE_SET_ATTR_GID == VFS_SET_GID &&
		   FUSE_SET_ATTR_SIZE == VFS_SET_SIZE &&
		   FUSE_SET_ATTR_ATIME == VFS_SET_ATIME &&
		   FUSE_SET_ATTR_MTIME == VFS_SET_MTIME &&
		   FUSE_SET_ATTR_ATIME_NOW == VFS_SET_ATIME_NOW &&
		   FUSE_SET_ATTR_MTIME_NOW == VFS_SET_MTIME_NOW &&
		   FUSE_SET_ATTR_CTIME == VFS_SET_CTIME,
	       "setattr bits");
_Static_assert(RENAME_NOREPLACE == VFS_RENAME_NOREPLACE &&
		   RENAME_EXCHANGE == VFS_RENAME_EXCHANGE,
	       "rename flags");

static struct fs *fs_of(fuse_req_t req)
{
	return ((struct gfuse *)fuse_req_userdata(req))->fs;
}

static struct vfs_fh *fh_of(const struct fuse_file_info *fi)
{
	return (struct vfs_fh *)(uintptr_t)fi->fh;
}

static struct vfs_caller caller_of(fuse_req_t req)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	return (struct vfs_caller){
	    .uid = ctx->uid, .gid = ctx->gid, .pid = (uint32_t)ctx->pid};
}

/*
 * Each request is timed from its handler's entry (op_begin) to its reply:
 * the handlers answer on their own thread before they return, so the
 * request being answered is the thread's. Every fuse_reply_* below goes
 * through op_end first (the macros), which counts it once (vfs_op_done:
 * the metrics and the access log). One clock read at each end.
 */
struct op_now {
	struct fs *fs; /* NULL: no request being answered */
	enum vfs_op op;
	uint64_t ino;
	const char *name; /* the request's, valid until the reply */
	int64_t t0;
	uint64_t bytes; /* read or written, set before the reply */
};
static __thread struct op_now op_now;

/* Start a request; EIO (then the handler answers it with that at once) when
 * the volume is gone from under this client (vfs_gone: restored from a
 * dump while mounted...), else 0. */
static int op_begin(fuse_req_t req, enum vfs_op op, uint64_t ino,
		    const char *name)
{
	op_now =
	    (struct op_now){fs_of(req), op, ino, name, fsutil_mono_ns(), 0};
	return vfs_gone(op_now.fs);
}

static void op_end(int err)
{
	struct fs *fs = op_now.fs;

	if (!fs)
		return;
	op_now.fs = NULL;
	int64_t dt = fsutil_mono_ns() - op_now.t0;
	vfs_op_done(fs, op_now.op, op_now.ino, op_now.name, err,
		    dt > 0 ? (uint64_t)dt : 0, op_now.bytes);
}

/* Function-like macros do not expand inside themselves: the libfuse call
 * is the real one. */
#define fuse_reply_err(r, e)	    (op_end(e), fuse_reply_err(r, e))
#define fuse_reply_none(r)	    (op_end(0), fuse_reply_none(r))
#define fuse_reply_entry(r, p)	    (op_end(0), fuse_reply_entry(r, p))
#define fuse_reply_create(r, p, fi) (op_end(0), fuse_reply_create(r, p, fi))
#define fuse_reply_attr(r, a, t)    (op_end(0), fuse_reply_attr(r, a, t))
#define fuse_reply_readlink(r, l)   (op_end(0), fuse_reply_readlink(r, l))
#define fuse_reply_open(r, fi)	    (op_end(0), fuse_reply_open(r, fi))
#define fuse_reply_write(r, n)	    (op_end(0), fuse_reply_write(r, n))
#define fuse_reply_buf(r, b, n)	    (op_end(0), fuse_reply_buf(r, b, n))
#define fuse_reply_iov(r, v, n)	    (op_end(0), fuse_reply_iov(r, v, n))
#define fuse_reply_statfs(r, s)	    (op_end(0), fuse_reply_statfs(r, s))
#define fuse_reply_xattr(r, n)	    (op_end(0), fuse_reply_xattr(r, n))
#define fuse_reply_lock(r, l)	    (op_end(0), fuse_reply_lock(r, l))

/* The one place errors become FUSE replies: project codes are EIO. */
static void reply_err(fuse_req_t req, const char *op, int err)
{
	if (err < 0) {
		log_err("%s: %s", op, gr_strerror(err));
		err = EIO;
	}
	fuse_reply_err(req, err);
}

/* The answer to every request of a client whose volume is gone (op_begin):
 * the log said why once; no line per request. */
static void reply_gone(fuse_req_t req)
{
	fuse_reply_err(req, EIO);
}

static void fill_entry(struct fuse_entry_param *p, const struct vfs_entry *e)
{
	memset(p, 0, sizeof(*p));
	p->ino = e->ino;
	p->generation = 1;
	p->attr = e->attr;
	p->attr_timeout = e->attr_timeout;
	p->entry_timeout = e->entry_timeout;
}

/* A new name, or the error; an entry the kernel did not get (the request
 * was interrupted) is forgotten again. */
static void reply_entry(fuse_req_t req, const char *op, int err,
			const struct vfs_entry *e)
{
	struct fuse_entry_param p;
	if (err)
		return reply_err(req, op, err);
	fill_entry(&p, e);
	if (fuse_reply_entry(req, &p) == -ENOENT)
		vfs_forget(fs_of(req), e->ino, 1);
}

/* ---- lifecycle ------------------------------------------------------ */

static int dio_mmap(void *arg)
{
	return fusedev_dio_mmap(&((struct gfuse *)arg)->dev);
}

static void inval_inode(void *arg, uint64_t ino, off_t off, off_t len)
{
	fuse_lowlevel_notify_inval_inode(((struct gfuse *)arg)->se, ino, off,
					 len);
}

static void inval_entry(void *arg, uint64_t parent, const char *name)
{
	fuse_lowlevel_notify_inval_entry(((struct gfuse *)arg)->se, parent,
					 name, strlen(name));
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct gfuse *g = userdata;
	struct vfs_kernel k = {inval_inode, inval_entry, dio_mmap, g};
	vfs_set_kernel(g->fs, &k);
	pthread_mutex_lock(&g->ready_lock);
	g->inited = 1;
	pthread_cond_broadcast(&g->ready_cond);
	pthread_mutex_unlock(&g->ready_lock);
	conn->want |= FUSE_CAP_ASYNC_READ;
	if (conn->capable & FUSE_CAP_READDIRPLUS)
		conn->want |= FUSE_CAP_READDIRPLUS;
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	if (conn->capable & FUSE_CAP_AUTO_INVAL_DATA)
		conn->want |= FUSE_CAP_AUTO_INVAL_DATA;
	/* page cache is kept across opens only when we say so (keep_cache) */
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	conn->want &= ~FUSE_CAP_ATOMIC_O_TRUNC;
	/* the kernel clears setuid/setgid on write, truncate and chown with
	 * a mode change (a setattr) when we do not claim to handle it */
	conn->want &= ~FUSE_CAP_HANDLE_KILLPRIV;
	/* locks go to the daemon, which grants them through the metadata
	 * so that they hold between clients (fs/vfs/lock.c) */
	if (conn->capable & FUSE_CAP_POSIX_LOCKS)
		conn->want |= FUSE_CAP_POSIX_LOCKS;
	if (conn->capable & FUSE_CAP_FLOCK_LOCKS)
		conn->want |= FUSE_CAP_FLOCK_LOCKS;
	/* symlink targets never change: let the kernel cache them */
	if (conn->capable & FUSE_CAP_CACHE_SYMLINKS)
		conn->want |= FUSE_CAP_CACHE_SYMLINKS;
	/* dev saw the kernel's INIT; its reply is sent after this returns */
	if (g->dev.want && g->dev.offered)
		log_info("read-only opens of files of %.1f MiB or more read "
			 "past the page cache",
			 (double)vfs_direct_read(g->fs) / (1 << 20));
	else if (g->dev.want)
		log_info("this kernel maps no direct_io file shared (Linux "
			 "6.6 does): every file is read through the page "
			 "cache");
	conn->max_write = 1 << 20;
	conn->max_readahead = KERNEL_RA_BYTES;
	conn->max_background = 64;
	conn->congestion_threshold = 48;
}

static void op_destroy(void *userdata)
{
	vfs_flush_all(((struct gfuse *)userdata)->fs);
}

/* ---- names and attributes ------------------------------------------- */

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	if (op_begin(req, VFS_OP_lookup, parent, name))
		return reply_gone(req);
	struct vfs_entry e;
	struct vfs_caller c = caller_of(req);
	int err = vfs_lookup(fs_of(req), &c, parent, name, &e);
	reply_entry(req, "lookup", err, &e);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	(void)op_begin(req, VFS_OP_forget, ino, NULL);
	vfs_forget(fs_of(req), ino, nlookup);
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count,
			    struct fuse_forget_data *forgets)
{
	(void)op_begin(req, VFS_OP_forget, 0, NULL);
	for (size_t i = 0; i < count; i++)
		vfs_forget(fs_of(req), forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

/*
 * An inode the kernel holds by a cached name that another client removed
 * (a file renamed over, or unlinked, on another node): ESTALE, not ENOENT,
 * so that the kernel looks the name up again (open and stat retry a path
 * walk once with revalidation on ESTALE) and finds what the name is now:
 * close-to-open across a rename (t0242).
 */
static int stale(int err)
{
	return err == ENOENT ? ESTALE : err;
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	if (op_begin(req, VFS_OP_getattr, ino, NULL))
		return reply_gone(req);
	struct stat st;
	double timeout;
	(void)fi;
	int err = vfs_getattr(fs_of(req), ino, &st, &timeout);
	if (err)
		return reply_err(req, "getattr", stale(err));
	fuse_reply_attr(req, &st, timeout);
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *in,
		       int to_set, struct fuse_file_info *fi)
{
	if (op_begin(req, VFS_OP_setattr, ino, NULL))
		return reply_gone(req);
	struct stat st;
	double timeout;
	(void)fi;
	int err = vfs_setattr(fs_of(req), ino, in, to_set, &st, &timeout);
	if (err)
		return reply_err(req, "setattr", err);
	fuse_reply_attr(req, &st, timeout);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	if (op_begin(req, VFS_OP_readlink, ino, NULL))
		return reply_gone(req);
	char *target;
	int err = vfs_readlink(fs_of(req), ino, &target);
	if (err)
		return reply_err(req, "readlink", err);
	fuse_reply_readlink(req, target);
	free(target);
}

static void make_node(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode, dev_t rdev, const char *link)
{
	struct vfs_caller c = caller_of(req);
	struct vfs_entry e;
	int err = vfs_mknod(fs_of(req), &c, parent, name, mode, rdev, link, &e);
	reply_entry(req, "create", err, &e);
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode, dev_t rdev)
{
	if (op_begin(req, VFS_OP_mknod, parent, name))
		return reply_gone(req);
	make_node(req, parent, name, mode, rdev, NULL);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode)
{
	if (op_begin(req, VFS_OP_mkdir, parent, name))
		return reply_gone(req);
	make_node(req, parent, name, S_IFDIR | (mode & 07777), 0, NULL);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
		       const char *name)
{
	if (op_begin(req, VFS_OP_symlink, parent, name))
		return reply_gone(req);
	make_node(req, parent, name, S_IFLNK | 0777, 0, link);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	if (op_begin(req, VFS_OP_unlink, parent, name))
		return reply_gone(req);
	reply_err(req, "unlink", vfs_unlink(fs_of(req), parent, name));
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	if (op_begin(req, VFS_OP_rmdir, parent, name))
		return reply_gone(req);
	reply_err(req, "rmdir", vfs_rmdir(fs_of(req), parent, name));
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname,
		      unsigned int flags)
{
	if (op_begin(req, VFS_OP_rename, parent, name))
		return reply_gone(req);
	reply_err(
	    req, "rename",
	    vfs_rename(fs_of(req), parent, name, newparent, newname, flags));
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
		    const char *newname)
{
	if (op_begin(req, VFS_OP_link, newparent, newname))
		return reply_gone(req);
	struct vfs_entry e;
	int err = vfs_link(fs_of(req), ino, newparent, newname, &e);
	reply_entry(req, "link", err, &e);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	if (op_begin(req, VFS_OP_statfs, ino, NULL))
		return reply_gone(req);
	struct statvfs sv;
	(void)ino;
	int err = vfs_statfs(fs_of(req), &sv);
	if (err)
		return reply_err(req, "statfs", err);
	fuse_reply_statfs(req, &sv);
}

static void op_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
	if (op_begin(req, VFS_OP_access, ino, NULL))
		return reply_gone(req);
	/* default_permissions: the kernel has checked already */
	(void)ino;
	(void)mask;
	fuse_reply_err(req, 0);
}

/* ---- files ---------------------------------------------------------- */

static void set_open(struct fuse_file_info *fi, const struct vfs_open *o)
{
	fi->fh = (uintptr_t)o->fh;
	fi->keep_cache = o->keep_cache;
	fi->direct_io = o->direct_io;
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (op_begin(req, VFS_OP_open, ino, NULL))
		return reply_gone(req);
	struct vfs_caller c = caller_of(req);
	struct vfs_open o;
	int err = vfs_open(fs_of(req), &c, ino, fi->flags, &o);
	if (err)
		return reply_err(req, "open", stale(err));
	set_open(fi, &o);
	/* interrupted: the kernel will not release it */
	if (fuse_reply_open(req, fi) == -ENOENT)
		vfs_open_undo(fs_of(req), o.fh);
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode, struct fuse_file_info *fi)
{
	if (op_begin(req, VFS_OP_create, parent, name))
		return reply_gone(req);
	struct vfs_caller c = caller_of(req);
	struct fuse_entry_param p;
	struct vfs_entry e;
	struct vfs_open o;
	int err =
	    vfs_create(fs_of(req), &c, parent, name, mode, fi->flags, &e, &o);
	if (err)
		return reply_err(req, "create", err);
	set_open(fi, &o);
	fill_entry(&p, &e);
	if (fuse_reply_create(req, &p, fi) == -ENOENT) {
		vfs_forget(fs_of(req), e.ino, 1);
		vfs_open_undo(fs_of(req), o.fh);
	}
}

static void reply_read(void *arg, const struct iovec *iov, int n)
{
	for (int i = 0; i < n; i++)
		op_now.bytes += iov[i].iov_len;
	fuse_reply_iov(arg, iov, n);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	if (op_begin(req, VFS_OP_read, ino, NULL))
		return reply_gone(req);
	(void)ino;
	/* reply_read sends the reply when vfs_read succeeds */
	int err = vfs_read(fs_of(req), fh_of(fi), (uint64_t)off, size,
			   reply_read, req);
	if (err)
		reply_err(req, "read", err);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
		     size_t size, off_t off, struct fuse_file_info *fi)
{
	if (op_begin(req, VFS_OP_write, ino, NULL))
		return reply_gone(req);
	struct vfs_caller c = caller_of(req);
	(void)ino;
	int err =
	    vfs_write(fs_of(req), &c, fh_of(fi), buf, size, (uint64_t)off);
	if (err)
		return reply_err(req, "write", err);
	op_now.bytes = size;
	fuse_reply_write(req, size);
}

/* A close: the kernel names the closing process's lock owner, whose POSIX
 * locks on the file end with it (it keeps none of them itself). */
static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (op_begin(req, VFS_OP_flush, ino, NULL))
		return reply_gone(req);
	vfs_lock_close(fs_of(req), fh_of(fi), ino, fi->lock_owner, 0);
	reply_err(req, "flush", vfs_flush(fs_of(req), fh_of(fi)));
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
		     struct fuse_file_info *fi)
{
	if (op_begin(req, VFS_OP_fsync, ino, NULL))
		return reply_gone(req);
	(void)ino;
	(void)datasync;
	reply_err(req, "fsync", vfs_flush(fs_of(req), fh_of(fi)));
}

static void op_release(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	(void)op_begin(req, VFS_OP_release, ino, NULL);
	/* the last close of an open file that took a flock lock */
	if (fi->flock_release)
		vfs_lock_close(fs_of(req), fh_of(fi), ino, fi->lock_owner, 1);
	vfs_release(fs_of(req), fh_of(fi));
	fuse_reply_err(req, 0);
}

static void op_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
			       struct fuse_file_info *fi_in, fuse_ino_t ino_out,
			       off_t off_out, struct fuse_file_info *fi_out,
			       size_t len, int flags)
{
	if (op_begin(req, VFS_OP_copy_file_range, ino_out, NULL))
		return reply_gone(req);
	size_t n = 0;
	(void)ino_in;
	(void)ino_out;
	int err = vfs_copy_file_range(fs_of(req), fh_of(fi_in), off_in,
				      fh_of(fi_out), off_out, len, flags, &n);
	if (err)
		return reply_err(req, "copy_file_range", err);
	fuse_reply_write(req, n);
}

static void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off,
			 off_t len, struct fuse_file_info *fi)
{
	if (op_begin(req, VFS_OP_fallocate, ino, NULL))
		return reply_gone(req);
	(void)ino;
	reply_err(req, "fallocate",
		  vfs_fallocate(fs_of(req), fh_of(fi), mode, off, len));
}

/* ---- locks: flock(2) and fcntl(2), held across clients (vfs.h) ------- */

static int lock_interrupted(void *arg)
{
	return fuse_req_interrupted(arg);
}

static void op_getlk(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
		     struct flock *lock)
{
	if (op_begin(req, VFS_OP_getlk, ino, NULL))
		return reply_gone(req);
	int err = vfs_getlk(fs_of(req), ino, fi->lock_owner, lock);
	if (err)
		return reply_err(req, "getlk", err);
	fuse_reply_lock(req, lock);
}

static void op_setlk(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
		     struct flock *lock, int sleep)
{
	if (op_begin(req, VFS_OP_setlk, ino, NULL))
		return reply_gone(req);
	struct vfs_wait w = {lock_interrupted, req};
	reply_err(req, "setlk",
		  vfs_setlk(fs_of(req), fh_of(fi), ino, fi->lock_owner, lock,
			    sleep, &w));
}

static void op_flock(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
		     int op)
{
	if (op_begin(req, VFS_OP_flock, ino, NULL))
		return reply_gone(req);
	struct vfs_wait w = {lock_interrupted, req};
	reply_err(req, "flock",
		  vfs_flock(fs_of(req), ino, fi->lock_owner, op, &w));
}

/* ---- directories ---------------------------------------------------- */

static void op_opendir(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	if (op_begin(req, VFS_OP_opendir, ino, NULL))
		return reply_gone(req);
	struct vfs_dh *d;
	int keep;
	int err = vfs_opendir(fs_of(req), ino, &d, &keep);
	if (err)
		return reply_err(req, "opendir", err);
	fi->fh = (uintptr_t)d;
	fi->cache_readdir = keep;
	fi->keep_cache = keep;
	if (fuse_reply_open(req, fi) == -ENOENT)
		vfs_releasedir(fs_of(req), d);
}

/* A readdir reply being filled. */
struct dirbuf {
	fuse_req_t req;
	char *buf;
	size_t size, pos;
	int plus;
};

static int dir_add(void *arg, const char *name, const struct stat *st,
		   const struct vfs_entry *e, off_t next)
{
	struct dirbuf *b = arg;
	size_t need;

	if (b->plus) {
		struct fuse_entry_param p;
		memset(&p, 0, sizeof(p));
		if (e)
			fill_entry(&p, e);
		else
			p.attr = *st; /* . and ..: no lookup taken */
		need = fuse_add_direntry_plus(b->req, b->buf + b->pos,
					      b->size - b->pos, name, &p, next);
	} else {
		need = fuse_add_direntry(b->req, b->buf + b->pos,
					 b->size - b->pos, name, st, next);
	}
	if (need > b->size - b->pos)
		return 1;
	b->pos += need;
	return 0;
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi, int plus)
{
	struct dirbuf b = {req, malloc(size), size, 0, plus};
	if (!b.buf)
		return reply_err(req, "readdir", ENOMEM);
	struct vfs_caller c = caller_of(req);
	int err =
	    vfs_readdir(fs_of(req), &c, (struct vfs_dh *)(uintptr_t)fi->fh, ino,
			off, plus, dir_add, &b);
	if (err)
		reply_err(req, "readdir", err);
	else
		fuse_reply_buf(req, b.buf, b.pos);
	free(b.buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	if (op_begin(req, VFS_OP_readdir, ino, NULL))
		return reply_gone(req);
	do_readdir(req, ino, size, off, fi, 0);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
			   off_t off, struct fuse_file_info *fi)
{
	if (op_begin(req, VFS_OP_readdirplus, ino, NULL))
		return reply_gone(req);
	do_readdir(req, ino, size, off, fi, 1);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino,
			  struct fuse_file_info *fi)
{
	(void)op_begin(req, VFS_OP_releasedir, ino, NULL);
	(void)ino;
	vfs_releasedir(fs_of(req), (struct vfs_dh *)(uintptr_t)fi->fh);
	fuse_reply_err(req, 0);
}

static void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
			struct fuse_file_info *fi)
{
	if (op_begin(req, VFS_OP_fsyncdir, ino, NULL))
		return reply_gone(req);
	(void)ino;
	(void)datasync;
	(void)fi;
	fuse_reply_err(req, 0); /* metadata changes are durable on return */
}

/* ---- xattrs --------------------------------------------------------- */

/* size 0 asks for the length; a buffer too small is ERANGE */
static void reply_xattr(fuse_req_t req, const char *op, int err, size_t size,
			void *v, size_t n)
{
	if (err)
		reply_err(req, op, err);
	else if (size == 0)
		fuse_reply_xattr(req, n);
	else if (size < n)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, v, n);
	free(v);
}

/*
 * The caller of a request for xattr name, with its supplementary groups
 * when a control operation checks them (ctl.c); *groups is malloc'd (free
 * it, may be NULL). 0 or ENOMEM.
 */
static int xattr_caller(fuse_req_t req, const char *name, struct vfs_caller *c,
			uint32_t **groups)
{
	gid_t small[32], *list = small;
	int err = 0;

	*c = caller_of(req);
	*groups = NULL;
	if (!vfs_ctl_wants_groups(name))
		return 0;
	int n = fuse_req_getgroups(req, 32, small);
	if (n > 32) {
		list = malloc(sizeof(*list) * (size_t)n);
		n = list ? fuse_req_getgroups(req, n, list) : -ENOMEM;
	}
	/* a caller gone already, or no /proc: its gid alone (less, not
	 * more) */
	*groups = n > 0 ? malloc(sizeof(**groups) * (size_t)n) : NULL;
	for (int i = 0; *groups && i < n; i++)
		(*groups)[i] = list[i];
	c->ngroups = *groups ? (uint32_t)n : 0;
	c->groups = *groups;
	if (n == -ENOMEM || (n > 0 && !*groups))
		err = ENOMEM;
	if (list != small)
		free(list);
	return err;
}

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			const char *value, size_t size, int flags)
{
	if (op_begin(req, VFS_OP_setxattr, ino, name))
		return reply_gone(req);
	struct vfs_caller c;
	uint32_t *groups;
	int err = xattr_caller(req, name, &c, &groups);

	if (!err)
		err =
		    vfs_setxattr(fs_of(req), &c, ino, name, value, size, flags);
	free(groups);
	reply_err(req, "setxattr", err);
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			size_t size)
{
	if (op_begin(req, VFS_OP_getxattr, ino, name))
		return reply_gone(req);
	struct vfs_caller c;
	uint32_t *groups;
	void *v = NULL;
	size_t n = 0;
	int err = xattr_caller(req, name, &c, &groups);

	if (!err)
		err = vfs_getxattr(fs_of(req), &c, ino, name, size ? &v : NULL,
				   &n);
	free(groups);
	reply_xattr(req, "getxattr", err, size, v, n);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	if (op_begin(req, VFS_OP_listxattr, ino, NULL))
		return reply_gone(req);
	char *names = NULL;
	size_t n = 0;
	int err = vfs_listxattr(fs_of(req), ino, &names, &n);
	reply_xattr(req, "listxattr", err, size, names, n);
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	if (op_begin(req, VFS_OP_removexattr, ino, name))
		return reply_gone(req);
	struct vfs_caller c = caller_of(req);
	reply_err(req, "removexattr",
		  vfs_removexattr(fs_of(req), &c, ino, name));
}

const struct fuse_lowlevel_ops gfuse_ops = {
    .init = op_init,
    .destroy = op_destroy,
    .lookup = op_lookup,
    .forget = op_forget,
    .forget_multi = op_forget_multi,
    .getattr = op_getattr,
    .setattr = op_setattr,
    .readlink = op_readlink,
    .mknod = op_mknod,
    .mkdir = op_mkdir,
    .symlink = op_symlink,
    .unlink = op_unlink,
    .rmdir = op_rmdir,
    .rename = op_rename,
    .link = op_link,
    .open = op_open,
    .create = op_create,
    .read = op_read,
    .write = op_write,
    .flush = op_flush,
    .fsync = op_fsync,
    .release = op_release,
    .fallocate = op_fallocate,
    .copy_file_range = op_copy_file_range,
    .getlk = op_getlk,
    .setlk = op_setlk,
    .flock = op_flock,
    .opendir = op_opendir,
    .readdir = op_readdir,
    .readdirplus = op_readdirplus,
    .releasedir = op_releasedir,
    .fsyncdir = op_fsyncdir,
    .statfs = op_statfs,
    .access = op_access,
    .setxattr = op_setxattr,
    .getxattr = op_getxattr,
    .listxattr = op_listxattr,
    .removexattr = op_removexattr,
};
