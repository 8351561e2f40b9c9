/*
 * metrics.c - the operations' counters (vfs_op_done), the Prometheus
 * endpoint of a mount, its rendering, the JSON of granary.stats' latency
 * figures, and the access log (metrics.h).
 *
 * The endpoint: one thread, poll(2) over the listening socket and at most
 * MAX_CONNS clients, each with READ_TIMEOUT_MS to send its request line
 * and headers (REQ_MAX bytes at most); GET (or HEAD) /metrics gets the
 * figures, another path 404, another method 405; one answer per
 * connection. A client that connects while every slot is taken is
 * accepted at once, and the oldest connection (one that has not sent a
 * whole request yet: a whole one is answered on arrival) is closed for
 * it: clients that connect and say nothing, or say it slowly, never keep
 * a scrape waiting. Nothing here is on a FUSE request's path but
 * vfs_op_done.
 */
#include "fs/vfs/metrics.h"

#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "fs/data/chunkstore.h"
#include "fs/data/packer.h"
#include "fs/data/stage.h"
#include "fs/data/writer.h"
#include "fs/store/diskcache.h"
#include "fs/store/group.h"
#include "fs/store/objstore.h"
#include "fs/vfs/groupd.h"
#include "fs/vfs/plan.h"
#include "fs/vfs/vfs_int.h"
#include "lib/fsutil.h"
#include "lib/linelog.h"
#include "lib/log.h"
#include "lib/metric.h"
#include "meta/meta_volume.h"

#define MAX_CONNS	8
#define REQ_MAX		4096
#define READ_TIMEOUT_MS 3000
#define SEND_TIMEOUT_S	5

struct conn {
	int fd; /* -1: free */
	size_t got;
	int64_t deadline_ms; /* accepted + READ_TIMEOUT_MS: the oldest first */
	char req[REQ_MAX];
};

struct metrics {
	struct fs *fs;
	struct linelog *access; /* NULL: no access log */
	int lfd;		/* listening socket; -1: no endpoint */
	int wake;		/* eventfd: stop */
	char addr[300];		/* as bound */
	char labels[1200];	/* volume="...",mountpoint="..." */
	pthread_t thread;
	int running;
	struct conn conns[MAX_CONNS];
};

/* ---- the operations ------------------------------------------------ */

const char *vfs_op_name(enum vfs_op op)
{
#define VFS_OP_NAME(n) #n,
	static const char *const names[VFS_OP_N] = {VFS_OPS(VFS_OP_NAME)};
#undef VFS_OP_NAME
	return op < VFS_OP_N ? names[op] : "?";
}

/* name as the access log shows it: in quotes, with '"', '\\', control
 * bytes and DEL as escapes, so that a line stays one line */
static size_t quote_name(const char *name, char *buf, size_t cap)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;

	buf[o++] = '"';
	for (const unsigned char *p = (const unsigned char *)name;
	     *p && o + 6 < cap; p++) {
		if (*p == '"' || *p == '\\') {
			buf[o++] = '\\';
			buf[o++] = (char)*p;
		} else if (*p < 0x20 || *p == 0x7f) {
			buf[o++] = '\\';
			buf[o++] = 'x';
			buf[o++] = hex[*p >> 4];
			buf[o++] = hex[*p & 15];
		} else {
			buf[o++] = (char)*p;
		}
	}
	buf[o++] = '"';
	buf[o] = '\0';
	return o;
}

/* "2026-01-02T03:04:05.123456Z lookup ino=1 name="x" result=ENOENT
 * us=42" */
static void access_line(struct linelog *l, enum vfs_op op, uint64_t ino,
			const char *name, int err, uint64_t ns)
{
	char line[1024], qname[600] = "";
	struct timespec ts;
	struct tm tm;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	if (name)
		quote_name(name, qname, sizeof(qname));
	const char *res = err ? strerrorname_np(err) : "0";
	int n = snprintf(
	    line, sizeof(line),
	    "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ %s ino=%llu%s%s result=%s "
	    "us=%llu\n",
	    tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
	    tm.tm_sec, ts.tv_nsec / 1000, vfs_op_name(op),
	    (unsigned long long)ino, name ? " name=" : "", qname,
	    res ? res : "EIO", (unsigned long long)(ns / 1000));
	if (n >= (int)sizeof(line)) { /* cut: still one line */
		n = (int)sizeof(line);
		line[n - 1] = '\n';
	}
	linelog_put(l, line, (size_t)n);
}

void vfs_op_done(struct fs *fs, enum vfs_op op, uint64_t ino,
		 const char *name, int err, uint64_t ns, uint64_t bytes)
{
	struct fs_opstat *s = &fs->ops[op];
	struct metrics *m = __atomic_load_n(&fs->metrics, __ATOMIC_ACQUIRE);

	metric_add(&s->count, 1);
	if (err)
		metric_add(&s->errors, 1);
	if (bytes)
		metric_add(&s->bytes, bytes);
	metric_hist_observe(&s->lat, ns);
	if (m && m->access)
		access_line(m->access, op, ino, name, err, ns);
}

/* ---- the figures --------------------------------------------------- */

/* Everything read once, for one rendering. */
struct snap {
	struct fs_opstat ops[VFS_OP_N];
	struct objstore_stats st;
	struct chunkstore_stats cs;
	struct diskcache_stats dc;
	struct packer_stats ps;
	struct stage_stats bs;
	struct wpool_stats wp;
	struct meta_round_trips rt;
	uint64_t access_lines, access_dropped;
	struct group_stats gs; /* fs->group's; zeros when none */
	struct plans_stats pl; /* the epoch plans'; zeros when none */
};

static void snap_take(struct fs *fs, struct snap *s)
{
	memset(s, 0, sizeof(*s));
	for (int i = 0; i < VFS_OP_N; i++) {
		s->ops[i].count = metric_get(&fs->ops[i].count);
		s->ops[i].errors = metric_get(&fs->ops[i].errors);
		s->ops[i].bytes = metric_get(&fs->ops[i].bytes);
		metric_hist_read(&fs->ops[i].lat, &s->ops[i].lat);
	}
	objstore_get_stats(fs->backend, &s->st);
	chunkstore_get_stats(fs->cs, &s->cs);
	if (fs->disk_cache)
		diskcache_get_stats(fs->cache, &s->dc);
	if (fs->packer)
		packer_get_stats(fs->packer, &s->ps);
	if (fs->stage)
		stage_get_stats(fs->stage, &s->bs);
	if (fs->pool)
		wpool_get_stats(fs->pool, &s->wp);
	meta_get_round_trips(fs->meta, &s->rt);
	if (fs->group)
		group_get_stats(fs->group, &s->gs);
	plans_get_stats(fs->plans, &s->pl);
	if (fs->metrics && fs->metrics->access)
		linelog_counts(fs->metrics->access, &s->access_lines,
			       &s->access_dropped);
}

/* base labels plus one more: "volume=..,mountpoint=..,k=\"v\"" */
static const char *lbl(const struct metrics *m, char *buf, size_t cap,
		       const char *k, const char *v)
{
	if (!k)
		return m->labels;
	snprintf(buf, cap, "%s,%s=\"%s\"", m->labels, k, v);
	return buf;
}

/* One family of a counter or gauge with one sample per label value. */
struct row {
	const char *v; /* label value; NULL: no label */
	uint64_t n;
};

static void family(FILE *f, const struct metrics *m, const char *name,
		   const char *type, const char *help, const char *k,
		   const struct row *rows, size_t nrows)
{
	char b[1400];

	metric_family(f, name, type, help);
	for (size_t i = 0; i < nrows; i++)
		metric_sample(f, name, lbl(m, b, sizeof(b), k, rows[i].v),
			      rows[i].n);
}

#define ROWS(...)                                                             \
	(const struct row[]){__VA_ARGS__},                                    \
	    sizeof((const struct row[]){__VA_ARGS__}) / sizeof(struct row)

static void render_fuse(FILE *f, const struct metrics *m, const struct snap *s)
{
	char b[1400];

	metric_family(f, "granary_fuse_ops_total", "counter",
		      "FUSE requests answered, by operation.");
	for (int i = 0; i < VFS_OP_N; i++)
		if (s->ops[i].count)
			metric_sample(f, "granary_fuse_ops_total",
				      lbl(m, b, sizeof(b), "op",
					  vfs_op_name(i)),
				      s->ops[i].count);
	metric_family(f, "granary_fuse_errors_total", "counter",
		      "FUSE requests answered with an error, by operation.");
	for (int i = 0; i < VFS_OP_N; i++)
		if (s->ops[i].count)
			metric_sample(f, "granary_fuse_errors_total",
				      lbl(m, b, sizeof(b), "op",
					  vfs_op_name(i)),
				      s->ops[i].errors);
	family(f, m, "granary_fuse_bytes_total", "counter",
	       "Bytes read and written through the mount.", "op",
	       ROWS({"read", s->ops[VFS_OP_read].bytes},
		    {"write", s->ops[VFS_OP_write].bytes}));
	metric_family(f, "granary_fuse_op_duration_seconds", "histogram",
		      "Time from a FUSE request's arrival to its answer.");
	for (int i = 0; i < VFS_OP_N; i++)
		if (s->ops[i].count)
			metric_hist_render(f,
					   "granary_fuse_op_duration_seconds",
					   lbl(m, b, sizeof(b), "op",
					       vfs_op_name(i)),
					   &s->ops[i].lat);
}

static void render_store(FILE *f, const struct metrics *m,
			 const struct snap *s)
{
	static const struct {
		const char *name, *help;
		size_t off;
	} fams[] = {
	    {"granary_store_requests_total",
	     "Object store requests, by kind (retries not counted apart).",
	     offsetof(struct objstore_kind_stats, requests)},
	    {"granary_store_errors_total",
	     "Object store requests that failed in the end, by kind (a "
	     "missing object included).",
	     offsetof(struct objstore_kind_stats, errors)},
	    {"granary_store_retries_total",
	     "Attempts made again after a transient error, by kind.",
	     offsetof(struct objstore_kind_stats, retries)},
	    {"granary_store_bytes_total",
	     "Payload bytes moved by object store requests, by kind.",
	     offsetof(struct objstore_kind_stats, bytes)},
	};
	char b[1400];

	for (size_t j = 0; j < sizeof(fams) / sizeof(fams[0]); j++) {
		metric_family(f, fams[j].name, "counter", fams[j].help);
		for (int k = 0; k < OBJSTORE_KINDS; k++) {
			const char *p = (const char *)&s->st.kind[k];
			uint64_t v;
			memcpy(&v, p + fams[j].off, sizeof(v));
			metric_sample(f, fams[j].name,
				      lbl(m, b, sizeof(b), "kind",
					  objstore_kind_name(k)),
				      v);
		}
	}
	metric_family(f, "granary_store_request_duration_seconds",
		      "histogram",
		      "Time of an object store request, retries included.");
	for (int k = 0; k < OBJSTORE_KINDS; k++)
		metric_hist_render(f, "granary_store_request_duration_seconds",
				   lbl(m, b, sizeof(b), "kind",
				       objstore_kind_name(k)),
				   &s->st.kind[k].lat);
	family(f, m, "granary_store_gave_up_total", "counter",
	       "Requests that still failed when their retry window closed.",
	       NULL, ROWS({NULL, s->st.gave_up}));
}

/* The counters and gauges read straight from a snapshot: each family
 * with up to two samples, a label value and the field of struct snap. */
#define AT(field) offsetof(struct snap, field)
static const struct simple {
	const char *name, *type, *help, *label;
	struct {
		const char *v;
		size_t at;
	} s[2];
} simple[] = {
    {"granary_redis_round_trips_total", "counter",
     "Round trips to Redis (pipelines sent and answered).", NULL,
     {{NULL, AT(rt.count)}}},
    {"granary_redis_errors_total", "counter",
     "Round trips to Redis that lost their connection.", NULL,
     {{NULL, AT(rt.errors)}}},
    {"granary_cache_hits_total", "counter",
     "Block reads answered by a cache, by cache.", "cache",
     {{"memory", AT(cs.cache_hits)}, {"disk", AT(dc.hits)}}},
    {"granary_cache_misses_total", "counter",
     "Block reads a cache could not answer, by cache.", "cache",
     {{"memory", AT(cs.cache_misses)}, {"disk", AT(dc.misses)}}},
    {"granary_cache_hit_bytes_total", "counter",
     "Bytes read from the disk cache.", "cache", {{"disk", AT(dc.hit_bytes)}}},
    {"granary_cache_bytes", "gauge", "Bytes held by a cache now, by cache.",
     "cache", {{"memory", AT(cs.cache_bytes)}, {"disk", AT(dc.bytes)}}},
    {"granary_cache_entries", "gauge",
     "Blocks (memory) or objects (disk) held by a cache now, by cache.",
     "cache", {{"memory", AT(cs.cache_entries)}, {"disk", AT(dc.entries)}}},
    {"granary_cache_evictions_total", "counter",
     "Entries a cache let go to make room, by cache.", "cache",
     {{"memory", AT(cs.cache_evictions)}, {"disk", AT(dc.evictions)}}},
    {"granary_cache_ranked_evictions_total", "counter",
     "Disk cache evictions the epoch plans chose, by kind: demoted (passed "
     "by the plans, needed by none) or planned (needed furthest ahead).",
     "kind",
     {{"demoted", AT(dc.evict_demoted)}, {"planned", AT(dc.evict_planned)}}},
    {"granary_cache_fills_ranked_out_total", "counter",
     "Disk cache fills refused: needed later by the plans than all they "
     "would evict.",
     NULL, {{NULL, AT(dc.fill_ranked_out)}}},
    {"granary_cache_fills_total", "counter",
     "Objects written into the disk cache.", "cache", {{"disk", AT(dc.fills)}}},
    {"granary_cache_corrupt_total", "counter",
     "Cached blocks that failed their checksum, by cache.", "cache",
     {{"memory", AT(cs.corrupt)}, {"disk", AT(dc.bad_entries)}}},
    {"granary_prefetch_total", "counter",
     "Blocks queued for prefetch (readahead).", NULL,
     {{NULL, AT(cs.prefetched)}}},
    {"granary_prefetch_dropped_total", "counter",
     "Prefetches dropped: the queue was full.", NULL,
     {{NULL, AT(cs.prefetch_drops)}}},
    {"granary_write_buffer_bytes", "gauge",
     "Bytes of writes buffered in memory now.", NULL,
     {{NULL, AT(wp.buffered)}}},
    {"granary_write_buffer_limit_bytes", "gauge",
     "The write buffer's budget (--buffer-size).", NULL,
     {{NULL, AT(wp.budget)}}},
    {"granary_write_buffer_waits_total", "counter",
     "Writes that waited for the buffer (back-pressure).", NULL,
     {{NULL, AT(wp.waits)}}},
    {"granary_staged_bytes", "gauge",
     "Bytes staged on the local disk, not yet in the store (writeback), by "
     "kind.",
     "kind",
     {{"pack", AT(ps.staged_bytes)}, {"block", AT(bs.staged_bytes)}}},
    {"granary_uploaded_bytes_total", "counter",
     "Bytes uploaded by the packer and the block stager.", "kind",
     {{"pack", AT(ps.bytes)}, {"block", AT(bs.bytes)}}},
    {"granary_access_log_lines_total", "counter",
     "Lines written to the access log.", NULL, {{NULL, AT(access_lines)}}},
    {"granary_access_log_dropped_total", "counter",
     "Access log lines dropped: its buffer was full.", NULL,
     {{NULL, AT(access_dropped)}}},
};
#undef AT

static void render_rest(FILE *f, const struct metrics *m, const struct snap *s)
{
	for (size_t i = 0; i < sizeof(simple) / sizeof(simple[0]); i++) {
		const struct simple *e = &simple[i];
		struct row rows[2];
		size_t n = 0;
		for (; n < 2 && (n == 0 || e->s[n].v); n++) {
			rows[n].v = e->s[n].v;
			memcpy(&rows[n].n, (const char *)s + e->s[n].at,
			       sizeof(rows[n].n));
		}
		family(f, m, e->name, e->type, e->help, e->label, rows, n);
	}
	metric_family(f, "granary_redis_round_trip_duration_seconds",
		      "histogram", "Time of a round trip to Redis.");
	metric_hist_render(f, "granary_redis_round_trip_duration_seconds",
			   m->labels, &s->rt.lat);
	metric_family(f, "granary_write_buffer_wait_seconds_total", "counter",
		      "Time writes spent waiting for the buffer.");
	metric_sample_double(f, "granary_write_buffer_wait_seconds_total",
			     m->labels, (double)s->wp.wait_ns / 1e9);
}

/* The cache group's figures (fs->group set). */
static void render_group(FILE *f, const struct metrics *m, struct fs *fs,
			 const struct snap *s)
{
	const struct group_stats *g = &s->gs;
	char b[1400], v[200], node[24];

	snprintf(node, sizeof(node), "%016llx",
		 (unsigned long long)groupd_node(fs->groupd));
	metric_family(f, "granary_group_info", "gauge",
		      "The mount's cache group, its node id and the address "
		      "it serves at, always 1.");
	snprintf(b, sizeof(b), "%s,group=\"%s\",node=\"%s\",address=\"%s\"",
		 m->labels, groupd_name(fs->groupd), node,
		 metric_label_escape(group_addr(fs->group), v, sizeof(v)));
	metric_sample(f, "granary_group_info", b, 1);
	family(f, m, "granary_group_members", "gauge",
	       "Live members of the cache group, as last read from the "
	       "metadata.",
	       NULL, ROWS({NULL, g->members}));
	family(f, m, "granary_group_peer_reads_total", "counter",
	       "Reads of blocks another member owns, by result: hit (it "
	       "sent them), miss (it had nothing), error (down, slow, "
	       "refused, or bad bytes), skipped (it was marked down: the "
	       "store was asked).",
	       "result",
	       ROWS({"hit", g->peer_hits}, {"miss", g->peer_misses},
		    {"error", g->peer_errors}, {"skipped", g->peer_skipped}));
	family(f, m, "granary_group_peer_bytes_total", "counter",
	       "Bytes other members sent this node.", NULL,
	       ROWS({NULL, g->peer_bytes}));
	metric_family(f, "granary_group_peer_read_duration_seconds",
		      "histogram", "Time of a read asked of another member.");
	metric_hist_render(f, "granary_group_peer_read_duration_seconds",
			   m->labels, &g->peer_lat);
	family(f, m, "granary_group_bad_from_peers_total", "counter",
	       "Blocks another member sent that failed their check (told to "
	       "it, and read from the store).",
	       NULL, ROWS({NULL, g->bad_from_peers}));
	family(f, m, "granary_group_self_owned_total", "counter",
	       "Reads of blocks this node owns (its own cache, or the store "
	       "once).",
	       NULL, ROWS({NULL, g->self_owned}));
	family(f, m, "granary_group_served_total", "counter",
	       "Requests this node answered for the other members.", NULL,
	       ROWS({NULL, g->served}));
	family(f, m, "granary_group_served_bytes_total", "counter",
	       "Bytes this node sent the other members.", NULL,
	       ROWS({NULL, g->served_bytes}));
	family(f, m, "granary_group_served_fetches_total", "counter",
	       "Objects this node fetched from the store for the other "
	       "members.",
	       NULL, ROWS({NULL, g->served_fetches}));
	family(f, m, "granary_group_refused_total", "counter",
	       "Requests refused for a missing or wrong signature (another "
	       "group's secret).",
	       NULL, ROWS({NULL, g->refused_auth}));
}

/* The epoch plans' figures (zeros on a mount without plans). */
static void render_plans(FILE *f, const struct metrics *m, const struct snap *s)
{
	const struct plans_stats *p = &s->pl;

	family(f, m, "granary_plan_plans", "gauge",
	       "Epoch plans of the mount now.", NULL, ROWS({NULL, p->plans}));
	family(f, m, "granary_plan_files", "gauge",
	       "Files the epoch plans name now, all plans.", NULL,
	       ROWS({NULL, p->files}));
	family(f, m, "granary_plan_window_bytes", "gauge",
	       "Bytes the plans' windows may take now, all plans.", NULL,
	       ROWS({NULL, p->window}));
	family(f, m, "granary_plan_ahead_bytes", "gauge",
	       "Bytes of planned files in the disk cache ahead of their "
	       "readers now.",
	       NULL, ROWS({NULL, p->ahead}));
	family(f, m, "granary_plan_made_total", "counter", "Epoch plans made.",
	       NULL, ROWS({NULL, p->made}));
	family(f, m, "granary_plan_ended_total", "counter",
	       "Epoch plans ended (cancelled, owner gone, idle, unmount).",
	       NULL, ROWS({NULL, p->ended}));
	family(f, m, "granary_plan_prefetched_bytes_total", "counter",
	       "Bytes of planned files fetched ahead of their readers.", NULL,
	       ROWS({NULL, p->prefetched}));
	family(f, m, "granary_plan_used_bytes_total", "counter",
	       "Of the bytes fetched ahead, those of files their readers "
	       "opened.",
	       NULL, ROWS({NULL, p->used}));
	family(f, m, "granary_plan_wasted_bytes_total", "counter",
	       "Of the bytes fetched ahead, those of files their readers "
	       "passed without opening them.",
	       NULL, ROWS({NULL, p->wasted}));
	family(f, m, "granary_plan_opens_total", "counter",
	       "Opens of planned files, by result: ready (fetched ahead) or "
	       "waited (the reader waited on the store).",
	       "result", ROWS({"ready", p->ready}, {"waited", p->waited}));
	family(f, m, "granary_plan_demoted_total", "counter",
	       "Objects handed to the disk cache to evict first: the plans "
	       "passed them and none needs them again.",
	       NULL, ROWS({NULL, p->demoted}));
}

void metrics_render(struct fs *fs, FILE *f)
{
	struct metrics *m = fs->metrics;
	struct snap *s = malloc(sizeof(*s));

	if (!s)
		return;
	snap_take(fs, s);
	family(f, m, "granary_info", "gauge",
	       "The mount: its volume and mount point, always 1.", NULL,
	       ROWS({NULL, 1}));
	render_fuse(f, m, s);
	render_store(f, m, s);
	render_rest(f, m, s);
	render_plans(f, m, s);
	if (fs->group)
		render_group(f, m, fs, s);
	free(s);
}

/* ---- granary.stats ------------------------------------------------- */

static void json_hist(FILE *f, const struct metric_hist *h)
{
	fprintf(f, "\"sum_ns\": %llu, \"buckets\": \"",
		(unsigned long long)h->sum_ns);
	for (int i = 0; i <= METRIC_BUCKETS; i++)
		fprintf(f, "%s%llu", i ? " " : "",
			(unsigned long long)h->bucket[i]);
	fputc('"', f);
}

/* ", \"group\": {...}": the cache group's figures, flat, then the
 * latency of peer reads */
static void json_group(struct fs *fs, FILE *f, const struct group_stats *g)
{
	if (!fs->group) {
		fputs(", \"group\": {\"enabled\": false}", f);
		return;
	}
	fprintf(
	    f,
	    ", \"group\": {\"enabled\": true, \"name\": \"%s\", "
	    "\"node\": \"%016llx\", \"address\": \"%s\", "
	    "\"take_only\": %s, \"keep_copies\": %s, \"members\": %llu, "
	    "\"peer_hits\": %llu, \"peer_misses\": %llu, "
	    "\"peer_errors\": %llu, \"peer_skipped\": %llu, "
	    "\"peer_bytes\": %llu, \"bad_from_peers\": %llu, "
	    "\"self_owned\": %llu, \"served\": %llu, "
	    "\"served_bytes\": %llu, \"served_fetches\": %llu, "
	    "\"refused_auth\": %llu, \"peer_lat\": {\"count\": %llu, ",
	    groupd_name(fs->groupd),
	    (unsigned long long)groupd_node(fs->groupd), group_addr(fs->group),
	    fs->o->group_take_only ? "true" : "false",
	    fs->o->group_keep_copies ? "true" : "false",
	    (unsigned long long)g->members, (unsigned long long)g->peer_hits,
	    (unsigned long long)g->peer_misses,
	    (unsigned long long)g->peer_errors,
	    (unsigned long long)g->peer_skipped,
	    (unsigned long long)g->peer_bytes,
	    (unsigned long long)g->bad_from_peers,
	    (unsigned long long)g->self_owned, (unsigned long long)g->served,
	    (unsigned long long)g->served_bytes,
	    (unsigned long long)g->served_fetches,
	    (unsigned long long)g->refused_auth,
	    (unsigned long long)g->peer_lat.count);
	json_hist(f, &g->peer_lat);
	fputs("}}", f);
}

/* ", \"plans\": {...}": the totals, then each plan by its id */
static void json_plans(struct fs *fs, FILE *f, const struct plans_stats *p)
{
	struct plan_info *pi = NULL;
	size_t n = 0;

	fprintf(f,
		", \"plans\": {\"enabled\": %s, \"plans\": %llu, \"files\": "
		"%llu, \"window\": %llu, \"ahead\": %llu, \"made\": %llu, "
		"\"ended\": %llu, \"prefetched\": %llu, \"used\": %llu, "
		"\"wasted\": %llu, \"waited\": %llu, \"ready\": %llu, "
		"\"demoted\": %llu, \"by_id\": {",
		fs->plans ? "true" : "false", (unsigned long long)p->plans,
		(unsigned long long)p->files, (unsigned long long)p->window,
		(unsigned long long)p->ahead, (unsigned long long)p->made,
		(unsigned long long)p->ended, (unsigned long long)p->prefetched,
		(unsigned long long)p->used, (unsigned long long)p->wasted,
		(unsigned long long)p->waited, (unsigned long long)p->ready,
		(unsigned long long)p->demoted);
	plans_list(fs->plans, &pi, &n);
	for (size_t i = 0; i < n; i++) {
		fprintf(f, "%s\"%llu\": ", i ? ", " : "",
			(unsigned long long)pi[i].id);
		plans_info_json(f, &pi[i]);
	}
	free(pi);
	fputs("}}", f);
}

void metrics_json(struct fs *fs, FILE *f)
{
	struct snap *s = malloc(sizeof(*s));
	const char *sep = "";

	if (!s)
		return;
	snap_take(fs, s);
	fputs(", \"fuse\": {", f);
	for (int i = 0; i < VFS_OP_N; i++) {
		if (!s->ops[i].count)
			continue;
		fprintf(f,
			"%s\"%s\": {\"count\": %llu, \"errors\": %llu, "
			"\"bytes\": %llu, ",
			sep, vfs_op_name(i),
			(unsigned long long)s->ops[i].count,
			(unsigned long long)s->ops[i].errors,
			(unsigned long long)s->ops[i].bytes);
		json_hist(f, &s->ops[i].lat);
		fputc('}', f);
		sep = ", ";
	}
	fputs("}, \"store_requests\": {", f);
	for (int k = 0; k < OBJSTORE_KINDS; k++) {
		const struct objstore_kind_stats *ks = &s->st.kind[k];
		fprintf(f,
			"%s\"%s\": {\"count\": %llu, \"errors\": %llu, "
			"\"retries\": %llu, \"bytes\": %llu, ",
			k ? ", " : "", objstore_kind_name(k),
			(unsigned long long)ks->requests,
			(unsigned long long)ks->errors,
			(unsigned long long)ks->retries,
			(unsigned long long)ks->bytes);
		json_hist(f, &ks->lat);
		fputc('}', f);
	}
	fprintf(f, "}, \"redis\": {\"count\": %llu, \"errors\": %llu, ",
		(unsigned long long)s->rt.count,
		(unsigned long long)s->rt.errors);
	json_hist(f, &s->rt.lat);
	fprintf(f,
		"}, \"write_buffer\": {\"bytes\": %llu, \"budget\": %llu, "
		"\"waits\": %llu, \"wait_ns\": %llu}, \"access_log\": "
		"{\"lines\": %llu, \"dropped\": %llu}, \"metrics\": "
		"{\"address\": \"%s\"}",
		(unsigned long long)s->wp.buffered,
		(unsigned long long)s->wp.budget,
		(unsigned long long)s->wp.waits,
		(unsigned long long)s->wp.wait_ns,
		(unsigned long long)s->access_lines,
		(unsigned long long)s->access_dropped,
		metrics_address(fs) ? metrics_address(fs) : "off");
	json_group(fs, f, &s->gs);
	json_plans(fs, f, &s->pl);
	free(s);
}

/* ---- addresses ------------------------------------------------------ */

/* "HOST:PORT", "[V6]:PORT" or ":PORT" (loopback) into host and port;
 * EINVAL with why. */
static int addr_split(const char *addr, char *host, size_t cap, char *port,
		      char *why, size_t wcap)
{
	const char *colon = strrchr(addr, ':');
	const char *h = addr;
	size_t hl;

	if (!colon) {
		snprintf(why, wcap, "no port: give HOST:PORT (or 'off')");
		return EINVAL;
	}
	hl = (size_t)(colon - addr);
	if (hl >= 2 && addr[0] == '[' && addr[hl - 1] == ']') {
		h++;
		hl -= 2;
	} else if (memchr(addr, ':', hl)) {
		snprintf(why, wcap, "an IPv6 address goes in brackets: "
				    "[ADDR]:PORT");
		return EINVAL;
	}
	if (hl >= cap) {
		snprintf(why, wcap, "the host name is too long");
		return EINVAL;
	}
	if (hl)
		memcpy(host, h, hl);
	else
		strcpy(host, "127.0.0.1");
	if (hl)
		host[hl] = '\0';
	const char *p = colon + 1;
	char *end;
	unsigned long v = strtoul(p, &end, 10);
	if (!*p || *end || v > 65535 || *p == '-' || *p == '+') {
		snprintf(why, wcap, "the port '%s' is not 0 to 65535", p);
		return EINVAL;
	}
	snprintf(port, 8, "%lu", v);
	return 0;
}

static int addr_resolve(const char *host, const char *port,
			struct addrinfo **res, char *why, size_t wcap)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	int rc = getaddrinfo(host, port, &hints, res);

	if (rc) {
		snprintf(why, wcap, "cannot resolve '%s': %s", host,
			 gai_strerror(rc));
		return EINVAL;
	}
	return 0;
}

int fs_metrics_addr_check(const char *addr, char *why, size_t cap)
{
	char host[256], port[8];
	struct addrinfo *res;

	if (!strcmp(addr, "off"))
		return 0;
	int err = addr_split(addr, host, sizeof(host), port, why, cap);
	if (!err && !(err = addr_resolve(host, port, &res, why, cap)))
		freeaddrinfo(res);
	return err;
}

/* A listening socket on host:port, its address as bound in m->addr;
 * -1 with errno. */
static int listen_on(struct metrics *m, const char *host, const char *port)
{
	struct addrinfo *res, *ai;
	char why[300];
	int fd = -1, err = EADDRNOTAVAIL;

	if (addr_resolve(host, port, &res, why, sizeof(why))) {
		errno = EINVAL;
		return -1;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		int one = 1;
		fd = socket(ai->ai_family,
			    ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0) {
			err = errno;
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (!bind(fd, ai->ai_addr, ai->ai_addrlen) && !listen(fd, 16))
			break;
		err = errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0) {
		errno = err;
		return -1;
	}
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char h[NI_MAXHOST], p[NI_MAXSERV];
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) ||
	    getnameinfo((struct sockaddr *)&ss, sl, h, sizeof(h), p, sizeof(p),
			NI_NUMERICHOST | NI_NUMERICSERV)) {
		snprintf(m->addr, sizeof(m->addr), "%s:%s", host, port);
	} else {
		snprintf(m->addr, sizeof(m->addr),
			 ss.ss_family == AF_INET6 ? "[%s]:%s" : "%s:%s", h, p);
	}
	return fd;
}

/* ---- the server ----------------------------------------------------- */

static void send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return; /* gone, or too slow: SO_SNDTIMEO */
		p += w;
		n -= (size_t)w;
	}
}

static void answer(struct metrics *m, int fd, int code, const char *reason,
		   const char *extra, const char *body, size_t len, int head)
{
	char hdr[512];
	int n = snprintf(hdr, sizeof(hdr),
			 "HTTP/1.1 %d %s\r\nContent-Type: %s\r\n"
			 "Content-Length: %zu\r\n%sConnection: close\r\n\r\n",
			 code, reason,
			 code == 200 ? "text/plain; version=0.0.4; "
				       "charset=utf-8"
				     : "text/plain; charset=utf-8",
			 len, extra);
	(void)m;
	/* blocking, but for SEND_TIMEOUT_S: a client that does not read
	 * holds up the next scrape, not a FUSE request */
	struct timeval tv = {SEND_TIMEOUT_S, 0};
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	send_all(fd, hdr, (size_t)n);
	if (!head && len)
		send_all(fd, body, len);
}

/* A whole request head in c->req: answer it. */
static void serve(struct metrics *m, struct conn *c)
{
	char method[16], path[1024];
	const char *sp1 = memchr(c->req, ' ', c->got);

	if (!sp1 || sp1 - c->req >= (long)sizeof(method)) {
		const char *b = "bad request\n";
		answer(m, c->fd, 400, "Bad Request", "", b, strlen(b), 0);
		return;
	}
	memcpy(method, c->req, (size_t)(sp1 - c->req));
	method[sp1 - c->req] = '\0';
	const char *p = sp1 + 1;
	size_t pl = strcspn(p, " ?\r\n");
	if (pl >= sizeof(path))
		pl = sizeof(path) - 1;
	memcpy(path, p, pl);
	path[pl] = '\0';
	int head = !strcmp(method, "HEAD");
	if (strcmp(method, "GET") && !head) {
		const char *b = "only GET /metrics is served\n";
		answer(m, c->fd, 405, "Method Not Allowed",
		       "Allow: GET, HEAD\r\n", b, strlen(b), 0);
		return;
	}
	if (strcmp(path, "/metrics")) {
		const char *b = "not found: the figures are at /metrics\n";
		answer(m, c->fd, 404, "Not Found", "", b, strlen(b), head);
		return;
	}
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	if (!f) {
		answer(m, c->fd, 500, "Internal Server Error", "", "", 0, 0);
		return;
	}
	metrics_render(m->fs, f);
	if (fclose(f)) {
		free(text);
		answer(m, c->fd, 500, "Internal Server Error", "", "", 0, 0);
		return;
	}
	answer(m, c->fd, 200, "OK", "", text, len, head);
	free(text);
}

static void conn_close(struct conn *c)
{
	close(c->fd);
	c->fd = -1;
	c->got = 0;
}

/* Read what c sent; answer and close once its head is whole, or it is
 * too long, or it hung up. */
static void conn_read(struct metrics *m, struct conn *c)
{
	ssize_t n = recv(c->fd, c->req + c->got, REQ_MAX - 1 - c->got,
			 MSG_DONTWAIT);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0)
		return conn_close(c);
	c->got += (size_t)n;
	c->req[c->got] = '\0';
	if (strstr(c->req, "\r\n\r\n") || strstr(c->req, "\n\n")) {
		serve(m, c);
		return conn_close(c);
	}
	if (c->got >= REQ_MAX - 1) {
		const char *b = "request too long\n";
		answer(m, c->fd, 431, "Request Header Fields Too Large", "", b,
		       strlen(b), 0);
		conn_close(c);
	}
}

/* Give fd a slot: a free one, else the oldest connection's. */
static void conn_take(struct metrics *m, int fd)
{
	struct conn *c = NULL;

	for (int i = 0; i < MAX_CONNS && !c; i++)
		if (m->conns[i].fd < 0)
			c = &m->conns[i];
	for (int i = 0; i < MAX_CONNS && !c; i++)
		if (i == 0 || m->conns[i].deadline_ms < c->deadline_ms)
			c = &m->conns[i];
	if (c->fd >= 0)
		conn_close(c); /* it had its chance: all it sent is read */
	c->fd = fd;
	c->got = 0;
	c->deadline_ms = fsutil_mono_ms() + READ_TIMEOUT_MS;
}

static void *server_main(void *arg)
{
	struct metrics *m = arg;
	struct pollfd pfd[MAX_CONNS + 2];

	pthread_setname_np(pthread_self(), "gr-metrics");
	for (;;) {
		int n = 0;
		int64_t now = fsutil_mono_ms();
		pfd[n++] = (struct pollfd){.fd = m->wake, .events = POLLIN};
		for (int i = 0; i < MAX_CONNS; i++) {
			struct conn *c = &m->conns[i];
			if (c->fd >= 0 && now >= c->deadline_ms)
				conn_close(c); /* too slow to ask */
		}
		/* always: with every slot busy, the oldest makes room */
		pfd[n++] = (struct pollfd){.fd = m->lfd, .events = POLLIN};
		for (int i = 0; i < MAX_CONNS; i++)
			pfd[n++] = (struct pollfd){.fd = m->conns[i].fd,
						   .events = POLLIN};
		if (poll(pfd, (nfds_t)n, 1000) < 0 && errno != EINTR)
			break;
		if (pfd[0].revents)
			break;
		for (int i = 0; i < MAX_CONNS; i++)
			if (m->conns[i].fd >= 0 && pfd[2 + i].revents)
				conn_read(m, &m->conns[i]);
		/* after the reads: a request that came is answered before
		 * its connection can be the oldest to make room */
		if (pfd[1].revents & POLLIN) {
			int fd = accept4(m->lfd, NULL, NULL,
					 SOCK_CLOEXEC | SOCK_NONBLOCK);
			if (fd >= 0)
				conn_take(m, fd);
		}
	}
	return NULL;
}

/* ---- life ----------------------------------------------------------- */

/* Bind what o asks for, or the next free of the default's ports. */
static void endpoint_open(struct metrics *m, const char *want)
{
	char host[256], port[8], why[300];
	int tries = 1;

	if (!want) {
		want = FS_METRICS_DEFAULT;
		tries = FS_METRICS_TRIES;
	}
	if (!strcmp(want, "off"))
		return;
	if (addr_split(want, host, sizeof(host), port, why, sizeof(why))) {
		log_warn("no metrics endpoint: '%s': %s", want, why);
		return;
	}
	int base = atoi(port), err = 0;
	for (int i = 0; i < tries && m->lfd < 0; i++) {
		snprintf(port, sizeof(port), "%d", base + i);
		m->lfd = listen_on(m, host, port);
		err = errno;
		if (m->lfd < 0 && err != EADDRINUSE)
			break;
	}
	if (m->lfd < 0) {
		log_warn("no metrics endpoint: cannot listen on '%s'%s: %s",
			 want,
			 tries > 1 ? " nor the next ports after it" : "",
			 strerror(err));
		log_warn("hint: give a free address with --metrics HOST:PORT "
			 "(port 0: any free one), or --metrics off");
		return;
	}
	m->wake = eventfd(0, EFD_CLOEXEC);
	if (m->wake < 0 ||
	    pthread_create(&m->thread, NULL, server_main, m) != 0) {
		log_warn("no metrics endpoint: cannot start its thread");
		close(m->lfd);
		m->lfd = -1;
		return;
	}
	m->running = 1;
	log_info("metrics: serving http://%s/metrics", m->addr);
}

int metrics_open(struct fs *fs, char *msg, size_t cap)
{
	struct metrics *m = calloc(1, sizeof(*m));
	char v[400], mp[1100];

	if (!m) {
		snprintf(msg, cap, "out of memory");
		return ENOMEM;
	}
	m->fs = fs;
	m->lfd = -1;
	m->wake = -1;
	for (int i = 0; i < MAX_CONNS; i++)
		m->conns[i].fd = -1;
	snprintf(m->labels, sizeof(m->labels),
		 "volume=\"%s\",mountpoint=\"%s\"",
		 metric_label_escape(fs->vol.name, v, sizeof(v)),
		 metric_label_escape(fs->o->mountpoint ? fs->o->mountpoint : "",
				     mp, sizeof(mp)));
	if (fs->o->access_log && *fs->o->access_log) {
		int err = linelog_open(fs->o->access_log, 0, &m->access);
		if (err) {
			snprintf(msg, cap, "cannot open the access log '%s': %s",
				 fs->o->access_log, strerror(err));
			free(m);
			return err;
		}
		linelog_hup_install();
	}
	endpoint_open(m, fs->o->metrics_addr);
	if (m->running) {
		int err = meta_session_metrics(fs->meta, m->addr);
		if (err)
			log_warn("cannot publish the metrics address in the "
				 "session: %s",
				 gr_strerror(err));
	}
	__atomic_store_n(&fs->metrics, m, __ATOMIC_RELEASE);
	return 0;
}

void metrics_close(struct metrics *m)
{
	if (!m)
		return;
	__atomic_store_n(&m->fs->metrics, NULL, __ATOMIC_RELEASE);
	if (m->running) {
		uint64_t one = 1;
		if (write(m->wake, &one, sizeof(one)) != sizeof(one))
			log_warn("cannot stop the metrics thread");
		pthread_join(m->thread, NULL);
	}
	for (int i = 0; i < MAX_CONNS; i++)
		if (m->conns[i].fd >= 0)
			close(m->conns[i].fd);
	if (m->lfd >= 0)
		close(m->lfd);
	if (m->wake >= 0)
		close(m->wake);
	linelog_close(m->access);
	free(m);
}

const char *metrics_address(const struct fs *fs)
{
	const struct metrics *m = fs->metrics;
	return m && m->running ? m->addr : NULL;
}
