#!/bin/bash
# t0165-fsck.sh - granary fsck on a real mounted volume: files, directories,
# hard links, a symlink and a snapshot are clean (exit 0, with --objects and
# --deep too); objects deleted or changed in the store and metadata damaged
# with redis-cli are reported (exit 1) with the path of the file concerned;
# --repair fixes what it may (not the objects) and leaves an inode a live
# client has open; fsck is clean again and every file reads back. What
# clients that are gone left (opens, pending bytes), a live file in
# delfiles, chunk lists past a file's length or of holes only: found and
# repaired. --path checks one tree: damage outside it is not reported,
# inside it is (exit 1) and repaired. Bad input exits 2; no volume, no
# redis or a --path that names nothing exits 1.
. "$(dirname "$0")/lib.sh"

# fsck ARGS...: run granary fsck on $META; stdout in $TMP/fsck.out, stderr
# in $TMP/fsck.err, its exit status in RC
fsck() {
	RC=0
	"$GRANARY" fsck "$META" "$@" >"$TMP/fsck.out" 2>"$TMP/fsck.err" || RC=$?
}
# expect_fsck RC ARGS...: fsck exits RC
expect_fsck() {
	local want=$1; shift
	fsck "$@"
	[ "$RC" = "$want" ] ||
		fail "granary fsck $* exited $RC, expected $want: $(cat "$TMP/fsck.out" "$TMP/fsck.err" | head -c 2000)"
}
# said TEXT: the last fsck printed a line with TEXT (fixed string)
said() {
	grep -qF -- "$1" "$TMP/fsck.out" ||
		fail "fsck did not say '$1': $(head -c 2000 "$TMP/fsck.out")"
}
# saidE REGEX: ... a line matching the extended REGEX
saidE() {
	grep -qE -- "$1" "$TMP/fsck.out" ||
		fail "fsck did not say /$1/: $(head -c 2000 "$TMP/fsck.out")"
}
# jfield FIELD: a field of the last fsck --json
jfield() { jq -e ".$1" "$TMP/fsck.out" || fail "no $1 in: $(head -c 2000 "$TMP/fsck.out")"; }

# rec INO: the attribute record of INO (59 bytes) into $TMP/rec;
# put_rec INO: $TMP/rec back (redis-cli -x takes the last argument from
# stdin as it is)
rec() { rcli --raw hget "n$(($1 / 32))" "$(($1 % 32))" | head -c 59 >"$TMP/rec"; }
put_rec() { rcli -x hset "n$(($1 / 32))" "$(($1 % 32))" <"$TMP/rec" >/dev/null; }
# set_nlink INO N (N < 256)
set_nlink() {
	rec "$1"
	printf "\\x$(printf %02x "$2")" | dd of="$TMP/rec" bs=1 seek=12 conv=notrunc status=none
	put_rec "$1"
}

# with_sidecars OBJ: the files of an object in DATA_DIRS (s3rver keeps
# X._S3rver_object and two sidecars)
with_sidecars() {
	local b=${1%._S3rver_object}
	echo "$1"
	[ "$b" = "$1" ] || echo "$b._S3rver_metadata.json" "$1.md5"
}

new_volume fsck
A=$TMP/a
mount_vol "$META" "$A"
mkdir -p "$A/dir/sub" "$A/other"
random_file "$A/dir/small" 3000
random_file "$A/dir/sub/big" $((9 << 20))
random_file "$A/other/f" 5000
ln "$A/dir/small" "$A/other/hard"
ln -s ../dir/small "$A/other/sym"
for i in $(seq 1 10); do random_file "$A/other/s$i" $((300 * i)); done
"$GRANARY" snapshot "$A/other/f" "$A/other/f-snap" >/dev/null || fail "snapshot failed"
"$GRANARY" snapshot "$A/dir" "$A/dir-snap" >/dev/null || fail "snapshot of a tree failed"
"$GRANARY" version create "$A/other" v1 >/dev/null || fail "version create failed"
cp -a "$A" "$TMP/src"
ino_sub=$(stat -c %i "$A/dir/sub")
ino_dir=$(stat -c %i "$A/dir")
ino_f=$(stat -c %i "$A/other/f")
ino_s3=$(stat -c %i "$A/other/s3")
ino_other=$(stat -c %i "$A/other")
umount_vol "$A"

expect_fsck 0
said "no problems found"
# the shared s3rver of run.sh may refuse listings (signature): then the
# store's checks are skipped, until it lists
LISTS=1
fsck --objects -q
if [ "$RC" = 1 ] && [ "$GRANARY_STORAGE" = s3 ] && grep -q "refused by the store" "$TMP/fsck.err"; then
	LISTS=0
fi
[ "$LISTS" = 0 ] || expect_fsck 0 --objects --deep -q
expect_fsck 0 --json -q
check_eq "$(jfield clean)" true "clean in --json"
check_eq "$(jfield problems)" 0 "problems in --json"
# /, dir, dir/sub, other, dir-snap, dir-snap/sub, other/.versions, its v1
check_eq "$(jfield dirs)" 8 "directories checked"
ok "a volume of files, directories, hard links, a symlink, snapshots and a version is clean$([ "$LISTS" = 0 ] || echo " (also --objects --deep)")"

# --- objects: big's blocks (the only objects under blocks/: small files go
# to packs) deleted and changed; never repaired, restored by hand
if [ "$LISTS" = 0 ]; then
	skip "--objects and --deep: this s3rver refuses listings"
else
	blocks=$(for d in $DATA_DIRS; do find "$d" -type f -path "*/blocks/*" \
		! -name '*._S3rver_metadata.json' ! -name '*._S3rver_object.md5' \
		! -name '*.tmp*' ! -name '.granary-tmp.*'; done | sort)
	check_eq "$(echo "$blocks" | wc -l)" 3 "blocks of a 9 MiB file"
	gone=$(echo "$blocks" | sed -n 1p)
	bad=$(echo "$blocks" | sed -n 2p)
	tar -cPf "$TMP/keep.tar" $(with_sidecars "$gone") $(with_sidecars "$bad")
	rm -f $(with_sidecars "$gone")
	# every bit of one byte flipped: a fixed value changes nothing where
	# the byte already has it (1 run in 256 wrote 0x55 over 0x55)
	at=$(($(stat -c %s "$bad") - 100))
	was=$(od -An -tu1 -j "$at" -N1 "$bad" | tr -d ' ')
	printf "\\x$(printf %02x $((was ^ 255)))" | dd of="$bad" bs=1 seek="$at" conv=notrunc status=none
	check_eq "$(od -An -tu1 -j "$at" -N1 "$bad" | tr -d ' ')" $((was ^ 255)) "the byte changed in '$bad'"
	expect_fsck 0 -q
	expect_fsck 1 --objects -q
	# named by the first of the two files sharing the slice the walk met
	saidE "^/dir(-snap)?/sub/big: 1 of 3 objects of slice [0-9]+ are missing from the store"
	expect_fsck 1 --deep -q
	saidE "^/dir(-snap)?/sub/big: an object of slice [0-9]+ fails its checksum"
	expect_fsck 1 --deep --repair -q
	said "[not fixed: the file's data is lost there"
	tar -xPf "$TMP/keep.tar"
	expect_fsck 0 --deep -q
	ok "a deleted and a changed object: --objects and --deep name the file, --repair leaves them; restored, clean"
fi

# --- metadata: damage done with redis-cli
rcli hdel "d$ino_dir" sub >/dev/null           # an orphan: /dir/sub
set_nlink "$ino_f" 7                           # a link count
printf '\x01\x3f\x42\x0f' | rcli -x hset d1 ghost >/dev/null # an entry of no inode
rcli incrby totalinodes 3 >/dev/null           # the inode counter
rcli incrby usedspace 4096 >/dev/null          # the space counter
# f's shares with f-snap and the version forgotten: its slice id is bytes
# 5..12 of the record in its tail field
f_id=$(rcli --raw hget "n$((ino_f / 32))" "$((ino_f % 32 + 32))" | head -c 13 |
	tail -c 8 | od -An -tu8 | tr -d ' ')
check_eq "$(rcli hget sliceref "$f_id")" 3 "references of f's slice beyond the first (f-snap, and both in v1)"
rcli hdel sliceref "$f_id" >/dev/null
expect_fsck 1
said "inode $ino_sub: no entry names it and nobody has it open"
said "/dir: nlink is 3, 2 + 0 subdirectories make 2"
said "/other/f: nlink is 7, 1 entries name it"
said "/ghost: the entry names inode 999999, which does not exist"
said "totalinodes is"
said "usedspace is"
# named by the first file the walk met with it
saidE "^/other/(\.versions/v1/)?(f|f-snap): slice $f_id: 4 references found, sliceref makes 1"
grep -q "hint: 'granary fsck --repair" "$TMP/fsck.err" || fail "no hint to --repair: $(cat "$TMP/fsck.err")"
expect_fsck 1 --json -q
check_eq "$(jfield problems)" 7 "problems in --json"
check_eq "$(jq -r '.list[] | select(.kind == "nlink") | .path' "$TMP/fsck.out")" /other/f "path of the nlink problem"
check_eq "$(jq -r '.list[] | select(.kind == "orphan") | .ino' "$TMP/fsck.out")" "$ino_sub" "inode of the orphan"
ok "an orphan, link counts, an entry of no inode, both counters and a sliceref: each named (exit 1)"

expect_fsck 0 --repair
said "7 problems found: 7 fixed, 0 skipped"
if [ "$LISTS" = 1 ]; then expect_fsck 0 --objects --deep; else expect_fsck 0; fi
said "no problems found"
mount_vol "$META" "$A"
diff -r "$TMP/src/other" "$A/other" || fail "/other changed by the repair"
cmp -s "$TMP/src/dir/small" "$A/dir/small" || fail "/dir/small changed"
cmp -s "$TMP/src/dir/sub/big" "$A/lost+found/#$ino_sub/big" || fail "the orphan's file in lost+found"
check_eq "$(stat -c %a "$A/lost+found")" 700 "mode of lost+found"
check_eq "$(stat -c %h "$A/other/f")" 1 "links of /other/f"
[ ! -e "$A/ghost" ] || fail "the entry of no inode is still there"
ok "--repair fixed all 7, the orphan is /lost+found/#$ino_sub; clean again, every file reads back"

# --- beside a live client: an inode it has open is skipped, an unlinked
# one it holds is no orphan
exec 3<"$A/other/s3"
exec 4<"$A/other/s4"
rm "$A/other/s4"
set_nlink "$ino_s3" 3
expect_fsck 1 --repair
said "/other/s3: nlink is 3, 1 entries name it [skipped: a client has it open]"
exec 3<&-
sleep 1 # the client's close goes to redis in a batch
wait_until 10 "$GRANARY" fsck "$META" -q --repair || fail "repair after the close: $(cat "$TMP/fsck.out")"
expect_fsck 0
exec 4<&-
ok "an open file's link count is skipped (exit 1), fixed once closed; an unlinked open file is no orphan"

# --- beside a client that creates, links, renames and deletes all along:
# what it changes during a check is not judged, nothing is reported, and
# --repair breaks nothing
mkdir -p "$A/w" "$A/x"
(
	i=0
	while [ ! -e "$TMP/stop" ]; do
		i=$((i + 1))
		head -c $((i % 7 * 3000 + 10)) /dev/urandom >"$A/w/f$i" || exit 1
		ln "$A/w/f$i" "$A/x/h$i" || exit 2
		mkdir -p "$A/w/d$((i % 13))"
		mv "$A/w/f$i" "$A/w/d$((i % 13))/g$i" || exit 3
		[ $((i % 3)) != 0 ] || rm -f "$A/x/h$((i - 2))"
		[ $((i % 5)) != 0 ] || rm -f "$A/w/d$(((i - 4) % 13))/g$((i - 4))"
		[ $((i % 11)) != 0 ] || rm -rf "$A/w/d$(((i + 1) % 13))"
	done
) &
writer=$!
bg_track $writer
sleep 1
for k in 1 2 3; do
	if [ "$LISTS" = 1 ]; then expect_fsck 0 --objects -q; else expect_fsck 0 -q; fi
done
expect_fsck 0 --repair -q
touch "$TMP/stop"
wait $writer || fail "the client writing beside fsck failed ($?)"
umount_vol "$A"
if [ "$LISTS" = 1 ]; then expect_fsck 0 --deep; else expect_fsck 0; fi
said "no problems found"
ok "beside a client creating, linking, renaming and deleting: 3 checks and a --repair found nothing; clean after"

# --- what gone clients left, a live file in delfiles, chunk lists past a
# file's length or of holes only, all made with redis-cli
# rec_hole: a 17-byte hole record (form 2, pos 0, id 0, 4096 bytes)
rec_hole() { printf '\x02\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x10\x00\x00'; }
rcli set pendingspace 777 >/dev/null
rcli hset "o$ino_s3" 987654 1 >/dev/null
rcli sadd so987654 "$ino_s3" >/dev/null
rcli zadd delfiles 1 "$ino_f:5000" >/dev/null
rec_hole | rcli -x set "c${ino_f}_1" >/dev/null
rec_hole | rcli -x set c888888_0 >/dev/null
expect_fsck 1 --json -q
check_eq "$(jfield problems)" 6 "problems in --json"
for k in pendingspace open-gone delfile-live chunk-past-length stray-chunks; do
	jq -e ".by_kind[\"$k\"] > 0" "$TMP/fsck.out" >/dev/null || fail "no $k in: $(head -c 2000 "$TMP/fsck.out")"
done
check_eq "$(jq -r '.list[] | select(.kind == "chunk-past-length") | .path' "$TMP/fsck.out")" /other/f "path of the chunk past f's length"
check_eq "$(jq -r '.list[] | select(.kind == "open-gone" and .ino != 0) | .path' "$TMP/fsck.out")" /other/s3 "path of the open of a gone session"
expect_fsck 0 --repair
said "6 problems found: 6 fixed, 0 skipped"
expect_fsck 0
check_eq "$(rcli get pendingspace)" 0 "pendingspace after the repair"
check_eq "$(rcli exists so987654 "c${ino_f}_1")" 0 "so987654 and f's chunk 1 after the repair"
check_eq "$(rcli zscore delfiles "$ino_f:5000")" "" "f in delfiles after the repair"
mount_vol "$META" "$A"
cmp -s "$TMP/src/other/f" "$A/other/f" || fail "/other/f changed by the repair"
cmp -s "$TMP/src/other/s3" "$A/other/s3" || fail "/other/s3 changed by the repair"
umount_vol "$A"
expect_fsck 0
ok "pendingspace, opens of a gone session, a live file in delfiles, chunk lists past a length and of holes only: found (exit 1), repaired, clean; the files read back"

# --- --path: one tree. Damage in /dir is not /other's; damage in /other
# is, and is repaired there only
expect_fsck 0 --path /other
said "no problems found"
said "volume-wide checks skipped (--path)"
# /other/hard's other name is /dir/small: its nlink is not judged there
said "not judged: "
set_nlink "$ino_dir" 9
printf '\x01\x3f\x42\x0f' | rcli -x hset "d$ino_other" ghost >/dev/null
set_nlink "$ino_s3" 0
expect_fsck 1 --path /other
said "/other/ghost: the entry names inode 999999, which does not exist"
said "/other/s3: nlink is 0, 1 entries name it"
! grep -q "^/dir" "$TMP/fsck.out" || fail "--path /other reported /dir: $(cat "$TMP/fsck.out")"
expect_fsck 1 --path /dir -q
said "/dir: nlink is 9, 2 + 0 subdirectories make 2"
! grep -q "^/other" "$TMP/fsck.out" || fail "--path /dir reported /other: $(cat "$TMP/fsck.out")"
expect_fsck 0 --path "/lost+found/#$ino_sub"
expect_fsck 1 --path /other/s3 -q
said "/other/s3: nlink is 0, 1 entries name it"
expect_fsck 0 --path /other --repair -q
said "2 problems found: 2 fixed"
expect_fsck 0 --path /other
expect_fsck 1 -q
said "/dir: nlink is 9"
expect_fsck 0 --repair -q
expect_fsck 0
expect_exit 1 "--path '/nope': no such file or directory" "$GRANARY" fsck --path /nope "$META"
expect_exit 1 "not a directory" "$GRANARY" fsck --path /other/f/x "$META"
expect_exit 2 "not absolute" "$GRANARY" fsck --path other "$META"
ok "--path: damage outside the tree not reported, inside reported (exit 1) and repaired there only; a path of nothing exits 1, a relative one 2"

# --- bad input
expect_exit 2 "unrecognized|unknown|invalid" "$GRANARY" fsck --bogus "$META"
expect_exit 2 "threads" "$GRANARY" fsck --threads 0 "$META"
expect_exit 2 "META_URL" "$GRANARY" fsck
db=$(next_db)
redis-cli -s "$GRANARY_TEST_REDIS_SOCK" -n "$db" flushdb >/dev/null
expect_exit 1 "no granary volume" "$GRANARY" fsck "$GRANARY_TEST_REDIS?db=$db"
expect_exit 1 "cannot reach redis" "$GRANARY" fsck "redis://127.0.0.1:1/0"
ok "bad flags exit 2; no volume or no redis exit 1 with a message"
