/*
 * dump_rate.c - what `granary dump` and `granary load` cost: files a
 * second and dump bytes a file (plain and LZ4) for a volume of FILES small
 * files (default 100,000) in directories of 1,000, against gc's walk of
 * the same volume (every chunk list and tail read once: meta_scan_refs)
 * measured in the same run. Prints a markdown table.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "lib/lz4stream.h"
#include "meta/meta.h"
#include "meta/meta_dump.h"
#include "meta/meta_scan.h"
#include "meta/meta_volume.h"

static const char usage[] =
    "usage: dump_rate REDIS_SOCKET DB DB2 [FILES]\n"
    "\n"
    "Format a volume in database DB (0-63; everything in it is deleted) of\n"
    "the Redis listening on the unix socket REDIS_SOCKET, make FILES small\n"
    "files (default 100000) in directories of 1000, dump it into memory\n"
    "(plain, then LZ4) and load the dump into database DB2 (emptied\n"
    "first); time both against gc's walk of the volume's references.\n";

#define PER_DIR 1000

static void die(const char *what, int err)
{
	fprintf(stderr, "dump_rate: %s: %s\n", what,
		err ? gr_strerror(err) : "failed");
	exit(1);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int count_ref(void *arg, const struct meta_ref *r)
{
	(void)r;
	++*(uint64_t *)arg;
	return 0;
}

struct mem {
	char *p;
	size_t len, cap, pos;
};

static int mem_write(void *arg, const void *p, size_t n)
{
	struct mem *b = arg;
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 1 << 20;
		while (cap < b->len + n)
			cap *= 2;
		char *q = realloc(b->p, cap);
		if (!q)
			return ENOMEM;
		b->p = q;
		b->cap = cap;
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
	return 0;
}

static ssize_t mem_read(void *arg, void *p, size_t cap)
{
	struct mem *b = arg;
	size_t n = b->len - b->pos < cap ? b->len - b->pos : cap;
	memcpy(p, b->p + b->pos, n);
	b->pos += n;
	return (ssize_t)n;
}

static int count_bytes(void *arg, const void *p, size_t n)
{
	(void)p;
	*(uint64_t *)arg += n;
	return 0;
}

static struct meta *open_db(const char *sock, const char *db)
{
	char url[4200];
	struct meta *m;
	int err;
	snprintf(url, sizeof url, "unix://%s?db=%s", sock, db);
	if ((err = meta_open(url, NULL, &m)))
		die("meta_open", err);
	return m;
}

int main(int argc, char **argv)
{
	struct meta_volume v = {.block_size = 4 << 20};
	struct meta *m, *m2;
	char name[32];
	long files = 100000;
	int err;

	if (argc < 4 || argc > 5) {
		fputs(usage, stderr);
		return 2;
	}
	if (argc == 5)
		files = strtol(argv[4], NULL, 10);
	if (files < 1)
		die("FILES", EINVAL);
	m = open_db(argv[1], argv[2]);
	snprintf(v.name, sizeof v.name, "dump-rate");
	snprintf(v.storage, sizeof v.storage, "mem://");
	if ((err = meta_format(m, &v, 1)))
		die("format", err);

	double t = now_s();
	uint64_t dir = 0;
	for (long i = 0; i < files; i++) {
		struct meta_chunk_slice w = {0};
		uint64_t ino;
		if (i % PER_DIR == 0) {
			snprintf(name, sizeof name, "d%04ld", i / PER_DIR);
			if ((err = meta_mknod(m, 1, name, META_DIR, 0755, 0, 0,
					      0, NULL, &dir, NULL)))
				die("mkdir", err);
		}
		snprintf(name, sizeof name, "f%07ld.jpg", i);
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

	/* plain, into memory (the load reads it back) */
	struct mem plain = {0};
	struct meta_dump_stats st;
	t = now_s();
	if ((err = meta_dump(m, NULL, mem_write, &plain, &st)))
		die("dump", err);
	double dump = now_s() - t;
	if (st.files != (uint64_t)files)
		die("the dump is not of the volume made", 0);

	/* LZ4, only counted */
	uint64_t zbytes = 0;
	struct lz4stream_sink *z;
	if ((err = lz4stream_sink_open(count_bytes, &zbytes, &z)))
		die("lz4", err);
	t = now_s();
	if ((err = meta_dump(m, NULL, lz4stream_sink_write, z, NULL)))
		die("dump lz4", err);
	if ((err = lz4stream_sink_close(z)))
		die("lz4 end", err);
	double dumpz = now_s() - t;

	char cmd[4400];
	snprintf(cmd, sizeof cmd, "redis-cli -s %s -n %s FLUSHDB >/dev/null",
		 argv[1], argv[3]);
	if (system(cmd))
		die("FLUSHDB of DB2", 0);
	m2 = open_db(argv[1], argv[3]);
	struct meta_dump_stats lst;
	t = now_s();
	if ((err = meta_load(m2, NULL, mem_read, &plain, &lst)))
		die("load", err);
	double load = now_s() - t;
	if (lst.inodes != st.inodes)
		die("the load is not of the dump", 0);

	printf("%ld files in %ld directories (made in %.1f s); dump: %.0f "
	       "bytes a file plain, %.0f with LZ4\n\n",
	       files, (files + PER_DIR - 1) / PER_DIR, made,
	       (double)plain.len / (double)files,
	       (double)zbytes / (double)files);
	printf("| | s | files/s | baseline: gc's walk, s | / baseline | "
	       "1M files, extrapolated |\n");
	printf("|---|---|---|---|---|---|\n");
	printf("| dump | %.2f | %.0f | %.2f | %.2fx | %.0f s |\n", dump,
	       (double)files / dump, walk, dump / walk,
	       dump * 1e6 / (double)files);
	printf("| dump, LZ4 | %.2f | %.0f | %.2f | %.2fx | %.0f s |\n", dumpz,
	       (double)files / dumpz, walk, dumpz / walk,
	       dumpz * 1e6 / (double)files);
	printf("| load | %.2f | %.0f | %.2f | %.2fx | %.0f s |\n", load,
	       (double)files / load, walk, load / walk,
	       load * 1e6 / (double)files);
	free(plain.p);
	meta_close(m2);
	meta_close(m);
	return 0;
}
