/*
 * group.c - the cache group store (group.h): a decorator over the node's
 * disk cache that sends each read where the group keeps its key (this
 * node's cache, the owner's over peer.h, or the store), keeps track of
 * the members that fail, shares one fetch among the concurrent asks for a
 * key on its owner, and answers the other members (the server's handler).
 */
#include "fs/store/group.h"
#include "fs/store/crypt.h"
#include "fs/store/diskcache.h"
#include "fs/store/peer.h"
#include "lib/bigbuf.h"
#include "lib/errors.h"
#include "lib/fsutil.h"
#include "lib/log.h"
#include "lib/rendezvous.h"
#include "lib/workq.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

/*
 * The server's size, for a group of up to 16 members whose mounts read
 * with up to 16 threads each: every reader thread keeps one connection
 * to each member it asks (peer.h), so a member is asked over at most
 * 15 x 16 = 240 connections: SRV_CONNS leaves room for a few more
 * (readers of warmup, a member restarting) before refusals, which send
 * readers to the store. The SRV_THREADS poll threads answer what the
 * cache holds (sendfile: microseconds a request) and never wait on the
 * store; an ask that fetches from the store for a peer waits in the
 * server's queue for one of SRV_FETCHERS threads. Memory: a body sent
 * from memory is the bytes of a fetch (shared by the asks for the same
 * key), so at most SRV_FETCHERS fetches are held at once, plus those
 * still being sent on their connections.
 */
#define SRV_THREADS  4
#define SRV_FETCHERS 16
#define SRV_CONNS    256

#define DOWN_MS_DEFAULT 1000  /* a failed member is first skipped this long */
#define DOWN_MS_MAX	30000 /* the skip doubles up to this */
/* Whole fetches on this node as the owner that other asks for the same
 * key wait for (server threads and local readers); beyond them an ask
 * fetches alone (the disk cache then fills once, but the store is asked
 * twice) */
#define FLIGHTS 64
/* Keys this node read from a peer lately, with who gave them: a bad copy
 * is reported to that member. Direct-mapped by the key's hash: a reader
 * checks a block right after reading it, long before 4096 other reads
 * could have taken its slot. */
#define RECENT 4096
/* Keys whose copy from a peer failed the reader's check: read from the
 * store for BAD_MS (the member's drop of its copy comes after a report
 * sent in the background; a reader asking again at once must not get the
 * same bad bytes) */
#define BAD_SLOTS 256
#define BAD_MS	  30000
#define REPORTS	  16 /* bad reports waiting to be sent; more are dropped */

/* ---- state -------------------------------------------------------------- */

/*
 * A member as this node sees it, shared by the member sets that list it
 * (a new set takes over the record of a member with the same node and
 * address, so its down state survives the heartbeat's new list).
 *
 * The down state machine (its transitions all under down_lock):
 *
 *   up --failure (peer_failed)--> down(window = down_ms, until = now + w)
 *   down --now >= until, first ask (peer_admit)--> probing
 *   probing --failure (peer_failed)--> down(window = min(2w, 30 s))
 *   down / probing --any success (peer_ok)--> up
 *
 * D1. up: down_until == 0, window == 0, probing == 0; down: down_until >
 *     0 and down_ms <= window <= DOWN_MS_MAX.
 * D2. While down and now < down_until, nothing is sent to the member: its
 *     keys go to the store (peer_skipped).
 * D3. While down and now >= down_until, one request at a time is sent (the
 *     probe: the one that set probing); the others are skipped. A probe
 *     ends in peer_ok, peer_failed or peer_unprobe (an error of ours,
 *     not the member's), which clear probing.
 * D4. A failure of a request that was not the probe, while the member is
 *     down, changes nothing: it began before the member was marked.
 * So a dead member costs each reader thread at most one wait (connect
 * timeout + deadline) when it dies, then one probe per window in all.
 */
struct gpeer {
	int refs; /* atomic: the sets that list it */
	uint64_t node;
	char addr[64];
	int self;
	int64_t down_until; /* ms, monotonic; written under down_lock,
			       read atomically */
	unsigned window;    /* protected by down_lock */
	int probing;	    /* protected by down_lock */
};

/* The members as last set: immutable once published, freed with its last
 * reference (the group's, and each read under way). */
struct gset {
	int refs; /* atomic */
	size_t n;
	struct gpeer **p;
	struct rdv_member *rdv;
};

/*
 * The flight table: a whole fetch of a key this node owns, through its
 * disk cache, that the other asks of the same key wait for instead of
 * fetching it too (server threads answering peers, local readers, warm
 * requests).
 * F1. A slot is free (key NULL) or held by its fetcher, who set key (its
 *     own string, valid while the slot is held).
 * F2. done is set once, by the fetcher, with err and the bytes in v when
 *     err is 0; v is the fetcher's view, not a reference of its own.
 * F3. A waiter counts itself in waiters before waiting and takes its own
 *     reference to v (objstore_view_ref) before uncounting itself; the
 *     fetcher frees the slot only once waiters is 0, so v's bytes are
 *     alive for every waiter.
 * F4. The fetch goes through the disk cache with a get, which writes the
 *     entry before it returns: once done is set the cache holds the key
 *     (unless it refused it for room), so no ask after the flight fetches
 *     again.
 * All fields protected by flight_lock (the condition variables wait on
 * it).
 */
struct gflight {
	const char *key;
	int done, err;
	unsigned waiters;
	struct objstore_view v;
	pthread_cond_t cv;
};

struct grecent {
	uint64_t h;    /* XXH3 of the key, 0: empty */
	uint64_t node; /* the member that gave it */
};

struct gbad {
	uint64_t h;
	int64_t until_ms;
};

struct group {
	struct objstore base;	/* first: objstore_* see only this */
	struct objstore *cache; /* the disk cache, owned */
	struct objstore *store; /* the cache's backend (the cache's) */
	uint64_t node, weight;
	int keep_copies;
	unsigned down_ms;
	struct peer_client *cli;
	struct peer_server *srv; /* NULL: serves nothing, owns nothing */
	char addr[64];		 /* where it serves, "" */
	struct workq *reports;	 /* bad copies told to their members */

	/*
	 * Lock order: set_lock, down_lock, flight_lock and recent_lock are
	 * leaves: none is held while taking another, nor during a request
	 * to a peer, the cache or the store (the flight's waiters wait on
	 * flight_lock's condition variables, holding nothing else).
	 */
	pthread_mutex_t set_lock;
	struct gset *set; /* protected by set_lock; a reference of its own */
	pthread_mutex_t down_lock;
	pthread_mutex_t flight_lock;
	struct gflight flights[FLIGHTS];
	pthread_mutex_t recent_lock;
	struct grecent recent[RECENT]; /* h read atomically, else protected
					  by recent_lock */
	struct gbad bad[BAD_SLOTS];    /* protected by recent_lock */
	int64_t bad_until;	       /* the latest until_ms: atomic */

	struct group_stats st; /* counters atomic */
};

static const struct objstore_ops group_ops;

static struct group *grp_of(struct objstore *s)
{
	return s && s->ops == &group_ops ? (struct group *)s : NULL;
}

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint64_t key_hash(const char *key)
{
	uint64_t h = XXH3_64bits(key, strlen(key));
	return h ? h : 1;
}

#define ST_ADD(g, f, n) metric_add(&(g)->st.f, (n))

/* ---- member sets -------------------------------------------------------- */

static void gpeer_put(struct gpeer *p)
{
	if (p && __atomic_sub_fetch(&p->refs, 1, __ATOMIC_ACQ_REL) == 0)
		free(p);
}

static void set_free(struct gset *s)
{
	for (size_t i = 0; i < s->n; i++)
		gpeer_put(s->p[i]);
	free(s->p);
	free(s->rdv);
	free(s);
}

/* The current set, with a reference for the caller (set_put). */
static struct gset *set_get(struct group *g)
{
	pthread_mutex_lock(&g->set_lock);
	struct gset *s = g->set;
	__atomic_add_fetch(&s->refs, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&g->set_lock);
	return s;
}

static void set_put(struct gset *s)
{
	if (s && __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) == 0)
		set_free(s);
}

static struct gset *set_new(size_t cap)
{
	struct gset *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->refs = 1;
	s->p = calloc(cap ? cap : 1, sizeof(*s->p));
	s->rdv = calloc(cap ? cap : 1, sizeof(*s->rdv));
	if (!s->p || !s->rdv) {
		set_free(s);
		return NULL;
	}
	return s;
}

/* Add a member to s (being built): old's record when it lists the same
 * node at the same address (its down state goes on), else a new one. */
static int set_add(struct group *g, struct gset *s, const struct gset *old,
		   uint64_t node, const char *addr, uint64_t weight)
{
	struct gpeer *p = NULL;
	int self = node == g->node;

	for (size_t i = 0; old && i < old->n; i++)
		if (old->p[i]->node == node && !strcmp(old->p[i]->addr, addr)) {
			p = old->p[i];
			__atomic_add_fetch(&p->refs, 1, __ATOMIC_RELAXED);
			break;
		}
	if (!p) {
		if (!(p = calloc(1, sizeof(*p))))
			return ENOMEM;
		p->refs = 1;
		p->node = node;
		snprintf(p->addr, sizeof(p->addr), "%s", addr);
		p->self = self;
	}
	/* a member that serves nothing never owns; nor this node when it
	 * does not serve, whatever the list says */
	if (!*addr || (self && !g->srv))
		weight = 0;
	s->rdv[s->n] = (struct rdv_member){node, (double)weight};
	s->p[s->n++] = p;
	return 0;
}

/* Publish s as the current set. */
static void set_swap(struct group *g, struct gset *s)
{
	pthread_mutex_lock(&g->set_lock);
	struct gset *old = g->set;
	g->set = s;
	pthread_mutex_unlock(&g->set_lock);
	set_put(old);
}

void group_set_members(struct objstore *gs, const struct group_member *m,
		       size_t n)
{
	struct group *g = grp_of(gs);
	struct gset *old, *s;
	int has_self = 0;

	if (!g)
		return;
	old = set_get(g);
	if (!(s = set_new(n + 1)))
		goto nomem;
	for (size_t i = 0; i < n; i++) {
		int dup =
		    !m[i].node || !memchr(m[i].addr, '\0', sizeof(m[i].addr));
		for (size_t j = 0; !dup && j < s->n; j++)
			dup = s->rdv[j].id == m[i].node; /* the first wins */
		if (dup)
			continue;
		has_self |= m[i].node == g->node;
		if (set_add(g, s, old, m[i].node, m[i].addr, m[i].weight))
			goto nomem;
	}
	/* not listed yet (its join not seen): this node owns its share as
	 * it will once the others see it */
	if (!has_self && g->srv &&
	    set_add(g, s, old, g->node, g->addr, g->weight))
		goto nomem;
	set_swap(g, s);
	set_put(old);
	return;
nomem:
	log_warn("cache group: cannot take the new member list: %s; keeping "
		 "the one before",
		 strerror(ENOMEM));
	if (s)
		set_free(s);
	set_put(old);
}

/* ---- the down state of members ----------------------------------------- */

/* Under down_lock: D1 holds. */
static void down_check(const struct group *g, const struct gpeer *p)
{
	if (!p->down_until)
		gr_assert(!p->window && !p->probing);
	else
		gr_assert(p->window >= g->down_ms && p->window <= DOWN_MS_MAX);
}

/* May a request go to p now? 1 (*probe: it is the probe), or 0: skip. */
static int peer_admit(struct group *g, struct gpeer *p, int *probe)
{
	int64_t now;
	int ok = 0;

	*probe = 0;
	if (!__atomic_load_n(&p->down_until, __ATOMIC_ACQUIRE))
		return 1;
	now = mono_ms();
	if (now < __atomic_load_n(&p->down_until, __ATOMIC_ACQUIRE))
		return 0;
	pthread_mutex_lock(&g->down_lock);
	if (!p->down_until) {
		ok = 1; /* back meanwhile */
	} else if (!p->probing && now >= p->down_until) {
		p->probing = 1;
		*probe = ok = 1;
	}
	down_check(g, p);
	pthread_mutex_unlock(&g->down_lock);
	return ok;
}

/* p answered (any answer of the protocol): up. */
static void peer_ok(struct group *g, struct gpeer *p, int probe)
{
	int was_down;

	if (!probe && !__atomic_load_n(&p->down_until, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&g->down_lock);
	was_down = p->down_until != 0;
	__atomic_store_n(&p->down_until, 0, __ATOMIC_RELEASE);
	p->window = 0;
	p->probing = 0;
	down_check(g, p);
	pthread_mutex_unlock(&g->down_lock);
	if (was_down)
		log_info("cache group: member '%s' answers again", p->addr);
}

/* p failed a request (D1-D4). */
static void peer_failed(struct group *g, struct gpeer *p, int probe, int err)
{
	unsigned window = 0;

	pthread_mutex_lock(&g->down_lock);
	if (probe) {
		p->window = p->window ? p->window * 2 : g->down_ms;
		if (p->window > DOWN_MS_MAX)
			p->window = DOWN_MS_MAX;
		p->probing = 0;
		__atomic_store_n(&p->down_until, mono_ms() + p->window,
				 __ATOMIC_RELEASE);
	} else if (!p->down_until) {
		window = p->window = g->down_ms;
		__atomic_store_n(&p->down_until, mono_ms() + p->window,
				 __ATOMIC_RELEASE);
	}
	down_check(g, p);
	pthread_mutex_unlock(&g->down_lock);
	if (window)
		log_warn("cache group: member '%s' failed (%s): its blocks are "
			 "read from the store, and it is asked again in %.1f s",
			 p->addr, gr_strerror(err), window / 1000.0);
}

/* A probe ended on an error of ours (no memory): neither verdict. */
static void peer_unprobe(struct group *g, struct gpeer *p, int probe)
{
	if (!probe)
		return;
	pthread_mutex_lock(&g->down_lock);
	p->probing = 0;
	pthread_mutex_unlock(&g->down_lock);
}

/* The errors that say the member failed (D1-D4), as opposed to ours. */
static int member_fault(int err)
{
	return err == PEER_EDOWN || err == PEER_EAUTH || err == PEER_EPROTO ||
	       err == EIO;
}

/* The end of a request to p that ended with err: its verdict. */
static void peer_end(struct group *g, struct gpeer *p, int probe, int err)
{
	if (!err || err == ENOENT)
		peer_ok(g, p, probe);
	else if (member_fault(err))
		peer_failed(g, p, probe, err);
	else
		peer_unprobe(g, p, probe);
}

/* ---- keys got from peers, and their bad copies -------------------------- */

static struct grecent *recent_slot(struct group *g, uint64_t h)
{
	return &g->recent[h % RECENT];
}

/* key was just got from member node. */
static void recent_note(struct group *g, const char *key, uint64_t node)
{
	uint64_t h = key_hash(key);
	struct grecent *r = recent_slot(g, h);

	pthread_mutex_lock(&g->recent_lock);
	r->node = node;
	__atomic_store_n(&r->h, h, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&g->recent_lock);
}

/* key was just got from elsewhere (its last copy is not a peer's). */
static void recent_forget(struct group *g, const char *key)
{
	uint64_t h = key_hash(key);
	struct grecent *r = recent_slot(g, h);

	if (__atomic_load_n(&r->h, __ATOMIC_ACQUIRE) != h)
		return; /* the common case: no lock */
	pthread_mutex_lock(&g->recent_lock);
	if (r->h == h)
		__atomic_store_n(&r->h, 0, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&g->recent_lock);
}

/* 1 with *node when the last copy of key read here came from a peer; the
 * key is then marked bad for BAD_MS (its reads go to the store). */
static int recent_take_bad(struct group *g, const char *key, uint64_t *node)
{
	uint64_t h = key_hash(key);
	struct grecent *r = recent_slot(g, h);
	int64_t until = mono_ms() + BAD_MS;
	int found = 0;

	pthread_mutex_lock(&g->recent_lock);
	if (r->h == h) {
		found = 1;
		*node = r->node;
		__atomic_store_n(&r->h, 0, __ATOMIC_RELEASE);
		struct gbad *b = &g->bad[h % BAD_SLOTS];
		b->h = h;
		b->until_ms = until;
		if (until > g->bad_until)
			__atomic_store_n(&g->bad_until, until,
					 __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&g->recent_lock);
	return found;
}

/* Is key's copy at its owner known bad (read it from the store)? */
static int bad_has(struct group *g, const char *key)
{
	int64_t now = mono_ms();
	int yes;

	if (now >= __atomic_load_n(&g->bad_until, __ATOMIC_ACQUIRE))
		return 0; /* none live: no lock */
	uint64_t h = key_hash(key);
	pthread_mutex_lock(&g->recent_lock);
	struct gbad *b = &g->bad[h % BAD_SLOTS];
	yes = b->h == h && now < b->until_ms;
	pthread_mutex_unlock(&g->recent_lock);
	return yes;
}

/* A bad copy told to the member that gave it, off the reader's thread. */
struct greport {
	struct workq_job job; /* first */
	struct group *g;
	struct gpeer *p; /* a reference of its own */
	char key[];
};

static void report_run(struct workq_job *job)
{
	struct greport *r = (struct greport *)job;
	struct group *g = r->g;

	/* a member marked down meanwhile is not waited for: a reader that
	 * gets the same bad copy from it later reports it again */
	if (!__atomic_load_n(&r->p->down_until, __ATOMIC_ACQUIRE)) {
		int err = peer_report_bad(g->cli, r->p->addr, r->key);
		if (err)
			log_debug("cache group: cannot tell '%s' its copy of "
				  "'%s' is bad: %s",
				  r->p->addr, r->key, gr_strerror(err));
	}
	gpeer_put(r->p);
	free(r);
}

static void report_bad(struct group *g, uint64_t node, const char *key)
{
	struct gset *s = set_get(g);
	struct gpeer *p = NULL;
	struct greport *r;

	for (size_t i = 0; i < s->n && !p; i++)
		if (s->p[i]->node == node && !s->p[i]->self)
			p = s->p[i];
	/* a member gone from the list is asked nothing any more */
	if (p && g->reports && (r = malloc(sizeof(*r) + strlen(key) + 1))) {
		r->job.run = report_run;
		r->g = g;
		r->p = p;
		__atomic_add_fetch(&p->refs, 1, __ATOMIC_RELAXED);
		strcpy(r->key, key);
		if (workq_trypush(g->reports, &r->job)) {
			gpeer_put(p);
			free(r);
		}
	}
	set_put(s);
}

/* ---- the flight table ---------------------------------------------------- */

/* Under flight_lock: the flight of key, or NULL. */
static struct gflight *flight_find(struct group *g, const char *key)
{
	for (size_t i = 0; i < FLIGHTS; i++)
		if (g->flights[i].key && !strcmp(g->flights[i].key, key))
			return &g->flights[i];
	return NULL;
}

/* Under flight_lock: wait for f and take a reference to its bytes (F3). */
static int flight_wait(struct group *g, struct gflight *f,
		       struct objstore_view *v)
{
	int err;

	f->waiters++;
	while (!f->done)
		pthread_cond_wait(&f->cv, &g->flight_lock);
	err = f->err;
	if (!err)
		objstore_view_ref(&f->v, v);
	if (--f->waiters == 0)
		pthread_cond_broadcast(&f->cv);
	return err;
}

/*
 * The whole of key through this node's cache, fetched once for every ask
 * of it at the same time (F1-F4): a view of its bytes (memory; no pending
 * fill, the cache wrote its entry). *fetched: 1 when the cache did not
 * hold the key as this fetch began (a fetch from the store, for counting).
 */
static int owner_fetch(struct group *g, const char *key,
		       struct objstore_view *v, int *fetched)
{
	struct gflight *f = NULL;
	void *data = NULL;
	size_t n = 0;
	int err;

	*fetched = 0;
	memset(v, 0, sizeof(*v));
	pthread_mutex_lock(&g->flight_lock);
	if ((f = flight_find(g, key))) {
		err = flight_wait(g, f, v);
		pthread_mutex_unlock(&g->flight_lock);
		return err;
	}
	for (size_t i = 0; i < FLIGHTS && !f; i++)
		if (!g->flights[i].key)
			f = &g->flights[i];
	if (f) {
		f->key = key;
		f->done = f->err = 0;
		f->waiters = 0;
		memset(&f->v, 0, sizeof(f->v));
	}
	pthread_mutex_unlock(&g->flight_lock);

	*fetched = !diskcache_contains(g->cache, key);
	int64_t t0 = fsutil_mono_ns();
	err = objstore_get(g->cache, key, 0, 0, &data, &n);
	/* the store's pace, which a member fetching for this node keeps too:
	 * this node's asks wait for it (peer.h) */
	if (!err && *fetched)
		peer_client_note_store(
		    g->cli, (long)((fsutil_mono_ns() - t0) / 1000000));
	if (!err && (err = objstore_view_of_mem(v, data, data, n)))
		bigbuf_free(data);
	if (!f)
		return err;

	pthread_mutex_lock(&g->flight_lock);
	f->done = 1;
	f->err = err;
	if (!err)
		f->v = *v;
	pthread_cond_broadcast(&f->cv);
	while (f->waiters)
		pthread_cond_wait(&f->cv, &g->flight_lock);
	f->key = NULL;
	memset(&f->v, 0, sizeof(f->v));
	pthread_mutex_unlock(&g->flight_lock);
	return err;
}

/* Copy [off, off + len) (len 0: to the end) of a view into a new buffer. */
static int view_copy(const struct objstore_view *v, uint64_t off, size_t len,
		     void **data, size_t *got)
{
	size_t n = 0;

	if (off < v->len) {
		n = v->len - (size_t)off;
		if (len && len < n)
			n = len;
	}
	if (!(*data = bigbuf_alloc(n)))
		return ENOMEM;
	if (n)
		memcpy(*data, (const char *)v->data + off, n);
	*got = n;
	return 0;
}

/* A get of key this node owns: a range from its cache when the cache holds
 * the key; else the whole object, fetched once for every ask of it (a
 * ranged miss passed down would reach the store uncached, once per range:
 * the chunk store reads a block's head, then more, then all of it), and the
 * range answered from it. */
static int owner_get(struct group *g, const char *key, uint64_t off, size_t len,
		     void **data, size_t *got, int *fetched)
{
	struct objstore_view v;
	int err;

	*fetched = 0;
	if ((off || len) && diskcache_contains(g->cache, key))
		return objstore_get(g->cache, key, off, len, data, got);
	err = owner_fetch(g, key, &v, fetched);
	if (!err) {
		err = view_copy(&v, off, len, data, got);
		objstore_view_release(&v);
	}
	return err;
}

/* ---- reads ----------------------------------------------------------------
 */

enum route { R_LOCAL, R_STORE, R_OWNER, R_PEER };

/*
 * Where a read of key goes: this node's cache when it holds the key whole,
 * or when no member can own (a group of takers: as on one node); the store
 * when the owner's copy was bad or the owner is marked down; this node's
 * cache as the owner; else the owner (*p, with *set the reference that
 * keeps it, and *probe).
 */
static enum route route_of(struct group *g, const char *key, struct gset **set,
			   struct gpeer **p, int *probe)
{
	struct gset *s;
	int i;

	*set = NULL;
	*p = NULL;
	*probe = 0;
	if (diskcache_contains(g->cache, key))
		return R_LOCAL;
	if (bad_has(g, key))
		return R_STORE;
	s = set_get(g);
	i = rdv_owner(s->rdv, s->n, key, strlen(key));
	if (i < 0 || s->p[i]->self) {
		set_put(s);
		if (i >= 0)
			ST_ADD(g, self_owned, 1);
		return i < 0 ? R_LOCAL : R_OWNER;
	}
	if (!peer_admit(g, s->p[i], probe)) {
		set_put(s);
		ST_ADD(g, peer_skipped, 1);
		return R_STORE;
	}
	*set = s;
	*p = s->p[i];
	return R_PEER;
}

/*
 * Ask p for [off, off + len) of key (len 0: to the end): 0 with the bytes,
 * ENOENT (the owner fetches what it does not have, so the store has no
 * such object), or an error after which the caller reads from the store.
 * Counted, and p's down state told.
 */
static int ask_peer(struct group *g, struct gpeer *p, int probe,
		    const char *key, uint64_t off, size_t len, void **data,
		    size_t *got)
{
	int64_t t0 = fsutil_mono_ns(), dt;
	int err = peer_get(g->cli, p->addr, key, off, len, data, got);

	dt = fsutil_mono_ns() - t0;
	metric_hist_observe(&g->st.peer_lat, dt > 0 ? (uint64_t)dt : 0);
	peer_end(g, p, probe, err);
	if (!err) {
		ST_ADD(g, peer_hits, 1);
		ST_ADD(g, peer_bytes, *got);
		recent_note(g, key, p->node);
		return 0;
	}
	recent_forget(g, key);
	if (err == ENOENT)
		ST_ADD(g, peer_misses, 1);
	else
		ST_ADD(g, peer_errors, 1);
	return err;
}

static int g_get(struct objstore *s, const char *key, uint64_t off, size_t len,
		 void **data, size_t *got)
{
	struct group *g = grp_of(s);
	struct gset *set;
	struct gpeer *p;
	int probe, fetched, err;

	switch (route_of(g, key, &set, &p, &probe)) {
	case R_LOCAL:
		recent_forget(g, key);
		return objstore_get(g->cache, key, off, len, data, got);
	case R_STORE:
		recent_forget(g, key);
		return objstore_get(g->store, key, off, len, data, got);
	case R_OWNER:
		recent_forget(g, key);
		return owner_get(g, key, off, len, data, got, &fetched);
	case R_PEER:
		break;
	}
	err = ask_peer(g, p, probe, key, off, len, data, got);
	set_put(set);
	if (!err || err == ENOENT)
		return err;
	return objstore_get(g->store, key, off, len, data, got);
}

/*
 * A whole object as a view. From a peer: its bytes in memory, with the
 * local cache's fill hung on it when keep_copies (written once the reader
 * checked them). As the owner: the flight's bytes (owner_fetch).
 */
static int g_get_view(struct objstore *s, const char *key,
		      struct objstore_view *v)
{
	struct group *g = grp_of(s);
	struct gset *set;
	struct gpeer *p;
	void *fill = NULL, *data = NULL;
	size_t got = 0;
	int probe, fetched, err;

	switch (route_of(g, key, &set, &p, &probe)) {
	case R_LOCAL:
		recent_forget(g, key);
		return objstore_get_view(g->cache, key, v);
	case R_STORE:
		recent_forget(g, key);
		return objstore_get_view(g->store, key, v);
	case R_OWNER:
		recent_forget(g, key);
		return owner_fetch(g, key, v, &fetched);
	case R_PEER:
		break;
	}
	/* taken before the fetch: a put or delete meanwhile makes it moot */
	if (g->keep_copies)
		fill = diskcache_fill_begin(g->cache, key);
	err = ask_peer(g, p, probe, key, 0, 0, &data, &got);
	set_put(set);
	if (!err && (err = objstore_view_of_mem(v, data, data, got)))
		bigbuf_free(data);
	if (!err) {
		diskcache_fill_hang(g->cache, fill, v);
		return 0;
	}
	diskcache_fill_cancel(g->cache, fill);
	if (err == ENOENT)
		return err;
	return objstore_get_view(g->store, key, v);
}

/* ---- what passes to the cache ---------------------------------------- */

static int g_put(struct objstore *s, const char *key, const void *data,
		 size_t len)
{
	return objstore_put(grp_of(s)->cache, key, data, len);
}

static int g_put_lazy(struct objstore *s, const char *key, const void *data,
		      size_t len)
{
	return objstore_put_lazy(grp_of(s)->cache, key, data, len);
}

static int g_sync(struct objstore *s)
{
	return objstore_sync(grp_of(s)->cache);
}

static int g_del(struct objstore *s, const char *key)
{
	return objstore_del(grp_of(s)->cache, key);
}

static int g_head(struct objstore *s, const char *key, uint64_t *size)
{
	return objstore_head(grp_of(s)->cache, key, size);
}

static int g_list(struct objstore *s, const char *prefix, objstore_list_fn fn,
		  void *arg)
{
	return objstore_list(grp_of(s)->cache, prefix, fn, arg);
}

/*
 * A bad copy: when the last copy of key read here came from a peer, that
 * peer is told (its copy is dropped there) and key is read from the store
 * for a while; 0, so that the reader asks again. Else the local cache's
 * copy is dropped, as on one node.
 */
static int g_evict(struct objstore *s, const char *key, int bad)
{
	struct group *g = grp_of(s);
	uint64_t node;

	if (!bad)
		return objstore_evict(g->cache, key);
	if (!recent_take_bad(g, key, &node))
		return objstore_evict_bad(g->cache, key);
	ST_ADD(g, bad_from_peers, 1);
	log_warn("cache group: the copy of '%s' from member %016" PRIx64
		 " failed its check: reading it from the store",
		 key, node);
	report_bad(g, node, key);
	return 0;
}

/* ---- the server's handler ------------------------------------------------ */

static void view_free(void *arg)
{
	struct objstore_view *v = arg;

	objstore_view_release(v);
	free(v);
}

/*
 * A get from a peer: a file body from the cache's entry when it is there
 * (sendfile, any range); a whole object not there is fetched through the
 * cache once for all who ask (the flight) and sent from memory; a range
 * of one not there goes through the cache (packs are fetched whole and
 * kept there; other ranges pass through to the store, as on one node).
 */
static int srv_get(void *arg, const char *key, uint64_t off, uint64_t len,
		   struct peer_body *b)
{
	struct group *g = arg;
	uint64_t size;
	void *data = NULL;
	size_t got = 0;
	int fd, fetched = 0, err;

	err = diskcache_open_entry(g->cache, key, &fd, &size);
	if (!err) {
		b->fd = fd;
		b->off = off;
		b->len = off < size ? (size - off < len ? size - off : len) : 0;
		ST_ADD(g, served, 1);
		return 0;
	}
	if (off == 0 && len == UINT64_MAX) {
		struct objstore_view *v = malloc(sizeof(*v));
		if (!v)
			return ENOMEM;
		if ((err = owner_fetch(g, key, v, &fetched))) {
			free(v);
			goto out;
		}
		b->data = v->data;
		b->len = v->len;
		b->free_fn = view_free;
		b->free_arg = v;
	} else {
		size_t n = len >= SIZE_MAX ? 0 : (size_t)len;
		if ((err = owner_get(g, key, off, n, &data, &got, &fetched)))
			goto out;
		b->data = data;
		b->len = got;
		b->free_fn = bigbuf_free;
		b->free_arg = data;
	}
	ST_ADD(g, served, 1);
out:
	if (fetched)
		ST_ADD(g, served_fetches, 1);
	if (err && err != ENOENT)
		log_debug("cache group: cannot serve '%s': %s", key,
			  gr_strerror(err));
	return err;
}

static int srv_has(void *arg, const char *key)
{
	struct group *g = arg;

	return diskcache_contains(g->cache, key) ? 0 : ENOENT;
}

/* Fetch key into this node's cache (whole) and return once it is there. */
static int warm_here(struct group *g, const char *key, int *fetched)
{
	struct objstore_view v;
	int err;

	*fetched = 0;
	if (diskcache_contains(g->cache, key))
		return 0;
	if (!(err = owner_fetch(g, key, &v, fetched)))
		objstore_view_release(&v);
	return err;
}

static int srv_warm(void *arg, const char *key)
{
	struct group *g = arg;
	int fetched, err = warm_here(g, key, &fetched);

	if (fetched)
		ST_ADD(g, served_fetches, 1);
	return err;
}

static void srv_bad(void *arg, const char *key)
{
	struct group *g = arg;

	if (objstore_evict_bad(g->cache, key) == 0)
		log_warn("cache group: a member found the copy of '%s' it got "
			 "from here bad: dropped",
			 key);
}

/* ---- the group's own calls ------------------------------------------------
 */

const char *group_addr(struct objstore *gs)
{
	struct group *g = grp_of(gs);

	return g ? g->addr : "";
}

int group_owner(struct objstore *gs, const char *key, int *self, char *addr,
		size_t cap)
{
	struct group *g = grp_of(gs);
	struct gset *s;
	int i;

	*self = 0;
	if (cap)
		addr[0] = '\0';
	if (!g || !key)
		return EINVAL;
	s = set_get(g);
	i = rdv_owner(s->rdv, s->n, key, strlen(key));
	if (i >= 0) {
		*self = s->p[i]->self;
		if (!*self && cap)
			snprintf(addr, cap, "%s", s->p[i]->addr);
	}
	set_put(s);
	return i < 0 ? ENOENT : 0;
}

int group_warm(struct objstore *gs, const char *key)
{
	struct group *g = grp_of(gs);
	struct gset *s;
	struct gpeer *p;
	int i, probe, fetched, err;

	if (!g || !key)
		return EINVAL;
	s = set_get(g);
	i = rdv_owner(s->rdv, s->n, key, strlen(key));
	if (i < 0 || s->p[i]->self) {
		/* the owner, or a group of takers: this node's cache */
		set_put(s);
		return warm_here(g, key, &fetched);
	}
	p = s->p[i];
	if (!peer_admit(g, p, &probe)) {
		set_put(s);
		return PEER_EDOWN;
	}
	err = peer_warm(g->cli, p->addr, key);
	peer_end(g, p, probe, err);
	set_put(s);
	return err;
}

int group_where(struct objstore *gs, const char *key, int *here, int *in_group)
{
	struct group *g = grp_of(gs);
	struct gset *s;
	struct gpeer *p;
	int i, probe, err = 0;

	*here = *in_group = 0;
	if (!g || !key)
		return EINVAL;
	*here = diskcache_contains(g->cache, key);
	s = set_get(g);
	i = rdv_owner(s->rdv, s->n, key, strlen(key));
	if (i < 0 || s->p[i]->self) {
		*in_group = *here;
	} else if (!peer_admit(g, (p = s->p[i]), &probe)) {
		err = PEER_EDOWN;
	} else {
		err = peer_has(g->cli, p->addr, key);
		peer_end(g, p, probe, err);
		*in_group = err == 0;
		if (err == ENOENT)
			err = 0;
	}
	set_put(s);
	return err;
}

void group_get_stats(struct objstore *gs, struct group_stats *st)
{
	struct group *g = grp_of(gs);
	struct peer_server_stats ss = {0};
	struct gset *s;

	memset(st, 0, sizeof(*st));
	if (!g)
		return;
	st->peer_hits = metric_get(&g->st.peer_hits);
	st->peer_misses = metric_get(&g->st.peer_misses);
	st->peer_errors = metric_get(&g->st.peer_errors);
	st->peer_skipped = metric_get(&g->st.peer_skipped);
	st->peer_bytes = metric_get(&g->st.peer_bytes);
	st->bad_from_peers = metric_get(&g->st.bad_from_peers);
	metric_hist_read(&g->st.peer_lat, &st->peer_lat);
	st->served = metric_get(&g->st.served);
	st->served_fetches = metric_get(&g->st.served_fetches);
	st->self_owned = metric_get(&g->st.self_owned);
	if (g->srv) {
		peer_server_get_stats(g->srv, &ss);
		st->served_bytes = ss.bytes_sent;
		st->refused_auth = ss.refused_auth;
	}
	s = set_get(g);
	st->members = s->n;
	set_put(s);
}

struct objstore *group_of(struct objstore *s)
{
	/* the layers a mount may stack above the group: the sealing one */
	while (s && s->ops != &group_ops)
		s = objstore_crypt_inner(s);
	return s;
}

/* ---- open and close -------------------------------------------------------
 */

static void g_free(struct group *g)
{
	if (g->set)
		set_put(g->set);
	peer_client_close(g->cli);
	for (size_t i = 0; i < FLIGHTS; i++)
		pthread_cond_destroy(&g->flights[i].cv);
	pthread_mutex_destroy(&g->set_lock);
	pthread_mutex_destroy(&g->down_lock);
	pthread_mutex_destroy(&g->flight_lock);
	pthread_mutex_destroy(&g->recent_lock);
	free(g->base.url);
	free(g);
}

/* The server first (its handler uses the cache), then the reports (sent
 * with the client), then the cache and its store. */
static void g_close(struct objstore *s)
{
	struct group *g = grp_of(s);

	peer_server_stop(g->srv);
	g->srv = NULL;
	workq_close(g->reports);
	g->reports = NULL;
	objstore_close(g->cache);
	g->base.url = NULL; /* objstore_close's to free */
	g_free(g);
}

static const struct objstore_ops group_ops = {
    .scheme = "group",
    .get = g_get,
    .put = g_put,
    .put_lazy = g_put_lazy,
    .sync = g_sync,
    .del = g_del,
    .head = g_head,
    .list = g_list,
    .evict = g_evict,
    .get_view = g_get_view,
    .close = g_close,
};

int group_open(struct objstore *cache, const struct group_opts *o,
	       struct objstore **out)
{
	struct peer_client_opts co = {0};
	struct group *g;
	int err;

	if (!out)
		return EINVAL;
	*out = NULL;
	if (!cache || !diskcache_backend(cache) || !o || !o->node || !o->secret)
		return EINVAL;
	if (!(g = calloc(1, sizeof(*g))))
		return ENOMEM;
	pthread_mutex_init(&g->set_lock, NULL);
	pthread_mutex_init(&g->down_lock, NULL);
	pthread_mutex_init(&g->flight_lock, NULL);
	pthread_mutex_init(&g->recent_lock, NULL);
	for (size_t i = 0; i < FLIGHTS; i++)
		pthread_cond_init(&g->flights[i].cv, NULL);
	g->cache = cache;
	g->store = diskcache_backend(cache);
	g->node = o->node;
	g->weight = o->listen ? o->weight : 0;
	g->keep_copies = o->keep_copies;
	g->down_ms = o->down_ms ? o->down_ms : DOWN_MS_DEFAULT;
	if (g->down_ms > DOWN_MS_MAX)
		g->down_ms = DOWN_MS_MAX;
	if (cache->url && !(g->base.url = strdup(cache->url))) {
		err = ENOMEM;
		goto free_g;
	}
	co.secret = o->secret;
	co.node = o->node;
	co.connect_timeout_ms = o->connect_timeout_ms;
	co.timeout_ms = o->timeout_ms;
	if ((err = peer_client_open(&co, &g->cli)))
		goto free_g;
	if ((err = workq_open("gr-groupbad", 1, REPORTS, &g->reports)))
		goto free_g;
	if (!(g->set = set_new(1))) {
		err = ENOMEM;
		goto close_reports;
	}
	g->base.ops = &group_ops;
	g->base.layered =
	    1; /* the store below rides out its outages; a
		  peer's failure is not one (the store is asked) */
	if (o->listen) {
		struct peer_server_opts so = {.addr = o->listen,
					      .secret = o->secret,
					      .threads = SRV_THREADS,
					      .fetchers = SRV_FETCHERS,
					      .max_conns = SRV_CONNS};
		struct peer_handler h = {.get = srv_get,
					 .has = srv_has,
					 .warm = srv_warm,
					 .bad = srv_bad,
					 .arg = g};
		if ((err = peer_server_start(&so, &h, &g->srv))) {
			log_err("cache group: cannot serve at '%s': %s",
				o->listen, gr_strerror(err));
			goto close_reports;
		}
		snprintf(g->addr, sizeof(g->addr), "%s",
			 peer_server_addr(g->srv));
		/* alone until the first list: this node owns everything */
		if ((err = set_add(g, g->set, NULL, g->node, g->addr,
				   g->weight))) {
			peer_server_stop(g->srv);
			g->srv = NULL;
			goto close_reports;
		}
	}
	*out = &g->base;
	return 0;

close_reports:
	workq_close(g->reports);
free_g:
	g_free(g); /* the cache stays the caller's */
	return err;
}
