/*
 * groupd.c - a mount's membership of its cache group (groupd.h): the node
 * id file, the group store over the disk cache, join, refresh and leave,
 * warmup's fan-out to the owners, and the check of the mount's group
 * options (fs.h).
 *
 * The refresher's one rule: the members the metadata lists are the ones
 * the group store places keys on. A listing that fails (Redis away)
 * changes nothing: the last members stay, and a member that is down costs
 * readers a bounded wait each (group.h), not an error. A listing without
 * this node (its session was cleaned away as dead, and came back) is
 * answered by joining again.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/fs.h"
#include "fs/store/group.h"
#include "fs/store/peer.h"
#include "fs/vfs/groupd.h"
#include "fs/vfs/vfs_int.h"
#include "lib/errors.h"
#include "lib/fsutil.h"
#include "lib/log.h"
#include "lib/workq.h"
#include "meta/meta_group.h"
#include "meta/meta_volume.h"

struct groupd {
	struct fs *fs;
	struct objstore *store; /* the group store, in fs->store's stack */
	char name[META_GROUP_NAME_MAX + 1];
	char path[PATH_MAX + 32]; /* the node id file */
	uint64_t node;
	uint64_t weight; /* 0: takes only */
	unsigned char secret[META_GROUP_SECRET];
	struct workq *q; /* groupd_keys' jobs */

	pthread_t th;
	int running;
	pthread_mutex_t lock; /* leaf */
	pthread_cond_t cond;  /* stopping was set */
	int stopping;	      /* protected by lock */

	/* the refresher's own (groupd_start's before it runs, groupd_close's
	 * after it stopped) */
	int joined;	/* joined once at least: leave at close */
	int waiting;	/* the node is held by a dead mount's session */
	int failing;	/* the last listing failed (said once) */
	uint64_t *seen; /* the nodes of the last listing, sorted */
	size_t nseen;
};

const char *groupd_name(const struct groupd *g)
{
	return g->name;
}

uint64_t groupd_node(const struct groupd *g)
{
	return g->node;
}

/* ---- the options (fs.h) ----------------------------------------------- */

static int name_ok(const char *g)
{
	size_t n =
	    strspn(g, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
		      "0123456789._-");
	return n >= 1 && n <= META_GROUP_NAME_MAX && !g[n];
}

/* Is a the wildcard of its family (0.0.0.0, ::)? */
static int wildcard(const struct sockaddr *a)
{
	if (a->sa_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		       htonl(INADDR_ANY);
	if (a->sa_family == AF_INET6)
		return IN6_IS_ADDR_UNSPECIFIED(
		    &((const struct sockaddr_in6 *)a)->sin6_addr);
	return 0;
}

/* "HOST:PORT" or "[V6]:PORT", HOST a concrete address or a name of one. */
static int addr_check(const char *addr, char *why, size_t cap)
{
	const char *colon = strrchr(addr, ':'), *h = addr;
	char host[META_GROUP_ADDR_MAX], *end;
	size_t hl;

	if (!colon) {
		snprintf(why, cap, "no port: give HOST:PORT");
		return EINVAL;
	}
	hl = (size_t)(colon - addr);
	if (hl >= 2 && addr[0] == '[' && addr[hl - 1] == ']') {
		h++;
		hl -= 2;
	} else if (memchr(addr, ':', hl)) {
		snprintf(why, cap,
			 "an IPv6 address goes in brackets: "
			 "[ADDR]:PORT");
		return EINVAL;
	}
	if (!hl) {
		snprintf(why, cap,
			 "no host: give the address the other "
			 "members reach this node at");
		return EINVAL;
	}
	/* what is published: the host, ':' and up to 5 digits of port */
	if (strlen(addr) + 5 >= META_GROUP_ADDR_MAX || hl >= sizeof(host)) {
		snprintf(why, cap, "longer than %d bytes",
			 META_GROUP_ADDR_MAX - 6);
		return EINVAL;
	}
	memcpy(host, h, hl);
	host[hl] = '\0';
	unsigned long port = strtoul(colon + 1, &end, 10);
	if (!colon[1] || *end || port > 65535 || colon[1] == '-' ||
	    colon[1] == '+') {
		snprintf(why, cap, "the port '%s' is not 0 to 65535",
			 colon + 1);
		return EINVAL;
	}
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_NUMERICSERV},
			*res, *ai;
	int rc = getaddrinfo(host, colon + 1, &hints, &res);
	if (rc) {
		snprintf(why, cap, "cannot resolve '%s': %s", host,
			 gai_strerror(rc));
		return EINVAL;
	}
	int any = 0;
	for (ai = res; ai; ai = ai->ai_next)
		any |= wildcard(ai->ai_addr);
	freeaddrinfo(res);
	if (any) {
		snprintf(why, cap,
			 "'%s' is every address, and the other members need "
			 "one to reach this node at: give this node's address "
			 "(or a name of it) on the network the members share",
			 host);
		return EINVAL;
	}
	return 0;
}

int fs_group_opts_check(const struct fs_opts *o, char *why, size_t cap)
{
	if (!o->cache_group) {
		const char *lone = o->group_addr	? "--group-addr"
				   : o->group_take_only ? "--group-take-only"
				   : o->group_keep_copies
				       ? "--group-keep-copies"
				       : NULL;
		if (!lone)
			return 0;
		snprintf(why, cap, "%s needs --cache-group NAME", lone);
		return EINVAL;
	}
	if (!name_ok(o->cache_group)) {
		snprintf(why, cap,
			 "bad --cache-group '%s': want 1 to %d of A-Z a-z "
			 "0-9 . _ -",
			 o->cache_group, META_GROUP_NAME_MAX);
		return EINVAL;
	}
	if (o->cache_size == 0) {
		snprintf(why, cap,
			 "cache group '%s' needs a disk cache: its size is "
			 "what this node gives the group (--cache-size 0 "
			 "turns it off)",
			 o->cache_group);
		return EINVAL;
	}
	if (o->group_take_only && o->group_addr) {
		snprintf(why, cap,
			 "--group-take-only serves nothing: it takes no "
			 "--group-addr");
		return EINVAL;
	}
	if (!o->group_take_only && !o->group_addr) {
		snprintf(why, cap,
			 "cache group '%s' needs --group-addr HOST:PORT, the "
			 "address the other members reach this node at (or "
			 "--group-take-only for a mount that serves nothing)",
			 o->cache_group);
		return EINVAL;
	}
	char w[300];
	if (o->group_addr && addr_check(o->group_addr, w, sizeof(w))) {
		snprintf(why, cap, "bad --group-addr '%s': %s", o->group_addr,
			 w);
		return EINVAL;
	}
	return 0;
}

/* ---- the node id -------------------------------------------------------- */

static int node_read(const char *path, uint64_t *node)
{
	char buf[40], *end;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return errno;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	int err = errno;
	close(fd);
	if (n < 0)
		return err;
	buf[n] = '\0';
	if (n < 16 || strspn(buf, "0123456789abcdef") != 16 ||
	    (n > 16 && strcmp(buf + 16, "\n")))
		return EINVAL;
	*node = strtoull(buf, &end, 16);
	return *node ? 0 : EINVAL;
}

/* A new id, written to a file of its own, then linked to path: a mount
 * that made one first wins (EEXIST), and nobody sees half a file. */
static int node_make(const char *path)
{
	char tmp[PATH_MAX + 64], buf[24];
	uint64_t id = 0;
	int err = 0;

	while (!id) {
		if (getrandom(&id, sizeof(id), 0) != sizeof(id))
			return errno ? errno : EIO;
	}
	snprintf(tmp, sizeof(tmp), "%s.%ld.tmp", path, (long)getpid());
	int fd = open(
	    tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return errno;
	int n = snprintf(buf, sizeof(buf), "%016" PRIx64 "\n", id);
	if ((err = fsutil_write_all(fd, buf, (size_t)n)) == 0 && fsync(fd))
		err = errno;
	if (close(fd) && !err)
		err = errno;
	if (!err && link(tmp, path))
		err = errno;
	unlink(tmp);
	return err;
}

int groupd_node_id(const char *dir, uint64_t *node, char *path, size_t cap)
{
	if ((size_t)snprintf(path, cap, "%s/%s", dir, GROUPD_NODE_FILE) >= cap)
		return ENAMETOOLONG;
	int err = node_read(path, node);
	if (err != ENOENT)
		return err;
	err = node_make(path);
	if (err && err != EEXIST)
		return err;
	err = node_read(path, node);
	if (!err)
		log_info("cache group: this cache's node id is %016" PRIx64
			 " (made in '%s')",
			 *node, path);
	return err;
}

/* ---- the stack ---------------------------------------------------------- */

int groupd_stack(struct fs *fs, const char *dirs, uint64_t size, char *msg,
		 size_t cap)
{
	const struct fs_opts *o = fs->o;
	char first[PATH_MAX];
	int err;

	if (!fs->disk_cache)
		return vfs_fail(msg, cap, EINVAL,
				"cache group '%s' needs a disk cache, and this "
				"mount has none (see the log above): give "
				"--cache-dir DIR on a local disk",
				o->cache_group);
	struct groupd *g = calloc(1, sizeof(*g));
	if (!g)
		return vfs_fail(msg, cap, ENOMEM, "out of memory");
	g->fs = fs;
	snprintf(g->name, sizeof(g->name), "%s", o->cache_group);
	g->weight = o->group_take_only ? 0 : size;
	pthread_mutex_init(&g->lock, NULL);
	fsutil_cond_init_mono(&g->cond);
	fs->groupd = g; /* closed by the teardown from here on */

	snprintf(first, sizeof(first), "%.*s", (int)strcspn(dirs, ":"), dirs);
	err = groupd_node_id(first, &g->node, g->path, sizeof(g->path));
	if (err == EINVAL)
		return vfs_fail(
		    msg, cap, err,
		    "cache group '%s': '%s' is not a node id (16 hex "
		    "digits): remove it, and this cache gets a new id "
		    "at the next mount",
		    g->name, g->path);
	if (err)
		return vfs_fail(
		    msg, cap, err,
		    "cache group '%s': cannot read or make the node "
		    "id file '%s': %s",
		    g->name, g->path, gr_strerror(err));
	err = meta_group_secret(fs->meta, g->secret);
	if (err)
		return vfs_fail(
		    msg, cap, err,
		    "cache group '%s': cannot read the group secret: "
		    "%s",
		    g->name, gr_strerror(err));
	err = workq_open("gr-gwarm", GROUPD_FANOUT, 4 * GROUPD_FANOUT, &g->q);
	if (err)
		return vfs_fail(msg, cap, err,
				"cannot start the group's threads: %s",
				gr_strerror(err));
	struct group_opts go = {
	    .node = g->node,
	    .secret = g->secret,
	    .listen = o->group_take_only ? NULL : o->group_addr,
	    .weight = g->weight,
	    .keep_copies = o->group_keep_copies,
	};
	err = group_open(fs->store, &go, &g->store);
	if (err == EADDRINUSE || err == EADDRNOTAVAIL || err == EACCES)
		return vfs_fail(
		    msg, cap, err,
		    "cache group '%s': cannot listen on --group-addr "
		    "'%s': %s%s",
		    g->name, o->group_addr, gr_strerror(err),
		    err == EADDRNOTAVAIL ? " (not an address of this node)"
		    : err == EADDRINUSE
			? " (another mount or program has it: give "
			  "each mount a port of its own, or port 0)"
			: "");
	if (err)
		return vfs_fail(
		    msg, cap, err,
		    "cache group '%s': cannot set up the group store%s%s: "
		    "%s",
		    g->name, go.listen ? " at " : "",
		    go.listen ? go.listen : "", gr_strerror(err));
	fs->store = fs->group = g->store; /* it owns the disk cache now */
	return 0;
}

/* ---- members ------------------------------------------------------------ */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Say who came and who went since the last listing. */
static void log_changes(struct groupd *g, const struct meta_group_member *m,
			size_t n)
{
	uint64_t *now = malloc((n ? n : 1) * sizeof(*now));
	if (!now)
		return;
	for (size_t i = 0; i < n; i++)
		now[i] = m[i].node;
	qsort(now, n, sizeof(*now), cmp_u64);
	for (size_t i = 0; i < n; i++)
		if (!bsearch(&now[i], g->seen, g->nseen, sizeof(*now),
			     cmp_u64) &&
		    now[i] != g->node) {
			const struct meta_group_member *e = NULL;
			for (size_t j = 0; j < n && !e; j++)
				if (m[j].node == now[i])
					e = &m[j];
			log_info("cache group '%s': member %016" PRIx64
				 " is in, %s %s (%zu members)",
				 g->name, now[i],
				 e && e->addr[0] ? "serving at" : "serving",
				 e && e->addr[0] ? e->addr : "nothing", n);
		}
	for (size_t i = 0; i < g->nseen; i++)
		if (!bsearch(&g->seen[i], now, n, sizeof(*now), cmp_u64) &&
		    g->seen[i] != g->node)
			log_info("cache group '%s': member %016" PRIx64
				 " is out (%zu members)",
				 g->name, g->seen[i], n);
	free(g->seen);
	g->seen = now;
	g->nseen = n;
}

/* Join as this node; 0, or meta_group_join's error. */
static int join(struct groupd *g)
{
	struct meta_group_member self = {.node = g->node, .weight = g->weight};
	snprintf(self.addr, sizeof(self.addr), "%s", group_addr(g->store));
	int err = meta_group_join(g->fs->meta, g->name, &self);
	if (!err) {
		g->joined = 1;
		if (self.addr[0])
			log_info("cache group '%s': joined as node %016" PRIx64
				 " at %s, giving %" PRIu64 " MiB",
				 g->name, g->node, self.addr, g->weight >> 20);
		else
			log_info("cache group '%s': joined as node %016" PRIx64
				 ", taking only",
				 g->name, g->node);
	}
	return err;
}

/* Read the members, hand them to the group store, and join again when
 * this node is not among them under this session. */
static void refresh(struct groupd *g)
{
	struct meta *m = g->fs->meta;
	struct meta_group_member *ms = NULL;
	size_t n = 0;

	if (meta_session_gone(m))
		return; /* the volume went from under the mount */
	for (int round = 0; round < 2; round++) {
		int err = meta_group_members(m, g->name, &ms, &n);
		if (err) {
			if (!g->failing)
				log_warn("cache group '%s': cannot read its "
					 "members: %s (the last %zu are kept)",
					 g->name, gr_strerror(err), g->nseen);
			g->failing = 1;
			return;
		}
		if (g->failing)
			log_info("cache group '%s': its members are read "
				 "again",
				 g->name);
		g->failing = 0;
		struct group_member *gm = calloc(n ? n : 1, sizeof(*gm));
		int here = 0;
		for (size_t i = 0; gm && i < n; i++) {
			gm[i].node = ms[i].node;
			gm[i].weight = ms[i].weight;
			snprintf(gm[i].addr, sizeof(gm[i].addr), "%s",
				 ms[i].addr);
			here |= ms[i].node == g->node &&
				ms[i].sid == meta_session_id(m);
		}
		if (gm)
			group_set_members(g->store, gm, n);
		log_changes(g, ms, n);
		free(gm);
		free(ms);
		ms = NULL;
		if (here || round)
			return;
		err = join(g);
		if (err == EEXIST) {
			if (!g->waiting)
				log_warn("cache group '%s': node %016" PRIx64
					 " is held by another session: "
					 "joining once it ends",
					 g->name, g->node);
			g->waiting = 1;
			return;
		}
		if (err) {
			log_warn("cache group '%s': cannot join: %s (trying "
				 "again in %d s)",
				 g->name, gr_strerror(err),
				 GROUPD_REFRESH_MS / 1000);
			return;
		}
		if (g->waiting)
			log_info("cache group '%s': the session that held "
				 "node %016" PRIx64 " ended; this mount is "
				 "the member now",
				 g->name, g->node);
		g->waiting = 0;
	}
}

static void *refresher_main(void *arg)
{
	struct groupd *g = arg;

	pthread_setname_np(pthread_self(), "gr-group");
	pthread_mutex_lock(&g->lock);
	while (!g->stopping) {
		fsutil_wait_until_ms(&g->cond, &g->lock,
				     fsutil_mono_ms() + GROUPD_REFRESH_MS);
		if (g->stopping)
			break;
		pthread_mutex_unlock(&g->lock);
		refresh(g);
		pthread_mutex_lock(&g->lock);
	}
	pthread_mutex_unlock(&g->lock);
	return NULL;
}

/*
 * The node is in the group under another live session. A mount of this
 * node whose process is gone (killed, crashed) holds it until its session
 * expires: then wait for it. Anything else is this cache mounted twice
 * (here, or a copy of the directory on another node): refused.
 */
static int held(struct groupd *g, char *msg, size_t cap)
{
	struct meta *m = g->fs->meta;
	struct meta_group_member *ms = NULL;
	struct meta_session *ss = NULL;
	size_t n = 0, ns = 0;
	const struct meta_session *s = NULL;
	char me[256] = "";
	uint64_t sid = 0;

	gethostname(me, sizeof(me) - 1);
	if (!meta_group_members(m, g->name, &ms, &n))
		for (size_t i = 0; i < n; i++)
			if (ms[i].node == g->node)
				sid = ms[i].sid;
	free(ms);
	if (sid && !meta_list_sessions(m, &ss, &ns))
		for (size_t i = 0; i < ns && !s; i++)
			if (ss[i].sid == sid)
				s = &ss[i];
	int dead = s && !strcmp(s->host, me) && s->pid != getpid() &&
		   kill((pid_t)s->pid, 0) && errno == ESRCH;
	int err = 0;
	if (dead) {
		g->waiting = 1;
		log_warn("cache group '%s': node %016" PRIx64
			 " is still held by session %" PRIu64
			 " of a mount of this cache that ended without "
			 "leaving (process %lld is gone): this mount joins "
			 "once that session expires (within a session TTL)",
			 g->name, g->node, sid, (long long)s->pid);
	} else if (s) {
		err = vfs_fail(
		    msg, cap, EEXIST,
		    "cache group '%s': node %016" PRIx64
		    " (the id in '%s') is a member already, under "
		    "session %" PRIu64 " on host '%s' (process %lld, "
		    "mount point '%s'): this cache directory is "
		    "mounted twice, or was copied from that node; give "
		    "this mount a cache directory of its own, or remove "
		    "'%s' from the copy (it then gets a new id)",
		    g->name, g->node, g->path, sid, s->host, (long long)s->pid,
		    s->mountpoint, g->path);
	} else {
		err =
		    vfs_fail(msg, cap, EEXIST,
			     "cache group '%s': node %016" PRIx64
			     " (the id in '%s') is a member already, under "
			     "another live session: this cache directory is "
			     "mounted twice, or was copied from another node; "
			     "give this mount a cache directory of its own, or "
			     "remove '%s' from the copy",
			     g->name, g->node, g->path, g->path);
	}
	free(ss);
	return err;
}

int groupd_start(struct fs *fs, char *msg, size_t cap)
{
	struct groupd *g = fs->groupd;
	if (!g)
		return 0;
	int err = join(g);
	if (err == EEXIST)
		err = held(g, msg, cap);
	else if (err)
		err =
		    vfs_fail(msg, cap, err, "cache group '%s': cannot join: %s",
			     g->name, gr_strerror(err));
	if (err)
		return err;
	refresh(g);
	if ((err = pthread_create(&g->th, NULL, refresher_main, g)))
		return vfs_fail(msg, cap, err,
				"cache group '%s': cannot start its thread: %s",
				g->name, strerror(err));
	g->running = 1;
	return 0;
}

void groupd_close(struct groupd *g)
{
	if (!g)
		return;
	if (g->running) {
		pthread_mutex_lock(&g->lock);
		g->stopping = 1;
		pthread_cond_signal(&g->cond);
		pthread_mutex_unlock(&g->lock);
		pthread_join(g->th, NULL);
	}
	struct meta *m = g->fs->meta;
	if (g->joined && !meta_session_gone(m)) {
		int err = meta_group_leave(m, g->name, g->node);
		if (err)
			log_warn("cache group '%s': cannot leave: %s (the "
				 "others drop this node when its session "
				 "ends)",
				 g->name, gr_strerror(err));
		else
			log_info("cache group '%s': left", g->name);
	}
	workq_close(g->q);
	g->fs->groupd = NULL;
	explicit_bzero(g->secret, sizeof(g->secret));
	free(g->seen);
	pthread_cond_destroy(&g->cond);
	pthread_mutex_destroy(&g->lock);
	free(g);
}

/* ---- warmup's fan-out --------------------------------------------------- */

struct batch {
	pthread_mutex_t lock; /* leaf */
	pthread_cond_t cond;  /* left fell to 0 */
	size_t left;	      /* protected by lock */
};

struct key_job {
	struct workq_job job; /* first: the job is the item */
	struct groupd *g;
	struct batch *b;
	const char *key;
	int warm;
	int *res;
};

static void key_run(struct workq_job *job)
{
	struct key_job *k = (struct key_job *)job;
	int here = 0, there = 0, err;

	if (k->warm) {
		err = group_warm(k->g->store, k->key);
		*k->res = err;
	} else {
		err = group_where(k->g->store, k->key, &here, &there);
		*k->res = err ? -(err < 0 ? EIO : err)
			      : (here ? 1 : 0) | (there ? 2 : 0);
	}
	pthread_mutex_lock(&k->b->lock);
	if (--k->b->left == 0)
		pthread_cond_signal(&k->b->cond);
	pthread_mutex_unlock(&k->b->lock);
}

void groupd_keys(struct groupd *g, int warm, const char *const *keys, size_t n,
		 int *res)
{
	struct key_job *jobs = calloc(n ? n : 1, sizeof(*jobs));
	struct batch b = {.left = n};

	if (!jobs) {
		for (size_t i = 0; i < n; i++)
			res[i] = warm ? ENOMEM : -ENOMEM;
		return;
	}
	pthread_mutex_init(&b.lock, NULL);
	pthread_cond_init(&b.cond, NULL);
	for (size_t i = 0; i < n; i++) {
		jobs[i] = (struct key_job){.job.run = key_run,
					   .g = g,
					   .b = &b,
					   .key = keys[i],
					   .warm = warm,
					   .res = &res[i]};
		if (workq_push(g->q, &jobs[i].job))
			key_run(&jobs[i].job); /* closing: do it here */
	}
	pthread_mutex_lock(&b.lock);
	while (b.left)
		pthread_cond_wait(&b.cond, &b.lock);
	pthread_mutex_unlock(&b.lock);
	pthread_mutex_destroy(&b.lock);
	pthread_cond_destroy(&b.cond);
	free(jobs);
}
