#!/bin/bash
# t0270-plan.sh - epoch plans (issue 34): `granary plan` hands a mount the
# order a job will read its files in (paths relative to the directory
# named, or absolute under it); a cold shuffled epoch of the planned
# dataset then finds every file fetched ahead (the plan's "ready" count,
# and no store GET during the reads) and every byte right. The list is
# replaced for the next epoch (--replace: the readers' place back at its
# start) and the plan cancelled. The protocol, spoken from Python without
# a library, says the same; on a read-only mount, where the kernel refuses
# every set, the CLI plans through gets.
. "$(dirname "$0")/lib.sh"

new_volume plan
M=$TMP/mnt
mount_vol "$META" "$M"
mkdir -p "$M/ds/a" "$M/ds/b"
N=60
# small files (packed: several share a pack) and bigger ones (blocks)
for i in $(seq 1 $((N / 2))); do
	random_file "$M/ds/a/s$i" $((2000 + i * 37))
	random_file "$M/ds/b/m$i" $((300000 + i * 1001))
done
TOTAL=$(cat "$M"/ds/a/* "$M"/ds/b/* | wc -c)
umount_vol "$M"
# a cold node: an empty disk cache of its own
rm -rf "$TMP/cache-mnt"
mount_vol "$META" "$M"

# the epoch's order: shuffled; every other path absolute
(cd "$M/ds" && ls a/* b/*) | shuf >"$TMP/order"
awk -v d="$M/ds" 'NR % 2 { print d "/" $0; next } { print }' "$TMP/order" \
	>"$TMP/list"
id=$("$GRANARY" plan "$M/ds" "$TMP/list") || fail "granary plan: exit $?"
case $id in '' | *[!0-9]*) fail "granary plan printed '$id', not an id" ;; esac

# field ID NAME: a figure of plan ID (granary.plan.ID)
field() {
	getfattr --absolute-names --only-values -n "granary.plan.$1" "$M" |
		sed -n "s/.*\"$2\": \([0-9-]*\).*/\1/p"
}
check_eq "$(field "$id" files)" "$N" "files in plan $id"
check_eq "$(field "$id" pid)" "$$" "the plan's owner (the shell that ran it)"
"$GRANARY" plan --status "$M/ds" >"$TMP/status" || fail "plan --status"
grep -Eq "^$id +0 +$$ +$N +0 " "$TMP/status" ||
	fail "plan --status: $(cat "$TMP/status")"
"$GRANARY" plan --status --json "$M" "$id" | grep -q "\"files\": $N" ||
	fail "plan --status --json $id"
ok "granary plan made plan $id of $N files, owned by the shell"

# field_is ID NAME VALUE (for wait_until)
field_is() { test "$(field "$1" "$2")" = "$3"; }
wait_until 60 field_is "$id" ahead "$TOTAL" ||
	fail "plan $id fetched $(field "$id" ahead) of $TOTAL bytes ahead"
ok "the window holds the whole dataset: $TOTAL bytes fetched ahead"

# the epoch, in the plan's order, as a cold shuffled read would go
g0=$(stat_of "$M" store gets)
while read -r f; do
	(cd "$M/ds" && md5sum "$f")
done <"$TMP/order" >"$TMP/read-sums"
g1=$(stat_of "$M" store gets)
check_eq "$((g1 - g0))" 0 "store GETs while reading the planned epoch"
check_eq "$(field "$id" ready)" "$N" "opens that found their file ready"
check_eq "$(field "$id" waited)" 0 "opens that waited on the store"
check_eq "$(field "$id" place)" "$N" "the readers' place"
check_eq "$(field "$id" used)" "$TOTAL" "bytes fetched ahead and used"
(cd "$M/ds" && md5sum a/* b/*) | sort >"$TMP/sums"
sort "$TMP/read-sums" | cmp -s - "$TMP/sums" ||
	fail "the bytes read differ from what was written"
ok "a cold shuffled epoch: $N files ready, no store GET, every byte right"

# the next epoch: another order; the place back at its start
shuf "$TMP/order" | head -n 20 >"$TMP/order2"
out=$("$GRANARY" plan --replace "$id" "$M/ds" "$TMP/order2") ||
	fail "plan --replace: exit $?"
check_eq "$out" "$id" "plan --replace prints the id"
check_eq "$(field "$id" files)" 20 "files after --replace"
check_eq "$(field "$id" place)" 0 "the place after --replace"
cat "$M/ds/$(head -n 1 "$TMP/order2")" >/dev/null
check_eq "$(field "$id" place)" 1 "the place after the new list's first open"
ok "--replace: the next epoch's list, followed from its start"

"$GRANARY" plan --cancel "$id" "$M" || fail "plan --cancel: exit $?"
expect_exit 1 "no plan $id" "$GRANARY" plan --cancel "$id" "$M"
expect_errno "No such file" getfattr -n "granary.plan.$id" "$M"
expect_exit 1 "no plan $id" "$GRANARY" plan --status "$M" "$id"
ok "--cancel: plan $id is gone"

# the protocol from a language without a library: new, owner, add, the
# figures, clear, cancel
python3 - "$M" <<'EOF' || fail "the xattr protocol from Python"
import json, os, sys
m = sys.argv[1]
ds = os.path.join(m, "ds")
pid = int(os.getxattr(ds, "granary.plan.new"))
os.setxattr(ds, "granary.plan.%d.owner" % pid, str(os.getpid()).encode())
paths = sorted("a/" + f for f in os.listdir(os.path.join(ds, "a")))
os.setxattr(ds, "granary.plan.%d.add" % pid, "\n".join(paths[:10]).encode())
os.setxattr(ds, "granary.plan.%d.add" % pid,
            ("\n".join(paths[10:]) + "\n").encode())
info = json.loads(os.getxattr(m, "granary.plan.%d" % pid))
assert info["files"] == len(paths), info
assert info["pid"] == os.getpid(), info
mine = json.loads(os.getxattr(m, "granary.plans"))["plans"]
assert [p["id"] for p in mine] == [pid], mine
with open(os.path.join(ds, paths[3]), "rb") as f:
    f.read()
info = json.loads(os.getxattr(m, "granary.plan.%d" % pid))
assert info["place"] == 4, info
os.setxattr(ds, "granary.plan.%d.clear" % pid, b"")
info = json.loads(os.getxattr(m, "granary.plan.%d" % pid))
assert info["files"] == 0 and info["place"] == 0, info
os.setxattr(ds, "granary.plan.%d.cancel" % pid, b"")
try:
    os.getxattr(m, "granary.plan.%d" % pid)
    sys.exit("the plan outlived its cancel")
except OSError as e:
    assert e.errno == 2, e
EOF
ok "the xattr protocol from Python: new, owner, add, figures, clear, cancel"

# a read-only mount: sets are the kernel's EROFS; the CLI plans by gets
umount_vol "$M"
mount_vol "$META" "$M" --read-only
id=$("$GRANARY" plan "$M/ds" "$TMP/list") ||
	fail "granary plan on a read-only mount: exit $?"
check_eq "$(field "$id" files)" "$N" "files planned on a read-only mount"
expect_errno "Read-only file system" \
	setfattr -n "granary.plan.$id.add" -v a/s1 "$M/ds"
# a get of size 0 (getfattr's probe first) adds nothing twice
getfattr -n "granary.plan.$id.add" "$M/ds/a/s1" >/dev/null ||
	fail "the get form of add"
check_eq "$(field "$id" files)" "$((N + 1))" "files after one get of add"
"$GRANARY" plan --cancel "$id" "$M" || fail "plan --cancel on a read-only mount"
ok "a read-only mount: planned through gets (a set is EROFS)"
