#!/bin/bash
# t0106-writeback.sh - --writeback: small files (packs) and big files (blocks)
# are durable on the node's disk when close/fsync return and reach the
# store in the background; a client killed with SIGKILL uploads what it
# staged at the next mount with nothing lost; umount and "granary.sync"
# wait for the uploads; files deleted before their pack is uploaded cost no
# upload at all; staged blocks stay under --stage-size; a full staging disk
# makes big files go to the store at once.
. "$(dirname "$0")/lib.sh"

gsync() { setfattr -n granary.sync -v 1 "$1"; }

# kill_client MP: SIGKILL the daemon serving MP and clear its dead mount.
kill_client() {
	local pids
	pids=$(mount_pids "$1")
	[ -n "$pids" ] || fail "no daemon found for $1"
	kill -9 $pids
	fusermount3 -uz "$1" 2>/dev/null
	MOUNTS=${MOUNTS/ $1/}
}

new_volume wb
A=$TMP/a B=$TMP/b
WB="--writeback --pack-window 60s"
mount_vol "$META" "$A" $WB
mount_vol "$META" "$B" --attr-timeout 0.2 --entry-timeout 0.2
mkdir -p "$TMP/src" "$A/ds"
for i in $(seq 1 12); do random_file "$TMP/src/f$i" $((500 + i * 7001)); done
cp "$TMP/src/"* "$A/ds/"
check_eq "$(stat_of "$A" store puts)" 0 "store PUTs before the pack window is over"
[ "$(stat_of "$A" packs staged)" -ge 1 ] || fail "nothing staged after writing 12 files"
diff -r "$TMP/src" "$A/ds" || fail "the writing client reads its staged files differently"
ok "12 files staged on the node, readable there, nothing uploaded yet"

staged_in_status() {
	"$GRANARY" status "$META" --json | tr -d ' \n' |
		grep -qE '"staged_packs":[1-9]'
}
wait_until 10 staged_in_status ||
	fail "granary status does not show the staged packs: $("$GRANARY" status "$META")"
"$GRANARY" status "$META" | grep -qE "[0-9]+ objects, " ||
	fail "granary status (text) does not show the staged packs"
ok "granary status shows what the client has staged"

gsync "$A" || fail "setting granary.sync failed"
check_eq "$(stat_of "$A" packs staged)" 0 "packs still staged after granary.sync"
[ "$(stat_of "$A" store puts)" -ge 1 ] || fail "no PUT after granary.sync"
diff -r "$TMP/src" "$B/ds" || fail "another client reads the synced files differently"
ok "granary.sync uploads the staged packs; another client reads them"
nothing_staged() { ! staged_in_status; }
wait_until 10 nothing_staged || fail "granary status still shows staged packs after granary.sync"

# SIGKILL with packs staged: the next mount uploads them
mkdir "$TMP/src2" "$A/ds2"
for i in $(seq 1 10); do
	random_file "$TMP/src2/g$i" $((2000 + i * 3001))
	dd if="$TMP/src2/g$i" of="$A/ds2/g$i" conv=fsync status=none ||
		fail "writing g$i"
done
[ "$(stat_of "$A" packs staged)" -ge 1 ] || fail "nothing staged before the kill"
kill_client "$A"
staged=$(find "$TMP/cache-a" -path '*staging-*' -name '*.pack' | wc -l)
[ "$staged" -ge 1 ] || fail "no staged pack files left by the killed client"
mount_vol "$META" "$A" $WB
[ "$(stat_of "$A" packs recovered)" -ge 1 ] || fail "the new mount took over no staged pack"
gsync "$A" || fail "granary.sync after recovery"
sleep 0.5
diff -r "$TMP/src2" "$B/ds2" || fail "files fsync'd before SIGKILL differ on another client"
check_eq "$(find "$TMP/cache-a" -path '*staging-*' -name '*.pack' | wc -l)" 0 \
	"staged pack files left after recovery"
ok "SIGKILL: $staged staged packs uploaded by the next mount, every fsync'd byte there"

# files deleted before their pack is uploaded: no upload
p0=$(stat_of "$A" store puts)
for i in 1 2 3; do head -c 10000 /dev/urandom >"$A/gone$i"; done
rm "$A/gone1" "$A/gone2" "$A/gone3"
# the reclaimer (every 2 s) counts their frames dead in the pack, which
# has no total yet: its upload then finds it all dead
frames_dead() { [ "$(rcli HVALS packdead | awk '{ s += $1 } END { print s + 0 }')" -ge 30000 ]; }
wait_until 15 frames_dead || fail "the deleted files' frames are not counted dead: $(rcli HGETALL packdead)"
gsync "$A" || fail "granary.sync"
check_eq "$(stat_of "$A" store puts)" "$p0" "PUTs for a pack whose files were all deleted"
ok "a pack whose files were deleted before upload is never uploaded"

# umount waits for the uploads
mkdir "$TMP/src3" "$A/ds3"
for i in $(seq 1 5); do random_file "$TMP/src3/h$i" $((1000 + i * 999)); done
cp "$TMP/src3/"* "$A/ds3/"
umount_vol "$A"
diff -r "$TMP/src3" "$B/ds3" || fail "files written before umount differ on another client"
check_eq "$(find "$TMP/cache-a" -path '*staging-*' -name '*.pack' | wc -l)" 0 \
	"staged pack files left after umount"
ok "umount uploads everything staged"
# a full staging disk: close() reports ENOSPC, nothing is committed for
# the file, earlier files are intact, and the mount goes on
mkdir -p "$TMP/tiny" "$TMP/c"
mount -t tmpfs -o size=2m granary-test "$TMP/tiny" || fail "cannot mount a tmpfs"
C=$TMP/c
mount_vol "$META" "$C" --writeback --pack-window 60s --cache-dir "$TMP/tiny" --cache-size 0
random_file "$TMP/ok1" 300000
cp "$TMP/ok1" "$C/ok1"
got=""
for i in $(seq 1 20); do
	if ! head -c 500000 /dev/urandom 2>/dev/null | dd of="$C/fill$i" bs=500000 conv=fsync status=none 2>"$TMP/dd.err"; then
		got=$(cat "$TMP/dd.err")
		break
	fi
done
case $got in *"No space left on device"*) ;; *) fail "a full staging disk gave: '${got:-no error}'" ;; esac
cmp "$TMP/ok1" "$C/ok1" || fail "a file staged before the disk filled differs"
gsync "$C" || fail "granary.sync after ENOSPC"
diff "$TMP/ok1" "$B/ok1" || fail "another client reads the file staged before ENOSPC differently"
# a big file on the full staging disk: its blocks go to the store at once
random_file "$TMP/big10" $((10 << 20))
dd if="$TMP/big10" of="$C/big10" bs=1M conv=fsync status=none ||
	fail "a big file on a full staging disk: $?"
[ "$(stat_of "$C" blocks direct)" -ge 1 ] || fail "no block put at once on a full staging disk"
cmp "$TMP/big10" "$B/big10" || fail "a big file written past a full staging disk differs"
umount_vol "$C"
umount "$TMP/tiny"
ok "full staging disk: ENOSPC at close for small files; big files go to the store at once"

# --- big files: blocks staged on the node, SIGKILL after fsync, recovery.
# This session's uploads are held back an hour each, so that the kill
# finds every block staged and none on its way to the store, however slow
# the machine (held back 5 s, a slow run killed the client in the middle
# of a PUT).
D=$TMP/d
random_file "$TMP/big48" $((48 << 20))
GRANARY=$GRANARY_HOOKS GRANARY_TEST_STAGE_DELAY_MS=3600000 mount_vol "$META" "$D" --writeback
dd if="$TMP/big48" of="$D/big48" bs=1M conv=fsync status=none || fail "dd to $D/big48"
[ "$(stat_of "$D" blocks staged)" -ge 1 ] || fail "no block staged after fsync"
# (this session's row: at least one 4 MiB block's worth)
d_staged() {
	"$GRANARY" status "$META" --json | tr -d ' \n' |
		grep -qE "\"mountpoint\":\"$D\"[^}]*\"staged_bytes\":[0-9]{7,}"
}
wait_until 10 d_staged || fail "granary status does not show the staged blocks: $("$GRANARY" status "$META")"
kill_client "$D"
nblk=$(find "$TMP/cache-d" -path '*staging-*' -name '*.blk' | wc -l)
# (48 MiB: 12 blocks of 4 MiB, all still staged)
check_eq "$nblk" 12 "staged block files left by the killed client"
# another client cannot read what is only on the dead node: it waits for
# the upload (15 s), then gets EIO; once, though the kernel asks again
# for the page whose readahead failed
waits() { grep -c "is not in '.*' yet: waiting" "$TMP/log-b.log" || true; }
w0=$(waits) t0=$(date +%s)
expect_errno "Input/output error" cat "$B/big48"
secs=$(($(date +%s) - t0))
check_eq "$(($(waits) - w0))" 1 "waits for the missing upload in the reader's log"
ok "SIGKILL right after fsync: $nblk blocks staged on the node (granary status shows them); another client gets EIO meanwhile, after one wait (${secs} s)"
mount_vol "$META" "$D" --writeback
[ "$(stat_of "$D" blocks recovered)" -ge 1 ] || fail "the new mount took over no staged block"
gsync "$D" || fail "granary.sync after recovery"
check_eq "$(stat_of "$D" blocks staged)" 0 "blocks still staged after granary.sync"
check_eq "$(find "$TMP/cache-d" -path '*staging-*' -name '*.blk' | wc -l)" 0 \
	"staged block files left after recovery"
want=$(sha256sum <"$TMP/big48")
check_eq "$(sha256sum <"$B/big48")" "$want" "sha256 of the recovered file on another client"
umount_vol "$D"
E=$TMP/e
mount_vol "$META" "$E"
check_eq "$(sha256sum <"$E/big48")" "$want" "sha256 of the recovered file on a fresh client"
umount_vol "$E"
ok "the next mount uploads the staged blocks: every fsync'd byte there (sha256)"

# --- the bound: at most --stage-size of blocks staged while a big file is
# written; another client reads it once the uploads are done
GRANARY=$GRANARY_HOOKS GRANARY_TEST_STAGE_DELAY_MS=300 mount_vol "$META" "$D" --writeback --stage-size 9M
random_file "$TMP/big32" $((32 << 20))
dd if="$TMP/big32" of="$D/big32" bs=1M conv=fsync status=none &
dd_pid=$!
bg_track $dd_pid
max=0
while kill -0 $dd_pid 2>/dev/null; do
	b=$(stat_of "$D" blocks staged_bytes)
	[ "${b:-0}" -gt "$max" ] && max=$b
	sleep 0.05
done
wait $dd_pid || fail "dd to $D/big32"
[ "$max" -gt 0 ] || fail "no block seen staged while writing 32 MiB"
[ "$max" -le $((9 << 20)) ] || fail "$max bytes staged, bound 9 MiB"
gsync "$D" || fail "granary.sync"
[ "$(stat_of "$D" blocks put)" -ge 8 ] || fail "fewer than 8 blocks put for 32 MiB"
check_eq "$(sha256sum <"$B/big32")" "$(sha256sum <"$TMP/big32")" \
	"sha256 of a big file on another client after the uploads"
ok "staged blocks stay under --stage-size (max seen $max bytes); another client reads the file"

# umount waits for the staged blocks
random_file "$TMP/big20" $((20 << 20))
cp "$TMP/big20" "$D/big20"
umount_vol "$D"
check_eq "$(find "$TMP/cache-d" -path '*staging-*' -name '*.blk' | wc -l)" 0 \
	"staged block files left after umount"
check_eq "$(sha256sum <"$B/big20")" "$(sha256sum <"$TMP/big20")" \
	"sha256 of a big file written just before umount"
ok "umount uploads the staged blocks"
umount_vol "$B"
