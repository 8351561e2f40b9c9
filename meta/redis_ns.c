/*
 * redis.c - the metadata engine on Redis (hiredis 0.14): a pool of
 * connections shared by FUSE's worker threads, one Lua script (redis_lua.c)
 * for every change of more than one key, and the client session with its
 * heartbeat thread. The scripts run as functions (FCALL) where the server
 * has them (Redis 7), else with EVALSHA. The key layout is meta/SCHEMA.md.
 *
 * Lock order: ids_lock -> pool_lock. pool_lock is a leaf; sess_lock is a
 * leaf that is never held across a Redis call.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "meta/meta.h"
#include "lib/log.h"

/* redis_lua.c */
const char *meta_redis_lua_prelude(void);
const char *meta_redis_lua(const char *name);
char *meta_redis_lua_library(char *lib, size_t cap);

#define CONNECT_TIMEOUT_S 3
#define COMMAND_TIMEOUT_S 10
#define INO_BATCH	  100  /* inode numbers taken from nextinode at once */
#define SLICE_BATCH	  1000 /* slice ids taken from nextslice at once */
#define ATTR_LEN	  59   /* packed inode record, see SCHEMA.md */
#define INO_PER_HASH	  32   /* inodes per hash n<ino / 32>, see SCHEMA.md */
#define REC_LEN		  25   /* packed slice record, full form */
#define REC_SHORT_LEN	  17   /* short form: a whole slice */
#define REC_PACK_EXTRA	  16   /* forms 3 and 4 add pack, poff, plen */
#define REC_MAX		  (REC_LEN + REC_PACK_EXTRA)
#define DENT_MAX	  9 /* directory entry value: type, ino (1-8 bytes) */
#define SCAN_COUNT	  1000 /* HSCAN page of a large directory */
#define PIPE_DEPTH	  16   /* commands in flight per round trip */
#define HMGET_DEPTH	  256  /* inode hashes read per trip in readdirplus */
#define RECLAIM_BUDGET	  256  /* chunk lists dropped per reclaim script */
#define CLEAN_BATCH	  1000 /* opens dropped per session cleanup script */
#define SNAP_BUDGET	  256  /* entries per snapshot script (~3 ms) */
#define CMD_MAX		  32
/* Lua numbers are doubles: lengths, inode numbers and ids stay below 2^53 */
#define MAX_LENGTH (1ull << 53)
/* packed times keep 40 bits of seconds (+-17000 years) */
#define TIME_MAX ((int64_t)1 << 39)

enum script {
	SC_FORMAT,
	SC_LOOKUP,
	SC_MKNOD,
	SC_LINK,
	SC_UNLINK,
	SC_RMDIR,
	SC_RENAME,
	SC_SETATTR,
	SC_TRUNCATE,
	SC_FALLOCATE,
	SC_WRITE,
	SC_OPEN,
	SC_CLOSE,
	SC_SETXATTR,
	SC_REMOVEXATTR,
	SC_SESSION_NEW,
	SC_HEARTBEAT,
	SC_SESSION_DEAD,
	SC_SESSION_CLEAN,
	SC_RECLAIM,
	SC_PACK_TOTAL,
	SC_SNAP_BEGIN,
	SC_SNAP_COPY,
	SC_SNAP_COMMIT,
	SC_SNAP_CLAIM,
	SC_SNAP_DROP,
	SC_CLONE_DATA,
	SC_VERSION_DIR,
	SC_VERSION_RM,
	SC_VERSION_SWAP,
	SC_UPGRADE_INODES,
	SC_UPGRADE_DIR,
	SC_STAGING_DONE,
	SC_SPACE_USAGE,
	SC_N
};
static const char *const script_names[SC_N] = {
    "format",	    "lookup",	    "mknod",	      "link",
    "unlink",	    "rmdir",	    "rename",	      "setattr",
    "truncate",	    "fallocate",    "write",	      "open",
    "close",	    "setxattr",	    "removexattr",    "session_new",
    "heartbeat",    "session_dead", "session_clean",  "reclaim",
    "pack_total",   "snap_begin",   "snap_copy",      "snap_commit",
    "snap_claim",   "snap_drop",    "clone_data",     "version_dir",
    "version_rm",   "version_swap", "upgrade_inodes", "upgrade_dir",
    "staging_done", "space_usage",
};

struct addr {
	char host[256];
	int port;
	char path[PATH_MAX]; /* unix socket; empty for TCP */
	int db;
	char user[256], pass[512];
};

struct conn {
	redisContext *rc; /* NULL: connect before use */
	unsigned epoch;	  /* pool epoch when it connected */
	struct conn *next;
};

struct meta {
	struct addr addr;
	char where[1024]; /* the URL, password redacted, for messages */
	struct meta_opts opts;
	char *script_text[SC_N];
	char sha[SC_N][41]; /* written by meta_open only */
	char *lib_text;	    /* the scripts as a function library */
	char lib[32];	    /* its name */
	char fn[SC_N][64];  /* the functions' names */
	int fcall;	    /* written by meta_open only: 1 FCALL, 0 EVALSHA */

	pthread_mutex_t pool_lock; /* leaf */
	pthread_cond_t pool_cond;  /* a connection was returned */
	struct conn *conns;	   /* opts.pool_size of them */
	struct conn *idle;	   /* protected by pool_lock */
	unsigned epoch;		   /* protected by pool_lock; bumped on I/O
				      errors so that idle peers reconnect */

	pthread_mutex_t ids_lock;	/* before pool_lock */
	uint64_t ino_next, ino_end;	/* protected by ids_lock */
	uint64_t slice_next, slice_end; /* protected by ids_lock */

	_Atomic uint64_t sid;	   /* 0: no session */
	pthread_mutex_t sess_lock; /* leaf, never held across a Redis call */
	pthread_cond_t sess_cond;  /* wakes the heartbeat thread to stop */
	int hb_stop;		   /* protected by sess_lock */
	int hb_running;		   /* protected by sess_lock */
	pthread_t hb_thread;
	char *sess_info; /* packed sessioninfo value; set before the
			    heartbeat thread starts, freed after it ends */
	size_t sess_info_len;

	_Atomic int64_t last_log; /* rate limit of connection error lines */
};

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

static uint32_t ld32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static uint64_t ld64(const uint8_t *p)
{
	return (uint64_t)ld32(p) | (uint64_t)ld32(p + 4) << 32;
}

static int64_t ld40s(const uint8_t *p)
{
	uint64_t v = (uint64_t)ld32(p) | (uint64_t)p[4] << 32;
	if (v & (1ull << 39))
		v |= ~0ull << 40;
	return (int64_t)v;
}

static void st32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void st64(uint8_t *p, uint64_t v)
{
	st32(p, (uint32_t)v);
	st32(p + 4, (uint32_t)(v >> 32));
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

static int reply_attr(const redisReply *r, struct meta_attr *a)
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
static size_t rec_pack(uint8_t *p, const struct meta_slice *s)
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
static size_t rec_unpack(const char *s, size_t n, struct meta_slice *out)
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
static int log_ok(struct meta *m)
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
		if (log_ok(m))
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
	while (!m->idle)
		pthread_cond_wait(&m->pool_cond, &m->pool_lock);
	c = m->idle;
	m->idle = c->next;
	stale = c->rc && c->epoch != m->epoch;
	pthread_mutex_unlock(&m->pool_lock);
	if (stale)
		conn_drop(c);
	return c;
}

static void pool_put(struct meta *m, struct conn *c)
{
	pthread_mutex_lock(&m->pool_lock);
	c->next = m->idle;
	m->idle = c;
	pthread_cond_signal(&m->pool_cond);
	pthread_mutex_unlock(&m->pool_lock);
}

/* ---- commands -------------------------------------------------------- */

struct cmd {
	int argc;
	int script; /* enum script, or -1 */
	const char *argv[CMD_MAX];
	size_t len[CMD_MAX];
	char num[CMD_MAX][48]; /* storage of formatted arguments */
};

/* One command of a pipeline. */
struct req {
	int argc;
	const char **argv;
	const size_t *len;
	int script;
};

#define RUN_RETRY 1 /* idempotent: may be sent again after a reconnect */

static void cmd_bin(struct cmd *c, const void *p, size_t n)
{
	gr_assert(c->argc < CMD_MAX);
	c->argv[c->argc] = p;
	c->len[c->argc++] = n;
}

static void cmd_str(struct cmd *c, const char *s)
{
	cmd_bin(c, s, strlen(s));
}

static void cmd_init(struct cmd *c, const char *name)
{
	c->argc = 0;
	c->script = -1;
	cmd_str(c, name);
}

static void cmd_fmt(struct cmd *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void cmd_fmt(struct cmd *c, const char *fmt, ...)
{
	va_list ap;
	int n;

	gr_assert(c->argc < CMD_MAX);
	va_start(ap, fmt);
	n = vsnprintf(c->num[c->argc], sizeof c->num[0], fmt, ap);
	va_end(ap);
	gr_assert(n > 0 && (size_t)n < sizeof c->num[0]);
	cmd_bin(c, c->num[c->argc], (size_t)n);
}

static void cmd_u64(struct cmd *c, uint64_t v)
{
	cmd_fmt(c, "%" PRIu64, v);
}

static void cmd_i64(struct cmd *c, int64_t v)
{
	cmd_fmt(c, "%" PRId64, v);
}

/* A per-inode key: prefix and decimal inode number ("d123"). */
static void cmd_key(struct cmd *c, const char *prefix, uint64_t ino)
{
	cmd_fmt(c, "%s%" PRIu64, prefix, ino);
}

/* The hash that holds inode ino, and the field of its attributes or, with
 * tail, of chunk 0's slice records while they are short (SCHEMA.md). */
static void cmd_inode(struct cmd *c, uint64_t ino, int tail)
{
	cmd_fmt(c, "n%" PRIu64, ino / INO_PER_HASH);
	cmd_u64(c, ino % INO_PER_HASH + (tail ? INO_PER_HASH : 0));
}

static void cmd_script(struct meta *m, struct cmd *c, enum script s)
{
	cmd_init(c, m->fcall ? "FCALL" : "EVALSHA");
	cmd_str(c, m->fcall ? m->fn[s] : m->sha[s]);
	cmd_str(c, "0");
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
	if (log_ok(m))
		log_err("lost connection to redis at '%s': %s", m->where,
			c->rc->errstr[0] ? c->rc->errstr : "out of memory");
	for (i = 0; i < got; i++) {
		freeReplyObject(out[i]);
		out[i] = NULL;
	}
	conn_failed(m, c);
	return EIO;
}

/* FUNCTION LOAD the library on c: 0 when the server has it now (a library
 * of its name is this build's, maybe loaded by a peer), -1 when it refused
 * (no functions before Redis 7, no permission; logged: at open, where
 * EVALSHA takes over, as information), EIO when the connection failed. */
static int library_load(struct meta *m, struct conn *c, int open)
{
	const char *argv[3] = {"FUNCTION", "LOAD", m->lib_text};
	size_t len[3] = {8, 4, strlen(m->lib_text)};
	struct req req = {3, argv, len, -1};
	redisReply *r;
	int err;

	err = conn_exec(m, c, &req, 1, &r);
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
 * Load the scripts on c. At open (record) the function library goes
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
	const char *env;
	int i, err;

	env = getenv("GRANARY_META_EVALSHA");
	if (m->fcall || (record && !(env && strcmp(env, "1") == 0))) {
		err = library_load(m, c, record);
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
				m->where, script_names[i], r->str);
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
static int run_reqs(struct meta *m, int flags, const struct req *reqs, int n,
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
		if (err == META_EPROTO || log_ok(m))
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

static int run(struct meta *m, int flags, const struct cmd *c, redisReply **out)
{
	struct req r = {c->argc, (const char **)c->argv, c->len, c->script};
	return run_reqs(m, flags, &r, 1, out);
}

/* A command whose reply is not needed beyond its being no error. */
static int run_void(struct meta *m, int flags, const struct cmd *c)
{
	redisReply *r;
	int err = run(m, flags, c, &r);
	if (!err)
		freeReplyObject(r);
	return err;
}

/* Scripts answer {status, ...}: status 0 or a positive errno. */
static int run_script(struct meta *m, int flags, const struct cmd *c,
		      redisReply **out)
{
	redisReply *r;
	int err = run(m, flags, c, &r);

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
static int run_script_attrs(struct meta *m, const struct cmd *c,
			    struct meta_attr *a, struct meta_attr *b)
{
	redisReply *r;
	int err = run_script(m, 0, c, &r);
	if (err)
		return err;
	err = r->elements < 2 ? META_EPROTO : reply_attr(r->element[1], a);
	if (!err && b)
		err = r->elements < 3 ? META_EPROTO
				      : reply_attr(r->element[2], b);
	freeReplyObject(r);
	return err;
}

static int run_script_attr(struct meta *m, const struct cmd *c,
			   struct meta_attr *a)
{
	return run_script_attrs(m, c, a, NULL);
}

static int run_script_void(struct meta *m, const struct cmd *c)
{
	redisReply *r;
	int err = run_script(m, 0, c, &r);
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

	m->lib_text = meta_redis_lua_library(m->lib, sizeof m->lib);
	if (!m->lib_text) {
		err = ENOMEM;
		goto free_m;
	}
	for (int i = 0; i < SC_N; i++) {
		const char *body = meta_redis_lua(script_names[i]);
		gr_assert(body);
		/* effects replication (TIME, then writes) before Redis 5 */
		if (asprintf(&m->script_text[i],
			     "redis.replicate_commands()\n%s%s",
			     meta_redis_lua_prelude(), body) < 0) {
			m->script_text[i] = NULL;
			err = ENOMEM;
			goto free_m;
		}
		snprintf(m->fn[i], sizeof m->fn[i], "%s_%s", m->lib,
			 script_names[i]);
	}
	m->conns = calloc((size_t)m->opts.pool_size, sizeof *m->conns);
	if (!m->conns) {
		err = ENOMEM;
		goto free_m;
	}
	for (int i = 0; i < m->opts.pool_size; i++) {
		m->conns[i].next = m->idle;
		m->idle = &m->conns[i];
	}
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

/* ---- volume ---------------------------------------------------------- */

static void uuid_make(char *buf, size_t cap)
{
	uint8_t b[16];
	if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		st64(b, (uint64_t)ts.tv_nsec ^ (uint64_t)getpid() << 32);
		st64(b + 8, (uint64_t)ts.tv_sec);
	}
	b[6] = (uint8_t)((b[6] & 0x0f) | 0x40);
	b[8] = (uint8_t)((b[8] & 0x3f) | 0x80);
	snprintf(buf, cap,
		 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
		 "%02x%02x%02x%02x%02x%02x",
		 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9],
		 b[10], b[11], b[12], b[13], b[14], b[15]);
}

int meta_format(struct meta *m, const struct meta_volume *v, int force)
{
	struct cmd c;
	char uuid[40];
	uint32_t bs;
	int err;

	if (m->opts.read_only)
		return EROFS;
	bs = v->block_size ? v->block_size : 4u << 20;
	if (bs > 16u << 20 || !v->name[0])
		return EINVAL;
	if (force) {
		log_warn("wiping every key of the database at '%s' (format "
			 "--force)",
			 m->where);
		cmd_init(&c, "FLUSHDB");
		err = run_void(m, 0, &c);
		if (err)
			return err;
	}
	if (v->uuid[0])
		snprintf(uuid, sizeof uuid, "%s", v->uuid);
	else
		uuid_make(uuid, sizeof uuid);
	cmd_script(m, &c, SC_FORMAT);
	cmd_str(&c, "name");
	cmd_str(&c, v->name);
	cmd_str(&c, "uuid");
	cmd_str(&c, uuid);
	cmd_str(&c, "storage");
	cmd_str(&c, v->storage);
	cmd_str(&c, "access_key");
	cmd_str(&c, v->access_key);
	cmd_str(&c, "secret_key");
	cmd_str(&c, v->secret_key);
	cmd_str(&c, "block_size");
	cmd_u64(&c, bs);
	cmd_str(&c, "compress");
	cmd_u64(&c, v->compress);
	cmd_str(&c, "format_version");
	cmd_u64(&c, META_FORMAT_VERSION);
	cmd_str(&c, "capacity");
	cmd_u64(&c, v->capacity);
	cmd_str(&c, "created");
	cmd_i64(&c, v->created);
	err = run_script_void(m, &c);
	if (err == ENOTEMPTY) {
		log_err("refusing to format the database at '%s': it holds "
			"other keys (format with --force to wipe them)",
			m->where);
		return META_EEXIST;
	}
	if (err == EEXIST) {
		log_err("refusing to format the database at '%s': it holds a "
			"granary volume (format with --force to wipe it)",
			m->where);
		return META_EEXIST;
	}
	return err;
}

static void copy_field(char *dst, size_t cap, const redisReply *r)
{
	size_t n = (size_t)r->len < cap - 1 ? (size_t)r->len : cap - 1;
	memcpy(dst, r->str, n);
	dst[n] = '\0';
}

static uint64_t field_u64(const redisReply *r)
{
	char buf[32];
	copy_field(buf, sizeof buf, r);
	return strtoull(buf, NULL, 10);
}

static int load_volume(struct meta *m, struct meta_volume *v, int quiet);

int meta_load_volume(struct meta *m, struct meta_volume *v)
{
	return load_volume(m, v, 0);
}

/* quiet: no message for an older format (the upgrade's own look) */
static int load_volume(struct meta *m, struct meta_volume *v, int quiet)
{
	struct cmd c;
	redisReply *r;
	int err;

	memset(v, 0, sizeof *v);
	cmd_init(&c, "HGETALL");
	cmd_str(&c, "setting");
	err = run(m, RUN_RETRY, &c, &r);
	if (err)
		return err;
	if (r->type != REDIS_REPLY_ARRAY) {
		err = META_EPROTO;
		goto free_r;
	}
	if (r->elements == 0) {
		err = META_ENOVOLUME;
		goto free_r;
	}
	for (size_t i = 0; i + 1 < r->elements; i += 2) {
		const redisReply *k = r->element[i], *val = r->element[i + 1];
		if (k->type != REDIS_REPLY_STRING ||
		    val->type != REDIS_REPLY_STRING) {
			err = META_EPROTO;
			goto free_r;
		}
		if (!strcmp(k->str, "name"))
			copy_field(v->name, sizeof v->name, val);
		else if (!strcmp(k->str, "uuid"))
			copy_field(v->uuid, sizeof v->uuid, val);
		else if (!strcmp(k->str, "storage"))
			copy_field(v->storage, sizeof v->storage, val);
		else if (!strcmp(k->str, "access_key"))
			copy_field(v->access_key, sizeof v->access_key, val);
		else if (!strcmp(k->str, "secret_key"))
			copy_field(v->secret_key, sizeof v->secret_key, val);
		else if (!strcmp(k->str, "block_size"))
			v->block_size = (uint32_t)field_u64(val);
		else if (!strcmp(k->str, "compress"))
			v->compress = (uint32_t)field_u64(val);
		else if (!strcmp(k->str, "format_version"))
			v->format_version = (uint32_t)field_u64(val);
		else if (!strcmp(k->str, "capacity"))
			v->capacity = field_u64(val);
		else if (!strcmp(k->str, "created"))
			v->created = (int64_t)field_u64(val);
	}
	if (v->format_version == 0)
		err = META_EPROTO;
	else if (v->format_version > META_FORMAT_VERSION) {
		log_err("the volume at '%s' has format version %u; this "
			"granary reads up to %u: upgrade granary",
			m->where, v->format_version, META_FORMAT_VERSION);
		err = META_EVERSION;
	} else if (v->format_version < META_FORMAT_VERSION) {
		if (!quiet)
			log_err(
			    "the volume at '%s' has format version %u, older "
			    "than "
			    "this granary's %u: unmount it everywhere, then "
			    "run `granary upgrade META_URL`",
			    m->where, v->format_version, META_FORMAT_VERSION);
		err = META_EVERSION;
	}
free_r:
	freeReplyObject(r);
	return err;
}

/* ---- upgrades -------------------------------------------------------- */

/* The keys "<prefix><digits>" of one SCAN page, as inode numbers. */
static int scan_inos(struct meta *m, const char *prefix, char *cursor,
		     size_t cap, uint64_t *inos, size_t *n)
{
	struct cmd c;
	redisReply *r;
	char pat[8];
	int err;

	*n = 0;
	snprintf(pat, sizeof pat, "%s[0-9]*", prefix);
	cmd_init(&c, "SCAN");
	cmd_str(&c, cursor);
	cmd_str(&c, "MATCH");
	cmd_str(&c, pat);
	cmd_str(&c, "COUNT");
	cmd_str(&c, "1000");
	err = run(m, RUN_RETRY, &c, &r);
	if (err)
		return err;
	if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
	    r->element[0]->type != REDIS_REPLY_STRING ||
	    r->element[1]->type != REDIS_REPLY_ARRAY) {
		err = META_EPROTO;
		goto free_r;
	}
	snprintf(cursor, cap, "%s", r->element[0]->str);
	for (size_t i = 0; i < r->element[1]->elements; i++) {
		const redisReply *k = r->element[1]->element[i];
		const char *p = k->str + strlen(prefix);
		char *end;
		if (k->type != REDIS_REPLY_STRING)
			continue;
		errno = 0;
		uint64_t ino = strtoull(p, &end, 10);
		if (!errno && end != p && !*end)
			inos[(*n)++] = ino;
	}
free_r:
	freeReplyObject(r);
	return err;
}

/* Clients with a heartbeat within the session TTL. */
static int live_sessions(struct meta *m, long long *n)
{
	struct cmd c;
	redisReply *r;
	long long now;
	int err;

	cmd_init(&c, "TIME");
	err = run(m, RUN_RETRY, &c, &r);
	if (err)
		return err;
	if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
	    r->element[0]->type != REDIS_REPLY_STRING) {
		freeReplyObject(r);
		return META_EPROTO;
	}
	now = atoll(r->element[0]->str);
	freeReplyObject(r);
	cmd_init(&c, "ZCOUNT");
	cmd_str(&c, "sessions");
	cmd_i64(&c, now - m->opts.session_ttl);
	cmd_str(&c, "+inf");
	err = run(m, RUN_RETRY, &c, &r);
	if (err)
		return err;
	if (r->type != REDIS_REPLY_INTEGER)
		err = META_EPROTO;
	else
		*n = r->integer;
	freeReplyObject(r);
	return err;
}

/* Format 1 -> 2: the records i<ino> of inos moved into the inode hashes. */
static int upgrade_inodes(struct meta *m, const uint64_t *inos, size_t cnt,
			  uint64_t *n)
{
	struct cmd c;
	redisReply *r;
	int err;

	cmd_script(m, &c, SC_UPGRADE_INODES);
	for (size_t k = 0; k < cnt; k++)
		cmd_u64(&c, inos[k]);
	err = run_script(m, 0, &c, &r);
	if (err)
		return err;
	if (r->elements != 2 || r->element[1]->type != REDIS_REPLY_INTEGER)
		err = META_EPROTO;
	else
		*n += (uint64_t)r->element[1]->integer;
	freeReplyObject(r);
	return err;
}

/* Format 1 -> 2: the entries of directory dir in their short form, about
 * 1000 per script. */
static int upgrade_dir(struct meta *m, uint64_t dir, uint64_t *n)
{
	char cursor[32] = "0";
	int err;

	do {
		struct cmd c;
		redisReply *r;
		cmd_script(m, &c, SC_UPGRADE_DIR);
		cmd_u64(&c, dir);
		cmd_str(&c, cursor);
		err = run_script(m, 0, &c, &r);
		if (err)
			return err;
		if (r->elements != 3 ||
		    r->element[1]->type != REDIS_REPLY_STRING ||
		    r->element[2]->type != REDIS_REPLY_INTEGER) {
			err = META_EPROTO;
		} else {
			snprintf(cursor, sizeof cursor, "%s",
				 r->element[1]->str);
			*n += (uint64_t)r->element[2]->integer;
		}
		freeReplyObject(r);
	} while (!err && strcmp(cursor, "0"));
	return err;
}

/* Format 1 -> 2 (SCHEMA.md): every inode record, then every directory.
 * Each step skips what is done, so a second run finishes the first. */
static int upgrade_1(struct meta *m, uint64_t *n)
{
	uint64_t inos[1000];
	char cursor[32] = "0";
	size_t cnt;
	int err;

	do {
		err = scan_inos(m, "i", cursor, sizeof cursor, inos, &cnt);
		/* a script takes what fits in one command */
		for (size_t i = 0; !err && i < cnt; i += CMD_MAX - 4)
			err = upgrade_inodes(
			    m, inos + i,
			    cnt - i < CMD_MAX - 4 ? cnt - i : CMD_MAX - 4, n);
	} while (!err && strcmp(cursor, "0"));
	snprintf(cursor, sizeof cursor, "0");
	while (!err) {
		err = scan_inos(m, "d", cursor, sizeof cursor, inos, &cnt);
		for (size_t i = 0; !err && i < cnt; i++)
			err = upgrade_dir(m, inos[i], n);
		if (!strcmp(cursor, "0"))
			break;
	}
	return err;
}

int meta_upgrade(struct meta *m, uint32_t *from, uint64_t *n)
{
	struct meta_volume v;
	struct cmd c;
	long long live = 0;
	int err = load_volume(m, &v, 1);

	*from = v.format_version;
	*n = 0;
	if (err != META_EVERSION)
		return err; /* 0: current already */
	if (v.format_version > META_FORMAT_VERSION)
		return META_EVERSION;
	if (m->opts.read_only)
		return EROFS;
	err = live_sessions(m, &live);
	if (err)
		return err;
	if (live > 0) {
		log_err("%lld client(s) of the volume at '%s' are alive: "
			"unmount them first",
			live, m->where);
		return EBUSY;
	}
	log_info("upgrading the volume at '%s' from format version %u to %u",
		 m->where, v.format_version, META_FORMAT_VERSION);
	err = upgrade_1(m, n);
	if (err)
		return err;
	cmd_init(&c, "HSET");
	cmd_str(&c, "setting");
	cmd_str(&c, "format_version");
	cmd_u64(&c, META_FORMAT_VERSION);
	return run_void(m, RUN_RETRY, &c);
}

static uint64_t reply_u64(const redisReply *r)
{
	if (r->type == REDIS_REPLY_INTEGER)
		return r->integer > 0 ? (uint64_t)r->integer : 0;
	if (r->type == REDIS_REPLY_STRING && r->str[0] != '-')
		return field_u64(r);
	return 0;
}

int meta_usage(struct meta *m, struct meta_usage *u)
{
	struct cmd c;
	redisReply *r;
	int err;

	memset(u, 0, sizeof *u);
	cmd_init(&c, "MGET");
	cmd_str(&c, "usedspace");
	cmd_str(&c, "totalinodes");
	err = run(m, RUN_RETRY, &c, &r);
	if (err)
		return err;
	if (r->type != REDIS_REPLY_ARRAY || r->elements != 2)
		err = META_EPROTO;
	else {
		u->used_bytes = reply_u64(r->element[0]);
		u->inodes = reply_u64(r->element[1]);
	}
	freeReplyObject(r);
	return err;
}

int meta_space_usage(struct meta *m, uint64_t pending, uint64_t *used,
		     uint64_t *others)
{
	struct cmd c;
	redisReply *r;
	int err;

	/* sets a value, never adds one: safe to send again */
	cmd_script(m, &c, SC_SPACE_USAGE);
	cmd_u64(&c, atomic_load(&m->sid));
	cmd_u64(&c, pending);
	err = run_script(m, RUN_RETRY, &c, &r);
	if (err)
		return err;
	if (r->elements < 3)
		err = META_EPROTO;
	else {
		*used = reply_u64(r->element[1]);
		*others = reply_u64(r->element[2]);
	}
	freeReplyObject(r);
	return err;
}

/* ---- sessions -------------------------------------------------------- */

static int session_clean(struct meta *m, uint64_t sid, int ttl, int *state)
{
	struct cmd c;
	redisReply *r;
	int err;

	do {
		cmd_script(m, &c, SC_SESSION_CLEAN);
		cmd_u64(&c, sid);
		cmd_i64(&c, ttl);
		cmd_u64(&c, CLEAN_BATCH);
		err = run_script(m, 0, &c, &r);
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

		cmd_script(m, &c, SC_SESSION_DEAD);
		cmd_i64(&c, m->opts.session_ttl);
		err = run_script(m, 0, &c, &r);
		if (err)
			return err;
		list = r->elements > 1 ? r->element[1] : NULL;
		if (!list || list->type != REDIS_REPLY_ARRAY) {
			freeReplyObject(r);
			return META_EPROTO;
		}
		count = list->elements;
		for (size_t i = 0; i < count; i++) {
			uint64_t sid = reply_u64(list->element[i]);
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

	cmd_script(m, &c, SC_SESSION_NEW);
	cmd_bin(&c, m->sess_info, m->sess_info_len);
	cmd_u64(&c, want);
	err = run_script(m, 0, &c, &r);
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

	cmd_script(m, &c, SC_HEARTBEAT);
	cmd_u64(&c, sid);
	err = run_script(m, 0, &c, &r);
	if (err) {
		if (log_ok(m))
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

int meta_list_sessions(struct meta *m, struct meta_session **out, size_t *n)
{
	const char *a1[] = {"ZRANGE", "sessions", "0", "-1", "WITHSCORES"};
	const char *a2[] = {"HGETALL", "sessioninfo"};
	const char *a3[] = {"HGETALL", "sessionstaged"};
	size_t l1[] = {6, 8, 1, 2, 10}, l2[] = {7, 11}, l3[] = {7, 13};
	struct req reqs[3] = {
	    {5, a1, l1, -1}, {2, a2, l2, -1}, {2, a3, l3, -1}};
	redisReply *r[3];
	struct meta_session *s = NULL;
	size_t cnt = 0;
	int err;

	*out = NULL;
	*n = 0;
	err = run_reqs(m, RUN_RETRY, reqs, 3, r);
	if (err)
		return err;
	if (r[0]->type != REDIS_REPLY_ARRAY ||
	    r[1]->type != REDIS_REPLY_ARRAY ||
	    r[2]->type != REDIS_REPLY_ARRAY) {
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
		e->sid = reply_u64(id);
		e->heartbeat = (int64_t)reply_u64(r[0]->element[i + 1]);
		for (size_t j = 0; j + 1 < r[1]->elements; j += 2) {
			const redisReply *k = r[1]->element[j];
			if (k->type == REDIS_REPLY_STRING &&
			    k->len == id->len &&
			    !memcmp(k->str, id->str, (size_t)k->len) &&
			    r[1]->element[j + 1]->type == REDIS_REPLY_STRING) {
				session_info_unpack(r[1]->element[j + 1], e);
				break;
			}
		}
		for (size_t j = 0; j + 1 < r[2]->elements; j += 2) {
			const redisReply *k = r[2]->element[j];
			const redisReply *v = r[2]->element[j + 1];
			if (k->type == REDIS_REPLY_STRING &&
			    k->len == id->len &&
			    !memcmp(k->str, id->str, (size_t)k->len) &&
			    v->type == REDIS_REPLY_STRING) {
				unsigned long long p = 0, b = 0;
				sscanf(v->str, "%llu %llu", &p, &b);
				e->staged_packs = p;
				e->staged_bytes = b;
				break;
			}
		}
	}
	*out = s;
	*n = cnt;
free_r:
	freeReplyObject(r[0]);
	freeReplyObject(r[1]);
	freeReplyObject(r[2]);
	return err;
}

int meta_session_staged(struct meta *m, uint64_t packs, uint64_t bytes)
{
	uint64_t sid = atomic_load(&m->sid);
	struct cmd c;

	if (!sid)
		return 0;
	if (!packs && !bytes) {
		cmd_init(&c, "HDEL");
		cmd_str(&c, "sessionstaged");
		cmd_u64(&c, sid);
	} else {
		cmd_init(&c, "HSET");
		cmd_str(&c, "sessionstaged");
		cmd_u64(&c, sid);
		cmd_fmt(&c, "%llu %llu", (unsigned long long)packs,
			(unsigned long long)bytes);
	}
	return run_void(m, RUN_RETRY, &c);
}

/* ---- ids ------------------------------------------------------------- */

/* From the local batch [*next, *end), refilled with INCRBY counter batch. */
static int id_take(struct meta *m, const char *counter, uint64_t batch,
		   uint64_t *next, uint64_t *end, uint64_t *id)
{
	int err = 0;

	pthread_mutex_lock(&m->ids_lock);
	if (*next >= *end) {
		struct cmd c;
		redisReply *r;

		cmd_init(&c, "INCRBY");
		cmd_str(&c, counter);
		cmd_u64(&c, batch);
		err = run(m, 0, &c, &r);
		if (!err) {
			if (r->type != REDIS_REPLY_INTEGER ||
			    r->integer < (long long)batch)
				err = META_EPROTO;
			else if ((uint64_t)r->integer >= MAX_LENGTH)
				err = ENOSPC;
			else {
				*end = (uint64_t)r->integer + 1;
				*next = *end - batch;
			}
			freeReplyObject(r);
		}
	}
	if (!err)
		*id = (*next)++;
	pthread_mutex_unlock(&m->ids_lock);
	return err;
}

/* Give back an inode number that ended up unused, if it is the last one
 * handed out (a failed create must not burn numbers in a loop). */
static void ino_untake(struct meta *m, uint64_t ino)
{
	pthread_mutex_lock(&m->ids_lock);
	if (ino + 1 == m->ino_next)
		m->ino_next = ino;
	pthread_mutex_unlock(&m->ids_lock);
}

int meta_new_slice_id(struct meta *m, uint64_t *id)
{
	if (m->opts.read_only)
		return EROFS;
	return id_take(m, "nextslice", SLICE_BATCH, &m->slice_next,
		       &m->slice_end, id);
}

/* ---- namespace ------------------------------------------------------- */

static int name_check(const char *name)
{
	size_t n;
	if (!name)
		return EINVAL;
	n = strnlen(name, META_NAME_MAX + 1);
	if (n == 0)
		return ENOENT;
	if (n > META_NAME_MAX)
		return ENAMETOOLONG;
	if (memchr(name, '/', n))
		return EINVAL;
	return 0;
}

static int is_dot(const char *name)
{
	return !strcmp(name, ".") || !strcmp(name, "..");
}

int meta_getattr(struct meta *m, uint64_t ino, struct meta_attr *a)
{
	struct cmd c;
	redisReply *r;
	int err;

	cmd_init(&c, "HGET");
	cmd_inode(&c, ino, 0);
	err = run(m, RUN_RETRY, &c, &r);
	if (err)
		return err;
	err = r->type == REDIS_REPLY_NIL ? ENOENT : reply_attr(r, a);
	freeReplyObject(r);
	return err;
}

static int lookup(struct meta *m, uint64_t parent, const char *name,
		  uint64_t *ino, struct meta_attr *a, struct meta_slice **s,
		  size_t *n);
static int recs_unpack(const char *p, size_t len, struct meta_slice **s,
		       size_t *n);

int meta_lookup(struct meta *m, uint64_t parent, const char *name,
		uint64_t *ino, struct meta_attr *a)
{
	return lookup(m, parent, name, ino, a, NULL, NULL);
}

int meta_lookup_chunk0(struct meta *m, uint64_t parent, const char *name,
		       uint64_t *ino, struct meta_attr *a,
		       struct meta_slice **s, size_t *n)
{
	*s = NULL;
	*n = 0;
	return lookup(m, parent, name, ino, a, s, n);
}

/* s NULL: attributes only; else also chunk 0's slices. */
static int lookup(struct meta *m, uint64_t parent, const char *name,
		  uint64_t *ino, struct meta_attr *a, struct meta_slice **s,
		  size_t *n)
{
	struct meta_attr pa;
	struct cmd c;
	redisReply *r;
	int err = name_check(name);

	if (err)
		return err;
	if (is_dot(name)) {
		err = meta_getattr(m, parent, &pa);
		if (err)
			return err;
		if (pa.type != META_DIR)
			return ENOTDIR;
		if (name[1] == '.')
			parent = pa.parent;
		if (ino)
			*ino = parent;
		if (name[1] == '.')
			return meta_getattr(m, parent, a);
		if (a)
			*a = pa;
		return 0;
	}
	cmd_script(m, &c, SC_LOOKUP);
	cmd_u64(&c, parent);
	cmd_str(&c, name);
	cmd_str(&c, s ? "1" : "0");
	err = run_script(m, RUN_RETRY, &c, &r);
	if (err)
		return err;
	if (r->elements < 3 || r->element[1]->type != REDIS_REPLY_INTEGER)
		err = META_EPROTO;
	else {
		if (ino)
			*ino = (uint64_t)r->element[1]->integer;
		err = reply_attr(r->element[2], a);
		if (!err && s && (size_t)r->element[2]->len > ATTR_LEN)
			err = recs_unpack(r->element[2]->str + ATTR_LEN,
					  (size_t)r->element[2]->len - ATTR_LEN,
					  s, n);
	}
	freeReplyObject(r);
	return err;
}

static int64_t clamp_time(int64_t t)
{
	return t >= TIME_MAX ? TIME_MAX - 1 : t < -TIME_MAX ? -TIME_MAX : t;
}

int meta_setattr(struct meta *m, uint64_t ino, int set,
		 const struct meta_attr *in, struct meta_attr *out)
{
	struct cmd c;

	if (m->opts.read_only)
		return EROFS;
	if (((set & META_SET_ATIME) && in->atimens >= 1000000000u) ||
	    ((set & META_SET_MTIME) && in->mtimens >= 1000000000u))
		return EINVAL;
	cmd_script(m, &c, SC_SETATTR);
	cmd_u64(&c, ino);
	cmd_i64(&c, set);
	cmd_u64(&c, in->mode & 07777);
	cmd_u64(&c, in->uid);
	cmd_u64(&c, in->gid);
	cmd_i64(&c, clamp_time(in->atime));
	cmd_u64(&c, in->atimens);
	cmd_i64(&c, clamp_time(in->mtime));
	cmd_u64(&c, in->mtimens);
	return run_script_attr(m, &c, out);
}

int meta_truncate(struct meta *m, uint64_t ino, uint64_t length,
		  struct meta_attr *out)
{
	struct cmd c;

	if (m->opts.read_only)
		return EROFS;
	if (length >= MAX_LENGTH)
		return EFBIG;
	cmd_script(m, &c, SC_TRUNCATE);
	cmd_u64(&c, ino);
	cmd_u64(&c, length);
	return run_script_attr(m, &c, out);
}

int meta_fallocate(struct meta *m, uint64_t ino, int mode, uint64_t off,
		   uint64_t len, struct meta_attr *out)
{
	struct cmd c;

	if (m->opts.read_only)
		return EROFS;
	if (mode & ~FALLOC_FL_KEEP_SIZE)
		return EOPNOTSUPP;
	if (len == 0)
		return EINVAL;
	if (off >= MAX_LENGTH || len >= MAX_LENGTH - off)
		return EFBIG;
	cmd_script(m, &c, SC_FALLOCATE);
	cmd_u64(&c, ino);
	cmd_u64(&c, mode ? 1 : 0);
	cmd_u64(&c, off);
	cmd_u64(&c, len);
	return run_script_attr(m, &c, out);
}

/* A name a change is about to create: EROFS on a read-only handle, the
 * name's own errors, EEXIST for "." and "..". */
static int new_name_check(struct meta *m, const char *name)
{
	int err;

	if (m->opts.read_only)
		return EROFS;
	err = name_check(name);
	if (err)
		return err;
	if (!strcmp(name, META_VERSIONS))
		return EINVAL; /* reserved: DIR/.versions */
	return is_dot(name) ? EEXIST : 0;
}

static int mknod_open(struct meta *m, uint64_t parent, const char *name,
		      uint8_t type, uint16_t mode, uint32_t uid, uint32_t gid,
		      uint32_t rdev, const char *symlink, int open,
		      uint64_t *ino, struct meta_attr *a, struct meta_attr *pa);

int meta_mknod(struct meta *m, uint64_t parent, const char *name, uint8_t type,
	       uint16_t mode, uint32_t uid, uint32_t gid, uint32_t rdev,
	       const char *symlink, uint64_t *ino, struct meta_attr *a)
{
	return mknod_open(m, parent, name, type, mode, uid, gid, rdev, symlink,
			  0, ino, a, NULL);
}

int meta_create(struct meta *m, uint64_t parent, const char *name,
		uint16_t mode, uint32_t uid, uint32_t gid, uint64_t *ino,
		struct meta_attr *a, struct meta_attr *pa)
{
	return mknod_open(m, parent, name, META_FILE, mode, uid, gid, 0, NULL,
			  1, ino, a, pa);
}

static int mknod_open(struct meta *m, uint64_t parent, const char *name,
		      uint8_t type, uint16_t mode, uint32_t uid, uint32_t gid,
		      uint32_t rdev, const char *symlink, int open,
		      uint64_t *ino, struct meta_attr *a, struct meta_attr *pa)
{
	struct cmd c;
	uint64_t id;
	int err;

	err = new_name_check(m, name);
	if (err)
		return err;
	if (type < META_FILE || type > META_SOCK)
		return EINVAL;
	if (type == META_SYMLINK) {
		size_t n = symlink ? strnlen(symlink, PATH_MAX) : 0;
		if (n == 0)
			return ENOENT;
		if (n >= PATH_MAX)
			return ENAMETOOLONG;
	}
	err =
	    id_take(m, "nextinode", INO_BATCH, &m->ino_next, &m->ino_end, &id);
	if (err)
		return err;
	cmd_script(m, &c, SC_MKNOD);
	cmd_u64(&c, parent);
	cmd_str(&c, name);
	cmd_u64(&c, id);
	cmd_u64(&c, type);
	cmd_u64(&c, mode & 07777);
	cmd_u64(&c, uid);
	cmd_u64(&c, gid);
	cmd_u64(&c, rdev);
	cmd_str(&c, type == META_SYMLINK ? symlink : "");
	cmd_u64(&c, open ? atomic_load(&m->sid) : 0);
	err = run_script_attrs(m, &c, a, pa);
	if (err && err != EIO) /* EIO: it may have been created */
		ino_untake(m, id);
	if (!err && ino)
		*ino = id;
	return err;
}

/* Namespace scripts whose arguments are (parent, name). */
static int run_entry_script(struct meta *m, enum script s, uint64_t parent,
			    const char *name)
{
	struct cmd c;

	cmd_script(m, &c, s);
	cmd_u64(&c, parent);
	cmd_str(&c, name);
	return run_script_void(m, &c);
}

int meta_unlink(struct meta *m, uint64_t parent, const char *name)
{
	int err;

	if (m->opts.read_only)
		return EROFS;
	err = name_check(name);
	if (err)
		return err;
	if (is_dot(name))
		return EISDIR;
	return run_entry_script(m, SC_UNLINK, parent, name);
}

int meta_rmdir(struct meta *m, uint64_t parent, const char *name)
{
	int err;

	if (m->opts.read_only)
		return EROFS;
	err = name_check(name);
	if (err)
		return err;
	if (!strcmp(name, "."))
		return EINVAL;
	if (!strcmp(name, ".."))
		return ENOTEMPTY;
	return run_entry_script(m, SC_RMDIR, parent, name);
}

int meta_rename(struct meta *m, uint64_t parent, const char *name,
		uint64_t newparent, const char *newname, unsigned flags)
{
	struct cmd c;
	int err;

	if (m->opts.read_only)
		return EROFS;
	if (flags & ~(unsigned)(RENAME_NOREPLACE | RENAME_EXCHANGE) ||
	    flags == (RENAME_NOREPLACE | RENAME_EXCHANGE))
		return EINVAL;
	err = name_check(name);
	if (!err)
		err = name_check(newname);
	if (err)
		return err;
	if (is_dot(name) || is_dot(newname))
		return EBUSY;
	if (!strcmp(newname, META_VERSIONS))
		return EINVAL;
	cmd_script(m, &c, SC_RENAME);
	cmd_u64(&c, parent);
	cmd_str(&c, name);
	cmd_u64(&c, newparent);
	cmd_str(&c, newname);
	cmd_u64(&c, flags == RENAME_NOREPLACE ? 1 : flags ? 2 : 0);
	return run_script_void(m, &c);
}

int meta_link(struct meta *m, uint64_t ino, uint64_t newparent,
	      const char *newname, struct meta_attr *a)
{
	struct cmd c;
	int err;

	err = new_name_check(m, newname);
	if (err)
		return err;
	cmd_script(m, &c, SC_LINK);
	cmd_u64(&c, ino);
	cmd_u64(&c, newparent);
	cmd_str(&c, newname);
	return run_script_attr(m, &c, a);
}

int meta_readlink(struct meta *m, uint64_t ino, char **target)
{
	struct cmd c1, c2;
	struct req reqs[2];
	redisReply *r[2];
	int err;

	*target = NULL;
	cmd_init(&c1, "GET");
	cmd_key(&c1, "s", ino);
	cmd_init(&c2, "HEXISTS");
	cmd_inode(&c2, ino, 0);
	reqs[0] = (struct req){c1.argc, c1.argv, c1.len, -1};
	reqs[1] = (struct req){c2.argc, c2.argv, c2.len, -1};
	err = run_reqs(m, RUN_RETRY, reqs, 2, r);
	if (err)
		return err;
	if (r[0]->type == REDIS_REPLY_STRING) {
		*target = strndup(r[0]->str, (size_t)r[0]->len);
		if (!*target)
			err = ENOMEM;
	} else {
		err = r[1]->type == REDIS_REPLY_INTEGER && r[1]->integer
			  ? EINVAL
			  : ENOENT;
	}
	freeReplyObject(r[0]);
	freeReplyObject(r[1]);
	return err;
}

/* ---- readdir --------------------------------------------------------- */

struct dirlist {
	struct meta_dirent *e;
	size_t n, cap;
};

/* Append the entries of one HSCAN page (name, packed value, ...). */
static int dirlist_add(struct dirlist *l, const redisReply *page)
{
	for (size_t i = 0; i + 1 < page->elements; i += 2) {
		const redisReply *k = page->element[i],
				 *v = page->element[i + 1];
		const uint8_t *p;
		struct meta_dirent *e;

		if (k->type != REDIS_REPLY_STRING ||
		    v->type != REDIS_REPLY_STRING || v->len < 2 ||
		    v->len > DENT_MAX)
			return META_EPROTO;
		if (l->n == l->cap) {
			size_t cap = l->cap ? l->cap * 2 : 64;
			e = realloc(l->e, cap * sizeof *e);
			if (!e)
				return ENOMEM;
			l->e = e;
			l->cap = cap;
		}
		e = &l->e[l->n];
		memset(e, 0, sizeof *e);
		e->name = strndup(k->str, (size_t)k->len);
		if (!e->name)
			return ENOMEM;
		p = (const uint8_t *)v->str;
		e->type = p[0];
		for (size_t b = (size_t)v->len - 1; b >= 1; b--)
			e->ino = e->ino << 8 | p[b];
		l->n++;
	}
	return 0;
}

static int dirent_cmp(const void *a, const void *b)
{
	return strcmp(((const struct meta_dirent *)a)->name,
		      ((const struct meta_dirent *)b)->name);
}

/* HSCAN may return an entry twice when the hash is resized meanwhile. */
static void dirlist_dedupe(struct dirlist *l)
{
	size_t o = 0;
	if (l->n < 2)
		return;
	qsort(l->e, l->n, sizeof *l->e, dirent_cmp);
	for (size_t i = 0; i < l->n; i++) {
		if (o && !strcmp(l->e[o - 1].name, l->e[i].name)) {
			free(l->e[i].name);
			continue;
		}
		l->e[o++] = l->e[i];
	}
	l->n = o;
}

/* HSCAN reply: {cursor, {name, value, ...}}; *done when cursor is 0. */
static int scan_page(struct dirlist *l, const redisReply *r, char *cursor,
		     size_t cap, int *done)
{
	if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
	    r->element[0]->type != REDIS_REPLY_STRING ||
	    r->element[1]->type != REDIS_REPLY_ARRAY ||
	    (size_t)r->element[0]->len >= cap)
		return META_EPROTO;
	memcpy(cursor, r->element[0]->str, (size_t)r->element[0]->len + 1);
	*done = !strcmp(cursor, "0");
	return dirlist_add(l, r->element[1]);
}

struct ino_ord {
	uint64_t ino;
	size_t i; /* index in the dirlist */
};

static int ino_ord_cmp(const void *a, const void *b)
{
	const struct ino_ord *x = a, *y = b;
	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

/* Files whose tail field came back empty: their chunk 0 may be in
 * c<ino>_0 (too long for the field), asked for with MGET, PIPE_DEPTH
 * batches of up to 512 keys per trip. */
static int dirlist_chunk0(struct meta *m, struct dirlist *l, const size_t *idx,
			  size_t cnt)
{
	enum { BATCH = 512 };
	char(*keys)[32] = malloc((size_t)BATCH * PIPE_DEPTH * sizeof *keys);
	const char **argv = malloc((BATCH + 1) * PIPE_DEPTH * sizeof *argv);
	size_t *lens = malloc((BATCH + 1) * PIPE_DEPTH * sizeof *lens);
	int err = 0;

	if (!keys || !argv || !lens)
		err = ENOMEM;
	for (size_t base = 0; !err && base < cnt;
	     base += (size_t)BATCH * PIPE_DEPTH) {
		struct req reqs[PIPE_DEPTH];
		redisReply *r[PIPE_DEPTH];
		size_t a = 0, j = base;
		int nreq = 0;

		while (j < cnt && nreq < PIPE_DEPTH) {
			size_t k = 0, a0 = a;
			argv[a] = "MGET";
			lens[a++] = 4;
			for (; j < cnt && k < BATCH; j++, k++) {
				size_t q = (size_t)nreq * BATCH + k;
				int len = snprintf(keys[q], sizeof keys[q],
						   "c%" PRIu64 "_0",
						   l->e[idx[j]].ino);
				argv[a] = keys[q];
				lens[a++] = (size_t)len;
			}
			reqs[nreq++] = (struct req){(int)(k + 1), &argv[a0],
						    &lens[a0], -1};
		}
		err = run_reqs(m, RUN_RETRY, reqs, nreq, r);
		if (err)
			break;
		j = base;
		for (int q = 0; q < nreq; q++) {
			size_t k = (size_t)reqs[q].argc - 1;
			if (!err && (r[q]->type != REDIS_REPLY_ARRAY ||
				     r[q]->elements != k))
				err = META_EPROTO;
			for (size_t e = 0; !err && e < k; e++) {
				const redisReply *v = r[q]->element[e];
				struct meta_dirent *d = &l->e[idx[j + e]];
				if (v->type == REDIS_REPLY_STRING)
					err = recs_unpack(
					    v->str, (size_t)v->len, &d->chunk0,
					    &d->nchunk0);
			}
			j += k;
			freeReplyObject(r[q]);
		}
	}
	free(keys);
	free(argv);
	free(lens);
	return err;
}

/*
 * Fill the attributes and chunk 0 of the entries: the entries sorted by
 * inode so that one HMGET reads every entry of one inode hash (files made
 * together have neighbouring numbers), HMGET_DEPTH of them per round trip;
 * then MGET for the files whose chunk 0 is in c<ino>_0. Entries whose
 * inode vanished meanwhile are left out.
 */
static int dirlist_attrs(struct meta *m, struct dirlist *l)
{
	enum { PER = 2 * INO_PER_HASH }; /* fields per HMGET, at most */
	struct ino_ord *ord = malloc((l->n ? l->n : 1) * sizeof *ord);
	char(*keys)[24] = malloc(HMGET_DEPTH * sizeof *keys);
	char(*flds)[4] = malloc((size_t)HMGET_DEPTH * PER * sizeof *flds);
	const char **argv =
	    malloc((size_t)HMGET_DEPTH * (PER + 2) * sizeof *argv);
	size_t *lens = malloc((size_t)HMGET_DEPTH * (PER + 2) * sizeof *lens);
	size_t *more = malloc((l->n ? l->n : 1) * sizeof *more);
	struct req *reqs = malloc(HMGET_DEPTH * sizeof *reqs);
	redisReply **r = malloc(HMGET_DEPTH * sizeof *r);
	size_t *first = malloc(HMGET_DEPTH * sizeof *first);
	size_t p = 0, nmore = 0, o = 0;
	int err = 0;

	if (!ord || !keys || !flds || !argv || !lens || !more || !reqs || !r ||
	    !first) {
		err = ENOMEM;
		goto free_bufs;
	}
	for (size_t i = 0; i < l->n; i++)
		ord[i] = (struct ino_ord){l->e[i].ino, i};
	qsort(ord, l->n, sizeof *ord, ino_ord_cmp);
	while (p < l->n && !err) {
		size_t a = 0;
		int nreq = 0;

		/* one HMGET per hash; a hash's entries beyond PER / 2 (hard
		 * links of one file) go to the next HMGET */
		while (p < l->n && nreq < HMGET_DEPTH) {
			uint64_t h = ord[p].ino / INO_PER_HASH;
			size_t a0 = a, k = 0;
			argv[a] = "HMGET";
			lens[a++] = 5;
			argv[a] = keys[nreq];
			lens[a++] = (size_t)snprintf(keys[nreq], sizeof keys[0],
						     "n%" PRIu64, h);
			first[nreq] = p;
			for (; p < l->n && k < PER &&
			       ord[p].ino / INO_PER_HASH == h;
			     p++, k += 2) {
				char *f = flds[(size_t)nreq * PER + k];
				unsigned x =
				    (unsigned)(ord[p].ino % INO_PER_HASH);
				argv[a] = f;
				lens[a++] = (size_t)snprintf(f, 4, "%u", x);
				f = flds[(size_t)nreq * PER + k + 1];
				argv[a] = f;
				lens[a++] = (size_t)snprintf(f, 4, "%u",
							     x + INO_PER_HASH);
			}
			reqs[nreq++] = (struct req){(int)(a - a0), &argv[a0],
						    &lens[a0], -1};
		}
		err = run_reqs(m, RUN_RETRY, reqs, nreq, r);
		if (err)
			break;
		for (int q = 0; q < nreq; q++) {
			size_t k = (size_t)reqs[q].argc - 2;
			if (!err && (r[q]->type != REDIS_REPLY_ARRAY ||
				     r[q]->elements != k))
				err = META_EPROTO;
			for (size_t j = 0; !err && j < k; j += 2) {
				size_t i = ord[first[q] + j / 2].i;
				struct meta_dirent *e = &l->e[i];
				const redisReply *v = r[q]->element[j],
						 *t = r[q]->element[j + 1];
				if (v->type == REDIS_REPLY_NIL) {
					e->ino = 0; /* unlinked meanwhile */
					continue;
				}
				err = reply_attr(v, &e->attr);
				if (err || e->attr.type != META_FILE)
					continue;
				if (t->type == REDIS_REPLY_STRING)
					err = recs_unpack(
					    t->str, (size_t)t->len, &e->chunk0,
					    &e->nchunk0);
				else if (e->attr.length)
					more[nmore++] = i;
			}
			freeReplyObject(r[q]);
		}
	}
	if (!err && nmore)
		err = dirlist_chunk0(m, l, more, nmore);
	/* drop the vanished */
	for (size_t i = 0; !err && i < l->n; i++) {
		if (l->e[i].ino) {
			l->e[o++] = l->e[i];
		} else {
			free(l->e[i].name);
			free(l->e[i].chunk0);
		}
	}
	if (!err)
		l->n = o;
free_bufs:
	free(ord);
	free(keys);
	free(flds);
	free(argv);
	free(lens);
	free(more);
	free(reqs);
	free(r);
	free(first);
	return err;
}

int meta_readdir(struct meta *m, uint64_t ino, int plus,
		 struct meta_dirent **ents, size_t *n)
{
	struct dirlist l = {NULL, 0, 0};
	struct meta_attr a;
	char cursor[32] = "0";
	struct cmd c1, c2;
	struct req reqs[2];
	redisReply *r[2];
	int err, done, pages = 1;

	*ents = NULL;
	*n = 0;
	/* the directory's attributes and the first page in one trip */
	cmd_init(&c1, "HGET");
	cmd_inode(&c1, ino, 0);
	cmd_init(&c2, "HSCAN");
	cmd_key(&c2, "d", ino);
	cmd_str(&c2, "0");
	cmd_str(&c2, "COUNT");
	cmd_u64(&c2, SCAN_COUNT);
	reqs[0] = (struct req){c1.argc, c1.argv, c1.len, -1};
	reqs[1] = (struct req){c2.argc, c2.argv, c2.len, -1};
	err = run_reqs(m, RUN_RETRY, reqs, 2, r);
	if (err)
		return err;
	if (r[0]->type == REDIS_REPLY_NIL)
		err = ENOENT;
	else if (!(err = reply_attr(r[0], &a)) && a.type != META_DIR)
		err = ENOTDIR;
	if (!err)
		err = scan_page(&l, r[1], cursor, sizeof cursor, &done);
	freeReplyObject(r[0]);
	freeReplyObject(r[1]);
	while (!err && !done) {
		redisReply *p;
		cmd_init(&c2, "HSCAN");
		cmd_key(&c2, "d", ino);
		cmd_str(&c2, cursor);
		cmd_str(&c2, "COUNT");
		cmd_u64(&c2, SCAN_COUNT);
		err = run(m, RUN_RETRY, &c2, &p);
		if (err)
			break;
		err = scan_page(&l, p, cursor, sizeof cursor, &done);
		freeReplyObject(p);
		pages++;
	}
	if (!err && pages > 1)
		dirlist_dedupe(&l);
	if (!err && plus)
		err = dirlist_attrs(m, &l);
	if (err) {
		meta_dirents_free(l.e, l.n);
		return err;
	}
	*ents = l.e;
	*n = l.n;
	return 0;
}

void meta_dirents_free(struct meta_dirent *ents, size_t n)
{
	if (!ents)
		return;
	for (size_t i = 0; i < n; i++) {
		free(ents[i].name);
		free(ents[i].chunk0);
	}
	free(ents);
}

/* ---- files ----------------------------------------------------------- */

int meta_file_open(struct meta *m, uint64_t ino, struct meta_attr *a)
{
	struct cmd c;

	cmd_script(m, &c, SC_OPEN);
	cmd_u64(&c, ino);
	cmd_u64(&c, atomic_load(&m->sid));
	return run_script_attr(m, &c, a);
}

int meta_file_close(struct meta *m, uint64_t ino)
{
	return meta_file_release(m, ino, NULL);
}

int meta_file_release(struct meta *m, uint64_t ino, int *freed)
{
	size_t n = 0;
	int err = meta_files_release(m, &ino, 1, &n);

	if (freed)
		*freed = n > 0;
	return err;
}

int meta_files_release(struct meta *m, const uint64_t *inos, size_t n,
		       size_t *freed)
{
	struct cmd c;
	redisReply *r;
	uint8_t *buf;
	int err;

	if (freed)
		*freed = 0;
	if (!n)
		return 0;
	buf = malloc(n * 8);
	if (!buf)
		return ENOMEM;
	for (size_t i = 0; i < n; i++)
		st64(buf + 8 * i, inos[i]);
	cmd_script(m, &c, SC_CLOSE);
	cmd_u64(&c, atomic_load(&m->sid));
	cmd_bin(&c, buf, n * 8);
	err = run_script(m, 0, &c, &r);
	free(buf);
	if (err)
		return err;
	if (freed && r->elements > 1)
		*freed = (size_t)reply_u64(r->element[1]);
	freeReplyObject(r);
	return 0;
}

/* Decode a run of slice records into a malloc'd array (NULL when empty). */
static int recs_unpack(const char *p, size_t len, struct meta_slice **s,
		       size_t *n)
{
	size_t cnt = 0;

	*s = NULL;
	*n = 0;
	if (!len)
		return 0;
	*s = malloc((len / REC_SHORT_LEN + 1) * sizeof **s);
	if (!*s)
		return ENOMEM;
	for (size_t o = 0, k; o < len; o += k) {
		k = rec_unpack(p + o, len - o, &(*s)[cnt++]);
		if (!k) {
			free(*s);
			*s = NULL;
			return META_EPROTO;
		}
	}
	*n = cnt;
	return 0;
}

/* Chunk 0's records from the inode's tail field h and c<ino>_0 k (either
 * may be nil). A script can run between the two reads of a pipeline and
 * move a growing tail from h to k: then k holds h's records and more, and
 * reading h's again in front of them changes nothing (a newer record
 * covers an older one). */
static int tail_unpack(const redisReply *h, const redisReply *k,
		       struct meta_slice **s, size_t *n)
{
	char *buf;
	size_t hl, kl;
	int err;

	*s = NULL;
	*n = 0;
	if ((h->type != REDIS_REPLY_NIL && h->type != REDIS_REPLY_STRING) ||
	    (k->type != REDIS_REPLY_NIL && k->type != REDIS_REPLY_STRING))
		return META_EPROTO;
	hl = h->type == REDIS_REPLY_STRING ? (size_t)h->len : 0;
	kl = k->type == REDIS_REPLY_STRING ? (size_t)k->len : 0;
	if (!kl)
		return recs_unpack(h->str, hl, s, n);
	if (!hl)
		return recs_unpack(k->str, kl, s, n);
	buf = malloc(hl + kl);
	if (!buf)
		return ENOMEM;
	memcpy(buf, h->str, hl);
	memcpy(buf + hl, k->str, kl);
	err = recs_unpack(buf, hl + kl, s, n);
	free(buf);
	return err;
}

/* Chunk 0: in the inode's hash while short, else in c<ino>_0; both are
 * asked for in one trip. A missing inode reads as an empty
 * chunk, like a missing chunk key. */
static int read_chunk0(struct meta *m, uint64_t ino, struct meta_slice **s,
		       size_t *n)
{
	struct cmd c1, c2;
	struct req reqs[2];
	redisReply *r[2];
	int err;

	cmd_init(&c1, "HGET");
	cmd_inode(&c1, ino, 1);
	cmd_init(&c2, "GET");
	cmd_fmt(&c2, "c%" PRIu64 "_0", ino);
	reqs[0] = (struct req){c1.argc, c1.argv, c1.len, -1};
	reqs[1] = (struct req){c2.argc, c2.argv, c2.len, -1};
	err = run_reqs(m, RUN_RETRY, reqs, 2, r);
	if (err)
		return err;
	err = tail_unpack(r[0], r[1], s, n);
	freeReplyObject(r[0]);
	freeReplyObject(r[1]);
	return err;
}

int meta_read_chunk(struct meta *m, uint64_t ino, uint32_t idx,
		    struct meta_slice **s, size_t *n)
{
	struct cmd c;
	redisReply *r;
	int err;

	*s = NULL;
	*n = 0;
	if (idx == 0)
		return read_chunk0(m, ino, s, n);
	cmd_init(&c, "GET");
	cmd_fmt(&c, "c%" PRIu64 "_%" PRIu32, ino, idx);
	err = run(m, RUN_RETRY, &c, &r);
	if (err)
		return err;
	if (r->type == REDIS_REPLY_NIL ||
	    (r->type == REDIS_REPLY_STRING && !r->len))
		goto free_r;
	if (r->type != REDIS_REPLY_STRING) {
		err = META_EPROTO;
		goto free_r;
	}
	err = recs_unpack(r->str, (size_t)r->len, s, n);
free_r:
	freeReplyObject(r);
	return err;
}

int meta_write(struct meta *m, uint64_t ino, const struct meta_chunk_slice *s,
	       size_t n, struct meta_attr *a)
{
	struct cmd c;
	uint8_t *buf;
	size_t len = 0;
	int err;

	if (m->opts.read_only)
		return EROFS;
	for (size_t i = 0; i < n; i++) {
		const struct meta_slice *x = &s[i].s;
		if (x->len == 0 || x->pos > META_CHUNK_SIZE ||
		    x->len > META_CHUNK_SIZE - x->pos ||
		    (x->id &&
		     (x->off > x->size || x->len > x->size - x->off)) ||
		    (x->pack && (!x->id || !x->plen)))
			return EINVAL;
		if ((uint64_t)s[i].idx * META_CHUNK_SIZE + x->pos + x->len >=
		    MAX_LENGTH)
			return EFBIG;
	}
	buf = malloc(n * (REC_MAX + 4) + 1);
	if (!buf)
		return ENOMEM;
	for (size_t i = 0; i < n; i++) {
		st32(buf + len, s[i].idx);
		len += 4 + rec_pack(buf + len + 4, &s[i].s);
	}
	cmd_script(m, &c, SC_WRITE);
	cmd_u64(&c, ino);
	cmd_bin(&c, buf, len);
	err = run_script_attr(m, &c, a);
	free(buf);
	return err;
}

/* ---- xattrs ---------------------------------------------------------- */

static int xattr_name_check(const char *name)
{
	size_t n = name ? strnlen(name, XATTR_NAME_MAX + 1) : 0;
	if (n == 0 || n > XATTR_NAME_MAX)
		return ERANGE;
	return 0;
}

int meta_setxattr(struct meta *m, uint64_t ino, const char *name,
		  const void *value, size_t size, int flags)
{
	struct cmd c;
	int err;

	if (m->opts.read_only)
		return EROFS;
	err = xattr_name_check(name);
	if (err)
		return err;
	if (size > XATTR_SIZE_MAX)
		return E2BIG;
	if (flags & ~(XATTR_CREATE | XATTR_REPLACE) ||
	    flags == (XATTR_CREATE | XATTR_REPLACE))
		return EINVAL;
	cmd_script(m, &c, SC_SETXATTR);
	cmd_u64(&c, ino);
	cmd_str(&c, name);
	cmd_bin(&c, size ? value : "", size);
	cmd_u64(&c, flags == XATTR_CREATE ? 1 : flags ? 2 : 0);
	return run_script_void(m, &c);
}

int meta_getxattr(struct meta *m, uint64_t ino, const char *name, void **value,
		  size_t *size)
{
	struct cmd c;
	redisReply *r;
	int err;

	*value = NULL;
	*size = 0;
	err = xattr_name_check(name);
	if (err)
		return err;
	cmd_init(&c, "HGET");
	cmd_key(&c, "x", ino);
	cmd_str(&c, name);
	err = run(m, RUN_RETRY, &c, &r);
	if (err)
		return err;
	if (r->type == REDIS_REPLY_NIL)
		err = ENODATA;
	else if (r->type != REDIS_REPLY_STRING)
		err = META_EPROTO;
	else if (!(*value = malloc((size_t)r->len + 1)))
		err = ENOMEM;
	else {
		memcpy(*value, r->str, (size_t)r->len);
		*size = (size_t)r->len;
	}
	freeReplyObject(r);
	return err;
}

int meta_listxattr(struct meta *m, uint64_t ino, char **names, size_t *size)
{
	struct cmd c;
	redisReply *r;
	size_t total = 0, o = 0;
	int err;

	*names = NULL;
	*size = 0;
	cmd_init(&c, "HKEYS");
	cmd_key(&c, "x", ino);
	err = run(m, RUN_RETRY, &c, &r);
	if (err)
		return err;
	if (r->type != REDIS_REPLY_ARRAY) {
		err = META_EPROTO;
		goto free_r;
	}
	for (size_t i = 0; i < r->elements; i++)
		total += (size_t)r->element[i]->len + 1;
	*names = malloc(total + 1);
	if (!*names) {
		err = ENOMEM;
		goto free_r;
	}
	for (size_t i = 0; i < r->elements; i++) {
		memcpy(*names + o, r->element[i]->str,
		       (size_t)r->element[i]->len);
		o += (size_t)r->element[i]->len;
		(*names)[o++] = '\0';
	}
	*size = total;
free_r:
	freeReplyObject(r);
	return err;
}

int meta_removexattr(struct meta *m, uint64_t ino, const char *name)
{
	int err;

	if (m->opts.read_only)
		return EROFS;
	err = xattr_name_check(name);
	if (err)
		return err;
	return run_entry_script(m, SC_REMOVEXATTR, ino, name);
}

/* ---- snapshots ------------------------------------------------------- */

/*
 * A non-directory is copied and linked by one script (snap_begin). A
 * directory tree is built detached: snap_begin makes the top copy and lists
 * it in `snapshots` with this session; snap_copy steps walk the source
 * breadth first, SNAP_BUDGET entries a call, with snapdirs:<top> as the
 * queue; snap_commit links the top. Every step checks that the snapshot is
 * still this builder's: a cleaner that took it for abandoned claims it
 * (snap_claim) before dropping it (snap_drop steps, idempotent), so the two
 * never work on one copy at once. Layout: SCHEMA.md, "Snapshots".
 *
 * SNAP_BUDGET bounds how long one step blocks the server: 256 entries take
 * about 3 ms (5 ms p99) for the same throughput as 500, which took twice
 * that.
 */

/* Where a walk or a drop stands: index in snapdirs:<top>, HSCAN cursor. */
struct snap_pos {
	uint64_t pos;
	char cursor[32];
};

/* Adds files, dirs, others, bytes from r->element[first...]. */
static void snap_stats_add(struct meta_snapshot_stats *st, const redisReply *r,
			   size_t first)
{
	if (r->elements < first + 4)
		return;
	st->files += reply_u64(r->element[first]);
	st->dirs += reply_u64(r->element[first + 1]);
	st->others += reply_u64(r->element[first + 2]);
	st->bytes += reply_u64(r->element[first + 3]);
}

/*
 * A caller's credentials as the snapshot scripts take them (cred_use):
 * u32 uid, then u32 groups, little endian; empty for no checks.
 */
struct cred_arg {
	uint8_t *p;
	size_t n;
};

static int cred_pack(const struct meta_cred *cred, struct cred_arg *out)
{
	out->p = NULL;
	out->n = 0;
	if (!cred || cred->uid == 0)
		return 0;
	out->p = malloc(4 * ((size_t)cred->ngroups + 1));
	if (!out->p)
		return ENOMEM;
	st32(out->p, cred->uid);
	for (uint32_t i = 0; i < cred->ngroups; i++)
		st32(out->p + 4 * ((size_t)i + 1), cred->groups[i]);
	out->n = 4 * ((size_t)cred->ngroups + 1);
	return 0;
}

/* One snap_copy or snap_drop call; *done when the list is worked off.
 * cred (may be NULL) goes to snap_copy. */
static int snap_step(struct meta *m, enum script s, uint64_t top, uint64_t sid,
		     struct snap_pos *p, int *done,
		     struct meta_snapshot_stats *st,
		     const struct cred_arg *cred)
{
	const redisReply *cur;
	struct cmd c;
	redisReply *r;
	int err;

	cmd_script(m, &c, s);
	cmd_u64(&c, top);
	cmd_u64(&c, sid);
	cmd_u64(&c, p->pos);
	cmd_str(&c, p->cursor);
	cmd_u64(&c, SNAP_BUDGET);
	if (s == SC_SNAP_COPY)
		cmd_bin(&c, cred && cred->p ? cred->p : (const void *)"",
			cred ? cred->n : 0);
	/* a drop step sent twice removes each entry once; a copy step sent
	 * twice would copy twice (and leak the first copies) */
	err = run_script(m, s == SC_SNAP_DROP ? RUN_RETRY : 0, &c, &r);
	if (err)
		return err;
	cur = r->elements >= 4 ? r->element[2] : NULL;
	if (!cur || cur->type != REDIS_REPLY_STRING ||
	    (size_t)cur->len >= sizeof p->cursor) {
		err = META_EPROTO;
		goto free_r;
	}
	p->pos = reply_u64(r->element[1]);
	memcpy(p->cursor, cur->str, (size_t)cur->len + 1);
	*done = reply_u64(r->element[3]) != 0;
	if (st)
		snap_stats_add(st, r, 4);
free_r:
	freeReplyObject(r);
	return err;
}

/* Mark top as being dropped by sid: own (the builder giving up) or, for a
 * cleaner, only if abandoned. ENOENT, EBUSY, ECANCELED: not ours to drop. */
static int snap_claim(struct meta *m, uint64_t top, uint64_t sid, int own)
{
	struct cmd c;

	cmd_script(m, &c, SC_SNAP_CLAIM);
	cmd_u64(&c, top);
	cmd_u64(&c, sid);
	cmd_i64(&c, m->opts.session_ttl);
	cmd_str(&c, own ? "1" : "0");
	return run_script_void(m, &c);
}

/* Delete the detached copy under top, claimed by sid. */
static int snap_drop(struct meta *m, uint64_t top, uint64_t sid)
{
	struct snap_pos p = {0, "0"};
	int done = 0, err = 0;

	while (!done && !err)
		err =
		    snap_step(m, SC_SNAP_DROP, top, sid, &p, &done, NULL, NULL);
	return err;
}

/* A detached copy under top that sid could not finish or commit: gone
 * before return, or left to a later meta_snapshot_cleanup. */
static void snap_give_up(struct meta *m, uint64_t top, uint64_t sid, int err,
			 const char *name)
{
	int e;

	if (err == ECANCELED) {
		log_err("snapshot '%s' was abandoned: another client took this "
			"one for dead (no progress for %d s) and deletes the "
			"unfinished copy",
			name, m->opts.session_ttl);
		return;
	}
	/* EIO from a commit may mean it happened: then the claim finds no
	 * snapshot to drop */
	e = snap_claim(m, top, sid, 1);
	if (!e)
		e = snap_drop(m, top, sid);
	if (e && e != ENOENT && e != ECANCELED)
		log_warn("cannot delete the unfinished copy of snapshot '%s' "
			 "(inode %" PRIu64 "): %s; a later snapshot cleanup "
			 "will",
			 name, top, gr_strerror(e));
}

/*
 * Copy src for dst_name in dst_parent: a non-directory is copied and linked
 * at once (*top 0); a directory is built detached and handed back finished
 * in *top, for the caller to link (snap_commit, version_swap) or give up.
 * cred (may be NULL) is checked on every inode copied (struct meta_cred).
 * A test's hook(arg, n) runs after copy step n, and with n = -1 at the end.
 */
static int snap_build(struct meta *m, const struct meta_cred *cred,
		      uint64_t src, uint64_t dst_parent, const char *dst_name,
		      uint64_t sid, uint64_t *top,
		      struct meta_snapshot_stats *st, void (*hook)(void *, int),
		      void *arg)
{
	struct snap_pos p = {0, "0"};
	struct cred_arg ca;
	struct cmd c;
	redisReply *r;
	int err, linked, done = 0, steps = 0;

	memset(st, 0, sizeof *st);
	*top = 0;
	err = cred_pack(cred, &ca);
	if (err)
		return err;
	cmd_script(m, &c, SC_SNAP_BEGIN);
	cmd_u64(&c, src);
	cmd_u64(&c, dst_parent);
	cmd_str(&c, dst_name);
	cmd_u64(&c, sid);
	cmd_bin(&c, ca.p ? ca.p : (const void *)"", ca.n);
	err = run_script(m, 0, &c, &r);
	if (err)
		goto free_cred;
	if (r->elements < 7) {
		freeReplyObject(r);
		err = META_EPROTO;
		goto free_cred;
	}
	linked = reply_u64(r->element[1]) != 0;
	if (!linked)
		*top = reply_u64(r->element[2]);
	snap_stats_add(st, r, 3);
	freeReplyObject(r);
	if (linked)
		goto free_cred;

	while (!done && !err) {
		err = snap_step(m, SC_SNAP_COPY, *top, sid, &p, &done, st, &ca);
		if (hook && !err)
			hook(arg, ++steps);
	}
	if (!err && hook)
		hook(arg, -1);
	if (err) {
		snap_give_up(m, *top, sid, err, dst_name);
		*top = 0;
	}
free_cred:
	free(ca.p);
	return err;
}

/* The version record behind top and time in v<dir>: stats, message. */
#define VREC_STATS 32

/* Link the finished copy top of src as dst_name in dst_parent; with
 * vdir, as version dst_name of vdir (dst_parent its versions directory). */
static int snap_commit(struct meta *m, uint64_t top, uint64_t sid, uint64_t src,
		       uint64_t dst_parent, const char *dst_name, uint64_t vdir,
		       const struct meta_snapshot_stats *st, const char *msg)
{
	size_t ml = msg ? strlen(msg) : 0;
	uint8_t *rec = NULL;
	struct cmd c;
	int err;

	cmd_script(m, &c, SC_SNAP_COMMIT);
	cmd_u64(&c, top);
	cmd_u64(&c, sid);
	cmd_u64(&c, src);
	cmd_u64(&c, dst_parent);
	cmd_str(&c, dst_name);
	if (vdir) {
		rec = malloc(VREC_STATS + ml);
		if (!rec)
			return ENOMEM;
		st64(rec, st->files);
		st64(rec + 8, st->dirs);
		st64(rec + 16, st->others);
		st64(rec + 24, st->bytes);
		memcpy(rec + VREC_STATS, msg ? msg : "", ml);
		cmd_u64(&c, vdir);
		cmd_bin(&c, rec, VREC_STATS + ml);
	}
	err = run_script_void(m, &c);
	free(rec);
	return err;
}

/* meta_snapshot, with a test's hook (see snap_build) */
static int snapshot(struct meta *m, const struct meta_cred *cred, uint64_t src,
		    uint64_t dst_parent, const char *dst_name,
		    struct meta_snapshot_stats *st, void (*hook)(void *, int),
		    void *arg)
{
	struct meta_snapshot_stats tmp;
	uint64_t sid = atomic_load(&m->sid), top;
	int err;

	if (!st)
		st = &tmp;
	err = new_name_check(m, dst_name);
	if (!err)
		err = snap_build(m, cred, src, dst_parent, dst_name, sid, &top,
				 st, hook, arg);
	if (err || !top)
		return err;
	err =
	    snap_commit(m, top, sid, src, dst_parent, dst_name, 0, NULL, NULL);
	if (err)
		snap_give_up(m, top, sid, err, dst_name);
	return err;
}

int meta_snapshot(struct meta *m, const struct meta_cred *cred, uint64_t src,
		  uint64_t dst_parent, const char *dst_name,
		  struct meta_snapshot_stats *st)
{
	return snapshot(m, cred, src, dst_parent, dst_name, st, NULL, NULL);
}

int meta_snapshot_cleanup(struct meta *m, size_t *n)
{
	uint64_t sid = atomic_load(&m->sid);
	struct cmd c;
	redisReply *r;
	size_t done = 0;
	int err;

	if (n)
		*n = 0;
	if (m->opts.read_only)
		return EROFS;
	/* few entries: one per snapshot being built, or abandoned */
	cmd_init(&c, "HKEYS");
	cmd_str(&c, "snapshots");
	err = run(m, RUN_RETRY, &c, &r);
	if (err)
		return err;
	if (r->type != REDIS_REPLY_ARRAY) {
		err = META_EPROTO;
		goto free_r;
	}
	for (size_t i = 0; i < r->elements && !err; i++) {
		uint64_t top = reply_u64(r->element[i]);

		err = snap_claim(m, top, sid, 0);
		if (!err)
			err = snap_drop(m, top, sid);
		if (err == ENOENT || err == EBUSY || err == ECANCELED) {
			err = 0; /* finished, alive, or someone else's now */
			continue;
		}
		if (!err) {
			log_info("deleted a detached tree left by a client "
				 "(an unfinished snapshot, a removed version, "
				 "or the versions of a removed directory; "
				 "inode %" PRIu64 ")",
				 top);
			done++;
		}
	}
	if (n)
		*n = done;
free_r:
	freeReplyObject(r);
	return err;
}

/* ---- dataset versions ------------------------------------------------ */

/*
 * A version of dir is a snapshot linked as TAG in dir's versions directory
 * (version_dir: an inode listed in no directory, found through `vdirs`),
 * committed together with its record in v<dir>; rm unlinks it and drops
 * the tree as a snapshot's unfinished copy is dropped; restore swaps dir's
 * entries with a fresh copy of the version. Layout: SCHEMA.md, "Versions".
 */

int meta_version_tag_check(const char *tag)
{
	size_t n = tag ? strnlen(tag, META_TAG_MAX + 1) : 0;

	if (n == 0 || tag[0] == '.')
		return EINVAL;
	if (n > META_TAG_MAX)
		return ENAMETOOLONG;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)tag[i] < 0x20 || tag[i] == 0x7f ||
		    tag[i] == '/')
			return EINVAL;
	return 0;
}

/* The versions directory of dir, made when missing. */
static int version_dir(struct meta *m, uint64_t dir, uint64_t *vdir)
{
	struct cmd c;
	redisReply *r;
	int err;

	cmd_script(m, &c, SC_VERSION_DIR);
	cmd_u64(&c, dir);
	err = run_script(m, RUN_RETRY, &c, &r);
	if (err)
		return err;
	if (r->elements < 2)
		err = META_EPROTO;
	else
		*vdir = reply_u64(r->element[1]);
	freeReplyObject(r);
	return err;
}

int meta_version_create(struct meta *m, const struct meta_cred *cred,
			uint64_t dir, const char *tag, const char *msg,
			struct meta_snapshot_stats *st)
{
	struct meta_snapshot_stats tmp;
	uint64_t sid = atomic_load(&m->sid), vdir, top;
	int err;

	if (!st)
		st = &tmp;
	memset(st, 0, sizeof *st);
	if (m->opts.read_only)
		return EROFS;
	err = meta_version_tag_check(tag);
	if (err)
		return err;
	if (msg &&
	    strnlen(msg, META_VERSION_MSG_MAX + 1) > META_VERSION_MSG_MAX)
		return EINVAL;
	err = version_dir(m, dir, &vdir);
	if (!err)
		err = snap_build(m, cred, dir, vdir, tag, sid, &top, st, NULL,
				 NULL);
	if (err)
		return err;
	gr_assert(top != 0); /* a directory is never linked by snap_begin */
	err = snap_commit(m, top, sid, dir, vdir, tag, dir, st, msg);
	if (err)
		snap_give_up(m, top, sid, err, tag);
	return err;
}

/* Decode field tag (tl bytes) with record rec of v<dir> into v. */
static int version_unpack(const char *tag, size_t tl, const redisReply *rec,
			  struct meta_version *v)
{
	const uint8_t *p = (const uint8_t *)rec->str;
	size_t ml;

	if (rec->type != REDIS_REPLY_STRING || rec->len < 16 + VREC_STATS ||
	    tl > META_TAG_MAX)
		return META_EPROTO;
	ml = (size_t)rec->len - 16 - VREC_STATS;
	v->msg = malloc(ml + 1);
	if (!v->msg)
		return ENOMEM;
	memcpy(v->msg, p + 16 + VREC_STATS, ml);
	v->msg[ml] = '\0';
	memcpy(v->tag, tag, tl);
	v->tag[tl] = '\0';
	v->top = ld64(p);
	v->created = (int64_t)ld64(p + 8);
	v->st.files = ld64(p + 16);
	v->st.dirs = ld64(p + 24);
	v->st.others = ld64(p + 32);
	v->st.bytes = ld64(p + 40);
	return 0;
}

int meta_version_get(struct meta *m, uint64_t dir, const char *tag,
		     struct meta_version **out)
{
	struct meta_version *v;
	struct cmd c;
	redisReply *r;
	int err;

	*out = NULL;
	err = meta_version_tag_check(tag);
	if (err)
		return err == EINVAL ? ENOENT : err;
	cmd_init(&c, "HGET");
	cmd_key(&c, "v", dir);
	cmd_str(&c, tag);
	err = run(m, RUN_RETRY, &c, &r);
	if (err)
		return err;
	if (r->type == REDIS_REPLY_NIL) {
		err = ENOENT;
		goto free_r;
	}
	v = calloc(1, sizeof *v);
	if (!v) {
		err = ENOMEM;
		goto free_r;
	}
	err = version_unpack(tag, strlen(tag), r, v);
	if (err)
		free(v);
	else
		*out = v;
free_r:
	freeReplyObject(r);
	return err;
}

int meta_version_list(struct meta *m, uint64_t dir, struct meta_version **out,
		      size_t *n)
{
	struct meta_version *v = NULL;
	struct cmd c;
	redisReply *r;
	size_t k = 0;
	int err;

	*out = NULL;
	*n = 0;
	cmd_init(&c, "HGETALL");
	cmd_key(&c, "v", dir);
	err = run(m, RUN_RETRY, &c, &r);
	if (err)
		return err;
	if (r->type != REDIS_REPLY_ARRAY || r->elements % 2) {
		err = META_EPROTO;
		goto free_r;
	}
	if (r->elements) {
		v = calloc(r->elements / 2, sizeof *v);
		if (!v) {
			err = ENOMEM;
			goto free_r;
		}
	}
	for (; k < r->elements / 2 && !err; k++)
		err = version_unpack(r->element[2 * k]->str,
				     (size_t)r->element[2 * k]->len,
				     r->element[2 * k + 1], &v[k]);
	if (err) {
		meta_versions_free(v, k);
		goto free_r;
	}
	*out = v;
	*n = k;
free_r:
	freeReplyObject(r);
	return err;
}

void meta_versions_free(struct meta_version *v, size_t n)
{
	if (!v)
		return;
	for (size_t i = 0; i < n; i++)
		free(v[i].msg);
	free(v);
}

/* Drop the tree under top that a version script handed to sid; a failure
 * leaves it to a later meta_snapshot_cleanup. */
static void version_drop(struct meta *m, uint64_t top, uint64_t sid,
			 const char *what)
{
	int err = snap_claim(m, top, sid, 1);

	if (!err)
		err = snap_drop(m, top, sid);
	if (err && err != ENOENT && err != ECANCELED)
		log_warn("cannot delete %s (inode %" PRIu64 ") yet: %s; a "
			 "later snapshot cleanup will",
			 what, top, gr_strerror(err));
}

int meta_version_rm(struct meta *m, uint64_t dir, const char *tag)
{
	uint64_t sid = atomic_load(&m->sid), top;
	struct cmd c;
	redisReply *r;
	int err;

	if (m->opts.read_only)
		return EROFS;
	err = meta_version_tag_check(tag);
	if (err)
		return err == EINVAL ? ENOENT : err;
	cmd_script(m, &c, SC_VERSION_RM);
	cmd_u64(&c, dir);
	cmd_str(&c, tag);
	cmd_u64(&c, sid);
	err = run_script(m, 0, &c, &r);
	if (err)
		return err;
	if (r->elements < 2) {
		freeReplyObject(r);
		return META_EPROTO;
	}
	top = reply_u64(r->element[1]);
	freeReplyObject(r);
	version_drop(m, top, sid, "the tree of a removed version");
	return 0;
}

int meta_version_restore(struct meta *m, const struct meta_cred *cred,
			 uint64_t dir, const char *tag, const char *save_tag)
{
	struct meta_snapshot_stats st;
	uint64_t sid = atomic_load(&m->sid), top;
	struct meta_version *v;
	char msg[META_TAG_MAX + 64];
	struct cmd c;
	int err;

	if (m->opts.read_only)
		return EROFS;
	err = meta_version_get(m, dir, tag, &v);
	if (err)
		return err;
	snprintf(msg, sizeof msg, "before restoring version '%s'", tag);
	err = meta_version_create(m, cred, dir, save_tag, msg, NULL);
	if (err)
		goto free_v;
	/* a detached copy, built for the one name dir can never hold */
	err = snap_build(m, cred, v->top, dir, META_VERSIONS, sid, &top, &st,
			 NULL, NULL);
	if (err)
		goto free_v;
	gr_assert(top != 0);
	cmd_script(m, &c, SC_VERSION_SWAP);
	cmd_u64(&c, dir);
	cmd_u64(&c, top);
	cmd_u64(&c, sid);
	err = run_script_void(m, &c);
	if (err)
		snap_give_up(m, top, sid, err, tag);
	else
		version_drop(m, top, sid, "the entries a restore replaced");
free_v:
	meta_versions_free(v, 1);
	return err;
}

/* ---- reclamation ----------------------------------------------------- */

int meta_reclaim(struct meta *m, struct meta_slice *dead, size_t cap, size_t *n)
{
	*n = 0;
	if (m->opts.read_only)
		return EROFS;
	/* bounded scripts until slices come out or no deleted file is left */
	for (;;) {
		const redisReply *list;
		struct cmd c;
		redisReply *r;
		uint64_t left;
		int err;

		cmd_script(m, &c, SC_RECLAIM);
		cmd_u64(&c, RECLAIM_BUDGET);
		cmd_u64(&c, cap);
		err = run_script(m, 0, &c, &r);
		if (err)
			return err;
		list = r->elements == 3 ? r->element[2] : NULL;
		if (!list || list->type != REDIS_REPLY_ARRAY ||
		    list->elements > cap) {
			freeReplyObject(r);
			return META_EPROTO;
		}
		left = reply_u64(r->element[1]);
		for (size_t i = 0; i < list->elements; i++) {
			const redisReply *e = list->element[i];
			const uint8_t *p = (const uint8_t *)e->str;
			struct meta_slice x;
			if (e->type == REDIS_REPLY_STRING && e->len == 17 &&
			    p[0] == 5) {
				/* a pack with every frame dead */
				dead[(*n)++] = (struct meta_slice){
				    .pack = ld64(p + 1), .plen = 0};
				continue;
			}
			if (e->type != REDIS_REPLY_STRING ||
			    rec_unpack(e->str, (size_t)e->len, &x) !=
				(size_t)e->len ||
			    x.pack) {
				/* out of the list now: gc finds its objects */
				log_err("dropping a corrupt entry of "
					"'delslices'");
				continue;
			}
			dead[(*n)++] = (struct meta_slice){.id = x.id,
							   .size = x.size,
							   .off = 0,
							   .len = x.size,
							   .pos = 0};
		}
		freeReplyObject(r);
		if (*n || !left || !cap)
			return 0;
	}
}

/* ---- data clones ---------------------------------------------------- */

int meta_clone_data(struct meta *m, uint64_t src, uint64_t dst,
		    struct meta_attr *a)
{
	struct cmd c;

	if (m->opts.read_only)
		return EROFS;
	cmd_script(m, &c, SC_CLONE_DATA);
	cmd_u64(&c, src);
	cmd_u64(&c, dst);
	return run_script_attr(m, &c, a);
}

/* ---- packs ----------------------------------------------------------- */

int meta_pack_total(struct meta *m, uint64_t pack, uint64_t total, int *dead)
{
	struct cmd c;
	redisReply *r;
	int err;

	if (dead)
		*dead = 0;
	if (m->opts.read_only)
		return EROFS;
	if (!pack || total > META_PACK_OPEN)
		return EINVAL;
	cmd_script(m, &c, SC_PACK_TOTAL);
	cmd_u64(&c, pack);
	cmd_u64(&c, total);
	err = run_script(m, RUN_RETRY, &c, &r);
	if (err)
		return err;
	if (r->elements != 2)
		err = META_EPROTO;
	else if (dead)
		*dead = reply_u64(r->element[1]) > 0;
	freeReplyObject(r);
	return err;
}

/* "b<id>_<idx>" or "p<id>" (SCHEMA.md, staging) */
static void cmd_staging_name(struct cmd *c, char kind, uint64_t id,
			     uint32_t idx)
{
	if (kind == 'b')
		cmd_fmt(c, "b%" PRIu64 "_%" PRIu32, id, idx);
	else
		cmd_fmt(c, "p%" PRIu64, id);
}

int meta_staging_mark(struct meta *m, char kind, uint64_t id, uint32_t idx)
{
	struct cmd c;

	if (m->opts.read_only)
		return EROFS;
	if ((kind != 'b' && kind != 'p') || !id)
		return EINVAL;
	cmd_init(&c, "HSET");
	cmd_str(&c, "staging");
	cmd_staging_name(&c, kind, id, idx);
	cmd_u64(&c, meta_session_id(m));
	return run_void(m, RUN_RETRY, &c);
}

int meta_staging_done(struct meta *m, char kind, uint64_t id, uint32_t idx)
{
	struct cmd c;

	if (m->opts.read_only)
		return EROFS;
	if ((kind != 'b' && kind != 'p') || !id)
		return EINVAL;
	cmd_script(m, &c, SC_STAGING_DONE);
	cmd_staging_name(&c, kind, id, idx);
	return run_script_void(m, &c);
}

int meta_pack_usage(struct meta *m, uint64_t pack, uint64_t *total,
		    uint64_t *dead)
{
	struct cmd c;
	redisReply *r;
	int err;

	cmd_init(&c, "EVAL");
	cmd_str(&c, "return {redis.call('HGET', 'packs', ARGV[1]), "
		    "redis.call('HGET', 'packdead', ARGV[1])}");
	cmd_str(&c, "0");
	cmd_u64(&c, pack);
	err = run(m, RUN_RETRY, &c, &r);
	if (err)
		return err;
	if (r->type != REDIS_REPLY_ARRAY)
		err = META_EPROTO;
	else if (r->elements < 1 || r->element[0]->type != REDIS_REPLY_STRING)
		err = ENOENT;
	else {
		*total = reply_u64(r->element[0]);
		*dead = r->elements > 1 ? reply_u64(r->element[1]) : 0;
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

/* Test-only: the first steps of meta_snapshot of a directory (snap_begin
 * and `steps` snap_copy calls), then nothing, as a client that crashed half
 * way would leave it; *top is the detached copy. */
int meta_redis_test_snapshot_partial(struct meta *m, uint64_t src,
				     uint64_t dst_parent, const char *name,
				     int steps, uint64_t *top);
int meta_redis_test_snapshot_partial(struct meta *m, uint64_t src,
				     uint64_t dst_parent, const char *name,
				     int steps, uint64_t *top)
{
	struct snap_pos p = {0, "0"};
	uint64_t sid = atomic_load(&m->sid);
	struct cmd c;
	redisReply *r;
	int err, done = 0;

	cmd_script(m, &c, SC_SNAP_BEGIN);
	cmd_u64(&c, src);
	cmd_u64(&c, dst_parent);
	cmd_str(&c, name);
	cmd_u64(&c, sid);
	cmd_str(&c, "");
	err = run_script(m, 0, &c, &r);
	if (err)
		return err;
	*top = r->elements >= 3 ? reply_u64(r->element[2]) : 0;
	freeReplyObject(r);
	while (!err && !done && steps-- > 0)
		err = snap_step(m, SC_SNAP_COPY, *top, sid, &p, &done, NULL,
				NULL);
	return err;
}

/* Test-only: meta_snapshot calling hook(arg, n) after copy step n and with
 * n = -1 before the commit, to change the namespace under a snapshot at a
 * known point. */
int meta_redis_test_snapshot_hook(struct meta *m, const struct meta_cred *cred,
				  uint64_t src, uint64_t dst_parent,
				  const char *name,
				  struct meta_snapshot_stats *st,
				  void (*hook)(void *, int), void *arg);
int meta_redis_test_snapshot_hook(struct meta *m, const struct meta_cred *cred,
				  uint64_t src, uint64_t dst_parent,
				  const char *name,
				  struct meta_snapshot_stats *st,
				  void (*hook)(void *, int), void *arg)
{
	return snapshot(m, cred, src, dst_parent, name, st, hook, arg);
}
