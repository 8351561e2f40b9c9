/*
 * test_workq.c - the work queue runs every job once, in order on one
 * thread, holds producers back when full, refuses after close, and drain
 * and close wait for what was queued. No wall-clock bounds: a test holds a
 * worker on a gate and watches the stats instead.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "lib/workq.h"

/* A gate a job waits at until the test opens it. */
struct gate {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int open;
};
#define GATE_INIT                                                              \
	{                                                                      \
		PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0         \
	}

static void gate_wait(struct gate *g)
{
	pthread_mutex_lock(&g->lock);
	while (!g->open)
		pthread_cond_wait(&g->cond, &g->lock);
	pthread_mutex_unlock(&g->lock);
}

static void gate_open(struct gate *g)
{
	pthread_mutex_lock(&g->lock);
	g->open = 1;
	pthread_cond_broadcast(&g->cond);
	pthread_mutex_unlock(&g->lock);
}

struct item {
	struct workq_job job; /* first: the item is the job */
	int id;
	struct gate *gate; /* waited at before counting, if set */
	atomic_int *runs;  /* runs[id] counts the calls */
	int *order;	   /* with one worker: ids in the order run */
	int *norder;
};

static void item_run(struct workq_job *job)
{
	struct item *it = (struct item *)job;
	if (it->gate)
		gate_wait(it->gate);
	if (it->order)
		it->order[(*it->norder)++] = it->id;
	if (it->runs)
		atomic_fetch_add(&it->runs[it->id], 1);
}

static void item_set(struct item *it, int id, atomic_int *runs)
{
	*it = (struct item){.job.run = item_run, .id = id, .runs = runs};
}

/* Spin (yielding) until the queue shows what the test waits for. */
static void wait_running(struct workq *q, size_t running)
{
	struct workq_stats st;
	for (workq_get_stats(q, &st); st.running != running;
	     workq_get_stats(q, &st))
		sched_yield();
}

Test(workq, open_refuses_bad_arguments)
{
	struct workq *q = NULL;
	cr_assert_eq(workq_open("t", 0, 4, &q), EINVAL);
	cr_assert_eq(workq_open("t", 257, 4, &q), EINVAL);
	cr_assert_eq(workq_open("t", 1, 0, &q), EINVAL);
	cr_assert_null(q);
	workq_close(NULL);
}

Test(workq, one_thread_runs_in_fifo_order)
{
	enum { N = 1000 };
	struct workq *q;
	cr_assert_eq(workq_open("t-fifo", 1, 16, &q), 0);
	static struct item items[N];
	static atomic_int runs[N];
	static int order[N];
	int norder = 0;
	for (int i = 0; i < N; i++) {
		item_set(&items[i], i, runs);
		items[i].order = order;
		items[i].norder = &norder;
		cr_assert_eq(workq_push(q, &items[i].job), 0);
	}
	workq_drain(q);
	cr_assert_eq(norder, N);
	for (int i = 0; i < N; i++)
		cr_assert_eq(order[i], i, "job %d ran in place %d", order[i],
			     i);
	workq_close(q);
}

enum { PRODUCERS = 8, PER_PRODUCER = 5000 };
static struct item many[PRODUCERS * PER_PRODUCER];
static atomic_int many_runs[PRODUCERS * PER_PRODUCER];

struct producer {
	struct workq *q;
	int first;
};

static void *producer_main(void *arg)
{
	struct producer *p = arg;
	for (int i = p->first; i < p->first + PER_PRODUCER; i++) {
		item_set(&many[i], i, many_runs);
		if (workq_push(p->q, &many[i].job))
			abort();
	}
	return NULL;
}

Test(workq, many_threads_run_every_job_once)
{
	struct workq *q;
	cr_assert_eq(workq_open("t-many", 8, 32, &q), 0);
	pthread_t th[PRODUCERS];
	struct producer p[PRODUCERS];
	for (int i = 0; i < PRODUCERS; i++) {
		p[i] = (struct producer){q, i * PER_PRODUCER};
		pthread_create(&th[i], NULL, producer_main, &p[i]);
	}
	for (int i = 0; i < PRODUCERS; i++)
		pthread_join(th[i], NULL);
	workq_drain(q);
	for (int i = 0; i < PRODUCERS * PER_PRODUCER; i++)
		cr_assert_eq(many_runs[i], 1, "job %d ran %d times", i,
			     many_runs[i]);
	struct workq_stats st;
	workq_get_stats(q, &st);
	cr_assert_eq(st.done, PRODUCERS * PER_PRODUCER);
	cr_assert_eq(st.queued, 0);
	cr_assert_eq(st.running, 0);
	cr_assert_eq(st.refused, 0);
	workq_close(q);
}

struct pusher {
	struct workq *q;
	struct workq_job *job;
	int err;
};

static void *pusher_main(void *arg)
{
	struct pusher *p = arg;
	p->err = workq_push(p->q, p->job);
	return NULL;
}

Test(workq, push_waits_while_full_and_resumes)
{
	struct workq *q;
	cr_assert_eq(workq_open("t-full", 1, 1, &q), 0);
	struct gate g = GATE_INIT;
	atomic_int runs[3] = {0};
	struct item it[3];
	for (int i = 0; i < 3; i++)
		item_set(&it[i], i, runs);
	it[0].gate = &g;
	cr_assert_eq(workq_push(q, &it[0].job), 0);
	wait_running(q, 1);			    /* the worker is held */
	cr_assert_eq(workq_push(q, &it[1].job), 0); /* fills the queue */

	struct pusher p = {q, &it[2].job, -1};
	pthread_t th;
	pthread_create(&th, NULL, pusher_main, &p);
	struct workq_stats st;
	for (workq_get_stats(q, &st); st.full_waits == 0;
	     workq_get_stats(q, &st))
		sched_yield();
	cr_assert_eq(st.queued, 1, "a full queue took a job");
	cr_assert_eq(runs[2], 0);

	gate_open(&g);
	pthread_join(th, NULL);
	cr_assert_eq(p.err, 0);
	workq_drain(q);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(runs[i], 1);
	workq_get_stats(q, &st);
	cr_assert_eq(st.full_waits, 1);
	cr_assert_eq(st.done, 3);
	workq_close(q);
}

Test(workq, trypush_refuses_when_full)
{
	struct workq *q;
	cr_assert_eq(workq_open("t-try", 1, 2, &q), 0);
	struct gate g = GATE_INIT;
	atomic_int runs[4] = {0};
	struct item it[4];
	for (int i = 0; i < 4; i++)
		item_set(&it[i], i, runs);
	it[0].gate = &g;
	cr_assert_eq(workq_trypush(q, &it[0].job), 0);
	wait_running(q, 1);
	cr_assert_eq(workq_trypush(q, &it[1].job), 0);
	cr_assert_eq(workq_trypush(q, &it[2].job), 0);
	cr_assert_eq(workq_trypush(q, &it[3].job), EAGAIN);
	struct workq_stats st;
	workq_get_stats(q, &st);
	cr_assert_eq(st.queued, 2);
	cr_assert_eq(st.running, 1);
	cr_assert_eq(st.refused, 1);
	cr_assert_eq(st.full_waits, 0);

	gate_open(&g);
	workq_drain(q);
	cr_assert_eq(runs[0] + runs[1] + runs[2], 3);
	cr_assert_eq(runs[3], 0, "a refused job ran");
	/* room again: the refused job can be queued now */
	cr_assert_eq(workq_trypush(q, &it[3].job), 0);
	workq_drain(q);
	cr_assert_eq(runs[3], 1);
	workq_close(q);
}

static void *closer_main(void *arg)
{
	workq_close(arg);
	return NULL;
}

Test(workq, close_runs_the_queued_and_refuses_later_pushes)
{
	struct workq *q;
	cr_assert_eq(workq_open("t-close", 2, 8, &q), 0);
	struct gate g = GATE_INIT;
	enum { N = 6, EXTRA = 8 };
	atomic_int runs[N + EXTRA] = {0};
	struct item it[N + EXTRA];
	for (int i = 0; i < N + EXTRA; i++)
		item_set(&it[i], i, runs);
	it[0].gate = it[1].gate = &g;
	for (int i = 0; i < N; i++)
		cr_assert_eq(workq_push(q, &it[i].job), 0);
	wait_running(q, 2); /* both workers held, four jobs waiting */

	pthread_t th;
	pthread_create(&th, NULL, closer_main, q);
	/* close cannot finish while the gate is shut, so q lives until a
	 * push is refused; pushes that won the race with close must run */
	int k = N, err;
	while ((err = workq_trypush(q, &it[k].job)) != ECANCELED) {
		cr_assert(err == 0 || err == EAGAIN, "trypush: %d", err);
		if (err == 0)
			k++;
		cr_assert_lt(k, N + EXTRA, "more room than the bound");
		sched_yield();
	}
	cr_assert_eq(workq_push(q, &it[k].job), ECANCELED);
	gate_open(&g);
	pthread_join(th, NULL);
	for (int i = 0; i < k; i++)
		cr_assert_eq(runs[i], 1, "queued job %d ran %d times", i,
			     runs[i]);
	cr_assert_eq(runs[k], 0, "a refused job ran");
}

struct drainer {
	struct workq *q;
	atomic_int *runs;
	int seen; /* runs when drain returned */
};

static void *drainer_main(void *arg)
{
	struct drainer *d = arg;
	workq_drain(d->q);
	d->seen = d->runs[0] + d->runs[1];
	return NULL;
}

Test(workq, drain_waits_for_running_jobs)
{
	struct workq *q;
	cr_assert_eq(workq_open("t-drain", 2, 4, &q), 0);
	struct gate g = GATE_INIT;
	atomic_int runs[2] = {0};
	struct item it[2];
	for (int i = 0; i < 2; i++) {
		item_set(&it[i], i, runs);
		it[i].gate = &g;
		cr_assert_eq(workq_push(q, &it[i].job), 0);
	}
	wait_running(q, 2); /* nothing queued, two running */
	struct drainer d = {q, runs, -1};
	pthread_t th;
	pthread_create(&th, NULL, drainer_main, &d);
	gate_open(&g);
	pthread_join(th, NULL);
	cr_assert_eq(d.seen, 2, "drain returned with a job still running");
	struct workq_stats st;
	workq_get_stats(q, &st);
	cr_assert_eq(st.running, 0);
	cr_assert_eq(st.done, 2);
	workq_close(q);
}

/* A job may free its own item: the queue does not touch it after run. */
static atomic_int freed;
static void free_run(struct workq_job *job)
{
	free(job);
	atomic_fetch_add(&freed, 1);
}

Test(workq, run_may_free_the_item)
{
	struct workq *q;
	cr_assert_eq(workq_open("t-free", 3, 4, &q), 0);
	for (int i = 0; i < 100; i++) {
		struct workq_job *j = malloc(sizeof(*j));
		j->run = free_run;
		cr_assert_eq(workq_push(q, j), 0);
	}
	workq_close(q);
	cr_assert_eq(freed, 100);
}
