/*
 * cli.c - helpers shared by the granary subcommands: messages, usage,
 * parsing of sizes and durations, uuids, JSON strings, and the mount table.
 * Everything here prints for a human at a terminal; nothing here is used by
 * the file system itself.
 */
#include "tools/cli.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>

#include <openssl/rand.h>

#include "fs/store/codec.h"
#include "fs/store/crypt.h"
#include "fs/store/objstore.h"
#include "fs/store/owner.h"
#include "meta/meta.h"
#include "meta/meta_scan.h"
#include "meta/meta_server.h"
#include "meta/meta_volume.h"

/* ---- messages ---------------------------------------------------------- */

void cli_error(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout); /* keep the order of what the user sees */
	fputs("granary: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

void cli_hint(const char *fmt, ...)
{
	va_list ap;

	fputs("hint: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int cli_usage(const char *usage, int status)
{
	fputs(usage, status ? stderr : stdout);
	return status;
}

int cli_bad_option(int c, char **argv, const char *usage)
{
	/* getopt leaves optind just past the offending word. */
	const char *word = optind > 0 ? argv[optind - 1] : "";
	int is_long = word[0] == '-' && word[1] == '-';

	if (c == ':')
		cli_error("option '%s' needs a value",
			  is_long ? word : (char[]){'-', (char)optopt, 0});
	else if (is_long && optopt)
		cli_error("option '%s' takes no value", word);
	else if (is_long)
		cli_error("unknown option '%s'", word);
	else
		cli_error("unknown option '-%c'", optopt);
	return cli_usage(usage, CLI_EXIT_USAGE);
}

int cli_one_operand(int argc, const char *what, const char *usage)
{
	if (argc - optind == 1)
		return 0;
	if (argc - optind < 1)
		cli_error("%s is required", what);
	else
		cli_error("too many arguments");
	return cli_usage(usage, CLI_EXIT_USAGE);
}

/* ---- parsing ----------------------------------------------------------- */

int cli_parse_size(const char *s, uint64_t *out)
{
	unsigned shift = 0;
	uint64_t v = 0;
	const char *p = s;

	if (!s || !isdigit((unsigned char)*p))
		return EINVAL;
	for (; isdigit((unsigned char)*p); p++) {
		unsigned d = (unsigned)(*p - '0');
		if (v > (UINT64_MAX - d) / 10)
			return ERANGE;
		v = v * 10 + d;
	}
	switch (toupper((unsigned char)*p)) {
	case 'K':
		shift = 10;
		break;
	case 'M':
		shift = 20;
		break;
	case 'G':
		shift = 30;
		break;
	case 'T':
		shift = 40;
		break;
	case 'B':
	case '\0':
		break;
	default:
		return EINVAL;
	}
	if (shift) {
		p++;
		if (p[0] == 'i' && p[1] == 'B')
			p += 2;
		else if (p[0] == 'B' || p[0] == 'b')
			p++;
	} else if (*p) {
		p++; /* a bare "B" */
	}
	if (*p)
		return EINVAL;
	if (shift && v > (UINT64_MAX >> shift))
		return ERANGE;
	*out = v << shift;
	return 0;
}

int cli_parse_seconds(const char *s, double *out)
{
	char *end;
	double v;

	if (!s || !*s || isspace((unsigned char)*s) || *s == '-' || *s == '+')
		return EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (end == s || errno || !isfinite(v) || v < 0)
		return errno == ERANGE ? ERANGE : EINVAL;
	if (!strcmp(end, "ms"))
		v /= 1000;
	else if (!strcmp(end, "m"))
		v *= 60;
	else if (!strcmp(end, "h"))
		v *= 3600;
	else if (!strcmp(end, "d"))
		v *= 86400;
	else if (*end && strcmp(end, "s"))
		return EINVAL;
	if (!isfinite(v))
		return ERANGE;
	*out = v;
	return 0;
}

int cli_threads_arg(const char *s, int *out)
{
	long n;

	if (cli_parse_int(s, 1, 256, &n)) {
		cli_error("bad --threads '%s': a number from 1 to 256", s);
		return EINVAL;
	}
	*out = (int)n;
	return 0;
}

int cli_trash_days_arg(const char *s, uint32_t *out)
{
	long n;

	if (cli_parse_int(s, 0, CLI_TRASH_DAYS_MAX, &n)) {
		cli_error("bad --trash-days '%s': a number of days from 0 (no "
			  "trash) to %d",
			  s, CLI_TRASH_DAYS_MAX);
		return EINVAL;
	}
	*out = (uint32_t)n;
	return 0;
}

int cli_volume_path_arg(const char *s)
{
	if (s[0] == '/')
		return 0;
	cli_error("--path '%s' is not absolute", s);
	cli_hint("give the path from the volume's root, as '/%s'", s);
	return CLI_EXIT_USAGE;
}

int cli_parse_int(const char *s, long min, long max, long *out)
{
	char *end;
	long v;

	if (!s || !*s || isspace((unsigned char)*s))
		return EINVAL;
	errno = 0;
	v = strtol(s, &end, 10);
	if (end == s || *end)
		return EINVAL;
	if (errno || v < min || v > max)
		return ERANGE;
	*out = v;
	return 0;
}

/* ---- helpers ----------------------------------------------------------- */

int cli_uuid(char out[37])
{
	unsigned char b[16];

	if (RAND_bytes(b, sizeof(b)) != 1)
		return EIO;
	b[6] = (unsigned char)((b[6] & 0x0f) | 0x40); /* version 4 */
	b[8] = (unsigned char)((b[8] & 0x3f) | 0x80); /* RFC 4122 variant */
	snprintf(out, 37,
		 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
		 "%02x%02x%02x%02x%02x%02x",
		 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9],
		 b[10], b[11], b[12], b[13], b[14], b[15]);
	return 0;
}

void cli_format_size(uint64_t bytes, char *buf, size_t cap)
{
	static const char *const unit[] = {"B",	  "KiB", "MiB", "GiB",
					   "TiB", "PiB", "EiB"};
	unsigned u = 0;
	double v = (double)bytes;

	while (v >= 1024 && u + 1 < sizeof(unit) / sizeof(unit[0])) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, cap, "%llu B", (unsigned long long)bytes);
	else if (v == floor(v))
		snprintf(buf, cap, "%.0f %s", v, unit[u]);
	else
		snprintf(buf, cap, "%.1f %s", v, unit[u]);
}

/* Length of the valid UTF-8 sequence at s, or 0 if it is not one. */
static size_t utf8_seq_len(const unsigned char *s)
{
	size_t n;
	uint32_t cp;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		n = 2, cp = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		n = 3, cp = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		n = 4, cp = s[0] & 0x07;
	else
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0; /* also stops at the NUL */
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
	    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

void cli_json_string(FILE *f, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;

	fputc('"', f);
	while (s && *s) {
		size_t n = utf8_seq_len(s);
		if (n == 1 && *s == '"')
			fputs("\\\"", f);
		else if (n == 1 && *s == '\\')
			fputs("\\\\", f);
		else if (n == 1 && *s == '\n')
			fputs("\\n", f);
		else if (n == 1 && *s == '\t')
			fputs("\\t", f);
		else if (n == 1 && (*s < 0x20 || *s == 0x7f))
			fprintf(f, "\\u%04x", *s);
		else if (n == 0)
			fprintf(f, "\\u%04x", *s); /* byte as Latin-1 */
		else
			fwrite(s, 1, n, f);
		s += n ? n : 1;
	}
	fputc('"', f);
}

/* The C escape of a control byte c (\n, ...), or 0 when it has none. */
static char escape_letter(unsigned char c)
{
	static const char from[] = "\a\b\f\n\r\t\v", to[] = "abfnrtv";
	const char *p = c ? strchr(from, c) : NULL;
	return p ? to[p - from] : 0;
}

char *cli_escape(const char *str)
{
	const unsigned char *s = (const unsigned char *)(str ? str : "");
	char *out = malloc(4 * strlen((const char *)s) + 1), *w = out;

	while (out && *s) {
		size_t n = utf8_seq_len(s), k;
		/* C1 controls (U+0080..U+009F: CSI is U+009B) are escaped
		 * as the bytes that are no character */
		int bad = n == 0 || (n == 1 && (*s < 0x20 || *s == 0x7f)) ||
			  (n == 2 && s[0] == 0xc2 && s[1] < 0xa0);
		if (n == 1 && *s == '\\') {
			*w++ = '\\';
			*w++ = '\\';
		} else if (!bad) {
			memcpy(w, s, n);
			w += n;
		}
		for (k = 0; bad && k < (n ? n : 1); k++) {
			char l = escape_letter(s[k]);
			w += l ? sprintf(w, "\\%c", l)
			       : sprintf(w, "\\%03o", s[k]);
		}
		s += n ? n : 1;
	}
	if (out)
		*w = '\0';
	return out;
}

void cli_print_name(FILE *f, const char *s)
{
	char *e = cli_escape(s);

	fputs(e ? e : "?", f);
	free(e);
}

int cli_meta_open(const char *url, const struct meta_opts *opts,
		  struct meta **out)
{
	char shown[1024];
	int err = meta_open(url, opts, out);

	if (!err)
		return 0;
	meta_url_redact(url, shown, sizeof(shown));
	switch (err) {
	case META_EURL:
		cli_error("malformed metadata URL '%s': expected "
			  "redis://[:PASSWORD@]HOST[:PORT]/DB, "
			  "redis://[:PASSWORD@]MASTER,SENTINEL[:PORT],.../DB "
			  "or unix:///PATH/redis.sock?db=N",
			  shown);
		break;
	case META_ESENTINEL:
		cli_error("no sentinel of '%s' answered", shown);
		cli_hint("are redis-sentinel running there, and the hosts and "
			 "ports right (26379 unless given)? A password for "
			 "them goes in GRANARY_SENTINEL_PASSWORD");
		break;
	case META_ENOMASTER: {
		const char *name = strstr(shown, "://");
		name = strrchr(name, '@') ? strrchr(name, '@') + 1 : name + 3;
		cli_error("the sentinels of '%s' know no master named "
			  "'%.*s'",
			  shown, (int)strcspn(name, ","), name);
		cli_hint("the name is the one of 'sentinel monitor NAME' in "
			 "sentinel.conf (redis-cli -p 26379 SENTINEL MASTERS)");
		break;
	}
	case META_EUNREACH:
		cli_error(
		    "cannot reach redis at '%s' (is redis-server running, "
		    "and is the URL right?)",
		    shown);
		break;
	case META_EAUTH:
		cli_error("redis at '%s' refused the password (give it in the "
			  "URL or in GRANARY_META_PASSWORD)",
			  shown);
		break;
	default:
		cli_error("cannot open metadata at '%s': %s", shown,
			  gr_strerror(err));
	}
	return err;
}

int cli_resolve(struct meta *m, const char *path, uint64_t *ino,
		struct meta_attr *a)
{
	char *copy = strdup(path), *save = NULL;
	int err;

	if (!copy)
		return ENOMEM;
	*ino = META_ROOT_INO;
	err = meta_getattr(m, *ino, a);
	for (char *p = strtok_r(copy, "/", &save); p && !err;
	     p = strtok_r(NULL, "/", &save)) {
		if (!strcmp(p, "."))
			continue;
		if (a->type != META_DIR)
			err = ENOTDIR;
		else
			err = meta_lookup(m, *ino, p, ino, a);
	}
	free(copy);
	return err;
}

/* ---- directories' paths ------------------------------------------------ */

char *cli_path_join(const char *dir, const char *name)
{
	size_t a = strlen(dir), b = strlen(name);
	char *p = malloc(a + b + 2);

	if (p)
		snprintf(p, a + b + 2, "%s%s%s", dir,
			 a && dir[a - 1] == '/' ? "" : "/", name);
	return p;
}

struct name_find {
	uint64_t ino;
	char *name;
};

#define NAME_FOUND (-1000000) /* stops meta_scan_dir; no engine error */

static int name_match(void *arg, const struct meta_scan_dirent *e)
{
	struct name_find *f = arg;

	if (e->corrupt || e->ino != f->ino)
		return 0;
	f->name = strdup(e->name);
	return f->name ? NAME_FOUND : ENOMEM;
}

/* The path kept as dir's (path malloc'd, taken; may be NULL). */
static const char *path_keep(struct cli_paths *c, uint64_t dir, char *path)
{
	if (path && c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 16;
		void *p = realloc(c->v, cap * sizeof *c->v);
		if (!p) {
			free(path);
			return NULL;
		}
		c->v = p;
		c->cap = cap;
	}
	if (path)
		c->v[c->n++] = (struct cli_path){dir, path};
	return path;
}

static const char *dir_path(struct cli_paths *c, uint64_t dir, int depth)
{
	struct name_find f = {dir, NULL};
	struct meta_attr a;
	const char *up, *name;
	uint64_t parent;

	if (dir == META_ROOT_INO)
		return "/";
	for (size_t i = 0; i < c->n; i++)
		if (c->v[i].ino == dir)
			return c->v[i].path;
	if (depth > 4096)
		return NULL; /* a loop: no path */
	if (c->known && c->known(c->arg, dir, &parent, &name)) {
		up = parent ? dir_path(c, parent, depth + 1) : NULL;
		return up ? path_keep(c, dir, cli_path_join(up, name)) : NULL;
	}
	if (meta_getattr(c->m, dir, &a) || a.type != META_DIR || !a.parent ||
	    !(up = dir_path(c, a.parent, depth + 1)))
		return NULL;
	if (meta_scan_dir(c->m, a.parent, name_match, &f) != NAME_FOUND)
		return NULL;
	const char *p = path_keep(c, dir, cli_path_join(up, f.name));
	free(f.name);
	return p;
}

const char *cli_dir_path(struct cli_paths *c, uint64_t dir)
{
	return dir_path(c, dir, 0);
}

void cli_paths_forget(struct cli_paths *c)
{
	for (size_t i = 0; i < c->n; i++)
		free(c->v[i].path);
	c->n = 0;
}

void cli_paths_release(struct cli_paths *c)
{
	cli_paths_forget(c);
	free(c->v);
	c->v = NULL;
	c->cap = 0;
}

int cli_volume_open(const char *url, const struct meta_opts *opts,
		    struct meta **out, struct meta_volume *v, char *shown,
		    size_t cap)
{
	int err = cli_meta_open(url, opts, out);

	if (err)
		return err;
	meta_url_redact(url, shown, cap);
	err = meta_load_volume(*out, v);
	if (err == META_ENOVOLUME) {
		cli_error("no granary volume in redis at '%s'", shown);
		cli_hint("create one with 'granary format'");
	} else if (err) {
		cli_error("cannot read the volume settings at '%s': %s", shown,
			  gr_strerror(err));
	}
	if (err) {
		meta_close(*out);
		*out = NULL;
	}
	return err;
}

int cli_server_warn(const struct meta_server *s, const char *shown)
{
	int risks = meta_server_risks(s);
	char used[32], max[32];

	if (risks & META_RISK_EVICT)
		cli_error("warning: redis at '%s' may evict keys "
			  "(maxmemory-policy %s), and an evicted key is "
			  "metadata lost: set maxmemory-policy noeviction",
			  shown, s->policy);
	if (risks & META_RISK_NOPERSIST)
		cli_error("warning: redis at '%s' keeps nothing on disk "
			  "(appendonly no, no save points): a restart loses "
			  "the volume; set appendonly yes",
			  shown);
	if (risks & META_RISK_FULL) {
		cli_format_size(s->used_memory, used, sizeof used);
		cli_format_size(s->maxmemory, max, sizeof max);
		cli_error("warning: redis at '%s' uses %d%% of its maxmemory "
			  "(%s of %s), and when full it refuses every change: "
			  "raise maxmemory",
			  shown, (int)(s->used_memory * 100 / s->maxmemory),
			  used, max);
	}
	return risks;
}

int cli_server_check(struct meta *m, const char *shown)
{
	struct meta_server s;

	if (meta_server_info(m, &s))
		return 0;
	return cli_server_warn(&s, shown);
}

#define BAD_SECRET                                                             \
	"not a usable secret (empty, shorter than 8 bytes or longer than "     \
	"4096)"

int cli_secret_load(const char *path, void **secret, size_t *n)
{
	int err = crypt_secret_load(path, secret, n);

	if (err == CRYPT_ENOKEY) {
		*secret = NULL;
		*n = 0;
		return 0;
	}
	if (err && path)
		cli_error("cannot load the encryption key from '%s': %s", path,
			  err == EINVAL ? BAD_SECRET : gr_strerror(err));
	else if (err)
		cli_error("cannot load the encryption key of the environment "
			  "(GRANARY_ENCRYPT_KEY_FILE or "
			  "GRANARY_ENCRYPT_PASSPHRASE): %s",
			  err == EINVAL ? BAD_SECRET : gr_strerror(err));
	return err;
}

void cli_key_hint(int err)
{
	if (err == CRYPT_EKEY)
		cli_hint("give the key file the volume was formatted (or last "
			 "`granary key change`d) with: --encrypt-key FILE, "
			 "GRANARY_ENCRYPT_KEY_FILE or "
			 "GRANARY_ENCRYPT_PASSPHRASE");
	else if (err == CRYPT_ENOKEY)
		cli_hint("the volume was formatted with --encrypt: give its "
			 "key file (GRANARY_ENCRYPT_KEY_FILE=FILE)");
	else if (err == CRYPT_EPLAIN)
		cli_hint(
		    "a key for another volume? give none (no "
		    "--encrypt-key, GRANARY_ENCRYPT_KEY_FILE or "
		    "GRANARY_ENCRYPT_PASSPHRASE); if this volume is meant "
		    "to be encrypted, its setting 'crypt' is gone: restore "
		    "its metadata from a dump you trust");
}

/* Put the sealing store of encrypted volume v over *s (which it then
 * owns): 0, or an error printed and *s closed. A secret given for a
 * volume that is not encrypted is refused, as a mount refuses it. */
static int volume_crypt(const struct meta_volume *v, struct objstore **s)
{
	unsigned char key[CRYPT_KEY_LEN];
	void *secret;
	size_t n;
	int err = cli_secret_load(NULL, &secret, &n);

	if (err)
		goto close;
	if (!v->crypt[0]) {
		int given = secret != NULL;
		crypt_secret_free(secret, n);
		if (!given)
			return 0;
		err = CRYPT_EPLAIN;
		cli_error("volume '%s': %s", v->name, gr_strerror(err));
		cli_key_hint(err);
		goto close;
	}
	if (!secret) {
		err = CRYPT_ENOKEY;
		cli_error("volume '%s': %s", v->name, gr_strerror(err));
		cli_key_hint(err);
		goto close;
	}
	err = crypt_record_open(v->crypt, secret, n, v->uuid, key);
	crypt_secret_free(secret, n);
	if (err) {
		cli_error("volume '%s': %s", v->name,
			  err == EINVAL ? "its key record (setting 'crypt') "
					  "is damaged"
					: gr_strerror(err));
		cli_key_hint(err);
		goto close;
	}
	err = objstore_crypt_open(*s, key, s);
	explicit_bzero(key, sizeof(key));
	if (err)
		cli_error("cannot set up encryption: %s", gr_strerror(err));
	return err; /* on failure the store is closed already */
close:
	objstore_close(*s);
	*s = NULL;
	return err;
}

int cli_volume_store(const struct meta_volume *v, const char *marker_needed,
		     struct objstore **out)
{
	struct objstore_creds c = {0};
	struct objstore_owner ow;
	int err;

	if (objstore_env_creds(&c) && v->access_key[0] && v->secret_key[0]) {
		c.access_key = v->access_key;
		c.secret_key = v->secret_key;
	}
	err = objstore_open(v->storage, c.access_key ? &c : NULL, out);
	if (err) {
		cli_error("cannot open storage '%s': %s", v->storage,
			  gr_strerror(err));
		return err;
	}
	err = objstore_owner_get(*out, &ow);
	if (!err && strcmp(ow.uuid, v->uuid)) {
		cli_error("storage '%s' belongs to another volume: it holds "
			  "volume '%s' (uuid %s), not '%s' (uuid %s)",
			  v->storage, ow.name, ow.uuid, v->name, v->uuid);
		err = EEXIST;
	} else if (err == ENOENT && marker_needed) {
		cli_error("storage '%s' has no volume marker (%s): %s",
			  v->storage, OBJSTORE_OWNER_KEY, marker_needed);
		cli_hint("mount the volume read-write once: that writes the "
			 "marker");
	} else if (err == ENOENT) {
		err = 0;
	} else if (err) {
		cli_error("storage '%s' is not usable: %s", v->storage,
			  gr_strerror(err));
	}
	if (err) {
		objstore_close(*out);
		*out = NULL;
		return err;
	}
	return volume_crypt(v, out);
}

/* ---- paths and the mount table ---------------------------------------- */

int cli_abspath_parent(const char *path, char *out, size_t cap)
{
	char *copy, *slash, *name, *dir, *real;
	int err = 0;

	if (!path || !*path)
		return ENOENT;
	copy = strdup(path);
	if (!copy)
		return ENOMEM;
	/* Strip trailing slashes ("mnt/" names "mnt"). */
	for (size_t n = strlen(copy); n > 1 && copy[n - 1] == '/'; n--)
		copy[n - 1] = '\0';
	slash = strrchr(copy, '/');
	if (!slash) {
		dir = ".";
		name = copy;
	} else if (slash == copy) {
		dir = "/";
		name = slash + 1;
	} else {
		*slash = '\0';
		dir = copy;
		name = slash + 1;
	}
	/* "." and ".." must be resolved, and "/" has no name: fall back. */
	if (!*name || !strcmp(name, ".") || !strcmp(name, "..")) {
		real = realpath(path, NULL);
		name = NULL;
	} else {
		real = realpath(dir, NULL);
	}
	if (!real) {
		err = errno;
		goto free_copy;
	}
	if (!name)
		err = snprintf(out, cap, "%s", real) >= (int)cap ? ENAMETOOLONG
								 : 0;
	else
		err = snprintf(out, cap, "%s%s%s", real,
			       strcmp(real, "/") ? "/" : "", name) >= (int)cap
			  ? ENAMETOOLONG
			  : 0;
	free(real);
free_copy:
	free(copy);
	return err;
}

/* Decode mountinfo's octal escapes (\040 for a space...) in place. */
static void unescape_octal(char *s)
{
	char *w = s;

	for (char *r = s; *r; r++) {
		if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' &&
		    r[2] <= '7' && r[3] >= '0' && r[3] <= '7') {
			*w++ = (char)((r[1] - '0') << 6 | (r[2] - '0') << 3 |
				      (r[3] - '0'));
			r += 3;
		} else {
			*w++ = *r;
		}
	}
	*w = '\0';
}

/* Call fn(point, fstype, source, arg) for each line of
 * /proc/self/mountinfo, in order (later lines are mounted on top of
 * earlier ones). -1 if the table is unreadable. */
static int mountinfo_each(void (*fn)(const char *, const char *, const char *,
				     void *),
			  void *arg)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL;
	size_t cap = 0;

	if (!f)
		return -1;
	while (getline(&line, &cap, f) > 0) {
		char *save, *tok, *point = NULL, *type = NULL, *src = NULL;
		int field = 0, dash = 0;

		line[strcspn(line, "\n")] = '\0';
		for (tok = strtok_r(line, " ", &save); tok;
		     tok = strtok_r(NULL, " ", &save), field++) {
			if (field == 4)
				point = tok;
			else if (!dash && field > 5 && !strcmp(tok, "-"))
				dash = field;
			else if (dash && field == dash + 1)
				type = tok;
			else if (dash && field == dash + 2)
				src = tok;
		}
		if (!point || !type || !src)
			continue;
		unescape_octal(point);
		unescape_octal(src);
		fn(point, type, src, arg);
	}
	free(line);
	fclose(f);
	return 0;
}

struct mount_find {
	const char *path;
	char *a, *b; /* what is copied out: fstype and source, or the point */
	size_t acap, bcap;
	size_t best; /* length of the longest point matched so far + 1 */
};

static void match_point(const char *point, const char *type, const char *src,
			void *arg)
{
	struct mount_find *m = arg;

	if (strcmp(point, m->path))
		return;
	snprintf(m->a, m->acap, "%s", type);
	snprintf(m->b, m->bcap, "%s", src);
	m->best = 1;
}

int cli_mount_lookup(const char *mp, char *fstype, size_t fstype_cap,
		     char *source, size_t source_cap)
{
	struct mount_find m = {mp, fstype, source, fstype_cap, source_cap, 0};

	if (mountinfo_each(match_point, &m))
		return -1;
	return m.best != 0;
}

static void match_prefix(const char *point, const char *type, const char *src,
			 void *arg)
{
	struct mount_find *m = arg;
	size_t n = strlen(point);

	(void)type;
	(void)src;
	if (!strcmp(point, "/"))
		n = 0; /* a prefix of every path */
	else if (strncmp(point, m->path, n) ||
		 (m->path[n] != '/' && m->path[n] != '\0'))
		return;
	if (n + 1 >= m->best) {
		snprintf(m->a, m->acap, "%s", n ? point : "/");
		m->best = n + 1;
	}
}

int cli_mount_of(const char *path, char *mp, size_t cap)
{
	struct mount_find m = {path, mp, NULL, cap, 0, 0};

	if (mountinfo_each(match_prefix, &m) || !m.best)
		return -1;
	return 0;
}

#define FUSE_SUPER_MAGIC 0x65735546

int cli_on_fuse(const char *path)
{
	struct statfs sf;
	return statfs(path, &sf) == 0 && sf.f_type == FUSE_SUPER_MAGIC;
}

int cli_is_granary_mount(const char *fstype, const char *source)
{
	return !strcmp(fstype, "fuse.granary") ||
	       (!strncmp(fstype, "fuse", 4) && !strcmp(source, "granary"));
}
