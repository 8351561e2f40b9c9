/*
 * crypt.h - encryption at rest: the volume key, wrapped by the user's key
 * in the volume's metadata, and a store decorator that seals every object
 * with it (AES-256-GCM, OpenSSL).
 *
 * Keys. `granary format --encrypt KEYFILE` makes a random 256-bit volume
 * key and keeps only its wrapped form (crypt_record_new()) in the volume's
 * settings: a key-encryption key derived from the user's secret with
 * scrypt (a slow KDF, so a passphrase is as good as a key file) seals it,
 * with the volume's uuid as associated data, so a record copied to another
 * volume does not open. A mount or a tool unwraps it (crypt_record_open()):
 * a wrong secret fails the tag, CRYPT_EKEY. Changing the user's key
 * rewraps the same volume key (crypt_record_rewrap()); nothing in the
 * store changes.
 *
 * Objects. objstore_crypt_open() wraps the store that holds the objects,
 * above any disk cache over it (store, cache, crypt: so caches hold
 * ciphertext): a put seals, a get opens. Each object gets a random salt and its own key derived from
 * the volume key and the salt (so no nonce is ever reused, whatever the
 * number of objects), and is sealed in chunks, each with its own tag, so
 * that a ranged get fetches and checks only the chunks it covers. Every
 * chunk's associated data binds the object's key (name), its index and
 * whether it is the last: an object moved to another name, a chunk moved
 * within it, a cut or an extension fail their tag. The format is in
 * crypt.c. A failed tag is CRYPT_EAUTH (EIO at the FUSE boundary) with one
 * log line naming the object; never bytes. Sizes (head, list) are the
 * plaintext sizes. The volume marker (OBJSTORE_OWNER_KEY) stays in the
 * clear: format reads other volumes' markers without their keys.
 *
 * Thread-safe. Errors: a positive errno, CRYPT_E* (lib/errors.h), or the
 * inner store's.
 */
#ifndef GRANARY_CRYPT_H
#define GRANARY_CRYPT_H

#include <stddef.h>

#include "fs/store/objstore.h"

#define CRYPT_KEY_LEN	 32  /* AES-256 */
#define CRYPT_RECORD_MAX 256 /* a record, NUL included */

/*
 * The user's secret, from (first that is set) the file path (a --encrypt /
 * --encrypt-key flag), GRANARY_ENCRYPT_KEY_FILE, GRANARY_ENCRYPT_PASSPHRASE;
 * a file's bytes are the secret as they are (a trailing newline dropped).
 * malloc'd into *secret (free with crypt_secret_free(), which wipes it).
 * CRYPT_ENOKEY when none is set; the errno of an unreadable file; EINVAL
 * for an empty secret or one shorter than 8 bytes (logged).
 */
int crypt_secret_load(const char *path, void **secret, size_t *n);
void crypt_secret_free(void *secret, size_t n);

/*
 * A new volume key for the volume uuid, sealed with secret: the record
 * (printable, for the metadata's `crypt` setting: SCHEMA.md) in
 * record[CRYPT_RECORD_MAX], the key itself in key.
 */
int crypt_record_new(const void *secret, size_t n, const char *uuid,
		     char *record, unsigned char key[CRYPT_KEY_LEN]);
/* The volume key of record: CRYPT_EKEY when secret (or uuid) is not the
 * one it was sealed with, EINVAL when record is not one. */
int crypt_record_open(const char *record, const void *secret, size_t n,
		      const char *uuid, unsigned char key[CRYPT_KEY_LEN]);
/* The same volume key sealed with another secret, into out. */
int crypt_record_rewrap(const char *record, const void *old, size_t oldn,
			const void *new_secret, size_t newn, const char *uuid,
			char *out);

/*
 * A key of the volume key's for one purpose, HKDF-SHA256 with info
 * "granary PURPOSE key" (and no salt: the same key each time): what a
 * store sealed with it holds, a store with the volume key (or another
 * purpose's) does not open. "backup": the metadata backups
 * (fs/data/backup.h). 0, EINVAL (no purpose) or EIO.
 */
int crypt_key_derive(const unsigned char key[CRYPT_KEY_LEN],
		     const char *purpose, unsigned char out[CRYPT_KEY_LEN]);

/*
 * A store that seals what it is given and opens what it fetches, over
 * inner, which it owns from then on (closing it closes inner, also on
 * failure). key is copied (and wiped at close).
 */
int objstore_crypt_open(struct objstore *inner,
			const unsigned char key[CRYPT_KEY_LEN],
			struct objstore **out);
/* The store under a sealing one (still owned by it), for what stays in
 * the clear beside sealed objects; NULL when s is not a sealing store. */
struct objstore *objstore_crypt_inner(struct objstore *s);
/* 1 when the n bytes at head (the start of an object, 6 bytes suffice)
 * are the header of an object this store sealed, 0 if not. */
int objstore_crypt_sealed(const void *head, size_t n);

#endif
