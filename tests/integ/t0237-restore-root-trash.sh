#!/bin/bash
# storage: file
# t0237-restore-root-trash.sh - the trash is no part of the root's tree: a
# version of the root leaves it out, and `granary version restore` of the
# root leaves it where it is, working (what was in it is listed, later
# removals go there, status counts them, fsck is clean). fsck reports a
# `trash` key naming no directory (removals would be final), and --repair
# makes the root's .trash the trash again.
. "$(dirname "$0")/lib.sh"

new_volume rtrash --trash-days 1
M=$TMP/mnt
# names the kernel cached before a restore are another tree's: none here
chmod 0755 "$TMP" # nobody must reach the mount point
mount_vol "$META" "$M" --entry-timeout 0 --attr-timeout 0 --allow-other
status_of() { # status_of FIELD: a number of `granary status --json`
	"$GRANARY" status "$META" --json | tr -d ' \n' |
		sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p"
}
listed() { # listed PATH: the trash lists PATH
	"$GRANARY" trash list "$META" >"$TMP/list" || fail "trash list failed"
	grep -qE " $1\$" "$TMP/list"
}

mkdir "$M/data"
echo a >"$M/data/a"
echo old >"$M/old"
rm "$M/old"
listed /old || fail "trash list does not show /old: $(cat "$TMP/list")"
trash=$(rcli get trash)
check_eq "$(stat -c %i "$M/.trash")" "$trash" "the trash's inode"

# --- a version of the root leaves the trash out
"$GRANARY" version create "$M" v1 -q || fail "version of the root"
[ ! -e "$M/.versions/v1/.trash" ] || fail "the version of the root holds a copy of the trash"
check_eq "$(cat "$M/.versions/v1/data/a")" a "data/a in the version"
ok "a version of the root leaves the trash out"

# --- restore of the root: the trash stays, and keeps working
echo b >"$M/data/b"
"$GRANARY" version restore "$M" v1 --save-as before -q || fail "restore of the root"
[ ! -e "$M/data/b" ] || fail "data/b is still there after the restore"
check_eq "$(rcli get trash)" "$trash" "the trash key after the restore"
check_eq "$(stat -c %i "$M/.trash")" "$trash" "/.trash after the restore"
listed /old || fail "the trash lost /old in the restore: $(cat "$TMP/list")"
check_eq "$(status_of trash_entries)" 1 "trash entries after the restore"
rm "$M/data/a"
listed /data/a || fail "rm after the restore was final: $(cat "$TMP/list")"
check_eq "$(status_of trash_entries)" 2 "trash entries after an rm"
"$GRANARY" trash restore "$META" "$(grep -E ' /data/a$' "$TMP/list" | cut -d' ' -f1)" >/dev/null ||
	fail "trash restore after the restore"
check_eq "$(cat "$M/data/a")" a "data/a back from the trash"
"$GRANARY" fsck "$META" -q >"$TMP/fsck.out" 2>&1 ||
	fail "fsck after the restore: $(head -c 2000 "$TMP/fsck.out")"
ok "a restore of the root leaves the trash working"

# --- a user owning the root versions and restores it: the trash (root's,
# mode 0700) is no part of what they copy or empty
chown 65534:65534 "$M"
chown -R 65534:65534 "$M/data"
as_nobody "$GRANARY" version create "$M" byuser -q ||
	fail "the root's owner cannot make a version of it: $(cat "$TMP/expect.err" 2>/dev/null)"
echo c >"$M/data/c" && chown 65534:65534 "$M/data/c"
as_nobody "$GRANARY" version restore "$M" byuser --save-as before2 -q ||
	fail "the root's owner cannot restore it"
[ ! -e "$M/data/c" ] || fail "data/c is still there after the user's restore"
check_eq "$(stat -c %i "$M/.trash")" "$trash" "/.trash after the user's restore"
listed /old || fail "the trash lost /old in the user's restore: $(cat "$TMP/list")"
ok "the root's owner versions and restores it, the trash left alone"

# --- fsck: a trash key naming nothing is reported, and repaired
rcli set trash 999999999 >/dev/null
rc=0
"$GRANARY" fsck "$META" --json -q >"$TMP/fsck.json" 2>&1 || rc=$?
check_eq "$rc" 1 "fsck's exit with a trash key naming nothing"
check_eq "$(jq -r '.list[] | select(.kind == "trash") | .path' "$TMP/fsck.json")" /.trash \
	"fsck's trash problem"
"$GRANARY" fsck "$META" --repair -q >"$TMP/fsck.out" 2>&1 || true
grep -q "(trash) \[fixed\]" "$TMP/fsck.out" || fail "fsck --repair: $(cat "$TMP/fsck.out")"
check_eq "$(rcli get trash)" "$trash" "the trash key after the repair"
listed /old || fail "the trash lost /old in the repair: $(cat "$TMP/list")"
"$GRANARY" fsck "$META" -q >"$TMP/fsck.out" 2>&1 ||
	fail "fsck after the repair: $(head -c 2000 "$TMP/fsck.out")"
ok "fsck reports a trash key naming nothing and --repair mends it"
