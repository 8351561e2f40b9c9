/*
 * cli.h - what the granary subcommands share: the dispatcher's view of a
 * subcommand, argument parsing (sizes, durations), error and usage
 * printing with the "granary: " prefix, and small helpers (uuid, JSON
 * strings, mount table lookups).
 *
 * Exit codes of every subcommand: 0 ok, 1 runtime error, 2 usage error.
 */
#ifndef GRANARY_CLI_H
#define GRANARY_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "lib/errors.h"

#define CLI_VERSION "0.1.0"

#define CLI_EXIT_OK    0
#define CLI_EXIT_FAIL  1
#define CLI_EXIT_USAGE 2

/* ---- subcommands (one file each: tools/cmd_<name>.c) ------------------ */
/* argv[0] is the subcommand's name; getopt starts at argv[1]. */
int cmd_format(int argc, char **argv);
int cmd_mount(int argc, char **argv);
int cmd_umount(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_warmup(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_stats(int argc, char **argv);
int cmd_snapshot(int argc, char **argv);
int cmd_version(int argc, char **argv);
int cmd_upgrade(int argc, char **argv);
int cmd_gc(int argc, char **argv);
int cmd_fsck(int argc, char **argv);
int cmd_dump(int argc, char **argv);
int cmd_load(int argc, char **argv);
int cmd_config(int argc, char **argv);
int cmd_key(int argc, char **argv);
int cmd_trash(int argc, char **argv);
int cmd_quota(int argc, char **argv);
int cmd_redact(int argc, char **argv);
int cmd_import(int argc, char **argv);

/*
 * The mount point argument of a `granary mount ...` command line (argv[0]
 * is "mount"), parsed with mount's own option table; NULL when there is
 * none. Used by umount to recognise the daemon of a mount. Not reentrant
 * (getopt); argv may be permuted.
 */
const char *mount_cmdline_mountpoint(int argc, char **argv);

/* ---- messages --------------------------------------------------------- */
/* "granary: <message>\n" on stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "hint: <message>\n" on stderr: what the user can do next. */
void cli_hint(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Print usage to stdout (status 0) or stderr; returns status. */
int cli_usage(const char *usage, int status);
/*
 * After getopt_long returned c = '?' or ':' (optstring must start with ':'
 * so that a missing value is told apart): name the offending option, print
 * the usage to stderr, return 2.
 */
int cli_bad_option(int c, char **argv, const char *usage);
/* After getopt: exactly one operand (what names it in the message) left
 * at argv[optind]? 0, or the error and the usage on stderr and 2. */
int cli_one_operand(int argc, const char *what, const char *usage);

/* ---- parsing ---------------------------------------------------------- */
/*
 * A size: digits with an optional suffix K, M, G or T (any case), each
 * optionally followed by "B" or "iB"; every multiple is a power of 1024
 * ("4M" = "4MiB" = 4194304). EINVAL if malformed, ERANGE on overflow.
 */
int cli_parse_size(const char *s, uint64_t *out);
/* Seconds, fractional allowed, optional suffix "ms", "s", "m" (minutes),
 * "h" or "d"; >= 0. */
int cli_parse_seconds(const char *s, double *out);
/* The value of a --path option, a path from the volume's root: 0 when
 * absolute, or the error and a hint printed and 2 (usage). */
int cli_volume_path_arg(const char *s);
/* A count in [min, max]. */
int cli_parse_int(const char *s, long min, long max, long *out);
/* The value of --threads (1..256) into *out: 0, or the error printed and
 * EINVAL. */
int cli_threads_arg(const char *s, int *out);
/* The value of --trash-days (0..CLI_TRASH_DAYS_MAX) into *out: 0, or the
 * error printed and EINVAL. */
#define CLI_TRASH_DAYS_MAX 3650
int cli_trash_days_arg(const char *s, uint32_t *out);

/* ---- helpers ---------------------------------------------------------- */
/* A random (version 4) UUID, 36 characters + NUL, from OpenSSL RAND_bytes.
 * EIO if the random generator fails. */
int cli_uuid(char out[37]);
/* "4 MiB", "1.5 GiB", "512 B". */
void cli_format_size(uint64_t bytes, char *buf, size_t cap);
/* s as a JSON string, quoted, escaped; invalid UTF-8 bytes are written as
 * \u00XX so the output is always valid JSON. */
void cli_json_string(FILE *f, const char *s);
/*
 * A name (a path, a tag, a message) as the text output of a listing shows
 * it, so that no name can forge lines or drive the terminal: printable
 * UTF-8 as it is, a backslash doubled, and every control character (C0,
 * DEL, C1) and byte that is no UTF-8 as a C escape, `\n`, `\t`, ... or
 * octal `\033` (ls -b's style, spaces kept). The same in a pipe as on a
 * terminal; --json output stays exact (cli_json_string). cli_escape:
 * malloc'd, NULL when out of memory; cli_print_name: written to f ("?"
 * when out of memory).
 */
char *cli_escape(const char *s);
void cli_print_name(FILE *f, const char *s);

struct meta;
struct meta_opts;
/*
 * meta_open() that prints why it failed, naming the URL (password
 * redacted) and the next step. Returns meta_open()'s result.
 */
int cli_meta_open(const char *url, const struct meta_opts *opts,
		  struct meta **out);
struct meta_attr;
/*
 * The inode a path in the volume names ("/a/b" from the volume's root;
 * empty parts and "." are skipped), with its attributes, looked up name by
 * name from the root without a mount. ENOENT, ENOTDIR (a part is not a
 * directory), or the engine's error.
 */
int cli_resolve(struct meta *m, const char *path, uint64_t *ino,
		struct meta_attr *a);

/*
 * Paths of directories known by inode (quota list, trash list), found from
 * the volume's root without a mount. A directory records its parent, not
 * its name: the name is searched for in the parent's entries, so the cost
 * is one scan of each ancestor not met before; paths found are kept here.
 * known (may be NULL) names a directory the caller knows better (an entry
 * of the trash: where it was): 1 with *parent (0: none) and *name set.
 */
struct cli_paths {
	struct meta *m;
	int (*known)(void *arg, uint64_t dir, uint64_t *parent,
		     const char **name);
	void *arg;
	struct cli_path {
		uint64_t ino;
		char *path;
	} * v; /* the paths found so far */
	size_t n, cap;
};
/* dir's path ("/" for the root), valid until cli_paths_forget; NULL when
 * it has none (a detached tree, a loop) or cannot be read. */
const char *cli_dir_path(struct cli_paths *c, uint64_t dir);
/* Forget the paths found (they changed); the struct stays usable. */
void cli_paths_forget(struct cli_paths *c);
void cli_paths_release(struct cli_paths *c);
/* "dir/name" (one '/' between), malloc'd; NULL when out of memory. */
char *cli_path_join(const char *dir, const char *name);

struct meta_volume;
/*
 * cli_meta_open() of the volume at url and its settings in *v, with url
 * redacted into shown (cap bytes, for messages). 0, or an error already
 * printed (no volume there, unreadable settings) and nothing left open.
 */
int cli_volume_open(const char *url, const struct meta_opts *opts,
		    struct meta **out, struct meta_volume *v, char *shown,
		    size_t cap);

struct meta_server;
/*
 * One "granary: warning: ..." line on stderr for each risk of the Redis
 * server s (meta_server_risks: keys it may evict, nothing kept on disk,
 * memory nearly full), each saying what to do; shown names it (a redacted
 * URL). Returns the risks found.
 */
int cli_server_warn(const struct meta_server *s, const char *shown);
/* meta_server_info then cli_server_warn, for format and mount: a server
 * that cannot tell is no error (nothing is printed, 0 returned). */
int cli_server_check(struct meta *m, const char *shown);

struct objstore;
/*
 * The store of volume v with the keys a mount would use (the
 * environment's, else the volume's), its marker checked: a tool must
 * never hold a volume's metadata against another volume's objects, so a
 * store whose marker names another volume is refused (EEXIST), and one
 * with no marker too when marker_needed (the message's end: why). 0, or
 * an error already printed and nothing left open.
 */
int cli_volume_store(const struct meta_volume *v, const char *marker_needed,
		     struct objstore **out);
/*
 * Encryption at rest (fs/store/crypt.h). cli_volume_store() seals and
 * opens the objects of an encrypted volume with the volume key unwrapped
 * by the secret of the environment (GRANARY_ENCRYPT_KEY_FILE or
 * GRANARY_ENCRYPT_PASSPHRASE): without it, or with a wrong one, the tool
 * is refused; so is a secret given for a volume that is not encrypted
 * (CRYPT_EPLAIN, as a mount). cli_secret_load() is the secret of a flag's key file (path)
 * or of the environment: 0 with *secret NULL when none is given, or an
 * error printed. cli_key_hint() prints the hint of a key error, if any.
 */
int cli_secret_load(const char *path, void **secret, size_t *n);
void cli_key_hint(int err);

/*
 * The absolute, canonical form of path without resolving its last
 * component (realpath of the parent + the name): it never stats what is
 * mounted there, so a dead or hung FUSE mount cannot block us.
 */
int cli_abspath_parent(const char *path, char *out, size_t cap);

/*
 * Look up the topmost mount at the absolute path mp in /proc/self/mountinfo:
 * 1 if found (fstype and source copied out, e.g. "fuse.granary" and
 * "granary"), 0 if nothing is mounted there, or -1 if the table is unreadable.
 */
int cli_mount_lookup(const char *mp, char *fstype, size_t fstype_cap,
		     char *source, size_t source_cap);
/* The mount point of the mount that holds the absolute, canonical path
 * (the longest mount point that is a prefix of it) into mp; -1 if the
 * table is unreadable. */
int cli_mount_of(const char *path, char *mp, size_t cap);
/* Is path on a FUSE mount at all? (granary's own checks come from its
 * virtual xattrs: another FUSE file system answers them with an error.) */
int cli_on_fuse(const char *path);
/* Is a mount with this fstype/source one of ours? */
int cli_is_granary_mount(const char *fstype, const char *source);

#endif
