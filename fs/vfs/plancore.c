/*
 * plancore.c - the bookkeeping of the epoch plans (plancore.h): the
 * lists, the readers' places, the windows, what to fetch and list next,
 * the ranks of keys, the figures. No lock and no I/O: plan.c calls it
 * with its lock held.
 *
 * Two indexes find the positions from what the rest of the client has:
 * an inode (an open) leads to the chain of its positions in every plan
 * (through pc_file.next), and a key's hash (the disk cache's ranker) to
 * the positions whose files hold that object (a pack is held by many).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "fs/store/diskcache.h"
#include "fs/vfs/plancore.h"
#include "lib/hash.h"
#include "lib/log.h"

#define POS_BITS 26
_Static_assert(PLAN_MAX <= 64, "a slot is 6 bits of a pc_ref");
_Static_assert(PLAN_FILES_MAX < (1u << POS_BITS), "a position is 26 bits");

/* an inode's positions: the head of their chain */
struct pc_ino {
	struct hash_node hn;
	uint64_t ino;
	pc_ref head;
};

/* an object's positions (the files that hold it) */
struct pc_obj {
	struct hash_node hn;
	uint64_t h;
	uint32_t n, cap;
	union {
		pc_ref one; /* cap 1 */
		pc_ref *many;
	} u;
};

struct plancore {
	uint64_t window_max;
	uint64_t next_id;
	struct pc_plan *slot[PLAN_MAX];
	uint64_t used; /* bit s set: slot[s] holds a plan (PLAN_MAX 64) */
	size_t nplans;
	uint64_t files;	     /* all plans' positions */
	uint64_t held;	     /* all plans' files held (plancore_add_at) */
	unsigned rr;	     /* the slot the next pick starts at */
	int64_t build_until; /* a list is being added to until then */
	struct hash inos, objs;
	struct plans_stats st; /* the counters since open */
};

static pc_ref ref_of(int slot, size_t pos)
{
	return (uint32_t)slot << POS_BITS | (uint32_t)pos;
}

static int ref_slot(pc_ref r)
{
	return (int)(r >> POS_BITS);
}

static size_t ref_pos(pc_ref r)
{
	return r & ((1u << POS_BITS) - 1);
}

static struct pc_file *file_at(const struct plancore *c, pc_ref r)
{
	return &c->slot[ref_slot(r)]->f[ref_pos(r)];
}

/* A plan was made, cleared or added to at now (0: not known): its list
 * is taken as still coming for PC_BUILD_NS more. */
static void building(struct plancore *c, int64_t now)
{
	if (now && now + PC_BUILD_NS > c->build_until)
		c->build_until = now + PC_BUILD_NS;
}

static uint64_t off_at(const struct pc_plan *p, size_t i)
{
	return i < p->n ? p->f[i].off : p->total;
}

static uint64_t file_len(const struct pc_plan *p, size_t i)
{
	return off_at(p, i + 1) - p->f[i].off;
}

uint64_t plancore_key_hash(const char *key)
{
	return XXH3_64bits(key, strlen(key));
}

void plancore_demote_release(struct pc_demote *d)
{
	for (size_t i = 0; i < d->n; i++)
		free(d->key[i]);
	free(d->key);
	for (size_t i = 0; i < d->nseen; i++)
		free(d->seen[i].names);
	memset(d, 0, sizeof(*d));
}

/* ---- the indexes --------------------------------------------------- */

static int ino_match(const struct hash_node *n, const void *key)
{
	return hash_entry(n, struct pc_ino, hn)->ino == *(const uint64_t *)key;
}

static struct pc_ino *ino_find(const struct plancore *c, uint64_t ino)
{
	struct hash_node *n = hash_find(&c->inos, ino, ino_match, &ino);
	return n ? hash_entry(n, struct pc_ino, hn) : NULL;
}

static int ino_link(struct plancore *c, pc_ref r, uint64_t ino)
{
	struct pc_ino *pi = ino_find(c, ino);

	if (!pi) {
		if (!(pi = malloc(sizeof(*pi))))
			return ENOMEM;
		pi->ino = ino;
		pi->head = PC_NOREF;
		hash_insert(&c->inos, &pi->hn, ino);
	}
	file_at(c, r)->next = pi->head;
	pi->head = r;
	return 0;
}

static void ino_unlink(struct plancore *c, pc_ref r, uint64_t ino)
{
	struct pc_ino *pi = ino_find(c, ino);
	pc_ref *pp;

	gr_assert(pi);
	for (pp = &pi->head; *pp != r; pp = &file_at(c, *pp)->next)
		gr_assert(*pp != PC_NOREF);
	*pp = file_at(c, r)->next;
	if (pi->head == PC_NOREF) {
		hash_remove(&c->inos, &pi->hn);
		free(pi);
	}
}

static int obj_match(const struct hash_node *n, const void *key)
{
	return hash_entry(n, struct pc_obj, hn)->h == *(const uint64_t *)key;
}

static struct pc_obj *obj_find(const struct plancore *c, uint64_t h)
{
	struct hash_node *n = hash_find(&c->objs, h, obj_match, &h);
	return n ? hash_entry(n, struct pc_obj, hn) : NULL;
}

static pc_ref *obj_refs(struct pc_obj *o)
{
	return o->cap == 1 ? &o->u.one : o->u.many;
}

static int obj_use(struct plancore *c, uint64_t h, pc_ref r)
{
	struct pc_obj *o = obj_find(c, h);

	if (!o) {
		if (!(o = calloc(1, sizeof(*o))))
			return ENOMEM;
		o->h = h;
		o->cap = 1;
		hash_insert(&c->objs, &o->hn, h);
	}
	if (o->n == o->cap) {
		uint32_t cap = o->cap * 2;
		pc_ref *m = malloc(cap * sizeof(*m));
		if (!m) {
			if (!o->n) {
				hash_remove(&c->objs, &o->hn);
				free(o);
			}
			return ENOMEM;
		}
		memcpy(m, obj_refs(o), o->n * sizeof(*m));
		if (o->cap > 1)
			free(o->u.many);
		o->u.many = m;
		o->cap = cap;
	}
	obj_refs(o)[o->n++] = r;
	return 0;
}

static void obj_unuse(struct plancore *c, uint64_t h, pc_ref r)
{
	struct pc_obj *o = obj_find(c, h);
	pc_ref *v;
	uint32_t i;

	gr_assert(o);
	v = obj_refs(o);
	for (i = 0; i < o->n && v[i] != r; i++)
		;
	gr_assert(i < o->n);
	v[i] = v[--o->n];
	if (o->n)
		return;
	hash_remove(&c->objs, &o->hn);
	if (o->cap > 1)
		free(o->u.many);
	free(o);
}

static const uint64_t *keys_of(const struct pc_file *f)
{
	return f->nkeys == 1 ? &f->key.one : f->key.many;
}

static void keys_drop(struct plancore *c, pc_ref r, struct pc_file *f)
{
	const uint64_t *k = keys_of(f);

	for (uint32_t i = 0; i < f->nkeys; i++)
		obj_unuse(c, k[i], r);
	if (f->nkeys > 1)
		free(f->key.many);
	f->nkeys = 0;
	f->flags &= ~PF_LISTED;
}

/* The hashes of the file at r become keys[0..n): ENOMEM leaves it with
 * none (not listed). */
static int keys_set(struct plancore *c, pc_ref r, const uint64_t *keys,
		    size_t n)
{
	struct pc_file *f = file_at(c, r);
	uint64_t *many = NULL;
	size_t i;

	if (n > 1 && !(many = malloc(n * sizeof(*many))))
		return ENOMEM;
	keys_drop(c, r, f);
	for (i = 0; i < n; i++)
		if (obj_use(c, keys[i], r))
			break;
	if (i < n) {
		while (i-- > 0)
			obj_unuse(c, keys[i], r);
		free(many);
		return ENOMEM;
	}
	if (n == 1)
		f->key.one = keys[0];
	else if (n > 1)
		f->key.many = memcpy(many, keys, n * sizeof(*many));
	f->nkeys = (uint32_t)n;
	return 0;
}

/* ---- plans ----------------------------------------------------------- */

int plancore_open(uint64_t window_max, struct plancore **out)
{
	struct plancore *c = calloc(1, sizeof(*c));

	if (!c)
		return ENOMEM;
	c->window_max = window_max ? window_max : 1;
	c->next_id = 1;
	if (hash_init(&c->inos, 10) || hash_init(&c->objs, 10)) {
		hash_release(&c->inos);
		free(c);
		return ENOMEM;
	}
	*out = c;
	return 0;
}

void plancore_close(struct plancore *c)
{
	if (!c)
		return;
	for (int s = 0; s < PLAN_MAX; s++)
		if (c->slot[s])
			plancore_end(c, c->slot[s]);
	hash_release(&c->inos);
	hash_release(&c->objs);
	free(c);
}

int plancore_new(struct plancore *c, int64_t now, struct pc_plan **out)
{
	struct pc_plan *p;
	int s;

	for (s = 0; s < PLAN_MAX && c->slot[s]; s++)
		;
	if (s == PLAN_MAX)
		return ENOSPC;
	if (!(p = calloc(1, sizeof(*p))))
		return ENOMEM;
	p->id = c->next_id++;
	p->slot = s;
	p->window =
	    PLAN_WINDOW_MIN < c->window_max ? PLAN_WINDOW_MIN : c->window_max;
	p->last_ns = now;
	building(c, now);
	c->slot[s] = p;
	c->used |= 1ull << s;
	c->nplans++;
	c->st.made++;
	*out = p;
	return 0;
}

struct pc_plan *plancore_find(struct plancore *c, uint64_t id)
{
	for (int s = 0; s < PLAN_MAX; s++)
		if (c->slot[s] && c->slot[s]->id == id)
			return c->slot[s];
	return NULL;
}

struct pc_plan *plancore_next(struct plancore *c, const struct pc_plan *prev)
{
	for (int s = prev ? prev->slot + 1 : 0; s < PLAN_MAX; s++)
		if (c->slot[s])
			return c->slot[s];
	return NULL;
}

/* Does a plan need the object of hash h: ahead of its place, or in its
 * trail for a file not yet opened (a reader out of order)? */
static int needed(const struct plancore *c, uint64_t h)
{
	struct pc_obj *o;

	if (plancore_rank(c, h) != DISKCACHE_RANK_NONE)
		return 1;
	if (!(o = obj_find(c, h)))
		return 0;
	const pc_ref *v = obj_refs(o);
	for (uint32_t i = 0; i < o->n; i++) {
		const struct pc_plan *p = c->slot[ref_slot(v[i])];
		size_t pos = ref_pos(v[i]);
		if (pos >= p->trail && !(p->f[pos].flags & PF_OPENED))
			return 1;
	}
	return 0;
}

/* With d, the keys of f's objects that no plan needs are to be demoted;
 * its names are dropped. early: only when no plan needs any of them (else
 * f is left as it was, for its settle). */
static void demote_keys(struct plancore *c, struct pc_file *f,
			struct pc_demote *d, int early)
{
	for (char *k = f->names; early && k && *k; k += strlen(k) + 1)
		if (needed(c, plancore_key_hash(k)))
			return;
	for (char *k = f->names; d && k && *k; k += strlen(k) + 1) {
		if (needed(c, plancore_key_hash(k)))
			continue;
		if (d->n == d->cap) {
			size_t cap = d->cap ? 2 * d->cap : 16;
			char **v = realloc(d->key, cap * sizeof(*v));
			if (!v)
				break;
			d->key = v;
			d->cap = cap;
		}
		if (!(d->key[d->n] = strdup(k)))
			break;
		d->n++;
		c->st.demoted++;
	}
	free(f->names);
	f->names = NULL;
}

/* Settle position i of p (it leaves the trail, or the list): wasted if
 * prefetched and never opened; with d, the keys of its objects that no
 * plan needs are to be demoted (unless that was done already). */
static void settle(struct plancore *c, struct pc_plan *p, size_t i,
		   struct pc_demote *d)
{
	struct pc_file *f = &p->f[i];

	if ((f->flags & (PF_PREFETCHED | PF_OPENED)) == PF_PREFETCHED) {
		p->wasted += file_len(p, i);
		c->st.wasted += file_len(p, i);
	}
	demote_keys(c, f, d, 0);
}

/* Drop positions [n0, n) of p; settled first when count (a clear, an
 * end: never demoted, the next list may name them). */
static void truncate_at(struct plancore *c, struct pc_plan *p, size_t n0,
			int count)
{
	uint64_t total = off_at(p, n0);

	for (size_t i = p->n; i-- > n0;) {
		struct pc_file *f = &p->f[i];
		pc_ref r = ref_of(p->slot, i);
		if (count && i >= p->trail)
			settle(c, p, i, NULL);
		free(f->names);
		keys_drop(c, r, f);
		ino_unlink(c, r, f->ino);
	}
	c->files -= p->n - n0;
	p->n = n0;
	p->total = total;
}

int plancore_add(struct plancore *c, struct pc_plan *p, const struct pc_add *v,
		 size_t n, int64_t now)
{
	size_t n0 = p->n;

	if (c->files + c->held + n > PLAN_FILES_MAX)
		return ENOSPC;
	if (p->n + n > p->cap) {
		size_t cap = p->cap ? p->cap : 64;
		while (cap < p->n + n)
			cap *= 2;
		struct pc_file *f = realloc(p->f, cap * sizeof(*f));
		if (!f)
			return ENOMEM;
		p->f = f;
		p->cap = cap;
	}
	for (size_t i = 0; i < n; i++) {
		struct pc_file *f = &p->f[p->n];
		pc_ref r = ref_of(p->slot, p->n);
		memset(f, 0, sizeof(*f));
		f->ino = v[i].ino;
		f->off = p->total;
		if (ino_link(c, r, f->ino))
			goto undo;
		p->n++;
		c->files++;
		p->total += v[i].len;
		if (v[i].nkeys && keys_set(c, r, v[i].keys, v[i].nkeys))
			goto undo;
		if (v[i].listed)
			f->flags |= PF_LISTED;
	}
	p->last_ns = now;
	building(c, now);
	return 0;
undo:
	truncate_at(c, p, n0, 0);
	return ENOMEM;
}

/* Append the files held for the positions from p->n on. */
static void drain(struct plancore *c, struct pc_plan *p, int64_t now)
{
	while (p->nheld) {
		struct pc_held *h = &p->held[p->n % PC_HOLD_MAX];
		if (!h->used)
			return;
		c->held--; /* its room is its own */
		if (plancore_add(c, p, &h->v, 1, now)) {
			c->held++; /* ENOMEM: held still, for the next add */
			return;
		}
		free((uint64_t *)h->v.keys);
		memset(h, 0, sizeof(*h));
		p->nheld--;
	}
	free(p->held);
	p->held = NULL;
}

int plancore_add_at(struct plancore *c, struct pc_plan *p, size_t pos,
		    const struct pc_add *v, int64_t now)
{
	struct pc_held *h;
	uint64_t *keys = NULL;
	int err;

	if (pos < p->n)
		return EEXIST;
	if (pos - p->n >= PC_HOLD_MAX)
		return EAGAIN;
	building(c, now);
	if (pos == p->n) {
		if ((err = plancore_add(c, p, v, 1, now)))
			return err;
		drain(c, p, now);
		return 0;
	}
	if (c->files + c->held + 1 > PLAN_FILES_MAX)
		return ENOSPC;
	if (!p->held && !(p->held = calloc(PC_HOLD_MAX, sizeof(*p->held))))
		return ENOMEM;
	h = &p->held[pos % PC_HOLD_MAX];
	if (h->used)
		return EEXIST;
	if (v->nkeys && !(keys = malloc(v->nkeys * sizeof(*keys))))
		return ENOMEM;
	if (v->nkeys)
		memcpy(keys, v->keys, v->nkeys * sizeof(*keys));
	h->v = *v;
	h->v.keys = keys;
	h->used = 1;
	p->nheld++;
	c->held++;
	return 0;
}

void plancore_clear(struct plancore *c, struct pc_plan *p, int64_t now)
{
	for (size_t i = 0; p->held && i < PC_HOLD_MAX; i++)
		free((uint64_t *)p->held[i].v.keys);
	free(p->held);
	p->held = NULL;
	c->held -= p->nheld;
	p->nheld = 0;
	truncate_at(c, p, 0, 1);
	free(p->f);
	p->f = NULL;
	p->cap = 0;
	p->place = p->next = p->lnext = p->trail = p->dnext = 0;
	p->ahead = 0;
	p->grown_at = 0;
	p->stalled = 0;
	p->gen++;
	p->last_ns = now;
	building(c, now);
}

void plancore_end(struct plancore *c, struct pc_plan *p)
{
	plancore_clear(c, p, 0);
	c->slot[p->slot] = NULL;
	c->used &= ~(1ull << p->slot);
	c->nplans--;
	c->st.ended++;
	free(p);
}

/* ---- windows and ranks ------------------------------------------------ */

/* Plans with files left: they share window_max. */
/* Plans whose readers have files left (at least 1). Asked for every
 * key the disk cache ranks: the used slots alone are looked at. */
static size_t active(const struct plancore *c)
{
	size_t n = 0;

	for (uint64_t u = c->used; u; u &= u - 1) {
		const struct pc_plan *p = c->slot[__builtin_ctzll(u)];
		n += p->place < p->n;
	}
	return n ? n : 1;
}

static uint64_t window_of(const struct plancore *c, const struct pc_plan *p,
			  size_t nactive)
{
	uint64_t share = c->window_max / nactive;
	uint64_t w = p->window < share ? p->window : share;
	return w ? w : 1;
}

uint64_t plancore_rank_at(const struct plancore *c, uint64_t h, int64_t now)
{
	uint64_t r = plancore_rank(c, h);

	return r == DISKCACHE_RANK_NONE && now < c->build_until ? PC_RANK_COMING
								: r;
}

uint64_t plancore_window(const struct plancore *c, const struct pc_plan *p)
{
	return window_of(c, p, active(c));
}

uint64_t plancore_rank(const struct plancore *c, uint64_t h)
{
	struct pc_obj *o = obj_find(c, h);
	uint64_t best = DISKCACHE_RANK_NONE;
	size_t nactive = 0;

	if (!o)
		return best;
	const pc_ref *v = obj_refs(o);
	for (uint32_t i = 0; i < o->n; i++) {
		const struct pc_plan *p = c->slot[ref_slot(v[i])];
		size_t pos = ref_pos(v[i]);
		if (pos < p->place)
			continue;
		if (!nactive)
			nactive = active(c);
		uint64_t d = p->f[pos].off - off_at(p, p->place);
		if (d < window_of(c, p, nactive))
			return DISKCACHE_RANK_KEEP;
		if (d < best)
			best = d;
	}
	return best;
}

int plancore_passed(const struct plancore *c, uint64_t h)
{
	struct pc_obj *o = obj_find(c, h);

	if (!o)
		return 0;
	const pc_ref *v = obj_refs(o);
	for (uint32_t i = 0; i < o->n; i++)
		if (ref_pos(v[i]) < c->slot[ref_slot(v[i])]->place)
			return 1;
	return 0;
}

/* ---- readers ------------------------------------------------------------ */

/* The readers waited on the store: the window doubles, at most once per
 * half window of their progress, up to window_max. */
static void grow(struct plancore *c, struct pc_plan *p)
{
	uint64_t base = off_at(p, p->place);

	if (p->window >= c->window_max || base - p->grown_at < p->window / 2)
		return;
	p->window =
	    p->window * 2 < c->window_max ? p->window * 2 : c->window_max;
	p->grown_at = base;
}

static void count_open(struct plancore *c, struct pc_plan *p, size_t i,
		       int64_t now)
{
	struct pc_file *f = &p->f[i];
	uint64_t len = file_len(p, i);

	f->flags |= PF_OPENED;
	p->last_ns = now;
	if (!(f->flags & PF_READY)) {
		p->waited++;
		c->st.waited++;
		grow(c, p);
		return;
	}
	p->ready++;
	c->st.ready++;
	if (f->flags & PF_PREFETCHED) {
		p->used += len;
		c->st.used += len;
	}
}

/* Retire what the place left a window's bytes behind; demote sooner the
 * objects of the files opened that it left PC_TRAIL_FILES files and
 * PC_TRAIL_BYTES behind (their readers are done with them: kept a
 * window longer, they would take the room of files needed ahead). */
static void retire(struct plancore *c, struct pc_plan *p, struct pc_demote *d)
{
	uint64_t base = off_at(p, p->place), w = plancore_window(c, p);
	uint64_t near = w < PC_TRAIL_BYTES ? w : PC_TRAIL_BYTES;

	if (p->dnext < p->trail)
		p->dnext = p->trail;
	while (p->dnext + PC_TRAIL_FILES < p->place &&
	       base - p->f[p->dnext].off > near) {
		if (p->f[p->dnext].flags & PF_OPENED)
			demote_keys(c, &p->f[p->dnext], d, 1);
		p->dnext++;
	}
	while (p->trail < p->place && base - p->f[p->trail].off > w)
		settle(c, p, p->trail++, d);
}

int plancore_naming(const struct plancore *c, uint64_t ino)
{
	struct pc_ino *pi = ino_find(c, ino);

	if (!pi)
		return 0;
	for (pc_ref r = pi->head; r != PC_NOREF; r = file_at(c, r)->next)
		if (ref_slot(r) != ref_slot(pi->head))
			return 2;
	return 1;
}

static int in_tree(const int32_t *tree, size_t n, int32_t pid)
{
	for (size_t i = 0; pid && i < n; i++)
		if (tree[i] == pid)
			return 1;
	return 0;
}

int plancore_opened(struct plancore *c, uint64_t ino, const int32_t *tree,
		    size_t ntree, int64_t now, struct pc_demote *d)
{
	struct pc_ino *pi = ino_find(c, ino);
	/* per slot: 0 no match, 1 unopened in the trail, 2 at or after the
	 * place; q[] the position */
	unsigned char kind[PLAN_MAX] = {0};
	size_t q[PLAN_MAX];
	int mine = 0, moved = 0;

	if (!pi)
		return 0;
	for (pc_ref r = pi->head; r != PC_NOREF; r = file_at(c, r)->next) {
		int s = ref_slot(r);
		size_t pos = ref_pos(r);
		const struct pc_plan *p = c->slot[s];
		if (pos >= p->place) {
			if (kind[s] < 2 || pos < q[s])
				q[s] = pos;
			kind[s] = 2;
		} else if (kind[s] < 2 && pos >= p->trail &&
			   !(p->f[pos].flags & PF_OPENED) &&
			   (kind[s] == 0 || pos < q[s])) {
			q[s] = pos;
			kind[s] = 1;
		}
	}
	for (int s = 0; s < PLAN_MAX; s++)
		mine |= kind[s] && in_tree(tree, ntree, c->slot[s]->pid);
	for (int s = 0; s < PLAN_MAX; s++) {
		struct pc_plan *p = c->slot[s];
		if (!kind[s] || (mine && !in_tree(tree, ntree, p->pid)))
			continue;
		p->stalled = 0; /* the files it passed may give room */
		if (kind[s] == 2) {
			for (size_t i = p->place; i <= q[s]; i++)
				if (p->f[i].flags & PF_READY)
					p->ahead -= file_len(p, i);
			p->place = q[s] + 1;
		}
		count_open(c, p, q[s], now);
		const struct pc_file *f = &p->f[q[s]];
		if (d && f->names &&
		    (f->flags & (PF_READY | PF_PREFETCHED)) ==
			(PF_READY | PF_PREFETCHED) &&
		    d->nseen < PLAN_MAX) {
			size_t len = 1;
			for (const char *k = f->names; *k; k += strlen(k) + 1)
				len += strlen(k) + 1;
			struct pc_seen *sn = &d->seen[d->nseen];
			if ((sn->names = malloc(len))) {
				memcpy(sn->names, f->names, len);
				sn->id = p->id;
				sn->gen = p->gen;
				sn->pos = q[s];
				d->nseen++;
			}
		}
		retire(c, p, d);
		moved++;
	}
	return moved;
}

/* ---- work ---------------------------------------------------------------- */

/* A list job for p: files from lnext on, past its window (the files
 * inside it are listed by their fetch). */
static int pick_list(struct pc_plan *p, uint64_t w, struct pc_job *j)
{
	uint64_t base = off_at(p, p->place);

	if (p->lnext < p->next)
		p->lnext = p->next;
	while (p->lnext < p->n && ((p->f[p->lnext].flags &
				    (PF_LISTED | PF_LISTING | PF_STARTED)) ||
				   p->f[p->lnext].off - base < w))
		p->lnext++;
	if (p->lnext >= p->n)
		return 0;
	memset(j, 0, sizeof(*j));
	j->id = p->id;
	j->gen = p->gen;
	j->pos = p->lnext;
	j->list = 1;
	for (; j->count < PC_LIST_BATCH_MAX && p->lnext < p->n;
	     j->count++, p->lnext++) {
		p->f[p->lnext].flags |= PF_LISTING;
		j->ino[j->count] = p->f[p->lnext].ino;
		j->len[j->count] = file_len(p, p->lnext);
	}
	return 1;
}

int plancore_pick(struct plancore *c, unsigned lists, unsigned list_max,
		  struct pc_job *j)
{
	size_t nactive = active(c);

	/* Listing first: it is metadata only, and a rank that does not
	 * know a file's objects demotes a pack its later files need. */
	for (int k = 0; lists < list_max && k < PLAN_MAX; k++) {
		int s = (int)((c->rr + k) % PLAN_MAX);
		struct pc_plan *p = c->slot[s];
		if (p && pick_list(p, window_of(c, p, nactive), j)) {
			c->rr = (unsigned)s + 1;
			return 1;
		}
	}
	for (int k = 0; k < PLAN_MAX; k++) {
		int s = (int)((c->rr + k) % PLAN_MAX);
		struct pc_plan *p = c->slot[s];
		if (!p || p->stalled)
			continue;
		if (p->next < p->place)
			p->next = p->place;
		while (p->next < p->n && (p->f[p->next].flags & PF_STARTED))
			p->next++;
		if (p->next >= p->n ||
		    p->f[p->next].off - off_at(p, p->place) >=
			window_of(c, p, nactive))
			continue;
		p->f[p->next].flags |= PF_STARTED;
		memset(j, 0, sizeof(*j));
		j->id = p->id;
		j->gen = p->gen;
		j->pos = p->next;
		j->count = 1;
		j->ino[0] = p->f[p->next].ino;
		j->len[0] = file_len(p, p->next);
		p->next++;
		c->rr = (unsigned)s + 1;
		return 1;
	}
	return 0;
}

void plancore_done(struct plancore *c, const struct pc_job *j, int ready,
		   int fetched, const uint64_t *keys, const size_t *nk,
		   char *names)
{
	struct pc_plan *p = plancore_find(c, j->id);

	if (!p || p->gen != j->gen || j->pos + j->count > p->n) {
		free(names);
		return;
	}
	for (size_t i = 0; i < j->count; i++) {
		struct pc_file *f = &p->f[j->pos + i];
		if (j->list)
			f->flags &= ~PF_LISTING;
		if (keys &&
		    !keys_set(c, ref_of(p->slot, j->pos + i), keys, nk[i]))
			f->flags |= PF_LISTED;
		if (keys)
			keys += nk[i];
	}
	if (j->list) {
		free(names);
		return;
	}
	struct pc_file *f = &p->f[j->pos];
	uint64_t len = file_len(p, j->pos);
	if (ready && !(f->flags & PF_READY)) {
		f->flags |= PF_READY;
		if (j->pos >= p->place)
			p->ahead += len;
	}
	if (fetched && !(f->flags & PF_PREFETCHED)) {
		f->flags |= PF_PREFETCHED;
		p->prefetched += len;
		c->st.prefetched += len;
		if (f->flags & PF_OPENED) {
			p->used += len;
			c->st.used += len;
		}
	}
	if (j->pos >= p->trail && !f->names) {
		f->names = names;
		names = NULL;
	}
	free(names);
}

void plancore_evicted(struct plancore *c, const struct pc_seen *sn)
{
	struct pc_plan *p = plancore_find(c, sn->id);

	if (!p || p->gen != sn->gen || sn->pos >= p->n)
		return;
	struct pc_file *f = &p->f[sn->pos];
	uint64_t len = file_len(p, sn->pos);
	if ((f->flags & (PF_READY | PF_PREFETCHED | PF_OPENED)) !=
	    (PF_READY | PF_PREFETCHED | PF_OPENED))
		return;
	if (sn->pos >= p->place)
		p->ahead -= len;
	f->flags &= ~PF_READY; /* counted once */
	p->used -= len;
	c->st.used -= len;
	p->wasted += len;
	c->st.wasted += len;
	p->ready--;
	c->st.ready--;
	p->waited++;
	c->st.waited++;
}

void plancore_stalled(struct plancore *c, const struct pc_job *j)
{
	struct pc_plan *p = plancore_find(c, j->id);

	if (!p || p->gen != j->gen || j->list || j->pos >= p->n)
		return;
	p->f[j->pos].flags &= ~PF_STARTED;
	if (j->pos < p->next)
		p->next = j->pos;
	p->stalled = 1;
}

uint64_t plancore_ahead_of(struct plancore *c, const struct pc_job *j)
{
	struct pc_plan *p = plancore_find(c, j->id);

	if (!p || p->gen != j->gen || j->pos >= p->n)
		return UINT64_MAX;
	return j->pos <= p->place ? 0 : p->f[j->pos].off - off_at(p, p->place);
}

void plancore_unstall(struct plancore *c)
{
	for (int s = 0; s < PLAN_MAX; s++)
		if (c->slot[s])
			c->slot[s]->stalled = 0;
}

/* ---- figures ------------------------------------------------------------- */

void plancore_info(const struct plancore *c, const struct pc_plan *p,
		   int64_t now, struct plan_info *pi)
{
	memset(pi, 0, sizeof(*pi));
	pi->id = p->id;
	pi->uid = p->uid;
	pi->pid = p->pid;
	pi->files = p->n;
	pi->place = p->place;
	pi->window = plancore_window(c, p);
	pi->ahead = p->ahead;
	pi->prefetched = p->prefetched;
	pi->used = p->used;
	pi->wasted = p->wasted;
	pi->waited = p->waited;
	pi->ready = p->ready;
	pi->idle_s = (now - p->last_ns) / 1000000000;
}

void plancore_stats(const struct plancore *c, struct plans_stats *st)
{
	size_t nactive = active(c);

	*st = c->st;
	st->plans = c->nplans;
	st->files = c->files;
	st->window = st->ahead = 0;
	for (int s = 0; s < PLAN_MAX; s++) {
		const struct pc_plan *p = c->slot[s];
		if (!p)
			continue;
		if (p->place < p->n)
			st->window += window_of(c, p, nactive);
		st->ahead += p->ahead;
	}
}

void plancore_check(const struct plancore *c)
{
	uint64_t files = 0, held = 0, uses = 0, objuses = 0;
	size_t nplans = 0;

	for (int s = 0; s < PLAN_MAX; s++) {
		const struct pc_plan *p = c->slot[s];
		uint64_t ahead = 0;
		gr_assert(!p == !(c->used & 1ull << s));
		if (!p)
			continue;
		nplans++;
		gr_assert(p->slot == s);
		gr_assert(p->trail <= p->place && p->place <= p->n);
		for (size_t i = 0; i < p->n; i++) {
			const struct pc_file *f = &p->f[i];
			struct pc_ino *pi = ino_find(c, f->ino);
			int seen = 0;
			gr_assert(pi);
			for (pc_ref r = pi->head; r != PC_NOREF;
			     r = file_at(c, r)->next)
				seen += r == ref_of(s, i);
			gr_assert(seen == 1);
			if (i >= p->place && (f->flags & PF_READY))
				ahead += file_len(p, i);
			uses += f->nkeys;
		}
		gr_assert(ahead == p->ahead);
		files += p->n;
		for (size_t i = 0; p->held && i < PC_HOLD_MAX; i++)
			held += p->held[i].used;
		gr_assert(!p->held == !p->nheld);
	}
	for (struct hash_node *h = hash_first(&c->objs); h;
	     h = hash_next(&c->objs, h))
		objuses += hash_entry(h, struct pc_obj, hn)->n;
	gr_assert(uses == objuses);
	gr_assert(files == c->files && held == c->held &&
		  files + held <= PLAN_FILES_MAX);
	gr_assert(nplans == c->nplans);
}
