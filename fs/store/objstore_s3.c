/*
 * objstore_s3.c - the s3:// and s3+http:// backends: S3 (AWS, R2, B2, GCS,
 * MinIO, Ceph RGW, s3rver) over libcurl, signed with s3sign.h: Signature
 * V4 by default, V2 on request (?sig=v2), path-style or virtual-hosted
 * (?style=virtual). Every request is built once as its parts (method,
 * path, sorted query, headers, payload hash), signed with the store's
 * signature, then run on the calling thread's own CURL easy handle, kept
 * between requests so that its connections are reused.
 *
 * An object request is one attempt whose error says its class (curl's
 * result or the HTTP status and S3 <Code>; see s3_map_curl, s3_map_http);
 * the objstore wrappers retry the transient ones through an outage
 * (objstore.h). A get's answer is held to its own headers and to the
 * range asked (get_check): fewer bytes than the object has are never a
 * success. A listing is paged, so its pages are retried here,
 * S3_TRIES times each.
 *
 * Request time bound: GRANARY_S3_TIMEOUT seconds (default 10) to connect
 * and get the first byte, plus 1 s per MiB of body, checked by the
 * transfer's progress callback (curl calls it at least once a second), so
 * a big body is not cut while it moves and a silent server is given up at
 * its deadline.
 */
#include "fs/store/objstore.h"
#include "fs/store/s3sign.h"
#include "fs/store/s3url.h"
#include "lib/bigbuf.h"
#include "lib/log.h"

#include <curl/curl.h>
#include <errno.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define S3_TRIES	 5 /* of a list page */
#define S3_TIMEOUT_TRIES 3 /* of the S3_TRIES: each one costs a deadline */
#define S3_BACKOFF_MS	 100
#define S3_LIST_PAGE	 "1000"
#define S3_TIMEOUT_MS	 10000 /* connect + first byte; GRANARY_S3_TIMEOUT */
#define S3_MS_PER_MIB	 1000  /* on top of it: at least 1 MiB/s */
#define S3_MAX_KEY	 1024
#define S3_MAX_HOST	 S3URL_MAX_HOST
#define S3_ERRBODY_MAX	 16384 /* of an error answer kept for its XML */
#define S3_LOG_EVERY_S	 10    /* one warning a store and cause per this */
#define S3_PREALLOC_MAX	 (64u << 20) /* of a body, from its Content-Length */
/*
 * Bodies up to this size are signed by their SHA-256 over TLS too; bigger
 * ones go as UNSIGNED-PAYLOAD there: hashing costs a pass over the bytes
 * (about 2 ms a MiB) before the first one is sent, and TLS's own MAC
 * already keeps them from being changed on the way. Over plain HTTP every
 * body is hashed: the signature is then all that protects it.
 */
#define S3_HASH_MAX (1u << 20)

enum s3_sig { SIG_V4, SIG_V2 };

struct s3_store {
	struct objstore base; /* first */
	char *host;	      /* HOST[:PORT], as in the URL */
	char *bucket;
	char *prefix; /* "" or "some/prefix/": prepended to every key */
	size_t prefix_len;
	char *access_key, *secret_key; /* wiped on close */
	char *session_token; /* temporary credentials' (STS); NULL: none */
	char region[64];
	enum s3_sig sig;
	int tls, virtual_host;
	char *authority;  /* what goes in Host: HOST or BUCKET.HOST */
	char *base_url;	  /* scheme://authority */
	char *ca_bundle;  /* GRANARY_S3_CA_BUNDLE, or NULL: the system's */
	int insecure;	  /* GRANARY_S3_INSECURE_TLS=1 */
	char *connect_to; /* GRANARY_S3_CONNECT_TO as CURLOPT_CONNECT_TO */
	long timeout_ms;  /* base deadline of each request */
	/* the last warning, for S3_LOG_EVERY_S: guarded by log_lock */
	pthread_mutex_t log_lock;
	int log_err;
	time_t log_at;
	/* No other lock: the rest is read-only after open, and each thread
	 * runs its requests on its own easy handle (s3_easy). */
};

/* ---- global set-up and the handle of each thread ---- */

static pthread_once_t s3_once = PTHREAD_ONCE_INIT;
static int s3_init_err;		  /* written once under s3_once */
static pthread_key_t s3_easy_key; /* each thread's CURL easy handle */

static void s3_easy_free(void *e)
{
	curl_easy_cleanup(e); /* at thread exit: no request on it */
}

static void s3_init(void)
{
	/* libxml2 sets itself up on first use unless told to: from several
	 * threads at once that races (LeakSanitizer saw it). Once, here. */
	xmlInitParser();
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		s3_init_err = EIO;
	else if (pthread_key_create(&s3_easy_key, s3_easy_free))
		s3_init_err = ENOMEM;
}

/* The calling thread's easy handle, reset: it keeps its connection cache
 * across requests, and only ever runs the one request its thread waits
 * for, so nothing is shared and nothing locked. NULL when out of memory. */
static CURL *s3_easy(void)
{
	CURL *e = pthread_getspecific(s3_easy_key);

	if (e) {
		curl_easy_reset(e);
		return e;
	}
	if (!(e = curl_easy_init()))
		return NULL;
	if (pthread_setspecific(s3_easy_key, e)) {
		curl_easy_cleanup(e);
		return NULL;
	}
	return e;
}

/* ---- a request, built once, signed with V4 or V2 ---- */

#define S3_MAX_HDRS 8

struct s3_req {
	/* what is sent */
	const char *method;
	char path[3 * (S3_MAX_KEY + 256) + 8]; /* encoded, as sent */
	char query[3 * (S3_MAX_KEY + 1024) + 128];
	struct s3sign_header hdr[S3_MAX_HDRS];
	size_t nhdr;
	char date[20], range[64], sha[65];
	const char *payload_hash;
	const unsigned char *body; /* PUT */
	size_t body_len, body_off;
	int head; /* no body in the answer */

	/* what came back */
	long status;
	unsigned char *buf;    /* a 2xx body */
	size_t cap, got, want; /* want: 0 = whatever comes */
	uint64_t off;	       /* where the range starts */
	uint64_t recv;	       /* bytes of a 2xx body that came (got: kept) */
	char crange[96];       /* its Content-Range */
	char *err_body;	       /* a non-2xx body, for its XML */
	size_t err_len;
	int cb_err; /* errno from one of our own callbacks */
	int timed_out;
	int64_t start_ms;
	long timeout_ms;
	char curl_err[CURL_ERROR_SIZE];
	char region_hdr[64]; /* x-amz-bucket-region of a redirect */
};

static void req_header(struct s3_req *r, const char *name, const char *value)
{
	r->hdr[r->nhdr].name = name;
	r->hdr[r->nhdr++].value = value;
}

static void s3_amz_date(char out[20])
{
	time_t now = time(NULL);
	struct tm tm;

	gmtime_r(&now, &tm);
	strftime(out, 20, "%Y%m%dT%H%M%SZ", &tm);
}

/*
 * Start r as METHOD on key (an encoded path below the bucket, "" for the
 * bucket itself) with the query q ("" or canonical: sorted, encoded).
 * Path-style: /BUCKET/KEY; virtual-hosted: /KEY on BUCKET.HOST. Fills the
 * headers every request has: Host, x-amz-date, the session token of
 * temporary credentials (an x-amz-* header: V4 and V2 both sign it), and
 * for V4 the payload hash.
 */
static int req_init(const struct s3_store *s, struct s3_req *r,
		    const char *method, const char *key, const char *q)
{
	char enc[sizeof(r->path)];
	size_t n = s3sign_uri_encode(key, strlen(key), 1, enc, sizeof(enc));
	int w;

	if (n >= sizeof(enc))
		return ENAMETOOLONG;
	r->method = method;
	if (s->virtual_host)
		w = snprintf(r->path, sizeof(r->path), "/%s", enc);
	else if (*key)
		w = snprintf(r->path, sizeof(r->path), "/%s/%s", s->bucket,
			     enc);
	else /* "/bucket", as s3rver signs a bucket's V2 resource */
		w = snprintf(r->path, sizeof(r->path), "/%s", s->bucket);
	if (w < 0 || (size_t)w >= sizeof(r->path))
		return ENAMETOOLONG;
	if (strlen(q) >= sizeof(r->query))
		return ENAMETOOLONG;
	strcpy(r->query, q);
	s3_amz_date(r->date);
	r->nhdr = 0;
	req_header(r, "Host", s->authority);
	req_header(r, "x-amz-date", r->date);
	if (s->session_token)
		req_header(r, "x-amz-security-token", s->session_token);
	r->payload_hash = S3SIGN_EMPTY_SHA256;
	return 0;
}

/* The body of a PUT, and its payload hash (S3_HASH_MAX). */
static void req_body(const struct s3_store *s, struct s3_req *r,
		     const void *data, size_t len)
{
	r->body = data;
	r->body_len = len;
	if (s->tls && len > S3_HASH_MAX) {
		r->payload_hash = S3SIGN_UNSIGNED;
	} else {
		s3sign_sha256_hex(data, len, r->sha);
		r->payload_hash = r->sha;
	}
}

/* Sign r (the last headers: x-amz-content-sha256 for V4, Authorization)
 * and turn its headers into curl's list in *out. */
static int req_sign(const struct s3_store *s, struct s3_req *r,
		    struct curl_slist **out)
{
	char auth[512];
	char v2path[sizeof(r->path) + 260];
	struct s3sign_req sr = {r->method, r->path, r->query,
				r->hdr,	   r->nhdr, r->payload_hash};
	struct curl_slist *l = NULL, *t;
	int err;

	if (s->sig == SIG_V4) {
		struct s3sign_v4 k = {s->access_key, s->secret_key, s->region,
				      "s3",	     r->date,	    1};
		req_header(r, "x-amz-content-sha256", r->payload_hash);
		sr.nheaders = r->nhdr;
		err = s3sign_v4(&k, &sr, auth, sizeof(auth), NULL, NULL);
	} else {
		/* V2 signs the path-style resource */
		if (s->virtual_host) {
			snprintf(v2path, sizeof(v2path), "/%s%s", s->bucket,
				 r->path);
			sr.path = v2path;
		}
		err = s3sign_v2(s->access_key, s->secret_key, &sr, auth,
				sizeof(auth), NULL);
	}
	if (err)
		return err;
	for (size_t i = 0; i <= r->nhdr; i++) {
		/* a session token runs to kilobytes: no fixed line */
		char *line;
		if (asprintf(&line, "%s: %s",
			     i < r->nhdr ? r->hdr[i].name : "Authorization",
			     i < r->nhdr ? r->hdr[i].value : auth) < 0)
			goto nomem;
		t = curl_slist_append(l, line);
		free(line);
		if (!t)
			goto nomem;
		l = t;
	}
	/* no "Expect: 100-continue" round trip before a PUT's body, no
	 * Content-Type of curl's own (V2 would have to sign it) */
	if (!(t = curl_slist_append(l, "Expect:")) ||
	    !(l = t, t = curl_slist_append(l, "Content-Type:")))
		goto nomem;
	*out = t;
	return 0;
nomem:
	curl_slist_free_all(l);
	return ENOMEM;
}

/* ---- curl's callbacks ---- */

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* How long a request moving `bytes` of body may take in all. */
static int64_t s3_budget_ms(long timeout_ms, uint64_t bytes)
{
	return timeout_ms +
	       (int64_t)((double)bytes / (1 << 20) * S3_MS_PER_MIB);
}

/* The deadline: base + 1 s per MiB of the larger of the bodies, as far as
 * their sizes are known (a whole-object GET learns its from the answer). */
static int on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow,
		       curl_off_t ultotal, curl_off_t ulnow)
{
	struct s3_req *r = arg;
	curl_off_t b = dltotal > ultotal ? dltotal : ultotal;

	(void)dlnow;
	(void)ulnow;
	if (b < (curl_off_t)r->want)
		b = (curl_off_t)r->want;
	if (b < (curl_off_t)r->body_len)
		b = (curl_off_t)r->body_len;
	if (now_ms() - r->start_ms > s3_budget_ms(r->timeout_ms, (uint64_t)b)) {
		r->timed_out = 1;
		return 1;
	}
	return 0;
}

static size_t on_read(char *buf, size_t size, size_t nmemb, void *arg)
{
	struct s3_req *r = arg;
	size_t n = r->body_len - r->body_off;

	if (n > size * nmemb)
		n = size * nmemb;
	memcpy(buf, r->body + r->body_off, n);
	r->body_off += n;
	return n;
}

/* Keep an error answer's first S3_ERRBODY_MAX bytes for its XML. */
static size_t keep_error(struct s3_req *r, const char *data, size_t n)
{
	if (!r->err_body && !(r->err_body = malloc(S3_ERRBODY_MAX + 1))) {
		r->cb_err = ENOMEM;
		return 0;
	}
	size_t k = S3_ERRBODY_MAX - r->err_len;
	if (k > n)
		k = n;
	memcpy(r->err_body + r->err_len, data, k);
	r->err_len += k;
	r->err_body[r->err_len] = '\0';
	return n;
}

/* A 2xx body into r->buf (grown as needed); the status is known by the
 * time curl hands over the first bytes. */
static size_t on_write(char *data, size_t size, size_t nmemb, void *arg)
{
	struct s3_req *r = arg;
	size_t total = size * nmemb, n = total;
	CURL *e = pthread_getspecific(s3_easy_key);

	if (!r->status)
		curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &r->status);
	if (r->status < 200 || r->status > 299)
		return keep_error(r, data, total);
	r->recv += total;
	if (r->want && r->got + n > r->want) {
		/* More than the range we asked for. From offset 0 the extra
		 * bytes are just a tail to drop (s3rver answers "bytes=0-0"
		 * with the whole object); from elsewhere a server that
		 * ignored Range would hand us the wrong bytes. */
		if (r->off) {
			r->cb_err = EIO;
			return 0;
		}
		n = r->want - r->got;
	}
	if (r->got + n > r->cap) {
		size_t cap = r->cap ? r->cap : 64 * 1024;
		curl_off_t cl = -1;
		/* the size the answer says, when sane: a header is no reason
		 * to ask for memory, the bytes that come are (ENOMEM means
		 * out of memory, never a bad answer) */
		curl_easy_getinfo(e, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl);
		if (cl > 0 && (uint64_t)cl > cap && cl <= S3_PREALLOC_MAX)
			cap = (size_t)cl;
		while (cap < r->got + n)
			cap *= 2;
		void *nb = r->buf ? realloc(r->buf, cap) : bigbuf_alloc(cap);
		if (!nb) {
			r->cb_err = ENOMEM;
			return 0;
		}
		r->buf = nb;
		r->cap = cap;
	}
	if (n)
		memcpy(r->buf + r->got, data, n);
	r->got += n;
	return total;
}

/* The value of the header line data[0..n) into out (cap bytes) if the
 * line is header `name` (with its ':') and the value fits. */
static void header_value(const char *data, size_t n, const char *name,
			 char *out, size_t cap)
{
	size_t nl = strlen(name);

	if (n <= nl || strncasecmp(data, name, nl))
		return;
	const char *v = data + nl;
	size_t vl = n - nl;
	while (vl && (*v == ' ' || *v == '\t'))
		v++, vl--;
	while (vl &&
	       (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' '))
		vl--;
	if (vl < cap) {
		memcpy(out, v, vl);
		out[vl] = '\0';
	}
}

/* x-amz-bucket-region: where a redirected bucket lives; Content-Range:
 * what a 206 holds. */
static size_t on_header(char *data, size_t size, size_t nmemb, void *arg)
{
	struct s3_req *r = arg;
	size_t n = size * nmemb;

	header_value(data, n, "x-amz-bucket-region:", r->region_hdr,
		     sizeof(r->region_hdr));
	header_value(data, n, "content-range:", r->crange, sizeof(r->crange));
	return n;
}

/* ---- running one attempt ---- */

/* Sign r and run it on the thread's handle: 0 with r->status set, else
 * what went wrong as curl said it (*cres) or our errno. */
static int req_perform(const struct s3_store *s, struct s3_req *r,
		       CURLcode *cres)
{
	char url[sizeof(r->path) + sizeof(r->query) + S3_MAX_HOST + 80];
	struct curl_slist *hdrs = NULL, *ct = NULL;
	CURL *e;
	int err;

	*cres = CURLE_OK;
	r->status = 0;
	r->got = r->recv = 0;
	r->body_off = 0;
	r->err_len = 0;
	r->cb_err = 0;
	r->timed_out = 0;
	r->curl_err[0] = '\0';
	r->region_hdr[0] = r->crange[0] = '\0';
	if ((err = req_sign(s, r, &hdrs)))
		return err;
	if (!(e = s3_easy())) {
		curl_slist_free_all(hdrs);
		return ENOMEM;
	}
	snprintf(url, sizeof(url), "%s%s%s%s", s->base_url, r->path,
		 r->query[0] ? "?" : "", r->query);
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, r->curl_err);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, s->timeout_ms);
	curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(e, CURLOPT_XFERINFODATA, r);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, r);
	/* the path is sent as signed: no "/./" or "/../" squashing */
	curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	if (s->ca_bundle)
		curl_easy_setopt(e, CURLOPT_CAINFO, s->ca_bundle);
	if (s->insecure) {
		curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	if (s->connect_to && (ct = curl_slist_append(NULL, s->connect_to)))
		curl_easy_setopt(e, CURLOPT_CONNECT_TO, ct);
	if (!strcmp(r->method, "PUT")) {
		curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(e, CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(e, CURLOPT_READDATA, r);
		curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE,
				 (curl_off_t)r->body_len);
	} else if (r->head) {
		curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
	} else if (strcmp(r->method, "GET")) {
		curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, r->method);
	}
	r->timeout_ms = s->timeout_ms;
	r->start_ms = now_ms();
	*cres = curl_easy_perform(e);
	if (!r->status)
		curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &r->status);
	/* the lists must outlive the transfer, not the handle: unhook them */
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, NULL);
	curl_easy_setopt(e, CURLOPT_CONNECT_TO, NULL);
	curl_slist_free_all(hdrs);
	curl_slist_free_all(ct);
	return 0;
}

/* ---- what an answer means ---- */

/* The S3 error of an answer: <Code>, <Message>, <Region>. */
struct s3_error {
	char code[64], message[256], region[64];
};

static void xml_text(xmlNode *n, char *out, size_t cap)
{
	xmlChar *t = xmlNodeGetContent(n);

	snprintf(out, cap, "%s", t ? (const char *)t : "");
	xmlFree(t);
}

static xmlDoc *xml_parse(const char *body, size_t len)
{
	if (!body || !len || len > INT32_MAX)
		return NULL;
	return xmlReadMemory(body, (int)len, "s3.xml", NULL,
			     XML_PARSE_NONET | XML_PARSE_NOERROR |
				 XML_PARSE_NOWARNING);
}

static void parse_error(const struct s3_req *r, struct s3_error *x)
{
	xmlDoc *d = xml_parse(r->err_body, r->err_len);
	xmlNode *root = d ? xmlDocGetRootElement(d) : NULL;

	memset(x, 0, sizeof(*x));
	for (xmlNode *n = root ? root->children : NULL; n; n = n->next) {
		if (n->type != XML_ELEMENT_NODE)
			continue;
		const char *nm = (const char *)n->name;
		if (!strcmp(nm, "Code"))
			xml_text(n, x->code, sizeof(x->code));
		else if (!strcmp(nm, "Message"))
			xml_text(n, x->message, sizeof(x->message));
		else if (!strcmp(nm, "Region"))
			xml_text(n, x->region, sizeof(x->region));
	}
	if (d)
		xmlFreeDoc(d);
	if (!x->region[0] && r->region_hdr[0])
		snprintf(x->region, sizeof(x->region), "%s", r->region_hdr);
}

/* The region a "wrong region" message names as expected, if it does:
 * AWS says "...the region 'us-east-1' is wrong; expecting 'eu-west-1'". */
static void region_from_message(struct s3_error *x)
{
	const char *p = strstr(x->message, "expecting '");

	if (x->region[0] || !p)
		return;
	p += 11;
	size_t n = strcspn(p, "'");
	if (n < sizeof(x->region)) {
		memcpy(x->region, p, n);
		x->region[n] = '\0';
	}
}

static int has_word(const char *s, const char *w)
{
	return strcasestr(s, w) != NULL;
}

/* The error of an answer with HTTP status r->status (not 2xx), from the
 * status and the S3 <Code>; *wrong_region when it is about the region. */
static int s3_map_http(const struct s3_req *r, const struct s3_error *x,
		       int *wrong_region)
{
	long st = r->status;
	const char *c = x->code;

	*wrong_region = 0;
	if (st == 404)
		return !strcmp(c, "NoSuchBucket") ? OBJSTORE_ENOBUCKET : ENOENT;
	if (st == 301 || st == 307 || !strcmp(c, "PermanentRedirect")) {
		*wrong_region = 1; /* the bucket is elsewhere */
		return OBJSTORE_EAUTH;
	}
	if (st == 403) /* AccessDenied, SignatureDoesNotMatch, ... */
		return OBJSTORE_EAUTH;
	if (st == 429 || st >= 500) /* SlowDown, InternalError, ... */
		return OBJSTORE_ESERVER;
	if (st == 400) {
		if (!strcmp(c, "AuthorizationHeaderMalformed")) {
			*wrong_region = has_word(x->message, "region");
			return OBJSTORE_EAUTH;
		}
		if (!strcmp(c, "InvalidRequest") &&
		    (has_word(x->message, "authoriz") ||
		     has_word(x->message, "signature") ||
		     has_word(x->message, "AWS4")))
			return OBJSTORE_EAUTH;
		if (!strcmp(c, "InvalidAccessKeyId") ||
		    !strcmp(c, "ExpiredToken") || !strcmp(c, "InvalidToken"))
			return OBJSTORE_EAUTH;
		if (!strcmp(c, "RequestTimeout") ||
		    !strcmp(c, "IncompleteBody"))
			return OBJSTORE_EUNREACH;
		if (!strcmp(c, "KeyTooLongError"))
			return ENAMETOOLONG;
		if (!strcmp(c, "EntityTooLarge"))
			return EFBIG;
	}
	return EIO;
}

/* The error of a transfer curl did not complete. */
static int s3_map_curl(CURLcode c, const struct s3_req *r)
{
	switch (c) {
	case CURLE_COULDNT_RESOLVE_HOST:
		return OBJSTORE_EDNS;
	case CURLE_COULDNT_CONNECT:
		return OBJSTORE_EREFUSED;
	case CURLE_OPERATION_TIMEDOUT:
		return OBJSTORE_ETIMEDOUT;
	case CURLE_ABORTED_BY_CALLBACK:
		return r->timed_out ? OBJSTORE_ETIMEDOUT : EIO;
	case CURLE_WRITE_ERROR:
	case CURLE_READ_ERROR:
		return r->cb_err ? r->cb_err : EIO;
	case CURLE_OUT_OF_MEMORY:
		/* also an answer past curl's limits (a header line over
		 * 100 KB: curl < 8.6 has no CURLE_TOO_LARGE), which is no
		 * shortage of memory here */
		return EIO;
	case CURLE_SSL_CONNECT_ERROR:
		/* OpenSSL read an HTTP answer as a TLS record */
		if (strstr(r->curl_err, "wrong version number") ||
		    strstr(r->curl_err, "packet length too long"))
			return OBJSTORE_EPLAIN;
		return OBJSTORE_ETLS;
	case CURLE_PEER_FAILED_VERIFICATION: /* = CURLE_SSL_CACERT */
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_ISSUER_ERROR:
	case CURLE_SSL_CRL_BADFILE:
		return OBJSTORE_ECERT;
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CIPHER:
	case CURLE_SSL_SHUTDOWN_FAILED:
	case CURLE_SSL_ENGINE_INITFAILED:
	case CURLE_SSL_ENGINE_NOTFOUND:
	case CURLE_SSL_ENGINE_SETFAILED:
	case CURLE_USE_SSL_FAILED:
		return OBJSTORE_ETLS;
	default: /* SEND_ERROR, RECV_ERROR, GOT_NOTHING, PARTIAL_FILE, ... */
		return OBJSTORE_EUNREACH;
	}
}

/* A warning for err, at most one a store and cause per S3_LOG_EVERY_S. */
static int s3_log_due(struct s3_store *s, int err)
{
	time_t now = time(NULL);
	int due;

	pthread_mutex_lock(&s->log_lock);
	due = err != s->log_err || now - s->log_at >= S3_LOG_EVERY_S;
	if (due) {
		s->log_err = err;
		s->log_at = now;
	}
	pthread_mutex_unlock(&s->log_lock);
	return due;
}

/*
 * The error of the attempt just made (res, r->status), logged with its
 * detail: a transient one at debug level (the wrappers log once per
 * outage), any other but a missing object as a warning, rate-limited, so
 * the tools show the cause above their one-line error.
 */
static int s3_result(struct s3_store *s, struct s3_req *r, CURLcode res,
		     const char *what, const char *key)
{
	struct s3_error x;
	int err, wrong_region = 0;
	char detail[600];

	memset(&x, 0, sizeof(x));
	if (res != CURLE_OK) {
		err = s3_map_curl(res, r);
		if (r->timed_out)
			snprintf(
			    detail, sizeof(detail), "no answer within %.1f s",
			    s3_budget_ms(s->timeout_ms, r->want > r->body_len
							    ? r->want
							    : r->body_len) /
				1000.0);
		else
			snprintf(detail, sizeof(detail), "%s%s",
				 r->curl_err[0] ? r->curl_err
						: curl_easy_strerror(res),
				 res == CURLE_OUT_OF_MEMORY
				     ? " (or an answer past curl's limits, "
				       "such as a header line over 100 KB)"
				     : "");
	} else if (r->status >= 200 && r->status <= 299) {
		return 0;
	} else {
		parse_error(r, &x);
		region_from_message(&x);
		err = s3_map_http(r, &x, &wrong_region);
		snprintf(detail, sizeof(detail), "HTTP %ld%s%s%s%s", r->status,
			 x.code[0] ? " " : "", x.code, x.message[0] ? ": " : "",
			 x.message);
		if (wrong_region) {
			size_t n = strlen(detail);
			if (x.region[0])
				snprintf(detail + n, sizeof(detail) - n,
					 " (the bucket is in region '%s', not "
					 "'%s': add ?region=%s to the URL)",
					 x.region, s->region, x.region);
			else
				snprintf(detail + n, sizeof(detail) - n,
					 " (signed for region '%s': is the "
					 "bucket in another region? "
					 "?region=R in the URL)",
					 s->region);
		}
	}
	if (err == ENOENT || (err == EIO && r->status == 416))
		return err; /* no object, or a range past its end: no news */
	/* a TLS failure is transient too, but what OpenSSL said is the
	 * cause a user needs to see: a warning */
	if (objstore_transient(err) && err != OBJSTORE_ETLS)
		log_debug("s3 %s of '%s' in bucket '%s' at '%s' failed: %s",
			  what, key, s->bucket, s->host, detail);
	else if (s3_log_due(s, err))
		log_cause("s3 %s of '%s' in bucket '%s' at '%s' failed: %s",
			  what, key, s->bucket, s->host, detail);
	return err;
}

/* ---- ops ---- */

/* prefix + key into out (S3_MAX_KEY + 1 bytes). */
static int full_key(const struct s3_store *s, const char *key, char *out)
{
	size_t klen = strlen(key);

	if (s->prefix_len + klen > S3_MAX_KEY)
		return ENAMETOOLONG;
	memcpy(out, s->prefix, s->prefix_len);
	memcpy(out + s->prefix_len, key, klen + 1);
	return 0;
}

/* One attempt of an object request (the wrappers retry). */
static int s3_object(struct s3_store *s, struct s3_req *r, const char *method,
		     const char *key, const char *what)
{
	char fk[S3_MAX_KEY + 1];
	CURLcode res;
	int err = full_key(s, key, fk);

	if (err || (err = req_init(s, r, method, fk, "")))
		return err;
	if (r->range[0])
		req_header(r, "Range", r->range);
	if (r->body || !strcmp(method, "PUT"))
		req_body(s, r, r->body ? (const void *)r->body : "",
			 r->body_len);
	if ((err = req_perform(s, r, &res)))
		return err;
	if (res == CURLE_WRITE_ERROR && r->cb_err == EIO)
		log_warn("s3 get of '%s' at '%s': the server ignored the byte "
			 "range",
			 fk, s->host);
	return s3_result(s, r, res, what, fk);
}

/* "bytes FIRST-LAST/TOTAL" (TOTAL "*": UINT64_MAX), else EIO. */
static int parse_crange(const char *v, uint64_t *first, uint64_t *last,
			uint64_t *total)
{
	char *e;

	if (strncasecmp(v, "bytes ", 6) || v[6] < '0' || v[6] > '9')
		return EIO;
	*first = strtoull(v + 6, &e, 10);
	if (*e != '-' || e[1] < '0' || e[1] > '9')
		return EIO;
	*last = strtoull(e + 1, &e, 10);
	if (*e != '/' || *last < *first)
		return EIO;
	if (!strcmp(e + 1, "*")) {
		*total = UINT64_MAX;
		return 0;
	}
	if (e[1] < '0' || e[1] > '9')
		return EIO;
	*total = strtoull(e + 1, &e, 10);
	return *e || *last >= *total ? EIO : 0;
}

/*
 * A 2xx answer to a get of [off, off + want) (want 0: to the end) holds
 * what it says and what was asked, or is no success: its whole body
 * (Content-Length), and for a 206 the range asked from its first byte as
 * far as the object (Content-Range's total) has it. A body cut short is
 * transient (OBJSTORE_EUNREACH, as curl's own partial transfers); a 206
 * with less than asked while the object has more is the server's
 * (OBJSTORE_ESERVER: HTTP lets a server send less, so asking again is
 * the way on); an answer that contradicts itself or the request is EIO.
 */
static int get_check(struct s3_store *s, const struct s3_req *r,
		     const char *key)
{
	curl_off_t cl = -1;
	uint64_t a, b, total, need;
	const char *why = NULL;
	int err = EIO;

	curl_easy_getinfo(pthread_getspecific(s3_easy_key),
			  CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl);
	if (r->status != 200 && r->status != 206) {
		why = "an answer without the object (not 200 or 206)";
	} else if (cl >= 0 && r->recv != (uint64_t)cl) {
		why = "a body of another length than its Content-Length";
		err = r->recv < (uint64_t)cl ? OBJSTORE_EUNREACH : EIO;
	} else if (r->status == 206) {
		need = r->want ? r->off + r->want - 1 : UINT64_MAX;
		if (parse_crange(r->crange, &a, &b, &total) || a != r->off ||
		    b - a + 1 != r->recv) {
			why = "a 206 whose Content-Range is not its body from "
			      "the offset asked";
		} else if (b < (need < total ? need : total - 1) &&
			   (r->want || total != UINT64_MAX)) {
			why = "a part of the range asked";
			err = OBJSTORE_ESERVER;
		}
	}
	if (!why)
		return 0;
	if (objstore_transient(err))
		log_debug("s3 get of '%s' at '%s': %s (HTTP %ld, %llu bytes, "
			  "Content-Range '%s')",
			  key, s->host, why, r->status,
			  (unsigned long long)r->recv, r->crange);
	else if (s3_log_due(s, err))
		log_cause("s3 get of '%s' at '%s': the server answered %s "
			  "(HTTP %ld, %llu bytes, Content-Range '%s')",
			  key, s->host, why, r->status,
			  (unsigned long long)r->recv, r->crange);
	return err;
}

static int s3_get(struct objstore *os, const char *key, uint64_t off,
		  size_t len, void **data, size_t *got)
{
	struct s3_store *s = (struct s3_store *)os;
	struct s3_req *r = calloc(1, sizeof(*r));
	int err;

	if (!r)
		return ENOMEM;
	r->want = len;
	r->off = off;
	if (len)
		snprintf(r->range, sizeof(r->range), "bytes=%llu-%llu",
			 (unsigned long long)off,
			 (unsigned long long)(off + len - 1));
	else if (off)
		snprintf(r->range, sizeof(r->range), "bytes=%llu-",
			 (unsigned long long)off);
	if (len) {
		if (!(r->buf = bigbuf_alloc(len))) {
			free(r);
			return ENOMEM;
		}
		r->cap = len;
	}
	err = s3_object(s, r, "GET", key, "get");
	if (err == EIO && r->status == 416) {
		/* the object exists but off is at or past its end */
		err = 0;
		r->got = 0;
	} else if (!err && r->status == 200 && off) {
		err = EIO; /* the whole object, not our range (no body) */
		log_warn("s3 get of '%s' at '%s': the server ignored the byte "
			 "range",
			 key, s->host);
	} else if (!err) {
		err = get_check(s, r, key);
	}
	if (!err && !r->buf && !(r->buf = malloc(1)))
		err = ENOMEM; /* callers always get a buffer to free */
	if (err) {
		free(r->buf);
	} else {
		*data = r->buf;
		*got = r->got;
	}
	free(r->err_body);
	free(r);
	return err;
}

static int s3_put(struct objstore *os, const char *key, const void *data,
		  size_t len)
{
	struct s3_req *r = calloc(1, sizeof(*r));
	int err;

	if (!r)
		return ENOMEM;
	r->body = data;
	r->body_len = len;
	err = s3_object((struct s3_store *)os, r, "PUT", key, "put");
	free(r->err_body);
	free(r);
	return err;
}

static int s3_del(struct objstore *os, const char *key)
{
	struct s3_req *r = calloc(1, sizeof(*r));
	int err;

	if (!r)
		return ENOMEM;
	err = s3_object((struct s3_store *)os, r, "DELETE", key, "delete");
	free(r->err_body);
	free(r);
	return err == ENOENT ? 0 : err;
}

static int s3_head(struct objstore *os, const char *key, uint64_t *size)
{
	struct s3_req *r = calloc(1, sizeof(*r));
	int err;

	if (!r)
		return ENOMEM;
	r->head = 1;
	err = s3_object((struct s3_store *)os, r, "HEAD", key, "head");
	if (!err) {
		curl_off_t cl = -1;
		curl_easy_getinfo(pthread_getspecific(s3_easy_key),
				  CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl);
		if (cl < 0) { /* no size is no size 0 */
			err = EIO;
			log_warn("s3 head of '%s' at '%s': the answer has no "
				 "Content-Length",
				 key, ((struct s3_store *)os)->host);
		}
		*size = cl > 0 ? (uint64_t)cl : 0;
	}
	free(r->err_body);
	free(r);
	return err;
}

/* ---- list ---- */

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

/* "2009-10-12T17:50:30.000Z" as unix seconds, 0 when not that. */
static int64_t iso_time(const char *t)
{
	struct tm tm;

	memset(&tm, 0, sizeof(tm));
	if (sscanf(t, "%4d-%2d-%2dT%2d:%2d:%2d", &tm.tm_year, &tm.tm_mon,
		   &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec) != 6)
		return 0;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	time_t v = timegm(&tm);
	return v > 0 ? (int64_t)v : 0;
}

/*
 * Hand each key of a ListBucketResult page to fn; *next gets the
 * NextContinuationToken of a truncated page (malloc'd), else NULL. The
 * caller's fn runs after the request is over, so it may itself use the
 * store, and a retried page is never delivered twice.
 */
static int page_deliver(const struct s3_store *s, const struct s3_req *r,
			objstore_list_fn fn, void *arg, char **next)
{
	xmlDoc *d = xml_parse((const char *)r->buf, r->got);
	xmlNode *root = d ? xmlDocGetRootElement(d) : NULL;
	char key[S3_MAX_KEY + 1], num[32], when[64], tok[4096];
	int truncated = 0, err = 0;

	*next = NULL;
	tok[0] = '\0';
	if (!root || strcmp((const char *)root->name, "ListBucketResult")) {
		if (d)
			xmlFreeDoc(d);
		log_warn("s3 list in bucket '%s' at '%s': the answer is not a "
			 "ListBucketResult",
			 s->bucket, s->host);
		return EIO;
	}
	for (xmlNode *n = root->children; n && !err; n = n->next) {
		if (n->type != XML_ELEMENT_NODE)
			continue;
		const char *nm = (const char *)n->name;
		if (!strcmp(nm, "IsTruncated")) {
			xml_text(n, num, sizeof(num));
			truncated = !strcmp(num, "true");
		} else if (!strcmp(nm, "NextContinuationToken")) {
			xml_text(n, tok, sizeof(tok));
		} else if (!strcmp(nm, "Contents")) {
			key[0] = num[0] = when[0] = '\0';
			for (xmlNode *c = n->children; c; c = c->next) {
				if (c->type != XML_ELEMENT_NODE)
					continue;
				const char *cn = (const char *)c->name;
				if (!strcmp(cn, "Key"))
					xml_text(c, key, sizeof(key));
				else if (!strcmp(cn, "Size"))
					xml_text(c, num, sizeof(num));
				else if (!strcmp(cn, "LastModified"))
					xml_text(c, when, sizeof(when));
			}
			if (strncmp(key, s->prefix, s->prefix_len))
				continue; /* cannot happen with a sane server */
			err = fn(arg, key + s->prefix_len,
				 strtoull(num, NULL, 10), iso_time(when));
		}
	}
	xmlFreeDoc(d);
	if (!err && truncated) {
		if (!tok[0]) {
			log_warn("s3 list in bucket '%s' at '%s': a truncated "
				 "page without a NextContinuationToken",
				 s->bucket, s->host);
			return EIO;
		}
		if (!(*next = strdup(tok)))
			return ENOMEM;
	}
	return err;
}

/* The canonical ListObjectsV2 query: names sorted, values encoded. */
static int list_query(const char *prefix, const char *token, char *out,
		      size_t cap)
{
	char ep[3 * S3_MAX_KEY + 1], et[3 * 4096 + 1];
	size_t n;
	int w;

	n = s3sign_uri_encode(prefix, strlen(prefix), 0, ep, sizeof(ep));
	if (n >= sizeof(ep))
		return ENAMETOOLONG;
	et[0] = '\0';
	if (token) {
		n = s3sign_uri_encode(token, strlen(token), 0, et, sizeof(et));
		if (n >= sizeof(et))
			return ENAMETOOLONG;
	}
	w = snprintf(out, cap, "%s%s%slist-type=2&max-keys=%s&prefix=%s",
		     token ? "continuation-token=" : "", et, token ? "&" : "",
		     S3_LIST_PAGE, ep);
	return w < 0 || (size_t)w >= cap ? ENAMETOOLONG : 0;
}

static int s3_list(struct objstore *os, const char *prefix, objstore_list_fn fn,
		   void *arg)
{
	struct s3_store *s = (struct s3_store *)os;
	char fp[S3_MAX_KEY + 1], *token = NULL;
	char *q = malloc(sizeof(((struct s3_req *)0)->query));
	struct s3_req *r = calloc(1, sizeof(*r));
	CURLcode res;
	int err = full_key(s, prefix, fp);

	if (!q || !r) {
		err = ENOMEM;
		goto out;
	}
	while (!err) {
		if ((err = list_query(fp, token, q, sizeof(r->query))))
			break;
		for (int attempt = 0, timeouts = 0;; attempt++) {
			if ((err = req_init(s, r, "GET", "", q)) ||
			    (err = req_perform(s, r, &res)))
				break;
			err = s3_result(s, r, res, "list", fp);
			if (err == OBJSTORE_ETIMEDOUT &&
			    ++timeouts >= S3_TIMEOUT_TRIES)
				break;
			if (!objstore_transient(err) || attempt + 1 >= S3_TRIES)
				break;
			backoff(attempt);
		}
		if (err == ENOENT)
			err = OBJSTORE_ENOBUCKET; /* no key was named */
		if (err) {
			if (objstore_transient(err))
				log_warn("s3 list of '%s' in bucket '%s' at "
					 "'%s' gave up: %s",
					 fp, s->bucket, s->host,
					 gr_strerror(err));
			break;
		}
		free(token);
		err = page_deliver(s, r, fn, arg, &token);
		if (!token)
			break;
	}
out:
	free(token);
	if (r) {
		free(r->buf);
		free(r->err_body);
	}
	free(r);
	free(q);
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
	free(s->authority);
	free(s->base_url);
	free(s->ca_bundle);
	free(s->connect_to);
	wipe_free(s->access_key);
	wipe_free(s->secret_key);
	wipe_free(s->session_token);
	pthread_mutex_destroy(&s->log_lock);
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

/* Pick the credentials: explicit, then GRANARY_S3_*, then AWS_* (each
 * with its session token, if any). */
static int pick_creds(const struct objstore_creds *creds,
		      struct objstore_creds *out)
{
	if (creds && creds->access_key && *creds->access_key &&
	    creds->secret_key && *creds->secret_key) {
		*out = *creds;
		return 0;
	}
	return objstore_env_creds(out) ? OBJSTORE_ENOCREDS : 0;
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

/* Apply one NAME=VALUE option of the URL's query; OBJSTORE_EURL with a
 * log line naming it when it is unknown or its value is. */
static int apply_option(struct s3_store *s, const char *o, size_t n,
			int *have_region)
{
	const char *eq = memchr(o, '=', n);
	size_t nl = eq ? (size_t)(eq - o) : n;
	const char *v = eq ? eq + 1 : "";
	size_t vl = eq ? n - nl - 1 : 0;

#define IS(name, s, l) ((l) == strlen(name) && !memcmp((s), (name), (l)))
	if (IS("region", o, nl) && s3url_region_valid(v, vl)) {
		memcpy(s->region, v, vl);
		s->region[vl] = '\0';
		*have_region = 1;
	} else if (IS("sig", o, nl) && (IS("v4", v, vl) || IS("v2", v, vl))) {
		s->sig = v[1] == '4' ? SIG_V4 : SIG_V2;
	} else if (IS("style", o, nl) &&
		   (IS("path", v, vl) || IS("virtual", v, vl))) {
		s->virtual_host = v[0] == 'v';
	} else {
		int known = IS("region", o, nl) || IS("sig", o, nl) ||
			    IS("style", o, nl);
		log_msg(LOG_ERR | LOG_SHOW,
			"s3 URL option '%.*s': %s (known: region=R, "
			"sig=v4|v2, style=path|virtual)",
			(int)n, o, known ? "bad value" : "unknown option");
		return OBJSTORE_EURL;
	}
#undef IS
	return 0;
}

static int parse_options(struct s3_store *s, const char *q, const char *host,
			 size_t hlen)
{
	int have_region = 0, err;
	const char *env;

	s->sig = SIG_V4;
	while (q && *q) {
		size_t n = strcspn(q, "&");
		if (n == 0)
			return OBJSTORE_EURL;
		if ((err = apply_option(s, q, n, &have_region)))
			return err;
		q += n;
		if (*q == '&' && !*++q)
			return OBJSTORE_EURL; /* a trailing '&' */
	}
	if (have_region || s3url_region_of_host(host, hlen, s->region))
		return 0;
	env = getenv("GRANARY_S3_REGION");
	if (env && *env && s3url_region_valid(env, strlen(env))) {
		strcpy(s->region, env);
		return 0;
	}
	if (env && *env)
		log_warn("ignoring GRANARY_S3_REGION '%s': not a region name",
			 env);
	strcpy(s->region, "us-east-1");
	return 0;
}

/* The node's own TLS and connection settings (GRANARY_S3_CA_BUNDLE,
 * GRANARY_S3_INSECURE_TLS, GRANARY_S3_CONNECT_TO). */
static int node_settings(struct s3_store *s, const char *host, size_t hlen)
{
	const char *ca = getenv("GRANARY_S3_CA_BUNDLE");
	const char *ins = getenv("GRANARY_S3_INSECURE_TLS");
	const char *ct = getenv("GRANARY_S3_CONNECT_TO");

	if (ca && *ca) {
		if (access(ca, R_OK)) {
			int e = errno;
			log_msg(LOG_ERR | LOG_SHOW,
				"GRANARY_S3_CA_BUNDLE '%s': %s", ca,
				strerror(e));
			return e;
		}
		if (!(s->ca_bundle = strdup(ca)))
			return ENOMEM;
	}
	if (ins && *ins && strcmp(ins, "0")) {
		if (strcmp(ins, "1")) {
			log_msg(LOG_ERR | LOG_SHOW,
				"GRANARY_S3_INSECURE_TLS '%s': 1 or 0", ins);
			return EINVAL;
		}
		s->insecure = 1;
		/* once a process: a tool opens its store several times */
		static int warned;
		if (s->tls &&
		    !__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
			log_cause("TLS certificate checks are OFF for %.*s: "
				  "anyone on the path can read and change your "
				  "data (GRANARY_S3_INSECURE_TLS=1)",
				  (int)hlen, host);
	}
	if (ct && *ct) {
		size_t hl;
		if (!s3url_authority_valid(ct, strlen(ct), &hl) || !ct[hl]) {
			log_msg(LOG_ERR | LOG_SHOW,
				"GRANARY_S3_CONNECT_TO '%s': not HOST:PORT",
				ct);
			return EINVAL;
		}
		/* any host and port of ours goes to HOST:PORT */
		if (!(s->connect_to = malloc(strlen(ct) + 3)))
			return ENOMEM;
		sprintf(s->connect_to, "::%s", ct);
	}
	return 0;
}

/* The prefix of a URL, checked (no empty, "." or ".." component), with a
 * '/' added, into s. */
static int set_prefix(struct s3_store *s, const char *pfx, size_t plen)
{
	while (plen > 0 && pfx[plen - 1] == '/')
		plen--;
	for (size_t i = 0; i < plen;) {
		size_t j = i;
		while (j < plen && pfx[j] != '/')
			j++;
		if (j == i || (j - i == 1 && pfx[i] == '.') ||
		    (j - i == 2 && pfx[i] == '.' && pfx[i + 1] == '.'))
			return OBJSTORE_EURL;
		i = j + 1;
	}
	if (!(s->prefix = malloc(plen + 2)))
		return ENOMEM;
	memcpy(s->prefix, pfx, plen);
	if (plen)
		s->prefix[plen++] = '/';
	s->prefix[plen] = '\0';
	s->prefix_len = plen;
	return 0;
}

int objstore_s3_open(const char *url, const struct objstore_creds *creds,
		     struct objstore **out)
{
	const char *rest, *q;
	struct objstore_creds c = {0};
	struct s3_store *s;
	size_t hlen, blen, len;
	int tls, err;

	if (!strncmp(url, "s3://", 5)) {
		tls = 1;
		rest = url + 5;
	} else if (!strncmp(url, "s3+http://", 10)) {
		tls = 0;
		rest = url + 10;
	} else {
		return OBJSTORE_EURL;
	}
	if (strpbrk(rest, "#% \t\r\n"))
		return OBJSTORE_EURL; /* no fragment or escapes */
	len = strcspn(rest, "?");
	q = rest[len] ? rest + len + 1 : NULL;
	if (q && !*q)
		return OBJSTORE_EURL; /* a '?' and nothing */

	const char *slash = memchr(rest, '/', len);
	if (!slash ||
	    !s3url_authority_valid(rest, (size_t)(slash - rest), &hlen))
		return OBJSTORE_EURL;
	const char *bucket = slash + 1;
	const char *bend = memchr(bucket, '/', len - (size_t)(bucket - rest));
	blen = bend ? (size_t)(bend - bucket) : len - (size_t)(bucket - rest);
	if (blen == 0)
		return OBJSTORE_EURL; /* missing bucket name */

	if (!(s = calloc(1, sizeof(*s))))
		return ENOMEM;
	s->base.ops = &s3_ops;
	s->tls = tls;
	pthread_mutex_init(&s->log_lock, NULL);
	s->host = strndup(rest, (size_t)(slash - rest));
	s->bucket = strndup(bucket, blen);
	if (!s->host || !s->bucket) {
		err = ENOMEM;
		goto close_store;
	}
	if ((err = set_prefix(s, bend ? bend + 1 : "",
			      bend ? len - (size_t)(bend + 1 - rest) : 0)) ||
	    (err = parse_options(s, q, rest, hlen)))
		goto close_store;
	if (!s3url_bucket_valid(s->bucket, s->virtual_host)) {
		err = OBJSTORE_EURL;
		goto close_store;
	}
	if ((err = pick_creds(creds, &c)))
		goto close_store;
	s->access_key = strdup(c.access_key);
	s->secret_key = strdup(c.secret_key);
	if (c.session_token && *c.session_token &&
	    !(s->session_token = strdup(c.session_token))) {
		err = ENOMEM;
		goto close_store;
	}
	if (!s->access_key || !s->secret_key) {
		err = ENOMEM;
		goto close_store;
	}
	pthread_once(&s3_once, s3_init);
	if ((err = s3_init_err)) {
		log_err("cannot initialise libcurl");
		goto close_store;
	}
	if ((err = node_settings(s, rest, hlen)))
		goto close_store;
	s->timeout_ms = s3_timeout_from_env();
	if (asprintf(&s->authority, "%s%s%s", s->virtual_host ? s->bucket : "",
		     s->virtual_host ? "." : "", s->host) < 0 ||
	    asprintf(&s->base_url, "%s://%s", tls ? "https" : "http",
		     s->authority) < 0) {
		s->authority = s->base_url = NULL;
		err = ENOMEM;
		goto close_store;
	}
	*out = &s->base;
	return 0;

close_store:
	s3_close(&s->base);
	return err;
}
