/*
 * gen_dataset.c - write an image-like training dataset for bench/epoch.sh:
 * N files of incompressible bytes in class directories, sizes lognormal
 * around a mean and clipped, plus the list of their relative paths. The
 * same seed gives the same names, sizes and bytes.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char usage[] =
    "usage: gen_dataset [-n FILES] [-d DIRS] [-m MEAN_KIB] [-s SEED] DIR "
    "LIST\n"
    "\n"
    "Write FILES (default 10000) files of random bytes under DIR, spread\n"
    "over DIRS (default 100) class directories (DIR/c000/img_0000000.jpg),\n"
    "sizes lognormal (sigma 0.6) with mean MEAN_KIB (default 128), clipped\n"
    "to [MEAN/8, MEAN*8]; write their paths relative to DIR to LIST, one a\n"
    "line. Prints one line: files=N bytes=B mean_kib=M min=X max=Y.\n";

/* splitmix64: fast, and its output does not compress (lz4 stores it raw). */
static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static double rng_unit(uint64_t *s) /* (0, 1] */
{
	return ((rng_next(s) >> 11) + 1) * (1.0 / 9007199254740992.0);
}

static size_t pick_size(uint64_t *s, double mean)
{
	const double sigma = 0.6;
	/* Box-Muller; mu chosen so that the unclipped mean is `mean' */
	double z = sqrt(-2.0 * log(rng_unit(s))) * cos(2 * M_PI * rng_unit(s));
	double v = exp(log(mean) - sigma * sigma / 2 + sigma * z);

	if (v < mean / 8)
		v = mean / 8;
	if (v > mean * 8)
		v = mean * 8;
	return (size_t)v;
}

static int write_file(const char *path, const unsigned char *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	size_t done = 0;

	if (fd < 0)
		return errno;
	while (done < len) {
		ssize_t n = write(fd, buf + done, len - done);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			int err = errno;
			close(fd);
			return err;
		}
		done += (size_t)n;
	}
	return close(fd) ? errno : 0;
}

int main(int argc, char **argv)
{
	long files = 10000, dirs = 100, mean_kib = 128;
	uint64_t seed = 1, rng;
	unsigned long long total = 0;
	size_t min = SIZE_MAX, max = 0, cap;
	unsigned char *buf;
	char path[4096];
	FILE *list;
	int c, err;

	while ((c = getopt(argc, argv, "n:d:m:s:h")) != -1) {
		switch (c) {
		case 'n':
			files = atol(optarg);
			break;
		case 'd':
			dirs = atol(optarg);
			break;
		case 'm':
			mean_kib = atol(optarg);
			break;
		case 's':
			seed = strtoull(optarg, NULL, 0);
			break;
		case 'h':
			fputs(usage, stdout);
			return 0;
		default:
			fputs(usage, stderr);
			return 2;
		}
	}
	if (argc - optind != 2 || files < 1 || dirs < 1 || mean_kib < 1) {
		fputs(usage, stderr);
		return 2;
	}
	const char *root = argv[optind], *listpath = argv[optind + 1];
	double mean = mean_kib * 1024.0;

	cap = (size_t)(mean * 8) + 8;
	buf = malloc(cap);
	if (!buf) {
		fprintf(stderr, "gen_dataset: out of memory\n");
		return 1;
	}
	list = fopen(listpath, "w");
	if (!list) {
		fprintf(stderr, "gen_dataset: cannot create '%s': %s\n",
			listpath, strerror(errno));
		goto out_buf;
	}
	if (mkdir(root, 0755) && errno != EEXIST)
		goto fail_path_root;
	for (long d = 0; d < dirs; d++) {
		snprintf(path, sizeof(path), "%s/c%03ld", root, d);
		if (mkdir(path, 0755) && errno != EEXIST) {
			err = errno;
			goto fail_path;
		}
	}
	rng = seed;
	for (long i = 0; i < files; i++) {
		size_t len = pick_size(&rng, mean);

		/* whole words of random bytes; the tail of the last is unused
		 */
		for (size_t off = 0; off < len; off += 8) {
			uint64_t w = rng_next(&rng);
			memcpy(buf + off, &w, 8);
		}
		snprintf(path, sizeof(path), "%s/c%03ld/img_%07ld.jpg", root,
			 i % dirs, i);
		err = write_file(path, buf, len);
		if (err)
			goto fail_path;
		fprintf(list, "c%03ld/img_%07ld.jpg\n", i % dirs, i);
		total += len;
		if (len < min)
			min = len;
		if (len > max)
			max = len;
	}
	if (fclose(list)) {
		list = NULL;
		fprintf(stderr, "gen_dataset: cannot write '%s': %s\n",
			listpath, strerror(errno));
		goto out_buf;
	}
	printf("files=%ld bytes=%llu mean_kib=%.1f min=%zu max=%zu\n", files,
	       total, total / 1024.0 / files, min, max);
	free(buf);
	return 0;

fail_path_root:
	err = errno;
	snprintf(path, sizeof(path), "%s", root);
fail_path:
	fprintf(stderr, "gen_dataset: cannot write '%s': %s\n", path,
		strerror(err));
	fclose(list);
out_buf:
	free(buf);
	return 1;
}
