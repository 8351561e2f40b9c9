/*
 * cmd_format.c - `granary format`: create a volume. Every check that can
 * fail (arguments, redis, an existing volume, the storage round trip,
 * another volume's storage at, above or below the new one) runs before the
 * one write, so a failed format leaves redis as it was.
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fs/store/codec.h"
#include "fs/store/crypt.h"
#include "fs/store/objstore.h"
#include "fs/store/owner.h"
#include "meta/meta.h"
#include "meta/meta_volume.h"
#include "tools/cli.h"

static const char usage[] =
    "usage: granary format META_URL NAME --storage URL [options]\n"
    "\n"
    "Create volume NAME. The storage is checked first (a marker object is\n"
    "written, read back and deleted, and the storage must not belong to\n"
    "another volume, lie inside another volume's storage or hold one);\n"
    "only then are the settings written to the redis database at\n"
    "META_URL. Nothing is written if a check fails. The volume's name and\n"
    "uuid are kept in the object " OBJSTORE_OWNER_KEY " of the storage (of\n"
    "each directory of a pool): give each volume a bucket or prefix of its\n"
    "own that is neither inside another volume's nor holds one (--force\n"
    "does not change that). A storage holding more than 100,000 objects\n"
    "is refused: too many to look through.\n"
    "\n"
    "  META_URL             redis://[:PASSWORD@]HOST[:PORT]/DB,\n"
    "                       redis://[:PASSWORD@]MASTER,SENTINEL[:PORT],...\n"
    "                       /DB (Redis Sentinel) or\n"
    "                       unix:///PATH/redis.sock?db=N (a password may\n"
    "                       also come from GRANARY_META_PASSWORD)\n"
    "  NAME                 1 to 255 characters of A-Z a-z 0-9 . _ -\n"
    "  --storage URL        where the data blocks go:\n"
    "                         file:///DIR[:/DIR2...]  local directories\n"
    "                         s3://HOST[:PORT]/BUCKET[/PREFIX]  (HTTPS)\n"
    "                         s3+http://HOST[:PORT]/BUCKET[/PREFIX]\n"
    "  --block-size SIZE    largest object file data is cut into: 4K to\n"
    "                       16M, a multiple of 4K (default 4M)\n"
    "  --compress ALGO      lz4 or none (default lz4)\n"
    "  --capacity SIZE      the most data the volume holds (default: no\n"
    "                       limit): writes past it fail with ENOSPC (No\n"
    "                       space left on device) on every client; df\n"
    "                       shows it as the size. Sparse files count the\n"
    "                       bytes written, not their length. Clients see\n"
    "                       each other's writes every second and every\n"
    "                       SIZE/64 (4M to 64M) written, so the volume can\n"
    "                       hold a little more: at most that much per other\n"
    "                       client writing at once (docs/operations.md)\n"
    "  --trash-days N       keep removed files and directories N days in\n"
    "                       the trash at the volume's root, where root can\n"
    "                       restore them (granary trash); 0: no trash,\n"
    "                       removal frees the space at once (default 1;\n"
    "                       change it later with granary config)\n"
    "  --encrypt KEYFILE    encrypt every object with a volume key kept\n"
    "                       wrapped by the secret in KEYFILE (at least 8\n"
    "                       bytes; a trailing newline is dropped): every\n"
    "                       mount and tool then needs it. The secret may\n"
    "                       come from GRANARY_ENCRYPT_KEY_FILE or\n"
    "                       GRANARY_ENCRYPT_PASSPHRASE instead (then the\n"
    "                       volume is encrypted too). Lose it and the data\n"
    "                       is lost: keep a copy (docs/operations.md)\n"
    "  --force              replace an existing volume in this database;\n"
    "                       its data objects are not deleted\n"
    "  --no-store-keys      do not save the S3 keys in the settings: every\n"
    "                       mount then needs them in its environment\n"
    "  --strict             refuse a redis server that may evict keys,\n"
    "                       keeps nothing on disk or is nearly full\n"
    "                       (without it, a warning says so)\n"
    "  -h, --help           show this help\n"
    "\n"
    "S3 keys come from GRANARY_S3_ACCESS_KEY and GRANARY_S3_SECRET_KEY, or\n"
    "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; they are never printed.\n"
    "Temporary keys (STS) need their token too: GRANARY_S3_SESSION_TOKEN,\n"
    "or AWS_SESSION_TOKEN; they are not kept in the settings.\n"
    "SIZE is a byte count with an optional K, M, G or T suffix (powers of\n"
    "1024): 4194304, 4M and 4MiB are the same.\n";

enum {
	OPT_STORAGE = 256,
	OPT_BLOCK_SIZE,
	OPT_COMPRESS,
	OPT_CAPACITY,
	OPT_FORCE,
	OPT_NO_STORE_KEYS,
	OPT_STRICT,
	OPT_TRASH_DAYS,
	OPT_ENCRYPT
};

static const struct option options[] = {
    {"storage", required_argument, NULL, OPT_STORAGE},
    {"block-size", required_argument, NULL, OPT_BLOCK_SIZE},
    {"compress", required_argument, NULL, OPT_COMPRESS},
    {"capacity", required_argument, NULL, OPT_CAPACITY},
    {"force", no_argument, NULL, OPT_FORCE},
    {"no-store-keys", no_argument, NULL, OPT_NO_STORE_KEYS},
    {"strict", no_argument, NULL, OPT_STRICT},
    {"trash-days", required_argument, NULL, OPT_TRASH_DAYS},
    {"encrypt", required_argument, NULL, OPT_ENCRYPT},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

#define BLOCK_MIN     (4u << 10)
#define BLOCK_MAX     (16u << 20)
#define BLOCK_DEFAULT (4u << 20)
/* a day: an rm regretted the same day is undone, and the space of a
 * dataset deleted to make room comes back by the next one */
#define TRASH_DAYS_DEFAULT 1

static int name_valid(const char *name)
{
	size_t n = strlen(name);

	return n >= 1 && n <= META_NAME_MAX &&
	       strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
			    "abcdefghijklmnopqrstuvwxyz0123456789._-") == n;
}

static int is_s3(const char *url)
{
	return !strncmp(url, "s3://", 5) || !strncmp(url, "s3+http://", 10);
}

/* ---- overlap: no volume inside another, none inside this one ---- */

/* Objects listed at most when looking for volumes below the new storage. */
#define BELOW_MAX 100000

#define HINT_OWN_PLACE                                                         \
	"give each volume a bucket or prefix of its own that is neither "      \
	"inside another volume's nor holds one"

/* Another volume's marker: where it is and what it says. */
struct other {
	char url[2048];
	struct objstore_owner ow;
};

/* url (a place, options-free) to open with the options of storage (its
 * "?sig=v2&region=..."): places name where objects lie, the options how
 * to reach them, which every place of one storage shares. */
static const char *with_options(const char *url, const char *storage,
				char *buf, size_t cap)
{
	const char *q = strchr(storage, '?');

	if (!q || strncmp(storage, "s3", 2))
		return url;
	snprintf(buf, cap, "%s%s", url, q);
	return buf;
}

/* A marker error that leaves a place unchecked rather than refused: our
 * keys may read the storage but not its parents (a policy on a prefix). */
static int unreadable(int err)
{
	return err == OBJSTORE_EAUTH || err == EACCES || err == EPERM;
}

/*
 * The nearest volume whose storage holds storage (walking up from each of
 * its places): 0 with *o filled, or ENOENT. The first marker that cannot
 * be read goes to *why and its place to fail->url, for the caller to judge
 * once the storage itself has been probed (a store that refuses our keys
 * or cannot be reached fails the probe too); only refused keys let the
 * walk go on, as they may be refused for the parents alone.
 */
static int find_outer(const char *storage, const struct objstore_creds *creds,
		      struct other *o, struct other *fail, int *why)
{
	char place[1024], up[1024], buf[2048];

	for (size_t i = 0;
	     !objstore_url_place(storage, i, place, sizeof(place)); i++) {
		while (!objstore_url_parent(place, up, sizeof(up))) {
			int err = objstore_owner_at(
			    with_options(up, storage, buf, sizeof(buf)), creds,
			    &o->ow);
			if (!err) {
				snprintf(o->url, sizeof(o->url), "%s", up);
				return 0;
			}
			if (err != ENOENT && err != EINVAL && !*why) {
				*why = err;
				snprintf(fail->url, sizeof(fail->url), "%s",
					 up);
			}
			if (err != ENOENT && err != EINVAL && !unreadable(err))
				return ENOENT;
			memcpy(place, up, sizeof(place));
		}
	}
	return ENOENT;
}

struct below {
	const char *place;
	const char *storage; /* for its options */
	const struct objstore_creds *creds;
	size_t listed; /* objects, over every place */
	int verdict;   /* 0, EEXIST (a volume in o), E2BIG, or a read error */
	struct other o;
};

static int on_listed(void *arg, const char *key, uint64_t size, int64_t mtime)
{
	static const char tail[] = "/" OBJSTORE_OWNER_KEY;
	struct below *b = arg;
	size_t klen = strlen(key), tlen = sizeof(tail) - 1;

	(void)size;
	(void)mtime;
	if (++b->listed > BELOW_MAX)
		return b->verdict = E2BIG;
	if (klen <= tlen || strcmp(key + klen - tlen, tail))
		return 0;
	snprintf(b->o.url, sizeof(b->o.url), "%s/%.*s", b->place,
		 (int)(klen - tlen), key);
	char buf[2048 + 256];
	int err = objstore_owner_at(
	    with_options(b->o.url, b->storage, buf, sizeof(buf)), b->creds,
	    &b->o.ow);
	if (err == ENOENT || err == EINVAL)
		return 0; /* gone meanwhile, or not a marker: no volume */
	return b->verdict = err ? err : EEXIST;
}

/*
 * Refuse (printing why, 1) a storage that another volume's storage holds
 * or that holds another volume, or whose own marker names another volume
 * than old (the one a --force format replaces); 0 when it is free. For a
 * file:// pool, every directory counts. *had_owner: old's marker is there,
 * as *was says (what a failed format puts back).
 */
static int check_places(const char *name, const char *storage,
			const struct objstore_creds *creds,
			const struct meta_volume *old, int *had_owner,
			struct objstore_owner *was)
{
	struct below b = {.creds = creds, .storage = storage};
	char place[1024], buf[2048];
	struct objstore *s;
	int err;

	for (size_t i = 0;
	     !objstore_url_place(storage, i, place, sizeof(place)); i++) {
		/* a marker where ours goes: only the replaced volume's */
		err = objstore_owner_at(
		    with_options(place, storage, buf, sizeof(buf)), creds,
		    &b.o.ow);
		if (err == 0 && !(old && !strcmp(b.o.ow.uuid, old->uuid))) {
			cli_error("storage '%s' already holds volume '%s' "
				  "(uuid %s)",
				  place, b.o.ow.name, b.o.ow.uuid);
			cli_hint("give each volume a bucket or prefix of its "
				 "own (s3://HOST/BUCKET/PREFIX, file:///DIR): "
				 "volumes that share one overwrite each "
				 "other's data. If that volume is gone for "
				 "good, delete its objects "
				 "there, " OBJSTORE_OWNER_KEY " included");
			return 1;
		}
		if (err == EINVAL) {
			cli_error("storage '%s' holds an object '%s' that is "
				  "not a granary volume marker",
				  place, OBJSTORE_OWNER_KEY);
			cli_hint("use an empty bucket or prefix");
			return 1;
		}
		if (err && err != ENOENT) {
			cli_error("cannot read '%s' in storage '%s': %s",
				  OBJSTORE_OWNER_KEY, place, gr_strerror(err));
			return 1;
		}
		if (err == 0) {
			*had_owner = 1;
			*was = b.o.ow;
		}

		/* volumes below: a listing, bounded */
		b.place = place;
		err = objstore_open(with_options(place, storage, buf,
						 sizeof(buf)),
				    creds, &s);
		if (!err)
			err = objstore_list(s, "", on_listed, &b);
		objstore_close(s);
		if (b.verdict == EEXIST) {
			cli_error("storage '%s' of the new volume '%s' holds "
				  "storage '%s' of volume '%s' (uuid %s): "
				  "volumes must not nest (a scan of the outer "
				  "one's store would see the inner one's "
				  "objects as its own)",
				  storage, name, b.o.url, b.o.ow.name,
				  b.o.ow.uuid);
			cli_hint(HINT_OWN_PLACE);
			return 1;
		}
		if (b.verdict == E2BIG) {
			cli_error("storage '%s' already holds more than %d "
				  "objects: too many to check that no other "
				  "volume lies inside it",
				  storage, BELOW_MAX);
			cli_hint("pick an empty bucket or prefix");
			return 1;
		}
		if (b.verdict) {
			cli_error("cannot read '%s' to check that it is no "
				  "volume's marker: %s",
				  b.o.url, gr_strerror(b.verdict));
			return 1;
		}
		if (err) {
			cli_error("cannot list storage '%s' to check that no "
				  "other volume lies inside it: %s",
				  place, gr_strerror(err));
			if (err == OBJSTORE_EAUTH)
				cli_hint("the keys must be allowed to list the "
					 "bucket (s3:ListBucket) under the "
					 "storage's prefix");
			return 1;
		}
	}
	return 0;
}

/* Keys in the URL would end up in the settings and in `ps`: refuse them. */
static int url_has_userinfo(const char *url)
{
	const char *auth = strstr(url, "://");

	if (!auth)
		return 0;
	auth += 3;
	return memchr(auth, '@', strcspn(auth, "/")) != NULL;
}

int cmd_format(int argc, char **argv)
{
	struct meta_volume v = {0}, old = {0};
	struct objstore_creds creds = {0};
	const char *meta_url, *storage = NULL, *keyfile = NULL;
	void *secret = NULL;
	size_t secret_len = 0;
	struct objstore *store = NULL;
	struct meta *m = NULL;
	char shown[1024];
	struct objstore_owner owner;
	const struct objstore_creds *use_creds;
	struct other outer, unread;
	int unread_err = 0;
	int force = 0, store_keys = 1, exists = 0, had_owner = 0, strict = 0;
	int ret = CLI_EXIT_FAIL;
	uint64_t size;
	int c, err;

	v.block_size = BLOCK_DEFAULT;
	v.compress = CODEC_LZ4;
	v.trash_days = TRASH_DAYS_DEFAULT;
	while ((c = getopt_long(argc, argv, ":h", options, NULL)) != -1) {
		switch (c) {
		case OPT_STORAGE:
			storage = optarg;
			break;
		case OPT_BLOCK_SIZE:
			if (cli_parse_size(optarg, &size) || size < BLOCK_MIN ||
			    size > BLOCK_MAX || size % BLOCK_MIN) {
				cli_error(
				    "bad block size '%s': want 4K to 16M, "
				    "a multiple of 4K",
				    optarg);
				return CLI_EXIT_USAGE;
			}
			v.block_size = (uint32_t)size;
			break;
		case OPT_COMPRESS:
			if (!strcmp(optarg, "lz4")) {
				v.compress = CODEC_LZ4;
			} else if (!strcmp(optarg, "none")) {
				v.compress = CODEC_NONE;
			} else {
				cli_error("unknown compression '%s': want lz4 "
					  "or none",
					  optarg);
				return CLI_EXIT_USAGE;
			}
			break;
		case OPT_CAPACITY:
			if (cli_parse_size(optarg, &v.capacity)) {
				cli_error("bad capacity '%s': want a size such "
					  "as 500G or 2T",
					  optarg);
				return CLI_EXIT_USAGE;
			}
			break;
		case OPT_FORCE:
			force = 1;
			break;
		case OPT_NO_STORE_KEYS:
			store_keys = 0;
			break;
		case OPT_STRICT:
			strict = 1;
			break;
		case OPT_TRASH_DAYS:
			if (cli_trash_days_arg(optarg, &v.trash_days))
				return CLI_EXIT_USAGE;
			break;
		case OPT_ENCRYPT:
			keyfile = optarg;
			break;
		case 'h':
			return cli_usage(usage, CLI_EXIT_OK);
		default:
			return cli_bad_option(c, argv, usage);
		}
	}
	if (argc - optind != 2) {
		cli_error(argc - optind < 2 ? "META_URL and NAME are required"
					    : "too many arguments");
		return cli_usage(usage, CLI_EXIT_USAGE);
	}
	meta_url = argv[optind];
	if (!name_valid(argv[optind + 1])) {
		cli_error("bad volume name '%s': want 1 to 255 characters of "
			  "A-Z a-z 0-9 . _ -",
			  argv[optind + 1]);
		return CLI_EXIT_USAGE;
	}
	if (!storage) {
		cli_error("--storage is required");
		return cli_usage(usage, CLI_EXIT_USAGE);
	}
	if (url_has_userinfo(storage)) {
		cli_error("the storage URL must not contain credentials");
		cli_hint("put S3 keys in GRANARY_S3_ACCESS_KEY and "
			 "GRANARY_S3_SECRET_KEY");
		return CLI_EXIT_FAIL;
	}
	if (strlen(storage) >= sizeof(v.storage)) {
		cli_error("storage URL too long (%zu characters at most)",
			  sizeof(v.storage) - 1);
		return CLI_EXIT_FAIL;
	}
	snprintf(v.name, sizeof(v.name), "%s", argv[optind + 1]);
	snprintf(v.storage, sizeof(v.storage), "%s", storage);

	if (cli_secret_load(keyfile, &secret, &secret_len))
		return CLI_EXIT_FAIL;
	if (cli_meta_open(meta_url, NULL, &m)) {
		crypt_secret_free(secret, secret_len);
		return CLI_EXIT_FAIL;
	}
	meta_url_redact(meta_url, shown, sizeof(shown));

	/* Look before touching the storage: a refused format has no side
	 * effects at all. */
	err = meta_load_volume(m, &old);
	if (err == 0 || err == META_EVERSION) {
		exists = 1;
		if (!force) {
			if (err)
				cli_error("redis at '%s' already holds a "
					  "volume of format version %u (this "
					  "granary's: %u)",
					  shown, old.format_version,
					  META_FORMAT_VERSION);
			else
				cli_error("redis at '%s' already holds volume "
					  "'%s' (uuid %s)",
					  shown, old.name, old.uuid);
			cli_hint("use --force to replace it (its data objects "
				 "are not deleted), or pick another database");
			goto close_meta;
		}
	} else if (err != META_ENOVOLUME) {
		cli_error("cannot read the volume settings at '%s': %s", shown,
			  gr_strerror(err));
		goto close_meta;
	}
	if (cli_server_check(m, shown) && strict) {
		cli_error("refusing redis at '%s' (--strict): fix what the "
			  "warnings above say first",
			  shown);
		goto close_meta;
	}

	if (is_s3(storage)) {
		objstore_env_creds(&creds);
		if (store_keys && creds.session_token) {
			/* temporary keys would be kept past their expiry */
			cli_error("warning: S3 keys with a session token are "
				  "temporary: not kept in the volume settings");
			cli_hint("every mount needs them (and "
				 "its session token) in its environment");
		} else if (store_keys && creds.access_key && creds.secret_key) {
			if (strlen(creds.access_key) >= sizeof(v.access_key) ||
			    strlen(creds.secret_key) >= sizeof(v.secret_key)) {
				cli_error("S3 keys too long to store (%zu "
					  "characters at most)",
					  sizeof(v.access_key) - 1);
				cli_hint("use --no-store-keys");
				goto close_meta;
			}
			snprintf(v.access_key, sizeof(v.access_key), "%s",
				 creds.access_key);
			snprintf(v.secret_key, sizeof(v.secret_key), "%s",
				 creds.secret_key);
		}
	}
	use_creds = creds.access_key && creds.secret_key ? &creds : NULL;
	/* Before the open, which creates a missing file:// directory: none
	 * may be made inside another volume's. */
	err = find_outer(storage, use_creds, &outer, &unread, &unread_err);
	if (err == 0) {
		cli_error("storage '%s' of the new volume '%s' lies inside "
			  "storage '%s' of volume '%s' (uuid %s): volumes "
			  "must not nest (a scan of the outer one's store "
			  "would see the inner one's objects as its own)",
			  storage, v.name, outer.url, outer.ow.name,
			  outer.ow.uuid);
		cli_hint(HINT_OWN_PLACE);
		goto close_meta;
	}
	err = objstore_open(storage, use_creds, &store);
	if (!err)
		err = objstore_probe(store);
	if (err) {
		cli_error("storage '%s' is not usable: %s", storage,
			  gr_strerror(err));
		goto close_store;
	}
	if (unread_err && !unreadable(unread_err)) {
		cli_error("cannot read '%s' in storage '%s' to check that "
			  "the new volume lies inside no other: %s",
			  OBJSTORE_OWNER_KEY, unread.url,
			  gr_strerror(unread_err));
		goto close_store;
	}
	if (unread_err)
		cli_error("warning: cannot read '%s' in '%s' (%s): whether "
			  "the new volume lies inside another there is not "
			  "checked",
			  OBJSTORE_OWNER_KEY, unread.url,
			  gr_strerror(unread_err));

	/* Another volume's objects under the same keys as ours would be
	 * overwritten by ours, and one below ours would look like ours to a
	 * scan of our store: refuse another volume's marker here or below,
	 * even with --force (which replaces the volume of this database,
	 * whose marker is here). */
	if (check_places(v.name, storage, use_creds, exists ? &old : NULL,
			 &had_owner, &owner))
		goto close_store;

	err = cli_uuid(v.uuid);
	if (err) {
		cli_error("cannot generate a uuid: %s", strerror(err));
		goto close_store;
	}
	if (secret) {
		/* the volume key is not needed here: the marker, the only
		 * object format writes, is kept in the clear */
		unsigned char key[CRYPT_KEY_LEN];
		err = crypt_record_new(secret, secret_len, v.uuid, v.crypt,
				       key);
		explicit_bzero(key, sizeof(key));
		if (err) {
			cli_error("cannot make the volume key: %s",
				  gr_strerror(err));
			goto close_store;
		}
	}
	v.format_version = META_FORMAT_VERSION;
	v.created = (int64_t)time(NULL);
	struct objstore_owner mine;
	snprintf(mine.uuid, sizeof(mine.uuid), "%s", v.uuid);
	snprintf(mine.name, sizeof(mine.name), "%s", v.name);
	err = objstore_owner_put(store, &mine);
	if (err) {
		cli_error("cannot write '%s' to storage '%s': %s",
			  OBJSTORE_OWNER_KEY, storage, gr_strerror(err));
		goto close_store;
	}
	err = meta_format(m, &v, force);
	if (err) {
		/* the storage goes back to whom it belonged */
		if (had_owner)
			objstore_owner_put(store, &owner);
		else
			objstore_del(store, OBJSTORE_OWNER_KEY);
	}
	if (err == META_EEXIST) {
		cli_error("redis at '%s' already holds a volume (created "
			  "meanwhile?)",
			  shown);
		cli_hint("use --force to replace it");
		goto close_store;
	}
	if (err) {
		cli_error("cannot write the volume settings to '%s': %s", shown,
			  gr_strerror(err));
		goto close_store;
	}
	if (exists && old.name[0])
		cli_error("replaced volume '%s' (uuid %s); its data objects "
			  "in '%s' were not deleted",
			  old.name, old.uuid, old.storage);
	else if (exists)
		cli_error("replaced the volume of a newer granary; its data "
			  "objects were not deleted");
	printf("granary: formatted %svolume '%s' (uuid %s) on %s\n",
	       v.crypt[0] ? "encrypted " : "", v.name, v.uuid, v.storage);
	ret = CLI_EXIT_OK;
close_store:
	objstore_close(store);
close_meta:
	meta_close(m);
	crypt_secret_free(secret, secret_len);
	return ret;
}
