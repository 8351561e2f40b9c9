/*
 * ns.c - names and attributes: lookup, getattr and setattr, the
 * namespace changes (mknod, unlink, rmdir, rename, link), statfs and
 * directory listings, over the metadata engine and the node table.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "meta/meta_trash.h"
#include "meta/meta_volume.h"
#include "fs/data/writer.h"
#include "fs/vfs/namecache.h"
#include "fs/vfs/quota.h"
#include "fs/vfs/space.h"
#include "fs/vfs/vfs_int.h"
#include "lib/errors.h"
#include "lib/log.h"

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

/* ---- the trash: root's alone ---------------------------------------- */

/*
 * The trash (META_TRASH at the volume's root) is there for root only:
 * other callers do not see it listed and their lookups of it find
 * nothing (ENOENT), as if it did not exist. The kernel would answer them
 * from the entry root's lookup left in its cache: the entry is handed out
 * with no entry timeout, so that every walk through the name asks again,
 * as its caller. Entering it is refused by its mode (0700) anyway.
 */
static int trash_entry(struct fs *fs, uint64_t vparent, const char *name,
		       uint64_t ino)
{
	if (vparent != META_ROOT_INO || strcmp(name, META_TRASH))
		return 0;
	uint64_t t = __atomic_load_n(&fs->trash_ino, __ATOMIC_RELAXED);
	/* learned once: the trash, once made, stays */
	if (!t && meta_trash_ino(fs->meta, &t) == 0 && t)
		__atomic_store_n(&fs->trash_ino, t, __ATOMIC_RELAXED);
	return t == ino;
}

static int trash_hidden(struct fs *fs, const struct vfs_caller *c,
			uint64_t vparent, const char *name, uint64_t ino)
{
	return c->uid != 0 && trash_entry(fs, vparent, name, ino);
}

/* ---- names and attributes ------------------------------------------- */

int vfs_lookup(struct fs *fs, const struct vfs_caller *c, uint64_t parent,
	       const char *name, struct vfs_entry *e)
{
	uint64_t ino, vparent = vfs_m_ino(fs, parent);
	struct meta_attr a;
	int err = 0;
	int fz = frozen(fs, parent) || !strcmp(name, META_VERSIONS);
	if (!fs->read_only) {
		err = meta_lookup(fs->meta, vparent, name, &ino, &a);
		if (!err && trash_hidden(fs, c, vparent, name, ino))
			return ENOENT;
		if (!err)
			entry_take(fs, vparent, ino, &a,
				   visible_length(fs, ino, &a), fz, e);
		if (!err && trash_entry(fs, vparent, name, ino))
			e->entry_timeout = 0;
		return err;
	}
	/* read-only: from the name cache, else one round trip that also
	 * brings chunk 0, so that open and read need none of their own */
	struct meta_slice *s;
	size_t n;
	if (!fs->names || !namecache_get(fs->names, vfs_m_ino(fs, parent), name,
					 &ino, &a, &s, &n)) {
		err = meta_lookup_chunk0(fs->meta, vfs_m_ino(fs, parent), name,
					 &ino, &a, &s, &n);
		if (err)
			return err;
		if (fs->names)
			namecache_put(fs->names, vfs_m_ino(fs, parent), name,
				      ino, &a, s, n);
	}
	if (trash_hidden(fs, c, vparent, name, ino)) {
		free(s);
		return ENOENT;
	}
	/* pinned, so the slice list lands in the node the kernel will open */
	struct node *pin = node_get(fs, ino, 1);
	if (a.type == META_FILE)
		node_cache_chunk0(fs, ino, s, n);
	free(s);
	entry_take(fs, vparent, ino, &a, visible_length(fs, ino, &a), fz, e);
	if (trash_entry(fs, vparent, name, ino))
		e->entry_timeout = 0;
	node_unpin(fs, pin);
	return 0;
}

void vfs_forget(struct fs *fs, uint64_t ino, uint64_t nlookup)
{
	node_forget(fs, vfs_m_ino(fs, ino), nlookup);
}

int vfs_getattr(struct fs *fs, uint64_t ino, struct stat *st, double *timeout)
{
	struct meta_attr a;
	double left;
	uint64_t vino = vfs_m_ino(fs, ino);

	if (!fs->read_only && dir_attr_get(fs, vino, &a, &left)) {
		attr_to_stat(fs, vino, &a, a.length, st);
		*timeout = left;
		return 0;
	}
	int err = meta_getattr(fs->meta, vino, &a);
	if (err)
		return err;
	node_kattr_hand(fs, vino, &a);
	attr_to_stat(fs, vino, &a, visible_length(fs, vino, &a), st);
	*timeout = fs->attr_timeout;
	return 0;
}

/* Translate the kernel's set bits into META_SET_* and the values in in. */
static int setattr_fields(const struct stat *st, int to_set,
			  struct meta_attr *in)
{
	int set = 0;
	memset(in, 0, sizeof(*in));
	if (to_set & VFS_SET_MODE) {
		set |= META_SET_MODE;
		in->mode = st->st_mode & 07777;
	}
	if (to_set & VFS_SET_UID) {
		set |= META_SET_UID;
		in->uid = st->st_uid;
	}
	if (to_set & VFS_SET_GID) {
		set |= META_SET_GID;
		in->gid = st->st_gid;
	}
	if (to_set & VFS_SET_ATIME_NOW)
		set |= META_SET_ATIME_NOW;
	else if (to_set & VFS_SET_ATIME) {
		set |= META_SET_ATIME;
		in->atime = st->st_atim.tv_sec;
		in->atimens = st->st_atim.tv_nsec;
	}
	if (to_set & VFS_SET_MTIME_NOW)
		set |= META_SET_MTIME_NOW;
	else if (to_set & VFS_SET_MTIME) {
		set |= META_SET_MTIME;
		in->mtime = st->st_mtim.tv_sec;
		in->mtimens = st->st_mtim.tv_nsec;
	}
	if (!set && (to_set & VFS_SET_CTIME))
		set |= META_SET_CTIME;
	return set;
}

int vfs_setattr(struct fs *fs, uint64_t fino, const struct stat *st, int to_set,
		struct stat *out_st, double *timeout)
{
	uint64_t ino = vfs_m_ino(fs, fino);
	struct meta_attr in, out;
	int set = setattr_fields(st, to_set, &in), err = 0, have = 0;
	if (frozen(fs, fino))
		return EROFS;

	/*
	 * Buffered writes are committed first: their commit sets mtime, and
	 * must not overwrite times set after them (cp -p: write, futimens,
	 * close), nor survive a truncate that came after them.
	 */
	struct node *n = node_get(fs, ino, (to_set & VFS_SET_SIZE) != 0);
	if (!n && (to_set & VFS_SET_SIZE))
		return ENOMEM;
	if (n) {
		pthread_mutex_lock(&n->lock);
		err = node_flush(n);
	}
	/* the stored bytes a truncate frees leave the file's quotas */
	if (!err && (to_set & VFS_SET_SIZE))
		err = node_quota_chain(fs, n);
	if (!err && (to_set & VFS_SET_SIZE)) {
		err =
		    meta_truncate_q(fs->meta, &n->qc.c, ino, st->st_size, &out);
		if (!err) {
			space_changed(fs->space);
			quota_changed(&n->qc);
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
	if (!err && n) {
		node_note_attr(n, &out);
		if (out.type == META_FILE)
			node_kattr_note(n, &out); /* the reply hands it over */
	}
	if (n) {
		pthread_mutex_unlock(&n->lock);
		node_unpin(fs, n);
	}
	/* a file's attributes are no directory's: the directories' noted
	 * attributes (dir_attr_get) still hold, so that touch's utimens
	 * after its create costs no GETATTR of the directory at the next
	 * lookup there; a directory's change, or an error, ends them */
	if (err || out.type == META_DIR)
		ns_changed(fs);
	if (err)
		return err;
	attr_to_stat(fs, ino, &out, visible_length(fs, ino, &out), out_st);
	*timeout = fs->attr_timeout;
	return 0;
}

int vfs_readlink(struct fs *fs, uint64_t ino, char **target)
{
	return meta_readlink(fs->meta, vfs_m_ino(fs, ino), target);
}

/* ---- namespace changes ---------------------------------------------- */

int vfs_mknod(struct fs *fs, const struct vfs_caller *c, uint64_t parent,
	      const char *name, mode_t mode, dev_t rdev, const char *link,
	      struct vfs_entry *e)
{
	uint64_t ino;
	struct meta_attr a;
	if (frozen(fs, parent))
		return EROFS;
	uint64_t vparent = vfs_m_ino(fs, parent);
	int err =
	    meta_mknod(fs->meta, vparent, name, meta_type_of(mode),
		       mode & 07777, c->uid, c->gid, rdev, link, &ino, &a);
	ns_changed(fs);
	if (!err)
		entry_take(fs, vparent, ino, &a, visible_length(fs, ino, &a), 0,
			   e);
	return err;
}

/* Space was freed in directory dir: its quotas read their usage again
 * before the next write (the capacity does it in reclaim_soon). Free
 * without quotas. */
static void quota_freed(struct fs *fs, uint64_t dir)
{
	struct quota_chain qc;
	if (quota_active(fs->quota) && quota_chain_of(fs->quota, dir, &qc) == 0)
		quota_changed(&qc);
}

int vfs_unlink(struct fs *fs, uint64_t parent, const char *name)
{
	struct meta_ns_after o;
	if (frozen(fs, parent))
		return EROFS;
	uint64_t vparent = vfs_m_ino(fs, parent);
	uint64_t gen = __atomic_load_n(&fs->ns_gen, __ATOMIC_SEQ_CST);
	int err = meta_unlink_after(fs->meta, vparent, name, &o);
	/* the parent's attributes as the unlink left them answer the
	 * kernel's next GETATTR of it (dir_attr_note). No directory of the
	 * trash, which removals change besides, is ever noted: it takes no
	 * create, and unlink and rename hand out none of its attributes */
	if (!err && o.have)
		dir_attr_note(fs, vparent, &o.pa, gen);
	else
		ns_changed(fs);
	if (!err)
		quota_freed(fs, vparent);
	if (!err && o.trashed)
		node_mark_trashed(fs, o.trashed);
	else if (!err)
		reclaim_soon(fs);
	return err;
}

int vfs_rmdir(struct fs *fs, uint64_t parent, const char *name)
{
	if (frozen(fs, parent))
		return EROFS;
	int err = meta_rmdir(fs->meta, vfs_m_ino(fs, parent), name);
	ns_changed(fs);
	return err;
}

/*
 * A rename between two directories with quotas about: what moves takes
 * its usage to the other chain (the script's work), but this client must
 * follow. A file's bytes buffered here are committed first, into the
 * chain they were accepted for; the node's parent hint then names the new
 * directory, and a directory that moved forgets its cached chain. That
 * costs a lookup of each name that moves, only on a volume with quotas
 * and only between two directories.
 */
struct quota_move {
	uint64_t ino[2]; /* what moves: name's, and newname's on exchange */
	uint8_t type[2];
};

static void quota_move_one(struct fs *fs, uint64_t dir, const char *name,
			   uint64_t *ino, uint8_t *type)
{
	struct meta_attr a;
	*ino = 0;
	if (meta_lookup(fs->meta, dir, name, ino, &a)) {
		*ino = 0;
		return;
	}
	*type = a.type;
	struct node *n = node_get(fs, *ino, 0);
	if (!n)
		return;
	pthread_mutex_lock(&n->lock);
	int err = node_flush(n);
	pthread_mutex_unlock(&n->lock);
	node_unpin(fs, n);
	if (err)
		log_warn("rename: write-back of inode %llu failed: %s",
			 (unsigned long long)*ino, gr_strerror(err));
}

static void quota_move_before(struct fs *fs, uint64_t dir, const char *name,
			      uint64_t newdir, const char *newname,
			      unsigned flags, struct quota_move *mv)
{
	memset(mv, 0, sizeof(*mv));
	if (!quota_active(fs->quota) || dir == newdir)
		return;
	quota_move_one(fs, dir, name, &mv->ino[0], &mv->type[0]);
	if (flags & VFS_RENAME_EXCHANGE)
		quota_move_one(fs, newdir, newname, &mv->ino[1], &mv->type[1]);
}

static void quota_move_after(struct fs *fs, uint64_t dir, uint64_t newdir,
			     const struct quota_move *mv)
{
	for (int i = 0; i < 2; i++) {
		if (!mv->ino[i])
			continue;
		node_set_parent(fs, mv->ino[i], i ? dir : newdir);
		if (mv->type[i] == META_DIR)
			quota_forget(fs->quota, mv->ino[i]);
	}
}

int vfs_rename(struct fs *fs, uint64_t parent, const char *name,
	       uint64_t newparent, const char *newname, unsigned flags)
{
	if (flags & ~(VFS_RENAME_NOREPLACE | VFS_RENAME_EXCHANGE))
		return EINVAL;
	if (frozen(fs, parent) || frozen(fs, newparent))
		return EROFS;
	uint64_t vp = vfs_m_ino(fs, parent), vnp = vfs_m_ino(fs, newparent);
	struct quota_move mv;
	quota_move_before(fs, vp, name, vnp, newname, flags, &mv);
	struct meta_ns_after o;
	uint64_t gen = __atomic_load_n(&fs->ns_gen, __ATOMIC_SEQ_CST);
	int err =
	    meta_rename_after(fs->meta, vp, name, vnp, newname, flags, &o);
	/* as unlink: the parents' attributes answer their next GETATTR,
	 * unless a directory moved (its own, "..", changed too) or a name
	 * left the trash */
	if (!err && o.have && !o.dirs) {
		dir_attr_note(fs, vp, &o.pa, gen);
		if (vnp != vp)
			dir_attr_note(fs, vnp, &o.npa, gen);
	} else {
		ns_changed(fs);
	}
	if (!err && o.trashed)
		node_mark_trashed(fs, o.trashed);
	space_changed(fs->space); /* a file replaced may be gone */
	if (!err)
		quota_move_after(fs, vp, vnp, &mv);
	quota_freed(fs, vp);
	return err;
}

int vfs_link(struct fs *fs, uint64_t ino, uint64_t newparent,
	     const char *newname, struct vfs_entry *e)
{
	struct meta_attr a;
	if (frozen(fs, ino) || frozen(fs, newparent))
		return EROFS;
	uint64_t vino = vfs_m_ino(fs, ino), vnp = vfs_m_ino(fs, newparent);
	/* a hard link stays within the file's quotas (EXDEV): the script
	 * compares newparent's chain with that of a directory the file is
	 * known in */
	int err = meta_link_q(fs->meta, node_parent(fs, vino), vino, vnp,
			      newname, &a);
	ns_changed(fs);
	if (!err)
		entry_take(fs, vnp, vino, &a, visible_length(fs, vino, &a), 0,
			   e);
	return err;
}

/* A --subdir mount whose directory has a quota shows the quota (df): its
 * limits as the size, what is left of them as free; a field with no limit
 * keeps the volume's figure. */
static void statfs_quota(struct fs *fs, struct statvfs *sv)
{
	struct meta_quota mq;
	if (fs->root == META_ROOT_INO || quota_statfs(fs->quota, fs->root, &mq))
		return;
	if (mq.max_space) {
		uint64_t used = (mq.used_space + 4095) / 4096;
		sv->f_blocks = mq.max_space / 4096;
		sv->f_bfree = sv->f_bavail =
		    used < sv->f_blocks ? sv->f_blocks - used : 0;
	}
	if (mq.max_inodes) {
		sv->f_files = mq.max_inodes;
		sv->f_ffree = sv->f_favail =
		    mq.used_inodes < mq.max_inodes
			? mq.max_inodes - mq.used_inodes
			: 0;
	}
}

int vfs_statfs(struct fs *fs, struct statvfs *sv)
{
	struct meta_usage u;
	int err = meta_usage(fs->meta, &u);
	if (err)
		return err;
	/* the capacity is the total, whatever the usage (which may overshoot
	 * it a little: space.h); without one, 1 PiB or the usage */
	uint64_t cap = fs->vol.capacity;
	if (!cap)
		cap = u.used_bytes > (1ull << 50) ? u.used_bytes : 1ull << 50;
	uint64_t used = (u.used_bytes + 4095) / 4096;
	memset(sv, 0, sizeof(*sv));
	sv->f_bsize = 4096;
	sv->f_frsize = 4096;
	sv->f_blocks = cap / 4096;
	sv->f_bfree = sv->f_bavail =
	    used < sv->f_blocks ? sv->f_blocks - used : 0;
	sv->f_files = u.inodes + (1ull << 32);
	sv->f_ffree = sv->f_favail = 1ull << 32;
	sv->f_namemax = META_NAME_MAX;
	statfs_quota(fs, sv);
	return 0;
}

/* ---- directories ---------------------------------------------------- */

int vfs_opendir(struct fs *fs, uint64_t ino, struct vfs_dh **out, int *keep)
{
	struct vfs_dh *d = calloc(1, sizeof(*d));
	if (!d)
		return ENOMEM;
	pthread_mutex_init(&d->lock, NULL);
	/* a read-only client lets the kernel keep listings for the entry
	 * timeout: a DataLoader's walk of a dataset is then free after the
	 * first epoch */
	*keep = fs->read_only;
	/* but not the root's, which differs by caller (trash_hidden) */
	if (vfs_m_ino(fs, ino) == META_ROOT_INO)
		*keep = 0;
	*out = d;
	return 0;
}

int vfs_readdir(struct fs *fs, const struct vfs_caller *c, struct vfs_dh *d,
		uint64_t ino, off_t off, int plus,
		int (*add)(void *arg, const char *name, const struct stat *st,
			   const struct vfs_entry *e, off_t next),
		void *arg)
{
	int err = 0, fz = plus && frozen(fs, ino);

	pthread_mutex_lock(&d->lock);
	/* a rewind (offset 0) reloads, as a new listing would */
	if (!d->loaded || off == 0 || (plus && !d->plus)) {
		meta_dirents_free(d->ents, d->n);
		d->ents = NULL;
		d->n = 0;
		d->loaded = 0;
		d->load_ns = mono_ns();
		err = meta_readdir(fs->meta, vfs_m_ino(fs, ino), plus, &d->ents,
				   &d->n);
		if (err)
			goto out;
		d->loaded = 1;
		d->plus = plus;
	}
	/* offsets: 1 = ".", 2 = "..", 3 + i = entry i */
	for (off_t i = off; (size_t)i < d->n + 2; i++) {
		struct stat st;
		struct vfs_entry ent, *ep = NULL;
		struct meta_dirent *e = NULL;
		const char *name;
		memset(&st, 0, sizeof(st));
		if (i == 0) {
			name = ".";
			st.st_ino = ino;
			st.st_mode = S_IFDIR;
		} else if (i == 1) {
			name = "..";
			st.st_ino = VFS_ROOT_ID; /* the kernel resolves .. */
			st.st_mode = S_IFDIR;
		} else {
			e = &d->ents[i - 2];
			name = e->name;
			if (trash_hidden(fs, c, vfs_m_ino(fs, ino), name,
					 e->ino))
				continue;
			st.st_ino = vfs_f_ino(fs, e->ino);
			st.st_mode = type_bits(e->type);
		}
		if (plus && e) {
			memset(&ent, 0, sizeof(ent));
			ent.ino = st.st_ino;
			ent.attr_timeout = fs->attr_timeout;
			ent.entry_timeout = fs->entry_timeout;
			attr_to_stat(fs, e->ino, &e->attr,
				     visible_length(fs, e->ino, &e->attr),
				     &ent.attr);
			if (trash_entry(fs, vfs_m_ino(fs, ino), name, e->ino))
				ent.entry_timeout = 0;
			ep = &ent;
		}
		if (add(arg, name, &st, ep, i + 1))
			break;
		if (ep) {
			node_lookup_ref(fs, e->ino, &e->attr, fz,
					vfs_m_ino(fs, ino));
			if (e->noxattr)
				node_xattrs_none(fs, e->ino, d->load_ns);
			if (fs->read_only && e->type == META_FILE)
				node_cache_chunk0(fs, e->ino, e->chunk0,
						  e->nchunk0);
			if (fs->names)
				namecache_put(fs->names, vfs_m_ino(fs, ino),
					      e->name, e->ino, &e->attr,
					      e->chunk0, e->nchunk0);
		}
	}
out:
	pthread_mutex_unlock(&d->lock);
	return err;
}

void vfs_releasedir(struct fs *fs, struct vfs_dh *d)
{
	(void)fs;
	meta_dirents_free(d->ents, d->n);
	pthread_mutex_destroy(&d->lock);
	free(d);
}
