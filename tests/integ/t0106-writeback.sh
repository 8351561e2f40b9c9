#!/bin/bash
# t0106-writeback.sh - --writeback: small files are durable on the node's
# disk when close/fsync return and reach the store in the background; a
# client killed with SIGKILL uploads its staged packs at the next mount
# with nothing lost; umount and "granary.sync" wait for the uploads; files
# deleted before their pack is uploaded cost no upload at all.
. "$(dirname "$0")/lib.sh"

gsync() { setfattr -n granary.sync -v 1 "$1"; }

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
"$GRANARY" status "$META" | grep -qE "[0-9]+ packs, " ||
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
pids=$(mount_pids "$A")
[ -n "$pids" ] || fail "no daemon found for $A"
kill -9 $pids
fusermount3 -uz "$A" 2>/dev/null
MOUNTS=${MOUNTS/ $A/}
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
dead_gone() { [ "$(rcli HLEN packdead)" = 0 ] || return 1; }
sleep 3 # the reclaimer runs every 2 s
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
umount_vol "$C"
umount "$TMP/tiny"
ok "full staging disk: ENOSPC at close, earlier files intact and uploaded"
umount_vol "$B"
