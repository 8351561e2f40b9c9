/*
 * crypt.c - the keys of encryption at rest (crypt.h): the user's secret,
 * the record that keeps the volume key wrapped in the volume's settings,
 * and the AES-256-GCM and HKDF primitives objstore_crypt.c seals objects
 * with (the object format is described there).
 *
 * The record, one printable line (meta/SCHEMA.md, setting `crypt`):
 *
 *   v1:scrypt:LOGN:R:P:SALT:NONCE:CT:TAG      (hex: 16, 12, 32, 16 bytes)
 *
 * KEK = scrypt(secret, SALT, N = 2^LOGN, R, P); CT, TAG = AES-256-GCM of
 * the volume key under KEK with NONCE, the volume's uuid as associated
 * data. scrypt is slow on purpose (about 0.1 s and 32 MiB here), so a
 * passphrase resists guessing as well as its length allows; its cost is
 * paid once per mount or tool run. The parameters are in the record, so
 * they can grow for new volumes without breaking old ones.
 */
#include "fs/store/crypt.h"
#include "fs/store/crypt_int.h"
#include "lib/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/params.h>
#include <openssl/rand.h>

#define SECRET_MIN  8
#define SECRET_MAX  4096 /* a key file is a few dozen bytes */
#define SALT_LEN    16
#define SCRYPT_LOGN 15 /* N = 32768, r 8: 32 MiB, about 0.1 s */
#define SCRYPT_R    8
#define SCRYPT_P    1
/* what a record may ask of us: more would let a forged record make a
 * mount spend gigabytes or minutes before it fails */
#define SCRYPT_LOGN_MAX 20
#define SCRYPT_R_MAX	32
#define SCRYPT_P_MAX	16

/* ---- primitives ---- */

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_key_t ctx_key;
static EVP_CIPHER *gcm_cipher; /* fetched once: an implicit fetch per
				  init costs a lock and a lookup */
static EVP_KDF *hkdf_kdf;

static void ctx_free(void *c)
{
	EVP_CIPHER_CTX_free(c);
}

static void init_once(void)
{
	pthread_key_create(&ctx_key, ctx_free);
	gcm_cipher = EVP_CIPHER_fetch(NULL, "AES-256-GCM", NULL);
	hkdf_kdf = EVP_KDF_fetch(NULL, "HKDF", NULL);
}

void *crypt_gcm_begin(const unsigned char key[32], int enc)
{
	pthread_once(&once, init_once);
	if (!gcm_cipher)
		return NULL;
	EVP_CIPHER_CTX *c = pthread_getspecific(ctx_key);
	if (!c) {
		if (!(c = EVP_CIPHER_CTX_new()))
			return NULL;
		if (pthread_setspecific(ctx_key, c)) {
			EVP_CIPHER_CTX_free(c);
			return NULL;
		}
	}
	if (EVP_CipherInit_ex2(c, gcm_cipher, key, NULL, enc, NULL) != 1)
		return NULL;
	return c;
}

int crypt_gcm(void *ctx, int enc, const unsigned char nonce[CRYPT_NONCE_LEN],
	      const struct crypt_aad *aad, int naad, const void *in, size_t n,
	      void *out, unsigned char tag[CRYPT_TAG_LEN])
{
	EVP_CIPHER_CTX *c = ctx;
	unsigned char *o = out;
	const unsigned char *i = in;
	int len;

	if (EVP_CipherInit_ex2(c, NULL, NULL, nonce, enc, NULL) != 1)
		return EIO;
	for (int a = 0; a < naad; a++)
		if (aad[a].n && EVP_CipherUpdate(c, NULL, &len, aad[a].p,
						 (int)aad[a].n) != 1)
			return EIO;
	while (n) { /* EVP counts in int */
		int step = n > (1u << 30) ? 1 << 30 : (int)n;
		if (EVP_CipherUpdate(c, o, &len, i, step) != 1)
			return EIO;
		o += step;
		i += step;
		n -= (size_t)step;
	}
	if (!enc && EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, CRYPT_TAG_LEN,
					tag) != 1)
		return EIO;
	if (EVP_CipherFinal_ex(c, o, &len) != 1)
		return enc ? EIO : CRYPT_EAUTH;
	if (enc && EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, CRYPT_TAG_LEN,
				       tag) != 1)
		return EIO;
	return 0;
}

int crypt_hkdf(const unsigned char key[32], const void *salt, size_t saltn,
	       const char *info, unsigned char out[32])
{
	pthread_once(&once, init_once);
	if (!hkdf_kdf)
		return EIO;
	EVP_KDF_CTX *k = EVP_KDF_CTX_new(hkdf_kdf);
	if (!k)
		return ENOMEM;
	OSSL_PARAM p[] = {
	    OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, "SHA256",
					     0),
	    OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, (void *)key,
					      32),
	    OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, (void *)salt,
					      saltn),
	    OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, (void *)info,
					      strlen(info)),
	    OSSL_PARAM_construct_end(),
	};
	int ok = EVP_KDF_derive(k, out, 32, p) == 1;
	EVP_KDF_CTX_free(k);
	return ok ? 0 : EIO;
}

int crypt_random(void *buf, size_t n)
{
	return RAND_bytes(buf, (int)n) == 1 ? 0 : EIO;
}

/* ---- the user's secret ---- */

static int read_secret(const char *path, void **secret, size_t *n)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		int err = errno;
		log_err("cannot read the key file '%s': %s", path,
			strerror(err));
		return err;
	}
	unsigned char *buf = OPENSSL_secure_malloc(SECRET_MAX + 1);
	if (!buf) {
		fclose(f);
		return ENOMEM;
	}
	size_t got = fread(buf, 1, SECRET_MAX + 1, f);
	int err = ferror(f) ? EIO : 0;
	fclose(f);
	if (!err && got > SECRET_MAX) {
		log_err("the key file '%s' is longer than %d bytes: is it "
			"the right file?",
			path, SECRET_MAX);
		err = EINVAL;
	}
	if (err) {
		crypt_secret_free(buf, SECRET_MAX + 1);
		return err;
	}
	if (got && buf[got - 1] == '\n') /* `echo secret > file` */
		got--;
	*secret = buf;
	*n = got;
	return 0;
}

int crypt_secret_load(const char *path, void **secret, size_t *n)
{
	const char *file =
	    path && *path ? path : getenv("GRANARY_ENCRYPT_KEY_FILE");
	const char *pass = getenv("GRANARY_ENCRYPT_PASSPHRASE");
	const char *what;
	int err;

	*secret = NULL;
	*n = 0;
	if (file && *file) {
		if ((err = read_secret(file, secret, n)))
			return err;
		what = file;
	} else if (pass && *pass) {
		size_t len = strlen(pass);
		if (len > SECRET_MAX) {
			log_err("GRANARY_ENCRYPT_PASSPHRASE is longer than %d "
				"bytes",
				SECRET_MAX);
			return EINVAL;
		}
		if (!(*secret = OPENSSL_secure_malloc(len + 1)))
			return ENOMEM;
		memcpy(*secret, pass, len);
		*n = len;
		what = "GRANARY_ENCRYPT_PASSPHRASE";
	} else {
		return CRYPT_ENOKEY;
	}
	if (*n < SECRET_MIN) {
		log_err("the secret in %s is %s: it must be at least %d bytes",
			what, *n ? "too short" : "empty", SECRET_MIN);
		crypt_secret_free(*secret, *n);
		*secret = NULL;
		*n = 0;
		return EINVAL;
	}
	return 0;
}

void crypt_secret_free(void *secret, size_t n)
{
	if (secret)
		OPENSSL_secure_clear_free(secret, n ? n : 1);
}

/* ---- the record ---- */

static void hex(char *out, const unsigned char *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
}

/* Exactly n bytes of hex from *p up to the next ':' or the end. */
static int unhex(const char **p, unsigned char *b, size_t n)
{
	const char *s = *p;
	for (size_t i = 0; i < n; i++) {
		unsigned v = 0;
		for (int j = 0; j < 2; j++) {
			char c = s[2 * i + j];
			v <<= 4;
			if (c >= '0' && c <= '9')
				v |= (unsigned)(c - '0');
			else if (c >= 'a' && c <= 'f')
				v |= (unsigned)(c - 'a' + 10);
			else
				return EINVAL;
		}
		b[i] = (unsigned char)v;
	}
	s += 2 * n;
	if (*s != ':' && *s != '\0')
		return EINVAL;
	*p = *s ? s + 1 : s;
	return 0;
}

struct record {
	unsigned logn, r, p;
	unsigned char salt[SALT_LEN], nonce[CRYPT_NONCE_LEN];
	unsigned char ct[CRYPT_KEY_LEN], tag[CRYPT_TAG_LEN];
};

static int record_parse(const char *s, struct record *rec)
{
	int used = 0;

	if (!s ||
	    sscanf(s, "v1:scrypt:%u:%u:%u:%n", &rec->logn, &rec->r, &rec->p,
		   &used) != 3 ||
	    !used)
		return EINVAL;
	if (rec->logn < 1 || rec->logn > SCRYPT_LOGN_MAX || rec->r < 1 ||
	    rec->r > SCRYPT_R_MAX || rec->p < 1 || rec->p > SCRYPT_P_MAX)
		return EINVAL;
	const char *p = s + used;
	if (unhex(&p, rec->salt, SALT_LEN) ||
	    unhex(&p, rec->nonce, CRYPT_NONCE_LEN) ||
	    unhex(&p, rec->ct, CRYPT_KEY_LEN) ||
	    unhex(&p, rec->tag, CRYPT_TAG_LEN) || *p)
		return EINVAL;
	return 0;
}

static void record_format(const struct record *rec, char *out)
{
	char *o =
	    out + snprintf(out, CRYPT_RECORD_MAX,
			   "v1:scrypt:%u:%u:%u:", rec->logn, rec->r, rec->p);
	hex(o, rec->salt, SALT_LEN);
	o += 2 * SALT_LEN;
	*o++ = ':';
	hex(o, rec->nonce, CRYPT_NONCE_LEN);
	o += 2 * CRYPT_NONCE_LEN;
	*o++ = ':';
	hex(o, rec->ct, CRYPT_KEY_LEN);
	o += 2 * CRYPT_KEY_LEN;
	*o++ = ':';
	hex(o, rec->tag, CRYPT_TAG_LEN);
	o += 2 * CRYPT_TAG_LEN;
	*o = '\0';
}
/* the longest record: "v1:scrypt:20:32:16:" and the four hex fields */
_Static_assert(19 +
		       2 * (SALT_LEN + CRYPT_NONCE_LEN + CRYPT_KEY_LEN +
			    CRYPT_TAG_LEN) +
		       3 + 1 <=
		   CRYPT_RECORD_MAX,
	       "a record fits CRYPT_RECORD_MAX");

static int kek_of(const struct record *rec, const void *secret, size_t n,
		  unsigned char kek[CRYPT_KEY_LEN])
{
	uint64_t N = 1ull << rec->logn;
	/* scrypt needs 128 r N bytes, and a little more */
	uint64_t mem = 128ull * rec->r * N * (rec->p + 1) + (1u << 20);
	if (EVP_PBE_scrypt(secret, n, rec->salt, SALT_LEN, N, rec->r, rec->p,
			   mem, kek, CRYPT_KEY_LEN) != 1)
		return ENOMEM;
	return 0;
}

/* Seal key into rec (its parameters and salt set) under secret. */
static int record_seal(struct record *rec, const void *secret, size_t n,
		       const char *uuid, const unsigned char key[CRYPT_KEY_LEN])
{
	unsigned char kek[CRYPT_KEY_LEN];
	int err = crypt_random(rec->nonce, sizeof(rec->nonce));

	if (!err)
		err = kek_of(rec, secret, n, kek);
	if (err)
		return err;
	struct crypt_aad aad = {uuid, strlen(uuid)};
	void *c = crypt_gcm_begin(kek, 1);
	err = c ? crypt_gcm(c, 1, rec->nonce, &aad, 1, key, CRYPT_KEY_LEN,
			    rec->ct, rec->tag)
		: ENOMEM;
	OPENSSL_cleanse(kek, sizeof(kek));
	return err;
}

static int record_new_params(struct record *rec)
{
	rec->logn = SCRYPT_LOGN;
	rec->r = SCRYPT_R;
	rec->p = SCRYPT_P;
	return crypt_random(rec->salt, sizeof(rec->salt));
}

int crypt_record_new(const void *secret, size_t n, const char *uuid,
		     char *record, unsigned char key[CRYPT_KEY_LEN])
{
	struct record rec;
	int err;

	if (!secret || !n || !uuid || !*uuid)
		return EINVAL;
	if ((err = crypt_random(key, CRYPT_KEY_LEN)) ||
	    (err = record_new_params(&rec)) ||
	    (err = record_seal(&rec, secret, n, uuid, key))) {
		OPENSSL_cleanse(key, CRYPT_KEY_LEN);
		return err;
	}
	record_format(&rec, record);
	return 0;
}

int crypt_record_open(const char *record, const void *secret, size_t n,
		      const char *uuid, unsigned char key[CRYPT_KEY_LEN])
{
	unsigned char kek[CRYPT_KEY_LEN];
	struct record rec;
	int err;

	if (!secret || !uuid || record_parse(record, &rec))
		return EINVAL;
	if ((err = kek_of(&rec, secret, n, kek)))
		return err;
	struct crypt_aad aad = {uuid, strlen(uuid)};
	void *c = crypt_gcm_begin(kek, 0);
	err = c ? crypt_gcm(c, 0, rec.nonce, &aad, 1, rec.ct, CRYPT_KEY_LEN,
			    key, rec.tag)
		: ENOMEM;
	OPENSSL_cleanse(kek, sizeof(kek));
	if (err) {
		OPENSSL_cleanse(key, CRYPT_KEY_LEN);
		return err == CRYPT_EAUTH ? CRYPT_EKEY : err;
	}
	return 0;
}

int crypt_record_rewrap(const char *record, const void *old, size_t oldn,
			const void *new_secret, size_t newn, const char *uuid,
			char *out)
{
	unsigned char key[CRYPT_KEY_LEN];
	struct record rec;
	int err;

	if (!new_secret || !newn)
		return EINVAL;
	if ((err = crypt_record_open(record, old, oldn, uuid, key)))
		return err;
	/* a fresh salt: the old KEK tells nothing of the new one */
	if (!(err = record_new_params(&rec)) &&
	    !(err = record_seal(&rec, new_secret, newn, uuid, key)))
		record_format(&rec, out);
	OPENSSL_cleanse(key, sizeof(key));
	return err;
}

/* ---- keys of the volume key's ---- */

int crypt_key_derive(const unsigned char key[CRYPT_KEY_LEN],
		     const char *purpose, unsigned char out[CRYPT_KEY_LEN])
{
	char info[64];
	if (!purpose || !*purpose ||
	    snprintf(info, sizeof(info), "granary %s key", purpose) >=
		(int)sizeof(info))
		return EINVAL;
	/* no salt: one key per purpose and volume, derived again at will */
	return crypt_hkdf(key, "", 0, info, out);
}
