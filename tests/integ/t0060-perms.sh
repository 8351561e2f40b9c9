#!/bin/bash
# t0060-perms.sh - permission checks as a non-root user (uid 65534) on a
# mount with --allow-other: the kernel enforces modes (default_permissions)
# and the errno texts are the ones users know.
. "$(dirname "$0")/lib.sh"

chmod 0755 "$TMP" # nobody must reach the mount point
new_volume perms
M=$TMP/mnt
mount_vol "$META" "$M" --allow-other
chmod 0755 "$M"
echo secret >"$M/rootfile" && chmod 0644 "$M/rootfile"
echo private >"$M/private" && chmod 0600 "$M/private"
mkdir "$M/rootdir" && chmod 0755 "$M/rootdir"
mkdir "$M/open" && chmod 0777 "$M/open"
mkdir "$M/tmp" && chmod 1777 "$M/tmp"
echo root >"$M/tmp/rootowned" && chmod 0666 "$M/tmp/rootowned"

check_eq "$(as_nobody cat "$M/rootfile")" secret "nobody reads a 0644 file"
expect_errno "Permission denied" as_nobody sh -c "echo x >'$M/rootfile'"
check_eq "$(cat "$M/rootfile")" secret "content after a refused write"
expect_errno "Permission denied" as_nobody cat "$M/private"
expect_errno "Permission denied" as_nobody truncate -s 0 "$M/rootfile"
ok "nobody: reads 0644, cannot write it, cannot read 0600"

expect_errno "Permission denied" as_nobody touch "$M/rootdir/new"
expect_errno "Permission denied" as_nobody mkdir "$M/rootdir/newdir"
expect_errno "Permission denied" as_nobody rm -f "$M/rootfile"
[ ! -e "$M/rootdir/new" ] || fail "a refused create left a file"
as_nobody sh -c "echo mine >'$M/open/new'" || fail "nobody cannot create in a 0777 dir"
check_eq "$(stat -c %u:%g "$M/open/new")" 65534:65534 "owner of a file nobody created"
as_nobody mkdir "$M/open/d" || fail "nobody cannot mkdir in a 0777 dir"
check_eq "$(stat -c %u:%g "$M/open/d")" 65534:65534 "owner of a dir nobody made"
ok "create refused in a 0755 root dir, allowed in a 0777 dir, owned by the creator"

expect_errno "Operation not permitted" as_nobody rm -f "$M/tmp/rootowned"
[ -e "$M/tmp/rootowned" ] || fail "nobody deleted root's file in a sticky dir"
expect_errno "Operation not permitted" as_nobody mv "$M/tmp/rootowned" "$M/tmp/stolen"
as_nobody touch "$M/tmp/mine" || fail "nobody cannot create in a 1777 dir"
as_nobody rm "$M/tmp/mine" || fail "nobody cannot delete its own file in a 1777 dir"
[ ! -e "$M/tmp/mine" ] || fail "own file still there after rm"
ok "sticky dir: cannot delete another user's file, can delete own"

expect_errno "Operation not permitted" as_nobody chmod 0777 "$M/rootfile"
check_eq "$(stat -c %a "$M/rootfile")" 644 "mode after a refused chmod"
expect_errno "Operation not permitted" as_nobody chown 65534 "$M/rootfile"
expect_errno "Operation not permitted" as_nobody chown 0 "$M/open/new"
as_nobody chmod 0600 "$M/open/new" || fail "owner cannot chmod its own file"
check_eq "$(stat -c %a "$M/open/new")" 600 "mode after the owner's chmod"
# setting explicit times needs ownership, "now" needs only write access
expect_errno "Operation not permitted" as_nobody touch -d '2001-01-01' "$M/tmp/rootowned"
as_nobody touch "$M/tmp/rootowned" || fail "nobody cannot touch a 0666 file"
ok "chmod/chown/utimes by a non-owner refused"

# a write drops file capabilities (the kernel asks for them first); also on
# a file just created, whose lack of them the client answers by itself
printf x >"$M/capfile"
setfattr -n security.capability -v 0x0000000200000000000000000000000000000000 "$M/capfile" ||
	fail "cannot set security.capability"
getfattr -n security.capability "$M/capfile" >/dev/null 2>&1 || fail "capability not set"
printf y >>"$M/capfile"
expect_errno "No such attribute" getfattr -n security.capability "$M/capfile"
check_eq "$(cat "$M/capfile")" xy "content after the capability was dropped"
ok "a write to a new file drops the capability set on it"

# A write-only open writes past the page cache only when the file had no
# capability and no set-id bit; one given to the file while such an open
# writes is dropped by its next write, as the kernel would.
printf x >"$M/open/wo"
chown 65534:65534 "$M/open/wo"
chmod 0755 "$M/open/wo"
as_nobody /usr/bin/python3 - "$M/open/wo" <<'EOF_PY' || fail "set-id bits given during a write-only open survived a write"
import os, stat, sys
p = sys.argv[1]
w = os.open(p, os.O_WRONLY | os.O_APPEND)
os.chmod(p, 0o6755)
if not os.stat(p).st_mode & stat.S_ISUID:
    sys.exit("chmod u+s did not take")
os.write(w, b"y")
os.close(w)
m = os.stat(p).st_mode
if m & (stat.S_ISUID | stat.S_ISGID):
    sys.exit("mode %o after the write" % m)
EOF_PY
python3 - "$M/capfile" <<'EOF_PY' || fail "a capability set during a write-only open survived a write"
import os, subprocess, sys
p = sys.argv[1]
w = os.open(p, os.O_WRONLY | os.O_APPEND)
subprocess.run(["setfattr", "-n", "security.capability", "-v",
                "0x0000000200000000000000000000000000000000", p], check=True)
os.write(w, b"z")
os.close(w)
r = subprocess.run(["getfattr", "-n", "security.capability", p],
                   capture_output=True)
if r.returncode == 0:
    sys.exit("the capability is still set")
EOF_PY
check_eq "$(cat "$M/capfile")" xyz "content after a write-only open dropped the capability"
check_eq "$(cat "$M/open/wo")" xy "content after a write-only open dropped the set-id bits"
ok "a write through a write-only open drops set-id bits and capabilities given meanwhile"

# without --allow-other other users cannot enter the mount at all
M2=$TMP/mnt2
mount_vol "$META" "$M2"
chmod 0755 "$M2"
expect_errno "Permission denied" as_nobody ls "$M2"
ok "without --allow-other, other users are refused"
umount_vol "$M2"
umount_vol "$M"
