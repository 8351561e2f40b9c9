/*
 * cmd_warmup.c - `granary warmup`: fill this node's cache with the files a
 * job is about to read, so that its first epoch runs at local speed; or
 * report how much of them is cached (--check), or drop them (--evict).
 *
 * Files are read through the mount by a fixed pool of threads (the client
 * caches what it fetches); --check and --evict ask the client through the
 * virtual xattrs "granary.cache" ("CACHED TOTAL" bytes) and "granary.evict".
 * On a mount in a cache group, each file is warmed through the xattr
 * "granary.warm" instead: the client has each of its blocks fetched into
 * its owner's cache, the bytes never coming to this node, so that one
 * warmup fills the group, each block from the store once; and --check
 * also says how much is in the group ("CACHED TOTAL INGROUP").
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "tools/cli.h"
#include "tools/progress.h"

static const char usage[] =
    "usage: granary warmup [options] PATH...\n"
    "       granary warmup [options] --from-list FILE\n"
    "\n"
    "Fill this node's cache with the files under each PATH (files or\n"
    "directories on a granary mount), in parallel, with a progress line on\n"
    "a terminal and a summary at the end. On a mount in a cache group, fill\n"
    "the group instead: each block is fetched from the store once, into\n"
    "the cache of the member that owns it.\n"
    "\n"
    "  -f, --from-list FILE  read paths from FILE, one per line ('-': stdin)\n"
    "  -t, --threads N       parallel readers (default 8, at most 256)\n"
    "  -c, --check           report how much is cached on this node (and\n"
    "                        in its cache group); change nothing\n"
    "  -e, --evict           drop the files from this node's cache\n"
    "  -q, --quiet           no progress line\n"
    "      --json            print the summary as JSON\n"
    "  -h, --help            show this help\n"
    "\n"
    "Each mode needs read permission on the files (and search on their\n"
    "directories); a file the caller may not read fails alone.\n"
    "\n"
    "exit status: 0 when every file was handled, 1 if any failed.\n";

static const struct option options[] = {
    {"from-list", required_argument, NULL, 'f'},
    {"threads", required_argument, NULL, 't'},
    {"check", no_argument, NULL, 'c'},
    {"evict", no_argument, NULL, 'e'},
    {"quiet", no_argument, NULL, 'q'},
    {"json", no_argument, NULL, 'j'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

#define READ_BUF (1 << 20)

enum mode { FILL, CHECK, EVICT };

struct file {
	char *path;
	uint64_t size;
};

struct job {
	enum mode mode;
	struct file *files; /* written before the workers start */
	size_t n, cap;
	size_t next;			/* atomic: next file to take */
	uint64_t bytes, cached, failed; /* atomic */
	uint64_t in_group;		/* atomic: --check, in a group */
	int grouped;  /* atomic: the client answered for a cache group */
	int no_group; /* atomic: granary.warm is not there: read files */
	struct progress *progress;
};

static int add_file(struct job *j, const char *path, uint64_t size)
{
	if (j->n == j->cap) {
		size_t cap = j->cap ? j->cap * 2 : 1024;
		struct file *f = realloc(j->files, cap * sizeof(*f));
		if (!f)
			return ENOMEM;
		j->files = f;
		j->cap = cap;
	}
	j->files[j->n].path = strdup(path);
	if (!j->files[j->n].path)
		return ENOMEM;
	j->files[j->n].size = size;
	j->n++;
	return 0;
}

/* ---- collecting files --------------------------------------------------- */

static struct job *walk_job; /* nftw has no argument pointer */
static int walk_err;

static int walk_one(const char *path, const struct stat *st, int type,
		    struct FTW *ftw)
{
	(void)ftw;
	if (type == FTW_F && S_ISREG(st->st_mode)) {
		walk_err = add_file(walk_job, path, st->st_size);
		return walk_err ? 1 : 0;
	}
	if (type == FTW_DNR || type == FTW_NS) {
		cli_error("cannot read '%s': %s", path, strerror(errno));
		walk_err = errno ? errno : EIO;
	}
	return 0;
}

static int collect(struct job *j, const char *path)
{
	struct stat st;
	if (stat(path, &st) != 0) {
		cli_error("cannot read '%s': %s", path, strerror(errno));
		return errno;
	}
	if (!cli_on_fuse(path)) {
		cli_error("'%s' is not on a granary mount", path);
		return EINVAL;
	}
	if (S_ISREG(st.st_mode))
		return add_file(j, path, st.st_size);
	if (!S_ISDIR(st.st_mode))
		return 0;
	walk_job = j;
	walk_err = 0;
	if (nftw(path, walk_one, 64, FTW_PHYS | FTW_MOUNT) != 0 && !walk_err)
		walk_err = errno ? errno : EIO;
	return walk_err;
}

static int collect_list(struct job *j, const char *list)
{
	FILE *f = strcmp(list, "-") ? fopen(list, "re") : stdin;
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	int err = 0, bad = 0;

	if (!f) {
		cli_error("cannot read list '%s': %s", list, strerror(errno));
		return errno;
	}
	while ((len = getline(&line, &cap, f)) >= 0) {
		while (len > 0 &&
		       (line[len - 1] == '\n' || line[len - 1] == '\r'))
			line[--len] = '\0';
		if (len == 0 || line[0] == '#')
			continue;
		err = collect(j, line);
		if (err == ENOMEM)
			break;
		if (err)
			bad = err; /* named already; go on with the rest */
		err = 0;
	}
	free(line);
	if (f != stdin)
		fclose(f);
	return err ? err : bad;
}

/* ---- the work ------------------------------------------------------------ */

static int fill_one(struct job *j, const struct file *f, char *buf)
{
	int fd = open(f->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	ssize_t n;
	while ((n = read(fd, buf, READ_BUF)) > 0) {
		__atomic_add_fetch(&j->bytes, n, __ATOMIC_RELAXED);
		progress_add(j->progress, 0, n);
	}
	int err = n < 0 ? errno : 0;
	/* the data is in the client's cache now; the page cache copy
	 * would only push out what the job itself needs */
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	close(fd);
	return err;
}

/* Warm f at the owners of its blocks (a client in a cache group):
 * ENOTSUP or ENODATA when the client does not (not in a group, or older):
 * the caller reads the file instead. */
static int warm_one(struct job *j, const struct file *f)
{
	char val[80];
	ssize_t n = getxattr(f->path, "granary.warm", val, sizeof(val) - 1);
	if (n < 0)
		return errno;
	val[n] = '\0';
	unsigned long long warmed = 0, total = 0;
	if (sscanf(val, "%llu %llu", &warmed, &total) != 2)
		return EPROTO;
	__atomic_store_n(&j->grouped, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&j->bytes, warmed, __ATOMIC_RELAXED);
	progress_add(j->progress, 0, total);
	if (warmed < total) {
		char a[32];
		cli_format_size(total - warmed, a, sizeof(a));
		cli_error("'%s': %s could not be warmed in the cache group "
			  "(see the client's log)",
			  f->path, a);
		return -1; /* told */
	}
	return 0;
}

static int fill_or_warm(struct job *j, const struct file *f, char *buf)
{
	if (!__atomic_load_n(&j->no_group, __ATOMIC_RELAXED)) {
		int err = warm_one(j, f);
		if (err != ENOTSUP && err != ENODATA)
			return err;
		__atomic_store_n(&j->no_group, 1, __ATOMIC_RELAXED);
	}
	return fill_one(j, f, buf);
}

static int check_one(struct job *j, const struct file *f)
{
	char val[80];
	ssize_t n = getxattr(f->path, "granary.cache", val, sizeof(val) - 1);
	if (n < 0)
		return errno;
	val[n] = '\0';
	unsigned long long cached = 0, total = 0, in_group = 0;
	int k = sscanf(val, "%llu %llu %llu", &cached, &total, &in_group);
	if (k < 2)
		return EPROTO;
	if (k == 3) {
		__atomic_store_n(&j->grouped, 1, __ATOMIC_RELAXED);
		__atomic_add_fetch(&j->in_group, in_group, __ATOMIC_RELAXED);
	}
	__atomic_add_fetch(&j->cached, cached, __ATOMIC_RELAXED);
	__atomic_add_fetch(&j->bytes, total, __ATOMIC_RELAXED);
	progress_add(j->progress, 0, total);
	return 0;
}

/* Evicting needs read permission on the file (fs/vfs/ctl.c), which a get
 * of "granary.evict" is checked for; a client older than that knows only
 * the set (write permission). */
static int evict_one(struct job *j, const struct file *f)
{
	char val[8];
	if (getxattr(f->path, "granary.evict", val, sizeof(val)) < 0 &&
	    (errno != ENODATA ||
	     setxattr(f->path, "granary.evict", "1", 1, 0) != 0))
		return errno;
	__atomic_add_fetch(&j->bytes, f->size, __ATOMIC_RELAXED);
	progress_add(j->progress, 0, f->size);
	return 0;
}

static void *worker(void *arg)
{
	struct job *j = arg;
	char *buf = j->mode == FILL ? malloc(READ_BUF) : NULL;
	if (j->mode == FILL && !buf)
		return NULL;
	for (;;) {
		size_t i = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED);
		if (i >= j->n)
			break;
		const struct file *f = &j->files[i];
		int err = j->mode == FILL    ? fill_or_warm(j, f, buf)
			  : j->mode == CHECK ? check_one(j, f)
					     : evict_one(j, f);
		if (err) {
			__atomic_add_fetch(&j->failed, 1, __ATOMIC_RELAXED);
			if (err < 0)
				; /* told */
			else if (err == ENOTSUP || err == ENODATA)
				cli_error("'%s': not a granary file system "
					  "(or its client has no disk cache)",
					  f->path);
			else if (err == EACCES)
				cli_error("'%s': %s (%s needs read permission "
					  "on the file)",
					  f->path, strerror(err),
					  j->mode == FILL    ? "warmup"
					  : j->mode == CHECK ? "--check"
							     : "--evict");
			else
				cli_error("'%s': %s", f->path, strerror(err));
		}
		progress_add(j->progress, 1, 0);
	}
	free(buf);
	return NULL;
}

int cmd_warmup(int argc, char **argv)
{
	struct job j = {.mode = FILL};
	const char *list = NULL;
	long threads = 8;
	int quiet = 0, json = 0, c, err = 0;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":f:t:ceqh", options, NULL)) !=
	       -1) {
		switch (c) {
		case 'f':
			list = optarg;
			break;
		case 't':
			if (cli_parse_int(optarg, 1, 256, &threads)) {
				cli_error(
				    "--threads takes a number from 1 to 256, "
				    "not '%s'",
				    optarg);
				return cli_usage(usage, CLI_EXIT_USAGE);
			}
			break;
		case 'c':
			j.mode = CHECK;
			break;
		case 'e':
			j.mode = EVICT;
			break;
		case 'q':
			quiet = 1;
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
	if ((optind == argc) == !list) {
		cli_error(
		    list ? "give paths or --from-list, not both"
			 : "nothing to warm up: give paths or --from-list");
		return cli_usage(usage, CLI_EXIT_USAGE);
	}
	int bad = 0;
	if (list) {
		err = collect_list(&j, list);
		if (err && err != ENOMEM)
			bad = 1, err = 0;
	}
	for (int i = optind; i < argc && err != ENOMEM; i++) {
		err = collect(&j, argv[i]);
		if (err && err != ENOMEM)
			bad = 1, err = 0;
	}
	if (err) {
		cli_error("out of memory while listing files");
		goto free_files;
	}

	uint64_t total = 0;
	for (size_t i = 0; i < j.n; i++)
		total += j.files[i].size;
	static const char *titles[] = {"warmup", "check", "evict"};
	j.progress = progress_open(titles[j.mode], j.n, total, quiet || json);

	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pthread_t tid[256];
	long started = 0;
	if ((size_t)threads > j.n)
		threads = j.n ? (long)j.n : 1;
	for (; started < threads; started++)
		if (pthread_create(&tid[started], NULL, worker, &j))
			break;
	if (started == 0)
		worker(&j); /* no thread could start: do it here */
	for (long i = 0; i < started; i++)
		pthread_join(tid[i], NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	progress_close(j.progress);

	double secs = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	char b[32], r[32], cb[32], gb[32];
	cli_format_size(j.bytes, b, sizeof(b));
	cli_format_size(secs > 0 ? (uint64_t)(j.bytes / secs) : 0, r,
			sizeof(r));
	cli_format_size(j.cached, cb, sizeof(cb));
	cli_format_size(j.in_group, gb, sizeof(gb));
	if (json) {
		printf("{\"mode\": \"%s\", \"files\": %zu, \"failed\": %llu, "
		       "\"bytes\": %llu, \"cached_bytes\": %llu, ",
		       titles[j.mode], j.n, (unsigned long long)j.failed,
		       (unsigned long long)j.bytes,
		       (unsigned long long)j.cached);
		if (j.mode == CHECK && j.grouped)
			printf("\"group_bytes\": %llu, ",
			       (unsigned long long)j.in_group);
		else if (j.mode == CHECK)
			printf("\"group_bytes\": null, ");
		printf("\"cache_group\": %s, \"seconds\": %.3f}\n",
		       j.grouped ? "true" : "false", secs);
	} else if (j.mode == FILL) {
		printf("warmup: %zu files, %s in %.1f s (%s/s)%s%s\n", j.n, b,
		       secs, r,
		       j.grouped ? ", at their owners in the cache group" : "",
		       j.failed ? ", some failed" : "");
	} else if (j.mode == CHECK && j.grouped) {
		printf(
		    "check: %zu files, %s of %s cached on this node (%.1f%%), "
		    "%s in the cache group (%.1f%%)\n",
		    j.n, cb, b, j.bytes ? 100.0 * j.cached / j.bytes : 100.0,
		    gb, j.bytes ? 100.0 * j.in_group / j.bytes : 100.0);
	} else if (j.mode == CHECK) {
		printf("check: %zu files, %s of %s cached (%.1f%%)\n", j.n, cb,
		       b, j.bytes ? 100.0 * j.cached / j.bytes : 100.0);
	} else {
		printf("evict: %zu files, %s dropped from this node's cache\n",
		       j.n, b);
	}
	if (j.failed)
		bad = 1;
free_files:
	for (size_t i = 0; i < j.n; i++)
		free(j.files[i].path);
	free(j.files);
	if (err)
		return CLI_EXIT_FAIL;
	return bad ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}
