#!/bin/bash
# t0196-quota-mount.sh - directory quotas as two mounted clients of one
# volume see them (fs/vfs/quota.c, docs/operations.md "Quotas"): writes
# from both stop with EDQUOT within the documented overshoot, and what
# write() accepted reads back; space freed is usable again; fallocate,
# truncate and cp count; a create past the inode limit is EDQUOT on both;
# mv out of and into the quota moves its usage (EDQUOT into a full one),
# mv of a non-empty directory copies; df of a --subdir mount of the
# directory shows the quota.
. "$(dirname "$0")/lib.sh"

LIM=$((8 << 20)) INODES=50
# one other client's overshoot: a step, the limit / 64 but at least 4 MiB
# (SPACE_STEP_MIN, fs/vfs/space.h)
STEP=$((4 << 20))
new_volume quota
A=$TMP/a B=$TMP/b
mount_vol "$META" "$A"
mount_vol "$META" "$B"
random_file "$TMP/src" $((16 << 20))
mkdir "$A/q" "$A/out"
QINO=$(stat -c %i "$A/q")
"$GRANARY" quota set "$META" --path /q --capacity 8M --inodes $INODES \
	>"$TMP/qset.out" 2>&1 || fail "quota set: $(cat "$TMP/qset.out")"

# usage of the quota on /q as `granary quota get --json` shows it
qjson() { "$GRANARY" quota get "$META" --path /q --json; }
qfield() { qjson | tr -d ' \n' | sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p"; }
used_bytes() { qfield used_space; }
used_inodes() { qfield used_inodes; }
# both clients read the generation about once a second
wait_until 10 quota_seen "$A" "$B" || fail "the clients do not enforce the new quota"

# --- bytes: both clients write at once until refused
dd if="$TMP/src" of="$A/q/fa" bs=1M count=16 2>"$TMP/dd-a.err" &
pa=$!
dd if="$TMP/src" of="$B/q/fb" bs=1M count=16 2>"$TMP/dd-b.err" &
pb=$!
bg_track "$pa $pb"
ra=0 rb=0
wait $pa || ra=$?
wait $pb || rb=$?
BG_PIDS=""
[ "$ra" != 0 ] || fail "dd on A wrote 16 MiB into an 8 MiB quota"
[ "$rb" != 0 ] || fail "dd on B wrote 16 MiB into an 8 MiB quota"
for c in a b; do
	grep -q "Disk quota exceeded" "$TMP/dd-$c.err" ||
		fail "dd on $c did not say 'Disk quota exceeded': $(cat "$TMP/dd-$c.err")"
done
# what dd reports written is what reads back, byte for byte
copied() { sed -n 's/^\([0-9]*\) bytes.*copied.*/\1/p' "$1"; }
sa=$(stat -c %s "$A/q/fa") sb=$(stat -c %s "$B/q/fb")
check_eq "$sa" "$(copied "$TMP/dd-a.err")" "size of fa against what dd on A wrote"
check_eq "$sb" "$(copied "$TMP/dd-b.err")" "size of fb against what dd on B wrote"
cmp -n "$sa" "$TMP/src" "$B/q/fa" || fail "A's bytes do not read back on B"
cmp -n "$sb" "$TMP/src" "$A/q/fb" || fail "B's bytes do not read back on A"
used=$(used_bytes)
echo "  # quota usage $used (A wrote $sa, B wrote $sb) of $LIM"
[ "$used" -le $((LIM + STEP)) ] ||
	fail "usage $used past the limit $LIM by more than one step ($STEP)"
check_eq "$used" $((sa + sb)) "quota usage: the bytes of both files"
check_eq "$(used_inodes)" 2 "quota inodes after two files"
ok "two clients writing at once stop with EDQUOT within one step of the quota"

# the next write fails on both clients (1 MiB: the quota is within a
# FUSE write of full)
expect_errno "Disk quota exceeded" dd if="$TMP/src" of="$A/q/fa" bs=1M count=1 \
	seek=16 conv=notrunc status=none
expect_errno "Disk quota exceeded" dd if="$TMP/src" of="$B/q/fb" bs=1M count=1 \
	seek=16 conv=notrunc status=none
check_eq "$(stat -c %s "$A/q/fa")" "$sa" "fa's size after a refused write"
ok "a full quota refuses the next write on both clients"

# a file outside the quota is not limited by it
dd if="$TMP/src" of="$A/out/big" bs=1M count=12 status=none ||
	fail "a write outside the quota failed"
check_eq "$(used_bytes)" "$used" "quota usage after a write outside it"
ok "writes outside the quota are not counted in it"

# nothing stays published once the writes are over (closed: committed);
# until then a client's pending bytes count for the others (about 2 s)
none_pending() { [ "$(qfield pending)" = 0 ] && [ "$(rcli HLEN "qp$QINO")" = 0 ]; }
wait_until 5 none_pending ||
	fail "pending bytes still published: $(qjson) $(rcli HGETALL "qp$QINO")"
ok "no pending bytes left published after the closes"

# --- freed space is usable again: at once where freed, in ~1 s elsewhere
rm "$A/q/fa" "$A/q/fb"
dd if="$TMP/src" of="$A/q/again" bs=1M count=2 status=none ||
	fail "A cannot write into the quota after freeing space"
sleep 1.2
dd if="$TMP/src" of="$B/q/again-b" bs=1M count=2 status=none ||
	fail "B cannot write into the quota a second after A freed space"
check_eq "$(used_bytes)" $((4 << 20)) "quota usage after rm and two 2 MiB files"
ok "space freed in a quota is usable again from both clients"

# --- fallocate, truncate and cp (a whole-file clone) count too
expect_errno "Disk quota exceeded" fallocate -l 6M "$A/q/fal"
fallocate -l 2M "$A/q/fal" || fail "fallocate of 2 MiB into a quota with room"
check_eq "$(used_bytes)" $((6 << 20)) "quota usage after fallocate"
truncate -s 1M "$A/q/fal"
check_eq "$(used_bytes)" $((5 << 20)) "quota usage after truncate"
rm "$A/q/fal"
head -c $((2 << 20)) "$TMP/src" >"$A/out/small"
cp "$A/out/small" "$A/q/small" || fail "cp of 2 MiB into the quota"
check_eq "$(used_bytes)" $((6 << 20)) "quota usage after cp"
cmp "$A/out/small" "$B/q/small" || fail "the copy differs"
expect_errno "Disk quota exceeded" cp "$A/out/big" "$A/q/big2"
rm -f "$A/q/big2" "$A/q/small" "$A/out/small"
check_eq "$(used_bytes)" $((4 << 20)) "quota usage after the removals"
ok "fallocate, truncate and cp count in the quota; past it: EDQUOT"

# --- inodes: creates stop at the limit, on both clients
n=$(used_inodes) made=0
for i in $(seq 1 $((INODES + 5))); do
	{ : >"$A/q/i$i"; } 2>/dev/null || break
	made=$((made + 1))
done
check_eq "$((n + made))" $INODES "inodes in the quota when a create failed"
expect_errno "Disk quota exceeded" touch "$A/q/one-more"
expect_errno "Disk quota exceeded" touch "$B/q/one-more"
expect_errno "Disk quota exceeded" mkdir "$B/q/dir-more"
check_eq "$(used_inodes)" $INODES "quota inodes at the limit"
rm -f "$A"/q/i*
check_eq "$(used_inodes)" "$n" "quota inodes after the removals"
: >"$B/q/one-more" || fail "create on B after inodes were freed"
rm "$B/q/one-more"
ok "creates past the inode limit are EDQUOT on both clients"

# --- mv out of and into the quota: usage follows; into a full one: EDQUOT
before=$(used_bytes)
mv "$A/q/again" "$A/out/again" || fail "mv out of the quota"
check_eq "$(used_bytes)" $((before - (2 << 20))) "quota usage after mv out"
mv "$A/out/again" "$A/q/again" || fail "mv into the quota"
check_eq "$(used_bytes)" "$before" "quota usage after mv back in"
check_eq "$(used_inodes)" "$n" "quota inodes after mv out and back"
# 12 MiB into a quota of 8 holding 4: refused, the file stays where it was
expect_errno "Disk quota exceeded" mv "$A/out/big" "$A/q/big"
[ -f "$A/out/big" ] && [ ! -e "$A/q/big" ] ||
	fail "a refused mv moved or lost the file"
ok "mv out of and into the quota moves its usage; into a full one: EDQUOT"

# --- mv of a non-empty plain directory across: mv copies (EXDEV)
mkdir -p "$A/out/tree/sub"
head -c 100000 "$TMP/src" >"$A/out/tree/t1"
tail -c 50000 "$TMP/src" >"$A/out/tree/sub/t2"
tree_attrs "$A/out/tree" >"$TMP/tree.before"
bi=$(used_inodes) bb=$(used_bytes)
mv "$A/out/tree" "$A/q/tree" || fail "mv of a directory into the quota"
[ ! -e "$A/out/tree" ] || fail "mv left the source directory"
tree_attrs "$A/q/tree" >"$TMP/tree.after"
diff "$TMP/tree.before" "$TMP/tree.after" >&2 || fail "the tree moved differs"
cmp <(head -c 100000 "$TMP/src") "$B/q/tree/t1" || fail "t1 differs after mv"
cmp <(tail -c 50000 "$TMP/src") "$B/q/tree/sub/t2" || fail "t2 differs after mv"
check_eq "$(used_inodes)" $((bi + 4)) "quota inodes after mv of a 4-inode tree"
check_eq "$(used_bytes)" $((bb + 150000)) "quota usage after mv of the tree"
ok "mv of a non-empty directory into the quota copies it, counted"

# --- df of a --subdir mount of the quota's directory
C=$TMP/c
mount_vol "$META" "$C" --subdir /q
check_eq "$(df -B1 --output=size "$C" | tail -1 | tr -d ' ')" $LIM "df size of the --subdir mount"
check_eq "$(df --output=itotal "$C" | tail -1 | tr -d ' ')" $INODES "df inodes of the --subdir mount"
iu=$(used_inodes)
check_eq "$(df --output=iused "$C" | tail -1 | tr -d ' ')" "$iu" "df used inodes"
ub=$(used_bytes)
check_eq "$(df -B4096 --output=used "$C" | tail -1 | tr -d ' ')" $(((ub + 4095) / 4096)) "df used blocks"
ok "df of a --subdir mount shows the quota"

umount_vol "$C"
umount_vol "$A"
umount_vol "$B"
ok "umount"
