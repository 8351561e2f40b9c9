/*
 * test_objstore_s3.c - the s3 backend against answers no well-behaved
 * server gives: a scripted HTTP server on 127.0.0.1 answers each request
 * with bytes set by the test (a body shorter than its Content-Length, a
 * 206 with less or other than the range asked, Content-Length 0 for a
 * range of 100 bytes, a header too long for curl, a size of a petabyte).
 * A get must never return fewer bytes than the object has as a success,
 * and ENOMEM must only mean out of memory.
 */
#include "fs/store/objstore.h"
#include "lib/errors.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- the scripted server ---- */

#define FAKE_MAX_ANSWERS 4

/*
 * One connection at a time, one request per connection: the request's
 * head is read, the next answer of the script is sent (the last one
 * again once the script ran out) and the connection closed, so that an
 * answer shorter than its Content-Length is a cut body to the client.
 */
static struct {
	int lfd, port;
	const char *answer[FAKE_MAX_ANSWERS];
	size_t len[FAKE_MAX_ANSWERS];
	int nanswers;
	int requests; /* atomic: requests answered (counted as answered) */
	int stop;     /* atomic: set by fake_stop */
	int running;
	char last_range[128]; /* the Range of the last request; thread's */
	pthread_t thr;
} fake = {.lfd = -1};

/* Read a request's head (GET and HEAD have no body) from fd; 0 or -1. */
static int fake_read_head(int fd)
{
	char buf[16384];
	size_t n = 0;

	while (n < sizeof(buf) - 1) {
		ssize_t k = recv(fd, buf + n, sizeof(buf) - 1 - n, 0);
		if (k <= 0)
			return -1;
		n += (size_t)k;
		buf[n] = '\0';
		if (strstr(buf, "\r\n\r\n")) {
			const char *r = strcasestr(buf, "\r\nRange: ");
			fake.last_range[0] = '\0';
			if (r)
				sscanf(r + 9, "%127[^\r]", fake.last_range);
			return 0;
		}
	}
	return -1;
}

static void *fake_main(void *arg)
{
	struct pollfd pfd = {.fd = fake.lfd, .events = POLLIN};

	(void)arg;
	while (!__atomic_load_n(&fake.stop, __ATOMIC_ACQUIRE)) {
		if (poll(&pfd, 1, 50) <= 0)
			continue;
		int fd = accept(fake.lfd, NULL, NULL);
		if (fd < 0)
			continue;
		if (fake_read_head(fd) == 0) {
			int i =
			    __atomic_load_n(&fake.requests, __ATOMIC_RELAXED);
			if (i >= fake.nanswers)
				i = fake.nanswers - 1;
			/* counted before the answer goes: the client may have it
			 * and the test check the count before a count after */
			__atomic_add_fetch(&fake.requests, 1, __ATOMIC_RELEASE);
			/* the client may hang up at any point: no SIGPIPE */
			for (size_t off = 0; off < fake.len[i];) {
				ssize_t k =
				    send(fd, fake.answer[i] + off,
					 fake.len[i] - off, MSG_NOSIGNAL);
				if (k <= 0)
					break;
				off += (size_t)k;
			}
		}
		close(fd);
	}
	return NULL;
}

static void fake_stop(void)
{
	if (fake.running) {
		__atomic_store_n(&fake.stop, 1, __ATOMIC_RELEASE);
		pthread_join(fake.thr, NULL);
		fake.running = 0;
	}
	if (fake.lfd >= 0)
		close(fake.lfd);
	fake.lfd = -1;
}

TestSuite(objstore_s3, .fini = fake_stop);

/* Serve the answers given (NULL-terminated, each a C string) in turn;
 * the port. */
static int fake_start(const char *first, ...)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t alen = sizeof(a);
	va_list ap;

	fake.nanswers = 0;
	va_start(ap, first);
	for (const char *s = first; s; s = va_arg(ap, const char *)) {
		cr_assert_lt(fake.nanswers, FAKE_MAX_ANSWERS);
		fake.answer[fake.nanswers] = s;
		fake.len[fake.nanswers++] = strlen(s);
	}
	va_end(ap);
	cr_assert_gt(fake.nanswers, 0);
	fake.requests = fake.stop = 0;
	fake.lfd = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert_geq(fake.lfd, 0);
	cr_assert_eq(bind(fake.lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(listen(fake.lfd, 16), 0);
	cr_assert_eq(getsockname(fake.lfd, (struct sockaddr *)&a, &alen), 0);
	fake.port = ntohs(a.sin_port);
	cr_assert_eq(pthread_create(&fake.thr, NULL, fake_main, NULL), 0);
	fake.running = 1;
	return fake.port;
}

/* The store at the scripted server, one attempt per request (window 0)
 * unless told otherwise. */
static struct objstore *fake_store(int port, unsigned window_ms)
{
	struct objstore_creds creds = {"AK", "SK", NULL};
	struct objstore *s = NULL;
	char url[128];

	snprintf(url, sizeof(url), "s3+http://127.0.0.1:%d/bucket", port);
	cr_assert_eq(objstore_open(url, &creds, &s), 0);
	objstore_set_retry_window(s, window_ms);
	return s;
}

/* The object the answers are cut from: byte i is 'a' + i % 26. */
static char obj[1000];

static void obj_init(void)
{
	for (size_t i = 0; i < sizeof(obj); i++)
		obj[i] = (char)('a' + i % 26);
}

/* An answer: STATUS line, then HEADERS ("Name: value\r\n" each), then
 * body_len bytes of obj from body_off. Static storage, one per slot. */
static const char *answer(int slot, const char *status, const char *headers,
			  size_t body_off, size_t body_len)
{
	static char buf[FAKE_MAX_ANSWERS][4096];
	int n = snprintf(buf[slot], sizeof(buf[slot]),
			 "HTTP/1.1 %s\r\n%sConnection: close\r\n\r\n", status,
			 headers);

	cr_assert(n > 0 && (size_t)n + body_len < sizeof(buf[slot]));
	memcpy(buf[slot] + n, obj + body_off, body_len);
	buf[slot][(size_t)n + body_len] = '\0';
	return buf[slot];
}

/* get [off, off + len) from a store at port: its error; *got, and the
 * bytes checked against obj when it succeeds. */
static int get_from(int port, uint64_t off, size_t len, size_t *got)
{
	struct objstore *s = fake_store(port, 0);
	void *d = NULL;

	*got = 12345;
	int err = objstore_get(s, "k", off, len, &d, got);
	if (!err)
		cr_assert(*got == 0 || !memcmp(d, obj + off, *got),
			  "get @%llu+%zu: wrong bytes", (unsigned long long)off,
			  len);
	free(d);
	objstore_close(s);
	return err;
}

/* A get whose answer is not the object: no success, and no ENOMEM. */
static void expect_refused(uint64_t off, size_t len, int want_err)
{
	size_t got;
	int err = get_from(fake.port, off, len, &got);

	cr_assert_eq(
	    err, want_err, "get @%llu+%zu: %s (%d), %zu bytes; want %s (%d)",
	    (unsigned long long)off, len, err ? gr_strerror(err) : "ok", err,
	    err ? 0 : got, gr_strerror(want_err), want_err);
}

static void expect_bytes(uint64_t off, size_t len, size_t want_got)
{
	size_t got;
	int err = get_from(fake.port, off, len, &got);

	cr_assert_eq(err, 0, "get @%llu+%zu: %s", (unsigned long long)off, len,
		     gr_strerror(err));
	cr_assert_eq(got, want_got, "get @%llu+%zu: %zu bytes, want %zu",
		     (unsigned long long)off, len, got, want_got);
}

/* ---- answers that are the object ---- */

Test(objstore_s3, good_answers_are_taken)
{
	obj_init();
	/* a range inside the object */
	fake_start(answer(0, "206 Partial Content",
			  "Content-Range: bytes 100-149/1000\r\n"
			  "Content-Length: 50\r\n",
			  100, 50),
		   NULL);
	expect_bytes(100, 50, 50);
	cr_assert_str_eq(fake.last_range, "bytes=100-149");
	fake_stop();
	/* a range past the object's end: what it has */
	fake_start(answer(0, "206 Partial Content",
			  "Content-Range: bytes 990-999/1000\r\n"
			  "Content-Length: 10\r\n",
			  990, 10),
		   NULL);
	expect_bytes(990, 100, 10);
	expect_bytes(990, 0, 10); /* "bytes=990-" */
	fake_stop();
	/* an empty object, whole */
	fake_start(answer(0, "200 OK", "Content-Length: 0\r\n", 0, 0), NULL);
	expect_bytes(0, 0, 0);
	fake_stop();
	/* a server that ignores Range, from 0: the whole (short) object */
	fake_start(answer(0, "200 OK", "Content-Length: 30\r\n", 0, 30), NULL);
	expect_bytes(0, 100, 30);
	expect_bytes(0, 10, 10);
	fake_stop();
	/* more than asked from 0 (s3rver's "bytes=0-0"): the head of it */
	fake_start(answer(0, "206 Partial Content",
			  "Content-Range: bytes 0-29/30\r\n"
			  "Content-Length: 30\r\n",
			  0, 30),
		   NULL);
	expect_bytes(0, 1, 1);
	fake_stop();
	/* a range to the end of an object whose size is not said */
	fake_start(answer(0, "206 Partial Content",
			  "Content-Range: bytes 10-19/*\r\n"
			  "Content-Length: 10\r\n",
			  10, 10),
		   NULL);
	expect_bytes(10, 0, 10);
}

/* ---- answers with fewer bytes than the object has ---- */

/* Content-Length 0 for a non-empty range: the body is not the range its
 * Content-Range says. */
Test(objstore_s3, empty_body_for_a_range_is_eio)
{
	obj_init();
	fake_start(answer(0, "206 Partial Content",
			  "Content-Range: bytes 0-99/1000\r\n"
			  "Content-Length: 0\r\n",
			  0, 0),
		   NULL);
	expect_refused(0, 100, EIO);
}

/* A 206 with less than asked while the object has more: the server's
 * doing (HTTP allows it), transient; retried, the next answer is whole. */
Test(objstore_s3, part_of_the_range_is_transient)
{
	obj_init();
	fake_start(answer(0, "206 Partial Content",
			  "Content-Range: bytes 0-9/1000\r\n"
			  "Content-Length: 10\r\n",
			  0, 10),
		   NULL);
	expect_refused(0, 100, OBJSTORE_ESERVER);
	fake_stop();
	fake_start(answer(0, "206 Partial Content",
			  "Content-Range: bytes 500-509/1000\r\n"
			  "Content-Length: 10\r\n",
			  500, 10),
		   NULL);
	expect_refused(500, 0, OBJSTORE_ESERVER); /* "bytes=500-" */
	fake_stop();

	/* within the retry window the wrappers ask again */
	fake_start(answer(0, "206 Partial Content",
			  "Content-Range: bytes 0-9/1000\r\n"
			  "Content-Length: 10\r\n",
			  0, 10),
		   answer(1, "206 Partial Content",
			  "Content-Range: bytes 0-99/1000\r\n"
			  "Content-Length: 100\r\n",
			  0, 100),
		   NULL);
	struct objstore *s = fake_store(fake.port, 30000);
	void *d = NULL;
	size_t got = 0;
	int err = objstore_get(s, "k", 0, 100, &d, &got);
	cr_assert_eq(err, 0, "%s", gr_strerror(err));
	cr_assert_eq(got, 100);
	cr_assert_eq(memcmp(d, obj, 100), 0);
	cr_assert_eq(__atomic_load_n(&fake.requests, __ATOMIC_ACQUIRE), 2);
	free(d);
	objstore_close(s);
}

/* A 206 that is not the range asked, or does not say which it is. */
Test(objstore_s3, other_range_is_eio)
{
	obj_init();
	fake_start(answer(0, "206 Partial Content",
			  "Content-Range: bytes 5-104/1000\r\n"
			  "Content-Length: 100\r\n",
			  5, 100),
		   NULL);
	expect_refused(0, 100, EIO);
	fake_stop();
	fake_start(
	    answer(0, "206 Partial Content", "Content-Length: 100\r\n", 0, 100),
	    NULL);
	expect_refused(0, 100, EIO);
	fake_stop();
	fake_start(answer(0, "206 Partial Content",
			  "Content-Range: bytes 0-99\r\n"
			  "Content-Length: 100\r\n",
			  0, 100),
		   NULL);
	expect_refused(0, 100, EIO);
}

/* A body cut before its Content-Length: transient, as a reset is. */
Test(objstore_s3, cut_body_is_transient)
{
	obj_init();
	fake_start(answer(0, "200 OK", "Content-Length: 1000\r\n", 0, 10),
		   NULL);
	expect_refused(0, 0, OBJSTORE_EUNREACH);
	fake_stop();
	fake_start(answer(0, "206 Partial Content",
			  "Content-Range: bytes 0-99/1000\r\n"
			  "Content-Length: 100\r\n",
			  0, 10),
		   NULL);
	expect_refused(0, 100, OBJSTORE_EUNREACH);
}

/* A head must say the size: no Content-Length is no size 0. */
Test(objstore_s3, head_without_size_is_eio)
{
	obj_init();
	fake_start(answer(0, "200 OK", "", 0, 0), NULL);
	struct objstore *s = fake_store(fake.port, 0);
	uint64_t size = 777;
	cr_assert_eq(objstore_head(s, "k", &size), EIO);
	objstore_close(s);
	fake_stop();
	fake_start(answer(0, "200 OK", "Content-Length: 1000\r\n", 0, 0), NULL);
	s = fake_store(fake.port, 0);
	cr_assert_eq(objstore_head(s, "k", &size), 0);
	cr_assert_eq(size, 1000);
	objstore_close(s);
}

/* ---- bad answers are no shortage of memory ---- */

/* A size of a petabyte, then 3 bytes: the buffer grows with the bytes
 * that come, not with what a header says. */
Test(objstore_s3, huge_content_length_is_not_enomem)
{
	obj_init();
	fake_start(
	    answer(0, "200 OK", "Content-Length: 1000000000000000\r\n", 0, 3),
	    NULL);
	expect_refused(0, 0, OBJSTORE_EUNREACH);
}

/* A header line past curl's limit (100 KB): libcurl 7.x says "out of
 * memory" for it. */
Test(objstore_s3, header_past_curls_limit_is_not_enomem)
{
	enum { LINE = 300 * 1024 };
	char *a = malloc(LINE + 256);

	obj_init();
	cr_assert_not_null(a);
	int n = sprintf(a, "HTTP/1.1 200 OK\r\nX-Big: ");
	memset(a + n, 'x', LINE);
	strcpy(a + n + LINE, "\r\nContent-Length: 1\r\nConnection: close"
			     "\r\n\r\na");
	fake_start(a, NULL);
	size_t got;
	int err = get_from(fake.port, 0, 0, &got);
	cr_assert_neq(err, 0);
	cr_assert_neq(err, ENOMEM, "a long header said ENOMEM");
	cr_assert_eq(err, EIO, "%s", gr_strerror(err));
	fake_stop();
	free(a);
}
