# shellcheck shell=bash
# bench/lib/slowstore.sh - sourced by a benchmark (after
# tests/lib/services.sh): a store that answers like a real S3 region,
# s3rver on loopback behind build/bench/slowproxy (bench/README.md,
# "slowproxy"). Every process is stopped by its PID.
#
# slowstore_start DIR BUCKET... [-- PROXY OPTIONS...]: s3rver with the
#   BUCKETs (objects in DIR/s3/data), then slowstore_proxy DIR/proxy with
#   the OPTIONS. Also exports SLOWSTORE_RAW_URL (s3+http://127.0.0.1:PORT:
#   s3rver itself, no proxy) and GRANARY_S3_ACCESS_KEY/SECRET_KEY.
# slowstore_proxy DIR [PROXY OPTIONS...]: one more proxy in front of the
#   same s3rver, its log, stats and messages in DIR. The settings are the
#   environment's (defaults: a real region's), then OPTIONS, which win:
#     SLOWSTORE_DELAY_MS (30)  SLOWSTORE_JITTER_MS (0)
#     SLOWSTORE_CONN_MBPS (80) SLOWSTORE_TOTAL_MBPS (0: none; the
#     benchmark sets it)
#   Exports, for this proxy (save them before starting another):
#     SLOWSTORE_URL    s3+http://127.0.0.1:PORT (add /BUCKET/PREFIX)
#     SLOWSTORE_PORT, SLOWSTORE_PID
#     SLOWSTORE_LOG    a line per request: METHOD TARGET STATUS REQ_BODY
#                      RESP_BODY TTFB_MS MS
#     SLOWSTORE_STATS  the counters, written by slowstore_stats
#     SLOWSTORE_DESC   the settings in words, for a report
# slowstore_stats [KEY]: the current proxy's counters now (SIGUSR1, then
#   the file), or the value of one (requests_get, body_out, get_max ...).
# slowstore_mark [LOG]: the log's line count now; slowstore_gets FROM
#   PREFIX [LOG]: the log's successful GETs of keys under /PREFIX after
#   line FROM, as "count bytes distinct_keys most_per_key" (LOG: the
#   current proxy's).
# slowstore_stop: stop every proxy (SIGTERM: their final stats) and the
#   s3rver that slowstore_start started.
#
# The benchmark's EXIT trap must still call svc_stop_all (which stops
# anything left); O is the build directory (bench scripts set it), or
# SLOWPROXY the binary.

SLOWSTORE_PIDS=""
SLOWSTORE_S3_PID=""

# slowstore_forget PID: drop PID from the services svc_stop_all stops
slowstore_forget() {
	local p rest=""
	for p in $SVC_PIDS; do [ "$p" = "$1" ] || rest="$rest $p"; done
	SVC_PIDS=$rest
}

slowstore_start() {
	local dir=$1 buckets=()
	shift
	while [ $# -gt 0 ] && [ "$1" != -- ]; do buckets+=("$1"); shift; done
	[ $# -gt 0 ] && shift
	svc_start_s3rver "$dir/s3" "${buckets[@]}" >/dev/null || return 1
	SLOWSTORE_S3_PID=$GRANARY_TEST_S3_PID
	export SLOWSTORE_RAW_URL=$GRANARY_TEST_S3
	slowstore_proxy "$dir/proxy" "$@"
}

slowstore_proxy() {
	local dir=$1 bin=${SLOWPROXY:-${O:-build}/bench/slowproxy} pid port
	shift
	[ -x "$bin" ] || { echo "slowstore: no slowproxy at '$bin' (make all)" >&2; return 1; }
	[ -n "${GRANARY_TEST_S3_PORT:-}" ] || { echo "slowstore: no s3rver started" >&2; return 1; }
	mkdir -p "$dir"
	: >"$dir/requests.log"
	"$bin" --listen 127.0.0.1:0 --target "127.0.0.1:$GRANARY_TEST_S3_PORT" \
		--delay-ms "${SLOWSTORE_DELAY_MS:-30}" --jitter-ms "${SLOWSTORE_JITTER_MS:-0}" \
		--conn-mbps "${SLOWSTORE_CONN_MBPS:-80}" --total-mbps "${SLOWSTORE_TOTAL_MBPS:-0}" \
		--log "$dir/requests.log" --stats "$dir/stats" "$@" \
		>"$dir/port" 2>"$dir/proxy.err" &
	pid=$!
	SVC_PIDS="$SVC_PIDS $pid"
	SLOWSTORE_PIDS="$SLOWSTORE_PIDS $pid"
	for _ in $(seq 1 100); do
		port=$(head -1 "$dir/port" 2>/dev/null)
		[ -n "$port" ] && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	[ -n "$port" ] || { echo "slowstore: the proxy did not start: $(cat "$dir/proxy.err")" >&2; return 1; }
	export SLOWSTORE_URL=s3+http://127.0.0.1:$port SLOWSTORE_PORT=$port SLOWSTORE_PID=$pid
	export SLOWSTORE_LOG=$dir/requests.log SLOWSTORE_STATS=$dir/stats
	SLOWSTORE_DESC=$(slowstore_describe "${SLOWSTORE_DELAY_MS:-30}" "${SLOWSTORE_JITTER_MS:-0}" \
		"${SLOWSTORE_CONN_MBPS:-80}" "${SLOWSTORE_TOTAL_MBPS:-0}" "$@")
	export SLOWSTORE_DESC
}

# slowstore_describe DELAY JITTER CONN TOTAL [OPTIONS...]: in words
slowstore_describe() {
	local d=$1 j=$2 c=$3 t=$4 r=""
	shift 4
	while [ $# -gt 0 ]; do
		case $1 in
		--delay-ms) d=$2; shift ;;
		--jitter-ms) j=$2; shift ;;
		--conn-mbps) c=$2; shift ;;
		--total-mbps) t=$2; shift ;;
		--responses-only) r=", responses only" ;;
		esac
		shift
	done
	printf '%s ms first byte' "$d"
	[ "$j" = 0 ] || printf ' (+0..%s)' "$j"
	if [ "$c" = 0 ] && [ "$t" = 0 ]; then
		printf ', no caps'
	else
		[ "$c" = 0 ] || printf ', %s MB/s a connection' "$c"
		[ "$t" = 0 ] || printf ', %s MB/s in all' "$t"
	fi
	printf '%s\n' "$r"
}

slowstore_stats() {
	rm -f "$SLOWSTORE_STATS"
	kill -USR1 "$SLOWSTORE_PID" 2>/dev/null || return 1
	for _ in $(seq 1 200); do
		[ -f "$SLOWSTORE_STATS" ] && break
		sleep 0.05
	done
	[ -f "$SLOWSTORE_STATS" ] || { echo "slowstore: no stats from the proxy" >&2; return 1; }
	if [ $# -gt 0 ]; then
		sed -n "s/^$1=//p" "$SLOWSTORE_STATS"
	else
		grep -v '^key ' "$SLOWSTORE_STATS"
	fi
}

slowstore_mark() { wc -l <"${1:-$SLOWSTORE_LOG}"; }

slowstore_gets() {
	tail -n +"$(($1 + 1))" "${3:-$SLOWSTORE_LOG}" |
		awk -v p="/$2" '$1 == "GET" && index($2, p) == 1 && $3 ~ /^2/ {
			sub(/\?.*/, "", $2); n++; b += $5; if (++k[$2] > m) m = k[$2]
		} END { d = 0; for (x in k) d++; printf "%d %d %d %d\n", n, b, d, m }'
}

slowstore_stop() {
	local p
	for p in $SLOWSTORE_PIDS; do kill -TERM "$p" 2>/dev/null; done
	for p in $SLOWSTORE_PIDS; do wait "$p" 2>/dev/null; slowstore_forget "$p"; done
	SLOWSTORE_PIDS=""
	if [ -n "$SLOWSTORE_S3_PID" ]; then
		kill "$SLOWSTORE_S3_PID" 2>/dev/null
		wait "$SLOWSTORE_S3_PID" 2>/dev/null
		slowstore_forget "$SLOWSTORE_S3_PID"
		SLOWSTORE_S3_PID=""
	fi
	return 0
}
