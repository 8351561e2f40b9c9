/*
 * vfs_int.h - what the files of fs/vfs/ share: the client's state (struct
 * fs), the node table's nodes and the open handles, and the helpers each
 * part uses. Not for use outside fs/vfs/ (the adapter has vfs.h).
 *
 * Locks, in the order they may be taken:
 *   fs->table_lock  (the node table, nlookup, opens, pins)   - leaf w.r.t.
 *                    node->lock: never take node->lock while holding it
 *   node->lock      (writer, length, chunk cache)
 *   writer/pool locks (writer.h)
 *   the quota handle's lock (quota.h): taken under node->lock; never
 *                    held across a round trip
 *   the space gates' locks (space.h: the capacity's, each quota's): leaves,
 *                    taken under node->lock or the quota handle's, one
 *                    at a time; never held across their Redis round trip
 *                    (space_take may make or wait for one with
 *                    node->lock held)
 *   the epoch plans' lock (plans->lock, plan_int.h): a leaf; the disk
 *                    cache's ranker (plans_rank) takes it under the disk
 *                    cache's own lock, so plans never call the disk cache
 *                    (nor the metadata or a store) with it held
 * Writer callbacks (commit) run with node->lock held.
 */
#ifndef GRANARY_VFS_INT_H
#define GRANARY_VFS_INT_H

#include <pthread.h>
#include <stdint.h>

#include "fs/data/readahead.h"
#include "fs/vfs/quota.h"
#include "fs/vfs/vfs.h"
#include "lib/hash.h"
#include "lib/metric.h"
#include "meta/meta.h"
#include "meta/meta_snap.h"
#include "meta/meta_volume.h"

#define CHUNK_CACHE_MAX 64 /* slice lists cached per open node */
#define XATTR_CAPS	"security.capability"

struct chunk_list {
	uint32_t idx;
	struct meta_slice *s;
	size_t n;
};

struct node;
/* Writer callbacks get a small context: the fs and the node. */
struct wctx {
	struct fs *fs;
	struct node *node;
};

struct node {
	uint64_t ino;	     /* volume inode number */
	struct hash_node hn; /* in fs->nodes; protected by fs->table_lock */
	uint64_t nlookup;    /* kernel lookups; protected by fs->table_lock */
	int opens;	     /* open handles; protected by fs->table_lock */
	int pins;	     /* in-flight users; protected by fs->table_lock */
	int meta_open;	     /* registered with meta_file_open; protected by
				fs->table_lock */
	int frozen;	     /* inside a version (DIR/.versions/...): read-only;
				set once; protected by fs->table_lock */
	int trashed;	     /* this client moved it into the trash: open
				descriptors show link count 0 (node_trashed);
				protected by fs->table_lock */
	uint64_t parent;     /* atomic: a directory the kernel last found it
				in (lookup, create, link, rename, readdirplus;
				0: not known): where its quotas are looked up */

	pthread_mutex_t lock;	/* after table_lock's release, before writer */
	struct writer *writer;	/* protected by lock; NULL until first write */
	struct wctx wctx;	/* the writer's callback argument */
	uint64_t length;	/* protected by lock: last length we know */
	int seen;		/* protected by lock: mtime/length are valid */
	struct meta_attr attr;	/* protected by lock: as last fetched */
	int64_t attr_ns;	/* protected by lock: when (monotonic) */
	uint64_t gen;		/* protected by lock: bumped on invalidation */
	int64_t noxattr_ns;	/* protected by lock: see xattrs_absent */
	int64_t xattr_set_ns;	/* protected by lock: this client's last
				   setxattr or removexattr of it */
	struct meta_attr dattr; /* protected by lock: see dir_attr_get */
	int64_t dattr_ns;	/* written under lock, read atomically: when
				   (0: none) */
	uint64_t dattr_gen;	/* protected by lock: fs->ns_gen then */
	struct chunk_list cc[CHUNK_CACHE_MAX]; /* protected by lock */
	size_t ncc;			       /* protected by lock */
	int dio;   /* protected by lock: written past the page cache since an
		      open last dropped it (see file_open) */
	int privs; /* protected by lock: this client may have given it a
		      set-id bit or a file capability since a direct_io
		      open found none (see dio_allowed) */
	uint64_t taken; /* protected by lock: bytes fs->space accepted for
			   its buffered writes, not committed yet */
	struct quota_chain qc; /* protected by lock: the quotas that taken
				  counts in (node_quota_chain), the chain
				  its commits charge */
	uint64_t wend;	/* atomic, written under lock: one past the end of
			   the writes buffered and not committed (0: none);
			   stat reads it without the lock, which a flush
			   holds across its uploads and commit */

	/* what the kernel was handed of a file's attributes (KATTR_*,
	 * node_kattr_note); protected by lock */
	int kstate;
	struct meta_attr kattr;
};

struct fs {
	const struct fs_opts *o;
	struct meta *meta;
	/* What reads and writes go through: the store, the disk cache over
	 * it if any, and the sealing store over both if the volume is
	 * encrypted (so the cache holds ciphertext). backend and cache are
	 * the layers below, for their counters; not owned. */
	struct objstore *store;
	struct objstore *backend; /* the store itself */
	struct objstore *cache;	  /* the disk cache, or NULL */
	int disk_cache;		  /* cache is set */
	/* in a cache group: the group store over the disk cache (below the
	 * sealing layer), and the membership (groupd.h); NULL: none */
	struct objstore *group;
	struct groupd *groupd;

	/* the cache's namespaces of before a restore, being removed */
	struct diskcache_sweep *sweep;

	uint64_t ra_max;	/* readahead window cap, bytes */
	/* Readahead of all open files together stays within ra_total (half
	 * the memory cache it fills, so no file's blocks are evicted before
	 * they are read); each of the ra_streams files reading sequentially
	 * now gets an equal share. ra_streams: __atomic. */
	uint64_t ra_total;
	uint64_t ra_streams;
	struct chunkstore *cs;
	struct compactq *compactq; /* background compaction; NULL: none */
	struct backupd *backupd;   /* metadata backups; NULL: none */
	/* an encrypted volume's store for backupd, sealing with the
	 * backups' key; handed to backupd at vfs_started; or NULL */
	struct objstore *backup_store;
	struct wpool *pool;
	struct packer *packer; /* NULL: packing off */
	struct stage *stage;   /* writeback: blocks of big files; or NULL */
	int writeback;	       /* packs and blocks are staged first */
	struct meta_volume vol;
	struct space *space; /* the volume's capacity, for every write */
	struct quota *quota; /* the directory quotas (quota.h) */
	uint64_t root;	     /* volume inode served as FUSE_ROOT_ID */
	int root_frozen;     /* --subdir inside a version: read-only */
	int any_frozen;	     /* atomic: some node was ever marked frozen */
	int any_trashed;     /* atomic: some node was ever marked trashed */
	uint64_t trash_ino;  /* atomic: the volume's trash (META_TRASH at
				the root); 0: none known yet */
	int64_t purge_next;  /* reclaimer thread only: the next turn at the
				trash's purge (mono_ns) */
	double attr_timeout, entry_timeout;
	int read_only;
	struct vfs_kernel kern; /* set before the first request */
	uint64_t direct_read;	/* read-only opens of files this long bypass
				   the page cache once the kernel maps them
				   shared (kern.dio_mmap); UINT64_MAX: never */
	uint64_t ns_gen;	/* atomic: bumped by every change through this
				   client but a create, an unlink, a rename
				   of no directory and a file's setattr
				   (see dir_attr_get) */

	/* read-only clients: names seen by lookups and readdirplus, kept for
	 * the entry timeout so that a kernel that dropped its dentries
	 * (memory pressure) looks them up again without a round trip.
	 * NULL: off. Thread-safe (its locks are leaves). */
	struct namecache *names;

	pthread_mutex_t table_lock;
	struct hash nodes; /* struct node by ino; protected by table_lock */

	struct closer *closer; /* releases of closed files; NULL: at once */

	int session; /* registered with meta_session_open */
	struct vfs_locks *locks; /* the owners of POSIX locks (lock.c) */
	pthread_t reclaimer;
	int reclaimer_running;
	pthread_mutex_t rc_lock; /* leaf */
	pthread_cond_t rc_cond;	 /* signalled on stop and on new garbage */
	int stopping;		 /* protected by rc_lock */

	/* the kernel's requests by kind (vfs_op_done; lib/metric.h atomics),
	 * and what serves them to operators (metrics.h); NULL: not yet */
	/* the epoch plans (plan.h); NULL: none (no disk cache) */
	struct plans *plans;

	struct fs_opstat {
		uint64_t count, errors, bytes;
		struct metric_hist lat;
	} ops[VFS_OP_N];
	struct metrics *metrics;
};

/* lock.c: what it keeps of the locks this client granted */
struct vfs_locks;
int lock_open(struct vfs_locks **out); /* 0 or ENOMEM */
void lock_free(struct vfs_locks *l);   /* NULL-safe */
/* Open file h is released: the POSIX locks of its owners that never
 * closed it end (open file description locks, F_OFD_SETLK). */
void lock_fh_release(struct fs *fs, struct vfs_fh *h);

struct fh_owner;
struct vfs_fh {
	struct node *node;
	/* the owners that set POSIX locks through this open file (lock.c);
	 * protected by fs->locks's lock */
	struct fh_owner *owners;
	int flags;
	int dio;		 /* opened with direct_io */
	pthread_mutex_t ra_lock; /* leaf; protects ra */
	struct readahead ra;
};

struct vfs_dh {
	pthread_mutex_t lock; /* protects the fields below */
	int loaded, plus;
	int64_t load_ns; /* when ents were read (monotonic) */
	struct meta_dirent *ents;
	size_t n;
};

/* ---- node table (node.c) ---- */
uint64_t vfs_m_ino(struct fs *fs, uint64_t ino); /* kernel -> volume */
uint64_t vfs_f_ino(struct fs *fs, uint64_t ino); /* volume -> kernel */
struct node *node_get(struct fs *fs, uint64_t ino, int create); /* pinned */
void node_unpin(struct fs *fs, struct node *n);			/* NULL-safe */
/* parent: the volume directory it was found in (0: not known) */
void node_lookup_ref(struct fs *fs, uint64_t ino, const struct meta_attr *a,
		     int frozen, uint64_t parent);
void node_set_parent(struct fs *fs, uint64_t ino, uint64_t parent);
/* ino had no xattr when the volume was asked at seen_ns (monotonic):
 * known for the attribute timeout (ctl.c xattrs_absent), unless this
 * client changed its xattrs since */
void node_xattrs_none(struct fs *fs, uint64_t ino, int64_t seen_ns);
uint64_t node_parent(struct fs *fs, uint64_t ino); /* 0: not known */
void node_forget(struct fs *fs, uint64_t ino, uint64_t nlookup);
int frozen(struct fs *fs, uint64_t ino);	     /* kernel ino */
void node_mark_trashed(struct fs *fs, uint64_t ino); /* volume ino */
int node_trashed(struct fs *fs, uint64_t ino);	     /* volume ino */
void chunk_cache_clear(struct node *n);
void node_note_attr(struct node *n, const struct meta_attr *a);
int node_unchanged(const struct node *n, const struct meta_attr *a);
/* what the kernel holds of a file's attributes (close-to-open) */
enum { KATTR_NONE, KATTR_ONE, KATTR_MIXED };
void node_kattr_note(struct node *n, const struct meta_attr *a); /* locked */
void node_kattr_hand(struct fs *fs, uint64_t ino, const struct meta_attr *a);
int node_kattr_stale(struct node *n, const struct meta_attr *a); /* locked */
int64_t mono_ns(void);
void ns_changed(struct fs *fs);
void dir_attr_note(struct fs *fs, uint64_t dir, const struct meta_attr *pa,
		   uint64_t gen);
int dir_attr_get(struct fs *fs, uint64_t ino, struct meta_attr *a,
		 double *left);
mode_t type_bits(uint8_t type);
void attr_to_stat(struct fs *fs, uint64_t ino, const struct meta_attr *a,
		  uint64_t length, struct stat *st);
uint64_t visible_length(struct fs *fs, uint64_t ino, const struct meta_attr *a);
/* fill e for ino and count the kernel's lookup of it */
void entry_take(struct fs *fs, uint64_t parent, uint64_t ino,
		const struct meta_attr *a, uint64_t length, int frozen,
		struct vfs_entry *e);

/* ---- the data path's glue (node.c) ---- */
int node_writer(struct fs *fs, struct node *n, struct writer **out);
int node_flush(struct node *n);
void node_writer_close(struct node *n);
void node_space_drop(struct node *n);
int node_quota_chain(struct fs *fs, struct node *n);
struct rctx {
	struct fs *fs;
	struct node *node;
};
int rcb_chunk(void *arg, uint64_t ino, uint32_t idx, struct meta_slice **s,
	      size_t *n);
void node_cache_chunk0(struct fs *fs, uint64_t ino, const struct meta_slice *s,
		       size_t n);
int pcb_new_id(void *arg, uint64_t *id);
int pcb_total(void *arg, uint64_t pack, uint64_t total, int *dead);
int pcb_staged(void *arg, uint64_t pack, int done);
int scb_staged(void *arg, uint64_t id, uint32_t idx, int done);
int ccb_staged_get(void *arg, uint64_t pack, uint32_t off, uint32_t len,
		   void **data);
int ccb_staged_block(void *arg, uint64_t id, uint32_t idx, void **enc,
		     size_t *n);
void ccb_staged_drop(void *arg, uint64_t id);
int space_usage(void *arg, uint64_t pending, uint64_t *used);

/* ---- who asks, and a file's objects (ctl.c) ---- */
/* The caller as the metadata engine checks it (caller_get: groups[0] the
 * gid, then the supplementary groups; caller_release frees them). */
struct caller {
	struct meta_cred cred;
	uint32_t *groups; /* malloc'd */
};
int caller_get(const struct vfs_caller *vc, struct caller *c);
void caller_release(struct caller *c);
/* May c have every bit of want (4 read, 2 write, 1 search) on an inode
 * with attributes a (POSIX, no ACLs; root: always)? */
int caller_may(const struct caller *c, const struct meta_attr *a,
	       unsigned want);
/* The same of a metadata inode: 0 or EACCES (or the engine's error); *a
 * (may be NULL) gets its attributes. */
int caller_may_ino(struct fs *fs, const struct caller *c, uint64_t ino,
		   unsigned want, struct meta_attr *a);
/* Call fn for every stored object of chunk idx of a file of length bytes
 * (vis: the chunk's visible extents, slice_resolve), with the bytes of
 * the file it holds; a pack once per frame. */
typedef void (*block_fn)(struct fs *fs, const char *key, uint64_t bytes,
			 void *arg);
void chunk_blocks(struct fs *fs, uint32_t idx, const struct meta_slice *vis,
		  size_t nvis, uint64_t length, block_fn fn, void *arg);

/* ---- mount.c ---- */
void reclaim_soon(void *fs); /* data was freed: wake the reclaimer */

/* msg (cap bytes) = the formatted reason, logged at error level; returns
 * err (EIO for 0). For the steps of a mount that fail it (mount.c,
 * groupd.c). */
int vfs_fail(char *msg, size_t cap, int err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
