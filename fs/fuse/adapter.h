/*
 * adapter.h - what the two files of the FUSE adapter share: the session's
 * state (ops.c answers requests, session.c mounts and runs the loop).
 */
#ifndef GRANARY_ADAPTER_H
#define GRANARY_ADAPTER_H

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <pthread.h>

#include "fs/fs.h"
#include "fs/fuse/fusedev.h"
#include "fs/vfs/vfs.h"

/* The kernel's readahead of a file read through the mount. It caps what
 * init asks for at the 128 KiB default of the mount's backing device, so
 * that is raised too once the mount is up (session.c). */
#define KERNEL_RA_BYTES (4u << 20)

struct gfuse {
	struct fs *fs;
	const struct fs_opts *o;
	struct fuse_session *se;
	struct fusedev dev; /* the channel's I/O (see fusedev.h) */

	/* start-up: ready() is called once, after the kernel's INIT was
	 * answered and a statfs through the mount succeeded */
	void (*ready)(void *arg, int err, const char *msg);
	void *ready_arg;
	pthread_mutex_t ready_lock; /* leaf */
	pthread_cond_t ready_cond;
	int inited, loop_done, ready_done; /* protected by ready_lock */
};

extern const struct fuse_lowlevel_ops gfuse_ops;

#endif
