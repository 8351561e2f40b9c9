/*
 * meta_server.h - what the Redis server of a volume says of itself, for
 * the tools: version, the master in use, memory and persistence, and the
 * settings that put metadata at risk (keys it may evict, no copy on disk,
 * memory nearly full). `granary format`, `mount` and `status` warn of
 * those risks (docs/operations.md, "Redis").
 */
#ifndef GRANARY_META_SERVER_H
#define GRANARY_META_SERVER_H

#include <stdint.h>

#include "meta/meta.h"

struct meta_server {
	char version[32]; /* redis_version */
	char addr[300];	  /* HOST:PORT or socket path of the server used */
	char master[256]; /* the master's name at the sentinels, or "" */
	int wait;	  /* the URL's ?wait=N (no-loss mode), 0 off */
	uint64_t used_memory;
	uint64_t maxmemory;    /* bytes, 0: no limit */
	char policy[32];       /* maxmemory-policy */
	int config;	       /* 1: CONFIG GET answered; 0: refused (managed
				  Redis often disables it), the rest from INFO */
	int aof;	       /* appendonly: 1 yes, 0 no */
	char save[256];	       /* RDB save points ("3600 1 300 100"), "" none;
				  only when config */
	int64_t rdb_last_save; /* unix seconds, 0 never */
	char rdb_status[16];   /* status of the last RDB save: ok, err */
	char aof_status[16];   /* status of the last AOF write: ok, err */
	int replicas;	       /* connected replicas */
};

/* The server's figures, in one round trip (INFO, CONFIG GET). A CONFIG
 * the server refuses is no error. */
int meta_server_info(struct meta *m, struct meta_server *s);

#define META_RISK_EVICT	    0x1 /* maxmemory-policy is not noeviction */
#define META_RISK_NOPERSIST 0x2 /* no AOF and no RDB save point */
#define META_RISK_FULL	    0x4 /* used_memory above 80% of maxmemory */
/* The META_RISK_* bits that apply to s (none when a figure is unknown). */
int meta_server_risks(const struct meta_server *s);

#endif
