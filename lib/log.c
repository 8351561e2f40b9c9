/*
 * log.c - the one logger of the client and the tools. A line is formatted
 * in full on the caller's stack and written with a single write() under a
 * mutex, so lines from many threads never interleave. Before log_open() (and
 * after log_close()) messages go to stderr at LOG_INFO. A file target is
 * rotated under the same mutex by the line that would pass its bound, so
 * no line is split across two files and no other thread sees a closed fd.
 * Files are created LOG_FILE_MODE; a rotation gives the new file the mode
 * of the one it replaces.
 */
#include "lib/log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

enum log_kind { LOG_TO_STDERR, LOG_TO_FILE, LOG_TO_SYSLOG };

/* Lock order: log_lock is a leaf; never take another lock while holding it. */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static enum log_kind log_kind = LOG_TO_STDERR;	/* protected by log_lock */
static int log_fd = -1;				/* protected by log_lock */
static char log_path[PATH_MAX];			/* protected by log_lock */
static uint64_t log_size;			/* protected by log_lock */
static uint64_t log_max = LOG_MAX_SIZE_DEFAULT; /* protected by log_lock */
static int log_keep = LOG_KEEP_DEFAULT;		/* protected by log_lock */
/* Set by the SIGHUP handler, cleared by the line that reopens the file. */
static volatile sig_atomic_t log_hup;
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

int log_level_parse(const char *name)
{
	static const struct {
		const char *name;
		int level;
	} levels[] = {{"error", LOG_ERR},
		      {"warn", LOG_WARNING},
		      {"warning", LOG_WARNING},
		      {"info", LOG_INFO},
		      {"debug", LOG_DEBUG}};

	for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++)
		if (!strcmp(name, levels[i].name))
			return levels[i].level;
	return -1;
}

int log_set_bound(uint64_t max_size, int keep)
{
	if ((max_size && max_size < LOG_MAX_SIZE_MIN) || keep < 1 ||
	    keep > LOG_KEEP_MAX)
		return EINVAL;
	pthread_mutex_lock(&log_lock);
	log_max = max_size;
	log_keep = keep;
	pthread_mutex_unlock(&log_lock);
	return 0;
}

static void on_sighup(int sig)
{
	(void)sig;
	log_hup = 1;
}

void log_reopen_on_sighup(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sighup;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sigaction(SIGHUP, &sa, NULL);
}

/* path opened for appending, created with mode (0: LOG_FILE_MODE) when
 * missing; *size its size, *others set when others may read it. */
static int open_file(const char *path, mode_t mode, uint64_t *size, int *others)
{
	struct stat st;
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_EXCL,
		      mode ? mode : LOG_FILE_MODE);

	if (fd >= 0) {
		if (mode) /* the umask may have taken bits the old one had */
			fchmod(fd, mode);
	} else if (errno == EEXIST) { /* there: its mode is the operator's */
		fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
		if (fd < 0 && errno == ENOENT) /* a dangling symlink */
			fd = open(path,
				  O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC,
				  mode ? mode : LOG_FILE_MODE);
	}
	if (fd < 0)
		return -1;
	*size = 0;
	*others = 0;
	if (!fstat(fd, &st)) {
		*size = (uint64_t)st.st_size;
		*others = S_ISREG(st.st_mode) && (st.st_mode & S_IROTH);
	}
	return fd;
}

/* Reopen log_path (moved away by logrotate or by rotate_locked); a new
 * file gets the mode of the one it replaces. On failure the old fd stays:
 * lines go on to the moved file rather than nowhere. */
static void reopen_locked(void)
{
	struct stat st;
	uint64_t size;
	int others;
	int fd =
	    open_file(log_path, fstat(log_fd, &st) ? 0 : st.st_mode & 07777,
		      &size, &others);

	if (fd < 0)
		return;
	close(log_fd);
	log_fd = fd;
	log_size = size;
}

/* FILE.(keep-2) -> FILE.(keep-1), ..., FILE -> FILE.1, then a new FILE.
 * A missing FILE.n is a gap in the chain (never rotated that far): fine. */
static void rotate_locked(void)
{
	char from[PATH_MAX + 16], to[PATH_MAX + 16]; /* ".%d" fits */

	if (log_keep == 1) {
		if (ftruncate(log_fd, 0) == 0)
			log_size = 0; /* O_APPEND: the next write lands at 0 */
		return;
	}
	for (int i = log_keep - 1; i >= 1; i--) {
		if (i == 1)
			snprintf(from, sizeof(from), "%s", log_path);
		else
			snprintf(from, sizeof(from), "%s.%d", log_path, i - 1);
		snprintf(to, sizeof(to), "%s.%d", log_path, i);
		rename(from, to);
	}
	reopen_locked();
}

int log_open(const char *target, int level)
{
	uint64_t size = 0;
	int fd = -1, others = 0;
	enum log_kind kind;

	if (level < LOG_EMERG || level > LOG_DEBUG)
		return EINVAL;
	if (!target || !strcmp(target, "-") || !*target) {
		kind = LOG_TO_STDERR;
	} else if (!strcmp(target, "syslog")) {
		kind = LOG_TO_SYSLOG;
	} else {
		if (strlen(target) >= sizeof(log_path))
			return ENAMETOOLONG;
		fd = open_file(target, 0, &size, &others);
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
	log_size = size;
	snprintf(log_path, sizeof(log_path), "%s", fd >= 0 ? target : "");
	__atomic_store_n(&log_level, level, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&log_lock);
	if (others)
		log_warn("the log file '%s' is readable by everyone, and holds "
			 "file names and uids: chmod o-r '%s'",
			 target, target);
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
	int n, saved_errno = errno, show = level & LOG_SHOW, hidden;

	level &= ~LOG_SHOW;
	hidden = level > __atomic_load_n(&log_level, __ATOMIC_RELAXED);
	if (hidden && !show)
		return;

	pthread_mutex_lock(&log_lock);
	if (hidden) { /* a cause for a tool's user: only on stderr */
		if (log_kind == LOG_TO_STDERR) {
			n = snprintf(line, sizeof(line), "granary: ");
			vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt,
				  ap);
			len = strlen(line);
			line[len++] = '\n';
			write_all(STDERR_FILENO, line, len);
		}
		goto unlock;
	}
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
	if (log_kind == LOG_TO_FILE) {
		if (log_hup) {
			log_hup = 0;
			reopen_locked();
		}
		if (log_max && log_size > 0 && log_size + len > log_max)
			rotate_locked();
		write_all(log_fd, line, len);
		log_size += len;
	} else {
		write_all(STDERR_FILENO, line, len);
	}
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
