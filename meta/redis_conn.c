/*
 * redis_conn.c - the Redis engine's link to the server: the pool of
 * connections shared by FUSE's worker threads, Sentinel, commands and
 * their pipelines and retries, the Lua scripts loaded as one function
 * library (FCALL; EVALSHA where the server refuses functions; their text
 * is meta/lua/), meta_open. URLs are parsed by redis_url.c, records
 * decoded by redis_rec.c.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <stdarg.h>
#include <time.h>

#include <xxhash.h>

#include "meta/meta_objects.h"
#include "meta/meta_snap.h"
#include "meta/meta_volume.h"
#include "meta/redis_int.h"
#include "lib/fsutil.h"
#include "lib/log.h"

#define CONNECT_TIMEOUT_S   3
#define COMMAND_TIMEOUT_S   10
#define LIB_PREFIX	    "granary_"	 /* function libraries of every build */
#define LIB_STAMP	    "-- loaded " /* a library's second line: load time */
#define LIB_STALE_S	    (24 * 3600) /* others' libraries older are deleted */
#define SENTINEL_TIMEOUT_MS 1000 /* connect and answer, per sentinel */

/* ---- connections ----------------------------------------------------- */

/* At most one connection error line a second: a dead server would
 * otherwise log once per FUSE request. */
int redis_log_ok(struct meta *m)
{
	int64_t now = (int64_t)time(NULL);
	int64_t last = atomic_load(&m->last_log);
	return last != now &&
	       atomic_compare_exchange_strong(&m->last_log, &last, now);
}

/* How long calls that may go again wait for the server (seconds; 0:
 * they do not): the URL's failover_timeout, or meta_set_retry_window's. */
static int retry_window(struct meta *m)
{
	return __atomic_load_n(&m->addr.failover_timeout, __ATOMIC_RELAXED);
}

void meta_set_retry_window(struct meta *m, int seconds)
{
	if (!m->addr.failover_named)
		__atomic_store_n(&m->addr.failover_timeout,
				 seconds > 0 ? seconds : 0, __ATOMIC_RELAXED);
}

/* The command timeout of a connection: COMMAND_TIMEOUT_S, or without
 * sentinels the retry window if longer, so that a stall of the one server
 * shorter than the window (a slow fsync, CLIENT PAUSE) is a pause too: a
 * call under way waits it out. With sentinels a call does not wait longer
 * on a master that may be gone: a new one is the way on. A WAIT's reply
 * comes after up to wait_timeout more. */
static int cmd_timeout_s(struct meta *m)
{
	int w = m->addr.master[0] ? 0 : retry_window(m);
	int t = w > COMMAND_TIMEOUT_S ? w : COMMAND_TIMEOUT_S;
	return m->addr.wait ? t + m->addr.wait_timeout : t;
}

/* Give c the command timeout it should have now (the window changes
 * when a mount is up and as it unmounts). */
static void conn_timeout(struct meta *m, struct conn *c)
{
	int t = cmd_timeout_s(m);
	if (c->rc && c->timeout_s != t) {
		struct timeval tv = {t, 0};
		if (redisSetTimeout(c->rc, tv) == REDIS_OK)
			c->timeout_s = t;
	}
}

static void conn_drop(struct conn *c)
{
	if (c->rc) {
		redisFree(c->rc);
		c->rc = NULL;
	}
}

/* Connection trouble: drop c and make idle peers reconnect before their
 * next use (after a server restart they are all dead). */
static void conn_failed(struct meta *m, struct conn *c)
{
	conn_drop(c);
	pthread_mutex_lock(&m->pool_lock);
	m->epoch++;
	pthread_mutex_unlock(&m->pool_lock);
}

static int error_class(const char *s)
{
	if (!strncmp(s, "NOAUTH", 6) || !strncmp(s, "WRONGPASS", 9) ||
	    strstr(s, "invalid password"))
		return META_EAUTH;
	if (!strncmp(s, "READONLY", 8))
		return EROFS;
	if (!strncmp(s, "OOM", 3))
		return ENOSPC;
	if (!strncmp(s, "LOADING", 7) || !strncmp(s, "BUSY ", 5) ||
	    !strncmp(s, "MASTERDOWN", 10) || !strncmp(s, "TRYAGAIN", 8))
		return META_EUNREACH;
	return META_EPROTO;
}

/* An AUTH refused only because the server has no password: fine. */
static int auth_unneeded(const char *err)
{
	return strstr(err, "without any password configured") ||
	       strstr(err, "no password is set");
}

void redis_server_addr(struct meta *m, char *buf, size_t cap)
{
	pthread_mutex_lock(&m->pool_lock);
	if (m->addr.path[0])
		snprintf(buf, cap, "%s", m->addr.path);
	else if (!m->addr.host[0])
		snprintf(buf, cap, "(none yet)");
	else if (strchr(m->addr.host, ':'))
		snprintf(buf, cap, "[%s]:%d", m->addr.host, m->addr.port);
	else
		snprintf(buf, cap, "%s:%d", m->addr.host, m->addr.port);
	pthread_mutex_unlock(&m->pool_lock);
}

/* ---- sentinels ------------------------------------------------------- */

/*
 * Ask sentinel s where the master is: 0 and its address in host, port;
 * META_ENOMASTER when the sentinel knows no master of that name;
 * META_EUNREACH when it did not answer (down, refused the password, not a
 * sentinel), logged.
 */
static int sentinel_ask(struct meta *m, const struct hostport *s, char *host,
			size_t cap, int *port)
{
	struct timeval t = {SENTINEL_TIMEOUT_MS / 1000,
			    (SENTINEL_TIMEOUT_MS % 1000) * 1000};
	redisContext *rc = redisConnectWithTimeout(s->host, s->port, t);
	redisReply *r = NULL;
	int err = META_EUNREACH;

	if (!rc)
		return ENOMEM;
	if (rc->err || redisSetTimeout(rc, t) != REDIS_OK) {
		log_debug("sentinel %s:%d of '%s': %s", s->host, s->port,
			  m->where, rc->errstr);
		goto free_rc;
	}
	if (m->addr.sentinel_pass[0]) {
		r = redisCommand(rc, "AUTH %s", m->addr.sentinel_pass);
		if (!r ||
		    (r->type == REDIS_REPLY_ERROR && !auth_unneeded(r->str))) {
			log_err("sentinel %s:%d of '%s' refused the password "
				"(GRANARY_SENTINEL_PASSWORD): %s",
				s->host, s->port, m->where,
				r ? r->str : rc->errstr);
			goto free_r;
		}
		freeReplyObject(r);
	}
	r = redisCommand(rc, "SENTINEL get-master-addr-by-name %s",
			 m->addr.master);
	if (!r)
		goto free_rc;
	if (r->type == REDIS_REPLY_NIL) {
		err = META_ENOMASTER;
	} else if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
		   r->element[0]->type == REDIS_REPLY_STRING &&
		   r->element[1]->type == REDIS_REPLY_STRING &&
		   (size_t)r->element[0]->len < cap &&
		   atoi(r->element[1]->str) > 0) {
		memcpy(host, r->element[0]->str, (size_t)r->element[0]->len);
		host[r->element[0]->len] = '\0';
		*port = atoi(r->element[1]->str);
		err = 0;
	} else {
		log_err("sentinel %s:%d of '%s' gave no master address: %s",
			s->host, s->port, m->where,
			r->type == REDIS_REPLY_ERROR ? r->str : "odd reply");
	}
free_r:
	if (r)
		freeReplyObject(r);
free_rc:
	redisFree(rc);
	return err;
}

/*
 * The master's address from the first sentinel that knows it, starting
 * with the one that answered last (*k gets its index): a sentinel that is
 * down costs every later connect a timeout otherwise. META_ENOMASTER when
 * the sentinels that answered all know no such master, META_ESENTINEL
 * when none answered.
 */
static int sentinel_find(struct meta *m, char *host, size_t cap, int *port,
			 int *k)
{
	int n = m->addr.nsentinel, first = atomic_load(&m->sentinel_first);
	int unknown = 0;

	for (int i = 0; i < n; i++) {
		int err;
		*k = (first + i) % n;
		err = sentinel_ask(m, &m->addr.sentinel[*k], host, cap, port);
		if (!err) {
			atomic_store(&m->sentinel_first, *k);
			return 0;
		}
		if (err == META_ENOMASTER)
			unknown++;
		else if (err != META_EUNREACH)
			return err;
	}
	if (unknown) {
		log_err("the sentinels of '%s' know no master named '%s'",
			m->where, m->addr.master);
		return META_ENOMASTER;
	}
	if (redis_log_ok(m))
		log_err("no sentinel of '%s' answered", m->where);
	return META_ESENTINEL;
}

/* With sentinels, the server they name must say it is the master: after
 * a failover a sentinel may still name the old one for a while. */
static int role_check(struct meta *m, redisContext *rc, const char *host,
		      int port)
{
	redisReply *r = redisCommand(rc, "ROLE");
	int err = 0;

	if (!r)
		return META_EUNREACH;
	if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
	    r->element[0]->type != REDIS_REPLY_STRING ||
	    strcmp(r->element[0]->str, "master") != 0) {
		if (redis_log_ok(m))
			log_warn("redis at %s:%d, the master of '%s' for the "
				 "sentinels, is not a master (%s): a failover "
				 "under way?",
				 host, port, m->where,
				 r->type == REDIS_REPLY_ARRAY && r->elements &&
					 r->element[0]->type ==
					     REDIS_REPLY_STRING
				     ? r->element[0]->str
				     : "no role");
		err = META_EUNREACH;
	}
	freeReplyObject(r);
	return err;
}

/* The master the sentinels named is reachable: the one in use now. */
static void master_use(struct meta *m, const char *host, int port)
{
	int changed;

	pthread_mutex_lock(&m->pool_lock);
	changed = strcmp(m->addr.host, host) != 0 || m->addr.port != port;
	if (changed) {
		if (m->addr.host[0])
			log_warn("the master of '%s' is now %s:%d (was %s:%d)",
				 m->where, host, port, m->addr.host,
				 m->addr.port);
		snprintf(m->addr.host, sizeof m->addr.host, "%s", host);
		m->addr.port = port;
	}
	pthread_mutex_unlock(&m->pool_lock);
}

/* ---- connections, continued ------------------------------------------ */

/*
 * Connect c to the server: the URL's, or the master the sentinels name
 * now (asked at every connect, which is rare: at open, then after a
 * connection failed). Then AUTH, ROLE (sentinels only), SELECT.
 */
static int conn_connect(struct meta *m, struct conn *c)
{
	struct timeval ct = {CONNECT_TIMEOUT_S, 0};
	struct timeval ot = {cmd_timeout_s(m), 0};
	redisContext *rc;
	redisReply *r;
	char host[256];
	int port = m->addr.port, k = 0, err = 0;

	pthread_mutex_lock(&m->pool_lock);
	c->epoch = m->epoch;
	pthread_mutex_unlock(&m->pool_lock);
	if (m->addr.master[0]) {
		err = sentinel_find(m, host, sizeof host, &port, &k);
		if (err)
			return err;
	} else {
		snprintf(host, sizeof host, "%s", m->addr.host);
	}
	if (m->addr.path[0])
		rc = redisConnectUnixWithTimeout(m->addr.path, ct);
	else
		rc = redisConnectWithTimeout(host, port, ct);
	if (!rc)
		return ENOMEM;
	if (rc->err) {
		if (redis_log_ok(m) && m->addr.master[0])
			log_err("cannot reach redis at '%s', master %s:%d: %s",
				m->where, host, port, rc->errstr);
		else if (redis_log_ok(m))
			log_err("cannot reach redis at '%s': %s", m->where,
				rc->errstr);
		err = META_EUNREACH;
		goto free_rc;
	}
	if (redisSetTimeout(rc, ot) != REDIS_OK) {
		err = META_EUNREACH;
		goto free_rc;
	}
	c->timeout_s = (int)ot.tv_sec;
	if (!m->addr.path[0])
		redisEnableKeepAlive(rc);
	if (m->addr.pass[0]) {
		if (m->addr.user[0])
			r = redisCommand(rc, "AUTH %s %s", m->addr.user,
					 m->addr.pass);
		else
			r = redisCommand(rc, "AUTH %s", m->addr.pass);
		if (!r) {
			err = META_EUNREACH;
			goto free_rc;
		}
		if (r->type == REDIS_REPLY_ERROR && !auth_unneeded(r->str)) {
			log_err("redis at '%s' refused the password: %s",
				m->where, r->str);
			err = META_EAUTH;
		}
		freeReplyObject(r);
		if (err)
			goto free_rc;
	}
	if (m->addr.master[0]) {
		err = role_check(m, rc, host, port);
		if (err)
			goto free_rc;
	}
	if (m->addr.db) {
		r = redisCommand(rc, "SELECT %d", m->addr.db);
		if (!r) {
			err = META_EUNREACH;
			goto free_rc;
		}
		if (r->type == REDIS_REPLY_ERROR) {
			err = error_class(r->str);
			if (err == META_EPROTO)
				err = META_EURL;
			log_err("cannot use database %d at '%s': %s",
				m->addr.db, m->where, r->str);
		}
		freeReplyObject(r);
		if (err)
			goto free_rc;
	}
	if (m->addr.master[0])
		master_use(m, host, port);
	c->rc = rc;
	return 0;
free_rc:
	/* the sentinel asked first named a master that is gone: ask the
	 * next one first next time */
	if (m->addr.master[0] && err == META_EUNREACH)
		atomic_store(&m->sentinel_first, (k + 1) % m->addr.nsentinel);
	redisFree(rc);
	return err;
}

/*
 * Is c closed by the server (or holding what nobody asked for)? Looked at
 * before a request goes out: a connection the server dropped while idle
 * (restart, kill, a failover's CLIENT KILL) is then replaced before
 * anything is sent on it, so that the request cannot be lost on the way
 * and need not be reported as "may or may not have happened".
 */
static int conn_closed(struct conn *c)
{
	struct pollfd p = {.fd = c->rc->fd, .events = POLLIN};

	return poll(&p, 1, 0) != 0;
}

static struct conn *pool_take(struct meta *m)
{
	struct conn *c;
	int stale;

	pthread_mutex_lock(&m->pool_lock);
	while (SLIST_EMPTY(&m->idle))
		pthread_cond_wait(&m->pool_cond, &m->pool_lock);
	c = SLIST_FIRST(&m->idle);
	SLIST_REMOVE_HEAD(&m->idle, link);
	stale = c->rc && c->epoch != m->epoch;
	pthread_mutex_unlock(&m->pool_lock);
	if (stale)
		conn_drop(c);
	return c;
}

static void pool_put(struct meta *m, struct conn *c)
{
	pthread_mutex_lock(&m->pool_lock);
	SLIST_INSERT_HEAD(&m->idle, c, link);
	pthread_cond_signal(&m->pool_cond);
	pthread_mutex_unlock(&m->pool_lock);
}

/* ---- commands -------------------------------------------------------- */

void redis_cmd_bin(struct cmd *c, const void *p, size_t n)
{
	gr_assert(c->argc < CMD_MAX);
	c->argv[c->argc] = p;
	c->len[c->argc++] = n;
}

void redis_cmd_str(struct cmd *c, const char *s)
{
	redis_cmd_bin(c, s, strlen(s));
}

void redis_cmd_init(struct cmd *c, const char *name)
{
	c->argc = 0;
	c->script = -1;
	redis_cmd_str(c, name);
}

void redis_cmd_fmt(struct cmd *c, const char *fmt, ...)
{
	va_list ap;
	int n;

	gr_assert(c->argc < CMD_MAX);
	va_start(ap, fmt);
	n = vsnprintf(c->num[c->argc], sizeof c->num[0], fmt, ap);
	va_end(ap);
	gr_assert(n > 0 && (size_t)n < sizeof c->num[0]);
	redis_cmd_bin(c, c->num[c->argc], (size_t)n);
}

void redis_cmd_u64(struct cmd *c, uint64_t v)
{
	redis_cmd_fmt(c, "%" PRIu64, v);
}

void redis_cmd_i64(struct cmd *c, int64_t v)
{
	redis_cmd_fmt(c, "%" PRId64, v);
}

/* A per-inode key: prefix and decimal inode number ("d123"). */
void redis_cmd_key(struct cmd *c, const char *prefix, uint64_t ino)
{
	redis_cmd_fmt(c, "%s%" PRIu64, prefix, ino);
}

/* The hash that holds inode ino, and the field of its attributes or, with
 * tail, of chunk 0's slice records while they are short (SCHEMA.md). */
void redis_cmd_inode(struct cmd *c, uint64_t ino, int tail)
{
	redis_cmd_fmt(c, "n%" PRIu64, ino / INO_PER_HASH);
	redis_cmd_u64(c, ino % INO_PER_HASH + (tail ? INO_PER_HASH : 0));
}

void redis_cmd_script(struct meta *m, struct cmd *c, enum script s)
{
	redis_cmd_init(c, m->fcall ? "FCALL" : "EVALSHA");
	redis_cmd_str(c, m->fcall ? m->fn[s] : m->sha[s]);
	redis_cmd_str(c, "0");
	c->script = (int)s;
}

/* Reads that change nothing: no WAIT after them in the no-loss mode.
 * A command not listed (every script) is taken for a change. */
static int req_is_read(const struct req *r)
{
	static const char *const reads[] = {
	    "GET",	 "MGET",  "HGET",   "HMGET",  "HGETALL",  "HEXISTS",
	    "HKEYS",	 "HLEN",  "HSCAN",  "SCAN",   "SSCAN",	  "ZSCAN",
	    "ZCOUNT",	 "ZCARD", "ZRANGE", "ZSCORE", "SMEMBERS", "SCARD",
	    "LRANGE",	 "LLEN",  "EXISTS", "TYPE",   "TIME",	  "PING",
	    "INFO",	 "ROLE",  "CONFIG", "DBSIZE", "MEMORY",	  "FCALL_RO",
	    "EVALSHA_RO"};

	for (size_t i = 0; i < sizeof reads / sizeof reads[0]; i++)
		if (r->len[0] == strlen(reads[i]) &&
		    strncasecmp(r->argv[0], reads[i], r->len[0]) == 0)
			return 1;
	return 0;
}

/*
 * Scripts the no-loss mode does not WAIT after: they read (lookup,
 * session_dead), or keep a client's own books (its opens and closes, its
 * heartbeat, the bytes it has pending), whose loss in a failover loses no
 * data a caller was told is safe. Reading files then goes on while no
 * replica is up; only changes fail.
 */
static int script_nowait(int s)
{
	return s == SC_LOOKUP || s == SC_SESSION_DEAD || s == SC_OPEN ||
	       s == SC_CLOSE || s == SC_HEARTBEAT || s == SC_SPACE_USAGE;
}

/* Does this pipeline change the database, in the no-loss mode? */
static int reqs_wait(struct meta *m, const struct req *reqs, int n)
{
	if (!m->addr.wait)
		return 0;
	for (int i = 0; i < n; i++)
		if (reqs[i].script >= 0 ? !script_nowait(reqs[i].script)
					: !req_is_read(&reqs[i]))
			return 1;
	return 0;
}

/* Errors of conn_exec and redis_run_reqs's inner steps, never returned */
#define RUN_RELOAD (-1) /* the server lacks the scripts: load, resend */
#define RUN_SHORT  (-2) /* fewer replicas than ?wait=N acknowledged */

/* One pipeline sent and its replies read (or the connection lost): a
 * round trip, counted for the metrics. */
static void round_trip(struct meta *m, int64_t t0, int failed)
{
	int64_t dt = fsutil_mono_ns() - t0;

	metric_add(&m->rt.count, 1);
	if (failed)
		metric_add(&m->rt.errors, 1);
	metric_hist_observe(&m->rt.lat, dt > 0 ? (uint64_t)dt : 0);
}

void meta_get_round_trips(struct meta *m, struct meta_round_trips *out)
{
	out->count = metric_get(&m->rt.count);
	out->errors = metric_get(&m->rt.errors);
	metric_hist_read(&m->rt.lat, &out->lat);
}

/*
 * Send reqs on c and read their replies into out. With wait (the no-loss
 * mode), a WAIT for the URL's replicas follows in the same pipeline, so
 * that it costs no round trip of its own; RUN_SHORT when fewer replicas
 * than asked acknowledged in time (the replies are handed out all the
 * same). EIO when the connection failed (c is dropped).
 */
static int conn_exec(struct meta *m, struct conn *c, const struct req *reqs,
		     int n, redisReply **out, int wait)
{
	int i, got = 0, err = 0;
	int64_t t0 = fsutil_mono_ns();

	for (i = 0; i < n; i++)
		if (redisAppendCommandArgv(c->rc, reqs[i].argc, reqs[i].argv,
					   reqs[i].len) != REDIS_OK)
			goto fail;
	if (wait && redisAppendCommand(c->rc, "WAIT %d %d", m->addr.wait,
				       m->addr.wait_timeout * 1000) != REDIS_OK)
		goto fail;
	for (got = 0; got < n; got++) {
		void *r;
		if (redisGetReply(c->rc, &r) != REDIS_OK || !r)
			goto fail;
		out[got] = r;
	}
	if (wait) {
		redisReply *r;
		if (redisGetReply(c->rc, (void **)&r) != REDIS_OK || !r)
			goto fail;
		if (r->type != REDIS_REPLY_INTEGER ||
		    r->integer < m->addr.wait) {
			if (redis_log_ok(m))
				log_err(
				    "redis at '%s': %s%lld of the %d "
				    "replicas asked for (?wait=) had a "
				    "change after %d s: the call fails",
				    m->where,
				    r->type == REDIS_REPLY_ERROR ? r->str : "",
				    r->type == REDIS_REPLY_INTEGER ? r->integer
								   : 0LL,
				    m->addr.wait, m->addr.wait_timeout);
			err = RUN_SHORT;
		}
		freeReplyObject(r);
	}
	round_trip(m, t0, 0);
	return err;
fail:
	round_trip(m, t0, 1);
	if (redis_log_ok(m))
		log_err("lost connection to redis at '%s': %s", m->where,
			c->rc->errstr[0] ? c->rc->errstr : "out of memory");
	for (i = 0; i < got; i++) {
		freeReplyObject(out[i]);
		out[i] = NULL;
	}
	conn_failed(m, c);
	return EIO;
}

/*
 * Every script as one function library, for FUNCTION LOAD (Redis 7): the
 * prelude once, then each script registered as the function
 * "<lib>_<name>", which starts with fresh(). A call then runs only its
 * body, where EVALSHA runs the prelude's definitions every time. lib gets
 * the library's name, "granary_" and a hash of the text, so that clients
 * of different builds sharing a server each call their own functions, and
 * any change of a script's text is a new name. Returns the text but its
 * first two lines, which library_load puts in front (name, load time),
 * malloc'd; NULL when out of memory.
 */
static char *lua_library(char *lib, size_t cap)
{
	static const char fn[] =
	    "redis.register_function('%s_%s', function(KEYS, ARGV)\n"
	    "fresh()\n%s\nend)\n";
	uint64_t h = XXH3_64bits(fn, sizeof fn);
	size_t len;
	char *text;
	FILE *f;

	h = XXH3_64bits_withSeed(redis_lua_prelude, strlen(redis_lua_prelude),
				 h);
	for (int i = 0; i < SC_N; i++) {
		h = XXH3_64bits_withSeed(redis_script_name[i],
					 strlen(redis_script_name[i]) + 1, h);
		h = XXH3_64bits_withSeed(redis_script_body[i],
					 strlen(redis_script_body[i]), h);
	}
	snprintf(lib, cap, "%s%016llx", LIB_PREFIX, (unsigned long long)h);
	f = open_memstream(&text, &len);
	if (!f)
		return NULL;
	/* library_load puts the name and the load time in front */
	fputs(redis_lua_prelude, f);
	for (int i = 0; i < SC_N; i++)
		fprintf(f, fn, lib, redis_script_name[i], redis_script_body[i]);
	if (ferror(f)) {
		fclose(f);
		free(text);
		return NULL;
	}
	if (fclose(f) != 0)
		return NULL;
	return text;
}

/* Server time (unix seconds), asked on c. */
static int conn_time(struct meta *m, struct conn *c, int64_t *now)
{
	const char *argv[1] = {"TIME"};
	size_t len[1] = {4};
	struct req req = {1, argv, len, -1};
	redisReply *r;
	int err = conn_exec(m, c, &req, 1, &r, 0);

	if (err)
		return err;
	if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
	    r->element[0]->type != REDIS_REPLY_STRING)
		err = META_EPROTO;
	else
		*now = atoll(r->element[0]->str);
	freeReplyObject(r);
	return err;
}

/* A library name a granary build gives: LIB_PREFIX, 16 hex digits. */
static int lib_is_build(const redisReply *name)
{
	size_t n = strlen(LIB_PREFIX);

	if (name->type != REDIS_REPLY_STRING || (size_t)name->len != n + 16 ||
	    strncmp(name->str, LIB_PREFIX, n) != 0)
		return 0;
	for (size_t i = n; i < n + 16; i++)
		if (!isxdigit((unsigned char)name->str[i]))
			return 0;
	return 1;
}

/* When a library was last loaded: LIB_STAMP on its second line; -1 when
 * it has none (a build from before the stamps). */
static int64_t lib_stamp(const redisReply *code)
{
	const char *nl;

	if (code->type != REDIS_REPLY_STRING)
		return -1;
	nl = memchr(code->str, '\n', (size_t)code->len);
	if (!nl || strncmp(nl + 1, LIB_STAMP, strlen(LIB_STAMP)) != 0)
		return -1;
	return atoll(nl + 1 + strlen(LIB_STAMP));
}

/* FUNCTION DELETE name; *n counts it when it was there (a peer may have
 * deleted it first). */
static int lib_delete(struct meta *m, struct conn *c, const redisReply *name,
		      int *n)
{
	const char *argv[3] = {"FUNCTION", "DELETE", name->str};
	size_t len[3] = {8, 6, (size_t)name->len};
	struct req req = {3, argv, len, -1};
	redisReply *r;
	int err = conn_exec(m, c, &req, 1, &r, 0);

	if (!err) {
		*n += r->type != REDIS_REPLY_ERROR;
		freeReplyObject(r);
	}
	return err;
}

enum { LIB_ABSENT, LIB_FRESH, LIB_OLD };

/*
 * At open: delete the libraries of other builds that no client loaded for
 * LIB_STALE_S, so that they do not pile up on the server (SCHEMA.md,
 * "Connections"). A client of such a build that still runs loses one
 * reload: its next call finds its functions gone and loads them again,
 * with a fresh stamp. Reloads never sweep, so two builds cannot delete
 * each other's library call after call. *own: this build's library is
 * absent, or its stamp is recent (LIB_FRESH) or older than half
 * LIB_STALE_S (LIB_OLD: the load replaces it, so that a library its
 * clients keep using is never taken for stale). A server that refuses
 * FUNCTION LIST (before Redis 7, an ACL) has nothing to sweep.
 */
static int libs_sweep(struct meta *m, struct conn *c, int64_t now, int *own)
{
	const char *argv[5] = {"FUNCTION", "LIST", "LIBRARYNAME",
			       LIB_PREFIX "*", "WITHCODE"};
	size_t len[5] = {8, 4, 11, strlen(LIB_PREFIX) + 1, 8};
	struct req req = {5, argv, len, -1};
	redisReply *r;
	int err, n = 0;

	*own = LIB_ABSENT;
	err = conn_exec(m, c, &req, 1, &r, 0);
	if (err)
		return err;
	for (size_t i = 0;
	     r->type == REDIS_REPLY_ARRAY && i < r->elements && !err; i++) {
		const redisReply *l = r->element[i], *name = NULL, *code = NULL;
		int64_t t;

		for (size_t k = 0;
		     l->type == REDIS_REPLY_ARRAY && k + 1 < l->elements;
		     k += 2) {
			const redisReply *f = l->element[k];
			if (f->type != REDIS_REPLY_STRING)
				continue;
			if (!strcmp(f->str, "library_name"))
				name = l->element[k + 1];
			else if (!strcmp(f->str, "library_code"))
				code = l->element[k + 1];
		}
		if (!name || !code || !lib_is_build(name))
			continue;
		t = lib_stamp(code);
		if (!strcmp(name->str, m->lib)) {
			*own = t >= 0 && now - t < LIB_STALE_S / 2 ? LIB_FRESH
								   : LIB_OLD;
			continue;
		}
		if (t >= 0 && now - t < LIB_STALE_S)
			continue;
		err = lib_delete(m, c, name, &n);
	}
	freeReplyObject(r);
	if (n)
		log_info("deleted %d function librar%s of other granary builds "
			 "from redis at '%s' (not loaded for %d hours)",
			 n, n == 1 ? "y" : "ies", m->where, LIB_STALE_S / 3600);
	return err;
}

/* FUNCTION LOAD the library on c, stamped with now (REPLACE: over this
 * build's, to renew its stamp): 0 when the server has it now (a library
 * of its name is this build's, maybe loaded by a peer), -1 when it refused
 * (no functions before Redis 7, no permission; logged: at open, where
 * EVALSHA takes over, as information), EIO when the connection failed. */
static int library_load(struct meta *m, struct conn *c, int64_t now, int open,
			int replace)
{
	const char *argv[4] = {"FUNCTION", "LOAD", "REPLACE"};
	size_t len[4] = {8, 4, 7};
	struct req req = {3 + replace, argv, len, -1};
	redisReply *r;
	char *text;
	int err;

	if (asprintf(&text, "#!lua name=%s\n" LIB_STAMP "%lld\n%s", m->lib,
		     (long long)now, m->lib_text) < 0)
		return ENOMEM;
	argv[2 + replace] = text;
	len[2 + replace] = strlen(text);
	err = conn_exec(m, c, &req, 1, &r, 0);
	free(text);
	if (err)
		return err;
	if (r->type == REDIS_REPLY_ERROR && !strstr(r->str, "already exists")) {
		log_msg(open ? LOG_INFO : LOG_ERR,
			"redis at '%s' refused the function library (%s)%s",
			m->where, r->str,
			open ? ": the scripts run with EVALSHA" : "");
		err = -1;
	}
	freeReplyObject(r);
	return err;
}

/*
 * Load the scripts on c. At open (record) the stale libraries of other
 * builds are deleted (libs_sweep); then the function library goes
 * first, and where the server takes it the scripts run with FCALL; else,
 * or with GRANARY_META_EVALSHA=1 in the environment, SCRIPT LOAD records
 * their SHA1s for EVALSHA. Afterwards (server restarted or flushed,
 * scripts lost) they are loaded again the way chosen at open, and SHA1s
 * checked.
 */
static int scripts_load(struct meta *m, struct conn *c, int record)
{
	const char *argv[SC_N][3];
	size_t len[SC_N][3];
	struct req reqs[SC_N];
	redisReply *out[SC_N];
	const char *env = getenv("GRANARY_META_EVALSHA");
	int i, err, own = LIB_ABSENT;
	int64_t now;

	err = conn_time(m, c, &now);
	if (!err && record)
		err = libs_sweep(m, c, now, &own);
	if (err)
		return err;
	if (m->fcall || (record && !(env && strcmp(env, "1") == 0))) {
		err = library_load(m, c, now, record, own == LIB_OLD);
		if (err == 0 && record) {
			m->fcall = 1;
			log_debug("redis at '%s': scripts run as functions "
				  "(library %s)",
				  m->where, m->lib);
		}
		if (err != -1)
			return err;
		if (m->fcall) /* it had the library, and now refuses it */
			return META_EPROTO;
		/* refused at open: SCRIPT LOAD below */
	}
	for (i = 0; i < SC_N; i++) {
		argv[i][0] = "SCRIPT";
		argv[i][1] = "LOAD";
		argv[i][2] = m->script_text[i];
		len[i][0] = 6;
		len[i][1] = 4;
		len[i][2] = strlen(m->script_text[i]);
		reqs[i] = (struct req){3, argv[i], len[i], -1};
	}
	err = conn_exec(m, c, reqs, SC_N, out, 0);
	if (err)
		return err;
	for (i = 0; i < SC_N; i++) {
		redisReply *r = out[i];
		if (err)
			;
		else if (r->type == REDIS_REPLY_ERROR) {
			log_err("redis at '%s' refused script '%s': %s",
				m->where, redis_script_name[i], r->str);
			err = error_class(r->str);
		} else if (r->type != REDIS_REPLY_STRING || r->len != 40) {
			err = META_EPROTO;
		} else if (record) {
			memcpy(m->sha[i], r->str, 41);
		} else if (memcmp(m->sha[i], r->str, 40) != 0) {
			err = META_EPROTO;
		}
		freeReplyObject(r);
	}
	return err;
}

/*
 * The first error reply of out[0..n) as an error. RUN_RELOAD when a
 * script sent alone found the server without the scripts (it did not
 * run) and reload allows; *refused when the server refused it without
 * running it: REFUSED_ROLE for not being a master (any more, or yet:
 * READONLY, LOADING, MASTERDOWN), REFUSED_BUSY for being busy (BUSY: a
 * script runs past busy-reply-threshold; TRYAGAIN).
 */
enum { REFUSED_ROLE = 1, REFUSED_BUSY };
static int replies_check(struct meta *m, const struct req *reqs, int n,
			 redisReply **out, int reload, int *refused)
{
	for (int i = 0; i < n; i++) {
		const char *s = out[i]->str;
		int err;

		if (out[i]->type != REDIS_REPLY_ERROR)
			continue;
		if (reqs[i].script >= 0 && n == 1 && reload &&
		    (strncmp(s, "NOSCRIPT", 8) == 0 ||
		     strstr(s, "Function not found")))
			return RUN_RELOAD;
		if (!strncmp(s, "READONLY", 8) || !strncmp(s, "LOADING", 7) ||
		    !strncmp(s, "MASTERDOWN", 10))
			*refused = REFUSED_ROLE;
		else if (!strncmp(s, "BUSY ", 5) || !strncmp(s, "TRYAGAIN", 8))
			*refused = REFUSED_BUSY;
		err = error_class(s);
		/* refused unrun: a warning (it is sent again while the
		 * retry window lasts, and retry_again says when it gives up) */
		if (*refused && redis_log_ok(m))
			log_warn("redis at '%s' answered: %s", m->where, s);
		else if (!*refused && (err == META_EPROTO || redis_log_ok(m)))
			log_err("redis at '%s' answered an error: %s", m->where,
				s);
		return err;
	}
	return 0;
}

/* How a call that failed is sent again (redis_run_reqs). */
struct retry {
	int tries;
	int delay_ms;	  /* the pause before the next try */
	int64_t deadline; /* CLOCK_MONOTONIC ms: the last try starts before */
};

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * May a call that failed with err be sent again? Only if it cannot run
 * twice: the server refused it without running it (notrun), or it was
 * never sent (no connection, scripts lost), or it is idempotent
 * (RUN_RETRY) and the connection failed under it. A change whose
 * connection failed after it was sent may have run, and may have reached
 * a replica that is the master now: it is not sent again, its caller gets
 * EIO (SCHEMA.md, "Connections"). Without a window (?failover_timeout=0,
 * the default of URLs without sentinels, unless meta_set_retry_window
 * set one: a mount's) only an idempotent call goes again, once, at once;
 * with it any that may, until the window's seconds have passed since
 * the server went away (m->away_ms: the outage's window, not each
 * call's, so that a server that stays away fails every call once it
 * closed), pausing from 50 ms up to 1 s between tries, the master looked
 * for again at each (a restarted server reconnected to).
 */
static int retry_again(struct meta *m, struct retry *rt, int err, int notrun,
		       int sent, int flags)
{
	int may = notrun || (err == EIO && (flags & RUN_RETRY)) ||
		  (!sent && (err == EIO || err == META_EUNREACH ||
			     err == META_ESENTINEL));
	int window = retry_window(m);
	int64_t now;

	if (!may)
		return 0;
	if (window <= 0)
		return err == EIO && (flags & RUN_RETRY) && rt->tries++ == 0;
	now = now_ms();
	if (rt->tries++ == 0) {
		int64_t since = 0;
		if (atomic_compare_exchange_strong(&m->away_ms, &since, now)) {
			since = now;
			log_warn("redis at '%s' failed (%s): %s for up to %d s",
				 m->where, gr_strerror(err),
				 m->addr.master[0] ? "looking for the master"
						   : "waiting for it",
				 window);
		}
		rt->deadline = since + window * 1000LL;
	}
	if (now >= rt->deadline) {
		if (redis_log_ok(m))
			log_err("redis at '%s': %s for %d s, giving up (%s)",
				m->where,
				m->addr.master[0] ? "no master" : "not back",
				window, gr_strerror(err));
		return 0;
	}
	if (rt->delay_ms) {
		int64_t d = rt->delay_ms < rt->deadline - now
				? rt->delay_ms
				: rt->deadline - now;
		struct timespec ts = {d / 1000, (d % 1000) * 1000000};
		while (nanosleep(&ts, &ts) && errno == EINTR)
			;
	}
	rt->delay_ms = rt->delay_ms ? rt->delay_ms * 2 : 50;
	if (rt->delay_ms > 1000)
		rt->delay_ms = 1000;
	return 1;
}

static void replies_free(redisReply **out, int n)
{
	for (int i = 0; i < n; i++) {
		if (out[i])
			freeReplyObject(out[i]);
		out[i] = NULL;
	}
}

/*
 * Send reqs (pipelined) on one pooled connection and hand out the
 * replies. Error replies become errors (unless RUN_RAW). A script sent
 * alone that the server lacks (restarted, or a new master: scripts are
 * not replicated to every server) is loaded and sent again: NOSCRIPT
 * means it did not run. Scripts are never pipelined with other commands,
 * which would have run. A connection the server closed while it was idle
 * is replaced before anything is sent. What is sent again after a failure
 * and for how long: retry_again. In the no-loss mode (?wait=N) a change
 * returns only once N replicas have it, else EIO.
 */
int redis_run_reqs(struct meta *m, int flags, const struct req *reqs, int n,
		   redisReply **out)
{
	struct conn *c = pool_take(m);
	struct retry rt = {0};
	int i, err, sent, refused, loaded = 0, wait = reqs_wait(m, reqs, n);

again:
	for (i = 0; i < n; i++)
		out[i] = NULL;
	if (atomic_load(&m->gone) && !(flags & RUN_GONE_OK)) {
		pool_put(m, c); /* not the volume mounted: redis_session.c */
		return META_EGONE;
	}
	sent = refused = 0;
	if (c->rc && conn_closed(c))
		conn_failed(m, c);
	err = c->rc ? 0 : conn_connect(m, c);
	if (!err) {
		sent = 1;
		conn_timeout(m, c);
		err = conn_exec(m, c, reqs, n, out, wait);
	}
	if ((!err || err == RUN_SHORT) && !(flags & RUN_RAW)) {
		int e = replies_check(m, reqs, n, out, !loaded, &refused);
		err = e ? e : err;
	}
	if (err == RUN_RELOAD) {
		replies_free(out, n);
		log_info("reloading the scripts into redis at '%s' "
			 "(restarted, flushed, or a new master?)",
			 m->where);
		loaded = 1;
		err = scripts_load(m, c, 0);
		if (!err)
			goto again;
		sent = 0; /* the call itself did not run */
	}
	if (err == RUN_SHORT) {
		/* WAIT waits for this connection's last change: one that
		 * never reached a replica would hold every later call on it */
		conn_drop(c);
		err = EIO;
		refused = 0;
		sent = 1;
		flags &= ~RUN_RETRY; /* it ran: a retry would WAIT again */
	}
	if (err && refused == REFUSED_ROLE && retry_window(m) > 0)
		conn_failed(m, c); /* a replica now: so are idle peers' */
	/* the server answered: an outage, if there was one, is over */
	if (sent && !refused && err != EIO && err != META_EUNREACH &&
	    err != META_ESENTINEL && atomic_load(&m->away_ms))
		atomic_store(&m->away_ms, 0);
	if (err) {
		replies_free(out, n);
		if (retry_again(m, &rt, err,
				refused && (n == 1 || (flags & RUN_RETRY)),
				sent, flags))
			goto again;
	}
	pool_put(m, c);
	return err;
}

int redis_run(struct meta *m, int flags, const struct cmd *c, redisReply **out)
{
	struct req r = {c->argc, (const char **)c->argv, c->len, c->script};
	return redis_run_reqs(m, flags, &r, 1, out);
}

/* A command whose reply is not needed beyond its being no error. */
int redis_run_void(struct meta *m, int flags, const struct cmd *c)
{
	redisReply *r;
	int err = redis_run(m, flags, c, &r);
	if (!err)
		freeReplyObject(r);
	return err;
}

/* Scripts answer {status, ...}: status 0 or a positive errno. */
int redis_run_script(struct meta *m, int flags, const struct cmd *c,
		     redisReply **out)
{
	redisReply *r;
	int err = redis_run(m, flags, c, &r);

	*out = NULL;
	if (err)
		return err;
	if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
	    r->element[0]->type != REDIS_REPLY_INTEGER) {
		freeReplyObject(r);
		return META_EPROTO;
	}
	err = (int)r->element[0]->integer;
	if (err) {
		freeReplyObject(r);
		return err;
	}
	*out = r;
	return 0;
}

/* A script whose reply is {0, packed attr[, packed attr]}: unpack them
 * into a and b (each may be NULL). */
int redis_run_script_attrs(struct meta *m, const struct cmd *c,
			   struct meta_attr *a, struct meta_attr *b)
{
	redisReply *r;
	int err = redis_run_script(m, 0, c, &r);
	if (err)
		return err;
	err =
	    r->elements < 2 ? META_EPROTO : redis_reply_attr(r->element[1], a);
	if (!err && b)
		err = r->elements < 3 ? META_EPROTO
				      : redis_reply_attr(r->element[2], b);
	freeReplyObject(r);
	return err;
}

int redis_run_script_attr(struct meta *m, const struct cmd *c,
			  struct meta_attr *a)
{
	return redis_run_script_attrs(m, c, a, NULL);
}

int redis_run_script_void(struct meta *m, const struct cmd *c)
{
	redisReply *r;
	int err = redis_run_script(m, 0, c, &r);
	if (!err)
		freeReplyObject(r);
	return err;
}

/* ---- open / close ---------------------------------------------------- */

static pthread_once_t sigpipe_once = PTHREAD_ONCE_INIT;

/* hiredis writes to sockets with write(): a server that went away would
 * kill the process with SIGPIPE. Ignored unless the program handles it. */
static void sigpipe_ignore(void)
{
	struct sigaction sa;
	if (sigaction(SIGPIPE, NULL, &sa) == 0 && sa.sa_handler == SIG_DFL) {
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = SIG_IGN;
		sigemptyset(&sa.sa_mask);
		sigaction(SIGPIPE, &sa, NULL);
	}
}

static void meta_free(struct meta *m)
{
	if (!m)
		return;
	if (m->conns) {
		for (int i = 0; i < m->opts.pool_size; i++)
			conn_drop(&m->conns[i]);
		free(m->conns);
	}
	for (int i = 0; i < SC_N; i++)
		free(m->script_text[i]);
	free(m->lib_text);
	pthread_mutex_destroy(&m->pool_lock);
	pthread_cond_destroy(&m->pool_cond);
	pthread_mutex_destroy(&m->ids_lock);
	pthread_mutex_destroy(&m->sess_lock);
	pthread_cond_destroy(&m->sess_cond);
	free(m);
}

int meta_open(const char *url, const struct meta_opts *opts, struct meta **out)
{
	struct meta *m;
	pthread_condattr_t ca;
	struct conn *c;
	const char *pw;
	int err;

	*out = NULL;
	m = calloc(1, sizeof *m);
	if (!m)
		return ENOMEM;
	pthread_mutex_init(&m->pool_lock, NULL);
	pthread_cond_init(&m->pool_cond, NULL);
	pthread_mutex_init(&m->ids_lock, NULL);
	pthread_mutex_init(&m->sess_lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&m->sess_cond, &ca);
	pthread_condattr_destroy(&ca);

	meta_url_redact(url, m->where, sizeof m->where);
	err = redis_url_parse(url, &m->addr);
	if (err) {
		log_err("malformed metadata URL '%s': expected "
			"redis://[:PASSWORD@]HOST[:PORT]/DB, "
			"redis://[:PASSWORD@]MASTER,SENTINEL[:PORT],.../DB or "
			"unix:///PATH/redis.sock?db=N",
			m->where);
		goto free_m;
	}
	pw = getenv("GRANARY_META_PASSWORD");
	if (pw && *pw) {
		if (strlen(pw) >= sizeof m->addr.pass) {
			err = META_EURL;
			goto free_m;
		}
		strcpy(m->addr.pass, pw);
	}
	pw = getenv("GRANARY_SENTINEL_PASSWORD");
	if (pw && *pw && m->addr.master[0]) {
		if (strlen(pw) >= sizeof m->addr.sentinel_pass) {
			err = META_EURL;
			goto free_m;
		}
		strcpy(m->addr.sentinel_pass, pw);
	}
	if (opts)
		m->opts = *opts;
	if (m->opts.pool_size <= 0)
		m->opts.pool_size = 8;
	if (m->opts.pool_size > 256)
		m->opts.pool_size = 256;
	if (m->opts.session_ttl <= 0)
		m->opts.session_ttl = 60;

	m->lib_text = lua_library(m->lib, sizeof m->lib);
	if (!m->lib_text) {
		err = ENOMEM;
		goto free_m;
	}
	for (int i = 0; i < SC_N; i++) {
		if (asprintf(&m->script_text[i], "%s%s", redis_lua_prelude,
			     redis_script_body[i]) < 0) {
			m->script_text[i] = NULL;
			err = ENOMEM;
			goto free_m;
		}
		snprintf(m->fn[i], sizeof m->fn[i], "%s_%s", m->lib,
			 redis_script_name[i]);
	}
	m->conns = calloc((size_t)m->opts.pool_size, sizeof *m->conns);
	if (!m->conns) {
		err = ENOMEM;
		goto free_m;
	}
	SLIST_INIT(&m->idle);
	for (int i = 0; i < m->opts.pool_size; i++)
		SLIST_INSERT_HEAD(&m->idle, &m->conns[i], link);
	pthread_once(&sigpipe_once, sigpipe_ignore);

	/* fail fast: connect, authenticate, load the scripts */
	c = pool_take(m);
	err = conn_connect(m, c);
	if (!err) {
		redisReply *r = redisCommand(c->rc, "PING");
		if (!r) {
			conn_failed(m, c);
			err = META_EUNREACH;
		} else {
			if (r->type == REDIS_REPLY_ERROR) {
				err = error_class(r->str);
				log_err("redis at '%s' refused PING: %s",
					m->where, r->str);
			}
			freeReplyObject(r);
		}
	}
	if (!err)
		err = scripts_load(m, c, 1);
	if (err == EIO)
		err = META_EUNREACH;
	pool_put(m, c);
	if (err)
		goto free_m;
	*out = m;
	return 0;
free_m:
	meta_free(m);
	return err;
}

void meta_close(struct meta *m)
{
	if (!m)
		return;
	if (atomic_load(&m->sid))
		meta_session_close(m);
	meta_free(m);
}
