/*
 * test_plancore.c - the bookkeeping of the epoch plans (fs/vfs/plancore.c)
 * against the rules of plan.h: the window bounds what is fetched and
 * moves with the readers' place; an open skips ahead, files opened out
 * of order are counted, one behind the place changes nothing; waits grow
 * the window up to the maximum, shared between plans; ranks keep a
 * window, order what is ahead and know nothing behind; passed files'
 * objects are demoted unless a plan needs them ahead; the process tree
 * picks the plan to move; clears make old jobs moot; limits hold.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fs/store/diskcache.h"
#include "fs/vfs/plancore.h"

#define MiB (1ull << 20)

static struct plancore *core(uint64_t window_max)
{
	struct plancore *c = NULL;
	cr_assert_eq(plancore_open(window_max, &c), 0);
	return c;
}

static struct pc_plan *plan(struct plancore *c, int32_t pid)
{
	struct pc_plan *p = NULL;
	cr_assert_eq(plancore_new(c, 0, &p), 0);
	p->pid = pid;
	return p;
}

/* n files of len bytes each, inodes ino0, ino0 + 1, ...; file i holds
 * the object "k<ino>" (listed) */
static void add(struct plancore *c, struct pc_plan *p, uint64_t ino0, size_t n,
		uint64_t len)
{
	struct pc_add *v = calloc(n, sizeof(*v));
	uint64_t *h = calloc(n, sizeof(*h));
	char k[32];

	for (size_t i = 0; i < n; i++) {
		snprintf(k, sizeof(k), "k%llu", (unsigned long long)(ino0 + i));
		h[i] = plancore_key_hash(k);
		v[i] = (struct pc_add){ino0 + i, len, &h[i], 1, 1};
	}
	cr_assert_eq(plancore_add(c, p, v, n, 0), 0);
	plancore_check(c);
	free(v);
	free(h);
}

static uint64_t rank(struct plancore *c, uint64_t ino)
{
	char k[32];
	snprintf(k, sizeof(k), "k%llu", (unsigned long long)ino);
	return plancore_rank(c, plancore_key_hash(k));
}

/* pick a fetch and finish it: ready, fetched, its key's name */
static int fetch_one(struct plancore *c, struct pc_job *j)
{
	if (!plancore_pick(c, 0, 0, j))
		return 0;
	cr_assert_eq(j->list, 0);
	char *names = malloc(32);
	size_t nk = 1;
	uint64_t h;
	snprintf(names, 32, "k%llu", (unsigned long long)j->ino[0]);
	names[strlen(names) + 1] = '\0';
	h = plancore_key_hash(names);
	plancore_done(c, j, 1, 1, &h, &nk, names);
	plancore_check(c);
	return 1;
}

static struct plan_info info(struct plancore *c, struct pc_plan *p)
{
	struct plan_info pi;
	plancore_info(c, p, 0, &pi);
	return pi;
}

Test(plancore, window_bounds_the_fetches)
{
	struct plancore *c = core(64 * MiB);
	struct pc_plan *p = plan(c, 0);
	struct pc_job j;
	int n = 0;

	add(c, p, 100, 100, 4 * MiB);
	while (fetch_one(c, &j)) {
		cr_assert_eq(j.ino[0], 100 + (uint64_t)n);
		n++;
	}
	/* a 32 MiB window: the files that start inside it */
	cr_assert_eq(n, 8);
	cr_assert_eq(info(c, p).ahead, 32 * MiB);
	cr_assert_eq(info(c, p).window, 32 * MiB);
	/* the reader opens the first: one more fits */
	cr_assert_eq(plancore_opened(c, 100, NULL, 0, 0, NULL), 1);
	cr_assert_eq(info(c, p).place, 1);
	cr_assert_eq(info(c, p).ready, 1);
	cr_assert_eq(info(c, p).used, 4 * MiB);
	cr_assert(fetch_one(c, &j));
	cr_assert_eq(j.ino[0], 108);
	cr_assert_not(fetch_one(c, &j));
	plancore_close(c);
}

Test(plancore, skip_ahead_and_out_of_order)
{
	struct plancore *c = core(1024 * MiB);
	struct pc_plan *p = plan(c, 0);
	struct pc_job j;

	add(c, p, 1, 10, MiB);
	while (fetch_one(c, &j))
		;
	/* 4 workers: the fourth's file first, then the others' */
	cr_assert_eq(plancore_opened(c, 4, NULL, 0, 0, NULL), 1);
	cr_assert_eq(info(c, p).place, 4);
	cr_assert_eq(info(c, p).ahead, 6 * MiB);
	cr_assert_eq(plancore_opened(c, 2, NULL, 0, 0, NULL), 1);
	cr_assert_eq(plancore_opened(c, 1, NULL, 0, 0, NULL), 1);
	cr_assert_eq(plancore_opened(c, 3, NULL, 0, 0, NULL), 1);
	cr_assert_eq(info(c, p).place, 4,
		     "opens behind the place move nothing");
	cr_assert_eq(info(c, p).ready, 4, "but are counted");
	/* a second open of a file behind the place: nothing at all */
	cr_assert_eq(plancore_opened(c, 2, NULL, 0, 0, NULL), 0);
	cr_assert_eq(info(c, p).ready, 4);
	/* not planned at all */
	cr_assert_eq(plancore_opened(c, 99, NULL, 0, 0, NULL), 0);
	cr_assert_eq(plancore_naming(c, 99), 0);
	/* a skip to the end */
	cr_assert_eq(plancore_opened(c, 10, NULL, 0, 0, NULL), 1);
	cr_assert_eq(info(c, p).place, 10);
	cr_assert_eq(info(c, p).ahead, 0);
	plancore_check(c);
	plancore_close(c);
}

Test(plancore, waits_grow_the_window)
{
	struct plancore *c = core(128 * MiB);
	struct pc_plan *p = plan(c, 0);

	add(c, p, 1, 200, MiB);
	/* nothing fetched: every open waits */
	for (uint64_t i = 1; i <= 200; i++)
		plancore_opened(c, i, NULL, 0, 0, NULL);
	cr_assert_eq(info(c, p).waited, 200);
	cr_assert_eq(info(c, p).ready, 0);
	cr_assert_eq(info(c, p).window, 128 * MiB, "doubled up to the max");
	plancore_check(c);
	plancore_close(c);
}

Test(plancore, ready_opens_do_not_grow_it)
{
	struct plancore *c = core(128 * MiB);
	struct pc_plan *p = plan(c, 0);
	struct pc_job j;

	add(c, p, 1, 100, MiB);
	for (uint64_t i = 1; i <= 100; i++) {
		while (fetch_one(c, &j))
			;
		plancore_opened(c, i, NULL, 0, 0, NULL);
	}
	cr_assert_eq(info(c, p).ready, 100);
	cr_assert_eq(info(c, p).window, 32 * MiB);
	cr_assert_eq(info(c, p).prefetched, 100 * MiB);
	cr_assert_eq(info(c, p).used, 100 * MiB);
	cr_assert_eq(info(c, p).wasted, 0);
	plancore_close(c);
}

Test(plancore, ranks)
{
	struct plancore *c = core(8 * MiB);
	struct pc_plan *p = plan(c, 0);

	add(c, p, 1, 20, MiB);
	cr_assert_eq(rank(c, 1), DISKCACHE_RANK_KEEP);
	cr_assert_eq(rank(c, 8), DISKCACHE_RANK_KEEP);
	cr_assert_eq(rank(c, 9), 8 * MiB);
	cr_assert_eq(rank(c, 20), 19 * MiB);
	cr_assert_eq(rank(c, 21), DISKCACHE_RANK_NONE);
	plancore_opened(c, 5, NULL, 0, 0, NULL);
	cr_assert_eq(rank(c, 3), DISKCACHE_RANK_NONE, "behind the place");
	cr_assert_eq(rank(c, 13), DISKCACHE_RANK_KEEP);
	cr_assert_eq(rank(c, 20), 14 * MiB);
	/* a second plan names 3 ahead: its rank is that plan's; the two
	 * share the window bytes */
	struct pc_plan *q = plan(c, 0);
	add(c, q, 3, 1, MiB);
	cr_assert_eq(rank(c, 3), DISKCACHE_RANK_KEEP);
	cr_assert_eq(info(c, p).window, 4 * MiB);
	cr_assert_eq(rank(c, 9), DISKCACHE_RANK_KEEP);
	cr_assert_eq(rank(c, 10), 4 * MiB);
	plancore_close(c);
}

Test(plancore, passed_files_are_demoted)
{
	struct plancore *c = core(4 * MiB);
	struct pc_plan *p = plan(c, 0), *q = plan(c, 0);
	struct pc_demote d = {0};
	struct pc_job j;

	add(c, p, 1, 20, MiB);
	add(c, q, 15, 1, MiB); /* q needs file 15 ahead */
	while (fetch_one(c, &j))
		;
	/* each plan's window: 2 MiB */
	cr_assert_eq(info(c, p).ahead, 2 * MiB);
	/* the reader goes to 19: files behind by more than the window are
	 * settled; what it fetched and never opened is wasted */
	plancore_opened(c, 1, NULL, 0, 0, &d);
	cr_assert_eq(d.n, 0, "inside the trail");
	while (fetch_one(c, &j))
		;
	/* fetched by p: files 1, 2, 3 (k15 is q's, needed ahead) */
	plancore_opened(c, 19, NULL, 0, 0, &d);
	cr_assert_eq(d.n, 3);
	cr_assert_str_eq(d.key[0], "k1");
	cr_assert_str_eq(d.key[1], "k2");
	cr_assert_str_eq(d.key[2], "k3");
	cr_assert_eq(info(c, p).wasted, 2 * MiB,
		     "files 2 and 3 fetched, never opened");
	struct plans_stats st;
	plancore_stats(c, &st);
	cr_assert_eq(st.demoted, d.n);
	plancore_demote_release(&d);
	plancore_check(c);
	plancore_close(c);
}

Test(plancore, process_tree_picks_the_plan)
{
	struct plancore *c = core(64 * MiB);
	struct pc_plan *a = plan(c, 100), *b = plan(c, 200);
	int32_t worker_of_b[] = {201, 200, 1};
	int32_t stranger[] = {300, 1};

	add(c, a, 1, 5, MiB);
	add(c, b, 1, 5, MiB);
	cr_assert_eq(plancore_naming(c, 3), 2);
	cr_assert_eq(plancore_opened(c, 3, worker_of_b, 3, 0, NULL), 1);
	cr_assert_eq(info(c, b).place, 3);
	cr_assert_eq(info(c, a).place, 0);
	/* no plan of its tree: every plan naming it ahead moves */
	cr_assert_eq(plancore_opened(c, 4, stranger, 2, 0, NULL), 2);
	cr_assert_eq(info(c, a).place, 4);
	cr_assert_eq(info(c, b).place, 4);
	/* pid unknown: the same */
	cr_assert_eq(plancore_opened(c, 5, NULL, 0, 0, NULL), 2);
	plancore_check(c);
	plancore_close(c);
}

Test(plancore, clear_and_moot_jobs)
{
	struct plancore *c = core(64 * MiB);
	struct pc_plan *p = plan(c, 0);
	struct pc_job j;
	uint64_t h = 1;
	size_t nk = 1;

	add(c, p, 1, 4, MiB);
	cr_assert(plancore_pick(c, 0, 0, &j));
	plancore_clear(c, p, 0);
	plancore_check(c);
	cr_assert_eq(info(c, p).files, 0);
	add(c, p, 50, 4, MiB);
	/* the job of before the clear changes nothing */
	plancore_done(c, &j, 1, 1, &h, &nk, strdup("x"));
	plancore_check(c);
	cr_assert_eq(info(c, p).ahead, 0);
	cr_assert_eq(info(c, p).prefetched, 0);
	cr_assert(fetch_one(c, &j));
	cr_assert_eq(j.ino[0], 50, "the new list from its start");
	plancore_end(c, p);
	plancore_check(c);
	cr_assert_null(plancore_find(c, 1));
	struct plans_stats st;
	plancore_stats(c, &st);
	cr_assert_eq(st.made, 1);
	cr_assert_eq(st.ended, 1);
	cr_assert_eq(st.plans, 0);
	cr_assert_eq(st.files, 0);
	plancore_close(c);
}

/* Listing goes first (up to list_max listers), from past the window: a
 * rank that does not know the objects of a file ahead demotes a pack it
 * shares with a file passed. */
Test(plancore, lists_first_past_the_window)
{
	struct plancore *c = core(2 * MiB);
	struct pc_plan *p = plan(c, 0);
	struct pc_add v[40];
	struct pc_job j;

	for (int i = 0; i < 40; i++)
		v[i] = (struct pc_add){1000 + i, MiB, NULL, 0, 0};
	cr_assert_eq(plancore_add(c, p, v, 40, 0), 0);
	cr_assert(plancore_pick(c, 0, 2, &j));
	cr_assert_eq(j.list, 1, "listing waited for the fetches");
	cr_assert_eq(j.pos, 2, "files 0 and 1, in the window, are fetched");
	cr_assert_eq(j.count, 32);
	uint64_t keys[32];
	size_t nk[32];
	for (int i = 0; i < 32; i++) {
		char k[32];
		snprintf(k, sizeof(k), "k%d", 1002 + i);
		keys[i] = plancore_key_hash(k);
		nk[i] = 1;
	}
	plancore_done(c, &j, 0, 0, keys, nk, NULL);
	plancore_check(c);
	cr_assert_eq(rank(c, 1010), 10 * MiB);
	cr_assert(plancore_pick(c, 1, 2, &j));
	cr_assert_eq(j.list, 1);
	cr_assert_eq(j.pos, 34);
	cr_assert_eq(j.count, 6);
	/* the listers busy, or nothing left to list: the window's fetches */
	cr_assert(plancore_pick(c, 2, 2, &j));
	cr_assert_eq(j.list, 0);
	cr_assert_eq(j.ino[0], 1000);
	cr_assert(plancore_pick(c, 0, 2, &j));
	cr_assert_eq(j.list, 0);
	cr_assert_eq(j.ino[0], 1001);
	cr_assert_not(plancore_pick(c, 0, 2, &j));
	plancore_close(c);
}

/* The objects of a file opened are demoted PC_TRAIL_FILES files and
 * PC_TRAIL_BYTES behind the place, not a window behind: they would take
 * the room of files needed ahead. A file of the trail not yet opened (a
 * reader out of order) keeps its objects and those it shares. */
Test(plancore, opened_files_are_demoted_soon)
{
	struct plancore *c = core(64 * MiB);
	struct pc_plan *p = plan(c, 0);
	struct pc_demote d = {0};
	size_t n = PC_TRAIL_FILES + 20;
	struct pc_add *v = calloc(n, sizeof(*v));
	uint64_t *h = calloc(n, sizeof(*h));
	struct pc_job j;
	char k[32];

	/* files of 128 KiB, file i (inode 1 + i) holds "k<1 + i>"; but
	 * files 1 and 2 share a pack, "k2" */
	for (size_t i = 0; i < n; i++) {
		snprintf(k, sizeof(k), "k%zu", i == 2 ? 2 : 1 + i);
		h[i] = plancore_key_hash(k);
		v[i] = (struct pc_add){1 + i, 128 << 10, &h[i], 1, 1};
	}
	cr_assert_eq(plancore_add(c, p, v, n, 0), 0);
	for (int i = 0; i < 3; i++) {
		cr_assert(plancore_pick(c, 0, 0, &j));
		char *names = calloc(1, 32);
		size_t nk = 1;
		snprintf(names, 32, "k%d", i == 2 ? 2 : 1 + i);
		plancore_done(c, &j, 1, 1, &h[i], &nk, names);
	}
	/* files 0 and 1 opened (2 not yet: a slow reader), then the
	 * readers are far on */
	plancore_opened(c, 1, NULL, 0, 0, &d);
	plancore_opened(c, 2, NULL, 0, 0, &d);
	cr_assert_eq(d.n, 0);
	plancore_opened(c, n, NULL, 0, 0, &d);
	plancore_check(c);
	cr_assert_eq(d.n, 1, "the opened files' objects stayed a window");
	cr_assert_str_eq(d.key[0], "k1");
	plancore_demote_release(&d);
	plancore_close(c);
	free(v);
	free(h);
}

/* The ordered get form: files come for their positions in any order
 * (several threads of a caller), are held past the end and appended in
 * position order. */
Test(plancore, adds_at_positions_in_order)
{
	struct plancore *c = core(64 * MiB);
	struct pc_plan *p = plan(c, 0);
	uint64_t h = plancore_key_hash("k7");
	struct pc_add f;

	for (int pos = 3; pos >= 1; pos--) {
		f = (struct pc_add){10 + (uint64_t)pos, MiB, NULL, 0, 0};
		cr_assert_eq(plancore_add_at(c, p, (size_t)pos, &f, 0), 0);
		plancore_check(c);
		cr_assert_eq(info(c, p).files, 0, "held, not planned");
	}
	f = (struct pc_add){10 + 2, MiB, NULL, 0, 0};
	cr_assert_eq(plancore_add_at(c, p, 2, &f, 0), EEXIST);
	f = (struct pc_add){10 + 5, MiB, &h, 1, 1};
	cr_assert_eq(plancore_add_at(c, p, 5, &f, 0), 0);
	f = (struct pc_add){10, MiB, NULL, 0, 0};
	cr_assert_eq(plancore_add_at(c, p, 0, &f, 0), 0);
	plancore_check(c);
	cr_assert_eq(info(c, p).files, 4, "0 and the 1, 2, 3 held");
	cr_assert_eq(plancore_add_at(c, p, 3, &f, 0), EEXIST);
	cr_assert_eq(plancore_add_at(c, p, 4 + PC_HOLD_MAX, &f, 0), EAGAIN);
	f = (struct pc_add){10 + 4, MiB, NULL, 0, 0};
	cr_assert_eq(plancore_add_at(c, p, 4, &f, 0), 0);
	plancore_check(c);
	cr_assert_eq(info(c, p).files, 6);
	for (size_t i = 0; i < 6; i++)
		cr_assert_eq(p->f[i].ino, 10 + i);
	cr_assert_eq(rank(c, 7), DISKCACHE_RANK_KEEP, "its keys came with it");
	/* a clear drops the files held */
	f = (struct pc_add){99, MiB, &h, 1, 1};
	cr_assert_eq(plancore_add_at(c, p, 9, &f, 0), 0);
	plancore_clear(c, p, 0);
	plancore_check(c);
	f = (struct pc_add){20, MiB, NULL, 0, 0};
	cr_assert_eq(plancore_add_at(c, p, 0, &f, 0), 0);
	cr_assert_eq(info(c, p).files, 1);
	plancore_check(c);
	plancore_close(c);
}

/* A fetch that found no room but by evicting what a plan needs: its file
 * is fetched again later; its plan fetches nothing until its place moves
 * (the files passed give room) or an unstall (the ticker). */
Test(plancore, stalled_until_the_place_moves)
{
	struct plancore *c = core(64 * MiB);
	struct pc_plan *p = plan(c, 0);
	struct pc_job j, k;

	add(c, p, 1, 6, MiB);
	cr_assert(plancore_pick(c, 0, 0, &j));
	cr_assert(plancore_pick(c, 0, 0, &k));
	cr_assert_eq(k.ino[0], 2);
	plancore_done(c, &k, 0, 0, NULL, NULL, NULL);
	plancore_stalled(c, &k);
	plancore_check(c);
	cr_assert_not(plancore_pick(c, 0, 0, &k), "a stalled plan fetched");
	plancore_opened(c, 1, NULL, 0, 0, NULL);
	cr_assert(plancore_pick(c, 0, 0, &k));
	cr_assert_eq(k.ino[0], 2, "the stalled file again");
	plancore_stalled(c, &k);
	plancore_unstall(c);
	cr_assert(plancore_pick(c, 0, 0, &k));
	cr_assert_eq(k.ino[0], 2);
	cr_assert(fetch_one(c, &k));
	cr_assert_eq(k.ino[0], 3);
	plancore_check(c);
	plancore_close(c);
}

/* How far a fetch is ahead of its readers (how near a frame must be to
 * be fetched into memory when the disk has no room). */
Test(plancore, ahead_of_counts_from_the_place)
{
	struct plancore *c = core(64 * MiB);
	struct pc_plan *p = plan(c, 0);
	struct pc_job j, k, l;

	add(c, p, 1, 6, MiB);
	cr_assert(plancore_pick(c, 0, 0, &j));
	cr_assert(plancore_pick(c, 0, 0, &k));
	cr_assert(plancore_pick(c, 0, 0, &l));
	cr_assert_eq(l.ino[0], 3);
	cr_assert_eq(plancore_ahead_of(c, &j), 0);
	cr_assert_eq(plancore_ahead_of(c, &l), 2 * MiB);
	plancore_opened(c, 1, NULL, 0, 0, NULL);
	cr_assert_eq(plancore_ahead_of(c, &j), 0, "behind the place");
	cr_assert_eq(plancore_ahead_of(c, &k), 0, "at the place");
	cr_assert_eq(plancore_ahead_of(c, &l), MiB);
	plancore_end(c, p);
	cr_assert_eq(plancore_ahead_of(c, &l), UINT64_MAX, "plan gone");
	plancore_check(c);
	plancore_close(c);
}

/* A file fetched ahead whose objects the cache evicted before its open
 * is wasted, and its open waited, not used and ready (the caller checks
 * the keys plancore_opened hands it). */
Test(plancore, evicted_before_the_open_is_wasted)
{
	struct plancore *c = core(64 * MiB);
	struct pc_plan *p = plan(c, 0);
	struct pc_demote d = {0};
	struct pc_job j;

	add(c, p, 1, 3, MiB);
	while (fetch_one(c, &j))
		;
	plancore_opened(c, 1, NULL, 0, 0, &d);
	cr_assert_eq(d.nseen, 1);
	cr_assert_str_eq(d.seen[0].names, "k1");
	cr_assert_eq(info(c, p).used, MiB);
	plancore_demote_release(&d);
	plancore_opened(c, 2, NULL, 0, 0, &d);
	cr_assert_eq(d.nseen, 1);
	cr_assert_eq(d.seen[0].pos, 1);
	plancore_evicted(c, &d.seen[0]);
	plancore_evicted(c, &d.seen[0]); /* counted once */
	plancore_demote_release(&d);
	plancore_check(c);
	struct plan_info pi = info(c, p);
	cr_assert_eq(pi.used, MiB);
	cr_assert_eq(pi.wasted, MiB);
	cr_assert_eq(pi.ready, 1);
	cr_assert_eq(pi.waited, 1);
	cr_assert_eq(pi.ahead, MiB, "file 3 still ahead");
	plancore_close(c);
}

Test(plancore, limits)
{
	struct plancore *c = core(64 * MiB);
	struct pc_plan *p = NULL;
	struct pc_add one = {1, 1, NULL, 0, 0};

	for (int i = 0; i < PLAN_MAX; i++)
		cr_assert_eq(plancore_new(c, 0, &p), 0);
	cr_assert_eq(plancore_new(c, 0, &p), ENOSPC);
	cr_assert_eq(plancore_add(c, p, &one, PLAN_FILES_MAX + 1, 0), ENOSPC);
	cr_assert_eq(plancore_add(c, p, &one, 1, 0), 0);
	/* the same inode named twice in one list */
	cr_assert_eq(plancore_add(c, p, &one, 1, 0), 0);
	plancore_check(c);
	cr_assert_eq(plancore_opened(c, 1, NULL, 0, 0, NULL), 1);
	cr_assert_eq(info(c, p).place, 1);
	cr_assert_eq(plancore_opened(c, 1, NULL, 0, 0, NULL), 1);
	cr_assert_eq(info(c, p).place, 2);
	plancore_close(c);
}

/* While a list is still coming (a plan made, cleared or added to less
 * than PC_BUILD_NS ago), a key no plan names yet ranks PC_RANK_COMING
 * (needed, furthest ahead), not NONE: epoch 1's demote marks counted on
 * what epoch 2's replaced plan would add a moment later, and the fetches
 * ahead of its first files evicted it. */
Test(plancore, keys_rank_coming_while_a_list_comes)
{
	struct plancore *c = core(8 * MiB);
	struct pc_plan *p = plan(c, 0);
	int64_t t = 1000000000;
	char k[32];

	snprintf(k, sizeof(k), "k%d", 99);
	uint64_t h99 = plancore_key_hash(k);
	snprintf(k, sizeof(k), "k%d", 20);
	uint64_t h20 = plancore_key_hash(k);
	add(c, p, 1, 20, MiB);
	/* made and added at time 0: not known to be coming */
	cr_assert_eq(plancore_rank_at(c, h99, t), DISKCACHE_RANK_NONE);
	plancore_clear(c, p, t); /* a --replace */
	cr_assert_eq(plancore_rank_at(c, h20, t + 1), PC_RANK_COMING);
	cr_assert_eq(plancore_rank(c, h20), DISKCACHE_RANK_NONE);
	struct pc_add v = {20, MiB, &h20, 1, 1};
	cr_assert_eq(plancore_add(c, p, &v, 1, t + PC_BUILD_NS / 2), 0);
	cr_assert_eq(plancore_rank_at(c, h20, t + PC_BUILD_NS / 2),
		     DISKCACHE_RANK_KEEP);
	/* the add moved the end of the list's coming */
	cr_assert_eq(plancore_rank_at(c, h99, t + PC_BUILD_NS), PC_RANK_COMING);
	cr_assert_eq(
	    plancore_rank_at(c, h99, t + PC_BUILD_NS / 2 + PC_BUILD_NS),
	    DISKCACHE_RANK_NONE);
	plancore_check(c);
	plancore_close(c);
}

/* An object a plan names behind its readers' place was passed: not in the
 * cache then, the files ahead read their ranges rather than fetch it
 * whole again (plan.c). */
Test(plancore, passed_objects)
{
	struct plancore *c = core(8 * MiB);
	struct pc_plan *p = plan(c, 0);
	char k[32];

	add(c, p, 1, 4, MiB);
	snprintf(k, sizeof(k), "k%d", 2);
	uint64_t h2 = plancore_key_hash(k);
	/* file 5 shares file 2's object */
	struct pc_add v = {5, MiB, &h2, 1, 1};
	cr_assert_eq(plancore_add(c, p, &v, 1, 0), 0);
	cr_assert_not(plancore_passed(c, h2));
	cr_assert_not(plancore_passed(c, plancore_key_hash("nothing")));
	plancore_opened(c, 1, NULL, 0, 0, NULL);
	cr_assert_not(plancore_passed(c, h2), "only file 1 passed");
	plancore_opened(c, 2, NULL, 0, 0, NULL);
	cr_assert(plancore_passed(c, h2));
	plancore_check(c);
	plancore_close(c);
}
