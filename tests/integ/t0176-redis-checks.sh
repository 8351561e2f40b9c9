#!/bin/bash
# storage: file
# t0176-redis-checks.sh - format, mount and status each warn, in one line
# that says what to do, of a Redis that may evict keys and of one that
# keeps nothing on disk, and say nothing of a safe one; format --strict
# refuses a risky one; status shows the server's memory and persistence
# (text and --json); a Redis whose CONFIG is disabled (as managed ones
# have it) fails nothing.
. "$(dirname "$0")/lib.sh"

# checks NAME WARNING|- REDIS-SERVER ARGS...: a server of its own, then
# format, mount and status of a volume on it, each with WARNING (an
# extended regex) in its stderr, or none at all with "-"
checks() {
	local name=$1 want=$2 out; shift 2
	svc_start_redis_tcp "$TMP/redis-$name" "" "$@" ||
		fail "cannot start redis ($name)"
	local meta="redis://127.0.0.1:$SVC_REDIS_PORT/1"
	mkdir -p "$TMP/data-$name"
	for cmd in format mount status; do
		out=$TMP/$cmd-$name.err
		case $cmd in
		format) "$GRANARY" format "$meta" "$name" \
				--storage "file://$TMP/data-$name" >/dev/null 2>"$out" ;;
		mount) mkdir -p "$TMP/mnt-$name"
			MOUNTS="$MOUNTS $TMP/mnt-$name"
			"$GRANARY" mount "$meta" "$TMP/mnt-$name" \
				--log "$TMP/log-$name.log" 2>"$out" ;;
		status) "$GRANARY" status "$meta" >"$TMP/status-$name.out" 2>"$out" ;;
		esac || fail "granary $cmd ($name) failed: $(cat "$out")"
		if [ "$want" = - ]; then
			[ ! -s "$out" ] || fail "granary $cmd ($name) printed: $(cat "$out")"
		else
			grep -qE "^granary: warning: redis at '$meta' $want" "$out" ||
				fail "granary $cmd ($name): no warning /$want/: $(cat "$out")"
			check_eq "$(grep -c warning "$out")" 1 "warnings of granary $cmd ($name)"
		fi
	done
	echo hello >"$TMP/mnt-$name/f" && check_eq "$(cat "$TMP/mnt-$name/f")" hello "a file on $name"
	umount_vol "$TMP/mnt-$name"
	META=$meta
}

checks evicting "may evict keys \(maxmemory-policy allkeys-lru\).*: set maxmemory-policy noeviction" \
	--maxmemory-policy allkeys-lru --appendonly yes
grep -qE "^redis memory: .* used, no maxmemory, policy allkeys-lru" "$TMP/status-evicting.out" ||
	fail "status does not show the policy: $(cat "$TMP/status-evicting.out")"
"$GRANARY" status "$META" --json 2>/dev/null | tr -d ' \n' >"$TMP/evicting.json"
grep -q '"maxmemory_policy":"allkeys-lru"' "$TMP/evicting.json" &&
	grep -q '"warnings":\["evicts"\]' "$TMP/evicting.json" &&
	grep -q '"aof":true' "$TMP/evicting.json" ||
	fail "status --json: $(cat "$TMP/evicting.json")"
python3 -m json.tool "$TMP/evicting.json" >/dev/null || fail "status --json is not JSON"
ok "an evicting redis: one warning each from format, mount and status, which shows the policy (text, --json)"

checks volatile "keeps nothing on disk \(appendonly no, no save points\).*set appendonly yes" \
	--save '' --appendonly no
grep -qE "^redis disk: +AOF off, no RDB save points" "$TMP/status-volatile.out" ||
	fail "status does not show the persistence: $(cat "$TMP/status-volatile.out")"
ok "a redis without persistence: one warning each from format, mount and status"

checks safe - --appendonly yes --save '3600 1'
grep -qE "^redis disk: +AOF on \(last write ok\), RDB save points '3600 1'" "$TMP/status-safe.out" &&
	grep -qE "^redis: +7\.[0-9.]+ at 127\.0\.0\.1:[0-9]+, 0 replicas" "$TMP/status-safe.out" ||
	fail "status of a safe server: $(cat "$TMP/status-safe.out")"
ok "a safe redis: no warning anywhere; status shows version, address, persistence"

# --strict refuses, and leaves the database as it was
svc_start_redis_tcp "$TMP/redis-strict" "" --maxmemory-policy allkeys-random ||
	fail "cannot start redis (strict)"
expect_exit 1 "refusing redis at .*--strict" "$GRANARY" format \
	"redis://127.0.0.1:$SVC_REDIS_PORT/1" strict --strict --storage "file://$TMP/data-strict"
grep -q "may evict keys (maxmemory-policy allkeys-random)" "$TMP/expect.err" ||
	fail "format --strict does not say why: $(cat "$TMP/expect.err")"
check_eq "$(redis-cli -p "$SVC_REDIS_PORT" -n 1 dbsize)" 0 "keys after a refused format"
ok "format --strict refuses an evicting redis and writes nothing"

# managed Redis: CONFIG disabled; the policy still comes from INFO
checks managed "may evict keys \(maxmemory-policy allkeys-lru\)" \
	--rename-command CONFIG '' --maxmemory-policy allkeys-lru --save '' --appendonly no
grep -q "RDB save points unknown (CONFIG refused)" "$TMP/status-managed.out" ||
	fail "status with CONFIG disabled: $(cat "$TMP/status-managed.out")"
ok "CONFIG disabled: nothing fails, the policy still warned of, save points unknown"
