/*
 * objstore_file.c - the file:// backend: a pool of local directories (one
 * per HDD, say), each object a plain file in the directory picked by
 * XXH3(key) mod the number of directories. Writes go to a temp file in the
 * final directory, are fsync'd, renamed over the final name and the directory
 * is fsync'd: a crash leaves the old object or the new one, never a torn one.
 * Lazy puts (objstore_put_lazy) skip both fsyncs and are made durable in
 * batches by objstore_sync: one syncfs per file system of the pool, or
 * (GRANARY_FILE_SYNC=fdatasync) an fdatasync of each file put and an fsync
 * of each directory that got one.
 *
 * The directory list and its order are part of the volume: changing them
 * moves keys to other directories and hides the objects already written.
 * A key is a relative path, so one key cannot also be a "directory" of
 * another (after "a/b", putting "a/b/c" fails with ENOTDIR) - granary's own
 * key layout never does that. Empty directories left by deletes are kept:
 * they are reused by later writes and removing them would race with puts.
 *
 * One key is kept in every directory of a pool: the volume marker
 * (OBJSTORE_OWNER_KEY), so that each directory says which volume it
 * belongs to - format's overlap check looks at one directory at a time.
 * Reads take the copy in the key's own directory (the only one in pools
 * formatted before).
 */
#include "fs/store/objstore.h"
#include "fs/store/owner.h"
#include "lib/bigbuf.h"
#include "lib/fsutil.h"
#include "lib/log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

/* Temp files are named TMP_PREFIX + 16 hex digits; list skips them and keys
 * may not use the prefix. A crash can leave one behind: harmless, invisible,
 * and older than any live put, so a sweeper may remove those past an hour. */
#define TMP_PREFIX     ".granary-tmp."
#define TMP_PREFIX_LEN (sizeof(TMP_PREFIX) - 1)
#define MKDIR_RETRIES  8

struct file_dir {
	char *path;
	int fd;	   /* O_DIRECTORY; every access is *at() relative to it */
	size_t fs; /* the first directory of the pool on its file system */
	int dirty; /* lazy puts here since the last sync; protected by
		      file_store->lock (on the fs's first directory only) */
};

/* A file (fdatasync mode) or a directory (both modes) to sync: a pool
 * directory's index and the path under it ("" for the directory itself). */
struct pending {
	size_t dir;
	char *path;
};

struct pendings {
	struct pending *v;
	size_t n, cap;
};

struct file_store {
	struct objstore base; /* first */
	struct file_dir *dirs;
	size_t ndirs;
	int fdatasync; /* sync by fdatasync of each file, not syncfs */
	/*
	 * The dirs are set at open; the file system serialises the puts
	 * (rename is atomic, temp names are unique). The lock is a leaf and
	 * guards the lazy puts' batches: each lazy put that returns takes
	 * the next number (seq) and leaves what its sync needs (dirty, files,
	 * parents); a sync takes all of it and makes 1..seq durable (upto).
	 * One sync runs at a time; those that arrive meanwhile wait for it
	 * and for the next one, which one of them runs for all.
	 */
	pthread_mutex_t lock;
	pthread_cond_t synced;
	uint64_t seq;	/* lazy puts that returned; protected by lock */
	uint64_t upto;	/* those that the last sync ended covered; ditto */
	int err;	/* the last sync's result; ditto */
	uint64_t fails; /* syncs that failed; ditto */
	int fail_err;	/* the last one's error; ditto */
	int running;	/* a sync is under way; ditto */
	struct pendings files;	 /* fdatasync mode; ditto */
	struct pendings parents; /* fdatasync mode, no duplicates; ditto */
};

static struct file_dir *dir_of(struct objstore *s, const char *key)
{
	struct file_store *f = (struct file_store *)s;

	return &f->dirs[XXH3_64bits(key, strlen(key)) % f->ndirs];
}

/* A key component must not look like one of our temp files. */
static int key_ok(const char *key)
{
	for (const char *c = key; c; c = strchr(c, '/')) {
		if (*c == '/')
			c++;
		if (!strncmp(c, TMP_PREFIX, TMP_PREFIX_LEN))
			return 0;
	}
	return 1;
}

/* ---- put ---- */

/* Create the parent directories of key under dirfd (mkdir -p), making each
 * new entry durable by fsync'ing the directory that holds it. */
static int make_parents(int root, const char *key)
{
	char path[PATH_MAX];
	size_t len = strlen(key);

	if (len >= sizeof(path))
		return ENAMETOOLONG;
	memcpy(path, key, len + 1);
	for (char *slash = strchr(path, '/'); slash;
	     slash = strchr(slash + 1, '/')) {
		*slash = '\0';
		if (mkdirat(root, path, 0755) == 0) {
			char *up = strrchr(path, '/');
			int pfd = root;
			if (up) {
				*up = '\0';
				pfd =
				    openat(root, path,
					   O_RDONLY | O_DIRECTORY | O_CLOEXEC);
				*up = '/';
			}
			if (pfd < 0)
				return errno;
			int err = fsync(pfd) ? errno : 0;
			if (pfd != root)
				close(pfd);
			if (err)
				return err;
		} else if (errno != EEXIST) {
			return errno;
		}
		*slash = '/';
	}
	return 0;
}

/* Open the directory that will hold key (creating it) and a fresh temp file
 * in it. A racing mkdir/rmdir by someone else is retried a few times. */
static int open_tmp(int root, const char *key, int *dfd_out, int *fd_out,
		    char *tmp, size_t tmpsz)
{
	const char *slash = strrchr(key, '/');
	char parent[PATH_MAX];
	int err = 0;

	if (slash) {
		if ((size_t)(slash - key) >= sizeof(parent))
			return ENAMETOOLONG;
		memcpy(parent, key, (size_t)(slash - key));
		parent[slash - key] = '\0';
	}
	for (int tries = 0; tries < MKDIR_RETRIES; tries++) {
		int dfd = slash ? openat(root, parent,
					 O_RDONLY | O_DIRECTORY | O_CLOEXEC)
				: dup(root);
		if (dfd < 0) {
			err = errno;
			if (err == ENOENT && !(err = make_parents(root, key)))
				continue;
			return err;
		}
		uint64_t rnd;
		if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
			rnd = (uint64_t)rand() << 32 ^ (uint64_t)rand();
		snprintf(tmp, tmpsz, TMP_PREFIX "%016llx",
			 (unsigned long long)rnd);
		int fd = openat(dfd, tmp,
				O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (fd >= 0) {
			*dfd_out = dfd;
			*fd_out = fd;
			return 0;
		}
		err = errno;
		close(dfd);
		if (err != ENOENT && err != EEXIST)
			return err;
	}
	return err;
}

/* Put key in d: durable on return, or (lazy) once its file and its
 * directory are synced. */
static int put_in(struct file_dir *d, const char *key, const void *data,
		  size_t len, int lazy)
{
	const char *slash = strrchr(key, '/');
	const char *base = slash ? slash + 1 : key;
	char tmp[64];
	int dfd, fd, err;

	if (!key_ok(key))
		return EINVAL;
	err = open_tmp(d->fd, key, &dfd, &fd, tmp, sizeof(tmp));
	if (err)
		return err;
	/* a block the client will not read back from here soon: kept out of
	 * the page cache, which also spares the copy into it */
	err = fsutil_write_direct(fd, data, len);
	if (!err && !lazy && fsync(fd))
		err = errno;
	if (close(fd) && !err)
		err = errno; /* NFS and friends report write errors here */
	if (err)
		goto unlink_tmp;
	if (renameat(dfd, tmp, dfd, base)) {
		err = errno;
		goto unlink_tmp;
	}
	/* The rename is only durable once the directory is. */
	if (!lazy && fsync(dfd))
		err = errno;
	close(dfd);
	return err;

unlink_tmp:
	unlinkat(dfd, tmp, 0);
	close(dfd);
	return err;
}

static int is_marker(struct objstore *s, const char *key)
{
	return ((struct file_store *)s)->ndirs > 1 &&
	       !strcmp(key, OBJSTORE_OWNER_KEY);
}

static int file_put(struct objstore *s, const char *key, const void *data,
		    size_t len)
{
	struct file_store *f = (struct file_store *)s;
	struct file_dir *own = dir_of(s, key);
	int err = 0;

	/* the marker: in every directory, the one reads take last */
	for (size_t i = 0; is_marker(s, key) && i < f->ndirs && !err; i++)
		if (&f->dirs[i] != own)
			err = put_in(&f->dirs[i], key, data, len, 0);
	return err ? err : put_in(own, key, data, len, 0);
}

/* ---- lazy puts and their sync ---- */

/* fsync (datasync: fdatasync) path under pool directory d ("": d). */
static int sync_path(struct file_dir *d, const char *path, int datasync)
{
	int fd = *path ? openat(d->fd, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
		       : dup(d->fd);
	int err;

	if (fd < 0)
		return errno;
	err = (datasync ? fdatasync(fd) : fsync(fd)) ? errno : 0;
	close(fd);
	return err;
}

static int pendings_push(struct pendings *p, size_t dir, const char *path,
			 size_t len)
{
	if (p->n == p->cap) {
		size_t cap = p->cap ? 2 * p->cap : 64;
		struct pending *v = realloc(p->v, cap * sizeof(*v));
		if (!v)
			return ENOMEM;
		p->v = v;
		p->cap = cap;
	}
	char *copy = strndup(path, len);
	if (!copy)
		return ENOMEM;
	p->v[p->n++] = (struct pending){dir, copy};
	return 0;
}

static int pendings_has(const struct pendings *p, size_t dir, const char *path,
			size_t len)
{
	for (size_t i = 0; i < p->n; i++)
		if (p->v[i].dir == dir && !strncmp(p->v[i].path, path, len) &&
		    !p->v[i].path[len])
			return 1;
	return 0;
}

static void pendings_free(struct pendings *p)
{
	for (size_t i = 0; i < p->n; i++)
		free(p->v[i].path);
	free(p->v);
	*p = (struct pendings){0};
}

/* What a sync of key, put lazily in dir i, needs (fdatasync mode: the
 * file and its directory), with f->lock held. */
static int note_lazy(struct file_store *f, size_t i, const char *key)
{
	const char *slash = strrchr(key, '/');
	size_t plen = slash ? (size_t)(slash - key) : 0;
	int err;

	if (!f->fdatasync) {
		f->dirs[f->dirs[i].fs].dirty = 1;
		return 0;
	}
	if ((err = pendings_push(&f->files, i, key, strlen(key))))
		return err;
	if (pendings_has(&f->parents, i, key, plen))
		return 0;
	return pendings_push(&f->parents, i, key, plen);
}

static int file_put_lazy(struct objstore *s, const char *key, const void *data,
			 size_t len)
{
	struct file_store *f = (struct file_store *)s;
	struct file_dir *own = dir_of(s, key);
	size_t i = (size_t)(own - f->dirs);
	int err;

	if (is_marker(s, key))
		return file_put(s, key, data, len);
	if ((err = put_in(own, key, data, len, 1)))
		return err;
	pthread_mutex_lock(&f->lock);
	err = note_lazy(f, i, key);
	if (!err)
		f->seq++;
	pthread_mutex_unlock(&f->lock);
	if (!err)
		return 0;
	/* no memory to note it: durable now, as a put is */
	const char *slash = strrchr(key, '/');
	char parent[PATH_MAX];
	size_t plen = slash ? (size_t)(slash - key) : 0;
	memcpy(parent, key, plen);
	parent[plen] = '\0';
	err = sync_path(own, key, 1);
	return err ? err : sync_path(own, parent, 0);
}

/* What one sync does: syncfs of each file system with lazy puts (dirty
 * lists their first directories), or fdatasync of each file and fsync of
 * each directory. Every item is tried; the first error is returned, and
 * logged with the number of items that failed. */
static int sync_work(struct file_store *f, const size_t *dirty, size_t ndirty,
		     const struct pendings *files,
		     const struct pendings *parents)
{
	const char *what = NULL, *sep = "";
	char where[PATH_MAX];
	size_t failed = 0;
	int err = 0, e;

	for (size_t k = 0; k < ndirty; k++) {
		struct file_dir *d = &f->dirs[dirty[k]];
		if (syncfs(d->fd) == 0 || failed++)
			continue;
		err = errno;
		what = "syncfs";
		snprintf(where, sizeof(where), "%s", d->path);
	}
	for (int dirs = 0; dirs < 2; dirs++) {
		const struct pendings *p = dirs ? parents : files;
		for (size_t k = 0; k < p->n; k++) {
			struct file_dir *d = &f->dirs[p->v[k].dir];
			if (!(e = sync_path(d, p->v[k].path, !dirs)) ||
			    failed++)
				continue;
			err = e;
			what = dirs ? "fsync" : "fdatasync";
			sep = *p->v[k].path ? "/" : "";
			snprintf(where, sizeof(where), "%s%s%s", d->path, sep,
				 p->v[k].path);
		}
	}
	if (err)
		log_err("cannot make the objects put durable: %s of '%s' "
			"failed: %s (%zu failed in this sync)",
			what, where, strerror(err), failed);
	return err;
}

/* Run one sync for every lazy put noted so far, with f->lock held (it is
 * let go while the disks work). */
static void sync_run(struct file_store *f)
{
	struct pendings files = f->files, parents = f->parents;
	uint64_t target = f->seq;
	size_t *dirty = malloc(f->ndirs * sizeof(*dirty)), ndirty = 0;
	int err = dirty ? 0 : ENOMEM;

	for (size_t i = 0; dirty && i < f->ndirs; i++)
		if (f->dirs[i].dirty) {
			f->dirs[i].dirty = 0;
			dirty[ndirty++] = i;
		}
	f->files = f->parents = (struct pendings){0};
	f->running = 1;
	pthread_mutex_unlock(&f->lock);
	if (!err)
		err = sync_work(f, dirty, ndirty, &files, &parents);
	free(dirty);
	pendings_free(&files);
	pendings_free(&parents);
	pthread_mutex_lock(&f->lock);
	f->running = 0;
	f->upto = target;
	f->err = err;
	if (err) {
		f->fails++;
		f->fail_err = err;
	}
	pthread_cond_broadcast(&f->synced);
}

/*
 * Every lazy put that returned before this call is covered by a sync
 * that started after it returned: the one under way when it came covers
 * only part of them, so it waits for that one and for the next. A sync
 * that failed while this call waited may have covered its puts: its
 * error is returned even when a later one succeeded. With nothing put
 * since the last sync ended, that sync's result is returned.
 */
static int file_sync(struct objstore *s)
{
	struct file_store *f = (struct file_store *)s;
	int err;

	pthread_mutex_lock(&f->lock);
	uint64_t mine = f->seq, fails = f->fails;
	err = f->upto >= mine ? f->err : 0;
	while (f->upto < mine) {
		if (f->running)
			pthread_cond_wait(&f->synced, &f->lock);
		else
			sync_run(f);
	}
	if (f->fails != fails)
		err = f->fail_err;
	pthread_mutex_unlock(&f->lock);
	return err;
}

/* ---- get / head / del ---- */

static int file_get(struct objstore *s, const char *key, uint64_t off,
		    size_t len, void **data, size_t *got)
{
	struct file_dir *d = dir_of(s, key);
	struct stat st;
	int fd, err = 0;

	if (!key_ok(key))
		return EINVAL;
	fd = openat(d->fd, key, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return errno == ENOTDIR || errno == ELOOP ? ENOENT : errno;
	if (fstat(fd, &st)) {
		err = errno;
		goto close_fd;
	}
	if (!S_ISREG(st.st_mode)) {
		err = ENOENT; /* a directory is not an object */
		goto close_fd;
	}
	/* The file under our fd never changes: puts replace it by rename. */
	size_t n = 0;
	if (off < (uint64_t)st.st_size) {
		n = (size_t)((uint64_t)st.st_size - off);
		if (len && len < n)
			n = len;
	}
	unsigned char *buf = bigbuf_alloc(n);
	if (!buf) {
		err = ENOMEM;
		goto close_fd;
	}
	size_t done = 0;
	while (done < n) {
		ssize_t r =
		    pread(fd, buf + done, n - done, (off_t)(off + done));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			err = errno;
			free(buf);
			goto close_fd;
		}
		if (r == 0)
			break;
		done += (size_t)r;
	}
	*data = buf;
	*got = done;
close_fd:
	close(fd);
	return err;
}

/* The object mapped, not read: its pages are the page cache's. */
static int file_get_view(struct objstore *s, const char *key,
			 struct objstore_view *v)
{
	struct file_dir *d = dir_of(s, key);
	struct stat st;
	int fd, err;

	if (!key_ok(key))
		return EINVAL;
	fd = openat(d->fd, key, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return errno == ENOTDIR || errno == ELOOP ? ENOENT : errno;
	if (fstat(fd, &st))
		err = errno;
	else if (!S_ISREG(st.st_mode))
		err = ENOENT; /* a directory is not an object */
	else /* never truncated in place: puts replace it by rename */
		err = objstore_view_of_fd(v, fd, (size_t)st.st_size);
	close(fd);
	return err;
}

static int file_head(struct objstore *s, const char *key, uint64_t *size)
{
	struct file_dir *d = dir_of(s, key);
	struct stat st;

	if (!key_ok(key))
		return EINVAL;
	if (fstatat(d->fd, key, &st, AT_SYMLINK_NOFOLLOW))
		return errno == ENOTDIR ? ENOENT : errno;
	if (!S_ISREG(st.st_mode))
		return ENOENT;
	*size = (uint64_t)st.st_size;
	return 0;
}

static int del_in(struct file_dir *d, const char *key)
{
	if (unlinkat(d->fd, key, 0) == 0)
		return 0;
	/* Missing, or a directory (not an object): nothing to delete. */
	if (errno == ENOENT || errno == ENOTDIR || errno == EISDIR)
		return 0;
	return errno;
}

static int file_del(struct objstore *s, const char *key)
{
	struct file_store *f = (struct file_store *)s;
	int err = 0;

	if (!key_ok(key))
		return EINVAL;
	if (!is_marker(s, key))
		return del_in(dir_of(s, key), key);
	for (size_t i = 0; i < f->ndirs; i++) {
		int e = del_in(&f->dirs[i], key);
		if (!err)
			err = e;
	}
	return err;
}

/* ---- list ---- */

struct walk {
	const char *prefix;
	size_t plen;
	objstore_list_fn fn;
	void *arg;
	int temps;	    /* list the temp files instead, as "DIR:PATH" */
	size_t dir;	    /* the pool directory walked */
	char key[PATH_MAX]; /* key of the directory being walked, then '/' */
};

/* Walk the directory dfd (consumed) whose key prefix is w->key[0..klen). */
static int walk_dir(struct walk *w, int dfd, size_t klen)
{
	DIR *dir = fdopendir(dfd);
	struct dirent *de;
	int err = 0;

	if (!dir) {
		err = errno;
		close(dfd);
		return err;
	}
	while (!err) {
		errno = 0;
		if (!(de = readdir(dir))) {
			err = errno;
			break;
		}
		const char *name = de->d_name;
		int tmp = !strncmp(name, TMP_PREFIX, TMP_PREFIX_LEN);
		if (!strcmp(name, ".") || !strcmp(name, "..") ||
		    (tmp && !w->temps))
			continue;
		size_t nlen = strlen(name);
		if (klen + nlen + 2 > sizeof(w->key))
			continue; /* cannot be a valid key */
		memcpy(w->key + klen, name, nlen + 1);
		size_t cmp = klen + nlen < w->plen ? klen + nlen : w->plen;
		if (strncmp(w->key, w->prefix, cmp))
			continue; /* prunes whole subtrees off the prefix */

		struct stat st;
		if (fstatat(dirfd(dir), name, &st, AT_SYMLINK_NOFOLLOW)) {
			if (errno == ENOENT)
				continue; /* deleted while we walk */
			err = errno;
			break;
		}
		if (S_ISDIR(st.st_mode)) {
			int sub = openat(dirfd(dir), name,
					 O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			if (sub < 0) {
				if (errno == ENOENT)
					continue;
				err = errno;
				break;
			}
			w->key[klen + nlen] = '/';
			w->key[klen + nlen + 1] = '\0';
			err = walk_dir(w, sub, klen + nlen + 1);
		} else if (S_ISREG(st.st_mode) && w->temps && tmp) {
			char where[PATH_MAX + 32];
			snprintf(where, sizeof where, "%zu:%s", w->dir, w->key);
			err = w->fn(w->arg, where, (uint64_t)st.st_size,
				    (int64_t)st.st_mtime);
		} else if (S_ISREG(st.st_mode) && !w->temps &&
			   klen + nlen >= w->plen) {
			err = w->fn(w->arg, w->key, (uint64_t)st.st_size,
				    (int64_t)st.st_mtime);
		}
	}
	closedir(dir);
	return err;
}

static int walk_pool(struct objstore *s, const char *prefix, int temps,
		     objstore_list_fn fn, void *arg)
{
	struct file_store *f = (struct file_store *)s;
	struct walk *w = malloc(sizeof(*w));
	int err = 0;

	if (!w)
		return ENOMEM;
	w->prefix = prefix;
	w->plen = strlen(prefix);
	w->fn = fn;
	w->arg = arg;
	w->temps = temps;
	for (size_t i = 0; i < f->ndirs && !err; i++) {
		w->dir = i;
		/* A fresh open, not a dup: a dup shares the directory
		 * offset, and listings may run concurrently. */
		int dfd = openat(f->dirs[i].fd, ".",
				 O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd < 0) {
			err = errno;
			break;
		}
		w->key[0] = '\0';
		err = walk_dir(w, dfd, 0);
	}
	free(w);
	return err;
}

static int file_list(struct objstore *s, const char *prefix,
		     objstore_list_fn fn, void *arg)
{
	return walk_pool(s, prefix, 0, fn, arg);
}

static int file_list_temps(struct objstore *s, objstore_list_fn fn, void *arg)
{
	return walk_pool(s, "", 1, fn, arg);
}

/* name: "DIR:PATH" as file_list_temps gave it; only a temp file goes. */
static int file_del_temp(struct objstore *s, const char *name)
{
	struct file_store *f = (struct file_store *)s;
	char *end;
	errno = 0;
	unsigned long i = strtoul(name, &end, 10);
	const char *path = end + 1, *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	if (errno || end == name || *end != ':' || i >= f->ndirs ||
	    strncmp(base, TMP_PREFIX, TMP_PREFIX_LEN) || strstr(path, "..") ||
	    path[0] == '/')
		return EINVAL;
	if (unlinkat(f->dirs[i].fd, path, 0) && errno != ENOENT)
		return errno;
	return 0;
}

/* ---- open / close ---- */

static void file_close(struct objstore *s)
{
	struct file_store *f = (struct file_store *)s;

	for (size_t i = 0; i < f->ndirs; i++) {
		if (f->dirs[i].fd >= 0)
			close(f->dirs[i].fd);
		free(f->dirs[i].path);
	}
	free(f->dirs);
	pendings_free(&f->files);
	pendings_free(&f->parents);
	pthread_cond_destroy(&f->synced);
	pthread_mutex_destroy(&f->lock);
	free(f);
}

static int file_on_dev(struct objstore *s, dev_t dev)
{
	struct file_store *f = (struct file_store *)s;
	struct stat st;

	for (size_t i = 0; i < f->ndirs; i++)
		if (fstat(f->dirs[i].fd, &st) == 0 && st.st_dev == dev)
			return 1;
	return 0;
}

static const struct objstore_ops file_ops = {
    .scheme = "file",
    .get = file_get,
    .get_view = file_get_view,
    .put = file_put,
    .put_lazy = file_put_lazy,
    .sync = file_sync,
    .del = file_del,
    .head = file_head,
    .list = file_list,
    .list_temps = file_list_temps,
    .del_temp = file_del_temp,
    .on_dev = file_on_dev,
    .close = file_close,
};

/* Open (creating it if only the last component is missing) one directory. */
static int open_dir(struct file_dir *d)
{
	d->fd = open(d->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d->fd >= 0)
		return 0;
	if (errno != ENOENT) {
		int err = errno;
		log_err("cannot open storage directory '%s': %s", d->path,
			strerror(err));
		return err;
	}
	if (mkdir(d->path, 0755) && errno != EEXIST) {
		int err = errno;
		if (err == ENOENT)
			log_err("cannot create storage directory '%s': its "
				"parent directory does not exist (create it "
				"first)",
				d->path);
		else
			log_err("cannot create storage directory '%s': %s",
				d->path, strerror(err));
		return err;
	}
	d->fd = open(d->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d->fd < 0) {
		int err = errno;
		log_err("cannot open storage directory '%s': %s", d->path,
			strerror(err));
		return err;
	}
	return 0;
}

/* Split "/A:/B" into absolute, normalised directory paths. */
static int parse_dirs(const char *spec, struct file_store *f)
{
	size_t n = 1;

	for (const char *c = spec; *c; c++)
		n += *c == ':';
	f->dirs = calloc(n, sizeof(*f->dirs));
	if (!f->dirs)
		return ENOMEM;
	for (size_t i = 0; i < n; i++)
		f->dirs[i].fd = -1;

	const char *c = spec;
	for (size_t i = 0; i < n; i++) {
		const char *end = strchr(c, ':');
		size_t len = end ? (size_t)(end - c) : strlen(c);
		if (len == 0 || c[0] != '/' || len >= PATH_MAX)
			return OBJSTORE_EURL;
		while (len > 1 && c[len - 1] == '/')
			len--;
		char *p = strndup(c, len);
		if (!p)
			return ENOMEM;
		f->dirs[i].path = p;
		f->ndirs = i + 1;
		for (size_t j = 0; j < i; j++)
			if (!strcmp(f->dirs[j].path, p))
				return OBJSTORE_EURL; /* listed twice */
		/* Query strings and fragments are not part of this scheme:
		 * refuse rather than create a directory named after them. */
		if (strpbrk(p, "?#"))
			return OBJSTORE_EURL;
		c = end ? end + 1 : c + len;
	}
	return 0;
}

/* How syncs make lazy puts durable: GRANARY_FILE_SYNC=syncfs (the
 * default: one syncfs per file system, which also writes what others left
 * dirty there) or fdatasync (each file and directory on its own). */
static int sync_by_fdatasync(void)
{
	const char *e = getenv("GRANARY_FILE_SYNC");

	if (!e || !*e || !strcmp(e, "syncfs"))
		return 0;
	if (!strcmp(e, "fdatasync"))
		return 1;
	log_warn("GRANARY_FILE_SYNC='%s' is neither 'syncfs' nor "
		 "'fdatasync': using syncfs",
		 e);
	return 0;
}

/* Each directory's fs: the first directory of the pool on its device. */
static int group_by_fs(struct file_store *f)
{
	dev_t *dev = calloc(f->ndirs, sizeof(*dev));
	struct stat st;
	int err = 0;

	if (!dev)
		return ENOMEM;
	for (size_t i = 0; i < f->ndirs && !err; i++) {
		if (fstat(f->dirs[i].fd, &st)) {
			err = errno;
			break;
		}
		dev[i] = st.st_dev;
		f->dirs[i].fs = i;
		for (size_t j = 0; j < i; j++)
			if (dev[j] == dev[i]) {
				f->dirs[i].fs = j;
				break;
			}
	}
	free(dev);
	return err;
}

int objstore_file_open(const char *url, struct objstore **out)
{
	struct file_store *f;
	int err;

	if (strncmp(url, "file://", 7))
		return OBJSTORE_EURL;
	/* file:///DIR: the authority (host) part must be empty. */
	if (url[7] != '/')
		return OBJSTORE_EURL;
	f = calloc(1, sizeof(*f));
	if (!f)
		return ENOMEM;
	f->base.ops = &file_ops;
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->synced, NULL);
	f->fdatasync = sync_by_fdatasync();
	err = parse_dirs(url + 7, f);
	if (err)
		goto close_store;
	for (size_t i = 0; i < f->ndirs; i++)
		if ((err = open_dir(&f->dirs[i])))
			goto close_store;
	if ((err = group_by_fs(f)))
		goto close_store;
	*out = &f->base;
	return 0;

close_store:
	file_close(&f->base);
	return err;
}
