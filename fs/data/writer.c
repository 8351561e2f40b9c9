/*
 * writer.c - per-file write buffers and the shared uploader pool.
 *
 * Writes become slices (one per run of contiguous writes inside a chunk),
 * buffered in block-sized pieces; a full block goes to the pool's FIFO
 * upload queue at once, so uploading overlaps the application's writes.
 * flush queues the partial blocks, waits for this writer's uploads and
 * commits the slices through a callback.
 */
#include "fs/data/writer.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "lib/bigbuf.h"
#include "lib/fsutil.h"
#include "lib/log.h"
#include "lib/workq.h"
#include "fs/data/stage.h"

/* Pending slices per writer before a write forces a flush: bounds the
 * memory of the slice table and the size of one metadata commit. */
#define WRITER_MAX_SLICES 256
/* Buffers start small and double, so a small file does not take a whole
 * block of the shared budget; one that reaches BIGBUF_MIN (a stream) takes
 * the whole block at once. */
#define BUF_GRAIN 4096u

/* Internal: reserve() flushed the writer; the caller must look again. */
#define RESTART (-1)

/*
 * The budget and the rule that keeps it deadlock-free.
 *
 * Every byte allocated for buffered data is charged to pool->buffered:
 * partial blocks a writer is filling (writer->held) and full or flushed
 * blocks queued or being uploaded (pool->inflight counts them). Uploads
 * never wait for a writer, so in-flight memory is always freed eventually.
 * A writer that needs n more bytes when buffered + n > budget:
 *   1. waits while any upload is in flight (each completion wakes it);
 *   2. else, if it holds partial blocks itself, flushes them (upload and
 *      commit), which frees its memory, and tries again;
 *   3. else it holds nothing, and all buffered memory sits in partial
 *      blocks of other writers that only they can free (they may be idle
 *      for ever): it takes one whole block over the budget.
 * A writer takes the over-budget block only while holding nothing, so the
 * pool stays under budget + one block per writer. The upload queue (a
 * workq) needs no bound of its own: everything queued is charged memory,
 * so its cap is never reached and a push never waits. Uploads are
 * FIFO across writers, so a big writer cannot starve a small one's flush
 * for longer than the blocks queued ahead of it.
 *
 * Durability: the uploaders put blocks lazily (objstore_put_lazy: on a
 * file:// pool, without an fsync each), as many of one file at once as
 * there are uploaders; a flush waits for its writer's uploads, then one
 * objstore_sync makes them durable before the commit that points at them
 * (shared by the flushes of other writers that arrive meanwhile). A sync
 * covers every writer's puts, so one that fails may have lost the puts
 * of writers that did not ask for it: the pool counts its failed syncs,
 * and a flush fails when one failed after its writer's first lazy put of
 * the flush (sync_blocks), even if its own sync succeeded.
 *
 * Errors: a failed upload (or commit) makes the writer's pending slices
 * unusable; they are dropped, never committed, and the error stays sticky
 * (writer_write refuses more data) until writer_flush reports it once, as
 * Linux reports a writeback error once to fsync/close. Objects already
 * uploaded for dropped slices are left to gc's leaked-object scan.
 */

/* One block of a slice, being filled or queued for upload. */
struct wblock {
	struct workq_job job; /* in the pool's upload queue */
	struct writer *w;
	uint64_t id;
	uint32_t idx;  /* block index inside the slice */
	uint32_t len;  /* bytes filled */
	uint32_t cap;  /* bytes allocated, and charged to the budget */
	uint32_t room; /* bytes before data: the block is encoded in place */
	char *data;
};

static void wblock_free(struct wblock *b)
{
	bigbuf_free(b->data ? b->data - b->room : NULL);
	free(b);
}

struct wslice {
	uint32_t chunk, pos, size;
	uint64_t id;
	struct wblock *cur; /* the partial block (index size / bs), or NULL */
	struct chunkstore_frame at; /* packed: where (at.pack 0: blocks) */
};

struct wpool {
	struct chunkstore *cs;
	struct packer *pk;   /* NULL: no packing */
	struct stage *stage; /* NULL: blocks go to the store at once */
	uint32_t pack_max;   /* slices up to this many bytes are packed */
	uint32_t bs;
	size_t room; /* chunkstore_headroom() */
	size_t budget;
	struct workq *uploads; /* the uploaders, FIFO across writers */

	/* Lock order: after writer->lock; never held across an upload nor
	 * while pushing to uploads (whose lock is a leaf anyway). */
	pthread_mutex_t lock;
	pthread_cond_t freed; /* an upload finished: memory and inflight fell */
	size_t buffered;      /* bytes charged; protected by lock */
	size_t inflight;      /* blocks queued or uploading; ditto */
	uint64_t waits;	      /* writers that waited for budget; ditto */
	uint64_t wait_ns;     /* the time they waited; ditto */
	uint64_t sync_fails;  /* syncs of the store that failed; ditto */
	int sync_err;	      /* the last one's error; ditto */
};

struct writer {
	struct wpool *p;
	uint64_t ino;
	struct writer_cbs cbs;

	/* Lock order: before pool->lock. Held across callbacks and while
	 * waiting for budget or uploads. */
	pthread_mutex_t lock;
	struct wslice *slices;	      /* protected by lock */
	struct meta_chunk_slice *out; /* commit scratch, same capacity */
	size_t nslices, cap;	      /* protected by lock */
	size_t held; /* bytes charged for partial blocks; protected by lock */

	int holding; /* counted in packer_hold; protected by lock */
	struct packer_batch batch; /* for the next flush; protected by lock */
	/* blocks put lazily since the last flush, and the pool's sync_fails
	 * when the first of them was queued; protected by lock */
	int lazy;
	uint64_t gen;
	int inflight; /* blocks queued or uploading; protected by pool->lock */
	int err;      /* sticky upload error; protected by pool->lock */
	int closing;  /* queued blocks are dropped; protected by pool->lock */
};

/* ---- uploaders ---- */

/* A job of the upload queue: put one block, then give back its memory. */
static void upload_run(struct workq_job *job)
{
	struct wblock *b = (struct wblock *)job;
	struct writer *w = b->w;
	struct wpool *p = w->p;

	pthread_mutex_lock(&p->lock);
	int closing = w->closing;
	pthread_mutex_unlock(&p->lock);
	int err = 0;
	if (closing)
		; /* writer_close drops what it did not flush */
	else if (p->stage)
		err = stage_put(p->stage, b->id, b->idx, b->data, b->len);
	else /* durable at the flush's sync */
		err = chunkstore_put_block_lazy(p->cs, b->id, b->idx, b->data,
						b->len, b->room != 0);
	uint32_t cap = b->cap;
	wblock_free(b);

	pthread_mutex_lock(&p->lock);
	p->buffered -= cap;
	p->inflight--;
	w->inflight--;
	/* chunkstore logged the cause; the application gets EIO, unless the
	 * store is full: that it can act on */
	if (err && !w->err)
		w->err =
		    err == ENOMEM || err == ENOSPC || err == EDQUOT ? err : EIO;
	pthread_cond_broadcast(&p->freed);
	pthread_mutex_unlock(&p->lock);
}

int wpool_open(struct chunkstore *cs, int uploaders, size_t buffer_size,
	       struct wpool **out)
{
	struct wpool *p;
	int err;

	if (!out)
		return EINVAL;
	*out = NULL;
	if (!cs || uploaders < 1 || uploaders > 64 || buffer_size == 0)
		return EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return ENOMEM;
	p->cs = cs;
	p->bs = chunkstore_block_size(cs);
	p->room = chunkstore_headroom(cs);
	p->budget = buffer_size;
	/* the budget bounds the queue (see the head comment): no cap */
	err = workq_open("gr-blockput", uploaders, SIZE_MAX, &p->uploads);
	if (err) {
		log_err("cannot start uploader threads: %s", strerror(err));
		goto free_p;
	}
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->freed, NULL);
	*out = p;
	return 0;

free_p:
	free(p);
	return err;
}

void wpool_close(struct wpool *p)
{
	if (!p)
		return;
	/* writers are closed first: nothing is left to upload */
	gr_assert(p->inflight == 0);
	workq_close(p->uploads);
	gr_assert(p->buffered == 0);
	pthread_cond_destroy(&p->freed);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

void wpool_set_packer(struct wpool *p, struct packer *pk, uint32_t pack_max)
{
	p->pk = pk;
	p->pack_max = pk ? pack_max : 0;
}

void wpool_set_stage(struct wpool *p, struct stage *st)
{
	p->stage = st;
}

size_t wpool_buffered(struct wpool *p)
{
	pthread_mutex_lock(&p->lock);
	size_t n = p->buffered;
	pthread_mutex_unlock(&p->lock);
	return n;
}

void wpool_get_stats(struct wpool *p, struct wpool_stats *st)
{
	pthread_mutex_lock(&p->lock);
	st->buffered = p->buffered;
	st->budget = p->budget;
	st->waits = p->waits;
	st->wait_ns = p->wait_ns;
	pthread_mutex_unlock(&p->lock);
}

/* ---- writer internals (all with w->lock held) ---- */

static void enqueue(struct writer *w, struct wblock *b)
{
	struct wpool *p = w->p;

	w->held -= b->cap;
	b->job.run = upload_run;
	pthread_mutex_lock(&p->lock);
	p->inflight++;
	w->inflight++;
	if (!p->stage && !w->lazy) {
		w->lazy = 1;
		w->gen = p->sync_fails;
	}
	pthread_mutex_unlock(&p->lock);
	/* counted first: the upload may finish before push returns. It
	 * cannot wait (no cap) nor be refused (writers close before the
	 * pool). */
	int err = workq_push(p->uploads, &b->job);
	gr_assert(err == 0);
}

static void unreserve(struct writer *w, size_t n)
{
	w->held -= n;
	pthread_mutex_lock(&w->p->lock);
	w->p->buffered -= n;
	pthread_cond_broadcast(&w->p->freed);
	pthread_mutex_unlock(&w->p->lock);
}

static void drop_block(struct writer *w, struct wblock *b)
{
	unreserve(w, b->cap);
	wblock_free(b);
}

/* Tell the packer whether this writer may soon bring it a small slice. */
static void hold(struct writer *w, int on)
{
	if (w->p->pk && on != w->holding) {
		w->holding = on;
		packer_hold(w->p->pk, on ? 1 : -1);
	}
}

/* A slice small enough to pack, whose bytes are all in its partial block
 * (none uploaded yet). */
static int packable(const struct writer *w, const struct wslice *s)
{
	return w->p->pk && s->cur && s->cur->idx == 0 && s->cur->len &&
	       s->size == s->cur->len && s->size <= w->p->pack_max;
}

/* Hand the packable slices to the packer; their partial blocks are freed
 * once the packs holding them are in the store. */
static int pack_slices(struct writer *w)
{
	struct packer_item *items;
	struct packer_batch batch = w->batch;
	size_t n = 0, k = 0;
	int err;

	w->batch = (struct packer_batch){0}; /* the next flush's own */
	for (size_t i = 0; i < w->nslices; i++)
		n += packable(w, &w->slices[i]);
	if (!n) {
		if (batch.id && w->p->pk)
			packer_put_batch(w->p->pk, NULL, 0, &batch);
		return 0;
	}
	items = calloc(n, sizeof(*items));
	for (size_t i = 0; items && i < w->nslices; i++) {
		const struct wslice *s = &w->slices[i];
		if (packable(w, s))
			items[k++] = (struct packer_item){.raw = s->cur->data,
							  .len = s->size};
	}
	/* without items the slices fail like a failed put: dropped below */
	err = items ? packer_put_batch(w->p->pk, items, n,
				       batch.id ? &batch : NULL)
		    : ENOMEM;
	k = 0;
	for (size_t i = 0; i < w->nslices; i++) {
		struct wslice *s = &w->slices[i];
		if (!packable(w, s))
			continue;
		if (!err)
			s->at = items[k++].at;
		drop_block(w, s->cur);
		s->cur = NULL;
	}
	free(items);
	return err;
}

/*
 * Make the blocks w put lazily durable (see the head comment): 0, or the
 * error of a sync that failed since the first of them was queued.
 */
static int sync_blocks(struct writer *w)
{
	struct wpool *p = w->p;
	int err = chunkstore_sync(p->cs);

	pthread_mutex_lock(&p->lock);
	if (err) {
		p->sync_fails++;
		p->sync_err = err;
	} else if (p->sync_fails != w->gen) {
		err = p->sync_err;
		log_err("a sync of the store failed while inode %llu had "
			"blocks in it: its flush fails (%s)",
			(unsigned long long)w->ino, gr_strerror(err));
	}
	pthread_mutex_unlock(&p->lock);
	/* as an upload's error: the store being full is worth saying */
	return !err || err == ENOSPC || err == EDQUOT ? err : EIO;
}

/*
 * Upload every partial block, wait for all of this writer's uploads, make
 * them durable and commit the slices. On an upload, sync or commit error
 * the pending slices are dropped (their objects are left for gc's
 * leaked-object scan) and the error is returned; `clear` says whether it
 * is reported now for good (writer_flush) or stays sticky for the next
 * writer_flush (a flush forced from inside writer_write, whose caller may
 * never see its data's fate).
 */
static int flush_locked(struct writer *w, int clear)
{
	struct wpool *p = w->p;
	size_t n = 0;
	int err, pack_err;

	for (size_t i = 0; i < w->nslices; i++) {
		struct wblock *b = w->slices[i].cur;
		if (!b || packable(w, &w->slices[i]))
			continue;
		w->slices[i].cur = NULL;
		if (b->len)
			enqueue(w, b);
		else
			drop_block(w, b);
	}
	/* while the blocks above upload */
	pack_err = pack_slices(w);
	/* nothing more for the packer: a writeback group commit waits for
	 * holders, not for writers busy committing */
	hold(w, 0);

	pthread_mutex_lock(&p->lock);
	while (w->inflight)
		pthread_cond_wait(&p->freed, &p->lock);
	if (pack_err && !w->err)
		w->err = pack_err;
	err = w->err;
	if (clear)
		w->err = 0;
	pthread_mutex_unlock(&p->lock);

	if (!err) {
		for (size_t i = 0; i < w->nslices; i++) {
			const struct wslice *s = &w->slices[i];
			if (!s->size)
				continue;
			w->out[n++] = (struct meta_chunk_slice){
			    .idx = s->chunk,
			    .s = {.id = s->id,
				  .size = s->size,
				  .off = 0,
				  .len = s->size,
				  .pos = s->pos,
				  .pack = s->at.pack,
				  .poff = s->at.off,
				  .plen = s->at.len},
			};
		}
		/* staged blocks: their files' names too, before the commit */
		if (n && p->stage)
			err = stage_durable(p->stage);
		/* blocks in the store: durable before the commit */
		if (n && !err && w->lazy)
			err = sync_blocks(w);
		if (n && !err)
			err = w->cbs.commit(w->cbs.arg, w->ino, w->out, n);
		if (err && !clear) {
			pthread_mutex_lock(&p->lock);
			if (!w->err)
				w->err = err;
			pthread_mutex_unlock(&p->lock);
		}
	}
	if (err && w->nslices)
		log_err("dropping %zu unwritten slices of inode %llu after a "
			"failed flush: %s",
			w->nslices, (unsigned long long)w->ino,
			err > 0 ? strerror(err) : "metadata commit failed");
	w->nslices = 0;
	w->lazy = 0; /* all uploaded (or dropped), synced or failed */
	hold(w, 0);
	gr_assert(w->held == 0);
	return err;
}

/*
 * Charge between need and full bytes (full >= need) to the budget,
 * following the rule in the head comment; *got is what was charged.
 * Returns 0, RESTART if the writer had to flush itself (its slices are
 * gone: the caller starts over), or the error of that flush.
 */
static int reserve(struct writer *w, size_t need, size_t full, size_t *got)
{
	struct wpool *p = w->p;
	size_t n = need;
	int64_t t0 = 0;

	pthread_mutex_lock(&p->lock);
	for (;;) {
		if (p->buffered + need <= p->budget)
			break;
		if (p->inflight) {
			if (!t0) { /* back-pressure: counted for the metrics */
				t0 = fsutil_mono_ns();
				p->waits++;
			}
			pthread_cond_wait(&p->freed, &p->lock);
			continue;
		}
		if (t0) {
			p->wait_ns += (uint64_t)(fsutil_mono_ns() - t0);
			t0 = 0;
		}
		if (w->held) {
			pthread_mutex_unlock(&p->lock);
			int err = flush_locked(w, 0);
			return err ? err : RESTART;
		}
		n = full; /* rule 3: a whole block, not a trickle of growth */
		break;
	}
	if (t0)
		p->wait_ns += (uint64_t)(fsutil_mono_ns() - t0);
	p->buffered += n;
	w->held += n;
	pthread_mutex_unlock(&p->lock);
	*got = n;
	return 0;
}

static int sticky_err(struct writer *w)
{
	pthread_mutex_lock(&w->p->lock);
	int err = w->err;
	pthread_mutex_unlock(&w->p->lock);
	return err;
}

/* The slice a write at (chunk, pos) extends, or NULL. */
static struct wslice *open_slice(struct writer *w, uint32_t chunk, uint32_t pos)
{
	if (!w->nslices)
		return NULL;
	struct wslice *s = &w->slices[w->nslices - 1];
	return s->chunk == chunk && s->pos + s->size == pos ? s : NULL;
}

static int new_slice(struct writer *w, uint32_t chunk, uint32_t pos,
		     struct wslice **out)
{
	uint64_t id;
	int err;

	if (w->nslices == WRITER_MAX_SLICES) {
		err = flush_locked(w, 0);
		if (err)
			return err;
	}
	if (w->nslices == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 8;
		struct wslice *s = realloc(w->slices, cap * sizeof(*s));
		if (!s)
			return ENOMEM;
		w->slices = s;
		struct meta_chunk_slice *o = realloc(w->out, cap * sizeof(*o));
		if (!o)
			return ENOMEM;
		w->out = o;
		w->cap = cap;
	}
	err = w->cbs.new_id(w->cbs.arg, &id);
	if (err)
		return err;
	struct wslice *s = &w->slices[w->nslices++];
	*s = (struct wslice){.chunk = chunk, .pos = pos, .id = id};
	*out = s;
	hold(w, 1);
	return 0;
}

/* Make s->cur hold at least `upto` bytes (upto <= bs). */
static int ensure_room(struct writer *w, struct wslice *s, uint32_t upto)
{
	uint32_t bs = w->p->bs;
	struct wblock *b = s->cur;
	uint32_t have = b ? b->cap : 0;
	size_t got;
	int err;

	if (upto <= have)
		return 0;
	uint32_t want = (upto + BUF_GRAIN - 1) / BUF_GRAIN * BUF_GRAIN;
	if (want < 2 * have)
		want = 2 * have;
	/* A big write is a stream: the whole block at once, a buffer used
	 * before (bigbuf.h), rather than growing one page by page. */
	if (want > bs || want >= BIGBUF_MIN)
		want = bs;
	err = reserve(w, want - have, bs - have, &got);
	if (err)
		return err;
	want = have + (uint32_t)got;

	if (!b) {
		b = calloc(1, sizeof(*b));
		if (!b)
			goto unreserve;
		b->w = w;
		b->id = s->id;
		b->idx = s->size / bs;
	}
	/* A whole block leaves room to be encoded in place (no copy of 4
	 * MiB on upload); a small one stays small. */
	char *d;
	if (b->data) {
		d = realloc(b->data - b->room, b->room + want);
	} else {
		b->room = want == bs ? (uint32_t)w->p->room : 0;
		d = bigbuf_alloc(b->room + want);
	}
	if (!d) {
		if (!s->cur)
			free(b);
		goto unreserve;
	}
	b->data = d + b->room;
	b->cap = want;
	s->cur = b;
	return 0;

unreserve:
	unreserve(w, got);
	return ENOMEM;
}

/* ---- writer API ---- */

int writer_open(struct wpool *p, uint64_t ino, const struct writer_cbs *cbs,
		struct writer **out)
{
	struct writer *w;

	if (!out)
		return EINVAL;
	*out = NULL;
	if (!p || !cbs || !cbs->new_id || !cbs->commit)
		return EINVAL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return ENOMEM;
	w->p = p;
	w->ino = ino;
	w->cbs = *cbs;
	pthread_mutex_init(&w->lock, NULL);
	*out = w;
	return 0;
}

int writer_write(struct writer *w, uint64_t off, const void *buf, size_t len)
{
	const char *src = buf;
	uint32_t bs = w->p->bs;
	int err;

	if (!buf && len)
		return EINVAL;
	pthread_mutex_lock(&w->lock);
	err = sticky_err(w);
	while (!err && len) {
		uint32_t chunk = (uint32_t)(off / META_CHUNK_SIZE);
		uint32_t pos = (uint32_t)(off % META_CHUNK_SIZE);
		struct wslice *s = open_slice(w, chunk, pos);

		if (!s && (err = new_slice(w, chunk, pos, &s)))
			break;
		uint32_t boff = s->size % bs;
		size_t take = bs - boff;
		if (take > META_CHUNK_SIZE - pos)
			take = META_CHUNK_SIZE - pos;
		if (take > len)
			take = len;
		err = ensure_room(w, s, boff + (uint32_t)take);
		if (err == RESTART) {
			err = 0; /* s was flushed and committed: look again */
			continue;
		}
		if (err)
			break;

		struct wblock *b = s->cur;
		memcpy(b->data + boff, src, take);
		b->len = boff + (uint32_t)take;
		s->size += (uint32_t)take;
		if (w->holding && w->nslices == 1 &&
		    (s->size > w->p->pack_max || b->len == bs))
			hold(w, 0); /* a big file: nothing for the packer */
		if (b->len == bs) {
			s->cur = NULL;
			enqueue(w, b);
		}
		off += take;
		src += take;
		len -= take;
	}
	pthread_mutex_unlock(&w->lock);
	return err;
}

int writer_flush(struct writer *w)
{
	pthread_mutex_lock(&w->lock);
	int err = flush_locked(w, 1);
	pthread_mutex_unlock(&w->lock);
	return err;
}

void writer_set_batch(struct writer *w, uint64_t id, uint32_t n)
{
	pthread_mutex_lock(&w->lock);
	w->batch = (struct packer_batch){.id = id, .n = n};
	pthread_mutex_unlock(&w->lock);
}

int writer_dirty(struct writer *w)
{
	int dirty = 0;

	pthread_mutex_lock(&w->lock);
	for (size_t i = 0; i < w->nslices && !dirty; i++)
		dirty = w->slices[i].size > 0;
	pthread_mutex_unlock(&w->lock);
	return dirty;
}

uint64_t writer_end(struct writer *w)
{
	uint64_t end = 0;

	pthread_mutex_lock(&w->lock);
	for (size_t i = 0; i < w->nslices; i++) {
		const struct wslice *s = &w->slices[i];
		uint64_t e =
		    (uint64_t)s->chunk * META_CHUNK_SIZE + s->pos + s->size;
		if (s->size && e > end)
			end = e;
	}
	pthread_mutex_unlock(&w->lock);
	return end;
}

void writer_close(struct writer *w)
{
	if (!w)
		return;
	struct wpool *p = w->p;

	pthread_mutex_lock(&w->lock);
	for (size_t i = 0; i < w->nslices; i++) {
		if (w->slices[i].cur)
			drop_block(w, w->slices[i].cur);
	}
	w->nslices = 0;
	hold(w, 0);

	/* Its blocks still queued are skipped by the uploaders (not put);
	 * wait until they and the ones being uploaded, which still point at
	 * w, are done. */
	pthread_mutex_lock(&p->lock);
	w->closing = 1;
	while (w->inflight)
		pthread_cond_wait(&p->freed, &p->lock);
	pthread_mutex_unlock(&p->lock);
	pthread_mutex_unlock(&w->lock);

	pthread_mutex_destroy(&w->lock);
	free(w->slices);
	free(w->out);
	free(w);
}
