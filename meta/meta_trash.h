/*
 * meta_trash.h - the trash. While a volume's trash_days is above 0
 * (meta_volume.h), what unlink, rmdir and rename remove for good (the last
 * name of a file, an empty directory) is not deleted: its entry moves, in
 * the same script, into the hour directory of the trash, META_TRASH at
 * the root (root's, mode 0700), named "<parent>-<ino>-<name>" (cut to
 * META_NAME_MAX bytes; the whole name is kept beside it). Removal inside
 * the trash is final. Hour directories older than trash_days are purged
 * by the mounted clients (one at a time) or by `granary trash purge`.
 * Layout and rules: SCHEMA.md, "Trash". Types and errors: meta.h.
 */
#ifndef GRANARY_META_TRASH_H
#define GRANARY_META_TRASH_H

#include "meta/meta.h"

/* meta_unlink and meta_rename that also tell which inode they moved into
 * the trash (*trashed, 0: none), for a client to show that file's link
 * count as 0 through descriptors still open (POSIX). */
int meta_unlink_trashed(struct meta *m, uint64_t parent, const char *name,
			uint64_t *trashed);
int meta_rename_trashed(struct meta *m, uint64_t parent, const char *name,
			uint64_t newparent, const char *newname, unsigned flags,
			uint64_t *trashed);

/* The trash directory's inode; 0 when the volume has none yet. */
int meta_trash_ino(struct meta *m, uint64_t *ino);

struct meta_trash_entry {
	char hour[16];	   /* its hour directory: "YYYY-MM-DD-HH", UTC */
	uint64_t hour_ino; /* the hour directory's inode */
	char *name;	   /* the entry's name in the hour directory */
	uint64_t ino;
	uint64_t parent; /* the directory it was removed from (0: a name
			    not of the trash's form, put there by hand) */
	char *orig;	 /* its name there, whole */
	struct meta_attr attr;
};
/* Everything in the trash, hour by hour (oldest first), in name order
 * within an hour. */
int meta_trash_list(struct meta *m, struct meta_trash_entry **out, size_t *n);
void meta_trash_entries_free(struct meta_trash_entry *e, size_t n);

/* Entry `name` of hour directory hour_ino back into the namespace as
 * newname in newparent, in one script: ENOENT (the entry or the parent is
 * gone), EEXIST (the name is taken), EPERM (the parent is in the trash:
 * restore it first), ENOTDIR, EINVAL (a reserved name), EDQUOT (it does
 * not fit in the quotas above newparent, which count it again). */
int meta_trash_restore(struct meta *m, uint64_t hour_ino, const char *name,
		       uint64_t newparent, const char *newname);

struct meta_trash_purged {
	uint64_t hours;	  /* hour directories deleted */
	uint64_t entries; /* entries deleted for good */
};
/* Delete the hour directories whose hour ended at or before `before`
 * (server unix seconds; INT64_MAX: every one) and what they hold. The
 * data of files is then reclaimed as after any deletion. Safe beside
 * clients and other purges. out may be NULL. */
int meta_trash_purge(struct meta *m, int64_t before,
		     struct meta_trash_purged *out);
/* The background purge of a client: when no other client took the turn
 * within the last `period` seconds (SET trashpurge NX EX period), take
 * it and purge what is older than the volume's trash_days (everything
 * when it is 0), as if the server's clock were `skew` seconds ahead (a
 * test's knob). *ran: 1 when this client took the turn. */
int meta_trash_purge_due(struct meta *m, unsigned period, int64_t skew,
			 int *ran, struct meta_trash_purged *out);

struct meta_trash_usage {
	uint64_t bytes;	  /* the stored bytes of the files in the trash
			     when they were put there */
	uint64_t entries; /* entries in the trash */
};
int meta_trash_usage(struct meta *m, struct meta_trash_usage *u);

/* The start (unix seconds) of an hour directory's hour; -1 when name is
 * not "YYYY-MM-DD-HH". */
int64_t meta_trash_hour_start(const char *name);

#endif
