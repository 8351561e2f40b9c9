/*
 * fsck_int.h - what the files of fsck share (internal to gc/): fsck.c
 * walks the metadata, judges and confirms; fsck_store.c compares the
 * referenced objects with the store (objects, deep); fsck_report.c
 * repairs and reports. The tables of inodes and slices, and the list
 * of candidates: problems found by a walk, each confirmed by reading
 * again before it is reported.
 */
#ifndef GRANARY_FSCK_INT_H
#define GRANARY_FSCK_INT_H

#include <stdint.h>
#include <sys/queue.h>

#include "gc/fsck.h"
#include "lib/hash.h"
#include "meta/meta.h"
#include "meta/meta_fsck.h"
#include "meta/meta_scan.h"

/* ---- inodes ------------------------------------------------------------ */

#define I_DELFILE  0x001 /* in delfiles (no inode: type 0) */
#define I_VDIR	   0x002 /* a versions directory (no entry by design) */
#define I_TOP	   0x004 /* top of a detached snapshot (no entry either) */
#define I_CORRUPT  0x008 /* its record is no record */
#define I_STACK	   0x010 /* on the stack of reach() */
#define I_RESOLVED 0x020 /* reach() knows where it leads: R_* below */
#define I_REACH	   0x1c0 /* the R_* value, shifted by 6 */
#define I_PTOP	   0x200 /* path: the top of the tree checked */
#define I_WALKED   0x400 /* path: listed (directories), queued (files) */
enum reach {
	R_MAIN = 1, /* the root */
	R_FLUX,	    /* a detached snapshot: not judged */
	R_ORPHANED, /* below a directory no entry names */
	R_LOOP,	    /* into a loop of directories */
	R_LOST,	    /* a parent that is not (reported with its entries) */
};

/* One inode (or a delfiles mark); hash: the inode number. */
struct ino {
	struct hash_node hn;
	uint64_t up;	  /* dirs: the directory naming it (the parent field
			     until an entry is met); others: the directory
			     of the first entry naming it; 0: none */
	uint32_t nlink;	  /* as the walk read it */
	uint32_t links;	  /* entries naming it */
	uint32_t subdirs; /* dirs: entries naming directories; files: chunks
			     their length spans */
	uint16_t flags;
	uint8_t type; /* enum meta_type; 0: no inode */
};

static inline uint64_t ino_of(const struct ino *x)
{
	return x->hn.hash;
}

/* An inode the walk found (with a record, corrupt or not). */
static inline int ino_exists(const struct ino *x)
{
	return x && (x->type || (x->flags & I_CORRUPT));
}

/* ---- slices and packs (their ids come from one sequence) --------------- */

#define S_SLICE	   0x001 /* a slice a chunk record references */
#define S_PACKED   0x002 /* ... stored as a frame of a pack */
#define S_PACK	   0x004 /* a pack frames of referenced slices are in */
#define S_DEAD	   0x008 /* a dead record (delslices, stagedead) */
#define S_STAGED   0x010 /* a block, or the pack, is staged on a node */
#define S_REF	   0x020 /* has a sliceref field */
#define S_TOTAL	   0x040 /* pack: has a total in packs */
#define S_OPEN	   0x080 /* pack: ... that of a pack being filled */
#define S_LISTED   0x100 /* pack: its object is in the store */
#define S_VERIFIED 0x200 /* deep: read (or queued) */
#define S_MISSING  0x400 /* objects: some of it is not in the store */

struct slc {
	struct hash_node hn; /* hash: the id */
	uint64_t ino;	     /* the first inode found referencing it */
	uint32_t idx;	     /* ... in its chunk idx */
	uint32_t refs;	     /* slices: chunk records; packs: frames */
	uint32_t size;	     /* slices: stored size; packs: end of the
				furthest frame */
	uint32_t seen;	     /* slices: blocks listed; packs: total */
	uint32_t live;	     /* packs: bytes of frames not counted dead
				yet (referenced, or waiting for deletion) */
	uint16_t flags;
};

static inline uint64_t slc_id(const struct slc *x)
{
	return x->hn.hash;
}

/* ---- candidates -------------------------------------------------------- */

enum cand_state { C_OPEN = 0, C_CONFIRMED, C_GONE };

struct cand {
	enum fsck_kind kind;
	enum cand_state state;
	uint64_t ino;	/* the inode concerned; entries: the one named */
	uint64_t dir;	/* entries: the directory */
	char *name;	/* entries: the name (malloc'd) */
	uint64_t id;	/* slice, pack or session */
	uint32_t idx;	/* chunk of the reference, or block */
	int tail;	/* stray chunks: a tail field */
	uint32_t nlink; /* the inode's nlink as the walk read it */
	uint8_t etype;	/* entries: the entry's type */
	uint8_t itype;	/* ... the inode's */
	int64_t found, expected, was;
	char *key; /* object key (malloc'd) */
	struct meta_fsck_inode now;
	struct meta_fsck_entry ent;
};

/* path: a file of the tree and the chunks its length spans. */
struct pfile {
	uint64_t ino;
	uint32_t chunks;
};

/* A name a session that is gone left in staging. */
struct sname {
	uint64_t sid, id; /* id: the slice's, or the pack's */
	uint32_t idx;	  /* a block's index */
	int pack;
};

struct arena;
struct fsck {
	struct meta *m;
	struct objstore *store;
	const struct fsck_opts *o;
	struct fsck_report *r;
	int64_t t0;    /* server time the walk began at: seconds */
	uint32_t t0ns; /* ... and nanoseconds */
	struct hash inos, slices;
	struct hash strays;   /* inodes of stray chunk lists (fsck.c) */
	struct hash sids;     /* sessions named anywhere (fsck.c) */
	struct arena *arenas; /* what the tables' entries live in */
	struct cand *cands;
	size_t ncand, capcand;
	uint64_t used;		    /* stored bytes of the files found */
	uint64_t live_sessions;	    /* registered when the walk began */
	int64_t c0_inodes, c0_used; /* the counters before the walk */
	int64_t c1_inodes, c1_used; /* ... and after */
	uint64_t ticks;
	const char *phase;
	struct pathcache *paths; /* fsck.c */
	/* path (fsck_path.c) */
	uint64_t top, top_up; /* the tree's top and the directory naming it */
	char *top_path;	      /* normalized: "/a/b", "" for the root */
	struct pfile *files;  /* the tree's files */
	size_t nfiles, capfiles;
	struct sname *snames; /* staged names of sessions that are gone */
	size_t nsnames, capsnames;
};

/* size bytes from the tables' arenas (freed with them), zeroed; NULL: no
 * memory. */
void *fsck_alloc(struct fsck *f, size_t size);

/* v, of n elements of size bytes in room for *cap, with room for one
 * more: grown by doubling (from 16), or NULL (no memory; v unchanged). */
void *fsck_grow(void *v, size_t n, size_t *cap, size_t size);
/* The entry of inode ino, or of slice/pack id; with add, made when
 * missing (NULL: out of memory). */
struct ino *fsck_ino(struct fsck *f, uint64_t ino, int add);
struct slc *fsck_slc(struct fsck *f, uint64_t id, int add);
/* A new candidate of kind (zeroed but for the kind), NULL: no memory. */
struct cand *fsck_cand(struct fsck *f, enum fsck_kind kind);
/* ... of slice or pack x: its id, and the first reference to it. */
struct cand *fsck_slice_cand(struct fsck *f, enum fsck_kind kind,
			     const struct slc *x);
void fsck_tick(struct fsck *f);
void fsck_phase(struct fsck *f, const char *name);
/* Is slice id (in pack, when pack != 0) still referenced by chunk idx
 * of ino? 1 yes, 0 no, or -errno. */
int fsck_still_referenced(struct fsck *f, uint64_t ino, uint32_t idx,
			  uint64_t id, uint64_t pack);

/* The candidate's inode with its entry e (of directory e->dir) counted:
 * its links, the subdirectories and parent of directories (fsck.c). */
struct dirent_state {
	struct fsck *f;
	uint64_t bad_dir; /* the last directory found missing */
};
int fsck_on_dirent(void *arg, const struct meta_scan_dirent *e);
int fsck_on_inode(void *arg, const struct meta_scan_inode *i);
int fsck_on_ref(void *arg, const struct meta_ref *mr);
int fsck_on_delfile(void *arg, uint64_t ino, uint64_t length);
int fsck_on_pack(void *arg, uint64_t pack, uint64_t total, uint64_t dead);
/* Every reference of what is checked: the volume's (meta_scan_refs), or
 * with path the tree's files' chunk lists. */
int fsck_refs(struct fsck *f, meta_ref_fn fn, void *arg);

/* fsck_path.c: the tree under o->path walked (its top resolved, its
 * directories listed, its inodes read and its chunk lists by
 * fsck_path_refs), then its slices' reference counts and packs read. */
int fsck_path_walk(struct fsck *f);
int fsck_path_refs(struct fsck *f, meta_ref_fn fn, void *arg);
int fsck_path_counts(struct fsck *f);

/* fsck_report.c: repair (o->repair) and report every confirmed
 * candidate; the paths' cache freed. */
int fsck_settle(struct fsck *f);
void fsck_paths_free(struct fsck *f);

/* fsck_store.c: the store (o->objects, o->deep). fsck_objects lists it
 * against the references; fsck_deep reads every referenced block and
 * frame; both add candidates. fsck_objects_confirm reads an object
 * candidate's objects again (c->state C_GONE when it is not one any
 * more). fsck_pack_size: the size of a pack's object, ENOENT when it is
 * not in the store, EINVAL without a store. */
int fsck_objects(struct fsck *f);
int fsck_objects_confirm(struct fsck *f, struct cand *c);
int fsck_deep(struct fsck *f);
int fsck_pack_size(struct fsck *f, uint64_t pack, uint64_t *size);
/* Are all objects of slice id of size bytes (pack: of pack id) in the
 * store? *there 1 yes, 0 no. */
int fsck_objects_there(struct fsck *f, uint64_t id, uint32_t size, int pack,
		       int *there);
/* Blocks of a slice of size bytes, and the raw length of block idx. */
uint32_t fsck_nblocks(const struct fsck *f, uint32_t size);
uint32_t fsck_block_len(const struct fsck *f, uint32_t size, uint32_t idx);

#endif
