#!/bin/bash
# run-unit.sh BUILD_DIR - run every Criterion unit test with a real Redis and
# a real s3rver started for the run (temporary directory, stopped at exit).
set -u
O=${1:-build}
. "$(dirname "$0")/lib/services.sh"
TMP=$(mktemp -d /tmp/granary-unit.XXXXXX)
trap 'svc_stop_all; rm -rf "$TMP"' EXIT
svc_start_redis "$TMP/redis" || exit 1
svc_start_s3rver "$TMP/s3" granary-test || exit 1
# the V4-verifying front (test_objstore s3v4_*), with an s3rver of its own
svc_start_s3v4 "$TMP/s3v4" granary-test || exit 1
fail=0; n=0
for t in "$O"/tests/test_*; do
	[ -x "$t" ] || continue
	n=$((n + 1))
	echo "== $(basename "$t")"
	"$t" --jobs 1 || fail=$((fail + 1))
done
# the metadata engine again with its scripts run by EVALSHA, as on a
# server without functions (Redis < 7)
if [ -x "$O/tests/test_meta" ]; then
	n=$((n + 1))
	echo "== test_meta, GRANARY_META_EVALSHA=1"
	GRANARY_META_EVALSHA=1 "$O/tests/test_meta" --jobs 1 ||
		fail=$((fail + 1))
fi
echo "unit: $((n - fail)) passed, $fail failed"
[ "$fail" = 0 ]
