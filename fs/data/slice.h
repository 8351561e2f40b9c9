/*
 * slice.h - resolve a chunk's slice list (newest covers oldest) into the
 * visible extents, in offset order. Pure functions, no I/O.
 */
#ifndef GRANARY_SLICE_H
#define GRANARY_SLICE_H

#include <stddef.h>
#include "meta/meta.h"

/*
 * in[0..n) is oldest first. *out (malloc'd, caller frees) receives the
 * visible, non-overlapping extents sorted by pos; each is a meta_slice whose
 * off/len/pos are narrowed to what is visible. Holes (id 0 slices and gaps)
 * are left out: the reader fills them with zeros. Returns 0 or ENOMEM.
 */
int slice_resolve(const struct meta_slice *in, size_t n,
		  struct meta_slice **out, size_t *nout);

#endif
