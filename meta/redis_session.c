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

/* Register session want (0: a new one); *sid gets its id, and stall_seen
 * the last stall liveclock knows of, one ending now included (a gap from
 * before this client's time is none of its business: not logged). */
static int session_register(struct meta *m, uint64_t want, uint64_t *sid)
{
	struct cmd c;
	redisReply *r;
	int err;

	redis_cmd_script(m, &c, SC_SESSION_NEW);
	redis_cmd_bin(&c, m->sess_info, m->sess_info_len);
	redis_cmd_u64(&c, want);
	redis_cmd_i64(&c, m->opts.session_ttl);
	err = redis_run_script(m, 0, &c, &r);
	if (err)
		return err;
	if (r->elements < 2 || r->element[1]->type != REDIS_REPLY_INTEGER ||
	    r->element[1]->integer <= 0) {
		err = META_EPROTO;
	} else {
		*sid = (uint64_t)r->element[1]->integer;
		if (r->elements > 2)
			atomic_store(&m->stall_seen,
				     (int64_t)redis_reply_u64(r->element[2]));
	}
	freeReplyObject(r);
	return err;
}

/* A stall liveclock saw (ended at end, len ms long) that this client has
 * not logged yet: logged once. */
static void stall_note(struct meta *m, int64_t end, int64_t len)
{
	int64_t seen = atomic_load(&m->stall_seen);

	if (end <= seen ||
	    !atomic_compare_exchange_strong(&m->stall_seen, &seen, end))
		return;
	log_warn("redis ran no script of a client for %.1f s (paused, "
		 "restarting or failing over?): no session is taken for dead "
		 "for it; each got a fresh TTL of %d s from its end, and "
		 "keeps its locks and open files",
		 (double)len / 1000, m->opts.session_ttl);
}

/* ---- the volume served ----------------------------------------------- */

/* m->gone: what the heartbeat found in place of the volume mounted. */
enum { GONE_NOT, GONE_RESTORED, GONE_EMPTIED, GONE_REPLACED };

void meta_session_watch(struct meta *m, const struct meta_volume *v,
			void (*gone)(void *arg), void *arg)
{
	snprintf(m->watch.name, sizeof m->watch.name, "%s", v->name);
	snprintf(m->watch.uuid, sizeof m->watch.uuid, "%s", v->uuid);
	snprintf(m->watch.restore_id, sizeof m->watch.restore_id, "%s",
		 v->restore_id);
	m->watch.gone_fn = gone;
	m->watch.arg = arg;
}

int meta_session_gone(struct meta *m)
{
	return atomic_load(&m->gone) != GONE_NOT;
}

/* What settings of uuid u and restore_id r ("" when absent) are to the
 * volume watched: GONE_*. */
static int watch_judge(const struct meta *m, const char *u, const char *r)
{
	if (!*u)
		return GONE_EMPTIED;
	if (strcmp(u, m->watch.uuid))
		return GONE_REPLACED;
	if (strcmp(r, m->watch.restore_id))
		return GONE_RESTORED;
	return GONE_NOT;
}

/* The handle stops (from GONE_NOT), or learns what came after the volume
 * went (from GONE_EMPTIED); said once each, as an error. u: the uuid the
 * settings hold. */
static void watch_stop(struct meta *m, int from, int why, const char *u)
{
	const char *name = m->watch.name;

	if (why == GONE_NOT || why == from ||
	    !atomic_compare_exchange_strong(&m->gone, &from, why))
		return;
	if (why == GONE_RESTORED)
		log_err("volume '%s' was restored from a dump while mounted "
			"here; every operation now fails with EIO: unmount "
			"and mount again",
			name);
	else if (why == GONE_EMPTIED)
		log_err("volume '%s' is gone from its database at '%s' while "
			"mounted here (emptied, or a load under way?); every "
			"operation now fails with EIO: unmount and mount again",
			name, m->where);
	else
		log_err("the database at '%s' holds another volume (uuid %s) "
			"than '%s', mounted here; every operation now fails "
			"with EIO: unmount and mount again",
			m->where, u, name);
}

/* A string of a reply into buf ("" for anything else). */
static void reply_str(const redisReply *r, char *buf, size_t cap)
{
	snprintf(buf, cap, "%.*s",
		 r->type == REDIS_REPLY_STRING ? (int)r->len : 0,
		 r->type == REDIS_REPLY_STRING ? r->str : "");
}

/*
 * The heartbeat thread's turn once the handle stopped: the owner's
 * gone_fn runs (once); while the database holds no volume, its settings
 * are read again, to tell what replaced the volume when something does
 * (a load that emptied the database first: it is restored).
 */
static void watch_gone(struct meta *m)
{
	const char *argv[] = {"HMGET", "setting", "uuid", "restore_id"};
	size_t len[] = {5, 7, 4, 10};
	struct req q = {4, argv, len, -1};
	char u[64], rid[64];
	redisReply *r;

	if (!m->watch.told && m->watch.gone_fn)
		m->watch.gone_fn(m->watch.arg);
	m->watch.told = 1;
	if (atomic_load(&m->gone) != GONE_EMPTIED ||
	    redis_run_reqs(m, RUN_RETRY | RUN_GONE_OK, &q, 1, &r))
		return;
	if (r->type == REDIS_REPLY_ARRAY && r->elements == 2) {
		reply_str(r->element[0], u, sizeof u);
		reply_str(r->element[1], rid, sizeof rid);
		watch_stop(m, GONE_EMPTIED, watch_judge(m, u, rid), u);
	}
	freeReplyObject(r);
}

/*
 * Run the heartbeat script: renew the session, and act on what it says.
 * Cleaned away: every lock held here is lost, and the session is
 * registered again. Found dead since the last look (a new sessionlost
 * stamp): every lock held here is lost. Either is logged at once, as an
 * error. The reply's list of dead sessions is handed out in *dead (NULL:
 * not wanted), the caller's to free. Sent again after a lost connection:
 * the script reports a loss by a stamp, not once.
 */
static int session_beat(struct meta *m, redisReply **dead)
{
	uint64_t sid = atomic_load(&m->sid);
	struct cmd c;
	redisReply *r;
	int64_t lost, seen;
	int err;

	if (dead)
		*dead = NULL;
	redis_cmd_script(m, &c, SC_HEARTBEAT);
	redis_cmd_u64(&c, sid);
	redis_cmd_i64(&c, m->opts.session_ttl);
	if (m->watch.uuid[0]) {
		redis_cmd_str(&c, m->watch.uuid);
		redis_cmd_str(&c, m->watch.restore_id);
	}
	err = redis_run_script(m, RUN_RETRY, &c, &r);
	if (err)
		return err;
	if (r->elements >= 4 && r->element[1]->type == REDIS_REPLY_INTEGER &&
	    r->element[1]->integer == 2) {
		/* not the volume mounted: nothing was done */
		char u[64], rid[64];
		reply_str(r->element[2], u, sizeof u);
		reply_str(r->element[3], rid, sizeof rid);
		int why = watch_judge(m, u, rid);
		watch_stop(m, GONE_NOT, why, u);
		freeReplyObject(r);
		return why == GONE_NOT ? META_EPROTO : META_EGONE;
	}
	if (r->elements < 5 || r->element[1]->type != REDIS_REPLY_INTEGER) {
		freeReplyObject(r);
		return META_EPROTO;
	}
	stall_note(m, (int64_t)redis_reply_u64(r->element[3]),
		   (int64_t)redis_reply_u64(r->element[4]));
	lost = (int64_t)redis_reply_u64(r->element[2]);
	seen = atomic_load(&m->loss_seen);
	if (r->element[1]->integer == 0) {
		/* another client took this session for dead and cleaned it
		 * up: what it held open may have been reclaimed already, its
		 * locks are gone; carry on regardless */
		log_err("session %" PRIu64 " was expired by another client "
			"(no heartbeat for more than %d s while redis ran); "
			"registering it again; files open here may have lost "
			"their data, and %zu lock owner(s) here lost their "
			"locks (their next lock call fails)",
			sid, m->opts.session_ttl, redis_lock_lost(m));
		err = session_register(m, sid, &sid);
		atomic_store(&m->loss_seen, 0);
		if (err)
			log_err("session %" PRIu64 ": cannot register again: "
				"%s",
				sid, gr_strerror(err));
	} else if (lost && lost != seen &&
		   atomic_compare_exchange_strong(&m->loss_seen, &seen, lost)) {
		log_err("session %" PRIu64 " was found dead (no heartbeat "
			"for more than %d s while redis ran): other clients "
			"may hold its locks now; %zu lock owner(s) here lost "
			"their locks (their next lock call fails)",
			sid, m->opts.session_ttl, redis_lock_lost(m));
	}
	if (dead && r->elements > 5)
		*dead = r;
	else
		freeReplyObject(r);
	return err;
}

int redis_session_renew(struct meta *m)
{
	return session_beat(m, NULL);
}

/* One beat of the heartbeat thread: renew, clean up the sessions the
 * script found dead (about TTL + one beat after their last heartbeat),
 * send again the unlocks not delivered. 0, or the renewal's error. */
static int heartbeat(struct meta *m)
{
	uint64_t sid = atomic_load(&m->sid);
	redisReply *dead;
	size_t n = 0;
	int err, state;

	if (atomic_load(&m->gone)) {
		watch_gone(m);
		return 0;
	}
	err = session_beat(m, &dead);
	if (err == META_EGONE) {
		watch_gone(m);
		return 0;
	}
	if (err) {
		if (redis_log_ok(m))
			log_warn("session %" PRIu64 ": heartbeat failed: %s",
				 sid, gr_strerror(err));
		return err;
	}
	for (size_t i = 5; dead && i < dead->elements; i++) {
		uint64_t d = redis_reply_u64(dead->element[i]);
		if (session_clean(m, d, m->opts.session_ttl, &state) == 0 &&
		    state == 1) {
			log_info("cleaned up dead session %" PRIu64, d);
			n++;
		}
	}
	/* the script names 100 at most: the rest in rounds */
	if (dead && dead->elements >= 105) {
		size_t more;
		if (meta_clean_sessions(m, &more) == 0)
			n += more;
	}
	if (n)
		log_info("cleaned up %zu dead session(s)", n);
	if (dead)
		freeReplyObject(dead);
	redis_lock_retry(m);
	return 0;
}

/* Beats every ttl/4 (so that a running server never goes ttl/2 without
 * a script that judges liveness while a client lives: live_clock), and
 * every ttl/16 after a failed one. */
static void *heartbeat_main(void *arg)
{
	pthread_setname_np(pthread_self(), "gr-heartbeat");
	struct meta *m = arg;
	long interval_ms = m->opts.session_ttl * 1000L / 4, wait_ms;
	sigset_t all;

	/* signals are for the program's main thread */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	if (interval_ms < 100)
		interval_ms = 100;
	wait_ms = interval_ms;
	pthread_mutex_lock(&m->sess_lock);
	while (!m->hb_stop) {
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_sec += wait_ms / 1000;
		ts.tv_nsec += (wait_ms % 1000) * 1000000L;
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
		wait_ms = heartbeat(m) ? interval_ms / 4 : interval_ms;
		if (wait_ms < 100)
			wait_ms = 100;
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
	err = redis_lock_open(m);
	if (err)
		goto free_info;
	atomic_store(&m->loss_seen, 0);
	err = session_register(m, 0, &sid);
	if (err)
		goto close_locks;
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
		goto close_locks;
	}
	if (meta_clean_sessions(m, &n) == 0 && n)
		log_info("cleaned up %zu dead session(s)", n);
	return 0;
close_locks:
	redis_lock_close(m);
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
	/* our opens and locks go with the session: unlinked files we held
	 * are freed, unlocks not delivered yet are done; in the volume that
	 * is there now (m->gone), the session is none of ours */
	err = atomic_load(&m->gone) ? 0 : session_clean(m, sid, -1, &state);
	atomic_store(&m->sid, 0);
	redis_lock_close(m);
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

/*
 * The heartbeat below which a session is dead now, as live_floor
 * (lua/lib/lock.lua) would judge it, from TIME and HMGET liveclock t s,
 * without moving the clock: a gap of more than ttl/2 going on now is a
 * stall in progress (the next script ends it), then none is; -1: none is.
 */
static int64_t live_floor_now(const redisReply *time, const redisReply *clk,
			      int ttl)
{
	int64_t now, last, stall;

	if (time->type != REDIS_REPLY_ARRAY || time->elements != 2 ||
	    clk->type != REDIS_REPLY_ARRAY || clk->elements != 2)
		return -1;
	now = (int64_t)redis_reply_u64(time->element[0]) * 1000 +
	      (int64_t)redis_reply_u64(time->element[1]) / 1000;
	last = (int64_t)redis_reply_u64(clk->element[0]);
	stall = (int64_t)redis_reply_u64(clk->element[1]);
	if (last && now - last > ttl * 500LL)
		return -1;
	if (stall >= now - ttl * 1000LL)
		return -1;
	return now / 1000 - ttl;
}

int meta_list_sessions(struct meta *m, struct meta_session **out, size_t *n)
{
	const char *a1[] = {"ZRANGE", "sessions", "0", "-1", "WITHSCORES"};
	const char *a2[] = {"HGETALL", "sessioninfo"};
	const char *a3[] = {"HGETALL", "sessionstaged"};
	const char *a4[] = {"HGETALL", "sessionmetrics"};
	const char *a5[] = {"TIME"};
	const char *a6[] = {"HMGET", "liveclock", "t", "s"};
	size_t l1[] = {6, 8, 1, 2, 10}, l2[] = {7, 11}, l3[] = {7, 13};
	size_t l4[] = {7, 14}, l5[] = {4}, l6[] = {5, 9, 1, 1};
	struct req reqs[6] = {{5, a1, l1, -1}, {2, a2, l2, -1},
			      {2, a3, l3, -1}, {2, a4, l4, -1},
			      {1, a5, l5, -1}, {4, a6, l6, -1}};
	redisReply *r[6];
	struct meta_session *s = NULL;
	size_t cnt = 0;
	int64_t floor;
	int err;

	*out = NULL;
	*n = 0;
	err = redis_run_reqs(m, RUN_RETRY, reqs, 6, r);
	if (err)
		return err;
	if (r[0]->type != REDIS_REPLY_ARRAY ||
	    r[1]->type != REDIS_REPLY_ARRAY ||
	    r[2]->type != REDIS_REPLY_ARRAY ||
	    r[3]->type != REDIS_REPLY_ARRAY) {
		err = META_EPROTO;
		goto free_r;
	}
	floor = live_floor_now(r[4], r[5], m->opts.session_ttl);
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
		e->stale = floor >= 0 && e->heartbeat < floor;
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
	for (int i = 0; i < 6; i++)
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
	redis_lock_close(m);
	free(m->sess_info);
	m->sess_info = NULL;
}
