# services.sh - start and stop the real services the tests need, in a
# temporary directory, by PID. Source it; call svc_start_redis and
# svc_start_s3rver, and svc_stop_all from an EXIT trap.
#
# Exports: GRANARY_TEST_REDIS (unix:///.../redis.sock?db=N URL base),
#          GRANARY_TEST_REDIS_SOCK, GRANARY_TEST_S3 (s3+http://127.0.0.1:PORT),
#          GRANARY_TEST_S3_PORT, GRANARY_S3_ACCESS_KEY/SECRET_KEY (s3rver's);
#          svc_start_s3v4 (a server that verifies Signature V4):
#          GRANARY_TEST_S3V4 and its _PORT, _ACCESS_KEY, _SECRET_KEY, _REGION,
#          and temporary credentials: _TEMP_ACCESS_KEY, _TEMP_SECRET_KEY,
#          _SESSION_TOKEN;
#          svc_start_tls (a TLS front): GRANARY_TEST_TLS_PORT, _CA.

SVC_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")/../.." && pwd)
SVC_PIDS=""

# svc_free_port: a loopback port free now. Under tests/integ/run.sh, which
# runs tests at once, each port is handed out once per run (env
# SVC_PORTS_TAKEN: the file of those given, under a lock): the port of a
# server a test stops and starts again, or a port a test keeps closed, is
# not given to another test meanwhile.
svc_free_port() {
	local f=${SVC_PORTS_TAKEN:-}
	[ -n "$f" ] || { svc_pick_port; return; }
	(
		flock 9
		for _ in $(seq 1 50); do
			port=$(svc_pick_port) || exit 1
			grep -qx "$port" "$f" 2>/dev/null && continue
			echo "$port" >>"$f"
			echo "$port"
			exit 0
		done
		echo "services: no free port not handed out already" >&2
		exit 1
	) 9>>"$f.lock"
}
svc_pick_port() {
	node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
}

# svc_wait_redis LOG REDIS-CLI-ARGS...: wait (up to 5 s) until the server
# redis-cli reaches with ARGS answers PING; else say so, naming its LOG.
svc_wait_redis() {
	local log=$1; shift
	for _ in $(seq 1 100); do
		# PONG, not just exit 0: redis-cli exits 0 on an error reply too,
		# such as LOADING while a restarted server reads its AOF
		[ "$(redis-cli "$@" ping 2>/dev/null)" = PONG ] && return 0
		sleep 0.05
	done
	echo "services: redis-server did not start (see $log)" >&2
	return 1
}

# svc_start_redis DIR: redis-server on DIR/redis.sock, no persistence
# (SVC_REDIS_PERSIST=1: an fsync'd append-only file in DIR, so a restart on
# the same DIR keeps the data).
svc_start_redis() {
	local dir=$1
	local persist=(--save '' --appendonly no)
	[ "${SVC_REDIS_PERSIST:-0}" = 1 ] && persist=(--appendonly yes --appendfsync always)
	mkdir -p "$dir"
	redis-server --port 0 --unixsocket "$dir/redis.sock" --unixsocketperm 700 \
		--dir "$dir" "${persist[@]}" --databases 64 \
		--daemonize no --logfile "$dir/redis.log" &
	local pid=$!
	SVC_PIDS="$SVC_PIDS $pid"
	GRANARY_TEST_REDIS_PID=$pid
	svc_wait_redis "$dir/redis.log" -s "$dir/redis.sock" || return 1
	export GRANARY_TEST_REDIS_SOCK="$dir/redis.sock"
	export GRANARY_TEST_REDIS="unix://$dir/redis.sock"
}

# svc_wait_port PORT NAME LOG: wait (up to 10 s) until 127.0.0.1:PORT
# accepts a connection; else say that NAME did not start, naming its LOG.
svc_wait_port() {
	for _ in $(seq 1 200); do
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		sleep 0.05
	done
	echo "services: $2 did not start (see $3)" >&2
	return 1
}

# svc_start_s3rver DIR [BUCKET...]: s3rver on a free loopback port, its
# objects in DIR/data (env SVC_S3RVER_DATA=PATH: in PATH, e.g. another
# s3rver's). Run by tests/lib/s3rver.js, so that a PUT whose client dies
# in the middle of its body stores nothing, as on S3 (s3rver alone keeps
# the bytes that came as the object).
#
# Lenient unless env SVC_S3RVER_STRICT=1: s3rver signs a bucket-level
# request (a listing) as "/bucket" where libs3 and AWS sign "/bucket/", so
# it refuses every listing of libs3's unless started with
# --allow-mismatched-signatures; granary format lists the storage (no other
# volume may lie inside it) and granary gc the store, so the default
# instance (tests/integ/run.sh, tests/run-unit.sh, bench/) has the flag.
# The flag also makes s3rver accept a WRONG secret (an unknown access key
# is still refused): the tests of refused secrets start a strict instance
# of their own (tests/integ/lib.sh need_strict_s3, test_objstore.c
# private_s3rver), which refuses wrong secrets and every listing.
svc_start_s3rver() {
	local dir=$1; shift
	local bin="$SVC_ROOT/.deps/node_modules/.bin/s3rver"
	local data=${SVC_S3RVER_DATA:-$dir/data}
	[ -x "$bin" ] || { echo "services: s3rver missing: run tools/install-deps.sh" >&2; return 1; }
	mkdir -p "$dir" "$data"
	local port args=""
	port=$(svc_free_port)
	for b in "$@"; do args="$args --configure-bucket $b"; done
	[ "${SVC_S3RVER_STRICT:-0}" = 1 ] || args="$args --allow-mismatched-signatures"
	# s3rver's ListObjectsV2 continuation tokens are DES-encrypted, which
	# OpenSSL 3 has only in its legacy provider
	NODE_OPTIONS="${NODE_OPTIONS:-} --openssl-legacy-provider" \
		node "$SVC_ROOT/tests/lib/s3rver.js" -d "$data" -a 127.0.0.1 \
		-p "$port" --silent $args >"$dir/s3rver.log" 2>&1 &
	local pid=$!
	SVC_PIDS="$SVC_PIDS $pid"
	GRANARY_TEST_S3_PID=$pid
	svc_wait_port "$port" s3rver "$dir/s3rver.log" || return 1
	export GRANARY_TEST_S3_PORT=$port
	export GRANARY_TEST_S3="s3+http://127.0.0.1:$port"
	export GRANARY_S3_ACCESS_KEY=S3RVER GRANARY_S3_SECRET_KEY=S3RVER
}

# svc_start_s3v4 DIR [BUCKET...]: an S3 server that verifies Signature V4:
# tests/lib/s3v4-front.js (recomputes each request's signature with the
# aws4 npm package) on a free loopback port, in front of an s3rver of its
# own (objects in DIR/data) that only it reaches. Exports
# GRANARY_TEST_S3V4 (s3+http://127.0.0.1:PORT, path-style),
# GRANARY_TEST_S3V4_PORT, _ACCESS_KEY, _SECRET_KEY and _REGION (the only
# credentials and region it accepts), and a temporary key pair (as STS
# hands out) that is only taken with its session token:
# _TEMP_ACCESS_KEY, _TEMP_SECRET_KEY, _SESSION_TOKEN; leaves
# GRANARY_TEST_S3* alone.
# Virtual-hosted style: Host BUCKET.s3.amazonaws.com:PORT, connected to
# 127.0.0.1:PORT (curl --connect-to, libcurl CURLOPT_CONNECT_TO).
svc_start_s3v4() {
	local dir=$1; shift
	local saved=("${GRANARY_TEST_S3-}" "${GRANARY_TEST_S3_PORT-}" "${GRANARY_TEST_S3_PID-}")
	local ak=GRANARYV4TEST sk=granary-v4-test-secret region=us-east-1 port
	# a token as long as STS's, with the characters theirs hold
	local tak=ASIAGRANARYV4TEMP tsk=granary-v4-temp-secret
	local token
	token="FwoGZXIvYXdzE/granary+test=$(head -c 1200 /dev/zero | tr '\0' 'x')//end="
	[ -f "$SVC_ROOT/.deps/node_modules/aws4/aws4.js" ] ||
		{ echo "services: aws4 (npm) missing: run tools/install-deps.sh" >&2; return 1; }
	svc_start_s3rver "$dir/s3rver" "$@" || return 1
	local up=$GRANARY_TEST_S3_PORT
	GRANARY_TEST_S3=${saved[0]} GRANARY_TEST_S3_PORT=${saved[1]} GRANARY_TEST_S3_PID=${saved[2]}
	[ -n "$GRANARY_TEST_S3" ] || unset GRANARY_TEST_S3 GRANARY_TEST_S3_PORT GRANARY_TEST_S3_PID
	port=$(svc_free_port)
	node "$SVC_ROOT/tests/lib/s3v4-front.js" "$port" "$up" "$ak" "$sk" "$region" \
		"$tak" "$tsk" "$token" >"$dir/s3v4-front.log" 2>&1 &
	SVC_PIDS="$SVC_PIDS $!"
	svc_wait_port "$port" "the V4 front" "$dir/s3v4-front.log" || return 1
	export GRANARY_TEST_S3V4="s3+http://127.0.0.1:$port" GRANARY_TEST_S3V4_PORT=$port
	export GRANARY_TEST_S3V4_ACCESS_KEY=$ak GRANARY_TEST_S3V4_SECRET_KEY=$sk
	export GRANARY_TEST_S3V4_REGION=$region
	export GRANARY_TEST_S3V4_TEMP_ACCESS_KEY=$tak GRANARY_TEST_S3V4_TEMP_SECRET_KEY=$tsk
	export GRANARY_TEST_S3V4_SESSION_TOKEN=$token
}

# svc_start_tls DIR UPSTREAM_PORT: a TLS front (Debian's stunnel4) on a
# free loopback port for the plain-HTTP server on UPSTREAM_PORT, with a
# certificate for 127.0.0.1 (an IP SAN only, so "localhost" does not
# match it) signed by a CA made here, in DIR. Exports GRANARY_TEST_TLS_PORT
# and GRANARY_TEST_TLS_CA (the CA's PEM, for GRANARY_S3_CA_BUNDLE); the
# system store does not trust that CA, which is the untrusted case.
svc_start_tls() {
	local dir=$1 up=$2 port
	command -v stunnel4 >/dev/null ||
		{ echo "services: stunnel4 missing: run tools/install-deps.sh" >&2; return 1; }
	mkdir -p "$dir"
	openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=granary test CA" \
		-keyout "$dir/ca.key" -out "$dir/ca.pem" >"$dir/openssl.log" 2>&1 &&
	openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" \
		-keyout "$dir/server.key" -out "$dir/server.csr" >>"$dir/openssl.log" 2>&1 &&
	printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >"$dir/ext.cnf" &&
	openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" \
		-CAcreateserial -days 2 -extfile "$dir/ext.cnf" \
		-out "$dir/server.pem" >>"$dir/openssl.log" 2>&1 ||
		{ echo "services: cannot make test certificates (see $dir/openssl.log)" >&2; return 1; }
	port=$(svc_free_port)
	cat >"$dir/stunnel.conf" <<-CONF
	foreground = yes
	pid =
	output = $dir/stunnel.log
	[s3]
	accept = 127.0.0.1:$port
	connect = 127.0.0.1:$up
	cert = $dir/server.pem
	key = $dir/server.key
	CONF
	stunnel4 "$dir/stunnel.conf" >>"$dir/stunnel.log" 2>&1 &
	SVC_PIDS="$SVC_PIDS $!"
	svc_wait_port "$port" "the TLS front (stunnel4)" "$dir/stunnel.log" || return 1
	export GRANARY_TEST_TLS_PORT=$port GRANARY_TEST_TLS_CA=$dir/ca.pem
}

svc_stop_all() {
	local p
	for p in $SVC_PIDS; do kill "$p" 2>/dev/null; done
	for p in $SVC_PIDS; do wait "$p" 2>/dev/null; done
	SVC_PIDS=""
}

# ---- replication and Sentinel (tests/integ/t0180-failover.sh, bench/) ----

# svc_start_redis_tcp DIR [PORT] [REDIS-SERVER ARGS...]: a redis-server on
# 127.0.0.1:PORT (a free port when PORT is empty or 0), its files in DIR,
# no persistence unless ARGS say otherwise (--replicaof HOST PORT makes a
# replica, which syncs at once: no diskless-sync delay). Sets
# SVC_REDIS_PORT and SVC_REDIS_PID (stopped by svc_stop_all, or kill it by
# that PID to simulate a crash).
svc_start_redis_tcp() {
	local dir=$1 port=${2:-0}; shift; [ $# -gt 0 ] && shift
	[ "$port" = 0 ] && port=$(svc_free_port)
	mkdir -p "$dir"
	redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" \
		--save '' --appendonly no --databases 64 \
		--repl-diskless-sync-delay 0 \
		--daemonize no --logfile "$dir/redis.log" "$@" &
	local pid=$!
	SVC_PIDS="$SVC_PIDS $pid"
	svc_wait_redis "$dir/redis.log" -p "$port" || return 1
	SVC_REDIS_PORT=$port
	SVC_REDIS_PID=$pid
}

# svc_wait_replica PORT: wait (up to 10 s) until the replica on PORT is in
# sync with its master.
svc_wait_replica() {
	local port=$1
	for _ in $(seq 1 200); do
		redis-cli -p "$port" info replication 2>/dev/null |
			grep -q '^master_link_status:up' && return 0
		sleep 0.05
	done
	echo "services: the replica on port $port did not sync" >&2
	return 1
}

# svc_start_sentinels DIR N NAME MASTER_PORT: N redis-sentinel processes
# on free loopback ports watching the master 127.0.0.1:MASTER_PORT under
# NAME, quorum N/2+1, quick to act (the master is down after 1 s without
# an answer; a failover is retried after 5 s). Each has a config file of
# its own in DIR/sK (sentinels rewrite it). Sets SVC_SENTINEL_PORTS (the
# ports, space separated), SVC_SENTINEL_PIDS and SVC_SENTINEL_HOSTS
# ("127.0.0.1:P1,127.0.0.1:P2,...", for a metadata URL).
svc_start_sentinels() {
	local dir=$1 n=$2 name=$3 mport=$4 k port pid
	SVC_SENTINEL_PORTS="" SVC_SENTINEL_PIDS="" SVC_SENTINEL_HOSTS=""
	for k in $(seq 1 "$n"); do
		port=$(svc_free_port)
		mkdir -p "$dir/s$k"
		cat >"$dir/s$k/sentinel.conf" <<-CONF
		port $port
		bind 127.0.0.1
		daemonize no
		dir $dir/s$k
		logfile $dir/s$k/sentinel.log
		sentinel monitor $name 127.0.0.1 $mport $((n / 2 + 1))
		sentinel down-after-milliseconds $name 1000
		sentinel failover-timeout $name 5000
		sentinel parallel-syncs $name 1
		CONF
		redis-sentinel "$dir/s$k/sentinel.conf" &
		pid=$!
		SVC_PIDS="$SVC_PIDS $pid"
		SVC_SENTINEL_PIDS="$SVC_SENTINEL_PIDS $pid"
		SVC_SENTINEL_PORTS="$SVC_SENTINEL_PORTS $port"
		SVC_SENTINEL_HOSTS="$SVC_SENTINEL_HOSTS${SVC_SENTINEL_HOSTS:+,}127.0.0.1:$port"
	done
	for port in $SVC_SENTINEL_PORTS; do
		for _ in $(seq 1 100); do
			redis-cli -p "$port" sentinel get-master-addr-by-name "$name" 2>/dev/null |
				grep -q . && break
			sleep 0.05
		done
		redis-cli -p "$port" ping >/dev/null 2>&1 ||
			{ echo "services: redis-sentinel on port $port did not start (see $dir)" >&2; return 1; }
	done
	# a failover needs a quorum of sentinels that know each other (they
	# meet through the master every 2 s) and the replicas (INFO)
	for port in $SVC_SENTINEL_PORTS; do
		for _ in $(seq 1 200); do
			[ "$(svc_sentinel_field "$port" "$name" num-other-sentinels)" = $((n - 1)) ] && break
			sleep 0.05
		done
		[ "$(svc_sentinel_field "$port" "$name" num-other-sentinels)" = $((n - 1)) ] ||
			{ echo "services: the sentinel on port $port did not meet the others" >&2; return 1; }
	done
}

# svc_sentinel_field PORT NAME FIELD: a field of SENTINEL MASTER NAME
# (num-slaves, num-other-sentinels, flags, ...) at the sentinel on PORT.
svc_sentinel_field() {
	redis-cli -p "$1" sentinel master "$2" 2>/dev/null |
		awk -v f="$3" 'NR % 2 == 1 && $0 == f { getline; print; exit }'
}

# svc_sentinel_master NAME: the master's port the first sentinel names.
svc_sentinel_master() {
	local p
	p=${SVC_SENTINEL_PORTS# }; p=${p%% *}
	redis-cli -p "$p" sentinel get-master-addr-by-name "$1" 2>/dev/null | sed -n 2p
}
