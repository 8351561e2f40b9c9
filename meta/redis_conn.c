/*
 * redis_conn.c - the Redis engine's link to the server: metadata URLs, the
 * pool of connections shared by FUSE's worker threads, commands and their
 * pipelines, the Lua scripts loaded as one function library (FCALL; EVALSHA
 * where the server refuses functions; their text is meta/lua/), the record
 * codecs, meta_open.
 */
#include <errno.h>
#include <inttypes.h>
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
#include "lib/log.h"

#define CONNECT_TIMEOUT_S 3
#define COMMAND_TIMEOUT_S 10
#define LIB_PREFIX	  "granary_"   /* function libraries of every build */
#define LIB_STAMP	  "-- loaded " /* a library's second line: load time */
#define LIB_STALE_S	  (24 * 3600)  /* others' libraries older are deleted */

/* ---- URLs ------------------------------------------------------------ */

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Percent-decode src[0..n) into dst; -1 if malformed or too long. */
static int pct_decode(const char *src, size_t n, char *dst, size_t cap)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		int c = (unsigned char)src[i];
		if (c == '%') {
			int hi, lo;
			if (i + 2 >= n)
				return -1;
			hi = hexval(src[i + 1]);
			lo = hexval(src[i + 2]);
			if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
				return -1;
			c = hi * 16 + lo;
			i += 2;
		}
		if (o + 1 >= cap)
			return -1;
		dst[o++] = (char)c;
	}
	dst[o] = '\0';
	return 0;
}

/* Digits only, non-empty, at most max. */
static int parse_num(const char *s, size_t n, long max, long *out)
{
	long v = 0;
	if (n == 0 || n > 9)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	if (v > max)
		return -1;
	*out = v;
	return 0;
}

static int url_parse_redis(const char *p, struct addr *a)
{
	const char *at = strrchr(p, '@'), *q;
	long v;

	if (at) {
		const char *colon = memchr(p, ':', (size_t)(at - p));
		if (!colon) /* a bare "secret@" is too easily a typo */
			return META_EURL;
		if (pct_decode(p, (size_t)(colon - p), a->user,
			       sizeof a->user) ||
		    pct_decode(colon + 1, (size_t)(at - colon - 1), a->pass,
			       sizeof a->pass))
			return META_EURL;
		p = at + 1;
	}
	if (*p == '[') {
		const char *end = strchr(p, ']');
		if (!end || end == p + 1 ||
		    (size_t)(end - p - 1) >= sizeof a->host)
			return META_EURL;
		for (q = p + 1; q < end; q++)
			if (hexval(*q) < 0 && *q != ':' && *q != '.')
				return META_EURL;
		memcpy(a->host, p + 1, (size_t)(end - p - 1));
		q = end + 1;
	} else {
		size_t n = strcspn(p, ":/?#");
		if (n == 0 || n >= sizeof a->host)
			return META_EURL;
		for (size_t i = 0; i < n; i++) {
			char c = p[i];
			if (!((c >= 'a' && c <= 'z') ||
			      (c >= 'A' && c <= 'Z') ||
			      (c >= '0' && c <= '9') || c == '.' || c == '-' ||
			      c == '_'))
				return META_EURL;
		}
		memcpy(a->host, p, n);
		q = p + n;
	}
	if (*q == ':') {
		size_t n = strcspn(q + 1, "/");
		if (parse_num(q + 1, n, 65535, &v) || v == 0)
			return META_EURL;
		a->port = (int)v;
		q += 1 + n;
	}
	if (*q == '/') {
		q++;
		if (*q) {
			if (parse_num(q, strlen(q), 1000000, &v))
				return META_EURL;
			a->db = (int)v;
			q += strlen(q);
		}
	}
	return *q ? META_EURL : 0;
}

static int url_parse_unix(const char *p, struct addr *a)
{
	size_t n = strcspn(p, "?#");
	long v;

	if (n == 0 || p[0] != '/' || n >= sizeof a->path)
		return META_EURL;
	memcpy(a->path, p, n);
	p += n;
	if (*p == '#')
		return META_EURL;
	if (*p == '?') {
		p++;
		while (*p) {
			size_t len = strcspn(p, "&");
			if (len < 3 || strncmp(p, "db=", 3) != 0 ||
			    parse_num(p + 3, len - 3, 1000000, &v))
				return META_EURL;
			a->db = (int)v;
			p += len;
			if (*p == '&' && *++p == '\0')
				return META_EURL;
		}
	}
	return 0;
}

static int url_parse(const char *url, struct addr *a)
{
	memset(a, 0, sizeof *a);
	a->port = 6379;
	if (!url)
		return META_EURL;
	if (strncmp(url, "redis://", 8) == 0)
		return url_parse_redis(url + 8, a);
	if (strncmp(url, "unix://", 7) == 0)
		return url_parse_unix(url + 7, a);
	return META_EURL;
}

void meta_url_redact(const char *url, char *buf, size_t cap)
{
	const char *ui, *at, *colon;

	if (!cap)
		return;
	if (!url) {
		snprintf(buf, cap, "(none)");
		return;
	}
	/* only redis:// URLs carry a password (unix:// paths may hold '@') */
	ui = strncmp(url, "redis://", 8) == 0 ? url + 8 : NULL;
	at = ui ? strrchr(ui, '@') : NULL;
	if (!at) {
		snprintf(buf, cap, "%s", url);
		return;
	}
	colon = memchr(ui, ':', (size_t)(at - ui));
	snprintf(buf, cap, "%.*s****%s", (int)((colon ? colon + 1 : ui) - url),
		 url, at);
}

/* ---- records --------------------------------------------------------- */

static int64_t ld40s(const uint8_t *p)
{
	uint64_t v = (uint64_t)ld32(p) | (uint64_t)p[4] << 32;
	if (v & (1ull << 39))
		v |= ~0ull << 40;
	return (int64_t)v;
}

/* Decodes the attributes at the head of an inode record; chunk 0's slice
 * records may follow them (a whole value from MGET). */
static int attr_unpack(const char *s, size_t n, struct meta_attr *a)
{
	const uint8_t *p = (const uint8_t *)s;
	uint64_t pr;

	if (n < ATTR_LEN || p[0] != 1)
		return META_EPROTO;
	memset(a, 0, sizeof *a);
	a->type = p[1];
	a->mode = (uint16_t)(p[2] | p[3] << 8);
	a->uid = ld32(p + 4);
	a->gid = ld32(p + 8);
	a->nlink = ld32(p + 12);
	a->length = ld64(p + 16);
	/* dirs: parent, devices: rdev, files: stored bytes + 1 (0: not
	 * known, a file from before the field: its length) */
	pr = ld64(p + 24);
	a->stored = a->length;
	if (a->type == META_DIR)
		a->parent = pr;
	else if (a->type == META_BLK || a->type == META_CHR)
		a->rdev = (uint32_t)pr;
	else if (a->type == META_FILE && pr != 0 && pr - 1 < a->length)
		a->stored = pr - 1;
	a->atime = ld40s(p + 32);
	a->atimens = ld32(p + 37);
	a->mtime = ld40s(p + 41);
	a->mtimens = ld32(p + 46);
	a->ctime = ld40s(p + 50);
	a->ctimens = ld32(p + 55);
	return 0;
}

int redis_reply_attr(const redisReply *r, struct meta_attr *a)
{
	struct meta_attr tmp;
	if (r->type != REDIS_REPLY_STRING)
		return META_EPROTO;
	return attr_unpack(r->str, (size_t)r->len, a ? a : &tmp);
}

/* Packs s at p (room for REC_MAX); returns the bytes used. A whole slice
 * (what the writer commits) takes a short form: it keeps a small file's
 * inode record, with chunk 0 behind the attributes, in 76 bytes (92 when
 * the slice sits in a pack). Forms: 1 full, 2 short, 3 short in a pack,
 * 4 full in a pack. */
size_t redis_rec_pack(uint8_t *p, const struct meta_slice *s)
{
	int whole = s->off == 0 && s->len == s->size;
	size_t n;

	p[0] = s->pack ? (whole ? 3 : 4) : (whole ? 2 : 1);
	st32(p + 1, s->pos);
	st64(p + 5, s->id);
	st32(p + 13, s->size);
	n = REC_SHORT_LEN;
	if (!whole) {
		st32(p + 17, s->off);
		st32(p + 21, s->len);
		n = REC_LEN;
	}
	if (s->pack) {
		st64(p + n, s->pack);
		st32(p + n + 8, s->poff);
		st32(p + n + 12, s->plen);
		n += REC_PACK_EXTRA;
	}
	return n;
}

/* Unpacks the record at s (n bytes left); returns its length, 0 if it is
 * corrupt or cut short. */
size_t redis_rec_unpack(const char *s, size_t n, struct meta_slice *out)
{
	const uint8_t *p = (const uint8_t *)s;
	size_t want;
	int whole, packed;

	if (n < REC_SHORT_LEN || p[0] < 1 || p[0] > 4)
		return 0;
	whole = p[0] == 2 || p[0] == 3;
	packed = p[0] >= 3;
	want =
	    (whole ? REC_SHORT_LEN : REC_LEN) + (packed ? REC_PACK_EXTRA : 0);
	if (n < want)
		return 0;
	*out = (struct meta_slice){0};
	out->pos = ld32(p + 1);
	out->id = ld64(p + 5);
	out->size = ld32(p + 13);
	if (whole) {
		out->len = out->size;
	} else {
		out->off = ld32(p + 17);
		out->len = ld32(p + 21);
	}
	if (packed) {
		const uint8_t *q = p + want - REC_PACK_EXTRA;
		out->pack = ld64(q);
		out->poff = ld32(q + 8);
		out->plen = ld32(q + 12);
		if (!out->pack || !out->plen)
			return 0;
	}
	return want;
}

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
	if (!strncmp(s, "LOADING", 7) || !strncmp(s, "BUSY", 4) ||
	    !strncmp(s, "MASTERDOWN", 10) || !strncmp(s, "TRYAGAIN", 8))
		return META_EUNREACH;
	return META_EPROTO;
}

static int conn_connect(struct meta *m, struct conn *c)
{
	struct timeval ct = {CONNECT_TIMEOUT_S, 0};
	struct timeval ot = {COMMAND_TIMEOUT_S, 0};
	redisContext *rc;
	redisReply *r;
	int err = 0;

	pthread_mutex_lock(&m->pool_lock);
	c->epoch = m->epoch;
	pthread_mutex_unlock(&m->pool_lock);
	if (m->addr.path[0])
		rc = redisConnectUnixWithTimeout(m->addr.path, ct);
	else
		rc = redisConnectWithTimeout(m->addr.host, m->addr.port, ct);
	if (!rc)
		return ENOMEM;
	if (rc->err) {
		if (redis_log_ok(m))
			log_err("cannot reach redis at '%s': %s", m->where,
				rc->errstr);
		err = META_EUNREACH;
		goto free_rc;
	}
	if (redisSetTimeout(rc, ot) != REDIS_OK) {
		err = META_EUNREACH;
		goto free_rc;
	}
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
		if (r->type == REDIS_REPLY_ERROR &&
		    !strstr(r->str, "without any password configured") &&
		    !strstr(r->str, "no password is set")) {
			log_err("redis at '%s' refused the password: %s",
				m->where, r->str);
			err = META_EAUTH;
		}
		freeReplyObject(r);
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
	c->rc = rc;
	return 0;
free_rc:
	redisFree(rc);
	return err;
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

static int conn_exec(struct meta *m, struct conn *c, const struct req *reqs,
		     int n, redisReply **out)
{
	int i, got = 0;

	for (i = 0; i < n; i++)
		if (redisAppendCommandArgv(c->rc, reqs[i].argc, reqs[i].argv,
					   reqs[i].len) != REDIS_OK)
			goto fail;
	for (got = 0; got < n; got++) {
		void *r;
		if (redisGetReply(c->rc, &r) != REDIS_OK || !r)
			goto fail;
		out[got] = r;
	}
	return 0;
fail:
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
	int err = conn_exec(m, c, &req, 1, &r);

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
		if (hexval(name->str[i]) < 0)
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
	int err = conn_exec(m, c, &req, 1, &r);

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
	err = conn_exec(m, c, &req, 1, &r);
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
	err = conn_exec(m, c, &req, 1, &r);
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
	err = conn_exec(m, c, reqs, SC_N, out);
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
 * Send reqs (pipelined) on one pooled connection and hand out the
 * replies. Error replies become errors. A script sent alone that the
 * server lacks (restarted: scripts are not persisted) is loaded and sent
 * again: NOSCRIPT means it did not run. Scripts are never pipelined with
 * other commands, which would have run. With RUN_RETRY a connection
 * failure is retried once on a fresh connection.
 */
int redis_run_reqs(struct meta *m, int flags, const struct req *reqs, int n,
		   redisReply **out)
{
	struct conn *c = pool_take(m);
	int i, err, tries = 0, loaded = 0;

again:
	for (i = 0; i < n; i++)
		out[i] = NULL;
	err = c->rc ? 0 : conn_connect(m, c);
	if (!err)
		err = conn_exec(m, c, reqs, n, out);
	if (err == EIO && (flags & RUN_RETRY) && tries++ == 0)
		goto again;
	if (err)
		goto put;
	for (i = 0; i < n && !err; i++) {
		if (out[i]->type != REDIS_REPLY_ERROR)
			continue;
		if (reqs[i].script >= 0 && n == 1 && !loaded &&
		    (strncmp(out[i]->str, "NOSCRIPT", 8) == 0 ||
		     strstr(out[i]->str, "Function not found"))) {
			err = -1;
			break;
		}
		err = error_class(out[i]->str);
		if (err == META_EPROTO || redis_log_ok(m))
			log_err("redis at '%s' answered an error: %s", m->where,
				out[i]->str);
	}
	if (err) {
		for (i = 0; i < n; i++) {
			freeReplyObject(out[i]);
			out[i] = NULL;
		}
	}
	if (err == -1) {
		log_info("reloading the scripts into redis at '%s' "
			 "(restarted or flushed?)",
			 m->where);
		loaded = 1;
		err = scripts_load(m, c, 0);
		if (!err)
			goto again;
	}
put:
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
	err = url_parse(url, &m->addr);
	if (err) {
		log_err("malformed metadata URL '%s': expected "
			"redis://[:PASSWORD@]HOST[:PORT]/DB or "
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

uint64_t redis_field_u64(const redisReply *r)
{
	char buf[32];
	size_t n =
	    (size_t)r->len < sizeof buf - 1 ? (size_t)r->len : sizeof buf - 1;
	memcpy(buf, r->str, n);
	buf[n] = '\0';
	return strtoull(buf, NULL, 10);
}

uint64_t redis_reply_u64(const redisReply *r)
{
	if (r->type == REDIS_REPLY_INTEGER)
		return r->integer > 0 ? (uint64_t)r->integer : 0;
	if (r->type == REDIS_REPLY_STRING && r->str[0] != '-')
		return redis_field_u64(r);
	return 0;
}
