#!/bin/bash
# t0162-compact.sh - a log appended to 1,500 times (`echo >> log`, one
# open and close each, as a training log is written) keeps a short slice
# list: the client compacts it in the background. It reads back
# byte-exact, also through a descriptor opened before the first append;
# the packs the appends made are reclaimed once the compactions' delay is
# over (2 s here, through the test build's hook; an hour in production);
# nothing is leaked.
. "$(dirname "$0")/lib.sh"

# records INO: slice records of chunk 0 of INO (its tail field or
# c<ino>_0), counted by bytes: a packed record takes 33, a whole slice's 17
records() {
	local b
	b=$(rcli strlen "c$1_0")
	[ "$b" = 0 ] && b=$(rcli hstrlen "n$(($1 / 32))" $((32 + $1 % 32)))
	echo $(((b + 32) / 33))
}

new_volume cp
A=$TMP/a B=$TMP/b
GRANARY=$GRANARY_HOOKS GRANARY_TEST_COMPACT_DELAY=2 mount_vol "$META" "$A"
mount_vol "$META" "$B"
: >"$A/log"
: >"$TMP/shadow"
exec 4<"$A/log" # a reader that holds the file open from the start
ino=$(stat -c %i "$A/log")
for i in $(seq 1 1500); do
	if [ "$i" = 501 ]; then
		# another node reads the first 500 lines and keeps the file
		# open: its client keeps the slice list it read
		exec 5<"$B/log"
		head -c "$(stat -c %s "$TMP/shadow")" <&5 >"$TMP/b-first"
		cmp "$TMP/shadow" "$TMP/b-first" || fail "node B reads the first lines wrong"
	fi
	line="step $i loss 0.$RANDOM lr 3e-4 tokens $((i * 4096))"
	echo "$line" >>"$A/log"
	echo "$line" >>"$TMP/shadow"
done
cmp "$TMP/shadow" "$A/log" || fail "the log reads back wrong"
compacted=$(stat_of "$A" compaction compacted)
[ "${compacted:-0}" -ge 10 ] || fail "only ${compacted:-0} compactions for 1500 appends"
short() { [ "$(records "$ino")" -le 128 ]; }
wait_until 20 short || fail "$(records "$ino") slice records left after 1500 appends"
ok "1500 appends: $compacted compactions, $(records "$ino") slice records left, the log reads back"

cat <&4 >"$TMP/through-fd"
cmp "$TMP/shadow" "$TMP/through-fd" || fail "the descriptor opened first reads wrong"
exec 4<&-
ok "a descriptor opened before the first append reads every line"

# the packs of the appends go once the compactions' delay is over
before=$(stat_of "$A" packs put)
[ "${before:-0}" -ge 250 ] || fail "only ${before:-0} packs put for 1500 appends"
# what is left: an object or two per record at most
few() { [ "$(count_objects)" -le 160 ]; }
wait_until 30 few || fail "$(count_objects) objects left of the $before packs put"
# from the store, not the page cache: the client's cached slice list may
# still name slices that are gone now; it reads them again
sync
echo 3 >/proc/sys/vm/drop_caches
cmp "$TMP/shadow" "$A/log" || fail "the log reads back wrong after reclamation"
# node B, through the descriptor it kept, from the start: the slices of
# the list it holds are deleted by now; it reads the list again
python3 -c 'import os, sys
os.lseek(5, 0, 0)
sys.stdout.buffer.write(os.read(5, 1 << 24))' >"$TMP/b-all" 5<&5 ||
	fail "node B cannot read the log through the descriptor it kept"
head -c "$(stat -c %s "$TMP/b-first")" "$TMP/shadow" | cmp - "$TMP/b-all" ||
	cmp "$TMP/shadow" "$TMP/b-all" || fail "node B reads the log wrong"
exec 5<&-
ok "node B reads through a descriptor whose slices a compaction replaced and reclamation deleted"
umount_vol "$B"
umount_vol "$A"
mount_vol "$META" "$A"
cmp "$TMP/shadow" "$A/log" || fail "the log reads back wrong after a remount"
umount_vol "$A"
"$GRANARY" gc "$META" --json -q --min-age 0 >"$TMP/gc.json" ||
	fail "granary gc failed"
check_eq "$(jq .leaked "$TMP/gc.json")" 0 "objects leaked"
check_eq "$(jq .live "$TMP/gc.json")" "$(count_objects)" "objects live"
"$GRANARY" fsck "$META" --deep -q >"$TMP/fsck.out" 2>&1 ||
	fail "fsck --deep after compactions: $(cat "$TMP/fsck.out")"
ok "the appends' $before packs came down to $(count_objects) objects; nothing leaked; fsck --deep clean; the log reads back after a remount"

# --- packs: most files of a pack deleted; gc --compact rewrites the packs
# while a reader reads the files left, and the next gc --delete removes
# the old packs while it still reads (--writeback gathers the files closed
# within its pack window into one pack)
mount_vol "$META" "$A" --writeback
mkdir -p "$A/small" "$TMP/small"
for i in $(seq 1 120); do random_file "$TMP/small/f$i" $((2000 + i * 37)); done
cp "$TMP/small/"* "$A/small/"
setfattr -n granary.sync -v 1 "$A/small" # every pack in the store
for i in $(seq 1 120); do
	[ $((i % 4)) = 0 ] && continue
	rm "$A/small/f$i" "$TMP/small/f$i"
done
# wait until reclamation counted the dead frames of every deleted file
# (no deleted file's chunk list left, no dead slice waiting to be handed
# out), not only until one pack is more than half dead: gc --compact
# counts the frames of files not reclaimed yet as live. When cp took over
# the 2 s pack window the files are in two packs or more, and one can be
# more than half dead while the client has yet to reclaim the last
# deletes that make another so (a loaded client does that up to seconds
# later): that pack was left to gc --delete to find more than half dead.
dead_packs() {
	[ "$(rcli zcard delfiles)" = 0 ] && [ "$(rcli llen delslices)" = 0 ] &&
		"$GRANARY" gc "$META" --json -q --min-age 0 >"$TMP/gc2.json" &&
		[ "$(jq .packs_half_dead "$TMP/gc2.json")" -ge 1 ]
}
wait_until 20 dead_packs ||
	fail "no pack more than half dead after deleting 3 files in 4 (delfiles $(rcli zcard delfiles), delslices $(rcli llen delslices))"
(
	while [ ! -e "$TMP/stop-reader" ]; do
		for f in "$TMP/small/"*; do
			cmp -s "$f" "$A/small/$(basename "$f")" || { echo "$f" >"$TMP/reader-failed"; exit 1; }
		done
	done
) &
reader=$!
"$GRANARY" gc "$META" --compact --min-age 0 --json -q >"$TMP/gc3.json" || fail "gc --compact failed"
rewritten=$(jq .packs_rewritten "$TMP/gc3.json")
[ "$rewritten" -ge 1 ] || fail "gc --compact rewrote no pack: $(cat "$TMP/gc3.json")"
"$GRANARY" gc "$META" --delete --min-age 0 --json -q >"$TMP/gc4.json" || fail "gc --delete failed"
deleted=$(jq .deleted "$TMP/gc4.json")
[ "$deleted" -ge "$rewritten" ] || fail "gc --delete removed $deleted objects after $rewritten pack rewrites"
sync
echo 3 >/proc/sys/vm/drop_caches
sleep 1
touch "$TMP/stop-reader"
wait $reader || fail "a read during the pack rewrites went wrong: $(cat "$TMP/reader-failed")"
diff -r "$TMP/small" "$A/small" || fail "the small files differ after the pack rewrites"
umount_vol "$A"
"$GRANARY" fsck "$META" --objects -q >"$TMP/fsck.out" 2>&1 ||
	fail "fsck --objects after the pack rewrites: $(cat "$TMP/fsck.out")"
check_eq "$(jq .packs_half_dead "$TMP/gc4.json")" 0 "packs more than half dead after the rewrites"
ok "$rewritten packs rewritten and the old ones deleted while a reader read the files left; fsck clean"
