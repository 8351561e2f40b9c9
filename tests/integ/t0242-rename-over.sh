#!/bin/bash
# t0242-rename-over.sh - close-to-open across a rename (the way jobs save
# checkpoints and configs: write NAME.tmp, rename it over NAME) between
# two mounts of one volume with their default cache timeouts: B has read
# NAME, A renames a new file over it, and an open of NAME on B right
# after reads the new file, never "No such file" (B's kernel still held
# the name's old inode, which the rename removed: the client answers
# ESTALE for it, and the kernel looks the name up again) nor the old
# bytes; a name A removed is "No such file" on B at once. The same with
# the trash on, where the file replaced or removed keeps a name (in the
# trash) and its link count: through that name it still opens.
. "$(dirname "$0")/lib.sh"

new_volume renover
A=$TMP/a B=$TMP/b
mount_vol "$META" "$A"
mount_vol "$META" "$B"

# rounds N WHAT: N times B reads f, A renames a new file over it, and B's
# next open reads the new file (the file replaced is left in $TMP/old)
rounds() {
	local i
	random_file "$TMP/new" 30000
	cp "$TMP/new" "$A/f"
	for i in $(seq 1 "$1"); do
		cat "$B/f" >/dev/null || fail "$2round $i: B cannot read f before the rename"
		cp "$TMP/new" "$TMP/old"
		random_file "$TMP/new" $((20000 + i * 1000))
		cp "$TMP/new" "$A/f.tmp"
		mv "$A/f.tmp" "$A/f"
		cat "$B/f" >"$TMP/got" 2>"$TMP/err" ||
			fail "$2round $i: B's open after A's rename: $(cat "$TMP/err")"
		cmp -s "$TMP/new" "$TMP/got" ||
			fail "$2round $i: B reads $(wc -c <"$TMP/got") bytes other than the file A renamed over f"
	done
}

rounds 12 ""
ok "a file renamed over a name on A is what B opens at once (12 rounds)"

cat "$B/f" >/dev/null
rm "$A/f"
expect_errno "No such file or directory" cat "$B/f"
ok "a name A removed is gone on B at once"

"$GRANARY" config "$META" --trash-days 1 >/dev/null || fail "config --trash-days 1 failed"
rounds 6 "trash on, "
ok "with the trash on too, a file renamed over a name on A is what B opens at once (6 rounds)"

# the last file replaced, through its name in the trash, on B
old=$(ls "$B"/.trash/*/*-f | sort -V | tail -1)
[ -n "$old" ] || fail "B lists no replaced f in the trash"
cmp -s "$TMP/old" "$old" || fail "B reads $old other than the last f replaced"
ok "B reads the replaced file through its name in the trash"

cat "$B/f" >/dev/null
rm "$A/f"
expect_errno "No such file or directory" cat "$B/f"
ok "with the trash on, a name A removed is gone on B at once"
