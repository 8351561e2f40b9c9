#!/bin/bash
# t0020-remount-second-client.sh - a tree copied in on one client is found
# whole after unmount on another (contents, sizes, modes, link counts), and
# a concurrent client sees files another one created and closed.
. "$(dirname "$0")/lib.sh"

# --- a source tree: nested dirs, ~300 files of random sizes incl. empty
S=$TMP/src
max_kib=300
[ "$GRANARY_STORAGE" = s3 ] && max_kib=64 # s3rver is slow
RANDOM=20 # the same tree every run
modes=(644 600 755 640 444)
n=0
for d in 0 1 2 3 4 5; do
	for sub in "" /s1 /s1/s2 /s3; do
		mkdir -p "$S/d$d$sub"
		for i in $(seq 1 12); do
			f=$S/d$d$sub/f$i
			case $((RANDOM % 10)) in
			0) : >"$f" ;;
			1) head -c $((RANDOM % 100)) /dev/urandom >"$f" ;;
			*) head -c $((RANDOM * 32 % (max_kib * 1024))) /dev/urandom >"$f" ;;
			esac
			chmod "${modes[RANDOM % 5]}" "$f"
			n=$((n + 1))
		done
	done
done
mkdir -p "$S/empty/dir"
ln -s ../d0/f1 "$S/d1/link"
ln -s /no/such/target "$S/dangling"
ln "$S/d2/f3" "$S/d3/hardlink"
chmod 0700 "$S/d4"
[ "$n" -ge 280 ] || fail "generated only $n files"

new_volume tree
A=$TMP/a B=$TMP/b C=$TMP/c
mount_vol "$META" "$A"
cp -a "$S" "$A/tree"
diff -r --no-dereference "$S" "$A/tree" || fail "diff -r on the writing client"
umount_vol "$A"
ok "cp -a of $n files, umount"

mount_vol "$META" "$B" --attr-timeout 0.5 --entry-timeout 0.5
diff -r --no-dereference "$S" "$B/tree" || fail "diff -r on a second client after remount"
tree_attrs "$S" >"$TMP/src.attrs"
tree_attrs "$B/tree" >"$TMP/b.attrs"
diff "$TMP/src.attrs" "$TMP/b.attrs" || fail "size/mode/nlink/owner/link differ after remount"
for f in d0/f1 d2/f3 d5/s1/s2/f12; do
	check_eq "$(stat -c '%s %a %h' "$B/tree/$f")" "$(stat -c '%s %a %h' "$S/$f")" "stat of $f"
done
check_eq "$(stat -c %i "$B/tree/d2/f3")" "$(stat -c %i "$B/tree/d3/hardlink")" "inode of the hard link"
check_eq "$(readlink "$B/tree/d1/link")" ../d0/f1 "symlink target"
ok "second client sees the whole tree: diff -r and stat '%s %a %h'"
tree_mtimes "$S" >"$TMP/src.mt"
tree_mtimes "$B/tree" >"$TMP/b.mt"
mt_ok=1 # checked at the end, so that the checks below still run
diff_mtimes "$TMP/src.mt" "$TMP/b.mt" >"$TMP/mt.diff" || mt_ok=0

# --- a concurrent client sees what B creates, after close
mount_vol "$META" "$C" --attr-timeout 0.5 --entry-timeout 0.5
ls "$C/tree" >/dev/null # let C cache the directory before B changes it
random_file "$TMP/new" 123457
cp "$TMP/new" "$B/tree/new-on-b"
mkdir "$B/tree/dir-on-b"
echo inside >"$B/tree/dir-on-b/g"
sleep 1
cmp "$TMP/new" "$C/tree/new-on-b" || fail "C does not read what B wrote and closed"
check_eq "$(cat "$C/tree/dir-on-b/g")" inside "C reads a file in a dir made on B"
ls "$C/tree" | grep -qx new-on-b || fail "C's listing misses new-on-b"
echo changed >"$B/tree/d0/f1"
rm "$B/tree/d0/f2"
sleep 1
check_eq "$(cat "$C/tree/d0/f1")" changed "C reads a file B rewrote"
[ ! -e "$C/tree/d0/f2" ] || fail "C still sees a file B removed"
ok "a concurrent client sees creates, rewrites and deletes after close"

# --- status lists both sessions; read-only and subdir mounts
"$GRANARY" status "$META" >"$TMP/status" 2>&1 || fail "status failed: $(cat "$TMP/status")"
grep -qF "$B" "$TMP/status" || fail "status does not list the session on $B: $(cat "$TMP/status")"
grep -qF "$C" "$TMP/status" || fail "status does not list the session on $C: $(cat "$TMP/status")"
ok "status lists both mounted sessions"
R=$TMP/ro
mount_vol "$META" "$R" --read-only
cmp "$S/d5/s3/f7" "$R/tree/d5/s3/f7" || fail "read-only mount reads different bytes"
expect_errno "Read-only file system" touch "$R/tree/new"
expect_errno "Read-only file system" rm "$R/tree/d5/s3/f7"
expect_errno "Read-only file system" mkdir "$R/tree/newdir"
umount_vol "$R"
ok "read-only mount: reads, refuses changes with EROFS"
D=$TMP/sub
mount_vol "$META" "$D" --subdir tree/d5
diff -r --no-dereference "$S/d5" "$D" || fail "a --subdir tree/d5 mount differs from d5"
umount_vol "$D"
ok "--subdir mount shows that directory as its root"
umount_vol "$C"
umount_vol "$B"
[ $mt_ok = 1 ] ||
	fail "mtimes kept by cp -a differ after remount (source vs mount): $(cat "$TMP/mt.diff")"
ok "mtimes preserved"
