#!/bin/bash
# t0279-plan-batch.sh - the batch get form of a plan's add on a
# --read-only mount (issue 34): a get on a directory of
# "granary.plan.ID.add:POS:PATHS" adds the files of PATHS (one a line,
# below the directory, the caller's permissions checked on the way) for
# positions POS, POS + 1, ..., all or none; `granary plan` sends as many
# paths a get as the name holds, and falls back to a get on each file of
# a batch refused (a symbolic link, which the client's lookups do not
# follow, is planned as its target; a file the caller may not read is
# named, and nothing stays planned).
. "$(dirname "$0")/lib.sh"

nobody_volume pbatch
N=120
mkdir -p "$M/pub/ds/sub"
for i in $(seq 0 $((N - 1))); do random_file "$M/pub/ds/f$i" $((2000 + i * 7)); done
echo private >"$M/pub/ds/private"
chmod 0600 "$M/pub/ds/private"
chmod 0644 "$M/pub/ds"/f*
chmod 0755 "$M/pub/ds"
ln -s f7 "$M/pub/ds/link"
umount_vol "$M"
mount_vol "$META" "$M" --read-only --allow-other
DS=$M/pub/ds

# the protocol, as nobody
as_nobody /usr/bin/python3 - "$M" "$DS" <<'EOF' || fail "the batch get form"
import errno, json, os, sys
m, ds = sys.argv[1], sys.argv[2]
pid = int(os.getxattr(ds, "granary.plan.new"))
os.getxattr(ds, "granary.plan.%d.owner:%d" % (pid, os.getpid()))
def add(pos, *paths):
    n = "granary.plan.%d.add:%s:%s" % (pid, pos, "\n".join(paths))
    try:
        return int(os.getxattr(ds, n).rstrip(b"\0"))
    except OSError as e:
        return -e.errno
def info():
    return json.loads(os.getxattr(m, "granary.plan.%d" % pid).rstrip(b"\0"))
assert add(0, "f0", "f1", "sub/../f2") == -errno.EINVAL
assert info()["files"] == 0, "a refused batch planned something"
assert add(0, "f0", "f1") == 2
checks = [
    ((2, "f2", "private"), errno.EACCES),
    ((2, "f2", "missing"), errno.ENOENT),
    ((2, "f2", "sub"), errno.EISDIR),
    ((2, "f2", "link"), errno.EINVAL),
    ((2, "../ds/f2"), errno.EINVAL),
    ((1, "f2", "f3"), errno.EEXIST),
    (("x", "f2"), errno.EINVAL),
    ((100000, "f2"), errno.EAGAIN),
]
for a, want in checks:
    got = add(*a)
    assert got == -want, (a, got, -want)
assert info()["files"] == 2, "a refused batch planned something"
# held past the end until position 2 comes, then all in order
assert add(4, "f4", "f5") == 2
assert add(2, "f2", "f3") == 6
for i in range(6):
    os.close(os.open(os.path.join(ds, "f%d" % i), os.O_RDONLY))
    assert info()["place"] == i + 1, ("place", i, info()["place"])
os.getxattr(ds, "granary.plan.%d.cancel" % pid)
EOF
ok "the batch get form: all or none, EACCES, ENOENT, EISDIR, EINVAL, EEXIST, EAGAIN, held past the end"

# granary plan: the list's order, by batches
for i in $(seq 0 $((N - 1))); do echo "f$i"; done |
	awk 'BEGIN { srand(279) } { print rand() "\t" $0 }' | sort -n |
	cut -f2 >"$TMP/order"
id=$("$GRANARY" plan "$DS" "$TMP/order") || fail "granary plan: exit $?"
python3 - "$M" "$DS" "$id" "$TMP/order" <<'EOF' || fail "the plan's order is not the list's"
import json, os, sys
m, ds, pid, order = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
paths = open(order).read().split()
info = json.loads(os.getxattr(m, "granary.plan.%d" % pid).rstrip(b"\0"))
assert info["files"] == len(paths), info
for i, p in enumerate(paths):
    os.close(os.open(os.path.join(ds, p), os.O_RDONLY))
    info = json.loads(os.getxattr(m, "granary.plan.%d" % pid).rstrip(b"\0"))
    if info["place"] != i + 1:
        sys.exit("after opening file %d of the list (%s) the place is %d"
                 % (i, p, info["place"]))
EOF
"$GRANARY" plan --cancel "$id" "$M" || fail "plan --cancel"
ok "granary plan on a read-only mount: $N files by batches, in the list's order"

# a symbolic link in the list: its batch refused, each file of it added by
# a get on itself (the kernel follows the link)
{ head -50 "$TMP/order"; echo link; tail -n +51 "$TMP/order"; } >"$TMP/order2"
id=$("$GRANARY" plan "$DS" "$TMP/order2") || fail "granary plan with a link: exit $?"
check_eq "$(getfattr --absolute-names --only-values -n "granary.plan.$id" "$M" |
	sed -n 's/.*"files": \([0-9]*\).*/\1/p')" $((N + 1)) "files planned with a link"
"$GRANARY" plan --cancel "$id" "$M" || fail "plan --cancel"
ok "a symbolic link in the list: planned by a get on itself"

# a file nobody may read, among batches: named, nothing planned
setpriv --reuid=65534 --regid=65534 --clear-groups -- sleep 600 &
NOBODY=$!
bg_track $NOBODY
wait_until 10 grep -q "^Uid:[[:space:]]*65534" "/proc/$NOBODY/status" ||
	fail "the owner process did not become nobody's"
{ head -60 "$TMP/order"; echo private; tail -n +61 "$TMP/order"; } >"$TMP/order3"
chmod 0644 "$TMP/order3"
expect_exit 1 "'private': Permission denied" as_nobody \
	"$GRANARY" plan --owner $NOBODY "$DS" "$TMP/order3"
as_nobody "$GRANARY" plan --status --json "$M" >"$TMP/st" || fail "plan --status"
grep -q '"plans": \[\]' "$TMP/st" || fail "a refused plan was left behind: $(cat "$TMP/st")"
ok "a file the caller may not read among batches: named, nothing planned"
