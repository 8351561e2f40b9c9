/*
 * objparts.c - the raw-store rows of bench/checkpoint.sh: one big file put
 * to (or got back from) the object store as fixed-size objects by T
 * threads, through libgranary's objstore (the client code granary uses),
 * so the rows show what a parallel upload of a checkpoint with no file
 * system in between does on that store.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fs/store/objstore.h"

static const char usage[] =
    "usage: objparts [-t THREADS] [-b MIB] [-g | -l] FILE URL PREFIX\n"
    "\n"
    "Put FILE as the objects PREFIX/000000, PREFIX/000001, ... of MIB MiB\n"
    "each (default 4; the last may be shorter), THREADS threads (default 8)\n"
    "taking the parts in order.\n"
    "  -g  get the objects back instead (FILE only gives the size) and\n"
    "      check their sizes; the bytes are dropped\n"
    "  -l  put them lazily (objstore_put_lazy), then one objstore_sync,\n"
    "      timed with the puts: what a granary save does\n"
    "Prints one line: parts= bytes= secs= mib_per_s= errors= store_puts=\n"
    "store_gets=. Exit 1 if any part failed.\n";

#define MAX_THREADS 256
#define MAX_ERRORS  5 /* printed; the rest are only counted */

struct job {
	struct objstore *store;
	const char *prefix;
	int fd; /* FILE, put only */
	int get;
	int lazy;
	uint64_t size; /* of FILE */
	size_t part;   /* bytes per object */
	size_t nparts;
	atomic_size_t next;
	atomic_ullong bytes;
	atomic_uint errors;
};

static void job_error(struct job *j, const char *what, const char *key,
		      const char *why)
{
	if (atomic_fetch_add(&j->errors, 1) < MAX_ERRORS)
		fprintf(stderr, "objparts: cannot %s '%s': %s\n", what, key,
			why);
}

static int pread_all(int fd, char *buf, size_t len, uint64_t off)
{
	while (len) {
		ssize_t n = pread(fd, buf, len, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno;
		if (n == 0)
			return EIO; /* FILE shrank under us */
		buf += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

static void one_part(struct job *j, size_t i, char *buf)
{
	uint64_t off = (uint64_t)i * j->part;
	size_t len =
	    j->size - off < j->part ? (size_t)(j->size - off) : j->part;
	char key[1200];
	int err;

	snprintf(key, sizeof(key), "%s/%06zu", j->prefix, i);
	if (j->get) {
		void *data = NULL;
		size_t got = 0;
		err = objstore_get(j->store, key, 0, 0, &data, &got);
		free(data);
		if (err) {
			job_error(j, "get", key, gr_strerror(err));
			return;
		}
		if (got != len) {
			job_error(j, "get", key, "wrong size");
			return;
		}
	} else {
		err = pread_all(j->fd, buf, len, off);
		if (err) {
			job_error(j, "read part for", key, strerror(err));
			return;
		}
		err = j->lazy ? objstore_put_lazy(j->store, key, buf, len)
			      : objstore_put(j->store, key, buf, len);
		if (err) {
			job_error(j, "put", key, gr_strerror(err));
			return;
		}
	}
	atomic_fetch_add(&j->bytes, len);
}

static void *worker(void *arg)
{
	struct job *j = arg;
	/* page-aligned, as the client's block buffers are: file:// writes
	 * them past the page cache */
	char *buf = j->get ? NULL : aligned_alloc(4096, j->part);

	if (!j->get && !buf) {
		job_error(j, "allocate", "buffer", strerror(ENOMEM));
		return NULL;
	}
	for (;;) {
		size_t i = atomic_fetch_add(&j->next, 1);
		if (i >= j->nparts)
			break;
		one_part(j, i, buf);
	}
	free(buf);
	return NULL;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	struct job j = {.fd = -1, .part = 4u << 20};
	pthread_t tids[MAX_THREADS];
	struct stat st;
	long threads = 8, mib;
	int c, err, started = 0;

	while ((c = getopt(argc, argv, "t:b:glh")) != -1) {
		switch (c) {
		case 't':
			threads = atol(optarg);
			break;
		case 'b':
			mib = atol(optarg);
			if (mib < 1 || mib > 1024) {
				fputs(usage, stderr);
				return 2;
			}
			j.part = (size_t)mib << 20;
			break;
		case 'g':
			j.get = 1;
			break;
		case 'l':
			j.lazy = 1;
			break;
		case 'h':
			fputs(usage, stdout);
			return 0;
		default:
			fputs(usage, stderr);
			return 2;
		}
	}
	if (argc - optind != 3 || threads < 1 || threads > MAX_THREADS ||
	    (j.get && j.lazy)) {
		fputs(usage, stderr);
		return 2;
	}
	const char *file = argv[optind];
	j.prefix = argv[optind + 2];
	j.fd = open(file, O_RDONLY);
	if (j.fd < 0 || fstat(j.fd, &st)) {
		fprintf(stderr, "objparts: cannot open '%s': %s\n", file,
			strerror(errno));
		return 1;
	}
	j.size = (uint64_t)st.st_size;
	j.nparts = (size_t)((j.size + j.part - 1) / j.part);
	err = objstore_open(argv[optind + 1], NULL, &j.store);
	if (err) {
		fprintf(stderr, "objparts: cannot open store '%s': %s\n",
			argv[optind + 1], gr_strerror(err));
		close(j.fd);
		return 1;
	}

	double t0 = now();
	for (; started < threads; started++) {
		err = pthread_create(&tids[started], NULL, worker, &j);
		if (err) {
			fprintf(stderr, "objparts: cannot start thread: %s\n",
				strerror(err));
			/* the threads already running take every part */
			break;
		}
	}
	for (int i = 0; i < started; i++)
		pthread_join(tids[i], NULL);
	if (j.lazy && (err = objstore_sync(j.store))) {
		job_error(&j, "sync", "the parts", gr_strerror(err));
	}
	double secs = now() - t0;

	struct objstore_stats ss;
	unsigned long long bytes = atomic_load(&j.bytes);
	unsigned errors = atomic_load(&j.errors) + (started == 0);
	objstore_get_stats(j.store, &ss);
	printf("parts=%zu bytes=%llu secs=%.3f mib_per_s=%.1f errors=%u "
	       "store_puts=%llu store_gets=%llu\n",
	       j.nparts, bytes, secs, secs > 0 ? bytes / 1048576.0 / secs : 0.0,
	       errors, (unsigned long long)ss.puts,
	       (unsigned long long)ss.gets);
	objstore_close(j.store);
	close(j.fd);
	return errors ? 1 : 0;
}
