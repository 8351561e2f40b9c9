/*
 * fsutil.c - small file helpers (see fsutil.h).
 */
#include "fsutil.h"

#include <errno.h>
#include <unistd.h>

int fsutil_write_all(int fd, const void *p, size_t len)
{
	const unsigned char *c = p;
	while (len > 0) {
		ssize_t n = write(fd, c, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno;
		}
		c += n;
		len -= (size_t)n;
	}
	return 0;
}
