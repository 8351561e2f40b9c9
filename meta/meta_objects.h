/*
 * meta_objects.h - the metadata API of the objects behind the data: packs
 * of small slices, objects staged on a node (writeback), and the
 * reclamation of slices nobody references. Types and errors: meta.h.
 */
#ifndef GRANARY_META_OBJECTS_H
#define GRANARY_META_OBJECTS_H

#include "meta/meta.h"

/* ---- packs ----------------------------------------------------------- */
/* Packs get their ids from the slice id sequence (meta_new_slice_id). */
#define META_PACK_OPEN (UINT64_C(1) << 52) /* total of a pack still filling */
/*
 * Record the total bytes of pack `pack` (the sum of its frames). Before a
 * pack's first slice is committed, its total must be recorded: a pack still
 * being filled gets META_PACK_OPEN, then its real total when sealed. The
 * dead bytes of a pack (frames whose slice lost its last reference) are
 * counted by meta_reclaim; *dead is set to 1 when they already cover the
 * total: the pack is forgotten and its object must be deleted (or never
 * uploaded). A total of 0 (a pack that got no frame) forgets the pack.
 * dead may be NULL.
 */
int meta_pack_total(struct meta *m, uint64_t pack, uint64_t total, int *dead);
/* Total and dead bytes of a pack; ENOENT when the volume does not know it
 * (never recorded, or already reclaimed). */
int meta_pack_usage(struct meta *m, uint64_t pack, uint64_t *total,
		    uint64_t *dead);

/*
 * Writeback against reclamation by any client (SCHEMA.md, "Staging"): name
 * an object staged on this node's disk (kind 'b': block idx of slice id;
 * kind 'p': pack id) before anything that references it is committed, and
 * say when it is in the store, or never will be (done). While a dead
 * slice or pack has an object named, meta_reclaim keeps its record back:
 * a delete before the staged put would leave the object behind.
 */
int meta_staging_mark(struct meta *m, char kind, uint64_t id, uint32_t idx);
int meta_staging_done(struct meta *m, char kind, uint64_t id, uint32_t idx);

/* ---- compaction ------------------------------------------------------ */
/* How long the slices a compaction replaced stay before reclamation may
 * delete them (a reader may still hold the old list): seconds. */
#define META_COMPACT_DELAY 3600
/* What a compaction read of a chunk: the byte length and SHA1 (hex) of its
 * slice records, so that the commit can tell they are still its start. */
struct meta_chunk_tag {
	uint64_t bytes;
	char sha1[41];
};
/* meta_read_chunk, and the tag of what was read. */
int meta_compact_read(struct meta *m, uint64_t ino, uint32_t idx,
		      struct meta_slice **s, size_t *n,
		      struct meta_chunk_tag *tag);
/*
 * Replace the records tag names (still the start of chunk idx's list) with
 * the n records s (fresh slices holding the same bytes; pos/off/len as in
 * meta_write), atomically; records appended since stay after them. The
 * replaced slices that lose their last reference are reclaimed after
 * delay seconds. EAGAIN: the list changed at its start (a truncate,
 * another compaction): nothing was done, the fresh slices are the
 * caller's to delete. ENOENT: no such file.
 */
int meta_compact_chunk(struct meta *m, uint64_t ino, uint32_t idx,
		       const struct meta_chunk_tag *tag,
		       const struct meta_slice *s, size_t n, uint32_t delay);

/*
 * A pack compaction: every record of chunk idx of ino equal to old (a
 * packed slice) becomes new (the same slice with its frame in another
 * pack, whose total is recorded already). *moved (may be NULL): the
 * records replaced, 0 when old is gone meanwhile.
 */
int meta_pack_move(struct meta *m, uint64_t ino, uint32_t idx,
		   const struct meta_slice *old, const struct meta_slice *new,
		   size_t *moved);

/* ---- reclamation ----------------------------------------------------- */
/*
 * Advance background reclamation (deleted inodes, truncated chunks) and
 * hand out up to cap objects that no longer have any reference: the caller
 * deletes them. An entry with pack == 0 is a slice (delete its blocks); one
 * with id == 0 and pack != 0 is a whole pack whose every frame is dead
 * (delete the pack object). A dead frame of a pack that still has live
 * frames only adds to the pack's dead bytes. *n = 0 when there is nothing
 * left to do.
 */
int meta_reclaim(struct meta *m, struct meta_slice *dead, size_t cap,
		 size_t *n);
/*
 * The slices compactions replaced wait META_COMPACT_DELAY (or their
 * compaction's delay) before meta_reclaim hands them out, for readers that
 * hold the old chunk list: mounted clients. When no session is alive (no
 * heartbeat within the session ttl), nobody can: up to cap of them are
 * made ripe now (*moved); cap 0 only counts. *left: those still waiting
 * after; *clients: the live sessions (then nothing moved). Call
 * meta_reclaim afterwards to have them handed out.
 */
int meta_reclaim_delayed(struct meta *m, size_t cap, uint64_t *moved,
			 uint64_t *left, uint64_t *clients);

#endif
