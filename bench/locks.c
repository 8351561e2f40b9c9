/*
 * locks.c - lock round trips (bench/locks.sh): acquire/release pairs per
 * second through one path, and the handover latency between two paths of
 * one file (two mounts of a volume, or the same local file): a process
 * holding an exclusive lock through A releases it while another waits
 * for it through B; the time from the release to B's return, per round.
 *
 *   locks pairs flock|fcntl FILE SECONDS     prints "pairs_per_s=N"
 *   locks handover flock|fcntl FILE_A FILE_B ROUNDS
 *                                            prints "p50_ms=X p99_ms=Y"
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void die(const char *what)
{
	fprintf(stderr, "locks: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* exclusive lock (wait) or unlock of the whole file */
static void lock(int fd, int posix, int on)
{
	int err;
	if (posix) {
		struct flock f = {.l_type = on ? F_WRLCK : F_UNLCK,
				  .l_whence = SEEK_SET};
		err = fcntl(fd, F_SETLKW, &f);
	} else {
		err = flock(fd, on ? LOCK_EX : LOCK_UN);
	}
	if (err)
		die(on ? "lock" : "unlock");
}

static int open_rw(const char *path)
{
	int fd = open(path, O_RDWR | O_CREAT, 0644);
	if (fd < 0)
		die(path);
	return fd;
}

static int pairs(int posix, const char *path, double secs)
{
	int fd = open_rw(path);
	long n = 0;
	double t0 = now_ms(), t;
	do {
		for (int i = 0; i < 20; i++, n++) {
			lock(fd, posix, 1);
			lock(fd, posix, 0);
		}
		t = now_ms();
	} while (t - t0 < secs * 1e3);
	printf("pairs_per_s=%.0f\n", n / ((t - t0) / 1e3));
	close(fd);
	return 0;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/*
 * Per round: the holder (parent, path a) locks, tells the waiter (child,
 * path b) to go, holds the lock 30 to 300 ms (random: a waiter that polls
 * sees the release anywhere in its backoff), notes the time and unlocks;
 * the waiter's lock returns, it notes the latency, unlocks and says so.
 */
static int handover(int posix, const char *a, const char *b, int rounds)
{
	double *lat =
	    mmap(NULL, sizeof(double) * ((size_t)rounds + 1),
		 PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int go[2], done[2];
	if (lat == MAP_FAILED || pipe(go) || pipe(done))
		die("setup");
	pid_t pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		int fd = open_rw(b);
		char c;
		for (int r = 0; r < rounds; r++) {
			if (read(go[0], &c, 1) != 1)
				_exit(1);
			lock(fd, posix, 1);
			lat[r] = now_ms() - lat[rounds];
			lock(fd, posix, 0);
			if (write(done[1], "d", 1) != 1)
				_exit(1);
		}
		_exit(0);
	}
	int fd = open_rw(a);
	char c;
	srand(1);
	for (int r = 0; r < rounds; r++) {
		lock(fd, posix, 1);
		if (write(go[1], "g", 1) != 1)
			die("pipe");
		usleep(30000 + (unsigned)(rand() % 270) * 1000);
		lat[rounds] = now_ms();
		lock(fd, posix, 0);
		if (read(done[0], &c, 1) != 1)
			die("waiter");
	}
	int st;
	waitpid(pid, &st, 0);
	qsort(lat, (size_t)rounds, sizeof(double), cmp_d);
	printf("p50_ms=%.2f p99_ms=%.2f\n", lat[rounds / 2],
	       lat[(rounds * 99) / 100 < rounds ? (rounds * 99) / 100
						: rounds - 1]);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 5 && strcmp(argv[1], "pairs") == 0)
		return pairs(strcmp(argv[2], "fcntl") == 0, argv[3],
			     atof(argv[4]));
	if (argc == 6 && strcmp(argv[1], "handover") == 0)
		return handover(strcmp(argv[2], "fcntl") == 0, argv[3], argv[4],
				atoi(argv[5]) > 0 ? atoi(argv[5]) : 1);
	fprintf(stderr,
		"usage: locks pairs flock|fcntl FILE SECONDS\n"
		"       locks handover flock|fcntl FILE_A FILE_B ROUNDS\n");
	return 2;
}
