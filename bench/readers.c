/*
 * readers.c - the timed loop of bench/epoch.sh: T threads take the files of
 * a list in order (shuffled by a seed: one epoch of a data loader) and read
 * each whole, or copy them in (ingest). The same loop drives a directory
 * (local disk or any mount) and, with -s, the object store itself through
 * libgranary's objstore, so every target is measured by the same code.
 * With -m the list is md5sum's output and each file read is checked against
 * its sum as it is read (bench/group.sh: every byte of an epoch checked).
 * With -l it also prints the per-file read latency (open to close), the
 * wait a training step sees (bench/plan.sh).
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

#include <openssl/evp.h>

#include "fs/store/objstore.h"

static const char usage[] =
    "usage: readers [-t THREADS] [-S SEED] [-c SRCDIR] [-s] [-m] [-l] LIST "
    "TARGET\n"
    "\n"
    "Read every file named in LIST (paths relative to TARGET, one a line)\n"
    "whole, with THREADS threads (default 4) taking the files in list\n"
    "order; -S shuffles the list first with SEED.\n"
    "  -c SRCDIR  copy SRCDIR/PATH to TARGET/PATH instead (ingest),\n"
    "             creating directories; the time includes a final syncfs\n"
    "  -s         TARGET is an object store URL (s3+http://..., file://...):\n"
    "             get (or with -c put) the object named PATH\n"
    "  -m         LIST is md5sum's output (\"MD5  PATH\" lines): each file\n"
    "             read is checked against its MD5 as it is read (a\n"
    "             mismatch is an error, counted in bad=)\n"
    "  -l         also print each file's read latency (open to close, ms)\n"
    "             over the files: p50_ms= p99_ms= max_ms=\n"
    "Prints one line: files= bytes= secs= files_per_s= mib_per_s= errors=\n"
    "(and store_gets= store_puts= with -s, bad= with -m, the latencies\n"
    "with -l). Exit 1 if any file failed.\n";

#define MAX_THREADS 256
#define READ_BUF    (1 << 20)
#define MAX_ERRORS  5 /* printed; the rest are only counted */

struct job {
	char **paths;
	unsigned char (*sums)[16]; /* -m: the MD5 of paths[i], else NULL */
	size_t n;
	const char *target, *src;
	struct objstore *store; /* -s only */
	atomic_size_t next;	/* index of the next file to take */
	atomic_ullong bytes;
	atomic_uint errors;
	atomic_uint bad; /* -m: files whose MD5 was not their line's */
	double *lat_ms;	 /* -l: per file, open to close; else NULL */
};

static void job_error(struct job *j, const char *what, const char *path,
		      const char *why)
{
	if (atomic_fetch_add(&j->errors, 1) < MAX_ERRORS)
		fprintf(stderr, "readers: cannot %s '%s': %s\n", what, path,
			why);
}

/* ------------------------------------------------------------------------
 * whole-file helpers
 */

/* Read all of fd into *buf (grown as needed); sets *len. */
static int slurp(int fd, char **buf, size_t *cap, size_t *len)
{
	*len = 0;
	for (;;) {
		if (*len == *cap) {
			size_t ncap = *cap ? *cap * 2 : READ_BUF;
			char *nb = realloc(*buf, ncap);
			if (!nb)
				return ENOMEM;
			*buf = nb;
			*cap = ncap;
		}
		ssize_t n = read(fd, *buf + *len, *cap - *len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno;
		}
		if (n == 0)
			return 0;
		*len += (size_t)n;
	}
}

static int write_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = write(fd, buf, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno;
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* mkdir -p of the directories above path (path itself excluded). */
static int make_parents(char *path)
{
	for (char *p = strchr(path + 1, '/'); p; p = strchr(p + 1, '/')) {
		*p = '\0';
		int rc = mkdir(path, 0755);
		int err = errno;
		*p = '/';
		if (rc && err != EEXIST)
			return err;
	}
	return 0;
}

static int read_src(struct job *j, const char *rel, char *path, size_t psz,
		    char **buf, size_t *cap, size_t *len)
{
	snprintf(path, psz, "%s/%s", j->src, rel);
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return errno;
	int err = slurp(fd, buf, cap, len);
	close(fd);
	return err;
}

/* ------------------------------------------------------------------------
 * one file, per mode
 */

static void do_read(struct job *j, size_t i, char *path, size_t psz, char *buf,
		    EVP_MD_CTX *md)
{
	struct stat st;
	unsigned long long got = 0;
	unsigned char sum[EVP_MAX_MD_SIZE];

	snprintf(path, psz, "%s/%s", j->target, j->paths[i]);
	int fd = open(path, O_RDONLY);
	if (fd < 0 || fstat(fd, &st)) {
		job_error(j, "open", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return;
	}
	if (md && !EVP_DigestInit_ex(md, EVP_md5(), NULL)) {
		job_error(j, "check", path, "cannot start an MD5");
		close(fd);
		return;
	}
	for (;;) {
		ssize_t n = read(fd, buf, READ_BUF);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			job_error(j, "read", path, strerror(errno));
			close(fd);
			return;
		}
		if (n == 0)
			break;
		if (md)
			EVP_DigestUpdate(md, buf, (size_t)n);
		got += (unsigned long long)n;
	}
	close(fd);
	if (got != (unsigned long long)st.st_size)
		job_error(j, "read", path, "short read");
	if (md && (!EVP_DigestFinal_ex(md, sum, NULL) ||
		   memcmp(sum, j->sums[i], 16))) {
		atomic_fetch_add(&j->bad, 1);
		job_error(j, "check", path, "wrong bytes (MD5)");
	}
	atomic_fetch_add(&j->bytes, got);
}

static void do_copy(struct job *j, const char *rel, char *path, size_t psz,
		    char **buf, size_t *cap)
{
	size_t len;
	int err = read_src(j, rel, path, psz, buf, cap, &len);

	if (err) {
		job_error(j, "read", path, strerror(err));
		return;
	}
	snprintf(path, psz, "%s/%s", j->target, rel);
	/* directories are made on the first miss only, as cp -r would */
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 && errno == ENOENT) {
		err = make_parents(path);
		if (err) {
			job_error(j, "create parents of", path, strerror(err));
			return;
		}
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	}
	if (fd < 0) {
		job_error(j, "create", path, strerror(errno));
		return;
	}
	err = write_all(fd, *buf, len);
	/* close() reports what a durable-on-close file system failed to store
	 */
	if (close(fd) && !err)
		err = errno;
	if (err) {
		job_error(j, "write", path, strerror(err));
		return;
	}
	atomic_fetch_add(&j->bytes, len);
}

static void do_store(struct job *j, const char *rel, char *path, size_t psz,
		     char **buf, size_t *cap)
{
	size_t len;
	int err;

	if (j->src) {
		err = read_src(j, rel, path, psz, buf, cap, &len);
		if (err) {
			job_error(j, "read", path, strerror(err));
			return;
		}
		err = objstore_put(j->store, rel, *buf, len);
		if (err) {
			job_error(j, "put", rel, gr_strerror(err));
			return;
		}
	} else {
		void *data = NULL;
		err = objstore_get(j->store, rel, 0, 0, &data, &len);
		free(data);
		if (err) {
			job_error(j, "get", rel, gr_strerror(err));
			return;
		}
	}
	atomic_fetch_add(&j->bytes, len);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static void *worker(void *arg)
{
	struct job *j = arg;
	char path[8192];
	size_t cap = READ_BUF;
	char *buf = malloc(cap);
	EVP_MD_CTX *md = j->sums ? EVP_MD_CTX_new() : NULL;

	if (!buf || (j->sums && !md)) {
		job_error(j, "allocate", "buffer", strerror(ENOMEM));
		free(buf);
		EVP_MD_CTX_free(md);
		return NULL;
	}
	for (;;) {
		size_t i = atomic_fetch_add(&j->next, 1);
		if (i >= j->n)
			break;
		double t0 = j->lat_ms ? now() : 0;
		if (j->store)
			do_store(j, j->paths[i], path, sizeof(path), &buf,
				 &cap);
		else if (j->src)
			do_copy(j, j->paths[i], path, sizeof(path), &buf, &cap);
		else
			do_read(j, i, path, sizeof(path), buf, md);
		if (j->lat_ms)
			j->lat_ms[i] = (now() - t0) * 1000;
	}
	free(buf);
	EVP_MD_CTX_free(md);
	return NULL;
}

/* ------------------------------------------------------------------------
 * list, shuffle, main
 */

static int load_list(const char *file, char ***out, size_t *n)
{
	FILE *f = fopen(file, "r");
	char *line = NULL, **v = NULL;
	size_t lcap = 0, cnt = 0, vcap = 0;
	ssize_t len;

	if (!f)
		return errno;
	while ((len = getline(&line, &lcap, f)) > 0) {
		while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			line[--len] = '\0';
		if (!len)
			continue;
		if (cnt == vcap) {
			vcap = vcap ? vcap * 2 : 1024;
			char **nv = realloc(v, vcap * sizeof(*v));
			if (!nv)
				goto fail_nomem;
			v = nv;
		}
		if (!(v[cnt] = strdup(line)))
			goto fail_nomem;
		cnt++;
	}
	free(line);
	fclose(f);
	*out = v;
	*n = cnt;
	return 0;

fail_nomem:
	while (cnt)
		free(v[--cnt]);
	free(v);
	free(line);
	fclose(f);
	return ENOMEM;
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* -m: each line "MD5  PATH" (md5sum's; "MD5 *PATH" too) becomes PATH, its
 * sum in sums[i]. EINVAL on a line that is not one. */
static int split_sums(char **v, size_t n, unsigned char (**sums)[16])
{
	unsigned char(*s)[16] = calloc(n ? n : 1, sizeof(*s));

	if (!s)
		return ENOMEM;
	for (size_t i = 0; i < n; i++) {
		char *l = v[i];
		if (strlen(l) < 35 || l[32] != ' ' ||
		    (l[33] != ' ' && l[33] != '*'))
			goto bad;
		for (int k = 0; k < 16; k++) {
			int hi = hexval(l[2 * k]), lo = hexval(l[2 * k + 1]);
			if (hi < 0 || lo < 0)
				goto bad;
			s[i][k] = (unsigned char)(hi << 4 | lo);
		}
		memmove(l, l + 34, strlen(l + 34) + 1);
	}
	*sums = s;
	return 0;
bad:
	fprintf(stderr, "readers: not a line of md5sum: '%s'\n", v[0]);
	free(s);
	return EINVAL;
}

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static void shuffle(char **v, size_t n, uint64_t seed)
{
	for (size_t i = n; i > 1; i--) {
		size_t k = splitmix(&seed) % i;
		char *t = v[i - 1];
		v[i - 1] = v[k];
		v[k] = t;
	}
}

int main(int argc, char **argv)
{
	struct job j = {0};
	pthread_t tids[MAX_THREADS];
	long threads = 4;
	int c, use_store = 0, shuffled = 0, check = 0, lat = 0, err,
	       started = 0;
	uint64_t seed = 0;

	while ((c = getopt(argc, argv, "t:S:c:smlh")) != -1) {
		switch (c) {
		case 't':
			threads = atol(optarg);
			break;
		case 'S':
			seed = strtoull(optarg, NULL, 0);
			shuffled = 1;
			break;
		case 'c':
			j.src = optarg;
			break;
		case 's':
			use_store = 1;
			break;
		case 'm':
			check = 1;
			break;
		case 'l':
			lat = 1;
			break;
		case 'h':
			fputs(usage, stdout);
			return 0;
		default:
			fputs(usage, stderr);
			return 2;
		}
	}
	if (argc - optind != 2 || threads < 1 || threads > MAX_THREADS) {
		fputs(usage, stderr);
		return 2;
	}
	j.target = argv[optind + 1];
	err = load_list(argv[optind], &j.paths, &j.n);
	if (err) {
		fprintf(stderr, "readers: cannot read list '%s': %s\n",
			argv[optind], strerror(err));
		return 1;
	}
	/* the lines are shuffled whole: a path keeps its sum */
	if (shuffled)
		shuffle(j.paths, j.n, seed);
	if (check && (use_store || j.src)) {
		fputs("readers: -m checks reads of a directory only\n", stderr);
		return 2;
	}
	if (check && split_sums(j.paths, j.n, &j.sums))
		return 1;
	if (lat && !(j.lat_ms = calloc(j.n ? j.n : 1, sizeof(double)))) {
		fputs("readers: out of memory\n", stderr);
		return 1;
	}
	if (use_store) {
		err = objstore_open(j.target, NULL, &j.store);
		if (err) {
			fprintf(stderr, "readers: cannot open store '%s': %s\n",
				j.target, gr_strerror(err));
			return 1;
		}
	}

	double t0 = now();
	for (; started < threads; started++) {
		err = pthread_create(&tids[started], NULL, worker, &j);
		if (err) {
			fprintf(stderr, "readers: cannot start thread: %s\n",
				strerror(err));
			/* the threads already running finish the list */
			break;
		}
	}
	for (int i = 0; i < started; i++)
		pthread_join(tids[i], NULL);
	if (j.src && !use_store) {
		/* what the copy left in a page cache is part of the ingest */
		int dfd = open(j.target, O_RDONLY | O_DIRECTORY);
		if (dfd < 0 || syncfs(dfd))
			job_error(&j, "sync", j.target, strerror(errno));
		if (dfd >= 0)
			close(dfd);
	}
	double secs = now() - t0;

	unsigned long long bytes = atomic_load(&j.bytes);
	printf("files=%zu bytes=%llu secs=%.3f files_per_s=%.1f "
	       "mib_per_s=%.1f errors=%u",
	       j.n, bytes, secs, secs > 0 ? j.n / secs : 0.0,
	       secs > 0 ? bytes / 1048576.0 / secs : 0.0,
	       atomic_load(&j.errors));
	if (j.store) {
		struct objstore_stats st;
		objstore_get_stats(j.store, &st);
		printf(" store_gets=%llu store_puts=%llu",
		       (unsigned long long)st.gets,
		       (unsigned long long)st.puts);
	}
	if (j.sums)
		printf(" bad=%u", atomic_load(&j.bad));
	if (j.lat_ms && j.n) {
		qsort(j.lat_ms, j.n, sizeof(double), cmp_double);
		printf(" p50_ms=%.1f p99_ms=%.1f max_ms=%.1f",
		       j.lat_ms[(j.n - 1) / 2],
		       j.lat_ms[(j.n * 99 + 99) / 100 - 1], j.lat_ms[j.n - 1]);
	}
	printf("\n");
	objstore_close(j.store);
	free(j.sums);
	free(j.lat_ms);
	for (size_t i = 0; i < j.n; i++)
		free(j.paths[i]);
	free(j.paths);
	return atomic_load(&j.errors) || !started ? 1 : 0;
}
