/*
 * store_raw.c - the raw store's figures, the baseline that a benchmark
 * behind bench/slowproxy prints beside its own (bench/store_raw.sh, the
 * cache-group and epoch-plan benchmarks): N objects of SIZE bytes put, got
 * back in a shuffled order (every byte checked) or deleted by T threads,
 * each with a connection of its own, through libgranary's objstore (the
 * client code granary uses). Objects/s, MiB/s and per-request latency.
 */
#include <errno.h>
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
    "usage: store_raw [-t THREADS] [-n OBJECTS] [-s SIZE] [-S SEED] OPS URL "
    "PREFIX\n"
    "\n"
    "OPS: put, get, copy, delete, or several in turn (put,get,delete).\n"
    "THREADS threads (default 4) take the objects PREFIX/000000 ... in\n"
    "order:\n"
    "  put     OBJECTS objects (default 100) of SIZE bytes (default 128K;\n"
    "          K and M suffixes: KiB, MiB) of random bytes drawn from SEED\n"
    "  get     get them back whole in an order shuffled by SEED, every byte\n"
    "          checked\n"
    "  copy    get each (every byte checked) and put it back as\n"
    "          PREFIX/copy/000000 ..., in order: a copy tool's bound on\n"
    "          one store\n"
    "  delete  delete them (and their copies)\n"
    "Prints a line per op: op= objects= bytes= secs= objects_per_s=\n"
    "mib_per_s= p50_ms= p99_ms= max_ms= errors= (latency: each request,\n"
    "from the call to its return). Exit 1 if any request failed.\n";

#define MAX_THREADS 256
#define MAX_ERRORS  5 /* printed; the rest are only counted */

enum op { OP_PUT, OP_GET, OP_COPY, OP_DELETE };
static const char *const op_names[] = {"put", "get", "copy", "delete"};

struct job {
	struct objstore *store;
	const char *prefix;
	enum op op;
	size_t n, size;
	uint64_t seed;
	int copied;	/* a copy ran: delete the copies too */
	size_t *order;	/* the objects in the order taken */
	double *lat_ms; /* per object */
	atomic_size_t next;
	atomic_ullong bytes;
	atomic_uint errors;
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t mix(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Object i's bytes: a stream of its own from the seed (incompressible). */
static void fill(const struct job *j, size_t i, unsigned char *buf)
{
	uint64_t s = mix(j->seed ^ mix(i + 1)), v;
	size_t k;

	for (k = 0; k + 8 <= j->size; k += 8) {
		v = mix(s += 0x9e3779b97f4a7c15ull);
		memcpy(buf + k, &v, 8);
	}
	v = mix(s += 0x9e3779b97f4a7c15ull);
	memcpy(buf + k, &v, j->size - k);
}

static void job_error(struct job *j, const char *key, const char *why)
{
	if (atomic_fetch_add(&j->errors, 1) < MAX_ERRORS)
		fprintf(stderr, "store_raw: cannot %s '%s': %s\n",
			op_names[j->op], key, why);
}

static void one(struct job *j, size_t i, unsigned char *buf)
{
	char key[1200];
	void *data = NULL;
	size_t got = 0;
	int err = 0;

	snprintf(key, sizeof(key), "%s/%06zu", j->prefix, i);
	if (j->op != OP_DELETE)
		fill(j, i, buf);
	double t0 = now();
	switch (j->op) {
	case OP_PUT:
		err = objstore_put(j->store, key, buf, j->size);
		break;
	case OP_GET:
		err = objstore_get(j->store, key, 0, 0, &data, &got);
		break;
	case OP_COPY:
		err = objstore_get(j->store, key, 0, 0, &data, &got);
		if (!err && (got != j->size || memcmp(data, buf, got)))
			break; /* named below */
		if (!err) {
			snprintf(key, sizeof(key), "%s/copy/%06zu", j->prefix,
				 i);
			err = objstore_put(j->store, key, data, got);
		}
		break;
	case OP_DELETE:
		err = objstore_del(j->store, key);
		if (!err && j->copied) {
			snprintf(key, sizeof(key), "%s/copy/%06zu", j->prefix,
				 i);
			err = objstore_del(j->store, key);
		}
		break;
	}
	j->lat_ms[i] = (now() - t0) * 1e3;
	if (err) {
		job_error(j, key, gr_strerror(err));
	} else if ((j->op == OP_GET || j->op == OP_COPY) &&
		   (got != j->size || memcmp(data, buf, got))) {
		job_error(j, key, "other bytes than were put");
	} else if (j->op != OP_DELETE) {
		atomic_fetch_add(&j->bytes, j->size);
	}
	free(data);
}

static void *worker(void *arg)
{
	struct job *j = arg;
	unsigned char *buf = malloc(j->size + 8);

	if (!buf) {
		job_error(j, "(buffer)", strerror(ENOMEM));
		return NULL;
	}
	for (;;) {
		size_t k = atomic_fetch_add(&j->next, 1);
		if (k >= j->n)
			break;
		one(j, j->order[k], buf);
	}
	free(buf);
	return NULL;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Run one op over all objects; prints its line. */
static int run(struct job *j, long threads)
{
	pthread_t tids[MAX_THREADS];
	int started = 0, err;

	j->next = 0;
	j->bytes = 0;
	j->errors = 0;
	for (size_t i = 0; i < j->n; i++) {
		j->order[i] = i;
		j->lat_ms[i] = 0;
	}
	if (j->op == OP_GET) { /* Fisher-Yates, from the seed */
		uint64_t s = mix(j->seed ^ 0x5eed);
		for (size_t i = j->n; i > 1; i--) {
			size_t k =
			    (size_t)(mix(s += 0x9e3779b97f4a7c15ull) % i);
			size_t t = j->order[i - 1];
			j->order[i - 1] = j->order[k];
			j->order[k] = t;
		}
	}
	double t0 = now();
	for (; started < threads; started++) {
		err = pthread_create(&tids[started], NULL, worker, j);
		if (err) {
			fprintf(stderr,
				"store_raw: cannot start a thread: %s\n",
				strerror(err));
			break; /* the threads running take every object */
		}
	}
	for (int i = 0; i < started; i++)
		pthread_join(tids[i], NULL);
	double secs = now() - t0;

	unsigned errors = atomic_load(&j->errors) + (started == 0);
	unsigned long long bytes = atomic_load(&j->bytes);
	qsort(j->lat_ms, j->n, sizeof(double), cmp_double);
	printf("op=%s objects=%zu bytes=%llu secs=%.3f objects_per_s=%.1f "
	       "mib_per_s=%.1f p50_ms=%.1f p99_ms=%.1f max_ms=%.1f "
	       "errors=%u\n",
	       op_names[j->op], j->n, bytes, secs,
	       secs > 0 ? (double)j->n / secs : 0.0,
	       secs > 0 ? (double)bytes / 1048576.0 / secs : 0.0,
	       j->lat_ms[(j->n - 1) / 2], j->lat_ms[(j->n * 99 + 99) / 100 - 1],
	       j->lat_ms[j->n - 1], errors);
	fflush(stdout);
	return errors ? 1 : 0;
}

static int parse_size(const char *s, size_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return EINVAL;
	if (*end == 'K' || *end == 'k')
		v <<= 10, end++;
	else if (*end == 'M' || *end == 'm')
		v <<= 20, end++;
	if (*end || v < 1 || v > (1ull << 30))
		return EINVAL;
	*out = (size_t)v;
	return 0;
}

int main(int argc, char **argv)
{
	struct job j = {.n = 100, .size = 128 << 10, .seed = 1};
	long threads = 4;
	int c, err, rc = 0;

	while ((c = getopt(argc, argv, "t:n:s:S:h")) != -1) {
		switch (c) {
		case 't':
			threads = atol(optarg);
			break;
		case 'n':
			j.n = (size_t)atol(optarg);
			break;
		case 's':
			if (parse_size(optarg, &j.size)) {
				fputs(usage, stderr);
				return 2;
			}
			break;
		case 'S':
			j.seed = strtoull(optarg, NULL, 10);
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
	    j.n < 1 || j.n > 10000000) {
		fputs(usage, stderr);
		return 2;
	}
	char *ops = argv[optind];
	j.prefix = argv[optind + 2];
	for (char *p = ops; *p; p += strcspn(p, ","), p += *p == ',') {
		size_t l = strcspn(p, ",");
		if (!(l == 3 && !strncmp(p, "put", 3)) &&
		    !(l == 3 && !strncmp(p, "get", 3)) &&
		    !(l == 4 && !strncmp(p, "copy", 4)) &&
		    !(l == 6 && !strncmp(p, "delete", 6))) {
			fprintf(stderr, "store_raw: unknown op '%.*s'\n",
				(int)l, p);
			return 2;
		}
	}
	j.order = malloc(j.n * sizeof(*j.order));
	j.lat_ms = malloc(j.n * sizeof(*j.lat_ms));
	if (!j.order || !j.lat_ms) {
		fprintf(stderr, "store_raw: %s\n", strerror(ENOMEM));
		return 1;
	}
	err = objstore_open(argv[optind + 1], NULL, &j.store);
	if (err) {
		fprintf(stderr, "store_raw: cannot open store '%s': %s\n",
			argv[optind + 1], gr_strerror(err));
		return 1;
	}
	for (char *p = ops; *p; p += strcspn(p, ","), p += *p == ',') {
		j.op = p[0] == 'p'   ? OP_PUT
		       : p[0] == 'g' ? OP_GET
		       : p[0] == 'c' ? OP_COPY
				     : OP_DELETE;
		rc |= run(&j, threads);
		j.copied |= j.op == OP_COPY;
	}
	objstore_close(j.store);
	free(j.order);
	free(j.lat_ms);
	return rc;
}
