/*
 * redis_lock.c - file locks of the Redis engine (meta_lock.h): thin calls
 * of the lock_set and lock_get scripts (meta/lua/lock_*.lua, lib/lock.lua),
 * which keep the per-inode tables and check conflicts where they are
 * granted. Waiting for a lock is the caller's business (fs/vfs/lock.c).
 */
#include <errno.h>

#include "meta/meta_lock.h"
#include "meta/redis_int.h"

static uint64_t clamp(uint64_t v)
{
	return v > META_LOCK_EOF ? META_LOCK_EOF : v;
}

/* {0, 0} or {0, 1, type, start, end, pid, sid}: 0 or EAGAIN */
static int conflict_of(const redisReply *r, struct meta_lock *c)
{
	if (r->elements < 2 || r->element[1]->type != REDIS_REPLY_INTEGER)
		return META_EPROTO;
	if (r->element[1]->integer == 0) {
		if (c)
			c->type = META_LOCK_UN;
		return 0;
	}
	if (r->elements < 7)
		return META_EPROTO;
	if (c) {
		c->type = (int)redis_reply_u64(r->element[2]);
		c->start = redis_reply_u64(r->element[3]);
		c->end = redis_reply_u64(r->element[4]);
		c->pid = (uint32_t)redis_reply_u64(r->element[5]);
		c->sid = redis_reply_u64(r->element[6]);
	}
	return EAGAIN;
}

int meta_lock_set(struct meta *m, enum meta_lock_kind kind, uint64_t ino,
		  uint64_t owner, const struct meta_lock *lk,
		  struct meta_lock *conflict)
{
	uint64_t sid = atomic_load(&m->sid);
	int flock = kind == META_LOCK_FLOCK;
	char k[2] = {(char)kind, 0};
	struct cmd c;
	redisReply *r;

	if (!sid || (kind != META_LOCK_FLOCK && kind != META_LOCK_POSIX))
		return EINVAL;
	redis_cmd_script(m, &c, SC_LOCK_SET);
	redis_cmd_str(&c, k);
	redis_cmd_u64(&c, ino);
	redis_cmd_u64(&c, sid);
	redis_cmd_u64(&c, owner);
	redis_cmd_i64(&c, lk->type);
	redis_cmd_u64(&c, flock ? 0 : clamp(lk->start));
	redis_cmd_u64(&c, flock ? META_LOCK_EOF : clamp(lk->end));
	redis_cmd_u64(&c, lk->pid);
	redis_cmd_i64(&c, m->opts.session_ttl);
	/* not resent after a broken connection: one owner's calls may race
	 * (threads of a process), and a lock resent after the same owner's
	 * later unlock would come back; the caller sees EIO instead */
	int err = redis_run_script(m, 0, &c, &r);
	if (err)
		return err;
	err = conflict_of(r, conflict);
	freeReplyObject(r);
	return err;
}

int meta_lock_get(struct meta *m, uint64_t ino, uint64_t owner,
		  const struct meta_lock *lk, struct meta_lock *conflict)
{
	uint64_t sid = atomic_load(&m->sid);
	struct cmd c;
	redisReply *r;

	if (!sid)
		return EINVAL;
	redis_cmd_script(m, &c, SC_LOCK_GET);
	redis_cmd_u64(&c, ino);
	redis_cmd_u64(&c, sid);
	redis_cmd_u64(&c, owner);
	redis_cmd_i64(&c, lk->type);
	redis_cmd_u64(&c, clamp(lk->start));
	redis_cmd_u64(&c, clamp(lk->end));
	redis_cmd_i64(&c, m->opts.session_ttl);
	int err = redis_run_script(m, RUN_RETRY, &c, &r);
	if (err)
		return err;
	err = conflict_of(r, conflict);
	freeReplyObject(r);
	if (err == EAGAIN)
		err = 0;
	return err;
}
