/*
 * peer.c - the transport between the members of a cache group (peer.h):
 * the server on libmicrohttpd (a pool of threads polling a bounded set of
 * connections, file bodies sent with sendfile), the client on libcurl
 * (each thread keeps one easy handle, so one connection, per member it
 * asks), every request signed with HMAC-SHA256 under a key derived from
 * the group's secret and checked before the handler sees it.
 */
#include "fs/store/peer.h"
#include "fs/store/s3sign.h"
#include "lib/bigbuf.h"
#include "lib/errors.h"
#include "lib/fsutil.h"
#include "lib/log.h"
#include "lib/workq.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define PEER_INFO	  "granary peer v1" /* HKDF's info: the key's use */
#define PEER_KLEN	  32
#define PEER_SCHEME	  "GRANARY-PEER "
#define PEER_KEY_MAX	  1024 /* bytes of a key, decoded (objstore.h's) */
#define PEER_PATH_MAX	  (sizeof("/v1/warm/") + 3 * PEER_KEY_MAX)
#define PEER_ADDR_MAX	  96
#define PEER_SIGN_MAX	  128 /* "node=<16>,ts=<20>,sig=<64>" and its NUL */
#define PEER_SIG_HEX	  64
#define PEER_BYTES_PER_MS (100 * 1024) /* the deadline's allowance */
/* A get to the end of an object is given the deadline of this many
 * bytes (its size is not known when the request starts): the largest
 * objects granary writes are blocks and packs of 4 MiB by default. */
#define PEER_WHOLE_BYTES (64ull << 20)
/* A warm request waits for the member's fetch from the store. */
#define PEER_WARM_MS 30000
/*
 * A get's deadline grows with the slowest recent answers (a member that
 * fetches a block from a slow or busy store for the asker answers in the
 * store's time, which the fixed allowance does not cover: the asker would
 * give up, read the block from the store too and mark the member down, and
 * the store would see the block twice or more): at least PEER_SLOW_MULT
 * times the slowest recent answer, at most PEER_DEADLINE_MAX_MS. The
 * slowest recent answer decays by 1/8 at each answer, so a few fast
 * answers bring the deadline back down. A get sent and not answered in
 * time counts as an answer as slow as its deadline: when the first asks
 * of a cold epoch all find the store slower than the fixed allowance, the
 * next ones wait longer instead of all failing.
 */
#define PEER_SLOW_MULT	     3
#define PEER_DEADLINE_MAX_MS 10000
#define PEER_TLS_SLOTS	     16 /* members a thread keeps a connection to */
#define PEER_RECV_BUF	     (128L * 1024) /* curl's receive buffer, a handle */
#define PEER_DRAIN_MS	     2000 /* stop: how long answers under way may take */
#define PEER_LOG_EVERY_S     60	  /* one refusal warning a server per this */

/* ---- signatures ------------------------------------------------------ */

/* k = HKDF-SHA256(secret, no salt, info PEER_INFO) */
static int peer_derive(const unsigned char *secret, unsigned char k[PEER_KLEN])
{
	EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, NULL);
	size_t n = PEER_KLEN;
	int ok;

	ok = ctx && EVP_PKEY_derive_init(ctx) > 0 &&
	     EVP_PKEY_CTX_set_hkdf_md(ctx, EVP_sha256()) > 0 &&
	     EVP_PKEY_CTX_set1_hkdf_key(ctx, secret, PEER_SECRET_LEN) > 0 &&
	     EVP_PKEY_CTX_add1_hkdf_info(ctx, (const unsigned char *)PEER_INFO,
					 sizeof(PEER_INFO) - 1) > 0 &&
	     EVP_PKEY_derive(ctx, k, &n) > 0 && n == PEER_KLEN;
	EVP_PKEY_CTX_free(ctx);
	return ok ? 0 : ENOMEM;
}

/* The authorization value under the derived key k, into buf (cap >=
 * PEER_SIGN_MAX); "" when the message does not fit (a path too long). */
static void peer_sign_k(const unsigned char *k, uint64_t node, int64_t ts,
			const char *method, const char *path, const char *range,
			char *buf, size_t cap)
{
	static const char hexd[] = "0123456789abcdef";
	char msg[PEER_PATH_MAX + 160], sig[PEER_SIG_HEX + 1];
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned mdlen = 0;
	int n;

	if (cap)
		buf[0] = '\0';
	n = snprintf(msg, sizeof(msg), "%s\n%s\n%s\n%" PRId64 "\n%016" PRIx64,
		     method, path, range ? range : "", ts, node);
	if (n < 0 || (size_t)n >= sizeof(msg))
		return;
	if (!HMAC(EVP_sha256(), k, PEER_KLEN, (const unsigned char *)msg,
		  (size_t)n, md, &mdlen) ||
	    mdlen * 2 != PEER_SIG_HEX)
		return;
	for (unsigned i = 0; i < mdlen; i++) {
		sig[2 * i] = hexd[md[i] >> 4];
		sig[2 * i + 1] = hexd[md[i] & 15];
	}
	sig[PEER_SIG_HEX] = '\0';
	OPENSSL_cleanse(md, sizeof(md));
	snprintf(buf, cap, "node=%016" PRIx64 ",ts=%" PRId64 ",sig=%s", node,
		 ts, sig);
}

void peer_sign(const unsigned char *secret, uint64_t node, int64_t ts,
	       const char *method, const char *path, const char *range,
	       char *buf, size_t cap)
{
	unsigned char k[PEER_KLEN];

	if (cap)
		buf[0] = '\0';
	if (peer_derive(secret, k))
		return;
	peer_sign_k(k, node, ts, method, path, range, buf, cap);
	OPENSSL_cleanse(k, sizeof(k));
}

/* ---- the requests ---------------------------------------------------- */

/* The requests (peer.h), by their verb and route; KEY follows the route. */
enum peer_op { OP_GET, OP_HEAD, OP_WARM, OP_BAD, OP_N };
static const char *const op_verb[OP_N] = {"GET", "HEAD", "POST", "POST"};
static const char *const op_route[OP_N] = {"/v1/o/", "/v1/o/", "/v1/warm/",
					   "/v1/bad/"};

/* ---- keys ------------------------------------------------------------ */

/*
 * A key a member may be asked for: 1..PEER_KEY_MAX bytes, no NUL, no
 * leading or trailing '/', no empty, "." or ".." component (objstore.h's
 * structure; its characters are the store's to check). The caches below
 * name files by hashes of keys, but a key that could climb a path is
 * refused here whatever they do.
 */
static int peer_key_ok(const char *key, size_t len)
{
	if (len == 0 || len > PEER_KEY_MAX || memchr(key, '\0', len) ||
	    key[0] == '/' || key[len - 1] == '/')
		return 0;
	for (size_t i = 0; i < len;) {
		const char *end = memchr(key + i, '/', len - i);
		size_t n = end ? (size_t)(end - (key + i)) : len - i;
		if (n == 0 || (n == 1 && key[i] == '.') ||
		    (n == 2 && key[i] == '.' && key[i + 1] == '.'))
			return 0;
		i += n + 1;
	}
	return 1;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Percent-decode the path's tail s into key (PEER_KEY_MAX + 1); 0 when it
 * is a malformed encoding or not a key peer_key_ok() takes. */
static int peer_key_decode(const char *s, char *key)
{
	size_t n = 0;

	for (; *s; s++) {
		int c = (unsigned char)*s;
		if (c == '%') {
			int hi = hexval(s[1]), lo = hi < 0 ? -1 : hexval(s[2]);
			if (lo < 0)
				return 0;
			c = hi << 4 | lo;
			s += 2;
		}
		if (n == PEER_KEY_MAX)
			return 0;
		key[n++] = (char)c;
	}
	key[n] = '\0';
	return peer_key_ok(key, n);
}

/* ---- server ---------------------------------------------------------- */

/*
 * Threads: libmicrohttpd's pool (threads, each polling its share of the
 * connections) calls srv_access, srv_done, srv_conn and srv_accept. Those
 * threads never wait on the store: a GET or a warm of a key the handler
 * does not hold (has() says ENOENT) suspends its connection and goes to
 * the fetch queue, whose `fetchers` threads call the handler (which may
 * fetch from the store for seconds) and resume the connection; a GET of
 * a key held here is answered on the poll thread at once (sendfile), so a
 * hit never waits behind another ask's fetch. `fetchers` bounds the
 * fetches for askers at once; the queue holds at most one job a
 * connection (a connection has one request at a time).
 *
 * A request's life: srv_access, first call (the headers are in: the
 * signature, route and key checked by srv_begin; a refusal is answered
 * at once and closes the connection) -> srv_access, second call (the
 * handler asked and the answer queued; or the connection suspended and
 * the job queued) -> [srv_fetch on a fetcher: the handler asked, the
 * connection resumed -> srv_access, third call: the answer queued] ->
 * srv_done (sent, or cut): the body's bytes counted, its memory freed.
 * `inflight` counts the requests between the first call and srv_done so
 * that a stop lets those under way finish.
 */
struct peer_server {
	struct MHD_Daemon *d;
	struct workq *fetchq; /* the fetchers: srv_fetch jobs */
	int lfd;	      /* the listening socket: MHD's until quiesced */
	int quiesced;	      /* lfd handed back by MHD_quiesce_daemon */
	struct peer_handler h;
	unsigned char k[PEER_KLEN];
	char addr[PEER_ADDR_MAX];
	unsigned max_conns;
	struct peer_server_stats st; /* fields updated with __atomic */
	time_t log_at;		     /* the last refusal warning: atomic */
	pthread_mutex_t lock; /* only the fetch queue's (a leaf) under it */
	pthread_cond_t idle;  /* inflight reached 0 */
	unsigned inflight;    /* protected by lock */
	int stopping;	      /* protected by lock */
};

/* Where a request is (srv_access's calls). */
enum srv_state { RS_NEW, RS_QUEUED, RS_READY };

/* What srv_done needs of a request, in MHD's per-request pointer. While
 * RS_QUEUED the request (its fetch job) belongs to the fetcher that runs
 * it, until it resumes the connection. */
struct srv_req {
	struct workq_job job; /* srv_fetch */
	struct peer_server *s;
	struct MHD_Connection *c;
	enum srv_state state;
	int err;	    /* RS_READY: the handler's answer */
	struct peer_body b; /* RS_READY, a GET's: not yet queued */
	int have_b;	    /* b is ours to send or free */
	enum peer_op op;
	char key[PEER_KEY_MAX + 1]; /* decoded */
	const char *range;	    /* the Range header (MHD's), or NULL */
	uint64_t off, len;	    /* a GET's range (len UINT64_MAX: all) */
	uint64_t body;		    /* bytes of the body queued (a 2xx GET) */
	void (*free_fn)(void *arg); /* an fd body's free_fn, at the end */
	void *free_arg;
	int counted; /* in inflight */
};

#define ST_ADD(s, f, n) __atomic_add_fetch(&(s)->st.f, (n), __ATOMIC_RELAXED)

/* MHD decodes "%XX" in paths by default: the path must stay as sent,
 * since that is what was signed; srv_access decodes the key itself. */
static size_t srv_unescape_none(void *cls, struct MHD_Connection *c, char *s)
{
	(void)cls;
	(void)c;
	return strlen(s);
}

/* Connections over max_conns are closed at accept: the asker sees its
 * connection closed at once (PEER_EDOWN) instead of waiting in the
 * listen queue for a slot until its deadline. */
static enum MHD_Result srv_accept(void *cls, const struct sockaddr *a,
				  socklen_t alen)
{
	struct peer_server *s = cls;

	(void)a;
	(void)alen;
	return __atomic_load_n(&s->st.conns, __ATOMIC_RELAXED) < s->max_conns
		   ? MHD_YES
		   : MHD_NO;
}

static void srv_conn(void *cls, struct MHD_Connection *c, void **sock_ctx,
		     enum MHD_ConnectionNotificationCode toe)
{
	struct peer_server *s = cls;

	(void)c;
	(void)sock_ctx;
	if (toe == MHD_CONNECTION_NOTIFY_STARTED)
		__atomic_add_fetch(&s->st.conns, 1, __ATOMIC_RELAXED);
	else
		__atomic_sub_fetch(&s->st.conns, 1, __ATOMIC_RELAXED);
}

static void srv_body_free(struct peer_body *b);

static void srv_done(void *cls, struct MHD_Connection *c, void **con_cls,
		     enum MHD_RequestTerminationCode toe)
{
	struct peer_server *s = cls;
	struct srv_req *r = *con_cls;

	(void)c;
	if (!r)
		return;
	if (toe == MHD_REQUEST_TERMINATED_COMPLETED_OK)
		ST_ADD(s, bytes_sent, r->body);
	if (r->have_b) /* fetched, never queued (the stop closed it) */
		srv_body_free(&r->b);
	if (r->free_fn)
		r->free_fn(r->free_arg);
	if (r->counted) {
		pthread_mutex_lock(&s->lock);
		if (--s->inflight == 0)
			pthread_cond_broadcast(&s->idle);
		pthread_mutex_unlock(&s->lock);
	}
	free(r);
	*con_cls = NULL;
}

static const char *srv_peer_ip(struct MHD_Connection *c, char *buf, size_t cap)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const struct sockaddr *a = ci ? ci->client_addr : NULL;

	snprintf(buf, cap, "?");
	if (a && a->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)a)->sin_addr,
			  buf, (socklen_t)cap);
	else if (a && a->sa_family == AF_INET6)
		inet_ntop(AF_INET6,
			  &((const struct sockaddr_in6 *)a)->sin6_addr, buf,
			  (socklen_t)cap);
	return buf;
}

/*
 * Whether the request carries a valid signature of method, path and
 * range under this server's key, made within PEER_SKEW_S of now. The
 * value is parsed only for its node and time; it must then be exactly
 * what this server would write (compared in constant time). *why: the
 * refusal's reason, for the log.
 */
static int srv_auth_ok(const struct peer_server *s, const char *auth,
		       const char *method, const char *path, const char *range,
		       const char **why)
{
	char want[PEER_SIGN_MAX];
	const char *v, *p;
	char *end;
	uint64_t node;
	int64_t ts, now = (int64_t)time(NULL);
	size_t n;
	int ok;

	*why = "no signature";
	if (!auth || strncmp(auth, PEER_SCHEME, sizeof(PEER_SCHEME) - 1))
		return 0;
	v = auth + sizeof(PEER_SCHEME) - 1;
	*why = "a malformed signature";
	if (strncmp(v, "node=", 5))
		return 0;
	p = v + 5;
	for (int i = 0; i < 16; i++)
		if (hexval(p[i]) < 0)
			return 0;
	node = strtoull(p, &end, 16);
	if (end != p + 16 || strncmp(end, ",ts=", 4))
		return 0;
	p = end + 4;
	if (!(*p >= '0' && *p <= '9') && *p != '-')
		return 0;
	errno = 0;
	ts = strtoll(p, &end, 10);
	if (errno || end == p || strncmp(end, ",sig=", 5))
		return 0;
	*why = "a signature made too far from this member's clock";
	if (ts > now + PEER_SKEW_S || ts < now - PEER_SKEW_S)
		return 0;
	*why = "a wrong signature (another group secret?)";
	peer_sign_k(s->k, node, ts, method, path, range, want, sizeof(want));
	n = strlen(want);
	ok = n && strlen(v) == n && !CRYPTO_memcmp(v, want, n);
	OPENSSL_cleanse(want, sizeof(want));
	return ok;
}

/* "bytes=A-B" or "bytes=A-" into off and len (UINT64_MAX: to the end). */
static int srv_range(const char *v, uint64_t *off, uint64_t *len)
{
	uint64_t a = 0, b = 0;
	const char *p;
	int digits = 0;

	if (strncmp(v, "bytes=", 6))
		return EINVAL;
	for (p = v + 6; *p >= '0' && *p <= '9'; p++, digits++) {
		if (a > (UINT64_MAX - 9) / 10)
			return EINVAL;
		a = a * 10 + (uint64_t)(*p - '0');
	}
	if (!digits || *p++ != '-')
		return EINVAL;
	*off = a;
	if (!*p) {
		*len = UINT64_MAX;
		return 0;
	}
	for (digits = 0; *p >= '0' && *p <= '9'; p++, digits++) {
		if (b > (UINT64_MAX - 9) / 10)
			return EINVAL;
		b = b * 10 + (uint64_t)(*p - '0');
	}
	if (!digits || *p || b < a || b - a == UINT64_MAX)
		return EINVAL;
	*len = b - a + 1;
	return 0;
}

/* Queue an answer with no body. */
static enum MHD_Result srv_reply(struct MHD_Connection *c, unsigned status,
				 int close)
{
	struct MHD_Response *resp =
	    MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
	enum MHD_Result ret;

	if (!resp)
		return MHD_NO; /* MHD closes the connection */
	if (status == MHD_HTTP_UNAUTHORIZED)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
					"GRANARY-PEER");
	if (close)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION,
					"close");
	ret = MHD_queue_response(c, status, resp);
	MHD_destroy_response(resp);
	return ret;
}

/* The status of a handler's error: ENOENT is 404, the rest 503. */
static unsigned srv_status(struct peer_server *s, int err)
{
	if (err == ENOENT)
		return MHD_HTTP_NOT_FOUND;
	ST_ADD(s, errors, 1);
	return MHD_HTTP_SERVICE_UNAVAILABLE;
}

/* Free a body the handler gave and that was not queued. */
static void srv_body_free(struct peer_body *b)
{
	if (b->fd >= 0)
		close(b->fd);
	if (b->free_fn)
		b->free_fn(b->free_arg);
}

/* A GET's answer: b, the handler's body for [off, off + len) (err 0), sent
 * from its file or its memory, 206 with the range it covers when a range
 * was asked. */
static enum MHD_Result srv_answer_get(struct peer_server *s,
				      struct MHD_Connection *c,
				      struct srv_req *r, int err,
				      struct peer_body *b)
{
	struct MHD_Response *resp = NULL;
	uint64_t off = r->off, len = r->len, n;
	unsigned status = MHD_HTTP_OK;
	char cr[80];
	enum MHD_Result ret;

	if (err)
		return srv_reply(c, srv_status(s, err), 0);
	n = b->len < len ? b->len : len; /* never more than asked */
	if (b->fd >= 0) {
		if (n)
			resp = MHD_create_response_from_fd_at_offset64(n, b->fd,
								       b->off);
		if (!resp)
			close(b->fd);
		/* sendfile needs the fd to the end: free_fn waits for it */
		r->free_fn = b->free_fn;
		r->free_arg = b->free_arg;
	} else if (n && b->free_fn) {
		resp = MHD_create_response_from_buffer_with_free_callback_cls(
		    n, (void *)b->data, b->free_fn, b->free_arg);
		if (!resp)
			b->free_fn(b->free_arg);
	} else {
		if (n)
			resp = MHD_create_response_from_buffer(
			    n, (void *)b->data, MHD_RESPMEM_PERSISTENT);
		else if (b->free_fn)
			b->free_fn(b->free_arg);
	}
	if (n && !resp) {
		ST_ADD(s, errors, 1);
		return srv_reply(c, MHD_HTTP_SERVICE_UNAVAILABLE, 0);
	}
	if (!n) /* nothing from off on: an empty 200, or 416 for a range */
		return srv_reply(
		    c, r->range ? MHD_HTTP_RANGE_NOT_SATISFIABLE : MHD_HTTP_OK,
		    0);
	if (r->range) {
		status = MHD_HTTP_PARTIAL_CONTENT;
		snprintf(cr, sizeof(cr), "bytes %" PRIu64 "-%" PRIu64 "/*", off,
			 off + n - 1);
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_RANGE,
					cr);
	}
	r->body = n;
	ret = MHD_queue_response(c, status, resp);
	MHD_destroy_response(resp);
	return ret;
}

/* The handler's part of a GET or a warm (on a poll thread or a fetcher):
 * its answer in r->err, a GET's body in r->b. */
static void srv_handle(struct peer_server *s, struct srv_req *r)
{
	r->b = (struct peer_body){.fd = -1};
	if (r->op == OP_GET) {
		r->err = s->h.get(s->h.arg, r->key, r->off, r->len, &r->b);
		r->have_b = !r->err;
	} else {
		r->err = s->h.warm(s->h.arg, r->key);
	}
	r->state = RS_READY;
}

/* A fetcher's job: the handler asked (unless the server stops), the
 * connection resumed; srv_access answers. */
static void srv_fetch(struct workq_job *job)
{
	struct srv_req *r = (struct srv_req *)job; /* job is first */
	struct peer_server *s = r->s;
	int stopping;

	pthread_mutex_lock(&s->lock);
	stopping = s->stopping;
	pthread_mutex_unlock(&s->lock);
	if (stopping) {
		r->err = ESHUTDOWN;
		r->state = RS_READY;
	} else {
		srv_handle(s, r);
	}
	MHD_resume_connection(r->c);
}

/* The log line of a refused signature, at most one per PEER_LOG_EVERY_S. */
static void srv_log_refusal(struct peer_server *s, struct MHD_Connection *c,
			    const char *why)
{
	time_t now = time(NULL),
	       at = __atomic_load_n(&s->log_at, __ATOMIC_RELAXED);
	char ip[INET6_ADDRSTRLEN];

	if (now - at >= PEER_LOG_EVERY_S &&
	    __atomic_compare_exchange_n(&s->log_at, &at, now, 0,
					__ATOMIC_RELAXED, __ATOMIC_RELAXED))
		log_warn("cache group: refused a request from '%s' with %s",
			 srv_peer_ip(c, ip, sizeof(ip)), why);
}

/*
 * A request whose headers are in: its signature, route and key checked.
 * 0 to go on, or the status to refuse it with at once (MHD then closes
 * the connection: nothing more is read from it).
 */
static unsigned srv_begin(struct peer_server *s, struct MHD_Connection *c,
			  struct srv_req *r, const char *url,
			  const char *method)
{
	const char *auth, *why, *te, *cl;
	enum peer_op op;
	int stopping;

	ST_ADD(s, requests, 1);
	pthread_mutex_lock(&s->lock);
	stopping = s->stopping;
	if (!stopping) {
		s->inflight++;
		r->counted = 1;
	}
	pthread_mutex_unlock(&s->lock);
	if (stopping)
		return MHD_HTTP_SERVICE_UNAVAILABLE;

	/* the signature first: nothing is read or asked without it */
	auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
					   MHD_HTTP_HEADER_AUTHORIZATION);
	r->range = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
					       MHD_HTTP_HEADER_RANGE);
	if (!srv_auth_ok(s, auth, method, url, r->range, &why)) {
		ST_ADD(s, refused_auth, 1);
		srv_log_refusal(s, c, why);
		return MHD_HTTP_UNAUTHORIZED;
	}
	/* no request of the protocol has a body */
	te = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
					 MHD_HTTP_HEADER_TRANSFER_ENCODING);
	cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
					 MHD_HTTP_HEADER_CONTENT_LENGTH);
	for (op = 0; op < OP_N; op++)
		if (!strcmp(method, op_verb[op]) &&
		    !strncmp(url, op_route[op], strlen(op_route[op])))
			break;
	if (op == OP_N || te || (cl && strcmp(cl, "0")) ||
	    !peer_key_decode(url + strlen(op_route[op]), r->key)) {
		ST_ADD(s, errors, 1);
		return MHD_HTTP_BAD_REQUEST;
	}
	r->op = op;
	r->len = UINT64_MAX;
	return 0;
}

/*
 * MHD calls this with a request's headers (*con_cls NULL), then again
 * once the request is whole: a response queued at the first call would
 * close the connection (MHD reads no further), so only refusals are; the
 * answer is made at the second call, and keeps the connection.
 */
static enum MHD_Result srv_access(void *cls, struct MHD_Connection *c,
				  const char *url, const char *method,
				  const char *version, const char *upload,
				  size_t *upload_size, void **con_cls)
{
	struct peer_server *s = cls;
	struct srv_req *r = *con_cls;
	unsigned status;
	int err;

	(void)version;
	(void)upload;
	if (!r) {
		if (!(r = calloc(1, sizeof(*r))))
			return MHD_NO; /* MHD closes the connection */
		*con_cls = r;
		if ((status = srv_begin(s, c, r, url, method)))
			return srv_reply(c, status, 1);
		return MHD_YES;
	}
	if (*upload_size) { /* a body (none was announced): not kept */
		*upload_size = 0;
		return MHD_YES;
	}
	switch (r->state == RS_NEW ? r->op : OP_N) {
	case OP_GET:
		if (r->range && srv_range(r->range, &r->off, &r->len)) {
			ST_ADD(s, errors, 1);
			return srv_reply(c, MHD_HTTP_BAD_REQUEST, 0);
		}
		/* fall through */
	case OP_WARM:
		if (s->h.has(s->h.arg, r->key)) {
			/* not here: a fetcher asks the handler */
			r->state = RS_QUEUED;
			r->s = s;
			r->c = c;
			r->job.run = srv_fetch;
			MHD_suspend_connection(c);
			/* under the lock: no push once a stop began, which
			 * then closes the queue */
			pthread_mutex_lock(&s->lock);
			int stopping = s->stopping;
			int queued =
			    !stopping && !workq_trypush(s->fetchq, &r->job);
			pthread_mutex_unlock(&s->lock);
			if (stopping) {
				r->err = ESHUTDOWN;
				r->state = RS_READY;
			} else if (!queued) { /* the queue is full */
				srv_handle(s, r);
			}
			if (!queued)
				MHD_resume_connection(c);
			return MHD_YES;
		}
		srv_handle(s, r);
		break;
	case OP_HEAD:
		err = s->h.has(s->h.arg, r->key);
		return srv_reply(c, err ? srv_status(s, err) : MHD_HTTP_OK, 0);
	case OP_BAD:
		s->h.bad(s->h.arg, r->key);
		return srv_reply(c, MHD_HTTP_NO_CONTENT, 0);
	default: /* RS_QUEUED: resumed; the answer is in */
		break;
	}
	if (r->op == OP_WARM)
		return srv_reply(
		    c, r->err ? srv_status(s, r->err) : MHD_HTTP_NO_CONTENT, 0);
	r->have_b = 0; /* srv_answer_get's now */
	return srv_answer_get(s, c, r, r->err, &r->b);
}

/* "HOST:PORT" (HOST a name, an IPv4 address or "[IPv6]") into its parts. */
static int split_addr(const char *addr, char *host, size_t hcap, char *port)
{
	const char *colon = strrchr(addr, ':'), *h = addr;
	size_t hl;

	if (!colon || colon == addr || !colon[1] || strlen(colon + 1) > 5 ||
	    strspn(colon + 1, "0123456789") != strlen(colon + 1) ||
	    atol(colon + 1) > 65535)
		return EINVAL;
	hl = (size_t)(colon - addr);
	if (addr[0] == '[') {
		if (hl < 3 || addr[hl - 1] != ']')
			return EINVAL;
		h++;
		hl -= 2;
	} else if (memchr(addr, ':', hl)) {
		return EINVAL; /* an IPv6 address needs its brackets */
	}
	if (hl >= hcap)
		return EINVAL;
	memcpy(host, h, hl);
	host[hl] = '\0';
	strcpy(port, colon + 1);
	return 0;
}

/* Bind and listen on addr; *fd, and the port it got in *port_out. */
static int srv_listen(const char *addr, int *fd, unsigned *port_out)
{
	char host[PEER_ADDR_MAX], port[6];
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE | AI_NUMERICSERV},
			*res, *ai;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int err, one = 1, l = -1;

	if ((err = split_addr(addr, host, sizeof(host), port)))
		return err;
	if (getaddrinfo(host, port, &hints, &res))
		return EADDRNOTAVAIL;
	err = EADDRNOTAVAIL;
	for (ai = res; ai; ai = ai->ai_next) {
		l = socket(ai->ai_family,
			   ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
			   ai->ai_protocol);
		if (l < 0) {
			err = errno;
			continue;
		}
		setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (!bind(l, ai->ai_addr, ai->ai_addrlen) &&
		    !listen(l, SOMAXCONN))
			break;
		err = errno;
		close(l);
		l = -1;
	}
	freeaddrinfo(res);
	if (l < 0)
		return err;
	if (getsockname(l, (struct sockaddr *)&ss, &sl)) {
		err = errno;
		close(l);
		return err;
	}
	*port_out = ntohs(ss.ss_family == AF_INET6
			      ? ((struct sockaddr_in6 *)&ss)->sin6_port
			      : ((struct sockaddr_in *)&ss)->sin_port);
	*fd = l;
	return 0;
}

int peer_server_start(const struct peer_server_opts *o,
		      const struct peer_handler *h, struct peer_server **out)
{
	struct peer_server *s;
	unsigned threads, port = 0;
	char *colon;
	int err;

	*out = NULL;
	if (!o || !o->addr || !o->secret || !h || !h->get || !h->has ||
	    !h->warm || !h->bad || strlen(o->addr) >= PEER_ADDR_MAX)
		return EINVAL;
	if (!(s = calloc(1, sizeof(*s))))
		return ENOMEM;
	s->lfd = -1;
	s->h = *h;
	threads = o->threads ? o->threads : 4;
	s->max_conns = o->max_conns ? o->max_conns : 64;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->idle, NULL);
	if ((err = peer_derive(o->secret, s->k)))
		goto fail;
	if ((err = srv_listen(o->addr, &s->lfd, &port)))
		goto fail;
	if ((err = workq_open("gr-peerfetch",
			      (int)(o->fetchers ? o->fetchers : 16),
			      s->max_conns, &s->fetchq)))
		goto fail;
	snprintf(s->addr, sizeof(s->addr), "%s", o->addr);
	colon = strrchr(s->addr, ':');
	snprintf(colon + 1, sizeof(s->addr) - (size_t)(colon + 1 - s->addr),
		 "%u", port);
	/*
	 * MHD's own limit is ours plus one a thread: srv_accept refuses
	 * past max_conns, and MHD stops polling the listening socket in a
	 * thread at its share of the limit, which must not come first.
	 */
	s->d = MHD_start_daemon(
	    MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ITC |
		MHD_ALLOW_SUSPEND_RESUME,
	    0, srv_accept, s, srv_access, s, MHD_OPTION_LISTEN_SOCKET, s->lfd,
	    MHD_OPTION_THREAD_POOL_SIZE, threads > 1 ? threads : 0,
	    MHD_OPTION_CONNECTION_LIMIT, s->max_conns + threads,
	    MHD_OPTION_CONNECTION_TIMEOUT,
	    o->idle_timeout_s ? o->idle_timeout_s : 30,
	    MHD_OPTION_NOTIFY_COMPLETED, srv_done, s,
	    MHD_OPTION_NOTIFY_CONNECTION, srv_conn, s,
	    MHD_OPTION_UNESCAPE_CALLBACK, srv_unescape_none, NULL,
	    MHD_OPTION_END);
	if (!s->d) {
		err = ENOMEM;
		goto fail;
	}
	log_debug("cache group: serving peers at '%s' (%u threads, %u "
		  "connections)",
		  s->addr, threads, s->max_conns);
	*out = s;
	return 0;
fail:
	workq_close(s->fetchq);
	if (s->lfd >= 0)
		close(s->lfd);
	OPENSSL_cleanse(s->k, sizeof(s->k));
	pthread_cond_destroy(&s->idle);
	pthread_mutex_destroy(&s->lock);
	free(s);
	return err;
}

const char *peer_server_addr(const struct peer_server *s)
{
	return s->addr;
}

void peer_server_get_stats(struct peer_server *s, struct peer_server_stats *st)
{
	st->requests = __atomic_load_n(&s->st.requests, __ATOMIC_RELAXED);
	st->refused_auth =
	    __atomic_load_n(&s->st.refused_auth, __ATOMIC_RELAXED);
	st->errors = __atomic_load_n(&s->st.errors, __ATOMIC_RELAXED);
	st->bytes_sent = __atomic_load_n(&s->st.bytes_sent, __ATOMIC_RELAXED);
	st->conns = __atomic_load_n(&s->st.conns, __ATOMIC_RELAXED);
}

/*
 * Stop: no new connections (quiesce), new requests on open ones answered
 * 503 and their connections closed, the requests under way given up to
 * PEER_DRAIN_MS to be answered; then MHD stops, joining its threads
 * (so waiting for any handler call still running) and closing what is
 * left.
 */
void peer_server_stop(struct peer_server *s)
{
	struct timespec until;
	int fd;

	if (!s)
		return;
	if ((fd = MHD_quiesce_daemon(s->d)) >= 0)
		s->quiesced = 1;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += PEER_DRAIN_MS / 1000;
	until.tv_nsec += (PEER_DRAIN_MS % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&s->lock);
	s->stopping = 1;
	while (s->inflight &&
	       pthread_cond_timedwait(&s->idle, &s->lock, &until) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&s->lock);
	/* every suspended connection resumed (the fetches left answer
	 * ESHUTDOWN at once) before MHD stops */
	workq_close(s->fetchq);
	MHD_stop_daemon(s->d);
	if (s->quiesced) /* MHD's no longer: ours to close */
		close(fd);
	OPENSSL_cleanse(s->k, sizeof(s->k));
	pthread_cond_destroy(&s->idle);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

/* ---- client ---------------------------------------------------------- */

/*
 * Each thread keeps, in a table under a pthread key, one easy handle per
 * member it asked lately (PEER_TLS_SLOTS, the least recently used given
 * up): a handle keeps its connection between requests, runs only the
 * request its thread waits for, and is never shared, so nothing is
 * locked. The handles do not belong to a client: they are addresses'
 * connections, freed when their thread exits.
 */
struct peer_client {
	unsigned char k[PEER_KLEN];
	uint64_t node;
	long connect_ms, timeout_ms;
	long slow_ms; /* atomic: the slowest recent get answered, decaying */
};

/* A get answered after ms: the slowest recent answer, decayed by 1/8 */
static void cli_note_answer(struct peer_client *c, long ms)
{
	long old = __atomic_load_n(&c->slow_ms, __ATOMIC_RELAXED), nw;

	do {
		nw = old - old / 8;
		if (ms > nw)
			nw = ms;
	} while (!__atomic_compare_exchange_n(
	    &c->slow_ms, &old, nw, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
}

/* A get's deadline: the fixed allowance for len bytes, raised to
 * PEER_SLOW_MULT times the slowest recent answer, capped. */
static long cli_get_deadline(struct peer_client *c, uint64_t len)
{
	long t = c->timeout_ms + (long)(len / PEER_BYTES_PER_MS);
	long slow = __atomic_load_n(&c->slow_ms, __ATOMIC_RELAXED);

	if (slow * PEER_SLOW_MULT > t)
		t = slow * PEER_SLOW_MULT;
	return t < PEER_DEADLINE_MAX_MS ? t : PEER_DEADLINE_MAX_MS;
}

struct tls_conn {
	char addr[PEER_ADDR_MAX];
	CURL *e;
	uint64_t used;
};

struct peer_tls {
	struct tls_conn conn[PEER_TLS_SLOTS];
	uint64_t tick;
};

static pthread_once_t cli_once = PTHREAD_ONCE_INIT;
static int cli_init_err;	  /* written once under cli_once */
static pthread_key_t cli_tls_key; /* each thread's struct peer_tls */

static void cli_tls_free(void *arg)
{
	struct peer_tls *t = arg;

	for (int i = 0; i < PEER_TLS_SLOTS; i++)
		if (t->conn[i].e)
			curl_easy_cleanup(t->conn[i].e);
	free(t);
}

static void cli_init(void)
{
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		cli_init_err = EIO;
	else if (pthread_key_create(&cli_tls_key, cli_tls_free))
		cli_init_err = ENOMEM;
}

static size_t cli_write(char *data, size_t size, size_t nmemb, void *arg);
static size_t cli_header(char *data, size_t size, size_t nmemb, void *arg);

/* A new handle, with the options every request of it keeps. */
static CURL *cli_easy_new(void)
{
	CURL *e = curl_easy_init();

	if (!e)
		return NULL;
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_MAXCONNECTS, 1L); /* one member's */
	/* the path is sent as signed */
	curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http");
	/* as much as the server sends at a time (MHD's sendfile chunk): a
	 * block arrives in 32 reads, not 256 */
	curl_easy_setopt(e, CURLOPT_BUFFERSIZE, PEER_RECV_BUF);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, cli_write);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, cli_header);
	return e;
}

/*
 * The calling thread's handle for addr, NULL when out of memory. Its
 * options stay set between requests (no curl_easy_reset, which would
 * also drop its receive buffer): cli_run sets those that vary.
 */
static CURL *cli_easy(const char *addr)
{
	struct peer_tls *t = pthread_getspecific(cli_tls_key);
	struct tls_conn *slot = NULL;

	if (!t) {
		if (!(t = calloc(1, sizeof(*t))))
			return NULL;
		if (pthread_setspecific(cli_tls_key, t)) {
			free(t);
			return NULL;
		}
	}
	t->tick++;
	for (int i = 0; i < PEER_TLS_SLOTS; i++) {
		struct tls_conn *c = &t->conn[i];
		if (c->e && !strcmp(c->addr, addr)) {
			c->used = t->tick;
			return c->e;
		}
		if (!slot || (slot->e && (!c->e || c->used < slot->used)))
			slot = c;
	}
	if (slot->e) /* the least recently used member's: closed */
		curl_easy_cleanup(slot->e);
	slot->e = cli_easy_new();
	snprintf(slot->addr, sizeof(slot->addr), "%s", addr);
	slot->used = t->tick;
	return slot->e;
}

int peer_client_open(const struct peer_client_opts *o, struct peer_client **out)
{
	struct peer_client *c;
	int err;

	*out = NULL;
	if (!o || !o->secret)
		return EINVAL;
	pthread_once(&cli_once, cli_init);
	if (cli_init_err)
		return cli_init_err;
	if (!(c = calloc(1, sizeof(*c))))
		return ENOMEM;
	if ((err = peer_derive(o->secret, c->k))) {
		free(c);
		return err;
	}
	c->node = o->node;
	c->connect_ms = o->connect_timeout_ms ? o->connect_timeout_ms : 200;
	c->timeout_ms = o->timeout_ms ? o->timeout_ms : 1000;
	*out = c;
	return 0;
}

void peer_client_close(struct peer_client *c)
{
	if (!c)
		return;
	OPENSSL_cleanse(c->k, sizeof(c->k));
	free(c);
}

/* One request and its answer. */
struct cli_req {
	CURL *e;
	uint64_t off;
	size_t len; /* asked (SIZE_MAX: to the end) */
	long status;
	unsigned char *buf; /* a 200/206 body, sized from Content-Length */
	size_t cap, got;
	int cb_err; /* an error of our own callbacks */
	int has_cr; /* Content-Range: bytes cr_a-cr_b/... */
	uint64_t cr_a, cr_b;
	long deadline_ms;   /* > 0: this deadline, not the computed one */
	int timed_out_sent; /* sent, and no answer by the deadline */
};

static int is_ok(long status)
{
	return status == 200 || status == 206;
}

/* The body, into a buffer of the size the answer announced: never more
 * than was asked, so a member cannot make a reader hold more. */
static size_t cli_write(char *data, size_t size, size_t nmemb, void *arg)
{
	struct cli_req *r = arg;
	size_t n = size * nmemb;

	if (!r->status)
		curl_easy_getinfo(r->e, CURLINFO_RESPONSE_CODE, &r->status);
	if (!is_ok(r->status))
		return n; /* an error's body: dropped */
	if (!r->buf) {
		curl_off_t cl = -1;
		curl_easy_getinfo(r->e, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T,
				  &cl);
		if (cl < 0 || (uint64_t)cl > r->len) {
			r->cb_err = PEER_EPROTO; /* no length, or too long */
			return 0;
		}
		if (!(r->buf = bigbuf_alloc((size_t)cl ? (size_t)cl : 1))) {
			r->cb_err = ENOMEM;
			return 0;
		}
		r->cap = (size_t)cl;
	}
	if (n > r->cap - r->got) {
		r->cb_err = PEER_EPROTO;
		return 0;
	}
	memcpy(r->buf + r->got, data, n);
	r->got += n;
	return n;
}

/* Content-Range: the range the answer says it holds. */
static size_t cli_header(char *data, size_t size, size_t nmemb, void *arg)
{
	struct cli_req *r = arg;
	size_t n = size * nmemb;
	static const char name[] = "content-range:";
	char v[96];
	unsigned long long a, b;

	if (n > 5 && !strncmp(data, "HTTP/", 5)) /* a new answer's status */
		r->has_cr = 0;
	if (n <= sizeof(name) - 1 || n - (sizeof(name) - 1) >= sizeof(v) ||
	    strncasecmp(data, name, sizeof(name) - 1))
		return n;
	memcpy(v, data + sizeof(name) - 1, n - (sizeof(name) - 1));
	v[n - (sizeof(name) - 1)] = '\0';
	if (sscanf(v, " bytes %llu-%llu/", &a, &b) == 2 && a <= b) {
		r->has_cr = 1;
		r->cr_a = a;
		r->cr_b = b;
	}
	return n;
}

/* The error of a transfer curl did not complete. */
static int cli_map_curl(CURLcode res, const struct cli_req *r)
{
	switch (res) {
	case CURLE_WRITE_ERROR:
		return r->cb_err ? r->cb_err : EIO;
	case CURLE_OUT_OF_MEMORY:
		return ENOMEM;
	case CURLE_URL_MALFORMAT:
		return EINVAL;
	case CURLE_WEIRD_SERVER_REPLY:
	case CURLE_UNSUPPORTED_PROTOCOL:
	case CURLE_BAD_CONTENT_ENCODING:
	case CURLE_HTTP2:
	case CURLE_HTTP3:
		return PEER_EPROTO;
	default: /* COULDNT_CONNECT, OPERATION_TIMEDOUT, GOT_NOTHING,
		    RECV_ERROR, SEND_ERROR, PARTIAL_FILE, ... */
		return PEER_EDOWN;
	}
}

/* The error an answer's status means, for what was asked. */
static int cli_map_status(long st)
{
	if (st == 404)
		return ENOENT;
	if (st == 401)
		return PEER_EAUTH;
	/* The member answers but cannot serve (its handler failed: the
	 * store behind it, its disk): the caller reads from the store, and
	 * the member is not down. */
	if (st >= 500 && st <= 599)
		return EIO;
	return PEER_EPROTO;
}

/* Append line to *l; 0 or ENOMEM (then *l is freed). */
static int hdr_add(struct curl_slist **l, const char *line)
{
	struct curl_slist *n = curl_slist_append(*l, line);

	if (!n) {
		curl_slist_free_all(*l);
		*l = NULL;
		return ENOMEM;
	}
	*l = n;
	return 0;
}

/* What an answer to op means: 0, or its error. */
static int cli_answer(enum peer_op op, int ranged, const struct cli_req *r)
{
	long st = r->status;

	switch (op) {
	case OP_GET:
		if (ranged && st == 416)
			return 0; /* nothing from off on: the object ends */
		if (!is_ok(st))
			return cli_map_status(st);
		/* a range asked is a 206 of exactly the bytes it holds */
		if ((st == 206) != ranged)
			return PEER_EPROTO;
		if (ranged && (!r->has_cr || r->cr_a != r->off ||
			       r->cr_b - r->cr_a + 1 != r->got))
			return PEER_EPROTO;
		return 0;
	case OP_HEAD:
		return st == 200 ? 0 : cli_map_status(st);
	default:
		return st == 204 || st == 200 ? 0 : cli_map_status(st);
	}
}

/*
 * Run op on key at the member at addr with the calling thread's handle:
 * 0, or the error the transfer or the answer means. A GET fills
 * r->buf/got with the range asked, as far as the object has it.
 */
static int cli_run(struct peer_client *c, enum peer_op op, const char *addr,
		   const char *key, struct cli_req *r)
{
	char path[PEER_PATH_MAX], enc[3 * PEER_KEY_MAX + 1];
	char url[PEER_PATH_MAX + PEER_ADDR_MAX + 16], range[64] = "";
	char auth[sizeof("Authorization: " PEER_SCHEME) + PEER_SIGN_MAX];
	char rhdr[sizeof(range) + 8];
	struct curl_slist *hdrs = NULL;
	size_t klen = key ? strlen(key) : 0;
	size_t pre = sizeof("Authorization: " PEER_SCHEME) - 1;
	long timeout = c ? c->timeout_ms : 0;
	int ranged = 0, n, err;
	CURLcode res;

	if (!c || !addr || !*addr || strlen(addr) >= PEER_ADDR_MAX || !key ||
	    !peer_key_ok(key, klen))
		return EINVAL;
	s3sign_uri_encode(key, klen, 1, enc, sizeof(enc));
	snprintf(path, sizeof(path), "%s%s", op_route[op], enc);
	n = snprintf(url, sizeof(url), "http://%s%s", addr, path);
	if (n < 0 || (size_t)n >= sizeof(url))
		return EINVAL;
	if (op == OP_GET && (r->off || r->len != SIZE_MAX)) {
		ranged = 1;
		if (r->len == SIZE_MAX || r->off + r->len < r->off)
			snprintf(range, sizeof(range), "bytes=%" PRIu64 "-",
				 r->off);
		else
			snprintf(range, sizeof(range),
				 "bytes=%" PRIu64 "-%" PRIu64, r->off,
				 r->off + r->len - 1);
		snprintf(rhdr, sizeof(rhdr), "Range: %s", range);
	}
	memcpy(auth, "Authorization: " PEER_SCHEME, pre);
	peer_sign_k(c->k, c->node, (int64_t)time(NULL), op_verb[op], path,
		    range, auth + pre, sizeof(auth) - pre);
	/* no Accept or Expect: nothing the server has a use for */
	if (hdr_add(&hdrs, auth) || (ranged && hdr_add(&hdrs, rhdr)) ||
	    hdr_add(&hdrs, "Accept:") || hdr_add(&hdrs, "Expect:"))
		return ENOMEM;
	if (!(r->e = cli_easy(addr))) {
		curl_slist_free_all(hdrs);
		return ENOMEM;
	}

	/* the deadline: timeout_ms and 1 ms per 100 KiB asked; a warm
	 * waits for the member's fetch from the store */
	if (r->deadline_ms > 0)
		timeout = r->deadline_ms;
	else if (op == OP_GET)
		timeout =
		    cli_get_deadline(c, r->len == SIZE_MAX ? PEER_WHOLE_BYTES
							   : (uint64_t)r->len);
	else if (op == OP_WARM && timeout < PEER_WARM_MS)
		timeout = PEER_WARM_MS;
	curl_easy_setopt(r->e, CURLOPT_URL, url);
	curl_easy_setopt(r->e, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(r->e, CURLOPT_CONNECTTIMEOUT_MS, c->connect_ms);
	curl_easy_setopt(r->e, CURLOPT_TIMEOUT_MS, timeout);
	curl_easy_setopt(r->e, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(r->e, CURLOPT_HEADERDATA, r);
	curl_easy_setopt(r->e, CURLOPT_HTTPGET, 1L); /* and no NOBODY */
	if (op == OP_HEAD) {
		curl_easy_setopt(r->e, CURLOPT_NOBODY, 1L);
	} else if (op != OP_GET) {
		curl_easy_setopt(r->e, CURLOPT_POSTFIELDSIZE, 0L);
		curl_easy_setopt(r->e, CURLOPT_POSTFIELDS, "");
	}
	int64_t t0 = fsutil_mono_ns();
	res = curl_easy_perform(r->e);
	if (!r->status)
		curl_easy_getinfo(r->e, CURLINFO_RESPONSE_CODE, &r->status);
	if (op == OP_GET && res == CURLE_OK && r->status >= 200 &&
	    r->status < 300) {
		cli_note_answer(c, (long)((fsutil_mono_ns() - t0) / 1000000));
	} else if (op == OP_GET && res == CURLE_OPERATION_TIMEDOUT) {
		/* sent, and no answer in time: the member may be fetching
		 * from a store slower than the deadline allows (a member
		 * that is not there fails to connect instead): the next
		 * asks wait longer, up to the cap */
		curl_off_t sent = 0;
		curl_easy_getinfo(r->e, CURLINFO_PRETRANSFER_TIME_T, &sent);
		if (sent > 0) {
			cli_note_answer(c, timeout);
			r->timed_out_sent = 1;
		}
	}
	/* what must outlive the transfer, not the handle: unhooked */
	curl_easy_setopt(r->e, CURLOPT_HTTPHEADER, NULL);
	curl_easy_setopt(r->e, CURLOPT_WRITEDATA, NULL);
	curl_easy_setopt(r->e, CURLOPT_HEADERDATA, NULL);
	curl_slist_free_all(hdrs);
	OPENSSL_cleanse(auth, sizeof(auth));

	err =
	    res != CURLE_OK ? cli_map_curl(res, r) : cli_answer(op, ranged, r);
	if (err)
		log_debug("cache group: %s '%s' at '%s': %s", op_verb[op], key,
			  addr,
			  res != CURLE_OK ? curl_easy_strerror(res)
					  : gr_strerror(err));
	return err;
}

void peer_client_note_store(struct peer_client *c, long ms)
{
	if (c && ms > 0)
		cli_note_answer(c, ms);
}

int peer_get(struct peer_client *c, const char *addr, const char *key,
	     uint64_t off, size_t len, void **data, size_t *got)
{
	struct cli_req r = {.off = off, .len = len ? len : SIZE_MAX};
	int64_t t0 = fsutil_mono_ns();
	long spent;
	int err;

	*data = NULL;
	*got = 0;
	/*
	 * A get sent and not answered by its deadline: the member is
	 * fetching the object from a store slower than the deadline, or it
	 * is hung. A HEAD tells which: its poll threads answer at once
	 * while its fetchers wait on the store (peer.c, the server), so
	 * an answer says the member is there and the get is asked again
	 * (it joins the member's fetch under way: the store is not asked
	 * twice), up to PEER_DEADLINE_MAX_MS in all; no answer is
	 * PEER_EDOWN, as before.
	 */
	while ((err = cli_run(c, OP_GET, addr, key, &r)) == PEER_EDOWN &&
	       r.timed_out_sent) {
		struct cli_req h = {.len = 0, .deadline_ms = c->timeout_ms};
		int herr;
		spent = (long)((fsutil_mono_ns() - t0) / 1000000);
		if (spent + c->timeout_ms >= PEER_DEADLINE_MAX_MS)
			break;
		herr = cli_run(c, OP_HEAD, addr, key, &h);
		if (herr && herr != ENOENT)
			break;
		spent = (long)((fsutil_mono_ns() - t0) / 1000000);
		if (spent >= PEER_DEADLINE_MAX_MS)
			break;
		bigbuf_free(r.buf);
		r = (struct cli_req){.off = off,
				     .len = len ? len : SIZE_MAX,
				     .deadline_ms =
					 PEER_DEADLINE_MAX_MS - spent};
	}
	if (!err && !r.buf &&
	    !(r.buf = malloc(1))) /* a real buffer even for 0 bytes */
		err = ENOMEM;
	if (err) {
		bigbuf_free(r.buf);
		return err;
	}
	*data = r.buf;
	*got = r.got;
	return 0;
}

int peer_has(struct peer_client *c, const char *addr, const char *key)
{
	struct cli_req r = {.len = 0};

	return cli_run(c, OP_HEAD, addr, key, &r);
}

int peer_warm(struct peer_client *c, const char *addr, const char *key)
{
	struct cli_req r = {.len = 0};

	return cli_run(c, OP_WARM, addr, key, &r);
}

int peer_report_bad(struct peer_client *c, const char *addr, const char *key)
{
	struct cli_req r = {.len = 0};

	return cli_run(c, OP_BAD, addr, key, &r);
}
