#!/bin/bash
# storage: file
# t0272-plan-life.sh - when epoch plans end, and several at once (issue
# 34): a plan ends when its owner process exits, and when none of its
# files is opened for its idle time while it has files left (the test
# build's GRANARY_TEST_PLAN_IDLE sets it low), not while its readers go
# on, nor once they read it all; two jobs with plans naming the same
# files move only their own plan (the opener's process tree), an opener
# of neither tree moves both; an unmount ends every plan.
. "$(dirname "$0")/lib.sh"

IDLE=4
GRANARY=$GRANARY_HOOKS
export GRANARY_TEST_PLAN_IDLE=$IDLE

new_volume life
M=$TMP/mnt
mount_vol "$META" "$M"
mkdir "$M/ds"
for i in $(seq 1 10); do random_file "$M/ds/f$i" 20000; done
seq 1 10 | sed 's/^/f/' >"$TMP/order"

# field ID NAME: a figure of plan ID; gone ID: the plan is no more
field() {
	getfattr --absolute-names --only-values -n "granary.plan.$1" "$M" |
		sed -n "s/.*\"$2\": \([0-9-]*\).*/\1/p"
}
gone() {
	! getfattr --absolute-names -n "granary.plan.$1" "$M" >/dev/null 2>&1
}

# the owner exits
sleep 600 &
OWNER=$!
bg_track $OWNER
id=$("$GRANARY" plan --owner $OWNER "$M/ds" "$TMP/order") || fail "plan: exit $?"
check_eq "$(field "$id" pid)" "$OWNER" "the plan's owner"
kill $OWNER
wait $OWNER 2>/dev/null || true
wait_until 20 gone "$id" || fail "plan $id outlived its owner by 20 s"
grep -q "plan $id ended: its owner process is gone" "$TMP/log-mnt.log" ||
	fail "the log does not say why plan $id ended"
ok "a plan ends when its owner process exits"

# a plan made by a thread belongs to its process: it outlives the thread
python3 - "$M" <<'EOF' || fail "a plan made by a thread"
import json, os, sys, threading, time
m = sys.argv[1]
made = []
t = threading.Thread(target=lambda: made.append(
    int(os.getxattr(m, "granary.plan.new"))))
t.start()
t.join()
time.sleep(2)  # the owner checks run every half second
info = json.loads(os.getxattr(m, "granary.plan.%d" % made[0]))
assert info["pid"] == os.getpid(), info
EOF
ok "a plan made by a thread is its process's"

# idle: no open for IDLE s while it has files left
cat "$TMP/order" "$TMP/order" "$TMP/order" "$TMP/order" >"$TMP/order4"
id=$("$GRANARY" plan "$M/ds" "$TMP/order4") || fail "plan: exit $?"
# its readers go on, an open every half second, for twice the idle time
for i in $(seq 1 $((IDLE * 4))); do
	cat "$M/ds/f$(((i - 1) % 10 + 1))" >/dev/null
	last=$(date +%s.%N) # just after the last open
	sleep 0.5
done
gone "$id" && fail "plan $id ended while its readers went on"
check_eq "$(field "$id" place)" $((IDLE * 4)) "the place of the followed plan"
wait_until $((IDLE * 5)) gone "$id" || fail "plan $id idle for $((IDLE * 5)) s lives on"
said=$(grep "plan $id ended: none of its files was opened" "$TMP/log-mnt.log") ||
	fail "the log does not say why plan $id ended"
# when it ended (the log's clock, to the ms), against the last open: not
# before IDLE s (less the 0.2 s that cat may take after its open)
ended=$(date -d "$(cut -c1-23 <<<"$said")" +%s.%N)
awk -v e="$ended" -v l="$last" -v i="$IDLE" 'BEGIN { exit !(e - l >= i - 0.2) }' ||
	fail "plan $id ended $(awk -v e="$ended" -v l="$last" 'BEGIN { printf "%.2f", e - l }') s after its last open (idle time ${IDLE} s)"
ok "an idle plan ends after ${IDLE}s without an open, not while followed"

# read whole: nothing left to follow, it stays
id=$("$GRANARY" plan "$M/ds" <(head -n 2 "$TMP/order")) || fail "plan: exit $?"
cat "$M/ds/f1" "$M/ds/f2" >/dev/null
check_eq "$(field "$id" place)" 2 "the place of a plan read whole"
sleep $((IDLE * 2))
gone "$id" && fail "plan $id, read whole, ended as idle"
"$GRANARY" plan --cancel "$id" "$M" || fail "cancel $id"
ok "a plan read whole does not end as idle"

# two jobs, each a process that opens the files it is told to (its own
# children do: cat), with a plan each over the same files, in two orders
coproc JA { while read -r f; do cat "$f" >/dev/null; echo "$f"; done; }
coproc JB { while read -r f; do cat "$f" >/dev/null; echo "$f"; done; }
bg_track "$JA_PID"
bg_track "$JB_PID"
a=$("$GRANARY" plan --owner "$JA_PID" "$M/ds" "$TMP/order") || fail "plan a"
b=$("$GRANARY" plan --owner "$JB_PID" "$M/ds" <(tac "$TMP/order")) || fail "plan b"
# open_by JOB FILE: JOB opens FILE, and is done with it
open_by() {
	local -n job=$1
	echo "$M/ds/$2" >&"${job[1]}"
	read -r _ <&"${job[0]}"
}
open_by JA f3
check_eq "$(field "$a" place)" 3 "plan a after job a opened f3"
check_eq "$(field "$b" place)" 0 "plan b after job a opened f3"
open_by JB f9
check_eq "$(field "$b" place)" 2 "plan b after job b opened f9"
check_eq "$(field "$a" place)" 3 "plan a after job b opened f9"
# an opener of neither job: every plan naming the file ahead moves
cat "$M/ds/f5" >/dev/null
check_eq "$(field "$a" place)" 5 "plan a after another process opened f5"
check_eq "$(field "$b" place)" 6 "plan b after another process opened f5"
"$GRANARY" plan --status --json "$M" | grep -q "\"id\": $a.*\"id\": $b" ||
	fail "both plans listed"
ok "two plans over the same files: each job moves its own"

umount_vol "$M"
mount_vol "$META" "$M"
getfattr --absolute-names --only-values -n granary.plans "$M" |
	grep -q '"plans": \[\]' || fail "plans outlived the unmount"
ok "an unmount ends every plan"
