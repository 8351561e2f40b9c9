/*
 * log.h - one logger for the client and the tools: stderr, a file, or
 * syslog; lines carry a timestamp, level and thread id. A log file is
 * bounded: past max_size it is rotated in-process (file -> file.1 -> ...),
 * and SIGHUP reopens it for an external logrotate. Secrets never go
 * through here (callers redact URLs first).
 */
#ifndef GRANARY_LOG_H
#define GRANARY_LOG_H

#include <stdint.h>
#include <syslog.h> /* LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG */

#define LOG_MAX_SIZE_DEFAULT (64ull << 20)
#define LOG_MAX_SIZE_MIN     (64ull << 10) /* well above one line (4K) */
#define LOG_KEEP_DEFAULT     3
#define LOG_KEEP_MAX	     100

/*
 * target: NULL or "-" for stderr, "syslog", or a file path (appended). A
 * missing file is created LOG_FILE_MODE: a log holds file and snapshot
 * names and uids. An existing one keeps its mode (an operator's 0640 for
 * a log group, logrotate's `create`), with a warning when everyone may
 * read it; a file a rotation starts gets the mode of the one it replaces.
 */
#define LOG_FILE_MODE 0600
int log_open(const char *target, int level);
void log_close(void);

/*
 * The bound of a file target, for this and later log_open()s: a line that
 * would take the file past max_size (0: no bound) first renames it to
 * "FILE.1" (FILE.1 to FILE.2, ..., the oldest of keep files dropped) and
 * starts a new one, so the files of a log never take more than
 * keep * max_size. keep counts the live file: 1 truncates in place.
 * EINVAL if max_size is below LOG_MAX_SIZE_MIN or keep out of 1..LOG_KEEP_MAX.
 */
int log_set_bound(uint64_t max_size, int keep);

/* Reopen a file target on SIGHUP (after an external logrotate moved it):
 * installs the handler, which only sets a flag; the next line reopens. Call
 * before anything (libfuse) claims SIGHUP: libfuse leaves a handler that is
 * already there alone. */
void log_reopen_on_sighup(void);

/* "error", "warn", "info", "debug" -> LOG_*, or -1. */
int log_level_parse(const char *name);
void log_msg(int level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define log_err(...)   log_msg(LOG_ERR, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_WARNING, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

/*
 * Or'ed into a level: the line is for a tool's user too. The tools log to
 * stderr at LOG_CRIT (their own one-line errors are what users read), and
 * show such a line there whatever that level, as "granary: MESSAGE"; any
 * other log treats it as its level. For the cause of a failure that the
 * error code cannot carry: the host a certificate was refused for, the
 * region a bucket is in, what the server said.
 */
#define LOG_SHOW       0x100
#define log_cause(...) log_msg(LOG_WARNING | LOG_SHOW, __VA_ARGS__)

/* Broken invariant: log file and line, then abort. */
#define gr_assert(cond)                                                        \
	do {                                                                   \
		if (!(cond))                                                   \
			gr_assert_fail(#cond, __FILE__, __LINE__);             \
	} while (0)
void gr_assert_fail(const char *what, const char *file, int line)
    __attribute__((noreturn));

#endif
