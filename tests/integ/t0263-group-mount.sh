#!/bin/bash
# storage: file
# t0263-group-mount.sh - joining a cache group (issue 33): the mount
# options and their errors (a bad name, no disk cache, no or a wildcard
# address, an address that cannot be bound: exit 2 or 1, nothing
# mounted, the message naming it); the node id, made once in the first
# cache directory (0600) and the same at a remount; a copied cache
# directory refused while the original is a member; read-write,
# read-only and take-only members; status with addresses, cache sizes and
# health; the group's figures in stats and in the Prometheus metrics
# (promtool); a member that unmounts leaves at once; mount.granary's -o.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/group.sh"

new_volume grp
M0=$TMP/m0
mount_vol "$META" "$M0"
dataset "$M0/ds" 12 300000
umount_vol "$M0"

# try_mount MP ARGS...: granary mount with a cache dir and log of MP's own
try_mount() {
	local mp=$1
	shift
	mkdir -p "$mp"
	"$GRANARY" mount "$META" "$mp" --log "$TMP/log-$(basename "$mp").log" \
		--cache-dir "$TMP/cache-$(basename "$mp")" "$@"
}
X=$TMP/mx
expect_exit 2 "bad --cache-group 'no/slash'" try_mount "$X" --cache-group no/slash --group-addr 127.0.0.2:0
expect_exit 2 "needs a disk cache" try_mount "$X" --cache-group g --group-addr 127.0.0.2:0 --cache-size 0
expect_exit 2 "needs --group-addr HOST:PORT" try_mount "$X" --cache-group g
expect_exit 2 "--group-addr needs --cache-group" try_mount "$X" --group-addr 127.0.0.2:0
expect_exit 2 "'0\.0\.0\.0' is every address" try_mount "$X" --cache-group g --group-addr 0.0.0.0:7000
expect_exit 2 "bad --group-addr '\[::\]:7000'" try_mount "$X" --cache-group g --group-addr '[::]:7000'
expect_exit 2 "no host" try_mount "$X" --cache-group g --group-addr :7000
expect_exit 2 "takes no --group-addr" try_mount "$X" --cache-group g --group-take-only --group-addr 127.0.0.2:0
# 192.0.2.1 (TEST-NET-1) is no address of this machine
expect_exit 1 "cannot listen on --group-addr '192\.0\.2\.1:0'.*not an address of this node" \
	try_mount "$X" --cache-group g --group-addr 192.0.2.1:0
! is_mounted "$X" || fail "a mount whose group address failed is mounted"
ok "bad group options are refused (exit 2), an address not of this node fails the mount (exit 1)"

# --- member 1, read-write, at a port of its own; its node id
P1=$(svc_free_port)
mount_vol "$META" "$TMP/m1" --cache-group g --group-addr "127.0.0.2:$P1" \
	--metrics 127.0.0.1:0
NODEF=$TMP/cache-m1/.granary-node
[ -f "$NODEF" ] || fail "no node id file $NODEF"
check_eq "$(stat -c %a "$NODEF")" 600 "mode of the node id file"
NODE=$(cat "$NODEF")
[[ $NODE =~ ^[0-9a-f]{16}$ ]] || fail "node id file holds '$NODE'"
check_eq "$(gaddr 1)" "127.0.0.2:$P1" "member 1's address"
check_eq "$(gstats 1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["group"]["node"])')" \
	"$NODE" "the node id in stats"
ok "member 1 serves at 127.0.0.2:$P1 as node $NODE (from $NODEF, mode 0600)"

# the same address again: in use (exit 1, nothing mounted)
expect_exit 1 "cannot listen on --group-addr '127\.0\.0\.2:$P1'.*in use" \
	try_mount "$X" --cache-group g --group-addr "127.0.0.2:$P1"
! is_mounted "$X" || fail "a mount whose group address is in use is mounted"
# a copy of member 1's cache: the same node id, refused while 1 is in
cp -a "$TMP/cache-m1" "$TMP/cache-mcopy"
expect_exit 1 "node $NODE \(the id in '$TMP/cache-mcopy/\.granary-node'\) is a member already.*copied" \
	try_mount "$TMP/mcopy" --cache-group g --group-addr 127.0.0.3:0
! is_mounted "$TMP/mcopy" || fail "a copied cache directory was mounted"
ok "an address in use and a copied cache directory are refused (exit 1), naming them"

# --- member 2 read-only, member 3 takes only
gmount 2 --read-only
mount_vol "$META" "$TMP/m3" --cache-group g --group-take-only
wait_until 10 gmembers 1 3 || fail "member 1 lists $(gfig 1 members) members, not 3"
epoch "$TMP/m2" ds || fail "member 2 (read-only) read wrong bytes"
epoch "$TMP/m3" ds || fail "member 3 (takes only) read wrong bytes"
check_eq "$(cached_objects "$TMP/cache-m3")" 0 "objects in the cache of a member that takes only"
ok "a read-only member and one that takes only read the right bytes; the taker keeps nothing"

"$GRANARY" status "$META" >"$TMP/st.txt" 2>"$TMP/st.err" || fail "status: $(cat "$TMP/st.err")"
row() { grep -E "^g +$1 " "$TMP/st.txt" || fail "no row of node $1: $(cat "$TMP/st.txt")"; }
row "$NODE" | grep -qE " 127\.0\.0\.2:$P1 +1(\.0)? GiB +ok " || fail "member 1's row: $(row "$NODE")"
N2=$(cat "$TMP/cache-m2/.granary-node")
row "$N2" | grep -qE " $(gaddr 2 | sed 's/\./\\./g') +1(\.0)? GiB +ok " || fail "member 2's row: $(row "$N2")"
N3=$(cat "$TMP/cache-m3/.granary-node")
row "$N3" | grep -qE " - +takes only +- " || fail "member 3's row: $(row "$N3")"
"$GRANARY" status "$META" --json >"$TMP/st.json"
python3 - "$TMP/st.json" "$NODE" "$N3" <<'PY' || fail "status --json: $(cat "$TMP/st.json")"
import json, sys
d = json.load(open(sys.argv[1]))
m = {x["node"]: x for g in d["cache_groups"] if g["name"] == "g" for x in g["members"]}
assert len(m) == 3, m
assert m[sys.argv[2]]["health"] == "ok" and m[sys.argv[2]]["cache_bytes"] == 1 << 30, m
assert m[sys.argv[3]]["health"] is None and m[sys.argv[3]]["address"] is None, m
PY
ok "status: each member with its address, cache size and health (ok; a taker: -)"

# --- the figures: stats and metrics
reads=$(( $(gfig 2 peer_hits) + $(gfig 2 self_owned) ))
[ "$reads" -ge 12 ] || fail "member 2's group reads: $reads (hits $(gfig 2 peer_hits), own $(gfig 2 self_owned))"
[ "$(gfig 1 served)" -ge 1 ] || fail "member 1 served nothing"
"$GRANARY" stats "$TMP/m1" >"$TMP/stats.txt" || fail "granary stats"
grep -qE "^group +name +\"g\"" "$TMP/stats.txt" || fail "stats: $(grep group "$TMP/stats.txt")"
MADDR=$(gstats 1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["metrics"]["address"])')
curl -sf --max-time 10 "http://$MADDR/metrics" >"$TMP/metrics.txt" || fail "cannot scrape $MADDR"
promtool check metrics <"$TMP/metrics.txt" >"$TMP/promtool.out" 2>&1 ||
	fail "promtool check metrics: $(cat "$TMP/promtool.out")"
for fam in granary_group_info granary_group_members granary_group_peer_reads_total \
	granary_group_peer_bytes_total granary_group_peer_read_duration_seconds \
	granary_group_bad_from_peers_total granary_group_self_owned_total \
	granary_group_served_total granary_group_served_bytes_total \
	granary_group_served_fetches_total granary_group_refused_total; do
	grep -q "^# TYPE $fam " "$TMP/metrics.txt" || fail "no family $fam"
done
grep -qE "^granary_group_members\{[^}]*\} 3$" "$TMP/metrics.txt" || fail "$(grep members "$TMP/metrics.txt")"
grep -qE "^granary_group_info\{.*group=\"g\",node=\"$NODE\",address=\"127\.0\.0\.2:$P1\"\} 1$" "$TMP/metrics.txt" ||
	fail "$(grep group_info "$TMP/metrics.txt")"
ok "the group's figures in stats and in /metrics (promtool passes)"

# --- a member that unmounts leaves at once; a remount is the same node
umount_vol "$TMP/m2"
"$GRANARY" status "$META" >"$TMP/st2.txt"
! grep -q " $N2 " "$TMP/st2.txt" || fail "member 2 still listed after its unmount"
wait_until 10 gmembers 1 2 || fail "member 1 lists $(gfig 1 members) members after 2 left"
gmount 2
check_eq "$(cat "$TMP/cache-m2/.granary-node")" "$N2" "member 2's node id after a remount"
wait_until 10 gmembers 1 3 || fail "member 1 does not see member 2 back"
ok "an unmount leaves the group at once; the remount is the same node"

# --- mount.granary maps the options
HELPER=$TOPDIR/tools/mount.granary
GRANARY_BIN=$GRANARY "$HELPER" "$META" "$X" -fv \
	-o cache-group=g,group-addr=127.0.0.9:7000,group-keep-copies >"$TMP/h.out" 2>&1 ||
	fail "mount.granary -f: $(cat "$TMP/h.out")"
grep -qF -- "--cache-group g --group-addr 127.0.0.9:7000 --group-keep-copies" "$TMP/h.out" ||
	fail "mount.granary: $(cat "$TMP/h.out")"
GRANARY_BIN=$GRANARY "$HELPER" "$META" "$X" -fv -o cache-group=g,group-take-only >"$TMP/h.out" 2>&1
grep -qF -- "--cache-group g --group-take-only" "$TMP/h.out" || fail "mount.granary: $(cat "$TMP/h.out")"
expect_exit 1 "option 'group-take-only' takes no value" "$HELPER" "$META" "$X" -o group-take-only=1
ok "mount.granary: -o cache-group=, group-addr=, group-take-only, group-keep-copies"
