/*
 * cmd_quota.c - `granary quota set|get|list|delete|check`: directory
 * quotas (meta/meta_quota.h) from any node, without a mount. The scripts
 * keep a quota's usage exact as the tree changes; what this command adds is
 * the count of a tree that existed before its quota (set), the path of each
 * quota's directory (found from its inode), and a recount to compare with
 * and repair what is recorded (check).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "meta/meta.h"
#include "meta/meta_quota.h"
#include "meta/meta_volume.h"
#include "tools/cli.h"
#include "tools/progress.h"

static const char usage[] =
    "usage: granary quota set META_URL --path DIR [--capacity SIZE] "
    "[--inodes N]\n"
    "       granary quota get META_URL --path DIR [--json]\n"
    "       granary quota list META_URL [--json]\n"
    "       granary quota delete META_URL --path DIR\n"
    "       granary quota check META_URL [--path DIR] [--repair]\n"
    "\n"
    "A directory's quota limits the data stored below it (the bytes files\n"
    "hold, as du counts them) and the number of files, directories and\n"
    "other inodes below it (the directory itself not counted). Every\n"
    "client of the volume enforces it: past a limit, writes and creations\n"
    "fail with EDQUOT (\"Disk quota exceeded\"). Quotas may nest; the root\n"
    "has none (the volume's capacity is its limit). This command works\n"
    "from any node with the metadata's URL, without a mount.\n"
    "\n"
    "  set      create or change DIR's quota; a limit not given keeps its\n"
    "           value (none on a new quota). A new quota on a tree that\n"
    "           has files counts them first (a walk of the tree)\n"
    "  get      DIR's quota: limits, usage, bytes clients are writing\n"
    "  list     every quota with the path of its directory\n"
    "  delete   remove DIR's quota (the tree is left as it is)\n"
    "  check    count the trees of the quotas again (all of them, or those\n"
    "           at or below DIR) and compare with the usage recorded;\n"
    "           exit 1 when a figure differs\n"
    "\n"
    "  -p, --path DIR        a directory of the volume, from its root\n"
    "                        (\"/a/b\"; a mount at /mnt/v shows it as\n"
    "                        /mnt/v/a/b)\n"
    "  -c, --capacity SIZE   (set) the most bytes stored below DIR, such as\n"
    "                        500G or 2T (powers of 1024); 0: no limit\n"
    "  -i, --inodes N        (set) the most inodes below DIR; 0: no limit\n"
    "  -r, --repair          (check) correct each usage that differs by\n"
    "                        the difference; exit 0 when all are right\n"
    "      --json            (get, list) JSON instead of a table\n"
    "  -h, --help            show this help\n"
    "\n"
    "A quota set, changed or deleted is in force on every mounted client\n"
    "within about a second (each reads the quotas' generation once a\n"
    "second); writes a client accepted before then are not taken back.\n"
    "\n"
    "list and get read the recorded usage (no walk); list then finds each\n"
    "directory's path from its parents. set on a new quota and check walk\n"
    "the trees: changes made meanwhile may be counted wrong; run check\n"
    "--repair again on a quiet tree.\n"
    "\n"
    "exit status: 0 ok, 1 failure (or check found a difference), 2 usage\n"
    "error.\n";

enum { OPT_JSON = 256 };

static const struct option options[] = {
    {"path", required_argument, NULL, 'p'},
    {"capacity", required_argument, NULL, 'c'},
    {"inodes", required_argument, NULL, 'i'},
    {"repair", no_argument, NULL, 'r'},
    {"json", no_argument, NULL, OPT_JSON},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

struct qopts {
	const char *path;
	uint64_t capacity, inodes;
	int has_capacity, has_inodes, repair, json;
};

/* A command's view of the volume: where it is, and the directories'
 * paths found so far. */
struct qctx {
	struct meta *m;
	const char *shown;	/* the URL, redacted */
	struct cli_paths paths; /* of the quotas' directories */
};

/* ---- paths ------------------------------------------------------------ */

/* path as "/a/b": no empty or "." parts, no trailing slash. */
static char *path_clean(const char *path)
{
	char *out = malloc(strlen(path) + 2), *w = out;

	if (!out)
		return NULL;
	for (const char *p = path; *p;) {
		size_t n = strcspn(p, "/");
		if (n && !(n == 1 && p[0] == '.')) {
			*w++ = '/';
			memcpy(w, p, n);
			w += n;
		}
		p += n + (p[n] == '/');
	}
	if (w == out)
		*w++ = '/';
	*w = 0;
	return out;
}

/* --path DIR to a directory's inode; 0, or the error printed and the exit
 * status. The root is refused (it has no quota) unless root_ok. */
static int path_dir(struct qctx *t, const char *path, int root_ok,
		    uint64_t *ino)
{
	struct meta_attr a;
	int err = cli_resolve(t->m, path, ino, &a);

	if (err == ENOENT || err == ENOTDIR) {
		cli_error("no directory '%s' in the volume at '%s'", path,
			  t->shown);
		cli_hint("give the path from the volume's root, as mounted "
			 "(a mount at /mnt/v shows /mnt/v/a/b as '/a/b')");
		return CLI_EXIT_FAIL;
	}
	if (err) {
		cli_error("cannot look up '%s' in the volume at '%s': %s", path,
			  t->shown, gr_strerror(err));
		return CLI_EXIT_FAIL;
	}
	if (a.type != META_DIR) {
		cli_error("'%s' is not a directory: a quota is a directory's",
			  path);
		return CLI_EXIT_FAIL;
	}
	if (*ino == META_ROOT_INO && !root_ok) {
		cli_error("the volume's root has no quota");
		cli_hint("the root's limit is the volume's capacity (granary "
			 "format --capacity; granary status shows it)");
		return CLI_EXIT_FAIL;
	}
	return 0;
}

/* ---- counting trees --------------------------------------------------- */

/*
 * A walk of one or more quotas' trees that counts each quota's usage as
 * the scripts define it: every inode below the quota's directory once
 * (not the directory itself), and the stored bytes of its regular files.
 * Nested quotas are counted in the same walk: each directory carries the
 * quotas it is below. A file with several names counts once per quota:
 * its (quota, inode) pairs are kept and the repeats taken off at the end.
 */
struct count {
	uint64_t ino;	 /* the quota's directory */
	uint64_t space;	 /* counted */
	uint64_t inodes; /* counted */
};

struct frame {
	uint64_t dir;
	uint8_t n;		     /* quotas dir is below (or is) */
	uint32_t q[META_QUOTA_NEST]; /* indices into the counts */
};

struct linked {
	uint32_t q;
	uint64_t ino, stored;
};

struct walk {
	struct meta *m;
	struct count *c; /* sorted by ino */
	size_t nc;
	struct frame *stack;
	size_t nstack, capstack;
	struct linked *links;
	size_t nlinks, caplinks;
	struct progress *progress;
};

static int cmp_count(const void *a, const void *b)
{
	uint64_t x = ((const struct count *)a)->ino;
	uint64_t y = ((const struct count *)b)->ino;
	return x < y ? -1 : x > y;
}

static struct count *count_of(struct walk *w, uint64_t ino)
{
	struct count key = {.ino = ino};
	return bsearch(&key, w->c, w->nc, sizeof *w->c, cmp_count);
}

/* v (n used of *cap elements of size bytes) with room for one more, or
 * NULL when out of memory (v left as it was). */
static void *grow(void *v, size_t n, size_t *cap, size_t size)
{
	size_t c = *cap ? *cap * 2 : 64;

	if (n < *cap)
		return v;
	if ((v = realloc(v, c * size)))
		*cap = c;
	return v;
}

static int push(struct walk *w, const struct frame *f)
{
	struct frame *s = grow(w->stack, w->nstack, &w->capstack, sizeof *s);

	if (!s)
		return ENOMEM;
	w->stack = s;
	s[w->nstack++] = *f;
	return 0;
}

static int link_note(struct walk *w, uint32_t q, uint64_t ino, uint64_t stored)
{
	struct linked *l = grow(w->links, w->nlinks, &w->caplinks, sizeof *l);

	if (!l)
		return ENOMEM;
	w->links = l;
	l[w->nlinks++] = (struct linked){q, ino, stored};
	return 0;
}

static int cmp_linked(const void *a, const void *b)
{
	const struct linked *x = a, *y = b;
	if (x->q != y->q)
		return x->q < y->q ? -1 : 1;
	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

/* One entry of directory f->dir, counted in f's quotas. */
static int count_entry(struct walk *w, const struct frame *f,
		       const struct meta_dirent *e)
{
	const struct meta_attr *a = &e->attr;
	uint64_t stored = a->type == META_FILE ? a->stored : 0;
	struct frame sub;
	struct count *own;
	int err = 0;

	for (uint8_t k = 0; k < f->n && !err; k++) {
		if (a->type != META_DIR && a->nlink > 1) {
			err = link_note(w, f->q[k], e->ino, stored);
			continue;
		}
		w->c[f->q[k]].inodes++;
		w->c[f->q[k]].space += stored;
	}
	progress_add(w->progress, 1, stored);
	if (err || a->type != META_DIR)
		return err;
	sub = *f;
	sub.dir = e->ino;
	if ((own = count_of(w, e->ino))) {
		if (sub.n == META_QUOTA_NEST)
			return EMLINK;
		sub.q[sub.n++] = (uint32_t)(own - w->c);
	}
	return push(w, &sub);
}

/* The directories of the stack, each listed with attributes. One that is
 * gone by the time it is listed was removed meanwhile: skipped. */
static int walk_run(struct walk *w)
{
	int err = 0;

	while (!err && w->nstack) {
		struct frame f = w->stack[--w->nstack];
		struct meta_dirent *d;
		size_t n;
		err = meta_readdir(w->m, f.dir, 1, &d, &n);
		if (err == ENOENT || err == ENOTDIR) {
			err = 0;
			continue;
		}
		for (size_t i = 0; i < n && !err; i++)
			err = count_entry(w, &f, &d[i]);
		meta_dirents_free(d, n);
	}
	if (err)
		return err;
	/* a file with several names: once per quota */
	qsort(w->links, w->nlinks, sizeof *w->links, cmp_linked);
	for (size_t i = 0; i < w->nlinks; i++) {
		if (i && !cmp_linked(&w->links[i - 1], &w->links[i]))
			continue;
		w->c[w->links[i].q].inodes++;
		w->c[w->links[i].q].space += w->links[i].stored;
	}
	return 0;
}

/*
 * Count the trees of the quotas c[0..n) (their ino set), nested ones too,
 * into their space and inodes. top[i] says quota i is below none of the
 * others: its walk starts there.
 */
static int count_trees(struct meta *m, struct count *c, size_t n,
		       const char *top)
{
	struct walk w = {.m = m, .c = c, .nc = n};
	int err = 0;

	for (size_t i = 0; i < n; i++)
		c[i].space = c[i].inodes = 0;
	w.progress = progress_open("quota: counting", 0, 0, 0);
	for (size_t i = 0; i < n && !err; i++)
		if (top[i])
			err = push(&w,
				   &(struct frame){c[i].ino, 1, {(uint32_t)i}});
	if (!err)
		err = walk_run(&w);
	progress_close(w.progress);
	free(w.stack);
	free(w.links);
	return err;
}

/* ---- output ----------------------------------------------------------- */

static void pct(char *buf, size_t cap, uint64_t used, uint64_t max)
{
	if (!max)
		snprintf(buf, cap, "-");
	else
		snprintf(buf, cap, "%.0f%%",
			 100.0 * (double)used / (double)max);
}

static void table_head(void)
{
	printf("%-30s %10s %10s %5s %10s %10s %5s %10s\n", "PATH", "USED",
	       "LIMIT", "USE", "INODES", "LIMIT", "USE", "PENDING");
}

static void table_row(const char *path, const struct meta_quota *q)
{
	char used[32], max[32], pu[16], iu[24], im[24], ip[16], pend[32];

	cli_format_size(q->used_space, used, sizeof used);
	if (q->max_space)
		cli_format_size(q->max_space, max, sizeof max);
	else
		snprintf(max, sizeof max, "-");
	pct(pu, sizeof pu, q->used_space, q->max_space);
	snprintf(iu, sizeof iu, "%" PRIu64, q->used_inodes);
	if (q->max_inodes)
		snprintf(im, sizeof im, "%" PRIu64, q->max_inodes);
	else
		snprintf(im, sizeof im, "-");
	pct(ip, sizeof ip, q->used_inodes, q->max_inodes);
	cli_format_size(q->pending, pend, sizeof pend);
	/* as ls -b shows a name: no path forges a line */
	char *shown = cli_escape(path ? path : "?");
	printf("%-30s %10s %10s %5s %10s %10s %5s %10s\n", shown ? shown : "?",
	       used, max, pu, iu, im, ip, pend);
	free(shown);
}

static void json_pct(uint64_t used, uint64_t max)
{
	if (max)
		printf("%.2f", 100.0 * (double)used / (double)max);
	else
		printf("null");
}

/* One quota as a JSON object: the field names are documented in
 * docs/operations.md "Quotas" and are kept. */
static void json_obj(const char *path, const struct meta_quota *q)
{
	printf("{\"path\": ");
	if (path)
		cli_json_string(stdout, path);
	else
		printf("null");
	printf(", \"ino\": %" PRIu64 ", \"max_space\": %" PRIu64
	       ", \"used_space\": %" PRIu64 ", \"space_pct\": ",
	       q->ino, q->max_space, q->used_space);
	json_pct(q->used_space, q->max_space);
	printf(", \"max_inodes\": %" PRIu64 ", \"used_inodes\": %" PRIu64
	       ", \"inodes_pct\": ",
	       q->max_inodes, q->used_inodes);
	json_pct(q->used_inodes, q->max_inodes);
	printf(", \"pending\": %" PRIu64 "}", q->pending);
}

/* "10 GiB and 1000 inodes", "no limit on bytes and 1000 inodes"... */
static void limits_text(const struct meta_quota *q, char *buf, size_t cap)
{
	char sz[32], in[32];

	if (q->max_space)
		cli_format_size(q->max_space, sz, sizeof sz);
	else
		snprintf(sz, sizeof sz, "no limit on bytes");
	if (q->max_inodes)
		snprintf(in, sizeof in, "%" PRIu64 " inodes", q->max_inodes);
	else
		snprintf(in, sizeof in, "no limit on inodes");
	snprintf(buf, cap, "%s and %s", sz, in);
}

/* ---- the subcommands -------------------------------------------------- */

/* When a change reaches the mounts: they poll, set and delete do not
 * wait for them (docs/operations.md "Quotas: enforcement"). */
static void say_when_in_force(void)
{
	printf("mounted clients see the change within about a second\n");
}

/* Why a quota call on DIR failed, said once. */
static int quota_failed(struct qctx *t, const char *what, const char *path,
			int err)
{
	if (err == ENOENT && path) {
		cli_error("'%s' has no quota", path);
		cli_hint("'granary quota list %s' shows the quotas", t->shown);
	} else if (err == EINVAL) {
		cli_error("cannot %s a quota on '%s': it is the volume's root, "
			  "in the trash or in a directory's versions, which "
			  "are outside every quota",
			  what, path);
		cli_hint("the root's limit is the volume's capacity (granary "
			 "format --capacity)");
	} else if (err == EMLINK) {
		cli_error("cannot %s a quota on '%s': a directory would be "
			  "below more than %d quotas",
			  what, path, META_QUOTA_NEST);
	} else if (err == EROFS) {
		cli_error("the volume at '%s' is read-only", t->shown);
	} else {
		cli_error("cannot %s %s%s%s: %s", what,
			  path ? "the quota of '" : "the quotas",
			  path ? path : "", path ? "'" : "", gr_strerror(err));
	}
	return CLI_EXIT_FAIL;
}

static int do_set(struct qctx *t, const char *path, const struct qopts *o)
{
	struct meta_quota q = {0};
	struct count c;
	uint64_t ino;
	char lim[96];
	int err, created = 0;

	if ((err = path_dir(t, path, 0, &ino)))
		return err;
	err = meta_quota_get(t->m, ino, &q);
	if (err && err != ENOENT)
		return quota_failed(t, "read", path, err);
	if (o->has_capacity)
		q.max_space = o->capacity;
	if (o->has_inodes)
		q.max_inodes = o->inodes;
	err = meta_quota_set(t->m, ino, q.max_space, q.max_inodes, &created);
	if (err)
		return quota_failed(t, "set", path, err);
	limits_text(&q, lim, sizeof lim);
	if (!created) {
		printf("quota of %s changed: %s\n", path, lim);
		say_when_in_force();
		return CLI_EXIT_OK;
	}
	/* a new quota starts at 0: what is there already is counted */
	c = (struct count){.ino = ino};
	err = count_trees(t->m, &c, 1, "\1");
	if (!err && (c.space || c.inodes))
		err = meta_quota_adjust(t->m, ino, (int64_t)c.space,
					(int64_t)c.inodes);
	if (err) {
		cli_error("quota of %s set (%s), but its tree could not be "
			  "counted: %s",
			  path, lim, gr_strerror(err));
		cli_hint("'granary quota check %s --path %s --repair' counts "
			 "it again",
			 t->shown, path);
		return CLI_EXIT_FAIL;
	}
	char sz[32];
	cli_format_size(c.space, sz, sizeof sz);
	printf("quota of %s set: %s; %" PRIu64 " inodes and %s (%" PRIu64
	       " bytes) counted below it\n",
	       path, lim, c.inodes, sz, c.space);
	say_when_in_force();
	return CLI_EXIT_OK;
}

static int do_get(struct qctx *t, const char *path, const struct qopts *o)
{
	struct meta_quota q;
	uint64_t ino;
	int err;

	if ((err = path_dir(t, path, 0, &ino)))
		return err;
	if ((err = meta_quota_get(t->m, ino, &q)))
		return quota_failed(t, "read", path, err);
	if (o->json) {
		json_obj(path, &q);
		putchar('\n');
	} else {
		table_head();
		table_row(path, &q);
	}
	return CLI_EXIT_OK;
}

static int do_list(struct qctx *t, const struct qopts *o)
{
	struct meta_quota *q;
	size_t n;
	int err = meta_quota_list(t->m, &q, &n);

	if (err)
		return quota_failed(t, "list", NULL, err);
	if (o->json)
		printf("[");
	else if (n)
		table_head();
	else
		printf("no quotas\n");
	for (size_t i = 0; i < n; i++) {
		const char *p = cli_dir_path(&t->paths, q[i].ino);
		if (o->json) {
			printf("%s\n  ", i ? "," : "");
			json_obj(p, &q[i]);
		} else {
			table_row(p, &q[i]);
		}
	}
	if (o->json)
		printf("%s]\n", n ? "\n" : "");
	free(q);
	return CLI_EXIT_OK;
}

static int do_delete(struct qctx *t, const char *path)
{
	uint64_t ino;
	int err;

	if ((err = path_dir(t, path, 0, &ino)))
		return err;
	if ((err = meta_quota_delete(t->m, ino)))
		return quota_failed(t, "remove", path, err);
	printf("quota of %s removed\n", path);
	say_when_in_force();
	return CLI_EXIT_OK;
}

/* Is directory dir at or below directory top? (parents up to the root) */
static int below(struct meta *m, uint64_t dir, uint64_t top)
{
	struct meta_attr a;

	for (int depth = 0; depth < 100000; depth++) {
		if (dir == top)
			return 1;
		if (dir == META_ROOT_INO || meta_getattr(m, dir, &a) ||
		    a.type != META_DIR || !a.parent)
			return 0;
		dir = a.parent;
	}
	return 0;
}

/* The quotas check counts: all, or those at or below --path (into *c,
 * sorted by inode, *n), with top[i] set for those below none other. */
static int check_select(struct qctx *t, const char *path, struct count **c,
			size_t *n, char **top)
{
	struct meta_quota *q;
	size_t nq, k = 0;
	uint64_t dir = 0;
	int err;

	if (path && (err = path_dir(t, path, 1, &dir)))
		return err;
	if (dir == META_ROOT_INO)
		dir = 0; /* every quota */
	if ((err = meta_quota_list(t->m, &q, &nq)))
		return quota_failed(t, "list", NULL, err);
	*c = calloc(nq ? nq : 1, sizeof **c);
	*top = calloc(nq ? nq : 1, 1);
	if (!*c || !*top) {
		free(q);
		cli_error("out of memory");
		return CLI_EXIT_FAIL;
	}
	for (size_t i = 0; i < nq; i++)
		if (!dir || below(t->m, q[i].ino, dir))
			(*c)[k++].ino = q[i].ino;
	free(q);
	*n = k;
	qsort(*c, k, sizeof **c, cmp_count);
	/* a walk starts at each quota that no other selected one is above */
	for (size_t i = 0; i < k; i++) {
		struct meta_attr a;
		uint64_t up = (*c)[i].ino;
		(*top)[i] = 1;
		for (int depth = 0; depth < 100000; depth++) {
			if (meta_getattr(t->m, up, &a) || !a.parent ||
			    a.parent == META_ROOT_INO)
				break;
			up = a.parent;
			struct count key = {.ino = up};
			if (bsearch(&key, *c, k, sizeof **c, cmp_count)) {
				(*top)[i] = 0;
				break;
			}
		}
	}
	return 0;
}

static int do_check(struct qctx *t, const char *path, const struct qopts *o)
{
	struct count *c = NULL;
	char *top = NULL;
	size_t n = 0, differ = 0, fixed = 0;
	int err, ret;

	if ((ret = check_select(t, path, &c, &n, &top)))
		goto out;
	ret = CLI_EXIT_FAIL;
	if (!n) {
		printf(path ? "no quota at or below %s\n" : "no quotas\n",
		       path);
		ret = CLI_EXIT_OK;
		goto out;
	}
	if ((err = count_trees(t->m, c, n, top))) {
		cli_error("cannot count the quotas' trees: %s",
			  gr_strerror(err));
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		const char *p = cli_dir_path(&t->paths, c[i].ino);
		struct meta_quota q;
		err = meta_quota_get(t->m, c[i].ino, &q);
		if (err == ENOENT)
			continue; /* deleted meanwhile */
		if (err) {
			quota_failed(t, "read", p, err);
			goto out;
		}
		int same =
		    q.used_space == c[i].space && q.used_inodes == c[i].inodes;
		cli_print_name(stdout, p ? p : "?");
		printf(": recorded %" PRIu64 " bytes, %" PRIu64
		       " inodes; counted %" PRIu64 " bytes, %" PRIu64
		       " inodes: %s",
		       q.used_space, q.used_inodes, c[i].space, c[i].inodes,
		       same ? "ok" : "differs");
		if (!same && o->repair) {
			err = meta_quota_adjust(
			    t->m, c[i].ino,
			    (int64_t)(c[i].space - q.used_space),
			    (int64_t)(c[i].inodes - q.used_inodes));
			printf(" [%s]", err ? "not repaired" : "repaired");
			if (err)
				quota_failed(t, "repair", p, err);
			else
				fixed++;
		}
		putchar('\n');
		differ += !same;
	}
	if (differ && !o->repair)
		cli_hint("'granary quota check %s%s%s --repair' corrects the "
			 "usage (on a quiet tree: writes under way count)",
			 t->shown, path ? " --path " : "", path ? path : "");
	ret = differ == fixed ? CLI_EXIT_OK : CLI_EXIT_FAIL;
out:
	free(c);
	free(top);
	return ret;
}

/* ---- the command ------------------------------------------------------ */

/* The options given fit subcommand cmd? 0, or the usage error's exit. */
static int check_opts(const char *cmd, const struct qopts *o, int nargs)
{
	int set = !strcmp(cmd, "set"), check = !strcmp(cmd, "check");
	int needs_path = set || !strcmp(cmd, "get") || !strcmp(cmd, "delete");

	if (((o->has_capacity || o->has_inodes) && !set) ||
	    (o->repair && !check) ||
	    (o->json && strcmp(cmd, "get") && strcmp(cmd, "list")) ||
	    (o->path && !needs_path && !check)) {
		cli_error("an option given does not apply to 'quota %s'", cmd);
		return cli_usage(usage, CLI_EXIT_USAGE);
	}
	if (nargs != 1) {
		cli_error(nargs ? "too many arguments"
				: "quota %s needs META_URL",
			  cmd);
		return cli_usage(usage, CLI_EXIT_USAGE);
	}
	if (needs_path && !o->path) {
		cli_error("quota %s needs --path DIR", cmd);
		return cli_usage(usage, CLI_EXIT_USAGE);
	}
	if (set && !o->has_capacity && !o->has_inodes) {
		cli_error("quota set needs --capacity SIZE, --inodes N or both "
			  "(0: no limit)");
		return cli_usage(usage, CLI_EXIT_USAGE);
	}
	return 0;
}

static int parse_opts(int argc, char **argv, struct qopts *o)
{
	long n;
	int c, err;

	while ((c = getopt_long(argc, argv, ":p:c:i:rh", options, NULL)) !=
	       -1) {
		switch (c) {
		case 'p':
			if (cli_volume_path_arg(optarg))
				return CLI_EXIT_USAGE;
			o->path = optarg;
			break;
		case 'c':
			if ((err = cli_parse_size(optarg, &o->capacity))) {
				cli_error("bad --capacity '%s': want a size "
					  "such as 500G or 2T (0: no limit)",
					  optarg);
				return CLI_EXIT_USAGE;
			}
			o->has_capacity = 1;
			break;
		case 'i':
			if (cli_parse_int(optarg, 0, INT64_MAX, &n)) {
				cli_error("bad --inodes '%s': want a number "
					  "(0: no limit)",
					  optarg);
				return CLI_EXIT_USAGE;
			}
			o->inodes = (uint64_t)n;
			o->has_inodes = 1;
			break;
		case 'r':
			o->repair = 1;
			break;
		case OPT_JSON:
			o->json = 1;
			break;
		case 'h':
			return -1;
		default:
			return cli_bad_option(c, argv, usage);
		}
	}
	return 0;
}

int cmd_quota(int argc, char **argv)
{
	struct qopts o = {0};
	struct meta_opts mo = {.pool_size = 1};
	struct meta_volume v;
	struct qctx t = {0};
	char shown[1024], *path = NULL;
	int ret;

	if ((ret = parse_opts(argc, argv, &o)))
		return ret < 0 ? cli_usage(usage, CLI_EXIT_OK) : ret;
	if (argc - optind < 1) {
		cli_error("quota needs a command: set, get, list, delete or "
			  "check");
		return cli_usage(usage, CLI_EXIT_USAGE);
	}
	const char *cmd = argv[optind];
	if (strcmp(cmd, "set") && strcmp(cmd, "get") && strcmp(cmd, "list") &&
	    strcmp(cmd, "delete") && strcmp(cmd, "check")) {
		cli_error("unknown quota command '%s'", cmd);
		cli_hint("the commands are set, get, list, delete and check");
		return CLI_EXIT_USAGE;
	}
	if ((ret = check_opts(cmd, &o, argc - optind - 1)))
		return ret;
	if (o.path && !(path = path_clean(o.path))) {
		cli_error("out of memory");
		return CLI_EXIT_FAIL;
	}
	mo.read_only = !strcmp(cmd, "get") || !strcmp(cmd, "list") ||
		       (!strcmp(cmd, "check") && !o.repair);
	ret = CLI_EXIT_FAIL;
	if (cli_volume_open(argv[optind + 1], &mo, &t.m, &v, shown,
			    sizeof shown))
		goto out;
	t.shown = shown;
	t.paths.m = t.m;
	if (!strcmp(cmd, "set"))
		ret = do_set(&t, path, &o);
	else if (!strcmp(cmd, "get"))
		ret = do_get(&t, path, &o);
	else if (!strcmp(cmd, "list"))
		ret = do_list(&t, &o);
	else if (!strcmp(cmd, "delete"))
		ret = do_delete(&t, path);
	else
		ret = do_check(&t, path, &o);
	cli_paths_release(&t.paths);
	meta_close(t.m);
out:
	free(path);
	return ret;
}
