#!/bin/bash
# store_raw.sh [BUILD_DIR] - the raw store through bench/slowproxy, the
# baseline that the benchmarks behind the proxy print beside their own
# figures (issues 33 and 34): PUTs and GETs of small and big objects by
# 1, 4 and 16 threads (build/bench/store_raw, a connection each), on
# s3rver itself, through the proxy with no delay and no cap (the proxy's
# own cost), with the model's settings (a real region: 30 ms to the first
# byte, 80 MB/s a connection), and with a total cap as well, all in one
# run; the model's objects/s beside each; and from the proxy's log, that
# each object was fetched once. Prints a table and writes it to
# bench/results/slowproxy-DATE.md. See bench/README.md, "slowproxy".
set -u -o pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
O=${1:-build}
case $O in /*) ;; *) O=$ROOT/$O ;; esac
SMALL_N=${BENCH_RAW_SMALL:-300}  # objects of 128 KiB
BIG_N=${BENCH_RAW_BIG:-32}       # objects of 4 MiB
THREADS=${BENCH_RAW_THREADS:-1 4 16}
TOTAL=${BENCH_RAW_TOTAL_MBPS:-50}
OUT=${BENCH_OUT:-$ROOT/bench/results}
STAMP=$(date +%Y-%m-%d-%H%M)

. "$ROOT/tests/lib/services.sh"
. "$HERE/lib.sh"
. "$HERE/lib/slowstore.sh"
for b in slowproxy store_raw; do
	[ -x "$O/bench/$b" ] || { say "store_raw: no $O/bench/$b (make all)"; exit 1; }
done
TMP=$(mktemp -d "${BENCH_DIR:-/var/tmp}/granary-storeraw.XXXXXX")
cleanup() {
	slowstore_stop
	svc_stop_all
	if [ "${BENCH_KEEP:-0}" = 1 ]; then say "kept $TMP"; else rm -rf "$TMP"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$OUT"

# the stores: name, URL, the proxy's settings (delay, conn, total) for the
# model, and the proxy's log (- for s3rver itself)
slowstore_start "$TMP" raw -- --delay-ms 0 --conn-mbps 0 >/dev/null || exit 1
STORES=("s3rver itself|$SLOWSTORE_RAW_URL|-|-")
STORES+=("proxy: $SLOWSTORE_DESC|$SLOWSTORE_URL|0 0 0|$SLOWSTORE_LOG")
BARE_PID=$SLOWSTORE_PID BARE_STATS=$SLOWSTORE_STATS
slowstore_proxy "$TMP/model" || exit 1
MODEL_DESC=$SLOWSTORE_DESC
STORES+=("proxy: $SLOWSTORE_DESC|$SLOWSTORE_URL|${SLOWSTORE_DELAY_MS:-30} ${SLOWSTORE_CONN_MBPS:-80} ${SLOWSTORE_TOTAL_MBPS:-0}|$SLOWSTORE_LOG")
slowstore_proxy "$TMP/capped" --total-mbps "$TOTAL" || exit 1
STORES+=("proxy: $SLOWSTORE_DESC|$SLOWSTORE_URL|${SLOWSTORE_DELAY_MS:-30} ${SLOWSTORE_CONN_MBPS:-80} $TOTAL|$SLOWSTORE_LOG")

# model DELAY CONN TOTAL THREADS BYTES: objects/s the settings allow when
# s3rver takes no time: each connection its delay, then the object at its
# cap (the lower of the connection's and the total), and all together no
# more than the total cap
model() {
	awk -v d="$1" -v c="$2" -v t="$3" -v k="$4" -v s="$5" 'BEGIN {
		r = c * 1e6; if (t > 0 && (r == 0 || t * 1e6 < r)) r = t * 1e6
		n = k / (d / 1000 + (r > 0 ? s / r : 0))
		if (t > 0 && n > t * 1e6 / s) n = t * 1e6 / s
		printf "%.1f", n
	}'
}

# cpu PID: the CPU seconds the process has used
cpu() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$1/stat"; }

ROWS=$TMP/rows
: >"$ROWS"
n=0
for st in "${STORES[@]}"; do
	IFS='|' read -r name url set log <<<"$st"
	n=$((n + 1))
	[ $n = 2 ] && cpu0=$(cpu "$BARE_PID")
	for size in 128K 4M; do
		if [ $size = 128K ]; then count=$SMALL_N bytes=131072; else count=$BIG_N bytes=4194304; fi
		for t in $THREADS; do
			prefix=s$n-$size-t$t
			say "store_raw: $name, $count x $size, $t threads"
			[ "$log" = - ] || mark=$(wc -l <"$log")
			out=$("$O/bench/store_raw" -t "$t" -n "$count" -s $size -S "$n$t" put,get,delete \
				"$url/raw" "$prefix" 2>"$TMP/err") ||
				{ say "store_raw failed: $(head -3 "$TMP/err")"; echo "$name|$size|$t|failed" >>"$ROWS"; continue; }
			pl=$(grep '^op=put' <<<"$out") gl=$(grep '^op=get' <<<"$out")
			seen="—" mod="—"
			if [ "$log" != - ]; then
				read -r gn _ gd gm < <(slowstore_gets "$mark" "raw/$prefix/" "$log")
				if [ "$gn" = "$count" ] && [ "$gd" = "$count" ] && [ "$gm" = 1 ]; then
					seen="$gn, each once"
				else
					seen="**$gn GETs of $gd objects, at most $gm of one**"
				fi
				# shellcheck disable=SC2086 # DELAY CONN TOTAL
				[ "$set" = "0 0 0" ] || mod=$(model $set "$t" "$bytes")
			fi
			echo "$name|$size|$t|$(field "$pl" objects_per_s)|$(field "$pl" mib_per_s)|$(field "$gl" objects_per_s)|$(field "$gl" mib_per_s)|$(field "$gl" p50_ms)|$(field "$gl" p99_ms)|$mod|$seen" >>"$ROWS"
		done
	done
	if [ $n = 2 ]; then
		cpu1=$(cpu "$BARE_PID")
		SLOWSTORE_PID=$BARE_PID SLOWSTORE_STATS=$BARE_STATS
		moved=$(($(slowstore_stats bytes_in) + $(slowstore_stats bytes_out)))
		PROXY_CPU=$(awk -v a="$cpu0" -v b="$cpu1" -v m="$moved" \
			'BEGIN { printf "%.2f s of CPU per GiB through it (%.2f s for %.2f GiB)", (b - a) / (m / 2^30), b - a, m / 2^30 }')
	fi
done

{
	echo "# The raw store through bench/slowproxy ($STAMP)"
	echo
	echo "build/bench/store_raw: $SMALL_N objects of 128 KiB and $BIG_N of 4 MiB put, then got back"
	echo "in a shuffled order (every byte checked), then deleted, by T threads with a"
	echo "connection each, on s3rver on loopback and through the proxy in front of it,"
	echo "in one run on $(nproc) cores. Model: objects/s the proxy's settings allow if s3rver"
	echo "took no time (T / (delay + size / rate), rate the connection's share of the caps)."
	echo "The proxy's log counts the GETs it saw."
	echo
	echo "| store | object | threads | PUT obj/s | PUT MiB/s | GET obj/s | GET MiB/s | GET p50 ms | GET p99 ms | model GET obj/s | GETs the proxy saw |"
	echo "|---|---|---|---|---|---|---|---|---|---|---|"
	awk -F'|' -v OFS=' | ' '{ $1 = $1; print "| " $0 " |" }' "$ROWS"
	echo
	echo "The proxy's own cost, from its rows with no delay and no caps: $PROXY_CPU."
	echo
	echo "Settings of the model rows: $MODEL_DESC (bench/lib/slowstore.sh defaults);"
	echo "the capped rows add --total-mbps $TOTAL (BENCH_RAW_TOTAL_MBPS)."
} | tee "$OUT/slowproxy-$STAMP.md"
