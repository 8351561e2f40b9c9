/*
 * s3url.h - the parts of an s3:// URL, checked one at a time: the
 * authority (HOST[:PORT]), the bucket's name in either addressing style,
 * a region's name, and the region an AWS host name says. Pure functions
 * of their arguments, for objstore_s3.c's open; no I/O, thread-safe.
 */
#ifndef GRANARY_S3URL_H
#define GRANARY_S3URL_H

#include <stddef.h>

#define S3URL_MAX_HOST 255 /* an authority's bytes, at most */

/* 1 if a[0..len) is HOST[:PORT], HOST a DNS name (with '_', which
 * compose and k8s service names use), an IPv4 address or [IPv6], PORT
 * 1 to 65535; then *host_len is the length of HOST. Else 0. */
int s3url_authority_valid(const char *a, size_t len, size_t *host_len);

/* 1 if b names a bucket: path-style 1 to 255 of [A-Za-z0-9._-];
 * virtual-hosted (a DNS label chain) 3 to 63 of [a-z0-9.-], a letter or
 * digit at each end, no "..". Else 0. */
int s3url_bucket_valid(const char *b, int virtual_host);

/* 1 if r[0..n) names a region: 1 to 63 of [a-z0-9-]. Else 0. */
int s3url_region_valid(const char *r, size_t n);

/* The region in an AWS host name host[0..hlen) (s3.R.amazonaws.com,
 * s3-R.amazonaws.com, s3.dualstack.R.amazonaws.com; s3-external-1 is
 * us-east-1) into out (64 bytes): 1, or 0 when it names none. */
int s3url_region_of_host(const char *host, size_t hlen, char *out);

#endif
