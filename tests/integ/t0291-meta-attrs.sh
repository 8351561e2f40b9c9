#!/bin/bash
# t0291-meta-attrs.sh - what a user sees after the namespace changes whose
# round trips t0290 counts, now that the client answers the kernel from
# the changes' replies: a directory's times, link count and mode, right
# after a create (touch), an unlink into the trash, a rename within and
# across directories, a rename of a directory, a file's chmod and touch -d
# (which end no directory's answers), shown by the mount that made the
# change as by a mount that asks Redis every time (timeouts 0); the errors
# of those calls; and xattrs, which a listing or a create says are absent
# for the attribute timeout: this mount's own setfattr shows at once, on
# a listed file as on a new one, and another mount's within the timeout.
. "$(dirname "$0")/lib.sh"

new_volume attrs --trash-days 1
A=$TMP/a B=$TMP/b C=$TMP/c
mount_vol "$META" "$A"
mount_vol "$META" "$B" --attr-timeout 0 --entry-timeout 0
mount_vol "$META" "$C"

# same DIR WHAT: directory DIR as mount A shows it at once equals what B
# reads from Redis (times to the nanosecond, links, mode, size)
same() {
	local a b
	a=$(stat -c '%y %z %h %a %s' "$A/$1") || fail "$2: stat on A"
	b=$(stat -c '%y %z %h %a %s' "$B/$1") || fail "$2: stat on B"
	check_eq "$a" "$b" "$2: $1 on A against Redis"
}

mkdir -p "$A/d/sub" "$A/e"
same d "mkdir"
sleep 0.01
touch "$A/d/f1" "$A/d/f2" "$A/d/f3"
same d "touch of new files"
touch -d '2001-02-03 04:05:06.789' "$A/d/f1"
same d "touch -d of a file"
check_eq "$(stat -c '%y' "$A/d/f1")" "2001-02-03 04:05:06.789000000 +0000" "f1's mtime on A"
check_eq "$(stat -c '%y' "$B/d/f1")" "2001-02-03 04:05:06.789000000 +0000" "f1's mtime on B"
chmod 0600 "$A/d/f2"
same d "chmod of a file"
check_eq "$(stat -c '%a' "$B/d/f2")" 600 "f2's mode on B"
ok "create, touch -d and chmod: the directory as Redis has it"

sleep 0.01
rm "$A/d/f3"
same d "rm into the trash"
[ ! -e "$A/d/f3" ] && [ ! -e "$B/d/f3" ] || fail "f3 is still there"
expect_errno "No such file or directory" rm "$A/d/f3"
expect_errno "Is a directory" rm "$A/d/sub"
ok "unlink: the directory as Redis has it, ENOENT and EISDIR"

sleep 0.01
mv "$A/d/f1" "$A/d/g1"
same d "rename within"
mv "$A/d/g1" "$A/e/g1"
same d "rename out"
same e "rename in"
check_eq "$(stat -c '%y' "$B/e/g1")" "2001-02-03 04:05:06.789000000 +0000" "g1 kept its mtime"
touch "$A/e/g2"
mv "$A/e/g2" "$A/e/g1"
same e "rename over a file"
check_eq "$(find "$A/e" -type f | wc -l)" 1 "files in e"
mv "$A/d/sub" "$A/e/sub"
same d "a directory renamed out"
same e "a directory renamed in"
same e/sub "the directory renamed"
check_eq "$(stat -c %h "$A/d")" 2 "d's links"
check_eq "$(stat -c %h "$A/e")" 3 "e's links"
expect_errno "Is a directory" python3 -c 'import os, sys; os.rename(sys.argv[1], sys.argv[2])' "$A/d/f2" "$A/e/sub"
expect_errno "No such file or directory" mv "$A/d/nope" "$A/d/x"
ok "rename: both directories as Redis has them, a directory moved, EISDIR and ENOENT"

# xattrs: A lists d (none on f2), then sets one: it shows at once
touch "$A/d/x1"
ls -l "$A/d" >/dev/null
check_eq "$(getfattr --absolute-names -d "$A/d/f2" 2>&1)" "" "f2's xattrs after a listing"
setfattr -n user.k -v v1 "$A/d/f2"
check_eq "$(getfattr --absolute-names --only-values -n user.k "$A/d/f2")" v1 "f2's user.k on A"
getfattr --absolute-names -d "$A/d/f2" | grep -q '^user.k="v1"' || fail "f2's xattrs on A do not list user.k"
# on a file this mount just made
touch "$A/d/new"
setfattr -n user.n -v v2 "$A/d/new"
check_eq "$(getfattr --absolute-names --only-values -n user.n "$A/d/new")" v2 "new's user.n on A"
setfattr -x user.n "$A/d/new"
expect_errno "No such attribute" getfattr --absolute-names -n user.n "$A/d/new"
ok "xattrs set by this mount show at once, on a listed file and a new one"

# another mount: C lists d (x1 without xattrs), A sets one on x1; C sees
# it within its attribute timeout (1 s)
ls -l "$C/d" >/dev/null
setfattr -n user.o -v v3 "$A/d/x1"
has_o() { [ "$(getfattr --absolute-names --only-values -n user.o "$C/d/x1" 2>/dev/null)" = v3 ]; }
wait_until 10 has_o || fail "C does not see x1's user.o"
# and a file C made, given an xattr by A
touch "$C/d/y1"
setfattr -n user.p -v v4 "$A/d/y1"
has_p() { [ "$(getfattr --absolute-names --only-values -n user.p "$C/d/y1" 2>/dev/null)" = v4 ]; }
wait_until 10 has_p || fail "C does not see y1's user.p"
ok "another mount's setfattr shows within the attribute timeout"
