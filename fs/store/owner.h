/*
 * owner.h - the volume a store belongs to (its marker object) and the
 * places of storage URLs, for the checks of format, mount and gc that no
 * two volumes share or nest their objects. Implemented in objstore.c.
 */
#ifndef GRANARY_OWNER_H
#define GRANARY_OWNER_H

#include <stddef.h>

#include "fs/store/objstore.h"

/*
 * The volume a store belongs to: object OBJSTORE_OWNER_KEY, written by
 * `granary format` (and by the first read-write mount of a volume made
 * before it existed). Two volumes on one bucket and prefix would write the
 * same keys over each other, so format refuses a store that names another
 * volume, and mount a store that names another volume than its own.
 */
#define OBJSTORE_OWNER_KEY "granary.volume"
struct objstore_owner {
	char uuid[40];
	char name[256];
};
/* Read the marker: 0, ENOENT when there is none, EINVAL when the object is
 * not a marker, or the get's error. */
int objstore_owner_get(struct objstore *s, struct objstore_owner *o);
int objstore_owner_put(struct objstore *s, const struct objstore_owner *o);
/* The marker of the place url (below), opening nothing that is missing
 * (objstore_open would create a file:// directory): as objstore_owner_get,
 * ENOENT also when the directory does not exist. */
int objstore_owner_at(const char *url, const struct objstore_creds *creds,
		      struct objstore_owner *o);

/*
 * Places, for format's overlap check: the storage of one volume must not
 * lie inside another's, nor hold one, or a scan of the outer store (gc)
 * takes the inner volume's objects for its own. A place is one location:
 * an s3 bucket and prefix, one file:// directory, a mem:// store.
 * objstore_url_place(): the i-th place of url (the i-th directory of a
 * file:// pool as file:///DIR; url itself at i 0 otherwise), trailing '/'
 * dropped; ENOENT past the last. objstore_url_parent(): the place one level
 * up (file:///A/B -> file:///A -> file:///, s3://H/BUCKET/A ->
 * s3://H/BUCKET); ENOENT at the top (file:///, a bucket, mem://), EINVAL
 * for a pool. Lexical: "." and ".." are components like others, so the
 * walk passes every real ancestor. Both: OBJSTORE_EURL when malformed,
 * ENAMETOOLONG when out (cap bytes) is too short.
 */
int objstore_url_place(const char *url, size_t i, char *out, size_t cap);
int objstore_url_parent(const char *url, char *out, size_t cap);

#endif
