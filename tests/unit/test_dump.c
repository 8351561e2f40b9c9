/*
 * test_dump.c - meta_dump and meta_load (meta/redis_dump.c, redis_load.c)
 * and lib/lz4stream against a real redis-server (GRANARY_TEST_REDIS,
 * databases 8 to 12): a volume holding every kind of object, built with
 * meta.h calls, dumped, loaded into an empty database and dumped again
 * gives the same lines (but the header's time and counters); what a
 * client reads of the loaded volume is what it read of the first; a
 * database that holds anything, and streams that are no dump, newer,
 * damaged or cut short, are refused; random namespace changes survive the
 * round trip too.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/lz4stream.h"
#include "meta/meta_dump.h"
#include "meta/meta_group.h"
#include "meta/meta_quota.h"
#include "meta/meta_objects.h"
#include "meta/meta_scan.h"
#include "meta/meta_snap.h"
#include "meta/meta_volume.h"

#define DB_A 8 /* the volume built */
#define DB_B 9 /* where it is loaded */
#define DB_C 10

static const char *sock(void)
{
	static char s[4096];
	const char *u = getenv("GRANARY_TEST_REDIS");
	if (!u || strncmp(u, "unix://", 7))
		cr_skip_test("GRANARY_TEST_REDIS unset (no redis to test on)");
	snprintf(s, sizeof s, "%.*s", (int)strcspn(u + 7, "?"), u + 7);
	return s;
}

static void raw(int db, const char *cmd)
{
	redisContext *c = redisConnectUnix(sock());
	cr_assert(c && !c->err);
	redisReply *r = redisCommand(c, "SELECT %d", db);
	freeReplyObject(r);
	r = redisCommand(c, cmd);
	cr_assert(r && r->type != REDIS_REPLY_ERROR);
	freeReplyObject(r);
	redisFree(c);
}

static struct meta *open_db(int db)
{
	char url[4200];
	struct meta *m;
	snprintf(url, sizeof url, "unix://%s?db=%d", sock(), db);
	cr_assert_eq(meta_open(url, NULL, &m), 0);
	return m;
}

/* An empty database, opened. */
static struct meta *empty_db(int db)
{
	raw(db, "FLUSHDB");
	return open_db(db);
}

static struct meta *new_volume(int db)
{
	struct meta_volume v = {.block_size = 1 << 20};
	struct meta *m = empty_db(db);
	snprintf(v.name, sizeof v.name, "dumped");
	snprintf(v.storage, sizeof v.storage, "mem://");
	snprintf(v.access_key, sizeof v.access_key, "SECRET-ACCESS");
	snprintf(v.secret_key, sizeof v.secret_key, "SECRET-KEY");
	cr_assert_eq(meta_format(m, &v, 1), 0);
	return m;
}

/* ---- streams in memory ------------------------------------------------ */

struct buf {
	char *p;
	size_t len, cap, pos, step;
};

static int buf_write(void *arg, const void *p, size_t n)
{
	struct buf *b = arg;
	if (b->len + n > b->cap) {
		b->cap = (b->len + n) * 2;
		b->p = realloc(b->p, b->cap);
		cr_assert(b->p);
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
	return 0;
}

/* at most step bytes a read (0: all), to cut lines anywhere */
static ssize_t buf_read(void *arg, void *p, size_t cap)
{
	struct buf *b = arg;
	size_t n = b->len - b->pos;
	if (n > cap)
		n = cap;
	if (b->step && n > b->step)
		n = b->step;
	memcpy(p, b->p + b->pos, n);
	b->pos += n;
	return (ssize_t)n;
}

static struct buf dump_of(struct meta *m)
{
	struct buf b = {0};
	struct meta_dump_stats st;
	cr_assert_eq(meta_dump(m, NULL, buf_write, &b, &st), 0);
	cr_assert_eq(st.bytes, b.len);
	buf_write(&b, "", 1);
	b.len--;
	return b;
}

static int load_buf(struct meta *m, const char *text, size_t n, size_t step,
		    char *why)
{
	struct buf b = {(char *)text, n, n, 0, step};
	struct meta_load_opts o = {.why = why, .why_cap = why ? 256 : 0};
	return meta_load(m, &o, buf_read, &b, NULL);
}

static int cmp_line(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The lines but the header and the trailer (whose counters a load
 * moves to a new id epoch), sorted (SCAN's order is the database's). */
static char **lines_of(const struct buf *b, size_t *n)
{
	char *t = strdup(b->p), *save, *l;
	char **v = NULL;
	*n = 0;
	for (l = strtok_r(t, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
		if (strncmp(l, "{\"type\":\"header\"", 16) &&
		    strncmp(l, "{\"type\":\"end\"", 13)) {
			v = realloc(v, (*n + 1) * sizeof *v);
			v[(*n)++] = strdup(l);
		}
	free(t);
	qsort(v, *n, sizeof *v, cmp_line);
	return v;
}

static void same_dumps(const struct buf *a, const struct buf *b)
{
	size_t na, nb;
	char **la = lines_of(a, &na), **lb = lines_of(b, &nb);
	cr_assert_eq(na, nb, "%zu lines against %zu", na, nb);
	for (size_t i = 0; i < na; i++) {
		cr_assert_str_eq(la[i], lb[i]);
		free(la[i]);
		free(lb[i]);
	}
	free(la);
	free(lb);
}

/* ---- a volume of every kind of object ---------------------------------- */

static uint64_t mk(struct meta *m, uint64_t parent, const char *name,
		   uint8_t type)
{
	uint64_t ino;
	cr_assert_eq(meta_mknod(m, parent, name, type,
				type == META_DIR ? 0755 : 0640, 1000, 100,
				type == META_BLK ? 0x0801 : 0,
				type == META_SYMLINK ? "../target\nodd" : NULL,
				&ino, NULL),
		     0, "mknod %s", name);
	return ino;
}

static uint64_t id(struct meta *m)
{
	uint64_t i;
	cr_assert_eq(meta_new_slice_id(m, &i), 0);
	return i;
}

static void put(struct meta *m, uint64_t ino, uint32_t idx, uint32_t pos,
		uint64_t sid, uint32_t size, uint32_t off, uint32_t len)
{
	struct meta_chunk_slice w = {idx, {sid, size, off, len, pos, 0, 0, 0}};
	cr_assert_eq(meta_write(m, ino, &w, 1, NULL), 0);
}

struct objs {
	uint64_t dir, multi, hl, sym, fifo, dev, odd, packed, gone, ver;
	char long_name[256];
};

static void build(struct meta *m, struct objs *o)
{
	static const unsigned char bin[] = {0, 1, 2, 0xff, '\n', '"'};
	uint64_t P = id(m), ino;

	o->dir = mk(m, 1, "dir", META_DIR);
	/* several chunks, a hole between, a part of a slice, a hole record */
	o->multi = mk(m, o->dir, "multi", META_FILE);
	put(m, o->multi, 0, 0, id(m), 1000, 0, 1000);
	put(m, o->multi, 0, 1000, id(m), 5000, 100, 2000);
	put(m, o->multi, 2, 4096, id(m), 4096, 0, 4096);
	put(m, o->multi, 0, 10, 0, 100, 0, 100);
	for (int i = 0; i < 5; i++) /* chunk 0 outgrows its tail field */
		put(m, o->multi, 0, 20000 + 100 * (uint32_t)i, id(m), 100, 0,
		    100);
	cr_assert_eq(meta_link(m, o->multi, 1, "hardlink", NULL), 0);
	o->hl = o->multi;
	o->sym = mk(m, 1, "sym", META_SYMLINK);
	o->fifo = mk(m, o->dir, "fifo", META_FIFO);
	o->dev = mk(m, o->dir, "dev", META_BLK);
	mk(m, o->dir, "sock", META_SOCK);
	cr_assert_eq(meta_setxattr(m, o->multi, "user.bin", bin, sizeof bin, 0),
		     0);
	cr_assert_eq(meta_setxattr(m, o->dir, "user.text", "plain", 5, 0), 0);
	/* names: newline, quote, backslash, UTF-8, not UTF-8, 255 bytes */
	mk(m, o->dir, "new\nline", META_FILE);
	mk(m, o->dir, "q\"uo\\te", META_FILE);
	mk(m, o->dir,
	   "\xc3\xbcnic\xc3\xb6"
	   "de",
	   META_FILE);
	o->odd = mk(m, o->dir, "bad\xff\xfeutf8", META_FILE);
	memset(o->long_name, 'L', 255);
	o->long_name[255] = 0;
	mk(m, o->dir, o->long_name, META_FILE);
	/* packed slices */
	cr_assert_eq(meta_pack_total(m, P, META_PACK_OPEN, NULL), 0);
	o->packed = mk(m, 1, "packed", META_FILE);
	struct meta_chunk_slice w = {0, {id(m), 700, 0, 700, 0, P, 0, 720}};
	cr_assert_eq(meta_write(m, o->packed, &w, 1, NULL), 0);
	ino = mk(m, 1, "packed2", META_FILE);
	w.s.id = id(m);
	w.s.poff = 720;
	cr_assert_eq(meta_write(m, ino, &w, 1, NULL), 0);
	cr_assert_eq(meta_pack_total(m, P, 1440, NULL), 0);
	/* a snapshot of the tree and a version of it */
	cr_assert_eq(meta_snapshot(m, NULL, o->dir, 1, "snap", NULL), 0);
	cr_assert_eq(
	    meta_version_create(m, NULL, o->dir, "v1", "first\xff", NULL), 0);
	/* pending deletes: a deleted file whose chunks wait, and a slice
	 * dropped by a truncate */
	o->gone = mk(m, 1, "gone", META_FILE);
	put(m, o->gone, 0, 0, id(m), 3000, 0, 3000);
	put(m, o->gone, 1, 0, id(m), 3000, 0, 3000);
	cr_assert_eq(meta_unlink(m, 1, "gone"), 0);
	ino = mk(m, 1, "cut", META_FILE);
	put(m, ino, 0, 0, id(m), 3000, 0, 3000);
	cr_assert_eq(meta_truncate(m, ino, 0, NULL), 0);
}

/* What a client sees of the volume, the same on both sides. */
static void same_view(struct meta *a, struct meta *b, const struct objs *o)
{
	struct meta_dirent *ea, *eb;
	size_t na, nb;
	uint64_t dirs[] = {1, o->dir};

	for (int d = 0; d < 2; d++) {
		cr_assert_eq(meta_readdir(a, dirs[d], 1, &ea, &na), 0);
		cr_assert_eq(meta_readdir(b, dirs[d], 1, &eb, &nb), 0);
		cr_assert_eq(na, nb);
		for (size_t i = 0; i < na; i++) {
			uint64_t ino;
			struct meta_attr at;
			cr_assert_eq(
			    meta_lookup(b, dirs[d], ea[i].name, &ino, &at), 0,
			    "%s", ea[i].name);
			cr_assert_eq(ino, ea[i].ino);
			cr_assert_eq(memcmp(&at, &ea[i].attr, sizeof at), 0,
				     "attributes of %s", ea[i].name);
		}
		meta_dirents_free(ea, na);
		meta_dirents_free(eb, nb);
	}
	for (uint32_t idx = 0; idx < 3; idx++) {
		struct meta_slice *sa, *sb;
		cr_assert_eq(meta_read_chunk(a, o->multi, idx, &sa, &na), 0);
		cr_assert_eq(meta_read_chunk(b, o->multi, idx, &sb, &nb), 0);
		cr_assert_eq(na, nb);
		cr_assert(!na || !memcmp(sa, sb, na * sizeof *sa));
		free(sa);
		free(sb);
	}
	void *va;
	size_t vn;
	cr_assert_eq(meta_getxattr(b, o->multi, "user.bin", &va, &vn), 0);
	cr_assert_eq(vn, 6);
	cr_assert_eq(memcmp(va, "\0\1\2\xff\n\"", 6), 0);
	free(va);
	char *t;
	cr_assert_eq(meta_readlink(b, o->sym, &t), 0);
	cr_assert_str_eq(t, "../target\nodd");
	free(t);
	struct meta_version *v;
	cr_assert_eq(meta_version_get(b, o->dir, "v1", &v), 0);
	cr_assert_str_eq(v->msg, "first\xff");
	meta_versions_free(v, 1);
	struct meta_usage ua, ub;
	cr_assert_eq(meta_usage(a, &ua), 0);
	cr_assert_eq(meta_usage(b, &ub), 0);
	cr_assert_eq(ua.inodes, ub.inodes);
	cr_assert_eq(ua.used_bytes, ub.used_bytes);
}

/* Reclamation run to its end: the slices handed out, those of size
 * size counted in *sized. */
static size_t reclaim_all(struct meta *m, uint32_t size, size_t *sized)
{
	struct meta_slice dead[64];
	size_t n, all = 0;
	*sized = 0;
	for (int i = 0; i < 100; i++) {
		cr_assert_eq(meta_reclaim(m, dead, 64, &n), 0);
		if (!n)
			break;
		for (size_t k = 0; k < n; k++)
			*sized += dead[k].size == size;
		all += n;
	}
	return all;
}

static int count_ref(void *arg, uint64_t i, int64_t extra)
{
	(void)i;
	*(int64_t *)arg += extra;
	return 0;
}

Test(dump, round_trip)
{
	struct meta *a = new_volume(DB_A), *b = empty_db(DB_B);
	struct meta_volume va, vb;
	struct objs o;
	int64_t ra = 0, rb = 0;

	build(a, &o);
	/* a quota with its usage goes along */
	uint64_t qd;
	cr_assert_eq(meta_mknod(a, META_ROOT_INO, "quota-dir", META_DIR, 0755,
				0, 0, 0, NULL, &qd, NULL),
		     0);
	cr_assert_eq(meta_quota_set(a, qd, 1 << 20, 99, NULL), 0);
	cr_assert_eq(meta_quota_adjust(a, qd, 12345, 6), 0);
	uint64_t qf;
	cr_assert_eq(
	    meta_mknod(a, qd, "qf", META_FILE, 0644, 0, 0, 0, NULL, &qf, NULL),
	    0);
	unsigned char gsa[META_GROUP_SECRET], gsb[META_GROUP_SECRET];
	cr_assert_eq(meta_group_secret(a, gsa), 0);
	struct buf d1 = dump_of(a);
	cr_assert(!strstr(d1.p, "SECRET"), "the keys are not in a dump");
	cr_assert(!strstr(d1.p, "group_secret"), "nor the group secret");
	cr_assert(strstr(d1.p, "\"type\":\"quota\""));
	cr_assert(strstr(d1.p, "\"type\":\"delfile\""));
	cr_assert(strstr(d1.p, "\"type\":\"delslice\""));
	cr_assert(strstr(d1.p, "\"name_b64\":"), "a name not UTF-8");
	cr_assert(strstr(d1.p, "\"vdir\":"));
	cr_assert_eq(load_buf(b, d1.p, d1.len, 7, NULL), 0);
	struct buf d2 = dump_of(b);
	same_dumps(&d1, &d2);
	same_view(a, b, &o);
	cr_assert_eq(meta_load_volume(b, &vb), 0);
	cr_assert_eq(meta_load_volume(a, &va), 0);
	cr_assert_str_eq(va.uuid, vb.uuid);
	cr_assert_str_eq(va.name, vb.name);
	cr_assert_str_eq(vb.access_key, "");
	cr_assert_eq(va.block_size, vb.block_size);
	/* the restored volume's cache group gets a secret of its own */
	cr_assert_eq(meta_group_secret(b, gsb), 0);
	cr_assert_neq(memcmp(gsa, gsb, sizeof gsa), 0);
	cr_assert_eq(meta_scan_slicerefs(a, count_ref, &ra), 0);
	cr_assert_eq(meta_scan_slicerefs(b, count_ref, &rb), 0);
	cr_assert_eq(ra, rb);
	cr_assert_gt(ra, 0, "the snapshot and version share slices");
	struct meta_quota q;
	cr_assert_eq(meta_quota_get(b, qd, &q), 0);
	cr_assert_eq(q.max_space, 1 << 20);
	cr_assert_eq(q.max_inodes, 99);
	cr_assert_eq(q.used_space, 12345);
	cr_assert_eq(q.used_inodes, 7);
	/* its files' data counts in it, whatever a client says (the
	 * parent field is loaded with the entries) */
	struct meta_attr fa;
	cr_assert_eq(meta_fallocate_q(b, NULL, qf, 0, 0, 1000, &fa), 0);
	cr_assert_eq(meta_quota_get(b, qd, &q), 0);
	cr_assert_eq(q.used_space, 12345 + 1000);
	uint64_t g;
	cr_assert_eq(meta_quota_gen(b, &g), 0);
	cr_assert_gt(g, 0, "the loaded volume's clients see its quotas");
	/* the loaded volume goes on: reclamation frees what was waiting */
	size_t sized;
	reclaim_all(b, 3000, &sized);
	cr_assert_eq(sized, 3, "the truncated slice and the deleted file's");
	free(d1.p);
	free(d2.p);
	meta_close(a);
	meta_close(b);
}

Test(dump, refuses_a_database_in_use)
{
	struct meta *a = new_volume(DB_A), *c = empty_db(DB_C);
	struct buf d = dump_of(a);

	cr_assert_eq(load_buf(a, d.p, d.len, 0, NULL), META_EEXIST);
	raw(DB_C, "SET somebody else");
	cr_assert_eq(load_buf(c, d.p, d.len, 0, NULL), META_EEXIST);
	free(d.p);
	meta_close(a);
	meta_close(c);
}

/* load of text into an empty DB_C: its error, and why in *why */
static int try_load(const char *text, size_t n, char *why)
{
	struct meta *c = empty_db(DB_C);
	int err = load_buf(c, text, n, 0, why);
	meta_close(c);
	return err;
}

Test(dump, refuses_bad_streams)
{
	struct meta *a = new_volume(DB_A);
	struct objs o;
	char why[256];

	build(a, &o);
	struct buf d = dump_of(a);
	char *last = d.p + d.len - 2;
	while (*last != '\n')
		last--;
	/* no trailer: cut short at a line's end, or inside a line */
	cr_assert_eq(try_load(d.p, (size_t)(last - d.p) + 1, why), EINVAL);
	cr_assert(strstr(why, "cut short"), "%s", why);
	char *mid = memchr(d.p + d.len / 2, '"', d.len / 2);
	cr_assert_eq(try_load(d.p, (size_t)(mid - d.p), why), EINVAL);
	cr_assert(strstr(why, "cut short"), "%s", why);
	cr_assert_eq(try_load(d.p, 0, why), EINVAL);
	cr_assert_eq(try_load("hello\nworld\n", 12, why), EINVAL);
	cr_assert(strstr(why, "line 1"), "%s", why);
	const char *other = "{\"type\":\"header\",\"format\":\"other\"}\n";
	cr_assert_eq(try_load(other, strlen(other), why), EINVAL);
	/* a newer version */
	char *newer = strdup(d.p);
	char *v = strstr(newer, "\"version\":1");
	cr_assert(v);
	v[10] = '9';
	cr_assert_eq(try_load(newer, d.len, why), EINVAL);
	cr_assert(strstr(why, "newer"), "%s", why);
	free(newer);
	/* a damaged line in the middle */
	char *bad = strdup(d.p);
	char *l = strstr(bad, "{\"type\":\"inode\"");
	cr_assert(l);
	l[3] = 'X';
	cr_assert_eq(try_load(bad, d.len, why), EINVAL);
	cr_assert(strstr(why, "line "), "%s", why);
	free(bad);
	/* a line lost: the trailer's counts disagree */
	char *lost = strdup(d.p);
	char *dl = strstr(lost, "\n{\"type\":\"dirent\"");
	char *end = strchr(dl + 1, '\n');
	memmove(dl, end, strlen(end) + 1);
	cr_assert_eq(try_load(lost, strlen(lost), why), EINVAL);
	cr_assert(strstr(why, "trailer"), "%s", why);
	free(lost);
	/* a refused load leaves no volume: nobody mounts it */
	struct meta *c = open_db(DB_C);
	struct meta_volume vv;
	cr_assert_eq(meta_load_volume(c, &vv), META_ENOVOLUME);
	meta_close(c);
	free(d.p);
	meta_close(a);
}

Test(dump, lz4_round_trip)
{
	struct meta *a = new_volume(DB_A), *c = empty_db(DB_C);
	struct lz4stream_sink *z;
	struct lz4stream_source *src;
	struct buf zb = {0}, plain = {0};
	struct objs o;

	build(a, &o);
	cr_assert_eq(lz4stream_sink_open(buf_write, &zb, &z), 0);
	cr_assert_eq(meta_dump(a, NULL, lz4stream_sink_write, z, NULL), 0);
	cr_assert_eq(lz4stream_sink_close(z), 0);
	cr_assert_eq(memcmp(zb.p, "\x04\x22\x4d\x18", 4), 0);
	/* load takes it as it takes a plain stream */
	zb.step = 100;
	cr_assert_eq(lz4stream_source_open(buf_read, &zb, &src), 0);
	cr_assert_eq(meta_load(c, NULL, lz4stream_source_read, src, NULL), 0);
	cr_assert(lz4stream_source_compressed(src));
	lz4stream_source_close(src);
	struct buf d1 = dump_of(a), d2 = dump_of(c);
	same_dumps(&d1, &d2);
	/* a plain stream through the source is the same bytes */
	d1.pos = 0;
	d1.step = 3;
	cr_assert_eq(lz4stream_source_open(buf_read, &d1, &src), 0);
	char tmp[64];
	ssize_t r;
	while ((r = lz4stream_source_read(src, tmp, sizeof tmp)) > 0)
		buf_write(&plain, tmp, (size_t)r);
	cr_assert_eq(r, 0);
	cr_assert(!lz4stream_source_compressed(src));
	lz4stream_source_close(src);
	cr_assert_eq(plain.len, d1.len);
	cr_assert_eq(memcmp(plain.p, d1.p, d1.len), 0);
	/* a compressed stream cut short or damaged */
	for (int damage = 0; damage < 2; damage++) {
		struct buf cut = {zb.p, damage ? zb.len : zb.len - 9, zb.len, 0,
				  0};
		if (damage)
			zb.p[zb.len / 2] ^= 0x55;
		cr_assert_eq(lz4stream_source_open(buf_read, &cut, &src), 0);
		while ((r = lz4stream_source_read(src, tmp, sizeof tmp)) > 0)
			;
		cr_assert_eq(r, -EBADMSG, "damage %d", damage);
		lz4stream_source_close(src);
	}
	free(plain.p);
	free(zb.p);
	free(d1.p);
	free(d2.p);
	meta_close(a);
	meta_close(c);
}

/* An inode unlinked while open is no open file of the loaded volume:
 * its data waits for reclamation as a deleted file's. */
Test(dump, unlinked_open_file_becomes_a_deleted_one)
{
	struct meta *a = new_volume(DB_A), *c = empty_db(DB_C);
	uint64_t ino;

	cr_assert_eq(meta_session_open(a, "/mnt/dump"), 0);
	ino = mk(a, 1, "open", META_FILE);
	put(a, ino, 0, 0, id(a), 4000, 0, 4000);
	cr_assert_eq(meta_file_open(a, ino, NULL, NULL), 0);
	cr_assert_eq(meta_unlink(a, 1, "open"), 0);
	struct buf d = dump_of(a);
	cr_assert_eq(load_buf(c, d.p, d.len, 0, NULL), 0);
	struct meta_attr at;
	cr_assert_eq(meta_getattr(c, ino, &at), ENOENT);
	size_t found;
	reclaim_all(c, 4000, &found);
	cr_assert_eq(found, 1);
	free(d.p);
	meta_close(a);
	meta_close(c);
}

/* Random namespace changes, then dump, load, dump: the same lines. */
Test(dump, random_namespace)
{
	struct meta *a = new_volume(DB_A), *b = empty_db(DB_B);
	uint64_t dirs[16] = {1}, files[64] = {0};
	size_t nd = 1, nf = 0;
	unsigned seed = 12345;
	char name[32], name2[32];

	for (int step = 0; step < 600; step++) {
		seed = seed * 1103515245u + 12345u;
		unsigned r = seed >> 16;
		uint64_t d = dirs[r % nd], d2 = dirs[(r / 7) % nd];
		snprintf(name, sizeof name, "n%u", r % 97);
		snprintf(name2, sizeof name2, "n%u", (r / 97) % 97);
		switch (r % 7) {
		case 0:
			if (nd < 16 &&
			    !meta_mknod(a, d, name, META_DIR, 0700, r % 3, 0, 0,
					NULL, &dirs[nd], NULL))
				nd++;
			break;
		case 1:
		case 2:
			if (nf < 64 &&
			    !meta_mknod(a, d, name, META_FILE, 0644, 0, r % 5,
					0, NULL, &files[nf], NULL)) {
				put(a, files[nf], 0, 0, id(a), r % 5000 + 1, 0,
				    r % 5000 + 1);
				nf++;
			}
			break;
		case 3:
			if (nf)
				meta_link(a, files[r % nf], d2, name2, NULL);
			break;
		case 4:
			meta_unlink(a, d, name);
			break;
		case 5:
			meta_rename(a, d, name, d2, name2, 0);
			break;
		case 6:
			if (nf)
				meta_setxattr(a, files[r % nf], "user.r", name,
					      strlen(name), 0);
			break;
		}
	}
	struct buf d1 = dump_of(a);
	cr_assert_eq(load_buf(b, d1.p, d1.len, 0, NULL), 0);
	struct buf d2 = dump_of(b);
	same_dumps(&d1, &d2);
	free(d1.p);
	free(d2.p);
	meta_close(a);
	meta_close(b);
}

/* ---- the id epoch of a load ------------------------------------------- */

static uint64_t get_u64(int db, const char *key)
{
	redisContext *c = redisConnectUnix(sock());
	cr_assert(c && !c->err);
	redisReply *r = redisCommand(c, "SELECT %d", db);
	freeReplyObject(r);
	r = redisCommand(c, "GET %s", key);
	cr_assert(r && r->type == REDIS_REPLY_STRING, "GET %s", key);
	uint64_t v = strtoull(r->str, NULL, 10);
	freeReplyObject(r);
	redisFree(c);
	return v;
}

/* A load hands out slice ids and inode numbers an epoch past anything the
 * dumped volume used, even after the dump; each load gets its own
 * restore_id; a dump of a loaded volume loads into the next epoch. */
Test(dump, load_starts_an_id_epoch)
{
	struct meta *a = new_volume(DB_A), *b = empty_db(DB_B);
	struct meta_volume vb, vc;

	uint64_t f = mk(a, 1, "before", META_FILE);
	put(a, f, 0, 0, id(a), 4000, 0, 4000);
	struct buf d = dump_of(a);
	/* the interval the restore loses: ids handed out after the dump */
	uint64_t lost_slice = 0, lost_ino = mk(a, 1, "after", META_FILE);
	for (int i = 0; i < 3000; i++) /* past the client's batch */
		lost_slice = id(a);
	uint64_t highest = get_u64(DB_A, "nextslice");
	cr_assert_geq(highest, lost_slice);
	meta_close(a);

	cr_assert_eq(load_buf(b, d.p, d.len, 0, NULL), 0);
	cr_assert_eq(meta_load_volume(b, &vb), 0);
	cr_assert_eq(strlen(vb.restore_id), 16, "restore_id '%s'",
		     vb.restore_id);
	cr_assert_eq(strspn(vb.restore_id, "0123456789abcdef"), 16);
	cr_assert_eq(vb.slice_floor, 2 * META_SLICE_EPOCH,
		     "slice floor %" PRIu64, vb.slice_floor);
	cr_assert_eq(vb.inode_floor, 2 * META_INODE_EPOCH);
	cr_assert_eq(get_u64(DB_B, "nextslice"), vb.slice_floor);
	cr_assert_eq(get_u64(DB_B, "nextinode"), vb.inode_floor);
	/* what the restored volume hands out: past the lost interval by an
	 * epoch at least */
	uint64_t s = id(b), ino = mk(b, 1, "new", META_FILE);
	cr_assert_gt(s, vb.slice_floor);
	cr_assert_geq(s - lost_slice, META_SLICE_EPOCH);
	cr_assert_gt(ino, vb.inode_floor);
	cr_assert_geq(ino - lost_ino, META_INODE_EPOCH);
	/* ids near an epoch's end: still a whole epoch past */
	cr_assert_eq(meta_epoch_after(META_SLICE_EPOCH - 1, META_SLICE_EPOCH),
		     2 * META_SLICE_EPOCH);
	cr_assert_eq(meta_epoch_after(META_SLICE_EPOCH, META_SLICE_EPOCH),
		     3 * META_SLICE_EPOCH);

	/* the same dump loaded again: another restore_id */
	struct meta *c = empty_db(DB_C);
	cr_assert_eq(load_buf(c, d.p, d.len, 0, NULL), 0);
	cr_assert_eq(meta_load_volume(c, &vc), 0);
	cr_assert_str_neq(vc.restore_id, vb.restore_id);
	meta_close(c);

	/* a dump of the restored volume loads into the epoch after */
	struct buf d2 = dump_of(b);
	cr_assert(strstr(d2.p, vb.restore_id), "the dump carries restore_id");
	c = empty_db(DB_C);
	cr_assert_eq(load_buf(c, d2.p, d2.len, 0, NULL), 0);
	cr_assert_eq(meta_load_volume(c, &vc), 0);
	cr_assert_eq(vc.slice_floor, 4 * META_SLICE_EPOCH);
	cr_assert_str_neq(vc.restore_id, vb.restore_id);
	cr_assert_eq(id(c), vc.slice_floor + 1);
	meta_close(c);
	free(d2.p);
	free(d.p);
	meta_close(b);
}

/* A dump whose ids leave no room for an epoch below 2^53: refused. */
Test(dump, refuses_a_dump_with_no_epoch_left)
{
	struct meta *a = new_volume(DB_A);
	char why[256];

	mk(a, 1, "f", META_FILE);
	struct buf d = dump_of(a);
	meta_close(a);
	char *t = strstr(d.p, "{\"type\":\"end\"");
	cr_assert(t);
	char *ns = strstr(t, "\"nextslice\":");
	cr_assert(ns);
	/* 2^53 - 2^40 - 1: the next epoch would start at 2^53 */
	char fixed[4096];
	snprintf(fixed, sizeof fixed, "%.*s\"nextslice\":%" PRIu64 "}\n",
		 (int)(ns - d.p), d.p,
		 (UINT64_C(1) << 53) - META_SLICE_EPOCH - 1);
	int err = try_load(fixed, strlen(fixed), why);
	cr_assert_eq(err, EOVERFLOW, "%d: %s", err, why);
	cr_assert(strstr(why, "2^53"), "%s", why);
	struct meta *c = open_db(DB_C);
	struct meta_volume v;
	cr_assert_eq(meta_load_volume(c, &v), META_ENOVOLUME);
	meta_close(c);
	free(d.p);
}

/* A restored volume's ids moved past another restore's (fs/vfs/mount.c):
 * the counters and the settings rise, never fall, and again is a no-op. */
Test(dump, id_floor_raise)
{
	struct meta *a = new_volume(DB_A), *b = empty_db(DB_B);
	struct meta_volume v;

	mk(a, 1, "f", META_FILE);
	struct buf d = dump_of(a);
	meta_close(a);
	cr_assert_eq(load_buf(b, d.p, d.len, 0, NULL), 0);
	uint64_t s = 6 * META_SLICE_EPOCH, i = 6 * META_INODE_EPOCH;
	cr_assert_eq(meta_id_floor_raise(b, s, i), 0);
	cr_assert_eq(meta_id_floor_raise(b, s, i), 0);
	cr_assert_eq(meta_id_floor_raise(b, META_SLICE_EPOCH, 1), 0);
	cr_assert_eq(meta_load_volume(b, &v), 0);
	cr_assert_eq(v.slice_floor, s);
	cr_assert_eq(v.inode_floor, i);
	cr_assert_eq(get_u64(DB_B, "nextslice"), s);
	cr_assert_eq(get_u64(DB_B, "nextinode"), i);
	cr_assert_eq(id(b), s + 1);
	cr_assert_eq(mk(b, 1, "g", META_FILE), i + 1);
	cr_assert_eq(meta_id_floor_raise(b, UINT64_C(1) << 53, i), EOVERFLOW);
	free(d.p);
	meta_close(b);
}
