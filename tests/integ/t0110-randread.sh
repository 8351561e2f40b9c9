#!/bin/bash
# t0110-randread.sh - small random reads do not fetch whole blocks: on a
# cold mount, 64 random 4 KiB reads (O_DIRECT) of a 32 MiB incompressible
# file return the file's bytes and GET at most twice the bytes read from
# the store, plus one segment table (4 KiB) per 4 MiB block; a sequential
# read of the same file still fetches whole blocks, once each.
. "$(dirname "$0")/lib.sh"

# stat SECTION FIELD: a counter from the client's "granary.stats" xattr

RANDREAD=$BUILD/tests/randread
[ -x "$RANDREAD" ] || fail "no randread helper at '$RANDREAD' (make all)"
MIB=$((1024 * 1024))
SIZE=$((32 * MIB)) READS=64 PIECE=4096
BLOCKS=$((SIZE / (4 * MIB)))
TABLE=$((24 + 4 * (4 * MIB / 4096))) # codec.h: header + one u32 per 4 KiB

new_volume rr --compress lz4
M=$TMP/mnt
mount_vol "$META" "$M"
random_file "$TMP/src" "$SIZE"
cp "$TMP/src" "$M/f"
umount_vol "$M"
ok "wrote a ${SIZE}-byte random file"

# a fresh mount point: cold memory and disk caches, no page cache
R=$TMP/cold
mount_vol "$META" "$R"
b0=$(stat_of "$R" store get_bytes)
g0=$(stat_of "$R" store gets)
out=$("$RANDREAD" -d -n "$READS" -b "$PIECE" -S 110 -c "$TMP/src" "$R/f") ||
	fail "random reads failed or differ: $out"
b1=$(stat_of "$R" store get_bytes)
g1=$(stat_of "$R" store gets)
fetched=$((b1 - b0)) read=$((READS * PIECE))
limit=$((2 * read + BLOCKS * TABLE))
echo "  # $READS random reads of $PIECE B: $fetched B in $((g1 - g0)) GETs (limit $limit)"
[ "$fetched" -gt 0 ] || fail "no bytes fetched: the stats do not count ranged GETs"
[ "$fetched" -le "$limit" ] ||
	fail "random reads fetched $fetched bytes for $read read (limit $limit)"
[ $((g1 - g0)) -le $((READS + BLOCKS)) ] ||
	fail "random reads took $((g1 - g0)) GETs for $READS reads of $BLOCKS blocks"
ok "random 4 KiB reads fetch at most 2x the bytes read, plus tables"

# the same reads through the page cache (no O_DIRECT), other offsets
b0=$(stat_of "$R" store get_bytes)
out=$("$RANDREAD" -n "$READS" -b "$PIECE" -S 111 -c "$TMP/src" "$R/f") ||
	fail "buffered random reads failed or differ: $out"
fetched=$(($(stat_of "$R" store get_bytes) - b0))
echo "  # buffered: $fetched B"
[ "$fetched" -le "$limit" ] ||
	fail "buffered random reads fetched $fetched bytes for $read read"
ok "buffered random reads too"

# a stream still reads whole blocks, each once
b0=$(stat_of "$R" store get_bytes)
cmp "$TMP/src" "$R/f" || fail "sequential read differs"
fetched=$(($(stat_of "$R" store get_bytes) - b0))
echo "  # sequential: $fetched B"
[ "$fetched" -le $((SIZE + SIZE / 8)) ] ||
	fail "a sequential read of $SIZE bytes fetched $fetched"
umount_vol "$R"
ok "sequential reads fetch each block once"
