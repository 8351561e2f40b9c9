/*
 * fsck.h - check a volume's metadata against itself (and, asked, its
 * objects against the store) and repair what is safe to. Used by
 * `granary fsck` (tools/cmd_fsck.c).
 *
 * fsck_run walks the metadata (meta_scan.h): every inode, every directory
 * entry, every chunk list, the reference counts, packs, staging, the
 * sessions' fields and opens, pendingspace and the trash's key; it lists the
 * store with objects (one listing of blocks/ and packs/, never a HEAD per
 * object) and reads every referenced block and frame with deep. What it finds
 * wrong it reads again before it says so (meta_fsck.h): a thing a live client
 * changed meanwhile (an inode whose ctime is after the walk began, an entry
 * renamed, a count that moved) is not judged but counted in changed. Each
 * problem goes to o->problem with the path of the file concerned, found by
 * walking up the entries from the root.
 *
 * With repair, each problem of a kind fsck knows how to fix is fixed by
 * one script that first checks the thing is still as fsck saw it: an
 * inode a session has open, or one that changed, is skipped. Inodes no
 * entry names (orphans) are linked as "#<ino>" in /lost+found. Never
 * repaired (FSCK_FIX_CANNOT, with why): corrupt records, a directory of
 * two names or in a loop, entries of a directory that is not, missing
 * or corrupt objects, and a slice both referenced and waiting for
 * deletion unless objects (or deep) saw its objects in the store.
 *
 * With path, only the tree under that directory (or that one file) is
 * checked: its entries, inodes, link counts, chunk lists, the reference
 * counts and packs of its slices, and with objects and deep their
 * objects. What names or files outside the tree may account for is not
 * judged there (a file's nlink above its names in the tree, a slice's
 * sliceref above its references in the tree: counted in outside); an
 * nlink or a sliceref below what the tree alone holds is. The volume's
 * counters, orphans, stray chunk lists, pendingspace, sessions, opens and
 * staging are not judged. Time and memory follow the tree, not the
 * volume, but for one listing of the store (objects) and one pass over
 * delfiles and the dead slices' lists.
 *
 * Memory: about 50 bytes per inode and 50 per slice or pack referenced
 * (two hash tables; bench/fsck_rate: 116 bytes a file of one slice), the
 * names of the directory being walked when it has more than one HSCAN
 * page, and what each problem found takes.
 */
#ifndef GRANARY_FSCK_H
#define GRANARY_FSCK_H

#include <stdint.h>

struct meta;
struct objstore;

enum fsck_kind {
	FSCK_ENTRY_NO_INODE = 1, /* an entry names an inode that is not */
	FSCK_ENTRY_TYPE,	 /* an entry's type is not its inode's */
	FSCK_ENTRY_CORRUPT,	 /* an entry's value is no entry */
	FSCK_ENTRY_NO_DIR,	 /* entries of a directory that is not */
	FSCK_INODE_CORRUPT,	 /* an inode's record is no record */
	FSCK_NLINK,		 /* a non-directory's nlink is not its names */
	FSCK_DIR_NLINK,		 /* a directory's nlink is not 2 + subdirs */
	FSCK_DIR_PARENT,	 /* a directory's parent is not its entry's */
	FSCK_DIR_NAMES,		 /* a directory with more than one name */
	FSCK_ORPHAN,		 /* no entry names it, nobody has it open */
	FSCK_LOOP,		 /* directories that only reach themselves */
	FSCK_STRAY_CHUNKS,	 /* chunk lists of an inode that is not */
	FSCK_TOTALINODES,	 /* the inode counter is not the inodes */
	FSCK_USEDSPACE,		 /* the space counter is not the files' */
	FSCK_SLICEREF,		 /* references found != 1 + sliceref */
	FSCK_SLICE_DEAD,	 /* a slice to be deleted is referenced */
	FSCK_PACK_TOTAL,	 /* a referenced pack without its total */
	FSCK_PACK_DEAD,		 /* a pack's dead bytes past its total */
	FSCK_STAGING,		 /* staged names of a session that is gone */
	FSCK_SESSION,		 /* fields of a session that is gone */
	FSCK_OBJECT_MISSING,	 /* objects: a referenced object is not */
	FSCK_OBJECT_SIZE,	 /* objects: ... has not its size */
	FSCK_OBJECT_CORRUPT,	 /* deep: ... fails its checksum */
	FSCK_DELFILE_LIVE,	 /* a file that exists and waits in delfiles */
	FSCK_CHUNK_PAST_END,	 /* a chunk list past its file's length */
	FSCK_PENDINGSPACE, /* pendingspace is not the sessionpending sum */
	FSCK_OPEN_GONE,	   /* an open (o<ino>, so<sid>) of a session that
			      is gone */
	FSCK_TRASH,	   /* the key `trash` names no directory */
	FSCK_NKINDS
};
/* "entry-no-inode", "nlink", ...: a kind's name, for --json. */
const char *fsck_kind_name(enum fsck_kind k);

enum fsck_fix {
	FSCK_FIX_NONE = 0, /* not asked to repair */
	FSCK_FIX_DONE,	   /* repaired */
	FSCK_FIX_SKIPPED,  /* a live client has it (open, or changed it) */
	FSCK_FIX_CANNOT,   /* fsck does not repair this (why says more) */
	FSCK_FIX_FAILED,   /* the repair failed (why: the error) */
};

struct fsck_problem {
	enum fsck_kind kind;
	/* the file's path from the root ("/a/b"), NULL when no path
	 * reaches it (an orphan, a deleted file): then ino names it */
	const char *path;
	uint64_t ino;
	uint64_t id;	 /* slice, pack or session id; 0: none */
	const char *key; /* the object (or chunk list) concerned, or NULL */
	int64_t found, expected; /* the counts compared, where there are */
	const char *what;	 /* one line: what is wrong */
	enum fsck_fix fix;
	const char *why; /* SKIPPED, CANNOT, FAILED: why; else NULL */
};
/* Called once a problem, from fsck_run's thread; strings valid during the
 * call. */
typedef void (*fsck_problem_fn)(void *arg, const struct fsck_problem *p);

struct fsck_report {
	uint64_t inodes, dirs, files, symlinks, others;
	uint64_t entries;		   /* directory entries */
	uint64_t refs;			   /* slice references of chunk lists */
	uint64_t slices, packs;		   /* distinct ones referenced */
	uint64_t in_flux;		   /* inodes of snapshots being built or
					      deleted: not judged */
	uint64_t objects, object_bytes;	   /* objects: listed, referenced */
	uint64_t verified, verified_bytes; /* deep: read and checked */
	uint64_t outside;     /* path: link and reference counts that names
				 or files outside the tree may account for:
				 not judged */
	uint64_t changed;     /* found wrong, changed by a client since: not
				 judged (run again on a quieter volume) */
	int counters_changed; /* the counters moved during the walk: not
				 judged */
	uint64_t problems, by_kind[FSCK_NKINDS];
	uint64_t fixed, skipped, unfixed; /* with repair: unfixed = CANNOT or
					     FAILED */
};

/* Where fsck_run is, for a progress line: phase and the report so far. */
typedef void (*fsck_progress_fn)(void *arg, const char *phase,
				 const struct fsck_report *r);

struct fsck_opts {
	uint32_t block_size; /* the volume's (meta_volume) */
	uint32_t compress;   /* the volume's: enum codec_compress */
	int objects;	     /* list the store: every referenced object there,
				of its size (store needed) */
	int deep;	     /* read every referenced block and frame and check
				it (implies objects) */
	int repair;	     /* fix what is safe to (a read-write meta) */
	int threads;	     /* parallel reads of deep: 1..256, 0 = 8 */
	const char *path;    /* only the tree under this path ("/a/b", from
				the volume's root); NULL: the whole volume */
	fsck_problem_fn problem; /* NULL: none */
	void *problem_arg;
	fsck_progress_fn progress; /* NULL: none */
	void *progress_arg;
};

/*
 * Check the volume (store: may be NULL without objects and deep; a pack
 * total is repaired from its object's size, so without a store it is
 * not) and fill *r (zeroed first). 0, or the first error of the metadata
 * or the store: the check is then incomplete (problems found so far were
 * reported). With path: ENOENT when it names nothing, ENOTDIR when a
 * part of it before the last is no directory, EINVAL when it is not
 * absolute.
 */
int fsck_run(struct meta *m, struct objstore *store, const struct fsck_opts *o,
	     struct fsck_report *r);

#endif
