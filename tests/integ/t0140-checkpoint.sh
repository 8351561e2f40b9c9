#!/bin/bash
# t0140-checkpoint.sh - a checkpoint save as training jobs do it: several
# ranks write multi-block shards at once with fsync through a small write
# budget; every shard reads back with the same SHA-256 on another client
# (cold cache) after a remount, each is a few large slices (back-pressure,
# not fragmentation), and a snapshot of the checkpoint directory is
# isolated from the next save that overwrites it in place.
. "$(dirname "$0")/lib.sh"

new_volume ckpt
A=$TMP/a B=$TMP/b
RANKS=4 MB=24
[ "$GRANARY_STORAGE" = s3 ] && MB=12 # s3rver is slow
# 16 MiB for 4 writers of 4 MiB blocks: every writer waits on the others
mount_vol "$META" "$A" --buffer-size 16M --max-uploads 4

mkdir "$A/ckpt"
for r in $(seq 0 $((RANKS - 1))); do
	random_file "$TMP/shard$r" $((MB << 20))
done
for r in $(seq 0 $((RANKS - 1))); do
	dd if="$TMP/shard$r" of="$A/ckpt/rank$r.pt" bs=1M conv=fsync status=none &
	bg_track $!
done
for p in $BG_PIDS; do wait "$p" || fail "a rank's save failed"; done
BG_PIDS=""
(cd "$TMP" && sha256sum shard*) | sed 's/shard\([0-9]*\)/rank\1.pt/' >"$TMP/sums"
(cd "$A/ckpt" && sha256sum -c --quiet "$TMP/sums") || fail "checksums on the writing client"
ok "$RANKS ranks saved $MB MiB each at once with fsync through a 16 MiB budget"

# each shard is a few large slices: count the records in chunk 0 (17 or
# 25 bytes a slice; a field of the inode's hash n<ino/32> while at most 64
# bytes, else the key c<ino>_0: meta/SCHEMA.md)
for r in $(seq 0 $((RANKS - 1))); do
	ino=$(stat -c %i "$A/ckpt/rank$r.pt")
	len=$(($(rcli HSTRLEN "n$((ino / 32))" $((ino % 32 + 32))) + $(rcli STRLEN "c${ino}_0")))
	[ "$len" -gt 0 ] || fail "rank $r: no slice record found for inode $ino"
	n=$(((len + 16) / 17))
	[ "$n" -le $((MB / 4)) ] ||
		fail "rank $r: about $n slices in its first chunk ($len bytes of records) for $MB MiB"
done
ok "no shard is cut into small slices (at most one per 4 MiB block)"

# another client, cold: same bytes after the writer unmounted
umount_vol "$A"
mount_vol "$META" "$B"
(cd "$B/ckpt" && sha256sum -c --quiet "$TMP/sums") || fail "checksums on another client after remount"
ok "every shard reads back with its SHA-256 on another client after remount"

# keep this checkpoint, then save the next one in place: the snapshot
# keeps the old bytes
"$GRANARY" snapshot "$B/ckpt" "$B/ckpt.keep" >/dev/null || fail "snapshot of the checkpoint"
random_file "$TMP/next" $((MB << 20))
dd if="$TMP/next" of="$B/ckpt/rank0.pt" bs=1M conv=fsync,notrunc status=none ||
	fail "saving the next checkpoint over the first"
cmp "$TMP/next" "$B/ckpt/rank0.pt" || fail "the new save reads back differently"
(cd "$B/ckpt.keep" && sha256sum -c --quiet "$TMP/sums") || fail "the kept checkpoint changed"
ok "a snapshot keeps the checkpoint while the next save overwrites it in place"

# A write-only open with no other open of the file on the node writes
# past the page cache; what the node cached of the file before, or caches
# meanwhile through another open, is never served after the write.
random_file "$TMP/pa" $((2 << 20))
random_file "$TMP/pb" $((1 << 20))
cp "$TMP/pa" "$B/pc"
cat "$B/pc" >/dev/null
[ "$(fincore --bytes --noheadings -o RES "$B/pc" | tr -d ' ')" -gt 0 ] ||
	fail "a read-back file has no page cached: the checks below would prove nothing"
dd if="$TMP/pb" of="$B/ckpt/wo.pt" bs=1M conv=fsync status=none || fail "write-only save"
cmp "$TMP/pb" "$B/ckpt/wo.pt" || fail "a write-only save reads back differently"
dd if="$TMP/pb" of="$B/pc" bs=1M conv=fsync,notrunc status=none || fail "write-only save over a cached file"
cp "$TMP/pa" "$TMP/want"
dd if="$TMP/pb" of="$TMP/want" bs=1M conv=notrunc status=none
cmp "$TMP/want" "$B/pc" || fail "a read after a write-only save got pages cached before it"
python3 - "$B/pc" <<'EOF_PY' || fail "a reader open during a write-only save read stale pages"
import os, sys
w = os.open(sys.argv[1], os.O_WRONLY)  # first: past the page cache
r = os.open(sys.argv[1], os.O_RDONLY)
os.pread(r, 1 << 20, 0)  # now cached
for i in range(4):
    data = bytes([65 + i]) * 300000
    os.pwrite(w, data, 12345 + i * 100000)
    got = os.pread(r, len(data), 12345 + i * 100000)
    if got != data:
        sys.exit("write %d: the reader got stale bytes" % i)
EOF_PY
ok "write-only saves (past the page cache) leave no stale page to readers on the node"

umount_vol "$B"

# A read-only open of a big file (here 4 MiB or more) reads past the page
# cache on kernels that still map such an open shared (6.6 and later);
# smaller files, and older kernels, keep the page cache.
C=$TMP/c
mount_vol "$META" "$C" --direct-read 4M
(cd "$C/ckpt.keep" && sha256sum -c --quiet "$TMP/sums") || fail "checksums read past the page cache"
cmp "$TMP/shard1" "$C/ckpt/rank1.pt" || fail "a big file read past the page cache differs"
res=$(fincore --bytes --noheadings -o RES "$C/ckpt/rank1.pt" | tr -d ' ')
kmin=$(printf '6.6\n%s\n' "$(uname -r)" | sort -V | head -1)
if [ "$kmin" = 6.6 ]; then
	[ "$res" = 0 ] || fail "a big file read on Linux $(uname -r) left $res bytes in the page cache"
	ok "a big file reads back past the page cache"
else
	[ "$res" -gt 0 ] || fail "Linux $(uname -r) is older than 6.6, yet a big file read left no page cached"
	ok "a big file reads through the page cache (Linux $(uname -r) is older than 6.6)"
fi
# read just before the look (a loaded machine may reclaim its pages in
# between; a file read past the page cache would show 0 every time)
pc_kept() {
	cat "$C/pc" >/dev/null &&
		[ "$(fincore --bytes --noheadings -o RES "$C/pc" | tr -d ' ')" -gt 0 ]
}
pc_kept || pc_kept || pc_kept ||
	fail "a file under --direct-read was not kept in the page cache"
# mapped_as FILE WANT: a shared mmap of FILE (safetensors' load) reads WANT
mapped_as() {
	python3 - "$1" "$2" <<'EOF_PY'
import mmap, sys
with open(sys.argv[1], "rb") as f, open(sys.argv[2], "rb") as g:
    m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)  # MAP_SHARED
    if m[:] != g.read():
        sys.exit("a shared mmap read other bytes than " + sys.argv[2])
EOF_PY
}
mapped_as "$C/ckpt/rank1.pt" "$TMP/shard1" || fail "a shared mmap of a big file"
ok "a big file maps shared (safetensors' load) with the saved bytes"
# a save over it, then the next read past the page cache and the next
# mapping see the new bytes
random_file "$TMP/p2" $((1 << 20))
dd if="$TMP/p2" of="$C/ckpt/rank1.pt" bs=1M seek=3 conv=fsync,notrunc status=none || fail "a save into a big file"
cp "$TMP/shard1" "$TMP/want1"
dd if="$TMP/p2" of="$TMP/want1" bs=1M seek=3 conv=notrunc status=none
cmp "$TMP/want1" "$C/ckpt/rank1.pt" || fail "a read past the page cache after a save got old bytes"
mapped_as "$C/ckpt/rank1.pt" "$TMP/want1" || fail "a shared mmap after a save got old bytes"
ok "reads and shared maps of a big file see a save made on the node"
umount_vol "$C"
