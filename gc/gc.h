/*
 * gc.h - garbage collection of a volume's objects: what the store holds
 * that no metadata references (leaked by a client killed between its
 * upload and its commit, or between a reclamation and its deletes), and
 * the dead bytes inside packs. Used by `granary gc` (tools/cmd_gc.c).
 *
 * gc_run lists the store's blocks/ and packs/, walks the metadata
 * (meta_scan.h) for every reference, and compares. An object is leaked
 * when nothing references it and it is older than min_age; younger ones
 * may be uploads whose commit is on its way, and are only counted. With
 * delete set, the metadata is walked a second time (a reference moved
 * during the first walk is seen by the second) and the objects still
 * unreferenced are deleted in parallel; an object that vanished meanwhile
 * is fine. Safe beside mounted clients that are writing.
 *
 * With delete set, reclamation runs first, as a mounted client's
 * reclaimer does (a volume nobody mounts has none): the chunk lists of
 * deleted files are dropped, the dead slices and packs deleted, and the
 * slices compactions replaced once their delay (META_COMPACT_DELAY) is
 * over; with min_age 0 and no live session, all of those at once (a reader
 * holding an old chunk list is a mounted client).
 *
 * With compact set, every chunk whose slice list has grown long is
 * compacted afterwards (fs/data/compact.h), as clients do in the
 * background for the chunks they write; and every pack more than half
 * dead and older than min_age has its live frames copied into a new pack
 * and its records moved there (one script per chunk list); the old pack,
 * referenced by nothing then, is deleted by a later gc once min_age has
 * passed since the rewrite (not since its upload: a reader holding the
 * old records keeps reading it meanwhile; meta_pack_retire notes when).
 *
 * Memory: about 40 bytes per slice and pack referenced, and 40 bytes per
 * unreferenced object found (and 16 per chunk to compact).
 */
#ifndef GRANARY_GC_H
#define GRANARY_GC_H

#include <stdint.h>

struct meta;
struct objstore;

struct gc_report {
	/* the metadata */
	uint64_t refs;	  /* slice references (records, staged names) */
	uint64_t slices;  /* distinct slices and packs referenced */
	uint64_t pending; /* dead slices and packs some client is about to
			     delete (reclamation), left to it */
	/* the store: objects under blocks/ and packs/ */
	uint64_t objects, bytes;
	uint64_t live, live_bytes;     /* referenced */
	uint64_t live_pending;	       /* of those, only by what waits for
					  reclamation (compactions' delay) */
	uint64_t leaked, leaked_bytes; /* unreferenced, older than min_age */
	int64_t leaked_oldest;	       /* its time (unix seconds); 0: none */
	uint64_t young, young_bytes;   /* unreferenced, younger: left */
	uint64_t retired; /* of those, packs a rewrite replaced less than
			     min_age ago (their age counts from it) */
	uint64_t other, other_bytes;   /* keys that are no object of ours */
	/* temp files of puts a crash left half done (file:// pools), older
	 * than min_age and an hour; with delete: those deleted */
	uint64_t temps, temps_bytes, temps_deleted;
	/* live packs: their bytes, those of frames nothing references, and
	 * how many are more than half dead */
	uint64_t packs, pack_bytes, pack_dead_bytes, packs_half_dead;
	/* with delete */
	uint64_t deleted, deleted_bytes, delete_errors;
	/* with delete: dead slices and packs reclamation handed out (as a
	 * mounted client's reclaimer does) and gc deleted; the slices
	 * compactions replaced still waiting for their delay after the run,
	 * and the live sessions that kept them waiting (min_age 0) */
	uint64_t reclaimed, delayed, delayed_clients;
	/* chunk lists of COMPACT_MIN_RECS records or more; with compact:
	 * those rewritten, their records before and after, bytes rewritten */
	uint64_t long_chunks, compacted, records_before, records_after;
	uint64_t compacted_bytes, compact_errors;
	/* with compact: packs more than half dead (and older than min_age)
	 * whose live frames were copied into a new pack, the records moved,
	 * and the bytes of those packs before and after */
	uint64_t packs_rewritten, frames_moved, pack_bytes_before,
	    pack_bytes_after;
};

/* Where gc_run is, for a progress line: phase and the report so far. */
typedef void (*gc_progress_fn)(void *arg, const char *phase,
			       const struct gc_report *r);

struct gc_opts {
	int64_t min_age;	 /* seconds */
	int delete;		 /* delete the leaked objects */
	int threads;		 /* parallel deletes: 1..256, 0 = 16 */
	int compact;		 /* compact the long chunk lists */
	uint32_t block_size;	 /* the volume's (for compact) */
	int compress;		 /* the volume's enum codec_compress */
	gc_progress_fn progress; /* NULL: none; called from gc_run's thread */
	void *progress_arg;
};

/*
 * Compare the store with the metadata and fill *r (zeroed first). 0, or
 * the first error of the metadata or the listing (nothing is deleted
 * then); failed deletes only count in delete_errors (logged).
 */
int gc_run(struct meta *m, struct objstore *store, const struct gc_opts *o,
	   struct gc_report *r);

#endif
