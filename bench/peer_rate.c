/*
 * peer_rate.c - what the cache group's transport (fs/store/peer.h) moves
 * on loopback: ranged GETs of 4 MiB (a block) and of 128 KiB (a small
 * file in a pack) from a peer server that sends them from a file with
 * sendfile, with 1 and 4 client threads, against pread() of the same
 * ranges of the same file in the same run (the local-disk baseline: a
 * reader served by its own cache). The file is read once first, so both
 * sides read the page cache: the table shows the transport's cost over a
 * local read, not the disk's.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "fs/store/peer.h"
#include "lib/bigbuf.h"
#include "lib/errors.h"

static const char usage[] =
    "usage: peer_rate [-d DIR] [-m MIB] [-s SECONDS]\n"
    "Serve a file of MIB MiB (default 256) of random bytes, made in DIR\n"
    "(default /tmp) and removed at the end, from a peer server on\n"
    "127.0.0.1, and read random ranges of it for SECONDS (default 3) per\n"
    "cell: by peer_get and by pread. Prints a markdown table.\n";

static int file_fd = -1;
static uint64_t file_size;

/* ---- the server's handler: ranges of the one file ---- */

static int h_get(void *arg, const char *key, uint64_t off, uint64_t len,
		 struct peer_body *b)
{
	(void)arg;
	(void)key;
	if (off >= file_size)
		len = 0;
	else if (len > file_size - off)
		len = file_size - off;
	if ((b->fd = dup(file_fd)) < 0)
		return errno;
	b->off = off;
	b->len = len;
	return 0;
}

static int h_has(void *arg, const char *key)
{
	(void)arg;
	(void)key;
	return 0;
}

static void h_bad(void *arg, const char *key)
{
	(void)arg;
	(void)key;
}

/* ---- the readers ---- */

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

struct run {
	int peer; /* 1: peer_get, 0: pread */
	struct peer_client *cli;
	const char *addr;
	size_t size;
	int64_t until_ns;
	atomic_uint_fast64_t bytes, reqs;
	atomic_int err;
};

struct reader {
	pthread_t th;
	struct run *run;
	uint64_t rng;
};

static uint64_t next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void *reader_run(void *arg)
{
	struct reader *rd = arg;
	struct run *r = rd->run;
	uint64_t slots = file_size / r->size, bytes = 0, reqs = 0;
	void *buf = r->peer ? NULL : malloc(r->size);

	while (now_ns() < r->until_ns && !atomic_load(&r->err)) {
		uint64_t off = next(&rd->rng) % slots * r->size;
		size_t got = 0;
		int err = 0;
		if (r->peer) {
			void *data;
			err = peer_get(r->cli, r->addr, "bench/file", off,
				       r->size, &data, &got);
			if (!err) /* kept for the next: as a reader would */
				bigbuf_free(data);
		} else {
			ssize_t n = pread(file_fd, buf, r->size, (off_t)off);
			err = n < 0 ? errno : 0;
			got = n < 0 ? 0 : (size_t)n;
		}
		if (err || got != r->size) {
			atomic_store(&r->err, err ? err : EIO);
			break;
		}
		bytes += got;
		reqs++;
	}
	atomic_fetch_add(&r->bytes, bytes);
	atomic_fetch_add(&r->reqs, reqs);
	free(buf);
	return NULL;
}

/* CPU time of the process (client and server threads), in s. */
static double cpu_s(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* MiB/s, requests/s and CPU seconds per GiB of threads readers of size
 * bytes for secs. */
static int measure(int peer, struct peer_client *cli, const char *addr,
		   size_t size, int threads, double secs, double *mibs,
		   double *rps, double *cpu_gib)
{
	struct run r = {.peer = peer, .cli = cli, .addr = addr, .size = size};
	struct reader rd[16];
	int64_t t0 = now_ns();
	double c0 = cpu_s();

	r.until_ns = t0 + (int64_t)(secs * 1e9);
	for (int i = 0; i < threads; i++) {
		rd[i].run = &r;
		rd[i].rng = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
		if (pthread_create(&rd[i].th, NULL, reader_run, &rd[i]))
			return EAGAIN;
	}
	for (int i = 0; i < threads; i++)
		pthread_join(rd[i].th, NULL);
	double el = (double)(now_ns() - t0) / 1e9;
	*mibs = (double)atomic_load(&r.bytes) / (1 << 20) / el;
	*rps = (double)atomic_load(&r.reqs) / el;
	*cpu_gib =
	    (cpu_s() - c0) / ((double)atomic_load(&r.bytes) / (1 << 30) + 1e-9);
	return atomic_load(&r.err);
}

int main(int argc, char **argv)
{
	static const unsigned char secret[PEER_SECRET_LEN] = "bench";
	const struct peer_handler h = {h_get, h_has, h_has, h_bad, NULL};
	const char *dir = "/tmp";
	uint64_t mib = 256;
	double secs = 3;
	char path[4096];
	struct peer_server *srv = NULL;
	struct peer_client *cli = NULL;
	int opt, err, rc = 1;

	while ((opt = getopt(argc, argv, "d:m:s:h")) != -1) {
		switch (opt) {
		case 'd':
			dir = optarg;
			break;
		case 'm':
			mib = strtoull(optarg, NULL, 10);
			break;
		case 's':
			secs = atof(optarg);
			break;
		default:
			fputs(usage, opt == 'h' ? stdout : stderr);
			return opt == 'h' ? 0 : 2;
		}
	}
	if (optind != argc || mib < 8 || secs <= 0) {
		fputs(usage, stderr);
		return 2;
	}

	/* the file, written and then read once: in the page cache */
	snprintf(path, sizeof(path), "%s/peer_rate.XXXXXX", dir);
	if ((file_fd = mkstemp(path)) < 0) {
		fprintf(stderr, "peer_rate: cannot create a file in '%s': %s\n",
			dir, strerror(errno));
		return 1;
	}
	unlink(path);
	file_size = mib << 20;
	{
		uint64_t s = 88172645463325252ull, *blk = malloc(1 << 20);
		for (uint64_t m = 0; blk && m < mib; m++) {
			for (size_t i = 0; i < (1 << 20) / 8; i++)
				blk[i] = next(&s);
			if (write(file_fd, blk, 1 << 20) != 1 << 20) {
				fprintf(stderr, "peer_rate: write: %s\n",
					strerror(errno));
				free(blk);
				goto out;
			}
		}
		for (uint64_t off = 0; blk && off < file_size; off += 1 << 20)
			if (pread(file_fd, blk, 1 << 20, (off_t)off) < 0)
				break;
		free(blk);
	}

	struct peer_server_opts so = {.addr = "127.0.0.1:0", .secret = secret};
	if ((err = peer_server_start(&so, &h, &srv))) {
		fprintf(stderr, "peer_rate: cannot serve: %s\n",
			gr_strerror(err));
		goto out;
	}
	struct peer_client_opts co = {.secret = secret, .node = 1};
	if ((err = peer_client_open(&co, &cli))) {
		fprintf(stderr, "peer_rate: %s\n", gr_strerror(err));
		goto out;
	}

	printf("Random aligned ranges of a %" PRIu64 " MiB file in the page "
	       "cache, %.0f s a cell; peer: peer_get from a server on "
	       "127.0.0.1 (4 threads, sendfile), pread: the same ranges "
	       "read locally\n\n",
	       mib, secs);
	printf("| range | client threads | pread MiB/s | pread req/s | pread "
	       "CPU s/GiB | peer MiB/s | peer req/s | peer CPU s/GiB | peer / "
	       "pread MiB/s |\n");
	printf("|---|---|---|---|---|---|---|---|---|\n");
	const size_t sizes[] = {4u << 20, 128u << 10};
	const int threads[] = {1, 4};
	for (int si = 0; si < 2; si++)
		for (int ti = 0; ti < 2; ti++) {
			double pm, pr, pc, lm, lr, lc;
			if ((err = measure(0, NULL, NULL, sizes[si],
					   threads[ti], secs, &lm, &lr, &lc)) ||
			    (err = measure(1, cli, peer_server_addr(srv),
					   sizes[si], threads[ti], secs, &pm,
					   &pr, &pc))) {
				fprintf(stderr, "peer_rate: %s\n",
					gr_strerror(err));
				goto out;
			}
			printf("| %zu KiB | %d | %.0f | %.0f | %.2f | %.0f | "
			       "%.0f | %.2f | %.2f |\n",
			       sizes[si] >> 10, threads[ti], lm, lr, lc, pm, pr,
			       pc, pm / lm);
			fflush(stdout);
		}
	rc = 0;
out:
	peer_client_close(cli);
	peer_server_stop(srv);
	close(file_fd);
	return rc;
}
