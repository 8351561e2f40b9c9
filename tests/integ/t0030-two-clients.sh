#!/bin/bash
# t0030-two-clients.sh - two mounts of one volume at once: namespace changes
# on one are seen by the other within the (short) cache timeouts, data is
# close-to-open consistent, and concurrent creates in one directory all land.
. "$(dirname "$0")/lib.sh"

new_volume two
A=$TMP/a B=$TMP/b
mount_vol "$META" "$A" --attr-timeout 0.5 --entry-timeout 0.5
mount_vol "$META" "$B" --attr-timeout 0.5 --entry-timeout 0.5
listing() { ls -A "$1" | tr '\n' ' '; }

# --- namespace changes, both ways
echo from-a >"$A/f1"
mkdir -p "$A/dir/sub"
echo deep >"$A/dir/sub/g"
ls -A "$B" >/dev/null # B may cache the root; the changes below must show
sleep 1
check_eq "$(cat "$B/f1")" from-a "B reads a file created on A"
check_eq "$(cat "$B/dir/sub/g")" deep "B reads a nested file created on A"
check_eq "$(listing "$B")" "dir f1 " "B's listing after creates on A"
mv "$A/f1" "$A/f1-renamed"
mv "$A/dir" "$A/dir-renamed"
sleep 1
check_eq "$(listing "$B")" "dir-renamed f1-renamed " "B's listing after renames on A"
[ ! -e "$B/f1" ] || fail "B still sees the old name of a renamed file"
check_eq "$(cat "$B/dir-renamed/sub/g")" deep "B reads through a renamed dir"
echo replaced >"$A/over"
echo old >"$A/target"
sleep 1
cat "$B/target" >/dev/null
mv "$A/over" "$A/target"
sleep 1
check_eq "$(cat "$B/target")" replaced "B reads a file renamed over another on A"
rm "$A/f1-renamed" "$A/target"
rm -r "$A/dir-renamed"
sleep 1
check_eq "$(listing "$B")" "" "B's listing after deletes on A"
expect_errno "No such file or directory" cat "$B/f1-renamed"
echo from-b >"$B/h"
mkdir "$B/bdir"
sleep 1
check_eq "$(cat "$A/h")" from-b "A reads a file created on B"
check_eq "$(listing "$A")" "bdir h " "A's listing after creates on B"
ok "creates, renames and deletes on one client seen by the other"

# --- close-to-open: a file written and closed on A is read whole on B
random_file "$TMP/big" $((4 * 1024 * 1024 + 13))
cp "$TMP/big" "$A/big"
cmp "$TMP/big" "$B/big" || fail "B reads a different 4 MiB + 13 file than A wrote"
# rewrite in place (same size) on A; B had the old bytes in its cache
random_file "$TMP/patch" 10000
dd if="$TMP/patch" of="$TMP/big" bs=1 seek=4194300 conv=notrunc status=none
dd if="$TMP/patch" of="$A/big" bs=1 seek=4194300 conv=notrunc status=none
sleep 1
cmp "$TMP/big" "$B/big" || fail "B reads stale bytes after an in-place rewrite on A"
random_file "$TMP/big" 777
cp "$TMP/big" "$A/big"
sleep 1
cmp "$TMP/big" "$B/big" || fail "B reads stale bytes after A truncated and rewrote"
ok "close-to-open: 4 MiB + 13 bytes, in-place rewrite, shrink"

# --- concurrent creates in one directory from both clients
mkdir "$A/shared"
sleep 1
writer() {
	local dir=$1 tag=$2 i
	for i in $(seq 1 200); do
		echo "$tag $i" >"$dir/shared/$tag-$i" || exit 1
	done
}
writer "$A" a &
pa=$!
writer "$B" b &
pb=$!
wait $pa || fail "writer on A failed"
wait $pb || fail "writer on B failed"
sleep 1
check_eq "$(ls "$A/shared" | wc -l)" 400 "entries seen on A"
check_eq "$(ls "$B/shared" | wc -l)" 400 "entries seen on B"
ls "$A/shared" | sort >"$TMP/la"
ls "$B/shared" | sort >"$TMP/lb"
diff "$TMP/la" "$TMP/lb" || fail "the two clients list different names"
check_eq "$(cat "$A/shared/b-137")" "b 137" "A reads a file B wrote concurrently"
check_eq "$(cat "$B/shared/a-200")" "a 200" "B reads a file A wrote concurrently"
check_eq "$(stat -c %h "$A/shared")" 2 "nlink of a dir with only files"
ok "2 x 200 concurrent creates in one directory, both listings show 400"
umount_vol "$A"
umount_vol "$B"
