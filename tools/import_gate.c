/*
 * import_gate.c - the batches of small files of `granary import`
 * (import.h): files written and fsync'd together so that the client packs
 * them into one object (fs/data/packer.h seals a pack once every writer
 * holding small data has its frame in it).
 *
 * A worker that took a small file is preparing (reading it whole,
 * creating its temporary name); then it enters the newest batch that has
 * room, and waits until that batch is released. The oldest batch is
 * released when it is due: full (a pack's bytes, or batch_max files),
 * nobody else will come (none preparing, and none in flight to come back
 * for more, or no more files at all: the caller's drained()), it waited
 * IMP_GATE_WAIT_NS, or the import stops; and when it fits in flight
 * (flight_max: through a mount, one batch fsyncs at a time). Its members
 * write, wait until all of them have written (every one then holds small
 * data in the client), fsync, and leave.
 *
 *   imp_gate_prepare -> [read, create] -> imp_gate_enter -> [write]
 *   -> imp_batch_written -> [fsync] -> imp_gate_leave
 *   (imp_gate_abort instead of imp_gate_enter on failure)
 */
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "tools/import.h"

/* A batch waits at most this long for more files: a batch cut short is a
 * pack cut short. The files coming are being read and created meanwhile
 * (through a mount, their creates are what takes the time). */
#define IMP_GATE_WAIT_NS 200000000ll

struct imp_batch {
	int n;			/* members */
	uint64_t bytes;		/* theirs, with a frame's header each */
	int written;		/* members done writing */
	int left;		/* members that have not left yet */
	int released;		/* members may write */
	uint64_t id;
	int64_t first_ns;	/* when the first member came */
	struct imp_batch *next; /* waiting batches, oldest first */
};

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

void imp_gate_init(struct imp_gate *g, int batch_max, int flight_max,
		   int (*drained)(void *arg), int (*stopping)(void *arg),
		   void *arg)
{
	*g = (struct imp_gate){.batch_max = batch_max > 0 ? batch_max : 1,
			       .flight_max = flight_max,
			       .drained = drained,
			       .stopping = stopping,
			       .arg = arg};
	/* ids of two importers of one mount should differ: a hint that
	 * mixes two batches only seals one pack early */
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	g->next_id = ((uint64_t)getpid() << 40 ^ (uint64_t)ts.tv_nsec << 20 ^
		      (uint64_t)ts.tv_sec) |
		     1;
	pthread_mutex_init(&g->lock, NULL);
	pthread_cond_init(&g->cond, NULL);
}

void imp_gate_release(struct imp_gate *g)
{
	pthread_cond_destroy(&g->cond);
	pthread_mutex_destroy(&g->lock);
}

/* Under lock: let the oldest batches go that are due and fit. */
static void let_go(struct imp_gate *g)
{
	struct imp_batch *b;

	while ((b = g->waiting)) {
		int alone =
		    g->preparing == 0 && (g->flight == 0 || g->drained(g->arg));
		int due = b->n >= g->batch_max ||
			  b->bytes + IMP_FRAME_OVERHEAD + 1 > IMP_PACK_BYTES ||
			  alone || b != g->newest ||
			  now_ns() - b->first_ns >= IMP_GATE_WAIT_NS ||
			  g->stopping(g->arg);
		int room = g->flight == 0 || g->flight + b->n <= g->flight_max;
		if (!due || !room)
			return;
		g->waiting = b->next;
		if (g->newest == b)
			g->newest = NULL;
		b->released = 1;
		g->flight += b->n;
		pthread_cond_broadcast(&g->cond);
	}
}

void imp_gate_kick(struct imp_gate *g)
{
	pthread_mutex_lock(&g->lock);
	let_go(g);
	pthread_cond_broadcast(&g->cond);
	pthread_mutex_unlock(&g->lock);
}

void imp_gate_prepare(struct imp_gate *g)
{
	pthread_mutex_lock(&g->lock);
	g->preparing++;
	pthread_mutex_unlock(&g->lock);
}

void imp_gate_abort(struct imp_gate *g)
{
	pthread_mutex_lock(&g->lock);
	g->preparing--;
	let_go(g); /* a batch may have waited for this one */
	pthread_mutex_unlock(&g->lock);
}

struct imp_batch *imp_gate_enter(struct imp_gate *g, uint64_t bytes)
{
	struct imp_batch *b;

	pthread_mutex_lock(&g->lock);
	g->preparing--;
	b = g->newest;
	if (!b || b->n >= g->batch_max ||
	    b->bytes + bytes + IMP_FRAME_OVERHEAD > IMP_PACK_BYTES) {
		struct imp_batch *nb = calloc(1, sizeof(*nb));
		if (!nb) {
			/* alone, at once: no pack to share, nothing lost */
			let_go(g);
			pthread_mutex_unlock(&g->lock);
			return NULL;
		}
		nb->first_ns = now_ns();
		if (!++g->next_id) /* 0 is no batch */
			g->next_id = 1;
		nb->id = g->next_id;
		if (b)
			b->next = nb;
		else
			g->waiting = nb;
		g->newest = b = nb;
	}
	b->n++;
	b->left++;
	b->bytes += bytes + IMP_FRAME_OVERHEAD;
	let_go(g);
	while (!b->released) {
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += 5000000; /* look again at the batch's age */
		if (until.tv_nsec >= 1000000000) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&g->cond, &g->lock, &until);
		let_go(g);
	}
	pthread_mutex_unlock(&g->lock);
	return b;
}

int imp_batch_members(const struct imp_batch *b, uint64_t *id)
{
	*id = b ? b->id : 0;
	return b ? b->n : 1;
}

void imp_batch_written(struct imp_gate *g, struct imp_batch *b)
{
	if (!b)
		return;
	pthread_mutex_lock(&g->lock);
	if (++b->written == b->n)
		pthread_cond_broadcast(&g->cond);
	while (b->written < b->n)
		pthread_cond_wait(&g->cond, &g->lock);
	pthread_mutex_unlock(&g->lock);
}

void imp_gate_leave(struct imp_gate *g, struct imp_batch *b)
{
	if (!b)
		return;
	pthread_mutex_lock(&g->lock);
	g->flight--;
	if (--b->left == 0)
		free(b);
	let_go(g);
	pthread_mutex_unlock(&g->lock);
}
