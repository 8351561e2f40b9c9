/*
 * lz4stream.h - LZ4 frames (the format of the lz4 command line tool) over
 * byte streams given as callbacks: a sink that compresses what it is
 * given into another sink, and a source that hands out the bytes of
 * another source, decompressed when they start with an LZ4 frame's magic
 * and as they are otherwise. Used by `granary dump` / `load` and the
 * clients' metadata backups; it knows nothing of what the bytes are.
 *
 * The callbacks have the shapes of meta_dump.h's sink and source, so that
 * the handles chain with them: pass lz4stream_sink_write and the handle
 * where a sink is wanted. Memory: about 300 KiB a handle (64 KiB blocks).
 * A handle is used by one thread at a time.
 */
#ifndef GRANARY_LIB_LZ4STREAM_H
#define GRANARY_LIB_LZ4STREAM_H

#include <stddef.h>
#include <sys/types.h>

/* Take n bytes: 0, or a positive errno. */
typedef int (*lz4stream_write_fn)(void *arg, const void *p, size_t n);
/* Give up to cap bytes: bytes given, 0 at the end, or a negative errno. */
typedef ssize_t (*lz4stream_read_fn)(void *arg, void *p, size_t cap);

struct lz4stream_sink;
/* A sink that writes one LZ4 frame (with a content checksum) to out.
 * ENOMEM, or EIO when liblz4 refuses to start. */
int lz4stream_sink_open(lz4stream_write_fn out, void *out_arg,
			struct lz4stream_sink **s);
/* A lz4stream_write_fn: arg is the sink. Errors are sticky. */
int lz4stream_sink_write(void *s, const void *p, size_t n);
/* End the frame (what makes it whole) and free the sink: 0, or the
 * first error of any write or of the end. NULL-safe. */
int lz4stream_sink_close(struct lz4stream_sink *s);

struct lz4stream_source;
/* A source over in. Nothing is read before the first read. ENOMEM. */
int lz4stream_source_open(lz4stream_read_fn in, void *in_arg,
			  struct lz4stream_source **s);
/* A lz4stream_read_fn: arg is the source. A stream that starts with the
 * LZ4 frame magic is decompressed (frames one after another too); a frame
 * that is corrupt, fails its checksum or is cut short gives -EBADMSG. */
ssize_t lz4stream_source_read(void *s, void *p, size_t cap);
/* 1 when the stream was found compressed (after the first read). */
int lz4stream_source_compressed(const struct lz4stream_source *s);
void lz4stream_source_close(struct lz4stream_source *s); /* NULL-safe */

#endif
