/*
 * redis_trash.c - the trash in the Redis engine (meta_trash.h): listing
 * it, restoring an entry, purging old hour directories, its usage. Moving
 * things in is the namespace scripts' (unlink, rmdir, rename with
 * lib/trash.lua); the layout is SCHEMA.md's "Trash".
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "meta/meta_trash.h"
#include "meta/redis_int.h"

#define HOUR	    3600
#define PURGE_COUNT 256 /* entries a trash_purge call deletes, about */

int64_t meta_trash_hour_start(const char *name)
{
	struct tm tm;
	int y, mo, d, h, len = 0;

	if (strlen(name) != 13 ||
	    sscanf(name, "%4d-%2d-%2d-%2d%n", &y, &mo, &d, &h, &len) != 4 ||
	    len != 13 || mo < 1 || mo > 12 || d < 1 || d > 31 || h < 0 ||
	    h > 23)
		return -1;
	memset(&tm, 0, sizeof tm);
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	return (int64_t)timegm(&tm);
}

int meta_trash_ino(struct meta *m, uint64_t *ino)
{
	struct cmd c;
	redisReply *r;
	int err;

	redis_cmd_init(&c, "GET");
	redis_cmd_str(&c, "trash");
	err = redis_run(m, RUN_RETRY, &c, &r);
	if (err)
		return err;
	*ino = redis_reply_u64(r);
	freeReplyObject(r);
	return 0;
}

static int dirent_by_name(const void *a, const void *b)
{
	return strcmp(((const struct meta_dirent *)a)->name,
		      ((const struct meta_dirent *)b)->name);
}

/* The hour directories of the trash, by name (so oldest first); none
 * (n 0) when there is no trash. */
static int hours_list(struct meta *m, struct meta_dirent **hours, size_t *n)
{
	uint64_t t;
	int err = meta_trash_ino(m, &t);

	*hours = NULL;
	*n = 0;
	if (err || !t)
		return err;
	err = meta_readdir(m, t, 0, hours, n);
	if (err == ENOENT)
		err = 0; /* the key outlived the directory: nothing in it */
	if (!err && *n > 1)
		qsort(*hours, *n, sizeof **hours, dirent_by_name);
	return err;
}

/* ---- list ------------------------------------------------------------- */

struct elist {
	struct meta_trash_entry *e;
	size_t n, cap;
};

/* The whole name of entry `name` from the hour's tn hash (HGETALL reply),
 * NULL when it was not cut. */
static const char *long_name(const redisReply *tn, const char *name)
{
	if (!tn || tn->type != REDIS_REPLY_ARRAY)
		return NULL;
	for (size_t i = 0; i + 1 < tn->elements; i += 2)
		if (tn->element[i]->type == REDIS_REPLY_STRING &&
		    !strcmp(tn->element[i]->str, name))
			return tn->element[i + 1]->str;
	return NULL;
}

/* "<parent>-<ino>-<name>": parent and name, when the ino matches. */
static int parse_name(const char *s, uint64_t ino, uint64_t *parent,
		      const char **rest)
{
	char *end;
	uint64_t p = strtoull(s, &end, 10);

	if (end == s || *end != '-')
		return -1;
	s = end + 1;
	if (strtoull(s, &end, 10) != ino || end == s || *end != '-')
		return -1;
	*parent = p;
	*rest = end + 1;
	return 0;
}

static int elist_add(struct elist *l, const struct meta_dirent *h,
		     const struct meta_dirent *d, const redisReply *tn)
{
	struct meta_trash_entry *e;
	const char *orig = d->name, *whole;

	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		e = realloc(l->e, cap * sizeof *e);
		if (!e)
			return ENOMEM;
		l->e = e;
		l->cap = cap;
	}
	e = &l->e[l->n];
	memset(e, 0, sizeof *e);
	snprintf(e->hour, sizeof e->hour, "%s", h->name);
	e->hour_ino = h->ino;
	e->ino = d->ino;
	e->attr = d->attr;
	if (parse_name(d->name, d->ino, &e->parent, &orig))
		e->parent = 0, orig = d->name;
	whole = long_name(tn, d->name);
	e->name = strdup(d->name);
	e->orig = strdup(whole ? whole : orig);
	if (!e->name || !e->orig) {
		free(e->name);
		free(e->orig);
		return ENOMEM;
	}
	l->n++;
	return 0;
}

/* One hour directory's entries (with attributes) and long names. */
static int list_hour(struct meta *m, const struct meta_dirent *h,
		     struct elist *l)
{
	struct meta_dirent *ents;
	struct cmd c;
	redisReply *tn = NULL;
	size_t n;
	int err = meta_readdir(m, h->ino, 1, &ents, &n);

	if (err)
		return err == ENOENT ? 0 : err; /* purged meanwhile */
	if (n > 1)
		qsort(ents, n, sizeof *ents, dirent_by_name);
	redis_cmd_init(&c, "HGETALL");
	redis_cmd_key(&c, "tn", h->ino);
	err = redis_run(m, RUN_RETRY, &c, &tn);
	for (size_t i = 0; !err && i < n; i++)
		err = elist_add(l, h, &ents[i], tn);
	if (tn)
		freeReplyObject(tn);
	meta_dirents_free(ents, n);
	return err;
}

int meta_trash_list(struct meta *m, struct meta_trash_entry **out, size_t *n)
{
	struct elist l = {NULL, 0, 0};
	struct meta_dirent *hours;
	size_t nh;
	int err = hours_list(m, &hours, &nh);

	*out = NULL;
	*n = 0;
	for (size_t i = 0; !err && i < nh; i++)
		if (hours[i].type == META_DIR)
			err = list_hour(m, &hours[i], &l);
	meta_dirents_free(hours, nh);
	if (err) {
		meta_trash_entries_free(l.e, l.n);
		return err;
	}
	*out = l.e;
	*n = l.n;
	return 0;
}

void meta_trash_entries_free(struct meta_trash_entry *e, size_t n)
{
	if (!e)
		return;
	for (size_t i = 0; i < n; i++) {
		free(e[i].name);
		free(e[i].orig);
	}
	free(e);
}

/* ---- restore ---------------------------------------------------------- */

int meta_trash_restore(struct meta *m, uint64_t hour_ino, const char *name,
		       uint64_t newparent, const char *newname)
{
	struct cmd c;
	int err = redis_new_name_check(m, newname);

	if (err)
		return err;
	redis_cmd_script(m, &c, SC_TRASH_RESTORE);
	redis_cmd_u64(&c, hour_ino);
	redis_cmd_str(&c, name);
	redis_cmd_u64(&c, newparent);
	redis_cmd_str(&c, newname);
	return redis_run_script_void(m, &c);
}

/* ---- purge ------------------------------------------------------------ */

/* Empty hour directory h (named name) and delete it. */
static int purge_hour(struct meta *m, const struct meta_dirent *h,
		      struct meta_trash_purged *p)
{
	for (;;) {
		struct cmd c;
		redisReply *r;
		redis_cmd_script(m, &c, SC_TRASH_PURGE);
		redis_cmd_u64(&c, h->ino);
		redis_cmd_str(&c, h->name);
		redis_cmd_u64(&c, PURGE_COUNT);
		int err = redis_run_script(m, 0, &c, &r);
		if (err)
			return err;
		uint64_t n =
		    r->elements > 1 ? redis_reply_u64(r->element[1]) : 0;
		int gone = r->elements > 2 && redis_reply_u64(r->element[2]);
		freeReplyObject(r);
		p->entries += n;
		if (gone)
			p->hours++;
		/* n 0 and not gone: what is left cannot go (SCHEMA.md) */
		if (gone || n == 0)
			return 0;
	}
}

int meta_trash_purge(struct meta *m, int64_t before,
		     struct meta_trash_purged *out)
{
	struct meta_trash_purged p = {0, 0};
	struct meta_dirent *hours;
	size_t nh;
	int err;

	if (m->opts.read_only)
		return EROFS;
	err = hours_list(m, &hours, &nh);
	for (size_t i = 0; !err && i < nh; i++) {
		int64_t start = meta_trash_hour_start(hours[i].name);
		if (hours[i].type != META_DIR || start < 0)
			continue;
		if (before != INT64_MAX && start + HOUR > before)
			break; /* by name: the later ones are younger */
		err = purge_hour(m, &hours[i], &p);
	}
	meta_dirents_free(hours, nh);
	if (out)
		*out = p;
	return err;
}

/* The server's clock (TIME), unix seconds. */
static int server_now(struct meta *m, int64_t *now)
{
	struct cmd c;
	redisReply *r;
	int err;

	redis_cmd_init(&c, "TIME");
	err = redis_run(m, RUN_RETRY, &c, &r);
	if (err)
		return err;
	if (r->type != REDIS_REPLY_ARRAY || r->elements < 1)
		err = META_EPROTO;
	else
		*now = (int64_t)redis_reply_u64(r->element[0]);
	freeReplyObject(r);
	return err;
}

int meta_trash_purge_due(struct meta *m, unsigned period, int64_t skew,
			 int *ran, struct meta_trash_purged *out)
{
	struct cmd c;
	redisReply *r;
	uint64_t t;
	int64_t now, before;
	int err;

	*ran = 0;
	if (out)
		*out = (struct meta_trash_purged){0, 0};
	err = meta_trash_ino(m, &t);
	if (err || !t)
		return err; /* no trash, nothing to purge, no turn taken */
	redis_cmd_init(&c, "SET");
	redis_cmd_str(&c, "trashpurge");
	redis_cmd_u64(&c, atomic_load(&m->sid));
	redis_cmd_str(&c, "NX");
	redis_cmd_str(&c, "EX");
	redis_cmd_u64(&c, period ? period : 1);
	err = redis_run(m, 0, &c, &r);
	if (err)
		return err;
	*ran = r->type == REDIS_REPLY_STATUS;
	freeReplyObject(r);
	if (!*ran)
		return 0;
	redis_cmd_init(&c, "HGET");
	redis_cmd_str(&c, "setting");
	redis_cmd_str(&c, "trash_days");
	err = redis_run(m, RUN_RETRY, &c, &r);
	if (err)
		return err;
	uint64_t days = redis_reply_u64(r);
	freeReplyObject(r);
	err = server_now(m, &now);
	if (err)
		return err;
	/* trash off: nothing is kept */
	before = days ? now + skew - (int64_t)days * 86400 : INT64_MAX;
	return meta_trash_purge(m, before, out);
}

/* ---- usage ------------------------------------------------------------ */

static uint64_t sum_values(const redisReply *r)
{
	uint64_t s = 0;
	if (r->type == REDIS_REPLY_ARRAY)
		for (size_t i = 0; i < r->elements; i++)
			s += redis_reply_u64(r->element[i]);
	return s;
}

int meta_trash_usage(struct meta *m, struct meta_trash_usage *u)
{
	struct cmd c1, c2;
	struct req reqs[2];
	redisReply *r[2];
	int err;

	redis_cmd_init(&c1, "HVALS");
	redis_cmd_str(&c1, "trashbytes");
	redis_cmd_init(&c2, "HVALS");
	redis_cmd_str(&c2, "trashcount");
	reqs[0] = (struct req){c1.argc, c1.argv, c1.len, -1};
	reqs[1] = (struct req){c2.argc, c2.argv, c2.len, -1};
	err = redis_run_reqs(m, RUN_RETRY, reqs, 2, r);
	if (err)
		return err;
	u->bytes = sum_values(r[0]);
	u->entries = sum_values(r[1]);
	freeReplyObject(r[0]);
	freeReplyObject(r[1]);
	return 0;
}
