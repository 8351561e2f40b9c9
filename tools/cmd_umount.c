/*
 * cmd_umount.c - `granary umount`: unmount with fusermount3 and wait for
 * the mount's daemon to exit. The daemon uploads buffered writes after the
 * kernel lets go of the mount, so "umount returned" must mean "the data is
 * in the store": we find the daemon's pid (from /proc) before unmounting
 * and wait for it afterwards.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tools/cli.h"

static const char usage[] =
    "usage: granary umount MOUNTPOINT [-l|--lazy]\n"
    "\n"
    "Unmount a granary file system, then wait until its daemon has\n"
    "uploaded every buffered write and exited.\n"
    "\n"
    "  -l, --lazy   detach now even if files are still open; the daemon\n"
    "               exits (and this command returns) once they are closed\n"
    "  -h, --help   show this help\n"
    "\n"
    "Interrupting the wait is safe: the unmount is done and the daemon\n"
    "keeps uploading.\n";

static const struct option options[] = {
    {"lazy", no_argument, NULL, 'l'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

#define MAX_DAEMONS   16
#define WAIT_QUIET_MS 5000	       /* say nothing if faster */
#define WAIT_MAX_MS   (10 * 60 * 1000) /* then give up */
#define POLL_MS	      100

struct daemon {
	pid_t pid;
	unsigned long long start; /* tells a reused pid apart */
};

/* ---- /proc ------------------------------------------------------------- */

/* Start time of pid (clock ticks since boot), or 0 if it is gone or a
 * zombie (exited; its parent just has not reaped it yet). */
static unsigned long long proc_start(pid_t pid)
{
	char path[64], buf[1024], *p, state;
	unsigned long long start = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = '\0';
	fclose(f);
	p = strrchr(buf, ')'); /* the command name may hold anything */
	if (!p || sscanf(p + 1, " %c", &state) != 1 || state == 'Z' ||
	    state == 'X')
		return 0;
	/* Fields after the name: state is field 3, starttime field 22. */
	p += 2;
	for (int field = 3; field < 22 && p; field++) {
		p = strchr(p, ' ');
		if (p)
			p++;
	}
	if (!p || sscanf(p, "%llu", &start) != 1)
		return 0;
	return start;
}

/* Read /proc/PID/cmdline into buf and split it into argv (NULL-terminated). */
static int proc_argv(pid_t pid, char *buf, size_t cap, char **argv, int max)
{
	char path[64];
	size_t len = 0;
	int argc = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	len = fread(buf, 1, cap - 1, f);
	fclose(f);
	buf[len] = '\0';
	for (size_t i = 0; i < len && argc < max - 1; i += strlen(buf + i) + 1)
		argv[argc++] = buf + i;
	argv[argc] = NULL;
	return argc;
}

/* Is pid a `granary mount ...` whose mount point is mp? */
static int is_daemon_of(pid_t pid, const char *mp)
{
	static char buf[65536];
	char *argv[256], cwd_link[64], cwd[PATH_MAX], joined[2 * PATH_MAX + 2];
	char canon[PATH_MAX];
	const char *base, *arg;
	int argc;
	ssize_t n;

	argc = proc_argv(pid, buf, sizeof(buf), argv, 256);
	if (argc < 3 || strcmp(argv[1], "mount"))
		return 0;
	base = strrchr(argv[0], '/');
	base = base ? base + 1 : argv[0];
	if (strcmp(base, "granary"))
		return 0;
	arg = mount_cmdline_mountpoint(argc - 1, argv + 1);
	if (!arg)
		return 0;
	if (arg[0] == '/') {
		snprintf(joined, sizeof(joined), "%s", arg);
	} else {
		/* Only a foreground mount keeps a relative spelling (the
		 * daemon runs itself again with the canonical path): resolve
		 * it from that process's working directory. */
		snprintf(cwd_link, sizeof(cwd_link), "/proc/%d/cwd", (int)pid);
		n = readlink(cwd_link, cwd, sizeof(cwd) - 1);
		if (n <= 0)
			return 0;
		cwd[n] = '\0';
		snprintf(joined, sizeof(joined), "%s/%s", cwd, arg);
	}
	if (cli_abspath_parent(joined, canon, sizeof(canon)))
		return 0;
	return !strcmp(canon, mp);
}

/* Every running `granary mount` of mp, up to max. */
static size_t find_daemons(const char *mp, struct daemon *d, size_t max)
{
	DIR *proc = opendir("/proc");
	struct dirent *e;
	size_t n = 0;

	if (!proc)
		return 0;
	while ((e = readdir(proc)) && n < max) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);
		if (*end || pid <= 0 || pid == getpid())
			continue;
		if (!is_daemon_of((pid_t)pid, mp))
			continue;
		d[n].pid = (pid_t)pid;
		d[n].start = proc_start((pid_t)pid);
		if (d[n].start)
			n++;
	}
	closedir(proc);
	return n;
}

/* ---- fusermount3 ------------------------------------------------------- */

/* Run fusermount3 -u [-z] mp; its messages are passed on to our stderr. */
static int run_fusermount(const char *mp, int lazy)
{
	char *argv[] = {"fusermount3", "-u", lazy ? "-z" : NULL, NULL, NULL};
	char out[4096];
	size_t got = 0;
	int fds[2], status;
	pid_t pid;

	argv[lazy ? 3 : 2] = (char *)mp;
	if (pipe2(fds, O_CLOEXEC)) {
		cli_error("cannot create a pipe: %s", strerror(errno));
		return CLI_EXIT_FAIL;
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		cli_error("cannot fork: %s", strerror(errno));
		close(fds[0]);
		close(fds[1]);
		return CLI_EXIT_FAIL;
	}
	if (pid == 0) {
		dup2(fds[1], STDOUT_FILENO);
		dup2(fds[1], STDERR_FILENO);
		execvp(argv[0], argv);
		dprintf(STDERR_FILENO, "cannot run fusermount3: %s\n",
			strerror(errno));
		_exit(127);
	}
	close(fds[1]);
	for (;;) {
		ssize_t r = read(fds[0], out + got, sizeof(out) - 1 - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
		if (got == sizeof(out) - 1)
			got = 0; /* keep the tail: the reason comes last */
	}
	close(fds[0]);
	out[got] = '\0';
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		fputs(out, stderr);
		return 0;
	}
	while (got > 0 && isspace((unsigned char)out[got - 1]))
		out[--got] = '\0';
	if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
		cli_error("%s", out);
		cli_hint("install fuse3 (run 'make deps')");
	} else {
		cli_error("cannot unmount '%s': %s", mp,
			  got ? out : "fusermount3 failed");
		if (strstr(out, "busy"))
			cli_hint("close the files and working directories "
				 "in it (see 'fuser -vm %s'), or use --lazy",
				 mp);
	}
	return CLI_EXIT_FAIL;
}

/* ---- waiting ----------------------------------------------------------- */

static int wait_daemons(const char *mp, struct daemon *d, size_t n)
{
	struct timespec tick = {0, POLL_MS * 1000000L};
	int told = 0;

	for (long waited = 0;; waited += POLL_MS) {
		size_t alive = 0;
		for (size_t i = 0; i < n; i++)
			if (d[i].pid && proc_start(d[i].pid) == d[i].start)
				alive++;
			else
				d[i].pid = 0;
		if (!alive)
			return CLI_EXIT_OK;
		if (waited >= WAIT_MAX_MS)
			break;
		if (waited >= WAIT_QUIET_MS && !told) {
			cli_error("waiting for buffered writes to be "
				  "uploaded... (interrupting is safe: the "
				  "upload continues)");
			told = 1;
		}
		nanosleep(&tick, NULL);
	}
	for (size_t i = 0; i < n; i++)
		if (d[i].pid) {
			cli_error("'%s' is unmounted but its daemon (pid %d) "
				  "is still running after %d minutes",
				  mp, (int)d[i].pid, WAIT_MAX_MS / 60000);
			break;
		}
	cli_hint("its log says what it is waiting for (syslog unless "
		 "mounted with --log)");
	return CLI_EXIT_FAIL;
}

/* ---- the command ------------------------------------------------------- */

int cmd_umount(int argc, char **argv)
{
	struct daemon daemons[MAX_DAEMONS];
	char mp[PATH_MAX], fstype[64], source[256];
	const char *arg;
	size_t n;
	int c, err, lazy = 0;

	while ((c = getopt_long(argc, argv, ":lh", options, NULL)) != -1) {
		switch (c) {
		case 'l':
			lazy = 1;
			break;
		case 'h':
			return cli_usage(usage, CLI_EXIT_OK);
		default:
			return cli_bad_option(c, argv, usage);
		}
	}
	if (cli_one_operand(argc, "MOUNTPOINT", usage))
		return CLI_EXIT_USAGE;
	arg = argv[optind];

	/* Canonical without stat-ing the mount itself: a hung daemon must
	 * not hang its own unmount. */
	err = cli_abspath_parent(arg, mp, sizeof(mp));
	if (err == ENOENT || err == ENOTDIR) {
		cli_error("'%s' is not a granary mount", arg);
		return CLI_EXIT_FAIL;
	}
	if (err) {
		cli_error("cannot unmount '%s': %s", arg, strerror(err));
		return CLI_EXIT_FAIL;
	}
	switch (cli_mount_lookup(mp, fstype, sizeof(fstype), source,
				 sizeof(source))) {
	case -1:
		cli_error("cannot read the mount table "
			  "(/proc/self/mountinfo): %s",
			  strerror(errno));
		return CLI_EXIT_FAIL;
	case 0:
		cli_error("'%s' is not a granary mount", arg);
		return CLI_EXIT_FAIL;
	}
	if (!cli_is_granary_mount(fstype, source)) {
		cli_error("'%s' is not a granary mount (it is %s)", arg,
			  fstype);
		return CLI_EXIT_FAIL;
	}

	n = find_daemons(mp, daemons, MAX_DAEMONS);
	if (run_fusermount(mp, lazy))
		return CLI_EXIT_FAIL;
	if (n == 0) {
		cli_error("unmounted '%s'; found no daemon process for it, "
			  "so cannot wait for its uploads",
			  arg);
		return CLI_EXIT_OK;
	}
	return wait_daemons(arg, daemons, n);
}
