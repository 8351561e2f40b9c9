#!/bin/bash
# storage: file
# t0245-metrics-idle.sh - clients that hold connections to a mount's
# /metrics without asking do not keep a scrape waiting: with 8 (every
# slot) and 20 idle connections open, and with 8 that send half a request,
# a scrape is answered at once (it took 4.7 s when the slots were held to
# their read timeout). The bound is generous: 2 s, for what takes
# milliseconds.
. "$(dirname "$0")/lib.sh"

command -v curl >/dev/null || fail "curl is missing: run make deps"

new_volume idle
M=$TMP/mnt
mount_vol "$META" "$M" --metrics 127.0.0.1:0
for i in $(seq 1 30); do echo "file $i" >"$M/f$i"; done
ADDR=$(getfattr --absolute-names --only-values -n granary.stats "$M" |
	sed -n 's/.*"metrics": {"address": "\([^"]*\)"}.*/\1/p')
case $ADDR in 127.0.0.1:[1-9]*) ;; *) fail "metrics address '$ADDR'" ;; esac
curl -sf --max-time 10 "http://$ADDR/metrics" >"$TMP/m0.txt" ||
	fail "cannot scrape http://$ADDR/metrics"

# hold.py ADDR KIND N: N connections of KIND (idle: connected, nothing
# sent; half: the start of a request, no end) held open while a scrape is
# timed; prints the scrape's seconds and bytes, fails when it is not whole
cat >"$TMP/hold.py" <<'PY'
import socket, sys, time
host, port = sys.argv[1].rsplit(':', 1)
kind, n = sys.argv[2], int(sys.argv[3])
held = []
for _ in range(n):
    s = socket.create_connection((host, int(port)))
    if kind == 'half':
        s.sendall(b'GET /metrics HTTP/1.1\r\nHost: x\r\n')
    held.append(s)
time.sleep(0.3)  # the server has seen them all
t0 = time.monotonic()
c = socket.create_connection((host, int(port)), timeout=30)
c.sendall(b'GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n')
body = b''
while True:
    b = c.recv(65536)
    if not b:
        break
    body += b
took = time.monotonic() - t0
if not body.startswith(b'HTTP/1.1 200') or b'\ngranary_info{' not in body:
    sys.exit('scrape answer: %r' % body[:200])
print('%.3f %d' % (took, len(body)))
PY
for run in "idle 8" "idle 20" "half 8"; do
	# shellcheck disable=SC2086 # two words: kind and count
	out=$(timeout 60 python3 "$TMP/hold.py" "$ADDR" $run) ||
		fail "$run: the scrape failed: $out"
	read -r took bytes <<<"$out"
	echo "# $run connections held: scrape of $bytes bytes in $took s"
	awk -v t="$took" 'BEGIN { exit !(t < 2) }' ||
		fail "$run connections held: the scrape took $took s"
done
# and the endpoint serves on afterwards
curl -sf --max-time 10 "http://$ADDR/metrics" >/dev/null || fail "no scrape after the held ones"
umount_vol "$M"
ok "idle connections (8, 20) and half requests (8) do not hold a scrape up: answered in under 2 s"
