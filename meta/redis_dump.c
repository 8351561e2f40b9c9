/*
 * redis_dump.c - a volume of the Redis engine written as a stream of JSON
 * lines (meta_dump.h; the format: docs/dump-format.md). Read only. The
 * building back, meta_load, is redis_load.c.
 *
 * Order matters beside live clients: what is dead (delslices,
 * delayslices, stagedead, delfiles, packdead) is read first, what is alive
 * (the inodes) after, since a dead slice never comes back to life while a
 * live one may die during the walk: a slice read as live and dying later
 * is then referenced by the dump and not queued in it (the loaded volume
 * keeps its data), never the other way round (a loaded file whose data is
 * deleted). Pack totals and the counters are read last, so that they
 * cover every pack and id the walk met.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "meta/meta_dump.h"
#include "meta/redis_int.h"
#include "lib/log.h"

#define DUMP_VERSION 1	    /* of the stream: docs/dump-format.md */
#define FLUSH_AT     65536  /* bytes of text buffered before the sink */
#define GROUP	     24	    /* inode hashes (or inodes) a script reads */
#define DIR_PAGE     "1000" /* entries of an HSCAN page of a big directory */

static const char *const kind_name[] = {"",	"file", "dir", "symlink",
					"fifo", "blk",	"chr", "sock"};

/* ---- JSON text out --------------------------------------------------- */

struct dump {
	struct meta *m;
	meta_sink_fn sink;
	void *sink_arg;
	const struct meta_dump_opts *o;
	struct meta_dump_stats st;
	char *buf;
	size_t len, cap;
	int err;		  /* sticky: of the sink, or out of memory */
	int64_t last_progress;	  /* monotonic ns */
	struct redis_seen *seen;  /* of the walk under way */
	struct redis_seen *names; /* of a big directory */
};

static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void out_flush(struct dump *d)
{
	if (d->len && !d->err)
		d->err = d->sink(d->sink_arg, d->buf, d->len);
	d->len = 0;
}

static void out_raw(struct dump *d, const void *p, size_t n)
{
	if (d->err)
		return;
	if (d->len + n > d->cap) {
		size_t cap = d->cap ? d->cap : FLUSH_AT * 2;
		while (cap < d->len + n)
			cap *= 2;
		char *b = realloc(d->buf, cap);
		if (!b) {
			d->err = ENOMEM;
			return;
		}
		d->buf = b;
		d->cap = cap;
	}
	memcpy(d->buf + d->len, p, n);
	d->len += n;
}

static void out_s(struct dump *d, const char *s)
{
	out_raw(d, s, strlen(s));
}

static void out_fmt(struct dump *d, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void out_fmt(struct dump *d, const char *fmt, ...)
{
	char tmp[256];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
	va_end(ap);
	if (n > 0)
		out_raw(d, tmp,
			(size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* The end of a line: counted, and the text handed on once big enough. */
static void out_eol(struct dump *d)
{
	out_raw(d, "\n", 1);
	d->st.lines++;
	if (d->len >= FLUSH_AT) {
		d->st.bytes += d->len;
		out_flush(d);
	}
	if (d->o->progress && !(d->st.lines & 255)) {
		int64_t now = mono_ns();
		if (now - d->last_progress > 250000000) {
			d->last_progress = now;
			d->o->progress(d->o->progress_arg, &d->st);
		}
	}
}

/* Valid UTF-8 (no overlong forms, surrogates or NUL): what a JSON reader
 * takes back as the same bytes. */
static int utf8_ok(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n;) {
		unsigned c = p[i], cp, min;
		size_t k;
		if (c && c < 0x80) {
			i++;
			continue;
		}
		if ((c & 0xe0) == 0xc0)
			k = 1, cp = c & 0x1f, min = 0x80;
		else if ((c & 0xf0) == 0xe0)
			k = 2, cp = c & 0x0f, min = 0x800;
		else if ((c & 0xf8) == 0xf0)
			k = 3, cp = c & 0x07, min = 0x10000;
		else
			return 0;
		if (n - i <= k)
			return 0;
		for (size_t j = 1; j <= k; j++) {
			if ((p[i + j] & 0xc0) != 0x80)
				return 0;
			cp = cp << 6 | (p[i + j] & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return 0;
		i += k + 1;
	}
	return 1;
}

static void out_b64(struct dump *d, const unsigned char *p, size_t n)
{
	static const char t[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	    "0123456789+/";
	char q[4];

	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16;
		if (i + 1 < n)
			v |= (uint32_t)p[i + 1] << 8;
		if (i + 2 < n)
			v |= p[i + 2];
		q[0] = t[v >> 18 & 63];
		q[1] = t[v >> 12 & 63];
		q[2] = i + 1 < n ? t[v >> 6 & 63] : '=';
		q[3] = i + 2 < n ? t[v & 63] : '=';
		out_raw(d, q, 4);
	}
}

/* <pre>"key":"bytes" when they are valid UTF-8, else <pre>"key_b64":
 * "base64"; pre is "," (or "{" for an object's first field). */
static void out_bytes_pre(struct dump *d, const char *pre, const char *key,
			  const void *v, size_t n)
{
	const unsigned char *p = v;

	if (!utf8_ok(p, n)) {
		out_fmt(d, "%s\"%s_b64\":\"", pre, key);
		out_b64(d, p, n);
		out_raw(d, "\"", 1);
		return;
	}
	out_fmt(d, "%s\"%s\":\"", pre, key);
	size_t run = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = p[i];
		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		out_raw(d, p + run, i - run);
		run = i + 1;
		if (c == '"' || c == '\\') {
			char e[2] = {'\\', (char)c};
			out_raw(d, e, 2);
		} else if (c == '\n') {
			out_raw(d, "\\n", 2);
		} else if (c == '\t') {
			out_raw(d, "\\t", 2);
		} else {
			out_fmt(d, "\\u%04x", c);
		}
	}
	out_raw(d, p + run, n - run);
	out_raw(d, "\"", 1);
}

static void out_bytes(struct dump *d, const char *key, const void *v, size_t n)
{
	out_bytes_pre(d, ",", key, v, n);
}

static void out_reply_bytes(struct dump *d, const char *key,
			    const redisReply *r)
{
	out_bytes(d, key, r->str, (size_t)r->len);
}

/* ---- records --------------------------------------------------------- */

/* The slice record at p (n bytes left) as a JSON object; its length, 0
 * when corrupt. */
static size_t out_slice(struct dump *d, const char *p, size_t n)
{
	struct meta_slice s;
	size_t k = redis_rec_unpack(p, n, &s);

	if (!k)
		return 0;
	out_fmt(d,
		"{\"pos\":%" PRIu32 ",\"id\":%" PRIu64 ",\"size\":%" PRIu32
		",\"off\":%" PRIu32 ",\"len\":%" PRIu32,
		s.pos, s.id, s.size, s.off, s.len);
	if (s.pack)
		out_fmt(d,
			",\"pack\":%" PRIu64 ",\"poff\":%" PRIu32
			",\"plen\":%" PRIu32,
			s.pack, s.poff, s.plen);
	/* the full form of a whole slice (written by a truncate, a
	 * compaction): kept as it is, so that a load gives the same bytes */
	if ((p[0] == 1 || p[0] == 4) && s.off == 0 && s.len == s.size)
		out_s(d, ",\"full\":true");
	out_raw(d, "}", 1);
	d->st.slices++;
	return k;
}

/* A chunk list's records as a JSON array; META_EPROTO when corrupt. */
static int out_slices(struct dump *d, const char *what, uint64_t ino,
		      const char *p, size_t n)
{
	out_raw(d, "[", 1);
	for (size_t o = 0, k; o < n; o += k) {
		if (o)
			out_raw(d, ",", 1);
		k = out_slice(d, p + o, n - o);
		if (!k) {
			log_err("redis at '%s': a chunk list of %s %" PRIu64
				" holds a corrupt slice record at byte %zu",
				d->m->where, what, ino, o);
			return META_EPROTO;
		}
	}
	out_raw(d, "]", 1);
	return 0;
}

/* ,"chunks":[{"idx":i,"slices":[...]}...] of a flat {idx, records...}. */
static int out_chunks(struct dump *d, const char *what, uint64_t ino,
		      const redisReply *ch)
{
	int err = 0;

	out_s(d, ",\"chunks\":[");
	for (size_t j = 0; j + 1 < ch->elements && !err; j += 2) {
		const redisReply *r = ch->element[j + 1];
		if (r->type != REDIS_REPLY_STRING)
			continue;
		out_fmt(d, "%s{\"idx\":%" PRIu64 ",\"slices\":", j ? "," : "",
			redis_reply_u64(ch->element[j]));
		err = out_slices(d, what, ino, r->str, (size_t)r->len);
		out_raw(d, "}", 1);
	}
	out_raw(d, "]", 1);
	return err;
}

/* A dead record (delslices, stagedead): a slice's, or a whole pack's
 * (form 5: u8 5, u64 pack, u64 total). */
static int out_dead(struct dump *d, const char *what, const redisReply *r)
{
	const unsigned char *p = (const unsigned char *)r->str;

	if (r->len == 17 && p[0] == 5) {
		out_fmt(d, ",\"pack\":%" PRIu64 ",\"total\":%" PRIu64,
			ld64(p + 1), ld64(p + 9));
		return 0;
	}
	out_s(d, ",\"slice\":");
	if (out_slice(d, r->str, (size_t)r->len) != (size_t)r->len) {
		log_err("redis at '%s': %s holds a corrupt record", d->m->where,
			what);
		return META_EPROTO;
	}
	return 0;
}

/* ---- inodes ---------------------------------------------------------- */

static int64_t ld40s(const unsigned char *p)
{
	uint64_t v = ld32(p) | (uint64_t)p[4] << 32;
	if (v & (UINT64_C(1) << 39))
		v |= ~UINT64_C(0) << 40;
	return (int64_t)v;
}

/* Every field of a 59-byte inode record (SCHEMA.md), by name. */
static void out_attr(struct dump *d, const unsigned char *p)
{
	uint8_t type = p[1];
	uint64_t f24 = ld64(p + 24);

	out_fmt(d,
		",\"kind\":\"%s\",\"mode\":%u,\"uid\":%" PRIu32
		",\"gid\":%" PRIu32 ",\"nlink\":%" PRIu32
		",\"length\":%" PRIu64,
		kind_name[type], (unsigned)ld16(p + 2), ld32(p + 4),
		ld32(p + 8), ld32(p + 12), ld64(p + 16));
	if (type == META_DIR)
		out_fmt(d, ",\"parent\":%" PRIu64, f24);
	else if (type == META_BLK || type == META_CHR)
		out_fmt(d, ",\"rdev\":%" PRIu64, f24);
	else if (type == META_FILE && f24)
		out_fmt(d, ",\"stored\":%" PRIu64, f24 - 1);
	else if (type == META_FILE)
		out_s(d, ",\"stored\":null");
	else if (f24)
		out_fmt(d, ",\"field24\":%" PRIu64, f24);
	out_fmt(d,
		",\"atime\":[%" PRId64 ",%" PRIu32 "],\"mtime\":[%" PRId64
		",%" PRIu32 "],\"ctime\":[%" PRId64 ",%" PRIu32 "]",
		ld40s(p + 32), ld32(p + 37), ld40s(p + 41), ld32(p + 46),
		ld40s(p + 50), ld32(p + 55));
}

static void out_versions(struct dump *d, const redisReply *v)
{
	int first = 1;

	out_s(d, ",\"versions\":[");
	for (size_t j = 0; j + 1 < v->elements; j += 2) {
		const redisReply *t = v->element[j], *r = v->element[j + 1];
		const unsigned char *p = (const unsigned char *)r->str;
		if (t->type != REDIS_REPLY_STRING ||
		    r->type != REDIS_REPLY_STRING || r->len < 48)
			continue;
		out_s(d, first ? "{" : ",{");
		first = 0;
		out_fmt(d, "\"top\":%" PRIu64, ld64(p));
		out_reply_bytes(d, "tag", t);
		out_fmt(d,
			",\"created\":%" PRId64 ",\"files\":%" PRIu64
			",\"dirs\":%" PRIu64 ",\"others\":%" PRIu64
			",\"bytes\":%" PRIu64,
			(int64_t)ld64(p + 8), ld64(p + 16), ld64(p + 24),
			ld64(p + 32), ld64(p + 40));
		out_bytes(d, "msg", p + 48, (size_t)r->len - 48);
		out_raw(d, "}", 1);
	}
	out_raw(d, "]", 1);
}

/* One line per entry of an HSCAN page (or HGETALL) of directory dir;
 * with d->names, only names not handed out before. */
static int out_dirents(struct dump *d, uint64_t dir, const redisReply *page,
		       int dedup)
{
	for (size_t j = 0; j + 1 < page->elements; j += 2) {
		const redisReply *k = page->element[j];
		const redisReply *v = page->element[j + 1];
		const unsigned char *p = (const unsigned char *)v->str;
		uint64_t ino = 0;
		if (k->type != REDIS_REPLY_STRING)
			return META_EPROTO;
		if (dedup) {
			int dup =
			    redis_seen_name(d->names, k->str, (size_t)k->len);
			if (dup < 0)
				return -dup;
			if (dup)
				continue;
		}
		if (v->type != REDIS_REPLY_STRING || v->len < 2 || v->len > 9 ||
		    p[0] < META_FILE || p[0] > META_SOCK) {
			log_warn("redis at '%s': entry '%s' of d%" PRIu64
				 " is no directory entry: left out",
				 d->m->where, k->str, dir);
			continue;
		}
		for (size_t b = (size_t)v->len - 1; b >= 1; b--)
			ino = ino << 8 | p[b];
		out_fmt(d, "{\"type\":\"dirent\",\"dir\":%" PRIu64, dir);
		out_reply_bytes(d, "name", k);
		out_fmt(d, ",\"ino\":%" PRIu64 ",\"kind\":\"%s\"}", ino,
			kind_name[p[0]]);
		out_eol(d);
		d->st.entries++;
	}
	return d->err;
}

/* The pages of a directory after the first (which came atomically with
 * its inode): HSCAN may hand out an entry twice, so names are kept (a
 * 64-bit hash each) until the directory is done. */
static int dir_rest(struct dump *d, uint64_t dir, const redisReply *first,
		    const char *cursor)
{
	char key[32], cur[32];
	int err;

	snprintf(key, sizeof key, "d%" PRIu64, dir);
	snprintf(cur, sizeof cur, "%s", cursor);
	redis_seen_clear(d->names);
	err = out_dirents(d, dir, first, 1);
	while (!err && strcmp(cur, "0")) {
		const redisReply *page;
		redisReply *r;
		err = redis_scan_page(d->m, key, 0, cur, sizeof cur, &r, &page);
		if (err)
			break;
		err = out_dirents(d, dir, page, 1);
		freeReplyObject(r);
	}
	redis_seen_clear(d->names);
	return err;
}

static int item_str(const redisReply *r)
{
	return r->type == REDIS_REPLY_STRING;
}

static int item_arr(const redisReply *r)
{
	return r->type == REDIS_REPLY_ARRAY;
}

/* One inode of the script's answer: its line, then its entries' lines. */
static int out_inode(struct dump *d, const redisReply *it)
{
	const redisReply *const *e = (const redisReply *const *)it->element;
	uint64_t ino;
	const unsigned char *p;
	int err = 0;

	if (!item_arr(it) || it->elements != 10 ||
	    e[0]->type != REDIS_REPLY_INTEGER || !item_str(e[1]))
		return META_EPROTO;
	ino = (uint64_t)e[0]->integer;
	p = (const unsigned char *)e[1]->str;
	if (e[1]->len != ATTR_LEN || p[0] != 1 || p[1] < META_FILE ||
	    p[1] > META_SOCK) {
		log_warn("redis at '%s': inode %" PRIu64
			 " has no valid inode record: left out",
			 d->m->where, ino);
		return 0;
	}
	out_fmt(d, "{\"type\":\"inode\",\"ino\":%" PRIu64, ino);
	out_attr(d, p);
	if (e[2]->type == REDIS_REPLY_INTEGER && e[2]->integer)
		out_s(d, ",\"tail\":true");
	if (item_arr(e[3]))
		err = out_chunks(d, "inode", ino, e[3]);
	if (!err && item_arr(e[4])) {
		out_s(d, ",\"xattrs\":[");
		for (size_t j = 0; j + 1 < e[4]->elements; j += 2) {
			const redisReply *k = e[4]->element[j];
			if (j)
				out_raw(d, ",", 1);
			out_bytes_pre(d, "{", "name", k->str, (size_t)k->len);
			out_reply_bytes(d, "value", e[4]->element[j + 1]);
			out_raw(d, "}", 1);
		}
		out_raw(d, "]", 1);
	}
	if (item_str(e[5]))
		out_reply_bytes(d, "target", e[5]);
	if (item_str(e[8]))
		out_fmt(d, ",\"vdir\":%" PRIu64, redis_reply_u64(e[8]));
	if (item_arr(e[9]) && e[9]->elements)
		out_versions(d, e[9]);
	out_raw(d, "}", 1);
	out_eol(d);
	d->st.inodes++;
	if (p[1] == META_DIR)
		d->st.dirs++;
	else if (p[1] == META_FILE)
		d->st.files++;
	else if (p[1] == META_SYMLINK)
		d->st.symlinks++;
	if (err)
		return err;
	if (p[1] == META_DIR && item_str(e[6]) && item_arr(e[7])) {
		if (!strcmp(e[6]->str, "0"))
			err = out_dirents(d, ino, e[7], 0);
		else
			err = dir_rest(d, ino, e[7], e[6]->str);
	}
	return err ? err : d->err;
}

/* Run the script on one group of inode hashes ('h') or inodes ('i') and
 * write what it found. */
static int dump_group(struct dump *d, char mode, const uint64_t *nums, size_t n)
{
	struct cmd c;
	redisReply *r;
	int err;

	redis_cmd_script(d->m, &c, SC_DUMP_INODES);
	redis_cmd_str(&c, mode == 'h' ? "h" : "i");
	for (size_t i = 0; i < n; i++)
		redis_cmd_u64(&c, nums[i]);
	err = redis_run_script(d->m, RUN_RETRY, &c, &r);
	if (err)
		return err;
	for (size_t i = 1; i < r->elements && !err; i++)
		err = out_inode(d, r->element[i]);
	freeReplyObject(r);
	return err;
}

/* Every inode hash n<h>, SCAN page by page, each once, GROUP a script. */
static int dump_inodes(struct dump *d)
{
	char cursor[32] = "0";
	uint64_t group[GROUP];
	size_t n = 0;
	int err = 0;

	redis_seen_clear(d->seen);
	do {
		const redisReply *keys;
		redisReply *r;
		struct cmd c;
		redis_cmd_init(&c, "SCAN");
		redis_cmd_str(&c, cursor);
		redis_cmd_str(&c, "MATCH");
		redis_cmd_str(&c, "n[0-9]*");
		redis_cmd_str(&c, "COUNT");
		redis_cmd_str(&c, "1000");
		err = redis_run(d->m, RUN_RETRY, &c, &r);
		if (err)
			break;
		if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
		    r->element[0]->type != REDIS_REPLY_STRING ||
		    r->element[1]->type != REDIS_REPLY_ARRAY) {
			freeReplyObject(r);
			err = META_EPROTO;
			break;
		}
		snprintf(cursor, sizeof cursor, "%s", r->element[0]->str);
		keys = r->element[1];
		for (size_t i = 0; i < keys->elements && !err; i++) {
			const redisReply *k = keys->element[i];
			uint64_t h;
			if (k->type != REDIS_REPLY_STRING ||
			    !redis_parse_u64(k->str + 1, (size_t)k->len - 1,
					     &h))
				continue;
			int dup = redis_seen_add(d->seen, 'n', h, 0);
			if (dup < 0)
				err = -dup;
			if (dup)
				continue;
			group[n++] = h;
			if (n == GROUP) {
				err = dump_group(d, 'h', group, n);
				n = 0;
			}
		}
		freeReplyObject(r);
	} while (!err && strcmp(cursor, "0"));
	if (!err && n)
		err = dump_group(d, 'h', group, n);
	redis_seen_clear(d->seen);
	return err;
}

/* ---- the volume's lists, hashes and sorted sets ---------------------- */

/* A field of a hash walk handed out before (HSCAN repeats): 1. */
static int field_dup(struct dump *d, const redisReply *f)
{
	int dup = redis_seen_name(d->seen, f->str, (size_t)f->len);
	if (dup < 0)
		d->err = -dup;
	return dup != 0;
}

/* delslices, LRANGE page by page, in order. The list only loses records
 * at its head meanwhile (reclaim pops them): a page may then skip some,
 * which the loaded volume leaves in the store for gc to find. */
static int dump_delslices(struct dump *d)
{
	for (uint64_t start = 0;; start += 1000) {
		struct cmd c;
		redisReply *r;
		int err;

		redis_cmd_init(&c, "LRANGE");
		redis_cmd_str(&c, "delslices");
		redis_cmd_u64(&c, start);
		redis_cmd_u64(&c, start + 999);
		err = redis_run(d->m, RUN_RETRY, &c, &r);
		if (err)
			return err;
		if (r->type != REDIS_REPLY_ARRAY) {
			freeReplyObject(r);
			return META_EPROTO;
		}
		size_t n = r->elements;
		for (size_t i = 0; i < n && !err; i++) {
			if (r->element[i]->type != REDIS_REPLY_STRING)
				continue;
			out_s(d, "{\"type\":\"delslice\"");
			err = out_dead(d, "delslices", r->element[i]);
			out_raw(d, "}", 1);
			out_eol(d);
		}
		freeReplyObject(r);
		if (err || d->err || n < 1000)
			return err ? err : d->err;
	}
}

static int delayed_member(struct meta *m, const redisReply *f,
			  const redisReply *v, void *ctx)
{
	struct dump *d = ctx;
	(void)m;
	if (field_dup(d, f))
		return d->err;
	out_fmt(d, "{\"type\":\"delayslice\",\"time\":%s,\"slice\":", v->str);
	if (out_slice(d, f->str, (size_t)f->len) != (size_t)f->len) {
		log_err("redis at '%s': delayslices holds a corrupt record",
			d->m->where);
		return META_EPROTO;
	}
	out_raw(d, "}", 1);
	out_eol(d);
	return d->err;
}

static int stagedead_field(struct meta *m, const redisReply *f,
			   const redisReply *v, void *ctx)
{
	struct dump *d = ctx;
	(void)m;
	if (field_dup(d, f))
		return d->err;
	out_s(d, "{\"type\":\"stagedead\"");
	int err = out_dead(d, "stagedead", v);
	out_raw(d, "}", 1);
	out_eol(d);
	return err ? err : d->err;
}

/* A deleted file waiting for reclamation: its member and its chunk lists
 * (those reclaim has not dropped yet), read in one pipeline. */
static int delfile_member(struct meta *m, const redisReply *f,
			  const redisReply *v, void *ctx)
{
	struct dump *d = ctx;
	const char *colon = memchr(f->str, ':', (size_t)f->len);
	uint64_t ino, len, nch;
	int err = 0;

	if (!colon ||
	    !redis_parse_u64(f->str, (size_t)(colon - f->str), &ino) ||
	    !redis_parse_u64(colon + 1, (size_t)(f->str + f->len - colon - 1),
			     &len)) {
		log_warn("redis at '%s': delfiles holds a corrupt member '%s': "
			 "left out",
			 m->where, f->str);
		return 0;
	}
	if (field_dup(d, f))
		return d->err;
	out_fmt(d,
		"{\"type\":\"delfile\",\"ino\":%" PRIu64 ",\"length\":%" PRIu64
		",\"time\":%s,\"chunks\":[",
		ino, len, v->str);
	nch = (len + META_CHUNK_SIZE - 1) / META_CHUNK_SIZE;
	for (uint64_t lo = 0, first = 1; lo < nch && !err; lo += 256) {
		uint64_t hi = nch - lo < 256 ? nch : lo + 256;
		struct req reqs[256];
		const char *argv[256][2];
		size_t lens[256][2];
		char keys[256][48];
		redisReply *out[256];
		int k = (int)(hi - lo);
		for (int i = 0; i < k; i++) {
			snprintf(keys[i], sizeof keys[i],
				 "c%" PRIu64 "_%" PRIu64, ino,
				 lo + (uint64_t)i);
			argv[i][0] = "GET";
			argv[i][1] = keys[i];
			lens[i][0] = 3;
			lens[i][1] = strlen(keys[i]);
			reqs[i] = (struct req){2, argv[i], lens[i], -1};
		}
		err = redis_run_reqs(m, RUN_RETRY, reqs, k, out);
		for (int i = 0; i < k && !err; i++) {
			if (out[i]->type != REDIS_REPLY_STRING)
				continue;
			out_fmt(d, "%s{\"idx\":%" PRIu64 ",\"slices\":",
				first ? "" : ",", lo + (uint64_t)i);
			first = 0;
			err = out_slices(d, "deleted file", ino, out[i]->str,
					 (size_t)out[i]->len);
			out_raw(d, "}", 1);
		}
		for (int i = 0; i < k && !err; i++)
			freeReplyObject(out[i]);
	}
	out_s(d, "]}");
	out_eol(d);
	return err ? err : d->err;
}

/* packs, packdead, sliceref: "<id>" -> decimal */
struct num_walk {
	struct dump *d;
	const char *type, *key, *value;
};

static int num_field(struct meta *m, const redisReply *f, const redisReply *v,
		     void *ctx)
{
	struct num_walk *w = ctx;
	uint64_t id;
	char *end;
	(void)m;
	if (!redis_parse_u64(f->str, (size_t)f->len, &id))
		return 0;
	long long n = strtoll(v->str, &end, 10);
	if (*end || end == v->str)
		return 0;
	if (field_dup(w->d, f))
		return w->d->err;
	out_fmt(w->d, "{\"type\":\"%s\",\"%s\":%" PRIu64 ",\"%s\":%lld}",
		w->type, w->key, id, w->value, n);
	out_eol(w->d);
	return w->d->err;
}

static int num_walk(struct dump *d, const char *hash, const char *type,
		    const char *key, const char *value)
{
	struct num_walk w = {d, type, key, value};
	redis_seen_clear(d->seen);
	int err = redis_fields_walk(d->m, hash, 0, num_field, &w);
	redis_seen_clear(d->seen);
	return err;
}

/* ---- the trash (SCHEMA.md) --------------------------------------------- */

/* A whole name of an entry of hour directory h whose trash name was cut:
 * tn<h> holds trash name -> original name. */
struct tn_walk {
	struct dump *d;
	uint64_t hour;
};

static int trashname_field(struct meta *m, const redisReply *f,
			   const redisReply *v, void *ctx)
{
	struct tn_walk *w = ctx;
	(void)m;
	if (field_dup(w->d, f))
		return w->d->err;
	out_fmt(w->d, "{\"type\":\"trashname\",\"dir\":%" PRIu64, w->hour);
	out_reply_bytes(w->d, "name", f);
	out_reply_bytes(w->d, "orig", v);
	out_raw(w->d, "}", 1);
	out_eol(w->d);
	return w->d->err;
}

/* trashcount's fields are the hour directories: each one's tn<h>. */
static int trash_hour_field(struct meta *m, const redisReply *f,
			    const redisReply *v, void *ctx)
{
	struct dump *d = ctx;
	uint64_t hour;
	char key[32];
	(void)v;
	if (!redis_parse_u64(f->str, (size_t)f->len, &hour))
		return 0;
	struct tn_walk w = {d, hour};
	snprintf(key, sizeof key, "tn%" PRIu64, hour);
	return redis_fields_walk(m, key, 0, trashname_field, &w);
}

/* The trash's inode, its counters and its cut names, so that a loaded
 * volume keeps its trash (and what is in it) as a trash. */
static int dump_trash(struct dump *d)
{
	struct cmd c;
	redisReply *r;
	uint64_t ino;

	redis_cmd_init(&c, "GET");
	redis_cmd_str(&c, "trash");
	int err = redis_run(d->m, RUN_RETRY, &c, &r);
	if (err)
		return err;
	if (r->type == REDIS_REPLY_STRING &&
	    redis_parse_u64(r->str, (size_t)r->len, &ino)) {
		out_fmt(d, "{\"type\":\"trash\",\"ino\":%" PRIu64 "}", ino);
		out_eol(d);
	}
	freeReplyObject(r);
	if (!err)
		err = num_walk(d, "trashcount", "trashcount", "dir", "count");
	if (!err)
		err = num_walk(d, "trashbytes", "trashbytes", "dir", "bytes");
	if (!err) {
		/* an hour walked twice (HSCAN) gives its names once: a trash
		 * name holds the entry's inode, so it is one of its kind */
		redis_seen_clear(d->seen);
		err = redis_fields_walk(d->m, "trashcount", 0, trash_hour_field,
					d);
		redis_seen_clear(d->seen);
	}
	return err ? err : d->err;
}

/* The directory quotas with their usage as read now (the clients' pending
 * bytes are not carried: their sessions do not survive a load). */
static int dump_quotas(struct dump *d)
{
	struct meta_quota *q;
	size_t n;

	int err = meta_quota_list(d->m, &q, &n);
	for (size_t i = 0; !err && i < n; i++) {
		out_fmt(d,
			"{\"type\":\"quota\",\"dir\":%" PRIu64
			",\"max_space\":%" PRIu64 ",\"max_inodes\":%" PRIu64
			",\"used_space\":%" PRIu64 ",\"used_inodes\":%" PRIu64
			"}",
			q[i].ino, q[i].max_space, q[i].max_inodes,
			q[i].used_space, q[i].used_inodes);
		out_eol(d);
	}
	free(q);
	return err ? err : d->err;
}

/* A detached snapshot being built or deleted: "<sid>:<time>[:d]". */
static int snapshot_field(struct meta *m, const redisReply *f,
			  const redisReply *v, void *ctx)
{
	struct dump *d = ctx;
	uint64_t top, sid = 0;
	long long t = 0;
	(void)m;
	if (!redis_parse_u64(f->str, (size_t)f->len, &top) ||
	    sscanf(v->str, "%" SCNu64 ":%lld", &sid, &t) != 2)
		return 0;
	if (field_dup(d, f))
		return d->err;
	out_fmt(d,
		"{\"type\":\"snapshot\",\"top\":%" PRIu64 ",\"sid\":%" PRIu64
		",\"time\":%lld,\"deleting\":%s}",
		top, sid, t, strstr(v->str, ":d") ? "true" : "false");
	out_eol(d);
	return d->err;
}

static int fields(struct dump *d, const char *key, int zset, redis_field_fn fn)
{
	redis_seen_clear(d->seen);
	int err = redis_fields_walk(d->m, key, zset, fn, d);
	redis_seen_clear(d->seen);
	return err ? err : d->err;
}

/* ---- header and trailer ---------------------------------------------- */

/* nextinode, nextslice, totalinodes, usedspace as they are now. */
static int counters(struct dump *d, uint64_t v[4])
{
	struct cmd c;
	redisReply *r;
	int err;

	redis_cmd_init(&c, "MGET");
	redis_cmd_str(&c, "nextinode");
	redis_cmd_str(&c, "nextslice");
	redis_cmd_str(&c, "totalinodes");
	redis_cmd_str(&c, "usedspace");
	err = redis_run(d->m, RUN_RETRY, &c, &r);
	if (err)
		return err;
	if (r->type != REDIS_REPLY_ARRAY || r->elements != 4)
		err = META_EPROTO;
	for (size_t i = 0; !err && i < 4; i++)
		v[i] = redis_reply_u64(r->element[i]);
	freeReplyObject(r);
	return err;
}

/* Settings are named [a-z0-9_]; another name could not be a JSON key
 * as it is (and no granary writes one). */
static int setting_name_ok(const redisReply *k)
{
	if (!k->len || k->len > 64 ||
	    strspn(k->str, "abcdefghijklmnopqrstuvwxyz"
			   "0123456789_") != k->len)
		return 0;
	return 1;
}

static int dump_header(struct dump *d, uint64_t root)
{
	struct cmd c;
	redisReply *r, *t;
	uint64_t v[4];
	int err = counters(d, v);

	if (err)
		return err;
	redis_cmd_init(&c, "TIME");
	err = redis_run(d->m, RUN_RETRY, &c, &t);
	if (err)
		return err;
	redis_cmd_init(&c, "HGETALL");
	redis_cmd_str(&c, "setting");
	err = redis_run(d->m, RUN_RETRY, &c, &r);
	if (err) {
		freeReplyObject(t);
		return err;
	}
	if (r->type != REDIS_REPLY_ARRAY || t->type != REDIS_REPLY_ARRAY ||
	    t->elements != 2) {
		err = META_EPROTO;
		goto out;
	}
	out_fmt(d,
		"{\"type\":\"header\",\"format\":\"granary-dump\","
		"\"version\":%d,\"volume_format\":%d,\"time\":%s,"
		"\"root\":%" PRIu64,
		DUMP_VERSION, META_FORMAT_VERSION, t->element[0]->str, root);
	if (d->o->path)
		out_bytes(d, "path", d->o->path, strlen(d->o->path));
	/* every setting but the secrets (the S3 keys, the cache groups'),
	 * whatever fields other versions add */
	out_s(d, ",\"setting\":{");
	int first = 1;
	for (size_t i = 0; i + 1 < r->elements; i += 2) {
		const redisReply *k = r->element[i], *val = r->element[i + 1];
		if (k->type != REDIS_REPLY_STRING ||
		    val->type != REDIS_REPLY_STRING ||
		    !strcmp(k->str, "access_key") ||
		    !strcmp(k->str, "secret_key") ||
		    !strcmp(k->str, "group_secret") || !setting_name_ok(k))
			continue;
		out_bytes_pre(d, first ? "" : ",", k->str, val->str,
			      (size_t)val->len);
		first = 0;
	}
	out_fmt(d,
		"},\"counters\":{\"nextinode\":%" PRIu64
		",\"nextslice\":%" PRIu64 ",\"totalinodes\":%" PRIu64
		",\"usedspace\":%" PRIu64 "}}",
		v[0], v[1], v[2], v[3]);
	out_eol(d);
out:
	freeReplyObject(r);
	freeReplyObject(t);
	return err ? err : d->err;
}

static int dump_trailer(struct dump *d)
{
	uint64_t v[4];
	int err = counters(d, v);

	if (err)
		return err;
	out_fmt(d,
		"{\"type\":\"end\",\"lines\":%" PRIu64 ",\"inodes\":%" PRIu64
		",\"dirents\":%" PRIu64 ",\"nextinode\":%" PRIu64
		",\"nextslice\":%" PRIu64 "}",
		d->st.lines, d->st.inodes, d->st.entries, v[0], v[1]);
	out_eol(d);
	return d->err;
}

/* ---- meta_dump ------------------------------------------------------- */

int meta_dump(struct meta *m, const struct meta_dump_opts *o, meta_sink_fn sink,
	      void *sink_arg, struct meta_dump_stats *st)
{
	static const struct meta_dump_opts none;
	struct dump d = {.m = m, .sink = sink, .sink_arg = sink_arg};
	struct meta_volume v;
	int err;

	d.o = o ? o : &none;
	if (st)
		memset(st, 0, sizeof *st);
	err = meta_load_volume(m, &v);
	if (err)
		return err;
	if (d.o->path && strcmp(d.o->path, "/")) {
		log_err("dump of a subtree ('%s') is not supported yet",
			d.o->path);
		return ENOTSUP;
	}
	d.seen = redis_seen_new();
	d.names = redis_seen_new();
	if (!d.seen || !d.names) {
		err = ENOMEM;
		goto out;
	}
	err = dump_header(&d, META_ROOT_INO);
	/* what is dead first, what is alive after (see the file's head) */
	if (!err)
		err = dump_delslices(&d);
	if (!err)
		err = fields(&d, "delayslices", 1, delayed_member);
	if (!err)
		err = fields(&d, "stagedead", 0, stagedead_field);
	if (!err)
		err = fields(&d, "delfiles", 1, delfile_member);
	if (!err)
		err = num_walk(&d, "packdead", "packdead", "pack", "dead");
	if (!err)
		err = num_walk(&d, "sliceref", "sliceref", "id", "extra");
	if (!err)
		err = dump_inodes(&d);
	if (!err)
		err = dump_trash(&d);
	if (!err)
		err = dump_quotas(&d);
	if (!err)
		err = num_walk(&d, "packs", "pack", "pack", "total");
	if (!err)
		err = fields(&d, "snapshots", 0, snapshot_field);
	if (!err)
		err = dump_trailer(&d);
	if (!err) {
		d.st.bytes += d.len;
		out_flush(&d);
		err = d.err;
	}
	if (!err && d.o->progress)
		d.o->progress(d.o->progress_arg, &d.st);
out:
	if (st)
		*st = d.st;
	redis_seen_free(d.seen);
	redis_seen_free(d.names);
	free(d.buf);
	return err;
}
