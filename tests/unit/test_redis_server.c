/*
 * test_redis_server.c - the metadata engine's view of its Redis server:
 * sentinel URLs (parsed, refused, redacted), what meta_server_info reads
 * and the risks it finds on private redis-servers set up each way (an
 * evicting policy, no persistence, CONFIG disabled as managed Redis does,
 * nearly full), and the no-loss mode (?wait=N) with and without a
 * replica. Each test starts the servers it needs and stops them by PID.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "meta/meta_server.h"
#include "meta/meta_volume.h"
#include "meta/meta.h"

/* ---- private servers ------------------------------------------------- */

struct srv {
	char dir[64];
	char sock[128];
	int port;
	pid_t pid;
};

static int free_port(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t len = sizeof a;
	int fd = socket(AF_INET, SOCK_STREAM, 0), port;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert(fd >= 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	port = ntohs(a.sin_port);
	close(fd);
	return port;
}

static redisReply *srv_cmd(const struct srv *s, const char *cmd)
{
	redisContext *c = redisConnectUnix(s->sock);
	redisReply *r = c && !c->err ? redisCommand(c, cmd) : NULL;

	if (c)
		redisFree(c);
	return r;
}

/* A redis-server on a free loopback port and dir/r.sock, no persistence
 * unless args (NULL-terminated redis-server options) say otherwise. */
static void srv_start(struct srv *s, const char *const *args)
{
	const char *argv[64];
	char port[16], logf[128];
	int n = 0;

	snprintf(s->dir, sizeof s->dir, "/tmp/granary-rsrv-XXXXXX");
	cr_assert(mkdtemp(s->dir));
	snprintf(s->sock, sizeof s->sock, "%s/r.sock", s->dir);
	snprintf(logf, sizeof logf, "%s/redis.log", s->dir);
	s->port = free_port();
	snprintf(port, sizeof port, "%d", s->port);
	argv[n++] = "redis-server";
	argv[n++] = "--port";
	argv[n++] = port;
	argv[n++] = "--bind";
	argv[n++] = "127.0.0.1";
	argv[n++] = "--unixsocket";
	argv[n++] = s->sock;
	argv[n++] = "--dir";
	argv[n++] = s->dir;
	argv[n++] = "--logfile";
	argv[n++] = logf;
	argv[n++] = "--save";
	argv[n++] = "";
	argv[n++] = "--appendonly";
	argv[n++] = "no";
	argv[n++] = "--repl-diskless-sync-delay"; /* a replica syncs at once */
	argv[n++] = "0";
	while (args && *args)
		argv[n++] = *args++;
	argv[n] = NULL;
	s->pid = fork();
	cr_assert_neq(s->pid, -1);
	if (s->pid == 0) {
		execvp("redis-server", (char **)argv);
		_exit(127);
	}
	for (int i = 0; i < 200; i++) {
		redisReply *r = srv_cmd(s, "PING");
		int ok = r && r->type == REDIS_REPLY_STATUS;
		if (r)
			freeReplyObject(r);
		if (ok)
			return;
		usleep(50000);
	}
	cr_assert_fail("redis-server did not start (see %s)", logf);
}

static void srv_stop(struct srv *s)
{
	char cmd[128];

	kill(s->pid, SIGKILL);
	waitpid(s->pid, NULL, 0);
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", s->dir);
	cr_expect_eq(system(cmd), 0);
}

static struct meta *open_url(const char *fmt, const struct srv *s)
{
	char url[256];
	struct meta *m = NULL;
	int err;

	snprintf(url, sizeof url, fmt, s->sock, s->port);
	err = meta_open(url, NULL, &m);
	cr_assert_eq(err, 0, "meta_open(%s): %s", url, gr_strerror(err));
	return m;
}

static int risks_of(const char *const *args, struct meta_server *info)
{
	struct srv s;
	struct meta *m;
	int err, risks;

	srv_start(&s, args);
	m = open_url("unix://%s?db=1", &s);
	err = meta_server_info(m, info);
	cr_assert_eq(err, 0, "meta_server_info: %s", gr_strerror(err));
	risks = meta_server_risks(info);
	meta_close(m);
	srv_stop(&s);
	return risks;
}

/* ---- URLs ------------------------------------------------------------ */

Test(redis_server, sentinel_urls_malformed)
{
	static const char *bad[] = {
	    "redis://m,/1",
	    "redis://,127.0.0.1/1",
	    "redis://m,h:0/1",
	    "redis://m,h:x/1",
	    "redis://m,h,/1",
	    "redis://m x,h/1",
	    "redis://secret@m,h/1",
	    "redis://m,h/1?wait=x",
	    "redis://m,h/1?wait=",
	    "redis://h/1?wait=1&",
	    "redis://h/1?nope=1",
	    "redis://h/1?db=2",
	    "redis://h/1?wait_timeout=0",
	    "redis://h/1?wait=65",
	    "unix:///tmp/r.sock?db=1&wait=a",
	    "redis://m,a,b,c,d,e,f,g,h,i,j,k,l,n,o,p,q,r/1", /* 17 sentinels */
	};
	struct meta *m;

	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		m = (void *)1;
		cr_expect_eq(meta_open(bad[i], NULL, &m), META_EURL,
			     "URL '%s' should be malformed", bad[i]);
		cr_expect_null(m);
	}
}

Test(redis_server, sentinels_unreachable)
{
	static const char *good[] = {
	    "redis://m,127.0.0.1:1/3",
	    "redis://:pw@m,127.0.0.1:1,127.0.0.1:2/0",
	    "redis://u:pw@m.x-y_z,[::1]:1,localhost:1/0?wait=1&wait_timeout=3",
	    "redis://m,127.0.0.1:1?failover_timeout=0",
	};
	struct meta *m = (void *)1;
	struct timeval t0, t1;

	gettimeofday(&t0, NULL);
	for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
		cr_expect_eq(meta_open(good[i], NULL, &m), META_ESENTINEL,
			     "URL '%s'", good[i]);
	cr_expect_null(m);
	/* a query on a plain URL parses too */
	cr_expect_eq(
	    meta_open("redis://127.0.0.1:1/2?wait=2&failover_timeout=0", NULL,
		      &m),
	    META_EUNREACH);
	gettimeofday(&t1, NULL);
	cr_expect_lt(t1.tv_sec - t0.tv_sec, 8, "opens must fail fast");
	cr_expect(strstr(gr_strerror(META_ESENTINEL), "sentinel"));
	cr_expect(strstr(gr_strerror(META_ENOMASTER), "master"));
}

Test(redis_server, sentinel_url_redacted)
{
	char buf[256];

	meta_url_redact("redis://:s3cret@mymaster,h1:26379,h2/2?wait=1", buf,
			sizeof buf);
	cr_expect_str_eq(buf, "redis://:****@mymaster,h1:26379,h2/2?wait=1");
	meta_url_redact("redis://user:s3cret@m,h1/2", buf, sizeof buf);
	cr_expect_str_eq(buf, "redis://user:****@m,h1/2");
	cr_expect_null(strstr(buf, "s3cret"));
}

/* ---- the server's figures and risks ---------------------------------- */

Test(redis_server, evicting_policy)
{
	static const char *const args[] = {"--maxmemory-policy", "allkeys-lru",
					   "--appendonly", "yes", NULL};
	struct meta_server s;

	cr_expect_eq(risks_of(args, &s), META_RISK_EVICT);
	cr_expect_str_eq(s.policy, "allkeys-lru");
	cr_expect(s.config);
	cr_expect(s.aof);
	cr_expect_str_eq(s.version, "7.0.15", "version '%s'", s.version);
	cr_expect(s.used_memory > 0);
}

Test(redis_server, no_persistence)
{
	struct meta_server s;

	cr_expect_eq(risks_of(NULL, &s), META_RISK_NOPERSIST);
	cr_expect_str_eq(s.policy, "noeviction");
	cr_expect(!s.aof);
	cr_expect_str_eq(s.save, "");
}

Test(redis_server, safe_server)
{
	static const char *const rdb[] = {"--save", "3600 1 300 100", NULL};
	static const char *const aof[] = {"--appendonly", "yes", NULL};
	struct meta_server s;

	cr_expect_eq(risks_of(rdb, &s), 0);
	cr_expect_str_eq(s.save, "3600 1 300 100");
	cr_expect_eq(risks_of(aof, &s), 0);
	cr_expect_eq(s.maxmemory, 0);
	cr_expect(strstr(s.addr, "/r.sock"), "the socket: '%s'", s.addr);
}

/* Managed Redis often disables CONFIG: INFO still tells the policy, and
 * the save points are unknown, so no warning of them. */
Test(redis_server, config_disabled)
{
	static const char *const args[] = {
	    "--rename-command",	  "CONFIG",	  "",
	    "--maxmemory-policy", "volatile-lru", NULL};
	struct meta_server s;

	cr_expect_eq(risks_of(args, &s), META_RISK_EVICT);
	cr_expect(!s.config);
	cr_expect_str_eq(s.policy, "volatile-lru");
}

Test(redis_server, nearly_full)
{
	struct srv s;
	struct meta *m;
	struct meta_server info;
	char cmd[64];
	redisReply *r;

	srv_start(&s, NULL);
	m = open_url("unix://%s?db=1", &s);
	cr_assert_eq(meta_server_info(m, &info), 0);
	cr_expect_eq(meta_server_risks(&info) & META_RISK_FULL, 0);
	snprintf(cmd, sizeof cmd, "CONFIG SET maxmemory %llu",
		 (unsigned long long)(info.used_memory * 110 / 100));
	r = srv_cmd(&s, cmd);
	cr_assert(r && r->type == REDIS_REPLY_STATUS);
	freeReplyObject(r);
	cr_assert_eq(meta_server_info(m, &info), 0);
	cr_expect(meta_server_risks(&info) & META_RISK_FULL);
	cr_expect(info.maxmemory > 0);
	meta_close(m);
	srv_stop(&s);

	/* the rule itself: above 80% */
	memset(&info, 0, sizeof info);
	strcpy(info.policy, "noeviction");
	info.config = info.aof = 1;
	info.maxmemory = 1000;
	info.used_memory = 800;
	cr_expect_eq(meta_server_risks(&info), 0);
	info.used_memory = 810;
	cr_expect_eq(meta_server_risks(&info), META_RISK_FULL);
}

/* ---- the no-loss mode ------------------------------------------------ */

static int mkfile(struct meta *m, const char *name)
{
	uint64_t ino;
	struct meta_attr a;

	return meta_mknod(m, META_ROOT_INO, name, META_FILE, 0644, 0, 0, 0,
			  NULL, &ino, &a);
}

Test(redis_server, wait_for_a_replica)
{
	struct srv master, replica;
	struct meta *m, *w;
	struct meta_volume v = {.block_size = 4 << 20};
	struct meta_attr a;
	struct meta_server info;
	struct timeval t0, t1;
	uint64_t ino;
	char rport[16];

	srv_start(&master, NULL);
	m = open_url("unix://%s?db=1", &master);
	strcpy(v.name, "w");
	strcpy(v.uuid, "00000000-0000-0000-0000-000000000001");
	strcpy(v.storage, "mem://");
	v.format_version = META_FORMAT_VERSION;
	cr_assert_eq(meta_format(m, &v, 0), 0);
	cr_assert_eq(mkfile(m, "before"), 0);
	meta_close(m);

	/* no replica: reads go on, a change fails once the WAIT is over */
	w = open_url("redis://127.0.0.1:%2$d/1?wait=1&wait_timeout=1", &master);
	cr_expect_eq(meta_lookup(w, META_ROOT_INO, "before", &ino, &a), 0);
	gettimeofday(&t0, NULL);
	cr_expect_eq(mkfile(w, "lonely"), EIO);
	gettimeofday(&t1, NULL);
	cr_expect_geq(t1.tv_sec * 1000 + t1.tv_usec / 1000 -
			  (t0.tv_sec * 1000 + t0.tv_usec / 1000),
		      900, "EIO before wait_timeout");
	cr_expect_eq(meta_lookup(w, META_ROOT_INO, "before", &ino, &a), 0,
		     "reads after a failed WAIT");
	cr_assert_eq(meta_server_info(w, &info), 0);
	cr_expect_eq(info.wait, 1);
	cr_expect_eq(info.replicas, 0);

	/* a replica: changes go through */
	snprintf(rport, sizeof rport, "%d", master.port);
	const char *const rargs[] = {"--replicaof", "127.0.0.1", rport, NULL};
	srv_start(&replica, rargs);
	for (int i = 0; i < 200; i++) {
		redisReply *up = srv_cmd(&replica, "INFO replication");
		int ok = up && up->type == REDIS_REPLY_STRING &&
			 strstr(up->str, "master_link_status:up");
		if (up)
			freeReplyObject(up);
		if (ok)
			break;
		usleep(50000);
	}
	cr_assert_eq(meta_server_info(w, &info), 0);
	cr_assert_eq(info.replicas, 1);
	int err = mkfile(w, "safe");
	cr_expect_eq(err, 0, "mknod with a replica: %s", gr_strerror(err));
	redisReply *r = srv_cmd(&replica, "INFO keyspace");
	cr_assert(r && r->type == REDIS_REPLY_STRING);
	cr_expect(strstr(r->str, "db1:"), "the replica has the volume");
	freeReplyObject(r);
	meta_close(w);
	srv_stop(&replica);
	srv_stop(&master);
}
