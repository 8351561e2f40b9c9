#!/bin/bash
# t0160-gc.sh - granary gc: a client SIGKILLed in the middle of big writes
# (default mode, then --writeback) leaks the blocks it put and never
# committed; gc reports exactly those (an hour's --min-age calls them young
# and touches nothing), --delete removes exactly those, beside a client
# that keeps writing, and every file still reads back byte-exact; after
# it the store holds exactly what the metadata references. Bad input gets
# a message and exit 1 or 2.
. "$(dirname "$0")/lib.sh"

# gcj FIELD [ARGS...]: one number of `granary gc --json ARGS` on $META
gcj() {
	local f=$1; shift
	"$GRANARY" gc "$META" --json -q "$@" >"$TMP/gc.json" 2>"$TMP/gc.err" ||
		fail "granary gc $* failed: $(cat "$TMP/gc.err")"
	jq -e ".$f" "$TMP/gc.json" || fail "no $f in: $(cat "$TMP/gc.json")"
}

# big_write_killed MP NAME [MOUNT ARGS]: MP remounted by the test build
# that kills itself (SIGKILL) as it is about to commit a big file's first
# slice, its blocks put; a dd of 64 MiB into MP/NAME dies with it; MP is
# mounted again (with MOUNT ARGS) by the real granary.
big_write_killed() {
	local mp=$1 name=$2; shift 2
	umount_vol "$mp"
	GRANARY=$GRANARY_HOOKS GRANARY_TEST_KILL_BEFORE_COMMIT=1 mount_vol "$META" "$mp" "$@"
	local pids
	pids=$(mount_pids "$mp")
	dd if=/dev/urandom of="$mp/$name" bs=1M count=64 status=none 2>/dev/null || true
	for p in $pids; do
		wait_until 30 eval "! kill -0 $p 2>/dev/null" || fail "the client did not die at its commit"
	done
	fusermount3 -uz "$mp" 2>/dev/null
	MOUNTS=${MOUNTS/ $mp/}
	mount_vol "$META" "$mp" "$@"
	check_eq "$(stat -c %s "$mp/$name" 2>/dev/null || echo 0)" 0 "size of the killed write's file"
}

new_volume gc
A=$TMP/a
mount_vol "$META" "$A"
mkdir -p "$TMP/src" "$A/keep"
for i in $(seq 1 20); do random_file "$TMP/src/s$i" $((1000 + i * 3001)); done
random_file "$TMP/src/big" $((9 << 20))
cp "$TMP/src/"* "$A/keep/"
sync
umount_vol "$A"
kept=$(count_objects)
[ "$kept" -ge 3 ] || fail "only $kept objects for 20 small files and a big one"
check_eq "$(gcj leaked --min-age 0)" 0 "leaked objects of a clean volume"
check_eq "$(jq .live "$TMP/gc.json")" "$kept" "live objects"
ok "a clean volume: nothing leaked, the $kept objects in the store are live"

mount_vol "$META" "$A"
big_write_killed "$A" lost
total=$(count_objects)
leak=$((total - kept))
[ "$leak" -ge 1 ] || fail "nothing leaked by the killed write"
check_eq "$(gcj leaked --min-age 0)" "$leak" "objects gc finds leaked"
check_eq "$(jq .objects "$TMP/gc.json")" "$total" "objects gc lists"
check_eq "$(gcj leaked)" 0 "leaked objects younger than the default --min-age"
check_eq "$(jq .young "$TMP/gc.json")" "$leak" "young objects"
check_eq "$(gcj deleted --delete)" 0 "objects deleted under the default --min-age"
check_eq "$(count_objects)" "$total" "objects after gc --delete of young ones"
ok "a client killed before its commit leaked $leak blocks: gc reports them, leaves them under --min-age 1h"

# --delete beside a client that writes and reads all along. The leaked
# blocks are made older than --min-age first: the writer's objects between
# their upload and their commit are younger, which is what keeps them
# (docs/operations.md: --min-age 0 is for a volume nobody has mounted)
sleep 6
mkdir -p "$A/live"
(
	i=0
	while [ ! -e "$TMP/stop" ]; do
		i=$((i + 1))
		cp "$TMP/src/s$((i % 20 + 1))" "$A/live/f$i" || exit 1
		cmp -s "$TMP/src/s$((i % 20 + 1))" "$A/live/f$i" || exit 2
	done
	echo "$i" >"$TMP/written"
) &
writer=$!
check_eq "$(gcj deleted --delete --min-age 4 --threads 4)" "$leak" "objects deleted"
touch "$TMP/stop"
wait $writer || fail "the client writing beside gc --delete failed ($?)"
n=$(cat "$TMP/written")
diff -r "$TMP/src" "$A/keep" || fail "files changed by gc --delete"
for i in $(seq 1 "$n"); do
	cmp -s "$TMP/src/s$((i % 20 + 1))" "$A/live/f$i" || fail "live/f$i differs after gc"
done
umount_vol "$A"
check_eq "$(gcj leaked --min-age 0)" 0 "leaked objects after --delete"
check_eq "$(jq .objects "$TMP/gc.json")" "$(count_objects)" "objects listed vs in the store"
check_eq "$(jq .live "$TMP/gc.json")" "$(count_objects)" "every object left is live"
ok "gc --delete removed the $leak leaked blocks beside a client that wrote $n files; every file reads back"

# the same with --writeback: staged blocks of a killed client come back at
# the next mount; what it had put for the killed write is leaked
mount_vol "$META" "$A" --writeback
cp "$TMP/src/big" "$A/keep/big2"
setfattr -n granary.sync -v 1 "$A/keep/big2"
kept=$(count_objects)
big_write_killed "$A" lost2 --writeback
umount_vol "$A" # waits for the recovered uploads
leaked=$(gcj leaked --min-age 0)
[ "$leaked" -ge 1 ] || fail "nothing leaked by a killed --writeback write"
check_eq "$(gcj deleted --delete --min-age 0)" "$leaked" "objects deleted"
mount_vol "$META" "$A"
for f in "$TMP/src/"*; do
	cmp -s "$f" "$A/keep/$(basename "$f")" || fail "keep/$(basename "$f") differs"
done
cmp -s "$TMP/src/big" "$A/keep/big2" || fail "keep/big2 differs"
umount_vol "$A"
check_eq "$(gcj leaked --min-age 0)" 0 "leaked objects after --delete"
check_eq "$(jq .live "$TMP/gc.json")" "$(count_objects)" "every object left is live"
if [ "$GRANARY_STORAGE" = file ]; then
	# a temp file a killed put left, aged: gc --delete removes it
	mkdir -p "${DATA_DIRS%% *}/blocks"
	echo half >"${DATA_DIRS%% *}/blocks/.granary-tmp.00000000deadbeef"
	touch -d '2 hours ago' "${DATA_DIRS%% *}/blocks/.granary-tmp.00000000deadbeef"
	check_eq "$(gcj temps)" 1 "stale temp files gc reports"
	check_eq "$(gcj temps_deleted --delete)" 1 "stale temp files gc deletes"
	# (a put the kills cut short may have left a young one: it stays)
	[ ! -e "${DATA_DIRS%% *}/blocks/.granary-tmp.00000000deadbeef" ] ||
		fail "the stale temp file is still there after gc --delete"
fi
"$GRANARY" fsck "$META" --deep -q >"$TMP/fsck.out" 2>&1 ||
	fail "fsck --deep after the kills and gc: $(cat "$TMP/fsck.out")"
ok "--writeback: a killed write leaked $leaked objects, gc deleted them, every file reads back, fsck --deep is clean"

# bad input
expect_exit 2 "unrecognized|unknown|invalid" "$GRANARY" gc --bogus "$META"
expect_exit 2 "min-age" "$GRANARY" gc --min-age soon "$META"
expect_exit 2 "threads" "$GRANARY" gc --threads 0 "$META"
expect_exit 2 "META_URL" "$GRANARY" gc
db=$(next_db)
redis-cli -s "$GRANARY_TEST_REDIS_SOCK" -n "$db" flushdb >/dev/null
expect_exit 1 "no granary volume" "$GRANARY" gc "$GRANARY_TEST_REDIS?db=$db"
expect_exit 1 "cannot reach redis" "$GRANARY" gc "redis://127.0.0.1:1/0"
ok "bad flags exit 2; no volume or no redis exit 1 with a message"

# a store that names another volume: gc must not compare, let alone delete
OTHER_META=$META
OTHER_STORAGE=$STORAGE
new_volume gc2
rcli hset setting storage "$OTHER_STORAGE" >/dev/null
expect_exit 1 "belongs to another volume" "$GRANARY" gc "$META" --delete --min-age 0
META=$OTHER_META
check_eq "$(gcj leaked --min-age 0)" 0 "leaked objects of the first volume"
ok "gc refuses a store whose marker names another volume"
