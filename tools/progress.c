/*
 * progress.c - the progress line (see progress.h). Counters are atomics so
 * worker threads add without a lock; one mutex serializes the redraw.
 */
#include "tools/progress.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tools/cli.h"

#define REDRAW_NS 250000000ll

struct progress {
	char title[32];
	uint64_t total_items, total_bytes; /* atomic */
	uint64_t items, bytes;		   /* atomic */
	int64_t start_ns;
	int64_t last_ns;      /* protected by lock */
	pthread_mutex_t lock; /* leaf; guards the redraw */
};

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

struct progress *progress_open(const char *title, uint64_t total_items,
			       uint64_t total_bytes, int quiet)
{
	if (quiet || !isatty(STDERR_FILENO))
		return NULL;
	struct progress *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	snprintf(p->title, sizeof(p->title), "%s", title);
	p->total_items = total_items;
	p->total_bytes = total_bytes;
	p->start_ns = now_ns();
	pthread_mutex_init(&p->lock, NULL);
	return p;
}

static void draw(struct progress *p, int64_t now)
{
	uint64_t items = __atomic_load_n(&p->items, __ATOMIC_RELAXED);
	uint64_t bytes = __atomic_load_n(&p->bytes, __ATOMIC_RELAXED);
	uint64_t t_items = __atomic_load_n(&p->total_items, __ATOMIC_RELAXED);
	uint64_t t_bytes = __atomic_load_n(&p->total_bytes, __ATOMIC_RELAXED);
	double secs = (now - p->start_ns) / 1e9;
	double rate = secs > 0 ? bytes / secs : 0;
	double frate = secs > 0 ? items / secs : 0;
	char done[32], total[32], r[32], eta[32] = "";

	cli_format_size(bytes, done, sizeof(done));
	cli_format_size(t_bytes, total, sizeof(total));
	cli_format_size((uint64_t)rate, r, sizeof(r));
	if (t_bytes && rate > 0 && bytes < t_bytes)
		snprintf(eta, sizeof(eta), ", eta %.0fs",
			 (t_bytes - bytes) / rate);
	if (t_items)
		fprintf(stderr,
			"\r%s: %3.0f%% (%llu/%llu files), %s of %s, "
			"%.0f files/s, %s/s%s\033[K",
			p->title, 100.0 * items / t_items,
			(unsigned long long)items, (unsigned long long)t_items,
			done, total, frate, r, eta);
	else
		fprintf(stderr,
			"\r%s: %llu files, %s, %.0f files/s, %s/s\033[K",
			p->title, (unsigned long long)items, done, frate, r);
	fflush(stderr);
}

void progress_set_total(struct progress *p, uint64_t items, uint64_t bytes)
{
	if (!p)
		return;
	__atomic_store_n(&p->total_items, items, __ATOMIC_RELAXED);
	__atomic_store_n(&p->total_bytes, bytes, __ATOMIC_RELAXED);
}

void progress_add(struct progress *p, uint64_t items, uint64_t bytes)
{
	if (!p)
		return;
	__atomic_add_fetch(&p->items, items, __ATOMIC_RELAXED);
	__atomic_add_fetch(&p->bytes, bytes, __ATOMIC_RELAXED);
	int64_t now = now_ns();
	if (now - __atomic_load_n(&p->last_ns, __ATOMIC_RELAXED) < REDRAW_NS)
		return;
	if (pthread_mutex_trylock(&p->lock))
		return; /* someone is drawing */
	if (now - p->last_ns >= REDRAW_NS) {
		__atomic_store_n(&p->last_ns, now, __ATOMIC_RELAXED);
		draw(p, now);
	}
	pthread_mutex_unlock(&p->lock);
}

void progress_close(struct progress *p)
{
	if (!p)
		return;
	fprintf(stderr, "\r\033[K");
	fflush(stderr);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

/* ---- status line ---- */

void status_line_init(struct status_line *l, int quiet)
{
	*l = (struct status_line){.on = !quiet && isatty(STDERR_FILENO)};
}

void status_line_print(struct status_line *l, int force, const char *fmt, ...)
{
	va_list ap;
	int64_t now = now_ns();

	if (!l->on || (!force && now - l->last_ns < REDRAW_NS))
		return;
	l->last_ns = now;
	l->shown = 1;
	fputs("\r\033[K", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
}

void status_line_clear(struct status_line *l)
{
	if (l->shown) {
		fputs("\r\033[K", stderr);
		l->shown = 0;
	}
}
