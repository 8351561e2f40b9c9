#!/bin/bash
# t0040-unlink-open.sh - a file unlinked while open stays readable through
# the open descriptor until the last close (unlink on the same client and on
# another one), and its data objects are reclaimed after that close.
. "$(dirname "$0")/lib.sh"

new_volume unl
A=$TMP/a B=$TMP/b
mount_vol "$META" "$A" --attr-timeout 0.5 --entry-timeout 0.5
mount_vol "$META" "$B" --attr-timeout 0.5 --entry-timeout 0.5
size=$((5 * 1024 * 1024 + 4321)) # two blocks
[ "$GRANARY_STORAGE" = s3 ] && size=$((4 * 1024 * 1024 + 4321))

# hold_open FILE OUT TAG: open FILE on fd 3, report ready, wait for the go
# file, then copy everything from fd 3 to OUT. Prints the reader's PID.
hold_open() {
	local file=$1 out=$2 tag=$3
	rm -f "$TMP/ready-$tag" "$TMP/go-$tag"
	(
		exec 3<"$file" || exit 3
		: >"$TMP/ready-$tag"
		while [ ! -e "$TMP/go-$tag" ]; do sleep 0.05; done
		cat <&3 >"$out" || exit 4
	) &
	READER=$!
	bg_track $READER
	wait_until 10 test -e "$TMP/ready-$tag" || fail "reader of $file did not open it"
}

# release TAG: let the reader read and close, and check it succeeded.
release() {
	local rc=0
	: >"$TMP/go-$1"
	wait "$READER" || rc=$?
	[ $rc = 0 ] || fail "reader $1 failed (exit $rc)"
}

blocks0=$(count_objects)

# --- unlink on the same client
random_file "$TMP/v1" $size
cp "$TMP/v1" "$A/v1"
blocks1=$(count_objects)
[ -z "$DATA_DIRS" ] || [ "$blocks1" -gt "$blocks0" ] ||
	fail "no data objects found under '$DATA_DIRS' after writing v1"
hold_open "$A/v1" "$TMP/v1.out" same
rm "$A/v1"
[ ! -e "$A/v1" ] || fail "v1 still visible after unlink"
sleep 1
check_eq "$(count_objects)" "$blocks1" "block objects of an open unlinked file"
release same
cmp "$TMP/v1" "$TMP/v1.out" || fail "read through a fd held across unlink differs"
ok "unlink on the same client: full content through the open fd"
wait_until 30 objects_equal "$blocks0" ||
	fail "objects not reclaimed 30 s after the last close: $(count_objects) data objects, expected $blocks0"
ok "objects of the unlinked file reclaimed after the last close"

# --- unlink on another client; the reader's client never read the file
# before the unlink, so nothing can come from its page cache
random_file "$TMP/v2" $size
cp "$TMP/v2" "$B/v2"
sleep 1
blocks2=$(count_objects)
hold_open "$A/v2" "$TMP/v2.out" other
rm "$B/v2"
sleep 1
[ ! -e "$A/v2" ] || fail "A still sees v2 after unlink on B"
[ ! -e "$B/v2" ] || fail "B still sees v2 after its unlink"
check_eq "$(count_objects)" "$blocks2" "block objects while another client holds the file open"
release other
cmp "$TMP/v2" "$TMP/v2.out" || fail "read on A after unlink on B differs"
ok "unlink on another client: full content through the open fd"
wait_until 30 objects_equal "$blocks0" ||
	fail "objects not reclaimed 30 s after the last close: $(count_objects) data objects, expected $blocks0"
ok "objects reclaimed after the other client's close"

# --- rename over an open file is an unlink of the target too
random_file "$TMP/v3" 300000
cp "$TMP/v3" "$A/v3"
echo new >"$A/v3.new"
hold_open "$A/v3" "$TMP/v3.out" rename
mv "$A/v3.new" "$A/v3"
release rename
cmp "$TMP/v3" "$TMP/v3.out" || fail "read through a fd held across rename-over differs"
check_eq "$(cat "$B/v3")" new "the new v3 after rename over"
ok "rename over an open file keeps the old content readable"
umount_vol "$A"
umount_vol "$B"
