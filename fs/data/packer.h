/*
 * packer.h - small slices packed many to one object.
 *
 * A dataset of small files would cost one PUT per file, and a cold read one
 * GET per file. The packer gathers the small slices that writers flush at
 * about the same time into one pack object (chunkstore_pack_key): each
 * slice is one codec frame (header + payload + XXH3, as a block is), so a
 * frame can be read alone with a ranged GET and checked alone.
 *
 * A pack is sealed when it reaches pack_size bytes, when every writer that
 * holds small data (packer_hold) has its frames in it, or window_ms after
 * its first frame arrived, whichever comes first; then it is put, its total is
 * recorded in the metadata (meta_pack_total, through the callback) and everyone
 * whose frame it holds is woken. Until then packer_put waits: on return the
 * frame is durable in the store, as a flushed block is. The window trades a
 * little latency of each close for fewer, larger objects when many files are
 * written at once.
 *
 * Writeback (stage_dir set): packer_put appends the frames to the open
 * pack's file in the staging directory on a local disk (a frame stored raw
 * is written from the caller's bytes with pwritev, not copied) and returns
 * once they are fsync'd there. Group commit: callers whose frames are in
 * the file when an fdatasync starts share it, and the one about to start
 * it first waits (about one fdatasync's time at most) for frames still
 * being copied in and for holders (packer_hold) yet to arrive. A failed
 * fdatasync fails every put waiting on it and seals the pack, so later
 * puts go to a new one. Upload threads put each pack when it is full or
 * its window is over (the writer commits its metadata at once, so a pack's
 * total is recorded as META_PACK_OPEN before its first frame). Frames are
 * read from the staging file until the pack is in the store
 * (packer_staged_get). A packer that finds staging directories of a client
 * that died (no lock held on them) takes their packs over and uploads them.
 * packer_close uploads everything staged; what cannot be uploaded stays on
 * disk for the next mount. The slot directory is shared with fs/data/stage.h
 * (blocks of big files): the packer takes the staged blocks of dead slots
 * over too, by moving them into its own slot.
 *
 * Locks: packer->lock is taken after writer->lock (packer_put is called
 * from a flush) and is never held across a put, file I/O or a callback,
 * except new_id and (writeback) the META_PACK_OPEN record of a new pack.
 * It is the only lock of the packer (group commit waits on conditions of
 * it).
 */
#ifndef GRANARY_PACKER_H
#define GRANARY_PACKER_H

#include <stddef.h>
#include <stdint.h>
#include "fs/data/chunkstore.h"

struct packer_opts {
	uint32_t pack_size; /* seal a pack at this many bytes (4 MiB) */
	unsigned window_ms; /* seal a pack this long after its first frame */
	enum codec_compress compress;
	const char *stage_dir; /* writeback: stage packs here; NULL: off */
	int uploaders;	       /* writeback: upload threads (1..16) */
	int max_staged;	       /* writeback: sealed packs waiting, at most */
};

struct packer_cbs {
	void *arg;
	int (*new_id)(void *arg, uint64_t *id); /* a pack id */
	/* record the total bytes of a sealed pack (meta_pack_total); *dead
	 * (may be NULL) is set when every frame of it is dead already */
	int (*total)(void *arg, uint64_t pack, uint64_t total, int *dead);
	/* writeback (may be NULL): a new staged pack is named before any
	 * frame of it is committed (done 0; meta_staging_mark), and said to
	 * be in the store, or never to be, once put or found all dead (done
	 * 1; meta_staging_done). An error: no pack (done 0), or the upload
	 * is tried again (done 1). */
	int (*staged)(void *arg, uint64_t pack, int done);
};

struct packer_stats {
	uint64_t packs, frames, bytes; /* sealed and put */
	uint64_t errors;
	uint64_t staged_packs, staged_bytes; /* now: on local disk only */
	uint64_t recovered; /* packs taken over from a dead client */
};

/* One slice to pack: in raw/len; out pack, off, len (where it went). */
struct packer_item {
	const void *raw;
	uint32_t len;
	struct chunkstore_frame at;
};

struct packer;

/* The store is borrowed and must outlive the packer. */
int packer_open(struct objstore *store, const struct packer_opts *o,
		const struct packer_cbs *cbs, struct packer **out);
/* Waits for packs being filled to be put. NULL-safe. */
void packer_close(struct packer *p);

/*
 * Pack n slices; returns when every pack holding them is in the store and
 * recorded (or with the first error: EIO, ENOSPC, ENOMEM...). Thread-safe;
 * concurrent callers share packs.
 */
int packer_put(struct packer *p, struct packer_item *items, size_t n);
/*
 * A batch: n writers (2 or more) whose slices were all written before any
 * of them flushes, and who say so (the importer, through a control xattr
 * of a mount). Their pack is sealed as soon as every member's put came in
 * (a member with nothing to pack calls with n 0), and it waits for them
 * up to 200 ms after it opened, or its window if that is longer: under
 * load a batch's flushes come further apart than a 10 ms window, and
 * other writers holding small data (a log file left open) would keep the
 * holders' rule from sealing it early. Writeback mode gathers them anyway
 * (group commit): ignored there.
 */
struct packer_batch {
	uint64_t id; /* the caller's, unique while the batch lasts; 0: none */
	uint32_t n;  /* members */
};
int packer_put_batch(struct packer *p, struct packer_item *items, size_t n,
		     const struct packer_batch *batch);
/*
 * A writer that buffers data it may soon hand to packer_put says so with
 * +1, and -1 once it has (or will not): a pack whose frames come from every
 * holder is sealed at once instead of waiting out the window. Each
 * packer_put caller must hold while it waits.
 */
void packer_hold(struct packer *p, int delta);
/*
 * Writeback: bytes [off, off+len) of a pack still staged on this node, in
 * a malloc'd buffer; ENOENT when it is not staged here (read the store).
 */
int packer_staged_get(struct packer *p, uint64_t pack, uint32_t off,
		      uint32_t len, void **data);
/* Wait until every pack staged so far is in the store, or an upload
 * fails (its error). Default mode: returns 0 at once. */
int packer_sync(struct packer *p);
void packer_get_stats(struct packer *p, struct packer_stats *st);
/* Writeback: this packer's staging slot directory (flock'd for as long as
 * the packer lives), for fs/data/stage.h; NULL in default mode. */
const char *packer_stage_dir(const struct packer *p);

#endif
