-- ARGV: 'h' then inode hash numbers (every inode of each n<h>), or 'i'
-- then inode numbers. Reads, writes nothing: the atomic step of a dump
-- (meta/redis_dump.c), so that each inode is one consistent image.
-- Returns {0, item...}, an item per inode found, in the order asked:
-- {ino, attr record, 1 when chunk 0 is the tail field else 0,
--  {idx, records, ...} or nil, xattrs {name, value, ...} or nil,
--  symlink target or nil, directory: first entries page's cursor ('0':
--  all of them) or nil, {name, value, ...} or nil, its versions
--  directory or nil, its versions {tag, record, ...} or nil}.
-- A directory of more than PAGE entries gives its first HSCAN page; the
-- caller reads the others itself, page by page.
local PAGE = 1000
local out = {0}

local function one(ino, s, t)
	local item = {ino, s, t and 1 or 0, false, false, false, false, false,
		false, false}
	if #s ~= ALEN then
		out[#out + 1] = item -- corrupt: the caller says so
		return
	end
	local ty, len = string.byte(s, 2), struct.unpack('<I8', s, 17)
	if ty == FILE then
		local ch = {}
		local c0 = t or redis.call('GET', ckey(ino, 0))
		if c0 then
			ch[#ch + 1], ch[#ch + 2] = 0, c0
		end
		for idx = 1, math.ceil(len / CHUNK) - 1 do
			local c = redis.call('GET', ckey(ino, idx))
			if c then
				ch[#ch + 1], ch[#ch + 2] = idx, c
			end
		end
		if #ch > 0 then
			item[4] = ch
		end
	elseif ty == SYMLINK then
		item[6] = redis.call('GET', key('s', ino)) or false
	elseif ty == DIR then
		local dk = key('d', ino)
		if redis.call('HLEN', dk) <= PAGE then
			item[7], item[8] = '0', redis.call('HGETALL', dk)
		else
			local r = redis.call('HSCAN', dk, '0', 'COUNT', PAGE)
			item[7], item[8] = r[1], r[2]
		end
		item[9] = redis.call('HGET', 'vdirs', d(ino)) or false
		if item[9] then
			item[10] = redis.call('HGETALL', key('v', ino))
		end
	end
	local x = redis.call('HGETALL', key('x', ino))
	if #x > 0 then
		item[5] = x
	end
	out[#out + 1] = item
end

if ARGV[1] == 'h' then
	for i = 2, #ARGV do
		local h = tonumber(ARGV[i])
		local f = redis.call('HGETALL', 'n' .. ARGV[i])
		local attr, tail = {}, {}
		for j = 1, #f, 2 do
			local k = tonumber(f[j])
			if k and k < IB then
				attr[k] = f[j + 1]
			elseif k and k < 2 * IB then
				tail[k - IB] = f[j + 1]
			end
		end
		for k = 0, IB - 1 do
			if attr[k] then
				one(h * IB + k, attr[k], tail[k])
			end
		end
	end
else
	for i = 2, #ARGV do
		local ino = tonumber(ARGV[i])
		local r = redis.call('HMGET', ib(ino), iaf(ino), itf(ino))
		if r[1] then
			one(ino, r[1], r[2])
		end
	end
end
return out
