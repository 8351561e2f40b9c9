/*
 * packer.c - gather small slices into pack objects.
 *
 * Default mode has no thread of its own: the callers of packer_put fill the
 * open pack, and whoever fills it up, or finds its window over while
 * waiting, seals and puts it while the others wait on it. Writeback mode
 * writes frames to a staging file per pack; writers seal packs by size, a
 * window job seals the open pack when its window is over, and upload jobs
 * put sealed packs in the background (all on one workq, p->uploads).
 */
#include "fs/data/packer.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/queue.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "meta/meta.h"
#include "meta/meta_objects.h"
#include "lib/fsutil.h"
#include "lib/log.h"
#include "lib/workq.h"
#include "fs/data/packbatch.h"

#define KEY_CAP	      96
#define PACK_SIZE_MIN (64u << 10)
#define PACK_SIZE_MAX (64u << 20)
#define WINDOW_MAX_MS 600000u
#define STAGE_SLOTS   64	 /* staging dirs per root: mounts at once */
#define CLOSE_TRIES   3		 /* uploads tried per pack when unmounting */
#define SCRATCH_KEEP  4		 /* LZ4 buffers kept for the next frames */
#define SCRATCH_MAX   (2u << 20) /* larger ones are freed at once */
#define GATHER_MAX_NS 2000000	 /* a sync waits this long for more frames */
#define SPARE_KEEP    4		 /* uploaded staging files kept for reuse */
#define BATCH_WAIT_MS 200	 /* a batch's pack waits this long for it */

enum pack_state { PK_OPEN, PK_SEALED, PK_DONE };

/* A pack being filled, put, or done and waited on. Freed by the last of
 * its users (callers with a frame in it) once it is done. All fields but
 * id are protected by packer->lock; buf/len are only read by the sealer
 * once the pack has left PK_OPEN. */
struct pack {
	struct workq_job job; /* first: its upload (writeback) */
	struct packer *owner;
	uint64_t id;
	char *buf; /* default mode: the bytes */
	size_t len, cap;
	int64_t deadline_ms; /* CLOCK_MONOTONIC: seal by then */
	int64_t opened_ms;
	uint64_t batch; /* whose members it waits for (0: none) */
	int users;
	int frames;
	int state;	     /* enum pack_state */
	int err;	     /* PK_DONE: what its users return */
	pthread_cond_t done; /* broadcast when state becomes PK_DONE */

	/* writeback: len is the bytes reserved in the staging file */
	TAILQ_ENTRY(pack) link; /* p->staged, oldest first */
	int fd;			/* staging file (read-write) */
	int writing;		/* callers still writing frames into it */
	int readers;		/* packer_staged_get calls reading it */
	int uploading;		/* a worker holds its upload job */
	int tries;		/* failed uploads */
	/* group commit: writes numbered in order, one fdatasync for all
	 * that are done when it starts (see group_sync) */
	uint64_t wseq, synced;
	int syncing, sync_err;
	int copying; /* callers with room reserved, still writing into it */
	int named;   /* its directory entry was fsync'd */
	int64_t retry_ms; /* not before this (CLOCK_MONOTONIC) */
};

struct packer {
	struct objstore *store; /* borrowed */
	struct packer_opts o;
	struct packer_cbs cbs;

	/* After writer->lock; a leaf otherwise. Never held across a put or
	 * a callback, except new_id (a counter, batched in memory). */
	pthread_mutex_t lock;
	struct pack *open; /* being filled, or NULL; protected by lock */
	int holders;	   /* see packer_hold; protected by lock */
	struct packbatch_table batches; /* protected by lock */
	/* writeback group commit (see group_sync); protected by lock */
	int parked;	       /* callers in group_sync */
	int64_t sync_ns;       /* an fdatasync takes about this long */
	pthread_cond_t gather; /* a frame was written, or a holder left */

	/* writeback: every pack with a staging file, open one included */
	TAILQ_HEAD(packq, pack) staged; /* protected by lock */
	int nsealed;  /* staged but not open; protected by lock */
	int stop;     /* protected by lock */
	int sync_err; /* last upload error; protected by lock */
	/* a pack was sealed or became ready, or stop: the window job and
	 * uploads waiting for a retry look again */
	pthread_cond_t work;
	pthread_cond_t room; /* writers: a staged pack is gone */
	char *dir;	     /* our staging directory (stage_dir/<slot>) */
	/* LZ4 output buffers used again (a fresh one would cost its page
	 * faults per frame); protected by lock */
	void *scratch[SCRATCH_KEEP];
	size_t scratch_cap[SCRATCH_KEEP];
	int nscratch;
	int lock_fd; /* flock'd: this directory is ours */
	/* staging files of uploaded packs, kept to be written over by the
	 * next packs (see spare_keep); protected by lock */
	int spare_fd[SPARE_KEEP]; /* -1: none in this place */
	/* Writeback: the upload jobs of ready packs (sealed, nobody writing
	 * them) and the window job. Pushed under lock; its lock is a leaf.
	 * max_staged bounds it: no cap of its own. */
	struct workq *uploads;
	struct workq_job window; /* sealing the open pack by its window */
	int window_queued;	 /* window job queued or running; lock */

	struct packer_stats st; /* updated with __atomic builtins */
};

#define STAT_ADD(p, f, v) __atomic_fetch_add(&(p)->st.f, (v), __ATOMIC_RELAXED)

static void upload_run(struct workq_job *job);
static void window_run(struct workq_job *job);
static void pack_ready(struct packer *p, struct pack *k);
static int slot_open(struct packer *p);
static void slot_recover(struct packer *p);
static void stop_uploaders(struct packer *p);
static void spare_drop(struct packer *p);

int packer_open(struct objstore *store, const struct packer_opts *o,
		const struct packer_cbs *cbs, struct packer **out)
{
	struct packer *p;
	struct pack *k;
	int err;

	if (!out)
		return EINVAL;
	*out = NULL;
	if (!store || !o || !cbs || !cbs->new_id || !cbs->total ||
	    o->pack_size < PACK_SIZE_MIN || o->pack_size > PACK_SIZE_MAX ||
	    o->window_ms > WINDOW_MAX_MS ||
	    (o->compress != CODEC_NONE && o->compress != CODEC_LZ4) ||
	    (o->stage_dir && (!*o->stage_dir || o->uploaders < 1 ||
			      o->uploaders > 16 || o->max_staged < 1)))
		return EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return ENOMEM;
	TAILQ_INIT(&p->staged);
	p->store = store;
	p->o = *o;
	p->o.stage_dir = NULL; /* the caller's string; p->dir is ours */
	p->cbs = *cbs;
	p->lock_fd = -1;
	for (int i = 0; i < SPARE_KEEP; i++)
		p->spare_fd[i] = -1;
	pthread_mutex_init(&p->lock, NULL);
	fsutil_cond_init_mono(&p->work);
	fsutil_cond_init_mono(&p->room);
	fsutil_cond_init_mono(&p->gather);
	p->sync_ns = GATHER_MAX_NS / 4;
	if (!o->stage_dir) {
		*out = p;
		return 0;
	}
	p->dir = strdup(o->stage_dir); /* replaced by slot_open */
	if (!p->dir) {
		err = ENOMEM;
		goto free_p;
	}
	err = slot_open(p);
	if (err)
		goto free_p;
	slot_recover(p);
	p->window.run = window_run;
	err = workq_open("gr-packput", o->uploaders, SIZE_MAX, &p->uploads);
	if (err) {
		log_err("cannot start pack uploaders: %s", strerror(err));
		goto stop;
	}
	pthread_mutex_lock(&p->lock);
	TAILQ_FOREACH(k, &p->staged, link)
		pack_ready(p, k); /* recovered: sealed, nobody writes them */
	pthread_mutex_unlock(&p->lock);
	*out = p;
	return 0;

stop:
	packer_close(p); /* staged packs stay on disk for the next mount */
	return err;
free_p:
	packer_close(p);
	return err;
}

static void pack_free(struct pack *k)
{
	if (k->fd >= 0)
		close(k->fd);
	pthread_cond_destroy(&k->done);
	free(k->buf);
	free(k);
}

void packer_close(struct packer *p)
{
	struct pack *k;

	if (!p)
		return;
	stop_uploaders(p);
	/* Every caller of packer_put has returned, and the last one out of a
	 * default-mode pack frees it: only an unused open pack can be left,
	 * or, in writeback, packs that could not be uploaded (their files
	 * stay for the next mount). */
	if (p->open && !p->dir) {
		gr_assert(p->open->users == 0);
		pack_free(p->open);
	}
	while ((k = TAILQ_FIRST(&p->staged))) {
		TAILQ_REMOVE(&p->staged, k, link);
		pack_free(k);
	}
	if (p->dir)
		spare_drop(p);
	if (p->lock_fd >= 0)
		close(p->lock_fd); /* releases the flock */
	for (int i = 0; i < p->nscratch; i++)
		free(p->scratch[i]);
	free(p->dir);
	pthread_cond_destroy(&p->gather);
	pthread_cond_destroy(&p->room);
	pthread_cond_destroy(&p->work);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

const char *packer_stage_dir(const struct packer *p)
{
	return p ? p->dir : NULL;
}

void packer_get_stats(struct packer *p, struct packer_stats *st)
{
	struct pack *k;

	st->packs = __atomic_load_n(&p->st.packs, __ATOMIC_RELAXED);
	st->frames = __atomic_load_n(&p->st.frames, __ATOMIC_RELAXED);
	st->bytes = __atomic_load_n(&p->st.bytes, __ATOMIC_RELAXED);
	st->errors = __atomic_load_n(&p->st.errors, __ATOMIC_RELAXED);
	st->recovered = __atomic_load_n(&p->st.recovered, __ATOMIC_RELAXED);
	st->staged_packs = st->staged_bytes = 0;
	pthread_mutex_lock(&p->lock);
	TAILQ_FOREACH(k, &p->staged, link) {
		st->staged_packs++;
		st->staged_bytes += k->len;
	}
	pthread_mutex_unlock(&p->lock);
}

/* ---- packs (under p->lock unless said otherwise) ---- */

static int pack_new(struct packer *p, struct pack **out)
{
	struct pack *k = calloc(1, sizeof(*k));
	int err;

	if (!k)
		return ENOMEM;
	k->fd = -1;
	err = p->cbs.new_id(p->cbs.arg, &k->id);
	if (err) {
		free(k);
		return err;
	}
	k->opened_ms = fsutil_mono_ms();
	k->deadline_ms = k->opened_ms + p->o.window_ms;
	fsutil_cond_init_mono(&k->done);
	*out = k;
	return 0;
}

/* Take the open pack out of filling: its caller must put it (default
 * mode), or the upload threads will (writeback). */
static struct pack *seal(struct packer *p)
{
	struct pack *k = p->open;

	gr_assert(k && k->state == PK_OPEN);
	k->state = PK_SEALED;
	p->open = NULL;
	if (p->dir) {
		p->nsealed++;
		if (!k->writing)
			pack_ready(p, k);
		pthread_cond_broadcast(&p->work);
	}
	return k;
}

/* Under lock, writeback: k is sealed and nobody writes it any more: queue
 * its upload. */
static void pack_ready(struct packer *p, struct pack *k)
{
	gr_assert(k->state == PK_SEALED && !k->writing);
	k->owner = p;
	k->job.run = upload_run;
	if (workq_push(p->uploads, &k->job) == 0)
		return;
	/* packer_close began (stop_uploaders seals before that, so only a
	 * pack written after it): its file stays for the next mount */
	log_err("leaving pack %" PRIu64 " staged in '%s' for the next mount",
		k->id, p->dir);
	k->state = PK_DONE;
	p->nsealed--;
}

/* Under lock, writeback: have the window job watch the open pack. */
static void window_arm(struct packer *p)
{
	if (!p->window_queued && workq_push(p->uploads, &p->window) == 0)
		p->window_queued = 1;
}

/* Put a sealed pack and record its total; wakes its users. Called
 * without the lock. */
static void put_pack(struct packer *p, struct pack *k)
{
	char key[KEY_CAP];
	int err;

	chunkstore_pack_key(k->id, key, sizeof(key));
	err = objstore_put(p->store, key, k->buf, k->len);
	if (err) {
		log_err("cannot upload pack '%s' (%zu bytes): %s", key, k->len,
			gr_strerror(err));
		err =
		    err == ENOMEM || err == ENOSPC || err == EDQUOT ? err : EIO;
	} else {
		err = p->cbs.total(p->cbs.arg, k->id, k->len, NULL);
		if (err)
			log_err("cannot record pack '%s' in the metadata", key);
	}
	if (err) {
		STAT_ADD(p, errors, 1);
	} else {
		STAT_ADD(p, packs, 1);
		STAT_ADD(p, frames, (uint64_t)k->frames);
		STAT_ADD(p, bytes, k->len);
	}
	pthread_mutex_lock(&p->lock);
	k->state = PK_DONE;
	k->err = err;
	pthread_cond_broadcast(&k->done);
	pthread_mutex_unlock(&p->lock);
}

/* Drop one user of k; the last one frees a done pack. */
static void pack_leave(struct pack *k)
{
	if (--k->users == 0 && k->state == PK_DONE)
		pack_free(k);
}

static int append(struct pack *k, const void *frame, size_t len)
{
	if (k->len + len > k->cap) {
		size_t cap = k->cap ? k->cap * 2 : 256u << 10;
		while (cap < k->len + len)
			cap *= 2;
		char *b = realloc(k->buf, cap);
		if (!b)
			return ENOMEM;
		k->buf = b;
		k->cap = cap;
	}
	memcpy(k->buf + k->len, frame, len);
	k->len += len;
	return 0;
}

/* ---- writeback: staging files ---- */

static void stage_path(const struct packer *p, uint64_t id, char *buf,
		       size_t cap)
{
	snprintf(buf, cap, "%s/%" PRIu64 ".pack", p->dir, id);
}

static void spare_path(const struct packer *p, int i, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s/spare%d", p->dir, i);
}

/*
 * Keep the staging file of uploaded pack k (its name is path) for a later
 * pack to be written over, rather than unlinking it: on ext4 an fdatasync
 * after appending to a file commits the journal (new blocks, new size),
 * one after writing over allocated blocks does not, and costs about half
 * as much. The bytes of k stay in it past what the next pack has written:
 * committed frames are found through the metadata, never by reading the
 * file, so only a crash-time upload (adopt) carries them along, as dead
 * weight for gc. Returns 1 if kept (k->fd is then the spare's), else 0:
 * the caller unlinks the file. Called without the lock.
 */
static int spare_keep(struct packer *p, struct pack *k, const char *path)
{
	char to[PATH_MAX + 64];
	int i;

	pthread_mutex_lock(&p->lock);
	for (i = 0; i < SPARE_KEEP && p->spare_fd[i] != -1; i++)
		;
	if (i == SPARE_KEEP || p->stop) {
		pthread_mutex_unlock(&p->lock);
		return 0;
	}
	p->spare_fd[i] = -2; /* taken, being renamed */
	pthread_mutex_unlock(&p->lock);
	spare_path(p, i, to, sizeof(to));
	int ok = rename(path, to) == 0;
	pthread_mutex_lock(&p->lock);
	p->spare_fd[i] = ok ? k->fd : -1;
	pthread_mutex_unlock(&p->lock);
	if (ok)
		k->fd = -1;
	return ok;
}

/* A spare staging file renamed to path, or -1 when there is none. Under
 * lock. */
static int spare_take(struct packer *p, const char *path)
{
	char from[PATH_MAX + 64];

	for (int i = 0; i < SPARE_KEEP; i++) {
		int fd = p->spare_fd[i];
		if (fd < 0)
			continue;
		p->spare_fd[i] = -1;
		spare_path(p, i, from, sizeof(from));
		if (rename(from, path) == 0)
			return fd;
		log_warn("cannot reuse staging file '%s': %s", from,
			 strerror(errno));
		close(fd);
		unlink(from);
	}
	return -1;
}

/* Remove the spare staging files (unmount). */
static void spare_drop(struct packer *p)
{
	char path[PATH_MAX + 64];

	for (int i = 0; i < SPARE_KEEP; i++) {
		if (p->spare_fd[i] < 0)
			continue;
		close(p->spare_fd[i]);
		p->spare_fd[i] = -1;
		spare_path(p, i, path, sizeof(path));
		if (unlink(path))
			log_warn("cannot remove staging file '%s': %s", path,
				 strerror(errno));
	}
}

static int mkdir_p(const char *path)
{
	char tmp[PATH_MAX];

	if (snprintf(tmp, sizeof(tmp), "%s", path) >= (int)sizeof(tmp))
		return ENAMETOOLONG;
	for (char *c = tmp + 1; *c; c++) {
		if (*c != '/')
			continue;
		*c = '\0';
		if (mkdir(tmp, 0700) && errno != EEXIST)
			return errno;
		*c = '/';
	}
	if (mkdir(tmp, 0700) && errno != EEXIST)
		return errno;
	return 0;
}

/* Take a free slot under the staging root: ROOT/<n>, flock'd on
 * ROOT/<n>/lock for as long as the packer lives, so that two mounts of one
 * volume on one node never take each other's packs. */
static int slot_open(struct packer *p)
{
	char path[PATH_MAX + 64];
	char *root = p->dir;
	int err = strlen(root) < PATH_MAX - 64 ? mkdir_p(root) : ENAMETOOLONG;

	if (err) {
		log_err("cannot create staging directory '%s': %s", root,
			strerror(err));
		return err;
	}
	for (int n = 0; n < STAGE_SLOTS; n++) {
		snprintf(path, sizeof(path), "%s/%d", root, n);
		if (mkdir(path, 0700) && errno != EEXIST) {
			err = errno;
			log_err("cannot create staging directory '%s': %s",
				path, strerror(err));
			return err;
		}
		snprintf(path, sizeof(path), "%s/%d/lock", root, n);
		int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		if (fd < 0) {
			err = errno;
			log_err("cannot open '%s': %s", path, strerror(err));
			return err;
		}
		if (flock(fd, LOCK_EX | LOCK_NB)) {
			close(fd);
			continue; /* another mount's */
		}
		snprintf(path, sizeof(path), "%s/%d", root, n);
		char *dir = strdup(path);
		if (!dir) {
			close(fd);
			return ENOMEM;
		}
		p->lock_fd = fd;
		p->dir = dir;
		free(root);
		return 0;
	}
	log_err("no free staging slot under '%s' (%d mounts of this volume "
		"on this node?)",
		root, STAGE_SLOTS);
	return EBUSY;
}

/* Length of the run of whole, well-formed frames at the start of fd. */
static uint64_t frames_len(int fd, uint64_t size)
{
	uint64_t off = 0;
	uint8_t h[CODEC_HDR_SIZE];

	while (off + CODEC_HDR_SIZE <= size) {
		size_t n;
		if (pread(fd, h, sizeof(h), (off_t)off) != (ssize_t)sizeof(h) ||
		    codec_frame_len(h, sizeof(h), &n) || off + n > size)
			break;
		off += n;
	}
	return off;
}

/* Append k to the staged list, oldest first. Under lock. */
static void stage_link(struct packer *p, struct pack *k)
{
	TAILQ_INSERT_TAIL(&p->staged, k, link);
}

/* Adopt one staged pack file (ours after a rename) as a sealed pack. */
static void adopt(struct packer *p, const char *from, uint64_t id)
{
	char path[PATH_MAX + 64];
	struct stat st;
	struct pack *k;

	stage_path(p, id, path, sizeof(path));
	if (strcmp(from, path) && rename(from, path)) {
		log_err("cannot take over staged pack '%s': %s", from,
			strerror(errno));
		return;
	}
	k = calloc(1, sizeof(*k));
	if (!k)
		return;
	k->id = id;
	k->fd = open(path, O_RDWR | O_CLOEXEC);
	if (k->fd < 0 || fstat(k->fd, &st)) {
		log_err("cannot open staged pack '%s': %s", path,
			strerror(errno));
		if (k->fd >= 0)
			close(k->fd);
		free(k);
		return;
	}
	/* Uploaded whole, as it is: a frame cut short by the crash (or by a
	 * full disk) was never committed, and one of those may sit between
	 * committed frames, so the file is not cut at the first bad one. A
	 * reused file (spare_keep) also holds an earlier pack's bytes past
	 * the frames written into it: dead weight too. */
	k->len = (uint64_t)st.st_size;
	uint64_t whole = frames_len(k->fd, k->len);
	if (whole < k->len)
		log_warn("staged pack '%s': bytes %llu..%llu are not whole "
			 "frames (writes that failed or a crash cut short, or "
			 "an earlier pack's bytes in a reused file; never "
			 "committed)",
			 path, (unsigned long long)whole,
			 (unsigned long long)k->len);
	k->state = PK_SEALED;
	fsutil_cond_init_mono(&k->done);
	stage_link(p, k);
	p->nsealed++;
	STAT_ADD(p, recovered, 1);
}

/* A staged block of a big file (fs/data/stage.h): "<id>_<idx>_<len>.blk";
 * end points past the id. */
static int is_block(const char *end)
{
	size_t n = strlen(end);
	return *end == '_' && n > 4 && !strcmp(end + n - 4, ".blk");
}

/* Move a dead slot's staged block into ours: fs/data/stage.c, opened on our
 * slot after the packer, uploads it. */
static void take_block(struct packer *p, const char *from, const char *name)
{
	char to[PATH_MAX + 400];

	snprintf(to, sizeof(to), "%s/%s", p->dir, name);
	if (rename(from, to))
		log_err("cannot take over staged block '%s': %s", from,
			strerror(errno));
}

/* Take over the packs of every slot no live mount holds (ours too: a
 * previous mount of ours that was killed). */
static void slot_recover(struct packer *p)
{
	char root[PATH_MAX], path[PATH_MAX + 64];
	char *slash = strrchr(p->dir, '/');

	snprintf(root, sizeof(root), "%.*s", (int)(slash - p->dir), p->dir);
	for (int n = 0; n < STAGE_SLOTS; n++) {
		snprintf(path, sizeof(path), "%s/%d", root, n);
		int mine = !strcmp(path, p->dir), fd = -1;
		if (!mine) {
			char lk[PATH_MAX + 128];
			snprintf(lk, sizeof(lk), "%s/lock", path);
			fd = open(lk, O_RDWR | O_CLOEXEC);
			if (fd < 0)
				continue;
			if (flock(fd, LOCK_EX | LOCK_NB)) {
				close(fd);
				continue; /* a live mount's */
			}
		}
		DIR *d = opendir(path);
		if (d) {
			struct dirent *e;
			while ((e = readdir(d))) {
				char *end;
				uint64_t id = strtoull(e->d_name, &end, 10);
				char from[PATH_MAX + 400];
				snprintf(from, sizeof(from), "%s/%s", path,
					 e->d_name);
				if (id && !strcmp(end, ".pack"))
					adopt(p, from, id);
				else if (!strncmp(e->d_name, "spare", 5))
					unlink(from); /* see spare_keep */
				else if (id && !mine && is_block(end))
					take_block(p, from, e->d_name);
			}
			closedir(d);
		}
		if (fd >= 0)
			close(fd);
	}
	if (p->nsealed)
		log_info("found %d staged packs of an earlier mount: uploading "
			 "them",
			 p->nsealed);
}

/* A new open pack with its staging file, its total recorded as still
 * filling (its frames are committed before it is sealed). Under lock. */
static int stage_new(struct packer *p, struct pack **out)
{
	char path[PATH_MAX];
	struct pack *k;
	int err = pack_new(p, &k);

	if (err)
		return err;
	err = p->cbs.total(p->cbs.arg, k->id, META_PACK_OPEN, NULL);
	if (!err && p->cbs.staged)
		err = p->cbs.staged(p->cbs.arg, k->id, 0);
	if (err) {
		log_err("cannot record a new pack in the metadata");
		goto free_k;
	}
	stage_path(p, k->id, path, sizeof(path));
	k->fd = spare_take(p, path);
	if (k->fd < 0)
		k->fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (k->fd < 0) {
		err = errno;
		log_err("cannot create staged pack '%s': %s", path,
			strerror(err));
		goto free_k;
	}
	stage_link(p, k);
	*out = k;
	return 0;

free_k:
	pack_free(k);
	return err;
}

/* Unlink k from the staged list, under lock. */
static void unstage(struct packer *p, struct pack *k)
{
	TAILQ_REMOVE(&p->staged, k, link);
	p->nsealed--;
	pthread_cond_broadcast(&p->room);
}

/*
 * Put the staged file of k under key. Its pages were just written, so
 * they are in the page cache: mapping them spares a copy into a fresh
 * 4 MiB buffer (and that buffer's page faults) per pack, a good part of
 * the client's CPU in an ingest. A file shorter than the room reserved in
 * it ends with frames that failed to be written (a full disk) and were
 * never committed (every committed frame was fsync'd whole before its
 * commit): mapped, those bytes would fault, so it is read into zeros.
 */
static int put_file(struct packer *p, struct pack *k, const char *key)
{
	struct stat st;
	void *buf;
	int err;

	if (fstat(k->fd, &st) == 0 && (uint64_t)st.st_size >= k->len) {
		buf = mmap(NULL, k->len, PROT_READ, MAP_SHARED | MAP_POPULATE,
			   k->fd, 0);
		if (buf != MAP_FAILED) {
			err = objstore_put(p->store, key, buf, k->len);
			munmap(buf, k->len);
			return err;
		}
	}
	buf = calloc(1, k->len);
	if (!buf)
		return ENOMEM;
	err = pread(k->fd, buf, k->len, 0) < 0 ? errno : 0;
	if (err)
		log_err("cannot read staged pack %" PRIu64 ": %s", k->id,
			strerror(err));
	else
		err = objstore_put(p->store, key, buf, k->len);
	free(buf);
	return err;
}

/* Record and put one sealed pack; 0 when it is in the store (or all
 * dead). Called without the lock. */
static int upload(struct packer *p, struct pack *k)
{
	char key[KEY_CAP];
	int dead = 0, err;

	chunkstore_pack_key(k->id, key, sizeof(key));
	/* The total first: a pack whose frames all died meanwhile (files
	 * deleted right after they were written) needs no upload. */
	err = p->cbs.total(p->cbs.arg, k->id, k->len, &dead);
	if (err) {
		log_err("cannot record pack '%s' in the metadata", key);
		return EIO;
	}
	if (!dead && k->len)
		err = put_file(p, k, key);
	if (err) {
		log_err("cannot upload pack '%s' (%zu bytes): %s (kept staged, "
			"will retry)",
			key, k->len, gr_strerror(err));
		return EIO;
	}
	/* in the store (or never to be): reclamation may delete it now */
	if (p->cbs.staged && p->cbs.staged(p->cbs.arg, k->id, 1)) {
		log_err("cannot record pack '%s' as uploaded (will retry)",
			key);
		return EIO;
	}
	return 0;
}

/* Under lock: is a pack other than k ready to be put now, its upload job
 * queued? */
static int other_due(const struct packer *p, const struct pack *k, int64_t now)
{
	const struct pack *x;
	TAILQ_FOREACH(x, &p->staged, link)
		if (x != k && x->state == PK_SEALED && !x->writing &&
		    !x->uploading && x->retry_ms <= now)
			return 1;
	return 0;
}

/*
 * A job of the upload queue: put one sealed pack. A pack whose put failed
 * goes back to the tail of the queue, so other packs go first; a worker
 * that reaches it before its retry time waits for that time unless
 * another pack is due, when it queues it again and serves that one. Once
 * packer_close began, the queue refuses pushes: the pack is retried here,
 * CLOSE_TRIES times at most.
 */
static void upload_run(struct workq_job *job)
{
	struct pack *k = (struct pack *)job;
	struct packer *p = k->owner;

	pthread_mutex_lock(&p->lock);
	k->uploading = 1;
	for (;;) {
		int64_t now = fsutil_mono_ms();
		if (k->retry_ms > now) {
			if (!p->stop && other_due(p, k, now))
				goto requeue;
			fsutil_wait_until_ms(&p->work, &p->lock, k->retry_ms);
			continue;
		}
		pthread_mutex_unlock(&p->lock);

		int err = upload(p, k);

		pthread_mutex_lock(&p->lock);
		if (!err)
			break;
		STAT_ADD(p, errors, 1);
		p->sync_err = err;
		k->retry_ms = fsutil_retry_at_ms(++k->tries);
		pthread_cond_broadcast(&p->room);
		if (p->stop && k->tries >= CLOSE_TRIES) {
			/* left on disk for the next mount */
			log_err("leaving pack %" PRIu64 " staged in '%s' for "
				"the next mount",
				k->id, p->dir);
			k->uploading = 0;
			k->state = PK_DONE;
			p->nsealed--;
			pthread_mutex_unlock(&p->lock);
			return;
		}
		if (p->stop)
			continue;
	requeue:
		k->uploading = 0;
		pthread_mutex_unlock(&p->lock);
		if (workq_push(p->uploads, &k->job) == 0)
			return; /* k is the queue's again */
		/* packer_close began meanwhile: retry it here */
		pthread_mutex_lock(&p->lock);
		k->uploading = 1;
	}
	/* still marked uploading: no other worker counts it due while its
	 * readers finish */
	while (k->readers)
		pthread_cond_wait(&k->done, &p->lock);
	unstage(p, k);
	STAT_ADD(p, packs, 1);
	STAT_ADD(p, bytes, k->len);
	pthread_mutex_unlock(&p->lock);
	char path[PATH_MAX];
	stage_path(p, k->id, path, sizeof(path));
	if (!spare_keep(p, k, path) && unlink(path))
		log_warn("cannot remove staged pack '%s': %s", path,
			 strerror(errno));
	pack_free(k);
}

/*
 * The window job: seal the open pack once its window is over. It waits on
 * a worker, so that no thread of its own sleeps for the window; when an
 * upload becomes due meanwhile it queues itself again behind it, so that a
 * single uploader is not held by the window. Armed when a pack opens;
 * ends when there is no open pack (the next one arms it again).
 */
static void window_run(struct workq_job *job)
{
	struct packer *p =
	    (struct packer *)((char *)job - offsetof(struct packer, window));

	pthread_mutex_lock(&p->lock);
	for (;;) {
		struct pack *k = p->open;
		if (!k || p->stop)
			break; /* stop_uploaders seals the open pack */
		int64_t now = fsutil_mono_ms();
		if (k->len && now >= k->deadline_ms) {
			seal(p);
			break;
		}
		if (other_due(p, NULL, now)) {
			pthread_mutex_unlock(&p->lock);
			if (workq_push(p->uploads, job) == 0)
				return; /* still queued */
			pthread_mutex_lock(&p->lock);
			break; /* closing */
		}
		fsutil_wait_until_ms(&p->work, &p->lock,
				     k->len ? k->deadline_ms : now + 1000);
	}
	p->window_queued = 0;
	pthread_mutex_unlock(&p->lock);
}

/* Seal the open pack and let the uploaders drain everything staged. */
static void stop_uploaders(struct packer *p)
{
	if (!p->uploads)
		return;
	pthread_mutex_lock(&p->lock);
	p->stop = 1;
	if (p->open && p->open->len)
		seal(p);
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->lock);
	workq_close(p->uploads);
	p->uploads = NULL;
}

int packer_staged_get(struct packer *p, uint64_t pack, uint32_t off,
		      uint32_t len, void **data)
{
	struct pack *k;
	int err = 0;

	*data = NULL;
	if (!p || !p->dir)
		return ENOENT;
	pthread_mutex_lock(&p->lock);
	TAILQ_FOREACH(k, &p->staged, link)
		if (k->id == pack)
			break;
	if (k)
		k->readers++;
	pthread_mutex_unlock(&p->lock);
	if (!k)
		return ENOENT;
	char *buf = malloc(len ? len : 1);
	if (!buf)
		err = ENOMEM;
	else if (pread(k->fd, buf, len, off) != (ssize_t)len)
		err = EIO; /* a committed frame is whole in the file */
	pthread_mutex_lock(&p->lock);
	if (--k->readers == 0)
		pthread_cond_broadcast(&k->done);
	pthread_mutex_unlock(&p->lock);
	if (err) {
		free(buf);
		return err;
	}
	*data = buf;
	return 0;
}

int packer_sync(struct packer *p)
{
	struct pack *k;
	int err;

	if (!p || !p->dir)
		return 0;
	pthread_mutex_lock(&p->lock);
	p->sync_err = 0;
	if (p->open && p->open->len && !p->open->writing)
		seal(p);
	/* everything staged now is older than any pack created later */
	struct pack *last = TAILQ_LAST(&p->staged, packq);
	uint64_t upto = last ? last->id : 0;
	for (;;) {
		int pending = 0;
		TAILQ_FOREACH(k, &p->staged, link)
			if (k->id <= upto && k->state != PK_DONE)
				pending = 1;
		if (!pending || p->sync_err)
			break;
		if (p->open && p->open->id <= upto && p->open->len &&
		    !p->open->writing)
			seal(p);
		fsutil_wait_until_ms(&p->room, &p->lock,
				     fsutil_mono_ms() + 100);
	}
	err = p->sync_err;
	pthread_mutex_unlock(&p->lock);
	return err;
}

/* ---- batches (under p->lock) ---- */

/* A member of batch b came: the open pack's waiters look again when it
 * was the last one. */
static void batch_come(struct packer *p, const struct packer_batch *b)
{
	if (packbatch_come(&p->batches, b->id, b->n, fsutil_mono_ms()) &&
	    p->open && p->open->batch == b->id)
		pthread_cond_broadcast(&p->open->done);
}

/* A frame of batch b went into k: k waits for the others (a while). */
static void batch_join(struct pack *k, const struct packer_batch *b)
{
	if (k->batch)
		return;
	k->batch = b->id;
	if (k->deadline_ms < k->opened_ms + BATCH_WAIT_MS)
		k->deadline_ms = k->opened_ms + BATCH_WAIT_MS;
}

/* ---- public ---- */

void packer_hold(struct packer *p, int delta)
{
	pthread_mutex_lock(&p->lock);
	p->holders += delta;
	gr_assert(p->holders >= 0);
	/* the waiters may be all that is left to come */
	if (delta < 0 && p->open)
		pthread_cond_broadcast(&p->open->done);
	if (delta < 0)
		pthread_cond_broadcast(&p->gather);
	pthread_mutex_unlock(&p->lock);
}

/* One encoded frame: enc[0..len) (default mode, or an LZ4 frame in a
 * scratch buffer of scap bytes), or in writeback the v2 prefix followed by
 * the caller's raw bytes, written with one pwritev (no copy of them). */
struct frame {
	void *enc;
	size_t len; /* the whole frame */
	size_t scap;
	void *prefix;
	size_t plen;
	const void *raw;
};

/* An LZ4 output buffer of at least n bytes, kept from an earlier frame
 * when one is big enough; *cap is its size. */
static void *scratch_get(struct packer *p, size_t n, size_t *cap)
{
	pthread_mutex_lock(&p->lock);
	for (int i = p->nscratch - 1; i >= 0; i--) {
		if (p->scratch_cap[i] < n)
			continue;
		void *b = p->scratch[i];
		*cap = p->scratch_cap[i];
		p->nscratch--;
		p->scratch[i] = p->scratch[p->nscratch];
		p->scratch_cap[i] = p->scratch_cap[p->nscratch];
		pthread_mutex_unlock(&p->lock);
		return b;
	}
	pthread_mutex_unlock(&p->lock);
	*cap = n;
	return malloc(n);
}

static void scratch_put(struct packer *p, void *b, size_t cap)
{
	if (!b)
		return;
	pthread_mutex_lock(&p->lock);
	if (cap <= SCRATCH_MAX && p->nscratch < SCRATCH_KEEP) {
		p->scratch[p->nscratch] = b;
		p->scratch_cap[p->nscratch++] = cap;
		b = NULL;
	}
	pthread_mutex_unlock(&p->lock);
	free(b);
}

/* Writeback: encode item into fr without copying raw bytes that are
 * stored raw. */
static int encode_gather(struct packer *p, const struct packer_item *it,
			 struct frame *fr)
{
	size_t lz_len = 0;
	int err;

	fr->plen = codec_prefix_len(it->len);
	fr->prefix = malloc(fr->plen);
	if (!fr->prefix)
		return ENOMEM;
	if (p->o.compress == CODEC_LZ4) {
		fr->enc = scratch_get(p, codec_bound(it->len), &fr->scap);
		if (!fr->enc)
			return ENOMEM;
	}
	err = codec_encode_gather(it->raw, it->len, p->o.compress, fr->enc,
				  &lz_len, fr->prefix);
	if (err)
		return err;
	if (lz_len) {
		fr->len = lz_len;
		free(fr->prefix);
		fr->prefix = NULL;
	} else {
		scratch_put(p, fr->enc, fr->scap);
		fr->enc = NULL;
		fr->raw = it->raw;
		fr->len = fr->plen + it->len;
	}
	return 0;
}

/* Write frame fr at off of fd, whole; 0 or errno. */
static int frame_write(int fd, const struct frame *fr, uint64_t off)
{
	struct iovec v[2];
	int nv = 0;
	size_t done = 0;

	if (fr->prefix) {
		v[nv++] = (struct iovec){fr->prefix, fr->plen};
		v[nv++] = (struct iovec){(void *)fr->raw, fr->len - fr->plen};
	} else {
		v[nv++] = (struct iovec){fr->enc, fr->len};
	}
	while (done < fr->len) {
		ssize_t w = pwritev(fd, v, nv, (off_t)(off + done));
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return errno;
		}
		if (w == 0)
			return EIO;
		done += (size_t)w;
		/* a short write: skip what went out */
		for (size_t left = (size_t)w; left;) {
			size_t k = left < v[0].iov_len ? left : v[0].iov_len;
			v[0].iov_base = (char *)v[0].iov_base + k;
			v[0].iov_len -= k;
			left -= k;
			if (!v[0].iov_len && nv > 1) {
				v[0] = v[1];
				nv = 1;
			}
		}
	}
	return 0;
}

/* fsync the directory at path. */
static int dir_sync(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC), err;

	if (fd < 0)
		return errno;
	err = fsync(fd) ? errno : 0;
	close(fd);
	return err;
}

/*
 * Make what this caller wrote into k durable: writers that arrive while an
 * fdatasync runs wait for it, and one of them runs the next for them all
 * (ext4 makes each fdatasync a journal commit: one per file would halve
 * the ingest rate). Before it starts one, a caller waits a little (at most
 * about one fdatasync's time, GATHER_MAX_NS) while frames are still being
 * copied into k, or while writers holding small data (packer_hold) have
 * not reached here yet: files closed at about the same time then share
 * one fdatasync. Every caller returns only after an fdatasync that
 * started once its frames were written.
 */
static int group_sync(struct packer *p, struct pack *k)
{
	int err = 0;

	pthread_mutex_lock(&p->lock);
	uint64_t mine = ++k->wseq;
	p->parked++;
	pthread_cond_broadcast(&p->gather);
	while (k->synced < mine) {
		if (k->syncing) {
			pthread_cond_wait(&k->done, &p->lock);
			continue;
		}
		int64_t wait =
		    p->sync_ns < GATHER_MAX_NS ? p->sync_ns : GATHER_MAX_NS;
		int64_t until = fsutil_mono_ns() + wait;
		while (!k->syncing && k->synced < mine &&
		       (k->copying || p->holders > p->parked) &&
		       fsutil_mono_ns() < until) {
			struct timespec ts = {.tv_sec = until / 1000000000,
					      .tv_nsec = until % 1000000000};
			pthread_cond_timedwait(&p->gather, &p->lock, &ts);
		}
		if (k->syncing || k->synced >= mine)
			continue; /* another caller started it meanwhile */
		uint64_t upto = k->wseq;
		k->syncing = 1;
		pthread_mutex_unlock(&p->lock);
		int64_t t0 = fsutil_mono_ns();
		int e = fdatasync(k->fd) ? errno : 0;
		int64_t took = fsutil_mono_ns() - t0;
		/* a new file's name is durable only once its directory is
		 * (a crash could lose the file with its committed frames) */
		if (!e && !k->named)
			e = dir_sync(p->dir);
		pthread_mutex_lock(&p->lock);
		p->sync_ns += (took - p->sync_ns) / 8;
		k->syncing = 0;
		k->named |= !e;
		if (e) {
			/* after a failed fdatasync the page cache cannot be
			 * trusted: this write and every later one into the
			 * pack fail (nothing of them gets committed); new
			 * frames go to a new pack. What was synced before
			 * stays and is uploaded with the pack. */
			k->sync_err = e;
			err = e;
			if (p->open == k)
				seal(p);
		}
		k->synced = upto;
		pthread_cond_broadcast(&k->done);
	}
	if (!err && k->sync_err)
		err = k->sync_err;
	p->parked--;
	pthread_mutex_unlock(&p->lock);
	return err;
}

/* Writeback: reserve room for each frame in open packs, write and fsync
 * them there. The metadata commit that follows makes them visible. */
static int put_staged(struct packer *p, struct packer_item *items,
		      struct frame *fr, size_t n, struct pack **mine)
{
	size_t nmine = 0;
	int err = 0;

	pthread_mutex_lock(&p->lock);
	for (size_t i = 0; i < n && !err; i++) {
		struct pack *k;
		for (;;) {
			k = p->open;
			if (k && k->len &&
			    k->len + fr[i].len > p->o.pack_size) {
				seal(p);
				k = NULL;
			}
			if (k || p->nsealed < p->o.max_staged || p->stop)
				break;
			/* uploads lag; another writer may open the next pack
			 * meanwhile: look again (replacing it would leave it
			 * open, never sealed nor uploaded) */
			pthread_cond_wait(&p->room, &p->lock);
		}
		if (!k) {
			err = stage_new(p, &k);
			if (err)
				break;
			p->open = k;
			window_arm(p);
		}
		items[i].at = (struct chunkstore_frame){
		    .pack = k->id,
		    .off = (uint32_t)k->len,
		    .len = (uint32_t)fr[i].len,
		};
		k->len += fr[i].len;
		k->frames++;
		if (!nmine || mine[nmine - 1] != k) {
			mine[nmine++] = k;
			k->writing++;
			k->copying++;
		}
	}
	pthread_mutex_unlock(&p->lock);

	/* Write outside the lock; the reserved ranges do not overlap. */
	size_t j = 0;
	for (size_t i = 0; i < n && j < nmine; i++) {
		while (j < nmine && mine[j]->id != items[i].at.pack)
			j++;
		if (j == nmine || !items[i].at.pack)
			break;
		int e = frame_write(mine[j]->fd, &fr[i], items[i].at.off);
		if (e && !err)
			err = e;
	}
	pthread_mutex_lock(&p->lock);
	for (j = 0; j < nmine; j++)
		if (--mine[j]->copying == 0)
			pthread_cond_broadcast(&p->gather);
	pthread_mutex_unlock(&p->lock);
	for (j = 0; j < nmine && !err; j++)
		err = group_sync(p, mine[j]);
	if (err)
		log_err("cannot stage a pack in '%s': %s", p->dir,
			strerror(err));

	pthread_mutex_lock(&p->lock);
	for (j = 0; j < nmine; j++)
		if (--mine[j]->writing == 0 && mine[j]->state == PK_SEALED) {
			pack_ready(p, mine[j]);
			pthread_cond_broadcast(&p->work);
		}
	pthread_mutex_unlock(&p->lock);
	/* A frame that failed to be written is never committed: the
	 * pack's upload carries its bytes as dead weight for gc. */
	return err == ENOSPC || err == EDQUOT || err == ENOMEM ? err
	       : err					       ? EIO
							       : 0;
}

int packer_put(struct packer *p, struct packer_item *items, size_t n)
{
	return packer_put_batch(p, items, n, NULL);
}

int packer_put_batch(struct packer *p, struct packer_item *items, size_t n,
		     const struct packer_batch *batch)
{
	struct frame *fr;
	struct pack **mine; /* packs this call has frames in, each once */
	struct pack **full; /* sealed here: this call puts them */
	size_t nmine = 0, nfull = 0;
	int err = 0;

	if (!p || (!items && n))
		return EINVAL;
	/* writeback: group commit gathers the frames of a batch anyway */
	if (batch && (!batch->id || batch->n < 2 || p->dir))
		batch = NULL;
	if (n == 0) {
		if (batch) { /* a member with nothing to pack came too */
			pthread_mutex_lock(&p->lock);
			batch_come(p, batch);
			pthread_mutex_unlock(&p->lock);
		}
		return 0;
	}
	fr = calloc(n, sizeof(*fr));
	mine = calloc(n, sizeof(*mine));
	full = calloc(n + 1, sizeof(*full)); /* an item may seal two */
	if (!fr || !mine || !full) {
		err = ENOMEM;
		goto free_arrays;
	}
	/* Encoding is the CPU work: done before taking the lock. */
	for (size_t i = 0; i < n; i++) {
		items[i].at = (struct chunkstore_frame){0};
		if (p->dir) {
			err = encode_gather(p, &items[i], &fr[i]);
			if (err == EINVAL) {
				log_err("cannot encode a slice for a pack: %s",
					gr_strerror(err));
				err = EIO;
			}
			if (err)
				goto free_frames;
			continue;
		}
		fr[i].enc = malloc(codec_bound(items[i].len));
		if (!fr[i].enc) {
			err = ENOMEM;
			goto free_frames;
		}
		err = codec_encode(items[i].raw, items[i].len, p->o.compress,
				   fr[i].enc, &fr[i].len);
		if (err) {
			log_err("cannot encode a slice for a pack: %s",
				gr_strerror(err));
			err = EIO;
			goto free_frames;
		}
	}
	if (p->dir) {
		err = put_staged(p, items, fr, n, mine);
		goto free_frames;
	}

	pthread_mutex_lock(&p->lock);
	if (batch)
		batch_come(p, batch);
	for (size_t i = 0; i < n && !err; i++) {
		struct pack *k = p->open;
		if (k && k->len && k->len + fr[i].len > p->o.pack_size) {
			full[nfull++] = seal(p);
			k = NULL;
		}
		if (!k) {
			err = pack_new(p, &k);
			if (err)
				break;
			p->open = k;
		}
		err = append(k, fr[i].enc, fr[i].len);
		if (err)
			break; /* bytes of earlier frames stay: they are used */
		if (batch)
			batch_join(k, batch);
		items[i].at = (struct chunkstore_frame){
		    .pack = k->id,
		    .off = (uint32_t)(k->len - fr[i].len),
		    .len = (uint32_t)fr[i].len,
		};
		k->frames++;
		if (!nmine || mine[nmine - 1] != k) {
			mine[nmine++] = k;
			k->users++;
		}
		if (k->len >= p->o.pack_size)
			full[nfull++] = seal(p);
	}
	pthread_mutex_unlock(&p->lock);

	for (size_t i = 0; i < nfull; i++)
		put_pack(p, full[i]);

	pthread_mutex_lock(&p->lock);
	for (size_t j = 0; j < nmine; j++) {
		struct pack *k = mine[j];
		while (k->state != PK_DONE) {
			/* Seal when the window is over, or when every writer
			 * that may still add a frame has added its own, or
			 * every member of the batch it waits for. */
			if (k->state == PK_OPEN &&
			    (k->users >= p->holders ||
			     (k->batch &&
			      packbatch_whole(&p->batches, k->batch)) ||
			     fsutil_mono_ms() >= k->deadline_ms)) {
				seal(p);
				pthread_mutex_unlock(&p->lock);
				put_pack(p, k);
				pthread_mutex_lock(&p->lock);
				continue;
			}
			if (k->state == PK_OPEN)
				fsutil_wait_until_ms(&k->done, &p->lock,
						     k->deadline_ms);
			else
				pthread_cond_wait(&k->done, &p->lock);
		}
		if (k->err && !err)
			err = k->err;
		pack_leave(k);
	}
	pthread_mutex_unlock(&p->lock);

free_frames:
	for (size_t i = 0; i < n; i++) {
		if (fr[i].scap)
			scratch_put(p, fr[i].enc, fr[i].scap);
		else
			free(fr[i].enc);
		free(fr[i].prefix);
	}
free_arrays:
	free(full);
	free(mine);
	free(fr);
	return err;
}
