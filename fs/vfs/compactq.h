/*
 * compactq.h - the client's background compaction: a chunk whose slice
 * list its commits keep growing (a log appended to line by line) is
 * compacted (fs/data/compact.h) by one worker, off the writers' path.
 * Every COMPACTQ_EVERY commits to a chunk, the chunk is queued; the worker
 * reads its list (one round trip) and rewrites it when it has grown long.
 * A full queue drops the request: the next commits ask again.
 */
#ifndef GRANARY_COMPACTQ_H
#define GRANARY_COMPACTQ_H

#include <stdint.h>

#include "fs/data/chunkstore.h"
#include "meta/meta.h"

#define COMPACTQ_EVERY 32

struct compactq;

/* One worker over meta and cs (both must outlive the queue). 0, ENOMEM or
 * a thread's error. */
int compactq_open(struct meta *m, struct chunkstore *cs, struct compactq **out);
/* Finish the compaction under way, drop the queued ones. NULL-safe. */
void compactq_close(struct compactq *q);
/* A commit to chunk idx of file ino is done. Thread-safe; never blocks. */
void compactq_note(struct compactq *q, uint64_t ino, uint32_t idx);

struct compactq_stats {
	uint64_t queued, compacted, bytes, records_dropped, errors;
};
void compactq_get_stats(struct compactq *q, struct compactq_stats *st);

#endif
