/*
 * redis_volume.c - a volume of the Redis engine as a whole: format, the
 * settings a client loads, usage figures, and `granary upgrade` of an older
 * format (SCHEMA.md, "Upgrades").
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "meta/meta_objects.h"
#include "meta/meta_snap.h"
#include "meta/meta_volume.h"
#include "meta/redis_int.h"
#include "lib/log.h"

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
		redis_cmd_init(&c, "FLUSHDB");
		err = redis_run_void(m, 0, &c);
		if (err)
			return err;
	}
	if (v->uuid[0])
		snprintf(uuid, sizeof uuid, "%s", v->uuid);
	else
		uuid_make(uuid, sizeof uuid);
	redis_cmd_script(m, &c, SC_FORMAT);
	redis_cmd_str(&c, "name");
	redis_cmd_str(&c, v->name);
	redis_cmd_str(&c, "uuid");
	redis_cmd_str(&c, uuid);
	redis_cmd_str(&c, "storage");
	redis_cmd_str(&c, v->storage);
	redis_cmd_str(&c, "access_key");
	redis_cmd_str(&c, v->access_key);
	redis_cmd_str(&c, "secret_key");
	redis_cmd_str(&c, v->secret_key);
	redis_cmd_str(&c, "block_size");
	redis_cmd_u64(&c, bs);
	redis_cmd_str(&c, "compress");
	redis_cmd_u64(&c, v->compress);
	redis_cmd_str(&c, "format_version");
	redis_cmd_u64(&c, META_FORMAT_VERSION);
	redis_cmd_str(&c, "capacity");
	redis_cmd_u64(&c, v->capacity);
	redis_cmd_str(&c, "created");
	redis_cmd_i64(&c, v->created);
	redis_cmd_str(&c, "trash_days");
	redis_cmd_u64(&c, v->trash_days);
	if (v->crypt[0]) { /* absent: not encrypted, as before it existed */
		redis_cmd_str(&c, "crypt");
		redis_cmd_str(&c, v->crypt);
	}
	err = redis_run_script_void(m, &c);
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

int meta_volume_set(struct meta *m, const char *field, uint64_t value)
{
	struct cmd c;

	if (m->opts.read_only)
		return EROFS;
	if (strcmp(field, "trash_days"))
		return EINVAL;
	redis_cmd_script(m, &c, SC_VOLUME_SET);
	redis_cmd_str(&c, field);
	redis_cmd_u64(&c, value);
	int err = redis_run_script_void(m, &c);
	return err == ENODEV ? META_ENOVOLUME : err;
}

int meta_volume_set_crypt(struct meta *m, const char *old_rec,
			  const char *new_rec)
{
	struct cmd c;

	if (m->opts.read_only)
		return EROFS;
	if (!new_rec || !*new_rec)
		return EINVAL;
	redis_cmd_script(m, &c, SC_VOLUME_CRYPT);
	redis_cmd_str(&c, old_rec ? old_rec : "");
	redis_cmd_str(&c, new_rec);
	int err = redis_run_script_void(m, &c);
	return err == ENODEV ? META_ENOVOLUME : err;
}

int meta_id_floor_raise(struct meta *m, uint64_t slices, uint64_t inodes)
{
	struct cmd c;

	if (m->opts.read_only)
		return EROFS;
	if (slices >= (UINT64_C(1) << 53) || inodes >= (UINT64_C(1) << 53))
		return EOVERFLOW;
	redis_cmd_script(m, &c, SC_ID_FLOOR);
	redis_cmd_u64(&c, slices);
	redis_cmd_u64(&c, inodes);
	int err = redis_run_script_void(m, &c);
	return err == ENODEV ? META_ENOVOLUME : err;
}

static void copy_field(char *dst, size_t cap, const redisReply *r)
{
	size_t n = (size_t)r->len < cap - 1 ? (size_t)r->len : cap - 1;
	memcpy(dst, r->str, n);
	dst[n] = '\0';
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
	redis_cmd_init(&c, "HGETALL");
	redis_cmd_str(&c, "setting");
	err = redis_run(m, RUN_RETRY, &c, &r);
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
			v->block_size = (uint32_t)redis_field_u64(val);
		else if (!strcmp(k->str, "compress"))
			v->compress = (uint32_t)redis_field_u64(val);
		else if (!strcmp(k->str, "format_version"))
			v->format_version = (uint32_t)redis_field_u64(val);
		else if (!strcmp(k->str, "capacity"))
			v->capacity = redis_field_u64(val);
		else if (!strcmp(k->str, "created"))
			v->created = (int64_t)redis_field_u64(val);
		/* absent in volumes formatted before the trash: 0, off */
		else if (!strcmp(k->str, "trash_days"))
			v->trash_days = (uint32_t)redis_field_u64(val);
		/* a record that does not fit is no record: crypt.c says so */
		else if (!strcmp(k->str, "crypt"))
			copy_field(v->crypt, sizeof v->crypt, val);
		/* absent in a volume never loaded (meta_dump.h) */
		else if (!strcmp(k->str, "restore_id"))
			copy_field(v->restore_id, sizeof v->restore_id, val);
		else if (!strcmp(k->str, "slice_floor"))
			v->slice_floor = redis_field_u64(val);
		else if (!strcmp(k->str, "inode_floor"))
			v->inode_floor = redis_field_u64(val);
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
	redis_cmd_init(&c, "SCAN");
	redis_cmd_str(&c, cursor);
	redis_cmd_str(&c, "MATCH");
	redis_cmd_str(&c, pat);
	redis_cmd_str(&c, "COUNT");
	redis_cmd_str(&c, "1000");
	err = redis_run(m, RUN_RETRY, &c, &r);
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

/* Clients alive to the session TTL (script session_live: a heartbeat
 * within it, or any while a stall of the server is less than it behind:
 * SCHEMA.md "Sessions"). */
static int live_sessions(struct meta *m, long long *n)
{
	struct cmd c;
	redisReply *r;
	int err;

	redis_cmd_script(m, &c, SC_SESSION_LIVE);
	redis_cmd_i64(&c, m->opts.session_ttl);
	err = redis_run_script(m, 0, &c, &r);
	if (err)
		return err;
	if (r->elements < 2 || r->element[1]->type != REDIS_REPLY_INTEGER)
		err = META_EPROTO;
	else
		*n = r->element[1]->integer;
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

	redis_cmd_script(m, &c, SC_UPGRADE_INODES);
	for (size_t k = 0; k < cnt; k++)
		redis_cmd_u64(&c, inos[k]);
	err = redis_run_script(m, 0, &c, &r);
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
		redis_cmd_script(m, &c, SC_UPGRADE_DIR);
		redis_cmd_u64(&c, dir);
		redis_cmd_str(&c, cursor);
		err = redis_run_script(m, 0, &c, &r);
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
	redis_cmd_init(&c, "HSET");
	redis_cmd_str(&c, "setting");
	redis_cmd_str(&c, "format_version");
	redis_cmd_u64(&c, META_FORMAT_VERSION);
	return redis_run_void(m, RUN_RETRY, &c);
}

int meta_usage(struct meta *m, struct meta_usage *u)
{
	struct cmd c;
	redisReply *r;
	int err;

	memset(u, 0, sizeof *u);
	redis_cmd_init(&c, "MGET");
	redis_cmd_str(&c, "usedspace");
	redis_cmd_str(&c, "totalinodes");
	err = redis_run(m, RUN_RETRY, &c, &r);
	if (err)
		return err;
	if (r->type != REDIS_REPLY_ARRAY || r->elements != 2)
		err = META_EPROTO;
	else {
		u->used_bytes = redis_reply_u64(r->element[0]);
		u->inodes = redis_reply_u64(r->element[1]);
	}
	freeReplyObject(r);
	return err;
}
