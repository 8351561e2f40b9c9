/*
 * redis_lock.c - file locks of the Redis engine (meta_lock.h): calls of
 * the lock_set and lock_get scripts (meta/lua/lock_*.lua, lib/lock.lua),
 * which keep the per-inode tables and check conflicts where they are
 * granted, and this client's book of the locks it holds, so that a lock
 * call survives a lost connection and a lost lock is not believed held.
 * Waiting for a lock is the caller's business (fs/vfs/lock.c).
 *
 * Invariants, an owner being a (kind, inode, lock owner):
 * 1. One call of an owner is under way at a time: its stripe mutex is held
 *    across the call, its resends, and the earlier unlocks of it sent
 *    first. So an owner's next call never overtakes one sent again.
 * 2. Every lock_set carries a request id (book.req, increasing) and the
 *    floor: the lowest id of a call not finished yet (in flight, or an
 *    unlock queued), so that any id below it is a call that finished. The
 *    script keeps the id of the last call that changed an owner's ranges
 *    and the highest floor of the session: a call whose id is not above
 *    the first (a resend of one applied: 1 lets no other call of the
 *    owner in between) or below the second (a stale copy) is answered
 *    done, unapplied. So a call whose connection failed is sent again with
 *    its id (RUN_RETRY) and applies at most once.
 * 3. An unlock is never forgotten: one that cannot be delivered (resends
 *    exhausted: redis_conn.c retry_again) is queued with its id and sent
 *    again before the owner's next call and at each heartbeat
 *    (redis_lock_retry), in order, until it gets through or the session
 *    ends (which drops every lock of it). Its caller is told 0.
 * 4. An owner is in the book while it holds a range as far as its caller
 *    knows (held: the last reply said so), has lost its locks (lost), or
 *    has unlocks queued. lost is set for every held owner when the session
 *    was found dead (redis_lock_lost: the heartbeat says so, or lock_set
 *    refuses the session and it renews at once); the owner's calls then
 *    fail with META_ELOCKLOST (an unlock is applied all the same), until
 *    an unlock of the whole file (what a close sends) clears it.
 *
 * Lock order: an owner's stripe -> book.lock; the pool's locks after both
 * (book.lock is never held across a Redis call).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <sys/queue.h>

#include "lib/hash.h"
#include "lib/log.h"
#include "meta/meta_lock.h"
#include "meta/redis_int.h"

#define STRIPES 64   /* owner mutexes (invariant 1), chosen by hash */
#define LK_DEAD (-1) /* lock_set: the caller's session is dead */

/* An owner in the book (invariant 4). */
struct owner {
	struct hash_node hn;
	uint64_t ino, owner;
	char kind;
	unsigned char held, lost;
	unsigned queued; /* its unlocks in book.queue */
};

/* A lock_set call: an owner, a range, the request id. Queued when it is an
 * unlock not delivered (invariant 3). */
struct call {
	STAILQ_ENTRY(call) link; /* book.queue */
	LIST_ENTRY(call) fly;	 /* book.inflight */
	char kind;
	int type;
	uint64_t ino, owner, start, end, req;
	uint32_t pid;
};

struct redis_locks {
	pthread_mutex_t stripe[STRIPES]; /* invariant 1; before lock */
	pthread_mutex_t lock;		 /* leaf */
	struct hash owners;		 /* struct owner; protected by lock */
	/* unlocks not delivered, oldest first; protected by lock */
	STAILQ_HEAD(, call) queue;
	/* meta_lock_set calls under way; protected by lock */
	LIST_HEAD(, call) inflight;
	int queue_logged; /* protected by lock */
	uint64_t req; /* the last request id handed out; protected by lock */
	_Atomic unsigned losses; /* redis_lock_lost calls so far */
};

static uint64_t clamp(uint64_t v)
{
	return v > META_LOCK_EOF ? META_LOCK_EOF : v;
}

static uint64_t owner_hash(char kind, uint64_t ino, uint64_t owner)
{
	return hash_mix64(ino ^ owner * 0x9e3779b97f4a7c15ull ^
			  (uint64_t)(unsigned char)kind << 56);
}

static int owner_match(const struct hash_node *n, const void *key)
{
	const struct owner *o = hash_entry(n, struct owner, hn);
	const struct call *c = key;
	return o->ino == c->ino && o->owner == c->owner && o->kind == c->kind;
}

/* ---- the book ---------------------------------------------------------- */

int redis_lock_open(struct meta *m)
{
	struct redis_locks *b = calloc(1, sizeof(*b));

	if (!b || hash_init(&b->owners, 4)) {
		free(b);
		return ENOMEM;
	}
	for (int i = 0; i < STRIPES; i++)
		pthread_mutex_init(&b->stripe[i], NULL);
	pthread_mutex_init(&b->lock, NULL);
	STAILQ_INIT(&b->queue);
	LIST_INIT(&b->inflight);
	m->locks = b;
	return 0;
}

void redis_lock_close(struct meta *m)
{
	struct redis_locks *b = m->locks;
	struct hash_node *h, *next;
	struct call *c;

	if (!b)
		return;
	m->locks = NULL;
	while ((c = STAILQ_FIRST(&b->queue))) {
		STAILQ_REMOVE_HEAD(&b->queue, link);
		free(c);
	}
	for (h = hash_first(&b->owners); h; h = next) {
		next = hash_next(&b->owners, h);
		free(hash_entry(h, struct owner, hn));
	}
	hash_release(&b->owners);
	for (int i = 0; i < STRIPES; i++)
		pthread_mutex_destroy(&b->stripe[i]);
	pthread_mutex_destroy(&b->lock);
	free(b);
}

/* The owner of c in the book, added when add (NULL: not there, or out of
 * memory: then the book only forgets what a loss would have marked).
 * Under b->lock. */
static struct owner *owner_get(struct redis_locks *b, const struct call *c,
			       int add)
{
	uint64_t h = owner_hash(c->kind, c->ino, c->owner);
	struct hash_node *n = hash_find(&b->owners, h, owner_match, c);
	struct owner *o;

	if (n || !add)
		return n ? hash_entry(n, struct owner, hn) : NULL;
	o = calloc(1, sizeof(*o));
	if (!o)
		return NULL;
	o->ino = c->ino;
	o->owner = c->owner;
	o->kind = c->kind;
	hash_insert(&b->owners, &o->hn, h);
	return o;
}

/* Drop o from the book once nothing is left to remember of it. */
static void owner_put(struct redis_locks *b, struct owner *o)
{
	if (o && !o->held && !o->lost && !o->queued) {
		hash_remove(&b->owners, &o->hn);
		free(o);
	}
}

size_t redis_lock_lost(struct meta *m)
{
	struct redis_locks *b = m->locks;
	struct hash_node *h;
	size_t n = 0;

	if (!b)
		return 0;
	pthread_mutex_lock(&b->lock);
	atomic_fetch_add(&b->losses, 1);
	for (h = hash_first(&b->owners); h; h = hash_next(&b->owners, h)) {
		struct owner *o = hash_entry(h, struct owner, hn);
		if (o->held) {
			o->held = 0;
			o->lost = 1;
			n++;
		}
	}
	pthread_mutex_unlock(&b->lock);
	return n;
}

/* ---- one call ---------------------------------------------------------- */

/* {0, 1, type, start, end, pid, sid} into c (may be NULL): EAGAIN */
static int conflict_of(const redisReply *r, struct meta_lock *c)
{
	if (r->elements < 7)
		return META_EPROTO;
	if (c) {
		c->type = (int)redis_reply_u64(r->element[2]);
		c->start = redis_reply_u64(r->element[3]);
		c->end = redis_reply_u64(r->element[4]);
		c->pid = (uint32_t)redis_reply_u64(r->element[5]);
		c->sid = redis_reply_u64(r->element[6]);
	}
	return EAGAIN;
}

/* The lowest request id of a call not finished (invariant 2). */
static uint64_t book_floor(struct redis_locks *b)
{
	uint64_t f;
	struct call *c;

	pthread_mutex_lock(&b->lock);
	f = b->req + 1;
	LIST_FOREACH(c, &b->inflight, fly) {
		if (c->req < f)
			f = c->req;
	}
	STAILQ_FOREACH(c, &b->queue, link) {
		if (c->req < f)
			f = c->req;
	}
	pthread_mutex_unlock(&b->lock);
	return f;
}

/* Send q (lock_set) with floor, resent after a lost connection (invariant
 * 2): 0 and *held, EAGAIN and *conflict, LK_DEAD, or the run's error. */
static int call_send(struct meta *m, const struct call *q, uint64_t floor,
		     int *held, struct meta_lock *conflict)
{
	char k[2] = {q->kind, 0};
	struct cmd c;
	redisReply *r;
	int err;

	redis_cmd_script(m, &c, SC_LOCK_SET);
	redis_cmd_str(&c, k);
	redis_cmd_u64(&c, q->ino);
	redis_cmd_u64(&c, atomic_load(&m->sid));
	redis_cmd_u64(&c, q->owner);
	redis_cmd_i64(&c, q->type);
	redis_cmd_u64(&c, q->start);
	redis_cmd_u64(&c, q->end);
	redis_cmd_u64(&c, q->pid);
	redis_cmd_i64(&c, m->opts.session_ttl);
	redis_cmd_u64(&c, q->req);
	redis_cmd_u64(&c, floor);
	err = redis_run_script(m, RUN_RETRY, &c, &r);
	if (err)
		return err;
	if (r->elements < 2 || r->element[1]->type != REDIS_REPLY_INTEGER)
		err = META_EPROTO;
	else if (r->element[1]->integer == 0)
		*held = r->elements > 2 && redis_reply_u64(r->element[2]);
	else if (r->element[1]->integer == 1)
		err = conflict_of(r, conflict);
	else
		err = LK_DEAD;
	freeReplyObject(r);
	return err;
}

/* Has q's owner lost its locks (invariant 4)? */
static int owner_lost(struct redis_locks *b, const struct call *q)
{
	pthread_mutex_lock(&b->lock);
	struct owner *o = owner_get(b, q, 0);
	int lost = o && o->lost;
	pthread_mutex_unlock(&b->lock);
	return lost;
}

/* call_send, and when the session is dead, renew it (which marks the
 * owners that held locks lost, *losses then the count after it) and send
 * once more, unless q is a lock of an owner that lost its locks
 * (META_ELOCKLOST). */
static int call_run(struct meta *m, const struct call *q, int *held,
		    struct meta_lock *conflict, unsigned *losses)
{
	int err = call_send(m, q, book_floor(m->locks), held, conflict);

	if (err != LK_DEAD)
		return err;
	err = redis_session_renew(m);
	if (err)
		return err;
	*losses = atomic_load(&m->locks->losses);
	if (q->type != META_LOCK_UN && owner_lost(m->locks, q))
		return META_ELOCKLOST;
	err = call_send(m, q, book_floor(m->locks), held, conflict);
	return err == LK_DEAD ? EIO : err;
}

/* ---- the queue of undelivered unlocks (invariant 3) -------------------- */

/* Queue unlock q, undelivered: err says why (logged once per queue). */
static void queue_add(struct meta *m, const struct call *q, int err)
{
	struct redis_locks *b = m->locks;
	struct call *c = malloc(sizeof(*c));
	struct owner *o;

	pthread_mutex_lock(&b->lock);
	o = owner_get(b, q, 1);
	if (!c || !o) {
		owner_put(b, o);
		pthread_mutex_unlock(&b->lock);
		free(c);
		log_err("out of memory: the unlock of the %s locks of inode "
			"%" PRIu64 " is lost; they go with this client's "
			"session",
			q->kind == META_LOCK_FLOCK ? "flock" : "POSIX", q->ino);
		return;
	}
	*c = *q;
	STAILQ_INSERT_TAIL(&b->queue, c, link);
	o->queued++;
	/* after a whole-file unlock the caller holds nothing (and was told
	 * of a loss, if any: meta_lock_set) */
	if (q->start == 0 && q->end >= META_LOCK_EOF)
		o->held = o->lost = 0;
	if (!b->queue_logged) {
		b->queue_logged = 1;
		log_warn(
		    "cannot deliver the unlock of the %s locks of inode "
		    "%" PRIu64 ": %s; it is sent again at each heartbeat "
		    "until redis takes it (other clients wait for the lock "
		    "until then)",
		    q->kind == META_LOCK_FLOCK ? "flock" : "POSIX", q->ino,
		    gr_strerror(err));
	}
	pthread_mutex_unlock(&b->lock);
}

/* Deliver the queued unlocks of q's owner, oldest first; the caller holds
 * its stripe (so no other thread takes them off the queue). 0 when none
 * is left, else the error of the one that failed (it stays queued). */
static int queue_send(struct meta *m, const struct call *q)
{
	struct redis_locks *b = m->locks;

	for (;;) {
		struct call *c = NULL;
		struct owner *o;
		unsigned losses;
		int err, held = 0;

		pthread_mutex_lock(&b->lock);
		o = owner_get(b, q, 0);
		if (o && o->queued)
			STAILQ_FOREACH(c, &b->queue, link) {
				if (c->kind == q->kind && c->ino == q->ino &&
				    c->owner == q->owner)
					break;
			}
		pthread_mutex_unlock(&b->lock);
		if (!c)
			return 0;
		err = call_run(m, c, &held, NULL, &losses);
		if (err)
			return err;
		pthread_mutex_lock(&b->lock);
		STAILQ_REMOVE(&b->queue, c, call, link);
		o->queued--;
		if (STAILQ_EMPTY(&b->queue) && b->queue_logged) {
			b->queue_logged = 0;
			log_info("the queued unlocks were delivered");
		}
		owner_put(b, o);
		pthread_mutex_unlock(&b->lock);
		free(c);
	}
}

void redis_lock_retry(struct meta *m)
{
	struct redis_locks *b = m->locks;

	/* owner by owner, from the oldest unlock; stops at a failure (redis
	 * is still away: the next heartbeat tries again), and at a stripe
	 * busy with a call (a heartbeat never waits for one, which may go
	 * on for the failover window; the next beat tries again) */
	while (b) {
		struct call head;
		pthread_mutex_t *st;
		int err;

		pthread_mutex_lock(&b->lock);
		if (STAILQ_EMPTY(&b->queue)) {
			pthread_mutex_unlock(&b->lock);
			return;
		}
		head = *STAILQ_FIRST(&b->queue);
		pthread_mutex_unlock(&b->lock);
		st = &b->stripe[owner_hash(head.kind, head.ino, head.owner) %
				STRIPES];
		if (pthread_mutex_trylock(st))
			return;
		err = queue_send(m, &head);
		pthread_mutex_unlock(st);
		if (err)
			return;
	}
}

/* ---- the calls --------------------------------------------------------- */

/* The book after a call of q that succeeded, held saying whether the
 * owner holds a range now, under q's stripe: 0, or META_ELOCKLOST for an
 * owner that lost its locks (invariant 4). losses: book.losses before the
 * call was sent. */
static int book_note(struct meta *m, const struct call *q, int held,
		     unsigned losses)
{
	struct redis_locks *b = m->locks;
	struct owner *o;
	int err = 0;

	pthread_mutex_lock(&b->lock);
	o = owner_get(b, q, held);
	if (o) {
		o->held = (unsigned char)held;
		/* a grant that crossed a loss may have been dropped by it */
		if (held && atomic_load(&b->losses) != losses) {
			o->held = 0;
			o->lost = 1;
		}
		if (o->lost) {
			err = META_ELOCKLOST;
			if (q->type == META_LOCK_UN && q->start == 0 &&
			    q->end >= META_LOCK_EOF)
				o->lost = 0;
		}
	}
	owner_put(b, o);
	pthread_mutex_unlock(&b->lock);
	return err;
}

int meta_lock_set(struct meta *m, enum meta_lock_kind kind, uint64_t ino,
		  uint64_t owner, const struct meta_lock *lk,
		  struct meta_lock *conflict)
{
	struct redis_locks *b = m->locks;
	int flock = kind == META_LOCK_FLOCK;
	struct call q = {.kind = (char)kind,
			 .type = lk->type,
			 .ino = ino,
			 .owner = owner,
			 .start = flock ? 0 : clamp(lk->start),
			 .end = flock ? META_LOCK_EOF : clamp(lk->end),
			 .pid = lk->pid};
	pthread_mutex_t *st;
	unsigned losses;
	int err, held = 0;

	if (!atomic_load(&m->sid) || !b ||
	    (kind != META_LOCK_FLOCK && kind != META_LOCK_POSIX) ||
	    lk->type < META_LOCK_UN || lk->type > META_LOCK_WR)
		return EINVAL;
	st = &b->stripe[owner_hash(q.kind, ino, owner) % STRIPES];
	pthread_mutex_lock(st);
	if (q.type != META_LOCK_UN && owner_lost(b, &q)) {
		err = META_ELOCKLOST;
		goto unlock;
	}
	/* the id and the call in flight at once: a floor never passes an id
	 * not sent yet */
	pthread_mutex_lock(&b->lock);
	q.req = ++b->req;
	LIST_INSERT_HEAD(&b->inflight, &q, fly);
	pthread_mutex_unlock(&b->lock);
	losses = atomic_load(&b->losses);
	/* this owner's earlier unlocks first (invariant 3) */
	err = queue_send(m, &q);
	if (!err)
		err = call_run(m, &q, &held, conflict, &losses);
	if (!err) {
		err = book_note(m, &q, held, losses);
	} else if (q.type == META_LOCK_UN && err != EINVAL) {
		/* an unlock is never forgotten: queued; the caller is told
		 * of a loss, if any, now (queue_add clears it) */
		int lost = owner_lost(b, &q);
		queue_add(m, &q, err);
		err = lost ? META_ELOCKLOST : 0;
	}
	pthread_mutex_lock(&b->lock);
	LIST_REMOVE(&q, fly);
	pthread_mutex_unlock(&b->lock);
unlock:
	pthread_mutex_unlock(st);
	return err;
}

int meta_lock_get(struct meta *m, uint64_t ino, uint64_t owner,
		  const struct meta_lock *lk, struct meta_lock *conflict)
{
	uint64_t sid = atomic_load(&m->sid);
	struct cmd c;
	redisReply *r;

	if (!sid)
		return EINVAL;
	redis_cmd_script(m, &c, SC_LOCK_GET);
	redis_cmd_u64(&c, ino);
	redis_cmd_u64(&c, sid);
	redis_cmd_u64(&c, owner);
	redis_cmd_i64(&c, lk->type);
	redis_cmd_u64(&c, clamp(lk->start));
	redis_cmd_u64(&c, clamp(lk->end));
	redis_cmd_i64(&c, m->opts.session_ttl);
	int err = redis_run_script(m, RUN_RETRY, &c, &r);
	if (err)
		return err;
	if (r->elements < 2 || r->element[1]->type != REDIS_REPLY_INTEGER)
		err = META_EPROTO;
	else if (r->element[1]->integer == 0)
		conflict->type = META_LOCK_UN;
	else
		err = conflict_of(r, conflict) == EAGAIN ? 0 : META_EPROTO;
	freeReplyObject(r);
	return err;
}

/* ---- test hooks -------------------------------------------------------- */

/* Test-only (declared in tests/unit/test_lock.c, not in meta_lock.h): one
 * lock_set call with request id req (and floor req: no other call under
 * way), as a resend after a lost reply would make it, outside the book. */
int meta_redis_test_lock_req(struct meta *m, enum meta_lock_kind kind,
			     uint64_t ino, uint64_t owner,
			     const struct meta_lock *lk, uint64_t req);
int meta_redis_test_lock_req(struct meta *m, enum meta_lock_kind kind,
			     uint64_t ino, uint64_t owner,
			     const struct meta_lock *lk, uint64_t req)
{
	int flock = kind == META_LOCK_FLOCK, held;
	struct call q = {.kind = (char)kind,
			 .type = lk->type,
			 .ino = ino,
			 .owner = owner,
			 .start = flock ? 0 : clamp(lk->start),
			 .end = flock ? META_LOCK_EOF : clamp(lk->end),
			 .pid = lk->pid,
			 .req = req};
	int err = call_send(m, &q, req, &held, NULL);
	return err == LK_DEAD ? EIO : err;
}
