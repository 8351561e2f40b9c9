/*
 * stage.h - blocks of big files staged on a local disk (writeback mode).
 *
 * With --writeback, a block that the writer pool would put in the store is
 * encoded (the bytes the store would hold, codec.h) and written to
 *   <slot dir>/<id>_<idx>_<len>.blk
 * in the packer's staging slot (packer_stage_dir), fdatasync'd there, and
 * put in the background by upload threads, which delete the file once the
 * object is in the store. The file name is the object key's parts
 * (chunkstore_key), so a mount that finds the files of a client that died
 * (the packer moves them into its own slot) knows where each one goes.
 *
 * Order against reclamation: stage_drop (called before a slice's objects
 * are deleted) forgets the blocks of that slice that are not being put and
 * marks the one being put, whose upload thread deletes the object again
 * right after its put. Either the put finished before stage_drop, and the
 * deletion that follows stage_drop removes the object; or the upload thread
 * sees the mark and deletes it: no object is left behind by a reclamation
 * on this node. Another client's reclamation does not hand out a slice
 * whose blocks are named as staged (o->staged): its record waits in the
 * metadata until the last of them is put and said done.
 *
 * Locks: stage->lock is a leaf, never held across file I/O or a put.
 */
#ifndef GRANARY_STAGE_H
#define GRANARY_STAGE_H

#include <stddef.h>
#include <stdint.h>
#include "fs/store/codec.h"
#include "fs/store/objstore.h"

struct stage_opts {
	const char *dir; /* the slot directory, ours (flock'd by the packer) */
	enum codec_compress compress;
	uint32_t block_size;	/* raw bytes per block, at most */
	int uploaders;		/* upload threads (1..16) */
	uint64_t max_bytes;	/* staged bytes at most: stage_put waits */
	unsigned test_delay_ms; /* tests: wait this long before each put */
	/* Other clients' reclamation (may be NULL): a block is named before
	 * stage_put returns, so before anything references it (done 0;
	 * meta_staging_mark), and said to be in the store, or never to be
	 * (done 1; meta_staging_done). An error: the block goes to the
	 * store at once (done 0), or its upload is tried again (done 1). */
	void *cb_arg;
	int (*staged)(void *arg, uint64_t id, uint32_t idx, int done);
};

struct stage_stats {
	uint64_t blocks, bytes; /* put from the staging disk */
	uint64_t direct;	/* put at once: the staging disk failed */
	uint64_t dropped;	/* never put: their slice died first */
	uint64_t errors;	/* failed puts (retried) */
	uint64_t staged_blocks, staged_bytes; /* now: on local disk only */
	uint64_t recovered; /* found staged at open (an earlier mount) */
};

struct stage;

/* Takes over the .blk files already in dir and starts uploading them. The
 * store is borrowed and must outlive the stage. */
int stage_open(struct objstore *store, const struct stage_opts *o,
	       struct stage **out);
/* Uploads everything staged (a few tries each); what cannot be uploaded
 * stays on disk for the next mount. NULL-safe. */
void stage_close(struct stage *st);

/*
 * Encode block idx (len raw bytes) of slice id and stage it; on return it
 * is fdatasync'd in its file (stage_durable makes its name durable). Waits
 * while max_bytes are staged (back-pressure). When the staging disk fails
 * (ENOSPC, EDQUOT, EIO), the block is put in the store at once instead:
 * the error returned is then that of the put. Thread-safe.
 */
int stage_put(struct stage *st, uint64_t id, uint32_t idx, const void *raw,
	      uint32_t len);
/* Make the names of the files staged so far durable (one fsync of the
 * directory for every caller waiting). Call before committing them. */
int stage_durable(struct stage *st);
/*
 * The encoded block (id, idx) if it is staged here, in a malloc'd *enc of
 * *n bytes; with enc NULL only says whether it is. ENOENT: not staged here
 * (read the store).
 */
int stage_get(struct stage *st, uint64_t id, uint32_t idx, void **enc,
	      size_t *n);
/* Slice id lost its last reference: do not put its blocks (see above). */
void stage_drop(struct stage *st, uint64_t id);
/* Wait until every block staged so far is in the store, or an upload
 * fails (its error). NULL-safe. */
int stage_sync(struct stage *st);
void stage_get_stats(struct stage *st, struct stage_stats *out);

#endif
