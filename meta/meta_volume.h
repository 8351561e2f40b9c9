/*
 * meta_volume.h - the metadata API of a volume as a whole: format, load,
 * upgrade, usage and the capacity gate's figures, and the sessions of the
 * clients that mount it. Types and errors: meta.h.
 */
#ifndef GRANARY_META_VOLUME_H
#define GRANARY_META_VOLUME_H

#include "meta/meta.h"

/* ---- volume ---------------------------------------------------------- */
#define META_RESTORE_ID 24 /* a restore_id and its NUL, at most */
struct meta_volume {
	char name[256];
	char uuid[40];
	char storage[1024];   /* storage URL, without credentials */
	char access_key[256]; /* may be empty: taken from the environment */
	char secret_key[256];
	uint32_t block_size; /* bytes, <= 16 MiB */
	uint32_t compress;   /* enum codec_compress */
	uint32_t format_version;
	uint64_t capacity;   /* bytes, 0 = unlimited */
	int64_t created;     /* unix seconds */
	uint32_t trash_days; /* removed files kept this long; 0: no trash
				(meta_trash.h) */
	/* the volume key wrapped by the user's (fs/store/crypt.h, whose
	 * CRYPT_RECORD_MAX this is); "": the volume is not encrypted */
	char crypt[256];
	/* set by every load (meta_dump.h): a random id naming this restore
	 * (16 hex digits; "" in a volume never loaded), which names the
	 * clients' disk cache namespace, and where the id epoch it started
	 * begins: nextslice and nextinode as it set them, the ids it hands
	 * out come after (0: none) */
	char restore_id[META_RESTORE_ID];
	uint64_t slice_floor, inode_floor;
};

/* Write settings and the root directory; META_EEXIST unless force (force
 * wipes every granary key in the database first). */
int meta_format(struct meta *m, const struct meta_volume *v, int force);
/* Change one setting of a formatted volume (field of the `setting` hash,
 * SCHEMA.md) to a decimal value: only "trash_days" today (EINVAL for
 * others); META_ENOVOLUME when there is no volume. Clients see it at
 * their next use of it (the namespace scripts read it every time). */
int meta_volume_set(struct meta *m, const char *field, uint64_t value);
/* Replace the volume's `crypt` setting (the wrapped volume key) with
 * new_rec if it still holds old_rec (compare and set: two key changes at
 * once cannot lose one): 0, EBUSY when it holds something else,
 * META_ENOVOLUME when there is no volume. Mounted clients keep the volume
 * key they unwrapped. */
int meta_volume_set_crypt(struct meta *m, const char *old_rec,
			  const char *new_rec);
/* A restored volume's ids moved on (fs/vfs/mount.c: another restore of
 * its store used the epoch its load set): nextslice, nextinode and the
 * settings slice_floor, inode_floor become at least slices, inodes (in
 * one script; raising again to the same changes nothing). EOVERFLOW at
 * 2^53, META_ENOVOLUME when there is no volume. */
int meta_id_floor_raise(struct meta *m, uint64_t slices, uint64_t inodes);
/* META_EVERSION (logged: what to do) when the volume's format is not
 * META_FORMAT_VERSION; v is filled all the same. */
int meta_load_volume(struct meta *m, struct meta_volume *v);
/*
 * Rewrite a volume of an older format version into META_FORMAT_VERSION
 * (SCHEMA.md, "Upgrades"), in place. Refused with EBUSY while a client
 * has it mounted (a session alive to the session TTL: SCHEMA.md
 * "Sessions", a Redis stall counts for none). An
 * interrupted upgrade is finished by running it again; the volume's
 * format_version changes last. *from gets the version found (= current:
 * nothing was done), *n the records rewritten.
 */
int meta_upgrade(struct meta *m, uint32_t *from, uint64_t *n);
struct meta_usage {
	uint64_t used_bytes; /* the stored bytes of every file (usedspace) */
	uint64_t inodes;
};
int meta_usage(struct meta *m, struct meta_usage *u);
/*
 * For a client's capacity gate (fs/space.h), in one round trip: publish
 * the bytes this session has accepted and not committed yet (0 clears
 * them; nothing is published without a session), and read the volume's
 * usedspace and the bytes every other session has published. A session's
 * bytes are removed when it closes or is cleaned up as dead.
 */
int meta_space_usage(struct meta *m, uint64_t pending, uint64_t *used,
		     uint64_t *others);

/* ---- sessions -------------------------------------------------------- */
/* Register this client (starts a heartbeat thread; cleans up sessions of
 * dead clients: their open files, their orphaned inodes). */
int meta_session_open(struct meta *m, const char *mountpoint);
/*
 * Before meta_session_open: the session serves volume v, as the mount read
 * it. Each heartbeat then checks that the database still holds v, of the
 * same restore (uuid and restore_id). Once it does not (restored from a
 * dump while mounted, the database emptied, another volume formatted
 * there), the handle stops for good: it logs so once, as an error, naming
 * v and what to do; every later call on it fails with META_EGONE, and
 * nothing more is written to the database (meta_session_close leaves it
 * alone); gone(arg) runs once, on the heartbeat thread. A session whose
 * volume is still there but which was cleaned away as dead is registered
 * again, as without the watch.
 */
void meta_session_watch(struct meta *m, const struct meta_volume *v,
			void (*gone)(void *arg), void *arg);
/* 1 once the watch stopped the handle (its calls fail), else 0; any
 * thread, lock-free. */
int meta_session_gone(struct meta *m);
int meta_session_close(struct meta *m);
uint64_t meta_session_id(struct meta *m);
struct meta_session {
	uint64_t sid;
	char host[256], mountpoint[1024];
	int64_t pid, started, heartbeat;
	uint64_t staged_packs, staged_bytes; /* see meta_session_staged */
	char metrics[64]; /* see meta_session_metrics; "" when none */
	int stale; /* dead to this handle's session TTL (silent for it while
		      redis ran scripts): cleaned up at the next look */
};
/* Publish how much this session holds staged on its node and not yet in
 * the store (writeback), for `granary status`; 0, 0 clears it. */
int meta_session_staged(struct meta *m, uint64_t packs, uint64_t bytes);
/* Publish where this session serves its metrics ("HOST:PORT"), for
 * `granary status`; dropped with the session. */
int meta_session_metrics(struct meta *m, const char *addr);
int meta_list_sessions(struct meta *m, struct meta_session **out, size_t *n);
/* Remove sessions dead to the TTL (no heartbeat for it while redis ran
 * scripts: SCHEMA.md "Sessions"); *n cleaned. */
int meta_clean_sessions(struct meta *m, size_t *n);

#endif
