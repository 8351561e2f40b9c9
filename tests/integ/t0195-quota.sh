#!/bin/bash
# t0195-quota.sh - directory quotas as an operator and a user meet them:
# every `granary quota` subcommand, its errors and exit codes; a quota set
# on a tree that has files counts them (hard link once, symlink, subdirs);
# list shows nested quotas with their paths, as a table and as JSON; after
# random changes made through two mounts, `quota check` counts what find
# counts on the mount; a usage corrupted on purpose makes check exit 1 and
# check --repair corrects it. With the clients' enforcement and the
# namespace scripts: EDQUOT past a limit, EXDEV across quota boundaries.
. "$(dirname "$0")/lib.sh"

new_volume quota
M=$TMP/mnt M2=$TMP/mnt2
mount_vol "$META" "$M" --attr-timeout 0 --entry-timeout 0
mount_vol "$META" "$M2" --attr-timeout 0 --entry-timeout 0

Q() { "$GRANARY" quota "$@"; }
# qget DIR FIELD: one field of `quota get --json`
qget() { Q get "$META" --path "$1" --json | jq -r ".$2"; }
# recount DIR (a path on the mount): "BYTES INODES" below DIR as the quota
# counts them: each inode once (a hard link once), stored bytes of the
# regular files. Every file here is written whole, appended to or cut
# shorter, so what it stores is its length (st_blocks agrees, below).
recount() {
	local inodes bytes
	inodes=$(find "$1" -mindepth 1 -printf '%i\n' | sort -u | wc -l)
	bytes=$(find "$1" -mindepth 1 -type f -printf '%i %s\n' | sort -u |
		awk '{ s += $2 } END { print s + 0 }')
	echo "$bytes $inodes"
}
# blocks DIR: the same bytes from st_blocks, rounded up to 512 each
blocks() {
	find "$1" -mindepth 1 -type f -printf '%i %b\n' | sort -u |
		awk '{ s += $2 } END { print s + 0 }'
}
round512() { # round512 DIR: the file sizes of DIR rounded as st_blocks is
	find "$1" -mindepth 1 -type f -printf '%i %s\n' | sort -u |
		awk '{ s += int(($2 + 511) / 512) } END { print s + 0 }'
}
# checked DIR: "BYTES INODES" counted by `quota check` for DIR (from
# $TMP/check.out)
checked() {
	sed -n "s|^$1: recorded [0-9]* bytes, [0-9]* inodes; counted \([0-9]*\) bytes, \([0-9]*\) inodes: .*|\1 \2|p" \
		"$TMP/check.out"
}

# --- usage errors: exit 2, one "granary: ..." line
expect_exit 2 "needs a command" Q
expect_exit 2 "unknown quota command 'frob'" Q frob "$META"
expect_exit 2 "unknown option '--frob'" Q get "$META" --path /x --frob
expect_exit 2 "needs --path" Q get "$META"
expect_exit 2 "needs --path" Q delete "$META"
expect_exit 2 "needs --capacity" Q set "$META" --path /x
expect_exit 2 "not absolute" Q set "$META" --path x --capacity 1G
expect_exit 2 "bad --capacity '12Q'" Q set "$META" --path /x --capacity 12Q
expect_exit 2 "bad --inodes '-1'" Q set "$META" --path /x --inodes -1
expect_exit 2 "does not apply" Q get "$META" --path /x --repair
expect_exit 2 "does not apply" Q list "$META" --capacity 1G
expect_exit 2 "does not apply" Q delete "$META" --path /x --json
expect_exit 2 "needs META_URL" Q list
expect_exit 2 "too many arguments" Q list "$META" extra
expect_exit 2 "needs a value" Q get "$META" --path
Q --help >"$TMP/help" || fail "quota --help exited $?"
grep -q "^usage: granary quota set META_URL --path DIR" "$TMP/help" ||
	fail "quota --help shows no usage: $(head -3 "$TMP/help")"
"$GRANARY" help quota | cmp -s - "$TMP/help" || fail "'granary help quota' differs from --help"
"$GRANARY" --help | grep -q "^   quota " || fail "granary --help does not list quota"
ok "usage errors exit 2 with a one-line message; --help is the usage"

# --- runtime errors: exit 1
mkdir -p "$M/proj/sub/inner" "$M/other"
echo x >"$M/afile"
expect_exit 1 "no directory '/nope'" Q set "$META" --path /nope --capacity 1G
expect_exit 1 "no directory '/afile/x'" Q get "$META" --path /afile/x
expect_exit 1 "'/afile' is not a directory" Q set "$META" --path /afile --inodes 5
expect_exit 1 "root has no quota" Q set "$META" --path / --capacity 1G
grep -q "^hint: .*capacity" "$TMP/expect.err" || fail "no capacity hint: $(cat "$TMP/expect.err")"
expect_exit 1 "'/other' has no quota" Q get "$META" --path /other
expect_exit 1 "'/other' has no quota" Q delete "$META" --path /other
expect_exit 1 "cannot reach redis" Q list "unix://$TMP/no-such.sock?db=1"
expect_exit 1 "malformed metadata URL" Q list "redis//nowhere"
redis-cli -s "$GRANARY_TEST_REDIS_SOCK" -n 62 flushdb >/dev/null
expect_exit 1 "no granary volume" Q list "$GRANARY_TEST_REDIS?db=62"
Q list "$META" >"$TMP/list" || fail "quota list with no quotas exited $?"
grep -qx "no quotas" "$TMP/list" || fail "empty list: $(cat "$TMP/list")"
check_eq "$(Q list "$META" --json | jq length)" 0 "quotas in an empty list --json"
ok "runtime errors exit 1: missing path, a file, the root, no quota, redis down, bad URL"

# --- a quota on a tree that has files counts them
P=$M/proj
random_file "$P/a" 1000
random_file "$P/b" 300000
random_file "$P/sub/c" $((5 * 1024 * 1024 + 77))
: >"$P/sub/empty"
ln "$P/a" "$P/sub/a-link"
ln -s ../a "$P/sub/sym"
mkfifo "$P/sub/fifo"
random_file "$P/sub/inner/d" 4096
read -r want_b want_i < <(recount "$P")
check_eq "$want_i" 9 "inodes below /proj (a, b, sub, c, empty, sym, fifo, inner, d; the link not again)"
check_eq "$want_b" $((1000 + 300000 + 5 * 1024 * 1024 + 77 + 4096)) "bytes below /proj"
check_eq "$(blocks "$P")" "$(round512 "$P")" "st_blocks of the files written whole"
Q set "$META" --path /proj --capacity 1G --inodes 1000 >"$TMP/set.out" ||
	fail "quota set /proj failed: $(cat "$TMP/set.out")"
grep -q "quota of /proj set: 1 GiB and 1000 inodes; $want_i inodes and .* ($want_b bytes) counted" "$TMP/set.out" ||
	fail "quota set said: $(cat "$TMP/set.out")"
check_eq "$(qget /proj used_space)" "$want_b" "used_space of /proj after set"
check_eq "$(qget /proj used_inodes)" "$want_i" "used_inodes of /proj after set"
check_eq "$(qget /proj max_space)" $((1 << 30)) "max_space of /proj"
check_eq "$(qget /proj max_inodes)" 1000 "max_inodes of /proj"
check_eq "$(qget /proj path)" /proj "path in get --json"
check_eq "$(qget /proj/ inodes_pct)" 0.9 "inodes_pct (9 of 1000, /proj/ as /proj)"
check_eq "$(qget //proj/. pending)" 0 "pending"
ok "set on a tree with files counts them: $want_b bytes, $want_i inodes (a hard link once)"

# changing one limit keeps the other; 0 is no limit
Q set "$META" --path /proj --inodes 0 >"$TMP/set.out" || fail "quota set --inodes 0 failed"
grep -q "quota of /proj changed: 1 GiB and no limit on inodes" "$TMP/set.out" ||
	fail "quota set said: $(cat "$TMP/set.out")"
check_eq "$(qget /proj max_space)" $((1 << 30)) "max_space kept by set --inodes"
check_eq "$(qget /proj max_inodes)" 0 "max_inodes 0: no limit"
check_eq "$(qget /proj inodes_pct)" null "inodes_pct without a limit"
check_eq "$(qget /proj used_inodes)" "$want_i" "usage kept by a change of limits"
Q set "$META" --path /proj --capacity 2G --inodes 5000 >/dev/null || fail "quota set again failed"
Q get "$META" --path /proj >"$TMP/get.out" || fail "quota get failed"
grep -qE "^/proj +5.3 MiB +2 GiB +0% +9 +5000 +0% +0 B$" "$TMP/get.out" ||
	fail "quota get table: $(cat "$TMP/get.out")"
ok "set changes the limits given and keeps the others and the usage; get prints a table"

# --- nested quotas, list with paths
Q set "$META" --path /proj/sub/inner --capacity 100M >/dev/null || fail "set inner failed"
check_eq "$(qget /proj/sub/inner used_inodes)" 1 "inodes below /proj/sub/inner"
check_eq "$(qget /proj/sub/inner used_space)" 4096 "bytes below /proj/sub/inner"
Q set "$META" --path /other --inodes 100 >/dev/null || fail "set other failed"
Q list "$META" >"$TMP/list" || fail "quota list failed"
check_eq "$(grep -cE '^/(proj|proj/sub/inner|other) ' "$TMP/list")" 3 "quotas listed with paths: $(cat "$TMP/list")"
Q list "$META" --json >"$TMP/list.json" || fail "quota list --json failed"
check_eq "$(jq -r '[.[].path] | sort | join(",")' "$TMP/list.json")" "/other,/proj,/proj/sub/inner" "paths in list --json"
check_eq "$(jq -r '.[] | select(.path == "/proj/sub/inner") | .max_space' "$TMP/list.json")" $((100 << 20)) "inner's limit in the list"
check_eq "$(jq -r '.[] | select(.path == "/proj") | .ino' "$TMP/list.json")" "$(qget /proj ino)" "ino in list and get"
ok "list shows nested quotas with their paths (table and JSON)"

# --- check agrees with find after random changes from two mounts
check_ok() { # check_ok DIR...: quota check's counts are find's for each DIR
	local d rc=0
	Q check "$META" >"$TMP/check.out" 2>"$TMP/check.err" || rc=$?
	for d in "$@"; do
		check_eq "$(checked "$d")" "$(recount "$M$d")" "quota check's count of $d"
	done
	check_eq "$rc" 0 "quota check after changes (the scripts keep usage): $(cat "$TMP/check.out")"
}
RANDOM=195
for round in 1 2 3; do
	for i in $(seq 1 12); do
		mp=$M
		[ $((i % 2)) = 0 ] && mp=$M2
		d=$mp/proj
		case $((RANDOM % 4)) in
		1) d=$mp/proj/sub ;;
		2) d=$mp/proj/sub/inner ;;
		3) d=$mp/other ;;
		esac
		f=$d/r$round-$i
		case $((RANDOM % 8)) in
		0 | 1) random_file "$f" $((RANDOM * 7)) ;;
		2) random_file "$f" 70000 && head -c 1234 /dev/urandom >>"$f" ;;
		3) random_file "$f" 90000 && truncate -s 777 "$f" ;;
		4) mkdir "$f" && random_file "$f/in" 333 ;;
		5) mkdir "$f" && rmdir "$f" ;;
		6) random_file "$f" 5000 && mv "$f" "$d/moved-$round-$i" ;;
		7) random_file "$f" 6000 && mv "$f" "$mp/proj/sub/inner/x-$round-$i" ;;
		esac
	done
	# deletes and moves of what the other mount made
	for f in "$M2"/proj/r"$round"-1 "$M"/proj/sub/r"$round"-2 "$M2"/other/r"$round"-3; do
		rm -rf "$f"
	done
	for f in "$M"/proj/sub/inner/x-"$round"-*; do
		[ -e "$f" ] && mv "$f" "$M2/proj/y-${f##*/}"
	done
	mv "$M2/proj/b" "$M2/proj/sub/b" 2>/dev/null || mv "$M2/proj/sub/b" "$M2/proj/b"
done
check_eq "$(blocks "$M/proj")" "$(round512 "$M/proj")" "st_blocks after the changes"
check_ok /proj /proj/sub/inner /other
ok "after random changes from two mounts, quota check counts what find does and agrees"

# --- a usage corrupted on purpose: check exits 1, --repair fixes it
rcli hincrby quotaused "s$(qget /proj ino)" 12345 >/dev/null
rcli hincrby quotaused "i$(qget /proj/sub/inner ino)" -1 >/dev/null
rc=0
Q check "$META" >"$TMP/check.out" 2>"$TMP/check.err" || rc=$?
check_eq "$rc" 1 "check of a corrupted usage exits"
grep -q "^/proj: .*: differs$" "$TMP/check.out" || fail "check did not report /proj: $(cat "$TMP/check.out")"
grep -q "^/proj/sub/inner: .*: differs$" "$TMP/check.out" || fail "check did not report inner: $(cat "$TMP/check.out")"
grep -q "^/other: .*: ok$" "$TMP/check.out" || fail "check reported /other: $(cat "$TMP/check.out")"
grep -q "^hint: .*--repair" "$TMP/check.err" || fail "no --repair hint: $(cat "$TMP/check.err")"
Q check "$META" --path /proj/sub >"$TMP/check.out" 2>/dev/null && fail "check --path /proj/sub exited 0"
check_eq "$(wc -l <"$TMP/check.out")" 1 "quotas checked below /proj/sub: $(cat "$TMP/check.out")"
Q check "$META" --repair >"$TMP/check.out" || fail "check --repair exited $?: $(cat "$TMP/check.out")"
check_eq "$(grep -c ': differs \[repaired\]$' "$TMP/check.out")" 2 "repaired: $(cat "$TMP/check.out")"
Q check "$META" >"$TMP/check.out" || fail "check after --repair exited $?: $(cat "$TMP/check.out")"
read -r b i < <(recount "$M/proj")
check_eq "$(qget /proj used_space) $(qget /proj used_inodes)" "$b $i" "/proj's usage after repair"
expect_exit 1 "'/proj/a' is not a directory" Q check "$META" --path /proj/a
ok "a corrupted usage: check exits 1 naming it, check --repair fixes it, check exits 0"

# --- delete
Q delete "$META" --path /proj/sub/inner >"$TMP/del.out" || fail "quota delete failed"
grep -qx "quota of /proj/sub/inner removed" "$TMP/del.out" || fail "delete said: $(cat "$TMP/del.out")"
expect_exit 1 "has no quota" Q get "$META" --path /proj/sub/inner
check_eq "$(Q list "$META" --json | jq -r '[.[].path] | sort | join(",")')" "/other,/proj" "quotas after delete"
[ -d "$M/proj/sub/inner" ] || fail "delete removed the directory"
ok "delete removes a quota and leaves the tree"

# --- the limits, enforced by the clients (q-client) and scripts (q-ns)
mkdir "$M/lim"
Q set "$META" --path /lim --inodes 3 --capacity 1M >/dev/null || fail "set /lim failed"
touch "$M/lim/1" "$M/lim/2" "$M/lim/3"
expect_errno "Disk quota exceeded" touch "$M/lim/4"
expect_errno "Disk quota exceeded" mkdir "$M2/lim/d"
rm "$M/lim/3"
touch "$M2/lim/3" || fail "a creation after a removal under the limit failed"
ok "creations past --inodes fail with EDQUOT on both mounts"
# a client enforces a new byte limit once it has read the quotas again,
# about a second after the set (docs/operations.md)
wait_until 10 quota_seen "$M" "$M2" ||
	fail "the clients do not enforce quota generation $(rcli GET quotagen) 10 s after the set"
expect_errno "Disk quota exceeded" dd if=/dev/zero of="$M/lim/1" bs=64k count=32 status=none
rm -f "$M/lim/1"
Q check "$META" --path /lim >/dev/null || fail "check of /lim after EDQUOT: $(Q check "$META" --path /lim 2>&1)"
ok "writes past --capacity fail with EDQUOT; the usage stays exact"

# --- rename and link across quota boundaries (q-ns)
mkdir -p "$M/proj/tree/deep" && echo t >"$M/proj/tree/deep/f"
expect_errno "Invalid cross-device link" python3 -c \
	'import os, sys; os.rename(sys.argv[1], sys.argv[2])' "$M/proj/tree" "$M/other/tree"
mv "$M/proj/tree" "$M/other/tree" || fail "mv of a tree across quotas failed"
check_eq "$(cat "$M/other/tree/deep/f")" t "the tree mv copied"
echo l >"$M/proj/linked"
expect_errno "Invalid cross-device link" ln "$M/proj/linked" "$M/other/linked"
ln "$M/proj/linked" "$M/proj/sub/linked2" || fail "a link inside one quota failed"
Q check "$META" >"$TMP/check.out" || fail "check after renames: $(cat "$TMP/check.out")"
check_eq "$(checked /proj)" "$(recount "$M/proj")" "/proj after renames"
check_eq "$(checked /other)" "$(recount "$M/other")" "/other after renames"
ok "rename of a tree and link across quotas: EXDEV (mv copies); usage stays exact"
