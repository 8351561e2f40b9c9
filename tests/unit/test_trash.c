/*
 * test_trash.c - the trash of the Redis engine (meta/meta_trash.h) against
 * a real redis-server (GRANARY_TEST_REDIS): unlink, rename over and rmdir
 * put what they remove into the trash while it is on and free it while it
 * is off; hard links lose a name only; restore; purge frees the data
 * (delfiles, then reclamation); the reserved name and the trash's rules.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <hiredis/hiredis.h>

#include "meta/meta_objects.h"
#include "meta/meta_snap.h"
#include "meta/meta_trash.h"
#include "meta/meta_volume.h"
#include "meta/meta.h"
#include "tests/unit/testvol.h"

#define DB 60 /* each test wipes it with format --force */

/* A handle on a fresh volume keeping removed files `days` days. */
static struct meta *fresh(uint32_t days)
{
	return testvol_fresh(DB, "trash", days);
}

static long long rint_(const char *fmt, const char *arg)
{
	redisContext *c = redisConnectUnix(testvol_sock());
	cr_assert(c && !c->err);
	redisReply *r = redisCommand(c, "SELECT %d", DB);
	freeReplyObject(r);
	r = redisCommand(c, fmt, arg);
	cr_assert(r);
	long long v = r->type == REDIS_REPLY_INTEGER  ? r->integer
		      : r->type == REDIS_REPLY_STRING ? atoll(r->str)
						      : 0;
	freeReplyObject(r);
	redisFree(c);
	return v;
}

/* A raw command (the damage an older engine did): the reply, freed by
 * the caller. */
static redisReply *rcmd(const char *fmt, ...)
{
	redisContext *c = redisConnectUnix(testvol_sock());
	va_list ap;
	cr_assert(c && !c->err);
	redisReply *r = redisCommand(c, "SELECT %d", DB);
	freeReplyObject(r);
	va_start(ap, fmt);
	r = redisvCommand(c, fmt, ap);
	va_end(ap);
	cr_assert(r && r->type != REDIS_REPLY_ERROR);
	redisFree(c);
	return r;
}

static long long delfiles(void)
{
	return rint_("ZCARD %s", "delfiles");
}

static uint64_t mk(struct meta *m, uint64_t parent, const char *name,
		   uint8_t type)
{
	uint64_t ino = 0;
	int err =
	    meta_mknod(m, parent, name, type, type == META_DIR ? 0755 : 0644,
		       1000, 1000, 0, NULL, &ino, NULL);
	cr_assert_eq(err, 0, "mknod %s: %s", name, gr_strerror(err));
	return ino;
}

/* A file of len bytes (one slice) named name in parent. */
static uint64_t mkfile(struct meta *m, uint64_t parent, const char *name,
		       uint32_t len)
{
	uint64_t ino = mk(m, parent, name, META_FILE), id;
	struct meta_chunk_slice s = {0};

	if (!len)
		return ino;
	cr_assert_eq(meta_new_slice_id(m, &id), 0);
	s.s = (struct meta_slice){.id = id, .size = len, .len = len};
	cr_assert_eq(meta_write(m, ino, &s, 1, NULL), 0);
	return ino;
}

static struct meta_attr attr(struct meta *m, uint64_t ino)
{
	struct meta_attr a;
	cr_assert_eq(meta_getattr(m, ino, &a), 0);
	return a;
}

/* The one entry of the trash that holds ino. */
static struct meta_trash_entry *find(struct meta_trash_entry *e, size_t n,
				     uint64_t ino)
{
	for (size_t i = 0; i < n; i++)
		if (e[i].ino == ino)
			return &e[i];
	return NULL;
}

Test(trash, unlink_goes_to_trash)
{
	struct meta *m = fresh(1);
	struct meta_trash_entry *e;
	struct meta_trash_usage u;
	struct meta_usage mu;
	uint64_t d = mk(m, META_ROOT_INO, "d", META_DIR);
	uint64_t f = mkfile(m, d, "f", 5000), trashed = 0, t;
	size_t n;

	cr_assert_eq(meta_unlink_trashed(m, d, "f", &trashed), 0);
	cr_assert_eq(trashed, f);
	cr_assert_eq(meta_lookup(m, d, "f", NULL, NULL), ENOENT);
	cr_assert_eq(attr(m, f).nlink, 1, "the trash's name counts");
	cr_assert_eq(delfiles(), 0, "nothing freed");
	cr_assert_eq(meta_usage(m, &mu), 0);
	cr_assert_eq(mu.used_bytes, 5000, "the trash counts as used");
	cr_assert_eq(meta_trash_usage(m, &u), 0);
	cr_assert_eq(u.bytes, 5000);
	cr_assert_eq(u.entries, 1);

	/* .trash at the root, root's, 0700, and one hour directory of now */
	cr_assert_eq(meta_lookup(m, META_ROOT_INO, META_TRASH, &t, NULL), 0);
	struct meta_attr ta = attr(m, t);
	cr_assert_eq(ta.mode, 0700);
	cr_assert_eq(ta.uid, 0);
	cr_assert_eq(meta_trash_list(m, &e, &n), 0);
	cr_assert_eq(n, 1);
	cr_assert_eq(e[0].ino, f);
	cr_assert_eq(e[0].parent, d);
	cr_assert_str_eq(e[0].orig, "f");
	char want[64];
	snprintf(want, sizeof want, "%" PRIu64 "-%" PRIu64 "-f", d, f);
	cr_assert_str_eq(e[0].name, want);
	int64_t start = meta_trash_hour_start(e[0].hour), now = time(NULL);
	cr_assert(start <= now && now < start + 3600 + 5, "hour %s", e[0].hour);
	cr_assert_eq(e[0].attr.length, 5000);
	meta_trash_entries_free(e, n);
	meta_close(m);
}

Test(trash, off_frees_at_once)
{
	struct meta *m = fresh(0);
	uint64_t f = mkfile(m, META_ROOT_INO, "f", 100), trashed = 1, t = 9;

	cr_assert_eq(meta_unlink_trashed(m, META_ROOT_INO, "f", &trashed), 0);
	cr_assert_eq(trashed, 0);
	cr_assert_eq(meta_getattr(m, f, &(struct meta_attr){0}), ENOENT);
	cr_assert_eq(delfiles(), 1);
	cr_assert_eq(meta_trash_ino(m, &t), 0);
	cr_assert_eq(t, 0, "no trash made while it is off");
	meta_close(m);
}

/* The trash's bytes and the entry's size, in one figure each. */
static void trash_bytes_eq(struct meta *m, uint64_t ino, uint64_t want)
{
	struct meta_trash_entry *l, *e;
	struct meta_trash_usage u;
	size_t n;

	cr_assert_eq(meta_trash_usage(m, &u), 0);
	cr_assert_eq(u.bytes, want,
		     "the trash counts %" PRIu64 " bytes, "
		     "want %" PRIu64,
		     u.bytes, want);
	cr_assert_eq(meta_trash_list(m, &l, &n), 0);
	cr_assert_not_null(e = find(l, n, ino));
	cr_assert_eq(e->attr.stored, want);
	meta_trash_entries_free(l, n);
}

/* Both reads of a file's attributes that open it tell the trash's hour
 * directory that holds it: 0 before, the entry's hour directory after
 * its removal, 0 again once restored (the client's close-to-open). */
Test(trash, open_tells_the_trash_dir)
{
	struct meta *m = fresh(1);
	uint64_t d = mk(m, META_ROOT_INO, "d", META_DIR), f, t = 7;
	struct meta_trash_entry *l;
	struct meta_attr a;
	size_t n;

	f = mkfile(m, d, "f", 1000);
	cr_assert_eq(meta_file_open(m, f, &a, &t), 0);
	cr_assert_eq(t, 0);
	t = 7;
	cr_assert_eq(meta_getattr_trash(m, f, &a, &t), 0);
	cr_assert_eq(t, 0);
	cr_assert_eq(meta_unlink(m, d, "f"), 0);
	cr_assert_eq(meta_trash_list(m, &l, &n), 0);
	cr_assert_eq(n, 1);
	cr_assert_eq(meta_file_open(m, f, &a, &t), 0);
	cr_assert_eq(t, l[0].hour_ino);
	cr_assert_eq(a.nlink, 1);
	t = 0;
	cr_assert_eq(meta_getattr_trash(m, f, &a, &t), 0);
	cr_assert_eq(t, l[0].hour_ino);
	cr_assert_eq(meta_trash_restore(m, l[0].hour_ino, l[0].name, d, "g"),
		     0);
	meta_trash_entries_free(l, n);
	cr_assert_eq(meta_getattr_trash(m, f, &a, &t), 0);
	cr_assert_eq(t, 0);
	cr_assert_eq(meta_getattr_trash(m, f + 1000, &a, &t), ENOENT);
	meta_close(m);
}

/* A file removed (by another client) while open here: its writes and
 * truncates while it is in the trash change the trash's bytes as they
 * change the file's, so that the entry's size and the figure agree. */
Test(trash, writes_to_a_removed_file)
{
	struct meta *m = fresh(1), *o = testvol_open(DB);
	uint64_t d = mk(m, META_ROOT_INO, "d", META_DIR), f, id;
	struct meta_trash_entry *l;
	struct meta_trash_usage u;
	struct meta_chunk_slice s = {0};
	struct meta_attr a;
	size_t n;

	cr_assert_eq(meta_session_open(m, "/mnt/t"), 0); /* opens count */
	f = mkfile(m, d, "f", 1000);
	cr_assert_eq(meta_file_open(m, f, NULL, NULL), 0);
	cr_assert_eq(meta_unlink(o, d, "f"), 0);
	trash_bytes_eq(m, f, 1000);
	cr_assert_eq(meta_new_slice_id(m, &id), 0);
	s.s = (struct meta_slice){
	    .id = id, .size = 3000, .len = 3000, .pos = 1000};
	cr_assert_eq(meta_write(m, f, &s, 1, NULL), 0);
	trash_bytes_eq(m, f, 4000);
	cr_assert_eq(meta_truncate(m, f, 500, &a), 0);
	trash_bytes_eq(m, f, 500);
	cr_assert_eq(meta_fallocate(m, f, 0, 500, 100, &a), 0);
	trash_bytes_eq(m, f, 600);
	/* restored: out of the trash, and its writes with it */
	cr_assert_eq(meta_trash_list(m, &l, &n), 0);
	cr_assert_eq(n, 1);
	cr_assert_eq(meta_trash_restore(o, l[0].hour_ino, l[0].name, d, "f"),
		     0);
	meta_trash_entries_free(l, n);
	cr_assert_eq(meta_truncate(m, f, 0, &a), 0);
	cr_assert_eq(meta_trash_usage(m, &u), 0);
	cr_assert_eq(u.bytes + u.entries, 0);
	cr_assert_eq(rint_("EXISTS %s", "trashbytes"), 0);
	cr_assert_eq(meta_file_close(m, f), 0);
	meta_close(o);
	meta_close(m);
}

Test(trash, hard_links_lose_a_name)
{
	struct meta *m = fresh(1);
	uint64_t f = mkfile(m, META_ROOT_INO, "a", 10), trashed = 1;
	struct meta_trash_usage u;

	cr_assert_eq(meta_link(m, f, META_ROOT_INO, "b", NULL), 0);
	cr_assert_eq(meta_unlink_trashed(m, META_ROOT_INO, "a", &trashed), 0);
	cr_assert_eq(trashed, 0);
	cr_assert_eq(attr(m, f).nlink, 1);
	cr_assert_eq(meta_trash_usage(m, &u), 0);
	cr_assert_eq(u.entries, 0);
	/* the last one goes to the trash */
	cr_assert_eq(meta_unlink_trashed(m, META_ROOT_INO, "b", &trashed), 0);
	cr_assert_eq(trashed, f);
	meta_close(m);
}

Test(trash, rename_over_and_rmdir)
{
	struct meta *m = fresh(1);
	uint64_t old = mkfile(m, META_ROOT_INO, "x", 300);
	uint64_t neu = mkfile(m, META_ROOT_INO, "x.new", 7), trashed = 0;
	uint64_t d = mk(m, META_ROOT_INO, "d", META_DIR);
	uint64_t e = mk(m, META_ROOT_INO, "e", META_DIR), t;
	struct meta_trash_entry *l;
	size_t n;

	cr_assert_eq(meta_rename_trashed(m, META_ROOT_INO, "x.new",
					 META_ROOT_INO, "x", 0, &trashed),
		     0);
	cr_assert_eq(trashed, old);
	uint64_t now_x;
	cr_assert_eq(meta_lookup(m, META_ROOT_INO, "x", &now_x, NULL), 0);
	cr_assert_eq(now_x, neu);
	/* an empty directory removed, and one renamed over */
	cr_assert_eq(meta_rmdir(m, META_ROOT_INO, "d"), 0);
	cr_assert_eq(meta_rename(m, META_ROOT_INO, "x", META_ROOT_INO, "y", 0),
		     0);
	uint64_t f = mk(m, META_ROOT_INO, "g", META_DIR);
	cr_assert_eq(meta_rename(m, META_ROOT_INO, "g", META_ROOT_INO, "e", 0),
		     0);
	cr_assert_eq(meta_trash_list(m, &l, &n), 0);
	cr_assert_eq(n, 3);
	cr_assert(find(l, n, old) && find(l, n, d) && find(l, n, e));
	cr_assert_eq(attr(m, d).parent, find(l, n, d)->hour_ino);
	cr_assert_eq(attr(m, find(l, n, d)->hour_ino).nlink, 4,
		     "two directories in the hour");
	meta_trash_entries_free(l, n);
	/* the root: its own 2, the trash, e (now f) */
	cr_assert_eq(meta_trash_ino(m, &t), 0);
	cr_assert_eq(attr(m, META_ROOT_INO).nlink, 4);
	cr_assert_eq(attr(m, f).parent, META_ROOT_INO);
	meta_close(m);
}

Test(trash, restore)
{
	struct meta *m = fresh(1);
	uint64_t d = mk(m, META_ROOT_INO, "d", META_DIR);
	uint64_t f = mkfile(m, d, "f", 42);
	struct meta_trash_entry *l;
	struct meta_trash_usage u;
	size_t n;

	cr_assert_eq(meta_unlink(m, d, "f"), 0);
	cr_assert_eq(meta_rmdir(m, META_ROOT_INO, "d"), 0);
	cr_assert_eq(meta_trash_list(m, &l, &n), 0);
	cr_assert_eq(n, 2);
	struct meta_trash_entry *ed = find(l, n, d), *ef = find(l, n, f);
	/* the file's directory is in the trash: restore it first */
	cr_assert_eq(
	    meta_trash_restore(m, ef->hour_ino, ef->name, ef->parent, ef->orig),
	    EPERM);
	cr_assert_eq(
	    meta_trash_restore(m, ed->hour_ino, ed->name, ed->parent, ed->orig),
	    0);
	cr_assert_eq(attr(m, d).parent, META_ROOT_INO);
	cr_assert_eq(
	    meta_trash_restore(m, ef->hour_ino, ef->name, ef->parent, ef->orig),
	    0);
	uint64_t got;
	cr_assert_eq(meta_lookup(m, d, "f", &got, NULL), 0);
	cr_assert_eq(got, f);
	cr_assert_eq(attr(m, f).nlink, 1);
	cr_assert_eq(meta_trash_usage(m, &u), 0);
	cr_assert_eq(u.entries, 0);
	cr_assert_eq(u.bytes, 0);
	/* gone from the trash: a second restore finds nothing */
	cr_assert_eq(
	    meta_trash_restore(m, ef->hour_ino, ef->name, ef->parent, ef->orig),
	    ENOENT);
	meta_trash_entries_free(l, n);

	/* a taken name is refused, another one is fine */
	cr_assert_eq(meta_unlink(m, d, "f"), 0);
	mkfile(m, d, "f", 1);
	cr_assert_eq(meta_trash_list(m, &l, &n), 0);
	cr_assert_eq(n, 1);
	cr_assert_eq(meta_trash_restore(m, l[0].hour_ino, l[0].name, d, "f"),
		     EEXIST);
	cr_assert_eq(meta_trash_restore(m, l[0].hour_ino, l[0].name, d, "f2"),
		     0);
	meta_trash_entries_free(l, n);
	meta_close(m);
}

Test(trash, purge_frees)
{
	struct meta *m = fresh(1);
	struct meta_trash_purged p;
	struct meta_trash_usage u;
	struct meta_usage mu;
	struct meta_slice dead[8];
	uint64_t d = mk(m, META_ROOT_INO, "d", META_DIR), t;
	size_t n;
	int ran;

	mkfile(m, d, "a", 1000);
	mkfile(m, d, "b", 2000);
	cr_assert_eq(meta_unlink(m, d, "a"), 0);
	cr_assert_eq(meta_unlink(m, d, "b"), 0);
	cr_assert_eq(meta_rmdir(m, META_ROOT_INO, "d"), 0);
	/* not old enough */
	cr_assert_eq(meta_trash_purge(m, time(NULL) - 86400, &p), 0);
	cr_assert_eq(p.entries, 0);
	cr_assert_eq(meta_trash_purge_due(m, 60, 0, &ran, &p), 0);
	cr_assert_eq(ran, 1);
	cr_assert_eq(p.entries, 0, "younger than a day");
	/* another client's turn is taken for the period */
	cr_assert_eq(meta_trash_purge_due(m, 60, 2 * 86400, &ran, &p), 0);
	cr_assert_eq(ran, 0);
	cr_assert_eq(delfiles(), 0);
	cr_assert_eq(meta_trash_purge(m, INT64_MAX, &p), 0);
	cr_assert_eq(p.entries, 3);
	cr_assert_eq(p.hours, 1);
	cr_assert_eq(delfiles(), 2, "the files' data waits for reclamation");
	cr_assert_eq(meta_reclaim(m, dead, 8, &n), 0);
	cr_assert_eq(n, 2, "both slices dead");
	cr_assert_eq(meta_usage(m, &mu), 0);
	cr_assert_eq(mu.used_bytes, 0);
	cr_assert_eq(meta_trash_usage(m, &u), 0);
	cr_assert_eq(u.entries + u.bytes, 0);
	/* the trash stays, empty */
	cr_assert_eq(meta_trash_ino(m, &t), 0);
	cr_assert_eq(attr(m, t).nlink, 2);
	cr_assert_eq(rint_("EXISTS %s", "trashcount"), 0);
	meta_close(m);
}

Test(trash, rules)
{
	struct meta *m = fresh(1);
	uint64_t t, h, f = mkfile(m, META_ROOT_INO, "f", 10), x;
	struct meta_trash_entry *l;
	size_t n;

	/* the name is reserved at the root only */
	cr_assert_eq(meta_mknod(m, META_ROOT_INO, META_TRASH, META_DIR, 0755, 0,
				0, 0, NULL, &x, NULL),
		     EINVAL);
	uint64_t sub = mk(m, META_ROOT_INO, "sub", META_DIR);
	mk(m, sub, META_TRASH, META_DIR);
	cr_assert_eq(meta_unlink(m, META_ROOT_INO, "f"), 0);
	cr_assert_eq(meta_trash_ino(m, &t), 0);
	cr_assert_eq(meta_trash_list(m, &l, &n), 0);
	h = l[0].hour_ino;
	/* nothing is made, linked or renamed into it */
	cr_assert_eq(
	    meta_mknod(m, t, "x", META_FILE, 0644, 0, 0, 0, NULL, &x, NULL),
	    EPERM);
	cr_assert_eq(
	    meta_mknod(m, h, "x", META_FILE, 0644, 0, 0, 0, NULL, &x, NULL),
	    EPERM);
	uint64_t g = mkfile(m, META_ROOT_INO, "g", 1);
	cr_assert_eq(meta_link(m, g, h, "g", NULL), EPERM);
	cr_assert_eq(meta_rename(m, META_ROOT_INO, "g", h, "g", 0), EPERM);
	cr_assert_eq(
	    meta_rename(m, META_ROOT_INO, "g", META_ROOT_INO, META_TRASH, 0),
	    EINVAL);
	cr_assert_eq(meta_snapshot(m, NULL, g, h, "g", NULL), EPERM);
	cr_assert_eq(meta_snapshot(m, NULL, sub, t, "s", NULL), EPERM);
	/* the trash and its hours stay */
	cr_assert_eq(meta_rmdir(m, META_ROOT_INO, META_TRASH), EPERM);
	cr_assert_eq(
	    meta_rename(m, META_ROOT_INO, META_TRASH, META_ROOT_INO, "t2", 0),
	    EPERM);
	cr_assert_eq(meta_rename(m, t, l[0].hour, META_ROOT_INO, "h2", 0),
		     EPERM);
	cr_assert_eq(meta_rmdir(m, t, l[0].hour), ENOTEMPTY);
	struct meta_attr in = {.mode = 0777};
	cr_assert_eq(meta_setattr(m, t, META_SET_MODE, &in, NULL), EPERM);
	/* deleting inside the trash is final */
	cr_assert_eq(meta_unlink(m, h, l[0].name), 0);
	cr_assert_eq(meta_getattr(m, f, &(struct meta_attr){0}), ENOENT);
	cr_assert_eq(delfiles(), 1);
	/* an hour emptied by hand can go */
	cr_assert_eq(meta_rmdir(m, t, l[0].hour), 0);
	meta_trash_entries_free(l, n);
	meta_close(m);
}

Test(trash, long_name)
{
	struct meta *m = fresh(1);
	char name[META_NAME_MAX + 1];
	struct meta_trash_entry *l;
	size_t n;

	/* 2-byte characters, so that the cut lands inside one */
	for (size_t i = 0; i + 1 < sizeof name; i += 2)
		memcpy(name + i, "\xc3\xa9", 2);
	name[META_NAME_MAX - 1] = 'x';
	name[META_NAME_MAX] = '\0';
	uint64_t f = mkfile(m, META_ROOT_INO, name, 3);
	cr_assert_eq(meta_unlink(m, META_ROOT_INO, name), 0);
	cr_assert_eq(meta_trash_list(m, &l, &n), 0);
	cr_assert_eq(n, 1);
	cr_assert_leq(strlen(l[0].name), META_NAME_MAX);
	cr_assert_str_eq(l[0].orig, name, "the whole name is kept");
	/* the cut name ends on a whole character */
	size_t k = strlen(l[0].name);
	cr_assert_eq((unsigned char)l[0].name[k - 1], 0xa9);
	cr_assert_eq(meta_trash_restore(m, l[0].hour_ino, l[0].name,
					l[0].parent, l[0].orig),
		     0);
	uint64_t got;
	cr_assert_eq(meta_lookup(m, META_ROOT_INO, name, &got, NULL), 0);
	cr_assert_eq(got, f);
	char tn[32];
	snprintf(tn, sizeof tn, "tn%" PRIu64, l[0].hour_ino);
	cr_assert_eq(rint_("EXISTS %s", tn), 0, "the long name went along");
	meta_trash_entries_free(l, n);
	meta_close(m);
}

Test(trash, setting_changes)
{
	struct meta *m = fresh(0);
	struct meta_volume v;
	uint64_t trashed;

	cr_assert_eq(meta_volume_set(m, "trash_days", 3), 0);
	cr_assert_eq(meta_load_volume(m, &v), 0);
	cr_assert_eq(v.trash_days, 3);
	cr_assert_eq(meta_volume_set(m, "capacity", 3), EINVAL);
	uint64_t f = mkfile(m, META_ROOT_INO, "f", 1);
	cr_assert_eq(meta_unlink_trashed(m, META_ROOT_INO, "f", &trashed), 0);
	cr_assert_eq(trashed, f, "seen at once by the scripts");
	meta_close(m);
}

Test(trash, hour_names)
{
	cr_assert_eq(meta_trash_hour_start("1970-01-01-01"), 3600);
	cr_assert_eq(meta_trash_hour_start("2024-02-29-23"), 1709247600);
	cr_assert_eq(meta_trash_hour_start("2024-02-29-24"), -1);
	cr_assert_eq(meta_trash_hour_start("2024-02-29"), -1);
	cr_assert_eq(meta_trash_hour_start("2024-02-29-2x"), -1);
}

/* The trash is no part of the root's tree: a version of the root leaves
 * it out, and a restore of the root leaves it where it is, working. */
Test(trash, version_of_root)
{
	struct meta *m = fresh(1);
	uint64_t d = mk(m, META_ROOT_INO, "d", META_DIR), t, t2, v, x;
	uint64_t f = mkfile(m, d, "f", 100), trashed;
	struct meta_trash_entry *l;
	struct meta_trash_usage u;
	size_t n;

	mkfile(m, META_ROOT_INO, "old", 10);
	cr_assert_eq(meta_unlink(m, META_ROOT_INO, "old"), 0);
	cr_assert_eq(meta_trash_ino(m, &t), 0);
	cr_assert_eq(
	    meta_version_create(m, NULL, META_ROOT_INO, "v1", NULL, NULL), 0);
	cr_assert_eq(meta_lookup(m, META_ROOT_INO, META_VERSIONS, &v, NULL), 0);
	cr_assert_eq(meta_lookup(m, v, "v1", &v, NULL), 0);
	cr_expect_eq(meta_lookup(m, v, META_TRASH, &x, NULL), ENOENT,
		     "the version holds the trash");
	cr_expect_eq(meta_lookup(m, v, "d", &x, NULL), 0);

	mkfile(m, d, "g", 5);
	cr_assert_eq(
	    meta_version_restore(m, NULL, META_ROOT_INO, "v1", "before"), 0);
	cr_expect_eq(meta_lookup(m, d, "g", &x, NULL), ENOENT);
	cr_assert_eq(meta_trash_ino(m, &t2), 0);
	cr_expect_eq(t2, t, "the trash key moved");
	cr_assert_eq(meta_lookup(m, META_ROOT_INO, META_TRASH, &x, NULL), 0);
	cr_expect_eq(x, t, "/.trash is not the trash");
	cr_expect_eq(attr(m, t).parent, META_ROOT_INO);
	cr_assert_eq(meta_trash_list(m, &l, &n), 0);
	cr_expect_eq(n, 1, "what the trash held");
	meta_trash_entries_free(l, n);
	/* removals still go there */
	cr_assert_eq(meta_lookup(m, META_ROOT_INO, "d", &d, NULL), 0);
	cr_assert_eq(meta_lookup(m, d, "f", &f, NULL), 0);
	cr_assert_eq(meta_unlink_trashed(m, d, "f", &trashed), 0);
	cr_expect_eq(trashed, f, "an rm after the restore was final");
	cr_assert_eq(meta_trash_usage(m, &u), 0);
	cr_expect_eq(u.entries, 2);
	meta_close(m);
}

/* A version of the root made when versions copied the trash holds a
 * plain copy of it: a restore keeps the real trash and drops the copy. */
Test(trash, restore_old_version_with_trash)
{
	struct meta *m = fresh(1);
	uint64_t t, t2, v, x;
	struct meta_trash_entry *l;
	redisReply *r;
	size_t n;

	mkfile(m, META_ROOT_INO, "old", 10);
	cr_assert_eq(meta_unlink(m, META_ROOT_INO, "old"), 0);
	cr_assert_eq(meta_trash_ino(m, &t), 0);
	uint64_t c = mk(m, META_ROOT_INO, "copy", META_DIR);
	mkfile(m, c, "in-the-copy", 7);
	cr_assert_eq(
	    meta_version_create(m, NULL, META_ROOT_INO, "v1", NULL, NULL), 0);
	cr_assert_eq(meta_lookup(m, META_ROOT_INO, META_VERSIONS, &v, NULL), 0);
	cr_assert_eq(meta_lookup(m, v, "v1", &v, NULL), 0);
	/* as an older engine left it: "copy" in the version named .trash */
	r = rcmd("HGET d%" PRIu64 " copy", v);
	cr_assert_eq(r->type, REDIS_REPLY_STRING);
	freeReplyObject(rcmd("HSET d%" PRIu64 " %s %b", v, META_TRASH, r->str,
			     (size_t)r->len));
	freeReplyObject(r);
	freeReplyObject(rcmd("HDEL d%" PRIu64 " copy", v));

	cr_assert_eq(
	    meta_version_restore(m, NULL, META_ROOT_INO, "v1", "before"), 0);
	cr_assert_eq(meta_trash_ino(m, &t2), 0);
	cr_expect_eq(t2, t);
	cr_assert_eq(meta_lookup(m, META_ROOT_INO, META_TRASH, &x, NULL), 0);
	cr_expect_eq(x, t, "the copy replaced the trash");
	cr_expect_eq(meta_lookup(m, META_ROOT_INO, "copy", &x, NULL), ENOENT);
	cr_assert_eq(meta_trash_list(m, &l, &n), 0);
	cr_expect_eq(n, 1);
	meta_trash_entries_free(l, n);
	cr_expect_eq(rint_("HLEN %s", "snapshots"), 0, "a tree left undropped");
	meta_close(m);
}

/* unlink and rename hand out a parent's attributes for the client to
 * answer with (meta_ns_after), but never those of a directory of the
 * trash, which other removals change besides */
Test(trash, no_attrs_handed_out_from_the_trash)
{
	struct meta *m = fresh(1);
	uint64_t d = mk(m, META_ROOT_INO, "d", META_DIR), t, h;
	struct meta_ns_after o;
	struct meta_trash_entry *e;
	size_t n;

	mkfile(m, d, "f", 10);
	mkfile(m, d, "g", 10);
	cr_assert_eq(meta_unlink_after(m, d, "f", &o), 0);
	cr_assert_neq(o.trashed, 0);
	cr_assert(o.have, "the parent's attributes, out of the trash");
	struct meta_attr da = attr(m, d);
	cr_expect(memcmp(&o.pa, &da, sizeof da) == 0);
	cr_assert_eq(meta_unlink_after(m, d, "g", &o), 0);
	cr_assert_eq(meta_trash_list(m, &e, &n), 0);
	cr_assert_eq(n, 2);
	cr_assert_eq(meta_lookup(m, META_ROOT_INO, META_TRASH, &t, NULL), 0);
	cr_assert_eq(meta_lookup(m, t, e[0].hour, &h, NULL), 0);
	/* a name leaves the trash by rename: flagged, as a directory move */
	cr_assert_eq(meta_rename_after(m, h, e[0].name, d, "back", 0, &o), 0);
	cr_expect(o.dirs, "a name out of the trash");
	/* a removal inside it is final, and hands out nothing */
	cr_assert_eq(meta_unlink_after(m, h, e[1].name, &o), 0);
	cr_expect_eq(o.have, 0);
	cr_expect_eq(o.trashed, 0);
	meta_trash_entries_free(e, n);
	meta_close(m);
}
