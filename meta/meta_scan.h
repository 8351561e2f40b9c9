/*
 * meta_scan.h - walks over a whole volume, for gc and fsck (gc/): every
 * slice reference the metadata holds, every pack it knows of, and for
 * fsck every inode, directory entry, reference count and the names left
 * by clients. Types and errors: meta.h.
 *
 * The walks read in pages (SCAN and HSCAN of 1,000, one pipeline of reads
 * a page) beside live clients and lock nothing: a thing that exists for
 * the whole walk is seen, once; one created, dropped or moved meanwhile (a
 * growing chunk 0 moves from its inode's hash to c<ino>_0, an entry is
 * renamed) may be seen or not. gc walks twice before it deletes anything
 * (gc/gc.h); fsck reads again what it found wrong (gc/fsck.h).
 */
#ifndef GRANARY_META_SCAN_H
#define GRANARY_META_SCAN_H

#include "meta/meta.h"

enum meta_ref_from {
	/* a record of a chunk list: of a file, a snapshot copy, a version,
	 * or a deleted file whose chunks wait for reclamation (ino, idx) */
	META_REF_CHUNK = 1,
	/* a dead record not handed out yet (delslices, stagedead, and
	 * delayslices of compactions): its
	 * objects are about to be deleted by some client's reclamation;
	 * s.id 0 and s.pack set: a whole pack */
	META_REF_DEAD,
	/* a name in staging: an object a client holds on its node and has
	 * not put yet (s.id and idx: a block; s.pack: a pack) */
	META_REF_STAGED,
	/* meta_scan_refs_lists and meta_scan_chunks only: a chunk list or
	 * tail field (ino, idx, tail; s zeroed), before its records, so that
	 * one holding holes only is seen too */
	META_REF_LIST,
};

struct meta_ref {
	enum meta_ref_from from;
	uint64_t ino; /* META_REF_CHUNK only */
	uint32_t idx; /* chunk index; META_REF_STAGED: block index */
	int tail;     /* META_REF_CHUNK: in the inode's hash, not c<ino>_0 */
	uint64_t sid; /* META_REF_STAGED: the session that named it */
	struct meta_slice s;
};

/* Called once a reference (a slice referenced twice is met twice; each
 * chunk list once, even when SCAN repeats its key); a non-zero return
 * stops the walk and is returned. Holes (id 0) are not passed. */
typedef int (*meta_ref_fn)(void *arg, const struct meta_ref *r);
/* Every slice reference of the volume. META_EPROTO when a record is
 * corrupt (logged with its key). */
int meta_scan_refs(struct meta *m, meta_ref_fn fn, void *arg);
/* meta_scan_refs, with a META_REF_LIST call for each chunk list. */
int meta_scan_refs_lists(struct meta *m, meta_ref_fn fn, void *arg);
/* Only the references that are no chunk list's (META_REF_DEAD of
 * delayslices, delslices and stagedead, in that order, and
 * META_REF_STAGED): what fsck --path reads of the volume beside its
 * subtree. */
int meta_scan_refs_pending(struct meta *m, meta_ref_fn fn, void *arg);

/* The chunk lists v[0..n) (chunk 0: the tail field and c<ino>_0), in one
 * pipeline: a META_REF_LIST call for each that exists, then each of its
 * references (META_REF_CHUNK). */
struct meta_chunk_at {
	uint64_t ino;
	uint32_t idx;
};
int meta_scan_chunks(struct meta *m, const struct meta_chunk_at *v, size_t n,
		     meta_ref_fn fn, void *arg);

/* Every pack with a recorded total (META_PACK_OPEN while filling) and its
 * dead bytes; a non-zero return stops the walk and is returned. */
typedef int (*meta_pack_fn)(void *arg, uint64_t pack, uint64_t total,
			    uint64_t dead);
int meta_scan_packs(struct meta *m, meta_pack_fn fn, void *arg);
/* Forget a pack nothing references any more (its total, dead bytes and
 * retirement), once its object is deleted; a pack not known is fine. */
int meta_pack_forget(struct meta *m, uint64_t pack);
/* A pack rewrite moved the records of pack elsewhere: note the server's
 * time, from which gc counts its age (readers holding the old records
 * keep reading it for --min-age); again to move the time on. */
int meta_pack_retire(struct meta *m, uint64_t pack);
/* Every retired pack not forgotten yet, with that time (unix seconds). */
typedef int (*meta_retired_fn)(void *arg, uint64_t pack, int64_t when);
int meta_scan_retired(struct meta *m, meta_retired_fn fn, void *arg);

/* ---- inodes and entries (fsck) ---------------------------------------- */

enum meta_inode_state {
	META_INODE_OK = 0,
	META_INODE_CORRUPT, /* its attribute field is no inode record */
	META_INODE_TAIL,    /* a tail field without the inode's attributes */
};
struct meta_scan_inode {
	uint64_t ino;
	enum meta_inode_state state;
	int tail;	    /* chunk 0's records are in the inode's hash */
	struct meta_attr a; /* META_INODE_OK only */
};
/* Every inode (its attributes) and every stray tail field, each once. */
typedef int (*meta_inode_fn)(void *arg, const struct meta_scan_inode *i);
int meta_scan_inodes(struct meta *m, meta_inode_fn fn, void *arg);

struct meta_scan_dirent {
	uint64_t dir;
	const char *name; /* NUL-terminated, valid during the call */
	uint64_t ino;
	uint8_t type; /* the entry's (enum meta_type) */
	int corrupt;  /* the value is no entry: ino and type are 0 */
};
/* Every entry of every directory, each once: a directory of more than
 * one HSCAN page keeps the names it handed out (about 24 bytes each)
 * until it is done, since HSCAN repeats entries of a hash resized
 * meanwhile. */
typedef int (*meta_dirent_fn)(void *arg, const struct meta_scan_dirent *e);
int meta_scan_dirents(struct meta *m, meta_dirent_fn fn, void *arg);
/* The entries of directory dir alone, each once (none: it has none). */
int meta_scan_dir(struct meta *m, uint64_t dir, meta_dirent_fn fn, void *arg);

/* Inodes that are no directory's entry by design: the versions directory
 * v of directory dir (META_TREE_VERSIONS), and the top of a detached
 * snapshot being built or deleted (META_TREE_DETACHED, dir 0). */
enum meta_tree { META_TREE_VERSIONS = 1, META_TREE_DETACHED };
typedef int (*meta_tree_fn)(void *arg, enum meta_tree t, uint64_t ino,
			    uint64_t dir);
int meta_scan_trees(struct meta *m, meta_tree_fn fn, void *arg);

/* Deleted files whose chunk lists wait for reclamation (delfiles):
 * inode and the length still to drop. */
typedef int (*meta_delfile_fn)(void *arg, uint64_t ino, uint64_t length);
int meta_scan_delfiles(struct meta *m, meta_delfile_fn fn, void *arg);

/* Every slice with more than one reference: its references beyond the
 * first (sliceref). */
typedef int (*meta_sliceref_fn)(void *arg, uint64_t id, int64_t extra);
int meta_scan_slicerefs(struct meta *m, meta_sliceref_fn fn, void *arg);

/* Session ids the volume names: registered ones (sessions, first), then
 * the sessions of sessionstaged and sessionpending fields and of cache
 * group members' records. */
enum meta_sid_from {
	META_SID_SESSION = 1,
	META_SID_STAGED,
	META_SID_PENDING,
	META_SID_GROUP,
};
typedef int (*meta_sid_fn)(void *arg, uint64_t sid, enum meta_sid_from from);
int meta_scan_sids(struct meta *m, meta_sid_fn fn, void *arg);

/* The opens the volume records: each field sid of o<ino> (in_so 0), and
 * each member ino of so<sid> (in_so 1). */
typedef int (*meta_open_fn)(void *arg, uint64_t sid, uint64_t ino, int in_so);
int meta_scan_opens(struct meta *m, meta_open_fn fn, void *arg);

#endif
