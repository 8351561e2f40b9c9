#!/bin/bash
# storage: file
# t0126-control-perms.sh - every control operation (warmup fill, --check and
# --evict, sync, stats, batch, snapshot, version create/list/show/rm/restore) asked
# by a user (uid 65534) on an --allow-other mount holds to the POSIX
# operations it stands for (fs/vfs/ctl.c, docs/operations.md): EACCES and a
# clear message on what the user may not read or write, root's result on
# what it may; and nothing outside a --subdir mount is reached.
. "$(dirname "$0")/lib.sh"

nobody_volume cperm
random_file "$M/pub/open" 300000 && chmod 0644 "$M/pub/open"
random_file "$M/pub/private" 300000 && chmod 0600 "$M/pub/private"
random_file "$M/pub/wonly" 300000 && chmod 0602 "$M/pub/wonly"

# what a --json summary says, without its time
summary() { sed 's/"seconds": [0-9.]*//'; }

# --- warmup: fill, --check and --evict need read on the file
as_nobody "$GRANARY" warmup -q "$M/pub/open" >/dev/null ||
	fail "nobody cannot warm up a file it may read"
expect_exit 1 "'$M/pub/private': Permission denied \(warmup needs read" \
	as_nobody "$GRANARY" warmup -q "$M/pub/private"
check_eq "$(as_nobody "$GRANARY" warmup --check --json "$M/pub/open" | summary)" \
	"$("$GRANARY" warmup --check --json "$M/pub/open" | summary)" \
	"nobody's --check against root's"
expect_exit 1 "Permission denied \(--check needs read" \
	as_nobody "$GRANARY" warmup --check "$M/pub/private"
# evicting a file nobody may read but not write: read is enough
as_nobody "$GRANARY" warmup --evict -q "$M/pub/open" >/dev/null ||
	fail "nobody cannot evict a file it may read"
check_eq "$("$GRANARY" warmup --check --json "$M/pub/open" | summary)" \
	'{"mode": "check", "files": 1, "failed": 0, "bytes": 300000, "cached_bytes": 0, "group_bytes": null, "cache_group": false, }' \
	"root's --check after nobody's evict"
"$GRANARY" warmup -q "$M/pub/private" >/dev/null || fail "root's warmup"
expect_exit 1 "Permission denied \(--evict needs read" \
	as_nobody "$GRANARY" warmup --evict "$M/pub/private"
# the old form (a set): the kernel lets a writer through, the client wants
# read too
expect_errno "Permission denied" \
	as_nobody setfattr -n granary.evict -v 1 "$M/pub/wonly"
check_eq "$("$GRANARY" warmup --check --json "$M/pub/private" | summary)" \
	'{"mode": "check", "files": 1, "failed": 0, "bytes": 300000, "cached_bytes": 300000, "group_bytes": null, "cache_group": false, }' \
	"root's --check after nobody's refused evict"
ok "warmup, --check and --evict: read on the file (not write), EACCES otherwise"

# --- sync stands for syncfs(2): any user; stats: any user who may read
# the inode asked (no file is named in them)
as_nobody getfattr -n granary.sync "$M" >/dev/null ||
	fail "nobody cannot sync with a get"
as_nobody setfattr -n granary.sync -v 1 "$M/pub" ||
	fail "nobody cannot sync on a directory it may write"
expect_errno "Permission denied" \
	as_nobody setfattr -n granary.sync -v 1 "$M"
check_eq "$(as_nobody "$GRANARY" stats "$M" | awk '{print $1, $2}')" \
	"$("$GRANARY" stats "$M" | awk '{print $1, $2}')" \
	"the counters nobody sees against root's"
expect_exit 1 "cannot read the counters of '$M/secret': Permission denied" \
	as_nobody "$GRANARY" stats "$M/secret"
expect_errno "Operation not permitted" \
	as_nobody setfattr -n granary.stats -v 1 "$M/pub"
ok "sync: any user; stats: whoever may read the inode; read-only names stay so"

# --- granary.batch (import's mark of a batch): write on the file
as_nobody setfattr -n granary.batch -v "5 3" "$M/pub/wonly" ||
	fail "nobody cannot mark a file it may write"
expect_errno "Permission denied" \
	as_nobody setfattr -n granary.batch -v "5 3" "$M/pub/open"
ok "batch: write on the file, EACCES otherwise"

# --- snapshot: cp -a rules; the name is one new entry of the directory set
as_nobody "$GRANARY" snapshot -q "$M/pub/open" "$M/pub/open2" ||
	fail "nobody cannot snapshot a file it may read into a writable dir"
cmp "$M/pub/open" "$M/pub/open2" || fail "nobody's snapshot differs"
expect_exit 1 "cannot snapshot .*: Permission denied" \
	as_nobody "$GRANARY" snapshot "$M/pub/private" "$M/pub/p2"
grep -q "hint: a snapshot needs what cp -a needs" "$TMP/expect.err" ||
	fail "no hint with a refused snapshot: $(cat "$TMP/expect.err")"
expect_exit 1 "permission denied" \
	as_nobody "$GRANARY" snapshot "$M/pub/open" "$M/open3"
for name in ../x a/b . ..; do
	as_nobody setfattr -n granary.snapshot -v "$(snapval /pub/open "$name")" \
		"$M/pub" 2>/dev/null && fail "a snapshot named '$name' was made"
done
[ ! -e "$M/x" ] && [ ! -e "$M/p2" ] && [ ! -e "$M/open3" ] ||
	fail "a refused snapshot left something: $(ls "$M" "$M/pub")"
ok "snapshot: readable into writable works; unreadable source, unwritable target, bad names refused"

# --- versions
mkdir "$M/pub/mine" && echo m >"$M/pub/mine/f" && chown -R 65534:65534 "$M/pub/mine"
as_nobody "$GRANARY" version create "$M/pub/mine" v1 >/dev/null ||
	fail "nobody cannot version a directory it owns"
as_nobody "$GRANARY" version list "$M/pub/mine" | grep -q '^v1 ' ||
	fail "nobody cannot list its versions"
mkdir "$M/rootds" && echo r >"$M/rootds/f" && chmod 0755 "$M/rootds"
"$GRANARY" version create "$M/rootds" r1 >/dev/null || fail "root's version"
expect_exit 1 "cannot create version 'v1' of '$M/rootds': Permission denied" \
	as_nobody "$GRANARY" version create "$M/rootds" v1
grep -q "hint: a version needs write permission" "$TMP/expect.err" ||
	fail "no hint with a refused version: $(cat "$TMP/expect.err")"
expect_exit 1 "permission denied" as_nobody "$GRANARY" version rm "$M/rootds" r1
expect_exit 1 "permission denied" \
	as_nobody "$GRANARY" version restore "$M/rootds" r1
check_eq "$(as_nobody "$GRANARY" version list --json "$M/rootds")" \
	"$("$GRANARY" version list --json "$M/rootds")" \
	"nobody's list of root's versions against root's"
chmod 0711 "$M/rootds"
expect_exit 1 "cannot read version 'r1' of '$M/rootds': Permission denied" \
	as_nobody "$GRANARY" version show "$M/rootds" r1
expect_errno "Permission denied" \
	as_nobody getfattr -n granary.version:r1 "$M/rootds"
[ -e "$M/rootds/.versions/r1" ] && [ ! -e "$M/rootds/.versions/v1" ] ||
	fail "versions of rootds: $(ls "$M/rootds/.versions")"
ok "versions: create/list/rm on a dir nobody owns work; root's dir: create, rm, restore, show refused"

# restore empties DIR's tree as rm -rf would: a subdirectory nobody may
# not write (or a sticky DIR with root's file) stops it
mkdir -p "$M/pub/shared/rootsub" && chmod 0777 "$M/pub/shared"
echo old >"$M/pub/shared/rootsub/g" && chmod 0755 "$M/pub/shared/rootsub"
as_nobody "$GRANARY" version create "$M/pub/shared" s1 >/dev/null ||
	fail "nobody cannot version a readable shared dir"
echo new >"$M/pub/shared/rootsub/g"
expect_exit 1 "cannot restore version 's1' of '$M/pub/shared': Permission denied" \
	as_nobody "$GRANARY" version restore "$M/pub/shared" s1
check_eq "$(cat "$M/pub/shared/rootsub/g")" new "content after a refused restore"
chmod 0777 "$M/pub/shared/rootsub"
chmod 1777 "$M/pub/shared"
echo rootfile >"$M/pub/shared/rf"
expect_exit 1 "permission denied" \
	as_nobody "$GRANARY" version restore "$M/pub/shared" s1
chmod 0777 "$M/pub/shared"
as_nobody "$GRANARY" version restore "$M/pub/shared" s1 >/dev/null ||
	fail "nobody cannot restore a tree it may empty"
check_eq "$(cat "$M/pub/shared/rootsub/g")" old "content after nobody's restore"
[ ! -e "$M/pub/shared/rf" ] || fail "restore kept a file the version lacks"
ok "restore: refused while a directory of the tree is not nobody's to empty (or DIR is sticky), then works"

# --- a --subdir mount: nothing above its root is reached
ln -s "$M/secret" "$M/pub/lnk"
S=$TMP/sub
mount_vol "$META" "$S" --allow-other --subdir pub
expect_exit 1 "not on the same granary mount" \
	"$GRANARY" snapshot "$S/lnk/k2" "$S/x"
expect_errno "Not a directory" \
	setfattr -n granary.snapshot -v "$(snapval /lnk/k2 x)" "$S"
expect_errno "Invalid argument" \
	setfattr -n granary.snapshot -v "$(snapval /../secret/k2 x)" "$S"
setfattr -n granary.snapshot -v "$(snapval /open ../x)" "$S" 2>/dev/null &&
	fail "a snapshot named '../x' was made"
"$GRANARY" snapshot -q "$S/lnk" "$S/lnk2" || fail "root's snapshot of a symlink"
check_eq "$(readlink "$S/lnk2")" "$M/secret" "a symlink is copied, not followed"
[ ! -e "$M/x" ] && [ ! -e "$M/pub/x" ] && [ ! -e "$S/x" ] ||
	fail "a refused snapshot left something"
"$GRANARY" version create "$S" sub1 >/dev/null || fail "version of the subdir root"
[ -d "$M/pub/.versions/sub1" ] || fail "the subdir root's version is not below it"
as_nobody "$GRANARY" stats "$S" >/dev/null || fail "stats on the --subdir mount"
ok "--subdir: symlinks out, '..' and bad names refused; versions stay below the root"
