/*
 * progress.h - a progress line for long work: items, bytes, rates (files
 * and bytes a second) and ETA, redrawn on stderr at most 4 times a second,
 * and only when stderr is a terminal. A NULL handle is valid everywhere (every
 * call is a no-op), so callers never test whether progress is shown.
 */
#ifndef GRANARY_PROGRESS_H
#define GRANARY_PROGRESS_H

#include <stdint.h>

struct progress;

/* title: "warmup"; total_items/total_bytes 0 when unknown. Returns NULL
 * when stderr is not a terminal or quiet is set. */
struct progress *progress_open(const char *title, uint64_t total_items,
			       uint64_t total_bytes, int quiet);
/* The totals, when they grow as the work is found (thread-safe). */
void progress_set_total(struct progress *p, uint64_t items, uint64_t bytes);
/* Add done work (thread-safe); redraws if due. */
void progress_add(struct progress *p, uint64_t items, uint64_t bytes);
/* Clear the line and free. */
void progress_close(struct progress *p);

/*
 * A status line of free text (the phases of gc and fsck), under the same
 * rules: on a terminal only, redrawn at most 4 times a second. One
 * thread writes it.
 */
struct status_line {
	int on;		 /* stderr is a terminal, not quiet */
	int shown;	 /* the line is on the screen */
	int64_t last_ns; /* last redraw */
};
void status_line_init(struct status_line *l, int quiet);
/* Redraw with the text of fmt when due (or force). */
void status_line_print(struct status_line *l, int force, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Take the line off the screen (before other output, and at the end). */
void status_line_clear(struct status_line *l);

#endif
