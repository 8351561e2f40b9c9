#!/bin/bash
# statlat.sh BUILD_DIR - stat and readdir latency during a big save.
#
# A checkpoint save (dd of BENCH_STATLAT_GIB GiB, default 4, with
# conv=fsync) into a directory while another process stats the file and
# lists the directory every 10 ms (build/bench/statlat): the latencies
# (p50, p99, max) through granary on a file:// pool and on s3rver, against
# a FUSE passthrough on the local disk (build/bench/passthrough -w) in the
# same run. Target (issue 20): granary's p99 and max at most 1.5x the
# passthrough's. Prints a table and writes it to bench/results.
#
# s3rver runs on the same two cores and takes 1.2-1.5 of them during the
# save (granary about 0.25). A real store takes none of the client's CPU,
# so the row granary-s3 runs s3rver at nice 19 (it gets what the client
# leaves); granary-s3-shared runs it at the client's priority, where the
# latency measures the scheduler more than granary.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/.." && pwd)
O=${1:-build}
case $O in /*) ;; *) O=$TOP/$O ;; esac
. "$HERE/lib.sh"
. "$TOP/tests/lib/services.sh"
GIB=${BENCH_STATLAT_GIB:-4}
ROUNDS=${BENCH_STATLAT_ROUNDS:-1}
TARGETS=${BENCH_STATLAT_TARGETS:-passthrough granary-file granary-s3 granary-s3-shared}

for b in granary bench/statlat bench/passthrough; do
	[ -x "$O/$b" ] || { say "statlat: no $O/$b (make all)"; exit 1; }
done
TMP=$(mktemp -d /var/tmp/granary-statlat.XXXXXX)
TMP=$(realpath "$TMP")
MOUNTS=""
cleanup() {
	for mp in $MOUNTS; do
		mountpoint -q "$mp" && { "$O/granary" umount "$mp" >/dev/null 2>&1 || fusermount3 -uz "$mp"; }
	done
	svc_stop_all
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

svc_start_redis "$TMP/redis" >/dev/null || exit 1
svc_start_s3rver "$TMP/s3" granary >/dev/null || exit 1
say "statlat: making a ${GIB} GiB source file"
head -c $((GIB << 30)) /dev/urandom >"$TMP/src"

# save MP NAME: one save into MP/d while statlat watches; "MiB/s n= p50= ..."
save() {
	local mp=$1 id=$2 t0 t1 lat
	mkdir -p "$mp/d"
	rm -f "$TMP/stop" "$mp/d/ckpt"
	cat "$TMP/src" >/dev/null # from the page cache, for every target
	"$O/bench/statlat" "$mp/d" "$mp/d/ckpt" "$TMP/stop" 10 >"$TMP/lat-$id" &
	local pid=$!
	sleep 1
	t0=$(now)
	if ! dd if="$TMP/src" of="$mp/d/ckpt" bs=4M conv=fsync status=none; then
		say "statlat: the save on $id failed"
		touch "$TMP/stop"
		wait "$pid"
		return
	fi
	t1=$(now)
	sleep 1
	touch "$TMP/stop"
	wait "$pid"
	lat=$(cat "$TMP/lat-$id")
	echo "$(echo "$GIB * 1024 / ($t1 - $t0)" | bc -l | xargs printf '%.0f') $lat"
	rm -f "$mp/d/ckpt"
}

gmount() { # META MP
	"$O/granary" mount "$1" "$2" --log "$TMP/$(basename "$2").log" \
		--cache-dir "$TMP/cache-$(basename "$2")" >/dev/null ||
		{ say "statlat: granary mount failed (see $TMP/$(basename "$2").log)"; return 1; }
	MOUNTS="$MOUNTS $2"
}

# s3nice N: every thread of s3rver (started by us, $GRANARY_TEST_S3_PID) at nice N
s3nice() {
	local t
	for t in /proc/"$GRANARY_TEST_S3_PID"/task/*; do
		renice -n "$1" -p "${t##*/}" >/dev/null 2>&1
	done
}

declare -A RES
db=1
for r in $(seq 1 "$ROUNDS"); do
	for id in $TARGETS; do
		mp=$TMP/mnt-$id
		mkdir -p "$mp"
		case $id in
		passthrough)
			mkdir -p "$TMP/pt"
			"$O/bench/passthrough" -w "$TMP/pt" "$mp" || continue
			MOUNTS="$MOUNTS $mp" ;;
		granary-file | granary-s3 | granary-s3-shared)
			meta="$GRANARY_TEST_REDIS?db=$db"
			db=$((db + 1))
			store="file://$TMP/pool-$db"
			case $id in
			granary-s3) store="$GRANARY_TEST_S3/granary/v$db"; s3nice 19 ;;
			granary-s3-shared) store="$GRANARY_TEST_S3/granary/v$db"; s3nice 0 ;;
			esac
			"$O/granary" format "$meta" "statlat$db" --storage "$store" --force >/dev/null || continue
			gmount "$meta" "$mp" || continue ;;
		esac
		say "statlat: round $r, $id"
		RES[$id,$r]=$(save "$mp" "$id")
		[ -n "${RES[$id,$r]}" ] || unset "RES[$id,$r]"
		say "  ${RES[$id,$r]}"
		# granary umount waits for the daemon (its deletes of the
		# checkpoint's objects) before the services stop
		case $id in
		passthrough) fusermount3 -u "$mp" ;;
		*) "$O/granary" umount "$mp" >/dev/null ;;
		esac
	done
done

# the median round of each target (by p99)
pick() { # ID KEY: median over the rounds of KEY= of the result lines
	local id=$1 key=$2 vals=() r
	for r in $(seq 1 "$ROUNDS"); do
		vals+=("$(field "${RES[$id,$r]:-}" "$key")")
	done
	mid "${vals[@]}"
}
OUT=$TOP/bench/results/statlat-$(date +%Y-%m-%d-%H%M).md
{
	echo "# stat + readdir latency during a ${GIB} GiB save ($(date -u +%FT%TZ), $(nproc) cores)"
	echo
	echo "A dd conv=fsync of ${GIB} GiB into DIR; every 10 ms another process stats DIR/ckpt and lists DIR (bench/statlat). Milliseconds, median of $ROUNDS round(s); ratios against the FUSE passthrough of the same run (target: p99 and max at most 1.5x)."
	echo
	echo "| target | save MiB/s | samples | p50 | p99 | max | p99 / passthrough | max / passthrough |"
	echo "|---|---|---|---|---|---|---|---|"
	pp99=$(pick passthrough p99) pmax=$(pick passthrough max)
	for id in $TARGETS; do
		[ -n "${RES[$id,1]:-}" ] || { echo "| $id | n/a |||||||"; continue; }
		mbs=$(for r in $(seq 1 "$ROUNDS"); do echo "${RES[$id,$r]%% *}"; done | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
		p99=$(pick "$id" p99) max=$(pick "$id" max)
		r99=$(echo "$p99 / $pp99" | bc -l | xargs printf '%.2f')
		rmax=$(echo "$max / $pmax" | bc -l | xargs printf '%.2f')
		echo "| $id | $mbs | $(pick "$id" n) | $(pick "$id" p50) | $p99 | $max | ${r99}x | ${rmax}x |"
	done
} | tee "$OUT"
say "statlat: wrote $OUT"
