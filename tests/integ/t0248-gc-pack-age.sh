#!/bin/bash
# storage: file
# t0248-gc-pack-age.sh - `granary gc --compact` rewrites packs that are
# old and mostly dead; the old pack, referenced by nothing afterwards, is
# kept for --min-age counted from the rewrite (it was counted from its
# upload: the next gc --delete deleted it at once). A reader that opened
# the files before the rewrite reads them right afterwards, from the old
# records, without "missing from pack" in its log. File storage: the
# test makes the packs two hours old by their files' times.
. "$(dirname "$0")/lib.sh"

new_volume pa
A=$TMP/a R=$TMP/r
mount_vol "$META" "$A" --writeback
mkdir -p "$A/small" "$TMP/small"
for i in $(seq 1 60); do random_file "$TMP/small/f$i" $((30000 + i * 97)); done
cp "$TMP/small/"* "$A/small/"
setfattr -n granary.sync -v 1 "$A/small" # every pack in the store
for i in $(seq 1 60); do
	[ $((i % 4)) = 0 ] && continue
	rm "$A/small/f$i" "$TMP/small/f$i"
done
dead_packs() {
	"$GRANARY" gc "$META" --json -q >"$TMP/gc0.json" &&
		[ "$(jq .packs_half_dead "$TMP/gc0.json")" -ge 1 ]
}
wait_until 20 dead_packs || fail "no pack more than half dead after deleting 3 files in 4"
umount_vol "$A"
# the packs were uploaded two hours ago, as far as gc can tell
# shellcheck disable=SC2086
find $DATA_DIRS -type f -path '*/packs/*' -exec touch -d '2 hours ago' {} +

# the reader: no disk cache, a memory cache smaller than the files; it
# reads every file (the client keeps their slice lists), waits, then reads
# them again through the same descriptors
mount_vol "$META" "$R" --cache-size 0 --cache-mem 256K
cat >"$TMP/reader.py" <<'PY'
import os, sys, time
src, mnt, ready, go = sys.argv[1:5]
names = sorted(os.listdir(src))
fds = {n: os.open(os.path.join(mnt, n), os.O_RDONLY) for n in names}
def check(when):
    for n in names:
        want = open(os.path.join(src, n), 'rb').read()
        got = os.pread(fds[n], len(want) + 1, 0)
        if got != want:
            sys.exit('%s: %s reads %d bytes, not its %d' % (when, n, len(got), len(want)))
check('before')
open(ready, 'w').close()
while not os.path.exists(go):
    time.sleep(0.05)
check('after')
PY
python3 "$TMP/reader.py" "$TMP/small" "$R/small" "$TMP/ready" "$TMP/go" &
reader=$!
wait_until 30 test -e "$TMP/ready" || fail "the reader did not get ready"

"$GRANARY" gc "$META" --compact --json -q >"$TMP/gc1.json" || fail "gc --compact: $(cat "$TMP/gc1.json")"
rewritten=$(jq .packs_rewritten "$TMP/gc1.json")
[ "$rewritten" -ge 1 ] || fail "gc --compact rewrote no pack: $(cat "$TMP/gc1.json")"
"$GRANARY" gc "$META" --delete --json -q >"$TMP/gc2.json" || fail "gc --delete: $(cat "$TMP/gc2.json")"
check_eq "$(jq .deleted "$TMP/gc2.json")" 0 "objects gc --delete removed right after the rewrite"
check_eq "$(jq .retired "$TMP/gc2.json")" "$rewritten" "rewritten packs kept for --min-age"
sync
echo 3 >/proc/sys/vm/drop_caches
touch "$TMP/go"
wait $reader || fail "the reader that opened before the rewrite read wrong"
grep -q "missing from pack" "$TMP/log-r.log" &&
	fail "the reader missed the old packs: $(grep -m 3 "missing from pack" "$TMP/log-r.log")"
umount_vol "$R"
ok "gc --compact rewrote $rewritten old packs; gc --delete keeps them --min-age from the rewrite; a reader of the old records reads right, nothing missing"

# --min-age 0: they go now; the files read from the new packs
"$GRANARY" gc "$META" --delete --min-age 0 --json -q >"$TMP/gc3.json" ||
	fail "gc --delete --min-age 0: $(cat "$TMP/gc3.json")"
[ "$(jq .deleted "$TMP/gc3.json")" -ge "$rewritten" ] ||
	fail "gc --delete --min-age 0 removed $(jq .deleted "$TMP/gc3.json") of $rewritten old packs"
"$GRANARY" gc "$META" --json -q >"$TMP/gc4.json" || fail "gc: $(cat "$TMP/gc4.json")"
check_eq "$(jq .retired "$TMP/gc4.json")" 0 "retired packs left"
mount_vol "$META" "$R"
diff -r "$TMP/small" "$R/small" || fail "the files differ after the old packs went"
umount_vol "$R"
"$GRANARY" fsck "$META" --objects -q >"$TMP/fsck.out" 2>&1 ||
	fail "fsck --objects: $(cat "$TMP/fsck.out")"
ok "with --min-age 0 the old packs go; the files read back; fsck --objects clean"
