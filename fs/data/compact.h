/*
 * compact.h - rewrite a chunk whose slice list has grown long (a log
 * appended to in many small writes, a file overwritten piece by piece) as
 * one fresh slice per run of its visible bytes, so that a read needs a
 * few objects where it needed hundreds and the list stays short. The
 * bytes are read through the chunk store, written as new blocks, and the
 * list is switched in one step (meta_compact_chunk): records appended
 * meanwhile stay, a truncate meanwhile makes it give up. The replaced
 * slices are reclaimed after a delay, so that readers holding the old
 * list keep reading them. Used by the client in the background (fs/vfs)
 * and by `granary gc --compact`.
 */
#ifndef GRANARY_COMPACT_H
#define GRANARY_COMPACT_H

#include <stddef.h>
#include <stdint.h>

#include "fs/data/chunkstore.h"
#include "meta/meta.h"

/* A chunk list of at least this many records is worth rewriting. */
#define COMPACT_MIN_RECS 64

struct compact_result {
	size_t before, after; /* records of the chunk list */
	uint64_t bytes;	      /* bytes rewritten (0: nothing done) */
};

/*
 * Compact chunk idx of file ino when its list has at least min_recs
 * records (0: COMPACT_MIN_RECS) and rewriting it leaves fewer than half.
 * delay: seconds the replaced slices wait before reclamation (0:
 * META_COMPACT_DELAY). 0 with res->bytes 0 when there was nothing to gain;
 * EAGAIN when the list changed at its start meanwhile (nothing changed;
 * try again later); an error of the reads or puts (nothing changed, the
 * fresh blocks are deleted again) or of the switch (EIO: it may have
 * happened; the fresh blocks stay, and gc finds them if it did not).
 */
int compact_chunk(struct meta *m, struct chunkstore *cs, uint64_t ino,
		  uint32_t idx, size_t min_recs, uint32_t delay,
		  struct compact_result *res);

#endif
