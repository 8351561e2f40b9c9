/*
 * sign_cost.c - what a signature costs per request, without the noise of
 * a whole workload (bench/s3sig.sh runs the workloads): a ranged GET
 * signed with V4 and with V2 as the S3 backend builds it, and the SHA-256
 * of a body, which V4 adds to a PUT over plain HTTP (and to bodies of up
 * to 1 MiB over TLS). Prints microseconds per request and per MiB;
 * multiply by a workload's requests (its store GETs and PUTs, `granary
 * stats`) to compare with its seconds.
 *
 *   sign_cost [REQUESTS]   (default 200000)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/store/s3sign.h"
#include "lib/fsutil.h"

#define BODY (4u << 20)

static const struct s3sign_header hdr[] = {
    {"Host", "127.0.0.1:9000"},
    {"Range", "bytes=4194304-8388607"},
    {"x-amz-content-sha256", S3SIGN_EMPTY_SHA256},
    {"x-amz-date", "20261202T010203Z"},
};

static const struct s3sign_req get = {
    .method = "GET",
    .path = "/granary-test/vol/blocks/0/12/123456_3_4194304",
    .query = "",
    .headers = hdr,
    .nheaders = sizeof(hdr) / sizeof(hdr[0]),
    .payload_hash = S3SIGN_EMPTY_SHA256,
};

static const struct s3sign_v4 key = {
    .access_key = "AKIDEXAMPLE",
    .secret_key = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
    .region = "us-east-1",
    .service = "s3",
    .date = "20261202T010203Z",
    .s3 = 1,
};

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 200000;
	char auth[512], hex[65];
	int64_t t0;

	if (n < 1) {
		fprintf(stderr, "usage: sign_cost [REQUESTS]\n");
		return 2;
	}
	t0 = fsutil_mono_ns();
	for (long i = 0; i < n; i++)
		if (s3sign_v4(&key, &get, auth, sizeof(auth), NULL, NULL))
			return 1;
	double v4 = (double)(fsutil_mono_ns() - t0) / (double)n / 1000;

	t0 = fsutil_mono_ns();
	for (long i = 0; i < n; i++)
		if (s3sign_v2(key.access_key, key.secret_key, &get, auth,
			      sizeof(auth), NULL))
			return 1;
	double v2 = (double)(fsutil_mono_ns() - t0) / (double)n / 1000;

	unsigned char *body = malloc(BODY);
	if (!body)
		return 1;
	memset(body, 0x5a, BODY);
	long bodies = n / 2000 + 4;
	t0 = fsutil_mono_ns();
	for (long i = 0; i < bodies; i++)
		s3sign_sha256_hex(body, BODY, hex);
	double mib = (double)(fsutil_mono_ns() - t0) / (double)bodies /
		     (BODY >> 20) / 1000;
	free(body);

	printf("| what | us |\n|---|---|\n");
	printf("| V4 signature of a ranged GET | %.2f |\n", v4);
	printf("| V2 signature of the same GET | %.2f |\n", v2);
	printf("| SHA-256 of a body, per MiB (V4 PUT over plain HTTP) | %.0f "
	       "|\n",
	       mib);
	return 0;
}
