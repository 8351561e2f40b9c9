/*
 * cmd_gc.c - `granary gc`: find the objects of a volume's store that no
 * metadata references, and the dead bytes inside its packs; delete the
 * leaked objects with --delete (gc/gc.h does the work).
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
#include "gc/gc.h"
#include "meta/meta.h"
#include "meta/meta_volume.h"
#include "tools/cli.h"
#include "tools/progress.h"

static const char usage[] =
    "usage: granary gc [options] META_URL\n"
    "\n"
    "Compare the volume's store with its metadata: report the objects\n"
    "nothing references (leaked by a client killed in the middle of a\n"
    "write, for one) and the dead bytes inside packs. Safe beside mounted\n"
    "clients, also with --delete.\n"
    "\n"
    "  -d, --delete        delete the leaked objects; first reclaim what\n"
    "                      mounted clients reclaim (deleted files, dead\n"
    "                      slices, the slices compactions replaced once\n"
    "                      their hour is over: all of them with\n"
    "                      --min-age 0 when no client is mounted)\n"
    "  -c, --compact       rewrite every chunk whose slice list has grown\n"
    "                      long (clients do it for what they write)\n"
    "  -a, --min-age DUR   an object nothing references is leaked only when\n"
    "                      older than DUR (default 1h; s, m, h, d): younger\n"
    "                      ones may be uploads whose commit is on its way\n"
    "  -t, --threads N     parallel deletes (default 16, at most 256)\n"
    "  -q, --quiet         no progress line\n"
    "      --json          print the report as JSON\n"
    "  -h, --help          show this help\n"
    "\n"
    "exit status: 0 when the comparison (and the deletes) went through,\n"
    "1 if it could not be made or a delete failed, 2 on a usage error.\n";

enum { OPT_JSON = 256 };

static const struct option options[] = {
    {"delete", no_argument, NULL, 'd'},
    {"compact", no_argument, NULL, 'c'},
    {"min-age", required_argument, NULL, 'a'},
    {"threads", required_argument, NULL, 't'},
    {"quiet", no_argument, NULL, 'q'},
    {"json", no_argument, NULL, OPT_JSON},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* ---- progress ------------------------------------------------------------ */

static void on_progress(void *arg, const char *phase, const struct gc_report *r)
{
	struct status_line *l = arg;

	if (!strcmp(phase, "done")) {
		status_line_clear(l);
		return;
	}
	status_line_print(l, 0,
			  "gc: %s: %" PRIu64 " references, %" PRIu64
			  " objects listed, %" PRIu64 " leaked, %" PRIu64
			  " deleted",
			  phase, r->refs, r->objects, r->leaked, r->deleted);
}

/* ---- the report ------------------------------------------------------------
 */

static void json(const struct meta_volume *v, const struct gc_opts *o,
		 const struct gc_report *r)
{
	printf("{\"volume\": ");
	cli_json_string(stdout, v->name);
	printf(", \"uuid\": ");
	cli_json_string(stdout, v->uuid);
	printf(", \"storage\": ");
	cli_json_string(stdout, v->storage);
	printf(", \"min_age\": %" PRId64 ", \"delete\": %s", o->min_age,
	       o->delete ? "true" : "false");
	printf(", \"refs\": %" PRIu64 ", \"slices\": %" PRIu64
	       ", \"pending\": %" PRIu64,
	       r->refs, r->slices, r->pending);
	printf(", \"objects\": %" PRIu64 ", \"bytes\": %" PRIu64, r->objects,
	       r->bytes);
	printf(", \"live\": %" PRIu64 ", \"live_bytes\": %" PRIu64
	       ", \"live_pending\": %" PRIu64,
	       r->live, r->live_bytes, r->live_pending);
	printf(", \"leaked\": %" PRIu64 ", \"leaked_bytes\": %" PRIu64
	       ", \"leaked_oldest\": %" PRId64,
	       r->leaked, r->leaked_bytes, r->leaked_oldest);
	printf(", \"young\": %" PRIu64 ", \"young_bytes\": %" PRIu64
	       ", \"retired\": %" PRIu64,
	       r->young, r->young_bytes, r->retired);
	printf(", \"other\": %" PRIu64 ", \"other_bytes\": %" PRIu64, r->other,
	       r->other_bytes);
	printf(", \"temps\": %" PRIu64 ", \"temps_bytes\": %" PRIu64
	       ", \"temps_deleted\": %" PRIu64,
	       r->temps, r->temps_bytes, r->temps_deleted);
	printf(", \"packs\": %" PRIu64 ", \"pack_bytes\": %" PRIu64
	       ", \"pack_dead_bytes\": %" PRIu64
	       ", \"packs_half_dead\": %" PRIu64,
	       r->packs, r->pack_bytes, r->pack_dead_bytes, r->packs_half_dead);
	printf(", \"deleted\": %" PRIu64 ", \"deleted_bytes\": %" PRIu64
	       ", \"delete_errors\": %" PRIu64,
	       r->deleted, r->deleted_bytes, r->delete_errors);
	printf(", \"reclaimed\": %" PRIu64 ", \"delayed\": %" PRIu64
	       ", \"delayed_clients\": %" PRIu64,
	       r->reclaimed, r->delayed, r->delayed_clients);
	printf(", \"long_chunks\": %" PRIu64 ", \"compacted\": %" PRIu64
	       ", \"records_before\": %" PRIu64 ", \"records_after\": %" PRIu64
	       ", \"compacted_bytes\": %" PRIu64
	       ", \"compact_errors\": %" PRIu64,
	       r->long_chunks, r->compacted, r->records_before,
	       r->records_after, r->compacted_bytes, r->compact_errors);
	printf(", \"packs_rewritten\": %" PRIu64 ", \"frames_moved\": %" PRIu64
	       ", \"pack_bytes_before\": %" PRIu64
	       ", \"pack_bytes_after\": %" PRIu64 "}\n",
	       r->packs_rewritten, r->frames_moved, r->pack_bytes_before,
	       r->pack_bytes_after);
}

static void human(const struct meta_volume *v, const char *shown,
		  const struct gc_opts *o, const struct gc_report *r)
{
	char a[32], b[32], when[64] = "";

	printf("volume '%s' (uuid %s), storage '%s'\n", v->name, v->uuid,
	       v->storage);
	printf("metadata  %" PRIu64 " slice references, %" PRIu64
	       " slices and packs, %" PRIu64 " waiting for reclamation\n",
	       r->refs, r->slices, r->pending);
	cli_format_size(r->bytes, a, sizeof a);
	printf("store     %" PRIu64 " objects, %s\n", r->objects, a);
	cli_format_size(r->live_bytes, a, sizeof a);
	printf("  live    %" PRIu64 " objects, %s\n", r->live, a);
	cli_format_size(r->leaked_bytes, a, sizeof a);
	if (r->leaked_oldest) {
		time_t t = (time_t)r->leaked_oldest;
		struct tm tm;
		localtime_r(&t, &tm);
		strftime(when, sizeof when, ", the oldest from %Y-%m-%d %H:%M",
			 &tm);
	}
	printf("  leaked  %" PRIu64 " objects, %s%s\n", r->leaked, a, when);
	if (r->young) {
		cli_format_size(r->young_bytes, a, sizeof a);
		printf("  young   %" PRIu64 " objects, %s, referenced by "
		       "nothing but newer than --min-age %" PRId64
		       " s: left alone\n",
		       r->young, a, o->min_age);
		if (r->retired)
			printf("          (%" PRIu64 " of them packs gc "
			       "--compact rewrote: their age counts from the "
			       "rewrite)\n",
			       r->retired);
	}
	if (r->other) {
		cli_format_size(r->other_bytes, a, sizeof a);
		printf("  other   %" PRIu64 " keys, %s, that are no object "
		       "of granary's: left alone\n",
		       r->other, a);
	}
	if (r->temps) {
		cli_format_size(r->temps_bytes, a, sizeof a);
		printf("  temp    %" PRIu64 " files, %s, of puts a crash left "
		       "half done%s\n",
		       r->temps, a,
		       o->delete ? "" : " (--delete removes them)");
	}
	cli_format_size(r->pack_bytes, a, sizeof a);
	cli_format_size(r->pack_dead_bytes, b, sizeof b);
	printf("packs     %" PRIu64 " live, %s, of which %s dead (%.0f%%); "
	       "%" PRIu64 " more than half dead\n",
	       r->packs, a, b,
	       r->pack_bytes
		   ? 100.0 * (double)r->pack_dead_bytes / (double)r->pack_bytes
		   : 0.0,
	       r->packs_half_dead);
	if (o->compact) {
		cli_format_size(r->compacted_bytes, a, sizeof a);
		printf("compacted %" PRIu64 " of %" PRIu64 " long chunk lists, "
		       "%" PRIu64 " records to %" PRIu64 ", %s rewritten; "
		       "%" PRIu64 " failed\n",
		       r->compacted, r->long_chunks, r->records_before,
		       r->records_after, a, r->compact_errors);
		cli_format_size(r->pack_bytes_before, a, sizeof a);
		cli_format_size(r->pack_bytes_after, b, sizeof b);
		printf("rewrote   %" PRIu64 " packs more than half dead "
		       "(%" PRIu64 " frames moved), %s into %s; the old "
		       "packs go at a gc --delete after --min-age\n",
		       r->packs_rewritten, r->frames_moved, a, b);
	} else if (r->long_chunks) {
		printf("chunks    %" PRIu64 " with long slice lists "
		       "(--compact rewrites them)\n",
		       r->long_chunks);
	}
	if (o->delete) {
		printf("reclaimed %" PRIu64 " dead slices and packs (what "
		       "mounted clients reclaim)\n",
		       r->reclaimed);
		if (r->delayed && r->delayed_clients)
			printf("delayed   %" PRIu64 " slices compactions "
			       "replaced wait out their delay: %" PRIu64
			       " clients are mounted\n",
			       r->delayed, r->delayed_clients);
		else if (r->delayed)
			printf("delayed   %" PRIu64 " slices compactions "
			       "replaced wait out their delay (--min-age 0 "
			       "takes them when no client is mounted)\n",
			       r->delayed);
		cli_format_size(r->deleted_bytes, a, sizeof a);
		printf("deleted   %" PRIu64 " objects, %s; %" PRIu64
		       " could not be deleted\n",
		       r->deleted, a, r->delete_errors);
	} else if (r->leaked) {
		cli_hint("'granary gc --delete %s' deletes the leaked objects",
			 shown);
	}
}

int cmd_gc(int argc, char **argv)
{
	struct gc_opts o = {.min_age = 3600};
	struct meta_opts mo = {0};
	struct status_line line;
	struct meta_volume v;
	struct gc_report r;
	struct objstore *store = NULL;
	struct meta *m = NULL;
	char shown[1024];
	int c, err, quiet = 0, as_json = 0, ret = CLI_EXIT_FAIL;
	double age;

	while ((c = getopt_long(argc, argv, ":dca:t:qh", options, NULL)) !=
	       -1) {
		switch (c) {
		case 'd':
			o.delete = 1;
			break;
		case 'c':
			o.compact = 1;
			break;
		case 'a':
			if (cli_parse_seconds(optarg, &age) || age > 1e10) {
				cli_error("bad --min-age '%s': a duration such "
					  "as 3600, 90m, 1h or 0",
					  optarg);
				return CLI_EXIT_USAGE;
			}
			o.min_age = (int64_t)age;
			break;
		case 't':
			if (cli_threads_arg(optarg, &o.threads))
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
	mo.read_only = !o.delete &&!o.compact;
	if (cli_volume_open(argv[optind], &mo, &m, &v, shown, sizeof shown))
		return CLI_EXIT_FAIL;
	o.block_size = v.block_size;
	o.compress = (int)v.compress;
	if (cli_volume_store(&v,
			     o.delete || o.compact
				 ? "gc does not change a store it cannot tell "
				   "is this volume's"
				 : NULL,
			     &store))
		goto out;

	status_line_init(&line, quiet);
	o.progress = on_progress;
	o.progress_arg = &line;
	err = gc_run(m, store, &o, &r);
	if (err) {
		cli_error("gc of the volume at '%s' stopped: %s%s", shown,
			  gr_strerror(err),
			  o.delete &&!r.deleted ? " (nothing was deleted)"
						: "");
		if (err == OBJSTORE_EAUTH)
			cli_hint("the keys must allow listing the bucket");
		goto out;
	}
	if (as_json)
		json(&v, &o, &r);
	else
		human(&v, shown, &o, &r);
	ret = r.delete_errors || r.compact_errors ? CLI_EXIT_FAIL : CLI_EXIT_OK;
out:
	objstore_close(store);
	meta_close(m);
	return ret;
}
