#!/bin/bash
# storage: file
# t0125-snapshot-perms.sh - snapshots and versions asked for by a user
# (uid 65534) on an --allow-other mount copy only what that user may read,
# as cp -a would: a source behind a directory it cannot search, a file it
# cannot read, a tree with either inside, a source outside a --subdir
# mount and the old "<inode> NAME" form are refused, and nothing appears;
# what it may read still copies, and the copies are its own.
. "$(dirname "$0")/lib.sh"

nobody_volume sperm
echo open >"$M/pub/open" && chmod 0644 "$M/pub/open"
echo private >"$M/pub/private" && chmod 0600 "$M/pub/private"
echo team >"$M/pub/team" && chgrp 4242 "$M/pub/team" && chmod 0640 "$M/pub/team"
cp /bin/true "$M/pub/suid" && chmod 04755 "$M/pub/suid"
mkdir -p "$M/pub/tree/d" && echo a >"$M/pub/tree/a" && echo b >"$M/pub/tree/d/b"
chmod -R a+rX "$M/pub/tree"


# --- the review's reproducer: a raw inode number names any file
ino=$(stat -c %i "$M/secret/k2")
expect_errno "Operation not permitted" \
	as_nobody setfattr -n granary.snapshot -v "$ino stolen2" "$M/pub"
[ ! -e "$M/pub/stolen2" ] || fail "the inode form made a copy"
ok "a source named by inode number is refused (EPERM)"

# --- a path through a directory nobody may search, or to a file it may
# not read
expect_errno "Permission denied" \
	as_nobody setfattr -n granary.snapshot -v "$(snapval /secret/k2 stolen)" "$M/pub"
expect_errno "Permission denied" \
	as_nobody "$GRANARY" snapshot "$M/pub/private" "$M/pub/p2"
expect_errno "Permission denied" \
	as_nobody "$GRANARY" snapshot "$M/pub/team" "$M/pub/t2"
expect_errno "Invalid argument" \
	as_nobody setfattr -n granary.snapshot -v "$(snapval /pub/../secret/k2 up)" "$M/pub"
[ -z "$(ls "$M/pub" | grep -E '^(stolen|p2|t2|up)$')" ] ||
	fail "a refused snapshot left a copy: $(ls "$M/pub")"
ok "no search on the path, no read on the file, '..': refused, nothing made"

# --- a tree with something unreadable inside
chmod 0600 "$M/pub/tree/d/b"
expect_errno "Permission denied" \
	as_nobody "$GRANARY" snapshot "$M/pub/tree" "$M/pub/tree2"
chmod 0644 "$M/pub/tree/d/b"
chmod 0700 "$M/pub/tree/d"
expect_errno "Permission denied" \
	as_nobody "$GRANARY" snapshot "$M/pub/tree" "$M/pub/tree2"
chmod 0711 "$M/pub/tree/d"
expect_errno "Permission denied" \
	as_nobody "$GRANARY" snapshot "$M/pub/tree" "$M/pub/tree2"
[ ! -e "$M/pub/tree2" ] || fail "a refused tree snapshot left a copy"
ok "a tree with an unreadable file or directory inside: refused, nothing made"

# --- what nobody may read still copies, as its own
chmod 0755 "$M/pub/tree/d"
as_nobody "$GRANARY" snapshot -q "$M/pub/open" "$M/pub/open2" ||
	fail "nobody cannot snapshot a file it may read"
check_eq "$(cat "$M/pub/open2")" open "content of nobody's snapshot"
check_eq "$(stat -c %u:%g "$M/pub/open2")" 65534:65534 "owner of nobody's copy"
as_nobody "$GRANARY" snapshot -q "$M/pub/tree" "$M/pub/tree2" ||
	fail "nobody cannot snapshot a tree it may read"
diff -r "$M/pub/tree" "$M/pub/tree2" || fail "nobody's tree snapshot differs"
check_eq "$(stat -c %u "$M/pub/tree2/d/b")" 65534 "owner inside nobody's tree copy"
as_nobody "$GRANARY" snapshot -q "$M/pub/suid" "$M/pub/suid2" ||
	fail "nobody cannot snapshot a set-uid file it may read"
check_eq "$(stat -c %a:%u "$M/pub/suid2")" 755:65534 "mode of a set-uid file nobody copied"
setpriv --reuid=65534 --regid=65534 --groups=4242 -- \
	"$GRANARY" snapshot -q "$M/pub/team" "$M/pub/t3" ||
	fail "a member of the file's group cannot snapshot it"
check_eq "$(stat -c %u:%g "$M/pub/t3")" 65534:4242 "owner of a group member's copy"
"$GRANARY" snapshot -q "$M/secret/k2" "$M/secret/rootcopy" ||
	fail "root cannot snapshot"
check_eq "$(stat -c %u "$M/secret/rootcopy")" 0 "owner of root's copy"
ok "readable files and trees copy (owned by the caller, set-id bits gone); groups and root work"

# --- versions: the tree must be readable by whoever versions it
mkdir "$M/pub/ds" && chmod 0777 "$M/pub/ds"
echo x >"$M/pub/ds/x" && chmod 0600 "$M/pub/ds/x"
expect_errno "Permission denied" as_nobody "$GRANARY" version create "$M/pub/ds" v1
[ ! -e "$M/pub/ds/.versions/v1" ] || fail "a refused version exists"
chmod 0644 "$M/pub/ds/x"
as_nobody "$GRANARY" version create "$M/pub/ds" v1 >/dev/null ||
	fail "nobody cannot version a tree it may read"
check_eq "$(cat "$M/pub/ds/.versions/v1/x")" x "content of nobody's version"
chmod 0600 "$M/pub/ds/x"
expect_errno "Permission denied" as_nobody "$GRANARY" version restore "$M/pub/ds" v1
check_eq "$(cat "$M/pub/ds/x")" x "content after a refused restore"
ok "version create and restore need a readable tree"

# --- a --subdir mount: paths start at its root, nothing above is reached
S=$TMP/sub
mount_vol "$META" "$S" --allow-other --subdir pub
as_nobody "$GRANARY" snapshot -q "$S/open" "$S/open3" ||
	fail "snapshot on a --subdir mount"
check_eq "$(cat "$M/pub/open3")" open "a --subdir snapshot lands below the subdir"
expect_errno "Operation not permitted" \
	as_nobody setfattr -n granary.snapshot -v "$ino out" "$S"
expect_errno "Invalid argument" \
	setfattr -n granary.snapshot -v "$(snapval /../secret/k2 out)" "$S"
expect_errno "No such file or directory" \
	setfattr -n granary.snapshot -v "$(snapval /secret/k2 out)" "$S"
[ ! -e "$S/out" ] || fail "a snapshot reached above the --subdir root"
ok "--subdir: a source outside the mount's root cannot be named"
