#!/bin/bash
# compact.sh BUILD_DIR - what compaction pays back for a log appended to
# BENCH_COMPACT_LINES times (default 3000), one open and close each, as a
# training log is written, on s3rver: slice records, Redis bytes of its
# chunk list, the objects it is read from, and a cold read (store GETs and
# time), for a client mounted with --no-compact, then after
# `granary gc --compact`, and for a client that compacts in the
# background (the default). Prints a table and writes it to bench/results.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/.." && pwd)
O=${1:-build}
case $O in /*) ;; *) O=$TOP/$O ;; esac
. "$HERE/lib.sh"
. "$TOP/tests/lib/services.sh"
LINES=${BENCH_COMPACT_LINES:-3000}

[ -x "$O/granary" ] || { say "compact: no $O/granary (make all)"; exit 1; }
TMP=$(mktemp -d /var/tmp/granary-compact.XXXXXX)
MP=$TMP/mnt
cleanup() {
	mountpoint -q "$MP" && { "$O/granary" umount "$MP" >/dev/null 2>&1 || fusermount3 -uz "$MP"; }
	svc_stop_all
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
svc_start_redis "$TMP/redis" >/dev/null || exit 1
svc_start_s3rver "$TMP/s3" granary >/dev/null || exit 1
mkdir -p "$MP"
db=0

gmount() { # META [ARGS]: mount at $MP with a fresh, private cache
	local meta=$1; shift
	rm -rf "$TMP/cache"
	"$O/granary" mount "$meta" "$MP" --log "$TMP/mount.log" \
		--cache-dir "$TMP/cache" "$@" >/dev/null ||
		{ say "compact: mount failed (see $TMP/mount.log)"; exit 1; }
}
gumount() { "$O/granary" umount "$MP" >/dev/null; }
stat_of() {
	getfattr --absolute-names --only-values -n granary.stats "$MP" 2>/dev/null |
		tr -d ' \n' | sed -n "s/.*\"$1\":{[^}]*\"$2\":\([0-9]*\).*/\1/p"
}

# measure META INO: "records= redis_bytes= objects= gets= read_ms=" of
# chunk 0 of INO, the read cold (fresh mount, fresh cache, no page cache)
measure() {
	local meta=$1 ino=$2 n=${1##*db=} key bytes mem t0 t1 gets
	key="c${ino}_0"
	bytes=$(redis-cli -s "$GRANARY_TEST_REDIS_SOCK" -n "$n" strlen "$key")
	mem=$(redis-cli -s "$GRANARY_TEST_REDIS_SOCK" -n "$n" memory usage "$key")
	if [ "$bytes" = 0 ]; then
		# short enough for the tail field of its inode's hash: its bytes
		bytes=$(redis-cli -s "$GRANARY_TEST_REDIS_SOCK" -n "$n" \
			hstrlen "n$((ino / 32))" $((32 + ino % 32)))
		mem=$bytes
	fi
	gmount "$meta" --read-only
	sync
	echo 3 >/proc/sys/vm/drop_caches
	t0=$(now)
	cat "$MP/log" >/dev/null
	t1=$(now)
	gets=$(stat_of store gets)
	gumount
	# objects: distinct packs and slices its records name (33-byte
	# packed records, 17-byte whole slices: the count is the records')
	echo "records=$(((bytes + 32) / 33)) redis_bytes=${mem:-0} gets=$gets read_ms=$(echo "($t1 - $t0) * 1000" | bc -l | xargs printf '%.0f')"
}

# write META ARGS: the log of $LINES lines through a mount with ARGS
write_log() {
	local meta=$1; shift
	gmount "$meta" "$@"
	: >"$MP/log"
	for i in $(seq 1 "$LINES"); do
		echo "step $i loss 0.$RANDOM lr 3e-4 tokens $((i * 4096))" >>"$MP/log"
	done
	stat -c %i "$MP/log"
	gumount
}

new_vol() {
	db=$((db + 1))
	local meta="$GRANARY_TEST_REDIS?db=$db"
	"$O/granary" format "$meta" "compact$db" \
		--storage "$GRANARY_TEST_S3/granary/v$db" --force >/dev/null ||
		{ say "compact: format failed"; exit 1; }
	echo "$meta"
}

say "compact: $LINES appends with --no-compact"
M1=$(new_vol)
ino=$(write_log "$M1" --no-compact)
BEFORE=$(measure "$M1" "$ino")
say "  $BEFORE"
say "compact: granary gc --compact"
t0=$(now)
"$O/granary" gc "$M1" --compact -q --json >"$TMP/gc.json" || { say "compact: gc failed"; exit 1; }
t1=$(now)
GC_S=$(echo "$t1 - $t0" | bc -l | xargs printf '%.2f')
AFTER=$(measure "$M1" "$ino")
say "  $AFTER (gc took ${GC_S} s)"
say "compact: $LINES appends, compacting in the background"
M2=$(new_vol)
ino2=$(write_log "$M2")
BG=$(measure "$M2" "$ino2")
say "  $BG"

row() { # NAME LINE
	echo "| $1 | $(field "$2" records) | $(field "$2" redis_bytes) | $(field "$2" gets) | $(field "$2" read_ms) |"
}
OUT=$TOP/bench/results/compact-$(date +%Y-%m-%d-%H%M).md
{
	echo "# Compaction: a log appended to $LINES times ($(date -u +%FT%TZ), $(nproc) cores)"
	echo
	echo "\`echo ... >> log\`, one open and close each, on s3rver. The chunk list's slice records, its Redis memory (MEMORY USAGE of c<ino>_0, or the bytes of the tail field of its inode's hash once it is that short), and a cold read of the whole log through a fresh read-only mount with an empty cache and no page cache: object GETs and milliseconds. \`gc --compact\` took ${GC_S} s."
	echo
	echo "| log | slice records | Redis bytes | cold read GETs | cold read ms |"
	echo "|---|---|---|---|---|"
	row "written with --no-compact" "$BEFORE"
	row "the same, after granary gc --compact" "$AFTER"
	row "written by a client that compacts in the background" "$BG"
} | tee "$OUT"
say "compact: wrote $OUT"
