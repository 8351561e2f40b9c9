/*
 * fs.h - the FUSE client: mount a volume and serve it until unmounted.
 *
 * fs_mount() opens the metadata engine and the object store named by the
 * volume settings, registers a session, mounts with the low-level FUSE API
 * (multithreaded) and serves requests. It returns when the file system is
 * unmounted (or a SIGTERM/SIGINT arrives), after flushing every buffered
 * write and closing the session.
 */
#ifndef GRANARY_FS_H
#define GRANARY_FS_H

#include <stddef.h>
#include <stdint.h>

/* 120 s: a gateway restart of 30 s, a failover that takes a minute and
 * the reconnects after either cost a running read or write a pause, not
 * an EIO; a store that stays away fails requests within two minutes. */
#define FS_IO_RETRY_WINDOW 120
/* 60 s: a Redis restarted (an AOF of a few GB loaded), a script that ran
 * long, a master failed over cost a metadata call a pause, not an EIO. */
#define FS_META_RETRY_WINDOW 60

struct fs_opts {
	const char *meta_url;
	const char *mountpoint;
	const char *subdir;    /* mount this directory of the volume as root */
	const char *fuse_opts; /* extra -o options, comma separated, or NULL */
	int read_only;
	int allow_other;
	double attr_timeout;   /* seconds; < 0: default (1, read-only 3600) */
	double entry_timeout;  /* seconds; < 0: default (1, read-only 3600) */
	int max_uploads;       /* uploader threads; 0 = 8 */
	size_t buffer_size;    /* write buffer budget; 0 = 300 MiB */
	size_t mem_cache_size; /* memory block cache; 0 = 256 MiB */
	int debug;	       /* log FUSE requests */
	const char *cache_dir; /* disk cache dirs "DIR[:DIR...]"; NULL: the
				  default (/var/cache/granary, or
				  ~/.cache/granary when not root) */
	uint64_t cache_size;   /* disk cache bytes; 0 = no disk cache;
				  UINT64_MAX: the default (10 GiB) */
	double free_ratio;     /* keep this fraction of the cache disk
				  free; < 0: the default (0.1) */
	int prefetch;	       /* prefetch threads; < 0: default 4; 0 off */
	int io_retry_window;   /* seconds a store request rides out an
				  outage; < 0: FS_IO_RETRY_WINDOW */
	int meta_retry_window; /* seconds a metadata call that did not run
				  waits for Redis (meta_set_retry_window);
				  < 0: FS_META_RETRY_WINDOW */
	uint32_t pack_max;     /* pack slices up to this size; 0: no packing */
	uint32_t pack_size;    /* seal packs at this size; 0: 4 MiB */
	int pack_window_ms;    /* seal a pack this long after its first
				  frame; < 0: default (10 ms, writeback 2 s) */
	int writeback;	       /* stage packs and blocks on the cache disk,
				  upload them in the background */
	int no_compact;	       /* no background compaction of chunks */
	uint64_t stage_size;   /* writeback: bytes of big files' blocks
				  staged at most; 0: 1 GiB */
	uint64_t plan_window;  /* the epoch plans' windows together (plan.h);
				  0: a quarter of the disk cache, at most
				  4 GiB */
	uint64_t direct_read;  /* read-only opens of files this long or
				  longer bypass the page cache (where the
				  kernel keeps shared mmap working); 0: the
				  default (64 MiB); UINT64_MAX: never */

	int64_t backup_interval; /* seconds between metadata backups into
				    the store (fs/vfs/backupd.h); < 0: the
				    default (1 h); 0: none */
	unsigned backup_keep;	 /* backups kept; 0: the default (12) */
	/* read-only mounts: bytes of names cached; 0: the default (512 MiB,
	 * see namecache.h) */
	uint64_t name_cache_size;
	/* the user's secret for an encrypted volume (crypt_secret_load),
	 * or NULL: none given */
	const void *secret;
	size_t secret_len;
	/* where to serve /metrics (Prometheus): "HOST:PORT" (":PORT" is
	 * loopback; port 0: any free one); NULL: FS_METRICS_DEFAULT, or the
	 * next free of its FS_METRICS_TRIES ports; "off": nowhere. A port in
	 * use costs the metrics, with a warning, not the mount. */
	const char *metrics_addr;
	const char *access_log; /* one line per operation; NULL: none */

	/* a cache group (docs/operations.md "Cache groups"): the mounts of
	 * the volume that name the same group share their disk caches.
	 * NULL: none. Needs a disk cache (its size is the node's weight). */
	const char *cache_group;
	/* "HOST:PORT" the other members reach this one at; it listens there
	 * (port 0: any free one, and the port chosen is the one published).
	 * HOST must be an address or name of this node, not a wildcard.
	 * Required in a group unless group_take_only. */
	const char *group_addr;
	int group_take_only;   /* read from the group; serve and own nothing */
	int group_keep_copies; /* also keep in the local cache what peers
				  gave */
};

#define FS_METRICS_DEFAULT "127.0.0.1:9567"
#define FS_METRICS_TRIES   10

/*
 * Is addr something --metrics takes ("off", or HOST:PORT with a host that
 * resolves)? 0, or EINVAL with why (cap bytes) saying what is wrong.
 */
int fs_metrics_addr_check(const char *addr, char *why, size_t cap);

/*
 * Are the cache group options of o consistent (a name of 1 to 64 of
 * [A-Za-z0-9._-]; --group-addr HOST:PORT with a host that resolves and is
 * not a wildcard, given unless take-only and only then; a disk cache;
 * the other group options only with a group)? 0, or EINVAL with why.
 */
int fs_group_opts_check(const struct fs_opts *o, char *why, size_t cap);

/*
 * ready(arg, err, msg) is called exactly once: err 0 when the mount is up
 * (the caller may then detach from the terminal), or the error and a
 * message (already without secrets) when mounting failed. Returns 0 after a
 * clean unmount, or an error code (positive errno, or a META_E* or OBJSTORE_E*
 * code).
 */
int fs_mount(const struct fs_opts *o,
	     void (*ready)(void *arg, int err, const char *msg), void *arg);

#endif
