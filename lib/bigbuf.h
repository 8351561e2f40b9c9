/*
 * bigbuf.h - block-sized buffers that are used again instead of going back
 * to the system at once.
 *
 * The daemon serves big buffers (above 256 KiB) from mmap, so that freed
 * blocks return to the system and its memory stays near --buffer-size. The
 * price is a fresh mapping per 4 MiB block: 1024 page faults and as many
 * zeroed pages, about as much CPU as the copy the block was fetched for.
 * Buffers that stores fetch blocks into, and that blocks are encoded into,
 * come from here instead: a freed one is kept (a few at most, BIGBUF_KEEP)
 * for the next block, already mapped.
 *
 * A bigbuf is plain malloc'd memory: free() may release it, and
 * bigbuf_free() takes any malloc'd pointer. Process-wide; thread-safe.
 */
#ifndef GRANARY_BIGBUF_H
#define GRANARY_BIGBUF_H

#include <stddef.h>

#define BIGBUF_MIN   (1u << 20) /* smaller requests are plain malloc */
#define BIGBUF_KEEP  8		/* buffers kept for reuse, at most */
#define BIGBUF_ALIGN 4096	/* new big buffers start on a page */

/* A buffer of at least n bytes (n 0: 1), or NULL. Its contents are
 * undefined (a reused one holds an old block). */
void *bigbuf_alloc(size_t n);
/* Keep p for a later bigbuf_alloc, or free it. NULL-safe. */
void bigbuf_free(void *p);

#endif
