/*
 * cmd_status.c - `granary status`: a volume's settings, the clients that
 * have it mounted and what it holds, for people (aligned lines and a
 * table) or for scripts (--json). Secrets are never shown, only whether
 * they are set.
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fs/store/codec.h"
#include "meta/meta.h"
#include "meta/meta_trash.h"
#include "meta/meta_volume.h"
#include "tools/cli.h"

static const char usage[] =
    "usage: granary status META_URL [--json]\n"
    "\n"
    "Show the settings of the volume at META_URL (S3 keys only as set or\n"
    "not set), the clients that have it mounted, and its usage.\n"
    "\n"
    "  --json       one JSON object instead of text\n"
    "  -h, --help   show this help\n";

static const struct option options[] = {
    {"json", no_argument, NULL, 'j'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* meta's default: a session silent this long is dead (struct meta_opts). */
#define SESSION_TTL 60

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

static void format_age(int64_t now, int64_t t, char *buf, size_t cap)
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
	if (t > 0 && d > SESSION_TTL) {
		size_t len = strlen(buf);
		snprintf(buf + len, cap - len, " (stale)");
	}
}

/* ---- text -------------------------------------------------------------- */

static void print_text(const struct meta_volume *v, const struct meta_usage *u,
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
	if (v->capacity) {
		cli_format_size(v->capacity, a, sizeof(a));
		LINE("capacity", "%s", a);
	} else {
		LINE("capacity", "unlimited");
	}
	format_time(v->created, a, sizeof(a));
	LINE("created", "%s", a);
	LINE("format", "%u", v->format_version);
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
	LINE("trash", "%s in %llu entries (%s; counted in used)", a,
	     (unsigned long long)tu->entries, b);
	LINE("sessions", "%zu", n);
#undef LINE
	if (!n)
		return;

	/* Column widths from the data, so long host names stay aligned. */
	int wsid = 3, whost = 4, wpid = 3, wmp = 10;
	for (size_t i = 0; i < n; i++) {
		int l = snprintf(a, sizeof(a), "%llu",
				 (unsigned long long)s[i].sid);
		wsid = l > wsid ? l : wsid;
		l = (int)strlen(s[i].host);
		whost = l > whost ? l : whost;
		l = snprintf(a, sizeof(a), "%lld", (long long)s[i].pid);
		wpid = l > wpid ? l : wpid;
		l = (int)strlen(s[i].mountpoint);
		wmp = l > wmp ? l : wmp;
	}
	printf("\n%-*s  %-*s  %*s  %-*s  %-16s  %-19s  %s\n", wsid, "SID",
	       whost, "HOST", wpid, "PID", wmp, "MOUNTPOINT", "HEARTBEAT",
	       "STARTED", "STAGED (writeback, not in the store yet)");
	for (size_t i = 0; i < n; i++) {
		char staged[64] = "-", sz[32];
		format_age(now, s[i].heartbeat, a, sizeof(a));
		format_time(s[i].started, b, sizeof(b));
		if (s[i].staged_packs) {
			cli_format_size(s[i].staged_bytes, sz, sizeof(sz));
			snprintf(staged, sizeof(staged), "%llu objects, %s",
				 (unsigned long long)s[i].staged_packs, sz);
		}
		printf("%-*llu  %-*s  %*lld  %-*s  %-16s  %-19s  %s\n", wsid,
		       (unsigned long long)s[i].sid, whost, s[i].host, wpid,
		       (long long)s[i].pid, wmp, s[i].mountpoint, a, b, staged);
	}
}

/* ---- JSON -------------------------------------------------------------- */

static void print_json(const char *url, const struct meta_volume *v,
		       const struct meta_usage *u,
		       const struct meta_trash_usage *tu,
		       const struct meta_session *s, size_t n)
{
	int64_t now = (int64_t)time(NULL);

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
	       "    \"capacity\": %llu,\n    \"format_version\": %u,\n"
	       "    \"created\": %lld,\n    \"trash_days\": %u\n  },\n",
	       v->block_size, compress_name(v->compress),
	       (unsigned long long)v->capacity, v->format_version,
	       (long long)v->created, v->trash_days);
	printf("  \"usage\": {\"used_bytes\": %llu, \"inodes\": %llu, "
	       "\"trash_bytes\": %llu, \"trash_entries\": %llu},\n",
	       (unsigned long long)u->used_bytes, (unsigned long long)u->inodes,
	       (unsigned long long)tu->bytes, (unsigned long long)tu->entries);
	printf("  \"sessions\": [");
	for (size_t i = 0; i < n; i++) {
		printf("%s\n    {\"sid\": %llu, \"host\": ", i ? "," : "",
		       (unsigned long long)s[i].sid);
		cli_json_string(stdout, s[i].host);
		printf(", \"pid\": %lld, \"mountpoint\": ",
		       (long long)s[i].pid);
		cli_json_string(stdout, s[i].mountpoint);
		printf(", \"started\": %lld, \"heartbeat\": %lld, "
		       "\"stale\": %s, \"staged_packs\": %llu, "
		       "\"staged_bytes\": %llu}",
		       (long long)s[i].started, (long long)s[i].heartbeat,
		       now - s[i].heartbeat > SESSION_TTL ? "true" : "false",
		       (unsigned long long)s[i].staged_packs,
		       (unsigned long long)s[i].staged_bytes);
	}
	printf("%s]\n}\n", n ? "\n  " : "");
}

/* ---- the command ------------------------------------------------------- */

int cmd_status(int argc, char **argv)
{
	struct meta_opts mo = {.pool_size = 1, .read_only = 1};
	struct meta_volume v;
	struct meta_usage u;
	struct meta_trash_usage tu;
	struct meta_session *s = NULL;
	struct meta *m = NULL;
	char shown[1024];
	size_t n = 0;
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
	if (json)
		print_json(shown, &v, &u, &tu, s, n);
	else
		print_text(&v, &u, &tu, s, n);
	ret = CLI_EXIT_OK;
	free(s);
close_meta:
	meta_close(m);
	return ret;
}
