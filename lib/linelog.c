/*
 * linelog.c - a log file fed through a bounded buffer and written by its
 * own thread (linelog.h): double buffering, drops counted, reopened on
 * SIGHUP or when the file was moved.
 */
#include "lib/linelog.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/fsutil.h"
#include "lib/log.h"

#define FLUSH_MS  200
#define REOPEN_MS 1000

struct linelog {
	char *path;
	int fd;		/* the writer's; opened again on rotation */
	size_t cap;

	pthread_mutex_t lock; /* leaf; held for a copy or a swap */
	pthread_cond_t wake;  /* half full, or stopping */
	char *buf;	      /* filled by linelog_put; protected by lock */
	size_t used;	      /* protected by lock */
	int stop;	      /* protected by lock */
	char *spare;	      /* the writer's: swapped with buf */
	uint64_t lines, dropped; /* protected by lock */
	uint64_t hup_seen;	 /* the writer's */
	pthread_t thread;
	int running; /* thread was started */
};

static volatile sig_atomic_t hups;
/* the handler that was there (the client log's reopen, lib/log.c), called
 * too, so that one SIGHUP reopens every log */
static void (*prev_hup)(int);

static void on_hup(int sig)
{
	hups++;
	if (prev_hup)
		prev_hup(sig);
}

void linelog_hup_install(void)
{
	struct sigaction sa, old;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_hup;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	if (sigaction(SIGHUP, &sa, &old) == 0 && !(old.sa_flags & SA_SIGINFO) &&
	    old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN &&
	    old.sa_handler != on_hup)
		prev_hup = old.sa_handler;
}

uint64_t linelog_hup_count(void)
{
	return (uint64_t)hups;
}

/* Created LOG_FILE_MODE (names and uids are in it); an existing file, or
 * one logrotate's `create` made, keeps its mode. */
static int open_log(const char *path)
{
	return open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC,
		    LOG_FILE_MODE);
}

/* Has path come to name another file than fd (moved, deleted)? */
static int moved(const char *path, int fd)
{
	struct stat a, b;

	if (fstat(fd, &b))
		return 1;
	return stat(path, &a) || a.st_ino != b.st_ino || a.st_dev != b.st_dev;
}

static void reopen(struct linelog *l)
{
	int fd = open_log(l->path);

	if (fd < 0) {
		log_warn("cannot open the access log '%s' again: %s: still "
			 "writing to the file it was",
			 l->path, strerror(errno));
		return;
	}
	close(l->fd);
	l->fd = fd;
}

static void write_all(struct linelog *l, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(l->fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			log_warn("cannot write the access log '%s': %s: "
				 "lines lost",
				 l->path, w < 0 ? strerror(errno) : "short");
			return;
		}
		p += w;
		n -= (size_t)w;
	}
}

static void *writer_main(void *arg)
{
	struct linelog *l = arg;
	int64_t next_check = fsutil_mono_ms() + REOPEN_MS;

	pthread_setname_np(pthread_self(), "gr-accesslog");
	pthread_mutex_lock(&l->lock);
	for (;;) {
		if (!l->stop && l->used < l->cap / 2)
			fsutil_wait_until_ms(&l->wake, &l->lock,
					     fsutil_mono_ms() + FLUSH_MS);
		char *full = l->buf;
		size_t n = l->used;
		int stop = l->stop;
		l->buf = l->spare;
		l->used = 0;
		l->spare = full;
		pthread_mutex_unlock(&l->lock);

		if (n)
			write_all(l, full, n);
		uint64_t h = linelog_hup_count();
		if (h != l->hup_seen ||
		    (fsutil_mono_ms() >= next_check && moved(l->path, l->fd))) {
			l->hup_seen = h;
			reopen(l);
		}
		if (fsutil_mono_ms() >= next_check)
			next_check = fsutil_mono_ms() + REOPEN_MS;
		pthread_mutex_lock(&l->lock);
		if (stop && !l->used)
			break;
	}
	pthread_mutex_unlock(&l->lock);
	return NULL;
}

int linelog_open(const char *path, size_t cap, struct linelog **out)
{
	struct linelog *l = calloc(1, sizeof(*l));
	int err = ENOMEM;

	if (!l)
		return ENOMEM;
	l->fd = -1;
	pthread_mutex_init(&l->lock, NULL);
	fsutil_cond_init_mono(&l->wake);
	l->cap = cap ? cap : 1u << 20;
	l->path = strdup(path);
	l->buf = malloc(l->cap);
	l->spare = malloc(l->cap);
	if (l->path && l->buf && l->spare) {
		struct stat st;
		l->fd = open_log(path);
		err = l->fd < 0 ? errno : 0;
		if (!err && !fstat(l->fd, &st) && S_ISREG(st.st_mode) &&
		    (st.st_mode & S_IROTH))
			log_warn("the access log '%s' is readable by everyone, "
				 "and holds file names: chmod o-r '%s'",
				 path, path);
	}
	l->hup_seen = linelog_hup_count();
	if (!err)
		err = pthread_create(&l->thread, NULL, writer_main, l);
	l->running = !err;
	if (err) {
		linelog_close(l);
		return err;
	}
	*out = l;
	return 0;
}

void linelog_put(struct linelog *l, const char *line, size_t len)
{
	pthread_mutex_lock(&l->lock);
	if (l->used + len > l->cap) {
		l->dropped++;
	} else {
		memcpy(l->buf + l->used, line, len);
		l->used += len;
		l->lines++;
		if (l->used >= l->cap / 2 && l->used - len < l->cap / 2)
			pthread_cond_signal(&l->wake);
	}
	pthread_mutex_unlock(&l->lock);
}

void linelog_counts(struct linelog *l, uint64_t *lines, uint64_t *dropped)
{
	pthread_mutex_lock(&l->lock);
	*lines = l->lines;
	*dropped = l->dropped;
	pthread_mutex_unlock(&l->lock);
}

void linelog_close(struct linelog *l)
{
	if (!l)
		return;
	if (l->running) {
		pthread_mutex_lock(&l->lock);
		l->stop = 1;
		pthread_cond_signal(&l->wake);
		pthread_mutex_unlock(&l->lock);
		pthread_join(l->thread, NULL);
	}
	if (l->fd >= 0)
		close(l->fd);
	pthread_mutex_destroy(&l->lock);
	pthread_cond_destroy(&l->wake);
	free(l->path);
	free(l->buf);
	free(l->spare);
	free(l);
}
