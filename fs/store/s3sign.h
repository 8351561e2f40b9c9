/*
 * s3sign.h - signing of S3 requests: AWS Signature Version 4 and the older
 * Version 2, as pure functions of a request described by its parts (no
 * I/O, no clock, no global state), so that the S3 backend can use either
 * and the tests can hold them to published answers. HMAC-SHA256, SHA-256
 * and HMAC-SHA1 are OpenSSL's.
 *
 * Thread-safe. Returns 0 or a positive errno: EINVAL for a request that
 * cannot be signed (no method, a header name with a ':' or a line break,
 * a header value with a line break, V4 without payload_hash), ENOSPC when
 * out's cap is too small, ENOMEM.
 */
#ifndef GRANARY_S3SIGN_H
#define GRANARY_S3SIGN_H

#include <stddef.h>

#define S3SIGN_UNSIGNED "UNSIGNED-PAYLOAD"
#define S3SIGN_EMPTY_SHA256 \
	"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

struct s3sign_header {
	const char *name, *value; /* as sent; names compared without case */
};

/* A request as it goes on the wire. */
struct s3sign_req {
	const char *method; /* "GET", "PUT", ... */
	/* the path as sent, already percent-encoded ("/bucket/a%20b") */
	const char *path;
	/* the query string as sent, without '?' ("" or NULL: none) */
	const char *query;
	/* the headers to sign (V4: every one given is signed, so include
	 * host, x-amz-date and x-amz-content-sha256; V2: content-md5,
	 * content-type, date and the x-amz-* ones count) */
	const struct s3sign_header *headers;
	size_t nheaders;
	/* V4: hex SHA-256 of the body, or S3SIGN_UNSIGNED */
	const char *payload_hash;
};

struct s3sign_v4 {
	const char *access_key, *secret_key;
	const char *region;  /* "us-east-1" */
	const char *service; /* "s3" */
	const char *date;    /* ISO 8601 basic, UTC: "20150830T123600Z" */
	/* 1: S3's rules, the path signed as sent; 0: the other services'
	 * rules (the path normalized: "." and ".." segments and repeated
	 * slashes removed, then each segment encoded again), which the
	 * published test suite uses */
	int s3;
};

/*
 * The value of the Authorization header for r, signed with V4:
 * "AWS4-HMAC-SHA256 Credential=AK/DATE/REGION/SERVICE/aws4_request,
 * SignedHeaders=..., Signature=<64 hex>", NUL-terminated in out. creq and
 * sts (each may be NULL) receive the canonical request and the string to
 * sign, malloc'd: what a server's "signature does not match" reply shows,
 * and what the tests compare.
 */
int s3sign_v4(const struct s3sign_v4 *k, const struct s3sign_req *r,
	      char *out, size_t cap, char **creq, char **sts);

/*
 * The value of the Authorization header for r, signed with V2
 * ("AWS AK:<base64 HMAC-SHA1>"). The resource is r's path, path-style
 * ("/bucket/key": a virtual-hosted request passes "/bucket" + its path),
 * with the subresources of its query that V2 signs (acl, uploads,
 * uploadId, partNumber, versionId, response-* ... sorted, values
 * decoded); the date is r's Date header, or x-amz-date, which then signs
 * in its place: as an x-amz-* header, with the Date line empty (S3's
 * rule). sts as above.
 */
int s3sign_v2(const char *access_key, const char *secret_key,
	      const struct s3sign_req *r, char *out, size_t cap, char **sts);

/* Hex SHA-256 of n bytes at p into out (65 bytes with the NUL). */
void s3sign_sha256_hex(const void *p, size_t n, char out[65]);

/*
 * Percent-encode n bytes of s as S3 wants them in a path or a query
 * (RFC 3986 unreserved characters kept, '/' kept when keep_slash, every
 * other byte as %XX, upper case) into out, NUL-terminated. Returns the
 * length, or cap or more when it did not fit (then out is cut).
 */
size_t s3sign_uri_encode(const char *s, size_t n, int keep_slash, char *out,
			 size_t cap);

#endif
