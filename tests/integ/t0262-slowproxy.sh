#!/bin/bash
# storage: s3
# t0262-slowproxy.sh - bench/slowproxy, the slow store of the benchmarks
# (issues 33 and 34): its HTTP framing against a server that sends every
# kind of message (t0262-slowproxy.py), then granary through it in front
# of s3rver: a volume formats, mounts, writes and reads back byte-exact;
# the proxy's log names every GET and its counters agree with the log; a
# 20 MiB save and a 20 MiB cold read through a 10 MB/s cap each take at
# least 1.5 s, and a first byte comes no sooner than the delay.
. "$(dirname "$0")/lib.sh"

if [ "$GRANARY_STORAGE" != s3 ]; then
	skip "the proxy stands in front of s3rver (GRANARY_STORAGE=s3)"
	exit 0
fi
PROXY=$BUILD/bench/slowproxy
[ -x "$PROXY" ] || fail "no $PROXY (make all)"

# --- the framing, against a server of the script's own
mkdir -p "$TMP/py"
python3 "$TOPDIR/tests/integ/t0262-slowproxy.py" "$PROXY" "$TMP/py" >"$TMP/py.out" 2>&1 ||
	fail "the framing checks failed: $(tail -n 5 "$TMP/py.out")"
while read -r line; do
	case $line in "ok - "*) ok "${line#ok - }" ;; esac
done <"$TMP/py.out"

# --- granary through the proxy: 100 ms to the first byte, 10 MB/s in all
need_redis
need_s3
DELAY_MS=100
PPORT=$(svc_free_port)
"$PROXY" --listen "127.0.0.1:$PPORT" --target "127.0.0.1:$GRANARY_TEST_S3_PORT" \
	--delay-ms $DELAY_MS --conn-mbps 10 --total-mbps 10 \
	--log "$TMP/proxy.log" --stats "$TMP/proxy.stats" \
	>"$TMP/proxy.out" 2>"$TMP/proxy.err" &
PROXY_PID=$!
bg_track $PROXY_PID
wait_until 10 grep -qx "$PPORT" "$TMP/proxy.out" ||
	fail "the proxy did not start: $(cat "$TMP/proxy.err")"
PREFIX=granary-test/t0262-$$

# a first byte, timed by curl: no sooner than the delay
ttfb=$(curl -s -o /dev/null -w '%{time_starttransfer}' "http://127.0.0.1:$PPORT/$PREFIX/none")
[ "$(echo "$ttfb >= $DELAY_MS / 1000" | bc -l)" = 1 ] ||
	fail "curl saw its first byte after $ttfb s, sooner than the ${DELAY_MS} ms delay"
ok "a first byte through the proxy after $ttfb s (delay ${DELAY_MS} ms)"

db=$(next_db)
redis-cli -s "$GRANARY_TEST_REDIS_SOCK" -n "$db" flushdb >/dev/null
META="$GRANARY_TEST_REDIS?db=$db"
"$GRANARY" format "$META" slow --storage "s3+http://127.0.0.1:$PPORT/$PREFIX" \
	--trash-days 0 >"$TMP/format.out" 2>&1 ||
	fail "format through the proxy failed: $(cat "$TMP/format.out")"
M=$TMP/mnt
mount_vol "$META" "$M"
random_file "$TMP/big" $((20 << 20))
t0=$(date +%s.%N)
dd if="$TMP/big" of="$M/big" bs=4M conv=fsync status=none ||
	fail "the save through the proxy failed"
save=$(echo "$(date +%s.%N) - $t0" | bc -l)
for i in $(seq 1 20); do echo "small $i" >"$M/s$i"; done
umount_vol "$M"
[ "$(echo "$save >= 1.5" | bc -l)" = 1 ] ||
	fail "20 MiB saved (fsync: in the store) through a 10 MB/s cap in $save s"
ok "20 MiB saved with fsync through a 10 MB/s cap in $save s (2.1 s at the cap)"

rm -rf "$TMP/cache-mnt"
mount_vol "$META" "$M"
mark=$(wc -l <"$TMP/proxy.log")
t0=$(date +%s.%N)
cat "$M/big" >"$TMP/big.back"
cold=$(echo "$(date +%s.%N) - $t0" | bc -l)
cmp "$TMP/big" "$TMP/big.back" || fail "the big file reads back other bytes through the proxy"
for i in $(seq 1 20); do
	[ "$(cat "$M/s$i")" = "small $i" ] || fail "small file s$i reads back other bytes"
done
umount_vol "$M"
[ "$(echo "$cold >= 1.5" | bc -l)" = 1 ] ||
	fail "20 MiB read cold through a 10 MB/s cap in $cold s"
ok "cold read through the proxy byte-exact; 20 MiB in $cold s through a 10 MB/s cap"

# the log: the cold read's GETs are of objects put through the proxy, and
# bring at least the file's bytes
tail -n +"$((mark + 1))" "$TMP/proxy.log" >"$TMP/cold.log"
awk -v p="/$PREFIX/" '$1 == "GET" && index($2, p) == 1 && $3 ~ /^2/' "$TMP/cold.log" >"$TMP/cold.gets"
gets=$(wc -l <"$TMP/cold.gets")
bytes=$(awk '{ s += $5 } END { print s + 0 }' "$TMP/cold.gets")
[ "$gets" -ge 5 ] || fail "the log has $gets GETs of the volume's objects for the cold read"
[ "$bytes" -ge $((20 << 20)) ] || fail "the cold read's GETs brought $bytes bytes, less than 20 MiB"
awk '$1 == "PUT" && $3 ~ /^2/ { print $2 }' "$TMP/proxy.log" | sort -u >"$TMP/puts"
awk '{ print $2 }' "$TMP/cold.gets" | sed 's/?.*//' | sort -u >"$TMP/got"
[ -z "$(comm -13 "$TMP/puts" "$TMP/got")" ] ||
	fail "GETs of objects never put: $(comm -13 "$TMP/puts" "$TMP/got" | head -3)"
awk -v d=$DELAY_MS '$6 != "-" && $6 < d { bad++ } END { exit bad > 0 }' "$TMP/proxy.log" ||
	fail "the log has first bytes sooner than the delay: $(awk -v d=$DELAY_MS '$6 < d' "$TMP/proxy.log" | head -3)"
ok "the log: $gets GETs of objects put through the proxy, $bytes bytes, every first byte >= ${DELAY_MS} ms"

# the counters (SIGUSR1) agree with the log, per key
rm -f "$TMP/proxy.stats"
kill -USR1 $PROXY_PID
wait_until 10 test -f "$TMP/proxy.stats" || fail "no stats file after SIGUSR1"
st() { sed -n "s/^$1=//p" "$TMP/proxy.stats"; }
check_eq "$(st requests)" "$(wc -l <"$TMP/proxy.log")" "requests counted against lines logged"
check_eq "$(st requests_get)" "$(awk '$1 == "GET"' "$TMP/proxy.log" | wc -l)" "GETs counted against logged"
awk '$1 == "GET" && $3 ~ /^2/ { sub(/\?.*/, "", $2); n[$2]++ } END { for (k in n) print k, n[k] }' \
	"$TMP/proxy.log" | sort >"$TMP/gets.log"
awk '$1 == "key" && $2 == "GET" && $4 > 0 { print $6, $4 }' "$TMP/proxy.stats" | sort >"$TMP/gets.stats"
cmp -s "$TMP/gets.log" "$TMP/gets.stats" ||
	fail "per-key GETs differ between the log and the stats: $(diff "$TMP/gets.log" "$TMP/gets.stats" | head -5)"
check_eq "$(st errors)" 0 "connections dropped on a protocol error"
[ "$(st connections)" -lt "$(st requests)" ] ||
	fail "no connection carried several requests: $(st connections) for $(st requests)"
ok "SIGUSR1: the counters agree with the log per key; $(st requests) requests on $(st connections) connections, no error"

kill -TERM $PROXY_PID
rc=0
wait $PROXY_PID || rc=$?
check_eq "$rc" 0 "the proxy's exit status on SIGTERM"
grep -q "requests=$(st requests) " "$TMP/proxy.err" || fail "no totals at exit: $(cat "$TMP/proxy.err")"
ok "SIGTERM: exit 0, totals on stderr"
