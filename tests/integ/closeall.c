/*
 * closeall.c - test helper: write copies of SRC files under DST, then
 * close them all at once from one thread each (after a barrier), so that
 * the client sees that many small-file flushes arrive together.
 *   closeall DST SRC...
 * Exit 0, or 1 with a message naming the file that failed.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_FILES 256

static pthread_barrier_t barrier;
static int fds[MAX_FILES], errs[MAX_FILES];

static void *closer(void *arg)
{
	int i = (int)(long)arg;

	pthread_barrier_wait(&barrier);
	if (close(fds[i]))
		errs[i] = errno;
	return NULL;
}

static int copy_into(const char *src, int dst)
{
	char buf[65536];
	ssize_t n;
	int fd = open(src, O_RDONLY);

	if (fd < 0)
		return errno;
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		for (ssize_t done = 0; done < n;) {
			ssize_t w = write(dst, buf + done, (size_t)(n - done));
			if (w < 0) {
				int e = errno;
				close(fd);
				return e;
			}
			done += w;
		}
	}
	int e = n < 0 ? errno : 0;
	close(fd);
	return e;
}

int main(int argc, char **argv)
{
	pthread_t th[MAX_FILES];
	int n = argc - 2, rc = 0;

	if (n < 1 || n > MAX_FILES) {
		fprintf(stderr, "usage: closeall DST SRC... (1 to %d files)\n",
			MAX_FILES);
		return 2;
	}
	for (int i = 0; i < n; i++) {
		char path[4096], tmp[4096];
		snprintf(tmp, sizeof(tmp), "%s", argv[i + 2]);
		snprintf(path, sizeof(path), "%s/%s", argv[1], basename(tmp));
		fds[i] = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		int e = fds[i] < 0 ? errno : copy_into(argv[i + 2], fds[i]);
		if (e) {
			fprintf(stderr, "closeall: cannot write '%s': %s\n",
				path, strerror(e));
			return 1;
		}
	}
	pthread_barrier_init(&barrier, NULL, (unsigned)n);
	for (int i = 0; i < n; i++)
		if (pthread_create(&th[i], NULL, closer, (void *)(long)i)) {
			fprintf(stderr, "closeall: cannot start a thread\n");
			return 1;
		}
	for (int i = 0; i < n; i++) {
		pthread_join(th[i], NULL);
		if (errs[i]) {
			fprintf(stderr, "closeall: close of '%s' failed: %s\n",
				argv[i + 2], strerror(errs[i]));
			rc = 1;
		}
	}
	return rc;
}
