/*
 * diskcache_sweep.c - removing the disk cache namespaces a volume no
 * longer uses (diskcache.h, diskcache_sweep_start): after a load the
 * volume's cache lives under a new name, and the old one's files, which
 * must never be served again, would otherwise take the disk for good.
 * Renamed aside at once, removed by one background job that stops when
 * asked (the next mount finishes what is left).
 */
#include "fs/store/diskcache.h"
#include "lib/log.h"
#include "lib/workq.h"

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SWEEP_PREFIX ".sweep-" /* DIR/.sweep-<old namespace> */
#define SWEEP_MAX    64	       /* old namespaces removed by one mount */

struct diskcache_sweep {
	struct workq *q;
	struct workq_job job;
	atomic_int stop;	  /* diskcache_sweep_stop was called */
	char *paths[SWEEP_MAX];	  /* DIR/.sweep-<ns> to remove */
	int n;			  /* of paths; the job's alone */
	unsigned long long files; /* removed; the job's alone */
};

/* nftw has no argument for its callback: one sweep runs at a time,
 * holding one_at_a_time (a leaf), which protects current. */
static pthread_mutex_t one_at_a_time = PTHREAD_MUTEX_INITIALIZER;
static struct diskcache_sweep *current;

static int rm_one(const char *path, const struct stat *sb, int flag,
		  struct FTW *ftw)
{
	(void)sb;
	(void)ftw;
	if (atomic_load(&current->stop))
		return 1; /* stops nftw; the next mount goes on */
	int r = flag == FTW_DP ? rmdir(path) : unlink(path);
	if (r == 0 && flag != FTW_DP)
		current->files++;
	return 0; /* a file that went meanwhile, or will not go: go on */
}

static void sweep_run(struct workq_job *job)
{
	struct diskcache_sweep *sw =
	    (struct diskcache_sweep *)((char *)job -
				       offsetof(struct diskcache_sweep, job));
	pthread_mutex_lock(&one_at_a_time);
	current = sw;
	for (int i = 0; i < sw->n && !atomic_load(&sw->stop); i++)
		nftw(sw->paths[i], rm_one, 16, FTW_DEPTH | FTW_PHYS);
	current = NULL;
	pthread_mutex_unlock(&one_at_a_time);
	if (!atomic_load(&sw->stop))
		log_info("disk cache: removed %llu files of %d namespaces "
			 "this volume no longer uses",
			 sw->files, sw->n);
}

/* Whether name is one of prefix's namespaces other than keep: prefix
 * itself or "prefix.<anything>"; or one renamed aside before. */
static int is_old(const char *name, const char *prefix, const char *keep,
		  int *swept)
{
	size_t pl = strlen(prefix), sl = strlen(SWEEP_PREFIX);
	*swept = !strncmp(name, SWEEP_PREFIX, sl);
	if (*swept)
		name += sl;
	if (strncmp(name, prefix, pl) || (name[pl] && name[pl] != '.'))
		return 0;
	return *swept || strcmp(name, keep);
}

/* Rename the old namespaces of one cache directory (len bytes of dir)
 * aside and note them. Listed first, renamed after: a rename while the
 * directory is read could list the new name too. */
static void sweep_dir(struct diskcache_sweep *sw, const char *dir, size_t len,
		      const char *prefix, const char *keep)
{
	char d[PATH_MAX], *names[SWEEP_MAX];
	int n = 0, swept;
	snprintf(d, sizeof d, "%.*s", (int)len, dir);
	DIR *dh = opendir(d);
	if (!dh)
		return;
	struct dirent *e;
	while ((e = readdir(dh)) && sw->n + n < SWEEP_MAX)
		if (is_old(e->d_name, prefix, keep, &swept) &&
		    (names[n] = strdup(e->d_name)))
			n++;
	closedir(dh);
	for (int i = 0; i < n; i++) {
		char from[PATH_MAX + 300], to[PATH_MAX + 310];
		is_old(names[i], prefix, keep, &swept);
		snprintf(from, sizeof from, "%s/%s", d, names[i]);
		if (swept)
			snprintf(to, sizeof to, "%s", from);
		else
			snprintf(to, sizeof to, "%s/" SWEEP_PREFIX "%s", d,
				 names[i]);
		free(names[i]);
		/* a name nobody opens again; if the rename fails (a sweep
		 * cut short left that name), removed where it is */
		if (!swept && rename(from, to)) {
			if (errno == ENOENT)
				continue; /* another mount's sweep took it */
			snprintf(to, sizeof to, "%s", from);
		}
		if (!(sw->paths[sw->n] = strdup(to)))
			continue;
		log_info("disk cache: '%s' is of this volume before its "
			 "restore: removing it in the background",
			 from);
		sw->n++;
	}
}

int diskcache_sweep_start(const char *dirs, const char *prefix,
			  const char *keep, struct diskcache_sweep **out)
{
	*out = NULL;
	if (!dirs || !prefix || !*prefix || !keep)
		return EINVAL;
	struct diskcache_sweep *sw = calloc(1, sizeof *sw);
	if (!sw)
		return ENOMEM;
	for (const char *c = dirs; *c;) {
		size_t len = strcspn(c, ":");
		if (len)
			sweep_dir(sw, c, len, prefix, keep);
		c += len + (c[len] == ':');
	}
	if (!sw->n) {
		free(sw);
		return 0;
	}
	sw->job.run = sweep_run;
	int err = workq_open("gr-sweep", 1, 1, &sw->q);
	if (!err)
		err = workq_push(sw->q, &sw->job);
	if (err) {
		diskcache_sweep_stop(sw);
		return err;
	}
	*out = sw;
	return 0;
}

void diskcache_sweep_stop(struct diskcache_sweep *sw)
{
	if (!sw)
		return;
	atomic_store(&sw->stop, 1);
	workq_close(sw->q); /* the job returns at its next file */
	for (int i = 0; i < sw->n; i++)
		free(sw->paths[i]);
	free(sw);
}
