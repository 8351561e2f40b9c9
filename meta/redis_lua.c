/*
 * redis_lua.c - the Lua scripts of the Redis metadata engine (meta/redis.c):
 * every change that touches more than one key is one of these, run with
 * EVALSHA so that it is atomic and costs one round trip. Each script is
 * the shared prelude (record codecs, inode cache, reclamation helpers)
 * followed by its body. Key layout: meta/SCHEMA.md.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "meta/meta.h"

#define S_(x) #x
#define S(x)  S_(x)

/* The prelude spells these out; keep them in step. */
_Static_assert(META_CHUNK_SIZE == 67108864, "CHUNK in the Lua prelude");
_Static_assert(META_FILE == 1 && META_DIR == 2 && META_SYMLINK == 3 &&
		   META_BLK == 5 && META_CHR == 6,
	       "types in the Lua prelude");

const char *meta_redis_lua_prelude(void);
const char *meta_redis_lua(const char *name);
char *meta_redis_lua_library(char *lib, size_t cap);

/* ---- prelude --------------------------------------------------------- */

/* clang-format off */
static const char prelude[] =
	"-- prelude: shared by every script. Records are packed with the struct\n"
	"-- library; Lua numbers are doubles, so inode numbers, slice ids and\n"
	"-- lengths must stay below 2^53 (documented in SCHEMA.md).\n"
	"local CHUNK = 67108864\n"
	"local FILE, DIR, SYMLINK, BLK, CHR = 1, 2, 3, 5, 6\n"
	"local EPERM, ENOENT, EBUSY, EEXIST, ENODEV = " S(EPERM) ", " S(ENOENT) ", " S(EBUSY) ", " S(EEXIST) ", " S(ENODEV) "\n"
	"local ENOTDIR, EISDIR, EINVAL, ENOTEMPTY, ENODATA = " S(ENOTDIR) ", " S(EISDIR) ", " S(EINVAL) ", " S(ENOTEMPTY) ", " S(ENODATA) "\n"
	"local S_ISUID, S_ISGID, S_IXGRP = 2048, 1024, 8\n"
	"local VERSIONS = '" META_VERSIONS "'\n"
	"local AFMT, ALEN = '<BBHI4I4I4I8I8i5I4i5I4i5I4', 59\n"
	"-- slice records: full (form 1), or short (2) for a whole slice; 3 and 4\n"
	"-- are 2 and 1 followed by the frame's place in a pack: pack, poff, plen\n"
	"local RFMT, RLEN = '<BI4I8I4I4I4', 25\n"
	"local SFMT, SLEN = '<BI4I8I4', 17\n"
	"local PFMT, PLEN = '<I8I4I4', 16\n"
	"\n"
	"local function d(n)\n"
	"	return string.format('%d', n)\n"
	"end\n"
	"local function key(p, n)\n"
	"	return p .. string.format('%d', n)\n"
	"end\n"
	"local function ckey(ino, idx)\n"
	"	return string.format('c%d_%d', ino, idx)\n"
	"end\n"
	"\n"
	"-- server time, read once per script so that every field touched by one\n"
	"-- operation carries the same timestamp\n"
	"local tsec, tns\n"
	"local function now()\n"
	"	if not tsec then\n"
	"		local t = redis.call('TIME')\n"
	"		tsec, tns = tonumber(t[1]), tonumber(t[2]) * 1000\n"
	"	end\n"
	"	return tsec, tns\n"
	"end\n"
	"\n"
	"local function attr_unpack(s)\n"
	"	if #s ~= ALEN or string.byte(s, 1) ~= 1 then\n"
	"		error('granary: corrupt inode record')\n"
	"	end\n"
	"	local _, ty, mode, uid, gid, nlink, len, par, as, an, ms, mn, cs, cn =\n"
	"		struct.unpack(AFMT, s)\n"
	"	return {ty = ty, mode = mode, uid = uid, gid = gid, nlink = nlink,\n"
	"		len = len, par = par, as = as, an = an, ms = ms, mn = mn,\n"
	"		cs = cs, cn = cn}\n"
	"end\n"
	"\n"
	"local function attr_pack(a)\n"
	"	return struct.pack(AFMT, 1, a.ty, a.mode, a.uid, a.gid, a.nlink, a.len,\n"
	"		a.par, a.as, a.an, a.ms, a.mn, a.cs, a.cn)\n"
	"end\n"
	"-- A regular file's par field holds its stored bytes + 1: an upper bound\n"
	"-- of the bytes of data it holds (written, fallocated, minus punched;\n"
	"-- never above the length). 0: not known (a file from before the field),\n"
	"-- counted as its length. usedspace is the sum of these (SCHEMA.md).\n"
	"local function stored(a)\n"
	"	if a.par == 0 then\n"
	"		return a.len\n"
	"	end\n"
	"	return math.min(a.par - 1, a.len)\n"
	"end\n"
	"-- the file's stored bytes become n (clamped to [0, length]);\n"
	"-- usedspace follows. The caller writes the record (idirty).\n"
	"local function stored_set(a, n)\n"
	"	local o = stored(a)\n"
	"	n = math.max(0, math.min(n, a.len))\n"
	"	a.par = n + 1\n"
	"	if n ~= o then\n"
	"		redis.call('INCRBY', 'usedspace', d(n - o))\n"
	"	end\n"
	"end\n"
	"\n"
	"-- Inodes live IB to a hash, n<ino div IB> (SCHEMA.md): field ino % IB\n"
	"-- holds the attributes, field IB + ino % IB chunk 0's slice records (the\n"
	"-- tail) while they fit in TAILMAX bytes; a longer tail is in c<ino>_0.\n"
	"-- Both sizes keep the hash in Redis's compact encoding (listpack: at most\n"
	"-- 128 fields of at most 64 bytes by default), where a field costs its\n"
	"-- bytes plus about 3.\n"
	"local IB, TAILMAX = 32, 64\n"
	"local function ib(ino)\n"
	"	return string.format('n%d', math.floor(ino / IB))\n"
	"end\n"
	"local function iaf(ino)\n"
	"	return d(ino % IB)\n"
	"end\n"
	"local function itf(ino)\n"
	"	return d(ino % IB + IB)\n"
	"end\n"
	"\n"
	"-- inode cache: a script reads each inode once and writes it once (iflush),\n"
	"-- so that two names for one inode (rename within a directory) never see\n"
	"-- stale copies of each other\n"
	"local icache, idirty = {}, {}\n"
	"local function iget(ino)\n"
	"	local a = icache[ino]\n"
	"	if a == nil then\n"
	"		local s = redis.call('HGET', ib(ino), iaf(ino))\n"
	"		a = s and attr_unpack(s) or false\n"
	"		icache[ino] = a\n"
	"	end\n"
	"	return a\n"
	"end\n"
	"local function iflush()\n"
	"	for ino in pairs(idirty) do\n"
	"		local a = icache[ino]\n"
	"		if a then\n"
	"			redis.call('HSET', ib(ino), iaf(ino), attr_pack(a))\n"
	"		end\n"
	"	end\n"
	"	idirty = {}\n"
	"end\n"
	"-- chunk 0's slice records ('' when none, or no such inode): in one of\n"
	"-- the two places, never both\n"
	"local function tail_get(ino)\n"
	"	return (redis.call('HGET', ib(ino), itf(ino)) or '') ..\n"
	"		(redis.call('GET', ckey(ino, 0)) or '')\n"
	"end\n"
	"-- chunk 0 becomes t (the inode's attributes exist; fresh: it has no\n"
	"-- chunk 0 yet, nothing to delete)\n"
	"local function tail_set(ino, t, fresh)\n"
	"	if #t > TAILMAX then\n"
	"		redis.call('SET', ckey(ino, 0), t)\n"
	"		if not fresh then\n"
	"			redis.call('HDEL', ib(ino), itf(ino))\n"
	"		end\n"
	"		return\n"
	"	end\n"
	"	if #t > 0 then\n"
	"		redis.call('HSET', ib(ino), itf(ino), t)\n"
	"	elseif not fresh then\n"
	"		redis.call('HDEL', ib(ino), itf(ino))\n"
	"	end\n"
	"	if not fresh then\n"
	"		redis.call('DEL', ckey(ino, 0))\n"
	"	end\n"
	"end\n"
	"-- records t appended to chunk 0; a tail outgrowing TAILMAX moves to\n"
	"-- c<ino>_0 for good (APPEND there reserves room for growth, which a\n"
	"-- file written in many pieces wants)\n"
	"local function tail_append(ino, t)\n"
	"	local b, f, k0 = ib(ino), itf(ino), ckey(ino, 0)\n"
	"	local s = redis.call('HGET', b, f)\n"
	"	-- a tail in the field means none in c<ino>_0 (never both)\n"
	"	if s or redis.call('EXISTS', k0) == 0 then\n"
	"		s = (s or '') .. t\n"
	"		if #s <= TAILMAX then\n"
	"			redis.call('HSET', b, f, s)\n"
	"			return\n"
	"		end\n"
	"		redis.call('HDEL', b, f)\n"
	"		t = s\n"
	"	end\n"
	"	redis.call('APPEND', k0, t)\n"
	"end\n"
	"-- the whole record of an inode, attributes then chunk 0, or nil\n"
	"local function irec(ino)\n"
	"	local r = redis.call('HMGET', ib(ino), iaf(ino), itf(ino))\n"
	"	local s, t = r[1], r[2]\n"
	"	if not s then\n"
	"		return nil\n"
	"	end\n"
	"	if t then\n"
	"		return s .. t\n"
	"	end\n"
	"	if string.byte(s, 2) == FILE and struct.unpack('<I8', s, 17) > 0 then\n"
	"		return s .. (redis.call('GET', ckey(ino, 0)) or '')\n"
	"	end\n"
	"	return s\n"
	"end\n"
"local function getdir(ino)\n"
	"	local a = iget(ino)\n"
	"	if not a then\n"
	"		return nil, ENOENT\n"
	"	end\n"
	"	if a.ty ~= DIR then\n"
	"		return nil, ENOTDIR\n"
	"	end\n"
	"	return a\n"
	"end\n"
	"-- ctime, and mtime too when m\n"
	"local function touch(ino, m)\n"
	"	local a = iget(ino)\n"
	"	local s, ns = now()\n"
	"	a.cs, a.cn = s, ns\n"
	"	if m then\n"
	"		a.ms, a.mn = s, ns\n"
	"	end\n"
	"	idirty[ino] = true\n"
	"end\n"
	"\n"
	"-- directory entry value: type, then the inode number little endian\n"
	"-- without its high zero bytes (2-9 bytes: 6 up to inode 2^40, small\n"
	"-- enough for the allocator's 8-byte class)\n"
	"local function dent_pack(ino, ty)\n"
	"	local s, n = struct.pack('<BI8', ty, ino), 9\n"
	"	while n > 2 and string.byte(s, n) == 0 do\n"
	"		n = n - 1\n"
	"	end\n"
	"	return string.sub(s, 1, n)\n"
	"end\n"
	"local function dent_unpack(s)\n"
	"	if #s < 2 or #s > 9 then\n"
	"		error('granary: corrupt directory entry')\n"
	"	end\n"
	"	local ino = 0\n"
	"	for i = #s, 2, -1 do\n"
	"		ino = ino * 256 + string.byte(s, i)\n"
	"	end\n"
	"	return ino, string.byte(s, 1)\n"
	"end\n"
	"\n"
	"-- the slice record at offset o of s: its length, pos, id, size, off,\n"
	"-- len, and for a slice in a pack: pack, plen (else nil)\n"
	"local function rec_at(s, o)\n"
	"	local v = string.byte(s, o)\n"
	"	local left, _, n, pos, id, size, off, len = #s - o + 1\n"
	"	if (v == 1 or v == 4) and left >= RLEN then\n"
	"		_, pos, id, size, off, len = struct.unpack(RFMT, s, o)\n"
	"		n = RLEN\n"
	"	elseif (v == 2 or v == 3) and left >= SLEN then\n"
	"		_, pos, id, size = struct.unpack(SFMT, s, o)\n"
	"		n, off, len = SLEN, 0, size\n"
	"	else\n"
	"		error('granary: corrupt slice record')\n"
	"	end\n"
	"	if v < 3 then\n"
	"		return n, pos, id, size, off, len\n"
	"	end\n"
	"	if left < n + PLEN then\n"
	"		error('granary: corrupt slice record')\n"
	"	end\n"
	"	local pack, _, plen = struct.unpack(PFMT, s, o + n)\n"
	"	return n + PLEN, pos, id, size, off, len, pack, plen\n"
	"end\n"
	"\n"
	"-- a chunk record referencing a slice is gone; the last reference queues\n"
	"-- the slice for deletion (sliceref holds references beyond the first)\n"
	"local function slice_unref(rec, id)\n"
	"	if id == 0 then\n"
	"		return\n"
	"	end\n"
	"	local r = redis.call('HINCRBY', 'sliceref', d(id), -1)\n"
	"	if r <= 0 then\n"
	"		redis.call('HDEL', 'sliceref', d(id))\n"
	"	end\n"
	"	if r < 0 then\n"
	"		redis.call('RPUSH', 'delslices', rec)\n"
	"	end\n"
	"end\n"
	"local function recs_unref(s)\n"
	"	local o = 1\n"
	"	while o <= #s do\n"
	"		local n, _, id = rec_at(s, o)\n"
	"		slice_unref(string.sub(s, o, o + n - 1), id)\n"
	"		o = o + n\n"
	"	end\n"
	"end\n"
	"-- drop c<ino>_<idx> (chunk 0 of a live inode is its tail: see truncate)\n"
	"local function chunk_drop(ino, idx)\n"
	"	local k = ckey(ino, idx)\n"
	"	local s = redis.call('GET', k)\n"
	"	if not s then\n"
	"		return\n"
	"	end\n"
	"	recs_unref(s)\n"
	"	redis.call('DEL', k)\n"
	"end\n"
	"\n"
	"-- bytes of data (records with a slice id) that chunk list s shows in\n"
	"-- [lo, hi): newer records cover older ones. A list of more than\n"
	"-- DATAMAX records is not resolved (the cost grows with its square):\n"
	"-- nil, and the caller assumes the worst.\n"
	"local DATAMAX = 2000\n"
	"local function data_in(s, lo, hi)\n"
	"	local recs, o = {}, 1\n"
	"	while o <= #s do\n"
	"		local n, pos, id, _, _, len = rec_at(s, o)\n"
	"		recs[#recs + 1] = {pos, pos + len, id}\n"
	"		o = o + n\n"
	"		if #recs > DATAMAX then\n"
	"			return nil\n"
	"		end\n"
	"	end\n"
	"	-- newest first, each record takes what is still uncovered\n"
	"	local gaps, sum = {{lo, hi}}, 0\n"
	"	for i = #recs, 1, -1 do\n"
	"		if #gaps == 0 then\n"
	"			break\n"
	"		end\n"
	"		local r, ng = recs[i], {}\n"
	"		for _, g in ipairs(gaps) do\n"
	"			local a, b = math.max(g[1], r[1]), math.min(g[2], r[2])\n"
	"			if a < b then\n"
	"				if r[3] ~= 0 then\n"
	"					sum = sum + b - a\n"
	"				end\n"
	"				if g[1] < a then\n"
	"					ng[#ng + 1] = {g[1], a}\n"
	"				end\n"
	"				if b < g[2] then\n"
	"					ng[#ng + 1] = {b, g[2]}\n"
	"				end\n"
	"			else\n"
	"				ng[#ng + 1] = g\n"
	"			end\n"
	"		end\n"
	"		gaps = ng\n"
	"	end\n"
	"	return sum\n"
	"end\n"
	"\n"
	"-- A directory that had versions hands its versions directory over to\n"
	"-- the snapshot cleaner: listed in snapshots as left by nobody (sid 0),\n"
	"-- its drop walk starting at the top with source 0 (see snap_drop)\n"
	"local function vdir_drop(ino)\n"
	"	local v = redis.call('HGET', 'vdirs', d(ino))\n"
	"	if not v then\n"
	"		return\n"
	"	end\n"
	"	redis.call('HDEL', 'vdirs', d(ino))\n"
	"	redis.call('DEL', key('v', ino))\n"
	"	if redis.call('EXISTS', 'd' .. v) == 0 then\n"
	"		-- no version left: the empty directory goes at once\n"
	"		local vi = tonumber(v)\n"
	"		redis.call('HDEL', ib(vi), iaf(vi))\n"
	"		redis.call('DEL', 'x' .. v)\n"
	"		redis.call('DECR', 'totalinodes')\n"
	"		icache[vi], idirty[vi] = false, nil\n"
	"		return\n"
	"	end\n"
	"	redis.call('DEL', 'snapdirs:' .. v, 'snapmap:' .. v)\n"
	"	redis.call('RPUSH', 'snapdirs:' .. v, struct.pack('<I8I8', 0,\n"
	"		tonumber(v)))\n"
	"	redis.call('HSET', 'snapshots', v, '0:' .. d(now()))\n"
	"end\n"
	"\n"
	"-- no name and no opener left: delete the inode, queue its data\n"
	"local function inode_destroy(ino)\n"
	"	local a = iget(ino)\n"
	"	if a.ty == DIR then\n"
	"		vdir_drop(ino)\n"
	"	end\n"
	"	if a.ty == FILE then\n"
	"		-- chunk 0 moves out of the inode's hash (deleted below) to\n"
	"		-- its own key, where reclamation finds it like any chunk.\n"
	"		-- Records exist only below the length: len 0 has none.\n"
	"		local t = redis.call('HGET', ib(ino), itf(ino))\n"
	"		if t then\n"
	"			redis.call('SET', ckey(ino, 0), t)\n"
	"		end\n"
	"		if a.len > 0 then\n"
	"			redis.call('ZADD', 'delfiles', now(),\n"
	"				d(ino) .. ':' .. d(a.len))\n"
	"		end\n"
	"		if stored(a) > 0 then\n"
	"			redis.call('DECRBY', 'usedspace', d(stored(a)))\n"
	"		end\n"
	"	end\n"
	"	redis.call('DECR', 'totalinodes')\n"
	"	redis.call('HDEL', ib(ino), iaf(ino), itf(ino))\n"
	"	redis.call('DEL', key('x', ino), key('s', ino), key('d', ino))\n"
	"	icache[ino] = false\n"
	"	idirty[ino] = nil\n"
	"end\n"
	"-- true when the inode was deleted\n"
	"local function inode_release(ino)\n"
	"	local a = iget(ino)\n"
	"	if a and a.nlink == 0 and redis.call('EXISTS', key('o', ino)) == 0 then\n"
	"		inode_destroy(ino)\n"
	"		return true\n"
	"	end\n"
	"	return false\n"
	"end\n"
	"-- Objects staged on a client's disk and not yet in the store (writeback)\n"
	"-- are named in staging ('b<id>_<idx>' a block, 'p<pack>' a pack); the\n"
	"-- record that would have their objects deleted waits in stagedead until\n"
	"-- the client has put them (staging_done), else the put would come after\n"
	"-- the delete and leave the object behind.\n"
	"local nstaging\n"
	"-- does slice id (size bytes, blocks of its own) have a block staged?\n"
	"local function staged_blocks(id, size)\n"
	"	nstaging = nstaging or redis.call('HLEN', 'staging')\n"
	"	if nstaging == 0 then\n"
	"		return false\n"
	"	end\n"
	"	local bs = tonumber(redis.call('HGET', 'setting', 'block_size'))\n"
	"	for idx = 0, math.max(math.ceil(size / bs), 1) - 1 do\n"
	"		if redis.call('HEXISTS', 'staging',\n"
	"			string.format('b%d_%d', id, idx)) == 1 then\n"
	"			return true\n"
	"		end\n"
	"	end\n"
	"	return false\n"
	"end\n"
	"-- plen more dead bytes in pack; a pack whose dead bytes reach its\n"
	"-- recorded total is forgotten and handed out (appended to out) for its\n"
	"-- object to be deleted, or parked in stagedead while it is staged.\n"
	"-- A pack with no total yet keeps counting. True when all dead.\n"
	"local function pack_dead(pack, plen, out)\n"
	"	local dead = redis.call('HINCRBY', 'packdead', d(pack), plen)\n"
	"	local total = tonumber(redis.call('HGET', 'packs', d(pack)))\n"
	"	if total and dead >= total then\n"
	"		redis.call('HDEL', 'packs', d(pack))\n"
	"		redis.call('HDEL', 'packdead', d(pack))\n"
	"		local rec = struct.pack('<BI8I8', 5, pack, total)\n"
	"		if redis.call('HEXISTS', 'staging', 'p' .. d(pack)) == 1 then\n"
	"			redis.call('HSET', 'stagedead', 'p' .. d(pack), rec)\n"
	"		else\n"
	"			out[#out + 1] = rec\n"
	"		end\n"
	"		return true\n"
	"	elseif dead == 0 then\n"
	"		redis.call('HDEL', 'packdead', d(pack))\n"
	"	end\n"
	"	return false\n"
	"end\n"
	"\n"
	"-- the per-call state back to its start: a script (EVALSHA) runs the\n"
	"-- prelude anew each time, a function (FCALL) keeps its locals from one\n"
	"-- call to the next and so calls this first\n"
	"local function fresh()\n"
	"	tsec, tns, icache, idirty, nstaging = nil, nil, {}, {}, nil\n"
	"end\n"
	"-- ---- script body ----\n";
/* clang-format on */

/* ---- scripts --------------------------------------------------------- */
/* clang-format off */

static const char s_format[] =
    "-- ARGV: setting field/value pairs. Refuses a database that holds "
    "anything.\n"
    "if redis.call('EXISTS', 'setting') == 1 then\n"
    "	return {EEXIST}\n"
    "end\n"
    "if redis.call('DBSIZE') > 0 then\n"
    "	return {ENOTEMPTY}\n"
    "end\n"
    "local s, ns = now()\n"
    "for i = 1, #ARGV - 1, 2 do\n"
    "	redis.call('HSET', 'setting', ARGV[i], ARGV[i + 1])\n"
    "end\n"
    "if redis.call('HGET', 'setting', 'created') == '0' then\n"
    "	redis.call('HSET', 'setting', 'created', d(s))\n"
    "end\n"
    "local root = {ty = DIR, mode = 493, uid = 0, gid = 0, nlink = 2, len = "
    "0,\n"
    "	par = 1, as = s, an = ns, ms = s, mn = ns, cs = s, cn = ns}\n"
    "redis.call('HSET', ib(1), iaf(1), attr_pack(root))\n"
    "redis.call('SET', 'nextinode', 1)\n"
    "redis.call('SET', 'totalinodes', 1)\n"
    "redis.call('SET', 'usedspace', 0)\n"
    "return {0}\n";

static const char s_lookup[] =
    "-- ARGV: parent, name, whole (1: the whole inode record, with chunk\n"
    "-- 0 behind the attributes). Returns {0, ino, packed attr[+chunk 0]}.\n"
    "local parent, name = tonumber(ARGV[1]), ARGV[2]\n"
    "local e = redis.call('HGET', key('d', parent), name)\n"
    "if not e and name == VERSIONS then\n"
    "	-- the directory's versions, reached by lookup, never listed\n"
    "	local v = redis.call('HGET', 'vdirs', d(parent))\n"
    "	e = v and dent_pack(tonumber(v), DIR)\n"
    "end\n"
    "if not e then\n"
    "	local _, err = getdir(parent)\n"
    "	return {err or ENOENT}\n"
    "end\n"
    "local ino = dent_unpack(e)\n"
    "local s\n"
    "if ARGV[3] == '1' then\n"
    "	s = irec(ino)\n"
    "else\n"
    "	s = redis.call('HGET', ib(ino), iaf(ino))\n"
    "end\n"
    "if not s then\n"
    "	return {ENOENT}\n"
    "end\n"
    "return {0, ino, s}\n";

static const char s_mknod[] =
    "-- ARGV: parent, name, ino, type, mode, uid, gid, rdev, symlink target,\n"
    "-- sid to register an open of the new inode for ('0': none).\n"
    "-- Returns {0, the new inode's attributes, the parent's}.\n"
    "local parent, name, ino = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])\n"
    "local ty, mode = tonumber(ARGV[4]), tonumber(ARGV[5])\n"
    "local uid, gid, rdev = tonumber(ARGV[6]), tonumber(ARGV[7]), "
    "tonumber(ARGV[8])\n"
    "local p, err = getdir(parent)\n"
    "if not p then\n"
    "	return {err}\n"
    "end\n"
    "if redis.call('HEXISTS', key('d', parent), name) == 1 then\n"
    "	return {EEXIST}\n"
    "end\n"
    "if redis.call('HEXISTS', ib(ino), iaf(ino)) == 1 then\n"
    "	error('granary: new inode number already in use')\n"
    "end\n"
    "-- BSD group semantics under a setgid directory, as ext4 does\n"
    "if bit.band(p.mode, S_ISGID) ~= 0 then\n"
    "	gid = p.gid\n"
    "	if ty == DIR then\n"
    "		mode = bit.bor(mode, S_ISGID)\n"
    "	end\n"
    "end\n"
    "local s, ns = now()\n"
    "local a = {ty = ty, mode = mode, uid = uid, gid = gid, nlink = 1, len = "
    "0,\n"
    "	par = 0, as = s, an = ns, ms = s, mn = ns, cs = s, cn = ns}\n"
    "if ty == DIR then\n"
    "	a.nlink, a.par = 2, parent\n"
    "	p.nlink = p.nlink + 1\n"
    "elseif ty == BLK or ty == CHR then\n"
    "	a.par = rdev\n"
    "elseif ty == FILE then\n"
    "	a.par = 1 -- stored bytes + 1: none yet\n"
    "elseif ty == SYMLINK then\n"
    "	a.len = #ARGV[9]\n"
    "	redis.call('SET', key('s', ino), ARGV[9])\n"
    "end\n"
    "icache[ino], idirty[ino] = a, true\n"
    "redis.call('HSET', key('d', parent), name, dent_pack(ino, ty))\n"
    "touch(parent, true)\n"
    "redis.call('INCR', 'totalinodes')\n"
    "if ARGV[10] and ARGV[10] ~= '0' then\n"
    "	redis.call('HINCRBY', key('o', ino), ARGV[10], 1)\n"
    "	redis.call('SADD', 'so' .. ARGV[10], d(ino))\n"
    "end\n"
    "iflush()\n"
    "return {0, attr_pack(a), attr_pack(p)}\n";

static const char s_link[] =
    "-- ARGV: ino, newparent, newname.\n"
    "local ino, parent, name = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]\n"
    "local a = iget(ino)\n"
    "if not a or a.nlink == 0 then\n"
    "	return {ENOENT}\n"
    "end\n"
    "if a.ty == DIR then\n"
    "	return {EPERM}\n"
    "end\n"
    "local p, err = getdir(parent)\n"
    "if not p then\n"
    "	return {err}\n"
    "end\n"
    "if redis.call('HEXISTS', key('d', parent), name) == 1 then\n"
    "	return {EEXIST}\n"
    "end\n"
    "redis.call('HSET', key('d', parent), name, dent_pack(ino, a.ty))\n"
    "a.nlink = a.nlink + 1\n"
    "touch(ino, false)\n"
    "touch(parent, true)\n"
    "iflush()\n"
    "return {0, attr_pack(a)}\n";

static const char s_unlink[] =
    "-- ARGV: parent, name.\n"
    "local parent, name = tonumber(ARGV[1]), ARGV[2]\n"
    "local p, err = getdir(parent)\n"
    "if not p then\n"
    "	return {err}\n"
    "end\n"
    "local e = redis.call('HGET', key('d', parent), name)\n"
    "if not e then\n"
    "	return {ENOENT}\n"
    "end\n"
    "local ino, ty = dent_unpack(e)\n"
    "if ty == DIR then\n"
    "	return {EISDIR}\n"
    "end\n"
    "redis.call('HDEL', key('d', parent), name)\n"
    "touch(parent, true)\n"
    "local a = iget(ino)\n"
    "if a then\n"
    "	if a.nlink > 0 then\n"
    "		a.nlink = a.nlink - 1\n"
    "	end\n"
    "	touch(ino, false)\n"
    "	inode_release(ino)\n"
    "end\n"
    "iflush()\n"
    "return {0}\n";

static const char s_rmdir[] =
    "-- ARGV: parent, name.\n"
    "local parent, name = tonumber(ARGV[1]), ARGV[2]\n"
    "local p, err = getdir(parent)\n"
    "if not p then\n"
    "	return {err}\n"
    "end\n"
    "local e = redis.call('HGET', key('d', parent), name)\n"
    "if not e then\n"
    "	return {ENOENT}\n"
    "end\n"
    "local ino, ty = dent_unpack(e)\n"
    "if ty ~= DIR then\n"
    "	return {ENOTDIR}\n"
    "end\n"
    "if ino == 1 then\n"
    "	return {EBUSY}\n"
    "end\n"
    "if redis.call('HLEN', key('d', ino)) > 0 then\n"
    "	return {ENOTEMPTY}\n"
    "end\n"
    "redis.call('HDEL', key('d', parent), name)\n"
    "if p.nlink > 2 then\n"
    "	p.nlink = p.nlink - 1\n"
    "end\n"
    "touch(parent, true)\n"
    "if iget(ino) then\n"
    "	inode_destroy(ino)\n"
    "end\n"
    "iflush()\n"
    "return {0}\n";

static const char s_rename[] =
    "-- ARGV: parent, name, newparent, newname, flags (0, 1 = "
    "RENAME_NOREPLACE,\n"
    "-- 2 = RENAME_EXCHANGE). Every check comes before the first write: a Lua\n"
    "-- error does not roll back what a script already did.\n"
    "local P, N, NP, NN = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), "
    "ARGV[4]\n"
    "local flags = tonumber(ARGV[5])\n"
    "local exchange = flags == 2\n"
    "local pa, npa, err\n"
    "pa, err = getdir(P)\n"
    "if not pa then\n"
    "	return {err}\n"
    "end\n"
    "npa, err = getdir(NP)\n"
    "if not npa then\n"
    "	return {err}\n"
    "end\n"
    "local se = redis.call('HGET', key('d', P), N)\n"
    "if not se then\n"
    "	return {ENOENT}\n"
    "end\n"
    "local sino, sty = dent_unpack(se)\n"
    "local de = redis.call('HGET', key('d', NP), NN)\n"
    "local dino, dty\n"
    "if de then\n"
    "	dino, dty = dent_unpack(de)\n"
    "end\n"
    "if exchange and not de then\n"
    "	return {ENOENT}\n"
    "end\n"
    "if de and flags == 1 then\n"
    "	return {EEXIST}\n"
    "end\n"
    "-- two names of one inode (or the same name twice): POSIX says do "
    "nothing\n"
    "if de and dino == sino then\n"
    "	return {0}\n"
    "end\n"
    "-- is ino anc, or below anc? (walks the parent fields up to the root)\n"
    "local function within(anc, ino)\n"
    "	local n = 0\n"
    "	while ino ~= anc do\n"
    "		if ino == 1 then\n"
    "			return false\n"
    "		end\n"
    "		local a = iget(ino)\n"
    "		if not a then\n"
    "			return false\n"
    "		end\n"
    "		ino = a.par\n"
    "		n = n + 1\n"
    "		if n > 100000 then\n"
    "			error('granary: directory loop')\n"
    "		end\n"
    "	end\n"
    "	return true\n"
    "end\n"
    "if sty == DIR and P ~= NP and within(sino, NP) then\n"
    "	return {EINVAL}\n"
    "end\n"
    "if exchange and dty == DIR and P ~= NP and within(dino, P) then\n"
    "	return {EINVAL}\n"
    "end\n"
    "local sa = iget(sino)\n"
    "if not sa then\n"
    "	error('granary: directory entry without inode')\n"
    "end\n"
    "local da\n"
    "if de then\n"
    "	da = iget(dino)\n"
    "	if not da then\n"
    "		error('granary: directory entry without inode')\n"
    "	end\n"
    "end\n"
    "if not exchange and de then\n"
    "	if sty == DIR and dty ~= DIR then\n"
    "		return {ENOTDIR}\n"
    "	end\n"
    "	if sty ~= DIR and dty == DIR then\n"
    "		return {EISDIR}\n"
    "	end\n"
    "	if dty == DIR and redis.call('HLEN', key('d', dino)) > 0 then\n"
    "		return {ENOTEMPTY}\n"
    "	end\n"
    "end\n"
    "-- all checked: apply\n"
    "if exchange then\n"
    "	redis.call('HSET', key('d', P), N, de)\n"
    "	redis.call('HSET', key('d', NP), NN, se)\n"
    "	if P ~= NP then\n"
    "		if sty == DIR then\n"
    "			sa.par = NP\n"
    "			pa.nlink, npa.nlink = pa.nlink - 1, npa.nlink + 1\n"
    "		end\n"
    "		if dty == DIR then\n"
    "			da.par = P\n"
    "			npa.nlink, pa.nlink = npa.nlink - 1, pa.nlink + 1\n"
    "		end\n"
    "	end\n"
    "	touch(dino, false)\n"
    "else\n"
    "	if de then\n"
    "		if dty == DIR then\n"
    "			npa.nlink = npa.nlink - 1\n"
    "			inode_destroy(dino)\n"
    "		else\n"
    "			if da.nlink > 0 then\n"
    "				da.nlink = da.nlink - 1\n"
    "			end\n"
    "			touch(dino, false)\n"
    "			inode_release(dino)\n"
    "		end\n"
    "	end\n"
    "	redis.call('HDEL', key('d', P), N)\n"
    "	redis.call('HSET', key('d', NP), NN, se)\n"
    "	if sty == DIR and P ~= NP then\n"
    "		sa.par = NP\n"
    "		pa.nlink, npa.nlink = pa.nlink - 1, npa.nlink + 1\n"
    "	end\n"
    "end\n"
    "touch(sino, false)\n"
    "touch(P, true)\n"
    "touch(NP, true)\n"
    "iflush()\n"
    "return {0}\n";

static const char s_setattr[] =
    "-- ARGV: ino, set (META_SET_*), mode, uid, gid, atime, atimens, mtime,\n"
    "-- mtimens.\n"
    "local ino, set = tonumber(ARGV[1]), tonumber(ARGV[2])\n"
    "local a = iget(ino)\n"
    "if not a then\n"
    "	return {ENOENT}\n"
    "end\n"
    "local function has(f)\n"
    "	return bit.band(set, f) ~= 0\n"
    "end\n"
    "local s, ns = now()\n"
    "if has(1) then\n"
    "	a.mode = bit.band(tonumber(ARGV[3]), 4095)\n"
    "end\n"
    "local chown = false\n"
    "if has(2) and a.uid ~= tonumber(ARGV[4]) then\n"
    "	a.uid, chown = tonumber(ARGV[4]), true\n"
    "end\n"
    "if has(4) and a.gid ~= tonumber(ARGV[5]) then\n"
    "	a.gid, chown = tonumber(ARGV[5]), true\n"
    "end\n"
    "-- a new owner must not inherit set-id powers (setgid without group exec\n"
    "-- is mandatory locking, not a power: it stays)\n"
    "if chown and a.ty ~= DIR then\n"
    "	a.mode = bit.band(a.mode, bit.bnot(S_ISUID))\n"
    "	if bit.band(a.mode, S_IXGRP) ~= 0 then\n"
    "		a.mode = bit.band(a.mode, bit.bnot(S_ISGID))\n"
    "	end\n"
    "end\n"
    "if has(32) then\n"
    "	a.as, a.an = s, ns\n"
    "elseif has(8) then\n"
    "	a.as, a.an = tonumber(ARGV[6]), tonumber(ARGV[7])\n"
    "end\n"
    "if has(64) then\n"
    "	a.ms, a.mn = s, ns\n"
    "elseif has(16) then\n"
    "	a.ms, a.mn = tonumber(ARGV[8]), tonumber(ARGV[9])\n"
    "end\n"
    "a.cs, a.cn = s, ns\n"
    "idirty[ino] = true\n"
    "iflush()\n"
    "return {0, attr_pack(a)}\n";

static const char s_truncate[] =
    "-- ARGV: ino, length.\n"
    "local ino, nl = tonumber(ARGV[1]), tonumber(ARGV[2])\n"
    "local a = iget(ino)\n"
    "if not a then\n"
    "	return {ENOENT}\n"
    "end\n"
    "if a.ty == DIR then\n"
    "	return {EISDIR}\n"
    "end\n"
    "if a.ty ~= FILE then\n"
    "	return {EINVAL}\n"
    "end\n"
    "local ol = a.len\n"
    "-- stored bytes: a shorter file keeps at most its length, a longer one\n"
    "-- (sparse) what it had\n"
    "stored_set(a, math.min(stored(a), nl))\n"
    "if nl < ol then\n"
    "	-- chunks entirely past the new length go; cost is one step per chunk\n"
    "	-- of the old length, sparse or not\n"
    "	for idx = math.ceil(nl / CHUNK), math.ceil(ol / CHUNK) - 1 do\n"
    "		if idx == 0 then\n"
    "			recs_unref(tail_get(ino))\n"
    "			tail_set(ino, '')\n"
    "		else\n"
    "			chunk_drop(ino, idx)\n"
    "		end\n"
    "	end\n"
    "	-- the boundary chunk keeps its slices; a hole over the cut-off tail\n"
    "	-- makes a later extension read zeros there\n"
    "	local pos = nl % CHUNK\n"
    "	if pos ~= 0 then\n"
    "		local idx, s = math.floor(nl / CHUNK)\n"
    "		if idx == 0 then\n"
    "			s = tail_get(ino)\n"
    "		else\n"
    "			s = redis.call('GET', ckey(ino, idx))\n"
    "		end\n"
    "		local o = 1\n"
    "		while s and o <= #s do\n"
    "			local n, p, id, _, _, len = rec_at(s, o)\n"
    "			if id ~= 0 and p + len > pos then\n"
    "				local hole = struct.pack(RFMT, 1, pos, 0, 0, 0,\n"
    "					CHUNK - pos)\n"
    "				if idx == 0 then\n"
    "					tail_append(ino, hole)\n"
    "				else\n"
    "					redis.call('APPEND', ckey(ino, idx), hole)\n"
    "				end\n"
    "				break\n"
    "			end\n"
    "			o = o + n\n"
    "		end\n"
    "	end\n"
    "end\n"
    "a.len = nl\n"
    "touch(ino, true)\n"
    "iflush()\n"
    "return {0, attr_pack(a)}\n";

static const char s_fallocate[] =
    "-- ARGV: ino, mode (0 or 1 = FALLOC_FL_KEEP_SIZE), offset, length. Space "
    "is\n"
    "-- not reserved (the object store has none to reserve): only the length.\n"
    "-- The range counts as stored bytes, as a write of it would (clamped to\n"
    "-- the length), so that the space is taken from the volume's capacity.\n"
    "local ino, mode = tonumber(ARGV[1]), tonumber(ARGV[2])\n"
    "local e = tonumber(ARGV[3]) + tonumber(ARGV[4])\n"
    "local a = iget(ino)\n"
    "if not a then\n"
    "	return {ENOENT}\n"
    "end\n"
    "if a.ty == DIR then\n"
    "	return {EISDIR}\n"
    "end\n"
    "if a.ty ~= FILE then\n"
    "	return {ENODEV}\n"
    "end\n"
    "local st = stored(a)\n"
    "stored_set(a, st)\n"
    "if mode == 0 and e > a.len then\n"
    "	a.len = e\n"
    "	touch(ino, true)\n"
    "else\n"
    "	touch(ino, false)\n"
    "end\n"
    "stored_set(a, st + tonumber(ARGV[4]))\n"
    "iflush()\n"
    "return {0, attr_pack(a)}\n";

static const char s_write[] =
    "-- ARGV: ino, records: each a chunk index (u32 LE) and a slice record\n"
    "-- (full or short), in order. A slice referenced twice by one call gets\n"
    "-- the extra reference counted in sliceref. Stored bytes: a data record\n"
    "-- adds its length (an overwrite is counted again: the sum is clamped to\n"
    "-- the length), a hole takes away the data it covers.\n"
    "local ino, recs = tonumber(ARGV[1]), ARGV[2]\n"
    "local a = iget(ino)\n"
    "if not a then\n"
    "	return {ENOENT}\n"
    "end\n"
    "if a.ty == DIR then\n"
    "	return {EISDIR}\n"
    "end\n"
    "if a.ty ~= FILE then\n"
    "	return {EINVAL}\n"
    "end\n"
    "local seen, len, t0, o = {}, a.len, {}, 1\n"
    "local st = stored(a)\n"
    "while o <= #recs do\n"
    "	local idx = struct.unpack('<I4', recs, o)\n"
    "	local rl, pos, id, _, _, n = rec_at(recs, o + 4)\n"
    "	local rec = string.sub(recs, o + 4, o + 3 + rl)\n"
    "	o = o + 4 + rl\n"
    "	if id ~= 0 then\n"
    "		st = st + n\n"
    "	elseif idx * CHUNK + pos < len then\n"
    "		-- this call's records of chunk 0 are not in the tail yet\n"
    "		local c = idx == 0 and tail_get(ino) .. table.concat(t0) or\n"
    "			redis.call('GET', ckey(ino, idx)) or ''\n"
    "		st = math.max(0, st - (data_in(c, pos, pos + n) or 0))\n"
    "	end\n"
    "	if idx == 0 then\n"
    "		t0[#t0 + 1] = rec\n"
    "	else\n"
    "		redis.call('APPEND', ckey(ino, idx), rec)\n"
    "	end\n"
    "	if id ~= 0 then\n"
    "		if seen[id] then\n"
    "			redis.call('HINCRBY', 'sliceref', d(id), 1)\n"
    "		end\n"
    "		seen[id] = true\n"
    "	end\n"
    "	local e = idx * CHUNK + pos + n\n"
    "	if e > len then\n"
    "		len = e\n"
    "	end\n"
    "end\n"
    "if #t0 > 0 then\n"
    "	tail_append(ino, table.concat(t0))\n"
    "end\n"
    "local st0 = stored(a)\n"
    "stored_set(a, st0)\n"
    "a.len = len\n"
    "stored_set(a, st)\n"
    "touch(ino, true)\n"
    "iflush()\n"
    "return {0, attr_pack(a)}\n";

static const char s_open[] =
    "-- ARGV: ino, sid ('0': no session, nothing registered).\n"
    "local ino, sid = tonumber(ARGV[1]), ARGV[2]\n"
    "local s = redis.call('HGET', ib(ino), iaf(ino))\n"
    "if not s then\n"
    "	return {ENOENT}\n"
    "end\n"
    "if sid ~= '0' then\n"
    "	redis.call('HINCRBY', key('o', ino), sid, 1)\n"
    "	redis.call('SADD', 'so' .. sid, d(ino))\n"
    "end\n"
    "return {0, s}\n";

static const char s_close[] =
    "-- ARGV: sid, the inodes closed (u64 LE each; a client sends its\n"
    "-- closes in batches). Returns {0, how many inodes were deleted}.\n"
    "local sid, inos, freed = ARGV[1], ARGV[2], 0\n"
    "for o = 1, #inos - 7, 8 do\n"
    "	local ino = struct.unpack('<I8', inos, o)\n"
    "	if sid ~= '0' then\n"
    "		if redis.call('HINCRBY', key('o', ino), sid, -1) <= 0 then\n"
    "			redis.call('HDEL', key('o', ino), sid)\n"
    "			redis.call('SREM', 'so' .. sid, d(ino))\n"
    "		end\n"
    "	end\n"
    "	if inode_release(ino) then\n"
    "		freed = freed + 1\n"
    "	end\n"
    "end\n"
    "iflush()\n"
    "return {0, freed}\n";

static const char s_setxattr[] =
    "-- ARGV: ino, name, value, flags (1 = XATTR_CREATE, 2 = XATTR_REPLACE).\n"
    "local ino, name, flags = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[4])\n"
    "if not iget(ino) then\n"
    "	return {ENOENT}\n"
    "end\n"
    "local k = key('x', ino)\n"
    "local has = redis.call('HEXISTS', k, name) == 1\n"
    "if flags == 1 and has then\n"
    "	return {EEXIST}\n"
    "end\n"
    "if flags == 2 and not has then\n"
    "	return {ENODATA}\n"
    "end\n"
    "redis.call('HSET', k, name, ARGV[3])\n"
    "touch(ino, false)\n"
    "iflush()\n"
    "return {0}\n";

static const char s_removexattr[] =
    "-- ARGV: ino, name.\n"
    "local ino = tonumber(ARGV[1])\n"
    "if not iget(ino) then\n"
    "	return {ENOENT}\n"
    "end\n"
    "if redis.call('HDEL', key('x', ino), ARGV[2]) == 0 then\n"
    "	return {ENODATA}\n"
    "end\n"
    "touch(ino, false)\n"
    "iflush()\n"
    "return {0}\n";

static const char s_session_new[] =
    "-- ARGV: packed session info, sid ('0': allocate one). Returns {0, sid}.\n"
    "local sid = ARGV[2]\n"
    "if sid == '0' then\n"
    "	sid = d(redis.call('INCR', 'nextsession'))\n"
    "end\n"
    "redis.call('ZADD', 'sessions', now(), sid)\n"
    "redis.call('HSET', 'sessioninfo', sid, ARGV[1])\n"
    "return {0, tonumber(sid)}\n";

static const char s_heartbeat[] =
    "-- ARGV: sid. Returns {0, 1}, or {0, 0} when the session was cleaned "
    "away.\n"
    "if not redis.call('ZSCORE', 'sessions', ARGV[1]) then\n"
    "	return {0, 0}\n"
    "end\n"
    "redis.call('ZADD', 'sessions', now(), ARGV[1])\n"
    "return {0, 1}\n";

static const char s_session_dead[] =
    "-- ARGV: ttl. Returns {0, {sid...}} of sessions silent for longer than "
    "ttl.\n"
    "local limit = now() - tonumber(ARGV[1])\n"
    "return {0, redis.call('ZRANGEBYSCORE', 'sessions', '-inf',\n"
    "	'(' .. d(limit), 'LIMIT', 0, 100)}\n";

static const char s_session_clean[] =
    "-- ARGV: sid, ttl (-1: unconditionally, the session's own close), max "
    "opens\n"
    "-- to drop in this call. Returns {0, state}: 0 nothing done (gone, or "
    "alive\n"
    "-- again), 1 session removed, 2 more opens left (call again).\n"
    "local sid, ttl, max = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])\n"
    "local hb = redis.call('ZSCORE', 'sessions', sid)\n"
    "if ttl >= 0 and (not hb or tonumber(hb) >= now() - ttl) then\n"
    "	return {0, 0}\n"
    "end\n"
    "for _, i in ipairs(redis.call('SPOP', 'so' .. sid, max)) do\n"
    "	local ino = tonumber(i)\n"
    "	redis.call('HDEL', key('o', ino), sid)\n"
    "	inode_release(ino)\n"
    "end\n"
    "iflush()\n"
    "if redis.call('SCARD', 'so' .. sid) > 0 then\n"
    "	return {0, 2}\n"
    "end\n"
    "redis.call('ZREM', 'sessions', sid)\n"
    "redis.call('HDEL', 'sessioninfo', sid)\n"
    "redis.call('HDEL', 'sessionstaged', sid)\n"
    "local p = redis.call('HGET', 'sessionpending', sid)\n"
    "if p then\n"
    "	redis.call('HDEL', 'sessionpending', sid)\n"
    "	redis.call('DECRBY', 'pendingspace', p)\n"
    "end\n"
    "return {0, hb and 1 or 0}\n";

static const char s_space_usage[] =
    "-- ARGV: sid (0: none), the bytes that session has accepted and not\n"
    "-- committed. Publishes them while the session is registered (field of\n"
    "-- sessionpending, absent when 0; pendingspace is the sum of the hash).\n"
    "-- Returns {0, usedspace, pendingspace less the session's own}.\n"
    "local sid, p = ARGV[1], tonumber(ARGV[2])\n"
    "local own = tonumber(redis.call('HGET', 'sessionpending', sid) or 0)\n"
    "if sid ~= '0' and p ~= own and redis.call('ZSCORE', 'sessions', sid) then\n"
    "	if p > 0 then\n"
    "		redis.call('HSET', 'sessionpending', sid, d(p))\n"
    "	else\n"
    "		redis.call('HDEL', 'sessionpending', sid)\n"
    "	end\n"
    "	redis.call('INCRBY', 'pendingspace', d(p - own))\n"
    "	own = p\n"
    "end\n"
    "local all = tonumber(redis.call('GET', 'pendingspace') or 0)\n"
    "local used = tonumber(redis.call('GET', 'usedspace') or 0)\n"
    "return {0, used > 0 and used or 0, all > own and all - own or 0}\n";

static const char s_reclaim[] =
    "-- ARGV: budget (chunk lists to drop in this call), cap (dead slices to\n"
    "-- hand out). Deleted files are worked on from their last chunk down; a\n"
    "-- file only partly done is put back with the length still to do. The pop\n"
    "-- is here, not a separate LPOP, so that each dead slice leaves exactly\n"
    "-- once and a NOSCRIPT retry cannot lose any. A dead frame of a pack only\n"
    "-- adds to the pack's dead bytes; when they reach its total, the pack\n"
    "-- itself is handed out as a record of form 5 (u8 5, u64 pack, u64 total).\n"
    "-- Returns {0, work left (files + dead slices), {records}}.\n"
    "local budget, cap = tonumber(ARGV[1]), tonumber(ARGV[2])\n"
    "while budget > 0 do\n"
    "	local head = redis.call('ZRANGE', 'delfiles', 0, 0, 'WITHSCORES')\n"
    "	if #head == 0 then\n"
    "		break\n"
    "	end\n"
    "	local m, score = head[1], head[2]\n"
    "	redis.call('ZREM', 'delfiles', m)\n"
    "	local ino, len = string.match(m, '^(%d+):(%d+)$')\n"
    "	if ino then\n"
    "		ino, len = tonumber(ino), tonumber(len)\n"
    "		local n = math.ceil(len / CHUNK)\n"
    "		while n > 0 and budget > 0 do\n"
    "			n = n - 1\n"
    "			chunk_drop(ino, n)\n"
    "			budget = budget - 1\n"
    "		end\n"
    "		if n > 0 then\n"
    "			redis.call('ZADD', 'delfiles', score,\n"
    "				d(ino) .. ':' .. d(n * CHUNK))\n"
    "		end\n"
    "	else\n"
    "		redis.log(redis.LOG_WARNING,\n"
    "			'granary: dropped corrupt delfiles member')\n"
    "	end\n"
    "	budget = budget - 1\n"
    "end\n"
    "local dead = {}\n"
    "if cap > 0 then\n"
    "	for _, rec in ipairs(redis.call('LPOP', 'delslices', cap) or {}) do\n"
    "		local ok, _, _, id, size, _, _, pack, plen = pcall(rec_at, rec, 1)\n"
    "		if ok and pack then\n"
    "			pack_dead(pack, plen, dead)\n"
    "		elseif ok and id ~= 0 and staged_blocks(id, size) then\n"
    "			-- its blocks are still on their way to the store\n"
    "			redis.call('HSET', 'stagedead', d(id), rec)\n"
    "		else\n"
    "			dead[#dead + 1] = rec\n"
    "		end\n"
    "	end\n"
    "end\n"
    "return {0, redis.call('ZCARD', 'delfiles') + redis.call('LLEN', 'delslices'),\n"
    "	dead}\n";

static const char s_pack_total[] =
    "-- ARGV: pack, total. Returns {0, 1 if the pack is all dead already}.\n"
    "local pack, total = tonumber(ARGV[1]), tonumber(ARGV[2])\n"
    "redis.call('HSET', 'packs', d(pack), d(total))\n"
    "return {0, pack_dead(pack, 0, {}) and 1 or 0}\n";

static const char s_staging_done[] =
    "-- ARGV: name ('b<id>_<idx>' or 'p<pack>'): that staged object is in\n"
    "-- the store now (or never will be). A dead record parked for it goes\n"
    "-- back to delslices once nothing of its slice or pack is staged.\n"
    "local name = ARGV[1]\n"
    "redis.call('HDEL', 'staging', name)\n"
    "local k = string.match(name, '^b(%d+)_%d+$') or name\n"
    "local rec = redis.call('HGET', 'stagedead', k)\n"
    "local ready = rec and true\n"
    "if rec and k ~= name then\n"
    "	local _, _, id, size = rec_at(rec, 1)\n"
    "	ready = not staged_blocks(id, size)\n"
    "end\n"
    "if ready then\n"
    "	redis.call('RPUSH', 'delslices', rec)\n"
    "	redis.call('HDEL', 'stagedead', k)\n"
    "end\n"
    "return {0}\n";

/* ---- snapshots -------------------------------------------------------- */
/*
 * Shared by the snapshot scripts (put in front of their bodies, after the
 * prelude, so that the other scripts do not carry it). A snapshot of a
 * directory is built detached across many calls: `snapshots` names its top
 * inode with the builder's "<sid>:<time>" (":d" appended once it is being
 * dropped), `snapdirs:<top>` lists every directory of the copy with its
 * source (the walk's queue, then the drop's list), `snapmap:<top>` maps
 * source files with more than one name to their copy.
 */
#define SNAP_LIB \
	"-- ---- snapshot helpers ----\n" \
	"local ECANCELED, EACCES = " S(ECANCELED) ", " S(EACCES) "\n" \
	"local PAIR = '<I8I8'\n" \
	"-- the caller's uid and groups (ARGV: u32 uid, then u32 groups, little\n" \
	"-- endian; empty: no checks), set by cred_use at the start of a call\n" \
	"local cuid, cgid, cgroups\n" \
	"local function cred_use(s)\n" \
	"	cuid, cgid, cgroups = nil, nil, {}\n" \
	"	if s and #s >= 8 then\n" \
	"		cuid, cgid = struct.unpack('<I4I4', s, 1)\n" \
	"		for o = 5, #s - 3, 4 do\n" \
	"			cgroups[struct.unpack('<I4', s, o)] = true\n" \
	"		end\n" \
	"	end\n" \
	"end\n" \
	"-- may the caller copy inode record v as cp -a would: a file readable,\n" \
	"-- a directory readable and searchable, anything else as it is\n" \
	"local function may_copy(v)\n" \
	"	if not cuid or cuid == 0 then\n" \
	"		return true\n" \
	"	end\n" \
	"	local ty, mode, uid, gid = struct.unpack('<BHI4I4', v, 2)\n" \
	"	local want = ty == DIR and 5 or (ty == FILE and 4 or 0)\n" \
	"	local bits = mode % 8\n" \
	"	if uid == cuid then\n" \
	"		bits = math.floor(mode / 64) % 8\n" \
	"	elseif cgroups[gid] then\n" \
	"		bits = math.floor(mode / 8) % 8\n" \
	"	end\n" \
	"	return bit.band(bits, want) == want\n" \
	"end\n" \
	"-- record v as a copy made by the caller: cp -a run by a user keeps\n" \
	"-- owner and group only where it may (its own uid, a group it is in),\n" \
	"-- else they become its own and the set-id bits go\n" \
	"local function owned(v)\n" \
	"	if not cuid or cuid == 0 then\n" \
	"		return v\n" \
	"	end\n" \
	"	local mode, uid, gid = struct.unpack('<HI4I4', v, 3)\n" \
	"	local m = mode\n" \
	"	if uid ~= cuid then\n" \
	"		uid = cuid\n" \
	"		m = m - bit.band(m, S_ISUID + S_ISGID)\n" \
	"	end\n" \
	"	if not cgroups[gid] then\n" \
	"		gid = cgid\n" \
	"		m = m - bit.band(m, S_ISGID)\n" \
	"	end\n" \
	"	return string.sub(v, 1, 2) .. struct.pack('<HI4I4', m, uid, gid) ..\n" \
	"		string.sub(v, 13)\n" \
	"end\n" \
	"local function snap_keys(top)\n" \
	"	return 'snapdirs:' .. d(top), 'snapmap:' .. d(top)\n" \
	"end\n" \
	"-- the entry of top in snapshots: sid (string), time, dropping\n" \
	"local function snap_state(top)\n" \
	"	local v = redis.call('HGET', 'snapshots', d(top))\n" \
	"	if not v then\n" \
	"		return nil\n" \
	"	end\n" \
	"	local sid, t, dr = string.match(v, '^(%d+):(%d+)(:?d?)$')\n" \
	"	if not sid then\n" \
	"		error('granary: corrupt snapshots entry')\n" \
	"	end\n" \
	"	return sid, tonumber(t), dr == ':d'\n" \
	"end\n" \
	"local function snap_set(top, sid, dropping)\n" \
	"	redis.call('HSET', 'snapshots', d(top),\n" \
	"		sid .. ':' .. d(now()) .. (dropping and ':d' or ''))\n" \
	"end\n" \
	"-- a step of the builder (dropping false) or the dropper (true) of top:\n" \
	"-- false when someone else has claimed it meanwhile. Each step renews\n" \
	"-- the time, which is what tells an abandoned snapshot from a slow one.\n" \
	"local function snap_own(top, sid, dropping)\n" \
	"	local osid, _, dr = snap_state(top)\n" \
	"	if osid ~= sid or dr ~= dropping then\n" \
	"		return false\n" \
	"	end\n" \
	"	snap_set(top, sid, dropping)\n" \
	"	return true\n" \
	"end\n" \
	"-- is ino anc, or below anc? (the parent fields up to the root) The\n" \
	"-- versions directory of anc is not: the walk of anc never enters it.\n" \
	"local function snap_within(anc, ino)\n" \
	"	local n = 0\n" \
	"	if redis.call('HGET', 'vdirs', d(anc)) == d(ino) then\n" \
	"		return false\n" \
	"	end\n" \
	"	while ino ~= anc do\n" \
	"		local a = iget(ino)\n" \
	"		if ino == 1 or not a then\n" \
	"			return false\n" \
	"		end\n" \
	"		ino = a.par\n" \
	"		n = n + 1\n" \
	"		if n > 100000 then\n" \
	"			error('granary: directory loop')\n" \
	"		end\n" \
	"	end\n" \
	"	return true\n" \
	"end\n" \
	"\n" \
	"-- what this call made: inodes by kind, file bytes (lengths; stored:\n" \
	"-- what usedspace counts), references to add (slice id -> count);\n" \
	"-- flushed once at the end by made_flush\n" \
	"local mfiles, mdirs, mothers, mbytes, refs = 0, 0, 0, 0, {}\n" \
	"local mstored = 0\n" \
	"local function refs_add(s)\n" \
	"	local o = 1\n" \
	"	while o <= #s do\n" \
	"		local n, _, id = rec_at(s, o)\n" \
	"		if id ~= 0 then\n" \
	"			refs[id] = (refs[id] or 0) + 1\n" \
	"		end\n" \
	"		o = o + n\n" \
	"	end\n" \
	"end\n" \
	"local function made_flush()\n" \
	"	local n = mfiles + mdirs + mothers\n" \
	"	if n > 0 then\n" \
	"		redis.call('INCRBY', 'totalinodes', n)\n" \
	"	end\n" \
	"	if mstored > 0 then\n" \
	"		redis.call('INCRBY', 'usedspace', d(mstored))\n" \
	"	end\n" \
	"	-- one more reference per copied record: a packed slice too, whose\n" \
	"	-- dead bytes are counted only when its last reference goes\n" \
	"	for id, n in pairs(refs) do\n" \
	"		redis.call('HINCRBY', 'sliceref', d(id), n)\n" \
	"	end\n" \
	"	refs = {}\n" \
	"end\n" \
	"-- Copy inode src, whose whole record (irec) is v, to the new inode ino with\n" \
	"-- nlink links and (directories) parent par: attributes (ctime now; owners\n" \
	"-- as owned() leaves them), chunk lists, symlink target, xattrs. A\n" \
	"-- directory's entries are the walk's business. Returns the copy's type.\n" \
	"local function clone(src, v, ino, nlink, par)\n" \
	"	local ty = string.byte(v, 2)\n" \
	"	if #v < ALEN or string.byte(v, 1) ~= 1 then\n" \
	"		error('granary: corrupt inode record')\n" \
	"	end\n" \
	"	v = owned(v)\n" \
	"	if ty == DIR then\n" \
	"		local a = attr_unpack(string.sub(v, 1, ALEN))\n" \
	"		a.nlink, a.par, a.cs, a.cn = nlink, par, now()\n" \
	"		redis.call('HSET', ib(ino), iaf(ino), attr_pack(a))\n" \
	"		mdirs = mdirs + 1\n" \
	"	else\n" \
	"		-- nlink and ctime spliced in: the bulk of a tree, cheaper\n" \
	"		-- than unpacking 14 fields; a short tail (chunk 0) goes in\n" \
	"		-- the same HSET\n" \
	"		local a = string.sub(v, 1, 12) .. struct.pack('<I4', nlink) ..\n" \
	"			string.sub(v, 17, 50) .. struct.pack('<i5I4', now())\n" \
	"		local t = string.sub(v, ALEN + 1)\n" \
	"		if #t > 0 and #t <= TAILMAX then\n" \
	"			redis.call('HSET', ib(ino), iaf(ino), a, itf(ino), t)\n" \
	"		else\n" \
	"			redis.call('HSET', ib(ino), iaf(ino), a)\n" \
	"			if #t > 0 then\n" \
	"				redis.call('SET', ckey(ino, 0), t)\n" \
	"			end\n" \
	"		end\n" \
	"	end\n" \
	"	if ty == FILE then\n" \
	"		local len, par = struct.unpack('<I8I8', v, 17)\n" \
	"		refs_add(string.sub(v, ALEN + 1))\n" \
	"		-- records exist only below the length (truncate drops the\n" \
	"		-- rest): one step per chunk of it, as truncate takes\n" \
	"		for idx = 1, math.ceil(len / CHUNK) - 1 do\n" \
	"			local c = redis.call('GET', ckey(src, idx))\n" \
	"			if c then\n" \
	"				refs_add(c)\n" \
	"				redis.call('SET', ckey(ino, idx), c)\n" \
	"			end\n" \
	"		end\n" \
	"		-- the copy's record carries the stored bytes too\n" \
	"		mfiles, mbytes = mfiles + 1, mbytes + len\n" \
	"		mstored = mstored + stored({len = len, par = par})\n" \
	"	elseif ty ~= DIR then\n" \
	"		if ty == SYMLINK then\n" \
	"			local t = redis.call('GET', key('s', src))\n" \
	"			if t then\n" \
	"				redis.call('SET', key('s', ino), t)\n" \
	"			end\n" \
	"		end\n" \
	"		mothers = mothers + 1\n" \
	"	end\n" \
	"	local x = redis.call('HGETALL', key('x', src))\n" \
	"	local user = cuid and cuid ~= 0\n" \
	"	for i = 1, #x, 2 do\n" \
	"		-- a user's cp -a cannot set these (file capabilities!)\n" \
	"		if not (user and (string.find(x[i], '^security%.') or\n" \
	"			string.find(x[i], '^trusted%.'))) then\n" \
	"			redis.call('HSET', key('x', ino), x[i], x[i + 1])\n" \
	"		end\n" \
	"	end\n" \
	"	return ty\n" \
	"end\n" \
	"local function made()\n" \
	"	return mfiles, mdirs, mothers, mbytes\n" \
	"end\n" \
	"-- ---- snapshot script body ----\n"

static const char s_snap_begin[] = SNAP_LIB
    "-- ARGV: src, dst parent, dst name, sid, cred. A non-directory is copied\n"
    "-- and linked here; a directory gets its detached top copy, listed in\n"
    "-- snapshots, for snap_copy to fill. Returns {0, linked (1: done),\n"
    "-- new ino, files, dirs, others, bytes}.\n"
    "local src, P, name, sid = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3],\n"
    "	ARGV[4]\n"
    "cred_use(ARGV[5])\n"
    "local p, err = getdir(P)\n"
    "if not p then\n"
    "	return {err}\n"
    "end\n"
    "local v = irec(src)\n"
    "if not v then\n"
    "	return {ENOENT}\n"
    "end\n"
    "local sa = attr_unpack(string.sub(v, 1, ALEN))\n"
    "-- unlinked but still open: gone for the namespace, as for link\n"
    "if sa.ty ~= DIR and sa.nlink == 0 then\n"
    "	return {ENOENT}\n"
    "end\n"
    "if not may_copy(v) then\n"
    "	return {EACCES}\n"
    "end\n"
    "if redis.call('HEXISTS', key('d', P), name) == 1 then\n"
    "	return {EEXIST}\n"
    "end\n"
    "if sa.ty == DIR and snap_within(src, P) then\n"
    "	return {EINVAL}\n"
    "end\n"
    "local ino = redis.call('INCRBY', 'nextinode', 1)\n"
    "if sa.ty ~= DIR then\n"
    "	clone(src, v, ino, 1, 0)\n"
    "	redis.call('HSET', key('d', P), name, dent_pack(ino, sa.ty))\n"
    "	touch(P, true)\n"
    "else\n"
    "	-- detached: parent 0 until snap_commit links it\n"
    "	clone(src, v, ino, 2, 0)\n"
    "	local dk = snap_keys(ino)\n"
    "	redis.call('RPUSH', dk, struct.pack(PAIR, src, ino))\n"
    "	snap_set(ino, sid, false)\n"
    "end\n"
    "made_flush()\n"
    "iflush()\n"
    "local f, nd, o, b = made()\n"
    "return {0, sa.ty ~= DIR and 1 or 0, ino, f, nd, o, b}\n";

static const char s_snap_copy[] = SNAP_LIB
    "-- ARGV: top, sid, pos, cursor, budget, cred. Copies the entries of the\n"
    "-- directories listed in snapdirs:<top> from index pos (its HSCAN at\n"
    "-- cursor), about budget entries; a subdirectory gets an empty copy\n"
    "-- appended to the list, so that the list is the walk's queue. Returns\n"
    "-- {0, pos, cursor, done (1: nothing left), files, dirs, others, bytes}.\n"
    "-- An entry cred may not copy ends the call before its page is copied,\n"
    "-- what the earlier pages made counted as usual: {EACCES}, and the\n"
    "-- caller drops the copy.\n"
    "local top, sid = tonumber(ARGV[1]), ARGV[2]\n"
    "local pos, cursor, budget = tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5])\n"
    "cred_use(ARGV[6])\n"
    "if not snap_own(top, sid, false) then\n"
    "	return {ECANCELED}\n"
    "end\n"
    "local dk, mk = snap_keys(top)\n"
    "local lmap, done, denied = {}, 0, false\n"
    "while budget > 0 do\n"
    "	local pair = redis.call('LINDEX', dk, pos)\n"
    "	if not pair then\n"
    "		done = 1\n"
    "		break\n"
    "	end\n"
    "	local sdir, ddir = struct.unpack(PAIR, pair)\n"
    "	local dd = key('d', ddir)\n"
    "	-- HSCAN hands out an entry twice only when the hash was resized\n"
    "	-- between two calls: never inside this script\n"
    "	local check = cursor ~= '0'\n"
    "	repeat\n"
    "		local r = redis.call('HSCAN', key('d', sdir), cursor, 'COUNT',\n"
    "			budget)\n"
    "		local e, todo, need, seen = r[2], {}, 0, {}\n"
    "		cursor = r[1]\n"
    "		budget = budget - #e / 2 - 1\n"
    "		if check then\n"
    "			-- names copied by an earlier call (HMGET in slices:\n"
    "			-- unpack has a stack limit)\n"
    "			for i = 1, #e, 512 do\n"
    "				local names = {}\n"
    "				for k = i, math.min(i + 510, #e), 2 do\n"
    "					names[#names + 1] = e[k]\n"
    "				end\n"
    "				local got = redis.call('HMGET', dd, unpack(names))\n"
    "				for k = 1, #names do\n"
    "					seen[i + 2 * k - 2] = got[k]\n"
    "				end\n"
    "			end\n"
    "		end\n"
    "		-- first the entries to copy and how many new inodes they\n"
    "		-- take (a second name of a file copied already takes none)\n"
    "		for i = 1, #e, 2 do\n"
    "			local sino = dent_unpack(e[i + 1])\n"
    "			local v\n"
    "			if not seen[i] then\n"
    "				v = irec(sino)\n"
    "			end\n"
    "			if v and not may_copy(v) then\n"
    "				denied = true\n"
    "				break\n"
    "			end\n"
    "			if v then\n"
    "				local ty = string.byte(v, 2)\n"
    "				local t = {name = e[i], sino = sino, v = v, ty = ty}\n"
    "				if ty ~= DIR and struct.unpack('<I4', v, 13) > 1 then\n"
    "					t.multi = true\n"
    "					if not lmap[sino] then\n"
    "						local c = redis.call('HGET', mk, d(sino))\n"
    "						lmap[sino] = c and tonumber(c) or 0\n"
    "						if not c then\n"
    "							need = need + 1\n"
    "						end\n"
    "					end\n"
    "				else\n"
    "					need = need + 1\n"
    "				end\n"
    "				todo[#todo + 1] = t\n"
    "			end\n"
    "		end\n"
    "		if denied then\n"
    "			break\n"
    "		end\n"
    "		local ino = 0\n"
    "		if need > 0 then\n"
    "			ino = redis.call('INCRBY', 'nextinode', need) - need\n"
    "		end\n"
    "		for _, t in ipairs(todo) do\n"
    "			local c = t.multi and lmap[t.sino] or 0\n"
    "			if c ~= 0 then\n"
    "				-- another name of a file copied already\n"
    "				local a = iget(c)\n"
    "				a.nlink = a.nlink + 1\n"
    "				idirty[c] = true\n"
    "				redis.call('HSET', dd, t.name, dent_pack(c, t.ty))\n"
    "			else\n"
    "				ino = ino + 1\n"
    "				if t.ty == DIR then\n"
    "					clone(t.sino, t.v, ino, 2, ddir)\n"
    "					redis.call('RPUSH', dk, struct.pack(PAIR,\n"
    "						t.sino, ino))\n"
    "					local pa = iget(ddir)\n"
    "					pa.nlink = pa.nlink + 1\n"
    "					idirty[ddir] = true\n"
    "				else\n"
    "					clone(t.sino, t.v, ino, 1, 0)\n"
    "					if t.multi then\n"
    "						lmap[t.sino] = ino\n"
    "						redis.call('HSET', mk, d(t.sino), d(ino))\n"
    "					end\n"
    "				end\n"
    "				redis.call('HSET', dd, t.name, dent_pack(ino, t.ty))\n"
    "			end\n"
    "		end\n"
    "	until cursor == '0' or budget <= 0\n"
    "	if denied then\n"
    "		break\n"
    "	end\n"
    "	if cursor == '0' then\n"
    "		pos = pos + 1\n"
    "	end\n"
    "end\n"
    "made_flush()\n"
    "iflush()\n"
    "if denied then\n"
    "	return {EACCES}\n"
    "end\n"
    "local f, nd, o, b = made()\n"
    "return {0, pos, cursor, done, f, nd, o, b}\n";

static const char s_snap_commit[] = SNAP_LIB
    "-- ARGV: top, sid, src, dst parent, dst name[, dir, record]. Links the\n"
    "-- finished copy; the same checks as snap_begin, since the namespace\n"
    "-- moved meanwhile. With dir, the copy is a version of dir: record is\n"
    "-- its stats and message (SCHEMA.md, v<dir>), stored with top and time.\n"
    "local top, sid, src = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])\n"
    "local P, name = tonumber(ARGV[4]), ARGV[5]\n"
    "if not snap_own(top, sid, false) then\n"
    "	return {ECANCELED}\n"
    "end\n"
    "local p, err = getdir(P)\n"
    "if not p then\n"
    "	return {err}\n"
    "end\n"
    "if redis.call('HEXISTS', key('d', P), name) == 1 then\n"
    "	return {EEXIST}\n"
    "end\n"
    "if snap_within(src, P) then\n"
    "	return {EINVAL}\n"
    "end\n"
    "local a = iget(top)\n"
    "if not a then\n"
    "	error('granary: snapshot top inode missing')\n"
    "end\n"
    "redis.call('HSET', key('d', P), name, dent_pack(top, DIR))\n"
    "a.par = P\n"
    "p.nlink = p.nlink + 1\n"
    "touch(top, false)\n"
    "touch(P, true)\n"
    "if ARGV[6] then\n"
    "	-- a version of ARGV[6] (P is its versions directory): its record\n"
    "	redis.call('HSET', 'v' .. ARGV[6], name,\n"
    "		struct.pack('<I8i8', top, now()) .. ARGV[7])\n"
    "end\n"
    "redis.call('HDEL', 'snapshots', d(top))\n"
    "redis.call('DEL', snap_keys(top))\n"
    "iflush()\n"
    "return {0}\n";

static const char s_snap_claim[] = SNAP_LIB
    "-- ARGV: top, sid, ttl, own ('1': the builder gives up its snapshot).\n"
    "-- Marks the snapshot as being dropped by sid, atomically, so that one\n"
    "-- dropper at a time works on it and its builder (if alive after all)\n"
    "-- stops. Without own, only an abandoned one is taken: untouched for\n"
    "-- longer than ttl, and its builder without a live session (or without\n"
    "-- any, or the caller's). Returns {0}, ENOENT, EBUSY (still in use)\n"
    "-- or ECANCELED (not the builder's any more).\n"
    "local top, sid, ttl = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])\n"
    "local osid, t, dr = snap_state(top)\n"
    "if not osid then\n"
    "	return {ENOENT}\n"
    "end\n"
    "if ARGV[4] == '1' then\n"
    "	if osid ~= sid or dr then\n"
    "		return {ECANCELED}\n"
    "	end\n"
    "else\n"
    "	local s = now()\n"
    "	if s - t <= ttl then\n"
    "		return {EBUSY}\n"
    "	end\n"
    "	if osid ~= '0' and osid ~= sid then\n"
    "		local hb = redis.call('ZSCORE', 'sessions', osid)\n"
    "		if hb and tonumber(hb) >= s - ttl then\n"
    "			return {EBUSY}\n"
    "		end\n"
    "	end\n"
    "end\n"
    "snap_set(top, sid, true)\n"
    "return {0}\n";

static const char s_clone_data[] = SNAP_LIB
    "-- ARGV: src, dst. Make the empty regular file dst hold src's data:\n"
    "-- its chunk lists copied, one more reference per record (the data is\n"
    "-- shared copy-on-write, as a snapshot's). Returns {0, dst's attr}.\n"
    "local src, dst = tonumber(ARGV[1]), tonumber(ARGV[2])\n"
    "local v = irec(src)\n"
    "local b = iget(dst)\n"
    "if not v or not b then\n"
    "	return {ENOENT}\n"
    "end\n"
    "local a = attr_unpack(string.sub(v, 1, ALEN))\n"
    "if a.ty == DIR or b.ty == DIR then\n"
    "	return {EISDIR}\n"
    "end\n"
    "if a.ty ~= FILE or b.ty ~= FILE or b.len ~= 0 or src == dst or\n"
    "	#tail_get(dst) ~= 0 then\n"
    "	return {EINVAL}\n"
    "end\n"
    "local t = string.sub(v, ALEN + 1)\n"
    "refs_add(t)\n"
    "tail_set(dst, t, true)\n"
    "for idx = 1, math.ceil(a.len / CHUNK) - 1 do\n"
    "	local c = redis.call('GET', ckey(src, idx))\n"
    "	if c then\n"
    "		refs_add(c)\n"
    "		redis.call('SET', ckey(dst, idx), c)\n"
    "	end\n"
    "end\n"
    "mbytes, mstored = a.len, stored(a)\n"
    "b.len, b.par = a.len, mstored + 1\n"
    "touch(dst, true)\n"
    "made_flush()\n"
    "iflush()\n"
    "return {0, attr_pack(b)}\n";

static const char s_snap_drop[] = SNAP_LIB
    "-- ARGV: top, sid, pos, cursor, budget. Deletes about budget entries of\n"
    "-- the detached copy, directory by directory from index pos of\n"
    "-- snapdirs:<top> (a directory's inode once it is empty; subdirectory\n"
    "-- entries only lose their name: each is in the list itself), files as\n"
    "-- unlink deletes them (data queued in delfiles). A directory listed\n"
    "-- with source 0 belongs to a tree handed over whole: its subdirectories\n"
    "-- are appended as found. Each entry is removed by exactly one call, so\n"
    "-- a call run twice does no harm. The last call\n"
    "-- forgets the snapshot. Returns {0, pos, cursor, done}.\n"
    "local top, sid = tonumber(ARGV[1]), ARGV[2]\n"
    "local pos, cursor, budget = tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5])\n"
    "if not snap_own(top, sid, true) then\n"
    "	return {ECANCELED}\n"
    "end\n"
    "local dk, mk = snap_keys(top)\n"
    "while budget > 0 do\n"
    "	local pair = redis.call('LINDEX', dk, pos)\n"
    "	if not pair then\n"
    "		iflush()\n"
    "		redis.call('HDEL', 'snapshots', d(top))\n"
    "		redis.call('DEL', dk, mk)\n"
    "		return {0, pos, '0', 1}\n"
    "	end\n"
    "	local sdir, ddir = struct.unpack(PAIR, pair)\n"
    "	local dd = key('d', ddir)\n"
    "	repeat\n"
    "		local r = redis.call('HSCAN', dd, cursor, 'COUNT', budget)\n"
    "		local e = r[2]\n"
    "		cursor = r[1]\n"
    "		budget = budget - #e / 2 - 1\n"
    "		for i = 1, #e, 2 do\n"
    "			local ino, ty = dent_unpack(e[i + 1])\n"
    "			redis.call('HDEL', dd, e[i])\n"
    "			if ty == DIR and sdir == 0 then\n"
    "				-- a tree handed over whole (a version, a restore):\n"
    "				-- its subdirectories join the list as found\n"
    "				redis.call('RPUSH', dk, struct.pack(PAIR, 0, ino))\n"
    "			end\n"
    "			local a = ty ~= DIR and iget(ino)\n"
    "			if a then\n"
    "				if a.nlink > 0 then\n"
    "					a.nlink = a.nlink - 1\n"
    "				end\n"
    "				idirty[ino] = true\n"
    "				inode_release(ino)\n"
    "			end\n"
    "		end\n"
    "	until cursor == '0' or budget <= 0\n"
    "	-- an entry a scan missed (not expected: nothing adds any) is\n"
    "	-- found by scanning again\n"
    "	if cursor == '0' and redis.call('HLEN', dd) == 0 then\n"
    "		if iget(ddir) then\n"
    "			inode_destroy(ddir)\n"
    "		end\n"
    "		pos = pos + 1\n"
    "	end\n"
    "end\n"
    "iflush()\n"
    "return {0, pos, cursor, 0}\n";

static const char s_version_dir[] = SNAP_LIB
    "-- ARGV: dir. The versions directory of dir (dir/.versions), made when\n"
    "-- missing: mode 0555, dir's owners, parent dir, listed in no\n"
    "-- directory (vdirs maps dir to it). Returns {0, its inode}.\n"
    "local D = tonumber(ARGV[1])\n"
    "local a, err = getdir(D)\n"
    "if not a then\n"
    "	return {err}\n"
    "end\n"
    "local v = redis.call('HGET', 'vdirs', d(D))\n"
    "if v then\n"
    "	return {0, tonumber(v)}\n"
    "end\n"
    "local ino = redis.call('INCRBY', 'nextinode', 1)\n"
    "local s, ns = now()\n"
    "icache[ino] = {ty = DIR, mode = 365, uid = a.uid, gid = a.gid,\n"
    "	nlink = 2, len = 0, par = D, as = s, an = ns, ms = s, mn = ns,\n"
    "	cs = s, cn = ns}\n"
    "idirty[ino] = true\n"
    "redis.call('HSET', 'vdirs', d(D), d(ino))\n"
    "redis.call('INCR', 'totalinodes')\n"
    "iflush()\n"
    "return {0, ino}\n";

static const char s_version_rm[] = SNAP_LIB
    "-- ARGV: dir, tag, sid. Unlinks version tag of dir and hands its tree\n"
    "-- to sid for snap_drop (detached, listed in snapshots, the walk\n"
    "-- starting at its top with source 0). Returns {0, top}.\n"
    "local D, tag, sid = tonumber(ARGV[1]), ARGV[2], ARGV[3]\n"
    "local v = redis.call('HGET', 'vdirs', d(D))\n"
    "local r = v and redis.call('HGET', key('v', D), tag)\n"
    "if not r then\n"
    "	local _, err = getdir(D)\n"
    "	return {err or ENOENT}\n"
    "end\n"
    "local V, top = tonumber(v), struct.unpack('<I8', r)\n"
    "redis.call('HDEL', key('v', D), tag)\n"
    "redis.call('HDEL', key('d', V), tag)\n"
    "local va = iget(V)\n"
    "va.nlink = va.nlink - 1\n"
    "touch(V, true)\n"
    "local ta = iget(top)\n"
    "if ta then\n"
    "	ta.par = 0\n"
    "	idirty[top] = true\n"
    "end\n"
    "local dk, mk = snap_keys(top)\n"
    "redis.call('DEL', dk, mk)\n"
    "redis.call('RPUSH', dk, struct.pack(PAIR, 0, top))\n"
    "snap_set(top, sid, false)\n"
    "iflush()\n"
    "return {0, top}\n";

static const char s_version_swap[] = SNAP_LIB
    "-- ARGV: dir, top, sid. top is sid's finished detached copy of a\n"
    "-- version of dir: dir's entries and top's change places (dir keeps\n"
    "-- its inode, attributes and versions; subdirectories get their new\n"
    "-- parent), then top, now holding dir's old entries, is left to sid to\n"
    "-- drop (its walk restarted at the top with source 0). Returns {0}.\n"
    "local D, C, sid = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]\n"
    "if not snap_own(C, sid, false) then\n"
    "	return {ECANCELED}\n"
    "end\n"
    "local a, err = getdir(D)\n"
    "if not a then\n"
    "	return {err}\n"
    "end\n"
    "local ca = iget(C)\n"
    "if not ca then\n"
    "	error('granary: snapshot top inode missing')\n"
    "end\n"
    "local dD, dC, tmp = key('d', D), key('d', C), 'vswap:' .. d(C)\n"
    "local hasD = redis.call('EXISTS', dD) == 1\n"
    "if hasD then\n"
    "	redis.call('RENAME', dD, tmp)\n"
    "end\n"
    "if redis.call('EXISTS', dC) == 1 then\n"
    "	redis.call('RENAME', dC, dD)\n"
    "end\n"
    "if hasD then\n"
    "	redis.call('RENAME', tmp, dC)\n"
    "end\n"
    "-- the subdirectories of k get parent par; returns how many\n"
    "local function adopt(k, par)\n"
    "	local n = 0\n"
    "	for _, e in ipairs(redis.call('HVALS', k)) do\n"
    "		local ino, ty = dent_unpack(e)\n"
    "		local s = ty == DIR and iget(ino)\n"
    "		if s then\n"
    "			s.par = par\n"
    "			idirty[ino] = true\n"
    "			n = n + 1\n"
    "		end\n"
    "	end\n"
    "	return n\n"
    "end\n"
    "a.nlink = 2 + adopt(dD, D)\n"
    "ca.nlink = 2 + adopt(dC, C)\n"
    "idirty[C] = true\n"
    "touch(D, true)\n"
    "local dk, mk = snap_keys(C)\n"
    "redis.call('DEL', dk, mk)\n"
    "redis.call('RPUSH', dk, struct.pack(PAIR, 0, C))\n"
    "iflush()\n"
    "return {0}\n";

/* ---- upgrades -------------------------------------------------------- */

static const char s_upgrade_inodes[] =
    "-- ARGV: inode numbers. Format 1 -> 2: the record i<ino> (59 attribute\n"
    "-- bytes, then chunk 0) moves into the inode's hash. Returns {0, moved}.\n"
    "local n = 0\n"
    "for i = 1, #ARGV do\n"
    "	local ino = tonumber(ARGV[i])\n"
    "	local v = redis.call('GET', key('i', ino))\n"
    "	if v then\n"
    "		attr_unpack(string.sub(v, 1, ALEN))\n"
    "		redis.call('HSET', ib(ino), iaf(ino), string.sub(v, 1, ALEN))\n"
    "		tail_set(ino, string.sub(v, ALEN + 1), true)\n"
    "		redis.call('DEL', key('i', ino))\n"
    "		n = n + 1\n"
    "	end\n"
    "end\n"
    "return {0, n}\n";

static const char s_upgrade_dir[] =
    "-- ARGV: dir, cursor. Format 1 -> 2: entries of 9 bytes (u64 ino, u8\n"
    "-- type; no entry of format 2 has 9 bytes below inode 2^56) get the\n"
    "-- short form, about 1000 per call. Returns {0, cursor, rewritten}.\n"
    "local k, n = key('d', tonumber(ARGV[1])), 0\n"
    "local r = redis.call('HSCAN', k, ARGV[2], 'COUNT', 1000)\n"
    "for i = 1, #r[2], 2 do\n"
    "	local v = r[2][i + 1]\n"
    "	if #v == 9 then\n"
    "		local ino, ty = struct.unpack('<I8B', v)\n"
    "		redis.call('HSET', k, r[2][i], dent_pack(ino, ty))\n"
    "		n = n + 1\n"
    "	end\n"
    "end\n"
    "return {0, r[1], n}\n";

/* clang-format on */
static const struct {
	const char *name, *body;
} scripts[] = {
    {"format", s_format},
    {"lookup", s_lookup},
    {"mknod", s_mknod},
    {"link", s_link},
    {"unlink", s_unlink},
    {"rmdir", s_rmdir},
    {"rename", s_rename},
    {"setattr", s_setattr},
    {"truncate", s_truncate},
    {"fallocate", s_fallocate},
    {"write", s_write},
    {"open", s_open},
    {"close", s_close},
    {"setxattr", s_setxattr},
    {"removexattr", s_removexattr},
    {"session_new", s_session_new},
    {"heartbeat", s_heartbeat},
    {"session_dead", s_session_dead},
    {"session_clean", s_session_clean},
    {"space_usage", s_space_usage},
    {"reclaim", s_reclaim},
    {"pack_total", s_pack_total},
    {"staging_done", s_staging_done},
    {"snap_begin", s_snap_begin},
    {"snap_copy", s_snap_copy},
    {"snap_commit", s_snap_commit},
    {"snap_claim", s_snap_claim},
    {"snap_drop", s_snap_drop},
    {"clone_data", s_clone_data},
    {"version_dir", s_version_dir},
    {"version_rm", s_version_rm},
    {"version_swap", s_version_swap},
    {"upgrade_inodes", s_upgrade_inodes},
    {"upgrade_dir", s_upgrade_dir},
};

const char *meta_redis_lua_prelude(void)
{
	return prelude;
}

/* The body of the script called name, or NULL. */
const char *meta_redis_lua(const char *name)
{
	for (size_t i = 0; i < sizeof(scripts) / sizeof(scripts[0]); i++)
		if (strcmp(scripts[i].name, name) == 0)
			return scripts[i].body;
	return NULL;
}

/*
 * Every script as one function library, for FUNCTION LOAD (Redis 7): the
 * prelude once, then each script registered as the function
 * "<lib>_<name>", which starts with fresh(). A call then runs only its
 * body, where EVALSHA runs the prelude's definitions every time. lib gets
 * the library's name, "granary_" and a hash of the text, so that clients
 * of different builds sharing a server each call their own functions.
 * Returns the text (malloc'd), or NULL when out of memory.
 */
char *meta_redis_lua_library(char *lib, size_t cap)
{
	static const char fn[] =
	    "redis.register_function('%s_%s', function(KEYS, ARGV)\n"
	    "fresh()\n%s\nend)\n";
	uint64_t h = XXH3_64bits(fn, sizeof fn);
	size_t i, len;
	char *text;
	FILE *f;

	h = XXH3_64bits_withSeed(prelude, strlen(prelude), h);
	for (i = 0; i < sizeof(scripts) / sizeof(scripts[0]); i++) {
		h = XXH3_64bits_withSeed(scripts[i].name,
					 strlen(scripts[i].name) + 1, h);
		h = XXH3_64bits_withSeed(scripts[i].body,
					 strlen(scripts[i].body), h);
	}
	snprintf(lib, cap, "granary_%016llx", (unsigned long long)h);
	f = open_memstream(&text, &len);
	if (!f)
		return NULL;
	fprintf(f, "#!lua name=%s\n%s", lib, prelude);
	for (i = 0; i < sizeof(scripts) / sizeof(scripts[0]); i++)
		fprintf(f, fn, lib, scripts[i].name, scripts[i].body);
	if (ferror(f)) {
		fclose(f);
		free(text);
		return NULL;
	}
	if (fclose(f) != 0)
		return NULL;
	return text;
}
