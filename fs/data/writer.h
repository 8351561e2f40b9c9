/*
 * writer.h - per-file write buffers and the shared pool that uploads them.
 *
 * A writer turns write() calls into slices (a slice is one run of
 * contiguous writes inside one chunk). Each full block is handed at once to
 * the pool's uploader threads while the application keeps writing (puts
 * durable only at the store's next sync, several of a file at once); flush
 * uploads the partial blocks, waits for every upload, makes them durable
 * with one sync of the store and commits the slices, in order, through
 * the commit callback. All writers share one
 * byte budget (buffer_size): a writer that would exceed it waits for
 * uploads to drain (back-pressure), and flushes itself if it holds buffered
 * data nobody else can drain.
 *
 * With a stage (writeback), the uploaders stage full and flushed blocks on
 * the local disk instead (stage_put) and flush makes them durable there
 * (stage_durable) before it commits: the store gets them in the background.
 *
 * Locks: writer->lock may be held while taking pool->lock, never the other
 * way round; packer_put is called with writer->lock held (not pool->lock),
 * stage_durable too; stage_put is called by uploaders holding no lock.
 * Callbacks are called with writer->lock held.
 */
#ifndef GRANARY_WRITER_H
#define GRANARY_WRITER_H

#include <stddef.h>
#include <stdint.h>
#include "meta/meta.h"
#include "fs/data/chunkstore.h"
#include "fs/data/packer.h"

struct stage;
struct wpool;
struct writer;

struct writer_cbs {
	void *arg;
	int (*new_id)(void *arg, uint64_t *id);
	/* Commit slices of ino in order; called from writer_flush. */
	int (*commit)(void *arg, uint64_t ino, const struct meta_chunk_slice *s,
		      size_t n);
};

/* uploaders: threads (1..64); buffer_size: bytes shared by all writers. */
int wpool_open(struct chunkstore *cs, int uploaders, size_t buffer_size,
	       struct wpool **out);
void wpool_close(struct wpool *p); /* NULL-safe; all writers closed first */
/* Pack slices of up to pack_max bytes that a flush finds whole in memory
 * (small files written at once) through pk; NULL turns packing off. Set
 * before any writer opens. pk must outlive the pool. */
void wpool_set_packer(struct wpool *p, struct packer *pk, uint32_t pack_max);
/* Stage blocks through st (writeback); NULL: put them in the store. Set
 * before any writer opens; st must outlive the pool. */
void wpool_set_stage(struct wpool *p, struct stage *st);
size_t wpool_buffered(struct wpool *p); /* bytes held now */
/* The budget's use, for the metrics: bytes held now, the budget, and the
 * writes that waited for it (back-pressure) and how long, in all. */
struct wpool_stats {
	uint64_t buffered, budget, waits, wait_ns;
};
void wpool_get_stats(struct wpool *p, struct wpool_stats *st);

int writer_open(struct wpool *p, uint64_t ino, const struct writer_cbs *cbs,
		struct writer **out);
/* Buffer len bytes at file offset off. May block on the shared budget.
 * Returns the sticky error of an earlier failed upload, if any. */
int writer_write(struct writer *w, uint64_t off, const void *buf, size_t len);
/* Upload everything buffered and commit it. On return data and metadata
 * are durable. Returns (and clears) the sticky error. */
int writer_flush(struct writer *w);
/* The next flush's small slices are of batch id of n members (packer.h,
 * packer_put_batch): their pack waits for the others, not the window. */
void writer_set_batch(struct writer *w, uint64_t id, uint32_t n);
/* Nonzero while data is buffered but not committed. */
int writer_dirty(struct writer *w);
/* One past the highest offset buffered but not committed (0 if none). */
uint64_t writer_end(struct writer *w);
/* Free; data not flushed is dropped. NULL-safe. */
void writer_close(struct writer *w);

#endif
