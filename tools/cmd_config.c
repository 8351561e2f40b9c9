/*
 * cmd_config.c - `granary config`: show a volume's settings, or change the
 * ones that may change after format (trash-days today). Mounted clients
 * see a change at once: the scripts that remove files read the setting
 * each time, and the trash's purge at each of its turns.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "meta/meta.h"
#include "meta/meta_trash.h"
#include "meta/meta_volume.h"
#include "tools/cli.h"

static const char usage[] =
    "usage: granary config META_URL [--trash-days N] [--json]\n"
    "\n"
    "Show the settings of the volume at META_URL, or change the ones given.\n"
    "Every mounted client follows a change at once; nothing needs a\n"
    "remount.\n"
    "\n"
    "  --trash-days N   keep removed files and directories N days in the\n"
    "                   trash (0 to 3650). 0 turns the trash off: removal\n"
    "                   frees the space at once, and the clients' next purge\n"
    "                   (within minutes) empties what the trash holds\n"
    "  --json           the settings as one JSON object\n"
    "  -h, --help       show this help\n"
    "\n"
    "The other settings are fixed at format (granary status shows them).\n";

enum { OPT_TRASH_DAYS = 256 };

static const struct option options[] = {
    {"trash-days", required_argument, NULL, OPT_TRASH_DAYS},
    {"json", no_argument, NULL, 'j'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static void print_text(const struct meta_volume *v)
{
	char cap[64] = "unlimited";

	if (v->capacity)
		cli_format_size(v->capacity, cap, sizeof cap);
	printf("%-12s %s\n", "volume:", v->name);
	printf("%-12s %u%s\n", "trash-days:", v->trash_days,
	       v->trash_days ? "" : " (no trash)");
	printf("%-12s %s (fixed at format)\n", "capacity:", cap);
}

static void print_json(const struct meta_volume *v)
{
	printf("{\"name\": ");
	cli_json_string(stdout, v->name);
	printf(", \"trash_days\": %u, \"capacity\": %llu}\n", v->trash_days,
	       (unsigned long long)v->capacity);
}

/* A ".trash" at the root made before the trash existed keeps the trash
 * from being made: removals stay final. Say so when turning it on. */
static void warn_foreign_trash(struct meta *m)
{
	uint64_t found, t = 0;

	if (meta_lookup(m, META_ROOT_INO, META_TRASH, &found, NULL) ||
	    meta_trash_ino(m, &t) || t == found)
		return;
	cli_error("warning: the volume's root holds a '%s' of its own: "
		  "removed files cannot go to the trash, removal stays final",
		  META_TRASH);
	cli_hint("rename it (mv MOUNT/%s MOUNT/trash.old) and the trash is "
		 "made at the next removal",
		 META_TRASH);
}

int cmd_config(int argc, char **argv)
{
	struct meta_volume v;
	struct meta *m;
	char shown[1024];
	uint32_t days = 0;
	int c, err, json = 0, set_days = 0, ret = CLI_EXIT_FAIL;

	while ((c = getopt_long(argc, argv, ":h", options, NULL)) != -1) {
		switch (c) {
		case OPT_TRASH_DAYS:
			if (cli_trash_days_arg(optarg, &days))
				return CLI_EXIT_USAGE;
			set_days = 1;
			break;
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
	if (cli_volume_open(argv[optind], NULL, &m, &v, shown, sizeof shown))
		return CLI_EXIT_FAIL;
	if (set_days) {
		err = meta_volume_set(m, "trash_days", days);
		if (err) {
			cli_error("cannot change the settings of volume '%s': "
				  "%s",
				  v.name, gr_strerror(err));
			goto close_meta;
		}
		if (days && !v.trash_days)
			warn_foreign_trash(m);
		v.trash_days = days;
	}
	if (json)
		print_json(&v);
	else
		print_text(&v);
	ret = CLI_EXIT_OK;
close_meta:
	meta_close(m);
	return ret;
}
