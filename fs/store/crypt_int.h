/*
 * crypt_int.h - what crypt.c shares with objstore_crypt.c and nothing
 * else: AES-256-GCM on a reused per-thread context and HKDF-SHA256.
 * Private to fs/store/.
 */
#ifndef GRANARY_CRYPT_INT_H
#define GRANARY_CRYPT_INT_H

#include <stddef.h>

#define CRYPT_NONCE_LEN 12
#define CRYPT_TAG_LEN	16

/* One piece of associated data. */
struct crypt_aad {
	const void *p;
	size_t n;
};

/*
 * The calling thread's GCM context keyed with key for enc (1) or dec (0):
 * a context per thread, created at first use and freed at thread exit,
 * so that sealing a block costs no allocation. NULL: out of memory.
 */
void *crypt_gcm_begin(const unsigned char key[32], int enc);
/*
 * Seal (enc) n bytes of in into out and write the tag, or open them and
 * check the tag (CRYPT_EAUTH when it fails: out then holds garbage that
 * the caller must not hand out). aad[0..naad) are bound in. in == out is
 * fine, other overlaps are not.
 */
int crypt_gcm(void *ctx, int enc, const unsigned char nonce[CRYPT_NONCE_LEN],
	      const struct crypt_aad *aad, int naad, const void *in, size_t n,
	      void *out, unsigned char tag[CRYPT_TAG_LEN]);
/* HKDF-SHA256 of key with salt and info into out[32]. 0 or EIO. */
int crypt_hkdf(const unsigned char key[32], const void *salt, size_t saltn,
	       const char *info, unsigned char out[32]);
/* n random bytes from OpenSSL's generator: 0 or EIO. */
int crypt_random(void *buf, size_t n);

#endif
