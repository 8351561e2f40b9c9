#!/bin/bash
# t0278-plan-gets.sh - a plan made on a --read-only mount (issue 34), where
# the kernel refuses every set: `granary plan` adds each file by a get of
# "granary.plan.ID.add:POS" on the file, from several threads at once, and
# the client appends them in the list's order (each open of the list's
# files, in order, moves the readers' place one further). The protocol of
# the ordered get form: a file for a position past the list's end is held
# (not planned) until the files before it come; a position taken is
# EEXIST, a malformed one EINVAL, one too far past the end EAGAIN. A path
# that fails fails the plan, named, and nothing stays planned (t0271 has
# the permission refused, through the same gets).
. "$(dirname "$0")/lib.sh"

new_volume pgets
M=$TMP/mnt
mount_vol "$META" "$M"
N=400
mkdir -p "$M/ds"
for d in 0 1 2 3; do mkdir "$M/ds/d$d"; done
for i in $(seq 0 $((N - 1))); do
	random_file "$M/ds/d$((i % 4))/f$i" $((1000 + i * 13))
done
umount_vol "$M"
mount_vol "$META" "$M" --read-only

# field ID NAME: a figure of plan ID (granary.plan.ID)
field() {
	getfattr --absolute-names --only-values -n "granary.plan.$1" "$M" |
		sed -n "s/.*\"$2\": \([0-9-]*\).*/\1/p"
}

# a shuffled order of the N files
for i in $(seq 0 $((N - 1))); do echo "d$((i % 4))/f$i"; done |
	awk 'BEGIN { srand(278) } { print rand() "\t" $0 }' | sort -n |
	cut -f2 >"$TMP/order"
id=$("$GRANARY" plan "$M/ds" "$TMP/order") ||
	fail "granary plan on a read-only mount: exit $?"
check_eq "$(field "$id" files)" "$N" "files planned"
# each open of the list's next file moves the place one further: the
# plan holds the list's order, not the order the gets arrived in
python3 - "$M" "$M/ds" "$id" "$TMP/order" <<'EOF' || fail "the plan's order is not the list's"
import json, os, sys
m, ds, pid, order = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
paths = open(order).read().split()
for i, p in enumerate(paths):
    os.close(os.open(os.path.join(ds, p), os.O_RDONLY))
    info = json.loads(os.getxattr(m, "granary.plan.%d" % pid).rstrip(b"\0"))
    if info["place"] != i + 1:
        sys.exit("after opening file %d of the list (%s) the place is %d"
                 % (i, p, info["place"]))
EOF
ok "granary plan on a read-only mount: $N files by gets, in the list's order"

# --replace the same way: the next epoch's order
tac "$TMP/order" >"$TMP/order2"
check_eq "$("$GRANARY" plan --replace "$id" "$M/ds" "$TMP/order2")" "$id" \
	"plan --replace printed"
check_eq "$(field "$id" files)" "$N" "files after --replace"
check_eq "$(field "$id" place)" 0 "the place after --replace"
first=$(head -1 "$TMP/order2")
cat "$M/ds/$first" >/dev/null
check_eq "$(field "$id" place)" 1 "the place after the new order's first file"
"$GRANARY" plan --cancel "$id" "$M" || fail "plan --cancel"
ok "plan --replace on a read-only mount: the new order"

# the ordered get form by hand
id=$("$GRANARY" plan "$M/ds" /dev/null) || fail "an empty plan: exit $?"
add() { getfattr --absolute-names --only-values -n "granary.plan.$id.add:$2" "$M/ds/$1"; }
check_eq "$(add d1/f1 1)" 0 "files after a get for position 1 (held)"
check_eq "$(field "$id" files)" 0 "files with position 0 missing"
expect_errno "File exists" add d1/f5 1
expect_errno "Invalid argument" add d1/f5 01
expect_errno "Invalid argument" add d1/f5 x
expect_errno "Resource temporarily unavailable" add d1/f5 100000
check_eq "$(add d0/f0 0)" 2 "files once position 0 came"
expect_errno "File exists" add d0/f4 0
cat "$M/ds/d0/f0" >/dev/null
cat "$M/ds/d1/f1" >/dev/null
check_eq "$(field "$id" place)" 2 "the place after opening positions 0 and 1"
"$GRANARY" plan --cancel "$id" "$M" || fail "plan --cancel"
ok "the ordered get form: held past the end, EEXIST, EINVAL, EAGAIN"

# a path of the list that fails (a directory), among gets in flight from
# several threads: named, and nothing stays planned
{ head -200 "$TMP/order"; echo d2; tail -n +201 "$TMP/order"; } >"$TMP/order3"
expect_exit 1 "'d2': Is a directory" "$GRANARY" plan "$M/ds" "$TMP/order3"
check_eq "$(getfattr --absolute-names --only-values -n granary.plans "$M")" \
	'{"plans": []}' "the plans after the refused one"
ok "a path that fails among the gets: named, nothing planned"
