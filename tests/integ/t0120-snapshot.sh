#!/bin/bash
# t0120-snapshot.sh - granary snapshot: a copy-on-write copy of a file or a
# tree, isolated both ways (write, truncate, delete on each side), seen by
# another client, refused with clear errors for bad paths; a client killed
# in the middle of a snapshot leaves the copy whole or absent; the shared
# data is deleted only when both sides are gone.
. "$(dirname "$0")/lib.sh"

new_volume snap
A=$TMP/a B=$TMP/b
mount_vol "$META" "$A" --attr-timeout 0.2 --entry-timeout 0.2
mount_vol "$META" "$B" --attr-timeout 0.2 --entry-timeout 0.2
objects0=$(count_objects)

# a tree with small (packed) and big (blocks) files, a symlink, an xattr,
# an empty directory and a hard link pair
mkdir -p "$A/tree/d1/d2" "$A/tree/empty"
for i in 1 2 3 4 5; do random_file "$A/tree/d1/s$i" $((1000 + i * 4000)); done
random_file "$A/tree/d1/d2/big" 9000000
echo hello >"$A/tree/top"
ln -s d1/s1 "$A/tree/link"
ln "$A/tree/top" "$A/tree/d1/top-hard"
setfattr -n user.k -v v1 "$A/tree/top"
cp -a "$A/tree" "$TMP/orig"

out=$("$GRANARY" snapshot "$A/tree" "$A/snap") || fail "snapshot failed: $out"
case $out in "snapshot: "*" ms") ;; *) fail "snapshot output: $out" ;; esac
diff -r "$TMP/orig" "$A/snap" || fail "the snapshot differs from its source"
check_eq "$(readlink "$A/snap/link")" d1/s1 "symlink target in the snapshot"
check_eq "$(getfattr --only-values -n user.k "$A/snap/top")" v1 "xattr in the snapshot"
check_eq "$(stat -c %i "$A/snap/top")" "$(stat -c %i "$A/snap/d1/top-hard")" \
	"the hard link pair is one inode in the snapshot"
[ "$(stat -c %i "$A/snap/top")" != "$(stat -c %i "$A/tree/top")" ] ||
	fail "the snapshot shares an inode with its source"
check_eq "$(stat -c %h "$A/snap/top")" 2 "links of the hard-linked file in the snapshot"
check_eq "$(stat -c %h "$A/snap")" "$(stat -c %h "$A/tree")" "links of the snapshot's top directory"
[ -d "$A/snap/empty" ] || fail "the empty directory is missing from the snapshot"
sleep 0.5
diff -r "$TMP/orig" "$B/snap" || fail "another client reads the snapshot differently"
ok "snapshot of a tree: same bytes, symlink, xattr, hard links; seen by another client"

# isolation: changes to the snapshot never show in the source
cp -a "$A/snap" "$TMP/snapcopy"
printf 'CHANGED' | dd of="$A/snap/d1/d2/big" bs=1 seek=5000000 conv=notrunc status=none
printf 'CHANGED' | dd of="$TMP/snapcopy/d1/d2/big" bs=1 seek=5000000 conv=notrunc status=none
truncate -s 10 "$A/snap/d1/s2" "$TMP/snapcopy/d1/s2"
rm "$A/snap/d1/s3" "$TMP/snapcopy/d1/s3"
echo more >>"$A/snap/top"
echo more >>"$TMP/snapcopy/top"
mkdir "$A/snap/new" "$TMP/snapcopy/new"
diff -r "$TMP/orig" "$A/tree" || fail "changes to the snapshot show in the source"
diff -r "$TMP/snapcopy" "$A/snap" || fail "the snapshot does not read its own changes"
# and changes to the source never show in the snapshot
printf 'SOURCE' | dd of="$A/tree/d1/s1" bs=1 seek=10 conv=notrunc status=none
truncate -s 0 "$A/tree/d1/d2/big"
rm -r "$A/tree/d1/s4" "$A/tree/empty"
diff -r "$TMP/snapcopy" "$A/snap" || fail "changes to the source show in the snapshot"
umount_vol "$A"
mount_vol "$META" "$A" --cache-size 0
diff -r "$TMP/snapcopy" "$A/snap" || fail "the snapshot after a remount differs"
ok "writes, truncates and deletes on either side never show in the other"

# a single big file
random_file "$TMP/ck" 20000000
cp "$TMP/ck" "$A/ck"
out=$("$GRANARY" snapshot "$A/ck" "$A/ck.snap") || fail "file snapshot: $out"
cmp "$TMP/ck" "$A/ck.snap" || fail "the file snapshot differs"
cp "$TMP/ck" "$TMP/ck.snap"
printf 'XYZ' | dd of="$A/ck.snap" bs=1 seek=123 conv=notrunc status=none
printf 'XYZ' | dd of="$TMP/ck.snap" bs=1 seek=123 conv=notrunc status=none
cmp "$TMP/ck" "$A/ck" || fail "a write to the file snapshot shows in the source"
cmp "$TMP/ck.snap" "$A/ck.snap" || fail "the file snapshot does not read its own write"
ok "snapshot of a 20 MB file ($out)"

# cp inside the volume: copy_file_range of a whole file shares the data
p0=$(stat_of "$A" store puts)
cp "$A/ck" "$A/ck.cp" || fail "cp inside the volume"
check_eq "$(stat_of "$A" store puts)" "$p0" "PUTs for cp of a 20 MB file inside the volume"
cmp "$TMP/ck" "$A/ck.cp" || fail "the cp'd file differs"
printf 'Q' | dd of="$A/ck.cp" bs=1 seek=7 conv=notrunc status=none
cmp "$TMP/ck" "$A/ck" || fail "a write to the cp'd file shows in the source"
if command -v python3 >/dev/null; then
	python3 -c "
import os, sys
s = os.open(sys.argv[1], os.O_RDONLY)
d = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT, 0o644)
assert os.copy_file_range(s, d, 1000, 5, 0) == 1000
" "$A/ck" "$A/part" || fail "a partial copy_file_range failed"
	cmp -n 1000 <(tail -c +6 "$TMP/ck") "$A/part" || fail "a partial copy_file_range copied wrong bytes"
	rm "$A/part"
fi
rm "$A/ck.cp"
ok "cp inside the volume shares the data (0 PUTs); partial copies are real copies"

# bad input
expect_exit 1 "already exists" "$GRANARY" snapshot "$A/ck" "$A/ck.snap"
expect_exit 1 "cannot read" "$GRANARY" snapshot "$A/no-such" "$A/x"
expect_exit 1 "into itself" "$GRANARY" snapshot "$A/tree" "$A/tree/d1/inside"
expect_exit 1 "not on a granary mount" "$GRANARY" snapshot /etc/hostname "$A/h"
expect_exit 1 "not on the same granary mount" "$GRANARY" snapshot "$A/ck" "$TMP/ck2"
expect_exit 2 "usage" "$GRANARY" snapshot "$A/ck"
expect_exit 2 "usage" "$GRANARY" snapshot --no-such-flag "$A/ck" "$A/y"
[ ! -e "$A/x" ] && [ ! -e "$A/tree/d1/inside" ] || fail "a failed snapshot left something behind"
ok "bad paths: clear errors, nothing left behind"

# the shared data goes only when both sides are gone
rm -rf "$A/tree" "$A/ck" "$A/many"
sleep 3
cmp "$TMP/ck.snap" "$A/ck.snap" || fail "the file snapshot after deleting its source differs"
diff -r "$TMP/snapcopy" "$A/snap" || fail "the snapshot after deleting its source differs"
rm -rf "$A/snap" "$A/ck.snap" "$A/many.snap"
wait_until 30 objects_equal "$objects0" ||
	fail "objects not reclaimed after deleting both sides: $(count_objects), expected $objects0"
ok "data shared by a snapshot is deleted only when both sides are gone"

# a client killed in the middle of a snapshot (after 3 of its steps, by
# the fault injection knob): nothing is visible, the half-made copy is
# recorded for cleanup (deleted once the dead client's session expires:
# test_meta covers that part)
mkdir "$A/many"
for d in $(seq 1 20); do
	mkdir "$A/many/d$d"
	for f in $(seq 1 60); do echo "$d-$f" >"$A/many/d$d/f$f"; done
done
umount_vol "$A"
GRANARY=$GRANARY_HOOKS GRANARY_TEST_SNAPSHOT_KILL_AFTER=3 mount_vol "$META" "$A"
"$GRANARY" snapshot "$A/many" "$A/many.snap" >/dev/null 2>&1 &&
	fail "the snapshot succeeded although its client was killed"
fusermount3 -uz "$A" 2>/dev/null
MOUNTS=${MOUNTS/ $A/}
mount_vol "$META" "$A"
[ ! -e "$A/many.snap" ] || fail "a snapshot cut by SIGKILL is visible"
check_eq "$(ls "$A" | tr '\n' ' ')" "many " "listing after a snapshot cut by SIGKILL"
check_eq "$(rcli HLEN snapshots)" 1 "half-made snapshots recorded for cleanup"
diff -r "$B/many" "$A/many" >/dev/null || fail "the source of the cut snapshot changed"
ok "SIGKILL in the middle of a snapshot: nothing visible, the half-made copy recorded"

umount_vol "$A"
umount_vol "$B"
