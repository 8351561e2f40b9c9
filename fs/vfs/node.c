/*
 * node.c - the node table: what this client knows about an inode beyond
 * what the kernel caches (its lookup count, open handles, write buffer, a
 * small cache of chunk slice lists, dropped at every open: close-to-open),
 * the attributes it hands out, and the glue between a node and the data
 * path (its writer, the reader's slice lists, the packer's and the stage's
 * metadata calls). Locks: vfs_int.h.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "meta/meta_volume.h"
#include "meta/meta_objects.h"
#include "fs/data/packer.h"
#include "fs/data/stage.h"
#include "fs/data/writer.h"
#include "fs/vfs/compactq.h"
#include "fs/vfs/hooks.h"
#include "fs/vfs/space.h"
#include "fs/vfs/vfs_int.h"
#include "lib/log.h"

uint64_t vfs_m_ino(struct fs *fs, uint64_t ino)
{
	return ino == VFS_ROOT_ID ? fs->root : ino;
}

uint64_t vfs_f_ino(struct fs *fs, uint64_t ino)
{
	return ino == fs->root ? VFS_ROOT_ID : ino;
}

/* The node of ino, or NULL; with table_lock held. The inode number is its
 * own hash: numbers are unique. */
static struct node *node_find_locked(struct fs *fs, uint64_t ino)
{
	struct hash_node *h = hash_find(&fs->nodes, ino, NULL, NULL);

	return h ? hash_entry(h, struct node, hn) : NULL;
}

/* Find (create) the node of ino and pin it; with table_lock held. */
static struct node *node_get_locked(struct fs *fs, uint64_t ino, int create)
{
	struct node *n = node_find_locked(fs, ino);
	if (n)
		goto found;
	if (!create)
		return NULL;
	n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	n->ino = ino;
	pthread_mutex_init(&n->lock, NULL);
	hash_insert(&fs->nodes, &n->hn, ino);
found:
	n->pins++;
	return n;
}

struct node *node_get(struct fs *fs, uint64_t ino, int create)
{
	pthread_mutex_lock(&fs->table_lock);
	struct node *n = node_get_locked(fs, ino, create);
	pthread_mutex_unlock(&fs->table_lock);
	return n;
}

void chunk_cache_clear(struct node *n)
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
	hash_remove(&fs->nodes, &n->hn);
	gr_assert(n->writer == NULL);
	chunk_cache_clear(n);
	pthread_mutex_destroy(&n->lock);
	free(n);
}

void node_unpin(struct fs *fs, struct node *n)
{
	if (!n)
		return;
	pthread_mutex_lock(&fs->table_lock);
	gr_assert(n->pins > 0);
	n->pins--;
	node_maybe_free_locked(fs, n);
	pthread_mutex_unlock(&fs->table_lock);
}

/* The kernel now holds one more lookup of ino, whose attributes were a,
 * found inside a version when frozen. A read-only client keeps the
 * attributes for the next open (see file_open); every client notes what
 * the kernel is handed of a file (node_kattr_note). */
void node_lookup_ref(struct fs *fs, uint64_t ino, const struct meta_attr *a,
		     int frozen, uint64_t parent)
{
	pthread_mutex_lock(&fs->table_lock);
	struct node *n = node_get_locked(fs, ino, 1);
	if (n) {
		n->nlookup++;
		if (parent)
			__atomic_store_n(&n->parent, parent, __ATOMIC_RELAXED);
		n->frozen |= frozen;
		n->trashed = 0; /* a name reaches it again */
		if (frozen)
			__atomic_store_n(&fs->any_frozen, 1, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&fs->table_lock);
	if (!n)
		return;
	if (a && (fs->read_only || a->type == META_FILE)) {
		pthread_mutex_lock(&n->lock);
		if (a->type == META_FILE)
			node_kattr_note(n, a); /* the reply hands a over */
		if (fs->read_only)
			node_note_attr(n, a);
		pthread_mutex_unlock(&n->lock);
	}
	node_unpin(fs, n);
}

/* A rename moved ino into directory parent (volume inodes). */
void node_set_parent(struct fs *fs, uint64_t ino, uint64_t parent)
{
	pthread_mutex_lock(&fs->table_lock);
	struct node *n = node_find_locked(fs, ino);
	if (n)
		__atomic_store_n(&n->parent, parent, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&fs->table_lock);
}

void node_xattrs_none(struct fs *fs, uint64_t ino, int64_t seen_ns)
{
	struct node *n = node_get(fs, ino, 0);
	if (!n)
		return;
	pthread_mutex_lock(&n->lock);
	if (n->xattr_set_ns < seen_ns)
		n->noxattr_ns = mono_ns() + (int64_t)(fs->attr_timeout * 1e9);
	pthread_mutex_unlock(&n->lock);
	node_unpin(fs, n);
}

uint64_t node_parent(struct fs *fs, uint64_t ino)
{
	uint64_t p = 0;
	pthread_mutex_lock(&fs->table_lock);
	struct node *n = node_find_locked(fs, ino);
	if (n)
		p = __atomic_load_n(&n->parent, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&fs->table_lock);
	return p;
}

/*
 * Is the kernel's inode ino inside a version? Versions are read-only: the
 * mark comes from the lookup that made the kernel know the inode (through
 * DIR/.versions, or below a marked directory), and every change to a
 * marked inode, or inside a marked directory, is EROFS.
 */
int frozen(struct fs *fs, uint64_t ino)
{
	uint64_t vino = vfs_m_ino(fs, ino);
	int f = 0;

	if (ino == VFS_ROOT_ID)
		return fs->root_frozen;
	/* a client that never looked into a version skips the table: the
	 * check runs on every lookup and create */
	if (!__atomic_load_n(&fs->any_frozen, __ATOMIC_RELAXED))
		return 0;
	pthread_mutex_lock(&fs->table_lock);
	struct node *n = node_find_locked(fs, vino);
	if (n)
		f = n->frozen;
	pthread_mutex_unlock(&fs->table_lock);
	return f;
}

/*
 * A file this client removed into the trash keeps a name there, and so a
 * link count of 1; through descriptors still open it shows 0, as after an
 * unlink (POSIX), until a lookup reaches it by a name again (a restore).
 * Other clients' descriptors show 1 (docs/operations.md, "Trash").
 */
void node_mark_trashed(struct fs *fs, uint64_t ino)
{
	pthread_mutex_lock(&fs->table_lock);
	struct node *n = node_find_locked(fs, ino);
	if (n) {
		n->trashed = 1;
		__atomic_store_n(&fs->any_trashed, 1, __ATOMIC_RELAXED);
		/* the trash is outside every quota: its writes from now on
		 * charge none */
		__atomic_store_n(&n->parent, 0, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&fs->table_lock);
}

int node_trashed(struct fs *fs, uint64_t ino)
{
	int t = 0;

	if (!__atomic_load_n(&fs->any_trashed, __ATOMIC_RELAXED))
		return 0;
	pthread_mutex_lock(&fs->table_lock);
	struct node *n = node_find_locked(fs, ino);
	if (n)
		t = n->trashed;
	pthread_mutex_unlock(&fs->table_lock);
	return t;
}

void node_forget(struct fs *fs, uint64_t ino, uint64_t nlookup)
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
int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Remember attributes fresh from the volume; node->lock held. */
void node_note_attr(struct node *n, const struct meta_attr *a)
{
	n->length = a->length;
	n->attr = *a;
	n->attr_ns = mono_ns();
	n->seen = 1;
}

/* Do x and y say the same data? ctime catches what a restored mtime
 * would hide. */
static int attr_same_data(const struct meta_attr *x, const struct meta_attr *y)
{
	return x->length == y->length && x->mtime == y->mtime &&
	       x->mtimens == y->mtimens && x->ctime == y->ctime &&
	       x->ctimens == y->ctimens;
}

/* Did the file's data change since node_note_attr? node->lock held. */
int node_unchanged(const struct node *n, const struct meta_attr *a)
{
	return n->seen && attr_same_data(&n->attr, a);
}

/*
 * What the kernel holds of a file's attributes. It keeps a size for the
 * attribute timeout and an open does not refresh it, so an open on this
 * node of a file another node just rewrote would read the new bytes cut
 * to the old length. The node follows what its replies handed the kernel
 * (lookup, readdirplus, create, getattr, setattr): nothing yet, or
 * nothing since a write through this node, after which the kernel keeps
 * the size its writes made and asks again for the rest (KATTR_NONE,
 * vfs_write), the same attributes every time (KATTR_ONE, kattr), or
 * some that differ (KATTR_MIXED: replies racing with a change; the kernel
 * may hold any of them). A reply is noted before it is sent. An open
 * whose fresh attributes the kernel may not hold drops the kernel's copy
 * (node_kattr_stale) and starts over from them: what the kernel asks for
 * next is noted, and differs from them only after another change. A
 * reply the kernel discards (asked before the drop, or interrupted) only
 * costs a needless drop at a later open.
 */
void node_kattr_note(struct node *n, const struct meta_attr *a)
{
	if (n->kstate == KATTR_NONE) {
		n->kattr = *a;
		n->kstate = KATTR_ONE;
	} else if (n->kstate == KATTR_ONE && !attr_same_data(&n->kattr, a))
		n->kstate = KATTR_MIXED;
}

void node_kattr_hand(struct fs *fs, uint64_t ino, const struct meta_attr *a)
{
	if (a->type != META_FILE)
		return;
	struct node *n = node_get(fs, ino, 0);
	if (!n)
		return; /* the kernel holds nothing of it */
	pthread_mutex_lock(&n->lock);
	node_kattr_note(n, a);
	pthread_mutex_unlock(&n->lock);
	node_unpin(fs, n);
}

/* May the kernel hold other attributes than a (fresh from the volume)?
 * Then the caller drops the kernel's copy (attributes and pages) before
 * its reply. node->lock held. */
int node_kattr_stale(struct node *n, const struct meta_attr *a)
{
	int stale = n->kstate == KATTR_MIXED ||
		    (n->kstate == KATTR_ONE && !attr_same_data(&n->kattr, a));
	if (stale) {
		n->kattr = *a;
		n->kstate = KATTR_ONE;
	}
	return stale;
}

mode_t type_bits(uint8_t type)
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

void attr_to_stat(struct fs *fs, uint64_t ino, const struct meta_attr *a,
		  uint64_t length, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = vfs_f_ino(fs, ino);
	st->st_mode = type_bits(a->type) | (a->mode & 07777);
	st->st_nlink = a->nlink;
	if (a->type == META_FILE && a->nlink == 1 && node_trashed(fs, ino))
		st->st_nlink = 0;
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

/* Length as this client sees it: buffered writes count. Without the
 * node's lock: a flush holds it across uploads and the commit, and stat
 * of a file being saved must not wait for them. */
uint64_t visible_length(struct fs *fs, uint64_t ino, const struct meta_attr *a)
{
	uint64_t len = a->length;
	struct node *n = node_get(fs, ino, 0);
	if (!n)
		return len;
	uint64_t end = __atomic_load_n(&n->wend, __ATOMIC_ACQUIRE);
	node_unpin(fs, n);
	return end > len ? end : len;
}

void entry_take(struct fs *fs, uint64_t parent, uint64_t ino,
		const struct meta_attr *a, uint64_t length, int frozen,
		struct vfs_entry *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = vfs_f_ino(fs, ino);
	e->attr_timeout = fs->attr_timeout;
	e->entry_timeout = fs->entry_timeout;
	node_lookup_ref(fs, ino, a, frozen, parent);
	attr_to_stat(fs, ino, a, length, &e->attr);
}

/*
 * A create makes the kernel drop its copy of the directory's attributes
 * and ask for them (GETATTR) at the next lookup there: one round trip per
 * file of an ingest. The create's script hands out the directory's
 * attributes as it left them; they answer that GETATTR while nothing else
 * changed through this client since (ns_gen, bumped after every other
 * change, before its reply) and for what is left of the attribute timeout
 * after the create, which is all the kernel keeps them: as if the
 * create's reply had carried them. Unlink and rename (of no directory)
 * hand out and note the parents' attributes the same way; a setattr of
 * a file changes no directory's. Changes by other clients show after
 * the attribute timeout, as they do everywhere else.
 */
void ns_changed(struct fs *fs)
{
	__atomic_fetch_add(&fs->ns_gen, 1, __ATOMIC_SEQ_CST);
}

/* gen: fs->ns_gen before the create started */
void dir_attr_note(struct fs *fs, uint64_t dir, const struct meta_attr *pa,
		   uint64_t gen)
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
		__atomic_store_n(&n->dattr_ns, mono_ns(), __ATOMIC_RELEASE);
		n->dattr_gen = gen;
	}
	pthread_mutex_unlock(&n->lock);
	node_unpin(fs, n);
}

/* The noted attributes of directory ino, and how long they stay valid. */
int dir_attr_get(struct fs *fs, uint64_t ino, struct meta_attr *a, double *left)
{
	struct node *n = node_get(fs, ino, 0);
	int ok = 0;
	if (!n)
		return 0;
	/* only directories note attributes: a file's lock is not taken,
	 * which a flush holds across its uploads and commit */
	if (!__atomic_load_n(&n->dattr_ns, __ATOMIC_ACQUIRE)) {
		node_unpin(fs, n);
		return 0;
	}
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

static int wcb_new_id(void *arg, uint64_t *id)
{
	struct wctx *c = arg;
	return meta_new_slice_id(c->fs->meta, id);
}

int pcb_new_id(void *arg, uint64_t *id)
{
	struct fs *fs = arg;
	return meta_new_slice_id(fs->meta, id);
}

int pcb_total(void *arg, uint64_t pack, uint64_t total, int *dead)
{
	struct fs *fs = arg;
	return meta_pack_total(fs->meta, pack, total, dead);
}

/* writeback: objects staged here, named for other clients' reclamation */
int pcb_staged(void *arg, uint64_t pack, int done)
{
	struct fs *fs = arg;
	return done ? meta_staging_done(fs->meta, 'p', pack, 0)
		    : meta_staging_mark(fs->meta, 'p', pack, 0);
}

int scb_staged(void *arg, uint64_t id, uint32_t idx, int done)
{
	struct fs *fs = arg;
	return done ? meta_staging_done(fs->meta, 'b', id, idx)
		    : meta_staging_mark(fs->meta, 'b', id, idx);
}

/* chunkstore: frames of packs this node has staged but not uploaded */
int ccb_staged_get(void *arg, uint64_t pack, uint32_t off, uint32_t len,
		   void **data)
{
	struct fs *fs = arg;
	return fs->packer ? packer_staged_get(fs->packer, pack, off, len, data)
			  : ENOENT;
}

/* chunkstore: blocks this node has staged but not uploaded */
int ccb_staged_block(void *arg, uint64_t id, uint32_t idx, void **enc,
		     size_t *n)
{
	struct fs *fs = arg;
	return stage_get(fs->stage, id, idx, enc, n);
}

void ccb_staged_drop(void *arg, uint64_t id)
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
	if (hooks_kill_before_commit())
		raise(SIGKILL);
	int err = meta_write_q(c->fs->meta, &c->node->qc.c, ino, s, n, &a);
	if (err)
		return err;
	for (size_t i = 0; i < n; i++)
		if (i == 0 || s[i].idx != s[i - 1].idx)
			compactq_note(c->fs->compactq, ino, s[i].idx);
	uint64_t bytes = 0;
	for (size_t i = 0; i < n; i++)
		if (s[i].s.id)
			bytes += s[i].s.len;
	if (bytes > c->node->taken)
		bytes = c->node->taken;
	c->node->taken -= bytes;
	space_done(c->fs->space, bytes);
	quota_done(&c->node->qc, bytes);
	chunk_cache_clear(c->node);
	node_note_attr(c->node, &a);
	return 0;
}

/* The writer of a node, created on first use; node->lock held. */
int node_writer(struct fs *fs, struct node *n, struct writer **out)
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

/* What fs->space and the quotas accepted for a node's writes and no
 * commit took: none of it will be committed (an overwrite counted twice,
 * or data dropped after an error). node->lock held. */
void node_space_drop(struct node *n)
{
	if (n->taken && n->writer) {
		space_drop(n->wctx.fs->space, n->taken);
		quota_drop(&n->qc, n->taken);
	}
	n->taken = 0;
}

/*
 * The quotas a node's bytes count in, from its parent hint, into n->qc:
 * at a write that starts a new charge (n->taken 0), and before the data
 * calls that change stored bytes themselves (truncate, fallocate, clone).
 * Free without quotas. A parent gone (ENOENT, ENOTDIR) leaves the chain
 * empty: the file's name is elsewhere now, or gone. node->lock held.
 */
int node_quota_chain(struct fs *fs, struct node *n)
{
	gr_assert(n->taken == 0);
	uint64_t dir = __atomic_load_n(&n->parent, __ATOMIC_RELAXED);
	int err = quota_chain_of(fs->quota, dir, &n->qc);
	return err == ENOENT || err == ENOTDIR ? 0 : err;
}

/* Flush buffered writes of a node; node->lock held. */
int node_flush(struct node *n)
{
	int err = 0;
	if (n->writer && writer_dirty(n->writer))
		err = writer_flush(n->writer);
	node_space_drop(n);
	/* everything is committed, or dropped with the error */
	__atomic_store_n(&n->wend, 0, __ATOMIC_RELEASE);
	return err;
}

void node_writer_close(struct node *n)
{
	node_space_drop(n);
	__atomic_store_n(&n->wend, 0, __ATOMIC_RELEASE);
	if (!n->writer)
		return;
	writer_close(n->writer);
	n->writer = NULL;
}

int rcb_chunk(void *arg, uint64_t ino, uint32_t idx, struct meta_slice **s,
	      size_t *n)
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
void node_cache_chunk0(struct fs *fs, uint64_t ino, const struct meta_slice *s,
		       size_t n)
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
int space_usage(void *arg, uint64_t pending, uint64_t *used)
{
	struct fs *fs = arg;
	uint64_t u, others;
	int err = meta_space_usage(fs->meta, pending, &u, &others);
	if (!err)
		*used = u + others;
	return err;
}

void vfs_flush_all(struct fs *fs)
{
	/* pin every node with a writer, then flush outside table_lock */
	for (;;) {
		struct node *victim = NULL;
		pthread_mutex_lock(&fs->table_lock);
		for (struct hash_node *h = hash_first(&fs->nodes); h;
		     h = hash_next(&fs->nodes, h)) {
			struct node *n = hash_entry(h, struct node, hn);
			if (n->writer) {
				victim = n;
				n->pins++;
				break;
			}
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
