/*
 * test_metric.c - the latency histogram: observations land in the bucket
 * whose bound is the first at or above them (edges included), concurrent
 * observers lose nothing, quantiles interpolate inside a bucket, and the
 * text rendering is cumulative, ends in +Inf equal to _count, and escapes
 * label values.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/metric.h"

Test(metric, bucket_edges)
{
	cr_assert_eq(metric_bucket_of(0), 0);
	cr_assert_eq(metric_bucket_of(100000), 0); /* 100 us: le="0.0001" */
	cr_assert_eq(metric_bucket_of(100001), 1);
	cr_assert_eq(metric_bucket_of(250000), 1);
	cr_assert_eq(metric_bucket_of(1000000), 3); /* 1 ms */
	cr_assert_eq(metric_bucket_of(1000000000), 12); /* 1 s */
	cr_assert_eq(metric_bucket_of(10000000000ull), METRIC_BUCKETS - 1);
	cr_assert_eq(metric_bucket_of(10000000001ull), METRIC_BUCKETS);
	cr_assert_eq(metric_bucket_of(UINT64_MAX), METRIC_BUCKETS);
	for (int i = 1; i < METRIC_BUCKETS; i++) {
		cr_assert_gt(metric_bucket_ns[i], metric_bucket_ns[i - 1]);
		/* the label says the bound */
		cr_assert_eq((uint64_t)(strtod(metric_bucket_le[i], NULL) *
					    1e9 +
					0.5),
			     metric_bucket_ns[i], "bucket %d", i);
	}
}

static struct metric_hist shared;

static void *observer(void *arg)
{
	uint64_t ns = (uintptr_t)arg;
	for (int i = 0; i < 100000; i++)
		metric_hist_observe(&shared, ns);
	return NULL;
}

Test(metric, concurrent_observers)
{
	pthread_t t[4];
	uint64_t ns[4] = {50000, 3000000, 700000000, 20000000000ull};

	for (int i = 0; i < 4; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, observer,
					    (void *)(uintptr_t)ns[i]),
			     0);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	struct metric_hist h;
	metric_hist_read(&shared, &h);
	cr_assert_eq(h.count, 400000);
	cr_assert_eq(h.bucket[0], 100000);
	cr_assert_eq(h.bucket[metric_bucket_of(3000000)], 100000);
	cr_assert_eq(h.bucket[metric_bucket_of(700000000)], 100000);
	cr_assert_eq(h.bucket[METRIC_BUCKETS], 100000);
	cr_assert_eq(h.sum_ns, 100000ull * (50000 + 3000000 + 700000000 +
					    20000000000ull));
}

Test(metric, quantiles)
{
	struct metric_hist h = {0};

	cr_assert_eq(metric_hist_quantile(&h, 0.99), 0);
	/* 100 observations in (1 ms, 2.5 ms]: the median is half-way */
	for (int i = 0; i < 100; i++)
		metric_hist_observe(&h, 2000000);
	double p50 = metric_hist_quantile(&h, 0.5);
	cr_assert_float_eq(p50, 0.00175, 1e-9);
	cr_assert_float_eq(metric_hist_quantile(&h, 1.0), 0.0025, 1e-9);
	/* one slow one in +Inf: p99 stays in the fast bucket, p100 is the
	 * largest finite bound */
	metric_hist_observe(&h, 60000000000ull);
	cr_assert_leq(metric_hist_quantile(&h, 0.99), 0.0025);
	cr_assert_float_eq(metric_hist_quantile(&h, 1.0), 10.0, 1e-9);
}

Test(metric, render)
{
	struct metric_hist h = {0};
	char *text = NULL, esc[64];
	size_t len = 0;

	metric_hist_observe(&h, 50000);	     /* <= 0.0001 */
	metric_hist_observe(&h, 3000000);    /* <= 0.005 */
	metric_hist_observe(&h, 3000000);    /* <= 0.005 */
	metric_hist_observe(&h, 30000000000ull); /* +Inf */
	FILE *f = open_memstream(&text, &len);
	cr_assert_not_null(f);
	metric_family(f, "x_seconds", "histogram", "a test");
	metric_hist_render(f, "x_seconds", metric_label_escape("a\"b\\c\nd", esc,
							       sizeof(esc)),
			   &h);
	fclose(f);
	cr_assert_str_eq(esc, "a\\\"b\\\\c\\nd");
	cr_assert(strstr(text, "# HELP x_seconds a test\n# TYPE x_seconds "
			       "histogram\n"));
	cr_assert(strstr(text, "x_seconds_bucket{a\\\"b\\\\c\\nd,le=\"0.0001\"} 1\n"));
	cr_assert(strstr(text, "le=\"0.0025\"} 1\n"));
	cr_assert(strstr(text, "le=\"0.005\"} 3\n"));
	cr_assert(strstr(text, "le=\"10\"} 3\n"));
	cr_assert(strstr(text, "le=\"+Inf\"} 4\n"));
	cr_assert(strstr(text, "x_seconds_count{a\\\"b\\\\c\\nd} 4\n"));
	cr_assert(strstr(text, "x_seconds_sum{a\\\"b\\\\c\\nd} 30.00605\n"));
	free(text);
}

Test(metric, render_no_labels)
{
	struct metric_hist h = {0};
	char *text = NULL;
	size_t len = 0;

	FILE *f = open_memstream(&text, &len);
	metric_hist_render(f, "y_seconds", "", &h);
	metric_sample(f, "y_total", "", 7);
	fclose(f);
	cr_assert(strstr(text, "y_seconds_bucket{le=\"+Inf\"} 0\n"));
	cr_assert(strstr(text, "y_seconds_count 0\n"));
	cr_assert(strstr(text, "y_total 7\n"));
	free(text);
}
