#!/bin/sh
# install-deps.sh [--bench] - install what granary needs to build, test and
# run, only when it is missing: Debian packages, and the s3rver S3 test
# server and the aws4 signer of its V4-verifying front (npm) under .deps/
# in the source tree (curl, promtool of prometheus and tmux check the
# metrics and the live stats: t0210, t0211; Debian's PyTorch 1.13, torchvision
# and PIL test the Python module, tools/python: t0275-t0277). --bench: also the
# peers the benchmarks compare with
# (s3fs, rclone) and gnuplot for their charts.
# Idempotent; quiet when all is there.
set -e
cd "$(dirname "$0")/.."

PKGS="build-essential pkg-config libfuse3-dev fuse3 libhiredis-dev libcurl4-openssl-dev libxml2-dev
liblz4-dev libxxhash-dev libssl-dev libjansson-dev libmicrohttpd-dev libcriterion-dev redis-server
redis-tools redis-sentinel attr procps psmisc stunnel4 bc yamllint
python3-kubernetes curl prometheus tmux python3-torch python3-torchvision python3-pil"
case ${1:-} in
--bench) PKGS="$PKGS s3fs rclone gnuplot-nox" ;;
"") ;;
*) echo "usage: tools/install-deps.sh [--bench]" >&2; exit 2 ;;
esac

missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
		missing="$missing $p"
done
# node and npm may come from elsewhere than Debian: want them only if absent
command -v node >/dev/null || missing="$missing nodejs"
command -v npm >/dev/null || missing="$missing npm"
# kubectl (t0216's offline decode) may come from elsewhere too (a cloud
# SDK); Debian's is in kubernetes-client
command -v kubectl >/dev/null || missing="$missing kubernetes-client"
if [ -n "$missing" ]; then
	echo "granary: installing Debian packages:$missing"
	SUDO=""
	if [ "$(id -u)" != 0 ]; then
		if command -v sudo >/dev/null; then SUDO=sudo; else
			echo "granary: not root and no sudo; run as root: apt-get install$missing" >&2
			exit 1
		fi
	fi
	export DEBIAN_FRONTEND=noninteractive
	$SUDO apt-get update -q >/dev/null || true
	$SUDO apt-get install -y -q --no-install-recommends $missing >/dev/null ||
		{ echo "granary: apt-get install$missing failed" >&2; exit 1; }
fi

# The S3 test server: a pinned s3rver in .deps/ (not needed by `make demo`).
if [ ! -x .deps/node_modules/.bin/s3rver ]; then
	echo "granary: installing s3rver 3.7.1 (npm) into .deps/"
	mkdir -p .deps
	(cd .deps && [ -f package.json ] || echo '{"private":true}' > package.json)
	(cd .deps && npm install --no-audit --no-fund --loglevel=error s3rver@3.7.1 >/dev/null) ||
		{ echo "granary: npm install s3rver failed (needed by the tests only)" >&2; exit 1; }
fi
# The V4 signing package of the verifying front (tests/lib/s3v4-front.js).
if [ ! -f .deps/node_modules/aws4/aws4.js ]; then
	echo "granary: installing aws4 1.13.2 (npm) into .deps/"
	(cd .deps && npm install --no-audit --no-fund --loglevel=error aws4@1.13.2 >/dev/null) ||
		{ echo "granary: npm install aws4 failed (needed by the tests only)" >&2; exit 1; }
fi
exit 0
