#!/bin/bash
# storage: s3
# t0201-s3v4-server.sh - the test S3 server that verifies Signature V4
# (tests/lib/s3v4-front.js before s3rver, svc_start_s3v4) does verify:
# requests signed by curl's own V4 signer (an implementation neither the
# front's aws4 nor granary's) are served, byte-exact: PUT with a payload
# hash and UNSIGNED-PAYLOAD, GET whole and with a signed Range, HEAD,
# ListObjectsV2 with prefix and continuation-token, DELETE, path-style and
# virtual-hosted-style; a wrong secret, a wrong region, no signature, a
# correct V2 signature and a body that does not match its
# x-amz-content-sha256 are each refused with S3's code. And the plain
# s3rver the tests run (tests/lib/s3rver.js) stores nothing of a PUT cut
# in the middle of its body, as S3.
# Runs once: it tests the server, not a storage family.
. "$(dirname "$0")/lib.sh"

curl --help all 2>/dev/null | grep -q -- --aws-sigv4 || {
	skip "curl $(curl --version | awk 'NR == 1 { print $2 }') has no --aws-sigv4 (7.75 or later)"
	exit 0
}
need_s3v4
# a prefix of this run's own in the shared bucket
P=t0201-$$
BUCKET=http://127.0.0.1:$GRANARY_TEST_S3V4_PORT/granary-test URL=$BUCKET/$P
AK=$GRANARY_TEST_S3V4_ACCESS_KEY SK=$GRANARY_TEST_S3V4_SECRET_KEY
REGION=$GRANARY_TEST_S3V4_REGION
EMPTY=e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855

# req SECRET REGION CURL-ARGS...: a V4-signed request; prints the HTTP
# status, the response body in $TMP/body
req() {
	local sk=$1 region=$2; shift 2
	curl -sS -o "$TMP/body" -w '%{http_code}' \
		--aws-sigv4 "aws:amz:$region:s3" --user "$AK:$sk" "$@"
}
s3() { req "$SK" "$REGION" "$@"; }
sha() { sha256sum "$1" | cut -d' ' -f1; }
# refused STATUS CODE WHAT: the last response ($TMP/status, $TMP/body) was
# STATUS with S3 error CODE
refused() {
	check_eq "$(cat "$TMP/status")" "$1" "$3: HTTP status"
	grep -q "<Code>$2</Code>" "$TMP/body" ||
		fail "$3: no <Code>$2</Code> in: $(head -c 300 "$TMP/body")"
}

random_file "$TMP/a" 300000
random_file "$TMP/b" 70000
printf 'ccc' >"$TMP/c"

# ---- signed requests are served, byte-exact ----
check_eq "$(s3 -T "$TMP/a" -H "x-amz-content-sha256: $(sha "$TMP/a")" "$URL/d/a")" 200 "PUT with payload hash"
check_eq "$(s3 -T "$TMP/b" -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" "$URL/d/b")" 200 "PUT UNSIGNED-PAYLOAD"
check_eq "$(s3 -T "$TMP/c" -H "x-amz-content-sha256: $(sha "$TMP/c")" "$URL/e/c")" 200 "PUT outside the prefix"
check_eq "$(s3 -H "x-amz-content-sha256: $EMPTY" "$URL/d/a")" 200 "GET"
cmp -s "$TMP/body" "$TMP/a" || fail "GET: bytes differ from what was put"
check_eq "$(s3 -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" "$URL/d/b")" 200 "GET UNSIGNED-PAYLOAD"
cmp -s "$TMP/body" "$TMP/b" || fail "GET of the UNSIGNED-PAYLOAD object: bytes differ"
ok "PUT with a payload hash and with UNSIGNED-PAYLOAD, GET back byte-exact"

check_eq "$(s3 -H "x-amz-content-sha256: $EMPTY" -r 1000-1999 "$URL/d/a")" 206 "GET with Range"
cmp -s "$TMP/body" <(tail -c +1001 "$TMP/a" | head -c 1000) || fail "GET with Range: wrong bytes"
# a Range header the client signs (curl signs the headers it is given)
check_eq "$(s3 -H "x-amz-content-sha256: $EMPTY" -H "Range: bytes=299990-" "$URL/d/a")" 206 "GET with a signed Range"
cmp -s "$TMP/body" <(tail -c 10 "$TMP/a") || fail "GET with a signed Range: wrong bytes"
ok "GET with a Range (unsigned and signed header): the bytes of the range"

s3 -I -H "x-amz-content-sha256: $EMPTY" "$URL/d/a" >"$TMP/status"
check_eq "$(cat "$TMP/status")" 200 "HEAD"
grep -qi '^content-length: 300000' "$TMP/body" || fail "HEAD: no content-length 300000: $(cat "$TMP/body")"
ok "HEAD: 200 and the object's length"

# ListObjectsV2, 2 keys a page: curl 7.88 signs the query as given, so it
# is given in canonical form (sorted, encoded)
keys() { grep -o '<Key>[^<]*</Key>' "$TMP/body" | sed 's/<[^>]*>//g' | tr '\n' ' '; }
check_eq "$(s3 -H "x-amz-content-sha256: $EMPTY" "$BUCKET?list-type=2&max-keys=1&prefix=$P%2Fd%2F")" 200 "list page 1"
check_eq "$(keys)" "$P/d/a " "list page 1 keys"
grep -q '<IsTruncated>true</IsTruncated>' "$TMP/body" || fail "list page 1 is not truncated"
token=$(sed -n 's/.*<NextContinuationToken>\([^<]*\)<.*/\1/p' "$TMP/body")
[ -n "$token" ] || fail "list page 1: no NextContinuationToken"
etoken=$(node -e 'process.stdout.write(encodeURIComponent(process.argv[1]))' "$token")
check_eq "$(s3 -H "x-amz-content-sha256: $EMPTY" \
	"$BUCKET?continuation-token=$etoken&list-type=2&max-keys=1&prefix=$P%2Fd%2F")" 200 "list page 2"
check_eq "$(keys)" "$P/d/b " "list page 2 keys"
grep -q '<IsTruncated>false</IsTruncated>' "$TMP/body" || fail "list page 2 is truncated"
ok "ListObjectsV2 with a prefix and a continuation-token: d/a, then d/b"

check_eq "$(s3 -X DELETE -H "x-amz-content-sha256: $EMPTY" "$URL/d/b")" 204 "DELETE"
check_eq "$(s3 -H "x-amz-content-sha256: $EMPTY" "$URL/d/b")" 404 "GET after DELETE"
ok "DELETE: 204, then the object is gone"

# virtual-hosted style: the bucket in the (signed) Host, reached on
# loopback; s3rver takes BUCKET.s3.amazonaws.com as the bucket's host
VH=granary-test.s3.amazonaws.com:$GRANARY_TEST_S3V4_PORT
check_eq "$(s3 -H "x-amz-content-sha256: $EMPTY" --connect-to "$VH:127.0.0.1:$GRANARY_TEST_S3V4_PORT" \
	"http://$VH/$P/d/a")" 200 "virtual-hosted-style GET"
cmp -s "$TMP/body" "$TMP/a" || fail "virtual-hosted-style GET: bytes differ"
req wrong-secret "$REGION" -H "x-amz-content-sha256: $EMPTY" \
	--connect-to "$VH:127.0.0.1:$GRANARY_TEST_S3V4_PORT" "http://$VH/$P/d/a" >"$TMP/status"
refused 403 SignatureDoesNotMatch "virtual-hosted-style GET, wrong secret"
ok "virtual-hosted style: served when signed, refused with a wrong secret"

# ---- what must be refused ----
s3w() { req wrong-secret "$REGION" "$@" >"$TMP/status"; }
s3w -H "x-amz-content-sha256: $EMPTY" "$URL/d/a"
refused 403 SignatureDoesNotMatch "GET, wrong secret"
s3w -I -H "x-amz-content-sha256: $EMPTY" "$URL/d/a"
check_eq "$(cat "$TMP/status")" 403 "HEAD, wrong secret"
s3w -H "x-amz-content-sha256: $EMPTY" "$BUCKET?list-type=2&prefix=$P%2Fd%2F"
refused 403 SignatureDoesNotMatch "list, wrong secret"
s3w -T "$TMP/c" -H "x-amz-content-sha256: $(sha "$TMP/c")" "$URL/d/w"
refused 403 SignatureDoesNotMatch "PUT, wrong secret"
s3w -X DELETE -H "x-amz-content-sha256: $EMPTY" "$URL/d/a"
refused 403 SignatureDoesNotMatch "DELETE, wrong secret"
check_eq "$(s3 -H "x-amz-content-sha256: $EMPTY" "$URL/d/a")" 200 "GET after the refused DELETE"
check_eq "$(s3 -I -H "x-amz-content-sha256: $EMPTY" "$URL/d/w")" 404 "HEAD of the refused PUT"
ok "wrong secret: GET, HEAD, list, PUT, DELETE refused (403 SignatureDoesNotMatch), nothing changed"

req "$SK" eu-west-1 -H "x-amz-content-sha256: $EMPTY" "$URL/d/a" >"$TMP/status"
refused 400 AuthorizationHeaderMalformed "wrong region"
curl -sS -o "$TMP/body" -w '%{http_code}' "$URL/d/a" >"$TMP/status"
refused 403 AccessDenied "unsigned GET"
# a correct V2 signature (HMAC-SHA1 of the V2 string to sign) proves nothing
date=$(LC_ALL=C date -u '+%a, %d %b %Y %H:%M:%S GMT')
sig=$(printf 'GET\n\n\n%s\n/granary-test/%s/d/a' "$date" "$P" | openssl dgst -sha1 -hmac "$SK" -binary | base64)
curl -sS -o "$TMP/body" -w '%{http_code}' -H "Date: $date" -H "Authorization: AWS $AK:$sig" \
	"$URL/d/a" >"$TMP/status"
refused 400 InvalidRequest "V2-signed GET"
ok "refused: a wrong region, an unsigned request, a V2-signed request"

s3 -T "$TMP/b" -H "x-amz-content-sha256: $(sha "$TMP/a")" "$URL/d/t" >"$TMP/status"
refused 400 XAmzContentSHA256Mismatch "PUT, body not matching its hash"
check_eq "$(s3 -I -H "x-amz-content-sha256: $EMPTY" "$URL/d/t")" 404 "HEAD of the refused PUT"
s3 -T "$TMP/b" "$URL/d/t" >"$TMP/status"
refused 400 InvalidRequest "PUT without x-amz-content-sha256"
ok "refused: a body whose SHA-256 is not its x-amz-content-sha256 (not stored), no x-amz-content-sha256"

# ---- the plain s3rver the tests run (tests/lib/s3rver.js): a PUT whose
# client goes away in the middle of its body stores nothing, as on S3 (a
# test that SIGKILLs a client mid-upload must not find a short object) ----
need_s3
P2=t0201-cut-$$
DIR=$GRANARY_TEST_S3_DATA/granary-test/$P2
exec 3<>"/dev/tcp/127.0.0.1/$GRANARY_TEST_S3_PORT"
printf 'PUT /granary-test/%s/cut HTTP/1.1\r\nHost: 127.0.0.1:%s\r\nContent-Length: 100000\r\n\r\n' \
	"$P2" "$GRANARY_TEST_S3_PORT" >&3
head -c 50000 /dev/urandom >&3
# the half that came is on the server's disk (under whatever name) ...
cut_written() { find "$DIR" -name 'cut.*' -size 50000c 2>/dev/null | grep -q .; }
wait_until 10 cut_written || fail "the first half of the cut PUT never reached s3rver's disk"
exec 3>&-
# ... and once the server has seen the connection end, nothing of it
# remains: no object, no temporary file
cut_gone() { ! find "$DIR" -name 'cut._S3rver_object.tmp*' 2>/dev/null | grep -q .; }
wait_until 10 cut_gone || fail "a temporary file of the cut PUT is left: $(ls "$DIR")"
check_eq "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$GRANARY_TEST_S3_PORT/granary-test/$P2/cut")" \
	404 "GET of a PUT cut in the middle of its body"
check_eq "$(find "$DIR" -type f 2>/dev/null | wc -l)" 0 "files left of the cut PUT"
ok "s3rver: a PUT cut in the middle of its body stores nothing (GET 404, no file)"
