/*
 * redis_load.c - meta_load (meta_dump.h): a volume built from a dump
 * stream (docs/dump-format.md) in an empty Redis database, a line at a
 * time (bounded memory: one line, one batch of commands), the keys
 * written with pipelined batches of plain commands.
 *
 * What the loaded volume gets beside what the lines say: sliceref is
 * counted anew from the records loaded (the dump's counts, taken beside
 * live clients, may disagree with the lists it read at other instants),
 * as are totalinodes and usedspace. nextinode and nextslice start a new
 * id epoch, well past the highest number the dump knows (see "the id
 * epoch" below), and the settings get a new restore_id: a load never
 * hands out an id that the dumped volume may have used after the dump,
 * and the clients' disk caches of before it are not served (their
 * namespace is named by restore_id). An inode unlinked but open when dumped
 * (nlink 0: opens are not carried) becomes a deleted file whose data the
 * volume's reclamation frees, and a detached snapshot an abandoned one
 * that its cleaners delete. The settings are written last: a load cut
 * short leaves keys but no volume, which no client mounts.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "meta/meta_dump.h"
#include "meta/redis_int.h"
#include "lib/log.h"

#define DUMP_VERSION 1		  /* the newest stream this build reads */
#define LINE_MAX_LEN (256u << 20) /* longer lines are refused */
#define BATCH_CMDS   1000	  /* commands of one pipeline */
#define BATCH_BYTES  (4u << 20)	  /* their arguments' bytes */
#define REFS_KEY     "loadrefs"	  /* references counted while loading */

struct load {
	struct meta *m;
	const struct meta_load_opts *o;
	meta_source_fn source;
	void *source_arg;
	struct meta_dump_stats st;
	int err; /* sticky: out of memory, or of the server */

	/* the stream: bytes read and not yet a line */
	char *in;
	size_t pos, len, cap;
	int eof;
	int partial; /* the line read has no newline: the stream's last */
	uint64_t lineno;

	/* a batch of commands: their arguments, back to back in arena */
	char *arena;
	size_t alen, acap;
	size_t *aoff, *alens;
	size_t nargs, argcap;
	int *argc;
	size_t ncmd, cmdcap;

	/* from the header and the trailer, for the end */
	json_t *setting;
	uint64_t root;
	int64_t time;
	uint64_t next_ino, next_slice, max_ino, max_slice;
	uint64_t totalinodes, usedspace;
	int ended;
	int64_t last_progress;
};

static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The stream is refused: why, with its line, logged and told. */
static int bad(struct load *l, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int bad(struct load *l, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	log_err("the dump is refused: line %" PRIu64 ": %s", l->lineno, msg);
	if (l->o->why && l->o->why_cap)
		snprintf(l->o->why, l->o->why_cap, "line %" PRIu64 ": %s",
			 l->lineno, msg);
	return EINVAL;
}

/* ---- batches of commands --------------------------------------------- */

static void *grow(void *p, size_t *cap, size_t want, size_t size)
{
	if (want <= *cap)
		return p;
	size_t n = *cap ? *cap : 256;
	while (n < want)
		n *= 2;
	void *q = realloc(p, n * size);
	if (q)
		*cap = n;
	return q;
}

static void b_arg(struct load *l, const void *p, size_t n)
{
	char *a;
	size_t *o, *ln;

	if (l->err)
		return;
	if (!(a = grow(l->arena, &l->acap, l->alen + n + 1, 1))) {
		l->err = ENOMEM;
		return;
	}
	l->arena = a;
	size_t cap = l->argcap;
	if (!(o = grow(l->aoff, &cap, l->nargs + 1, sizeof *o))) {
		l->err = ENOMEM;
		return;
	}
	l->aoff = o;
	if (!(ln = grow(l->alens, &l->argcap, l->nargs + 1, sizeof *ln))) {
		l->err = ENOMEM;
		return;
	}
	l->alens = ln;
	memcpy(l->arena + l->alen, p, n);
	l->aoff[l->nargs] = l->alen;
	l->alens[l->nargs++] = n;
	l->alen += n;
	l->argc[l->ncmd - 1]++;
}

static void b_str(struct load *l, const char *s)
{
	b_arg(l, s, strlen(s));
}

static void b_fmt(struct load *l, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void b_fmt(struct load *l, const char *fmt, ...)
{
	char tmp[96];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
	va_end(ap);
	b_arg(l, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* A command begins: its name. */
static void b_cmd(struct load *l, const char *name)
{
	int *a;

	if (l->err)
		return;
	if (!(a = grow(l->argc, &l->cmdcap, l->ncmd + 1, sizeof *a))) {
		l->err = ENOMEM;
		return;
	}
	l->argc = a;
	l->argc[l->ncmd++] = 0;
	b_str(l, name);
}

/* The batch to the server in one pipeline. */
static int b_flush(struct load *l)
{
	struct req *reqs = NULL;
	const char **argv = NULL;
	redisReply **out = NULL;
	size_t n = l->ncmd;

	if (l->err || !n)
		return l->err;
	reqs = calloc(n, sizeof *reqs);
	argv = calloc(l->nargs, sizeof *argv);
	out = calloc(n, sizeof *out);
	if (!reqs || !argv || !out) {
		l->err = ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < l->nargs; i++)
		argv[i] = l->arena + l->aoff[i];
	for (size_t i = 0, a = 0; i < n; a += (size_t)l->argc[i++])
		reqs[i] = (struct req){l->argc[i], argv + a, l->alens + a, -1};
	l->err = redis_run_reqs(l->m, 0, reqs, (int)n, out);
	for (size_t i = 0; i < n && !l->err; i++)
		freeReplyObject(out[i]);
out:
	free(out);
	free(argv);
	free(reqs);
	l->ncmd = l->nargs = l->alen = 0;
	return l->err;
}

/* A command is complete: the batch goes once it is big enough. */
static int b_end(struct load *l)
{
	if (l->ncmd >= BATCH_CMDS || l->alen >= BATCH_BYTES)
		return b_flush(l);
	return l->err;
}

/* ---- the stream in --------------------------------------------------- */

/* The next line (NUL-terminated in place, newline dropped; NULL at the
 * end): 0, or an error. */
static int next_line(struct load *l, char **line, size_t *n)
{
	*line = NULL;
	for (;;) {
		char *nl = l->pos < l->len
			       ? memchr(l->in + l->pos, '\n', l->len - l->pos)
			       : NULL;
		if (nl || (l->eof && l->pos < l->len)) {
			char *s = l->in + l->pos;
			size_t k = nl ? (size_t)(nl - s) : l->len - l->pos;
			s[k] = 0; /* room for it: see below */
			l->pos += k + (nl ? 1 : 0);
			l->partial = !nl;
			*line = s;
			*n = k;
			l->lineno++;
			return 0;
		}
		if (l->eof)
			return 0;
		if (l->pos) {
			memmove(l->in, l->in + l->pos, l->len - l->pos);
			l->len -= l->pos;
			l->pos = 0;
		}
		if (l->len + 1 >= l->cap) {
			if (l->cap >= LINE_MAX_LEN) {
				l->lineno++;
				return bad(l, "longer than %u bytes",
					   LINE_MAX_LEN);
			}
			size_t cap = l->cap ? l->cap * 2 : 1u << 20;
			char *b = realloc(l->in, cap);
			if (!b)
				return ENOMEM;
			l->in = b;
			l->cap = cap;
		}
		/* one byte kept free for the NUL of a last line */
		ssize_t r = l->source(l->source_arg, l->in + l->len,
				      l->cap - l->len - 1);
		if (r < 0)
			return (int)-r;
		if (r == 0)
			l->eof = 1;
		l->len += (size_t)r;
	}
}

/* ---- fields ---------------------------------------------------------- */

static int j_u64(struct load *l, json_t *o, const char *k, uint64_t *v)
{
	json_t *j = json_object_get(o, k);
	*v = 0;
	if (!json_is_integer(j) || json_integer_value(j) < 0)
		return bad(l, "\"%s\" is missing or not a number >= 0", k);
	*v = (uint64_t)json_integer_value(j);
	return 0;
}

static int j_u32(struct load *l, json_t *o, const char *k, uint32_t *v)
{
	uint64_t x = 0;
	int err = j_u64(l, o, k, &x);
	if (!err && x > UINT32_MAX)
		return bad(l, "\"%s\" is out of range", k);
	*v = (uint32_t)x;
	return err;
}

/* A number of a sorted set's score: any JSON number. */
static int j_score(struct load *l, json_t *o, const char *k, char *buf,
		   size_t cap)
{
	json_t *j = json_object_get(o, k);
	if (json_is_integer(j))
		snprintf(buf, cap, "%" JSON_INTEGER_FORMAT,
			 json_integer_value(j));
	else if (json_is_real(j))
		snprintf(buf, cap, "%.17g", json_real_value(j));
	else
		return bad(l, "\"%s\" is missing or not a number", k);
	return 0;
}

static int b64_val(int c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	return c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* Base64 with padding into a malloc'd buffer; -1 when malformed. */
static ssize_t b64_decode(const char *s, size_t n, unsigned char **out)
{
	unsigned char *p;
	size_t k = 0;

	if (n % 4)
		return -1;
	p = malloc(n / 4 * 3 + 1);
	if (!p)
		return -1;
	for (size_t i = 0; i < n; i += 4) {
		int v[4];
		for (int j = 0; j < 4; j++) {
			v[j] = b64_val((unsigned char)s[i + j]);
			if (v[j] < 0 &&
			    !(s[i + j] == '=' && i + 4 == n && j >= 2 &&
			      (j == 3 || s[i + 3] == '='))) {
				free(p);
				return -1;
			}
		}
		p[k++] = (unsigned char)(v[0] << 2 | v[1] >> 4);
		if (v[2] >= 0)
			p[k++] = (unsigned char)(v[1] << 4 | v[2] >> 2);
		if (v[3] >= 0)
			p[k++] = (unsigned char)(v[2] << 6 | v[3]);
	}
	*out = p;
	return (ssize_t)k;
}

/* Bytes of "k" (a string) or "k_b64" (base64); *own is what to free.
 * Missing: ENOENT when may_miss, else refused. */
static int j_bytes(struct load *l, json_t *o, const char *k, const char **p,
		   size_t *n, unsigned char **own, int may_miss)
{
	char kb[80];
	json_t *j = json_object_get(o, k);

	*own = NULL;
	if (json_is_string(j)) {
		*p = json_string_value(j);
		*n = json_string_length(j);
		return 0;
	}
	snprintf(kb, sizeof kb, "%s_b64", k);
	j = json_object_get(o, kb);
	if (!j) {
		if (may_miss)
			return ENOENT;
		return bad(l, "\"%s\" is missing", k);
	}
	ssize_t r = json_is_string(j) ? b64_decode(json_string_value(j),
						   json_string_length(j), own)
				      : -1;
	if (r < 0)
		return bad(l, "\"%s\" is not base64", kb);
	*p = (const char *)*own;
	*n = (size_t)r;
	return 0;
}

/* ---- records --------------------------------------------------------- */

static uint64_t u64max(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

/* A subtree's top is the loaded volume's root. */
static uint64_t rmap(const struct load *l, uint64_t ino)
{
	return ino == l->root ? META_ROOT_INO : ino;
}

/* A slice object as a record (SCHEMA.md) at p (REC_MAX room): its
 * length, 0 when refused. Its reference is counted (REFS_KEY). */
static size_t j_slice(struct load *l, json_t *s, unsigned char *p)
{
	struct meta_slice m = {0};
	json_t *full = json_object_get(s, "full");
	int whole;
	size_t n;

	if (!json_is_object(s)) {
		bad(l, "a slice is no object");
		return 0;
	}
	if (j_u32(l, s, "pos", &m.pos) || j_u64(l, s, "id", &m.id) ||
	    j_u32(l, s, "size", &m.size) || j_u32(l, s, "off", &m.off) ||
	    j_u32(l, s, "len", &m.len))
		return 0;
	if (json_object_get(s, "pack") &&
	    (j_u64(l, s, "pack", &m.pack) || j_u32(l, s, "poff", &m.poff) ||
	     j_u32(l, s, "plen", &m.plen)))
		return 0;
	if (json_object_get(s, "pack") && (!m.pack || !m.plen)) {
		bad(l, "a packed slice with pack or plen 0");
		return 0;
	}
	whole = m.off == 0 && m.len == m.size && !json_is_true(full);
	p[0] = m.pack ? (whole ? 3 : 4) : (whole ? 2 : 1);
	st32(p + 1, m.pos);
	st64(p + 5, m.id);
	st32(p + 13, m.size);
	n = REC_SHORT_LEN;
	if (!whole) {
		st32(p + 17, m.off);
		st32(p + 21, m.len);
		n = REC_LEN;
	}
	if (m.pack) {
		st64(p + n, m.pack);
		st32(p + n + 8, m.poff);
		st32(p + n + 12, m.plen);
		n += REC_PACK_EXTRA;
	}
	l->max_slice = u64max(l->max_slice, u64max(m.id, m.pack));
	return n;
}

/* A chunk's records (malloc'd) and their references counted. */
static int j_recs(struct load *l, json_t *slices, unsigned char **out,
		  size_t *n)
{
	size_t cnt = json_array_size(slices), k = 0;
	unsigned char *p;

	if (!json_is_array(slices))
		return bad(l, "\"slices\" is no array");
	p = malloc(cnt * REC_MAX + 1);
	if (!p)
		return ENOMEM;
	for (size_t i = 0; i < cnt; i++) {
		json_t *s = json_array_get(slices, i);
		size_t r = j_slice(l, s, p + k);
		if (!r) {
			free(p);
			return EINVAL;
		}
		uint64_t id = ld64(p + k + 5);
		if (id) {
			b_cmd(l, "HINCRBY");
			b_str(l, REFS_KEY);
			b_fmt(l, "%" PRIu64, id);
			b_str(l, "1");
			b_end(l);
		}
		k += r;
		l->st.slices++;
	}
	*out = p;
	*n = k;
	return l->err;
}

/* Each chunk of "chunks" to fn(idx, records). */
typedef void (*chunk_fn)(struct load *l, uint64_t ino, uint64_t idx,
			 const unsigned char *p, size_t n, void *ctx);
static int j_chunks(struct load *l, json_t *o, uint64_t ino, chunk_fn fn,
		    void *ctx)
{
	json_t *cs = json_object_get(o, "chunks");

	if (!cs)
		return 0;
	if (!json_is_array(cs))
		return bad(l, "\"chunks\" is no array");
	for (size_t i = 0; i < json_array_size(cs); i++) {
		json_t *c = json_array_get(cs, i);
		unsigned char *p = NULL;
		uint64_t idx;
		size_t n = 0;
		int err = j_u64(l, c, "idx", &idx);
		if (!err && idx > UINT32_MAX)
			err = bad(l, "chunk index out of range");
		if (!err)
			err = j_recs(l, json_object_get(c, "slices"), &p, &n);
		if (err)
			return err;
		fn(l, ino, idx, p, n, ctx);
		free(p);
	}
	return l->err;
}

/* c<ino>_<idx> */
static void chunk_key(struct load *l, uint64_t ino, uint64_t idx,
		      const unsigned char *p, size_t n, void *ctx)
{
	(void)ctx;
	if (!n)
		return;
	b_cmd(l, "SET");
	b_fmt(l, "c%" PRIu64 "_%" PRIu64, ino, idx);
	b_arg(l, p, n);
	b_end(l);
}

/* A dead record (delslices, stagedead): a slice's, or a whole pack's. */
static int j_dead(struct load *l, json_t *o, unsigned char *p, size_t *n)
{
	json_t *s = json_object_get(o, "slice");
	uint64_t pack, total;

	if (s) {
		/* a dead slice holds no reference: nothing counted */
		struct meta_slice m;
		*n = j_slice(l, s, p);
		if (!*n || !redis_rec_unpack((const char *)p, *n, &m))
			return EINVAL;
		return 0;
	}
	if (j_u64(l, o, "pack", &pack) || j_u64(l, o, "total", &total))
		return EINVAL;
	p[0] = 5;
	st64(p + 1, pack);
	st64(p + 9, total);
	*n = 17;
	l->max_slice = u64max(l->max_slice, pack);
	return 0;
}

/* ---- lines ----------------------------------------------------------- */

static const char *const kind_name[] = {"",	"file", "dir", "symlink",
					"fifo", "blk",	"chr", "sock"};

static int j_kind(struct load *l, json_t *o, uint8_t *type)
{
	const char *k = json_string_value(json_object_get(o, "kind"));
	for (uint8_t t = META_FILE; k && t <= META_SOCK; t++)
		if (!strcmp(k, kind_name[t])) {
			*type = t;
			return 0;
		}
	return bad(l, "\"kind\" is missing or unknown");
}

static int j_time(struct load *l, json_t *o, const char *k, int64_t *s,
		  uint32_t *ns)
{
	json_t *t = json_object_get(o, k);
	json_t *a = json_array_get(t, 0), *b = json_array_get(t, 1);
	if (json_array_size(t) != 2 || !json_is_integer(a) ||
	    !json_is_integer(b) || json_integer_value(b) < 0 ||
	    json_integer_value(b) > 999999999 ||
	    json_integer_value(a) < -(INT64_C(1) << 39) ||
	    json_integer_value(a) >= INT64_C(1) << 39)
		return bad(l, "\"%s\" is not [seconds, nanoseconds]", k);
	*s = json_integer_value(a);
	*ns = (uint32_t)json_integer_value(b);
	return 0;
}

static void st40(unsigned char *p, int64_t v)
{
	st32(p, (uint32_t)v);
	p[4] = (unsigned char)((uint64_t)v >> 32);
}

/* The 59-byte inode record of an inode line (SCHEMA.md); the stored
 * bytes it counts in usedspace. */
static int j_attr(struct load *l, json_t *o, uint64_t ino, unsigned char *p,
		  uint8_t *type, uint32_t *nlink, uint64_t *stored)
{
	uint32_t mode = 0, uid = 0, gid = 0, an = 0, mn = 0, cn = 0;
	uint64_t len = 0, f24 = 0;
	int64_t as = 0, ms = 0, cs = 0;
	json_t *st;

	if (j_kind(l, o, type) || j_u32(l, o, "mode", &mode) ||
	    j_u32(l, o, "uid", &uid) || j_u32(l, o, "gid", &gid) ||
	    j_u32(l, o, "nlink", nlink) || j_u64(l, o, "length", &len) ||
	    j_time(l, o, "atime", &as, &an) ||
	    j_time(l, o, "mtime", &ms, &mn) || j_time(l, o, "ctime", &cs, &cn))
		return EINVAL;
	if (mode > 07777)
		return bad(l, "\"mode\" is out of range");
	*stored = 0;
	switch (*type) {
	case META_DIR:
		if (j_u64(l, o, "parent", &f24))
			return EINVAL;
		f24 = ino == META_ROOT_INO ? META_ROOT_INO : rmap(l, f24);
		break;
	case META_BLK:
	case META_CHR:
		if (j_u64(l, o, "rdev", &f24))
			return EINVAL;
		break;
	case META_FILE:
		st = json_object_get(o, "stored");
		if (json_is_null(st)) {
			f24 = 0;
			*stored = len;
		} else if (j_u64(l, o, "stored", &f24)) {
			return EINVAL;
		} else {
			*stored = f24 < len ? f24 : len;
			f24++;
		}
		break;
	default:
		if (json_object_get(o, "field24") &&
		    j_u64(l, o, "field24", &f24))
			return EINVAL;
	}
	p[0] = 1;
	p[1] = *type;
	st16(p + 2, (uint16_t)mode);
	st32(p + 4, uid);
	st32(p + 8, gid);
	st32(p + 12, *nlink);
	st64(p + 16, len);
	st64(p + 24, f24);
	st40(p + 32, as);
	st32(p + 37, an);
	st40(p + 41, ms);
	st32(p + 46, mn);
	st40(p + 50, cs);
	st32(p + 55, cn);
	return 0;
}

/* An inode unlinked and open when dumped: a deleted file here. */
static int load_orphan(struct load *l, json_t *o, uint64_t ino, uint64_t len)
{
	int err = j_chunks(l, o, ino, chunk_key, NULL);
	if (err)
		return err;
	b_cmd(l, "ZADD");
	b_str(l, "delfiles");
	b_fmt(l, "%" PRId64, l->time);
	b_fmt(l, "%" PRIu64 ":%" PRIu64, ino, len);
	return b_end(l);
}

struct tail {
	int want; /* chunk 0 goes to the tail field */
	unsigned char *p;
	size_t n;
};

/* chunk 0 kept for the inode's hash when it is the tail; others keys */
static void chunk_or_tail(struct load *l, uint64_t ino, uint64_t idx,
			  const unsigned char *p, size_t n, void *ctx)
{
	struct tail *t = ctx;
	if (idx || !t->want || t->p) {
		chunk_key(l, ino, idx, p, n, NULL);
		return;
	}
	t->p = malloc(n ? n : 1);
	if (!t->p) {
		l->err = ENOMEM;
		return;
	}
	memcpy(t->p, p, n);
	t->n = n;
}

static int load_xattrs(struct load *l, json_t *o, uint64_t ino)
{
	json_t *xs = json_object_get(o, "xattrs");
	int err = 0;

	if (!xs)
		return 0;
	if (!json_is_array(xs))
		return bad(l, "\"xattrs\" is no array");
	for (size_t i = 0; i < json_array_size(xs) && !err; i++) {
		json_t *x = json_array_get(xs, i);
		const char *n, *v;
		size_t nn, vn;
		unsigned char *own1, *own2 = NULL;
		err = j_bytes(l, x, "name", &n, &nn, &own1, 0);
		if (!err)
			err = j_bytes(l, x, "value", &v, &vn, &own2, 0);
		if (!err) {
			b_cmd(l, "HSET");
			b_fmt(l, "x%" PRIu64, ino);
			b_arg(l, n, nn);
			b_arg(l, v, vn);
			err = b_end(l);
		}
		free(own1);
		free(own2);
	}
	return err;
}

static int load_versions(struct load *l, json_t *o, uint64_t ino)
{
	json_t *vs = json_object_get(o, "versions");
	uint64_t vdir;
	int err = 0;

	if (!json_object_get(o, "vdir"))
		return vs ? bad(l, "\"versions\" without \"vdir\"") : 0;
	if (j_u64(l, o, "vdir", &vdir))
		return EINVAL;
	b_cmd(l, "HSET");
	b_str(l, "vdirs");
	b_fmt(l, "%" PRIu64, ino);
	b_fmt(l, "%" PRIu64, rmap(l, vdir));
	b_end(l);
	for (size_t i = 0; i < json_array_size(vs) && !err; i++) {
		json_t *v = json_array_get(vs, i);
		unsigned char rec[48], *own1, *own2 = NULL, *r = NULL;
		uint64_t f[6];
		const char *tag, *msg;
		size_t tn, mn;
		static const char *const names[] = {"top",  "created", "files",
						    "dirs", "others",  "bytes"};
		for (int k = 0; k < 6 && !err; k++)
			err = j_u64(l, v, names[k], &f[k]);
		if (err)
			return err;
		err = j_bytes(l, v, "tag", &tag, &tn, &own1, 0);
		if (!err)
			err = j_bytes(l, v, "msg", &msg, &mn, &own2, 0);
		if (!err && !(r = malloc(sizeof rec + mn)))
			err = ENOMEM;
		if (!err) {
			f[0] = rmap(l, f[0]);
			for (int k = 0; k < 6; k++)
				st64(r + 8 * k, f[k]);
			memcpy(r + sizeof rec, msg, mn);
			b_cmd(l, "HSET");
			b_fmt(l, "v%" PRIu64, ino);
			b_arg(l, tag, tn);
			b_arg(l, r, sizeof rec + mn);
			err = b_end(l);
		}
		free(r);
		free(own1);
		free(own2);
	}
	return err;
}

static int load_inode(struct load *l, json_t *o)
{
	unsigned char attr[ATTR_LEN];
	struct tail t = {json_is_true(json_object_get(o, "tail")), NULL, 0};
	uint64_t ino, stored = 0;
	uint32_t nlink = 0;
	uint8_t type = 0;
	int err;

	if (j_u64(l, o, "ino", &ino))
		return EINVAL;
	ino = rmap(l, ino);
	if (!ino || ino >= UINT64_C(1) << 53)
		return bad(l, "inode number out of range");
	if (j_attr(l, o, ino, attr, &type, &nlink, &stored))
		return EINVAL;
	l->st.inodes++;
	l->st.dirs += type == META_DIR;
	l->st.files += type == META_FILE;
	l->st.symlinks += type == META_SYMLINK;
	l->max_ino = u64max(l->max_ino, ino);
	if (type != META_DIR && nlink == 0)
		return load_orphan(l, o, ino, ld64(attr + 16));
	err = j_chunks(l, o, ino, chunk_or_tail, &t);
	if (!err) {
		b_cmd(l, "HSET");
		b_fmt(l, "n%" PRIu64, ino / INO_PER_HASH);
		b_fmt(l, "%" PRIu64, ino % INO_PER_HASH);
		b_arg(l, attr, sizeof attr);
		if (t.p) {
			b_fmt(l, "%" PRIu64, ino % INO_PER_HASH + INO_PER_HASH);
			b_arg(l, t.p, t.n);
		}
		err = b_end(l);
	}
	free(t.p);
	if (!err)
		err = load_xattrs(l, o, ino);
	if (!err && type == META_SYMLINK) {
		const char *p;
		size_t n;
		unsigned char *own;
		err = j_bytes(l, o, "target", &p, &n, &own, 0);
		if (!err) {
			b_cmd(l, "SET");
			b_fmt(l, "s%" PRIu64, ino);
			b_arg(l, p, n);
			err = b_end(l);
		}
		free(own);
	}
	if (!err && type == META_DIR)
		err = load_versions(l, o, ino);
	l->totalinodes++;
	if (type == META_FILE)
		l->usedspace += stored;
	return err;
}

static int load_dirent(struct load *l, json_t *o)
{
	uint64_t dir, ino;
	uint8_t type, v[9];
	const char *name;
	size_t n, k = 1;
	unsigned char *own;
	int err;

	if (j_u64(l, o, "dir", &dir) || j_u64(l, o, "ino", &ino) ||
	    j_kind(l, o, &type) || j_bytes(l, o, "name", &name, &n, &own, 0))
		return EINVAL;
	if (!n || n > META_NAME_MAX || memchr(name, '/', n) ||
	    memchr(name, 0, n)) {
		free(own);
		return bad(l, "a name that is no file name");
	}
	ino = rmap(l, ino);
	v[0] = type;
	for (uint64_t x = ino; x || k == 1; x >>= 8)
		v[k++] = (uint8_t)x;
	b_cmd(l, "HSET");
	b_fmt(l, "d%" PRIu64, rmap(l, dir));
	b_arg(l, name, n);
	b_arg(l, v, k);
	err = b_end(l);
	free(own);
	if (!err && type == META_FILE) {
		/* a regular file's parent field (SCHEMA.md): the directory
		 * of a name of it (of several, the last one loaded) */
		b_cmd(l, "HSET");
		b_fmt(l, "n%" PRIu64, ino / INO_PER_HASH);
		b_fmt(l, "%" PRIu64, ino % INO_PER_HASH + 2 * INO_PER_HASH);
		b_fmt(l, "%" PRIu64, rmap(l, dir));
		err = b_end(l);
	}
	l->st.entries++;
	return err;
}

static int load_delfile(struct load *l, json_t *o)
{
	uint64_t ino, len;
	char score[64];

	if (j_u64(l, o, "ino", &ino) || j_u64(l, o, "length", &len) ||
	    j_score(l, o, "time", score, sizeof score))
		return EINVAL;
	l->max_ino = u64max(l->max_ino, ino);
	int err = j_chunks(l, o, ino, chunk_key, NULL);
	if (err)
		return err;
	b_cmd(l, "ZADD");
	b_str(l, "delfiles");
	b_str(l, score);
	b_fmt(l, "%" PRIu64 ":%" PRIu64, ino, len);
	return b_end(l);
}

/* delslice, and stagedead: the staging that kept it back is not carried,
 * so it is dead for the loaded volume's reclamation at once */
static int load_dead(struct load *l, json_t *o)
{
	unsigned char p[REC_MAX];
	size_t n;

	if (j_dead(l, o, p, &n))
		return EINVAL;
	b_cmd(l, "RPUSH");
	b_str(l, "delslices");
	b_arg(l, p, n);
	return b_end(l);
}

static int load_delayed(struct load *l, json_t *o)
{
	unsigned char p[REC_MAX];
	char score[64];
	size_t n;

	if (j_score(l, o, "time", score, sizeof score))
		return EINVAL;
	n = j_slice(l, json_object_get(o, "slice"), p);
	if (!n)
		return EINVAL;
	b_cmd(l, "ZADD");
	b_str(l, "delayslices");
	b_str(l, score);
	b_arg(l, p, n);
	return b_end(l);
}

static int load_num(struct load *l, json_t *o, const char *hash,
		    const char *key, const char *value)
{
	uint64_t id, v;

	if (j_u64(l, o, key, &id) || j_u64(l, o, value, &v))
		return EINVAL;
	if (!hash)
		return 0;
	if (!strcmp(hash, "packs") || !strcmp(hash, "packdead"))
		l->max_slice = u64max(l->max_slice, id);
	b_cmd(l, "HSET");
	b_str(l, hash);
	b_fmt(l, "%" PRIu64, id);
	b_fmt(l, "%" PRIu64, v);
	return b_end(l);
}

/* The trash (SCHEMA.md): its inode, an hour's counter, a cut name. */
static int load_trash(struct load *l, json_t *o, const char *t)
{
	uint64_t ino, n;
	const char *name, *orig;
	size_t nn, on;
	unsigned char *own1, *own2 = NULL;
	int err;

	if (!strcmp(t, "trash")) {
		if (j_u64(l, o, "ino", &ino))
			return EINVAL;
		b_cmd(l, "SET");
		b_str(l, "trash");
		b_fmt(l, "%" PRIu64, rmap(l, ino));
		return b_end(l);
	}
	if (j_u64(l, o, "dir", &ino))
		return EINVAL;
	if (!strcmp(t, "trashname")) {
		err = j_bytes(l, o, "name", &name, &nn, &own1, 0);
		if (!err)
			err = j_bytes(l, o, "orig", &orig, &on, &own2, 0);
		if (!err) {
			b_cmd(l, "HSET");
			b_fmt(l, "tn%" PRIu64, rmap(l, ino));
			b_arg(l, name, nn);
			b_arg(l, orig, on);
			err = b_end(l);
		}
		free(own1);
		free(own2);
		return err;
	}
	const char *v = !strcmp(t, "trashcount") ? "count" : "bytes";
	if (j_u64(l, o, v, &n))
		return EINVAL;
	b_cmd(l, "HSET");
	b_str(l, t);
	b_fmt(l, "%" PRIu64, rmap(l, ino));
	b_fmt(l, "%" PRIu64, n);
	return b_end(l);
}

/* A directory quota (SCHEMA.md "Quotas"), its usage as dumped. A quota
 * of the subtree loaded as the root is not kept: the root has none. */
static int load_quota(struct load *l, json_t *o)
{
	uint64_t dir, ms, mi, us, ui;
	unsigned char rec[16];

	if (j_u64(l, o, "dir", &dir) || j_u64(l, o, "max_space", &ms) ||
	    j_u64(l, o, "max_inodes", &mi) || j_u64(l, o, "used_space", &us) ||
	    j_u64(l, o, "used_inodes", &ui))
		return EINVAL;
	if (rmap(l, dir) == META_ROOT_INO)
		return 0;
	st64(rec, ms);
	st64(rec + 8, mi);
	b_cmd(l, "HSET");
	b_str(l, "quota");
	b_fmt(l, "%" PRIu64, dir);
	b_arg(l, rec, sizeof rec);
	int err = b_end(l);
	if (err)
		return err;
	b_cmd(l, "HSET");
	b_str(l, "quotaused");
	b_fmt(l, "s%" PRIu64, dir);
	b_fmt(l, "%" PRIu64, us);
	b_fmt(l, "i%" PRIu64, dir);
	b_fmt(l, "%" PRIu64, ui);
	err = b_end(l);
	if (err)
		return err;
	b_cmd(l, "INCR");
	b_str(l, "quotagen");
	return b_end(l);
}

/* A detached copy: abandoned here (no session of the dump lives on), a
 * tree handed over whole that the cleaners delete (SCHEMA.md). */
static int load_snapshot(struct load *l, json_t *o)
{
	uint64_t top;
	char score[64];
	unsigned char pair[16];

	if (j_u64(l, o, "top", &top) ||
	    j_score(l, o, "time", score, sizeof score))
		return EINVAL;
	top = rmap(l, top);
	b_cmd(l, "HSET");
	b_str(l, "snapshots");
	b_fmt(l, "%" PRIu64, top);
	b_fmt(l, "0:%s", score);
	b_end(l);
	st64(pair, 0);
	st64(pair + 8, top);
	b_cmd(l, "RPUSH");
	b_fmt(l, "snapdirs:%" PRIu64, top);
	b_arg(l, pair, sizeof pair);
	return b_end(l);
}

static int load_header(struct load *l, json_t *o)
{
	const char *t = json_string_value(json_object_get(o, "type"));
	const char *f = json_string_value(json_object_get(o, "format"));
	json_t *c = json_object_get(o, "counters");
	uint64_t v, vf;

	if (!t || strcmp(t, "header") || !f || strcmp(f, "granary-dump"))
		return bad(l, "not a granary dump (no header)");
	if (j_u64(l, o, "version", &v))
		return EINVAL;
	if (v > DUMP_VERSION)
		return bad(l,
			   "dump format version %" PRIu64
			   " is newer than this granary's %d: load it with "
			   "a newer granary",
			   v, DUMP_VERSION);
	if (j_u64(l, o, "volume_format", &vf))
		return EINVAL;
	if (vf != META_FORMAT_VERSION)
		return bad(l,
			   "a volume of format version %" PRIu64
			   "; this granary builds version %d",
			   vf, META_FORMAT_VERSION);
	l->setting = json_object_get(o, "setting");
	if (!json_is_object(l->setting))
		return bad(l, "\"setting\" is no object");
	json_incref(l->setting);
	const char *uuid =
	    json_string_value(json_object_get(l->setting, "uuid"));
	const char *crypt =
	    json_string_value(json_object_get(l->setting, "crypt"));
	if (l->o->need_uuid && (!uuid || strcmp(uuid, l->o->need_uuid)))
		return bad(l,
			   "the dump is of volume uuid %s, not %s (the "
			   "volume of its store)",
			   uuid ? uuid : "(none)", l->o->need_uuid);
	if (l->o->need_crypt && (!crypt || !*crypt))
		return bad(l, "the volume is encrypted, but the dump has no "
			      "\"crypt\" setting: it was altered");
	json_t *tm = json_object_get(o, "time");
	if (!json_is_integer(tm))
		return bad(l, "\"time\" is missing");
	l->time = json_integer_value(tm);
	if (j_u64(l, o, "root", &l->root) || !l->root)
		return EINVAL;
	if (json_is_object(c) && json_object_get(c, "nextinode") &&
	    (j_u64(l, c, "nextinode", &l->next_ino) ||
	     j_u64(l, c, "nextslice", &l->next_slice)))
		return EINVAL;
	return 0;
}

static int load_trailer(struct load *l, json_t *o)
{
	uint64_t lines, inodes, dirents, ni, ns;

	if (j_u64(l, o, "lines", &lines) || j_u64(l, o, "inodes", &inodes) ||
	    j_u64(l, o, "dirents", &dirents) || j_u64(l, o, "nextinode", &ni) ||
	    j_u64(l, o, "nextslice", &ns))
		return EINVAL;
	if (lines != l->lineno - 1 || inodes != l->st.inodes ||
	    dirents != l->st.entries)
		return bad(l,
			   "the trailer counts %" PRIu64 " lines, %" PRIu64
			   " inodes and %" PRIu64 " entries; the stream had "
			   "%" PRIu64 ", %" PRIu64 " and %" PRIu64,
			   lines, inodes, dirents, l->lineno - 1, l->st.inodes,
			   l->st.entries);
	l->next_ino = u64max(l->next_ino, ni);
	l->next_slice = u64max(l->next_slice, ns);
	l->ended = 1;
	return 0;
}

static int load_line(struct load *l, char *s, size_t n)
{
	json_error_t je;
	json_t *o;
	const char *t;
	int err;

	o = json_loadb(s, n, JSON_REJECT_DUPLICATES, &je);
	if (!o && l->partial)
		return bad(l, "the stream ends inside this line: cut short");
	if (!o || !json_is_object(o)) {
		json_decref(o);
		return bad(l, "%s", o ? "not a JSON object" : je.text);
	}
	if (l->lineno == 1) {
		err = load_header(l, o);
		json_decref(o);
		return err;
	}
	if (l->ended) {
		json_decref(o);
		return bad(l, "a line after the trailer");
	}
	t = json_string_value(json_object_get(o, "type"));
	if (!t)
		err = bad(l, "no \"type\"");
	else if (!strcmp(t, "inode"))
		err = load_inode(l, o);
	else if (!strcmp(t, "dirent"))
		err = load_dirent(l, o);
	else if (!strcmp(t, "delfile"))
		err = load_delfile(l, o);
	else if (!strcmp(t, "delslice") || !strcmp(t, "stagedead"))
		err = load_dead(l, o);
	else if (!strcmp(t, "delayslice"))
		err = load_delayed(l, o);
	else if (!strcmp(t, "sliceref"))
		err = load_num(l, o, NULL, "id", "extra");
	else if (!strcmp(t, "pack"))
		err = load_num(l, o, "packs", "pack", "total");
	else if (!strcmp(t, "packdead"))
		err = load_num(l, o, "packdead", "pack", "dead");
	else if (!strcmp(t, "snapshot"))
		err = load_snapshot(l, o);
	else if (!strcmp(t, "trash") || !strcmp(t, "trashcount") ||
		 !strcmp(t, "trashbytes") || !strcmp(t, "trashname"))
		err = load_trash(l, o, t);
	else if (!strcmp(t, "quota"))
		err = load_quota(l, o);
	else if (!strcmp(t, "end"))
		err = load_trailer(l, o);
	else
		err = bad(l, "unknown type \"%s\"", t);
	json_decref(o);
	return err;
}

/* ---- the id epoch ---------------------------------------------------- */

/*
 * The ids a restored volume hands out must never be ones the dumped
 * volume handed out after the dump (the interval the restore loses):
 * objects of those names may still be in the store, in a node's disk
 * cache or writeback staging, and a client still mounted may hold them
 * in memory; with a valid checksum, nothing would tell them from the new
 * file's. So nextslice (packs share it) starts at the second multiple of
 * 2^40 after the highest slice or pack id the dump knows, nextinode at
 * the second multiple of 2^32 after its highest inode: at least an epoch
 * past it, more than the lost interval can ever use (2^40 ids are a
 * billion batches of 1000). Inode numbers take the smaller epoch: up to
 * 2^40 a directory entry keeps its 6 bytes (SCHEMA.md), which lasts a
 * hundred loads. Lua numbers are doubles: a load that would leave less
 * than an epoch below 2^53 is refused.
 */
#define SLICE_EPOCH META_SLICE_EPOCH
#define INODE_EPOCH META_INODE_EPOCH
#define ID_LIMIT    (UINT64_C(1) << 53)

uint64_t meta_epoch_after(uint64_t highest, uint64_t epoch)
{
	return (highest / epoch + 2) * epoch;
}

/* The new epoch's starts: 0, or EOVERFLOW (said why). */
static int load_epoch(struct load *l, uint64_t *slices, uint64_t *inodes)
{
	uint64_t hs = u64max(l->next_slice, l->max_slice);
	uint64_t hi = u64max(l->next_ino, l->max_ino);

	*slices = meta_epoch_after(hs, SLICE_EPOCH);
	*inodes = meta_epoch_after(hi, INODE_EPOCH);
	if (hs < ID_LIMIT && hi < ID_LIMIT &&
	    *slices + SLICE_EPOCH <= ID_LIMIT &&
	    *inodes + INODE_EPOCH <= ID_LIMIT)
		return 0;
	log_err("the dump is refused: its highest slice id %" PRIu64
		" or inode %" PRIu64 " leaves no room below 2^53 for the new "
		"id epoch a load starts",
		hs, hi);
	if (l->o->why && l->o->why_cap)
		snprintf(l->o->why, l->o->why_cap,
			 "its highest slice id (%" PRIu64 ") or inode (%" PRIu64
			 ") leaves no room below 2^53 for the new id epoch a "
			 "load starts: copy the data into a new volume",
			 hs, hi);
	return EOVERFLOW;
}

/* A fresh restore_id: 16 hex digits. */
static void restore_id_make(char out[META_RESTORE_ID])
{
	uint64_t r = 0;
	if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		r = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^
		    (uint64_t)ts.tv_sec ^ (uint64_t)getpid() << 40;
	}
	snprintf(out, META_RESTORE_ID, "%016" PRIx64, r);
}

/* Settings a load writes itself, not as the dump has them (the group
 * secret: made anew by the restored volume's first group member). */
static int setting_replaced(const char *k)
{
	return !strcmp(k, "access_key") || !strcmp(k, "secret_key") ||
	       !strcmp(k, "restore_id") || !strcmp(k, "restore_id_b64") ||
	       !strcmp(k, "slice_floor") || !strcmp(k, "inode_floor") ||
	       !strcmp(k, "group_secret") || !strcmp(k, "group_secret_b64");
}

/* ---- the end --------------------------------------------------------- */

/* sliceref from the references counted: beyond the first. A field met
 * twice (HSCAN of a hash resized meanwhile) is set twice alike. */
static int ref_field(struct meta *m, const redisReply *f, const redisReply *v,
		     void *ctx)
{
	struct load *l = ctx;
	uint64_t id, n;
	(void)m;
	if (!redis_parse_u64(f->str, (size_t)f->len, &id) ||
	    !redis_parse_u64(v->str, (size_t)v->len, &n) || n < 2)
		return 0;
	b_cmd(l, "HSET");
	b_str(l, "sliceref");
	b_arg(l, f->str, (size_t)f->len);
	b_fmt(l, "%" PRIu64, n - 1);
	return b_end(l);
}

static int load_finish(struct load *l)
{
	const char *k;
	json_t *v;
	uint64_t slices, inodes;
	char rid[META_RESTORE_ID];
	int err = load_epoch(l, &slices, &inodes);

	if (!err)
		err = b_flush(l);
	if (!err)
		err = redis_fields_walk(l->m, REFS_KEY, 0, ref_field, l);
	if (!err) {
		b_cmd(l, "UNLINK");
		b_str(l, REFS_KEY);
		b_end(l);
		b_cmd(l, "MSET");
		b_str(l, "nextinode");
		b_fmt(l, "%" PRIu64, inodes);
		b_str(l, "nextslice");
		b_fmt(l, "%" PRIu64, slices);
		b_str(l, "totalinodes");
		b_fmt(l, "%" PRIu64, l->totalinodes);
		b_str(l, "usedspace");
		b_fmt(l, "%" PRIu64, l->usedspace);
		b_end(l);
		err = b_flush(l);
	}
	if (err)
		return err;
	/* the settings last: a volume only once it is whole */
	b_cmd(l, "HSET");
	b_str(l, "setting");
	json_object_foreach(l->setting, k, v)
	{
		size_t kn = strlen(k);
		unsigned char *own = NULL;
		const char *p;
		size_t n;
		if (setting_replaced(k))
			continue;
		if (kn > 4 && !strcmp(k + kn - 4, "_b64")) {
			ssize_t r =
			    json_is_string(v)
				? b64_decode(json_string_value(v),
					     json_string_length(v), &own)
				: -1;
			if (r < 0)
				return bad(l, "setting \"%s\" is not base64",
					   k);
			b_arg(l, k, kn - 4);
			b_arg(l, own, (size_t)r);
			free(own);
			continue;
		}
		if (!json_is_string(v))
			return bad(l, "setting \"%s\" is no string", k);
		p = json_string_value(v);
		n = json_string_length(v);
		b_str(l, k);
		b_arg(l, p, n);
	}
	b_str(l, "access_key");
	b_str(l, l->o->access_key ? l->o->access_key : "");
	b_str(l, "secret_key");
	b_str(l, l->o->secret_key ? l->o->secret_key : "");
	restore_id_make(rid);
	b_str(l, "restore_id");
	b_str(l, rid);
	b_str(l, "slice_floor");
	b_fmt(l, "%" PRIu64, slices);
	b_str(l, "inode_floor");
	b_fmt(l, "%" PRIu64, inodes);
	b_end(l);
	return b_flush(l);
}

/* The database holds nothing: else META_EEXIST, said why. */
static int load_empty(struct meta *m)
{
	struct cmd c;
	redisReply *r;
	int err;

	redis_cmd_init(&c, "DBSIZE");
	err = redis_run(m, RUN_RETRY, &c, &r);
	if (err)
		return err;
	long long n = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
	freeReplyObject(r);
	if (n == 0)
		return 0;
	redis_cmd_init(&c, "EXISTS");
	redis_cmd_str(&c, "setting");
	err = redis_run(m, RUN_RETRY, &c, &r);
	if (err)
		return err;
	if (r->type == REDIS_REPLY_INTEGER && r->integer)
		log_err("refusing to load into the database at '%s': it holds "
			"a granary volume",
			m->where);
	else
		log_err("refusing to load into the database at '%s': it holds "
			"other keys (a load cut short?)",
			m->where);
	freeReplyObject(r);
	return META_EEXIST;
}

int meta_load(struct meta *m, const struct meta_load_opts *o,
	      meta_source_fn source, void *source_arg,
	      struct meta_dump_stats *st)
{
	static const struct meta_load_opts none;
	struct load l = {.m = m, .source = source, .source_arg = source_arg};
	int err;

	l.o = o ? o : &none;
	if (l.o->why && l.o->why_cap)
		l.o->why[0] = 0;
	if (st)
		memset(st, 0, sizeof *st);
	if (m->opts.read_only)
		return EROFS;
	err = load_empty(m);
	while (!err) {
		char *s;
		size_t n;
		err = next_line(&l, &s, &n);
		if (err || !s)
			break;
		l.st.lines++;
		l.st.bytes += n + 1;
		err = load_line(&l, s, n);
		if (!err)
			err = l.err;
		if (!err && l.o->progress && !(l.st.lines & 255)) {
			int64_t now = mono_ns();
			if (now - l.last_progress > 250000000) {
				l.last_progress = now;
				l.o->progress(l.o->progress_arg, &l.st);
			}
		}
	}
	if (!err && l.lineno == 0) {
		l.lineno = 1;
		err = bad(&l, "the stream is empty: not a granary dump");
	} else if (!err && !l.ended) {
		l.lineno++;
		err = bad(&l, "the stream ends without its trailer: cut short");
	}
	if (!err)
		err = load_finish(&l);
	if (!err && l.o->progress)
		l.o->progress(l.o->progress_arg, &l.st);
	if (st)
		*st = l.st;
	json_decref(l.setting);
	free(l.in);
	free(l.arena);
	free(l.aoff);
	free(l.alens);
	free(l.argc);
	return err;
}
