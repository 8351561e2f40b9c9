/*
 * linelog.h - a log file written by a thread of its own, through a
 * bounded buffer, for lines produced where waiting is not allowed (the
 * access log: one line per FUSE operation).
 *
 * linelog_put() copies the line into the buffer under a lock held for the
 * copy only; a full buffer drops the line and counts it: a slow disk costs
 * lines, never a FUSE request's time. The writer thread empties the
 * buffer every 200 ms (sooner when it is half full) with one write(2).
 *
 * Rotation: the file is opened again (O_APPEND, created 0640) when the
 * process gets SIGHUP (after linelog_hup_install()) or when the path
 * names another file than the one open (moved away by logrotate, or
 * deleted), checked once a second; nothing is lost across a move: what
 * was buffered goes to the old file, the rest to the new one.
 */
#ifndef GRANARY_LINELOG_H
#define GRANARY_LINELOG_H

#include <stddef.h>
#include <stdint.h>

struct linelog;

/* Open (create) path for appending, with a buffer of cap bytes (0: 1
 * MiB), and start the writer. 0, or the errno of the open. */
int linelog_open(const char *path, size_t cap, struct linelog **out);
/* Append len bytes (a whole line, its '\n' included) or drop them. */
void linelog_put(struct linelog *l, const char *line, size_t len);
/* Lines written, and dropped because the buffer was full. */
void linelog_counts(struct linelog *l, uint64_t *lines, uint64_t *dropped);
/* Write what is buffered, stop the writer, close. NULL-safe. */
void linelog_close(struct linelog *l);

/*
 * SIGHUP reopens every linelog (and stops nothing: libfuse's handlers
 * would end the mount on it); a handler installed before (the client
 * log's) is called too. A handler installed later wins.
 * linelog_hup_count() is the number of SIGHUPs seen, for other files that
 * want to reopen on it too.
 */
void linelog_hup_install(void);
uint64_t linelog_hup_count(void);

#endif
