#!/bin/bash
# run-unit.sh BUILD_DIR - run every Criterion unit test with a real Redis and
# a real s3rver started for the run (temporary directory, stopped at exit).
# The test programs run several at once (env GRANARY_UNIT_JOBS, default 3;
# the longest first), each program's cases one after another (--jobs 1:
# cases share databases, and some count the server's commands). Each slot
# has a Redis of its own, so two programs never share a database; the
# s3rver and the V4 front are shared (test_objstore, the one user, takes a
# prefix of its own). A program's output is printed whole when it ends.
# The Python module's tests (tools/python/tests: unittest, fakes of the
# mount, torch cases with Debian's python3-torch) run as one more program.
set -u
O=${1:-build}
. "$(dirname "$0")/lib/services.sh"
JOBS=${GRANARY_UNIT_JOBS:-3}
case $JOBS in '' | *[!0-9]* | 0) echo "unit: bad GRANARY_UNIT_JOBS '$JOBS'" >&2; exit 2 ;; esac
TMP=$(mktemp -d /tmp/granary-unit.XXXXXX)
declare -A JOB_RUN=() # PID of a running program -> its index in RUNS
stop_jobs() {
	local p
	for p in "${!JOB_RUN[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${!JOB_RUN[@]}"; do wait "$p" 2>/dev/null; done
}
trap 'stop_jobs; svc_stop_all; rm -rf "$TMP"' EXIT
trap 'exit 130' INT TERM
svc_start_s3rver "$TMP/s3" granary-test || exit 1
# the V4-verifying front (test_objstore s3v4_*), with an s3rver of its own
svc_start_s3v4 "$TMP/s3v4" granary-test || exit 1

# the runs: "PROGRAM [ENV=VALUE]", the longest first (their seconds here,
# on 2 cores: test_meta 47, test_objstore 44, test_chunkstore 6, ...)
RUNS=()
for t in test_meta test_objstore; do
	[ -x "$O/tests/$t" ] && RUNS+=("$t")
done
# the metadata engine again with its scripts run by EVALSHA, as on a
# server without functions (Redis < 7)
[ -x "$O/tests/test_meta" ] && RUNS+=("test_meta GRANARY_META_EVALSHA=1")
for t in "$O"/tests/test_*; do
	[ -x "$t" ] || continue
	case ${t##*/} in test_meta | test_objstore) continue ;; esac
	RUNS+=("${t##*/}")
done
RUNS+=("python")
[ "$JOBS" -le "${#RUNS[@]}" ] || JOBS=${#RUNS[@]}

declare -a S_REDIS S_SOCK S_BUSY R_SLOT R_T0
for k in $(seq 1 "$JOBS"); do
	svc_start_redis "$TMP/r$k" || exit 1
	S_REDIS[$k]=$GRANARY_TEST_REDIS S_SOCK[$k]=$GRANARY_TEST_REDIS_SOCK S_BUSY[$k]=0
done

launch() {
	local i=$1 k prog env
	read -r prog env <<<"${RUNS[$i]}"
	for k in $(seq 1 "$JOBS"); do [ "${S_BUSY[$k]}" = 0 ] && break; done
	S_BUSY[$k]=1 R_SLOT[$i]=$k R_T0[$i]=${EPOCHREALTIME/,/.}
	if [ "$prog" = python ]; then
		# Debian's python3, where python3-torch is (not one of PATH's)
		(cd "$(dirname "$0")/../tools/python" && exec /usr/bin/python3 -B -m unittest discover -s tests) \
			>"$TMP/$i.log" 2>&1 </dev/null &
	else
		env ${env:+"$env"} GRANARY_TEST_REDIS="${S_REDIS[$k]}" \
			GRANARY_TEST_REDIS_SOCK="${S_SOCK[$k]}" \
			"$O/tests/$prog" --jobs 1 >"$TMP/$i.log" 2>&1 </dev/null &
	fi
	JOB_RUN[$!]=$i
}

fail=0 n=0 next=0 start=${EPOCHREALTIME/,/.}
while [ "$next" -lt "${#RUNS[@]}" ] || [ "${#JOB_RUN[@]}" -gt 0 ]; do
	while [ "$next" -lt "${#RUNS[@]}" ] && [ "${#JOB_RUN[@]}" -lt "$JOBS" ]; do
		launch "$next"
		next=$((next + 1))
	done
	pid=""
	wait -n -p pid "${!JOB_RUN[@]}"
	rc=$?
	[ -n "$pid" ] || continue
	i=${JOB_RUN[$pid]}
	unset "JOB_RUN[$pid]"
	S_BUSY[${R_SLOT[$i]}]=0
	read -r prog env <<<"${RUNS[$i]}"
	secs=$(awk -v a="${R_T0[$i]}" -v b="${EPOCHREALTIME/,/.}" 'BEGIN { printf "%.0f", b - a }')
	n=$((n + 1))
	if [ "$rc" = 0 ]; then
		echo "== $prog${env:+, $env} (${secs}s)"
	else
		fail=$((fail + 1))
		echo "== $prog${env:+, $env} (${secs}s): FAILED (exit $rc)"
	fi
	cat "$TMP/$i.log"
done
echo "unit: total $(awk -v a="$start" -v b="${EPOCHREALTIME/,/.}" 'BEGIN { printf "%.0f", b - a }')s"
echo "unit: $((n - fail)) passed, $fail failed"
[ "$fail" = 0 ]
