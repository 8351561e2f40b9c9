/*
 * plan_ctl.c - the control calls of the epoch plans (plan.h, the
 * granary.plan* xattrs): names parsed, the paths of an add resolved as the
 * caller reaches them (all or nothing), owners checked against /proc, the
 * figures as JSON. ctl.c hands every name starting "granary.plan" here.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "meta/meta.h"
#include "fs/data/slice.h"
#include "fs/vfs/plan_int.h"
#include "fs/vfs/vfs_int.h"
#include "lib/hash.h"
#include "lib/log.h"

#define XATTR_PLANS "granary.plans"
#define XATTR_PLAN  "granary.plan."

enum plan_op {
	OP_NONE, /* not one of plan's */
	OP_BAD,	 /* plan's, malformed */
	OP_LIST,
	OP_NEW,
	OP_INFO,
	OP_ADD,
	OP_CLEAR,
	OP_OWNER,
	OP_CANCEL,
};

/* name as a call: the plan's *id, and for "owner:PID" *arg the PID */
static enum plan_op parse(const char *name, uint64_t *id, const char **arg)
{
	const char *s = name + strlen(XATTR_PLAN);
	char *e;

	*arg = NULL;
	if (!strcmp(name, XATTR_PLANS))
		return OP_LIST;
	if (strncmp(name, XATTR_PLAN, strlen(XATTR_PLAN)))
		return OP_NONE;
	if (!strcmp(s, "new"))
		return OP_NEW;
	if (*s < '1' || *s > '9')
		return OP_BAD;
	errno = 0;
	*id = strtoull(s, &e, 10);
	if (errno)
		return OP_BAD;
	if (!*e)
		return OP_INFO;
	if (*e++ != '.')
		return OP_BAD;
	if (!strcmp(e, "add"))
		return OP_ADD;
	if (!strncmp(e, "add:", 4)) {
		*arg = e + 4;
		return OP_ADD;
	}
	if (!strcmp(e, "clear"))
		return OP_CLEAR;
	if (!strcmp(e, "cancel"))
		return OP_CANCEL;
	if (!strcmp(e, "owner"))
		return OP_OWNER;
	if (!strncmp(e, "owner:", 6)) {
		*arg = e + 6;
		return OP_OWNER;
	}
	return OP_BAD;
}

static int text_value(const char *text, void **value, size_t *size)
{
	size_t n = strlen(text);

	if (!(*value = malloc(n ? n : 1)))
		return ENOMEM;
	memcpy(*value, text, n);
	*size = n;
	return 0;
}

/* Under lock: plan id as caller c may act on it (its own; root: any). */
static int plan_find(struct plans *p, const struct vfs_caller *c, uint64_t id,
		     struct pc_plan **out)
{
	struct pc_plan *pp = plancore_find(p->core, id);

	if (!pp)
		return ENOENT;
	if (c->uid != 0 && pp->uid != c->uid)
		return EPERM;
	*out = pp;
	return 0;
}

/* ---- make, clear, cancel, own ------------------------------------------ */

static int plan_new(struct plans *p, const struct vfs_caller *c, uint32_t pid,
		    void **value, size_t *size)
{
	struct pc_plan *pp;
	uint64_t start = 0, id = 0;
	char text[32];
	int err;

	if (!p)
		return ENOTSUP; /* no disk cache: nowhere to fetch to */
	/* the caller's process, not its thread (which may end first); one
	 * the client cannot see is not checked */
	if (pid)
		pid = (uint32_t)plan_proc_tgid((int32_t)pid);
	if (pid && plan_proc_stat((int32_t)pid, NULL, &start, NULL))
		pid = 0;
	pthread_mutex_lock(&p->lock);
	err = plancore_new(p->core, mono_ns(), &pp);
	if (!err) {
		pp->uid = c->uid;
		pp->pid = (int32_t)pid;
		pp->pid_start = start;
		id = pp->id;
	}
	pthread_mutex_unlock(&p->lock);
	if (err == ENOSPC)
		log_warn("plan refused to uid %u: the mount holds %d plans "
			 "already",
			 c->uid, PLAN_MAX);
	if (err)
		return err;
	log_info("plan %llu made by uid %u (process %u)",
		 (unsigned long long)id, c->uid, pid);
	snprintf(text, sizeof(text), "%llu", (unsigned long long)id);
	return text_value(text, value, size);
}

static int plan_clear(struct plans *p, const struct vfs_caller *c, uint64_t id,
		      int cancel)
{
	struct pc_plan *pp;
	int err;

	pthread_mutex_lock(&p->lock);
	if (!(err = plan_find(p, c, id, &pp))) {
		if (cancel)
			plancore_end(p->core, pp);
		else
			plancore_clear(p->core, pp, mono_ns());
	}
	pthread_mutex_unlock(&p->lock);
	if (!err)
		log_info("plan %llu %s by uid %u", (unsigned long long)id,
			 cancel ? "cancelled" : "cleared", c->uid);
	return err;
}

/* Does process pid run as uid (its real or effective uid)? */
static int proc_of_uid(int32_t pid, uint32_t uid)
{
	char path[64], line[256];
	unsigned long r, e;
	int yes = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (!(f = fopen(path, "re")))
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Uid: %lu %lu", &r, &e) == 2) {
			yes = r == uid || e == uid;
			break;
		}
	fclose(f);
	return yes;
}

/* The plan lives while process PID (text, len bytes) does: ESRCH when
 * there is none, EPERM when it is another user's (root: any). */
static int plan_owner(struct plans *p, const struct vfs_caller *c, uint64_t id,
		      const char *text, size_t len)
{
	char buf[16], *e;
	uint64_t start = 0;
	struct pc_plan *pp;
	int zombie = 0, err;
	long pid;

	if (!len || len >= sizeof(buf))
		return EINVAL;
	memcpy(buf, text, len);
	buf[len] = '\0';
	errno = 0;
	pid = strtol(buf, &e, 10);
	if (errno || *e || buf[0] < '1' || buf[0] > '9' || pid > INT32_MAX)
		return EINVAL;
	pid = plan_proc_tgid((int32_t)pid); /* a thread's: its process */
	err = plan_proc_stat((int32_t)pid, NULL, &start, &zombie);
	if (err || zombie)
		return ESRCH;
	if (c->uid != 0 && !proc_of_uid((int32_t)pid, c->uid))
		return EPERM;
	pthread_mutex_lock(&p->lock);
	if (!(err = plan_find(p, c, id, &pp))) {
		pp->pid = (int32_t)pid;
		pp->pid_start = start;
	}
	pthread_mutex_unlock(&p->lock);
	if (!err)
		log_info("plan %llu now lives while process %ld does",
			 (unsigned long long)id, pid);
	return err;
}

/* ---- adds -----------------------------------------------------------------
 */

/* The directories an add met, by their path below DIR ("" is DIR). */
struct dent {
	struct hash_node hn;
	uint64_t ino;
	struct meta_attr a;
	size_t len;
	char path[]; /* len bytes, not NUL-ended */
};

struct add {
	struct fs *fs;
	struct caller c;
	struct hash dirs; /* struct dent */
	struct pc_add *v; /* the files resolved */
	size_t *koff;	  /* v[i]'s hashes at keys[koff[i]] */
	size_t n, cap;
	uint64_t *keys;
	size_t nkeys, kcap;
	size_t kfirst; /* the current file's first hash */
	int err;
};

struct dent_key {
	const char *path;
	size_t len;
};

static int dent_match(const struct hash_node *n, const void *key)
{
	const struct dent *d = hash_entry(n, struct dent, hn);
	const struct dent_key *k = key;
	return d->len == k->len && !memcmp(d->path, k->path, k->len);
}

/* The directory at path[0..len) below the add's DIR, as the caller
 * reaches it: search on each directory on the way. */
static int add_dir(struct add *ad, const char *path, size_t len,
		   struct dent **out)
{
	struct dent_key k = {path, len};
	uint64_t h = XXH3_64bits(path, len);
	struct hash_node *hn = hash_find(&ad->dirs, h, dent_match, &k);
	const char *name;
	struct dent *up, *d;
	size_t plen;
	int err;

	if (hn) {
		*out = hash_entry(hn, struct dent, hn);
		return 0;
	}
	/* path is not "" (DIR is always there): its parent first */
	name = memrchr(path, '/', len);
	plen = name ? (size_t)(name - path) : 0;
	name = name ? name + 1 : path;
	if ((err = add_dir(ad, path, plen, &up)))
		return err;
	if (up->a.type != META_DIR)
		return ENOTDIR;
	if (!caller_may(&ad->c, &up->a, 1))
		return EACCES;
	if (!(d = malloc(sizeof(*d) + len)))
		return ENOMEM;
	char nm[META_NAME_MAX + 1];
	size_t nlen = len - (size_t)(name - path);
	if (nlen > META_NAME_MAX) {
		free(d);
		return ENAMETOOLONG;
	}
	memcpy(nm, name, nlen);
	nm[nlen] = '\0';
	if (up->ino == META_ROOT_INO && !strcmp(nm, META_TRASH) &&
	    ad->c.cred.uid != 0)
		err = ENOENT; /* root's alone (ns.c) */
	else
		err = meta_lookup(ad->fs->meta, up->ino, nm, &d->ino, &d->a);
	if (err) {
		free(d);
		return err;
	}
	d->len = len;
	memcpy(d->path, path, len);
	hash_insert(&ad->dirs, &d->hn, h);
	*out = d;
	return 0;
}

static void add_hash(struct fs *fs, const char *key, uint64_t bytes, void *arg)
{
	struct add *ad = arg;
	uint64_t h = plancore_key_hash(key);

	(void)fs;
	(void)bytes;
	if (ad->err || (ad->nkeys > ad->kfirst && ad->keys[ad->nkeys - 1] == h))
		return;
	if (ad->nkeys == ad->kcap) {
		size_t cap = ad->kcap ? 2 * ad->kcap : 256;
		uint64_t *k = realloc(ad->keys, cap * sizeof(*k));
		if (!k) {
			ad->err = ENOMEM;
			return;
		}
		ad->keys = k;
		ad->kcap = cap;
	}
	ad->keys[ad->nkeys++] = h;
}

/* A path is names separated by single '/': none empty, ".", "..". */
static int path_valid(const char *path, size_t len)
{
	const char *s = path, *end = path + len;

	if (!len || len > PATH_MAX)
		return 0;
	while (s <= end) {
		const char *e = memchr(s, '/', (size_t)(end - s));
		size_t n = e ? (size_t)(e - s) : (size_t)(end - s);
		if (!n || (n == 1 && s[0] == '.') ||
		    (n == 2 && s[0] == '.' && s[1] == '.') ||
		    memchr(s, '\0', n))
			return 0;
		s += n + 1;
	}
	return 1;
}

/* Resolve path[0..len) below DIR as a file the caller may read, with the
 * hashes of its objects in chunk 0 (the lookup brings them). */
static int add_path(struct add *ad, const char *path, size_t len)
{
	const char *slash = memrchr(path, '/', len);
	size_t plen = slash ? (size_t)(slash - path) : 0;
	const char *name = slash ? slash + 1 : path;
	size_t nlen = len - (size_t)(name - path);
	struct meta_slice *s = NULL, *vis = NULL;
	size_t n = 0, nvis = 0;
	struct meta_attr a;
	struct dent *d;
	uint64_t ino;
	char nm[META_NAME_MAX + 1];
	int err;

	if (!path_valid(path, len))
		return EINVAL;
	if (nlen > META_NAME_MAX)
		return ENAMETOOLONG;
	if ((err = add_dir(ad, path, plen, &d)))
		return err;
	if (d->a.type != META_DIR)
		return ENOTDIR;
	if (!caller_may(&ad->c, &d->a, 1))
		return EACCES;
	memcpy(nm, name, nlen);
	nm[nlen] = '\0';
	if (d->ino == META_ROOT_INO && !strcmp(nm, META_TRASH) &&
	    ad->c.cred.uid != 0)
		return ENOENT;
	err = meta_lookup_chunk0(ad->fs->meta, d->ino, nm, &ino, &a, &s, &n);
	if (err)
		return err;
	if (a.type == META_DIR)
		err = EISDIR;
	else if (a.type != META_FILE)
		err = EINVAL;
	else if (!caller_may(&ad->c, &a, 4))
		err = EACCES;
	if (!err && ad->n == ad->cap) {
		size_t cap = ad->cap ? 2 * ad->cap : 256;
		struct pc_add *v = realloc(ad->v, cap * sizeof(*v));
		if (v)
			ad->v = v;
		size_t *o = v ? realloc(ad->koff, cap * sizeof(*o)) : NULL;
		if (o)
			ad->koff = o;
		if (!v || !o)
			err = ENOMEM;
		else
			ad->cap = cap;
	}
	if (!err)
		err = slice_resolve(s, n, &vis, &nvis);
	free(s);
	if (err)
		return err;
	ad->kfirst = ad->nkeys;
	chunk_blocks(ad->fs, 0, vis, nvis, a.length, add_hash, ad);
	free(vis);
	if (ad->err)
		return ad->err;
	ad->koff[ad->n] = ad->kfirst;
	ad->v[ad->n++] = (struct pc_add){
	    .ino = ino,
	    .len = a.length,
	    .nkeys = ad->nkeys - ad->kfirst,
	    .listed = a.length <= META_CHUNK_SIZE,
	};
	return 0;
}

static void add_release(struct add *ad)
{
	struct hash_node *h, *next;

	for (h = hash_first(&ad->dirs); h; h = next) {
		next = hash_next(&ad->dirs, h);
		free(hash_entry(h, struct dent, hn));
	}
	hash_release(&ad->dirs);
	caller_release(&ad->c);
	free(ad->v);
	free(ad->koff);
	free(ad->keys);
}

/* Append the files v[0..n) to plan id. */
static int plan_append(struct plans *p, const struct vfs_caller *c, uint64_t id,
		       const struct pc_add *v, size_t n)
{
	struct pc_plan *pp;
	int err;

	pthread_mutex_lock(&p->lock);
	if (!(err = plan_find(p, c, id, &pp)))
		err = plancore_add(p->core, pp, v, n, mono_ns());
	pthread_mutex_unlock(&p->lock);
	if (err == ENOSPC)
		log_warn("plan %llu: an add of %zu files refused: the mount "
			 "plans %u files at most",
			 (unsigned long long)id, n, PLAN_FILES_MAX);
	if (!err)
		plans_pump(p);
	return err;
}

/* The files of paths (one a line, size bytes) below directory ino as the
 * caller reaches them, into ad (all or none): plan id must exist. */
static int add_resolve(struct plans *p, const struct vfs_caller *c, uint64_t id,
		       uint64_t ino, const char *paths, size_t size,
		       struct add *ad)
{
	struct pc_plan *pp;
	struct dent *top;
	int err;

	pthread_mutex_lock(&p->lock);
	err = plan_find(p, c, id, &pp); /* before any work */
	pthread_mutex_unlock(&p->lock);
	if (err)
		return err;
	if (size > PLAN_ADD_MAX)
		return E2BIG;
	if ((err = caller_get(c, &ad->c)))
		return err;
	if ((err = hash_init(&ad->dirs, 6)))
		return err;
	if (!(top = malloc(sizeof(*top))))
		return ENOMEM;
	top->ino = vfs_m_ino(p->fs, ino);
	top->len = 0;
	hash_insert(&ad->dirs, &top->hn, XXH3_64bits("", 0));
	if ((err = meta_getattr(p->fs->meta, top->ino, &top->a)))
		return err;
	for (size_t at = 0; at < size && !err;) {
		const char *nl = memchr(paths + at, '\n', size - at);
		size_t len = nl ? (size_t)(nl - (paths + at)) : size - at;
		err = add_path(ad, paths + at, len);
		at += len + 1;
	}
	for (size_t i = 0; !err && i < ad->n; i++)
		ad->v[i].keys = ad->keys + ad->koff[i];
	return err;
}

/* set DIR "granary.plan.ID.add" = paths, one a line */
static int plan_add(struct plans *p, const struct vfs_caller *c, uint64_t id,
		    uint64_t ino, const char *value, size_t size)
{
	struct add ad = {.fs = p->fs};
	int err = add_resolve(p, c, id, ino, value, size, &ad);

	if (!err)
		err = plan_append(p, c, id, ad.v, ad.n);
	if (!err)
		log_debug("plan %llu: %zu files added", (unsigned long long)id,
			  ad.n);
	add_release(&ad);
	return err;
}

/* A position in the list: decimal, 0 or more, no leading zero. */
static int pos_arg(const char *s, size_t *pos)
{
	char *e;

	if (*s < '0' || *s > '9' || (s[0] == '0' && s[1]))
		return EINVAL;
	errno = 0;
	unsigned long long v = strtoull(s, &e, 10);
	if (errno || *e || v >= PLAN_FILES_MAX)
		return EINVAL;
	*pos = (size_t)v;
	return 0;
}

/* get FILE "granary.plan.ID.add[:POS]": FILE itself (the kernel resolved
 * its path as the caller, and checked read permission on it), appended or
 * (POS) for that position */
static int plan_add_self(struct plans *p, const struct vfs_caller *c,
			 uint64_t id, uint64_t ino, const char *at)
{
	struct pc_add f = {.ino = vfs_m_ino(p->fs, ino)};
	struct add ad = {.fs = p->fs};
	struct meta_slice *s = NULL, *vis = NULL;
	size_t n = 0, nvis = 0;
	struct meta_attr a;
	struct pc_plan *pp;
	size_t pos = 0;
	int err = at ? pos_arg(at, &pos) : 0;

	if (!err)
		err = caller_get(c, &ad.c);
	if (!err)
		err = caller_may_ino(p->fs, &ad.c, f.ino, 4, &a);
	if (!err && a.type == META_DIR)
		err = EISDIR;
	else if (!err && a.type != META_FILE)
		err = EINVAL;
	if (err)
		goto release;
	/* the objects of its chunk 0 now, as an add by a set lists them:
	 * the ranks know them before the readers pass a file sharing them
	 * (the listers do the chunks after) */
	f.len = a.length;
	if (!meta_read_chunk(p->fs->meta, f.ino, 0, &s, &n) &&
	    !slice_resolve(s, n, &vis, &nvis)) {
		chunk_blocks(p->fs, 0, vis, nvis, a.length, add_hash, &ad);
		if (!ad.err) {
			f.keys = ad.keys;
			f.nkeys = ad.nkeys;
			f.listed = a.length <= META_CHUNK_SIZE;
		}
	}
	free(s);
	free(vis);
	if (!at) {
		err = plan_append(p, c, id, &f, 1);
		goto release;
	}
	pthread_mutex_lock(&p->lock);
	if (!(err = plan_find(p, c, id, &pp)))
		err = plancore_add_at(p->core, pp, pos, &f, mono_ns());
	pthread_mutex_unlock(&p->lock);
	if (!err)
		plans_pump(p);
release:
	caller_release(&ad.c);
	free(ad.keys);
	return err;
}

/*
 * get DIR "granary.plan.ID.add:POS:PATHS": the files of PATHS (below DIR,
 * one a line, in the name itself: a few short paths, the name's 255
 * bytes at most) for positions POS, POS + 1, ..., all or none (but for
 * ENOMEM or ENOSPC on the way). A read-only mount takes no set; a get a
 * file, a round trip to the client each, made a plan of 3000 files in
 * 1.1-1.5 s of a 6 s epoch. EEXIST a position is taken, EAGAIN the last
 * is PC_HOLD_MAX or more past the plan's end (nothing added).
 */
static int plan_add_paths(struct plans *p, const struct vfs_caller *c,
			  uint64_t id, uint64_t ino, const char *arg)
{
	const char *paths = strchr(arg, ':');
	struct add ad = {.fs = p->fs};
	struct pc_plan *pp;
	char num[24];
	size_t pos = 0;
	int err = 0;

	if ((size_t)(paths - arg) >= sizeof(num))
		return EINVAL;
	memcpy(num, arg, (size_t)(paths - arg));
	num[paths - arg] = '\0';
	paths++;
	if ((err = pos_arg(num, &pos)))
		return err;
	if ((err = add_resolve(p, c, id, ino, paths, strlen(paths), &ad)))
		goto release;
	pthread_mutex_lock(&p->lock);
	int64_t now = mono_ns();
	if (!(err = plan_find(p, c, id, &pp)) && ad.n)
		err = pos < pp->n			      ? EEXIST
		      : pos + ad.n - 1 - pp->n >= PC_HOLD_MAX ? EAGAIN
							      : 0;
	for (size_t i = 0; !err && i < ad.n; i++)
		err = plancore_add_at(p->core, pp, pos + i, &ad.v[i], now);
	pthread_mutex_unlock(&p->lock);
	if (!err)
		plans_pump(p);
release:
	add_release(&ad);
	return err;
}

/* ---- figures ---------------------------------------------------------------
 */

static int plan_info_get(struct plans *p, const struct vfs_caller *c,
			 uint64_t id, void **value, size_t *size)
{
	struct plan_info pi;
	struct pc_plan *pp;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;
	int err;

	pthread_mutex_lock(&p->lock);
	if (!(err = plan_find(p, c, id, &pp)))
		plancore_info(p->core, pp, mono_ns(), &pi);
	pthread_mutex_unlock(&p->lock);
	if (err)
		return err;
	if (!(f = open_memstream(&buf, &len)))
		return ENOMEM;
	plans_info_json(f, &pi);
	if (fclose(f)) {
		free(buf);
		return ENOMEM;
	}
	*value = buf;
	*size = len;
	return 0;
}

static int plan_list_get(struct plans *p, const struct vfs_caller *c,
			 void **value, size_t *size)
{
	struct plan_info *pi = NULL;
	const char *sep = "";
	char *buf = NULL;
	size_t n = 0, len = 0;
	FILE *f;
	int err;

	plans_reap(p);
	if ((err = plans_list(p, &pi, &n)))
		return err;
	if (!(f = open_memstream(&buf, &len))) {
		free(pi);
		return ENOMEM;
	}
	fputs("{\"plans\": [", f);
	for (size_t i = 0; i < n; i++) {
		if (c->uid != 0 && pi[i].uid != c->uid)
			continue;
		fputs(sep, f);
		plans_info_json(f, &pi[i]);
		sep = ", ";
	}
	fputs("]}", f);
	free(pi);
	if (fclose(f)) {
		free(buf);
		return ENOMEM;
	}
	*value = buf;
	*size = len;
	return 0;
}

/* ---- the calls --------------------------------------------------------------
 */

/* The files plan id holds now (0: gone), as the answer of a get that
 * changed it. */
static int files_value(struct plans *p, uint64_t id, void **value, size_t *size)
{
	struct pc_plan *pp;
	char text[32];

	pthread_mutex_lock(&p->lock);
	pp = plancore_find(p->core, id);
	snprintf(text, sizeof(text), "%zu", pp ? pp->n : 0);
	pthread_mutex_unlock(&p->lock);
	return text_value(text, value, size);
}

int plans_xattr_get(struct plans *p, const struct vfs_caller *c, uint32_t pid,
		    uint64_t ino, const char *name, void **value, size_t *size)
{
	const char *arg;
	uint64_t id = 0;
	enum plan_op op = parse(name, &id, &arg);
	struct pc_plan *pp;
	void *v = NULL;
	int err = 0;

	if (op == OP_NONE)
		return ENODATA;
	if (op == OP_BAD)
		return EINVAL;
	if (op == OP_LIST || op == OP_INFO) {
		if (!p && op == OP_INFO)
			return ENOENT;
		err = op == OP_LIST
			  ? plan_list_get(p, c, value ? value : &v, size)
			  : plan_info_get(p, c, id, value ? value : &v, size);
		/* a probe: room for the figures to grow meanwhile */
		if (!err && !value)
			*size += 1024;
		free(v);
		return err;
	}
	if (op == OP_NEW && !p)
		return ENOTSUP; /* no disk cache: nowhere to fetch to */
	if (op == OP_NEW && !value) {
		*size = 20; /* a probe makes nothing: room for any id */
		return 0;
	}
	if (op == OP_NEW)
		return plan_new(p, c, pid, value, size);
	if (!p)
		return ENOENT; /* no plan was ever made here */
	if (!value) {
		/* a probe: the errors, no change, room for any answer */
		pthread_mutex_lock(&p->lock);
		err = plan_find(p, c, id, &pp);
		pthread_mutex_unlock(&p->lock);
		*size = 20;
		return err ? err : op == OP_OWNER && !arg ? EINVAL : 0;
	}
	switch (op) {
	case OP_ADD:
		err = arg && strchr(arg, ':')
			  ? plan_add_paths(p, c, id, ino, arg)
			  : plan_add_self(p, c, id, ino, arg);
		break;
	case OP_CLEAR:
	case OP_CANCEL:
		err = plan_clear(p, c, id, op == OP_CANCEL);
		break;
	case OP_OWNER:
		err = arg ? plan_owner(p, c, id, arg, strlen(arg)) : EINVAL;
		break;
	default:
		err = EINVAL;
	}
	return err ? err : files_value(p, id, value, size);
}

int plans_xattr_set(struct plans *p, const struct vfs_caller *c, uint32_t pid,
		    uint64_t ino, const char *name, const void *value,
		    size_t size)
{
	const char *arg;
	uint64_t id = 0;
	enum plan_op op = parse(name, &id, &arg);

	(void)pid;
	if (op == OP_NONE)
		return ENODATA;
	if (op == OP_BAD || ((op == OP_OWNER || op == OP_ADD) && arg))
		return EINVAL;
	if (op == OP_LIST || op == OP_NEW || op == OP_INFO)
		return EPERM; /* read-only names, as ctl.c's */
	if (!p)
		return ENOENT;
	switch (op) {
	case OP_ADD:
		return plan_add(p, c, id, ino, value, size);
	case OP_CLEAR:
	case OP_CANCEL:
		return plan_clear(p, c, id, op == OP_CANCEL);
	case OP_OWNER:
		return plan_owner(p, c, id, value, size);
	default:
		return EINVAL;
	}
}
