/*
 * redis_int.h - what the files of the Redis engine (meta/redis_*.c) share:
 * the handle, the command builder, the calls that run commands and
 * scripts, and the record codecs. Internal to meta/: nothing outside it
 * includes this; the API is meta/meta.h. Key layout: meta/SCHEMA.md.
 */
#ifndef GRANARY_META_REDIS_INT_H
#define GRANARY_META_REDIS_INT_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include <hiredis/hiredis.h>

#include "lib/endian.h"
#include "meta/meta_lock.h"
#include "meta/meta_objects.h"
#include "meta/meta_quota.h"
#include "meta/meta_snap.h"
#include "meta/meta_volume.h"
#include "meta/meta.h"
#include "meta/lua_gen.h" /* generated: $(O)/meta/lua_gen.h */

#define ATTR_LEN       59 /* packed inode record, see SCHEMA.md */
#define INO_PER_HASH   32 /* inodes per hash n<ino / 32>, see SCHEMA.md */
#define REC_LEN	       25 /* packed slice record, full form */
#define REC_SHORT_LEN  17 /* short form: a whole slice */
#define REC_PACK_EXTRA 16 /* forms 3 and 4 add pack, poff, plen */
#define REC_MAX	       (REC_LEN + REC_PACK_EXTRA)
#define CMD_MAX	       32 /* arguments of one command */
#define GROUP_REC_LEN  25 /* a group member's record, less its address */

/* The scripts (meta/lua/, made C by tools/lua-embed.sh): the prelude
 * every script starts with, and each script's name and body (with the
 * lib/ file it names), indexed by enum script (lua_gen.h). */
extern const char redis_lua_prelude[];
extern const char *const redis_script_name[SC_N];
extern const char *const redis_script_body[SC_N];

#define SENTINELS_MAX 16

struct hostport {
	char host[256];
	int port;
};

/* A metadata URL, parsed (SCHEMA.md, "Connections"). */
struct addr {
	char host[256]; /* the server; with sentinels the master in use,
			   protected by pool_lock (empty before the first) */
	int port;
	char path[PATH_MAX]; /* unix socket; empty for TCP */
	int db;
	char user[256], pass[512];
	char master[256]; /* the master's name at the sentinels; empty: the
			     URL names the server itself */
	struct hostport sentinel[SENTINELS_MAX];
	int nsentinel;
	char sentinel_pass[512]; /* GRANARY_SENTINEL_PASSWORD */
	int wait;		 /* ?wait=N: replicas a change waits for */
	int wait_timeout;	 /* ?wait_timeout=S: how long it waits */
	int failover_timeout;	 /* ?failover_timeout=S: how long calls look
				    for the master again; 0: they do not
				    (atomic: meta_set_retry_window) */
	int failover_named;	 /* the URL set failover_timeout */
};

/* Parse a metadata URL into a (redis_url.c); META_EURL when malformed. */
int redis_url_parse(const char *url, struct addr *a);

struct conn {
	redisContext *rc;	/* NULL: connect before use */
	unsigned epoch;		/* pool epoch when it connected */
	int timeout_s;		/* the command timeout set on rc */
	SLIST_ENTRY(conn) link; /* meta.idle */
};

/* Lock order: ids_lock -> pool_lock. pool_lock is a leaf; sess_lock is a
 * leaf that is never held across a Redis call. */
struct meta {
	struct addr addr;
	char where[1024]; /* the URL, password redacted, for messages */
	struct meta_opts opts;
	char *script_text[SC_N];
	char sha[SC_N][41]; /* written by meta_open only */
	char *lib_text;	    /* the scripts as a function library */
	char lib[32];	    /* its name */
	char fn[SC_N][64];  /* the functions' names */
	int fcall;	    /* written by meta_open only: 1 FCALL, 0 EVALSHA */

	pthread_mutex_t pool_lock; /* leaf */
	pthread_cond_t pool_cond;  /* a connection was returned */
	struct conn *conns;	   /* opts.pool_size of them */
	SLIST_HEAD(, conn) idle;   /* protected by pool_lock */
	unsigned epoch;		   /* protected by pool_lock; bumped on I/O
				      errors so that idle peers reconnect */

	pthread_mutex_t ids_lock;	/* before pool_lock */
	uint64_t ino_next, ino_end;	/* protected by ids_lock */
	uint64_t slice_next, slice_end; /* protected by ids_lock */

	_Atomic uint64_t sid;	   /* 0: no session */
	pthread_mutex_t sess_lock; /* leaf, never held across a Redis call */
	pthread_cond_t sess_cond;  /* wakes the heartbeat thread to stop */
	int hb_stop;		   /* protected by sess_lock */
	int hb_running;		   /* protected by sess_lock */
	pthread_t hb_thread;
	char *sess_info; /* packed sessioninfo value; set before the
			    heartbeat thread starts, freed after it ends */
	size_t sess_info_len;
	struct redis_locks *locks;  /* redis_lock.c's book of this client's
				       locks; set while a session is open */
	_Atomic int64_t stall_seen; /* liveclock's last stall (end, ms) this
				       client knows of: a newer one is logged */
	_Atomic int64_t loss_seen;  /* the session's sessionlost stamp this
				       client acted on (0: none) */
	/* The volume the session serves (meta_session_watch; uuid "": not
	 * watched), written before the heartbeat thread starts; told and
	 * the look for a volume again: the heartbeat thread's. */
	struct redis_watch {
		char name[256], uuid[40], restore_id[META_RESTORE_ID];
		void (*gone_fn)(void *arg);
		void *arg;
		int told; /* gone_fn ran */
	} watch;
	_Atomic int gone; /* GONE_* (redis_session.c): not 0, every call
			     but RUN_GONE_OK fails with META_EGONE */

	/* round trips of conn_exec (every command after the connection's
	 * set-up): updated with relaxed atomics (lib/metric.h) */
	struct meta_round_trips rt;

	_Atomic int64_t last_log;   /* rate limit of connection error lines */
	_Atomic int64_t away_ms;    /* CLOCK_MONOTONIC ms when calls first
				       found the server away (retry_again);
				       0 while it answers */
	_Atomic int sentinel_first; /* the sentinel asked first */
};

/* ---- commands (redis_conn.c) ----------------------------------------- */

/* A command being built. Arguments point at the caller's memory (bin,
 * str) or at num (fmt, u64, i64, key, inode): the cmd must outlive the
 * run. More than CMD_MAX arguments abort. */
struct cmd {
	int argc;
	int script; /* enum script, or -1 */
	const char *argv[CMD_MAX];
	size_t len[CMD_MAX];
	char num[CMD_MAX][48]; /* storage of formatted arguments */
};

/* One command of a pipeline. */
struct req {
	int argc;
	const char **argv;
	const size_t *len;
	int script;
};

#define RUN_RETRY   1 /* idempotent: may be sent again after a reconnect */
#define RUN_RAW	    2 /* error replies are handed out, not turned to errors */
#define RUN_GONE_OK 4 /* runs even once the handle stopped (m->gone) */

void redis_cmd_init(struct cmd *c, const char *name);
/* The command that runs script s (FCALL or EVALSHA, no keys); the
 * script's arguments follow. */
void redis_cmd_script(struct meta *m, struct cmd *c, enum script s);
void redis_cmd_bin(struct cmd *c, const void *p, size_t n);
void redis_cmd_str(struct cmd *c, const char *s);
void redis_cmd_fmt(struct cmd *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void redis_cmd_u64(struct cmd *c, uint64_t v);
void redis_cmd_i64(struct cmd *c, int64_t v);
/* A quota chain (meta_quota.h) as a script's argument: "GEN:DIR:" then
 * decimal inodes joined by ',' ("0:0:" for NULL), formatted into buf,
 * which must outlive the run (redis_quota.c). */
#define QCHAIN_STR_MAX ((META_QUOTA_NEST + 2) * 21 + 1)
void redis_cmd_qchain(struct cmd *c, const struct meta_qchain *q, char *buf);
/* A per-inode key: prefix and decimal inode number ("d123"). */
void redis_cmd_key(struct cmd *c, const char *prefix, uint64_t ino);
/* The hash that holds inode ino, and the field of its attributes or, with
 * tail, of chunk 0's slice records while they are short (SCHEMA.md). */
void redis_cmd_inode(struct cmd *c, uint64_t ino, int tail);

/*
 * Run commands on one pooled connection; each returns 0 or an error (an
 * errno or META_E*); EIO: the connection failed, a write may or may not
 * have happened. flags: RUN_RETRY or 0. The replies handed out are the
 * caller's to freeReplyObject; on an error there are none. An error reply
 * becomes an error. A script the server lost is loaded again and resent.
 * Thread-safe: each call takes a connection of its own.
 */
int redis_run_reqs(struct meta *m, int flags, const struct req *reqs, int n,
		   redisReply **out);
int redis_run(struct meta *m, int flags, const struct cmd *c, redisReply **out);
/* A command whose reply is not needed beyond its being no error. */
int redis_run_void(struct meta *m, int flags, const struct cmd *c);
/* Scripts answer {status, ...}: status 0 or a positive errno, which is
 * returned (then no reply). *out is an array of at least one element. */
int redis_run_script(struct meta *m, int flags, const struct cmd *c,
		     redisReply **out);
/* A script whose reply is {0, packed attr[, packed attr]}: unpacked into
 * a and b (each may be NULL). Never retried. */
int redis_run_script_attrs(struct meta *m, const struct cmd *c,
			   struct meta_attr *a, struct meta_attr *b);
int redis_run_script_attr(struct meta *m, const struct cmd *c,
			  struct meta_attr *a);
int redis_run_script_void(struct meta *m, const struct cmd *c);

/* At most one connection error line a second (1: this one may log). */
int redis_log_ok(struct meta *m);
/* The server in use: "HOST:PORT" or the socket's path (with sentinels,
 * the master they named last). */
void redis_server_addr(struct meta *m, char *buf, size_t cap);

/* ---- sessions and their locks (redis_session.c, redis_lock.c) ------- */

/* Renew this client's session now (the heartbeat's script); when it was
 * dead, or cleaned away (then registered again), logs so and marks the
 * locks it held lost (redis_lock_lost). Any thread. */
int redis_session_renew(struct meta *m);
/* The book of a session's locks: opened before the heartbeat starts,
 * closed after it stops (its undelivered unlocks are dropped: the
 * session's end drops every lock of it). */
int redis_lock_open(struct meta *m);
void redis_lock_close(struct meta *m);
/* The session was dead: every owner holding a lock has lost it (its next
 * call fails, META_ELOCKLOST). Returns how many. */
size_t redis_lock_lost(struct meta *m);
/* Send the unlocks not delivered yet again, in order (heartbeat). */
void redis_lock_retry(struct meta *m);

/* ---- records (redis_conn.c) ------------------------------------------ */

/* An inode record's attributes (SCHEMA.md) from a string reply; a may be
 * NULL (only checked). META_EPROTO when not one. */
int redis_reply_attr(const redisReply *r, struct meta_attr *a);
/* Packs s at p (room for REC_MAX); returns the bytes used. */
size_t redis_rec_pack(uint8_t *p, const struct meta_slice *s);
/* Unpacks the record at s (n bytes left); returns its length, 0 if it is
 * corrupt or cut short. */
size_t redis_rec_unpack(const char *s, size_t n, struct meta_slice *out);
/* A decimal number from a string or integer reply; 0 for anything else. */
uint64_t redis_reply_u64(const redisReply *r);
uint64_t redis_field_u64(const redisReply *r); /* string reply only */

/* ---- shared by the concepts ------------------------------------------ */

/* A run of slice records decoded into a malloc'd array (NULL when
 * empty); META_EPROTO when one is corrupt (redis_data.c). */
int redis_recs_unpack(const char *p, size_t len, struct meta_slice **s,
		      size_t *n);
/* The next id from the local batch [*next, *end), refilled with INCRBY
 * counter batch; takes ids_lock (redis_data.c). */
int redis_id_take(struct meta *m, const char *counter, uint64_t batch,
		  uint64_t *next, uint64_t *end, uint64_t *id);
/* A name a change is about to create: EROFS on a read-only handle, the
 * name's own errors, EINVAL for META_VERSIONS, EEXIST for "." and ".."
 * (redis_ns.c). */
int redis_new_name_check(struct meta *m, const char *name);

/* ---- cache groups (redis_group.c) ------------------------------------ */

/* The session of every member record of every group (fsck's look for
 * records of sessions that are gone: meta_scan_sids), fn(arg, sid) each;
 * a sid may come more than once. */
int redis_group_sids(struct meta *m, int (*fn)(void *arg, uint64_t sid),
		     void *arg);

/* ---- walks (redis_scan.c), for the dump (redis_dump.c) --------------- */

/* One page of SCAN (key NULL), HSCAN or ZSCAN (zset) of key from *cursor
 * ("0" to start, "0" again when done); *out, inside *r (the caller's to
 * free): {key...} or {field, value...}. */
int redis_scan_page(struct meta *m, const char *key, int zset, char *cursor,
		    size_t cap, redisReply **r, const redisReply **out);
/* Every field (member) of hash (zset) key with its value (score), page by
 * page; a field may come twice (HSCAN of a resized hash). */
typedef int (*redis_field_fn)(struct meta *m, const redisReply *f,
			      const redisReply *v, void *ctx);
int redis_fields_walk(struct meta *m, const char *key, int zset,
		      redis_field_fn fn, void *ctx);
/* A decimal number that is the whole of [p, p+n): 1, else 0. */
int redis_parse_u64(const char *p, size_t n, uint64_t *v);
/* What a walk handed out already (SCAN repeats keys of a resized table):
 * a kind and one or two numbers, or a name (its 64-bit hash). add and
 * name: 1 when met before, else 0 (remembered) or -ENOMEM. */
struct redis_seen;
struct redis_seen *redis_seen_new(void); /* NULL: out of memory */
int redis_seen_add(struct redis_seen *s, char kind, uint64_t a, uint32_t b);
int redis_seen_name(struct redis_seen *s, const char *p, size_t n);
void redis_seen_clear(struct redis_seen *s);
void redis_seen_free(struct redis_seen *s); /* NULL-safe */

#endif
