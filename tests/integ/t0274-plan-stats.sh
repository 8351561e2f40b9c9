#!/bin/bash
# storage: file
# t0274-plan-stats.sh - the epoch plans seen (issue 34): granary.stats has
# a "plans" object (the totals, each plan by its id), `granary stats`
# lists them, `stats --watch` draws a PLANS section, and the Prometheus
# endpoint serves the granary_plan_* families, which promtool takes, with
# the figures of what was planned and read; a cancel shows in them.
. "$(dirname "$0")/lib.sh"

command -v promtool >/dev/null ||
	fail "promtool is missing (Debian package prometheus): run make deps"
command -v curl >/dev/null || fail "curl is missing: run make deps"

N=30
new_volume plstats
M=$TMP/mnt
mount_vol "$META" "$M"
mkdir "$M/ds"
for i in $(seq 1 $N); do random_file "$M/ds/f$i" $((10000 + i)); done
TOTAL=$(cat "$M"/ds/f* | wc -c)
umount_vol "$M"
rm -rf "$TMP/cache-mnt"
mount_vol "$META" "$M" --metrics 127.0.0.1:0
ADDR=$(getfattr --absolute-names --only-values -n granary.stats "$M" |
	sed -n 's/.*"metrics": {"address": "\([^"]*\)"}.*/\1/p')
scrape() { curl -sf --max-time 10 "http://$ADDR/metrics"; }
# value NAME LABEL_RE: the sum of the samples of NAME whose labels match
value() {
	scrape | awk -v n="$1" -v re="${2:-.}" '
		index($0, n "{") == 1 && $0 ~ re { s += $NF }
		END { printf "%d\n", s }'
}

seq 1 $N | sed 's/^/f/' | shuf >"$TMP/order"
id=$("$GRANARY" plan "$M/ds" "$TMP/order") || fail "plan: exit $?"
ahead_all() { [ "$(stat_of "$M" plans ahead)" = "$TOTAL" ]; }
wait_until 60 ahead_all || fail "the plan fetched $(stat_of "$M" plans ahead) of $TOTAL bytes"
while read -r f; do cat "$M/ds/$f" >/dev/null; done <"$TMP/order"

check_eq "$(stat_of "$M" plans plans)" 1 "granary.stats plans.plans"
check_eq "$(stat_of "$M" plans made)" 1 "granary.stats plans.made"
check_eq "$(stat_of "$M" plans files)" "$N" "granary.stats plans.files"
check_eq "$(stat_of "$M" plans ready)" "$N" "granary.stats plans.ready"
check_eq "$(stat_of "$M" plans prefetched)" "$TOTAL" "granary.stats plans.prefetched"
check_eq "$(stat_of "$M" plans used)" "$TOTAL" "granary.stats plans.used"
"$GRANARY" stats "$M" --json | python3 -c '
import json, sys
p = json.load(sys.stdin)["plans"]
one = p["by_id"][sys.argv[1]]
assert one["files"] == int(sys.argv[2]) and one["place"] == one["files"], one
assert one["pid"] > 0, one
' "$id" "$N" || fail "granary stats --json: the plan by its id"
"$GRANARY" stats "$M" >"$TMP/plain" || fail "granary stats"
grep -Eq "^plans +made +1$" "$TMP/plain" || fail "granary stats: $(grep plans "$TMP/plain")"
grep -Eq "^by_id.$id +files +$N$" "$TMP/plain" ||
	fail "granary stats lists no plan $id: $(grep by_id "$TMP/plain")"
ok "granary stats: the plans' totals and plan $id"

# -k: a watch that Ctrl-C did not end is killed, and the test says so
rc=0
timeout -k 10 -s INT 3 "$GRANARY" stats "$M" --watch --interval 0.5 >"$TMP/watch" || rc=$?
[ "$rc" = 0 ] || [ "$rc" = 124 ] ||
	fail "stats --watch did not end on SIGINT within 10 s (exit $rc)"
grep -aq "PLANS  *1 plans  *$N files" "$TMP/watch" ||
	fail "stats --watch draws no PLANS section: $(tr -d '\033' <"$TMP/watch" | tail -n 12)"
grep -aEq "^  $id +[0-9]+ +$N +$N " "$TMP/watch" ||
	fail "stats --watch draws no line of plan $id"
ok "stats --watch draws the plans"

scrape >"$TMP/m.txt" || fail "cannot scrape http://$ADDR/metrics"
promtool check metrics <"$TMP/m.txt" >"$TMP/promtool.out" 2>&1 ||
	fail "promtool check metrics: $(cat "$TMP/promtool.out")"
for fam in granary_plan_plans granary_plan_files granary_plan_window_bytes \
	granary_plan_ahead_bytes granary_plan_made_total granary_plan_ended_total \
	granary_plan_prefetched_bytes_total granary_plan_used_bytes_total \
	granary_plan_wasted_bytes_total granary_plan_opens_total \
	granary_plan_demoted_total; do
	grep -q "^# TYPE $fam " "$TMP/m.txt" || fail "no family $fam"
done
check_eq "$(value granary_plan_plans)" 1 "granary_plan_plans"
check_eq "$(value granary_plan_files)" "$N" "granary_plan_files"
check_eq "$(value granary_plan_opens_total 'result="ready"')" "$N" "ready opens"
check_eq "$(value granary_plan_opens_total 'result="waited"')" 0 "waited opens"
check_eq "$(value granary_plan_used_bytes_total)" "$TOTAL" "used bytes"
ok "promtool takes the granary_plan_* families; their figures are the plan's"

"$GRANARY" plan --cancel "$id" "$M" || fail "cancel"
check_eq "$(value granary_plan_plans)" 0 "granary_plan_plans after the cancel"
check_eq "$(value granary_plan_ended_total)" 1 "granary_plan_ended_total"
check_eq "$(stat_of "$M" plans ended)" 1 "granary.stats plans.ended"
ok "a cancel shows in the metrics and the stats"
