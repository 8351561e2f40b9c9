/*
 * ctl.c - xattrs, and the control plane that rides on them: the virtual
 * xattrs "granary.*" through which the tools ask the client serving a
 * mount for what no POSIX call says (stats, sync, cache and evict for
 * warmup, snapshot, versions), with the checks of who may ask.
 *
 * Permissions of the control operations. Each stands for POSIX operations
 * and asks of the caller (uid, gid, supplementary groups; root: nothing)
 * what they would; the kernel's own check of the xattr call (read for a
 * get, write for a set, on the inode asked; default_permissions) comes
 * first. docs/operations.md has the same table with the reasons.
 *
 *   name (get/set, on)          stands for            the caller needs
 *   granary.stats (get, any)    reading /proc/...     read on the inode asked
 *                               counters: no file     (the kernel's check)
 *                               named, client-wide;
 *                               latencies (metrics.h)
 *   granary.sync (set|get, any) syncfs(2): any user   nothing more
 *   granary.cache (get, file)   what reads would      read on the file
 *                               reveal by their time
 *   granary.warm (get, file)    reading the file      read on the file
 *   granary.evict (get|set,     posix_fadvise         read on the file (a set
 *                  file)        DONTNEED on a fd      also needs write: kernel)
 *                               open for reading
 *   granary.snapshot (set,      cp -a SRC DIR/NAME    search on the way to SRC,
 *                     DIR)                            read on its files, read
 *                                                     and search on its dirs;
 *                                                     write and search on DIR
 *   granary.version.create      cp -a DIR             read and search as above
 *     (set, DIR)                  DIR/.versions/TAG   on DIR's tree; write and
 *                                                     search on DIR
 *   granary.version.rm (set,    rm -rf of a copy      write and search on DIR;
 *     DIR)                      made for DIR's        a sticky DIR: own the
 *                               writers               version or DIR (EPERM,
 *                                                     meta_version_rm)
 *   granary.version.restore     cp -a DIR to a new    create's; read on TAG's
 *     (set, DIR)                version, rm -rf of    tree; write and search
 *                               DIR's entries, then   on every directory of
 *                               cp -a TAG/. DIR       DIR's tree with entries,
 *                                                     sticky ones: own the
 *                                                     entry or the directory
 *   granary.version:TAG (get,   ls -l of DIR's        read on DIR
 *     DIR)                      versions
 *   granary.batch (set, file    when its fsync        write on the file (the
 *     being written; get: the   comes: a hint that    kernel's, then as last
 *     client's FUSE threads)    delays nothing else   fetched here)
 *   granary.plan* (get|set,     reading the files     read on each file named,
 *     DIR or file)              named, in that order  search on the way; a plan
 *                                                     its maker's (or root's):
 *                                                     plan.h, plan_ctl.c
 *
 * Refusals are EACCES, but the sticky rule's (EPERM, as unlink(2) gives).
 * EPERM, for everyone: the old "<inode> NAME" snapshot form, and a set of
 * a name that is only read (stats, cache, version:TAG).
 *
 * Nothing outside the mount's root (--subdir) can be named: the inodes
 * asked of come from the kernel's lookups below the root, and the one path
 * taken (a snapshot's source) is resolved from the root, without following
 * symlinks (ENOTDIR on the way), "." and ".." refused (EINVAL: the tools
 * send normalized paths). The tools refuse a source on another mount
 * before asking, as rename(2) and link(2) do (EXDEV).
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "meta/meta_snap.h"
#include "meta/meta_trash.h"
#include "fs/data/chunkstore.h"
#include "fs/data/packer.h"
#include "fs/data/slice.h"
#include "fs/data/stage.h"
#include "fs/data/writer.h"
#include "fs/store/diskcache.h"
#include "fs/store/objstore.h"
#include "fs/vfs/compactq.h"
#include "fs/vfs/groupd.h"
#include "fs/vfs/hooks.h"
#include "fs/vfs/metrics.h"
#include "fs/vfs/plan.h"
#include "fs/vfs/vfs_int.h"
#include "lib/log.h"

/* A value handed out malloc'd (vfs_getxattr's contract). */
static int xattr_value(const void *v, size_t n, void **value, size_t *size)
{
	*value = malloc(n ? n : 1);
	if (!*value)
		return ENOMEM;
	memcpy(*value, v, n);
	*size = n;
	return 0;
}

/*
 * Who asks. The control operations arrive as xattrs, which the kernel
 * checks only as xattrs: read (get) or write (set) permission on the inode
 * they are asked of. What they stand for may need more, or other, rights,
 * so each checks the caller itself against the POSIX operations it stands
 * for (the table at the top): uid, gid and supplementary groups; root may
 * do anything.
 */
/* c as the metadata engine takes it: groups[0] the gid, then the
 * supplementary groups */
int caller_get(const struct vfs_caller *vc, struct caller *c)
{
	c->groups = malloc(sizeof(*c->groups) * ((size_t)vc->ngroups + 1));
	if (!c->groups)
		return ENOMEM;
	c->groups[0] = vc->gid;
	for (uint32_t i = 0; i < vc->ngroups; i++)
		c->groups[i + 1] = vc->groups[i];
	c->cred.uid = vc->uid;
	c->cred.ngroups = vc->ngroups + 1;
	c->cred.groups = c->groups;
	return 0;
}

void caller_release(struct caller *c)
{
	free(c->groups);
	c->groups = NULL;
}

/* What the metadata engine checks a copy against: NULL for root. */
static const struct meta_cred *caller_cred(const struct caller *c)
{
	return c->cred.uid == 0 ? NULL : &c->cred;
}

/* May the caller have every bit of want (4 read, 2 write, 1 search) on an
 * inode with attributes a? The owner's bits for its owner, the group's for
 * a member of its group, else the others' (POSIX, no ACLs). */
int caller_may(const struct caller *c, const struct meta_attr *a, unsigned want)
{
	unsigned bits = a->mode & 7;

	if (c->cred.uid == 0)
		return 1;
	if (c->cred.uid == a->uid) {
		bits = (a->mode >> 6) & 7;
	} else {
		for (uint32_t i = 0; i < c->cred.ngroups; i++)
			if (c->cred.groups[i] == a->gid) {
				bits = (a->mode >> 3) & 7;
				break;
			}
	}
	return (bits & want) == want;
}

/*
 * The inode at path ('/'-separated names below the mount's root) as the
 * caller reaches it: search permission on every directory on the way
 * (EACCES). "." and ".." are refused (EINVAL), so nothing outside the
 * mount's root (--subdir) is reached. path is cut up.
 */
static int resolve_as(struct fs *fs, const struct caller *c, char *path,
		      uint64_t *ino)
{
	uint64_t cur = fs->root;
	struct meta_attr a;
	char *save, *name;
	int err = meta_getattr(fs->meta, cur, &a);

	for (name = strtok_r(path, "/", &save); !err && name;
	     name = strtok_r(NULL, "/", &save)) {
		if (!strcmp(name, ".") || !strcmp(name, ".."))
			return EINVAL;
		if (a.type != META_DIR)
			return ENOTDIR;
		if (!caller_may(c, &a, 1))
			return EACCES;
		err = meta_lookup(fs->meta, cur, name, &cur, &a);
	}
	if (!err)
		*ino = cur;
	return err;
}

/* May the caller make entries in directory dir (write and search)? */
static int caller_may_create(struct fs *fs, const struct caller *c,
			     uint64_t dir)
{
	struct meta_attr a;
	int err = meta_getattr(fs->meta, dir, &a);

	if (!err && a.type != META_DIR)
		err = ENOTDIR;
	if (!err && !caller_may(c, &a, 3))
		err = EACCES;
	return err;
}

/* May the caller have want (caller_may) on inode ino (metadata inode)?
 * 0 or EACCES; *a (may be NULL) gets its attributes. */
int caller_may_ino(struct fs *fs, const struct caller *c, uint64_t ino,
		   unsigned want, struct meta_attr *a)
{
	struct meta_attr ta;
	int err = meta_getattr(fs->meta, ino, a ? a : &ta);

	if (!err && !caller_may(c, a ? a : &ta, want))
		err = EACCES;
	return err;
}

/*
 * May the caller remove everything below directory dir (attributes da), as
 * rm -rf of its entries would? Write and search on every directory of the
 * tree that has entries; in a sticky one, the caller owns each entry or
 * the directory. The root's trash is left out: a restore leaves it alone
 * (version_swap). One listing per directory; EACCES.
 */
static int caller_may_empty(struct fs *fs, const struct caller *c, uint64_t dir,
			    const struct meta_attr *da)
{
	struct meta_dirent *ents = NULL;
	size_t n = 0, keep = 0;
	uint64_t trash = 0;
	int err = meta_readdir(fs->meta, dir, 1, &ents, &n);

	if (err)
		return err == ENOENT ? 0 : err; /* gone meanwhile */
	if (dir == META_ROOT_INO)
		err = meta_trash_ino(fs->meta, &trash);
	for (size_t i = 0; trash && i < n; i++)
		keep += ents[i].ino == trash;
	if (!err && n > keep && !caller_may(c, da, 3))
		err = EACCES;
	for (size_t i = 0; !err && i < n; i++) {
		const struct meta_attr *ea = &ents[i].attr;
		if (trash && ents[i].ino == trash)
			continue;
		if ((da->mode & 01000) && c->cred.uid != da->uid &&
		    c->cred.uid != ea->uid)
			err = EACCES;
		else if (ea->type == META_DIR)
			err = caller_may_empty(fs, c, ents[i].ino, ea);
	}
	meta_dirents_free(ents, n);
	return err;
}

/*
 * Virtual xattrs for `granary warmup`: "granary.cache" reads as "CACHED
 * TOTAL" (bytes of the file this node has in its disk cache; holes count
 * as cached), and in a cache group as "CACHED TOTAL INGROUP" (INGROUP:
 * bytes whose block is here or at its owner); setting "granary.evict"
 * drops the file's blocks from this node's cache. In a cache group,
 * reading "granary.warm" has each block of the file fetched into its
 * owner's cache (group_warm; the bytes do not come to this node) and
 * reads as "WARMED TOTAL" (WARMED < TOTAL: some blocks failed, logged).
 */
#define XATTR_CACHE "granary.cache"
#define XATTR_EVICT "granary.evict"
#define XATTR_WARM  "granary.warm"

void chunk_blocks(struct fs *fs, uint32_t idx, const struct meta_slice *vis,
		  size_t nvis, uint64_t length, block_fn fn, void *arg)
{
	uint32_t bs = chunkstore_block_size(fs->cs);

	for (size_t i = 0; i < nvis; i++) {
		const struct meta_slice *e = &vis[i];
		uint64_t end = (uint64_t)idx * META_CHUNK_SIZE + e->pos;
		if (end >= length)
			continue;
		uint32_t len = e->len;
		if (end + len > length)
			len = length - end;
		if (e->pack) {
			/* the pack is cached, or evicted, whole */
			char key[256];
			chunkstore_pack_key(e->pack, key, sizeof(key));
			fn(fs, key, len, arg);
			continue;
		}
		for (uint32_t b = e->off / bs;
		     len && b <= (e->off + len - 1) / bs; b++) {
			uint32_t bstart = b * bs;
			uint32_t blen =
			    e->size - bstart < bs ? e->size - bstart : bs;
			uint32_t lo = e->off > bstart ? e->off : bstart;
			uint32_t hi = e->off + len < bstart + blen
					  ? e->off + len
					  : bstart + blen;
			char key[256];
			chunkstore_key(e->id, b, blen, key, sizeof(key));
			fn(fs, key, hi - lo, arg);
		}
	}
}

/* Call fn for every stored block of the file, with the bytes of the file
 * that block holds. */
static int for_each_block(struct fs *fs, struct node *n, uint64_t length,
			  block_fn fn, void *arg)
{
	struct rctx rc = {fs, n};
	uint32_t last = length ? (length - 1) / META_CHUNK_SIZE : 0;
	for (uint32_t idx = 0; length && idx <= last; idx++) {
		struct meta_slice *raw, *vis;
		size_t nraw, nvis;
		int err = rcb_chunk(&rc, n->ino, idx, &raw, &nraw);
		if (err)
			return err;
		err = slice_resolve(raw, nraw, &vis, &nvis);
		free(raw);
		if (err)
			return err;
		chunk_blocks(fs, idx, vis, nvis, length, fn, arg);
		free(vis);
	}
	return 0;
}

static void count_uncached(struct fs *fs, const char *key, uint64_t bytes,
			   void *arg)
{
	if (!diskcache_contains(fs->cache, key))
		*(uint64_t *)arg += bytes;
}

static void evict_block(struct fs *fs, const char *key, uint64_t bytes,
			void *arg)
{
	(void)bytes;
	(void)arg;
	objstore_evict(fs->store, key);
}

/* A file's block keys, each with the bytes of the file it holds (a key
 * met again at once, as the frames of one pack, counts once). */
struct keyset {
	char **key;
	uint64_t *bytes;
	size_t n, cap;
	int err;
};

static void add_key(struct fs *fs, const char *key, uint64_t bytes, void *arg)
{
	struct keyset *ks = arg;
	(void)fs;
	if (ks->err)
		return;
	if (ks->n && !strcmp(ks->key[ks->n - 1], key)) {
		ks->bytes[ks->n - 1] += bytes;
		return;
	}
	if (ks->n == ks->cap) {
		size_t cap = ks->cap ? 2 * ks->cap : 16;
		char **k = realloc(ks->key, cap * sizeof(*k));
		if (k)
			ks->key = k;
		uint64_t *b = k ? realloc(ks->bytes, cap * sizeof(*b)) : NULL;
		if (b)
			ks->bytes = b;
		if (!k || !b) {
			ks->err = ENOMEM;
			return;
		}
		ks->cap = cap;
	}
	if (!(ks->key[ks->n] = strdup(key))) {
		ks->err = ENOMEM;
		return;
	}
	ks->bytes[ks->n++] = bytes;
}

static void keyset_release(struct keyset *ks)
{
	for (size_t i = 0; i < ks->n; i++)
		free(ks->key[i]);
	free(ks->key);
	free(ks->bytes);
}

/*
 * The file's blocks in the cache group, on GROUPD_FANOUT requests at once:
 * warm them at their owners (val: "WARMED TOTAL"), or say where they are
 * (val: "CACHED TOTAL INGROUP").
 */
static int group_blocks(struct fs *fs, struct node *n, uint64_t length,
			int warm, char *val, size_t cap)
{
	struct keyset ks = {0};
	int err = for_each_block(fs, n, length, add_key, &ks);
	int *res = NULL;

	if (!err)
		err = ks.err;
	if (!err && !(res = calloc(ks.n ? ks.n : 1, sizeof(*res))))
		err = ENOMEM;
	if (err)
		goto release;
	groupd_keys(fs->groupd, warm, (const char *const *)ks.key, ks.n, res);
	uint64_t notcached = 0, away = 0;
	size_t bad = 0, first = 0;
	for (size_t i = 0; i < ks.n; i++) {
		if (warm && res[i] && !bad++)
			first = i;
		if (warm && res[i])
			away += ks.bytes[i];
		if (!warm && (res[i] < 0 || !(res[i] & 1)))
			notcached += ks.bytes[i];
		if (!warm && (res[i] < 0 || !(res[i] & 3)))
			away += ks.bytes[i];
	}
	if (bad)
		log_warn("warmup: %zu of the %zu blocks of inode %llu could "
			 "not be warmed at their owners; the first, '%s': %s",
			 bad, ks.n, (unsigned long long)n->ino, ks.key[first],
			 gr_strerror(res[first]));
	if (warm)
		snprintf(val, cap, "%llu %llu",
			 (unsigned long long)(length - away),
			 (unsigned long long)length);
	else
		snprintf(val, cap, "%llu %llu %llu",
			 (unsigned long long)(length - notcached),
			 (unsigned long long)length,
			 (unsigned long long)(length - away));
release:
	free(res);
	keyset_release(&ks);
	return err;
}

#define XATTR_STATS "granary.stats"
/* Setting (or getting: "") "granary.sync" on any inode waits until every
 * pack and block this client has staged (writeback) is in the store. */
#define XATTR_SYNC "granary.sync"

static int sync_all(struct fs *fs)
{
	int err = packer_sync(fs->packer);
	int berr = stage_sync(fs->stage);
	return err ? err : berr;
}

#define STATS_PAD 8192

/* "granary.stats" on any inode: this client's counters, as JSON (padded
 * with spaces: see the end). */
static int stats_text(struct fs *fs, void **value, size_t *size)
{
	struct objstore_stats st;
	struct chunkstore_stats cs;
	struct diskcache_stats dc = {0};
	struct packer_stats ps = {0};
	struct stage_stats bs = {0};
	struct compactq_stats cq = {0};
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return ENOMEM;

	if (fs->packer)
		packer_get_stats(fs->packer, &ps);
	if (fs->stage)
		stage_get_stats(fs->stage, &bs);
	if (fs->compactq)
		compactq_get_stats(fs->compactq, &cq);

	objstore_get_stats(fs->backend, &st);
	chunkstore_get_stats(fs->cs, &cs);
	if (fs->disk_cache)
		diskcache_get_stats(fs->cache, &dc);
	fprintf(
	    f,
	    "{\"store\": {\"gets\": %llu, \"get_bytes\": %llu, \"puts\": "
	    "%llu, \"put_bytes\": %llu, \"dels\": %llu, \"errors\": %llu, "
	    "\"retries\": %llu, \"gave_up\": %llu, \"syncs\": %llu}, "
	    "\"memory_cache\": {\"hits\": %llu, \"misses\": %llu, "
	    "\"corrupt\": %llu, \"prefetched\": %llu}, "
	    "\"disk_cache\": {\"enabled\": %s, \"hits\": %llu, \"misses\": "
	    "%llu, \"fills\": %llu, \"fill_skips\": %llu, \"fill_inline\": "
	    "%llu, \"evictions\": %llu, \"evict_demoted\": %llu, "
	    "\"evict_planned\": %llu, \"fill_ranked_out\": %llu, "
	    "\"demoted\": %llu, \"evicted\": "
	    "%llu, \"bad_entries\": %llu, \"flight_waits\": %llu, "
	    "\"entries\": %llu, \"bytes\": %llu}, \"packs\": {\"enabled\": %s, "
	    "\"writeback\": %s, "
	    "\"put\": %llu, \"frames\": %llu, \"bytes\": %llu, "
	    "\"errors\": %llu, \"staged\": %llu, \"staged_bytes\": %llu, "
	    "\"recovered\": %llu}, \"blocks\": {\"writeback\": %s, "
	    "\"put\": %llu, \"bytes\": %llu, \"direct\": %llu, "
	    "\"dropped\": %llu, \"errors\": %llu, \"staged\": %llu, "
	    "\"staged_bytes\": %llu, \"recovered\": %llu}, "
	    "\"compaction\": {\"queued\": %llu, \"compacted\": %llu, "
	    "\"bytes\": %llu, \"records_dropped\": %llu, \"errors\": "
	    "%llu}, \"quotas\": {\"generation\": %llu}",
	    (unsigned long long)st.gets, (unsigned long long)st.get_bytes,
	    (unsigned long long)st.puts, (unsigned long long)st.put_bytes,
	    (unsigned long long)st.dels, (unsigned long long)st.errors,
	    (unsigned long long)st.retries, (unsigned long long)st.gave_up,
	    (unsigned long long)st.syncs, (unsigned long long)cs.cache_hits,
	    (unsigned long long)cs.cache_misses, (unsigned long long)cs.corrupt,
	    (unsigned long long)cs.prefetched,
	    fs->disk_cache ? "true" : "false", (unsigned long long)dc.hits,
	    (unsigned long long)dc.misses, (unsigned long long)dc.fills,
	    (unsigned long long)dc.fill_skips,
	    (unsigned long long)dc.fill_inline,
	    (unsigned long long)dc.evictions,
	    (unsigned long long)dc.evict_demoted,
	    (unsigned long long)dc.evict_planned,
	    (unsigned long long)dc.fill_ranked_out,
	    (unsigned long long)dc.demoted, (unsigned long long)dc.evicted,
	    (unsigned long long)dc.bad_entries,
	    (unsigned long long)dc.flight_waits, (unsigned long long)dc.entries,
	    (unsigned long long)dc.bytes, fs->packer ? "true" : "false",
	    fs->writeback ? "true" : "false", (unsigned long long)ps.packs,
	    (unsigned long long)ps.frames, (unsigned long long)ps.bytes,
	    (unsigned long long)ps.errors, (unsigned long long)ps.staged_packs,
	    (unsigned long long)ps.staged_bytes,
	    (unsigned long long)ps.recovered, fs->stage ? "true" : "false",
	    (unsigned long long)bs.blocks, (unsigned long long)bs.bytes,
	    (unsigned long long)bs.direct, (unsigned long long)bs.dropped,
	    (unsigned long long)bs.errors, (unsigned long long)bs.staged_blocks,
	    (unsigned long long)bs.staged_bytes,
	    (unsigned long long)bs.recovered, (unsigned long long)cq.queued,
	    (unsigned long long)cq.compacted, (unsigned long long)cq.bytes,
	    (unsigned long long)cq.records_dropped,
	    (unsigned long long)cq.errors,
	    (unsigned long long)quota_generation(fs->quota));
	metrics_json(fs, f);
	fputs("}\n", f);
	/* Spaces up to a multiple of STATS_PAD: a reader asks for the size,
	 * then for the value (getfattr does), and the counters move between
	 * the two; a length that changes only every STATS_PAD bytes keeps
	 * the second call from failing with ERANGE. */
	for (long n = ftell(f); n > 0 && n % STATS_PAD; n++)
		fputc(' ', f);
	if (fclose(f)) {
		free(buf);
		return ENOMEM;
	}
	int err = xattr_value(buf, len, value, size);
	free(buf);
	return err;
}

enum cache_op { CACHE_GET, CACHE_EVICT, CACHE_WARM };

/* The disk cache's share of a file: "CACHED TOTAL" (get; in a group
 * "CACHED TOTAL INGROUP"), drop it (evict; a get of it answers ""), or
 * warm it at the owners in the group ("WARMED TOTAL"). Each needs read
 * on the file. */
static int cache_xattr(struct fs *fs, const struct caller *c, uint64_t ino,
		       enum cache_op op, void **value, size_t *size)
{
	struct meta_attr a;
	int get = op == CACHE_GET;
	int err = caller_may_ino(fs, c, vfs_m_ino(fs, ino), 4, &a);
	if (!err && a.type != META_FILE)
		err = EISDIR;
	if (!err && !fs->disk_cache)
		err = ENOTSUP;
	if (!err && op == CACHE_WARM && !fs->group)
		err = ENOTSUP; /* warmup reads the file instead */
	struct node *n = err ? NULL : node_get(fs, vfs_m_ino(fs, ino), 1);
	if (!err && !n)
		err = ENOMEM;
	if (err)
		return err;
	if (op == CACHE_WARM || (get && fs->group)) {
		char val[80];
		err = group_blocks(fs, n, a.length, op == CACHE_WARM, val,
				   sizeof(val));
		node_unpin(fs, n);
		return err ? err : xattr_value(val, strlen(val), value, size);
	}
	uint64_t uncached = 0;
	err = for_each_block(fs, n, a.length,
			     get ? count_uncached : evict_block, &uncached);
	node_unpin(fs, n);
	if (!err && !get && value)
		return xattr_value("", 0, value, size);
	if (err || !get)
		return err;
	char val[64];
	int len = snprintf(val, sizeof(val), "%llu %llu",
			   (unsigned long long)(a.length - uncached),
			   (unsigned long long)a.length);
	return xattr_value(val, (size_t)len, value, size);
}

#define XATTR_SNAPSHOT "granary.snapshot"

/* Fault injection (hooks.h): meta_redis_test_snapshot_hook is meta's
 * test entry, meta_snapshot with a callback after each step. */
int meta_redis_test_snapshot_hook(struct meta *m, const struct meta_cred *cred,
				  uint64_t src, uint64_t dst_parent,
				  const char *name,
				  struct meta_snapshot_stats *st,
				  void (*hook)(void *, int), void *arg);
static void kill_after(void *arg, int step)
{
	if (step >= *(int *)arg)
		raise(SIGKILL);
}

/*
 * Setting "granary.snapshot" to "/SRC\0NAME" on a directory makes NAME in
 * it a copy-on-write copy of SRC, a path below the mount's root (granary
 * snapshot). The caller needs what cp -a and a create would need: search
 * on every directory to SRC, read on SRC's files and read and search on
 * its directories, write and search on the directory set. The form
 * "<inode> NAME" of granary 0.x named any inode of the volume, whatever
 * the caller may reach: EPERM.
 */
static int snapshot_xattr(const struct vfs_caller *vc, struct fs *fs,
			  uint64_t parent, const char *value, size_t size)
{
	struct meta_snapshot_stats st = {0};
	struct caller c = {0};
	char *buf, *name;
	uint64_t src = 0;
	int err;

	if (fs->read_only || frozen(fs, parent))
		return (EROFS);
	if (size > PATH_MAX + META_NAME_MAX + 1)
		return (ENAMETOOLONG);
	if (size && value[0] >= '0' && value[0] <= '9') {
		log_warn("snapshot refused: the source is named by inode "
			 "number, as granary 0.x did; use 'granary snapshot' "
			 "of this version");
		return (EPERM);
	}
	buf = malloc(size + 1);
	if (!buf)
		return (ENOMEM);
	memcpy(buf, value, size);
	buf[size] = '\0';
	name = memchr(buf, '\0', size);
	err = size && buf[0] == '/' && name && name[1] ? 0 : EINVAL;
	if (!err) {
		name++;
		err = caller_get(vc, &c);
	}
	if (!err)
		err = caller_may_create(fs, &c, vfs_m_ino(fs, parent));
	if (!err)
		err = resolve_as(fs, &c, buf, &src);
	int64_t t0 = mono_ns();
	int steps = hooks_snapshot_kill_after();
	if (!err && steps > 0)
		err = meta_redis_test_snapshot_hook(
		    fs->meta, caller_cred(&c), src, vfs_m_ino(fs, parent), name,
		    &st, kill_after, &steps);
	else if (!err)
		err = meta_snapshot(fs->meta, caller_cred(&c), src,
				    vfs_m_ino(fs, parent), name, &st);
	if (!err)
		log_info("snapshot of inode %llu as '%s' by uid %u: %llu "
			 "files, %llu directories, %llu bytes in %.1f ms",
			 (unsigned long long)src, name, c.cred.uid,
			 (unsigned long long)st.files,
			 (unsigned long long)st.dirs,
			 (unsigned long long)st.bytes,
			 (double)(mono_ns() - t0) / 1e6);
	caller_release(&c);
	free(buf);
	ns_changed(fs);
	return err;
}

/*
 * Dataset versions (granary version), as xattrs of a directory DIR:
 *   set "granary.version.create"  = "TAG" or "TAG\0MESSAGE"
 *   set "granary.version.rm"      = "TAG"
 *   set "granary.version.restore" = "TAG\0SAVE_TAG"
 *   get "granary.version:TAG"     = lines "key=value": tag, top, created,
 *       files, dirs, others, bytes, and last msg (the rest of the value)
 * DIR/.versions lists the tags.
 */
#define XATTR_VERSION_SET "granary.version."
#define XATTR_VERSION_GET "granary.version:"

/* One version operation on directory dir (see above) by cred. */
static int version_do(struct fs *fs, const struct meta_cred *cred, uint64_t dir,
		      const char *op, const char *tag, const char *arg)
{
	struct meta_snapshot_stats st = {0};
	int64_t t0 = mono_ns();
	int err;

	if (!strcmp(op, "create")) {
		err = meta_version_create(fs->meta, cred, dir, tag, arg, &st);
		if (!err)
			log_info("version '%s' of inode %llu: %llu files, %llu "
				 "bytes in %.1f ms",
				 tag, (unsigned long long)dir,
				 (unsigned long long)st.files,
				 (unsigned long long)st.bytes,
				 (double)(mono_ns() - t0) / 1e6);
		return err;
	}
	if (!strcmp(op, "rm")) {
		uint64_t vdir;
		err = meta_version_rm(fs->meta, cred, dir, tag);
		/* gone for this node's kernel at once, not after its entry
		 * timeout (another thread's lock on DIR/.versions is never
		 * held waiting for this request) */
		if (!err && fs->kern.inval_entry &&
		    !meta_lookup(fs->meta, dir, META_VERSIONS, &vdir, NULL))
			fs->kern.inval_entry(fs->kern.arg, vfs_f_ino(fs, vdir),
					     tag);
		return err;
	}
	if (strcmp(op, "restore"))
		return EOPNOTSUPP;
	if (!arg || !*arg)
		return EINVAL;
	err = meta_version_restore(fs->meta, cred, dir, tag, arg);
	if (!err)
		log_info("inode %llu restored to version '%s' (what it was is "
			 "version '%s') in %.1f ms",
			 (unsigned long long)dir, tag, arg,
			 (double)(mono_ns() - t0) / 1e6);
	return err;
}

/* A version of DIR is made, removed or restored by whoever may create in
 * DIR; create and restore copy trees, which the caller must be able to
 * read (see snapshot_xattr); restore also empties DIR's tree, which the
 * caller must be able to (caller_may_empty). */
static int version_set(const struct vfs_caller *vc, struct fs *fs, uint64_t ino,
		       const char *op, const char *value, size_t size)
{
	uint64_t dir = vfs_m_ino(fs, ino);
	struct caller c = {0};
	char *tag, *arg;
	int err;

	if (fs->read_only || frozen(fs, ino))
		return EROFS;
	tag = malloc(size + 2); /* "TAG\0ARG\0" even when ARG is missing */
	if (!tag)
		return ENOMEM;
	memcpy(tag, value, size);
	tag[size] = tag[size + 1] = '\0';
	arg = memchr(tag, '\0', size) ? tag + strlen(tag) + 1 : NULL;
	err = caller_get(vc, &c);
	if (!err)
		err = caller_may_create(fs, &c, dir);
	if (!err && !strcmp(op, "restore") && c.cred.uid != 0) {
		struct meta_attr da;
		err = meta_getattr(fs->meta, dir, &da);
		if (!err)
			err = caller_may_empty(fs, &c, dir, &da);
	}
	if (!err)
		err = version_do(fs, caller_cred(&c), dir, op, tag, arg);
	caller_release(&c);
	free(tag);
	ns_changed(fs);
	return err;
}

/* The record of a version: read on DIR, as listing DIR's versions. */
static int version_get(struct fs *fs, const struct caller *c, uint64_t ino,
		       const char *tag, void **value, size_t *size)
{
	struct meta_version *v;
	char *text;
	int err = caller_may_ino(fs, c, vfs_m_ino(fs, ino), 4, NULL), n;

	if (!err)
		err = meta_version_get(fs->meta, vfs_m_ino(fs, ino), tag, &v);
	if (err)
		return err == ENOENT ? ENODATA : err;
	n = asprintf(&text,
		     "tag=%s\ntop=%llu\ncreated=%lld\nfiles=%llu\ndirs=%llu\n"
		     "others=%llu\nbytes=%llu\nmsg=%s",
		     v->tag, (unsigned long long)v->top, (long long)v->created,
		     (unsigned long long)v->st.files,
		     (unsigned long long)v->st.dirs,
		     (unsigned long long)v->st.others,
		     (unsigned long long)v->st.bytes, v->msg);
	meta_versions_free(v, 1);
	if (n < 0)
		return ENOMEM;
	*value = text;
	*size = (size_t)n;
	return 0;
}

/*
 * system.*: the kernel checks nothing for this namespace (not even write
 * permission) and leaves it to the file system, so the rules are ours,
 * those ext4 has. granary knows no system.* attribute: POSIX ACLs are not
 * supported (the two ACL names read as absent, ENODATA: "no ACL"), and a
 * set of any system.* name is refused with EOPNOTSUPP, as ext4 refuses a
 * name it has no handler for. A system.* name stored by a granary that
 * took any name is still listed and read as before; only the owner of the
 * inode or root may remove it (ext4's rule for its ACLs: owner or
 * CAP_FOWNER; a FUSE request shows the uid alone, so CAP_FOWNER is uid 0
 * here as everywhere in this file), EPERM for anyone else. user.*,
 * trusted.* and security.* are the kernel's to check (default_permissions,
 * CAP_SYS_ADMIN, the security modules), before the request arrives.
 */
#define XATTR_SYSTEM "system."

static int acl_name(const char *name)
{
	return !strcmp(name, "system.posix_acl_access") ||
	       !strcmp(name, "system.posix_acl_default");
}

static int system_name(const char *name)
{
	return !strncmp(name, XATTR_SYSTEM, strlen(XATTR_SYSTEM));
}

/* May caller c remove a system.* xattr of kernel inode ino? 0 or EPERM. */
static int system_may_remove(struct fs *fs, const struct vfs_caller *c,
			     uint64_t ino)
{
	struct meta_attr a;
	int err;

	if (c->uid == 0)
		return 0;
	err = meta_getattr(fs->meta, vfs_m_ino(fs, ino), &a);
	if (!err && a.uid != c->uid)
		err = EPERM;
	return err;
}

/*
 * Xattrs known absent: the kernel asks for security.capability before
 * every write (to drop it, as it drops setuid bits), and `ls -l` asks for
 * security.selinux and system.posix_acl_access of every entry. For an
 * inode this client created, or saw listed by a readdirplus without any
 * xattr, less than the attribute timeout ago, the answer is known without
 * a round trip: none (ENODATA, an empty list); this client's own
 * setxattr/removexattr of it ends the window (xattrs_changed). Another
 * client's setxattr shows after the attribute timeout, the staleness the
 * kernel already accepts for the attributes and the mode bits it checks
 * for the same purpose.
 */
static int xattrs_absent(struct fs *fs, uint64_t ino)
{
	struct node *n = node_get(fs, ino, 0);
	int absent = 0;
	if (!n)
		return 0;
	pthread_mutex_lock(&n->lock);
	absent = mono_ns() < n->noxattr_ns;
	pthread_mutex_unlock(&n->lock);
	node_unpin(fs, n);
	return absent;
}

/* Before and after this client's setxattr/removexattr of ino: the window
 * ends, and no listing read before the change opens it again
 * (node_xattrs_none). */
static void xattrs_changed(struct fs *fs, uint64_t ino, const char *name)
{
	struct node *n = node_get(fs, ino, 0);
	if (!n)
		return;
	pthread_mutex_lock(&n->lock);
	n->noxattr_ns = 0;
	n->xattr_set_ns = mono_ns();
	if (!strcmp(name, XATTR_CAPS))
		n->privs = 1;
	pthread_mutex_unlock(&n->lock);
	node_unpin(fs, n);
}

/*
 * "granary.batch" set to "ID N" (ID hexadecimal, not 0; N 2..4096) on a
 * file being written: its next flush is one of a batch of N writers whose
 * small slices were all written before any flushed (`granary import`
 * through a mount, tools/import_dst.c), so that their pack waits for all
 * of them rather than the pack window (packer.h, packer_put_batch). A get
 * answers the requests the client serves at once (VFS_FUSE_THREADS, in
 * decimal; "" from an older client, of 64 threads at most): the tools
 * ask before they use it, and keep their fsyncs from taking every thread.
 * A file with nothing buffered (empty, or flushed already) is a member
 * that came.
 */
#define XATTR_BATCH	"granary.batch"
#define BATCH_MEMBERS_MAX 4096

static int batch_xattr(struct fs *fs, const struct vfs_caller *vc,
		       uint64_t ino, const void *value, size_t size)
{
	char buf[64], end;
	unsigned long long id;
	unsigned members;
	struct caller c = {0};
	int err;

	if (!value || size == 0 || size >= sizeof(buf))
		return EINVAL;
	memcpy(buf, value, size);
	buf[size] = '\0';
	if (sscanf(buf, "%llx %u%c", &id, &members, &end) != 2 || !id ||
	    members < 2 || members > BATCH_MEMBERS_MAX)
		return EINVAL;
	err = caller_get(vc, &c);
	if (err)
		return err;
	struct packer_batch b = {.id = id, .n = members};
	struct node *n = node_get(fs, vfs_m_ino(fs, ino), 0);
	int known = 0;
	if (n) {
		pthread_mutex_lock(&n->lock);
		if ((known = n->seen)) {
			if (n->attr.type != META_FILE)
				err = EISDIR;
			else if (!caller_may(&c, &n->attr, 2))
				err = EACCES;
			else if (n->writer && writer_dirty(n->writer))
				writer_set_batch(n->writer, id, members);
			else if (fs->packer) /* nothing to pack: it came */
				packer_put_batch(fs->packer, NULL, 0, &b);
		}
		pthread_mutex_unlock(&n->lock);
		node_unpin(fs, n);
	}
	if (!known) { /* nothing written here: a member that came */
		struct meta_attr a;
		err = caller_may_ino(fs, &c, vfs_m_ino(fs, ino), 2, &a);
		if (!err && a.type != META_FILE)
			err = EISDIR;
		if (!err && fs->packer)
			packer_put_batch(fs->packer, NULL, 0, &b);
	}
	caller_release(&c);
	return err;
}

#define XATTR_CTL "granary."
/* the epoch plans' calls (plan.h, plan_ctl.c) */
#define XATTR_PLAN "granary.plan"

int vfs_ctl_wants_groups(const char *name)
{
	return !strncmp(name, XATTR_CTL, strlen(XATTR_CTL));
}

/* A control operation other than snapshot and version.*: set (value NULL)
 * or get. ENODATA for a name that is none (a plain xattr). */
static int ctl_simple(struct fs *fs, const struct vfs_caller *vc, uint64_t ino,
		      const char *name, int get, void **value, size_t *size)
{
	struct caller c = {0};
	int err;

	if (get && !strcmp(name, XATTR_BATCH)) { /* supported, and how */
		char n[16];
		int len = snprintf(n, sizeof(n), "%d", VFS_FUSE_THREADS);
		return xattr_value(n, (size_t)len, value, size);
	}
	if (strcmp(name, XATTR_SYNC) && strcmp(name, XATTR_EVICT) &&
	    strcmp(name, XATTR_STATS) && strcmp(name, XATTR_CACHE) &&
	    strcmp(name, XATTR_WARM) &&
	    strncmp(name, XATTR_VERSION_GET, strlen(XATTR_VERSION_GET)))
		return ENODATA;
	if (!get &&
	    (!strcmp(name, XATTR_STATS) || !strcmp(name, XATTR_CACHE) ||
	     !strcmp(name, XATTR_WARM) ||
	     !strncmp(name, XATTR_VERSION_GET, strlen(XATTR_VERSION_GET))))
		return EPERM; /* read-only, for everyone */
	err = caller_get(vc, &c);
	if (err)
		return err;
	if (!strcmp(name, XATTR_SYNC)) {
		err = sync_all(fs);
		if (!err && get)
			err = xattr_value("", 0, value, size);
	} else if (!strcmp(name, XATTR_EVICT)) {
		err = cache_xattr(fs, &c, ino, CACHE_EVICT, get ? value : NULL,
				  size);
	} else if (!strcmp(name, XATTR_CACHE)) {
		err = cache_xattr(fs, &c, ino, CACHE_GET, value, size);
	} else if (!strcmp(name, XATTR_WARM)) {
		err = cache_xattr(fs, &c, ino, CACHE_WARM, value, size);
	} else if (!strcmp(name, XATTR_STATS)) {
		err = caller_may_ino(fs, &c, vfs_m_ino(fs, ino), 4, NULL);
		if (!err)
			err = stats_text(fs, value, size);
	} else {
		err = version_get(fs, &c, ino, name + strlen(XATTR_VERSION_GET),
				  value, size);
	}
	caller_release(&c);
	return err;
}

int vfs_setxattr(struct fs *fs, const struct vfs_caller *c, uint64_t ino,
		 const char *name, const void *value, size_t size, int flags)
{
	int err;

	if (system_name(name))
		return EOPNOTSUPP;
	if (!strncmp(name, XATTR_PLAN, strlen(XATTR_PLAN))) {
		err = plans_xattr_set(fs->plans, c, c->pid, ino, name, value,
				      size);
		if (err != ENODATA)
			return err;
	}
	if (!strcmp(name, XATTR_SNAPSHOT))
		return snapshot_xattr(c, fs, ino, value, size);
	if (!strcmp(name, XATTR_BATCH))
		return batch_xattr(fs, c, ino, value, size);
	if (!strncmp(name, XATTR_VERSION_SET, strlen(XATTR_VERSION_SET)))
		return version_set(c, fs, ino, name + strlen(XATTR_VERSION_SET),
				   value, size);
	err = ctl_simple(fs, c, ino, name, 0, NULL, NULL);
	if (err != ENODATA)
		return err;
	if (frozen(fs, ino))
		return EROFS;
	xattrs_changed(fs, vfs_m_ino(fs, ino), name);
	err = meta_setxattr(fs->meta, vfs_m_ino(fs, ino), name, value, size,
			    flags);
	/* again: a listing read while the set was under way is older */
	xattrs_changed(fs, vfs_m_ino(fs, ino), name);
	ns_changed(fs);
	return err;
}

static int getxattr_value(struct fs *fs, const struct vfs_caller *c,
			  uint64_t ino, const char *name, void **value,
			  size_t *size)
{
	if (acl_name(name))
		return ENODATA;
	if (!strncmp(name, XATTR_CTL, strlen(XATTR_CTL))) {
		int err = ctl_simple(fs, c, ino, name, 1, value, size);
		if (err != ENODATA)
			return err;
	}
	if (xattrs_absent(fs, vfs_m_ino(fs, ino)))
		return ENODATA;
	return meta_getxattr(fs->meta, vfs_m_ino(fs, ino), name, value, size);
}

int vfs_getxattr(struct fs *fs, const struct vfs_caller *c, uint64_t ino,
		 const char *name, void **value, size_t *size)
{
	void *v = NULL;
	int err;

	/* a probe of a plan's call changes nothing (plan.h) */
	if (!strncmp(name, XATTR_PLAN, strlen(XATTR_PLAN))) {
		err = plans_xattr_get(fs->plans, c, c->pid, ino, name, value,
				      size);
		if (err != ENODATA)
			return err;
	}
	err = getxattr_value(fs, c, ino, name, value ? value : &v, size);
	free(v);
	return err;
}

int vfs_listxattr(struct fs *fs, uint64_t ino, char **names, size_t *size)
{
	if (xattrs_absent(fs, vfs_m_ino(fs, ino))) {
		*names = NULL;
		*size = 0;
		return 0;
	}
	return meta_listxattr(fs->meta, vfs_m_ino(fs, ino), names, size);
}

int vfs_removexattr(struct fs *fs, const struct vfs_caller *c, uint64_t ino,
		    const char *name)
{
	int err;

	if (frozen(fs, ino))
		return EROFS;
	if (system_name(name) && (err = system_may_remove(fs, c, ino)))
		return err;
	xattrs_changed(fs, vfs_m_ino(fs, ino), name);
	err = meta_removexattr(fs->meta, vfs_m_ino(fs, ino), name);
	xattrs_changed(fs, vfs_m_ino(fs, ino), name);
	ns_changed(fs);
	return err;
}
