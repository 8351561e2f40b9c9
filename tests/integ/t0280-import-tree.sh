#!/bin/bash
# t0280-import-tree.sh - granary import of a local tree (nested
# directories, small, empty and big files, odd names, symlinks, a FIFO),
# through a mount and in process (META_URL PATH): every file byte-exact
# with its mtime and mode, symlinks as links, the FIFO skipped and
# counted, small files packed (at most one object for 10 of them, in
# process and through a default mount, whose client is told each batch
# by granary.batch), big files as blocks; a second run skips everything;
# the summary and --json say what was done.
. "$(dirname "$0")/lib.sh"
TREE=$TOPDIR/tests/integ/importtree.py

new_volume imp
M=$TMP/m
mount_vol "$META" "$M"
made=$(python3 "$TREE" make "$TMP/src" 400 9)
small=$(sed -n 's/.*small=\([0-9]*\).*/\1/p' <<<"$made")
nfiles=$(python3 "$TREE" count "$TMP/src")

# ---- in process: META_URL PATH ----
"$GRANARY" import -q --json "$TMP/src" "$META" /inproc >"$TMP/j1" 2>"$TMP/e1" ||
	fail "import in process failed: $(cat "$TMP/e1")"
python3 "$TREE" cmp "$TMP/src" "$M/inproc" >"$TMP/cmp" ||
	fail "the in-process copy differs: $(cat "$TMP/cmp")"
ok "in process: every file byte-exact with its mtime and mode, links as links ($(cat "$TMP/cmp"))"

jf() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }
check_eq "$(jf "$TMP/j1" files)" "$nfiles" "--json files"
check_eq "$(jf "$TMP/j1" symlinks)" 3 "--json symlinks"
check_eq "$(jf "$TMP/j1" special_skipped)" 1 "--json special_skipped (the FIFO)"
check_eq "$(jf "$TMP/j1" failed)" 0 "--json failed"
check_eq "$(jf "$TMP/j1" skipped)" 0 "--json skipped"
check_eq "$(jf "$TMP/j1" error)" None "--json error"
ok "--json: $nfiles files, 3 symlinks, the FIFO skipped and counted"

packs=$(count_objects packs) blocks=$(count_objects blocks)
[ $((packs * 10)) -le "$small" ] ||
	fail "in process: $packs pack objects for $small small files (more than 1 for 10; bench/import.sh measures the 1 for 20 of issue 35, which a loaded machine misses: batches are cut by time)"
check_eq "$blocks" 6 "block objects of the two big files (3 blocks of 4 MiB each)"
ok "in process: $small small files in $packs packs, the big files in $blocks blocks"

# ---- again: nothing to do ----
"$GRANARY" import -q --json "$TMP/src" "$META" /inproc >"$TMP/j2" 2>"$TMP/e2" ||
	fail "second import failed: $(cat "$TMP/e2")"
check_eq "$(jf "$TMP/j2" files)" 0 "files copied by a second run"
check_eq "$(jf "$TMP/j2" skipped)" "$((nfiles + 3))" "files and links skipped by a second run"
check_eq "$(count_objects)" "$((packs + blocks))" "objects after a second run"
ok "a second run copies nothing: $((nfiles + 3)) entries already there"

# ---- through the mount (default mode) ----
p0=$(count_objects packs)
"$GRANARY" import "$TMP/src" "$M/viamount" >"$TMP/o3" 2>"$TMP/e3" ||
	fail "import through the mount failed: $(cat "$TMP/e3")"
grep -q "^import: $nfiles files, .* 0 already there (0 B), 0 failed; .* 3 symlinks, 1 special files skipped" "$TMP/o3" ||
	fail "summary: $(cat "$TMP/o3")"
python3 "$TREE" cmp "$TMP/src" "$M/viamount" >"$TMP/cmp" ||
	fail "the copy through the mount differs: $(cat "$TMP/cmp")"
mpacks=$(($(count_objects packs) - p0))
# Batches of 24 files, each marked (granary.batch): the client seals their
# pack when the last came, not after its 10 ms window, which a loaded node
# misses (without the mark: 42 to 49 objects here, 122 in a loaded CI run)
[ $((mpacks * 10)) -le "$small" ] ||
	fail "through the mount: $mpacks pack objects for $small small files (more than 1 for 10)"
ok "through a default mount: byte-exact, $small small files in $mpacks packs"

# the mark itself: known to the client (a get answers its FUSE threads), refused when
# malformed, and a hint only for a file that is not being written
check_eq "$(getfattr --absolute-names --only-values -n granary.batch "$M" 2>&1)" "128" "get of granary.batch (the FUSE threads)"
f=$(find "$M/viamount" -type f -print -quit)
for bad in "" "zz 3" "1" "0 4" "12 1" "12 5000" "12 4 x"; do
	setfattr -n granary.batch -v "$bad" "$f" 2>"$TMP/eb" &&
		fail "granary.batch '$bad' was taken"
	grep -q "Invalid argument" "$TMP/eb" ||
		fail "granary.batch '$bad': $(cat "$TMP/eb")"
done
setfattr -n granary.batch -v "12 4" "$f" ||
	fail "granary.batch on a file not being written"
setfattr -n granary.batch -v "12 4" "$M/viamount" 2>"$TMP/eb" &&
	fail "granary.batch on a directory was taken"
grep -q "Is a directory" "$TMP/eb" || fail "granary.batch on a directory: $(cat "$TMP/eb")"
getfattr --absolute-names -d -m - "$f" 2>/dev/null | grep -q batch &&
	fail "granary.batch was kept as an xattr of the file"
ok "granary.batch: a get answers \"\", malformed values refused (EINVAL), a directory too (EISDIR), never stored"

# a copy from another client sees the same (close-to-open)
umount_vol "$M"
mount_vol "$META" "$M"
python3 "$TREE" cmp "$TMP/src" "$M/viamount" >"$TMP/cmp" ||
	fail "after a remount the copy differs: $(cat "$TMP/cmp")"
python3 "$TREE" cmp "$TMP/src" "$M/inproc" >"$TMP/cmp" ||
	fail "after a remount the in-process copy differs: $(cat "$TMP/cmp")"
ok "both copies read back whole after a remount"
umount_vol "$M"
