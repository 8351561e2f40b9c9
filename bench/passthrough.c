/*
 * passthrough.c - a minimal FUSE passthrough over a local directory,
 * read-only (the baseline of bench/epoch.sh) or, with -w, writable enough
 * to save files into (the baseline of bench/statlat.sh) and to run the
 * metadata workload of bench/metadata.sh (create, utimens, rename, unlink,
 * rmdir, xattrs, as libfuse's passthrough_hp answers them): the same
 * low-level API,
 * capabilities, timeouts and thread pool as granary's FUSE adapter (fs/fuse/),
 * so that what separates granary's warm epoch from this one is granary's own
 * work and not the FUSE round trip. Written from libfuse's fuse_lowlevel.h.
 */
#define FUSE_USE_VERSION 314

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "lib/log.h"

static const char usage[] =
    "usage: passthrough [-f] [-w] [-r buf|fd] [-d] SRC_DIR MOUNTPOINT\n"
    "\n"
    "Mount SRC_DIR read-only on MOUNTPOINT through FUSE; unmount with\n"
    "'fusermount3 -u MOUNTPOINT'.\n"
    "  -w         writable: create, write, truncate, fsync, unlink and\n"
    "             rename files, set their times and modes, make and remove\n"
    "             directories (1 s\n"
    "             timeouts, as a read-write granary mount)\n"
    "  -f         stay in the foreground (default: detach once mounted)\n"
    "  -r MODE    how read replies are made: fd (fuse_reply_data on the\n"
    "             file's descriptor, spliced into /dev/fuse; the default)\n"
    "             or buf (pread into a per-thread buffer, fuse_reply_buf)\n"
    "  -d         libfuse debug output (implies -f)\n";

#define TIMEOUT	     3600.0 /* as a read-only granary mount: nothing changes */
#define MAX_THREADS  128    /* the thread pool of fs/fuse/session.c */
#define IDLE_THREADS 8
#define MIN_BUCKETS  1024

/* One source inode the kernel knows, its FUSE inode number being the
 * address of this struct (the root is FUSE_ROOT_ID). */
struct pnode {
	struct pnode *next; /* hash chain, protected by pt.lock */
	dev_t dev;	    /* with ino: the table key, immutable */
	ino_t ino;
	int fd;			/* O_PATH, immutable, closed when freed; -1: */
	struct file_handle *fh; /* a non-directory's handle instead
				   (node_fd), immutable, freed with it */
	uint64_t nlookup;	/* protected by pt.lock; freed at 0 by forget */
};

/* An open directory: readdir calls on one handle are serialized. */
struct dirh {
	pthread_mutex_t lock;	/* taken before pt.lock (readdirplus looks
				   up entries while holding it) */
	DIR *dp;		/* protected by lock */
	off_t off;		/* offset dp is at, protected by lock */
	struct dirent *pending; /* read from dp but not sent yet */
};

/* fd is the default: paired runs of bench/epoch.sh's readers over a fresh
 * mount (source in the page cache) gave it 5-20% more files/s than buf */
enum read_mode { READ_FD, READ_BUF };

static struct {
	pthread_mutex_t lock;	/* the inode table; taken after dirh.lock */
	struct pnode **buckets; /* protected by lock */
	size_t nbuckets, count; /* protected by lock */
	struct pnode root;	/* never in the table, never freed */
	enum read_mode read_mode;
	int writable;	       /* -w */
	double timeout;	       /* attributes and entries */
	pthread_key_t buf_key; /* a thread's read buffer (struct rbuf) */
	int mount_fd;	       /* SRC_DIR, for open_by_handle_at */
} pt = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* ------------------------------------------------------------------------
 * inode table
 */

static struct pnode *node_of(fuse_ino_t ino)
{
	return ino == FUSE_ROOT_ID ? &pt.root : (struct pnode *)(uintptr_t)ino;
}

static size_t bucket_of(dev_t dev, ino_t ino, size_t nbuckets)
{
	uint64_t h =
	    ((uint64_t)ino ^ ((uint64_t)dev << 32)) * 0x9e3779b97f4a7c15ULL;
	return (size_t)(h >> 32) & (nbuckets - 1);
}

/* Double the buckets when chains get long; on ENOMEM keep the old ones
 * (slower, still correct). Called with pt.lock held. */
static void table_grow(void)
{
	size_t nb = pt.nbuckets ? pt.nbuckets * 2 : MIN_BUCKETS;
	struct pnode **b = calloc(nb, sizeof(*b));

	if (!b)
		return;
	for (size_t i = 0; i < pt.nbuckets; i++) {
		struct pnode *n = pt.buckets[i], *next;
		for (; n; n = next) {
			size_t k = bucket_of(n->dev, n->ino, nb);
			next = n->next;
			n->next = b[k];
			b[k] = n;
		}
	}
	free(pt.buckets);
	pt.buckets = b;
	pt.nbuckets = nb;
}

/*
 * A non-directory keeps a file handle, not a descriptor: the kernel may
 * hold more inodes than a process may keep descriptors (100,000 files of
 * bench/metadata.sh against a hard limit of 20,000 in a container). Each
 * call on it opens the handle (O_PATH) for its length: a syscall pair more
 * than libfuse's passthrough_hp, which keeps a descriptor per inode. NULL
 * when the file system gives no handle (the descriptor is kept).
 */
static struct file_handle *handle_of(int fd)
{
	struct file_handle *h = malloc(sizeof(*h) + MAX_HANDLE_SZ);
	int mount_id;

	if (!h)
		return NULL;
	h->handle_bytes = MAX_HANDLE_SZ;
	if (name_to_handle_at(fd, "", h, &mount_id, AT_EMPTY_PATH)) {
		free(h);
		return NULL;
	}
	return h;
}

/* An O_PATH descriptor of node ino, to give back with node_fd_put. */
static int node_fd(fuse_ino_t ino)
{
	struct pnode *n = node_of(ino);
	if (n->fd >= 0)
		return n->fd;
	return open_by_handle_at(pt.mount_fd, n->fh, O_PATH | O_CLOEXEC);
}

static void node_fd_put(fuse_ino_t ino, int fd)
{
	if (fd >= 0 && node_of(ino)->fd < 0)
		close(fd);
}

/* Find or add the node of an O_PATH fd with attributes *st, counting one
 * lookup. Takes fd: closed when the node already existed, or kept as a
 * handle (handle_of). */
static int table_get(int fd, const struct stat *st, struct pnode **out)
{
	struct pnode *n, *fresh = NULL;

	pthread_mutex_lock(&pt.lock);
	if (pt.count >= pt.nbuckets * 2)
		table_grow();
	if (!pt.nbuckets) {
		pthread_mutex_unlock(&pt.lock);
		close(fd);
		return ENOMEM;
	}
	size_t k = bucket_of(st->st_dev, st->st_ino, pt.nbuckets);
	for (n = pt.buckets[k]; n; n = n->next)
		if (n->dev == st->st_dev && n->ino == st->st_ino)
			break;
	if (n) {
		n->nlookup++;
	} else {
		fresh = calloc(1, sizeof(*fresh));
		if (fresh) {
			fresh->dev = st->st_dev;
			fresh->ino = st->st_ino;
			fresh->fd = fd;
			if (!S_ISDIR(st->st_mode) &&
			    (fresh->fh = handle_of(fd)))
				fresh->fd = -1;
			fresh->nlookup = 1;
			fresh->next = pt.buckets[k];
			pt.buckets[k] = fresh;
			pt.count++;
		}
		n = fresh;
	}
	pthread_mutex_unlock(&pt.lock);
	if (!fresh || fresh->fd < 0)
		close(fd);
	if (!n)
		return ENOMEM;
	*out = n;
	return 0;
}

static void forget_one(fuse_ino_t ino, uint64_t nlookup)
{
	struct pnode *n = node_of(ino), **pp;

	if (n == &pt.root)
		return;
	pthread_mutex_lock(&pt.lock);
	gr_assert(n->nlookup >= nlookup);
	n->nlookup -= nlookup;
	if (n->nlookup) {
		pthread_mutex_unlock(&pt.lock);
		return;
	}
	pp = &pt.buckets[bucket_of(n->dev, n->ino, pt.nbuckets)];
	while (*pp != n)
		pp = &(*pp)->next;
	*pp = n->next;
	pt.count--;
	pthread_mutex_unlock(&pt.lock);
	if (n->fd >= 0)
		close(n->fd);
	free(n->fh);
	free(n);
}

static int do_lookup(fuse_ino_t parent, const char *name,
		     struct fuse_entry_param *e)
{
	struct pnode *n;
	int fd, err;

	memset(e, 0, sizeof(*e));
	e->attr_timeout = pt.timeout;
	e->entry_timeout = pt.timeout;
	fd = openat(node_of(parent)->fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno;
	if (fstatat(fd, "", &e->attr, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW)) {
		err = errno;
		close(fd);
		return err;
	}
	err = table_get(fd, &e->attr, &n);
	if (err)
		return err;
	e->ino = (uintptr_t)n;
	return 0;
}

/* ------------------------------------------------------------------------
 * operations
 */

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	/* what fs/fuse/ops.c asks for, so that both run the same protocol */
	conn->want |= FUSE_CAP_ASYNC_READ;
	if (conn->capable & FUSE_CAP_READDIRPLUS)
		conn->want |= FUSE_CAP_READDIRPLUS;
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	if (conn->capable & FUSE_CAP_AUTO_INVAL_DATA)
		conn->want |= FUSE_CAP_AUTO_INVAL_DATA;
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	conn->want &= ~FUSE_CAP_ATOMIC_O_TRUNC;
	conn->want &= ~FUSE_CAP_HANDLE_KILLPRIV;
	if (conn->capable & FUSE_CAP_CACHE_SYMLINKS)
		conn->want |= FUSE_CAP_CACHE_SYMLINKS;
	/* without splice, libfuse answers an fd reply by reading into a
	 * buffer of its own: no better than READ_BUF */
	if (pt.read_mode == READ_FD) {
		if (conn->capable & FUSE_CAP_SPLICE_WRITE)
			conn->want |= FUSE_CAP_SPLICE_WRITE;
	}
	conn->max_write = 1 << 20;
	conn->max_readahead = 1 << 20;
	conn->max_background = 64;
	conn->congestion_threshold = 48;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;
	int err = do_lookup(parent, name, &e);

	if (err == ENOENT) {
		/* a negative entry, cached as long as a positive one */
		e.ino = 0;
		fuse_reply_entry(req, &e);
	} else if (err) {
		fuse_reply_err(req, err);
	} else if (fuse_reply_entry(req, &e) != 0) {
		forget_one(e.ino, 1); /* the kernel never saw it */
	}
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	forget_one(ino, nlookup);
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count,
			    struct fuse_forget_data *forgets)
{
	for (size_t i = 0; i < count; i++)
		forget_one(forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct stat st;
	int fd = node_fd(ino), err;

	(void)fi;
	err =
	    fd < 0 || fstatat(fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW)
		? errno
		: 0;
	node_fd_put(ino, fd);
	if (err)
		fuse_reply_err(req, err);
	else
		fuse_reply_attr(req, &st, pt.timeout);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	char buf[PATH_MAX + 1];
	int fd = node_fd(ino);
	ssize_t n = fd < 0 ? -1 : readlinkat(fd, "", buf, sizeof(buf));
	int err = errno;

	node_fd_put(ino, fd);
	if (n < 0)
		fuse_reply_err(req, err);
	else if (n == sizeof(buf))
		fuse_reply_err(req, ENAMETOOLONG);
	else {
		buf[n] = '\0';
		fuse_reply_readlink(req, buf);
	}
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	char path[64];
	int fd, pfd, err;

	if (!pt.writable && (fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, EROFS);
		return;
	}
	/* an O_PATH fd cannot be read: reopen the file it names */
	pfd = node_fd(ino);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", pfd);
	fd = pfd < 0
		 ? -1
		 : open(path, (fi->flags & (O_ACCMODE | O_APPEND)) | O_CLOEXEC);
	err = errno;
	node_fd_put(ino, pfd);
	if (fd < 0) {
		fuse_reply_err(req, err);
		return;
	}
	fi->fh = (uint64_t)fd;
	fi->keep_cache = !pt.writable; /* read-only: nothing changes */
	if (fuse_reply_open(req, fi) != 0)
		close(fd);
}

/* The per-thread read buffer: worker threads come and go with the pool,
 * the key's destructor frees theirs. */
struct rbuf {
	size_t cap;
	char data[];
};

static char *thread_buf(size_t size)
{
	struct rbuf *b = pthread_getspecific(pt.buf_key);

	if (b && b->cap >= size)
		return b->data;
	free(b);
	b = malloc(sizeof(*b) + size);
	pthread_setspecific(pt.buf_key, b);
	if (!b)
		return NULL;
	b->cap = size;
	return b->data;
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	int fd = (int)fi->fh;

	(void)ino;
	if (pt.read_mode == READ_FD) {
		struct fuse_bufvec bv = FUSE_BUFVEC_INIT(size);
		bv.buf[0].flags =
		    FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK | FUSE_BUF_FD_RETRY;
		bv.buf[0].fd = fd;
		bv.buf[0].pos = off;
		fuse_reply_data(req, &bv, 0); /* replies errors itself */
		return;
	}
	char *buf = thread_buf(size);
	size_t got = 0;
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	/* a short reply means end of file to the kernel: fill what exists */
	while (got < size) {
		ssize_t n = pread(fd, buf + got, size - got, off + (off_t)got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			fuse_reply_err(req, errno);
			return;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	fuse_reply_buf(req, buf, got);
}

static void op_release(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	(void)ino;
	close((int)fi->fh);
	fuse_reply_err(req, 0);
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct dirh *d = calloc(1, sizeof(*d));
	int fd, err;

	if (!d) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	fd = openat(node_of(ino)->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		err = errno;
		goto free_d;
	}
	d->dp = fdopendir(fd);
	if (!d->dp) {
		err = errno;
		close(fd);
		goto free_d;
	}
	pthread_mutex_init(&d->lock, NULL);
	fi->fh = (uintptr_t)d;
	fi->cache_readdir = 1;
	fi->keep_cache = 1;
	if (fuse_reply_open(req, fi) != 0) {
		closedir(d->dp);
		pthread_mutex_destroy(&d->lock);
		free(d);
	}
	return;
free_d:
	free(d);
	fuse_reply_err(req, err);
}

static int is_dot(const char *name)
{
	return name[0] == '.' &&
	       (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'));
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi, int plus)
{
	struct dirh *d = (struct dirh *)(uintptr_t)fi->fh;
	char *buf = malloc(size);
	size_t used = 0;
	int err = 0;

	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	pthread_mutex_lock(&d->lock);
	if (off != d->off) {
		seekdir(d->dp, off);
		d->pending = NULL;
		d->off = off;
	}
	for (;;) {
		struct dirent *de = d->pending;
		size_t need;
		if (!de) {
			errno = 0;
			de = readdir(d->dp);
			if (!de) {
				err = errno;
				break;
			}
			d->pending = de;
		}
		if (plus) {
			struct fuse_entry_param e;
			if (is_dot(de->d_name)) {
				/* the kernel skips these: no lookup */
				memset(&e, 0, sizeof(e));
				e.attr.st_ino = de->d_ino;
				e.attr.st_mode = de->d_type << 12;
			} else {
				err = do_lookup(ino, de->d_name, &e);
				if (err == ENOENT) { /* gone since readdir */
					err = 0;
					d->pending = NULL;
					d->off = de->d_off;
					continue;
				}
				if (err)
					break;
			}
			need =
			    fuse_add_direntry_plus(req, buf + used, size - used,
						   de->d_name, &e, de->d_off);
			if (need > size - used) {
				if (e.ino) /* did not fit: not counted */
					forget_one(e.ino, 1);
				break;
			}
		} else {
			struct stat st = {.st_ino = de->d_ino,
					  .st_mode = de->d_type << 12};
			need = fuse_add_direntry(req, buf + used, size - used,
						 de->d_name, &st, de->d_off);
			if (need > size - used)
				break;
		}
		used += need;
		d->pending = NULL;
		d->off = de->d_off;
	}
	pthread_mutex_unlock(&d->lock);
	if (err && !used)
		fuse_reply_err(req, err);
	else
		fuse_reply_buf(req, buf, used);
	free(buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, 0);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
			   off_t off, struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, 1);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino,
			  struct fuse_file_info *fi)
{
	struct dirh *d = (struct dirh *)(uintptr_t)fi->fh;

	(void)ino;
	closedir(d->dp);
	pthread_mutex_destroy(&d->lock);
	free(d);
	fuse_reply_err(req, 0);
}

/* ------------------------------------------------------------------------
 * -w: just enough to save files (mkdir, create, write, truncate, fsync,
 * unlink) and for the metadata workload (setattr, rename, rmdir, xattrs)
 */

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode, struct fuse_file_info *fi)
{
	struct fuse_entry_param e;
	int fd, err;

	if (!pt.writable) {
		fuse_reply_err(req, EROFS);
		return;
	}
	fd = openat(node_of(parent)->fd, name,
		    (fi->flags | O_CREAT | O_CLOEXEC) & ~O_NOFOLLOW, mode);
	if (fd < 0) {
		fuse_reply_err(req, errno);
		return;
	}
	err = do_lookup(parent, name, &e);
	if (err) {
		close(fd);
		fuse_reply_err(req, err);
		return;
	}
	fi->fh = (uint64_t)fd;
	if (fuse_reply_create(req, &e, fi) != 0) {
		close(fd);
		forget_one(e.ino, 1);
	}
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode)
{
	struct fuse_entry_param e;
	int err;

	if (!pt.writable)
		err = EROFS;
	else if (mkdirat(node_of(parent)->fd, name, mode))
		err = errno;
	else
		err = do_lookup(parent, name, &e);
	if (err)
		fuse_reply_err(req, err);
	else if (fuse_reply_entry(req, &e) != 0)
		forget_one(e.ino, 1);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	if (!pt.writable)
		fuse_reply_err(req, EROFS);
	else
		fuse_reply_err(
		    req, unlinkat(node_of(parent)->fd, name, 0) ? errno : 0);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
		     size_t size, off_t off, struct fuse_file_info *fi)
{
	ssize_t n = pwrite((int)fi->fh, buf, size, off);

	(void)ino;
	if (n < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_write(req, (size_t)n);
}

static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
		     struct fuse_file_info *fi)
{
	int fd = (int)fi->fh;

	(void)ino;
	fuse_reply_err(req, (datasync ? fdatasync(fd) : fsync(fd)) ? errno : 0);
}

/* The /proc path that reaches O_PATH descriptor fd, for the calls that
 * take no descriptor of that kind. */
static void proc_path(int fd, char *path, size_t cap)
{
	snprintf(path, cap, "/proc/self/fd/%d", fd);
}

/* Size, mode, owner and times (what a save truncating its file, touch,
 * chmod and chown send). */
static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		       int to_set, struct fuse_file_info *fi)
{
	char path[64];
	int err = 0, fd;

	if (!pt.writable) {
		fuse_reply_err(req, EROFS);
		return;
	}
	fd = node_fd(ino);
	if (fd < 0) {
		fuse_reply_err(req, errno);
		return;
	}
	proc_path(fd, path, sizeof(path));
	if (to_set & FUSE_SET_ATTR_SIZE) {
		if (fi)
			err = ftruncate((int)fi->fh, attr->st_size) ? errno : 0;
		else
			err = truncate(path, attr->st_size) ? errno : 0;
	}
	if (!err && (to_set & FUSE_SET_ATTR_MODE))
		err = chmod(path, attr->st_mode & 07777) ? errno : 0;
	if (!err && (to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID))) {
		uid_t u = to_set & FUSE_SET_ATTR_UID ? attr->st_uid : (uid_t)-1;
		gid_t g = to_set & FUSE_SET_ATTR_GID ? attr->st_gid : (gid_t)-1;
		err =
		    fchownat(fd, "", u, g, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW)
			? errno
			: 0;
	}
	if (!err && (to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME))) {
		struct timespec tv[2] = {{0, UTIME_OMIT}, {0, UTIME_OMIT}};
		if (to_set & FUSE_SET_ATTR_ATIME_NOW)
			tv[0].tv_nsec = UTIME_NOW;
		else if (to_set & FUSE_SET_ATTR_ATIME)
			tv[0] = attr->st_atim;
		if (to_set & FUSE_SET_ATTR_MTIME_NOW)
			tv[1].tv_nsec = UTIME_NOW;
		else if (to_set & FUSE_SET_ATTR_MTIME)
			tv[1] = attr->st_mtim;
		if (fi)
			err = futimens((int)fi->fh, tv) ? errno : 0;
		else
			err = utimensat(AT_FDCWD, path, tv, 0) ? errno : 0;
	}
	node_fd_put(ino, fd);
	if (err)
		fuse_reply_err(req, err);
	else
		op_getattr(req, ino, fi);
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	if (!pt.writable)
		fuse_reply_err(req, EROFS);
	else
		fuse_reply_err(req,
			       unlinkat(node_of(parent)->fd, name, AT_REMOVEDIR)
				   ? errno
				   : 0);
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname,
		      unsigned int flags)
{
	if (!pt.writable)
		fuse_reply_err(req, EROFS);
	else
		fuse_reply_err(req,
			       renameat2(node_of(parent)->fd, name,
					 node_of(newparent)->fd, newname, flags)
				   ? errno
				   : 0);
}

/* xattrs through the /proc path: the kernel asks for security.selinux at
 * every ls -l, as it would of granary */
static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			size_t size)
{
	char path[64], *buf = NULL;
	ssize_t n = -1;
	int fd = node_fd(ino), err;

	proc_path(fd, path, sizeof(path));
	if (size && !(buf = malloc(size)))
		errno = ENOMEM;
	else if (fd >= 0)
		n = getxattr(path, name, buf, size);
	err = errno;
	node_fd_put(ino, fd);
	if (n < 0)
		fuse_reply_err(req, err);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
	free(buf);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	char path[64], *buf = NULL;
	ssize_t n = -1;
	int fd = node_fd(ino), err;

	proc_path(fd, path, sizeof(path));
	if (size && !(buf = malloc(size)))
		errno = ENOMEM;
	else if (fd >= 0)
		n = listxattr(path, buf, size);
	err = errno;
	node_fd_put(ino, fd);
	if (n < 0)
		fuse_reply_err(req, err);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
	free(buf);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs sv;
	int fd = node_fd(ino);
	int err = fd < 0 || fstatvfs(fd, &sv) ? errno : 0;

	node_fd_put(ino, fd);
	if (err)
		fuse_reply_err(req, err);
	else
		fuse_reply_statfs(req, &sv);
}

static const struct fuse_lowlevel_ops pt_ops = {
    .init = op_init,
    .lookup = op_lookup,
    .forget = op_forget,
    .forget_multi = op_forget_multi,
    .getattr = op_getattr,
    .readlink = op_readlink,
    .open = op_open,
    .read = op_read,
    .release = op_release,
    .opendir = op_opendir,
    .readdir = op_readdir,
    .readdirplus = op_readdirplus,
    .releasedir = op_releasedir,
    .statfs = op_statfs,
    .create = op_create,
    .mkdir = op_mkdir,
    .unlink = op_unlink,
    .write = op_write,
    .flush = op_flush,
    .fsync = op_fsync,
    .setattr = op_setattr,
    .rmdir = op_rmdir,
    .rename = op_rename,
    .getxattr = op_getxattr,
    .listxattr = op_listxattr,
};

/* ------------------------------------------------------------------------
 * main
 */

int main(int argc, char **argv)
{
	int c, foreground = 0, debug = 0, err = 1;
	struct stat st;

	pt.timeout = TIMEOUT;
	while ((c = getopt(argc, argv, "fwr:dh")) != -1) {
		switch (c) {
		case 'f':
			foreground = 1;
			break;
		case 'w':
			pt.writable = 1;
			pt.timeout = 1.0;
			break;
		case 'r':
			if (!strcmp(optarg, "buf"))
				pt.read_mode = READ_BUF;
			else if (!strcmp(optarg, "fd"))
				pt.read_mode = READ_FD;
			else {
				fputs(usage, stderr);
				return 2;
			}
			break;
		case 'd':
			debug = foreground = 1;
			break;
		case 'h':
			fputs(usage, stdout);
			return 0;
		default:
			fputs(usage, stderr);
			return 2;
		}
	}
	if (argc - optind != 2) {
		fputs(usage, stderr);
		return 2;
	}
	const char *src = argv[optind], *mp = argv[optind + 1];

	/* a descriptor per inode the kernel knows: as many as allowed (root
	 * may raise the hard limit; bench/metadata.sh makes 100,000 files) */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		struct rlimit want = {1 << 20, 1 << 20};
		if (setrlimit(RLIMIT_NOFILE, &want)) {
			rl.rlim_cur = rl.rlim_max;
			setrlimit(RLIMIT_NOFILE, &rl);
		}
	}
	pt.root.fd = open(src, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (pt.root.fd < 0 || fstat(pt.root.fd, &st)) {
		fprintf(stderr, "passthrough: cannot open directory '%s': %s\n",
			src, strerror(errno));
		return 1;
	}
	pt.mount_fd = open(src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	pt.root.dev = st.st_dev;
	pt.root.ino = st.st_ino;
	if (pthread_key_create(&pt.buf_key, free)) {
		fprintf(stderr, "passthrough: cannot create a thread key\n");
		goto close_root;
	}

	char *fargv[] = {"passthrough", "-o",
			 pt.writable ? "fsname=passthrough,subtype=passthrough,"
				       "default_permissions"
				     : "fsname=passthrough,subtype=passthrough,"
				       "default_permissions,ro",
			 "-d", NULL};
	struct fuse_args args = FUSE_ARGS_INIT(debug ? 4 : 3, fargv);
	struct fuse_session *se =
	    fuse_session_new(&args, &pt_ops, sizeof(pt_ops), NULL);
	fuse_opt_free_args(&args);
	if (!se) {
		fprintf(stderr, "passthrough: cannot start a FUSE session\n");
		goto delete_key;
	}
	if (fuse_set_signal_handlers(se)) {
		fprintf(stderr, "passthrough: cannot set signal handlers\n");
		goto destroy_se;
	}
	if (fuse_session_mount(se, mp)) {
		fprintf(stderr, "passthrough: cannot mount on '%s'\n", mp);
		goto remove_handlers;
	}
	fuse_daemonize(foreground);

	struct fuse_loop_config *lc = fuse_loop_cfg_create();
	fuse_loop_cfg_set_max_threads(lc, MAX_THREADS);
	fuse_loop_cfg_set_idle_threads(lc, IDLE_THREADS);
	err = fuse_session_loop_mt(se, lc) < 0;
	fuse_loop_cfg_destroy(lc);

	fuse_session_unmount(se);
remove_handlers:
	fuse_remove_signal_handlers(se);
destroy_se:
	fuse_session_destroy(se);
delete_key:
	pthread_key_delete(pt.buf_key);
close_root:
	if (pt.root.fd >= 0)
		close(pt.root.fd);
	/* nodes the kernel still counted at unmount are left to exit */
	return err;
}
