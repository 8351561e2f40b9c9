/*
 * cmd_stats.c - `granary stats MOUNTPOINT`: the counters of the client
 * serving a mount (GETs and PUTs that reached the store, memory and disk
 * cache hits), read from its virtual xattr "granary.stats".
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#include "tools/cli.h"

static const char usage[] =
    "usage: granary stats MOUNTPOINT [--json]\n"
    "\n"
    "Show the counters of the client serving MOUNTPOINT: requests that\n"
    "reached the object store, memory and disk cache hits and misses.\n"
    "\n"
    "  --json       print them as one JSON object\n"
    "  -h, --help   show this help\n";

static const struct option options[] = {
    {"json", no_argument, NULL, 'j'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* The JSON is flat objects of numbers: print "group.key: value" lines. */
static void print_plain(const char *json)
{
	char group[64] = "", key[64];
	for (const char *p = json; *p; p++) {
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
			snprintf(group, sizeof(group), "%s", key);
			continue;
		}
		int n = (int)strcspn(p, ",}");
		printf("%-12s %-12s %.*s\n", group, key, n, p);
		p += n - 1;
	}
}

int cmd_stats(int argc, char **argv)
{
	int json = 0, c;
	char buf[4096];

	opterr = 0;
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
	if (argc - optind != 1)
		return cli_usage(usage, CLI_EXIT_USAGE);
	const char *mp = argv[optind];
	ssize_t n = getxattr(mp, "granary.stats", buf, sizeof(buf) - 1);
	if (n < 0) {
		int err = errno;
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
		return CLI_EXIT_FAIL;
	}
	buf[n] = '\0';
	if (json)
		fputs(buf, stdout);
	else
		print_plain(buf);
	return CLI_EXIT_OK;
}
