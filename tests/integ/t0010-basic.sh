#!/bin/bash
# t0010-basic.sh - everyday POSIX operations on one mount, checked the way a
# user would see them: contents, listings, errno texts, stat fields.
. "$(dirname "$0")/lib.sh"

new_volume basic
M=$TMP/mnt
mount_vol "$META" "$M"

# --- files and directories
echo hello >"$M/hello"
check_eq "$(cat "$M/hello")" hello "content of a new file"
check_eq "$(stat -c %s "$M/hello")" 6 "size of a new file"
: >"$M/empty"
check_eq "$(stat -c %s "$M/empty")" 0 "size of an empty file"
mkdir -p "$M/a/b/c"
[ -d "$M/a/b/c" ] || fail "mkdir -p did not create a/b/c"
touch "$M/a/x" "$M/a/y" "$M/a/z"
check_eq "$(ls -A "$M/a" | tr '\n' ' ')" "b x y z " "listing of a"
check_eq "$(ls -A "$M" | tr '\n' ' ')" "a empty hello " "listing of the root"
check_eq "$(stat -c %F "$M/a")" directory "type of a"
check_eq "$(stat -c %h "$M/a")" 3 "nlink of a dir with one subdir"
ok "create, mkdir -p, exact listings"

# --- rename
echo one >"$M/a/x"
mv "$M/a/x" "$M/a/x2"
[ ! -e "$M/a/x" ] || fail "old name still there after rename"
check_eq "$(cat "$M/a/x2")" one "content after rename"
echo two >"$M/a/y"
mv -f "$M/a/x2" "$M/a/y"
check_eq "$(cat "$M/a/y")" one "content after rename over an existing file"
check_eq "$(ls -A "$M/a" | tr '\n' ' ')" "b y z " "listing after rename over"
echo keep >"$M/a/z"
mv -n "$M/a/y" "$M/a/z" || true
check_eq "$(cat "$M/a/z")" keep "mv -n must not replace the target"
check_eq "$(cat "$M/a/y")" one "mv -n must leave the source"
mkdir "$M/d1" && echo in-d1 >"$M/d1/f"
mv "$M/d1" "$M/a/b/d2"
check_eq "$(cat "$M/a/b/d2/f")" in-d1 "file inside a renamed directory"
[ ! -e "$M/d1" ] || fail "renamed directory still under its old name"
mkdir "$M/e1" "$M/e2" && touch "$M/e2/x"
expect_exit 1 "Directory not empty|File exists" mv -T "$M/e1" "$M/e2"
mv -T "$M/e2" "$M/e1" # over an empty directory
check_eq "$(ls -A "$M/e1")" x "directory renamed over an empty one"
ok "rename, rename over existing, mv -n, directory rename"

# --- unlink and rmdir
rm "$M/a/z"
[ ! -e "$M/a/z" ] || fail "unlinked file still there"
expect_errno "No such file or directory" cat "$M/a/z"
expect_errno "Directory not empty" rmdir "$M/a/b"
rm -r "$M/a/b/d2"
rmdir "$M/a/b/c" "$M/a/b"
check_eq "$(ls -A "$M/a" | tr '\n' ' ')" "y " "listing after rm and rmdir"
expect_errno "Not a directory" rmdir "$M/a/y"
expect_errno "Is a directory" rm "$M/a"
expect_errno "File exists" mkdir "$M/a"
expect_errno "subdirectory of itself" mv "$M/e1" "$M/e1/inside"
long=$(printf 'n%.0s' $(seq 1 255))
echo long >"$M/$long"
check_eq "$(cat "$M/$long")" long "a file with a 255-byte name"
rm "$M/$long"
expect_errno "File name too long" touch "$M/x$long"
expect_errno "cannot overwrite existing file" bash -C -c "echo x >'$M/a/y'"
ok "unlink, rmdir, error texts"

# --- a directory larger than one readdir reply, removed while listed
mkdir "$M/many"
(cd "$M/many" && for i in $(seq 1 1500); do : >"file-with-a-longish-name-$i"; done)
check_eq "$(ls "$M/many" | wc -l)" 1500 "entries in a 1500-file directory"
check_eq "$(ls "$M/many" | sort | uniq | wc -l)" 1500 "distinct entries in a 1500-file directory"
check_eq "$(find "$M/many" -type f | wc -l)" 1500 "find in a 1500-file directory"
rm -rf "$M/many"
[ ! -e "$M/many" ] || fail "rm -rf left the 1500-file directory"
ok "1500-entry directory: listing exact, rm -rf"

# --- symlinks and hard links
ln -s ../hello "$M/a/link"
check_eq "$(readlink "$M/a/link")" ../hello "readlink"
check_eq "$(stat -c %F "$M/a/link")" "symbolic link" "symlink type"
check_eq "$(cat "$M/a/link")" hello "read through a symlink"
ln -s /nonexistent/target "$M/dangling"
check_eq "$(readlink "$M/dangling")" /nonexistent/target "dangling symlink"
ln "$M/hello" "$M/a/hard"
check_eq "$(stat -c %h "$M/hello")" 2 "nlink after ln"
check_eq "$(stat -c %i "$M/a/hard")" "$(stat -c %i "$M/hello")" "inode of a hard link"
rm "$M/hello"
check_eq "$(stat -c %h "$M/a/hard")" 1 "nlink after removing one name"
check_eq "$(cat "$M/a/hard")" hello "content through the remaining link"
expect_errno "File exists" ln "$M/a/hard" "$M/a/y"
expect_errno "hard link not allowed for directory" ln "$M/a" "$M/a-link"
expect_errno "File exists" ln -s x "$M/a/y"
ok "symlink, readlink, hard link nlink"

# --- attributes
f=$M/a/y
chmod 0751 "$f"
check_eq "$(stat -c %a "$f")" 751 "mode after chmod"
chown 1234:5678 "$f"
check_eq "$(stat -c %u:%g "$f")" 1234:5678 "owner after chown"
touch -m -d '2001-02-03 04:05:06 UTC' "$f"
check_eq "$(stat -c %Y "$f")" 981173106 "mtime after touch -d"
touch -a -d '1999-12-31 23:59:59 UTC' "$f"
check_eq "$(stat -c %X "$f")" 946684799 "atime after touch -a -d"
chmod 1777 "$M/a"
check_eq "$(stat -c %a "$M/a")" 1777 "sticky bit on a directory"
ok "chmod, chown, touch -d"

# --- truncate, compared with a local file
L=$TMP/local && mkdir -p "$L"
random_file "$L/t" 100000
cp "$L/t" "$M/t"
for size in 300000 5000 4194305 9000000 4194303 0 77; do
	truncate -s "$size" "$L/t"
	truncate -s "$size" "$M/t"
	check_eq "$(stat -c %s "$M/t")" "$size" "size after truncate -s $size"
	cmp "$L/t" "$M/t" || fail "content differs after truncate -s $size"
done
ok "truncate up and down (across 4 MiB)"

# --- xattrs
setfattr -n user.x -v hello "$f"
check_eq "$(getfattr --absolute-names --only-values -n user.x "$f")" hello "getfattr user.x"
setfattr -n user.empty "$f"
getfattr --absolute-names -d "$f" >"$TMP/xattrs"
grep -q '^user.x="hello"$' "$TMP/xattrs" || fail "getfattr -d misses user.x: $(cat "$TMP/xattrs")"
grep -q '^user.empty' "$TMP/xattrs" || fail "getfattr -d misses user.empty: $(cat "$TMP/xattrs")"
setfattr -n user.x -v replaced "$f"
check_eq "$(getfattr --absolute-names --only-values -n user.x "$f")" replaced "getfattr after replace"
setfattr -x user.x "$f"
expect_errno "No such attribute" getfattr --absolute-names -n user.x "$f"
ok "setfattr, getfattr, remove"

# --- df
df "$M" >"$TMP/df" || fail "df on the mount failed"
df -i "$M" >/dev/null || fail "df -i on the mount failed"
[ "$(stat -f -c %S "$M")" -gt 0 ] || fail "statfs block size is 0"
ok "df"

# --- a 9 MiB file of random bytes, append with >>
random_file "$L/big" $((9 * 1024 * 1024))
cp "$L/big" "$M/big"
cmp "$L/big" "$M/big" || fail "9 MiB file differs"
check_eq "$(stat -c %s "$M/big")" $((9 * 1024 * 1024)) "size of the 9 MiB file"
printf 'tail1\n' >>"$M/big" && printf 'tail1\n' >>"$L/big"
head -c 5000 /dev/urandom >"$TMP/more"
cat "$TMP/more" >>"$M/big" && cat "$TMP/more" >>"$L/big"
cmp "$L/big" "$M/big" || fail "file differs after appends with >>"
for i in 1 2 3; do echo "line $i" >>"$M/log"; done
check_eq "$(cat "$M/log" | tr '\n' ' ')" "line 1 line 2 line 3 " "appended lines"
ok "9 MiB random file, append with >>"

# --- cp -a of a tree
S=$TMP/src
mkdir -p "$S/d/e" "$S/empty-dir"
random_file "$S/d/f1" 12345
random_file "$S/d/e/f2" 1
: >"$S/d/zero"
ln -s f1 "$S/d/sl"
ln "$S/d/f1" "$S/d/hl"
chmod 0600 "$S/d/e/f2"
touch -d '2010-01-01 00:00:00 UTC' "$S/d/f1"
cp -a "$S" "$M/copy"
diff -r --no-dereference "$S" "$M/copy" || fail "diff -r after cp -a"
tree_attrs "$S" >"$TMP/s.lst"
tree_attrs "$M/copy" >"$TMP/m.lst"
diff "$TMP/s.lst" "$TMP/m.lst" || fail "cp -a tree: type/mode/size/nlink/owner/link differ"
tree_mtimes "$S" >"$TMP/s.mt"
tree_mtimes "$M/copy" >"$TMP/m.mt"
diff_mtimes "$TMP/s.mt" "$TMP/m.mt" >"$TMP/mt.diff" ||
	fail "cp -a tree: mtimes not preserved (source vs mount): $(cat "$TMP/mt.diff")"
ok "cp -a of a tree"

# --- fallocate: reserve, keep size, punch hole, zero range
random_file "$L/fa" 300000
cp "$L/fa" "$M/fa"
fallocate -p -o 5000 -l 70000 "$M/fa" || fail "punch hole failed"
fallocate -p -o 5000 -l 70000 "$L/fa"
cmp "$L/fa" "$M/fa" || fail "punch hole: bytes differ from the local copy"
check_eq "$(stat -c %s "$M/fa")" 300000 "size after punch hole"
fallocate -z -o 290000 -l 20000 "$M/fa" && fallocate -z -o 290000 -l 20000 "$L/fa"
cmp "$L/fa" "$M/fa" || fail "zero range past the end: bytes differ"
fallocate -n -l 4M "$M/fa"
check_eq "$(stat -c %s "$M/fa")" 310000 "size after fallocate --keep-size"
fallocate -l 1M "$M/fb"
check_eq "$(stat -c %s "$M/fb")" 1048576 "size after fallocate"
ok "fallocate modes"

# a directory's attributes right after creates in it (the client answers
# the kernel's GETATTR from what the create left) follow every other change
mkdir "$M/da"
t0=$(stat -c %Y.%Z "$M/da")
sleep 1.1
: >"$M/da/f1"
check_eq "$(stat -c %h "$M/da")" 2 "nlink of a dir after a create in it"
[ "$(stat -c %Y.%Z "$M/da")" != "$t0" ] || fail "mtime/ctime of a dir did not move with a create"
mkdir "$M/da/sub"
check_eq "$(stat -c %h "$M/da")" 3 "nlink after a create, then a mkdir"
: >"$M/da/f2"
chmod 0700 "$M/da"
check_eq "$(stat -c %a:%h "$M/da")" 700:3 "mode after a create, then a chmod"
: >"$M/da/f3"
rmdir "$M/da/sub"
check_eq "$(stat -c %h "$M/da")" 2 "nlink after a create, then an rmdir"
ok "directory attributes after creates in it"

umount_vol "$M"
ok "umount"

# fault injection lives in the test build alone (fs/vfs/hooks.h)
! grep -qa GRANARY_TEST_ "$GRANARY" ||
	fail "the installed binary reads GRANARY_TEST_* variables"
grep -qa GRANARY_TEST_SNAPSHOT_KILL_AFTER "$GRANARY_HOOKS" ||
	fail "the test build has no fault injection"
ok "GRANARY_TEST_* variables are read by the test build only"
