/*
 * cmd_upgrade.c - `granary upgrade`: rewrite a volume's metadata from an
 * older format version into this granary's, in place, with every client
 * unmounted (meta_upgrade; what changes between versions: meta/SCHEMA.md).
 */
#include <errno.h>
#include <getopt.h>

#include "meta/meta.h"
#include "meta/meta_volume.h"
#include "tools/cli.h"

static const char usage[] =
    "usage: granary upgrade META_URL\n"
    "\n"
    "Rewrite the metadata of the volume at META_URL, written by an older\n"
    "granary, into this granary's format. Unmount the volume on every\n"
    "node first: a client that is still alive makes it refuse. File data\n"
    "is not touched. An interrupted upgrade is finished by running it\n"
    "again; until then no client mounts the volume.\n"
    "\n"
    "  -h, --help   show this help\n";

static const struct option options[] = {
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

int cmd_upgrade(int argc, char **argv)
{
	struct meta *m = NULL;
	char shown[1024];
	uint32_t from = 0;
	uint64_t n = 0;
	int c, err, ret = CLI_EXIT_FAIL;

	while ((c = getopt_long(argc, argv, ":h", options, NULL)) != -1) {
		switch (c) {
		case 'h':
			return cli_usage(usage, CLI_EXIT_OK);
		default:
			return cli_bad_option(c, argv, usage);
		}
	}
	if (cli_one_operand(argc, "META_URL", usage))
		return CLI_EXIT_USAGE;
	if (cli_meta_open(argv[optind], NULL, &m))
		return CLI_EXIT_FAIL;
	meta_url_redact(argv[optind], shown, sizeof(shown));

	err = meta_upgrade(m, &from, &n);
	if (err == META_ENOVOLUME) {
		cli_error("no granary volume in redis at '%s'", shown);
	} else if (err == EBUSY) {
		cli_error("the volume at '%s' is mounted by a live client",
			  shown);
		cli_hint("unmount it on every node ('granary status %s' lists "
			 "them), then run this again",
			 shown);
	} else if (err == META_EVERSION) {
		cli_error("the volume at '%s' has format version %u, newer "
			  "than this granary's %u",
			  shown, from, META_FORMAT_VERSION);
		cli_hint("use a newer granary");
	} else if (err) {
		cli_error("upgrade of the volume at '%s' stopped: %s", shown,
			  gr_strerror(err));
		cli_hint("what was done is kept; run this again to finish");
	} else if (from == META_FORMAT_VERSION) {
		printf("the volume at '%s' has format version %u already\n",
		       shown, from);
		ret = CLI_EXIT_OK;
	} else {
		printf("upgraded the volume at '%s' from format version %u to "
		       "%u (%llu records rewritten)\n",
		       shown, from, META_FORMAT_VERSION, (unsigned long long)n);
		ret = CLI_EXIT_OK;
	}
	meta_close(m);
	return ret;
}
