/*
 * fsutil.h - small helpers shared by the modules that keep objects in local
 * files (the file:// store, the disk cache, the writeback staging) and by
 * the ones that wait on deadlines (packer, stage).
 */
#ifndef GRANARY_FSUTIL_H
#define GRANARY_FSUTIL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* write() all of p, retrying short writes and EINTR; 0 or errno. */
int fsutil_write_all(int fd, const void *p, size_t len);
/* fsutil_write_all at the file's start, bypassing the page cache: from a
 * page-aligned p, all but the last partial page go out with O_DIRECT (no
 * copy into the page cache, nothing evicted from it). From another p, or
 * where the file system refuses O_DIRECT, a plain write. The caller
 * fsyncs as before: O_DIRECT alone promises nothing after a crash. */
int fsutil_write_direct(int fd, const void *p, size_t len);
/* pread() all len bytes at off, retrying short reads and EINTR; 0, errno,
 * or EIO when the file ends first. */
int fsutil_pread_all(int fd, void *p, size_t len, uint64_t off);

/* Run fn(arg) and return what it returns, or EIO if it raised SIGBUS
 * (a mapped file whose disk failed, or that shrank): for reading mapped
 * files. fn must take no lock and allocate nothing: it is left by a jump.
 * A SIGBUS outside such a call keeps its default action. */
int fsutil_guard_sigbus(int (*fn)(void *arg), void *arg);

/* CLOCK_MONOTONIC in milliseconds. */
int64_t fsutil_mono_ms(void);
/* When to try a failed upload again (fsutil_mono_ms() time), after tries
 * failures: 1 s, doubling, at most 30 s from now. */
int64_t fsutil_retry_at_ms(int tries);
/* CLOCK_MONOTONIC in nanoseconds. */
int64_t fsutil_mono_ns(void);
/* A condition variable whose timed waits run on CLOCK_MONOTONIC. */
void fsutil_cond_init_mono(pthread_cond_t *c);
/* Wait on c (made by fsutil_cond_init_mono) until fsutil_mono_ms() at_ms
 * at the latest. */
void fsutil_wait_until_ms(pthread_cond_t *c, pthread_mutex_t *m, int64_t at_ms);

#endif
