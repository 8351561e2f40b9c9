#!/bin/bash
# run.sh BUILD_DIR [TEST...] - run the integration tests on real mounts.
# Runs every tests/integ/t*.sh (or the named ones) with GRANARY_STORAGE=file
# and again with =s3 (a script whose second line is "# storage: file" runs
# once), each under a timeout, several at once, and ends with the slowest
# runs, "integ: total Ns" and "integ: N passed, M failed" (and the checks
# skipped: lines "ok N # skip WHY" of lib.sh's skip, listed under their
# test). Env GRANARY_STORAGES overrides "file s3"; GRANARY_INTEG_JOBS the
# number of runs at once (default: 3 per core, at least 4, at most 8).
#
# Parallel runs, and what keeps them apart:
# - Each of the JOBS slots has a Redis and an s3rver of its own, and a Redis
#   database counter of its own (lib.sh next_db): a slot runs one test at a
#   time, so a database or server is only ever used by one test, and a
#   server that died is started again before the slot's next test. One
#   V4-verifying front (svc_start_s3v4) serves all; its users take
#   prefixes of their own.
# - Each run has a directory of its own ($ROOT/tNNNN-STORAGE, the test's
#   GRANARY_INTEG_ROOT): what it left mounted is swept from there only.
# - svc_free_port hands out each port once per run (SVC_PORTS_TAKEN).
# - A test with a line "# serial: WHY" in its head runs alone, at the end
#   (one that measures time or load, or touches something all tests share).
# - Longest first: the order is the last run's times ($BUILD_DIR/integ-times),
#   else tests/integ/times (measured here), else 60 s.
# Output: each run's lines are printed whole when it ends; a failure shows
# the end of its log, kept in $BUILD_DIR/integ-logs/.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
O=${1:-build}
shift || true
case $O in /*) ;; *) O=$TOP/$O ;; esac
. "$TOP/tests/lib/services.sh"

[ -x "$O/granary" ] || { echo "integ: no granary binary in '$O' (make all)" >&2; exit 1; }
[ -x "$O/tests/fsrand" ] || { echo "integ: no fsrand in '$O/tests' (make all)" >&2; exit 1; }

cores=$(nproc 2>/dev/null || echo 2)
JOBS=${GRANARY_INTEG_JOBS:-$((cores * 3 < 4 ? 4 : cores * 3 > 8 ? 8 : cores * 3))}
case $JOBS in '' | *[!0-9]* | 0) echo "integ: bad GRANARY_INTEG_JOBS '$JOBS'" >&2; exit 2 ;; esac
TIMEOUT=600
now() { echo "${EPOCHREALTIME/,/.}"; } # seconds, whatever the locale's decimal point
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.0f", b - a }'; }

ROOT=$(mktemp -d /tmp/granary-integ.XXXXXX)
chmod 0755 "$ROOT" # t0060 runs commands as nobody under it
export SVC_PORTS_TAKEN=$ROOT/ports

# Unmount what a killed test left under DIR (its daemon exits on unmount).
sweep_mounts() {
	local mp
	awk -v r="$1/" '{ m = $5; gsub(/\\040/, " ", m) } index(m, r) == 1 { print m }' \
		/proc/self/mountinfo | sort -r | while IFS= read -r mp; do
		echo "integ: lazily unmounting leftover '$mp'" >&2
		fusermount3 -uz "$mp" 2>/dev/null || umount -l "$mp" 2>/dev/null
	done
}

declare -A JOB_RUN=()  # PID of a running job -> its index in RUNS
stop_jobs() {
	local p
	for p in "${!JOB_RUN[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${!JOB_RUN[@]}"; do wait "$p" 2>/dev/null; done
	JOB_RUN=()
}
cleanup() {
	stop_jobs
	sweep_mounts "$ROOT"
	svc_stop_all
	rm -rf "$ROOT" 2>/dev/null
}
trap cleanup EXIT
trap 'echo "integ: interrupted: stopping ${#JOB_RUN[@]} runs"; exit 130' INT TERM

if [ $# -gt 0 ]; then
	tests=("$@")
else
	tests=("$HERE"/t[0-9]*.sh)
fi

# ------------------------------------------------------------------------
# the runs, longest first, the serial ones last

declare -A SECS=() # "name storage" -> seconds, from tests/integ/times then the last run
for f in "$HERE/times" "$O/integ-times"; do
	[ -f "$f" ] || continue
	while read -r n s secs _; do
		case $n in '' | '#'*) continue ;; esac
		SECS["$n $s"]=$secs
	done <"$f"
done

lines=()
for t in "${tests[@]}"; do
	[ -f "$t" ] || { echo "integ: no test '$t'" >&2; exit 2; }
	name=$(basename "$t" .sh)
	storages=${GRANARY_STORAGES:-file s3}
	decl=$(sed -n '2s/^# storage: *//p' "$t")
	[ -n "$decl" ] && storages=$decl
	serial=0
	sed -n '1,/^[^#]/p' "$t" | grep -q '^# serial:' && serial=1
	for st in $storages; do
		# sort keys: serial last, then the longest first, then by name
		lines+=("$serial $(printf '%06d' "${SECS["$name $st"]:-60}") $name $st $t")
	done
done
RUNS=()  # "name storage serial path"
while read -r serial _ name st t; do
	RUNS+=("$name $st $serial $t")
done < <(printf '%s\n' "${lines[@]}" | sort -k1,1n -k2,2r -k3,3 -k4,4)
[ "${#RUNS[@]}" -gt 0 ] || { echo "integ: no tests" >&2; exit 2; }
[ "$JOBS" -le "${#RUNS[@]}" ] || JOBS=${#RUNS[@]}

# ------------------------------------------------------------------------
# the services: one Redis and one s3rver per slot, one V4 front for all

declare -a S_REDIS S_SOCK S_REDIS_PID S_S3 S_S3_PORT S_S3_PID S_BUSY
start_slot_redis() {
	svc_start_redis "$ROOT/s$1/redis" || return 1
	S_REDIS[$1]=$GRANARY_TEST_REDIS S_SOCK[$1]=$GRANARY_TEST_REDIS_SOCK
	S_REDIS_PID[$1]=$GRANARY_TEST_REDIS_PID
}
start_slot_s3() {
	SVC_S3RVER_DATA=$ROOT/s$1/s3/data svc_start_s3rver "$ROOT/s$1/s3" granary-test || return 1
	S_S3[$1]=$GRANARY_TEST_S3 S_S3_PORT[$1]=$GRANARY_TEST_S3_PORT
	S_S3_PID[$1]=$GRANARY_TEST_S3_PID
}
up=$(now)
for k in $(seq 1 "$JOBS"); do
	start_slot_redis "$k" || exit 1
	start_slot_s3 "$k" || exit 1
	S_BUSY[$k]=0
done
svc_start_s3v4 "$ROOT/s3v4" granary-test || exit 1
export GRANARY_BUILD=$O

# A server of a slot that died takes the slot's later tests with it: say
# which test it died under (a failure of that test), with the end of its
# log, and start it again (the s3rver on a new port, over the same data).
# check_services SLOT TEST: 1 when one had died.
check_services() {
	local k=$1 ok=0 log
	if ! kill -0 "${S_S3_PID[$k]}" 2>/dev/null; then
		log=$ROOT/s$k/s3/s3rver.log
		echo "integ: the s3rver of slot $k (pid ${S_S3_PID[$k]}) died during $2; the end of its log:"
		tail -n 30 "$log" | sed 's/^/    | /'
		mv "$log" "$log.${S_S3_PID[$k]}"
		start_slot_s3 "$k" || exit 1
		ok=1
	fi
	if ! kill -0 "${S_REDIS_PID[$k]}" 2>/dev/null; then
		log=$ROOT/s$k/redis/redis.log
		echo "integ: the redis-server of slot $k (pid ${S_REDIS_PID[$k]}) died during $2; the end of its log:"
		tail -n 30 "$log" | sed 's/^/    | /'
		mv "$log" "$log.${S_REDIS_PID[$k]}"
		start_slot_redis "$k" || exit 1
		ok=1
	fi
	return $ok
}

# ------------------------------------------------------------------------
# start and finish runs

declare -a R_SLOT R_DIR R_T0 R_SECS
# launch I: start run I on a free slot, in the background
launch() {
	local i=$1 name st serial t k dir
	read -r name st serial t <<<"${RUNS[$i]}"
	for k in $(seq 1 "$JOBS"); do [ "${S_BUSY[$k]}" = 0 ] && break; done
	S_BUSY[$k]=1
	dir=$ROOT/${name%%-*}-$st
	[ -e "$dir" ] && dir=$dir-$i # two tests of one number
	mkdir -p "$dir" && chmod 0755 "$dir"
	R_SLOT[$i]=$k R_DIR[$i]=$dir R_T0[$i]=$(now)
	GRANARY_STORAGE=$st GRANARY_INTEG_ROOT=$dir \
		GRANARY_INTEG_DBFILE=$ROOT/s$k/dbcounter \
		GRANARY_TEST_REDIS=${S_REDIS[$k]} GRANARY_TEST_REDIS_SOCK=${S_SOCK[$k]} \
		GRANARY_TEST_S3=${S_S3[$k]} GRANARY_TEST_S3_PORT=${S_S3_PORT[$k]} \
		GRANARY_TEST_S3_DATA=$ROOT/s$k/s3/data \
		timeout -k 10 "$TIMEOUT" bash "$t" >"$ROOT/$name-$st.log" 2>&1 </dev/null &
	JOB_RUN[$!]=$i
}

pass=0 failed=0 failures="" skipped=0
mkdir -p "$O/integ-logs" && rm -f "$O"/integ-logs/*.log
# finish I RC: the run I ended with RC: sweep, check the slot, report
finish() {
	local i=$1 rc=$2 name st serial t k log secs nskip
	read -r name st serial t <<<"${RUNS[$i]}"
	k=${R_SLOT[$i]}
	log=$ROOT/$name-$st.log
	sweep_mounts "${R_DIR[$i]}"
	if ! check_services "$k" "$name [$st]" && [ "$rc" = 0 ]; then
		rc=1 # a crash a test did not notice is still a failure
		echo "a server of its slot died during this test" >>"$log"
	fi
	S_BUSY[$k]=0
	secs=$(since "${R_T0[$i]}")
	R_SECS[$i]=$secs
	nskip=$(grep -c '^ *ok [0-9]* # skip ' "$log")
	skipped=$((skipped + nskip))
	if [ "$rc" = 0 ]; then
		pass=$((pass + 1))
		if [ "$nskip" = 0 ]; then
			echo "ok   $name [$st] (${secs}s)"
		else
			echo "ok   $name [$st] (${secs}s, $nskip skipped)"
			sed -n 's/^ *ok [0-9]* # skip /    skipped: /p' "$log"
		fi
	else
		failed=$((failed + 1))
		failures="$failures ${name}[$st]"
		[ "$rc" = 124 ] && echo "  (timed out after $TIMEOUT s)" >>"$log"
		echo "FAIL $name [$st] (exit $rc, ${secs}s; log: $O/integ-logs/$name-$st.log)"
		sed 's/^/    | /' "$log" | tail -n 60
		cp "$log" "$O/integ-logs/$name-$st.log"
	fi
}

echo "integ: ${#RUNS[@]} runs, $JOBS at once (servers up in $(since "$up")s)"
start=$(now)
next=0 alone=0
while [ "$next" -lt "${#RUNS[@]}" ] || [ "${#JOB_RUN[@]}" -gt 0 ]; do
	while [ "$next" -lt "${#RUNS[@]}" ] && [ "${#JOB_RUN[@]}" -lt "$JOBS" ] && [ "$alone" = 0 ]; do
		read -r _ _ serial _ <<<"${RUNS[$next]}"
		if [ "$serial" = 1 ]; then
			[ "${#JOB_RUN[@]}" = 0 ] || break # wait for the others to end
			alone=1
		fi
		launch "$next"
		next=$((next + 1))
	done
	pid=""
	wait -n -p pid "${!JOB_RUN[@]}"
	rc=$?
	[ -n "$pid" ] || continue # a signal: its trap exits
	i=${JOB_RUN[$pid]}
	unset "JOB_RUN[$pid]"
	alone=0
	finish "$i" "$rc"
done
total=$(since "$start")

# the times of this run, for the next one's order
{
	for i in "${!RUNS[@]}"; do
		read -r name st _ <<<"${RUNS[$i]}"
		echo "$name $st ${R_SECS[$i]}"
	done
	[ -f "$O/integ-times" ] && cat "$O/integ-times"
} | awk '!seen[$1 " " $2]++' | sort >"$O/integ-times.new" &&
	mv "$O/integ-times.new" "$O/integ-times"

echo "integ: slowest runs:"
for i in "${!RUNS[@]}"; do
	read -r name st _ <<<"${RUNS[$i]}"
	echo "${R_SECS[$i]} $name [$st]"
done | sort -k1,1nr | head -n 10 | awk '{ printf "  %5ss  %s %s\n", $1, $2, $3 }'
echo "integ: total ${total}s${failures:+; failed:$failures}"
echo "integ: $pass passed, $failed failed, $skipped checks skipped"
[ $failed = 0 ]
