/*
 * test_crypt.c - encryption at rest (fs/store/crypt.h): the volume key's
 * record, and the sealing store over mem:// checked against plain bytes
 * kept aside, with the sealed objects in the inner store damaged,
 * swapped and cut behind its back.
 */
#include "fs/store/crypt.h"
#include "fs/store/objstore.h"
#include "fs/store/owner.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHUNK (64u << 10) /* objstore_crypt.c's */
#define HDR   38
#define TAG   16

static const char UUID[] = "0f0e0d0c-0b0a-4908-8706-050403020100";
static const char PASS[] = "correct horse battery staple";

static uint64_t rnd_next(uint64_t *st)
{
	uint64_t z = (*st += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static unsigned char *pattern(size_t n, uint64_t seed)
{
	unsigned char *p = malloc(n ? n : 1);
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(rnd_next(&seed) >> 24);
	return p;
}

/* ---- records ---- */

Test(crypt, record_round_trip)
{
	char rec[CRYPT_RECORD_MAX], rec2[CRYPT_RECORD_MAX];
	unsigned char key[CRYPT_KEY_LEN], got[CRYPT_KEY_LEN];

	cr_assert_eq(crypt_record_new(PASS, strlen(PASS), UUID, rec, key), 0);
	cr_assert_lt(strlen(rec), CRYPT_RECORD_MAX);
	cr_assert(!strncmp(rec, "v1:scrypt:", 10), "%s", rec);
	for (const char *c = rec; *c; c++)
		cr_assert(*c > ' ' && *c < 127);
	cr_assert_eq(crypt_record_open(rec, PASS, strlen(PASS), UUID, got), 0);
	cr_assert_eq(memcmp(key, got, sizeof(key)), 0);

	/* rewrapped: the new secret opens the same key, the old does not */
	cr_assert_eq(crypt_record_rewrap(rec, PASS, strlen(PASS), "new secret!",
					 11, UUID, rec2),
		     0);
	cr_assert(strcmp(rec, rec2));
	memset(got, 0, sizeof(got));
	cr_assert_eq(crypt_record_open(rec2, "new secret!", 11, UUID, got), 0);
	cr_assert_eq(memcmp(key, got, sizeof(key)), 0);
	cr_assert_eq(crypt_record_open(rec2, PASS, strlen(PASS), UUID, got),
		     CRYPT_EKEY);
	/* a rewrap with a wrong old secret changes nothing */
	cr_assert_eq(crypt_record_rewrap(rec, "not the one", 11, "x23456789",
					 9, UUID, rec2),
		     CRYPT_EKEY);
}

Test(crypt, record_wrong_secret_or_volume)
{
	char rec[CRYPT_RECORD_MAX];
	unsigned char key[CRYPT_KEY_LEN], got[CRYPT_KEY_LEN];

	cr_assert_eq(crypt_record_new(PASS, strlen(PASS), UUID, rec, key), 0);
	cr_assert_eq(crypt_record_open(rec, "wrong passphrase", 16, UUID, got),
		     CRYPT_EKEY);
	cr_assert_eq(crypt_record_open(rec, PASS, strlen(PASS) - 1, UUID, got),
		     CRYPT_EKEY);
	cr_assert_eq(crypt_record_open(rec, PASS, strlen(PASS),
				       "11111111-2222-4333-8444-555555555555",
				       got),
		     CRYPT_EKEY);
	/* not a record at all */
	cr_assert_eq(crypt_record_open("v1:scrypt:15:8:1:zz", PASS,
				       strlen(PASS), UUID, got),
		     EINVAL);
	cr_assert_eq(crypt_record_open("", PASS, strlen(PASS), UUID, got),
		     EINVAL);
	/* a record that would make us spend a lot before failing */
	char big[CRYPT_RECORD_MAX];
	snprintf(big, sizeof(big), "v1:scrypt:30%s", rec + 12);
	cr_assert_eq(crypt_record_open(big, PASS, strlen(PASS), UUID, got),
		     EINVAL);
}

Test(crypt, secret_sources)
{
	void *s;
	size_t n;
	char path[] = "/tmp/granary-test-crypt-XXXXXX";
	int fd = mkstemp(path);

	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, "file secret 1\n", 14), 14);
	close(fd);
	unsetenv("GRANARY_ENCRYPT_KEY_FILE");
	unsetenv("GRANARY_ENCRYPT_PASSPHRASE");
	cr_assert_eq(crypt_secret_load(NULL, &s, &n), CRYPT_ENOKEY);
	cr_assert_eq(crypt_secret_load(path, &s, &n), 0);
	cr_assert_eq(n, 13); /* the newline dropped */
	cr_assert_eq(memcmp(s, "file secret 1", 13), 0);
	crypt_secret_free(s, n);
	setenv("GRANARY_ENCRYPT_PASSPHRASE", "from the environment", 1);
	cr_assert_eq(crypt_secret_load(NULL, &s, &n), 0);
	cr_assert_eq(n, 20);
	crypt_secret_free(s, n);
	setenv("GRANARY_ENCRYPT_KEY_FILE", path, 1); /* the file wins */
	cr_assert_eq(crypt_secret_load(NULL, &s, &n), 0);
	cr_assert_eq(n, 13);
	crypt_secret_free(s, n);
	unsetenv("GRANARY_ENCRYPT_KEY_FILE");
	setenv("GRANARY_ENCRYPT_PASSPHRASE", "short", 1);
	cr_assert_eq(crypt_secret_load(NULL, &s, &n), EINVAL);
	unsetenv("GRANARY_ENCRYPT_PASSPHRASE");
	cr_assert_eq(crypt_secret_load("/nonexistent/key", &s, &n), ENOENT);
	unlink(path);
}

/* ---- the sealing store ---- */

static struct objstore *inner, *cs;

static void open_stores(void)
{
	unsigned char key[CRYPT_KEY_LEN];
	static int n;
	char url[64];

	for (int i = 0; i < CRYPT_KEY_LEN; i++)
		key[i] = (unsigned char)(i * 7 + 1);
	snprintf(url, sizeof(url), "mem://crypt%d", n++);
	cr_assert_eq(objstore_open(url, NULL, &inner), 0);
	struct objstore *own;
	cr_assert_eq(objstore_open(url, NULL, &own), 0);
	cr_assert_eq(objstore_crypt_open(own, key, &cs), 0);
}

static void close_stores(void)
{
	objstore_close(cs);
	objstore_close(inner);
}

TestSuite(cstore, .init = open_stores, .fini = close_stores);

static void check_get(const char *key, const unsigned char *plain,
		      size_t size, uint64_t off, size_t len)
{
	void *d = NULL;
	size_t got = 99;
	int err = objstore_get(cs, key, off, len, &d, &got);
	cr_assert_eq(err, 0, "get %s %llu+%zu: %d", key,
		     (unsigned long long)off, len, err);
	size_t want = off >= size ? 0 : size - off;
	if (len && want > len)
		want = len;
	cr_assert_eq(got, want, "get %s %llu+%zu of %zu: got %zu", key,
		     (unsigned long long)off, len, size, got);
	if (want)
		cr_assert_eq(memcmp(d, plain + off, want), 0,
			     "get %s %llu+%zu: other bytes", key,
			     (unsigned long long)off, len);
	free(d);
}

Test(cstore, round_trip_sizes)
{
	static const size_t sizes[] = {0,	  1,	     CHUNK - 1, CHUNK,
				       CHUNK + 1, 5u << 20, 3 * CHUNK};
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];
		char key[32];
		uint64_t size, raw;
		snprintf(key, sizeof(key), "blocks/obj%zu", i);
		unsigned char *p = pattern(n, i + 1);
		cr_assert_eq(objstore_put(cs, key, p, n), 0);
		check_get(key, p, n, 0, 0);
		cr_assert_eq(objstore_head(cs, key, &size), 0);
		cr_assert_eq(size, n, "head of %zu: %llu", n,
			     (unsigned long long)size);
		/* stored sealed: bigger, and not the plain bytes */
		cr_assert_eq(objstore_head(inner, key, &raw), 0);
		uint64_t chunks = n ? (n + CHUNK - 1) / CHUNK : 1;
		cr_assert_eq(raw, HDR + n + TAG * chunks);
		void *d;
		size_t got;
		cr_assert_eq(objstore_get(inner, key, 0, 0, &d, &got), 0);
		cr_assert(n < 16 || !memmem(d, got, p, 16));
		free(d);
		/* the whole object as a view */
		struct objstore_view v;
		cr_assert_eq(objstore_get_view(cs, key, &v), 0);
		cr_assert_eq(v.len, n);
		cr_assert(!n || !memcmp(v.data, p, n));
		/* a second reference outlives the first (the buffer goes
		 * back to the store's pool with the last one) */
		struct objstore_view r;
		objstore_view_ref(&v, &r);
		objstore_view_release(&v);
		cr_assert(!n || !memcmp(r.data, p, n));
		objstore_view_release(&r);
		free(p);
	}
}

struct seen {
	int n;
	uint64_t size[4];
	char key[4][32];
};

static int list_fn(void *arg, const char *key, uint64_t size, int64_t mtime)
{
	struct seen *s = arg;
	(void)mtime;
	if (s->n < 4) {
		snprintf(s->key[s->n], sizeof(s->key[0]), "%s", key);
		s->size[s->n++] = size;
	}
	return 0;
}

Test(cstore, list_sizes_are_plain)
{
	unsigned char *p = pattern(CHUNK * 2 + 5, 3);
	cr_assert_eq(objstore_put(cs, "packs/a", p, CHUNK * 2 + 5), 0);
	struct seen s = {0};
	cr_assert_eq(objstore_list(cs, "packs/", list_fn, &s), 0);
	cr_assert_eq(s.n, 1);
	cr_assert_str_eq(s.key[0], "packs/a");
	cr_assert_eq(s.size[0], CHUNK * 2 + 5);
	free(p);
}

Test(cstore, ranged_gets_random)
{
	size_t n = 5u << 20;
	unsigned char *p = pattern(n, 42);
	uint64_t st = 7;
	cr_assert_eq(objstore_put(cs, "packs/big", p, n), 0);
	for (int i = 0; i < 3000; i++) {
		uint64_t r = rnd_next(&st);
		uint64_t off = r % (n + 3 * CHUNK); /* some past the end */
		size_t len;
		switch (i % 4) {
		case 0: /* small, as a frame of a pack */
			len = 1 + (size_t)(rnd_next(&st) % 8192);
			break;
		case 1: /* up to a few chunks */
			len = 1 + (size_t)(rnd_next(&st) % (4 * CHUNK));
			break;
		case 2: /* to the end */
			len = 0;
			break;
		default: /* on chunk boundaries */
			off = (rnd_next(&st) % 90) * CHUNK;
			len = (size_t)(1 + rnd_next(&st) % 3) * CHUNK;
			break;
		}
		check_get("packs/big", p, n, off, len);
	}
	/* an object that ends on a chunk boundary, read at its last chunk */
	cr_assert_eq(objstore_put(cs, "packs/even", p, 2 * CHUNK), 0);
	check_get("packs/even", p, 2 * CHUNK, CHUNK, CHUNK);
	check_get("packs/even", p, 2 * CHUNK, CHUNK + 10, 100);
	check_get("packs/even", p, 2 * CHUNK, 2 * CHUNK, 100);
	check_get("packs/even", p, 2 * CHUNK, 5 * CHUNK, 0);
	free(p);
}

/* The sealed bytes of key in the inner store, changed by fn. */
static void tamper(const char *key, void (*fn)(unsigned char *, size_t *,
					       size_t),
		   size_t arg)
{
	void *d;
	size_t got;
	cr_assert_eq(objstore_get(inner, key, 0, 0, &d, &got), 0);
	fn(d, &got, arg);
	cr_assert_eq(objstore_put(inner, key, d, got), 0);
	free(d);
}

static void flip(unsigned char *d, size_t *n, size_t at)
{
	cr_assert_lt(at, *n);
	d[at] ^= 0x20;
}

static void cut(unsigned char *d, size_t *n, size_t by)
{
	(void)d;
	*n -= by;
}

static void expect_eauth(const char *key, uint64_t off, size_t len)
{
	void *d = NULL;
	size_t got = 0;
	int err = objstore_get(cs, key, off, len, &d, &got);
	cr_assert_eq(err, CRYPT_EAUTH, "get %s %llu+%zu: %d, %zu bytes", key,
		     (unsigned long long)off, len, err, got);
	cr_assert_null(d);
}

Test(cstore, flipped_byte_fails)
{
	size_t n = 3 * CHUNK + 100;
	unsigned char *p = pattern(n, 9);
	/* where: salt in the header, chunk 1's ciphertext, chunk 2's tag,
	 * the last chunk */
	size_t where[] = {2, 10, HDR + (CHUNK + TAG) + 5,
			  HDR + 3 * (CHUNK + TAG) - 3,
			  HDR + 3 * (CHUNK + TAG) + 50};
	uint64_t chunk_of[] = {0, 0, 1, 2, 3};
	for (size_t i = 0; i < sizeof(where) / sizeof(where[0]); i++) {
		cr_assert_eq(objstore_put(cs, "blocks/x", p, n), 0);
		tamper("blocks/x", flip, where[i]);
		expect_eauth("blocks/x", 0, 0);
		struct objstore_view v;
		cr_assert_eq(objstore_get_view(cs, "blocks/x", &v),
			     CRYPT_EAUTH);
		expect_eauth("blocks/x", chunk_of[i] * CHUNK + 1, 10);
		if (where[i] >= HDR && chunk_of[i] > 0) /* others stay good */
			check_get("blocks/x", p, n, 0, 100);
	}
	free(p);
}

Test(cstore, swapped_objects_fail)
{
	size_t n = CHUNK + 7;
	unsigned char *a = pattern(n, 1), *b = pattern(n, 2);
	cr_assert_eq(objstore_put(cs, "blocks/a", a, n), 0);
	cr_assert_eq(objstore_put(cs, "blocks/b", b, n), 0);
	void *d;
	size_t got;
	cr_assert_eq(objstore_get(inner, "blocks/b", 0, 0, &d, &got), 0);
	cr_assert_eq(objstore_put(inner, "blocks/a", d, got), 0);
	free(d);
	expect_eauth("blocks/a", 0, 0);
	expect_eauth("blocks/a", CHUNK, 7);
	check_get("blocks/b", b, n, 0, 0);
	free(a);
	free(b);
}

Test(cstore, cut_object_fails)
{
	size_t n = 3 * CHUNK;
	unsigned char *p = pattern(n, 5);
	cr_assert_eq(objstore_put(cs, "blocks/c", p, n), 0);
	tamper("blocks/c", cut, CHUNK + TAG); /* the last chunk dropped */
	expect_eauth("blocks/c", 0, 0);
	expect_eauth("blocks/c", CHUNK, CHUNK); /* now its last: not sealed so */
	expect_eauth("blocks/c", 2 * CHUNK, 10); /* past the cut end */
	expect_eauth("blocks/c", 5 * CHUNK, 10);
	uint64_t size;
	cr_assert_eq(objstore_head(cs, "blocks/c", &size), 0); /* a size */
	/* cut inside a chunk */
	cr_assert_eq(objstore_put(cs, "blocks/d", p, n), 0);
	tamper("blocks/d", cut, 100);
	expect_eauth("blocks/d", 0, 0);
	expect_eauth("blocks/d", 2 * CHUNK, 5);
	free(p);
}

Test(cstore, owner_marker_in_clear)
{
	struct objstore_owner o = {0}, got = {0};
	snprintf(o.uuid, sizeof(o.uuid), "%s", UUID);
	snprintf(o.name, sizeof(o.name), "vol");
	cr_assert_eq(objstore_owner_put(cs, &o), 0);
	cr_assert_eq(objstore_owner_get(inner, &got), 0); /* no key needed */
	cr_assert_str_eq(got.uuid, UUID);
	memset(&got, 0, sizeof(got));
	cr_assert_eq(objstore_owner_get(cs, &got), 0);
	cr_assert_str_eq(got.name, "vol");
}
