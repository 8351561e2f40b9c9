/*
 * redis_reclaim.c - reclamation in the Redis engine: the chunk lists of
 * deleted files are dropped and the slices (or whole packs) left without a
 * reference handed out, each to exactly one caller (SCHEMA.md); the
 * slices compactions replaced, ahead of their delay when nobody is
 * mounted.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "meta/redis_int.h"
#include "lib/log.h"

#define RECLAIM_BUDGET 256 /* chunk lists dropped per reclaim script */

/* ---- reclamation ----------------------------------------------------- */

int meta_reclaim(struct meta *m, struct meta_slice *dead, size_t cap, size_t *n)
{
	*n = 0;
	if (m->opts.read_only)
		return EROFS;
	/* bounded scripts until slices come out or no deleted file is left */
	for (;;) {
		const redisReply *list;
		struct cmd c;
		redisReply *r;
		uint64_t left;
		int err;

		redis_cmd_script(m, &c, SC_RECLAIM);
		redis_cmd_u64(&c, RECLAIM_BUDGET);
		redis_cmd_u64(&c, cap);
		err = redis_run_script(m, 0, &c, &r);
		if (err)
			return err;
		list = r->elements == 3 ? r->element[2] : NULL;
		if (!list || list->type != REDIS_REPLY_ARRAY ||
		    list->elements > cap) {
			freeReplyObject(r);
			return META_EPROTO;
		}
		left = redis_reply_u64(r->element[1]);
		for (size_t i = 0; i < list->elements; i++) {
			const redisReply *e = list->element[i];
			const uint8_t *p = (const uint8_t *)e->str;
			struct meta_slice x;
			if (e->type == REDIS_REPLY_STRING && e->len == 17 &&
			    p[0] == 5) {
				/* a pack with every frame dead */
				dead[(*n)++] = (struct meta_slice){
				    .pack = ld64(p + 1), .plen = 0};
				continue;
			}
			if (e->type != REDIS_REPLY_STRING ||
			    redis_rec_unpack(e->str, (size_t)e->len, &x) !=
				(size_t)e->len ||
			    x.pack) {
				/* out of the list now: gc finds its objects */
				log_err("dropping a corrupt entry of "
					"'delslices'");
				continue;
			}
			dead[(*n)++] = (struct meta_slice){.id = x.id,
							   .size = x.size,
							   .off = 0,
							   .len = x.size,
							   .pos = 0};
		}
		freeReplyObject(r);
		if (*n || !left || !cap)
			return 0;
	}
}

/* ---- the compactions' delay ------------------------------------------ */

int meta_reclaim_delayed(struct meta *m, size_t cap, uint64_t *moved,
			 uint64_t *left, uint64_t *clients)
{
	struct cmd c;
	redisReply *r;
	int err;

	*moved = *left = *clients = 0;
	if (m->opts.read_only)
		return EROFS;
	redis_cmd_script(m, &c, SC_RECLAIM_DELAYED);
	redis_cmd_i64(&c, m->opts.session_ttl);
	redis_cmd_u64(&c, cap);
	err = redis_run_script(m, 0, &c, &r);
	if (err)
		return err;
	if (r->elements != 4) {
		freeReplyObject(r);
		return META_EPROTO;
	}
	*moved = redis_reply_u64(r->element[1]);
	*left = redis_reply_u64(r->element[2]);
	*clients = redis_reply_u64(r->element[3]);
	freeReplyObject(r);
	return 0;
}
