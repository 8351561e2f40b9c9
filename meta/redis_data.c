/*
 * redis_data.c - file data in the Redis engine: slice ids, opens and closes,
 * chunk slice lists (chunk 0 in the inode hash while short), write,
 * truncate, fallocate, data clones, packs and the staging marks of
 * writeback (SCHEMA.md, "Reclamation").
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <pthread.h>

#include <openssl/sha.h>

#include "meta/meta_objects.h"
#include "meta/meta_snap.h"
#include "meta/meta_volume.h"
#include "meta/redis_int.h"
#include "lib/log.h"

#define SLICE_BATCH 1000 /* slice ids taken from nextslice at once */
/* Lua numbers are doubles: lengths, inode numbers and ids stay below 2^53 */
#define MAX_LENGTH (1ull << 53)

/* ---- ids ------------------------------------------------------------- */

/* From the local batch [*next, *end), refilled with INCRBY counter batch. */
int redis_id_take(struct meta *m, const char *counter, uint64_t batch,
		  uint64_t *next, uint64_t *end, uint64_t *id)
{
	int err = 0;

	pthread_mutex_lock(&m->ids_lock);
	if (*next >= *end) {
		struct cmd c;
		redisReply *r;

		redis_cmd_init(&c, "INCRBY");
		redis_cmd_str(&c, counter);
		redis_cmd_u64(&c, batch);
		/* sent again after a failure: a batch that got lost on the
		 * way leaves a gap, never a duplicate */
		err = redis_run(m, RUN_RETRY, &c, &r);
		if (!err) {
			if (r->type != REDIS_REPLY_INTEGER ||
			    r->integer < (long long)batch)
				err = META_EPROTO;
			else if ((uint64_t)r->integer >= MAX_LENGTH)
				err = ENOSPC;
			else {
				*end = (uint64_t)r->integer + 1;
				*next = *end - batch;
			}
			freeReplyObject(r);
		}
	}
	if (!err)
		*id = (*next)++;
	pthread_mutex_unlock(&m->ids_lock);
	return err;
}

int meta_new_slice_id(struct meta *m, uint64_t *id)
{
	if (m->opts.read_only)
		return EROFS;
	return redis_id_take(m, "nextslice", SLICE_BATCH, &m->slice_next,
			     &m->slice_end, id);
}

/* ---- length -------------------------------------------------------- */

int meta_truncate(struct meta *m, uint64_t ino, uint64_t length,
		  struct meta_attr *out)
{
	return meta_truncate_q(m, NULL, ino, length, out);
}

int meta_truncate_q(struct meta *m, const struct meta_qchain *q, uint64_t ino,
		    uint64_t length, struct meta_attr *out)
{
	char qs[QCHAIN_STR_MAX];
	struct cmd c;

	if (m->opts.read_only)
		return EROFS;
	if (length >= MAX_LENGTH)
		return EFBIG;
	redis_cmd_script(m, &c, SC_TRUNCATE);
	redis_cmd_u64(&c, ino);
	redis_cmd_u64(&c, length);
	redis_cmd_qchain(&c, q, qs);
	return redis_run_script_attr(m, &c, out);
}

int meta_fallocate(struct meta *m, uint64_t ino, int mode, uint64_t off,
		   uint64_t len, struct meta_attr *out)
{
	return meta_fallocate_q(m, NULL, ino, mode, off, len, out);
}

int meta_fallocate_q(struct meta *m, const struct meta_qchain *q,
		     uint64_t ino, int mode, uint64_t off, uint64_t len,
		     struct meta_attr *out)
{
	char qs[QCHAIN_STR_MAX];
	struct cmd c;

	if (m->opts.read_only)
		return EROFS;
	if (mode & ~FALLOC_FL_KEEP_SIZE)
		return EOPNOTSUPP;
	if (len == 0)
		return EINVAL;
	if (off >= MAX_LENGTH || len >= MAX_LENGTH - off)
		return EFBIG;
	redis_cmd_script(m, &c, SC_FALLOCATE);
	redis_cmd_u64(&c, ino);
	redis_cmd_u64(&c, mode ? 1 : 0);
	redis_cmd_u64(&c, off);
	redis_cmd_u64(&c, len);
	redis_cmd_qchain(&c, q, qs);
	return redis_run_script_attr(m, &c, out);
}

/* ---- files ----------------------------------------------------------- */

int meta_file_open(struct meta *m, uint64_t ino, struct meta_attr *a,
		   uint64_t *trash_dir)
{
	struct cmd c;
	redisReply *r;
	int err;

	redis_cmd_script(m, &c, SC_OPEN);
	redis_cmd_u64(&c, ino);
	redis_cmd_u64(&c, atomic_load(&m->sid));
	err = redis_run_script(m, 0, &c, &r);
	if (err)
		return err;
	err = r->elements < 3 ? META_EPROTO : redis_reply_attr(r->element[1], a);
	if (!err && trash_dir)
		*trash_dir = redis_reply_u64(r->element[2]);
	freeReplyObject(r);
	return err;
}

int meta_file_close(struct meta *m, uint64_t ino)
{
	return meta_file_release(m, ino, NULL);
}

int meta_file_release(struct meta *m, uint64_t ino, int *freed)
{
	size_t n = 0;
	int err = meta_files_release(m, &ino, 1, &n);

	if (freed)
		*freed = n > 0;
	return err;
}

int meta_files_release(struct meta *m, const uint64_t *inos, size_t n,
		       size_t *freed)
{
	struct cmd c;
	redisReply *r;
	uint8_t *buf;
	int err;

	if (freed)
		*freed = 0;
	if (!n)
		return 0;
	buf = malloc(n * 8);
	if (!buf)
		return ENOMEM;
	for (size_t i = 0; i < n; i++)
		st64(buf + 8 * i, inos[i]);
	redis_cmd_script(m, &c, SC_CLOSE);
	redis_cmd_u64(&c, atomic_load(&m->sid));
	redis_cmd_bin(&c, buf, n * 8);
	err = redis_run_script(m, 0, &c, &r);
	free(buf);
	if (err)
		return err;
	if (freed && r->elements > 1)
		*freed = (size_t)redis_reply_u64(r->element[1]);
	freeReplyObject(r);
	return 0;
}

/* Decode a run of slice records into a malloc'd array (NULL when empty). */
int redis_recs_unpack(const char *p, size_t len, struct meta_slice **s,
		      size_t *n)
{
	size_t cnt = 0;

	*s = NULL;
	*n = 0;
	if (!len)
		return 0;
	*s = malloc((len / REC_SHORT_LEN + 1) * sizeof **s);
	if (!*s)
		return ENOMEM;
	for (size_t o = 0, k; o < len; o += k) {
		k = redis_rec_unpack(p + o, len - o, &(*s)[cnt++]);
		if (!k) {
			free(*s);
			*s = NULL;
			return META_EPROTO;
		}
	}
	*n = cnt;
	return 0;
}

/* Chunk 0's records from the inode's tail field h and c<ino>_0 k (either
 * may be nil). A script can run between the two reads of a pipeline and
 * move a growing tail from h to k: then k holds h's records and more, and
 * reading h's again in front of them changes nothing (a newer record
 * covers an older one). */
static int tail_unpack(const redisReply *h, const redisReply *k,
		       struct meta_slice **s, size_t *n)
{
	char *buf;
	size_t hl, kl;
	int err;

	*s = NULL;
	*n = 0;
	if ((h->type != REDIS_REPLY_NIL && h->type != REDIS_REPLY_STRING) ||
	    (k->type != REDIS_REPLY_NIL && k->type != REDIS_REPLY_STRING))
		return META_EPROTO;
	hl = h->type == REDIS_REPLY_STRING ? (size_t)h->len : 0;
	kl = k->type == REDIS_REPLY_STRING ? (size_t)k->len : 0;
	if (!kl)
		return redis_recs_unpack(h->str, hl, s, n);
	if (!hl)
		return redis_recs_unpack(k->str, kl, s, n);
	buf = malloc(hl + kl);
	if (!buf)
		return ENOMEM;
	memcpy(buf, h->str, hl);
	memcpy(buf + hl, k->str, kl);
	err = redis_recs_unpack(buf, hl + kl, s, n);
	free(buf);
	return err;
}

/* Chunk 0: in the inode's hash while short, else in c<ino>_0; both are
 * asked for in one trip. A missing inode reads as an empty
 * chunk, like a missing chunk key. */
static int read_chunk0(struct meta *m, uint64_t ino, struct meta_slice **s,
		       size_t *n)
{
	struct cmd c1, c2;
	struct req reqs[2];
	redisReply *r[2];
	int err;

	redis_cmd_init(&c1, "HGET");
	redis_cmd_inode(&c1, ino, 1);
	redis_cmd_init(&c2, "GET");
	redis_cmd_fmt(&c2, "c%" PRIu64 "_0", ino);
	reqs[0] = (struct req){c1.argc, c1.argv, c1.len, -1};
	reqs[1] = (struct req){c2.argc, c2.argv, c2.len, -1};
	err = redis_run_reqs(m, RUN_RETRY, reqs, 2, r);
	if (err)
		return err;
	err = tail_unpack(r[0], r[1], s, n);
	freeReplyObject(r[0]);
	freeReplyObject(r[1]);
	return err;
}

int meta_read_chunk(struct meta *m, uint64_t ino, uint32_t idx,
		    struct meta_slice **s, size_t *n)
{
	struct cmd c;
	redisReply *r;
	int err;

	*s = NULL;
	*n = 0;
	if (idx == 0)
		return read_chunk0(m, ino, s, n);
	redis_cmd_init(&c, "GET");
	redis_cmd_fmt(&c, "c%" PRIu64 "_%" PRIu32, ino, idx);
	err = redis_run(m, RUN_RETRY, &c, &r);
	if (err)
		return err;
	if (r->type == REDIS_REPLY_NIL ||
	    (r->type == REDIS_REPLY_STRING && !r->len))
		goto free_r;
	if (r->type != REDIS_REPLY_STRING) {
		err = META_EPROTO;
		goto free_r;
	}
	err = redis_recs_unpack(r->str, (size_t)r->len, s, n);
free_r:
	freeReplyObject(r);
	return err;
}

/* A record no chunk can hold: empty, past the chunk, outside its slice,
 * or a packed frame without a slice or a length. */
static int rec_bad(const struct meta_slice *x)
{
	return x->len == 0 || x->pos > META_CHUNK_SIZE ||
	       x->len > META_CHUNK_SIZE - x->pos ||
	       (x->id && (x->off > x->size || x->len > x->size - x->off)) ||
	       (x->pack && (!x->id || !x->plen));
}

int meta_write(struct meta *m, uint64_t ino, const struct meta_chunk_slice *s,
	       size_t n, struct meta_attr *a)
{
	return meta_write_q(m, NULL, ino, s, n, a);
}

int meta_write_q(struct meta *m, const struct meta_qchain *q, uint64_t ino,
		 const struct meta_chunk_slice *s, size_t n,
		 struct meta_attr *a)
{
	char qs[QCHAIN_STR_MAX];
	struct cmd c;
	uint8_t *buf;
	size_t len = 0;
	int err;

	if (m->opts.read_only)
		return EROFS;
	for (size_t i = 0; i < n; i++) {
		if (rec_bad(&s[i].s))
			return EINVAL;
		if ((uint64_t)s[i].idx * META_CHUNK_SIZE + s[i].s.pos +
			s[i].s.len >=
		    MAX_LENGTH)
			return EFBIG;
	}
	buf = malloc(n * (REC_MAX + 4) + 1);
	if (!buf)
		return ENOMEM;
	for (size_t i = 0; i < n; i++) {
		st32(buf + len, s[i].idx);
		len += 4 + redis_rec_pack(buf + len + 4, &s[i].s);
	}
	redis_cmd_script(m, &c, SC_WRITE);
	redis_cmd_u64(&c, ino);
	redis_cmd_bin(&c, buf, len);
	redis_cmd_qchain(&c, q, qs);
	err = redis_run_script_attr(m, &c, a);
	free(buf);
	return err;
}

/* ---- compaction ------------------------------------------------------ */

int meta_compact_read(struct meta *m, uint64_t ino, uint32_t idx,
		      struct meta_slice **s, size_t *n,
		      struct meta_chunk_tag *tag)
{
	unsigned char md[SHA_DIGEST_LENGTH];
	struct req reqs[2];
	const char *argv[2][3];
	size_t lens[2][3];
	char k0[32], f0[16], hk[32];
	redisReply *out[2];
	int err;

	*s = NULL;
	*n = 0;
	/* chunk 0 lies in the inode's tail field or in c<ino>_0: both */
	snprintf(k0, sizeof k0, "c%" PRIu64 "_%" PRIu32, ino, idx);
	snprintf(hk, sizeof hk, "n%" PRIu64, ino / INO_PER_HASH);
	snprintf(f0, sizeof f0, "%" PRIu64, INO_PER_HASH + ino % INO_PER_HASH);
	argv[0][0] = "GET";
	argv[0][1] = k0;
	argv[1][0] = "HGET";
	argv[1][1] = hk;
	argv[1][2] = f0;
	for (int i = 0; i < 2; i++) {
		for (int j = 0; j < 2 + i; j++)
			lens[i][j] = strlen(argv[i][j]);
		reqs[i] = (struct req){2 + i, argv[i], lens[i], -1};
	}
	err = redis_run_reqs(m, RUN_RETRY, reqs, idx == 0 ? 2 : 1, out);
	if (err)
		return err;
	const redisReply *r = out[0];
	if (idx == 0 && out[1]->type == REDIS_REPLY_STRING && out[1]->len)
		r = out[1]; /* never both (SCHEMA.md) */
	if (r->type == REDIS_REPLY_NIL) {
		tag->bytes = 0;
	} else if (r->type != REDIS_REPLY_STRING) {
		err = META_EPROTO;
	} else {
		tag->bytes = (uint64_t)r->len;
		err = redis_recs_unpack(r->str, (size_t)r->len, s, n);
	}
	if (!err) {
		SHA1((const unsigned char *)(r->str ? r->str : ""),
		     (size_t)tag->bytes, md);
		for (int i = 0; i < SHA_DIGEST_LENGTH; i++)
			snprintf(tag->sha1 + 2 * i, 3, "%02x", md[i]);
	}
	for (int i = 0; i < (idx == 0 ? 2 : 1); i++)
		freeReplyObject(out[i]);
	return err;
}

int meta_compact_chunk(struct meta *m, uint64_t ino, uint32_t idx,
		       const struct meta_chunk_tag *tag,
		       const struct meta_slice *s, size_t n, uint32_t delay)
{
	struct cmd c;
	uint8_t *buf;
	size_t len = 0;
	int err;

	if (m->opts.read_only)
		return EROFS;
	for (size_t i = 0; i < n; i++)
		if (!s[i].id || rec_bad(&s[i]))
			return EINVAL;
	buf = malloc(n * REC_MAX + 1);
	if (!buf)
		return ENOMEM;
	for (size_t i = 0; i < n; i++)
		len += redis_rec_pack(buf + len, &s[i]);
	redis_cmd_script(m, &c, SC_COMPACT_CHUNK);
	redis_cmd_u64(&c, ino);
	redis_cmd_u64(&c, idx);
	redis_cmd_u64(&c, tag->bytes);
	redis_cmd_str(&c, tag->sha1);
	redis_cmd_u64(&c, delay);
	redis_cmd_bin(&c, buf, len);
	err = redis_run_script_void(m, &c);
	free(buf);
	return err;
}

int meta_pack_move(struct meta *m, uint64_t ino, uint32_t idx,
		   const struct meta_slice *old, const struct meta_slice *new,
		   size_t *moved)
{
	uint8_t a[REC_MAX], b[REC_MAX];
	struct cmd c;
	redisReply *r;
	int err;

	if (m->opts.read_only)
		return EROFS;
	if (!old->pack || !new->pack || rec_bad(old) || rec_bad(new) ||
	    old->id != new->id)
		return EINVAL;
	size_t la = redis_rec_pack(a, old), lb = redis_rec_pack(b, new);
	redis_cmd_script(m, &c, SC_PACK_MOVE);
	redis_cmd_u64(&c, ino);
	redis_cmd_u64(&c, idx);
	redis_cmd_bin(&c, a, la);
	redis_cmd_bin(&c, b, lb);
	err = redis_run_script(m, 0, &c, &r);
	if (err)
		return err;
	if (moved)
		*moved = r->elements > 1
			     ? (size_t)redis_reply_u64(r->element[1])
			     : 0;
	freeReplyObject(r);
	return 0;
}

/* ---- data clones ---------------------------------------------------- */

int meta_clone_data(struct meta *m, uint64_t src, uint64_t dst,
		    struct meta_attr *a)
{
	return meta_clone_data_q(m, NULL, src, dst, a);
}

int meta_clone_data_q(struct meta *m, const struct meta_qchain *q,
		      uint64_t src, uint64_t dst, struct meta_attr *a)
{
	char qs[QCHAIN_STR_MAX];
	struct cmd c;

	if (m->opts.read_only)
		return EROFS;
	redis_cmd_script(m, &c, SC_CLONE_DATA);
	redis_cmd_u64(&c, src);
	redis_cmd_u64(&c, dst);
	redis_cmd_qchain(&c, q, qs);
	return redis_run_script_attr(m, &c, a);
}

/* ---- packs ----------------------------------------------------------- */

int meta_pack_total(struct meta *m, uint64_t pack, uint64_t total, int *dead)
{
	struct cmd c;
	redisReply *r;
	int err;

	if (dead)
		*dead = 0;
	if (m->opts.read_only)
		return EROFS;
	if (!pack || total > META_PACK_OPEN)
		return EINVAL;
	redis_cmd_script(m, &c, SC_PACK_TOTAL);
	redis_cmd_u64(&c, pack);
	redis_cmd_u64(&c, total);
	err = redis_run_script(m, RUN_RETRY, &c, &r);
	if (err)
		return err;
	if (r->elements != 2)
		err = META_EPROTO;
	else if (dead)
		*dead = redis_reply_u64(r->element[1]) > 0;
	freeReplyObject(r);
	return err;
}

/* "b<id>_<idx>" or "p<id>" (SCHEMA.md, staging) */
static void cmd_staging_name(struct cmd *c, char kind, uint64_t id,
			     uint32_t idx)
{
	if (kind == 'b')
		redis_cmd_fmt(c, "b%" PRIu64 "_%" PRIu32, id, idx);
	else
		redis_cmd_fmt(c, "p%" PRIu64, id);
}

int meta_staging_mark(struct meta *m, char kind, uint64_t id, uint32_t idx)
{
	struct cmd c;

	if (m->opts.read_only)
		return EROFS;
	if ((kind != 'b' && kind != 'p') || !id)
		return EINVAL;
	redis_cmd_init(&c, "HSET");
	redis_cmd_str(&c, "staging");
	cmd_staging_name(&c, kind, id, idx);
	redis_cmd_u64(&c, meta_session_id(m));
	return redis_run_void(m, RUN_RETRY, &c);
}

int meta_staging_done(struct meta *m, char kind, uint64_t id, uint32_t idx)
{
	struct cmd c;

	if (m->opts.read_only)
		return EROFS;
	if ((kind != 'b' && kind != 'p') || !id)
		return EINVAL;
	redis_cmd_script(m, &c, SC_STAGING_DONE);
	cmd_staging_name(&c, kind, id, idx);
	return redis_run_script_void(m, &c);
}

int meta_pack_usage(struct meta *m, uint64_t pack, uint64_t *total,
		    uint64_t *dead)
{
	struct cmd c;
	redisReply *r;
	int err;

	redis_cmd_init(&c, "EVAL");
	redis_cmd_str(&c, "return {redis.call('HGET', 'packs', ARGV[1]), "
			  "redis.call('HGET', 'packdead', ARGV[1])}");
	redis_cmd_str(&c, "0");
	redis_cmd_u64(&c, pack);
	err = redis_run(m, RUN_RETRY, &c, &r);
	if (err)
		return err;
	if (r->type != REDIS_REPLY_ARRAY)
		err = META_EPROTO;
	else if (r->elements < 1 || r->element[0]->type != REDIS_REPLY_STRING)
		err = ENOENT;
	else {
		*total = redis_reply_u64(r->element[0]);
		*dead = r->elements > 1 ? redis_reply_u64(r->element[1]) : 0;
	}
	freeReplyObject(r);
	return err;
}
