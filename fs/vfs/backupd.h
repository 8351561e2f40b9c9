/*
 * backupd.h - the clients' automatic metadata backups. Every mounted
 * read-write client runs one thread that, every tick, asks the metadata
 * whether a backup is due (meta_backup_claim: the last one is older than
 * the interval, and no other client is writing one); the one client that
 * gets the claim dumps the metadata (meta_dump.h) through an LZ4 frame
 * into the store (fs/data/backup.h), records it (meta_backup_done) and
 * deletes all but the newest keep. A dump is read-only for Redis and
 * bounded in memory (one part of the store's, BACKUP_PART, and the
 * compressor's buffers).
 */
#ifndef GRANARY_VFS_BACKUPD_H
#define GRANARY_VFS_BACKUPD_H

#include <stdint.h>

struct meta;
struct objstore;

#define BACKUP_INTERVAL 3600 /* seconds, the default */
#define BACKUP_KEEP	12   /* backups kept, the default */

struct backupd;

/* One thread over m (which must outlive it) and s (its own from then on,
 * closed by backupd_close), a backup every interval seconds (> 0),
 * keeping keep (0: BACKUP_KEEP). An encrypted volume's s is a sealing
 * store with the backups' key (crypt.h, crypt_key_derive "backup"): its
 * backups are sealed (backup.h, backup_begin_sealed). */
int backupd_open(struct meta *m, struct objstore *s, int64_t interval,
		 unsigned keep, struct backupd **out);
/* Stop the thread; a backup under way is cut short and its objects
 * deleted (the claim is dropped: another client takes the next).
 * NULL-safe. */
void backupd_close(struct backupd *b);

#endif
