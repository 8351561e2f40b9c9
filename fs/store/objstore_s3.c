/*
 * objstore_s3.c - the s3:// and s3+http:// backends: S3 (or MinIO, Ceph
 * RGW, s3rver) through libs3 2.0, path-style URIs, V2 signatures, one
 * request at a time per calling thread. An object request is one attempt
 * whose error says its class (OBJSTORE_EUNREACH, ESERVER: transient); the
 * objstore wrappers retry those through an outage (objstore.h). A listing
 * is paged, so its pages are retried here, S3_TRIES times each.
 *
 * Request time bound: libs3 2.0 has no per-request timeout, and a
 * synchronous call to a black-holed address waits for curl's default
 * connect timeout (300 s) per try. So every request runs in the calling
 * thread's own S3RequestContext, driven by s3_drive() (runonce + select)
 * until it completes or its deadline passes: GRANARY_S3_TIMEOUT seconds
 * (default 10) plus 1 s per MiB of body. At the deadline the context is
 * destroyed, which aborts the transfer, and reported as OBJSTORE_EUNREACH
 * (a list page's timeout is retried at most S3_TIMEOUT_TRIES times).
 */
#include "fs/store/objstore.h"
#include "lib/bigbuf.h"
#include "lib/log.h"

#include <errno.h>
#include <libs3.h>
#include <libxml/parser.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>

#define S3_TRIES	 5 /* of a list page */
#define S3_TIMEOUT_TRIES 3 /* of the S3_TRIES: each one costs a deadline */
#define S3_BACKOFF_MS	 100
#define S3_LIST_PAGE	 1000
#define S3_TIMEOUT_MS	 10000 /* connect + first byte; GRANARY_S3_TIMEOUT */
#define S3_MS_PER_MIB	 1000  /* on top of it: at least 1 MiB/s */
#define S3_POLL_MS	 1000  /* longest select(): re-check the deadline */
#define S3_NOFD_POLL_MS	 100   /* curl busy with no fd to watch (resolver) */

struct s3_store {
	struct objstore base; /* first */
	S3BucketContext ctx;  /* points into the strings below */
	char *host;	      /* HOST[:PORT] */
	char *bucket;
	char *prefix; /* "" or "some/prefix/": prepended to every key */
	size_t prefix_len;
	char *access_key, *secret_key; /* wiped on close */
	long timeout_ms;	       /* base deadline of each request */
	/* No lock: all of it is read-only after open; each thread drives its
	 * requests in its own S3RequestContext (see s3_ctx_get). */
};

/* ---- libs3 initialisation ---- */

/* libs3 keeps the default host pointer until S3_deinitialize (never called:
 * the process ends first), so it must be a static copy. Every bucket
 * context names its host, so the default is never actually used. */
static char s3_default_host[S3_MAX_HOSTNAME_SIZE + 1];
static pthread_mutex_t s3_host_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t s3_once = PTHREAD_ONCE_INIT;
static S3Status s3_init_status;	 /* written once under s3_once */
static pthread_key_t s3_ctx_key; /* each thread's idle S3RequestContext */

static void s3_ctx_free(void *c)
{
	S3_destroy_request_context(c); /* at thread exit: no request in it */
}

static void s3_init(void)
{
	/* libs3 parses answers with libxml2, which sets itself up on first
	 * use unless told to: from several threads at once that races and
	 * loses a mutex (LeakSanitizer saw it). Once, here, first. */
	xmlInitParser();
	pthread_mutex_lock(&s3_host_lock);
	s3_init_status = S3_initialize("granary", S3_INIT_ALL, s3_default_host);
	pthread_mutex_unlock(&s3_host_lock);
	if (s3_init_status == S3StatusOK &&
	    pthread_key_create(&s3_ctx_key, s3_ctx_free))
		s3_init_status = S3StatusOutOfMemory;
}

static int s3_init_once(const char *host)
{
	pthread_mutex_lock(&s3_host_lock);
	if (!s3_default_host[0])
		snprintf(s3_default_host, sizeof(s3_default_host), "%s", host);
	pthread_mutex_unlock(&s3_host_lock);
	pthread_once(&s3_once, s3_init);
	if (s3_init_status != S3StatusOK) {
		log_err("cannot initialise libs3: %s",
			S3_get_status_name(s3_init_status));
		return EIO;
	}
	return 0;
}

/* ---- driving one request to completion or its deadline ---- */

/*
 * The calling thread's request context. It is kept between requests so
 * that the connections curl caches in it are reused; it only ever holds the
 * one request its thread is waiting for, so nothing is shared and no lock
 * is held while waiting. Callbacks never start requests, so no nesting.
 */
static S3Status s3_ctx_get(S3RequestContext **out)
{
	S3RequestContext *c = pthread_getspecific(s3_ctx_key);

	if (!c) {
		S3Status st = S3_create_request_context(&c);
		if (st != S3StatusOK)
			return st;
		if (pthread_setspecific(s3_ctx_key, c)) {
			S3_destroy_request_context(c);
			return S3StatusOutOfMemory;
		}
	}
	*out = c;
	return S3StatusOK;
}

/* Abort whatever runs in the thread's context (and close its cached
 * connections, among them the one that hung); the next request gets a new
 * context. libs3 runs the completion callback with S3StatusInterrupted
 * before this returns. */
static void s3_ctx_drop(S3RequestContext *c)
{
	pthread_setspecific(s3_ctx_key, NULL);
	S3_destroy_request_context(c);
}

struct s3_wait {
	int done;	/* the completion callback has run */
	int timed_out;	/* aborted at the deadline */
	uint64_t bytes; /* body size expected, for the deadline */
};

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* How long a request moving `bytes` of body may take in all. */
static int64_t s3_budget_ms(const struct s3_store *s, uint64_t bytes)
{
	return s->timeout_ms +
	       (int64_t)((double)bytes / (1 << 20) * S3_MS_PER_MIB);
}

/*
 * Run the request just started in c until its completion callback has run
 * or the deadline passes, then abort it if it has not completed. Either
 * way the callbacks are over when this returns, and their data lives in
 * the caller's frame, so nothing touches freed memory after an abort.
 * w->bytes is re-read on every turn: a whole-object GET learns its size
 * from the response headers. Returns a libs3 status for a failure of the
 * loop itself (curl or select), else S3StatusOK.
 */
static S3Status s3_drive(const struct s3_store *s, S3RequestContext *c,
			 struct s3_wait *w)
{
	int64_t start = now_ms();
	S3Status st = S3StatusOK;

	while (!w->done) {
		int left = 0;
		st = S3_runonce_request_context(c, &left);
		if (st != S3StatusOK || w->done)
			break;
		if (!left) { /* gone without a completion callback */
			st = S3StatusInternalError;
			break;
		}
		int64_t wait = start + s3_budget_ms(s, w->bytes) - now_ms();
		if (wait <= 0) {
			w->timed_out = 1;
			break;
		}

		fd_set rd, wr, ex;
		int maxfd = -1;
		FD_ZERO(&rd);
		FD_ZERO(&wr);
		FD_ZERO(&ex);
		st = S3_get_request_context_fdsets(c, &rd, &wr, &ex, &maxfd);
		if (st != S3StatusOK)
			break;
		/* curl leaves out fds >= FD_SETSIZE: then maxfd is -1 and
		 * the short poll below still gets the request done. */
		int64_t t = S3_get_request_context_timeout(c);
		int64_t cap = maxfd < 0 ? S3_NOFD_POLL_MS : S3_POLL_MS;
		if (t < 0 || t > cap)
			t = cap; /* -1: curl has no timer running */
		if (t > wait)
			t = wait;
		if (t == 0)
			continue;
		struct timeval tv = {(time_t)(t / 1000),
				     (suseconds_t)(t % 1000) * 1000};
		if (select(maxfd + 1, &rd, &wr, &ex, &tv) < 0 &&
		    errno != EINTR) {
			st = S3StatusInternalError;
			break;
		}
	}
	if (!w->done)
		s3_ctx_drop(c);
	if (!w->done) {
		/* libs3 lost the request (curl_multi_remove_handle failed):
		 * with its context gone no callback can come any more. */
		w->done = 1;
		st = S3StatusInternalError;
	}
	return st;
}

/* ---- one request, with retries ---- */

struct s3_req {
	S3Status status;
	char detail[256]; /* the server's error message, if any */
	struct s3_wait w;
	int size_from_props; /* whole-object GET: deadline from the length */
	uint64_t content_length;
	int have_props;
	int cb_err; /* errno from one of our own callbacks */

	/* put */
	const unsigned char *put_data;
	size_t put_len, put_off;
	/* get */
	unsigned char *buf;
	size_t cap, got, want; /* want: 0 = whatever comes */
	uint64_t off;	       /* where the range starts */
	uint64_t recv;	       /* bytes received, kept or not */
};

static S3Status on_props(const S3ResponseProperties *p, void *arg)
{
	struct s3_req *r = arg;

	r->content_length = p->contentLength;
	r->have_props = 1;
	if (r->size_from_props)
		r->w.bytes = p->contentLength;
	return S3StatusOK;
}

static void on_complete(S3Status status, const S3ErrorDetails *e, void *arg)
{
	struct s3_req *r = arg;

	r->status = status;
	r->w.done = 1;
	r->detail[0] = '\0';
	if (e && e->message)
		snprintf(r->detail, sizeof(r->detail), "%s", e->message);
}

static int on_put_data(int size, char *buf, void *arg)
{
	struct s3_req *r = arg;
	size_t n = r->put_len - r->put_off;

	if (n > (size_t)size)
		n = (size_t)size;
	memcpy(buf, r->put_data + r->put_off, n);
	r->put_off += n;
	return (int)n;
}

static S3Status on_get_data(int size, const char *data, void *arg)
{
	struct s3_req *r = arg;
	size_t n = (size_t)size;

	r->recv += n;
	if (r->want && r->got + n > r->want) {
		/* More than the range we asked for. From offset 0 the extra
		 * bytes are just a tail to drop (s3rver answers "bytes=0-0"
		 * with the whole object); from elsewhere a server that
		 * ignored Range would hand us the wrong bytes. */
		if (r->off) {
			r->cb_err = EIO;
			return S3StatusAbortedByCallback;
		}
		n = r->want - r->got;
	}
	if (r->got + n > r->cap) {
		size_t cap = r->cap ? r->cap : 64 * 1024;
		if (r->have_props && r->content_length > cap &&
		    r->content_length <= SIZE_MAX)
			cap = (size_t)r->content_length;
		while (cap < r->got + n)
			cap *= 2;
		void *nb = r->buf ? realloc(r->buf, cap) : bigbuf_alloc(cap);
		if (!nb) {
			r->cb_err = ENOMEM;
			return S3StatusAbortedByCallback;
		}
		r->buf = nb;
		r->cap = cap;
	}
	if (n)
		memcpy(r->buf + r->got, data, n);
	r->got += n;
	return S3StatusOK;
}

static int is_transient(S3Status st)
{
	switch (st) {
	case S3StatusInternalError: /* libs3's catch-all for curl errors */
	case S3StatusNameLookupError:
	case S3StatusFailedToConnect:
	case S3StatusConnectionFailed:
	case S3StatusErrorInternalError:
	case S3StatusErrorSlowDown: /* also what libs3 makes of a bare 503 */
	case S3StatusErrorRequestTimeout:
	case S3StatusErrorIncompleteBody:
	case S3StatusErrorOperationAborted:
	case S3StatusErrorUnknown: /* e.g. ServiceUnavailable: unknown to 2.0 */
	case S3StatusHttpErrorUnknown: /* a 5xx without an S3 error body */
		return 1;
	default:
		return 0;
	}
}

static int is_unreachable(S3Status st)
{
	return st == S3StatusNameLookupError || st == S3StatusFailedToConnect ||
	       st == S3StatusConnectionFailed ||
	       st == S3StatusErrorRequestTimeout;
}

/* Map a final libs3 status to our errors; missing_ok maps "not found" on
 * the object to ENOENT. */
static int map_status(S3Status st)
{
	switch (st) {
	case S3StatusOK:
		return 0;
	case S3StatusOutOfMemory:
		return ENOMEM;
	case S3StatusErrorNoSuchKey:
	case S3StatusHttpErrorNotFound:
		return ENOENT;
	case S3StatusErrorNoSuchBucket:
		return OBJSTORE_ENOBUCKET;
	case S3StatusErrorInvalidAccessKeyId:
	case S3StatusErrorSignatureDoesNotMatch:
	case S3StatusErrorAccessDenied:
	case S3StatusHttpErrorForbidden:
	case S3StatusErrorExpiredToken:
	case S3StatusErrorInvalidToken:
	case S3StatusErrorRequestTimeTooSkewed:
	case S3StatusErrorAccountProblem:
	case S3StatusErrorNotSignedUp:
		return OBJSTORE_EAUTH;
	case S3StatusKeyTooLong:
	case S3StatusErrorKeyTooLong:
	case S3StatusUriTooLong:
		return ENAMETOOLONG;
	case S3StatusErrorEntityTooLarge:
		return EFBIG;
	case S3StatusServerFailedVerification:
		return OBJSTORE_EUNREACH; /* TLS: not the server we meant */
	default:
		if (is_unreachable(st))
			return OBJSTORE_EUNREACH;
		if (is_transient(st))
			return OBJSTORE_ESERVER;
		return EIO;
	}
}

/* Sleep before retry number `attempt` (0-based): 100 ms doubling, plus up
 * to 50% jitter so that many clients do not retry in lockstep. */
static void backoff(int attempt)
{
	static __thread unsigned int seed;
	if (!seed)
		seed = (unsigned int)time(NULL) ^ (unsigned int)gettid();
	long ms = (long)S3_BACKOFF_MS << attempt;
	ms += rand_r(&seed) % (ms / 2 + 1);
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

enum s3_op { OP_GET, OP_PUT, OP_DEL, OP_HEAD };

static const char *op_name(enum s3_op op)
{
	static const char *names[] = {"get", "put", "delete", "head"};
	return names[op];
}

/* Build prefix + key into out (S3_MAX_KEY_SIZE + 1 bytes). */
static int full_key(const struct s3_store *s, const char *key, char *out)
{
	size_t klen = strlen(key);

	if (s->prefix_len + klen > S3_MAX_KEY_SIZE)
		return ENAMETOOLONG;
	memcpy(out, s->prefix, s->prefix_len);
	memcpy(out + s->prefix_len, key, klen + 1);
	return 0;
}

/*
 * Run one object request, one attempt (the wrappers retry). For OP_GET,
 * r->want/off select the range and the bytes land in r->buf/r->got.
 */
static int s3_run(struct s3_store *s, enum s3_op op, const char *key,
		  uint64_t off, struct s3_req *r)
{
	S3ResponseHandler rh = {on_props, on_complete};
	S3PutObjectHandler ph = {rh, on_put_data};
	S3GetObjectHandler gh = {rh, on_get_data};
	char fk[S3_MAX_KEY_SIZE + 1];
	S3RequestContext *c;
	S3Status st;
	int err = full_key(s, key, fk);

	if (err)
		return err;
	do { /* one attempt; a break leaves with r->status set */
		r->status = S3StatusInternalError;
		r->detail[0] = '\0';
		memset(&r->w, 0, sizeof(r->w));
		r->w.bytes = op == OP_PUT   ? r->put_len
			     : op == OP_GET ? r->want
					    : 0;
		r->size_from_props = op == OP_GET && !r->want;
		r->have_props = 0;
		r->content_length = 0;
		r->cb_err = 0;
		r->put_off = 0;
		r->got = 0;
		r->recv = 0;

		if ((st = s3_ctx_get(&c)) != S3StatusOK) {
			r->status = st;
			break;
		}
		switch (op) {
		case OP_PUT:
			S3_put_object(&s->ctx, fk, r->put_len, NULL, c, &ph, r);
			break;
		case OP_GET:
			S3_get_object(&s->ctx, fk, NULL, off, r->want, c, &gh,
				      r);
			break;
		case OP_DEL:
			S3_delete_object(&s->ctx, fk, c, &rh, r);
			break;
		case OP_HEAD:
			S3_head_object(&s->ctx, fk, c, &rh, r);
			break;
		}
		if ((st = s3_drive(s, c, &r->w)) != S3StatusOK)
			r->status = st;
		if (r->w.timed_out)
			break;

		if (r->status == S3StatusAbortedByCallback && r->cb_err) {
			if (r->cb_err == EIO)
				log_warn("s3 get of '%s' at '%s': the server "
					 "ignored the byte range",
					 fk, s->host);
			return r->cb_err;
		}
		/* libs3 reports a body cut short (CURLE_PARTIAL_FILE) as
		 * success: hold a GET to the length the server announced. */
		if (r->status == S3StatusOK && op == OP_GET && r->have_props &&
		    r->content_length != r->recv)
			r->status = S3StatusConnectionFailed;
		if (r->status == S3StatusOK)
			return 0;
	} while (0);

	/* a transient failure is the wrappers' to log, once per outage */
	if (r->w.timed_out) {
		log_debug("s3 %s of '%s' in bucket '%s' at '%s' timed out: no "
			  "answer within %.1f s",
			  op_name(op), fk, s->bucket, s->host,
			  s3_budget_ms(s, r->w.bytes) / 1000.0);
		return OBJSTORE_EUNREACH;
	}
	err = map_status(r->status);
	if (objstore_transient(err))
		log_debug("s3 %s of '%s' in bucket '%s' at '%s' failed: %s%s%s",
			  op_name(op), fk, s->bucket, s->host,
			  S3_get_status_name(r->status),
			  r->detail[0] ? ": " : "", r->detail);
	else if (err != ENOENT && r->status != S3StatusErrorInvalidRange)
		log_warn("s3 %s of '%s' in bucket '%s' at '%s' failed: %s%s%s",
			 op_name(op), fk, s->bucket, s->host,
			 S3_get_status_name(r->status),
			 r->detail[0] ? ": " : "", r->detail);
	return err;
}

/* ---- ops ---- */

static int s3_get(struct objstore *os, const char *key, uint64_t off,
		  size_t len, void **data, size_t *got)
{
	struct s3_store *s = (struct s3_store *)os;
	struct s3_req r;
	int err;

	memset(&r, 0, sizeof(r));
	r.want = len;
	r.off = off;
	if (len) {
		r.buf = bigbuf_alloc(len);
		if (!r.buf)
			return ENOMEM;
		r.cap = len;
	}
	err = s3_run(s, OP_GET, key, off, &r);
	if (err == EIO && r.status == S3StatusErrorInvalidRange) {
		/* 416: the object exists but off is at or past its end. */
		err = 0;
		r.got = 0;
	}
	if (err) {
		free(r.buf);
		return err;
	}
	if (!r.buf && !(r.buf = malloc(1)))
		return ENOMEM; /* callers always get a buffer to free */
	*data = r.buf;
	*got = r.got;
	return 0;
}

static int s3_put(struct objstore *os, const char *key, const void *data,
		  size_t len)
{
	struct s3_req r;

	memset(&r, 0, sizeof(r));
	r.put_data = data;
	r.put_len = len;
	return s3_run((struct s3_store *)os, OP_PUT, key, 0, &r);
}

static int s3_del(struct objstore *os, const char *key)
{
	struct s3_req r;
	int err;

	memset(&r, 0, sizeof(r));
	err = s3_run((struct s3_store *)os, OP_DEL, key, 0, &r);
	return err == ENOENT ? 0 : err;
}

static int s3_head(struct objstore *os, const char *key, uint64_t *size)
{
	struct s3_req r;
	int err;

	memset(&r, 0, sizeof(r));
	err = s3_run((struct s3_store *)os, OP_HEAD, key, 0, &r);
	if (!err)
		*size = r.content_length;
	return err;
}

/* ---- list ---- */

struct s3_page {
	S3Status status;
	char detail[256];
	struct s3_wait w;
	int truncated;
	char *next_marker;
	char **keys;
	uint64_t *sizes;
	int64_t *mtimes;
	size_t n, cap;
	int cb_err;
};

static void page_reset(struct s3_page *p)
{
	for (size_t i = 0; i < p->n; i++)
		free(p->keys[i]);
	p->n = 0;
	free(p->next_marker);
	p->next_marker = NULL;
	p->truncated = 0;
	p->cb_err = 0;
}

static void on_page_complete(S3Status status, const S3ErrorDetails *e,
			     void *arg)
{
	struct s3_page *p = arg;

	p->status = status;
	p->w.done = 1;
	p->detail[0] = '\0';
	if (e && e->message)
		snprintf(p->detail, sizeof(p->detail), "%s", e->message);
}

static S3Status on_page_props(const S3ResponseProperties *props, void *arg)
{
	(void)props;
	(void)arg;
	return S3StatusOK;
}

/* Collect the page; the caller's fn runs after the request is over, so it
 * may itself use the store and a retried page is never delivered twice. */
static S3Status on_page(int truncated, const char *next_marker, int count,
			const S3ListBucketContent *c, int nprefixes,
			const char **prefixes, void *arg)
{
	struct s3_page *p = arg;

	(void)nprefixes;
	(void)prefixes;
	p->truncated = truncated;
	if (next_marker && *next_marker) {
		free(p->next_marker);
		if (!(p->next_marker = strdup(next_marker)))
			goto nomem;
	}
	for (int i = 0; i < count; i++) {
		if (p->n == p->cap) {
			size_t cap = p->cap ? p->cap * 2 : 256;
			char **k = realloc(p->keys, cap * sizeof(*k));
			if (!k)
				goto nomem;
			p->keys = k;
			uint64_t *sz = realloc(p->sizes, cap * sizeof(*sz));
			if (!sz)
				goto nomem;
			p->sizes = sz;
			int64_t *mt = realloc(p->mtimes, cap * sizeof(*mt));
			if (!mt)
				goto nomem;
			p->mtimes = mt;
			p->cap = cap;
		}
		if (!(p->keys[p->n] = strdup(c[i].key)))
			goto nomem;
		p->mtimes[p->n] = c[i].lastModified > 0 ? c[i].lastModified : 0;
		p->sizes[p->n++] = c[i].size;
	}
	return S3StatusOK;
nomem:
	p->cb_err = ENOMEM;
	return S3StatusAbortedByCallback;
}

/*
 * Listing is a bucket-level request. Note for tests: s3rver checks libs3's
 * V2 signature of bucket-level requests differently from libs3 (it signs
 * "/bucket" where libs3 and AWS sign "/bucket/") and refuses them
 * (SignatureDoesNotMatch) unless started with
 * --allow-mismatched-signatures; object requests are not affected. That
 * flag also makes it accept a wrong secret, so the tests run a lenient
 * s3rver (format and gc list) and the tests of refused secrets a strict
 * one of their own (tests/lib/services.sh, svc_start_s3rver).
 */
static int s3_list(struct objstore *os, const char *prefix, objstore_list_fn fn,
		   void *arg)
{
	struct s3_store *s = (struct s3_store *)os;
	S3ListBucketHandler lh = {{on_page_props, on_page_complete}, on_page};
	char fp[S3_MAX_KEY_SIZE + 1];
	char *marker = NULL;
	struct s3_page p;
	S3RequestContext *c;
	S3Status st;
	int err = full_key(s, prefix, fp);

	if (err)
		return err;
	memset(&p, 0, sizeof(p));
	for (;;) {
		int timeouts = 0;
		for (int attempt = 0;; attempt++) {
			page_reset(&p);
			p.status = S3StatusInternalError;
			memset(&p.w, 0, sizeof(p.w));
			if ((st = s3_ctx_get(&c)) != S3StatusOK) {
				p.status = st;
				break;
			}
			S3_list_bucket(&s->ctx, fp, marker, NULL, S3_LIST_PAGE,
				       c, &lh, &p);
			if ((st = s3_drive(s, c, &p.w)) != S3StatusOK)
				p.status = st;
			if (p.w.timed_out) {
				if (++timeouts >= S3_TIMEOUT_TRIES ||
				    attempt + 1 >= S3_TRIES)
					break;
			} else if (p.status == S3StatusOK || p.cb_err ||
				   !is_transient(p.status) ||
				   attempt + 1 >= S3_TRIES) {
				break;
			}
			backoff(attempt);
		}
		if (p.w.timed_out) {
			err = OBJSTORE_EUNREACH;
			log_warn("s3 list of '%s' in bucket '%s' at '%s' timed "
				 "out: no answer within %.1f s, %d times",
				 fp, s->bucket, s->host,
				 s3_budget_ms(s, 0) / 1000.0, timeouts);
			break;
		}
		if (p.cb_err) {
			err = p.cb_err;
			break;
		}
		if (p.status != S3StatusOK) {
			err = map_status(p.status);
			if (err == ENOENT)
				err = OBJSTORE_ENOBUCKET; /* no key was named */
			log_warn("s3 list of '%s' in bucket '%s' at '%s' "
				 "failed: %s%s%s",
				 fp, s->bucket, s->host,
				 S3_get_status_name(p.status),
				 p.detail[0] ? ": " : "", p.detail);
			break;
		}
		for (size_t i = 0; i < p.n && !err; i++) {
			if (strncmp(p.keys[i], s->prefix, s->prefix_len))
				continue; /* cannot happen with a sane server */
			err = fn(arg, p.keys[i] + s->prefix_len, p.sizes[i],
				 p.mtimes[i]);
		}
		if (err || !p.truncated || p.n == 0)
			break;
		/* NextMarker comes only with a delimiter; otherwise the
		 * last key of the page is where the next one starts. */
		free(marker);
		marker =
		    strdup(p.next_marker ? p.next_marker : p.keys[p.n - 1]);
		if (!marker) {
			err = ENOMEM;
			break;
		}
	}
	page_reset(&p);
	free(p.keys);
	free(p.sizes);
	free(p.mtimes);
	free(marker);
	return err;
}

/* ---- open / close ---- */

static void wipe_free(char *secret)
{
	if (secret) {
		explicit_bzero(secret, strlen(secret));
		free(secret);
	}
}

static void s3_close(struct objstore *os)
{
	struct s3_store *s = (struct s3_store *)os;

	free(s->host);
	free(s->bucket);
	free(s->prefix);
	wipe_free(s->access_key);
	wipe_free(s->secret_key);
	free(s);
}

static const struct objstore_ops s3_ops = {
    .scheme = "s3",
    .get = s3_get,
    .put = s3_put,
    .del = s3_del,
    .head = s3_head,
    .list = s3_list,
    .close = s3_close,
};

static int host_char(char c)
{
	/* '_' is not DNS, but compose/k8s service names use it */
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_';
}

/* HOST[:PORT], HOST a DNS name, IPv4 address or [IPv6]. */
static int authority_valid(const char *a, size_t len)
{
	size_t i = 0, host_end;

	if (len == 0 || len > S3_MAX_HOSTNAME_SIZE)
		return 0;
	if (a[0] == '[') {
		const char *rb = memchr(a, ']', len);
		if (!rb || rb == a + 1)
			return 0;
		for (const char *c = a + 1; c < rb; c++)
			if (!((*c >= '0' && *c <= '9') ||
			      (*c >= 'a' && *c <= 'f') ||
			      (*c >= 'A' && *c <= 'F') || *c == ':' ||
			      *c == '.'))
				return 0;
		host_end = (size_t)(rb - a) + 1;
	} else {
		while (i < len && host_char(a[i]))
			i++;
		host_end = i;
		if (host_end == 0)
			return 0;
	}
	if (host_end == len)
		return 1;
	if (a[host_end] != ':' || host_end + 1 == len || len - host_end > 6)
		return 0; /* anything else in a host ('@', '_', ...) */
	long port = 0;
	for (i = host_end + 1; i < len; i++) {
		if (a[i] < '0' || a[i] > '9')
			return 0;
		port = port * 10 + (a[i] - '0');
	}
	return port >= 1 && port <= 65535;
}

/* Pick the credentials: explicit, then GRANARY_S3_*, then AWS_*. */
static int pick_creds(const struct objstore_creds *creds, const char **ak,
		      const char **sk)
{
	struct objstore_creds env;

	if (creds && creds->access_key && *creds->access_key &&
	    creds->secret_key && *creds->secret_key) {
		*ak = creds->access_key;
		*sk = creds->secret_key;
		return 0;
	}
	if (objstore_env_creds(&env))
		return OBJSTORE_ENOCREDS;
	*ak = env.access_key;
	*sk = env.secret_key;
	return 0;
}

/* GRANARY_S3_TIMEOUT: seconds (fractions allowed) for the base deadline. */
static long s3_timeout_from_env(void)
{
	const char *env = getenv("GRANARY_S3_TIMEOUT");
	char *end;

	if (!env || !*env)
		return S3_TIMEOUT_MS;
	double secs = strtod(env, &end);
	if (*end || !(secs >= 0.001 && secs <= 86400)) {
		log_warn("ignoring GRANARY_S3_TIMEOUT '%s': not a number of "
			 "seconds between 0.001 and 86400; using %d",
			 env, S3_TIMEOUT_MS / 1000);
		return S3_TIMEOUT_MS;
	}
	return (long)(secs * 1000);
}

int objstore_s3_open(const char *url, const struct objstore_creds *creds,
		     struct objstore **out)
{
	S3Protocol proto;
	const char *rest, *ak, *sk;
	struct s3_store *s;
	int err;

	if (!strncmp(url, "s3://", 5)) {
		proto = S3ProtocolHTTPS;
		rest = url + 5;
	} else if (!strncmp(url, "s3+http://", 10)) {
		proto = S3ProtocolHTTP;
		rest = url + 10;
	} else {
		return OBJSTORE_EURL;
	}
	if (strpbrk(rest, "?#% \t\r\n"))
		return OBJSTORE_EURL; /* no query, fragment or escapes */

	const char *slash = strchr(rest, '/');
	if (!slash || !authority_valid(rest, (size_t)(slash - rest)))
		return OBJSTORE_EURL;
	const char *bucket = slash + 1;
	const char *bend = strchr(bucket, '/');
	size_t blen = bend ? (size_t)(bend - bucket) : strlen(bucket);
	if (blen == 0)
		return OBJSTORE_EURL; /* missing bucket name */
	const char *pfx = bend ? bend + 1 : "";
	size_t plen = strlen(pfx);
	while (plen > 0 && pfx[plen - 1] == '/')
		plen--;
	/* Prefix components follow the key rules: no empty, "." or "..". */
	for (size_t i = 0; i < plen;) {
		size_t j = i;
		while (j < plen && pfx[j] != '/')
			j++;
		if (j == i || (j - i == 1 && pfx[i] == '.') ||
		    (j - i == 2 && pfx[i] == '.' && pfx[i + 1] == '.'))
			return OBJSTORE_EURL;
		i = j + 1;
	}

	s = calloc(1, sizeof(*s));
	if (!s)
		return ENOMEM;
	s->base.ops = &s3_ops;
	s->host = strndup(rest, (size_t)(slash - rest));
	s->bucket = strndup(bucket, blen);
	s->prefix = malloc(plen + 2);
	if (!s->host || !s->bucket || !s->prefix) {
		err = ENOMEM;
		goto close_store;
	}
	memcpy(s->prefix, pfx, plen);
	if (plen)
		s->prefix[plen++] = '/';
	s->prefix[plen] = '\0';
	s->prefix_len = plen;
	if (S3_validate_bucket_name(s->bucket, S3UriStylePath) != S3StatusOK) {
		err = OBJSTORE_EURL;
		goto close_store;
	}
	if ((err = pick_creds(creds, &ak, &sk)))
		goto close_store;
	s->access_key = strdup(ak);
	s->secret_key = strdup(sk);
	if (!s->access_key || !s->secret_key) {
		err = ENOMEM;
		goto close_store;
	}
	if ((err = s3_init_once(s->host)))
		goto close_store;
	s->timeout_ms = s3_timeout_from_env();

	s->ctx.hostName = s->host;
	s->ctx.bucketName = s->bucket;
	s->ctx.protocol = proto;
	s->ctx.uriStyle = S3UriStylePath;
	s->ctx.accessKeyId = s->access_key;
	s->ctx.secretAccessKey = s->secret_key;
	*out = &s->base;
	return 0;

close_store:
	s3_close(&s->base);
	return err;
}
