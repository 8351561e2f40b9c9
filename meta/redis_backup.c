/*
 * redis_backup.c - the bookkeeping of the clients' metadata backups
 * (meta_dump.h): the hash backup and the claim (SCHEMA.md).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "meta/meta_dump.h"
#include "meta/redis_int.h"

int meta_backup_claim(struct meta *m, int64_t interval, int64_t ttl,
		      int64_t retry, int *claimed)
{
	struct cmd c;
	uint64_t sid = meta_session_id(m);

	*claimed = 0;
	if (!sid)
		return EINVAL; /* the claim is a session's */
	redis_cmd_script(m, &c, SC_BACKUP_CLAIM);
	redis_cmd_u64(&c, sid);
	redis_cmd_i64(&c, interval);
	redis_cmd_i64(&c, ttl);
	redis_cmd_i64(&c, retry);
	int err = redis_run_script_void(m, &c);
	if (err == 0)
		*claimed = 1;
	return err == EAGAIN || err == EBUSY ? 0 : err;
}

int meta_backup_done(struct meta *m, const struct meta_backup *b,
		     const char *error)
{
	struct cmd c;
	char num[7][32];

	redis_cmd_script(m, &c, SC_BACKUP_DONE);
	redis_cmd_u64(&c, meta_session_id(m));
	if (!b) {
		/* only the claim dropped */
	} else if (error) {
		snprintf(num[0], sizeof num[0], "%" PRId64, b->failed);
		redis_cmd_str(&c, "failed");
		redis_cmd_str(&c, num[0]);
		redis_cmd_str(&c, "error");
		redis_cmd_str(&c, error);
	} else {
		snprintf(num[0], sizeof num[0], "%" PRId64, b->time);
		snprintf(num[1], sizeof num[1], "%" PRIu64, b->sid);
		snprintf(num[2], sizeof num[2], "%" PRIu64, b->bytes);
		snprintf(num[3], sizeof num[3], "%" PRIu64, b->inodes);
		snprintf(num[4], sizeof num[4], "%.3f", b->seconds);
		const char *kv[] = {"name",    b->name, "time",	  num[0],
				    "sid",     num[1],	"host",	  b->host,
				    "bytes",   num[2],	"inodes", num[3],
				    "seconds", num[4]};
		for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
			redis_cmd_str(&c, kv[i]);
	}
	return redis_run_script_void(m, &c);
}

static void copy_str(char *dst, size_t cap, const redisReply *v)
{
	size_t n = v->len < cap - 1 ? v->len : cap - 1;
	memcpy(dst, v->str, n);
	dst[n] = 0;
}

int meta_backup_last(struct meta *m, struct meta_backup *b)
{
	struct cmd c;
	redisReply *r;

	memset(b, 0, sizeof *b);
	redis_cmd_init(&c, "HGETALL");
	redis_cmd_str(&c, "backup");
	int err = redis_run(m, RUN_RETRY, &c, &r);
	if (err)
		return err;
	if (r->type != REDIS_REPLY_ARRAY)
		err = META_EPROTO;
	else if (r->elements == 0)
		err = ENOENT;
	for (size_t i = 0; !err && i + 1 < r->elements; i += 2) {
		const redisReply *k = r->element[i], *v = r->element[i + 1];
		if (k->type != REDIS_REPLY_STRING ||
		    v->type != REDIS_REPLY_STRING) {
			err = META_EPROTO;
			break;
		}
		if (!strcmp(k->str, "name"))
			copy_str(b->name, sizeof b->name, v);
		else if (!strcmp(k->str, "host"))
			copy_str(b->host, sizeof b->host, v);
		else if (!strcmp(k->str, "error"))
			copy_str(b->error, sizeof b->error, v);
		else if (!strcmp(k->str, "time"))
			b->time = strtoll(v->str, NULL, 10);
		else if (!strcmp(k->str, "failed"))
			b->failed = strtoll(v->str, NULL, 10);
		else if (!strcmp(k->str, "sid"))
			b->sid = strtoull(v->str, NULL, 10);
		else if (!strcmp(k->str, "bytes"))
			b->bytes = strtoull(v->str, NULL, 10);
		else if (!strcmp(k->str, "inodes"))
			b->inodes = strtoull(v->str, NULL, 10);
		else if (!strcmp(k->str, "seconds"))
			b->seconds = strtod(v->str, NULL);
	}
	freeReplyObject(r);
	return err;
}
