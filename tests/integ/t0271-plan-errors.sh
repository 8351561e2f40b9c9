#!/bin/bash
# storage: file
# t0271-plan-errors.sh - what epoch plans refuse (issue 34), with the
# errno of plan.h: a file the caller may not read (EACCES, the whole add
# refused; `granary plan` names the path and plans nothing, whether it
# adds by sets or by gets), a path that is missing (ENOENT), a directory
# (EISDIR), a malformed path or name (EINVAL), a file on the way
# (ENOTDIR); another user's plan (EPERM) and process (EPERM), a process
# that is not there (ESRCH), a plan that is not (ENOENT), a set of a name
# that is only read (EPERM); no disk cache (ENOTSUP); PLAN_MAX plans
# (ENOSPC); a user sees only their own plans. The CLI's usage errors exit
# 2, its failures 1.
. "$(dirname "$0")/lib.sh"

nobody_volume plerr
# ds: root's, 0755 (nobody may read, not write: the CLI adds by gets);
# ds2: 0777 (nobody may write: the CLI adds by sets)
for d in ds ds2; do
	mkdir -p "$M/pub/$d/sub"
	for i in 1 2 3; do random_file "$M/pub/$d/f$i" 5000; done
	echo private >"$M/pub/$d/private"
	chmod 0600 "$M/pub/$d/private"
	chmod 0644 "$M/pub/$d"/f*
done
chmod 0777 "$M/pub/ds2"
chmod 0755 "$M/pub/ds"
printf 'f1\nf2\nprivate\nf3\n' >"$TMP/list"
chmod 0644 "$TMP/list"

# the process of nobody's the plans live with (the test's shell is root's)
setpriv --reuid=65534 --regid=65534 --clear-groups -- sleep 600 &
NOBODY=$!
bg_track $NOBODY
wait_until 10 grep -q "^Uid:[[:space:]]*65534" "/proc/$NOBODY/status" ||
	fail "the owner process did not become nobody's"
expect_exit 1 "no process of yours" as_nobody "$GRANARY" plan "$M/pub/ds" "$TMP/list"
for d in ds ds2; do
	expect_exit 1 "'private': Permission denied" as_nobody \
		"$GRANARY" plan --owner $NOBODY "$M/pub/$d" "$TMP/list"
	as_nobody "$GRANARY" plan --status --json "$M" >"$TMP/st" ||
		fail "plan --status as nobody"
	grep -q '"plans": \[\]' "$TMP/st" ||
		fail "a refused plan was left behind: $(cat "$TMP/st")"
done
ok "a file the caller may not read: named, 'Permission denied', exit 1, nothing planned"

# the protocol's errors, as nobody
as_nobody /usr/bin/python3 - "$M" <<'EOF' || fail "the errors of the protocol"
import errno, json, os, sys
m = sys.argv[1]
ds = os.path.join(m, "pub", "ds2")
def err(fn, *a):
    try:
        fn(*a)
    except OSError as e:
        return e.errno
    return 0
pid = int(os.getxattr(ds, "granary.plan.new"))
add = "granary.plan.%d.add" % pid
def adding(v):
    return err(os.setxattr, ds, add, v.encode())
def files():
    return json.loads(os.getxattr(m, "granary.plan.%d" % pid))["files"]
os.setxattr(ds, "granary.plan.%d.owner" % pid, str(os.getpid()).encode())
checks = [
    ("private", errno.EACCES),
    ("f1\nprivate", errno.EACCES),
    ("missing", errno.ENOENT),
    ("sub", errno.EISDIR),
    ("f1/x", errno.ENOTDIR),
    ("../ds/f1", errno.EINVAL),
    ("./f1", errno.EINVAL),
    ("/f1", errno.EINVAL),
    ("sub//f1", errno.EINVAL),
    ("f1\n\nf2", errno.EINVAL),
]
for v, want in checks:
    got = adding(v)
    assert got == want, (v, got, want)
assert files() == 0, "a refused add planned something"
assert adding("f1\nf2\n") == 0
assert files() == 2
# the secret directory (root's, 0700): no search permission in it
assert err(os.setxattr, m, "granary.plan.%d.add" % pid,
           b"secret/k2") in (errno.EACCES, errno.EPERM)
names = [("granary.plan.x", errno.EINVAL), ("granary.plan.0", errno.EINVAL),
         ("granary.plan.%d.foo" % pid, errno.EINVAL),
         ("granary.plan.999", errno.ENOENT)]
for n, want in names:
    got = err(os.getxattr, m, n)
    assert got == want, (n, got, want)
for n in ("granary.plan.new", "granary.plans", "granary.plan.%d" % pid):
    got = err(os.setxattr, ds, n, b"")
    assert got == errno.EPERM, (n, got)
own = "granary.plan.%d.owner" % pid
for v, want in (("1", errno.EPERM), ("abc", errno.EINVAL), ("", errno.EINVAL),
                ("2147483000", errno.ESRCH)):
    got = err(os.setxattr, ds, own, v.encode())
    assert got == want, ("owner", v, got, want)
EOF
ok "the protocol's errors: EACCES, ENOENT, EISDIR, ENOTDIR, EINVAL, EPERM, ESRCH; all or nothing"

# another user's plan: root's, seen and touched by root alone
rid=$("$GRANARY" plan "$M/pub/ds" <(echo f1)) || fail "root's plan"
expect_errno "Operation not permitted" \
	as_nobody getfattr -n "granary.plan.$rid" "$M"
expect_exit 1 "another user's" as_nobody "$GRANARY" plan --cancel "$rid" "$M"
expect_exit 1 "another user's" as_nobody \
	"$GRANARY" plan --owner $NOBODY --replace "$rid" "$M/pub/ds" "$TMP/list"
as_nobody "$GRANARY" plan --status --json "$M" | grep -q '"plans": \[\]' ||
	fail "nobody sees root's plan"
"$GRANARY" plan --status --json "$M" | grep -q "\"id\": $rid" ||
	fail "root does not see its own plan"
check_eq "$(getfattr --absolute-names --only-values -n "granary.plan.$rid" "$M" |
	sed -n 's/.*"files": \([0-9]*\).*/\1/p')" 1 "root's plan after nobody's tries"
"$GRANARY" plan --cancel "$rid" "$M" || fail "root cancels its plan"
ok "another user's plan: EPERM to act on, not listed"

# the CLI: usage errors exit 2, failures 1
expect_exit 2 "unrecognized|unknown|bogus" "$GRANARY" plan --bogus "$M" "$TMP/list"
expect_exit 2 "MOUNTPOINT and LIST" "$GRANARY" plan "$M"
expect_exit 2 "plan id" "$GRANARY" plan --cancel x "$M"
expect_exit 2 "plan id" "$GRANARY" plan --replace 0 "$M" "$TMP/list"
expect_exit 2 "do not go together" "$GRANARY" plan --status --cancel 1 "$M"
expect_exit 1 "not on a granary mount" "$GRANARY" plan "$TMP" "$TMP/list"
expect_exit 1 "No such file" "$GRANARY" plan "$M/pub/ds" "$TMP/nolist"
expect_exit 1 "'missing': No such file" \
	"$GRANARY" plan "$M/pub/ds" <(printf 'f1\nmissing\n')
expect_exit 1 "not under the mount point" \
	"$GRANARY" plan "$M/pub/ds" <(echo /etc/passwd)
expect_exit 1 "'\.\.' is not allowed" "$GRANARY" plan "$M/pub/ds" <(echo ../ds/f1)
expect_exit 1 "no process" "$GRANARY" plan --owner 2147483000 "$M/pub/ds" "$TMP/list"
echo f1 >"$TMP/one" && chmod 0644 "$TMP/one"
expect_exit 1 "another user's" as_nobody "$GRANARY" plan --owner 1 "$M/pub/ds" "$TMP/one"
"$GRANARY" plan --status --json "$M" | grep -q '"plans": \[\]' ||
	fail "a failed granary plan left a plan behind"
ok "granary plan: usage errors exit 2, failures exit 1 with the reason, nothing left"

# PLAN_MAX plans at once, then ENOSPC
for i in $(seq 1 64); do
	"$GRANARY" plan "$M/pub/ds" /dev/null >>"$TMP/ids" || fail "plan $i of 64"
done
expect_exit 1 "No space left on device" "$GRANARY" plan "$M/pub/ds" /dev/null
while read -r i; do "$GRANARY" plan --cancel "$i" "$M" || fail "cancel $i"; done <"$TMP/ids"
"$GRANARY" plan "$M/pub/ds" /dev/null >"$TMP/ids" || fail "a plan once the others went"
ok "64 plans at once; the 65th is ENOSPC until one goes"

# no disk cache: no plans
umount_vol "$M"
mount_vol "$META" "$M" --cache-size 0
expect_errno "Operation not supported" getfattr -n granary.plan.new "$M"
expect_exit 1 "no plans there" "$GRANARY" plan "$M" /dev/null
ok "a mount without a disk cache refuses plans (ENOTSUP)"
