/*
 * test_peer.c - the cache group's transport (fs/store/peer.h) with a real
 * server on 127.0.0.1: bytes come back exact, whole and by random ranges,
 * from files (sendfile) and from memory, from one thread and from eight;
 * a request is refused before the handler sees it unless signed with the
 * group's key within the allowed skew; a silent, refusing or full member
 * costs a bounded wait and PEER_EDOWN; one thread's requests share one
 * connection; a stop lets the requests under way finish.
 */
#include "fs/store/peer.h"
#include "lib/errors.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- helpers ---------------------------------------------------------- */

static uint64_t rnd_next(uint64_t *st)
{
	uint64_t z = (*st += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static uint64_t test_seed(void)
{
	const char *e = getenv("GRANARY_TEST_SEED");
	uint64_t seed = e ? strtoull(e, NULL, 0) : (uint64_t)time(NULL);
	cr_log_info("seed %" PRIu64 " (GRANARY_TEST_SEED)", seed);
	return seed;
}

static const unsigned char secret[PEER_SECRET_LEN] =
    "0123456789abcdef0123456789abcde";
static const unsigned char other_secret[PEER_SECRET_LEN] =
    "another group's secret, 32 byte";

/* ---- the objects and the handler ------------------------------------- */

/*
 * Each object is in memory (the shadow the answers are checked against)
 * and in a file. The key's first component says how the handler serves
 * it: "f/NAME" from the file (an fd: sendfile), "m/NAME" from a copy in
 * memory freed by free_fn, "p/NAME" from the shadow itself (no free_fn),
 * "l/NAME" from the shadow with more than was asked (the server must cut
 * it), "s/NAME" as f/ after a pause, "e/..." fails with EIO, "b/NAME" is
 * not here for has() (a fetch, on a fetcher thread) and its get waits for
 * the test to open the gate, then answers as f/; anything else is not
 * there.
 */
#define MAX_OBJS 16
struct obj {
	char name[32];
	unsigned char *data;
	size_t len;
	char path[PATH_MAX];
};

static struct obj objs[MAX_OBJS];
static int nobjs;
static char tmp_dir[64];
static atomic_int calls;    /* of every handler callback */
static atomic_int slow_in;  /* s/ gets that entered the handler */
static atomic_int frees;    /* free_fn calls */
static atomic_int wait_ms;  /* w/ gets wait this long in the handler */
static atomic_int gated_in; /* b/ gets that entered the handler */
static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cond = PTHREAD_COND_INITIALIZER;
static int gate_open; /* protected by gate_lock */
static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;
static char seen_warm[1100], seen_bad[1100]; /* protected by seen_lock */

static struct obj *find(const char *key, char *kind)
{
	const char *slash = strchr(key, '/');

	if (!slash || slash - key != 1)
		return NULL;
	*kind = key[0];
	for (int i = 0; i < nobjs; i++)
		if (!strcmp(objs[i].name, slash + 1))
			return &objs[i];
	return NULL;
}

static void counted_free(void *p)
{
	atomic_fetch_add(&frees, 1);
	free(p);
}

static int h_get(void *arg, const char *key, uint64_t off, uint64_t len,
		 struct peer_body *b)
{
	char kind = 0;
	struct obj *o;
	uint64_t n = 0;

	(void)arg;
	atomic_fetch_add(&calls, 1);
	if (!strncmp(key, "e/", 2))
		return EIO;
	if (!(o = find(key, &kind)))
		return ENOENT;
	if (off < o->len)
		n = o->len - off < len ? o->len - off : len;
	switch (kind) {
	case 'b':
		atomic_fetch_add(&gated_in, 1);
		pthread_mutex_lock(&gate_lock);
		while (!gate_open)
			pthread_cond_wait(&gate_cond, &gate_lock);
		pthread_mutex_unlock(&gate_lock);
		/* fall through */
	case 'w':
		sleep_ms(atomic_load(&wait_ms));
		/* fall through */
	case 's':
		if (kind == 's') {
			atomic_fetch_add(&slow_in, 1);
			sleep_ms(500);
		}
		/* fall through */
	case 'f':
		b->fd = open(o->path, O_RDONLY | O_CLOEXEC);
		if (b->fd < 0)
			return errno;
		b->off = off;
		b->len = n;
		return 0;
	case 'm': {
		void *copy = malloc(n ? n : 1);
		if (!copy)
			return ENOMEM;
		memcpy(copy, o->data + (n ? off : 0), n);
		b->data = copy;
		b->len = n;
		b->free_fn = counted_free;
		b->free_arg = copy;
		return 0;
	}
	case 'p':
		b->data = o->data + (n ? off : 0);
		b->len = n;
		return 0;
	case 'l':
		b->data = o->data + (n ? off : 0);
		b->len = off < o->len ? o->len - off : 0;
		return 0;
	default:
		return ENOENT;
	}
}

static int h_has(void *arg, const char *key)
{
	char kind;

	(void)arg;
	atomic_fetch_add(&calls, 1);
	if (!strncmp(key, "e/", 2))
		return EIO;
	return find(key, &kind) && kind != 'b' ? 0 : ENOENT;
}

static int h_warm(void *arg, const char *key)
{
	(void)arg;
	atomic_fetch_add(&calls, 1);
	pthread_mutex_lock(&seen_lock);
	snprintf(seen_warm, sizeof(seen_warm), "%s", key);
	pthread_mutex_unlock(&seen_lock);
	return strcmp(key, "no/such") ? 0 : ENOENT;
}

static void h_bad(void *arg, const char *key)
{
	(void)arg;
	atomic_fetch_add(&calls, 1);
	pthread_mutex_lock(&seen_lock);
	snprintf(seen_bad, sizeof(seen_bad), "%s", key);
	pthread_mutex_unlock(&seen_lock);
}

static const struct peer_handler handler = {h_get, h_has, h_warm, h_bad, NULL};

/* Objects of these sizes, or with big of random sizes up to 9 MiB too. */
static void make_objects(int big, uint64_t *rng)
{
	size_t sizes[MAX_OBJS] = {0, 1, 4095, 100000, 262144};
	int n = 5;

	if (big) {
		sizes[n++] = 4u << 20;
		sizes[n++] = 9u << 20;
		for (int i = 0; i < 4; i++)
			sizes[n++] = rnd_next(rng) % ((9u << 20) + 1);
	}
	snprintf(tmp_dir, sizeof(tmp_dir), "/tmp/granary-peer.XXXXXX");
	cr_assert(mkdtemp(tmp_dir));
	for (int i = 0; i < n; i++) {
		struct obj *o = &objs[i];
		snprintf(o->name, sizeof(o->name), "o%d", i);
		o->len = sizes[i];
		o->data = malloc(o->len ? o->len : 1);
		cr_assert(o->data);
		for (size_t j = 0; j + 8 <= o->len; j += 8) {
			uint64_t v = rnd_next(rng);
			memcpy(o->data + j, &v, 8);
		}
		for (size_t j = o->len & ~(size_t)7; j < o->len; j++)
			o->data[j] = (unsigned char)rnd_next(rng);
		snprintf(o->path, sizeof(o->path), "%s/o%d", tmp_dir, i);
		int fd = open(o->path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		cr_assert(fd >= 0);
		cr_assert_eq(write(fd, o->data, o->len), (ssize_t)o->len);
		close(fd);
	}
	nobjs = n;
}

/* ---- a server and a client per test ----------------------------------- */

static struct peer_server *srv;
static struct peer_client *cli;
static char srv_addr[96];
static uint64_t rng;

static void start_server_f(unsigned threads, unsigned max_conns,
			   unsigned fetchers)
{
	struct peer_server_opts o = {.addr = "127.0.0.1:0",
				     .secret = secret,
				     .threads = threads,
				     .fetchers = fetchers,
				     .max_conns = max_conns};
	cr_assert_eq(peer_server_start(&o, &handler, &srv), 0);
	snprintf(srv_addr, sizeof(srv_addr), "%s", peer_server_addr(srv));
}

static void start_server(unsigned threads, unsigned max_conns)
{
	start_server_f(threads, max_conns, 0);
}

static struct peer_client *open_client(const unsigned char *sec,
				       unsigned timeout_ms)
{
	struct peer_client_opts o = {
	    .secret = sec, .node = 0x1234, .timeout_ms = timeout_ms};
	struct peer_client *c;
	cr_assert_eq(peer_client_open(&o, &c), 0);
	return c;
}

/* The tests' client waits 10 s: they check bytes, and a loaded host (or
 * ASan) may take longer than the default 1 s; the tests of time open
 * clients of their own. */
#define TEST_TIMEOUT_MS 10000

static void setup_small(void)
{
	rng = test_seed();
	make_objects(0, &rng);
	start_server(0, 0);
	cli = open_client(secret, TEST_TIMEOUT_MS);
}

static void setup_big(void)
{
	rng = test_seed();
	make_objects(1, &rng);
	start_server(0, 0);
	cli = open_client(secret, TEST_TIMEOUT_MS);
}

static void teardown(void)
{
	char cmd[128];

	pthread_mutex_lock(&gate_lock); /* a failed test's gated gets end */
	gate_open = 1;
	pthread_cond_broadcast(&gate_cond);
	pthread_mutex_unlock(&gate_lock);
	peer_client_close(cli);
	cli = NULL;
	peer_server_stop(srv);
	srv = NULL;
	for (int i = 0; i < nobjs; i++)
		free(objs[i].data);
	nobjs = 0;
	if (tmp_dir[0]) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp_dir);
		if (system(cmd))
			cr_log_warn("cannot remove %s", tmp_dir);
	}
}

static unsigned port_of(const char *addr)
{
	return (unsigned)atoi(strrchr(addr, ':') + 1);
}

#define MISMATCH 1000 /* get_check: the bytes are not the object's */

/* GET [off, off + len) of key and compare with the shadow: 0, the error,
 * or MISMATCH (logged). Asserts nothing: threads call it too. */
static int get_check(struct peer_client *c, const char *kind,
		     const struct obj *o, uint64_t off, size_t len)
{
	char key[64];
	void *data = NULL;
	size_t got = 99, want = 0;
	int err;

	snprintf(key, sizeof(key), "%s/%s", kind, o->name);
	err = peer_get(c, srv_addr, key, off, len, &data, &got);
	if (err)
		return err;
	if (!len)
		len = SIZE_MAX; /* as for objstore_get: to the end */
	if (off < o->len)
		want = o->len - off < len ? o->len - off : len;
	if (!data || got != want ||
	    (want && memcmp(data, o->data + off, want))) {
		cr_log_error("%s [%" PRIu64 ", +%zu) of %zu: %zu bytes%s", key,
			     off, len, o->len, got,
			     got == want ? " that differ" : "");
		err = MISMATCH;
	}
	free(data);
	return err;
}

/* A random range of o: often whole, to the end, or past the end. */
static void random_range(uint64_t *r, const struct obj *o, uint64_t *off,
			 size_t *len, size_t max_len)
{
	uint64_t x = rnd_next(r) % 10;

	*off = o->len ? rnd_next(r) % (o->len + 1) : 0;
	*len = 1 + rnd_next(r) % max_len;
	if (x == 0) {
		*off = 0;
		*len = SIZE_MAX;
	} else if (x == 1) {
		*len = SIZE_MAX;
	} else if (x == 2) {
		*off = o->len + rnd_next(r) % 3;
	}
}

/* ---- raw HTTP, for requests the client would never send --------------- */

static int connect_to(unsigned port)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)port)};
	struct timeval tv = {10, 0};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	cr_assert(fd >= 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

/* Send method path with the given Authorization value (NULL: none) and
 * Range (NULL: none); the status of the answer. */
static int raw_request(const char *method, const char *path, const char *auth,
		       const char *range)
{
	char req[4096], resp[512];
	int fd = connect_to(port_of(srv_addr)), status = -1;
	ssize_t n;

	snprintf(req, sizeof(req),
		 "%s %s HTTP/1.1\r\nHost: x\r\n%s%s%s%s%s%s"
		 "Content-Length: 0\r\nConnection: close\r\n\r\n",
		 method, path, auth ? "Authorization: GRANARY-PEER " : "",
		 auth ? auth : "", auth ? "\r\n" : "", range ? "Range: " : "",
		 range ? range : "", range ? "\r\n" : "");
	cr_assert_eq(write(fd, req, strlen(req)), (ssize_t)strlen(req));
	n = read(fd, resp, sizeof(resp) - 1);
	if (n > 0) {
		resp[n] = '\0';
		sscanf(resp, "HTTP/1.%*d %d", &status);
	}
	close(fd);
	return status;
}

/* A request signed now (plus skew seconds) with sec. */
static int raw_signed(const unsigned char *sec, int64_t skew,
		      const char *method, const char *path, const char *range)
{
	char auth[160];

	peer_sign(sec, 0x77, (int64_t)time(NULL) + skew, method, path,
		  range ? range : "", auth, sizeof(auth));
	return raw_request(method, path, auth, range);
}

/*
 * The local ports of the established TCP connections to 127.0.0.1:port
 * (the client sides), from /proc/net/tcp: how many, the first in *first.
 * The file is read in pieces while the host's other sockets come and go,
 * which may skip or repeat a line: a count other than 1 is read again, a
 * few times, before it is believed.
 */
static int client_conns(unsigned port, unsigned *first)
{
	int n = 0;

	for (int tries = 0; tries < 10 && n != 1; tries++) {
		FILE *f = fopen("/proc/net/tcp", "r");
		char line[512];

		cr_assert(f);
		n = 0;
		while (fgets(line, sizeof(line), f)) {
			unsigned la, lp, ra, rp, st;
			if (sscanf(line, " %*d: %x:%x %x:%x %x", &la, &lp, &ra,
				   &rp, &st) != 5)
				continue;
			if (rp == port && st == 1 /* ESTABLISHED */) {
				if (!n && first)
					*first = lp;
				n++;
			}
		}
		fclose(f);
	}
	return n;
}

/* ---- a fake member that answers what it is told ----------------------- */

struct fake {
	int lfd;
	unsigned port;
	const char *answer; /* written after the request's headers */
	pthread_t th;
};

static void *fake_run(void *arg)
{
	struct fake *f = arg;
	char buf[8192];
	size_t n = 0;
	int fd = accept(f->lfd, NULL, NULL);

	if (fd < 0)
		return NULL;
	while (n < sizeof(buf) - 1) {
		ssize_t k = read(fd, buf + n, sizeof(buf) - 1 - n);
		if (k <= 0)
			break;
		n += (size_t)k;
		buf[n] = '\0';
		if (strstr(buf, "\r\n\r\n"))
			break;
	}
	if (write(fd, f->answer, strlen(f->answer)) < 0)
		cr_log_warn("fake member: write: %s", strerror(errno));
	close(fd); /* the client would keep the connection */
	return NULL;
}

/* A listening socket on 127.0.0.1 and a free port. */
static int listen_any(unsigned *port)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t al = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	cr_assert(fd >= 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(listen(fd, 16), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &al), 0);
	*port = ntohs(a.sin_port);
	return fd;
}

static void fake_start(struct fake *f, const char *answer)
{
	f->lfd = listen_any(&f->port);
	f->answer = answer;
	cr_assert_eq(pthread_create(&f->th, NULL, fake_run, f), 0);
}

static void fake_stop(struct fake *f)
{
	pthread_join(f->th, NULL);
	close(f->lfd);
}

TestSuite(peer, .timeout = 120);

/* ---- signatures ------------------------------------------------------- */

/* The signature is the documented one: the values were computed from
 * docs/operations.md's description with Python's hmac module. */
Test(peer, sign_known_answer)
{
	unsigned char s[PEER_SECRET_LEN];
	char buf[160];

	for (int i = 0; i < PEER_SECRET_LEN; i++)
		s[i] = (unsigned char)i;
	peer_sign(s, 0x0123456789abcdefull, 1700000000, "GET",
		  "/v1/o/chunks/1/a%2Bb", "bytes=0-99", buf, sizeof(buf));
	cr_assert_str_eq(buf, "node=0123456789abcdef,ts=1700000000,sig="
			      "ed8e3d63bdaba373229bfc24c2a9d9ba671cbb90d99d2a"
			      "3ab705b2b68c60a76a");
	peer_sign(s, 1, 1700000000, "HEAD", "/v1/o/x", "", buf, sizeof(buf));
	cr_assert_str_eq(buf, "node=0000000000000001,ts=1700000000,sig="
			      "df3e5d43f39128bdc8ee84e98f665e87e16d5c42f2fa49"
			      "524814c4c862ea1cb9");
}

/* ---- the server's address --------------------------------------------- */

Test(peer, server_addr)
{
	struct peer_server_opts o = {.addr = "127.0.0.1:0", .secret = secret};
	struct peer_server *s, *s2;
	char busy[64];

	cr_assert_eq(peer_server_start(&o, &handler, &s), 0);
	cr_assert_str_neq(peer_server_addr(s), "127.0.0.1:0");
	cr_assert_eq(strncmp(peer_server_addr(s), "127.0.0.1:", 10), 0);
	cr_assert_gt(port_of(peer_server_addr(s)), 0);
	snprintf(busy, sizeof(busy), "%s", peer_server_addr(s));
	o.addr = busy;
	cr_assert_eq(peer_server_start(&o, &handler, &s2), EADDRINUSE);
	const char *bad[] = {
	    "127.0.0.1",       ":80",	 "127.0.0.1:", "127.0.0.1:x",
	    "127.0.0.1:65536", "::1:80", "[::1:80"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		o.addr = bad[i];
		cr_assert_eq(peer_server_start(&o, &handler, &s2), EINVAL, "%s",
			     bad[i]);
	}
	o.addr = "192.0.2.1:0"; /* TEST-NET: not this host's */
	cr_assert_eq(peer_server_start(&o, &handler, &s2), EADDRNOTAVAIL);
	peer_server_stop(s);
	/* IPv6 when the host has it */
	o.addr = "[::1]:0";
	if (peer_server_start(&o, &handler, &s) == 0) {
		cr_assert_eq(strncmp(peer_server_addr(s), "[::1]:", 6), 0);
		peer_server_stop(s);
	}
}

/* ---- bytes ------------------------------------------------------------ */

/* Randomized data integrity: objects of random sizes up to 9 MiB, read
 * whole and by random ranges (to the end, past it) from a file (sendfile)
 * and from memory, each answer compared with the shadow. */
Test(peer, get_ranges_exact, .init = setup_big, .fini = teardown,
     .timeout = 300)
{
	static const char *const kinds[] = {"f", "m", "p"};
	struct peer_server_stats st;
	uint64_t off;
	size_t len;
	int gets = 0;

	for (int k = 0; k < 3; k++)
		for (int i = 0; i < nobjs; i++) {
			cr_assert_eq(
			    get_check(cli, kinds[k], &objs[i], 0, SIZE_MAX), 0);
			cr_assert_eq(get_check(cli, kinds[k], &objs[i], 0, 0),
				     0);
			gets += 2;
			for (int j = 0; j < 12; j++) {
				random_range(&rng, &objs[i], &off, &len,
					     objs[i].len + 2);
				cr_assert_eq(get_check(cli, kinds[k], &objs[i],
						       off, len),
					     0);
				gets++;
			}
		}
	peer_server_get_stats(srv, &st);
	cr_assert_geq(st.requests, (uint64_t)gets);
	cr_assert_eq(st.errors, 0);
	cr_assert_eq(st.refused_auth, 0);
}

/* The server never sends more than the range asked, whatever the
 * handler hands it. */
Test(peer, handler_longer_than_asked_is_cut, .init = setup_small,
     .fini = teardown)
{
	for (int i = 0; i < nobjs; i++) {
		cr_assert_eq(get_check(cli, "l", &objs[i], 0, 10), 0);
		cr_assert_eq(get_check(cli, "l", &objs[i], 1, 4000), 0);
	}
}

/* Memory bodies are freed once each, after they are sent. */
Test(peer, memory_bodies_freed, .init = setup_small, .fini = teardown)
{
	int before = atomic_load(&frees);
	int64_t until;

	for (int i = 0; i < nobjs; i++)
		cr_assert_eq(get_check(cli, "m", &objs[i], 0, SIZE_MAX), 0);
	until = now_ms() + 5000;
	while (atomic_load(&frees) - before < nobjs && now_ms() < until)
		sleep_ms(10);
	cr_assert_eq(atomic_load(&frees) - before, nobjs);
}

Test(peer, head_warm_bad, .init = setup_small, .fini = teardown)
{
	/* keys travel percent-encoded and arrive as they were */
	static const char odd[] = "x/a+b=c,d@e:f~g_h-i.j/k";

	cr_assert_eq(peer_has(cli, srv_addr, "f/o1"), 0);
	cr_assert_eq(peer_has(cli, srv_addr, "f/nope"), ENOENT);
	cr_assert_eq(peer_has(cli, srv_addr, "e/x"), EIO);
	cr_assert_eq(peer_warm(cli, srv_addr, odd), 0);
	pthread_mutex_lock(&seen_lock);
	cr_assert_str_eq(seen_warm, odd);
	pthread_mutex_unlock(&seen_lock);
	cr_assert_eq(peer_warm(cli, srv_addr, "no/such"), ENOENT);
	cr_assert_eq(peer_report_bad(cli, srv_addr, "f/o3"), 0);
	pthread_mutex_lock(&seen_lock);
	cr_assert_str_eq(seen_bad, "f/o3");
	pthread_mutex_unlock(&seen_lock);
}

Test(peer, missing_and_failing, .init = setup_small, .fini = teardown)
{
	struct peer_server_stats st;
	void *data = (void *)1;
	size_t got = 1;

	cr_assert_eq(peer_get(cli, srv_addr, "f/nope", 0, 10, &data, &got),
		     ENOENT);
	cr_assert_null(data);
	cr_assert_eq(peer_get(cli, srv_addr, "zz", 0, SIZE_MAX, &data, &got),
		     ENOENT);
	/* the handler's error: the member is up, it cannot serve now */
	cr_assert_eq(peer_get(cli, srv_addr, "e/x", 0, 10, &data, &got), EIO);
	peer_server_get_stats(srv, &st);
	cr_assert_eq(st.errors, 1);
	/* keys the protocol refuses are refused before they are sent */
	const char *bad[] = {"", "a/../b", "..", "a//b", "/a", "a/", "./a"};
	int before = atomic_load(&calls);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_assert_eq(peer_get(cli, srv_addr, bad[i], 0, 1, &data, &got),
			     EINVAL, "'%s'", bad[i]);
		cr_assert_eq(peer_has(cli, srv_addr, bad[i]), EINVAL);
	}
	cr_assert_eq(atomic_load(&calls), before);
}

/* ---- trust ------------------------------------------------------------ */

Test(peer, unsigned_or_badly_signed_refused, .init = setup_small,
     .fini = teardown)
{
	struct peer_client *wrong = open_client(other_secret, 0);
	struct peer_server_stats st;
	void *data = NULL;
	size_t got;
	int before, refused = 0;

	/* the raw requests are right when signed right */
	cr_assert_eq(raw_signed(secret, 0, "GET", "/v1/o/p/o3", NULL), 200);
	cr_assert_eq(raw_signed(secret, 0, "GET", "/v1/o/p/o3", "bytes=1-2"),
		     206);
	cr_assert_eq(
	    raw_signed(secret, -PEER_SKEW_S / 2, "HEAD", "/v1/o/p/o3", NULL),
	    200);
	before = atomic_load(&calls);

	cr_assert_eq(raw_request("GET", "/v1/o/p/o3", NULL, NULL), 401);
	cr_assert_eq(raw_request("POST", "/v1/bad/p/o3", NULL, NULL), 401);
	cr_assert_eq(
	    raw_request("GET", "/v1/o/p/o3", "node=1,ts=1,sig=2", NULL), 401);
	refused += 3;
	/* stale and future signatures */
	cr_assert_eq(
	    raw_signed(secret, -2 * PEER_SKEW_S, "GET", "/v1/o/p/o3", NULL),
	    401);
	cr_assert_eq(
	    raw_signed(secret, 2 * PEER_SKEW_S, "GET", "/v1/o/p/o3", NULL),
	    401);
	refused += 2;
	/* signed for something else than what is sent */
	char auth[160];
	peer_sign(secret, 0x77, (int64_t)time(NULL), "GET", "/v1/o/p/o2", "",
		  auth, sizeof(auth));
	cr_assert_eq(raw_request("GET", "/v1/o/p/o3", auth, NULL), 401);
	cr_assert_eq(raw_request("GET", "/v1/o/p/o2", auth, "bytes=0-0"), 401);
	cr_assert_eq(raw_request("HEAD", "/v1/o/p/o2", auth, NULL), 401);
	refused += 3;
	/* another group's secret, through the client */
	cr_assert_eq(
	    peer_get(wrong, srv_addr, "p/o3", 0, SIZE_MAX, &data, &got),
	    PEER_EAUTH);
	cr_assert_null(data);
	cr_assert_eq(peer_has(wrong, srv_addr, "p/o3"), PEER_EAUTH);
	cr_assert_eq(peer_warm(wrong, srv_addr, "p/o3"), PEER_EAUTH);
	cr_assert_eq(peer_report_bad(wrong, srv_addr, "p/o3"), PEER_EAUTH);
	refused += 4;

	cr_assert_eq(atomic_load(&calls), before, "the handler was called");
	peer_server_get_stats(srv, &st);
	cr_assert_eq(st.refused_auth, (uint64_t)refused);
	peer_client_close(wrong);
}

/* Paths that are not keys are refused, signed or not, before the
 * handler. */
Test(peer, bad_keys_refused, .init = setup_small, .fini = teardown)
{
	const char *paths[] = {"/v1/o/",	"/v1/o/a/../b", "/v1/o/%00",
			       "/v1/o/a%2F..",	"/v1/o/%zz",	"/v1/o/a%2",
			       "/v1/x/p/o3",	"/v1/o//a",	"/v1/o/a/",
			       "/v1/warm/a/./b"};
	int before = atomic_load(&calls);

	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		const char *m =
		    strncmp(paths[i], "/v1/warm/", 9) ? "GET" : "POST";
		cr_assert_eq(raw_signed(secret, 0, m, paths[i], NULL), 400,
			     "%s", paths[i]);
	}
	cr_assert_eq(raw_signed(secret, 0, "PUT", "/v1/o/p/o3", NULL), 400);
	cr_assert_eq(raw_signed(secret, 0, "GET", "/v1/o/p/o3", "bytes=5-1"),
		     400);
	cr_assert_eq(raw_signed(secret, 0, "GET", "/v1/o/p/o3", "bytes=-5"),
		     400);
	cr_assert_eq(
	    raw_signed(secret, 0, "GET", "/v1/o/p/o3", "bytes=0-1,3-4"), 400);
	cr_assert_eq(atomic_load(&calls), before);
	/* a percent-encoded key that is one is taken */
	cr_assert_eq(raw_signed(secret, 0, "GET", "/v1/o/p%2fo3", NULL), 200);
}

/* ---- failure ---------------------------------------------------------- */

/* A member that takes the connection and never answers: PEER_EDOWN at
 * the deadline (300 ms + 1 ms per 100 KiB), within a generous bound. */
Test(peer, silent_member_times_out, .init = setup_small, .fini = teardown)
{
	struct peer_client *c = open_client(secret, 300);
	unsigned port;
	int lfd = listen_any(&port); /* never accepts, never reads */
	char addr[64];
	void *data = NULL;
	size_t got;
	int64_t t0;

	snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
	t0 = now_ms();
	cr_assert_eq(peer_get(c, addr, "f/o1", 0, 4u << 20, &data, &got),
		     PEER_EDOWN);
	cr_assert_lt(now_ms() - t0, 3000);
	cr_assert_geq(now_ms() - t0, 250); /* it did wait for the answer */
	t0 = now_ms();
	cr_assert_eq(peer_has(c, addr, "f/o1"), PEER_EDOWN);
	cr_assert_lt(now_ms() - t0, 3000);
	close(lfd);
	peer_client_close(c);
}

/*
 * A member that fetches from a slow store answers in the store's time: the
 * deadline grows to three times the slowest recent answer, so an answer
 * slower than the fixed allowance is waited for, not given up on (the
 * asker would read the block from the store as well, and mark the member
 * down); a few fast answers bring it back down, so a silent member costs
 * the fixed allowance again.
 */
Test(peer, deadline_follows_slow_answers, .init = setup_small, .fini = teardown)
{
	struct peer_client *c = open_client(secret, 300);
	unsigned port;
	int lfd = listen_any(&port);
	char silent[64];
	void *data = NULL;
	size_t got;
	int64_t t0;

	snprintf(silent, sizeof(silent), "127.0.0.1:%u", port);
	/* 700 ms: past the fixed 300 ms, and nothing slow seen yet; the
	 * ask timed out after it was sent, the member answered a HEAD
	 * (there, and busy): asked again, it answers */
	atomic_store(&wait_ms, 700);
	cr_assert_eq(peer_get(c, srv_addr, "w/o1", 0, 1, &data, &got), 0,
		     "a busy member's answer, asked again");
	cr_assert_eq(got, 1);
	free(data);
	/* the timed-out deadline counts as slow: the next waits 3 x 300 */
	cr_assert_eq(peer_get(c, srv_addr, "w/o1", 0, 1, &data, &got), 0,
		     "an answer within three times a timed-out deadline");
	cr_assert_eq(got, 1);
	free(data);
	/* 700 ms answered: the next may take up to 2.1 s */
	atomic_store(&wait_ms, 1500);
	cr_assert_eq(peer_get(c, srv_addr, "w/o1", 0, 1, &data, &got), 0,
		     "an answer within three times the slowest recent one");
	free(data);
	/* fast answers: the slowest recent one decays */
	for (int i = 0; i < 40; i++) {
		cr_assert_eq(peer_get(c, srv_addr, "f/o1", 0, 1, &data, &got),
			     0);
		free(data);
	}
	t0 = now_ms();
	cr_assert_eq(peer_get(c, silent, "f/o1", 0, 1, &data, &got),
		     PEER_EDOWN);
	cr_assert_lt(now_ms() - t0, 1200,
		     "a silent member, after fast answers");
	close(lfd);
	peer_client_close(c);
}

/* The store's pace seen on this node raises the deadline before any
 * peer has answered slowly: the first asks of a cold epoch wait for an
 * owner that fetches at that pace instead of timing out. */
Test(peer, deadline_follows_store_pace, .init = setup_small, .fini = teardown)
{
	struct peer_client *c = open_client(secret, 300);
	void *data = NULL;
	size_t got;

	atomic_store(&wait_ms, 700);
	peer_client_note_store(c, 400); /* a fetch here took 400 ms */
	cr_assert_eq(peer_get(c, srv_addr, "w/o1", 0, 1, &data, &got), 0,
		     "an answer within three times the store's pace");
	cr_assert_eq(got, 1);
	free(data);
	peer_client_close(c);
}

Test(peer, refused_port_fails_fast, .init = setup_small, .fini = teardown)
{
	unsigned port;
	int lfd = listen_any(&port);
	char addr[64];
	void *data = NULL;
	size_t got;
	int64_t t0;

	close(lfd); /* nothing listens there now */
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
	t0 = now_ms();
	cr_assert_eq(peer_get(cli, addr, "f/o1", 0, SIZE_MAX, &data, &got),
		     PEER_EDOWN);
	cr_assert_eq(peer_warm(cli, addr, "f/o1"), PEER_EDOWN);
	cr_assert_lt(now_ms() - t0, 2000);
}

/* Answers that are not the protocol's. */
Test(peer, broken_answers_are_eproto, .init = setup_small, .fini = teardown)
{
	static const char *const answers[] = {
	    /* longer than the 10 bytes asked */
	    "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-19/*\r\n"
	    "Content-Length: 20\r\n\r\n01234567890123456789",
	    /* a whole object for a range */
	    "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789",
	    /* another range than asked */
	    "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 1-10/*\r\n"
	    "Content-Length: 10\r\n\r\n0123456789",
	    /* no range said */
	    "HTTP/1.1 206 Partial Content\r\nContent-Length: 10\r\n\r\n"
	    "0123456789",
	    /* no length */
	    "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-9/*\r\n"
	    "Connection: close\r\n\r\n0123456789",
	    /* a status of no meaning here */
	    "HTTP/1.1 302 Found\r\nLocation: /\r\nContent-Length: 0\r\n\r\n",
	    /* not HTTP */
	    "hello\r\n\r\n",
	};
	char addr[64];
	void *data = NULL;
	size_t got;

	for (size_t i = 0; i < sizeof(answers) / sizeof(answers[0]); i++) {
		struct fake f;
		fake_start(&f, answers[i]);
		snprintf(addr, sizeof(addr), "127.0.0.1:%u", f.port);
		cr_assert_eq(peer_get(cli, addr, "f/o1", 0, 10, &data, &got),
			     PEER_EPROTO, "answer %zu", i);
		cr_assert_null(data);
		fake_stop(&f);
	}
	/* a body cut short: the member went away */
	struct fake f;
	fake_start(&f, "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes "
		       "0-9/*\r\nContent-Length: 10\r\n\r\n01234");
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", f.port);
	cr_assert_eq(peer_get(cli, addr, "f/o1", 0, 10, &data, &got),
		     PEER_EDOWN);
	fake_stop(&f);
}

/* ---- connections ------------------------------------------------------ */

/* One thread's requests to one member go over one connection. */
Test(peer, one_connection_reused, .init = setup_small, .fini = teardown)
{
	unsigned port = port_of(srv_addr), first = 0, now = 0;
	struct peer_server_stats st;
	uint64_t off;
	size_t len;

	cr_assert_eq(get_check(cli, "f", &objs[3], 0, SIZE_MAX), 0);
	cr_assert_eq(client_conns(port, &first), 1, "%d connections",
		     client_conns(port, NULL));
	for (int i = 0; i < 200; i++) {
		const struct obj *o = &objs[rnd_next(&rng) % nobjs];
		random_range(&rng, o, &off, &len, o->len + 2);
		cr_assert_eq(get_check(cli, i % 2 ? "f" : "m", o, off, len), 0);
		if (i % 10 == 0)
			cr_assert_eq(peer_has(cli, srv_addr, "f/o2"), 0);
		if (i % 50 == 0)
			cr_assert_eq(peer_get(cli, srv_addr, "f/none", 0, 1,
					      &(void *){NULL}, &(size_t){0}),
				     ENOENT);
		cr_assert_eq(client_conns(port, &now), 1, "request %d", i);
		cr_assert_eq(now, first, "a new connection at request %d", i);
	}
	peer_server_get_stats(srv, &st);
	cr_assert_eq(st.conns, 1);
}

/*
 * More connections than max_conns: those past it are closed as they are
 * accepted, so a request on one fails at once with PEER_EDOWN (no wait
 * for the deadline); once connections go, requests are served again.
 */
Test(peer, max_conns_refused_at_accept, .fini = teardown)
{
	struct peer_server_stats st;
	int idle[4];
	void *data = NULL;
	size_t got;
	int64_t t0, until;

	rng = test_seed();
	make_objects(0, &rng);
	start_server(2, 4);
	cli = open_client(secret, TEST_TIMEOUT_MS);
	for (int i = 0; i < 4; i++)
		idle[i] = connect_to(port_of(srv_addr)); /* and say nothing */
	until = now_ms() + 5000;
	do {
		peer_server_get_stats(srv, &st);
	} while (st.conns < 4 && now_ms() < until && (sleep_ms(10), 1));
	cr_assert_eq(st.conns, 4);
	t0 = now_ms();
	cr_assert_eq(peer_get(cli, srv_addr, "f/o3", 0, SIZE_MAX, &data, &got),
		     PEER_EDOWN);
	/* refused at once, not after the deadline (10.6 s here) */
	cr_assert_lt(now_ms() - t0, 5000);
	peer_server_get_stats(srv, &st);
	cr_assert_eq(st.conns, 4);
	for (int i = 0; i < 4; i++)
		close(idle[i]);
	until = now_ms() + 5000;
	do {
		peer_server_get_stats(srv, &st);
	} while (st.conns > 0 && now_ms() < until && (sleep_ms(10), 1));
	cr_assert_eq(st.conns, 0);
	cr_assert_eq(get_check(cli, "f", &objs[3], 0, SIZE_MAX), 0);
}

/* ---- threads ---------------------------------------------------------- */

struct worker {
	pthread_t th;
	uint64_t rng;
	int gets, fails;
	atomic_int *stop; /* NULL: run gets requests */
	int ok;
	atomic_int down; /* PEER_EDOWN or EIO (a stop) came back */
};

static void *worker_run(void *arg)
{
	static const char *const kinds[] = {"f", "m", "p"};
	struct worker *w = arg;
	uint64_t off;
	size_t len;

	for (int i = 0; w->stop ? !atomic_load(w->stop) : i < w->gets; i++) {
		const struct obj *o = &objs[rnd_next(&w->rng) % nobjs];
		random_range(&w->rng, o, &off, &len, 1u << 20);
		int err = get_check(cli, kinds[i % 3], o, off, len);
		if (!err)
			w->ok++;
		else if (err == PEER_EDOWN || err == EIO)
			atomic_fetch_add(&w->down, 1);
		else
			w->fails++;
	}
	return NULL;
}

/* Eight threads, 200 random ranged gets each, all byte-exact. */
Test(peer, threads_exact, .init = setup_big, .fini = teardown, .timeout = 300)
{
	struct worker w[8];

	for (int i = 0; i < 8; i++) {
		w[i] = (struct worker){.rng = rnd_next(&rng), .gets = 200};
		cr_assert_eq(pthread_create(&w[i].th, NULL, worker_run, &w[i]),
			     0);
	}
	for (int i = 0; i < 8; i++)
		pthread_join(w[i].th, NULL);
	for (int i = 0; i < 8; i++) {
		cr_assert_eq(w[i].ok, 200,
			     "thread %d: %d ok, %d down, %d "
			     "other",
			     i, w[i].ok, w[i].down, w[i].fails);
	}
}

/* ---- stop ------------------------------------------------------------- */

struct slow_get {
	pthread_t th;
	int err;
	size_t got;
};

static void *slow_run(void *arg)
{
	struct slow_get *g = arg;
	void *data = NULL;

	g->err = peer_get(cli, srv_addr, "s/o3", 0, SIZE_MAX, &data, &g->got);
	if (!g->err &&
	    (g->got != objs[3].len || memcmp(data, objs[3].data, objs[3].len)))
		g->err = MISMATCH;
	free(data);
	return NULL;
}

/* A stop lets a request under way finish, then refuses. */
Test(peer, stop_waits_for_request_under_way, .init = setup_small,
     .fini = teardown)
{
	struct slow_get g = {0};
	void *data = NULL;
	size_t got;
	int64_t until = now_ms() + 5000;

	cr_assert_eq(pthread_create(&g.th, NULL, slow_run, &g), 0);
	while (!atomic_load(&slow_in) && now_ms() < until)
		sleep_ms(5);
	cr_assert_eq(atomic_load(&slow_in), 1);
	peer_server_stop(srv); /* while the handler sleeps */
	srv = NULL;
	pthread_join(g.th, NULL);
	cr_assert_eq(g.err, 0, "%s", gr_strerror(g.err));
	cr_assert_eq(g.got, objs[3].len);
	cr_assert_eq(peer_get(cli, srv_addr, "f/o3", 0, 1, &data, &got),
		     PEER_EDOWN);
}

/* A stop while four threads keep asking: every answer is exact or a
 * clean failure, nothing crashes (run under ASan: make SAN=1). */
Test(peer, stop_under_load, .init = setup_big, .fini = teardown, .timeout = 300)
{
	atomic_int stop = 0;
	struct worker w[4];
	int ok = 0;

	for (int i = 0; i < 4; i++) {
		w[i] = (struct worker){.rng = rnd_next(&rng), .stop = &stop};
		cr_assert_eq(pthread_create(&w[i].th, NULL, worker_run, &w[i]),
			     0);
	}
	sleep_ms(300);
	peer_server_stop(srv);
	srv = NULL;
	/* each thread asks again and is refused */
	for (int i = 0; i < 4; i++) {
		int64_t until = now_ms() + 10000;
		while (!atomic_load(&w[i].down) && now_ms() < until)
			sleep_ms(5);
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < 4; i++)
		pthread_join(w[i].th, NULL);
	for (int i = 0; i < 4; i++) {
		cr_assert_eq(w[i].fails, 0);
		cr_assert_gt(atomic_load(&w[i].down), 0,
			     "thread %d: no refusal after the stop", i);
		ok += w[i].ok;
	}
	cr_assert_gt(ok, 0);
}

/* ---- fetches off the poll threads -------------------------------------- */

struct gated_get {
	pthread_t th;
	const char *key; /* b/oN */
	int obj;
	int err;
	atomic_int done;
};

static void *gated_run(void *arg)
{
	struct gated_get *g = arg;
	void *data = NULL;
	size_t got = 0;

	g->err = peer_get(cli, srv_addr, g->key, 0, SIZE_MAX, &data, &got);
	if (!g->err &&
	    (got != objs[g->obj].len || memcmp(data, objs[g->obj].data, got)))
		g->err = MISMATCH;
	free(data);
	atomic_store(&g->done, 1);
	return NULL;
}

static void gate_release(void)
{
	pthread_mutex_lock(&gate_lock);
	gate_open = 1;
	pthread_cond_broadcast(&gate_cond);
	pthread_mutex_unlock(&gate_lock);
}

/* The gate opened arg ms on (NULL: 300), a thread's. */
static void *gate_later(void *arg)
{
	sleep_ms(arg ? (int)(intptr_t)arg : 300);
	gate_release();
	return NULL;
}

static void setup_one_thread(void)
{
	rng = test_seed();
	make_objects(0, &rng);
	atomic_store(&gated_in, 0);
	gate_open = 0;
	start_server_f(1, 0, 1); /* one poll thread, one fetcher */
	cli = open_client(secret, TEST_TIMEOUT_MS);
}

/* A fetch that takes long (the store, for an asker) does not hold the
 * poll thread: with one poll thread and the fetch still under way, a
 * get of what the cache holds (and a HEAD) is answered at once, and the
 * fetch's asker then gets its bytes exact. */
Test(peer, hit_not_held_behind_fetch, .init = setup_one_thread,
     .fini = teardown)
{
	struct gated_get g = {.key = "b/o3", .obj = 3};
	int64_t until = now_ms() + 5000;

	cr_assert_eq(pthread_create(&g.th, NULL, gated_run, &g), 0);
	while (!atomic_load(&gated_in) && now_ms() < until)
		sleep_ms(5);
	cr_assert_eq(atomic_load(&gated_in), 1, "the fetch did not start");
	/* the fetch is held at the gate: others are answered meanwhile */
	for (int i = 0; i < 4; i++) {
		struct peer_client *c = open_client(secret, 3000);
		cr_assert_eq(get_check(c, "f", &objs[4], 0, SIZE_MAX), 0);
		cr_assert_eq(get_check(c, "m", &objs[2], 10, 100), 0);
		cr_assert_eq(peer_has(c, srv_addr, "f/o1"), 0);
		peer_client_close(c);
	}
	cr_assert_eq(atomic_load(&g.done), 0, "the gated get ended early");
	gate_release();
	pthread_join(g.th, NULL);
	cr_assert_eq(g.err, 0, "%s", gr_strerror(g.err));
}

/* A get whose owner fetches longer than the get's deadline: the member
 * still answers a HEAD (its poll thread is free), so the asker asks
 * again and gets the bytes, instead of giving up and reading the store
 * too. */
Test(peer, get_waits_for_member_fetching, .init = setup_one_thread,
     .fini = teardown)
{
	struct peer_client *c = open_client(secret, 300);
	pthread_t opener;
	void *data = NULL;
	size_t got = 0;

	/* the gate opens 2 s on: past the first deadline (300 ms and 655
	 * for the 64 MiB a get to the end is allowed; nothing slow seen) */
	cr_assert_eq(
	    pthread_create(&opener, NULL, gate_later, (void *)(intptr_t)2000),
	    0);
	int err = peer_get(c, srv_addr, "b/o4", 0, SIZE_MAX, &data, &got);
	pthread_join(opener, NULL);
	cr_assert_eq(err, 0, "%s", gr_strerror(err));
	cr_assert_eq(got, objs[4].len);
	cr_assert(!memcmp(data, objs[4].data, got));
	free(data);
	peer_client_close(c);
}

/* A stop while fetches wait for the one fetcher: the one under way
 * finishes with its bytes, the one queued is answered with an error at
 * once (its handler never asked), nothing is left suspended. */
Test(peer, stop_answers_queued_fetches, .init = setup_one_thread,
     .fini = teardown)
{
	struct gated_get a = {.key = "b/o3", .obj = 3};
	struct gated_get b = {.key = "b/o4", .obj = 4};
	int64_t until = now_ms() + 5000;

	cr_assert_eq(pthread_create(&a.th, NULL, gated_run, &a), 0);
	while (!atomic_load(&gated_in) && now_ms() < until)
		sleep_ms(5);
	cr_assert_eq(atomic_load(&gated_in), 1);
	cr_assert_eq(pthread_create(&b.th, NULL, gated_run, &b), 0);
	sleep_ms(200); /* b queued behind a (nothing to wait on: best effort) */
	/* the gate opens while the stop waits for what is under way */
	pthread_t opener;
	cr_assert_eq(pthread_create(&opener, NULL, gate_later, NULL), 0);
	peer_server_stop(srv);
	srv = NULL;
	pthread_join(opener, NULL);
	pthread_join(a.th, NULL);
	pthread_join(b.th, NULL);
	cr_assert_eq(a.err, 0, "%s", gr_strerror(a.err));
	cr_assert_eq(atomic_load(&gated_in), 1, "the queued fetch was asked");
	cr_assert(b.err != 0 && b.err != MISMATCH, "the queued get: %s",
		  gr_strerror(b.err));
}
