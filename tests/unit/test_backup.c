/*
 * test_backup.c - metadata backups as objects (fs/data/backup.h): a
 * stream laid down in parts and read back byte for byte, the newest
 * complete backup found, cut-short and damaged ones never read, pruning;
 * sealed backups: nothing in the clear but the key record, any change in
 * the store refused.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <utime.h>

#include "fs/data/backup.h"
#include "fs/store/crypt.h"
#include "fs/store/objstore.h"
#include "lib/errors.h"
#include "meta/meta_dump.h"
#include "meta/meta_volume.h"

static struct objstore *store;

static void setup(void)
{
	cr_assert_eq(objstore_open("mem://", NULL, &store), 0);
}

static void teardown(void)
{
	objstore_close(store);
}

TestSuite(backup, .init = setup, .fini = teardown);

/* Write len bytes of seed's pattern in writes of random sizes. */
static void write_stream(const char *name, uint64_t sid, size_t len,
			 unsigned seed, struct backup_info *info)
{
	struct backup_writer *w;
	cr_assert_eq(backup_begin(store, name, &w), 0);
	unsigned char buf[71000];
	srand(seed);
	for (size_t i = 0; i < sizeof buf; i++)
		buf[i] = (unsigned char)rand();
	size_t done = 0;
	while (done < len) {
		size_t k = 1 + (size_t)rand() % 69999;
		if (k > len - done)
			k = len - done;
		cr_assert_eq(backup_write(w, buf + done % 1000, k), 0);
		done += k;
	}
	memset(info, 0, sizeof *info);
	info->time = 1764612900;
	info->sid = sid;
	snprintf(info->host, sizeof info->host, "gpu-node-07");
	info->inodes = 42;
	info->seconds = 1.5;
	cr_assert_eq(backup_finish(w, info, 0), 0);
}

/* Read the whole backup back through reads of random sizes. */
static unsigned char *read_stream(const struct backup_info *b, size_t *len)
{
	struct backup_reader *r;
	cr_assert_eq(backup_open(store, b, &r), 0);
	size_t cap = 1 << 20, n = 0;
	unsigned char *out = malloc(cap);
	for (;;) {
		if (cap - n < 100000)
			out = realloc(out, cap *= 2);
		ssize_t k = backup_read(r, out + n, 1 + (size_t)rand() % 99999);
		cr_assert_geq(k, 0, "backup_read: %zd", k);
		if (k == 0)
			break;
		n += (size_t)k;
	}
	backup_close(r);
	*len = n;
	return out;
}

static void expect_stream(const unsigned char *got, size_t len, size_t want,
			  unsigned seed)
{
	unsigned char buf[71000];
	srand(seed);
	for (size_t i = 0; i < sizeof buf; i++)
		buf[i] = (unsigned char)rand();
	cr_assert_eq(len, want);
	/* the writer took buf + done % 1000 for each write: redo them */
	size_t done = 0;
	while (done < want) {
		size_t k = 1 + (size_t)rand() % 69999;
		if (k > want - done)
			k = want - done;
		cr_assert(memcmp(got + done, buf + done % 1000, k) == 0,
			  "bytes differ in [%zu, %zu)", done, done + k);
		done += k;
	}
}

Test(backup, round_trip_across_parts)
{
	/* 2.5 parts, and an exact multiple of the part size */
	size_t lens[] = {BACKUP_PART * 5 / 2, BACKUP_PART * 2, 1, 0};
	for (unsigned i = 0; i < 4; i++) {
		struct backup_info w, b;
		char name[BACKUP_NAME];
		backup_name(1764612900 + i, 12, name);
		write_stream(name, 12, lens[i], 7 + i, &w);
		cr_assert_eq(w.parts,
			     lens[i] ? (lens[i] + BACKUP_PART - 1) / BACKUP_PART
				     : 1);
		cr_assert_eq(backup_latest(store, &b), 0);
		cr_assert_str_eq(b.name, name);
		cr_assert_eq(b.bytes, lens[i]);
		cr_assert_eq(b.parts, w.parts);
		cr_assert_eq(b.sid, 12);
		cr_assert_eq(b.inodes, 42);
		cr_assert_str_eq(b.host, "gpu-node-07");
		size_t len;
		unsigned char *got = read_stream(&b, &len);
		expect_stream(got, len, lens[i], 7 + i);
		free(got);
	}
}

Test(backup, names_sort_by_time)
{
	char a[BACKUP_NAME], b[BACKUP_NAME];
	backup_name(1764612900, 3, a); /* 2025-12-01 18:15:00 UTC */
	cr_assert_str_eq(a, "20251201T181500Z-s3");
	backup_name(1764612900 + 3600, 1, b);
	cr_assert_lt(strcmp(a, b), 0);
}

Test(backup, cut_short_and_aborted_are_never_read)
{
	struct backup_info w, b;
	write_stream("20261201T100000Z-s1", 1, 1000, 1, &w);
	/* a writer that died after its first part: no manifest */
	struct backup_writer *wr;
	static char big[BACKUP_PART];
	cr_assert_eq(backup_begin(store, "20261201T110000Z-s2", &wr), 0);
	cr_assert_eq(backup_write(wr, big, sizeof big), 0);
	/* (never finished: its part stays, as after a crash) */
	/* an aborted one leaves nothing */
	struct backup_writer *ab;
	cr_assert_eq(backup_begin(store, "20261201T120000Z-s3", &ab), 0);
	cr_assert_eq(backup_write(ab, big, sizeof big), 0);
	cr_assert_eq(backup_finish(ab, &b, 1), 0);
	uint64_t size;
	cr_assert_eq(objstore_head(store,
				   BACKUP_PREFIX "20261201T120000Z-s3/p00000",
				   &size),
		     ENOENT);

	cr_assert_eq(backup_latest(store, &b), 0);
	cr_assert_str_eq(b.name, "20261201T100000Z-s1");
	size_t n;
	cr_assert_eq(backup_list(store, NULL, NULL, &n), 0);
	cr_assert_eq(n, 1);
	cr_assert_eq(backup_stat(store, "20261201T110000Z-s2", &b), ENOENT);
	free(wr); /* the writer of a "crashed" client: its buffer leaks */
}

Test(backup, damage_is_told)
{
	struct backup_info w, b;
	write_stream("20261201T100000Z-s1", 1, BACKUP_PART + 10, 1, &w);
	/* a manifest that is not one is skipped */
	cr_assert_eq(objstore_put(store,
				  BACKUP_PREFIX "20261201T130000Z-s9/done",
				  "{\"format\":\"other\"}", 18),
		     0);
	cr_assert_eq(backup_latest(store, &b), 0);
	cr_assert_str_eq(b.name, "20261201T100000Z-s1");
	cr_assert_eq(backup_stat(store, "20261201T130000Z-s9", &b), EINVAL);
	/* a missing part: EIO from the read, not a short stream */
	cr_assert_eq(
	    objstore_del(store, BACKUP_PREFIX "20261201T100000Z-s1/p00001"), 0);
	struct backup_reader *r;
	cr_assert_eq(backup_latest(store, &b), 0);
	cr_assert_eq(backup_open(store, &b, &r), 0);
	static char buf[BACKUP_PART];
	ssize_t k;
	while ((k = backup_read(r, buf, sizeof buf)) > 0)
		;
	cr_assert_eq(k, -EIO);
	backup_close(r);
	/* a part shorter than the manifest says */
	cr_assert_eq(objstore_put(store,
				  BACKUP_PREFIX "20261201T100000Z-s1/p00001",
				  "x", 1),
		     0);
	cr_assert_eq(backup_open(store, &b, &r), 0);
	while ((k = backup_read(r, buf, sizeof buf)) > 0)
		;
	cr_assert_eq(k, -EIO);
	backup_close(r);
}

Test(backup, prune_keeps_the_newest)
{
	struct backup_info w;
	char name[BACKUP_NAME];
	for (int i = 0; i < 5; i++) {
		backup_name(1764612900 + 3600 * i, 1, name);
		write_stream(name, 1, BACKUP_PART + 1, (unsigned)i, &w);
	}
	size_t n, gone;
	cr_assert_eq(backup_prune(store, 2, &gone), 0);
	cr_assert_eq(gone, 3);
	cr_assert_eq(backup_list(store, NULL, NULL, &n), 0);
	cr_assert_eq(n, 2);
	struct backup_info b;
	cr_assert_eq(backup_latest(store, &b), 0);
	backup_name(1764612900 + 3600 * 4, 1, name);
	cr_assert_str_eq(b.name, name);
	/* the pruned ones' parts are gone too */
	uint64_t size;
	backup_name(1764612900, 1, name);
	char key[128];
	snprintf(key, sizeof key, BACKUP_PREFIX "%s/p00001", name);
	cr_assert_eq(objstore_head(store, key, &size), ENOENT);
	/* pruning again changes nothing */
	cr_assert_eq(backup_prune(store, 2, &gone), 0);
	cr_assert_eq(gone, 0);
}

/* A cut-short backup older than a day goes; a young one (being written
 * now, maybe) stays. Needs real mtimes: a file:// store. */
Test(backup, prune_old_cut_short_only)
{
	char dir[] = "/tmp/granary-backup-XXXXXX", url[64];
	cr_assert_not_null(mkdtemp(dir));
	snprintf(url, sizeof url, "file://%s", dir);
	objstore_close(store);
	cr_assert_eq(objstore_open(url, NULL, &store), 0);
	cr_assert_eq(objstore_put(store,
				  BACKUP_PREFIX "20261101T000000Z-s1/p00000",
				  "old", 3),
		     0);
	cr_assert_eq(objstore_put(store,
				  BACKUP_PREFIX "20261201T000000Z-s2/p00000",
				  "new", 3),
		     0);
	char path[256];
	snprintf(path, sizeof path,
		 "%s/" BACKUP_PREFIX "20261101T000000Z-s1/p00000", dir);
	struct utimbuf ut = {.actime = time(NULL) - 2 * 86400,
			     .modtime = time(NULL) - 2 * 86400};
	cr_assert_eq(utime(path, &ut), 0);
	size_t gone;
	cr_assert_eq(backup_prune(store, 1, &gone), 0);
	cr_assert_eq(gone, 1);
	uint64_t size;
	cr_assert_eq(objstore_head(store,
				   BACKUP_PREFIX "20261101T000000Z-s1/p00000",
				   &size),
		     ENOENT);
	cr_assert_eq(objstore_head(store,
				   BACKUP_PREFIX "20261201T000000Z-s2/p00000",
				   &size),
		     0);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

/* ---- the claim (meta_dump.h) against a real redis-server ------------ */

#define DB 11

static struct meta *client(const char *mnt, int format)
{
	const char *u = getenv("GRANARY_TEST_REDIS");
	struct meta *m = NULL;
	char url[4200];
	if (!u || strncmp(u, "unix://", 7))
		cr_skip_test("GRANARY_TEST_REDIS unset (no redis to test on)");
	snprintf(url, sizeof url, "unix://%.*s?db=%d", (int)strcspn(u + 7, "?"),
		 u + 7, DB);
	cr_assert_eq(meta_open(url, NULL, &m), 0);
	if (format) {
		struct meta_volume v = {.block_size = 4 << 20};
		snprintf(v.name, sizeof v.name, "backup");
		snprintf(v.storage, sizeof v.storage, "mem://");
		cr_assert_eq(meta_format(m, &v, 1), 0);
	}
	cr_assert_eq(meta_session_open(m, mnt), 0);
	return m;
}

Test(backup, one_client_at_a_time_and_only_when_due)
{
	struct meta *a = client("/a", 1), *b = client("/b", 0);
	struct meta_backup last;
	int got;
	cr_assert_eq(meta_backup_last(a, &last), ENOENT);
	/* never backed up: due; a holds it, b does not get it */
	cr_assert_eq(meta_backup_claim(a, 3600, 60, 300, &got), 0);
	cr_assert_eq(got, 1);
	cr_assert_eq(meta_backup_claim(b, 3600, 60, 300, &got), 0);
	cr_assert_eq(got, 0);
	/* a fails: nobody gets it before the retry time */
	struct meta_backup f = {.failed = time(NULL)};
	cr_assert_eq(meta_backup_done(a, &f, "storing it: No space left"), 0);
	cr_assert_eq(meta_backup_claim(b, 3600, 60, 300, &got), 0);
	cr_assert_eq(got, 0);
	cr_assert_eq(meta_backup_last(b, &last), 0);
	cr_assert_str_eq(last.error, "storing it: No space left");
	cr_assert_eq(last.name[0], 0);
	/* retry 0: b gets it, succeeds; then nothing is due for an hour */
	cr_assert_eq(meta_backup_claim(b, 3600, 60, 0, &got), 0);
	cr_assert_eq(got, 1);
	struct meta_backup ok = {.time = time(NULL),
				 .sid = meta_session_id(b),
				 .bytes = 1234,
				 .inodes = 5,
				 .seconds = 0.25};
	snprintf(ok.name, sizeof ok.name, "20261201T181500Z-s2");
	snprintf(ok.host, sizeof ok.host, "node-b");
	cr_assert_eq(meta_backup_done(b, &ok, NULL), 0);
	cr_assert_eq(meta_backup_claim(a, 3600, 60, 0, &got), 0);
	cr_assert_eq(got, 0);
	cr_assert_eq(meta_backup_last(a, &last), 0);
	cr_assert_str_eq(last.name, "20261201T181500Z-s2");
	cr_assert_str_eq(last.host, "node-b");
	cr_assert_eq(last.bytes, 1234);
	cr_assert_eq(last.inodes, 5);
	cr_assert_eq(last.failed, 0, "a success clears the failure");
	cr_assert_eq(last.error[0], 0);
	/* an interval of 0 s: due again at once; a cut-short backup
	 * (done with NULL) only drops the claim */
	cr_assert_eq(meta_backup_claim(a, 0, 60, 0, &got), 0);
	cr_assert_eq(got, 1);
	cr_assert_eq(meta_backup_done(a, NULL, NULL), 0);
	cr_assert_eq(meta_backup_last(a, &last), 0);
	cr_assert_str_eq(last.name, "20261201T181500Z-s2");
	cr_assert_eq(meta_backup_claim(b, 0, 60, 0, &got), 0);
	cr_assert_eq(got, 1, "the claim was dropped");
	meta_close(a);
	meta_close(b);
}

/* ---- sealed backups (an encrypted volume's) ---------------------------- */

static const unsigned char VOLKEY[CRYPT_KEY_LEN] = {
    7,	1,  2,	3,  4,	5,  6,	7,  8,	9,  10, 11, 12, 13, 14, 15,
    16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31};
#define MARK "file-name-in-the-clear"

/* A stream of text that names MARK, sealed as backup name in sealed. */
static size_t write_sealed(struct objstore *sealed, const char *name, int abort)
{
	struct backup_key k = {"0c5e-uuid-of-the-volume",
			       "v1:scrypt:15:8:1:00:11:22:33"};
	struct backup_writer *w;
	struct backup_info info = {.time = 1764612900, .sid = 3};
	char line[64];
	size_t len = 0;
	cr_assert_eq(backup_begin_sealed(sealed, &k, name, &w), 0);
	for (int i = 0; i < 20000; i++) {
		int n = snprintf(line, sizeof line, "%d %s\n", i, MARK);
		cr_assert_eq(backup_write(w, line, (size_t)n), 0);
		len += (size_t)n;
	}
	cr_assert_eq(backup_finish(w, &info, abort), 0);
	return len;
}

static void *get_raw(struct objstore *s, const char *key, size_t *n)
{
	void *data = NULL;
	cr_assert_eq(objstore_get(s, key, 0, 0, &data, n), 0, "get %s", key);
	return data;
}

static void flip(struct objstore *s, const char *key, void **saved, size_t *n)
{
	unsigned char *d = get_raw(s, key, n);
	*saved = malloc(*n);
	memcpy(*saved, d, *n);
	d[*n / 2] ^= 1;
	cr_assert_eq(objstore_put(s, key, d, *n), 0);
	free(d);
}

/* the whole stream of backup name through s: its length, or -1 when a
 * read failed */
static ssize_t read_all(struct objstore *s, const char *name, char **out)
{
	struct backup_info b;
	struct backup_reader *r;
	size_t cap = 1 << 20, n = 0;
	cr_assert_eq(backup_stat(s, name, &b), 0);
	cr_assert_eq(backup_open(s, &b, &r), 0);
	*out = malloc(cap);
	for (;;) {
		ssize_t k = backup_read(r, *out + n, cap - n);
		if (k < 0) {
			backup_close(r);
			return -1;
		}
		if (k == 0)
			break;
		n += (size_t)k;
		cr_assert_lt(n, cap);
	}
	backup_close(r);
	return (ssize_t)n;
}

Test(backup, sealed_backups)
{
	struct objstore *sealed, *raw;
	unsigned char bkey[CRYPT_KEY_LEN], other[CRYPT_KEY_LEN];
	const char *n1 = "20261201T100000Z-s3", *n2 = "20261201T110000Z-s3";
	char *got;
	void *saved;
	size_t n;

	cr_assert_eq(crypt_key_derive(VOLKEY, "backup", bkey), 0);
	cr_assert_eq(crypt_key_derive(VOLKEY, "other", other), 0);
	cr_assert(memcmp(bkey, VOLKEY, sizeof bkey), "a key of its own");
	cr_assert(memcmp(bkey, other, sizeof bkey));
	cr_assert_eq(objstore_open("mem://", NULL, &raw), 0);
	cr_assert_eq(objstore_crypt_open(raw, bkey, &sealed), 0);
	raw = objstore_crypt_inner(sealed);
	cr_assert_not_null(raw);
	cr_assert_null(objstore_crypt_inner(raw));

	/* a plain store cannot begin a sealed backup */
	struct backup_key k0 = {"u", "r"};
	struct backup_writer *w0;
	cr_assert_eq(backup_begin_sealed(raw, &k0, n1, &w0), EINVAL);

	size_t len = write_sealed(sealed, n1, 0);
	cr_assert_eq(write_sealed(sealed, n2, 0), len);

	/* in the clear: the key record, and nothing else */
	struct backup_key k;
	cr_assert_eq(backup_key_get(raw, n1, &k), 0);
	cr_assert_str_eq(k.uuid, "0c5e-uuid-of-the-volume");
	cr_assert_str_eq(k.record, "v1:scrypt:15:8:1:00:11:22:33");
	char key[128];
	snprintf(key, sizeof key, BACKUP_PREFIX "%s/p00000", n1);
	unsigned char *p = get_raw(raw, key, &n);
	cr_assert(objstore_crypt_sealed(p, n));
	cr_assert_null(memmem(p, n, MARK, strlen(MARK)),
		       "the stream is sealed");
	free(p);
	snprintf(key, sizeof key, BACKUP_PREFIX "%s/done", n1);
	p = get_raw(raw, key, &n);
	cr_assert_null(memmem(p, n, "granary-backup", 14), "manifest sealed");
	free(p);
	/* names from a listing alone; the manifest needs the key */
	char newest[BACKUP_NAME];
	size_t count = 0;
	cr_assert_eq(backup_newest(raw, newest), 0);
	cr_assert_str_eq(newest, n2);
	cr_assert_eq(backup_names(raw, NULL, NULL, &count), 0);
	cr_assert_eq(count, 2);
	struct backup_info b;
	cr_assert_eq(backup_stat(raw, n1, &b), EINVAL);
	cr_assert_eq(backup_key_get(raw, "20261201T120000Z-s3", &k), ENOENT);

	/* read back whole through the sealing store */
	cr_assert_eq(read_all(sealed, n1, &got), (ssize_t)len);
	cr_assert(memmem(got, len, "19999 " MARK "\n", 6 + strlen(MARK) + 1));
	free(got);

	/* a part altered: the read fails, never other bytes */
	snprintf(key, sizeof key, BACKUP_PREFIX "%s/p00000", n1);
	flip(raw, key, &saved, &n);
	cr_assert_eq(read_all(sealed, n1, &got), -1);
	free(got);
	cr_assert_eq(objstore_put(raw, key, saved, n), 0);
	free(saved);
	/* another backup's part in its place: bound to its name */
	char key2[128];
	snprintf(key2, sizeof key2, BACKUP_PREFIX "%s/p00000", n2);
	p = get_raw(raw, key2, &n);
	void *mine = get_raw(raw, key, &n);
	cr_assert_eq(objstore_put(raw, key, p, n), 0);
	cr_assert_eq(read_all(sealed, n1, &got), -1);
	free(got);
	cr_assert_eq(objstore_put(raw, key, mine, n), 0);
	free(mine);
	free(p);
	/* the manifest altered */
	snprintf(key, sizeof key, BACKUP_PREFIX "%s/done", n1);
	flip(raw, key, &saved, &n);
	cr_assert_eq(backup_stat(sealed, n1, &b), CRYPT_EAUTH);
	cr_assert_eq(objstore_put(raw, key, saved, n), 0);
	free(saved);
	cr_assert_eq(read_all(sealed, n1, &got), (ssize_t)len, "restored");
	free(got);

	/* a backup cut short takes its key object with it */
	write_sealed(sealed, "20261201T120000Z-s3", 1);
	cr_assert_eq(backup_key_get(raw, "20261201T120000Z-s3", &k), ENOENT);
	cr_assert_eq(backup_names(raw, NULL, NULL, &count), 0);
	cr_assert_eq(count, 2);
	/* pruning goes through the sealing store: key objects too */
	size_t gone = 0;
	cr_assert_eq(backup_prune(sealed, 1, &gone), 0);
	cr_assert_eq(gone, 1);
	cr_assert_eq(backup_key_get(raw, n1, &k), ENOENT);
	cr_assert_eq(backup_key_get(raw, n2, &k), 0);
	objstore_close(sealed);
}
