/*
 * slowproxy.c - a TCP proxy for the benchmarks that makes an S3 server on
 * loopback (s3rver) answer like a real store: each response's first byte
 * held back (a first-byte delay, optional jitter), bandwidth capped per
 * connection and in total (token buckets), every request counted by method
 * and key and logged. It reads HTTP/1.1 just enough to find where each
 * request and response ends on keep-alive connections (Content-Length,
 * chunked, until close) and forwards every byte unchanged.
 * bench/README.md, "slowproxy", says what it models and how to use it.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/queue.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const char usage[] =
    "usage: slowproxy --target HOST:PORT [OPTIONS]\n"
    "\n"
    "Forward TCP connections to an HTTP/1.1 server (an S3 server) and make\n"
    "it answer like a real store. Prints the port it listens on as the\n"
    "first line of stdout.\n"
    "  --listen HOST:PORT  where to listen (default 127.0.0.1:0: any free\n"
    "                      port)\n"
    "  --target HOST:PORT  the server\n"
    "  --delay-ms MS       first-byte delay: a response's first byte leaves\n"
    "                      no sooner than MS after its request's last byte\n"
    "                      came in (default 30; the server's own time is\n"
    "                      part of it)\n"
    "  --jitter-ms MS      add to each delay a random 0..MS (default 0)\n"
    "  --connect-ms MS     delay before each connection to the server\n"
    "                      (default 0)\n"
    "  --conn-mbps R       cap each connection at R MB/s (10^6 bytes a\n"
    "                      second, not megabits), each direction (default\n"
    "                      80; 0: no cap)\n"
    "  --total-mbps R      cap all connections together at R MB/s, each\n"
    "                      direction (default 0: no cap)\n"
    "  --responses-only    the caps apply to responses only; requests (PUT\n"
    "                      bodies) pass at full speed\n"
    "  --max-conns N       connections served at once (default 512); more\n"
    "                      wait in the listen backlog\n"
    "  --log FILE          append a line per request: METHOD TARGET STATUS\n"
    "                      REQ_BODY_BYTES RESP_BODY_BYTES TTFB_MS MS (status\n"
    "                      0 and TTFB '-': no whole answer)\n"
    "  --stats FILE        write the counters to FILE (replaced whole) on\n"
    "                      SIGUSR1 and at exit; without it SIGUSR1 prints\n"
    "                      the totals on stderr\n"
    "  --max-keys N        distinct METHOD+path counted (default 1000000);\n"
    "                      requests beyond are counted as keys_dropped\n"
    "SIGTERM or SIGINT: stop, drop the connections, write the stats, print\n"
    "the totals on stderr, exit 0.\n";

#define NS_PER_MS    1000000ull
#define NS_PER_S     1000000000ull
#define BUF_SIZE     (64 * 1024) /* per direction; the longest head too */
#define MIN_CHUNK    4096	 /* bytes sent per take of tokens, at least */
#define MAX_PENDING  64		 /* requests in flight on one connection */
#define SLEEP_SLICE  (50 * NS_PER_MS) /* how soon a sleeper sees a stop */
#define STOP_WAIT_MS 5000
#define MAX_MESSAGES 20 /* connection errors printed; the rest counted */
#define KEY_BUCKETS  (1u << 16)
#define THREAD_STACK (256 * 1024)
#define PX_EOF	     (-1) /* the peer closed its side between messages */
#define PX_CUT	     (-2) /* ... in the middle of one */

static struct {
	char *listen_host, *listen_port, *target_host, *target_port;
	double delay_ms, jitter_ms, connect_ms, conn_mbps, total_mbps;
	int responses_only;
	long max_conns, max_keys;
	const char *log_path, *stats_path;
} opt = {
    .delay_ms = 30, .conn_mbps = 80, .max_conns = 512, .max_keys = 1000000};

static struct sockaddr_storage target_addr;
static socklen_t target_len;
static atomic_int stopping;
static int log_fd = -1;
static int done_efd = -1; /* eventfd: a connection ended */

/* ------------------------------------------------------------------------
 * clocks and sleeps
 */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

/* Sleep until the monotonic time AT; ECANCELED as soon as the proxy stops
 * or *dead is set (checked every SLEEP_SLICE). */
static int sleep_until(atomic_int *dead, uint64_t at)
{
	for (;;) {
		if (atomic_load(&stopping) || (dead && atomic_load(dead)))
			return ECANCELED;
		uint64_t t = now_ns();
		if (t >= at)
			return 0;
		uint64_t until = at - t > SLEEP_SLICE ? t + SLEEP_SLICE : at;
		struct timespec ts = {.tv_sec = (time_t)(until / NS_PER_S),
				      .tv_nsec = (long)(until % NS_PER_S)};
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
	}
}

/* ------------------------------------------------------------------------
 * token buckets
 *
 * A bucket fills at rate bytes a second up to burst. A sender takes the
 * bytes it is about to send at once, even when that leaves the bucket in
 * debt, and waits until the debt would be paid: senders queue in the order
 * they took, and the rate holds over any window longer than a burst.
 */

struct bucket {
	pthread_mutex_t lock;
	double rate;   /* bytes a second; 0: no cap */
	double burst;  /* bytes */
	double tokens; /* may go negative (protected by lock) */
	uint64_t last; /* when tokens was right (protected by lock) */
};

static struct bucket total_up, total_down; /* all connections, each way */
static size_t chunk_up, chunk_down;	   /* bytes sent per take */

static void bucket_init(struct bucket *b, double rate, size_t chunk)
{
	pthread_mutex_init(&b->lock, NULL);
	b->rate = rate;
	b->burst = rate / 100 > (double)chunk ? rate / 100 : (double)chunk;
	b->tokens = b->burst;
	b->last = now_ns();
}

/* Take n bytes; returns when they may be sent. */
static uint64_t bucket_take(struct bucket *b, size_t n)
{
	uint64_t t, at;

	pthread_mutex_lock(&b->lock);
	t = now_ns();
	b->tokens += (double)(t - b->last) * b->rate / 1e9;
	if (b->tokens > b->burst)
		b->tokens = b->burst;
	b->last = t;
	b->tokens -= (double)n;
	at = b->tokens >= 0 ? t : t + (uint64_t)(-b->tokens / b->rate * 1e9);
	pthread_mutex_unlock(&b->lock);
	return at;
}

/* The bytes to send per take of tokens for caps a and b (bytes a second, 0
 * for none): a hundredth of a second at the lower one, so that connections
 * sharing a total cap take turns finely. */
static size_t chunk_for(double a, double b)
{
	double r = a > 0 && (b <= 0 || a < b) ? a : b;

	if (r <= 0)
		return BUF_SIZE;
	r /= 100;
	return r < MIN_CHUNK ? MIN_CHUNK : r > BUF_SIZE ? BUF_SIZE : (size_t)r;
}

/* ------------------------------------------------------------------------
 * counters: totals, per key (METHOD + path), the request log
 */

enum { M_GET, M_HEAD, M_PUT, M_POST, M_DELETE, M_OTHER, M_N };
static const char *const method_names[M_N] = {"get",  "head",	"put",
					      "post", "delete", "other"};

static struct {
	atomic_ullong connections, connections_max, requests, by_method[M_N];
	atomic_ullong status[6]; /* [k]: kxx answers; [0] unanswered */
	atomic_ullong bytes_in, bytes_out, body_in, body_out;
	atomic_ullong errors, resets;
	atomic_uint messages;
} S;

struct key_stat {
	struct key_stat *next;
	uint64_t reqs, ok, body_out; /* ok: answered 2xx */
	char name[];		     /* "METHOD /path" */
};

static struct {
	pthread_mutex_t lock; /* a leaf: nothing else is taken under it */
	struct key_stat *b[KEY_BUCKETS]; /* protected by lock */
	long n;				 /* protected by lock */
	uint64_t dropped;		 /* protected by lock */
} K = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int method_index(const char *m)
{
	static const char *const up[M_OTHER] = {"GET", "HEAD", "PUT", "POST",
						"DELETE"};

	for (int i = 0; i < M_OTHER; i++)
		if (!strcmp(m, up[i]))
			return i;
	return M_OTHER;
}

/* Count one request of METHOD on TARGET's path (the query left out). */
static void keys_count(const char *method, const char *target, int status,
		       uint64_t body_out)
{
	size_t plen = strcspn(target, "?");
	size_t mlen = strlen(method);
	uint64_t h = 1469598103934665603ull;
	struct key_stat *k;

	for (size_t i = 0; i < mlen; i++)
		h = (h ^ (unsigned char)method[i]) * 1099511628211ull;
	h = (h ^ ' ') * 1099511628211ull;
	for (size_t i = 0; i < plen; i++)
		h = (h ^ (unsigned char)target[i]) * 1099511628211ull;
	pthread_mutex_lock(&K.lock);
	for (k = K.b[h % KEY_BUCKETS]; k; k = k->next)
		if (!strncmp(k->name, method, mlen) && k->name[mlen] == ' ' &&
		    !strncmp(k->name + mlen + 1, target, plen) &&
		    k->name[mlen + 1 + plen] == '\0')
			break;
	if (!k && K.n < opt.max_keys &&
	    (k = calloc(1, sizeof(*k) + mlen + plen + 2))) {
		memcpy(k->name, method, mlen);
		k->name[mlen] = ' ';
		memcpy(k->name + mlen + 1, target, plen);
		k->next = K.b[h % KEY_BUCKETS];
		K.b[h % KEY_BUCKETS] = k;
		K.n++;
	}
	if (k) {
		k->reqs++;
		k->ok += status / 100 == 2;
		k->body_out += body_out;
	} else {
		K.dropped++;
	}
	pthread_mutex_unlock(&K.lock);
}

/* Write the totals as NAME=VALUE separated by sep; with keys, a line per
 * key after them: "key METHOD REQUESTS OK BODY_OUT PATH". */
static void stats_write(FILE *f, char sep, int keys)
{
	unsigned long long get_keys = 0, get_max = 0, get_repeated = 0;
	static const char *const st[6] = {"unanswered", "status_1xx",
					  "status_2xx", "status_3xx",
					  "status_4xx", "status_5xx"};

#define P(name, v) fprintf(f, "%s=%llu%c", name, (unsigned long long)(v), sep)
	P("requests", S.requests);
	for (int i = 0; i < M_N; i++) {
		char n[32];
		snprintf(n, sizeof(n), "requests_%s", method_names[i]);
		P(n, S.by_method[i]);
	}
	for (int i = 0; i < 6; i++)
		if (i != 1)
			P(st[i], S.status[i]);
	P("bytes_in", S.bytes_in);
	P("bytes_out", S.bytes_out);
	P("body_in", S.body_in);
	P("body_out", S.body_out);
	P("connections", S.connections);
	P("connections_max", S.connections_max);
	P("errors", S.errors);
	P("resets", S.resets);
	pthread_mutex_lock(&K.lock);
	for (unsigned i = 0; i < KEY_BUCKETS; i++)
		for (struct key_stat *k = K.b[i]; k; k = k->next) {
			if (strncmp(k->name, "GET ", 4) || !k->ok)
				continue;
			get_keys++;
			get_repeated += k->ok > 1;
			if (k->ok > get_max)
				get_max = k->ok;
		}
	P("keys", K.n);
	P("keys_dropped", K.dropped);
	P("get_keys", get_keys);
	P("get_max", get_max);
	P("get_repeated", get_repeated);
#undef P
	if (sep != '\n')
		fputc('\n', f);
	for (unsigned i = 0; keys && i < KEY_BUCKETS; i++)
		for (struct key_stat *k = K.b[i]; k; k = k->next) {
			const char *path = strchr(k->name, ' ') + 1;
			fprintf(f, "key %.*s %llu %llu %llu %s\n",
				(int)(path - 1 - k->name), k->name,
				(unsigned long long)k->reqs,
				(unsigned long long)k->ok,
				(unsigned long long)k->body_out, path);
		}
	pthread_mutex_unlock(&K.lock);
}

/* The stats file, replaced whole (a reader never sees half of one). */
static void stats_dump(void)
{
	char tmp[4096];
	FILE *f;

	if (!opt.stats_path) {
		fputs("slowproxy: ", stderr);
		stats_write(stderr, ' ', 0);
		return;
	}
	snprintf(tmp, sizeof(tmp), "%s.tmp", opt.stats_path);
	if (!(f = fopen(tmp, "w"))) {
		fprintf(stderr, "slowproxy: cannot write stats '%s': %s\n", tmp,
			strerror(errno));
		return;
	}
	stats_write(f, '\n', 1);
	if (fclose(f) || rename(tmp, opt.stats_path))
		fprintf(stderr, "slowproxy: cannot write stats '%s': %s\n",
			opt.stats_path, strerror(errno));
}

/* One log line, in one write(2) to an O_APPEND file: lines of several
 * connections never mix. */
static void log_request(const char *method, const char *target, int status,
			uint64_t body_in, uint64_t body_out, double ttfb_ms,
			double ms)
{
	char ttfb[32], *line;
	int n;

	if (log_fd < 0)
		return;
	if (ttfb_ms < 0)
		strcpy(ttfb, "-");
	else
		snprintf(ttfb, sizeof(ttfb), "%.1f", ttfb_ms);
	n = asprintf(&line, "%s %s %d %llu %llu %s %.1f\n", method, target,
		     status, (unsigned long long)body_in,
		     (unsigned long long)body_out, ttfb, ms);
	if (n < 0)
		return;
	if (write(log_fd, line, (size_t)n) != n &&
	    atomic_fetch_add(&S.messages, 1) < MAX_MESSAGES)
		fprintf(stderr, "slowproxy: cannot write the log '%s'\n",
			opt.log_path);
	free(line);
}

/* ------------------------------------------------------------------------
 * connections
 *
 * Two threads a connection: conn_main reads requests from the client and
 * sends them on (the request side), responses_main reads responses from
 * the server and sends them back (the response side). A request's record
 * goes from the first to the second through the connection's pending
 * queue, in order; HTTP/1.1 answers in order too. A side that fails aborts
 * the connection: both sockets shut down, which wakes the other side.
 *
 * Lock order: conns_lock, then a connection's lock. The bucket locks and
 * K.lock are leaves.
 */

struct req {
	TAILQ_ENTRY(req) link;
	char method[16];  /* as sent */
	char *target;	  /* as sent: path and query */
	uint64_t t_start; /* its head came in */
	uint64_t t_end;	  /* its body came in; 0 before (protected by lock) */
	uint64_t body_in; /* protected by lock */
	int orphan; /* answered before its body ended: the request side frees
		       it (protected by lock) */
};

struct conn {
	LIST_ENTRY(conn) all; /* protected by conns_lock */
	unsigned long id;
	int cfd;	      /* the client's socket */
	int ufd;	      /* the server's; -1 before (protected by lock) */
	pthread_mutex_t lock; /* after conns_lock */
	pthread_cond_t cond;  /* pending shrank, or dead */
	TAILQ_HEAD(, req) pending; /* sent on, not answered whole (lock) */
	int npending;		   /* protected by lock */
	int req_done;		   /* no more requests come (lock) */
	atomic_int dead;	   /* aborted */
	struct bucket up, down;	   /* this connection's caps */
	uint64_t rng;		   /* jitter; the response side only */
};

/* One way through the proxy: src's bytes read into buf, sent to dst. */
struct dir {
	struct conn *c;
	int src, dst;
	char *buf;
	size_t off, len;	    /* unread input: buf[off, off + len) */
	struct bucket *own, *total; /* NULL: not capped */
	size_t chunk;
	atomic_ullong *wire; /* S.bytes_in or S.bytes_out */
};

static pthread_mutex_t conns_lock = PTHREAD_MUTEX_INITIALIZER;
static LIST_HEAD(, conn) conns = LIST_HEAD_INITIALIZER(conns); /* conns_lock */
static long nconns;					       /* conns_lock */
static unsigned long next_id; /* the accept loop only */

static void conn_abort(struct conn *c)
{
	pthread_mutex_lock(&c->lock);
	atomic_store(&c->dead, 1);
	shutdown(c->cfd, SHUT_RDWR);
	if (c->ufd >= 0)
		shutdown(c->ufd, SHUT_RDWR);
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

/* A side ended with err. A peer that goes away, even in the middle of a
 * message, is ordinary (a client killed, a server closing); anything else
 * is a fault of the protocol worth a message. Aborts the connection. */
static void conn_fail(struct conn *c, const char *side, int err)
{
	if (err == ECANCELED || atomic_load(&c->dead) ||
	    atomic_load(&stopping)) {
		/* stopped, or the other side failed (and shut this one) */
	} else if (err == PX_CUT || err == EPIPE || err == ECONNRESET ||
		   err == ETIMEDOUT) {
		atomic_fetch_add(&S.resets, 1);
	} else {
		atomic_fetch_add(&S.errors, 1);
		if (atomic_fetch_add(&S.messages, 1) < MAX_MESSAGES)
			fprintf(stderr,
				"slowproxy: connection %lu: %s failed: %s\n",
				c->id, side,
				err == EPROTO	  ? "not HTTP/1.1 as expected"
				: err == EMSGSIZE ? "head longer than 64 KiB"
						  : strerror(err));
	}
	conn_abort(c);
}

static int send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return errno;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Send n bytes at p, paced by the direction's caps. */
static int dir_send(struct dir *d, const char *p, size_t n)
{
	int err;

	while (n) {
		size_t k = n < d->chunk ? n : d->chunk;
		if (d->own &&
		    (err = sleep_until(&d->c->dead, bucket_take(d->own, k))))
			return err;
		if (d->total &&
		    (err = sleep_until(&d->c->dead, bucket_take(d->total, k))))
			return err;
		if ((err = send_all(d->dst, p, k)))
			return err;
		atomic_fetch_add(d->wire, k);
		p += k;
		n -= k;
	}
	return 0;
}

/* Read more input behind what is unread; 0, PX_EOF, ENOBUFS (the buffer
 * is full) or an errno. */
static int dir_fill(struct dir *d)
{
	if (d->off) {
		memmove(d->buf, d->buf + d->off, d->len);
		d->off = 0;
	}
	if (d->len == BUF_SIZE)
		return ENOBUFS;
	for (;;) {
		ssize_t n = recv(d->src, d->buf + d->len, BUF_SIZE - d->len, 0);
		if (n > 0) {
			d->len += (size_t)n;
			return 0;
		}
		if (n == 0)
			return PX_EOF;
		if (errno != EINTR)
			return errno;
	}
}

static void dir_consume(struct dir *d, size_t n)
{
	d->off += n;
	d->len -= n;
	if (!d->len)
		d->off = 0;
}

/* Send the n unread bytes at the front and drop them. */
static int dir_pass(struct dir *d, size_t n)
{
	int err = dir_send(d, d->buf + d->off, n);

	if (!err)
		dir_consume(d, n);
	return err;
}

/* Forward n bytes of a body; PX_CUT if the input ends first. */
static int dir_forward(struct dir *d, uint64_t n)
{
	int err;

	while (n) {
		if (!d->len && (err = dir_fill(d)))
			return err == PX_EOF ? PX_CUT : err;
		size_t k = d->len < n ? d->len : (size_t)n;
		if ((err = dir_pass(d, k)))
			return err;
		n -= k;
	}
	return 0;
}

/* Forward until the input ends (a response without a length). */
static int dir_forward_all(struct dir *d, uint64_t *n)
{
	int err;

	for (;;) {
		if (!d->len && (err = dir_fill(d)))
			return err == PX_EOF ? 0 : err;
		*n += d->len;
		if ((err = dir_pass(d, d->len)))
			return err;
	}
}

/* Find the end of sep (CRLF: a line; CRLFCRLF: a head) in the unread
 * input, reading more as needed; *n: the bytes up to and with it. When the
 * input ends: PX_EOF if nothing is unread and eof_ok, else PX_CUT. */
static int dir_find(struct dir *d, const char *sep, size_t *n, int eof_ok)
{
	size_t seplen = strlen(sep), from = 0;
	int err;

	for (;;) {
		const char *p = d->buf + d->off;
		const char *e = memmem(p + from, d->len - from, sep, seplen);
		if (e) {
			*n = (size_t)(e - p) + seplen;
			return 0;
		}
		from = d->len >= seplen ? d->len - seplen + 1 : 0;
		if ((err = dir_fill(d))) {
			if (err == ENOBUFS)
				return EMSGSIZE;
			if (err == PX_EOF)
				return eof_ok && !d->len ? PX_EOF : PX_CUT;
			return err;
		}
	}
}

/* Forward a chunked body, the chunks' framing and trailers as they are;
 * *n: the bytes of data. */
static int dir_forward_chunked(struct dir *d, uint64_t *n)
{
	size_t ll;
	int err;

	for (;;) {
		const char *p;
		uint64_t size = 0;
		int digits = 0;

		if ((err = dir_find(d, "\r\n", &ll, 0)))
			return err;
		for (p = d->buf + d->off;; p++, digits++) {
			int v = *p >= '0' && *p <= '9'	 ? *p - '0'
				: *p >= 'a' && *p <= 'f' ? *p - 'a' + 10
				: *p >= 'A' && *p <= 'F' ? *p - 'A' + 10
							 : -1;
			if (v < 0)
				break;
			if (size >> 56)
				return EPROTO;
			size = size << 4 | (uint64_t)v;
		}
		if (!digits ||
		    (*p != '\r' && *p != ';' && *p != ' ' && *p != '\t'))
			return EPROTO;
		if ((err = dir_pass(d, ll)))
			return err;
		if (!size)
			break;
		if ((err = dir_forward(d, size)))
			return err;
		*n += size;
		if ((err = dir_find(d, "\r\n", &ll, 0)))
			return err;
		if (ll != 2)
			return EPROTO;
		if ((err = dir_pass(d, 2)))
			return err;
	}
	do { /* trailers, to the empty line */
		if ((err = dir_find(d, "\r\n", &ll, 0)) ||
		    (err = dir_pass(d, ll)))
			return err;
	} while (ll != 2);
	return 0;
}

/* ------------------------------------------------------------------------
 * message heads
 */

struct head {
	char method[16];    /* requests */
	const char *target; /* requests: in the buffer, not terminated */
	size_t target_len;
	int status;   /* responses */
	int64_t clen; /* Content-Length; -1: none */
	int chunked;  /* the last transfer coding is chunked */
	int te_other; /* a transfer coding, not chunked last */
};

static int is_space(char c)
{
	return c == ' ' || c == '\t';
}

static int name_is(const char *p, size_t n, const char *name)
{
	return strlen(name) == n && !strncasecmp(p, name, n);
}

/* Parse the head at p (n bytes, its blank line included) as a request or
 * a response; 0 or EPROTO. */
static int head_parse(const char *p, size_t n, int request, struct head *h)
{
	const char *end = p + n, *eol = memmem(p, n, "\r\n", 2);
	const char *l;

	memset(h, 0, sizeof(*h));
	h->clen = -1;
	if (request) {
		const char *sp = memchr(p, ' ', (size_t)(eol - p)), *t, *sp2;
		if (!sp || sp == p || (size_t)(sp - p) >= sizeof(h->method))
			return EPROTO;
		memcpy(h->method, p, (size_t)(sp - p));
		t = sp + 1;
		sp2 = memchr(t, ' ', (size_t)(eol - t));
		if (!sp2 || sp2 == t || eol - sp2 != 9 ||
		    memcmp(sp2 + 1, "HTTP/1.", 7))
			return EPROTO;
		h->target = t;
		h->target_len = (size_t)(sp2 - t);
	} else {
		if (eol - p < 12 || memcmp(p, "HTTP/1.", 7) || p[8] != ' ' ||
		    (eol - p > 12 && p[12] != ' '))
			return EPROTO;
		for (int i = 9; i < 12; i++) {
			if (p[i] < '0' || p[i] > '9')
				return EPROTO;
			h->status = h->status * 10 + p[i] - '0';
		}
	}
	for (l = eol + 2; l < end;) {
		const char *e = memmem(l, (size_t)(end - l), "\r\n", 2);
		const char *colon, *v, *ve;
		if (e == l)
			break; /* the blank line */
		colon = memchr(l, ':', (size_t)(e - l));
		if (!colon || colon == l)
			return EPROTO;
		for (const char *q = l; q < colon; q++)
			if (is_space(*q)) /* and obsolete line folding */
				return EPROTO;
		for (v = colon + 1; v < e && is_space(*v); v++)
			;
		for (ve = e; ve > v && is_space(ve[-1]); ve--)
			;
		if (name_is(l, (size_t)(colon - l), "content-length")) {
			int64_t len = 0;
			if (v == ve || ve - v > 18)
				return EPROTO;
			for (const char *q = v; q < ve; q++) {
				if (*q < '0' || *q > '9')
					return EPROTO;
				len = len * 10 + *q - '0';
			}
			if (h->clen >= 0 && h->clen != len)
				return EPROTO;
			h->clen = len;
		} else if (name_is(l, (size_t)(colon - l),
				   "transfer-encoding")) {
			const char *tok = ve;
			while (tok > v && tok[-1] != ',')
				tok--;
			while (tok < ve && is_space(*tok))
				tok++;
			h->chunked =
			    name_is(tok, (size_t)(ve - tok), "chunked");
			h->te_other = !h->chunked;
		}
		l = e + 2;
	}
	return 0;
}

/* ------------------------------------------------------------------------
 * the request side
 */

static void req_free(struct req *r)
{
	if (r) {
		free(r->target);
		free(r);
	}
}

/* The request side is done with r's body (whole or not). */
static void req_ended(struct conn *c, struct req *r, uint64_t body)
{
	int orphan;

	pthread_mutex_lock(&c->lock);
	r->t_end = now_ns();
	r->body_in = body;
	orphan = r->orphan;
	pthread_mutex_unlock(&c->lock);
	if (orphan)
		req_free(r);
}

static int requests_run(struct dir *d)
{
	struct conn *c = d->c;
	struct head h;
	size_t hlen;
	int err;

	for (;;) {
		struct req *r;
		uint64_t body = 0;

		if ((err = dir_find(d, "\r\n\r\n", &hlen, 1)) ||
		    (err = head_parse(d->buf + d->off, hlen, 1, &h)))
			return err;
		if (h.te_other)
			return EPROTO; /* its end cannot be found */
		if (!(r = calloc(1, sizeof(*r))) ||
		    !(r->target = strndup(h.target, h.target_len))) {
			req_free(r);
			return ENOMEM;
		}
		memcpy(r->method, h.method, sizeof(r->method));
		r->t_start = now_ns();
		pthread_mutex_lock(&c->lock);
		while (c->npending >= MAX_PENDING && !atomic_load(&c->dead))
			pthread_cond_wait(&c->cond, &c->lock);
		if (atomic_load(&c->dead)) {
			pthread_mutex_unlock(&c->lock);
			req_free(r);
			return ECANCELED;
		}
		TAILQ_INSERT_TAIL(&c->pending, r, link);
		c->npending++;
		pthread_mutex_unlock(&c->lock);
		atomic_fetch_add(&S.requests, 1);
		atomic_fetch_add(&S.by_method[method_index(r->method)], 1);

		if (!(err = dir_pass(d, hlen))) {
			if (h.chunked)
				err = dir_forward_chunked(d, &body);
			else if (h.clen > 0 &&
				 !(err = dir_forward(d, (uint64_t)h.clen)))
				body = (uint64_t)h.clen;
		}
		atomic_fetch_add(&S.body_in, body);
		req_ended(c, r, body); /* r may be gone after this */
		if (err)
			return err;
	}
}

/* ------------------------------------------------------------------------
 * the response side
 */

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* r answered (status, body_out bytes); off the queue, logged, counted.
 * Returns 1 when the connection has nothing more to answer. */
static int resp_done(struct conn *c, struct req *r, int status,
		     uint64_t body_out, uint64_t ttfb)
{
	uint64_t t = now_ns(), body_in = 0;
	int last, orphan = 0;

	atomic_fetch_add(&S.status[status / 100 < 6 ? status / 100 : 5], 1);
	atomic_fetch_add(&S.body_out, body_out);
	if (r) {
		/* logged while r is still the response side's: once it is
		 * an orphan, the request side may free it at any time */
		pthread_mutex_lock(&c->lock);
		body_in = r->body_in;
		pthread_mutex_unlock(&c->lock);
		keys_count(r->method, r->target, status, body_out);
		log_request(r->method, r->target, status, body_in, body_out,
			    (double)ttfb / 1e6, (double)(t - r->t_start) / 1e6);
	} else {
		log_request("-", "-", status, 0, body_out, 0, 0);
	}
	pthread_mutex_lock(&c->lock);
	if (r) {
		TAILQ_REMOVE(&c->pending, r, link);
		c->npending--;
		pthread_cond_broadcast(&c->cond);
		orphan = r->orphan = !r->t_end;
	}
	last = c->req_done && TAILQ_EMPTY(&c->pending);
	pthread_mutex_unlock(&c->lock);
	if (r && !orphan) /* else the request side frees it */
		req_free(r);
	return last;
}

static int responses_run(struct dir *d)
{
	struct conn *c = d->c;
	uint64_t delay = (uint64_t)(opt.delay_ms * 1e6);
	uint64_t jitter = (uint64_t)(opt.jitter_ms * 1e6);
	struct head h;
	size_t hlen;
	int err;

	for (;;) {
		struct req *r;
		uint64_t from, body = 0, ttfb;
		int no_body, until_close = 0;

		if ((err = dir_find(d, "\r\n\r\n", &hlen, 1)) ||
		    (err = head_parse(d->buf + d->off, hlen, 0, &h)))
			return err;
		if (h.status == 101)
			return EPROTO; /* no protocol switches */
		pthread_mutex_lock(&c->lock);
		r = TAILQ_FIRST(&c->pending);
		from = r ? r->t_end : 0;
		pthread_mutex_unlock(&c->lock);
		if (h.status < 200) { /* interim (100 Continue): at once */
			if ((err = dir_pass(d, hlen)))
				return err;
			continue;
		}
		/* the delay runs from the request's end; from the answer's
		 * arrival if the server answered before the body ended */
		if (!from)
			from = now_ns();
		ttfb = from;
		from += delay + (jitter ? rng_next(&c->rng) % (jitter + 1) : 0);
		if ((err = sleep_until(&c->dead, from)))
			return err;
		ttfb = now_ns() - ttfb;
		if ((err = dir_pass(d, hlen)))
			return err;
		no_body = (r && !strcmp(r->method, "HEAD")) ||
			  h.status == 204 || h.status == 304;
		if (no_body)
			err = 0;
		else if (h.chunked)
			err = dir_forward_chunked(d, &body);
		else if (h.te_other || h.clen < 0)
			until_close = 1, err = dir_forward_all(d, &body);
		else if (!(err = dir_forward(d, (uint64_t)h.clen)))
			body = (uint64_t)h.clen;
		if (err)
			return err;
		if (resp_done(c, r, h.status, body, ttfb) || until_close)
			return PX_EOF;
	}
}

static void *responses_main(void *arg)
{
	struct dir *d = arg;
	int err = responses_run(d);

	if (err == PX_EOF)
		/* the server closed, or all is answered after the client's
		 * last request: close the client's connection (which wakes
		 * the request side if it waits for more) */
		shutdown(d->c->cfd, SHUT_RDWR);
	else
		conn_fail(d->c, "the response side", err);
	return NULL;
}

/* ------------------------------------------------------------------------
 * a connection's life
 */

/* Connect to the target; a connect that waits (the server's backlog is
 * full) ends as soon as the proxy stops or the connection is aborted. */
static int conn_connect(struct conn *c)
{
	int fd, one = 1, dead, err = 0, soerr = 0;
	socklen_t len = sizeof(soerr);

	if (opt.connect_ms > 0 &&
	    sleep_until(&c->dead, now_ns() + (uint64_t)(opt.connect_ms * 1e6)))
		return ECANCELED;
	fd = socket(target_addr.ss_family,
		    SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return errno;
	if (connect(fd, (struct sockaddr *)&target_addr, target_len)) {
		struct pollfd p = {.fd = fd, .events = POLLOUT};
		err = errno;
		while (err == EINPROGRESS) {
			if (atomic_load(&stopping) || atomic_load(&c->dead))
				err = ECANCELED;
			else if (poll(&p, 1, SLEEP_SLICE / NS_PER_MS) > 0)
				err = getsockopt(fd, SOL_SOCKET, SO_ERROR,
						 &soerr, &len)
					  ? errno
					  : soerr;
		}
	}
	if (!err && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK))
		err = errno;
	if (err) {
		close(fd);
		return err;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	pthread_mutex_lock(&c->lock);
	c->ufd = fd;
	dead = atomic_load(&c->dead); /* an abort before ufd was set */
	pthread_mutex_unlock(&c->lock);
	return dead ? ECANCELED : 0;
}

static void *conn_main(void *arg)
{
	struct conn *c = arg;
	struct dir rq = {.c = c,
			 .own = c->up.rate > 0 ? &c->up : NULL,
			 .total = total_up.rate > 0 ? &total_up : NULL,
			 .chunk = chunk_up,
			 .wire = &S.bytes_in};
	struct dir rs = {.c = c,
			 .own = c->down.rate > 0 ? &c->down : NULL,
			 .total = total_down.rate > 0 ? &total_down : NULL,
			 .chunk = chunk_down,
			 .wire = &S.bytes_out};
	pthread_attr_t attr;
	pthread_t tid;
	struct req *r;
	int err, empty;

	err = conn_connect(c);
	if (err) {
		if (err != ECANCELED &&
		    atomic_fetch_add(&S.messages, 1) < MAX_MESSAGES)
			fprintf(stderr,
				"slowproxy: cannot connect to '%s:%s': %s\n",
				opt.target_host, opt.target_port,
				strerror(err));
		atomic_fetch_add(&S.errors, err != ECANCELED);
		goto out;
	}
	rq.src = rs.dst = c->cfd;
	rq.dst = rs.src = c->ufd;
	rq.buf = malloc(BUF_SIZE);
	rs.buf = malloc(BUF_SIZE);
	if (!rq.buf || !rs.buf) {
		err = ENOMEM;
		goto out_free;
	}
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, THREAD_STACK);
	err = pthread_create(&tid, &attr, responses_main, &rs);
	pthread_attr_destroy(&attr);
	if (err)
		goto out_free;

	err = requests_run(&rq);
	if (err == PX_EOF) {
		/* the client is done: no response may be cut short, but when
		 * none is due the response side must stop waiting */
		pthread_mutex_lock(&c->lock);
		c->req_done = 1;
		empty = TAILQ_EMPTY(&c->pending);
		pthread_mutex_unlock(&c->lock);
		shutdown(c->ufd, empty ? SHUT_RDWR : SHUT_WR);
	} else {
		conn_fail(c, "the request side", err);
	}
	pthread_join(tid, NULL);
	err = 0;
out_free:
	if (err)
		conn_fail(c, "the start", err);
	free(rq.buf);
	free(rs.buf);
out:
	/* what was never answered: the request side's now */
	while ((r = TAILQ_FIRST(&c->pending))) {
		TAILQ_REMOVE(&c->pending, r, link);
		atomic_fetch_add(&S.status[0], 1);
		keys_count(r->method, r->target, 0, 0);
		log_request(r->method, r->target, 0, r->body_in, 0, -1,
			    (double)(now_ns() - r->t_start) / 1e6);
		req_free(r);
	}
	pthread_mutex_lock(&conns_lock);
	LIST_REMOVE(c, all);
	nconns--;
	pthread_mutex_unlock(&conns_lock);
	close(c->cfd);
	if (c->ufd >= 0)
		close(c->ufd);
	pthread_cond_destroy(&c->cond);
	pthread_mutex_destroy(&c->lock);
	pthread_mutex_destroy(&c->up.lock);
	pthread_mutex_destroy(&c->down.lock);
	free(c);
	eventfd_write(done_efd, 1); /* the accept loop may take one more */
	return NULL;
}

static void conn_start(int fd)
{
	double rate = opt.conn_mbps * 1e6;
	struct conn *c = calloc(1, sizeof(*c));
	pthread_attr_t attr;
	pthread_t tid;
	unsigned seed;
	int one = 1, err;

	if (!c) {
		close(fd);
		return;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->id = ++next_id;
	c->cfd = fd;
	c->ufd = -1;
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cond, NULL);
	TAILQ_INIT(&c->pending);
	bucket_init(&c->up, opt.responses_only ? 0 : rate, chunk_up);
	bucket_init(&c->down, rate, chunk_down);
	c->rng = now_ns() ^ (c->id * 0x9e3779b97f4a7c15ull);
	if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) == sizeof(seed))
		c->rng ^= (uint64_t)seed << 32;

	pthread_mutex_lock(&conns_lock);
	LIST_INSERT_HEAD(&conns, c, all);
	if ((unsigned long long)++nconns > atomic_load(&S.connections_max))
		atomic_store(&S.connections_max, (unsigned long long)nconns);
	pthread_mutex_unlock(&conns_lock);
	atomic_fetch_add(&S.connections, 1);

	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, THREAD_STACK);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	err = pthread_create(&tid, &attr, conn_main, c);
	pthread_attr_destroy(&attr);
	if (err) {
		fprintf(stderr, "slowproxy: cannot start a thread: %s\n",
			strerror(err));
		pthread_mutex_lock(&conns_lock);
		LIST_REMOVE(c, all);
		nconns--;
		pthread_mutex_unlock(&conns_lock);
		close(fd);
		free(c);
	}
}

/* ------------------------------------------------------------------------
 * start, the accept loop, stop
 */

/* Split a copy of HOST:PORT ([V6]:PORT too; argv is left as it is, for
 * ps). */
static int split_hostport(const char *arg, char **host, char **port)
{
	char *s = strdup(arg), *colon = s ? strrchr(s, ':') : NULL;

	if (!colon || colon == s || !colon[1] ||
	    strspn(colon + 1, "0123456789") != strlen(colon + 1)) {
		free(s);
		return EINVAL;
	}
	*colon = '\0';
	*port = colon + 1;
	if (s[0] == '[' && colon[-1] == ']') {
		colon[-1] = '\0';
		s++;
	}
	*host = s;
	return 0;
}

static int parse_num(const char *s, double max, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v) || v < 0 || v > max)
		return EINVAL;
	*out = v;
	return 0;
}

static int parse_args(int argc, char **argv)
{
	enum {
		O_LISTEN = 256,
		O_TARGET,
		O_DELAY,
		O_JITTER,
		O_CONNECT,
		O_CONN,
		O_TOTAL,
		O_RESP,
		O_MAXC,
		O_LOG,
		O_STATS,
		O_MAXK
	};
	static const struct option options[] = {
	    {"listen", required_argument, NULL, O_LISTEN},
	    {"target", required_argument, NULL, O_TARGET},
	    {"delay-ms", required_argument, NULL, O_DELAY},
	    {"jitter-ms", required_argument, NULL, O_JITTER},
	    {"connect-ms", required_argument, NULL, O_CONNECT},
	    {"conn-mbps", required_argument, NULL, O_CONN},
	    {"total-mbps", required_argument, NULL, O_TOTAL},
	    {"responses-only", no_argument, NULL, O_RESP},
	    {"max-conns", required_argument, NULL, O_MAXC},
	    {"log", required_argument, NULL, O_LOG},
	    {"stats", required_argument, NULL, O_STATS},
	    {"max-keys", required_argument, NULL, O_MAXK},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0}};
	static char default_listen[] = "127.0.0.1:0";
	char *listen_arg = default_listen, *target = NULL;
	double v = 0;
	int c, bad = 0;

	while ((c = getopt_long(argc, argv, "h", options, NULL)) != -1) {
		switch (c) {
		case O_LISTEN:
			listen_arg = optarg;
			break;
		case O_TARGET:
			target = optarg;
			break;
		case O_DELAY:
			bad |= parse_num(optarg, 3600e3, &opt.delay_ms);
			break;
		case O_JITTER:
			bad |= parse_num(optarg, 3600e3, &opt.jitter_ms);
			break;
		case O_CONNECT:
			bad |= parse_num(optarg, 3600e3, &opt.connect_ms);
			break;
		case O_CONN:
			bad |= parse_num(optarg, 1e6, &opt.conn_mbps);
			break;
		case O_TOTAL:
			bad |= parse_num(optarg, 1e6, &opt.total_mbps);
			break;
		case O_RESP:
			opt.responses_only = 1;
			break;
		case O_MAXC:
			bad |= parse_num(optarg, 65536, &v) || v < 1;
			opt.max_conns = (long)v;
			break;
		case O_LOG:
			opt.log_path = optarg;
			break;
		case O_STATS:
			opt.stats_path = optarg;
			break;
		case O_MAXK:
			bad |= parse_num(optarg, 1e8, &v);
			opt.max_keys = (long)v;
			break;
		case 'h':
			fputs(usage, stdout);
			exit(0);
		default:
			bad = 1;
		}
		if (bad) {
			if (c != '?')
				fprintf(stderr,
					"slowproxy: bad value '%s' for --%s\n",
					optarg, options[c - O_LISTEN].name);
			break;
		}
	}
	if (!bad && (optind < argc || !target)) {
		fprintf(stderr, "slowproxy: %s\n",
			target ? "stray arguments" : "no --target given");
		bad = 1;
	}
	if (!bad &&
	    split_hostport(listen_arg, &opt.listen_host, &opt.listen_port)) {
		fprintf(stderr, "slowproxy: bad --listen '%s': HOST:PORT\n",
			listen_arg);
		bad = 1;
	}
	if (!bad &&
	    split_hostport(target, &opt.target_host, &opt.target_port)) {
		fprintf(stderr, "slowproxy: bad --target '%s': HOST:PORT\n",
			target);
		bad = 1;
	}
	if (bad)
		fputs(usage, stderr);
	return bad ? 2 : 0;
}

/* 1 if connecting to the target would reach the listening address sa:
 * every connection would make another. */
static int is_self(const struct sockaddr_storage *sa)
{
	if (sa->ss_family != target_addr.ss_family)
		return 0;
	if (sa->ss_family == AF_INET) {
		const struct sockaddr_in *l = (const void *)sa;
		const struct sockaddr_in *t = (const void *)&target_addr;
		return l->sin_port == t->sin_port &&
		       (l->sin_addr.s_addr == htonl(INADDR_ANY) ||
			l->sin_addr.s_addr == t->sin_addr.s_addr);
	}
	if (sa->ss_family == AF_INET6) {
		const struct sockaddr_in6 *l = (const void *)sa;
		const struct sockaddr_in6 *t = (const void *)&target_addr;
		return l->sin6_port == t->sin6_port &&
		       (IN6_IS_ADDR_UNSPECIFIED(&l->sin6_addr) ||
			IN6_ARE_ADDR_EQUAL(&l->sin6_addr, &t->sin6_addr));
	}
	return 0;
}

static int open_sockets(int *lfd_out)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai;
	struct sockaddr_storage sa;
	socklen_t salen = sizeof(sa);
	int err, lfd, one = 1;
	char port[16];

	err = getaddrinfo(opt.target_host, opt.target_port, &hints, &ai);
	if (err) {
		fprintf(stderr, "slowproxy: cannot resolve target '%s': %s\n",
			opt.target_host, gai_strerror(err));
		return 1;
	}
	memcpy(&target_addr, ai->ai_addr, ai->ai_addrlen);
	target_len = ai->ai_addrlen;
	freeaddrinfo(ai);

	hints.ai_flags = AI_PASSIVE;
	err = getaddrinfo(opt.listen_host, opt.listen_port, &hints, &ai);
	if (err) {
		fprintf(stderr, "slowproxy: cannot resolve listen '%s': %s\n",
			opt.listen_host, gai_strerror(err));
		return 1;
	}
	lfd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
		     0);
	if (lfd < 0 ||
	    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(lfd, ai->ai_addr, ai->ai_addrlen) || listen(lfd, 1024) ||
	    getsockname(lfd, (struct sockaddr *)&sa, &salen) ||
	    getnameinfo((struct sockaddr *)&sa, salen, NULL, 0, port,
			sizeof(port), NI_NUMERICSERV)) {
		fprintf(stderr, "slowproxy: cannot listen on '%s:%s': %s\n",
			opt.listen_host, opt.listen_port, strerror(errno));
		freeaddrinfo(ai);
		if (lfd >= 0)
			close(lfd);
		return 1;
	}
	freeaddrinfo(ai);
	if (is_self(&sa)) {
		fprintf(stderr,
			"slowproxy: the target '%s:%s' is the proxy itself\n",
			opt.target_host, opt.target_port);
		close(lfd);
		return 1;
	}
	printf("%s\n", port);
	fflush(stdout);
	*lfd_out = lfd;
	return 0;
}

/* Until SIGTERM or SIGINT: accept while under the cap, dump the stats on
 * SIGUSR1. */
static void serve(int lfd, int sfd)
{
	for (;;) {
		struct pollfd p[3] = {{.fd = sfd, .events = POLLIN},
				      {.fd = done_efd, .events = POLLIN},
				      {.fd = lfd, .events = POLLIN}};
		struct signalfd_siginfo si;
		eventfd_t ev;
		long n;

		pthread_mutex_lock(&conns_lock);
		n = nconns;
		pthread_mutex_unlock(&conns_lock);
		if (poll(p, n < opt.max_conns ? 3 : 2, -1) < 0)
			continue; /* EINTR */
		if (p[1].revents)
			eventfd_read(done_efd, &ev);
		if (p[0].revents &&
		    read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
			if (si.ssi_signo != SIGUSR1)
				return;
			stats_dump();
		}
		if (n < opt.max_conns && (p[2].revents & POLLIN)) {
			int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
			if (fd >= 0) {
				conn_start(fd);
			} else if (errno == EMFILE || errno == ENFILE ||
				   errno == ENOBUFS || errno == ENOMEM) {
				fprintf(stderr,
					"slowproxy: cannot accept: %s\n",
					strerror(errno));
				poll(NULL, 0, 100);
			}
		}
	}
}

/* Drop every connection and wait (a bounded time) for their threads. */
static void stop_all(void)
{
	uint64_t end = now_ns() + STOP_WAIT_MS * NS_PER_MS;
	struct conn *c;
	long n;

	atomic_store(&stopping, 1);
	pthread_mutex_lock(&conns_lock);
	LIST_FOREACH(c, &conns, all)
		conn_abort(c);
	pthread_mutex_unlock(&conns_lock);
	for (;;) {
		struct pollfd p = {.fd = done_efd, .events = POLLIN};
		eventfd_t ev;

		pthread_mutex_lock(&conns_lock);
		n = nconns;
		pthread_mutex_unlock(&conns_lock);
		if (!n || now_ns() >= end)
			break;
		if (poll(&p, 1, 100) > 0)
			eventfd_read(done_efd, &ev);
	}
	if (n)
		fprintf(stderr, "slowproxy: %ld connections did not end\n", n);
}

int main(int argc, char **argv)
{
	double down, up;
	sigset_t set;
	int lfd, sfd, rc;

	if ((rc = parse_args(argc, argv)))
		return rc;
	/* signals go to the accept loop's signalfd only: block them before
	 * any thread starts (threads inherit the mask) */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGUSR1);
	if (pthread_sigmask(SIG_BLOCK, &set, NULL) ||
	    (sfd = signalfd(-1, &set, SFD_CLOEXEC)) < 0 ||
	    (done_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
		fprintf(stderr, "slowproxy: cannot set up signals: %s\n",
			strerror(errno));
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	if (opt.log_path &&
	    (log_fd = open(opt.log_path,
			   O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)) <
		0) {
		fprintf(stderr, "slowproxy: cannot open the log '%s': %s\n",
			opt.log_path, strerror(errno));
		return 1;
	}
	down = opt.conn_mbps * 1e6;
	up = opt.responses_only ? 0 : down;
	chunk_down = chunk_for(down, opt.total_mbps * 1e6);
	chunk_up =
	    opt.responses_only ? BUF_SIZE : chunk_for(up, opt.total_mbps * 1e6);
	bucket_init(&total_down, opt.total_mbps * 1e6, chunk_down);
	bucket_init(&total_up, opt.responses_only ? 0 : opt.total_mbps * 1e6,
		    chunk_up);
	if (open_sockets(&lfd))
		return 1;

	serve(lfd, sfd);
	close(lfd);
	stop_all();
	if (opt.stats_path)
		stats_dump();
	fputs("slowproxy: ", stderr);
	stats_write(stderr, ' ', 0);
	if (log_fd >= 0)
		close(log_fd);
	return 0;
}
