#!/bin/bash
# storage: file
# t0210-metrics.sh - the Prometheus endpoint of a mount: promtool takes
# what it serves, its counters move as a workload says (N files read: at
# least N FUSE reads; a cold read: store GETs; a warm one: memory cache
# hits), histograms are cumulative, granary status lists the address,
# --metrics off serves nothing, a bad address is refused, and paths and
# methods other than GET /metrics are not served.
. "$(dirname "$0")/lib.sh"

command -v promtool >/dev/null ||
	fail "promtool is missing (Debian package prometheus): run make deps"
command -v curl >/dev/null || fail "curl is missing: run make deps"

N=60
new_volume metrics
M=$TMP/mnt
mount_vol "$META" "$M" --metrics 127.0.0.1:0
mkdir "$M/ds"
for i in $(seq 1 $N); do
	random_file "$M/ds/f$i" $((3000 + i * 101))
done
# the address: what the mount bound (port 0: any free one)
addr_of() {
	getfattr --absolute-names --only-values -n granary.stats "$1" |
		sed -n 's/.*"metrics": {"address": "\([^"]*\)"}.*/\1/p'
}
ADDR=$(addr_of "$M")
case $ADDR in 127.0.0.1:[1-9]*) ;; *) fail "metrics address '$ADDR'" ;; esac
grep -q "metrics: serving http://$ADDR/metrics" "$TMP/log-mnt.log" ||
	fail "the log does not say where the metrics are served"
ok "--metrics 127.0.0.1:0 binds a free port: $ADDR"

scrape() { curl -sf --max-time 10 "http://$ADDR/metrics"; }
# value NAME LABEL_RE: the sum of the samples of NAME whose labels match
value() {
	scrape | awk -v n="$1" -v re="$2" '
		index($0, n "{") == 1 && $0 ~ re { s += $NF }
		END { printf "%d\n", s }'
}
scrape >"$TMP/m0.txt" || fail "cannot scrape http://$ADDR/metrics"
promtool check metrics <"$TMP/m0.txt" >"$TMP/promtool.out" 2>&1 ||
	fail "promtool check metrics: $(cat "$TMP/promtool.out")"
grep -q '^granary_info{volume="metrics",mountpoint="'"$M"'"} 1$' "$TMP/m0.txt" ||
	fail "no granary_info with the volume and mount point"
for fam in granary_fuse_ops_total granary_fuse_op_duration_seconds \
	granary_store_requests_total granary_store_retries_total \
	granary_store_bytes_total granary_store_request_duration_seconds \
	granary_redis_round_trips_total granary_redis_round_trip_duration_seconds \
	granary_cache_hits_total granary_cache_misses_total granary_cache_bytes \
	granary_cache_entries granary_cache_evictions_total \
	granary_write_buffer_bytes granary_write_buffer_waits_total \
	granary_staged_bytes granary_prefetch_total; do
	grep -q "^# TYPE $fam " "$TMP/m0.txt" || fail "no family $fam"
done
[ "$(value granary_store_requests_total 'kind="put"')" -ge 1 ] ||
	fail "writing $N files put nothing, say the metrics"
ok "promtool check metrics passes; every family is there"

# cold: a new mount without a disk cache; reads go past the page cache
umount_vol "$M"
mount_vol "$META" "$M" --metrics 127.0.0.1:0 --cache-size 0
ADDR=$(addr_of "$M")
r0=$(value granary_fuse_ops_total 'op="read"')
g0=$(value granary_store_requests_total 'kind="get"')
h0=$(value granary_cache_hits_total 'cache="memory"')
for i in $(seq 1 $N); do
	dd if="$M/ds/f$i" of=/dev/null bs=64k iflag=direct status=none ||
		fail "cold read of f$i"
done
r1=$(value granary_fuse_ops_total 'op="read"')
g1=$(value granary_store_requests_total 'kind="get"')
[ $((r1 - r0)) -ge $N ] || fail "$N files read: $((r1 - r0)) FUSE reads counted"
[ $((g1 - g0)) -ge 1 ] || fail "a cold read of $N files: no store GET counted"
[ "$(value granary_store_bytes_total 'kind="get"')" -gt 0 ] ||
	fail "store GETs moved no bytes"
ok "cold read of $N files: $((r1 - r0)) FUSE reads, $((g1 - g0)) store GETs"

for i in $(seq 1 $N); do
	dd if="$M/ds/f$i" of=/dev/null bs=64k iflag=direct status=none ||
		fail "warm read of f$i"
done
h1=$(value granary_cache_hits_total 'cache="memory"')
[ $((h1 - h0)) -ge 1 ] || fail "a warm read: no memory cache hit counted"
[ "$(value granary_cache_entries 'cache="memory"')" -ge 1 ] ||
	fail "a warm memory cache: no entries shown"
[ "$(value granary_cache_bytes 'cache="memory"')" -gt 0 ] ||
	fail "a warm memory cache: no bytes shown"
ok "warm read: $((h1 - h0)) memory cache hits, its entries and bytes shown"

# histograms: cumulative, +Inf equal to _count
scrape >"$TMP/m1.txt"
awk '/^granary_fuse_op_duration_seconds_bucket\{.*op="read"/ {
		v = $NF + 0; if (n++ && v < last) bad = 1; last = v }
	/^granary_fuse_op_duration_seconds_count\{.*op="read"/ { cnt = $NF + 0 }
	END { exit !(n == 17 && !bad && last == cnt && cnt > 0) }' "$TMP/m1.txt" ||
	fail "the read histogram is not cumulative up to +Inf = _count: $(grep 'op="read"' "$TMP/m1.txt" | grep duration)"
awk '/^granary_store_request_duration_seconds_bucket\{.*kind="get"/ {
		v = $NF + 0; if (n++ && v < last) bad = 1; last = v }
	END { exit !(n == 17 && !bad && last > 0) }' "$TMP/m1.txt" ||
	fail "the store get histogram is not cumulative"
promtool check metrics <"$TMP/m1.txt" >"$TMP/promtool.out" 2>&1 ||
	fail "promtool check metrics after the workload: $(cat "$TMP/promtool.out")"
ok "histogram buckets are monotone, +Inf = _count"

"$GRANARY" status "$META" >"$TMP/status.out" 2>/dev/null
grep -q "METRICS" "$TMP/status.out" && grep -qF "$ADDR" "$TMP/status.out" ||
	fail "granary status does not show $ADDR: $(cat "$TMP/status.out")"
"$GRANARY" status "$META" --json 2>/dev/null | grep -qF "\"metrics\": \"$ADDR\"" ||
	fail "granary status --json does not show $ADDR"
ok "granary status lists the address"

check_eq "$(curl -s -o /dev/null -w '%{http_code}' "http://$ADDR/")" 404 "GET /"
check_eq "$(curl -s -o /dev/null -w '%{http_code}' "http://$ADDR/metricsx")" 404 "GET /metricsx"
check_eq "$(curl -s -o /dev/null -w '%{http_code}' -X POST "http://$ADDR/metrics")" 405 "POST /metrics"
# a client that says nothing does not hold the endpoint up
exec 7<>/dev/tcp/127.0.0.1/"${ADDR##*:}"
scrape >/dev/null || fail "a silent connection blocks the endpoint"
exec 7>&-
ok "other paths 404, other methods 405, a silent client blocks nothing"

M2=$TMP/off
mount_vol "$META" "$M2" --metrics off
check_eq "$(addr_of "$M2")" off "the address of a --metrics off mount"
! grep -q "metrics: serving" "$TMP/log-off.log" ||
	fail "--metrics off still serves: $(grep serving "$TMP/log-off.log")"
"$GRANARY" status "$META" --json 2>/dev/null | grep -q '"mountpoint": "'"$M2"'", "metrics": null' ||
	fail "status shows a metrics address for the --metrics off mount"
umount_vol "$M2"
ok "--metrics off serves nothing"

for bad in 127.0.0.1:99999 127.0.0.1 ::1:80 "host.invalid.:80" 127.0.0.1:x; do
	mkdir -p "$TMP/bad"
	expect_exit 2 "bad --metrics" "$GRANARY" mount "$META" "$TMP/bad" --metrics "$bad"
	! is_mounted "$TMP/bad" || fail "mounted with --metrics $bad"
done
ok "a bad --metrics address is refused (exit 2)"

# a port in use: a warning, and the mount goes on without the endpoint
mount_vol "$META" "$M2" --metrics "$ADDR"
grep -q "no metrics endpoint: cannot listen on '$ADDR'" "$TMP/log-off.log" ||
	fail "no warning for a port in use"
check_eq "$(addr_of "$M2")" off "the address of a mount whose port was taken"
umount_vol "$M2"
ok "a port in use: a warning, the mount goes on"
umount_vol "$M"

# the dashboard's queries are PromQL over these names (Grafana's variables
# given values)
{
	echo "groups:"
	echo "  - name: dashboard"
	echo "    rules:"
	grep -o '"expr": ".*"' "$TOPDIR/docs/grafana-granary.json" |
		sed -e 's/^"expr": "//' -e 's/"$//' -e 's/\\"/"/g' \
			-e 's/\$__rate_interval/1m/g' -e 's/\$volume/.*/g' \
			-e 's/\$mountpoint/.*/g' |
		awk '{ printf "      - record: dashboard:q%d\n        expr: '\''%s'\''\n", NR, $0 }'
} >"$TMP/dashboard-rules.yml"
n=$(grep -c 'expr:' "$TMP/dashboard-rules.yml")
[ "$n" -ge 8 ] || fail "only $n queries found in docs/grafana-granary.json"
promtool check rules "$TMP/dashboard-rules.yml" >"$TMP/rules.out" 2>&1 ||
	fail "the dashboard's queries: $(cat "$TMP/rules.out")"
for name in $(grep -o 'granary_[a-z_]*' "$TMP/dashboard-rules.yml" | sort -u); do
	base=${name%_bucket}
	grep -q "^# TYPE $base " "$TMP/m1.txt" || fail "the dashboard asks for $name, which no mount serves"
done
ok "the Grafana dashboard's $n queries parse and name served metrics"
