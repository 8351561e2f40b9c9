/*
 * redis_check.c - what a volume's Redis server says of itself (INFO, and
 * CONFIG GET where the server allows it), and the settings that put
 * metadata at risk: a server that may evict keys deletes metadata, one
 * with no persistence loses it all at a restart, one near its maxmemory
 * is about to refuse writes. For `granary format`, `mount` and `status`.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "meta/meta_server.h"
#include "meta/redis_int.h"

#define FULL_PERCENT 80 /* META_RISK_FULL above this share of maxmemory */

/* The value of "key:value" in an INFO reply into out ("" when absent). */
static void info_field(const char *info, const char *key, char *out, size_t cap)
{
	size_t klen = strlen(key);
	const char *p = info;

	out[0] = '\0';
	while (p && *p) {
		if (strncmp(p, key, klen) == 0 && p[klen] == ':') {
			size_t n = strcspn(p + klen + 1, "\r\n");
			snprintf(out, cap, "%.*s", (int)n, p + klen + 1);
			return;
		}
		p = strchr(p, '\n');
		if (p)
			p++;
	}
}

static uint64_t info_u64(const char *info, const char *key)
{
	char v[32];

	info_field(info, key, v, sizeof v);
	return strtoull(v, NULL, 10);
}

/* The value of a CONFIG GET reply ({name, value}); NULL when refused. */
static const char *config_value(const redisReply *r)
{
	if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
	    r->element[1]->type != REDIS_REPLY_STRING)
		return NULL;
	return r->element[1]->str;
}

int meta_server_info(struct meta *m, struct meta_server *s)
{
	static const char *const param[] = {"maxmemory-policy", "maxmemory",
					    "appendonly", "save"};
	enum { NCONF = sizeof param / sizeof param[0] };
	const char *argv[1 + NCONF][3];
	size_t len[1 + NCONF][3];
	struct req reqs[1 + NCONF];
	redisReply *out[1 + NCONF];
	const char *info, *v[NCONF];
	char buf[32];
	int err, i;

	memset(s, 0, sizeof *s);
	argv[0][0] = "INFO";
	len[0][0] = 4;
	reqs[0] = (struct req){1, argv[0], len[0], -1};
	for (i = 0; i < NCONF; i++) {
		argv[1 + i][0] = "CONFIG";
		argv[1 + i][1] = "GET";
		argv[1 + i][2] = param[i];
		len[1 + i][0] = 6;
		len[1 + i][1] = 3;
		len[1 + i][2] = strlen(param[i]);
		reqs[1 + i] = (struct req){3, argv[1 + i], len[1 + i], -1};
	}
	err = redis_run_reqs(m, RUN_RETRY | RUN_RAW, reqs, 1 + NCONF, out);
	if (err)
		return err;
	if (out[0]->type != REDIS_REPLY_STRING) {
		err = META_EPROTO;
		goto free_out;
	}
	info = out[0]->str;
	info_field(info, "redis_version", s->version, sizeof s->version);
	s->used_memory = info_u64(info, "used_memory");
	s->maxmemory = info_u64(info, "maxmemory");
	info_field(info, "maxmemory_policy", s->policy, sizeof s->policy);
	info_field(info, "aof_enabled", buf, sizeof buf);
	s->aof = strcmp(buf, "1") == 0;
	s->rdb_last_save = (int64_t)info_u64(info, "rdb_last_save_time");
	info_field(info, "rdb_last_bgsave_status", s->rdb_status,
		   sizeof s->rdb_status);
	info_field(info, "aof_last_write_status", s->aof_status,
		   sizeof s->aof_status);
	s->replicas = (int)info_u64(info, "connected_slaves");

	/* CONFIG, where allowed, says what the server is set to do (INFO's
	 * aof_enabled is still 0 while an AOF is being turned on) and is
	 * the only source of the save points */
	for (i = 0; i < NCONF; i++)
		v[i] = config_value(out[1 + i]);
	s->config = v[0] && v[1] && v[2] && v[3];
	if (s->config) {
		snprintf(s->policy, sizeof s->policy, "%s", v[0]);
		s->maxmemory = strtoull(v[1], NULL, 10);
		s->aof = strcmp(v[2], "yes") == 0;
		snprintf(s->save, sizeof s->save, "%s", v[3]);
	}
	redis_server_addr(m, s->addr, sizeof s->addr);
	snprintf(s->master, sizeof s->master, "%s", m->addr.master);
	s->wait = m->addr.wait;
free_out:
	for (i = 0; i < 1 + NCONF; i++)
		freeReplyObject(out[i]);
	return err;
}

int meta_server_risks(const struct meta_server *s)
{
	int risks = 0;

	if (s->policy[0] && strcmp(s->policy, "noeviction") != 0)
		risks |= META_RISK_EVICT;
	if (s->config && !s->aof && !s->save[0])
		risks |= META_RISK_NOPERSIST;
	if (s->maxmemory && s->used_memory > s->maxmemory / 100 * FULL_PERCENT)
		risks |= META_RISK_FULL;
	return risks;
}
