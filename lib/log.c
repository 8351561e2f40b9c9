/*
 * log.c - the one logger of the client and the tools. A line is formatted
 * in full on the caller's stack and written with a single write() under a
 * mutex, so lines from many threads never interleave. Before log_open() (and
 * after log_close()) messages go to stderr at LOG_INFO.
 */
#include "lib/log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

enum log_kind { LOG_TO_STDERR, LOG_TO_FILE, LOG_TO_SYSLOG };

/* Lock order: log_lock is a leaf; never take another lock while holding it. */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static enum log_kind log_kind = LOG_TO_STDERR; /* protected by log_lock */
static int log_fd = -1;			       /* protected by log_lock */
/* Atomic, read without the lock on the fast path: a stale level only lets
 * one extra line through or drops one, both harmless. */
static int log_level = LOG_INFO;

static const char *level_name(int level)
{
	switch (level) {
	case LOG_EMERG:
		return "EMERG";
	case LOG_ALERT:
		return "ALERT";
	case LOG_CRIT:
		return "CRIT";
	case LOG_ERR:
		return "ERROR";
	case LOG_WARNING:
		return "WARN";
	case LOG_NOTICE:
		return "NOTICE";
	case LOG_INFO:
		return "INFO";
	default:
		return "DEBUG";
	}
}

int log_open(const char *target, int level)
{
	int fd = -1;
	enum log_kind kind;

	if (level < LOG_EMERG || level > LOG_DEBUG)
		return EINVAL;
	if (!target || !strcmp(target, "-") || !*target) {
		kind = LOG_TO_STDERR;
	} else if (!strcmp(target, "syslog")) {
		kind = LOG_TO_SYSLOG;
	} else {
		fd = open(target, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC,
			  0644);
		if (fd < 0)
			return errno;
		kind = LOG_TO_FILE;
	}

	pthread_mutex_lock(&log_lock);
	if (log_kind == LOG_TO_FILE && log_fd >= 0)
		close(log_fd);
	if (log_kind == LOG_TO_SYSLOG && kind != LOG_TO_SYSLOG)
		closelog();
	if (kind == LOG_TO_SYSLOG)
		openlog("granary", LOG_PID | LOG_NDELAY, LOG_DAEMON);
	log_kind = kind;
	log_fd = fd;
	__atomic_store_n(&log_level, level, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&log_lock);
	return 0;
}

void log_close(void)
{
	pthread_mutex_lock(&log_lock);
	if (log_kind == LOG_TO_FILE && log_fd >= 0)
		close(log_fd);
	if (log_kind == LOG_TO_SYSLOG)
		closelog();
	log_kind = LOG_TO_STDERR;
	log_fd = -1;
	__atomic_store_n(&log_level, LOG_INFO, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&log_lock);
}

/* write() the whole buffer, retrying on EINTR and short writes. */
static void write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return; /* nowhere left to report it */
		buf += n;
		len -= (size_t)n;
	}
}

static void log_vmsg(int level, const char *fmt, va_list ap)
{
	char line[4096];
	size_t len = 0;
	int n, saved_errno = errno;

	if (level > __atomic_load_n(&log_level, __ATOMIC_RELAXED))
		return;

	pthread_mutex_lock(&log_lock);
	if (log_kind == LOG_TO_SYSLOG) {
		vsnprintf(line, sizeof(line), fmt, ap);
		syslog(level, "%s", line);
		goto unlock;
	}

	struct timeval tv;
	struct tm tm;
	gettimeofday(&tv, NULL);
	localtime_r(&tv.tv_sec, &tm);
	len = strftime(line, sizeof(line), "%Y-%m-%d %H:%M:%S", &tm);
	n = snprintf(line + len, sizeof(line) - len, ".%03ld %-5s [%ld] ",
		     (long)(tv.tv_usec / 1000), level_name(level),
		     (long)gettid());
	if (n > 0)
		len += (size_t)n;
	if (len < sizeof(line)) {
		n = vsnprintf(line + len, sizeof(line) - len, fmt, ap);
		if (n > 0)
			len += (size_t)n;
	}
	if (len > sizeof(line) - 2)
		len = sizeof(line) - 2; /* truncated: keep room for '\n' */
	while (len > 0 && line[len - 1] == '\n')
		len--;
	line[len++] = '\n';
	write_all(log_kind == LOG_TO_FILE ? log_fd : STDERR_FILENO, line, len);
unlock:
	pthread_mutex_unlock(&log_lock);
	errno = saved_errno; /* callers often log between a failure and errno */
}

void log_msg(int level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vmsg(level, fmt, ap);
	va_end(ap);
}

void gr_assert_fail(const char *what, const char *file, int line)
{
	log_msg(LOG_CRIT, "assertion failed: '%s' at %s:%d", what, file, line);
	/* A file or syslog target may be unseen by whoever watches the crash:
	 * say it on stderr too (unless that is where it just went). */
	pthread_mutex_lock(&log_lock);
	enum log_kind kind = log_kind;
	pthread_mutex_unlock(&log_lock);
	if (kind != LOG_TO_STDERR)
		fprintf(stderr, "granary: assertion failed: '%s' at %s:%d\n",
			what, file, line);
	abort();
}
