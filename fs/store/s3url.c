/*
 * s3url.c - the checks of an s3:// URL's parts (s3url.h), apart from the
 * backend that opens the store with them (objstore_s3.c).
 */
#include "fs/store/s3url.h"

#include <string.h>
#include <strings.h>

static int host_char(char c)
{
	/* '_' is not DNS, but compose/k8s service names use it */
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_';
}

/* HOST[:PORT], HOST a DNS name, IPv4 address or [IPv6]; the length of
 * HOST in *host_len. */
int s3url_authority_valid(const char *a, size_t len, size_t *host_len)
{
	size_t i = 0, host_end;

	if (len == 0 || len > S3URL_MAX_HOST)
		return 0;
	if (a[0] == '[') {
		const char *rb = memchr(a, ']', len);
		if (!rb || rb == a + 1)
			return 0;
		for (const char *c = a + 1; c < rb; c++)
			if (!((*c >= '0' && *c <= '9') ||
			      (*c >= 'a' && *c <= 'f') ||
			      (*c >= 'A' && *c <= 'F') || *c == ':' ||
			      *c == '.'))
				return 0;
		host_end = (size_t)(rb - a) + 1;
	} else {
		while (i < len && host_char(a[i]))
			i++;
		host_end = i;
		if (host_end == 0)
			return 0;
	}
	*host_len = host_end;
	if (host_end == len)
		return 1;
	if (a[host_end] != ':' || host_end + 1 == len || len - host_end > 6)
		return 0; /* anything else in a host ('@', '_', ...) */
	long port = 0;
	for (i = host_end + 1; i < len; i++) {
		if (a[i] < '0' || a[i] > '9')
			return 0;
		port = port * 10 + (a[i] - '0');
	}
	return port >= 1 && port <= 65535;
}

/* Path-style buckets: 1 to 255 of [A-Za-z0-9._-]; virtual-hosted ones are
 * a DNS label chain: 3 to 63 of [a-z0-9.-], a letter or digit at each end. */
int s3url_bucket_valid(const char *b, int virtual_host)
{
	size_t n = strlen(b);

	if (n < 1 || n > 255)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = b[i];
		int lower = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
			    c == '.' || c == '-';
		if (!lower &&
		    (virtual_host || !((c >= 'A' && c <= 'Z') || c == '_')))
			return 0;
	}
	if (virtual_host &&
	    (n < 3 || n > 63 || b[0] == '.' || b[0] == '-' || b[n - 1] == '.' ||
	     b[n - 1] == '-' || strstr(b, "..")))
		return 0;
	return 1;
}

int s3url_region_valid(const char *r, size_t n)
{
	if (n == 0 || n >= 64)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((r[i] >= 'a' && r[i] <= 'z') ||
		      (r[i] >= '0' && r[i] <= '9') || r[i] == '-'))
			return 0;
	return 1;
}

/* The region in an AWS host name (s3.R.amazonaws.com, s3-R.amazonaws.com,
 * s3.dualstack.R.amazonaws.com) into out (64 bytes), or 0. */
int s3url_region_of_host(const char *host, size_t hlen, char *out)
{
	static const char tail[] = ".amazonaws.com";
	const size_t tl = sizeof(tail) - 1;
	const char *r;
	size_t n;

	if (hlen <= tl || strncasecmp(host + hlen - tl, tail, tl))
		return 0;
	n = hlen - tl; /* host[0..n): "s3.R", "s3-R", "s3.dualstack.R" */
	if (n > 13 && !strncmp(host, "s3.dualstack.", 13))
		r = host + 13;
	else if (n > 3 &&
		 (!strncmp(host, "s3.", 3) || !strncmp(host, "s3-", 3)))
		r = host + 3;
	else
		return 0;
	n -= (size_t)(r - host);
	if (n == 10 && !strncmp(r, "external-1", 10)) {
		strcpy(out, "us-east-1"); /* s3-external-1: the old name */
		return 1;
	}
	if (!s3url_region_valid(r, n) || memchr(r, '.', n))
		return 0;
	memcpy(out, r, n);
	out[n] = '\0';
	return 1;
}
