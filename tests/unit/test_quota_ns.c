/*
 * test_quota_ns.c - directory quotas kept by the namespace and snapshot
 * scripts (meta/meta_quota.h) against a real redis-server
 * (GRANARY_TEST_REDIS): what mknod, link, unlink, rmdir, rename, the
 * trash, snapshots and versions do to the usage a quota shows, the errors
 * a user gets (EDQUOT, EXDEV), and a random run checked against a recount
 * of the trees after every step.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "meta/meta_quota.h"
#include "meta/meta_snap.h"
#include "meta/meta_trash.h"
#include "meta/meta_volume.h"
#include "meta/meta.h"
#include "tests/unit/testvol.h"

#define DB 12 /* each test wipes it with format --force */

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#define RENAME_EXCHANGE	 (1 << 1)
#endif

/* A handle on a fresh volume keeping removed files `days` days. */
static struct meta *fresh(uint32_t days)
{
	return testvol_fresh(DB, "quota", days);
}

/* ---- quotas: set, read, the generation -------------------------------- */

static void qset(struct meta *m, uint64_t ino, uint64_t space, uint64_t inodes)
{
	int created = 0, err = meta_quota_set(m, ino, space, inodes, &created);

	cr_assert_eq(err, 0, "quota set %" PRIu64 ": %s", ino,
		     gr_strerror(err));
}

static struct meta_quota qget(struct meta *m, uint64_t ino)
{
	struct meta_quota q;
	int err = meta_quota_get(m, ino, &q);

	cr_assert_eq(err, 0, "quota get %" PRIu64 ": %s", ino,
		     gr_strerror(err));
	return q;
}

static uint64_t qgen(struct meta *m)
{
	uint64_t g = 0;

	cr_assert_eq(meta_quota_gen(m, &g), 0);
	return g;
}

/* The usage quota q shows: bytes and inodes. */
#define USE(m, q, s, i)                                                        \
	do {                                                                   \
		struct meta_quota u_ = qget(m, q);                             \
		cr_assert_eq(                                                  \
		    u_.used_space, (uint64_t)(s),                              \
		    "quota %" PRIu64 ": %" PRIu64 " bytes, want %llu",         \
		    (uint64_t)(q), u_.used_space, (unsigned long long)(s));    \
		cr_assert_eq(                                                  \
		    u_.used_inodes, (uint64_t)(i),                             \
		    "quota %" PRIu64 ": %" PRIu64 " inodes, want %llu",        \
		    (uint64_t)(q), u_.used_inodes, (unsigned long long)(i));   \
	} while (0)

/* ---- the namespace -------------------------------------------------- */

static int mkn(struct meta *m, uint64_t parent, const char *name, uint8_t type,
	       uint64_t *ino)
{
	return meta_mknod(m, parent, name, type, type == META_DIR ? 0755 : 0644,
			  1000, 1000, 0, type == META_SYMLINK ? "target" : NULL,
			  ino, NULL);
}

static uint64_t mk(struct meta *m, uint64_t parent, const char *name,
		   uint8_t type)
{
	uint64_t ino = 0;
	int err = mkn(m, parent, name, type, &ino);

	cr_assert_eq(err, 0, "mknod %s: %s", name, gr_strerror(err));
	return ino;
}

/* A new directory name in parent with a quota (usage 0: it is empty). */
static uint64_t qdir(struct meta *m, uint64_t parent, const char *name,
		     uint64_t space, uint64_t inodes)
{
	uint64_t ino = mk(m, parent, name, META_DIR);

	qset(m, ino, space, inodes);
	return ino;
}

static struct meta_attr attr(struct meta *m, uint64_t ino)
{
	struct meta_attr a;

	cr_assert_eq(meta_getattr(m, ino, &a), 0);
	return a;
}

/* Append len bytes (one slice) to file ino in directory dir, charged to
 * dir's chain as a client charges it. */
static void wr(struct meta *m, uint64_t dir, uint64_t ino, uint32_t len)
{
	struct meta_chunk_slice s = {0};
	struct meta_qchain c;
	uint64_t id;

	cr_assert_eq(meta_quota_chain(m, dir, &c), 0);
	cr_assert_eq(meta_new_slice_id(m, &id), 0);
	/* appended in chunk 0: the files here stay far below 64 MiB */
	s.s = (struct meta_slice){.id = id,
				  .size = len,
				  .len = len,
				  .pos = (uint32_t)attr(m, ino).length};
	cr_assert_eq(meta_write_q(m, &c, ino, &s, 1, NULL), 0);
}

static uint64_t mkfile(struct meta *m, uint64_t parent, const char *name,
		       uint32_t len)
{
	uint64_t ino = mk(m, parent, name, META_FILE);

	if (len)
		wr(m, parent, ino, len);
	return ino;
}

/* ---- a recount: what a quota of dir must show ------------------------- */

struct count {
	uint64_t seen[4096]; /* inodes counted (a hard link once) */
	size_t n;
	uint64_t bytes;
};

static int count_seen(struct count *c, uint64_t ino)
{
	for (size_t i = 0; i < c->n; i++)
		if (c->seen[i] == ino)
			return 1;
	cr_assert(c->n < sizeof c->seen / sizeof c->seen[0]);
	c->seen[c->n++] = ino;
	return 0;
}

static void count_walk(struct meta *m, uint64_t dir, struct count *c)
{
	struct meta_dirent *e;
	size_t n;

	cr_assert_eq(meta_readdir(m, dir, 1, &e, &n), 0);
	for (size_t i = 0; i < n; i++) {
		if (count_seen(c, e[i].ino))
			continue;
		if (e[i].type == META_FILE)
			c->bytes += e[i].attr.stored;
		if (e[i].type == META_DIR)
			count_walk(m, e[i].ino, c);
	}
	meta_dirents_free(e, n);
}

/* The usage of dir's quota must be what its tree holds. */
static void recount_eq(struct meta *m, uint64_t dir, const char *when)
{
	struct count *c = calloc(1, sizeof *c);
	struct meta_quota q = qget(m, dir);

	cr_assert(c);
	count_walk(m, dir, c);
	cr_assert_eq(q.used_inodes, c->n,
		     "%s: quota %" PRIu64 " counts %" PRIu64
		     " inodes, the tree holds %zu",
		     when, dir, q.used_inodes, c->n);
	cr_assert_eq(q.used_space, c->bytes,
		     "%s: quota %" PRIu64 " counts %" PRIu64
		     " bytes, the tree holds %" PRIu64,
		     when, dir, q.used_space, c->bytes);
	free(c);
}

/* ---- mknod, unlink, rmdir ------------------------------------------- */

Test(quota_ns, mknod_counts_inodes)
{
	struct meta *m = fresh(0);
	uint64_t d = qdir(m, META_ROOT_INO, "d", 0, 4), ino, sub;

	mk(m, d, "f", META_FILE);
	sub = mk(m, d, "sub", META_DIR);
	mk(m, sub, "l", META_SYMLINK);
	USE(m, d, 0, 3);
	mk(m, sub, "fifo", META_FIFO);
	USE(m, d, 0, 4);
	cr_assert_eq(mkn(m, d, "g", META_FILE, &ino), EDQUOT);
	cr_assert_eq(mkn(m, sub, "s", META_DIR, &ino), EDQUOT);
	cr_assert_eq(mkn(m, sub, "l2", META_SYMLINK, &ino), EDQUOT);
	cr_assert_eq(meta_lookup(m, d, "g", NULL, NULL), ENOENT,
		     "nothing made");
	USE(m, d, 0, 4);
	/* outside the quota: no limit */
	mk(m, META_ROOT_INO, "out", META_FILE);
	USE(m, d, 0, 4);
	meta_close(m);
}

Test(quota_ns, mknod_edquot_when_bytes_used_up)
{
	struct meta *m = fresh(0);
	uint64_t d = qdir(m, META_ROOT_INO, "d", 1000, 0), ino, f;

	f = mkfile(m, d, "f", 999);
	USE(m, d, 999, 1);
	mk(m, d, "g", META_FILE); /* a byte left: creation goes on */
	wr(m, d, f, 1);
	USE(m, d, 1000, 2);
	cr_assert_eq(mkn(m, d, "h", META_FILE, &ino), EDQUOT);
	cr_assert_eq(mkn(m, d, "e", META_DIR, &ino), EDQUOT);
	USE(m, d, 1000, 2);
	meta_close(m);
}

Test(quota_ns, unlink_frees_the_last_name_only)
{
	struct meta *m = fresh(0);
	uint64_t d = qdir(m, META_ROOT_INO, "d", 0, 0), f;

	f = mkfile(m, d, "f", 4000);
	cr_assert_eq(meta_link_q(m, d, f, d, "f2", NULL), 0);
	USE(m, d, 4000, 1);
	cr_assert_eq(meta_unlink(m, d, "f"), 0);
	USE(m, d, 4000, 1); /* a name is left */
	cr_assert_eq(meta_unlink(m, d, "f2"), 0);
	USE(m, d, 0, 0);
	/* a symlink, a special file */
	mk(m, d, "l", META_SYMLINK);
	mk(m, d, "p", META_FIFO);
	USE(m, d, 0, 2);
	cr_assert_eq(meta_unlink(m, d, "l"), 0);
	cr_assert_eq(meta_unlink(m, d, "p"), 0);
	USE(m, d, 0, 0);
	meta_close(m);
}

Test(quota_ns, unlink_of_an_open_file)
{
	struct meta *m = fresh(0);
	uint64_t d = mk(m, META_ROOT_INO, "d", META_DIR), f;

	cr_assert_eq(meta_session_open(m, "/mnt/q"), 0); /* opens count */
	qset(m, d, 0, 0);
	f = mkfile(m, d, "f", 100);
	cr_assert_eq(meta_file_open(m, f, NULL, NULL), 0);
	cr_assert_eq(meta_unlink(m, d, "f"), 0);
	USE(m, d, 0, 0);
	/* writes through the open file charge nothing: it has no name */
	wr(m, d, f, 50);
	USE(m, d, 0, 0);
	cr_assert_eq(meta_file_close(m, f), 0);
	USE(m, d, 0, 0);
	meta_close(m);
}

Test(quota_ns, rmdir)
{
	struct meta *m = fresh(0);
	uint64_t d = qdir(m, META_ROOT_INO, "d", 0, 0);

	mk(m, d, "e", META_DIR);
	USE(m, d, 0, 1);
	cr_assert_eq(meta_rmdir(m, d, "e"), 0);
	USE(m, d, 0, 0);
	meta_close(m);
}

Test(quota_ns, rmdir_drops_the_quota)
{
	struct meta *m = fresh(0);
	uint64_t d = qdir(m, META_ROOT_INO, "d", 0, 0);
	uint64_t e, g;
	struct meta_quota q;

	e = qdir(m, d, "e", 0, 5);
	g = qgen(m);
	cr_assert_eq(meta_rmdir(m, d, "e"), 0);
	cr_assert_eq(meta_quota_get(m, e, &q), ENOENT);
	cr_assert_neq(qgen(m), g, "the clients' chains are stale");
	USE(m, d, 0, 0);
	meta_close(m);
}

Test(quota_ns, rmdir_into_the_trash_drops_the_quota)
{
	struct meta *m = fresh(1);
	uint64_t d = qdir(m, META_ROOT_INO, "d", 0, 0);
	uint64_t e;
	struct meta_quota q;

	e = qdir(m, d, "e", 0, 5);
	cr_assert_eq(meta_rmdir(m, d, "e"), 0);
	cr_assert_eq(meta_quota_get(m, e, &q), ENOENT);
	USE(m, d, 0, 0);
	meta_close(m);
}

/* ---- rename --------------------------------------------------------- */

Test(quota_ns, rename_within_a_chain)
{
	struct meta *m = fresh(0);
	uint64_t a = qdir(m, META_ROOT_INO, "a", 0, 0), x, y;

	x = mk(m, a, "x", META_DIR);
	y = mk(m, a, "y", META_DIR);
	mkfile(m, x, "f", 300);
	mk(m, x, "full", META_DIR);
	mk(m, META_ROOT_INO, "out", META_DIR);
	USE(m, a, 300, 4);
	cr_assert_eq(meta_rename(m, x, "f", y, "f", 0), 0);
	/* a non-empty directory moves freely inside its chain */
	mkfile(m, x, "g", 10);
	cr_assert_eq(meta_rename(m, a, "x", y, "x", 0), 0);
	USE(m, a, 310, 5);
	recount_eq(m, a, "within");
	meta_close(m);
}

Test(quota_ns, rename_file_out_and_in)
{
	struct meta *m = fresh(0);
	uint64_t a = qdir(m, META_ROOT_INO, "a", 1000, 3);

	mkfile(m, a, "f", 600);
	USE(m, a, 600, 1);
	cr_assert_eq(meta_rename(m, a, "f", META_ROOT_INO, "f", 0), 0);
	USE(m, a, 0, 0);
	cr_assert_eq(meta_rename(m, META_ROOT_INO, "f", a, "f", 0), 0);
	USE(m, a, 600, 1);
	/* does not fit: 600 + 500 > 1000 */
	mkfile(m, META_ROOT_INO, "big", 500);
	cr_assert_eq(meta_rename(m, META_ROOT_INO, "big", a, "big", 0), EDQUOT);
	cr_assert_eq(meta_lookup(m, META_ROOT_INO, "big", NULL, NULL), 0,
		     "nothing moved");
	USE(m, a, 600, 1);
	/* the inode limit: a symlink, a file, then no inode left */
	mk(m, META_ROOT_INO, "l", META_SYMLINK);
	mk(m, META_ROOT_INO, "e", META_FILE);
	mk(m, META_ROOT_INO, "e2", META_FILE);
	cr_assert_eq(meta_rename(m, META_ROOT_INO, "l", a, "l", 0), 0);
	cr_assert_eq(meta_rename(m, META_ROOT_INO, "e", a, "e", 0), 0);
	USE(m, a, 600, 3);
	cr_assert_eq(meta_rename(m, META_ROOT_INO, "e2", a, "e2", 0), EDQUOT);
	/* a hard-linked file never moves between chains */
	uint64_t h = mkfile(m, META_ROOT_INO, "h", 10);
	cr_assert_eq(meta_link(m, h, META_ROOT_INO, "h2", NULL), 0);
	cr_assert_eq(meta_rename(m, META_ROOT_INO, "h", a, "h", 0), EXDEV);
	cr_assert_eq(meta_rename(m, a, "f", META_ROOT_INO, "f", 0), 0);
	cr_assert_eq(meta_link_q(m, META_ROOT_INO, h, a, "h", NULL), EXDEV);
	USE(m, a, 0, 2);
	recount_eq(m, a, "in and out");
	meta_close(m);
}

Test(quota_ns, rename_between_nested_quotas)
{
	struct meta *m = fresh(0);
	uint64_t a = qdir(m, META_ROOT_INO, "a", 0, 0), b, c, deep;

	b = qdir(m, a, "b", 0, 0);
	c = mk(m, a, "c", META_DIR);
	deep = mk(m, mk(m, b, "x", META_DIR), "y", META_DIR);
	mkfile(m, deep, "f", 700);
	/* a file deep below two quotas counts in both */
	USE(m, a, 700, 5); /* b, c, x, y, f */
	USE(m, b, 700, 3); /* x, y, f */
	cr_assert_eq(meta_rename(m, deep, "f", c, "f", 0), 0);
	USE(m, a, 700, 5); /* shared: unchanged */
	USE(m, b, 0, 2);
	cr_assert_eq(meta_rename(m, c, "f", deep, "f2", 0), 0);
	USE(m, a, 700, 5);
	USE(m, b, 700, 3);
	recount_eq(m, a, "nested a");
	recount_eq(m, b, "nested b");
	meta_close(m);
}

Test(quota_ns, rename_directories_across_chains)
{
	struct meta *m = fresh(0);
	uint64_t a = qdir(m, META_ROOT_INO, "a", 0, 0);
	uint64_t b = qdir(m, META_ROOT_INO, "b", 0, 10);
	uint64_t full, q, g;

	full = mk(m, a, "full", META_DIR);
	mkfile(m, full, "f", 50);
	mk(m, a, "empty", META_DIR);
	/* a non-empty directory: its usage is not known without a walk */
	cr_assert_eq(meta_rename(m, a, "full", b, "full", 0), EXDEV);
	cr_assert_eq(meta_rename(m, a, "full", META_ROOT_INO, "full", 0),
		     EXDEV);
	USE(m, a, 50, 3);
	/* an empty one: one inode; the clients' chains of it are stale */
	g = qgen(m);
	cr_assert_eq(meta_rename(m, a, "empty", b, "empty", 0), 0);
	cr_assert_neq(qgen(m), g);
	USE(m, a, 50, 2);
	USE(m, b, 0, 1);
	/* one with a quota of its own moves its usage */
	q = qdir(m, a, "q", 0, 0);
	mkfile(m, mk(m, q, "sub", META_DIR), "g", 200);
	mkfile(m, q, "h", 20);
	USE(m, q, 220, 3);
	USE(m, a, 270, 6);
	g = qgen(m);
	cr_assert_eq(meta_rename(m, a, "q", b, "q2", 0), 0);
	cr_assert_neq(qgen(m), g, "a quota moved under other quotas");
	USE(m, a, 50, 2);
	USE(m, b, 220, 5);
	USE(m, q, 220, 3);
	/* b allows 10 inodes: q and its 3 fit, more do not */
	mk(m, mk(m, q, "more", META_DIR), "m", META_FILE);
	USE(m, b, 220, 7);
	cr_assert_eq(meta_rename(m, b, "q2", a, "q", 0), 0);
	USE(m, b, 0, 1);
	mk(m, b, "1", META_FILE);
	mk(m, b, "2", META_FILE);
	mk(m, b, "3", META_FILE);
	mk(m, b, "4", META_FILE);
	cr_assert_eq(meta_rename(m, a, "q", b, "q", 0), EDQUOT,
		     "6 inodes into 5 left");
	USE(m, q, 220, 5);
	recount_eq(m, a, "dirs a");
	recount_eq(m, b, "dirs b");
	recount_eq(m, q, "dirs q");
	meta_close(m);
}

Test(quota_ns, rename_nests_at_most_eight_quotas)
{
	struct meta *m = fresh(0);
	uint64_t a = META_ROOT_INO, b = META_ROOT_INO, b1 = 0, b2 = 0;
	char name[16];

	for (int i = 0; i < 5; i++) {
		snprintf(name, sizeof name, "a%d", i);
		a = qdir(m, a, name, 0, 0);
	}
	for (int i = 0; i < 4; i++) {
		snprintf(name, sizeof name, "b%d", i);
		b = qdir(m, b, name, 0, 0);
		b1 = i == 0 ? b : b1;
		b2 = i == 1 ? b : b2;
	}
	/* 5 above, 4 in the tree moved: 9 on the path to b3 */
	cr_assert_eq(meta_rename(m, META_ROOT_INO, "b0", a, "b0", 0), EMLINK);
	/* 8 */
	cr_assert_eq(meta_rename(m, b1, "b1", a, "b1", 0), 0);
	USE(m, a, 0, 3);
	recount_eq(m, b2, "nest");
	meta_close(m);
}

Test(quota_ns, rename_replacing)
{
	struct meta *m = fresh(0);
	uint64_t a = qdir(m, META_ROOT_INO, "a", 1000, 0);

	mkfile(m, a, "old", 800);
	mkfile(m, a, "new", 100);
	USE(m, a, 900, 2);
	/* within the chain: the replaced file is freed */
	cr_assert_eq(meta_rename(m, a, "new", a, "old", 0), 0);
	USE(m, a, 100, 1);
	/* across: 900 bytes fit once the 100 they replace are freed */
	mkfile(m, META_ROOT_INO, "in", 900);
	cr_assert_eq(meta_rename(m, META_ROOT_INO, "in", a, "old", 0), 0);
	USE(m, a, 900, 1);
	/* an empty directory replaced, inside and across */
	mk(m, a, "e1", META_DIR);
	mk(m, a, "e2", META_DIR);
	USE(m, a, 900, 3);
	cr_assert_eq(meta_rename(m, a, "e1", a, "e2", 0), 0);
	USE(m, a, 900, 2);
	mk(m, META_ROOT_INO, "e3", META_DIR);
	cr_assert_eq(meta_rename(m, META_ROOT_INO, "e3", a, "e2", 0), 0);
	USE(m, a, 900, 2);
	/* replaced from outside the quota: the target leaves it */
	mkfile(m, a, "t", 50);
	mkfile(m, META_ROOT_INO, "o", 0);
	USE(m, a, 950, 3);
	cr_assert_eq(meta_rename(m, a, "t", META_ROOT_INO, "o", 0), 0);
	USE(m, a, 900, 2);
	recount_eq(m, a, "replacing");
	meta_close(m);
}

Test(quota_ns, rename_exchange)
{
	struct meta *m = fresh(0);
	uint64_t a = qdir(m, META_ROOT_INO, "a", 0, 0), x;

	x = mk(m, a, "x", META_DIR);
	mkfile(m, a, "f", 10);
	mkfile(m, x, "g", 20);
	mkfile(m, META_ROOT_INO, "h", 30);
	cr_assert_eq(meta_rename(m, a, "f", x, "g", RENAME_EXCHANGE), 0);
	USE(m, a, 30, 3);
	cr_assert_eq(
	    meta_rename(m, a, "f", META_ROOT_INO, "h", RENAME_EXCHANGE), EXDEV);
	cr_assert_eq(
	    meta_rename(m, META_ROOT_INO, "h", x, "g", RENAME_EXCHANGE), EXDEV);
	USE(m, a, 30, 3);
	recount_eq(m, a, "exchange");
	meta_close(m);
}

Test(quota_ns, link)
{
	struct meta *m = fresh(0);
	uint64_t a = qdir(m, META_ROOT_INO, "a", 0, 3);
	uint64_t x, b, f;

	x = mk(m, a, "x", META_DIR);
	b = qdir(m, a, "b", 0, 0);
	f = mkfile(m, x, "f", 10);
	USE(m, a, 10, 3);
	/* inside the chain, even at the inode limit: no new inode */
	cr_assert_eq(meta_link_q(m, x, f, a, "f2", NULL), 0);
	USE(m, a, 10, 3);
	/* across: into a nested quota, out to the root */
	cr_assert_eq(meta_link_q(m, x, f, b, "f3", NULL), EXDEV);
	cr_assert_eq(meta_link_q(m, x, f, META_ROOT_INO, "f3", NULL), EXDEV);
	cr_assert_eq(meta_lookup(m, b, "f3", NULL, NULL), ENOENT);
	USE(m, a, 10, 3);
	USE(m, b, 0, 0);
	cr_assert_eq(attr(m, f).nlink, 2);
	recount_eq(m, a, "link");
	meta_close(m);
}

/* ---- data calls: where the file is, not what the writer was told ------ */

/* The chain a client whose parent hint for a file is dir sends. */
static struct meta_qchain chain_of(struct meta *m, uint64_t dir)
{
	struct meta_qchain c;

	cr_assert_eq(meta_quota_chain(m, dir, &c), 0);
	return c;
}

/* Another client moved the file while this one writes it: its writes,
 * truncates and fallocates still name the old directory's chain, and
 * are charged where the file is. */
Test(quota_ns, data_charges_where_the_file_is)
{
	struct meta *m = fresh(0), *o = testvol_open(DB);
	uint64_t qd = qdir(m, META_ROOT_INO, "qd", 0, 0);
	uint64_t qc = qdir(m, META_ROOT_INO, "qc", 0, 0);
	uint64_t n = qdir(m, qc, "n", 0, 0), f;
	struct meta_qchain stale = chain_of(m, qd);
	struct meta_attr a;

	f = mkfile(m, qd, "f", 1000);
	USE(m, qd, 1000, 1);
	cr_assert_eq(meta_rename(o, qd, "f", qc, "f", 0), 0);
	USE(m, qd, 0, 0);
	USE(m, qc, 1000, 2);
	wr(m, qd, f, 1000);
	USE(m, qd, 0, 0);
	USE(m, qc, 2000, 2);
	cr_assert_eq(meta_truncate_q(m, &stale, f, 1500, &a), 0);
	USE(m, qd, 0, 0);
	USE(m, qc, 1500, 2);
	cr_assert_eq(meta_fallocate_q(m, &stale, f, 0, 1500, 500, &a), 0);
	USE(m, qc, 2000, 2);
	/* a clone's destination too */
	uint64_t g = mk(m, qd, "g", META_FILE);
	cr_assert_eq(meta_rename(o, qd, "g", n, "g", 0), 0);
	cr_assert_eq(meta_clone_data_q(m, &stale, f, g, &a), 0);
	USE(m, n, 2000, 1);
	USE(m, qc, 4000, 3);
	/* out of every quota, then told nothing: charged where it is */
	cr_assert_eq(meta_rename(o, qc, "f", META_ROOT_INO, "f", 0), 0);
	wr(m, qd, f, 100);
	USE(m, qc, 2000, 2);
	cr_assert_eq(meta_rename(o, META_ROOT_INO, "f", n, "f", 0), 0);
	cr_assert_eq(meta_truncate_q(m, NULL, f, 3000, &a), 0);
	wr(m, META_ROOT_INO, f, 100);
	USE(m, n, 4200, 2);
	USE(m, qd, 0, 0);
	recount_eq(m, qd, "qd");
	recount_eq(m, qc, "qc");
	recount_eq(m, n, "n");
	meta_close(o);
	meta_close(m);
}

static struct meta_trash_entry trash_find(struct meta *m, uint64_t ino,
					  char *name, size_t cap);

/* A client's chain of the file's directory is taken as it is only while
 * the quotas' generation it was read at holds: a quota set or removed
 * since, or the directory restored from the trash, and the scripts
 * find the chain themselves. */
Test(quota_ns, data_trusts_a_chain_of_its_generation_only)
{
	struct meta *m = fresh(1);
	uint64_t q = qdir(m, META_ROOT_INO, "q", 0, 0), e, f, g, d;
	struct meta_qchain c;
	struct meta_attr a;
	char name[300];

	e = mk(m, q, "e", META_DIR);
	f = mkfile(m, e, "f", 100);
	c = chain_of(m, e);
	cr_assert_eq(c.n, 1);
	qset(m, e, 0, 0); /* counted from 0: the caller counts the tree */
	cr_assert_eq(meta_fallocate_q(m, &c, f, 0, 100, 50, &a), 0);
	USE(m, e, 50, 0);
	USE(m, q, 150, 2);
	c = chain_of(m, e);
	cr_assert_eq(c.n, 2);
	cr_assert_eq(meta_quota_delete(m, e), 0);
	cr_assert_eq(meta_fallocate_q(m, &c, f, 0, 150, 50, &a), 0);
	USE(m, q, 200, 2);
	/* a directory back from the trash: its chain was none there */
	d = mk(m, q, "d", META_DIR);
	cr_assert_eq(meta_rmdir(m, q, "d"), 0);
	struct meta_trash_entry te = trash_find(m, d, name, sizeof name);
	c = chain_of(m, d); /* what a client that saw d in the trash holds */
	cr_assert_eq(c.n, 0);
	cr_assert_eq(meta_trash_restore(m, te.hour_ino, name, q, "d"), 0);
	g = mk(m, d, "g", META_FILE);
	cr_assert_eq(meta_fallocate_q(m, &c, g, 0, 0, 70, &a), 0);
	USE(m, q, 270, 4);
	recount_eq(m, q, "generations");
	meta_close(m);
}

/* A file with several names is charged to the chain they share, also
 * once the name it was made with and its directory are gone. */
Test(quota_ns, data_of_a_hard_linked_file)
{
	struct meta *m = fresh(0), *o = testvol_open(DB);
	uint64_t a = qdir(m, META_ROOT_INO, "a", 0, 0), x, y, f;
	struct meta_qchain none = {0};
	struct meta_attr at;

	x = mk(m, a, "x", META_DIR);
	y = mk(m, a, "y", META_DIR);
	f = mkfile(m, x, "f", 100);
	cr_assert_eq(meta_link_q(o, x, f, y, "g", NULL), 0);
	cr_assert_eq(meta_link_q(o, y, f, y, "h", NULL), 0);
	cr_assert_eq(meta_unlink(o, x, "f"), 0);
	cr_assert_eq(meta_rmdir(o, a, "x"), 0);
	cr_assert_eq(meta_rename(o, y, "g", y, "g2", 0), 0);
	USE(m, a, 100, 2);
	/* the writer knows no directory of it any more */
	cr_assert_eq(meta_truncate_q(m, &none, f, 0, &at), 0);
	USE(m, a, 0, 2);
	wr(m, y, f, 300);
	USE(m, a, 300, 2);
	/* a link out of the chain is refused, whatever the hint */
	cr_assert_eq(meta_link_q(m, 0, f, META_ROOT_INO, "out", NULL), EXDEV);
	cr_assert_eq(meta_unlink(o, y, "g2"), 0);
	cr_assert_eq(meta_truncate_q(m, &none, f, 200, &at), 0);
	USE(m, a, 200, 2);
	recount_eq(m, a, "links");
	cr_assert_eq(meta_unlink(o, y, "h"), 0);
	USE(m, a, 0, 1);
	meta_close(o);
	meta_close(m);
}

/* rm of a file another client still writes, then a purge of the trash:
 * from the removal on, its bytes count in no quota (the trash's chain is
 * empty), so the usage ends where a recount puts it. */
Test(quota_ns, data_into_a_removed_file)
{
	struct meta *m = fresh(1), *o = testvol_open(DB);
	uint64_t qd = qdir(m, META_ROOT_INO, "qd", 0, 0), f, t;
	struct meta_trash_usage tu;
	struct meta_trash_purged p;
	struct meta_usage mu;

	cr_assert_eq(meta_session_open(m, "/mnt/q"), 0); /* opens count */
	f = mkfile(m, qd, "f", 1000);
	cr_assert_eq(meta_file_open(m, f, NULL, NULL), 0);
	cr_assert_eq(meta_unlink_trashed(o, qd, "f", &t), 0);
	cr_assert_eq(t, f);
	USE(m, qd, 0, 0);
	wr(m, qd, f, 2000);
	USE(m, qd, 0, 0);
	cr_assert_eq(meta_trash_usage(m, &tu), 0);
	cr_assert_eq(tu.bytes, 3000, "the trash holds %" PRIu64, tu.bytes);
	cr_assert_eq(meta_trash_purge(o, INT64_MAX, &p), 0);
	cr_assert_eq(p.entries, 1);
	wr(m, qd, f, 500);
	USE(m, qd, 0, 0);
	cr_assert_eq(meta_trash_usage(m, &tu), 0);
	cr_assert_eq(tu.bytes + tu.entries, 0);
	cr_assert_eq(meta_file_close(m, f), 0);
	USE(m, qd, 0, 0);
	recount_eq(m, qd, "purged");
	cr_assert_eq(meta_usage(m, &mu), 0);
	cr_assert_eq(mu.used_bytes, 0);
	meta_close(o);
	meta_close(m);
}

/* A raw command on the test database (binary arguments: argv, len); a
 * string reply is copied to out (its length returned, 0 otherwise). */
static size_t raw(char *out, size_t cap, int argc, const char **argv,
		  const size_t *len)
{
	redisContext *c = redisConnectUnix(testvol_sock());
	redisReply *r;
	size_t n = 0;

	cr_assert(c && !c->err);
	r = redisCommand(c, "SELECT %d", DB);
	freeReplyObject(r);
	r = redisCommandArgv(c, argc, argv, len);
	cr_assert(r && r->type != REDIS_REPLY_ERROR);
	if (r->type == REDIS_REPLY_STRING && out) {
		cr_assert((size_t)r->len <= cap);
		memcpy(out, r->str, n = (size_t)r->len);
	}
	freeReplyObject(r);
	redisFree(c);
	return n;
}

/* A tree a version restore replaced is detached (its top's parent 0)
 * until the drop deletes it, its files still counted in the chain the
 * drop frees them from (snapquota:<top> c): a file written meanwhile
 * through a descriptor still open is charged there. The state is made
 * by hand: the drop runs to its end inside meta_version_restore. */
Test(quota_ns, data_in_a_replaced_tree)
{
	struct meta *m = fresh(0);
	uint64_t a = qdir(m, META_ROOT_INO, "a", 0, 0), t, f;
	char dk[32], hk[32], fk[8], qk[48], cv[24], rec[64];

	t = mk(m, a, "t", META_DIR);
	f = mkfile(m, t, "f", 100);
	USE(m, a, 100, 2);
	/* t detached: out of a's entries, parent 0 (offset 24 of its
	 * record), then its chain in c */
	snprintf(dk, sizeof dk, "d%" PRIu64, a);
	snprintf(hk, sizeof hk, "n%" PRIu64, t / 32);
	snprintf(fk, sizeof fk, "%" PRIu64, t % 32);
	raw(NULL, 0, 3, (const char *[]){"HDEL", dk, "t"},
	    (size_t[]){4, strlen(dk), 1});
	cr_assert_eq(raw(rec, sizeof rec, 3, (const char *[]){"HGET", hk, fk},
			 (size_t[]){4, strlen(hk), strlen(fk)}),
		     59);
	memset(rec + 24, 0, 8);
	raw(NULL, 0, 4, (const char *[]){"HSET", hk, fk, rec},
	    (size_t[]){4, strlen(hk), strlen(fk), 59});
	wr(m, META_ROOT_INO, f, 50);
	USE(m, a, 100, 2); /* a detached tree alone counts nowhere */
	snprintf(qk, sizeof qk, "snapquota:%" PRIu64, t);
	snprintf(cv, sizeof cv, "%" PRIu64, a);
	raw(NULL, 0, 4, (const char *[]){"HSET", qk, "c", cv},
	    (size_t[]){4, strlen(qk), 1, strlen(cv)});
	wr(m, META_ROOT_INO, f, 50);
	USE(m, a, 150, 2);
	meta_close(m);
}

/* ---- the trash ------------------------------------------------------- */

/* The trash entry of ino. */
static struct meta_trash_entry trash_find(struct meta *m, uint64_t ino,
					  char *name, size_t cap)
{
	struct meta_trash_entry *e, out = {0};
	size_t n;

	cr_assert_eq(meta_trash_list(m, &e, &n), 0);
	for (size_t i = 0; i < n; i++)
		if (e[i].ino == ino) {
			out = e[i];
			snprintf(name, cap, "%s", e[i].name);
		}
	meta_trash_entries_free(e, n);
	cr_assert_neq(out.ino, 0, "inode %" PRIu64 " not in the trash", ino);
	out.name = out.orig = NULL;
	return out;
}

Test(quota_ns, trash)
{
	struct meta *m = fresh(1);
	uint64_t a = qdir(m, META_ROOT_INO, "a", 1000, 0), f, e, t;
	struct meta_trash_entry te;
	char name[300];

	f = mkfile(m, a, "f", 600);
	e = mk(m, a, "e", META_DIR);
	USE(m, a, 600, 2);
	cr_assert_eq(meta_unlink_trashed(m, a, "f", &t), 0);
	cr_assert_eq(t, f, "into the trash");
	cr_assert_eq(meta_rmdir(m, a, "e"), 0);
	USE(m, a, 0, 0);
	/* restore counts again */
	te = trash_find(m, f, name, sizeof name);
	cr_assert_eq(meta_trash_restore(m, te.hour_ino, name, a, "f"), 0);
	USE(m, a, 600, 1);
	te = trash_find(m, e, name, sizeof name);
	cr_assert_eq(meta_trash_restore(m, te.hour_ino, name, a, "e"), 0);
	USE(m, a, 600, 2);
	/* a restore that does not fit is refused */
	cr_assert_eq(meta_unlink(m, a, "f"), 0);
	mkfile(m, a, "g", 500);
	te = trash_find(m, f, name, sizeof name);
	cr_assert_eq(meta_trash_restore(m, te.hour_ino, name, a, "f"), EDQUOT);
	cr_assert_eq(meta_lookup(m, a, "f", NULL, NULL), ENOENT);
	USE(m, a, 500, 2);
	/* a rename out of the trash (a restore by hand) too */
	cr_assert_eq(meta_rename(m, te.hour_ino, name, a, "f", 0), EDQUOT);
	cr_assert_eq(meta_rename(m, te.hour_ino, name, META_ROOT_INO, "f", 0),
		     0);
	USE(m, a, 500, 2);
	recount_eq(m, a, "trash");
	meta_close(m);
}

/* ---- snapshots and versions ----------------------------------------- */

/* src: a tree of 3 files (one with two names), a subdirectory, a
 * symlink: 6 inodes (top included) and 1111 stored bytes. */
static uint64_t snap_src(struct meta *m, uint64_t parent)
{
	uint64_t s = mk(m, parent, "src", META_DIR), sub, f;

	sub = mk(m, s, "sub", META_DIR);
	mkfile(m, s, "one", 1);
	mkfile(m, sub, "ten", 10);
	f = mkfile(m, sub, "hundred", 1100);
	cr_assert_eq(meta_link_q(m, sub, f, sub, "again", NULL), 0);
	mk(m, s, "l", META_SYMLINK);
	return s;
}

Test(quota_ns, snapshot_counts_its_copy)
{
	struct meta *m = fresh(0);
	uint64_t src = snap_src(m, META_ROOT_INO);
	uint64_t a = qdir(m, META_ROOT_INO, "a", 0, 0), one;
	struct meta_snapshot_stats st;

	cr_assert_eq(meta_snapshot(m, NULL, src, a, "copy", &st), 0);
	USE(m, a, 1111, 6);
	recount_eq(m, a, "snapshot");
	/* a file alone */
	cr_assert_eq(meta_lookup(m, src, "one", &one, NULL), 0);
	cr_assert_eq(meta_snapshot(m, NULL, one, a, "one", &st), 0);
	USE(m, a, 1112, 7);
	/* does not fit: the tree's 6 inodes into 3 left */
	qset(m, a, 0, 10);
	cr_assert_eq(meta_snapshot(m, NULL, src, a, "copy2", &st), EDQUOT);
	cr_assert_eq(meta_lookup(m, a, "copy2", NULL, NULL), ENOENT);
	USE(m, a, 1112, 7);
	/* an inode left, but not the file's byte */
	qset(m, a, 1112, 8);
	cr_assert_eq(meta_snapshot(m, NULL, one, a, "one2", &st), EDQUOT);
	USE(m, a, 1112, 7);
	recount_eq(m, a, "snapshot refused");
	meta_close(m);
}

Test(quota_ns, versions_count_in_nothing)
{
	struct meta *m = fresh(0);
	uint64_t a = qdir(m, META_ROOT_INO, "a", 0, 0);
	uint64_t d, src;

	d = qdir(m, a, "d", 0, 0);
	src = snap_src(m, d);
	USE(m, d, 1111, 6);
	USE(m, a, 1111, 7);
	cr_assert_eq(meta_version_create(m, NULL, d, "v1", NULL, NULL), 0);
	cr_assert_eq(meta_version_create(m, NULL, src, "v1", NULL, NULL), 0);
	USE(m, d, 1111, 6);
	USE(m, a, 1111, 7);
	cr_assert_eq(meta_version_rm(m, NULL, src, "v1"), 0);
	USE(m, d, 1111, 6);
	meta_close(m);
}

Test(quota_ns, version_restore_counts_the_restored_tree)
{
	struct meta *m = fresh(0);
	uint64_t a = qdir(m, META_ROOT_INO, "a", 0, 0);
	uint64_t d, src, x;

	d = qdir(m, a, "d", 0, 0);
	src = snap_src(m, d);
	cr_assert_eq(meta_version_create(m, NULL, d, "v1", NULL, NULL), 0);
	/* d changes: more files, some gone, one with a quota of its own */
	x = qdir(m, d, "x", 0, 0);
	mkfile(m, x, "big", 5000);
	mkfile(m, d, "b2", 70);
	cr_assert_eq(meta_unlink(m, src, "one"), 0);
	USE(m, d, 6180, 8);
	cr_assert_eq(meta_version_restore(m, NULL, d, "v1", "before"), 0);
	recount_eq(m, d, "restored d");
	recount_eq(m, a, "restored a");
	USE(m, d, 1111, 6);
	USE(m, a, 1111, 7);
	struct meta_quota q;
	cr_assert_eq(meta_quota_get(m, x, &q), ENOENT,
		     "x went with the old entries");
	meta_close(m);
}

/* ---- a random run, checked against a recount after every step -------- */

/* The trash's bytes are the stored bytes of the files it holds, also
 * after writes to them (the random run writes to entries of the trash as
 * a client that still has them open would). */
static void trash_sum_eq(struct meta *m, const char *when)
{
	struct meta_trash_entry *e;
	struct meta_trash_usage u;
	uint64_t sum = 0;
	size_t n;

	cr_assert_eq(meta_trash_list(m, &e, &n), 0);
	for (size_t i = 0; i < n; i++)
		if (e[i].attr.type == META_FILE)
			sum += e[i].attr.stored;
	meta_trash_entries_free(e, n);
	cr_assert_eq(meta_trash_usage(m, &u), 0);
	cr_assert_eq(u.bytes, sum,
		     "%s: the trash counts %" PRIu64 " bytes, its files hold "
		     "%" PRIu64,
		     when, u.bytes, sum);
}

struct ent {
	uint64_t parent, ino;
	uint8_t type;
	char name[256];
};

struct tree {
	struct ent e[2048];
	size_t n;
	uint64_t dirs[1024]; /* the root first; none in the trash */
	size_t nd;
};

/* Every entry below dir into t (those of the trash too: a rename out of
 * it is a restore by hand); trash: dir is in the trash. */
static void tree_walk(struct meta *m, uint64_t dir, int trash, struct tree *t)
{
	struct meta_dirent *e;
	size_t n;

	cr_assert(t->nd < sizeof t->dirs / sizeof t->dirs[0]);
	if (!trash)
		t->dirs[t->nd++] = dir;
	cr_assert_eq(meta_readdir(m, dir, 0, &e, &n), 0);
	for (size_t i = 0; i < n; i++) {
		struct ent *x = &t->e[t->n++];

		cr_assert(t->n < sizeof t->e / sizeof t->e[0]);
		x->parent = dir;
		x->ino = e[i].ino;
		x->type = e[i].type;
		snprintf(x->name, sizeof x->name, "%s", e[i].name);
		if (e[i].type == META_DIR)
			tree_walk(m, e[i].ino,
				  trash || (dir == META_ROOT_INO &&
					    !strcmp(e[i].name, META_TRASH)),
				  t);
	}
	meta_dirents_free(e, n);
}

/* A random entry of type ty (0: any); NULL when none. */
static const struct ent *pick(const struct tree *t, uint8_t ty)
{
	size_t k = 0, n = 0;

	for (size_t i = 0; i < t->n; i++)
		n += !ty || t->e[i].type == ty;
	if (!n)
		return NULL;
	k = (size_t)rand() % n;
	for (size_t i = 0; i < t->n; i++)
		if ((!ty || t->e[i].type == ty) && k-- == 0)
			return &t->e[i];
	return NULL;
}

static int random_step(struct meta *m, const struct tree *t, char *what,
		       size_t cap)
{
	uint64_t dir = t->dirs[(size_t)rand() % t->nd], ino;
	const struct ent *e;
	char name[16];

	/* a few names, so that renames replace and creates collide */
	snprintf(name, sizeof name, "n%d", rand() % 6);
	switch (rand() % 9) {
	case 0:
	case 1:
		snprintf(what, cap, "create %" PRIu64 "/%s", dir, name);
		return mkn(m, dir, name, META_FILE, &ino);
	case 2:
		snprintf(what, cap, "mkdir %" PRIu64 "/%s", dir, name);
		return mkn(m, dir, name, rand() % 4 ? META_DIR : META_SYMLINK,
			   &ino);
	case 3:
		if (!(e = pick(t, META_FILE)))
			return 0;
		/* a writer's hint may be stale: another client moved the
		 * file, or it knows another of its names */
		if (rand() % 2)
			dir = e->parent;
		snprintf(what, cap, "write %" PRIu64 " told %" PRIu64, e->ino,
			 dir);
		wr(m, dir, e->ino, 1 + (uint32_t)rand() % 5000);
		return 0;
	case 4:
		if (!(e = pick(t, 0)) || e->type == META_DIR)
			return 0;
		snprintf(what, cap, "unlink %" PRIu64 "/%s", e->parent,
			 e->name);
		return meta_unlink(m, e->parent, e->name);
	case 5:
		if (!(e = pick(t, META_DIR)))
			return 0;
		snprintf(what, cap, "rmdir %" PRIu64 "/%s", e->parent, e->name);
		return meta_rmdir(m, e->parent, e->name);
	case 6:
	case 7:
		if (!(e = pick(t, 0)))
			return 0;
		snprintf(what, cap, "rename %" PRIu64 "/%s %" PRIu64 "/%s",
			 e->parent, e->name, dir, name);
		return meta_rename(m, e->parent, e->name, dir, name,
				   rand() % 8 ? 0 : RENAME_EXCHANGE);
	default:
		if (!(e = pick(t, META_FILE)))
			return 0;
		snprintf(what, cap, "link %" PRIu64 " %" PRIu64 "/%s", e->ino,
			 dir, name);
		return meta_link_q(m, e->parent, e->ino, dir, name, NULL);
	}
}

Test(quota_ns, random_ops_match_a_recount, .timeout = 120)
{
	struct meta *m = fresh(1);
	uint64_t q[3];
	unsigned seed = 23;
	struct tree *t = calloc(1, sizeof *t);
	char what[600];

	if (getenv("GRANARY_TEST_SEED"))
		seed = (unsigned)atoi(getenv("GRANARY_TEST_SEED"));
	srand(seed);
	cr_assert(t);
	q[0] = qdir(m, META_ROOT_INO, "A", 0, 0);
	q[1] = qdir(m, META_ROOT_INO, "B", 40000, 16);
	q[2] = qdir(m, q[0], "N", 30000, 0);
	mk(m, META_ROOT_INO, "O", META_DIR);
	for (int step = 0; step < 600; step++) {
		int err;

		t->n = t->nd = 0;
		tree_walk(m, META_ROOT_INO, 0, t);
		err = random_step(m, t, what, sizeof what);
		cr_assert(err == 0 || err == EDQUOT || err == EXDEV ||
			      err == EEXIST || err == ENOENT ||
			      err == ENOTEMPTY || err == EINVAL ||
			      err == ENOTDIR || err == EISDIR || err == EPERM ||
			      err == EBUSY || err == EMLINK,
			  "seed %u step %d: %s: %s", seed, step, what,
			  gr_strerror(err));
		for (size_t i = 0; i < 3; i++) {
			struct meta_quota u;
			char when[700];

			if (meta_quota_get(m, q[i], &u) == ENOENT)
				continue; /* its directory was removed */
			snprintf(when, sizeof when, "seed %u step %d (%s: %s)",
				 seed, step, what, gr_strerror(err));
			recount_eq(m, q[i], when);
		}
		trash_sum_eq(m, what);
	}
	free(t);
	meta_close(m);
}
