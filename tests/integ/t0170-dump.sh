#!/bin/bash
# t0170-dump.sh - granary dump and load: a volume of plain, packed and
# written-back files, odd names, xattrs, symlinks, hard links, a fifo, a
# snapshot and a version, dumped (plain and LZ4) while two clients have it
# mounted, loaded into a fresh database: the loaded volume mounts and
# shows the same tree (names, modes, owners, sizes, mtimes, xattrs, link
# targets, hard links) and bytes, fsck finds it clean, and a dump of it
# equals the first but for the header; bad input is refused with a clear
# message and the right exit status.
. "$(dirname "$0")/lib.sh"

new_volume dump --trash-days 1
SRC_META=$META
A=$TMP/a W=$TMP/w L=$TMP/l
mount_vol "$META" "$A"
mount_vol "$META" "$W" --writeback --pack-window 1s

mkdir -p "$A/ds/cat" "$A/ds/dog"
for i in 1 2 3 4 5 6; do
	random_file "$A/ds/cat/c$i.jpg" $((1000 + i * 700))
	random_file "$A/ds/dog/d$i.jpg" $((2000 + i * 300))
done
random_file "$A/big" $((5 << 20))
truncate -s 200M "$A/sparse" && echo tail >>"$A/sparse"
echo newline >"$A/ds/$(printf 'odd\nname')"
echo quote >"$A/ds/qu\"ote 'x'"
echo utf >"$A/ds/ünïcødé"
touch "$A/ds/$(printf 'n%.0s' $(seq 1 255))"
ln "$A/ds/cat/c1.jpg" "$A/ds/hard"
ln -s cat/c1.jpg "$A/ds/link"
mkfifo "$A/ds/fifo"
chown 1234:567 "$A/ds/dog/d1.jpg"
chmod 4750 "$A/ds/dog/d2.jpg"
setfattr -n user.bin -v 0x00ff010a "$A/ds/cat/c1.jpg"
setfattr -n user.text -v "plain text" "$A/ds"
random_file "$W/written-back" $((3 << 20))
random_file "$W/small-wb" 5000
setfattr -n granary.sync -v 1 "$W/written-back"
setfattr -n granary.sync -v 1 "$W/small-wb"
"$GRANARY" snapshot "$A/ds" "$A/snap" >/dev/null || fail "snapshot"
"$GRANARY" version create "$A/ds" v1 -m "first" >/dev/null || fail "version"
echo changed >>"$A/ds/cat/c2.jpg"
# the trash: an rm -rf'ed tree, and a name cut to fit its trash name
mkdir -p "$A/gone/sub"
random_file "$A/gone/sub/g1" 7000
random_file "$A/gone/g2" 300
LONG=$(printf 'm%.0s' $(seq 1 250))
echo long >"$A/ds/$LONG"
rm -rf "$A/gone" "$A/ds/$LONG"
"$GRANARY" trash list "$META" --json | jq -S . >"$TMP/trash-a" || fail "trash list"
grep -q "/ds/$LONG" "$TMP/trash-a" || fail "the long name is not in the trash list"
sleep 1.2 # the attribute caches of the other client
ok "a volume of every kind of object (a tree and a long name in the trash), two clients mounted"

# ---- dump, plain and compressed, beside the clients
out=$("$GRANARY" dump "$META" "$TMP/d1.jsonl" 2>&1) || fail "dump: $out"
case $out in "dumped volume 'dump': "*" inodes "*" lines, "*" in "*" s") ;;
*) fail "dump summary: $out" ;; esac
"$GRANARY" dump -q "$META" "$TMP/d1.jsonl.lz4" || fail "dump .lz4"
check_eq "$(head -c 4 "$TMP/d1.jsonl.lz4" | od -An -tx1 | tr -d ' ')" 04224d18 "LZ4 frame magic"
"$GRANARY" dump -q "$META" - >"$TMP/d1-stdout.jsonl" || fail "dump to stdout"
head -n 1 "$TMP/d1.jsonl" |
	jq -e '.type == "header" and .setting.name == "dump" and (.setting | has("secret_key") | not)' \
		>/dev/null || fail "the header, read by jq"
entry() { jq -r "select(.type==\"dirent\" and .dir==$1 and .name==\"$2\") | .ino" "$TMP/d1.jsonl"; }
DS=$(entry 1 ds)
check_eq "$(entry "$DS" hard)" "$(entry "$(entry "$DS" cat)" c1.jpg)" "a hard link names the same inode"
check_eq "$(jq -r "select(.type==\"inode\" and .ino==$(entry "$DS" hard)) | .nlink" "$TMP/d1.jsonl")" 2 \
	"the inode of two names appears once, nlink 2"
check_eq "$(tail -n 1 "$TMP/d1.jsonl" | jq -r .type)" end "the trailer"
ok "dump to a file, a .lz4 file and stdout while mounted; jq reads it"

# ---- load into a fresh database, mount, compare
fresh_db() {
	local db
	db=$(next_db)
	redis-cli -s "$GRANARY_TEST_REDIS_SOCK" -n "$db" flushdb >/dev/null
	echo "$GRANARY_TEST_REDIS?db=$db"
}
META2=$(fresh_db)
out=$("$GRANARY" load "$META2" "$TMP/d1.jsonl" 2>&1) || fail "load: $out"
case $out in "loaded volume 'dump' "*) ;; *) fail "load summary: $out" ;; esac
mount_vol "$META2" "$L" --read-only
tree_attrs "$A" >"$TMP/attrs-a"
tree_attrs "$L" >"$TMP/attrs-l"
diff "$TMP/attrs-a" "$TMP/attrs-l" || fail "the loaded tree's attributes differ"
tree_mtimes "$A" >"$TMP/mt-a"
tree_mtimes "$L" >"$TMP/mt-l"
diff_mtimes "$TMP/mt-a" "$TMP/mt-l" || fail "mtimes differ"
# xattrs file by file in name order (a directory lists in its hash's
# order, which a load need not keep)
xattrs_of() {
	(cd "$1" && find . -print0 | sort -z |
		xargs -0 getfattr -h -d -m 'user\.' -e hex 2>/dev/null)
}
xattrs_of "$A" >"$TMP/x-a"
xattrs_of "$L" >"$TMP/x-l"
grep -q 'user.bin=0x00ff010a' "$TMP/x-l" || fail "a binary xattr lost"
diff "$TMP/x-a" "$TMP/x-l" || fail "xattrs differ"
check_eq "$(stat -c %i "$L/ds/hard")" "$(stat -c %i "$L/ds/cat/c1.jpg")" "hard link inode"
check_eq "$(readlink "$L/ds/link")" cat/c1.jpg "symlink target"
(cd "$A" && find . -type f -print0 | sort -z) >"$TMP/files"
n=0
while IFS= read -r -d '' f; do
	cmp -s "$A/$f" "$L/$f" || fail "bytes of $f differ"
	n=$((n + 1))
done <"$TMP/files"
[ "$n" -ge 30 ] || fail "only $n files compared"
tree_attrs "$A/ds/.versions/v1" >"$TMP/v-a"
tree_attrs "$L/ds/.versions/v1" >"$TMP/v-l"
diff "$TMP/v-a" "$TMP/v-l" || fail "version v1's tree differs"
for f in cat/c2.jpg dog/d3.jpg hard; do
	cmp "$A/ds/.versions/v1/$f" "$L/ds/.versions/v1/$f" || fail "v1/$f differs"
done
ok "the loaded volume lists the same tree, attributes, xattrs and links, and reads $n files byte-exact"

out=$("$GRANARY" fsck "$META2" 2>&1) || fail "fsck of the loaded volume: $out"
ok "fsck of the loaded volume is clean"
"$GRANARY" trash list "$META2" --json | jq -S . >"$TMP/trash-l" || fail "trash list of the loaded volume"
diff "$TMP/trash-a" "$TMP/trash-l" || fail "the loaded volume's trash lists otherwise"
check_eq "$("$GRANARY" status --json "$META2" | jq -c '[.usage.trash_bytes, .usage.trash_entries]')" \
	"$("$GRANARY" status --json "$SRC_META" | jq -c '[.usage.trash_bytes, .usage.trash_entries]')" \
	"the trash's bytes and entries in status"
ok "the loaded volume's trash holds the same entries (the long name whole), counted alike"

"$GRANARY" dump -q "$META2" "$TMP/d2.jsonl" || fail "second dump"
# but for the header and the trailer's counters: a load starts a new id
# epoch and names itself (restore_id, slice_floor, inode_floor)
body() { sed 1d "$1" | sed 's/,"nextinode":[0-9]*,"nextslice":[0-9]*}$/}/' | sort; }
nosetting='del(.restore_id, .slice_floor, .inode_floor)'
body "$TMP/d1.jsonl" >"$TMP/s1"
body "$TMP/d2.jsonl" >"$TMP/s2"
diff "$TMP/s1" "$TMP/s2" >/dev/null || fail "the second dump differs: $(diff "$TMP/s1" "$TMP/s2" | head -5)"
check_eq "$(head -1 "$TMP/d2.jsonl" | jq -cS ".setting | $nosetting")" \
	"$(head -1 "$TMP/d1.jsonl" | jq -cS ".setting | $nosetting")" "settings"
[ "$(tail -1 "$TMP/d2.jsonl" | jq .nextslice)" -ge $((1 << 40)) ] ||
	fail "the loaded volume's ids are not in a new epoch: $(tail -1 "$TMP/d2.jsonl")"
META3=$(fresh_db)
"$GRANARY" load -q "$META3" "$TMP/d1.jsonl.lz4" || fail "load of the .lz4 dump"
"$GRANARY" dump -q "$META3" "$TMP/d3.jsonl" || fail "third dump"
body "$TMP/d3.jsonl" >"$TMP/s3"
diff "$TMP/s1" "$TMP/s3" >/dev/null || fail "the dump of the .lz4 load differs"
ok "a dump of the loaded volume equals the first but for its header and counters; the .lz4 dump loads alike"

# the loaded volume's trash is a trash: a restore brings the tree back
# whole, and an rm goes to it
entry=$(jq -r '.. | objects | select(.path? == "/gone") | .entry' "$TMP/trash-l" | head -n 1)
[ -n "$entry" ] || fail "no /gone in the trash list: $(head -c 600 "$TMP/trash-l")"
"$GRANARY" trash restore "$META3" "$entry" >"$TMP/restore.out" 2>&1 ||
	fail "trash restore on the loaded volume: $(cat "$TMP/restore.out")"
R=$TMP/r
mount_vol "$META3" "$R"
cmp "$A/ds/cat/c3.jpg" "$R/ds/cat/c3.jpg" || fail "c3 on the restored volume"
check_eq "$(stat -c %s "$R/gone/sub/g1")" 7000 "a file of the tree restored from the loaded trash"
rm "$R/ds/cat/c3.jpg"
"$GRANARY" trash list "$META3" | grep -q " /ds/cat/c3.jpg$" || fail "rm on the loaded volume did not go to its trash"
umount_vol "$R"
ok "on a loaded volume, trash restore brings a tree back and rm goes to the trash"

# ---- bad input
expect_exit 2 "unknown option" "$GRANARY" dump --bogus "$META" "$TMP/x"
expect_exit 2 "unknown option" "$GRANARY" load --bogus "$META2" "$TMP/d1.jsonl"
expect_exit 2 "required" "$GRANARY" load "$META2"
expect_exit 1 "already holds volume 'dump'" "$GRANARY" load "$SRC_META" "$TMP/d1.jsonl"
grep -q "hint:" "$TMP/expect.err" || fail "no hint for a database in use"
head -n -1 "$TMP/d1.jsonl" >"$TMP/cut.jsonl"
META4=$(fresh_db)
expect_exit 1 "not a whole granary dump: line [0-9]+: .*cut short" "$GRANARY" load "$META4" "$TMP/cut.jsonl"
redis-cli -s "$GRANARY_TEST_REDIS_SOCK" -n "${META4##*db=}" set stray key >/dev/null
expect_exit 1 "is not empty" "$GRANARY" load "$META4" "$TMP/d1.jsonl"
META5=$(fresh_db)
head -c 3000 "$TMP/d1.jsonl.lz4" >"$TMP/cut.lz4"
expect_exit 1 "damaged or cut short" "$GRANARY" load "$META5" "$TMP/cut.lz4"
expect_exit 1 "cannot open '$TMP/missing': No such file" "$GRANARY" load "$(fresh_db)" "$TMP/missing"
echo '{"type":"header","format":"granary-dump","version":7}' >"$TMP/newer.jsonl"
expect_exit 1 "newer" "$GRANARY" load "$(fresh_db)" "$TMP/newer.jsonl"
expect_exit 1 "no granary volume" "$GRANARY" dump "$(fresh_db)" "$TMP/none.jsonl"
[ ! -e "$TMP/none.jsonl" ] || fail "a failed dump left a file"
ok "bad flags (2), a database in use, cut-short plain and LZ4 dumps, a missing file, a newer format (1)"
