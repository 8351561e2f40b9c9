/*
 * metric_cost.c - what the always-on counters cost per event, without the
 * noise of a whole workload: a clock read pair plus one histogram
 * observation (every FUSE request, store request and Redis round trip
 * pays it), alone and with threads observing one histogram at once, and
 * an access log line handed to a linelog (format and copy). Prints ns per
 * event; compare with a FUSE request's tens of microseconds.
 *
 *   metric_cost [EVENTS]   (default 10000000)
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/fsutil.h"
#include "lib/linelog.h"
#include "lib/metric.h"

static struct metric_hist shared;
static long events;

static void *observe(void *arg)
{
	(void)arg;
	for (long i = 0; i < events; i++) {
		int64_t t0 = fsutil_mono_ns();
		metric_hist_observe(&shared, (uint64_t)(fsutil_mono_ns() - t0));
	}
	return NULL;
}

static double run_threads(int n)
{
	pthread_t t[8];
	int64_t t0 = fsutil_mono_ns();

	for (int i = 0; i < n; i++)
		pthread_create(&t[i], NULL, observe, NULL);
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	return (double)(fsutil_mono_ns() - t0) / (double)events;
}

int main(int argc, char **argv)
{
	events = argc > 1 ? atol(argv[1]) : 10000000;
	if (events <= 0) {
		fprintf(stderr, "usage: metric_cost [EVENTS]\n");
		return 2;
	}
	printf("clock pair + observe, 1 thread:  %6.1f ns/event\n",
	       run_threads(1));
	printf("clock pair + observe, 2 threads: %6.1f ns/event (per thread)\n",
	       run_threads(2));

	struct linelog *l;
	if (linelog_open("/dev/null", 0, &l)) {
		perror("linelog_open /dev/null");
		return 1;
	}
	char line[256];
	long n = events / 10;
	int64_t t0 = fsutil_mono_ns();
	for (long i = 0; i < n; i++) {
		struct timespec ts;
		struct tm tm;
		clock_gettime(CLOCK_REALTIME, &ts);
		gmtime_r(&ts.tv_sec, &tm);
		int len = snprintf(line, sizeof(line),
				   "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ lookup "
				   "ino=%ld name=\"file-%ld\" result=0 us=%d\n",
				   tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
				   tm.tm_hour, tm.tm_min, tm.tm_sec,
				   ts.tv_nsec / 1000, i, i, 42);
		linelog_put(l, line, (size_t)len);
	}
	double per = (double)(fsutil_mono_ns() - t0) / (double)n;
	uint64_t lines, dropped;
	linelog_counts(l, &lines, &dropped);
	linelog_close(l);
	printf("access log line (format + put): %6.1f ns/line (%llu written, "
	       "%llu dropped, the buffer full)\n",
	       per, (unsigned long long)lines, (unsigned long long)dropped);
	return 0;
}
