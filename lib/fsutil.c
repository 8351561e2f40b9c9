/*
 * fsutil.c - small file and clock helpers (see fsutil.h).
 */
#include "lib/fsutil.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int fsutil_write_all(int fd, const void *p, size_t len)
{
	const unsigned char *c = p;
	while (len > 0) {
		ssize_t n = write(fd, c, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno;
		}
		c += n;
		len -= (size_t)n;
	}
	return 0;
}

int fsutil_write_direct(int fd, const void *p, size_t len)
{
	const size_t page = 4096;
	size_t direct = len & ~(page - 1);
	int fl = fcntl(fd, F_GETFL);

	if (direct == 0 || ((uintptr_t)p & (page - 1)) || fl < 0 ||
	    fcntl(fd, F_SETFL, fl | O_DIRECT))
		return fsutil_write_all(fd, p, len);
	ssize_t n = write(fd, p, direct);
	int werr = n < 0 ? errno : 0;
	if (fcntl(fd, F_SETFL, fl))
		return errno;
	/* refused for this file (EINVAL), or interrupted: the rest buffered,
	 * from where the direct part stopped */
	if (werr && werr != EINVAL && werr != EINTR)
		return werr;
	if (n < 0)
		n = 0;
	return fsutil_write_all(fd, (const char *)p + n, len - (size_t)n);
}

int fsutil_pread_all(int fd, void *p, size_t len, uint64_t off)
{
	unsigned char *c = p;
	while (len > 0) {
		ssize_t n = pread(fd, c, len, (off_t)off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno;
		}
		if (n == 0)
			return EIO;
		c += n;
		off += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}

int64_t fsutil_mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t fsutil_retry_at_ms(int tries)
{
	int64_t backoff = 500ll << (tries < 6 ? tries : 6);

	return fsutil_mono_ms() + (backoff < 30000 ? backoff : 30000);
}

int64_t fsutil_mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void fsutil_cond_init_mono(pthread_cond_t *c)
{
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(c, &ca);
	pthread_condattr_destroy(&ca);
}

void fsutil_wait_until_ms(pthread_cond_t *c, pthread_mutex_t *m, int64_t at_ms)
{
	struct timespec ts;
	int64_t left = at_ms - fsutil_mono_ms();

	if (left < 0)
		left = 0;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += left / 1000;
	ts.tv_nsec += (left % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_cond_timedwait(c, m, &ts);
}

/* ---- SIGBUS guard ---- */

/* Where the thread's guarded call resumes; NULL outside one. */
static __thread sigjmp_buf *guard_jmp;
static pthread_once_t guard_once = PTHREAD_ONCE_INIT;

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	sigjmp_buf *jb = guard_jmp;
	(void)si;
	(void)uc;

	if (jb)
		siglongjmp(*jb, 1);
	/* not ours: the default action, when the fault happens again */
	signal(sig, SIG_DFL);
}

static void guard_install(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sigbus;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, NULL);
}

int fsutil_guard_sigbus(int (*fn)(void *arg), void *arg)
{
	sigjmp_buf jb;
	int err;

	pthread_once(&guard_once, guard_install);
	/* the mask is saved: SIGBUS is blocked in the handler we leave */
	if (sigsetjmp(jb, 1)) {
		guard_jmp = NULL;
		return EIO;
	}
	guard_jmp = &jb;
	err = fn(arg);
	guard_jmp = NULL;
	return err;
}
