/*
 * cmd_plan.c - `granary plan`: hand a mount the ordered list of files a
 * job will read (an epoch plan, fs/vfs/plan.h), so that its client fetches
 * ahead of the job's readers in that order and evicts what the plan needs
 * furthest ahead; replace a plan's list, cancel it, show the plans.
 *
 * It speaks the control xattrs of plan.h on MOUNTPOINT: a get of
 * "granary.plan.new", sets of "granary.plan.ID.add" with up to
 * PLAN_ADD_MAX bytes of paths each, and gets of the calls that work
 * everywhere (owner:PID, clear, cancel). Where a set cannot be made (a
 * read-only mount, whose kernel refuses every set; a mount point the
 * caller may not write) each file is added by a get on the file itself,
 * "granary.plan.ID.add:POS", from several threads.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <linux/limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "fs/vfs/plan.h"
#include "tools/cli.h"

#define GET_THREADS 8 /* gets of a read-only mount's adds at once */

static const char usage[] =
    "usage: granary plan [--owner PID] MOUNTPOINT LIST\n"
    "       granary plan [--owner PID] --replace ID MOUNTPOINT LIST\n"
    "       granary plan --cancel ID MOUNTPOINT\n"
    "       granary plan --status [--json] MOUNTPOINT [ID]\n"
    "\n"
    "Hand the client serving MOUNTPOINT the order in which a job will read\n"
    "its files (an epoch plan): it fetches ahead of the job's readers in\n"
    "that order into this node's disk cache, and evicts first what the\n"
    "plan needs furthest ahead. MOUNTPOINT is a granary mount or a\n"
    "directory in one; LIST is a file of paths, one a line ('-': stdin),\n"
    "relative to MOUNTPOINT or absolute under it. Prints the plan's\n"
    "id. The plan lives while its owner does: by default the process that\n"
    "ran this command (the shell or the job's launcher; for a subshell, as\n"
    "in id=$(granary plan ...), the shell it was forked from; the nearest\n"
    "of the caller's own, under sudo).\n"
    "\n"
    "  --owner PID      the plan ends when process PID does\n"
    "  --replace ID     the next epoch: plan ID's list becomes LIST\n"
    "  --cancel ID      plan ID is gone\n"
    "  --status         show the plans (or plan ID): files, the readers'\n"
    "                   place, window, bytes fetched ahead, used, wasted,\n"
    "                   opens that found their file ready or waited\n"
    "  --json           --status as JSON\n"
    "  -h, --help       show this help\n"
    "\n"
    "Each path must be a regular file the caller may read; a path that is\n"
    "not is named, and nothing is planned. A user sees and changes their\n"
    "own plans; root all of them.\n"
    "\n"
    "exit status: 0 done, 1 failed (the reason on stderr), 2 usage error.\n";

enum { OPT_OWNER = 256, OPT_REPLACE, OPT_CANCEL, OPT_STATUS, OPT_JSON };

static const struct option options[] = {
    {"owner", required_argument, NULL, OPT_OWNER},
    {"replace", required_argument, NULL, OPT_REPLACE},
    {"cancel", required_argument, NULL, OPT_CANCEL},
    {"status", no_argument, NULL, OPT_STATUS},
    {"json", no_argument, NULL, OPT_JSON},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* A plan id: 1 or more, decimal. */
static int id_arg(const char *s, unsigned long long *id)
{
	char *e;

	errno = 0;
	*id = strtoull(s, &e, 10);
	return errno || *e || s[0] < '1' || s[0] > '9' ? EINVAL : 0;
}

/* A get of control call name on path into buf (cap bytes, NUL-ended):
 * 0 or errno. */
static int call(const char *path, const char *name, char *buf, size_t cap)
{
	ssize_t n = getxattr(path, name, buf, cap - 1);

	if (n < 0)
		return errno;
	buf[n] = '\0';
	return 0;
}

/* What an error of a call on plan id means, on stderr. */
static void plan_error(const char *mp, unsigned long long id, int err)
{
	if (err == ENOENT)
		cli_error("no plan %llu on '%s' (never made, or ended)", id,
			  mp);
	else if (err == EPERM)
		cli_error("plan %llu on '%s' is another user's", id, mp);
	else if (err == ENODATA || err == ENOTSUP)
		cli_error("'%s' is not a granary mount with epoch plans", mp);
	else
		cli_error("plan %llu on '%s': %s", id, mp, strerror(err));
}

/* ---- the list ---------------------------------------------------------- */

struct list {
	char **path; /* relative to the mount point, normalized */
	size_t n, cap;
};

static void list_release(struct list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->path[i]);
	free(l->path);
}

/* line as a path below mp (absolute, canonical): "." and empty names
 * dropped; ".." refused. NULL (told) when it is not one. */
static char *relative(const char *line, const char *mp)
{
	size_t mlen = strlen(mp);
	const char *s = line;
	char *out, *w;

	if (line[0] == '/') {
		if (strncmp(line, mp, mlen) ||
		    (line[mlen] != '/' && !(mlen == 1 && mp[0] == '/'))) {
			cli_error("'%s' is not under the mount point '%s'",
				  line, mp);
			return NULL;
		}
		s = line + (mlen == 1 ? 0 : mlen);
	}
	if (!(out = malloc(strlen(s) + 1))) {
		cli_error("out of memory");
		return NULL;
	}
	w = out;
	while (*s) {
		size_t n = strcspn(s, "/");
		if (n == 2 && s[0] == '.' && s[1] == '.') {
			cli_error("'%s': '..' is not allowed in a planned path",
				  line);
			free(out);
			return NULL;
		}
		if (n && !(n == 1 && s[0] == '.')) {
			if (w != out)
				*w++ = '/';
			memcpy(w, s, n);
			w += n;
		}
		s += n + (s[n] == '/');
	}
	*w = '\0';
	if (w == out) {
		cli_error("'%s' names the mount point, not a file", line);
		free(out);
		return NULL;
	}
	return out;
}

static int list_read(const char *file, const char *mp, struct list *l)
{
	FILE *f = strcmp(file, "-") ? fopen(file, "re") : stdin;
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	int err = 0;

	if (!f) {
		cli_error("cannot read list '%s': %s", file, strerror(errno));
		return errno;
	}
	while (!err && (len = getline(&line, &cap, f)) >= 0) {
		while (len > 0 &&
		       (line[len - 1] == '\n' || line[len - 1] == '\r'))
			line[--len] = '\0';
		if (!len)
			continue;
		char *p = relative(line, mp);
		if (!p) {
			err = EINVAL;
			break;
		}
		if (strlen(p) + 1 > PLAN_ADD_MAX) {
			cli_error("'%s': %s", line, strerror(ENAMETOOLONG));
			free(p);
			err = ENAMETOOLONG;
			break;
		}
		if (l->n == l->cap) {
			size_t c = l->cap ? 2 * l->cap : 1024;
			char **v = realloc(l->path, c * sizeof(*v));
			if (!v) {
				free(p);
				cli_error("out of memory");
				err = ENOMEM;
				break;
			}
			l->path = v;
			l->cap = c;
		}
		l->path[l->n++] = p;
	}
	if (!err && ferror(f)) {
		err = errno ? errno : EIO;
		cli_error("cannot read list '%s': %s", file, strerror(err));
	}
	free(line);
	if (f != stdin)
		fclose(f);
	return err;
}

/* ---- adds -------------------------------------------------------------------
 */

/* After a refused add of paths [from, to): the first of them the caller
 * cannot read, named with why (checked here, as the caller); 0 when each
 * looks readable from here. */
static int name_bad(const char *mp, const struct list *l, size_t from,
		    size_t to)
{
	char full[PATH_MAX];
	struct stat st;

	for (size_t i = from; i < to; i++) {
		int err = 0;
		if (snprintf(full, sizeof(full), "%s/%s", mp, l->path[i]) >=
		    (int)sizeof(full))
			err = ENAMETOOLONG;
		else if (stat(full, &st))
			err = errno;
		else if (S_ISDIR(st.st_mode))
			err = EISDIR;
		else if (!S_ISREG(st.st_mode))
			err = EINVAL;
		else if (faccessat(AT_FDCWD, full, R_OK, AT_EACCESS))
			err = errno;
		if (!err)
			continue;
		if (err == EINVAL)
			cli_error("'%s': not a regular file", l->path[i]);
		else
			cli_error("'%s': %s", l->path[i], strerror(err));
		return err;
	}
	return 0;
}

/* Sets of "granary.plan.ID.add", PLAN_ADD_MAX bytes at most each. */
static int add_sets(const char *mp, unsigned long long id, const struct list *l)
{
	char name[64], *buf = malloc(PLAN_ADD_MAX);
	size_t i = 0;
	int err = 0;

	if (!buf) {
		cli_error("out of memory");
		return ENOMEM;
	}
	snprintf(name, sizeof(name), "granary.plan.%llu.add", id);
	while (!err && i < l->n) {
		size_t from = i, len = 0;
		for (; i < l->n; i++) {
			size_t n = strlen(l->path[i]);
			if (len + n + 1 > PLAN_ADD_MAX)
				break;
			memcpy(buf + len, l->path[i], n);
			buf[len + n] = '\n';
			len += n + 1;
		}
		if (setxattr(mp, name, buf, len, 0) == 0)
			continue;
		err = errno;
		if (!name_bad(mp, l, from, i))
			cli_error("cannot plan files %zu to %zu of the list: "
				  "%s",
				  from + 1, i, strerror(err));
	}
	free(buf);
	return err;
}

/* The gets of add_gets: batches of files taken in list order by
 * GET_THREADS threads, each a get of "granary.plan.ID.add:POS:PATHS" on
 * the mount point with as many paths as the name holds (XATTR_NAME_MAX),
 * or of "granary.plan.ID.add:POS" on the file itself for a path the
 * batch cannot carry, or the files of a batch refused (the client says
 * which and why, following symbolic links; an older client has no batch
 * form). The client appends them in position order. */
struct batch {
	size_t first, n; /* files [first, first + n) of the list */
};

struct gets {
	const char *mp;
	const struct list *l;
	unsigned long long id;
	size_t base; /* the plan's files before the first */
	struct batch *b;
	size_t nb;
	size_t next; /* the next batch to take; atomic */
	int stop;    /* a get failed; atomic */
	pthread_mutex_t lock;
	size_t bad; /* the first file that failed; protected by lock */
	int err;    /* its error; protected by lock */
};

/* A get of name on path, again while EAGAIN (too far past the files not
 * yet added, a thread of ours slow on one: they come, unless one
 * failed). */
static int get_add(struct gets *g, const char *path, const char *name)
{
	char buf[32];
	int err;

	while ((err = call(path, name, buf, sizeof(buf))) == EAGAIN &&
	       !__atomic_load_n(&g->stop, __ATOMIC_RELAXED))
		usleep(1000);
	return err;
}

/* File i alone, by a get on itself. */
static int get_one(struct gets *g, size_t i)
{
	char name[96], full[PATH_MAX];

	snprintf(name, sizeof(name), "granary.plan.%llu.add:%zu", g->id,
		 g->base + i);
	if (snprintf(full, sizeof(full), "%s/%s", g->mp, g->l->path[i]) >=
	    (int)sizeof(full))
		return ENAMETOOLONG;
	return get_add(g, full, name);
}

/* The name of batch b's get: 0, or ENAMETOOLONG past cap. */
static int batch_name(const struct gets *g, const struct batch *b, char *name,
		      size_t cap)
{
	size_t at = (size_t)snprintf(
	    name, cap, "granary.plan.%llu.add:%zu:", g->id, g->base + b->first);

	for (size_t i = b->first; i < b->first + b->n; i++) {
		size_t len = strlen(g->l->path[i]);
		if (at + len + (i > b->first) >= cap)
			return ENAMETOOLONG;
		if (i > b->first)
			name[at++] = '\n';
		memcpy(name + at, g->l->path[i], len + 1);
		at += len;
	}
	return 0;
}

static void *gets_main(void *arg)
{
	struct gets *g = arg;
	char name[XATTR_NAME_MAX + 1];

	for (;;) {
		size_t k = __atomic_fetch_add(&g->next, 1, __ATOMIC_RELAXED);
		if (k >= g->nb || __atomic_load_n(&g->stop, __ATOMIC_RELAXED))
			break;
		const struct batch *b = &g->b[k];
		size_t i = b->first, end = b->first + b->n;
		int err = 0;
		if (b->n > 1 && !batch_name(g, b, name, sizeof(name)) &&
		    !get_add(g, g->mp, name))
			continue;
		/* one at a time: the batch was refused, or is one file */
		while (i < end && !(err = get_one(g, i)))
			i++;
		if (!err)
			continue;
		pthread_mutex_lock(&g->lock);
		if (!g->err || i < g->bad) {
			g->err = err;
			g->bad = i;
		}
		pthread_mutex_unlock(&g->lock);
		__atomic_store_n(&g->stop, 1, __ATOMIC_RELAXED);
		break;
	}
	return NULL;
}

/* May path go in a batch (names with single '/' between them, no ".",
 * "..", newline)? */
static int batchable(const char *path)
{
	const char *s = path;

	if (strchr(path, '\n') || !*path)
		return 0;
	for (;;) {
		size_t n = strcspn(s, "/");
		if (!n || (n == 1 && s[0] == '.') ||
		    (n == 2 && s[0] == '.' && s[1] == '.'))
			return 0;
		if (!s[n])
			return 1;
		s += n + 1;
	}
}

/* The list cut into batches, each as many files in a row as one name
 * holds (a file that cannot go in one alone). */
static int batches_make(struct gets *g)
{
	const size_t room = XATTR_NAME_MAX - 48; /* the name's head */
	const struct list *l = g->l;

	if (!(g->b = calloc(l->n ? l->n : 1, sizeof(*g->b))))
		return ENOMEM;
	for (size_t i = 0, used = 0; i < l->n; i++) {
		size_t len = strlen(l->path[i]) + 1;
		struct batch *b = g->nb ? &g->b[g->nb - 1] : NULL;
		if (!batchable(l->path[i]) || len > room) {
			g->b[g->nb++] = (struct batch){i, 1};
			used = room; /* nothing joins it */
			continue;
		}
		if (b && used + len <= room) {
			b->n++;
			used += len;
			continue;
		}
		g->b[g->nb++] = (struct batch){i, 1};
		used = len;
	}
	return 0;
}

/* The files added by gets, from GET_THREADS threads at once: each get
 * waits on the client (the paths' lookups, attributes and chunk lists),
 * so that one thread would add a few thousand files a second. base: the
 * files the plan holds already. */
static int add_gets(const char *mp, unsigned long long id, size_t base,
		    const struct list *l)
{
	struct gets g = {.mp = mp, .l = l, .id = id, .base = base};
	pthread_t t[GET_THREADS];
	size_t nt = 0;

	if (batches_make(&g)) {
		cli_error("cannot add to plan %llu: %s", id, strerror(ENOMEM));
		return ENOMEM;
	}
	pthread_mutex_init(&g.lock, NULL);
	for (; nt < GET_THREADS && nt < g.nb; nt++)
		if (pthread_create(&t[nt], NULL, gets_main, &g))
			break;
	if (!nt && g.nb)
		gets_main(&g); /* no thread: this one */
	for (size_t i = 0; i < nt; i++)
		pthread_join(t[i], NULL);
	pthread_mutex_destroy(&g.lock);
	free(g.b);
	if (g.err == EINVAL)
		cli_error("'%s': not a regular file", l->path[g.bad]);
	else if (g.err)
		cli_error("'%s': %s", l->path[g.bad], strerror(g.err));
	return g.err;
}

/* May the caller set xattrs on mp? Not on a read-only mount (the kernel
 * refuses), nor without write permission on it. */
static int can_set(const char *mp)
{
	struct statvfs sv;

	if (statvfs(mp, &sv) == 0 && (sv.f_flag & ST_RDONLY))
		return 0;
	return faccessat(AT_FDCWD, mp, W_OK, AT_EACCESS) == 0;
}

static int plan_make(const char *mp, const char *file, long owner,
		     unsigned long long replace)
{
	struct list l = {0};
	unsigned long long id = replace;
	char name[96], buf[64];
	size_t base = 0;
	int err = list_read(file, mp, &l);

	if (err)
		goto release;
	if (!replace) {
		if ((err = call(mp, "granary.plan.new", buf, sizeof(buf)))) {
			if (err == ENODATA || err == ENOTSUP)
				cli_error("'%s' is not a granary mount with a "
					  "disk cache: no plans there",
					  mp);
			else
				cli_error("cannot make a plan on '%s': %s", mp,
					  strerror(err));
			goto release;
		}
		id = strtoull(buf, NULL, 10);
	}
	snprintf(name, sizeof(name), "granary.plan.%llu.owner:%ld", id, owner);
	if (!(err = call(mp, name, buf, sizeof(buf))))
		base = strtoull(buf, NULL, 10); /* the files it holds */
	if (err) {
		if (err == ESRCH)
			cli_error("no process %ld to own the plan", owner);
		else if (err == EPERM && !replace)
			cli_error("process %ld is another user's: it cannot "
				  "own your plan",
				  owner);
		else
			plan_error(mp, id, err);
		if (replace)
			goto release; /* not changed */
		goto undo;
	}
	if (replace) {
		snprintf(name, sizeof(name), "granary.plan.%llu.clear", id);
		if ((err = call(mp, name, buf, sizeof(buf)))) {
			plan_error(mp, id, err);
			goto release;
		}
		base = 0;
	}
	err = can_set(mp) ? add_sets(mp, id, &l) : add_gets(mp, id, base, &l);
	if (!err) {
		printf("%llu\n", id);
		goto release;
	}
undo:
	/* nothing half made stays: a new plan goes, a replaced one is left
	 * empty */
	snprintf(name, sizeof(name), "granary.plan.%llu.%s", id,
		 replace ? "clear" : "cancel");
	call(mp, name, buf, sizeof(buf));
	if (replace)
		cli_hint("plan %llu is empty now", id);
release:
	list_release(&l);
	return err ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}

/* ---- status
 * ------------------------------------------------------------------- */

static unsigned long long num(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);
	return json_is_integer(v) ? (unsigned long long)json_integer_value(v)
				  : 0;
}

static void status_line(json_t *p)
{
	char w[32], a[32], pf[32], u[32], ws[32];

	cli_format_size(num(p, "window"), w, sizeof(w));
	cli_format_size(num(p, "ahead"), a, sizeof(a));
	cli_format_size(num(p, "prefetched"), pf, sizeof(pf));
	cli_format_size(num(p, "used"), u, sizeof(u));
	cli_format_size(num(p, "wasted"), ws, sizeof(ws));
	printf("%-6llu %-6llu %-8llu %9llu %9llu %10s %10s %8llu %8llu "
	       "%10s %10s %10s %6llus\n",
	       num(p, "id"), num(p, "uid"), num(p, "pid"), num(p, "files"),
	       num(p, "place"), w, a, num(p, "ready"), num(p, "waited"), pf, u,
	       ws, num(p, "idle_s"));
}

static int plan_status(const char *mp, const char *idtext, int json)
{
	unsigned long long id = 0;
	char name[64];
	ssize_t n = -1;
	char *buf = NULL;
	json_error_t je;
	json_t *root;

	if (idtext && !id_arg(idtext, &id))
		snprintf(name, sizeof(name), "granary.plan.%llu", id);
	else
		snprintf(name, sizeof(name), "granary.plans");
	for (int tries = 0; tries < 5; tries++) {
		n = getxattr(mp, name, NULL, 0);
		if (n < 0 || !(buf = realloc(buf, (size_t)n + 1)))
			break;
		n = getxattr(mp, name, buf, (size_t)n);
		if (n >= 0 || errno != ERANGE)
			break;
	}
	if (n < 0 || !buf) {
		int err = n < 0 ? errno : ENOMEM;
		free(buf);
		if (idtext)
			plan_error(mp, id, err);
		else if (err == ENODATA || err == ENOTSUP)
			cli_error("'%s' is not a granary mount with epoch "
				  "plans",
				  mp);
		else
			cli_error("cannot read the plans of '%s': %s", mp,
				  strerror(err));
		return CLI_EXIT_FAIL;
	}
	buf[n] = '\0';
	if (json) {
		printf("%s\n", buf);
		free(buf);
		return CLI_EXIT_OK;
	}
	root = json_loads(buf, 0, &je);
	free(buf);
	if (!root) {
		cli_error("the client of '%s' answered what is not JSON: %s",
			  mp, je.text);
		return CLI_EXIT_FAIL;
	}
	printf("%-6s %-6s %-8s %9s %9s %10s %10s %8s %8s %10s %10s %10s %7s\n",
	       "ID", "UID", "PID", "FILES", "PLACE", "WINDOW", "AHEAD", "READY",
	       "WAITED", "FETCHED", "USED", "WASTED", "IDLE");
	if (idtext) {
		status_line(root);
	} else {
		json_t *v = json_object_get(root, "plans"), *p;
		size_t i;
		json_array_foreach(v, i, p) status_line(p);
	}
	json_decref(root);
	return CLI_EXIT_OK;
}

/* ---- the owner
 * ---------------------------------------------------------------- */

/* /proc/PID/cmdline into buf (cap bytes): its length, or -1. And the
 * parent of pid, 0 if not known. */
static ssize_t cmdline(long pid, char *buf, size_t cap)
{
	char path[64];
	ssize_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%ld/cmdline", pid);
	if (!(f = fopen(path, "re")))
		return -1;
	n = (ssize_t)fread(buf, 1, cap, f);
	fclose(f);
	return n;
}

static long parent_of(long pid)
{
	char path[64], buf[512], *e;
	long ppid = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	if (!(f = fopen(path, "re")))
		return 0;
	if (fgets(buf, sizeof(buf), f) && (e = strrchr(buf, ')')))
		sscanf(e + 1, " %*c %ld", &ppid);
	fclose(f);
	return ppid;
}

/* Does process pid run as this command's user (real or effective)? */
static int ours(long pid)
{
	char path[64], line[256];
	unsigned long r, e;
	int yes = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%ld/status", pid);
	if (!(f = fopen(path, "re")))
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Uid: %lu %lu", &r, &e) == 2) {
			yes = r == getuid() || e == getuid();
			break;
		}
	fclose(f);
	return yes;
}

/*
 * The process the plan lives with by default: the one that ran this
 * command; when that is a subshell (a fork that did not exec: the same
 * command line as its parent's, as `id=$(granary plan ...)` makes), the
 * shell it was forked from, for the subshell ends at once; when it is
 * another user's (sudo, setpriv), the nearest ancestor of this user's.
 * 0: none.
 */
static long default_owner(void)
{
	long pid = (long)getppid();
	char a[4096], b[4096];

	for (int depth = 0; depth < 32 && pid > 1; depth++) {
		long up = parent_of(pid);
		ssize_t na = cmdline(pid, a, sizeof(a));
		ssize_t nb = up > 1 ? cmdline(up, b, sizeof(b)) : -1;
		int subshell = na > 0 && na == nb && !memcmp(a, b, (size_t)na);
		if (!subshell && ours(pid))
			return pid;
		pid = up;
	}
	return 0;
}

/* ---- the command -----------------------------------------------------------
 */

int cmd_plan(int argc, char **argv)
{
	unsigned long long replace = 0, cancel = 0;
	long owner = 0;
	int status = 0, json = 0, c;
	char mp[PATH_MAX];

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", options, NULL)) != -1) {
		switch (c) {
		case OPT_OWNER:
			if (cli_parse_int(optarg, 1, INT32_MAX, &owner)) {
				cli_error("--owner takes a process id, not "
					  "'%s'",
					  optarg);
				return cli_usage(usage, CLI_EXIT_USAGE);
			}
			break;
		case OPT_REPLACE:
		case OPT_CANCEL:
			if (id_arg(optarg,
				   c == OPT_CANCEL ? &cancel : &replace)) {
				cli_error("%s takes a plan id (1, 2, ...), not "
					  "'%s'",
					  c == OPT_CANCEL ? "--cancel"
							  : "--replace",
					  optarg);
				return cli_usage(usage, CLI_EXIT_USAGE);
			}
			break;
		case OPT_STATUS:
			status = 1;
			break;
		case OPT_JSON:
			json = 1;
			break;
		case 'h':
			return cli_usage(usage, CLI_EXIT_OK);
		default:
			return cli_bad_option(c, argv, usage);
		}
	}
	int operands = argc - optind;
	if ((status && (cancel || replace)) || (cancel && replace)) {
		cli_error("--status, --cancel and --replace do not go "
			  "together");
		return cli_usage(usage, CLI_EXIT_USAGE);
	}
	if (json && !status) {
		cli_error("--json goes with --status");
		return cli_usage(usage, CLI_EXIT_USAGE);
	}
	if ((status && (operands < 1 || operands > 2)) ||
	    (cancel && operands != 1) ||
	    (!status && !cancel && operands != 2)) {
		cli_error(status   ? "--status needs MOUNTPOINT and maybe an ID"
			  : cancel ? "--cancel needs MOUNTPOINT alone"
				   : "plan needs MOUNTPOINT and LIST");
		return cli_usage(usage, CLI_EXIT_USAGE);
	}
	if (status && operands == 2) {
		unsigned long long id;
		if (id_arg(argv[optind + 1], &id)) {
			cli_error("'%s' is not a plan id", argv[optind + 1]);
			return cli_usage(usage, CLI_EXIT_USAGE);
		}
	}
	if (!realpath(argv[optind], mp)) {
		cli_error("'%s': %s", argv[optind], strerror(errno));
		return CLI_EXIT_FAIL;
	}
	if (!cli_on_fuse(mp)) {
		cli_error("'%s' is not on a granary mount", argv[optind]);
		return CLI_EXIT_FAIL;
	}
	if (status)
		return plan_status(mp, operands == 2 ? argv[optind + 1] : NULL,
				   json);
	if (cancel) {
		char name[64], buf[32];
		int err;
		snprintf(name, sizeof(name), "granary.plan.%llu.cancel",
			 cancel);
		if ((err = call(mp, name, buf, sizeof(buf)))) {
			plan_error(mp, cancel, err);
			return CLI_EXIT_FAIL;
		}
		return CLI_EXIT_OK;
	}
	if (!owner && !(owner = default_owner())) {
		cli_error("no process of yours runs this command (sudo?): none "
			  "to own the plan");
		cli_hint("give --owner PID, the process of yours the plan "
			 "lives with (the job)");
		return CLI_EXIT_FAIL;
	}
	return plan_make(mp, argv[optind + 1], owner, replace);
}
