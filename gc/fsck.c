/*
 * fsck.c - granary fsck (fsck.h): the walks of the metadata and what
 * each finds wrong (candidates), where every directory leads (reach), and
 * reading each candidate again before it is reported (confirm). The
 * store's side is fsck_store.c; repairs and the report fsck_report.c.
 *
 * Order: the counters and the server's time t0; the sessions, their
 * opens, pendingspace; the inodes (the table), the trees (versions
 * directories, detached snapshots), delfiles, the entries (links,
 * subdirectories, parents), the references (chunk lists: stray or past
 * a length; slices, packs, staging), sliceref, packs, the counters
 * again; then the inodes and the trash's key are judged, the store compared,
 * every candidate read again, and each confirmed one repaired and reported.
 * With a path, the walks are fsck_path.c's, of the tree, and the same judges
 * run.
 */
#include "gc/fsck.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gc/fsck_int.h"
#include "lib/log.h"
#include "meta/meta_fsck.h"
#include "meta/meta_objects.h"
#include "meta/meta_scan.h"
#include "meta/meta_trash.h"

/* ---- tables ------------------------------------------------------------ */

#define ARENA_SIZE (1u << 20)
struct arena {
	struct arena *next;
	size_t used;
	_Alignas(8) char mem[ARENA_SIZE];
};

void *fsck_alloc(struct fsck *f, size_t size)
{
	struct arena *a = f->arenas;

	size = (size + 7) & ~(size_t)7;
	if (size > ARENA_SIZE)
		return NULL;
	if (!a || a->used + size > ARENA_SIZE) {
		a = malloc(sizeof *a);
		if (!a)
			return NULL;
		a->used = 0;
		a->next = f->arenas;
		f->arenas = a;
	}
	void *p = a->mem + a->used;
	a->used += size;
	memset(p, 0, size);
	return p;
}

struct ino *fsck_ino(struct fsck *f, uint64_t ino, int add)
{
	struct hash_node *n = hash_find(&f->inos, ino, NULL, NULL);
	struct ino *x;

	if (n || !add)
		return n ? hash_entry(n, struct ino, hn) : NULL;
	if (!(x = fsck_alloc(f, sizeof *x)))
		return NULL;
	hash_insert(&f->inos, &x->hn, ino);
	return x;
}

struct slc *fsck_slc(struct fsck *f, uint64_t id, int add)
{
	struct hash_node *n = hash_find(&f->slices, id, NULL, NULL);
	struct slc *x;

	if (n || !add)
		return n ? hash_entry(n, struct slc, hn) : NULL;
	if (!(x = fsck_alloc(f, sizeof *x)))
		return NULL;
	hash_insert(&f->slices, &x->hn, id);
	return x;
}

void *fsck_grow(void *v, size_t n, size_t *cap, size_t size)
{
	size_t c = *cap ? 2 * *cap : 16;
	void *p;

	if (n < *cap)
		return v;
	if ((p = realloc(v, c * size)))
		*cap = c;
	return p;
}

struct cand *fsck_cand(struct fsck *f, enum fsck_kind kind)
{
	struct cand *c =
	    fsck_grow(f->cands, f->ncand, &f->capcand, sizeof *f->cands);

	if (!c)
		return NULL;
	f->cands = c;
	c = &f->cands[f->ncand++];
	memset(c, 0, sizeof *c);
	c->kind = kind;
	return c;
}

struct cand *fsck_slice_cand(struct fsck *f, enum fsck_kind kind,
			     const struct slc *x)
{
	struct cand *c = fsck_cand(f, kind);

	if (c) {
		c->id = slc_id(x);
		c->ino = x->ino;
		c->idx = x->idx;
	}
	return c;
}

void fsck_tick(struct fsck *f)
{
	if (f->o->progress && (++f->ticks & 1023) == 0)
		f->o->progress(f->o->progress_arg, f->phase, f->r);
}

void fsck_phase(struct fsck *f, const char *name)
{
	f->phase = name;
	if (f->o->progress)
		f->o->progress(f->o->progress_arg, name, f->r);
}

/* Stray chunk lists: an inode with chunk lists and no inode (nor a
 * delfiles member), its furthest chunk and whether a tail field is one. */
struct stray {
	struct hash_node hn; /* hash: the inode */
	uint32_t idx;
	int tail;
};

static int stray_add(struct fsck *f, uint64_t ino, uint32_t idx, int tail)
{
	struct hash_node *n = hash_find(&f->strays, ino, NULL, NULL);
	struct stray *s;

	if (n) {
		s = hash_entry(n, struct stray, hn);
	} else {
		if (!(s = fsck_alloc(f, sizeof *s)))
			return ENOMEM;
		hash_insert(&f->strays, &s->hn, ino);
	}
	if (idx > s->idx)
		s->idx = idx;
	s->tail |= tail;
	return 0;
}

/* A session id met: registered, or leaving fields, staged names and
 * opens. */
struct sidx {
	struct hash_node hn; /* hash: the sid */
	uint8_t live, fields;
	uint64_t names, opened; /* opened: members of so<sid> */
};

static struct sidx *sid_get(struct fsck *f, uint64_t sid)
{
	struct hash_node *n = hash_find(&f->sids, sid, NULL, NULL);
	struct sidx *s;

	if (n)
		return hash_entry(n, struct sidx, hn);
	if (!(s = fsck_alloc(f, sizeof *s)))
		return NULL;
	hash_insert(&f->sids, &s->hn, sid);
	return s;
}

/* ---- the walks --------------------------------------------------------- */

static int on_sid(void *arg, uint64_t sid, enum meta_sid_from from)
{
	struct sidx *s = sid_get(arg, sid);
	if (!s)
		return ENOMEM;
	if (from == META_SID_SESSION) {
		struct fsck *f = arg;
		f->live_sessions += !s->live; /* ZSCAN may repeat it */
		s->live = 1;
	} else
		s->fields = 1;
	return 0;
}

int fsck_on_inode(void *arg, const struct meta_scan_inode *i)
{
	struct fsck *f = arg;
	struct fsck_report *r = f->r;
	struct ino *x;
	struct cand *c;

	fsck_tick(f);
	if (i->state == META_INODE_TAIL)
		return stray_add(f, i->ino, 0, 1);
	if (!(x = fsck_ino(f, i->ino, 1)))
		return ENOMEM;
	if (ino_exists(x))
		return 0; /* cannot be: each inode hash comes once */
	r->inodes++;
	if (i->state == META_INODE_CORRUPT || i->a.type < META_FILE ||
	    i->a.type > META_SOCK) {
		x->flags |= I_CORRUPT;
		if (!(c = fsck_cand(f, FSCK_INODE_CORRUPT)))
			return ENOMEM;
		c->ino = i->ino;
		return 0;
	}
	x->type = i->a.type;
	x->nlink = i->a.nlink;
	switch (x->type) {
	case META_DIR:
		r->dirs++;
		x->up = i->a.parent;
		break;
	case META_FILE:
		r->files++;
		f->used += i->a.stored;
		x->subdirs = (uint32_t)((i->a.length + META_CHUNK_SIZE - 1) /
					META_CHUNK_SIZE);
		break;
	case META_SYMLINK:
		r->symlinks++;
		break;
	default:
		r->others++;
	}
	return 0;
}

static int on_tree(void *arg, enum meta_tree t, uint64_t ino, uint64_t dir)
{
	struct ino *x = fsck_ino(arg, ino, 0);
	(void)dir;
	if (x && x->type == META_DIR)
		x->flags |= t == META_TREE_VERSIONS ? I_VDIR : I_TOP;
	return 0;
}

int fsck_on_delfile(void *arg, uint64_t ino, uint64_t length)
{
	struct fsck *f = arg;
	struct ino *x = fsck_ino(f, ino, !f->o->path);
	struct cand *c;

	if (!x)
		return f->o->path ? 0 : ENOMEM; /* path: not in the tree */
	if (ino_exists(x) && !(x->flags & (I_CORRUPT | I_DELFILE))) {
		/* its chunk lists would go with a live file */
		if (!(c = fsck_cand(f, FSCK_DELFILE_LIVE)))
			return ENOMEM;
		c->ino = ino;
		c->found = (int64_t)length;
	}
	x->flags |= I_DELFILE;
	return 0;
}

static int entry_cand(struct fsck *f, enum fsck_kind kind,
		      const struct meta_scan_dirent *e, struct cand **out)
{
	struct cand *c = fsck_cand(f, kind);
	if (!c || !(c->name = strdup(e->name)))
		return ENOMEM;
	c->dir = e->dir;
	c->ino = e->ino;
	c->etype = e->type;
	*out = c;
	return 0;
}

int fsck_on_dirent(void *arg, const struct meta_scan_dirent *e)
{
	struct dirent_state *st = arg;
	struct fsck *f = st->f;
	struct ino *d = fsck_ino(f, e->dir, 0), *x;
	struct cand *c;
	int err;

	fsck_tick(f);
	f->r->entries++;
	if (!ino_exists(d) || (d->type && d->type != META_DIR)) {
		/* entries come directory by directory: say it once */
		if (st->bad_dir != e->dir) {
			st->bad_dir = e->dir;
			if (!(c = fsck_cand(f, FSCK_ENTRY_NO_DIR)))
				return ENOMEM;
			c->dir = c->ino = e->dir;
		}
		d = NULL;
	}
	if (e->corrupt)
		return entry_cand(f, FSCK_ENTRY_CORRUPT, e, &c);
	x = fsck_ino(f, e->ino, 0);
	if (!ino_exists(x)) {
		/* made after the walk of inodes passed it, or missing */
		return entry_cand(f, FSCK_ENTRY_NO_INODE, e, &c);
	}
	if (x->flags & I_CORRUPT)
		return 0;
	if (e->type != x->type) {
		if ((err = entry_cand(f, FSCK_ENTRY_TYPE, e, &c)))
			return err;
		c->itype = x->type;
	}
	x->links++;
	if (x->type != META_DIR) {
		if (!x->up)
			x->up = e->dir;
		return 0;
	}
	if (d && d->type == META_DIR)
		d->subdirs++;
	if (x->links > 1)
		return 0; /* a second name: judged later */
	if (x->up != e->dir) {
		if ((err = entry_cand(f, FSCK_DIR_PARENT, e, &c)))
			return err;
		c->found = (int64_t)x->up;
		c->expected = (int64_t)e->dir;
	}
	x->up = e->dir;
	return 0;
}

/* Take note of the first reference to x (to name a file with it). */
static void first_ref(struct slc *x, const struct meta_ref *mr)
{
	if (!x->ino) {
		x->ino = mr->ino;
		x->idx = mr->idx;
	}
}

/* A chunk list: of an inode that is not (stray, even of holes only), or
 * past its file's length. */
static int on_list(struct fsck *f, const struct meta_ref *mr)
{
	struct ino *i = fsck_ino(f, mr->ino, 0);
	struct cand *c;

	if (!ino_exists(i))
		return i && (i->flags & I_DELFILE)
			   ? 0
			   : stray_add(f, mr->ino, mr->idx, mr->tail);
	if (i->type != META_FILE || mr->idx < i->subdirs)
		return 0;
	if (!(c = fsck_cand(f, FSCK_CHUNK_PAST_END)))
		return ENOMEM;
	c->ino = mr->ino;
	c->idx = mr->idx;
	c->tail = mr->tail;
	return 0;
}

/* A staged name of a session that was not registered when the walk
 * began, kept for its repair. */
static int sname_add(struct fsck *f, const struct meta_ref *mr)
{
	struct sname *v =
	    fsck_grow(f->snames, f->nsnames, &f->capsnames, sizeof *v);
	if (!v)
		return ENOMEM;
	f->snames = v;
	f->snames[f->nsnames++] = (struct sname){
	    mr->sid, mr->s.id ? mr->s.id : mr->s.pack, mr->idx, !mr->s.id};
	return 0;
}

/* A record waiting for deletion, or a staged name. With path, only the
 * tree's slices and packs are of interest. */
static int on_pending(struct fsck *f, const struct meta_ref *mr)
{
	const struct meta_slice *s = &mr->s;
	struct slc *x = fsck_slc(f, s->id ? s->id : s->pack, !f->o->path);
	struct slc *p;
	struct sidx *sx;

	if (mr->from == META_REF_DEAD) {
		if (!x)
			return f->o->path ? 0 : ENOMEM;
		/* a frame not counted dead yet: its pack's live bytes */
		if (s->id && s->pack && !(x->flags & (S_SLICE | S_DEAD)) &&
		    (p = fsck_slc(f, s->pack, 0)))
			p->live += s->plen;
		x->flags |= S_DEAD;
		return 0;
	}
	if (x)
		x->flags |= S_STAGED;
	else if (!f->o->path)
		return ENOMEM;
	if (!mr->sid || f->o->path)
		return 0;
	if (!(sx = sid_get(f, mr->sid)))
		return ENOMEM;
	sx->names++;
	return sx->live ? 0 : sname_add(f, mr);
}

int fsck_on_ref(void *arg, const struct meta_ref *mr)
{
	struct fsck *f = arg;
	const struct meta_slice *s = &mr->s;
	struct slc *x, *p;

	fsck_tick(f);
	if (mr->from == META_REF_LIST)
		return on_list(f, mr);
	if (mr->from != META_REF_CHUNK)
		return on_pending(f, mr);
	f->r->refs++;
	if (!(x = fsck_slc(f, s->id, 1)))
		return ENOMEM;
	if (!(x->flags & S_SLICE)) {
		f->r->slices++;
		if (s->pack && (p = fsck_slc(f, s->pack, 1)))
			p->live += s->plen; /* a frame shared counts once */
	}
	x->flags |= S_SLICE;
	x->refs++;
	x->size = s->size;
	first_ref(x, mr);
	if (!s->pack)
		return 0;
	x->flags |= S_PACKED;
	if (!(p = fsck_slc(f, s->pack, 1)))
		return ENOMEM;
	if (!(p->flags & S_PACK))
		f->r->packs++;
	p->flags |= S_PACK;
	p->refs++;
	if ((uint64_t)s->poff + s->plen > p->size)
		p->size = s->poff + s->plen;
	first_ref(p, mr);
	return 0;
}

static int on_sliceref(void *arg, uint64_t id, int64_t extra)
{
	struct fsck *f = arg;
	struct slc *x = fsck_slc(f, id, 1);
	struct cand *c;

	if (!x)
		return ENOMEM;
	if (x->flags & S_REF)
		return 0; /* HSCAN repeated it */
	x->flags |= S_REF;
	int64_t found = x->flags & S_SLICE ? x->refs : 0;
	if (found == extra + 1)
		return 0;
	if (!(c = fsck_slice_cand(f, FSCK_SLICEREF, x)))
		return ENOMEM;
	c->found = found;
	c->was = extra;
	c->expected = extra + 1;
	return 0;
}

int fsck_on_pack(void *arg, uint64_t pack, uint64_t total, uint64_t dead)
{
	struct fsck *f = arg;
	struct slc *x = fsck_slc(f, pack, 0);
	struct cand *c;

	if (!x || !(x->flags & S_PACK))
		return 0; /* a pack nothing references: gc's */
	x->flags |= S_TOTAL;
	if (total >= META_PACK_OPEN) {
		x->flags |= S_OPEN;
		return 0;
	}
	x->seen = total > UINT32_MAX ? UINT32_MAX : (uint32_t)total;
	if (dead <= total)
		return 0;
	if (!(c = fsck_slice_cand(f, FSCK_PACK_DEAD, x)))
		return ENOMEM;
	c->found = (int64_t)dead;
	c->expected = (int64_t)total;
	return 0;
}

/* After the walks of references, sliceref and packs: what each slice and
 * pack was found with, against what it should have. */
static int judge_slices(struct fsck *f)
{
	struct cand *c;

	for (struct hash_node *n = hash_first(&f->slices); n;
	     n = hash_next(&f->slices, n)) {
		struct slc *x = hash_entry(n, struct slc, hn);
		if ((x->flags & S_SLICE) && !(x->flags & S_REF) &&
		    x->refs != 1) {
			if (!(c = fsck_slice_cand(f, FSCK_SLICEREF, x)))
				return ENOMEM;
			c->found = x->refs;
			c->expected = 1;
		}
		if ((x->flags & S_PACK) && !(x->flags & S_TOTAL)) {
			if (!(c = fsck_slice_cand(f, FSCK_PACK_TOTAL, x)))
				return ENOMEM;
		}
		if ((x->flags & S_DEAD) && (x->flags & (S_SLICE | S_PACK)) &&
		    x->refs) {
			if (!(c = fsck_slice_cand(f, FSCK_SLICE_DEAD, x)))
				return ENOMEM;
			c->tail = (x->flags & S_PACK) != 0; /* a whole pack */
		}
	}
	return 0;
}

static int judge_strays_and_sids(struct fsck *f)
{
	struct cand *c;

	for (struct hash_node *n = hash_first(&f->strays); n;
	     n = hash_next(&f->strays, n)) {
		struct stray *s = hash_entry(n, struct stray, hn);
		if (!(c = fsck_cand(f, FSCK_STRAY_CHUNKS)))
			return ENOMEM;
		c->ino = s->hn.hash;
		c->idx = s->idx;
		c->tail = s->tail && !s->idx;
		c->expected = (int64_t)(s->idx + 1);
	}
	for (struct hash_node *n = hash_first(&f->sids); n;
	     n = hash_next(&f->sids, n)) {
		struct sidx *s = hash_entry(n, struct sidx, hn);
		if (s->live)
			continue;
		if (s->fields) {
			if (!(c = fsck_cand(f, FSCK_SESSION)))
				return ENOMEM;
			c->id = s->hn.hash;
		}
		if (s->names) {
			if (!(c = fsck_cand(f, FSCK_STAGING)))
				return ENOMEM;
			c->id = s->hn.hash;
			c->found = (int64_t)s->names;
		}
		if (s->opened) {
			if (!(c = fsck_cand(f, FSCK_OPEN_GONE)))
				return ENOMEM;
			c->id = s->hn.hash;
			c->found = (int64_t)s->opened;
		}
	}
	return 0;
}

/* An open recorded in o<ino> (each is a candidate when its session is
 * not registered), or in so<sid> (counted, judged with the sessions). */
static int on_open(void *arg, uint64_t sid, uint64_t ino, int in_so)
{
	struct fsck *f = arg;
	struct sidx *s = sid_get(f, sid);
	struct cand *c;

	fsck_tick(f);
	if (!s)
		return ENOMEM;
	if (s->live)
		return 0;
	if (in_so) {
		s->opened++;
		return 0;
	}
	if (!(c = fsck_cand(f, FSCK_OPEN_GONE)))
		return ENOMEM;
	c->id = sid;
	c->ino = ino;
	return 0;
}

/* ---- where each directory leads ---------------------------------------- */

static enum reach reach_of(const struct ino *x)
{
	return (enum reach)((x->flags & I_REACH) >> 6);
}

/* A directory no entry names that should have one. */
static int nameless(const struct ino *x)
{
	return x->type == META_DIR && !x->links && ino_of(x) != META_ROOT_INO &&
	       !(x->flags & (I_VDIR | I_TOP));
}

/*
 * Where directory x leads, following the directories naming them (a
 * nameless one's parent field) up to the root; every directory on the
 * way learns it too. A loop is reported once, at the directory where the
 * walk met itself. stack: room for the walk, grown as needed.
 */
static int reach(struct fsck *f, struct ino *x, struct ino ***stack,
		 size_t *cap)
{
	size_t n = 0;
	enum reach res;
	struct ino *cur = x, *loop = NULL;

	for (;;) {
		if (!cur || cur->type != META_DIR) {
			res = R_LOST;
			break;
		}
		if (cur->flags & I_RESOLVED) {
			res = reach_of(cur);
			break;
		}
		if (ino_of(cur) == META_ROOT_INO || (cur->flags & I_PTOP)) {
			res = R_MAIN;
			cur->flags |= I_RESOLVED | (R_MAIN << 6);
			break;
		}
		if (cur->flags & I_TOP) {
			res = R_FLUX;
			cur->flags |= I_RESOLVED | (R_FLUX << 6);
			break;
		}
		if (cur->flags & I_STACK) {
			res = R_LOOP;
			loop = cur;
			break;
		}
		if (n == *cap) {
			size_t nc = *cap ? 2 * *cap : 256;
			struct ino **s = realloc(*stack, nc * sizeof *s);
			if (!s)
				return ENOMEM;
			*stack = s;
			*cap = nc;
		}
		(*stack)[n++] = cur;
		cur->flags |= I_STACK;
		cur = cur->up ? fsck_ino(f, cur->up, 0) : NULL;
	}
	/* from the top down: below a nameless directory is orphaned */
	while (n--) {
		struct ino *y = (*stack)[n];
		if (res == R_MAIN && nameless(y))
			res = R_ORPHANED;
		y->flags &= (uint16_t) ~(I_STACK | I_REACH);
		y->flags |= (uint16_t)(I_RESOLVED | (res << 6));
	}
	if (loop) {
		struct cand *c = fsck_cand(f, FSCK_LOOP);
		if (!c)
			return ENOMEM;
		c->ino = ino_of(loop);
		c->nlink = loop->nlink;
	}
	return 0;
}

/* Each inode against its entries: link counts, names, orphans. */
static int judge_inodes(struct fsck *f)
{
	struct ino **stack = NULL;
	size_t cap = 0;
	struct cand *c;
	int err = 0;

	for (struct hash_node *n = hash_first(&f->inos); n && !err;
	     n = hash_next(&f->inos, n)) {
		struct ino *x = hash_entry(n, struct ino, hn);
		if (x->type == META_DIR && !(x->flags & I_RESOLVED))
			err = reach(f, x, &stack, &cap);
	}
	free(stack);
	/* a directory of many names: which one its parent field should
	 * name is not the question (it is reported as such) */
	for (size_t i = 0; i < f->ncand; i++) {
		struct cand *d = &f->cands[i];
		struct ino *x;
		if (d->kind == FSCK_DIR_PARENT &&
		    (x = fsck_ino(f, d->ino, 0)) && x->links > 1)
			d->state = C_GONE;
	}
	for (struct hash_node *n = hash_first(&f->inos); n && !err;
	     n = hash_next(&f->inos, n)) {
		struct ino *x = hash_entry(n, struct ino, hn);
		if (!x->type)
			continue;
		enum reach r = R_MAIN;
		if (x->type == META_DIR) {
			r = reach_of(x);
		} else if (x->links) {
			struct ino *d = fsck_ino(f, x->up, 0);
			r = d && d->type == META_DIR ? reach_of(d) : R_LOST;
		}
		if (r == R_FLUX) {
			f->r->in_flux++;
			continue;
		}
		enum fsck_kind k = 0;
		int64_t want = 0;
		if (x->type == META_DIR) {
			want = 2 + (int64_t)x->subdirs;
			if (nameless(x))
				k = FSCK_ORPHAN;
			else if (x->links > 1)
				k = FSCK_DIR_NAMES;
			else if (x->nlink != want)
				k = FSCK_DIR_NLINK;
			if (k && !(c = fsck_cand(f, k)))
				return ENOMEM;
			if (k) {
				c->ino = ino_of(x);
				c->nlink = x->nlink;
				c->found =
				    k == FSCK_DIR_NAMES ? x->links : x->nlink;
				c->expected = want;
			}
			/* a nameless directory gets its nlink with its
			 * name; one of many names still gets its nlink */
			if (k == FSCK_DIR_NAMES && x->nlink != want) {
				if (!(c = fsck_cand(f, FSCK_DIR_NLINK)))
					return ENOMEM;
				c->ino = ino_of(x);
				c->nlink = x->nlink;
				c->found = x->nlink;
				c->expected = want;
			}
			continue;
		}
		if (!x->links) {
			k = FSCK_ORPHAN;
			want = 1;
		} else if (f->o->path && x->nlink > x->links) {
			f->r->outside++; /* names outside the tree, maybe */
		} else if (x->nlink != x->links) {
			k = FSCK_NLINK;
			want = x->links;
		}
		if (!k)
			continue;
		if (!(c = fsck_cand(f, k)))
			return ENOMEM;
		c->ino = ino_of(x);
		c->nlink = x->nlink;
		c->found = x->nlink;
		c->expected = want;
	}
	return err;
}

/* ---- reading again ----------------------------------------------------- */

int fsck_still_referenced(struct fsck *f, uint64_t ino, uint32_t idx,
			  uint64_t id, uint64_t pack)
{
	struct meta_slice *s;
	size_t n;
	int err = meta_read_chunk(f->m, ino, idx, &s, &n);
	int found = 0;

	if (err)
		return -err;
	for (size_t i = 0; i < n && !found; i++)
		found = (!id || s[i].id == id) && (!pack || s[i].pack == pack);
	free(s);
	return found;
}

static int inode_kind(enum fsck_kind k)
{
	switch (k) {
	case FSCK_INODE_CORRUPT:
	case FSCK_NLINK:
	case FSCK_DIR_NLINK:
	case FSCK_DIR_PARENT:
	case FSCK_DIR_NAMES:
	case FSCK_ORPHAN:
	case FSCK_LOOP:
	case FSCK_ENTRY_NO_INODE:
	case FSCK_ENTRY_TYPE:
	case FSCK_ENTRY_NO_DIR:
	case FSCK_DELFILE_LIVE:
	case FSCK_CHUNK_PAST_END:
	case FSCK_TRASH:
		return 1;
	default:
		return 0;
	}
}

static int entry_kind(enum fsck_kind k)
{
	return k == FSCK_ENTRY_NO_INODE || k == FSCK_ENTRY_TYPE ||
	       k == FSCK_ENTRY_CORRUPT || k == FSCK_DIR_PARENT;
}

/* The inodes and entries of the candidates, read again in pipelines. */
static int reread(struct fsck *f)
{
	size_t ni = 0, ne = 0;
	struct meta_fsck_inode *iv = calloc(f->ncand + 1, sizeof *iv);
	struct meta_fsck_entry *ev = calloc(f->ncand + 1, sizeof *ev);
	int err = iv && ev ? 0 : ENOMEM;

	for (size_t i = 0; !err && i < f->ncand; i++) {
		struct cand *c = &f->cands[i];
		if (inode_kind(c->kind))
			iv[ni++].ino =
			    c->kind == FSCK_ENTRY_NO_DIR ? c->dir : c->ino;
		if (entry_kind(c->kind)) {
			ev[ne].dir = c->dir;
			ev[ne++].name = c->name;
		}
	}
	if (!err && ni)
		err = meta_fsck_inodes(f->m, iv, ni);
	if (!err && ne)
		err = meta_fsck_entries(f->m, ev, ne);
	ni = ne = 0;
	for (size_t i = 0; !err && i < f->ncand; i++) {
		struct cand *c = &f->cands[i];
		if (inode_kind(c->kind))
			c->now = iv[ni++];
		if (entry_kind(c->kind)) {
			c->ent = ev[ne++];
			c->ent.name = c->name;
		}
	}
	free(ev);
	free(iv);
	return err;
}

/* Sliceref candidates: counted again by a second walk, and confirmed
 * when that agrees with the first and sliceref did not move meanwhile. */
struct recount {
	struct fsck *f;
	struct hash h; /* of struct rc */
};
struct rc {
	struct hash_node hn;
	int64_t refs;
};

static int on_recount(void *arg, const struct meta_ref *mr)
{
	struct recount *rc = arg;
	struct hash_node *n;

	fsck_tick(rc->f);
	if (mr->from != META_REF_CHUNK ||
	    !(n = hash_find(&rc->h, mr->s.id, NULL, NULL)))
		return 0;
	hash_entry(n, struct rc, hn)->refs++;
	return 0;
}

static int confirm_slicerefs(struct fsck *f)
{
	struct recount rc = {f, {0}};
	size_t n = 0;
	uint64_t *ids = NULL;
	int64_t *before = NULL, *after = NULL;
	int err;

	for (size_t i = 0; i < f->ncand; i++)
		n += f->cands[i].kind == FSCK_SLICEREF;
	if (!n)
		return 0;
	if ((err = hash_init(&rc.h, 8)))
		return err;
	ids = calloc(n, sizeof *ids);
	before = calloc(n, sizeof *before);
	after = calloc(n, sizeof *after);
	if (!ids || !before || !after) {
		err = ENOMEM;
		goto out;
	}
	n = 0;
	for (size_t i = 0; i < f->ncand; i++) {
		struct cand *c = &f->cands[i];
		if (c->kind != FSCK_SLICEREF)
			continue;
		struct rc *x = fsck_alloc(f, sizeof *x);
		if (!x) {
			err = ENOMEM;
			goto out;
		}
		if (!hash_find(&rc.h, c->id, NULL, NULL))
			hash_insert(&rc.h, &x->hn, c->id);
		ids[n++] = c->id;
	}
	fsck_phase(f, "references again");
	err = meta_fsck_slicerefs(f->m, ids, n, before);
	if (!err)
		err = fsck_refs(f, on_recount, &rc);
	if (!err)
		err = meta_fsck_slicerefs(f->m, ids, n, after);
	n = 0;
	for (size_t i = 0; !err && i < f->ncand; i++) {
		struct cand *c = &f->cands[i];
		if (c->kind != FSCK_SLICEREF)
			continue;
		struct hash_node *h = hash_find(&rc.h, c->id, NULL, NULL);
		int64_t again = hash_entry(h, struct rc, hn)->refs;
		c->state = again == c->found && before[n] == c->was &&
				   after[n] == c->was
			       ? C_CONFIRMED
			       : C_GONE;
		n++;
	}
out:
	free(after);
	free(before);
	free(ids);
	hash_release(&rc.h);
	return err;
}

/* The registered sessions now. */
static int on_live_sid(void *arg, uint64_t sid, enum meta_sid_from from)
{
	struct fsck *f = arg;
	struct sidx *s;
	if (from != META_SID_SESSION)
		return 0;
	if ((s = sid_get(f, sid)))
		s->live = 2;
	return s ? 0 : ENOMEM;
}

/* Decide each candidate on what is there now. */
static int confirm(struct fsck *f)
{
	int err;
	int sids_read = 0;

	fsck_phase(f, "confirm");
	if ((err = reread(f)) || (err = confirm_slicerefs(f)))
		return err;
	for (size_t i = 0; i < f->ncand && !err; i++) {
		struct cand *c = &f->cands[i];
		const struct meta_fsck_inode *now = &c->now;
		const struct meta_fsck_entry *e = &c->ent;
		int ok = 0, still, stray;
		uint64_t t, d;

		if (c->state != C_OPEN)
			continue;
		/* not changed since the walk began */
		int fresh =
		    now->exists && !now->corrupt &&
		    (now->a.ctime < f->t0 ||
		     (now->a.ctime == f->t0 && now->a.ctimens < f->t0ns));
		int same_entry = e->exists && e->ino == c->ino;
		switch (c->kind) {
		case FSCK_INODE_CORRUPT:
			ok = now->exists && now->corrupt;
			break;
		case FSCK_NLINK:
		case FSCK_DIR_NLINK:
		case FSCK_DIR_NAMES:
		case FSCK_LOOP:
			ok = fresh && now->a.nlink == c->nlink;
			break;
		case FSCK_ORPHAN:
			ok = fresh && now->a.nlink == c->nlink;
			if (ok && now->open && now->a.type != META_DIR) {
				/* unlinked, open: fine at nlink 0 */
				ok = now->a.nlink != 0;
				c->kind = FSCK_NLINK;
				c->expected = 0;
			}
			break;
		case FSCK_DIR_PARENT:
			ok = same_entry && now->exists && !now->corrupt &&
			     now->a.parent == (uint64_t)c->found &&
			     now->a.parent != c->dir;
			break;
		case FSCK_ENTRY_NO_INODE:
			ok = same_entry && !now->exists;
			break;
		case FSCK_ENTRY_TYPE:
			ok = same_entry && e->type == c->etype && now->exists &&
			     now->a.type == c->itype;
			break;
		case FSCK_ENTRY_CORRUPT:
			ok = e->exists && (e->val_len < 2 || e->val_len > 9);
			break;
		case FSCK_ENTRY_NO_DIR:
			ok = !now->exists ||
			     (!now->corrupt && now->a.type != META_DIR);
			break;
		case FSCK_STRAY_CHUNKS:
			err = meta_fsck_stray_chunks(f->m, c->ino, c->idx,
						     c->tail, &stray);
			ok = stray;
			break;
		case FSCK_SLICE_DEAD:
			still = fsck_still_referenced(f, c->ino, c->idx,
						      c->tail ? 0 : c->id,
						      c->tail ? c->id : 0);
			err = still < 0 ? -still : 0;
			ok = still > 0;
			break;
		case FSCK_PACK_TOTAL:
			err = meta_pack_usage(f->m, c->id, &t, &d);
			ok = err == ENOENT;
			err = err == ENOENT ? 0 : err;
			if (ok) {
				still = fsck_still_referenced(f, c->ino, c->idx,
							      0, c->id);
				err = still < 0 ? -still : 0;
				ok = still > 0;
			}
			break;
		case FSCK_PACK_DEAD:
			err = meta_pack_usage(f->m, c->id, &t, &d);
			ok = !err && t < META_PACK_OPEN && d > t;
			err = err == ENOENT ? 0 : err;
			break;
		case FSCK_STAGING:
		case FSCK_SESSION:
		case FSCK_OPEN_GONE:
			if (!sids_read) {
				err = meta_scan_sids(f->m, on_live_sid, f);
				sids_read = 1;
			}
			if (!err) {
				struct sidx *s = sid_get(f, c->id);
				ok = s && s->live != 2;
			}
			if (!err && ok && c->kind == FSCK_OPEN_GONE)
				err = meta_fsck_open(f->m, c->id, c->ino, &ok);
			break;
		case FSCK_DELFILE_LIVE:
			ok = now->exists;
			if (ok)
				err = meta_fsck_delfile(
				    f->m, c->ino, (uint64_t)c->found, &ok);
			break;
		case FSCK_CHUNK_PAST_END:
			ok =
			    fresh && now->a.type == META_FILE &&
			    now->a.length <= (uint64_t)c->idx * META_CHUNK_SIZE;
			if (ok) {
				still = fsck_still_referenced(f, c->ino, c->idx,
							      0, 0);
				err = still < 0 ? -still : 0;
				ok = still > 0;
			}
			break;
		case FSCK_PENDINGSPACE: {
			int64_t p, sum;
			err = meta_fsck_pending(f->m, &p, &sum);
			ok = !err && p == c->found && sum == c->expected;
			break;
		}
		case FSCK_TOTALINODES:
		case FSCK_USEDSPACE:
			ok = 1;
			break;
		case FSCK_TRASH:
			err = meta_trash_ino(f->m, &t);
			ok = !err && t == c->ino &&
			     (!now->exists ||
			      (!now->corrupt && now->a.type != META_DIR));
			break;
		case FSCK_OBJECT_MISSING:
		case FSCK_OBJECT_SIZE:
		case FSCK_OBJECT_CORRUPT:
			err = fsck_objects_confirm(f, c);
			ok = c->state != C_GONE;
			break;
		default:
			break;
		}
		c->state = ok ? C_CONFIRMED : C_GONE;
		if (!ok)
			f->r->changed++;
	}
	for (size_t i = 0; i < f->ncand; i++)
		if (f->cands[i].kind == FSCK_SLICEREF &&
		    f->cands[i].state == C_GONE)
			f->r->changed++;
	return err;
}

/* ---- the run ----------------------------------------------------------- */

static void release(struct fsck *f)
{
	for (size_t i = 0; i < f->ncand; i++) {
		free(f->cands[i].name);
		free(f->cands[i].key);
	}
	free(f->cands);
	free(f->files);
	free(f->snames);
	free(f->top_path);
	fsck_paths_free(f);
	hash_release(&f->inos);
	hash_release(&f->slices);
	hash_release(&f->strays);
	hash_release(&f->sids);
	while (f->arenas) {
		struct arena *a = f->arenas;
		f->arenas = a->next;
		free(a);
	}
}

int fsck_refs(struct fsck *f, meta_ref_fn fn, void *arg)
{
	return f->o->path ? fsck_path_refs(f, fn, arg)
			  : meta_scan_refs(f->m, fn, arg);
}

/* The tree under o->path, walked, and the first judgement. */
static int walk_path(struct fsck *f)
{
	int err;

	fsck_phase(f, "entries");
	if ((err = fsck_path_walk(f)))
		return err;
	fsck_phase(f, "references");
	if ((err = fsck_path_refs(f, fsck_on_ref, f)) ||
	    (err = meta_scan_delfiles(f->m, fsck_on_delfile, f)) ||
	    (err = meta_scan_refs_pending(f->m, fsck_on_ref, f)) ||
	    (err = fsck_path_counts(f)))
		return err;
	fsck_phase(f, "judging");
	if ((err = judge_slices(f)))
		return err;
	return judge_inodes(f);
}

/* pendingspace against the sessionpending fields it sums. */
static int judge_pending(struct fsck *f)
{
	int64_t p, sum;
	struct cand *c;
	int err = meta_fsck_pending(f->m, &p, &sum);

	if (err || p == sum)
		return err;
	if (!(c = fsck_cand(f, FSCK_PENDINGSPACE)))
		return ENOMEM;
	c->found = p;
	c->expected = sum;
	return 0;
}

/* The trash's key against the inodes found: a key naming no directory
 * (a trash deleted behind the engine's back) makes every removal final
 * and leaves its counts behind (meta_trash.h). */
static int judge_trash(struct fsck *f)
{
	uint64_t t;
	struct ino *x;
	struct cand *c;
	int err = meta_trash_ino(f->m, &t);

	if (err || !t)
		return err;
	x = fsck_ino(f, t, 0);
	if (ino_exists(x) && ((x->flags & I_CORRUPT) || x->type == META_DIR))
		return 0;
	if (!(c = fsck_cand(f, FSCK_TRASH)))
		return ENOMEM;
	c->ino = t;
	return 0;
}

/* Everything the metadata says, walked, and the first judgement. */
static int walk(struct fsck *f)
{
	struct dirent_state ds = {f, 0};
	struct cand *c;
	int err;

	if ((err = meta_server_time(f->m, &f->t0, &f->t0ns)))
		return err;
	if (f->o->path)
		return walk_path(f);
	if ((err = meta_fsck_counters(f->m, &f->c0_inodes, &f->c0_used)))
		return err;
	fsck_phase(f, "sessions");
	if ((err = meta_scan_sids(f->m, on_sid, f)) ||
	    (err = meta_scan_opens(f->m, on_open, f)) ||
	    (err = judge_pending(f)))
		return err;
	fsck_phase(f, "inodes");
	if ((err = meta_scan_inodes(f->m, fsck_on_inode, f)) ||
	    (err = meta_scan_trees(f->m, on_tree, f)) ||
	    (err = meta_scan_delfiles(f->m, fsck_on_delfile, f)))
		return err;
	fsck_phase(f, "entries");
	if ((err = meta_scan_dirents(f->m, fsck_on_dirent, &ds)))
		return err;
	fsck_phase(f, "references");
	if ((err = meta_scan_refs_lists(f->m, fsck_on_ref, f)) ||
	    (err = meta_scan_slicerefs(f->m, on_sliceref, f)) ||
	    (err = meta_scan_packs(f->m, fsck_on_pack, f)))
		return err;
	if ((err = meta_fsck_counters(f->m, &f->c1_inodes, &f->c1_used)))
		return err;
	fsck_phase(f, "judging");
	if ((err = judge_slices(f)) || (err = judge_strays_and_sids(f)) ||
	    (err = judge_inodes(f)) || (err = judge_trash(f)))
		return err;
	if (f->c0_inodes != f->c1_inodes || f->c0_used != f->c1_used) {
		f->r->counters_changed = 1;
		return 0;
	}
	if (f->c1_inodes != (int64_t)f->r->inodes) {
		if (!(c = fsck_cand(f, FSCK_TOTALINODES)))
			return ENOMEM;
		c->found = f->c1_inodes;
		c->expected = (int64_t)f->r->inodes;
	}
	if (f->c1_used != (int64_t)f->used) {
		if (!(c = fsck_cand(f, FSCK_USEDSPACE)))
			return ENOMEM;
		c->found = f->c1_used;
		c->expected = (int64_t)f->used;
	}
	return 0;
}

int fsck_run(struct meta *m, struct objstore *store, const struct fsck_opts *o,
	     struct fsck_report *r)
{
	struct fsck f = {.m = m, .store = store, .o = o, .r = r};
	int err;

	memset(r, 0, sizeof *r);
	if (o->threads < 0 || o->threads > 256 || !o->block_size ||
	    ((o->objects || o->deep) && !store))
		return EINVAL;
	if ((err = hash_init(&f.inos, 16)) ||
	    (err = hash_init(&f.slices, 16)) ||
	    (err = hash_init(&f.strays, 4)) || (err = hash_init(&f.sids, 4))) {
		release(&f);
		return err;
	}
	err = walk(&f);
	if (!err && (o->objects || o->deep)) {
		fsck_phase(&f, "store");
		err = fsck_objects(&f);
	}
	if (!err && o->deep) {
		fsck_phase(&f, "reading");
		err = fsck_deep(&f);
	}
	if (!err)
		err = confirm(&f);
	if (!err)
		err = fsck_settle(&f);
	fsck_phase(&f, "done");
	release(&f);
	return err;
}
