/*
 * readahead.h - the access-pattern detector of one open file: how far ahead
 * of a read the client should fetch. A run of sequential reads, once it has
 * read 64 KiB, doubles the window (from two blocks' worth up to a maximum);
 * a read that jumps elsewhere drops it to zero, so random small reads fetch
 * only what they ask for. Pure state, no locking: the caller serializes
 * calls per file.
 */
#ifndef GRANARY_READAHEAD_H
#define GRANARY_READAHEAD_H

#include <stddef.h>
#include <stdint.h>

struct readahead {
	uint64_t next;	 /* where a sequential read would start */
	uint64_t window; /* bytes ahead to keep fetched; 0 = none */
	uint64_t issued; /* prefetch already asked for up to here */
	unsigned seq;	 /* consecutive sequential reads seen */
	uint64_t run;	 /* bytes read by the current run */
};

void readahead_init(struct readahead *ra);

/*
 * Account for a read of [off, off+len) of a file of `length` bytes, with
 * block size bs and a window cap of max bytes. Sets [*pf_off, *pf_off +
 * *pf_len) to the range newly worth prefetching (*pf_len 0: nothing); a
 * range already issued is not issued again.
 */
void readahead_update(struct readahead *ra, uint64_t off, size_t len,
		      uint64_t length, uint32_t bs, uint64_t max,
		      uint64_t *pf_off, uint64_t *pf_len);

#endif
