/*
 * fuse.c - the FUSE client: low-level FUSE operations over the metadata
 * engine (meta.h) and the data path (writer.h, reader.h, chunkstore.h).
 *
 * The kernel's inode numbers are the volume's inode numbers, except that
 * FUSE_ROOT_ID stands for the mounted root (the volume root, or --subdir).
 * A node table keeps what this client knows about an inode beyond what the
 * kernel caches: its lookup count, open handles, write buffer and a small
 * cache of chunk slice lists (dropped at every open: close-to-open).
 *
 * Locks, in the order they may be taken:
 *   fs->table_lock  (the node table, nlookup, opens, pins)   - leaf w.r.t.
 *                    node->lock: never take node->lock while holding it
 *   node->lock      (writer, length, chunk cache)
 *   writer/pool locks (writer.h)
 *   the space gate's lock (space.h): a leaf, taken under node->lock;
 *                    never held across its Redis round trip (space_take
 *                    may make or wait for one with node->lock held)
 * Writer callbacks (commit) run with node->lock held.
 */
#define FUSE_USE_VERSION 314

#include <errno.h>
#include <malloc.h>
#include <stdarg.h>
#include <stddef.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <limits.h>
#include <linux/fs.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "meta/meta.h"
#include "fs/data/chunkstore.h"
#include "fs/closer.h"
#include "fs/store/codec.h"
#include "fs/store/diskcache.h"
#include "fs/fs.h"
#include "fs/fusedev.h"
#include "lib/log.h"
#include "fs/namecache.h"
#include "fs/store/objstore.h"
#include "fs/data/readahead.h"
#include "fs/data/reader.h"
#include "fs/data/slice.h"
#include "fs/space.h"
#include "fs/data/stage.h"
#include "fs/data/writer.h"

#define CHUNK_CACHE_MAX 64 /* slice lists cached per open node */
#define XATTR_CAPS	"security.capability"
/* The kernel's readahead of a file read through the mount. It caps what
 * init asks for at the 128 KiB default of the mount's backing device, so
 * that is raised too once the mount is up (kernel_readahead()). */
#define KERNEL_RA_BYTES (4u << 20)
#define RECLAIM_BATCH	64
#define CLOSE_DELAY_MS	10 /* a release waits this long for others */

/* ---- state ---------------------------------------------------------- */

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
	uint64_t ino;	   /* volume inode number */
	struct node *next; /* hash chain; protected by fs->table_lock */
	uint64_t nlookup;  /* kernel lookups; protected by fs->table_lock */
	int opens;	   /* open handles; protected by fs->table_lock */
	int pins;	   /* in-flight users; protected by fs->table_lock */
	int meta_open;	   /* registered with meta_file_open; protected by
			      fs->table_lock */
	int frozen;	   /* inside a version (DIR/.versions/...): read-only;
			      set once; protected by fs->table_lock */

	pthread_mutex_t lock;	/* after table_lock's release, before writer */
	struct writer *writer;	/* protected by lock; NULL until first write */
	struct wctx wctx;	/* the writer's callback argument */
	uint64_t length;	/* protected by lock: last length we know */
	int seen;		/* protected by lock: mtime/length are valid */
	struct meta_attr attr;	/* protected by lock: as last fetched */
	int64_t attr_ns;	/* protected by lock: when (monotonic) */
	uint64_t gen;		/* protected by lock: bumped on invalidation */
	int64_t nocaps_ns;	/* protected by lock: see caps_absent */
	struct meta_attr dattr; /* protected by lock: see dir_attr_get */
	int64_t dattr_ns;	/* protected by lock: when (0: none) */
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
};

struct fs {
	const struct fs_opts *o;
	struct meta *meta;
	struct objstore *store; /* the disk cache over the store, if any */
	int disk_cache;		/* store is a diskcache */
	uint64_t ra_max;	/* readahead window cap, bytes */
	/* Readahead of all open files together stays within ra_total (half
	 * the memory cache it fills, so no file's blocks are evicted before
	 * they are read); each of the ra_streams files reading sequentially
	 * now gets an equal share. ra_streams: __atomic. */
	uint64_t ra_total;
	uint64_t ra_streams;
	struct chunkstore *cs;
	struct wpool *pool;
	struct packer *packer; /* NULL: packing off */
	struct stage *stage;   /* writeback: blocks of big files; or NULL */
	int writeback;	       /* packs and blocks are staged first */
	struct meta_volume vol;
	struct space *space; /* the volume's capacity, for every write */
	uint64_t root;	     /* volume inode served as FUSE_ROOT_ID */
	int root_frozen;     /* --subdir inside a version: read-only */
	int any_frozen;	     /* atomic: some node was ever marked frozen */
	double attr_timeout, entry_timeout;
	int read_only;
	struct fuse_session *se;
	struct fusedev dev;   /* the channel's I/O (see fusedev.h) */
	uint64_t direct_read; /* read-only opens of files this long bypass
				 the page cache once dev granted shared mmap;
				 UINT64_MAX: never */
	uint64_t ns_gen;      /* atomic: bumped by every change through this
				 client but a create (see dir_attr_get) */

	/* read-only clients: names seen by lookups and readdirplus, kept for
	 * the entry timeout so that a kernel that dropped its dentries
	 * (memory pressure) looks them up again without a round trip.
	 * NULL: off. Thread-safe (its locks are leaves). */
	struct namecache *names;

	pthread_mutex_t table_lock;
	struct node **buckets;	 /* protected by table_lock */
	size_t nbuckets, nnodes; /* protected by table_lock */

	struct closer *closer; /* releases of closed files; NULL: at once */

	pthread_t reclaimer;
	int reclaimer_running;
	pthread_mutex_t rc_lock; /* leaf */
	pthread_cond_t rc_cond;	 /* signalled on stop and on new garbage */
	int stopping;		 /* protected by rc_lock */

	/* start-up: ready() is called once, after the kernel's INIT was
	 * answered and a statfs through the mount succeeded */
	void (*ready)(void *arg, int err, const char *msg);
	void *ready_arg;
	pthread_mutex_t ready_lock; /* leaf */
	pthread_cond_t ready_cond;
	int inited, loop_done, ready_done; /* protected by ready_lock */
};

struct fh {
	struct node *node;
	int flags;
	int dio;		 /* opened with direct_io */
	pthread_mutex_t ra_lock; /* leaf; protects ra */
	struct readahead ra;
};

struct dirh {
	pthread_mutex_t lock; /* protects the fields below */
	int loaded, plus;
	struct meta_dirent *ents;
	size_t n;
};

static struct fs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static uint64_t m_ino(struct fs *fs, fuse_ino_t ino)
{
	return ino == FUSE_ROOT_ID ? fs->root : ino;
}

static fuse_ino_t f_ino(struct fs *fs, uint64_t ino)
{
	return ino == fs->root ? FUSE_ROOT_ID : ino;
}

/* ---- errors --------------------------------------------------------- */

/* The one place errors become FUSE replies: project codes are EIO. */
static void reply_err(fuse_req_t req, const char *op, int err)
{
	if (err < 0) {
		log_err("%s: %s", op, gr_strerror(err));
		err = EIO;
	}
	fuse_reply_err(req, err);
}

/* ---- node table ----------------------------------------------------- */

static size_t bucket_of(struct fs *fs, uint64_t ino)
{
	return (ino * 0x9E3779B97F4A7C15ull) >> 40 & (fs->nbuckets - 1);
}

static void table_grow(struct fs *fs)
{
	size_t nb = fs->nbuckets * 2;
	struct node **b = calloc(nb, sizeof(*b));
	if (!b)
		return; /* chains just get longer */
	for (size_t i = 0; i < fs->nbuckets; i++) {
		struct node *n = fs->buckets[i], *next;
		for (; n; n = next) {
			next = n->next;
			size_t h =
			    (n->ino * 0x9E3779B97F4A7C15ull) >> 40 & (nb - 1);
			n->next = b[h];
			b[h] = n;
		}
	}
	free(fs->buckets);
	fs->buckets = b;
	fs->nbuckets = nb;
}

/* Find (create) the node of ino and pin it; with table_lock held. */
static struct node *node_get_locked(struct fs *fs, uint64_t ino, int create)
{
	struct node *n;
	for (n = fs->buckets[bucket_of(fs, ino)]; n; n = n->next)
		if (n->ino == ino)
			goto found;
	if (!create)
		return NULL;
	n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	n->ino = ino;
	pthread_mutex_init(&n->lock, NULL);
	if (fs->nnodes >= fs->nbuckets * 2)
		table_grow(fs);
	size_t h = bucket_of(fs, ino);
	n->next = fs->buckets[h];
	fs->buckets[h] = n;
	fs->nnodes++;
found:
	n->pins++;
	return n;
}

static struct node *node_get(struct fs *fs, uint64_t ino, int create)
{
	pthread_mutex_lock(&fs->table_lock);
	struct node *n = node_get_locked(fs, ino, create);
	pthread_mutex_unlock(&fs->table_lock);
	return n;
}

static void chunk_cache_clear(struct node *n)
{
	for (size_t i = 0; i < n->ncc; i++)
		free(n->cc[i].s);
	n->ncc = 0;
	n->gen++;
}

/* Free a node nobody refers to; with table_lock held. */
static void node_maybe_free_locked(struct fs *fs, struct node *n)
{
	if (n->nlookup || n->opens || n->pins)
		return;
	struct node **p = &fs->buckets[bucket_of(fs, n->ino)];
	while (*p != n)
		p = &(*p)->next;
	*p = n->next;
	fs->nnodes--;
	gr_assert(n->writer == NULL);
	chunk_cache_clear(n);
	pthread_mutex_destroy(&n->lock);
	free(n);
}

static void node_unpin(struct fs *fs, struct node *n)
{
	if (!n)
		return;
	pthread_mutex_lock(&fs->table_lock);
	gr_assert(n->pins > 0);
	n->pins--;
	node_maybe_free_locked(fs, n);
	pthread_mutex_unlock(&fs->table_lock);
}

static void node_note_attr(struct node *n, const struct meta_attr *a);

/* The kernel now holds one more lookup of ino, whose attributes were a,
 * found inside a version when frozen. A read-only client keeps the
 * attributes for the next open (see file_open). */
static void node_lookup_ref(struct fs *fs, uint64_t ino,
			    const struct meta_attr *a, int frozen)
{
	pthread_mutex_lock(&fs->table_lock);
	struct node *n = node_get_locked(fs, ino, 1);
	if (n) {
		n->nlookup++;
		n->frozen |= frozen;
		if (frozen)
			__atomic_store_n(&fs->any_frozen, 1, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&fs->table_lock);
	if (!n)
		return;
	if (fs->read_only && a) {
		pthread_mutex_lock(&n->lock);
		node_note_attr(n, a);
		pthread_mutex_unlock(&n->lock);
	}
	node_unpin(fs, n);
}

/*
 * Is the kernel's inode ino inside a version? Versions are read-only: the
 * mark comes from the lookup that made the kernel know the inode (through
 * DIR/.versions, or below a marked directory), and every change to a
 * marked inode, or inside a marked directory, is EROFS.
 */
static int frozen(struct fs *fs, fuse_ino_t ino)
{
	uint64_t vino = m_ino(fs, ino);
	int f = 0;

	if (ino == FUSE_ROOT_ID)
		return fs->root_frozen;
	/* a client that never looked into a version skips the table: the
	 * check runs on every lookup and create */
	if (!__atomic_load_n(&fs->any_frozen, __ATOMIC_RELAXED))
		return 0;
	pthread_mutex_lock(&fs->table_lock);
	for (struct node *n = fs->buckets[bucket_of(fs, vino)]; n; n = n->next)
		if (n->ino == vino) {
			f = n->frozen;
			break;
		}
	pthread_mutex_unlock(&fs->table_lock);
	return f;
}

static void node_forget(struct fs *fs, uint64_t ino, uint64_t nlookup)
{
	pthread_mutex_lock(&fs->table_lock);
	struct node *n = node_get_locked(fs, ino, 0);
	if (n) {
		n->pins--;
		n->nlookup = n->nlookup > nlookup ? n->nlookup - nlookup : 0;
		node_maybe_free_locked(fs, n);
	}
	pthread_mutex_unlock(&fs->table_lock);
}

/* Remember what an attribute reply said, for length and keep_cache. */
static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Remember attributes fresh from the volume; node->lock held. */
static void node_note_attr(struct node *n, const struct meta_attr *a)
{
	n->length = a->length;
	n->attr = *a;
	n->attr_ns = mono_ns();
	n->seen = 1;
}

/* Did the file's data change since node_note_attr? ctime catches what a
 * restored mtime would hide. node->lock held. */
static int node_unchanged(const struct node *n, const struct meta_attr *a)
{
	return n->seen && n->attr.length == a->length &&
	       n->attr.mtime == a->mtime && n->attr.mtimens == a->mtimens &&
	       n->attr.ctime == a->ctime && n->attr.ctimens == a->ctimens;
}

/* ---- attributes ----------------------------------------------------- */

static mode_t type_bits(uint8_t type)
{
	switch (type) {
	case META_DIR:
		return S_IFDIR;
	case META_SYMLINK:
		return S_IFLNK;
	case META_FIFO:
		return S_IFIFO;
	case META_BLK:
		return S_IFBLK;
	case META_CHR:
		return S_IFCHR;
	case META_SOCK:
		return S_IFSOCK;
	default:
		return S_IFREG;
	}
}

static uint8_t meta_type_of(mode_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFDIR:
		return META_DIR;
	case S_IFLNK:
		return META_SYMLINK;
	case S_IFIFO:
		return META_FIFO;
	case S_IFBLK:
		return META_BLK;
	case S_IFCHR:
		return META_CHR;
	case S_IFSOCK:
		return META_SOCK;
	default:
		return META_FILE;
	}
}

static void attr_to_stat(struct fs *fs, uint64_t ino, const struct meta_attr *a,
			 uint64_t length, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = f_ino(fs, ino);
	st->st_mode = type_bits(a->type) | (a->mode & 07777);
	st->st_nlink = a->nlink;
	st->st_uid = a->uid;
	st->st_gid = a->gid;
	st->st_rdev = a->rdev;
	st->st_size = length;
	st->st_blksize = 1 << 20;
	/* the bytes the file holds, not its length: a sparse file's holes
	 * take no blocks (du). Bytes buffered here past the committed
	 * length count already, as delayed allocation counts on ext4. */
	uint64_t stored = a->stored;
	if (length > a->length)
		stored += length - a->length;
	st->st_blocks = (stored + 511) / 512;
	st->st_atim.tv_sec = a->atime;
	st->st_atim.tv_nsec = a->atimens;
	st->st_mtim.tv_sec = a->mtime;
	st->st_mtim.tv_nsec = a->mtimens;
	st->st_ctim.tv_sec = a->ctime;
	st->st_ctim.tv_nsec = a->ctimens;
}

/* Length as this client sees it: buffered writes count. */
static uint64_t visible_length(struct fs *fs, uint64_t ino,
			       const struct meta_attr *a)
{
	uint64_t len = a->length;
	struct node *n = node_get(fs, ino, 0);
	if (!n)
		return len;
	pthread_mutex_lock(&n->lock);
	if (n->writer && writer_dirty(n->writer)) {
		uint64_t end = writer_end(n->writer);
		if (end > len)
			len = end;
	}
	pthread_mutex_unlock(&n->lock);
	node_unpin(fs, n);
	return len;
}

static void reply_entry(fuse_req_t req, struct fs *fs, uint64_t ino,
			const struct meta_attr *a, int frozen)
{
	struct fuse_entry_param e;
	memset(&e, 0, sizeof(e));
	e.ino = f_ino(fs, ino);
	e.generation = 1;
	e.attr_timeout = fs->attr_timeout;
	e.entry_timeout = fs->entry_timeout;
	attr_to_stat(fs, ino, a, visible_length(fs, ino, a), &e.attr);
	node_lookup_ref(fs, ino, a, frozen);
	if (fuse_reply_entry(req, &e) == -ENOENT)
		node_forget(fs, ino,
			    1); /* interrupted: the kernel never saw it */
}

static void reply_attr(fuse_req_t req, struct fs *fs, uint64_t ino,
		       const struct meta_attr *a)
{
	struct stat st;
	attr_to_stat(fs, ino, a, visible_length(fs, ino, a), &st);
	fuse_reply_attr(req, &st, fs->attr_timeout);
}

/*
 * A create makes the kernel drop its copy of the directory's attributes
 * and ask for them (GETATTR) at the next lookup there: one round trip per
 * file of an ingest. The create's script hands out the directory's
 * attributes as it left them; they answer that GETATTR while nothing else
 * changed through this client since (ns_gen, bumped after every other
 * change, before its reply) and for what is left of the attribute timeout
 * after the create, which is all the kernel keeps them: as if the
 * create's reply had carried them. Changes by other clients show after
 * the attribute timeout, as they do everywhere else.
 */
static void ns_changed(struct fs *fs)
{
	__atomic_fetch_add(&fs->ns_gen, 1, __ATOMIC_SEQ_CST);
}

/* gen: fs->ns_gen before the create started */
static void dir_attr_note(struct fs *fs, uint64_t dir,
			  const struct meta_attr *pa, uint64_t gen)
{
	if (gen != __atomic_load_n(&fs->ns_gen, __ATOMIC_SEQ_CST))
		return; /* a change overlapped the create */
	struct node *n = node_get(fs, dir, 0);
	if (!n)
		return;
	pthread_mutex_lock(&n->lock);
	/* of creates that overlapped each other, the last one's */
	if (!n->dattr_ns || n->dattr_gen != gen || pa->ctime > n->dattr.ctime ||
	    (pa->ctime == n->dattr.ctime && pa->ctimens >= n->dattr.ctimens)) {
		n->dattr = *pa;
		n->dattr_ns = mono_ns();
		n->dattr_gen = gen;
	}
	pthread_mutex_unlock(&n->lock);
	node_unpin(fs, n);
}

/* The noted attributes of directory ino, and how long they stay valid. */
static int dir_attr_get(struct fs *fs, uint64_t ino, struct meta_attr *a,
			double *left)
{
	struct node *n = node_get(fs, ino, 0);
	int ok = 0;
	if (!n)
		return 0;
	pthread_mutex_lock(&n->lock);
	int64_t age = mono_ns() - n->dattr_ns;
	int64_t ttl = (int64_t)(fs->attr_timeout * 1e9);
	if (n->dattr_ns && age < ttl &&
	    n->dattr_gen == __atomic_load_n(&fs->ns_gen, __ATOMIC_SEQ_CST)) {
		*a = n->dattr;
		*left = (double)(ttl - age) / 1e9;
		ok = 1;
	}
	pthread_mutex_unlock(&n->lock);
	node_unpin(fs, n);
	return ok;
}

/* ---- data path glue --------------------------------------------------- */

static int wcb_new_id(void *arg, uint64_t *id)
{
	struct wctx *c = arg;
	return meta_new_slice_id(c->fs->meta, id);
}

static int pcb_new_id(void *arg, uint64_t *id)
{
	struct fs *fs = arg;
	return meta_new_slice_id(fs->meta, id);
}

static int pcb_total(void *arg, uint64_t pack, uint64_t total, int *dead)
{
	struct fs *fs = arg;
	return meta_pack_total(fs->meta, pack, total, dead);
}

/* writeback: objects staged here, named for other clients' reclamation */
static int pcb_staged(void *arg, uint64_t pack, int done)
{
	struct fs *fs = arg;
	return done ? meta_staging_done(fs->meta, 'p', pack, 0)
		    : meta_staging_mark(fs->meta, 'p', pack, 0);
}

static int scb_staged(void *arg, uint64_t id, uint32_t idx, int done)
{
	struct fs *fs = arg;
	return done ? meta_staging_done(fs->meta, 'b', id, idx)
		    : meta_staging_mark(fs->meta, 'b', id, idx);
}

/* chunkstore: frames of packs this node has staged but not uploaded */
static int ccb_staged_get(void *arg, uint64_t pack, uint32_t off, uint32_t len,
			  void **data)
{
	struct fs *fs = arg;
	return fs->packer ? packer_staged_get(fs->packer, pack, off, len, data)
			  : ENOENT;
}

/* chunkstore: blocks this node has staged but not uploaded */
static int ccb_staged_block(void *arg, uint64_t id, uint32_t idx, void **enc,
			    size_t *n)
{
	struct fs *fs = arg;
	return stage_get(fs->stage, id, idx, enc, n);
}

static void ccb_staged_drop(void *arg, uint64_t id)
{
	struct fs *fs = arg;
	stage_drop(fs->stage, id);
}

/* Called with node->lock held (from writer_flush / writer_write). */
static int wcb_commit(void *arg, uint64_t ino, const struct meta_chunk_slice *s,
		      size_t n)
{
	struct wctx *c = arg;
	struct meta_attr a;
	int err = meta_write(c->fs->meta, ino, s, n, &a);
	if (err)
		return err;
	uint64_t bytes = 0;
	for (size_t i = 0; i < n; i++)
		if (s[i].s.id)
			bytes += s[i].s.len;
	if (bytes > c->node->taken)
		bytes = c->node->taken;
	c->node->taken -= bytes;
	space_done(c->fs->space, bytes);
	chunk_cache_clear(c->node);
	node_note_attr(c->node, &a);
	return 0;
}

/* The writer of a node, created on first use; node->lock held. */
static int node_writer(struct fs *fs, struct node *n, struct writer **out)
{
	if (!n->writer) {
		n->wctx.fs = fs;
		n->wctx.node = n;
		struct writer_cbs cbs = {.arg = &n->wctx,
					 .new_id = wcb_new_id,
					 .commit = wcb_commit};
		int err = writer_open(fs->pool, n->ino, &cbs, &n->writer);
		if (err)
			return err;
	}
	*out = n->writer;
	return 0;
}

/* What fs->space accepted for a node's writes and no commit took: none
 * of it will be committed (an overwrite counted twice, or data dropped
 * after an error). node->lock held. */
static void node_space_drop(struct node *n)
{
	if (n->taken && n->writer)
		space_drop(n->wctx.fs->space, n->taken);
	n->taken = 0;
}

/* Flush buffered writes of a node; node->lock held. */
static int node_flush(struct node *n)
{
	if (!n->writer || !writer_dirty(n->writer)) {
		node_space_drop(n);
		return 0;
	}
	int err = writer_flush(n->writer);
	node_space_drop(n);
	return err;
}

static void node_writer_close(struct node *n)
{
	node_space_drop(n);
	if (!n->writer)
		return;
	writer_close(n->writer);
	n->writer = NULL;
}

/* reader_chunk_fn: slice lists through the node's cache. */
struct rctx {
	struct fs *fs;
	struct node *node;
};

static int rcb_chunk(void *arg, uint64_t ino, uint32_t idx,
		     struct meta_slice **s, size_t *n)
{
	struct rctx *c = arg;
	struct node *nd = c->node;
	pthread_mutex_lock(&nd->lock);
	for (size_t i = 0; i < nd->ncc; i++) {
		if (nd->cc[i].idx != idx)
			continue;
		size_t bytes = nd->cc[i].n * sizeof(**s);
		*s = malloc(bytes ? bytes : 1);
		if (!*s) {
			pthread_mutex_unlock(&nd->lock);
			return ENOMEM;
		}
		memcpy(*s, nd->cc[i].s, bytes);
		*n = nd->cc[i].n;
		pthread_mutex_unlock(&nd->lock);
		return 0;
	}
	uint64_t gen = nd->gen;
	pthread_mutex_unlock(&nd->lock);

	int err = meta_read_chunk(c->fs->meta, ino, idx, s, n);
	if (err)
		return err;

	/* insert unless invalidated meanwhile (stale insert guard) */
	pthread_mutex_lock(&nd->lock);
	if (nd->gen == gen && nd->ncc < CHUNK_CACHE_MAX) {
		size_t bytes = *n * sizeof(**s);
		struct meta_slice *copy = malloc(bytes ? bytes : 1);
		if (copy) {
			memcpy(copy, *s, bytes);
			nd->cc[nd->ncc].idx = idx;
			nd->cc[nd->ncc].s = copy;
			nd->cc[nd->ncc].n = *n;
			nd->ncc++;
		}
	}
	pthread_mutex_unlock(&nd->lock);
	return 0;
}

/* Keep chunk 0's slice list, fresh from a lookup, in the node's cache. */
static void node_cache_chunk0(struct fs *fs, uint64_t ino,
			      const struct meta_slice *s, size_t n)
{
	struct node *nd = node_get(fs, ino, 1);
	if (!nd)
		return;
	struct meta_slice *copy = malloc(n ? n * sizeof(*s) : 1);
	if (copy) {
		memcpy(copy, s, n * sizeof(*s));
		pthread_mutex_lock(&nd->lock);
		size_t i = 0;
		while (i < nd->ncc && nd->cc[i].idx != 0)
			i++;
		if (i < nd->ncc)
			free(nd->cc[i].s);
		else if (nd->ncc < CHUNK_CACHE_MAX)
			nd->ncc++;
		else
			i = CHUNK_CACHE_MAX; /* full: do without */
		if (i < CHUNK_CACHE_MAX) {
			nd->cc[i] = (struct chunk_list){0, copy, n};
			copy = NULL;
		}
		pthread_mutex_unlock(&nd->lock);
		free(copy);
	}
	node_unpin(fs, nd);
}

/* space_usage_fn: publish our pending bytes; the volume's usedspace plus
 * the other clients' pending bytes */
static int space_usage(void *arg, uint64_t pending, uint64_t *used)
{
	struct fs *fs = arg;
	uint64_t u, others;
	int err = meta_space_usage(fs->meta, pending, &u, &others);
	if (!err)
		*used = u + others;
	return err;
}

/* ---- lifecycle ops -------------------------------------------------- */

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct fs *fs = userdata;
	pthread_mutex_lock(&fs->ready_lock);
	fs->inited = 1;
	pthread_cond_broadcast(&fs->ready_cond);
	pthread_mutex_unlock(&fs->ready_lock);
	conn->want |= FUSE_CAP_ASYNC_READ;
	if (conn->capable & FUSE_CAP_READDIRPLUS)
		conn->want |= FUSE_CAP_READDIRPLUS;
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	if (conn->capable & FUSE_CAP_AUTO_INVAL_DATA)
		conn->want |= FUSE_CAP_AUTO_INVAL_DATA;
	/* page cache is kept across opens only when we say so (keep_cache) */
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	conn->want &= ~FUSE_CAP_ATOMIC_O_TRUNC;
	/* the kernel clears setuid/setgid on write, truncate and chown with
	 * a mode change (a setattr) when we do not claim to handle it */
	conn->want &= ~FUSE_CAP_HANDLE_KILLPRIV;
	/* symlink targets never change: let the kernel cache them */
	if (conn->capable & FUSE_CAP_CACHE_SYMLINKS)
		conn->want |= FUSE_CAP_CACHE_SYMLINKS;
	/* dev saw the kernel's INIT; its reply is sent after this returns */
	if (fs->dev.want && fs->dev.offered)
		log_info("read-only opens of files of %.1f MiB or more read "
			 "past the page cache",
			 (double)fs->direct_read / (1 << 20));
	else if (fs->dev.want)
		log_info("this kernel maps no direct_io file shared (Linux "
			 "6.6 does): every file is read through the page "
			 "cache");
	conn->max_write = 1 << 20;
	conn->max_readahead = KERNEL_RA_BYTES;
	conn->max_background = 64;
	conn->congestion_threshold = 48;
}

static ssize_t dev_read(int fd, void *buf, size_t len, void *userdata)
{
	return fusedev_read(&((struct fs *)userdata)->dev, fd, buf, len);
}

static ssize_t dev_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	return fusedev_writev(&((struct fs *)userdata)->dev, fd, iov, count);
}

/* Before the session loop, so that the kernel's INIT goes through
 * fusedev: only when reads past the page cache are wanted at all. */
static void use_fusedev(struct fs *fs)
{
	if (fs->direct_read == UINT64_MAX)
		return;
	const struct fuse_custom_io io = {.read = dev_read,
					  .writev = dev_writev};
	fs->dev.want = 1;
	if (fuse_session_custom_io(fs->se, &io, fuse_session_fd(fs->se)))
		log_warn("cannot route the FUSE channel's I/O: big files are "
			 "read through the page cache");
}

static void flush_all(struct fs *fs)
{
	/* pin every node with a writer, then flush outside table_lock */
	for (;;) {
		struct node *victim = NULL;
		pthread_mutex_lock(&fs->table_lock);
		for (size_t i = 0; i < fs->nbuckets && !victim; i++)
			for (struct node *n = fs->buckets[i]; n; n = n->next)
				if (n->writer) {
					victim = n;
					n->pins++;
					break;
				}
		pthread_mutex_unlock(&fs->table_lock);
		if (!victim)
			return;
		pthread_mutex_lock(&victim->lock);
		int err = node_flush(victim);
		if (err)
			log_err("flush of inode %llu at unmount failed: %s",
				(unsigned long long)victim->ino,
				gr_strerror(err));
		node_writer_close(victim);
		pthread_mutex_unlock(&victim->lock);
		node_unpin(fs, victim);
	}
}

static void op_destroy(void *userdata)
{
	flush_all(userdata);
}

/* ---- namespace ops -------------------------------------------------- */

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs *fs = fs_of(req);
	uint64_t ino;
	struct meta_attr a;
	int err = 0;
	int fz = frozen(fs, parent) || !strcmp(name, META_VERSIONS);
	if (!fs->read_only) {
		err = meta_lookup(fs->meta, m_ino(fs, parent), name, &ino, &a);
		if (err)
			return reply_err(req, "lookup", err);
		return reply_entry(req, fs, ino, &a, fz);
	}
	/* read-only: from the name cache, else one round trip that also
	 * brings chunk 0, so that open and read need none of their own */
	struct meta_slice *s;
	size_t n;
	if (!fs->names || !namecache_get(fs->names, m_ino(fs, parent), name,
					 &ino, &a, &s, &n)) {
		err = meta_lookup_chunk0(fs->meta, m_ino(fs, parent), name,
					 &ino, &a, &s, &n);
		if (err)
			return reply_err(req, "lookup", err);
		if (fs->names)
			namecache_put(fs->names, m_ino(fs, parent), name, ino,
				      &a, s, n);
	}
	/* pinned, so the slice list lands in the node the kernel will open */
	struct node *pin = node_get(fs, ino, 1);
	if (a.type == META_FILE)
		node_cache_chunk0(fs, ino, s, n);
	free(s);
	reply_entry(req, fs, ino, &a, fz);
	node_unpin(fs, pin);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	struct fs *fs = fs_of(req);
	node_forget(fs, m_ino(fs, ino), nlookup);
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count,
			    struct fuse_forget_data *forgets)
{
	struct fs *fs = fs_of(req);
	for (size_t i = 0; i < count; i++)
		node_forget(fs, m_ino(fs, forgets[i].ino), forgets[i].nlookup);
	fuse_reply_none(req);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct meta_attr a;
	double left;
	(void)fi;
	if (!fs->read_only && dir_attr_get(fs, m_ino(fs, ino), &a, &left)) {
		struct stat st;
		attr_to_stat(fs, m_ino(fs, ino), &a, a.length, &st);
		return (void)fuse_reply_attr(req, &st, left);
	}
	int err = meta_getattr(fs->meta, m_ino(fs, ino), &a);
	if (err)
		return reply_err(req, "getattr", err);
	reply_attr(req, fs, m_ino(fs, ino), &a);
}

/* Translate FUSE's to_set into META_SET_* and the values in `in`. */
static int setattr_fields(const struct stat *st, int to_set,
			  struct meta_attr *in)
{
	int set = 0;
	memset(in, 0, sizeof(*in));
	if (to_set & FUSE_SET_ATTR_MODE) {
		set |= META_SET_MODE;
		in->mode = st->st_mode & 07777;
	}
	if (to_set & FUSE_SET_ATTR_UID) {
		set |= META_SET_UID;
		in->uid = st->st_uid;
	}
	if (to_set & FUSE_SET_ATTR_GID) {
		set |= META_SET_GID;
		in->gid = st->st_gid;
	}
	if (to_set & FUSE_SET_ATTR_ATIME_NOW)
		set |= META_SET_ATIME_NOW;
	else if (to_set & FUSE_SET_ATTR_ATIME) {
		set |= META_SET_ATIME;
		in->atime = st->st_atim.tv_sec;
		in->atimens = st->st_atim.tv_nsec;
	}
	if (to_set & FUSE_SET_ATTR_MTIME_NOW)
		set |= META_SET_MTIME_NOW;
	else if (to_set & FUSE_SET_ATTR_MTIME) {
		set |= META_SET_MTIME;
		in->mtime = st->st_mtim.tv_sec;
		in->mtimens = st->st_mtim.tv_nsec;
	}
	if (!set && (to_set & FUSE_SET_ATTR_CTIME))
		set |= META_SET_CTIME;
	return set;
}

static void op_setattr(fuse_req_t req, fuse_ino_t fino, struct stat *st,
		       int to_set, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	uint64_t ino = m_ino(fs, fino);
	struct meta_attr in, out;
	int set = setattr_fields(st, to_set, &in), err = 0, have = 0;
	(void)fi;
	if (frozen(fs, fino))
		return reply_err(req, "setattr", EROFS);

	/*
	 * Buffered writes are committed first: their commit sets mtime, and
	 * must not overwrite times set after them (cp -p: write, futimens,
	 * close), nor survive a truncate that came after them.
	 */
	struct node *n = node_get(fs, ino, (to_set & FUSE_SET_ATTR_SIZE) != 0);
	if (n) {
		pthread_mutex_lock(&n->lock);
		err = node_flush(n);
	}
	if (!err && (to_set & FUSE_SET_ATTR_SIZE)) {
		err = meta_truncate(fs->meta, ino, st->st_size, &out);
		if (!err) {
			space_changed(fs->space);
			chunk_cache_clear(n);
			node_note_attr(n, &out);
			have = 1;
		}
	}
	if (!err && set) {
		err = meta_setattr(fs->meta, ino, set, &in, &out);
		have = !err;
		if (n && (set & META_SET_MODE) &&
		    (in.mode & (S_ISUID | S_ISGID)))
			n->privs = 1; /* see dio_allowed */
	}
	if (!err && !have)
		err = meta_getattr(fs->meta, ino, &out);
	if (!err && n)
		node_note_attr(n, &out);
	if (n) {
		pthread_mutex_unlock(&n->lock);
		node_unpin(fs, n);
	} else if (to_set & FUSE_SET_ATTR_SIZE) {
		err = ENOMEM;
	}
	ns_changed(fs);
	if (err)
		return reply_err(req, "setattr", err);
	reply_attr(req, fs, ino, &out);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct fs *fs = fs_of(req);
	char *target;
	int err = meta_readlink(fs->meta, m_ino(fs, ino), &target);
	if (err)
		return reply_err(req, "readlink", err);
	fuse_reply_readlink(req, target);
	free(target);
}

static void make_node(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode, dev_t rdev, const char *link)
{
	struct fs *fs = fs_of(req);
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	uint64_t ino;
	struct meta_attr a;
	if (frozen(fs, parent))
		return reply_err(req, "create", EROFS);
	int err =
	    meta_mknod(fs->meta, m_ino(fs, parent), name, meta_type_of(mode),
		       mode & 07777, ctx->uid, ctx->gid, rdev, link, &ino, &a);
	ns_changed(fs);
	if (err)
		return reply_err(req, "create", err);
	reply_entry(req, fs, ino, &a, 0);
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode, dev_t rdev)
{
	make_node(req, parent, name, mode, rdev, NULL);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode)
{
	make_node(req, parent, name, S_IFDIR | (mode & 07777), 0, NULL);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
		       const char *name)
{
	make_node(req, parent, name, S_IFLNK | 0777, 0, link);
}

/* Wake the reclaimer: inodes were deleted, their data waits. */
static void reclaim_soon(void *arg)
{
	struct fs *fs = arg;
	space_changed(fs->space); /* a file was deleted: space freed */
	pthread_mutex_lock(&fs->rc_lock);
	pthread_cond_signal(&fs->rc_cond);
	pthread_mutex_unlock(&fs->rc_lock);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs *fs = fs_of(req);
	if (frozen(fs, parent))
		return reply_err(req, "unlink", EROFS);
	int err = meta_unlink(fs->meta, m_ino(fs, parent), name);
	ns_changed(fs);
	if (!err)
		reclaim_soon(fs);
	reply_err(req, "unlink", err);
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs *fs = fs_of(req);
	if (frozen(fs, parent))
		return reply_err(req, "rmdir", EROFS);
	int err = meta_rmdir(fs->meta, m_ino(fs, parent), name);
	ns_changed(fs);
	reply_err(req, "rmdir", err);
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname,
		      unsigned int flags)
{
	struct fs *fs = fs_of(req);
	if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE))
		return reply_err(req, "rename", EINVAL);
	if (frozen(fs, parent) || frozen(fs, newparent))
		return reply_err(req, "rename", EROFS);
	int err = meta_rename(fs->meta, m_ino(fs, parent), name,
			      m_ino(fs, newparent), newname, flags);
	ns_changed(fs);
	space_changed(fs->space); /* a file replaced may be gone */
	reply_err(req, "rename", err);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
		    const char *newname)
{
	struct fs *fs = fs_of(req);
	struct meta_attr a;
	if (frozen(fs, ino) || frozen(fs, newparent))
		return reply_err(req, "link", EROFS);
	int err = meta_link(fs->meta, m_ino(fs, ino), m_ino(fs, newparent),
			    newname, &a);
	ns_changed(fs);
	if (err)
		return reply_err(req, "link", err);
	reply_entry(req, fs, m_ino(fs, ino), &a, 0);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct fs *fs = fs_of(req);
	struct meta_usage u;
	struct statvfs sv;
	(void)ino;
	int err = meta_usage(fs->meta, &u);
	if (err)
		return reply_err(req, "statfs", err);
	/* the capacity is the total, whatever the usage (which may overshoot
	 * it a little: space.h); without one, 1 PiB or the usage */
	uint64_t cap = fs->vol.capacity;
	if (!cap)
		cap = u.used_bytes > (1ull << 50) ? u.used_bytes : 1ull << 50;
	uint64_t used = (u.used_bytes + 4095) / 4096;
	memset(&sv, 0, sizeof(sv));
	sv.f_bsize = 4096;
	sv.f_frsize = 4096;
	sv.f_blocks = cap / 4096;
	sv.f_bfree = sv.f_bavail = used < sv.f_blocks ? sv.f_blocks - used : 0;
	sv.f_files = u.inodes + (1ull << 32);
	sv.f_ffree = sv.f_favail = 1ull << 32;
	sv.f_namemax = META_NAME_MAX;
	fuse_reply_statfs(req, &sv);
}

static void op_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
	/* default_permissions: the kernel has checked already */
	(void)ino;
	(void)mask;
	fuse_reply_err(req, 0);
}

/* ---- files ---------------------------------------------------------- */

static void fh_free(struct fs *fs, struct fh *h)
{
	if (h->ra.window) /* a stream ends */
		__atomic_fetch_sub(&fs->ra_streams, 1, __ATOMIC_RELAXED);
	pthread_mutex_destroy(&h->ra_lock);
	free(h);
}

/*
 * May a write-only open of n write past the page cache? Only when the file
 * has no set-id bit and no file capability: the kernel drops those before
 * a write on the cached path alone. What this client adds while such an
 * open writes, op_write drops itself (privs_drop); another client's chmod
 * or setcap shows after the attribute timeout, as for caps_absent.
 */
static int dio_allowed(struct fs *fs, struct node *n, const struct meta_attr *a)
{
	if (a->mode & (S_ISUID | S_ISGID))
		return 0;
	pthread_mutex_lock(&n->lock);
	n->privs = 0; /* a setxattr or chmod from here on sets it again */
	int known = mono_ns() < n->nocaps_ns;
	pthread_mutex_unlock(&n->lock);
	if (known)
		return 1;
	void *v = NULL;
	size_t len = 0;
	int err = meta_getxattr(fs->meta, n->ino, XATTR_CAPS, &v, &len);
	free(v);
	return err == ENODATA;
}

/*
 * Register an open of n and fill fi. A read-write client registers its
 * first local open with the volume (an unlink elsewhere then keeps the
 * inode) and fetches fresh attributes (close-to-open). A read-only client
 * serves dataset epochs: it reuses attributes younger than the attribute
 * timeout and registers nothing, so a warm epoch costs no round trip.
 * created: the inode was just made by meta_create, which registered this
 * open and handed out *a.
 */
static int file_open(struct fs *fs, struct node *n, struct fuse_file_info *fi,
		     struct meta_attr *a, int created)
{
	int first = 0, fresh = 0, alone = 0, err;

	if (created) {
		pthread_mutex_lock(&fs->table_lock);
		alone = ++n->opens == 1;
		n->meta_open = 1;
		pthread_mutex_unlock(&fs->table_lock);
		err = 0;
	} else if (fs->read_only) {
		pthread_mutex_lock(&n->lock);
		fresh = n->seen && mono_ns() - n->attr_ns <
				       (int64_t)(fs->attr_timeout * 1e9);
		if (fresh)
			*a = n->attr;
		pthread_mutex_unlock(&n->lock);
		pthread_mutex_lock(&fs->table_lock);
		n->opens++;
		pthread_mutex_unlock(&fs->table_lock);
		err = fresh ? 0 : meta_getattr(fs->meta, n->ino, a);
	} else {
		pthread_mutex_lock(&fs->table_lock);
		first = !n->meta_open;
		alone = ++n->opens == 1;
		n->meta_open = 1;
		pthread_mutex_unlock(&fs->table_lock);
		err = first ? meta_file_open(fs->meta, n->ino, a)
			    : meta_getattr(fs->meta, n->ino, a);
	}
	if (err) {
		pthread_mutex_lock(&fs->table_lock);
		n->opens--;
		if (first)
			n->meta_open = 0;
		pthread_mutex_unlock(&fs->table_lock);
		return err;
	}

	/* A write-only open with no other open of the file on this node
	 * writes past the page cache (direct_io): no copy of every byte into
	 * pages that the next attribute refresh drops anyway (the write
	 * changes mtime: FUSE_CAP_AUTO_INVAL_DATA), and nothing evicted for
	 * them. The kernel drops cached pages of each range written so.
	 * Kernels older than about 6.6 do not: for them op_write drops the
	 * range when another open exists, and the next open after such
	 * writes drops everything (n->dio), even before the writer's commit
	 * changes the attributes. */
	int dio = alone && (fi->flags & O_ACCMODE) == O_WRONLY &&
		  dio_allowed(fs, n, a);
	/* A read-only open of a big file (a checkpoint read back) reads
	 * past the page cache too: each read's bytes go straight into the
	 * reader's buffer. Only where the kernel maps such an open shared
	 * through the page cache (fusedev.h), else safetensors' mmap would
	 * fail. Readahead is then the daemon's alone (fh_readahead). */
	int dio_read = (fi->flags & O_ACCMODE) == O_RDONLY &&
		       a->length >= fs->direct_read &&
		       fusedev_dio_mmap(&fs->dev);
	pthread_mutex_lock(&n->lock);
	int unchanged = node_unchanged(n, a) && !n->dio;
	/* close-to-open: forget slice lists another client may have changed */
	if (!unchanged)
		chunk_cache_clear(n);
	n->dio = 0;
	if (!fresh && !(n->writer && writer_dirty(n->writer)))
		node_note_attr(n, a);
	pthread_mutex_unlock(&n->lock);

	struct fh *h = malloc(sizeof(*h));
	if (!h)
		return ENOMEM; /* the open stays counted; release never comes */
	h->node = n;
	h->flags = fi->flags;
	h->dio = dio;
	pthread_mutex_init(&h->ra_lock, NULL);
	readahead_init(&h->ra);
	fi->fh = (uintptr_t)h;
	fi->keep_cache = unchanged;
	fi->direct_io = dio || dio_read;
	return 0;
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct meta_attr a;
	if ((fs->read_only || frozen(fs, ino)) &&
	    (fi->flags & O_ACCMODE) != O_RDONLY)
		return reply_err(req, "open", EROFS);
	struct node *n = node_get(fs, m_ino(fs, ino), 1);
	if (!n)
		return reply_err(req, "open", ENOMEM);
	int err = file_open(fs, n, fi, &a, 0);
	node_unpin(fs, n);
	if (err)
		return reply_err(req, "open", err);
	if (fuse_reply_open(req, fi) == -ENOENT) {
		/* interrupted: the kernel will not release it */
		fh_free(fs, (struct fh *)(uintptr_t)fi->fh);
	}
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	uint64_t ino;
	struct meta_attr a;
	struct meta_attr pa;
	uint64_t gen = __atomic_load_n(&fs->ns_gen, __ATOMIC_SEQ_CST);
	if (frozen(fs, parent))
		return reply_err(req, "create", EROFS);
	/* the open is registered by the same script that creates the file */
	int err = meta_create(fs->meta, m_ino(fs, parent), name, mode & 07777,
			      ctx->uid, ctx->gid, &ino, &a, &pa);
	if (err) {
		ns_changed(fs); /* EIO: it may have been made */
		return reply_err(req, "create", err);
	}
	dir_attr_note(fs, m_ino(fs, parent), &pa, gen);
	struct node *n = node_get(fs, ino, 1);
	if (!n) {
		meta_file_close(fs->meta, ino);
		return reply_err(req, "create", ENOMEM);
	}
	/* made without xattrs: before file_open, whose dio_allowed() would
	 * otherwise ask the volume for a capability */
	pthread_mutex_lock(&n->lock);
	n->nocaps_ns = mono_ns() + (int64_t)(fs->attr_timeout * 1e9);
	pthread_mutex_unlock(&n->lock);
	err = file_open(fs, n, fi, &a, 1);
	node_unpin(fs, n);
	if (err)
		return reply_err(req, "create", err);

	struct fuse_entry_param e;
	memset(&e, 0, sizeof(e));
	e.ino = f_ino(fs, ino);
	e.generation = 1;
	e.attr_timeout = fs->attr_timeout;
	e.entry_timeout = fs->entry_timeout;
	attr_to_stat(fs, ino, &a, a.length, &e.attr);
	node_lookup_ref(fs, ino, &a, 0);
	if (fuse_reply_create(req, &e, fi) == -ENOENT) {
		node_forget(fs, ino, 1);
		fh_free(fs, (struct fh *)(uintptr_t)fi->fh);
	}
}

/* A read reply gathered from pinned runs of cached blocks. */
#define REPLY_RUNS	64
#define REPLY_RUNS_FULL (-1) /* internal: more runs than that */

struct reply_runs {
	struct chunkstore *cs;
	struct iovec iov[REPLY_RUNS];
	struct chunkstore_pin *pin[REPLY_RUNS];
	size_t n;
};

static int reply_run(void *arg, const void *data, size_t len,
		     struct chunkstore_pin *pin)
{
	struct reply_runs *r = arg;

	if (r->n == REPLY_RUNS) {
		chunkstore_unpin(r->cs, pin);
		return REPLY_RUNS_FULL;
	}
	r->iov[r->n] = (struct iovec){(void *)(uintptr_t)data, len};
	r->pin[r->n++] = pin;
	return 0;
}

static void reply_runs_release(struct reply_runs *r)
{
	for (size_t i = 0; i < r->n; i++)
		chunkstore_unpin(r->cs, r->pin[i]);
	r->n = 0;
}

/* Account a read of h and say what to fetch ahead of it: the file's
 * window is capped at its share of the read-ahead memory (see ra_total),
 * and the count of streams follows the window opening and closing. */
static void fh_readahead(struct fs *fs, struct fh *h, uint64_t off, size_t size,
			 uint64_t length, uint64_t *pf_off, uint64_t *pf_len)
{
	uint32_t bs = chunkstore_block_size(fs->cs);
	uint64_t streams = __atomic_load_n(&fs->ra_streams, __ATOMIC_RELAXED);
	uint64_t cap = fs->ra_total / (streams ? streams : 1);

	if (cap > fs->ra_max)
		cap = fs->ra_max;
	if (cap < 2 * (uint64_t)bs)
		cap = 2 * (uint64_t)bs;
	pthread_mutex_lock(&h->ra_lock);
	int was = h->ra.window != 0;
	readahead_update(&h->ra, off, size, length, bs, cap, pf_off, pf_len);
	int is = h->ra.window != 0;
	pthread_mutex_unlock(&h->ra_lock);
	if (is != was)
		__atomic_fetch_add(&fs->ra_streams, is ? 1 : (uint64_t)-1,
				   __ATOMIC_RELAXED);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct fh *h = (struct fh *)(uintptr_t)fi->fh;
	struct node *n = h->node;
	(void)ino;

	pthread_mutex_lock(&n->lock);
	int err = node_flush(n); /* read your own writes */
	uint64_t length = n->length;
	pthread_mutex_unlock(&n->lock);
	if (err)
		return reply_err(req, "read", err);
	if ((uint64_t)off >= length || size == 0)
		return (void)fuse_reply_buf(req, NULL, 0);

	size_t got = 0;
	struct rctx rc = {fs, n};
	uint64_t pf_off, pf_len;
	fh_readahead(fs, h, (uint64_t)off, size, length, &pf_off, &pf_len);
	if (pf_len)
		reader_prefetch(fs->cs, n->ino, length, pf_off, pf_len,
				rcb_chunk, &rc);

	/* The reply goes out from where the blocks are cached (no copy,
	 * no buffer); a read in too many pieces is copied instead. */
	struct reply_runs rr = {.cs = fs->cs};
	err = reader_read_pinned(fs->cs, n->ino, length, off, size, &got,
				 reply_run, &rr, rcb_chunk, &rc);
	if (!err)
		fuse_reply_iov(req, rr.iov, (int)rr.n);
	reply_runs_release(&rr);
	if (err != REPLY_RUNS_FULL) {
		if (err)
			reply_err(req, "read", err);
		return;
	}

	char *buf = malloc(size);
	if (!buf)
		return reply_err(req, "read", ENOMEM);
	err = reader_read(fs->cs, n->ino, length, off, size, buf, &got,
			  rcb_chunk, &rc);
	if (err)
		reply_err(req, "read", err);
	else
		fuse_reply_buf(req, buf, got);
	free(buf);
}

/*
 * A write drops the file's capability, and its set-id bits unless the
 * writer is root (the kernel's rule, root standing for CAP_FSETID; setgid
 * only with group execute). The kernel does it itself on the cached path;
 * for a direct_io open that found none, op_write calls this when this
 * client gave the file one since.
 */
static int privs_drop(fuse_req_t req, struct fs *fs, struct node *n,
		      fuse_ino_t fino)
{
	struct meta_attr a;
	int err = meta_removexattr(fs->meta, n->ino, XATTR_CAPS);

	if (err && err != ENODATA)
		return err;
	err = meta_getattr(fs->meta, n->ino, &a);
	if (err)
		return err;
	uint16_t kill = S_ISUID | ((a.mode & S_IXGRP) ? S_ISGID : 0);
	if ((a.mode & kill) && fuse_req_ctx(req)->uid != 0) {
		struct meta_attr in = {.mode = a.mode & ~kill};
		err = meta_setattr(fs->meta, n->ino, META_SET_MODE, &in, &a);
		if (err)
			return err;
	}
	pthread_mutex_lock(&n->lock);
	if (!(n->writer && writer_dirty(n->writer)))
		node_note_attr(n, &a);
	pthread_mutex_unlock(&n->lock);
	ns_changed(fs);
	/* the kernel's copy of the mode is stale now */
	fuse_lowlevel_notify_inval_inode(fs->se, fino, -1, 0);
	return 0;
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
		     size_t size, off_t off, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct fh *h = (struct fh *)(uintptr_t)fi->fh;
	struct node *n = h->node;
	struct writer *w;

	pthread_mutex_lock(&n->lock);
	int err = node_writer(fs, n, &w);
	/* the capacity is checked before the bytes are accepted, never at
	 * the commit: a write() that succeeded is never lost for space. An
	 * overwrite inside a file that holds all its bytes cannot grow the
	 * usage (stored bytes stop at the length) and is free; any other
	 * byte counts until its commit. */
	uint64_t charge = size;
	if (n->seen && n->attr.stored >= n->attr.length &&
	    (uint64_t)off + size <= n->attr.length)
		charge = 0;
	if (!err)
		err = space_take(fs->space, charge);
	if (!err) {
		n->taken += charge;
		err = writer_write(w, off, buf, size);
	}
	int drop = h->dio && n->privs;
	if (h->dio) {
		n->dio = 1;
		n->privs = 0;
	}
	pthread_mutex_unlock(&n->lock);
	if (!err && drop)
		err = privs_drop(req, fs, n, ino);
	if (err)
		return reply_err(req, "write", err);
	if (h->dio) {
		pthread_mutex_lock(&fs->table_lock);
		int others = n->opens > 1;
		pthread_mutex_unlock(&fs->table_lock);
		/* what another open cached of the range is stale (for old
		 * kernels, see file_open). Before the reply, so that a read
		 * after the write returns sees it; the kernel's direct write
		 * holds the inode lock, no page lock, which is all this
		 * takes. */
		if (others)
			fuse_lowlevel_notify_inval_inode(fs->se, ino, off,
							 (off_t)size);
	}
	fuse_reply_write(req, size);
}

static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct fh *h = (struct fh *)(uintptr_t)fi->fh;
	(void)ino;
	pthread_mutex_lock(&h->node->lock);
	int err = node_flush(h->node);
	pthread_mutex_unlock(&h->node->lock);
	(void)fs;
	reply_err(req, "flush", err);
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
		     struct fuse_file_info *fi)
{
	(void)datasync;
	op_flush(req, ino, fi);
}

/* Drop this client's open registration of ino: batched by the closer. */
static void file_unregister(struct fs *fs, uint64_t ino)
{
	int freed = 0, err = 0;
	if (fs->closer)
		closer_add(fs->closer, ino);
	else
		err = meta_file_release(fs->meta, ino, &freed);
	if (err)
		log_err("close of inode %llu: %s", (unsigned long long)ino,
			gr_strerror(err));
	if (freed)
		reclaim_soon(fs);
}

static void op_release(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct fh *h = (struct fh *)(uintptr_t)fi->fh;
	struct node *n = h->node;
	(void)ino;

	pthread_mutex_lock(&fs->table_lock);
	n->pins++;
	int last = --n->opens == 0;
	pthread_mutex_unlock(&fs->table_lock);

	if (last) {
		pthread_mutex_lock(&n->lock);
		int err = node_flush(n);
		/* a failure was already returned to close() by flush; what
		 * could not be uploaded is dropped, as the error said */
		if (err)
			log_err("write-back of inode %llu at close failed: %s",
				(unsigned long long)n->ino, gr_strerror(err));
		node_writer_close(n);
		pthread_mutex_unlock(&n->lock);

		pthread_mutex_lock(&fs->table_lock);
		int unregister = n->opens == 0 && n->meta_open;
		if (unregister)
			n->meta_open = 0;
		pthread_mutex_unlock(&fs->table_lock);
		if (unregister)
			file_unregister(fs, n->ino);
	}
	node_unpin(fs, n);
	fh_free(fs, h);
	fuse_reply_err(req, 0);
}

/* Cover [off, off+len) with hole slices (id 0): reads give zeros. The
 * range is cut at `limit` (the length, for modes that keep the size). */
static int write_holes(struct fs *fs, uint64_t ino, uint64_t off, uint64_t len,
		       uint64_t limit, struct meta_attr *a)
{
	uint64_t end = off + len < limit ? off + len : limit;
	struct meta_chunk_slice s[64];
	size_t n = 0;
	int err = 0;
	while (off < end && !err) {
		uint32_t idx = off / META_CHUNK_SIZE;
		uint32_t pos = off % META_CHUNK_SIZE;
		uint64_t take = META_CHUNK_SIZE - pos;
		if (take > end - off)
			take = end - off;
		s[n].idx = idx;
		s[n].s = (struct meta_slice){
		    .id = 0, .size = take, .off = 0, .len = take, .pos = pos};
		n++;
		off += take;
		if (n == 64 || off >= end) {
			err = meta_write(fs->meta, ino, s, n, a);
			n = 0;
		}
	}
	return err;
}

/*
 * copy_file_range of a whole file into an empty one (what cp does) shares
 * the data copy-on-write, as a snapshot does: metadata only, whatever the
 * size. Anything else gets EOPNOTSUPP, on which the kernel copies the bytes
 * itself (ENOSYS would turn the call off for the whole mount).
 */
static void op_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
			       struct fuse_file_info *fi_in, fuse_ino_t ino_out,
			       off_t off_out, struct fuse_file_info *fi_out,
			       size_t len, int flags)
{
	struct fs *fs = fs_of(req);
	struct node *src = ((struct fh *)(uintptr_t)fi_in->fh)->node;
	struct node *dst = ((struct fh *)(uintptr_t)fi_out->fh)->node;
	struct meta_attr a;
	int err;
	(void)ino_in;
	(void)ino_out;

	if (off_in != 0 || off_out != 0 || flags != 0 || src == dst)
		return reply_err(req, "copy_file_range", EOPNOTSUPP);
	/* the two node locks are never held together */
	pthread_mutex_lock(&src->lock);
	err = node_flush(src);
	pthread_mutex_unlock(&src->lock);
	if (!err)
		err = meta_getattr(fs->meta, src->ino, &a);
	if (err)
		return reply_err(req, "copy_file_range", err);
	if (a.type != META_FILE || a.length == 0 || len < a.length)
		return reply_err(req, "copy_file_range", EOPNOTSUPP);
	uint64_t n = a.length;

	pthread_mutex_lock(&dst->lock);
	err = node_flush(dst);
	if (!err && dst->length != 0)
		err = EOPNOTSUPP;
	if (!err) {
		err = meta_clone_data(fs->meta, src->ino, dst->ino, &a);
		if (err == EINVAL)
			err = EOPNOTSUPP; /* not empty after all */
		chunk_cache_clear(dst);
	}
	if (!err)
		node_note_attr(dst, &a);
	pthread_mutex_unlock(&dst->lock);
	if (err)
		return reply_err(req, "copy_file_range", err);
	log_debug("copy_file_range: inode %llu shares the %llu bytes of %llu",
		  (unsigned long long)dst->ino, (unsigned long long)n,
		  (unsigned long long)src->ino);
	fuse_reply_write(req, (size_t)n);
}

static void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off,
			 off_t len, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct fh *h = (struct fh *)(uintptr_t)fi->fh;
	struct node *n = h->node;
	struct meta_attr a;
	int err;
	(void)ino;
	if (mode & ~(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE |
		     FALLOC_FL_ZERO_RANGE))
		return reply_err(req, "fallocate", EOPNOTSUPP);
	if ((mode & FALLOC_FL_PUNCH_HOLE) &&
	    (!(mode & FALLOC_FL_KEEP_SIZE) || (mode & FALLOC_FL_ZERO_RANGE)))
		return reply_err(req, "fallocate", EINVAL);
	if (off < 0 || len <= 0)
		return reply_err(req, "fallocate", EINVAL);
	pthread_mutex_lock(&n->lock);
	err = node_flush(n);
	if (!err && (mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE))) {
		err = meta_getattr(fs->meta, n->ino, &a);
		if (!err)
			err = write_holes(fs, n->ino, off, len,
					  (mode & FALLOC_FL_KEEP_SIZE)
					      ? a.length
					      : (uint64_t)off + len,
					  &a);
		chunk_cache_clear(n);
		space_changed(fs->space);
	} else if (!err) {
		/* allocating takes space from the capacity, as a write */
		err = space_take(fs->space, (uint64_t)len);
		if (!err) {
			err = meta_fallocate(fs->meta, n->ino,
					     mode & FALLOC_FL_KEEP_SIZE, off,
					     len, &a);
			if (err)
				space_drop(fs->space, (uint64_t)len);
			else
				space_done(fs->space, (uint64_t)len);
		}
	}
	if (!err)
		node_note_attr(n, &a);
	pthread_mutex_unlock(&n->lock);
	reply_err(req, "fallocate", err);
}

/* ---- directories ---------------------------------------------------- */

static void op_opendir(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	(void)ino;
	struct dirh *d = calloc(1, sizeof(*d));
	if (!d)
		return reply_err(req, "opendir", ENOMEM);
	pthread_mutex_init(&d->lock, NULL);
	fi->fh = (uintptr_t)d;
	/* a read-only client lets the kernel keep listings for the entry
	 * timeout: a DataLoader's walk of a dataset is then free after the
	 * first epoch */
	if (fs_of(req)->read_only) {
		fi->cache_readdir = 1;
		fi->keep_cache = 1;
	}
	if (fuse_reply_open(req, fi) == -ENOENT) {
		pthread_mutex_destroy(&d->lock);
		free(d);
	}
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi, int plus)
{
	struct fs *fs = fs_of(req);
	struct dirh *d = (struct dirh *)(uintptr_t)fi->fh;
	int err = 0, fz = plus && frozen(fs, ino);

	pthread_mutex_lock(&d->lock);
	/* a rewind (offset 0) reloads, as a new listing would */
	if (!d->loaded || off == 0 || (plus && !d->plus)) {
		meta_dirents_free(d->ents, d->n);
		d->ents = NULL;
		d->n = 0;
		d->loaded = 0;
		err = meta_readdir(fs->meta, m_ino(fs, ino), plus, &d->ents,
				   &d->n);
		if (err)
			goto out;
		d->loaded = 1;
		d->plus = plus;
	}
	char *buf = malloc(size);
	if (!buf) {
		err = ENOMEM;
		goto out;
	}
	size_t pos = 0;
	/* offsets: 1 = ".", 2 = "..", 3 + i = entry i */
	for (off_t i = off; (size_t)i < d->n + 2; i++) {
		struct stat st;
		memset(&st, 0, sizeof(st));
		const char *name;
		uint64_t eino = 0;
		struct meta_dirent *e = NULL;
		if (i == 0) {
			name = ".";
			st.st_ino = ino;
			st.st_mode = S_IFDIR;
		} else if (i == 1) {
			name = "..";
			st.st_ino = FUSE_ROOT_ID; /* the kernel resolves .. */
			st.st_mode = S_IFDIR;
		} else {
			e = &d->ents[i - 2];
			name = e->name;
			eino = e->ino;
			st.st_ino = f_ino(fs, eino);
			st.st_mode = type_bits(e->type);
		}
		size_t need;
		if (plus) {
			struct fuse_entry_param ep;
			memset(&ep, 0, sizeof(ep));
			if (e) {
				ep.ino = st.st_ino;
				ep.generation = 1;
				ep.attr_timeout = fs->attr_timeout;
				ep.entry_timeout = fs->entry_timeout;
				attr_to_stat(fs, eino, &e->attr,
					     visible_length(fs, eino, &e->attr),
					     &ep.attr);
			} else {
				ep.attr = st;
			}
			need = fuse_add_direntry_plus(
			    req, buf + pos, size - pos, name, &ep, i + 1);
			if (need > size - pos)
				break;
			if (e) {
				node_lookup_ref(fs, eino, &e->attr, fz);
				if (fs->read_only && e->type == META_FILE)
					node_cache_chunk0(fs, eino, e->chunk0,
							  e->nchunk0);
				if (fs->names)
					namecache_put(fs->names, m_ino(fs, ino),
						      e->name, eino, &e->attr,
						      e->chunk0, e->nchunk0);
			}
		} else {
			need = fuse_add_direntry(req, buf + pos, size - pos,
						 name, &st, i + 1);
			if (need > size - pos)
				break;
		}
		pos += need;
	}
	pthread_mutex_unlock(&d->lock);
	fuse_reply_buf(req, buf, pos);
	free(buf);
	return;
out:
	pthread_mutex_unlock(&d->lock);
	reply_err(req, "readdir", err);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, 0);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
			   off_t off, struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, 1);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino,
			  struct fuse_file_info *fi)
{
	struct dirh *d = (struct dirh *)(uintptr_t)fi->fh;
	(void)ino;
	meta_dirents_free(d->ents, d->n);
	pthread_mutex_destroy(&d->lock);
	free(d);
	fuse_reply_err(req, 0);
}

static void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
			struct fuse_file_info *fi)
{
	(void)ino;
	(void)datasync;
	(void)fi;
	fuse_reply_err(req, 0); /* metadata changes are durable on return */
}

/* ---- xattrs --------------------------------------------------------- */

/* size 0 asks for the length; a buffer too small is ERANGE */
static void reply_xattr_value(fuse_req_t req, size_t size, const void *v,
			      size_t n)
{
	if (size == 0)
		fuse_reply_xattr(req, n);
	else if (size < n)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, v, n);
}

/*
 * Virtual xattrs for `granary warmup`: "granary.cache" reads as "CACHED
 * TOTAL" (bytes of the file this node has in its disk cache; holes count
 * as cached), setting "granary.evict" drops the file's blocks from it.
 */
#define XATTR_CACHE "granary.cache"
#define XATTR_EVICT "granary.evict"

typedef void (*block_fn)(struct fs *fs, const char *key, uint64_t bytes,
			 void *arg);

/* Call fn for every stored block of the file, with the bytes of the file
 * that block holds. */
static int for_each_block(struct fs *fs, struct node *n, uint64_t length,
			  block_fn fn, void *arg)
{
	uint32_t bs = chunkstore_block_size(fs->cs);
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
				uint32_t blen = e->size - bstart < bs
						    ? e->size - bstart
						    : bs;
				uint32_t lo = e->off > bstart ? e->off : bstart;
				uint32_t hi = e->off + len < bstart + blen
						  ? e->off + len
						  : bstart + blen;
				char key[256];
				chunkstore_key(e->id, b, blen, key,
					       sizeof(key));
				fn(fs, key, hi - lo, arg);
			}
		}
		free(vis);
	}
	return 0;
}

static void count_uncached(struct fs *fs, const char *key, uint64_t bytes,
			   void *arg)
{
	if (!diskcache_contains(fs->store, key))
		*(uint64_t *)arg += bytes;
}

static void evict_block(struct fs *fs, const char *key, uint64_t bytes,
			void *arg)
{
	(void)bytes;
	(void)arg;
	objstore_evict(fs->store, key);
}

#define XATTR_STATS "granary.stats"
/* Setting "granary.sync" on any inode waits until every pack and block
 * this client has staged (writeback) is in the store. */
#define XATTR_SYNC "granary.sync"

/* "granary.stats" on any inode: this client's counters, as JSON. */
static void reply_stats(fuse_req_t req, struct fs *fs, size_t size)
{
	struct objstore_stats st;
	struct chunkstore_stats cs;
	struct diskcache_stats dc = {0};
	struct packer_stats ps = {0};
	struct stage_stats bs = {0};
	char buf[2048];

	if (fs->packer)
		packer_get_stats(fs->packer, &ps);
	if (fs->stage)
		stage_get_stats(fs->stage, &bs);

	objstore_get_stats(
	    fs->disk_cache ? diskcache_backend(fs->store) : fs->store, &st);
	chunkstore_get_stats(fs->cs, &cs);
	if (fs->disk_cache)
		diskcache_get_stats(fs->store, &dc);
	int len = snprintf(
	    buf, sizeof(buf),
	    "{\"store\": {\"gets\": %llu, \"get_bytes\": %llu, \"puts\": "
	    "%llu, \"put_bytes\": %llu, \"dels\": %llu, \"errors\": %llu}, "
	    "\"memory_cache\": {\"hits\": %llu, \"misses\": %llu, "
	    "\"corrupt\": %llu, \"prefetched\": %llu}, "
	    "\"disk_cache\": {\"enabled\": %s, \"hits\": %llu, \"misses\": "
	    "%llu, \"fills\": %llu, \"fill_skips\": %llu, \"fill_inline\": "
	    "%llu, \"evictions\": %llu, \"evicted\": "
	    "%llu, \"bad_entries\": %llu, \"entries\": %llu, \"bytes\": "
	    "%llu}, \"packs\": {\"enabled\": %s, \"writeback\": %s, "
	    "\"put\": %llu, \"frames\": %llu, \"bytes\": %llu, "
	    "\"errors\": %llu, \"staged\": %llu, \"staged_bytes\": %llu, "
	    "\"recovered\": %llu}, \"blocks\": {\"writeback\": %s, "
	    "\"put\": %llu, \"bytes\": %llu, \"direct\": %llu, "
	    "\"dropped\": %llu, \"errors\": %llu, \"staged\": %llu, "
	    "\"staged_bytes\": %llu, \"recovered\": %llu}}\n",
	    (unsigned long long)st.gets, (unsigned long long)st.get_bytes,
	    (unsigned long long)st.puts, (unsigned long long)st.put_bytes,
	    (unsigned long long)st.dels, (unsigned long long)st.errors,
	    (unsigned long long)cs.cache_hits,
	    (unsigned long long)cs.cache_misses, (unsigned long long)cs.corrupt,
	    (unsigned long long)cs.prefetched,
	    fs->disk_cache ? "true" : "false", (unsigned long long)dc.hits,
	    (unsigned long long)dc.misses, (unsigned long long)dc.fills,
	    (unsigned long long)dc.fill_skips,
	    (unsigned long long)dc.fill_inline,
	    (unsigned long long)dc.evictions, (unsigned long long)dc.evicted,
	    (unsigned long long)dc.bad_entries, (unsigned long long)dc.entries,
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
	    (unsigned long long)bs.recovered);
	reply_xattr_value(req, size, buf, len);
}

/* Handles a virtual xattr; returns 1 if name was one (reply sent). */
static int virtual_xattr(fuse_req_t req, struct fs *fs, fuse_ino_t ino,
			 const char *name, size_t size, int set)
{
	if (!set && !strcmp(name, XATTR_STATS)) {
		reply_stats(req, fs, size);
		return 1;
	}
	if (set && !strcmp(name, XATTR_SYNC)) {
		int err = packer_sync(fs->packer);
		int berr = stage_sync(fs->stage);
		reply_err(req, name, err ? err : berr);
		return 1;
	}
	int get = !set && !strcmp(name, XATTR_CACHE);
	if (!get && !(set && !strcmp(name, XATTR_EVICT)))
		return 0;
	struct meta_attr a;
	int err = meta_getattr(fs->meta, m_ino(fs, ino), &a);
	if (!err && a.type != META_FILE)
		err = EISDIR;
	if (!err && !fs->disk_cache)
		err = ENOTSUP;
	struct node *n = err ? NULL : node_get(fs, m_ino(fs, ino), 1);
	if (!err && !n)
		err = ENOMEM;
	if (err) {
		reply_err(req, name, err);
		return 1;
	}
	uint64_t uncached = 0;
	err = for_each_block(fs, n, a.length,
			     get ? count_uncached : evict_block, &uncached);
	node_unpin(fs, n);
	if (err) {
		reply_err(req, name, err);
	} else if (get) {
		char val[64];
		int len = snprintf(val, sizeof(val), "%llu %llu",
				   (unsigned long long)(a.length - uncached),
				   (unsigned long long)a.length);
		reply_xattr_value(req, size, val, len);
	} else {
		fuse_reply_err(req, 0);
	}
	return 1;
}

#define XATTR_SNAPSHOT "granary.snapshot"

/*
 * Who asks. The control operations (snapshot, version) arrive as xattrs,
 * which the kernel checks only as xattrs: read or write permission on the
 * inode they are set on. What they stand for needs more, so they check the
 * caller themselves, as the POSIX operations they replace would (cp -a of
 * the source, a create in the destination): uid, gid and supplementary
 * groups; root may do anything. The other virtual xattrs act on the inode
 * they are set on alone, which is what the kernel checked.
 */
struct caller {
	struct meta_cred cred; /* groups[0]: the gid, then supplementary */
	uint32_t *groups;      /* malloc'd */
};

static int caller_get(fuse_req_t req, struct caller *c)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	gid_t small[32], *list = small;
	int n = fuse_req_getgroups(req, 32, small);

	if (n > 32) {
		list = malloc(sizeof(*list) * (size_t)n);
		if (!list)
			return ENOMEM;
		n = fuse_req_getgroups(req, n, list);
	}
	/* a caller gone already, or no /proc: its gid alone (less, not more) */
	if (n < 0)
		n = 0;
	c->groups = malloc(sizeof(*c->groups) * ((size_t)n + 1));
	if (!c->groups) {
		if (list != small)
			free(list);
		return ENOMEM;
	}
	c->groups[0] = ctx->gid;
	for (int i = 0; i < n; i++)
		c->groups[i + 1] = list[i];
	if (list != small)
		free(list);
	c->cred.uid = ctx->uid;
	c->cred.ngroups = (uint32_t)n + 1;
	c->cred.groups = c->groups;
	return 0;
}

static void caller_release(struct caller *c)
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
static int caller_may(const struct caller *c, const struct meta_attr *a,
		      unsigned want)
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

/* Fault injection for the crash test of snapshots (tests/integ/t0120):
 * GRANARY_TEST_SNAPSHOT_KILL_AFTER=N kills this client with SIGKILL after
 * N steps of a snapshot. meta_redis_test_snapshot_hook is meta/redis.c's
 * test entry: meta_snapshot with a callback after each step. */
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
static void snapshot_xattr(fuse_req_t req, struct fs *fs, fuse_ino_t parent,
			   const char *value, size_t size)
{
	struct meta_snapshot_stats st = {0};
	struct caller c = {0};
	char *buf, *name;
	uint64_t src = 0;
	int err;

	if (fs->read_only || frozen(fs, parent))
		return reply_err(req, XATTR_SNAPSHOT, EROFS);
	if (size > PATH_MAX + META_NAME_MAX + 1)
		return reply_err(req, XATTR_SNAPSHOT, ENAMETOOLONG);
	if (size && value[0] >= '0' && value[0] <= '9') {
		log_warn("snapshot refused: the source is named by inode "
			 "number, as granary 0.x did; use 'granary snapshot' "
			 "of this version");
		return reply_err(req, XATTR_SNAPSHOT, EPERM);
	}
	buf = malloc(size + 1);
	if (!buf)
		return reply_err(req, XATTR_SNAPSHOT, ENOMEM);
	memcpy(buf, value, size);
	buf[size] = '\0';
	name = memchr(buf, '\0', size);
	err = size && buf[0] == '/' && name && name[1] ? 0 : EINVAL;
	if (!err) {
		name++;
		err = caller_get(req, &c);
	}
	if (!err)
		err = caller_may_create(fs, &c, m_ino(fs, parent));
	if (!err)
		err = resolve_as(fs, &c, buf, &src);
	int64_t t0 = mono_ns();
	const char *kill = getenv("GRANARY_TEST_SNAPSHOT_KILL_AFTER");
	int steps = kill ? atoi(kill) : 0;
	if (!err && steps > 0)
		err = meta_redis_test_snapshot_hook(
		    fs->meta, caller_cred(&c), src, m_ino(fs, parent), name,
		    &st, kill_after, &steps);
	else if (!err)
		err = meta_snapshot(fs->meta, caller_cred(&c), src,
				    m_ino(fs, parent), name, &st);
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
	reply_err(req, XATTR_SNAPSHOT, err);
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
		err = meta_version_rm(fs->meta, dir, tag);
		/* gone for this node's kernel at once, not after its entry
		 * timeout (another thread's lock on DIR/.versions is never
		 * held waiting for this request) */
		if (!err &&
		    !meta_lookup(fs->meta, dir, META_VERSIONS, &vdir, NULL))
			fuse_lowlevel_notify_inval_entry(
			    fs->se, f_ino(fs, vdir), tag, strlen(tag));
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
 * read (see snapshot_xattr). */
static void version_set(fuse_req_t req, struct fs *fs, fuse_ino_t ino,
			const char *op, const char *value, size_t size)
{
	uint64_t dir = m_ino(fs, ino);
	struct caller c = {0};
	char *tag, *arg;
	int err;

	if (fs->read_only || frozen(fs, ino))
		return reply_err(req, op, EROFS);
	tag = malloc(size + 2); /* "TAG\0ARG\0" even when ARG is missing */
	if (!tag)
		return reply_err(req, op, ENOMEM);
	memcpy(tag, value, size);
	tag[size] = tag[size + 1] = '\0';
	arg = memchr(tag, '\0', size) ? tag + strlen(tag) + 1 : NULL;
	err = caller_get(req, &c);
	if (!err)
		err = caller_may_create(fs, &c, dir);
	if (!err)
		err = version_do(fs, caller_cred(&c), dir, op, tag, arg);
	caller_release(&c);
	free(tag);
	ns_changed(fs);
	reply_err(req, op, err);
}

static void version_get(fuse_req_t req, struct fs *fs, fuse_ino_t ino,
			const char *tag, size_t size)
{
	struct meta_version *v;
	char *text;
	int err = meta_version_get(fs->meta, m_ino(fs, ino), tag, &v), n;

	if (err)
		return reply_err(req, "getxattr",
				 err == ENOENT ? ENODATA : err);
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
		return reply_err(req, "getxattr", ENOMEM);
	reply_xattr_value(req, size, text, (size_t)n);
	free(text);
}

static int acl_name(const char *name)
{
	return !strcmp(name, "system.posix_acl_access") ||
	       !strcmp(name, "system.posix_acl_default");
}

/*
 * The kernel asks for security.capability before every write (to drop
 * it, as it drops setuid bits). For a file this client created less than
 * the attribute timeout ago the answer is known without a round trip:
 * none, as the inode was made without xattrs and this client's own
 * setxattr/removexattr of it ends the window (caps_forget). Another
 * client's setxattr shows after the attribute timeout, the staleness the
 * kernel already accepts for the mode bits it checks for the same purpose.
 */
static int caps_absent(struct fs *fs, uint64_t ino)
{
	struct node *n = node_get(fs, ino, 0);
	int absent = 0;
	if (!n)
		return 0;
	pthread_mutex_lock(&n->lock);
	absent = mono_ns() < n->nocaps_ns;
	pthread_mutex_unlock(&n->lock);
	node_unpin(fs, n);
	return absent;
}

static void caps_forget(struct fs *fs, uint64_t ino, const char *name)
{
	struct node *n = strcmp(name, XATTR_CAPS) ? NULL : node_get(fs, ino, 0);
	if (!n)
		return;
	pthread_mutex_lock(&n->lock);
	n->nocaps_ns = 0;
	n->privs = 1;
	pthread_mutex_unlock(&n->lock);
	node_unpin(fs, n);
}

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			const char *value, size_t size, int flags)
{
	struct fs *fs = fs_of(req);
	if (acl_name(name))
		return reply_err(req, "setxattr", EOPNOTSUPP);
	if (!strcmp(name, XATTR_SNAPSHOT))
		return snapshot_xattr(req, fs, ino, value, size);
	if (!strncmp(name, XATTR_VERSION_SET, strlen(XATTR_VERSION_SET)))
		return version_set(req, fs, ino,
				   name + strlen(XATTR_VERSION_SET), value,
				   size);
	if (virtual_xattr(req, fs, ino, name, 0, 1))
		return;
	if (frozen(fs, ino))
		return reply_err(req, "setxattr", EROFS);
	caps_forget(fs, m_ino(fs, ino), name);
	int err =
	    meta_setxattr(fs->meta, m_ino(fs, ino), name, value, size, flags);
	ns_changed(fs);
	reply_err(req, "setxattr", err);
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			size_t size)
{
	struct fs *fs = fs_of(req);
	void *v;
	size_t n;
	if (acl_name(name))
		return reply_err(req, "getxattr", ENODATA);
	if (!strncmp(name, XATTR_VERSION_GET, strlen(XATTR_VERSION_GET)))
		return version_get(req, fs, ino,
				   name + strlen(XATTR_VERSION_GET), size);
	if (virtual_xattr(req, fs, ino, name, size, 0))
		return;
	if (!strcmp(name, XATTR_CAPS) && caps_absent(fs, m_ino(fs, ino)))
		return reply_err(req, "getxattr", ENODATA);
	int err = meta_getxattr(fs->meta, m_ino(fs, ino), name, &v, &n);
	if (err)
		return reply_err(req, "getxattr", err);
	reply_xattr_value(req, size, v, n);
	free(v);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct fs *fs = fs_of(req);
	char *names;
	size_t n;
	int err = meta_listxattr(fs->meta, m_ino(fs, ino), &names, &n);
	if (err)
		return reply_err(req, "listxattr", err);
	reply_xattr_value(req, size, names, n);
	free(names);
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct fs *fs = fs_of(req);
	if (frozen(fs, ino))
		return reply_err(req, "removexattr", EROFS);
	caps_forget(fs, m_ino(fs, ino), name);
	int err = meta_removexattr(fs->meta, m_ino(fs, ino), name);
	ns_changed(fs);
	reply_err(req, "removexattr", err);
}

static const struct fuse_lowlevel_ops granary_ops = {
    .init = op_init,
    .destroy = op_destroy,
    .lookup = op_lookup,
    .forget = op_forget,
    .forget_multi = op_forget_multi,
    .getattr = op_getattr,
    .setattr = op_setattr,
    .readlink = op_readlink,
    .mknod = op_mknod,
    .mkdir = op_mkdir,
    .symlink = op_symlink,
    .unlink = op_unlink,
    .rmdir = op_rmdir,
    .rename = op_rename,
    .link = op_link,
    .open = op_open,
    .create = op_create,
    .read = op_read,
    .write = op_write,
    .flush = op_flush,
    .fsync = op_fsync,
    .release = op_release,
    .fallocate = op_fallocate,
    .copy_file_range = op_copy_file_range,
    .opendir = op_opendir,
    .readdir = op_readdir,
    .readdirplus = op_readdirplus,
    .releasedir = op_releasedir,
    .fsyncdir = op_fsyncdir,
    .statfs = op_statfs,
    .access = op_access,
    .setxattr = op_setxattr,
    .getxattr = op_getxattr,
    .listxattr = op_listxattr,
    .removexattr = op_removexattr,
};

/* ---- background reclamation ----------------------------------------- */

/* Deletes the objects of slices nobody references any more: data of
 * unlinked files after their last close, and of truncated chunks. Also
 * the background ticks: space_tick, the staged bytes for status. */
/* How often a client looks for snapshots left by dead clients. */
#define SNAPSHOT_CLEANUP_NS (30 * (int64_t)1000000000)

static void *reclaimer_main(void *arg)
{
	pthread_setname_np(pthread_self(), "gr-reclaim");
	struct fs *fs = arg;
	struct meta_slice dead[RECLAIM_BATCH];
	int64_t next_cleanup = 0;
	uint64_t told_packs = 0, told_bytes = 0;
	for (;;) {
		size_t n = 0;
		/* pending bytes that changed while no write came (space.h) */
		space_tick(fs->space);
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
		int err = meta_reclaim(fs->meta, dead, RECLAIM_BATCH, &n);
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
		}
		pthread_mutex_lock(&fs->rc_lock);
		if (!fs->stopping && (n == 0 || err)) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			/* 1 s with a capacity: space_tick's period */
			ts.tv_sec += fs->vol.capacity ? 1 : 2;
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
 * Writeback staging of big files' blocks, in the packer's slot. The test
 * knob GRANARY_TEST_STAGE_DELAY_MS=N holds each upload back N ms, so that
 * a test can kill the client while blocks are still only staged.
 */
static int open_stage(struct fs *fs, const struct fs_opts *o)
{
	const char *delay = getenv("GRANARY_TEST_STAGE_DELAY_MS");
	struct stage_opts so = {
	    .dir = packer_stage_dir(fs->packer),
	    .compress = fs->vol.compress,
	    .block_size = fs->vol.block_size,
	    .uploaders = 4,
	    .max_bytes = o->stage_size ? o->stage_size : 1ull << 30,
	    .test_delay_ms = delay ? (unsigned)strtoul(delay, NULL, 10) : 0,
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

static int open_disk_cache(struct fs *fs, const struct fs_opts *o)
{
	uint64_t size =
	    o->cache_size == UINT64_MAX ? 10ull << 30 : o->cache_size;
	char def[PATH_MAX];
	const char *dirs = cache_dirs(o, def);
	if (size == 0)
		return 0;
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
	    .ns = fs->vol.uuid,
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
	fs->store = cached; /* it owns the backend now */
	fs->disk_cache = 1;
	log_info("disk cache in %s (%llu MiB)", dirs,
		 (unsigned long long)(size >> 20));
	return 0;
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

static int mount_fail(void (*ready)(void *, int, const char *), void *arg,
		      int err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

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

static int mount_fail(void (*ready)(void *, int, const char *), void *arg,
		      int err, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_err("%s", msg);
	if (ready)
		ready(arg, err ? err : EIO, msg);
	return err ? err : EIO;
}

/* Report start-up once: whoever comes first of the watcher and the end of
 * the session loop. */
static void report_ready(struct fs *fs, int err, const char *msg)
{
	pthread_mutex_lock(&fs->ready_lock);
	int first = !fs->ready_done;
	fs->ready_done = 1;
	pthread_mutex_unlock(&fs->ready_lock);
	if (!first)
		return;
	if (err)
		log_err("%s", msg);
	if (fs->ready)
		fs->ready(fs->ready_arg, err, msg);
}

/* Waits for the kernel's INIT, then checks the mount answers a statfs. */
/*
 * Let the kernel read ahead KERNEL_RA_BYTES of a file read through the
 * mount (its backing device starts at 128 KiB, whatever init asked for):
 * a sequential reader then sends 1 MiB requests, several at a time, rather
 * than a stream of 128 KiB ones, each a round trip through the daemon.
 * Best effort: only root may write the setting.
 */
static void kernel_readahead(const char *mountpoint)
{
	char line[PATH_MAX + 512], dev[32], ours[32] = "", mp[PATH_MAX + 1];
	char path[96];
	FILE *f = fopen("/proc/self/mountinfo", "re");

	if (!f)
		return;
	/* "ID PARENT MAJ:MIN ROOT MOUNTPOINT ...": the last match is ours
	 * (a mount point with spaces is escaped and never matches; then the
	 * setting is left alone) */
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%*s %*s %31s %*s %4096s", dev, mp) == 2 &&
		    strcmp(mp, mountpoint) == 0)
			memcpy(ours, dev, sizeof(ours));
	fclose(f);
	if (!ours[0])
		return;
	snprintf(path, sizeof(path), "/sys/class/bdi/%s/read_ahead_kb", ours);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	char kb[16];
	int n = snprintf(kb, sizeof(kb), "%u", KERNEL_RA_BYTES >> 10);
	if (write(fd, kb, (size_t)n) != n)
		log_debug("cannot set the kernel readahead in '%s': %s", path,
			  strerror(errno));
	close(fd);
}

static void *ready_watcher(void *arg)
{
	pthread_setname_np(pthread_self(), "gr-ready");
	struct fs *fs = arg;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 30;
	pthread_mutex_lock(&fs->ready_lock);
	while (!fs->inited && !fs->loop_done)
		if (pthread_cond_timedwait(&fs->ready_cond, &fs->ready_lock,
					   &ts) == ETIMEDOUT)
			break;
	int inited = fs->inited, done = fs->loop_done;
	pthread_mutex_unlock(&fs->ready_lock);
	if (done)
		return NULL; /* the loop ended: fs_mount reports */
	if (!inited) {
		report_ready(fs, ETIMEDOUT,
			     "the kernel did not start the mount within 30 s");
		return NULL;
	}
	/* statfs through the mount from a child process: a tool that runs
	 * this process's threads one at a time (valgrind) would otherwise
	 * hold the thread that must answer while this one waits for it */
	int err = 0;
	pid_t pid = fork();
	if (pid == 0) {
		struct statvfs sv;
		_exit(statvfs(fs->o->mountpoint, &sv) == 0 ? 0 : errno & 0xff);
	}
	if (pid > 0) {
		int status;
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
		err = WIFEXITED(status) ? WEXITSTATUS(status) : EIO;
	} else {
		struct statvfs sv;
		err = statvfs(fs->o->mountpoint, &sv) == 0 ? 0 : errno;
	}
	if (err) {
		char msg[1200];
		snprintf(msg, sizeof(msg), "mount on '%s' does not answer: %s",
			 fs->o->mountpoint, strerror(err));
		report_ready(fs, err, msg);
		return NULL;
	}
	kernel_readahead(fs->o->mountpoint);
	report_ready(fs, 0, NULL);
	return NULL;
}

int fs_mount(const struct fs_opts *o,
	     void (*ready)(void *arg, int err, const char *msg), void *arg)
{
	/* Block buffers (up to the block size, 4 MiB) come and go by the
	 * thousand: served by mmap they go back to the system when freed.
	 * glibc would otherwise raise its mmap threshold after the first
	 * free and keep them in per-thread heaps, where fragmentation let
	 * the daemon's memory grow far past --buffer-size. */
	mallopt(M_MMAP_THRESHOLD, 256 * 1024);
	struct fs *fs = calloc(1, sizeof(*fs));
	char url[1024], mopts[2048];
	int err;

	if (!fs)
		return mount_fail(ready, arg, ENOMEM, "out of memory");
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
	pthread_mutex_init(&fs->ready_lock, NULL);
	pthread_cond_init(&fs->ready_cond, NULL);
	fs->ready = ready;
	fs->ready_arg = arg;
	fs->nbuckets = 1 << 12;
	fs->buckets = calloc(fs->nbuckets, sizeof(*fs->buckets));
	if (!fs->buckets) {
		err = mount_fail(ready, arg, ENOMEM, "out of memory");
		goto free_fs;
	}
	if (o->read_only) {
		struct namecache_opts no = {
		    .max_bytes = o->name_cache_size,
		    .ttl_ns = (int64_t)(fs->entry_timeout * 1e9)};
		err = namecache_open(&no, &fs->names);
		if (err) {
			err = mount_fail(ready, arg, err,
					 "cannot make a name cache of %llu "
					 "bytes: %s",
					 (unsigned long long)o->name_cache_size,
					 gr_strerror(err));
			goto free_fs;
		}
	}

	meta_url_redact(o->meta_url, url, sizeof(url));
	struct meta_opts mo = {.read_only = o->read_only};
	err = meta_open(o->meta_url, &mo, &fs->meta);
	if (err) {
		err =
		    mount_fail(ready, arg, err, "cannot open metadata '%s': %s",
			       url, gr_strerror(err));
		goto free_fs;
	}
	err = meta_load_volume(fs->meta, &fs->vol);
	if (err) {
		err = mount_fail(ready, arg, err,
				 "cannot load volume from '%s': %s", url,
				 gr_strerror(err));
		goto close_meta;
	}
	err = space_open(fs->read_only ? 0 : fs->vol.capacity, space_usage, fs,
			 &fs->space);
	if (err) {
		err = mount_fail(ready, arg, err, "out of memory");
		goto close_meta;
	}
	struct objstore_creds creds = {0};
	enum keys_from keys = mount_creds(fs, &creds);
	err = objstore_open(fs->vol.storage, &creds, &fs->store);
	if (err) {
		err =
		    mount_fail(ready, arg, err, "cannot open storage '%s': %s",
			       fs->vol.storage, gr_strerror(err));
		goto close_meta;
	}
	char why[2048]; /* the storage URL and two volume names fit */
	err = check_owner(fs, o->read_only, keys, why, sizeof(why));
	if (err) {
		err = mount_fail(ready, arg, err, "%s", why);
		goto close_store;
	}
	err = open_disk_cache(fs, o);
	if (err) {
		err = mount_fail(ready, arg, err,
				 "cannot use cache directory '%s': %s",
				 o->cache_dir, gr_strerror(err));
		goto close_store;
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
	if (err) {
		err =
		    mount_fail(ready, arg, err, "cannot set up block store: %s",
			       gr_strerror(err));
		goto close_store;
	}
	err =
	    wpool_open(fs->cs, o->max_uploads ? o->max_uploads : 8,
		       o->buffer_size ? o->buffer_size : 300u << 20, &fs->pool);
	if (err) {
		err = mount_fail(ready, arg, err, "cannot start uploaders: %s",
				 gr_strerror(err));
		goto close_cs;
	}
	if (o->pack_max && !o->read_only) {
		char def[PATH_MAX], stage[PATH_MAX + 64];
		const char *dirs = cache_dirs(o, def);
		int wb = o->writeback;
		/* the first cache directory, beside the cache of the volume */
		snprintf(stage, sizeof(stage), "%.*s/staging-%s",
			 (int)strcspn(dirs, ":"), dirs, fs->vol.uuid);
		struct packer_opts po = {
		    .pack_size = o->pack_size ? o->pack_size : 4u << 20,
		    .window_ms =
			(unsigned)(o->pack_window_ms >= 0 ? o->pack_window_ms
				   : wb			  ? 2000
							  : 10),
		    .compress = fs->vol.compress,
		    .stage_dir = wb ? stage : NULL,
		    .uploaders = 4,
		    .max_staged = 64,
		};
		struct packer_cbs pc = {fs, pcb_new_id, pcb_total,
					wb ? pcb_staged : NULL};
		err = packer_open(fs->store, &po, &pc, &fs->packer);
		if (err) {
			err = mount_fail(
			    ready, arg, err, "cannot set up packing%s: %s",
			    wb ? " (writeback staging)" : "", gr_strerror(err));
			goto close_pool;
		}
		/* a packed slice is one frame, smaller than a pack */
		uint32_t pmax = o->pack_max;
		if (pmax > fs->vol.block_size)
			pmax = fs->vol.block_size;
		if (pmax > po.pack_size / 2)
			pmax = po.pack_size / 2;
		wpool_set_packer(fs->pool, fs->packer, pmax);
		fs->writeback = wb;
		if (wb) {
			err = open_stage(fs, o);
			if (err) {
				err = mount_fail(
				    ready, arg, err,
				    "cannot set up writeback staging "
				    "of big files: %s",
				    gr_strerror(err));
				goto close_pool;
			}
		}
	}
	fs->root = META_ROOT_INO;
	if (o->subdir && *o->subdir) {
		err = resolve_subdir(fs, o->subdir, &fs->root);
		if (err) {
			err = mount_fail(ready, arg, err,
					 "cannot mount subdirectory '%s': %s",
					 o->subdir, gr_strerror(err));
			goto close_pool;
		}
	}
	err = meta_session_open(fs->meta, o->mountpoint);
	if (err) {
		err = mount_fail(ready, arg, err, "cannot register session: %s",
				 gr_strerror(err));
		goto close_pool;
	}
	/* without it, each release is a round trip of its own */
	if (!o->read_only && closer_open(fs->meta, CLOSE_DELAY_MS, reclaim_soon,
					 fs, &fs->closer))
		log_warn("cannot start the closer thread: releasing files one "
			 "by one");

	snprintf(
	    mopts, sizeof(mopts),
	    "fsname=granary:%s,subtype=granary,default_permissions%s%s%s%s",
	    fs->vol.name, o->allow_other ? ",allow_other" : "",
	    o->read_only ? ",ro" : "", o->fuse_opts && *o->fuse_opts ? "," : "",
	    o->fuse_opts ? o->fuse_opts : "");
	char *argv[] = {"granary", "-o", mopts, "-d", NULL};
	struct fuse_args args = FUSE_ARGS_INIT(o->debug ? 4 : 3, argv);
	fs->se = fuse_session_new(&args, &granary_ops, sizeof(granary_ops), fs);
	fuse_opt_free_args(&args);
	if (!fs->se) {
		err = mount_fail(
		    ready, arg, EINVAL,
		    "cannot start FUSE session (bad -o options '%s'?)",
		    o->fuse_opts ? o->fuse_opts : "");
		goto close_session;
	}
	if (fuse_set_signal_handlers(fs->se) != 0) {
		err = mount_fail(ready, arg, EIO, "cannot set signal handlers");
		goto destroy_se;
	}
	if (fuse_session_mount(fs->se, o->mountpoint) != 0) {
		err = mount_fail(ready, arg, EIO, "cannot mount on '%s'",
				 o->mountpoint);
		goto remove_handlers;
	}
	use_fusedev(fs);
	if (!o->read_only &&
	    pthread_create(&fs->reclaimer, NULL, reclaimer_main, fs) == 0)
		fs->reclaimer_running = 1;

	log_info("mounted volume '%s' (%s) on %s", fs->vol.name,
		 fs->vol.storage, o->mountpoint);
	pthread_t watcher;
	int watching = pthread_create(&watcher, NULL, ready_watcher, fs) == 0;
	if (!watching)
		report_ready(fs, 0, NULL);

	struct fuse_loop_config *lc = fuse_loop_cfg_create();
	fuse_loop_cfg_set_max_threads(lc, 32);
	fuse_loop_cfg_set_idle_threads(lc, 8);
	err = fuse_session_loop_mt(fs->se, lc);
	fuse_loop_cfg_destroy(lc);
	if (err < 0)
		err = -err;
	else
		err = 0; /* a signal or an unmount: a clean stop */

	pthread_mutex_lock(&fs->ready_lock);
	fs->loop_done = 1;
	pthread_cond_broadcast(&fs->ready_cond);
	pthread_mutex_unlock(&fs->ready_lock);
	if (watching)
		pthread_join(watcher, NULL);
	{
		char msg[1200];
		snprintf(msg, sizeof(msg),
			 "the mount on '%s' stopped while starting: %s",
			 o->mountpoint, strerror(err ? err : EPROTO));
		report_ready(fs, err ? err : EPROTO, msg);
	}

	fuse_session_unmount(fs->se);
	flush_all(fs); /* destroy flushed already unless the kernel died */
	closer_close(fs->closer); /* its releases may free data to reclaim */
	fs->closer = NULL;
	if (fs->reclaimer_running) {
		pthread_mutex_lock(&fs->rc_lock);
		fs->stopping = 1;
		pthread_cond_signal(&fs->rc_cond);
		pthread_mutex_unlock(&fs->rc_lock);
		pthread_join(fs->reclaimer, NULL);
	}
	log_info("unmounted %s", o->mountpoint);
remove_handlers:
	fuse_remove_signal_handlers(fs->se);
destroy_se:
	fuse_session_destroy(fs->se);
close_session:
	closer_close(fs->closer);
	meta_session_close(fs->meta);
close_pool:
	wpool_close(fs->pool);
	stage_close(fs->stage); /* before the packer lets the slot go */
	packer_close(fs->packer);
close_cs:
	chunkstore_close(fs->cs);
close_store:
	objstore_close(fs->store);
close_meta:
	meta_close(fs->meta);
	space_free(fs->space);
free_fs:
	if (fs->buckets) {
		for (size_t i = 0; i < fs->nbuckets; i++) {
			struct node *n = fs->buckets[i], *next;
			for (; n; n = next) {
				next = n->next;
				chunk_cache_clear(n);
				pthread_mutex_destroy(&n->lock);
				free(n);
			}
		}
		free(fs->buckets);
	}
	namecache_close(fs->names);
	pthread_mutex_destroy(&fs->table_lock);
	pthread_mutex_destroy(&fs->rc_lock);
	pthread_cond_destroy(&fs->rc_cond);
	pthread_mutex_destroy(&fs->ready_lock);
	pthread_cond_destroy(&fs->ready_cond);
	free(fs);
	return err;
}
