/*
 * quota.c - the client's view of the directory quotas (quota.h): the
 * generation it last read, the limits, a gate per quota with a byte
 * limit, the chains of the directories it writes into, and the quota
 * readings statfs shows.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/vfs/quota.h"
#include "fs/vfs/space.h"
#include "lib/fsutil.h"
#include "lib/hash.h"
#include "lib/log.h"

#define QUOTA_STATFS_NS 1000000000LL /* a statfs reading is kept 1 s */

/* A quota this client knows of: its limits and its byte gate. Kept until
 * quota_free, so that a chain held by a node never points at freed
 * memory; a quota deleted keeps a gate with no limit. */
struct qgate {
	struct hash_node hn; /* in q->gates, by inode */
	struct quota *q;
	uint64_t ino;
	uint64_t max_space, max_inodes; /* protected by q->lock */
	struct space *gate; /* NULL until the quota has a byte limit */
	int listed;	    /* protected by q->lock: in the last list */
	/* statfs: the last reading and when (mono ns; 0: none); protected
	 * by q->lock */
	struct meta_quota seen;
	int64_t seen_ns;
};

struct qdir {
	struct hash_node hn; /* in q->dirs, by directory inode */
	struct meta_qchain c;
};

struct quota {
	struct meta *meta;
	int read_only;
	uint64_t gen; /* atomic: the generation of the limits and chains */
	pthread_mutex_t lock; /* leaf; protects the tables below */
	struct hash gates;    /* struct qgate by quota inode */
	struct hash dirs;     /* struct qdir by directory inode */
};

/* space_usage_fn of a quota's gate: publish this session's pending bytes
 * for it, read its stored bytes plus the other sessions' pending ones. A
 * quota gone meanwhile limits nothing (the next reload lifts the gate). */
static int gate_usage(void *arg, uint64_t pending, uint64_t *used)
{
	struct qgate *g = arg;
	struct meta_quota mq;
	int err = meta_quota_usage(g->q->meta, g->ino, pending, &mq);
	if (err == ENOENT) {
		*used = 0;
		return 0;
	}
	if (!err)
		*used = mq.used_space;
	return err;
}

static struct qgate *gate_find_locked(struct quota *q, uint64_t ino)
{
	struct hash_node *h = hash_find(&q->gates, ino, NULL, NULL);
	return h ? hash_entry(h, struct qgate, hn) : NULL;
}

/* Take limits from the volume's list; q->lock held. A new byte limit
 * opens a gate; one lifted or deleted leaves its gate with none. */
static int gates_apply_locked(struct quota *q, const struct meta_quota *l,
			      size_t n)
{
	int err = 0;
	for (struct hash_node *h = hash_first(&q->gates); h;
	     h = hash_next(&q->gates, h))
		hash_entry(h, struct qgate, hn)->listed = 0;
	for (size_t i = 0; i < n; i++) {
		struct qgate *g = gate_find_locked(q, l[i].ino);
		if (!g) {
			g = calloc(1, sizeof(*g));
			if (!g) {
				err = ENOMEM;
				continue;
			}
			g->q = q;
			g->ino = l[i].ino;
			hash_insert(&q->gates, &g->hn, g->ino);
		}
		g->listed = 1;
		g->max_space = l[i].max_space;
		g->max_inodes = l[i].max_inodes;
		g->seen_ns = 0;
		if (q->read_only)
			continue;
		if (!g->gate && g->max_space) {
			char what[48];
			snprintf(what, sizeof(what), "the quota of inode %llu",
				 (unsigned long long)g->ino);
			if (space_open(g->max_space, what, gate_usage, g,
				       &g->gate))
				err = ENOMEM;
		} else if (g->gate) {
			space_set_limit(g->gate, g->max_space);
		}
	}
	for (struct hash_node *h = hash_first(&q->gates); h;
	     h = hash_next(&q->gates, h)) {
		struct qgate *g = hash_entry(h, struct qgate, hn);
		if (!g->listed) {
			g->max_space = g->max_inodes = 0;
			g->seen_ns = 0;
			if (g->gate)
				space_set_limit(g->gate, 0);
		}
	}
	return err;
}

static void dirs_clear_locked(struct quota *q)
{
	struct hash_node *h, *next;
	for (h = hash_first(&q->dirs); h; h = next) {
		next = hash_next(&q->dirs, h);
		hash_remove(&q->dirs, h);
		free(hash_entry(h, struct qdir, hn));
	}
}

/* Read the generation; on a new one, the limits, and forget the chains. */
static int reload(struct quota *q)
{
	uint64_t gen;
	struct meta_quota *l = NULL;
	size_t n = 0;
	int err = meta_quota_gen(q->meta, &gen);
	if (err || gen == __atomic_load_n(&q->gen, __ATOMIC_ACQUIRE))
		return err;
	err = meta_quota_list(q->meta, &l, &n);
	if (err)
		return err;
	pthread_mutex_lock(&q->lock);
	err = gates_apply_locked(q, l, n);
	dirs_clear_locked(q);
	/* chains fetched from here on are this generation's */
	__atomic_store_n(&q->gen, gen, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&q->lock);
	free(l);
	if (!err)
		log_debug("quotas: generation %llu, %zu quotas",
			  (unsigned long long)gen, n);
	return err;
}

int quota_open(struct meta *m, int read_only, struct quota **out)
{
	struct quota *q = calloc(1, sizeof(*q));
	if (!q)
		return ENOMEM;
	q->meta = m;
	q->read_only = read_only;
	pthread_mutex_init(&q->lock, NULL);
	int err = hash_init(&q->gates, 4);
	if (!err)
		err = hash_init(&q->dirs, 6);
	if (!err)
		err = reload(q);
	if (err) {
		quota_free(q);
		return err;
	}
	*out = q;
	return 0;
}

void quota_free(struct quota *q)
{
	if (!q)
		return;
	struct hash_node *h, *next;
	for (h = hash_first(&q->gates); h; h = next) {
		struct qgate *g = hash_entry(h, struct qgate, hn);
		next = hash_next(&q->gates, h);
		space_free(g->gate);
		free(g);
	}
	dirs_clear_locked(q);
	hash_release(&q->gates);
	hash_release(&q->dirs);
	pthread_mutex_destroy(&q->lock);
	free(q);
}

uint64_t quota_generation(const struct quota *q)
{
	return q ? __atomic_load_n(&q->gen, __ATOMIC_ACQUIRE) : 0;
}

int quota_active(const struct quota *q)
{
	return quota_generation(q) != 0;
}

void quota_tick(struct quota *q)
{
	if (!q)
		return;
	int err = reload(q);
	if (err)
		log_warn("quotas: cannot read the volume's quotas: %s",
			 strerror(err > 0 ? err : EIO));
	if (!quota_active(q) || q->read_only)
		return;
	/* gates are never freed while the handle lives: tick them unlocked
	 * (space_tick may make a round trip) */
	size_t n = 0;
	pthread_mutex_lock(&q->lock);
	struct space **g = malloc((hash_count(&q->gates) + 1) * sizeof(*g));
	for (struct hash_node *h = hash_first(&q->gates); g && h;
	     h = hash_next(&q->gates, h)) {
		struct qgate *e = hash_entry(h, struct qgate, hn);
		if (e->gate)
			g[n++] = e->gate;
	}
	pthread_mutex_unlock(&q->lock);
	for (size_t i = 0; i < n; i++)
		space_tick(g[i]);
	free(g); /* NULL: no tick this time, the next one will */
}

/* Fill out's gates from its chain; q->lock held. */
static void chain_gates_locked(struct quota *q, struct quota_chain *out)
{
	for (size_t i = 0; i < out->c.n; i++) {
		struct qgate *g = gate_find_locked(q, out->c.q[i]);
		out->gate[i] = g ? g->gate : NULL;
	}
}

int quota_chain_of(struct quota *q, uint64_t dir, struct quota_chain *out)
{
	memset(out, 0, sizeof(*out));
	uint64_t gen = q ? __atomic_load_n(&q->gen, __ATOMIC_ACQUIRE) : 0;
	if (!gen || !dir)
		return 0;
	pthread_mutex_lock(&q->lock);
	struct hash_node *h = hash_find(&q->dirs, dir, NULL, NULL);
	if (h) {
		out->c = hash_entry(h, struct qdir, hn)->c;
		chain_gates_locked(q, out);
		pthread_mutex_unlock(&q->lock);
		return 0;
	}
	pthread_mutex_unlock(&q->lock);

	struct meta_qchain c;
	int err = meta_quota_chain(q->meta, dir, &c);
	if (err)
		return err;
	if (c.n > META_QUOTA_NEST)
		c.n = META_QUOTA_NEST;
	pthread_mutex_lock(&q->lock);
	out->c = c;
	chain_gates_locked(q, out);
	/* not a chain of an older generation's (stale insert guard) */
	if (gen == __atomic_load_n(&q->gen, __ATOMIC_ACQUIRE) &&
	    !hash_find(&q->dirs, dir, NULL, NULL)) {
		if (hash_count(&q->dirs) >= QUOTA_CHAINS_MAX)
			dirs_clear_locked(q);
		struct qdir *d = malloc(sizeof(*d));
		if (d) {
			d->c = c;
			hash_insert(&q->dirs, &d->hn, dir);
		}
	}
	pthread_mutex_unlock(&q->lock);
	return 0;
}

void quota_forget(struct quota *q, uint64_t dir)
{
	if (!quota_active(q))
		return;
	pthread_mutex_lock(&q->lock);
	struct hash_node *h = hash_find(&q->dirs, dir, NULL, NULL);
	if (h) {
		hash_remove(&q->dirs, h);
		free(hash_entry(h, struct qdir, hn));
	}
	pthread_mutex_unlock(&q->lock);
}

int quota_take(const struct quota_chain *c, uint64_t bytes)
{
	for (size_t i = 0; i < c->c.n; i++) {
		if (!c->gate[i] || space_take(c->gate[i], bytes) == 0)
			continue;
		while (i-- > 0)
			if (c->gate[i])
				space_drop(c->gate[i], bytes);
		return EDQUOT;
	}
	return 0;
}

void quota_done(const struct quota_chain *c, uint64_t bytes)
{
	for (size_t i = 0; i < c->c.n; i++)
		if (c->gate[i])
			space_done(c->gate[i], bytes);
}

void quota_drop(const struct quota_chain *c, uint64_t bytes)
{
	for (size_t i = 0; i < c->c.n; i++)
		if (c->gate[i])
			space_drop(c->gate[i], bytes);
}

void quota_changed(const struct quota_chain *c)
{
	for (size_t i = 0; i < c->c.n; i++)
		if (c->gate[i])
			space_changed(c->gate[i]);
}

int quota_statfs(struct quota *q, uint64_t dir, struct meta_quota *out)
{
	if (!quota_active(q))
		return ENOENT;
	pthread_mutex_lock(&q->lock);
	struct qgate *g = gate_find_locked(q, dir);
	if (!g || !g->listed) {
		pthread_mutex_unlock(&q->lock);
		return ENOENT;
	}
	if (g->seen_ns && fsutil_mono_ns() - g->seen_ns < QUOTA_STATFS_NS) {
		*out = g->seen;
		pthread_mutex_unlock(&q->lock);
		return 0;
	}
	pthread_mutex_unlock(&q->lock);

	struct meta_quota mq;
	int err = meta_quota_get(q->meta, dir, &mq);
	if (err)
		return err;
	pthread_mutex_lock(&q->lock);
	g->seen = mq;
	g->seen_ns = fsutil_mono_ns();
	pthread_mutex_unlock(&q->lock);
	*out = mq;
	return 0;
}
