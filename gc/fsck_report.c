/*
 * fsck_report.c - the end of fsck (fsck.h): each confirmed problem
 * repaired (when asked) by the meta_fsck.h call for its kind, then
 * handed to the caller with the path of the file concerned, found by
 * walking up the entries (a listing of each directory on the way, the
 * paths of directories cached) and a sentence saying what is wrong.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gc/fsck_int.h"
#include "meta/meta_objects.h"

static const char *const kind_names[FSCK_NKINDS] = {
    [FSCK_ENTRY_NO_INODE] = "entry-no-inode",
    [FSCK_ENTRY_TYPE] = "entry-type",
    [FSCK_ENTRY_CORRUPT] = "entry-corrupt",
    [FSCK_ENTRY_NO_DIR] = "entry-no-dir",
    [FSCK_INODE_CORRUPT] = "inode-corrupt",
    [FSCK_NLINK] = "nlink",
    [FSCK_DIR_NLINK] = "dir-nlink",
    [FSCK_DIR_PARENT] = "dir-parent",
    [FSCK_DIR_NAMES] = "dir-names",
    [FSCK_ORPHAN] = "orphan",
    [FSCK_LOOP] = "loop",
    [FSCK_STRAY_CHUNKS] = "stray-chunks",
    [FSCK_TOTALINODES] = "totalinodes",
    [FSCK_USEDSPACE] = "usedspace",
    [FSCK_SLICEREF] = "sliceref",
    [FSCK_SLICE_DEAD] = "slice-dead",
    [FSCK_PACK_TOTAL] = "pack-total",
    [FSCK_PACK_DEAD] = "pack-dead",
    [FSCK_STAGING] = "staging",
    [FSCK_SESSION] = "session",
    [FSCK_OBJECT_MISSING] = "object-missing",
    [FSCK_OBJECT_SIZE] = "object-size",
    [FSCK_OBJECT_CORRUPT] = "object-corrupt",
    [FSCK_DELFILE_LIVE] = "delfile-live",
    [FSCK_CHUNK_PAST_END] = "chunk-past-length",
    [FSCK_PENDINGSPACE] = "pendingspace",
    [FSCK_OPEN_GONE] = "open-gone",
    [FSCK_TRASH] = "trash",
};

const char *fsck_kind_name(enum fsck_kind k)
{
	return k > 0 && k < FSCK_NKINDS ? kind_names[k] : "unknown";
}

static const char *type_name(uint8_t t)
{
	static const char *const n[] = {
	    "?",    "file",	    "directory",	"symlink",
	    "fifo", "block device", "character device", "socket"};
	return t < sizeof n / sizeof n[0] ? n[t] : "?";
}

/* ---- paths ------------------------------------------------------------- */

#define PATH_SLOTS 512
struct pathcache {
	struct {
		uint64_t dir;
		char *path;
	} slot[PATH_SLOTS];
	uint64_t ldir; /* the directory last listed */
	struct meta_dirent *ents;
	size_t n;
	int lerr;
};

/* The cache, made at the first path asked for (NULL: no memory). */
static struct pathcache *paths(struct fsck *f)
{
	if (!f->paths)
		f->paths = calloc(1, sizeof *f->paths);
	return f->paths;
}

static const char *name_in(struct fsck *f, uint64_t dir, uint64_t ino)
{
	struct pathcache *pc = paths(f);

	if (!pc)
		return NULL;
	if (pc->ldir != dir) {
		meta_dirents_free(pc->ents, pc->n);
		pc->ents = NULL;
		pc->n = 0;
		pc->ldir = dir;
		pc->lerr = meta_readdir(f->m, dir, 0, &pc->ents, &pc->n);
	}
	for (size_t i = 0; !pc->lerr && i < pc->n; i++)
		if (pc->ents[i].ino == ino)
			return pc->ents[i].name;
	return NULL;
}

/* "/a/b" of directory dir ("" for the root; cached), or NULL when no
 * path reaches it. A detached snapshot's top is "(detached snapshot N)". */
static const char *dir_path(struct fsck *f, uint64_t dir)
{
	struct pathcache *pc = paths(f);
	size_t s = dir % PATH_SLOTS;
	char *parts[512], top[64];
	size_t np = 0, len;
	const char *base = NULL;
	uint64_t cur = dir;

	if (dir == META_ROOT_INO)
		return "";
	if (!pc)
		return NULL;
	if (pc->slot[s].path && pc->slot[s].dir == dir)
		return pc->slot[s].path;
	while (np < sizeof parts / sizeof parts[0]) {
		const char *name;
		struct ino *x = fsck_ino(f, cur, 0);
		size_t cs = cur % PATH_SLOTS;
		if (cur == META_ROOT_INO) {
			base = "";
			break;
		}
		if (f->o->path && cur == f->top) {
			base = f->top_path; /* its name is outside the tree */
			break;
		}
		if (cur != dir && pc->slot[cs].path &&
		    pc->slot[cs].dir == cur) {
			base = pc->slot[cs].path;
			break;
		}
		if (!x || x->type != META_DIR)
			break;
		if (x->flags & I_TOP) {
			snprintf(top, sizeof top,
				 "(detached snapshot %" PRIu64 ")", cur);
			base = top;
			break;
		}
		if (x->flags & I_VDIR)
			name = META_VERSIONS;
		else if (!x->links || !(name = name_in(f, x->up, cur)))
			break;
		if (!(parts[np] = strdup(name)))
			break;
		np++;
		cur = x->up;
	}
	char *p = NULL;
	if (base) {
		len = strlen(base);
		for (size_t i = 0; i < np; i++)
			len += 1 + strlen(parts[i]);
		if ((p = malloc(len + 1))) {
			char *w = p + sprintf(p, "%s", base);
			for (size_t i = np; i-- > 0;)
				w += sprintf(w, "/%s", parts[i]);
		}
	}
	for (size_t i = 0; i < np; i++)
		free(parts[i]);
	if (!p)
		return NULL;
	free(pc->slot[s].path);
	pc->slot[s].dir = dir;
	pc->slot[s].path = p;
	return p;
}

/* The path of inode ino into buf, or NULL when none reaches it. */
static const char *path_of(struct fsck *f, uint64_t ino, char *buf, size_t cap)
{
	struct ino *x = fsck_ino(f, ino, 0);
	const char *d, *name;

	if (ino == META_ROOT_INO)
		return "/";
	if (f->o->path && ino == f->top && x && x->type != META_DIR)
		return f->top_path;
	if (!ino_exists(x) || !x->up)
		return NULL;
	if (x->type == META_DIR)
		return (d = dir_path(f, ino)) ? snprintf(buf, cap, "%s", d),
		       buf		      : NULL;
	if (!x->links || !(d = dir_path(f, x->up)) ||
	    !(name = name_in(f, x->up, ino)))
		return NULL;
	snprintf(buf, cap, "%s/%s", d, name);
	return buf;
}

static const char *entry_path(struct fsck *f, uint64_t dir, const char *name,
			      char *buf, size_t cap)
{
	const char *d = dir_path(f, dir);
	if (!d)
		return NULL;
	snprintf(buf, cap, "%s/%s", d, name);
	return buf;
}

void fsck_paths_free(struct fsck *f)
{
	struct pathcache *pc = f->paths;
	if (!pc)
		return;
	for (size_t i = 0; i < PATH_SLOTS; i++)
		free(pc->slot[i].path);
	meta_dirents_free(pc->ents, pc->n);
	free(pc);
}

/* ---- repairs and the report -------------------------------------------- */

static const char *fix_why(int err)
{
	switch (err) {
	case EBUSY:
		return "a client has it open";
	case EAGAIN:
		return "a client changed it meanwhile";
	case ENOTDIR:
		return "/lost+found is no directory";
	case EEXIST:
		return "its name in /lost+found is taken";
	default:
		return gr_strerror(err);
	}
}

/* The sentence of problem c. */
static void what_of(const struct cand *c, char *w, size_t cap)
{
	switch (c->kind) {
	case FSCK_ENTRY_NO_INODE:
		snprintf(w, cap,
			 "the entry names inode %" PRIu64
			 ", which does not exist",
			 c->ino);
		break;
	case FSCK_ENTRY_TYPE:
		snprintf(w, cap, "the entry says %s, the inode is a %s",
			 type_name(c->etype), type_name(c->itype));
		break;
	case FSCK_ENTRY_CORRUPT:
		snprintf(w, cap, "the entry's value is no directory entry");
		break;
	case FSCK_ENTRY_NO_DIR:
		snprintf(w, cap,
			 "d%" PRIu64 " holds entries of a directory "
			 "that does not exist",
			 c->dir);
		break;
	case FSCK_INODE_CORRUPT:
		snprintf(w, cap, "the inode's record is corrupt");
		break;
	case FSCK_NLINK:
		snprintf(w, cap,
			 "nlink is %" PRId64 ", %" PRId64 " entries name it",
			 c->found, c->expected);
		break;
	case FSCK_DIR_NLINK:
		snprintf(w, cap,
			 "nlink is %" PRId64 ", 2 + %" PRId64
			 " subdirectories make %" PRId64,
			 c->found, c->expected - 2, c->expected);
		break;
	case FSCK_DIR_PARENT:
		snprintf(w, cap,
			 "the directory's parent is inode %" PRId64
			 ", the directory naming it is inode %" PRId64,
			 c->found, c->expected);
		break;
	case FSCK_DIR_NAMES:
		snprintf(w, cap, "the directory has %" PRId64 " names",
			 c->found);
		break;
	case FSCK_ORPHAN:
		snprintf(w, cap,
			 "no entry names it and nobody has it open "
			 "(nlink %" PRId64 ")",
			 c->found);
		break;
	case FSCK_LOOP:
		snprintf(w, cap,
			 "the directory reaches the root only "
			 "through itself (a loop)");
		break;
	case FSCK_STRAY_CHUNKS:
		snprintf(w, cap,
			 "chunk lists of inode %" PRIu64 ", which "
			 "does not exist and is not waiting for reclamation",
			 c->ino);
		break;
	case FSCK_TOTALINODES:
		snprintf(w, cap,
			 "totalinodes is %" PRId64 ", %" PRId64 " inodes exist",
			 c->found, c->expected);
		break;
	case FSCK_USEDSPACE:
		snprintf(w, cap,
			 "usedspace is %" PRId64 ", the files store %" PRId64
			 " bytes",
			 c->found, c->expected);
		break;
	case FSCK_SLICEREF:
		snprintf(w, cap,
			 "slice %" PRIu64 ": %" PRId64
			 " references found, sliceref makes %" PRId64,
			 c->id, c->found, c->expected);
		break;
	case FSCK_SLICE_DEAD:
		snprintf(w, cap,
			 "%s %" PRIu64 " waits for deletion but is "
			 "still referenced",
			 c->tail ? "pack" : "slice", c->id);
		break;
	case FSCK_PACK_TOTAL:
		snprintf(w, cap, "pack %" PRIu64 " has no total in packs",
			 c->id);
		break;
	case FSCK_PACK_DEAD:
		snprintf(w, cap,
			 "pack %" PRIu64 " counts %" PRId64
			 " dead bytes, more than its %" PRId64,
			 c->id, c->found, c->expected);
		break;
	case FSCK_STAGING:
		snprintf(w, cap,
			 "session %" PRIu64 ", no longer registered, "
			 "left %" PRId64 " names in staging",
			 c->id, c->found);
		break;
	case FSCK_SESSION:
		snprintf(w, cap,
			 "session %" PRIu64 ", no longer registered, "
			 "left fields in sessionstaged, sessionpending or "
			 "cache groups",
			 c->id);
		break;
	case FSCK_OBJECT_MISSING:
		snprintf(w, cap,
			 "%" PRId64 " of %" PRId64 " objects of %s %" PRIu64
			 " are missing from the store",
			 c->found, c->expected, c->tail ? "pack" : "slice",
			 c->id);
		break;
	case FSCK_OBJECT_SIZE:
		snprintf(w, cap,
			 "an object of %s %" PRIu64 " has %" PRId64
			 " bytes, %" PRId64 " expected",
			 c->tail ? "pack" : "slice", c->id, c->found,
			 c->expected);
		break;
	case FSCK_OBJECT_CORRUPT:
		snprintf(w, cap,
			 "an object of %s %" PRIu64 " fails its checksum",
			 c->tail ? "pack" : "slice", c->id);
		break;
	case FSCK_DELFILE_LIVE:
		snprintf(w, cap,
			 "the file exists and waits in delfiles for its chunk "
			 "lists to be dropped (length %" PRId64 ")",
			 c->found);
		break;
	case FSCK_CHUNK_PAST_END:
		snprintf(w, cap,
			 "chunk %" PRIu32 " has a slice list, past the "
			 "file's length",
			 c->idx);
		break;
	case FSCK_PENDINGSPACE:
		snprintf(w, cap,
			 "pendingspace is %" PRId64 ", the sessions' pending "
			 "bytes make %" PRId64,
			 c->found, c->expected);
		break;
	case FSCK_OPEN_GONE:
		if (c->ino)
			snprintf(w, cap,
				 "held open by session %" PRIu64
				 ", no longer registered",
				 c->id);
		else
			snprintf(w, cap,
				 "session %" PRIu64 ", no longer registered, "
				 "left %" PRId64 " open files in its list",
				 c->id, c->found);
		break;
	case FSCK_TRASH:
		snprintf(w, cap,
			 "the key 'trash' names inode %" PRIu64
			 ", which is no directory: removals are final and the "
			 "trash lists nothing",
			 c->ino);
		break;
	default:
		snprintf(w, cap, "?");
	}
}

static void report(struct fsck *f, struct cand *c, enum fsck_fix fix,
		   const char *why)
{
	struct fsck_report *r = f->r;
	char path[8192], what[512], key[128];
	struct fsck_problem p = {.kind = c->kind,
				 .ino = c->ino,
				 .id = c->id,
				 .found = c->found,
				 .expected = c->expected,
				 .fix = fix,
				 .why = why,
				 .key = c->key};

	switch (c->kind) {
	case FSCK_ENTRY_NO_INODE:
	case FSCK_ENTRY_TYPE:
	case FSCK_ENTRY_CORRUPT:
	case FSCK_DIR_PARENT:
		/* path: the top's entry is in a directory outside the tree */
		if (f->o->path && c->dir == f->top_up && c->ino == f->top)
			p.path = f->top_path;
		else
			p.path =
			    entry_path(f, c->dir, c->name, path, sizeof path);
		break;
	case FSCK_ENTRY_NO_DIR:
	case FSCK_ORPHAN:
	case FSCK_STRAY_CHUNKS:
	case FSCK_TOTALINODES:
	case FSCK_USEDSPACE:
	case FSCK_STAGING:
	case FSCK_SESSION:
	case FSCK_PENDINGSPACE:
		break;
	case FSCK_TRASH:
		p.path = "/" META_TRASH;
		p.key = "trash";
		break;
	default:
		if (c->ino)
			p.path = path_of(f, c->ino, path, sizeof path);
	}
	if (c->kind == FSCK_OPEN_GONE && !p.key) {
		if (c->ino)
			snprintf(key, sizeof key, "o%" PRIu64, c->ino);
		else
			snprintf(key, sizeof key, "so%" PRIu64, c->id);
		p.key = key;
	}
	if ((c->kind == FSCK_STRAY_CHUNKS || c->kind == FSCK_CHUNK_PAST_END) &&
	    !p.key) {
		if (c->tail)
			snprintf(key, sizeof key, "n%" PRIu64 " field %" PRIu64,
				 c->ino / 32, c->ino % 32 + 32);
		else
			snprintf(key, sizeof key, "c%" PRIu64 "_%" PRIu32,
				 c->ino, c->idx);
		p.key = key;
	}
	what_of(c, what, sizeof what);
	p.what = what;
	r->problems++;
	r->by_kind[c->kind]++;
	if (fix == FSCK_FIX_DONE)
		r->fixed++;
	else if (fix == FSCK_FIX_SKIPPED)
		r->skipped++;
	else if (fix != FSCK_FIX_NONE)
		r->unfixed++;
	if (f->o->problem)
		f->o->problem(f->o->problem_arg, &p);
}

/* What a repair's error makes of it (why: its text, or NULL). */
static enum fsck_fix fix_result(int err, const char **why)
{
	*why = err ? fix_why(err) : NULL;
	if (!err)
		return FSCK_FIX_DONE;
	return err == EAGAIN || err == EBUSY ? FSCK_FIX_SKIPPED
					     : FSCK_FIX_FAILED;
}

static void report_err(struct fsck *f, struct cand *c, int err)
{
	const char *why;
	enum fsck_fix fix = fix_result(err, &why);

	report(f, c, f->o->repair ? fix : FSCK_FIX_NONE,
	       f->o->repair ? why : NULL);
}

/* Why fsck leaves a kind alone, or NULL when it repairs it. */
static const char *cannot(enum fsck_kind k)
{
	switch (k) {
	case FSCK_ENTRY_CORRUPT:
	case FSCK_INODE_CORRUPT:
		return "a corrupt record: fsck does not guess what it held";
	case FSCK_ENTRY_NO_DIR:
		return "the entries' directory is gone: recreate it by hand";
	case FSCK_DIR_NAMES:
	case FSCK_LOOP:
		return "fsck does not choose which name to drop: remove "
		       "one by hand";
	case FSCK_OBJECT_MISSING:
	case FSCK_OBJECT_SIZE:
	case FSCK_OBJECT_CORRUPT:
		return "the file's data is lost there: restore it from a "
		       "copy";
	default:
		return NULL;
	}
}

static int fix_kind(enum fsck_kind k)
{
	return k == FSCK_NLINK || k == FSCK_DIR_NLINK || k == FSCK_DIR_PARENT ||
	       k == FSCK_ORPHAN;
}

static int cand_ino_cmp(const void *a, const void *b)
{
	const struct cand *x = *(struct cand *const *)a;
	const struct cand *y = *(struct cand *const *)b;
	int ox = x->kind == FSCK_ORPHAN, oy = y->kind == FSCK_ORPHAN;
	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	return ox - oy;
}

/* The inode fixes, one script per inode with all of its problems; the
 * inodes with an orphan among them last (lost+found changes the root). */
static int settle_inodes(struct fsck *f)
{
	size_t n = 0;
	struct cand **v = malloc((f->ncand + 1) * sizeof *v);

	if (!v)
		return ENOMEM;
	for (size_t i = 0; i < f->ncand; i++)
		if (f->cands[i].state == C_CONFIRMED &&
		    fix_kind(f->cands[i].kind))
			v[n++] = &f->cands[i];
	qsort(v, n, sizeof *v, cand_ino_cmp);
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0, j; i < n; i = j) {
			int orphan = 0, err = 0;
			uint32_t nlink = UINT32_MAX;
			uint64_t parent = 0;
			for (j = i; j < n && v[j]->ino == v[i]->ino; j++) {
				struct cand *c = v[j];
				orphan |= c->kind == FSCK_ORPHAN;
				if (c->kind == FSCK_DIR_PARENT)
					parent = (uint64_t)c->expected;
				else
					nlink = (uint32_t)c->expected;
			}
			if (orphan != pass)
				continue;
			if (f->o->repair)
				err = meta_fsck_fix_inode(
				    f->m, &v[i]->now, nlink, parent, orphan);
			for (size_t k = i; k < j; k++)
				report_err(f, v[k], err);
		}
	}
	free(v);
	return 0;
}

/*
 * A pack's dead bytes past its total: the next frame to die would have
 * its object deleted under the live ones. They become the bytes of the
 * frames neither referenced nor waiting for deletion (never committed,
 * or counted dead already), as the walk of the whole volume found them;
 * with path, whose walk does not know the frames of files outside the
 * tree, 0: the frames count again as they die, and a pack that then never
 * reaches its total is left for gc to delete once nothing references it.
 */
static enum fsck_fix fix_packdead(struct fsck *f, struct cand *c,
				  const char **why)
{
	struct slc *p = fsck_slc(f, c->id, 0);
	int64_t dead = 0;

	if (!f->o->path && p && p->live && p->live < (uint64_t)c->expected)
		dead = c->expected - (int64_t)p->live;
	return fix_result(meta_fsck_fix_packdead(f->m, c->id, c->found, dead),
			  why);
}

/* A slice (c->tail: a pack) both referenced and waiting for deletion:
 * its dead records go only while its objects are still in the store (a
 * reclamation may be deleting them: then the file's data is lost). */
static enum fsck_fix fix_dead(struct fsck *f, struct cand *c, const char **why)
{
	struct slc *x = fsck_slc(f, c->id, 0);
	uint64_t pack = c->tail ? c->id : 0;
	struct meta_slice *s;
	size_t n;
	int there = 0, err;

	if (!f->o->objects && !f->o->deep) {
		*why = "its objects may be deleted already: run fsck --objects "
		       "--repair, which checks they are there first";
		return FSCK_FIX_CANNOT;
	}
	/* a frame's object is its pack */
	if (!pack && x && (x->flags & S_PACKED) &&
	    !(err = meta_read_chunk(f->m, c->ino, c->idx, &s, &n))) {
		for (size_t i = 0; i < n && !pack; i++)
			if (s[i].id == c->id)
				pack = s[i].pack;
		free(s);
	}
	err = fsck_objects_there(f, pack ? pack : c->id, x ? x->size : 0,
				 pack != 0, &there);
	if (!err && !there) {
		*why = "its objects are deleted already: restore the file "
		       "from a copy";
		return FSCK_FIX_CANNOT;
	}
	if (!err)
		err = meta_fsck_fix_dead(f->m, c->tail ? 0 : c->id,
					 c->tail ? c->id : 0);
	return fix_result(err, why);
}

/* The names session sid, gone, left in staging, released. */
static int fix_staging(struct fsck *f, uint64_t sid)
{
	size_t n = 0;
	char(*buf)[48] = calloc(f->nsnames + 1, sizeof *buf);
	const char **names = calloc(f->nsnames + 1, sizeof *names);
	int err = buf && names ? 0 : ENOMEM;

	for (size_t i = 0; !err && i < f->nsnames; i++) {
		const struct sname *sn = &f->snames[i];
		if (sn->sid != sid)
			continue;
		if (sn->pack)
			snprintf(buf[n], sizeof buf[0], "p%" PRIu64, sn->id);
		else
			snprintf(buf[n], sizeof buf[0], "b%" PRIu64 "_%" PRIu32,
				 sn->id, sn->idx);
		names[n] = buf[n];
		n++;
	}
	if (!err)
		err = meta_fsck_fix_staging(f->m, sid, names, n);
	free(names);
	free(buf);
	return err;
}

/* Repair c, of a kind fsck repairs, outside the inodes' (settle_inodes). */
static enum fsck_fix fix_one(struct fsck *f, struct cand *c, const char **why)
{
	uint64_t size;
	int err = 0;

	switch (c->kind) {
	case FSCK_TOTALINODES:
	case FSCK_USEDSPACE:
		/* the walk saw them still, but a file made and deleted
		 * meanwhile may have been counted: not beside clients */
		if (f->live_sessions) {
			*why = "clients have the volume mounted: the counters "
			       "move with them (repair them unmounted)";
			return FSCK_FIX_SKIPPED;
		}
		err = meta_fsck_fix_counter(f->m,
					    c->kind == FSCK_TOTALINODES
						? META_COUNTER_INODES
						: META_COUNTER_USED,
					    c->found, c->expected);
		break;
	case FSCK_ENTRY_NO_INODE:
		err = meta_fsck_fix_entry(f->m, &c->ent, 0);
		break;
	case FSCK_ENTRY_TYPE:
		err = meta_fsck_fix_entry(f->m, &c->ent, c->itype);
		break;
	case FSCK_STRAY_CHUNKS:
		err = meta_fsck_fix_stray_chunks(
		    f->m, c->ino, (uint64_t)(c->idx + 1) * META_CHUNK_SIZE);
		break;
	case FSCK_SLICEREF:
		err = meta_fsck_fix_sliceref(f->m, c->id, c->was,
					     c->found > 0 ? c->found - 1 : 0);
		break;
	case FSCK_PACK_TOTAL:
		/* its total is the size of its object */
		err = fsck_pack_size(f, c->id, &size);
		if (err == ENOENT || err == EINVAL) {
			*why = err == EINVAL ? "its size comes from the store, "
					       "which fsck could not open"
					     : "its object is not in the store";
			return FSCK_FIX_CANNOT;
		}
		if (!err)
			err = meta_fsck_fix_pack_total(f->m, c->id, size);
		break;
	case FSCK_SESSION:
		err = meta_fsck_fix_session(f->m, c->id);
		break;
	case FSCK_PACK_DEAD:
		return fix_packdead(f, c, why);
	case FSCK_SLICE_DEAD:
		return fix_dead(f, c, why);
	case FSCK_STAGING:
		err = fix_staging(f, c->id);
		break;
	case FSCK_DELFILE_LIVE:
		err = meta_fsck_fix_delfile(f->m, c->ino, (uint64_t)c->found);
		break;
	case FSCK_CHUNK_PAST_END:
		err = meta_fsck_fix_chunk(f->m, &c->now, c->idx);
		break;
	case FSCK_PENDINGSPACE:
		err = meta_fsck_fix_pending(f->m, c->found);
		break;
	case FSCK_OPEN_GONE:
		err = meta_fsck_fix_open(f->m, c->id, c->ino);
		break;
	case FSCK_TRASH:
		err = meta_fsck_fix_trash(f->m, c->ino);
		break;
	default:
		break;
	}
	return fix_result(err, why);
}

int fsck_settle(struct fsck *f)
{
	static const enum fsck_kind before[] = {
	    FSCK_TOTALINODES, FSCK_USEDSPACE, FSCK_INODE_CORRUPT,
	    FSCK_DIR_NAMES, FSCK_LOOP};
	static const enum fsck_kind after[] = {
	    FSCK_ENTRY_NO_INODE, FSCK_ENTRY_TYPE,     FSCK_ENTRY_CORRUPT,
	    FSCK_ENTRY_NO_DIR,	 FSCK_STRAY_CHUNKS,   FSCK_SLICEREF,
	    FSCK_SLICE_DEAD,	 FSCK_PACK_TOTAL,     FSCK_PACK_DEAD,
	    FSCK_STAGING,	 FSCK_SESSION,	      FSCK_OBJECT_MISSING,
	    FSCK_OBJECT_SIZE,	 FSCK_OBJECT_CORRUPT, FSCK_DELFILE_LIVE,
	    FSCK_CHUNK_PAST_END, FSCK_PENDINGSPACE,   FSCK_OPEN_GONE,
	    FSCK_TRASH};
	int err;

	/* the counters first: lost+found, when made, counts itself */
	fsck_phase(f, f->o->repair ? "repair" : "report");
	for (int pass = 0; pass < 2; pass++) {
		const enum fsck_kind *ks = pass ? after : before;
		size_t nk = pass ? sizeof after / sizeof *after
				 : sizeof before / sizeof *before;
		if (pass && (err = settle_inodes(f)))
			return err;
		for (size_t k = 0; k < nk; k++) {
			for (size_t i = 0; i < f->ncand; i++) {
				struct cand *c = &f->cands[i];
				const char *why = NULL;
				enum fsck_fix fix = FSCK_FIX_NONE;
				if (c->state != C_CONFIRMED || c->kind != ks[k])
					continue;
				if (f->o->repair && (why = cannot(c->kind)))
					fix = FSCK_FIX_CANNOT;
				else if (f->o->repair)
					fix = fix_one(f, c, &why);
				report(f, c, fix, why);
			}
		}
	}
	return 0;
}
