/*
 * fusedev.c - the /dev/fuse channel's reads and writes; see fusedev.h.
 *
 * Only the kernel's protocol header is included here (linux/fuse.h, the
 * layout of the INIT request and reply); session.c, which includes libfuse's
 * headers, holds the glue. The flag's value is fixed by the protocol
 * (7.39); older kernel headers do not name it.
 */
#include <linux/fuse.h>
#include <stddef.h>
#include <unistd.h>

#include "fs/fuse/fusedev.h"

#ifndef FUSE_DIRECT_IO_ALLOW_MMAP
#define FUSE_DIRECT_IO_ALLOW_MMAP (1ULL << 36)
#endif
#define FLAG2_DIO_MMAP ((uint32_t)(FUSE_DIRECT_IO_ALLOW_MMAP >> 32))

/* headers from before protocol 7.36 have no flags2: offer nothing */
#if FUSE_KERNEL_MINOR_VERSION >= 36
static void see_request(struct fusedev *d, const void *buf, size_t len)
{
	const struct fuse_in_header *h = buf;
	if (len < sizeof(*h) || h->opcode != FUSE_INIT)
		return;
	const struct fuse_init_in *in = (const void *)(h + 1);
	if (len < sizeof(*h) + offsetof(struct fuse_init_in, flags2) +
		      sizeof(in->flags2))
		return;
	int offered =
	    (in->flags & FUSE_INIT_EXT) && (in->flags2 & FLAG2_DIO_MMAP);
	__atomic_store_n(&d->offered, offered, __ATOMIC_RELEASE);
	__atomic_store_n(&d->init_unique, h->unique, __ATOMIC_RELEASE);
}

static void see_reply(struct fusedev *d, struct iovec *iov, int count)
{
	uint64_t unique = __atomic_load_n(&d->init_unique, __ATOMIC_ACQUIRE);
	if (!unique || count < 2 ||
	    iov[0].iov_len != sizeof(struct fuse_out_header))
		return;
	const struct fuse_out_header *o = iov[0].iov_base;
	if (o->unique != unique)
		return;
	__atomic_store_n(&d->init_done, 1, __ATOMIC_RELEASE);
	struct fuse_init_out *out = iov[1].iov_base;
	if (o->error || !d->want || !d->offered ||
	    iov[1].iov_len <
		offsetof(struct fuse_init_out, flags2) + sizeof(out->flags2) ||
	    !(out->flags & FUSE_INIT_EXT))
		return;
	out->flags2 |= FLAG2_DIO_MMAP;
	__atomic_store_n(&d->granted, 1, __ATOMIC_RELEASE);
}
#else
static void see_request(struct fusedev *d, const void *buf, size_t len)
{
	(void)d, (void)buf, (void)len;
}
static void see_reply(struct fusedev *d, struct iovec *iov, int count)
{
	(void)iov, (void)count;
	__atomic_store_n(&d->init_done, 1, __ATOMIC_RELEASE);
}
#endif

ssize_t fusedev_read(struct fusedev *d, int fd, void *buf, size_t len)
{
	ssize_t n = read(fd, buf, len);
	if (n > 0 && !__atomic_load_n(&d->init_done, __ATOMIC_ACQUIRE))
		see_request(d, buf, (size_t)n);
	return n;
}

ssize_t fusedev_writev(struct fusedev *d, int fd, struct iovec *iov, int count)
{
	if (!__atomic_load_n(&d->init_done, __ATOMIC_ACQUIRE))
		see_reply(d, iov, count);
	return writev(fd, iov, count);
}

int fusedev_dio_mmap(const struct fusedev *d)
{
	return __atomic_load_n(&d->granted, __ATOMIC_ACQUIRE);
}
