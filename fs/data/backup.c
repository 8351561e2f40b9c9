/*
 * backup.c - metadata backups as objects of the store (backup.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fs/data/backup.h"
#include "fs/store/crypt.h"
#include "fs/store/objstore.h"
#include "lib/errors.h"
#include "lib/log.h"

#define DAY 86400

void backup_name(int64_t t, uint64_t sid, char *name)
{
	struct tm tm;
	time_t tt = (time_t)t;
	gmtime_r(&tt, &tm);
	snprintf(name, BACKUP_NAME, "%04d%02d%02dT%02d%02d%02dZ-s%" PRIu64,
		 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
		 tm.tm_min, tm.tm_sec, sid);
}

static void part_key(const char *name, uint32_t part, char *key, size_t cap)
{
	snprintf(key, cap, BACKUP_PREFIX "%s/p%05" PRIu32, name, part);
}

static void done_key(const char *name, char *key, size_t cap)
{
	snprintf(key, cap, BACKUP_PREFIX "%s/done", name);
}

static void key_key(const char *name, char *key, size_t cap)
{
	snprintf(key, cap, BACKUP_PREFIX "%s/key", name);
}

/* ---- writing -------------------------------------------------------- */

struct backup_writer {
	struct objstore *s;
	struct objstore *clear; /* a sealed backup's: where its key is */
	char name[BACKUP_NAME];
	char *buf; /* BACKUP_PART */
	size_t len;
	uint32_t parts;
	uint64_t bytes;
	int err; /* the first error: later writes fail with it */
};

int backup_begin(struct objstore *s, const char *name,
		 struct backup_writer **out)
{
	struct backup_writer *w = calloc(1, sizeof *w);
	if (!w || !(w->buf = malloc(BACKUP_PART))) {
		free(w);
		return ENOMEM;
	}
	w->s = s;
	snprintf(w->name, sizeof w->name, "%s", name);
	*out = w;
	return 0;
}

/* Whether s holds what a key object may: printable, no quote, no
 * backslash (uuids and records are hex, digits, '-' and ':'). */
static int key_text(const char *s)
{
	for (; *s; s++)
		if (*s < 0x20 || *s > 0x7e || *s == '"' || *s == '\\')
			return 0;
	return 1;
}

int backup_begin_sealed(struct objstore *sealed, const struct backup_key *k,
			const char *name, struct backup_writer **out)
{
	struct objstore *clear = objstore_crypt_inner(sealed);
	char body[512], key[128];

	if (!clear || !k->uuid[0] || !k->record[0] || !key_text(k->uuid) ||
	    !key_text(k->record))
		return EINVAL;
	int n = snprintf(body, sizeof body,
			 "{\"format\":\"granary-backup-key\",\"version\":1,"
			 "\"uuid\":\"%s\",\"crypt\":\"%s\"}\n",
			 k->uuid, k->record);
	if (n < 0 || (size_t)n >= sizeof body)
		return EINVAL;
	int err = backup_begin(sealed, name, out);
	if (err)
		return err;
	key_key(name, key, sizeof key);
	if ((err = objstore_put(clear, key, body, (size_t)n))) {
		backup_finish(*out, NULL, 1);
		*out = NULL;
		return err;
	}
	(*out)->clear = clear;
	return 0;
}

static int put_part(struct backup_writer *w)
{
	char key[128];
	part_key(w->name, w->parts, key, sizeof key);
	int err = objstore_put(w->s, key, w->buf, w->len);
	if (err)
		return err;
	w->parts++;
	w->bytes += w->len;
	w->len = 0;
	return 0;
}

int backup_write(void *arg, const void *p, size_t n)
{
	struct backup_writer *w = arg;
	const char *c = p;
	while (n && !w->err) {
		size_t k = BACKUP_PART - w->len;
		if (k > n)
			k = n;
		memcpy(w->buf + w->len, c, k);
		w->len += k;
		c += k;
		n -= k;
		if (w->len == BACKUP_PART)
			w->err = put_part(w);
	}
	return w->err;
}

/* The host as a JSON string's inside: hostnames are letters, digits, '-'
 * and '.', anything else is dropped. */
static void host_clean(const char *in, char *out, size_t cap)
{
	size_t j = 0;
	for (; *in && j + 1 < cap; in++)
		if ((*in >= 'a' && *in <= 'z') || (*in >= 'A' && *in <= 'Z') ||
		    (*in >= '0' && *in <= '9') || *in == '-' || *in == '.')
			out[j++] = *in;
	out[j] = 0;
}

int backup_finish(struct backup_writer *w, struct backup_info *info, int abort)
{
	int err = w->err;
	if (!err && !abort && (w->len || w->parts == 0))
		err = put_part(w);
	if (!err && !abort) {
		char host[256], man[1024], key[128];
		host_clean(info->host, host, sizeof host);
		snprintf(info->name, sizeof info->name, "%s", w->name);
		info->parts = w->parts;
		info->bytes = w->bytes;
		int n = snprintf(
		    man, sizeof man,
		    "{\"format\":\"granary-backup\",\"version\":1,"
		    "\"name\":\"%s\",\"time\":%" PRId64 ",\"sid\":%" PRIu64
		    ",\"host\":\"%s\",\"parts\":%" PRIu32 ",\"bytes\":%" PRIu64
		    ",\"inodes\":%" PRIu64 ",\"seconds\":%.3f}\n",
		    w->name, info->time, info->sid, host, info->parts,
		    info->bytes, info->inodes, info->seconds);
		done_key(w->name, key, sizeof key);
		err = objstore_put(w->s, key, man, (size_t)n);
	}
	if (err || abort) { /* leave nothing a listing would trip on */
		char key[128];
		for (uint32_t i = 0; i < w->parts; i++) {
			part_key(w->name, i, key, sizeof key);
			objstore_del(w->s, key);
		}
		key_key(w->name, key, sizeof key);
		if (w->clear)
			objstore_del(w->clear, key);
	}
	free(w->buf);
	free(w);
	return err;
}

/* ---- the manifest --------------------------------------------------- */

/* The text after "key": in the manifest m, or NULL. */
static const char *field(const char *m, const char *key)
{
	char pat[32];
	snprintf(pat, sizeof pat, "\"%s\":", key);
	const char *p = strstr(m, pat);
	return p ? p + strlen(pat) : NULL;
}

static int field_u64(const char *m, const char *key, uint64_t *v)
{
	const char *p = field(m, key);
	char *end;
	if (!p || *p < '0' || *p > '9')
		return EINVAL;
	errno = 0;
	*v = strtoull(p, &end, 10);
	return errno || (*end != ',' && *end != '}') ? EINVAL : 0;
}

static int field_str(const char *m, const char *key, char *out, size_t cap)
{
	const char *p = field(m, key);
	if (!p || *p != '"')
		return EINVAL;
	const char *q = strchr(++p, '"');
	if (!q || (size_t)(q - p) >= cap)
		return EINVAL;
	memcpy(out, p, (size_t)(q - p));
	out[q - p] = 0;
	return 0;
}

static int manifest_parse(const char *m, struct backup_info *b)
{
	uint64_t version, t, parts;
	const char *sec = field(m, "seconds");
	memset(b, 0, sizeof *b);
	if (!strstr(m, "\"format\":\"granary-backup\"") ||
	    field_u64(m, "version", &version) || version != 1 ||
	    field_str(m, "name", b->name, sizeof b->name) ||
	    field_u64(m, "time", &t) || field_u64(m, "sid", &b->sid) ||
	    field_str(m, "host", b->host, sizeof b->host) ||
	    field_u64(m, "parts", &parts) || parts < 1 || parts > UINT32_MAX ||
	    field_u64(m, "bytes", &b->bytes) ||
	    field_u64(m, "inodes", &b->inodes) || !sec)
		return EINVAL;
	b->time = (int64_t)t;
	b->parts = (uint32_t)parts;
	b->seconds = strtod(sec, NULL);
	return 0;
}

int backup_key_get(struct objstore *s, const char *name, struct backup_key *k)
{
	char key[128];
	void *data = NULL;
	size_t got = 0;
	key_key(name, key, sizeof key);
	int err = objstore_get(s, key, 0, 1024, &data, &got);
	if (err)
		return err;
	char m[1025];
	memcpy(m, data, got < 1024 ? got : 1024);
	m[got < 1024 ? got : 1024] = 0;
	free(data);
	memset(k, 0, sizeof *k);
	uint64_t version;
	if (!strstr(m, "\"format\":\"granary-backup-key\"") ||
	    field_u64(m, "version", &version) || version != 1 ||
	    field_str(m, "uuid", k->uuid, sizeof k->uuid) ||
	    field_str(m, "crypt", k->record, sizeof k->record) || !k->uuid[0] ||
	    !k->record[0]) {
		log_warn("backup %s: its key object %s is not one", name, key);
		return EINVAL;
	}
	return 0;
}

int backup_stat(struct objstore *s, const char *name, struct backup_info *info)
{
	char key[128];
	void *data = NULL;
	size_t got = 0;
	done_key(name, key, sizeof key);
	int err = objstore_get(s, key, 0, 4096, &data, &got);
	if (err)
		return err;
	char *m = malloc(got + 1);
	if (!m) {
		free(data);
		return ENOMEM;
	}
	memcpy(m, data, got);
	m[got] = 0;
	free(data);
	err = manifest_parse(m, info);
	free(m);
	if (!err && strcmp(info->name, name))
		err = EINVAL; /* a manifest copied from elsewhere */
	if (err == EINVAL)
		log_warn("backup %s: its manifest %s is not one", name, key);
	return err;
}

/* ---- listing -------------------------------------------------------- */

struct seen {
	char name[BACKUP_NAME];
	int done;
	int64_t mtime; /* newest of its objects */
};

struct scan {
	struct seen *v;
	size_t n, cap;
};

static int scan_one(void *arg, const char *key, uint64_t size, int64_t mtime)
{
	struct scan *sc = arg;
	(void)size;
	const char *p = key + strlen(BACKUP_PREFIX);
	const char *slash = strchr(p, '/');
	if (strncmp(key, BACKUP_PREFIX, strlen(BACKUP_PREFIX)) || !slash ||
	    (size_t)(slash - p) >= BACKUP_NAME)
		return 0; /* not ours */
	size_t len = (size_t)(slash - p);
	struct seen *e = NULL;
	/* a listing gives a backup's objects together, mostly */
	for (size_t i = sc->n; i-- > 0;)
		if (strlen(sc->v[i].name) == len &&
		    memcmp(sc->v[i].name, p, len) == 0) {
			e = &sc->v[i];
			break;
		}
	if (!e) {
		if (sc->n == sc->cap) {
			size_t cap = sc->cap ? sc->cap * 2 : 16;
			struct seen *v = realloc(sc->v, cap * sizeof *v);
			if (!v)
				return ENOMEM;
			sc->v = v;
			sc->cap = cap;
		}
		e = &sc->v[sc->n++];
		memset(e, 0, sizeof *e);
		memcpy(e->name, p, len);
	}
	if (strcmp(slash + 1, "done") == 0)
		e->done = 1;
	if (mtime > e->mtime)
		e->mtime = mtime;
	return 0;
}

static int seen_cmp(const void *a, const void *b)
{
	return strcmp(((const struct seen *)a)->name,
		      ((const struct seen *)b)->name);
}

/* Every backup in s, complete or not, oldest first. */
static int scan(struct objstore *s, struct scan *sc)
{
	memset(sc, 0, sizeof *sc);
	int err = objstore_list(s, BACKUP_PREFIX, scan_one, sc);
	if (err) {
		free(sc->v);
		memset(sc, 0, sizeof *sc); /* the callers free it again */
		return err;
	}
	if (sc->n)
		qsort(sc->v, sc->n, sizeof *sc->v, seen_cmp);
	return 0;
}

int backup_list(struct objstore *s,
		int (*fn)(void *arg, const struct backup_info *b), void *arg,
		size_t *n)
{
	struct scan sc;
	size_t count = 0;
	int err = scan(s, &sc);
	for (size_t i = 0; !err && i < sc.n; i++) {
		struct backup_info b;
		if (!sc.v[i].done)
			continue;
		int e = backup_stat(s, sc.v[i].name, &b);
		if (e == ENOENT || e == EINVAL)
			continue; /* deleted meanwhile, or not ours */
		if (e) {
			err = e;
			break;
		}
		count++;
		if (fn)
			err = fn(arg, &b);
	}
	free(sc.v);
	if (n)
		*n = count;
	return err;
}

int backup_names(struct objstore *s, int (*fn)(void *arg, const char *name),
		 void *arg, size_t *n)
{
	struct scan sc;
	size_t count = 0;
	int err = scan(s, &sc);
	for (size_t i = 0; !err && i < sc.n; i++)
		if (sc.v[i].done) {
			count++;
			if (fn)
				err = fn(arg, sc.v[i].name);
		}
	free(sc.v);
	if (n)
		*n = count;
	return err;
}

static int keep_name(void *arg, const char *name)
{
	snprintf(arg, BACKUP_NAME, "%s", name);
	return 0;
}

int backup_newest(struct objstore *s, char name[BACKUP_NAME])
{
	size_t n = 0;
	int err = backup_names(s, keep_name, name, &n);
	return err ? err : n ? 0 : ENOENT;
}

static int keep_last(void *arg, const struct backup_info *b)
{
	*(struct backup_info *)arg = *b;
	return 0;
}

int backup_latest(struct objstore *s, struct backup_info *info)
{
	size_t n = 0;
	int err = backup_list(s, keep_last, info, &n);
	return err ? err : n ? 0 : ENOENT;
}

/* Keys of a listing, collected: a store is not deleted from while it is
 * being listed. */
struct keys {
	char (*v)[128];
	size_t n, cap;
};

static int collect(void *arg, const char *k, uint64_t size, int64_t mtime)
{
	struct keys *ks = arg;
	(void)size;
	(void)mtime;
	if (strlen(k) >= sizeof ks->v[0])
		return 0;
	if (ks->n == ks->cap) {
		size_t cap = ks->cap ? ks->cap * 2 : 64;
		char(*v)[128] = realloc(ks->v, cap * sizeof *v);
		if (!v)
			return ENOMEM;
		ks->v = v;
		ks->cap = cap;
	}
	snprintf(ks->v[ks->n++], sizeof ks->v[0], "%s", k);
	return 0;
}

/* Delete every object of backup name (the manifest first: a reader never
 * meets a manifest whose parts are gone); the parts as listed, since a
 * backup cut short has fewer than a manifest would say. */
static int delete_backup(struct objstore *s, const char *name)
{
	char key[128], prefix[128];
	struct keys ks = {0};
	done_key(name, key, sizeof key);
	int err = objstore_del(s, key);
	if (err)
		return err;
	snprintf(prefix, sizeof prefix, BACKUP_PREFIX "%s/", name);
	err = objstore_list(s, prefix, collect, &ks);
	for (size_t i = 0; !err && i < ks.n; i++)
		err = objstore_del(s, ks.v[i]);
	free(ks.v);
	return err;
}

int backup_prune(struct objstore *s, unsigned keep, size_t *deleted)
{
	struct scan sc;
	size_t done = 0, gone = 0;
	int err = scan(s, &sc);
	if (err)
		return err;
	for (size_t i = 0; i < sc.n; i++)
		done += sc.v[i].done;
	int64_t now = time(NULL);
	for (size_t i = 0; !err && i < sc.n; i++) {
		struct seen *e = &sc.v[i];
		int drop;
		if (e->done) {
			drop = done > keep; /* oldest first: the excess goes */
			if (drop)
				done--;
		} else {
			/* cut short; one being written now is younger */
			drop = e->mtime && now - e->mtime > DAY;
		}
		if (drop && !(err = delete_backup(s, e->name)))
			gone++;
	}
	free(sc.v);
	if (deleted)
		*deleted = gone;
	return err;
}

/* ---- reading -------------------------------------------------------- */

struct backup_reader {
	struct objstore *s;
	struct backup_info info;
	uint32_t next; /* part to fetch */
	char *buf;
	size_t len, off;
	uint64_t read; /* bytes of parts fetched */
};

int backup_open(struct objstore *s, const struct backup_info *info,
		struct backup_reader **out)
{
	struct backup_reader *r = calloc(1, sizeof *r);
	if (!r)
		return ENOMEM;
	r->s = s;
	r->info = *info;
	*out = r;
	return 0;
}

ssize_t backup_read(void *arg, void *p, size_t cap)
{
	struct backup_reader *r = arg;
	while (r->off == r->len) {
		if (r->next == r->info.parts)
			return r->read == r->info.bytes ? 0 : -EIO;
		char key[128];
		void *data = NULL;
		size_t got = 0;
		part_key(r->info.name, r->next, key, sizeof key);
		int err = objstore_get(r->s, key, 0, 0, &data, &got);
		if (err) { /* shown on a tool's stderr: its error is EIO */
			log_msg(LOG_ERR | LOG_SHOW, "backup %s: part %s: %s",
				r->info.name, key, gr_strerror(err));
			return err == ENOENT ? -EIO : err > 0 ? -err : -EIO;
		}
		free(r->buf);
		r->buf = data;
		r->len = got;
		r->off = 0;
		r->read += got;
		r->next++;
		if (r->read > r->info.bytes) {
			log_err("backup %s: its parts hold more than the "
				"%" PRIu64 " bytes its manifest says",
				r->info.name, r->info.bytes);
			return -EIO;
		}
	}
	size_t k = r->len - r->off;
	if (k > cap)
		k = cap;
	memcpy(p, r->buf + r->off, k);
	r->off += k;
	return (ssize_t)k;
}

void backup_close(struct backup_reader *r)
{
	if (!r)
		return;
	free(r->buf);
	free(r);
}
