/*
 * metric.h - counters and latency histograms cheap enough for every FUSE
 * operation, object store request and Redis round trip: fixed buckets,
 * relaxed atomics, no locks. Readers take a snapshot (each field read
 * atomically, not the whole at one instant: a scrape may see a count one
 * ahead of its buckets, which Prometheus tolerates).
 *
 * Buckets are upper bounds in seconds, from 100 us to 10 s by steps of
 * about 2.5x (Prometheus's default buckets, with the sub-millisecond ones
 * a cache hit needs), then +Inf. A histogram's figures are cumulative
 * only when rendered (metric_hist_render); in memory each bucket counts
 * its own observations, so an observation is one increment.
 * Time observations with fsutil_mono_ns() (lib/fsutil.h).
 */
#ifndef GRANARY_METRIC_H
#define GRANARY_METRIC_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define METRIC_BUCKETS 16 /* finite upper bounds; +Inf is one more */

/* The finite upper bounds, in nanoseconds and as Prometheus labels. */
extern const uint64_t metric_bucket_ns[METRIC_BUCKETS];
extern const char *const metric_bucket_le[METRIC_BUCKETS];

struct metric_hist {
	uint64_t bucket[METRIC_BUCKETS + 1]; /* not cumulative; last: +Inf */
	uint64_t count;
	uint64_t sum_ns;
};

/* The bucket an observation of ns falls in (0 .. METRIC_BUCKETS). */
int metric_bucket_of(uint64_t ns);
/* Count one observation of ns nanoseconds. Thread-safe, lock-free. */
void metric_hist_observe(struct metric_hist *h, uint64_t ns);
/* A copy of h, field by field atomically. */
void metric_hist_read(const struct metric_hist *h, struct metric_hist *out);
/* to += from, for sums over kinds. */
void metric_hist_add(struct metric_hist *to, const struct metric_hist *from);
/*
 * The q-quantile (0 < q <= 1) of the observations in h, in seconds,
 * interpolated linearly inside its bucket as Prometheus's
 * histogram_quantile() does; 0 when h is empty; the largest finite bound
 * when it falls in +Inf.
 */
double metric_hist_quantile(const struct metric_hist *h, double q);

/* A counter: an atomic add, relaxed. */
static inline void metric_add(uint64_t *c, uint64_t n)
{
	__atomic_add_fetch(c, n, __ATOMIC_RELAXED);
}
static inline uint64_t metric_get(const uint64_t *c)
{
	return __atomic_load_n(c, __ATOMIC_RELAXED);
}

/*
 * Rendering, Prometheus text format 0.0.4. The HELP and TYPE lines of a
 * family once (metric_family), then its samples; labels is the inside of
 * the braces ("volume=\"v\",op=\"read\"") or "". Write errors are the
 * FILE's (check ferror once at the end).
 */
void metric_family(FILE *f, const char *name, const char *type,
		   const char *help);
void metric_sample(FILE *f, const char *name, const char *labels,
		   uint64_t v);
void metric_sample_double(FILE *f, const char *name, const char *labels,
			  double v);
/* name_bucket{labels,le=...} cumulative, name_sum (seconds), name_count */
void metric_hist_render(FILE *f, const char *name, const char *labels,
			const struct metric_hist *h);
/* A label value escaped for the text format (\\, \" and \n) into buf;
 * cut to cap - 1 bytes. Returns buf. */
char *metric_label_escape(const char *v, char *buf, size_t cap);

#endif
