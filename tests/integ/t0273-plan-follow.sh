#!/bin/bash
# t0273-plan-follow.sh - a plan's window follows its readers (issue 34):
# the client fetches ahead as far as the window, no further; a reader
# that stops following costs nothing after that (the store's bytes stop
# growing, well short of the dataset); once it reads on, the window moves
# with it and every byte is right. A dataset larger than the disk cache,
# read with a plan: every byte right, the window never past its bound (a
# quarter of the cache), the cache never past its size.
. "$(dirname "$0")/lib.sh"

MiB=$((1 << 20))
new_volume follow
M=$TMP/mnt
mount_vol "$META" "$M"
mkdir "$M/ds"
N=24
# 1.5 MiB each: blocks, not packs (a pack would bring its neighbours)
for i in $(seq 1 $N); do random_file "$M/ds/f$i" $((3 * MiB / 2 + i)); done
(cd "$M/ds" && md5sum f*) | sort >"$TMP/sums"
TOTAL=$(cat "$M"/ds/f* | wc -c)
seq 1 $N | sed 's/^/f/' >"$TMP/order"
umount_vol "$M"
rm -rf "$TMP/cache-mnt"
mount_vol "$META" "$M" --plan-window 4M

field() {
	getfattr --absolute-names --only-values -n "granary.plan.$1" "$M" |
		sed -n "s/.*\"$2\": \([0-9-]*\).*/\1/p"
}
# settled: the store's bytes did not move for a second
settled() {
	local a b
	a=$(stat_of "$M" store get_bytes)
	sleep 1
	b=$(stat_of "$M" store get_bytes)
	[ "$a" = "$b" ]
}

id=$("$GRANARY" plan "$M/ds" "$TMP/order") || fail "plan: exit $?"
for i in 1 2 3; do cat "$M/ds/f$i" >/dev/null; done
wait_until 60 settled || fail "the fetches ahead did not settle in 60 s"
fetched=$(stat_of "$M" store get_bytes)
window=$(field "$id" window)
ahead=$(field "$id" ahead)
check_eq "$window" $((4 * MiB)) "the plan's window"
# the three files read (twice at most: a reader and a fetcher may race
# for the same block), the window's files (those that start in it)
[ "$fetched" -le $((2 * (3 * MiB / 2 * 3) + window + 2 * MiB)) ] &&
	[ "$fetched" -lt $((TOTAL / 2)) ] ||
	fail "the client fetched $fetched bytes for 3 files read and a $window-byte window"
[ "$ahead" -gt 0 ] && [ "$ahead" -le $((window + 2 * MiB)) ] ||
	fail "$ahead bytes ahead with a $window-byte window"
sleep 3
check_eq "$(stat_of "$M" store get_bytes)" "$fetched" \
	"the store's bytes 3 s after the reader stopped"
ok "a reader that stops: the client fetched $fetched of $TOTAL bytes, then nothing"

# it reads on: the window moves with it
for i in $(seq 4 $N); do md5sum "$M/ds/f$i"; done | sed "s|$M/ds/||" >"$TMP/read"
for i in 1 2 3; do (cd "$M/ds" && md5sum "f$i"); done >>"$TMP/read"
sort "$TMP/read" | cmp -s - "$TMP/sums" || fail "the bytes read differ"
check_eq "$(field "$id" place)" "$N" "the place after the epoch"
[ "$(field "$id" ready)" -ge 1 ] || fail "no open found its file ready"
ok "the reader reads on: the window follows ($(field "$id" ready) of $N opens ready), every byte right"
"$GRANARY" plan --cancel "$id" "$M" || fail "cancel"

# A dataset four times the disk cache, read with a plan by a reader
# slower than the store (a training step between files): it waits for the
# fetches to settle before each file. The memory cache is made small, as
# it is beside a real disk cache: blocks it holds pin their disk entries.
umount_vol "$M"
rm -rf "$TMP/cache-mnt"
CACHE=$((9 * MiB))
mount_vol "$META" "$M" --cache-size $CACHE --cache-mem 2M
shuf "$TMP/order" >"$TMP/order2"
id=$("$GRANARY" plan "$M/ds" "$TMP/order2") || fail "plan: exit $?"
g0=$(stat_of "$M" store get_bytes)
max_window=0 max_cache=0
while read -r f; do
	wait_until 30 settled || fail "the fetches ahead did not settle"
	(cd "$M/ds" && md5sum "$f") >>"$TMP/read2"
	w=$(field "$id" window)
	c=$(stat_of "$M" disk_cache bytes)
	[ "$w" -gt "$max_window" ] && max_window=$w
	[ "$c" -gt "$max_cache" ] && max_cache=$c
done <"$TMP/order2"
g1=$(stat_of "$M" store get_bytes)
sort "$TMP/read2" | cmp -s - "$TMP/sums" || fail "the bytes read differ"
[ "$max_window" -le $((CACHE / 4)) ] ||
	fail "the window grew to $max_window bytes, past a quarter of the cache"
[ "$max_cache" -le "$CACHE" ] ||
	fail "the disk cache held $max_cache bytes, past its $CACHE"
ready=$(field "$id" ready)
ok "a dataset 4x the cache: every byte right, window <= $max_window, cache <= $max_cache bytes ($ready of $N opens ready)"
# with the disk cache evicting by the plans' ranks (passed files demoted
# first), every file is fetched once, ahead of its reader
if [ "$(stat_of "$M" disk_cache evict_demoted)" -gt 0 ]; then
	check_eq "$ready" "$N" "opens that found their file ready"
	[ $((g1 - g0)) -le $((TOTAL + MiB)) ] ||
		fail "the epoch fetched $((g1 - g0)) bytes of a $TOTAL-byte dataset"
	ok "each file fetched once, ahead of its reader: $((g1 - g0)) bytes"
else
	skip "the disk cache of this build evicts no demoted entry (ranked eviction: issue 34's disk cache side)"
fi

# in a cache group: a plan's files are warmed at their owners (the store
# once for the group), and its readers find them there
. "$(dirname "$0")/group.sh"
umount_vol "$M"
gmount 1
gmount 2
M=$TMP/m1
two() { [ "$(gfig 1 members)" = 2 ] && [ "$(gfig 2 members)" = 2 ]; }
wait_until 30 two || fail "the members do not see each other"
# 16 files: inside a first window (32 MiB)
head -n 16 "$TMP/order" >"$TMP/order3"
T3=$(cd "$M/ds" && cat $(cat "$TMP/order3") | wc -c)
id=$("$GRANARY" plan "$M/ds" "$TMP/order3") || fail "plan in a group: exit $?"
all_ahead() { [ "$(field "$id" ahead)" = "$T3" ]; }
wait_until 120 all_ahead ||
	fail "the group holds $(field "$id" ahead) of the plan's $T3 bytes"
g0=$(ggets 1 2)
while read -r f; do (cd "$M/ds" && md5sum "$f"); done <"$TMP/order3" >"$TMP/read3"
g1=$(ggets 1 2)
awk 'NR == FNR { want[$1] = 1; next } $2 in want' "$TMP/order3" "$TMP/sums" |
	cmp -s - <(sort "$TMP/read3") ||
	fail "the bytes read in the group differ"
check_eq "$((g1 - g0))" 0 "store GETs of the group during the planned epoch"
check_eq "$(field "$id" ready)" 16 "opens that found their file ready in the group"
[ "$(gfig 1 peer_hits)" -gt 0 ] || fail "member 1 read nothing from member 2"
ok "in a cache group: the plan warmed its files at their owners; the epoch read them there, no store GET"
