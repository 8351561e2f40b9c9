/*
 * import_dst.c - the destinations of `granary import` (import.h), two
 * backends behind one ops table: a directory of a mounted granary volume,
 * written with plain system calls relative to a descriptor of DEST; or a
 * volume opened in this process with the client's own file system below
 * FUSE (fs/vfs/vfs.h), as a mount would serve it, without the kernel in
 * between and with a pack window of its own.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "fs/fs.h"
#include "fs/vfs/vfs.h"
#include "lib/errors.h"
#include "tools/cli.h"
#include "tools/import.h"

/*
 * Files of a batch write and fsync at once, so that the client seals their
 * pack when all of them are in (fs/data/packer.h: a pack is sealed once
 * every writer holding small data has its frame in it). Through a mount
 * each fsync holds one of the client's FUSE threads until its pack is put
 * (it says how many it has: 128 today, 64 or fewer before it said):
 * batches fsync at once as long as MOUNT_FREE_THREADS stay for the
 * creates and renames of the next ones, two at least.
 */
#define MOUNT_BATCH_MAX	   24
#define MOUNT_FREE_THREADS 16
#define MOUNT_OLD_THREADS  64 /* a client that answers "" */
/* In process: the pack window is only a bound on a batch that does not
 * come together (a slow thread); the batch seals its pack itself. */
#define VFS_PACK_WINDOW_MS 200
#define VFS_MEM_CACHE	   (8u << 20) /* nothing is read back */
#define WRITE_MAX	   (1u << 20) /* bytes a vfs_write takes at once */

struct dst_ops {
	int (*mkdir)(struct imp_dst *d, struct imp_dir *dir, const char *name,
		     mode_t mode, uint64_t *ino, int *made);
	void (*dir_free)(struct imp_dst *d, struct imp_dir *dir);
	int (*stat)(struct imp_dst *d, struct imp_dir *dir, const char *name,
		    struct imp_stat *st);
	int (*readlink)(struct imp_dst *d, struct imp_dir *dir,
			const char *name, char **target);
	int (*create)(struct imp_dst *d, struct imp_dir *dir, const char *name,
		      mode_t mode, struct imp_out *f);
	int (*write)(struct imp_out *f, const void *buf, size_t n,
		     uint64_t off);
	int (*fsync)(struct imp_out *f);
	int (*batch)(struct imp_out *f, uint64_t id, int n); /* may be NULL */
	int (*set_mtime)(struct imp_out *f, const struct timespec *t);
	int (*close)(struct imp_out *f);
	int (*rename)(struct imp_dst *d, struct imp_dir *dir, const char *from,
		      const char *to);
	int (*unlink)(struct imp_dst *d, struct imp_dir *dir, const char *name);
	int (*symlink)(struct imp_dst *d, struct imp_dir *dir, const char *name,
		       const char *target);
	int (*list)(struct imp_dst *d, struct imp_dir *dir,
		    int (*fn)(void *arg, const char *name), void *arg);
	int (*sync)(struct imp_dst *d);
	void (*close_dst)(struct imp_dst *d);
};

struct imp_dst {
	const struct dst_ops *ops;
	int batch_max;
	/* mount */
	int rootfd;
	int batch_hint; /* the client takes "granary.batch" (atomic: 0 once
			   a set failed) */
	int flight;	/* files that may fsync at once (0: any) */
	char *root; /* DEST, canonical */
	/* in process */
	struct fs *fs;
	struct fs_opts o;
	struct vfs_caller caller;
	void *secret;
	size_t secret_len;
};

struct imp_out {
	struct imp_dst *d;
	int fd;		   /* mount */
	struct vfs_fh *fh; /* in process */
	uint64_t ino;	   /* in process: one lookup held */
};

static void stat_of(const struct stat *s, struct imp_stat *st)
{
	st->kind = S_ISREG(s->st_mode)	 ? IMP_FILE
		   : S_ISDIR(s->st_mode) ? IMP_DIR
		   : S_ISLNK(s->st_mode) ? IMP_SYMLINK
					 : IMP_SPECIAL;
	st->size = (uint64_t)s->st_size;
	st->mtime = s->st_mtim;
}

/* ---- a mounted volume ------------------------------------------------- */

/* dir's rel + "/" + name, relative to d->rootfd ("." for DEST). */
static int mpath(const struct imp_dir *dir, const char *name, char *buf)
{
	int n;

	if (!name)
		n = snprintf(buf, PATH_MAX, "%s", *dir->rel ? dir->rel : ".");
	else if (*dir->rel)
		n = snprintf(buf, PATH_MAX, "%s/%s", dir->rel, name);
	else
		n = snprintf(buf, PATH_MAX, "%s", name);
	return n >= PATH_MAX ? ENAMETOOLONG : 0;
}

static int m_mkdir(struct imp_dst *d, struct imp_dir *dir, const char *name,
		   mode_t mode, uint64_t *ino, int *made)
{
	char p[PATH_MAX];
	struct stat st;
	int err = mpath(dir, name, p);

	*ino = 0;
	*made = 0;
	if (err)
		return err;
	if (mkdirat(d->rootfd, p, mode) == 0) {
		*made = 1;
		return 0;
	}
	if (errno != EEXIST)
		return errno;
	if (fstatat(d->rootfd, p, &st, AT_SYMLINK_NOFOLLOW))
		return errno;
	return S_ISDIR(st.st_mode) ? 0 : EEXIST;
}

static void m_dir_free(struct imp_dst *d, struct imp_dir *dir)
{
	(void)d;
	(void)dir;
}

static int m_stat(struct imp_dst *d, struct imp_dir *dir, const char *name,
		  struct imp_stat *st)
{
	char p[PATH_MAX];
	struct stat s;
	int err = mpath(dir, name, p);

	if (err)
		return err;
	if (fstatat(d->rootfd, p, &s, AT_SYMLINK_NOFOLLOW))
		return errno;
	stat_of(&s, st);
	return 0;
}

static int m_readlink(struct imp_dst *d, struct imp_dir *dir, const char *name,
		      char **target)
{
	char p[PATH_MAX], t[PATH_MAX];
	int err = mpath(dir, name, p);
	ssize_t n;

	if (err)
		return err;
	if ((n = readlinkat(d->rootfd, p, t, sizeof(t) - 1)) < 0)
		return errno;
	t[n] = '\0';
	return (*target = strdup(t)) ? 0 : ENOMEM;
}

static int m_create(struct imp_dst *d, struct imp_dir *dir, const char *name,
		    mode_t mode, struct imp_out *f)
{
	char p[PATH_MAX];
	int err = mpath(dir, name, p);

	if (err)
		return err;
	f->fd =
	    openat(d->rootfd, p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
	return f->fd < 0 ? errno : 0;
}

static int m_write(struct imp_out *f, const void *buf, size_t n, uint64_t off)
{
	while (n) {
		ssize_t k = pwrite(f->fd, buf, n, (off_t)off);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return errno;
		if (k == 0)
			return EIO;
		buf = (const char *)buf + k;
		n -= (size_t)k;
		off += (uint64_t)k;
	}
	return 0;
}

static int m_fsync(struct imp_out *f)
{
	return fsync(f->fd) ? errno : 0;
}

/* The client is told that this file's fsync is one of a batch of n, so
 * that it seals their pack when all came (fs/vfs/ctl.c, granary.batch). A
 * hint: a client that refuses it packs by its window. */
static int m_batch(struct imp_out *f, uint64_t id, int n)
{
	char v[48];
	int len = snprintf(v, sizeof(v), "%llx %d", (unsigned long long)id, n);

	if (!__atomic_load_n(&f->d->batch_hint, __ATOMIC_RELAXED))
		return 0;
	if (fsetxattr(f->fd, "granary.batch", v, (size_t)len, 0) &&
	    errno != EINTR)
		__atomic_store_n(&f->d->batch_hint, 0, __ATOMIC_RELAXED);
	return 0;
}

static int m_set_mtime(struct imp_out *f, const struct timespec *t)
{
	struct timespec ts[2] = {{0, UTIME_OMIT}, *t};
	return futimens(f->fd, ts) ? errno : 0;
}

static int m_close(struct imp_out *f)
{
	int err = close(f->fd) ? errno : 0;
	f->fd = -1;
	return err == EINTR ? 0 : err;
}

static int m_rename(struct imp_dst *d, struct imp_dir *dir, const char *from,
		    const char *to)
{
	char a[PATH_MAX], b[PATH_MAX];
	int err = mpath(dir, from, a);

	if (!err)
		err = mpath(dir, to, b);
	if (err)
		return err;
	return renameat(d->rootfd, a, d->rootfd, b) ? errno : 0;
}

static int m_unlink(struct imp_dst *d, struct imp_dir *dir, const char *name)
{
	char p[PATH_MAX];
	int err = mpath(dir, name, p);

	if (err)
		return err;
	return unlinkat(d->rootfd, p, 0) ? errno : 0;
}

static int m_symlink(struct imp_dst *d, struct imp_dir *dir, const char *name,
		     const char *target)
{
	char p[PATH_MAX];
	int err = mpath(dir, name, p);

	if (err)
		return err;
	return symlinkat(target, d->rootfd, p) ? errno : 0;
}

static int m_list(struct imp_dst *d, struct imp_dir *dir,
		  int (*fn)(void *arg, const char *name), void *arg)
{
	char p[PATH_MAX];
	int err = mpath(dir, NULL, p), fd;
	DIR *dh;
	struct dirent *de;

	if (err)
		return err;
	fd = openat(d->rootfd, p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	if (!(dh = fdopendir(fd))) {
		err = errno;
		close(fd);
		return err;
	}
	errno = 0;
	while (!err && (de = readdir(dh))) {
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			err = fn(arg, de->d_name);
		errno = 0;
	}
	if (!err && errno)
		err = errno;
	closedir(dh);
	return err;
}

/* A --writeback mount has staged what it was given: wait for its uploads
 * (the xattr of docs/operations.md). A default mount answers at once. */
static int m_sync(struct imp_dst *d)
{
	if (setxattr(d->root, "granary.sync", "1", 1, 0) == 0)
		return 0;
	/* an older client has no such control: its closes were the upload */
	return errno == ENOTSUP || errno == ENODATA ? 0 : errno;
}

static void m_close_dst(struct imp_dst *d)
{
	if (d->rootfd >= 0)
		close(d->rootfd);
	free(d->root);
}

static const struct dst_ops mount_ops = {
    .mkdir = m_mkdir,
    .dir_free = m_dir_free,
    .stat = m_stat,
    .readlink = m_readlink,
    .create = m_create,
    .write = m_write,
    .fsync = m_fsync,
    .batch = m_batch,
    .set_mtime = m_set_mtime,
    .close = m_close,
    .rename = m_rename,
    .unlink = m_unlink,
    .symlink = m_symlink,
    .list = m_list,
    .sync = m_sync,
    .close_dst = m_close_dst,
};

static int mount_open(struct imp_dst *d, const char *dest, char *why,
		      size_t cap)
{
	char abs[PATH_MAX], mp[PATH_MAX], fstype[64], source[256];
	struct stat st;
	int err = cli_abspath_parent(dest, abs, sizeof(abs));

	d->ops = &mount_ops;
	d->rootfd = -1;
	d->batch_max = MOUNT_BATCH_MAX;
	if (err) {
		snprintf(why, cap,
			 "cannot use destination '%s': %s (its parent must "
			 "exist)",
			 dest, strerror(err));
		return err;
	}
	if (cli_mount_of(abs, mp, sizeof(mp)) ||
	    cli_mount_lookup(mp, fstype, sizeof(fstype), source,
			     sizeof(source)) != 1 ||
	    !cli_is_granary_mount(fstype, source)) {
		snprintf(why, cap,
			 "destination '%s' is not on a granary mount (give a "
			 "directory of a mounted volume, or META_URL PATH)",
			 dest);
		return EINVAL;
	}
	if (mkdir(abs, 0755) && errno != EEXIST) {
		err = errno;
		snprintf(why, cap, "cannot make destination '%s': %s", dest,
			 strerror(err));
		return err;
	}
	d->rootfd = open(abs, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d->rootfd < 0 || fstat(d->rootfd, &st)) {
		err = errno;
		snprintf(why, cap, "cannot open destination '%s': %s", dest,
			 strerror(err));
		return err;
	}
	if (!(d->root = strdup(abs))) {
		snprintf(why, cap, "out of memory");
		return ENOMEM;
	}
	/* asked first: a client that does not know the name would keep it
	 * as a plain xattr of each file */
	char v[16];
	ssize_t len = fgetxattr(d->rootfd, "granary.batch", v, sizeof(v) - 1);
	int fuse_threads = 0;
	d->batch_hint = len >= 0;
	if (len > 0) {
		v[len] = '\0';
		fuse_threads = atoi(v);
	}
	if (fuse_threads <= 0)
		fuse_threads = MOUNT_OLD_THREADS;
	int batches = (fuse_threads - MOUNT_FREE_THREADS) / d->batch_max;
	d->flight = (batches > 2 ? batches : 2) * d->batch_max;
	return 0;
}

/* ---- a volume opened in this process ---------------------------------- */

static void entry_drop(struct imp_dst *d, const struct vfs_entry *e)
{
	vfs_forget(d->fs, e->ino, 1);
}

static int v_mkdir(struct imp_dst *d, struct imp_dir *dir, const char *name,
		   mode_t mode, uint64_t *ino, int *made)
{
	struct vfs_entry e;
	int err = vfs_mknod(d->fs, &d->caller, dir->ino, name,
			    S_IFDIR | (mode & 07777), 0, NULL, &e);

	*made = !err;
	if (err == EEXIST) {
		err = vfs_lookup(d->fs, &d->caller, dir->ino, name, &e);
		if (!err && !S_ISDIR(e.attr.st_mode)) {
			entry_drop(d, &e);
			err = EEXIST;
		}
	}
	if (!err)
		*ino = e.ino; /* its lookup is the imp_dir's */
	return err;
}

static void v_dir_free(struct imp_dst *d, struct imp_dir *dir)
{
	if (dir->ino && dir->ino != VFS_ROOT_ID)
		vfs_forget(d->fs, dir->ino, 1);
}

static int v_stat(struct imp_dst *d, struct imp_dir *dir, const char *name,
		  struct imp_stat *st)
{
	struct vfs_entry e;
	int err = vfs_lookup(d->fs, &d->caller, dir->ino, name, &e);

	if (err)
		return err;
	stat_of(&e.attr, st);
	entry_drop(d, &e);
	return 0;
}

static int v_readlink(struct imp_dst *d, struct imp_dir *dir, const char *name,
		      char **target)
{
	struct vfs_entry e;
	int err = vfs_lookup(d->fs, &d->caller, dir->ino, name, &e);

	if (err)
		return err;
	err = S_ISLNK(e.attr.st_mode) ? vfs_readlink(d->fs, e.ino, target)
				      : EINVAL;
	entry_drop(d, &e);
	return err;
}

static int v_create(struct imp_dst *d, struct imp_dir *dir, const char *name,
		    mode_t mode, struct imp_out *f)
{
	struct vfs_entry e;
	struct vfs_open o;
	int err = vfs_create(d->fs, &d->caller, dir->ino, name,
			     S_IFREG | (mode & 07777),
			     O_WRONLY | O_CREAT | O_EXCL, &e, &o);

	if (err)
		return err;
	f->fh = o.fh;
	f->ino = e.ino;
	return 0;
}

static int v_write(struct imp_out *f, const void *buf, size_t n, uint64_t off)
{
	while (n) {
		size_t k = n < WRITE_MAX ? n : WRITE_MAX;
		int err =
		    vfs_write(f->d->fs, &f->d->caller, f->fh, buf, k, off);
		if (err)
			return err;
		buf = (const char *)buf + k;
		n -= k;
		off += k;
	}
	return 0;
}

static int v_fsync(struct imp_out *f)
{
	return vfs_flush(f->d->fs, f->fh);
}

static int v_set_mtime(struct imp_out *f, const struct timespec *t)
{
	struct stat in, out;
	double timeout;

	memset(&in, 0, sizeof(in));
	in.st_mtim = *t;
	return vfs_setattr(f->d->fs, f->ino, &in, VFS_SET_MTIME, &out,
			   &timeout);
}

static int v_close(struct imp_out *f)
{
	int err = vfs_flush(f->d->fs, f->fh);

	vfs_release(f->d->fs, f->fh);
	vfs_forget(f->d->fs, f->ino, 1);
	f->fh = NULL;
	return err;
}

static int v_rename(struct imp_dst *d, struct imp_dir *dir, const char *from,
		    const char *to)
{
	return vfs_rename(d->fs, dir->ino, from, dir->ino, to, 0);
}

static int v_unlink(struct imp_dst *d, struct imp_dir *dir, const char *name)
{
	return vfs_unlink(d->fs, dir->ino, name);
}

static int v_symlink(struct imp_dst *d, struct imp_dir *dir, const char *name,
		     const char *target)
{
	struct vfs_entry e;
	int err = vfs_mknod(d->fs, &d->caller, dir->ino, name, S_IFLNK | 0777,
			    0, target, &e);

	if (!err)
		entry_drop(d, &e);
	return err;
}

struct v_list {
	int (*fn)(void *arg, const char *name);
	void *arg;
	int err;
};

static int v_list_add(void *arg, const char *name, const struct stat *st,
		      const struct vfs_entry *e, off_t next)
{
	struct v_list *l = arg;

	(void)st;
	(void)e;
	(void)next;
	if (!strcmp(name, ".") || !strcmp(name, ".."))
		return 0;
	l->err = l->fn(l->arg, name);
	return l->err != 0;
}

static int v_list(struct imp_dst *d, struct imp_dir *dir,
		  int (*fn)(void *arg, const char *name), void *arg)
{
	struct vfs_dh *dh;
	struct v_list l = {fn, arg, 0};
	int keep, err = vfs_opendir(d->fs, dir->ino, &dh, &keep);

	if (err)
		return err;
	/* all of it in one call: plain entries never fill a buffer */
	err =
	    vfs_readdir(d->fs, &d->caller, dh, dir->ino, 0, 0, v_list_add, &l);
	vfs_releasedir(d->fs, dh);
	return err ? err : l.err;
}

static int v_sync(struct imp_dst *d)
{
	(void)d; /* no writeback in process: every fsync was the upload */
	return 0;
}

static void v_close_dst(struct imp_dst *d)
{
	vfs_close_fs(d->fs);
	if (d->secret) {
		explicit_bzero(d->secret, d->secret_len);
		free(d->secret);
	}
}

static const struct dst_ops vfs_ops = {
    .mkdir = v_mkdir,
    .dir_free = v_dir_free,
    .stat = v_stat,
    .readlink = v_readlink,
    .create = v_create,
    .write = v_write,
    .fsync = v_fsync,
    .set_mtime = v_set_mtime,
    .close = v_close,
    .rename = v_rename,
    .unlink = v_unlink,
    .symlink = v_symlink,
    .list = v_list,
    .sync = v_sync,
    .close_dst = v_close_dst,
};

/* DEST's inode: looked up from the volume's root, each missing part made
 * (0755). One lookup is held on it (but the root's). */
static int v_resolve(struct imp_dst *d, const char *path, uint64_t *out)
{
	char *copy = strdup(path), *save = NULL;
	uint64_t ino = VFS_ROOT_ID;
	int err = copy ? 0 : ENOMEM;

	for (char *p = copy ? strtok_r(copy, "/", &save) : NULL; p && !err;
	     p = strtok_r(NULL, "/", &save)) {
		struct vfs_entry e;
		if (!strcmp(p, "."))
			continue;
		if (!strcmp(p, "..")) {
			err = EINVAL;
			break;
		}
		err = vfs_lookup(d->fs, &d->caller, ino, p, &e);
		if (err == ENOENT)
			err = vfs_mknod(d->fs, &d->caller, ino, p,
					S_IFDIR | 0755, 0, NULL, &e);
		if (!err && !S_ISDIR(e.attr.st_mode)) {
			entry_drop(d, &e);
			err = ENOTDIR;
		}
		if (ino != VFS_ROOT_ID)
			vfs_forget(d->fs, ino, 1);
		if (!err)
			ino = e.ino;
	}
	free(copy);
	if (!err)
		*out = ino;
	else if (ino != VFS_ROOT_ID)
		vfs_forget(d->fs, ino, 1);
	return err;
}

static int vfs_dst_open(struct imp_dst *d, const char *meta_url,
			const char *path, int threads, uint64_t *root,
			char *why, size_t cap)
{
	int err;

	d->ops = &vfs_ops;
	d->rootfd = -1;
	/* the whole pool may write at once: batches overlap, and their
	 * packs fill up to the pack size */
	d->batch_max = threads;
	d->caller = (struct vfs_caller){.uid = getuid(), .gid = getgid()};
	if (path[0] != '/') {
		snprintf(why, cap,
			 "'%s' is no path in the volume: give it from the "
			 "volume's root, such as /datasets/imagenet",
			 path);
		return EINVAL;
	}
	if ((err = cli_secret_load(NULL, &d->secret, &d->secret_len)))
		return err; /* told: why stays empty */
	d->o = (struct fs_opts){
	    .meta_url = meta_url,
	    .mountpoint = "(granary import)",
	    .attr_timeout = -1,
	    .entry_timeout = -1,
	    .max_uploads = 8,
	    .mem_cache_size = VFS_MEM_CACHE,
	    .cache_size = 0,
	    .free_ratio = -1,
	    .prefetch = 0,
	    .io_retry_window = -1,
	    .meta_retry_window = -1,
	    .pack_max = 1u << 20,
	    .pack_window_ms = VFS_PACK_WINDOW_MS,
	    .no_compact = 1,
	    .backup_interval = 0,
	    .secret = d->secret,
	    .secret_len = d->secret_len,
	    .metrics_addr = "off",
	};
	err = vfs_open_fs(&d->o, &d->fs, why, cap);
	if (err) {
		cli_key_hint(err);
		return err;
	}
	/* the reclaimer: the data of files this import replaces */
	vfs_started(d->fs);
	err = v_resolve(d, path, root);
	if (err)
		snprintf(why, cap, "cannot use '%s' in the volume: %s", path,
			 gr_strerror(err));
	return err;
}

/* ---- the wrappers ----------------------------------------------------- */

int imp_dst_open(const char *meta_url, const char *dest_path, int threads,
		 struct imp_dst **out, struct imp_dir **root, char *why,
		 size_t cap)
{
	struct imp_dst *d = calloc(1, sizeof(*d));
	struct imp_dir *r = calloc(1, sizeof(*r));
	uint64_t ino = 0;
	int err;

	*why = '\0';
	if (!d || !r || !(r->rel = strdup(""))) {
		err = ENOMEM;
		goto fail;
	}
	err = meta_url ? vfs_dst_open(d, meta_url, dest_path, threads, &ino,
				      why, cap)
		       : mount_open(d, dest_path, why, cap);
	if (err)
		goto fail;
	r->ino = ino;
	r->refs = 1;
	*out = d;
	*root = r;
	return 0;
fail:
	if (err == ENOMEM && !*why)
		snprintf(why, cap, "out of memory");
	if (d && d->ops)
		d->ops->close_dst(d);
	if (r)
		free(r->rel);
	free(r);
	free(d);
	return err;
}

int imp_dst_sync(struct imp_dst *d)
{
	return d->ops->sync(d);
}

void imp_dst_close(struct imp_dst *d)
{
	if (!d)
		return;
	d->ops->close_dst(d);
	free(d);
}

int imp_dst_batch_max(const struct imp_dst *d)
{
	return d->batch_max;
}

int imp_dst_flight(const struct imp_dst *d)
{
	return d->flight;
}

int imp_dst_mkdir(struct imp_dst *d, struct imp_dir *parent, const char *name,
		  mode_t mode, struct imp_dir **out)
{
	struct imp_dir *dir = calloc(1, sizeof(*dir));
	int made = 0, err;

	if (!dir)
		return ENOMEM;
	/* writable by the import whatever the source says */
	err = d->ops->mkdir(d, parent, name, (mode & 07777) | 0700, &dir->ino,
			    &made);
	if (!err && !(dir->rel = *parent->rel ? cli_path_join(parent->rel, name)
					      : strdup(name)))
		err = ENOMEM;
	if (err) {
		if (dir->ino)
			d->ops->dir_free(d, dir);
		free(dir);
		return err;
	}
	dir->fresh = made;
	dir->refs = 1;
	dir->parent = parent;
	imp_dir_get(parent);
	*out = dir;
	return 0;
}

void imp_dir_get(struct imp_dir *dir)
{
	__atomic_add_fetch(&dir->refs, 1, __ATOMIC_RELAXED);
}

void imp_dir_put(struct imp_dst *d, struct imp_dir *dir)
{
	while (dir &&
	       __atomic_sub_fetch(&dir->refs, 1, __ATOMIC_ACQ_REL) == 0) {
		struct imp_dir *parent = dir->parent;
		d->ops->dir_free(d, dir);
		free(dir->rel);
		free(dir);
		dir = parent;
	}
}

int imp_dst_stat(struct imp_dst *d, struct imp_dir *dir, const char *name,
		 struct imp_stat *st)
{
	return d->ops->stat(d, dir, name, st);
}

int imp_dst_readlink(struct imp_dst *d, struct imp_dir *dir, const char *name,
		     char **target)
{
	return d->ops->readlink(d, dir, name, target);
}

int imp_dst_create(struct imp_dst *d, struct imp_dir *dir, const char *name,
		   mode_t mode, struct imp_out **out)
{
	struct imp_out *f = calloc(1, sizeof(*f));
	int err;

	if (!f)
		return ENOMEM;
	f->d = d;
	f->fd = -1;
	err = d->ops->create(d, dir, name, mode & 07777, f);
	if (err) {
		free(f);
		return err;
	}
	*out = f;
	return 0;
}

int imp_out_write(struct imp_out *f, const void *buf, size_t n, uint64_t off)
{
	return f->d->ops->write(f, buf, n, off);
}

int imp_out_fsync(struct imp_out *f)
{
	return f->d->ops->fsync(f);
}

void imp_out_batch(struct imp_out *f, uint64_t id, int n)
{
	if (f->d->ops->batch && n > 1)
		f->d->ops->batch(f, id, n);
}

int imp_out_set_mtime(struct imp_out *f, const struct timespec *t)
{
	return f->d->ops->set_mtime(f, t);
}

int imp_out_close(struct imp_out *f)
{
	int err;

	if (!f)
		return 0;
	err = f->d->ops->close(f);
	free(f);
	return err;
}

int imp_dst_rename(struct imp_dst *d, struct imp_dir *dir, const char *from,
		   const char *to)
{
	return d->ops->rename(d, dir, from, to);
}

int imp_dst_unlink(struct imp_dst *d, struct imp_dir *dir, const char *name)
{
	return d->ops->unlink(d, dir, name);
}

int imp_dst_symlink(struct imp_dst *d, struct imp_dir *dir, const char *name,
		    const char *target)
{
	return d->ops->symlink(d, dir, name, target);
}

int imp_dst_list(struct imp_dst *d, struct imp_dir *dir,
		 int (*fn)(void *arg, const char *name), void *arg)
{
	return d->ops->list(d, dir, fn, arg);
}
