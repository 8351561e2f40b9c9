/*
 * meta_scan.h - walks over a whole volume, for gc and fsck (gc/): every
 * slice reference the metadata holds, and every pack it knows of. Types
 * and errors: meta.h.
 *
 * The walks read in pages (SCAN and HSCAN of 1,000, one pipeline of reads
 * a page) beside live clients and lock nothing: a reference that exists
 * for the whole walk is seen; one created, dropped or moved meanwhile (a
 * growing chunk 0 moves from its inode's hash to c<ino>_0) may be seen or
 * not. gc walks twice before it deletes anything (gc/gc.h).
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
};

struct meta_ref {
	enum meta_ref_from from;
	uint64_t ino; /* META_REF_CHUNK only */
	uint32_t idx; /* chunk index; META_REF_STAGED: block index */
	struct meta_slice s;
};

/* Called once a reference (a slice referenced twice is met twice); a
 * non-zero return stops the walk and is returned. Holes (id 0) are not
 * passed. */
typedef int (*meta_ref_fn)(void *arg, const struct meta_ref *r);
/* Every slice reference of the volume. META_EPROTO when a record is
 * corrupt (logged with its key). */
int meta_scan_refs(struct meta *m, meta_ref_fn fn, void *arg);

/* Every pack with a recorded total (META_PACK_OPEN while filling) and its
 * dead bytes; a non-zero return stops the walk and is returned. */
typedef int (*meta_pack_fn)(void *arg, uint64_t pack, uint64_t total,
			    uint64_t dead);
int meta_scan_packs(struct meta *m, meta_pack_fn fn, void *arg);
/* Forget a pack nothing references any more (its total and dead bytes),
 * once its object is deleted; a pack not known is fine. */
int meta_pack_forget(struct meta *m, uint64_t pack);

#endif
