/*
 * mount.c - the client's composition root below FUSE: vfs_open_fs opens
 * the metadata engine and the store named by the volume, puts the disk
 * cache in front (and a cache group's store over it: groupd.h), starts
 * the block store, the uploaders, the packer and the writeback staging,
 * and registers the session; vfs_close_fs undoes it after the unmount.
 * Also the background reclaimer.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "meta/meta_dump.h"
#include "meta/meta_snap.h"
#include "meta/meta_objects.h"
#include "meta/meta_trash.h"
#include "meta/meta_volume.h"
#include "fs/data/chunkstore.h"
#include "fs/data/packer.h"
#include "fs/data/stage.h"
#include "fs/data/writer.h"
#include "fs/store/crypt.h"
#include "fs/store/diskcache.h"
#include "fs/store/objstore.h"
#include "fs/store/owner.h"
#include "fs/vfs/closer.h"
#include "fs/vfs/backupd.h"
#include "fs/vfs/compactq.h"
#include "fs/vfs/groupd.h"
#include "fs/vfs/hooks.h"
#include "fs/vfs/metrics.h"
#include "fs/vfs/namecache.h"
#include "fs/vfs/plan.h"
#include "fs/vfs/quota.h"
#include "fs/vfs/space.h"
#include "fs/vfs/vfs_int.h"
#include "lib/log.h"

#define RECLAIM_BATCH  64
#define CLOSE_DELAY_MS 10 /* a release waits this long for others */

/* Wake the reclaimer: inodes were deleted, their data waits. */
void reclaim_soon(void *arg)
{
	struct fs *fs = arg;
	space_changed(fs->space); /* a file was deleted: space freed */
	pthread_mutex_lock(&fs->rc_lock);
	pthread_cond_signal(&fs->rc_cond);
	pthread_mutex_unlock(&fs->rc_lock);
}

/* ---- a volume gone from under the mount ------------------------------ */

/*
 * The volume is not in its database any more (meta_session_watch:
 * restored from a dump while mounted, the database emptied or given
 * another volume); the metadata handle said so in the log. Every request
 * now gets EIO (the adapter asks vfs_gone first), and what the kernel
 * keeps of the old volume, pages and attributes, is dropped so that it
 * asks for them, and is refused, too. Runs once, on the heartbeat
 * thread; the kernel is told without table_lock held.
 */
static void volume_gone(void *arg)
{
	struct fs *fs = arg;
	struct hash_node *h;
	uint64_t *inos;
	size_t n = 0;

	if (!fs->kern.inval_inode)
		return; /* no request came yet: nothing is cached */
	pthread_mutex_lock(&fs->table_lock);
	inos = calloc(hash_count(&fs->nodes) + 1, sizeof(*inos));
	for (h = hash_first(&fs->nodes); inos && h;
	     h = hash_next(&fs->nodes, h))
		inos[n++] = hash_entry(h, struct node, hn)->ino;
	pthread_mutex_unlock(&fs->table_lock);
	fs->kern.inval_inode(fs->kern.arg, VFS_ROOT_ID, 0, 0);
	for (size_t i = 0; i < n; i++)
		if (inos[i] != fs->root)
			fs->kern.inval_inode(fs->kern.arg, inos[i], 0, 0);
	if (!inos)
		log_warn("out of memory: the kernel may serve pages of the "
			 "files it has cached until they are evicted");
	free(inos);
}

int vfs_gone(struct fs *fs)
{
	return meta_session_gone(fs->meta) ? EIO : 0;
}

/* ---- background reclamation ----------------------------------------- */

/* Deletes the objects of slices nobody references any more: data of
 * unlinked files after their last close, and of truncated chunks. Also
 * the background ticks: space_tick, the staged bytes for status. */
/* How often a client looks for snapshots left by dead clients. */
#define SNAPSHOT_CLEANUP_NS (30 * (int64_t)1000000000)

/* How often a client tries for the turn at purging the trash (one
 * client a period does it, whichever takes the turn first), and how long
 * after the mount it first tries. */
#define TRASH_PURGE_PERIOD 300
#define TRASH_PURGE_FIRST  60

/* Hour directories of the trash older than the volume's trash_days go,
 * with what they hold; their files' data then waits for reclamation. */
static void trash_purge_tick(struct fs *fs)
{
	unsigned period = hooks_trash_period();
	if (!period)
		period = TRASH_PURGE_PERIOD;
	int64_t now = mono_ns();
	if (!fs->purge_next)
		fs->purge_next = now + (int64_t)(period < TRASH_PURGE_FIRST
						     ? period
						     : TRASH_PURGE_FIRST) *
					   1000000000;
	if (now < fs->purge_next)
		return;
	fs->purge_next = now + (int64_t)period * 1000000000;
	struct meta_trash_purged p;
	int ran;
	int err = meta_trash_purge_due(fs->meta, period, hooks_trash_skew(),
				       &ran, &p);
	if (err)
		log_warn("trash: purge: %s", gr_strerror(err));
	if (p.entries)
		space_changed(fs->space);
	if (!err && (p.entries || p.hours))
		log_info("trash: purged %llu entries in %llu hour "
			 "directories older than the volume's trash-days",
			 (unsigned long long)p.entries,
			 (unsigned long long)p.hours);
}

static void *reclaimer_main(void *arg)
{
	pthread_setname_np(pthread_self(), "gr-reclaim");
	struct fs *fs = arg;
	struct meta_slice dead[RECLAIM_BATCH];
	int64_t next_cleanup = 0;
	uint64_t told_packs = 0, told_bytes = 0;
	for (;;) {
		size_t n = 0;
		int err = 0;
		/* nothing of the volume is this client's any more: wait for
		 * the unmount */
		if (meta_session_gone(fs->meta))
			goto wait;
		/* pending bytes that changed while no write came (space.h) */
		space_tick(fs->space);
		/* the quotas' generation; their gates' pending bytes */
		quota_tick(fs->quota);
		/* what this client holds staged, for `granary status` */
		if (fs->writeback) {
			struct packer_stats ps;
			struct stage_stats bs = {0};
			packer_get_stats(fs->packer, &ps);
			if (fs->stage)
				stage_get_stats(fs->stage, &bs);
			/* objects: packs and blocks of big files */
			uint64_t objs = ps.staged_packs + bs.staged_blocks;
			uint64_t bytes = ps.staged_bytes + bs.staged_bytes;
			if ((objs != told_packs || bytes != told_bytes) &&
			    meta_session_staged(fs->meta, objs, bytes) == 0) {
				told_packs = objs;
				told_bytes = bytes;
			}
		}
		/* Snapshots left half made by clients that died hold data:
		 * their detached copies are deleted (then reclaimed). */
		if (mono_ns() >= next_cleanup) {
			size_t k = 0;
			if (meta_snapshot_cleanup(fs->meta, &k) == 0 && k)
				log_info(
				    "deleted %zu detached trees (snapshots "
				    "left half made by clients that died, "
				    "versions of removed directories)",
				    k);
			next_cleanup = mono_ns() + SNAPSHOT_CLEANUP_NS;
		}
		trash_purge_tick(fs);
		err = meta_reclaim(fs->meta, dead, RECLAIM_BATCH, &n);
		if (err)
			log_warn("reclaim: %s", gr_strerror(err));
		for (size_t i = 0; i < n; i++) {
			const struct meta_slice *d = &dead[i];
			int e = d->pack
				    ? chunkstore_delete_pack(fs->cs, d->pack)
				    : chunkstore_delete(fs->cs, d->id, d->size);
			if (e)
				log_warn("reclaim: cannot delete %s %llu: "
					 "%s (gc will find it)",
					 d->pack ? "pack" : "slice",
					 (unsigned long long)(d->pack ? d->pack
								      : d->id),
					 gr_strerror(e));
			/* a store that is gone fails the rest too, each
			 * after its retries: an unmount would wait for all
			 * of them (minutes for a big file) */
			if ((e == OBJSTORE_EUNREACH || e == OBJSTORE_ESERVER) &&
			    i + 1 < n) {
				log_warn("reclaim: the store is not answering: "
					 "%zu more dead objects left for "
					 "'granary gc' to delete",
					 n - i - 1);
				break;
			}
		}
	wait:
		pthread_mutex_lock(&fs->rc_lock);
		if (!fs->stopping && (n == 0 || err)) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			/* 1 s: space_tick's period, and quota_tick's (a
			 * quota set shows within about a second) */
			ts.tv_sec += 1;
			pthread_cond_timedwait(&fs->rc_cond, &fs->rc_lock, &ts);
		}
		int stop = fs->stopping;
		pthread_mutex_unlock(&fs->rc_lock);
		if (stop)
			return NULL;
	}
}

/* ---- mount ---------------------------------------------------------- */

/*
 * Put the node's disk cache in front of the store. An explicit --cache-dir
 * that cannot be used fails the mount; the default directory only logs a
 * warning (a mount without a cache still works).
 */
/* The cache directories: --cache-dir, or the default (def, PATH_MAX). */
static const char *cache_dirs(const struct fs_opts *o, char *def)
{
	const char *home = getenv("HOME");

	if (o->cache_dir)
		return o->cache_dir;
	if (geteuid() == 0 || !home)
		snprintf(def, PATH_MAX, "/var/cache/granary");
	else
		snprintf(def, PATH_MAX, "%s/.cache/granary", home);
	return def;
}

/*
 * Writeback staging of big files' blocks, in the packer's slot. A test
 * build can hold each upload back (hooks.h), so that a test can kill the
 * client while blocks are still only staged.
 */
static int open_stage(struct fs *fs, const struct fs_opts *o)
{
	struct stage_opts so = {
	    .dir = packer_stage_dir(fs->packer),
	    .compress = fs->vol.compress,
	    .block_size = fs->vol.block_size,
	    .uploaders = 4,
	    .max_bytes = o->stage_size ? o->stage_size : 1ull << 30,
	    .test_delay_ms = hooks_stage_delay_ms(),
	    .cb_arg = fs,
	    .staged = scb_staged,
	};
	int err = stage_open(fs->store, &so, &fs->stage);

	if (!err)
		wpool_set_stage(fs->pool, fs->stage);
	return err;
}

/* The file system holding path, or its nearest existing ancestor. */
static int fs_dev_of(const char *path, dev_t *dev)
{
	char p[PATH_MAX];
	struct stat st;
	if (snprintf(p, sizeof p, "%s", path) >= (int)sizeof p)
		return -1;
	for (;;) {
		if (stat(p, &st) == 0) {
			*dev = st.st_dev;
			return 0;
		}
		char *slash = strrchr(p, '/');
		if (errno != ENOENT || !slash)
			return -1;
		if (slash == p)
			slash[1] = '\0';
		else
			*slash = '\0';
	}
}

/*
 * The disk cache's namespace: the volume's uuid, and after a load
 * "<uuid>.<restore_id>" (meta_volume.h). A restore names objects again
 * that the volume had before it under the same keys (ids of the interval
 * it lost; ids are in a new epoch since, but two guards are better than
 * one): a node's cache of before the restore must never serve them, so
 * it is another namespace, swept (diskcache_sweep_start). EINVAL: the
 * restore_id setting is not one (it names a directory).
 */
static int cache_ns(const struct meta_volume *v, char *ns, size_t cap)
{
	const char *r = v->restore_id;
	if (!*r) {
		snprintf(ns, cap, "%s", v->uuid);
		return 0;
	}
	if (strspn(r, "0123456789abcdef") != strlen(r))
		return EINVAL;
	snprintf(ns, cap, "%s.%s", v->uuid, r);
	return 0;
}

/* The disk cache's limit: --cache-size, or the default. */
static uint64_t cache_size(const struct fs_opts *o)
{
	return o->cache_size == UINT64_MAX ? 10ull << 30 : o->cache_size;
}

static int open_disk_cache(struct fs *fs, const struct fs_opts *o)
{
	uint64_t size = cache_size(o);
	char def[PATH_MAX], ns[128];
	const char *dirs = cache_dirs(o, def);
	if (size == 0)
		return 0;
	if (cache_ns(&fs->vol, ns, sizeof ns)) {
		log_err("volume '%s': its setting restore_id '%s' is not one "
			"(hex digits): no disk cache",
			fs->vol.name, fs->vol.restore_id);
		return o->cache_dir ? EINVAL : 0;
	}
	/* Caching a store whose files share the cache's file system would
	 * write every block read once more to the same disk, for no faster
	 * read. The default directory only: a --cache-dir given is used. */
	dev_t cdev;
	if (!o->cache_dir && fs_dev_of(dirs, &cdev) == 0 &&
	    objstore_on_dev(fs->store, cdev)) {
		log_info("no disk cache: the store is on the file system of %s "
			 "(--cache-dir caches it anyway)",
			 dirs);
		return 0;
	}
	struct diskcache_opts dco = {
	    .dirs = dirs,
	    .ns = ns,
	    .size = size,
	    .free_ratio = o->free_ratio < 0 ? 0.1 : o->free_ratio,
	    .min_age = 600,
	    .cache_writes = 0,
	    .whole_prefix = "packs/",
	    .whole_est = o->pack_size ? o->pack_size : 4u << 20,
	};
	struct objstore *cached;
	int err = diskcache_open(fs->store, &dco, &cached);
	if (err) {
		if (o->cache_dir)
			return err;
		log_warn("no disk cache: cannot use '%s': %s", dirs,
			 gr_strerror(err));
		return 0;
	}
	fs->store = fs->cache = cached; /* it owns the backend now */
	fs->disk_cache = 1;
	log_info("disk cache in %s (%llu MiB)", dirs,
		 (unsigned long long)(size >> 20));
	/* the namespaces of before a load: never served, removed */
	if ((err = diskcache_sweep_start(dirs, fs->vol.uuid, ns, &fs->sweep)))
		log_warn("disk cache: cannot remove the namespaces of this "
			 "volume before its restore: %s",
			 gr_strerror(err));
	return 0;
}

/*
 * The epoch plans (plan.h), over the disk cache: their windows together
 * take --plan-window, by default a quarter of the cache (at most 4 GiB),
 * never more than half of it. Without a disk cache, none (a plan asked
 * for is refused). A failure costs the plans, not the mount.
 */
static void open_plans(struct fs *fs, const struct fs_opts *o)
{
	uint64_t size = cache_size(o), w = o->plan_window;
	struct plan_opts po = {.idle_s = hooks_plan_idle()};
	int err;

	if (!fs->disk_cache)
		return;
	if (!w)
		w = size / 4 < (4ull << 30) ? size / 4 : (4ull << 30);
	if (w > size / 2) {
		log_warn("--plan-window %llu MiB is more than half the disk "
			 "cache: %llu MiB",
			 (unsigned long long)(w >> 20),
			 (unsigned long long)(size >> 21));
		w = size / 2;
	}
	po.window_max = w ? w : 1;
	if ((err = plans_open(fs, &po, &fs->plans)))
		log_warn("no epoch plans on this mount: %s", gr_strerror(err));
}

static int resolve_subdir(struct fs *fs, const char *subdir, uint64_t *out)
{
	uint64_t ino = META_ROOT_INO;
	char *copy = strdup(subdir), *save = NULL;
	if (!copy)
		return ENOMEM;
	int err = 0;
	for (char *p = strtok_r(copy, "/", &save); p;
	     p = strtok_r(NULL, "/", &save)) {
		struct meta_attr a;
		err = meta_lookup(fs->meta, ino, p, &ino, &a);
		if (err)
			break;
		/* a version, or in one: served read-only like any version */
		if (!strcmp(p, META_VERSIONS))
			fs->root_frozen = 1;
		if (a.type != META_DIR) {
			err = ENOTDIR;
			break;
		}
	}
	free(copy);
	*out = ino;
	return err;
}

/* Where the S3 keys of a mount came from (mount_creds). */
enum keys_from { KEYS_NONE, KEYS_ENV, KEYS_STORED };

/*
 * The storage must accept our keys and be this volume's (OBJSTORE_OWNER_KEY):
 * a volume mounted on another volume's bucket would overwrite its objects.
 * Reading the marker checks both in one request. A store that refuses the
 * keys, or cannot be reached, refuses the mount: mounting anyway would
 * leave a file system where every close fails with EIO (and a shell that
 * does not check close reports success), and the ownership would go
 * unchecked. A volume made before the marker existed gets it at its first
 * read-write mount. On failure, msg says why, naming the store.
 */
static int check_owner(struct fs *fs, int read_only, enum keys_from keys,
		       char *msg, size_t cap)
{
	struct objstore_owner ow;
	const char *url = fs->vol.storage;
	int err = objstore_owner_get(fs->store, &ow);

	if (err == 0 && strcmp(ow.uuid, fs->vol.uuid)) {
		snprintf(msg, cap,
			 "storage '%s' belongs to another volume: it holds "
			 "volume '%s' (uuid %s), not '%s' (uuid %s)",
			 url, ow.name, ow.uuid, fs->vol.name, fs->vol.uuid);
		return EEXIST;
	}
	if (err == EINVAL) {
		snprintf(msg, cap,
			 "storage '%s' holds an object '%s' that is not a "
			 "granary volume marker (if the storage is this "
			 "volume's, delete that object: the next read-write "
			 "mount writes the marker again)",
			 url, OBJSTORE_OWNER_KEY);
		return EINVAL;
	}
	if (err == ENOENT && !read_only) {
		snprintf(ow.uuid, sizeof(ow.uuid), "%s", fs->vol.uuid);
		snprintf(ow.name, sizeof(ow.name), "%s", fs->vol.name);
		err = objstore_owner_put(fs->store, &ow);
		if (!err)
			log_info("wrote the volume marker '%s' to '%s'",
				 OBJSTORE_OWNER_KEY, url);
	}
	if (err && err != ENOENT) {
		/* refused keys: say which, never what they are */
		const char *whose = "";
		if (err == OBJSTORE_EAUTH && keys == KEYS_ENV)
			whose = "; the keys came from the environment";
		else if (err == OBJSTORE_EAUTH && keys == KEYS_STORED)
			whose = "; the keys came from the volume settings "
				"(keys in the environment override them)";
		snprintf(msg, cap, "storage '%s' is not usable: %s%s", url,
			 gr_strerror(err), whose);
		return err;
	}
	return 0;
}

/*
 * The S3 keys of a mount: the environment's, else the ones kept in the
 * volume settings at format. The environment wins so that keys can be
 * rotated without a format: revoke the old pair and mount with the new
 * one in the environment. Returns where the keys came from, for messages
 * (which never show the keys themselves).
 */
static enum keys_from mount_creds(const struct fs *fs, struct objstore_creds *c)
{
	if (objstore_env_creds(c) == 0) {
		if (fs->vol.access_key[0])
			log_info("using the S3 keys of the environment, not "
				 "the ones kept in the volume settings");
		return KEYS_ENV;
	}
	if (fs->vol.access_key[0] && fs->vol.secret_key[0]) {
		c->access_key = fs->vol.access_key;
		c->secret_key = fs->vol.secret_key;
		return KEYS_STORED;
	}
	return KEYS_NONE;
}

int vfs_fail(char *msg, size_t cap, int err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, cap, fmt, ap);
	va_end(ap);
	log_err("%s", msg);
	return err ? err : EIO;
}

/* ---- restores of the same store --------------------------------------- */

/*
 * A load starts its volume's ids an epoch past the dump's highest
 * (meta_dump.h), which is past what the lost interval used. Two loads of
 * the same dump (or of dumps of one epoch), each used, would hand out the
 * same ids again: the objects of the first restore's writes, in the store
 * (or in a node's writeback staging, uploaded at its next mount), would
 * be taken for the second's. So the store keeps the restore whose ids it
 * last saw, in the clear beside the volume marker (gc compares blocks/
 * and packs/ only):
 *
 *   meta/restore: "granary restore\nid=<restore_id>\nslices=<floor>\n
 *                  inodes=<floor>\n"
 *
 * The first read-write mount of a restored volume reads it before any id
 * is handed out: another restore at or above this volume's epoch moves
 * this volume's ids to the epoch after it (meta_id_floor_raise), then the
 * marker names this restore. Concurrent first mounts raise to the same
 * floors, which is one raise.
 */
#define RESTORE_KEY "meta/restore"

struct restore_mark {
	char id[META_RESTORE_ID];
	uint64_t slices, inodes;
};

static int restore_mark_get(struct objstore *s, struct restore_mark *r)
{
	void *data = NULL;
	size_t got = 0;
	char body[256];
	int err =
	    objstore_get(s, RESTORE_KEY, 0, sizeof(body) - 1, &data, &got);
	if (err)
		return err;
	memcpy(body, data, got);
	body[got] = 0;
	free(data);
	memset(r, 0, sizeof(*r));
	if (sscanf(body,
		   "granary restore\nid=%23[0-9a-f]\nslices=%" SCNu64
		   "\ninodes=%" SCNu64,
		   r->id, &r->slices, &r->inodes) != 3)
		return EINVAL;
	return 0;
}

static int restore_mark_put(struct objstore *s, const struct restore_mark *r)
{
	char body[256];
	int n = snprintf(body, sizeof(body),
			 "granary restore\nid=%s\nslices=%" PRIu64
			 "\ninodes=%" PRIu64 "\n",
			 r->id, r->slices, r->inodes);
	return objstore_put(s, RESTORE_KEY, body, (size_t)n);
}

/* The check above, on the store itself; msg says what failed. */
static int restore_check(struct fs *fs, char *msg, size_t cap)
{
	struct meta_volume *v = &fs->vol;
	struct restore_mark seen,
	    mine = {.slices = v->slice_floor, .inodes = v->inode_floor};
	int err = restore_mark_get(fs->store, &seen);

	snprintf(mine.id, sizeof(mine.id), "%s", v->restore_id);
	if (err == EINVAL) {
		log_warn("storage '%s': its object '%s' is not a restore "
			 "marker: written again",
			 v->storage, RESTORE_KEY);
		err = ENOENT;
	}
	if (err && err != ENOENT)
		return vfs_fail(
		    msg, cap, err,
		    "storage '%s': cannot read its restore marker: %s",
		    v->storage, gr_strerror(err));
	if (!err && !strcmp(seen.id, mine.id))
		return 0; /* this restore's: checked by an earlier mount */
	if (!err && seen.slices >= mine.slices) {
		/* another restore used this epoch, or a later one */
		uint64_t s = meta_epoch_after(seen.slices, META_SLICE_EPOCH);
		uint64_t i = meta_epoch_after(
		    seen.inodes > mine.inodes ? seen.inodes : mine.inodes,
		    META_INODE_EPOCH);
		if ((err = meta_id_floor_raise(fs->meta, s, i)))
			return vfs_fail(
			    msg, cap, err,
			    "volume '%s': cannot move its ids past "
			    "those of restore %s of the same store: %s",
			    v->name, seen.id, gr_strerror(err));
		log_warn("volume '%s' (restore %s) was loaded again after "
			 "restore %s of the same store used its ids: its ids "
			 "move to slice %" PRIu64 ", inode %" PRIu64,
			 v->name, mine.id, seen.id, s, i);
		v->slice_floor = mine.slices = s;
		v->inode_floor = mine.inodes = i;
	}
	if ((err = restore_mark_put(fs->store, &mine)))
		return vfs_fail(
		    msg, cap, err,
		    "storage '%s': cannot write its restore marker: %s",
		    v->storage, gr_strerror(err));
	return 0;
}

/* What vfs_open_fs made, in reverse order; NULL fields are skipped. */
static void teardown(struct fs *fs)
{
	metrics_close(fs->metrics); /* reads everything below */
	/* fetches through the cache and the group, reads meta */
	plans_close(fs->plans);
	fs->plans = NULL;
	compactq_close(fs->compactq); /* uses the block store and meta */
	closer_close(fs->closer);
	fs->closer = NULL;
	/* out of the group while the session holds the record; its server
	 * answers until the store closes */
	groupd_close(fs->groupd);
	/* what had to reach Redis did: the session's end waits for no
	 * Redis that is away (its TTL ends it) */
	if (fs->meta)
		meta_set_retry_window(fs->meta, 0);
	if (fs->session)
		meta_session_close(fs->meta);
	wpool_close(fs->pool);
	stage_close(fs->stage); /* before the packer lets the slot go */
	packer_close(fs->packer);
	chunkstore_close(fs->cs);
	objstore_close(fs->store);
	objstore_close(fs->backup_store); /* not handed to backupd */
	diskcache_sweep_stop(fs->sweep);
	meta_close(fs->meta);
	space_free(fs->space);
	quota_free(fs->quota);
	lock_free(fs->locks);
	struct hash_node *h, *next;
	for (h = hash_first(&fs->nodes); h; h = next) {
		struct node *n = hash_entry(h, struct node, hn);
		next = hash_next(&fs->nodes, h);
		chunk_cache_clear(n);
		pthread_mutex_destroy(&n->lock);
		free(n);
	}
	hash_release(&fs->nodes);
	namecache_close(fs->names);
	pthread_mutex_destroy(&fs->table_lock);
	pthread_mutex_destroy(&fs->rc_lock);
	pthread_cond_destroy(&fs->rc_cond);
	free(fs);
}

/*
 * The volume key of an encrypted volume (*crypt 1), unwrapped with the
 * secret the mount was given; a volume that is not encrypted needs none
 * (*crypt 0). Without the right secret the mount is refused, and so is a
 * secret given for a volume that is not encrypted: at best the operator's
 * mistake (another volume's key), at worst a volume whose `crypt` setting
 * was dropped (a load of a doctored dump) and that would write in the
 * clear what the operator means to be sealed.
 */
static int volume_key(struct fs *fs, const struct fs_opts *o,
		      unsigned char key[CRYPT_KEY_LEN], int *crypt, char *msg,
		      size_t cap)
{
	*crypt = 0;
	if (!fs->vol.crypt[0]) {
		if (o->secret)
			return vfs_fail(msg, cap, CRYPT_EPLAIN,
					"volume '%s': %s", fs->vol.name,
					gr_strerror(CRYPT_EPLAIN));
		return 0;
	}
	if (!o->secret)
		return vfs_fail(msg, cap, CRYPT_ENOKEY, "volume '%s': %s",
				fs->vol.name, gr_strerror(CRYPT_ENOKEY));
	int err = crypt_record_open(fs->vol.crypt, o->secret, o->secret_len,
				    fs->vol.uuid, key);
	if (err == EINVAL)
		return vfs_fail(
		    msg, cap, err,
		    "volume '%s': its key record (setting 'crypt') is "
		    "damaged",
		    fs->vol.name);
	if (err)
		return vfs_fail(msg, cap, err, "volume '%s': %s", fs->vol.name,
				gr_strerror(err));
	*crypt = 1;
	log_info("volume '%s' is encrypted: its key is unwrapped",
		 fs->vol.name);
	return 0;
}

/*
 * The store of an encrypted volume's metadata backups (backupd.h): a
 * store of its own (no disk cache; the client's figures count its data
 * alone) that seals with the volume key's key for backups, so that a
 * backup can be neither read nor altered, nor its `crypt` setting
 * dropped, by whoever can write to the store. Made here, where the
 * volume key is at hand; backupd gets it at vfs_started.
 */
static int open_backup_store(struct fs *fs, const struct objstore_creds *creds,
			     const unsigned char key[CRYPT_KEY_LEN])
{
	unsigned char bkey[CRYPT_KEY_LEN];
	struct objstore *raw;
	int err = crypt_key_derive(key, "backup", bkey);
	if (!err)
		err = objstore_open(fs->vol.storage, creds, &raw);
	if (!err)
		err = objstore_crypt_open(raw, bkey, &fs->backup_store);
	explicit_bzero(bkey, sizeof(bkey));
	return err;
}

/* The store and its disk cache, the block store, uploaders, packer and
 * staging; msg says what failed. */
static int open_data(struct fs *fs, const struct fs_opts *o, char *msg,
		     size_t cap)
{
	struct objstore_creds creds = {0};
	enum keys_from keys = mount_creds(fs, &creds);
	unsigned char key[CRYPT_KEY_LEN];
	int crypt = 0;
	/* a wrong key is refused first, before anything is set up */
	int err = volume_key(fs, o, key, &crypt, msg, cap);
	if (err)
		return err;
	err = objstore_open(fs->vol.storage, &creds, &fs->store);
	if (err) {
		explicit_bzero(key, sizeof(key));
		return vfs_fail(msg, cap, err, "cannot open storage '%s': %s",
				fs->vol.storage, gr_strerror(err));
	}
	fs->backend = fs->store;
	char why[2048]; /* the storage URL and two volume names fit */
	err = check_owner(fs, o->read_only, keys, why, sizeof(why));
	if (err)
		return vfs_fail(msg, cap, err, "%s", why);
	/* before any id is handed out: ids of another restore never again */
	if (!o->read_only && fs->vol.restore_id[0] &&
	    (err = restore_check(fs, msg, cap))) {
		explicit_bzero(key, sizeof(key));
		return err;
	}
	/* The store answered: from now on ride out its outages. Not before,
	 * so that a mount of a store that is not there is refused at once. */
	objstore_set_retry_window(fs->store,
				  1000u * (unsigned)(o->io_retry_window >= 0
							 ? o->io_retry_window
							 : FS_IO_RETRY_WINDOW));
	err = open_disk_cache(fs, o);
	if (err) {
		explicit_bzero(key, sizeof(key));
		return vfs_fail(msg, cap, err,
				"cannot use cache directory '%s': %s",
				o->cache_dir, gr_strerror(err));
	}
	if (o->cache_group) {
		/* between the cache and the sealing layer: members hold and
		 * move what the cache holds, ciphertext when sealed */
		char def[PATH_MAX];
		err = groupd_stack(fs, cache_dirs(o, def), cache_size(o), msg,
				   cap);
		if (err) {
			explicit_bzero(key, sizeof(key));
			return err;
		}
	}
	if (crypt && !o->read_only && o->backup_interval &&
	    (err = open_backup_store(fs, &creds, key))) {
		explicit_bzero(key, sizeof(key));
		return vfs_fail(
		    msg, cap, err,
		    "cannot set up the sealing of metadata backups: %s",
		    gr_strerror(err));
	}
	if (crypt) {
		/* above the cache: it keeps what the store keeps, sealed */
		struct objstore *sealed;
		err = objstore_crypt_open(fs->store, key, &sealed);
		explicit_bzero(key, sizeof(key));
		fs->store = sealed; /* NULL on failure: the stack is closed */
		if (err)
			return vfs_fail(msg, cap, err,
					"cannot set up encryption: %s",
					gr_strerror(err));
	}
	struct chunkstore_opts co = {
	    .block_size = fs->vol.block_size,
	    .compress = fs->vol.compress,
	    .mem_cache_bytes =
		o->mem_cache_size ? o->mem_cache_size : 256u << 20,
	    /* as many GETs in flight as a parallel GET of a big object
	       needs to reach the store's bandwidth */
	    .prefetch_threads = o->prefetch < 0 ? 8 : o->prefetch,
	    .staged_get = ccb_staged_get,
	    .staged_block = ccb_staged_block,
	    .staged_drop = ccb_staged_drop,
	    .staged_arg = fs,
	    /* any client may be reading what a writeback client has not
	     * put yet (docs/operations.md) */
	    .block_wait_ms = 15000,
	};
	/* readahead stays well inside the memory cache it fills */
	fs->ra_max = co.mem_cache_bytes / 4 < (64u << 20)
			 ? co.mem_cache_bytes / 4
			 : (64u << 20);
	fs->ra_total = co.mem_cache_bytes / 2;
	err = chunkstore_open(fs->store, &co, &fs->cs);
	if (err)
		return vfs_fail(msg, cap, err, "cannot set up block store: %s",
				gr_strerror(err));
	err =
	    wpool_open(fs->cs, o->max_uploads ? o->max_uploads : 8,
		       o->buffer_size ? o->buffer_size : 300u << 20, &fs->pool);
	if (err)
		return vfs_fail(msg, cap, err, "cannot start uploaders: %s",
				gr_strerror(err));
	if (!o->read_only && !o->no_compact &&
	    (err = compactq_open(fs->meta, fs->cs, &fs->compactq)))
		return vfs_fail(msg, cap, err, "cannot start compaction: %s",
				gr_strerror(err));
	if (!o->pack_max || o->read_only)
		return 0;
	char def[PATH_MAX], stage[PATH_MAX + 64];
	const char *dirs = cache_dirs(o, def);
	int wb = o->writeback;
	/* the first cache directory, beside the cache of the volume */
	snprintf(stage, sizeof(stage), "%.*s/staging-%s",
		 (int)strcspn(dirs, ":"), dirs, fs->vol.uuid);
	struct packer_opts po = {
	    .pack_size = o->pack_size ? o->pack_size : 4u << 20,
	    .window_ms = (unsigned)(o->pack_window_ms >= 0 ? o->pack_window_ms
				    : wb		   ? 2000
							   : 10),
	    .compress = fs->vol.compress,
	    .stage_dir = wb ? stage : NULL,
	    .uploaders = 4,
	    .max_staged = 64,
	};
	struct packer_cbs pc = {fs, pcb_new_id, pcb_total,
				wb ? pcb_staged : NULL};
	err = packer_open(fs->store, &po, &pc, &fs->packer);
	if (err)
		return vfs_fail(msg, cap, err, "cannot set up packing%s: %s",
				wb ? " (writeback staging)" : "",
				gr_strerror(err));
	/* a packed slice is one frame, smaller than a pack */
	uint32_t pmax = o->pack_max;
	if (pmax > fs->vol.block_size)
		pmax = fs->vol.block_size;
	if (pmax > po.pack_size / 2)
		pmax = po.pack_size / 2;
	wpool_set_packer(fs->pool, fs->packer, pmax);
	fs->writeback = wb;
	if (wb && (err = open_stage(fs, o)))
		return vfs_fail(msg, cap, err,
				"cannot set up writeback staging of big files: "
				"%s",
				gr_strerror(err));
	return 0;
}

int vfs_open_fs(const struct fs_opts *o, struct fs **out, char *msg, size_t cap)
{
	struct fs *fs = calloc(1, sizeof(*fs));
	char url[1024];
	int err;

	if (!fs)
		return vfs_fail(msg, cap, ENOMEM, "out of memory");
	fs->o = o;
	fs->read_only = o->read_only;
	fs->attr_timeout = o->attr_timeout >= 0 ? o->attr_timeout
			   : o->read_only	? 3600
						: 1;
	fs->entry_timeout = o->entry_timeout >= 0 ? o->entry_timeout
			    : o->read_only	  ? 3600
						  : 1;
	fs->direct_read = o->direct_read ? o->direct_read : 64ull << 20;
	pthread_mutex_init(&fs->table_lock, NULL);
	pthread_mutex_init(&fs->rc_lock, NULL);
	pthread_cond_init(&fs->rc_cond, NULL);
	if (hash_init(&fs->nodes, 12)) {
		err = vfs_fail(msg, cap, ENOMEM, "out of memory");
		goto fail;
	}
	if (o->read_only) {
		struct namecache_opts no = {
		    .max_bytes = o->name_cache_size,
		    .ttl_ns = (int64_t)(fs->entry_timeout * 1e9)};
		err = namecache_open(&no, &fs->names);
		if (err) {
			err =
			    vfs_fail(msg, cap, err,
				     "cannot make a name cache of %llu bytes: "
				     "%s",
				     (unsigned long long)o->name_cache_size,
				     gr_strerror(err));
			goto fail;
		}
	}
	meta_url_redact(o->meta_url, url, sizeof(url));
	struct meta_opts mo = {.read_only = o->read_only};
	/* tests only: a shorter session TTL (60 s) after which a dead
	 * client's opens and locks go */
	mo.session_ttl = (int)hooks_session_ttl();
	err = meta_open(o->meta_url, &mo, &fs->meta);
	if (err) {
		err = vfs_fail(msg, cap, err, "cannot open metadata '%s': %s",
			       url, gr_strerror(err));
		goto fail;
	}
	err = meta_load_volume(fs->meta, &fs->vol);
	if (err) {
		err =
		    vfs_fail(msg, cap, err, "cannot load volume from '%s': %s",
			     url, gr_strerror(err));
		goto fail;
	}
	err = lock_open(&fs->locks);
	if (err) {
		err = vfs_fail(msg, cap, err, "out of memory");
		goto fail;
	}
	err = space_open(fs->read_only ? 0 : fs->vol.capacity, "the volume",
			 space_usage, fs, &fs->space);
	if (err) {
		err = vfs_fail(msg, cap, err, "out of memory");
		goto fail;
	}
	err = quota_open(fs->meta, fs->read_only, &fs->quota);
	if (err) {
		err = vfs_fail(msg, cap, err,
			       "cannot read the quotas of '%s': %s", url,
			       gr_strerror(err));
		goto fail;
	}
	err = open_data(fs, o, msg, cap);
	if (err)
		goto fail;
	fs->root = META_ROOT_INO;
	if (o->subdir && *o->subdir) {
		err = resolve_subdir(fs, o->subdir, &fs->root);
		if (err) {
			err = vfs_fail(msg, cap, err,
				       "cannot mount subdirectory '%s': %s",
				       o->subdir, gr_strerror(err));
			goto fail;
		}
	}
	/* a load under it (granary load) stops this client: volume_gone */
	meta_session_watch(fs->meta, &fs->vol, volume_gone, fs);
	err = meta_session_open(fs->meta, o->mountpoint);
	if (err) {
		err = vfs_fail(msg, cap, err, "cannot register session: %s",
			       gr_strerror(err));
		goto fail;
	}
	fs->session = 1;
	/* Redis answered: from now on ride out its restarts. Not before, so
	 * that a mount of a Redis that is not there is refused at once. */
	meta_set_retry_window(fs->meta, o->meta_retry_window >= 0
					    ? o->meta_retry_window
					    : FS_META_RETRY_WINDOW);
	if ((err = groupd_start(fs, msg, cap)))
		goto fail;
	open_plans(fs, o);
	err = metrics_open(fs, msg, cap);
	if (err)
		goto fail;
	/* without it, each release is a round trip of its own */
	if (!o->read_only && closer_open(fs->meta, CLOSE_DELAY_MS, reclaim_soon,
					 fs, &fs->closer))
		log_warn("cannot start the closer thread: releasing files one "
			 "by one");
	*out = fs;
	return 0;
fail:
	teardown(fs);
	return err;
}

void vfs_set_kernel(struct fs *fs, const struct vfs_kernel *k)
{
	fs->kern = *k;
}

void vfs_started(struct fs *fs)
{
	if (fs->read_only)
		return;
	if (pthread_create(&fs->reclaimer, NULL, reclaimer_main, fs) == 0)
		fs->reclaimer_running = 1;
	int64_t every = fs->o->backup_interval;
	if (every) {
		/* a store of its own: no disk cache, and the client's
		 * figures (granary.stats) count its data alone; an encrypted
		 * volume's seals (open_backup_store) */
		struct objstore_creds creds = {0};
		struct objstore *s = fs->backup_store;
		int err = 0;
		fs->backup_store = NULL;
		mount_creds(fs, &creds);
		if (!s)
			err = objstore_open(fs->vol.storage, &creds, &s);
		if (!err)
			err = backupd_open(fs->meta, s,
					   every < 0 ? BACKUP_INTERVAL : every,
					   fs->o->backup_keep, &fs->backupd);
		if (err) {
			objstore_close(s);
			log_warn("no metadata backups from this client: %s",
				 gr_strerror(err));
		}
	}
}

void vfs_close_fs(struct fs *fs)
{
	if (!fs)
		return;
	backupd_close(fs->backupd); /* a backup under way is cut short */
	fs->backupd = NULL;
	vfs_flush_all(fs); /* destroy flushed already unless the kernel died */
	closer_close(fs->closer); /* its releases may free data to reclaim */
	fs->closer = NULL;
	if (fs->reclaimer_running) {
		pthread_mutex_lock(&fs->rc_lock);
		fs->stopping = 1;
		pthread_cond_signal(&fs->rc_cond);
		pthread_mutex_unlock(&fs->rc_lock);
		pthread_join(fs->reclaimer, NULL);
	}
	teardown(fs);
}

int vfs_read_only(const struct fs *fs)
{
	return fs->read_only;
}

uint64_t vfs_direct_read(const struct fs *fs)
{
	return fs->direct_read;
}

const char *vfs_volume_name(const struct fs *fs)
{
	return fs->vol.name;
}
