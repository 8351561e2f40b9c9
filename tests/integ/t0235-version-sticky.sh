#!/bin/bash
# storage: file
# t0235-version-sticky.sh - `granary version rm` in a sticky directory
# (1777, as /tmp) follows unlink(2)'s rule there: only the owner of the
# version, the owner of the directory or root may delete it; anyone else
# gets EPERM, exit 1 and a hint, and the version stays. Outside a sticky
# directory write permission is still enough.
. "$(dirname "$0")/lib.sh"

nobody_volume vsticky
as_user() { # as_user UID CMD...: another user than nobody
	local u=$1; shift
	setpriv --reuid="$u" --regid="$u" --clear-groups -- "$@"
}
T=$M/tmp
mkdir "$T" && chmod 1777 "$T"
echo data >"$T/f" && chmod 0644 "$T/f"

# --- root's version: nobody may not delete it, root may
"$GRANARY" version create "$T" byroot -q
as_nobody "$GRANARY" version create "$T" bynobody -q ||
	fail "nobody cannot make a version of a 1777 directory it can read"
expect_exit 1 "operation not permitted" \
	as_nobody "$GRANARY" version rm "$T" byroot
grep -q "only the owner of the version" "$TMP/expect.err" ||
	fail "no hint on the sticky rule: $(cat "$TMP/expect.err")"
[ -d "$T/.versions/byroot" ] || fail "root's version is gone after nobody's rm"
check_eq "$(cat "$T/.versions/byroot/f")" data "root's version after the refusal"
ok "nobody cannot delete root's version in a 1777 directory (EPERM)"

# --- a third user may not delete nobody's version; nobody may
expect_exit 1 "operation not permitted" \
	as_user 1000 "$GRANARY" version rm "$T" bynobody
[ -d "$T/.versions/bynobody" ] || fail "nobody's version is gone after uid 1000's rm"
as_nobody "$GRANARY" version rm "$T" bynobody -q ||
	fail "nobody cannot delete its own version: $(cat "$TMP/expect.err")"
[ ! -e "$T/.versions/bynobody" ] || fail "nobody's version is still there"
ok "the owner of a version deletes it, another user cannot"

# --- the owner of the directory may delete any version in it
D=$M/owned
mkdir "$D" && chmod 1777 "$D" && chown 1000:1000 "$D"
echo x >"$D/g" && chmod 0644 "$D/g"
as_nobody "$GRANARY" version create "$D" v1 -q
as_user 1000 "$GRANARY" version rm "$D" v1 -q ||
	fail "the owner of the directory cannot delete nobody's version"
[ ! -e "$D/.versions/v1" ] || fail "v1 is still there"
"$GRANARY" version rm "$T" byroot -q || fail "root cannot delete its version"
ok "the owner of the directory and root delete any version"

# --- without the sticky bit, write permission is enough (as before)
chmod 0777 "$T"
"$GRANARY" version create "$T" again -q
as_nobody "$GRANARY" version rm "$T" again -q ||
	fail "nobody cannot delete a version of a 0777 directory"
ok "without the sticky bit write permission is enough"
