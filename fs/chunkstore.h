/*
 * chunkstore.h - slices as blocks in an object store.
 *
 * A slice of `size` bytes is stored as blocks of block_size bytes (the last
 * one shorter), each block encoded by codec.h and put as one object:
 *   blocks/<id/1000000>/<id/1000%1000>/<id>_<idx>_<len>
 * Reads go through a bounded in-memory block cache shared by all files;
 * concurrent misses of the same block are fetched once. A small read of an
 * uncompressed block that is not in memory fetches only the 4 KiB segments
 * it needs (codec.h v2) and leaves the memory cache alone; compressed
 * blocks, large reads and prefetches fetch whole blocks.
 */
#ifndef GRANARY_CHUNKSTORE_H
#define GRANARY_CHUNKSTORE_H

#include <stddef.h>
#include <stdint.h>
#include "codec.h"
#include "objstore.h"

struct chunkstore_opts {
	uint32_t block_size; /* raw bytes per block, 64 KiB..16 MiB */
	enum codec_compress compress;
	size_t mem_cache_bytes; /* 0 = no memory cache */
	int prefetch_threads;   /* background fetchers; 0 = no prefetch */
};

struct chunkstore_stats {
	uint64_t gets, get_bytes, puts, put_bytes, dels;
	uint64_t cache_hits, cache_misses, corrupt;
	uint64_t prefetched, prefetch_drops; /* queued / dropped (queue full) */
	uint64_t ranged_reads; /* served by a ranged GET of a few segments */
};

struct chunkstore;

/* The store is borrowed: it must outlive the chunkstore. */
int chunkstore_open(struct objstore *store, const struct chunkstore_opts *o,
		    struct chunkstore **out);
void chunkstore_close(struct chunkstore *cs); /* NULL-safe */
uint32_t chunkstore_block_size(const struct chunkstore *cs);

/* Object key of block idx (raw length len) of slice id. */
void chunkstore_key(uint64_t id, uint32_t idx, uint32_t len, char *buf,
		    size_t cap);
/* Encode and put one block; durable on return. */
int chunkstore_put_block(struct chunkstore *cs, uint64_t id, uint32_t idx,
			 const void *raw, uint32_t len);
/* Copy bytes [off, off+len) of slice (id, size) into buf, fetching the
 * blocks needed. A block that fails its checksum gives EIO (and a log
 * line); a missing block gives EIO too. */
int chunkstore_read(struct chunkstore *cs, uint64_t id, uint32_t size,
		    uint32_t off, uint32_t len, void *buf);
/*
 * Ask for the blocks covering [off, off+len) of slice (id, size) to be
 * fetched in the background into the memory cache (and through the store,
 * so a disk cache fills too). Never blocks: a block already cached or in
 * flight is skipped, and when the bounded queue is full the rest is
 * dropped (counted in prefetch_drops).
 */
void chunkstore_prefetch(struct chunkstore *cs, uint64_t id, uint32_t size,
                         uint32_t off, uint32_t len);
/* Delete every block of a slice (missing blocks are fine). */
int chunkstore_delete(struct chunkstore *cs, uint64_t id, uint32_t size);
void chunkstore_get_stats(struct chunkstore *cs, struct chunkstore_stats *st);

#endif
