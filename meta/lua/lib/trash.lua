-- trash helpers: put between the prelude and the scripts that remove
-- names or move them out of the trash (first line `-- lib: trash`).
-- A removed inode keeps its record and data: its entry moves into the
-- hour directory of the trash (SCHEMA.md, "Trash") under the name
-- "<parent>-<ino>-<name>", cut to NAMEMAX bytes (the whole name then in
-- the hash tn<hour>). trashcount and trashbytes count, by hour
-- directory, the entries and the stored bytes they hold.
local TRASHMODE = 448 -- 0700: root's alone

-- 'YYYY-MM-DD-HH' (UTC) of unix seconds t: the civil date of the day
-- count (Howard Hinnant's days_from_civil, inverted), since the server's
-- Lua has no os.date
local function hour_name(t)
	local z = math.floor(t / 86400) + 719468
	local era = math.floor(z / 146097)
	local doe = z - era * 146097
	local yoe = math.floor((doe - math.floor(doe / 1460) +
		math.floor(doe / 36524) - math.floor(doe / 146096)) / 365)
	local doy = doe - (365 * yoe + math.floor(yoe / 4) -
		math.floor(yoe / 100))
	local mp = math.floor((5 * doy + 2) / 153)
	local day = doy - math.floor((153 * mp + 2) / 5) + 1
	local mon = mp < 10 and mp + 3 or mp - 9
	local year = yoe + era * 400 + (mon <= 2 and 1 or 0)
	return string.format('%04d-%02d-%02d-%02d', year, mon, day,
		math.floor(t % 86400 / 3600))
end

-- a root-owned directory of mode TRASHMODE named name in parent (record
-- p); its inode number comes after every batch clients took
local function trash_mkdir(parent, p, name)
	local ino = redis.call('INCR', 'nextinode')
	local s, ns = now()
	icache[ino] = {ty = DIR, mode = TRASHMODE, uid = 0, gid = 0,
		nlink = 2, len = 0, par = parent, as = s, an = ns, ms = s,
		mn = ns, cs = s, cn = ns}
	idirty[ino] = true
	redis.call('HSET', key('d', parent), name, dent_pack(ino, DIR))
	p.nlink = p.nlink + 1
	touch(parent, true)
	redis.call('INCR', 'totalinodes')
	return ino
end

-- the hour directory of now, made (with the trash) when missing; nil
-- when trash_days is 0, or when the root holds a TRASH that is not the
-- trash (made before the trash existed: removals are final then)
local function trash_hour()
	local days = tonumber(redis.call('HGET', 'setting', 'trash_days'))
	if not days or days <= 0 then
		return nil
	end
	local t = trash_ino()
	if t and not iget(t) then
		t = false -- deleted behind our back (by hand in Redis)
	end
	if not t then
		if redis.call('HEXISTS', 'd1', TRASH) == 1 then
			return nil
		end
		t = trash_mkdir(1, iget(1), TRASH)
		redis.call('SET', 'trash', d(t))
		tino = t
	end
	local name = hour_name(now())
	local e = redis.call('HGET', key('d', t), name)
	if e then
		return (dent_unpack(e))
	end
	return trash_mkdir(t, iget(t), name)
end

-- Inode ino (record a), whose last name `name` in parent was just
-- removed, goes into the trash. False when there is no trash to take it:
-- the caller deletes it.
local function trash_put(parent, name, ino, a)
	local h = trash_hour()
	if not h then
		return false
	end
	local prefix = d(parent) .. '-' .. d(ino) .. '-'
	local tname = prefix .. name
	if #tname > NAMEMAX then
		-- cut at a character's start, never inside a UTF-8 sequence
		local n = NAMEMAX - #prefix
		while n > 0 and bit.band(string.byte(name, n + 1), 192) == 128 do
			n = n - 1
		end
		tname = prefix .. string.sub(name, 1, n)
		redis.call('HSET', key('tn', h), tname, name)
	end
	redis.call('HSET', key('d', h), tname, dent_pack(ino, a.ty))
	if a.ty == DIR then
		local ha = iget(h)
		a.par = h
		ha.nlink = ha.nlink + 1
	elseif a.ty == FILE then
		-- its writes through a descriptor still open count here
		-- (quota_data), in no quota
		fpar_set(ino, -h)
	end
	touch(h, true)
	touch(ino, false)
	redis.call('HINCRBY', 'trashcount', d(h), 1)
	if a.ty == FILE and stored(a) > 0 then
		redis.call('HINCRBY', 'trashbytes', d(h), d(stored(a)))
	end
	return true
end

-- Entry tname of hour directory h (its inode's record a) leaves the
-- trash, restored or deleted for good: the counts and the long name go.
local function trash_take(h, tname, a)
	redis.call('HDEL', key('tn', h), tname)
	if redis.call('HINCRBY', 'trashcount', d(h), -1) <= 0 then
		redis.call('HDEL', 'trashcount', d(h))
		redis.call('HDEL', 'trashbytes', d(h))
		return
	end
	if a.ty == FILE and stored(a) > 0 and
		redis.call('HINCRBY', 'trashbytes', d(h), d(-stored(a))) <= 0 then
		redis.call('HDEL', 'trashbytes', d(h))
	end
end

-- Hour directory h, empty, is deleted: its counts and names go with it.
local function trash_hour_drop(h)
	redis.call('HDEL', 'trashcount', d(h))
	redis.call('HDEL', 'trashbytes', d(h))
	redis.call('DEL', key('tn', h))
end
