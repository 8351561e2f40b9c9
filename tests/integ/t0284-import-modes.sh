#!/bin/bash
# t0284-import-modes.sh - granary import into a --writeback mount (small
# files packed there too, and in the store when the import returns), with
# one thread, with a progress line on a terminal (files/s and bytes/s),
# and stopped by SIGINT (exit 1, "interrupted", no temporary name left,
# every file under its own name whole).
. "$(dirname "$0")/lib.sh"
TREE=$TOPDIR/tests/integ/importtree.py

new_volume modes
W=$TMP/w
mount_vol "$META" "$W" --writeback
made=$(python3 "$TREE" make "$TMP/src" 300 5 4)
small=$(sed -n 's/.*small=\([0-9]*\).*/\1/p' <<<"$made")

# ---- a --writeback mount: packed, and uploaded before the import ends ----
"$GRANARY" import -q "$TMP/src" "$W/wb" >"$TMP/o" 2>"$TMP/e" ||
	fail "import into a --writeback mount failed: $(cat "$TMP/e")"
packs=$(count_objects packs)
[ "$packs" -gt 0 ] && [ $((packs * 20)) -le "$small" ] ||
	fail "--writeback: $packs pack objects in the store for $small small files"
check_eq "$(stat_of "$W" packs staged)" 0 "packs still staged when the import returned"
python3 "$TREE" cmp "$TMP/src" "$W/wb" >"$TMP/cmp" ||
	fail "--writeback copy differs: $(cat "$TMP/cmp")"
ok "--writeback mount: byte-exact, $small small files in $packs packs, all in the store at the end"
umount_vol "$W"

# ---- one thread ----
M=$TMP/m
mount_vol "$META" "$M"
"$GRANARY" import -q -t 1 "$TMP/src" "$M/one" >"$TMP/o" 2>"$TMP/e" ||
	fail "import with one thread failed: $(cat "$TMP/e")"
python3 "$TREE" cmp "$TMP/src" "$M/one" >"$TMP/cmp" ||
	fail "one-thread copy differs: $(cat "$TMP/cmp")"
ok "--threads 1: byte-exact"

# ---- the progress line, on a terminal ----
command -v script >/dev/null || fail "no script(1) to give the import a terminal"
script -qec "'$GRANARY' import '$TMP/src' '$META' /tty" "$TMP/typescript" >/dev/null 2>&1 ||
	fail "import on a terminal failed: $(tail -c 500 "$TMP/typescript")"
grep -aqE 'import: +[0-9]+% \([0-9]+/[0-9]+ files\), [^,]+ of [^,]+, [0-9]+ files/s, [0-9.]+ [KMG]?i?B/s' \
	"$TMP/typescript" ||
	fail "no progress line with files/s and bytes/s: $(tail -c 500 "$TMP/typescript" | cat -v)"
grep -aqE "import: [0-9]+ files, .* in [0-9.]+ s \\(" "$TMP/typescript" || fail "no summary after the progress line"
ok "a progress line on a terminal, with files/s and bytes/s"

# ---- SIGINT ----
python3 "$TREE" make "$TMP/src2" 1500 1 5 >/dev/null
"$GRANARY" import -q -t 8 "$TMP/src2" "$M/int" >"$TMP/o" 2>"$TMP/e" &
pid=$!
some_done() { [ "$(find "$M/int" -type f 2>/dev/null | wc -l)" -ge 50 ]; }
wait_until 60 some_done || fail "no progress to interrupt"
kill -INT "$pid"
rc=0
wait "$pid" || rc=$?
check_eq "$rc" 1 "exit status after SIGINT"
grep -q "interrupted" "$TMP/e" || fail "no 'interrupted' after SIGINT: $(cat "$TMP/e")"
python3 "$TREE" partial "$TMP/src2" "$M/int" >"$TMP/partial" ||
	fail "after SIGINT a file is not whole: $(cat "$TMP/partial")"
grep -q "temps=0" "$TMP/partial" || fail "temporary names left after SIGINT: $(cat "$TMP/partial")"
ok "SIGINT: exit 1, interrupted, $(cat "$TMP/partial")"
umount_vol "$M"
