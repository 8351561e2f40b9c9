/*
 * cmd_load.c - `granary load`: build a volume from a dump (`granary
 * dump`, docs/dump-format.md), plain or LZ4-compressed, in an empty Redis
 * database (meta_dump.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fs/data/backup.h"
#include "fs/store/crypt.h"
#include "fs/store/objstore.h"
#include "fs/store/owner.h"
#include "lib/lz4stream.h"
#include "meta/meta.h"
#include "meta/meta_dump.h"
#include "meta/meta_volume.h"
#include "tools/cli.h"
#include "tools/progress.h"

static const char usage[] =
    "usage: granary load [options] META_URL FILE|-\n"
    "       granary load [options] META_URL --from-store STORAGE_URL\n"
    "\n"
    "Build the volume of a dump ('granary dump') in the redis database at\n"
    "META_URL, which must be empty (a database holding a volume, or any\n"
    "key, is refused). FILE ('-': stdin) may be plain or LZ4-compressed.\n"
    "The volume keeps its name, uuid and storage URL: its data objects\n"
    "are those of the dumped volume, in the same store; the ids of what\n"
    "it writes start in a new epoch and the clients' disk caches of\n"
    "before it are not used, so no object of the changes the restore\n"
    "loses is ever taken for a new one. A stream that is not a dump, of\n"
    "a newer format, damaged or cut short is refused; what was loaded\n"
    "before is then left in the database, without settings (no client\n"
    "mounts it): empty the database before loading again.\n"
    "\n"
    "  --from-store URL    load the newest metadata backup the mounted\n"
    "                      clients keep in the volume's store at URL\n"
    "                      (mount --backup-meta; 'granary status' shows\n"
    "                      the last one) instead of a FILE\n"
    "  --backup NAME       with --from-store: that backup, not the newest\n"
    "  --encrypt-key FILE  the key file of an encrypted volume (or\n"
    "                      GRANARY_ENCRYPT_KEY_FILE,\n"
    "                      GRANARY_ENCRYPT_PASSPHRASE): its backups in\n"
    "                      the store are sealed, and a backup or dump\n"
    "                      without its 'crypt' setting is refused\n"
    "  --no-store-keys     do not save the S3 keys in the settings\n"
    "  -q, --quiet         no progress line and no summary\n"
    "  -h, --help          show this help\n"
    "\n"
    "A dump holds no S3 keys: they come from GRANARY_S3_ACCESS_KEY and\n"
    "GRANARY_S3_SECRET_KEY, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY,\n"
    "and are saved in the settings as 'granary format' saves them (never on\n"
    "a command line, where ps would show them). Without them every mount\n"
    "needs them in its environment; so do temporary keys (a session token).\n"
    "\n"
    "exit status: 0 when the volume is loaded, 1 when it is not, 2 on a\n"
    "usage error.\n";

enum { OPT_NO_STORE_KEYS = 256, OPT_FROM_STORE, OPT_BACKUP, OPT_ENCRYPT_KEY };

static const struct option options[] = {
    {"from-store", required_argument, NULL, OPT_FROM_STORE},
    {"backup", required_argument, NULL, OPT_BACKUP},
    {"encrypt-key", required_argument, NULL, OPT_ENCRYPT_KEY},
    {"no-store-keys", no_argument, NULL, OPT_NO_STORE_KEYS},
    {"quiet", no_argument, NULL, 'q'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static ssize_t fd_read(void *arg, void *p, size_t cap)
{
	int fd = *(int *)arg;
	for (;;) {
		ssize_t r = read(fd, p, cap);
		if (r >= 0 || errno != EINTR)
			return r < 0 ? -errno : r;
	}
}

static void on_progress(void *arg, const struct meta_dump_stats *st)
{
	char b[32];
	cli_format_size(st->bytes, b, sizeof b);
	status_line_print(arg, 0,
			  "load: %" PRIu64 " inodes, %" PRIu64
			  " entries, %" PRIu64 " lines, %s",
			  st->inodes, st->entries, st->lines, b);
}

/* Why the database is refused: a volume (named), or other keys. */
static void refused(struct meta *m, const char *shown)
{
	struct meta_volume v;
	int err = meta_load_volume(m, &v);

	if (err == 0 || err == META_EVERSION) {
		cli_error("redis at '%s' already holds volume '%s' (uuid %s)",
			  shown, v.name, v.uuid);
		cli_hint("load into an empty database (another DB number); "
			 "to replace that volume, empty its database first");
	} else {
		cli_error("redis at '%s' is not empty: it holds keys but no "
			  "volume (a load cut short?)",
			  shown);
		cli_hint("empty it (redis-cli -n DB FLUSHDB) if nothing in it "
			 "is to be kept, then load again");
	}
}

/* A dump file with a key given (keyfile or the environment): the volume
 * is meant to be encrypted, so the dump must hold its `crypt` setting
 * (*need 1). 0, or the error told. */
static int key_given(const char *keyfile, int *need)
{
	void *secret;
	size_t n;
	int err = cli_secret_load(keyfile, &secret, &n);
	if (!err) {
		*need = secret != NULL;
		crypt_secret_free(secret, n);
	}
	return err;
}

static int print_name(void *arg, const char *name)
{
	(void)arg;
	fprintf(stderr, "  %s\n", name);
	return 0;
}

static int is_name(void *arg, const char *name)
{
	return strcmp(arg, name) ? 0 : EEXIST;
}

/* Whether the store at url holds complete backup name: 0, or ENOENT
 * told with the list of those it holds, or the store's error told. */
static int backup_there(struct objstore *s, const char *url, const char *name)
{
	size_t count = 0;
	int err = backup_names(s, is_name, (void *)name, NULL);
	if (err == EEXIST)
		return 0;
	if (err) {
		cli_error("cannot read the backups in '%s': %s", url,
			  gr_strerror(err));
		return err;
	}
	cli_error("storage '%s' holds no complete backup '%s'", url, name);
	fprintf(stderr, "hint: the backups it holds, oldest first:\n");
	backup_names(s, print_name, NULL, &count);
	if (!count)
		fprintf(stderr, "  (none)\n");
	return ENOENT;
}

/* What --from-store reads: the store as it is, and for a sealed backup
 * (an encrypted volume's) a store over the same objects that opens them
 * with the backups' key. */
struct from_store {
	struct objstore *clear;
	struct objstore *sealed; /* or NULL: a plain backup */
	struct backup_reader *r;
	char uuid[40]; /* the store's volume marker's; "" when none */
	int need_crypt;
};

static void from_store_close(struct from_store *f)
{
	backup_close(f->r);
	objstore_close(f->sealed);
	objstore_close(f->clear);
}

static int first_key(void *arg, const char *key, uint64_t size, int64_t mtime)
{
	(void)mtime;
	if (!size)
		return 0;
	snprintf(arg, 1024, "%s", key);
	return ECANCELED; /* one is enough */
}

/* Whether the store's data objects are sealed (an encrypted volume's):
 * the first block or pack listed tells. */
static int store_sealed(struct objstore *s)
{
	static const char *const kinds[] = {"packs/", "blocks/"};
	for (size_t i = 0; i < 2; i++) {
		char key[1024] = "";
		void *data = NULL;
		size_t got = 0;
		objstore_list(s, kinds[i], first_key, key);
		if (!key[0] || objstore_get(s, key, 0, 8, &data, &got))
			continue;
		int sealed = objstore_crypt_sealed(data, got);
		free(data);
		return sealed;
	}
	return 0;
}

/* The sealing store of a sealed backup whose key record is k, the
 * volume key unwrapped with the secret given: 0, or the error told. */
static int open_sealed(const char *url, const struct objstore_creds *creds,
		       const char *name, const struct backup_key *k,
		       const void *secret, size_t n, struct objstore **out)
{
	unsigned char key[CRYPT_KEY_LEN], bkey[CRYPT_KEY_LEN];
	struct objstore *raw;
	int err = crypt_record_open(k->record, secret, n, k->uuid, key);
	if (err) {
		cli_error("backup '%s': %s", name,
			  err == EINVAL ? "its key object holds no key record "
					  "(altered or damaged): refused"
					: gr_strerror(err));
		cli_key_hint(err);
		return err;
	}
	err = crypt_key_derive(key, "backup", bkey);
	explicit_bzero(key, sizeof(key));
	if (!err && !(err = objstore_open(url, creds, &raw)))
		err = objstore_crypt_open(raw, bkey, out);
	explicit_bzero(bkey, sizeof(bkey));
	if (err)
		cli_error("cannot set up the opening of backup '%s': %s", name,
			  gr_strerror(err));
	return err;
}

/*
 * The backup of the store at url (name, or the newest) to read: 0, or
 * the error told. A sealed backup (an encrypted volume's: backup.h)
 * needs the volume's key, and is read only once it passes its checks; a
 * plain one is refused when a key is given (the backups of an encrypted
 * volume are sealed), and must carry a `crypt` setting when the store's
 * objects are sealed (need_crypt), so that a backup stripped of its
 * `crypt` setting never restores an encrypted volume as a plain one.
 */
static int open_backup(const char *url, const char *name,
		       const struct objstore_creds *creds, const char *keyfile,
		       struct from_store *f, char *file, size_t cap)
{
	struct backup_info b;
	struct backup_key k;
	struct objstore_owner ow;
	char newest[BACKUP_NAME];
	void *secret = NULL;
	size_t n = 0;
	int err = objstore_open(url, creds, &f->clear);
	if (err) {
		cli_error("cannot open storage '%s': %s", url,
			  gr_strerror(err));
		return err;
	}
	if (name && (err = backup_there(f->clear, url, name)))
		return err;
	if (!name) {
		err = backup_newest(f->clear, newest);
		if (err == ENOENT) {
			cli_error("storage '%s' holds no metadata backup", url);
			cli_hint("the mounted clients write one every "
				 "--backup-meta (default 1h); is this the "
				 "volume's storage URL (see 'granary status' "
				 "or the format command)?");
			return err;
		}
		if (err) {
			cli_error("cannot read the backups in '%s': %s", url,
				  gr_strerror(err));
			return err;
		}
		name = newest;
	}
	if (!objstore_owner_get(f->clear, &ow))
		snprintf(f->uuid, sizeof f->uuid, "%s", ow.uuid);
	if ((err = cli_secret_load(keyfile, &secret, &n)))
		return err;
	err = backup_key_get(f->clear, name, &k);
	if (err == ENOENT) { /* a plain backup */
		err = 0;
		if (secret) {
			err = CRYPT_EPLAIN;
			cli_error("backup '%s' is not sealed, but a key was "
				  "given: the backups of an encrypted volume "
				  "are; refused",
				  name);
			cli_hint("a key for another volume? give none. A "
				 "backup made by a granary before sealed "
				 "backups loads without a key, if you trust "
				 "the store it was in");
		}
		f->need_crypt = store_sealed(f->clear);
	} else if (err == EINVAL) {
		cli_error("backup '%s': its key object is not one (altered or "
			  "damaged): refused",
			  name);
	} else if (err) {
		cli_error("cannot read backup '%s' in '%s': %s", name, url,
			  gr_strerror(err));
	} else if (!secret) {
		err = CRYPT_ENOKEY;
		cli_error("backup '%s' is sealed (the backup of an encrypted "
			  "volume): its key is needed",
			  name);
		cli_hint("give the volume's key file: --encrypt-key FILE, "
			 "GRANARY_ENCRYPT_KEY_FILE or "
			 "GRANARY_ENCRYPT_PASSPHRASE");
	} else if (f->uuid[0] && strcmp(f->uuid, k.uuid)) {
		err = EINVAL;
		cli_error("backup '%s' is of volume uuid %s; the store holds "
			  "volume uuid %s: refused",
			  name, k.uuid, f->uuid);
	} else {
		err = open_sealed(url, creds, name, &k, secret, n, &f->sealed);
		f->need_crypt = 1;
		if (!f->uuid[0])
			snprintf(f->uuid, sizeof f->uuid, "%s", k.uuid);
	}
	crypt_secret_free(secret, n);
	if (err)
		return err;
	struct objstore *s = f->sealed ? f->sealed : f->clear;
	err = backup_stat(s, name, &b);
	if (err == ENOENT) { /* deleted since it was listed */
		cli_error("storage '%s' holds no complete backup '%s'", url,
			  name);
		return err;
	}
	if (err == CRYPT_EAUTH || err == EINVAL) {
		cli_error("backup '%s' failed its check (its manifest was "
			  "altered, damaged or swapped in the store): refused",
			  name);
		return err;
	}
	if (err) {
		cli_error("cannot read backup '%s' in '%s': %s", name, url,
			  gr_strerror(err));
		return err;
	}
	snprintf(file, cap, "backup %s", b.name);
	if ((err = backup_open(s, &b, &f->r)))
		cli_error("out of memory");
	return err;
}

int cmd_load(int argc, char **argv)
{
	struct meta_load_opts o = {0};
	struct meta_dump_stats st;
	struct objstore_creds creds = {0};
	struct status_line line;
	struct lz4stream_source *src = NULL;
	struct meta *m = NULL;
	const char *file;
	char shown[1024], why[256];
	struct timespec t0, t1;
	int fd = STDIN_FILENO, c, err, quiet = 0, store_keys = 1;
	int ret = CLI_EXIT_FAIL;
	const char *from_store = NULL, *backup = NULL, *keyfile = NULL;
	struct from_store from = {0};
	char what[128];

	while ((c = getopt_long(argc, argv, ":qh", options, NULL)) != -1) {
		switch (c) {
		case OPT_NO_STORE_KEYS:
			store_keys = 0;
			break;
		case OPT_FROM_STORE:
			from_store = optarg;
			break;
		case OPT_BACKUP:
			backup = optarg;
			break;
		case OPT_ENCRYPT_KEY:
			keyfile = optarg;
			break;
		case 'q':
			quiet = 1;
			break;
		case 'h':
			return cli_usage(usage, CLI_EXIT_OK);
		default:
			return cli_bad_option(c, argv, usage);
		}
	}
	if (backup && !from_store) {
		cli_error("--backup needs --from-store");
		return cli_usage(usage, CLI_EXIT_USAGE);
	}
	if (argc - optind != (from_store ? 1 : 2)) {
		cli_error(argc - optind < (from_store ? 1 : 2)
			      ? (from_store ? "META_URL is required"
					    : "META_URL and FILE are required")
			  : from_store ? "a FILE and --from-store: give one"
				       : "too many arguments");
		return cli_usage(usage, CLI_EXIT_USAGE);
	}
	if (from_store) {
		file = what;
		objstore_env_creds(&creds);
		if (open_backup(from_store, backup, &creds, keyfile, &from,
				what, sizeof what))
			goto out;
		o.need_uuid = from.uuid[0] ? from.uuid : NULL;
		o.need_crypt = from.need_crypt;
	} else if (strcmp((file = argv[optind + 1]), "-")) {
		fd = open(file, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			cli_error("cannot open '%s': %s", file,
				  strerror(errno));
			return CLI_EXIT_FAIL;
		}
	} else {
		file = "stdin";
	}
	if (cli_meta_open(argv[optind], NULL, &m))
		goto out;
	meta_url_redact(argv[optind], shown, sizeof shown);
	if (!from_store && key_given(keyfile, &o.need_crypt))
		goto out;
	if (from.r ? lz4stream_source_open(backup_read, from.r, &src)
		 : lz4stream_source_open(fd_read, &fd, &src)) {
		cli_error("out of memory");
		goto out;
	}
	/* temporary keys (a session token) would be kept past their expiry */
	if (store_keys && (creds.access_key || !objstore_env_creds(&creds)) &&
	    !creds.session_token) {
		o.access_key = creds.access_key;
		o.secret_key = creds.secret_key;
	}
	status_line_init(&line, quiet);
	o.progress = on_progress;
	o.progress_arg = &line;
	o.why = why;
	o.why_cap = sizeof why;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	err = meta_load(m, &o, lz4stream_source_read, src, &st);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	status_line_clear(&line);
	if (err == META_EEXIST) {
		refused(m, shown);
		goto out;
	}
	if (err) {
		if (err == EINVAL)
			cli_error("'%s' is not a whole granary dump: %s", file,
				  why);
		else if (err == EOVERFLOW)
			cli_error("cannot load '%s': %s", file, why);
		else if (err == EBADMSG)
			cli_error("'%s': the compressed stream is damaged or "
				  "cut short",
				  file);
		else
			cli_error("load into '%s' failed: %s", shown,
				  gr_strerror(err));
		if (st.lines)
			cli_hint("the database may hold part of it, without "
				 "settings (no client mounts it): empty it "
				 "before loading again");
		goto out;
	}
	if (!quiet) {
		struct meta_volume v;
		char a[32];
		double s = (double)(t1.tv_sec - t0.tv_sec) +
			   (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
		if (meta_load_volume(m, &v))
			memset(&v, 0, sizeof v);
		cli_format_size(st.bytes, a, sizeof a);
		fprintf(stderr,
			"loaded volume '%s' (uuid %s, storage %s): %" PRIu64
			" inodes, %" PRIu64 " entries, %" PRIu64
			" slices from %" PRIu64 " lines, %s%s in %.1f s\n",
			v.name, v.uuid, v.storage, st.inodes, st.entries,
			st.slices, st.lines, a,
			lz4stream_source_compressed(src) ? " (LZ4)" : "", s);
	}
	ret = CLI_EXIT_OK;
out:
	lz4stream_source_close(src);
	from_store_close(&from);
	if (fd != STDIN_FILENO)
		close(fd);
	meta_close(m);
	return ret;
}
