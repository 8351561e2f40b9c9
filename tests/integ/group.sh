# shellcheck shell=bash
# group.sh - helpers of the cache group tests (t0263-t0269), sourced after
# lib.sh. Each member is a mount of the volume at $TMP/mN with its own
# cache directory ($TMP/cache-mN, mount_vol's) and its own loopback
# address 127.0.0.(N+1), port 0: a node of its own.

GROUP=${GROUP:-g}

# group_volume NAME [FORMAT ARGS...]: new_volume, on s3 through a
# bench/slowproxy of the test's own (no delay, no cap) whose log counts
# every GET the store answers: PROXY_LOG. The objects are DATA_DIRS'.
group_volume() {
	local name=$1 db
	shift
	if [ "$GRANARY_STORAGE" != s3 ]; then
		new_volume "$name" "$@"
		return
	fi
	need_redis
	need_s3
	local proxy=$BUILD/bench/slowproxy port
	[ -x "$proxy" ] || fail "no $proxy (make all)"
	PROXY_LOG=$TMP/proxy-$name.log
	"$proxy" --listen 127.0.0.1:0 --target "127.0.0.1:$GRANARY_TEST_S3_PORT" \
		--delay-ms 0 --conn-mbps 0 --log "$PROXY_LOG" \
		>"$TMP/proxy-$name.out" 2>"$TMP/proxy-$name.err" &
	bg_track $!
	wait_until 10 test -s "$TMP/proxy-$name.out" ||
		fail "the proxy did not start: $(cat "$TMP/proxy-$name.err")"
	port=$(head -n 1 "$TMP/proxy-$name.out")
	db=$(next_db)
	redis-cli -s "$GRANARY_TEST_REDIS_SOCK" -n "$db" flushdb >/dev/null
	META="$GRANARY_TEST_REDIS?db=$db"
	PREFIX=granary-test/$name-$$
	DATA_DIRS="${GRANARY_TEST_S3_DATA:-}/$PREFIX"
	STORAGE="s3+http://127.0.0.1:$port/$PREFIX"
	"$GRANARY" format "$META" "$name" --storage "$STORAGE" --trash-days 0 "$@" \
		>"$TMP/format-$name.out" 2>&1 ||
		fail "granary format $name failed: $(cat "$TMP/format-$name.out")"
}

# gmount N [ARGS...]: member N of $GROUP at $TMP/mN, serving at
# 127.0.0.(N+1), any free port.
gmount() {
	local n=$1
	shift
	mount_vol "$META" "$TMP/m$n" --cache-group "$GROUP" \
		--group-addr "127.0.0.$((n + 1)):0" "$@"
}

# gstats N: member N's granary.stats, JSON
gstats() {
	getfattr --absolute-names --only-values -n granary.stats "$TMP/m$1"
}
# gfig N FIELD: a figure of member N's group object (group.FIELD)
gfig() { stat_of "$TMP/m$1" group "$2"; }
# ggets N...: the store GETs of members N..., summed
ggets() {
	local n s=0
	for n in "$@"; do s=$((s + $(stat_of "$TMP/m$n" store gets))); done
	echo "$s"
}
# gaddr N: where member N serves
gaddr() {
	gstats "$1" | python3 -c 'import json, sys; print(json.load(sys.stdin)["group"]["address"])'
}
# gmembers N COUNT: member N lists COUNT live members
gmembers() { [ "$(gfig "$1" members)" = "$2" ]; }

# dataset DIR FILES BYTES: FILES random files of BYTES each in DIR, with
# their md5 sums in $TMP/sums (relative names)
dataset() {
	local dir=$1 i
	mkdir -p "$dir"
	for i in $(seq 1 "$2"); do random_file "$dir/f$i" "$3"; done
	(cd "$dir" && md5sum -- *) >"$TMP/sums"
}

# small_files DIR COUNT: COUNT small random files sN in DIR, written 20
# at once (their closes share packs)
small_files() {
	seq 1 "$2" | xargs -P 20 -I{} sh -c 'head -c $((5000 + {} * 61)) /dev/urandom >"$0/s{}"' "$1"
}

# epoch MP DIR: read every file of DIR (relative to MP) in a shuffled
# order and check its bytes against $TMP/sums
epoch() {
	(cd "$1/$2" && shuf "$TMP/sums" | md5sum -c --quiet -)
}

# store_once [FROM]: on s3, the proxy log's successful GETs of the
# volume's objects (blocks/ and packs/), after line FROM: "gets keys max"
proxy_gets() {
	tail -n +"$((${1:-0} + 1))" "$PROXY_LOG" |
		awk -v p="/$PREFIX/" '$1 == "GET" && $3 ~ /^2/ {
			k = $2; sub(/\?.*/, "", k)
			if (index(k, p "blocks/") != 1 && index(k, p "packs/") != 1) next
			n++; c[k]++ }
		END { m = 0; for (k in c) { d++; if (c[k] > m) m = c[k] }
		      print n + 0, d + 0, m + 0 }'
}
proxy_mark() { wc -l <"$PROXY_LOG"; }

# cached_keys DIR: the keys of the objects a cache directory holds
cached_keys() {
	(cd "$1" && find . -type f \( -path '*/blocks/*' -o -path '*/packs/*' \) |
		{ grep -v '/\.tmp\.' || true; } | sed 's|^\./[^/]*/||' | sort)
}

# cached_objects DIR: the objects (block and pack files) a cache
# directory holds
cached_objects() {
	find "$1" -type f \( -path '*/blocks/*' -o -path '*/packs/*' \) 2>/dev/null |
		{ grep -v '/\.tmp\.' || true; } | wc -l
}
