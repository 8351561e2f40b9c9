#!/bin/bash
# storage: file
# t0236-system-xattrs.sh - system.* xattrs get ext4's rules (the kernel
# leaves the namespace to the file system): granary knows no system.*
# name, so any set is refused with EOPNOTSUPP (no POSIX ACLs); a system.*
# name an older granary stored is still read by anyone, and removed only
# by the owner of the file or root (EPERM otherwise). user.*, trusted.*
# and security.* keep the kernel's rules.
. "$(dirname "$0")/lib.sh"

nobody_volume sysx
F=$M/pub/rootf
echo r >"$F" && chmod 0666 "$F"
G=$M/pub/nobf
as_nobody sh -c "echo n >'$G'"
# a system.* name as a granary that took any name stored it, there before
# the reads: the mount that made the file knows it without xattrs for the
# attribute timeout (1 s; a change from elsewhere shows after it), so the
# reads wait that out once
legacy() { rcli hset "x$(stat -c %i "$1")" system.old legacyvalue >/dev/null; }

# --- no system.* name can be set, by anyone, on any file
expect_errno "Operation not supported" as_nobody setfattr -n system.foo -v x "$F"
expect_errno "Operation not supported" as_nobody setfattr -n system.foo -v x "$G"
expect_errno "Operation not supported" setfattr -n system.foo -v x "$F"
expect_errno "Operation not supported" setfattr -n system.posix_acl_access \
	-v 0x0200000001000600ffffffff04000400ffffffff20000400ffffffff "$F"
getfattr --absolute-names -d -m - "$F" >"$TMP/attrs" 2>&1
! grep -q '^system\.' "$TMP/attrs" || fail "a system.* name was stored: $(cat "$TMP/attrs")"
ok "a set of a system.* name is EOPNOTSUPP for everyone"

# --- a stored one: read by anyone, removed by the owner or root only
legacy "$F"
legacy "$G"
sleep 1.1
check_eq "$(as_nobody getfattr --absolute-names --only-values -n system.old "$F")" \
	legacyvalue "nobody reading root's stored system.old"
expect_errno "Operation not permitted" as_nobody setfattr -x system.old "$F"
check_eq "$(getfattr --absolute-names --only-values -n system.old "$F")" \
	legacyvalue "root's system.old after nobody's removal"
as_nobody setfattr -x system.old "$G" ||
	fail "nobody cannot remove a system.* name of its own file"
expect_errno "No such attribute" getfattr --absolute-names -n system.old "$G"
setfattr -x system.old "$F" || fail "root cannot remove system.old"
expect_errno "No such attribute" getfattr --absolute-names -n system.old "$F"
expect_errno "Operation not permitted" as_nobody setfattr -x system.absent "$F"
ok "a stored system.* name is removed by the owner or root only (EPERM)"

# --- the other namespaces keep the kernel's rules
as_nobody setfattr -n user.a -v 1 "$F" || fail "nobody cannot set user.a on a 0666 file"
chmod 0644 "$F"
expect_errno "Permission denied" as_nobody setfattr -n user.b -v 1 "$F"
expect_errno "Operation not permitted" as_nobody setfattr -n trusted.t -v 1 "$G"
setfattr -n trusted.t -v 1 "$F" || fail "root cannot set trusted.t"
mkdir "$M/sticky" && chmod 1777 "$M/sticky"
expect_errno "Operation not permitted" as_nobody setfattr -n user.s -v 1 "$M/sticky"
ok "user.* and trusted.* follow the kernel's rules"
