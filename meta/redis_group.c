/*
 * redis_group.c - cache groups of the Redis engine (meta/meta_group.h):
 * the members of a group, who is alive among them (the sessions' rule),
 * and the group secret. The records and their keys: SCHEMA.md "Cache
 * groups"; the scripts group_*.lua and their lib, lua/lib/group.lua.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "meta/meta_group.h"
#include "meta/redis_int.h"

#define WEIGHT_MAX (1ull << 53) /* a Lua number holds it exactly */

/* 1 to META_GROUP_NAME_MAX of [A-Za-z0-9._-]. */
static int name_ok(const char *g)
{
	size_t n;

	if (!g)
		return 0;
	n = strspn(g, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
		      "0123456789._-");
	return n >= 1 && n <= META_GROUP_NAME_MAX && !g[n];
}

/* ---- the secret ------------------------------------------------------ */

static int hex_val(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* key from the 2 * META_GROUP_SECRET hex digits of r; META_EPROTO when
 * it is not that. */
static int secret_unhex(const redisReply *r, unsigned char *key)
{
	if (r->type != REDIS_REPLY_STRING || r->len != 2 * META_GROUP_SECRET)
		return META_EPROTO;
	for (size_t i = 0; i < META_GROUP_SECRET; i++) {
		int hi = hex_val(r->str[2 * i]),
		    lo = hex_val(r->str[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return META_EPROTO;
		key[i] = (unsigned char)(hi << 4 | lo);
	}
	return 0;
}

int meta_group_secret(struct meta *m, unsigned char key[META_GROUP_SECRET])
{
	static const char digits[] = "0123456789abcdef";
	unsigned char fresh[META_GROUP_SECRET];
	char hex[2 * META_GROUP_SECRET + 1];
	struct cmd c;
	redisReply *r;
	size_t got = 0;
	int err;

	/* the candidate: the first caller's is the volume's */
	while (got < sizeof fresh) {
		ssize_t k = getrandom(fresh + got, sizeof fresh - got, 0);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return EIO; /* no weaker source for a secret */
		got += (size_t)k;
	}
	for (size_t i = 0; i < sizeof fresh; i++) {
		hex[2 * i] = digits[fresh[i] >> 4];
		hex[2 * i + 1] = digits[fresh[i] & 15];
	}
	hex[sizeof hex - 1] = '\0';
	redis_cmd_script(m, &c, SC_GROUP_SECRET);
	redis_cmd_str(&c, hex);
	/* HSETNX then HGET: the same answer when sent again */
	err = redis_run_script(m, RUN_RETRY, &c, &r);
	explicit_bzero(fresh, sizeof fresh);
	explicit_bzero(hex, sizeof hex);
	if (err)
		return err;
	err = r->elements == 2 ? secret_unhex(r->element[1], key) : META_EPROTO;
	if (r->elements == 2 && r->element[1]->type == REDIS_REPLY_STRING)
		explicit_bzero(r->element[1]->str, (size_t)r->element[1]->len);
	freeReplyObject(r);
	return err;
}

/* ---- membership ------------------------------------------------------ */

/* One run of group_join; *again 1 when the session must renew first. */
static int join_once(struct meta *m, uint64_t sid, const char *group,
		     const struct meta_group_member *self, size_t alen,
		     int *again)
{
	struct cmd c;
	redisReply *r;
	int err;

	redis_cmd_script(m, &c, SC_GROUP_JOIN);
	redis_cmd_str(&c, group);
	redis_cmd_u64(&c, self->node);
	redis_cmd_u64(&c, sid);
	redis_cmd_u64(&c, self->weight);
	redis_cmd_bin(&c, self->addr, alen);
	redis_cmd_i64(&c, m->opts.session_ttl);
	/* sent again, it finds its own record and replaces it */
	err = redis_run_script(m, RUN_RETRY, &c, &r);
	if (err)
		return err;
	if (r->elements < 2 || r->element[1]->type != REDIS_REPLY_INTEGER)
		err = META_EPROTO;
	else
		*again = r->element[1]->integer == 2;
	freeReplyObject(r);
	return err;
}

int meta_group_join(struct meta *m, const char *group,
		    const struct meta_group_member *self)
{
	uint64_t sid = meta_session_id(m);
	size_t alen;
	int err, again = 0;

	if (!sid || !name_ok(group) || !self->node || self->weight > WEIGHT_MAX)
		return EINVAL;
	alen = strnlen(self->addr, sizeof self->addr);
	if (alen == sizeof self->addr)
		return EINVAL;
	err = join_once(m, sid, group, self, alen, &again);
	if (err || !again)
		return err;
	/* this session was dead or cleaned away: renewed (registered again
	 * with the same sid), it joins as any live one */
	err = redis_session_renew(m);
	if (!err)
		err =
		    join_once(m, meta_session_id(m), group, self, alen, &again);
	return err ? err : again ? EIO : 0;
}

int meta_group_leave(struct meta *m, const char *group, uint64_t node)
{
	uint64_t sid = meta_session_id(m);
	struct cmd c;
	redisReply *r;
	int err;

	if (!name_ok(group))
		return EINVAL;
	if (!sid)
		return 0; /* holds nothing */
	redis_cmd_script(m, &c, SC_GROUP_LEAVE);
	redis_cmd_str(&c, group);
	redis_cmd_u64(&c, node);
	redis_cmd_u64(&c, sid);
	/* drops a record of this session only: safe to send again */
	err = redis_run_script(m, RUN_RETRY, &c, &r);
	if (!err)
		freeReplyObject(r);
	return err;
}

/* A member from field node, record rec and heartbeat hb of a
 * group_members reply; META_EPROTO when they are none. */
static int member_unpack(const redisReply *node, const redisReply *rec,
			 const redisReply *hb, struct meta_group_member *e)
{
	const uint8_t *p = (const uint8_t *)rec->str;
	size_t alen;

	memset(e, 0, sizeof *e);
	if (node->type != REDIS_REPLY_STRING ||
	    rec->type != REDIS_REPLY_STRING || rec->len < GROUP_REC_LEN ||
	    p[0] != 1 ||
	    !redis_parse_u64(node->str, (size_t)node->len, &e->node) ||
	    !e->node)
		return META_EPROTO;
	alen = (size_t)rec->len - GROUP_REC_LEN;
	if (alen >= sizeof e->addr)
		return META_EPROTO;
	e->sid = ld64(p + 1);
	e->weight = ld64(p + 9);
	e->joined = (int64_t)ld64(p + 17);
	memcpy(e->addr, p + GROUP_REC_LEN, alen);
	e->heartbeat = (int64_t)redis_reply_u64(hb);
	return 0;
}

static int by_node(const void *a, const void *b)
{
	const struct meta_group_member *x = a, *y = b;

	return x->node < y->node ? -1 : x->node > y->node;
}

int meta_group_members(struct meta *m, const char *group,
		       struct meta_group_member **out, size_t *n)
{
	struct meta_group_member *v = NULL;
	struct cmd c;
	redisReply *r;
	size_t cnt;
	int err;

	*out = NULL;
	*n = 0;
	if (!name_ok(group))
		return EINVAL;
	redis_cmd_script(m, &c, SC_GROUP_MEMBERS);
	redis_cmd_str(&c, group);
	redis_cmd_i64(&c, m->opts.session_ttl);
	/* changes nothing but the liveness clock: safe to send again */
	err = redis_run_script(m, RUN_RETRY, &c, &r);
	if (err)
		return err;
	cnt = (r->elements - 1) / 3;
	if ((r->elements - 1) % 3) {
		err = META_EPROTO;
		goto free_r;
	}
	if (!cnt)
		goto free_r;
	v = calloc(cnt, sizeof *v);
	if (!v) {
		err = ENOMEM;
		goto free_r;
	}
	for (size_t i = 0; i < cnt && !err; i++)
		err =
		    member_unpack(r->element[1 + 3 * i], r->element[2 + 3 * i],
				  r->element[3 + 3 * i], &v[i]);
	if (err) {
		free(v);
		goto free_r;
	}
	qsort(v, cnt, sizeof *v, by_node);
	*out = v;
	*n = cnt;
free_r:
	freeReplyObject(r);
	return err;
}

/* ---- names, and the walk of fsck ------------------------------------- */

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int meta_group_names(struct meta *m, char ***names, size_t *n)
{
	struct cmd c;
	redisReply *r;
	char **v = NULL;
	size_t cnt = 0;
	int err;

	*names = NULL;
	*n = 0;
	redis_cmd_init(&c, "SMEMBERS");
	redis_cmd_str(&c, "cgroups");
	err = redis_run(m, RUN_RETRY, &c, &r);
	if (err)
		return err;
	if (r->type != REDIS_REPLY_ARRAY) {
		err = META_EPROTO;
		goto free_r;
	}
	if (!r->elements)
		goto free_r;
	v = calloc(r->elements, sizeof *v);
	if (!v) {
		err = ENOMEM;
		goto free_r;
	}
	for (size_t i = 0; i < r->elements; i++) {
		const redisReply *e = r->element[i];
		/* a name no granary writes is not shown */
		if (e->type != REDIS_REPLY_STRING || !name_ok(e->str))
			continue;
		if (!(v[cnt] = strdup(e->str))) {
			err = ENOMEM;
			break;
		}
		cnt++;
	}
	if (err) {
		meta_group_names_free(v, cnt);
		goto free_r;
	}
	qsort(v, cnt, sizeof *v, by_name);
	*names = v;
	*n = cnt;
free_r:
	freeReplyObject(r);
	return err;
}

void meta_group_names_free(char **names, size_t n)
{
	if (!names)
		return;
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

struct sids_walk {
	int (*fn)(void *arg, uint64_t sid);
	void *arg;
};

static int sid_of_record(struct meta *m, const redisReply *f,
			 const redisReply *v, void *ctx)
{
	struct sids_walk *w = ctx;

	(void)m;
	(void)f;
	if (v->type != REDIS_REPLY_STRING || v->len < GROUP_REC_LEN ||
	    v->str[0] != 1)
		return 0;
	return w->fn(w->arg, ld64((const uint8_t *)v->str + 1));
}

int redis_group_sids(struct meta *m, int (*fn)(void *arg, uint64_t sid),
		     void *arg)
{
	struct sids_walk w = {fn, arg};
	char **names, key[8 + META_GROUP_NAME_MAX];
	size_t n;
	int err = meta_group_names(m, &names, &n);

	for (size_t i = 0; !err && i < n; i++) {
		snprintf(key, sizeof key, "cg%s", names[i]);
		err = redis_fields_walk(m, key, 0, sid_of_record, &w);
	}
	meta_group_names_free(names, n);
	return err;
}
