/*
 * metrics.h - a mount's figures for its operators: the Prometheus
 * endpoint (/metrics, text format 0.0.4) served by one thread of its own,
 * the same figures with latency buckets for `granary stats` (the
 * "granary.stats" xattr, ctl.c), and the access log (one line per
 * operation, fs_opts.access_log).
 *
 * The counters themselves live with what they count (struct fs's ops,
 * objstore, meta, the caches, the writer pool); this file reads them.
 * The endpoint's thread never takes a lock a FUSE request holds for
 * long: it reads atomics and the modules' *_get_stats snapshots.
 */
#ifndef GRANARY_METRICS_H
#define GRANARY_METRICS_H

#include <stdio.h>

struct fs;
struct metrics;

/*
 * Start what fs->o asks for: the access log (an open failure fails the
 * mount: msg says why) and the endpoint (an address in use is a warning;
 * the mount goes on without it). Sets fs->metrics; publishes the address
 * in the session record. 0 or an errno.
 */
int metrics_open(struct fs *fs, char *msg, size_t cap);
/* Stop the endpoint, write out and close the access log. NULL-safe. */
void metrics_close(struct metrics *m);
/* "HOST:PORT" served, or NULL (off, or nothing bound). */
const char *metrics_address(const struct fs *fs);

/* Every figure in the Prometheus text format. */
void metrics_render(struct fs *fs, FILE *f);
/*
 * The figures stats_text (ctl.c) adds to granary.stats, as members of its
 * top-level object, each preceded by ", ": "fuse" (by op: count, errors,
 * sum_ns, buckets), "store_requests" (by kind: the same and retries,
 * bytes), "redis", "write_buffer", "access_log", "metrics", "group", "plans"
 * (the epoch plans' totals, and each plan in "by_id"). A histogram's
 * buckets are a string of METRIC_BUCKETS + 1 counts, not cumulative.
 */
void metrics_json(struct fs *fs, FILE *f);

#endif
