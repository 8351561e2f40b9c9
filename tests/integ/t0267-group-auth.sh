#!/bin/bash
# storage: file
# t0267-group-auth.sh - only members of the volume may read from a member
# (issue 33): requests without the group's signature, with a malformed
# one, or signed with another secret are refused (401, counted) and a
# request signed with the group's secret is answered (curl against the
# member's address); a member of another volume that has this member's
# address in its own group (another secret) is refused too, and reads its
# bytes from its store, right, with no error.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/group.sh"

new_volume auth
mount_vol "$META" "$TMP/m0"
dataset "$TMP/m0/ds" 8 300000
umount_vol "$TMP/m0"
META1=$META
gmount 1
epoch "$TMP/m1" ds || fail "member 1 read wrong bytes"
A1=$(gaddr 1)
KEY=$(cached_keys "$TMP/cache-m1" | head -n 1)
[ -n "$KEY" ] || fail "member 1 holds no object"
SECRET=$(rcli HGET setting group_secret)
OTHER=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')

# sign HEX_SECRET METHOD PATH: the Authorization value (peer.h)
sign() {
	python3 - "$@" <<'PY'
import hashlib, hmac, sys, time
secret, method, path = bytes.fromhex(sys.argv[1]), sys.argv[2], sys.argv[3]
# HKDF-SHA256, no salt, info "granary peer v1", 32 bytes
prk = hmac.new(b"\0" * 32, secret, hashlib.sha256).digest()
k = hmac.new(prk, b"granary peer v1" + b"\x01", hashlib.sha256).digest()
node, ts = "00000000000000ee", str(int(time.time()))
msg = "\n".join([method, path, "", ts, node]).encode()
sig = hmac.new(k, msg, hashlib.sha256).hexdigest()
print(f"GRANARY-PEER node={node},ts={ts},sig={sig}")
PY
}
code() { curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$@"; }
refused0=$(gfig 1 refused_auth)
check_eq "$(code "http://$A1/v1/o/$KEY")" 401 "a GET without a signature"
check_eq "$(code -H "Authorization: GRANARY-PEER node=zz" "http://$A1/v1/o/$KEY")" 401 \
	"a GET with a malformed signature"
check_eq "$(code -H "Authorization: $(sign "$OTHER" GET "/v1/o/$KEY")" \
	"http://$A1/v1/o/$KEY")" 401 "a GET signed with another secret"
check_eq "$(code -X POST -H "Authorization: $(sign "$OTHER" POST "/v1/bad/$KEY")" \
	"http://$A1/v1/bad/$KEY")" 401 "a bad-copy report signed with another secret"
check_eq "$(gfig 1 refused_auth)" $((refused0 + 4)) "refusals member 1 counted"
cached_keys "$TMP/cache-m1" | grep -qxF "$KEY" || fail "a refused report dropped the entry"
# the same requests signed with the group's secret are answered
check_eq "$(code -H "Authorization: $(sign "$SECRET" GET "/v1/o/$KEY")" "http://$A1/v1/o/$KEY")" 200 \
	"a GET signed with the group's secret"
check_eq "$(code -I -H "Authorization: $(sign "$SECRET" HEAD /v1/o/blocks/none)" "http://$A1/v1/o/blocks/none")" 404 \
	"a HEAD of a key nobody holds, signed with the group's secret"
ok "requests without the group's signature are refused (401, counted); signed ones are answered"

# a member of another volume (another secret) given member 1's address:
# its reads are refused, and come from its own store
new_volume other
META2=$META
mount_vol "$META2" "$TMP/w2"
dataset "$TMP/w2/ds" 8 300000
umount_vol "$TMP/w2"
META=$META2
gmount 5
# (after the mount: its daemon must not inherit the fifo's writer)
mkfifo "$TMP/join-in"
"$BUILD/tests/groupjoin" "$META2" 60 g 00000000000000f1 "$A1" $((1 << 50)) \
	<"$TMP/join-in" >"$TMP/join.out" 2>"$TMP/join.err" &
JPID=$!
bg_track $JPID
exec 9>"$TMP/join-in"
wait_until 10 grep -q '^joined' "$TMP/join.out" || fail "groupjoin: $(cat "$TMP/join.err")"
wait_until 15 gmembers 5 2 || fail "member 5 lists $(gfig 5 members) members"
refused0=$(gfig 1 refused_auth)
served0=$(gfig 1 served)
epoch "$TMP/m5" ds || fail "member 5 (other volume) read wrong bytes"
[ "$(gfig 5 peer_errors)" -ge 1 ] || fail "member 5 was never refused (peer hits $(gfig 5 peer_hits))"
check_eq "$(gfig 5 peer_hits)" 0 "blocks member 5 got from member 1"
[ "$(gfig 1 refused_auth)" -gt "$refused0" ] || fail "member 1 counted no refusal"
check_eq "$(gfig 1 served)" "$served0" "requests member 1 served to another volume's member"
"$GRANARY" status "$META2" >"$TMP/st2.txt"
grep -qE "^g +00000000000000f1 .* ${A1//./\\.} .* refuses " "$TMP/st2.txt" ||
	fail "status of the other volume: $(grep '^g ' "$TMP/st2.txt")"
ok "another volume's member is refused by member 1 and reads its own store, every byte right; status says 'refuses'"
exec 9>&-
wait "$JPID" || fail "groupjoin did not leave: $(cat "$TMP/join.err")"
