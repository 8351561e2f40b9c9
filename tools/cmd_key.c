/*
 * cmd_key.c - `granary key change`: the volume key of an encrypted volume
 * wrapped by a new secret in place of the old one. Nothing in the store
 * changes (the objects stay sealed with the same volume key), so it is
 * instant; mounted clients keep the volume key they unwrapped and need
 * the new secret only at their next mount.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "fs/store/crypt.h"
#include "meta/meta.h"
#include "meta/meta_volume.h"
#include "tools/cli.h"

static const char usage[] =
    "usage: granary key change META_URL --old FILE --new FILE\n"
    "\n"
    "Change the secret an encrypted volume is opened with: the volume key\n"
    "is unwrapped with the secret in the --old key file and wrapped again\n"
    "with the one in the --new key file (at least 8 bytes; a trailing\n"
    "newline is dropped). No object is rewritten; clients mounted now\n"
    "keep working, and mount with the new key file from then on. The old\n"
    "key file no longer opens the volume (a copy of the old settings, such\n"
    "as an old dump, still holds the key wrapped by it).\n"
    "\n"
    "  --old FILE    the key file the volume opens with now\n"
    "  --new FILE    the key file it is to open with\n"
    "  -h, --help    show this help\n";

static const struct option options[] = {
    {"old", required_argument, NULL, 'o'},
    {"new", required_argument, NULL, 'n'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* The secret of a key file: 0, or an error printed. The environment is
 * no fallback here: both secrets must be named. */
static int load(const char *path, void **s, size_t *n)
{
	int err = cli_secret_load(path, s, n);
	if (!err && !*s)
		err = CRYPT_ENOKEY; /* cannot be: path is set */
	return err;
}

static int key_change(int argc, char **argv)
{
	const char *oldf = NULL, *newf = NULL;
	void *olds = NULL, *news = NULL;
	size_t oldn = 0, newn = 0;
	struct meta_volume v;
	struct meta *m;
	char shown[1024], rec[CRYPT_RECORD_MAX];
	int c, err, ret = CLI_EXIT_FAIL;

	while ((c = getopt_long(argc, argv, ":h", options, NULL)) != -1) {
		switch (c) {
		case 'o':
			oldf = optarg;
			break;
		case 'n':
			newf = optarg;
			break;
		case 'h':
			return cli_usage(usage, CLI_EXIT_OK);
		default:
			return cli_bad_option(c, argv, usage);
		}
	}
	if (cli_one_operand(argc, "META_URL", usage))
		return CLI_EXIT_USAGE;
	if (!oldf || !newf) {
		cli_error("--old and --new are required");
		return cli_usage(usage, CLI_EXIT_USAGE);
	}
	if (load(oldf, &olds, &oldn) || load(newf, &news, &newn))
		goto free_secrets;
	if (cli_volume_open(argv[optind], NULL, &m, &v, shown, sizeof shown))
		goto free_secrets;
	if (!v.crypt[0]) {
		cli_error("volume '%s' is not encrypted: it has no key to "
			  "change",
			  v.name);
		cli_hint("a volume is encrypted at format (--encrypt); copy "
			 "the data into a new one to encrypt it");
		goto close_meta;
	}
	err = crypt_record_rewrap(v.crypt, olds, oldn, news, newn, v.uuid, rec);
	if (err) {
		cli_error("volume '%s': %s", v.name,
			  err == CRYPT_EKEY ? "the --old key file does not "
					      "open this volume"
			  : err == EINVAL ? "its key record (setting 'crypt') "
					    "is damaged"
					  : gr_strerror(err));
		goto close_meta;
	}
	err = meta_volume_set_crypt(m, v.crypt, rec);
	if (err == EBUSY) {
		cli_error("the key of volume '%s' was changed meanwhile by "
			  "someone else: nothing done",
			  v.name);
		cli_hint("run it again with the key file now in use as --old");
		goto close_meta;
	}
	if (err) {
		cli_error("cannot change the key of volume '%s' at '%s': %s",
			  v.name, shown, gr_strerror(err));
		goto close_meta;
	}
	printf("granary: volume '%s' now opens with the key in '%s'\n", v.name,
	       newf);
	ret = CLI_EXIT_OK;
close_meta:
	meta_close(m);
free_secrets:
	crypt_secret_free(olds, oldn);
	crypt_secret_free(news, newn);
	return ret;
}

int cmd_key(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))
		return cli_usage(usage, argc < 2 ? CLI_EXIT_USAGE
						 : CLI_EXIT_OK);
	if (strcmp(argv[1], "change")) {
		cli_error("unknown key command '%s': want change", argv[1]);
		return cli_usage(usage, CLI_EXIT_USAGE);
	}
	return key_change(argc - 1, argv + 1);
}
