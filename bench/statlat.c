/*
 * statlat.c - how long stat of a file and a listing of its directory take
 * while a save writes into it (bench/statlat.sh). Every INTERVAL ms until
 * STOPFILE exists: stat(FILE), then opendir/readdir/closedir of DIR, timed
 * together. Prints one line: n= p50= p99= max= (milliseconds). With
 * STATLAT_TRACE=FILE set, also writes "seconds-since-start latency" of every
 * sample to FILE, to see when the slow ones come.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr,
			"usage: statlat DIR FILE STOPFILE [INTERVAL_MS]\n");
		return 2;
	}
	const char *dir = argv[1], *file = argv[2], *stop = argv[3];
	int interval = argc > 4 ? atoi(argv[4]) : 10;
	size_t n = 0, cap = 1 << 16;
	double *lat = malloc(cap * sizeof(*lat));
	struct stat st;

	if (!lat)
		return 1;
	const char *trace = getenv("STATLAT_TRACE");
	FILE *tf = trace ? fopen(trace, "w") : NULL;
	double start = now_ms();
	while (access(stop, F_OK) != 0) {
		double t0 = now_ms();
		(void)stat(file, &st); /* not there yet before the save */
		DIR *d = opendir(dir);
		if (d) {
			while (readdir(d))
				;
			closedir(d);
		}
		double dt = now_ms() - t0;
		if (n == cap) {
			double *more = realloc(lat, 2 * cap * sizeof(*lat));
			if (!more)
				break;
			lat = more;
			cap *= 2;
		}
		lat[n++] = dt;
		if (tf)
			fprintf(tf, "%.3f %.2f\n", (t0 - start) / 1e3, dt);
		if (dt < interval)
			usleep((useconds_t)((interval - dt) * 1000));
	}
	if (tf)
		fclose(tf);
	if (!n) {
		printf("n=0\n");
		return 1;
	}
	qsort(lat, n, sizeof(*lat), cmp);
	printf("n=%zu p50=%.2f p99=%.2f max=%.2f\n", n, lat[n / 2],
	       lat[(size_t)((double)(n - 1) * 0.99)], lat[n - 1]);
	free(lat);
	return 0;
}
