/*
 * meta_dump.h - a volume's metadata as one stream of JSON lines (the
 * format: docs/dump-format.md), and a volume built back from such a
 * stream. Used by `granary dump` and `granary load` (tools/) and by the
 * clients' automatic backups (fs/vfs/). Types and errors: meta.h.
 *
 * A dump is taken beside live clients: each inode (its record, chunk
 * lists, xattrs, symlink target, directory entries) is read in one atomic
 * step, so each file is a consistent image of itself; the volume as a
 * whole is not one instant. Memory stays bounded whatever the volume's
 * size (one HSCAN page and one inode at a time, plus what the writer
 * batches). The stream carries no secrets (access and secret keys are
 * left out) and no session data.
 *
 * The caller owns the bytes' way out and in: plain files, stdout, LZ4
 * frames (lib/lz4stream.h) or objects in the store.
 */
#ifndef GRANARY_META_DUMP_H
#define GRANARY_META_DUMP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "meta/meta.h"

/* Take n bytes of the stream: 0, or a positive errno (stops the dump). */
typedef int (*meta_sink_fn)(void *arg, const void *p, size_t n);
/* Give up to cap bytes of the stream: bytes given, 0 at its end, or a
 * negative errno. */
typedef ssize_t (*meta_source_fn)(void *arg, void *p, size_t cap);

struct meta_dump_stats {
	uint64_t inodes, dirs, files, symlinks, entries;
	uint64_t slices; /* slice references of chunk lists */
	uint64_t lines;	 /* of the stream */
	uint64_t bytes;	 /* of the stream, uncompressed */
};
/* Called now and then (at most a few times a second) from the thread
 * that runs the dump or the load. */
typedef void (*meta_dump_progress_fn)(void *arg,
				      const struct meta_dump_stats *st);

struct meta_dump_opts {
	const char *path; /* only the tree under this path ("/a/b"), or
			     NULL: the whole volume */
	meta_dump_progress_fn progress; /* NULL: none */
	void *progress_arg;
};
/* Write the volume (or o->path's tree) to sink; *st (may be NULL) is
 * filled. 0, or the first error of the metadata or of the sink. */
int meta_dump(struct meta *m, const struct meta_dump_opts *o, meta_sink_fn sink,
	      void *sink_arg, struct meta_dump_stats *st);

struct meta_load_opts {
	meta_dump_progress_fn progress; /* NULL: none */
	void *progress_arg;
	/* the store's keys, which a dump never holds, for the settings
	 * (NULL or "": none, taken from the environment at mount) */
	const char *access_key, *secret_key;
	/* NULL, or room for why a stream was refused ("line 7: ..."), for
	 * the caller's message */
	char *why;
	size_t why_cap;
	/* What the stream's settings must say, or it is refused (EINVAL,
	 * at its header: nothing written): the volume's uuid (NULL: any),
	 * and a `crypt` setting (need_crypt: the volume is known to be
	 * encrypted, e.g. its backups are sealed) */
	const char *need_uuid;
	int need_crypt;
};
/* Build the volume of the stream in m's database, which must hold no
 * volume (META_EEXIST otherwise: nothing is written). A stream that is
 * not a dump, of a newer format, or cut short is refused with EINVAL
 * (logged: the line and what is wrong with it); what was loaded before
 * the bad line is then left for the caller to wipe (meta_format with
 * force). The loaded volume starts a new id epoch (below) and gets a new
 * restore_id (meta_volume.h); a dump whose ids leave no epoch below 2^53
 * is refused with EOVERFLOW (why says so). */
int meta_load(struct meta *m, const struct meta_load_opts *o,
	      meta_source_fn source, void *source_arg,
	      struct meta_dump_stats *st);

/*
 * The id epochs of loads: a loaded volume hands out slice (and pack) ids
 * from meta_epoch_after(highest id of the dump, META_SLICE_EPOCH) and
 * inode numbers from meta_epoch_after(highest inode, META_INODE_EPOCH),
 * so never an id the dumped volume may have used after the dump. The
 * result is the second multiple of epoch above highest: at least an
 * epoch past it.
 */
#define META_SLICE_EPOCH (UINT64_C(1) << 40)
#define META_INODE_EPOCH (UINT64_C(1) << 32)
uint64_t meta_epoch_after(uint64_t highest, uint64_t epoch);

/* ---- automatic backups ---------------------------------------------- */
/* The bookkeeping of the clients' backups (fs/vfs/backup.c; the objects
 * themselves: fs/data/backup.h), in the hash backup: what the last one
 * was, and which session is writing the next (key backupclaim). */
struct meta_backup {
	char name[64];	 /* the last backup's, "" when none yet */
	int64_t time;	 /* unix seconds it began */
	uint64_t sid;	 /* the session that wrote it */
	char host[256];	 /* its host */
	uint64_t bytes;	 /* as stored */
	uint64_t inodes; /* in it */
	double seconds;	 /* it took */
	int64_t failed;	 /* the last failure since, 0: none */
	char error[256]; /* ... what it was */
};
/*
 * Claim the next backup for this session: *claimed 1 when the last one
 * began interval seconds ago or more, the last failure is retry seconds
 * old or more, and no other session holds the claim. The claim lasts ttl
 * seconds or until meta_backup_done.
 */
int meta_backup_claim(struct meta *m, int64_t interval, int64_t ttl,
		      int64_t retry, int *claimed);
/* Record this session's backup b (error NULL), or its failure (error:
 * one line), and drop the claim; b NULL: only drop the claim (a backup
 * cut short by an unmount). */
int meta_backup_done(struct meta *m, const struct meta_backup *b,
		     const char *error);
/* The last backup and failure as recorded: ENOENT when there has been
 * neither. */
int meta_backup_last(struct meta *m, struct meta_backup *b);

#endif
