/*
 * test_fsck.c - gc/fsck.c against a real redis-server (GRANARY_TEST_REDIS,
 * database 6) and an in-memory store: a clean volume (files of several
 * blocks, hard links, directories, a symlink, a snapshot sharing slices,
 * packed files) has no problem; each kind of damage done with raw redis
 * commands, or to the objects, is reported with the path or inode of the
 * file concerned; --repair fixes what it may, leaves what a live client
 * has open, and the volume is clean after with every file reading back.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/data/chunkstore.h"
#include "fs/store/codec.h"
#include "fs/store/objstore.h"
#include "gc/fsck.h"
#include "meta/meta_objects.h"
#include "meta/meta_snap.h"
#include "meta/meta_trash.h"
#include "meta/meta_volume.h"

#define DB 6
#define BS (256u << 10) /* the volume's block size */

struct vol {
	struct meta *m;
	struct objstore *s;
	struct chunkstore *cs;
	redisContext *rc; /* raw access, for the damage */
	char url[4200];
};

static void vol_open(struct vol *v)
{
	const char *u = getenv("GRANARY_TEST_REDIS");
	struct meta_volume mv = {.block_size = BS};
	struct chunkstore_opts co = {.block_size = BS};
	char sock[4096];

	if (!u || strncmp(u, "unix://", 7))
		cr_skip_test("GRANARY_TEST_REDIS unset (no redis to test on)");
	snprintf(sock, sizeof sock, "%.*s", (int)strcspn(u + 7, "?"), u + 7);
	snprintf(v->url, sizeof v->url, "unix://%s?db=%d", sock, DB);
	cr_assert_eq(meta_open(v->url, NULL, &v->m), 0);
	snprintf(mv.name, sizeof mv.name, "fsck");
	snprintf(mv.storage, sizeof mv.storage, "mem://");
	cr_assert_eq(meta_format(v->m, &mv, 1), 0);
	cr_assert_eq(objstore_open("mem://", NULL, &v->s), 0);
	cr_assert_eq(chunkstore_open(v->s, &co, &v->cs), 0);
	v->rc = redisConnectUnix(sock);
	cr_assert(v->rc && !v->rc->err);
	redisReply *r = redisCommand(v->rc, "SELECT %d", DB);
	cr_assert(r && r->type == REDIS_REPLY_STATUS);
	freeReplyObject(r);
}

static void vol_close(struct vol *v)
{
	redisFree(v->rc);
	chunkstore_close(v->cs);
	objstore_close(v->s);
	meta_close(v->m);
}

/* a raw redis command; the reply freed */
static void rcmd(struct vol *v, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	redisReply *r = redisvCommand(v->rc, fmt, ap);
	va_end(ap);
	cr_assert(r && r->type != REDIS_REPLY_ERROR, "redis: %s",
		  r ? r->str : v->rc->errstr);
	freeReplyObject(r);
}

/* ---- building a volume --------------------------------------------------- */

static void fill(void *buf, size_t n, unsigned seed)
{
	unsigned char *p = buf;
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		p[i] = (unsigned char)(seed >> 16);
	}
}

static uint64_t new_id(struct vol *v)
{
	uint64_t id;
	cr_assert_eq(meta_new_slice_id(v->m, &id), 0);
	return id;
}

static uint64_t mk(struct vol *v, uint64_t parent, const char *name,
		   uint8_t type)
{
	uint64_t ino;
	cr_assert_eq(meta_mknod(v->m, parent, name, type,
				type == META_DIR ? 0755 : 0644, 0, 0, 0,
				type == META_SYMLINK ? "d1/f1" : NULL, &ino,
				NULL),
		     0, "mknod %s", name);
	return ino;
}

/* A file of size bytes (data from seed) in blocks of one slice. */
static uint64_t file(struct vol *v, uint64_t parent, const char *name,
		     uint32_t size, unsigned seed, uint64_t *id)
{
	struct meta_chunk_slice w = {0};
	uint64_t ino = mk(v, parent, name, META_FILE);
	char *buf = malloc(size);

	fill(buf, size, seed);
	w.s.id = new_id(v);
	w.s.size = w.s.len = size;
	for (uint32_t i = 0; i * BS < size; i++) {
		uint32_t len = size - i * BS < BS ? size - i * BS : BS;
		cr_assert_eq(
		    chunkstore_put_block(v->cs, w.s.id, i, buf + i * BS, len),
		    0);
	}
	cr_assert_eq(meta_write(v->m, ino, &w, 1, NULL), 0);
	free(buf);
	if (id)
		*id = w.s.id;
	return ino;
}

/* n small files in one pack: frame i holds 1000 + 100 i bytes of seed
 * 50 + i. Returns the pack id. */
static uint64_t packed(struct vol *v, uint64_t parent, int n, uint64_t *inos)
{
	uint64_t P = new_id(v);
	char *pack = malloc(64 << 10), key[128], raw[4096], name[32];
	size_t off = 0, len;

	for (int i = 0; i < n; i++) {
		struct meta_chunk_slice w = {0};
		uint32_t size = 1000 + 100 * (uint32_t)i;
		fill(raw, size, 50 + (unsigned)i);
		cr_assert_eq(
		    codec_encode(raw, size, CODEC_NONE, pack + off, &len), 0);
		snprintf(name, sizeof name, "small%d", i);
		inos[i] = mk(v, parent, name, META_FILE);
		w.s.id = new_id(v);
		w.s.size = w.s.len = size;
		w.s.pack = P;
		w.s.poff = (uint32_t)off;
		w.s.plen = (uint32_t)len;
		if (i == 0)
			cr_assert_eq(
			    meta_pack_total(v->m, P, META_PACK_OPEN, NULL), 0);
		cr_assert_eq(meta_write(v->m, inos[i], &w, 1, NULL), 0);
		off += len;
	}
	chunkstore_pack_key(P, key, sizeof key);
	cr_assert_eq(objstore_put(v->s, key, pack, off), 0);
	cr_assert_eq(meta_pack_total(v->m, P, off, NULL), 0);
	free(pack);
	return P;
}

/* What a test volume holds. */
struct tree {
	uint64_t d1, d2, sub, orph, f1, g, sym, snap, big, inner;
	uint64_t f1_id, g_id, P;
	uint64_t small[3];
};

/*
 * /d1/f1 (3 blocks), /d2/link (a second name of f1), /d2/sub/g,
 * /sym -> d1/f1, /snap (a snapshot of f1: its slice shared), /small0..2
 * (one pack), /orph/inner, /d2/big (5 blocks).
 */
static void build(struct vol *v, struct tree *t)
{
	t->d1 = mk(v, 1, "d1", META_DIR);
	t->d2 = mk(v, 1, "d2", META_DIR);
	t->sub = mk(v, t->d2, "sub", META_DIR);
	t->orph = mk(v, 1, "orph", META_DIR);
	t->f1 = file(v, t->d1, "f1", 3 * BS - 100, 1, &t->f1_id);
	cr_assert_eq(meta_link(v->m, t->f1, t->d2, "link", NULL), 0);
	t->g = file(v, t->sub, "g", 1000, 2, &t->g_id);
	t->big = file(v, t->d2, "big", 5 * BS, 3, NULL);
	t->inner = file(v, t->orph, "inner", 5000, 4, NULL);
	t->sym = mk(v, 1, "sym", META_SYMLINK);
	cr_assert_eq(meta_snapshot(v->m, NULL, t->f1, 1, "snap", NULL), 0);
	cr_assert_eq(meta_lookup(v->m, 1, "snap", &t->snap, NULL), 0);
	t->P = packed(v, 1, 3, t->small);
}

/* The bytes of file ino read through its chunk 0 and the store equal
 * those of seed? */
static int reads_back(struct vol *v, uint64_t ino, uint32_t size, unsigned seed)
{
	struct meta_slice *s;
	size_t n;
	char *want = malloc(size), *got = malloc(size);
	int ok = 0;

	fill(want, size, seed);
	if (meta_read_chunk(v->m, ino, 0, &s, &n) || n != 1)
		goto out;
	if (s[0].pack) {
		struct chunkstore_frame fr = {s[0].pack, s[0].poff, s[0].plen};
		ok = !chunkstore_read_frame(v->cs, s[0].id, s[0].size, &fr, 0,
					    size, got);
	} else {
		ok = !chunkstore_read(v->cs, s[0].id, s[0].size, 0, size, got);
	}
	ok = ok && !memcmp(want, got, size);
	free(s);
out:
	free(want);
	free(got);
	return ok;
}

/* ---- running fsck -------------------------------------------------------- */

struct seen {
	int n;
	struct {
		enum fsck_kind kind;
		char *path;
		uint64_t ino, id;
		enum fsck_fix fix;
		int64_t found, expected;
	} p[64];
};

static void on_problem(void *arg, const struct fsck_problem *p)
{
	struct seen *s = arg;
	cr_assert_lt(s->n, 64, "too many problems");
	s->p[s->n].kind = p->kind;
	s->p[s->n].path = p->path ? strdup(p->path) : NULL;
	s->p[s->n].ino = p->ino;
	s->p[s->n].id = p->id;
	s->p[s->n].fix = p->fix;
	s->p[s->n].found = p->found;
	s->p[s->n].expected = p->expected;
	s->n++;
}

static void seen_free(struct seen *s)
{
	for (int i = 0; i < s->n; i++)
		free(s->p[i].path);
	s->n = 0;
}

static void dump(const struct seen *s)
{
	for (int i = 0; i < s->n; i++)
		fprintf(stderr, "  %s path %s ino %" PRIu64 " fix %d\n",
			fsck_kind_name(s->p[i].kind),
			s->p[i].path ? s->p[i].path : "-", s->p[i].ino,
			s->p[i].fix);
}

#define F_OBJECTS 1
#define F_DEEP	  2
#define F_REPAIR  4

/* fsck_run of the tree under path (NULL: the volume): its error. */
static int run_err(struct vol *v, int flags, const char *path, struct seen *s,
		   struct fsck_report *r)
{
	struct fsck_opts o = {.block_size = BS,
			      .objects = !!(flags & F_OBJECTS),
			      .deep = !!(flags & F_DEEP),
			      .repair = !!(flags & F_REPAIR),
			      .threads = 2,
			      .path = path,
			      .problem = on_problem,
			      .problem_arg = s};
	seen_free(s);
	return fsck_run(v->m, v->s, &o, r);
}

static struct fsck_report run_at(struct vol *v, int flags, const char *path,
				 struct seen *s)
{
	struct fsck_report r;
	int err = run_err(v, flags, path, s, &r);
	cr_assert_eq(err, 0, "fsck_run: %s", gr_strerror(err));
	cr_assert_eq(r.problems, (uint64_t)s->n);
	return r;
}

static struct fsck_report run(struct vol *v, int flags, struct seen *s)
{
	return run_at(v, flags, NULL, s);
}

/* The problem of kind with that path (or, path NULL, that inode), and
 * its fix; -1 when none. */
static int find(const struct seen *s, enum fsck_kind kind, const char *path,
		uint64_t ino)
{
	for (int i = 0; i < s->n; i++) {
		if (s->p[i].kind != kind)
			continue;
		if (path ? s->p[i].path && !strcmp(s->p[i].path, path)
			 : s->p[i].ino == ino)
			return i;
	}
	return -1;
}

#define EXPECT(s, kind, path, ino)                                             \
	do {                                                                   \
		if (find(s, kind, path, ino) < 0) {                            \
			dump(s);                                               \
			cr_expect(0,                                           \
				  "no %s problem for %s (inode %" PRIu64 ")",  \
				  fsck_kind_name(kind), path ? path : "-",     \
				  (uint64_t)(ino));                            \
		}                                                              \
	} while (0)

/* ---- damage ----------------------------------------------------------------
 */

/* The attribute record of ino with its nlink (bytes 12..15) set, or its
 * parent (24..31) when par. */
static void set_field(struct vol *v, uint64_t ino, int par, uint64_t val)
{
	char key[32], field[8];
	snprintf(key, sizeof key, "n%" PRIu64, ino / 32);
	snprintf(field, sizeof field, "%" PRIu64, ino % 32);
	redisReply *r = redisCommand(v->rc, "HGET %s %s", key, field);
	cr_assert(r && r->type == REDIS_REPLY_STRING && r->len == 59);
	unsigned char rec[59];
	memcpy(rec, r->str, 59);
	freeReplyObject(r);
	if (par)
		for (int i = 0; i < 8; i++)
			rec[24 + i] = (unsigned char)(val >> (8 * i));
	else
		for (int i = 0; i < 4; i++)
			rec[12 + i] = (unsigned char)(val >> (8 * i));
	rcmd(v, "HSET %s %s %b", key, field, rec, (size_t)59);
}

static void entry(struct vol *v, uint64_t dir, const char *name, uint8_t type,
		  uint64_t ino)
{
	unsigned char val[9] = {type};
	size_t n = 1;
	for (uint64_t x = ino; x || n < 2; x >>= 8)
		val[n++] = (unsigned char)x;
	rcmd(v, "HSET d%" PRIu64 " %s %b", dir, name, val, n);
}

/* ---- tests ------------------------------------------------------------------
 */

Test(fsck, clean_volume)
{
	struct vol v;
	struct tree t;
	struct seen s = {0};

	vol_open(&v);
	build(&v, &t);
	struct fsck_report r = run(&v, F_OBJECTS | F_DEEP, &s);
	if (s.n)
		dump(&s);
	cr_expect_eq(r.problems, 0);
	cr_expect_eq(r.inodes, 14, "inodes %" PRIu64, r.inodes);
	cr_expect_eq(r.dirs, 5);
	cr_expect_eq(r.symlinks, 1);
	cr_expect_eq(r.entries, 14, "entries %" PRIu64, r.entries);
	cr_expect_eq(r.packs, 1);
	/* 3 + 1 + 5 + 1 blocks and the pack */
	cr_expect_eq(r.objects, 11, "objects %" PRIu64, r.objects);
	cr_expect_eq(r.verified, 13, "verified %" PRIu64, r.verified);
	cr_expect_eq(r.changed, 0);
	cr_expect_not(r.counters_changed);
	seen_free(&s);
	vol_close(&v);
}

Test(fsck, damage_reported_and_repaired)
{
	struct vol v;
	struct tree t;
	struct seen s = {0};
	uint64_t stray = 888888, stray_id;

	vol_open(&v);
	build(&v, &t);
	/* an inode no entry names (and so one subdirectory fewer for /) */
	rcmd(&v, "HDEL d1 orph");
	/* a link count one too high, a directory's one too */
	set_field(&v, t.g, 0, 2);
	set_field(&v, t.d2, 0, 4);
	/* a directory whose parent field is wrong */
	set_field(&v, t.sub, 1, 1);
	/* an entry naming an inode that is not, one of the wrong type */
	entry(&v, t.d2, "ghost", META_FILE, 999999);
	entry(&v, 1, "sym", META_FILE, t.sym);
	/* counters */
	rcmd(&v, "INCRBY totalinodes 7");
	rcmd(&v, "INCRBY usedspace 12345");
	/* the snapshot's share of f1's slice forgotten; g's slice given
	 * three references too many */
	rcmd(&v, "HDEL sliceref %" PRIu64, t.f1_id);
	rcmd(&v, "HSET sliceref %" PRIu64 " 3", t.g_id);
	/* a pack without its total */
	rcmd(&v, "HDEL packs %" PRIu64, t.P);
	/* a chunk list of an inode that is not (its block in the store) */
	{
		struct meta_slice sl = {.size = 700, .len = 700};
		unsigned char rec[17] = {2};
		char blk[700];
		stray_id = sl.id = new_id(&v);
		for (int i = 0; i < 8; i++)
			rec[5 + i] = (unsigned char)(sl.id >> (8 * i));
		rec[13] = 700 & 0xff;
		rec[14] = 700 >> 8;
		fill(blk, sizeof blk, 9);
		cr_assert_eq(chunkstore_put_block(v.cs, sl.id, 0, blk, 700), 0);
		rcmd(&v, "SET c%" PRIu64 "_2 %b", stray, rec, sizeof rec);
	}

	struct fsck_report r = run(&v, F_OBJECTS, &s);
	EXPECT(&s, FSCK_ORPHAN, NULL, t.orph);
	EXPECT(&s, FSCK_DIR_NLINK, "/", 1);
	EXPECT(&s, FSCK_NLINK, "/d2/sub/g", t.g);
	EXPECT(&s, FSCK_DIR_NLINK, "/d2", t.d2);
	EXPECT(&s, FSCK_DIR_PARENT, "/d2/sub", t.sub);
	EXPECT(&s, FSCK_ENTRY_NO_INODE, "/d2/ghost", 999999);
	EXPECT(&s, FSCK_ENTRY_TYPE, "/sym", t.sym);
	EXPECT(&s, FSCK_TOTALINODES, NULL, 0);
	EXPECT(&s, FSCK_USEDSPACE, NULL, 0);
	EXPECT(&s, FSCK_STRAY_CHUNKS, NULL, stray);
	int i = find(&s, FSCK_SLICEREF, NULL, t.f1);
	if (i < 0)
		i = find(&s, FSCK_SLICEREF, NULL, t.snap);
	cr_expect_geq(i, 0, "no sliceref problem");
	if (i >= 0) {
		cr_expect_eq(s.p[i].id, t.f1_id);
		cr_expect_eq(s.p[i].found, 2);
		cr_expect_eq(s.p[i].expected, 1);
		cr_expect(s.p[i].path && (!strcmp(s.p[i].path, "/d1/f1") ||
					  !strcmp(s.p[i].path, "/d2/link") ||
					  !strcmp(s.p[i].path, "/snap")),
			  "sliceref path %s", s.p[i].path);
	}
	i = find(&s, FSCK_SLICEREF, "/d2/sub/g", t.g);
	cr_expect_geq(i, 0, "no sliceref problem for g");
	if (i >= 0) {
		cr_expect_eq(s.p[i].found, 1);
		cr_expect_eq(s.p[i].expected, 4);
	}
	i = find(&s, FSCK_PACK_TOTAL, NULL, t.small[0]);
	if (i < 0)
		i = find(&s, FSCK_PACK_TOTAL, NULL, t.small[1]);
	if (i < 0)
		i = find(&s, FSCK_PACK_TOTAL, NULL, t.small[2]);
	cr_expect_geq(i, 0, "no pack-total problem");
	if (i >= 0)
		cr_expect(s.p[i].path && !strncmp(s.p[i].path, "/small", 6));
	cr_expect_eq(r.problems, 13, "problems %" PRIu64, r.problems);
	cr_expect_eq(r.fixed, 0);
	if (r.problems != 13)
		dump(&s);

	/* repair: every one of them is fixed */
	r = run(&v, F_OBJECTS | F_REPAIR, &s);
	cr_expect_eq(r.problems, 13);
	cr_expect_eq(r.fixed, 13, "fixed %" PRIu64, r.fixed);
	for (int k = 0; k < s.n; k++)
		cr_expect_eq(s.p[k].fix, FSCK_FIX_DONE, "%s not fixed",
			     fsck_kind_name(s.p[k].kind));

	/* and clean after, every file reading back */
	r = run(&v, F_OBJECTS | F_DEEP, &s);
	if (s.n)
		dump(&s);
	cr_expect_eq(r.problems, 0);
	uint64_t lf, o, ino;
	char name[32];
	cr_assert_eq(meta_lookup(v.m, 1, "lost+found", &lf, NULL), 0);
	snprintf(name, sizeof name, "#%" PRIu64, t.orph);
	cr_assert_eq(meta_lookup(v.m, lf, name, &o, NULL), 0);
	cr_expect_eq(o, t.orph);
	cr_assert_eq(meta_lookup(v.m, o, "inner", &ino, NULL), 0);
	cr_expect(reads_back(&v, ino, 5000, 4));
	cr_expect(reads_back(&v, t.f1, 3 * BS - 100, 1));
	cr_expect(reads_back(&v, t.snap, 3 * BS - 100, 1));
	cr_expect(reads_back(&v, t.g, 1000, 2));
	for (int k = 0; k < 3; k++)
		cr_expect(reads_back(&v, t.small[k], 1000 + 100 * (uint32_t)k,
				     50 + (unsigned)k));
	struct meta_attr a;
	cr_assert_eq(meta_getattr(v.m, t.g, &a), 0);
	cr_expect_eq(a.nlink, 1);
	cr_assert_eq(meta_getattr(v.m, t.sub, &a), 0);
	cr_expect_eq(a.parent, t.d2);
	cr_assert_eq(meta_getattr(v.m, lf, &a), 0);
	cr_expect_eq(a.mode & 07777, 0700);
	cr_expect_eq(a.uid, 0);
	cr_expect_eq(meta_lookup(v.m, t.d2, "ghost", &ino, NULL), ENOENT);
	/* the stray chunk list went to reclamation, which frees its slice */
	struct meta_slice dead[8];
	size_t n, freed = 0;
	do {
		cr_assert_eq(meta_reclaim(v.m, dead, 8, &n), 0);
		for (size_t k = 0; k < n; k++)
			freed += dead[k].id == stray_id;
	} while (n);
	cr_expect_eq(freed, 1);
	r = run(&v, 0, &s);
	cr_expect_eq(r.problems, 0);
	seen_free(&s);
	vol_close(&v);
}

/* Objects deleted, cut short or changed: --objects finds the first two,
 * --deep all three, each with the path of its file; --repair leaves them
 * (listed as not fixed). */
Test(fsck, objects_missing_short_and_corrupt)
{
	struct vol v;
	struct tree t;
	struct seen s = {0};
	char key[128];
	void *data;
	size_t got;

	vol_open(&v);
	build(&v, &t);
	/* big: block 2 deleted */
	uint64_t big_id;
	struct meta_slice *sl;
	size_t n;
	cr_assert_eq(meta_read_chunk(v.m, t.big, 0, &sl, &n), 0);
	big_id = sl[0].id;
	free(sl);
	chunkstore_key(big_id, 2, BS, key, sizeof key);
	cr_assert_eq(objstore_del(v.s, key), 0);
	/* g: a byte flipped (same size: only --deep sees it) */
	chunkstore_key(t.g_id, 0, 1000, key, sizeof key);
	cr_assert_eq(objstore_get(v.s, key, 0, 0, &data, &got), 0);
	((char *)data)[got - 10] ^= 1;
	cr_assert_eq(objstore_put(v.s, key, data, got), 0);
	free(data);
	/* f1: block 1 cut short */
	chunkstore_key(t.f1_id, 1, BS, key, sizeof key);
	cr_assert_eq(objstore_get(v.s, key, 0, 0, &data, &got), 0);
	cr_assert_eq(objstore_put(v.s, key, data, got - 100), 0);
	/* small1: a byte of its frame flipped */
	char pkey[128];
	void *pk;
	size_t pgot;
	chunkstore_pack_key(t.P, pkey, sizeof pkey);
	cr_assert_eq(objstore_get(v.s, pkey, 0, 0, &pk, &pgot), 0);
	cr_assert_eq(meta_read_chunk(v.m, t.small[1], 0, &sl, &n), 0);
	((char *)pk)[sl[0].poff + sl[0].plen - 30] ^= 4;
	free(sl);
	cr_assert_eq(objstore_put(v.s, pkey, pk, pgot), 0);

	struct fsck_report r = run(&v, 0, &s);
	cr_expect_eq(r.problems, 0, "the metadata alone is fine");
	r = run(&v, F_OBJECTS, &s);
	EXPECT(&s, FSCK_OBJECT_MISSING, "/d2/big", t.big);
	int i = find(&s, FSCK_OBJECT_SIZE, NULL, t.f1);
	if (i < 0)
		i = find(&s, FSCK_OBJECT_SIZE, NULL, t.snap);
	cr_expect_geq(i, 0, "no object-size problem");
	cr_expect_eq(find(&s, FSCK_OBJECT_CORRUPT, NULL, t.g), -1);
	cr_expect_eq(r.problems, 2, "problems %" PRIu64, r.problems);
	r = run(&v, F_DEEP, &s);
	EXPECT(&s, FSCK_OBJECT_CORRUPT, "/d2/sub/g", t.g);
	EXPECT(&s, FSCK_OBJECT_CORRUPT, "/small1", t.small[1]);
	EXPECT(&s, FSCK_OBJECT_MISSING, "/d2/big", t.big);
	/* f1's short block: its size, and its checksums fail too */
	cr_expect_eq(r.problems, 5, "problems %" PRIu64, r.problems);
	if (r.problems != 5)
		dump(&s);
	r = run(&v, F_DEEP | F_REPAIR, &s);
	cr_expect_eq(r.fixed, 0);
	cr_expect_eq(r.unfixed, r.problems);
	for (int k = 0; k < s.n; k++)
		cr_expect_eq(s.p[k].fix, FSCK_FIX_CANNOT);

	/* the objects back: clean */
	cr_assert_eq(objstore_put(v.s, key, data, got), 0);
	free(data);
	cr_assert_eq(meta_read_chunk(v.m, t.small[1], 0, &sl, &n), 0);
	((char *)pk)[sl[0].poff + sl[0].plen - 30] ^= 4;
	free(sl);
	cr_assert_eq(objstore_put(v.s, pkey, pk, pgot), 0);
	free(pk);
	chunkstore_key(t.g_id, 0, 1000, key, sizeof key);
	cr_assert_eq(objstore_get(v.s, key, 0, 0, &data, &got), 0);
	((char *)data)[got - 10] ^= 1;
	cr_assert_eq(objstore_put(v.s, key, data, got), 0);
	free(data);
	{
		char *raw = malloc(5 * BS);
		fill(raw, 5 * BS, 3);
		cr_assert_eq(
		    chunkstore_put_block(v.cs, big_id, 2, raw + 2 * BS, BS), 0);
		free(raw);
	}
	r = run(&v, F_DEEP, &s);
	if (s.n)
		dump(&s);
	cr_expect_eq(r.problems, 0);
	seen_free(&s);
	vol_close(&v);
}

/* A file a live session has open is left alone by --repair (skipped), and
 * an unlinked file it holds open is no orphan; once closed, the repair
 * goes through. The counters are not repaired while a client is mounted
 * (they move with it). */
Test(fsck, open_files_skipped)
{
	struct vol v;
	struct tree t;
	struct seen s = {0};
	struct meta *client;
	struct meta_attr a;

	vol_open(&v);
	build(&v, &t);
	cr_assert_eq(meta_open(v.url, NULL, &client), 0);
	cr_assert_eq(meta_session_open(client, "/test"), 0);
	cr_assert_eq(meta_file_open(client, t.g, &a, NULL), 0);
	cr_assert_eq(meta_file_open(client, t.inner, &a, NULL), 0);
	cr_assert_eq(meta_unlink(client, t.orph, "inner"), 0);
	set_field(&v, t.g, 0, 5);
	rcmd(&v, "INCRBY totalinodes 2");

	struct fsck_report r = run(&v, F_REPAIR, &s);
	EXPECT(&s, FSCK_NLINK, "/d2/sub/g", t.g);
	EXPECT(&s, FSCK_TOTALINODES, NULL, 0);
	cr_expect_eq(r.problems, 2, "problems %" PRIu64, r.problems);
	cr_expect_eq(r.skipped, 2);
	cr_expect_eq(r.fixed, 0);
	for (int i = 0; i < s.n; i++)
		cr_expect_eq(s.p[i].fix, FSCK_FIX_SKIPPED);
	cr_assert_eq(meta_getattr(v.m, t.g, &a), 0);
	cr_expect_eq(a.nlink, 5);

	cr_assert_eq(meta_file_close(client, t.g), 0);
	r = run(&v, F_REPAIR, &s);
	cr_expect_eq(r.fixed, 1);
	cr_expect_eq(r.skipped, 1);
	cr_assert_eq(meta_getattr(v.m, t.g, &a), 0);
	cr_expect_eq(a.nlink, 1);
	/* the client gone (its unlinked file with it): the counter too */
	meta_close(client);
	r = run(&v, F_REPAIR, &s);
	EXPECT(&s, FSCK_TOTALINODES, NULL, 0);
	cr_expect_eq(r.fixed, 1);
	r = run(&v, 0, &s);
	cr_expect_eq(r.problems, 0);
	seen_free(&s);
	vol_close(&v);
}

/* An inode a client changed after the walk began (its ctime is later) is
 * not judged, nor repaired: counted in changed. */
Test(fsck, changed_meanwhile_not_judged)
{
	struct vol v;
	struct tree t;
	struct seen s = {0};
	char key[32], field[8];
	unsigned char rec[59];

	vol_open(&v);
	build(&v, &t);
	set_field(&v, t.g, 0, 5);
	/* its ctime an hour ahead: as if changed after fsck's start */
	snprintf(key, sizeof key, "n%" PRIu64, t.g / 32);
	snprintf(field, sizeof field, "%" PRIu64, t.g % 32);
	redisReply *r0 = redisCommand(v.rc, "HGET %s %s", key, field);
	cr_assert(r0 && r0->type == REDIS_REPLY_STRING && r0->len == 59);
	memcpy(rec, r0->str, 59);
	freeReplyObject(r0);
	int64_t ct = 0;
	for (int i = 4; i >= 0; i--)
		ct = ct << 8 | rec[50 + i];
	ct += 3600;
	for (int i = 0; i < 5; i++)
		rec[50 + i] = (unsigned char)(ct >> (8 * i));
	rcmd(&v, "HSET %s %s %b", key, field, rec, (size_t)59);

	struct fsck_report r = run(&v, F_REPAIR, &s);
	cr_expect_eq(r.problems, 0, "problems %" PRIu64, r.problems);
	if (r.problems)
		dump(&s);
	cr_expect_eq(r.changed, 1, "changed %" PRIu64, r.changed);
	struct meta_attr a;
	cr_assert_eq(meta_getattr(v.m, t.g, &a), 0);
	cr_expect_eq(a.nlink, 5);
	seen_free(&s);
	vol_close(&v);
}

/* A detached snapshot being built or deleted (listed in snapshots) is
 * in flux: its top has no name and its counts move; it is not judged,
 * nor repaired. */
Test(fsck, detached_snapshot_not_judged)
{
	struct vol v;
	struct tree t;
	struct seen s = {0};

	vol_open(&v);
	build(&v, &t);
	/* /d2 made the top of a detached copy: no entry, parent 0, and its
	 * nlink off (a drop in progress) */
	rcmd(&v, "HDEL d1 d2");
	set_field(&v, 1, 0, 4);
	set_field(&v, t.d2, 1, 0);
	set_field(&v, t.d2, 0, 9);
	rcmd(&v, "HSET snapshots %" PRIu64 " 0:1", t.d2);
	struct fsck_report r = run(&v, F_REPAIR, &s);
	cr_expect_eq(r.problems, 0, "problems %" PRIu64, r.problems);
	if (r.problems)
		dump(&s);
	/* d2, sub, g, big, and f1 when its name in d2 was met first */
	cr_expect(r.in_flux == 4 || r.in_flux == 5, "in flux %" PRIu64,
		  r.in_flux);
	struct meta_attr a;
	cr_assert_eq(meta_getattr(v.m, t.d2, &a), 0);
	cr_expect_eq(a.nlink, 9);
	seen_free(&s);
	vol_close(&v);
}

/* A directory loop nothing reaches, and a directory with two names, are
 * reported (and not repaired). */
Test(fsck, loops_and_names)
{
	struct vol v;
	struct tree t;
	struct seen s = {0};

	vol_open(&v);
	build(&v, &t);
	/* /d2/sub named by itself, its name in d2 gone: a loop */
	rcmd(&v, "HDEL d%" PRIu64 " sub", t.d2);
	set_field(&v, t.d2, 0, 2);
	entry(&v, t.sub, "self", META_DIR, t.sub);
	set_field(&v, t.sub, 1, t.sub);
	set_field(&v, t.sub, 0, 3);
	/* /d1 named twice */
	entry(&v, t.d2, "again", META_DIR, t.d1);
	set_field(&v, t.d2, 0, 3);
	struct fsck_report r = run(&v, F_REPAIR, &s);
	EXPECT(&s, FSCK_LOOP, NULL, t.sub);
	EXPECT(&s, FSCK_DIR_NAMES, NULL, t.d1); /* "/d1" or "/d2/again" */
	cr_expect_eq(r.problems, 2, "problems %" PRIu64, r.problems);
	if (r.problems != 2)
		dump(&s);
	cr_expect_eq(r.unfixed, 2);
	seen_free(&s);
	vol_close(&v);
}

/* A 17-byte short slice record (form 2) of slice id, size bytes at pos
 * 0 (id 0: a hole). */
static void short_rec(unsigned char rec[17], uint64_t id, uint32_t size)
{
	memset(rec, 0, 17);
	rec[0] = 2;
	for (int i = 0; i < 8; i++)
		rec[5 + i] = (unsigned char)(id >> (8 * i));
	for (int i = 0; i < 4; i++)
		rec[13 + i] = (unsigned char)(size >> (8 * i));
}

static long long rint_of(struct vol *v, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	redisReply *r = redisvCommand(v->rc, fmt, ap);
	va_end(ap);
	cr_assert(r && (r->type == REDIS_REPLY_INTEGER ||
			r->type == REDIS_REPLY_STRING ||
			r->type == REDIS_REPLY_NIL));
	long long n = r->type == REDIS_REPLY_INTEGER  ? r->integer
		      : r->type == REDIS_REPLY_STRING ? atoll(r->str)
						      : -1;
	freeReplyObject(r);
	return n;
}

/* --path: damage outside the tree is not reported, damage inside is
 * (and repaired); what names and files outside may account for (a hard
 * link's other name, a snapshot's share of a slice) is not judged; a
 * path that names nothing, or goes through a file, is an error. */
Test(fsck, path_subtree)
{
	struct vol v;
	struct tree t;
	struct seen s = {0};
	struct fsck_report r;
	uint64_t gcopy;

	vol_open(&v);
	build(&v, &t);
	/* g shared with a copy inside /d2, f1 with /snap outside it */
	cr_assert_eq(meta_snapshot(v.m, NULL, t.g, t.sub, "gcopy", NULL), 0);
	cr_assert_eq(meta_lookup(v.m, t.sub, "gcopy", &gcopy, NULL), 0);
	r = run_at(&v, F_OBJECTS | F_DEEP, "/d2", &s);
	cr_expect_eq(r.problems, 0);
	if (s.n)
		dump(&s);
	/* /d2/link's other name /d1/f1, its slice's share in /snap */
	cr_expect_eq(r.outside, 2, "outside %" PRIu64, r.outside);
	cr_expect_eq(r.files, 4, "files %" PRIu64,
		     r.files); /* link, g, gcopy, big */
	cr_expect_eq(r.dirs, 2);
	/* big's 5 blocks, f1's 3, g's 1 (gcopy shares it) */
	cr_expect_eq(r.objects, 9, "objects %" PRIu64, r.objects);

	/* outside /d2 */
	set_field(&v, t.d1, 0, 5);
	entry(&v, t.d1, "ghost", META_FILE, 999999);
	/* inside: a link count too low, a parent, an entry of no inode, the
	 * copy's share of g's slice forgotten */
	set_field(&v, t.g, 0, 0);
	set_field(&v, t.sub, 1, 1);
	entry(&v, t.d2, "ghost2", META_FILE, 999998);
	rcmd(&v, "HDEL sliceref %" PRIu64, t.g_id);

	r = run_at(&v, 0, "/d2", &s);
	EXPECT(&s, FSCK_NLINK, "/d2/sub/g", t.g);
	EXPECT(&s, FSCK_DIR_PARENT, "/d2/sub", t.sub);
	EXPECT(&s, FSCK_ENTRY_NO_INODE, "/d2/ghost2", 999998);
	/* named by whichever of g and gcopy the walk met first */
	cr_expect(find(&s, FSCK_SLICEREF, NULL, t.g) >= 0 ||
		  find(&s, FSCK_SLICEREF, NULL, gcopy) >= 0);
	cr_expect_eq(r.problems, 4, "problems %" PRIu64, r.problems);
	if (r.problems != 4)
		dump(&s);
	/* the tree's top as given, of a file too */
	r = run_at(&v, 0, "/d2/sub", &s);
	EXPECT(&s, FSCK_NLINK, "/d2/sub/g", t.g);
	EXPECT(&s, FSCK_DIR_PARENT, "/d2/sub", t.sub);
	cr_expect(find(&s, FSCK_SLICEREF, NULL, t.g) >= 0 ||
		  find(&s, FSCK_SLICEREF, NULL, gcopy) >= 0);
	cr_expect_eq(r.problems, 3, "problems %" PRIu64, r.problems);
	r = run_at(&v, 0, "/d2/sub/g", &s);
	EXPECT(&s, FSCK_NLINK, "/d2/sub/g", t.g);
	cr_expect_eq(r.problems, 1, "problems %" PRIu64, r.problems);
	r = run_at(&v, 0, "/d1", &s);
	EXPECT(&s, FSCK_DIR_NLINK, "/d1", t.d1);
	EXPECT(&s, FSCK_ENTRY_NO_INODE, "/d1/ghost", 999999);
	cr_expect_eq(r.problems, 2, "problems %" PRIu64, r.problems);

	/* repaired in the tree only */
	r = run_at(&v, F_REPAIR, "/d2", &s);
	cr_expect_eq(r.fixed, 4, "fixed %" PRIu64, r.fixed);
	r = run_at(&v, F_OBJECTS, "/d2", &s);
	cr_expect_eq(r.problems, 0);
	r = run(&v, 0, &s);
	EXPECT(&s, FSCK_DIR_NLINK, "/d1", t.d1);
	EXPECT(&s, FSCK_ENTRY_NO_INODE, "/d1/ghost", 999999);
	cr_expect_eq(r.problems, 2, "problems %" PRIu64, r.problems);
	if (r.problems != 2)
		dump(&s);
	struct meta_attr a;
	cr_assert_eq(meta_getattr(v.m, t.g, &a), 0);
	cr_expect_eq(a.nlink, 1);
	cr_expect_eq(rint_of(&v, "HGET sliceref %" PRIu64, t.g_id), 1);

	/* bad paths */
	cr_expect_eq(run_err(&v, 0, "/nope", &s, &r), ENOENT);
	cr_expect_eq(run_err(&v, 0, "/d2/sub/g/x", &s, &r), ENOTDIR);
	cr_expect_eq(run_err(&v, 0, "d2", &s, &r), EINVAL);
	/* the root as the tree: no volume-wide checks, same problems */
	r = run_at(&v, 0, "/", &s);
	cr_expect_eq(r.problems, 2, "problems %" PRIu64, r.problems);
	/* a pack's dead bytes past its total, repaired from a tree whose
	 * walk does not know the frames outside it: to 0, the safe side */
	long long total = rint_of(&v, "HGET packs %" PRIu64, t.P);
	rcmd(&v, "HSET packdead %" PRIu64 " %lld", t.P, total + 1);
	rcmd(&v, "INCRBY totalinodes 5"); /* volume-wide: not judged */
	r = run_at(&v, F_REPAIR, "/small1", &s);
	EXPECT(&s, FSCK_PACK_DEAD, "/small1", t.small[1]);
	cr_expect_eq(r.problems, 1, "problems %" PRIu64, r.problems);
	cr_expect_eq(r.fixed, 1);
	cr_expect_eq(rint_of(&v, "HEXISTS packdead %" PRIu64, t.P), 0);
	seen_free(&s);
	vol_close(&v);
}

/* The kinds added last, each made on purpose with raw commands: found,
 * repaired, and clean after. */
Test(fsck, gaps_found_and_repaired)
{
	struct vol v;
	struct tree t;
	struct seen s = {0};
	unsigned char rec[17];
	uint64_t holes = 777777;

	vol_open(&v);
	build(&v, &t);
	/* a stray chunk list of holes only */
	short_rec(rec, 0, 4096);
	rcmd(&v, "SET c%" PRIu64 "_0 %b", holes, rec, sizeof rec);
	/* a live file waiting in delfiles */
	rcmd(&v, "ZADD delfiles 1 %" PRIu64 ":1000", t.small[0]);
	/* a chunk list past big's length (its block in the store) */
	{
		char blk[700];
		uint64_t id = new_id(&v);
		fill(blk, sizeof blk, 11);
		cr_assert_eq(chunkstore_put_block(v.cs, id, 0, blk, 700), 0);
		short_rec(rec, id, 700);
		rcmd(&v, "SET c%" PRIu64 "_2 %b", t.big, rec, sizeof rec);
	}
	/* pendingspace with no session pending anything */
	rcmd(&v, "SET pendingspace 500");
	/* opens of session 4242, which is not registered: g, and inner,
	 * unlinked meanwhile */
	rcmd(&v, "HDEL d%" PRIu64 " inner", t.orph);
	set_field(&v, t.inner, 0, 0);
	rcmd(&v, "HSET o%" PRIu64 " 4242 1", t.g);
	rcmd(&v, "HSET o%" PRIu64 " 4242 1", t.inner);
	rcmd(&v, "SADD so4242 %" PRIu64 " %" PRIu64, t.g, t.inner);
	/* a staged block of session 4242, a dead record parked for it */
	uint64_t sid_slice = new_id(&v);
	short_rec(rec, sid_slice, 300);
	rcmd(&v, "HSET staging b%" PRIu64 "_0 4242", sid_slice);
	rcmd(&v, "HSET stagedead %" PRIu64 " %b", sid_slice, rec, sizeof rec);
	/* a pack's dead bytes past its total */
	long long total = rint_of(&v, "HGET packs %" PRIu64, t.P);
	rcmd(&v, "HSET packdead %" PRIu64 " %lld", t.P, total + 100);
	/* g's slice waiting for deletion */
	short_rec(rec, t.g_id, 1000);
	rcmd(&v, "RPUSH delslices %b", rec, sizeof rec);

	struct fsck_report r = run(&v, 0, &s);
	EXPECT(&s, FSCK_STRAY_CHUNKS, NULL, holes);
	EXPECT(&s, FSCK_DELFILE_LIVE, "/small0", t.small[0]);
	EXPECT(&s, FSCK_CHUNK_PAST_END, "/d2/big", t.big);
	EXPECT(&s, FSCK_PENDINGSPACE, NULL, 0);
	EXPECT(&s, FSCK_OPEN_GONE, "/d2/sub/g", t.g);
	EXPECT(&s, FSCK_OPEN_GONE, NULL, t.inner);
	EXPECT(&s, FSCK_OPEN_GONE, NULL, 0); /* so4242 */
	EXPECT(&s, FSCK_STAGING, NULL, 0);
	EXPECT(&s, FSCK_PACK_DEAD, NULL, t.small[0]);
	EXPECT(&s, FSCK_SLICE_DEAD, "/d2/sub/g", t.g);
	cr_expect_eq(r.problems, 10, "problems %" PRIu64, r.problems);
	if (r.problems != 10)
		dump(&s);

	/* without --objects, a dead slice is not taken back */
	r = run(&v, F_REPAIR, &s);
	int i = find(&s, FSCK_SLICE_DEAD, "/d2/sub/g", t.g);
	cr_expect(i >= 0 && s.p[i].fix == FSCK_FIX_CANNOT);
	cr_expect_eq(r.fixed, 9, "fixed %" PRIu64, r.fixed);
	for (int k = 0; k < s.n; k++)
		if (s.p[k].kind != FSCK_SLICE_DEAD)
			cr_expect_eq(s.p[k].fix, FSCK_FIX_DONE, "%s not fixed",
				     fsck_kind_name(s.p[k].kind));
	r = run(&v, F_OBJECTS | F_REPAIR, &s);
	EXPECT(&s, FSCK_SLICE_DEAD, "/d2/sub/g", t.g);
	cr_expect_eq(r.problems, 1, "problems %" PRIu64, r.problems);
	cr_expect_eq(r.fixed, 1);
	if (r.problems != 1)
		dump(&s);

	r = run(&v, F_OBJECTS | F_DEEP, &s);
	cr_expect_eq(r.problems, 0, "problems %" PRIu64, r.problems);
	if (s.n)
		dump(&s);
	/* what the repairs did, as a client sees it */
	cr_expect(reads_back(&v, t.g, 1000, 2));
	cr_expect(reads_back(&v, t.small[0], 1000, 50));
	struct meta_attr a;
	cr_expect_eq(meta_getattr(v.m, t.inner, &a), ENOENT,
		     "the unlinked file the dead session held is deleted");
	cr_expect_eq(rint_of(&v, "EXISTS so4242"), 0);
	cr_expect_eq(rint_of(&v, "HLEN staging"), 0);
	cr_expect_eq(rint_of(&v, "GET pendingspace"), 0);
	cr_expect_eq(rint_of(&v, "EXISTS c%" PRIu64 "_2", t.big), 0);
	cr_expect_eq(rint_of(&v, "HEXISTS packdead %" PRIu64, t.P), 0);
	/* reclamation takes the holes' list, inner's, the parked and the
	 * dropped slices; g's stays */
	struct meta_slice dead[8];
	size_t n, g_freed = 0;
	do {
		cr_assert_eq(meta_reclaim(v.m, dead, 8, &n), 0);
		for (size_t k = 0; k < n; k++)
			g_freed += dead[k].id == t.g_id;
	} while (n);
	cr_expect_eq(g_freed, 0);
	cr_expect_eq(rint_of(&v, "EXISTS c%" PRIu64 "_0", holes), 0);
	r = run(&v, F_OBJECTS, &s);
	cr_expect_eq(r.problems, 0);
	seen_free(&s);
	vol_close(&v);
}

/* A slice both referenced and waiting for deletion whose objects are
 * gone is not taken back: the file's data is lost. */
Test(fsck, dead_slice_without_objects)
{
	struct vol v;
	struct tree t;
	struct seen s = {0};
	unsigned char rec[17];
	char key[128];

	vol_open(&v);
	build(&v, &t);
	short_rec(rec, t.g_id, 1000);
	rcmd(&v, "RPUSH delslices %b", rec, sizeof rec);
	chunkstore_key(t.g_id, 0, 1000, key, sizeof key);
	cr_assert_eq(objstore_del(v.s, key), 0);
	struct fsck_report r = run(&v, F_OBJECTS | F_REPAIR, &s);
	EXPECT(&s, FSCK_SLICE_DEAD, "/d2/sub/g", t.g);
	EXPECT(&s, FSCK_OBJECT_MISSING, "/d2/sub/g", t.g);
	cr_expect_eq(r.problems, 2);
	cr_expect_eq(r.unfixed, 2);
	cr_expect_eq(rint_of(&v, "LLEN delslices"), 1);
	seen_free(&s);
	vol_close(&v);
}

/* The key `trash` naming no directory (removals would be final, the trash
 * would list nothing): reported; repaired by clearing the key and the
 * counts of hours that are gone when the root has no .trash, so that the
 * next removal makes a new trash, or by making the root's .trash the trash
 * again. */
Test(fsck, trash_key)
{
	struct vol v;
	struct seen s = {0};
	struct meta_trash_entry *l;
	struct meta_trash_usage u;
	uint64_t t, t2, d, f, trashed;
	size_t n;

	vol_open(&v);
	rcmd(&v, "HSET setting trash_days 1");
	d = mk(&v, META_ROOT_INO, "d", META_DIR);
	f = file(&v, d, "f", 1000, 3, NULL);

	/* no .trash at the root; counts of hours that are gone */
	rcmd(&v, "SET trash 999999");
	rcmd(&v, "HSET trashcount 424242 3");
	rcmd(&v, "HSET trashbytes 424242 3000");
	rcmd(&v, "HSET tn424242 a b");
	struct fsck_report r = run(&v, 0, &s);
	EXPECT(&s, FSCK_TRASH, "/" META_TRASH, 999999);
	cr_expect_eq(r.problems, 1, "problems %" PRIu64, r.problems);
	r = run(&v, F_REPAIR, &s);
	cr_expect_eq(r.fixed, 1, "fixed %" PRIu64, r.fixed);
	cr_assert_eq(meta_trash_ino(v.m, &t), 0);
	cr_expect_eq(t, 0, "the key is still there");
	cr_assert_eq(meta_trash_usage(v.m, &u), 0);
	cr_expect_eq(u.entries, 0, "a phantom trash");
	cr_expect_eq(u.bytes, 0);
	cr_expect_eq(rint_of(&v, "EXISTS tn424242"), 0);
	cr_assert_eq(meta_unlink_trashed(v.m, d, "f", &trashed), 0);
	cr_expect_eq(trashed, f, "the removal after the repair was final");
	cr_assert_eq(meta_trash_ino(v.m, &t), 0);
	cr_assert_neq(t, 0);
	r = run(&v, 0, &s);
	cr_expect_eq(r.problems, 0, "problems %" PRIu64, r.problems);

	/* the root's .trash is there: it is the trash again, counted */
	rcmd(&v, "SET trash 999999");
	rcmd(&v, "DEL trashcount");
	r = run(&v, 0, &s);
	EXPECT(&s, FSCK_TRASH, "/" META_TRASH, 999999);
	r = run(&v, F_REPAIR, &s);
	cr_expect_eq(r.fixed, 1, "fixed %" PRIu64, r.fixed);
	cr_assert_eq(meta_trash_ino(v.m, &t2), 0);
	cr_expect_eq(t2, t, "the root's .trash is not the trash again");
	cr_assert_eq(meta_trash_list(v.m, &l, &n), 0);
	cr_expect_eq(n, 1);
	meta_trash_entries_free(l, n);
	cr_assert_eq(meta_trash_usage(v.m, &u), 0);
	cr_expect_eq(u.entries, 1, "the hours are not counted again");
	r = run(&v, 0, &s);
	cr_expect_eq(r.problems, 0, "problems %" PRIu64, r.problems);
	seen_free(&s);
	vol_close(&v);
}
