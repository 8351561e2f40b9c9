/*
 * gcscan.c - how fast `granary gc` compares a volume's store with its
 * metadata (bench/gc.sh): a volume of FILES small files, each one block
 * object, and LEAK% more objects nothing references, then, timed in the
 * same run: the raw listing of the store's blocks/ (the floor), the walk
 * of the metadata alone, and gc_run (report only). Prints one line of
 * key=value figures.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fs/data/chunkstore.h"
#include "fs/store/objstore.h"
#include "lib/fsutil.h"
#include "gc/gc.h"
#include "meta/meta_scan.h"
#include "meta/meta_volume.h"

static const char usage[] =
    "usage: gcscan META_URL STORE_URL FILES [LEAK_PERCENT] [THREADS]\n"
    "\n"
    "Format a volume at META_URL (its database is wiped) on STORE_URL (an\n"
    "empty store), fill it with FILES files of one 4 KiB block each and\n"
    "LEAK_PERCENT (default 1) leaked objects, written by THREADS (default\n"
    "8) threads, then time a raw listing, the metadata walk and gc.\n"
    "\n"
    "Env GCSCAN_S3RVER_DIR=DIR: write the objects straight into s3rver's\n"
    "data directory for the store's bucket and prefix (DIR/BUCKET/PREFIX),\n"
    "in s3rver's own file layout, instead of one PUT each: a million\n"
    "objects then take minutes to lay down, not the hour s3rver's PUTs\n"
    "take. The listing and gc still go through s3rver.\n";

#define DIR_FILES 1000
#define OBJ	  4096

static struct meta *m;
static struct objstore *store;
static long nfiles, nleak;
static _Atomic long next;

static void die(const char *what, int err)
{
	fprintf(stderr, "gcscan: %s: %s\n", what,
		err ? gr_strerror(err) : "failed");
	exit(1);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const char *s3rver_dir;

static int mkdirs(char *path) /* mkdir -p */
{
	if (mkdir(path, 0755) == 0 || errno == EEXIST)
		return 0;
	if (errno != ENOENT)
		return errno;
	char *slash = strrchr(path, '/');
	if (!slash || slash == path)
		return ENOENT;
	*slash = 0;
	int err = mkdirs(path);
	*slash = '/';
	if (err)
		return err;
	return mkdir(path, 0755) == 0 || errno == EEXIST ? 0 : errno;
}

static int write_file(const char *path, const void *p, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return errno;
	int err = fsutil_write_all(fd, p, n);
	if (close(fd) && !err)
		err = errno;
	return err;
}

/* s3rver's filesystem store keeps object KEY of a bucket as the file
 * KEY._S3rver_object, with its MD5 beside it in ....md5 (computed by the
 * first listing when missing: written here so that every listing costs
 * the same) and no metadata file for an object put without any. */
static int put_s3rver(const char *key, const void *buf)
{
	static const char md5_zeros[] = "620f0b67a91f7f74151bc5be745b7110";
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/%s", s3rver_dir, key);
	char *slash = strrchr(path, '/');
	*slash = 0;
	int err = mkdirs(path);
	*slash = '/';
	if (err)
		return err;
	size_t n = strlen(path);
	snprintf(path + n, sizeof path - n, "._S3rver_object");
	if ((err = write_file(path, buf, OBJ)))
		return err;
	snprintf(path + n, sizeof path - n, "._S3rver_object.md5");
	return write_file(path, md5_zeros, sizeof md5_zeros - 1);
}

static void put_block(uint64_t id, const void *buf)
{
	char key[128];
	chunkstore_key(id, 0, OBJ, key, sizeof key);
	int err = s3rver_dir ? put_s3rver(key, buf)
			     : objstore_put(store, key, buf, OBJ);
	if (err)
		die("put", err);
}

/* Files come in directories of DIR_FILES; each thread takes whole ones. */
static void *filler(void *arg)
{
	static const char zeros[OBJ];
	(void)arg;
	for (;;) {
		long d = atomic_fetch_add(&next, 1);
		long first = d * DIR_FILES;
		if (first >= nfiles + nleak)
			return NULL;
		if (first >= nfiles) { /* leaked objects */
			for (long i = first;
			     i < first + DIR_FILES && i < nfiles + nleak; i++) {
				uint64_t id;
				if (meta_new_slice_id(m, &id))
					die("slice id", 0);
				put_block(id, zeros);
			}
			continue;
		}
		char name[32];
		uint64_t dir;
		snprintf(name, sizeof name, "d%ld", d);
		int err = meta_mknod(m, 1, name, META_DIR, 0755, 0, 0, 0, NULL,
				     &dir, NULL);
		if (err)
			die("mkdir", err);
		for (long i = first; i < first + DIR_FILES && i < nfiles; i++) {
			struct meta_chunk_slice w = {0};
			uint64_t ino;
			snprintf(name, sizeof name, "f%ld", i);
			err = meta_mknod(m, dir, name, META_FILE, 0644, 0, 0, 0,
					 NULL, &ino, NULL);
			if (!err)
				err = meta_new_slice_id(m, &w.s.id);
			if (err)
				die("create", err);
			w.s.size = w.s.len = OBJ;
			put_block(w.s.id, zeros);
			err = meta_write(m, ino, &w, 1, NULL);
			if (err)
				die("write", err);
		}
	}
}

static int count_obj(void *arg, const char *key, uint64_t size, int64_t mtime)
{
	(void)key;
	(void)size;
	(void)mtime;
	++*(long *)arg;
	return 0;
}

static int count_ref(void *arg, const struct meta_ref *r)
{
	(void)r;
	++*(long *)arg;
	return 0;
}

int main(int argc, char **argv)
{
	struct meta_volume v = {.block_size = 4 << 20};
	int threads = argc > 5 ? atoi(argv[5]) : 8, err;

	if (argc < 4 || (nfiles = atol(argv[3])) < 1 || threads < 1 ||
	    threads > 64) {
		fputs(usage, stderr);
		return 2;
	}
	s3rver_dir = getenv("GCSCAN_S3RVER_DIR");
	if (s3rver_dir && !*s3rver_dir)
		s3rver_dir = NULL;
	nleak = nfiles * (argc > 4 ? atol(argv[4]) : 1) / 100;
	if ((err = meta_open(argv[1], NULL, &m)))
		die("meta_open", err);
	if ((err = objstore_open(argv[2], NULL, &store)))
		die("objstore_open", err);
	snprintf(v.name, sizeof v.name, "gcscan");
	snprintf(v.storage, sizeof v.storage, "%s", argv[2]);
	if ((err = meta_format(m, &v, 1)))
		die("format", err);

	double t0 = now_s();
	pthread_t th[64];
	for (int i = 0; i < threads; i++)
		pthread_create(&th[i], NULL, filler, NULL);
	for (int i = 0; i < threads; i++)
		pthread_join(th[i], NULL);
	double fill = now_s() - t0;

	long listed = 0, refs = 0;
	t0 = now_s();
	if ((err = objstore_list(store, "blocks/", count_obj, &listed)) ||
	    (err = objstore_list(store, "packs/", count_obj, &listed)))
		die("list", err);
	double list = now_s() - t0;
	t0 = now_s();
	if ((err = meta_scan_refs(m, count_ref, &refs)))
		die("metadata walk", err);
	double walk = now_s() - t0;
	struct gc_opts o = {.min_age = 0};
	struct gc_report r;
	t0 = now_s();
	if ((err = gc_run(m, store, &o, &r)))
		die("gc", err);
	double gc = now_s() - t0;
	if ((long)r.objects != listed || (long)r.leaked != nleak)
		die("gc counted wrong", 0);

	printf("files=%ld objects=%ld leaked=%" PRIu64 " fill_s=%.1f "
	       "list_s=%.2f list_rate=%.0f walk_s=%.2f walk_rate=%.0f "
	       "gc_s=%.2f gc_rate=%.0f gc_vs_list=%.2f\n",
	       nfiles, listed, r.leaked, fill, list, listed / list, walk,
	       refs / walk, gc, listed / gc, list / gc);
	objstore_close(store);
	meta_close(m);
	return 0;
}
