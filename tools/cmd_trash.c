/*
 * cmd_trash.c - `granary trash list|restore|purge`: what the volume's
 * trash holds (meta/meta_trash.h), putting entries back where they were
 * (a directory tree removed with rm -rf comes back whole), and deleting
 * old ones for good before the clients' own purge would.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "meta/meta.h"
#include "meta/meta_trash.h"
#include "meta/meta_volume.h"
#include "tools/cli.h"

static const char usage[] =
    "usage: granary trash list META_URL [--json]\n"
    "       granary trash restore META_URL ENTRY... [--to PATH]\n"
    "       granary trash purge META_URL [--all | --before TIME]\n"
    "\n"
    "While the volume's trash-days is above 0 (granary format, granary\n"
    "config), removed files and directories are kept in /.trash at the\n"
    "volume's root, which only root sees, in a directory per hour (UTC):\n"
    "/.trash/2026-12-01-18/<parent inode>-<inode>-<name>. A file replaced\n"
    "by a rename is kept too. The clients delete each hour's directory\n"
    "trash-days after its hour ended.\n"
    "\n"
    "  list     every entry: ENTRY (hour/name), type, size, and the path it\n"
    "           was removed from (\"?\" when its directory is gone)\n"
    "  restore  put ENTRY back at its path; a directory comes back with\n"
    "           what was removed from it (the newest entry of each name),\n"
    "           so an rm -rf'ed tree is whole again. The directory it goes\n"
    "           to must exist, or be restored first or with it; a path\n"
    "           that is taken is refused. ENTRY is as list shows it, with\n"
    "           or without its hour\n"
    "  purge    delete for good what is older than trash-days (--all:\n"
    "           everything; --before TIME: the hours that ended before\n"
    "           TIME); the space comes back as the clients reclaim it\n"
    "\n"
    "  --to PATH      (restore) put the entry at PATH (a path in the volume,\n"
    "                 from its root) instead; an existing directory PATH\n"
    "                 takes the entries under their names\n"
    "  --all          (purge) everything in the trash\n"
    "  --before TIME  (purge) YYYY-MM-DD or YYYY-MM-DD-HH (UTC), or an age\n"
    "                 such as 12h or 3d: what was removed before then\n"
    "  --json         (list) JSON instead of text\n"
    "  -h, --help     show this help\n";

enum { OPT_TO = 256, OPT_ALL, OPT_BEFORE };

static const struct option options[] = {
    {"to", required_argument, NULL, OPT_TO},
    {"all", no_argument, NULL, OPT_ALL},
    {"before", required_argument, NULL, OPT_BEFORE},
    {"json", no_argument, NULL, 'j'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

struct topts {
	const char *to, *before;
	int all, json;
};

/* The trash as listed, and what a command learned about it. */
struct tctx {
	struct meta *m;
	struct meta_trash_entry *e;
	size_t n;
	char *done;		/* restore: entry i is back (1), or left (2) */
	struct cli_paths paths; /* directories' paths found so far */
};

static const char *type_name(uint8_t t)
{
	static const char *names[] = {"?",    "file", "dir", "symlink",
				      "fifo", "blk",  "chr", "socket"};
	return t < sizeof names / sizeof names[0] ? names[t] : "?";
}

/* ---- paths ------------------------------------------------------------ */

static struct meta_trash_entry *entry_of_ino(struct tctx *t, uint64_t ino)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->e[i].ino == ino)
			return &t->e[i];
	return NULL;
}

/* The trash's entries name where they were (cli_paths' known): the path
 * of a directory in the trash is where it was. */
static int trash_known(void *arg, uint64_t dir, uint64_t *parent,
		       const char **name)
{
	struct tctx *t = arg;
	struct meta_trash_entry *te = entry_of_ino(t, dir);

	if (!te || t->done[te - t->e])
		return 0;
	*parent = te->parent;
	*name = te->orig;
	return 1;
}

/* ---- list ------------------------------------------------------------- */

static uint64_t size_of(const struct meta_trash_entry *e)
{
	return e->attr.type == META_DIR ? 0 : e->attr.length;
}

static void list_text(struct tctx *t)
{
	char sz[32];

	if (!t->n) {
		printf("the trash is empty\n");
		return;
	}
	printf("%-40s  %-7s  %10s  %s\n", "ENTRY", "TYPE", "SIZE",
	       "REMOVED FROM");
	for (size_t i = 0; i < t->n; i++) {
		struct meta_trash_entry *e = &t->e[i];
		const char *dir =
		    e->parent ? cli_dir_path(&t->paths, e->parent) : NULL;
		char entry[300], *shown;
		snprintf(entry, sizeof entry, "%s/%s", e->hour, e->name);
		cli_format_size(size_of(e), sz, sizeof sz);
		/* names as ls -b shows them: no name forges a line */
		shown = cli_escape(entry);
		printf("%-40s  %-7s  %10s  ", shown ? shown : "?",
		       type_name(e->attr.type),
		       e->attr.type == META_DIR ? "-" : sz);
		free(shown);
		if (dir)
			cli_print_name(stdout, dir);
		else
			putchar('?');
		if (!dir || strcmp(dir, "/"))
			putchar('/');
		cli_print_name(stdout, e->orig);
		putchar('\n');
	}
}

static void list_json(struct tctx *t)
{
	printf("[");
	for (size_t i = 0; i < t->n; i++) {
		struct meta_trash_entry *e = &t->e[i];
		const char *dir =
		    e->parent ? cli_dir_path(&t->paths, e->parent) : NULL;
		char entry[300];
		snprintf(entry, sizeof entry, "%s/%s", e->hour, e->name);
		printf("%s\n  {\"entry\": ", i ? "," : "");
		cli_json_string(stdout, entry);
		printf(", \"hour\": \"%s\", \"ino\": %" PRIu64
		       ", \"type\": \"%s\", \"size\": %" PRIu64
		       ", \"stored\": %" PRIu64 ", \"removed\": %lld"
		       ", \"parent\": %" PRIu64 ", \"name\": ",
		       e->hour, e->ino, type_name(e->attr.type), size_of(e),
		       e->attr.stored, (long long)e->attr.ctime, e->parent);
		cli_json_string(stdout, e->orig);
		printf(", \"path\": ");
		if (dir) {
			char *p = cli_path_join(dir, e->orig);
			cli_json_string(stdout, p ? p : "");
			free(p);
		} else {
			printf("null");
		}
		printf("}");
	}
	printf("%s]\n", t->n ? "\n" : "");
}

/* ---- restore ---------------------------------------------------------- */

/* ENTRY as list shows it, "HOUR/NAME", or NAME alone. */
static struct meta_trash_entry *entry_find(struct tctx *t, const char *arg)
{
	const char *slash = strchr(arg, '/');

	for (size_t i = 0; i < t->n; i++) {
		struct meta_trash_entry *e = &t->e[i];
		if (slash ? (size_t)(slash - arg) == strlen(e->hour) &&
				!strncmp(arg, e->hour, strlen(e->hour)) &&
				!strcmp(slash + 1, e->name)
			  : !strcmp(arg, e->name))
			return e;
	}
	return NULL;
}

/* Where --to PATH puts an entry: into PATH when it is a directory (under
 * the entry's name, NULL name), else as PATH. */
static int to_place(struct meta *m, const char *path, int many, uint64_t *dir,
		    char **name)
{
	struct meta_attr a;
	int err = cli_resolve(m, path, dir, &a);

	*name = NULL;
	if (!err && a.type == META_DIR)
		return 0;
	if (!err || many) {
		cli_error("cannot restore to '%s': %s", path,
			  err ? gr_strerror(err)
			      : "it exists and is not a directory");
		return err ? err : EEXIST;
	}
	if (err != ENOENT) {
		cli_error("cannot restore to '%s': %s", path, gr_strerror(err));
		return err;
	}
	/* PATH is new: its parent must be there */
	const char *slash = strrchr(path, '/');
	char *parent = strndup(path, slash ? (size_t)(slash - path) : 0);
	if (!parent)
		return ENOMEM;
	err = cli_resolve(m, parent, dir, &a);
	if (!err && a.type != META_DIR)
		err = ENOTDIR;
	if (err)
		cli_error("cannot restore to '%s': its directory '%s': %s",
			  path, *parent ? parent : "/", gr_strerror(err));
	free(parent);
	if (!err && !(*name = strdup(slash ? slash + 1 : path)))
		err = ENOMEM;
	return err;
}

/* Why entry e could not go back to (dir, name), said once. */
static void restore_failed(struct tctx *t, const struct meta_trash_entry *e,
			   uint64_t dir, const char *name, int err)
{
	const char *dp = cli_dir_path(&t->paths, dir);
	struct meta_trash_entry *pe = entry_of_ino(t, dir);

	if (err == EEXIST) {
		cli_error("cannot restore '%s/%s': '%s%s%s' exists", e->hour,
			  e->name, dp ? dp : "?",
			  dp && strcmp(dp, "/") ? "/" : "", name);
		cli_hint("restore it elsewhere with --to PATH, or move that "
			 "one away first");
	} else if (err == EPERM && pe && !t->done[pe - t->e]) {
		cli_error("cannot restore '%s/%s': its directory is in the "
			  "trash too",
			  e->hour, e->name);
		cli_hint("restore '%s/%s' first, or with it", pe->hour,
			 pe->name);
	} else if (err == ENOENT) {
		cli_error(
		    "cannot restore '%s/%s': its directory (inode %" PRIu64
		    ") no longer exists",
		    e->hour, e->name, dir);
		cli_hint("put it elsewhere with --to PATH");
	} else {
		cli_error("cannot restore '%s/%s': %s", e->hour, e->name,
			  gr_strerror(err));
	}
}

/* Entry i back as (dir, name); then, for a directory, what was removed
 * from it. *n counts the entries put back; 0 or the first error. */
static int restore_entry(struct tctx *t, size_t i, uint64_t dir,
			 const char *name, size_t *n);

/* The entries removed from directory dir, now back: the newest of each
 * name (by the ctime their removal set), each into dir. */
static int restore_children(struct tctx *t, uint64_t dir, size_t *n)
{
	int ret = 0;

	for (size_t i = 0; i < t->n; i++) {
		struct meta_trash_entry *e = &t->e[i];
		if (t->done[i] || e->parent != dir)
			continue;
		size_t best = i;
		for (size_t j = i + 1; j < t->n; j++)
			if (!t->done[j] && t->e[j].parent == dir &&
			    !strcmp(t->e[j].orig, e->orig) &&
			    (t->e[j].attr.ctime > t->e[best].attr.ctime ||
			     (t->e[j].attr.ctime == t->e[best].attr.ctime &&
			      t->e[j].attr.ctimens > t->e[best].attr.ctimens)))
				best = j;
		int err = restore_entry(t, best, dir, t->e[best].orig, n);
		if (err && !ret)
			ret = err;
		/* tried: not again; older ones of the name stay in the trash */
		for (size_t j = i; j < t->n; j++)
			if (!t->done[j] && t->e[j].parent == dir &&
			    !strcmp(t->e[j].orig, t->e[best].orig))
				t->done[j] = 2;
		if (err)
			t->done[best] = 2;
	}
	return ret;
}

static int restore_entry(struct tctx *t, size_t i, uint64_t dir,
			 const char *name, size_t *n)
{
	struct meta_trash_entry *e = &t->e[i];
	int err = meta_trash_restore(t->m, e->hour_ino, e->name, dir, name);

	if (err) {
		restore_failed(t, e, dir, name, err);
		return err;
	}
	t->done[i] = 1;
	cli_paths_forget(
	    &t->paths); /* dir_path of what was in the trash changed */
	(*n)++;
	return e->attr.type == META_DIR ? restore_children(t, e->ino, n) : 0;
}

static int do_restore(struct tctx *t, char **entries, int nent,
		      const struct topts *o)
{
	uint64_t to_dir = 0;
	char *to_name = NULL;
	int ret = 0;

	if (o->to && to_place(t->m, o->to, nent > 1, &to_dir, &to_name))
		return CLI_EXIT_FAIL;
	/* directories first: the files named with them may belong in them */
	for (int k = 0; k < 2 * nent; k++) {
		struct meta_trash_entry *e = entry_find(t, entries[k % nent]);
		size_t n = 0;
		if (e && (k < nent) != (e->attr.type == META_DIR))
			continue;
		if (!e && k < nent)
			continue;
		if (!e) {
			cli_error("no entry '%s' in the trash",
				  entries[k % nent]);
			cli_hint("granary trash list META_URL shows them");
			ret = CLI_EXIT_FAIL;
			continue;
		}
		if (t->done[e - t->e] == 1)
			continue; /* came back with a directory before it */
		uint64_t dir = o->to ? to_dir : e->parent;
		const char *name = to_name ? to_name : e->orig;
		if (!dir) {
			cli_error("'%s' does not say where it came from",
				  entries[k % nent]);
			cli_hint("put it somewhere with --to PATH");
			ret = CLI_EXIT_FAIL;
			continue;
		}
		int err = restore_entry(t, (size_t)(e - t->e), dir, name, &n);
		if (err)
			ret = CLI_EXIT_FAIL;
		if (t->done[e - t->e] == 1) {
			const char *dp = cli_dir_path(&t->paths, dir);
			printf("restored %s/", e->hour);
			cli_print_name(stdout, e->name);
			printf(" as ");
			cli_print_name(stdout, dp ? dp : "?");
			printf("%s", dp && strcmp(dp, "/") ? "/" : "");
			cli_print_name(stdout, name);
			if (n > 1)
				printf(" with %zu entries below it", n - 1);
			printf("\n");
		}
	}
	free(to_name);
	return ret;
}

/* ---- purge ------------------------------------------------------------ */

/* --before TIME: a date (UTC) or an age; unix seconds. */
static int parse_before(const char *s, int64_t *out)
{
	double age;
	char hour[16];
	int64_t t;

	if (strlen(s) == 10) {
		snprintf(hour, sizeof hour, "%s-00", s);
		s = hour;
	}
	t = meta_trash_hour_start(s);
	if (t >= 0) {
		*out = t;
		return 0;
	}
	if (cli_parse_seconds(s, &age) == 0) {
		*out = (int64_t)time(NULL) - (int64_t)age;
		return 0;
	}
	return EINVAL;
}

static int do_purge(struct meta *m, const struct meta_volume *v,
		    const struct topts *o)
{
	struct meta_trash_purged p;
	int64_t before;
	int err;

	if (o->all)
		before = INT64_MAX;
	else if (o->before)
		parse_before(o->before, &before); /* checked with the options */
	else if (v->trash_days)
		before = (int64_t)time(NULL) - (int64_t)v->trash_days * 86400;
	else
		before = INT64_MAX; /* no trash: nothing is to be kept */
	err = meta_trash_purge(m, before, &p);
	if (err) {
		cli_error("cannot purge the trash of volume '%s': %s", v->name,
			  gr_strerror(err));
		return CLI_EXIT_FAIL;
	}
	printf("purged %llu entries in %llu hour directories\n",
	       (unsigned long long)p.entries, (unsigned long long)p.hours);
	return CLI_EXIT_OK;
}

/* ---- the command ------------------------------------------------------ */

/* The options given fit the command? 0, or the usage error's exit. */
static int check_opts(const char *cmd, const struct topts *o, int nargs)
{
	int64_t t;

	if ((o->json && strcmp(cmd, "list")) ||
	    (o->to && strcmp(cmd, "restore")) ||
	    ((o->all || o->before) && strcmp(cmd, "purge"))) {
		cli_error("an option does not apply to 'trash %s'", cmd);
		return cli_usage(usage, CLI_EXIT_USAGE);
	}
	if (o->all && o->before) {
		cli_error("--all and --before TIME exclude each other");
		return cli_usage(usage, CLI_EXIT_USAGE);
	}
	if (o->before && parse_before(o->before, &t)) {
		cli_error("bad --before '%s': want YYYY-MM-DD, YYYY-MM-DD-HH "
			  "(UTC) or an age such as 12h or 3d",
			  o->before);
		return CLI_EXIT_USAGE;
	}
	if (!strcmp(cmd, "restore") ? nargs < 2 : nargs != 1) {
		cli_error(!strcmp(cmd, "restore")
			      ? "trash restore needs META_URL and ENTRY..."
			      : "trash %s needs META_URL alone",
			  cmd);
		return cli_usage(usage, CLI_EXIT_USAGE);
	}
	return 0;
}

int cmd_trash(int argc, char **argv)
{
	struct topts o = {0};
	struct meta_opts mo = {.pool_size = 1};
	struct meta_volume v;
	struct tctx t = {0};
	char shown[1024];
	int c, err, ret = CLI_EXIT_FAIL;

	while ((c = getopt_long(argc, argv, ":h", options, NULL)) != -1) {
		switch (c) {
		case OPT_TO:
			o.to = optarg;
			break;
		case OPT_ALL:
			o.all = 1;
			break;
		case OPT_BEFORE:
			o.before = optarg;
			break;
		case 'j':
			o.json = 1;
			break;
		case 'h':
			return cli_usage(usage, CLI_EXIT_OK);
		default:
			return cli_bad_option(c, argv, usage);
		}
	}
	if (argc - optind < 1) {
		cli_error("trash needs a command: list, restore or purge");
		return cli_usage(usage, CLI_EXIT_USAGE);
	}
	const char *cmd = argv[optind];
	if (strcmp(cmd, "list") && strcmp(cmd, "restore") &&
	    strcmp(cmd, "purge")) {
		cli_error("unknown trash command '%s'", cmd);
		return cli_usage(usage, CLI_EXIT_USAGE);
	}
	int usage_err = check_opts(cmd, &o, argc - optind - 1);
	if (usage_err)
		return usage_err;
	mo.read_only = !strcmp(cmd, "list");
	if (cli_volume_open(argv[optind + 1], &mo, &t.m, &v, shown,
			    sizeof shown))
		return CLI_EXIT_FAIL;
	if (!strcmp(cmd, "purge")) {
		ret = do_purge(t.m, &v, &o);
		goto close_meta;
	}
	t.paths = (struct cli_paths){.m = t.m, .known = trash_known, .arg = &t};
	err = meta_trash_list(t.m, &t.e, &t.n);
	if (err) {
		cli_error("cannot list the trash of volume '%s': %s", v.name,
			  gr_strerror(err));
		goto close_meta;
	}
	t.done = calloc(t.n ? t.n : 1, 1);
	if (!t.done) {
		cli_error("out of memory");
		goto free_list;
	}
	if (!strcmp(cmd, "list")) {
		if (o.json)
			list_json(&t);
		else
			list_text(&t);
		ret = CLI_EXIT_OK;
	} else {
		ret = do_restore(&t, argv + optind + 2, argc - optind - 2, &o);
	}
free_list:
	cli_paths_release(&t.paths);
	free(t.done);
	meta_trash_entries_free(t.e, t.n);
close_meta:
	meta_close(t.m);
	return ret;
}
