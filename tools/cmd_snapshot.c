/*
 * cmd_snapshot.c - `granary snapshot SRC DST`: a copy-on-write copy of a
 * file or a directory tree inside one mount. The client serving the mount
 * does the work (virtual xattr "granary.snapshot" set on DST's parent to
 * "/SRC\0NAME", SRC's path below the mount point), so the command needs no
 * metadata URL, only the paths; the client checks what the caller may
 * read and create.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "tools/cli.h"

static const char usage[] =
    "usage: granary snapshot SRC DST\n"
    "\n"
    "Make DST a copy-on-write copy of SRC (a file or a directory tree) on\n"
    "the same granary mount. Only metadata is copied: the data is shared\n"
    "until either side changes it, and changes to one never show in the\n"
    "other. DST must not exist; it appears whole or not at all.\n"
    "\n"
    "It needs what cp -a needs: read permission on SRC's files, read and\n"
    "search on its directories and on the way to it, write permission on\n"
    "DST's directory. The copies are the caller's where cp -a could not\n"
    "keep the owner.\n"
    "\n"
    "  -q, --quiet  print nothing on success\n"
    "  -h, --help   show this help\n";

static const struct option options[] = {
    {"quiet", no_argument, NULL, 'q'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int cmd_snapshot(int argc, char **argv)
{
	int quiet = 0, c, fd;
	char dcopy[PATH_MAX], ncopy[PATH_MAX], abs[PATH_MAX], mp[PATH_MAX];
	char value[2 * PATH_MAX];
	size_t vlen;
	struct stat src, parent;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":qh", options, NULL)) != -1) {
		switch (c) {
		case 'q':
			quiet = 1;
			break;
		case 'h':
			return cli_usage(usage, CLI_EXIT_OK);
		default:
			return cli_bad_option(c, argv, usage);
		}
	}
	if (argc - optind != 2) {
		cli_error("snapshot needs SRC and DST");
		return cli_usage(usage, CLI_EXIT_USAGE);
	}
	const char *from = argv[optind], *to = argv[optind + 1];
	if (strlen(to) >= sizeof(dcopy)) {
		cli_error("'%s': %s", to, strerror(ENAMETOOLONG));
		return CLI_EXIT_FAIL;
	}
	if (lstat(from, &src)) {
		cli_error("cannot read '%s': %s", from, strerror(errno));
		return CLI_EXIT_FAIL;
	}
	if (!cli_on_fuse(from)) {
		cli_error("'%s' is not on a granary mount", from);
		return CLI_EXIT_FAIL;
	}
	snprintf(dcopy, sizeof(dcopy), "%s", to);
	snprintf(ncopy, sizeof(ncopy), "%s", to);
	const char *dir = dirname(dcopy), *name = basename(ncopy);
	if (!*name || !strcmp(name, ".") || !strcmp(name, "..") ||
	    !strcmp(name, "/")) {
		cli_error("'%s' does not name a new file or directory", to);
		return CLI_EXIT_USAGE;
	}
	if (!lstat(to, &parent)) {
		cli_error("'%s' already exists", to);
		return CLI_EXIT_FAIL;
	}
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &parent)) {
		cli_error("cannot open directory '%s': %s", dir,
			  strerror(errno));
		if (fd >= 0)
			close(fd);
		return CLI_EXIT_FAIL;
	}
	if (parent.st_dev != src.st_dev) {
		cli_error("'%s' and '%s' are not on the same granary mount",
			  from, dir);
		cli_hint("a snapshot stays inside one mount (and its "
			 "--subdir), as rename(2) does");
		close(fd);
		return CLI_EXIT_FAIL;
	}
	/* SRC as the client finds it: below the mount point, its last
	 * component as given (a symlink is copied, not followed) */
	int e = cli_abspath_parent(from, abs, sizeof(abs));
	if (!e && cli_mount_of(abs, mp, sizeof(mp)))
		e = ENOENT;
	if (e) {
		cli_error("cannot find the mount point of '%s': %s", from,
			  strerror(e));
		close(fd);
		return CLI_EXIT_FAIL;
	}
	const char *rel = strcmp(mp, "/") ? abs + strlen(mp) : abs;
	vlen = (size_t)snprintf(value, sizeof(value), "/%s%c%s",
				rel + (*rel == '/'), '\0', name);
	if (vlen >= sizeof(value)) {
		cli_error("'%s': %s", from, strerror(ENAMETOOLONG));
		close(fd);
		return CLI_EXIT_FAIL;
	}
	double t0 = now_s();
	int err = fsetxattr(fd, "granary.snapshot", value, vlen, 0) ? errno : 0;
	double t1 = now_s();
	close(fd);
	switch (err) {
	case 0:
		break;
	case EEXIST:
		cli_error("'%s' already exists", to);
		return CLI_EXIT_FAIL;
	case EINVAL:
		cli_error("cannot snapshot '%s' into itself ('%s')", from, to);
		return CLI_EXIT_FAIL;
	case EACCES:
		cli_error("cannot snapshot '%s' to '%s': %s", from, to,
			  strerror(err));
		cli_hint("a snapshot needs what cp -a needs: read permission "
			 "on every file of '%s', read and search on its "
			 "directories and on the way to it, and write "
			 "permission on '%s'",
			 from, dir);
		return CLI_EXIT_FAIL;
	case ENOTSUP:
		cli_error("the client serving '%s' cannot make snapshots "
			  "(an older granary, or a read-only mount)",
			  dir);
		return CLI_EXIT_FAIL;
	default:
		cli_error("cannot snapshot '%s' to '%s': %s", from, to,
			  strerror(err));
		return CLI_EXIT_FAIL;
	}
	if (!quiet)
		printf("snapshot: '%s' -> '%s' in %.1f ms\n", from, to,
		       (t1 - t0) * 1e3);
	return CLI_EXIT_OK;
}
