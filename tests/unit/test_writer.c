/*
 * test_writer.c - the write path and the read path together: writers and
 * the uploader pool over a mem:// store, with an in-memory fake of the
 * metadata (slice lists per chunk, ids from a counter, commits appended),
 * read back through reader_read and compared with what was written.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fs/data/reader.h"
#include "fs/data/stage.h"
#include "fs/data/writer.h"

#define KB	  (1u << 10)
#define MB	  (1u << 20)
#define CHUNK	  ((uint64_t)META_CHUNK_SIZE)
#define NFILES	  16
#define MAXCHUNKS 4

/* ---- fake metadata ---- */

struct fchunk {
	struct meta_slice *v;
	size_t n, cap;
};

struct ffile {
	struct fchunk c[MAXCHUNKS];
	uint64_t length;
	int commits;
};

static struct {
	pthread_mutex_t lock;
	uint64_t next_id;
	struct ffile f[NFILES];
	int bad; /* commits that broke the writer's contract */
} fm = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int fm_new_id(void *arg, uint64_t *id)
{
	(void)arg;
	pthread_mutex_lock(&fm.lock);
	*id = ++fm.next_id;
	pthread_mutex_unlock(&fm.lock);
	return 0;
}

static size_t slow_pending(uint64_t id);

static int fm_commit(void *arg, uint64_t ino, const struct meta_chunk_slice *s,
		     size_t n)
{
	(void)arg;
	pthread_mutex_lock(&fm.lock);
	/* nothing committed may point at a block that is not durable */
	for (size_t i = 0; i < n; i++)
		if (!s[i].s.pack && slow_pending(s[i].s.id)) {
			fprintf(stderr,
				"slice %" PRIu64 " committed with "
				"blocks not synced\n",
				s[i].s.id);
			fm.bad++;
		}
	if (ino >= NFILES || n == 0)
		fm.bad++;
	for (size_t i = 0; i < n && ino < NFILES; i++) {
		const struct meta_slice *m = &s[i].s;
		struct fchunk *c;

		if (s[i].idx >= MAXCHUNKS || m->id == 0 || m->size == 0 ||
		    m->off != 0 || m->len != m->size ||
		    (uint64_t)m->pos + m->len > CHUNK) {
			fm.bad++;
			continue;
		}
		c = &fm.f[ino].c[s[i].idx];
		if (c->n == c->cap) {
			c->cap = c->cap ? 2 * c->cap : 16;
			c->v = realloc(c->v, c->cap * sizeof(*c->v));
		}
		c->v[c->n++] = *m;
		uint64_t end = s[i].idx * CHUNK + m->pos + m->len;
		if (end > fm.f[ino].length)
			fm.f[ino].length = end;
	}
	if (ino < NFILES)
		fm.f[ino].commits++;
	pthread_mutex_unlock(&fm.lock);
	return 0;
}

static int fm_chunk(void *arg, uint64_t ino, uint32_t idx,
		    struct meta_slice **s, size_t *n)
{
	(void)arg;
	*s = NULL;
	*n = 0;
	if (ino >= NFILES || idx >= MAXCHUNKS)
		return 0;
	pthread_mutex_lock(&fm.lock);
	struct fchunk *c = &fm.f[ino].c[idx];
	if (c->n) {
		*s = malloc(c->n * sizeof(**s));
		memcpy(*s, c->v, c->n * sizeof(**s));
		*n = c->n;
	}
	pthread_mutex_unlock(&fm.lock);
	return 0;
}

static uint64_t fm_length(uint64_t ino)
{
	pthread_mutex_lock(&fm.lock);
	uint64_t l = fm.f[ino].length;
	pthread_mutex_unlock(&fm.lock);
	return l;
}

static struct chunkstore *cs;

/*
 * Cut file ino to newlen, as the metadata does: a hole over what was cut,
 * and the slices that lay wholly beyond it lose their last reference: out
 * of the list, their objects deleted (chunkstore_delete, as the reclaimer
 * does; staged blocks are told first).
 */
static void fm_truncate(uint64_t ino, uint64_t newlen)
{
	struct meta_slice dead[64];
	size_t ndead = 0;

	pthread_mutex_lock(&fm.lock);
	struct ffile *f = &fm.f[ino];
	for (uint32_t ci = 0; ci < MAXCHUNKS; ci++) {
		struct fchunk *c = &f->c[ci];
		uint64_t start = ci * CHUNK;
		if (start + CHUNK <= newlen || start >= f->length)
			continue;
		uint32_t from = newlen > start ? (uint32_t)(newlen - start) : 0;
		size_t k = 0;
		for (size_t i = 0; i < c->n; i++) {
			if (c->v[i].id && c->v[i].pos >= from && ndead < 64) {
				dead[ndead++] = c->v[i];
				continue;
			}
			c->v[k++] = c->v[i];
		}
		c->n = k;
		uint64_t end =
		    f->length - start < CHUNK ? f->length - start : CHUNK;
		if (c->n == c->cap) {
			c->cap = c->cap ? 2 * c->cap : 16;
			c->v = realloc(c->v, c->cap * sizeof(*c->v));
		}
		uint32_t hl = (uint32_t)end - from;
		c->v[c->n++] = (struct meta_slice){
		    .id = 0, .size = hl, .len = hl, .pos = from};
	}
	f->length = newlen;
	pthread_mutex_unlock(&fm.lock);
	for (size_t i = 0; i < ndead; i++)
		chunkstore_delete(cs, dead[i].id, dead[i].size);
}

static void fm_reset(void)
{
	for (int i = 0; i < NFILES; i++)
		for (int c = 0; c < MAXCHUNKS; c++)
			free(fm.f[i].c[c].v);
	memset(fm.f, 0, sizeof(fm.f));
	fm.next_id = 0;
	fm.bad = 0;
}

static const struct writer_cbs cbs = {.new_id = fm_new_id, .commit = fm_commit};

/* ---- a store whose puts can be slowed down ---- */

/*
 * It also keeps what durability in batches promises (objstore.h): the
 * slices with blocks put lazily and not yet synced (ids, one entry per
 * block), which no commit may point at (fm_commit checks), and the syncs,
 * which tests can make fail.
 */
#define PENDING_MAX 65536
struct slow_store {
	struct objstore base; /* first */
	struct objstore *inner;
	int put_delay_us;
	pthread_mutex_t lock;
	uint64_t pending[PENDING_MAX]; /* protected by lock */
	size_t npending;	       /* ditto */
	int lazy, syncs;	       /* ditto */
	int sync_err;		       /* the next syncs fail so; ditto */
};
static struct slow_store slow;

/* Blocks of slice id put lazily and not synced yet. */
static size_t slow_pending(uint64_t id)
{
	size_t n = 0;

	pthread_mutex_lock(&slow.lock);
	for (size_t i = 0; i < slow.npending; i++)
		n += slow.pending[i] == id;
	pthread_mutex_unlock(&slow.lock);
	return n;
}

static int slow_get(struct objstore *s, const char *key, uint64_t off,
		    size_t len, void **data, size_t *got)
{
	return objstore_get(((struct slow_store *)s)->inner, key, off, len,
			    data, got);
}

static int slow_put(struct objstore *s, const char *key, const void *data,
		    size_t len)
{
	struct slow_store *w = (struct slow_store *)s;

	if (w->put_delay_us)
		usleep((useconds_t)w->put_delay_us);
	return objstore_put(w->inner, key, data, len);
}

static int slow_put_lazy(struct objstore *s, const char *key, const void *data,
			 size_t len)
{
	struct chunkstore_keyinfo k;
	int err = slow_put(s, key, data, len);

	if (err || !chunkstore_parse_key(key, &k) || k.pack)
		return err;
	pthread_mutex_lock(&slow.lock);
	if (slow.npending < PENDING_MAX)
		slow.pending[slow.npending++] = k.id;
	else
		err = ENOMEM; /* the test's own limit: fails the flush */
	slow.lazy++;
	pthread_mutex_unlock(&slow.lock);
	return err;
}

/* A sync that fails leaves its blocks pending for ever: lost. */
static int slow_sync(struct objstore *s)
{
	(void)s;
	pthread_mutex_lock(&slow.lock);
	int err = slow.sync_err;
	slow.syncs++;
	if (!err)
		slow.npending = 0;
	pthread_mutex_unlock(&slow.lock);
	return err;
}

static int slow_del(struct objstore *s, const char *key)
{
	return objstore_del(((struct slow_store *)s)->inner, key);
}

static int slow_head(struct objstore *s, const char *key, uint64_t *size)
{
	return objstore_head(((struct slow_store *)s)->inner, key, size);
}

static int slow_list(struct objstore *s, const char *prefix,
		     objstore_list_fn fn, void *arg)
{
	return objstore_list(((struct slow_store *)s)->inner, prefix, fn, arg);
}

static void slow_close(struct objstore *s)
{
	(void)s;
}

static const struct objstore_ops slow_ops = {
    .scheme = "slow",
    .get = slow_get,
    .put = slow_put,
    .put_lazy = slow_put_lazy,
    .sync = slow_sync,
    .del = slow_del,
    .head = slow_head,
    .list = slow_list,
    .close = slow_close,
};

/* ---- fixture ---- */

static struct objstore *mem;
static struct wpool *pool;
static struct stage *stage; /* writeback tests */

static void setup(uint32_t bs, enum codec_compress c, int uploaders,
		  size_t budget)
{
	struct chunkstore_opts o = {
	    .block_size = bs, .compress = c, .mem_cache_bytes = 4 * MB};

	fm_reset();
	cr_assert_eq(objstore_open("mem://", NULL, &mem), 0);
	memset(&slow, 0, sizeof(slow));
	slow.base.ops = &slow_ops;
	slow.inner = mem;
	pthread_mutex_init(&slow.lock, NULL);
	cr_assert_eq(chunkstore_open(&slow.base, &o, &cs), 0);
	cr_assert_eq(wpool_open(cs, uploaders, budget, &pool), 0);
}

static void teardown(void)
{
	cr_expect_eq(wpool_buffered(pool), 0, "memory still charged");
	wpool_close(pool);
	chunkstore_close(cs);
	objstore_close(mem);
	cr_expect_eq(fm.bad, 0, "%d commits broke the contract", fm.bad);
	fm_reset();
}

/* Runs of a zero-copy read, laid end to end, each unpinned at once. */
struct gather {
	char *buf;
	size_t at;
};

static int gather_run(void *arg, const void *data, size_t len,
		      struct chunkstore_pin *pin)
{
	struct gather *g = arg;

	memcpy(g->buf + g->at, data, len);
	g->at += len;
	chunkstore_unpin(cs, pin);
	return 0;
}

/* Read through reader_read, and check that reader_read_pinned hands out
 * the very same bytes (or the same error). */
static int read_file(uint64_t ino, uint64_t off, size_t len, void *buf,
		     size_t *got)
{
	uint64_t length = fm_length(ino);
	int err =
	    reader_read(cs, ino, length, off, len, buf, got, fm_chunk, NULL);
	struct gather g = {malloc(len ? len : 1), 0};
	size_t pgot = 0;

	cr_assert(g.buf);
	int perr = reader_read_pinned(cs, ino, length, off, len, &pgot,
				      gather_run, &g, fm_chunk, NULL);
	cr_assert_eq(perr, err, "pinned read: %d, copied read: %d", perr, err);
	if (!err) {
		cr_assert_eq(pgot, *got);
		cr_assert_eq(g.at, pgot, "runs of %zu bytes for %zu", g.at,
			     pgot);
		cr_assert_eq(memcmp(g.buf, buf, pgot), 0,
			     "pinned read of [%llu, +%zu) differs",
			     (unsigned long long)off, len);
	}
	free(g.buf);
	return err;
}

static uint64_t seed_from_env(const char *test)
{
	const char *e = getenv("GRANARY_SEED");
	uint64_t seed = e ? strtoull(e, NULL, 0) : 0x600dcafeull;

	printf("test_writer %s: seed %" PRIu64
	       " (set GRANARY_SEED to repeat)\n",
	       test, seed);
	fflush(stdout);
	return seed ? seed : 1;
}

static uint64_t xs(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* The byte at offset x of generated file `salt`: lets a test check data
 * without keeping a copy of it. */
static unsigned char gen_byte(uint64_t salt, uint64_t x)
{
	uint64_t z = (x >> 3) + salt * 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return (unsigned char)(z >> ((x & 7) * 8));
}

static void gen_fill(uint64_t salt, uint64_t off, unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = gen_byte(salt, off + i);
}

/* Index of the first byte of [off, off+n) that differs from gen, or -1. */
static long long gen_check(uint64_t salt, uint64_t off, const unsigned char *p,
			   size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != gen_byte(salt, off + i))
			return (long long)i;
	return -1;
}

/* ---- slices and commits ---- */

Test(writer, slices_extend_and_split)
{
	struct writer *w;

	setup(64 * KB, CODEC_NONE, 2, 8 * MB);
	cr_assert_eq(writer_open(pool, 1, &cbs, &w), 0);
	char buf[200];
	memset(buf, 'a', sizeof(buf));
	cr_assert_eq(writer_write(w, 0, buf, 100), 0);
	cr_assert_eq(writer_write(w, 100, buf, 100), 0); /* extends */
	cr_assert_eq(writer_write(w, 50, buf, 10), 0);	 /* new slice */
	cr_assert_eq(writer_write(w, 60, buf, 10), 0);	 /* extends it */
	cr_assert_eq(writer_write(w, 1000, buf, 0), 0);	 /* nothing */
	cr_assert(writer_dirty(w));
	cr_assert_eq(writer_end(w), 200);
	cr_assert_eq(fm.f[1].commits, 0, "committed before flush");
	cr_assert_eq(writer_flush(w), 0);
	cr_assert_not(writer_dirty(w));
	cr_assert_eq(writer_end(w), 0);
	cr_assert_eq(fm.f[1].commits, 1);
	cr_assert_eq(fm.f[1].c[0].n, 2);
	struct meta_slice *s = fm.f[1].c[0].v;
	cr_assert(s[0].pos == 0 && s[0].size == 200 && s[0].len == 200);
	cr_assert(s[1].pos == 50 && s[1].size == 20 && s[1].len == 20);
	cr_assert_neq(s[0].id, s[1].id);

	/* Across a chunk boundary: one slice on each side. */
	cr_assert_eq(writer_write(w, CHUNK - 10, buf, 30), 0);
	cr_assert_eq(writer_end(w), CHUNK + 20);
	cr_assert_eq(writer_flush(w), 0);
	cr_assert_eq(fm.f[1].c[0].n, 3);
	cr_assert_eq(fm.f[1].c[0].v[2].pos, CHUNK - 10);
	cr_assert_eq(fm.f[1].c[0].v[2].size, 10);
	cr_assert_eq(fm.f[1].c[1].n, 1);
	cr_assert_eq(fm.f[1].c[1].v[0].pos, 0);
	cr_assert_eq(fm.f[1].c[1].v[0].size, 20);
	cr_assert_eq(fm_length(1), CHUNK + 20);
	/* A flush with nothing buffered commits nothing. */
	cr_assert_eq(writer_flush(w), 0);
	cr_assert_eq(fm.f[1].commits, 2);
	writer_close(w);
	teardown();
}

Test(writer, read_sees_only_committed)
{
	struct writer *w;
	char buf[16];
	size_t got;

	setup(64 * KB, CODEC_LZ4, 1, 8 * MB);
	cr_assert_eq(writer_open(pool, 1, &cbs, &w), 0);
	cr_assert_eq(writer_write(w, 0, "AAAA", 4), 0);
	cr_assert_eq(writer_flush(w), 0);
	cr_assert_eq(writer_write(w, 2, "BBBB", 4), 0);
	cr_assert_eq(read_file(1, 0, sizeof(buf), buf, &got), 0);
	cr_assert_eq(got, 4);
	cr_assert_eq(memcmp(buf, "AAAA", 4), 0);
	cr_assert_eq(writer_flush(w), 0);
	cr_assert_eq(read_file(1, 0, sizeof(buf), buf, &got), 0);
	cr_assert_eq(got, 6);
	cr_assert_eq(memcmp(buf, "AABBBB", 6), 0);
	/* A hole before data reads as zeros; nothing past the length. */
	cr_assert_eq(writer_write(w, 10, "C", 1), 0);
	cr_assert_eq(writer_flush(w), 0);
	memset(buf, 'x', sizeof(buf));
	cr_assert_eq(read_file(1, 0, sizeof(buf), buf, &got), 0);
	cr_assert_eq(got, 11);
	cr_assert_eq(memcmp(buf, "AABBBB\0\0\0\0C", 11), 0);
	cr_assert_eq(buf[11], 'x', "wrote past the length");
	cr_assert_eq(read_file(1, 11, 5, buf, &got), 0);
	cr_assert_eq(got, 0);
	writer_close(w);
	teardown();
}

Test(writer, slice_cap_forces_flush)
{
	struct writer *w;
	unsigned char *buf = malloc(6000);
	size_t got;

	setup(64 * KB, CODEC_NONE, 2, 8 * MB);
	cr_assert_eq(writer_open(pool, 1, &cbs, &w), 0);
	/* 300 writes with gaps: each one a new slice. */
	for (int i = 0; i < 300; i++) {
		unsigned char b = (unsigned char)(i + 1);
		cr_assert_eq(writer_write(w, (uint64_t)i * 20, &b, 1), 0);
	}
	cr_assert_geq(fm.f[1].commits, 1, "no flush at the slice cap");
	cr_assert_eq(writer_flush(w), 0);
	cr_assert_eq(fm.f[1].c[0].n, 300);
	cr_assert_eq(read_file(1, 0, 6000, buf, &got), 0);
	cr_assert_eq(got, 299 * 20 + 1);
	for (int i = 0; i < 300; i++)
		cr_assert_eq(buf[i * 20], (unsigned char)(i + 1));
	free(buf);
	writer_close(w);
	teardown();
}

Test(writer, close_drops_unflushed)
{
	struct writer *w;
	unsigned char *buf = malloc(3 * MB);

	setup(1 * MB, CODEC_NONE, 1, 16 * MB);
	slow.put_delay_us = 20 * 1000; /* blocks still queued at close */
	cr_assert_eq(writer_open(pool, 1, &cbs, &w), 0);
	memset(buf, 7, 3 * MB);
	cr_assert_eq(writer_write(w, 0, buf, 3 * MB - 5), 0);
	writer_close(w);
	cr_assert_eq(fm.f[1].commits, 0);
	cr_assert_eq(wpool_buffered(pool), 0);
	free(buf);
	teardown();
}

/* ---- big sequential write across a chunk boundary ---- */

Test(writer, sequential_70mib, .timeout = 60)
{
	const uint64_t size = 70ull * MB;
	const size_t steps[] = {MB + 12345, 777, 3 * MB, 4096, 200 * KB + 1};
	unsigned char *data = malloc(size), *buf = malloc(5 * MB + 1);
	struct writer *w;
	size_t got;

	cr_assert(data && buf);
	setup(1 * MB, CODEC_LZ4, 4, 16 * MB);
	gen_fill(1, 0, data, size);
	cr_assert_eq(writer_open(pool, 1, &cbs, &w), 0);
	for (uint64_t off = 0, i = 0; off < size; i++) {
		size_t n = steps[i % 5];
		if (n > size - off)
			n = (size_t)(size - off);
		cr_assert_eq(writer_write(w, off, data + off, n), 0);
		off += n;
	}
	cr_assert_eq(writer_end(w), size);
	cr_assert_leq(wpool_buffered(pool), 16 * MB);
	cr_assert_eq(writer_flush(w), 0);
	cr_assert_eq(fm.f[1].commits, 1);
	cr_assert_eq(fm.f[1].c[0].n, 1);
	cr_assert_eq(fm.f[1].c[0].v[0].size, CHUNK);
	cr_assert_eq(fm.f[1].c[1].n, 1);
	cr_assert_eq(fm.f[1].c[1].v[0].size, 6 * MB);
	cr_assert_eq(fm_length(1), size);
	writer_close(w);

	for (uint64_t off = 0; off < size; off += 5 * MB + 1) {
		cr_assert_eq(read_file(1, off, 5 * MB + 1, buf, &got), 0);
		size_t want = size - off < 5 * MB + 1 ? size - off : 5 * MB + 1;
		cr_assert_eq(got, want);
		cr_assert_eq(memcmp(buf, data + off, got), 0,
			     "bytes at %" PRIu64 " differ", off);
	}
	cr_assert_eq(read_file(1, size - 10, 100, buf, &got), 0);
	cr_assert_eq(got, 10);
	cr_assert_eq(memcmp(buf, data + size - 10, 10), 0);
	free(buf);
	free(data);
	teardown();
}

/* ---- random writes, overwrites and reads against a shadow copy ---- */

struct rctx {
	uint64_t ino, seed;
	int ops;
	uint64_t base; /* window [base, base+win) of the file is written */
	uint32_t win;
	int truncates;	       /* also cut the file now and then */
	unsigned char *shadow; /* out, if keep: the file's window at the end */
	int keep;
	uint64_t len;  /* out: the file's length at the end */
	char msg[256]; /* what went wrong; "" when all is well */
};

#define RW_MAX (256 * KB)
#define RR_MAX (512 * KB)

/* Runs in any thread: reports failures in c->msg, not with cr_assert. */
static void *random_ops(void *arg)
{
	struct rctx *c = arg;
	unsigned char *shadow = calloc(c->win, 1), *src = malloc(RW_MAX),
		      *got_buf = malloc(RR_MAX);
	uint64_t s = c->seed | 1, len = 0, last_end = 0;
	struct writer *w = NULL;
	int err;

	c->msg[0] = 0;
	if (!shadow || !src || !got_buf ||
	    writer_open(pool, c->ino, &cbs, &w)) {
		snprintf(c->msg, sizeof(c->msg), "setup failed");
		goto out;
	}
	for (int op = 0; op <= c->ops; op++) {
		unsigned r = (unsigned)(xs(&s) % 100);
		int final = op == c->ops;

		if (!final && r < 55) {
			uint64_t rel = xs(&s) % c->win;
			if (xs(&s) % 4 == 0 && last_end >= c->base &&
			    last_end < c->base + c->win)
				rel =
				    last_end - c->base; /* continue: extends */
			uint64_t max =
			    c->win - rel < RW_MAX ? c->win - rel : RW_MAX;
			size_t n = (size_t)(1 + xs(&s) % max);
			if (xs(&s) % 2)
				memset(src, (int)(xs(&s) & 0xff),
				       n); /* compressible */
			else
				for (size_t i = 0; i < n; i++)
					src[i] = (unsigned char)xs(&s);
			err = writer_write(w, c->base + rel, src, n);
			if (err) {
				snprintf(c->msg, sizeof(c->msg),
					 "op %d: write %zu at %" PRIu64 ": %d",
					 op, n, c->base + rel, err);
				goto out;
			}
			memcpy(shadow + rel, src, n);
			last_end = c->base + rel + n;
			if (last_end > len)
				len = last_end;
			continue;
		}
		if (!final && r < 65) {
			if ((err = writer_flush(w))) {
				snprintf(c->msg, sizeof(c->msg),
					 "op %d: flush: %d", op, err);
				goto out;
			}
			continue;
		}
		if (!final && r < 70 && c->truncates) {
			/* the mount flushes a file before it truncates it */
			if ((err = writer_flush(w))) {
				snprintf(c->msg, sizeof(c->msg),
					 "op %d: flush: %d", op, err);
				goto out;
			}
			uint64_t nl = c->base + xs(&s) % c->win;
			if (nl < len) {
				fm_truncate(c->ino, nl);
				memset(shadow + (nl - c->base), 0, len - nl);
				len = nl;
			}
			continue;
		}
		/* A read: flush first, then compare with the shadow. */
		if ((err = writer_flush(w))) {
			snprintf(c->msg, sizeof(c->msg), "op %d: flush: %d", op,
				 err);
			goto out;
		}
		if (fm_length(c->ino) != len) {
			snprintf(c->msg, sizeof(c->msg),
				 "op %d: length %" PRIu64 ", want %" PRIu64, op,
				 fm_length(c->ino), len);
			goto out;
		}
		uint64_t lo = c->base - 64 * KB;
		uint64_t off =
		    final ? c->base : lo + xs(&s) % (c->win + 128 * KB);
		size_t n = final ? c->win : (size_t)(1 + xs(&s) % RR_MAX);
		for (uint64_t done = 0; done < n;) {
			size_t part = n - done < RR_MAX ? n - done : RR_MAX;
			uint64_t at = off + done;
			size_t got = 0;
			err = read_file(c->ino, at, part, got_buf, &got);
			size_t want =
			    at >= len ? 0 : (len - at < part ? len - at : part);
			if (err || got != want) {
				snprintf(c->msg, sizeof(c->msg),
					 "op %d: read %zu at %" PRIu64
					 ": err %d, got %zu "
					 "want %zu",
					 op, part, at, err, got, want);
				goto out;
			}
			for (size_t i = 0; i < got; i++) {
				uint64_t x = at + i;
				unsigned char e =
				    x < c->base ? 0 : shadow[x - c->base];
				if (got_buf[i] != e) {
					snprintf(c->msg, sizeof(c->msg),
						 "op %d: byte %" PRIu64
						 " is %u, want %u",
						 op, x, got_buf[i], e);
					goto out;
				}
			}
			done += part;
			if (want < part)
				break;
		}
	}
out:
	writer_close(w);
	free(got_buf);
	free(src);
	c->len = len;
	if (c->keep)
		c->shadow = shadow;
	else
		free(shadow);
	return NULL;
}

Test(writer, random_vs_shadow, .timeout = 60)
{
	/* A window straddling the first chunk boundary. */
	struct rctx c = {
	    .ino = 2, .ops = 3000, .base = CHUNK - 3 * MB, .win = 6 * MB};

	c.seed = seed_from_env("random_vs_shadow");
	setup(64 * KB, CODEC_LZ4, 2, 8 * MB);
	random_ops(&c);
	cr_assert_str_empty(c.msg, "%s", c.msg);
	teardown();
}

/* Start n random_ops threads on files 3.. (one each), `ops` operations
 * each, over a 4 MiB window across the first chunk boundary. */
static void start_writers(struct rctx *c, pthread_t *t, int n, int ops,
			  int truncates, uint64_t seed)
{
	for (int i = 0; i < n; i++) {
		c[i] = (struct rctx){.ino = 3 + (uint64_t)i,
				     .ops = ops,
				     .base = CHUNK - 2 * MB,
				     .win = 4 * MB,
				     .truncates = truncates,
				     .seed = seed + 1000003ull * (uint64_t)i};
		cr_assert_eq(pthread_create(&t[i], NULL, random_ops, &c[i]), 0);
	}
}

Test(writer, random_concurrent_writers, .timeout = 60)
{
	enum { T = 4 };
	struct rctx c[T];
	pthread_t t[T];
	uint64_t seed = seed_from_env("random_concurrent_writers");

	setup(64 * KB, CODEC_LZ4, 2, 4 * MB);
	start_writers(c, t, T, 800, 0, seed);
	for (int i = 0; i < T; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < T; i++)
		cr_expect_str_empty(c[i].msg, "writer %d: %s", i, c[i].msg);
	teardown();
}

/* ---- back-pressure ---- */

struct sampler {
	int stop; /* __atomic */
	size_t max;
};

static void *sample(void *arg)
{
	struct sampler *sm = arg;

	while (!__atomic_load_n(&sm->stop, __ATOMIC_ACQUIRE)) {
		size_t b = wpool_buffered(pool);
		if (b > sm->max)
			sm->max = b;
		usleep(50);
	}
	return NULL;
}

struct seqw {
	uint64_t ino, size;
	size_t step;
	int err;
};

static void *seq_writer(void *arg)
{
	struct seqw *q = arg;
	unsigned char *buf = malloc(q->step);
	struct writer *w;

	q->err = writer_open(pool, q->ino, &cbs, &w);
	if (q->err || !buf) {
		q->err = q->err ? q->err : ENOMEM;
		free(buf);
		return NULL;
	}
	for (uint64_t off = 0; off < q->size && !q->err; off += q->step) {
		size_t n = q->size - off < q->step ? q->size - off : q->step;
		gen_fill(q->ino, off, buf, n);
		q->err = writer_write(w, off, buf, n);
	}
	if (!q->err)
		q->err = writer_flush(w);
	writer_close(w);
	free(buf);
	return NULL;
}

static void check_gen_file(uint64_t ino, uint64_t size)
{
	unsigned char *buf = malloc(4 * MB);
	size_t got;

	cr_assert_eq(fm_length(ino), size);
	for (uint64_t off = 0; off < size; off += 4 * MB) {
		cr_assert_eq(read_file(ino, off, 4 * MB, buf, &got), 0);
		long long bad = gen_check(ino, off, buf, got);
		cr_assert_eq(bad, -1,
			     "file %" PRIu64 ": byte %" PRIu64 " differs", ino,
			     off + (uint64_t)bad);
	}
	free(buf);
}

Test(writer, back_pressure, .timeout = 60)
{
	enum { T = 4 };
	const size_t budget = 4 * MB, bs = 1 * MB;
	struct seqw q[T];
	pthread_t t[T], st;
	struct sampler sm = {0};

	setup((uint32_t)bs, CODEC_NONE, 2, budget);
	slow.put_delay_us = 2000; /* uploads slower than memcpy */
	cr_assert_eq(pthread_create(&st, NULL, sample, &sm), 0);
	for (int i = 0; i < T; i++) {
		q[i] = (struct seqw){.ino = 1 + (uint64_t)i,
				     .size = 32 * MB,
				     .step = 192 * KB + 17};
		cr_assert_eq(pthread_create(&t[i], NULL, seq_writer, &q[i]), 0);
	}
	for (int i = 0; i < T; i++)
		pthread_join(t[i], NULL);
	__atomic_store_n(&sm.stop, 1, __ATOMIC_RELEASE);
	pthread_join(st, NULL);

	for (int i = 0; i < T; i++)
		cr_assert_eq(q[i].err, 0, "writer %d: %d", i, q[i].err);
	printf("back_pressure: max buffered %zu bytes (budget %zu)\n", sm.max,
	       budget);
	cr_assert_leq(sm.max, budget + T * bs, "buffered %zu over budget",
		      sm.max);
	cr_assert_geq(sm.max, budget / 2,
		      "no pressure: the test proves nothing");
	for (int i = 0; i < T; i++)
		check_gen_file(1 + (uint64_t)i, 32 * MB);
	teardown();
}

Test(writer, idle_writer_does_not_block_others, .timeout = 30)
{
	/* Writer A parks a partial block that uses most of the budget and
	 * goes idle; B must still make progress (flushing itself, then
	 * taking a block over budget) instead of waiting for A forever. */
	const size_t budget = 1 * MB;
	struct writer *a;
	unsigned char *buf = malloc(MB + 600 * KB);
	struct seqw q = {.ino = 2, .size = 16 * MB, .step = 100 * KB};
	pthread_t t;
	struct sampler sm = {0};

	setup(1 * MB, CODEC_NONE, 1, budget);
	cr_assert_eq(writer_open(pool, 1, &cbs, &a), 0);
	gen_fill(1, 0, buf, MB + 600 * KB);
	cr_assert_eq(writer_write(a, 0, buf, MB + 600 * KB), 0);
	cr_assert(writer_dirty(a));

	pthread_t st;
	cr_assert_eq(pthread_create(&st, NULL, sample, &sm), 0);
	cr_assert_eq(pthread_create(&t, NULL, seq_writer, &q), 0);
	pthread_join(t, NULL);
	__atomic_store_n(&sm.stop, 1, __ATOMIC_RELEASE);
	pthread_join(st, NULL);
	cr_assert_eq(q.err, 0);
	cr_assert_gt(fm.f[2].commits, 1, "B never had to flush itself");
	cr_assert_leq(sm.max, budget + 2 * MB);
	check_gen_file(2, 16 * MB);

	cr_assert(writer_dirty(a), "A's data was flushed by someone else");
	cr_assert_eq(fm.f[1].commits, 0);
	cr_assert_eq(writer_flush(a), 0);
	writer_close(a);
	check_gen_file(1, MB + 600 * KB);
	free(buf);
	teardown();
}

/* ---- upload errors ---- */

Test(writer, upload_error_fails_flush)
{
	struct writer *w;
	unsigned char *buf = malloc(3 * MB);
	size_t got;

	setup(1 * MB, CODEC_NONE, 2, 8 * MB);
	gen_fill(7, 0, buf, 3 * MB);
	cr_assert_eq(writer_open(pool, 7, &cbs, &w), 0);

	/* Full blocks fail in the background: the next write says so. */
	mem->fail_err = ETIMEDOUT;
	mem->fail_next = 1000;
	cr_assert_eq(writer_write(w, 0, buf, 2 * MB + 512 * KB), 0);
	for (int i = 0; i < 5000 && wpool_buffered(pool) > MB; i++)
		usleep(1000);
	cr_assert_leq(wpool_buffered(pool), MB, "uploads never finished");
	cr_assert_eq(writer_write(w, 2 * MB + 512 * KB, buf, 10), EIO);
	cr_assert_eq(writer_flush(w), EIO);
	cr_assert_eq(fm.f[7].commits, 0, "failed slices were committed");
	cr_assert_eq(fm_length(7), 0);
	/* Reported once; the dropped data does not come back. */
	mem->fail_next = 0;
	cr_assert_eq(writer_flush(w), 0);
	cr_assert_not(writer_dirty(w));
	cr_assert_eq(fm.f[7].commits, 0);

	/* A partial block failing at flush time. */
	cr_assert_eq(writer_write(w, 0, buf, 100 * KB), 0);
	mem->fail_next = 1;
	cr_assert_eq(writer_flush(w), EIO);
	cr_assert_eq(fm.f[7].commits, 0);
	cr_assert_eq(fm.f[7].c[0].n, 0);

	/* And the writer works again afterwards. */
	cr_assert_eq(writer_write(w, 0, buf, 3 * MB), 0);
	cr_assert_eq(writer_flush(w), 0);
	writer_close(w);
	unsigned char *back = malloc(3 * MB);
	cr_assert_eq(read_file(7, 0, 3 * MB, back, &got), 0);
	cr_assert_eq(got, 3 * MB);
	cr_assert_eq(memcmp(back, buf, 3 * MB), 0);
	free(back);
	free(buf);
	teardown();
}

/* ---- durability in batches: blocks put lazily, one sync per commit ---- */

static void wait_uploads(void)
{
	for (int i = 0; i < 5000 && wpool_buffered(pool) > 0; i++)
		usleep(1000);
	cr_assert_eq(wpool_buffered(pool), 0, "uploads never finished");
}

static int slow_count(const int *field)
{
	pthread_mutex_lock(&slow.lock);
	int n = *field;
	pthread_mutex_unlock(&slow.lock);
	return n;
}

/* The uploaders put lazily, several blocks of one file at once, and each
 * flush syncs once, before its commit (fm_commit checks that no block it
 * is given is still unsynced). */
Test(writer, one_sync_per_commit, .timeout = 60)
{
	struct writer *w[4];
	unsigned char *buf = malloc(10 * MB);
	size_t got;

	setup(1 * MB, CODEC_NONE, 4, 64 * MB);
	slow.put_delay_us = 5000; /* uploads still running at the flush */
	cr_assert_eq(writer_open(pool, 1, &cbs, &w[0]), 0);
	gen_fill(1, 0, buf, 10 * MB);
	cr_assert_eq(writer_write(w[0], 0, buf, 10 * MB - 123), 0);
	cr_assert_eq(writer_flush(w[0]), 0);
	cr_assert_eq(slow_count(&slow.lazy), 10, "blocks not put lazily");
	cr_assert_eq(slow_count(&slow.syncs), 1, "not one sync per commit");
	cr_assert_eq(fm.f[1].commits, 1);
	/* a flush with nothing new syncs nothing */
	cr_assert_eq(writer_flush(w[0]), 0);
	cr_assert_eq(slow_count(&slow.syncs), 1);
	writer_close(w[0]);
	unsigned char *back = malloc(10 * MB);
	cr_assert_eq(read_file(1, 0, 10 * MB, back, &got), 0);
	cr_assert_eq(got, 10 * MB - 123);
	cr_assert_eq(memcmp(back, buf, got), 0);

	/* four files at once: at most one sync per flush */
	for (int i = 0; i < 4; i++)
		cr_assert_eq(writer_open(pool, 2 + (uint64_t)i, &cbs, &w[i]),
			     0);
	for (int r = 0; r < 3; r++) {
		for (int i = 0; i < 4; i++)
			cr_assert_eq(writer_write(w[i], (uint64_t)r * 2 * MB,
						  buf, 2 * MB),
				     0);
		for (int i = 0; i < 4; i++)
			cr_assert_eq(writer_flush(w[i]), 0);
	}
	cr_assert_leq(slow_count(&slow.syncs), 1 + 4 * 3);
	for (int i = 0; i < 4; i++) {
		writer_close(w[i]);
		cr_assert_eq(fm.f[2 + i].commits, 3);
		cr_assert_eq(read_file(2 + (uint64_t)i, 0, 6 * MB, back, &got),
			     0);
		cr_assert_eq(got, 6 * MB);
		for (int r = 0; r < 3; r++)
			cr_assert_eq(memcmp(back + r * 2 * MB, buf, 2 * MB), 0);
	}
	free(back);
	free(buf);
	teardown();
}

/* A sync that fails fails the flush, and nothing of what it covered is
 * committed; the store being full is said as ENOSPC. */
Test(writer, failed_sync_fails_flush)
{
	struct writer *w;
	unsigned char *buf = malloc(3 * MB);
	size_t got;

	setup(1 * MB, CODEC_NONE, 2, 8 * MB);
	gen_fill(3, 0, buf, 3 * MB);
	cr_assert_eq(writer_open(pool, 3, &cbs, &w), 0);
	cr_assert_eq(writer_write(w, 0, buf, 3 * MB), 0);
	wait_uploads(); /* whole blocks: only the sync is left to the flush */
	cr_assert_eq(slow_count(&slow.lazy), 3);
	slow.sync_err = EIO;
	cr_assert_eq(writer_flush(w), EIO);
	cr_assert_eq(fm.f[3].commits, 0, "slices committed without a sync");
	cr_assert_eq(fm_length(3), 0);
	cr_assert_eq(slow_count(&slow.syncs), 1);

	slow.sync_err = ENOSPC;
	cr_assert_eq(writer_write(w, 0, buf, 100 * KB), 0);
	cr_assert_eq(writer_flush(w), ENOSPC);
	cr_assert_eq(fm.f[3].commits, 0);

	/* the writer works again once the store does */
	slow.sync_err = 0;
	cr_assert_eq(writer_write(w, 0, buf, 3 * MB), 0);
	cr_assert_eq(writer_flush(w), 0);
	cr_assert_eq(fm.f[3].commits, 1);
	writer_close(w);
	unsigned char *back = malloc(3 * MB);
	cr_assert_eq(read_file(3, 0, 3 * MB, back, &got), 0);
	cr_assert_eq(got, 3 * MB);
	cr_assert_eq(memcmp(back, buf, 3 * MB), 0);
	free(back);
	free(buf);
	teardown();
}

/* A sync covers every file's blocks: one that failed for another file's
 * flush may have lost this file's too, so this file's flush fails even
 * though its own sync succeeds; a file that began writing after the
 * failure is not concerned. */
Test(writer, failed_sync_fails_other_files)
{
	struct writer *a, *b, *c;
	unsigned char *buf = malloc(2 * MB);

	setup(1 * MB, CODEC_NONE, 2, 16 * MB);
	gen_fill(4, 0, buf, 2 * MB);
	cr_assert_eq(writer_open(pool, 4, &cbs, &a), 0);
	cr_assert_eq(writer_open(pool, 5, &cbs, &b), 0);
	cr_assert_eq(writer_open(pool, 6, &cbs, &c), 0);
	cr_assert_eq(writer_write(a, 0, buf, 2 * MB), 0);
	cr_assert_eq(writer_write(b, 0, buf, 2 * MB), 0);
	wait_uploads();
	slow.sync_err = EIO;
	cr_assert_eq(writer_flush(b), EIO);
	slow.sync_err = 0;
	cr_assert_eq(writer_write(c, 0, buf, 2 * MB), 0);
	cr_assert_eq(writer_flush(a), EIO,
		     "a's blocks were in the failed sync");
	cr_assert_eq(writer_flush(c), 0);
	cr_assert_eq(fm.f[4].commits, 0);
	cr_assert_eq(fm.f[5].commits, 0);
	cr_assert_eq(fm.f[6].commits, 1);
	/* and a writes again as any writer would */
	cr_assert_eq(writer_write(a, 0, buf, 2 * MB), 0);
	cr_assert_eq(writer_flush(a), 0);
	cr_assert_eq(fm.f[4].commits, 1);
	writer_close(a);
	writer_close(b);
	writer_close(c);
	free(buf);
	teardown();
}

Test(writer, read_error_is_eio)
{
	struct writer *w;
	unsigned char buf[100];
	size_t got;

	setup(64 * KB, CODEC_NONE, 1, 8 * MB);
	cr_assert_eq(writer_open(pool, 1, &cbs, &w), 0);
	memset(buf, 1, sizeof(buf));
	cr_assert_eq(writer_write(w, 0, buf, sizeof(buf)), 0);
	cr_assert_eq(writer_flush(w), 0);
	writer_close(w);
	char key[96];
	chunkstore_key(fm.f[1].c[0].v[0].id, 0, 100, key, sizeof(key));
	cr_assert_eq(objstore_del(mem, key), 0);
	cr_assert_eq(read_file(1, 0, 100, buf, &got), EIO);
	teardown();
}

/* ---- small files packed ---- */

#define PK_FILES 20	   /* small files: inodes 0..19; 20 is a big one */
#define PK_MAX	 (64 * KB) /* pack_max */

/* What the writers committed, per inode (no fm: it has NFILES inodes). */
static struct {
	pthread_mutex_t lock;
	struct meta_slice s[PK_FILES + 1][4];
	size_t n[PK_FILES + 1];
	int bad;
	int totals; /* packs recorded */
} pc = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int pc_commit(void *arg, uint64_t ino, const struct meta_chunk_slice *s,
		     size_t n)
{
	(void)arg;
	pthread_mutex_lock(&pc.lock);
	for (size_t i = 0; i < n; i++) {
		if (ino > PK_FILES || pc.n[ino] == 4 || s[i].idx != 0)
			pc.bad++;
		else
			pc.s[ino][pc.n[ino]++] = s[i].s;
	}
	pthread_mutex_unlock(&pc.lock);
	return 0;
}

static int pc_chunk(void *arg, uint64_t ino, uint32_t idx,
		    struct meta_slice **s, size_t *n)
{
	(void)arg;
	*s = NULL;
	*n = 0;
	if (ino > PK_FILES || idx != 0 || !pc.n[ino])
		return 0;
	*s = malloc(pc.n[ino] * sizeof(**s));
	memcpy(*s, pc.s[ino], pc.n[ino] * sizeof(**s));
	*n = pc.n[ino];
	return 0;
}

static int pc_total(void *arg, uint64_t pack, uint64_t total, int *dead)
{
	(void)arg;
	(void)pack;
	(void)total;
	if (dead)
		*dead = 0;
	__atomic_fetch_add(&pc.totals, 1, __ATOMIC_RELAXED);
	return 0;
}

static const struct writer_cbs pc_cbs = {.new_id = fm_new_id,
					 .commit = pc_commit};

struct flusher {
	struct writer *w;
	pthread_barrier_t *go;
	int err;
};

static void *flush_main(void *arg)
{
	struct flusher *f = arg;
	pthread_barrier_wait(f->go);
	f->err = writer_flush(f->w);
	return NULL;
}

static size_t n_listed;

static int count_listed(void *arg, const char *key, uint64_t size,
			int64_t mtime)
{
	(void)mtime;
	(void)arg;
	(void)key;
	(void)size;
	n_listed++;
	return 0;
}

static size_t objects(const char *prefix)
{
	n_listed = 0;
	cr_assert_eq(objstore_list(mem, prefix, count_listed, NULL), 0);
	return n_listed;
}

/*
 * Twenty small files written, then flushed from twenty threads at once:
 * they meet in packs (every writer holds, so a pack is sealed as soon as
 * all are in it), each file reads back from its frame. A file larger
 * than pack_max, flushed along with them, is stored as blocks.
 */
Test(writer, small_files_packed, .timeout = 60)
{
	struct packer_opts po = {
	    .pack_size = 4 * MB, .window_ms = 5000, .compress = CODEC_LZ4};
	struct packer_cbs pcb = {.new_id = fm_new_id, .total = pc_total};
	struct packer *pk;
	struct writer *w[PK_FILES + 1];
	struct flusher fl[PK_FILES + 1];
	pthread_t t[PK_FILES + 1];
	pthread_barrier_t go;
	uint32_t size[PK_FILES + 1];
	uint64_t seed = seed_from_env("small_files_packed");
	unsigned char *buf = malloc(256 * KB), *back = malloc(256 * KB);

	memset(&pc.s, 0, sizeof(pc.s));
	memset(&pc.n, 0, sizeof(pc.n));
	pc.bad = pc.totals = 0;
	setup(1 * MB, CODEC_LZ4, 2, 64 * MB);
	cr_assert_eq(packer_open(&slow.base, &po, &pcb, &pk), 0);
	wpool_set_packer(pool, pk, PK_MAX);

	for (int i = 0; i <= PK_FILES; i++) {
		size[i] = i == PK_FILES ? 200 * KB
					: 1 + (uint32_t)(xs(&seed) % PK_MAX);
		gen_fill(1000 + (uint64_t)i, 0, buf, size[i]);
		cr_assert_eq(writer_open(pool, (uint64_t)i, &pc_cbs, &w[i]), 0);
		/* two writes, one slice */
		uint32_t half = size[i] / 2;
		cr_assert_eq(writer_write(w[i], 0, buf, half), 0);
		cr_assert_eq(
		    writer_write(w[i], half, buf + half, size[i] - half), 0);
	}
	pthread_barrier_init(&go, NULL, PK_FILES + 1);
	for (int i = 0; i <= PK_FILES; i++) {
		fl[i] = (struct flusher){.w = w[i], .go = &go};
		pthread_create(&t[i], NULL, flush_main, &fl[i]);
	}
	for (int i = 0; i <= PK_FILES; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&go);
	for (int i = 0; i <= PK_FILES; i++)
		cr_assert_eq(fl[i].err, 0, "flush of file %d: %s", i,
			     strerror(fl[i].err));
	cr_assert_eq(pc.bad, 0);

	uint64_t packs[PK_FILES];
	size_t npacks = 0;
	for (int i = 0; i <= PK_FILES; i++) {
		cr_assert_eq(pc.n[i], 1, "file %d: %zu slices committed", i,
			     pc.n[i]);
		const struct meta_slice *s = &pc.s[i][0];
		cr_assert_eq(s->size, size[i]);
		cr_assert_eq(s->len, size[i]);
		memset(back, 0, size[i]);
		if (i == PK_FILES) {
			cr_expect_eq(s->pack, 0, "a %u-byte file was packed",
				     size[i]);
			cr_assert_eq(chunkstore_read(cs, s->id, s->size, 0,
						     s->size, back),
				     0);
		} else {
			struct chunkstore_frame f = {s->pack, s->poff, s->plen};
			cr_assert_neq(s->pack, 0,
				      "file %d (%u bytes) not packed", i,
				      size[i]);
			cr_assert_gt(s->plen, 0);
			cr_assert_eq(chunkstore_read_frame(cs, s->id, s->size,
							   &f, 0, s->size,
							   back),
				     0, "file %d", i);
			size_t k = 0;
			while (k < npacks && packs[k] != s->pack)
				k++;
			if (k == npacks)
				packs[npacks++] = s->pack;
		}
		cr_assert_eq(gen_check(1000 + (uint64_t)i, 0, back, size[i]),
			     -1, "file %d reads back differently", i);
		/* and through the read path */
		size_t got = 0;
		memset(back, 0, size[i]);
		cr_assert_eq(reader_read(cs, (uint64_t)i, size[i], 0, size[i],
					 back, &got, pc_chunk, NULL),
			     0);
		cr_assert_eq(got, size[i]);
		cr_assert_eq(gen_check(1000 + (uint64_t)i, 0, back, size[i]),
			     -1, "file %d read by reader_read differs", i);
		/* and without a copy, from the cached frame */
		struct gather g = {(char *)back, 0};
		memset(back, 0, size[i]);
		cr_assert_eq(reader_read_pinned(cs, (uint64_t)i, size[i], 0,
						size[i], &got, gather_run, &g,
						pc_chunk, NULL),
			     0);
		cr_assert_eq(g.at, size[i]);
		cr_assert_eq(gen_check(1000 + (uint64_t)i, 0, back, size[i]),
			     -1, "file %d read by reader_read_pinned differs",
			     i);
	}
	cr_log_info("%d small files flushed at once: %zu packs", PK_FILES,
		    npacks);
	printf("test_writer small_files_packed: %d files in %zu packs\n",
	       PK_FILES, npacks);
	cr_expect_lt(npacks, PK_FILES, "every file got a pack of its own");
	cr_expect_eq(objects("packs/"), npacks);
	cr_expect_eq(objects("blocks/"), 1, "the big file's one block");
	cr_expect_eq(pc.totals, (int)npacks);
	struct packer_stats st;
	packer_get_stats(pk, &st);
	cr_expect_eq(st.frames, PK_FILES);
	cr_expect_eq(st.packs, npacks);

	for (int i = 0; i <= PK_FILES; i++)
		writer_close(w[i]);
	cr_expect_eq(wpool_buffered(pool), 0, "memory still charged");
	wpool_close(pool);
	packer_close(pk);
	chunkstore_close(cs);
	objstore_close(mem);
	fm_reset();
	free(buf);
	free(back);
}

/* ---- writeback: blocks staged on a local disk (fs/data/stage.h) ---- */

static char stage_dir[64];
static size_t n_orphans;

static int wb_staged_block(void *arg, uint64_t id, uint32_t idx, void **enc,
			   size_t *n)
{
	(void)arg;
	return stage_get(stage, id, idx, enc, n);
}

static void wb_staged_drop(void *arg, uint64_t id)
{
	(void)arg;
	stage_drop(stage, id);
}

/* As setup(), with a stage of max_bytes whose uploads wait delay_ms each. */
static void setup_wb(uint32_t bs, size_t budget, uint64_t max_bytes,
		     unsigned delay_ms)
{
	struct chunkstore_opts o = {.block_size = bs,
				    .compress = CODEC_LZ4,
				    .mem_cache_bytes = 1 * MB,
				    .staged_block = wb_staged_block,
				    .staged_drop = wb_staged_drop};
	struct stage_opts so = {.compress = CODEC_LZ4,
				.block_size = bs,
				.uploaders = 2,
				.max_bytes = max_bytes,
				.test_delay_ms = delay_ms};

	fm_reset();
	snprintf(stage_dir, sizeof(stage_dir), "/tmp/granary-wb.XXXXXX");
	cr_assert_not_null(mkdtemp(stage_dir));
	so.dir = stage_dir;
	cr_assert_eq(objstore_open("mem://", NULL, &mem), 0);
	memset(&slow, 0, sizeof(slow));
	slow.base.ops = &slow_ops;
	slow.inner = mem;
	pthread_mutex_init(&slow.lock, NULL);
	cr_assert_eq(chunkstore_open(&slow.base, &o, &cs), 0);
	cr_assert_eq(stage_open(&slow.base, &so, &stage), 0);
	cr_assert_eq(wpool_open(cs, 2, budget, &pool), 0);
	wpool_set_stage(pool, stage);
}

static void teardown_wb(void)
{
	char cmd[128];

	cr_expect_eq(wpool_buffered(pool), 0, "memory still charged");
	wpool_close(pool);
	stage_close(stage);
	stage = NULL;
	chunkstore_close(cs);
	objstore_close(mem);
	cr_expect_eq(fm.bad, 0, "%d commits broke the contract", fm.bad);
	fm_reset();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", stage_dir);
	cr_expect_eq(system(cmd), 0);
}

static size_t files_in(const char *dir)
{
	char cmd[160];
	size_t n = 0;

	snprintf(cmd, sizeof(cmd), "ls '%s' | grep -c '\\.blk$'", dir);
	FILE *f = popen(cmd, "r");
	if (f) {
		if (fscanf(f, "%zu", &n) != 1)
			n = 0;
		pclose(f);
	}
	return n;
}

/* Every key under blocks/ must belong to a slice still in file ino's
 * lists: nothing left behind by a truncate that raced an upload. */
static int key_is_live(void *arg, const char *key, uint64_t size, int64_t mtime)
{
	(void)mtime;
	uint64_t ino = *(uint64_t *)arg, id = 0;
	int live = 0;

	(void)size;
	const char *u = strrchr(key, '/');
	if (u)
		id = strtoull(u + 1, NULL, 10);
	pthread_mutex_lock(&fm.lock);
	for (int c = 0; c < MAXCHUNKS && !live; c++)
		for (size_t i = 0; i < fm.f[ino].c[c].n && !live; i++)
			live = fm.f[ino].c[c].v[i].id == id;
	pthread_mutex_unlock(&fm.lock);
	if (!live)
		n_orphans++;
	return 0;
}

Test(writer, writeback_random_vs_shadow, .timeout = 120)
{
	/* Slow uploads: reads find blocks staged, uploading and uploaded;
	 * truncates drop slices whose blocks are in any of those states. */
	struct rctx c = {.ino = 2,
			 .ops = 1500,
			 .base = CHUNK - 3 * MB,
			 .win = 6 * MB,
			 .truncates = 1,
			 .keep = 1};

	c.seed = seed_from_env("writeback_random_vs_shadow");
	setup_wb(64 * KB, 8 * MB, 2 * MB, 2);
	random_ops(&c);
	cr_assert_str_empty(c.msg, "%s", c.msg);
	cr_assert_eq(stage_sync(stage), 0);
	cr_assert_eq(files_in(stage_dir), 0, "staged files left after sync");

	/* the store alone now: a chunkstore without the stage's hooks */
	struct chunkstore_opts o = {.block_size = 64 * KB,
				    .compress = CODEC_LZ4};
	struct chunkstore *bare;
	cr_assert_eq(chunkstore_open(mem, &o, &bare), 0);
	unsigned char *buf = malloc(c.win);
	size_t got = 0;
	cr_assert_eq(reader_read(bare, c.ino, fm_length(c.ino), c.base, c.win,
				 buf, &got, fm_chunk, NULL),
		     0);
	cr_assert_eq(got, c.len > c.base ? c.len - c.base : 0);
	for (size_t i = 0; i < got; i++)
		cr_assert_eq(buf[i], c.shadow[i], "byte %" PRIu64 " differs",
			     c.base + i);
	n_orphans = 0;
	cr_assert_eq(objstore_list(mem, "blocks/", key_is_live, &c.ino), 0);
	cr_expect_eq(n_orphans, 0, "%zu objects of dead slices", n_orphans);
	chunkstore_close(bare);
	free(buf);
	free(c.shadow);
	teardown_wb();
}

Test(writer, writeback_concurrent_bounded, .timeout = 120)
{
	enum { T = 3 };
	struct rctx c[T];
	pthread_t t[T];
	uint64_t seed = seed_from_env("writeback_concurrent_bounded");

	setup_wb(64 * KB, 4 * MB, 512 * KB, 1);
	start_writers(c, t, T, 400, 1, seed);
	/* the bound holds while they write (one block over it at most: a
	 * block always fits in an empty stage) */
	int joined[T] = {0}, running = T;
	while (running) {
		struct stage_stats st;
		stage_get_stats(stage, &st);
		cr_assert_leq(st.staged_bytes, 512 * KB + 64 * KB + 64,
			      "%" PRIu64 " bytes staged", st.staged_bytes);
		running = 0;
		for (int i = 0; i < T; i++) {
			if (!joined[i])
				joined[i] = pthread_tryjoin_np(t[i], NULL) == 0;
			running += !joined[i];
		}
		usleep(1000);
	}
	for (int i = 0; i < T; i++)
		cr_expect_str_empty(c[i].msg, "writer %d: %s", i, c[i].msg);
	teardown_wb();
}
