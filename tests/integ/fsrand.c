/*
 * fsrand.c - randomized data-integrity exerciser for a mounted granary.
 *
 * Runs a seeded stream of writes, truncates, reads, reopens and fsyncs on a
 * few files in DIR (the mount) and mirrors every step on SHADOWDIR (a local
 * disk). Every read is compared byte for byte with the shadow, so the first
 * wrong byte is reported with the op number that found it; the same seed
 * replays the same stream. Uses only libc; memory stays at a few MiB.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MIB	(1024 * 1024)
#define BLOCK	(4 * MIB) /* granary's default block size */
#define MAX_IO	MIB	  /* largest single write or read */
#define HISTORY 24	  /* recent ops printed on failure */

static const char usage_text[] =
    "usage: fsrand [-s SEED] [-n OPS] [-f NFILES] [-m MAXSIZE] [-v] DIR "
    "SHADOWDIR\n"
    "  -s SEED     seed of the random stream (default: from the clock)\n"
    "  -n OPS      number of operations (default 10000)\n"
    "  -f NFILES   number of files (default 4)\n"
    "  -m MAXSIZE  largest file size to aim for, e.g. 12M (default 12M)\n"
    "  -v          print every operation\n";

/* ------------------------------------------------------------------------ */
/* random stream */

static uint64_t rng_state;

static uint64_t rng_next(void)
{
	/* splitmix64: tiny, good enough, and identical on every platform */
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* Uniform in [lo, hi] (hi >= lo). */
static uint64_t rng_range(uint64_t lo, uint64_t hi)
{
	return lo + rng_next() % (hi - lo + 1);
}

/* ------------------------------------------------------------------------ */
/* state */

struct file {
	char path[4096];   /* in DIR */
	char shadow[4096]; /* in SHADOWDIR */
	int fd, sfd;	   /* -1 while closed */
	int append;	   /* opened with O_APPEND */
};

static struct file *files;
static int nfiles = 4;
static uint64_t maxsize = 12 * MIB;
static long opno;
static int verbose;
static unsigned char *wbuf, *rbuf, *sbuf;

static char history[HISTORY][160];

static struct {
	long write, append, read, read_fresh, trunc, reopen, fsync, stat,
	    verify;
	uint64_t bytes_written, bytes_read;
} count;

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
	char *slot = history[opno % HISTORY];
	va_list ap;
	int n = snprintf(slot, sizeof(history[0]), "op %ld: ", opno);

	va_start(ap, fmt);
	vsnprintf(slot + n, sizeof(history[0]) - n, fmt, ap);
	va_end(ap);
	if (verbose)
		fprintf(stderr, "%s\n", slot);
}

static void print_history(void)
{
	long first = opno - HISTORY + 1 < 0 ? 0 : opno - HISTORY + 1;

	fprintf(stderr, "fsrand: last operations:\n");
	for (long i = first; i <= opno; i++)
		fprintf(stderr, "  %s\n", history[i % HISTORY]);
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)))
__attribute__((noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "fsrand: FAILED at op %ld: ", opno);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	print_history();
	exit(1);
}

static const char *fname(const struct file *f)
{
	const char *s = strrchr(f->path, '/');
	return s ? s + 1 : f->path;
}

/* ------------------------------------------------------------------------ */
/* I/O that insists on whole transfers */

/* Write all of buf; at off, or appending when off < 0. */
static int write_all(int fd, const unsigned char *buf, size_t len, int64_t off)
{
	while (len > 0) {
		ssize_t n =
		    off < 0 ? write(fd, buf, len) : pwrite(fd, buf, len, off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno;
		if (n == 0)
			return EIO;
		buf += n;
		len -= n;
		if (off >= 0)
			off += n;
	}
	return 0;
}

/* Read up to len at off, stopping only at EOF; *got the bytes read. */
static int read_all(int fd, unsigned char *buf, size_t len, uint64_t off,
		    size_t *got)
{
	*got = 0;
	while (*got < len) {
		ssize_t n = pread(fd, buf + *got, len - *got, off + *got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno;
		if (n == 0)
			break;
		*got += n;
	}
	return 0;
}

static uint64_t shadow_size(struct file *f)
{
	struct stat st;

	if (fstat(f->sfd, &st) < 0) {
		fprintf(stderr, "fsrand: cannot stat shadow '%s': %s\n",
			f->shadow, strerror(errno));
		exit(2);
	}
	return st.st_size;
}

static void shadow_fail(const char *what, struct file *f, int err)
{
	fprintf(stderr, "fsrand: shadow %s of '%s' failed: %s\n", what,
		f->shadow, strerror(err));
	exit(2);
}

/* ------------------------------------------------------------------------ */
/* operations */

static void file_open(struct file *f, int extra)
{
	int flags = O_RDWR | O_CREAT | extra;

	f->fd = open(f->path, flags, 0644);
	if (f->fd < 0)
		die("open '%s' (flags %#x) failed: %s", f->path, flags,
		    strerror(errno));
	f->sfd = open(f->shadow, flags, 0644);
	if (f->sfd < 0)
		shadow_fail("open", f, errno);
	f->append = !!(extra & O_APPEND);
}

static void file_close(struct file *f)
{
	if (f->fd >= 0 && close(f->fd) < 0)
		die("close '%s' failed: %s", f->path, strerror(errno));
	if (f->sfd >= 0)
		close(f->sfd);
	f->fd = f->sfd = -1;
}

/* Compare len bytes at off of fd (the mount) with the shadow. */
static void compare_range(struct file *f, int fd, uint64_t off, size_t len,
			  const char *how)
{
	size_t got, sgot;
	int err;

	err = read_all(fd, rbuf, len, off, &got);
	if (err)
		die("%s of '%s' at %" PRIu64 " len %zu failed: %s", how,
		    fname(f), off, len, strerror(err));
	err = read_all(f->sfd, sbuf, len, off, &sgot);
	if (err)
		shadow_fail("read", f, err);
	count.bytes_read += got;
	if (memcmp(rbuf, sbuf, got < sgot ? got : sgot) != 0) {
		size_t i = 0;
		while (rbuf[i] == sbuf[i])
			i++;
		die("%s mismatch in '%s' (read at %" PRIu64 " len %zu): first "
		    "differing byte at offset %" PRIu64
		    ": mount 0x%02x, shadow 0x%02x",
		    how, fname(f), off, len, off + i, rbuf[i], sbuf[i]);
	}
	if (got != sgot)
		die("%s of '%s' at %" PRIu64 " len %zu: mount returned %zu "
		    "bytes, shadow %zu (shadow size %" PRIu64 ")",
		    how, fname(f), off, len, got, sgot, shadow_size(f));
}

static void fill(unsigned char *buf, size_t len)
{
	int kind = rng_range(0, 9);

	if (kind == 0) {
		memset(buf, (int)rng_range(0, 255), len); /* compressible */
	} else if (kind == 1) {
		/* short repeating pattern: compressible but not uniform */
		unsigned char pat[7];
		for (size_t i = 0; i < sizeof(pat); i++)
			pat[i] = rng_next();
		for (size_t i = 0; i < len; i++)
			buf[i] = pat[i % sizeof(pat)];
	} else {
		size_t i = 0;
		for (; i + 8 <= len; i += 8) {
			uint64_t v = rng_next();
			memcpy(buf + i, &v, 8);
		}
		for (; i < len; i++)
			buf[i] = rng_next();
	}
}

static void op_truncate(struct file *f);

static size_t pick_len(void)
{
	int r = rng_range(0, 99);

	if (r < 40)
		return rng_range(1, 512);
	if (r < 70)
		return rng_range(1, 65536);
	if (r < 80)
		return rng_range(MAX_IO / 2, MAX_IO);
	return rng_range(1, MAX_IO);
}

static void op_write(struct file *f)
{
	uint64_t size = shadow_size(f);
	size_t len = pick_len();
	int64_t off;
	int r = rng_range(0, 9), err;
	const char *kind;

	if (f->append && size + len > maxsize + 2 * MIB) {
		op_truncate(f); /* appending would grow the file past bounds */
		return;
	} else if (f->append) {
		off = -1;
		kind = "append";
	} else if (r < 3) {
		off = size; /* extend */
		kind = "extend";
	} else if (r < 5 && len > 1) {
		/* straddle a block boundary */
		uint64_t nb = (maxsize + len) / BLOCK;
		uint64_t b = BLOCK * rng_range(1, nb ? nb : 1);
		off = b - rng_range(1, len - 1);
		kind = "straddle";
	} else if (r < 6) {
		off = size + rng_range(1, 2 * MIB); /* hole past EOF */
		kind = "hole";
	} else {
		off = rng_range(0, maxsize > len ? maxsize - len : 0);
		kind = "random";
	}
	/* keep the files from growing without bound */
	if (off >= 0 && (uint64_t)off + len > maxsize + 2 * MIB)
		off = rng_range(0, maxsize > len ? maxsize - len : 0);
	fill(wbuf, len);
	if (off < 0)
		note("write %s append len %zu (size %" PRIu64 ")", fname(f),
		     len, size);
	else
		note("pwrite %s off %" PRId64 " len %zu [%s] (size %" PRIu64
		     ")",
		     fname(f), off, len, kind, size);
	err = write_all(f->fd, wbuf, len, off);
	if (err)
		die("write of %zu bytes at %" PRId64 " to '%s' failed: %s", len,
		    off, fname(f), strerror(err));
	err = write_all(f->sfd, wbuf, len, off);
	if (err)
		shadow_fail("write", f, err);
	if (off < 0)
		count.append++;
	else
		count.write++;
	count.bytes_written += len;
}

static void op_read(struct file *f)
{
	uint64_t size = shadow_size(f);
	size_t len = pick_len();
	uint64_t off;
	int r = rng_range(0, 9);

	if (r < 2)
		off = size > len ? size - len / 2 : 0; /* across EOF */
	else
		off = rng_range(0, size + MIB);
	if (rng_range(0, 7) == 0) {
		/* a second handle must see what the first one wrote */
		int fd = open(f->path, O_RDONLY);
		if (fd < 0)
			die("open '%s' read-only failed: %s", fname(f),
			    strerror(errno));
		note("pread %s off %" PRIu64
		     " len %zu via fresh fd (size %" PRIu64 ")",
		     fname(f), off, len, size);
		compare_range(f, fd, off, len, "read via fresh fd");
		if (close(fd) < 0)
			die("close of read-only '%s' failed: %s", fname(f),
			    strerror(errno));
		count.read_fresh++;
		return;
	}
	note("pread %s off %" PRIu64 " len %zu (size %" PRIu64 ")", fname(f),
	     off, len, size);
	compare_range(f, f->fd, off, len, "read");
	count.read++;
}

static void op_truncate(struct file *f)
{
	uint64_t size = shadow_size(f), to;
	int r = rng_range(0, 9);

	if (r < 1)
		to = 0;
	else if (r < 4)
		to = size ? rng_range(0, size - 1) : 0; /* down */
	else if (r < 6) {
		/* at or next to a block boundary */
		to = BLOCK * rng_range(0, maxsize / BLOCK);
		to += rng_range(0, 2);
		to -= rng_range(0, 1);
	} else
		to = size + rng_range(0, 3 * MIB); /* up */
	if ((int64_t)to < 0)
		to = 0;
	if (to > maxsize + 2 * MIB)
		to = maxsize;
	note("ftruncate %s to %" PRIu64 " (size %" PRIu64 ")", fname(f), to,
	     size);
	if (ftruncate(f->fd, to) < 0)
		die("ftruncate '%s' to %" PRIu64 " failed: %s", fname(f), to,
		    strerror(errno));
	if (ftruncate(f->sfd, to) < 0)
		shadow_fail("truncate", f, errno);
	count.trunc++;
}

static void op_reopen(struct file *f)
{
	int r = rng_range(0, 19), extra = 0;

	if (r == 0)
		extra = O_TRUNC;
	else if (r < 5)
		extra = O_APPEND;
	note("close+reopen %s%s%s", fname(f), extra & O_TRUNC ? " O_TRUNC" : "",
	     extra & O_APPEND ? " O_APPEND" : "");
	file_close(f);
	file_open(f, extra);
	count.reopen++;
}

static void op_fsync(struct file *f)
{
	note("fsync %s", fname(f));
	if (fsync(f->fd) < 0)
		die("fsync '%s' failed: %s", fname(f), strerror(errno));
	count.fsync++;
}

static void op_stat(struct file *f)
{
	uint64_t size = shadow_size(f);
	struct stat st;
	int by_path = rng_range(0, 1);

	note("%s %s (size %" PRIu64 ")", by_path ? "stat" : "fstat", fname(f),
	     size);
	if ((by_path ? stat(f->path, &st) : fstat(f->fd, &st)) < 0)
		die("stat '%s' failed: %s", fname(f), strerror(errno));
	if ((uint64_t)st.st_size != size)
		die("%s of '%s': size %" PRIu64 ", shadow %" PRIu64,
		    by_path ? "stat" : "fstat", fname(f), (uint64_t)st.st_size,
		    size);
	count.stat++;
}

static void verify_whole(struct file *f, const char *how)
{
	uint64_t size = shadow_size(f);

	for (uint64_t off = 0; off <= size; off += MAX_IO)
		compare_range(f, f->fd, off, MAX_IO, how);
	count.verify++;
}

static void op_verify(struct file *f)
{
	note("verify whole %s (size %" PRIu64 ")", fname(f), shadow_size(f));
	verify_whole(f, "verify");
}

/* ------------------------------------------------------------------------ */

static uint64_t parse_size(const char *s)
{
	char *end;
	uint64_t v = strtoull(s, &end, 10);

	switch (*end) {
	case 'k':
	case 'K':
		v <<= 10;
		end++;
		break;
	case 'm':
	case 'M':
		v <<= 20;
		end++;
		break;
	case 'g':
	case 'G':
		v <<= 30;
		end++;
		break;
	}
	if (end == s || (*end && strcmp(end, "iB") && strcmp(end, "B")))
		return 0;
	return v;
}

int main(int argc, char **argv)
{
	uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
	long nops = 10000;
	int opt;

	seed %= 1000000000;
	while ((opt = getopt(argc, argv, "s:n:f:m:vh")) != -1) {
		switch (opt) {
		case 's':
			seed = strtoull(optarg, NULL, 10);
			break;
		case 'n':
			nops = atol(optarg);
			break;
		case 'f':
			nfiles = atoi(optarg);
			break;
		case 'm':
			maxsize = parse_size(optarg);
			break;
		case 'v':
			verbose = 1;
			break;
		case 'h':
			fputs(usage_text, stdout);
			return 0;
		default:
			fputs(usage_text, stderr);
			return 2;
		}
	}
	if (argc - optind != 2 || nfiles < 1 || nfiles > 1000 || nops < 0 ||
	    maxsize < 4096) {
		fputs(usage_text, stderr);
		return 2;
	}
	printf("fsrand: seed %" PRIu64 " (replay with -s %" PRIu64 ")\n", seed,
	       seed);
	printf("fsrand: %ld ops on %d files, max size %" PRIu64 ", in '%s' "
	       "(shadow '%s')\n",
	       nops, nfiles, maxsize, argv[optind], argv[optind + 1]);
	fflush(stdout);
	rng_state = seed;

	wbuf = malloc(MAX_IO);
	rbuf = malloc(MAX_IO);
	sbuf = malloc(MAX_IO);
	files = calloc(nfiles, sizeof(*files));
	if (!wbuf || !rbuf || !sbuf || !files) {
		fprintf(stderr, "fsrand: out of memory\n");
		return 2;
	}
	for (int i = 0; i < nfiles; i++) {
		struct file *f = &files[i];
		snprintf(f->path, sizeof(f->path), "%s/f%d", argv[optind], i);
		snprintf(f->shadow, sizeof(f->shadow), "%s/f%d",
			 argv[optind + 1], i);
		note("create %s", fname(f));
		file_open(f, O_TRUNC);
	}

	for (opno = 1; opno <= nops; opno++) {
		struct file *f = &files[rng_range(0, nfiles - 1)];
		int r = rng_range(0, 99);

		if (r < 38)
			op_write(f);
		else if (r < 70)
			op_read(f);
		else if (r < 78)
			op_truncate(f);
		else if (r < 86)
			op_reopen(f);
		else if (r < 90)
			op_fsync(f);
		else if (r < 98)
			op_stat(f);
		else
			op_verify(f);
	}
	opno = nops;

	/* final check of every file through a handle opened after close */
	for (int i = 0; i < nfiles; i++) {
		struct file *f = &files[i];
		file_close(f);
		file_open(f, 0);
		note("final verify %s", fname(f));
		verify_whole(f, "final verify");
		op_stat(f);
		file_close(f);
	}

	printf("fsrand: %ld ops ok: %ld pwrite, %ld append, %ld read, %ld read "
	       "via fresh fd, %ld truncate, %ld reopen, %ld fsync, %ld stat, "
	       "%ld whole-file verify; %" PRIu64 " MiB written, %" PRIu64
	       " MiB read and compared\n",
	       nops, count.write, count.append, count.read, count.read_fresh,
	       count.trunc, count.reopen, count.fsync, count.stat, count.verify,
	       count.bytes_written / MIB, count.bytes_read / MIB);
	free(files);
	free(wbuf);
	free(rbuf);
	free(sbuf);
	return 0;
}
