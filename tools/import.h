/*
 * import.h - the parts of `granary import` (tools/cmd_import.c): a source
 * scanned into entries (a local directory, or an S3 prefix of plain
 * objects: import_src.c), a destination they are written to (a
 * directory of a mounted volume, or a volume opened in this process:
 * import_dst.c), and the gate that writes small files in batches
 * (import_gate.c). Private to those files.
 *
 * Paths are relative to SOURCE and DEST, '/'-separated, "" for the top.
 * Functions return 0 or an error (a positive errno or a project code of
 * lib/errors.h); they print nothing: the caller names the file.
 */
#ifndef GRANARY_IMPORT_H
#define GRANARY_IMPORT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "lib/workq.h"

/* ---- directories of the destination ----------------------------------- */

/*
 * A directory of the destination, made (or found) by the scanner before
 * any entry in it is handed to a worker. Counted: the scanner holds one
 * reference while the walk is inside it, each queued entry one more.
 */
struct imp_dir {
	char *rel;		/* from DEST ("" for DEST itself) */
	uint64_t ino;		/* in-process: its inode (one lookup held) */
	int fresh;		/* made by this import: nothing was in it */
	int refs;		/* atomic */
	struct imp_dir *parent; /* held */
};

/* ---- entries of the source -------------------------------------------- */

enum imp_kind { IMP_FILE, IMP_DIR, IMP_SYMLINK, IMP_SPECIAL };

struct imp_entry {
	struct workq_job job; /* first: the workers' queue */
	void *owner;	      /* the import it belongs to */
	enum imp_kind kind;
	char *rel;	  /* from SOURCE; malloc'd */
	const char *name; /* its last component, inside rel */
	char *target;	  /* a symlink's; malloc'd */
	uint64_t size;	  /* a file's, as listed */
	struct timespec mtime;
	mode_t mode;	     /* permission bits */
	struct imp_dir *dir; /* where it goes; held */
};

void imp_entry_free(struct imp_entry *e);

/* ---- sources ---------------------------------------------------------- */

struct imp_src;
struct imp_reader;

/*
 * Open SOURCE: a local directory, or an s3:// / s3+http:// URL whose
 * path is BUCKET[/PREFIX] (keys below PREFIX become paths; credentials
 * from the environment). *why (cap bytes) says what failed. Nothing is
 * read yet: imp_src_scan finds out whether the bucket exists and takes
 * the keys.
 */
int imp_src_open(const char *source, struct imp_src **out, char *why,
		 size_t cap);
void imp_src_close(struct imp_src *s);
int imp_src_is_s3(const struct imp_src *s);
/* The local directory, canonical (NULL for S3). */
const char *imp_src_dir(const struct imp_src *s);

/*
 * Hand every entry below the source to emit (which takes it over),
 * directories before what they hold, in an order where the entries of
 * a directory come together. An entry that cannot be read is reported
 * through bad(arg, rel, err) and skipped; an error of the whole source
 * (the top unreadable, the bucket missing, keys refused) is returned,
 * and so is a non-zero return of emit.
 */
struct imp_scan_cbs {
	void *arg;
	int (*emit)(void *arg, struct imp_entry *e);
	void (*bad)(void *arg, const char *rel, int err);
};
int imp_src_scan(struct imp_src *s, const struct imp_scan_cbs *cbs);

/* Read a file entry: open, then its bytes in turn (a buffer of the
 * reader's, valid until the next call; *n 0 at the end), then close.
 * The reader's mtime is the one the bytes go with (a local file's at
 * open). */
int imp_reader_open(struct imp_src *s, const struct imp_entry *e,
		    struct imp_reader **out);
int imp_reader_next(struct imp_reader *r, const void **data, size_t *n);
const struct timespec *imp_reader_mtime(const struct imp_reader *r);
void imp_reader_close(struct imp_reader *r);

/* ---- destinations ----------------------------------------------------- */

struct imp_dst;
struct imp_out; /* a file being written */

/* What is at a name of the destination. */
struct imp_stat {
	enum imp_kind kind;
	uint64_t size;
	struct timespec mtime;
};

/*
 * A directory of a mounted granary volume (dest_path; made if missing,
 * its parent must exist), or, with meta_url, the path dest_path inside
 * that volume, opened in this process (made if missing). *why says what
 * failed. The root's imp_dir is handed out in *root (one reference).
 */
int imp_dst_open(const char *meta_url, const char *dest_path, int threads,
		 struct imp_dst **out, struct imp_dir **root, char *why,
		 size_t cap);
/* Wait until every file is in the store (a --writeback mount's staged
 * packs), then close. */
int imp_dst_sync(struct imp_dst *d);
void imp_dst_close(struct imp_dst *d);
/* How the batches of small files are cut (import_gate.c): at most this
 * many files write and fsync at once. */
int imp_dst_batch_max(const struct imp_dst *d);
/* At most this many of them fsync at once (0: no bound but the threads):
 * through a mount, each holds a thread of the client's. */
int imp_dst_flight(const struct imp_dst *d);

/* The directory name in parent, made with mode if missing (out->fresh
 * then). EEXIST: something else than a directory is there. */
int imp_dst_mkdir(struct imp_dst *d, struct imp_dir *parent, const char *name,
		  mode_t mode, struct imp_dir **out);
void imp_dir_put(struct imp_dst *d, struct imp_dir *dir);
void imp_dir_get(struct imp_dir *dir);

/* ENOENT when nothing is there. */
int imp_dst_stat(struct imp_dst *d, struct imp_dir *dir, const char *name,
		 struct imp_stat *st);
/* target: malloc'd */
int imp_dst_readlink(struct imp_dst *d, struct imp_dir *dir, const char *name,
		     char **target);
/* A new file name (not there before: EEXIST) open for writing. */
int imp_dst_create(struct imp_dst *d, struct imp_dir *dir, const char *name,
		   mode_t mode, struct imp_out **out);
int imp_out_write(struct imp_out *f, const void *buf, size_t n, uint64_t off);
/* Data and metadata durable (as the destination's fsync promises). */
int imp_out_fsync(struct imp_out *f);
/* Its next fsync is one of a batch of n (id: the gate's): a hint. */
void imp_out_batch(struct imp_out *f, uint64_t id, int n);
int imp_out_set_mtime(struct imp_out *f, const struct timespec *t);
/* Close (an error of the close is returned; f is gone either way). */
int imp_out_close(struct imp_out *f);
int imp_dst_rename(struct imp_dst *d, struct imp_dir *dir, const char *from,
		   const char *to);
int imp_dst_unlink(struct imp_dst *d, struct imp_dir *dir, const char *name);
int imp_dst_symlink(struct imp_dst *d, struct imp_dir *dir, const char *name,
		    const char *target);
/* fn(arg, name) for each name in dir (not . and ..); its non-zero return
 * stops the listing and is returned. */
int imp_dst_list(struct imp_dst *d, struct imp_dir *dir,
		 int (*fn)(void *arg, const char *name), void *arg);

/* ---- the gate of small files (import_gate.c) --------------------------- */

#define IMP_PACK_BYTES	   (4u << 20) /* a client's pack: a batch's at most */
#define IMP_FRAME_OVERHEAD 128	      /* a frame's header in it, about */

struct imp_batch;

/*
 * Batches of small files written and fsync'd together (see import_gate.c
 * for the protocol). drained(arg): no more files will be taken (the walk
 * is over and every entry taken); stopping(arg): the import stops (let
 * every batch go). Both are called under lock, which is a leaf.
 */
struct imp_gate {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int batch_max, flight_max;
	int (*drained)(void *arg);
	int (*stopping)(void *arg);
	void *arg;
	int preparing, flight;		    /* protected by lock */
	uint64_t next_id;		    /* protected by lock */
	struct imp_batch *waiting, *newest; /* protected by lock */
};

void imp_gate_init(struct imp_gate *g, int batch_max, int flight_max,
		   int (*drained)(void *arg), int (*stopping)(void *arg),
		   void *arg);
void imp_gate_release(struct imp_gate *g);
/* A small file is being prepared: a batch may wait for it. */
void imp_gate_prepare(struct imp_gate *g);
/* It will not come after all. */
void imp_gate_abort(struct imp_gate *g);
/* It is ready (bytes long): wait until its batch may write. NULL (out of
 * memory): write alone. */
struct imp_batch *imp_gate_enter(struct imp_gate *g, uint64_t bytes);
/* Its members, and its id (not 0, unique in the process and, likely,
 * among importers of one mount), once entered. */
int imp_batch_members(const struct imp_batch *b, uint64_t *id);
/* Written (or failed): wait until every member of b has. */
void imp_batch_written(struct imp_gate *g, struct imp_batch *b);
/* Fsync'd (or failed): leave b. */
void imp_gate_leave(struct imp_gate *g, struct imp_batch *b);
/* Look again at the waiting batches (drained or stopping changed). */
void imp_gate_kick(struct imp_gate *g);

#endif
