/*
 * diskcache_index.c - the disk cache's index: which objects it holds (a
 * hash table by key and an LRU list), admission of a new entry against
 * the cache's size and its disk's free space (evicting from the LRU's old
 * end; with the plans' ranker set, diskcache_rank.c chooses), and the index
 * rebuilt from the directories at open. The state and the lock are
 * diskcache.c's (diskcache_int.h).
 */
#include "fs/store/diskcache_int.h"
#include "lib/log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* ---- index: hash table and LRU (caller holds lock) ---- */

static int entry_match(const struct hash_node *n, const void *key)
{
	return !strcmp(hash_entry(n, struct dc_entry, hn)->key, key);
}

/* h: dc_key_hash(key). */
struct dc_entry *dc_find(struct diskcache *dc, uint64_t h, const char *key)
{
	struct hash_node *n = hash_find(&dc->index, h, entry_match, key);

	return n ? hash_entry(n, struct dc_entry, hn) : NULL;
}

/* A hit: to the LRU's new end, no longer demoted. */
void dc_lru_touch(struct diskcache *dc, struct dc_entry *e)
{
	e->demoted = 0;
	TAILQ_REMOVE(&dc->lru, e, link);
	TAILQ_INSERT_HEAD(&dc->lru, e, link);
}

struct dc_entry *dc_entry_new(const char *key, size_t klen)
{
	struct dc_entry *e = calloc(1, sizeof(*e) + klen + 1);

	if (e)
		memcpy(e->key, key, klen);
	return e;
}

/* Take a READY entry out of service: off the LRU and the totals, but kept
 * hashed (DROPPING) until its file is gone, so that no fill of the same key
 * races with the unlink. Its disk space counts as free from now on: a
 * statvfs before the unlink then underestimates, which is the safe side. */
void dc_retire(struct diskcache *dc, struct dc_entry *e)
{
	struct dc_space *sp = dc->dirs[e->dir].sp;

	gr_assert(e->state == DC_READY);
	TAILQ_REMOVE(&dc->lru, e, link);
	e->state = DC_DROPPING;
	dc->st.entries--;
	dc->st.bytes -= e->size;
	dc->dropping += e->size;
	if (sp->total)
		sp->avail += (int64_t)round_up(e->size, sp->frsize);
}

/* Unlink the files of a list of DROPPING entries (lock not held), then
 * forget them. */
void dc_reap(struct diskcache *dc, struct dc_list *list)
{
	struct dc_entry *e, *next;

	if (TAILQ_EMPTY(list))
		return;
	for (e = TAILQ_FIRST(list); e; e = TAILQ_NEXT(e, link))
		unlinkat(dc->dirs[e->dir].fd, e->key, 0);
	pthread_mutex_lock(&dc->lock);
	for (e = TAILQ_FIRST(list); e; e = next) {
		next = TAILQ_NEXT(e, link);
		hash_remove(&dc->index, &e->hn);
		if (e->pins) {
			e->orphan = 1; /* see dc_view_unpin */
			continue;
		}
		dc->dropping -= e->size;
		free(e);
	}
	pthread_mutex_unlock(&dc->lock);
}

/* ---- admission (caller holds lock) ---- */

/* Retire e to make room and chain it on *out; planned: chosen by its rank
 * (for the counters). */
void dc_evict_one(struct diskcache *dc, struct dc_entry *e, struct dc_list *out,
		  int planned)
{
	STAT_ADD(dc, evictions, 1);
	if (planned) /* a mark passed over (diskcache_rank.c) */
		STAT_ADD(dc, evict_planned, 1);
	else if (e->demoted)
		STAT_ADD(dc, evict_demoted, 1);
	dc_retire(dc, e);
	TAILQ_INSERT_HEAD(out, e, link);
}

/*
 * Walk the LRU from its old end for entries to evict so that `need` bytes
 * come free over all directories and `need_disk` on file system sp. An
 * entry used within min_age stops the walk: everything after it is younger
 * (demoted entries, at the old end, are not guarded). With out NULL only
 * tell whether it can be done; else retire the entries and chain them on
 * *out. Without a ranker: dc_pick_ranked() chooses when one is set.
 */
static int pick(struct diskcache *dc, const struct dc_space *sp, int64_t now,
		int64_t need, int64_t need_disk, struct dc_list *out)
{
	struct dc_entry *e = TAILQ_LAST(&dc->lru, dc_list), *prev;
	size_t scanned = 0;

	for (; e && (need > 0 || need_disk > 0); e = prev) {
		prev = TAILQ_PREV(e, dc_list, link);
		if (++scanned > SCAN_MAX)
			break;
		if (dc->o.min_age && !e->demoted &&
		    now - e->last_use < (int64_t)dc->o.min_age)
			break;
		int here = dc->dirs[e->dir].sp == sp;
		if ((need <= 0 && !here) || e->pins)
			continue; /* pinned: mapped by a reader, in use */
		need -= (int64_t)e->size;
		if (here)
			need_disk -= (int64_t)round_up(e->size, sp->frsize);
		if (out)
			dc_evict_one(dc, e, out, 0);
	}
	return need <= 0 && need_disk <= 0 ? 0 : -1;
}

/* The bytes sp's disk would be short of the free space that
 * --free-space-ratio keeps once rlen more are taken (<= 0: none short).
 * Called with lock held. */
static int64_t disk_short(const struct diskcache *dc, const struct dc_space *sp,
			  uint64_t rlen)
{
	if (dc->o.free_ratio <= 0 || !sp->total)
		return 0;
	return (int64_t)(dc->o.free_ratio * (double)sp->total) -
	       (sp->avail - (int64_t)rlen);
}

/* The disk of sp has less free space than --free-space-ratio keeps.
 * Called with lock held. */
int dc_space_low(const struct diskcache *dc, const struct dc_space *sp)
{
	return disk_short(dc, sp, 0) > 0;
}

/* Percent of sp's disk free. Called with lock held. */
double dc_free_pct(const struct dc_space *sp)
{
	return sp->total ? 100.0 * (double)sp->avail / (double)sp->total : 0;
}

/* Reserve len bytes for ph (ADMIT), or choose entries to evict first
 * (EVICT: reap victims, then ask again), or refuse (SKIP). */
int dc_admit(struct diskcache *dc, struct dc_entry *ph, uint64_t len,
	     int may_evict, struct dc_list *victims)
{
	struct dc_space *sp = dc->dirs[ph->dir].sp;
	uint64_t rlen = round_up(len, sp->frsize);
	int64_t need, need_disk;

	if (ph->stale || mono_ms() < dc->nofill_until_ms || len > dc->o.size)
		return SKIP;
	need = (int64_t)(dc->st.bytes + dc->reserved + dc->dropping + len) -
	       (int64_t)dc->o.size;
	need_disk = disk_short(dc, sp, rlen);
	if (need <= 0 && need_disk <= 0) {
		ph->size = len;
		dc->reserved += len;
		sp->inflight += rlen;
		if (sp->total)
			sp->avail -= (int64_t)rlen;
		return ADMIT;
	}
	if (!may_evict)
		return SKIP;
	/* Both passes see the same clock, so they walk alike. */
	int64_t now = now_s();
	int r;
	if (dc->rank) /* one walk: it chooses before it retires */
		r = dc_pick_ranked(dc, sp, now, need, need_disk, ph->key,
				   victims);
	else if (!(r = pick(dc, sp, now, need, need_disk, NULL)))
		pick(dc, sp, now, need, need_disk, victims);
	if (r == DC_RANKED_OUT)
		STAT_ADD(dc, fill_ranked_out, 1);
	return r ? SKIP : EVICT;
}

/* Ask the disk how much room it has, at most every STATVFS_EVERY_MS. What
 * fills have reserved but not committed is taken off: their files are not
 * (fully) written yet. */
void dc_refresh_space(struct diskcache *dc, struct dc_space *sp)
{
	int64_t now = mono_ms();
	int64_t last = __atomic_load_n(&sp->stat_ms, __ATOMIC_RELAXED);
	struct statvfs sv;

	if (dc->o.free_ratio <= 0 || now - last < STATVFS_EVERY_MS)
		return;
	if (!__atomic_compare_exchange_n(&sp->stat_ms, &last, now, 0,
					 __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		return; /* another thread asks */
	if (fstatvfs(sp->fd, &sv))
		return; /* keep the estimate */
	pthread_mutex_lock(&dc->lock);
	sp->total = (uint64_t)sv.f_blocks * sv.f_frsize;
	sp->avail = (int64_t)((uint64_t)sv.f_bavail * sv.f_frsize) -
		    (int64_t)sp->inflight;
	pthread_mutex_unlock(&dc->lock);
}

/* Would an entry of len bytes be admitted now (evicting what may go)? */
int dc_would_admit(struct diskcache *dc, const char *key, uint64_t len)
{
	return dc_would_admit_as(dc, key, len, 0);
}

/* As dc_would_admit; how DC_AHEAD: for a fetch ahead of the plans'
 * readers (diskcache_room), without evicting an entry a plan needs;
 * DC_UNREAD: never for a key the plans' readers read some of. */
int dc_would_admit_as(struct diskcache *dc, const char *key, uint64_t len,
		      int how)
{
	struct dc_space *sp = dc->dirs[dc_key_hash(key) % dc->ndirs].sp;
	int64_t need, need_disk;
	int ok;

	dc_refresh_space(dc, sp);
	pthread_mutex_lock(&dc->lock);
	need = (int64_t)(dc->st.bytes + dc->reserved + dc->dropping + len) -
	       (int64_t)dc->o.size;
	need_disk = disk_short(dc, sp, round_up(len, sp->frsize));
	ok = mono_ms() >= dc->nofill_until_ms && len <= dc->o.size &&
	     !((how & DC_UNREAD) && dc->passed &&
	       dc->passed(dc->rank_arg, key)) &&
	     ((need <= 0 && need_disk <= 0) ||
	      (dc->rank ? dc_pick_ranked(dc, sp, now_s(), need, need_disk,
					 (how & DC_AHEAD) ? NULL : key, NULL)
			: pick(dc, sp, now_s(), need, need_disk, NULL)) == 0);
	pthread_mutex_unlock(&dc->lock);
	return ok;
}

/* ---- index rebuild at open ---- */

struct scan {
	struct diskcache *dc;
	uint16_t dir;
	struct dc_entry **all; /* for sorting by last use */
	size_t n, cap;
	size_t temps; /* leftover temp files removed */
	char key[KEY_MAX + 2];
};

static int name_ok(const char *name)
{
	for (const char *c = name; *c; c++) {
		unsigned char ch = (unsigned char)*c;
		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || strchr("-_.~+=,@:", ch)))
			return 0;
	}
	return 1;
}

static int scan_add(struct scan *sc, size_t klen, const struct stat *st)
{
	struct diskcache *dc = sc->dc;
	uint64_t h = dc_key_hash(sc->key);

	/* also in another directory (the list changed) */
	if (dc_find(dc, h, sc->key))
		return 0;
	if (sc->n == sc->cap) {
		size_t cap = sc->cap ? sc->cap * 2 : 1024;
		struct dc_entry **all = realloc(sc->all, cap * sizeof(*all));
		if (!all)
			return ENOMEM;
		sc->all = all;
		sc->cap = cap;
	}
	struct dc_entry *e = dc_entry_new(sc->key, klen);
	if (!e)
		return ENOMEM;
	e->size = (uint64_t)st->st_size;
	e->last_use = (int64_t)st->st_mtim.tv_sec;
	e->dir = sc->dir;
	e->state = DC_READY;
	hash_insert(&dc->index, &e->hn, h);
	sc->all[sc->n++] = e;
	dc->st.entries++;
	dc->st.bytes += e->size;
	return 0;
}

/* Index directory dfd (consumed), whose key prefix is sc->key[0..klen). */
static int scan_dir(struct scan *sc, int dfd, size_t klen)
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
		if (!strcmp(name, ".") || !strcmp(name, ".."))
			continue;
		unsigned type = de->d_type;
		struct stat st;
		int have_st = 0;
		if (type == DT_UNKNOWN) {
			if (fstatat(dirfd(dir), name, &st, AT_SYMLINK_NOFOLLOW))
				continue;
			have_st = 1;
			type = S_ISDIR(st.st_mode)   ? DT_DIR
			       : S_ISREG(st.st_mode) ? DT_REG
						     : DT_UNKNOWN;
		}
		if (!strncmp(name, TMP_PREFIX, TMP_PREFIX_LEN)) {
			if (type == DT_REG && !unlinkat(dirfd(dir), name, 0))
				sc->temps++;
			continue;
		}
		size_t nlen = strlen(name);
		if (klen + nlen > KEY_MAX || !name_ok(name))
			continue; /* not ours: no key maps to it */
		memcpy(sc->key + klen, name, nlen + 1);
		if (type == DT_DIR) {
			int sub = openat(dirfd(dir), name,
					 O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			if (sub < 0)
				continue;
			sc->key[klen + nlen] = '/';
			sc->key[klen + nlen + 1] = '\0';
			err = scan_dir(sc, sub, klen + nlen + 1);
		} else if (type == DT_REG) {
			if (!have_st &&
			    fstatat(dirfd(dir), name, &st, AT_SYMLINK_NOFOLLOW))
				continue;
			if (S_ISREG(st.st_mode))
				err = scan_add(sc, klen + nlen, &st);
		}
	}
	closedir(dir);
	return err;
}

static int by_last_use(const void *a, const void *b)
{
	const struct dc_entry *x = *(struct dc_entry *const *)a;
	const struct dc_entry *y = *(struct dc_entry *const *)b;

	return (x->last_use > y->last_use) - (x->last_use < y->last_use);
}

/* Walk every directory into the index; LRU order by mtime; trim to the
 * size limit (the limit may have been lowered since the last mount). */
int dc_rebuild(struct diskcache *dc)
{
	struct timespec t0, t1;
	struct scan *sc = calloc(1, sizeof(*sc));
	struct dc_list victims = TAILQ_HEAD_INITIALIZER(victims);
	int err = 0;

	if (!sc)
		return ENOMEM;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	sc->dc = dc;
	for (size_t i = 0; i < dc->ndirs && !err; i++) {
		int dfd = openat(dc->dirs[i].fd, ".",
				 O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd < 0) {
			err = errno;
			log_err("cannot read cache directory '%s': %s",
				dc->dirs[i].path, strerror(err));
			break;
		}
		sc->dir = (uint16_t)i;
		sc->key[0] = '\0';
		if ((err = scan_dir(sc, dfd, 0)))
			log_err("cannot index cache directory '%s': %s",
				dc->dirs[i].path, strerror(err));
	}
	if (err)
		goto free_sc;
	if (sc->n)
		qsort(sc->all, sc->n, sizeof(*sc->all), by_last_use);
	for (size_t i = 0; i < sc->n; i++)
		TAILQ_INSERT_HEAD(&dc->lru, sc->all[i], link);
	while (dc->st.bytes > dc->o.size) {
		struct dc_entry *e = TAILQ_LAST(&dc->lru, dc_list);
		dc_retire(dc, e);
		STAT_ADD(dc, evictions, 1);
		TAILQ_INSERT_HEAD(&victims, e, link);
	}
	dc_reap(dc, &victims);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	log_info("disk cache: indexed %" PRIu64 " entries, %" PRIu64
		 " bytes in %zu director%s in %.3f s (%zu temp files removed)",
		 dc->st.entries, dc->st.bytes, dc->ndirs,
		 dc->ndirs == 1 ? "y" : "ies",
		 (double)(t1.tv_sec - t0.tv_sec) +
		     (double)(t1.tv_nsec - t0.tv_nsec) / 1e9,
		 sc->temps);
free_sc:
	free(sc->all);
	free(sc);
	return err;
}
