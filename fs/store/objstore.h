/*
 * objstore.h - the object store interface: get (with byte range), put,
 * delete, head, list by prefix; one backend per URL scheme.
 *
 *   file:///DIR[:/DIR2...]   a pool of local (HDD) directories; each object
 *                            lives in one directory chosen by a hash of its
 *                            key; writes are temp file + fsync + rename
 *                            (lazy puts: fsyncs at objstore_sync()).
 *   s3://HOST[:PORT]/BUCKET[/PREFIX][?OPTS]       S3 over HTTPS (libcurl)
 *   s3+http://HOST[:PORT]/BUCKET[/PREFIX][?OPTS]  the same over plain HTTP
 *   mem://[NAME]             in-process, for unit tests only; mem://NAME is
 *                            shared process-wide by name, mem:// is private
 *
 * S3 options, '&'-separated NAME=VALUE after '?', part of the volume's
 * storage URL (what every client of the volume needs alike):
 *   region=R        the region signed into V4 requests; default: the one
 *                   in an AWS host name (s3.R.amazonaws.com), else
 *                   GRANARY_S3_REGION, else us-east-1
 *   sig=v4|v2       the signature; default v4, which every provider
 *                   takes (v2: old MinIO/Ceph, s3rver's verified mode)
 *   style=path|virtual  addressing: HOST/BUCKET/KEY (default) or
 *                   BUCKET.HOST/KEY
 * An unknown option or value is OBJSTORE_EURL. What differs by node is
 * read from the environment at open: GRANARY_S3_CA_BUNDLE (a PEM file of
 * CAs to trust instead of the system store), GRANARY_S3_INSECURE_TLS=1
 * (no certificate check: a warning at every open), GRANARY_S3_TIMEOUT.
 * Places (owner.h) ignore the options: they name where objects lie.
 *
 * Backends subclass struct objstore (base first) and fill an ops table;
 * callers use the objstore_* wrappers only. All calls are thread-safe.
 */
#ifndef GRANARY_OBJSTORE_H
#define GRANARY_OBJSTORE_H

#include <stddef.h>
#include <stdint.h>

#include "lib/errors.h"
#include "lib/metric.h"
#include <sys/types.h>

/* Errors: a positive errno, or an OBJSTORE_E* code (lib/errors.h). */

struct objstore;

struct objstore_creds {
	const char *access_key; /* NULL: take from the environment */
	const char *secret_key;
	/* temporary credentials (STS): their session token, sent signed in
	 * x-amz-security-token on every request; NULL: none */
	const char *session_token;
};

/* A listed object: its key (without the store's prefix), size, and time of
 * its last put (unix seconds; 0 when the store does not say). */
typedef int (*objstore_list_fn)(void *arg, const char *key, uint64_t size,
				int64_t mtime);

struct objstore_view;

struct objstore_ops {
	const char *scheme;
	int (*get)(struct objstore *s, const char *key, uint64_t off,
		   size_t len, void **data, size_t *got);
	int (*put)(struct objstore *s, const char *key, const void *data,
		   size_t len);
	int (*del)(struct objstore *s, const char *key);
	int (*head)(struct objstore *s, const char *key, uint64_t *size);
	int (*list)(struct objstore *s, const char *prefix, objstore_list_fn fn,
		    void *arg);
	/* optional (caches): forget a local copy of key, asked for (bad 0)
	 * or found corrupt (bad 1); NULL = nothing */
	int (*evict)(struct objstore *s, const char *key, int bad);
	/* optional: the whole object as a view (objstore_get_view); NULL =
	 * a get into a buffer */
	int (*get_view)(struct objstore *s, const char *key,
			struct objstore_view *v);
	/* optional (caches): a view's pending fill, kept (ok 1) or dropped */
	void (*view_fill)(struct objstore *s, struct objstore_view *v, int ok);
	/* optional (caches): the last reference to a view pinned with
	 * objstore_view_pin() is gone */
	void (*view_unpin)(struct objstore *s, void *pin);
	/* optional (local stores): the temp files of puts a crash left
	 * half done, and their deletion (names as list_temps gave them) */
	int (*list_temps)(struct objstore *s, objstore_list_fn fn, void *arg);
	int (*del_temp)(struct objstore *s, const char *name);
	/* optional (local stores): 1 if objects are files on dev */
	int (*on_dev)(struct objstore *s, dev_t dev);
	/* optional (stores whose puts wait on a disk): a put that is
	 * durable only at the next sync (objstore_put_lazy), and that sync;
	 * NULL: put_lazy is a put, sync does nothing. Decorators pass both
	 * to the store below. */
	int (*put_lazy)(struct objstore *s, const char *key, const void *data,
			size_t len);
	int (*sync)(struct objstore *s);
	void (*close)(struct objstore *s);
};

/* Calls that reached the backend, counted by the wrappers; retries are
 * the attempts made again after a transient error, gave_up the requests
 * that failed for an outage (when the window closed, or at once after). */
enum objstore_kind {
	OBJSTORE_K_GET, /* gets and whole-object views */
	OBJSTORE_K_PUT,
	OBJSTORE_K_DEL,
	OBJSTORE_K_HEAD,
	OBJSTORE_K_LIST,
	OBJSTORE_KINDS
};
/* The requests of one kind: errors are those that failed in the end
 * (ENOENT of a get or head included: a miss the caller may expect),
 * bytes the payload moved (gets: read; puts: written), lat the time from
 * the wrapper's entry to its return, retries and backoff included. */
struct objstore_kind_stats {
	uint64_t requests, errors, retries, bytes;
	struct metric_hist lat;
};
/* puts and put_bytes count lazy puts too; syncs the objstore_sync()
 * calls (those that failed in errors too). */
struct objstore_stats {
	uint64_t gets, get_bytes, puts, put_bytes, dels, heads, errors;
	uint64_t retries, gave_up, syncs;
	struct objstore_kind_stats kind[OBJSTORE_KINDS];
};
/* "get", "put", "delete", "head", "list": the kind's label. */
const char *objstore_kind_name(enum objstore_kind k);

struct objstore {
	const struct objstore_ops *ops;
	char *url;		  /* as opened, without credentials */
	struct objstore_stats st; /* updated atomically by the wrappers */
	/* fault injection for tests: fail the next N attempts with this
	 * error (each retry is an attempt) */
	int fail_next, fail_err;
	/* how long an outage is ridden out, in ms; 0: one attempt */
	unsigned retry_window_ms;
	/* a decorator over another store (the disk cache, the sealing
	 * layer), set by its constructor: one attempt per request, since the
	 * store below it rides out outages and logs them */
	int layered;
	/* the current outage, for the wrappers: the start of the earliest
	 * attempt that failed with a transient error since the store last
	 * answered (ms, CLOCK_MONOTONIC; 0: none), its last such error, and
	 * the earliest time an attempt may start once the window closed
	 * (INT64_MAX: one is under way). Atomics. */
	int64_t outage_ms, probe_ms;
	int outage_err;
};

/*
 * Outages. The wrappers retry a request whose attempt failed with a
 * transient error (objstore_transient(): OBJSTORE_EUNREACH, ESERVER,
 * ETLS, EDNS, EREFUSED, ETIMEDOUT) with
 * capped exponential backoff and jitter (100 ms doubling up to 5 s) until
 * the retry window closes, then return that error (EIO at the FUSE
 * boundary) with one log line. The window belongs to the outage, not to
 * the request: it opens at the first failed attempt since the store last
 * answered (a request that began earlier keeps its own start), so the
 * layers above and the kernel, which may ask again after a failure, wait
 * one window in all. Once it closed, a request fails at once with the
 * outage's error, but for one attempt at a time, a second after the last
 * one ended, that finds out whether the store is back; any answer of the
 * store ends the outage. Other errors return at once: a refused key or
 * signature, a missing bucket, a missing object. Backends make single
 * attempts. objstore_open() sets the window from GRANARY_IO_RETRY_WINDOW
 * (seconds) or else OBJSTORE_RETRY_WINDOW_MS; a mount sets its own
 * (--io-retry-window) once the store answered. Window 0: every request
 * makes one attempt.
 */
#define OBJSTORE_RETRY_WINDOW_MS 2000 /* tools: about the old 5 tries */
#define OBJSTORE_RETRY_MAX_S	 86400
int objstore_transient(int err);
void objstore_set_retry_window(struct objstore *s, unsigned ms);

/*
 * Open the store named by url. Credentials for s3: creds when both are
 * given, else objstore_env_creds(). Opening does not touch the network;
 * use objstore_probe() to check reachability and permissions.
 */
int objstore_open(const char *url, const struct objstore_creds *creds,
		  struct objstore **out);
/*
 * The S3 key pair of the environment: GRANARY_S3_ACCESS_KEY and
 * GRANARY_S3_SECRET_KEY when both are set (with GRANARY_S3_SESSION_TOKEN),
 * else AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY when both are (with
 * AWS_SESSION_TOKEN): a token goes with its pair; 0, or OBJSTORE_ENOCREDS
 * with c untouched. The strings are the environment's own.
 */
int objstore_env_creds(struct objstore_creds *c);
void objstore_close(struct objstore *s); /* NULL-safe */

/*
 * Keys: 1..1024 bytes of [A-Za-z0-9] and "-_.~+=,@:/", '/'-separated, no
 * empty, "." or ".." component, no leading or trailing '/'; else EINVAL.
 *
 * Read len bytes from off (len 0: to the end) into a malloc'd buffer handed
 * out in *data (caller frees), with *got the bytes read (short at the end of
 * the object, never before it: an answer with fewer bytes is an error; an
 * off at or past the end gives 0 with *got = 0). ENOENT: no such object.
 */
int objstore_get(struct objstore *s, const char *key, uint64_t off, size_t len,
		 void **data, size_t *got);
/*
 * objstore_get() of an object another program put in an S3 bucket
 * (granary import's source), whose key may hold any bytes but NUL: 1 to
 * 1024 of them, sent encoded. Keys of granary's rules go to
 * objstore_get(); others are EINVAL on stores other than S3.
 */
int objstore_get_foreign(struct objstore *s, const char *key, uint64_t off,
			 size_t len, void **data, size_t *got);
/* Store the object whole; on return it is durable (fsync'd / acknowledged). */
int objstore_put(struct objstore *s, const char *key, const void *data,
		 size_t len);
/*
 * Durability in batches (issue 35: checkpoints at the disk's speed).
 * objstore_put_lazy() stores the object whole, readable at once by gets
 * of this store, but durable only once an objstore_sync() that began
 * after it returned has returned 0: a crash before that may leave the
 * object missing, empty or torn under its name (never an old object's
 * bytes under a new name: keys are never reused), so nothing may point at
 * it in the metadata before the sync. objstore_sync() makes durable every
 * put_lazy of this store that returned before the sync began, for all
 * threads: on a directory pool one syncfs (or fdatasync of the files and
 * fsync of their directories, whichever the store chooses) per file
 * system, shared by the syncs that arrive while it runs; on S3 nothing (a
 * PUT acknowledged is durable). A sync that fails returns the error
 * (EIO, ENOSPC) and the objects put since the last good sync must be
 * taken as lost: the caller puts them again or fails the file's fsync.
 * Since a sync covers every caller's puts, a sync that another caller
 * ran and that failed may have covered this caller's: callers that share
 * a store share what they learn (the writer's pool fails every file with
 * lazy puts made before a sync of the pool failed, fs/data/writer.c);
 * the store itself fails only the syncs that shared a failed one or
 * found nothing put since.
 */
int objstore_put_lazy(struct objstore *s, const char *key, const void *data,
		      size_t len);
int objstore_sync(struct objstore *s);
/* Delete; a missing object is not an error. */
int objstore_del(struct objstore *s, const char *key);
/* Size of the object; ENOENT if missing. */
int objstore_head(struct objstore *s, const char *key, uint64_t *size);
/* Call fn for each object whose key starts with prefix (any order); a
 * non-zero return from fn stops the listing and is returned. */
int objstore_list(struct objstore *s, const char *prefix, objstore_list_fn fn,
		  void *arg);

/* The temp files of puts a crash left half done, with their sizes and
 * times (names for objstore_del_temp only, not keys), and their deletion;
 * ENOTSUP for a store that has none it can list (s3). */
int objstore_list_temps(struct objstore *s, objstore_list_fn fn, void *arg);
int objstore_del_temp(struct objstore *s, const char *name);
/* Drop a local copy of key (a cache's), so the next get fetches it from
 * the store again: 0 when a copy was dropped, ENOENT when there was none
 * (always, for stores that keep no copies). objstore_evict() is asked for
 * (the copy is good: `granary warmup --evict`); objstore_evict_bad() drops
 * a copy that failed its check, and the cache counts it as bad. */
int objstore_evict(struct objstore *s, const char *key);
int objstore_evict_bad(struct objstore *s, const char *key);
/*
 * Whole objects without a copy. objstore_get_view() hands out the bytes of
 * a whole object in *v: mapped read-only from the file they lie in where
 * the store keeps objects in local files (file://, a disk cache hit), else
 * in a buffer as objstore_get() would fill. A view is valid until
 * objstore_view_release(); objstore_view_ref() shares it (the bytes live
 * until the last release). Errors as objstore_get().
 *
 * Mapped bytes may raise SIGBUS when read if the disk under them fails:
 * read them under fsutil_guard_sigbus() (or hand them to the kernel, which
 * says EFAULT instead).
 *
 * A disk cache that missed does not fill itself from a view at once: the
 * view carries the pending fill, and objstore_view_verified() (called by a
 * reader that checked the bytes) lets it go ahead, off the caller's thread;
 * a view released unchecked fills nothing.
 */
struct objstore_buf; /* the owner of a view's bytes; private */
struct objstore_view {
	const void *data;
	size_t len;
	struct objstore_buf *buf; /* NULL: nothing to free */
	int mapped;		  /* data is a file mapping */
	struct objstore *filler;  /* a cache with a pending fill, or NULL */
	void *fill;		  /* the filler's own */
};
int objstore_get_view(struct objstore *s, const char *key,
		      struct objstore_view *v);
/* Let a pending fill go ahead: the bytes passed the reader's checks. */
void objstore_view_verified(struct objstore_view *v);
/* Another reference to the same bytes (no pending fill), in *to. */
void objstore_view_ref(const struct objstore_view *v, struct objstore_view *to);
/* Drop the view (a pending fill with it); NULL data is fine. */
void objstore_view_release(struct objstore_view *v);
/* For backends: a view of malloc'd mem (data inside it), or of len bytes of
 * the regular file fd mapped read-only. 0, ENOMEM, or mmap's errno. */
int objstore_view_of_mem(struct objstore_view *v, void *mem, const void *data,
			 size_t len);
int objstore_view_of_fd(struct objstore_view *v, int fd, size_t len);
/* For caches: call owner's view_unpin(pin) once the bytes of v (every
 * reference) are released; 0, or EINVAL when v owns nothing (then the
 * caller unpins at once). */
int objstore_view_pin(struct objstore_view *v, struct objstore *owner,
		      void *pin);

/* A snapshot of the counters. */
void objstore_get_stats(struct objstore *s, struct objstore_stats *st);

/* 1 if s keeps its objects as files on the file system dev (a file://
 * directory there), else 0. */
int objstore_on_dev(struct objstore *s, dev_t dev);

/*
 * Check that the store is reachable and writable: put, head, get and
 * delete a marker object. Returns the first error.
 */
int objstore_probe(struct objstore *s);

#endif
