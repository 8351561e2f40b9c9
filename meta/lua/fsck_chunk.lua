-- ARGV: ino, rec (its attribute record as fsck read it), idx. Chunk
-- list idx of a file whose length ends at or before that chunk (a
-- truncate drops such a list, and a later extension would read its
-- bytes instead of zeros): dropped as truncate drops it, its references
-- with it (a slice left with none goes to delslices). EAGAIN when the
-- record changed since fsck read it. Returns {0}.
local EAGAIN = @EAGAIN@
local ino, idx = tonumber(ARGV[1]), tonumber(ARGV[3])
if redis.call('HGET', ib(ino), iaf(ino)) ~= ARGV[2] then
	return {EAGAIN}
end
local a = iget(ino)
if a.ty ~= FILE or a.len > idx * CHUNK then
	return {EAGAIN}
end
chunk_cut(ino, idx)
return {0}
