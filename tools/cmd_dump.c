/*
 * cmd_dump.c - `granary dump`: a volume's metadata as one stream of JSON
 * lines (meta_dump.h; the format: docs/dump-format.md), to a file or
 * stdout, LZ4-compressed on request (lib/lz4stream.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/lz4stream.h"
#include "meta/meta.h"
#include "meta/meta_dump.h"
#include "meta/meta_volume.h"
#include "tools/cli.h"
#include "tools/progress.h"

static const char usage[] =
    "usage: granary dump [options] META_URL [FILE|-]\n"
    "\n"
    "Write the metadata of the volume at META_URL to FILE (default, and\n"
    "'-': stdout) as JSON lines (docs/dump-format.md): the settings (not\n"
    "the S3 keys), every inode with its chunk lists, xattrs and symlink\n"
    "target, every directory entry, hard links, packs, versions, pending\n"
    "deletes and the counters. Sessions and open files are not in it.\n"
    "Read only, safe beside mounted clients: each file is dumped as one\n"
    "consistent image of itself, the volume is not one instant. Memory\n"
    "stays small whatever the volume's size. A FILE is written under a\n"
    "temporary name and renamed once whole. 'granary load' builds the\n"
    "volume back.\n"
    "\n"
    "  -z, --compress      LZ4 frames (as the lz4 tool writes them); a\n"
    "                      FILE ending in .lz4 implies it\n"
    "  -p, --path DIR      only the tree under DIR (not supported yet)\n"
    "  -q, --quiet         no progress line and no summary\n"
    "  -h, --help          show this help\n"
    "\n"
    "exit status: 0 when the dump is whole, 1 when it could not be made,\n"
    "2 on a usage error.\n";

static const struct option options[] = {
    {"compress", no_argument, NULL, 'z'},
    {"path", required_argument, NULL, 'p'},
    {"quiet", no_argument, NULL, 'q'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

struct fd_out {
	int fd;
	uint64_t bytes;
};

static int fd_write(void *arg, const void *p, size_t n)
{
	struct fd_out *o = arg;
	const char *q = p;

	while (n) {
		ssize_t w = write(o->fd, q, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return errno;
		q += w;
		n -= (size_t)w;
		o->bytes += (uint64_t)w;
	}
	return 0;
}

static void on_progress(void *arg, const struct meta_dump_stats *st)
{
	char b[32];
	cli_format_size(st->bytes, b, sizeof b);
	status_line_print(arg, 0,
			  "dump: %" PRIu64 " inodes, %" PRIu64
			  " entries, %" PRIu64 " lines, %s",
			  st->inodes, st->entries, st->lines, b);
}

static int ends_with(const char *s, const char *end)
{
	size_t n = strlen(s), k = strlen(end);
	return n >= k && !strcmp(s + n - k, end);
}

int cmd_dump(int argc, char **argv)
{
	struct meta_dump_opts o = {0};
	struct meta_dump_stats st;
	struct meta_opts mo = {.read_only = 1};
	struct meta_volume v;
	struct status_line line;
	struct lz4stream_sink *z = NULL;
	struct fd_out out = {.fd = STDOUT_FILENO};
	struct meta *m = NULL;
	const char *file = NULL;
	char shown[1024], tmp[4200] = "";
	struct timespec t0, t1;
	int c, err, quiet = 0, compress = 0, ret = CLI_EXIT_FAIL;

	while ((c = getopt_long(argc, argv, ":zp:qh", options, NULL)) != -1) {
		switch (c) {
		case 'z':
			compress = 1;
			break;
		case 'p':
			o.path = optarg;
			break;
		case 'q':
			quiet = 1;
			break;
		case 'h':
			return cli_usage(usage, CLI_EXIT_OK);
		default:
			return cli_bad_option(c, argv, usage);
		}
	}
	if (argc - optind < 1 || argc - optind > 2) {
		cli_error(argc - optind < 1 ? "META_URL is required"
					    : "too many arguments");
		return cli_usage(usage, CLI_EXIT_USAGE);
	}
	if (argc - optind == 2 && strcmp(argv[optind + 1], "-"))
		file = argv[optind + 1];
	if (file && ends_with(file, ".lz4"))
		compress = 1;
	if (o.path && strcmp(o.path, "/")) {
		cli_error("--path: a dump of a subtree is not supported yet");
		cli_hint(
		    "dump the whole volume; 'jq' can pick lines out of it");
		return CLI_EXIT_USAGE;
	}
	if (!file && isatty(STDOUT_FILENO)) {
		cli_error("refusing to write a dump to a terminal");
		cli_hint("name a FILE, or redirect stdout");
		return CLI_EXIT_USAGE;
	}
	if (cli_volume_open(argv[optind], &mo, &m, &v, shown, sizeof shown))
		return CLI_EXIT_FAIL;
	if (file) {
		snprintf(tmp, sizeof tmp, "%s.tmp.%ld", file, (long)getpid());
		out.fd =
		    open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (out.fd < 0) {
			cli_error("cannot create '%s': %s", tmp,
				  strerror(errno));
			tmp[0] = 0;
			goto out;
		}
	}
	if (compress && lz4stream_sink_open(fd_write, &out, &z)) {
		cli_error("cannot start the compression: out of memory");
		goto out;
	}
	status_line_init(&line, quiet);
	o.progress = on_progress;
	o.progress_arg = &line;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	err = meta_dump(m, &o, z ? lz4stream_sink_write : fd_write,
			z ? (void *)z : (void *)&out, &st);
	if (z) {
		int e = lz4stream_sink_close(z);
		err = err ? err : e;
	}
	if (!err && file && fsync(out.fd))
		err = errno;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	status_line_clear(&line);
	if (err) {
		cli_error("dump of the volume at '%s' failed: %s", shown,
			  gr_strerror(err));
		if (file)
			cli_hint("nothing was left at '%s'", file);
		goto out;
	}
	if (file) {
		if (close(out.fd) || rename(tmp, file)) {
			out.fd = -1;
			cli_error("cannot write '%s': %s", file,
				  strerror(errno));
			goto out;
		}
		out.fd = -1;
		tmp[0] = 0;
	}
	if (!quiet) {
		char a[32], b[32];
		double s = (double)(t1.tv_sec - t0.tv_sec) +
			   (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
		cli_format_size(st.bytes, a, sizeof a);
		cli_format_size(out.bytes, b, sizeof b);
		fprintf(stderr,
			"dumped volume '%s': %" PRIu64 " inodes (%" PRIu64
			" files, %" PRIu64 " directories, %" PRIu64
			" symlinks), %" PRIu64 " entries, %" PRIu64
			" slices; %" PRIu64 " lines, %s%s%s%s in %.1f s\n",
			v.name, st.inodes, st.files, st.dirs, st.symlinks,
			st.entries, st.slices, st.lines, a,
			compress ? " (" : "", compress ? b : "",
			compress ? " compressed)" : "", s);
	}
	ret = CLI_EXIT_OK;
out:
	if (file && out.fd >= 0)
		close(out.fd);
	if (tmp[0])
		unlink(tmp);
	meta_close(m);
	return ret;
}
