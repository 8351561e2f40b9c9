-- ARGV: slice floor, inode floor. A restored volume's ids move to a later
-- epoch (meta_id_floor_raise: another restore of the same store used
-- this one's): nextslice and nextinode become at least these, and so do
-- the settings slice_floor and inode_floor; ENODEV when the database
-- holds no volume. Raising twice to the same floors changes nothing.
if redis.call('EXISTS', 'setting') == 0 then
	return {ENODEV}
end
local function raise(get, set, v)
	local cur = tonumber(get() or '0')
	if cur < v then
		set(d(v))
	end
end
local s, i = tonumber(ARGV[1]), tonumber(ARGV[2])
raise(function() return redis.call('GET', 'nextslice') end,
	function(v) redis.call('SET', 'nextslice', v) end, s)
raise(function() return redis.call('GET', 'nextinode') end,
	function(v) redis.call('SET', 'nextinode', v) end, i)
raise(function() return redis.call('HGET', 'setting', 'slice_floor') end,
	function(v) redis.call('HSET', 'setting', 'slice_floor', v) end, s)
raise(function() return redis.call('HGET', 'setting', 'inode_floor') end,
	function(v) redis.call('HSET', 'setting', 'inode_floor', v) end, i)
return {0}
