/*
 * redis_quota.c - directory quotas of the Redis engine (meta_quota.h):
 * thin calls of the quota_* scripts. The namespace and data scripts keep
 * the usage themselves (the chain helpers of lib/prelude.lua); the data
 * scripts are also sent the client's chain (redis_cmd_qchain), used only
 * for a file without a parent field.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "meta/meta_quota.h"
#include "meta/redis_int.h"

void redis_cmd_qchain(struct cmd *c, const struct meta_qchain *q, char *buf)
{
	size_t len =
	    (size_t)snprintf(buf, QCHAIN_STR_MAX,
			     "%llu:%llu:", (unsigned long long)(q ? q->gen : 0),
			     (unsigned long long)(q ? q->dir : 0));

	for (size_t i = 0; q && i < q->n && i < META_QUOTA_NEST; i++)
		len +=
		    (size_t)snprintf(buf + len, QCHAIN_STR_MAX - len, "%s%llu",
				     i ? "," : "", (unsigned long long)q->q[i]);
	buf[len] = 0;
	redis_cmd_bin(c, buf, len);
}

int meta_quota_set(struct meta *m, uint64_t ino, uint64_t max_space,
		   uint64_t max_inodes, int *created)
{
	struct cmd c;
	redisReply *r;

	if (m->opts.read_only)
		return EROFS;
	/* the scripts' numbers are doubles */
	if (max_space >= (UINT64_C(1) << 53) ||
	    max_inodes >= (UINT64_C(1) << 53))
		return EINVAL;
	redis_cmd_script(m, &c, SC_QUOTA_SET);
	redis_cmd_u64(&c, ino);
	redis_cmd_u64(&c, max_space);
	redis_cmd_u64(&c, max_inodes);
	/* sets, never adds: safe to send again */
	int err = redis_run_script(m, RUN_RETRY, &c, &r);
	if (err)
		return err;
	if (r->elements < 2)
		err = META_EPROTO;
	else if (created)
		*created = redis_reply_u64(r->element[1]) == 1;
	freeReplyObject(r);
	return err;
}

/* quota_get's reply from element 1 on: six numbers per quota */
static int quotas_of(const redisReply *r, struct meta_quota *q, size_t cap,
		     size_t *n)
{
	size_t k = (r->elements - 1) / 6;
	if ((r->elements - 1) % 6)
		return META_EPROTO;
	if (k > cap)
		k = cap;
	for (size_t i = 0; i < k; i++) {
		redisReply **e = r->element + 1 + 6 * i;
		q[i] = (struct meta_quota){
		    .ino = redis_reply_u64(e[0]),
		    .max_space = redis_reply_u64(e[1]),
		    .max_inodes = redis_reply_u64(e[2]),
		    .used_space = redis_reply_u64(e[3]),
		    .used_inodes = redis_reply_u64(e[4]),
		    .pending = redis_reply_u64(e[5]),
		};
	}
	*n = k;
	return 0;
}

int meta_quota_get(struct meta *m, uint64_t ino, struct meta_quota *q)
{
	struct cmd c;
	redisReply *r;
	size_t n = 0;

	redis_cmd_script(m, &c, SC_QUOTA_GET);
	redis_cmd_u64(&c, ino);
	int err = redis_run_script(m, RUN_RETRY, &c, &r);
	if (err)
		return err;
	err = quotas_of(r, q, 1, &n);
	if (!err && n == 0)
		err = ENOENT;
	freeReplyObject(r);
	return err;
}

static int by_ino(const void *a, const void *b)
{
	uint64_t x = ((const struct meta_quota *)a)->ino;
	uint64_t y = ((const struct meta_quota *)b)->ino;
	return x < y ? -1 : x > y;
}

int meta_quota_list(struct meta *m, struct meta_quota **out, size_t *n)
{
	struct cmd c;
	redisReply *r;

	*out = NULL;
	*n = 0;
	redis_cmd_script(m, &c, SC_QUOTA_GET);
	int err = redis_run_script(m, RUN_RETRY, &c, &r);
	if (err)
		return err;
	size_t cap = (r->elements - 1) / 6;
	struct meta_quota *q = cap ? calloc(cap, sizeof(*q)) : NULL;
	if (cap && !q)
		err = ENOMEM;
	if (!err)
		err = quotas_of(r, q, cap, n);
	freeReplyObject(r);
	if (err) {
		free(q);
		*n = 0;
		return err;
	}
	if (*n) /* none: q may be NULL */
		qsort(q, *n, sizeof(*q), by_ino);
	*out = q;
	return 0;
}

int meta_quota_delete(struct meta *m, uint64_t ino)
{
	struct cmd c;

	if (m->opts.read_only)
		return EROFS;
	redis_cmd_script(m, &c, SC_QUOTA_DEL);
	redis_cmd_u64(&c, ino);
	return redis_run_script_void(m, &c);
}

int meta_quota_adjust(struct meta *m, uint64_t ino, int64_t ds, int64_t di)
{
	struct cmd c;

	if (m->opts.read_only)
		return EROFS;
	redis_cmd_script(m, &c, SC_QUOTA_ADJUST);
	redis_cmd_u64(&c, ino);
	redis_cmd_i64(&c, ds);
	redis_cmd_i64(&c, di);
	/* adds: never resent (redis_run_script_void does not retry) */
	return redis_run_script_void(m, &c);
}

int meta_quota_chain(struct meta *m, uint64_t dir, struct meta_qchain *q)
{
	struct cmd c;
	redisReply *r;

	*q = (struct meta_qchain){.dir = dir};
	redis_cmd_script(m, &c, SC_QUOTA_CHAIN);
	redis_cmd_u64(&c, dir);
	int err = redis_run_script(m, RUN_RETRY, &c, &r);
	if (err)
		return err;
	if (r->elements < 2) {
		freeReplyObject(r);
		return META_EPROTO;
	}
	q->gen = redis_reply_u64(r->element[1]);
	for (size_t i = 2; i < r->elements && q->n < META_QUOTA_NEST; i++)
		q->q[q->n++] = redis_reply_u64(r->element[i]);
	freeReplyObject(r);
	return 0;
}

int meta_quota_gen(struct meta *m, uint64_t *gen)
{
	struct cmd c;
	redisReply *r;

	redis_cmd_init(&c, "GET");
	redis_cmd_str(&c, "quotagen");
	int err = redis_run(m, RUN_RETRY, &c, &r);
	if (err)
		return err;
	*gen = redis_reply_u64(r);
	freeReplyObject(r);
	return 0;
}

int meta_quota_usage(struct meta *m, uint64_t ino, uint64_t pending,
		     struct meta_quota *q)
{
	struct cmd c;
	redisReply *r;

	/* sets a value, never adds one: safe to send again */
	redis_cmd_script(m, &c, SC_QUOTA_USAGE);
	redis_cmd_u64(&c, ino);
	redis_cmd_u64(&c, atomic_load(&m->sid));
	redis_cmd_u64(&c, pending);
	int err = redis_run_script(m, RUN_RETRY, &c, &r);
	if (err)
		return err;
	if (r->elements < 5) {
		freeReplyObject(r);
		return META_EPROTO;
	}
	*q = (struct meta_quota){
	    .ino = ino,
	    .max_space = redis_reply_u64(r->element[1]),
	    .max_inodes = redis_reply_u64(r->element[2]),
	    .used_space = redis_reply_u64(r->element[3]),
	    .used_inodes = redis_reply_u64(r->element[4]),
	    .pending = pending,
	};
	freeReplyObject(r);
	return 0;
}
