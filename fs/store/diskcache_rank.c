/*
 * diskcache_rank.c - eviction that knows the future (diskcache.h, "The
 * future"): the plans' ranker, demoted entries, and the choice of what to
 * evict when a ranker is set (pick() in diskcache_index.c chooses without
 * one). The state and the lock are diskcache.c's (diskcache_int.h).
 *
 * A demote mark counts only while the ranker ranks its key NONE: the
 * plans change (a plan replaced by the next epoch's order, a new plan)
 * and may need again what they were done with; such an entry is ranked
 * as any planned one, and its mark counts again once no plan needs it.
 *
 * Invariants (all under dc->lock):
 *  1. The ranker is called only with the lock held (so that
 *     diskcache_set_ranker, which takes it, returns once no call of the
 *     old one is under way), and at most SCAN_MAX + 1 times per choice.
 *  2. Demoted READY entries are a suffix of the LRU (its old end):
 *     diskcache_demote and the commit of a fill demoted while FILLING put
 *     them at the tail; dc_lru_touch (a hit) clears the mark and moves the
 *     entry to the head; nothing else inserts at the tail once open. So a
 *     walk from the old end meets them first, in the order evicted.
 *  3. A choice retires nothing unless it found enough: it collects its
 *     candidates in dc->cand first, then retires.
 */
#include "fs/store/diskcache_int.h"

#include <stdint.h>

/* ---- the ranker and demote (diskcache.h) ---- */

void diskcache_set_ranker(struct objstore *cache, diskcache_rank_fn rank,
			  diskcache_passed_fn passed, void *arg)
{
	if (!diskcache_backend(cache))
		return; /* not a disk cache */
	struct diskcache *dc = dc_of(cache);
	pthread_mutex_lock(&dc->lock);
	dc->rank = rank;
	dc->passed = rank ? passed : NULL;
	dc->rank_arg = rank ? arg : NULL;
	pthread_mutex_unlock(&dc->lock);
}


void diskcache_demote(struct objstore *cache, const char *key)
{
	if (!diskcache_backend(cache) || !key)
		return;
	struct diskcache *dc = dc_of(cache);
	uint64_t h = dc_key_hash(key);
	int found = 0;

	pthread_mutex_lock(&dc->lock);
	struct dc_entry *e = dc_find(dc, h, key);
	if (e && e->state != DC_DROPPING) {
		/* FILLING: fill() commits it at the old end, marked */
		e->demoted = 1;
		if (e->state == DC_READY) {
			TAILQ_REMOVE(&dc->lru, e, link);
			TAILQ_INSERT_TAIL(&dc->lru, e, link);
		}
		found = 1;
	}
	pthread_mutex_unlock(&dc->lock);
	if (found)
		STAT_ADD(dc, demoted, 1);
}

int diskcache_room(struct objstore *cache, const char *key, uint64_t len)
{
	if (!diskcache_backend(cache) || !key)
		return 1;
	return dc_would_admit_as(dc_of(cache), key, len, DC_AHEAD);
}

/* ---- the choice ---- */

/* A max-heap of candidates by rank: the one needed furthest ahead on top. */
static void sift_down(struct dc_cand *h, size_t n, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, top = i;
		if (l < n && h[l].rank > h[top].rank)
			top = l;
		if (r < n && h[r].rank > h[top].rank)
			top = r;
		if (top == i)
			return;
		struct dc_cand t = h[i];
		h[i] = h[top];
		h[top] = t;
		i = top;
	}
}

/*
 * One walk from the LRU's old end over at most SCAN_MAX entries, asking
 * the ranker of each (but pinned ones). Taken as met, while bytes are
 * still needed: demoted entries (invariant 2: they come first), then
 * entries ranked NONE up to the first one used within min_age (today's
 * rule: everything after it is younger). KEEP entries are passed by;
 * planned ones are kept in dc->cand from its end down. If that was not
 * enough, planned candidates are taken from a heap, furthest ahead first.
 * An entry of another file system is taken only while need is not met
 * (it frees nothing on sp), as in pick().
 */
int dc_pick_ranked(struct diskcache *dc, const struct dc_space *sp, int64_t now,
		   int64_t need, int64_t need_disk, const char *key,
		   struct dc_list *out)
{
	struct dc_cand *cand = dc->cand;
	struct dc_entry *e = TAILQ_LAST(&dc->lru, dc_list), *prev;
	size_t taken = 0, nplan = 0, scanned = 0;
	int young = 0;

	for (; e && (need > 0 || need_disk > 0); e = prev) {
		prev = TAILQ_PREV(e, dc_list, link);
		if (++scanned > SCAN_MAX)
			break;
		if (dc->o.min_age && !e->demoted &&
		    now - e->last_use < (int64_t)dc->o.min_age)
			young = 1;
		/* A fetch ahead takes only demoted entries and unplanned ones
		 * past min_age: beyond the demoted suffix (invariant 2), from
		 * the first young entry on, every entry is younger and none
		 * demoted, so nothing more can be taken (the walk asked the
		 * ranker of each: a quarter of a client's CPU in an epoch) */
		if (!key && young && !e->demoted)
			break;
		if (e->pins)
			continue; /* mapped by a reader, in use */
		uint64_t rank = dc->rank(dc->rank_arg, e->key);
		if (rank == DISKCACHE_RANK_KEEP)
			continue; /* inside a window */
		/* a mark counts while no plan needs the key: one made for
		 * an older list (a plan replaced, another plan added) is
		 * passed over, the entry ranked as the plans need it */
		if (rank != DISKCACHE_RANK_NONE) {
			cand[SCAN_MAX - ++nplan] = (struct dc_cand){e, rank};
			continue;
		}
		if (!e->demoted && young)
			continue; /* unplanned, guarded by min_age */
		int here = dc->dirs[e->dir].sp == sp;
		if (need <= 0 && !here)
			continue;
		need -= (int64_t)e->size;
		if (here)
			need_disk -= (int64_t)round_up(e->size, sp->frsize);
		cand[taken++].e = e;
	}

	/* The planned ones, furthest ahead first: popped from the heap to
	 * its end, so that heap[n..nplan) are the popped ones (e NULL: not
	 * taken, another file system's). */
	struct dc_cand *heap = cand + SCAN_MAX - nplan;
	size_t n = nplan, nplanned = 0;
	uint64_t furthest = 0;
	if (!key) /* a fetch ahead: no planned entry goes for it */
		return need > 0 || need_disk > 0 ? -1 : 0;
	if (need > 0 || need_disk > 0)
		for (size_t i = n / 2; i-- > 0;)
			sift_down(heap, n, i);
	while ((need > 0 || need_disk > 0) && n > 0) {
		struct dc_cand top = heap[0];
		heap[0] = heap[--n];
		heap[n] = top;
		sift_down(heap, n, 0);
		int here = dc->dirs[top.e->dir].sp == sp;
		if (need <= 0 && !here) {
			heap[n].e = NULL;
			continue;
		}
		need -= (int64_t)top.e->size;
		if (here)
			need_disk -= (int64_t)round_up(top.e->size, sp->frsize);
		if (!nplanned++)
			furthest = top.rank;
	}
	if (need > 0 || need_disk > 0)
		return -1;
	/* Only planned entries would go, all needed before the newcomer. */
	if (nplanned && !taken && dc->rank(dc->rank_arg, key) > furthest)
		return DC_RANKED_OUT;
	if (!out)
		return 0;
	for (size_t i = 0; i < taken; i++)
		dc_evict_one(dc, cand[i].e, out, 0);
	for (size_t i = n; i < nplan; i++)
		if (heap[i].e)
			dc_evict_one(dc, heap[i].e, out, 1);
	return 0;
}
