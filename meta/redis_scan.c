/*
 * redis_scan.c - walks over the whole volume in the Redis engine
 * (meta_scan.h): chunk lists and tails, inode hashes and directories by
 * SCAN, delslices by LRANGE pages, the volume's hashes and sorted sets
 * (stagedead, staging, packs, sliceref, vdirs, snapshots, delfiles, the
 * sessions') by HSCAN and ZSCAN.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "meta/meta_objects.h"
#include "meta/meta_scan.h"
#include "meta/redis_int.h"
#include "lib/hash.h"
#include "lib/log.h"

#define PAGE 1000 /* keys a SCAN page asks for, entries an LRANGE takes */

/* ---- what a walk has seen -------------------------------------------- */

/* SCAN and HSCAN hand an element out twice when the table is resized
 * between two pages: a walk that must see each key (or each entry of a
 * big directory) once remembers what it handed out. A key is a kind and
 * one or two numbers; a name is its 64-bit hash (FNV-1a: two names of one
 * directory share a hash with a chance of about n^2 / 2^65). */
struct seen_key {
	struct hash_node hn;
	uint64_t a;
	uint32_t b;
	char kind;
};

#define SEEN_CHUNK 1024
struct seen_chunk {
	struct seen_chunk *next;
	size_t used;
	struct seen_key k[SEEN_CHUNK];
};

struct seen {
	struct hash h;
	struct seen_chunk *chunks;
};

static int seen_init(struct seen *s)
{
	s->chunks = NULL;
	return hash_init(&s->h, 10);
}

/* Forget everything, keeping one chunk and the buckets for the next use. */
static void seen_clear(struct seen *s)
{
	while (s->chunks && s->chunks->next) {
		struct seen_chunk *c = s->chunks;
		s->chunks = c->next;
		free(c);
	}
	if (s->chunks)
		s->chunks->used = 0;
	hash_clear(&s->h);
}

static void seen_release(struct seen *s)
{
	seen_clear(s);
	free(s->chunks);
	s->chunks = NULL;
	hash_release(&s->h);
}

struct seen_want {
	uint64_t a;
	uint32_t b;
	char kind;
};

static int seen_match(const struct hash_node *n, const void *key)
{
	const struct seen_key *k = hash_entry(n, struct seen_key, hn);
	const struct seen_want *w = key;
	return k->a == w->a && k->b == w->b && k->kind == w->kind;
}

/* 1 when (kind, a, b) was met before; else it is remembered and 0 (or
 * -ENOMEM). */
static int seen_add(struct seen *s, char kind, uint64_t a, uint32_t b)
{
	struct seen_want w = {a, b, kind};
	uint64_t h = hash_mix64(a ^ ((uint64_t)b << 32) ^ (uint64_t)kind);
	struct seen_chunk *c = s->chunks;

	if (hash_find(&s->h, h, seen_match, &w))
		return 1;
	if (!c || c->used == SEEN_CHUNK) {
		c = malloc(sizeof *c);
		if (!c)
			return -ENOMEM;
		c->used = 0;
		c->next = s->chunks;
		s->chunks = c;
	}
	struct seen_key *k = &c->k[c->used++];
	k->a = a;
	k->b = b;
	k->kind = kind;
	hash_insert(&s->h, &k->hn, h);
	return 0;
}

static uint64_t name_hash(const char *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)p[i]) * 0x100000001b3ull;
	return h;
}

/* ---- pages ----------------------------------------------------------- */

/* One page of SCAN (key NULL), or of HSCAN (ZSCAN when zset) of key, from
 * *cursor (a decimal string, "0" to start, "0" again when done). *out:
 * the page's array, {k, ...} or {field, value, ...}, inside *r (the
 * caller frees r). */
static int scan_page_of(struct meta *m, const char *key, int zset,
			const char *match, char *cursor, size_t cap,
			redisReply **r, const redisReply **out)
{
	struct cmd c;
	int err;

	redis_cmd_init(&c, !key ? "SCAN" : zset ? "ZSCAN" : "HSCAN");
	if (key)
		redis_cmd_str(&c, key);
	redis_cmd_str(&c, cursor);
	if (match) {
		redis_cmd_str(&c, "MATCH");
		redis_cmd_str(&c, match);
	}
	redis_cmd_str(&c, "COUNT");
	redis_cmd_u64(&c, PAGE);
	err = redis_run(m, RUN_RETRY, &c, r);
	if (err)
		return err;
	if ((*r)->type != REDIS_REPLY_ARRAY || (*r)->elements != 2 ||
	    (*r)->element[0]->type != REDIS_REPLY_STRING ||
	    (*r)->element[1]->type != REDIS_REPLY_ARRAY ||
	    (key && (*r)->element[1]->elements % 2)) {
		freeReplyObject(*r);
		*r = NULL;
		return META_EPROTO;
	}
	snprintf(cursor, cap, "%s", (*r)->element[0]->str);
	*out = (*r)->element[1];
	return 0;
}

static int scan_page(struct meta *m, const char *key, const char *match,
		     char *cursor, size_t cap, redisReply **r,
		     const redisReply **out)
{
	return scan_page_of(m, key, 0, match, cursor, cap, r, out);
}

/* A decimal number that is the whole of [p, p+n); 0 when it is not one. */
static int parse_u64(const char *p, size_t n, uint64_t *v)
{
	char buf[24], *end;

	if (!n || n >= sizeof buf || p[0] < '0' || p[0] > '9')
		return 0;
	memcpy(buf, p, n);
	buf[n] = 0;
	errno = 0;
	*v = strtoull(buf, &end, 10);
	return !errno && !*end;
}

/* Hand every record of the run [p, p+len) to fn as a reference from
 * `from` (ino, idx); holes are skipped. */
static int refs_of(struct meta *m, const char *where, const char *p, size_t len,
		   struct meta_ref *ref, meta_ref_fn fn, void *arg)
{
	for (size_t o = 0, k; o < len; o += k) {
		k = redis_rec_unpack(p + o, len - o, &ref->s);
		if (!k) {
			log_err("redis at '%s': %s holds a corrupt slice "
				"record at byte %zu",
				m->where, where, o);
			return META_EPROTO;
		}
		if (!ref->s.id)
			continue;
		int err = fn(arg, ref);
		if (err)
			return err;
	}
	return 0;
}

/* ---- chunk lists ----------------------------------------------------- */

/* A key of a SCAN page of "[cn][0-9]*" that the walk met before (or is
 * no chunk list or inode hash): 1, else 0 (remembered), or -ENOMEM. */
static int refs_key_seen(struct seen *sn, const redisReply *k)
{
	const char *us = strchr(k->str, '_');
	uint64_t a, b = 0;

	if (k->str[0] == 'c') {
		if (!us ||
		    !parse_u64(k->str + 1, (size_t)(us - k->str - 1), &a) ||
		    !parse_u64(us + 1, strlen(us + 1), &b) || b > UINT32_MAX)
			return 1;
	} else if (!parse_u64(k->str + 1, (size_t)k->len - 1, &a)) {
		return 1;
	}
	return seen_add(sn, k->str[0], a, (uint32_t)b);
}

/* A chunk list (ref: its place) to fn as META_REF_LIST, when lists. */
static int list_of(const struct meta_ref *ref, int lists, meta_ref_fn fn,
		   void *arg)
{
	struct meta_ref l = {.from = META_REF_LIST,
			     .ino = ref->ino,
			     .idx = ref->idx,
			     .tail = ref->tail};
	return lists ? fn(arg, &l) : 0;
}

/* The chunk lists (c<ino>_<idx>) and inode hashes (n<h>, for their tail
 * fields) of one SCAN page not met before, read in one pipeline. */
static int refs_page(struct meta *m, struct seen *sn, const redisReply *keys,
		     int lists, meta_ref_fn fn, void *arg)
{
	size_t n = keys->elements;
	struct req *reqs = calloc(n ? n : 1, sizeof *reqs);
	const char **argv = calloc(n ? 2 * n : 1, sizeof *argv);
	size_t *lens = calloc(n ? 2 * n : 1, sizeof *lens);
	redisReply **out = calloc(n ? n : 1, sizeof *out);
	const redisReply **ks = calloc(n ? n : 1, sizeof *ks); /* of reqs */
	size_t nreq = 0;
	int err = 0;

	if (!reqs || !argv || !lens || !out || !ks) {
		err = ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		const redisReply *k = keys->element[i];
		if (k->type != REDIS_REPLY_STRING) {
			err = META_EPROTO;
			goto out;
		}
		int dup = refs_key_seen(sn, k);
		if (dup < 0) {
			err = -dup;
			goto out;
		}
		if (dup)
			continue;
		size_t j = nreq++;
		ks[j] = k;
		argv[2 * j] = k->str[0] == 'c' ? "GET" : "HGETALL";
		argv[2 * j + 1] = k->str;
		lens[2 * j] = strlen(argv[2 * j]);
		lens[2 * j + 1] = (size_t)k->len;
		reqs[j] = (struct req){2, argv + 2 * j, lens + 2 * j, -1};
	}
	n = nreq;
	if (n)
		err = redis_run_reqs(m, RUN_RETRY, reqs, (int)n, out);
	for (size_t i = 0; i < n && !err; i++) {
		const redisReply *k = ks[i], *v = out[i];
		struct meta_ref ref = {.from = META_REF_CHUNK};
		const char *us = strchr(k->str, '_');
		uint64_t h, idx;

		if (k->str[0] == 'c') {
			/* c<ino>_<idx>: a chunk list; gone meanwhile: nil */
			if (!us ||
			    !parse_u64(k->str + 1, (size_t)(us - k->str - 1),
				       &ref.ino) ||
			    !parse_u64(us + 1, strlen(us + 1), &idx) ||
			    v->type != REDIS_REPLY_STRING)
				continue;
			ref.idx = (uint32_t)idx;
			err = list_of(&ref, lists, fn, arg);
			if (!err)
				err = refs_of(m, k->str, v->str, (size_t)v->len,
					      &ref, fn, arg);
			continue;
		}
		/* n<h>: fields 32..63 are the tails of inodes 32h + f - 32 */
		if (!parse_u64(k->str + 1, (size_t)k->len - 1, &h) ||
		    v->type != REDIS_REPLY_ARRAY || v->elements % 2)
			continue;
		for (size_t j = 0; j + 1 < v->elements && !err; j += 2) {
			const redisReply *f = v->element[j],
					 *t = v->element[j + 1];
			uint64_t fi;
			if (f->type != REDIS_REPLY_STRING ||
			    t->type != REDIS_REPLY_STRING ||
			    !parse_u64(f->str, (size_t)f->len, &fi) ||
			    fi < 32 || fi >= 64)
				continue;
			char where[64];
			snprintf(where, sizeof where,
				 "n%" PRIu64 " field %" PRIu64, h, fi);
			ref.ino = 32 * h + fi - 32;
			ref.idx = 0;
			ref.tail = 1;
			err = list_of(&ref, lists, fn, arg);
			if (!err)
				err = refs_of(m, where, t->str, (size_t)t->len,
					      &ref, fn, arg);
		}
	}
	for (size_t i = 0; i < n && out; i++)
		freeReplyObject(out[i]);
out:
	free(ks);
	free(out);
	free(lens);
	free(argv);
	free(reqs);
	return err;
}

/* The dead records of delslices, LRANGE page by page. The list only
 * shrinks at its head while we read (reclaim pops it), so a page may
 * repeat records: a repeat is harmless to a reference count of "any". */
static int refs_delslices(struct meta *m, meta_ref_fn fn, void *arg)
{
	for (uint64_t start = 0;; start += PAGE) {
		struct cmd c;
		redisReply *r;
		int err;

		redis_cmd_init(&c, "LRANGE");
		redis_cmd_str(&c, "delslices");
		redis_cmd_u64(&c, start);
		redis_cmd_u64(&c, start + PAGE - 1);
		err = redis_run(m, RUN_RETRY, &c, &r);
		if (err)
			return err;
		if (r->type != REDIS_REPLY_ARRAY) {
			freeReplyObject(r);
			return META_EPROTO;
		}
		size_t n = r->elements;
		for (size_t i = 0; i < n && !err; i++) {
			const redisReply *e = r->element[i];
			struct meta_ref ref = {.from = META_REF_DEAD};
			if (e->type != REDIS_REPLY_STRING)
				continue;
			err = refs_of(m, "delslices", e->str, (size_t)e->len,
				      &ref, fn, arg);
		}
		freeReplyObject(r);
		if (err || n < PAGE)
			return err;
	}
}

/* stagedead (slice id -> record, p<pack> -> form 5 record) and staging
 * (b<id>_<idx>, p<pack> -> sid). */
static int refs_hash(struct meta *m, const char *key, meta_ref_fn fn, void *arg)
{
	char cursor[32] = "0";
	int err = 0;

	do {
		const redisReply *page;
		redisReply *r;
		err = scan_page(m, key, NULL, cursor, sizeof cursor, &r, &page);
		if (err)
			return err;
		for (size_t j = 0; j + 1 < page->elements && !err; j += 2) {
			const redisReply *f = page->element[j];
			const redisReply *v = page->element[j + 1];
			struct meta_ref ref = {.from = key[5] == 'd'
							   ? META_REF_DEAD
							   : META_REF_STAGED};
			const unsigned char *p = (const unsigned char *)v->str;
			const char *us;
			uint64_t a, b;
			if (f->type != REDIS_REPLY_STRING ||
			    v->type != REDIS_REPLY_STRING)
				continue;
			if (f->str[0] == 'p' &&
			    parse_u64(f->str + 1, (size_t)f->len - 1, &a)) {
				ref.s.pack = a; /* a whole pack */
			} else if (ref.from == META_REF_DEAD) {
				if (v->len == 17 && p[0] == 5)
					continue; /* cannot be: p<pack> */
				err = refs_of(m, key, v->str, (size_t)v->len,
					      &ref, fn, arg);
				continue;
			} else if (f->str[0] == 'b' &&
				   (us = strchr(f->str, '_')) &&
				   parse_u64(f->str + 1,
					     (size_t)(us - f->str - 1), &a) &&
				   parse_u64(us + 1, strlen(us + 1), &b)) {
				ref.s.id = a;
				ref.idx = (uint32_t)b;
			} else {
				continue;
			}
			if (ref.from == META_REF_STAGED &&
			    !parse_u64(v->str, (size_t)v->len, &ref.sid))
				ref.sid = 0;
			err = fn(arg, &ref);
		}
		freeReplyObject(r);
	} while (!err && strcmp(cursor, "0") != 0);
	return err;
}

/* The slices compactions replaced, waiting for their delay (delayslices:
 * record -> time). */
static int refs_delayed(struct meta *m, meta_ref_fn fn, void *arg)
{
	char cursor[32] = "0";
	int err = 0;

	do {
		const redisReply *page;
		redisReply *r;
		err = scan_page_of(m, "delayslices", 1, NULL, cursor,
				   sizeof cursor, &r, &page);
		if (err)
			return err;
		for (size_t j = 0; j + 1 < page->elements && !err; j += 2) {
			const redisReply *e = page->element[j];
			struct meta_ref ref = {.from = META_REF_DEAD};
			if (e->type == REDIS_REPLY_STRING)
				err = refs_of(m, "delayslices", e->str,
					      (size_t)e->len, &ref, fn, arg);
		}
		freeReplyObject(r);
	} while (!err && strcmp(cursor, "0") != 0);
	return err;
}

int meta_scan_refs_pending(struct meta *m, meta_ref_fn fn, void *arg)
{
	/* delayslices first: reclaim moves its ripe records to delslices,
	 * so a record moving meanwhile is met at least once */
	int err = refs_delayed(m, fn, arg);
	if (!err)
		err = refs_delslices(m, fn, arg);
	if (!err)
		err = refs_hash(m, "stagedead", fn, arg);
	if (!err)
		err = refs_hash(m, "staging", fn, arg);
	return err;
}

static int scan_refs(struct meta *m, int lists, meta_ref_fn fn, void *arg)
{
	char cursor[32] = "0";
	struct seen sn;
	int err = seen_init(&sn);

	if (err)
		return err;
	do {
		const redisReply *keys;
		redisReply *r;
		err = scan_page(m, NULL, "[cn][0-9]*", cursor, sizeof cursor,
				&r, &keys);
		if (err)
			break;
		err = refs_page(m, &sn, keys, lists, fn, arg);
		freeReplyObject(r);
	} while (!err && strcmp(cursor, "0") != 0);
	seen_release(&sn);
	return err ? err : meta_scan_refs_pending(m, fn, arg);
}

int meta_scan_refs(struct meta *m, meta_ref_fn fn, void *arg)
{
	return scan_refs(m, 0, fn, arg);
}

int meta_scan_refs_lists(struct meta *m, meta_ref_fn fn, void *arg)
{
	return scan_refs(m, 1, fn, arg);
}

int meta_scan_chunks(struct meta *m, const struct meta_chunk_at *v, size_t n,
		     meta_ref_fn fn, void *arg)
{
	size_t nreq = 0;
	struct req *reqs = calloc(2 * n + 1, sizeof *reqs);
	const char **argv = calloc(6 * n + 1, sizeof *argv);
	size_t *lens = calloc(6 * n + 1, sizeof *lens);
	char(*keys)[32] = calloc(2 * n + 1, sizeof *keys);
	char(*flds)[8] = calloc(n + 1, sizeof *flds);
	redisReply **out = calloc(2 * n + 1, sizeof *out);
	int err = reqs && argv && lens && keys && flds && out ? 0 : ENOMEM;

	/* chunk 0: HGET of the tail field, then GET c<ino>_0; others GET */
	for (size_t i = 0; !err && i < n; i++) {
		const char **a = argv + 3 * nreq;
		size_t *l = lens + 3 * nreq;
		if (!v[i].idx) {
			a[0] = "HGET";
			a[1] = keys[nreq];
			a[2] = flds[i];
			snprintf(keys[nreq], sizeof keys[0], "n%" PRIu64,
				 v[i].ino / INO_PER_HASH);
			snprintf(
			    flds[i], sizeof flds[0], "%u",
			    (unsigned)(v[i].ino % INO_PER_HASH + INO_PER_HASH));
			for (int j = 0; j < 3; j++)
				l[j] = strlen(a[j]);
			reqs[nreq++] = (struct req){3, a, l, -1};
			a += 3;
			l += 3;
		}
		a[0] = "GET";
		a[1] = keys[nreq];
		snprintf(keys[nreq], sizeof keys[0], "c%" PRIu64 "_%" PRIu32,
			 v[i].ino, v[i].idx);
		l[0] = 3;
		l[1] = strlen(a[1]);
		reqs[nreq++] = (struct req){2, a, l, -1};
	}
	if (!err && nreq)
		err = redis_run_reqs(m, RUN_RETRY, reqs, (int)nreq, out);
	for (size_t i = 0, q = 0; !err && i < n; i++) {
		for (int tail = !v[i].idx; !err && tail >= 0; tail--, q++) {
			struct meta_ref ref = {.from = META_REF_CHUNK,
					       .ino = v[i].ino,
					       .idx = v[i].idx,
					       .tail = tail};
			const redisReply *r = out[q];
			if (r->type != REDIS_REPLY_STRING)
				continue;
			err = list_of(&ref, 1, fn, arg);
			if (!err)
				err = refs_of(m, keys[q], r->str,
					      (size_t)r->len, &ref, fn, arg);
		}
	}
	for (size_t q = 0; out && q < nreq; q++)
		freeReplyObject(out[q]);
	free(out);
	free(flds);
	free(keys);
	free(lens);
	free(argv);
	free(reqs);
	return err;
}

/* ---- packs ----------------------------------------------------------- */

/* The dead bytes of the packs of one page of `packs`: one HMGET
 * packdead of them all. */
static int packs_page(struct meta *m, const redisReply *page, meta_pack_fn fn,
		      void *arg)
{
	size_t n = page->elements / 2;
	const char **argv = calloc(n + 2, sizeof *argv);
	size_t *lens = calloc(n + 2, sizeof *lens);
	redisReply *r = NULL;
	int err = 0;

	if (!argv || !lens) {
		err = ENOMEM;
		goto out;
	}
	if (!n)
		goto out;
	argv[0] = "HMGET";
	argv[1] = "packdead";
	lens[0] = 5;
	lens[1] = 8;
	for (size_t i = 0; i < n; i++) {
		const redisReply *f = page->element[2 * i];
		if (f->type != REDIS_REPLY_STRING) {
			err = META_EPROTO;
			goto out;
		}
		argv[i + 2] = f->str;
		lens[i + 2] = (size_t)f->len;
	}
	struct req req = {(int)n + 2, argv, lens, -1};
	err = redis_run_reqs(m, RUN_RETRY, &req, 1, &r);
	if (err)
		goto out;
	if (r->type != REDIS_REPLY_ARRAY || r->elements != n) {
		err = META_EPROTO;
		goto out;
	}
	for (size_t i = 0; i < n && !err; i++) {
		const redisReply *f = page->element[2 * i];
		const redisReply *v = page->element[2 * i + 1];
		uint64_t pack, total, dead = 0;
		if (v->type != REDIS_REPLY_STRING ||
		    !parse_u64(f->str, (size_t)f->len, &pack) ||
		    !parse_u64(v->str, (size_t)v->len, &total))
			continue;
		if (r->element[i]->type == REDIS_REPLY_STRING)
			dead = redis_field_u64(r->element[i]);
		err = fn(arg, pack, total, dead);
	}
out:
	freeReplyObject(r);
	free(lens);
	free(argv);
	return err;
}

int meta_scan_packs(struct meta *m, meta_pack_fn fn, void *arg)
{
	char cursor[32] = "0";
	int err;

	do {
		const redisReply *page;
		redisReply *r;
		err = scan_page(m, "packs", NULL, cursor, sizeof cursor, &r,
				&page);
		if (err)
			return err;
		err = packs_page(m, page, fn, arg);
		freeReplyObject(r);
	} while (!err && strcmp(cursor, "0") != 0);
	return err;
}

int meta_pack_forget(struct meta *m, uint64_t pack)
{
	static const char *const what[3][2] = {
	    {"HDEL", "packs"}, {"HDEL", "packdead"}, {"ZREM", "packretired"}};
	struct req reqs[3];
	const char *argv[3][3];
	size_t lens[3][3];
	char id[24];
	redisReply *out[3];
	int err;

	if (m->opts.read_only)
		return EROFS;
	snprintf(id, sizeof id, "%" PRIu64, pack);
	for (int i = 0; i < 3; i++) {
		argv[i][0] = what[i][0];
		argv[i][1] = what[i][1];
		argv[i][2] = id;
		for (int j = 0; j < 3; j++)
			lens[i][j] = strlen(argv[i][j]);
		reqs[i] = (struct req){3, argv[i], lens[i], -1};
	}
	err = redis_run_reqs(m, RUN_RETRY, reqs, 3, out);
	for (int i = 0; i < 3 && !err; i++)
		freeReplyObject(out[i]);
	return err;
}

int meta_pack_retire(struct meta *m, uint64_t pack)
{
	struct cmd c;

	if (m->opts.read_only)
		return EROFS;
	redis_cmd_script(m, &c, SC_PACK_RETIRE);
	redis_cmd_u64(&c, pack);
	return redis_run_script_void(m, &c);
}

int meta_scan_retired(struct meta *m, meta_retired_fn fn, void *arg)
{
	char cursor[32] = "0";
	int err;

	do {
		const redisReply *page;
		redisReply *r;
		err = scan_page_of(m, "packretired", 1, NULL, cursor,
				   sizeof cursor, &r, &page);
		if (err)
			return err;
		for (size_t i = 0; i + 1 < page->elements && !err; i += 2) {
			const redisReply *f = page->element[i];
			const redisReply *v = page->element[i + 1];
			uint64_t pack;
			char *end;
			double t;
			if (f->type != REDIS_REPLY_STRING ||
			    v->type != REDIS_REPLY_STRING ||
			    !parse_u64(f->str, (size_t)f->len, &pack))
				continue;
			t = strtod(v->str, &end);
			if (end != v->str)
				err = fn(arg, pack, (int64_t)t);
		}
		freeReplyObject(r);
	} while (!err && strcmp(cursor, "0") != 0);
	return err;
}

/* ---- pages of keys --------------------------------------------------- */

/* What keys_page hands each reply to: the key's number (n<h>: h, d<ino>:
 * ino, so<sid>: sid), the key and the reply to `cmd key extra...`. */
typedef int (*key_reply_fn)(struct meta *m, uint64_t num, const char *key,
			    const redisReply *v, void *ctx);

/* The keys of one SCAN page of "<kind>[0-9]*" not met before: one
 * command each, in one pipeline, then fn per reply. */
static int keys_page(struct meta *m, struct seen *sn, const redisReply *keys,
		     const char *cmd, const char *const *extra, int nextra,
		     key_reply_fn fn, void *ctx)
{
	size_t n = keys->elements, w = 2 + (size_t)nextra, nreq = 0;
	struct req *reqs = calloc(n ? n : 1, sizeof *reqs);
	const char **argv = calloc(n ? w * n : 1, sizeof *argv);
	size_t *lens = calloc(n ? w * n : 1, sizeof *lens);
	redisReply **out = calloc(n ? n : 1, sizeof *out);
	uint64_t *nums = calloc(n ? n : 1, sizeof *nums);
	const redisReply **ks = calloc(n ? n : 1, sizeof *ks);
	int err = 0;

	if (!reqs || !argv || !lens || !out || !nums || !ks) {
		err = ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		const redisReply *k = keys->element[i];
		uint64_t num;
		if (k->type != REDIS_REPLY_STRING) {
			err = META_EPROTO;
			goto out;
		}
		size_t skip = strcspn(k->str, "0123456789");
		if (skip >= (size_t)k->len ||
		    !parse_u64(k->str + skip, (size_t)k->len - skip, &num))
			continue;
		int dup = seen_add(sn, k->str[0], num, 0);
		if (dup < 0) {
			err = -dup;
			goto out;
		}
		if (dup)
			continue;
		size_t j = nreq++;
		const char **a = argv + w * j;
		size_t *l = lens + w * j;
		a[0] = cmd;
		a[1] = k->str;
		l[0] = strlen(cmd);
		l[1] = (size_t)k->len;
		for (int x = 0; x < nextra; x++) {
			a[2 + x] = extra[x];
			l[2 + x] = strlen(extra[x]);
		}
		reqs[j] = (struct req){(int)w, a, l, -1};
		nums[j] = num;
		ks[j] = k;
	}
	if (nreq)
		err = redis_run_reqs(m, RUN_RETRY, reqs, (int)nreq, out);
	for (size_t j = 0; j < nreq && !err; j++)
		err = fn(m, nums[j], ks[j]->str, out[j], ctx);
	for (size_t j = 0; j < nreq; j++)
		freeReplyObject(out[j]);
out:
	free(ks);
	free(nums);
	free(out);
	free(lens);
	free(argv);
	free(reqs);
	return err;
}

/* SCAN for match, keys_page of each page. */
static int keys_walk(struct meta *m, const char *match, const char *cmd,
		     const char *const *extra, int nextra, key_reply_fn fn,
		     void *ctx)
{
	char cursor[32] = "0";
	struct seen sn;
	int err = seen_init(&sn);

	if (err)
		return err;
	do {
		const redisReply *keys;
		redisReply *r;
		err =
		    scan_page(m, NULL, match, cursor, sizeof cursor, &r, &keys);
		if (err)
			break;
		err = keys_page(m, &sn, keys, cmd, extra, nextra, fn, ctx);
		freeReplyObject(r);
	} while (!err && strcmp(cursor, "0") != 0);
	seen_release(&sn);
	return err;
}

/* ---- inodes ---------------------------------------------------------- */

struct inode_walk {
	meta_inode_fn fn;
	void *arg;
};

/* The inodes of inode hash n<h> (its HGETALL), in inode order. */
static int inodes_of(struct meta *m, uint64_t h, const char *key,
		     const redisReply *v, void *ctx)
{
	struct inode_walk *w = ctx;
	const redisReply *attr[INO_PER_HASH] = {0};
	uint64_t tails = 0;
	int err = 0;

	if (v->type != REDIS_REPLY_ARRAY || v->elements % 2)
		return 0; /* gone meanwhile */
	for (size_t j = 0; j + 1 < v->elements; j += 2) {
		const redisReply *f = v->element[j];
		uint64_t fi;
		if (f->type != REDIS_REPLY_STRING ||
		    !parse_u64(f->str, (size_t)f->len, &fi) ||
		    fi >= 2 * INO_PER_HASH)
			continue;
		if (fi < INO_PER_HASH)
			attr[fi] = v->element[j + 1];
		else
			tails |= UINT64_C(1) << (fi - INO_PER_HASH);
	}
	for (unsigned i = 0; i < INO_PER_HASH && !err; i++) {
		struct meta_scan_inode in = {.ino = INO_PER_HASH * h + i};
		in.tail = (tails >> i) & 1;
		if (!attr[i] && !in.tail)
			continue;
		if (!attr[i]) {
			in.state = META_INODE_TAIL;
		} else if (redis_reply_attr(attr[i], &in.a)) {
			log_err("redis at '%s': %s field %u holds no inode "
				"record",
				m->where, key, i);
			memset(&in.a, 0, sizeof in.a);
			in.state = META_INODE_CORRUPT;
		}
		err = w->fn(w->arg, &in);
	}
	return err;
}

int meta_scan_inodes(struct meta *m, meta_inode_fn fn, void *arg)
{
	struct inode_walk w = {fn, arg};
	return keys_walk(m, "n[0-9]*", "HGETALL", NULL, 0, inodes_of, &w);
}

/* ---- directory entries ----------------------------------------------- */

struct dirent_walk {
	meta_dirent_fn fn;
	void *arg;
	struct seen names; /* of the directory being walked, if big */
};

/* The entries of one HSCAN page of d<dir>; with names, those not handed
 * out before. */
static int dirents_of(struct meta *m, uint64_t dir, const redisReply *page,
		      struct seen *names, struct dirent_walk *w)
{
	int err = 0;

	for (size_t j = 0; j + 1 < page->elements && !err; j += 2) {
		const redisReply *k = page->element[j];
		const redisReply *v = page->element[j + 1];
		struct meta_scan_dirent e = {.dir = dir};
		if (k->type != REDIS_REPLY_STRING)
			return META_EPROTO;
		if (names) {
			int dup = seen_add(
			    names, 'e', name_hash(k->str, (size_t)k->len), 0);
			if (dup < 0)
				return -dup;
			if (dup)
				continue;
		}
		e.name = k->str;
		if (v->type != REDIS_REPLY_STRING || v->len < 2 || v->len > 9) {
			log_err("redis at '%s': entry '%s' of d%" PRIu64
				" is no directory entry",
				m->where, k->str, dir);
			e.corrupt = 1;
		} else {
			const uint8_t *p = (const uint8_t *)v->str;
			e.type = p[0];
			for (size_t b = (size_t)v->len - 1; b >= 1; b--)
				e.ino = e.ino << 8 | p[b];
		}
		err = w->fn(w->arg, &e);
	}
	(void)m;
	return err;
}

/* Directory d<dir>: the first page came with the SCAN page's pipeline;
 * the others are asked for one by one. */
static int dir_of(struct meta *m, uint64_t dir, const char *key,
		  const redisReply *v, void *ctx)
{
	struct dirent_walk *w = ctx;
	char cursor[32];
	int err;

	if (v->type != REDIS_REPLY_ARRAY || v->elements != 2 ||
	    v->element[0]->type != REDIS_REPLY_STRING ||
	    v->element[1]->type != REDIS_REPLY_ARRAY ||
	    v->element[1]->elements % 2)
		return META_EPROTO;
	snprintf(cursor, sizeof cursor, "%s", v->element[0]->str);
	if (!strcmp(cursor, "0"))
		return dirents_of(m, dir, v->element[1], NULL, w);
	/* a big directory: HSCAN may repeat entries from here on */
	seen_clear(&w->names);
	err = dirents_of(m, dir, v->element[1], &w->names, w);
	while (!err && strcmp(cursor, "0") != 0) {
		const redisReply *page;
		redisReply *r;
		err = scan_page(m, key, NULL, cursor, sizeof cursor, &r, &page);
		if (err)
			break;
		err = dirents_of(m, dir, page, &w->names, w);
		freeReplyObject(r);
	}
	seen_clear(&w->names);
	return err;
}

int meta_scan_dirents(struct meta *m, meta_dirent_fn fn, void *arg)
{
	static const char *const first[] = {"0", "COUNT", "1000"};
	struct dirent_walk w = {fn, arg, {{0}, NULL}};
	int err = seen_init(&w.names);

	if (err)
		return err;
	err = keys_walk(m, "d[0-9]*", "HSCAN", first, 3, dir_of, &w);
	seen_release(&w.names);
	return err;
}

int meta_scan_dir(struct meta *m, uint64_t dir, meta_dirent_fn fn, void *arg)
{
	struct dirent_walk w = {fn, arg, {{0}, NULL}};
	char key[32];
	struct cmd c;
	redisReply *r;
	int err = seen_init(&w.names);

	if (err)
		return err;
	snprintf(key, sizeof key, "d%" PRIu64, dir);
	redis_cmd_init(&c, "HSCAN");
	redis_cmd_str(&c, key);
	redis_cmd_str(&c, "0");
	redis_cmd_str(&c, "COUNT");
	redis_cmd_u64(&c, PAGE);
	err = redis_run(m, RUN_RETRY, &c, &r);
	if (!err) {
		err = dir_of(m, dir, key, r, &w);
		freeReplyObject(r);
	}
	seen_release(&w.names);
	return err;
}

/* ---- the volume's hashes and sorted sets ----------------------------- */

typedef int (*field_fn)(struct meta *m, const redisReply *f,
			const redisReply *v, void *ctx);

/* Every field (member) of hash (zset) key with its value (score), page by
 * page; fields that are not strings are skipped. A field may come twice. */
static int fields_walk(struct meta *m, const char *key, int zset, field_fn fn,
		       void *ctx)
{
	char cursor[32] = "0";
	int err = 0;

	do {
		const redisReply *page;
		redisReply *r;
		err = scan_page_of(m, key, zset, NULL, cursor, sizeof cursor,
				   &r, &page);
		if (err)
			return err;
		for (size_t j = 0; j + 1 < page->elements && !err; j += 2) {
			const redisReply *f = page->element[j];
			const redisReply *v = page->element[j + 1];
			if (f->type == REDIS_REPLY_STRING &&
			    v->type == REDIS_REPLY_STRING)
				err = fn(m, f, v, ctx);
		}
		freeReplyObject(r);
	} while (!err && strcmp(cursor, "0") != 0);
	return err;
}

struct cb {
	void *fn;
	void *arg;
	int kind;
};

static int vdir_field(struct meta *m, const redisReply *f, const redisReply *v,
		      void *ctx)
{
	struct cb *c = ctx;
	uint64_t dir, ino;
	(void)m;
	if (!parse_u64(f->str, (size_t)f->len, &dir) ||
	    !parse_u64(v->str, (size_t)v->len, &ino))
		return 0;
	return ((meta_tree_fn)c->fn)(c->arg, META_TREE_VERSIONS, ino, dir);
}

static int snapshot_field(struct meta *m, const redisReply *f,
			  const redisReply *v, void *ctx)
{
	struct cb *c = ctx;
	uint64_t top;
	(void)m;
	(void)v;
	if (!parse_u64(f->str, (size_t)f->len, &top))
		return 0;
	return ((meta_tree_fn)c->fn)(c->arg, META_TREE_DETACHED, top, 0);
}

int meta_scan_trees(struct meta *m, meta_tree_fn fn, void *arg)
{
	struct cb c = {(void *)fn, arg, 0};
	int err = fields_walk(m, "vdirs", 0, vdir_field, &c);
	if (!err)
		err = fields_walk(m, "snapshots", 0, snapshot_field, &c);
	return err;
}

static int delfile_member(struct meta *m, const redisReply *f,
			  const redisReply *v, void *ctx)
{
	struct cb *c = ctx;
	const char *colon = memchr(f->str, ':', (size_t)f->len);
	uint64_t ino, len;
	(void)v;
	if (!colon || !parse_u64(f->str, (size_t)(colon - f->str), &ino) ||
	    !parse_u64(colon + 1, (size_t)(f->str + f->len - colon - 1),
		       &len)) {
		log_err("redis at '%s': delfiles holds a corrupt member '%s'",
			m->where, f->str);
		return 0;
	}
	return ((meta_delfile_fn)c->fn)(c->arg, ino, len);
}

int meta_scan_delfiles(struct meta *m, meta_delfile_fn fn, void *arg)
{
	struct cb c = {(void *)fn, arg, 0};
	return fields_walk(m, "delfiles", 1, delfile_member, &c);
}

static int sliceref_field(struct meta *m, const redisReply *f,
			  const redisReply *v, void *ctx)
{
	struct cb *c = ctx;
	uint64_t id;
	char buf[32], *end;
	(void)m;
	if (!parse_u64(f->str, (size_t)f->len, &id) ||
	    (size_t)v->len >= sizeof buf)
		return 0;
	memcpy(buf, v->str, (size_t)v->len);
	buf[v->len] = 0;
	errno = 0;
	long long n = strtoll(buf, &end, 10);
	if (errno || *end || end == buf)
		return 0;
	return ((meta_sliceref_fn)c->fn)(c->arg, id, (int64_t)n);
}

int meta_scan_slicerefs(struct meta *m, meta_sliceref_fn fn, void *arg)
{
	struct cb c = {(void *)fn, arg, 0};
	return fields_walk(m, "sliceref", 0, sliceref_field, &c);
}

static int sid_field(struct meta *m, const redisReply *f, const redisReply *v,
		     void *ctx)
{
	struct cb *c = ctx;
	uint64_t sid;
	(void)m;
	(void)v;
	if (!parse_u64(f->str, (size_t)f->len, &sid))
		return 0;
	return ((meta_sid_fn)c->fn)(c->arg, sid, (enum meta_sid_from)c->kind);
}

static int group_sid(void *ctx, uint64_t sid)
{
	struct cb *c = ctx;
	return ((meta_sid_fn)c->fn)(c->arg, sid, META_SID_GROUP);
}

int meta_scan_sids(struct meta *m, meta_sid_fn fn, void *arg)
{
	struct cb c = {(void *)fn, arg, META_SID_SESSION};
	int err = fields_walk(m, "sessions", 1, sid_field, &c);
	c.kind = META_SID_STAGED;
	if (!err)
		err = fields_walk(m, "sessionstaged", 0, sid_field, &c);
	c.kind = META_SID_PENDING;
	if (!err)
		err = fields_walk(m, "sessionpending", 0, sid_field, &c);
	if (!err)
		err = redis_group_sids(m, group_sid, &c);
	return err;
}

/* ---- opens ----------------------------------------------------------- */

/* o<ino> (HGETALL: sid -> count) or so<sid> (SMEMBERS: inodes). */
static int opens_of(struct meta *m, uint64_t num, const char *key,
		    const redisReply *v, void *ctx)
{
	struct cb *c = ctx;
	int in_so = key[0] == 's', err = 0;
	size_t step = in_so ? 1 : 2;
	(void)m;
	if (v->type != REDIS_REPLY_ARRAY)
		return 0; /* gone meanwhile */
	for (size_t j = 0; j < v->elements && !err; j += step) {
		const redisReply *e = v->element[j];
		uint64_t x;
		if (e->type != REDIS_REPLY_STRING ||
		    !parse_u64(e->str, (size_t)e->len, &x))
			continue;
		err = ((meta_open_fn)c->fn)(c->arg, in_so ? num : x,
					    in_so ? x : num, in_so);
	}
	return err;
}

int meta_scan_opens(struct meta *m, meta_open_fn fn, void *arg)
{
	struct cb c = {(void *)fn, arg, 0};
	int err = keys_walk(m, "o[0-9]*", "HGETALL", NULL, 0, opens_of, &c);
	if (!err)
		err =
		    keys_walk(m, "so[0-9]*", "SMEMBERS", NULL, 0, opens_of, &c);
	return err;
}

/* ---- for the dump (redis_dump.c) ------------------------------------- */

int redis_scan_page(struct meta *m, const char *key, int zset, char *cursor,
		    size_t cap, redisReply **r, const redisReply **out)
{
	return scan_page_of(m, key, zset, NULL, cursor, cap, r, out);
}

int redis_fields_walk(struct meta *m, const char *key, int zset,
		      redis_field_fn fn, void *ctx)
{
	return fields_walk(m, key, zset, fn, ctx);
}

int redis_parse_u64(const char *p, size_t n, uint64_t *v)
{
	return parse_u64(p, n, v);
}

struct redis_seen {
	struct seen s;
};

struct redis_seen *redis_seen_new(void)
{
	struct redis_seen *s = malloc(sizeof *s);
	if (s && seen_init(&s->s)) {
		free(s);
		s = NULL;
	}
	return s;
}

int redis_seen_add(struct redis_seen *s, char kind, uint64_t a, uint32_t b)
{
	return seen_add(&s->s, kind, a, b);
}

int redis_seen_name(struct redis_seen *s, const char *p, size_t n)
{
	return seen_add(&s->s, 'e', name_hash(p, n), 0);
}

void redis_seen_clear(struct redis_seen *s)
{
	seen_clear(&s->s);
}

void redis_seen_free(struct redis_seen *s)
{
	if (s) {
		seen_release(&s->s);
		free(s);
	}
}
