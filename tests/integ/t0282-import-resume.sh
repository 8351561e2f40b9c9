#!/bin/bash
# t0282-import-resume.sh - granary import killed (SIGKILL) in the middle,
# through a mount and in process: every file left under its own name is
# whole (only temporary names hold partial files); run again, it completes,
# skips what was done, removes the temporary names (also one whose source
# file is gone), and every byte is right.
. "$(dirname "$0")/lib.sh"
TREE=$TOPDIR/tests/integ/importtree.py

new_volume res
M=$TMP/m
mount_vol "$META" "$M"
python3 "$TREE" make "$TMP/src" 600 24 3 >/dev/null
jf() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }

temps() { find "$1" -name '.granary-import.*' ! -name '*.notatemp' 2>/dev/null | wc -l; }
files() { find "$1" -type f ! -name '.granary-import.*' 2>/dev/null | wc -l; }

# kill_midway VIEW CMD...: run CMD in the background and SIGKILL it once
# VIEW (a directory of the mount) has 100 files done and a temporary name
kill_midway() {
	local view=$1 pid end
	shift
	"$@" >"$TMP/killed.out" 2>&1 &
	pid=$!
	end=$(($(date +%s) + 120))
	until [ "$(files "$view")" -ge 100 ] && [ "$(temps "$view")" -gt 0 ]; do
		kill -0 "$pid" 2>/dev/null ||
			fail "the import ended before it could be killed: $(cat "$TMP/killed.out")"
		[ "$(date +%s)" -lt "$end" ] || { kill -9 "$pid"; fail "no progress to kill in 120 s"; }
		sleep 0.05
	done
	kill -9 "$pid"
	wait "$pid" 2>/dev/null || true
}

for form in mount inproc; do
	if [ $form = mount ]; then
		dest=("$M/r-mount") view=$M/r-mount
	else
		dest=("$META" /r-inproc) view=$M/r-inproc
	fi
	kill_midway "$view" "$GRANARY" import -q -t 8 "$TMP/src" "${dest[@]}"
	python3 "$TREE" partial "$TMP/src" "$view" >"$TMP/partial" ||
		fail "$form: after SIGKILL a file under its own name is not whole: $(cat "$TMP/partial")"
	left=$(sed -n 's/.*temps=\([0-9]*\).*/\1/p' "$TMP/partial")
	[ "$left" -gt 0 ] || fail "$form: no temporary name left by the killed import: $(cat "$TMP/partial")"
	ok "$form: killed midway: $(cat "$TMP/partial"), every file under its own name whole"

	# a temporary name whose source file is gone: the rerun removes it too
	echo stale >"$view/a/.granary-import.0123456789abcdef"
	"$GRANARY" import -q --json "$TMP/src" "${dest[@]}" >"$TMP/j" 2>"$TMP/e" ||
		fail "$form: the rerun failed: $(cat "$TMP/e")"
	skipped=$(jf "$TMP/j" skipped) copied=$(jf "$TMP/j" files)
	[ "$skipped" -ge 100 ] && [ "$copied" -gt 0 ] ||
		fail "$form: the rerun copied $copied and skipped $skipped"
	python3 "$TREE" cmp "$TMP/src" "$view" >"$TMP/cmp" ||
		fail "$form: after the rerun the copy differs: $(cat "$TMP/cmp")"
	check_eq "$(temps "$view")" 0 "$form: temporary names after the rerun"
	ok "$form: the rerun skipped $skipped, copied $copied: every byte right, no temporary name left"
done
umount_vol "$M"
