/*
 * import_src.c - the sources of `granary import` (import.h): a local
 * directory walked with nftw (symlinks not followed), or an S3 prefix
 * listed with our own S3 client, its keys taken as paths. Big objects are
 * read in parts of IMP_PART bytes, IMP_AHEAD of them fetched ahead by a
 * pool of threads shared by all readers, so that one big file moves at
 * the store's bandwidth rather than one request's.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/store/objstore.h"
#include "lib/errors.h"
#include "lib/workq.h"
#include "tools/import.h"

#define IMP_PART	 (8u << 20) /* of an S3 object, read at once */
#define IMP_AHEAD	 4	    /* parts of one reader in flight */
#define IMP_FETCHERS	 8	    /* threads fetching parts, for all */
#define IMP_READ_BUF	 (1u << 20) /* of a local file, read at once */
#define IMP_RETRY_WINDOW 30000	    /* ms an S3 outage is ridden out */

struct imp_src {
	char *dir;		/* local: canonical; NULL for S3 */
	struct objstore *store; /* S3 */
	struct workq *fetch;	/* S3: parts fetched ahead */
};

/* A part of an S3 object being fetched ahead. */
struct part {
	struct workq_job job; /* first */
	struct imp_reader *r;
	uint64_t off;
	void *data; /* malloc'd by the store */
	size_t got;
	int err;
	int done; /* protected by r->lock */
};

struct imp_reader {
	struct imp_src *s;
	struct timespec mtime;
	/* local */
	int fd;
	char *buf;
	size_t cap;
	/* S3: the object whole (small), or parts in a ring (big) */
	const char *key;
	uint64_t size, next_off; /* next part to ask for */
	int whole, eof;
	void *cur; /* handed out last */
	struct part ring[IMP_AHEAD];
	int head, queued;     /* oldest part in the ring, parts in it */
	pthread_mutex_t lock; /* leaf */
	pthread_cond_t cond;  /* a part is done */
};

void imp_entry_free(struct imp_entry *e)
{
	if (!e)
		return;
	free(e->rel);
	free(e->target);
	free(e);
}

static int is_s3_url(const char *s)
{
	return !strncmp(s, "s3://", 5) || !strncmp(s, "s3+http://", 10);
}

int imp_src_is_s3(const struct imp_src *s)
{
	return s->store != NULL;
}

const char *imp_src_dir(const struct imp_src *s)
{
	return s->dir;
}

int imp_src_open(const char *source, struct imp_src **out, char *why,
		 size_t cap)
{
	struct imp_src *s = calloc(1, sizeof(*s));
	int err = 0;

	if (!s)
		return ENOMEM;
	if (is_s3_url(source)) {
		/* keys of the source's own, when the volume's differ */
		struct objstore_creds c = {
		    .access_key = getenv("GRANARY_IMPORT_S3_ACCESS_KEY"),
		    .secret_key = getenv("GRANARY_IMPORT_S3_SECRET_KEY"),
		    .session_token = getenv("GRANARY_IMPORT_S3_SESSION_TOKEN")};
		err = objstore_open(source,
				    c.access_key && c.secret_key ? &c : NULL,
				    &s->store);
		if (err == OBJSTORE_ENOCREDS)
			snprintf(why, cap,
				 "no S3 keys for '%s': set "
				 "GRANARY_IMPORT_S3_ACCESS_KEY and "
				 "GRANARY_IMPORT_S3_SECRET_KEY, or "
				 "GRANARY_S3_ACCESS_KEY and "
				 "GRANARY_S3_SECRET_KEY, or AWS_ACCESS_KEY_ID "
				 "and AWS_SECRET_ACCESS_KEY",
				 source);
		else if (err)
			snprintf(why, cap, "cannot use '%s': %s", source,
				 gr_strerror(err));
		if (err)
			goto fail;
		if (!getenv("GRANARY_IO_RETRY_WINDOW"))
			objstore_set_retry_window(s->store, IMP_RETRY_WINDOW);
		err = workq_open("gr-imp-fetch", IMP_FETCHERS, SIZE_MAX,
				 &s->fetch);
		if (err) {
			snprintf(why, cap, "cannot start threads: %s",
				 strerror(err));
			goto fail;
		}
		*out = s;
		return 0;
	}
	struct stat st;
	char real[PATH_MAX];
	if (!realpath(source, real) || stat(real, &st)) {
		err = errno;
		snprintf(why, cap, "cannot read source '%s': %s", source,
			 strerror(err));
		goto fail;
	}
	if (!S_ISDIR(st.st_mode)) {
		err = ENOTDIR;
		snprintf(why, cap,
			 "source '%s' is not a directory (import copies a "
			 "directory's tree, or an S3 prefix)",
			 source);
		goto fail;
	}
	if (access(real, R_OK | X_OK)) {
		err = errno;
		snprintf(why, cap, "cannot read source '%s': %s", source,
			 strerror(err));
		goto fail;
	}
	if (!(s->dir = strdup(real))) {
		err = ENOMEM;
		goto fail;
	}
	*out = s;
	return 0;
fail:
	imp_src_close(s);
	return err;
}

void imp_src_close(struct imp_src *s)
{
	if (!s)
		return;
	workq_close(s->fetch);
	objstore_close(s->store);
	free(s->dir);
	free(s);
}

/* ---- scanning: a local directory -------------------------------------- */

/* A new entry for rel (copied), its name found. */
static struct imp_entry *entry_new(const char *rel, enum imp_kind kind)
{
	struct imp_entry *e = calloc(1, sizeof(*e));

	if (!e || !(e->rel = strdup(rel))) {
		free(e);
		return NULL;
	}
	const char *slash = strrchr(e->rel, '/');
	e->name = slash ? slash + 1 : e->rel;
	e->kind = kind;
	return e;
}

/* nftw has no argument pointer: the one scan of this process. */
static struct walk {
	const struct imp_scan_cbs *cbs;
	size_t root_len;
	int err; /* emit's, or ENOMEM: stops the walk */
} walk;

static int walk_one(const char *path, const struct stat *st, int type,
		    struct FTW *ftw)
{
	const char *rel = path + walk.root_len;
	struct imp_entry *e;
	enum imp_kind kind;

	(void)ftw;
	if (*rel == '/')
		rel++;
	if (!*rel) /* the top: DEST itself */
		return 0;
	switch (type) {
	case FTW_D:
		kind = IMP_DIR;
		break;
	case FTW_F:
		kind = S_ISREG(st->st_mode) ? IMP_FILE : IMP_SPECIAL;
		break;
	case FTW_SL:
	case FTW_SLN:
		kind = IMP_SYMLINK;
		break;
	case FTW_DNR:
		walk.cbs->bad(walk.cbs->arg, rel, errno ? errno : EACCES);
		return 0;
	default: /* FTW_NS */
		walk.cbs->bad(walk.cbs->arg, rel, errno ? errno : EIO);
		return 0;
	}
	if (!(e = entry_new(rel, kind))) {
		walk.err = ENOMEM;
		return 1;
	}
	e->size = kind == IMP_FILE ? (uint64_t)st->st_size : 0;
	e->mtime = st->st_mtim;
	e->mode = st->st_mode & 07777;
	if (kind == IMP_SYMLINK) {
		char t[PATH_MAX];
		ssize_t n = readlink(path, t, sizeof(t) - 1);
		if (n < 0) {
			walk.cbs->bad(walk.cbs->arg, rel, errno);
			imp_entry_free(e);
			return 0;
		}
		t[n] = '\0';
		if (!(e->target = strdup(t))) {
			imp_entry_free(e);
			walk.err = ENOMEM;
			return 1;
		}
	}
	walk.err = walk.cbs->emit(walk.cbs->arg, e);
	return walk.err ? 1 : 0;
}

static int scan_local(struct imp_src *s, const struct imp_scan_cbs *cbs)
{
	walk = (struct walk){.cbs = cbs, .root_len = strlen(s->dir)};
	if (nftw(s->dir, walk_one, 64, FTW_PHYS) != 0 && !walk.err)
		walk.err = errno ? errno : EIO;
	return walk.err;
}

/* ---- scanning: an S3 prefix ------------------------------------------- */

/* A key that names a path: no empty, "." or ".." component (a directory
 * marker's trailing '/' cut off before). */
static int key_is_path(const char *k)
{
	for (const char *c = k;;) {
		size_t n = strcspn(c, "/");
		if (n == 0 || (n == 1 && c[0] == '.') ||
		    (n == 2 && c[0] == '.' && c[1] == '.'))
			return 0;
		if (!c[n])
			return 1;
		c += n + 1;
	}
}

static int list_one(void *arg, const char *key, uint64_t size, int64_t mtime)
{
	const struct imp_scan_cbs *cbs = arg;
	size_t n = strlen(key);
	enum imp_kind kind = IMP_FILE;
	char *rel = strdup(key);

	if (!rel)
		return ENOMEM;
	/* "a/b/": a directory marker (consoles make them) */
	if (n && key[n - 1] == '/') {
		while (n && rel[n - 1] == '/')
			rel[--n] = '\0';
		kind = IMP_DIR;
	}
	if (!n) { /* the prefix's own marker */
		free(rel);
		return 0;
	}
	if (!key_is_path(rel)) {
		cbs->bad(cbs->arg, key, EINVAL);
		free(rel);
		return 0;
	}
	struct imp_entry *e = entry_new(rel, kind);
	free(rel);
	if (!e)
		return ENOMEM;
	e->size = kind == IMP_FILE ? size : 0;
	e->mtime.tv_sec = mtime;
	e->mode = kind == IMP_DIR ? 0755 : 0644;
	return cbs->emit(cbs->arg, e);
}

int imp_src_scan(struct imp_src *s, const struct imp_scan_cbs *cbs)
{
	if (!s->store)
		return scan_local(s, cbs);
	return objstore_list(s->store, "", list_one, (void *)cbs);
}

/* ---- reading ---------------------------------------------------------- */

static void part_run(struct workq_job *job)
{
	struct part *p = (struct part *)job;
	struct imp_reader *r = p->r;
	void *data = NULL;
	size_t got = 0;
	int err = objstore_get_foreign(r->s->store, r->key, p->off, IMP_PART,
				       &data, &got);

	pthread_mutex_lock(&r->lock);
	p->data = data;
	p->got = got;
	p->err = err;
	p->done = 1;
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
}

/* Under r->lock: ask for parts until IMP_AHEAD are in flight or the
 * object's listed size is covered; with more, one part past it (an
 * object that grew since the listing: a part that comes short ends it). */
static void parts_ask(struct imp_reader *r, int more)
{
	while (r->queued < IMP_AHEAD &&
	       (r->next_off < r->size || (more && !r->queued))) {
		struct part *p = &r->ring[(r->head + r->queued) % IMP_AHEAD];
		*p = (struct part){.r = r, .off = r->next_off};
		p->job.run = part_run;
		if (workq_push(r->s->fetch, &p->job))
			break;
		r->queued++;
		r->next_off += IMP_PART;
	}
}

int imp_reader_open(struct imp_src *s, const struct imp_entry *e,
		    struct imp_reader **out)
{
	struct imp_reader *r = calloc(1, sizeof(*r));
	int err = 0;

	if (!r)
		return ENOMEM;
	r->s = s;
	r->fd = -1;
	r->mtime = e->mtime;
	if (s->store) {
		r->key = e->rel;
		r->size = e->size;
		r->whole = e->size <= IMP_PART;
		pthread_mutex_init(&r->lock, NULL);
		pthread_cond_init(&r->cond, NULL);
		if (!r->whole) {
			pthread_mutex_lock(&r->lock);
			parts_ask(r, 1);
			pthread_mutex_unlock(&r->lock);
		}
		*out = r;
		return 0;
	}
	char path[PATH_MAX];
	struct stat st;
	if (snprintf(path, sizeof(path), "%s/%s", s->dir, e->rel) >=
	    (int)sizeof(path)) {
		err = ENAMETOOLONG;
		goto fail;
	}
	r->fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (r->fd < 0 || fstat(r->fd, &st)) {
		err = errno;
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		err = EINVAL; /* replaced since the walk */
		goto fail;
	}
	r->mtime = st.st_mtim;
	/* a small file in one read (and one more that finds the end) */
	r->cap = (size_t)st.st_size + 1 < IMP_READ_BUF ? (size_t)st.st_size + 1
						       : IMP_READ_BUF;
	if (!(r->buf = malloc(r->cap))) {
		err = ENOMEM;
		goto fail;
	}
	*out = r;
	return 0;
fail:
	imp_reader_close(r);
	return err;
}

int imp_reader_next(struct imp_reader *r, const void **data, size_t *n)
{
	*data = NULL;
	*n = 0;
	if (!r->s->store) {
		ssize_t k;
		do
			k = read(r->fd, r->buf, r->cap);
		while (k < 0 && errno == EINTR);
		if (k < 0)
			return errno;
		*data = r->buf;
		*n = (size_t)k;
		return 0;
	}
	free(r->cur);
	r->cur = NULL;
	if (r->eof)
		return 0;
	if (r->whole) {
		size_t got = 0;
		int err = objstore_get_foreign(r->s->store, r->key, 0, 0,
					       &r->cur, &got);
		r->eof = 1;
		*data = r->cur;
		*n = got;
		return err;
	}
	pthread_mutex_lock(&r->lock);
	if (!r->queued) /* the listed size is read: find the end */
		parts_ask(r, 1);
	struct part *p = &r->ring[r->head];
	while (r->queued && !p->done)
		pthread_cond_wait(&r->cond, &r->lock);
	int err = r->queued ? p->err : EIO;
	if (r->queued) {
		r->cur = p->data;
		*data = p->data;
		*n = p->got;
		p->data = NULL;
		r->head = (r->head + 1) % IMP_AHEAD;
		r->queued--;
		if (err || p->got < IMP_PART)
			r->eof = 1; /* the parts after it find nothing */
		else
			parts_ask(r, 0);
	}
	pthread_mutex_unlock(&r->lock);
	return err;
}

const struct timespec *imp_reader_mtime(const struct imp_reader *r)
{
	return &r->mtime;
}

void imp_reader_close(struct imp_reader *r)
{
	if (!r)
		return;
	if (r->s->store) {
		/* parts still being fetched are waited for: they point here */
		pthread_mutex_lock(&r->lock);
		while (r->queued) {
			struct part *p = &r->ring[r->head];
			while (!p->done)
				pthread_cond_wait(&r->cond, &r->lock);
			free(p->data);
			r->head = (r->head + 1) % IMP_AHEAD;
			r->queued--;
		}
		pthread_mutex_unlock(&r->lock);
		pthread_cond_destroy(&r->cond);
		pthread_mutex_destroy(&r->lock);
		free(r->cur);
	}
	if (r->fd >= 0)
		close(r->fd);
	free(r->buf);
	free(r);
}
