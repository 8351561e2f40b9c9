/*
 * fsck_rate.c - what `granary fsck` costs in metadata alone: files
 * checked a second for a volume of FILES small files (default 100,000)
 * in directories of 1,000, against the walk gc makes of the same volume
 * (every chunk list and tail: meta_scan_refs) measured in the same run,
 * and the memory fsck took; and fsck --path of one tree of 10,000 of
 * those files (/tree, ten of the directories) against the whole volume's.
 * Prints a markdown table.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "gc/fsck.h"
#include "meta/meta.h"
#include "meta/meta_scan.h"
#include "meta/meta_volume.h"

static const char usage[] =
    "usage: fsck_rate REDIS_SOCKET DB [FILES]\n"
    "\n"
    "Format a volume in database DB (0-63; everything in it is deleted) of\n"
    "the Redis listening on the unix socket REDIS_SOCKET, make FILES small\n"
    "files (default 100000) in directories of 1000 (the first 10000 under\n"
    "/tree), and time fsck of it against gc's walk of its references, and\n"
    "fsck --path /tree against fsck of the volume.\n";

#define PER_DIR 1000
#define TREE	10000 /* files under /tree */

static void die(const char *what, int err)
{
	fprintf(stderr, "fsck_rate: %s: %s\n", what,
		err ? gr_strerror(err) : "failed");
	exit(1);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long max_rss_kib(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss;
}

static int count_ref(void *arg, const struct meta_ref *r)
{
	(void)r;
	++*(uint64_t *)arg;
	return 0;
}

int main(int argc, char **argv)
{
	struct meta_volume v = {.block_size = 4 << 20};
	struct meta *m;
	char url[4200], name[32];
	long files = 100000;
	int err;

	if (argc < 3 || argc > 4) {
		fputs(usage, stderr);
		return 2;
	}
	if (argc == 4)
		files = strtol(argv[3], NULL, 10);
	if (files < 1)
		die("FILES", EINVAL);
	snprintf(url, sizeof url, "unix://%s?db=%s", argv[1], argv[2]);
	if ((err = meta_open(url, NULL, &m)))
		die("meta_open", err);
	snprintf(v.name, sizeof v.name, "fsck-rate");
	snprintf(v.storage, sizeof v.storage, "mem://");
	if ((err = meta_format(m, &v, 1)))
		die("format", err);

	double t = now_s();
	uint64_t dir = 0, tree;
	if ((err = meta_mknod(m, 1, "tree", META_DIR, 0755, 0, 0, 0, NULL,
			      &tree, NULL)))
		die("mkdir", err);
	for (long i = 0; i < files; i++) {
		struct meta_chunk_slice w = {0};
		uint64_t ino;
		if (i % PER_DIR == 0) {
			snprintf(name, sizeof name, "d%04ld", i / PER_DIR);
			if ((err = meta_mknod(m, i < TREE ? tree : 1, name,
					      META_DIR, 0755, 0, 0, 0, NULL,
					      &dir, NULL)))
				die("mkdir", err);
		}
		snprintf(name, sizeof name, "f%07ld", i);
		if ((err = meta_mknod(m, dir, name, META_FILE, 0644, 0, 0, 0,
				      NULL, &ino, NULL)))
			die("mknod", err);
		if ((err = meta_new_slice_id(m, &w.s.id)))
			die("slice id", err);
		w.s.size = w.s.len = 1000 + (uint32_t)(i % 3000);
		if ((err = meta_write(m, ino, &w, 1, NULL)))
			die("write", err);
	}
	double made = now_s() - t;

	uint64_t refs = 0;
	t = now_s();
	if ((err = meta_scan_refs(m, count_ref, &refs)))
		die("meta_scan_refs", err);
	double walk = now_s() - t;

	struct fsck_opts o = {.block_size = v.block_size};
	struct fsck_report r;
	long rss0 = max_rss_kib();
	t = now_s();
	if ((err = fsck_run(m, NULL, &o, &r)))
		die("fsck_run", err);
	double fsck = now_s() - t;
	long rss = max_rss_kib() - rss0;
	if (r.problems || r.files != (uint64_t)files || refs != (uint64_t)files)
		die("the volume is not as made", 0);

	struct fsck_opts po = {.block_size = v.block_size, .path = "/tree"};
	struct fsck_report pr;
	long tree_files = files < TREE ? files : TREE;
	t = now_s();
	if ((err = fsck_run(m, NULL, &po, &pr)))
		die("fsck_run --path", err);
	double pfsck = now_s() - t;
	if (pr.problems || pr.files != (uint64_t)tree_files)
		die("the tree is not as made", 0);

	printf("%ld files in %ld directories (made in %.1f s)\n\n", files,
	       (files + PER_DIR - 1) / PER_DIR, made);
	printf("| | s | files/s | baseline: gc's walk, s | / baseline | "
	       "memory, bytes a file |\n");
	printf("|---|---|---|---|---|---|\n");
	printf("| fsck | %.2f | %.0f | %.2f | %.2fx | %s%.0f |\n", fsck,
	       (double)files / fsck, walk, fsck / walk, rss > 0 ? "" : "<",
	       rss > 0 ? (double)rss * 1024 / (double)files : 1.0);
	printf("| fsck --path /tree (%ld files) | %.3f | %.0f | fsck of the "
	       "volume: %.2f | %.4fx | |\n",
	       tree_files, pfsck, (double)tree_files / pfsck, fsck,
	       pfsck / fsck);
	meta_close(m);
	return 0;
}
