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
 *
 * A small slice may instead be one encoded frame inside a pack object
 * shared with other slices (fs/data/packer.h writes them):
 *   packs/<pack/1000000>/<pack/1000%1000>/<pack>
 * It is read with one ranged GET of its frame and cached like a block.
 */
#ifndef GRANARY_CHUNKSTORE_H
#define GRANARY_CHUNKSTORE_H

#include <stddef.h>
#include <stdint.h>
#include "fs/store/codec.h"
#include "fs/store/objstore.h"

struct chunkstore_opts {
	uint32_t block_size; /* raw bytes per block, 64 KiB..16 MiB */
	enum codec_compress compress;
	size_t mem_cache_bytes; /* 0 = no memory cache */
	int prefetch_threads;	/* background fetchers; 0 = no prefetch */
	/* Frames of packs that are on this node only (writeback staging):
	 * bytes [off, off+len) of pack in a malloc'd *data, or ENOENT when
	 * the store has them. NULL: none. */
	int (*staged_get)(void *arg, uint64_t pack, uint32_t off, uint32_t len,
			  void **data);
	/* Blocks on this node only (fs/data/stage.h): the encoded block in a
	 * malloc'd *enc of *n bytes; with enc NULL only whether it is staged
	 * (0); ENOENT when the store has it. NULL: none. */
	int (*staged_block)(void *arg, uint64_t id, uint32_t idx, void **enc,
			    size_t *n);
	/* Told before the blocks of slice id are deleted. NULL: none. */
	void (*staged_drop)(void *arg, uint64_t id);
	void *staged_arg; /* of the three hooks above */
	/* How long a read waits for a block missing from the store (another
	 * client's writeback may not have put it yet), then EIO; 0: no wait.
	 * Packs always wait up to 15 s. One wait per slice or pack: reads of
	 * it that come meanwhile, or up to as long after, end by the first
	 * one's deadline. */
	unsigned block_wait_ms;
};

struct chunkstore_stats {
	uint64_t gets, get_bytes, puts, put_bytes, dels;
	uint64_t cache_hits, cache_misses, corrupt;
	uint64_t prefetched, prefetch_drops; /* queued / dropped (queue full) */
	uint64_t ranged_reads; /* served by a ranged GET of a few segments */
	/* the memory cache: what it holds now, and the blocks it let go to
	 * make room */
	uint64_t cache_bytes, cache_entries, cache_evictions;
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
/* Object key of a pack. */
void chunkstore_pack_key(uint64_t pack, char *buf, size_t cap);
/* What a key of the two forms above names: 1, or 0 when it is no such key
 * (for gc, which meets every key of the store). */
struct chunkstore_keyinfo {
	int pack; /* 1: pack id; 0: block idx (raw length len) of slice id */
	uint64_t id;
	uint32_t idx, len;
};
int chunkstore_parse_key(const char *key, struct chunkstore_keyinfo *k);

/* Where a packed slice's frame sits: bytes [off, off+len) of the pack. */
struct chunkstore_frame {
	uint64_t pack;
	uint32_t off, len;
};
/* Encode and put one block; durable on return. */
int chunkstore_put_block(struct chunkstore *cs, uint64_t id, uint32_t idx,
			 const void *raw, uint32_t len);
/* Bytes a caller of chunkstore_put_block_inplace() leaves free (and
 * writable) just before the raw bytes of a block. */
size_t chunkstore_headroom(const struct chunkstore *cs);
/* chunkstore_put_block without a copy of a block stored raw: its header
 * and checksum table are written into the headroom before raw, and the
 * block is put from there (compressed blocks still get a buffer). */
int chunkstore_put_block_inplace(struct chunkstore *cs, uint64_t id,
				 uint32_t idx, void *raw, uint32_t len);
/* Either of the two (inplace: the second), the block durable only once a
 * chunkstore_sync() that began after it returned has returned 0
 * (objstore_put_lazy); nothing may point at it in the metadata before. */
int chunkstore_put_block_lazy(struct chunkstore *cs, uint64_t id, uint32_t idx,
			      void *raw, uint32_t len, int inplace);
/* objstore_sync() of the store: every lazy put that returned is durable,
 * or the error (EIO, ENOSPC) says that they may be lost. */
int chunkstore_sync(struct chunkstore *cs);
/* Copy bytes [off, off+len) of slice (id, size) into buf, fetching the
 * blocks needed. A block that fails its checksum gives EIO (and a log
 * line); a missing block gives EIO too. */
int chunkstore_read(struct chunkstore *cs, uint64_t id, uint32_t size,
		    uint32_t off, uint32_t len, void *buf);
/*
 * Zero-copy reads: the same bytes as chunkstore_read and _read_frame, handed
 * to fn run by run, in order, where they lie in the memory cache. Each run
 * comes with a pin that keeps its bytes valid and in memory: fn owns it
 * (also when it returns an error, which stops the read and is returned)
 * and releases it with chunkstore_unpin(). Pinned blocks are not evicted,
 * so pins are to be held briefly (for one reply). A small piece of a block
 * that is not cached (a ranged read) comes in a buffer of its own, freed by
 * its unpin.
 */
struct chunkstore_pin;
typedef int (*chunkstore_run_fn)(void *arg, const void *data, size_t len,
				 struct chunkstore_pin *pin);
int chunkstore_read_pinned(struct chunkstore *cs, uint64_t id, uint32_t size,
			   uint32_t off, uint32_t len, chunkstore_run_fn fn,
			   void *arg);
int chunkstore_read_frame_pinned(struct chunkstore *cs, uint64_t id,
				 uint32_t size,
				 const struct chunkstore_frame *f, uint32_t off,
				 uint32_t len, chunkstore_run_fn fn, void *arg);
void chunkstore_unpin(struct chunkstore *cs,
		      struct chunkstore_pin *pin); /* NULL-safe */
/*
 * Ask for the blocks covering [off, off+len) of slice (id, size) to be
 * fetched in the background into the memory cache (and through the store,
 * so a disk cache fills too). Never blocks: a block already cached or in
 * flight is skipped, and when the bounded queue is full the rest is
 * dropped (counted in prefetch_drops).
 */
void chunkstore_prefetch(struct chunkstore *cs, uint64_t id, uint32_t size,
			 uint32_t off, uint32_t len);
/* chunkstore_read and chunkstore_prefetch for a slice stored as frame f. */
int chunkstore_read_frame(struct chunkstore *cs, uint64_t id, uint32_t size,
			  const struct chunkstore_frame *f, uint32_t off,
			  uint32_t len, void *buf);
void chunkstore_prefetch_frame(struct chunkstore *cs, uint64_t id,
			       uint32_t size, const struct chunkstore_frame *f);
/* Delete every block of a slice (missing blocks are fine). */
int chunkstore_delete(struct chunkstore *cs, uint64_t id, uint32_t size);
/* Delete a pack object (every frame in it must be dead). */
int chunkstore_delete_pack(struct chunkstore *cs, uint64_t pack);
void chunkstore_get_stats(struct chunkstore *cs, struct chunkstore_stats *st);

#endif
