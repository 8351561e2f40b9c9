/*
 * fsck_store.c - fsck's side of the store (fsck.h, objects and deep): one
 * listing of blocks/ and packs/ held against the slices and packs the
 * metadata references (each block of a slice there, of a size its codec
 * could have written; each pack there, of its total); every referenced
 * block and frame read and checked by a pool of readers; and each object
 * found wrong read again before it is reported.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/data/chunkstore.h"
#include "fs/store/codec.h"
#include "fs/store/objstore.h"
#include "gc/fsck_int.h"
#include "lib/log.h"
#include "lib/workq.h"
#include "meta/meta_scan.h"

uint32_t fsck_nblocks(const struct fsck *f, uint32_t size)
{
	uint32_t bs = f->o->block_size;
	return (uint32_t)(((uint64_t)size + bs - 1) / bs);
}

uint32_t fsck_block_len(const struct fsck *f, uint32_t size, uint32_t idx)
{
	uint64_t bs = f->o->block_size, left = size - idx * bs;
	return (uint32_t)(left < bs ? left : bs);
}

/* Could the codec have written a block of len raw bytes as size bytes?
 * v2 (raw in checked segments) or v1 raw have one size each; v1 LZ4 is
 * smaller than the raw bytes, on a volume that compresses. */
static int size_ok(const struct fsck *f, uint64_t size, uint32_t len)
{
	uint64_t v2 = codec_prefix_len(len) + len, v1 = CODEC_HDR_SIZE + len;

	if (size == v2 || size == v1)
		return 1;
	return f->o->compress != CODEC_NONE && size > CODEC_HDR_SIZE &&
	       size < v1;
}

static int size_cand(struct fsck *f, const struct slc *x, const char *key,
		     int pack, uint64_t size, uint64_t want)
{
	struct cand *c = fsck_cand(f, FSCK_OBJECT_SIZE);
	if (!c || !(c->key = strdup(key)))
		return ENOMEM;
	c->id = slc_id(x);
	c->ino = x->ino;
	c->idx = x->idx;
	c->tail = pack;
	c->found = (int64_t)size;
	c->expected = (int64_t)want;
	return 0;
}

/* ---- the listing ------------------------------------------------------- */

static int on_object(void *arg, const char *key, uint64_t size, int64_t mtime)
{
	struct fsck *f = arg;
	struct chunkstore_keyinfo k;
	struct slc *x;

	(void)mtime;
	fsck_tick(f);
	if (!chunkstore_parse_key(key, &k) || !(x = fsck_slc(f, k.id, 0)))
		return 0; /* not referenced: gc's business */
	if (k.pack) {
		if (!(x->flags & S_PACK))
			return 0;
		x->flags |= S_LISTED;
		f->r->objects++;
		f->r->object_bytes += size;
		/* its total, when known, else the end of its last frame */
		if ((x->flags & S_TOTAL) && !(x->flags & S_OPEN) &&
		    x->seen != size)
			return size_cand(f, x, key, 1, size, x->seen);
		if (size < x->size)
			return size_cand(f, x, key, 1, size, x->size);
		return 0;
	}
	if (!(x->flags & S_SLICE) || (x->flags & S_PACKED) ||
	    k.idx >= fsck_nblocks(f, x->size) ||
	    k.len != fsck_block_len(f, x->size, k.idx))
		return 0;
	x->seen++;
	f->r->objects++;
	f->r->object_bytes += size;
	if (!size_ok(f, size, k.len))
		return size_cand(f, x, key, 0, size,
				 codec_prefix_len(k.len) + k.len);
	return 0;
}

int fsck_objects(struct fsck *f)
{
	int err = objstore_list(f->store, "blocks/", on_object, f);
	if (!err)
		err = objstore_list(f->store, "packs/", on_object, f);
	if (err)
		return err;
	for (struct hash_node *n = hash_first(&f->slices); n;
	     n = hash_next(&f->slices, n)) {
		struct slc *x = hash_entry(n, struct slc, hn);
		int pack = (x->flags & S_PACK) != 0;
		uint32_t want = pack ? 1 : fsck_nblocks(f, x->size);
		if (!x->refs || (x->flags & S_STAGED))
			continue;
		if (pack ? (x->flags & S_LISTED)
			 : !(x->flags & S_SLICE) || (x->flags & S_PACKED) ||
			       x->seen >= want)
			continue;
		struct cand *c = fsck_cand(f, FSCK_OBJECT_MISSING);
		if (!c)
			return ENOMEM;
		x->flags |= S_MISSING;
		c->id = slc_id(x);
		c->ino = x->ino;
		c->idx = x->idx;
		c->tail = pack;
		c->found = pack ? 1 : want - x->seen;
		c->expected = want;
	}
	return 0;
}

/* ---- reading again ----------------------------------------------------- */

int fsck_pack_size(struct fsck *f, uint64_t pack, uint64_t *size)
{
	char key[128];

	if (!f->store)
		return EINVAL;
	chunkstore_pack_key(pack, key, sizeof key);
	return objstore_head(f->store, key, size);
}

/* A missing slice: which of its blocks are missing now (the first one's
 * key kept), 0 when none. */
static int blocks_missing(struct fsck *f, struct cand *c, uint32_t size,
			  int64_t *missing)
{
	char key[128];
	uint64_t got;

	*missing = 0;
	for (uint32_t i = 0; i < fsck_nblocks(f, size); i++) {
		chunkstore_key(c->id, i, fsck_block_len(f, size, i), key,
			       sizeof key);
		int err = objstore_head(f->store, key, &got);
		if (err == ENOENT) {
			if (!*missing && !c->key && !(c->key = strdup(key)))
				return ENOMEM;
			++*missing;
		} else if (err) {
			return err;
		}
	}
	return 0;
}

int fsck_objects_confirm(struct fsck *f, struct cand *c)
{
	char key[128];
	uint64_t size;
	int err, still;

	/* still referenced where the walk met it? (a file deleted or
	 * truncated meanwhile may have had its objects reclaimed) */
	still = fsck_still_referenced(f, c->ino, c->idx, c->tail ? 0 : c->id,
				      c->tail ? c->id : 0);
	if (still < 0)
		return -still;
	if (!still) {
		c->state = C_GONE;
		return 0;
	}
	switch (c->kind) {
	case FSCK_OBJECT_MISSING:
		if (c->tail) {
			chunkstore_pack_key(c->id, key, sizeof key);
			err = objstore_head(f->store, key, &size);
			if (!err)
				c->state = C_GONE;
			else if (err == ENOENT && !(c->key = strdup(key)))
				return ENOMEM;
			return err == ENOENT ? 0 : err;
		}
		struct slc *x = fsck_slc(f, c->id, 0);
		err = blocks_missing(f, c, x ? x->size : 0, &c->found);
		if (!err && !c->found)
			c->state = C_GONE;
		return err;
	case FSCK_OBJECT_SIZE:
		err = objstore_head(f->store, c->key, &size);
		if (err == ENOENT || (!err && (int64_t)size != c->found)) {
			c->state = C_GONE; /* replaced, or gone: no matter */
			return 0;
		}
		return err;
	default:
		return 0; /* corrupt: an object is never rewritten */
	}
}

int fsck_objects_there(struct fsck *f, uint64_t id, uint32_t size, int pack,
		       int *there)
{
	char key[128];
	uint64_t got;
	int err = 0;

	*there = 1;
	if (pack) {
		chunkstore_pack_key(id, key, sizeof key);
		err = objstore_head(f->store, key, &got);
	}
	for (uint32_t i = 0; !pack && !err && i < fsck_nblocks(f, size); i++) {
		chunkstore_key(id, i, fsck_block_len(f, size, i), key,
			       sizeof key);
		err = objstore_head(f->store, key, &got);
	}
	if (err == ENOENT) {
		*there = 0;
		err = 0;
	}
	return err;
}

/* ---- reading every object ---------------------------------------------- */

struct deep {
	struct fsck *f;
	struct workq *q;
	pthread_mutex_t lock; /* leaf: protects bad */
	struct cand *bad;     /* objects found wrong, malloc'd */
	size_t nbad, capbad;
	int err; /* protected by lock: the first error of a read */
	_Atomic uint64_t verified, verified_bytes;
};

struct deep_job {
	struct workq_job job; /* first */
	struct deep *d;
	struct meta_slice s;
	uint64_t ino;
	uint32_t idx;
	int missing; /* the listing found blocks missing: not news here */
};

static void deep_bad(struct deep *d, const struct deep_job *j, const char *key,
		     int err)
{
	pthread_mutex_lock(&d->lock);
	if (err != ENOENT && err != CODEC_ECORRUPT && err != CODEC_EVERSION &&
	    err != EPROTO) {
		if (!d->err)
			d->err = err;
		log_err("fsck: cannot read '%s': %s", key, gr_strerror(err));
		pthread_mutex_unlock(&d->lock);
		return;
	}
	if (d->nbad == d->capbad) {
		size_t cap = d->capbad ? 2 * d->capbad : 16;
		struct cand *c = realloc(d->bad, cap * sizeof *c);
		if (!c) {
			d->err = d->err ? d->err : ENOMEM;
			pthread_mutex_unlock(&d->lock);
			return;
		}
		d->bad = c;
		d->capbad = cap;
	}
	struct cand *c = &d->bad[d->nbad++];
	memset(c, 0, sizeof *c);
	c->kind = err == ENOENT ? FSCK_OBJECT_MISSING : FSCK_OBJECT_CORRUPT;
	c->id = j->s.pack ? j->s.pack : j->s.id;
	c->tail = j->s.pack != 0;
	c->ino = j->ino;
	c->idx = j->idx;
	c->found = 1;
	c->expected = 1;
	c->key = strdup(key);
	pthread_mutex_unlock(&d->lock);
}

/* Check an object's bytes: a block (or frame) of want raw bytes. */
static int check(const void *blk, size_t n, uint32_t want)
{
	const void *raw;
	size_t len;
	int err = codec_view(blk, n, &raw, &len);

	if (!err && !raw) {
		/* compressed: decode it to check it */
		void *buf = malloc(len ? len : 1);
		if (!buf)
			return ENOMEM;
		err = codec_decode(blk, n, buf, len, &len);
		free(buf);
	}
	if (!err && len != want)
		err = EPROTO;
	return err;
}

static void deep_run(struct workq_job *job)
{
	struct deep_job *j = (struct deep_job *)job;
	struct deep *d = j->d;
	struct fsck *f = d->f;
	char key[128];
	void *data;
	size_t got;
	int err;

	if (j->s.pack) {
		chunkstore_pack_key(j->s.pack, key, sizeof key);
		err = objstore_get(f->store, key, j->s.poff, j->s.plen, &data,
				   &got);
		if (!err) {
			err = got == j->s.plen ? check(data, got, j->s.size)
					       : CODEC_ECORRUPT;
			free(data);
		}
		if (err)
			deep_bad(d, j, key, err);
		else
			atomic_fetch_add(&d->verified_bytes, j->s.plen);
		atomic_fetch_add(&d->verified, 1);
		free(j);
		return;
	}
	for (uint32_t i = 0; i < fsck_nblocks(f, j->s.size); i++) {
		uint32_t len = fsck_block_len(f, j->s.size, i);
		chunkstore_key(j->s.id, i, len, key, sizeof key);
		err = objstore_get(f->store, key, 0, 0, &data, &got);
		if (!err) {
			err = check(data, got, len);
			free(data);
		}
		if (err == ENOENT && j->missing)
			continue;
		if (err)
			deep_bad(d, j, key, err);
		else
			atomic_fetch_add(&d->verified_bytes, got);
		atomic_fetch_add(&d->verified, 1);
	}
	free(j);
}

static int on_deep_ref(void *arg, const struct meta_ref *mr)
{
	struct deep *d = arg;
	struct fsck *f = d->f;
	struct slc *x, *p = NULL;
	struct deep_job *j;

	f->r->verified = atomic_load(&d->verified);
	f->r->verified_bytes = atomic_load(&d->verified_bytes);
	fsck_tick(f);
	if (mr->from != META_REF_CHUNK || !(x = fsck_slc(f, mr->s.id, 0)) ||
	    (x->flags & (S_VERIFIED | S_STAGED)))
		return 0;
	if (mr->s.pack && (!(p = fsck_slc(f, mr->s.pack, 0)) ||
			   (p->flags & (S_MISSING | S_STAGED))))
		return 0;
	x->flags |= S_VERIFIED;
	if (!(j = malloc(sizeof *j)))
		return ENOMEM;
	j->job.run = deep_run;
	j->d = d;
	j->s = mr->s;
	j->ino = mr->ino;
	j->idx = mr->idx;
	j->missing = (x->flags & S_MISSING) != 0;
	int err = workq_push(d->q, &j->job);
	if (err)
		free(j);
	return err;
}

int fsck_deep(struct fsck *f)
{
	struct deep d = {.f = f};
	int threads = f->o->threads ? f->o->threads : 8;
	int err = workq_open("gr-fsck", threads, 2 * (size_t)threads, &d.q);

	if (err)
		return err;
	pthread_mutex_init(&d.lock, NULL);
	err = fsck_refs(f, on_deep_ref, &d);
	workq_close(d.q); /* runs every job queued */
	f->r->verified = atomic_load(&d.verified);
	f->r->verified_bytes = atomic_load(&d.verified_bytes);
	if (!err)
		err = d.err;
	for (size_t i = 0; i < d.nbad; i++) {
		struct cand *c = fsck_cand(f, d.bad[i].kind);
		if (!c) {
			err = err ? err : ENOMEM;
			free(d.bad[i].key);
			continue;
		}
		*c = d.bad[i];
	}
	free(d.bad);
	pthread_mutex_destroy(&d.lock);
	return err;
}
