/*
 * reader.h - read a byte range of a file: chunk slice lists -> visible
 * extents -> blocks, with zeros for holes and nothing past the length.
 */
#ifndef GRANARY_READER_H
#define GRANARY_READER_H

#include <stddef.h>
#include <stdint.h>
#include "meta/meta.h"
#include "fs/data/chunkstore.h"

/* Return the (unresolved, oldest first) slice list of chunk idx of ino;
 * *s is malloc'd and freed by the reader. */
typedef int (*reader_chunk_fn)(void *arg, uint64_t ino, uint32_t idx,
			       struct meta_slice **s, size_t *n);

/*
 * Read up to len bytes at off of a file of `length` bytes into buf; *got is
 * short only at the end of the file. Errors: EIO for a missing or corrupt
 * block, or what fn returns.
 */
int reader_read(struct chunkstore *cs, uint64_t ino, uint64_t length,
		uint64_t off, size_t len, void *buf, size_t *got,
		reader_chunk_fn fn, void *arg);

/*
 * reader_read without the copy: the bytes go to run, in order, as
 * chunkstore_read_pinned() hands them out (holes as runs of zeros with a
 * NULL pin); run owns every pin it gets. *got as reader_read. An error
 * from run stops the read and is returned.
 */
int reader_read_pinned(struct chunkstore *cs, uint64_t ino, uint64_t length,
		       uint64_t off, size_t len, size_t *got,
		       chunkstore_run_fn run, void *run_arg, reader_chunk_fn fn,
		       void *arg);

/* Start background fetches of the blocks holding [off, off+len) of the
 * file (see chunkstore_prefetch); holes and bytes past length are skipped.
 * Returns what fn returns, or 0. */
int reader_prefetch(struct chunkstore *cs, uint64_t ino, uint64_t length,
		    uint64_t off, uint64_t len, reader_chunk_fn fn, void *arg);

#endif
