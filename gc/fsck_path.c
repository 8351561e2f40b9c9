/*
 * fsck_path.c - fsck of one tree (fsck.h, opts path): its top resolved
 * from the root, its directories listed one by one from the top down,
 * the inodes they name read in pipelines, every chunk list of its files
 * (meta_scan_chunks), and the reference counts and packs of the slices
 * found. What it finds goes through fsck.c's judges, as the walks of the
 * whole volume's does; what only the volume could say (names and
 * references outside the tree) is left out there.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gc/fsck_int.h"
#include "meta/meta_objects.h"

#define BATCH 256 /* inodes, chunk lists or counts read in one go */

/* ---- the top ----------------------------------------------------------- */

/* o->path from the root: the top, the directory naming it and that
 * name (into name, cap bytes); f->top_path normalized. */
static int resolve(struct fsck *f, char *name, size_t cap)
{
	const char *p = f->o->path;
	uint64_t cur = META_ROOT_INO, up = META_ROOT_INO;
	size_t used = 0;
	struct meta_attr a = {.type = META_DIR};
	int err;

	if (p[0] != '/')
		return EINVAL;
	if (!(f->top_path = malloc(strlen(p) + 1)))
		return ENOMEM;
	f->top_path[0] = 0;
	name[0] = 0;
	while (*p) {
		size_t n = strcspn(p, "/");
		if (!n || (n == 1 && p[0] == '.')) {
			p += n + (p[n] == '/');
			continue;
		}
		if (n >= cap || n > 255)
			return ENAMETOOLONG;
		if (a.type != META_DIR)
			return ENOTDIR;
		memcpy(name, p, n);
		name[n] = 0;
		up = cur;
		if ((err = meta_lookup(f->m, cur, name, &cur, &a)))
			return err;
		used += (size_t)sprintf(f->top_path + used, "/%s", name);
		p += n + (p[n] == '/');
	}
	f->top = cur;
	f->top_up = up;
	return 0;
}

/* ---- inodes ------------------------------------------------------------ */

/* Read inodes v[0..n) that the table does not have yet and hand each that
 * exists to fsck_on_inode. */
static int add_inodes(struct fsck *f, const uint64_t *v, size_t n)
{
	struct meta_fsck_inode *iv = calloc(BATCH, sizeof *iv);
	int err = iv ? 0 : ENOMEM;

	for (size_t base = 0; !err && base < n; base += BATCH) {
		size_t k = 0;
		for (size_t i = base; i < n && i < base + BATCH; i++)
			if (!ino_exists(fsck_ino(f, v[i], 0)))
				iv[k++].ino = v[i];
		if (!k || (err = meta_fsck_inodes(f->m, iv, k)))
			continue;
		for (size_t i = 0; !err && i < k; i++) {
			struct meta_scan_inode in = {.ino = iv[i].ino,
						     .a = iv[i].a};
			if (!iv[i].exists)
				continue; /* its entry says so */
			in.state =
			    iv[i].corrupt ? META_INODE_CORRUPT : META_INODE_OK;
			err = fsck_on_inode(f, &in);
		}
	}
	free(iv);
	return err;
}

/* ---- directories ------------------------------------------------------- */

struct dir_list {
	struct meta_scan_dirent *e; /* names malloc'd */
	size_t n, cap;
};

static int on_entry(void *arg, const struct meta_scan_dirent *e)
{
	struct dir_list *l = arg;

	struct meta_scan_dirent *v = fsck_grow(l->e, l->n, &l->cap, sizeof *v);

	if (!v)
		return ENOMEM;
	l->e = v;
	l->e[l->n] = *e;
	if (!(l->e[l->n].name = strdup(e->name)))
		return ENOMEM;
	l->n++;
	return 0;
}

static void dir_list_clear(struct dir_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free((char *)l->e[i].name);
	l->n = 0;
}

static int file_add(struct fsck *f, struct ino *x)
{
	struct pfile *v =
	    fsck_grow(f->files, f->nfiles, &f->capfiles, sizeof *v);

	if (!v)
		return ENOMEM;
	f->files = v;
	f->files[f->nfiles++] = (struct pfile){ino_of(x), x->subdirs};
	x->flags |= I_WALKED;
	return 0;
}

/* What x, just named, adds to the walk: a directory to list (queue), a
 * file to read the chunk lists of. */
static int walk_into(struct fsck *f, struct ino *x, uint64_t **q, size_t *nq,
		     size_t *cap)
{
	if (!x || (x->flags & (I_WALKED | I_CORRUPT)))
		return 0;
	if (x->type == META_FILE)
		return file_add(f, x);
	if (x->type != META_DIR)
		return 0;
	uint64_t *v = fsck_grow(*q, *nq, cap, sizeof *v);
	if (!v)
		return ENOMEM;
	*q = v;
	(*q)[(*nq)++] = ino_of(x);
	x->flags |= I_WALKED;
	return 0;
}

/* The top's entry (in a directory outside the tree): counted as
 * fsck_on_dirent would, its parent field judged. */
static int top_entry(struct fsck *f, struct ino *x, const char *name)
{
	struct cand *c;

	x->flags |= I_PTOP;
	if (f->top == META_ROOT_INO)
		return 0;
	x->links = 1;
	if (x->type == META_DIR && x->up != f->top_up) {
		if (!(c = fsck_cand(f, FSCK_DIR_PARENT)) ||
		    !(c->name = strdup(name)))
			return ENOMEM;
		c->dir = f->top_up;
		c->ino = f->top;
		c->etype = META_DIR;
		c->found = (int64_t)x->up;
		c->expected = (int64_t)f->top_up;
	}
	x->up = f->top_up;
	return 0;
}

int fsck_path_walk(struct fsck *f)
{
	struct dirent_state ds = {f, 0};
	struct dir_list l = {0};
	uint64_t *q = NULL, *inos = NULL;
	size_t nq = 0, cap = 0, head = 0;
	char name[256];
	struct ino *x;
	int err;

	if ((err = resolve(f, name, sizeof name)) ||
	    (err = add_inodes(f, &f->top, 1)))
		return err;
	x = fsck_ino(f, f->top, 0);
	if (!ino_exists(x))
		return ENOENT; /* deleted meanwhile */
	if ((err = top_entry(f, x, name)) ||
	    (err = walk_into(f, x, &q, &nq, &cap)))
		goto out;
	/* directory by directory, from the top down: a directory is listed
	 * once, whatever the names it has in the tree */
	while (!err && head < nq) {
		uint64_t dir = q[head++];
		dir_list_clear(&l);
		if ((err = meta_scan_dir(f->m, dir, on_entry, &l)))
			break;
		uint64_t *v = realloc(inos, (l.n + 1) * sizeof *v);
		if (!v) {
			err = ENOMEM;
			break;
		}
		inos = v;
		size_t k = 0;
		for (size_t i = 0; i < l.n; i++)
			if (!l.e[i].corrupt)
				inos[k++] = l.e[i].ino;
		if ((err = add_inodes(f, inos, k)))
			break;
		for (size_t i = 0; !err && i < l.n; i++) {
			err = fsck_on_dirent(&ds, &l.e[i]);
			if (!err && !l.e[i].corrupt)
				err = walk_into(f, fsck_ino(f, l.e[i].ino, 0),
						&q, &nq, &cap);
		}
		/* the queue's head is done with: keep what is left */
		if (head > 4096 && head * 2 > nq) {
			memmove(q, q + head, (nq - head) * sizeof *q);
			nq -= head;
			head = 0;
		}
	}
out:
	dir_list_clear(&l);
	free(l.e);
	free(inos);
	free(q);
	return err;
}

/* ---- chunk lists ------------------------------------------------------- */

int fsck_path_refs(struct fsck *f, meta_ref_fn fn, void *arg)
{
	struct meta_chunk_at v[BATCH];
	size_t n = 0;
	int err = 0;

	for (size_t i = 0; !err && i < f->nfiles; i++) {
		/* chunk 0 even of an empty file: a list there is past its
		 * length */
		uint32_t nc = f->files[i].chunks ? f->files[i].chunks : 1;
		for (uint32_t idx = 0; !err && idx < nc; idx++) {
			v[n++] = (struct meta_chunk_at){f->files[i].ino, idx};
			if (n == BATCH) {
				err = meta_scan_chunks(f->m, v, n, fn, arg);
				n = 0;
			}
		}
	}
	if (!err && n)
		err = meta_scan_chunks(f->m, v, n, fn, arg);
	return err;
}

/* ---- reference counts and packs ---------------------------------------- */

/* A slice of the tree against its sliceref: references the tree holds
 * beyond 1 + sliceref are wrong whatever is outside; fewer may be the
 * references of files outside the tree. */
static int judge_sliceref(struct fsck *f, struct slc *x, int64_t extra)
{
	struct cand *c;

	x->flags |= S_REF; /* judged here, not by judge_slices */
	if ((int64_t)x->refs == extra + 1)
		return 0;
	if ((int64_t)x->refs < extra + 1) {
		f->r->outside++;
		return 0;
	}
	if (!(c = fsck_slice_cand(f, FSCK_SLICEREF, x)))
		return ENOMEM;
	c->found = x->refs;
	c->was = extra;
	c->expected = extra + 1;
	return 0;
}

int fsck_path_counts(struct fsck *f)
{
	struct slc *xs[BATCH];
	uint64_t ids[BATCH];
	int64_t extra[BATCH];
	size_t n = 0;
	int err = 0;

	for (struct hash_node *h = hash_first(&f->slices); !err;
	     h = hash_next(&f->slices, h)) {
		struct slc *x = h ? hash_entry(h, struct slc, hn) : NULL;
		if (x && (x->flags & S_PACK)) {
			uint64_t total, dead;
			err = meta_pack_usage(f->m, slc_id(x), &total, &dead);
			if (!err)
				err = fsck_on_pack(f, slc_id(x), total, dead);
			else if (err == ENOENT)
				err = 0; /* no total: judge_slices says so */
		}
		if (x && (x->flags & S_SLICE)) {
			xs[n] = x;
			ids[n++] = slc_id(x);
		}
		if (n && (n == BATCH || !x)) {
			err = err ? err
				  : meta_fsck_slicerefs(f->m, ids, n, extra);
			for (size_t i = 0; !err && i < n; i++)
				err = judge_sliceref(f, xs[i], extra[i]);
			n = 0;
		}
		if (!x)
			break;
		fsck_tick(f);
	}
	return err;
}
