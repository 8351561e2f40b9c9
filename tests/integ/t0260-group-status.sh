#!/bin/bash
# storage: file
# t0260-group-status.sh - `granary status` lists each cache group with
# its live members (node, session, host, address, cache size, joined,
# heartbeat), in text and --json, and never the group secret; a member
# whose client was killed drops out once its session is dead to the TTL,
# and its record goes with the session's cleanup; one that left is gone
# at once. The members are tests/integ/groupjoin.c (no mount needed: the
# membership is the metadata's).
. "$(dirname "$0")/lib.sh"

GROUPJOIN=$BUILD/tests/groupjoin
# the members take a 2 s session TTL; so does status, from the test build
GRANARY=$GRANARY_HOOKS
export GRANARY_TEST_SESSION_TTL=2
new_volume grp

# member NAME GROUP NODE ADDR WEIGHT: a member in the background, until
# its stdin (a fifo the test holds open, fd FD_NAME) closes; PID_NAME.
# Each member closes the fds of the others' fifos (FDS), so that the
# test's close is the end of its fifo.
FDS=""
member() {
	local name=$1 fd; shift
	mkfifo "$TMP/in-$name"
	(
		for fd in $FDS; do eval "exec $fd>&-"; done
		exec "$GROUPJOIN" "$META" 2 "$@"
	) <"$TMP/in-$name" >"$TMP/out-$name" 2>"$TMP/err-$name" &
	bg_track $!
	eval "PID_$name=$!"
	exec {fd}>"$TMP/in-$name"
	eval "FD_$name=$fd"
	FDS="$FDS $fd"
	wait_until 10 grep -q '^joined' "$TMP/out-$name" ||
		fail "member $name did not join: $(cat "$TMP/err-$name")"
}
# leave NAME: close its stdin; it leaves the group and ends
leave() {
	local fd pid
	eval "fd=\$FD_$1 pid=\$PID_$1"
	exec {fd}>&-
	wait "$pid" || fail "member $1 failed to leave: $(cat "$TMP/err-$1")"
}
status() { "$GRANARY" status "$META" "$@" 2>>"$TMP/status.err"; }

member a train a1 127.0.0.1:7070 3298534883328 # 3 TiB
member b train b2 - 0                           # takes only
member c eval.v2 c3 [::1]:7071 1073741824       # 1 GiB
HOST=$(hostname)
SECRET=$(rcli HGET setting group_secret)
check_eq "${#SECRET}" 64 "the group secret's hex digits"

status >"$TMP/st.txt" || fail "status: $(cat "$TMP/status.err")"
grep -qE '^cache groups: +2$' "$TMP/st.txt" || fail "no 'cache groups: 2': $(cat "$TMP/st.txt")"
row() { grep -E "^$1 +$2 " "$TMP/st.txt" || fail "no row of node $2 in $1: $(cat "$TMP/st.txt")"; }
row train 00000000000000a1 | grep -qE " $HOST +127\.0\.0\.1:7070 +3(\.0)? TiB .* (now|[0-9]+s ago)$" ||
	fail "member a1: $(row train 00000000000000a1)"
row train 00000000000000b2 | grep -qE " $HOST +- +takes only " ||
	fail "member b2: $(row train 00000000000000b2)"
row eval.v2 00000000000000c3 | grep -qF "[::1]:7071" ||
	fail "member c3: $(row eval.v2 00000000000000c3)"
ok "status lists each group's members: node, host, address, cache size, heartbeat"

status --json >"$TMP/st.json" || fail "status --json: $(cat "$TMP/status.err")"
python3 - "$TMP/st.json" "$HOST" <<'PY' || fail "status --json: $(cat "$TMP/st.json")"
import json, sys
d = json.load(open(sys.argv[1]))
g = {x["name"]: x["members"] for x in d["cache_groups"]}
assert sorted(g) == ["eval.v2", "train"], g
t = {m["node"]: m for m in g["train"]}
assert sorted(t) == ["00000000000000a1", "00000000000000b2"], t
a, b = t["00000000000000a1"], t["00000000000000b2"]
assert a["address"] == "127.0.0.1:7070" and a["cache_bytes"] == 3298534883328, a
assert b["address"] is None and b["cache_bytes"] == 0, b
assert a["host"] == sys.argv[2] and a["sid"] > 0 and a["heartbeat"] > 0, a
assert a["joined"] > 0, a
PY
ok "status --json: the groups and their members"

for f in "$TMP/st.txt" "$TMP/st.json" "$TMP/status.err"; do
	! grep -qiF "$SECRET" "$f" || fail "the group secret is in $(basename "$f")"
	! grep -qi "group_secret" "$f" || fail "group_secret named in $(basename "$f")"
done
ok "status shows nothing of the group secret (text, --json, stderr)"

# a killed member: out of the listing once dead to the TTL, its record
# removed by a live client's cleanup (c's heartbeat)
kill -KILL "$PID_a"
wait "$PID_a" 2>/dev/null || true
gone_a() { ! status | grep -q 00000000000000a1; }
wait_until 15 gone_a || fail "a killed member still listed 15 s later"
status | grep -qE '^train +00000000000000b2 ' || fail "member b2 dropped with a1"
# (fields are decimal node ids: a1 is 161)
cleaned_a() { test "$(rcli HEXISTS cgtrain 161)" = 0; }
wait_until 15 cleaned_a ||
	fail "the killed member's record was not cleaned up"
ok "a killed member drops out of the listing and its record is cleaned up"

leave b
status >"$TMP/st2.txt"
grep -qE '^cache groups: +1$' "$TMP/st2.txt" && ! grep -q '^train ' "$TMP/st2.txt" ||
	fail "a member that left is still listed: $(cat "$TMP/st2.txt")"
leave c
status >"$TMP/st3.txt"
grep -qE '^cache groups: +none$' "$TMP/st3.txt" || fail "groups left: $(cat "$TMP/st3.txt")"
check_eq "$(rcli EXISTS cgtrain cgeval.v2 cgroups)" 0 "group keys left"
ok "members that leave are gone at once; no group is left"
