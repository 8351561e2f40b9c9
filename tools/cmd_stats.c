/*
 * cmd_stats.c - `granary stats MOUNTPOINT`: the counters of the client
 * serving a mount (GETs and PUTs that reached the store, memory and disk
 * cache hits, latencies), read from its virtual xattr "granary.stats";
 * with --watch, a live one-screen view of their per-second changes,
 * redrawn with plain ANSI escapes (works over ssh, no curses).
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "lib/metric.h"
#include "tools/cli.h"

static const char usage[] =
    "usage: granary stats MOUNTPOINT [--json]\n"
    "       granary stats MOUNTPOINT --watch [--interval S]\n"
    "\n"
    "Show the counters of the client serving MOUNTPOINT: requests that\n"
    "reached the object store, memory and disk cache hits and misses,\n"
    "FUSE operations, Redis round trips and their latencies.\n"
    "\n"
    "  --json          print them as one JSON object\n"
    "  -w, --watch     a live view, redrawn every interval: operations/s\n"
    "                  by kind, throughput, p50/p99 latencies, cache hit\n"
    "                  ratios, store requests and retries, write buffer,\n"
    "                  the cache group's reads and service, the epoch\n"
    "                  plans (granary plan); Ctrl-C quits\n"
    "  --interval S    seconds between redraws (default 1; 0.2 to 60)\n"
    "  -h, --help      show this help\n";

static const struct option options[] = {
    {"json", no_argument, NULL, 'j'},
    {"watch", no_argument, NULL, 'w'},
    {"interval", required_argument, NULL, 'i'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* The counters of the client serving mp (malloc'd, NUL-ended), or NULL
 * with the error printed. */
static char *read_stats(const char *mp)
{
	for (int tries = 0; tries < 5; tries++) {
		ssize_t n = getxattr(mp, "granary.stats", NULL, 0);
		char *buf = n >= 0 ? malloc((size_t)n + 4097) : NULL;
		if (n >= 0 && !buf) {
			cli_error("out of memory");
			return NULL;
		}
		if (n >= 0)
			n = getxattr(mp, "granary.stats", buf, (size_t)n + 4096);
		if (n >= 0) {
			/* the padding at the end (ctl.c) */
			while (n > 0 && buf[n - 1] == ' ')
				n--;
			buf[n] = '\0';
			return buf;
		}
		int err = errno;
		free(buf);
		if (err == ERANGE)
			continue; /* grew between the two calls */
		if (err == ENOTSUP || err == ENODATA)
			cli_error("'%s' is not a granary mount", mp);
		else if (err == EACCES) {
			cli_error("cannot read the counters of '%s': %s", mp,
				  strerror(err));
			cli_hint("they answer to whoever may read '%s' (the "
				 "mount point, usually)",
				 mp);
		} else
			cli_error("cannot read the counters of '%s': %s", mp,
				  strerror(err));
		return NULL;
	}
	cli_error("cannot read the counters of '%s': they keep growing", mp);
	return NULL;
}

/* ---- the plain listing ---------------------------------------------- */

/* The JSON is objects of numbers and strings, nested: print "group key
 * value" lines, the group the innermost object's name, with its parent's
 * in front ("fuse.read"); histogram buckets are left to --json. */
static void print_plain(const char *json)
{
	char group[4][64] = {""}, key[64];
	int depth = 0;

	for (const char *p = json; *p; p++) {
		if (*p == '}') {
			depth = depth > 0 ? depth - 1 : 0;
			continue;
		}
		if (*p != '"')
			continue;
		const char *end = strchr(p + 1, '"');
		if (!end)
			return;
		snprintf(key, sizeof(key), "%.*s", (int)(end - p - 1), p + 1);
		p = end + 1;
		while (*p == ':' || *p == ' ')
			p++;
		if (*p == '{') {
			if (depth < 4)
				snprintf(group[depth], sizeof(group[0]), "%s",
					 key);
			depth++;
			continue;
		}
		int n = *p == '"' ? (int)(strchr(p + 1, '"') - p) + 1
				  : (int)strcspn(p, ",}");
		if (strcmp(key, "buckets")) {
			char g[140];
			snprintf(g, sizeof(g), "%s%s%s",
				 depth > 1 ? group[depth - 2] : "",
				 depth > 1 ? "." : "",
				 depth ? group[depth - 1] : "");
			printf("%-12s %-12s %.*s\n", g, key, n, p);
		}
		p += n - 1;
	}
}

/* ---- finding figures in the JSON ------------------------------------ */

/* The end of the object that starts at p ('{'): its '}'. */
static const char *obj_end(const char *p)
{
	int depth = 0, in_str = 0;

	for (; *p; p++) {
		if (*p == '"')
			in_str = !in_str;
		else if (!in_str && *p == '{')
			depth++;
		else if (!in_str && *p == '}' && --depth == 0)
			return p;
	}
	return p;
}

/* The value of member key of the object [p, end), or NULL. */
static const char *member(const char *p, const char *end, const char *key)
{
	char pat[80];
	size_t n = (size_t)snprintf(pat, sizeof(pat), "\"%s\": ", key);

	/* only the object's own members: skip nested objects */
	for (p++; p && p < end; p++) {
		if (*p == '{') {
			p = obj_end(p);
			continue;
		}
		if (*p == '"' && !strncmp(p, pat, n))
			return p + n;
		if (*p == '"') {
			p = strchr(p + 1, '"');
			if (!p)
				return NULL;
		}
	}
	return NULL;
}

/* The figures of one histogram-bearing group. */
struct fig {
	uint64_t count, errors, retries, bytes;
	struct metric_hist lat;
};

/* group (a top-level member) or group.sub into *f; 0 if absent */
static int fig_of(const char *json, const char *group, const char *sub,
		  struct fig *f)
{
	const char *end = obj_end(json);
	const char *o = member(json, end, group);

	memset(f, 0, sizeof(*f));
	if (o && sub && *o == '{')
		o = member(o, obj_end(o), sub);
	if (!o || *o != '{')
		return 0;
	const char *oe = obj_end(o), *v;
	if ((v = member(o, oe, "count")))
		f->count = strtoull(v, NULL, 10);
	if ((v = member(o, oe, "errors")))
		f->errors = strtoull(v, NULL, 10);
	if ((v = member(o, oe, "retries")))
		f->retries = strtoull(v, NULL, 10);
	if ((v = member(o, oe, "bytes")))
		f->bytes = strtoull(v, NULL, 10);
	if ((v = member(o, oe, "hits")))
		f->count = strtoull(v, NULL, 10);
	if ((v = member(o, oe, "misses")))
		f->errors = strtoull(v, NULL, 10);
	if ((v = member(o, oe, "buckets")) && *v == '"') {
		char *e;
		v++;
		for (int i = 0; i <= METRIC_BUCKETS; i++, v = e)
			f->lat.bucket[i] = strtoull(v, &e, 10);
	}
	return 1;
}

/* ---- --watch --------------------------------------------------------- */

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static const char *const op_rows[] = {
    "read",    "write",   "lookup",  "getattr", "open",     "release",
    "create",  "flush",   "readdirplus", "readdir", "unlink", "mkdir",
    "rename",  "setattr", "fsync",   "statfs",  "getxattr",
};
static const char *const kinds[] = {"get", "put", "delete", "head", "list"};

/* the changes of a group's figures between two readings */
static void delta(const struct fig *a, const struct fig *b, struct fig *d)
{
	d->count = b->count - a->count;
	d->errors = b->errors - a->errors;
	d->retries = b->retries - a->retries;
	d->bytes = b->bytes - a->bytes;
	for (int i = 0; i <= METRIC_BUCKETS; i++)
		d->lat.bucket[i] = b->lat.bucket[i] - a->lat.bucket[i];
}

static void ms(double s, char *buf, size_t cap)
{
	if (s <= 0)
		snprintf(buf, cap, "-");
	else
		snprintf(buf, cap, "%.3f", s * 1000);
}

/* p50 and p99 of h in milliseconds, or "-" (16 bytes each) */
static void p50_p99(const struct metric_hist *h, char *p50, char *p99)
{
	ms(metric_hist_quantile(h, 0.5), p50, 16);
	ms(metric_hist_quantile(h, 0.99), p99, 16);
}

static double ratio(uint64_t hits, uint64_t misses)
{
	return hits + misses ? 100.0 * (double)hits / (double)(hits + misses)
			     : -1;
}

/* Counter key of the top-level object group of json (0 when absent). */
static uint64_t counter(const char *json, const char *group, const char *key)
{
	const char *o = member(json, obj_end(json), group), *v;
	if (!o || *o != '{')
		return 0;
	v = member(o, obj_end(o), key);
	return v ? strtoull(v, NULL, 10) : 0;
}

/* The cache group's lines, when the mount is in one. */
static void draw_group(const char *prev, const char *cur, double secs)
{
	const char *o = member(cur, obj_end(cur), "group"), *v;
	char name[80] = "?", p50[16], p99[16];
	struct fig a, b, d;

	if (!o || *o != '{' || !(v = member(o, obj_end(o), "enabled")) ||
	    strncmp(v, "true", 4))
		return;
	if ((v = member(o, obj_end(o), "name")) && *v == '"')
		snprintf(name, sizeof(name), "%.*s", (int)strcspn(v + 1, "\""),
			 v + 1);
#define RATE(k)                                                                \
	((double)(counter(cur, "group", k) - counter(prev, "group", k)) / secs)
	fig_of(prev, "group", "peer_lat", &a);
	fig_of(cur, "group", "peer_lat", &b);
	delta(&a, &b, &d);
	p50_p99(&d.lat, p50, p99);
	printf("\033[K\n");
	printf("CACHE GROUP    %s   %llu members\033[K\n", name,
	       (unsigned long long)counter(cur, "group", "members"));
	printf("  %-12s %9s %9s %9s %9s %9s %10s %10s\033[K\n", "peer reads",
	       "hits/s", "misses/s", "errors/s", "skipped/s", "MiB/s", "p50 ms",
	       "p99 ms");
	printf("  %-12s %9.1f %9.1f %9.1f %9.1f %9.1f %10s %10s\033[K\n", "",
	       RATE("peer_hits"), RATE("peer_misses"), RATE("peer_errors"),
	       RATE("peer_skipped"), RATE("peer_bytes") / 1048576.0, p50, p99);
	printf("  %-12s %9s %9s %9s %9s %9s\033[K\n", "served", "req/s",
	       "MiB/s", "fetches/s", "refused/s", "bad in/s");
	printf("  %-12s %9.1f %9.1f %9.1f %9.1f %9.1f\033[K\n", "",
	       RATE("served"), RATE("served_bytes") / 1048576.0,
	       RATE("served_fetches"), RATE("refused_auth"),
	       RATE("bad_from_peers"));
	printf("  store fetches avoided/s %.1f (reads a member answered)"
	       "\033[K\n",
	       RATE("peer_hits"));
#undef RATE
}

/* Member key (a number) of the object at o, 0 when absent. */
static uint64_t of(const char *o, const char *key)
{
	const char *v = member(o, obj_end(o), key);
	return v ? strtoull(v, NULL, 10) : 0;
}

/* The epoch plans' lines, when the mount has or had some. */
static void draw_plans(const char *prev, const char *cur, double secs)
{
	const char *o = member(cur, obj_end(cur), "plans"), *v;
	char w[32], a[32];

	if (!o || *o != '{' || !(v = member(o, obj_end(o), "enabled")) ||
	    strncmp(v, "true", 4) || !of(o, "made"))
		return;
#define RATE(k)                                                                \
	((double)(counter(cur, "plans", k) - counter(prev, "plans", k)) / secs)
	cli_format_size(of(o, "window"), w, sizeof(w));
	cli_format_size(of(o, "ahead"), a, sizeof(a));
	printf("\033[K\n");
	printf("PLANS          %llu plans   %llu files   window %s   ahead %s"
	       "\033[K\n",
	       (unsigned long long)of(o, "plans"),
	       (unsigned long long)of(o, "files"), w, a);
	printf("  %12s %12s %12s %9s %9s %10s\033[K\n", "fetched MiB/s",
	       "used MiB/s", "wasted MiB/s", "ready/s", "waited/s",
	       "demoted/s");
	printf("  %12.1f %12.1f %12.1f %9.1f %9.1f %10.1f\033[K\n",
	       RATE("prefetched") / 1048576.0, RATE("used") / 1048576.0,
	       RATE("wasted") / 1048576.0, RATE("ready"), RATE("waited"),
	       RATE("demoted"));
#undef RATE
	const char *by = member(o, obj_end(o), "by_id"), *end;
	if (!by || *by != '{')
		return;
	end = obj_end(by);
	printf("  %-6s %-8s %9s %9s %10s %10s %8s %8s %6s\033[K\n", "ID", "PID",
	       "FILES", "PLACE", "WINDOW", "AHEAD", "READY", "WAITED", "IDLE");
	for (const char *p = by + 1; p < end; p++) {
		if (*p != '{')
			continue;
		cli_format_size(of(p, "window"), w, sizeof(w));
		cli_format_size(of(p, "ahead"), a, sizeof(a));
		printf("  %-6llu %-8llu %9llu %9llu %10s %10s %8llu %8llu "
		       "%5llus\033[K\n",
		       (unsigned long long)of(p, "id"),
		       (unsigned long long)of(p, "pid"),
		       (unsigned long long)of(p, "files"),
		       (unsigned long long)of(p, "place"), w, a,
		       (unsigned long long)of(p, "ready"),
		       (unsigned long long)of(p, "waited"),
		       (unsigned long long)of(p, "idle_s"));
		p = obj_end(p);
	}
}

/* One screen: the changes from prev to cur over secs seconds. */
static void draw(const char *mp, const char *prev, const char *cur,
		 double secs)
{
	struct fig a, b, d;
	char p50[16], p99[16], tm[32];
	time_t now = time(NULL);

	strftime(tm, sizeof(tm), "%Y-%m-%d %H:%M:%S", localtime(&now));
	/* home, then every line cleared to its end, the rest below cleared */
	printf("\033[H");
#define L(...) (printf(__VA_ARGS__), printf("\033[K\n"))
	L("granary stats %s  every %.1f s  %s  (Ctrl-C quits)", mp, secs, tm);
	L("%s", "");
	L("%-14s %10s %8s %10s %10s", "FUSE OPS", "ops/s", "err/s", "p50 ms",
	  "p99 ms");
	int shown = 0;
	for (size_t i = 0; i < sizeof(op_rows) / sizeof(op_rows[0]); i++) {
		fig_of(prev, "fuse", op_rows[i], &a);
		if (!fig_of(cur, "fuse", op_rows[i], &b))
			continue;
		delta(&a, &b, &d);
		if (!d.count && shown >= 4)
			continue;
		p50_p99(&d.lat, p50, p99);
		L("  %-12s %10.1f %8.1f %10s %10s", op_rows[i],
		  (double)d.count / secs, (double)d.errors / secs, p50, p99);
		shown++;
	}
	if (!shown)
		L("  (none yet)");
	struct fig r0, r1, w0, w1;
	fig_of(prev, "fuse", "read", &r0);
	fig_of(cur, "fuse", "read", &r1);
	fig_of(prev, "fuse", "write", &w0);
	fig_of(cur, "fuse", "write", &w1);
	L("%s", "");
	L("THROUGHPUT     read %9.1f MiB/s   write %9.1f MiB/s",
	  (double)(r1.bytes - r0.bytes) / secs / 1048576.0,
	  (double)(w1.bytes - w0.bytes) / secs / 1048576.0);
	L("%s", "");
	L("%-14s %10s %8s %10s %10s %10s %10s", "STORE", "req/s", "err/s",
	  "retries/s", "MiB/s", "p50 ms", "p99 ms");
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		fig_of(prev, "store_requests", kinds[k], &a);
		fig_of(cur, "store_requests", kinds[k], &b);
		delta(&a, &b, &d);
		p50_p99(&d.lat, p50, p99);
		L("  %-12s %10.1f %8.1f %10.1f %10.1f %10s %10s", kinds[k],
		  (double)d.count / secs, (double)d.errors / secs,
		  (double)d.retries / secs,
		  (double)d.bytes / secs / 1048576.0, p50, p99);
	}
	fig_of(prev, "redis", NULL, &a);
	fig_of(cur, "redis", NULL, &b);
	delta(&a, &b, &d);
	p50_p99(&d.lat, p50, p99);
	L("%s", "");
	L("REDIS          %10.1f round trips/s   p50 %s ms   p99 %s ms",
	  (double)d.count / secs, p50, p99);
	L("%s", "");
	fig_of(prev, "memory_cache", NULL, &a);
	fig_of(cur, "memory_cache", NULL, &b);
	delta(&a, &b, &d);
	double mem = ratio(d.count, d.errors);
	fig_of(prev, "disk_cache", NULL, &a);
	fig_of(cur, "disk_cache", NULL, &b);
	delta(&a, &b, &d);
	double disk = ratio(d.count, d.errors);
	char mr[16] = "-", dr[16] = "-";
	if (mem >= 0)
		snprintf(mr, sizeof(mr), "%.1f%%", mem);
	if (disk >= 0)
		snprintf(dr, sizeof(dr), "%.1f%%", disk);
	L("CACHE HITS     memory %7s   disk %7s", mr, dr);
	const char *end = obj_end(cur);
	const char *wb = member(cur, end, "write_buffer"), *v;
	uint64_t used = 0, budget = 0, waits = 0, pwaits = 0;
	if (wb && *wb == '{') {
		const char *we = obj_end(wb);
		if ((v = member(wb, we, "bytes")))
			used = strtoull(v, NULL, 10);
		if ((v = member(wb, we, "budget")))
			budget = strtoull(v, NULL, 10);
		if ((v = member(wb, we, "waits")))
			waits = strtoull(v, NULL, 10);
	}
	const char *pe = obj_end(prev);
	if ((wb = member(prev, pe, "write_buffer")) && *wb == '{' &&
	    (v = member(wb, obj_end(wb), "waits")))
		pwaits = strtoull(v, NULL, 10);
	char us[32], bs[32];
	cli_format_size(used, us, sizeof(us));
	cli_format_size(budget, bs, sizeof(bs));
	L("WRITE BUFFER   %s of %s   back-pressure waits/s %.1f", us, bs,
	  (double)(waits - pwaits) / secs);
	draw_group(prev, cur, secs);
	draw_plans(prev, cur, secs);
#undef L
	printf("\033[J");
	fflush(stdout);
}

static int watch(const char *mp, double interval)
{
	struct sigaction sa;
	char *prev = read_stats(mp), *cur;

	if (!prev)
		return CLI_EXIT_FAIL;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	/* the alternate screen, cursor hidden: left as it was on exit */
	printf("\033[?1049h\033[?25l\033[H\033[2J");
	fflush(stdout);
	int ret = CLI_EXIT_OK;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (!stop) {
		struct timespec ts = {(time_t)interval,
				      (long)((interval - (double)(time_t)
							     interval) *
					     1e9)};
		while (!stop && nanosleep(&ts, &ts) && errno == EINTR)
			;
		if (stop)
			break;
		cur = read_stats(mp);
		if (!cur) {
			ret = CLI_EXIT_FAIL;
			break;
		}
		clock_gettime(CLOCK_MONOTONIC, &t1);
		double secs = (double)(t1.tv_sec - t0.tv_sec) +
			      (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
		draw(mp, prev, cur, secs > 0 ? secs : interval);
		free(prev);
		prev = cur;
		t0 = t1;
	}
	free(prev);
	printf("\033[?25h\033[?1049l");
	fflush(stdout);
	return ret;
}

int cmd_stats(int argc, char **argv)
{
	int json = 0, watching = 0, c;
	double interval = 1;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":hw", options, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = 1;
			break;
		case 'w':
			watching = 1;
			break;
		case 'i':
			if (cli_parse_seconds(optarg, &interval) ||
			    interval < 0.2 || interval > 60) {
				cli_error("bad --interval '%s': want 0.2 to 60 "
					  "seconds, such as 1 or 500ms",
					  optarg);
				return CLI_EXIT_USAGE;
			}
			break;
		case 'h':
			return cli_usage(usage, CLI_EXIT_OK);
		default:
			return cli_bad_option(c, argv, usage);
		}
	}
	if (argc - optind != 1)
		return cli_usage(usage, CLI_EXIT_USAGE);
	if (json && watching) {
		cli_error("--json and --watch do not go together");
		cli_hint("scripts read the counters once with --json, or "
			 "scrape the mount's /metrics");
		return CLI_EXIT_USAGE;
	}
	const char *mp = argv[optind];
	if (watching)
		return watch(mp, interval);
	char *buf = read_stats(mp);
	if (!buf)
		return CLI_EXIT_FAIL;
	if (json)
		fputs(buf, stdout);
	else
		print_plain(buf);
	free(buf);
	return CLI_EXIT_OK;
}
