#!/bin/bash
# serial: counts its Redis's commands, which other tests' drop_caches raise
# t0100-cache.sh - the node's disk cache: warmup fills it (progress,
# --check, --evict), a remount keeps it warm (the second epoch asks the
# store for nothing), a corrupt cache file is repaired transparently, and a
# full cache disk never fails a read.
. "$(dirname "$0")/lib.sh"

new_volume cache
M=$TMP/mnt
mount_vol "$META" "$M"
mkdir -p "$TMP/src/a" "$TMP/src/b"
for i in $(seq 1 40); do
	random_file "$TMP/src/$([ $((i % 2)) = 0 ] && echo a || echo b)/f$i" $((20000 + i * 7919))
done
mkdir -p "$M/ds" && cp -r "$TMP/src/." "$M/ds/"
umount_vol "$M"
mount_vol "$META" "$M"
ok "dataset of 40 files written"

out=$("$GRANARY" warmup --check "$M/ds")
case $out in *"0 B of"*"(0.0%)"*) ;; *) fail "check before warmup: $out" ;; esac
out=$("$GRANARY" warmup --threads 4 "$M/ds") || fail "warmup failed: $out"
case $out in "warmup: 40 files"*) ;; *) fail "warmup summary: $out" ;; esac
out=$("$GRANARY" warmup --check "$M/ds")
case $out in *"(100.0%)"*) ;; *) fail "check after warmup: $out" ;; esac
(cd "$M/ds/a" && "$GRANARY" warmup --check . >/dev/null) || fail "warmup from inside the mount"
ok "warmup fills the cache; --check reports it"

umount_vol "$M"
mount_vol "$META" "$M"
g0=$(stat_of "$M" store gets)
diff -r "$TMP/src" "$M/ds" || fail "epoch after remount: contents differ"
g1=$(stat_of "$M" store gets)
check_eq "$((g1 - g0))" 0 "store GETs during an epoch on a warm cache after remount"
ok "remount keeps the cache warm: no GETs"

# corrupt one cache entry: the read must still give the right bytes
entry=$(find "$TMP/cache-mnt" -type f \( -path '*blocks*' -o -path '*packs*' \) -print -quit)
[ -n "$entry" ] || fail "no cache entries found under $TMP/cache-mnt"
printf 'garbage' | dd of="$entry" bs=1 seek=30 conv=notrunc status=none
umount_vol "$M"
mount_vol "$META" "$M"
diff -r "$TMP/src" "$M/ds" || fail "reads after corrupting a cache entry differ"
[ "$(stat_of "$M" memory_cache corrupt)" -ge 1 ] || fail "the corrupt entry was not noticed"
ok "a corrupt cache entry is repaired transparently"

bad0=$(stat_of "$M" disk_cache bad_entries)
[ "$bad0" -ge 1 ] || fail "the corrupt entry is not counted in bad_entries"
n0=$(stat_of "$M" disk_cache entries)
out=$("$GRANARY" warmup --evict "$M/ds") || fail "evict: $out"
out=$("$GRANARY" warmup --check "$M/ds")
case $out in *"0 B of"*) ;; *) fail "check after evict: $out" ;; esac
check_eq "$(stat_of "$M" disk_cache bad_entries)" "$bad0" \
	"bad_entries after evicting healthy entries"
ev=$(stat_of "$M" disk_cache evicted)
[ "$n0" -ge 1 ] && [ "${ev:-0}" -ge "$n0" ] ||
	fail "$n0 entries evicted by request, ${ev:-none} counted as evicted"
ok "--evict drops the files from the cache, counted as evicted, not bad"

# a cache on a tiny disk: reads never fail
umount_vol "$M"
mkdir -p "$TMP/tiny"
mount -t tmpfs -o size=1m granary-test "$TMP/tiny" || fail "cannot mount a tmpfs"
mkdir -p "$M"
MOUNTS="$MOUNTS $M"
"$GRANARY" mount "$META" "$M" --log "$TMP/log-tiny.log" --cache-dir "$TMP/tiny" \
	--cache-size 100M --free-space-ratio 0 >/dev/null || fail "mount with a tiny cache"
diff -r "$TMP/src" "$M/ds" || fail "reads with a full cache disk differ"
diff -r "$TMP/src" "$M/ds" || fail "second reads with a full cache disk differ"
umount_vol "$M"
umount "$TMP/tiny"
ok "a full cache disk never fails a read"

# a read-only dataset mount: after the first epoch, opens, lookups and
# reads cost no metadata round trip (redis counts the commands it serves)
redis_cmds() {
	redis-cli -s "$GRANARY_TEST_REDIS_SOCK" info stats |
		sed -n 's/^total_commands_processed:\([0-9]*\).*/\1/p'
}
mount_vol "$META" "$M" --read-only
find "$M/ds" -type f -exec cat {} + >/dev/null
c0=$(redis_cmds)
for e in 1 2; do find "$M/ds" -type f -exec cat {} + >/dev/null; done
c1=$(redis_cmds)
# the info calls themselves and at most a heartbeat may come between
[ $((c1 - c0)) -le 4 ] ||
	fail "read-only epochs after the first made $((c1 - c0)) redis calls for 40 files"
# the kernel may drop its dentries and inodes (memory pressure): the
# client's own name cache still spares the round trips
find "$M/ds" -type f >"$TMP/list"
sync
echo 3 >/proc/sys/vm/drop_caches
c0=$(redis_cmds)
xargs cat <"$TMP/list" >/dev/null
c1=$(redis_cmds)
[ $((c1 - c0)) -le 4 ] ||
	fail "an epoch after the kernel dropped its caches made $((c1 - c0)) redis calls for 40 files"
umount_vol "$M"
ok "read-only mount: later epochs cost no metadata round trips"

"$GRANARY" warmup /etc >/dev/null 2>"$TMP/err" && fail "warmup outside a mount succeeded"
grep -q "not on a granary mount" "$TMP/err" || fail "warmup outside a mount: $(cat "$TMP/err")"
ok "warmup refuses paths outside a mount"

# with no --cache-dir, a file:// store on the file system of the default
# cache directory is not cached: the blocks would only be copied to the
# same disk (a --cache-dir given is always used, as above)
fs_dev() { # PATH: the file system of PATH or of its nearest existing parent
	local p=$1
	until [ -e "$p" ]; do p=$(dirname "$p"); done
	stat -c %d "$p"
}
if [ "$GRANARY_STORAGE" != file ]; then
	skip "same-disk cache rule (file:// stores only)"
elif [ "$(id -u)" != 0 ] || [ "$(fs_dev /var/cache/granary)" != "$(fs_dev "$TMP")" ]; then
	skip "same-disk cache rule ($TMP is not on the file system of /var/cache/granary)"
else
	M2=$TMP/mnt-nocache
	mkdir -p "$M2"
	MOUNTS="$MOUNTS $M2"
	timeout 60 "$GRANARY" mount "$META" "$M2" --log "$TMP/log-mnt-nocache.log" \
		>"$TMP/mount.out" 2>&1 || fail "mount without --cache-dir: $(cat "$TMP/mount.out")"
	getfattr --absolute-names --only-values -n granary.stats "$M2" | tr -d ' \n' |
		grep -q '"disk_cache":{"enabled":false' ||
		fail "a file:// store on the default cache's disk was cached"
	grep -q "no disk cache: the store is on the file system of /var/cache/granary" \
		"$TMP/log-mnt-nocache.log" || fail "no log line says why the disk cache is off"
	diff -r "$TMP/src" "$M2/ds" || fail "read without a disk cache: contents differ"
	[ ! -e /var/cache/granary ] || [ -z "$(find /var/cache/granary -newer "$TMP/src" -type f -print -quit)" ] ||
		fail "files were cached under /var/cache/granary"
	umount_vol "$M2"
	ok "no disk cache by default for a file:// store on the cache's disk"
fi
