/*
 * test_log.c - a log file stays under its bound when flooded (from many
 * threads, no line split or lost), keeps keep files, filters by level, and
 * a SIGHUP reopens the file an external logrotate moved away; log files
 * are created 0600 (they hold names and uids), keep the mode an operator
 * gave them, through rotations too.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/linelog.h"
#include "lib/log.h"

#define BOUND (64u << 10)

static char dir[] = "/tmp/granary-test-log.XXXXXX";
static char path[256];

static void setup(void)
{
	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/client.log", dir);
}

static void teardown(void)
{
	char cmd[300];

	log_close();
	log_set_bound(LOG_MAX_SIZE_DEFAULT, LOG_KEEP_DEFAULT);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	cr_assert_eq(system(cmd), 0);
}

/* Size of PATH[.n] (n = 0: the live file), or -1 if absent. */
static long file_size(int n)
{
	char p[300];
	struct stat st;

	if (n)
		snprintf(p, sizeof(p), "%s.%d", path, n);
	else
		snprintf(p, sizeof(p), "%s", path);
	return stat(p, &st) ? -1 : (long)st.st_size;
}

/* Lines of PATH[.n] that contain needle. */
static int count_lines(int n, const char *needle)
{
	char p[300], line[8192];
	int count = 0;
	FILE *f;

	if (n)
		snprintf(p, sizeof(p), "%s.%d", path, n);
	else
		snprintf(p, sizeof(p), "%s", path);
	f = fopen(p, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, needle))
			count++;
	fclose(f);
	return count;
}

TestSuite(log, .init = setup, .fini = teardown);

Test(log, rotates_at_the_bound_and_keeps_n_files)
{
	cr_assert_eq(log_set_bound(BOUND, 3), 0);
	cr_assert_eq(log_open(path, LOG_INFO), 0);
	for (int i = 0; i < 5000; i++) /* ~100 bytes a line: ~8 bounds */
		log_info("flood line %06d %s", i,
			 "xxxxxxxxxxxxxxxxxxxxxxxxxxxx");
	for (int n = 0; n < 3; n++) {
		/* a rotated file is full: the next line did not fit */
		cr_assert_gt(file_size(n), n ? BOUND - 200 : 0, "file %d: %ld",
			     n, file_size(n));
		cr_assert_leq(file_size(n), BOUND, "file %d: %ld", n,
			      file_size(n));
	}
	cr_assert_eq(file_size(3), -1, "a fourth file was kept");
	/* the newest line is in the live file, the one before the last
	 * rotation in .1 */
	cr_assert_eq(count_lines(0, "flood line 004999"), 1);
	cr_assert_eq(count_lines(1, "flood line 004999"), 0);
	cr_assert_gt(count_lines(1, "flood line"), 0);
}

Test(log, keep_one_truncates_in_place)
{
	cr_assert_eq(log_set_bound(BOUND, 1), 0);
	cr_assert_eq(log_open(path, LOG_INFO), 0);
	for (int i = 0; i < 3000; i++)
		log_info("flood line %06d %s", i,
			 "xxxxxxxxxxxxxxxxxxxxxxxxxxxx");
	cr_assert_leq(file_size(0), BOUND);
	cr_assert_eq(file_size(1), -1);
	cr_assert_eq(count_lines(0, "flood line 002999"), 1);
}

Test(log, bad_bounds_are_refused)
{
	cr_assert_eq(log_set_bound(1000, 3), EINVAL);
	cr_assert_eq(log_set_bound(BOUND, 0), EINVAL);
	cr_assert_eq(log_set_bound(BOUND, LOG_KEEP_MAX + 1), EINVAL);
	cr_assert_eq(log_set_bound(0, 3), 0, "0 is: no bound");
}

Test(log, level_filters)
{
	cr_assert_eq(log_level_parse("error"), LOG_ERR);
	cr_assert_eq(log_level_parse("warn"), LOG_WARNING);
	cr_assert_eq(log_level_parse("info"), LOG_INFO);
	cr_assert_eq(log_level_parse("debug"), LOG_DEBUG);
	cr_assert_eq(log_level_parse("loud"), -1);

	cr_assert_eq(log_open(path, LOG_WARNING), 0);
	log_debug("a debug line");
	log_info("an info line");
	log_warn("a warn line");
	log_err("an error line");
	cr_assert_eq(count_lines(0, "debug line"), 0);
	cr_assert_eq(count_lines(0, "info line"), 0);
	cr_assert_eq(count_lines(0, "WARN "), 1);
	cr_assert_eq(count_lines(0, "ERROR "), 1);
}

Test(log, sighup_reopens_a_moved_file)
{
	char moved[300];

	snprintf(moved, sizeof(moved), "%s.old", path);
	log_reopen_on_sighup();
	cr_assert_eq(log_open(path, LOG_INFO), 0);
	log_info("before the move");
	cr_assert_eq(rename(path, moved), 0);
	log_info("after the move, before the signal"); /* still the old fd */
	cr_assert_eq(raise(SIGHUP), 0);
	log_info("after the signal");
	cr_assert_eq(count_lines(0, "after the signal"), 1);
	cr_assert_eq(count_lines(0, "before"), 0);
	signal(SIGHUP, SIG_DFL);
}

static void *flood(void *arg)
{
	long t = (long)arg;

	for (int i = 0; i < 2000; i++)
		log_info("thread %ld line %06d end", t, i);
	return NULL;
}

Test(log, threads_never_split_a_line)
{
	pthread_t th[4];
	int whole = 0;

	cr_assert_eq(log_set_bound(BOUND, 100), 0); /* keep all: count */
	cr_assert_eq(log_open(path, LOG_INFO), 0);
	for (long t = 0; t < 4; t++)
		pthread_create(&th[t], NULL, flood, (void *)t);
	for (int t = 0; t < 4; t++)
		pthread_join(th[t], NULL);
	for (int n = 0; n < 100; n++) {
		cr_assert_leq(file_size(n), BOUND);
		whole += count_lines(n, " end");
	}
	cr_assert_eq(whole, 4 * 2000, "lines lost or split: %d", whole);
	cr_assert_gt(file_size(2), 0, "the flood did not rotate");
}

/* Permission bits of PATH[.n], or -1 if absent. */
static int file_mode(const char *p, int n)
{
	char q[300];
	struct stat st;

	if (n)
		snprintf(q, sizeof(q), "%s.%d", p, n);
	else
		snprintf(q, sizeof(q), "%s", p);
	return stat(q, &st) ? -1 : (int)(st.st_mode & 07777);
}

Test(log, files_are_created_private)
{
	char access[300];
	struct linelog *l;

	umask(022); /* the usual one: what the code asks for shows */
	cr_assert_eq(log_open(path, LOG_INFO), 0);
	log_info("uid 1000 made snapshot 'secret-project'");
	cr_expect_eq(file_mode(path, 0), 0600, "client log %o",
		     file_mode(path, 0));
	snprintf(access, sizeof(access), "%s/access.log", dir);
	cr_assert_eq(linelog_open(access, 0, &l), 0);
	linelog_put(l, "a line\n", 7);
	linelog_close(l);
	cr_expect_eq(file_mode(access, 0), 0600, "access log %o",
		     file_mode(access, 0));
}

/* An operator's mode stays, and the in-process rotation gives the new
 * file the mode of the one it replaces. One others may read is said. */
Test(log, a_chosen_mode_is_kept_through_rotations)
{
	umask(022);
	cr_assert_eq(log_set_bound(BOUND, 3), 0);
	cr_assert_eq(log_open(path, LOG_INFO), 0);
	log_info("first");
	cr_assert_eq(chmod(path, 0640), 0);
	for (int i = 0; i < 2000; i++)
		log_info("flood line %06d %s", i,
			 "xxxxxxxxxxxxxxxxxxxxxxxxxxxx");
	cr_assert_gt(file_size(1), 0, "the flood did not rotate");
	cr_expect_eq(file_mode(path, 0), 0640, "new live file %o",
		     file_mode(path, 0));
	cr_expect_eq(file_mode(path, 1), 0640);
	log_close();

	/* a file that was there, readable by all: left so, with a warning */
	cr_assert_eq(unlink(path), 0);
	int fd = open(path, O_CREAT | O_WRONLY, 0644);
	cr_assert_geq(fd, 0);
	close(fd);
	cr_assert_eq(chmod(path, 0644), 0);
	cr_assert_eq(log_open(path, LOG_INFO), 0);
	cr_expect_eq(file_mode(path, 0), 0644);
	cr_expect_eq(count_lines(0, "readable by everyone"), 1);
}
