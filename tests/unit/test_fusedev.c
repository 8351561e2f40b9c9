/*
 * test_fusedev.c - the /dev/fuse channel's I/O (fs/fusedev.c) on a pipe:
 * the reply to the kernel's INIT asks for FUSE_DIRECT_IO_ALLOW_MMAP only
 * when the kernel offered it and the mount wants it; every other message
 * goes through byte for byte.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <linux/fuse.h>
#include <string.h>
#include <unistd.h>

#include "fs/fuse/fusedev.h"

#define FLAG2 (1u << 4) /* FUSE_DIRECT_IO_ALLOW_MMAP >> 32 */

struct init_req {
	struct fuse_in_header h;
	struct fuse_init_in in;
};

/* the kernel's side: a request written into the pipe, read by fusedev */
static void kernel_sends(struct fusedev *d, uint32_t opcode, uint64_t unique,
			 uint32_t flags, uint32_t flags2)
{
	int p[2];
	struct init_req r = {0}, got;

	cr_assert_eq(pipe(p), 0);
	r.h.len = sizeof(r);
	r.h.opcode = opcode;
	r.h.unique = unique;
	r.in.major = 7;
	r.in.minor = 41;
	r.in.flags = flags;
	r.in.flags2 = flags2;
	cr_assert_eq(write(p[1], &r, sizeof(r)), (ssize_t)sizeof(r));
	cr_assert_eq(fusedev_read(d, p[0], &got, sizeof(got)),
		     (ssize_t)sizeof(got));
	cr_assert_eq(memcmp(&got, &r, sizeof(r)), 0, "a request was changed");
	close(p[0]);
	close(p[1]);
}

/* the daemon's side: a reply (libfuse's INIT reply: header, then the
 * init_out) through fusedev; returns what the kernel would read */
static struct fuse_init_out reply(struct fusedev *d, uint64_t unique,
				  int32_t error, uint32_t flags)
{
	int p[2];
	struct fuse_out_header o = {.unique = unique, .error = error};
	struct fuse_init_out out = {.major = 7, .minor = 36, .flags = flags};
	struct iovec iov[2] = {{&o, sizeof(o)}, {&out, sizeof(out)}};
	struct {
		struct fuse_out_header o;
		struct fuse_init_out out;
	} got;

	o.len = sizeof(got);
	cr_assert_eq(pipe(p), 0);
	cr_assert_eq(fusedev_writev(d, p[1], iov, 2), (ssize_t)sizeof(got));
	cr_assert_eq(read(p[0], &got, sizeof(got)), (ssize_t)sizeof(got));
	close(p[0]);
	close(p[1]);
	cr_assert_eq(got.o.unique, unique);
	return got.out;
}

Test(fusedev, asks_when_offered_and_wanted)
{
	struct fusedev d = {.want = 1};
	kernel_sends(&d, FUSE_INIT, 2, FUSE_INIT_EXT | FUSE_ASYNC_READ, FLAG2);
	cr_assert_eq(fusedev_dio_mmap(&d), 0, "granted before the reply");
	struct fuse_init_out out = reply(&d, 2, 0, FUSE_INIT_EXT);
	cr_assert_eq(out.flags2 & FLAG2, FLAG2, "the reply did not ask");
	cr_assert_eq(out.flags, FUSE_INIT_EXT, "other flags changed");
	cr_assert_eq(fusedev_dio_mmap(&d), 1);
}

Test(fusedev, not_offered_not_asked)
{
	struct fusedev d = {.want = 1};
	kernel_sends(&d, FUSE_INIT, 2, FUSE_INIT_EXT, 0);
	cr_assert_eq(reply(&d, 2, 0, FUSE_INIT_EXT).flags2, 0);
	cr_assert_eq(fusedev_dio_mmap(&d), 0);
}

Test(fusedev, old_kernel_without_flags2)
{
	struct fusedev d = {.want = 1};
	/* flags2 is garbage when FUSE_INIT_EXT is not set */
	kernel_sends(&d, FUSE_INIT, 2, FUSE_ASYNC_READ, FLAG2);
	cr_assert_eq(reply(&d, 2, 0, 0).flags2, 0);
	cr_assert_eq(fusedev_dio_mmap(&d), 0);
}

Test(fusedev, not_wanted)
{
	struct fusedev d = {.want = 0};
	kernel_sends(&d, FUSE_INIT, 2, FUSE_INIT_EXT, FLAG2);
	cr_assert_eq(reply(&d, 2, 0, FUSE_INIT_EXT).flags2, 0);
	cr_assert_eq(fusedev_dio_mmap(&d), 0);
}

Test(fusedev, failed_init_not_granted)
{
	struct fusedev d = {.want = 1};
	kernel_sends(&d, FUSE_INIT, 2, FUSE_INIT_EXT, FLAG2);
	cr_assert_eq(reply(&d, 2, -EPROTO, FUSE_INIT_EXT).flags2, 0);
	cr_assert_eq(fusedev_dio_mmap(&d), 0);
}

Test(fusedev, other_messages_untouched)
{
	struct fusedev d = {.want = 1};
	/* a reply before INIT's, and a request and reply after it */
	cr_assert_eq(reply(&d, 7, 0, FUSE_INIT_EXT).flags2, 0);
	kernel_sends(&d, FUSE_INIT, 2, FUSE_INIT_EXT, FLAG2);
	cr_assert_eq(reply(&d, 3, 0, FUSE_INIT_EXT).flags2, 0,
		     "a reply to another request was changed");
	reply(&d, 2, 0, FUSE_INIT_EXT);
	kernel_sends(&d, FUSE_LOOKUP, 4, FUSE_INIT_EXT, FLAG2);
	cr_assert_eq(reply(&d, 4, 0, FUSE_INIT_EXT).flags2, 0,
		     "a reply after INIT's was changed");
	cr_assert_eq(fusedev_dio_mmap(&d), 1);
}
