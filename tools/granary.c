/*
 * granary.c - the granary command: finds the subcommand in one table and
 * runs it. What a subcommand needs before it starts (a logger) is said by
 * its flags here, so that every cmd_*.c begins with its own arguments.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#include "lib/log.h"
#include "tools/cli.h"

/* Route library log lines to stderr, warnings and errors only: a one-shot
 * command wants the reason a call failed, not the chatter. Commands that
 * run for long (mount) choose their own log target. */
#define CMD_LOG_STDERR 0x1
/* Plumbing for scripts of ours (mount.granary): not in the list. */
#define CMD_HIDDEN 0x2

struct cmd {
	const char *name;
	int (*fn)(int argc, char **argv);
	unsigned flags;
	const char *help; /* one line for `granary --help` */
};

static const struct cmd commands[] = {
    {"format", cmd_format, CMD_LOG_STDERR,
     "create a volume: check the storage, write the settings to redis"},
    {"mount", cmd_mount, 0,
     "mount a volume (in the background until unmounted)"},
    {"umount", cmd_umount, CMD_LOG_STDERR,
     "unmount and wait until buffered writes are uploaded"},
    {"status", cmd_status, CMD_LOG_STDERR,
     "show a volume's settings, clients and usage"},
    {"stats", cmd_stats, CMD_LOG_STDERR,
     "show the counters of the client serving a mount"},
    {"warmup", cmd_warmup, CMD_LOG_STDERR,
     "fill this node's cache with files a job will read"},
    {"plan", cmd_plan, CMD_LOG_STDERR,
     "hand a mount the order a job will read its files in (prefetch)"},
    {"import", cmd_import, CMD_LOG_STDERR,
     "copy a directory or an S3 prefix into a volume, resumably"},
    {"snapshot", cmd_snapshot, CMD_LOG_STDERR,
     "make a copy-on-write copy of a file or directory tree"},
    {"version", cmd_version, CMD_LOG_STDERR,
     "record, list, compare and restore versions of a directory"},
    {"upgrade", cmd_upgrade, CMD_LOG_STDERR,
     "rewrite an unmounted volume of an older format into this one's"},
    {"gc", cmd_gc, CMD_LOG_STDERR,
     "find (and delete) objects of the store no metadata references"},
    {"fsck", cmd_fsck, CMD_LOG_STDERR,
     "check a volume's metadata (and objects); repair what is safe to"},
    {"dump", cmd_dump, CMD_LOG_STDERR,
     "write a volume's metadata as JSON lines (a backup)"},
    {"load", cmd_load, CMD_LOG_STDERR,
     "build a volume from a dump in an empty database"},
    {"config", cmd_config, CMD_LOG_STDERR,
     "show a volume's settings, change the ones that may change"},
    {"trash", cmd_trash, CMD_LOG_STDERR,
     "list, restore or purge what was removed (kept trash-days)"},
    {"quota", cmd_quota, CMD_LOG_STDERR,
     "set, show, list, remove and check directory quotas"},
    {"key", cmd_key, CMD_LOG_STDERR,
     "change the key file an encrypted volume opens with"},
    {"redact-url", cmd_redact, CMD_LOG_STDERR | CMD_HIDDEN,
     "print metadata URLs read from stdin with their passwords hidden"},
};

#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static const struct cmd *cmd_find(const char *name)
{
	for (size_t i = 0; i < NCOMMANDS; i++)
		if (!strcmp(commands[i].name, name))
			return &commands[i];
	return NULL;
}

static int main_usage(int status)
{
	FILE *f = status ? stderr : stdout;

	fprintf(f, "usage: granary [--version] [--help] COMMAND [ARGS]\n"
		   "\n"
		   "commands:\n");
	for (size_t i = 0; i < NCOMMANDS; i++)
		if (!(commands[i].flags & CMD_HIDDEN))
			fprintf(f, "   %-10s %s\n", commands[i].name,
				commands[i].help);
	fprintf(f, "\n"
		   "'granary help COMMAND' or 'granary COMMAND --help' "
		   "describes one command.\n"
		   "exit status: 0 success, 1 failure, 2 usage error.\n");
	return status;
}

/* Keys live in this process's memory (S3 secrets, a volume's key, Redis
 * passwords): no core file may hold them, and no other process of the
 * user may read them (ptrace, /proc/PID/mem and environ, which become
 * root's). GRANARY_CORE_DUMPS=1 keeps the process dumpable, to debug a
 * crash with its core. */
static void secrets_protect(void)
{
	const char *e = getenv("GRANARY_CORE_DUMPS");

	if (e && !strcmp(e, "1"))
		return;
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0))
		cli_error("warning: cannot make the process non-dumpable "
			  "(a core file could hold keys): %s",
			  strerror(errno));
}

static int run(const struct cmd *c, int argc, char **argv)
{
	int ret;

	secrets_protect();
	/* the commands print their own one-line errors; the library's log
	 * lines (with timestamps) are details, shown with GRANARY_DEBUG=1 */
	if (c->flags & CMD_LOG_STDERR) {
		const char *dbg = getenv("GRANARY_DEBUG");
		log_open(NULL, dbg && *dbg && strcmp(dbg, "0") ? LOG_DEBUG
							       : LOG_CRIT);
	}
	ret = c->fn(argc, argv);
	if (c->flags & CMD_LOG_STDERR)
		log_close();
	/* A full disk or closed pipe on stdout is a failure, not silence. */
	if (fflush(stdout) && ret == CLI_EXIT_OK) {
		cli_error("cannot write the output: %s", strerror(errno));
		ret = CLI_EXIT_FAIL;
	}
	return ret;
}

int main(int argc, char **argv)
{
	const struct cmd *c;

	if (argc < 2)
		return main_usage(CLI_EXIT_USAGE);
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))
		return main_usage(CLI_EXIT_OK);
	if (!strcmp(argv[1], "--version")) {
		printf("granary %s\n", CLI_VERSION);
		return CLI_EXIT_OK;
	}
	if (!strcmp(argv[1], "help")) {
		if (argc == 2)
			return main_usage(CLI_EXIT_OK);
		if (argc > 3) {
			cli_error("'granary help' takes one command name");
			return CLI_EXIT_USAGE;
		}
		if (!(c = cmd_find(argv[2]))) {
			cli_error("'%s' is not a granary command; see "
				  "'granary --help'",
				  argv[2]);
			return CLI_EXIT_USAGE;
		}
		char *help_argv[] = {argv[2], "--help", NULL};
		return run(c, 2, help_argv);
	}
	if (argv[1][0] == '-') {
		cli_error("unknown option '%s'", argv[1]);
		return main_usage(CLI_EXIT_USAGE);
	}
	c = cmd_find(argv[1]);
	if (!c) {
		cli_error("'%s' is not a granary command; see 'granary --help'",
			  argv[1]);
		return CLI_EXIT_USAGE;
	}
	return run(c, argc - 1, argv + 1);
}
