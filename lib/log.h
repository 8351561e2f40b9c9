/*
 * log.h - one logger for the client and the tools: stderr, a file, or
 * syslog; lines carry a timestamp, level and thread id. Secrets never go
 * through here (callers redact URLs first).
 */
#ifndef GRANARY_LOG_H
#define GRANARY_LOG_H

#include <syslog.h> /* LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG */

/* target: NULL or "-" for stderr, "syslog", or a file path (appended). */
int log_open(const char *target, int level);
void log_close(void);
void log_msg(int level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define log_err(...)   log_msg(LOG_ERR, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_WARNING, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

/* Broken invariant: log file and line, then abort. */
#define gr_assert(cond)                                                        \
	do {                                                                   \
		if (!(cond))                                                   \
			gr_assert_fail(#cond, __FILE__, __LINE__);             \
	} while (0)
void gr_assert_fail(const char *what, const char *file, int line)
    __attribute__((noreturn));

#endif
