/*
 * snapshot.c - what `granary snapshot` costs in metadata alone, at the
 * issue's scale: a 4 GiB file of 4 MiB slices (1024 records in 64 chunks)
 * and a tree of 100,000 files in 100 directories, each against a baseline
 * measured in the same run (a file of one slice; writing the tree's
 * records, pipelined). Prints a markdown table. The unit tests check that
 * these copies are right (tests/unit/test_meta.c, snapshot_4gib_file and
 * snapshot_100k_files); this program only times them.
 */
#include <errno.h>
#include <hiredis.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "meta/meta_objects.h"
#include "meta/meta_snap.h"
#include "meta/meta_volume.h"
#include "meta/meta.h"

static const char usage[] =
    "usage: snapshot REDIS_SOCKET DB [FILES]\n"
    "\n"
    "Format a volume in database DB (0-63; everything in it is deleted) of\n"
    "the Redis listening on the unix socket REDIS_SOCKET, and time\n"
    "snapshots of a 4 GiB file and of a tree of FILES files (default\n"
    "100000) in 100 directories.\n";

#define CHUNK (64ull << 20)
#define DIRS  100

/* meta/redis_snap.c: the snapshot with a hook between its steps (here: the
 * name is taken before the commit, so the copy is deleted again) */
int meta_redis_test_snapshot_hook(struct meta *m, const struct meta_cred *cred,
				  uint64_t src, uint64_t dst_parent,
				  const char *dst_name,
				  struct meta_snapshot_stats *st,
				  void (*hook)(void *, int), void *arg);

static struct meta *m;
static redisContext *rc;

static void die(const char *what, int err)
{
	fprintf(stderr, "snapshot: %s: %s\n", what,
		err ? gr_strerror(err) : "failed");
	exit(1);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long long raw_int(const char *cmd)
{
	redisReply *r = redisCommand(rc, cmd);
	if (!r || r->type != REDIS_REPLY_INTEGER)
		die(cmd, 0);
	long long v = r->integer;
	freeReplyObject(r);
	return v;
}

static uint64_t mknod_(uint64_t parent, const char *name, uint8_t type)
{
	uint64_t ino = 0;
	int err =
	    meta_mknod(m, parent, name, type, type == META_DIR ? 0755 : 0644,
		       1000, 1000, 0, NULL, &ino, NULL);
	if (err)
		die(name, err);
	return ino;
}

/* A file of `chunks` chunks, each of `per` slices of 4 MiB. */
static uint64_t big_file(const char *name, uint32_t chunks, int per)
{
	struct meta_chunk_slice w[16];
	uint64_t f = mknod_(1, name, META_FILE);

	for (uint32_t idx = 0; idx < chunks; idx++) {
		for (int k = 0; k < per; k++) {
			uint64_t id;
			int err = meta_new_slice_id(m, &id);
			if (err)
				die("slice id", err);
			w[k].idx = idx;
			w[k].s = (struct meta_slice){.id = id,
						     .size = 4 << 20,
						     .len = 4 << 20,
						     .pos = (uint32_t)k << 22};
		}
		int err = meta_write(m, f, w, (size_t)per, NULL);
		if (err)
			die("write", err);
	}
	return f;
}

static double time_snapshot(uint64_t src, const char *name)
{
	double t0 = now_s();
	int err = meta_snapshot(m, NULL, src, 1, name, NULL);
	if (err)
		die(name, err);
	return now_s() - t0;
}

/* Inode record (59 bytes) of a file of len bytes, plus a short slice
 * record of slice id (meta/SCHEMA.md). */
static size_t file_rec(uint8_t *p, uint64_t len, uint64_t id)
{
	memset(p, 0, 76);
	p[0] = 1;
	p[1] = META_FILE;
	p[2] = 0644 & 0xff;
	p[3] = 0644 >> 8;
	p[12] = 1; /* nlink */
	for (int i = 0; i < 8; i++)
		p[16 + i] = (uint8_t)(len >> (8 * i));
	p[41] = 1; /* mtime 1 s */
	p[50] = 1;
	p[59] = 2;
	for (int i = 0; i < 8; i++)
		p[64 + i] = (uint8_t)(id >> (8 * i));
	for (int i = 0; i < 4; i++)
		p[72 + i] = (uint8_t)(len >> (8 * i));
	return 76;
}

/* The tree's files straight into redis, pipelined (meta_mknod and
 * meta_write would take far longer than the snapshot): seconds taken. */
static double build_tree(uint64_t src, int files)
{
	uint64_t dirs[DIRS];
	uint8_t rec[76], dent[9];
	char name[32], cmd[64];
	redisReply *r;

	for (int i = 0; i < DIRS; i++) {
		snprintf(name, sizeof name, "d%03d", i);
		dirs[i] = mknod_(src, name, META_DIR);
	}
	snprintf(cmd, sizeof cmd, "INCRBY nextinode %d", files);
	uint64_t ino0 = (uint64_t)raw_int(cmd) - (uint64_t)files + 1;
	snprintf(cmd, sizeof cmd, "INCRBY nextslice %d", files);
	uint64_t id0 = (uint64_t)raw_int(cmd) - (uint64_t)files + 1;
	double t0 = now_s();
	for (int i = 0; i < files; i++) {
		uint64_t ino = ino0 + (uint64_t)i;
		file_rec(rec, 4096, id0 + (uint64_t)i);
		size_t dl = 1;
		dent[0] = META_FILE;
		for (uint64_t x = ino; x; x >>= 8)
			dent[dl++] = (uint8_t)x;
		snprintf(name, sizeof name, "file-%06d.jpg", i);
		redisAppendCommand(rc, "HSET n%" PRIu64 " %u %b %u %b",
				   ino / 32, (unsigned)(ino % 32), rec,
				   (size_t)59, (unsigned)(ino % 32 + 32),
				   rec + 59, sizeof rec - 59);
		redisAppendCommand(rc, "HSET d%" PRIu64 " %s %b",
				   dirs[i % DIRS], name, dent, dl);
		if (i % 1000 == 999 || i == files - 1)
			for (int k = 0; k < (i % 1000 + 1) * 2; k++) {
				if (redisGetReply(rc, (void **)&r) !=
					REDIS_OK ||
				    r->type == REDIS_REPLY_ERROR)
					die("building the tree", 0);
				freeReplyObject(r);
			}
	}
	double t = now_s() - t0;
	snprintf(cmd, sizeof cmd, "INCRBY totalinodes %d", files);
	raw_int(cmd);
	snprintf(cmd, sizeof cmd, "INCRBY usedspace %lld", 4096ll * files);
	raw_int(cmd);
	return t;
}

static void take_name(void *arg, int step)
{
	if (step < 0)
		mknod_(1, arg, META_FILE);
}

static void row(const char *what, double t, const char *base, double tb)
{
	printf("| %s | %.1f | %s | %.1f | %.2fx |\n", what, t * 1e3, base,
	       tb * 1e3, t / tb);
}

int main(int argc, char **argv)
{
	if (argc < 3 || argc > 4) {
		fputs(usage, stderr);
		return 2;
	}
	int db = atoi(argv[2]), files = argc > 3 ? atoi(argv[3]) : 100000;
	if (db < 0 || db > 63 || files < DIRS) {
		fputs(usage, stderr);
		return 2;
	}
	char url[4200];
	snprintf(url, sizeof url, "unix://%s?db=%d", argv[1], db);
	int err = meta_open(url, NULL, &m);
	if (err)
		die(url, err);
	struct meta_volume v;
	memset(&v, 0, sizeof v);
	snprintf(v.name, sizeof v.name, "bench");
	snprintf(v.storage, sizeof v.storage, "mem://");
	v.block_size = 4 << 20;
	v.compress = 1;
	if ((err = meta_format(m, &v, 1)))
		die("format", err);
	rc = redisConnectUnix(argv[1]);
	if (!rc || rc->err)
		die("connecting to redis", 0);
	redisReply *r = redisCommand(rc, "SELECT %d", db);
	if (!r || r->type != REDIS_REPLY_STATUS)
		die("SELECT", 0);
	freeReplyObject(r);

	uint64_t one = big_file("one", 1, 1), big = big_file("big", 64, 16);
	double t_one = time_snapshot(one, "one.snap");
	double t_big = time_snapshot(big, "big.snap");

	uint64_t src = mknod_(1, "src", META_DIR);
	double t_build = build_tree(src, files);
	double t_tree = time_snapshot(src, "src.snap");
	char taken[] = "taken";
	double t0 = now_s();
	err = meta_redis_test_snapshot_hook(m, NULL, src, 1, taken, NULL,
					    take_name, taken);
	double t_drop = now_s() - t0;
	if (err != EEXIST)
		die("a snapshot whose name is taken at the commit", err);

	printf("Metadata-only snapshots (Redis on a unix socket), ms\n\n");
	printf("| snapshot of | ms | baseline (same run) | baseline ms | "
	       "/ baseline |\n|---|---|---|---|---|\n");
	row("a 4 GiB file, 1024 slices in 64 chunks", t_big,
	    "a file of one slice", t_one);
	char what[128], base[128];
	snprintf(what, sizeof what, "%d files in %d directories", files, DIRS);
	snprintf(base, sizeof base, "writing their records, pipelined");
	row(what, t_tree, base, t_build);
	snprintf(what, sizeof what,
		 "%d files, name taken at the commit (copy deleted again)",
		 files);
	row(what, t_drop, base, t_build);
	printf("\nTargets: the 4 GiB file < 50 ms, 100,000 files < 5 s.\n");
	redisFree(rc);
	meta_close(m);
	return 0;
}
