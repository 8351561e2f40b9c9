-- ARGV: was. The key 'trash', still was and naming no directory (else
-- EAGAIN), made right: the root's TRASH entry, when it is a directory
-- (a version restore of the root that copied the trash left one), becomes
-- the trash, each of its hour directories counted again in trashcount
-- (its entries; trashbytes of an hour not counted before starts at 0, a
-- lower bound as ever); else the key goes, and the next removal makes a
-- new trash (lib/trash.lua). Either way the counts and tn keys of hours
-- that are not in the trash go. Returns {0, the trash now (0: none)}.
local EAGAIN = @EAGAIN@
local was = ARGV[1]
if redis.call('GET', 'trash') ~= was then
	return {EAGAIN}
end
local r = redis.call('HGET', ib(tonumber(was)), iaf(tonumber(was)))
if r and (#r ~= ALEN or string.byte(r, 1) ~= 1 or
	string.byte(r, 2) == DIR) then
	return {EAGAIN} -- a directory, or a corrupt record: not ours
end
local t, hours = 0, {}
local e = redis.call('HGET', 'd1', TRASH)
if e then
	local ino, ty = dent_unpack(e)
	local a = ty == DIR and iget(ino)
	if a and a.ty == DIR then
		t = ino
	end
end
if t ~= 0 then
	redis.call('SET', 'trash', d(t))
	local ents = redis.call('HGETALL', key('d', t))
	for i = 1, #ents, 2 do
		local h, ty = dent_unpack(ents[i + 1])
		if ty == DIR then
			local n = redis.call('HLEN', key('d', h))
			hours[d(h)] = true
			if n > 0 then
				redis.call('HSET', 'trashcount', d(h), n)
			else
				redis.call('HDEL', 'trashcount', d(h))
			end
		end
	end
else
	redis.call('DEL', 'trash')
end
for _, k in ipairs({'trashcount', 'trashbytes'}) do
	for _, h in ipairs(redis.call('HKEYS', k)) do
		if not hours[h] then
			redis.call('HDEL', k, h)
			redis.call('DEL', 'tn' .. h)
		end
	end
end
return {0, t}
