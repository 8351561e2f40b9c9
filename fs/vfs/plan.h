/*
 * plan.h - epoch plans (issue 34): a job hands the mount the ordered list
 * of files it will read (its sampler's order for the epoch); the client
 * follows the job's readers through the list, keeps a window ahead of them
 * fetched into the disk cache, and tells the disk cache what the plans
 * need next, so that it evicts what is needed furthest ahead (Belady) and
 * never what is inside a window (diskcache.h, "The future").
 *
 * The control calls, as xattrs on a directory DIR of the mount (ctl.c
 * passes the granary.plan* names here; docs/operations.md "Epoch plans"):
 *
 *   get DIR "granary.plan.new"      -> "ID" (decimal): a new, empty plan,
 *                                      owned by the caller's uid and pid
 *   set DIR "granary.plan.ID.add"   = "PATH\nPATH\n..." (a trailing \n is
 *                                      optional): appended in order. PATHs
 *                                      are relative to DIR (no leading /,
 *                                      no "..", no empty name); each must be
 *                                      a regular file the caller may read,
 *                                      else the whole call fails and adds
 *                                      nothing: ENOENT, EACCES, EISDIR
 *                                      (the same errno reading it would
 *                                      give), EINVAL (a bad path)
 *   set DIR "granary.plan.ID.clear" = "": the list emptied, the readers'
 *                                      place back at its start (the next
 *                                      epoch's order follows with adds)
 *   set DIR "granary.plan.ID.owner" = "PID": the plan lives while process
 *                                      PID does (a process of the caller's
 *                                      uid, or any for root), instead of
 *                                      the caller's: what `granary plan`
 *                                      uses to tie a plan to its job
 *   set DIR "granary.plan.ID.cancel" = "": the plan is gone
 *   get DIR "granary.plan.ID"       -> JSON: the plan's figures
 *                                      (struct plan_info)
 *   get DIR "granary.plans"         -> JSON: {"plans": [ ... ]}, every
 *                                      plan of this mount the caller may see
 *                                      (its own; root: all)
 *
 * Each call that changes a plan may also be made as a get, the same name
 * on the same inode (and owner's PID in the name), answering the files
 * the plan holds after it (decimal): for where a set cannot be made. The
 * kernel refuses every setxattr on a read-only mount (EROFS) before the
 * client sees it, and asks write permission on the inode of a set
 * (default_permissions), where a plan asks only read permission on the
 * files it names:
 *
 *   get FILE "granary.plan.ID.add"        FILE itself appended (the
 *                                      kernel resolved its path as the
 *                                      caller); EISDIR on a directory
 *   get FILE "granary.plan.ID.add:POS"    FILE for position POS (decimal,
 *                                      from 0) of the list: appended
 *                                      when the list holds POS files,
 *                                      else held until the files before
 *                                      it come (then appended in
 *                                      position order); so a caller may
 *                                      make these gets from several
 *                                      threads at once, each a file of
 *                                      the list. EEXIST: POS is taken;
 *                                      EAGAIN: POS is PC_HOLD_MAX (4096)
 *                                      or more past the list's end (try
 *                                      again once the files before it
 *                                      came). A clear drops the files
 *                                      held; a file that fails leaves
 *                                      those after it held: clear the
 *                                      plan before adding again.
 *   get DIR  "granary.plan.ID.add:POS:PATHS"  the files of PATHS
 *                                      (below DIR, one a line, in the
 *                                      name itself: as many short paths
 *                                      as its 255 bytes hold) for
 *                                      positions POS, POS + 1, ..., as
 *                                      an add by a set resolves them
 *                                      (symbolic links not followed),
 *                                      all or none; EEXIST, EAGAIN (of
 *                                      its last position) as above. A
 *                                      get a file is a round trip to the
 *                                      client each: 3000 files took 1-3 s
 *                                      on a loaded node, 0.2-0.4 s so.
 *   get DIR  "granary.plan.ID.clear", "granary.plan.ID.cancel",
 *            "granary.plan.ID.owner:PID"  as the sets above
 *
 * A get of size 0 (a probe for the value's size, as getfattr makes
 * before the real get) changes nothing and makes nothing: it answers the
 * errors the call would give and a size the value will not pass (room for
 * the figures to grow meanwhile); the get with a buffer does the work.
 *
 * Errors of the calls on a plan ID: ENOENT no such plan (never made, or
 * gone), EPERM the plan is another user's (root may act on any), EINVAL
 * a malformed name or value, ENOSPC the mount holds PLAN_FILES_MAX planned
 * files already or PLAN_MAX plans, ESRCH no process PID (owner), EPERM a
 * set of a name that is only read (new, ID, plans), EROFS never from the
 * client (plans are read state; the kernel's, above).
 * Permission: as for reading the files named; making a plan needs nothing
 * else. A set is the form of the calls that change a plan (their get
 * form above where a set cannot be made), but "new", which must hand
 * back the id.
 *
 * A plan ends when it is cancelled, when its owner process is gone (its
 * pid, checked with its start time so that a reused pid does not keep it;
 * a pid the client cannot see, 0 from another pid namespace, is not
 * checked), when none of its files has been opened for PLAN_IDLE_S while
 * it had files left (a job that stopped following it), and at unmount. A
 * plan whose readers stop following it stops fetching once its window is
 * full, at once.
 *
 * Following the readers: an open for reading of a file that a plan names
 * at or after its place moves that place to just past the file's
 * position (the first such position at or after the place), so a reader
 * that skips ahead moves the window with it, and files opened out of
 * order within the window (several loader workers) are all counted. A
 * file opened that the plan names only behind its place changes nothing.
 * With several plans naming the same file, the open moves the plans of
 * the opener's process tree (the owner, or a process whose parent chain
 * reaches it: the loader's workers are the owner's children); when no
 * plan matches by process (pid 0, or another tree), every plan naming the
 * file ahead moves.
 *
 * Prefetch: a plan's window is the files from its place on, as far as
 * its share of the window bytes reaches; the bytes are fetched into the
 * disk cache (in a cache group, warmed at their owners: group_warm) by
 * PLAN_THREADS fetchers shared round-robin by the plans, each object once
 * (a pack that holds several planned small files is fetched once). The
 * window starts at PLAN_WINDOW_MIN bytes and grows (doubling, up to
 * plan_opts.window_max) while the plan's readers open files whose fetch
 * has not finished (they wait on the store), so that it covers the
 * store's latency at the readers' pace; all plans' windows together stay
 * within window_max. Without a disk cache, plans are refused (ENOTSUP at
 * "new"): the window has nowhere to go.
 *
 * Eviction: plans_rank() is the disk cache's ranker (diskcache.h): for
 * the object key, the least distance in bytes from a plan's place to a
 * planned use of key (its rank); DISKCACHE_RANK_KEEP inside a window;
 * DISKCACHE_RANK_NONE when no plan names it ahead. The objects of a file a
 * plan's readers have passed that no plan needs again are demoted in the
 * disk cache (diskcache_demote): evicted first (an opened file's a few
 * files behind the place, the others' a window behind). To rank keys
 * ahead of the window, the objects of each planned file are listed: those
 * of its first chunk by the add itself (one metadata read a file, in both
 * forms), the other chunks' by the fetchers in the background, before
 * any fetch (up to PLAN_LISTERS at once, past the window); they are kept
 * as 64-bit hashes of the keys. A plan change (a replace, a new plan)
 * needs no other step: a demote mark counts only while no plan needs the
 * key (diskcache.h).
 *
 * Threads and locks: one lock (plans->lock, a leaf: nothing else is taken
 * under it, no call into the metadata, a store or the disk cache is made
 * with it held); PLAN_THREADS fetchers and a ticker (owner checks, idle
 * ends) of their own, joined at plans_close(). plans_rank() is called by
 * the disk cache with its own lock held: it takes plans->lock only, so
 * the order is the disk cache's lock, then plans->lock, and plans never
 * calls the disk cache with its lock held.
 *
 * Memory: bounded by PLAN_FILES_MAX planned files in all (each about 130
 * bytes when its objects are shared, small files in packs, 180 when it
 * has an object of its own: the inode, its position, the hashes of its
 * objects, the indexes by inode and by object; plancore.h), the keys of
 * the files fetched ahead until passed, and by the window bytes, which
 * are on disk, not in memory.
 */
#ifndef GRANARY_VFS_PLAN_H
#define GRANARY_VFS_PLAN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct fs;
struct plans;

#define PLAN_MAX	    64		    /* plans at once, per mount */
#define PLAN_FILES_MAX	    (4u << 20)	    /* planned files, all plans */
#define PLAN_THREADS	    24		    /* fetchers, shared */
#define PLAN_WINDOW_MIN	    (32ull << 20)   /* a plan's first window */
#define PLAN_IDLE_S	    1800	    /* no open for this long: ended */
#define PLAN_ADD_MAX	    (64u << 10)	    /* bytes of one add (XATTR_SIZE_MAX) */

struct plan_opts {
	/* all windows together; 0: a quarter of the disk cache, at most
	 * 4 GiB (fs_opts gets a --plan-window if the tests need one) */
	uint64_t window_max;
	unsigned idle_s; /* 0: PLAN_IDLE_S (tests set it low) */
};

/* The figures of one plan (get "granary.plan.ID", granary.stats'
 * "plans", the metrics). Bytes are the files' lengths. */
struct plan_info {
	uint64_t id;
	uint32_t uid;
	int32_t pid;	      /* its owner (0: not known) */
	uint64_t files;	      /* in the list */
	uint64_t place;	      /* the readers' place: files passed */
	uint64_t window;      /* bytes its window may take now */
	uint64_t ahead;	      /* bytes fetched ahead of the place now */
	uint64_t prefetched;  /* bytes fetched for it, in all */
	uint64_t used;	      /* of those, opened by its readers */
	uint64_t wasted;      /* of those, passed unopened or evicted
				 before their open */
	uint64_t waited;      /* planned files opened before their fetch
				 finished (their reader waited on the store) */
	uint64_t ready;	      /* planned files opened already fetched */
	int64_t idle_s;	      /* seconds since its last planned open */
};

/* Counters over all plans since mount, and now (stats, metrics). */
struct plans_stats {
	uint64_t plans;	      /* now */
	uint64_t files;	      /* planned now, all plans */
	uint64_t window;      /* bytes all windows may take now */
	uint64_t ahead;	      /* bytes fetched ahead now */
	uint64_t made, ended; /* plans: made, ended (any way) */
	uint64_t prefetched, used, wasted; /* bytes */
	uint64_t waited, ready;		   /* opens */
	uint64_t demoted;		   /* objects demoted in the cache */
};

/* Start the fetchers and the ticker; set the disk cache's ranker. The fs
 * must have its store and disk cache open (fs->cache), and its session
 * (plans read chunk lists). */
int plans_open(struct fs *fs, const struct plan_opts *o, struct plans **out);
/* Stop and free everything; the ranker is unset first. NULL-safe. */
void plans_close(struct plans *p);

/*
 * The control calls (ctl.c): name is the xattr's name (it starts with
 * "granary.plan"), ino the directory it is on (paths are resolved from
 * there), c the caller, pid the calling process (0: unknown). get: *value
 * malloc'd, *size its length; value NULL: a probe (above), only *size.
 * Errors as above; ENODATA for a name that is not one of plan's.
 */
struct vfs_caller;
int plans_xattr_get(struct plans *p, const struct vfs_caller *c, uint32_t pid,
		    uint64_t ino, const char *name, void **value, size_t *size);
int plans_xattr_set(struct plans *p, const struct vfs_caller *c, uint32_t pid,
		    uint64_t ino, const char *name, const void *value,
		    size_t size);

/* file.c: ino (a volume inode) opened for reading by process pid (0:
 * unknown). Quick: one hash lookup when no plan names ino. */
void plans_opened(struct plans *p, uint64_t ino, uint32_t pid);

/* The figures: all plans (*n of them, malloc'd array) and the totals.
 * Either pointer may be NULL. NULL p: none (0). */
int plans_list(struct plans *p, struct plan_info **info, size_t *n);
void plans_get_stats(struct plans *p, struct plans_stats *st);

/* pi as a JSON object, its members named as the fields (the control
 * calls, granary.stats). */
void plans_info_json(FILE *f, const struct plan_info *pi);

/* The disk cache's ranker (diskcache_rank_fn) and its passed
 * (diskcache_passed_fn: plancore_passed), arg the struct plans. */
uint64_t plans_rank(void *arg, const char *key);
int plans_passed(void *arg, const char *key);

#endif
