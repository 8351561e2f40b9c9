#!/bin/bash
# storage: file
# t0238-listing-escapes.sh - names in the text output of the listings
# (quota list, get and check; trash list and restore; version list, show
# and diff; fsck's report; status's sessions) are escaped as `ls -b`
# escapes them: control characters and bytes that are no UTF-8 as \n,
# \033, \302\233 ..., a backslash doubled, so that no name forges a line
# or drives the terminal; --json stays exact.
. "$(dirname "$0")/lib.sh"

new_volume escapes --trash-days 1
M=$TMP/mnt
mount_vol "$META" "$M"
ESC=$(printf '\033')
NL=$'\n'
# no_raw FILE WHAT: FILE holds no ESC byte and no C1 CSI
no_raw() {
	! grep -q "$ESC" "$1" || fail "$2 prints a raw ESC: $(od -c "$1" | head -5)"
	! grep -q "$(printf '\302\233')" "$1" || fail "$2 prints a raw CSI"
}

# --- quota list, get and check
qd="q${NL}x${ESC}[31mred\\"
mkdir "$M/$qd"
"$GRANARY" quota set "$META" --path "/$qd" --inodes 100 >/dev/null 2>&1 ||
	fail "quota set on a name with a newline"
"$GRANARY" quota list "$META" >"$TMP/q.out" 2>/dev/null || fail "quota list"
no_raw "$TMP/q.out" "quota list"
grep -qF '/q\nx\033[31mred\\ ' "$TMP/q.out" || fail "quota list: $(cat "$TMP/q.out")"
check_eq "$(wc -l <"$TMP/q.out")" 2 "quota list's lines (a name forged one)"
"$GRANARY" quota get "$META" --path "/$qd" >"$TMP/q.out" 2>/dev/null
grep -qF '/q\nx\033[31mred\\ ' "$TMP/q.out" || fail "quota get: $(cat "$TMP/q.out")"
"$GRANARY" quota check "$META" >"$TMP/q.out" 2>/dev/null || fail "quota check"
no_raw "$TMP/q.out" "quota check"
grep -qF '/q\nx\033[31mred\\: recorded' "$TMP/q.out" || fail "quota check: $(cat "$TMP/q.out")"
check_eq "$("$GRANARY" quota list "$META" --json 2>/dev/null | jq -r '.[0].path')" "/$qd" \
	"quota list --json's exact path"
ok "quota list, get and check escape names; --json is exact"

# --- trash list and restore
fname="f${NL}2${ESC}]0;title$(printf '\007')$(printf '\302\233')$(printf '\377')"
echo data >"$M/$fname"
rm "$M/$fname"
"$GRANARY" trash list "$META" >"$TMP/t.out" 2>/dev/null || fail "trash list"
no_raw "$TMP/t.out" "trash list"
want='/f\n2\033]0;title\a\302\233\377'
grep -qF " $want" "$TMP/t.out" || fail "trash list: $(cat "$TMP/t.out")"
check_eq "$(wc -l <"$TMP/t.out")" 2 "trash list's lines"
"$GRANARY" trash list "$META" --json 2>/dev/null >"$TMP/t.json"
jq -e '.[0].name | test("^f\n2\u001b]0;title\u0007")' "$TMP/t.json" >/dev/null ||
	fail "trash list --json: $(cat "$TMP/t.json")"
# the entry's raw bytes (--json writes the byte that is no UTF-8 as a
# character)
entry="$(jq -r '.[0].hour' "$TMP/t.json")/1-$(jq -r '.[0].ino' "$TMP/t.json")-$fname"
"$GRANARY" trash restore "$META" "$entry" >"$TMP/t.out" 2>/dev/null || fail "trash restore"
no_raw "$TMP/t.out" "trash restore"
grep -qF "as $want" "$TMP/t.out" || fail "trash restore: $(cat "$TMP/t.out")"
check_eq "$(cat "$M/$fname")" data "the restored file"
ok "trash list and restore escape names; --json is exact"

# --- version list, show and diff
mkdir "$M/ds"
echo 1 >"$M/ds/a"
tag="t$(printf '\302\233')1"
"$GRANARY" version create "$M/ds" "$tag" -m "msg${ESC}[2Jx${NL}second" -q ||
	fail "version create"
echo 2 >"$M/ds/b${NL}c"
"$GRANARY" version list "$M/ds" >"$TMP/v.out" || fail "version list"
no_raw "$TMP/v.out" "version list"
grep -qE '^t\\302\\2331 +.* msg\\033\[2Jx$' "$TMP/v.out" || fail "version list: $(cat "$TMP/v.out")"
"$GRANARY" version show "$M/ds" "$tag" >"$TMP/v.out" || fail "version show"
no_raw "$TMP/v.out" "version show"
grep -qxF 'version  t\302\2331' "$TMP/v.out" || fail "version show: $(cat "$TMP/v.out")"
grep -qxF 'message  msg\033[2Jx' "$TMP/v.out" || fail "version show: $(cat "$TMP/v.out")"
grep -qxF '         second' "$TMP/v.out" || fail "version show's second line: $(cat "$TMP/v.out")"
"$GRANARY" version diff "$M/ds" "$tag" >"$TMP/v.out" 2>/dev/null || true
grep -qxF "A	b\\nc" "$TMP/v.out" || fail "version diff: $(cat "$TMP/v.out")"
check_eq "$("$GRANARY" version list "$M/ds" --json | jq -r '.[0].message')" "msg${ESC}[2Jx${NL}second" \
	"version list --json's message"
ok "version list, show and diff escape names and messages; --json is exact"

# --- fsck's report
dir_ino=$(stat -c %i "$M/ds")
rcli hset "d$dir_ino" "bad${NL}${ESC}name" "$(printf '\001\077\102\017')" >/dev/null
rc=0
"$GRANARY" fsck "$META" >"$TMP/f.out" 2>/dev/null || rc=$?
check_eq "$rc" 1 "fsck's exit with an entry naming nothing"
no_raw "$TMP/f.out" "fsck"
grep -qF '/ds/bad\n\033name: the entry names inode 999999' "$TMP/f.out" ||
	fail "fsck: $(cat "$TMP/f.out")"
ok "fsck's report escapes paths"

# --- status: the sessions' mount points
M2="$TMP/m${ESC}[1m2"
mount_vol "$META" "$M2"
"$GRANARY" status "$META" >"$TMP/s.out" 2>/dev/null || fail "status"
no_raw "$TMP/s.out" "status"
grep -qF "$TMP/m\\033[1m2 " "$TMP/s.out" || fail "status: $(cat "$TMP/s.out")"
check_eq "$("$GRANARY" status "$META" --json 2>/dev/null | jq -r '.sessions[].mountpoint' | grep -c "$ESC")" 1 \
	"status --json's exact mount point"
umount_vol "$M2"
ok "status escapes the sessions' mount points"
