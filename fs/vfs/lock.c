/*
 * lock.c - flock(2) and fcntl(2) locks of the vfs, granted through the
 * metadata (meta/meta_lock.h) so that they hold between clients. A request
 * that must wait polls the grant with a backoff (LOCK_POLL_MIN_MS doubling
 * up to LOCK_POLL_MAX_MS): a release elsewhere is seen within the longest
 * step plus a round trip. Each waiter holds a FUSE worker thread; at most
 * VFS_LOCK_WAITERS wait at once, and a blocking request past that fails
 * with ENOLCK rather than starve every other operation of threads.
 *
 * The kernel does not tell a close that dropped POSIX locks from one that
 * did not: every flush names its lock owner. The owners this client gave
 * POSIX locks to are remembered here (fs->locks), so that only their
 * flushes cost a round trip.
 *
 * Nor does it send an unlock when an open file description that holds
 * locks of its own (F_OFD_SETLK: the owner is the open file, not a
 * process) is closed for the last time. Each open file remembers the
 * owners that locked through it (vfs_fh.owners) and marks those a close
 * through it named: a process's owner is always named by its closes
 * (every close flushes, with the closing process's owner), an open file's
 * never. At the release, the owners never named are open files' own, and
 * their locks end as on a local filesystem.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/file.h>
#include <time.h>

#include "fs/vfs/vfs_int.h"
#include "lib/hash.h"
#include "lib/log.h"
#include "meta/meta_lock.h"

#define LOCK_POLL_MIN_MS 5
#define LOCK_POLL_MAX_MS 100

/* An (inode, lock owner) this client granted a POSIX lock to. */
struct owned {
	struct hash_node hn;
	uint64_t ino, owner;
};

/* An owner that set a POSIX lock through an open file (vfs_fh.owners). */
struct fh_owner {
	struct fh_owner *next;
	uint64_t owner;
	int closed; /* a close through the open file named it */
};

struct vfs_locks {
	pthread_mutex_t lock; /* leaf; also protects every vfs_fh.owners */
	struct hash owned;    /* struct owned; protected by lock */
	int waiters;	      /* protected by lock */
};

int lock_open(struct vfs_locks **out)
{
	struct vfs_locks *l = calloc(1, sizeof(*l));
	if (!l || hash_init(&l->owned, 6)) {
		free(l);
		return ENOMEM;
	}
	pthread_mutex_init(&l->lock, NULL);
	*out = l;
	return 0;
}

void lock_free(struct vfs_locks *l)
{
	if (!l)
		return;
	struct hash_node *h, *next;
	for (h = hash_first(&l->owned); h; h = next) {
		next = hash_next(&l->owned, h);
		free(hash_entry(h, struct owned, hn));
	}
	hash_release(&l->owned);
	pthread_mutex_destroy(&l->lock);
	free(l);
}

/* ---- the owners of POSIX locks ---------------------------------------- */

static uint64_t owned_hash(uint64_t ino, uint64_t owner)
{
	return hash_mix64(ino ^ owner * 0x9e3779b97f4a7c15ull);
}

static int owned_match(const struct hash_node *n, const void *key)
{
	const struct owned *o = hash_entry(n, struct owned, hn);
	const uint64_t *k = key;
	return o->ino == k[0] && o->owner == k[1];
}

/* Remember (ino, owner); a failed allocation only costs nothing now and
 * a lock left over later (released with the session): logged. */
static void owned_add(struct vfs_locks *l, uint64_t ino, uint64_t owner)
{
	uint64_t k[2] = {ino, owner}, h = owned_hash(ino, owner);
	pthread_mutex_lock(&l->lock);
	if (!hash_find(&l->owned, h, owned_match, k)) {
		struct owned *o = malloc(sizeof(*o));
		if (o) {
			o->ino = ino;
			o->owner = owner;
			hash_insert(&l->owned, &o->hn, h);
		} else {
			log_warn("out of memory: the POSIX locks of inode "
				 "%llu may outlive their close",
				 (unsigned long long)ino);
		}
	}
	pthread_mutex_unlock(&l->lock);
}

/* Forget (ino, owner): 1 when it was there. */
static int owned_take(struct vfs_locks *l, uint64_t ino, uint64_t owner)
{
	uint64_t k[2] = {ino, owner};
	pthread_mutex_lock(&l->lock);
	struct hash_node *n =
	    hash_find(&l->owned, owned_hash(ino, owner), owned_match, k);
	if (n)
		hash_remove(&l->owned, n);
	pthread_mutex_unlock(&l->lock);
	free(n ? hash_entry(n, struct owned, hn) : NULL);
	return n != NULL;
}

/* ---- the owners of an open file -------------------------------------- */

/* owner set a lock through h (closed 0), or a close through h named it
 * (closed 1: marked if it is there, never added). A failed allocation is
 * logged: that owner's open-file locks then outlive the release. */
static void fh_owner_note(struct vfs_locks *l, struct vfs_fh *h,
			  uint64_t owner, int closed)
{
	pthread_mutex_lock(&l->lock);
	struct fh_owner *o = h->owners;
	while (o && o->owner != owner)
		o = o->next;
	if (o)
		o->closed = closed;
	else if (!closed && (o = malloc(sizeof(*o)))) {
		*o = (struct fh_owner){h->owners, owner, 0};
		h->owners = o;
	} else if (!closed)
		log_warn("out of memory: the locks of an open file of inode "
			 "%llu may outlive it",
			 (unsigned long long)h->node->ino);
	pthread_mutex_unlock(&l->lock);
}

/* ---- waiting ---------------------------------------------------------- */

static int waiter_enter(struct vfs_locks *l)
{
	pthread_mutex_lock(&l->lock);
	int ok = l->waiters < VFS_LOCK_WAITERS;
	if (ok)
		l->waiters++;
	pthread_mutex_unlock(&l->lock);
	return ok;
}

static void waiter_leave(struct vfs_locks *l)
{
	pthread_mutex_lock(&l->lock);
	l->waiters--;
	pthread_mutex_unlock(&l->lock);
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Set a lock, waiting for it with sleep: EAGAIN (no sleep) when another
 * owner's is in the way, EINTR when w says the caller gave up, ENOLCK
 * when too many wait already. */
static int set_wait(struct fs *fs, enum meta_lock_kind kind, uint64_t ino,
		    uint64_t owner, const struct meta_lock *lk, int sleep,
		    const struct vfs_wait *w)
{
	int err = meta_lock_set(fs->meta, kind, ino, owner, lk, NULL);
	if (err != EAGAIN || !sleep || lk->type == META_LOCK_UN)
		return err;
	if (!waiter_enter(fs->locks)) {
		log_warn("%d lock requests wait already: one more fails with "
			 "ENOLCK",
			 VFS_LOCK_WAITERS);
		return ENOLCK;
	}
	for (int ms = LOCK_POLL_MIN_MS; err == EAGAIN;) {
		sleep_ms(ms);
		if (w && w->interrupted && w->interrupted(w->arg)) {
			err = EINTR;
			break;
		}
		err = meta_lock_set(fs->meta, kind, ino, owner, lk, NULL);
		ms = ms * 2 > LOCK_POLL_MAX_MS ? LOCK_POLL_MAX_MS : ms * 2;
	}
	waiter_leave(fs->locks);
	return err;
}

/* ---- the operations --------------------------------------------------- */

int vfs_flock(struct fs *fs, uint64_t ino, uint64_t owner, int op,
	      const struct vfs_wait *w)
{
	struct meta_lock lk = {.end = META_LOCK_EOF};
	switch (op & ~LOCK_NB) {
	case LOCK_SH:
		lk.type = META_LOCK_RD;
		break;
	case LOCK_EX:
		lk.type = META_LOCK_WR;
		break;
	case LOCK_UN:
		lk.type = META_LOCK_UN;
		break;
	default:
		return EINVAL;
	}
	return set_wait(fs, META_LOCK_FLOCK, vfs_m_ino(fs, ino), owner, &lk,
			!(op & LOCK_NB), w);
}

/* struct flock (l_whence SEEK_SET, as the kernel sends it) to a lock */
static int lock_from(const struct flock *f, struct meta_lock *lk)
{
	switch (f->l_type) {
	case F_RDLCK:
		lk->type = META_LOCK_RD;
		break;
	case F_WRLCK:
		lk->type = META_LOCK_WR;
		break;
	case F_UNLCK:
		lk->type = META_LOCK_UN;
		break;
	default:
		return EINVAL;
	}
	if (f->l_start < 0 || f->l_len < 0)
		return EINVAL;
	lk->start = (uint64_t)f->l_start;
	lk->end =
	    f->l_len == 0 ? META_LOCK_EOF : lk->start + (uint64_t)f->l_len - 1;
	lk->pid = (uint32_t)f->l_pid;
	return 0;
}

int vfs_getlk(struct fs *fs, uint64_t ino, uint64_t owner, struct flock *f)
{
	struct meta_lock lk, c;
	int err = lock_from(f, &lk);
	if (err || lk.type == META_LOCK_UN)
		return err ? err : EINVAL;
	err = meta_lock_get(fs->meta, vfs_m_ino(fs, ino), owner, &lk, &c);
	if (err)
		return err;
	if (c.type == META_LOCK_UN) {
		f->l_type = F_UNLCK;
		return 0;
	}
	f->l_type = c.type == META_LOCK_WR ? F_WRLCK : F_RDLCK;
	f->l_whence = SEEK_SET;
	f->l_start = (off_t)c.start;
	f->l_len = c.end >= META_LOCK_EOF ? 0 : (off_t)(c.end - c.start + 1);
	f->l_pid = (pid_t)c.pid;
	return 0;
}

int vfs_setlk(struct fs *fs, struct vfs_fh *fh, uint64_t ino, uint64_t owner,
	      const struct flock *f, int sleep, const struct vfs_wait *w)
{
	struct meta_lock lk;
	uint64_t mino = vfs_m_ino(fs, ino);
	int err = lock_from(f, &lk);
	if (err)
		return err;
	/* remembered before the grant: a flush racing with it then still
	 * looks (one round trip too many at worst) */
	if (lk.type != META_LOCK_UN) {
		owned_add(fs->locks, mino, owner);
		if (fh)
			fh_owner_note(fs->locks, fh, owner, 0);
	}
	return set_wait(fs, META_LOCK_POSIX, mino, owner, &lk, sleep, w);
}

/* owner's locks of a kind on volume inode mino end */
static void owner_drop(struct fs *fs, uint64_t mino, uint64_t owner, int flock)
{
	struct meta_lock lk = {.type = META_LOCK_UN, .end = META_LOCK_EOF};
	enum meta_lock_kind kind = flock ? META_LOCK_FLOCK : META_LOCK_POSIX;
	if (!flock && !owned_take(fs->locks, mino, owner))
		return;
	/* an unlock redis cannot take now is queued by meta and sent again
	 * until it gets through; a lost lock was logged when it was lost */
	int err = meta_lock_set(fs->meta, kind, mino, owner, &lk, NULL);
	if (err && err != META_ELOCKLOST)
		log_warn("cannot release the %s locks of inode %llu: %s; they "
			 "go with this client's session",
			 flock ? "flock" : "POSIX", (unsigned long long)mino,
			 gr_strerror(err));
}

void vfs_lock_close(struct fs *fs, struct vfs_fh *fh, uint64_t ino,
		    uint64_t owner, int flock)
{
	if (!flock && fh)
		fh_owner_note(fs->locks, fh, owner, 1);
	owner_drop(fs, vfs_m_ino(fs, ino), owner, flock);
}

void lock_fh_release(struct fs *fs, struct vfs_fh *h)
{
	pthread_mutex_lock(&fs->locks->lock);
	struct fh_owner *o = h->owners;
	h->owners = NULL;
	pthread_mutex_unlock(&fs->locks->lock);
	while (o) {
		struct fh_owner *next = o->next;
		if (!o->closed)
			owner_drop(fs, h->node->ino, o->owner, 0);
		free(o);
		o = next;
	}
}
