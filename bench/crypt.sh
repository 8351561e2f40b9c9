#!/bin/bash
# crypt.sh [BUILD_DIR] - what encryption at rest costs: a checkpoint save
# (one file of BENCH_CRYPT_MB MiB of random bytes, dd bs=4M conv=fsync)
# and its cold read (a fresh mount, its disk cache emptied, the page
# cache dropped) on an encrypted volume and on a plain one, the same
# settings, in the same run. Rounds interleave the two (their order
# alternating), and the verdict takes the median of the rounds' ratios,
# as this machine's disk speed drifts over minutes. Storages:
# BENCH_CRYPT_STORAGES (file, s3 or both). Report:
# bench/results/crypt-DATE.md.
set -u -o pipefail
O=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/lib.sh"
case $O in /*) ;; *) O=$ROOT/$O ;; esac
MB=${BENCH_CRYPT_MB:-1024}
ROUNDS=${BENCH_CRYPT_ROUNDS:-3}
STORAGES=${BENCH_CRYPT_STORAGES:-file}
OUT=${BENCH_OUT:-$ROOT/bench/results}
STAMP=$(date +%Y-%m-%d-%H%M)
[ -x "$O/granary" ] || { say "crypt: '$O/granary' is missing: run 'make' first"; exit 1; }

. "$ROOT/tests/lib/services.sh"
TMP=$(realpath "$(mktemp -d "${BENCH_DIR:-/var/tmp}/granary-crypt.XXXXXX")")
RES=$TMP/res MOUNTS=""
mkdir -p "$RES" "$OUT" "$TMP/bin"
cp "$O/granary" "$TMP/bin/"
G=$TMP/bin/granary
trap 'mounts_cleanup crypt' EXIT
DD=(timeout -k 10 900 dd status=none bs=4M)

drop() { sync; echo 3 >/proc/sys/vm/drop_caches; }
mnt() { # VOL: a fresh mount with an empty disk cache; prints its path
	local mp=$TMP/mnt-$1 key
	key=$(cat "$TMP/keyof-$1")
	rm -rf "$TMP/cache-$1"
	mkdir -p "$mp"
	env ${key:+GRANARY_ENCRYPT_KEY_FILE=$key} "$G" mount "$(cat "$TMP/url-$1")" "$mp" \
		--log "$TMP/$1.log" --cache-dir "$TMP/cache-$1" --cache-size 4G \
		</dev/null >/dev/null 2>&1 || { say "crypt: mount of $1 failed (see $TMP/$1.log)"; exit 1; }
	echo "$mp"
}
umnt() { "$G" umount "$1" >/dev/null || { say "crypt: umount $1 failed"; exit 1; }; }
timed() { # ID KEY CMD...: MiB/s of CMD
	local t0 t1
	t0=$(now)
	"${@:3}" || { say "crypt: failed: ${*:3}"; exit 1; }
	t1=$(now)
	put "$1" "$2" "$(awk -v a="$t0" -v b="$t1" -v m="$MB" 'BEGIN { printf "%.1f", m / (b - a) }')"
}

# one round of VOL: save, then the cold read of what was saved
round() { # VOL R
	local mp
	mp=$(mnt "$1")
	drop
	cat "$SRC" >/dev/null
	timed "$1" "save_r$2" "${DD[@]}" if="$SRC" of="$mp/ckpt.pt" conv=fsync
	umnt "$mp"
	mp=$(mnt "$1")
	drop
	timed "$1" "cold_r$2" "${DD[@]}" if="$mp/ckpt.pt" of=/dev/null
	[ "$2" != 1 ] || cmp -s "$SRC" "$mp/ckpt.pt" || { say "crypt: DATA MISMATCH on $1"; exit 1; }
	rm -f "$mp/ckpt.pt"
	umnt "$mp"
}

svc_start_redis "$TMP/redis" >/dev/null || exit 1
case " $STORAGES " in *" s3 "*) svc_start_s3rver "$TMP/s3" bench >/dev/null || exit 1 ;; esac
SRC=$TMP/src.pt
head -c $((MB << 20)) /dev/urandom >"$SRC"
head -c 32 /dev/urandom | base64 >"$TMP/key"
db=1
for st in $STORAGES; do
	for kind in plain enc; do
		v=$st-$kind
		meta="$GRANARY_TEST_REDIS?db=$db"
		redis-cli -s "$GRANARY_TEST_REDIS_SOCK" -n "$db" flushdb >/dev/null
		db=$((db + 1))
		printf '%s' "$meta" >"$TMP/url-$v"
		case $st in
		file) url=file://$TMP/data-$v && mkdir -p "$TMP/data-$v" ;;
		s3) url=$GRANARY_TEST_S3/bench/$v ;;
		esac
		enc=() key=""
		[ $kind = plain ] || { enc=(--encrypt "$TMP/key"); key=$TMP/key; }
		echo "$key" >"$TMP/keyof-$v"
		"$G" format "$meta" "$v" --storage "$url" --trash-days 0 "${enc[@]}" >/dev/null ||
			{ say "crypt: format $v failed"; exit 1; }
		MOUNTS="$MOUNTS $TMP/mnt-$v"
	done
done

T0=$(date +%s)
for st in $STORAGES; do
	for r in $(seq 1 "$ROUNDS"); do
		say "crypt: $st round $r"
		if [ $((r % 2)) = 1 ]; then order="plain enc"; else order="enc plain"; fi
		for kind in $order; do round "$st-$kind" "$r"; done
	done
done
RUNTIME=$(($(date +%s) - T0))

# the median over the rounds of enc / plain for KEY
pratio() { # ST KEY
	local r v=""
	for r in $(seq 1 "$ROUNDS"); do
		v="$v $(awk -v a="$(get "$1-enc" "$2_r$r")" -v b="$(get "$1-plain" "$2_r$r")" 'BEGIN { printf "%.4f", a / b }')"
	done
	# shellcheck disable=SC2086
	mid $v
}
rounds() { # ST KEY
	local r out=""
	for r in $(seq 1 "$ROUNDS"); do out="$out${out:+, }$(get "$1-enc" "$2_r$r") / $(get "$1-plain" "$2_r$r")"; done
	echo "$out"
}
verdict() { awk -v p="$1" 'BEGIN { printf "%s (%.2fx)", (p >= 0.9 ? "met" : "**NOT met**"), p }'; }
report() {
	echo "# granary encryption at rest benchmark, $STAMP"
	echo
	echo "One file of $MB MiB of random bytes saved (\`dd bs=4M conv=fsync\`, the source in the page cache)" \
		"and read back cold (a fresh mount, an emptied --cache-dir, page cache dropped), on a volume" \
		"formatted with \`--encrypt\` and on a plain one; $ROUNDS rounds, the two interleaved (the order" \
		"alternating); $(nproc) cores, Linux $(uname -r), $(openssl version | cut -d' ' -f1-2)," \
		"CPU AES: $(grep -qw aes /proc/cpuinfo && echo yes || echo no); run took ${RUNTIME} s."
	echo
	echo "| storage | save MiB/s, encrypted / plain, each round | cold read MiB/s, encrypted / plain, each round | save ratio (median of rounds) | cold read ratio (median of rounds) |"
	echo "|---|---|---|---|---|"
	for st in $STORAGES; do
		echo "| $st | $(rounds "$st" save) | $(rounds "$st" cold) | $(verdict "$(pratio "$st" save)") | $(verdict "$(pratio "$st" cold)") |"
	done
	echo
	echo "Target: encrypted ≥ 0.9x plain for both."
}
REPORT=$OUT/crypt-$STAMP.md
report >"$REPORT"
cat "$REPORT"
say "report: $REPORT"
