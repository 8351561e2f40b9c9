/*
 * file.c - open files: open and create (close-to-open, direct_io
 * choices), read (from pinned cached blocks, with readahead), write
 * (through the node's writer, within the volume's capacity), flush,
 * release, fallocate and copy_file_range.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include "meta/meta_snap.h"
#include "fs/data/chunkstore.h"
#include "fs/data/readahead.h"
#include "fs/data/reader.h"
#include "fs/data/writer.h"
#include "fs/vfs/closer.h"
#include "fs/vfs/plan.h"
#include "fs/vfs/quota.h"
#include "fs/vfs/space.h"
#include "fs/vfs/vfs_int.h"
#include "lib/errors.h"
#include "lib/log.h"

static void fh_free(struct fs *fs, struct vfs_fh *h)
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
 * or setcap shows after the attribute timeout, as for xattrs_absent.
 */
static int dio_allowed(struct fs *fs, struct node *n, const struct meta_attr *a)
{
	if (a->mode & (S_ISUID | S_ISGID))
		return 0;
	pthread_mutex_lock(&n->lock);
	n->privs = 0; /* a setxattr or chmod from here on sets it again */
	int known = mono_ns() < n->noxattr_ns;
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
 * inode) and fetches fresh attributes (close-to-open: when they are not
 * what the kernel holds, its copy is dropped). A read-only client
 * serves dataset epochs: it reuses attributes younger than the attribute
 * timeout and registers nothing, so a warm epoch costs no round trip.
 * created: the inode was just made by meta_create, which registered this
 * open and handed out *a.
 */
static int file_open(struct fs *fs, struct node *n, int flags,
		     struct vfs_open *o, struct meta_attr *a, int created)
{
	int first = 0, fresh = 0, alone = 0, err;
	uint64_t trash_dir = 0;

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
		alone = ++n->opens == 1;
		pthread_mutex_unlock(&fs->table_lock);
		err = fresh ? 0
			    : meta_getattr_trash(fs->meta, n->ino, a, &trash_dir);
	} else {
		pthread_mutex_lock(&fs->table_lock);
		first = !n->meta_open;
		alone = ++n->opens == 1;
		n->meta_open = 1;
		pthread_mutex_unlock(&fs->table_lock);
		err = first ? meta_file_open(fs->meta, n->ino, a, &trash_dir)
			    : meta_getattr_trash(fs->meta, n->ino, a, &trash_dir);
	}
	/*
	 * A file no name leads to, opened by a path (nothing else here holds
	 * it open: an open file's /proc/PID/fd link may reopen it): the
	 * kernel's cached name is stale, another client removed or renamed a
	 * file over it. ESTALE makes the kernel look the name up again
	 * (close-to-open across a rename on another node, t0242). With the
	 * trash on, such a file went into it and keeps its link: the same
	 * when the trash holds it and the kernel found it elsewhere (opened
	 * through its name in the trash, it opens).
	 */
	uint64_t found_in = __atomic_load_n(&n->parent, __ATOMIC_RELAXED);
	if (!err && !created && alone &&
	    (a->nlink == 0 ||
	     (trash_dir && found_in && found_in != trash_dir)))
		err = ESTALE;
	if (err) {
		pthread_mutex_lock(&fs->table_lock);
		n->opens--;
		if (first)
			n->meta_open = 0;
		pthread_mutex_unlock(&fs->table_lock);
		if (first && err == ESTALE)
			meta_file_close(fs->meta, n->ino);
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
	int dio =
	    alone && (flags & O_ACCMODE) == O_WRONLY && dio_allowed(fs, n, a);
	/* A read-only open of a big file (a checkpoint read back) reads
	 * past the page cache too: each read's bytes go straight into the
	 * reader's buffer. Only where the kernel maps such an open shared
	 * through the page cache (fusedev.h), else safetensors' mmap would
	 * fail. Readahead is then the daemon's alone (fh_readahead). */
	int dio_read = (flags & O_ACCMODE) == O_RDONLY &&
		       a->length >= fs->direct_read && fs->kern.dio_mmap &&
		       fs->kern.dio_mmap(fs->kern.arg);
	pthread_mutex_lock(&n->lock);
	int unchanged = node_unchanged(n, a) && !n->dio;
	/* close-to-open: forget slice lists another client may have changed */
	if (!unchanged)
		chunk_cache_clear(n);
	/* and the kernel's size and pages of the file it had (node.c) */
	int kstale = !created && node_kattr_stale(n, a);
	n->dio = 0;
	if (!fresh && !(n->writer && writer_dirty(n->writer)))
		node_note_attr(n, a);
	pthread_mutex_unlock(&n->lock);
	/* Before the reply, so that the open returns with them gone: the
	 * kernel asks for the attributes at the first read or stat (one
	 * round trip, on a change alone). The kernel's open holds no lock
	 * of the inode (no atomic O_TRUNC, no writeback cache: ops.c
	 * init), and a read that holds a page waits for another thread. */
	if (kstale && fs->kern.inval_inode)
		fs->kern.inval_inode(fs->kern.arg, vfs_f_ino(fs, n->ino), 0, 0);

	struct vfs_fh *h = malloc(sizeof(*h));
	if (!h)
		return ENOMEM; /* the open stays counted; release never comes */
	h->node = n;
	h->owners = NULL;
	h->flags = flags;
	h->dio = dio;
	pthread_mutex_init(&h->ra_lock, NULL);
	readahead_init(&h->ra);
	o->fh = h;
	o->keep_cache = unchanged && !kstale;
	o->direct_io = dio || dio_read;
	return 0;
}

int vfs_open(struct fs *fs, const struct vfs_caller *c, uint64_t ino, int flags,
	     struct vfs_open *o)
{
	struct meta_attr a;
	if ((fs->read_only || frozen(fs, ino)) &&
	    (flags & O_ACCMODE) != O_RDONLY)
		return EROFS;
	struct node *n = node_get(fs, vfs_m_ino(fs, ino), 1);
	if (!n)
		return ENOMEM;
	int err = file_open(fs, n, flags, o, &a, 0);
	/* the readers' place in the plans naming it (plan.h) */
	if (!err && (flags & O_ACCMODE) != O_WRONLY)
		plans_opened(fs->plans, n->ino, c ? c->pid : 0);
	node_unpin(fs, n);
	return err;
}

void vfs_open_undo(struct fs *fs, struct vfs_fh *fh)
{
	fh_free(fs, fh);
}

int vfs_create(struct fs *fs, const struct vfs_caller *c, uint64_t parent,
	       const char *name, mode_t mode, int flags, struct vfs_entry *e,
	       struct vfs_open *o)
{
	uint64_t ino;
	struct meta_attr a;
	struct meta_attr pa;
	uint64_t gen = __atomic_load_n(&fs->ns_gen, __ATOMIC_SEQ_CST);
	if (frozen(fs, parent))
		return EROFS;
	/* the open is registered by the same script that creates the file */
	int err = meta_create(fs->meta, vfs_m_ino(fs, parent), name,
			      mode & 07777, c->uid, c->gid, &ino, &a, &pa);
	if (err) {
		ns_changed(fs); /* EIO: it may have been made */
		return err;
	}
	dir_attr_note(fs, vfs_m_ino(fs, parent), &pa, gen);
	struct node *n = node_get(fs, ino, 1);
	if (!n) {
		meta_file_close(fs->meta, ino);
		return ENOMEM;
	}
	/* made without xattrs: before file_open, whose dio_allowed() would
	 * otherwise ask the volume for a capability */
	pthread_mutex_lock(&n->lock);
	n->noxattr_ns = mono_ns() + (int64_t)(fs->attr_timeout * 1e9);
	pthread_mutex_unlock(&n->lock);
	err = file_open(fs, n, flags, o, &a, 1);
	node_unpin(fs, n);
	if (!err)
		entry_take(fs, vfs_m_ino(fs, parent), ino, &a, a.length, 0, e);
	return err;
}

/* ---- read ----------------------------------------------------------- */

/* A read answered from pinned runs of cached blocks. */
#define READ_RUNS      64
#define READ_RUNS_FULL (-1) /* internal: more runs than that */

struct read_runs {
	struct chunkstore *cs;
	struct iovec iov[READ_RUNS];
	struct chunkstore_pin *pin[READ_RUNS];
	size_t n;
};

static int read_run(void *arg, const void *data, size_t len,
		    struct chunkstore_pin *pin)
{
	struct read_runs *r = arg;

	if (r->n == READ_RUNS) {
		chunkstore_unpin(r->cs, pin);
		return READ_RUNS_FULL;
	}
	r->iov[r->n] = (struct iovec){(void *)(uintptr_t)data, len};
	r->pin[r->n++] = pin;
	return 0;
}

static void read_runs_release(struct read_runs *r)
{
	for (size_t i = 0; i < r->n; i++)
		chunkstore_unpin(r->cs, r->pin[i]);
	r->n = 0;
}

/* Account a read of h and say what to fetch ahead of it: the file's
 * window is capped at its share of the read-ahead memory (see ra_total),
 * and the count of streams follows the window opening and closing. */
static void fh_readahead(struct fs *fs, struct vfs_fh *h, uint64_t off,
			 size_t size, uint64_t length, uint64_t *pf_off,
			 uint64_t *pf_len)
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

int vfs_read(struct fs *fs, struct vfs_fh *h, uint64_t off, size_t size,
	     void (*emit)(void *arg, const struct iovec *iov, int n), void *arg)
{
	struct node *n = h->node;

	pthread_mutex_lock(&n->lock);
	int err = node_flush(n); /* read your own writes */
	uint64_t length = n->length;
	pthread_mutex_unlock(&n->lock);
	if (err)
		return err;
	if (off >= length || size == 0) {
		static const struct iovec none;
		emit(arg, &none, 0);
		return 0;
	}

	size_t got = 0;
	struct rctx rc = {fs, n};
	uint64_t pf_off, pf_len;
	fh_readahead(fs, h, off, size, length, &pf_off, &pf_len);
	if (pf_len)
		reader_prefetch(fs->cs, n->ino, length, pf_off, pf_len,
				rcb_chunk, &rc);

	/* The answer goes out from where the blocks are cached (no copy,
	 * no buffer); a read in too many pieces is copied instead. */
	struct read_runs rr = {.cs = fs->cs};
	err = reader_read_pinned(fs->cs, n->ino, length, off, size, &got,
				 read_run, &rr, rcb_chunk, &rc);
	if (err == EIO) {
		/* a missing object may be a slice a compaction replaced
		 * (deleted after its delay) under a cached list: once more
		 * with the list as it is now */
		read_runs_release(&rr);
		rr = (struct read_runs){.cs = fs->cs};
		pthread_mutex_lock(&n->lock);
		chunk_cache_clear(n);
		pthread_mutex_unlock(&n->lock);
		err = reader_read_pinned(fs->cs, n->ino, length, off, size,
					 &got, read_run, &rr, rcb_chunk, &rc);
	}
	if (!err)
		emit(arg, rr.iov, (int)rr.n);
	read_runs_release(&rr);
	if (err != READ_RUNS_FULL)
		return err;

	char *buf = malloc(size);
	if (!buf)
		return ENOMEM;
	err = reader_read(fs->cs, n->ino, length, off, size, buf, &got,
			  rcb_chunk, &rc);
	if (!err) {
		struct iovec iov = {buf, got};
		emit(arg, &iov, 1);
	}
	free(buf);
	return err;
}

/* ---- write ---------------------------------------------------------- */

/*
 * A write drops the file's capability, and its set-id bits unless the
 * writer is root (the kernel's rule, root standing for CAP_FSETID; setgid
 * only with group execute). The kernel does it itself on the cached path;
 * for a direct_io open that found none, vfs_write calls this when this
 * client gave the file one since.
 */
static int privs_drop(const struct vfs_caller *c, struct fs *fs, struct node *n)
{
	struct meta_attr a;
	int err = meta_removexattr(fs->meta, n->ino, XATTR_CAPS);

	if (err && err != ENODATA)
		return err;
	err = meta_getattr(fs->meta, n->ino, &a);
	if (err)
		return err;
	uint16_t kill = S_ISUID | ((a.mode & S_IXGRP) ? S_ISGID : 0);
	if ((a.mode & kill) && c->uid != 0) {
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
	if (fs->kern.inval_inode)
		fs->kern.inval_inode(fs->kern.arg, vfs_f_ino(fs, n->ino), -1,
				     0);
	return 0;
}

int vfs_write(struct fs *fs, const struct vfs_caller *c, struct vfs_fh *h,
	      const char *buf, size_t size, uint64_t off)
{
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
	    off + size <= n->attr.length)
		charge = 0;
	/* the same bytes count in the directory's quotas (EDQUOT), whose
	 * chain the node keeps until they are committed or dropped */
	if (!err && !n->taken)
		err = node_quota_chain(fs, n);
	if (!err)
		err = space_take(fs->space, charge);
	if (!err && (err = quota_take(&n->qc, charge)))
		space_drop(fs->space, charge);
	if (!err) {
		n->taken += charge;
		err = writer_write(w, off, buf, size);
	}
	if (!err && off + size > n->wend)
		__atomic_store_n(&n->wend, off + size, __ATOMIC_RELEASE);
	/* the kernel takes the size from its writes and asks again for
	 * the rest; a reply asked before it is discarded (node_kattr_note) */
	if (!err)
		n->kstate = KATTR_NONE;
	int drop = h->dio && n->privs;
	if (h->dio) {
		n->dio = 1;
		n->privs = 0;
	}
	pthread_mutex_unlock(&n->lock);
	if (!err && drop)
		err = privs_drop(c, fs, n);
	if (err)
		return err;
	if (h->dio) {
		pthread_mutex_lock(&fs->table_lock);
		int others = n->opens > 1;
		pthread_mutex_unlock(&fs->table_lock);
		/* what another open cached of the range is stale (for old
		 * kernels, see file_open). Before the reply, so that a read
		 * after the write returns sees it; the kernel's direct write
		 * holds the inode lock, no page lock, which is all this
		 * takes. */
		if (others && fs->kern.inval_inode)
			fs->kern.inval_inode(fs->kern.arg,
					     vfs_f_ino(fs, n->ino), (off_t)off,
					     (off_t)size);
	}
	return 0;
}

int vfs_flush(struct fs *fs, struct vfs_fh *h)
{
	(void)fs;
	pthread_mutex_lock(&h->node->lock);
	int err = node_flush(h->node);
	pthread_mutex_unlock(&h->node->lock);
	return err;
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

/* Cover [off, off+len) with hole slices (id 0): reads give zeros. The
 * range is cut at `limit` (the length, for modes that keep the size). The
 * bytes freed leave the quotas of c. */
static int write_holes(struct fs *fs, const struct meta_qchain *c, uint64_t ino,
		       uint64_t off, uint64_t len, uint64_t limit,
		       struct meta_attr *a)
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
			err = meta_write_q(fs->meta, c, ino, s, n, a);
			n = 0;
		}
	}
	return err;
}

void vfs_release(struct fs *fs, struct vfs_fh *h)
{
	struct node *n = h->node;

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
	lock_fh_release(fs, h);
	node_unpin(fs, n);
	fh_free(fs, h);
}

/*
 * copy_file_range of a whole file into an empty one (what cp does) shares
 * the data copy-on-write, as a snapshot does: metadata only, whatever the
 * size. Anything else gets EOPNOTSUPP, on which the kernel copies the bytes
 * itself (ENOSYS would turn the call off for the whole mount).
 */
int vfs_copy_file_range(struct fs *fs, struct vfs_fh *in, off_t off_in,
			struct vfs_fh *out, off_t off_out, size_t len,
			int flags, size_t *copied)
{
	struct node *src = in->node;
	struct node *dst = out->node;
	struct meta_attr a;
	int err;

	if (off_in != 0 || off_out != 0 || flags != 0 || src == dst)
		return EOPNOTSUPP;
	/* the two node locks are never held together */
	pthread_mutex_lock(&src->lock);
	err = node_flush(src);
	pthread_mutex_unlock(&src->lock);
	if (!err)
		err = meta_getattr(fs->meta, src->ino, &a);
	if (err)
		return err;
	if (a.type != META_FILE || a.length == 0 || len < a.length)
		return EOPNOTSUPP;
	uint64_t n = a.length, n_stored = a.stored;

	pthread_mutex_lock(&dst->lock);
	err = node_flush(dst);
	if (!err && dst->length != 0)
		err = EOPNOTSUPP;
	/* the copy's stored bytes count in dst's quotas: checked first */
	if (!err)
		err = node_quota_chain(fs, dst);
	if (!err)
		err = quota_take(&dst->qc, n_stored);
	if (!err) {
		err = meta_clone_data_q(fs->meta, &dst->qc.c, src->ino,
					dst->ino, &a);
		if (err)
			quota_drop(&dst->qc, n_stored);
		else
			quota_done(&dst->qc, n_stored);
		if (err == EINVAL)
			err = EOPNOTSUPP; /* not empty after all */
		chunk_cache_clear(dst);
	}
	if (!err)
		node_note_attr(dst, &a);
	pthread_mutex_unlock(&dst->lock);
	if (err)
		return err;
	log_debug("copy_file_range: inode %llu shares the %llu bytes of %llu",
		  (unsigned long long)dst->ino, (unsigned long long)n,
		  (unsigned long long)src->ino);
	*copied = (size_t)n;
	return 0;
}

int vfs_fallocate(struct fs *fs, struct vfs_fh *h, int mode, off_t off,
		  off_t len)
{
	struct node *n = h->node;
	struct meta_attr a;
	int err;
	if (mode & ~(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE |
		     FALLOC_FL_ZERO_RANGE))
		return EOPNOTSUPP;
	if ((mode & FALLOC_FL_PUNCH_HOLE) &&
	    (!(mode & FALLOC_FL_KEEP_SIZE) || (mode & FALLOC_FL_ZERO_RANGE)))
		return EINVAL;
	if (off < 0 || len <= 0)
		return EINVAL;
	pthread_mutex_lock(&n->lock);
	err = node_flush(n);
	if (!err)
		err = node_quota_chain(fs, n);
	if (!err && (mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE))) {
		err = meta_getattr(fs->meta, n->ino, &a);
		if (!err)
			err = write_holes(fs, &n->qc.c, n->ino, off, len,
					  (mode & FALLOC_FL_KEEP_SIZE)
					      ? a.length
					      : (uint64_t)off + len,
					  &a);
		chunk_cache_clear(n);
		space_changed(fs->space);
		quota_changed(&n->qc);
	} else if (!err) {
		/* allocating takes space from the capacity and the quotas,
		 * as a write */
		uint64_t bytes = (uint64_t)len;
		err = space_take(fs->space, bytes);
		if (!err && (err = quota_take(&n->qc, bytes)))
			space_drop(fs->space, bytes);
		if (!err) {
			err = meta_fallocate_q(fs->meta, &n->qc.c, n->ino,
					       mode & FALLOC_FL_KEEP_SIZE, off,
					       len, &a);
			if (err) {
				space_drop(fs->space, bytes);
				quota_drop(&n->qc, bytes);
			} else {
				space_done(fs->space, bytes);
				quota_done(&n->qc, bytes);
			}
		}
	}
	if (!err)
		node_note_attr(n, &a);
	pthread_mutex_unlock(&n->lock);
	return err;
}
