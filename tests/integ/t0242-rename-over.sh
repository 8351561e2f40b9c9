#!/bin/bash
# t0242-rename-over.sh - close-to-open across a rename (the way jobs save
# checkpoints and configs: write NAME.tmp, rename it over NAME) between
# two mounts of one volume with their default cache timeouts: B has read
# NAME, A renames a new file over it, and an open of NAME on B right
# after reads the new file, never "No such file" (B's kernel still held
# the name's old inode, which the rename removed: the client answers
# ESTALE for it, and the kernel looks the name up again) nor the old
# bytes; a name A removed is "No such file" on B at once.
. "$(dirname "$0")/lib.sh"

new_volume renover
A=$TMP/a B=$TMP/b
mount_vol "$META" "$A"
mount_vol "$META" "$B"

random_file "$TMP/new" 30000
cp "$TMP/new" "$A/f"
for i in $(seq 1 12); do
	cat "$B/f" >/dev/null || fail "round $i: B cannot read f before the rename"
	random_file "$TMP/new" $((20000 + i * 1000))
	cp "$TMP/new" "$A/f.tmp"
	mv "$A/f.tmp" "$A/f"
	cat "$B/f" >"$TMP/got" 2>"$TMP/err" ||
		fail "round $i: B's open after A's rename: $(cat "$TMP/err")"
	cmp -s "$TMP/new" "$TMP/got" ||
		fail "round $i: B reads $(wc -c <"$TMP/got") bytes other than the file A renamed over f"
done
ok "a file renamed over a name on A is what B opens at once (12 rounds)"

cat "$B/f" >/dev/null
rm "$A/f"
expect_errno "No such file or directory" cat "$B/f"
ok "a name A removed is gone on B at once"
