/*
 * randread.c - random small reads of one file, the access pattern of a
 * sample-indexed dataset or an embedding table: N reads of SIZE bytes at
 * seeded random offsets aligned to SIZE, from T threads sharing one open
 * file, optionally O_DIRECT (so the page cache neither helps nor reads
 * ahead) and checked against a source copy. Used by t0110 and by
 * bench/randread.sh, so the test and the benchmark read the same way.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char usage[] =
    "usage: randread [-d] [-n READS] [-b SIZE] [-t THREADS] [-S SEED] "
    "[-c SRC] FILE\n"
    "Read READS (default 64) pieces of SIZE bytes (default 4096) of FILE at\n"
    "random offsets aligned to SIZE (the same ones for the same SEED),\n"
    "with THREADS threads (default 1).\n"
    "  -d      open FILE with O_DIRECT\n"
    "  -c SRC  compare every piece with the same bytes of SRC\n"
    "Prints: reads= bytes= secs= reads_per_s= mismatches= errors=\n"
    "io_read_bytes= (what the kernel read from block devices for it)\n"
    "Exit 1 on any error or mismatch.\n";

#define MAX_THREADS 256

struct job {
	int fd, src; /* src: -1 without -c */
	size_t size;
	uint64_t *offs;
	size_t n;
	atomic_size_t next;
	atomic_ullong bytes;
	atomic_uint mismatches, errors;
};

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static int pread_full(int fd, void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t r = pread(fd, (char *)buf + done, len - done,
				  (off_t)(off + done));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return errno;
		if (r == 0)
			return EIO; /* the file is shorter than it said */
		done += (size_t)r;
	}
	return 0;
}

/* read_bytes of /proc/self/io: bytes this process made the kernel fetch
 * from block devices (readahead included); 0 for FUSE and network. */
static unsigned long long io_read_bytes(void)
{
	unsigned long long v = 0;
	char line[128];
	FILE *f = fopen("/proc/self/io", "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "read_bytes: %llu", &v) == 1)
			break;
	fclose(f);
	return v;
}

static void *reader(void *arg)
{
	struct job *j = arg;
	void *buf = NULL, *want = NULL;

	/* O_DIRECT wants aligned buffers */
	if (posix_memalign(&buf, 4096, j->size) ||
	    posix_memalign(&want, 4096, j->size)) {
		atomic_fetch_add(&j->errors, 1);
		goto out;
	}
	for (;;) {
		size_t i = atomic_fetch_add(&j->next, 1);
		if (i >= j->n)
			break;
		int err = pread_full(j->fd, buf, j->size, j->offs[i]);
		if (err) {
			if (atomic_fetch_add(&j->errors, 1) < 5)
				fprintf(stderr,
					"randread: cannot read %zu bytes at "
					"%" PRIu64 ": %s\n",
					j->size, j->offs[i], strerror(err));
			continue;
		}
		atomic_fetch_add(&j->bytes, j->size);
		if (j->src < 0)
			continue;
		err = pread_full(j->src, want, j->size, j->offs[i]);
		if (err || memcmp(buf, want, j->size)) {
			if (atomic_fetch_add(&j->mismatches, 1) < 5)
				fprintf(stderr,
					"randread: bytes at %" PRIu64
					" differ from the source\n",
					j->offs[i]);
		}
	}
out:
	free(buf);
	free(want);
	return NULL;
}

int main(int argc, char **argv)
{
	struct job j = {.src = -1, .size = 4096, .n = 64};
	const char *src = NULL;
	uint64_t seed = 1;
	int threads = 1, direct = 0, c;
	struct stat st;

	while ((c = getopt(argc, argv, "dn:b:t:S:c:h")) != -1) {
		switch (c) {
		case 'd':
			direct = 1;
			break;
		case 'n':
			j.n = strtoull(optarg, NULL, 0);
			break;
		case 'b':
			j.size = strtoull(optarg, NULL, 0);
			break;
		case 't':
			threads = atoi(optarg);
			break;
		case 'S':
			seed = strtoull(optarg, NULL, 0);
			break;
		case 'c':
			src = optarg;
			break;
		default:
			fputs(usage, c == 'h' ? stdout : stderr);
			return c == 'h' ? 0 : 2;
		}
	}
	if (optind != argc - 1 || j.size == 0 || threads < 1 ||
	    threads > MAX_THREADS) {
		fputs(usage, stderr);
		return 2;
	}
	const char *path = argv[optind];
	j.fd = open(path, O_RDONLY | O_CLOEXEC | (direct ? O_DIRECT : 0));
	if (j.fd < 0 || fstat(j.fd, &st)) {
		fprintf(stderr, "randread: cannot open '%s': %s\n", path,
			strerror(errno));
		return 1;
	}
	if (src && (j.src = open(src, O_RDONLY | O_CLOEXEC)) < 0) {
		fprintf(stderr, "randread: cannot open '%s': %s\n", src,
			strerror(errno));
		return 1;
	}
	uint64_t slots = (uint64_t)st.st_size / j.size;
	if (slots == 0) {
		fprintf(stderr, "randread: '%s' is smaller than one read\n",
			path);
		return 1;
	}
	j.offs = malloc((j.n ? j.n : 1) * sizeof(*j.offs));
	if (!j.offs) {
		fputs("randread: out of memory\n", stderr);
		return 1;
	}
	for (size_t i = 0; i < j.n; i++)
		j.offs[i] = splitmix(&seed) % slots * j.size;

	pthread_t t[MAX_THREADS];
	struct timespec t0, t1;
	unsigned long long io0 = io_read_bytes();
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < threads; i++)
		if (pthread_create(&t[i], NULL, reader, &j)) {
			fputs("randread: cannot start a thread\n", stderr);
			return 1;
		}
	for (int i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double secs = (double)(t1.tv_sec - t0.tv_sec) +
		      (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	printf("reads=%zu bytes=%llu secs=%.3f reads_per_s=%.1f mismatches=%u "
	       "errors=%u io_read_bytes=%llu\n",
	       j.n, (unsigned long long)j.bytes, secs,
	       secs > 0 ? (double)j.n / secs : 0.0, (unsigned)j.mismatches,
	       (unsigned)j.errors, io_read_bytes() - io0);
	free(j.offs);
	close(j.fd);
	if (j.src >= 0)
		close(j.src);
	return j.errors || j.mismatches ? 1 : 0;
}
