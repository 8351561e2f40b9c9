/*
 * fsutil.h - small file helpers shared by the modules that keep objects in
 * local files (the file:// store and the disk cache).
 */
#ifndef GRANARY_FSUTIL_H
#define GRANARY_FSUTIL_H

#include <stddef.h>

/* write() all of p, retrying short writes and EINTR; 0 or errno. */
int fsutil_write_all(int fd, const void *p, size_t len);

#endif
