/*
 * objstore_crypt.c - the store decorator of encryption at rest
 * (crypt.h): what is put is sealed with AES-256-GCM, what is got is
 * opened and checked, so neither the store nor a disk cache under this
 * one ever holds a plaintext byte of an object.
 *
 * An object as stored:
 *
 *   header  "GRE1" | version 1 | log2 chunk size | salt[32]     (38 bytes)
 *   chunk 0 ciphertext (CHUNK bytes) | tag[16]
 *   ...
 *   chunk k ciphertext (1..CHUNK bytes) | tag[16]   (the last; an empty
 *                                        object is one empty last chunk)
 *
 * Chunk i is sealed with key = HKDF-SHA256(volume key, salt, "granary
 * object"), nonce = i (a 96-bit counter: safe, as the key is fresh per
 * object, and a put never reuses a salt), associated data = the header,
 * the object's key, i (8 bytes, big-endian) and whether it is the last
 * chunk (1 byte). So a chunk moved within its object, an object moved to
 * another name, a cut at a chunk boundary or chunks added all fail a tag.
 *
 * Why chunks of 64 KiB: a ranged get (a frame of a pack, a part of a
 * block) fetches and opens the whole chunks it covers, so a 4 KiB read
 * costs one 64 KiB chunk: against a store that is one request (whose
 * latency, not its size, is the cost up to about that size), and about
 * 20 us of AES-GCM, less than a FUSE round trip. Smaller chunks would
 * cost more tags (0.02% of the bytes at 64 KiB) and more per-chunk setup
 * on every big read, which is where the bandwidth goes.
 *
 * The sealed size is a function of the plain size (header + size + a tag
 * per chunk), and back: head and list report plain sizes without reading
 * the objects. The volume marker (OBJSTORE_OWNER_KEY) passes unsealed.
 */
#include "fs/store/crypt.h"
#include "fs/store/crypt_int.h"
#include "fs/store/owner.h"
#include "lib/bigbuf.h"
#include "lib/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <openssl/crypto.h>

#define MAGIC	   "GRE1"
#define VERSION	   1
#define CHUNK_LOG2 16
#define CHUNK	   ((size_t)1 << CHUNK_LOG2)
#define SALT	   32
#define HDR	   (4 + 1 + 1 + SALT)
#define TAG	   CRYPT_TAG_LEN
#define SCHUNK	   (CHUNK + TAG) /* a sealed chunk */
#define INFO	   "granary object"

#define POOL_MAX 24 /* big buffers kept idle: about 120 MiB at most */
struct pbuf;

struct cstore {
	struct objstore base; /* first: objstore_* see only this */
	struct objstore *inner;
	unsigned char key[CRYPT_KEY_LEN];
	pthread_mutex_t pool_lock; /* protects pool, npool */
	struct pbuf *pool[POOL_MAX];
	int npool;
};

static const struct objstore_ops crypt_ops;

static struct cstore *cs_of(struct objstore *s)
{
	return (struct cstore *)s;
}

static int passes(const char *key)
{
	return !strcmp(key, OBJSTORE_OWNER_KEY);
}

/* ---- sizes ---- */

static uint64_t nchunks(uint64_t plain)
{
	return plain ? (plain + CHUNK - 1) / CHUNK : 1;
}

static uint64_t sealed_size(uint64_t plain)
{
	return HDR + plain + TAG * nchunks(plain);
}

/* The plain size of a sealed one; EINVAL when no plain size seals to it. */
static int plain_size(uint64_t sealed, uint64_t *plain)
{
	if (sealed < HDR + TAG)
		return EINVAL;
	uint64_t body = sealed - HDR, full = body / SCHUNK, rem = body % SCHUNK;
	if (rem && rem < TAG)
		return EINVAL;
	if (rem == TAG && full) /* an empty last chunk after full ones */
		return EINVAL;
	*plain = full * CHUNK + (rem ? rem - TAG : 0);
	return 0;
}

/* ---- buffers ---- */

/*
 * Big buffers (whole blocks and packs, sealed or opened) are kept for
 * reuse by the store itself: a view's buffer comes back when its last
 * reference goes (objstore_view_pin). Memory new to the process is slow
 * to touch where the host lends it page by page (a VM whose free memory
 * goes back to the host: 40 ms and more for 4 MiB on the test machine,
 * 20 times the AES-GCM of it), and a cold read of a plain volume touches
 * none: it reads blocks where the store's file is mapped. lib/bigbuf
 * keeps a few for every user; that was not enough. Smaller buffers are
 * plain malloc.
 */
#define POOL_ROUND ((size_t)1 << 20) /* sizes are rounded up to it */

#define HUGE ((size_t)2 << 20)

struct pbuf {
	size_t cap;	     /* bytes of data */
	unsigned char *data; /* on a huge page boundary */
};

static struct pbuf *pool_get(struct cstore *cs, size_t n)
{
	size_t cap = (n + POOL_ROUND - 1) / POOL_ROUND * POOL_ROUND;
	struct pbuf *b = NULL;

	pthread_mutex_lock(&cs->pool_lock);
	for (int i = cs->npool - 1; i >= 0; i--) {
		if (cs->pool[i]->cap != cap)
			continue;
		b = cs->pool[i];
		cs->pool[i] = cs->pool[--cs->npool];
		break;
	}
	pthread_mutex_unlock(&cs->pool_lock);
	if (b || !(b = malloc(sizeof(*b))))
		return b;
	/* on huge pages where the kernel has them: a fault per 2 MiB,
	 * not per 4 KiB (a third less time to touch here) */
	if (posix_memalign((void **)&b->data, HUGE, cap)) {
		free(b);
		return NULL;
	}
	madvise(b->data, cap, MADV_HUGEPAGE); /* a hint */
	b->cap = cap;
	return b;
}

static void pbuf_free(struct pbuf *b)
{
	if (b)
		free(b->data);
	free(b);
}

static void pool_put(struct cstore *cs, struct pbuf *b)
{
	if (!b)
		return;
	pthread_mutex_lock(&cs->pool_lock);
	if (cs->npool < POOL_MAX) {
		cs->pool[cs->npool++] = b;
		b = NULL;
	}
	pthread_mutex_unlock(&cs->pool_lock);
	pbuf_free(b);
}

static void crypt_view_unpin(struct objstore *s, void *pin)
{
	pool_put(cs_of(s), pin);
}

/* ---- chunks ---- */

struct obj {
	const char *name;
	unsigned char hdr[HDR];
	unsigned char key[32];
	void *ctx;
};

/* The object's key from its header (which is checked for form only: its
 * bytes are bound into every chunk's tag). */
static int obj_begin(struct cstore *cs, struct obj *o, const char *name,
		     const void *hdr, int enc)
{
	o->name = name;
	memcpy(o->hdr, hdr, HDR);
	if (memcmp(o->hdr, MAGIC, 4) || o->hdr[4] != VERSION ||
	    o->hdr[5] != CHUNK_LOG2)
		return CRYPT_EAUTH;
	int err = crypt_hkdf(cs->key, o->hdr + 6, SALT, INFO, o->key);
	if (err)
		return err;
	o->ctx = crypt_gcm_begin(o->key, enc);
	return o->ctx ? 0 : ENOMEM;
}

static void obj_end(struct obj *o)
{
	OPENSSL_cleanse(o->key, sizeof(o->key));
}

/* Seal (enc) or open chunk i of n bytes, in to out; tag after in (open)
 * or after out (seal). */
static int chunk_run(struct obj *o, int enc, uint64_t i, int last,
		     const unsigned char *in, size_t n, unsigned char *out)
{
	unsigned char nonce[CRYPT_NONCE_LEN] = {0}, idx[9];
	for (int b = 0; b < 8; b++)
		nonce[4 + b] = idx[b] = (unsigned char)(i >> (56 - 8 * b));
	idx[8] = (unsigned char)last;
	struct crypt_aad aad[] = {
	    {o->hdr, HDR}, {o->name, strlen(o->name) + 1}, {idx, sizeof(idx)}};
	unsigned char *tag = (unsigned char *)(enc ? out + n : in + n);
	return crypt_gcm(o->ctx, enc, nonce, aad, 3, in, n, out, tag);
}

/* One line per failed object, naming it: the user's EIO is explained. */
static int auth_failed(struct cstore *cs, const char *key, uint64_t chunk,
		       const char *why)
{
	log_err("object '%s' of '%s' failed its authentication check (%s, "
		"chunk %llu): it was altered, damaged or swapped in the "
		"store; not read",
		key, cs->base.url ? cs->base.url : "", why,
		(unsigned long long)chunk);
	return CRYPT_EAUTH;
}

/*
 * Open the sealed chunks first.. of name in buf (n bytes, whole chunks
 * but the last, which ends the object if n is short of a whole one or
 * last is set) into out. hdr: the object's header.
 */
static int open_chunks(struct cstore *cs, const char *name, const void *hdr,
		       uint64_t first, const unsigned char *buf, size_t n,
		       int last, unsigned char *out, size_t *outn)
{
	struct obj o;
	int err = obj_begin(cs, &o, name, hdr, 0);
	size_t done = 0;

	if (err)
		return err == CRYPT_EAUTH ? auth_failed(cs, name, 0, "header")
					  : err;
	for (uint64_t i = first; n; i++) {
		size_t c = n < SCHUNK ? n : SCHUNK;
		if (c < TAG) {
			err = auth_failed(cs, name, i, "cut inside a tag");
			break;
		}
		int is_last = c < SCHUNK || (last && c == n);
		err = chunk_run(&o, 0, i, is_last, buf, c - TAG, out + done);
		if (err) {
			if (err == CRYPT_EAUTH)
				auth_failed(cs, name, i, "bad tag");
			break;
		}
		done += c - TAG;
		buf += c;
		n -= c;
	}
	obj_end(&o);
	*outn = done;
	return err;
}

/* ---- put ---- */

/* The sealed object goes down as a put, or as a lazy put (durable at the
 * inner store's next sync). */
static int inner_put(struct cstore *cs, int lazy, const char *key,
		     const void *data, size_t len)
{
	return lazy ? objstore_put_lazy(cs->inner, key, data, len)
		    : objstore_put(cs->inner, key, data, len);
}

static int seal_put(struct objstore *s, const char *key, const void *data,
		    size_t len, int lazy)
{
	struct cstore *cs = cs_of(s);
	if (passes(key))
		return inner_put(cs, lazy, key, data, len);

	size_t total = sealed_size(len);
	struct pbuf *pb = pool_get(cs, total);
	if (!pb)
		return ENOMEM;
	unsigned char *buf = pb->data;
	memcpy(buf, MAGIC, 4);
	buf[4] = VERSION;
	buf[5] = CHUNK_LOG2;
	struct obj o;
	int err = crypt_random(buf + 6, SALT);
	if (!err)
		err = obj_begin(cs, &o, key, buf, 1);
	if (err) {
		pool_put(cs, pb);
		return err;
	}
	const unsigned char *in = data;
	unsigned char *out = buf + HDR;
	uint64_t n = nchunks(len);
	for (uint64_t i = 0; i < n && !err; i++) {
		size_t c = i + 1 < n ? CHUNK : len - i * CHUNK;
		err = chunk_run(&o, 1, i, i + 1 == n, in, c, out);
		in += c;
		out += c + TAG;
	}
	obj_end(&o);
	if (!err)
		err = inner_put(cs, lazy, key, buf, total);
	pool_put(cs, pb);
	return err;
}

static int crypt_put(struct objstore *s, const char *key, const void *data,
		     size_t len)
{
	return seal_put(s, key, data, len, 0);
}

static int crypt_put_lazy(struct objstore *s, const char *key, const void *data,
			  size_t len)
{
	return seal_put(s, key, data, len, 1);
}

static int crypt_sync(struct objstore *s)
{
	return objstore_sync(cs_of(s)->inner);
}

/* ---- get ---- */

/*
 * Where a get of [off, off + len) (len 0: to the end) lies in the sealed
 * object: chunks first..; the inner range from ioff, ilen bytes (0: to
 * the end).
 */
static void span(uint64_t off, size_t len, uint64_t *first, uint64_t *ioff,
		 size_t *ilen)
{
	*first = off / CHUNK;
	*ioff = HDR + *first * SCHUNK;
	*ilen =
	    len ? (size_t)(((off + len - 1) / CHUNK - *first + 1) * SCHUNK) : 0;
}

/*
 * A get that found no chunk at its offset: the object must really end
 * before it. Its last chunk is opened to prove it (a cut object fails
 * here, instead of reading as shorter). 0: it ends there.
 */
static int check_end(struct cstore *cs, const char *key, const void *hdr)
{
	uint64_t sealed, plain;
	int err = objstore_head(cs->inner, key, &sealed);
	if (err)
		return err;
	if (plain_size(sealed, &plain))
		return auth_failed(cs, key, 0, "impossible size");
	uint64_t last = nchunks(plain) - 1, ioff = HDR + last * SCHUNK;
	void *buf = NULL;
	size_t got = 0;
	err = objstore_get(cs->inner, key, ioff, (size_t)(sealed - ioff), &buf,
			   &got);
	if (!err) {
		unsigned char *out = malloc(CHUNK);
		size_t n;
		err =
		    out ? open_chunks(cs, key, hdr, last, buf, got, 1, out, &n)
			: ENOMEM;
		free(out);
	}
	bigbuf_free(buf);
	return err;
}

static int get_once(struct cstore *cs, const char *key, uint64_t off,
		    size_t len, void **data, size_t *got)
{
	uint64_t first, ioff;
	size_t ilen;
	unsigned char hdr[HDR], *in = NULL;
	void *hbuf = NULL, *ibuf = NULL;
	size_t hgot = 0, igot = 0;
	int err;

	span(off, len, &first, &ioff, &ilen);
	/* One byte more than the chunks: whether it comes tells whether the
	 * last chunk asked for is the object's last (sealed as such). */
	size_t ask = ilen ? ilen + 1 : 0;
	if (first == 0) {
		/* the header and the chunks in one request */
		err = objstore_get(cs->inner, key, 0, ask ? HDR + ask : 0,
				   &ibuf, &igot);
		if (err)
			return err;
		if (igot < HDR) {
			bigbuf_free(ibuf);
			return auth_failed(cs, key, 0, "no header");
		}
		memcpy(hdr, ibuf, HDR);
		in = (unsigned char *)ibuf + HDR;
		igot -= HDR;
	} else {
		err = objstore_get(cs->inner, key, 0, HDR, &hbuf, &hgot);
		if (!err && hgot < HDR)
			err = auth_failed(cs, key, 0, "no header");
		if (!err) {
			memcpy(hdr, hbuf, HDR);
			err = objstore_get(cs->inner, key, ioff, ask, &ibuf,
					   &igot);
		}
		bigbuf_free(hbuf);
		if (err) {
			bigbuf_free(ibuf);
			return err;
		}
		in = ibuf;
	}

	/* short of what was asked (or all of the rest): the end is here */
	int at_end = !ilen || igot <= ilen;
	if (!at_end)
		igot = ilen;
	if (igot == 0) {
		bigbuf_free(ibuf);
		err = check_end(cs, key, hdr);
		if (!err && !(*data = malloc(1)))
			err = ENOMEM;
		return err;
	}
	size_t cap = (igot / SCHUNK + 1) * CHUNK, n = 0;
	unsigned char *out = bigbuf_alloc(cap);
	if (!out) {
		bigbuf_free(ibuf);
		return ENOMEM;
	}
	err = open_chunks(cs, key, hdr, first, in, igot, at_end, out, &n);
	bigbuf_free(ibuf);
	if (err) {
		bigbuf_free(out);
		return err;
	}
	/* the chunks' bytes from off, len of them */
	size_t skip = (size_t)(off - first * CHUNK);
	size_t keep = n > skip ? n - skip : 0;
	if (len && keep > len)
		keep = len;
	if (skip && keep)
		memmove(out, out + skip, keep);
	*data = out;
	*got = keep;
	return 0;
}

/* A failed tag may be a bad local copy under us (a disk cache's): drop
 * it and ask the store once more. */
static int crypt_get(struct objstore *s, const char *key, uint64_t off,
		     size_t len, void **data, size_t *got)
{
	struct cstore *cs = cs_of(s);
	if (passes(key))
		return objstore_get(cs->inner, key, off, len, data, got);
	int err = get_once(cs, key, off, len, data, got);
	if (err == CRYPT_EAUTH && objstore_evict_bad(cs->inner, key) == 0)
		err = get_once(cs, key, off, len, data, got);
	return err;
}

static int view_once(struct cstore *cs, const char *key,
		     struct objstore_view *v)
{
	struct objstore_view iv;
	int err = objstore_get_view(cs->inner, key, &iv);
	if (err)
		return err;
	if (iv.len < HDR) {
		objstore_view_release(&iv);
		return auth_failed(cs, key, 0, "no header");
	}
	size_t body = iv.len - HDR;
	uint64_t plain;
	if (plain_size(iv.len, &plain)) {
		objstore_view_release(&iv);
		return auth_failed(cs, key, 0, "impossible size");
	}
	struct pbuf *pb = pool_get(cs, plain ? (size_t)plain : 1);
	size_t n = 0;
	if (!pb) {
		objstore_view_release(&iv);
		return ENOMEM;
	}
	const unsigned char *p = iv.data;
	err = body ? open_chunks(cs, key, p, 0, p + HDR, body, 1, pb->data, &n)
		   : auth_failed(cs, key, 0, "no chunk");
	if (!err) {
		objstore_view_verified(&iv); /* a cache below may keep it */
		/* the buffer comes back to the pool when the view goes */
		err = objstore_view_of_mem(v, NULL, pb->data, n);
		if (!err && objstore_view_pin(v, &cs->base, pb)) {
			objstore_view_release(v);
			err = ENOMEM;
		}
	}
	objstore_view_release(&iv);
	if (err)
		pool_put(cs, pb);
	return err;
}

static int crypt_get_view(struct objstore *s, const char *key,
			  struct objstore_view *v)
{
	struct cstore *cs = cs_of(s);
	if (passes(key))
		return objstore_get_view(cs->inner, key, v);
	int err = view_once(cs, key, v);
	if (err == CRYPT_EAUTH && objstore_evict_bad(cs->inner, key) == 0)
		err = view_once(cs, key, v);
	return err;
}

/* ---- the rest: sizes translated, or passed through ---- */

static int crypt_head(struct objstore *s, const char *key, uint64_t *size)
{
	struct cstore *cs = cs_of(s);
	uint64_t sealed;
	int err = objstore_head(cs->inner, key, &sealed);
	if (err)
		return err;
	if (passes(key)) {
		*size = sealed;
		return 0;
	}
	if (plain_size(sealed, size))
		return auth_failed(cs, key, 0, "impossible size");
	return 0;
}

struct list_arg {
	objstore_list_fn fn;
	void *arg;
};

static int list_one(void *arg, const char *key, uint64_t size, int64_t mtime)
{
	struct list_arg *la = arg;
	uint64_t plain;
	/* a size no object seals to (not one of ours) is shown as it is */
	if (!passes(key) && !plain_size(size, &plain))
		size = plain;
	return la->fn(la->arg, key, size, mtime);
}

static int crypt_list(struct objstore *s, const char *prefix,
		      objstore_list_fn fn, void *arg)
{
	struct list_arg la = {fn, arg};
	return objstore_list(cs_of(s)->inner, prefix, list_one, &la);
}

static int crypt_del(struct objstore *s, const char *key)
{
	return objstore_del(cs_of(s)->inner, key);
}

static int crypt_evict(struct objstore *s, const char *key, int bad)
{
	struct objstore *in = cs_of(s)->inner;
	return bad ? objstore_evict_bad(in, key) : objstore_evict(in, key);
}

static int crypt_list_temps(struct objstore *s, objstore_list_fn fn, void *arg)
{
	return objstore_list_temps(cs_of(s)->inner, fn, arg);
}

static int crypt_del_temp(struct objstore *s, const char *name)
{
	return objstore_del_temp(cs_of(s)->inner, name);
}

static int crypt_on_dev(struct objstore *s, dev_t dev)
{
	return objstore_on_dev(cs_of(s)->inner, dev);
}

static void crypt_close(struct objstore *s)
{
	struct cstore *cs = cs_of(s);
	objstore_close(cs->inner);
	OPENSSL_cleanse(cs->key, sizeof(cs->key));
	for (int i = 0; i < cs->npool; i++)
		pbuf_free(cs->pool[i]);
	pthread_mutex_destroy(&cs->pool_lock);
	free(cs);
}

static const struct objstore_ops crypt_ops = {
    .scheme = "crypt",
    .get = crypt_get,
    .put = crypt_put,
    .put_lazy = crypt_put_lazy,
    .sync = crypt_sync,
    .del = crypt_del,
    .head = crypt_head,
    .list = crypt_list,
    .evict = crypt_evict,
    .get_view = crypt_get_view,
    .view_unpin = crypt_view_unpin,
    .list_temps = crypt_list_temps,
    .del_temp = crypt_del_temp,
    .on_dev = crypt_on_dev,
    .close = crypt_close,
};

int objstore_crypt_open(struct objstore *inner,
			const unsigned char key[CRYPT_KEY_LEN],
			struct objstore **out)
{
	if (!out)
		return EINVAL;
	*out = NULL;
	if (!inner || !key) {
		objstore_close(inner);
		return EINVAL;
	}
	struct cstore *cs = calloc(1, sizeof(*cs));
	if (!cs || (inner->url && !(cs->base.url = strdup(inner->url)))) {
		free(cs);
		objstore_close(inner);
		return ENOMEM;
	}
	cs->base.ops = &crypt_ops;
	cs->base.layered = 1; /* the store below rides out outages */
	cs->inner = inner;
	pthread_mutex_init(&cs->pool_lock, NULL);
	memcpy(cs->key, key, CRYPT_KEY_LEN);
	*out = &cs->base;
	return 0;
}

struct objstore *objstore_crypt_inner(struct objstore *s)
{
	return s && s->ops == &crypt_ops ? cs_of(s)->inner : NULL;
}

int objstore_crypt_sealed(const void *head, size_t n)
{
	const unsigned char *h = head;
	return n >= 6 && !memcmp(h, MAGIC, 4) && h[4] == VERSION &&
	       h[5] == CHUNK_LOG2;
}
