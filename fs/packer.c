/*
 * packer.c - gather small slices into pack objects. There is no thread of
 * its own: the callers of packer_put fill the open pack, and whoever fills
 * it up, or finds its window over while waiting, seals and puts it while
 * the others wait on it.
 */
#include "packer.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"

#define KEY_CAP	       96
#define PACK_SIZE_MIN  (64u << 10)
#define PACK_SIZE_MAX  (64u << 20)
#define WINDOW_MAX_MS  10000u

enum pack_state { PK_OPEN, PK_SEALED, PK_DONE };

/* A pack being filled, put, or done and waited on. Freed by the last of
 * its users (callers with a frame in it) once it is done. All fields but
 * id are protected by packer->lock; buf/len are only read by the sealer
 * once the pack has left PK_OPEN. */
struct pack {
	uint64_t id;
	char *buf;
	size_t len, cap;
	int64_t deadline_ms; /* CLOCK_MONOTONIC: seal by then */
	int users;
	int frames;
	int state; /* enum pack_state */
	int err;   /* PK_DONE: what its users return */
	pthread_cond_t done; /* broadcast when state becomes PK_DONE */
};

struct packer {
	struct objstore *store; /* borrowed */
	struct packer_opts o;
	struct packer_cbs cbs;

	/* After writer->lock; a leaf otherwise. Never held across a put or
	 * a callback, except new_id (a counter, batched in memory). */
	pthread_mutex_t lock;
	struct pack *open; /* being filled, or NULL; protected by lock */
	int holders;	   /* see packer_hold; protected by lock */

	struct packer_stats st; /* updated with __atomic builtins */
};

#define STAT_ADD(p, f, v) __atomic_fetch_add(&(p)->st.f, (v), __ATOMIC_RELAXED)

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int packer_open(struct objstore *store, const struct packer_opts *o,
		const struct packer_cbs *cbs, struct packer **out)
{
	struct packer *p;

	if (!out)
		return EINVAL;
	*out = NULL;
	if (!store || !o || !cbs || !cbs->new_id || !cbs->total ||
	    o->pack_size < PACK_SIZE_MIN || o->pack_size > PACK_SIZE_MAX ||
	    o->window_ms > WINDOW_MAX_MS ||
	    (o->compress != CODEC_NONE && o->compress != CODEC_LZ4))
		return EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return ENOMEM;
	p->store = store;
	p->o = *o;
	p->cbs = *cbs;
	pthread_mutex_init(&p->lock, NULL);
	*out = p;
	return 0;
}

void packer_close(struct packer *p)
{
	if (!p)
		return;
	/* Every caller of packer_put has returned, and the last one out of a
	 * pack frees it: only an unused open pack can be left. */
	if (p->open) {
		gr_assert(p->open->users == 0);
		pthread_cond_destroy(&p->open->done);
		free(p->open->buf);
		free(p->open);
	}
	pthread_mutex_destroy(&p->lock);
	free(p);
}

void packer_get_stats(struct packer *p, struct packer_stats *st)
{
	st->packs = __atomic_load_n(&p->st.packs, __ATOMIC_RELAXED);
	st->frames = __atomic_load_n(&p->st.frames, __ATOMIC_RELAXED);
	st->bytes = __atomic_load_n(&p->st.bytes, __ATOMIC_RELAXED);
	st->errors = __atomic_load_n(&p->st.errors, __ATOMIC_RELAXED);
}

/* ---- packs (under p->lock unless said otherwise) ---- */

static int pack_new(struct packer *p, struct pack **out)
{
	struct pack *k = calloc(1, sizeof(*k));
	int err;

	if (!k)
		return ENOMEM;
	err = p->cbs.new_id(p->cbs.arg, &k->id);
	if (err) {
		free(k);
		return err;
	}
	k->deadline_ms = mono_ms() + p->o.window_ms;
	/* timed waits run on the monotonic clock, like deadline_ms */
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&k->done, &ca);
	pthread_condattr_destroy(&ca);
	*out = k;
	return 0;
}

/* Take the open pack out of filling: its caller must put it. */
static struct pack *seal(struct packer *p)
{
	struct pack *k = p->open;

	gr_assert(k && k->state == PK_OPEN);
	k->state = PK_SEALED;
	p->open = NULL;
	return k;
}

/* Put a sealed pack and record its total; wakes its users. Called
 * without the lock. */
static void put_pack(struct packer *p, struct pack *k)
{
	char key[KEY_CAP];
	int err;

	chunkstore_pack_key(k->id, key, sizeof(key));
	err = objstore_put(p->store, key, k->buf, k->len);
	if (err) {
		log_err("cannot upload pack '%s' (%zu bytes): %s", key, k->len,
			objstore_strerror(err));
		err = err == ENOMEM || err == ENOSPC || err == EDQUOT ? err
								      : EIO;
	} else {
		err = p->cbs.total(p->cbs.arg, k->id, k->len);
		if (err)
			log_err("cannot record pack '%s' in the metadata", key);
	}
	if (err) {
		STAT_ADD(p, errors, 1);
	} else {
		STAT_ADD(p, packs, 1);
		STAT_ADD(p, frames, (uint64_t)k->frames);
		STAT_ADD(p, bytes, k->len);
	}
	pthread_mutex_lock(&p->lock);
	k->state = PK_DONE;
	k->err = err;
	pthread_cond_broadcast(&k->done);
	pthread_mutex_unlock(&p->lock);
}

/* Drop one user of k; the last one frees a done pack. */
static void pack_leave(struct pack *k)
{
	if (--k->users == 0 && k->state == PK_DONE) {
		pthread_cond_destroy(&k->done);
		free(k->buf);
		free(k);
	}
}

static int append(struct pack *k, const void *frame, size_t len)
{
	if (k->len + len > k->cap) {
		size_t cap = k->cap ? k->cap * 2 : 256u << 10;
		while (cap < k->len + len)
			cap *= 2;
		char *b = realloc(k->buf, cap);
		if (!b)
			return ENOMEM;
		k->buf = b;
		k->cap = cap;
	}
	memcpy(k->buf + k->len, frame, len);
	k->len += len;
	return 0;
}

/* ---- public ---- */

void packer_hold(struct packer *p, int delta)
{
	pthread_mutex_lock(&p->lock);
	p->holders += delta;
	gr_assert(p->holders >= 0);
	/* the waiters may be all that is left to come */
	if (delta < 0 && p->open)
		pthread_cond_broadcast(&p->open->done);
	pthread_mutex_unlock(&p->lock);
}

struct frame {
	void *enc;
	size_t len;
};

int packer_put(struct packer *p, struct packer_item *items, size_t n)
{
	struct frame *fr;
	struct pack **mine; /* packs this call has frames in, each once */
	struct pack **full; /* sealed here: this call puts them */
	size_t nmine = 0, nfull = 0;
	int err = 0;

	if (!p || (!items && n))
		return EINVAL;
	if (n == 0)
		return 0;
	fr = calloc(n, sizeof(*fr));
	mine = calloc(n, sizeof(*mine));
	full = calloc(n, sizeof(*full));
	if (!fr || !mine || !full) {
		err = ENOMEM;
		goto free_arrays;
	}
	/* Encoding is the CPU work: done before taking the lock. */
	for (size_t i = 0; i < n; i++) {
		fr[i].enc = malloc(codec_bound(items[i].len));
		if (!fr[i].enc) {
			err = ENOMEM;
			goto free_frames;
		}
		err = codec_encode(items[i].raw, items[i].len, p->o.compress,
				   fr[i].enc, &fr[i].len);
		if (err) {
			log_err("cannot encode a slice for a pack: %s",
				codec_strerror(err));
			err = EIO;
			goto free_frames;
		}
	}

	pthread_mutex_lock(&p->lock);
	for (size_t i = 0; i < n && !err; i++) {
		struct pack *k = p->open;
		if (k && k->len && k->len + fr[i].len > p->o.pack_size) {
			full[nfull++] = seal(p);
			k = NULL;
		}
		if (!k) {
			err = pack_new(p, &k);
			if (err)
				break;
			p->open = k;
		}
		err = append(k, fr[i].enc, fr[i].len);
		if (err)
			break; /* bytes of earlier frames stay: they are used */
		items[i].at = (struct chunkstore_frame){
		    .pack = k->id,
		    .off = (uint32_t)(k->len - fr[i].len),
		    .len = (uint32_t)fr[i].len,
		};
		k->frames++;
		if (!nmine || mine[nmine - 1] != k) {
			mine[nmine++] = k;
			k->users++;
		}
		if (k->len >= p->o.pack_size)
			full[nfull++] = seal(p);
	}
	pthread_mutex_unlock(&p->lock);

	for (size_t i = 0; i < nfull; i++)
		put_pack(p, full[i]);

	pthread_mutex_lock(&p->lock);
	for (size_t j = 0; j < nmine; j++) {
		struct pack *k = mine[j];
		while (k->state != PK_DONE) {
			/* Seal when the window is over, or when every writer
			 * that may still add a frame has added its own. */
			if (k->state == PK_OPEN &&
			    (k->users >= p->holders ||
			     mono_ms() >= k->deadline_ms)) {
				seal(p);
				pthread_mutex_unlock(&p->lock);
				put_pack(p, k);
				pthread_mutex_lock(&p->lock);
				continue;
			}
			if (k->state == PK_OPEN) {
				struct timespec ts;
				clock_gettime(CLOCK_MONOTONIC, &ts);
				int64_t left = k->deadline_ms - mono_ms();
				if (left < 0)
					left = 0;
				ts.tv_sec += left / 1000;
				ts.tv_nsec += (left % 1000) * 1000000;
				if (ts.tv_nsec >= 1000000000) {
					ts.tv_sec++;
					ts.tv_nsec -= 1000000000;
				}
				pthread_cond_timedwait(&k->done, &p->lock, &ts);
			} else {
				pthread_cond_wait(&k->done, &p->lock);
			}
		}
		if (k->err && !err)
			err = k->err;
		pack_leave(k);
	}
	pthread_mutex_unlock(&p->lock);

free_frames:
	for (size_t i = 0; i < n; i++)
		free(fr[i].enc);
free_arrays:
	free(full);
	free(mine);
	free(fr);
	return err;
}
