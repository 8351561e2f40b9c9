/*
 * objstore_file.c - the file:// backend: a pool of local directories (one
 * per HDD, say), each object a plain file in the directory picked by
 * XXH3(key) mod the number of directories. Writes go to a temp file in the
 * final directory, are fsync'd, renamed over the final name and the directory
 * is fsync'd: a crash leaves the old object or the new one, never a torn one.
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
	int fd; /* O_DIRECTORY; every access is *at() relative to it */
};

struct file_store {
	struct objstore base; /* first */
	struct file_dir *dirs;
	size_t ndirs;
	/* No lock: all state is set at open; the file system serialises the
	 * rest (rename is atomic, temp names are unique). */
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

static int put_in(struct file_dir *d, const char *key, const void *data,
		  size_t len)
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
	if (!err && fsync(fd))
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
	if (fsync(dfd))
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
			err = put_in(&f->dirs[i], key, data, len);
	return err ? err : put_in(own, key, data, len);
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
	err = parse_dirs(url + 7, f);
	if (err)
		goto close_store;
	for (size_t i = 0; i < f->ndirs; i++)
		if ((err = open_dir(&f->dirs[i])))
			goto close_store;
	*out = &f->base;
	return 0;

close_store:
	file_close(&f->base);
	return err;
}
