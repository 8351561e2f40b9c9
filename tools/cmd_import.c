/*
 * cmd_import.c - `granary import SOURCE DEST`: copy a dataset (a local
 * directory, or an S3 prefix of plain objects) into a volume as fast as
 * the store takes it. The main thread walks the source and makes the
 * directories; a pool of workers copies the files, each to a temporary
 * name, fsync'd, its mtime set from the source, then renamed into place:
 * a name that exists is a whole file, and a run that stopped is resumed
 * by running it again (a file already there with the source's size and
 * mtime is skipped, temporary names left behind are removed).
 *
 * Small files are written in batches (import_gate.c): the files of a
 * batch are read whole, created, then written and fsync'd at once, so
 * that the client packs them into one object, through a mount of any mode
 * as in process.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/errors.h"
#include "lib/workq.h"
#include "meta/meta.h"
#include "tools/cli.h"
#include "tools/import.h"
#include "tools/progress.h"

static const char usage[] =
    "usage: granary import [options] SOURCE DEST\n"
    "       granary import [options] SOURCE META_URL PATH\n"
    "\n"
    "Copy the tree below SOURCE into DEST: many files at once, small files\n"
    "packed many to an object whatever the mount's mode. A file counts as\n"
    "done once it is in the store and renamed into place, so an import\n"
    "that stopped is resumed by running it again: files already in DEST\n"
    "with the size and modification time of the source are skipped.\n"
    "\n"
    "  SOURCE         a local directory, or an S3 prefix:\n"
    "                 s3://HOST[:PORT]/BUCKET[/PREFIX] (HTTPS) or\n"
    "                 s3+http://... (keys below PREFIX become paths; S3\n"
    "                 keys from GRANARY_IMPORT_S3_ACCESS_KEY/_SECRET_KEY\n"
    "                 when the volume's differ, else as a mount takes\n"
    "                 them: GRANARY_S3_ACCESS_KEY/_SECRET_KEY or\n"
    "                 AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY)\n"
    "  DEST           a directory of a mounted granary volume (made if\n"
    "                 missing; its parent must exist)\n"
    "  META_URL PATH  the volume at META_URL, opened by this process\n"
    "                 without a mount, and a directory of it from its root\n"
    "                 (made if missing): no kernel in between, and packs\n"
    "                 fill up to their size\n"
    "\n"
    "  -t, --threads N  files in flight (default 256 in process; through a\n"
    "                   mount, 32 more than it can fsync at once: 128 for\n"
    "                   a client of 128 threads; at most 256)\n"
    "  -q, --quiet      no progress line\n"
    "      --json       print the summary as JSON\n"
    "  -h, --help       show this help\n"
    "\n"
    "Regular files are copied with their mode bits and modification time,\n"
    "directories made, symbolic links copied as links; other files\n"
    "(sockets, devices, FIFOs) are skipped and counted. Files belong to the\n"
    "caller. A full quota or volume, or a store that fails, stops the\n"
    "import at once, naming the file.\n"
    "\n"
    "exit status: 0 when everything was imported, 1 when a file failed or\n"
    "the import stopped, 2 on a usage error.\n";

static const struct option options[] = {
    {"threads", required_argument, NULL, 't'},
    {"quiet", no_argument, NULL, 'q'},
    {"json", no_argument, NULL, 'j'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* Files in flight: in process each waits for its pack's PUT (a round
 * trip to the store and 4 MiB), so more of them keep more PUTs going;
 * through a mount, those of the batches the client can fsync at once
 * (import_dst.c) and THREADS_PREPARING more for the next batch. */
#define THREADS_DEFAULT_VFS   256
#define THREADS_PREPARING     32
#define QUEUE_MAX	      4096 /* entries listed ahead of the workers */
#define SMALL_MAX	      (1u << 20) /* what a client packs (--pack-max) */
#define TEMP_PREFIX	      ".granary-import."
#define TEMP_HEX	      16

struct imp {
	struct imp_src *src;
	struct imp_dst *dst;
	struct imp_dir *root;
	const char *src_shown, *dst_shown;
	struct workq *workers;
	struct progress *progress;

	struct imp_gate gate;
	pthread_mutex_t lock; /* a leaf */
	char *fatal;	      /* the first stop's message; protected by lock */

	int stop;      /* atomic: stop taking files (a fatal error, a signal) */
	int scan_done; /* atomic: every entry is listed */
	/* counts, atomic */
	uint64_t files, bytes, skipped, skipped_bytes, failed, left;
	uint64_t dirs, symlinks, specials, listed, listed_bytes;
	uint64_t started; /* entries a worker took */

	/* the scanner's (main thread's) own */
	struct imp_dir **stack; /* the directories it is inside */
	size_t depth, stack_cap;
	char *bad_dir; /* a directory that could not be made: entries below
			  it fail without a message each */
	uint64_t bad_dir_n;
};

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
	(void)sig;
	interrupted = 1;
}

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static void count(uint64_t *c, uint64_t n)
{
	__atomic_add_fetch(c, n, __ATOMIC_RELAXED);
}

static uint64_t load(const uint64_t *c)
{
	return __atomic_load_n(c, __ATOMIC_RELAXED);
}

static int stopping(struct imp *im)
{
	if (interrupted && !__atomic_load_n(&im->stop, __ATOMIC_RELAXED))
		__atomic_store_n(&im->stop, 1, __ATOMIC_RELAXED);
	return __atomic_load_n(&im->stop, __ATOMIC_RELAXED);
}

/* Errors of the destination after which no other file can be written
 * either: stop the import rather than fail every file in turn. */
static int fatal_err(int err)
{
	return err < 0 || err == EDQUOT || err == ENOSPC || err == EROFS ||
	       err == EIO || err == ENOTCONN || err == ENOMEM;
}

/* Errors of the source that every other object would meet too. */
static int fatal_src_err(int err)
{
	return err == OBJSTORE_EAUTH || err == OBJSTORE_ENOBUCKET ||
	       err == OBJSTORE_ECERT || err == ENOMEM;
}

/* The gate's questions (import_gate.c), under its lock. */
static int gate_drained(void *arg)
{
	struct imp *im = arg;
	return __atomic_load_n(&im->scan_done, __ATOMIC_ACQUIRE) &&
	       load(&im->started) == load(&im->listed);
}

static int gate_stopping(void *arg)
{
	return stopping(arg);
}

/* ---- messages --------------------------------------------------------- */

/* SOURCE/rel and DEST/rel as the user named them. */
static void src_name(const struct imp *im, const char *rel, char *buf,
		     size_t cap)
{
	size_t n = strcspn(im->src_shown, "?");
	while (n > 1 && im->src_shown[n - 1] == '/')
		n--;
	snprintf(buf, cap, "%.*s/%s", (int)n, im->src_shown, rel);
}

static void dst_name(const struct imp *im, const char *rel, char *buf,
		     size_t cap)
{
	size_t n = strlen(im->dst_shown);
	while (n > 1 && im->dst_shown[n - 1] == '/')
		n--;
	snprintf(buf, cap, "%.*s/%s", (int)n, im->dst_shown, rel);
}

/* Stop the import with one message: the first one wins. */
static void stop_with(struct imp *im, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void stop_with(struct imp *im, const char *fmt, ...)
{
	char msg[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&im->lock);
	if (!im->fatal)
		im->fatal = strdup(msg);
	pthread_mutex_unlock(&im->lock);
	__atomic_store_n(&im->stop, 1, __ATOMIC_RELAXED);
	imp_gate_kick(&im->gate);
}

/* A file failed: its source (src 1) or its destination. */
static void file_failed(struct imp *im, const struct imp_entry *e, int src,
			int err)
{
	char name[4096];

	if (src)
		src_name(im, e->rel, name, sizeof(name));
	else
		dst_name(im, e->rel, name, sizeof(name));
	if (src && fatal_src_err(err)) {
		stop_with(im, "cannot read '%s': %s", name, gr_strerror(err));
	} else if (!src && fatal_err(err)) {
		stop_with(im, "cannot write '%s': %s", name, gr_strerror(err));
	} else {
		cli_error("cannot %s '%s': %s", src ? "read" : "write", name,
			  gr_strerror(err));
	}
	count(&im->failed, 1);
}

/* ---- one entry -------------------------------------------------------- */

/* The temporary name of name: fixed (a run after a crash finds it), not a
 * name the source may hold in the same directory in practice. */
static void temp_name(const char *name, char out[sizeof(TEMP_PREFIX) + 16])
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
	for (const unsigned char *c = (const unsigned char *)name; *c; c++)
		h = (h ^ *c) * 0x100000001b3ull;
	snprintf(out, sizeof(TEMP_PREFIX) + 16, TEMP_PREFIX "%016llx",
		 (unsigned long long)h);
}

static int is_temp_name(const char *name)
{
	size_t n = strlen(TEMP_PREFIX);
	if (strncmp(name, TEMP_PREFIX, n) || strlen(name) != n + TEMP_HEX)
		return 0;
	return strspn(name + n, "0123456789abcdef") == TEMP_HEX;
}

/* Already there, unchanged? 1: skip it. */
static int already_there(struct imp *im, const struct imp_entry *e)
{
	struct imp_stat st;

	if (e->dir->fresh || imp_dst_stat(im->dst, e->dir, e->name, &st))
		return 0;
	if (e->kind == IMP_SYMLINK) {
		char *t = NULL;
		int same = st.kind == IMP_SYMLINK &&
			   !imp_dst_readlink(im->dst, e->dir, e->name, &t) &&
			   !strcmp(t, e->target);
		free(t);
		return same;
	}
	return st.kind == IMP_FILE && st.size == e->size &&
	       st.mtime.tv_sec == e->mtime.tv_sec &&
	       st.mtime.tv_nsec == e->mtime.tv_nsec;
}

static int make_temp(struct imp *im, const struct imp_entry *e, const char *tmp,
		     struct imp_out **out)
{
	int err = imp_dst_create(im->dst, e->dir, tmp, e->mode, out);
	if (err == EEXIST) { /* left by a run that stopped */
		imp_dst_unlink(im->dst, e->dir, tmp);
		err = imp_dst_create(im->dst, e->dir, tmp, e->mode, out);
	}
	return err;
}

/* The bytes of a small file, whole, in *buf (malloc'd). */
static int read_whole(struct imp_reader *r, char **buf, size_t *len)
{
	const void *d;
	size_t n, cap = 0;
	int err;

	*buf = NULL;
	*len = 0;
	while (!(err = imp_reader_next(r, &d, &n)) && n) {
		if (*len + n > cap) {
			size_t c = cap ? cap * 2 : n;
			while (c < *len + n)
				c *= 2;
			char *b = realloc(*buf, c);
			if (!b)
				return ENOMEM;
			*buf = b;
			cap = c;
		}
		memcpy(*buf + *len, d, n);
		*len += n;
	}
	return err;
}

/*
 * Durable under its temporary name (fsync'd), with the source's mtime:
 * close and rename into place. On any error, the temporary name goes.
 */
static int finish(struct imp *im, const struct imp_entry *e, const char *tmp,
		  struct imp_out *f, const struct timespec *mtime, int err)
{
	if (!err)
		err = imp_out_set_mtime(f, mtime);
	int cerr = imp_out_close(f);
	if (!err)
		err = cerr;
	if (!err)
		err = imp_dst_rename(im->dst, e->dir, tmp, e->name);
	if (err)
		imp_dst_unlink(im->dst, e->dir, tmp);
	return err;
}

static void copy_small(struct imp *im, const struct imp_entry *e)
{
	char tmp[sizeof(TEMP_PREFIX) + 16];
	struct imp_reader *r = NULL;
	struct imp_out *f = NULL;
	char *buf = NULL;
	size_t len = 0;
	int err, src = 1;

	temp_name(e->name, tmp);
	imp_gate_prepare(&im->gate);
	err = imp_reader_open(im->src, e, &r);
	if (!err)
		err = read_whole(r, &buf, &len);
	if (!err && !stopping(im)) {
		src = 0;
		err = make_temp(im, e, tmp, &f);
	}
	if (err || stopping(im)) {
		imp_gate_abort(&im->gate);
		if (f)
			finish(im, e, tmp, f, NULL, ECANCELED);
		if (err)
			file_failed(im, e, src, err);
		else
			count(&im->left, 1);
		goto out;
	}
	struct imp_batch *b = imp_gate_enter(&im->gate, len);
	int stopped = stopping(im);
	if (!stopped)
		err = imp_out_write(f, buf, len, 0);
	imp_batch_written(&im->gate, b);
	if (!err && !stopped) {
		uint64_t id;
		int n = imp_batch_members(b, &id);
		imp_out_batch(f, id, n);
		err = imp_out_fsync(f);
	}
	imp_gate_leave(&im->gate, b);
	if (!err && stopped)
		err = ECANCELED;
	err = finish(im, e, tmp, f, imp_reader_mtime(r), err);
	if (err == ECANCELED) {
		count(&im->left, 1);
	} else if (err) {
		file_failed(im, e, 0, err);
	} else {
		count(&im->files, 1);
		count(&im->bytes, len);
		progress_add(im->progress, 1, len);
	}
out:
	free(buf);
	imp_reader_close(r);
}

static void copy_big(struct imp *im, const struct imp_entry *e)
{
	char tmp[sizeof(TEMP_PREFIX) + 16];
	struct imp_reader *r = NULL;
	struct imp_out *f = NULL;
	uint64_t off = 0;
	int err, src = 1;

	temp_name(e->name, tmp);
	err = imp_reader_open(im->src, e, &r);
	if (!err && !(src = 0))
		err = make_temp(im, e, tmp, &f);
	while (!err) {
		const void *d;
		size_t n;
		if (stopping(im)) {
			err = ECANCELED;
			break;
		}
		src = 1;
		if ((err = imp_reader_next(r, &d, &n)) || !n)
			break;
		src = 0;
		if ((err = imp_out_write(f, d, n, off)))
			break;
		off += n;
		progress_add(im->progress, 0, n);
	}
	if (!err) {
		src = 0;
		err = imp_out_fsync(f);
	}
	if (f) {
		int ferr = finish(im, e, tmp, f, imp_reader_mtime(r), err);
		if (!err)
			err = ferr;
	}
	if (err == ECANCELED) {
		count(&im->left, 1);
	} else if (err) {
		file_failed(im, e, src, err);
	} else {
		count(&im->files, 1);
		count(&im->bytes, off);
		progress_add(im->progress, 1, 0);
	}
	imp_reader_close(r);
}

static void copy_symlink(struct imp *im, const struct imp_entry *e)
{
	char tmp[sizeof(TEMP_PREFIX) + 16];
	int err;

	temp_name(e->name, tmp);
	err = imp_dst_symlink(im->dst, e->dir, tmp, e->target);
	if (err == EEXIST) {
		imp_dst_unlink(im->dst, e->dir, tmp);
		err = imp_dst_symlink(im->dst, e->dir, tmp, e->target);
	}
	if (!err && (err = imp_dst_rename(im->dst, e->dir, tmp, e->name)))
		imp_dst_unlink(im->dst, e->dir, tmp);
	if (err) {
		file_failed(im, e, 0, err);
		return;
	}
	count(&im->symlinks, 1);
	progress_add(im->progress, 1, 0);
}

static void entry_run(struct workq_job *job)
{
	struct imp_entry *e = (struct imp_entry *)job;
	struct imp *im = e->owner;

	count(&im->started, 1);
	if (stopping(im)) {
		count(&im->left, 1);
	} else if (already_there(im, e)) {
		count(&im->skipped, 1);
		count(&im->skipped_bytes, e->size);
		progress_add(im->progress, 1, e->size);
	} else if (e->kind == IMP_SYMLINK) {
		copy_symlink(im, e);
	} else if (e->size <= SMALL_MAX) {
		copy_small(im, e);
	} else {
		copy_big(im, e);
	}
	imp_dir_put(im->dst, e->dir);
	imp_entry_free(e);
}

/* ---- the walk (main thread) ------------------------------------------- */

struct sweep {
	char **names;
	size_t n, cap;
};

static int sweep_one(void *arg, const char *name)
{
	struct sweep *s = arg;

	if (!is_temp_name(name))
		return 0;
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 16;
		char **v = realloc(s->names, cap * sizeof(*v));
		if (!v)
			return ENOMEM;
		s->names = v;
		s->cap = cap;
	}
	return (s->names[s->n] = strdup(name)) ? (s->n++, 0) : ENOMEM;
}

/* Remove the temporary names a run that stopped left in dir. */
static void sweep_temps(struct imp *im, struct imp_dir *dir)
{
	struct sweep s = {0};
	char name[4096];

	int err = imp_dst_list(im->dst, dir, sweep_one, &s);
	for (size_t i = 0; i < s.n; i++) {
		int uerr = err ? 0 : imp_dst_unlink(im->dst, dir, s.names[i]);
		if (uerr && uerr != ENOENT) {
			dst_name(im, dir->rel, name, sizeof(name));
			cli_error("cannot remove '%s/%s', left by an import "
				  "that stopped: %s",
				  name, s.names[i], gr_strerror(uerr));
		}
		free(s.names[i]);
	}
	free(s.names);
	if (err) {
		dst_name(im, dir->rel, name, sizeof(name));
		cli_error("cannot list '%s': %s", name, gr_strerror(err));
	}
}

static int stack_push(struct imp *im, struct imp_dir *d)
{
	if (im->depth == im->stack_cap) {
		size_t cap = im->stack_cap ? im->stack_cap * 2 : 16;
		struct imp_dir **v = realloc(im->stack, cap * sizeof(*v));
		if (!v)
			return ENOMEM;
		im->stack = v;
		im->stack_cap = cap;
	}
	im->stack[im->depth++] = d;
	return 0;
}

/* Is dir (a relative path) the directory rel is in, or one above it? */
static int holds(const char *dir, const char *rel)
{
	size_t n = strlen(dir);
	return n == 0 || (!strncmp(dir, rel, n) && rel[n] == '/');
}

/*
 * The directory that entry rel goes in, made with its parents as needed
 * (mode for the last one when it is a directory entry itself: want_self):
 * the stack becomes the path to it. NULL when one could not be made
 * (reported once for the tree below it).
 */
static struct imp_dir *dir_for(struct imp *im, const char *rel, int want_self,
			       mode_t mode)
{
	size_t n = strlen(rel);

	if (im->bad_dir && holds(im->bad_dir, rel)) {
		im->bad_dir_n++;
		return NULL;
	}
	if (!want_self) { /* the parent of rel */
		const char *slash = strrchr(rel, '/');
		n = slash ? (size_t)(slash - rel) : 0;
	}
	while (im->depth > 1) {
		const char *top = im->stack[im->depth - 1]->rel;
		size_t tn = strlen(top);
		if (tn <= n && !strncmp(top, rel, tn) &&
		    (tn == n || rel[tn] == '/'))
			break;
		imp_dir_put(im->dst, im->stack[--im->depth]);
	}
	while (strlen(im->stack[im->depth - 1]->rel) < n) {
		struct imp_dir *top = im->stack[im->depth - 1], *d;
		size_t tn = strlen(top->rel), start = tn ? tn + 1 : 0;
		size_t end = start + strcspn(rel + start, "/");
		char part[4096];
		if (end > n)
			end = n;
		snprintf(part, sizeof(part), "%.*s", (int)(end - start),
			 rel + start);
		int last = end == n && want_self;
		int err =
		    imp_dst_mkdir(im->dst, top, part, last ? mode : 0755, &d);
		if (!err && (err = stack_push(im, d)))
			imp_dir_put(im->dst, d);
		if (err) {
			char name[4096];
			dst_name(im, rel, name, sizeof(name));
			name[strlen(name) - (strlen(rel) - end)] = '\0';
			if (fatal_err(err)) {
				stop_with(im, "cannot make directory '%s': %s",
					  name, gr_strerror(err));
			} else {
				cli_error("cannot make directory '%s': %s%s",
					  name, gr_strerror(err),
					  err == EEXIST ? " (something else "
							  "is there)"
							: "");
			}
			free(im->bad_dir);
			im->bad_dir = strndup(rel, end);
			im->bad_dir_n = 1;
			return NULL;
		}
		if (!d->fresh)
			sweep_temps(im, d);
		count(&im->dirs, d->fresh);
	}
	return im->stack[im->depth - 1];
}

static int scan_emit(void *arg, struct imp_entry *e)
{
	struct imp *im = arg;

	if (stopping(im)) {
		imp_entry_free(e);
		return ECANCELED;
	}
	if (e->kind == IMP_SPECIAL) {
		count(&im->specials, 1);
		imp_entry_free(e);
		return 0;
	}
	struct imp_dir *d = dir_for(im, e->rel, e->kind == IMP_DIR, e->mode);
	if (!d || e->kind == IMP_DIR) {
		if (!d && e->kind != IMP_DIR)
			count(&im->failed, 1);
		imp_entry_free(e);
		return 0;
	}
	imp_dir_get(d);
	e->dir = d;
	e->owner = im;
	e->job.run = entry_run;
	count(&im->listed, 1);
	count(&im->listed_bytes, e->size);
	progress_set_total(im->progress, load(&im->listed),
			   load(&im->listed_bytes));
	if (workq_push(im->workers, &e->job)) {
		imp_dir_put(im->dst, d);
		imp_entry_free(e);
		return ECANCELED;
	}
	return 0;
}

static void scan_bad(void *arg, const char *rel, int err)
{
	struct imp *im = arg;
	char name[4096];

	src_name(im, rel, name, sizeof(name));
	if (err == EINVAL && imp_src_is_s3(im->src))
		cli_error("cannot import '%s': its key is no path (an empty, "
			  "'.' or '..' part)",
			  name);
	else
		cli_error("cannot read '%s': %s", name, gr_strerror(err));
	count(&im->failed, 1);
}

/* ---- the command ------------------------------------------------------ */

static int is_meta_url(const char *s)
{
	return !strncmp(s, "redis://", 8) || !strncmp(s, "rediss://", 9) ||
	       !strncmp(s, "unix://", 7);
}

static void summary(struct imp *im, int json, double secs)
{
	uint64_t files = load(&im->files), bytes = load(&im->bytes);
	double fps = secs > 0 ? files / secs : 0;
	double mibs = secs > 0 ? bytes / secs / 1048576.0 : 0;

	if (json) {
		printf("{\"source\": ");
		cli_json_string(stdout, im->src_shown);
		printf(", \"dest\": ");
		cli_json_string(stdout, im->dst_shown);
		printf(", \"files\": %llu, \"bytes\": %llu, \"skipped\": %llu, "
		       "\"skipped_bytes\": %llu, \"failed\": %llu, "
		       "\"not_imported\": %llu, \"dirs\": %llu, "
		       "\"symlinks\": %llu, \"special_skipped\": %llu, "
		       "\"seconds\": %.3f, \"files_per_s\": %.1f, "
		       "\"mib_per_s\": %.1f, \"error\": ",
		       (unsigned long long)files, (unsigned long long)bytes,
		       (unsigned long long)load(&im->skipped),
		       (unsigned long long)load(&im->skipped_bytes),
		       (unsigned long long)load(&im->failed),
		       (unsigned long long)load(&im->left),
		       (unsigned long long)load(&im->dirs),
		       (unsigned long long)load(&im->symlinks),
		       (unsigned long long)load(&im->specials), secs, fps,
		       mibs);
		if (im->fatal)
			cli_json_string(stdout, im->fatal);
		else
			printf("null");
		printf("}\n");
		return;
	}
	char b[32], sb[32];
	cli_format_size(bytes, b, sizeof(b));
	cli_format_size(load(&im->skipped_bytes), sb, sizeof(sb));
	printf("import: %llu files, %s in %.1f s (%.0f files/s, %.1f MiB/s); "
	       "%llu already there (%s), %llu failed; %llu directories "
	       "made, %llu symlinks, %llu special files skipped\n",
	       (unsigned long long)files, b, secs, fps, mibs,
	       (unsigned long long)load(&im->skipped), sb,
	       (unsigned long long)load(&im->failed),
	       (unsigned long long)load(&im->dirs),
	       (unsigned long long)load(&im->symlinks),
	       (unsigned long long)load(&im->specials));
}

/* The source's error as a user can act on it. */
static void scan_failed(struct imp *im, int err)
{
	if (err == OBJSTORE_ENOBUCKET)
		stop_with(im, "cannot list '%s': %s", im->src_shown,
			  gr_strerror(err));
	else
		stop_with(im, "cannot read '%s': %s", im->src_shown,
			  gr_strerror(err));
}

/* Does the canonical path in lie at or below dir? */
static int path_under(const char *in, const char *dir)
{
	size_t n = strlen(dir);
	return !strncmp(in, dir, n) &&
	       (in[n] == '/' || in[n] == '\0' || !strcmp(dir, "/"));
}

int cmd_import(int argc, char **argv)
{
	struct imp im = {0};
	int threads = 0, quiet = 0, json = 0, c, err;
	const char *meta_url = NULL, *dest;
	char why[2048], shown[2200];

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":t:qh", options, NULL)) != -1) {
		switch (c) {
		case 't':
			if (cli_threads_arg(optarg, &threads))
				return cli_usage(usage, CLI_EXIT_USAGE);
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
	if (argc - optind == 3 && is_meta_url(argv[optind + 1])) {
		meta_url = argv[optind + 1];
		dest = argv[optind + 2];
	} else if (argc - optind == 2 && !is_meta_url(argv[optind + 1])) {
		dest = argv[optind + 1];
	} else {
		cli_error(argc - optind == 2
			      ? "give the directory of the volume after "
				"META_URL (from its root, such as /datasets)"
			      : "give SOURCE and DEST (or SOURCE META_URL "
				"PATH)");
		return cli_usage(usage, CLI_EXIT_USAGE);
	}
	if (!threads && meta_url)
		threads = THREADS_DEFAULT_VFS;
	im.src_shown = argv[optind];
	if (meta_url) {
		char red[1024];
		meta_url_redact(meta_url, red, sizeof(red));
		snprintf(shown, sizeof(shown), "%s %s", red, dest);
		im.dst_shown = shown;
	} else {
		im.dst_shown = dest;
	}

	if ((err = imp_src_open(argv[optind], &im.src, why, sizeof(why)))) {
		cli_error("%s", why);
		return CLI_EXIT_FAIL;
	}
	if ((err = imp_dst_open(meta_url, dest, threads, &im.dst, &im.root, why,
				sizeof(why)))) {
		if (*why)
			cli_error("%s", why);
		imp_src_close(im.src);
		return CLI_EXIT_FAIL;
	}
	if (!meta_url && imp_src_dir(im.src)) {
		char abs[4096];
		if (!cli_abspath_parent(dest, abs, sizeof(abs)) &&
		    path_under(abs, imp_src_dir(im.src))) {
			cli_error("destination '%s' lies inside source '%s': "
				  "the copy would copy itself",
				  dest, im.src_shown);
			err = EINVAL;
			goto close;
		}
	}
	/* through a mount, as many batches fsync at a time as the client
	 * has threads for (each fsync holds one until its pack is put), and
	 * the workers are those plus a batch being prepared; in process,
	 * batches write while the last ones' packs are put */
	int batch_max = imp_dst_batch_max(im.dst);
	int flight = imp_dst_flight(im.dst);
	if (!threads)
		threads = flight ? flight + THREADS_PREPARING
				 : THREADS_DEFAULT_VFS;
	imp_gate_init(&im.gate, batch_max < threads ? batch_max : threads,
		      flight ? flight : threads, gate_drained, gate_stopping,
		      &im);
	pthread_mutex_init(&im.lock, NULL);
	if ((err = workq_open("gr-import", threads, QUEUE_MAX, &im.workers))) {
		cli_error("cannot start %d threads: %s", threads,
			  strerror(err));
		goto destroy;
	}
	if ((err = stack_push(&im, im.root))) {
		cli_error("out of memory");
		goto stop_workers;
	}
	imp_dir_get(im.root);

	struct sigaction sa = {.sa_handler = on_signal}, old_int, old_term;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	im.progress = progress_open("import", 0, 0, quiet || json);
	int64_t t0 = now_ns();
	struct imp_scan_cbs cbs = {&im, scan_emit, scan_bad};
	err = imp_src_scan(im.src, &cbs);
	if (err && err != ECANCELED)
		scan_failed(&im, err);
	__atomic_store_n(&im.scan_done, 1, __ATOMIC_RELEASE);
	imp_gate_kick(&im.gate); /* a batch may wait for what will not come */
	while (im.depth)
		imp_dir_put(im.dst, im.stack[--im.depth]);
	if (im.bad_dir_n > 1)
		cli_error("%llu entries below '%s' were not imported",
			  (unsigned long long)im.bad_dir_n - 1, im.bad_dir);
	workq_close(im.workers);
	im.workers = NULL;
	if (!im.fatal && !interrupted && (err = imp_dst_sync(im.dst)))
		stop_with(&im, "cannot upload what '%s' staged: %s",
			  im.dst_shown, gr_strerror(err));
	double secs = (now_ns() - t0) / 1e9;
	progress_close(im.progress);
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	if (interrupted && !im.fatal)
		im.fatal = strdup("interrupted");
	if (im.fatal)
		cli_error("%s", im.fatal);
	if (im.fatal && load(&im.listed)) {
		cli_error("import stopped: %llu files imported, %llu not; run "
			  "it again to go on (files already there are "
			  "skipped)",
			  (unsigned long long)load(&im.files),
			  (unsigned long long)(load(&im.listed) -
					       load(&im.files) -
					       load(&im.skipped) -
					       load(&im.symlinks)));
	}
	summary(&im, json, secs);
	err = im.fatal || load(&im.failed) ? EIO : 0;
	goto free_stack;

stop_workers:
	workq_close(im.workers);
free_stack:
	free(im.stack);
	free(im.bad_dir);
	free(im.fatal);
destroy:
	pthread_mutex_destroy(&im.lock);
	imp_gate_release(&im.gate);
close:
	imp_dir_put(im.dst, im.root);
	imp_dst_close(im.dst);
	imp_src_close(im.src);
	return err ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}
