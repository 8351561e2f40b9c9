#!/bin/bash
# t0130-version.sh - granary version: create, list, show, diff, restore and
# rm of a dataset directory's versions; DIR/.versions/TAG reached by path,
# never listed in DIR, read-only, the same for another client and for a
# --subdir mount of one version; bad input refused with clear messages;
# the shared data deleted once the versions and the directory are gone.
. "$(dirname "$0")/lib.sh"

new_volume ver
A=$TMP/a B=$TMP/b
mount_vol "$META" "$A" --attr-timeout 0.2 --entry-timeout 0.2
mount_vol "$META" "$B" --attr-timeout 0.2 --entry-timeout 0.2
objects0=$(count_objects)
V() { "$GRANARY" version "$@"; }

# an ImageFolder-like dataset: class directories of small files, one big
mkdir -p "$A/ds/cat" "$A/ds/dog"
for i in 1 2 3 4; do
	random_file "$A/ds/cat/c$i.jpg" $((2000 + i * 1000))
	random_file "$A/ds/dog/d$i.jpg" $((3000 + i * 500))
done
random_file "$A/ds/labels.bin" 6000000
ln -s cat/c1.jpg "$A/ds/first"
cp -a "$A/ds" "$TMP/v1"

out=$(V create "$A/ds" v1 -m "first cut") || fail "version create: $out"
case $out in "version 'v1' of '$A/ds': 9 files, "*" ms"*) ;;
*) fail "version create output: $out" ;; esac
diff -r "$TMP/v1" "$A/ds/.versions/v1" || fail "version v1 differs from its directory"
check_eq "$(ls -a "$A/ds" | tr '\n' ' ')" ". .. cat dog first labels.bin " "listing of a directory with versions"
check_eq "$(find "$A/ds" -maxdepth 1 -name '.versions' | wc -l)" 0 "find sees .versions"
check_eq "$(ls "$A/ds/.versions")" v1 "listing of .versions"
sleep 0.5
diff -r "$TMP/v1" "$B/ds/.versions/v1" || fail "another client reads v1 differently"
ok "create: DIR/.versions/v1 holds the same bytes, never listed in DIR, seen by another client"

# read-only: every kind of change inside a version is refused
W=$A/ds/.versions/v1
expect_errno "Read-only file system" sh -c "echo x >'$W/cat/c1.jpg'"
expect_errno "Read-only file system" sh -c "echo x >'$W/cat/new.jpg'"
expect_errno "Read-only file system" rm "$W/cat/c2.jpg"
expect_errno "Read-only file system" mkdir "$W/new"
expect_errno "Read-only file system" mv "$W/cat/c3.jpg" "$W/cat/c9.jpg"
expect_errno "Read-only file system" mv "$W/cat/c3.jpg" "$A/ds/stolen.jpg"
expect_errno "Read-only file system" chmod 600 "$W/labels.bin"
expect_errno "Read-only file system" truncate -s 0 "$W/labels.bin"
expect_errno "Read-only file system" setfattr -n user.x -v 1 "$W/labels.bin"
expect_errno "Read-only file system" ln "$W/labels.bin" "$A/ds/hard"
expect_errno "Read-only file system" rmdir "$A/ds/.versions/v1"
expect_errno "Invalid argument" mkdir "$A/.versions"
expect_exit 1 "read-only" V create "$W" nested
diff -r "$TMP/v1" "$W" || fail "a refused change altered v1"
ok "a version refuses writes, creates, deletes, renames, chmod, truncate, xattrs, links"

# change the directory: one file added, one removed, one modified, one
# class added; the version does not move
random_file "$A/ds/cat/c5.jpg" 4000
rm "$A/ds/dog/d2.jpg"
echo more >>"$A/ds/cat/c1.jpg"
mkdir "$A/ds/bird" && random_file "$A/ds/bird/b1.jpg" 5000
diff -r "$TMP/v1" "$W" || fail "changes to the directory show in v1"
V diff "$A/ds" v1 >"$TMP/diff.out" 2>"$TMP/diff.err" || fail "diff: $(cat "$TMP/diff.err")"
printf 'A\tbird/b1.jpg\nM\tcat/c1.jpg\nA\tcat/c5.jpg\nD\tdog/d2.jpg\n' >"$TMP/diff.want"
diff "$TMP/diff.want" "$TMP/diff.out" || fail "diff v1 against the directory"
check_eq "$(cat "$TMP/diff.err")" "2 added, 1 removed, 1 modified" "diff summary"
cp -a "$A/ds" "$TMP/v2"
V create "$A/ds" v2 >/dev/null || fail "create v2"
V diff "$A/ds" v1 v2 >"$TMP/diff2.out" 2>/dev/null || fail "diff v1 v2"
diff "$TMP/diff.want" "$TMP/diff2.out" || fail "diff v1 v2"
V diff "$A/ds" v2 >"$TMP/diff3.out" 2>"$TMP/diff3.err" || fail "diff v2"
check_eq "$(cat "$TMP/diff3.out")$(cat "$TMP/diff3.err")" "0 added, 0 removed, 0 modified" "diff of an unchanged directory"
ok "diff lists added, removed and modified files, against the directory or another version"

# list and show, text and JSON
V list "$A/ds" >"$TMP/list.out" || fail "list"
check_eq "$(awk 'NR > 1 { print $1, $4 }' "$TMP/list.out" | tr '\n' ' ')" "v1 9 v2 10 " "list: tags and file counts, oldest first"
grep -q "first cut" "$TMP/list.out" || fail "list: no message: $(cat "$TMP/list.out")"
V list "$A/ds" --json | python3 -c '
import json, sys
v = json.load(sys.stdin)
assert [x["tag"] for x in v] == ["v1", "v2"], v
assert v[0]["files"] == 9 and v[0]["dirs"] == 3 and v[0]["others"] == 1 and v[0]["message"] == "first cut", v[0]
assert v[0]["bytes"] == 6000000 + sum(2000 + i * 1000 + 3000 + i * 500 for i in range(1, 5)), v[0]
' || fail "list --json"
V show "$A/ds" v1 >"$TMP/show.out" || fail "show"
grep -q "^message  first cut$" "$TMP/show.out" || fail "show: $(cat "$TMP/show.out")"
grep -q "^path     $A/ds/.versions/v1$" "$TMP/show.out" || fail "show: $(cat "$TMP/show.out")"
ok "list and show: tags, times, counts, sizes and messages, text and JSON"

# restore: the directory (same inode) is v1 again; what it held is kept
ino=$(stat -c %i "$A/ds")
out=$(V restore "$A/ds" v1 --save-as pre) || fail "restore: $out"
check_eq "$out" "'$A/ds' is version 'v1' again; what it held is version 'pre'" "restore output"
diff -r "$TMP/v1" "$A/ds" || fail "the directory after restoring v1"
check_eq "$(stat -c %i "$A/ds")" "$ino" "inode of the restored directory"
diff -r "$TMP/v2" "$A/ds/.versions/pre" || fail "the version kept by restore"
sleep 0.5
diff -r "$TMP/v1" "$B/ds" || fail "another client reads the restored directory differently"
echo again >>"$A/ds/cat/c2.jpg"
diff -r "$TMP/v1" "$A/ds/.versions/v1" || fail "a write after restore shows in v1"
out=$(V restore "$A/ds" v2) || fail "restore with the default save tag: $out"
diff -r "$TMP/v2" "$A/ds" || fail "the directory after restoring v2"
check_eq "$(V list "$A/ds" | awk 'NR > 1 { print $1 }' | grep -c '^before-restore-')" 1 "default save tag"
ok "restore: same inode, v1's content, what it held kept as a version"

# list: the columns line up whatever the tags' lengths (before-restore-*,
# a long tag, one with a non-ASCII letter)
long=imagenet-2024-06-train-cleaned-relabeled-dedup-ünicode-v17
V create "$A/ds" "$long" >/dev/null || fail "create $long"
V list "$A/ds" >"$TMP/list.out" || fail "list"
python3 - "$TMP/list.out" <<'EOF' || fail "list: columns do not line up: $(cat "$TMP/list.out")"
import re, sys
lines = open(sys.argv[1], encoding="utf-8").read().splitlines()
head, rows = lines[0], lines[1:]
assert len(rows) == 5, lines
created = head.index("CREATED")
files_end = head.index("FILES") + len("FILES")
size_end = head.index("SIZE") + len("SIZE")
for r in rows:
    assert r[created - 1] == " " and re.match(r"\d{4}-\d\d-\d\d \d\d:", r[created:]), r
    assert r[files_end - 1].isdigit() and r[files_end] == " ", r
    assert r[size_end - 1] != " " and r[size_end:size_end + 2] == "  ", r
EOF
V rm "$A/ds" "$long" >/dev/null || fail "rm $long"
ok "list: columns line up with long tags"

# a read-only mount of one version, and a read-write one (read-only all
# the same)
C=$TMP/c D=$TMP/d
mount_vol "$META" "$C" --read-only --subdir ds/.versions/v1
diff -r "$TMP/v1" "$C" || fail "the --subdir mount of v1 differs"
mount_vol "$META" "$D" --subdir ds/.versions/v1
diff -r "$TMP/v1" "$D" || fail "the read-write --subdir mount of v1 differs"
expect_errno "Read-only file system" sh -c "echo x >'$D/cat/c1.jpg'"
expect_errno "Read-only file system" touch "$D/new"
umount_vol "$C"
umount_vol "$D"
ok "a --subdir mount of one version serves it, read-only"

# bad input
expect_exit 1 "already has a version 'v1'" V create "$A/ds" v1
expect_exit 1 "not a valid tag" V create "$A/ds" .hidden
expect_exit 1 "not a valid tag" V create "$A/ds" "$(printf 'a\tb')"
expect_exit 1 "has no version 'nope'" V show "$A/ds" nope
expect_exit 1 "has no version 'nope'" V rm "$A/ds" nope
expect_exit 1 "has no version 'nope'" V diff "$A/ds" v1 nope
expect_exit 1 "has no version 'nope'" V restore "$A/ds" nope
expect_exit 1 "already has a version 'pre'" V restore "$A/ds" v1 --save-as pre
expect_exit 1 "not on a granary mount" V list "$TMP"
expect_exit 1 "not a directory" V list "$A/ds/labels.bin"
expect_exit 1 "cannot read" V list "$A/missing"
expect_exit 2 "unknown version command 'frob'" V frob "$A/ds"
expect_exit 2 "needs DIR and TAG" V create "$A/ds"
expect_exit 2 "does not apply" V list "$A/ds" -m x
expect_exit 2 "unknown option '--frob'" V list "$A/ds" --frob
check_eq "$(V list "$A/ds" | awk 'NR > 1 { print $1 }' | grep -c .)" 4 "versions after bad input (v1 v2 pre before-restore-*)"
ok "bad tags, missing versions, wrong paths and usage errors: clear messages, exit 1 or 2"

# rm: gone at once; once the versions and the directory are gone, so is
# their data
for t in $(V list "$A/ds" | awk 'NR > 1 { print $1 }'); do
	V rm "$A/ds" "$t" >/dev/null || fail "rm $t"
done
[ ! -e "$A/ds/.versions/v1" ] || fail "v1 is still there after rm"
check_eq "$(V list "$A/ds" | wc -l)" 1 "list after removing every version"
diff -r "$TMP/v2" "$A/ds" || fail "rm of the versions changed the directory"
rm -rf "$A/ds"
wait_until 30 objects_equal "$objects0" ||
	fail "objects not reclaimed after deleting the directory and its versions: $(count_objects), expected $objects0"
check_eq "$(rcli HLEN snapshots)" 0 "trees left to delete"
ok "rm deletes a version; the data goes once nothing holds it"

umount_vol "$A"
umount_vol "$B"
