/*
 * redis_fsck.c - fsck's reads again and repairs in the Redis engine
 * (meta_fsck.h): pipelines of HGET and EXISTS, and the fsck_* scripts of
 * meta/lua/, each checking that what it changes is as fsck saw it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "meta/meta_fsck.h"
#include "meta/redis_int.h"

#define BATCH 64 /* things read again in one pipeline */

/* A decimal number, signed, from a string reply; 0 for nil. */
static int reply_i64(const redisReply *r, int64_t *v)
{
	char buf[32], *end;

	*v = 0;
	if (r->type == REDIS_REPLY_NIL)
		return 0;
	if (r->type == REDIS_REPLY_INTEGER) {
		*v = r->integer;
		return 0;
	}
	if (r->type != REDIS_REPLY_STRING || !r->len ||
	    (size_t)r->len >= sizeof buf)
		return META_EPROTO;
	memcpy(buf, r->str, (size_t)r->len);
	buf[r->len] = 0;
	errno = 0;
	long long n = strtoll(buf, &end, 10);
	if (errno || *end)
		return META_EPROTO;
	*v = n;
	return 0;
}

/* Run c, whose reply is two numbers: *a and *b. */
static int run_pair(struct meta *m, const struct cmd *c, int64_t *a, int64_t *b)
{
	redisReply *r;
	int err = redis_run(m, RUN_RETRY, c, &r);

	if (err)
		return err;
	if (r->type != REDIS_REPLY_ARRAY || r->elements != 2)
		err = META_EPROTO;
	if (!err)
		err = reply_i64(r->element[0], a);
	if (!err)
		err = reply_i64(r->element[1], b);
	freeReplyObject(r);
	return err;
}

int meta_server_time(struct meta *m, int64_t *sec, uint32_t *nsec)
{
	struct cmd c;
	int64_t us = 0;

	redis_cmd_init(&c, "TIME");
	int err = run_pair(m, &c, sec, &us);
	*nsec = (uint32_t)(us * 1000);
	return err;
}

int meta_fsck_counters(struct meta *m, int64_t *inodes, int64_t *used)
{
	struct cmd c;

	redis_cmd_init(&c, "MGET");
	redis_cmd_str(&c, "totalinodes");
	redis_cmd_str(&c, "usedspace");
	return run_pair(m, &c, inodes, used);
}

/* ---- reading again ----------------------------------------------------- */

/* Run the cmds[0..n) in one pipeline; out[] as redis_run_reqs. */
static int run_cmds(struct meta *m, const struct cmd *cmds, size_t n,
		    redisReply **out)
{
	struct req reqs[2 * BATCH];

	for (size_t i = 0; i < n; i++)
		reqs[i] = (struct req){
		    cmds[i].argc, (const char **)cmds[i].argv, cmds[i].len, -1};
	return redis_run_reqs(m, RUN_RETRY, reqs, (int)n, out);
}

int meta_fsck_inodes(struct meta *m, struct meta_fsck_inode *v, size_t n)
{
	struct cmd *cmds = malloc(2 * BATCH * sizeof *cmds);
	redisReply *out[2 * BATCH];
	int err = cmds ? 0 : ENOMEM;

	for (size_t base = 0; !err && base < n; base += BATCH) {
		size_t k = n - base < BATCH ? n - base : BATCH;
		for (size_t i = 0; i < k; i++) {
			redis_cmd_init(&cmds[2 * i], "HGET");
			redis_cmd_inode(&cmds[2 * i], v[base + i].ino, 0);
			redis_cmd_init(&cmds[2 * i + 1], "EXISTS");
			redis_cmd_key(&cmds[2 * i + 1], "o", v[base + i].ino);
		}
		err = run_cmds(m, cmds, 2 * k, out);
		for (size_t i = 0; !err && i < k; i++) {
			struct meta_fsck_inode *x = &v[base + i];
			const redisReply *a = out[2 * i], *o = out[2 * i + 1];
			x->exists = a->type == REDIS_REPLY_STRING;
			x->corrupt = 0;
			x->open = o->type == REDIS_REPLY_INTEGER && o->integer;
			x->rec_len = 0;
			memset(&x->a, 0, sizeof x->a);
			if (!x->exists)
				continue;
			if (redis_reply_attr(a, &x->a) ||
			    (size_t)a->len > sizeof x->rec) {
				memset(&x->a, 0, sizeof x->a);
				x->corrupt = 1;
				continue;
			}
			memcpy(x->rec, a->str, (size_t)a->len);
			x->rec_len = (size_t)a->len;
		}
		for (size_t i = 0; !err && i < 2 * k; i++)
			freeReplyObject(out[i]);
	}
	free(cmds);
	return err;
}

int meta_fsck_entries(struct meta *m, struct meta_fsck_entry *v, size_t n)
{
	struct cmd *cmds = malloc(BATCH * sizeof *cmds);
	redisReply *out[BATCH];
	int err = cmds ? 0 : ENOMEM;

	for (size_t base = 0; !err && base < n; base += BATCH) {
		size_t k = n - base < BATCH ? n - base : BATCH;
		for (size_t i = 0; i < k; i++) {
			redis_cmd_init(&cmds[i], "HGET");
			redis_cmd_key(&cmds[i], "d", v[base + i].dir);
			redis_cmd_str(&cmds[i], v[base + i].name);
		}
		err = run_cmds(m, cmds, k, out);
		for (size_t i = 0; !err && i < k; i++) {
			struct meta_fsck_entry *e = &v[base + i];
			const redisReply *r = out[i];
			e->exists = r->type == REDIS_REPLY_STRING;
			e->ino = 0;
			e->type = 0;
			e->val_len = 0;
			if (!e->exists || (size_t)r->len > sizeof e->val)
				continue;
			memcpy(e->val, r->str, (size_t)r->len);
			e->val_len = (size_t)r->len;
			if (r->len < 2 || r->len > 9)
				continue;
			const uint8_t *p = (const uint8_t *)r->str;
			e->type = p[0];
			for (size_t b = (size_t)r->len - 1; b >= 1; b--)
				e->ino = e->ino << 8 | p[b];
		}
		for (size_t i = 0; !err && i < k; i++)
			freeReplyObject(out[i]);
	}
	free(cmds);
	return err;
}

int meta_fsck_slicerefs(struct meta *m, const uint64_t *ids, size_t n,
			int64_t *extra)
{
	const char **argv = malloc((BATCH + 2) * sizeof *argv);
	size_t *lens = malloc((BATCH + 2) * sizeof *lens);
	char(*num)[24] = malloc(BATCH * sizeof *num);
	int err = argv && lens && num ? 0 : ENOMEM;

	for (size_t base = 0; !err && base < n; base += BATCH) {
		size_t k = n - base < BATCH ? n - base : BATCH;
		redisReply *r;
		argv[0] = "HMGET";
		argv[1] = "sliceref";
		lens[0] = 5;
		lens[1] = 8;
		for (size_t i = 0; i < k; i++) {
			snprintf(num[i], sizeof num[i], "%" PRIu64,
				 ids[base + i]);
			argv[i + 2] = num[i];
			lens[i + 2] = strlen(num[i]);
		}
		struct req req = {(int)k + 2, argv, lens, -1};
		err = redis_run_reqs(m, RUN_RETRY, &req, 1, &r);
		if (err)
			break;
		if (r->type != REDIS_REPLY_ARRAY || r->elements != k)
			err = META_EPROTO;
		for (size_t i = 0; !err && i < k; i++)
			err = reply_i64(r->element[i], &extra[base + i]);
		freeReplyObject(r);
	}
	free(num);
	free(lens);
	free(argv);
	return err;
}

int meta_fsck_stray_chunks(struct meta *m, uint64_t ino, uint32_t idx, int tail,
			   int *stray)
{
	char cursor[32] = "0", match[32];
	struct cmd c;
	redisReply *r;
	int err, in_delfiles = 0;

	*stray = 0;
	/* the inode first: once it is gone, it never comes back */
	redis_cmd_init(&c, "HEXISTS");
	redis_cmd_inode(&c, ino, 0);
	err = redis_run(m, RUN_RETRY, &c, &r);
	if (err)
		return err;
	int exists = r->type == REDIS_REPLY_INTEGER && r->integer;
	freeReplyObject(r);
	if (exists)
		return 0;
	/* then delfiles, which only an inode's deletion adds it to */
	snprintf(match, sizeof match, "%" PRIu64 ":*", ino);
	do {
		redis_cmd_init(&c, "ZSCAN");
		redis_cmd_str(&c, "delfiles");
		redis_cmd_str(&c, cursor);
		redis_cmd_str(&c, "MATCH");
		redis_cmd_str(&c, match);
		redis_cmd_str(&c, "COUNT");
		redis_cmd_u64(&c, 1000);
		err = redis_run(m, RUN_RETRY, &c, &r);
		if (err)
			return err;
		if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
		    r->element[0]->type != REDIS_REPLY_STRING ||
		    r->element[1]->type != REDIS_REPLY_ARRAY) {
			freeReplyObject(r);
			return META_EPROTO;
		}
		snprintf(cursor, sizeof cursor, "%s", r->element[0]->str);
		in_delfiles = r->element[1]->elements > 0;
		freeReplyObject(r);
	} while (!in_delfiles && strcmp(cursor, "0") != 0);
	if (in_delfiles)
		return 0;
	/* and last the chunk list: only reclamation (of delfiles) drops it */
	if (tail) {
		redis_cmd_init(&c, "HEXISTS");
		redis_cmd_inode(&c, ino, 1);
	} else {
		redis_cmd_init(&c, "EXISTS");
		redis_cmd_fmt(&c, "c%" PRIu64 "_%" PRIu32, ino, idx);
	}
	err = redis_run(m, RUN_RETRY, &c, &r);
	if (err)
		return err;
	*stray = r->type == REDIS_REPLY_INTEGER && r->integer;
	freeReplyObject(r);
	return 0;
}

int meta_fsck_pending(struct meta *m, int64_t *pending, int64_t *sum)
{
	struct cmd c;

	redis_cmd_init(&c, "EVAL");
	redis_cmd_str(&c,
		      "local s = 0 "
		      "for _, v in ipairs(redis.call('HVALS', "
		      "'sessionpending')) do s = s + (tonumber(v) or 0) end "
		      "return {redis.call('GET', 'pendingspace') or '0', "
		      "string.format('%d', s)}");
	redis_cmd_str(&c, "0");
	return run_pair(m, &c, pending, sum);
}

/* A command answering an integer: *v its value. */
static int run_int(struct meta *m, const struct cmd *c, int64_t *v)
{
	redisReply *r;
	int err = redis_run(m, RUN_RETRY, c, &r);

	if (err)
		return err;
	if (r->type == REDIS_REPLY_INTEGER)
		*v = r->integer;
	else if (r->type == REDIS_REPLY_NIL)
		*v = 0;
	else if (r->type == REDIS_REPLY_STRING)
		*v = 1;
	else
		err = META_EPROTO;
	freeReplyObject(r);
	return err;
}

int meta_fsck_delfile(struct meta *m, uint64_t ino, uint64_t length,
		      int *member)
{
	struct cmd c;
	int64_t v = 0;

	redis_cmd_init(&c, "ZSCORE");
	redis_cmd_str(&c, "delfiles");
	redis_cmd_fmt(&c, "%" PRIu64 ":%" PRIu64, ino, length);
	int err = run_int(m, &c, &v);
	*member = !err && v;
	return err;
}

int meta_fsck_open(struct meta *m, uint64_t sid, uint64_t ino, int *exists)
{
	struct cmd c;
	int64_t v = 0;

	if (ino) {
		redis_cmd_init(&c, "HEXISTS");
		redis_cmd_key(&c, "o", ino);
		redis_cmd_u64(&c, sid);
	} else {
		redis_cmd_init(&c, "EXISTS");
		redis_cmd_key(&c, "so", sid);
	}
	int err = run_int(m, &c, &v);
	*exists = !err && v;
	return err;
}

/* ---- repairs ----------------------------------------------------------- */

/* Repair script s with the n (1 or 2) numbers a, b as its arguments. */
static int fix_nums(struct meta *m, enum script s, int n, uint64_t a,
		    uint64_t b)
{
	struct cmd c;

	if (m->opts.read_only)
		return EROFS;
	redis_cmd_script(m, &c, s);
	redis_cmd_u64(&c, a);
	if (n > 1)
		redis_cmd_u64(&c, b);
	return redis_run_script_void(m, &c);
}

int meta_fsck_fix_inode(struct meta *m, const struct meta_fsck_inode *was,
			uint32_t nlink, uint64_t parent, int lost_found)
{
	struct cmd c;

	if (m->opts.read_only)
		return EROFS;
	if (!was->exists || was->corrupt)
		return EINVAL;
	redis_cmd_script(m, &c, SC_FSCK_INODE);
	redis_cmd_u64(&c, was->ino);
	redis_cmd_bin(&c, was->rec, was->rec_len);
	if (nlink == UINT32_MAX)
		redis_cmd_str(&c, "");
	else
		redis_cmd_u64(&c, nlink);
	if (parent)
		redis_cmd_u64(&c, parent);
	else
		redis_cmd_str(&c, "");
	redis_cmd_str(&c, lost_found ? "1" : "");
	return redis_run_script_void(m, &c);
}

int meta_fsck_fix_entry(struct meta *m, const struct meta_fsck_entry *was,
			uint8_t new_type)
{
	struct cmd c;
	char val[16];

	if (m->opts.read_only)
		return EROFS;
	if (!was->exists || was->val_len < 2 || was->val_len > 9)
		return EINVAL;
	redis_cmd_script(m, &c, SC_FSCK_ENTRY);
	redis_cmd_u64(&c, was->dir);
	redis_cmd_str(&c, was->name);
	redis_cmd_bin(&c, was->val, was->val_len);
	if (new_type) {
		memcpy(val, was->val, was->val_len);
		val[0] = (char)new_type;
		redis_cmd_bin(&c, val, was->val_len);
	} else {
		redis_cmd_str(&c, "");
	}
	return redis_run_script_void(m, &c);
}

static int fix_set(struct meta *m, const char *what, uint64_t id, int64_t was,
		   int64_t now)
{
	struct cmd c;

	if (m->opts.read_only)
		return EROFS;
	redis_cmd_script(m, &c, SC_FSCK_SET);
	redis_cmd_str(&c, what);
	redis_cmd_u64(&c, id);
	redis_cmd_i64(&c, was);
	redis_cmd_i64(&c, now);
	return redis_run_script_void(m, &c);
}

int meta_fsck_fix_counter(struct meta *m, enum meta_counter c, int64_t was,
			  int64_t now)
{
	if (c != META_COUNTER_INODES && c != META_COUNTER_USED)
		return EINVAL;
	return fix_set(m,
		       c == META_COUNTER_INODES ? "totalinodes" : "usedspace",
		       0, was, now);
}

int meta_fsck_fix_sliceref(struct meta *m, uint64_t id, int64_t was,
			   int64_t extra)
{
	return fix_set(m, "sliceref", id, was, extra);
}

int meta_fsck_fix_stray_chunks(struct meta *m, uint64_t ino, uint64_t length)
{
	return fix_nums(m, SC_FSCK_CHUNKS, 2, ino, length);
}

int meta_fsck_fix_pack_total(struct meta *m, uint64_t pack, uint64_t total)
{
	struct cmd c;
	redisReply *r;
	int err;

	if (m->opts.read_only)
		return EROFS;
	redis_cmd_init(&c, "HSETNX");
	redis_cmd_str(&c, "packs");
	redis_cmd_u64(&c, pack);
	redis_cmd_u64(&c, total);
	err = redis_run(m, 0, &c, &r);
	if (err)
		return err;
	if (r->type != REDIS_REPLY_INTEGER)
		err = META_EPROTO;
	else if (!r->integer)
		err = EAGAIN;
	freeReplyObject(r);
	return err;
}

int meta_fsck_fix_session(struct meta *m, uint64_t sid)
{
	return fix_nums(m, SC_FSCK_SESSION, 1, sid, 0);
}

int meta_fsck_fix_trash(struct meta *m, uint64_t was)
{
	return fix_nums(m, SC_FSCK_TRASH, 1, was, 0);
}

int meta_fsck_fix_packdead(struct meta *m, uint64_t pack, int64_t was,
			   int64_t dead)
{
	return fix_set(m, "packdead", pack, was, dead);
}

int meta_fsck_fix_delfile(struct meta *m, uint64_t ino, uint64_t length)
{
	return fix_nums(m, SC_FSCK_DELFILE, 2, ino, length);
}

int meta_fsck_fix_chunk(struct meta *m, const struct meta_fsck_inode *was,
			uint32_t idx)
{
	struct cmd c;

	if (m->opts.read_only)
		return EROFS;
	if (!was->exists || was->corrupt)
		return EINVAL;
	redis_cmd_script(m, &c, SC_FSCK_CHUNK);
	redis_cmd_u64(&c, was->ino);
	redis_cmd_bin(&c, was->rec, was->rec_len);
	redis_cmd_u64(&c, idx);
	return redis_run_script_void(m, &c);
}

int meta_fsck_fix_pending(struct meta *m, int64_t was)
{
	struct cmd c;

	if (m->opts.read_only)
		return EROFS;
	redis_cmd_script(m, &c, SC_FSCK_PENDING);
	redis_cmd_i64(&c, was);
	return redis_run_script_void(m, &c);
}

int meta_fsck_fix_open(struct meta *m, uint64_t sid, uint64_t ino)
{
	struct cmd c;
	redisReply *r;
	int err, left;

	if (m->opts.read_only)
		return EROFS;
	do {
		redis_cmd_script(m, &c, SC_FSCK_OPEN);
		redis_cmd_u64(&c, sid);
		if (ino)
			redis_cmd_u64(&c, ino);
		else
			redis_cmd_str(&c, "");
		if ((err = redis_run_script(m, 0, &c, &r)))
			return err;
		left = r->elements > 1 &&
		       r->element[1]->type == REDIS_REPLY_INTEGER &&
		       r->element[1]->integer > 0;
		freeReplyObject(r);
	} while (!ino && left);
	return 0;
}

int meta_fsck_fix_staging(struct meta *m, uint64_t sid,
			  const char *const *names, size_t n)
{
	enum { PER = CMD_MAX - 4 }; /* names a call */
	struct cmd c;
	int err = 0;

	if (m->opts.read_only)
		return EROFS;
	for (size_t i = 0; !err && i < n; i += PER) {
		redis_cmd_script(m, &c, SC_FSCK_STAGING);
		redis_cmd_u64(&c, sid);
		for (size_t j = i; j < n && j < i + PER; j++)
			redis_cmd_str(&c, names[j]);
		err = redis_run_script_void(m, &c);
	}
	return err;
}

int meta_fsck_fix_dead(struct meta *m, uint64_t id, uint64_t pack)
{
	return fix_nums(m, SC_FSCK_DEAD, 2, id, pack);
}
