-- lib: snap
-- ARGV: src, dst, the client's chain for dst (quota_data: used only for
-- a file without a parent field). Make the empty regular file dst hold
-- src's data: its chunk lists copied, one more reference per record
-- (the data is shared copy-on-write, as a snapshot's). Returns {0,
-- dst's attr}.
local src, dst = tonumber(ARGV[1]), tonumber(ARGV[2])
local v = irec(src)
local b = iget_data(dst)
if not v or not b then
	return {ENOENT}
end
local a = attr_unpack(string.sub(v, 1, ALEN))
if a.ty == DIR or b.ty == DIR then
	return {EISDIR}
end
if a.ty ~= FILE or b.ty ~= FILE or b.len ~= 0 or src == dst or
	#tail_get(dst) ~= 0 then
	return {EINVAL}
end
local t = string.sub(v, ALEN + 1)
refs_add(t)
tail_set(dst, t, true)
for idx = 1, math.ceil(a.len / CHUNK) - 1 do
	local c = redis.call('GET', ckey(src, idx))
	if c then
		refs_add(c)
		redis.call('SET', ckey(dst, idx), c)
	end
end
mbytes, mstored = a.len, stored(a)
b.len, b.par = a.len, mstored + 1
touch(dst, true)
made_flush()
quota_data(dst, b, ARGV[3])
data_charge(mstored)
iflush()
return {0, attr_pack(b)}
