/*
 * diskcache.c - the local disk cache: an object store decorator that keeps
 * whole objects as files under DIR/<ns>/<key> (the directory picked by
 * XXH3(key) mod the number of directories), with an in-memory index (hash
 * table + LRU list) rebuilt from the directories at open. Files are written
 * to a temp name and renamed, never fsync'd: a torn entry fails the chunk
 * store's checksum and is evicted.
 */
#include "fs/store/diskcache_int.h"
#include "lib/bigbuf.h"
#include "lib/fsutil.h"
#include "lib/hash.h"
#include "lib/log.h"
#include "lib/workq.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

static const struct objstore_ops dc_ops;

/* ---- small helpers ---- */

/* A key whose component looks like our temp files cannot be cached: the
 * scan would take its file for a leftover. */
static int key_cacheable(const char *key)
{
	for (const char *c = key; c; c = strchr(c, '/')) {
		if (*c == '/')
			c++;
		if (!strncmp(c, TMP_PREFIX, TMP_PREFIX_LEN))
			return 0;
	}
	return 1;
}

/* ---- entry files ---- */

static int make_parents(int root, const char *key)
{
	char path[KEY_MAX + 1];
	size_t len = strlen(key);

	if (len >= sizeof(path))
		return ENAMETOOLONG;
	memcpy(path, key, len + 1);
	for (char *slash = strchr(path, '/'); slash;
	     slash = strchr(slash + 1, '/')) {
		*slash = '\0';
		if (mkdirat(root, path, 0700) && errno != EEXIST)
			return errno;
		*slash = '/';
	}
	return 0;
}

/* Write key's file through a temp file in its directory; *renamed says
 * whether the final name now exists (to be removed on a roll back). */
static int write_entry(struct dc_dir *d, const char *key, const void *data,
		       size_t len, int *renamed)
{
	static uint64_t tmp_seq; /* atomic */
	const char *slash = strrchr(key, '/');
	size_t plen = slash ? (size_t)(slash - key) + 1 : 0;
	char tmp[KEY_MAX + 64];
	int fd = -1, err = 0;

	*renamed = 0;
	memcpy(tmp, key, plen);
	for (int tries = 0; tries < 4 && fd < 0; tries++) {
		uint64_t seq =
		    __atomic_add_fetch(&tmp_seq, 1, __ATOMIC_RELAXED);
		snprintf(tmp + plen, sizeof(tmp) - plen,
			 TMP_PREFIX "%x.%" PRIx64, (unsigned)getpid(), seq);
		fd = openat(d->fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
			    0600);
		if (fd >= 0)
			break;
		err = errno;
		if (err == ENOENT && slash) {
			if ((err = make_parents(d->fd, key)))
				return err;
		} else if (err != EEXIST) {
			return err;
		}
	}
	if (fd < 0)
		return err;
	/* a fill costs no copy into the page cache and evicts nothing there;
	 * the entry is read back through a mapping, from disk, like any other
	 */
	err = fsutil_write_direct(fd, data, len);
	if (close(fd) && !err)
		err = errno;
	if (!err && renameat(d->fd, tmp, d->fd, key))
		err = errno;
	if (err)
		unlinkat(d->fd, tmp, 0);
	else
		*renamed = 1;
	return err;
}

#define DC_ESIZE (-1) /* internal: the file is not of the indexed size */

/* Read [off, off+len) (len 0: to the end) of an entry of `size` bytes. A
 * file that is gone or not of the indexed size is an error: the caller
 * drops the entry and asks the backend. */
static int read_entry(struct dc_dir *d, const char *key, uint64_t size,
		      uint64_t off, size_t len, void **data, size_t *got)
{
	struct stat st;
	int fd, err = 0;

	fd = openat(d->fd, key, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return errno;
	if (fstat(fd, &st)) {
		err = errno;
		goto close_fd;
	}
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != size) {
		err = DC_ESIZE;
		goto close_fd;
	}
	size_t n = 0;
	if (off < size) {
		n = (size_t)(size - off);
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
		if (r <= 0) {
			err = r < 0 ? errno : DC_ESIZE; /* truncated */
			free(buf);
			goto close_fd;
		}
		done += (size_t)r;
	}
	*data = buf;
	*got = done;
close_fd:
	close(fd);
	return err;
}

/* ---- fill ---- */

static struct dc_flight *flight_take(struct diskcache *dc, const char *key);
static void flight_land(struct diskcache *dc, struct dc_flight *f, int err,
			const void *data, size_t n);
static void flight_end(struct diskcache *dc, struct dc_flight *f);
static int flight_join(struct diskcache *dc, const char *key, uint64_t off,
		       size_t len, void **data, size_t *got, int *err);

/* Hash a FILLING placeholder for key unless the key is already there (then
 * someone else fills it, or it is cached or being dropped). NULL: do not
 * fill. flight: also take a flight slot for the whole fetch to come (*flight
 * NULL if none is free), in the same hold of the lock, so that a ranged get
 * that finds the placeholder finds the flight too. */
static struct dc_entry *placeholder(struct diskcache *dc, const char *key,
				    struct dc_flight **flight)
{
	uint64_t h = dc_key_hash(key);
	size_t klen = strlen(key);
	struct dc_entry *e = NULL;

	if (!key_cacheable(key)) {
		STAT_ADD(dc, fill_skips, 1);
		return NULL;
	}
	pthread_mutex_lock(&dc->lock);
	if (!dc_find(dc, h, key) && (e = dc_entry_new(key, klen))) {
		e->dir = (uint16_t)(h % dc->ndirs);
		e->state = DC_FILLING;
		hash_insert(&dc->index, &e->hn, h);
		if (flight)
			*flight = flight_take(dc, key);
	}
	pthread_mutex_unlock(&dc->lock);
	return e;
}

/* Forget a placeholder that never got a file. */
static void unplace(struct diskcache *dc, struct dc_entry *ph)
{
	pthread_mutex_lock(&dc->lock);
	hash_remove(&dc->index, &ph->hn);
	pthread_mutex_unlock(&dc->lock);
	free(ph);
}

/*
 * Store data as ph's entry if admission allows: reserve (evicting LRU
 * entries older than min_age as needed), write outside the lock, commit.
 * Any failure only means the object is not cached.
 */
static void fill(struct diskcache *dc, struct dc_entry *ph, const void *data,
		 size_t len)
{
	struct dc_dir *d = &dc->dirs[ph->dir];
	struct dc_space *sp = d->sp;
	int verdict = SKIP, stale = 0, renamed, err, pause = 0, low = 0;
	double pct = 0;

	for (int round = 0; round < ADMIT_ROUNDS; round++) {
		struct dc_list victims = TAILQ_HEAD_INITIALIZER(victims);
		dc_refresh_space(dc, sp);
		pthread_mutex_lock(&dc->lock);
		stale = ph->stale;
		verdict =
		    dc_admit(dc, ph, len, round < ADMIT_ROUNDS - 1, &victims);
		/* refused for want of room on the disk: say so now and then,
		 * a cache that silently takes nothing looks like a slow one */
		if (verdict == SKIP && !stale && dc_space_low(dc, sp) &&
		    mono_ms() >= dc->lowspace_log_ms) {
			dc->lowspace_log_ms = mono_ms() + LOWSPACE_LOG_MS;
			low = 1;
			pct = dc_free_pct(sp);
		}
		pthread_mutex_unlock(&dc->lock);
		dc_reap(dc, &victims);
		if (verdict != EVICT)
			break;
	}
	if (verdict != ADMIT) {
		if (!stale) /* a stale fill is not refused, just moot */
			STAT_ADD(dc, fill_skips, 1);
		if (low)
			log_warn("disk cache '%s': %.1f%% of its disk is free, "
				 "less than --free-space-ratio keeps (%.0f%%), "
				 "and no entry can be evicted: not caching",
				 d->path, pct, dc->o.free_ratio * 100);
		unplace(dc, ph);
		return;
	}

	err = write_entry(d, ph->key, data, len, &renamed);

	uint64_t rlen = round_up(len, sp->frsize);
	pthread_mutex_lock(&dc->lock);
	dc->reserved -= len;
	sp->inflight -= rlen;
	if (!err && !ph->stale) {
		ph->state = DC_READY;
		ph->last_use = now_s();
		if (ph->demoted) /* meanwhile: diskcache_rank.c */
			TAILQ_INSERT_TAIL(&dc->lru, ph, link);
		else
			TAILQ_INSERT_HEAD(&dc->lru, ph, link);
		dc->st.entries++;
		dc->st.bytes += len;
		pthread_mutex_unlock(&dc->lock);
		STAT_ADD(dc, fills, 1);
		return;
	}
	if (err == ENOSPC || err == EDQUOT) {
		int64_t now = mono_ms();
		pause = now >= dc->nofill_until_ms; /* log once per pause */
		dc->nofill_until_ms = now + ENOSPC_PAUSE_MS;
		__atomic_store_n(&sp->stat_ms, 0, __ATOMIC_RELAXED);
	}
	if (sp->total)
		sp->avail += (int64_t)rlen;
	if (renamed) {
		/* stale: the key was deleted or replaced while we wrote */
		ph->state = DC_DROPPING;
		dc->dropping += len;
		struct dc_list one = TAILQ_HEAD_INITIALIZER(one);
		TAILQ_INSERT_HEAD(&one, ph, link);
		pthread_mutex_unlock(&dc->lock);
		dc_reap(dc, &one);
	} else {
		hash_remove(&dc->index, &ph->hn);
		pthread_mutex_unlock(&dc->lock);
	}
	if (err) {
		STAT_ADD(dc, fill_skips, 1);
		if (pause)
			log_warn("disk cache '%s' is full: not caching for "
				 "%d s",
				 d->path, ENOSPC_PAUSE_MS / 1000);
		else if (err != ENOSPC && err != EDQUOT)
			log_debug("cannot cache '%s' in '%s': %s", ph->key,
				  d->path, strerror(err));
	}
	if (!renamed)
		free(ph);
}

/*
 * Drop key's entry: a cached one is retired and its file removed, one being
 * filled is marked stale so its filler rolls back. only_if: drop only that
 * very entry (a read of it just failed). Returns 1 if an entry was dropped.
 */
static int drop(struct diskcache *dc, const char *key,
		const struct dc_entry *only_if)
{
	pthread_mutex_lock(&dc->lock);
	struct dc_entry *e = dc_find(dc, dc_key_hash(key), key);
	if (!e || (only_if && e != only_if) || e->state == DC_DROPPING) {
		pthread_mutex_unlock(&dc->lock);
		return 0;
	}
	if (e->state == DC_FILLING) {
		e->stale = 1;
		pthread_mutex_unlock(&dc->lock);
		return 0;
	}
	dc_retire(dc, e);
	struct dc_list one = TAILQ_HEAD_INITIALIZER(one);
	TAILQ_INSERT_HEAD(&one, e, link);
	pthread_mutex_unlock(&dc->lock);
	dc_reap(dc, &one);
	return 1;
}

/* ---- ops ---- */

static int get_whole(struct diskcache *dc, const char *key, uint64_t off,
		     size_t len, void **data, size_t *got, int *err);

/* How a hit is served: read_entry() or map_entry() with their arguments;
 * *n the bytes served. */
struct hit_req {
	uint64_t off;
	size_t len;
	void **data;
	size_t *got;
	struct objstore_view *v; /* non-NULL: map instead */
};

static int map_entry(struct dc_dir *d, const char *key, uint64_t size,
		     struct objstore_view *v);

/* The last view of e's file is gone: e may be evicted again, or freed if
 * it was retired meanwhile. */
static void dc_view_unpin(struct objstore *s, void *pin)
{
	struct diskcache *dc = dc_of(s);
	struct dc_entry *e = pin;

	pthread_mutex_lock(&dc->lock);
	gr_assert(e->pins > 0);
	if (--e->pins == 0 && e->orphan) {
		dc->dropping -= e->size;
		free(e);
	}
	pthread_mutex_unlock(&dc->lock);
}

/* Serve key from its entry if cached: 1 with *err set when it answered, 0
 * on a miss (an entry that cannot be read is dropped first). */
static int serve_hit(struct diskcache *dc, const char *key,
		     const struct hit_req *r, int *err)
{
	pthread_mutex_lock(&dc->lock);
	struct dc_entry *e = dc_find(dc, dc_key_hash(key), key);
	if (!e || e->state != DC_READY) {
		pthread_mutex_unlock(&dc->lock);
		return 0;
	}
	uint16_t dir = e->dir;
	uint64_t size = e->size;
	e->last_use = now_s();
	dc_lru_touch(dc, e);
	if (r->v)
		e->pins++;
	pthread_mutex_unlock(&dc->lock);
	if (r->v) {
		*err = map_entry(&dc->dirs[dir], key, size, r->v);
		if (*err || objstore_view_pin(r->v, &dc->base, e))
			dc_view_unpin(&dc->base, e); /* failed, or no bytes */
	} else {
		*err = read_entry(&dc->dirs[dir], key, size, r->off, r->len,
				  r->data, r->got);
	}
	if (!*err) {
		STAT_ADD(dc, hits, 1);
		STAT_ADD(dc, hit_bytes, r->v ? r->v->len : *r->got);
		return 1;
	}
	if (*err == ENOMEM)
		return 1;
	/* Not dropped: evicted or deleted since we looked. */
	if (drop(dc, key, e)) {
		STAT_ADD(dc, bad_entries, 1);
		log_warn("dropped disk cache entry '%s' in '%s': %s", key,
			 dc->dirs[dir].path,
			 *err == DC_ESIZE ? "size differs from the index"
					  : strerror(*err));
	}
	return 0;
}

static int dc_get(struct objstore *s, const char *key, uint64_t off, size_t len,
		  void **data, size_t *got)
{
	struct diskcache *dc = dc_of(s);
	struct hit_req r = {off, len, data, got, NULL};
	struct dc_entry *ph = NULL;
	struct dc_flight *f = NULL;
	int err;

	if (serve_hit(dc, key, &r, &err))
		return err;
	STAT_ADD(dc, misses, 1);
	if (len && get_whole(dc, key, off, len, data, got, &err))
		return err;
	/* a whole get (a fetch ahead) takes a reader's whole fetch under
	 * way, or is a flight too: the ranged gets of its readers
	 * meanwhile take their range from it (get_whole) */
	if (off == 0 && len == 0) {
		if (flight_join(dc, key, 0, SIZE_MAX, data, got, &err))
			return err;
		/* NULL: being filled by someone else (a flight to join), or
		 * filled since we looked (a reader's whole fetch ended
		 * meanwhile): a hit then, not a second get from the store */
		ph = placeholder(dc, key, &f);
		if (!ph && flight_join(dc, key, 0, SIZE_MAX, data, got, &err))
			return err;
		if (!ph && serve_hit(dc, key, &r, &err)) {
			/* counted once, as the hit it turned out to be */
			__atomic_sub_fetch(&dc->st.misses, 1, __ATOMIC_RELAXED);
			return err;
		}
	}
	err = objstore_get(dc->backend, key, off, len, data, got);
	if (ph) {
		flight_land(dc, f, err, err ? NULL : *data, err ? 0 : *got);
		if (err)
			unplace(dc, ph);
		else
			fill(dc, ph, *data, *got);
		flight_end(dc, f);
	}
	return err;
}

/* ---- views ---- */

/* Map an entry of `size` bytes; as read_entry() otherwise. */
static int map_entry(struct dc_dir *d, const char *key, uint64_t size,
		     struct objstore_view *v)
{
	struct stat st;
	int fd, err;

	fd = openat(d->fd, key, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return errno;
	if (fstat(fd, &st))
		err = errno;
	else if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != size)
		err = DC_ESIZE;
	else /* entries are replaced by rename, never rewritten in place */
		err = objstore_view_of_fd(v, fd, (size_t)size);
	close(fd);
	return err;
}

/*
 * A hit is the entry's file mapped: no copy, and its checksums are checked
 * by the reader in place. A miss gets the backend's view and hangs the
 * fill on it, to be written from those very bytes once the reader has
 * checked them (view_fill).
 */
static int dc_get_view(struct objstore *s, const char *key,
		       struct objstore_view *v)
{
	struct diskcache *dc = dc_of(s);
	struct hit_req r = {0, 0, NULL, NULL, v};
	struct dc_entry *ph;
	int err;

	if (serve_hit(dc, key, &r, &err))
		return err;
	STAT_ADD(dc, misses, 1);
	/* before the backend call: a put or delete meanwhile marks it stale */
	ph = placeholder(dc, key, NULL);
	err = objstore_get_view(dc->backend, key, v);
	if (err || !ph) {
		if (ph)
			unplace(dc, ph);
		return err;
	}
	gr_assert(!v->filler);
	v->filler = s;
	v->fill = ph;
	return 0;
}

static struct fill_req *fill_req_get(struct diskcache *dc)
{
	pthread_mutex_lock(&dc->fq_lock);
	struct fill_req *r = SLIST_FIRST(&dc->fq_free);
	if (r)
		SLIST_REMOVE_HEAD(&dc->fq_free, free);
	pthread_mutex_unlock(&dc->fq_lock);
	return r;
}

static void fill_req_put(struct diskcache *dc, struct fill_req *r)
{
	pthread_mutex_lock(&dc->fq_lock);
	SLIST_INSERT_HEAD(&dc->fq_free, r, free);
	pthread_mutex_unlock(&dc->fq_lock);
}

/* A job of the fillers: write one queued view. */
static void fill_run(struct workq_job *job)
{
	struct fill_req *r = (struct fill_req *)job;
	struct diskcache *dc = r->dc;

	fill(dc, r->ph, r->v.data, r->v.len);
	objstore_view_release(&r->v);
	fill_req_put(dc, r);
}

/* A view's pending fill: queued when its bytes were checked (ok), written
 * here when the queue is full (back-pressure on readers while the filler
 * is behind); a view that failed its check fills nothing. */
static void dc_view_fill(struct objstore *s, struct objstore_view *v, int ok)
{
	struct diskcache *dc = dc_of(s);
	struct dc_entry *ph = v->fill;

	v->fill = NULL;
	if (ok) {
		struct fill_req *r = dc->fillers ? fill_req_get(dc) : NULL;
		if (r) {
			r->ph = ph;
			objstore_view_ref(v, &r->v);
			/* full (FILLQ_MAX waiting) or closing: ours to write */
			if (workq_trypush(dc->fillers, &r->job) == 0)
				return;
			objstore_view_release(&r->v);
			fill_req_put(dc, r);
		}
		STAT_ADD(dc, fill_inline, 1);
		fill(dc, ph, v->data, v->len);
		return;
	}
	unplace(dc, ph);
}

/* Wait until every queued fill is written (tests, close). */
static void fills_wait(struct diskcache *dc)
{
	if (dc->fillers)
		workq_drain(dc->fillers);
}

void diskcache_sync(struct objstore *cache)
{
	if (cache && cache->ops == &dc_ops)
		fills_wait(dc_of(cache));
}

/* Copy [off, off + len) of an object of n bytes into a new buffer. */
static int copy_range(const void *all, size_t n, uint64_t off, size_t len,
		      void **data, size_t *got)
{
	if (off >= n) {
		*data = NULL;
		*got = 0;
		return 0;
	}
	*got = n - off < len ? n - off : len;
	*data = malloc(*got ? *got : 1);
	if (!*data)
		return ENOMEM;
	memcpy(*data, (const char *)all + off, *got);
	return 0;
}

/* Under lock: the flight fetching key, or NULL. */
static struct dc_flight *flight_find(struct diskcache *dc, const char *key)
{
	for (size_t i = 0; i < FLIGHTS; i++)
		if (dc->flights[i].key && !strcmp(dc->flights[i].key, key))
			return &dc->flights[i];
	return NULL;
}

/*
 * Wait for the whole fetch of key in flight and answer the ranged get from
 * its bytes, or with its error. Returns 0 when there is none to wait for
 * (the key is filled by a put or a view, or the fetch ended and its bytes
 * are gone): the caller passes the ranged get through.
 */
static int flight_join(struct diskcache *dc, const char *key, uint64_t off,
		       size_t len, void **data, size_t *got, int *err)
{
	pthread_mutex_lock(&dc->lock);
	struct dc_flight *f = flight_find(dc, key);
	if (!f) {
		pthread_mutex_unlock(&dc->lock);
		return 0;
	}
	f->waiters++;
	while (!f->done)
		pthread_cond_wait(&f->cv, &dc->lock);
	pthread_mutex_unlock(&dc->lock);

	/* done: the bytes stay until the last waiter leaves */
	*err = f->err ? f->err : copy_range(f->data, f->n, off, len, data, got);

	pthread_mutex_lock(&dc->lock);
	if (--f->waiters == 0)
		pthread_cond_broadcast(&f->cv);
	pthread_mutex_unlock(&dc->lock);
	STAT_ADD(dc, flight_waits, 1);
	return 1;
}

/* Under lock: a free flight slot for key, or NULL (all taken: waiters of
 * this fetch pass through, as before there were flights). */
static struct dc_flight *flight_take(struct diskcache *dc, const char *key)
{
	for (size_t i = 0; i < FLIGHTS; i++) {
		struct dc_flight *f = &dc->flights[i];
		if (!f->key) {
			f->key = key;
			f->done = 0;
			f->err = 0;
			f->data = NULL;
			f->n = 0;
			return f;
		}
	}
	return NULL;
}

/* The fetch ended: wake its waiters with its bytes or error. */
static void flight_land(struct diskcache *dc, struct dc_flight *f, int err,
			const void *data, size_t n)
{
	if (!f)
		return;
	pthread_mutex_lock(&dc->lock);
	f->done = 1;
	f->err = err;
	f->data = data;
	f->n = n;
	pthread_cond_broadcast(&f->cv);
	pthread_mutex_unlock(&dc->lock);
}

/* Free the slot once its last waiter has copied its range. */
static void flight_end(struct diskcache *dc, struct dc_flight *f)
{
	if (!f)
		return;
	pthread_mutex_lock(&dc->lock);
	while (f->waiters)
		pthread_cond_wait(&f->cv, &dc->lock);
	f->key = NULL;
	pthread_mutex_unlock(&dc->lock);
}

/*
 * A ranged get that missed, of a key cached whole by policy: get the whole
 * object, cache it, hand out the range. Ranged gets of the same key that
 * miss while it is fetched wait for it (flight_join) rather than fetch
 * their range too: the frames of a pack are read at once by several
 * readers and the prefetch. Returns 1 when it answered (err in *err), 0
 * when the caller should pass the ranged get through.
 */
static int get_whole(struct diskcache *dc, const char *key, uint64_t off,
		     size_t len, void **data, size_t *got, int *err)
{
	struct dc_entry *ph;
	struct dc_flight *f = NULL;
	void *all = NULL;
	size_t n = 0;

	if (!dc->o.whole_prefix ||
	    strncmp(key, dc->o.whole_prefix, strlen(dc->o.whole_prefix)))
		return 0;
	/* being fetched whole by someone else: take our range from that */
	if (flight_join(dc, key, off, len, data, got, err))
		return 1;
	/* the whole object only for frames still to read: not when the
	 * plans' readers read some of it already (its other frames are
	 * behind them), and only with room that no plan needs (ahead): a
	 * planned entry evicted for it is fetched again, where the range
	 * passed through costs only its bytes (epoch 2 with a plan) */
	if (!dc_would_admit_as(
		dc, key,
		dc->o.whole_est > off + len ? dc->o.whole_est : off + len,
		DC_AHEAD | DC_UNREAD))
		return 0;
	/* NULL: being filled by someone else, or filled since we looked:
	 * then a hit, not a pass-through that asks the store again */
	ph = placeholder(dc, key, &f);
	if (!ph) {
		struct hit_req r = {off, len, data, got, NULL};
		return flight_join(dc, key, off, len, data, got, err) ||
		       serve_hit(dc, key, &r, err);
	}
	*err = objstore_get(dc->backend, key, 0, 0, &all, &n);
	if (*err) {
		unplace(dc, ph);
		flight_land(dc, f, *err, NULL, 0);
		flight_end(dc, f);
		return 1;
	}
	flight_land(dc, f, 0, all, n);
	fill(dc, ph, all, n);
	*err = copy_range(all, n, off, len, data, got);
	flight_end(dc, f);
	bigbuf_free(all);
	return 1;
}

/* A put or a lazy put (durable at the backend's next sync). */
static int dc_store(struct objstore *s, const char *key, const void *data,
		    size_t len, int lazy)
{
	struct diskcache *dc = dc_of(s);
	int err = lazy ? objstore_put_lazy(dc->backend, key, data, len)
		       : objstore_put(dc->backend, key, data, len);

	/* After the put, so a fill that read the old object rolls back. */
	drop(dc, key, NULL);
	if (!err && dc->o.cache_writes) {
		struct dc_entry *ph = placeholder(dc, key, NULL);
		if (ph)
			fill(dc, ph, data, len);
	}
	return err;
}

static int dc_put(struct objstore *s, const char *key, const void *data,
		  size_t len)
{
	return dc_store(s, key, data, len, 0);
}

static int dc_put_lazy(struct objstore *s, const char *key, const void *data,
		       size_t len)
{
	return dc_store(s, key, data, len, 1);
}

static int dc_sync(struct objstore *s)
{
	return objstore_sync(dc_of(s)->backend);
}

static int dc_del(struct objstore *s, const char *key)
{
	struct diskcache *dc = dc_of(s);
	int err = objstore_del(dc->backend, key);

	drop(dc, key, NULL);
	return err;
}

static int dc_head(struct objstore *s, const char *key, uint64_t *size)
{
	struct diskcache *dc = dc_of(s);

	pthread_mutex_lock(&dc->lock);
	struct dc_entry *e = dc_find(dc, dc_key_hash(key), key);
	if (e && e->state == DC_READY) {
		*size = e->size;
		pthread_mutex_unlock(&dc->lock);
		return 0;
	}
	pthread_mutex_unlock(&dc->lock);
	return objstore_head(dc->backend, key, size);
}

static int dc_list(struct objstore *s, const char *prefix, objstore_list_fn fn,
		   void *arg)
{
	return objstore_list(dc_of(s)->backend, prefix, fn, arg);
}

/* Asked for (`granary warmup --evict`), or by the chunk store on a
 * checksum failure (bad): only the latter is a bad entry. */
static int dc_evict(struct objstore *s, const char *key, int bad)
{
	struct diskcache *dc = dc_of(s);

	if (!drop(dc, key, NULL))
		return 0;
	if (bad)
		STAT_ADD(dc, bad_entries, 1);
	else
		STAT_ADD(dc, evicted, 1);
	return 0;
}

static void dc_free(struct diskcache *dc)
{
	free(dc->whole_prefix);
	struct hash_node *n, *next;
	for (n = hash_first(&dc->index); n; n = next) {
		next = hash_next(&dc->index, n);
		free(hash_entry(n, struct dc_entry, hn));
	}
	hash_release(&dc->index);
	for (size_t i = 0; i < dc->ndirs; i++) {
		if (dc->dirs[i].fd >= 0)
			close(dc->dirs[i].fd);
		free(dc->dirs[i].path);
	}
	free(dc->dirs);
	for (size_t i = 0; i < FLIGHTS; i++)
		pthread_cond_destroy(&dc->flights[i].cv);
	pthread_mutex_destroy(&dc->lock);
	pthread_mutex_destroy(&dc->fq_lock);
	free(dc);
}

static void dc_close(struct objstore *s)
{
	struct diskcache *dc = dc_of(s);

	/* the queued fills are written: a clean unmount keeps them */
	workq_close(dc->fillers);
	dc->fillers = NULL;

	objstore_close(dc->backend);
	dc_free(dc);
}

static const struct objstore_ops dc_ops = {
    .scheme = "diskcache",
    .get = dc_get,
    .put = dc_put,
    .put_lazy = dc_put_lazy,
    .sync = dc_sync,
    .del = dc_del,
    .head = dc_head,
    .list = dc_list,
    .evict = dc_evict,
    .get_view = dc_get_view,
    .view_fill = dc_view_fill,
    .view_unpin = dc_view_unpin,
    .close = dc_close,
};

/* ---- open ---- */

static int mkdir_p(const char *path, mode_t mode)
{
	char buf[PATH_MAX];
	size_t len = strlen(path);

	if (len >= sizeof(buf))
		return ENAMETOOLONG;
	memcpy(buf, path, len + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, mode) && errno != EEXIST)
			return errno;
		*p = '/';
	}
	if (mkdir(buf, mode) && errno != EEXIST)
		return errno;
	return 0;
}

static int ns_valid(const char *ns)
{
	return ns && *ns && strcmp(ns, ".") && strcmp(ns, "..") &&
	       !strchr(ns, '/');
}

static int open_dirs(struct diskcache *dc, const char *dirs, const char *ns)
{
	size_t n = 1;

	for (const char *c = dirs; *c; c++)
		n += *c == ':';
	if (n > UINT16_MAX)
		return EINVAL;
	dc->dirs = calloc(n, sizeof(*dc->dirs));
	if (!dc->dirs)
		return ENOMEM;
	for (const char *c = dirs; dc->ndirs < n;) {
		const char *end = strchr(c, ':');
		size_t len = end ? (size_t)(end - c) : strlen(c);
		struct dc_dir *d = &dc->dirs[dc->ndirs];
		int err;

		d->fd = -1;
		if (len == 0)
			return EINVAL;
		if (asprintf(&d->path, "%.*s/%s", (int)len, c, ns) < 0) {
			d->path = NULL;
			return ENOMEM;
		}
		dc->ndirs++;
		if ((err = mkdir_p(d->path, 0700))) {
			log_err("cannot create cache directory '%s': %s",
				d->path, strerror(err));
			return err;
		}
		d->fd = open(d->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (d->fd < 0) {
			err = errno;
			log_err("cannot open cache directory '%s': %s", d->path,
				strerror(err));
			return err;
		}
		struct stat st;
		if (fstat(d->fd, &st))
			return errno;
		d->dev = st.st_dev;
		d->sp = &d->own;
		for (size_t i = 0; i + 1 < dc->ndirs; i++)
			if (dc->dirs[i].dev == d->dev)
				d->sp = dc->dirs[i].sp;
		if (d->sp == &d->own) {
			/* Fixed for the cache's life: reservations are
			 * rounded to it and given back in the same units. */
			struct statvfs sv;
			d->own.fd = d->fd;
			d->own.frsize = !fstatvfs(d->fd, &sv) && sv.f_frsize
					    ? sv.f_frsize
					    : 4096;
		}
		c += len + (end ? 1 : 0);
	}
	return 0;
}

int diskcache_open(struct objstore *backend, const struct diskcache_opts *o,
		   struct objstore **out)
{
	struct diskcache *dc;
	int err;

	if (!out)
		return EINVAL;
	*out = NULL;
	if (!backend || !o || !o->dirs || !*o->dirs || !ns_valid(o->ns) ||
	    !o->size || !(o->free_ratio >= 0 && o->free_ratio < 1))
		return EINVAL;
	dc = calloc(1, sizeof(*dc));
	if (!dc)
		return ENOMEM;
	pthread_mutex_init(&dc->lock, NULL);
	pthread_mutex_init(&dc->fq_lock, NULL);
	for (size_t i = 0; i < FLIGHTS; i++)
		pthread_cond_init(&dc->flights[i].cv, NULL);
	for (size_t i = 0; i < sizeof(dc->fq) / sizeof(dc->fq[0]); i++) {
		dc->fq[i] = (struct fill_req){.job.run = fill_run, .dc = dc};
		SLIST_INSERT_HEAD(&dc->fq_free, &dc->fq[i], free);
	}
	dc->backend = backend;
	dc->o = *o;
	dc->o.dirs = dc->o.ns = NULL;
	dc->o.whole_prefix = NULL;
	if (o->whole_prefix && !(dc->whole_prefix = strdup(o->whole_prefix))) {
		err = ENOMEM;
		goto free_dc;
	}
	dc->o.whole_prefix = dc->whole_prefix;
	TAILQ_INIT(&dc->lru);
	if ((err = hash_init(&dc->index, 10)))
		goto free_dc;
	if ((err = open_dirs(dc, o->dirs, o->ns)))
		goto free_dc;
	if ((err = dc_rebuild(dc)))
		goto free_dc;
	for (size_t i = 0; i < dc->ndirs; i++) {
		struct dc_space *sp = dc->dirs[i].sp;
		if (sp != &dc->dirs[i].own)
			continue; /* an earlier dir's disk, said already */
		dc_refresh_space(dc, sp);
		pthread_mutex_lock(&dc->lock);
		int low = dc_space_low(dc, sp);
		double pct = dc_free_pct(sp);
		pthread_mutex_unlock(&dc->lock);
		if (low)
			log_warn("disk cache '%s': %.1f%% of its disk is free, "
				 "less than --free-space-ratio keeps (%.0f%%): "
				 "blocks are cached only as room frees up",
				 dc->dirs[i].path, pct, dc->o.free_ratio * 100);
	}
	if (backend->url && !(dc->base.url = strdup(backend->url))) {
		err = ENOMEM;
		goto free_dc;
	}
	dc->base.ops = &dc_ops;
	dc->base.layered = 1; /* the backend rides out outages */
	/* without a thread, readers write their fills themselves */
	err = workq_open("gr-cachefill", FILLERS, FILLQ_MAX, &dc->fillers);
	if (err)
		log_warn("cannot start the disk cache filler: %s; caching "
			 "through gets only",
			 strerror(err));
	*out = &dc->base;
	return 0;

free_dc:
	dc_free(dc); /* the backend stays the caller's */
	return err;
}

/* ---- introspection ---- */

struct objstore *diskcache_backend(struct objstore *cache)
{
	return cache && cache->ops == &dc_ops ? dc_of(cache)->backend : NULL;
}

void diskcache_get_stats(struct objstore *cache, struct diskcache_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (!cache || cache->ops != &dc_ops)
		return;
	struct diskcache *dc = dc_of(cache);
	st->hits = __atomic_load_n(&dc->st.hits, __ATOMIC_RELAXED);
	st->misses = __atomic_load_n(&dc->st.misses, __ATOMIC_RELAXED);
	st->hit_bytes = __atomic_load_n(&dc->st.hit_bytes, __ATOMIC_RELAXED);
	st->fills = __atomic_load_n(&dc->st.fills, __ATOMIC_RELAXED);
	st->fill_skips = __atomic_load_n(&dc->st.fill_skips, __ATOMIC_RELAXED);
	st->fill_inline =
	    __atomic_load_n(&dc->st.fill_inline, __ATOMIC_RELAXED);
	st->flight_waits =
	    __atomic_load_n(&dc->st.flight_waits, __ATOMIC_RELAXED);
	st->evictions = __atomic_load_n(&dc->st.evictions, __ATOMIC_RELAXED);
	st->evict_demoted =
	    __atomic_load_n(&dc->st.evict_demoted, __ATOMIC_RELAXED);
	st->evict_planned =
	    __atomic_load_n(&dc->st.evict_planned, __ATOMIC_RELAXED);
	st->fill_ranked_out =
	    __atomic_load_n(&dc->st.fill_ranked_out, __ATOMIC_RELAXED);
	st->demoted = __atomic_load_n(&dc->st.demoted, __ATOMIC_RELAXED);
	st->evicted = __atomic_load_n(&dc->st.evicted, __ATOMIC_RELAXED);
	st->bad_entries =
	    __atomic_load_n(&dc->st.bad_entries, __ATOMIC_RELAXED);
	pthread_mutex_lock(&dc->lock);
	st->entries = dc->st.entries;
	st->bytes = dc->st.bytes;
	pthread_mutex_unlock(&dc->lock);
}

int diskcache_contains(struct objstore *cache, const char *key)
{
	if (!cache || cache->ops != &dc_ops || !key)
		return 0;
	struct diskcache *dc = dc_of(cache);
	pthread_mutex_lock(&dc->lock);
	struct dc_entry *e = dc_find(dc, dc_key_hash(key), key);
	int yes = e && e->state == DC_READY;
	pthread_mutex_unlock(&dc->lock);
	return yes;
}

int diskcache_open_entry(struct objstore *cache, const char *key, int *fd,
			 uint64_t *size)
{
	struct stat st;
	int err = 0;

	*fd = -1;
	if (!cache || cache->ops != &dc_ops || !key)
		return EINVAL;
	struct diskcache *dc = dc_of(cache);
	pthread_mutex_lock(&dc->lock);
	struct dc_entry *e = dc_find(dc, dc_key_hash(key), key);
	if (!e || e->state != DC_READY) {
		pthread_mutex_unlock(&dc->lock);
		return ENOENT;
	}
	uint16_t dir = e->dir;
	uint64_t n = e->size;
	e->last_use = now_s();
	dc_lru_touch(dc, e);
	pthread_mutex_unlock(&dc->lock);

	int f =
	    openat(dc->dirs[dir].fd, key, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (f < 0)
		err = errno;
	else if (fstat(f, &st))
		err = errno;
	else if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != n)
		err = DC_ESIZE;
	if (err) {
		if (f >= 0)
			close(f);
		/* as serve_hit: an entry that cannot be read is dropped */
		if (err != ENOMEM && err != EMFILE && err != ENFILE &&
		    drop(dc, key, e)) {
			STAT_ADD(dc, bad_entries, 1);
			log_warn("dropped disk cache entry '%s' in '%s': %s",
				 key, dc->dirs[dir].path,
				 err == DC_ESIZE ? "size differs from the index"
						 : strerror(err));
		}
		return err == DC_ESIZE || err == ENOENT ? ENOENT : err;
	}
	STAT_ADD(dc, hits, 1);
	STAT_ADD(dc, hit_bytes, n);
	*fd = f;
	*size = n;
	return 0;
}

void *diskcache_fill_begin(struct objstore *cache, const char *key)
{
	if (!cache || cache->ops != &dc_ops || !key)
		return NULL;
	return placeholder(dc_of(cache), key, NULL);
}

void diskcache_fill_hang(struct objstore *cache, void *fill,
			 struct objstore_view *v)
{
	if (!fill)
		return;
	gr_assert(cache->ops == &dc_ops && !v->filler);
	v->filler = cache;
	v->fill = fill;
}

void diskcache_fill_cancel(struct objstore *cache, void *fill)
{
	if (fill)
		unplace(dc_of(cache), fill);
}
