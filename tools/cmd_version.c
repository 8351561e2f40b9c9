/*
 * cmd_version.c - `granary version create|list|show|diff|restore|rm`:
 * dataset versions, read-only snapshots of a directory kept with it and
 * reached at DIR/.versions/TAG. Like `granary snapshot`, it works on a
 * mounted path: the client serving the mount does the work, asked through
 * virtual xattrs of DIR (fs/vfs/ctl.c, "Dataset versions").
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "meta/meta.h"
#include "meta/meta_snap.h"
#include "tools/cli.h"

static const char usage[] =
    "usage: granary version create DIR TAG [-m MESSAGE]\n"
    "       granary version list DIR [--json]\n"
    "       granary version show DIR TAG [--json]\n"
    "       granary version diff DIR TAG1 [TAG2]\n"
    "       granary version restore DIR TAG [--save-as TAG]\n"
    "       granary version rm DIR TAG\n"
    "\n"
    "A version is a read-only copy of directory DIR as it was, kept with it\n"
    "at DIR/.versions/TAG. That path is reached by name but never listed in\n"
    "DIR, so a loader walking DIR does not see it. Point a job at it to read\n"
    "exactly that dataset, or mount one version alone with\n"
    "  granary mount META_URL MNT --read-only --subdir DIR/.versions/TAG\n"
    "Only metadata is copied: the data is shared with DIR.\n"
    "\n"
    "  create   record DIR as it is now as version TAG\n"
    "  list     every version, oldest first, with file count and size\n"
    "  show     one version\n"
    "  diff     files added (A), removed (D) and modified (M) from TAG1 to\n"
    "           TAG2, or to DIR as it is now; modified means another type,\n"
    "           size, mtime, mode or symlink target\n"
    "  restore  make DIR's content version TAG's again; what DIR holds is\n"
    "           recorded first as version 'before-restore-DATE' (--save-as)\n"
    "  rm       delete a version\n"
    "\n"
    "Tags: 1 to 200 printable characters, no '/', not starting with '.'.\n"
    "\n"
    "Permissions: create, rm and restore need write permission on DIR;\n"
    "create and restore need read permission on everything they copy;\n"
    "restore also needs write permission on every directory it empties;\n"
    "in a sticky DIR (mode 1777, as /tmp) only the owner of a version, the\n"
    "owner of DIR or root may rm it; list and show need read permission\n"
    "on DIR.\n"
    "\n"
    "  -m, --message MSG  (create) a message kept with the version\n"
    "      --save-as TAG  (restore) the tag for what DIR holds now\n"
    "      --json         (list, show) JSON instead of text\n"
    "  -q, --quiet        print nothing on success (diff: only the summary)\n"
    "  -h, --help         show this help\n";

static const struct option options[] = {
    {"message", required_argument, NULL, 'm'},
    {"save-as", required_argument, NULL, 's'},
    {"json", no_argument, NULL, 'j'},
    {"quiet", no_argument, NULL, 'q'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

struct vopts {
	const char *msg, *save_as;
	int json, quiet;
};

/* What the client serves as "granary.version:TAG" (fs/vfs/ctl.c). */
struct vinfo {
	char tag[META_TAG_MAX + 1];
	unsigned long long top, files, dirs, others, bytes;
	long long created;
	char msg[META_VERSION_MSG_MAX + 1];
};

#define XATTR_GET "granary.version:"
#define XATTR_SET "granary.version."

/* ---- talking to the client -------------------------------------------- */

/* DIR must be a directory on a FUSE mount; 0 or an exit code. */
static int check_dir(const char *dir)
{
	struct stat st;

	if (stat(dir, &st)) {
		cli_error("cannot read '%s': %s", dir, strerror(errno));
		return CLI_EXIT_FAIL;
	}
	if (!S_ISDIR(st.st_mode)) {
		cli_error("'%s' is not a directory", dir);
		return CLI_EXIT_FAIL;
	}
	if (!cli_on_fuse(dir)) {
		cli_error("'%s' is not on a granary mount", dir);
		return CLI_EXIT_FAIL;
	}
	return 0;
}

/* Set xattr granary.version.<op> of dir to a and, when b, "\0" b. */
static int vset(const char *dir, const char *op, const char *a, const char *b)
{
	size_t la = strlen(a), lb = b ? strlen(b) : 0;
	char name[64], *v = malloc(la + lb + 2);
	int err;

	if (!v)
		return ENOMEM;
	memcpy(v, a, la + 1);
	if (b)
		memcpy(v + la + 1, b, lb + 1);
	snprintf(name, sizeof name, XATTR_SET "%s", op);
	err = setxattr(dir, name, v, b ? la + 1 + lb : la, 0) ? errno : 0;
	free(v);
	return err;
}

/* The record of version tag of dir: 0, ENODATA (no such version) or an
 * errno. */
static int vget(const char *dir, const char *tag, struct vinfo *vi)
{
	char name[sizeof XATTR_GET + META_TAG_MAX], buf[8192];
	ssize_t n;

	if (strlen(tag) > META_TAG_MAX)
		return ENODATA;
	snprintf(name, sizeof name, XATTR_GET "%s", tag);
	n = getxattr(dir, name, buf, sizeof buf - 1);
	if (n < 0)
		return errno;
	buf[n] = '\0';
	memset(vi, 0, sizeof *vi);
	snprintf(vi->tag, sizeof vi->tag, "%s", tag);
	for (char *p = buf; p && *p;) {
		char *nl = strchr(p, '\n');
		if (!strncmp(p, "msg=", 4)) { /* the rest, newlines and all */
			snprintf(vi->msg, sizeof vi->msg, "%s", p + 4);
			break;
		}
		if (nl)
			*nl = '\0';
		sscanf(p, "top=%llu", &vi->top);
		sscanf(p, "created=%lld", &vi->created);
		sscanf(p, "files=%llu", &vi->files);
		sscanf(p, "dirs=%llu", &vi->dirs);
		sscanf(p, "others=%llu", &vi->others);
		sscanf(p, "bytes=%llu", &vi->bytes);
		p = nl ? nl + 1 : NULL;
	}
	return 0;
}

/* A message for err from an operation on version tag of dir. */
static int verror(const char *what, const char *dir, const char *tag, int err)
{
	switch (err) {
	case ENOENT:
	case ENODATA:
		cli_error("'%s' has no version '%s'", dir, tag);
		cli_hint("'granary version list %s' shows its versions", dir);
		break;
	case EEXIST:
		cli_error("'%s' already has a version '%s'", dir, tag);
		break;
	case EINVAL:
	case ENAMETOOLONG:
		cli_error("'%s' is not a valid tag: 1 to 200 printable "
			  "characters, no '/', not starting with '.'",
			  tag);
		break;
	case EROFS:
		cli_error("cannot %s a version of '%s': read-only (a read-only "
			  "mount, or inside a version)",
			  what, dir);
		break;
	case EACCES:
		cli_error("cannot %s version '%s' of '%s': %s", what, tag, dir,
			  strerror(err));
		if (!strcmp(what, "read"))
			cli_hint("reading a version needs read permission on "
				 "'%s'",
				 dir);
		else if (!strcmp(what, "delete"))
			cli_hint("deleting a version needs write permission "
				 "on '%s'",
				 dir);
		else if (!strcmp(what, "create"))
			cli_hint("a version needs write permission on '%s' "
				 "and read permission on everything in it",
				 dir);
		else
			cli_hint("a restore needs write permission on '%s' "
				 "and on every directory in it, and read "
				 "permission on everything in it and in the "
				 "version",
				 dir);
		break;
	case EPERM:
		cli_error("cannot %s version '%s' of '%s': %s", what, tag, dir,
			  strerror(err));
		if (!strcmp(what, "delete"))
			cli_hint("'%s' is sticky (as /tmp): only the owner of "
				 "the version, the owner of '%s' or root may "
				 "delete it",
				 dir, dir);
		break;
	case ENOTSUP:
		cli_error("the client serving '%s' has no versions (not "
			  "granary, or an older one)",
			  dir);
		break;
	default:
		cli_error("cannot %s version '%s' of '%s': %s", what, tag, dir,
			  strerror(err));
	}
	return CLI_EXIT_FAIL;
}

static void fmt_time(long long t, char *buf, size_t cap)
{
	time_t tt = (time_t)t;
	struct tm tm;

	if (localtime_r(&tt, &tm))
		strftime(buf, cap, "%Y-%m-%d %H:%M:%S", &tm);
	else
		snprintf(buf, cap, "%lld", t);
}

static void json_version(const struct vinfo *v, const char *path)
{
	printf("{\"tag\": ");
	cli_json_string(stdout, v->tag);
	printf(", \"path\": ");
	cli_json_string(stdout, path);
	printf(", \"created\": %lld, \"files\": %llu, \"dirs\": %llu, "
	       "\"others\": %llu, \"bytes\": %llu, \"message\": ",
	       v->created, v->files, v->dirs, v->others, v->bytes);
	cli_json_string(stdout, v->msg);
	printf("}");
}

/* ---- create, show, rm, restore ---------------------------------------- */

static int v_create(const char *dir, const char *tag, const struct vopts *o)
{
	struct timespec t0, t1;
	struct vinfo vi;
	char size[32];
	int err;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	err = vset(dir, "create", tag, o->msg);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (err)
		return verror("create", dir, tag, err);
	if (o->quiet)
		return CLI_EXIT_OK;
	err = vget(dir, tag, &vi);
	if (err)
		return verror("read", dir, tag, err);
	cli_format_size(vi.bytes, size, sizeof size);
	printf("version '%s' of '%s': %llu files, %s in %.1f ms\n", tag, dir,
	       vi.files, size,
	       (double)(t1.tv_sec - t0.tv_sec) * 1e3 +
		   (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
	printf("read it at %s/%s/%s\n", dir, META_VERSIONS, tag);
	return CLI_EXIT_OK;
}

static int v_show(const char *dir, const char *tag, const struct vopts *o)
{
	char path[PATH_MAX + 256], when[64], size[32];
	struct vinfo vi;
	int err = vget(dir, tag, &vi);

	if (err)
		return verror("read", dir, tag, err);
	snprintf(path, sizeof path, "%s/%s/%s", dir, META_VERSIONS, tag);
	if (o->json) {
		json_version(&vi, path);
		printf("\n");
		return CLI_EXIT_OK;
	}
	fmt_time(vi.created, when, sizeof when);
	cli_format_size(vi.bytes, size, sizeof size);
	/* names and the message as ls -b shows names: no control
	 * character reaches the terminal; the message keeps its lines */
	printf("version  ");
	cli_print_name(stdout, vi.tag);
	printf("\npath     ");
	cli_print_name(stdout, path);
	printf("\ncreated  %s\nfiles    %llu\n"
	       "dirs     %llu\nothers   %llu\nsize     %s (%llu bytes)\n",
	       when, vi.files, vi.dirs, vi.others, size, vi.bytes);
	for (char *l = *vi.msg ? vi.msg : NULL, *nl; l; l = nl) {
		if ((nl = strchr(l, '\n')))
			*nl++ = '\0';
		printf(l == vi.msg ? "message  " : "         ");
		cli_print_name(stdout, l);
		putchar('\n');
	}
	return CLI_EXIT_OK;
}

static int v_rm(const char *dir, const char *tag, const struct vopts *o)
{
	int err = vset(dir, "rm", tag, NULL);

	if (err)
		return verror("delete", dir, tag, err);
	if (!o->quiet)
		printf("deleted version '%s' of '%s'\n", tag, dir);
	return CLI_EXIT_OK;
}

static int v_restore(const char *dir, const char *tag, const struct vopts *o)
{
	char save[META_TAG_MAX + 1];
	struct vinfo vi;
	time_t now = time(NULL);
	struct tm tm;
	int err;

	err = vget(dir, tag, &vi);
	if (err)
		return verror("restore", dir, tag, err);
	if (o->save_as) {
		snprintf(save, sizeof save, "%s", o->save_as);
	} else {
		localtime_r(&now, &tm);
		strftime(save, sizeof save, "before-restore-%Y%m%d-%H%M%S",
			 &tm);
	}
	err = vset(dir, "restore", tag, save);
	if (err == EEXIST) {
		cli_error("'%s' already has a version '%s' to keep what it "
			  "holds now",
			  dir, save);
		cli_hint("name another with --save-as TAG");
		return CLI_EXIT_FAIL;
	}
	if (err == EINVAL && o->save_as)
		return verror("restore", dir, save, err);
	if (err)
		return verror("restore", dir, tag, err);
	if (!o->quiet)
		printf("'%s' is version '%s' again; what it held is version "
		       "'%s'\n",
		       dir, tag, save);
	return CLI_EXIT_OK;
}

/* ---- list ------------------------------------------------------------- */

static int by_time(const void *a, const void *b)
{
	const struct vinfo *x = a, *y = b;
	if (x->created != y->created)
		return x->created < y->created ? -1 : 1;
	return strcmp(x->tag, y->tag);
}

/* Columns of a terminal s takes: UTF-8 continuation bytes take none
 * (tags are any bytes but control characters and '/'). */
static int text_width(const char *s)
{
	int w = 0;
	for (; *s; s++)
		w += ((unsigned char)*s & 0xc0) != 0x80;
	return w;
}

static int imax(int a, int b)
{
	return a > b ? a : b;
}

/* s, then spaces up to width columns and one more as a separator. */
static void print_padded(const char *s, int width)
{
	printf("%s%*s ", s, width - text_width(s), "");
}

/* The text table of v_list: each column as wide as its widest cell. */
static void print_table(struct vinfo *v, size_t n)
{
	char when[64], size[32], files[24];
	int wt = text_width("TAG"), ww = text_width("CREATED"),
	    wf = text_width("FILES"), ws = text_width("SIZE");

	for (size_t i = 0; i < n; i++) {
		char *nl = strchr(v[i].msg, '\n'); /* the first line */
		if (nl)
			*nl = '\0';
		fmt_time(v[i].created, when, sizeof when);
		cli_format_size(v[i].bytes, size, sizeof size);
		snprintf(files, sizeof files, "%llu", v[i].files);
		char *tag = cli_escape(v[i].tag);
		wt = imax(wt, text_width(tag ? tag : "?"));
		free(tag);
		ww = imax(ww, text_width(when));
		wf = imax(wf, text_width(files));
		ws = imax(ws, text_width(size));
	}
	print_padded("TAG", wt);
	print_padded("CREATED", ww);
	printf("%*s %*s  MESSAGE\n", wf, "FILES", ws, "SIZE");
	for (size_t i = 0; i < n; i++) {
		fmt_time(v[i].created, when, sizeof when);
		cli_format_size(v[i].bytes, size, sizeof size);
		/* tags and messages as ls -b shows names: no control
		 * character reaches the terminal */
		char *tag = cli_escape(v[i].tag);
		print_padded(tag ? tag : "?", wt);
		free(tag);
		print_padded(when, ww);
		printf("%*llu %*s  ", wf, v[i].files, ws, size);
		cli_print_name(stdout, v[i].msg);
		putchar('\n');
	}
}

static int v_list(const char *dir, const struct vopts *o)
{
	char vdir[PATH_MAX + 16];
	struct vinfo *v = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;
	DIR *d;
	int err = 0;

	snprintf(vdir, sizeof vdir, "%s/%s", dir, META_VERSIONS);
	d = opendir(vdir);
	if (!d && errno != ENOENT) {
		cli_error("cannot list the versions of '%s': %s", dir,
			  strerror(errno));
		return CLI_EXIT_FAIL;
	}
	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if (n == cap) {
			struct vinfo *nv;
			cap = cap ? cap * 2 : 16;
			nv = realloc(v, cap * sizeof *v);
			if (!nv) {
				err = ENOMEM;
				break;
			}
			v = nv;
		}
		err = vget(dir, e->d_name, &v[n]);
		if (err == ENODATA) { /* removed meanwhile */
			err = 0;
			continue;
		}
		if (err)
			break;
		n++;
	}
	if (d)
		closedir(d);
	if (err) {
		cli_error("cannot list the versions of '%s': %s", dir,
			  strerror(err));
		free(v);
		return CLI_EXIT_FAIL;
	}
	if (n)
		qsort(v, n, sizeof *v, by_time);
	if (o->json) {
		printf("[");
		for (size_t i = 0; i < n; i++) {
			char path[PATH_MAX + 256];
			snprintf(path, sizeof path, "%s/%s", vdir, v[i].tag);
			printf(i ? ", " : "");
			json_version(&v[i], path);
		}
		printf("]\n");
	} else if (!o->quiet) {
		print_table(v, n);
	}
	free(v);
	return CLI_EXIT_OK;
}

/* ---- diff ------------------------------------------------------------- */

struct diff {
	unsigned long long added, removed, modified;
	int quiet, err;
};

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The sorted names in directory path (NULL and 0 when there is none). */
static char **names_of(const char *path, size_t *n, int *err)
{
	char **v = NULL;
	size_t cap = 0;
	struct dirent *e;
	DIR *d = opendir(path);

	*n = 0;
	if (!d) {
		*err = errno;
		return NULL;
	}
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (*n == cap) {
			char **nv;
			cap = cap ? cap * 2 : 64;
			nv = realloc(v, cap * sizeof *v);
			if (!nv)
				goto oom;
			v = nv;
		}
		if (!(v[*n] = strdup(e->d_name)))
			goto oom;
		++*n;
	}
	closedir(d);
	if (*n)
		qsort(v, *n, sizeof *v, name_cmp);
	return v;
oom:
	closedir(d);
	*err = ENOMEM;
	return v;
}

static void names_free(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/* buf = a "/" b (no "/" when either is empty); ENAMETOOLONG in df when it does
 * not fit. */
static int join(struct diff *df, char *buf, const char *a, const char *b)
{
	int n = snprintf(buf, PATH_MAX, "%s%s%s", a, *a && *b ? "/" : "", b);
	if (n < 0 || n >= PATH_MAX) {
		df->err = ENAMETOOLONG;
		return -1;
	}
	return 0;
}

static void report(struct diff *df, char what, const char *rel)
{
	if (what == 'A')
		df->added++;
	else if (what == 'D')
		df->removed++;
	else
		df->modified++;
	if (!df->quiet) {
		printf("%c\t", what);
		cli_print_name(stdout, rel); /* as ls -b shows it */
		putchar('\n');
	}
}

/* Every non-directory below root/rel, as what (A or D). */
static void report_tree(struct diff *df, char what, const char *root,
			const char *rel)
{
	char path[PATH_MAX], sub[PATH_MAX];
	struct stat st;
	char **v;
	size_t n;

	if (join(df, path, root, rel))
		return;
	if (lstat(path, &st)) {
		df->err = errno;
		return;
	}
	if (!S_ISDIR(st.st_mode))
		return report(df, what, rel);
	v = names_of(path, &n, &df->err);
	for (size_t i = 0; i < n && !df->err; i++)
		if (!join(df, sub, rel, v[i]))
			report_tree(df, what, root, sub);
	names_free(v, n);
}

static int same_link(const char *a, const char *b)
{
	char la[PATH_MAX], lb[PATH_MAX];
	ssize_t na = readlink(a, la, sizeof la),
		nb = readlink(b, lb, sizeof lb);
	return na == nb && na >= 0 && !memcmp(la, lb, (size_t)na);
}

/* Compare directory rel ("" for the top) of tree a with b's. */
static void diff_dir(struct diff *df, const char *a, const char *b,
		     const char *rel)
{
	char pa[PATH_MAX], pb[PATH_MAX], sub[PATH_MAX];
	size_t na, nb, i = 0, k = 0;
	char **va, **vb;

	if (join(df, pa, a, rel) || join(df, pb, b, rel))
		return;
	va = names_of(pa, &na, &df->err);
	vb = names_of(pb, &nb, &df->err);
	while (!df->err && (i < na || k < nb)) {
		int c = i == na ? 1 : k == nb ? -1 : strcmp(va[i], vb[k]);
		const char *name = c <= 0 ? va[i] : vb[k];
		struct stat sa, sb;

		if (join(df, sub, rel, name))
			break;
		if (c < 0) {
			report_tree(df, 'D', a, sub);
			i++;
			continue;
		}
		if (c > 0) {
			report_tree(df, 'A', b, sub);
			k++;
			continue;
		}
		i++, k++;
		if (join(df, pa, a, sub) || join(df, pb, b, sub))
			break;
		if (lstat(pa, &sa) || lstat(pb, &sb)) {
			df->err = errno;
			break;
		}
		if (S_ISDIR(sa.st_mode) && S_ISDIR(sb.st_mode)) {
			diff_dir(df, a, b, sub);
		} else if (S_ISDIR(sa.st_mode) || S_ISDIR(sb.st_mode)) {
			report_tree(df, 'D', a, sub);
			report_tree(df, 'A', b, sub);
		} else if ((sa.st_mode ^ sb.st_mode) & (S_IFMT | 07777) ||
			   sa.st_size != sb.st_size ||
			   sa.st_mtim.tv_sec != sb.st_mtim.tv_sec ||
			   sa.st_mtim.tv_nsec != sb.st_mtim.tv_nsec ||
			   (S_ISLNK(sa.st_mode) && !same_link(pa, pb))) {
			report(df, 'M', sub);
		}
	}
	names_free(va, na);
	names_free(vb, nb);
}

static int v_diff(const char *dir, const char *t1, const char *t2,
		  const struct vopts *o)
{
	char a[PATH_MAX], b[PATH_MAX];
	struct diff df = {.quiet = o->quiet};
	struct vinfo vi;
	int err;

	err = vget(dir, t1, &vi);
	if (err)
		return verror("read", dir, t1, err);
	if (t2 && (err = vget(dir, t2, &vi)))
		return verror("read", dir, t2, err);
	snprintf(a, sizeof a, "%s/%s/%s", dir, META_VERSIONS, t1);
	if (t2)
		snprintf(b, sizeof b, "%s/%s/%s", dir, META_VERSIONS, t2);
	else
		snprintf(b, sizeof b, "%s", dir);
	diff_dir(&df, a, b, "");
	if (df.err) {
		cli_error("cannot compare '%s' with '%s': %s", a, b,
			  strerror(df.err));
		return CLI_EXIT_FAIL;
	}
	fprintf(stderr, "%llu added, %llu removed, %llu modified\n", df.added,
		df.removed, df.modified);
	return CLI_EXIT_OK;
}

/* ---- dispatch --------------------------------------------------------- */

int cmd_version(int argc, char **argv)
{
	struct vopts o = {0};
	int c, n, err;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":m:qh", options, NULL)) != -1) {
		switch (c) {
		case 'm':
			o.msg = optarg;
			break;
		case 's':
			o.save_as = optarg;
			break;
		case 'j':
			o.json = 1;
			break;
		case 'q':
			o.quiet = 1;
			break;
		case 'h':
			return cli_usage(usage, CLI_EXIT_OK);
		default:
			return cli_bad_option(c, argv, usage);
		}
	}
	n = argc - optind;
	if (n < 1) {
		cli_error("version needs a command: create, list, show, diff, "
			  "restore or rm");
		return cli_usage(usage, CLI_EXIT_USAGE);
	}
	const char *cmd = argv[optind], *dir = n > 1 ? argv[optind + 1] : NULL;
	const char *t1 = n > 2 ? argv[optind + 2] : NULL;
	const char *t2 = n > 3 ? argv[optind + 3] : NULL;
	static const struct {
		const char *name;
		int min, max; /* arguments after the command */
	} cmds[] = {{"create", 2, 2}, {"list", 1, 1},	 {"show", 2, 2},
		    {"diff", 2, 3},   {"restore", 2, 2}, {"rm", 2, 2}};
	size_t i;

	for (i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
		if (!strcmp(cmd, cmds[i].name))
			break;
	if (i == sizeof cmds / sizeof cmds[0]) {
		cli_error("unknown version command '%s'", cmd);
		return cli_usage(usage, CLI_EXIT_USAGE);
	}
	if (n - 1 < cmds[i].min || n - 1 > cmds[i].max) {
		cli_error("version %s needs %s", cmd,
			  cmds[i].min == 1 ? "DIR" : "DIR and TAG");
		return cli_usage(usage, CLI_EXIT_USAGE);
	}
	if ((o.msg && strcmp(cmd, "create")) ||
	    (o.save_as && strcmp(cmd, "restore")) ||
	    (o.json && strcmp(cmd, "list") && strcmp(cmd, "show"))) {
		cli_error("an option does not apply to 'version %s'", cmd);
		return cli_usage(usage, CLI_EXIT_USAGE);
	}
	if (o.msg && strlen(o.msg) > META_VERSION_MSG_MAX) {
		cli_error("the message is longer than %d bytes",
			  META_VERSION_MSG_MAX);
		return CLI_EXIT_USAGE;
	}
	err = check_dir(dir);
	if (err)
		return err;
	switch (cmd[0] == 'r' ? cmd[1] : cmd[0]) {
	case 'c':
		return v_create(dir, t1, &o);
	case 'l':
		return v_list(dir, &o);
	case 's':
		return v_show(dir, t1, &o);
	case 'd':
		return v_diff(dir, t1, t2, &o);
	case 'e':
		return v_restore(dir, t1, &o);
	default:
		return v_rm(dir, t1, &o);
	}
}
