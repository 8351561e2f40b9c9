/*
 * cmd_mount.c - `granary mount`: check the mount point, then serve the
 * volume with fs_mount(), in the background by default. The command returns
 * only when the mount is up (0) or has failed (1, with fs_mount's reason),
 * so scripts can use the mount point on the next line.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fs/fs.h"
#include "fs/store/crypt.h"
#include "fs/store/objstore.h"
#include "lib/log.h"
#include "meta/meta.h"
#include "tools/cli.h"

static const char usage[] =
    "usage: granary mount META_URL MOUNTPOINT [options]\n"
    "\n"
    "Mount the volume whose settings are in the redis database at "
    "META_URL.\n"
    "The command returns once the mount is ready (exit 0) or has failed\n"
    "(exit 1); the file system is then served in the background until\n"
    "'granary umount MOUNTPOINT'.\n"
    "\n"
    "  -f, --foreground       stay in the foreground (exit 0 after a clean\n"
    "                         unmount)\n"
    "  --encrypt-key FILE     the key file of an encrypted volume (or\n"
    "                         GRANARY_ENCRYPT_KEY_FILE, or the passphrase\n"
    "                         in GRANARY_ENCRYPT_PASSPHRASE)\n"
    "  --read-only            refuse every change (EROFS); caches are kept\n"
    "                         longer\n"
    "  --subdir DIR           mount this directory of the volume as the "
    "root\n"
    "  --attr-timeout S       seconds the kernel caches attributes\n"
    "                         (default 1, read-only 3600)\n"
    "  --entry-timeout S      seconds the kernel caches names (same "
    "default)\n"
    "  --max-uploads N        uploader threads (default 8)\n"
    "  --buffer-size SIZE     memory for buffered writes (default 300M)\n"
    "  --cache-mem SIZE       memory for cached blocks (default 256M)\n"
    "  --name-cache-size SIZE with --read-only: memory for names looked\n"
    "                         up, evicting the least used past it\n"
    "                         (default 512M, 2.3M names of 20 bytes;\n"
    "                         a name costs ~205 bytes plus its length)\n"
    "  --cache-dir DIR[:DIR]  disk cache directories (default\n"
    "                         /var/cache/granary; ~/.cache/granary if not\n"
    "                         root); fast local disks (NVMe)\n"
    "  --cache-size SIZE      disk cache limit (default 10G; 0 disables)\n"
    "  --free-space-ratio R   keep this fraction of the cache disk free\n"
    "                         (default 0.1)\n"
    "  --prefetch N           background block fetchers for readahead,\n"
    "                         shared fairly by the files read at once\n"
    "                         (default 8; 0 disables)\n"
    "  --io-retry-window S    ride out an object store outage for up to S\n"
    "                         seconds (retries with backoff) before a read\n"
    "                         or write fails with EIO (default 120; 0: no\n"
    "                         retries)\n"
    "  --meta-retry-window S  ride out a Redis restart or stall for up to S\n"
    "                         seconds before a metadata call that did not\n"
    "                         run fails with EIO (default 60; 0: none;\n"
    "                         the URL's failover_timeout wins)\n"
    "  --pack-max SIZE        pack files written whole up to this size,\n"
    "                         many to one object (default 1M, at most 16M)\n"
    "  --no-pack              do not pack: one object per file and block\n"
    "  --no-compact           do not compact the slice lists of chunks this\n"
    "                         client keeps appending to (see granary gc\n"
    "                         --compact)\n"
    "  --backup-meta S        back the metadata up into the store every S\n"
    "                         (default 1h; 0 turns it off); one client of\n"
    "                         the volume at a time does it (see granary\n"
    "                         load --from-store)\n"
    "  --backup-keep N        metadata backups kept in the store (default\n"
    "                         12)\n"
    "  --pack-window S        longest a pack waits for more files before it\n"
    "                         is uploaded (default 10ms; 2s with\n"
    "                         --writeback)\n"
    "  --writeback            close and fsync return once the data is on\n"
    "                         the cache disk (fsync'd) and in the\n"
    "                         metadata; packs and blocks upload in the\n"
    "                         background and at umount (see\n"
    "                         docs/operations.md)\n"
    "  --stage-size SIZE      with --writeback: blocks of big files staged\n"
    "                         at most, then writes wait (default 1G)\n"
    "  --direct-read SIZE|off read-only opens of files of SIZE or more\n"
    "                         bypass the kernel page cache: the bytes go\n"
    "                         straight to the reader (default 64M; needs\n"
    "                         Linux 6.6, older kernels keep the page cache)\n"
    "  --plan-window SIZE     bytes the epoch plans may fetch ahead of their\n"
    "                         readers, all together (default a quarter of\n"
    "                         the disk cache, at most 4G; see granary plan)\n"
    "  --log FILE|syslog      where the log goes (default: syslog, or\n"
    "                         stderr with --foreground); a FILE is\n"
    "                         reopened on SIGHUP (logrotate)\n"
    "  --log-level LEVEL      error, warn, info (default) or debug\n"
    "  --log-max-size SIZE    rotate the log FILE past SIZE (default 64M,\n"
    "                         at least 64K; 0: never)\n"
    "  --log-keep N           log files kept, the live one included:\n"
    "                         FILE, FILE.1, ... (default 3)\n"
    "  --metrics ADDR|off     serve Prometheus metrics at http://ADDR/metrics\n"
    "                         (HOST:PORT; :PORT is loopback; port 0: any\n"
    "                         free one, see granary status). Default\n"
    "                         127.0.0.1:9567, or the next free of the 9\n"
    "                         ports after it; a port in use is a warning\n"
    "  --access-log FILE      one line per operation (op, inode, name,\n"
    "                         result, microseconds); reopened on SIGHUP or\n"
    "                         when moved (logrotate)\n"
    "  --cache-group NAME     share the disk cache with the other mounts of\n"
    "                         the volume that name group NAME: a block is\n"
    "                         fetched from the store once for the group and\n"
    "                         read by the others from its owner (see\n"
    "                         docs/operations.md, \"Cache groups\")\n"
    "  --group-addr HOST:PORT where the other members reach this node; it\n"
    "                         listens there (port 0: any free one). HOST is\n"
    "                         this node's address on their network, not\n"
    "                         0.0.0.0\n"
    "  --group-take-only      read from the group, serve and own nothing\n"
    "                         (a short-lived node)\n"
    "  --group-keep-copies    also keep in this node's cache what members\n"
    "                         sent (default: each block on its owner only)\n"
    "  -d, --debug            log every FUSE request\n"
    "  --allow-other          let other users in (needs user_allow_other\n"
    "                         in /etc/fuse.conf unless root)\n"
    "  -o OPTS                extra FUSE mount options, comma separated\n"
    "  -h, --help             show this help\n"
    "\n"
    "S is in seconds (0.5, 10, 200ms); SIZE takes K, M, G suffixes.\n"
    "S3 keys in the environment (GRANARY_S3_ACCESS_KEY and\n"
    "GRANARY_S3_SECRET_KEY, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)\n"
    "override the ones kept in the volume settings at format; temporary\n"
    "ones (STS) with their GRANARY_S3_SESSION_TOKEN or AWS_SESSION_TOKEN.\n"
    "A password in META_URL is hidden from ps; GRANARY_META_PASSWORD keeps\n"
    "it off the command line altogether. META_URL may name Redis Sentinels:\n"
    "redis://[:PASSWORD@]MASTER,SENTINEL[:PORT],.../DB; ?wait=N makes each\n"
    "change wait for N replicas (docs/operations.md, \"Redis\").\n"
    "A redis server that may evict keys, keeps nothing on disk or is nearly\n"
    "full gets a warning (the mount goes on).\n";

enum {
	OPT_READ_ONLY = 256,
	OPT_SUBDIR,
	OPT_ATTR_TIMEOUT,
	OPT_ENTRY_TIMEOUT,
	OPT_MAX_UPLOADS,
	OPT_BUFFER_SIZE,
	OPT_STAGE_SIZE,
	OPT_CACHE_MEM,
	OPT_LOG,
	OPT_ALLOW_OTHER,
	OPT_CACHE_DIR,
	OPT_CACHE_SIZE,
	OPT_FREE_RATIO,
	OPT_PREFETCH,
	OPT_IO_RETRY_WINDOW,
	OPT_META_RETRY_WINDOW,
	OPT_PACK_MAX,
	OPT_NO_PACK,
	OPT_NO_COMPACT,
	OPT_PACK_WINDOW,
	OPT_WRITEBACK,
	OPT_DIRECT_READ,
	OPT_NAME_CACHE_SIZE,
	OPT_BACKUP_META,
	OPT_BACKUP_KEEP,
	OPT_METRICS,
	OPT_ACCESS_LOG,
	OPT_LOG_LEVEL,
	OPT_LOG_MAX_SIZE,
	OPT_LOG_KEEP,
	OPT_ENCRYPT_KEY,
	OPT_CACHE_GROUP,
	OPT_GROUP_ADDR,
	OPT_GROUP_TAKE_ONLY,
	OPT_GROUP_KEEP_COPIES,
	OPT_PLAN_WINDOW
};

static const char optstring[] = ":fdo:h";
static const struct option options[] = {
    {"foreground", no_argument, NULL, 'f'},
    {"read-only", no_argument, NULL, OPT_READ_ONLY},
    {"subdir", required_argument, NULL, OPT_SUBDIR},
    {"attr-timeout", required_argument, NULL, OPT_ATTR_TIMEOUT},
    {"entry-timeout", required_argument, NULL, OPT_ENTRY_TIMEOUT},
    {"max-uploads", required_argument, NULL, OPT_MAX_UPLOADS},
    {"buffer-size", required_argument, NULL, OPT_BUFFER_SIZE},
    {"cache-mem", required_argument, NULL, OPT_CACHE_MEM},
    {"log", required_argument, NULL, OPT_LOG},
    {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
    {"log-max-size", required_argument, NULL, OPT_LOG_MAX_SIZE},
    {"log-keep", required_argument, NULL, OPT_LOG_KEEP},
    {"cache-dir", required_argument, NULL, OPT_CACHE_DIR},
    {"cache-size", required_argument, NULL, OPT_CACHE_SIZE},
    {"free-space-ratio", required_argument, NULL, OPT_FREE_RATIO},
    {"prefetch", required_argument, NULL, OPT_PREFETCH},
    {"io-retry-window", required_argument, NULL, OPT_IO_RETRY_WINDOW},
    {"meta-retry-window", required_argument, NULL, OPT_META_RETRY_WINDOW},
    {"pack-max", required_argument, NULL, OPT_PACK_MAX},
    {"no-pack", no_argument, NULL, OPT_NO_PACK},
    {"no-compact", no_argument, NULL, OPT_NO_COMPACT},
    {"pack-window", required_argument, NULL, OPT_PACK_WINDOW},
    {"writeback", no_argument, NULL, OPT_WRITEBACK},
    {"stage-size", required_argument, NULL, OPT_STAGE_SIZE},
    {"direct-read", required_argument, NULL, OPT_DIRECT_READ},
    {"plan-window", required_argument, NULL, OPT_PLAN_WINDOW},
    {"name-cache-size", required_argument, NULL, OPT_NAME_CACHE_SIZE},
    {"backup-meta", required_argument, NULL, OPT_BACKUP_META},
    {"backup-keep", required_argument, NULL, OPT_BACKUP_KEEP},
    {"encrypt-key", required_argument, NULL, OPT_ENCRYPT_KEY},
    {"metrics", required_argument, NULL, OPT_METRICS},
    {"access-log", required_argument, NULL, OPT_ACCESS_LOG},
    {"cache-group", required_argument, NULL, OPT_CACHE_GROUP},
    {"group-addr", required_argument, NULL, OPT_GROUP_ADDR},
    {"group-take-only", no_argument, NULL, OPT_GROUP_TAKE_ONLY},
    {"group-keep-copies", no_argument, NULL, OPT_GROUP_KEEP_COPIES},
    {"debug", no_argument, NULL, 'd'},
    {"allow-other", no_argument, NULL, OPT_ALLOW_OTHER},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

const char *mount_cmdline_mountpoint(int argc, char **argv)
{
	int saved_opterr = opterr;

	optind = 0; /* full re-initialisation of getopt */
	opterr = 0;
	while (getopt_long(argc, argv, optstring, options, NULL) != -1)
		;
	opterr = saved_opterr;
	return argc - optind >= 2 ? argv[optind + 1] : NULL;
}

/* ---- helpers ----------------------------------------------------------- */

/* Overwrite the password of META_URL in place (the bytes
 * meta_url_redact hides: '/', '@' and ':' in it included), so that ps and
 * /proc/PID/cmdline no longer show it (the caller keeps a copy). */
static void hide_password(char *url)
{
	size_t off, len;

	if (meta_url_password(url, &off, &len))
		memset(url + off, '*', len);
}

/*
 * The secrets the environment may hand a mount. /proc/PID/environ shows
 * the bytes the process started with for all its life (unsetenv only
 * drops a pointer), so each value is overwritten in place once read: the
 * passphrase before anything starts, the others (read by fs_mount while
 * it opens the metadata and the stores) once the mount is up. The names
 * stay, empty: unset for every reader, and no thread reading the
 * environment meanwhile sees its array move.
 */
static const char *const env_secrets[] = {
    "GRANARY_META_PASSWORD", "GRANARY_SENTINEL_PASSWORD",
    "GRANARY_S3_SECRET_KEY", "GRANARY_S3_SESSION_TOKEN",
    "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
};

static void env_wipe(const char *name)
{
	char *v = getenv(name);

	if (v)
		explicit_bzero(v, strlen(v));
}

/* name=value out of the environment and overwritten, name too. */
static void env_drop(const char *name)
{
	size_t n = strlen(name);

	for (char **e = environ; *e; e++)
		if (!strncmp(*e, name, n) && (*e)[n] == '=') {
			char *entry = *e;
			unsetenv(name);
			explicit_bzero(entry, strlen(entry));
			return;
		}
}

static void env_wipe_secrets(void)
{
	for (size_t i = 0; i < sizeof(env_secrets) / sizeof(*env_secrets); i++)
		env_wipe(env_secrets[i]);
}

/* "a:/b" -> "/cwd/a:/b" into out; ENAMETOOLONG if it does not fit. */
static int absolute_dirs(const char *dirs, char *out, size_t cap)
{
	char cwd[PATH_MAX];
	size_t len = 0;

	if (!getcwd(cwd, sizeof(cwd)))
		return errno;
	for (const char *d = dirs; *d;) {
		size_t n = strcspn(d, ":");
		int w = snprintf(out + len, cap - len, "%s%s%s%.*s",
				 len ? ":" : "", d[0] == '/' ? "" : cwd,
				 d[0] == '/' ? "" : "/", (int)n, d);
		if (w < 0 || (size_t)w >= cap - len)
			return ENAMETOOLONG;
		len += (size_t)w;
		d += n;
		if (*d == ':')
			d++;
	}
	return 0;
}

/* path made absolute from the working directory into out. */
static int absolute_path(const char *path, char *out, size_t cap)
{
	char cwd[PATH_MAX];
	int w;

	if (path[0] == '/')
		w = snprintf(out, cap, "%s", path);
	else if (!getcwd(cwd, sizeof(cwd)))
		return errno;
	else
		w = snprintf(out, cap, "%s/%s", cwd, path);
	return w < 0 || (size_t)w >= cap ? ENAMETOOLONG : 0;
}

/* Append ",opt" to the -o list (malloc'd). */
static int opts_append(char **list, const char *opt)
{
	char *n;

	if (asprintf(&n, "%s%s%s", *list ? *list : "", *list ? "," : "", opt) <
	    0)
		return ENOMEM;
	free(*list);
	*list = n;
	return 0;
}

/*
 * The daemon's argv names the mount point as the kernel does (absolute,
 * canonical), so that umount can recognise it in /proc after the daemon
 * has left its working directory. When the user gave another spelling,
 * run ourselves again with that one word replaced.
 */
static void reexec_canonical(int argc, char **argv, const char *arg,
			     const char *canon)
{
	char **nargv = calloc((size_t)argc + 2, sizeof(*nargv));

	if (!nargv)
		return; /* umount still works, it just cannot wait */
	nargv[0] = program_invocation_name;
	for (int i = 0; i < argc; i++)
		nargv[i + 1] = argv[i] == arg ? (char *)canon : argv[i];
	fflush(NULL);
	execv("/proc/self/exe", nargv);
	free(nargv); /* exec failed: carry on with the given spelling */
}

/* Warn, on the terminal of whoever mounts, of a Redis server that puts the
 * volume at risk. A server that cannot be asked is the mount's to report. */
static void redis_check(const char *url)
{
	struct meta_opts mo = {.pool_size = 1, .read_only = 1};
	struct meta *m;
	char shown[1024];

	if (meta_open(url, &mo, &m))
		return;
	meta_url_redact(url, shown, sizeof shown);
	cli_server_check(m, shown);
	meta_close(m);
}

/* ---- the daemon's report to the waiting parent ------------------------ */

struct report {
	int fd;	  /* write end of the pipe to the parent; -1 once reported */
	int told; /* ready was called */
	int up;	  /* ready(0) came: later errors are news, earlier ones told */
	const char *mountpoint;
	int foreground;
};

static void write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return; /* the parent is gone: nobody to tell */
		buf += n;
		len -= (size_t)n;
	}
}

/* fs_mount's ready callback, called exactly once, from any thread. */
static void on_ready(void *arg, int err, const char *msg)
{
	struct report *r = arg;
	char buf[2048];

	if (!msg || !*msg)
		msg = gr_strerror(err);
	r->told = 1;
	r->up = !err;
	if (!err)
		env_wipe_secrets(); /* read by now: the mount is up */
	if (r->foreground) {
		if (err) {
			cli_error("cannot mount '%s': %s", r->mountpoint, msg);
			cli_key_hint(err);
		}
		return;
	}
	if (r->fd < 0)
		return;
	/* One byte of status then the message, in one write (< PIPE_BUF). */
	buf[0] = err ? 1 : 0;
	snprintf(buf + 1, sizeof(buf) - 1, "%s", err ? msg : "");
	write_all(r->fd, buf, 1 + strlen(buf + 1));
	close(r->fd);
	r->fd = -1;
	if (!err) {
		/* Detached: the terminal may go away; nothing may write to
		 * it any more. Logs go to the log target. */
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (null >= 0) {
			dup2(null, STDIN_FILENO);
			dup2(null, STDOUT_FILENO);
			dup2(null, STDERR_FILENO);
			if (null > STDERR_FILENO)
				close(null);
		}
	}
}

/* The hint of a key error, known by its message (the pipe carries the
 * message alone). */
static void key_hint(const char *msg)
{
	if (strstr(msg, gr_strerror(CRYPT_EKEY)))
		cli_key_hint(CRYPT_EKEY);
	else if (strstr(msg, gr_strerror(CRYPT_ENOKEY)))
		cli_key_hint(CRYPT_ENOKEY);
	else if (strstr(msg, gr_strerror(CRYPT_EPLAIN)))
		cli_key_hint(CRYPT_EPLAIN);
}

/* The parent: wait for the daemon's report; the exit code of mount. */
static int wait_ready(pid_t child, int fd, const char *mp, const char *logto)
{
	char buf[2048];
	size_t got = 0;
	int status;

	while (got < sizeof(buf) - 1) {
		ssize_t n = read(fd, buf + got, sizeof(buf) - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
		if (buf[0] == 0)
			break; /* ready: do not wait for anything else */
	}
	close(fd);
	if (got > 0 && buf[0] == 0)
		return CLI_EXIT_OK;
	if (got > 0) {
		buf[got] = '\0';
		cli_error("cannot mount '%s': %s", mp, buf + 1);
		key_hint(buf + 1);
		waitpid(child, &status, 0);
		return CLI_EXIT_FAIL;
	}
	/* Closed without a word: the daemon died before it was ready. */
	while (waitpid(child, &status, 0) < 0 && errno == EINTR)
		;
	if (WIFSIGNALED(status))
		cli_error("cannot mount '%s': the mount process was killed by "
			  "signal %d (%s) before the mount was ready",
			  mp, WTERMSIG(status), strsignal(WTERMSIG(status)));
	else
		cli_error("cannot mount '%s': the mount process exited with "
			  "status %d before the mount was ready",
			  mp, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	cli_hint("see the log (%s)", logto);
	return CLI_EXIT_FAIL;
}

/* Run the file system until unmounted; the exit code of mount. */
static int serve(const struct fs_opts *o, struct report *rep)
{
	int err = fs_mount(o, on_ready, rep);

	if (!rep->told)
		on_ready(rep, err ? err : EIO, /* fs_mount broke its promise */
			 "the file system stopped before it was ready");
	/* Failures before ready were reported by ready itself. */
	if (err && rep->up)
		log_err("'%s' stopped serving after an error: %s",
			o->mountpoint, gr_strerror(err));
	return err ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}

/* ---- the command ------------------------------------------------------- */

static int check_mountpoint(const char *arg, char *canon)
{
	char fstype[64], source[256];
	struct stat st;
	int err = 0;

	if (!realpath(arg, canon) || stat(canon, &st))
		err = errno;
	if (err == ENOENT) {
		cli_error("cannot mount '%s': mount point does not exist", arg);
		cli_hint("create it first: mkdir -p '%s'", arg);
		return CLI_EXIT_FAIL;
	}
	if (err == ENOTCONN) {
		/* A daemon died without unmounting: the kernel still has it. */
		cli_error("cannot mount '%s': a dead mount is still there (%s)",
			  arg, strerror(err));
		cli_hint("run 'granary umount %s' first", arg);
		return CLI_EXIT_FAIL;
	}
	if (err) {
		cli_error("cannot mount '%s': %s", arg, strerror(err));
		return CLI_EXIT_FAIL;
	}
	if (!S_ISDIR(st.st_mode)) {
		cli_error("cannot mount '%s': not a directory", arg);
		return CLI_EXIT_FAIL;
	}
	if (cli_mount_lookup(canon, fstype, sizeof(fstype), source,
			     sizeof(source)) == 1 &&
	    cli_is_granary_mount(fstype, source)) {
		cli_error("cannot mount '%s': a granary volume is already "
			  "mounted there",
			  arg);
		cli_hint("run 'granary umount %s' first", arg);
		return CLI_EXIT_FAIL;
	}
	return 0;
}

int cmd_mount(int argc, char **argv)
{
	const char *access_log = NULL;
	struct fs_opts o = {.backup_interval = -1,
			    .attr_timeout = -1,
			    .entry_timeout = -1,
			    .cache_size = UINT64_MAX,
			    .free_ratio = -1,
			    .prefetch = -1,
			    .io_retry_window = -1,
			    .meta_retry_window = -1,
			    .pack_max = 1u << 20,
			    .pack_window_ms = -1};
	struct report rep = {.fd = -1};
	const char *logto = NULL, *keyfile = NULL;
	void *secret = NULL;
	size_t secret_len = 0;
	uint64_t log_max = LOG_MAX_SIZE_DEFAULT;
	int log_level = -1, log_keep = LOG_KEEP_DEFAULT;
	char *fuse_opts = NULL, *meta_url = NULL, *mp_arg;
	char mp[PATH_MAX];
	int foreground = 0, ret = CLI_EXIT_USAGE;
	uint64_t size;
	long n;
	int c, err, pipefd[2];
	pid_t child;

	while ((c = getopt_long(argc, argv, optstring, options, NULL)) != -1) {
		switch (c) {
		case 'f':
			foreground = 1;
			break;
		case OPT_READ_ONLY:
			o.read_only = 1;
			break;
		case OPT_SUBDIR:
			o.subdir = optarg;
			break;
		case OPT_ATTR_TIMEOUT:
		case OPT_ENTRY_TIMEOUT:
			if (cli_parse_seconds(optarg, c == OPT_ATTR_TIMEOUT
							  ? &o.attr_timeout
							  : &o.entry_timeout)) {
				cli_error("bad timeout '%s': want seconds, "
					  "such as 1, 0.5 or 200ms",
					  optarg);
				goto free_opts;
			}
			break;
		case OPT_MAX_UPLOADS:
			if (cli_parse_int(optarg, 1, 256, &n)) {
				cli_error("bad --max-uploads '%s': want 1 to "
					  "256",
					  optarg);
				goto free_opts;
			}
			o.max_uploads = (int)n;
			break;
		case OPT_BUFFER_SIZE:
		case OPT_CACHE_MEM:
			if (cli_parse_size(optarg, &size) || size == 0 ||
			    size > SIZE_MAX) {
				cli_error("bad size '%s' for %s: want a size "
					  "such as 512M or 2G",
					  optarg, argv[optind - 1]);
				goto free_opts;
			}
			if (c == OPT_BUFFER_SIZE)
				o.buffer_size = (size_t)size;
			else
				o.mem_cache_size = (size_t)size;
			break;
		case OPT_LOG:
			logto = optarg;
			break;
		case OPT_LOG_LEVEL:
			log_level = log_level_parse(optarg);
			if (log_level < 0) {
				cli_error("bad --log-level '%s': want error, "
					  "warn, info or debug",
					  optarg);
				goto free_opts;
			}
			break;
		case OPT_LOG_MAX_SIZE:
			if (cli_parse_size(optarg, &log_max) ||
			    (log_max && log_max < LOG_MAX_SIZE_MIN)) {
				cli_error("bad size '%s' for --log-max-size: "
					  "want 64K or more, or 0 for no bound",
					  optarg);
				goto free_opts;
			}
			break;
		case OPT_LOG_KEEP:
			if (cli_parse_int(optarg, 1, LOG_KEEP_MAX, &n)) {
				cli_error("bad count '%s' for --log-keep: "
					  "want 1 to %d",
					  optarg, LOG_KEEP_MAX);
				goto free_opts;
			}
			log_keep = (int)n;
			break;
		case OPT_CACHE_DIR:
			if (!*optarg) {
				cli_error("--cache-dir needs a directory");
				goto free_opts;
			}
			o.cache_dir = optarg;
			break;
		case OPT_CACHE_SIZE:
			if (cli_parse_size(optarg, &size)) {
				cli_error(
				    "bad size '%s' for --cache-size: want a "
				    "size such as 100G, or 0 to disable",
				    optarg);
				goto free_opts;
			}
			o.cache_size = size;
			break;
		case OPT_FREE_RATIO: {
			char *end;
			double r = strtod(optarg, &end);
			if (end == optarg || *end || r < 0 || r >= 1) {
				cli_error(
				    "bad ratio '%s' for --free-space-ratio: "
				    "want a number from 0 to 0.99",
				    optarg);
				goto free_opts;
			}
			o.free_ratio = r;
			break;
		}
		case OPT_PREFETCH:
			if (cli_parse_int(optarg, 0, 64, &n)) {
				cli_error(
				    "bad count '%s' for --prefetch: want 0 "
				    "to 64",
				    optarg);
				goto free_opts;
			}
			o.prefetch = (int)n;
			break;
		case OPT_IO_RETRY_WINDOW:
			if (cli_parse_int(optarg, 0, OBJSTORE_RETRY_MAX_S,
					  &n)) {
				cli_error("bad seconds '%s' for "
					  "--io-retry-window: want 0 to %d",
					  optarg, OBJSTORE_RETRY_MAX_S);
				goto free_opts;
			}
			o.io_retry_window = (int)n;
			break;
		case OPT_META_RETRY_WINDOW:
			if (cli_parse_int(optarg, 0, 86400, &n)) {
				cli_error("bad seconds '%s' for "
					  "--meta-retry-window: want 0 to 86400",
					  optarg);
				goto free_opts;
			}
			o.meta_retry_window = (int)n;
			break;
		case OPT_PACK_MAX:
			if (cli_parse_size(optarg, &size) ||
			    size > (16u << 20)) {
				cli_error(
				    "bad size '%s' for --pack-max: want a "
				    "size up to 16M, or 0 not to pack",
				    optarg);
				goto free_opts;
			}
			o.pack_max = (uint32_t)size;
			break;
		case OPT_NO_COMPACT:
			o.no_compact = 1;
			break;
		case OPT_BACKUP_META: {
			double sec;
			if (cli_parse_seconds(optarg, &sec) ||
			    (sec > 0 && sec < 1) || sec > 365 * 86400.0) {
				cli_error(
				    "bad interval '%s' for --backup-meta: "
				    "want 1s to 365d, or 0 for no "
				    "backups",
				    optarg);
				goto free_opts;
			}
			o.backup_interval = (int64_t)sec;
			break;
		}
		case OPT_ENCRYPT_KEY:
			keyfile = optarg;
			break;
		case OPT_BACKUP_KEEP:
			if (cli_parse_int(optarg, 1, 10000, &n)) {
				cli_error("bad count '%s' for --backup-keep: "
					  "want 1 to 10000",
					  optarg);
				goto free_opts;
			}
			o.backup_keep = (unsigned)n;
			break;
		case OPT_NO_PACK:
			o.pack_max = 0;
			break;
		case OPT_WRITEBACK:
			o.writeback = 1;
			break;
		case OPT_STAGE_SIZE:
			if (cli_parse_size(optarg, &size) || size == 0) {
				cli_error(
				    "bad size '%s' for --stage-size: want a "
				    "size such as 512M or 4G",
				    optarg);
				goto free_opts;
			}
			o.stage_size = size;
			break;
		case OPT_PLAN_WINDOW:
			if (cli_parse_size(optarg, &size) ||
			    size < (1u << 20)) {
				cli_error(
				    "bad size '%s' for --plan-window: want a "
				    "size of 1M or more, such as 512M or 4G",
				    optarg);
				goto free_opts;
			}
			o.plan_window = size;
			break;
		case OPT_DIRECT_READ:
			if (!strcmp(optarg, "off")) {
				o.direct_read = UINT64_MAX;
			} else if (cli_parse_size(optarg, &size) || size == 0) {
				cli_error(
				    "bad size '%s' for --direct-read: want a "
				    "size such as 64M, or 'off'",
				    optarg);
				goto free_opts;
			} else {
				o.direct_read = size;
			}
			break;
		case OPT_NAME_CACHE_SIZE:
			if (cli_parse_size(optarg, &size) ||
			    size < (64u << 10)) {
				cli_error(
				    "bad size '%s' for --name-cache-size: "
				    "want a size of 64K or more, such as "
				    "1G",
				    optarg);
				goto free_opts;
			}
			o.name_cache_size = size;
			break;
		case OPT_PACK_WINDOW: {
			double w;
			if (cli_parse_seconds(optarg, &w) || w > 600) {
				cli_error(
				    "bad --pack-window '%s': want up to 600 "
				    "seconds, such as 10ms or 2s",
				    optarg);
				goto free_opts;
			}
			o.pack_window_ms = (int)(w * 1000 + 0.5);
			break;
		}
		case OPT_METRICS: {
			char why[300];
			if (fs_metrics_addr_check(optarg, why, sizeof(why))) {
				cli_error("bad --metrics '%s': %s", optarg,
					  why);
				cli_hint("give HOST:PORT such as "
					 "127.0.0.1:9567 (port 0: any free "
					 "one), or off");
				ret = CLI_EXIT_USAGE;
				goto free_opts;
			}
			o.metrics_addr = optarg;
			break;
		}
		case OPT_ACCESS_LOG:
			if (!*optarg) {
				cli_error("--access-log wants a file name");
				ret = CLI_EXIT_USAGE;
				goto free_opts;
			}
			access_log = optarg;
			break;
		case OPT_CACHE_GROUP:
			o.cache_group = optarg;
			break;
		case OPT_GROUP_ADDR:
			o.group_addr = optarg;
			break;
		case OPT_GROUP_TAKE_ONLY:
			o.group_take_only = 1;
			break;
		case OPT_GROUP_KEEP_COPIES:
			o.group_keep_copies = 1;
			break;
		case 'd':
			o.debug = 1;
			break;
		case OPT_ALLOW_OTHER:
			o.allow_other = 1;
			break;
		case 'o':
			if (opts_append(&fuse_opts, optarg)) {
				ret = CLI_EXIT_FAIL;
				goto free_opts;
			}
			break;
		case 'h':
			ret = cli_usage(usage, CLI_EXIT_OK);
			goto free_opts;
		default:
			ret = cli_bad_option(c, argv, usage);
			goto free_opts;
		}
	}
	if (argc - optind != 2) {
		cli_error(argc - optind < 2 ? "META_URL and MOUNTPOINT are "
					      "required"
					    : "too many arguments");
		ret = cli_usage(usage, CLI_EXIT_USAGE);
		goto free_opts;
	}
	char why[600];
	if (fs_group_opts_check(&o, why, sizeof(why))) {
		cli_error("%s", why);
		goto free_opts; /* CLI_EXIT_USAGE */
	}
	ret = CLI_EXIT_FAIL;
	/* read here, before the daemon leaves the working directory */
	if (cli_secret_load(keyfile, &secret, &secret_len))
		goto free_opts;
	o.secret = secret;
	o.secret_len = secret_len;
	mp_arg = argv[optind + 1];
	if (check_mountpoint(mp_arg, mp))
		goto free_opts;
	if (!foreground && strcmp(mp_arg, mp))
		reexec_canonical(argc, argv, mp_arg, mp);
	/* read, and the run again is past: gone, name and all (no thread
	 * runs yet that could read the environment) */
	env_drop("GRANARY_ENCRYPT_PASSPHRASE");

	meta_url = strdup(argv[optind]);
	if (!meta_url) {
		cli_error("out of memory");
		goto free_opts;
	}
	hide_password(argv[optind]);
	o.meta_url = meta_url;
	o.mountpoint = mp;
	o.fuse_opts = fuse_opts;
	rep.mountpoint = mp_arg;
	rep.foreground = foreground;

	/* the daemon leaves for "/": relative paths would move */
	char log_abs[PATH_MAX + 1];
	if (access_log) {
		if (absolute_path(access_log, log_abs, sizeof(log_abs))) {
			cli_error("the access log path '%s' is too long",
				  access_log);
			goto free_opts;
		}
		o.access_log = log_abs;
	}
	char cache_abs[8192];
	if (o.cache_dir) {
		if (absolute_dirs(o.cache_dir, cache_abs, sizeof(cache_abs))) {
			cli_error("cache directories '%s' are too long",
				  o.cache_dir);
			ret = CLI_EXIT_FAIL;
			goto free_opts;
		}
		o.cache_dir = cache_abs;
	}
	if (!logto)
		logto = foreground ? "-" : "syslog";
	if (log_level < 0)
		log_level = o.debug ? LOG_DEBUG : LOG_INFO;
	log_set_bound(log_max, log_keep); /* checked above */
	err = log_open(logto, log_level);
	if (err) {
		cli_error("cannot open log file '%s': %s", logto,
			  strerror(err));
		goto free_url;
	}

	/* A log file is reopened on SIGHUP (logrotate) rather than ending the
	 * mount: set before fs_mount, as libfuse keeps a handler it finds. */
	if (strcmp(logto, "-") && strcmp(logto, "syslog"))
		log_reopen_on_sighup();

	redis_check(meta_url);
	if (foreground) {
		ret = serve(&o, &rep);
		goto close_log;
	}

	if (pipe2(pipefd, O_CLOEXEC)) {
		cli_error("cannot create a pipe: %s", strerror(errno));
		goto close_log;
	}
	fflush(NULL);
	child = fork();
	if (child < 0) {
		cli_error("cannot fork: %s", strerror(errno));
		close(pipefd[0]);
		close(pipefd[1]);
		goto close_log;
	}
	if (child > 0) {
		close(pipefd[1]);
		ret = wait_ready(child, pipefd[0], mp_arg,
				 strcmp(logto, "-") ? logto : "stderr");
		goto close_log;
	}

	/* The daemon: its own session (no terminal signals), out of the
	 * caller's working directory, and a write to a vanished reader is
	 * an error code, not a death. */
	close(pipefd[0]);
	rep.fd = pipefd[1];
	setsid();
	if (chdir("/"))
		log_warn("cannot change directory to '/': %s", strerror(errno));
	signal(SIGPIPE, SIG_IGN);
	ret = serve(&o, &rep);
close_log:
	log_close();
free_url:
	free(meta_url);
free_opts:
	free(fuse_opts);
	crypt_secret_free(secret, secret_len);
	return ret;
}
