/*
 * session.c - fs_mount (fs.h): open the vfs, start a FUSE session with
 * the adapter's operations (ops.c), mount it, report start-up once the
 * mount answers, serve until unmounted, then close the vfs.
 */
#include "fs/fuse/adapter.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/errors.h"
#include "lib/log.h"

static ssize_t dev_read(int fd, void *buf, size_t len, void *userdata)
{
	return fusedev_read(&((struct gfuse *)userdata)->dev, fd, buf, len);
}

static ssize_t dev_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	return fusedev_writev(&((struct gfuse *)userdata)->dev, fd, iov, count);
}

/* Before the session loop, so that the kernel's INIT goes through
 * fusedev: only when reads past the page cache are wanted at all. */
static void use_fusedev(struct gfuse *g)
{
	if (vfs_direct_read(g->fs) == UINT64_MAX)
		return;
	const struct fuse_custom_io io = {.read = dev_read,
					  .writev = dev_writev};
	g->dev.want = 1;
	if (fuse_session_custom_io(g->se, &io, fuse_session_fd(g->se)))
		log_warn("cannot route the FUSE channel's I/O: big files are "
			 "read through the page cache");
}

static int mount_fail(void (*ready)(void *, int, const char *), void *arg,
		      int err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int mount_fail(void (*ready)(void *, int, const char *), void *arg,
		      int err, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_err("%s", msg);
	if (ready)
		ready(arg, err ? err : EIO, msg);
	return err ? err : EIO;
}

/* Report start-up once: whoever comes first of the watcher and the end of
 * the session loop. */
static void report_ready(struct gfuse *g, int err, const char *msg)
{
	pthread_mutex_lock(&g->ready_lock);
	int first = !g->ready_done;
	g->ready_done = 1;
	pthread_mutex_unlock(&g->ready_lock);
	if (!first)
		return;
	if (err)
		log_err("%s", msg);
	if (g->ready)
		g->ready(g->ready_arg, err, msg);
}

/*
 * Let the kernel read ahead KERNEL_RA_BYTES of a file read through the
 * mount (its backing device starts at 128 KiB, whatever init asked for):
 * a sequential reader then sends 1 MiB requests, several at a time, rather
 * than a stream of 128 KiB ones, each a round trip through the daemon.
 * Best effort: only root may write the setting.
 */
static void kernel_readahead(const char *mountpoint)
{
	char line[PATH_MAX + 512], dev[32], ours[32] = "", mp[PATH_MAX + 1];
	char path[96];
	FILE *f = fopen("/proc/self/mountinfo", "re");

	if (!f)
		return;
	/* "ID PARENT MAJ:MIN ROOT MOUNTPOINT ...": the last match is ours
	 * (a mount point with spaces is escaped and never matches; then the
	 * setting is left alone) */
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%*s %*s %31s %*s %4096s", dev, mp) == 2 &&
		    strcmp(mp, mountpoint) == 0)
			memcpy(ours, dev, sizeof(ours));
	fclose(f);
	if (!ours[0])
		return;
	snprintf(path, sizeof(path), "/sys/class/bdi/%s/read_ahead_kb", ours);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	char kb[16];
	int n = snprintf(kb, sizeof(kb), "%u", KERNEL_RA_BYTES >> 10);
	if (write(fd, kb, (size_t)n) != n)
		log_debug("cannot set the kernel readahead in '%s': %s", path,
			  strerror(errno));
	close(fd);
}

static void *ready_watcher(void *arg)
{
	pthread_setname_np(pthread_self(), "gr-ready");
	struct gfuse *g = arg;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 30;
	pthread_mutex_lock(&g->ready_lock);
	while (!g->inited && !g->loop_done)
		if (pthread_cond_timedwait(&g->ready_cond, &g->ready_lock,
					   &ts) == ETIMEDOUT)
			break;
	int inited = g->inited, done = g->loop_done;
	pthread_mutex_unlock(&g->ready_lock);
	if (done)
		return NULL; /* the loop ended: fs_mount reports */
	if (!inited) {
		report_ready(g, ETIMEDOUT,
			     "the kernel did not start the mount within 30 s");
		return NULL;
	}
	/* statfs through the mount from a child process: a tool that runs
	 * this process's threads one at a time (valgrind) would otherwise
	 * hold the thread that must answer while this one waits for it */
	int err = 0;
	pid_t pid = fork();
	if (pid == 0) {
		struct statvfs sv;
		_exit(statvfs(g->o->mountpoint, &sv) == 0 ? 0 : errno & 0xff);
	}
	if (pid > 0) {
		int status;
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
		err = WIFEXITED(status) ? WEXITSTATUS(status) : EIO;
	} else {
		struct statvfs sv;
		err = statvfs(g->o->mountpoint, &sv) == 0 ? 0 : errno;
	}
	if (err) {
		char msg[1200];
		snprintf(msg, sizeof(msg), "mount on '%s' does not answer: %s",
			 g->o->mountpoint, strerror(err));
		report_ready(g, err, msg);
		return NULL;
	}
	kernel_readahead(g->o->mountpoint);
	report_ready(g, 0, NULL);
	return NULL;
}

int fs_mount(const struct fs_opts *o,
	     void (*ready)(void *arg, int err, const char *msg), void *arg)
{
	/* Block buffers (up to the block size, 4 MiB) come and go by the
	 * thousand: served by mmap they go back to the system when freed.
	 * glibc would otherwise raise its mmap threshold after the first
	 * free and keep them in per-thread heaps, where fragmentation let
	 * the daemon's memory grow far past --buffer-size. */
	mallopt(M_MMAP_THRESHOLD, 256 * 1024);
	struct gfuse *g = calloc(1, sizeof(*g));
	char msg[1024], mopts[2048];
	int err;

	if (!g)
		return mount_fail(ready, arg, ENOMEM, "out of memory");
	g->o = o;
	g->ready = ready;
	g->ready_arg = arg;
	pthread_mutex_init(&g->ready_lock, NULL);
	pthread_cond_init(&g->ready_cond, NULL);
	err = vfs_open_fs(o, &g->fs, msg, sizeof(msg));
	if (err) {
		if (ready)
			ready(arg, err, msg);
		goto free_g;
	}

	snprintf(
	    mopts, sizeof(mopts),
	    "fsname=granary:%s,subtype=granary,default_permissions%s%s%s%s",
	    vfs_volume_name(g->fs), o->allow_other ? ",allow_other" : "",
	    o->read_only ? ",ro" : "", o->fuse_opts && *o->fuse_opts ? "," : "",
	    o->fuse_opts ? o->fuse_opts : "");
	char *argv[] = {"granary", "-o", mopts, "-d", NULL};
	struct fuse_args args = FUSE_ARGS_INIT(o->debug ? 4 : 3, argv);
	g->se = fuse_session_new(&args, &gfuse_ops, sizeof(gfuse_ops), g);
	fuse_opt_free_args(&args);
	if (!g->se) {
		err = mount_fail(
		    ready, arg, EINVAL,
		    "cannot start FUSE session (bad -o options '%s'?)",
		    o->fuse_opts ? o->fuse_opts : "");
		goto close_vfs;
	}
	if (fuse_set_signal_handlers(g->se) != 0) {
		err = mount_fail(ready, arg, EIO, "cannot set signal handlers");
		goto destroy_se;
	}
	if (fuse_session_mount(g->se, o->mountpoint) != 0) {
		err = mount_fail(ready, arg, EIO, "cannot mount on '%s'",
				 o->mountpoint);
		goto remove_handlers;
	}
	use_fusedev(g);
	vfs_started(g->fs);

	log_info("mounted volume '%s' on %s", vfs_volume_name(g->fs),
		 o->mountpoint);
	pthread_t watcher;
	int watching = pthread_create(&watcher, NULL, ready_watcher, g) == 0;
	if (!watching)
		report_ready(g, 0, NULL);

	struct fuse_loop_config *lc = fuse_loop_cfg_create();
	fuse_loop_cfg_set_max_threads(lc, VFS_FUSE_THREADS);
	fuse_loop_cfg_set_idle_threads(lc, 8);
	err = fuse_session_loop_mt(g->se, lc);
	fuse_loop_cfg_destroy(lc);
	if (err < 0)
		err = -err;
	else
		err = 0; /* a signal or an unmount: a clean stop */

	pthread_mutex_lock(&g->ready_lock);
	g->loop_done = 1;
	pthread_cond_broadcast(&g->ready_cond);
	pthread_mutex_unlock(&g->ready_lock);
	if (watching)
		pthread_join(watcher, NULL);
	snprintf(msg, sizeof(msg),
		 "the mount on '%s' stopped while starting: %s", o->mountpoint,
		 strerror(err ? err : EPROTO));
	report_ready(g, err ? err : EPROTO, msg);

	fuse_session_unmount(g->se);
	log_info("unmounted %s", o->mountpoint);
remove_handlers:
	fuse_remove_signal_handlers(g->se);
destroy_se:
	/* calls destroy (ops.c: a flush) when the kernel sent none, as on
	 * an unmount: the vfs must still be there */
	fuse_session_destroy(g->se);
close_vfs:
	vfs_close_fs(g->fs);
free_g:
	pthread_mutex_destroy(&g->ready_lock);
	pthread_cond_destroy(&g->ready_cond);
	free(g);
	return err;
}
