/*
 * readahead.c - per-file access-pattern detection: decide, read by read,
 * which byte range is worth fetching ahead. Streams grow a window by
 * doubling; anything else gets no readahead at all, so shuffled small reads
 * cost only the blocks they touch.
 */
#include "fs/data/readahead.h"

#include <string.h>

/* The kernel's own readahead sends a few requests at once, and the
 * daemon's threads may take them slightly out of order: reads that land
 * within RA_TOLERANCE, or within RA_TOLERANCE_READS reads of their own size
 * (1 MiB requests, 4 MiB of kernel readahead in flight), of the expected
 * offset still count as a stream. */
#define RA_TOLERANCE	   (128u << 10)
#define RA_TOLERANCE_READS 4

/* A run must have read this much before anything is fetched ahead: shuffled
 * small reads that happen to land near each other (or a file's header read
 * on its own) are no stream, and 16 of them in a row never happen by
 * chance. A buffered stream gets past it with the kernel's second request. */
#define RA_MIN_RUN (64u << 10)

void readahead_init(struct readahead *ra)
{
	memset(ra, 0, sizeof(*ra));
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* Does [off, end) touch [next - tolerance, next + tolerance]? */
static int near_next(const struct readahead *ra, uint64_t off, uint64_t end)
{
	uint64_t tol = (end - off) * RA_TOLERANCE_READS;
	if (tol < RA_TOLERANCE)
		tol = RA_TOLERANCE;
	uint64_t lo = ra->next > tol ? ra->next - tol : 0;

	return off <= ra->next + tol && end >= lo;
}

void readahead_update(struct readahead *ra, uint64_t off, size_t len,
		      uint64_t length, uint32_t bs, uint64_t max,
		      uint64_t *pf_off, uint64_t *pf_len)
{
	uint64_t end = off + len;

	*pf_off = 0;
	*pf_len = 0;
	if (len == 0 || bs == 0)
		return;
	if (!near_next(ra, off, end)) {
		ra->window = 0;
		ra->seq = 0;
		ra->issued = 0;
		ra->next = end;
		ra->run = len;
		return;
	}
	/* A straggler from behind keeps the stream alive but neither grows
	 * the window nor moves next back; re-reading one spot is no stream. */
	if (end > ra->next) {
		ra->next = end;
		ra->run += len;
		if (ra->run >= RA_MIN_RUN) {
			ra->seq++;
			if (ra->seq == 1)
				ra->window = min_u64(2 * (uint64_t)bs, max);
			else
				ra->window = min_u64(ra->window * 2, max);
		}
	}
	if (ra->window == 0)
		return;

	/* The block holding end - 1 is the read's own; start after it. */
	uint64_t lo = end > ra->issued ? end : ra->issued;
	lo = (lo + bs - 1) / bs * bs;
	uint64_t hi = min_u64(end + ra->window, length);
	if (hi < length)
		hi = lo + (hi > lo ? (hi - lo) / bs * bs : 0);
	if (hi <= lo)
		return;
	*pf_off = lo;
	*pf_len = hi - lo;
	ra->issued = hi;
}
