/*
 * closer.h - the last closes of files, released in the metadata in batches.
 *
 * When a client's last handle of a file closes, it drops its open
 * registration (meta_file_release), which keeps an unlinked file alive for
 * its readers. Nobody waits for that step: close() returned at FLUSH,
 * before the kernel sent RELEASE. A closer gathers these releases for a
 * few milliseconds and sends them in one round trip, so that an ingest of
 * many small files pays one script per batch instead of one per file. The
 * only visible cost is that a file unlinked while open is reclaimed that
 * much later (close-to-open is about data, committed at FLUSH).
 *
 * Thread-safe. Locks: closer->lock is a leaf; the freed callback runs
 * without it, on the closer's thread.
 */
#ifndef GRANARY_CLOSER_H
#define GRANARY_CLOSER_H

#include <stdint.h>

#include "meta/meta.h"

struct closer;

/* delay_ms: how long a release may wait for others (0: sent at once,
 * still one round trip for all that queue up meanwhile). freed (may be
 * NULL) is called after a batch that deleted inodes (data to reclaim). */
int closer_open(struct meta *m, unsigned delay_ms, void (*freed)(void *arg),
		void *arg, struct closer **out);
/* Release this client's open of ino soon; done at once, in the caller,
 * when memory to queue it runs out. */
void closer_add(struct closer *c, uint64_t ino);
/* Send every release queued, then stop. NULL-safe. */
void closer_close(struct closer *c);

#endif
