#!/bin/bash
# t0281-import-s3.sh - granary import of an S3 prefix of plain objects
# (put by another program into the test's s3rver): keys become paths
# (nested, odd names, an empty object, a directory marker, big objects read
# in parts), in process and through a mount, byte-exact; small objects
# packed; each file's mtime is its object's LastModified, so a second run
# skips everything; a prefix deeper in the tree imports that subtree.
. "$(dirname "$0")/lib.sh"
TREE=$TOPDIR/tests/integ/importtree.py

need_s3
new_volume imps
M=$TMP/m
mount_vol "$META" "$M"
made=$(python3 "$TREE" make "$TMP/src" 300 9 2)
small=$(sed -n 's/.*small=\([0-9]*\).*/\1/p' <<<"$made")
mkdir "$TMP/src/emptydir" "$TMP/src/a/b/c/empty-too"
python3 "$TREE" s3put "$GRANARY_TEST_S3_PORT" granary-test "src-$$" "$TMP/src" \
	>"$TMP/put" || fail "cannot put the source objects: $(cat "$TMP/put")"
# what an import gives: the regular files and directories (an S3 source
# has no symlinks or FIFOs)
find "$TMP/src" ! -type f ! -type d -delete
nfiles=$(python3 "$TREE" count "$TMP/src")
SRC=$GRANARY_TEST_S3/granary-test/src-$$
jf() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }

# ---- in process ----
t0=$(date +%s)
"$GRANARY" import -q --json "$SRC" "$META" /ds >"$TMP/j1" 2>"$TMP/e1" ||
	fail "import of the prefix failed: $(cat "$TMP/e1")"
python3 "$TREE" cmp --bytes-only "$TMP/src" "$M/ds" >"$TMP/cmp" ||
	fail "the copy of the prefix differs: $(cat "$TMP/cmp")"
check_eq "$(jf "$TMP/j1" files)" "$nfiles" "--json files"
check_eq "$(jf "$TMP/j1" failed)" 0 "--json failed"
[ -d "$M/ds/emptydir" ] && [ -d "$M/ds/a/b/c/empty-too" ] ||
	fail "directory markers did not become directories"
ok "an S3 prefix in process: $nfiles objects byte-exact as files, markers as directories"

# mtime: the object's LastModified (whole seconds), this test's time
mt=$(stat -c %Y "$M/ds/sp ace.txt")
[ "$mt" -ge $((t0 - 3600)) ] && [ "$mt" -le $(($(date +%s) + 60)) ] ||
	fail "mtime of an imported object: $mt, the put was at about $t0"
packs=$(count_objects packs) blocks=$(count_objects blocks)
[ $((packs * 10)) -le "$small" ] ||
	fail "$packs pack objects for $small small objects (more than 1 for 10; bench/import.sh measures the 1 for 20 of issue 35, which a loaded machine misses: batches are cut by time)"
check_eq "$blocks" 6 "block objects of the two big objects"
ok "small objects in $packs packs for $small, the big ones (read in parts) in $blocks blocks"

"$GRANARY" import -q --json "$SRC" "$META" /ds >"$TMP/j2" 2>"$TMP/e2" ||
	fail "second import failed: $(cat "$TMP/e2")"
check_eq "$(jf "$TMP/j2" files)" 0 "objects copied again"
check_eq "$(jf "$TMP/j2" skipped)" "$nfiles" "objects skipped"
ok "a second run skips every object (size and LastModified)"

# ---- through the mount, a deeper prefix (with a trailing slash) ----
"$GRANARY" import -q "$SRC/a/" "$M/sub" >"$TMP/o3" 2>"$TMP/e3" ||
	fail "import of a deeper prefix failed: $(cat "$TMP/e3")"
python3 "$TREE" cmp --bytes-only "$TMP/src/a" "$M/sub" >"$TMP/cmp" ||
	fail "the copy of the deeper prefix differs: $(cat "$TMP/cmp")"
ok "through the mount, prefix a/: its subtree byte-exact"
umount_vol "$M"
