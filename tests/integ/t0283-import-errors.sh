#!/bin/bash
# t0283-import-errors.sh - what granary import says and exits with when
# something is wrong: bad usage (2); a source that is missing, not a
# directory, or holds the destination, a destination off granary (1); an
# unreadable file and directory of the source (named, the rest imported,
# 1); a missing bucket; keys refused by the V4-verifying server (and the right keys
# taken, odd keys signed right); a full quota, through a mount and in
# process (stops at once naming the file, nothing half-written under a
# final name, no temporary name left).
. "$(dirname "$0")/lib.sh"
TREE=$TOPDIR/tests/integ/importtree.py

nobody_volume err # $M, with --allow-other; $TMP reachable by nobody
mkdir -p "$TMP/src/d"
random_file "$TMP/src/one" 5000
random_file "$TMP/src/d/two" 7000

# ---- usage ----
expect_exit 2 "unknown option '--bogus'" "$GRANARY" import --bogus "$TMP/src" "$M/x"
expect_exit 2 "give SOURCE and DEST" "$GRANARY" import "$TMP/src"
expect_exit 2 "give SOURCE and DEST" "$GRANARY" import "$TMP/src" "$M/x" "$M/y"
expect_exit 2 "give the directory of the volume after META_URL" "$GRANARY" import "$TMP/src" "$META"
expect_exit 2 "threads" "$GRANARY" import -t 0 "$TMP/src" "$M/x"
"$GRANARY" import --help | grep -q "^usage: granary import" || fail "--help"
ok "bad usage: exit 2 with the problem named"

# ---- sources and destinations that cannot be ----
expect_exit 1 "cannot read source '$TMP/nosuch': No such file or directory" \
	"$GRANARY" import "$TMP/nosuch" "$M/x"
expect_exit 1 "source '$TMP/src/one' is not a directory" "$GRANARY" import "$TMP/src/one" "$M/x"
mkdir -p "$TMP/plain"
expect_exit 1 "destination '$TMP/plain/x' is not on a granary mount" \
	"$GRANARY" import "$TMP/src" "$TMP/plain/x"
expect_exit 1 "cannot use destination '$M/no/such/x'" "$GRANARY" import "$TMP/src" "$M/no/such/x"
expect_exit 1 "lies inside source" "$GRANARY" import "$M" "$M/pub/inside"
[ ! -e "$M/x" ] || fail "a refused import made its destination"
ok "a missing source, a file, a destination off granary or inside the source: exit 1, named"

# ---- unreadable parts of the source (as nobody: root reads everything) ----
mkdir -p "$TMP/usrc/open" "$TMP/usrc/closed"
random_file "$TMP/usrc/open/a" 3000
random_file "$TMP/usrc/secret.bin" 4000
random_file "$TMP/usrc/closed/b" 2000
random_file "$TMP/usrc/fine" 1000
chmod -R a+rX "$TMP/usrc"
chmod 000 "$TMP/usrc/secret.bin" "$TMP/usrc/closed"
expect_exit 1 "cannot read '$TMP/usrc/secret.bin': Permission denied" \
	as_nobody "$GRANARY" import -q "$TMP/usrc" "$M/pub/u"
grep -qF "cannot read '$TMP/usrc/closed': Permission denied" "$TMP/expect.err" ||
	fail "the unreadable directory is not named: $(cat "$TMP/expect.err")"
grep -q "^import: 2 files, .* 2 failed" "$TMP/expect.out" ||
	fail "summary after unreadable parts: $(cat "$TMP/expect.out")"
cmp "$TMP/usrc/open/a" "$M/pub/u/open/a" && cmp "$TMP/usrc/fine" "$M/pub/u/fine" ||
	fail "the readable files were not imported"
[ ! -e "$M/pub/u/secret.bin" ] || fail "the unreadable file has a name in the copy"
ok "an unreadable file and directory: named, the rest imported, exit 1"

# ---- S3: a missing bucket ----
# (keys that are no paths, "a//b", are named and skipped too; s3rver
# cannot hold such keys to show it)
need_s3
expect_exit 1 "cannot list '.*/nosuchbucket-$$/p': bucket does not exist" \
	"$GRANARY" import "$GRANARY_TEST_S3/nosuchbucket-$$/p" "$M/nb"
ok "a missing bucket: exit 1, named"

# ---- keys refused by the V4-verifying server; the right ones taken ----
need_s3v4
V4=http://127.0.0.1:$GRANARY_TEST_S3V4_PORT/granary-test/t0283-$$
for k in plain.txt "sp%20ace%2Bplus.txt" "%C3%BCn%C3%AF/%E5%90%8D.jpg"; do
	printf 'object %s' "$k" >"$TMP/body"
	check_eq "$(curl -sS -o /dev/null -w '%{http_code}' --aws-sigv4 "aws:amz:us-east-1:s3" \
		--user "$GRANARY_TEST_S3V4_ACCESS_KEY:$GRANARY_TEST_S3V4_SECRET_KEY" \
		-H "x-amz-content-sha256: UNSIGNED-PAYLOAD" -T "$TMP/body" "$V4/$k")" 200 "PUT $k"
done
SRC4=$GRANARY_TEST_S3V4/granary-test/t0283-$$
GRANARY_S3_ACCESS_KEY=$GRANARY_TEST_S3V4_ACCESS_KEY GRANARY_S3_SECRET_KEY=wrong-secret \
	expect_exit 1 "cannot read '.*/granary-test/t0283-$$': access key or secret refused" \
	"$GRANARY" import "$SRC4" "$M/v4bad"
[ -z "$(ls -A "$M/v4bad" 2>/dev/null)" ] || fail "files imported with refused keys"
GRANARY_S3_ACCESS_KEY=$GRANARY_TEST_S3V4_ACCESS_KEY \
	GRANARY_S3_SECRET_KEY=$GRANARY_TEST_S3V4_SECRET_KEY \
	"$GRANARY" import -q "$SRC4" "$M/v4" >"$TMP/o" 2>"$TMP/e" ||
	fail "import through the V4 server with the right keys: $(cat "$TMP/e")"
check_eq "$(cat "$M/v4/plain.txt")" "object plain.txt" "plain key"
check_eq "$(cat "$M/v4/sp ace+plus.txt")" "object sp%20ace%2Bplus.txt" "key with a space and a +"
check_eq "$(cat "$M/v4/ünï/名.jpg")" "object %C3%BCn%C3%AF/%E5%90%8D.jpg" "UTF-8 key"
# the source's own keys, when the usual variables hold the volume's
GRANARY_S3_ACCESS_KEY=volume-key GRANARY_S3_SECRET_KEY=volume-secret \
	GRANARY_IMPORT_S3_ACCESS_KEY=$GRANARY_TEST_S3V4_ACCESS_KEY \
	GRANARY_IMPORT_S3_SECRET_KEY=$GRANARY_TEST_S3V4_SECRET_KEY \
	"$GRANARY" import -q "$SRC4" "$M/v4own" >"$TMP/o" 2>"$TMP/e" ||
	fail "import with GRANARY_IMPORT_S3_* keys: $(cat "$TMP/e")"
check_eq "$(cat "$M/v4own/plain.txt")" "object plain.txt" "with the source's own keys"
ok "V4: a wrong secret refused (exit 1, named), the right keys (usual or GRANARY_IMPORT_S3_*) import odd keys byte-exact"

# ---- a full quota ----
mkdir -p "$TMP/qsrc"
for i in $(seq 1 40); do random_file "$TMP/qsrc/f$i" 131072; done
random_file "$TMP/qsrc/big" $((3 << 20))
for form in mount inproc; do
	mkdir "$M/q-$form"
	"$GRANARY" quota set "$META" --path "/q-$form" --capacity 2M >/dev/null ||
		fail "quota set"
	if [ $form = mount ]; then
		# clients read the quotas again within about a second
		wait_until 10 quota_seen "$M" || fail "the client does not enforce the quota"
		dest=("$M/q-$form")
	else
		dest=("$META" "/q-$form")
	fi
	expect_exit 1 "cannot write '[^']*/q-$form/[^']*': Disk quota exceeded" \
		"$GRANARY" import -q "$TMP/qsrc" "${dest[@]}"
	grep -q "import stopped: [0-9]* files imported" "$TMP/expect.err" ||
		fail "$form: no 'import stopped' line: $(cat "$TMP/expect.err")"
	python3 "$TREE" partial "$TMP/qsrc" "$M/q-$form" >"$TMP/partial" ||
		fail "$form: a file under its own name is not whole: $(cat "$TMP/partial")"
	grep -q "temps=0" "$TMP/partial" ||
		fail "$form: temporary names left: $(cat "$TMP/partial")"
	[ "$(find "$M/q-$form" -type f | wc -l)" -lt 41 ] ||
		fail "$form: every file imported past a 2M quota"
	ok "$form: a full quota stops the import, the file named; $(cat "$TMP/partial"), all whole"
done
