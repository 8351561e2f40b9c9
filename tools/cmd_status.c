/*
 * cmd_status.c - `granary status`: a volume's settings, the clients that
 * have it mounted, its cache groups' live members and what it holds, for
 * people (aligned lines and tables) or for scripts (--json). Secrets are
 * never shown, only whether they are set (the group secret not even
 * that).
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fs/store/codec.h"
#include "fs/store/peer.h"
#include "fs/vfs/hooks.h"
#include "meta/meta.h"
#include "meta/meta_dump.h"
#include "meta/meta_group.h"
#include "meta/meta_server.h"
#include "meta/meta_trash.h"
#include "meta/meta_volume.h"
#include "tools/cli.h"

static const char usage[] =
    "usage: granary status META_URL [--json]\n"
    "\n"
    "Show the settings of the volume at META_URL (S3 keys only as set or\n"
    "not set; whether it is encrypted; whether it was restored by 'granary\n"
    "load'), the clients that have it mounted, the live members of its\n"
    "cache groups (node, address, cache size, health: whether it answers a\n"
    "signed request, last heartbeat), its usage,\n"
    "and the redis server that holds it (version, the master in use,\n"
    "memory, persistence). A server that may evict keys, keeps nothing on\n"
    "disk or is nearly full gets a warning on stderr.\n"
    "\n"
    "  --json       one JSON object instead of text\n"
    "  -h, --help   show this help\n";

static const struct option options[] = {
    {"json", no_argument, NULL, 'j'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static const char *set_or_not(const char *secret)
{
	return secret[0] ? "(set)" : "(not set)";
}

static const char *compress_name(uint32_t c)
{
	switch (c) {
	case CODEC_NONE:
		return "none";
	case CODEC_LZ4:
		return "lz4";
	default:
		return "unknown";
	}
}

static int by_sid(const void *a, const void *b)
{
	const struct meta_session *x = a, *y = b;

	return x->sid < y->sid ? -1 : x->sid > y->sid;
}

static void format_time(int64_t t, char *buf, size_t cap)
{
	time_t tt = (time_t)t;
	struct tm tm;

	if (t <= 0 || !localtime_r(&tt, &tm) ||
	    !strftime(buf, cap, "%Y-%m-%d %H:%M:%S %z", &tm))
		snprintf(buf, cap, "-");
}

/* How long ago t was; " (stale)" after it for a session dead to the TTL. */
static void format_age(int64_t now, int64_t t, int stale, char *buf, size_t cap)
{
	int64_t d = now - t;

	if (t <= 0)
		snprintf(buf, cap, "never");
	else if (d < 0)
		snprintf(buf, cap, "now");
	else if (d < 120)
		snprintf(buf, cap, "%llds ago", (long long)d);
	else if (d < 7200)
		snprintf(buf, cap, "%lldm ago", (long long)(d / 60));
	else if (d < 2 * 86400)
		snprintf(buf, cap, "%lldh ago", (long long)(d / 3600));
	else
		snprintf(buf, cap, "%lldd ago", (long long)(d / 86400));
	if (stale) {
		size_t len = strlen(buf);
		snprintf(buf + len, cap - len, " (stale)");
	}
}

/* ---- text -------------------------------------------------------------- */

/* The redis server's lines (r NULL: it could not tell). */
static void print_server(const struct meta_server *r)
{
	char a[64], b[64];

	if (!r) {
		printf("%-14s%s\n", "redis:", "(cannot tell)");
		return;
	}
	printf("%-14s%s at %s", "redis:", r->version, r->addr);
	if (r->master[0])
		printf(" (master '%s' of the sentinels)", r->master);
	printf(", %d replica%s\n", r->replicas, r->replicas == 1 ? "" : "s");
	cli_format_size(r->used_memory, a, sizeof(a));
	if (r->maxmemory) {
		cli_format_size(r->maxmemory, b, sizeof(b));
		printf("%-14s%s used of maxmemory %s (%d%%), policy %s\n",
		       "redis memory:", a, b,
		       (int)(r->used_memory * 100 / r->maxmemory), r->policy);
	} else {
		printf("%-14s%s used, no maxmemory, policy %s\n",
		       "redis memory:", a, r->policy);
	}
	format_time(r->rdb_last_save, b, sizeof(b));
	printf("%-14sAOF %s", "redis disk:", r->aof ? "on" : "off");
	if (r->aof)
		printf(" (last write %s)", r->aof_status);
	if (!r->config)
		printf(", RDB save points unknown (CONFIG refused)");
	else if (r->save[0])
		printf(", RDB save points '%s'", r->save);
	else
		printf(", no RDB save points");
	printf(", last RDB save %s (%s)\n", b, r->rdb_status);
	if (r->wait)
		printf("%-14seach change waits for %d replica%s (?wait=)\n",
		       "no-loss mode:", r->wait, r->wait == 1 ? "" : "s");
}

static void print_text(const struct meta_volume *v, const struct meta_usage *u,
		       const struct meta_backup *bk,
		       const struct meta_server *r,
		       const struct meta_trash_usage *tu,
		       const struct meta_session *s, size_t n)
{
	char a[64], b[64];
	int64_t now = (int64_t)time(NULL);

#define LINE(key, ...)                                                         \
	do {                                                                   \
		printf("%-14s", key ":");                                      \
		printf(__VA_ARGS__);                                           \
		putchar('\n');                                                 \
	} while (0)
	LINE("volume", "%s", v->name);
	LINE("uuid", "%s", v->uuid);
	LINE("storage", "%s", v->storage);
	LINE("access key", "%s", set_or_not(v->access_key));
	LINE("secret key", "%s", set_or_not(v->secret_key));
	cli_format_size(v->block_size, a, sizeof(a));
	LINE("block size", "%s", a);
	LINE("compression", "%s", compress_name(v->compress));
	LINE("encryption", "%s",
	     v->crypt[0] ? "on (AES-256-GCM, objects and metadata backups)"
			 : "off");
	if (v->capacity) {
		cli_format_size(v->capacity, a, sizeof(a));
		LINE("capacity", "%s", a);
	} else {
		LINE("capacity", "unlimited");
	}
	format_time(v->created, a, sizeof(a));
	LINE("created", "%s", a);
	LINE("format", "%u", v->format_version);
	if (v->restore_id[0])
		LINE("restored",
		     "by a load (restore %s; ids from slice %llu, "
		     "inode %llu)",
		     v->restore_id, (unsigned long long)v->slice_floor,
		     (unsigned long long)v->inode_floor);
	cli_format_size(u->used_bytes, a, sizeof(a));
	LINE("used", "%s (%llu bytes)", a, (unsigned long long)u->used_bytes);
	LINE("inodes", "%llu", (unsigned long long)u->inodes);
	/* part of "used" until purged */
	cli_format_size(tu->bytes, a, sizeof(a));
	if (v->trash_days)
		snprintf(b, sizeof(b), "kept %u day%s", v->trash_days,
			 v->trash_days == 1 ? "" : "s");
	else
		snprintf(b, sizeof(b), "off");
	LINE("trash", "%s in %llu entr%s (%s; counted in used)", a,
	     (unsigned long long)tu->entries, tu->entries == 1 ? "y" : "ies",
	     b);
	if (bk->name[0]) {
		format_time(bk->time, a, sizeof(a));
		cli_format_size(bk->bytes, b, sizeof(b));
		LINE("meta backup", "%s, %s, %llu inodes, by %s (session %llu)",
		     a, b, (unsigned long long)bk->inodes, bk->host,
		     (unsigned long long)bk->sid);
	} else {
		LINE("meta backup", "none yet");
	}
	if (bk->failed) {
		format_time(bk->failed, a, sizeof(a));
		LINE("backup failed", "%s: %s", a, bk->error);
	}
#undef LINE
	print_server(r);
	printf("%-14s%zu\n", "sessions:", n);
	if (!n)
		return;

	/* Column widths from the data, so long host names stay aligned;
	 * hosts and mount points as ls -b shows names (cli_escape) */
	int wsid = 3, whost = 4, wpid = 3, wmp = 10, wmet = 7;
	char **host = calloc(2 * n, sizeof(*host)), **mp = host + n;
	for (size_t i = 0; host && i < n; i++) {
		host[i] = cli_escape(s[i].host);
		mp[i] = cli_escape(s[i].mountpoint);
	}
	for (size_t i = 0; i < n; i++) {
		const char *h = host && host[i] ? host[i] : "?";
		const char *m = host && mp[i] ? mp[i] : "?";
		int l = snprintf(a, sizeof(a), "%llu",
				 (unsigned long long)s[i].sid);
		wsid = l > wsid ? l : wsid;
		l = (int)strlen(h);
		whost = l > whost ? l : whost;
		l = snprintf(a, sizeof(a), "%lld", (long long)s[i].pid);
		wpid = l > wpid ? l : wpid;
		l = (int)strlen(m);
		wmp = l > wmp ? l : wmp;
		l = (int)strlen(s[i].metrics);
		wmet = l > wmet ? l : wmet;
	}
	printf("\n%-*s  %-*s  %*s  %-*s  %-16s  %-19s  %-*s  %s\n", wsid, "SID",
	       whost, "HOST", wpid, "PID", wmp, "MOUNTPOINT", "HEARTBEAT",
	       "STARTED", wmet, "METRICS",
	       "STAGED (writeback, not in the store yet)");
	for (size_t i = 0; i < n; i++) {
		char staged[64] = "-", sz[32];
		format_age(now, s[i].heartbeat, s[i].stale, a, sizeof(a));
		format_time(s[i].started, b, sizeof(b));
		if (s[i].staged_packs) {
			cli_format_size(s[i].staged_bytes, sz, sizeof(sz));
			snprintf(staged, sizeof(staged), "%llu objects, %s",
				 (unsigned long long)s[i].staged_packs, sz);
		}
		printf("%-*llu  %-*s  %*lld  %-*s  %-16s  %-19s  %-*s  %s\n",
		       wsid, (unsigned long long)s[i].sid, whost,
		       host && host[i] ? host[i] : "?", wpid,
		       (long long)s[i].pid, wmp, host && mp[i] ? mp[i] : "?", a,
		       b, wmet, s[i].metrics[0] ? s[i].metrics : "-", staged);
	}
	for (size_t i = 0; host && i < 2 * n; i++)
		free(host[i]);
	free(host);
}

/* ---- cache groups ------------------------------------------------------ */

/* A cache group and its live members (meta_group_members): members of
 * dead sessions are not listed; their sessions show as stale. */
struct group_view {
	char *name;
	struct meta_group_member *m;
	int *health; /* per member: its answer to a probe (probe_groups) */
	size_t n;
};

static void groups_free(struct group_view *g, size_t n)
{
	for (size_t i = 0; g && i < n; i++) {
		free(g[i].name);
		free(g[i].m);
		free(g[i].health);
	}
	free(g);
}

/*
 * Health: each serving member is asked, as a member would ask it, whether
 * it holds a key no cache holds (a signed HEAD, peer.h): 404 means it
 * answers and shares the group's secret. Members are asked at once, each
 * bounded by the client's deadlines (200 ms to connect, 1 s in all).
 */
#define PROBE_KEY  "granary/status-probe"
#define PROBE_NONE (-1001) /* serves nothing: not asked */
#define PROBE_SKIP (-1002) /* not asked: no secret */

struct probe {
	struct peer_client *c;
	const char *addr;
	int *res;
	pthread_t th;
	int started;
};

static void *probe_main(void *arg)
{
	struct probe *p = arg;
	*p->res = peer_has(p->c, p->addr, PROBE_KEY);
	return NULL;
}

static void probe_groups(struct meta *m, struct group_view *g, size_t ng)
{
	unsigned char secret[META_GROUP_SECRET];
	struct peer_client *c = NULL;
	struct probe *p;
	size_t total = 0, k = 0;
	int skip = 0;

	for (size_t i = 0; i < ng; i++) {
		g[i].health = calloc(g[i].n ? g[i].n : 1, sizeof(int));
		for (size_t j = 0; g[i].health && j < g[i].n; j++)
			total += g[i].m[j].addr[0] != 0;
	}
	/* there are members, so the volume has its secret (no write) */
	if (total && meta_group_secret(m, secret) == 0) {
		struct peer_client_opts o = {.secret = secret, .node = 0};
		if (peer_client_open(&o, &c))
			c = NULL;
	}
	explicit_bzero(secret, sizeof(secret));
	skip = !c;
	p = calloc(total ? total : 1, sizeof(*p));
	for (size_t i = 0; i < ng; i++)
		for (size_t j = 0; g[i].health && j < g[i].n; j++) {
			int *res = &g[i].health[j];
			*res = !g[i].m[j].addr[0] ? PROBE_NONE
			       : skip || !p	  ? PROBE_SKIP
						  : 0;
			if (*res)
				continue;
			p[k] = (struct probe){
			    .c = c, .addr = g[i].m[j].addr, .res = res};
			p[k].started =
			    !pthread_create(&p[k].th, NULL, probe_main, &p[k]);
			if (!p[k].started)
				probe_main(&p[k]);
			k++;
		}
	for (size_t i = 0; i < k; i++)
		if (p[i].started)
			pthread_join(p[i].th, NULL);
	free(p);
	peer_client_close(c);
}

/* A member's health in words (text) or NULL (JSON null: not asked). */
static const char *health_name(const struct group_view *g, size_t j)
{
	int r = g->health ? g->health[j] : PROBE_SKIP;
	switch (r) {
	case 0:
	case ENOENT:
		return "ok";
	case PROBE_NONE:
	case PROBE_SKIP:
		return NULL;
	case PEER_EDOWN:
		return "down";
	case PEER_EAUTH:
		return "refuses"; /* another secret: not this group's */
	default:
		return "bad answer";
	}
}

/* Every group that has a record, by name, with its live members. */
static int groups_read(struct meta *m, struct group_view **out, size_t *n)
{
	struct group_view *g = NULL;
	char **names;
	size_t nn;
	int err = meta_group_names(m, &names, &nn);

	*out = NULL;
	*n = 0;
	if (err || !nn)
		return err;
	g = calloc(nn, sizeof(*g));
	if (!g) {
		meta_group_names_free(names, nn);
		return ENOMEM;
	}
	for (size_t i = 0; i < nn && !err; i++) {
		g[i].name = names[i];
		names[i] = NULL;
		err = meta_group_members(m, g[i].name, &g[i].m, &g[i].n);
	}
	meta_group_names_free(names, nn);
	if (err) {
		groups_free(g, nn);
		return err;
	}
	*out = g;
	*n = nn;
	return 0;
}

/* The host of session sid among s (n of them), NULL when not there. */
static const char *host_of(const struct meta_session *s, size_t n, uint64_t sid)
{
	for (size_t i = 0; i < n; i++)
		if (s[i].sid == sid)
			return s[i].host;
	return NULL;
}

/* A member's cache: its size, or "takes only" (weight 0: it serves and
 * owns nothing). */
static void format_cache(uint64_t weight, char *buf, size_t cap)
{
	if (weight)
		cli_format_size(weight, buf, cap);
	else
		snprintf(buf, cap, "takes only");
}

static void print_groups_text(const struct group_view *g, size_t ng,
			      const struct meta_session *s, size_t n)
{
	int64_t now = (int64_t)time(NULL);
	int wg = 5, wsid = 3, wh = 4, wa = 7;
	char a[64], b[64], c[64];

	if (!ng) {
		printf("\n%-14snone\n", "cache groups:");
		return;
	}
	printf("\n%-14s%zu\n", "cache groups:", ng);
	/* column widths from the data; names, hosts and addresses as ls -b
	 * shows names (cli_escape) */
	for (size_t i = 0; i < ng; i++) {
		int l = (int)strlen(g[i].name);
		wg = l > wg ? l : wg;
		for (size_t j = 0; j < g[i].n; j++) {
			const struct meta_group_member *e = &g[i].m[j];
			const char *h = host_of(s, n, e->sid);
			char *x = cli_escape(h ? h : "?");
			char *y = cli_escape(e->addr[0] ? e->addr : "-");
			l = snprintf(a, sizeof(a), "%llu",
				     (unsigned long long)e->sid);
			wsid = l > wsid ? l : wsid;
			l = x ? (int)strlen(x) : 1;
			wh = l > wh ? l : wh;
			l = y ? (int)strlen(y) : 1;
			wa = l > wa ? l : wa;
			free(x);
			free(y);
		}
	}
	printf("\n%-*s  %-16s  %-*s  %-*s  %-*s  %-10s  %-10s  %-25s  %s\n", wg,
	       "GROUP", "NODE", wsid, "SID", wh, "HOST", wa, "ADDRESS", "CACHE",
	       "HEALTH", "JOINED", "HEARTBEAT");
	for (size_t i = 0; i < ng; i++) {
		if (!g[i].n)
			printf("%-*s  (no live member)\n", wg, g[i].name);
		for (size_t j = 0; j < g[i].n; j++) {
			const struct meta_group_member *e = &g[i].m[j];
			const char *h = host_of(s, n, e->sid);
			char *x = cli_escape(h ? h : "?");
			char *y = cli_escape(e->addr[0] ? e->addr : "-");
			format_cache(e->weight, a, sizeof(a));
			format_time(e->joined, b, sizeof(b));
			format_age(now, e->heartbeat, 0, c, sizeof(c));
			const char *hl = health_name(&g[i], j);
			printf("%-*s  %016llx  %-*llu  %-*s  %-*s  %-10s  "
			       "%-10s  %-25s  %s\n",
			       wg, g[i].name, (unsigned long long)e->node, wsid,
			       (unsigned long long)e->sid, wh, x ? x : "?", wa,
			       y ? y : "?", a, hl ? hl : "-", b, c);
			free(x);
			free(y);
		}
	}
}

/* ---- JSON -------------------------------------------------------------- */

static void print_json_server(const struct meta_server *r)
{
	int risks;

	if (!r) {
		printf("  \"redis\": null,\n");
		return;
	}
	risks = meta_server_risks(r);
	printf("  \"redis\": {\"version\": ");
	cli_json_string(stdout, r->version);
	printf(", \"address\": ");
	cli_json_string(stdout, r->addr);
	printf(", \"sentinel_master\": ");
	if (r->master[0])
		cli_json_string(stdout, r->master);
	else
		printf("null");
	printf(",\n    \"replicas\": %d, \"wait_replicas\": %d, "
	       "\"used_memory\": %llu, \"maxmemory\": %llu, "
	       "\"maxmemory_policy\": ",
	       r->replicas, r->wait, (unsigned long long)r->used_memory,
	       (unsigned long long)r->maxmemory);
	cli_json_string(stdout, r->policy);
	printf(",\n    \"config_readable\": %s, \"aof\": %s, "
	       "\"aof_last_write_status\": ",
	       r->config ? "true" : "false", r->aof ? "true" : "false");
	cli_json_string(stdout, r->aof_status);
	printf(", \"save\": ");
	if (r->config)
		cli_json_string(stdout, r->save);
	else
		printf("null");
	printf(",\n    \"rdb_last_save\": %lld, \"rdb_last_bgsave_status\": ",
	       (long long)r->rdb_last_save);
	cli_json_string(stdout, r->rdb_status);
	printf(",\n    \"warnings\": [");
	printf("%s", risks & META_RISK_EVICT ? "\"evicts\"" : "");
	printf("%s%s",
	       risks & META_RISK_EVICT && risks & META_RISK_NOPERSIST ? ", "
								      : "",
	       risks & META_RISK_NOPERSIST ? "\"no_persistence\"" : "");
	printf("%s%s",
	       risks & META_RISK_FULL &&
		       risks & (META_RISK_EVICT | META_RISK_NOPERSIST)
		   ? ", "
		   : "",
	       risks & META_RISK_FULL ? "\"nearly_full\"" : "");
	printf("]},\n");
}

/* The groups as the JSON array "cache_groups" (node ids as 16 hex
 * digits: a JSON number would lose the low bits of most of them). */
static void print_json_groups(const struct group_view *g, size_t ng,
			      const struct meta_session *s, size_t n)
{
	printf("  \"cache_groups\": [");
	for (size_t i = 0; i < ng; i++) {
		printf("%s\n    {\"name\": ", i ? "," : "");
		cli_json_string(stdout, g[i].name);
		printf(", \"members\": [");
		for (size_t j = 0; j < g[i].n; j++) {
			const struct meta_group_member *e = &g[i].m[j];
			const char *h = host_of(s, n, e->sid);
			printf(
			    "%s\n      {\"node\": \"%016llx\", \"sid\": %llu, "
			    "\"host\": ",
			    j ? "," : "", (unsigned long long)e->node,
			    (unsigned long long)e->sid);
			if (h)
				cli_json_string(stdout, h);
			else
				printf("null");
			printf(", \"address\": ");
			if (e->addr[0])
				cli_json_string(stdout, e->addr);
			else
				printf("null");
			printf(", \"cache_bytes\": %llu, \"health\": ",
			       (unsigned long long)e->weight);
			if (health_name(&g[i], j))
				cli_json_string(stdout, health_name(&g[i], j));
			else
				printf("null");
			printf(", \"joined\": %lld, \"heartbeat\": %lld}",
			       (long long)e->joined, (long long)e->heartbeat);
		}
		printf("%s]}", g[i].n ? "\n    " : "");
	}
	printf("%s]\n", ng ? "\n  " : "");
}

static void print_json(const char *url, const struct meta_volume *v,
		       const struct meta_usage *u, const struct meta_backup *bk,
		       const struct meta_server *r,
		       const struct meta_trash_usage *tu,
		       const struct meta_session *s, size_t n,
		       const struct group_view *g, size_t ng)
{
	printf("{\n  \"meta_url\": ");
	cli_json_string(stdout, url);
	printf(",\n  \"volume\": {\n    \"name\": ");
	cli_json_string(stdout, v->name);
	printf(",\n    \"uuid\": ");
	cli_json_string(stdout, v->uuid);
	printf(",\n    \"storage\": ");
	cli_json_string(stdout, v->storage);
	printf(",\n    \"access_key\": \"%s\",\n    \"secret_key\": \"%s\",\n",
	       set_or_not(v->access_key), set_or_not(v->secret_key));
	printf("    \"block_size\": %u,\n    \"compress\": \"%s\",\n"
	       "    \"encrypted\": %s,\n"
	       "    \"capacity\": %llu,\n    \"format_version\": %u,\n"
	       "    \"created\": %lld,\n    \"trash_days\": %u,\n",
	       v->block_size, compress_name(v->compress),
	       v->crypt[0] ? "true" : "false", (unsigned long long)v->capacity,
	       v->format_version, (long long)v->created, v->trash_days);
	printf("    \"restore_id\": ");
	if (v->restore_id[0])
		cli_json_string(stdout, v->restore_id);
	else
		printf("null");
	printf(", \"slice_floor\": %llu, \"inode_floor\": %llu\n  },\n",
	       (unsigned long long)v->slice_floor,
	       (unsigned long long)v->inode_floor);
	printf("  \"usage\": {\"used_bytes\": %llu, \"inodes\": %llu, "
	       "\"trash_bytes\": %llu, \"trash_entries\": %llu},\n",
	       (unsigned long long)u->used_bytes, (unsigned long long)u->inodes,
	       (unsigned long long)tu->bytes, (unsigned long long)tu->entries);
	printf("  \"meta_backup\": {\"name\": ");
	cli_json_string(stdout, bk->name);
	printf(", \"time\": %lld, \"sid\": %llu, \"host\": ",
	       (long long)bk->time, (unsigned long long)bk->sid);
	cli_json_string(stdout, bk->host);
	printf(", \"bytes\": %llu, \"inodes\": %llu, \"seconds\": %.3f, "
	       "\"failed\": %lld, \"error\": ",
	       (unsigned long long)bk->bytes, (unsigned long long)bk->inodes,
	       bk->seconds, (long long)bk->failed);
	cli_json_string(stdout, bk->error);
	printf("},\n");
	print_json_server(r);
	printf("  \"sessions\": [");
	for (size_t i = 0; i < n; i++) {
		printf("%s\n    {\"sid\": %llu, \"host\": ", i ? "," : "",
		       (unsigned long long)s[i].sid);
		cli_json_string(stdout, s[i].host);
		printf(", \"pid\": %lld, \"mountpoint\": ",
		       (long long)s[i].pid);
		cli_json_string(stdout, s[i].mountpoint);
		printf(", \"metrics\": ");
		if (s[i].metrics[0])
			cli_json_string(stdout, s[i].metrics);
		else
			printf("null");
		printf(", \"started\": %lld, \"heartbeat\": %lld, "
		       "\"stale\": %s, \"staged_packs\": %llu, "
		       "\"staged_bytes\": %llu}",
		       (long long)s[i].started, (long long)s[i].heartbeat,
		       s[i].stale ? "true" : "false",
		       (unsigned long long)s[i].staged_packs,
		       (unsigned long long)s[i].staged_bytes);
	}
	printf("%s],\n", n ? "\n  " : "");
	print_json_groups(g, ng, s, n);
	printf("}\n");
}

/* ---- the command ------------------------------------------------------- */

int cmd_status(int argc, char **argv)
{
	/* stale: dead to the clients' TTL (the test build's, from its hook) */
	struct meta_opts mo = {.pool_size = 1,
			       .read_only = 1,
			       .session_ttl = (int)hooks_session_ttl()};
	struct meta_volume v;
	struct meta_usage u;
	struct meta_server srv, *r = &srv;
	struct meta_trash_usage tu;
	struct meta_session *s = NULL;
	struct group_view *g = NULL;
	struct meta *m = NULL;
	char shown[1024];
	size_t n = 0, ng = 0;
	int c, err, json = 0, ret = CLI_EXIT_FAIL;

	while ((c = getopt_long(argc, argv, ":h", options, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = 1;
			break;
		case 'h':
			return cli_usage(usage, CLI_EXIT_OK);
		default:
			return cli_bad_option(c, argv, usage);
		}
	}
	if (cli_one_operand(argc, "META_URL", usage))
		return CLI_EXIT_USAGE;
	if (cli_volume_open(argv[optind], &mo, &m, &v, shown, sizeof shown))
		return CLI_EXIT_FAIL;
	err = meta_usage(m, &u);
	if (err) {
		cli_error("cannot read the usage of volume '%s': %s", v.name,
			  gr_strerror(err));
		goto close_meta;
	}
	err = meta_trash_usage(m, &tu);
	if (err) {
		cli_error("cannot read the trash of volume '%s': %s", v.name,
			  gr_strerror(err));
		goto close_meta;
	}
	err = meta_list_sessions(m, &s, &n);
	if (err) {
		cli_error("cannot list the sessions of volume '%s': %s", v.name,
			  gr_strerror(err));
		goto close_meta;
	}
	if (n > 1)
		qsort(s, n, sizeof(*s), by_sid);
	err = groups_read(m, &g, &ng);
	if (err) {
		cli_error("cannot list the cache groups of volume '%s': %s",
			  v.name, gr_strerror(err));
		goto free_sessions;
	}
	probe_groups(m, g, ng);
	struct meta_backup bk;
	err = meta_backup_last(m, &bk);
	if (err && err != ENOENT) {
		cli_error("cannot read the metadata backups of volume '%s': %s",
			  v.name, gr_strerror(err));
		goto free_groups;
	}
	err = meta_server_info(m, &srv);
	if (err) {
		cli_error("warning: cannot read the state of redis at '%s': %s",
			  shown, gr_strerror(err));
		r = NULL;
	} else {
		cli_server_warn(&srv, shown);
	}
	if (json) {
		print_json(shown, &v, &u, &bk, r, &tu, s, n, g, ng);
	} else {
		print_text(&v, &u, &bk, r, &tu, s, n);
		print_groups_text(g, ng, s, n);
	}
	ret = CLI_EXIT_OK;
free_groups:
	groups_free(g, ng);
free_sessions:
	free(s);
close_meta:
	meta_close(m);
	return ret;
}
