/*
 * progress.h - a progress line for long work: items, bytes, rate and ETA,
 * redrawn on stderr at most 4 times a second, and only when stderr is a
 * terminal. A NULL handle is valid everywhere (every call is a no-op), so
 * callers never test whether progress is shown.
 */
#ifndef GRANARY_PROGRESS_H
#define GRANARY_PROGRESS_H

#include <stdint.h>

struct progress;

/* title: "warmup"; total_items/total_bytes 0 when unknown. Returns NULL
 * when stderr is not a terminal or quiet is set. */
struct progress *progress_open(const char *title, uint64_t total_items,
			       uint64_t total_bytes, int quiet);
/* Add done work (thread-safe); redraws if due. */
void progress_add(struct progress *p, uint64_t items, uint64_t bytes);
/* Clear the line and free. */
void progress_close(struct progress *p);

#endif
