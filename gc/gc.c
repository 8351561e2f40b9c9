/*
 * gc.c - garbage collection of a volume's objects (gc.h): one table of
 * every id the metadata references (slice ids and pack ids come from one
 * sequence, so one table holds both), the store's listing checked against
 * it, and the leaked objects deleted by a pool of workers.
 */
#include "gc/gc.h"

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <time.h>

#include "fs/data/chunkstore.h"
#include "fs/data/compact.h"
#include "fs/store/objstore.h"
#include "lib/hash.h"
#include "lib/log.h"
#include "lib/workq.h"
#include "meta/meta_objects.h"
#include "meta/meta_scan.h"
#include "meta/meta_volume.h"

#define R_SLICE	  0x01 /* a slice with a live reference */
#define R_PACK	  0x02 /* a pack with a live frame or a staged name */
#define R_PENDING 0x04 /* a dead record waiting for some client's reclaim */
#define R_COUNTED 0x08 /* a packed slice: its frame is in its pack's live */
#define R_REWRITE 0x10 /* a pack to rewrite (compact) */

#define TEMP_MIN_AGE  3600 /* seconds: the youngest temp file taken as stale */
#define RECLAIM_BATCH 256  /* dead records handed out at a time */

/* One referenced id; the hash is the id itself (ids are unique). */
struct ref {
	struct hash_node hn;
	uint64_t live; /* packs: bytes of the distinct frames referenced */
	uint8_t flags;
};

#define CHUNK_REFS 4096
struct ref_chunk {
	SLIST_ENTRY(ref_chunk) link;
	size_t used;
	struct ref refs[CHUNK_REFS];
};

/* A chunk whose list is long. */
struct chunk_ref {
	uint64_t ino;
	uint32_t idx;
};

/* A record of a frame of a pack to rewrite. */
struct move {
	uint64_t ino;
	uint32_t idx;
	struct meta_slice s;
};

/* A pack a rewrite replaced, and when (meta_scan_retired). */
struct retired {
	uint64_t pack;
	int64_t when;
};

/* An object nothing referenced when the store was listed. */
struct cand {
	struct chunkstore_keyinfo k;
	uint64_t size;
	int64_t mtime;
};

struct gc {
	struct meta *m;
	struct objstore *store;
	const struct gc_opts *o;
	struct gc_report *r;
	int64_t now;
	struct hash refs;
	SLIST_HEAD(, ref_chunk) chunks;
	struct cand *cands;
	size_t ncand, capcand;
	uint64_t ticks; /* items since the last progress call */
	int walk;	/* 1: the first walk of the metadata, 2: the second */
	/* the chunk list being walked (its records come in a row) */
	uint64_t cur_ino;
	uint32_t cur_idx;
	size_t cur_recs;
	struct chunk_ref *longs;
	size_t nlong, caplong;
	size_t nrewrite; /* packs flagged R_REWRITE */
	struct move *moves;
	size_t nmove, capmove;
	struct retired *retired; /* sorted by pack */
	size_t nretired, capretired;
	const char *phase;
	/* deletes, counted by the workers */
	_Atomic uint64_t deleted, deleted_bytes, delete_errors;
};

static void tick(struct gc *g)
{
	if (g->o->progress && (++g->ticks & 1023) == 0)
		g->o->progress(g->o->progress_arg, g->phase, g->r);
}

static void phase(struct gc *g, const char *name)
{
	g->phase = name;
	if (g->o->progress)
		g->o->progress(g->o->progress_arg, name, g->r);
}

/* ---- the table of references ------------------------------------------- */

static struct ref *ref_get(struct gc *g, uint64_t id)
{
	struct hash_node *n = hash_find(&g->refs, id, NULL, NULL);
	if (n)
		return hash_entry(n, struct ref, hn);
	struct ref_chunk *c = SLIST_FIRST(&g->chunks);
	if (!c || c->used == CHUNK_REFS) {
		c = malloc(sizeof *c);
		if (!c)
			return NULL;
		c->used = 0;
		SLIST_INSERT_HEAD(&g->chunks, c, link);
	}
	struct ref *x = &c->refs[c->used++];
	x->live = 0;
	x->flags = 0;
	hash_insert(&g->refs, &x->hn, id);
	g->r->slices++;
	return x;
}

/* The chunk list walked so far ends: note it when it is long. */
static int chunk_end(struct gc *g)
{
	if (g->cur_recs < COMPACT_MIN_RECS)
		return 0;
	g->r->long_chunks++;
	if (!g->o->compact)
		return 0;
	if (g->nlong == g->caplong) {
		size_t cap = g->caplong ? 2 * g->caplong : 64;
		struct chunk_ref *c = realloc(g->longs, cap * sizeof *c);
		if (!c)
			return ENOMEM;
		g->longs = c;
		g->caplong = cap;
	}
	g->longs[g->nlong++] = (struct chunk_ref){g->cur_ino, g->cur_idx};
	return 0;
}

static int on_ref(void *arg, const struct meta_ref *mr)
{
	struct gc *g = arg;
	const struct meta_slice *s = &mr->s;
	struct ref *x;

	if (g->walk == 1)
		g->r->refs++;
	tick(g);
	if (g->walk == 1 && mr->from == META_REF_CHUNK) {
		if (mr->ino != g->cur_ino || mr->idx != g->cur_idx) {
			int err = chunk_end(g);
			if (err)
				return err;
			g->cur_ino = mr->ino;
			g->cur_idx = mr->idx;
			g->cur_recs = 0;
		}
		g->cur_recs++;
	}
	if (mr->from == META_REF_DEAD) {
		/* its objects are some client's to delete: leave them be */
		uint64_t id = s->pack ? s->pack : s->id;
		if (!(x = ref_get(g, id)))
			return ENOMEM;
		if (!(x->flags & R_PENDING))
			g->r->pending++;
		x->flags |= R_PENDING;
		return 0;
	}
	if (s->pack) {
		struct ref *p = ref_get(g, s->pack);
		if (!p)
			return ENOMEM;
		p->flags |= R_PACK;
		if (!s->id)
			return 0; /* a staged pack */
		if (!(x = ref_get(g, s->id)))
			return ENOMEM;
		x->flags |= R_SLICE;
		if (!(x->flags & R_COUNTED)) {
			/* a frame shared by copies counts once */
			x->flags |= R_COUNTED;
			p->live += s->plen;
		}
		return 0;
	}
	if (!(x = ref_get(g, s->id)))
		return ENOMEM;
	x->flags |= R_SLICE;
	return 0;
}

/* Is the object k referenced (or left to a reclamation)? */
static const struct ref *referenced(struct gc *g,
				    const struct chunkstore_keyinfo *k)
{
	struct hash_node *n = hash_find(&g->refs, k->id, NULL, NULL);
	if (!n)
		return NULL;
	struct ref *x = hash_entry(n, struct ref, hn);
	uint8_t want = (k->pack ? R_PACK : R_SLICE) | R_PENDING;
	return x->flags & want ? x : NULL;
}

/* ---- the listing ------------------------------------------------------- */

static int on_retired(void *arg, uint64_t pack, int64_t when)
{
	struct gc *g = arg;

	if (g->nretired == g->capretired) {
		size_t cap = g->capretired ? 2 * g->capretired : 64;
		struct retired *v = realloc(g->retired, cap * sizeof *v);
		if (!v)
			return ENOMEM;
		g->retired = v;
		g->capretired = cap;
	}
	g->retired[g->nretired++] = (struct retired){pack, when};
	return 0;
}

static int by_pack(const void *a, const void *b)
{
	uint64_t x = ((const struct retired *)a)->pack;
	uint64_t y = ((const struct retired *)b)->pack;
	return (x > y) - (x < y);
}

/* When a rewrite replaced pack, or 0. */
static int64_t retired_at(const struct gc *g, uint64_t pack)
{
	struct retired key = {pack, 0};
	const struct retired *r = g->nretired
				      ? bsearch(&key, g->retired, g->nretired,
						sizeof *g->retired, by_pack)
				      : NULL;
	return r ? r->when : 0;
}

static int on_object(void *arg, const char *key, uint64_t size, int64_t mtime)
{
	struct gc *g = arg;
	struct gc_report *r = g->r;
	struct chunkstore_keyinfo k;
	const struct ref *x;

	tick(g);
	if (!chunkstore_parse_key(key, &k)) {
		r->other++;
		r->other_bytes += size;
		return 0;
	}
	r->objects++;
	r->bytes += size;
	if ((x = referenced(g, &k))) {
		r->live++;
		r->live_bytes += size;
		if (!(x->flags & (k.pack ? R_PACK : R_SLICE)))
			r->live_pending++;
		if (k.pack && (x->flags & R_PACK)) {
			uint64_t dead = size > x->live ? size - x->live : 0;
			r->packs++;
			r->pack_bytes += size;
			r->pack_dead_bytes += dead;
			r->packs_half_dead += 2 * dead > size;
			if (g->o->compact && 2 * dead > size &&
			    !(x->flags & R_PENDING) &&
			    g->now - mtime >= g->o->min_age) {
				((struct ref *)x)->flags |= R_REWRITE;
				g->nrewrite++;
			}
		}
		return 0;
	}
	/* a pack a rewrite replaced is as old as the rewrite: a reader
	 * holding its old records reads it for min_age from then on */
	int64_t since = k.pack ? retired_at(g, k.id) : 0;
	if (g->now - (since > mtime ? since : mtime) < g->o->min_age) {
		r->young++;
		r->young_bytes += size;
		r->retired += since > 0;
		return 0;
	}
	r->leaked++;
	r->leaked_bytes += size;
	if (!r->leaked_oldest || (mtime && mtime < r->leaked_oldest))
		r->leaked_oldest = mtime;
	if (!g->o->delete)
		return 0;
	if (g->ncand == g->capcand) {
		size_t cap = g->capcand ? 2 * g->capcand : 1024;
		struct cand *c = realloc(g->cands, cap * sizeof *c);
		if (!c)
			return ENOMEM;
		g->cands = c;
		g->capcand = cap;
	}
	g->cands[g->ncand++] = (struct cand){k, size, mtime};
	return 0;
}

/* ---- temp files -------------------------------------------------------- */

static int on_temp(void *arg, const char *name, uint64_t size, int64_t mtime)
{
	struct gc *g = arg;

	tick(g);
	/* a put under way has its temp file: never one younger than an hour
	 * (whatever --min-age says: 0 would take a live client's put) */
	int64_t age =
	    g->o->min_age > TEMP_MIN_AGE ? g->o->min_age : TEMP_MIN_AGE;
	if (g->now - mtime < age)
		return 0;
	g->r->temps++;
	g->r->temps_bytes += size;
	if (!g->o->delete)
		return 0;
	int err = objstore_del_temp(g->store, name);
	if (err) {
		log_err("gc: cannot delete the temp file '%s': %s", name,
			gr_strerror(err));
		g->r->delete_errors++;
		return 0;
	}
	g->r->temps_deleted++;
	return 0;
}

/* ---- deletes ----------------------------------------------------------- */

#define BATCH 64
struct del_job {
	struct workq_job job; /* first */
	struct gc *g;
	size_t n;
	struct cand c[BATCH];
};

static void del_run(struct workq_job *job)
{
	struct del_job *j = (struct del_job *)job;
	struct gc *g = j->g;
	char key[128];

	for (size_t i = 0; i < j->n; i++) {
		const struct cand *c = &j->c[i];
		if (c->k.pack)
			chunkstore_pack_key(c->k.id, key, sizeof key);
		else
			chunkstore_key(c->k.id, c->k.idx, c->k.len, key,
				       sizeof key);
		int err = objstore_del(g->store, key);
		/* a pack's total goes with it, so fsck finds no stray one */
		if (!err && c->k.pack)
			err = meta_pack_forget(g->m, c->k.id);
		if (err) {
			log_err("gc: cannot delete '%s': %s", key,
				gr_strerror(err));
			atomic_fetch_add(&g->delete_errors, 1);
			continue;
		}
		atomic_fetch_add(&g->deleted, 1);
		atomic_fetch_add(&g->deleted_bytes, c->size);
	}
	free(j);
}

/* The candidates still unreferenced after the second walk, deleted by
 * o->threads workers in batches. */
static int delete_leaked(struct gc *g)
{
	struct gc_report *r = g->r;
	struct workq *q;
	struct del_job *j = NULL;
	int threads = g->o->threads > 0 ? g->o->threads : 16;
	int err = workq_open("gr-gcdel", threads, 2 * (size_t)threads, &q);

	if (err)
		return err;
	for (size_t i = 0; i < g->ncand && !err; i++) {
		const struct cand *c = &g->cands[i];
		if (referenced(g, &c->k)) {
			/* committed (or moved) since the first walk */
			r->leaked--;
			r->leaked_bytes -= c->size;
			r->live++;
			r->live_bytes += c->size;
			continue;
		}
		if (!j) {
			if (!(j = malloc(sizeof *j))) {
				err = ENOMEM;
				break;
			}
			j->job.run = del_run;
			j->g = g;
			j->n = 0;
		}
		j->c[j->n++] = *c;
		if (j->n < BATCH)
			continue;
		err = workq_push(q, &j->job);
		if (err)
			free(j);
		j = NULL;
		r->deleted = atomic_load(&g->deleted);
		r->deleted_bytes = atomic_load(&g->deleted_bytes);
		tick(g);
	}
	if (j && (err || workq_push(q, &j->job)))
		free(j);
	workq_close(q); /* runs every job queued */
	r->deleted = atomic_load(&g->deleted);
	r->deleted_bytes = atomic_load(&g->deleted_bytes);
	r->delete_errors = atomic_load(&g->delete_errors);
	return err;
}

/* ---- reclamation ------------------------------------------------------- */

/* A chunk store over g's store, of the volume's block size. */
static int open_chunkstore(struct gc *g, struct chunkstore **cs)
{
	struct chunkstore_opts co = {.block_size = g->o->block_size,
				     .compress = g->o->compress};
	struct meta_volume v;

	if (!co.block_size) {
		int err = meta_load_volume(g->m, &v);
		if (err)
			return err;
		co.block_size = v.block_size;
		co.compress = v.compress;
	}
	return chunkstore_open(g->store, &co, cs);
}

/*
 * What mounted read-write clients do in the background, for a volume that
 * may have none: the deleted files' chunk lists dropped, the dead slices
 * and packs handed out and their objects deleted, the slices compactions
 * replaced once their delay is over, and all of those with min_age 0 when
 * no session is alive (nobody can hold an old chunk list then). Each dead
 * record is handed to one caller only: safe beside clients doing it too.
 */
static int reclaim(struct gc *g)
{
	struct meta_slice dead[RECLAIM_BATCH];
	struct chunkstore *cs;
	uint64_t moved = 0, left, clients;
	size_t n;
	int err = open_chunkstore(g, &cs);

	if (err)
		return err;
	do {
		if (g->o->min_age == 0 &&
		    (err = meta_reclaim_delayed(g->m, RECLAIM_BATCH, &moved,
						&left, &clients)))
			break;
		do {
			err = meta_reclaim(g->m, dead, RECLAIM_BATCH, &n);
			for (size_t i = 0; i < n && !err; i++) {
				const struct meta_slice *d = &dead[i];
				int e =
				    d->pack
					? chunkstore_delete_pack(cs, d->pack)
					: chunkstore_delete(cs, d->id, d->size);
				tick(g);
				if (e) {
					/* its record is gone: a later gc
					 * finds the object leaked */
					log_err("gc: cannot delete %s %" PRIu64
						": %s",
						d->pack ? "pack" : "slice",
						d->pack ? d->pack : d->id,
						gr_strerror(e));
					atomic_fetch_add(&g->delete_errors, 1);
					continue;
				}
				g->r->reclaimed++;
			}
		} while (!err && n);
	} while (!err && moved);
	if (!err)
		err = meta_reclaim_delayed(g->m, 0, &moved, &g->r->delayed,
					   &g->r->delayed_clients);
	g->r->delete_errors = atomic_load(&g->delete_errors);
	chunkstore_close(cs);
	return err;
}

/* ---- compaction -------------------------------------------------------- */

static int compact_long(struct gc *g)
{
	struct chunkstore *cs;
	int err = open_chunkstore(g, &cs);

	if (err)
		return err;
	for (size_t i = 0; i < g->nlong; i++) {
		struct compact_result res;
		err = compact_chunk(g->m, cs, g->longs[i].ino, g->longs[i].idx,
				    0, 0, &res);
		tick(g);
		if (err == EAGAIN || err == ENOENT)
			continue; /* changed or gone meanwhile */
		if (err) {
			log_err("gc: cannot compact chunk %" PRIu32
				" of inode %" PRIu64 ": %s",
				g->longs[i].idx, g->longs[i].ino,
				gr_strerror(err));
			g->r->compact_errors++;
			continue;
		}
		if (!res.bytes)
			continue;
		g->r->compacted++;
		g->r->records_before += res.before;
		g->r->records_after += res.after;
		g->r->compacted_bytes += res.bytes;
	}
	chunkstore_close(cs);
	return 0;
}

/* ---- pack rewrites ------------------------------------------------------ */

static int on_move(void *arg, const struct meta_ref *mr)
{
	struct gc *g = arg;
	struct hash_node *n;

	tick(g);
	if (mr->from != META_REF_CHUNK || !mr->s.pack ||
	    !(n = hash_find(&g->refs, mr->s.pack, NULL, NULL)) ||
	    !(hash_entry(n, struct ref, hn)->flags & R_REWRITE))
		return 0;
	if (g->nmove == g->capmove) {
		size_t cap = g->capmove ? 2 * g->capmove : 256;
		struct move *m = realloc(g->moves, cap * sizeof *m);
		if (!m)
			return ENOMEM;
		g->moves = m;
		g->capmove = cap;
	}
	g->moves[g->nmove++] = (struct move){mr->ino, mr->idx, mr->s};
	return 0;
}

static int by_pack_id(const void *a, const void *b)
{
	const struct meta_slice *x = &((const struct move *)a)->s;
	const struct meta_slice *y = &((const struct move *)b)->s;
	if (x->pack != y->pack)
		return x->pack < y->pack ? -1 : 1;
	return (x->id > y->id) - (x->id < y->id);
}

/* Copy the live frames of the pack of mv[0..n) (sorted by slice id) into
 * a new pack and move the records there. */
static int rewrite_pack(struct gc *g, struct move *mv, size_t n)
{
	uint64_t old = mv[0].s.pack, pack;
	char key[128];
	void *src = NULL;
	size_t got, total = 0;
	char *dst = NULL;
	int err;

	chunkstore_pack_key(old, key, sizeof key);
	err = objstore_get(g->store, key, 0, 0, &src, &got);
	if (err)
		return err;
	/* frames once each (a slice shared by copies: one frame) */
	for (size_t i = 0; i < n; i++)
		if (i == 0 || mv[i].s.id != mv[i - 1].s.id)
			total += mv[i].s.plen;
	dst = malloc(total ? total : 1);
	if (!dst) {
		err = ENOMEM;
		goto out;
	}
	uint32_t at = 0;
	for (size_t i = 0; i < n; i++) {
		const struct meta_slice *s = &mv[i].s;
		if (i > 0 && s->id == mv[i - 1].s.id)
			continue;
		if ((uint64_t)s->poff + s->plen > got) {
			err = EIO; /* the pack is shorter than its frame */
			goto out;
		}
		memcpy(dst + at, (char *)src + s->poff, s->plen);
		at += s->plen;
	}
	/* its age starts now, before any record moves (again once they
	 * have: then readers of the old records have min_age from there) */
	err = meta_pack_retire(g->m, old);
	if (!err)
		err = meta_new_slice_id(g->m, &pack);
	if (!err)
		err = meta_pack_total(g->m, pack, total, NULL);
	chunkstore_pack_key(pack, key, sizeof key);
	if (!err)
		err = objstore_put(g->store, key, dst, total);
	if (err)
		goto out;
	size_t moved = 0;
	at = 0;
	for (size_t i = 0; i < n && !err; i++) {
		struct meta_slice nw = mv[i].s;
		if (i > 0 && mv[i].s.id != mv[i - 1].s.id)
			at += mv[i - 1].s.plen;
		nw.pack = pack;
		nw.poff = at;
		size_t k = 0;
		err = meta_pack_move(g->m, mv[i].ino, mv[i].idx, &mv[i].s, &nw,
				     &k);
		moved += k;
	}
	if (moved && meta_pack_retire(g->m, old))
		log_warn("gc: pack %" PRIu64
			 " is rewritten, and its age counts "
			 "from just before",
			 old);
	if (!moved && !err) {
		/* every record changed meanwhile: the copy serves nothing */
		objstore_del(g->store, key);
		meta_pack_forget(g->m, pack);
		goto out;
	}
	g->r->packs_rewritten++;
	g->r->frames_moved += moved;
	g->r->pack_bytes_before += got;
	g->r->pack_bytes_after += total;
out:
	free(dst);
	free(src);
	return err;
}

static int rewrite_packs(struct gc *g)
{
	int err = meta_scan_refs(g->m, on_move, g);
	if (err)
		return err;
	qsort(g->moves, g->nmove, sizeof *g->moves, by_pack_id);
	for (size_t i = 0, j; i < g->nmove; i = j) {
		for (j = i + 1;
		     j < g->nmove && g->moves[j].s.pack == g->moves[i].s.pack;
		     j++)
			;
		err = rewrite_pack(g, g->moves + i, j - i);
		tick(g);
		if (err) {
			log_err("gc: cannot rewrite pack %" PRIu64 ": %s",
				g->moves[i].s.pack, gr_strerror(err));
			g->r->compact_errors++;
		}
	}
	return 0;
}

/* ---- the run ----------------------------------------------------------- */

int gc_run(struct meta *m, struct objstore *store, const struct gc_opts *o,
	   struct gc_report *r)
{
	struct gc g = {.m = m, .store = store, .o = o, .r = r};
	int err;

	memset(r, 0, sizeof *r);
	if (o->threads < 0 || o->threads > 256 || o->min_age < 0 ||
	    (o->compact && !o->block_size))
		return EINVAL;
	g.now = (int64_t)time(NULL);
	SLIST_INIT(&g.chunks);
	err = hash_init(&g.refs, 16);
	if (err)
		return err;

	if (o->delete) {
		phase(&g, "reclaim");
		err = reclaim(&g);
		if (err)
			goto out;
	}
	phase(&g, "metadata");
	err = meta_scan_retired(m, on_retired, &g);
	if (err)
		goto out;
	if (g.nretired) /* none: g.retired is NULL */
		qsort(g.retired, g.nretired, sizeof *g.retired, by_pack);
	g.walk = 1;
	err = meta_scan_refs(m, on_ref, &g);
	if (!err)
		err = chunk_end(&g);
	phase(&g, "store");
	if (!err)
		err = objstore_list(store, "blocks/", on_object, &g);
	if (!err)
		err = objstore_list(store, "packs/", on_object, &g);
	if (!err) {
		err = objstore_list_temps(store, on_temp, &g);
		if (err == ENOTSUP)
			err = 0; /* a store without temp files of its own */
	}
	if (!err && g.ncand) {
		phase(&g, "metadata again");
		g.walk = 2;
		err = meta_scan_refs(m, on_ref, &g);
	}
	if (!err && g.ncand) {
		phase(&g, "delete");
		err = delete_leaked(&g);
	}
	if (!err && g.nlong) {
		phase(&g, "compact");
		err = compact_long(&g);
	}
	if (!err && g.nrewrite) {
		phase(&g, "rewrite packs");
		err = rewrite_packs(&g);
	}
out:
	phase(&g, "done");

	free(g.cands);
	free(g.longs);
	free(g.moves);
	free(g.retired);
	hash_release(&g.refs);
	while (!SLIST_EMPTY(&g.chunks)) {
		struct ref_chunk *c = SLIST_FIRST(&g.chunks);
		SLIST_REMOVE_HEAD(&g.chunks, link);
		free(c);
	}
	return err;
}
