/*
 * fusedev.h - reads and writes of the /dev/fuse channel, for one init flag
 * libfuse cannot ask for.
 *
 * A read of a direct_io open (FOPEN_DIRECT_IO) goes from the daemon
 * straight into the reader's buffer: no copy of every byte into the page
 * cache, whose new pages cost more than the copy on some machines (a VM
 * whose free memory goes back to its host) and evict what other programs
 * keep there. A direct_io open refuses a shared mmap, though (ENODEV: how
 * safetensors and torch.load(mmap=True) load), unless the connection
 * negotiated FUSE_DIRECT_IO_ALLOW_MMAP (kernel 6.6 and later; the shared
 * mapping then goes through the page cache). libfuse 3.14 has no way to
 * ask for a flag in the upper half of the init flags, so the session's
 * channel I/O runs through here (fuse_session_custom_io): the kernel's INIT
 * request shows whether it offers the flag, and the reply to it asks for
 * it. Nothing else is looked at or changed.
 *
 * Thread-safe: the fields are atomics, written while the kernel waits for
 * the INIT reply (it sends nothing else before) and only read after.
 */
#ifndef GRANARY_FUSEDEV_H
#define GRANARY_FUSEDEV_H

#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

struct fusedev {
	int want;	      /* ask for the flag if the kernel offers it */
	int offered;	      /* the kernel's INIT offered it */
	int granted;	      /* our INIT reply asked for it: shared mmap of a
				 direct_io open works */
	uint64_t init_unique; /* the INIT request's id; 0 before it came */
	int init_done;	      /* the INIT reply went out */
};

/* The channel's read and writev, as struct fuse_custom_io wants them, but
 * with the fusedev as the last argument. */
ssize_t fusedev_read(struct fusedev *d, int fd, void *buf, size_t len);
ssize_t fusedev_writev(struct fusedev *d, int fd, struct iovec *iov, int count);
/* Has the connection got FUSE_DIRECT_IO_ALLOW_MMAP? */
int fusedev_dio_mmap(const struct fusedev *d);

#endif
