/*
 * redis_session.c - client sessions of the Redis engine: registration, the
 * heartbeat thread, cleaning up after dead clients, the session list, and
 * the counters a session publishes (staged objects, pending bytes).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "meta/meta_objects.h"
#include "meta/meta_snap.h"
#include "meta/meta_volume.h"
#include "meta/redis_int.h"
#include "lib/log.h"

#define CLEAN_BATCH 1000 /* opens dropped per session cleanup script */

/* ---- sessions -------------------------------------------------------- */

static int session_clean(struct meta *m, uint64_t sid, int ttl, int *state)
{
	struct cmd c;
	redisReply *r;
	int err;

	do {
		redis_cmd_script(m, &c, SC_SESSION_CLEAN);
		redis_cmd_u64(&c, sid);
		redis_cmd_i64(&c, ttl);
		redis_cmd_u64(&c, CLEAN_BATCH);
		err = redis_run_script(m, 0, &c, &r);
		if (err)
			return err;
		*state = r->elements > 1 &&
				 r->element[1]->type == REDIS_REPLY_INTEGER
			     ? (int)r->element[1]->integer
			     : 0;
		freeReplyObject(r);
	} while (*state == 2);
	return 0;
}

int meta_clean_sessions(struct meta *m, size_t *n)
{
	struct cmd c;
	redisReply *r;
	int err, state;

	*n = 0;
	/* rounds of at most 100 dead sessions each; bounded anyway */
	for (int round = 0; round < 1000; round++) {
		redisReply *list;
		size_t count;

		redis_cmd_script(m, &c, SC_SESSION_DEAD);
		redis_cmd_i64(&c, m->opts.session_ttl);
		err = redis_run_script(m, 0, &c, &r);
		if (err)
			return err;
		list = r->elements > 1 ? r->element[1] : NULL;
		if (!list || list->type != REDIS_REPLY_ARRAY) {
			freeReplyObject(r);
			return META_EPROTO;
		}
		count = list->elements;
		for (size_t i = 0; i < count; i++) {
			uint64_t sid = redis_reply_u64(list->element[i]);
			err =
			    session_clean(m, sid, m->opts.session_ttl, &state);
			if (err)
				break;
			if (state == 1) {
				log_info("cleaned up dead session %" PRIu64,
					 sid);
				(*n)++;
			}
		}
		freeReplyObject(r);
		if (err || count < 100)
			return err;
	}
	return 0;
}

static int session_register(struct meta *m, uint64_t want, uint64_t *sid)
{
	struct cmd c;
	redisReply *r;
	int err;

	redis_cmd_script(m, &c, SC_SESSION_NEW);
	redis_cmd_bin(&c, m->sess_info, m->sess_info_len);
	redis_cmd_u64(&c, want);
	err = redis_run_script(m, 0, &c, &r);
	if (err)
		return err;
	if (r->elements < 2 || r->element[1]->type != REDIS_REPLY_INTEGER ||
	    r->element[1]->integer <= 0)
		err = META_EPROTO;
	else
		*sid = (uint64_t)r->element[1]->integer;
	freeReplyObject(r);
	return err;
}

static void heartbeat(struct meta *m)
{
	uint64_t sid = atomic_load(&m->sid);
	struct cmd c;
	redisReply *r;
	int err;

	redis_cmd_script(m, &c, SC_HEARTBEAT);
	redis_cmd_u64(&c, sid);
	err = redis_run_script(m, 0, &c, &r);
	if (err) {
		if (redis_log_ok(m))
			log_warn("session %" PRIu64 ": heartbeat failed: %s",
				 sid, gr_strerror(err));
		return;
	}
	if (r->elements > 1 && r->element[1]->type == REDIS_REPLY_INTEGER &&
	    r->element[1]->integer == 0) {
		/* another client took this session for dead: what it held
		 * open may have been reclaimed already; carry on regardless */
		log_err("session %" PRIu64 " was expired by another client "
			"(heartbeats late by more than %d s); registering it "
			"again; files open here may have lost their data",
			sid, m->opts.session_ttl);
		err = session_register(m, sid, &sid);
		if (err)
			log_err("session %" PRIu64 ": cannot register again: "
				"%s",
				sid, gr_strerror(err));
	}
	freeReplyObject(r);
}

static void *heartbeat_main(void *arg)
{
	pthread_setname_np(pthread_self(), "gr-heartbeat");
	struct meta *m = arg;
	long interval_ms = m->opts.session_ttl * 1000L / 3;
	unsigned beats = 0;
	sigset_t all;

	/* signals are for the program's main thread */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	if (interval_ms < 100)
		interval_ms = 100;
	pthread_mutex_lock(&m->sess_lock);
	while (!m->hb_stop) {
		struct timespec ts;
		size_t n;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_sec += interval_ms / 1000;
		ts.tv_nsec += (interval_ms % 1000) * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		while (!m->hb_stop &&
		       pthread_cond_timedwait(&m->sess_cond, &m->sess_lock,
					      &ts) != ETIMEDOUT)
			;
		if (m->hb_stop)
			break;
		pthread_mutex_unlock(&m->sess_lock);
		heartbeat(m);
		/* about once a TTL, look for clients that died */
		if (++beats % 3 == 0 && meta_clean_sessions(m, &n) == 0 && n)
			log_info("cleaned up %zu dead session(s)", n);
		pthread_mutex_lock(&m->sess_lock);
	}
	pthread_mutex_unlock(&m->sess_lock);
	return NULL;
}

static void heartbeat_stop(struct meta *m)
{
	int running;

	pthread_mutex_lock(&m->sess_lock);
	running = m->hb_running;
	m->hb_stop = 1;
	m->hb_running = 0;
	pthread_cond_broadcast(&m->sess_cond);
	pthread_mutex_unlock(&m->sess_lock);
	if (running)
		pthread_join(m->hb_thread, NULL);
}

/* sessioninfo value: version u8 = 1, pid i64, started i64, host length
 * u16, host, mountpoint (the rest). */
static int session_info_pack(struct meta *m, const char *mountpoint)
{
	char host[256] = "";
	size_t hl, ml = mountpoint ? strlen(mountpoint) : 0;
	uint8_t *p;

	gethostname(host, sizeof host - 1);
	hl = strlen(host);
	if (ml > 1023)
		ml = 1023;
	p = malloc(19 + hl + ml);
	if (!p)
		return ENOMEM;
	p[0] = 1;
	st64(p + 1, (uint64_t)getpid());
	st64(p + 9, (uint64_t)time(NULL));
	p[17] = (uint8_t)hl;
	p[18] = (uint8_t)(hl >> 8);
	memcpy(p + 19, host, hl);
	if (ml)
		memcpy(p + 19 + hl, mountpoint, ml);
	m->sess_info = (char *)p;
	m->sess_info_len = 19 + hl + ml;
	return 0;
}

int meta_session_open(struct meta *m, const char *mountpoint)
{
	uint64_t sid;
	size_t n;
	int err;

	if (atomic_load(&m->sid))
		return EBUSY;
	/* a read-only mount registers its session and its opens too: the
	 * volume is not read-only for other clients, and an unlink there must
	 * not pull data from under this client's readers */
	err = session_info_pack(m, mountpoint);
	if (err)
		return err;
	err = session_register(m, 0, &sid);
	if (err)
		goto free_info;
	atomic_store(&m->sid, sid);
	pthread_mutex_lock(&m->sess_lock);
	m->hb_stop = 0;
	err = pthread_create(&m->hb_thread, NULL, heartbeat_main, m);
	m->hb_running = !err;
	pthread_mutex_unlock(&m->sess_lock);
	if (err) {
		int state;
		session_clean(m, sid, -1, &state);
		atomic_store(&m->sid, 0);
		goto free_info;
	}
	if (meta_clean_sessions(m, &n) == 0 && n)
		log_info("cleaned up %zu dead session(s)", n);
	return 0;
free_info:
	free(m->sess_info);
	m->sess_info = NULL;
	return err;
}

int meta_session_close(struct meta *m)
{
	uint64_t sid = atomic_load(&m->sid);
	int err, state;

	if (!sid)
		return 0;
	heartbeat_stop(m);
	/* our opens go with the session: unlinked files we held are freed */
	err = session_clean(m, sid, -1, &state);
	atomic_store(&m->sid, 0);
	free(m->sess_info);
	m->sess_info = NULL;
	return err;
}

uint64_t meta_session_id(struct meta *m)
{
	return atomic_load(&m->sid);
}

static void session_info_unpack(const redisReply *r, struct meta_session *s)
{
	const uint8_t *p = (const uint8_t *)r->str;
	size_t n = (size_t)r->len, hl, ml;

	if (n < 19 || p[0] != 1)
		return;
	s->pid = (int64_t)ld64(p + 1);
	s->started = (int64_t)ld64(p + 9);
	hl = (size_t)(p[17] | p[18] << 8);
	if (19 + hl > n || hl >= sizeof s->host)
		return;
	memcpy(s->host, p + 19, hl);
	s->host[hl] = '\0';
	ml = n - 19 - hl;
	if (ml >= sizeof s->mountpoint)
		ml = sizeof s->mountpoint - 1;
	memcpy(s->mountpoint, p + 19 + hl, ml);
	s->mountpoint[ml] = '\0';
}

/* The string value of field id in an HGETALL reply, or NULL. */
static const redisReply *field_of(const redisReply *all, const redisReply *id)
{
	for (size_t j = 0; j + 1 < all->elements; j += 2) {
		const redisReply *k = all->element[j];
		const redisReply *v = all->element[j + 1];
		if (k->type == REDIS_REPLY_STRING && k->len == id->len &&
		    !memcmp(k->str, id->str, (size_t)k->len) &&
		    v->type == REDIS_REPLY_STRING)
			return v;
	}
	return NULL;
}

int meta_list_sessions(struct meta *m, struct meta_session **out, size_t *n)
{
	const char *a1[] = {"ZRANGE", "sessions", "0", "-1", "WITHSCORES"};
	const char *a2[] = {"HGETALL", "sessioninfo"};
	const char *a3[] = {"HGETALL", "sessionstaged"};
	const char *a4[] = {"HGETALL", "sessionmetrics"};
	size_t l1[] = {6, 8, 1, 2, 10}, l2[] = {7, 11}, l3[] = {7, 13};
	size_t l4[] = {7, 14};
	struct req reqs[4] = {{5, a1, l1, -1},
			      {2, a2, l2, -1},
			      {2, a3, l3, -1},
			      {2, a4, l4, -1}};
	redisReply *r[4];
	struct meta_session *s = NULL;
	size_t cnt = 0;
	int err;

	*out = NULL;
	*n = 0;
	err = redis_run_reqs(m, RUN_RETRY, reqs, 4, r);
	if (err)
		return err;
	if (r[0]->type != REDIS_REPLY_ARRAY ||
	    r[1]->type != REDIS_REPLY_ARRAY ||
	    r[2]->type != REDIS_REPLY_ARRAY ||
	    r[3]->type != REDIS_REPLY_ARRAY) {
		err = META_EPROTO;
		goto free_r;
	}
	s = calloc(r[0]->elements / 2 + 1, sizeof *s);
	if (!s) {
		err = ENOMEM;
		goto free_r;
	}
	for (size_t i = 0; i + 1 < r[0]->elements; i += 2) {
		const redisReply *id = r[0]->element[i];
		struct meta_session *e = &s[cnt++];
		e->sid = redis_reply_u64(id);
		e->heartbeat = (int64_t)redis_reply_u64(r[0]->element[i + 1]);
		const redisReply *v = field_of(r[1], id);
		if (v)
			session_info_unpack(v, e);
		if ((v = field_of(r[2], id))) {
			unsigned long long p = 0, b = 0;
			sscanf(v->str, "%llu %llu", &p, &b);
			e->staged_packs = p;
			e->staged_bytes = b;
		}
		if ((v = field_of(r[3], id)))
			snprintf(e->metrics, sizeof(e->metrics), "%.*s",
				 (int)v->len, v->str);
	}
	*out = s;
	*n = cnt;
free_r:
	for (int i = 0; i < 4; i++)
		freeReplyObject(r[i]);
	return err;
}

int meta_session_staged(struct meta *m, uint64_t packs, uint64_t bytes)
{
	uint64_t sid = atomic_load(&m->sid);
	struct cmd c;

	if (!sid)
		return 0;
	if (!packs && !bytes) {
		redis_cmd_init(&c, "HDEL");
		redis_cmd_str(&c, "sessionstaged");
		redis_cmd_u64(&c, sid);
	} else {
		redis_cmd_init(&c, "HSET");
		redis_cmd_str(&c, "sessionstaged");
		redis_cmd_u64(&c, sid);
		redis_cmd_fmt(&c, "%llu %llu", (unsigned long long)packs,
			      (unsigned long long)bytes);
	}
	return redis_run_void(m, RUN_RETRY, &c);
}

int meta_session_metrics(struct meta *m, const char *addr)
{
	uint64_t sid = atomic_load(&m->sid);
	struct cmd c;

	if (!sid)
		return 0;
	redis_cmd_init(&c, "HSET");
	redis_cmd_str(&c, "sessionmetrics");
	redis_cmd_u64(&c, sid);
	redis_cmd_str(&c, addr);
	return redis_run_void(m, RUN_RETRY, &c);
}

int meta_space_usage(struct meta *m, uint64_t pending, uint64_t *used,
		     uint64_t *others)
{
	struct cmd c;
	redisReply *r;
	int err;

	/* sets a value, never adds one: safe to send again */
	redis_cmd_script(m, &c, SC_SPACE_USAGE);
	redis_cmd_u64(&c, atomic_load(&m->sid));
	redis_cmd_u64(&c, pending);
	err = redis_run_script(m, RUN_RETRY, &c, &r);
	if (err)
		return err;
	if (r->elements < 3)
		err = META_EPROTO;
	else {
		*used = redis_reply_u64(r->element[1]);
		*others = redis_reply_u64(r->element[2]);
	}
	freeReplyObject(r);
	return err;
}

/* ---- test hooks ------------------------------------------------------ */

/* Test-only (declared in tests/unit/test_meta.c, not in meta.h): stop the
 * heartbeat but leave the session registered, as a crashed client would;
 * the handle then forgets its session. */
void meta_redis_test_kill_session(struct meta *m);
void meta_redis_test_kill_session(struct meta *m)
{
	heartbeat_stop(m);
	atomic_store(&m->sid, 0);
	free(m->sess_info);
	m->sess_info = NULL;
}
