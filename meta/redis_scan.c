/*
 * redis_scan.c - walks over the whole volume in the Redis engine
 * (meta_scan.h): chunk lists and tails by SCAN, delslices by LRANGE pages,
 * stagedead, staging and packs by HSCAN.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "meta/meta_objects.h"
#include "meta/meta_scan.h"
#include "meta/redis_int.h"
#include "lib/log.h"

#define PAGE 1000 /* keys a SCAN page asks for, entries an LRANGE takes */

/* ---- pages ----------------------------------------------------------- */

/* One page of SCAN (key NULL), HSCAN key, or ZSCAN key (zset set) from
 * *cursor (a decimal string, "0" to start, "0" again when done). *out: the
 * page's array, {k, ...}, {field, value, ...} or {member, score, ...},
 * inside *r (the caller frees r). */
static int scan_page(struct meta *m, const char *key, int zset,
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

/* The chunk lists (c<ino>_<idx>) and inode hashes (n<h>, for their tail
 * fields) of one SCAN page, read in one pipeline. */
static int refs_page(struct meta *m, const redisReply *keys, meta_ref_fn fn,
		     void *arg)
{
	size_t n = keys->elements;
	struct req *reqs = calloc(n ? n : 1, sizeof *reqs);
	const char **argv = calloc(n ? 2 * n : 1, sizeof *argv);
	size_t *lens = calloc(n ? 2 * n : 1, sizeof *lens);
	redisReply **out = calloc(n ? n : 1, sizeof *out);
	int err = 0;

	if (!reqs || !argv || !lens || !out) {
		err = ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		const redisReply *k = keys->element[i];
		if (k->type != REDIS_REPLY_STRING) {
			err = META_EPROTO;
			goto out;
		}
		argv[2 * i] = k->str[0] == 'c' ? "GET" : "HGETALL";
		argv[2 * i + 1] = k->str;
		lens[2 * i] = strlen(argv[2 * i]);
		lens[2 * i + 1] = (size_t)k->len;
		reqs[i] = (struct req){2, argv + 2 * i, lens + 2 * i, -1};
	}
	if (n)
		err = redis_run_reqs(m, RUN_RETRY, reqs, (int)n, out);
	for (size_t i = 0; i < n && !err; i++) {
		const redisReply *k = keys->element[i], *v = out[i];
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
			err = refs_of(m, k->str, v->str, (size_t)v->len, &ref,
				      fn, arg);
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
			err = refs_of(m, where, t->str, (size_t)t->len, &ref,
				      fn, arg);
		}
	}
	for (size_t i = 0; i < n && out; i++)
		freeReplyObject(out[i]);
out:
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
		err = scan_page(m, key, 0, NULL, cursor, sizeof cursor, &r,
				&page);
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
		err = scan_page(m, "delayslices", 1, NULL, cursor,
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

int meta_scan_refs(struct meta *m, meta_ref_fn fn, void *arg)
{
	char cursor[32] = "0";
	int err;

	do {
		const redisReply *keys;
		redisReply *r;
		err = scan_page(m, NULL, 0, "[cn][0-9]*", cursor, sizeof cursor,
				&r, &keys);
		if (err)
			return err;
		err = refs_page(m, keys, fn, arg);
		freeReplyObject(r);
	} while (!err && strcmp(cursor, "0") != 0);
	if (!err)
		err = refs_delslices(m, fn, arg);
	if (!err)
		err = refs_delayed(m, fn, arg);
	if (!err)
		err = refs_hash(m, "stagedead", fn, arg);
	if (!err)
		err = refs_hash(m, "staging", fn, arg);
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
		err = scan_page(m, "packs", 0, NULL, cursor, sizeof cursor, &r,
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
	struct req reqs[2];
	const char *argv[2][3];
	size_t lens[2][3];
	char id[24];
	redisReply *out[2];
	int err;

	if (m->opts.read_only)
		return EROFS;
	snprintf(id, sizeof id, "%" PRIu64, pack);
	for (int i = 0; i < 2; i++) {
		argv[i][0] = "HDEL";
		argv[i][1] = i ? "packdead" : "packs";
		argv[i][2] = id;
		for (int j = 0; j < 3; j++)
			lens[i][j] = strlen(argv[i][j]);
		reqs[i] = (struct req){3, argv[i], lens[i], -1};
	}
	err = redis_run_reqs(m, RUN_RETRY, reqs, 2, out);
	for (int i = 0; i < 2 && !err; i++)
		freeReplyObject(out[i]);
	return err;
}
