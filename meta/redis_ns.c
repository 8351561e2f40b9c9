/*
 * redis_ns.c - the namespace in the Redis engine: names, attributes, lookup,
 * create, link, unlink, rmdir, rename, symlinks, readdir (plus: attributes,
 * chunk 0 and whether it has xattrs, of every entry in few round trips)
 * and xattrs. Each change is one Lua script (meta/lua/), so it is atomic
 * and one round trip; unlink and rename also hand out the parents'
 * attributes as they left them.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/xattr.h>

#include "meta/meta_quota.h"
#include "meta/meta_trash.h"
#include "meta/redis_int.h"
#include "lib/log.h"

#define INO_BATCH   100	 /* inode numbers taken from nextinode at once */
#define DENT_MAX    9	 /* directory entry value: type, ino (1-8 bytes) */
#define SCAN_COUNT  1000 /* HSCAN page of a large directory */
#define PIPE_DEPTH  16	 /* commands in flight per round trip */
#define HMGET_DEPTH 256	 /* inode hashes read per trip in readdirplus */
/* packed times keep 40 bits of seconds (+-17000 years) */
#define TIME_MAX ((int64_t)1 << 39)

/* ---- namespace ------------------------------------------------------- */

static int name_check(const char *name)
{
	size_t n;
	if (!name)
		return EINVAL;
	n = strnlen(name, META_NAME_MAX + 1);
	if (n == 0)
		return ENOENT;
	if (n > META_NAME_MAX)
		return ENAMETOOLONG;
	if (memchr(name, '/', n))
		return EINVAL;
	return 0;
}

static int is_dot(const char *name)
{
	return !strcmp(name, ".") || !strcmp(name, "..");
}

int meta_getattr(struct meta *m, uint64_t ino, struct meta_attr *a)
{
	return meta_getattr_trash(m, ino, a, NULL);
}

int meta_getattr_trash(struct meta *m, uint64_t ino, struct meta_attr *a,
		       uint64_t *trash_dir)
{
	struct cmd c;
	redisReply *r;
	const redisReply *rec, *par = NULL;
	int err;

	/* the record, and with trash_dir the parent field (SCHEMA.md "Inode
	 * record"): -hour directory while in the trash */
	redis_cmd_init(&c, trash_dir ? "HMGET" : "HGET");
	redis_cmd_inode(&c, ino, 0);
	if (trash_dir) {
		*trash_dir = 0;
		redis_cmd_u64(&c, ino % INO_PER_HASH + 2 * INO_PER_HASH);
	}
	err = redis_run(m, RUN_RETRY, &c, &r);
	if (err)
		return err;
	rec = r;
	if (trash_dir) {
		if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
			freeReplyObject(r);
			return META_EPROTO;
		}
		rec = r->element[0];
		par = r->element[1];
	}
	err = rec->type == REDIS_REPLY_NIL ? ENOENT : redis_reply_attr(rec, a);
	if (!err && par && par->type == REDIS_REPLY_STRING &&
	    par->str[0] == '-')
		*trash_dir = strtoull(par->str + 1, NULL, 10);
	freeReplyObject(r);
	return err;
}

static int lookup(struct meta *m, uint64_t parent, const char *name,
		  uint64_t *ino, struct meta_attr *a, struct meta_slice **s,
		  size_t *n);

int meta_lookup(struct meta *m, uint64_t parent, const char *name,
		uint64_t *ino, struct meta_attr *a)
{
	return lookup(m, parent, name, ino, a, NULL, NULL);
}

int meta_lookup_chunk0(struct meta *m, uint64_t parent, const char *name,
		       uint64_t *ino, struct meta_attr *a,
		       struct meta_slice **s, size_t *n)
{
	*s = NULL;
	*n = 0;
	return lookup(m, parent, name, ino, a, s, n);
}

/* s NULL: attributes only; else also chunk 0's slices. */
static int lookup(struct meta *m, uint64_t parent, const char *name,
		  uint64_t *ino, struct meta_attr *a, struct meta_slice **s,
		  size_t *n)
{
	struct meta_attr pa;
	struct cmd c;
	redisReply *r;
	int err = name_check(name);

	if (err)
		return err;
	if (is_dot(name)) {
		err = meta_getattr(m, parent, &pa);
		if (err)
			return err;
		if (pa.type != META_DIR)
			return ENOTDIR;
		if (name[1] == '.')
			parent = pa.parent;
		if (ino)
			*ino = parent;
		if (name[1] == '.')
			return meta_getattr(m, parent, a);
		if (a)
			*a = pa;
		return 0;
	}
	redis_cmd_script(m, &c, SC_LOOKUP);
	redis_cmd_u64(&c, parent);
	redis_cmd_str(&c, name);
	redis_cmd_str(&c, s ? "1" : "0");
	err = redis_run_script(m, RUN_RETRY, &c, &r);
	if (err)
		return err;
	if (r->elements < 3 || r->element[1]->type != REDIS_REPLY_INTEGER)
		err = META_EPROTO;
	else {
		if (ino)
			*ino = (uint64_t)r->element[1]->integer;
		err = redis_reply_attr(r->element[2], a);
		if (!err && s && (size_t)r->element[2]->len > ATTR_LEN)
			err = redis_recs_unpack(
			    r->element[2]->str + ATTR_LEN,
			    (size_t)r->element[2]->len - ATTR_LEN, s, n);
	}
	freeReplyObject(r);
	return err;
}

static int64_t clamp_time(int64_t t)
{
	return t >= TIME_MAX ? TIME_MAX - 1 : t < -TIME_MAX ? -TIME_MAX : t;
}

int meta_setattr(struct meta *m, uint64_t ino, int set,
		 const struct meta_attr *in, struct meta_attr *out)
{
	struct cmd c;

	if (m->opts.read_only)
		return EROFS;
	if (((set & META_SET_ATIME) && in->atimens >= 1000000000u) ||
	    ((set & META_SET_MTIME) && in->mtimens >= 1000000000u))
		return EINVAL;
	redis_cmd_script(m, &c, SC_SETATTR);
	redis_cmd_u64(&c, ino);
	redis_cmd_i64(&c, set);
	redis_cmd_u64(&c, in->mode & 07777);
	redis_cmd_u64(&c, in->uid);
	redis_cmd_u64(&c, in->gid);
	redis_cmd_i64(&c, clamp_time(in->atime));
	redis_cmd_u64(&c, in->atimens);
	redis_cmd_i64(&c, clamp_time(in->mtime));
	redis_cmd_u64(&c, in->mtimens);
	return redis_run_script_attr(m, &c, out);
}

/* Give back an inode number that ended up unused, if it is the last one
 * handed out (a failed create must not burn numbers in a loop). */
static void ino_untake(struct meta *m, uint64_t ino)
{
	pthread_mutex_lock(&m->ids_lock);
	if (ino + 1 == m->ino_next)
		m->ino_next = ino;
	pthread_mutex_unlock(&m->ids_lock);
}

/* A name a change is about to create: EROFS on a read-only handle, the
 * name's own errors, EEXIST for "." and "..". */
int redis_new_name_check(struct meta *m, const char *name)
{
	int err;

	if (m->opts.read_only)
		return EROFS;
	err = name_check(name);
	if (err)
		return err;
	if (!strcmp(name, META_VERSIONS))
		return EINVAL; /* reserved: DIR/.versions */
	return is_dot(name) ? EEXIST : 0;
}

static int mknod_open(struct meta *m, uint64_t parent, const char *name,
		      uint8_t type, uint16_t mode, uint32_t uid, uint32_t gid,
		      uint32_t rdev, const char *symlink, int open,
		      uint64_t *ino, struct meta_attr *a, struct meta_attr *pa);

int meta_mknod(struct meta *m, uint64_t parent, const char *name, uint8_t type,
	       uint16_t mode, uint32_t uid, uint32_t gid, uint32_t rdev,
	       const char *symlink, uint64_t *ino, struct meta_attr *a)
{
	return mknod_open(m, parent, name, type, mode, uid, gid, rdev, symlink,
			  0, ino, a, NULL);
}

int meta_create(struct meta *m, uint64_t parent, const char *name,
		uint16_t mode, uint32_t uid, uint32_t gid, uint64_t *ino,
		struct meta_attr *a, struct meta_attr *pa)
{
	return mknod_open(m, parent, name, META_FILE, mode, uid, gid, 0, NULL,
			  1, ino, a, pa);
}

static int mknod_open(struct meta *m, uint64_t parent, const char *name,
		      uint8_t type, uint16_t mode, uint32_t uid, uint32_t gid,
		      uint32_t rdev, const char *symlink, int open,
		      uint64_t *ino, struct meta_attr *a, struct meta_attr *pa)
{
	struct cmd c;
	uint64_t id;
	int err;

	err = redis_new_name_check(m, name);
	if (err)
		return err;
	if (type < META_FILE || type > META_SOCK)
		return EINVAL;
	if (type == META_SYMLINK) {
		size_t n = symlink ? strnlen(symlink, PATH_MAX) : 0;
		if (n == 0)
			return ENOENT;
		if (n >= PATH_MAX)
			return ENAMETOOLONG;
	}
	err = redis_id_take(m, "nextinode", INO_BATCH, &m->ino_next,
			    &m->ino_end, &id);
	if (err)
		return err;
	redis_cmd_script(m, &c, SC_MKNOD);
	redis_cmd_u64(&c, parent);
	redis_cmd_str(&c, name);
	redis_cmd_u64(&c, id);
	redis_cmd_u64(&c, type);
	redis_cmd_u64(&c, mode & 07777);
	redis_cmd_u64(&c, uid);
	redis_cmd_u64(&c, gid);
	redis_cmd_u64(&c, rdev);
	redis_cmd_str(&c, type == META_SYMLINK ? symlink : "");
	redis_cmd_u64(&c, open ? atomic_load(&m->sid) : 0);
	err = redis_run_script_attrs(m, &c, a, pa);
	if (err && err != EIO) /* EIO: it may have been created */
		ino_untake(m, id);
	if (!err && ino)
		*ino = id;
	return err;
}

/* Namespace scripts whose arguments are (parent, name). */
static int run_entry_script(struct meta *m, enum script s, uint64_t parent,
			    const char *name)
{
	struct cmd c;

	redis_cmd_script(m, &c, s);
	redis_cmd_u64(&c, parent);
	redis_cmd_str(&c, name);
	return redis_run_script_void(m, &c);
}

/* A script answering {0, inode moved into the trash, parent's attributes
 * [, newparent's, dirs]}: into *out (may be NULL). Never retried. */
static int run_trashing_script(struct meta *m, const struct cmd *c,
			       struct meta_ns_after *out)
{
	redisReply *r;
	int err = redis_run_script(m, 0, c, &r);

	if (err)
		return err;
	/* the change is made: attributes that do not parse are only not
	 * handed out */
	if (out) {
		out->trashed =
		    r->elements > 1 ? redis_reply_u64(r->element[1]) : 0;
		out->have = r->elements > 2 &&
			    redis_reply_attr(r->element[2], &out->pa) == 0;
		if (out->have && r->elements > 4) {
			out->have =
			    redis_reply_attr(r->element[3], &out->npa) == 0;
			out->dirs = redis_reply_u64(r->element[4]) != 0;
		}
	}
	freeReplyObject(r);
	return 0;
}

int meta_unlink(struct meta *m, uint64_t parent, const char *name)
{
	return meta_unlink_after(m, parent, name, NULL);
}

int meta_unlink_trashed(struct meta *m, uint64_t parent, const char *name,
			uint64_t *trashed)
{
	struct meta_ns_after o;
	int err = meta_unlink_after(m, parent, name, &o);

	if (trashed)
		*trashed = err ? 0 : o.trashed;
	return err;
}

int meta_unlink_after(struct meta *m, uint64_t parent, const char *name,
		      struct meta_ns_after *out)
{
	struct cmd c;
	int err;

	if (out)
		memset(out, 0, sizeof(*out));
	if (m->opts.read_only)
		return EROFS;
	err = name_check(name);
	if (err)
		return err;
	if (is_dot(name))
		return EISDIR;
	redis_cmd_script(m, &c, SC_UNLINK);
	redis_cmd_u64(&c, parent);
	redis_cmd_str(&c, name);
	return run_trashing_script(m, &c, out);
}

int meta_rmdir(struct meta *m, uint64_t parent, const char *name)
{
	int err;

	if (m->opts.read_only)
		return EROFS;
	err = name_check(name);
	if (err)
		return err;
	if (!strcmp(name, "."))
		return EINVAL;
	if (!strcmp(name, ".."))
		return ENOTEMPTY;
	return run_entry_script(m, SC_RMDIR, parent, name);
}

int meta_rename(struct meta *m, uint64_t parent, const char *name,
		uint64_t newparent, const char *newname, unsigned flags)
{
	return meta_rename_after(m, parent, name, newparent, newname, flags,
				 NULL);
}

int meta_rename_trashed(struct meta *m, uint64_t parent, const char *name,
			uint64_t newparent, const char *newname, unsigned flags,
			uint64_t *trashed)
{
	struct meta_ns_after o;
	int err =
	    meta_rename_after(m, parent, name, newparent, newname, flags, &o);

	if (trashed)
		*trashed = err ? 0 : o.trashed;
	return err;
}

int meta_rename_after(struct meta *m, uint64_t parent, const char *name,
		      uint64_t newparent, const char *newname, unsigned flags,
		      struct meta_ns_after *out)
{
	struct cmd c;
	int err;

	if (out)
		memset(out, 0, sizeof(*out));
	if (m->opts.read_only)
		return EROFS;
	if (flags & ~(unsigned)(RENAME_NOREPLACE | RENAME_EXCHANGE) ||
	    flags == (RENAME_NOREPLACE | RENAME_EXCHANGE))
		return EINVAL;
	err = name_check(name);
	if (!err)
		err = name_check(newname);
	if (err)
		return err;
	if (is_dot(name) || is_dot(newname))
		return EBUSY;
	if (!strcmp(newname, META_VERSIONS))
		return EINVAL;
	redis_cmd_script(m, &c, SC_RENAME);
	redis_cmd_u64(&c, parent);
	redis_cmd_str(&c, name);
	redis_cmd_u64(&c, newparent);
	redis_cmd_str(&c, newname);
	redis_cmd_u64(&c, flags == RENAME_NOREPLACE ? 1 : flags ? 2 : 0);
	return run_trashing_script(m, &c, out);
}

/* The script compares the chains of newparent and hint (meta_quota.h):
 * a hard link never joins an inode to quotas that do not count it. */
int meta_link_q(struct meta *m, uint64_t hint, uint64_t ino, uint64_t newparent,
		const char *newname, struct meta_attr *a)
{
	struct cmd c;
	int err;

	err = redis_new_name_check(m, newname);
	if (err)
		return err;
	redis_cmd_script(m, &c, SC_LINK);
	redis_cmd_u64(&c, ino);
	redis_cmd_u64(&c, newparent);
	redis_cmd_str(&c, newname);
	redis_cmd_u64(&c, hint);
	return redis_run_script_attr(m, &c, a);
}

int meta_link(struct meta *m, uint64_t ino, uint64_t newparent,
	      const char *newname, struct meta_attr *a)
{
	return meta_link_q(m, 0, ino, newparent, newname, a);
}

int meta_readlink(struct meta *m, uint64_t ino, char **target)
{
	struct cmd c1, c2;
	struct req reqs[2];
	redisReply *r[2];
	int err;

	*target = NULL;
	redis_cmd_init(&c1, "GET");
	redis_cmd_key(&c1, "s", ino);
	redis_cmd_init(&c2, "HEXISTS");
	redis_cmd_inode(&c2, ino, 0);
	reqs[0] = (struct req){c1.argc, c1.argv, c1.len, -1};
	reqs[1] = (struct req){c2.argc, c2.argv, c2.len, -1};
	err = redis_run_reqs(m, RUN_RETRY, reqs, 2, r);
	if (err)
		return err;
	if (r[0]->type == REDIS_REPLY_STRING) {
		*target = strndup(r[0]->str, (size_t)r[0]->len);
		if (!*target)
			err = ENOMEM;
	} else {
		err = r[1]->type == REDIS_REPLY_INTEGER && r[1]->integer
			  ? EINVAL
			  : ENOENT;
	}
	freeReplyObject(r[0]);
	freeReplyObject(r[1]);
	return err;
}

/* ---- readdir --------------------------------------------------------- */

struct dirlist {
	struct meta_dirent *e;
	size_t n, cap;
};

/* Append the entries of one HSCAN page (name, packed value, ...). */
static int dirlist_add(struct dirlist *l, const redisReply *page)
{
	for (size_t i = 0; i + 1 < page->elements; i += 2) {
		const redisReply *k = page->element[i],
				 *v = page->element[i + 1];
		const uint8_t *p;
		struct meta_dirent *e;

		if (k->type != REDIS_REPLY_STRING ||
		    v->type != REDIS_REPLY_STRING || v->len < 2 ||
		    v->len > DENT_MAX)
			return META_EPROTO;
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
		e->name = strndup(k->str, (size_t)k->len);
		if (!e->name)
			return ENOMEM;
		p = (const uint8_t *)v->str;
		e->type = p[0];
		for (size_t b = (size_t)v->len - 1; b >= 1; b--)
			e->ino = e->ino << 8 | p[b];
		l->n++;
	}
	return 0;
}

static int dirent_cmp(const void *a, const void *b)
{
	return strcmp(((const struct meta_dirent *)a)->name,
		      ((const struct meta_dirent *)b)->name);
}

/* HSCAN may return an entry twice when the hash is resized meanwhile. */
static void dirlist_dedupe(struct dirlist *l)
{
	size_t o = 0;
	if (l->n < 2)
		return;
	qsort(l->e, l->n, sizeof *l->e, dirent_cmp);
	for (size_t i = 0; i < l->n; i++) {
		if (o && !strcmp(l->e[o - 1].name, l->e[i].name)) {
			free(l->e[i].name);
			continue;
		}
		l->e[o++] = l->e[i];
	}
	l->n = o;
}

/* HSCAN reply: {cursor, {name, value, ...}}; *done when cursor is 0. */
static int scan_page(struct dirlist *l, const redisReply *r, char *cursor,
		     size_t cap, int *done)
{
	if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
	    r->element[0]->type != REDIS_REPLY_STRING ||
	    r->element[1]->type != REDIS_REPLY_ARRAY ||
	    (size_t)r->element[0]->len >= cap)
		return META_EPROTO;
	memcpy(cursor, r->element[0]->str, (size_t)r->element[0]->len + 1);
	*done = !strcmp(cursor, "0");
	return dirlist_add(l, r->element[1]);
}

struct ino_ord {
	uint64_t ino;
	size_t i; /* index in the dirlist */
};

static int ino_ord_cmp(const void *a, const void *b)
{
	const struct ino_ord *x = a, *y = b;
	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

/* Files whose tail field came back empty: their chunk 0 may be in
 * c<ino>_0 (too long for the field), asked for with MGET, PIPE_DEPTH
 * batches of up to 512 keys per trip. */
static int dirlist_chunk0(struct meta *m, struct dirlist *l, const size_t *idx,
			  size_t cnt)
{
	enum { BATCH = 512 };
	char(*keys)[32] = malloc((size_t)BATCH * PIPE_DEPTH * sizeof *keys);
	const char **argv = malloc((BATCH + 1) * PIPE_DEPTH * sizeof *argv);
	size_t *lens = malloc((BATCH + 1) * PIPE_DEPTH * sizeof *lens);
	int err = 0;

	if (!keys || !argv || !lens)
		err = ENOMEM;
	for (size_t base = 0; !err && base < cnt;
	     base += (size_t)BATCH * PIPE_DEPTH) {
		struct req reqs[PIPE_DEPTH];
		redisReply *r[PIPE_DEPTH];
		size_t a = 0, j = base;
		int nreq = 0;

		while (j < cnt && nreq < PIPE_DEPTH) {
			size_t k = 0, a0 = a;
			argv[a] = "MGET";
			lens[a++] = 4;
			for (; j < cnt && k < BATCH; j++, k++) {
				size_t q = (size_t)nreq * BATCH + k;
				int len = snprintf(keys[q], sizeof keys[q],
						   "c%" PRIu64 "_0",
						   l->e[idx[j]].ino);
				argv[a] = keys[q];
				lens[a++] = (size_t)len;
			}
			reqs[nreq++] = (struct req){(int)(k + 1), &argv[a0],
						    &lens[a0], -1};
		}
		err = redis_run_reqs(m, RUN_RETRY, reqs, nreq, r);
		if (err)
			break;
		j = base;
		for (int q = 0; q < nreq; q++) {
			size_t k = (size_t)reqs[q].argc - 1;
			if (!err && (r[q]->type != REDIS_REPLY_ARRAY ||
				     r[q]->elements != k))
				err = META_EPROTO;
			for (size_t e = 0; !err && e < k; e++) {
				const redisReply *v = r[q]->element[e];
				struct meta_dirent *d = &l->e[idx[j + e]];
				if (v->type == REDIS_REPLY_STRING)
					err = redis_recs_unpack(
					    v->str, (size_t)v->len, &d->chunk0,
					    &d->nchunk0);
			}
			j += k;
			freeReplyObject(r[q]);
		}
	}
	free(keys);
	free(argv);
	free(lens);
	return err;
}

/*
 * Fill the attributes and chunk 0 of the entries: the entries sorted by
 * inode so that one HMGET reads every entry of one inode hash (files made
 * together have neighbouring numbers), HMGET_DEPTH of them per round trip;
 * then MGET for the files whose chunk 0 is in c<ino>_0. Entries whose
 * inode vanished meanwhile are left out.
 */
static int dirlist_attrs(struct meta *m, struct dirlist *l)
{
	enum { PER = 2 * INO_PER_HASH }; /* fields per HMGET, at most */
	struct ino_ord *ord = malloc((l->n ? l->n : 1) * sizeof *ord);
	char(*keys)[24] = malloc(HMGET_DEPTH * sizeof *keys);
	char(*flds)[4] = malloc((size_t)HMGET_DEPTH * PER * sizeof *flds);
	const char **argv =
	    malloc((size_t)HMGET_DEPTH * (PER + 2) * sizeof *argv);
	size_t *lens = malloc((size_t)HMGET_DEPTH * (PER + 2) * sizeof *lens);
	size_t *more = malloc((l->n ? l->n : 1) * sizeof *more);
	struct req *reqs = malloc(HMGET_DEPTH * sizeof *reqs);
	redisReply **r = malloc(HMGET_DEPTH * sizeof *r);
	size_t *first = malloc(HMGET_DEPTH * sizeof *first);
	size_t p = 0, nmore = 0, o = 0;
	int err = 0;

	if (!ord || !keys || !flds || !argv || !lens || !more || !reqs || !r ||
	    !first) {
		err = ENOMEM;
		goto free_bufs;
	}
	for (size_t i = 0; i < l->n; i++)
		ord[i] = (struct ino_ord){l->e[i].ino, i};
	qsort(ord, l->n, sizeof *ord, ino_ord_cmp);
	while (p < l->n && !err) {
		size_t a = 0;
		int nreq = 0;

		/* one HMGET per hash; a hash's entries beyond PER / 2 (hard
		 * links of one file) go to the next HMGET */
		while (p < l->n && nreq < HMGET_DEPTH) {
			uint64_t h = ord[p].ino / INO_PER_HASH;
			size_t a0 = a, k = 0;
			argv[a] = "HMGET";
			lens[a++] = 5;
			argv[a] = keys[nreq];
			lens[a++] = (size_t)snprintf(keys[nreq], sizeof keys[0],
						     "n%" PRIu64, h);
			first[nreq] = p;
			for (; p < l->n && k < PER &&
			       ord[p].ino / INO_PER_HASH == h;
			     p++, k += 2) {
				char *f = flds[(size_t)nreq * PER + k];
				unsigned x =
				    (unsigned)(ord[p].ino % INO_PER_HASH);
				argv[a] = f;
				lens[a++] = (size_t)snprintf(f, 4, "%u", x);
				f = flds[(size_t)nreq * PER + k + 1];
				argv[a] = f;
				lens[a++] = (size_t)snprintf(f, 4, "%u",
							     x + INO_PER_HASH);
			}
			reqs[nreq++] = (struct req){(int)(a - a0), &argv[a0],
						    &lens[a0], -1};
		}
		err = redis_run_reqs(m, RUN_RETRY, reqs, nreq, r);
		if (err)
			break;
		for (int q = 0; q < nreq; q++) {
			size_t k = (size_t)reqs[q].argc - 2;
			if (!err && (r[q]->type != REDIS_REPLY_ARRAY ||
				     r[q]->elements != k))
				err = META_EPROTO;
			for (size_t j = 0; !err && j < k; j += 2) {
				size_t i = ord[first[q] + j / 2].i;
				struct meta_dirent *e = &l->e[i];
				const redisReply *v = r[q]->element[j],
						 *t = r[q]->element[j + 1];
				if (v->type == REDIS_REPLY_NIL) {
					e->ino = 0; /* unlinked meanwhile */
					continue;
				}
				err = redis_reply_attr(v, &e->attr);
				if (err || e->attr.type != META_FILE)
					continue;
				if (t->type == REDIS_REPLY_STRING)
					err = redis_recs_unpack(
					    t->str, (size_t)t->len, &e->chunk0,
					    &e->nchunk0);
				else if (e->attr.length)
					more[nmore++] = i;
			}
			freeReplyObject(r[q]);
		}
	}
	if (!err && nmore)
		err = dirlist_chunk0(m, l, more, nmore);
	/* drop the vanished */
	for (size_t i = 0; !err && i < l->n; i++) {
		if (l->e[i].ino) {
			l->e[o++] = l->e[i];
		} else {
			free(l->e[i].name);
			free(l->e[i].chunk0);
		}
	}
	if (!err)
		l->n = o;
free_bufs:
	free(ord);
	free(keys);
	free(flds);
	free(argv);
	free(lens);
	free(more);
	free(reqs);
	free(r);
	free(first);
	return err;
}

/* Which entries have no xattr (noxattr): EXISTS x<ino> of each, pipelined,
 * XATTR_DEPTH a round trip. An `ls -l` asks the kernel for
 * security.selinux and system.posix_acl_access of every entry, and the
 * kernel asks the client: known, they cost no round trip each. */
static int dirlist_xattrs(struct meta *m, struct dirlist *l)
{
	enum { XATTR_DEPTH = 4096 };
	char(*keys)[24] = malloc(XATTR_DEPTH * sizeof *keys);
	const char **argv = malloc(2 * XATTR_DEPTH * sizeof *argv);
	size_t *lens = malloc(2 * XATTR_DEPTH * sizeof *lens);
	struct req *reqs = malloc(XATTR_DEPTH * sizeof *reqs);
	redisReply **r = malloc(XATTR_DEPTH * sizeof *r);
	int err = 0;

	if (!keys || !argv || !lens || !reqs || !r)
		err = ENOMEM;
	for (size_t base = 0; !err && base < l->n; base += XATTR_DEPTH) {
		size_t k =
		    l->n - base < XATTR_DEPTH ? l->n - base : XATTR_DEPTH;
		for (size_t j = 0; j < k; j++) {
			argv[2 * j] = "EXISTS";
			lens[2 * j] = 6;
			argv[2 * j + 1] = keys[j];
			lens[2 * j + 1] =
			    (size_t)snprintf(keys[j], sizeof keys[j],
					     "x%" PRIu64, l->e[base + j].ino);
			reqs[j] =
			    (struct req){2, &argv[2 * j], &lens[2 * j], -1};
		}
		err = redis_run_reqs(m, RUN_RETRY, reqs, (int)k, r);
		if (err)
			break;
		for (size_t j = 0; j < k; j++) {
			l->e[base + j].noxattr =
			    r[j]->type == REDIS_REPLY_INTEGER &&
			    r[j]->integer == 0;
			freeReplyObject(r[j]);
		}
	}
	free(keys);
	free(argv);
	free(lens);
	free(reqs);
	free(r);
	return err;
}

int meta_readdir(struct meta *m, uint64_t ino, int plus,
		 struct meta_dirent **ents, size_t *n)
{
	struct dirlist l = {NULL, 0, 0};
	struct meta_attr a;
	char cursor[32] = "0";
	struct cmd c1, c2;
	struct req reqs[2];
	redisReply *r[2];
	int err, done, pages = 1;

	*ents = NULL;
	*n = 0;
	/* the directory's attributes and the first page in one trip */
	redis_cmd_init(&c1, "HGET");
	redis_cmd_inode(&c1, ino, 0);
	redis_cmd_init(&c2, "HSCAN");
	redis_cmd_key(&c2, "d", ino);
	redis_cmd_str(&c2, "0");
	redis_cmd_str(&c2, "COUNT");
	redis_cmd_u64(&c2, SCAN_COUNT);
	reqs[0] = (struct req){c1.argc, c1.argv, c1.len, -1};
	reqs[1] = (struct req){c2.argc, c2.argv, c2.len, -1};
	err = redis_run_reqs(m, RUN_RETRY, reqs, 2, r);
	if (err)
		return err;
	if (r[0]->type == REDIS_REPLY_NIL)
		err = ENOENT;
	else if (!(err = redis_reply_attr(r[0], &a)) && a.type != META_DIR)
		err = ENOTDIR;
	if (!err)
		err = scan_page(&l, r[1], cursor, sizeof cursor, &done);
	freeReplyObject(r[0]);
	freeReplyObject(r[1]);
	while (!err && !done) {
		redisReply *p;
		redis_cmd_init(&c2, "HSCAN");
		redis_cmd_key(&c2, "d", ino);
		redis_cmd_str(&c2, cursor);
		redis_cmd_str(&c2, "COUNT");
		redis_cmd_u64(&c2, SCAN_COUNT);
		err = redis_run(m, RUN_RETRY, &c2, &p);
		if (err)
			break;
		err = scan_page(&l, p, cursor, sizeof cursor, &done);
		freeReplyObject(p);
		pages++;
	}
	if (!err && pages > 1)
		dirlist_dedupe(&l);
	if (!err && plus)
		err = dirlist_attrs(m, &l);
	if (!err && plus)
		err = dirlist_xattrs(m, &l);
	if (err) {
		meta_dirents_free(l.e, l.n);
		return err;
	}
	*ents = l.e;
	*n = l.n;
	return 0;
}

void meta_dirents_free(struct meta_dirent *ents, size_t n)
{
	if (!ents)
		return;
	for (size_t i = 0; i < n; i++) {
		free(ents[i].name);
		free(ents[i].chunk0);
	}
	free(ents);
}

/* ---- xattrs ---------------------------------------------------------- */

static int xattr_name_check(const char *name)
{
	size_t n = name ? strnlen(name, XATTR_NAME_MAX + 1) : 0;
	if (n == 0 || n > XATTR_NAME_MAX)
		return ERANGE;
	return 0;
}

int meta_setxattr(struct meta *m, uint64_t ino, const char *name,
		  const void *value, size_t size, int flags)
{
	struct cmd c;
	int err;

	if (m->opts.read_only)
		return EROFS;
	err = xattr_name_check(name);
	if (err)
		return err;
	if (size > XATTR_SIZE_MAX)
		return E2BIG;
	if (flags & ~(XATTR_CREATE | XATTR_REPLACE) ||
	    flags == (XATTR_CREATE | XATTR_REPLACE))
		return EINVAL;
	redis_cmd_script(m, &c, SC_SETXATTR);
	redis_cmd_u64(&c, ino);
	redis_cmd_str(&c, name);
	redis_cmd_bin(&c, size ? value : "", size);
	redis_cmd_u64(&c, flags == XATTR_CREATE ? 1 : flags ? 2 : 0);
	return redis_run_script_void(m, &c);
}

int meta_getxattr(struct meta *m, uint64_t ino, const char *name, void **value,
		  size_t *size)
{
	struct cmd c;
	redisReply *r;
	int err;

	*value = NULL;
	*size = 0;
	err = xattr_name_check(name);
	if (err)
		return err;
	redis_cmd_init(&c, "HGET");
	redis_cmd_key(&c, "x", ino);
	redis_cmd_str(&c, name);
	err = redis_run(m, RUN_RETRY, &c, &r);
	if (err)
		return err;
	if (r->type == REDIS_REPLY_NIL)
		err = ENODATA;
	else if (r->type != REDIS_REPLY_STRING)
		err = META_EPROTO;
	else if (!(*value = malloc((size_t)r->len + 1)))
		err = ENOMEM;
	else {
		memcpy(*value, r->str, (size_t)r->len);
		*size = (size_t)r->len;
	}
	freeReplyObject(r);
	return err;
}

int meta_listxattr(struct meta *m, uint64_t ino, char **names, size_t *size)
{
	struct cmd c;
	redisReply *r;
	size_t total = 0, o = 0;
	int err;

	*names = NULL;
	*size = 0;
	redis_cmd_init(&c, "HKEYS");
	redis_cmd_key(&c, "x", ino);
	err = redis_run(m, RUN_RETRY, &c, &r);
	if (err)
		return err;
	if (r->type != REDIS_REPLY_ARRAY) {
		err = META_EPROTO;
		goto free_r;
	}
	for (size_t i = 0; i < r->elements; i++)
		total += (size_t)r->element[i]->len + 1;
	*names = malloc(total + 1);
	if (!*names) {
		err = ENOMEM;
		goto free_r;
	}
	for (size_t i = 0; i < r->elements; i++) {
		memcpy(*names + o, r->element[i]->str,
		       (size_t)r->element[i]->len);
		o += (size_t)r->element[i]->len;
		(*names)[o++] = '\0';
	}
	*size = total;
free_r:
	freeReplyObject(r);
	return err;
}

int meta_removexattr(struct meta *m, uint64_t ino, const char *name)
{
	int err;

	if (m->opts.read_only)
		return EROFS;
	err = xattr_name_check(name);
	if (err)
		return err;
	return run_entry_script(m, SC_REMOVEXATTR, ino, name);
}
