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
 * its first frame arrived, whichever comes first; then it is put, its total is recorded in the
 * metadata (meta_pack_total, through the callback) and everyone whose frame
 * it holds is woken. Until then packer_put waits: on return the frame is
 * durable in the store, as a flushed block is. The window trades a little
 * latency of each close for fewer, larger objects when many files are
 * written at once.
 *
 * Locks: packer->lock is taken after writer->lock (packer_put is called
 * from a flush) and is never held across a put or a callback.
 */
#ifndef GRANARY_PACKER_H
#define GRANARY_PACKER_H

#include <stddef.h>
#include <stdint.h>
#include "chunkstore.h"

struct packer_opts {
	uint32_t pack_size; /* seal a pack at this many bytes (4 MiB) */
	unsigned window_ms; /* seal a pack this long after its first frame */
	enum codec_compress compress;
};

struct packer_cbs {
	void *arg;
	int (*new_id)(void *arg, uint64_t *id); /* a pack id */
	/* record the total bytes of a sealed pack (meta_pack_total) */
	int (*total)(void *arg, uint64_t pack, uint64_t total);
};

struct packer_stats {
	uint64_t packs, frames, bytes; /* sealed and put */
	uint64_t errors;
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
 * A writer that buffers data it may soon hand to packer_put says so with
 * +1, and -1 once it has (or will not): a pack whose frames come from every
 * holder is sealed at once instead of waiting out the window. Each
 * packer_put caller must hold while it waits.
 */
void packer_hold(struct packer *p, int delta);
void packer_get_stats(struct packer *p, struct packer_stats *st);

#endif
