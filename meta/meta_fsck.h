/*
 * meta_fsck.h - what fsck (gc/fsck.h) reads again of what it found
 * wrong, and its repairs. Each repair is one script that first checks
 * that what it changes is still as fsck saw it, so that a repair never
 * undoes what a live client did meanwhile. The walks fsck makes are in
 * meta_scan.h. Types and errors: meta.h.
 */
#ifndef GRANARY_META_FSCK_H
#define GRANARY_META_FSCK_H

#include "meta/meta.h"

/* The Redis server's clock (unix seconds and nanoseconds, to the
 * microsecond): an inode changed since has a ctime at or after it (every
 * script takes its time from there). */
int meta_server_time(struct meta *m, int64_t *sec, uint32_t *nsec);

/* The two counters as stored (totalinodes, usedspace; SCHEMA.md), a
 * negative value as it is. */
int meta_fsck_counters(struct meta *m, int64_t *inodes, int64_t *used);

/* ---- reading again ----------------------------------------------------- */

#define META_FSCK_REC 64
struct meta_fsck_inode {
	uint64_t ino; /* in */
	int exists;   /* its attribute field is there */
	int corrupt;  /* ... but holds no inode record (a is zero) */
	int open;     /* o<ino>: some session has it open */
	struct meta_attr a;
	size_t rec_len;
	char rec[META_FSCK_REC]; /* the record as read, for a repair */
};
/* Each of v[0..n) as it is now (one pipeline). */
int meta_fsck_inodes(struct meta *m, struct meta_fsck_inode *v, size_t n);

struct meta_fsck_entry {
	uint64_t dir;	  /* in */
	const char *name; /* in */
	int exists;
	uint64_t ino;
	uint8_t type; /* the entry's */
	size_t val_len;
	char val[16]; /* the entry's value as read, for a repair */
};
/* Each entry of v[0..n) as it is now (one pipeline); an entry value that
 * is no entry reads as ino 0, type 0. */
int meta_fsck_entries(struct meta *m, struct meta_fsck_entry *v, size_t n);

/* The references beyond the first of each slice of ids[0..n) (sliceref;
 * 0 when it has no field). */
int meta_fsck_slicerefs(struct meta *m, const uint64_t *ids, size_t n,
			int64_t *extra);

/* Are the chunk lists of inode ino that fsck found without their inode
 * (c<ino>_<idx>, or with tail its tail field) still there, the inode
 * still missing and not in delfiles? Read in the order that shows what a
 * client did meanwhile: *stray 1 only when all three hold. */
int meta_fsck_stray_chunks(struct meta *m, uint64_t ino, uint32_t idx, int tail,
			   int *stray);

/* pendingspace and the sum of the sessionpending fields, read together
 * (one script: nothing moves between the two). */
int meta_fsck_pending(struct meta *m, int64_t *pending, int64_t *sum);
/* Is "<ino>:<length>" still a member of delfiles? */
int meta_fsck_delfile(struct meta *m, uint64_t ino, uint64_t length,
		      int *member);
/* Is the open of ino by session sid still recorded in o<ino> (ino 0:
 * does so<sid> still exist)? */
int meta_fsck_open(struct meta *m, uint64_t sid, uint64_t ino, int *exists);

/* ---- repairs ----------------------------------------------------------- */
/* Each answers EAGAIN when what it would change is not as fsck saw it any
 * more (the caller counts it skipped), else as meta.h; EROFS on a
 * read-only handle. */

/*
 * The inode whose attribute record is still was->rec, and which no
 * session has open (else EBUSY): its nlink (UINT32_MAX: as it is), its
 * parent (directories; 0: as it is), and with lost_found, a name "#<ino>"
 * in the root's lost+found, made when missing (a directory 0700 owned by
 * root; ENOTDIR when the root's lost+found is no directory, EEXIST when
 * the name is taken). ctime becomes now.
 */
int meta_fsck_fix_inode(struct meta *m, const struct meta_fsck_inode *was,
			uint32_t nlink, uint64_t parent, int lost_found);
/* The entry was->name of was->dir, still was->val: given the type
 * new_type (that of the inode it names), or removed (new_type 0; only
 * while the inode it names does not exist). */
int meta_fsck_fix_entry(struct meta *m, const struct meta_fsck_entry *was,
			uint8_t new_type);

enum meta_counter { META_COUNTER_INODES = 1, META_COUNTER_USED };
/* The counter becomes now, if it is still was. */
int meta_fsck_fix_counter(struct meta *m, enum meta_counter c, int64_t was,
			  int64_t now);
/* The references beyond the first of slice id (sliceref) become extra
 * (0: its field goes), if they are still was. */
int meta_fsck_fix_sliceref(struct meta *m, uint64_t id, int64_t was,
			   int64_t extra);
/* The chunk lists (and tail field) of inode ino, which does not exist,
 * handed to reclamation as those of a deleted file of that length
 * (delfiles): their references are dropped as a deletion's are. */
int meta_fsck_fix_stray_chunks(struct meta *m, uint64_t ino, uint64_t length);
/* The dead bytes of pack (packdead) become dead (0: the field goes), if
 * they are still was. */
int meta_fsck_fix_packdead(struct meta *m, uint64_t pack, int64_t was,
			   int64_t dead);
/* The delfiles member "<ino>:<length>" of an inode that exists, removed
 * (EAGAIN when the inode or the member is gone). */
int meta_fsck_fix_delfile(struct meta *m, uint64_t ino, uint64_t length);
/* Chunk list idx of the file whose attribute record is still was->rec,
 * whose length ends at or before the chunk: dropped as truncate drops
 * it (its references with it). */
int meta_fsck_fix_chunk(struct meta *m, const struct meta_fsck_inode *was,
			uint32_t idx);
/* pendingspace, if it is still was, set to the sum of sessionpending. */
int meta_fsck_fix_pending(struct meta *m, int64_t was);
/* The open of ino by session sid, no longer in sessions (EAGAIN when it
 * is again), removed as a dead session's cleanup removes it (the inode
 * deleted when it was the last open of an unlinked file); ino 0: every
 * open of so<sid>. */
int meta_fsck_fix_open(struct meta *m, uint64_t sid, uint64_t ino);
/* The names[0..n) in staging of session sid, no longer in sessions,
 * released as staging_done releases them (those another session holds
 * are left). */
int meta_fsck_fix_staging(struct meta *m, uint64_t sid,
			  const char *const *names, size_t n);
/* The dead records of slice id (id 0: of the whole pack), still
 * referenced, removed from delslices, delayslices and stagedead (EAGAIN:
 * none was left). Only when its objects are in the store. */
int meta_fsck_fix_dead(struct meta *m, uint64_t id, uint64_t pack);
/* The total of a pack that has none in packs (EAGAIN when it has one). */
int meta_fsck_fix_pack_total(struct meta *m, uint64_t pack, uint64_t total);
/* The sessionstaged and sessionpending fields and the cache group
 * records of a session no longer in sessions (EAGAIN when it is again),
 * removed as a dead session's cleanup removes them. */
int meta_fsck_fix_session(struct meta *m, uint64_t sid);
/*
 * The key `trash`, still was and naming no directory (EAGAIN otherwise),
 * made right: when the root's META_TRASH entry is a directory (what a
 * version restore of the root left before it kept the trash: a plain copy
 * of it), that directory becomes the trash, its hour directories counted
 * again (trashcount: their entries; trashbytes of those hours starts at
 * 0, a lower bound as ever); else the key goes, and the next removal
 * makes a new trash. Either way the counts of hour directories that are
 * not in the trash go, with their tn<hour> keys (SCHEMA.md, "Trash").
 */
int meta_fsck_fix_trash(struct meta *m, uint64_t was);

#endif
