#!/bin/bash
# t0175-trash.sh - the trash as a user meets it: an rm -rf'ed tree is listed
# by `granary trash list` and comes back byte-exact with `trash restore`; a
# file replaced by rename keeps its old content there; a taken path is
# refused; only root sees or enters /.trash; removal inside it is final;
# the clients purge it once it is older than trash-days (a test clock) and
# the space comes back; with trash-days 0 rm frees at once.
. "$(dirname "$0")/lib.sh"

chmod 0755 "$TMP" # nobody must reach the mount point
new_volume trash --trash-days 1
M=$TMP/mnt
mount_vol "$META" "$M" --allow-other
chmod 0755 "$M"

status_of() { # status_of FIELD: a number of `granary status --json`
	"$GRANARY" status "$META" --json | tr -d ' \n' |
		sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p"
}
# settle: wait until the reclaimers deleted what they had to, so that a
# count of objects taken now stays put
reclaim_idle() { [ "$(rcli zcard delfiles)" = 0 ] && [ "$(rcli llen delslices)" = 0 ]; }
settle() {
	local a b
	wait_until 30 reclaim_idle || fail "reclamation did not finish in 30 s"
	a=$(count_objects)
	sleep 1
	b=$(count_objects)
	while [ "$a" != "$b" ]; do
		a=$b
		sleep 1
		b=$(count_objects)
	done
}
trash_empty() { [ "$(status_of trash_entries)" = 0 ]; }
objects_below() { [ "$(count_objects)" -lt "$1" ]; }
# entry_of PATH: the ENTRY of the trash entry whose path is $1
entry_of() {
	"$GRANARY" trash list "$META" --json | tr -d '\n' |
		sed 's/},/}\n/g' | grep -F "\"path\": \"$1\"" |
		sed -n 's/.*"entry": "\([^"]*\)".*/\1/p' | tail -n 1
}

# --- rm -rf of a tree, listed, restored whole, read back byte-exact
S=$TMP/src/tree
mkdir -p "$S/sub/deeper" "$S/empty"
random_file "$S/small" 1000
random_file "$S/sub/mid" 300000
random_file "$S/sub/deeper/big" $((5 * 1024 * 1024 + 77))
: >"$S/sub/zero"
ln -s ../small "$S/sub/link"
cp -a "$S" "$M/tree"
used0=$(status_of used_bytes)
rm -rf "$M/tree"
[ ! -e "$M/tree" ] || fail "the tree is still there after rm -rf"
"$GRANARY" trash list "$META" >"$TMP/list" || fail "trash list failed"
for p in /tree /tree/small /tree/sub/mid /tree/sub/deeper/big /tree/sub/link /tree/empty; do
	grep -qE " $p\$" "$TMP/list" ||
		fail "trash list does not show $p: $(cat "$TMP/list")"
done
check_eq "$(status_of trash_entries)" 9 "entries in the trash (5 files, 4 dirs)"
check_eq "$(status_of trash_bytes)" $((1000 + 300000 + 5 * 1024 * 1024 + 77)) \
	"bytes in the trash"
check_eq "$(status_of used_bytes)" "$used0" "used space while the tree is in the trash"
ok "rm -rf: the tree is listed in the trash, its bytes count as used"

top=$(entry_of /tree)
[ -n "$top" ] || fail "no entry for /tree in: $(cat "$TMP/list")"
"$GRANARY" trash restore "$META" "$top" >"$TMP/restore.out" ||
	fail "trash restore $top failed: $(cat "$TMP/restore.out")"
grep -q "with 8 entries below it" "$TMP/restore.out" ||
	fail "restore did not bring the whole tree back: $(cat "$TMP/restore.out")"
diff -r "$S" "$M/tree" || fail "the restored tree differs"
cmp "$S/sub/deeper/big" "$M/tree/sub/deeper/big" || fail "big file differs"
check_eq "$(readlink "$M/tree/sub/link")" ../small "restored symlink"
check_eq "$(status_of trash_entries)" 0 "entries in the trash after the restore"
ok "trash restore brings the tree back byte-exact, and the trash is empty"

# --- rename over a file keeps the old content in the trash
random_file "$TMP/v1" 200000
cp "$TMP/v1" "$M/f"
echo new >"$M/f.new"
mv "$M/f.new" "$M/f"
e=$(entry_of /f)
[ -n "$e" ] || fail "the replaced f is not in the trash"
"$GRANARY" trash restore "$META" "$e" --to /f.old >/dev/null ||
	fail "trash restore --to failed"
cmp "$TMP/v1" "$M/f.old" || fail "the old content of f differs"
check_eq "$(cat "$M/f")" new "f after the rename"
ok "rename over a file: the old content comes back from the trash"

# --- a file removed while open: read through the descriptor, link count 0
random_file "$TMP/held" 100000
cp "$TMP/held" "$M/held"
exec 3<"$M/held"
rm "$M/held"
check_eq "$(stat -L -c %h /proc/$$/fd/3)" 0 "link count through the open descriptor"
cmp "$TMP/held" /dev/fd/3 || fail "read through the descriptor differs"
exec 3<&-
[ -n "$(entry_of /held)" ] || fail "the file removed while open is not in the trash"
ok "a file removed while open: readable, link count 0, in the trash"

# --- a taken path is refused
rm "$M/f"
echo other >"$M/f"
e=$(entry_of /f)
expect_exit 1 "cannot restore .*'/f' exists" "$GRANARY" trash restore "$META" "$e"
check_eq "$(cat "$M/f")" other "f after a refused restore"
expect_exit 1 "no entry 'nope' in the trash" "$GRANARY" trash restore "$META" nope
expect_exit 2 "needs META_URL and ENTRY" "$GRANARY" trash restore "$META"
ok "restore refuses a path that is taken and an unknown entry"

# --- only root sees and enters the trash
ls -a "$M" | grep -qx .trash || fail "root does not see .trash"
check_eq "$(stat -c %a:%u "$M/.trash")" 700:0 "mode and owner of .trash"
as_nobody ls -a "$M" >"$TMP/ls.nobody" || fail "nobody cannot list the root"
! grep -qx .trash "$TMP/ls.nobody" || fail "nobody sees .trash"
grep -qx f "$TMP/ls.nobody" || fail "nobody does not see f"
ls "$M/.trash" >/dev/null # root's lookup in the kernel's cache
expect_errno "No such file" as_nobody stat "$M/.trash"
expect_errno "No such file" as_nobody ls "$M/.trash"
expect_errno "File exists" mkdir "$M/.trash"
expect_errno "Operation not permitted" rmdir "$M/.trash"
expect_errno "Operation not permitted" touch "$M/.trash/x"
ok "nobody neither sees nor enters .trash; root cannot remove it or write in it"

# --- removal inside the trash is final
hour=$(ls "$M/.trash" | head -n 1)
n=$(ls "$M/.trash/$hour" | wc -l)
victim=$(ls "$M/.trash/$hour" | grep -- '-f$' | head -n 1)
[ -n "$victim" ] || fail "no entry for f in $M/.trash/$hour"
rm "$M/.trash/$hour/$victim"
check_eq "$(ls "$M/.trash/$hour" | wc -l)" $((n - 1)) "entries after an rm inside"
[ -z "$(entry_of /f)" ] || fail "f is still listed after its rm inside the trash"
ok "rm inside the trash deletes for good"

# --- fsck finds the trash a directory like any other; gc finds no leak
"$GRANARY" fsck "$META" --objects -q >"$TMP/fsck.out" 2>&1 ||
	fail "fsck of a volume with a trash: $(head -c 2000 "$TMP/fsck.out")"
"$GRANARY" gc "$META" --json --min-age 0 >"$TMP/gc.out" 2>&1 ||
	fail "gc failed: $(head -c 2000 "$TMP/gc.out")"
check_eq "$(jq .leaked "$TMP/gc.out")" 0 "objects gc finds leaked beside the trash"
ok "fsck is clean and gc finds nothing leaked with files in the trash"

# --- the clients' purge, once older than trash-days (a clock a day ahead)
random_file "$TMP/big2" $((3 * 1024 * 1024))
cp "$TMP/big2" "$M/big2"
sync
settle # the entry removed inside the trash above
objs=$(count_objects)
rm "$M/big2"
sleep 1
check_eq "$(count_objects)" "$objs" "objects of a file in the trash"
[ "$(status_of trash_entries)" -gt 0 ] || fail "nothing in the trash"
umount_vol "$M"
GRANARY=$GRANARY_HOOKS GRANARY_TEST_TRASH_SKEW=$((86400 + 3600)) \
	GRANARY_TEST_TRASH_PERIOD=1 mount_vol "$META" "$M" --allow-other
wait_until 30 trash_empty ||
	fail "the trash was not purged: $(status_of trash_entries) entries left"
check_eq "$(status_of trash_bytes)" 0 "bytes in the trash after the purge"
wait_until 30 objects_below "$objs" ||
	fail "objects of the purged file not reclaimed: $(count_objects) of $objs"
[ -z "$(ls "$M/.trash")" ] || fail "hour directories left: $(ls "$M/.trash")"
"$GRANARY" fsck "$META" -q >"$TMP/fsck.out" 2>&1 ||
	fail "fsck after the purge: $(head -c 2000 "$TMP/fsck.out")"
ok "purged once a day old (test clock): trash empty, objects reclaimed"

# --- trash-days 0: rm frees at once; granary config shows and changes it
"$GRANARY" config "$META" | grep -q "trash-days: *1" || fail "config does not show trash-days 1"
"$GRANARY" config "$META" --trash-days 0 >/dev/null || fail "config --trash-days 0 failed"
check_eq "$("$GRANARY" config "$META" --json | sed -n 's/.*"trash_days": \([0-9]*\).*/\1/p')" 0 \
	"trash_days after config"
expect_exit 2 "bad --trash-days" "$GRANARY" config "$META" --trash-days -1
random_file "$TMP/big3" $((2 * 1024 * 1024))
settle # the purge's
objs=$(count_objects)
cp "$TMP/big3" "$M/big3"
sync
rm "$M/big3"
check_eq "$(status_of trash_entries)" 0 "entries in the trash with trash-days 0"
wait_until 30 objects_equal "$objs" ||
	fail "objects not reclaimed with the trash off: $(count_objects), expected $objs"
ok "trash-days 0: rm frees at once"
umount_vol "$M"
