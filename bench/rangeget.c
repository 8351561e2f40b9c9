/*
 * rangeget.c - the raw-store row of bench/randread.sh: N ranged GETs of
 * SIZE bytes at random aligned offsets of one big object, from T threads,
 * through libgranary's objstore (the same client code granary uses), so
 * the row shows the most a file system on that store could do for small
 * random reads.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fs/store/objstore.h"

static const char usage[] =
    "usage: rangeget [-n READS] [-b SIZE] [-t THREADS] [-S SEED] [-p MIB] "
    "URL KEY\n"
    "GET READS (default 1000) ranges of SIZE bytes (default 4096) at random\n"
    "offsets aligned to SIZE of object KEY in the store at URL, with\n"
    "THREADS threads (default 4).\n"
    "  -p MIB  first put MIB MiB of random bytes as KEY (deleted at the "
    "end)\n"
    "Prints: reads= bytes= secs= reads_per_s= store_gets= store_get_bytes= "
    "errors=\n";

#define MAX_THREADS 256

struct job {
	struct objstore *store;
	const char *key;
	size_t size;
	uint64_t *offs;
	size_t n;
	atomic_size_t next;
	atomic_ullong bytes;
	atomic_uint errors;
};

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void *getter(void *arg)
{
	struct job *j = arg;

	for (;;) {
		size_t i = atomic_fetch_add(&j->next, 1);
		if (i >= j->n)
			break;
		void *data = NULL;
		size_t got = 0;
		int err = objstore_get(j->store, j->key, j->offs[i], j->size,
				       &data, &got);
		if (!err && got != j->size)
			err = EIO;
		if (err) {
			if (atomic_fetch_add(&j->errors, 1) < 5)
				fprintf(stderr,
					"rangeget: cannot get %zu bytes at "
					"%" PRIu64 " of '%s': %s\n",
					j->size, j->offs[i], j->key,
					gr_strerror(err));
		} else {
			atomic_fetch_add(&j->bytes, got);
		}
		free(data);
	}
	return NULL;
}

/* Put mib MiB of random bytes as key. */
static int put_object(struct objstore *s, const char *key, size_t mib)
{
	size_t len = mib << 20;
	uint64_t *buf = malloc(len), seed = 42;
	int err;

	if (!buf)
		return ENOMEM;
	for (size_t i = 0; i < len / 8; i++)
		buf[i] = splitmix(&seed);
	err = objstore_put(s, key, buf, len);
	free(buf);
	return err;
}

int main(int argc, char **argv)
{
	struct job j = {.size = 4096, .n = 1000};
	uint64_t seed = 1, size = 0;
	size_t put_mib = 0;
	int threads = 4, c, err;

	while ((c = getopt(argc, argv, "n:b:t:S:p:h")) != -1) {
		switch (c) {
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
		case 'p':
			put_mib = strtoull(optarg, NULL, 0);
			break;
		default:
			fputs(usage, c == 'h' ? stdout : stderr);
			return c == 'h' ? 0 : 2;
		}
	}
	if (optind != argc - 2 || j.size == 0 || threads < 1 ||
	    threads > MAX_THREADS) {
		fputs(usage, stderr);
		return 2;
	}
	const char *url = argv[optind];
	j.key = argv[optind + 1];
	err = objstore_open(url, NULL, &j.store);
	if (err) {
		fprintf(stderr, "rangeget: cannot open store '%s': %s\n", url,
			gr_strerror(err));
		return 1;
	}
	if (put_mib && (err = put_object(j.store, j.key, put_mib))) {
		fprintf(stderr, "rangeget: cannot put '%s': %s\n", j.key,
			gr_strerror(err));
		goto close_store;
	}
	err = objstore_head(j.store, j.key, &size);
	if (err || size < j.size) {
		fprintf(stderr,
			"rangeget: no object '%s' of at least %zu "
			"bytes: %s\n",
			j.key, j.size, err ? gr_strerror(err) : "too small");
		err = err ? err : EINVAL;
		goto del_object;
	}
	j.offs = malloc((j.n ? j.n : 1) * sizeof(*j.offs));
	if (!j.offs) {
		err = ENOMEM;
		goto del_object;
	}
	for (size_t i = 0; i < j.n; i++)
		j.offs[i] = splitmix(&seed) % (size / j.size) * j.size;

	struct objstore_stats st0, st1;
	pthread_t t[MAX_THREADS];
	struct timespec t0, t1;
	objstore_get_stats(j.store, &st0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < threads; i++)
		if (pthread_create(&t[i], NULL, getter, &j)) {
			fputs("rangeget: cannot start a thread\n", stderr);
			exit(1);
		}
	for (int i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	objstore_get_stats(j.store, &st1);
	double secs = (double)(t1.tv_sec - t0.tv_sec) +
		      (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	printf("reads=%zu bytes=%llu secs=%.3f reads_per_s=%.1f "
	       "store_gets=%llu store_get_bytes=%llu errors=%u\n",
	       j.n, (unsigned long long)j.bytes, secs,
	       secs > 0 ? (double)j.n / secs : 0.0,
	       (unsigned long long)(st1.gets - st0.gets),
	       (unsigned long long)(st1.get_bytes - st0.get_bytes),
	       (unsigned)j.errors);
	err = j.errors ? EIO : 0;
	free(j.offs);
del_object:
	if (put_mib)
		objstore_del(j.store, j.key);
close_store:
	objstore_close(j.store);
	return err ? 1 : 0;
}
