/*
 * stage.c - staged blocks of big files (writeback): one encoded block per
 * file in the staging slot, a hash of what is staged for reads (lib/hash,
 * by slice id), a FIFO of what is staged (a TAILQ), a workq of upload jobs
 * (one per staged block, re-queued while its put fails), and a byte bound
 * that makes writers wait.
 */
#include "fs/data/stage.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fs/data/chunkstore.h"
#include "lib/fsutil.h"
#include "lib/hash.h"
#include "lib/log.h"
#include "lib/workq.h"

#define KEY_CAP	    96
#define HASH_BITS   10 /* 1024 buckets to start with */
#define CLOSE_TRIES 3  /* uploads tried per block when unmounting */

/* One staged block. Fields after the key are protected by stage->lock. */
struct sblock {
	struct workq_job job; /* its upload, queued or held by a worker */
	struct stage *st;
	uint64_t id;
	uint32_t idx, len;	  /* len: raw bytes (part of the key) */
	size_t n;		  /* encoded bytes: the file's size */
	uint64_t seq;		  /* staged in this order (stage_sync) */
	TAILQ_ENTRY(sblock) fifo; /* stage->fifo */
	struct hash_node hn;	  /* stage->staged, hashed by id */
	int uploading;		  /* its job is held by a worker (not queued) */
	int readers;		  /* stage_get calls reading its file */
	int dead;  /* its slice died: never put, or deleted after */
	int tries; /* failed puts */
	int64_t retry_ms;
};

struct stage {
	struct objstore *store; /* borrowed */
	struct stage_opts o;
	char *dir;
	int dir_fd;

	/* A leaf: never held across file I/O, a put or a fsync. */
	pthread_mutex_t lock;
	struct hash staged;	   /* protected by lock */
	TAILQ_HEAD(, sblock) fifo; /* protected by lock */
	uint64_t used;		   /* bytes staged or being written; ditto */
	uint64_t seq;		   /* last sblock seq handed out; ditto */
	int stop;		   /* protected by lock */
	int sync_err;		   /* last upload error; protected by lock */
	uint64_t dsynced; /* blocks up to this seq have durable names; ditto */
	int dsyncing;	  /* a directory fsync runs; protected by lock */
	/* a block was staged, or stop: a worker waiting for a retry looks
	 * again */
	pthread_cond_t work;
	pthread_cond_t room; /* a block left; a read or a dir fsync ended */
	/* The uploaders. Lock order: after lock (link_block pushes under
	 * it); its lock is a leaf. */
	struct workq *uploads;

	struct stage_stats st; /* counters updated with __atomic builtins */
};

#define STAT_ADD(s, f, v) __atomic_fetch_add(&(s)->st.f, (v), __ATOMIC_RELAXED)

static void upload_run(struct workq_job *job);
static void recover(struct stage *st);

static void block_path(const struct stage *st, const struct sblock *b,
		       char *buf, size_t cap)
{
	snprintf(buf, cap, "%s/%" PRIu64 "_%" PRIu32 "_%" PRIu32 ".blk",
		 st->dir, b->id, b->idx, b->len);
}

int stage_open(struct objstore *store, const struct stage_opts *o,
	       struct stage **out)
{
	struct stage *st;
	int err;

	if (!out)
		return EINVAL;
	*out = NULL;
	if (!store || !o || !o->dir || !*o->dir || o->uploaders < 1 ||
	    o->uploaders > 16 || o->max_bytes == 0 || o->block_size == 0 ||
	    (o->compress != CODEC_NONE && o->compress != CODEC_LZ4))
		return EINVAL;
	st = calloc(1, sizeof(*st));
	if (!st)
		return ENOMEM;
	st->store = store;
	st->o = *o;
	st->o.dir = NULL; /* the caller's string; st->dir is ours */
	st->dir_fd = -1;
	TAILQ_INIT(&st->fifo);
	pthread_mutex_init(&st->lock, NULL);
	fsutil_cond_init_mono(&st->work);
	fsutil_cond_init_mono(&st->room);
	st->dir = strdup(o->dir);
	if (!st->dir) {
		err = ENOMEM;
		goto close;
	}
	err = hash_init(&st->staged, HASH_BITS);
	if (err)
		goto close;
	st->dir_fd = open(st->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (st->dir_fd < 0) {
		err = errno;
		log_err("cannot open staging directory '%s': %s", st->dir,
			strerror(err));
		goto close;
	}
	/* the byte bound (max_bytes) bounds the queue: no cap of its own */
	err = workq_open("gr-stageput", o->uploaders, SIZE_MAX, &st->uploads);
	if (err) {
		log_err("cannot start block uploaders: %s", strerror(err));
		goto close;
	}
	recover(st); /* queues what it finds */
	*out = st;
	return 0;

close:
	stage_close(st); /* staged blocks stay on disk for the next mount */
	return err;
}

void stage_close(struct stage *st)
{
	if (!st)
		return;
	pthread_mutex_lock(&st->lock);
	st->stop = 1;
	pthread_cond_broadcast(&st->work);
	pthread_cond_broadcast(&st->room);
	pthread_mutex_unlock(&st->lock);
	/* each queued block is tried CLOSE_TRIES times at most */
	workq_close(st->uploads);
	/* what is left could not be put: its files stay for the next mount */
	for (struct sblock *b = TAILQ_FIRST(&st->fifo), *next; b; b = next) {
		next = TAILQ_NEXT(b, fifo);
		free(b);
	}
	hash_release(&st->staged);
	if (st->dir_fd >= 0)
		close(st->dir_fd);
	free(st->dir);
	pthread_cond_destroy(&st->room);
	pthread_cond_destroy(&st->work);
	pthread_mutex_destroy(&st->lock);
	free(st);
}

void stage_get_stats(struct stage *st, struct stage_stats *out)
{
	out->blocks = __atomic_load_n(&st->st.blocks, __ATOMIC_RELAXED);
	out->bytes = __atomic_load_n(&st->st.bytes, __ATOMIC_RELAXED);
	out->direct = __atomic_load_n(&st->st.direct, __ATOMIC_RELAXED);
	out->dropped = __atomic_load_n(&st->st.dropped, __ATOMIC_RELAXED);
	out->errors = __atomic_load_n(&st->st.errors, __ATOMIC_RELAXED);
	out->recovered = __atomic_load_n(&st->st.recovered, __ATOMIC_RELAXED);
	out->staged_blocks = out->staged_bytes = 0;
	pthread_mutex_lock(&st->lock);
	struct sblock *b;
	TAILQ_FOREACH(b, &st->fifo, fifo) {
		out->staged_blocks++;
		out->staged_bytes += b->n;
	}
	pthread_mutex_unlock(&st->lock);
}

/* ---- the staged set (under lock) ---- */

static void link_block(struct stage *st, struct sblock *b)
{
	b->seq = ++st->seq;
	hash_insert(&st->staged, &b->hn, b->id);
	TAILQ_INSERT_TAIL(&st->fifo, b, fifo);
	b->st = st;
	b->job.run = upload_run;
	/* refused only once stage_close began: the block then stays on
	 * disk for the next mount */
	if (workq_push(st->uploads, &b->job) == 0)
		pthread_cond_broadcast(&st->work);
}

/* The node's hash is its id: match tells the blocks of one id apart. */
static int match_idx(const struct hash_node *n, const void *idx)
{
	return hash_entry(n, struct sblock, hn)->idx == *(const uint32_t *)idx;
}

static struct sblock *find(struct stage *st, uint64_t id, uint32_t idx)
{
	struct hash_node *n = hash_find(&st->staged, id, match_idx, &idx);

	return n ? hash_entry(n, struct sblock, hn) : NULL;
}

/* Take b out of the hash: new readers go to the store. Returns once the
 * readers it had are done with its file. */
static void unhash_block(struct stage *st, struct sblock *b)
{
	hash_remove(&st->staged, &b->hn);
	while (b->readers)
		pthread_cond_wait(&st->room, &st->lock);
}

/* Take b off the FIFO, after unhash_block and after its file is gone if
 * it was put: stage_sync waits for this. The caller frees b. */
static void unqueue_block(struct stage *st, struct sblock *b)
{
	TAILQ_REMOVE(&st->fifo, b, fifo);
	st->used -= b->n;
	pthread_cond_broadcast(&st->room);
}

/* ---- recovery ---- */

/* Whether fd holds one whole encoded block of n bytes: a block cut short
 * by a crash was never committed (its fdatasync had not returned). */
static int whole_block(int fd, size_t n)
{
	uint8_t h[CODEC_HDR_SIZE];
	size_t len;

	return n >= sizeof(h) && !fsutil_pread_all(fd, h, sizeof(h), 0) &&
	       !codec_frame_len(h, sizeof(h), &len) && len == n;
}

/* Adopt the blocks in our slot: left by an earlier mount that used it, or
 * moved here by the packer from slots of clients that died. */
static void recover(struct stage *st)
{
	DIR *d = opendir(st->dir);
	struct dirent *e;
	uint64_t found = 0;

	if (!d)
		return;
	while ((e = readdir(d))) {
		struct sblock k = {0};
		char path[PATH_MAX + 300];
		struct stat sb;
		int used = 0;

		if (sscanf(e->d_name, "%" SCNu64 "_%" SCNu32 "_%" SCNu32 ".blk",
			   &k.id, &k.idx, &k.len) != 3 ||
		    !k.id)
			continue;
		block_path(st, &k, path, sizeof(path));
		if (strcmp(path + strlen(st->dir) + 1, e->d_name))
			continue; /* not a name we write */
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd >= 0 && !fstat(fd, &sb) &&
		    whole_block(fd, (size_t)sb.st_size)) {
			struct sblock *b = malloc(sizeof(*b));
			if (b) {
				*b = k;
				b->n = (size_t)sb.st_size;
				/* the uploaders run already */
				pthread_mutex_lock(&st->lock);
				st->used += b->n;
				link_block(st, b);
				pthread_mutex_unlock(&st->lock);
				found++;
				used = 1;
			}
		}
		if (fd >= 0)
			close(fd);
		if (!used && fd >= 0) {
			log_warn("staged block '%s' is cut short (a crash "
				 "while it was written; never committed): "
				 "removed",
				 path);
			unlink(path);
		}
	}
	closedir(d);
	STAT_ADD(st, recovered, found);
	if (found)
		log_info("found %" PRIu64 " staged blocks of an earlier mount: "
			 "uploading them",
			 found);
}

/* ---- uploads ---- */

static int read_block(struct stage *st, const struct sblock *b, void **out)
{
	char path[PATH_MAX + 64];
	void *buf = malloc(b->n ? b->n : 1);
	int err, fd;

	*out = NULL;
	if (!buf)
		return ENOMEM;
	block_path(st, b, path, sizeof(path));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	err = fd < 0 ? errno : fsutil_pread_all(fd, buf, b->n, 0);
	if (fd >= 0)
		close(fd);
	if (err) {
		log_err("cannot read staged block '%s': %s", path,
			strerror(err));
		free(buf);
		return err == ENOMEM ? ENOMEM : EIO;
	}
	*out = buf;
	return 0;
}

/* b is in the store, or never will be: tell the metadata (a failure makes
 * the caller try the upload again). */
static int staged_done(struct stage *st, const struct sblock *b)
{
	if (!st->o.staged || !st->o.staged(st->o.cb_arg, b->id, b->idx, 1))
		return 0;
	log_err("cannot record block %" PRIu64 "_%" PRIu32 " as uploaded "
		"(will retry)",
		b->id, b->idx);
	return EIO;
}

/* Put b unless its slice died; delete it again if the slice died while it
 * was being put (see the order in stage.h). Called without the lock. */
static int upload(struct stage *st, struct sblock *b)
{
	char key[KEY_CAP];
	void *buf;
	int dead, err;

	pthread_mutex_lock(&st->lock);
	dead = b->dead;
	pthread_mutex_unlock(&st->lock);
	if (dead) {
		STAT_ADD(st, dropped, 1);
		return staged_done(st, b);
	}
	if (st->o.test_delay_ms) {
		struct timespec ts = {st->o.test_delay_ms / 1000,
				      (st->o.test_delay_ms % 1000) * 1000000L};
		nanosleep(&ts, NULL);
	}
	err = read_block(st, b, &buf);
	if (err)
		return err;
	chunkstore_key(b->id, b->idx, b->len, key, sizeof(key));
	err = objstore_put(st->store, key, buf, b->n);
	free(buf);
	if (err) {
		log_err("cannot upload block '%s': %s (kept staged, will "
			"retry)",
			key, gr_strerror(err));
		return EIO;
	}
	pthread_mutex_lock(&st->lock);
	dead = b->dead;
	pthread_mutex_unlock(&st->lock);
	if (dead && objstore_del(st->store, key) == 0) {
		STAT_ADD(st, dropped, 1);
		return staged_done(st, b);
	}
	err = staged_done(st, b);
	if (err)
		return err;
	STAT_ADD(st, blocks, 1);
	STAT_ADD(st, bytes, b->n);
	return 0;
}

/* Under lock: is a block other than b due for a put, its job queued? */
static int other_due(const struct stage *st, const struct sblock *b,
		     int64_t now)
{
	const struct sblock *x;

	TAILQ_FOREACH(x, &st->fifo, fifo) {
		if (x != b && !x->uploading && x->retry_ms <= now)
			return 1;
	}
	return 0;
}

/*
 * A job of the upload queue: put one staged block. A block whose put
 * failed goes back to the tail of the queue, so fresh blocks go first; a
 * worker that reaches it before its retry time waits for that time unless
 * another block is due, when it queues it again and serves that one. Once
 * stage_close began, the queue refuses pushes: the block is retried here,
 * CLOSE_TRIES times at most.
 */
static void upload_run(struct workq_job *job)
{
	struct sblock *b = (struct sblock *)job;
	struct stage *st = b->st;

	pthread_mutex_lock(&st->lock);
	b->uploading = 1;
	for (;;) {
		int64_t now = fsutil_mono_ms();
		if (b->retry_ms > now) {
			if (!st->stop && other_due(st, b, now))
				goto requeue;
			fsutil_wait_until_ms(&st->work, &st->lock, b->retry_ms);
			continue;
		}
		pthread_mutex_unlock(&st->lock);

		int err = upload(st, b);

		pthread_mutex_lock(&st->lock);
		if (!err)
			break;
		STAT_ADD(st, errors, 1);
		st->sync_err = err;
		b->retry_ms = fsutil_retry_at_ms(++b->tries);
		pthread_cond_broadcast(&st->room);
		if (st->stop && b->tries >= CLOSE_TRIES) {
			log_err("leaving block %" PRIu64 "_%" PRIu32
				" staged in '%s' for the next mount",
				b->id, b->idx, st->dir);
			unhash_block(st, b);
			unqueue_block(st, b);
			pthread_mutex_unlock(&st->lock);
			free(b);
			return;
		}
		if (st->stop)
			continue;
	requeue:
		b->uploading = 0;
		pthread_mutex_unlock(&st->lock);
		if (workq_push(st->uploads, &b->job) == 0)
			return; /* b is the queue's again */
		/* stage_close began meanwhile: retry it here */
		pthread_mutex_lock(&st->lock);
		b->uploading = 1;
	}
	/* still marked uploading: no other worker counts it due while its
	 * readers finish and its file goes */
	unhash_block(st, b);
	pthread_mutex_unlock(&st->lock);
	char path[PATH_MAX + 64];
	block_path(st, b, path, sizeof(path));
	if (unlink(path))
		log_warn("cannot remove staged block '%s': %s", path,
			 strerror(errno));
	pthread_mutex_lock(&st->lock);
	unqueue_block(st, b);
	pthread_mutex_unlock(&st->lock);
	free(b);
}

/* ---- public ---- */

/* Write the encoded block to its file and fdatasync it; on failure the
 * file is gone. */
static int write_file(struct stage *st, const struct sblock *b, const void *enc)
{
	char path[PATH_MAX + 64];
	int err, fd;

	block_path(st, b, path, sizeof(path));
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return errno;
	err = fsutil_write_all(fd, enc, b->n);
	if (!err && fdatasync(fd))
		err = errno;
	if (close(fd) && !err)
		err = errno;
	if (err)
		unlink(path);
	return err;
}

int stage_put(struct stage *st, uint64_t id, uint32_t idx, const void *raw,
	      uint32_t len)
{
	struct sblock *b;
	char key[KEY_CAP];
	void *enc;
	int err;

	if (!st || !id || (!raw && len) || len > st->o.block_size)
		return EINVAL;
	b = calloc(1, sizeof(*b));
	enc = malloc(codec_bound(len));
	if (!b || !enc) {
		err = ENOMEM;
		goto free_enc;
	}
	*b = (struct sblock){.id = id, .idx = idx, .len = len};
	chunkstore_key(id, idx, len, key, sizeof(key));
	err = codec_encode(raw, len, st->o.compress, enc, &b->n);
	if (err) {
		log_err("cannot encode block '%s': %s", key, gr_strerror(err));
		err = EIO;
		goto free_enc;
	}

	/* Back-pressure: wait for uploads to make room. One block always
	 * fits, so a bound smaller than a block cannot stop everything. */
	pthread_mutex_lock(&st->lock);
	while (st->used && st->used + b->n > st->o.max_bytes && !st->stop)
		pthread_cond_wait(&st->room, &st->lock);
	st->used += b->n;
	pthread_mutex_unlock(&st->lock);

	err = write_file(st, b, enc);
	if (!err && st->o.staged && st->o.staged(st->o.cb_arg, id, idx, 0)) {
		char path[PATH_MAX + 64];
		log_warn("cannot record staged block '%s' in the metadata",
			 key);
		block_path(st, b, path, sizeof(path));
		unlink(path);
		err = EIO;
	}
	if (!err) {
		pthread_mutex_lock(&st->lock);
		link_block(st, b);
		pthread_mutex_unlock(&st->lock);
		free(enc);
		return 0;
	}
	pthread_mutex_lock(&st->lock);
	st->used -= b->n;
	pthread_cond_broadcast(&st->room);
	pthread_mutex_unlock(&st->lock);
	/* A staging disk that is full or failing costs speed, not data: the
	 * block is still in memory, so it goes to the store now, as it would
	 * without --writeback. */
	log_warn("cannot stage block '%s' in '%s': %s (putting it in the "
		 "store at once)",
		 key, st->dir, strerror(err));
	err = objstore_put(st->store, key, enc, b->n);
	if (err) {
		log_err("cannot upload block '%s': %s", key, gr_strerror(err));
		err =
		    err == ENOMEM || err == ENOSPC || err == EDQUOT ? err : EIO;
	} else {
		STAT_ADD(st, direct, 1);
	}
free_enc:
	free(enc);
	free(b);
	return err;
}

int stage_durable(struct stage *st)
{
	int err = 0;

	if (!st)
		return 0;
	pthread_mutex_lock(&st->lock);
	uint64_t mine = st->seq;
	while (st->dsynced < mine && !err) {
		if (st->dsyncing) {
			pthread_cond_wait(&st->room, &st->lock);
			continue;
		}
		/* one fsync of the directory for everyone staged so far */
		uint64_t upto = st->seq;
		st->dsyncing = 1;
		pthread_mutex_unlock(&st->lock);
		err = fsync(st->dir_fd) ? errno : 0;
		pthread_mutex_lock(&st->lock);
		st->dsyncing = 0;
		if (!err)
			st->dsynced = upto;
		pthread_cond_broadcast(&st->room);
	}
	pthread_mutex_unlock(&st->lock);
	if (err)
		log_err("cannot make staged blocks durable in '%s': %s",
			st->dir, strerror(err));
	return err;
}

int stage_get(struct stage *st, uint64_t id, uint32_t idx, void **enc,
	      size_t *n)
{
	struct sblock *b;
	int err;

	if (!st)
		return ENOENT;
	pthread_mutex_lock(&st->lock);
	b = find(st, id, idx);
	if (b && enc)
		b->readers++;
	pthread_mutex_unlock(&st->lock);
	if (!b)
		return ENOENT;
	if (!enc)
		return 0;
	err = read_block(st, b, enc);
	if (!err)
		*n = b->n;
	pthread_mutex_lock(&st->lock);
	if (--b->readers == 0)
		pthread_cond_broadcast(&st->room);
	pthread_mutex_unlock(&st->lock);
	return err;
}

void stage_drop(struct stage *st, uint64_t id)
{
	if (!st)
		return;
	pthread_mutex_lock(&st->lock);
	/* the upload threads skip these, or delete them after their put */
	for (struct hash_node *n = hash_find(&st->staged, id, NULL, NULL); n;
	     n = hash_find_next(n, id, NULL, NULL))
		hash_entry(n, struct sblock, hn)->dead = 1;
	pthread_mutex_unlock(&st->lock);
}

int stage_sync(struct stage *st)
{
	int err;

	if (!st)
		return 0;
	pthread_mutex_lock(&st->lock);
	st->sync_err = 0;
	uint64_t upto = st->seq;
	/* the FIFO is in seq order: only its head can be older */
	while (!TAILQ_EMPTY(&st->fifo) && TAILQ_FIRST(&st->fifo)->seq <= upto &&
	       !st->sync_err)
		fsutil_wait_until_ms(&st->room, &st->lock,
				     fsutil_mono_ms() + 100);
	err = st->sync_err;
	pthread_mutex_unlock(&st->lock);
	return err;
}
