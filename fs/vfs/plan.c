/*
 * plan.c - the epoch plans of a mount (plan.h): the registry, one lock
 * around the bookkeeping (plancore.h); the fetchers, which bring the
 * files inside the windows into the disk cache and list the objects of
 * the files ahead; the ticker, which ends the plans whose owner is gone
 * or that nobody follows; the readers' opens; the disk cache's ranker.
 * The control calls (granary.plan* xattrs) are in plan_ctl.c.
 *
 * The fetchers are a work queue of PLAN_THREADS threads (lib/workq.h);
 * plans_pump() hands them one job at a time per free thread, taken
 * round-robin from the plans (plancore_pick), after every change that may
 * open room: an add, an open that moved a place, a job that ended, the
 * ticker. A job fetches one file's objects whole through the disk cache
 * (objstore_get of the whole object: the cache fills itself with it),
 * unless the cache has no room for them but by evicting what a plan needs
 * (diskcache_room): then the plan's fetches stall until its readers move
 * (their files passed are demoted: room) or the next tick; or
 * in a cache group warms them at their owners (group_warm), each key
 * once at a time across the fetchers (flight[]); or it lists the objects
 * of up to PC_LIST_BATCH_MAX files ahead of the window, for the ranks.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fs/data/chunkstore.h"
#include "fs/data/slice.h"
#include "fs/store/diskcache.h"
#include "fs/store/group.h"
#include "fs/vfs/plan_int.h"
#include "fs/vfs/vfs_int.h"
#include "lib/bigbuf.h"
#include "lib/log.h"
#include "lib/workq.h"

#define TREE_MAX     32 /* ancestors of an opener looked at */
#define FETCH_WARN_S 10 /* a fetch error logged at most this often */

/* ---- /proc ----------------------------------------------------------- */

int plan_proc_stat(int32_t pid, int32_t *ppid, uint64_t *start, int *zombie)
{
	char path[64], buf[1024], *save = NULL, *t, *e;
	ssize_t n;
	int fd, field = 3;

	if (pid <= 0)
		return ENOENT;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return errno == EACCES ? EACCES : ENOENT;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return ENOENT;
	buf[n] = '\0';
	/* "PID (COMM) STATE PPID ...": COMM may hold anything, ')' too */
	if (!(e = strrchr(buf, ')')))
		return EPROTO;
	for (t = strtok_r(e + 1, " ", &save); t;
	     t = strtok_r(NULL, " ", &save), field++) {
		if (field == 3 && zombie)
			*zombie = t[0] == 'Z' || t[0] == 'X';
		if (field == 4 && ppid)
			*ppid = (int32_t)strtol(t, NULL, 10);
		if (field == 22) {
			if (start)
				*start = strtoull(t, NULL, 10);
			return 0;
		}
	}
	return EPROTO;
}

int32_t plan_proc_tgid(int32_t pid)
{
	char path[64], line[128];
	int32_t tgid = pid;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (pid <= 0 || !(f = fopen(path, "re")))
		return pid;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Tgid: %d", &tgid) == 1)
			break;
	fclose(f);
	return tgid > 0 ? tgid : pid;
}

/* The process of thread pid and its ancestors (up to TREE_MAX, init left
 * out): *n of them. */
static size_t proc_tree(int32_t pid, int32_t *tree)
{
	size_t n = 0;

	pid = plan_proc_tgid(pid);

	while (pid > 1 && n < TREE_MAX) {
		int32_t ppid = 0;
		tree[n++] = pid;
		if (plan_proc_stat(pid, &ppid, NULL, NULL))
			break;
		pid = ppid;
	}
	return n;
}

/* ---- the fetchers ----------------------------------------------------- */

/* A file's objects: their keys (a key met again at once, the frames of
 * one pack, counts once) and hashes; and its pieces that are frames, for
 * a fetch into memory (frames_to_memory). */
struct keylist {
	char **key;
	uint64_t *h;
	uint64_t *bytes; /* the file's bytes in each */
	uint64_t *end;	 /* a pack's: the end of the file's frames in it */
	size_t n, cap;
	struct kl_frame {
		uint64_t id; /* the slice */
		uint32_t size, off;
		struct chunkstore_frame f;
	} *fr;
	size_t nfr, frcap;
	int blocks; /* a piece of the file is a block, not a frame */
	int err;
};

/* One visible slice of the file: a frame to remember, or a block. */
static void keylist_piece(struct keylist *kl, const struct meta_slice *e)
{
	if (!e->pack) {
		kl->blocks = 1;
		return;
	}
	if (kl->nfr == kl->frcap) {
		size_t cap = kl->frcap ? 2 * kl->frcap : 4;
		struct kl_frame *fr = realloc(kl->fr, cap * sizeof(*fr));
		if (!fr) {
			kl->err = ENOMEM;
			return;
		}
		kl->fr = fr;
		kl->frcap = cap;
	}
	kl->fr[kl->nfr++] = (struct kl_frame){
	    e->id, e->size, e->off, {e->pack, e->poff, e->plen}};
}

static void keylist_add(struct fs *fs, const char *key, uint64_t bytes,
			void *arg)
{
	struct keylist *kl = arg;

	(void)fs;
	if (kl->err)
		return;
	if (kl->n && !strcmp(kl->key[kl->n - 1], key)) {
		kl->bytes[kl->n - 1] += bytes;
		return;
	}
	if (kl->n == kl->cap) {
		size_t cap = kl->cap ? 2 * kl->cap : 8;
		char **k = realloc(kl->key, cap * sizeof(*k));
		if (k)
			kl->key = k;
		uint64_t *h = k ? realloc(kl->h, cap * sizeof(*h)) : NULL;
		if (h)
			kl->h = h;
		uint64_t *b = h ? realloc(kl->bytes, cap * sizeof(*b)) : NULL;
		if (b)
			kl->bytes = b;
		uint64_t *e = b ? realloc(kl->end, cap * sizeof(*e)) : NULL;
		if (e)
			kl->end = e;
		if (!k || !h || !b || !e) {
			kl->err = ENOMEM;
			return;
		}
		kl->cap = cap;
	}
	kl->bytes[kl->n] = bytes;
	kl->end[kl->n] = 0;
	if (!(kl->key[kl->n] = strdup(key))) {
		kl->err = ENOMEM;
		return;
	}
	kl->h[kl->n++] = plancore_key_hash(key);
}

static void keylist_release(struct keylist *kl)
{
	for (size_t i = 0; i < kl->n; i++)
		free(kl->key[i]);
	free(kl->key);
	free(kl->h);
	free(kl->bytes);
	free(kl->end);
	free(kl->fr);
	memset(kl, 0, sizeof(*kl));
}

/* The objects of inode ino's first len bytes, from its chunk lists (one
 * metadata read per chunk). */
static int keylist_of(struct fs *fs, uint64_t ino, uint64_t len,
		      struct keylist *kl)
{
	uint32_t last = len ? (uint32_t)((len - 1) / META_CHUNK_SIZE) : 0;

	for (uint32_t idx = 0; len && idx <= last && !kl->err; idx++) {
		struct meta_slice *raw, *vis;
		size_t nraw, nvis;
		int err = meta_read_chunk(fs->meta, ino, idx, &raw, &nraw);
		if (!err) {
			err = slice_resolve(raw, nraw, &vis, &nvis);
			free(raw);
		}
		if (err)
			return err;
		chunk_blocks(fs, idx, vis, nvis, len, keylist_add, kl);
		/* a pack is fetched whole: where the file's frames end in it
		 * is the least its size can be */
		for (size_t i = 0; i < nvis && !kl->err; i++) {
			char key[256];
			if ((uint64_t)idx * META_CHUNK_SIZE + vis[i].pos < len)
				keylist_piece(kl, &vis[i]);
			if (!vis[i].pack)
				continue;
			chunkstore_pack_key(vis[i].pack, key, sizeof(key));
			for (size_t k = 0; k < kl->n; k++)
				if (!strcmp(kl->key[k], key) &&
				    kl->end[k] <
					(uint64_t)vis[i].poff + vis[i].plen)
					kl->end[k] =
					    (uint64_t)vis[i].poff + vis[i].plen;
		}
		free(vis);
	}
	return kl->err;
}

/* The keys as one block of NUL-ended strings, for plancore's names. */
static char *keylist_names(const struct keylist *kl)
{
	size_t len = 1;
	char *names, *w;

	for (size_t i = 0; i < kl->n; i++)
		len += strlen(kl->key[i]) + 1;
	if (!(names = malloc(len)))
		return NULL;
	w = names;
	for (size_t i = 0; i < kl->n; i++)
		w = stpcpy(w, kl->key[i]) + 1;
	*w = '\0';
	return names;
}

static void fetch_warn(struct plans *p, const char *key, int err)
{
	int64_t now = mono_ns(),
		last = __atomic_load_n(&p->warned_ns, __ATOMIC_RELAXED);

	if (last && now - last < FETCH_WARN_S * 1000000000ll)
		return;
	__atomic_store_n(&p->warned_ns, now, __ATOMIC_RELAXED);
	log_warn("plan: cannot fetch '%s' ahead of its readers: %s (they "
		 "will fetch it themselves; more such errors are not logged "
		 "for %d s)",
		 key, gr_strerror(err), FETCH_WARN_S);
}

/* Key h's fetch, one at a time across the fetchers: the slot taken; -2
 * when another fetcher is fetching it (this one does not wait: with two
 * files of a pack in the window, a fetcher waited on the other's fetch
 * of it, one fetch fewer under way); -1 when the plans are closing. */
static int flight_take(struct plans *p, uint64_t h)
{
	int slot = -1;

	pthread_mutex_lock(&p->lock);
	for (int i = 0; !p->stopping && i < PLAN_THREADS; i++)
		if (p->flight[i].used && p->flight[i].h == h)
			slot = -2;
	for (int i = 0; !p->stopping && i < PLAN_THREADS && slot == -1; i++)
		if (!p->flight[i].used)
			slot = i;
	if (slot >= 0) {
		p->flight[slot].used = 1;
		p->flight[slot].h = h;
	}
	pthread_mutex_unlock(&p->lock);
	return slot;
}

static void flight_end(struct plans *p, int slot)
{
	pthread_mutex_lock(&p->lock);
	p->flight[slot].used = 0;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
}

/* Take room for est bytes more in p->pending: the pending bytes before. */
static uint64_t pending_take(struct plans *p, uint64_t est)
{
	pthread_mutex_lock(&p->lock);
	uint64_t before = p->pending;
	p->pending += est;
	pthread_mutex_unlock(&p->lock);
	return before;
}

/* Give est back; a pack of n bytes fetched (n 0: none) counts for the
 * sizes of the next. */
static void pending_give(struct plans *p, uint64_t est, uint64_t n)
{
	pthread_mutex_lock(&p->lock);
	p->pending -= est;
	if (n) {
		p->pack_bytes += n;
		p->packs++;
	}
	pthread_mutex_unlock(&p->lock);
}

/* The bytes key will take in the disk cache, before it is fetched: the
 * file's in it (a block's), or for a pack, which is fetched whole, the
 * end of the file's frames in it or the mean of the packs fetched so far,
 * whichever is more. Sized by the file's bytes alone, a pack's fill found
 * half the room asked for, and evicted what the plans needed. */
static uint64_t key_est(struct plans *p, const char *key, uint64_t bytes,
			uint64_t end)
{
	uint64_t est = bytes > end ? bytes : end;

	if (!strncmp(key, "packs/", 6)) {
		pthread_mutex_lock(&p->lock);
		uint64_t mean = p->packs ? p->pack_bytes / p->packs : 0;
		pthread_mutex_unlock(&p->lock);
		if (mean > est)
			est = mean;
	}
	return est;
}

/* Bring key (bytes of the file in it, its frames ending at end in it: a
 * pack's) into the disk cache (in a group: to its owner). 1 when it is
 * there, 0 when not, -1 when there is no room for it but by evicting what
 * a plan needs (diskcache_room: not fetched); *fetched set when bytes came
 * from the store for it. The room asked is the object's and that of the
 * other fetches ahead still under way (pending): each of PLAN_THREADS
 * fetchers saw the same free room, and their fills evicted planned
 * entries. */
static int fetch_key(struct plans *p, const char *key, uint64_t h,
		     uint64_t bytes, uint64_t end, int *fetched)
{
	struct fs *fs = p->fs;
	void *data = NULL;
	size_t n = 0;
	uint64_t est, before;
	int err, slot, pack;

	if (fs->group) {
		int here = diskcache_contains(fs->cache, key);
		if ((err = group_warm(fs->group, key)))
			fetch_warn(p, key, err);
		*fetched |= !err && !here;
		return !err;
	}
	if (diskcache_contains(fs->cache, key))
		return 1;
	/* a file passed read it by ranges (or it was evicted since): the
	 * readers ahead read their ranges too, rather than the whole object
	 * again (epoch 2, its cache full of what the plan needs) */
	pthread_mutex_lock(&p->lock);
	int passed = plancore_passed(p->core, h);
	for (int i = 0; passed && i < PLAN_THREADS; i++)
		passed = !(p->flight[i].used && p->flight[i].h == h);
	pthread_mutex_unlock(&p->lock);
	if (passed)
		return 0;
	est = key_est(p, key, bytes, end);
	before = pending_take(p, est);
	if (!diskcache_room(fs->cache, key, est + before)) {
		pending_give(p, est, 0);
		return -1;
	}
	if ((slot = flight_take(p, h)) < 0) {
		pending_give(p, est, 0);
		return slot == -2; /* another fetcher brings it */
	}
	/* fetched meanwhile by another fetcher, or a reader */
	pack = !strncmp(key, "packs/", 6);
	if (!diskcache_contains(fs->cache, key)) {
		err = objstore_get(fs->cache, key, 0, 0, &data, &n);
		bigbuf_free(data);
		if (err && err != ENOENT)
			fetch_warn(p, key, err);
		*fetched |= !err;
		if (err)
			n = 0;
	}
	flight_end(p, slot);
	pending_give(p, est, pack ? n : 0);
	/* a fill the cache did not admit is no fetch ahead */
	return diskcache_contains(fs->cache, key);
}

static int stopping(struct plans *p)
{
	pthread_mutex_lock(&p->lock);
	int s = p->stopping;
	pthread_mutex_unlock(&p->lock);
	return s;
}

/*
 * No room on disk for the packs of j's file but by evicting what a plan
 * needs: bring the file's frames (kl: listed by keylist_of) into the
 * memory cache instead, a ranged GET of each (the bytes its reader would
 * fetch itself, no more), so that the reader does not wait on the store.
 * Only for a file at most fs->ra_max bytes ahead of the readers' place
 * (the memory cache is shared, and a frame fetched too far ahead is
 * evicted before its read). 1 when every piece of the file is a frame now
 * in memory; 0 when it is too far ahead, a piece is a block (fetched
 * whole: no room) or a read failed.
 */
static int frames_to_memory(struct plans *p, const struct pc_job *j,
			    const struct keylist *kl)
{
	struct fs *fs = p->fs;

	if (kl->err || kl->blocks || !kl->nfr)
		return 0;
	pthread_mutex_lock(&p->lock);
	uint64_t ahead = plancore_ahead_of(p->core, j);
	pthread_mutex_unlock(&p->lock);
	if (ahead > fs->ra_max)
		return 0;
	for (size_t i = 0; i < kl->nfr; i++) {
		const struct kl_frame *e = &kl->fr[i];
		char b; /* the frame comes whole into memory; one byte copied */
		if (chunkstore_read_frame(fs->cs, e->id, e->size, &e->f,
					  e->off, 1, &b))
			return 0;
	}
	return 1;
}

static void fetch_file(struct plans *p, const struct pc_job *j)
{
	struct keylist kl = {0};
	int err = keylist_of(p->fs, j->ino[0], j->len[0], &kl);
	int ready = !err, fetched = 0, noroom = 0;
	char *names = NULL;

	for (size_t i = 0; !err && i < kl.n; i++) {
		int r;
		if (stopping(p)) {
			ready = 0;
			break;
		}
		r = fetch_key(p, kl.key[i], kl.h[i], kl.bytes[i], kl.end[i],
			      &fetched);
		if (r < 0) {
			ready = 0;
			noroom = 1;
			break;
		}
		ready &= r;
	}
	if (noroom && frames_to_memory(p, j, &kl)) {
		noroom = 0;
		ready = fetched = 1;
	}
	if (err && err != ENOENT)
		log_debug("plan: cannot list the objects of inode %llu: %s",
			  (unsigned long long)j->ino[0], gr_strerror(err));
	if (!err && !p->fs->group)
		names = keylist_names(&kl);
	pthread_mutex_lock(&p->lock);
	plancore_done(p->core, j, ready, fetched, err ? NULL : kl.h, &kl.n,
		      names);
	if (noroom)
		plancore_stalled(p->core, j);
	pthread_mutex_unlock(&p->lock);
	keylist_release(&kl);
}

/* The objects of files ahead of the window, for the ranks. */
static void list_files(struct plans *p, const struct pc_job *j)
{
	size_t nk[PC_LIST_BATCH_MAX] = {0}, n = 0;
	uint64_t *keys = NULL;
	int err = 0;

	for (size_t i = 0; !err && i < j->count; i++) {
		struct keylist kl = {0};
		/* a file gone or unreadable is listed as holding nothing */
		if (keylist_of(p->fs, j->ino[i], j->len[i], &kl) == 0 && kl.n) {
			uint64_t *k = realloc(keys, (n + kl.n) * sizeof(*k));
			if (k) {
				keys = k;
				memcpy(keys + n, kl.h, kl.n * sizeof(*k));
				n += kl.n;
				nk[i] = kl.n;
			} else {
				err = ENOMEM;
			}
		}
		keylist_release(&kl);
	}
	pthread_mutex_lock(&p->lock);
	plancore_done(p->core, j, 0, 0, err ? NULL : keys, nk, NULL);
	pthread_mutex_unlock(&p->lock);
	free(keys);
}

struct plan_job {
	struct workq_job job; /* first: the queue's */
	struct plans *p;
	struct pc_job j;
};

static void job_run(struct workq_job *wj)
{
	struct plan_job *pj = (struct plan_job *)wj;
	struct plans *p = pj->p;

	if (pj->j.list)
		list_files(p, &pj->j);
	else
		fetch_file(p, &pj->j);
	pthread_mutex_lock(&p->lock);
	p->jobs--;
	p->lists -= pj->j.list;
	pthread_mutex_unlock(&p->lock);
	free(pj);
	plans_pump(p);
}

void plans_pump(struct plans *p)
{
	for (;;) {
		struct plan_job *pj = malloc(sizeof(*pj));
		int got = 0;
		if (!pj)
			return;
		pthread_mutex_lock(&p->lock);
		if (!p->stopping && p->jobs < PLAN_THREADS)
			got = plancore_pick(p->core, p->lists, PLAN_LISTERS,
					    &pj->j);
		if (got) {
			p->jobs++;
			p->lists += pj->j.list;
		}
		pthread_mutex_unlock(&p->lock);
		if (!got) {
			free(pj);
			return;
		}
		pj->p = p;
		pj->job.run = job_run;
		/* room for PLAN_THREADS jobs, never more: full only when
		 * closing (its file stays started, never fetched) */
		if (workq_trypush(p->q, &pj->job)) {
			pthread_mutex_lock(&p->lock);
			p->jobs--;
			p->lists -= pj->j.list;
			pthread_mutex_unlock(&p->lock);
			free(pj);
			return;
		}
	}
}

/* ---- the ticker ---------------------------------------------------------- */

struct owner {
	uint64_t id;
	int32_t pid;
	uint64_t start;
};

/* End plan id if it is still owned as o says (why: for the log). */
static void end_if(struct plans *p, const struct owner *o, const char *why)
{
	struct pc_plan *pp;
	int ended = 0;

	pthread_mutex_lock(&p->lock);
	if ((pp = plancore_find(p->core, o->id)) && pp->pid == o->pid &&
	    pp->pid_start == o->start) {
		plancore_end(p->core, pp);
		ended = 1;
	}
	pthread_mutex_unlock(&p->lock);
	if (ended)
		log_info("plan %llu ended: %s", (unsigned long long)o->id, why);
}

/* End the plans whose owner process is gone (outside the lock: /proc).
 * The ticker runs it, and a listing first, so that a plan whose job has
 * exited is never listed. */
void plans_reap(struct plans *p)
{
	struct owner own[PLAN_MAX];
	size_t nown = 0;
	struct pc_plan *pp = NULL;

	pthread_mutex_lock(&p->lock);
	while ((pp = plancore_next(p->core, pp)))
		if (pp->pid && nown < PLAN_MAX)
			own[nown++] =
			    (struct owner){pp->id, pp->pid, pp->pid_start};
	pthread_mutex_unlock(&p->lock);
	for (size_t i = 0; i < nown; i++) {
		uint64_t start = 0;
		int zombie = 0, err;
		err = plan_proc_stat(own[i].pid, NULL, &start, &zombie);
		if (err == ENOENT ||
		    (!err && (zombie || start != own[i].start)))
			end_if(p, &own[i], "its owner process is gone");
	}
}

static void tick(struct plans *p)
{
	struct owner idle[PLAN_MAX];
	size_t nidle = 0;
	int64_t now = mono_ns();
	struct pc_plan *pp = NULL;

	pthread_mutex_lock(&p->lock);
	while ((pp = plancore_next(p->core, pp)))
		if (pp->place < pp->n &&
		    now - pp->last_ns > (int64_t)p->idle_s * 1000000000)
			idle[nidle++] =
			    (struct owner){pp->id, pp->pid, pp->pid_start};
	pthread_mutex_unlock(&p->lock);
	for (size_t i = 0; i < nidle; i++)
		end_if(p, &idle[i],
		       "none of its files was opened for its idle "
		       "time");
	/* the room a stalled fetch waited for may have come otherwise */
	pthread_mutex_lock(&p->lock);
	plancore_unstall(p->core);
	pthread_mutex_unlock(&p->lock);
	plans_reap(p);
	plans_pump(p);
}

static void *ticker_main(void *arg)
{
	struct plans *p = arg;

	pthread_setname_np(pthread_self(), "gr-plan-tick");
	pthread_mutex_lock(&p->lock);
	while (!p->stopping) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_nsec += PLAN_TICK_MS * 1000000l;
		ts.tv_sec += ts.tv_nsec / 1000000000;
		ts.tv_nsec %= 1000000000;
		pthread_cond_timedwait(&p->tick_cond, &p->lock, &ts);
		if (p->stopping)
			break;
		pthread_mutex_unlock(&p->lock);
		tick(p);
		pthread_mutex_lock(&p->lock);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

/* ---- life ------------------------------------------------------------------
 */

int plans_open(struct fs *fs, const struct plan_opts *o, struct plans **out)
{
	struct plans *p = calloc(1, sizeof(*p));
	pthread_condattr_t ca;
	int err;

	if (!p)
		return ENOMEM;
	if (!fs->cache) {
		free(p);
		return ENOTSUP;
	}
	p->fs = fs;
	p->window_max = o->window_max ? o->window_max : PLAN_WINDOW_MIN;
	p->idle_s = o->idle_s ? o->idle_s : PLAN_IDLE_S;
	pthread_mutex_init(&p->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->tick_cond, &ca);
	pthread_condattr_destroy(&ca);
	pthread_cond_init(&p->cond, NULL);
	if ((err = plancore_open(p->window_max, &p->core)))
		goto fail;
	if ((err = workq_open("gr-plan", PLAN_THREADS, PLAN_THREADS, &p->q)))
		goto fail;
	if ((err = pthread_create(&p->ticker, NULL, ticker_main, p)))
		goto fail;
	p->ticking = 1;
	diskcache_set_ranker(fs->cache, plans_rank, plans_passed, p);
	*out = p;
	return 0;
fail:
	workq_close(p->q);
	plancore_close(p->core);
	pthread_cond_destroy(&p->cond);
	pthread_cond_destroy(&p->tick_cond);
	pthread_mutex_destroy(&p->lock);
	free(p);
	return err;
}

void plans_close(struct plans *p)
{
	if (!p)
		return;
	/* returns once no call of plans_rank is under way */
	diskcache_set_ranker(p->fs->cache, NULL, NULL, NULL);
	pthread_mutex_lock(&p->lock);
	p->stopping = 1;
	pthread_cond_broadcast(&p->cond);
	pthread_cond_broadcast(&p->tick_cond);
	pthread_mutex_unlock(&p->lock);
	if (p->ticking)
		pthread_join(p->ticker, NULL);
	workq_close(p->q); /* the jobs queued see stopping */
	plancore_close(p->core);
	pthread_cond_destroy(&p->cond);
	pthread_cond_destroy(&p->tick_cond);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

/* ---- the readers, the ranker, the figures ----------------------------------
 */

void plans_opened(struct plans *p, uint64_t ino, uint32_t pid)
{
	struct pc_demote d = {0};
	int32_t tree[TREE_MAX];
	size_t nt = 0;
	int naming, moved = 0;

	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	naming = plancore_naming(p->core, ino);
	/* one plan names it, or the opener is not known: no tree needed */
	if (naming == 1 || (naming == 2 && !pid))
		moved = plancore_opened(p->core, ino, NULL, 0, mono_ns(), &d);
	pthread_mutex_unlock(&p->lock);
	if (naming == 2 && pid) {
		nt = proc_tree((int32_t)pid, tree);
		pthread_mutex_lock(&p->lock);
		moved = plancore_opened(p->core, ino, tree, nt, mono_ns(), &d);
		pthread_mutex_unlock(&p->lock);
	}
	for (size_t i = 0; i < d.n; i++)
		diskcache_demote(p->fs->cache, d.key[i]);
	/* fetched ahead, but evicted before this open: wasted */
	for (size_t i = 0; i < d.nseen; i++) {
		const char *k = d.seen[i].names;
		while (*k && diskcache_contains(p->fs->cache, k))
			k += strlen(k) + 1;
		if (!*k)
			continue;
		pthread_mutex_lock(&p->lock);
		plancore_evicted(p->core, &d.seen[i]);
		pthread_mutex_unlock(&p->lock);
	}
	plancore_demote_release(&d);
	if (moved)
		plans_pump(p);
}

uint64_t plans_rank(void *arg, const char *key)
{
	struct plans *p = arg;
	uint64_t h = plancore_key_hash(key), r;

	pthread_mutex_lock(&p->lock);
	r = plancore_rank_at(p->core, h, mono_ns());
	pthread_mutex_unlock(&p->lock);
	return r;
}

int plans_passed(void *arg, const char *key)
{
	struct plans *p = arg;
	uint64_t h = plancore_key_hash(key);

	pthread_mutex_lock(&p->lock);
	int r = plancore_passed(p->core, h);
	pthread_mutex_unlock(&p->lock);
	return r;
}

int plans_list(struct plans *p, struct plan_info **info, size_t *n)
{
	struct pc_plan *pp = NULL;
	size_t k = 0;

	*info = NULL;
	*n = 0;
	if (!p)
		return 0;
	if (!(*info = calloc(PLAN_MAX, sizeof(**info))))
		return ENOMEM;
	pthread_mutex_lock(&p->lock);
	int64_t now = mono_ns();
	while ((pp = plancore_next(p->core, pp)))
		plancore_info(p->core, pp, now, &(*info)[k++]);
	pthread_mutex_unlock(&p->lock);
	*n = k;
	return 0;
}

void plans_get_stats(struct plans *p, struct plans_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	plancore_stats(p->core, st);
	pthread_mutex_unlock(&p->lock);
}

void plans_info_json(FILE *f, const struct plan_info *pi)
{
	fprintf(f,
		"{\"id\": %llu, \"uid\": %u, \"pid\": %d, \"files\": %llu, "
		"\"place\": %llu, \"window\": %llu, \"ahead\": %llu, "
		"\"prefetched\": %llu, \"used\": %llu, \"wasted\": %llu, "
		"\"waited\": %llu, \"ready\": %llu, \"idle_s\": %lld}",
		(unsigned long long)pi->id, pi->uid, pi->pid,
		(unsigned long long)pi->files, (unsigned long long)pi->place,
		(unsigned long long)pi->window, (unsigned long long)pi->ahead,
		(unsigned long long)pi->prefetched,
		(unsigned long long)pi->used, (unsigned long long)pi->wasted,
		(unsigned long long)pi->waited, (unsigned long long)pi->ready,
		(long long)pi->idle_s);
}
