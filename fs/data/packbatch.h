/*
 * packbatch.h - the batches of packer_put_batch (packer.h): how many of
 * each batch's members came, for the few batches seen last.
 *
 * A fixed table: a batch not in it takes the slot of the batch seen least
 * lately, so that one whose members never all come is forgotten (its pack
 * is then sealed by its window). Not thread-safe: the packer calls it
 * under its lock.
 */
#ifndef GRANARY_PACKBATCH_H
#define GRANARY_PACKBATCH_H

#include <stdint.h>

#define PACKBATCH_SLOTS 8

struct packbatch_table {
	struct {
		uint64_t id; /* 0: a free slot */
		uint32_t n, came;
		int64_t seen_ms;
	} slot[PACKBATCH_SLOTS];
};

/* One more member of batch id (of n, id not 0) came at now_ms; 1 when
 * that made the batch whole. */
int packbatch_come(struct packbatch_table *t, uint64_t id, uint32_t n,
		   int64_t now_ms);
/* Have all members of batch id come? 0 for one not in the table. */
int packbatch_whole(const struct packbatch_table *t, uint64_t id);

#endif
