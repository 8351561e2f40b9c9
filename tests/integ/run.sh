#!/bin/bash
# run.sh BUILD_DIR [TEST...] - run the integration tests on real mounts.
# Starts Redis, s3rver and the V4-verifying S3 server once, runs every tests/integ/t*.sh (or the named
# ones) with GRANARY_STORAGE=file and again with =s3 (a script whose second
# line is "# storage: file" runs once), each under a timeout, and ends with
# "integ: N passed, M failed" (and the checks skipped: lines "ok N # skip
# WHY" of lib.sh's skip, listed under their test). Env GRANARY_STORAGES
# overrides "file s3".
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
O=${1:-build}
shift || true
case $O in /*) ;; *) O=$TOP/$O ;; esac
. "$TOP/tests/lib/services.sh"

[ -x "$O/granary" ] || { echo "integ: no granary binary in '$O' (make all)" >&2; exit 1; }
[ -x "$O/tests/fsrand" ] || { echo "integ: no fsrand in '$O/tests' (make all)" >&2; exit 1; }

ROOT=$(mktemp -d /tmp/granary-integ.XXXXXX)
cleanup() {
	svc_stop_all
	rm -rf "$ROOT" 2>/dev/null
}
trap cleanup EXIT
trap 'exit 130' INT TERM

svc_start_redis "$ROOT/redis" || exit 1
svc_start_s3rver "$ROOT/s3" granary-test || exit 1
svc_start_s3v4 "$ROOT/s3v4" granary-test || exit 1
export GRANARY_BUILD=$O GRANARY_INTEG_ROOT=$ROOT
export GRANARY_INTEG_DBFILE=$ROOT/dbcounter GRANARY_TEST_S3_DATA=$ROOT/s3/data
chmod 0755 "$ROOT" # t0060 runs commands as nobody under it

if [ $# -gt 0 ]; then
	tests=("$@")
else
	tests=("$HERE"/t[0-9]*.sh)
fi

# Unmount what a killed test left under ROOT (its daemon exits on unmount).
sweep_mounts() {
	local mp
	for mp in $(awk -v r="$ROOT/" 'index($5, r) == 1 { print $5 }' /proc/self/mountinfo); do
		echo "integ: lazily unmounting leftover '$mp'" >&2
		fusermount3 -uz "$mp" 2>/dev/null
	done
}

# A shared server that died takes every later test with it: say which
# test it died under (a failure of that test), with the end of its log,
# and start it again (on a new port, over the same data) for the tests
# after it.
S3_PID=$GRANARY_TEST_S3_PID
check_services() {
	kill -0 "$S3_PID" 2>/dev/null && return 0
	echo "integ: the shared s3rver (pid $S3_PID) died during $1; the end of its log:"
	tail -n 30 "$ROOT/s3/s3rver.log" | sed 's/^/    | /'
	mv "$ROOT/s3/s3rver.log" "$ROOT/s3/s3rver.log.$S3_PID"
	SVC_S3RVER_DATA=$ROOT/s3/data svc_start_s3rver "$ROOT/s3" granary-test || exit 1
	S3_PID=$GRANARY_TEST_S3_PID
	return 1
}

pass=0 failed=0 failures="" skipped=0
start=$(date +%s)
for t in "${tests[@]}"; do
	name=$(basename "$t" .sh)
	storages=${GRANARY_STORAGES:-file s3}
	decl=$(sed -n '2s/^# storage: *//p' "$t")
	[ -n "$decl" ] && storages=$decl
	for st in $storages; do
		t0=$(date +%s)
		log="$ROOT/$name-$st.log"
		GRANARY_STORAGE=$st timeout -k 10 600 bash "$t" >"$log" 2>&1
		rc=$?
		sweep_mounts
		if ! check_services "$name [$st]" && [ $rc = 0 ]; then
			rc=1 # a crash a test did not notice is still a failure
			echo "the shared s3rver died during this test" >>"$log"
		fi
		secs=$(($(date +%s) - t0))
		nskip=$(grep -c '^ *ok [0-9]* # skip ' "$log")
		skipped=$((skipped + nskip))
		if [ $rc = 0 ]; then
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
			[ $rc = 124 ] && echo "  (timed out after 600 s)" >>"$log"
			echo "FAIL $name [$st] (exit $rc, ${secs}s)"
			sed 's/^/    | /' "$log" | tail -n 60
		fi
	done
done
echo "integ: total $(($(date +%s) - start))s${failures:+; failed:$failures}"
echo "integ: $pass passed, $failed failed, $skipped checks skipped"
[ $failed = 0 ]
