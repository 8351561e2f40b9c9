/*
 * peer.h - the transport between the members of a cache group: a small
 * HTTP/1.1 server each serving member runs (libmicrohttpd: a bounded pool
 * of threads and connections, idle connections closed), and the client
 * that asks the others (libcurl: one easy handle per thread and peer,
 * connections kept and reused). It moves bytes of objects by key and knows
 * nothing of groups, placement or caches: the server answers through the
 * handler it is given, the client asks the address it is given.
 *
 * Requests (docs/operations.md "Cache groups", the protocol):
 *   GET  /v1/o/KEY   [Range: bytes=A-B]  the bytes of object KEY (200/206);
 *                                        404 when the handler has none
 *   HEAD /v1/o/KEY                        200 when the handler has it whole
 *                                        here (no fetch), else 404
 *   POST /v1/warm/KEY                     fetch KEY into the cache (204)
 *   POST /v1/bad/KEY                      a reader found this copy bad (204)
 * KEY is the object key, percent-encoded as a path.
 *
 * Trust: every request carries
 *   Authorization: GRANARY-PEER node=<16 hex>,ts=<unix s>,sig=<64 hex>
 * sig = HMAC-SHA256(k, METHOD "\n" PATH "\n" RANGE "\n" ts "\n" node), k =
 * HKDF-SHA256(group secret, info "granary peer v1"): the secret itself
 * never travels. The server refuses (401, nothing read) a request without
 * it, with a wrong signature, or with ts more than PEER_SKEW_S away from
 * its clock. Answers are not signed: a reader checks every block it gets
 * (checksum, or the encryption's tag) and treats a bad one as a miss.
 * Bytes travel in the clear (the volume's encryption, when on, is above:
 * members exchange ciphertext and never need the volume key).
 *
 * Errors (lib/errors.h): PEER_EDOWN (cannot connect, reset, timed out:
 * the caller goes to the store and may skip the peer for a while),
 * PEER_EAUTH (401: the peers' secrets differ), PEER_EPROTO (an answer
 * that is not the protocol's), ENOENT (404), or a positive errno.
 */
#ifndef GRANARY_PEER_H
#define GRANARY_PEER_H

#include <stddef.h>
#include <stdint.h>

#define PEER_SECRET_LEN 32
#define PEER_SKEW_S	300 /* clocks of members may differ this much */

/* ---- server ----------------------------------------------------------- */

/*
 * What the server hands back for a GET: either a range of an open file,
 * sent from the page cache without a copy (sendfile) and closed by the
 * server when sent, or bytes in memory, freed with free_fn(free_arg) when
 * sent (free_fn NULL: nothing to free).
 */
struct peer_body {
	int fd; /* >= 0: send [off, off + len) of this file */
	uint64_t off;
	const void *data; /* fd < 0: send len bytes from here */
	uint64_t len;
	void (*free_fn)(void *free_arg);
	void *free_arg;
};

/* The server's callbacks, called on its threads, at once for different
 * keys (and for the same key: the handler shares a fetch). Return 0 or an
 * error: ENOENT is 404, anything else 503 (the asker goes to the store).
 * has() is asked first for every GET and warm, on a thread that serves
 * other connections: it must not wait (a lookup); get and warm of a key
 * it says is here are then asked on that thread too, the others on a
 * fetcher thread. */
struct peer_handler {
	/* the bytes [off, off + len) of key (len UINT64_MAX: to its end; the
	 * answer may be shorter at the end of the object) */
	int (*get)(void *arg, const char *key, uint64_t off, uint64_t len,
		   struct peer_body *body);
	/* 0 when key is cached here whole, ENOENT when not (no fetch) */
	int (*has)(void *arg, const char *key);
	/* fetch key into the cache (may return before it is done) */
	int (*warm)(void *arg, const char *key);
	/* a reader found the bytes of key it got from here bad */
	void (*bad)(void *arg, const char *key);
	void *arg;
};

struct peer_server_opts {
	const char *addr; /* "HOST:PORT" to listen on; port 0: any free one */
	const unsigned char *secret; /* PEER_SECRET_LEN bytes (the group's) */
	unsigned threads;	     /* 0: 4; they never wait on a fetch */
	unsigned fetchers;	 /* 0: 16: threads asking the handler for what
				    has() says is not here (gets and warms) */
	unsigned max_conns;	 /* 0: 64; more are refused at accept */
	unsigned idle_timeout_s; /* 0: 30 */
};

struct peer_server_stats {
	uint64_t requests, refused_auth, errors;
	uint64_t bytes_sent;
	uint64_t conns; /* open now */
};

struct peer_server;

/* Listen and serve; the handler is used until peer_server_stop. Errors:
 * EADDRINUSE, EADDRNOTAVAIL, EINVAL (a malformed addr), ENOMEM. */
int peer_server_start(const struct peer_server_opts *o,
		      const struct peer_handler *h, struct peer_server **out);
/* The address it listens on ("HOST:PORT", the port chosen when 0). */
const char *peer_server_addr(const struct peer_server *s);
void peer_server_get_stats(struct peer_server *s, struct peer_server_stats *st);
/* Stop accepting, wait for the requests under way, free. NULL-safe. */
void peer_server_stop(struct peer_server *s);

/* ---- client ----------------------------------------------------------- */

struct peer_client_opts {
	const unsigned char *secret; /* PEER_SECRET_LEN bytes */
	uint64_t node;		     /* this member's node id, sent */
	unsigned connect_timeout_ms; /* 0: 200 */
	/* a request's deadline: this plus 1 ms per 100 KiB asked (0: 1000),
	 * raised to three times the slowest recent answer of a get or fetch
	 * from the store here (a member fetching from a busy store answers
	 * in the store's time),
	 * at most 10 s: the longest any read waits on a peer that does not
	 * answer */
	unsigned timeout_ms;
};

struct peer_client;

int peer_client_open(const struct peer_client_opts *o,
		     struct peer_client **out);
void peer_client_close(struct peer_client *c); /* NULL-safe */

/* GET [off, off + len) of key from the member at addr (len SIZE_MAX, or
 * 0 as for objstore_get: to its end) into *data (malloc'd, *got bytes;
 * shorter at the end of the object, 0 bytes from past it). Thread-safe:
 * each thread has its own connections. */
int peer_get(struct peer_client *c, const char *addr, const char *key,
	     uint64_t off, size_t len, void **data, size_t *got);
/* A fetch from the store took ms on this node: a member fetching for
 * this node takes as long (the same store, as busy), so the gets'
 * deadline is raised as by an answer that slow (peer_client_opts). Early
 * in a cold epoch this is the only pace known. */
void peer_client_note_store(struct peer_client *c, long ms);
/* HEAD: 0 when the member at addr has key whole, ENOENT when not. */
int peer_has(struct peer_client *c, const char *addr, const char *key);
/* POST /v1/warm/KEY: the member at addr fetches key into its cache. */
int peer_warm(struct peer_client *c, const char *addr, const char *key);
/* POST /v1/bad/KEY: the copy of key got from addr failed its check. */
int peer_report_bad(struct peer_client *c, const char *addr, const char *key);

/* The authorization value for a request (for tests and the server):
 * "node=...,ts=...,sig=..." into buf (cap >= 128). */
void peer_sign(const unsigned char *secret, uint64_t node, int64_t ts,
	       const char *method, const char *path, const char *range,
	       char *buf, size_t cap);

#endif
