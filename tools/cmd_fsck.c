/*
 * cmd_fsck.c - `granary fsck`: check a volume's metadata (and with
 * --objects and --deep its store), print each problem with the path of the
 * file concerned, and with --repair fix what is safe to (gc/fsck.h does
 * the work).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fs/store/objstore.h"
#include "gc/fsck.h"
#include "meta/meta.h"
#include "meta/meta_volume.h"
#include "tools/cli.h"
#include "tools/progress.h"

static const char usage[] =
    "usage: granary fsck [options] META_URL\n"
    "\n"
    "Check a volume's metadata: every directory entry against its inode,\n"
    "link counts, inodes nothing reaches, chunk lists of inodes that are\n"
    "gone or past a file's length, the inode, space and pending-space\n"
    "counters, slice reference counts, packs, and what clients that are\n"
    "gone left behind (fields, opens, staged names). Each problem is printed\n"
    "with the path of the file concerned. Safe beside mounted clients:\n"
    "what a client changes during the check is not judged.\n"
    "\n"
    "  -p, --path DIR      check only the tree under DIR (\"/a/b\" from the\n"
    "                      volume's root; a file: that file): its entries,\n"
    "                      inodes, link counts, chunk lists, the reference\n"
    "                      counts and packs of its slices (with --objects\n"
    "                      and --deep: its objects). Counts that names or\n"
    "                      files outside DIR may account for are not\n"
    "                      judged (a file's nlink above its names in DIR,\n"
    "                      a sliceref above its references in DIR), nor\n"
    "                      are the volume's counters, orphans, stray chunk\n"
    "                      lists, sessions, opens and staging\n"
    "  -o, --objects       also list the store: every referenced object\n"
    "                      there, of its size\n"
    "  -d, --deep          also read every referenced object and check it\n"
    "                      (implies --objects; reads the whole volume)\n"
    "  -r, --repair        fix what is safe to: the counters, link counts,\n"
    "                      entries, reference counts, inodes nothing names\n"
    "                      (linked in /lost+found as #INODE), what clients\n"
    "                      that are gone left; inodes a client has open\n"
    "                      are skipped (with --path: what it found there)\n"
    "  -t, --threads N     parallel reads of --deep (default 8, at most 256)\n"
    "  -q, --quiet         no progress line\n"
    "      --json          print the report as JSON\n"
    "  -h, --help          show this help\n"
    "\n"
    "exit status: 0 when the volume is clean (or --repair fixed every\n"
    "problem found), 1 when problems are left or the check could not be\n"
    "made, 2 on a usage error.\n";

enum { OPT_JSON = 256 };

static const struct option options[] = {
    {"path", required_argument, NULL, 'p'},
    {"objects", no_argument, NULL, 'o'},
    {"deep", no_argument, NULL, 'd'},
    {"repair", no_argument, NULL, 'r'},
    {"threads", required_argument, NULL, 't'},
    {"quiet", no_argument, NULL, 'q'},
    {"json", no_argument, NULL, OPT_JSON},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* ---- output ------------------------------------------------------------ */

struct out {
	struct status_line line; /* the progress line */
	FILE *json;		 /* --json: the problems, collected */
	char *json_buf;
	size_t json_len;
	int njson;
};

static void clear_line(struct out *o)
{
	status_line_clear(&o->line);
}

static void on_progress(void *arg, const char *phase,
			const struct fsck_report *r)
{
	struct out *o = arg;

	if (!strcmp(phase, "done")) {
		clear_line(o);
		return;
	}
	status_line_print(
	    &o->line, 0,
	    "fsck: %s: %" PRIu64 " inodes, %" PRIu64 " entries, %" PRIu64
	    " references, %" PRIu64 " objects listed, %" PRIu64 " read",
	    phase, r->inodes, r->entries, r->refs, r->objects, r->verified);
}

static const char *fix_name(enum fsck_fix f)
{
	switch (f) {
	case FSCK_FIX_DONE:
		return "fixed";
	case FSCK_FIX_SKIPPED:
		return "skipped";
	case FSCK_FIX_CANNOT:
		return "not fixed";
	case FSCK_FIX_FAILED:
		return "failed";
	default:
		return "none";
	}
}

static void on_problem(void *arg, const struct fsck_problem *p)
{
	struct out *o = arg;

	if (o->json) {
		FILE *j = o->json;
		fprintf(j, "%s\n  {\"kind\": \"%s\", \"path\": ",
			o->njson++ ? "," : "", fsck_kind_name(p->kind));
		if (p->path)
			cli_json_string(j, p->path);
		else
			fputs("null", j);
		fprintf(j, ", \"ino\": %" PRIu64 ", \"id\": %" PRIu64, p->ino,
			p->id);
		fputs(", \"key\": ", j);
		if (p->key)
			cli_json_string(j, p->key);
		else
			fputs("null", j);
		fprintf(j, ", \"found\": %" PRId64 ", \"expected\": %" PRId64,
			p->found, p->expected);
		fputs(", \"what\": ", j);
		cli_json_string(j, p->what);
		fprintf(j, ", \"fix\": \"%s\", \"why\": ", fix_name(p->fix));
		if (p->why)
			cli_json_string(j, p->why);
		else
			fputs("null", j);
		fputs("}", j);
		return;
	}
	clear_line(o);
	if (p->path) {
		cli_print_name(stdout, p->path); /* as ls -b shows it */
		printf(": ");
	} else if (p->ino)
		printf("inode %" PRIu64 ": ", p->ino);
	printf("%s", p->what);
	if (p->key)
		printf(" (%s)", p->key);
	if (p->fix != FSCK_FIX_NONE)
		printf(" [%s%s%s]", fix_name(p->fix), p->why ? ": " : "",
		       p->why ? p->why : "");
	putchar('\n');
}

static void json(const struct meta_volume *v, const struct fsck_opts *fo,
		 const struct fsck_report *r, struct out *o, int clean)
{
	printf("{\"volume\": ");
	cli_json_string(stdout, v->name);
	printf(", \"uuid\": ");
	cli_json_string(stdout, v->uuid);
	printf(", \"objects_checked\": %s, \"deep\": %s, \"repair\": %s",
	       fo->objects || fo->deep ? "true" : "false",
	       fo->deep ? "true" : "false", fo->repair ? "true" : "false");
	printf(", \"path\": ");
	if (fo->path)
		cli_json_string(stdout, fo->path);
	else
		fputs("null", stdout);
	printf(", \"clean\": %s", clean ? "true" : "false");
	printf(", \"inodes\": %" PRIu64 ", \"dirs\": %" PRIu64
	       ", \"files\": %" PRIu64 ", \"symlinks\": %" PRIu64
	       ", \"others\": %" PRIu64,
	       r->inodes, r->dirs, r->files, r->symlinks, r->others);
	printf(", \"entries\": %" PRIu64 ", \"refs\": %" PRIu64
	       ", \"slices\": %" PRIu64 ", \"packs\": %" PRIu64
	       ", \"in_flux\": %" PRIu64,
	       r->entries, r->refs, r->slices, r->packs, r->in_flux);
	printf(", \"objects\": %" PRIu64 ", \"object_bytes\": %" PRIu64
	       ", \"verified\": %" PRIu64 ", \"verified_bytes\": %" PRIu64,
	       r->objects, r->object_bytes, r->verified, r->verified_bytes);
	printf(", \"outside\": %" PRIu64 ", \"changed\": %" PRIu64
	       ", \"counters_changed\": %s",
	       r->outside, r->changed, r->counters_changed ? "true" : "false");
	printf(", \"problems\": %" PRIu64 ", \"fixed\": %" PRIu64
	       ", \"skipped\": %" PRIu64 ", \"unfixed\": %" PRIu64,
	       r->problems, r->fixed, r->skipped, r->unfixed);
	printf(", \"by_kind\": {");
	for (int k = 1, n = 0; k < FSCK_NKINDS; k++)
		printf("%s\"%s\": %" PRIu64, n++ ? ", " : "",
		       fsck_kind_name((enum fsck_kind)k), r->by_kind[k]);
	printf("}, \"list\": [");
	fflush(o->json);
	fwrite(o->json_buf, 1, o->json_len, stdout);
	printf("%s]}\n", o->njson ? "\n" : "");
}

static void human(const struct meta_volume *v, const struct fsck_opts *fo,
		  const struct fsck_report *r, const char *shown)
{
	char a[32];

	printf("volume '%s' (uuid %s)\n", v->name, v->uuid);
	if (fo->path)
		printf("tree      '%s'\n", fo->path);
	printf("checked   %" PRIu64 " inodes (%" PRIu64 " directories, %" PRIu64
	       " files, %" PRIu64 " symlinks, %" PRIu64 " others), %" PRIu64
	       " entries\n",
	       r->inodes, r->dirs, r->files, r->symlinks, r->others,
	       r->entries);
	printf("          %" PRIu64 " references to %" PRIu64
	       " slices and %" PRIu64 " packs\n",
	       r->refs, r->slices, r->packs);
	if (fo->objects || fo->deep) {
		cli_format_size(r->object_bytes, a, sizeof a);
		printf("store     %" PRIu64 " objects listed, %s\n", r->objects,
		       a);
	}
	if (fo->deep) {
		cli_format_size(r->verified_bytes, a, sizeof a);
		printf("          %" PRIu64 " objects read and checked, %s\n",
		       r->verified, a);
	}
	if (r->in_flux)
		printf("not judged: %" PRIu64 " inodes of snapshots being "
		       "built or deleted\n",
		       r->in_flux);
	if (fo->path)
		printf("not judged: volume-wide checks skipped (--path): the "
		       "counters, orphans, stray chunk lists, sessions, opens "
		       "and staging\n");
	if (r->outside)
		printf("not judged: %" PRIu64 " link and reference counts "
		       "that names or files outside '%s' may account for\n",
		       r->outside, fo->path);
	if (r->changed || r->counters_changed)
		printf("not judged: %" PRIu64 " things clients changed during "
		       "the check%s\n",
		       r->changed,
		       r->counters_changed ? ", and the counters" : "");
	if (!r->problems) {
		printf("no problems found\n");
		return;
	}
	printf("%" PRIu64 " problem%s found", r->problems,
	       r->problems == 1 ? "" : "s");
	if (fo->repair)
		printf(": %" PRIu64 " fixed, %" PRIu64
		       " skipped (live clients), %" PRIu64 " not fixed",
		       r->fixed, r->skipped, r->unfixed);
	putchar('\n');
	if (!fo->repair)
		cli_hint("'granary fsck --repair %s' fixes what is safe to fix",
			 shown);
	else if (r->skipped)
		cli_hint("run it again when the clients are done with what "
			 "was skipped");
}

int cmd_fsck(int argc, char **argv)
{
	struct fsck_opts fo = {0};
	struct meta_opts mo = {0};
	struct out out = {0};
	struct meta_volume v;
	struct fsck_report r;
	struct objstore *store = NULL;
	struct meta *m = NULL;
	char shown[1024];
	int c, err, quiet = 0, as_json = 0, ret = CLI_EXIT_FAIL;

	while ((c = getopt_long(argc, argv, ":p:odrt:qh", options, NULL)) !=
	       -1) {
		switch (c) {
		case 'p':
			if (cli_volume_path_arg(optarg))
				return CLI_EXIT_USAGE;
			fo.path = optarg;
			break;
		case 'o':
			fo.objects = 1;
			break;
		case 'd':
			fo.deep = 1;
			break;
		case 'r':
			fo.repair = 1;
			break;
		case 't':
			if (cli_threads_arg(optarg, &fo.threads))
				return CLI_EXIT_USAGE;
			break;
		case 'q':
			quiet = 1;
			break;
		case OPT_JSON:
			as_json = 1;
			break;
		case 'h':
			return cli_usage(usage, CLI_EXIT_OK);
		default:
			return cli_bad_option(c, argv, usage);
		}
	}
	if (cli_one_operand(argc, "META_URL", usage))
		return CLI_EXIT_USAGE;
	mo.read_only = !fo.repair;
	if (cli_volume_open(argv[optind], &mo, &m, &v, shown, sizeof shown))
		return CLI_EXIT_FAIL;
	fo.block_size = v.block_size;
	fo.compress = v.compress;
	if (fo.objects || fo.deep) {
		if (cli_volume_store(&v, NULL, &store))
			goto out;
	} else if (fo.repair) {
		/* a pack's total is repaired from its object's size */
		if (cli_volume_store(&v, NULL, &store))
			store = NULL;
	}
	if (as_json &&
	    !(out.json = open_memstream(&out.json_buf, &out.json_len))) {
		cli_error("cannot collect the report: %s", strerror(errno));
		goto out;
	}
	status_line_init(&out.line, quiet);
	fo.progress = on_progress;
	fo.progress_arg = &out;
	fo.problem = on_problem;
	fo.problem_arg = &out;
	err = fsck_run(m, store, &fo, &r);
	clear_line(&out);
	if (err && fo.path && (err == ENOENT || err == ENOTDIR)) {
		cli_error("--path '%s': %s in the volume at '%s'", fo.path,
			  err == ENOENT ? "no such file or directory"
					: "a part of it is not a directory",
			  shown);
		cli_hint("give the path from the volume's root, as mounted "
			 "(a mount at /mnt/v shows /mnt/v/a/b as '/a/b')");
		goto out;
	}
	if (err) {
		cli_error("fsck of the volume at '%s' stopped: %s (the check "
			  "is incomplete)",
			  shown, gr_strerror(err));
		if (err == OBJSTORE_EAUTH)
			cli_hint("the keys must allow listing the bucket");
		goto out;
	}
	int clean = r.problems == r.fixed;
	if (as_json)
		json(&v, &fo, &r, &out, clean);
	else
		human(&v, &fo, &r, shown);
	ret = clean ? CLI_EXIT_OK : CLI_EXIT_FAIL;
out:
	if (out.json)
		fclose(out.json);
	free(out.json_buf);
	objstore_close(store);
	meta_close(m);
	return ret;
}
