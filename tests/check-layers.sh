#!/bin/bash
# check-layers.sh - fail when a source file includes a header of a layer
# above its own (docs/layout.md). Project headers are named from the
# repository root ("lib/log.h"), so that the rule can be read off the
# #include line. The most specific folder's rule applies; tests/ and
# bench/ may include anything.
set -u
cd "$(dirname "$0")/.." || exit 1

rules=(
	"lib/:lib/"
	"meta/:meta/ lib/"
	"fs/:fs/fs.h"
	"fs/fuse/:fs/fuse/ fs/vfs/vfs.h fs/fs.h lib/"
	"fs/vfs/:fs/vfs/ fs/data/ fs/store/ fs/fs.h meta/ lib/"
	"fs/data/:fs/data/ fs/store/ meta/ lib/"
	"fs/store/:fs/store/ lib/"
	"gc/:gc/ fs/ meta/ lib/"
	"tools/:tools/ gc/ fs/ meta/ lib/"
)

bad=0 n=0
while IFS= read -r f; do
	allowed="" best=0
	for r in "${rules[@]}"; do
		d=${r%%:*}
		case $f in "$d"*) [ ${#d} -gt $best ] && best=${#d} allowed=${r#*:} ;; esac
	done
	[ $best = 0 ] && continue
	n=$((n + 1))
	while IFS= read -r inc; do
		case $inc in
		*/*) ;;
		*)
			echo "layers: $f: #include \"$inc\": name project headers from the repository root" >&2
			bad=$((bad + 1))
			continue
			;;
		esac
		ok=0
		for a in $allowed; do
			case $inc in "$a"*) ok=1 ;; esac
		done
		if [ $ok = 0 ]; then
			echo "layers: $f includes \"$inc\", a layer above its own (it may include: $allowed)" >&2
			bad=$((bad + 1))
		fi
	done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
done < <(git ls-files -co --exclude-standard '*.c' '*.h')

if [ $bad != 0 ]; then
	echo "layers: $bad includes go up (see docs/layout.md)" >&2
	exit 1
fi
echo "layers: $n files, every include goes down"
