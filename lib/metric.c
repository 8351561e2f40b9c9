/*
 * metric.c - fixed-bucket latency histograms and their rendering in the
 * Prometheus text format (metric.h).
 */
#include "lib/metric.h"

#include <string.h>

const uint64_t metric_bucket_ns[METRIC_BUCKETS] = {
    100000ull,	   250000ull,	  500000ull,	  1000000ull,
    2500000ull,	   5000000ull,	  10000000ull,	  25000000ull,
    50000000ull,   100000000ull,  250000000ull,	  500000000ull,
    1000000000ull, 2500000000ull, 5000000000ull,  10000000000ull,
};

const char *const metric_bucket_le[METRIC_BUCKETS] = {
    "0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005",
    "0.01",   "0.025",   "0.05",   "0.1",   "0.25",   "0.5",
    "1",      "2.5",     "5",      "10",
};

/* Sixteen bounds: a binary search is four compares, as cheap as the
 * first few of a linear scan and steady for slow requests. */
int metric_bucket_of(uint64_t ns)
{
	int lo = 0, hi = METRIC_BUCKETS; /* the answer is in [lo, hi] */

	while (lo < hi) {
		int mid = (lo + hi) / 2;
		if (ns <= metric_bucket_ns[mid])
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

void metric_hist_observe(struct metric_hist *h, uint64_t ns)
{
	metric_add(&h->bucket[metric_bucket_of(ns)], 1);
	metric_add(&h->sum_ns, ns);
	metric_add(&h->count, 1);
}

void metric_hist_read(const struct metric_hist *h, struct metric_hist *out)
{
	for (int i = 0; i <= METRIC_BUCKETS; i++)
		out->bucket[i] = metric_get(&h->bucket[i]);
	out->sum_ns = metric_get(&h->sum_ns);
	out->count = metric_get(&h->count);
}

void metric_hist_add(struct metric_hist *to, const struct metric_hist *from)
{
	for (int i = 0; i <= METRIC_BUCKETS; i++)
		to->bucket[i] += from->bucket[i];
	to->sum_ns += from->sum_ns;
	to->count += from->count;
}

double metric_hist_quantile(const struct metric_hist *h, double q)
{
	uint64_t total = 0, seen = 0;

	for (int i = 0; i <= METRIC_BUCKETS; i++)
		total += h->bucket[i];
	if (!total)
		return 0;
	double rank = q * (double)total;
	for (int i = 0; i < METRIC_BUCKETS; i++) {
		if (h->bucket[i] && (double)(seen + h->bucket[i]) >= rank) {
			double lo = i ? (double)metric_bucket_ns[i - 1] : 0;
			double hi = (double)metric_bucket_ns[i];
			double frac = (rank - (double)seen) / (double)h->bucket[i];
			return (lo + (hi - lo) * frac) / 1e9;
		}
		seen += h->bucket[i];
	}
	return (double)metric_bucket_ns[METRIC_BUCKETS - 1] / 1e9;
}

/* ---- the text format ---- */

void metric_family(FILE *f, const char *name, const char *type,
		   const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* name, or name{labels} */
static void series(FILE *f, const char *name, const char *suffix,
		   const char *labels)
{
	fprintf(f, *labels ? "%s%s{%s} " : "%s%s%s ", name, suffix, labels);
}

void metric_sample(FILE *f, const char *name, const char *labels, uint64_t v)
{
	series(f, name, "", labels);
	fprintf(f, "%llu\n", (unsigned long long)v);
}

void metric_sample_double(FILE *f, const char *name, const char *labels,
			  double v)
{
	series(f, name, "", labels);
	fprintf(f, "%.9g\n", v);
}

void metric_hist_render(FILE *f, const char *name, const char *labels,
			const struct metric_hist *h)
{
	const char *sep = *labels ? "," : "";
	uint64_t cum = 0;

	for (int i = 0; i < METRIC_BUCKETS; i++) {
		cum += h->bucket[i];
		fprintf(f, "%s_bucket{%s%sle=\"%s\"} %llu\n", name, labels, sep,
			metric_bucket_le[i], (unsigned long long)cum);
	}
	cum += h->bucket[METRIC_BUCKETS];
	/* the count is read apart from the buckets: +Inf is their sum, so
	 * that the buckets stay monotone and +Inf equals _count */
	fprintf(f, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, sep,
		(unsigned long long)cum);
	series(f, name, "_sum", labels);
	fprintf(f, "%.9g\n", (double)h->sum_ns / 1e9);
	series(f, name, "_count", labels);
	fprintf(f, "%llu\n", (unsigned long long)cum);
}

char *metric_label_escape(const char *v, char *buf, size_t cap)
{
	size_t o = 0;

	for (; *v && o + 2 < cap; v++) {
		if (*v == '\\' || *v == '"') {
			buf[o++] = '\\';
			buf[o++] = *v;
		} else if (*v == '\n') {
			buf[o++] = '\\';
			buf[o++] = 'n';
		} else {
			buf[o++] = *v;
		}
	}
	if (cap)
		buf[o < cap ? o : cap - 1] = '\0';
	return buf;
}
