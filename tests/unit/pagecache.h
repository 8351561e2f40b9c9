/*
 * pagecache.h - for unit tests: how much of a file is in the page cache.
 */
#ifndef GRANARY_TEST_PAGECACHE_H
#define GRANARY_TEST_PAGECACHE_H

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Pages of the file at path that are in the page cache. */
static inline size_t resident_pages(const char *path)
{
	struct stat st;
	size_t n = 0;
	int fd = open(path, O_RDONLY);

	cr_assert_geq(fd, 0, "open '%s': %s", path, strerror(errno));
	cr_assert_eq(fstat(fd, &st), 0);
	size_t len = (size_t)st.st_size, pages = (len + 4095) / 4096;
	void *p = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	cr_assert_neq(p, MAP_FAILED);
	unsigned char *vec = malloc(pages);
	cr_assert_not_null(vec);
	cr_assert_eq(mincore(p, len, vec), 0);
	for (size_t i = 0; i < pages; i++)
		n += vec[i] & 1;
	free(vec);
	munmap(p, len);
	close(fd);
	return n;
}

#endif
