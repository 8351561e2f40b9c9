/*
 * objstore.c - the object store front door: URL dispatch to a backend, the
 * wrappers every caller goes through (argument checks, fault injection for
 * tests, retries through outages), the reachability probe and the error texts.
 * Backends live in objstore_mem.c, objstore_file.c and objstore_s3.c.
 */
#include "fs/store/objstore.h"
#include "fs/store/owner.h"
#include "lib/bigbuf.h"
#include "lib/fsutil.h"
#include "lib/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Backend constructors (one per file; not public API). They validate the
 * rest of their URL and return OBJSTORE_EURL when it is malformed. */
int objstore_mem_open(const char *url, struct objstore **out);
int objstore_file_open(const char *url, struct objstore **out);
int objstore_s3_open(const char *url, const struct objstore_creds *creds,
		     struct objstore **out);

#define KEY_MAX		  1024
#define STAT_ADD(s, f, n) __atomic_add_fetch(&(s)->st.f, (n), __ATOMIC_RELAXED)

/* ---- open / close ---- */

/* The window of GRANARY_IO_RETRY_WINDOW (seconds), or the default. */
static unsigned env_window_ms(void)
{
	const char *e = getenv("GRANARY_IO_RETRY_WINDOW");
	char *end;

	if (!e || !*e)
		return OBJSTORE_RETRY_WINDOW_MS;
	unsigned long v = strtoul(e, &end, 10);
	if (*end || v > OBJSTORE_RETRY_MAX_S) {
		log_warn("GRANARY_IO_RETRY_WINDOW='%s' is not 0 to %d seconds: "
			 "using %d ms",
			 e, OBJSTORE_RETRY_MAX_S, OBJSTORE_RETRY_WINDOW_MS);
		return OBJSTORE_RETRY_WINDOW_MS;
	}
	return (unsigned)v * 1000u;
}

int objstore_env_creds(struct objstore_creds *c)
{
	static const char *const env[][3] = {
	    {"GRANARY_S3_ACCESS_KEY", "GRANARY_S3_SECRET_KEY",
	     "GRANARY_S3_SESSION_TOKEN"},
	    {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"},
	};

	for (size_t i = 0; i < sizeof(env) / sizeof(env[0]); i++) {
		const char *a = getenv(env[i][0]), *s = getenv(env[i][1]);
		const char *t = getenv(env[i][2]);
		if (a && *a && s && *s) {
			c->access_key = a;
			c->secret_key = s;
			c->session_token = t && *t ? t : NULL;
			return 0;
		}
	}
	return OBJSTORE_ENOCREDS;
}

int objstore_open(const char *url, const struct objstore_creds *creds,
		  struct objstore **out)
{
	struct objstore *s = NULL;
	int err;

	if (!out)
		return EINVAL;
	*out = NULL;
	if (!url)
		return OBJSTORE_EURL;

	if (!strncmp(url, "mem://", 6))
		err = objstore_mem_open(url, &s);
	else if (!strncmp(url, "file://", 7))
		err = objstore_file_open(url, &s);
	else if (!strncmp(url, "s3://", 5) || !strncmp(url, "s3+http://", 10))
		err = objstore_s3_open(url, creds, &s);
	else
		err = OBJSTORE_EURL;
	if (err)
		return err;

	s->url = strdup(url);
	if (!s->url) {
		s->ops->close(s);
		return ENOMEM;
	}
	s->fail_next = 0;
	s->fail_err = 0;
	s->retry_window_ms = env_window_ms();
	s->layered = 0;
	s->outage_ms = s->probe_ms = 0;
	s->outage_err = 0;
	memset(&s->st, 0, sizeof(s->st));
	*out = s;
	return 0;
}

void objstore_close(struct objstore *s)
{
	if (!s)
		return;
	char *url = s->url;
	s->ops->close(s);
	free(url);
}

/* ---- argument checks and the fault hook ---- */

/* Tests set fail_next/fail_err; consume one injected failure atomically so
 * concurrent callers fail exactly fail_next times in total. */
static int injected_fault(struct objstore *s)
{
	int n = __atomic_load_n(&s->fail_next, __ATOMIC_ACQUIRE);

	while (n > 0) {
		if (__atomic_compare_exchange_n(&s->fail_next, &n, n - 1, 0,
						__ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE))
			return s->fail_err ? s->fail_err : EIO;
	}
	return 0;
}

/*
 * The key rules are the same for every backend so that a volume can move
 * between them: 1..KEY_MAX bytes from [A-Za-z0-9] and "-_.~+=,@:/" (libs3
 * 2.0 sends a space as '+', mangles bytes >= 0x80 and leaves "!*'()"
 * unescaped, which some servers sign differently), '/'-separated
 * components, no leading or trailing '/', no empty, "." or ".." component
 * (file:// maps keys to paths).
 */
static int key_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || strchr("-_.~+=,@:/", c);
}

static int key_valid(const char *key)
{
	size_t len;

	if (!key)
		return 0;
	len = strlen(key);
	if (len == 0 || len > KEY_MAX || key[0] == '/' || key[len - 1] == '/')
		return 0;
	for (const char *c = key; *c; c++)
		if (!key_char((unsigned char)*c))
			return 0;
	for (const char *c = key; *c;) {
		const char *end = strchr(c, '/');
		size_t n = end ? (size_t)(end - c) : strlen(c);
		if (n == 0 || (n == 1 && c[0] == '.') ||
		    (n == 2 && c[0] == '.' && c[1] == '.'))
			return 0;
		c += n;
		if (*c == '/')
			c++;
	}
	return 1;
}

/* ---- retries ---- */

#define BACKOFF_FIRST_MS 100
#define BACKOFF_MAX_MS	 5000
#define OUTAGE_LOG_S	 10   /* at most one "retrying" line per this */
#define PROBE_GAP_MS	 1000 /* a closed window: attempts this far apart */

enum req_op {
	REQ_GET,
	REQ_PUT,
	REQ_DEL,
	REQ_HEAD,
	REQ_VIEW,
	REQ_LAZY,
	REQ_SYNC
};

/* One request's arguments, so that one loop can retry any of them. */
struct req {
	enum req_op op;
	const char *key;
	uint64_t off;
	size_t len;
	void **data;
	size_t *got;
	const void *put;
	uint64_t *size;
	struct objstore_view *view;
};

static const char *req_name(enum req_op op)
{
	static const char *names[] = {"get", "put", "delete", "head",
				      "get", "put", "sync"};
	return names[op];
}

/* A sync is no request of its own kind: its retries count as a put's,
 * whose durability it completes. */
static enum objstore_kind req_kind(enum req_op op)
{
	static const enum objstore_kind k[] = {
	    OBJSTORE_K_GET, OBJSTORE_K_PUT, OBJSTORE_K_DEL, OBJSTORE_K_HEAD,
	    OBJSTORE_K_GET, OBJSTORE_K_PUT, OBJSTORE_K_PUT};
	return k[op];
}

const char *objstore_kind_name(enum objstore_kind k)
{
	static const char *names[OBJSTORE_KINDS] = {"get", "put", "delete",
						    "head", "list"};
	return k < OBJSTORE_KINDS ? names[k] : "?";
}

/* A request of kind k that began at t0 (fsutil_mono_ns) ended with err,
 * having moved bytes: its count, error, bytes and latency. */
static void account(struct objstore *s, enum objstore_kind k, int64_t t0,
		    int err, uint64_t bytes)
{
	struct objstore_kind_stats *ks = &s->st.kind[k];
	int64_t dt = fsutil_mono_ns() - t0;

	metric_add(&ks->requests, 1);
	if (err)
		metric_add(&ks->errors, 1);
	else if (bytes)
		metric_add(&ks->bytes, bytes);
	metric_hist_observe(&ks->lat, dt > 0 ? (uint64_t)dt : 0);
}

int objstore_transient(int err)
{
	return err == OBJSTORE_EUNREACH || err == OBJSTORE_ESERVER ||
	       err == OBJSTORE_ETLS || err == OBJSTORE_EDNS ||
	       err == OBJSTORE_EREFUSED || err == OBJSTORE_ETIMEDOUT;
}

void objstore_set_retry_window(struct objstore *s, unsigned ms)
{
	if (s)
		__atomic_store_n(&s->retry_window_ms, ms, __ATOMIC_RELAXED);
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The pause before retry number n (0-based): 100 ms doubling up to 5 s,
 * less up to half of it at random, so that the clients of one gateway do
 * not come back in lockstep when it does. */
static long backoff_ms(int n)
{
	static __thread unsigned int seed;
	long ms = n >= 6 ? BACKOFF_MAX_MS : (long)BACKOFF_FIRST_MS << n;

	if (ms > BACKOFF_MAX_MS)
		ms = BACKOFF_MAX_MS;
	if (!seed)
		seed = (unsigned int)now_ms() ^ (unsigned int)gettid();
	return ms - rand_r(&seed) % (ms / 2 + 1);
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* One attempt, through the fault hook. */
static int attempt(struct objstore *s, struct req *r)
{
	int err = injected_fault(s);

	if (err)
		return err;
	switch (r->op) {
	case REQ_GET:
		return s->ops->get(s, r->key, r->off, r->len, r->data, r->got);
	case REQ_PUT:
		return s->ops->put(s, r->key, r->put, r->len);
	case REQ_LAZY:
		if (s->ops->put_lazy)
			return s->ops->put_lazy(s, r->key, r->put, r->len);
		return s->ops->put(s, r->key, r->put, r->len);
	case REQ_SYNC:
		return s->ops->sync ? s->ops->sync(s) : 0;
	case REQ_DEL:
		return s->ops->del(s, r->key);
	case REQ_HEAD:
		return s->ops->head(s, r->key, r->size);
	case REQ_VIEW:
		if (s->ops->get_view)
			return s->ops->get_view(s, r->key, r->view);
		void *data = NULL;
		size_t got = 0;
		err = s->ops->get(s, r->key, 0, 0, &data, &got);
		if (!err &&
		    (err = objstore_view_of_mem(r->view, data, data, got)))
			bigbuf_free(data);
		return err;
	}
	return EINVAL;
}

/* "the store is not answering" once per OUTAGE_LOG_S for the process, not
 * once per request: an outage under 8 readers is one line, not hundreds. */
static void log_outage(struct objstore *s, struct req *r, int err)
{
	static int64_t last;
	int64_t now = now_ms(), prev = __atomic_load_n(&last, __ATOMIC_RELAXED);

	if (prev && now - prev < OUTAGE_LOG_S * 1000)
		return;
	if (!__atomic_compare_exchange_n(&last, &prev, now, 0, __ATOMIC_RELAXED,
					 __ATOMIC_RELAXED))
		return;
	log_warn("object store %s: %s of '%s' failed (%s): retrying for up to "
		 "%g s",
		 s->url, req_name(r->op), r->key, gr_strerror(err),
		 (double)s->retry_window_ms / 1000.0);
}

/*
 * The outage (objstore.h): its start, lowered to the start of an attempt
 * that failed (with err) and began earlier; the start it has now.
 */
static int64_t outage_note(struct objstore *s, int64_t start, int err)
{
	int64_t cur = __atomic_load_n(&s->outage_ms, __ATOMIC_ACQUIRE);

	__atomic_store_n(&s->outage_err, err, __ATOMIC_RELAXED);
	while ((cur == 0 || start < cur) &&
	       !__atomic_compare_exchange_n(&s->outage_ms, &cur, start, 0,
					    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		;
	return cur == 0 || start < cur ? start : cur;
}

/* The store answered (a success or an error of its own): the outage, if
 * any, is over. Said when it had outlasted the window. */
static void outage_end(struct objstore *s, unsigned window)
{
	int64_t cur = __atomic_load_n(&s->outage_ms, __ATOMIC_ACQUIRE);

	if (!cur ||
	    !__atomic_compare_exchange_n(&s->outage_ms, &cur, 0, 0,
					 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return;
	__atomic_store_n(&s->probe_ms, 0, __ATOMIC_RELEASE);
	int64_t lasted = now_ms() - cur;
	if (window && lasted >= (int64_t)window)
		log_info("object store %s answers again, after failing for "
			 "%.1f s",
			 s->url, (double)lasted / 1000.0);
}

/* Once the window closed: may an attempt start now? Then it is the one
 * under way (probe_ms INT64_MAX) until probe_done(). */
static int probe_take(struct objstore *s, int64_t now)
{
	int64_t due = __atomic_load_n(&s->probe_ms, __ATOMIC_ACQUIRE);

	return now >= due &&
	       __atomic_compare_exchange_n(&s->probe_ms, &due, INT64_MAX, 0,
					   __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

/* A failed attempt ended: the next one after the window waits
 * PROBE_GAP_MS. An attempt that began inside the window only pushes the
 * time on, and leaves one under way alone. */
static void probe_done(struct objstore *s, int probe)
{
	int64_t next = now_ms() + PROBE_GAP_MS;

	if (probe) {
		__atomic_store_n(&s->probe_ms, next, __ATOMIC_RELEASE);
		return;
	}
	int64_t cur = __atomic_load_n(&s->probe_ms, __ATOMIC_ACQUIRE);
	while (cur != INT64_MAX && cur < next &&
	       !__atomic_compare_exchange_n(&s->probe_ms, &cur, next, 0,
					    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		;
}

/*
 * Run r, retrying transient errors until the outage's window closes (or
 * the request's own, when it began before the outage). The next pause is
 * taken only if it ends inside the window, so a request gives up at most
 * one attempt's time after it. Once the window closed, r fails at once,
 * or makes the one attempt that sees whether the store is back.
 */
static int run(struct objstore *s, struct req *r)
{
	if (s->layered)
		return attempt(s, r); /* the store below rides it out */
	unsigned window =
	    __atomic_load_n(&s->retry_window_ms, __ATOMIC_RELAXED);
	int64_t t0 = now_ms(), out = 0;
	int err, n, probe = 0;

	for (n = 0;; n++) {
		int64_t start = now_ms();
		out = __atomic_load_n(&s->outage_ms, __ATOMIC_ACQUIRE);
		if (n == 0 && out && window && start - out >= (int64_t)window) {
			if (!probe_take(s, start))
				goto closed;
			probe = 1;
		}
		err = attempt(s, r);
		if (!objstore_transient(err)) {
			if (probe)
				__atomic_store_n(&s->probe_ms, 0,
						 __ATOMIC_RELEASE);
			outage_end(s, window);
			if (n > 0 && !err)
				log_info("object store %s: %s of '%s' "
					 "succeeded after %d retries",
					 s->url, req_name(r->op), r->key, n);
			return err;
		}
		out = outage_note(s, start, err);
		probe_done(s, probe);
		if (probe)
			break; /* one attempt once the window closed */
		long pause = backoff_ms(n);
		int64_t from = out < t0 ? out : t0;
		if (now_ms() - from + pause > (int64_t)window)
			break;
		if (n == 0)
			log_outage(s, r, err);
		STAT_ADD(s, retries, 1);
		STAT_ADD(s, kind[req_kind(r->op)].retries, 1);
		sleep_ms(pause);
	}
	STAT_ADD(s, gave_up, 1);
	log_err("object store %s: %s of '%s' gave up after %d tries in %.1f s "
		"(retry window %g s): %s",
		s->url, req_name(r->op), r->key, n + 1,
		(double)(now_ms() - t0) / 1000.0, (double)window / 1000.0,
		gr_strerror(err));
	return err;

closed:
	err = __atomic_load_n(&s->outage_err, __ATOMIC_RELAXED);
	if (!objstore_transient(err))
		err = OBJSTORE_EUNREACH; /* not said yet: a racing note */
	STAT_ADD(s, gave_up, 1);
	log_err("object store %s: %s of '%s' failed at once: the store has "
		"been failing for %.1f s (retry window %g s): %s",
		s->url, req_name(r->op), r->key,
		(double)(now_ms() - out) / 1000.0, (double)window / 1000.0,
		gr_strerror(err));
	return err;
}

/* ---- wrappers ---- */

/* A get of key (checked by the caller), counted. */
static int get_checked(struct objstore *s, const char *key, uint64_t off,
		       size_t len, void **data, size_t *got)
{
	struct req r = {.op = REQ_GET,
			.key = key,
			.off = off,
			.len = len,
			.data = data,
			.got = got};
	int64_t t0 = fsutil_mono_ns();
	int err = run(s, &r);

	STAT_ADD(s, gets, 1);
	if (err)
		STAT_ADD(s, errors, 1);
	else
		STAT_ADD(s, get_bytes, *got);
	account(s, OBJSTORE_K_GET, t0, err, err ? 0 : *got);
	return err;
}

int objstore_get(struct objstore *s, const char *key, uint64_t off, size_t len,
		 void **data, size_t *got)
{
	if (!s || !data || !got)
		return EINVAL;
	*data = NULL;
	*got = 0;
	if (!key_valid(key))
		return EINVAL;
	return get_checked(s, key, off, len, data, got);
}

/* A key of an object granary did not write: any bytes but NUL (S3 sends
 * them encoded), 1..KEY_MAX of them. Only S3 stores take such keys: a
 * file:// pool maps keys to paths. */
int objstore_get_foreign(struct objstore *s, const char *key, uint64_t off,
			 size_t len, void **data, size_t *got)
{
	if (!s || !data || !got)
		return EINVAL;
	*data = NULL;
	*got = 0;
	if (!key || !*key || strlen(key) > KEY_MAX ||
	    (!key_valid(key) && strncmp(s->ops->scheme, "s3", 2)))
		return EINVAL;
	return get_checked(s, key, off, len, data, got);
}

static int put(struct objstore *s, enum req_op op, const char *key,
	       const void *data, size_t len)
{
	int err;

	if (!s || (!data && len) || !key_valid(key))
		return EINVAL;
	struct req r = {
	    .op = op, .key = key, .put = data ? data : "", .len = len};
	int64_t t0 = fsutil_mono_ns();
	err = run(s, &r);
	STAT_ADD(s, puts, 1);
	if (err)
		STAT_ADD(s, errors, 1);
	else
		STAT_ADD(s, put_bytes, len);
	account(s, OBJSTORE_K_PUT, t0, err, len);
	return err;
}

int objstore_put(struct objstore *s, const char *key, const void *data,
		 size_t len)
{
	return put(s, REQ_PUT, key, data, len);
}

/* Counted as puts: the bytes moved are the same; the syncs on their own. */
int objstore_put_lazy(struct objstore *s, const char *key, const void *data,
		      size_t len)
{
	return put(s, REQ_LAZY, key, data, len);
}

int objstore_sync(struct objstore *s)
{
	if (!s)
		return EINVAL;
	/* the key only names the request in the log lines of run() */
	struct req r = {.op = REQ_SYNC, .key = "(the lazy puts)"};
	int err = run(s, &r);
	STAT_ADD(s, syncs, 1);
	if (err)
		STAT_ADD(s, errors, 1);
	return err;
}

int objstore_del(struct objstore *s, const char *key)
{
	int err;

	if (!s || !key_valid(key))
		return EINVAL;
	struct req r = {.op = REQ_DEL, .key = key};
	int64_t t0 = fsutil_mono_ns();
	err = run(s, &r);
	STAT_ADD(s, dels, 1);
	if (err == ENOENT)
		err = 0;
	account(s, OBJSTORE_K_DEL, t0, err, 0);
	return err;
}

int objstore_head(struct objstore *s, const char *key, uint64_t *size)
{
	uint64_t dummy;

	if (!s || !key_valid(key))
		return EINVAL;
	struct req r = {
	    .op = REQ_HEAD, .key = key, .size = size ? size : &dummy};
	STAT_ADD(s, heads, 1);
	int64_t t0 = fsutil_mono_ns();
	int err = run(s, &r);
	account(s, OBJSTORE_K_HEAD, t0, err, 0);
	return err;
}

/* ---- views ---- */

/* Who owns a view's bytes: a malloc'd buffer or a mapping. */
struct objstore_buf {
	int refs; /* atomic */
	void *mem;
	void *map;
	size_t map_len;
	struct objstore *pin_owner; /* told when the last reference goes */
	void *pin;
};

int objstore_view_of_mem(struct objstore_view *v, void *mem, const void *data,
			 size_t len)
{
	struct objstore_buf *b = malloc(sizeof(*b));

	memset(v, 0, sizeof(*v));
	if (!b)
		return ENOMEM;
	*b = (struct objstore_buf){1, mem, NULL, 0, NULL, NULL};
	v->data = data;
	v->len = len;
	v->buf = b;
	return 0;
}

int objstore_view_of_fd(struct objstore_view *v, int fd, size_t len)
{
	static const char empty[1];

	memset(v, 0, sizeof(*v));
	if (len == 0) {
		v->data = empty; /* nothing to map */
		return 0;
	}
	struct objstore_buf *b = malloc(sizeof(*b));
	if (!b)
		return ENOMEM;
	/* populated at once: one call instead of a fault per few pages */
	void *p = mmap(NULL, len, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
	if (p == MAP_FAILED) {
		int err = errno;
		free(b);
		return err;
	}
	*b = (struct objstore_buf){1, NULL, p, len, NULL, NULL};
	v->data = p;
	v->len = len;
	v->buf = b;
	v->mapped = 1;
	return 0;
}

int objstore_get_view(struct objstore *s, const char *key,
		      struct objstore_view *v)
{
	int err;

	if (!s || !v)
		return EINVAL;
	memset(v, 0, sizeof(*v));
	if (!key_valid(key))
		return EINVAL;
	struct req r = {.op = REQ_VIEW, .key = key, .view = v};
	int64_t t0 = fsutil_mono_ns();
	err = run(s, &r);
	STAT_ADD(s, gets, 1);
	if (err)
		STAT_ADD(s, errors, 1);
	else
		STAT_ADD(s, get_bytes, v->len);
	account(s, OBJSTORE_K_GET, t0, err, err ? 0 : v->len);
	return err;
}

void objstore_view_verified(struct objstore_view *v)
{
	struct objstore *f = v->filler;

	v->filler = NULL;
	if (f)
		f->ops->view_fill(f, v, 1);
}

void objstore_view_ref(const struct objstore_view *v, struct objstore_view *to)
{
	*to = *v;
	to->filler = NULL;
	to->fill = NULL;
	if (v->buf)
		__atomic_add_fetch(&v->buf->refs, 1, __ATOMIC_RELAXED);
}

void objstore_view_release(struct objstore_view *v)
{
	struct objstore_buf *b = v->buf;

	if (v->filler)
		v->filler->ops->view_fill(v->filler, v, 0);
	if (b && __atomic_sub_fetch(&b->refs, 1, __ATOMIC_ACQ_REL) == 0) {
		if (b->map)
			munmap(b->map, b->map_len);
		bigbuf_free(b->mem);
		if (b->pin_owner)
			b->pin_owner->ops->view_unpin(b->pin_owner, b->pin);
		free(b);
	}
	memset(v, 0, sizeof(*v));
}

int objstore_view_pin(struct objstore_view *v, struct objstore *owner,
		      void *pin)
{
	if (!v->buf)
		return EINVAL;
	v->buf->pin_owner = owner;
	v->buf->pin = pin;
	return 0;
}

static int evict(struct objstore *s, const char *key, int bad)
{
	if (!s || !key_valid(key))
		return EINVAL;
	return s->ops->evict ? s->ops->evict(s, key, bad) : ENOENT;
}

int objstore_evict(struct objstore *s, const char *key)
{
	return evict(s, key, 0);
}

int objstore_evict_bad(struct objstore *s, const char *key)
{
	return evict(s, key, 1);
}

void objstore_get_stats(struct objstore *s, struct objstore_stats *st)
{
	st->gets = __atomic_load_n(&s->st.gets, __ATOMIC_RELAXED);
	st->get_bytes = __atomic_load_n(&s->st.get_bytes, __ATOMIC_RELAXED);
	st->puts = __atomic_load_n(&s->st.puts, __ATOMIC_RELAXED);
	st->put_bytes = __atomic_load_n(&s->st.put_bytes, __ATOMIC_RELAXED);
	st->dels = __atomic_load_n(&s->st.dels, __ATOMIC_RELAXED);
	st->heads = __atomic_load_n(&s->st.heads, __ATOMIC_RELAXED);
	st->errors = __atomic_load_n(&s->st.errors, __ATOMIC_RELAXED);
	st->retries = __atomic_load_n(&s->st.retries, __ATOMIC_RELAXED);
	st->gave_up = __atomic_load_n(&s->st.gave_up, __ATOMIC_RELAXED);
	st->syncs = __atomic_load_n(&s->st.syncs, __ATOMIC_RELAXED);
	for (int k = 0; k < OBJSTORE_KINDS; k++) {
		const struct objstore_kind_stats *from = &s->st.kind[k];
		struct objstore_kind_stats *to = &st->kind[k];
		to->requests = metric_get(&from->requests);
		to->errors = metric_get(&from->errors);
		to->retries = metric_get(&from->retries);
		to->bytes = metric_get(&from->bytes);
		metric_hist_read(&from->lat, &to->lat);
	}
}

int objstore_list_temps(struct objstore *s, objstore_list_fn fn, void *arg)
{
	return s->ops->list_temps ? s->ops->list_temps(s, fn, arg) : ENOTSUP;
}

int objstore_del_temp(struct objstore *s, const char *name)
{
	return s->ops->del_temp ? s->ops->del_temp(s, name) : ENOTSUP;
}

int objstore_list(struct objstore *s, const char *prefix, objstore_list_fn fn,
		  void *arg)
{
	int err;

	if (!s || !fn)
		return EINVAL;
	int64_t t0 = fsutil_mono_ns();
	if (!(err = injected_fault(s)))
		err = s->ops->list(s, prefix ? prefix : "", fn, arg);
	account(s, OBJSTORE_K_LIST, t0, err, 0);
	return err;
}

/* ---- probe ---- */

int objstore_on_dev(struct objstore *s, dev_t dev)
{
	return s && s->ops->on_dev ? s->ops->on_dev(s, dev) : 0;
}

int objstore_probe(struct objstore *s)
{
	char key[64], body[64];
	unsigned char rnd[8];
	void *data = NULL;
	size_t got = 0;
	uint64_t size = 0;
	int err;

	if (!s)
		return EINVAL;
	if (getrandom(rnd, sizeof(rnd), GRND_NONBLOCK) !=
	    (ssize_t)sizeof(rnd)) {
		/* No entropy yet: pid and clock are unique enough for a
		 * marker that lives a few milliseconds. */
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		uint64_t v = (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32) ^
			     (uint64_t)ts.tv_sec;
		memcpy(rnd, &v, sizeof(rnd));
	}
	snprintf(key, sizeof(key),
		 ".granary-probe-%02x%02x%02x%02x%02x%02x%02x%02x", rnd[0],
		 rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
	int blen = snprintf(body, sizeof(body), "granary probe %s\n", key + 15);

	err = objstore_put(s, key, body, (size_t)blen);
	if (err)
		return err;
	err = objstore_head(s, key, &size);
	if (!err && size != (uint64_t)blen)
		err = EIO; /* the store does not keep what it is given */
	if (!err)
		err = objstore_get(s, key, 0, 0, &data, &got);
	if (!err && (got != (size_t)blen || memcmp(data, body, got)))
		err = EIO;
	free(data);
	int derr = objstore_del(s, key);
	return err ? err : derr;
}

/* ---- owner marker ---- */

#define OWNER_MAGIC "granary volume\n"

int objstore_owner_put(struct objstore *s, const struct objstore_owner *o)
{
	char body[512];
	int n = snprintf(body, sizeof(body), OWNER_MAGIC "uuid=%s\nname=%s\n",
			 o->uuid, o->name);

	if (n < 0 || (size_t)n >= sizeof(body) || strchr(o->uuid, '\n') ||
	    strchr(o->name, '\n'))
		return EINVAL;
	return objstore_put(s, OBJSTORE_OWNER_KEY, body, (size_t)n);
}

/* Copy the value of the line "field=VALUE" of body into out. */
static int owner_field(const char *body, const char *field, char *out,
		       size_t cap)
{
	size_t flen = strlen(field);
	const char *l = body;

	while (*l) {
		const char *end = strchr(l, '\n');
		size_t llen = end ? (size_t)(end - l) : strlen(l);
		if (llen > flen && !strncmp(l, field, flen) && l[flen] == '=') {
			size_t n = llen - flen - 1;
			if (n == 0 || n >= cap)
				return EINVAL;
			memcpy(out, l + flen + 1, n);
			out[n] = '\0';
			return 0;
		}
		l += llen + (end != NULL);
	}
	return EINVAL;
}

int objstore_owner_get(struct objstore *s, struct objstore_owner *o)
{
	void *data = NULL;
	size_t got = 0;
	char body[512];
	int err = objstore_get(s, OBJSTORE_OWNER_KEY, 0, 0, &data, &got);

	if (err)
		return err;
	err = EINVAL;
	if (got < sizeof(body) && got > strlen(OWNER_MAGIC) &&
	    !memcmp(data, OWNER_MAGIC, strlen(OWNER_MAGIC))) {
		memcpy(body, data, got);
		body[got] = '\0';
		err = owner_field(body, "uuid", o->uuid, sizeof(o->uuid));
		if (!err)
			err =
			    owner_field(body, "name", o->name, sizeof(o->name));
	}
	free(data);
	return err;
}

int objstore_owner_at(const char *url, const struct objstore_creds *creds,
		      struct objstore_owner *o)
{
	struct objstore *s;
	struct stat st;
	int err;

	/* a place's directory exists, or holds no marker */
	if (!strncmp(url, "file://", 7) && !strchr(url + 7, ':')) {
		if (stat(url + 7, &st))
			return errno == EACCES ? EACCES : ENOENT;
		if (!S_ISDIR(st.st_mode))
			return ENOENT;
	}
	err = objstore_open(url, creds, &s);
	if (err)
		return err;
	err = objstore_owner_get(s, o);
	objstore_close(s);
	return err;
}

/* ---- places ---- */

/* out = a[0..alen) b[0..blen), NUL-terminated. */
static int place_copy(char *out, size_t cap, const char *a, size_t alen,
		      const char *b, size_t blen)
{
	if (alen + blen >= cap)
		return ENAMETOOLONG;
	memcpy(out, a, alen);
	memcpy(out + alen, b, blen);
	out[alen + blen] = '\0';
	return 0;
}

/* The length of the scheme and authority ("s3://HOST") of an s3 url whose
 * path names a bucket, or 0; *len: the url's length without its options
 * ("?region=..."): they say how to reach the objects, not where they lie. */
static size_t s3_root_len(const char *url, size_t *len)
{
	const char *rest = !strncmp(url, "s3://", 5)	     ? url + 5
			   : !strncmp(url, "s3+http://", 10) ? url + 10
							     : NULL;
	size_t n = strcspn(url, "?");
	const char *slash =
	    rest ? memchr(rest, '/', n - (size_t)(rest - url)) : NULL;

	if (!slash || slash == rest || slash + 1 == url + n || slash[1] == '/')
		return 0;
	*len = n;
	return (size_t)(slash - url);
}

/* Length of p[0..len) without its trailing '/' (down to keep). */
static size_t strip_slashes(const char *p, size_t len, size_t keep)
{
	while (len > keep && p[len - 1] == '/')
		len--;
	return len;
}

int objstore_url_place(const char *url, size_t i, char *out, size_t cap)
{
	size_t root, len;

	if (!strncmp(url, "file://", 7)) {
		const char *d = url + 7;
		for (; i > 0; i--) {
			d = strchr(d, ':');
			if (!d)
				return ENOENT;
			d++;
		}
		size_t len = strcspn(d, ":");
		if (len == 0 || d[0] != '/')
			return OBJSTORE_EURL;
		return place_copy(out, cap, "file://", 7, d,
				  strip_slashes(d, len, 1));
	}
	if ((root = s3_root_len(url, &len)) != 0) {
		if (i > 0)
			return ENOENT;
		return place_copy(out, cap, url,
				  strip_slashes(url, len, root + 1), "", 0);
	}
	if (!strncmp(url, "mem://", 6))
		return i > 0 ? ENOENT
			     : place_copy(out, cap, url, strlen(url), "", 0);
	return OBJSTORE_EURL;
}

int objstore_url_parent(const char *url, char *out, size_t cap)
{
	size_t root, len;

	if (!strncmp(url, "file://", 7)) {
		const char *d = url + 7;
		if (d[0] != '/')
			return OBJSTORE_EURL;
		if (strchr(d, ':'))
			return EINVAL; /* a pool: its places have parents */
		len = strip_slashes(d, strlen(d), 1);
		if (len == 1)
			return ENOENT; /* file:/// */
		while (d[len - 1] != '/')
			len--;
		return place_copy(out, cap, "file://", 7, d,
				  strip_slashes(d, len, 1));
	}
	if ((root = s3_root_len(url, &len)) != 0) {
		len = strip_slashes(url, len, root + 1);
		const char *bend = memchr(url + root + 1, '/', len - root - 1);
		if (!bend)
			return ENOENT; /* the bucket: the top */
		while (url[len - 1] != '/')
			len--;
		return place_copy(out, cap, url, strip_slashes(url, len, 0), "",
				  0);
	}
	if (!strncmp(url, "mem://", 6))
		return ENOENT;
	return OBJSTORE_EURL;
}

/* ---- errors ---- */
