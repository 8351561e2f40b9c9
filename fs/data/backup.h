/*
 * backup.h - metadata backups kept in the volume's own object store: how
 * a stream (a dump, meta_dump.h, usually LZ4-framed) is laid down as
 * objects, found again and read back. Written by the clients' automatic
 * backups (fs/vfs/backup.c), read by `granary load --from-store` and
 * listed by `granary status`.
 *
 * A backup NAME (20261201T181500Z-s12: UTC time it began, the writer's
 * session) is the objects meta/backups/NAME/pNNNNN, the stream cut in
 * parts of at most BACKUP_PART bytes (one buffer of that size while
 * writing and while reading: memory stays bounded whatever the volume's
 * size), and last meta/backups/NAME/done, a one-line JSON manifest
 * (docs/dump-format.md). A backup without its manifest is not complete
 * (its writer died or is still at it): it is never read, and it is
 * deleted by backup_prune once older than a day. Names sort by time.
 *
 * A backup of an encrypted volume is sealed (backup_begin_sealed): its
 * parts and manifest are written through a sealing store whose key is
 * the volume key's for backups (crypt_key_derive(key, "backup")), so
 * that each is encrypted and bound to its name (none can be read,
 * altered, cut, or moved to another name or backup without the key);
 * beside them, in the clear, meta/backups/NAME/key holds the volume's
 * uuid and its wrapped key (the `crypt` setting as the backup began),
 * which a reader unwraps with the user's secret before it can read
 * anything else. A backup without that object is a plain one.
 *
 * gc never sees these objects: it compares blocks/ and packs/ only.
 */
#ifndef GRANARY_FS_DATA_BACKUP_H
#define GRANARY_FS_DATA_BACKUP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "fs/store/crypt.h"

#define BACKUP_PREFIX "meta/backups/"
#define BACKUP_PART   (8u << 20)
#define BACKUP_NAME   48 /* bytes of a name, with its NUL */

/* What a manifest records (and backup_latest hands back). */
struct backup_info {
	char name[BACKUP_NAME];
	int64_t time;	 /* unix seconds it began */
	uint64_t sid;	 /* the writer's session (0: a tool) */
	char host[256];	 /* the writer's host */
	uint32_t parts;	 /* objects pNNNNN */
	uint64_t bytes;	 /* of the stream as stored */
	uint64_t inodes; /* in the dump */
	double seconds;	 /* it took */
};

/* "20261201T181500Z-s12" for time t and session sid, in name
 * (BACKUP_NAME). */
void backup_name(int64_t t, uint64_t sid, char *name);

/* ---- writing -------------------------------------------------------- */
struct backup_writer;
/* Begin backup name in s. Nothing is stored until BACKUP_PART bytes have
 * come or backup_finish. */
int backup_begin(struct objstore *s, const char *name,
		 struct backup_writer **out);
/* The key record of a sealed backup, kept beside it in the clear. */
struct backup_key {
	char uuid[40];		       /* the volume's */
	char record[CRYPT_RECORD_MAX]; /* its `crypt` setting */
};
/* Begin sealed backup name: sealed is a sealing store (the backups' key)
 * over the store of the backup, where k is stored at once in the clear
 * (objstore_crypt_inner). backup_write and backup_finish as above; an
 * aborted backup's key object is deleted with its parts. */
int backup_begin_sealed(struct objstore *sealed, const struct backup_key *k,
			const char *name, struct backup_writer **out);
/* A meta_sink_fn (meta_dump.h): take n bytes of the stream; stores a part
 * each time BACKUP_PART bytes are buffered. 0 or the store's error. */
int backup_write(void *w, const void *p, size_t n);
/* Store what is buffered and the manifest (info's name, parts and bytes
 * are filled here), and free w. On an error, or with abort set, the
 * parts stored are deleted instead and no manifest is written. */
int backup_finish(struct backup_writer *w, struct backup_info *info, int abort);

/* ---- finding and reading ------------------------------------------- */
/* The names of the complete backups in s (those with a manifest), from
 * a listing alone (so without the key of sealed ones), oldest first:
 * fn (may be NULL) for each, *n (may be NULL) their count. */
int backup_names(struct objstore *s, int (*fn)(void *arg, const char *name),
		 void *arg, size_t *n);
/* The name of the newest: 0, ENOENT when there is none, or the store's
 * error. */
int backup_newest(struct objstore *s, char name[BACKUP_NAME]);
/* The key record beside backup name, read from a store in the clear: 0,
 * ENOENT when there is none (a plain backup), EINVAL (an object that is
 * not one), or the store's error. */
int backup_key_get(struct objstore *s, const char *name, struct backup_key *k);
/* The newest complete backup in s: 0, ENOENT when there is none, or the
 * store's error. */
int backup_latest(struct objstore *s, struct backup_info *info);
/* The manifest of backup name: 0, ENOENT (no such complete backup),
 * EINVAL (a manifest that is not one), or the store's error (through a
 * sealing store: CRYPT_EAUTH for one that fails its check, a plain
 * backup's too). */
int backup_stat(struct objstore *s, const char *name, struct backup_info *info);
/* Calls fn for each complete backup, oldest first: *n (may be NULL) gets
 * their count. fn may be NULL. */
int backup_list(struct objstore *s,
		int (*fn)(void *arg, const struct backup_info *b), void *arg,
		size_t *n);

struct backup_reader;
int backup_open(struct objstore *s, const struct backup_info *info,
		struct backup_reader **out);
/* A meta_source_fn (meta_dump.h): up to cap bytes of the stream, 0 at its
 * end, or a negative errno (a part missing or shorter than the manifest
 * says is EIO). */
ssize_t backup_read(void *r, void *p, size_t cap);
void backup_close(struct backup_reader *r); /* NULL-safe */

/* Delete every complete backup but the keep newest (keep >= 1), and the
 * incomplete ones older than a day; *deleted (may be NULL) counts the
 * backups deleted. */
int backup_prune(struct objstore *s, unsigned keep, size_t *deleted);

#endif
