/*
 * s3sign.c - AWS Signature Version 4 and Version 2 for S3 requests, as pure
 * functions of the request's parts (s3sign.h). Every step builds text in a
 * growing buffer with a sticky error, so that each function checks once at
 * its end; the published answers the tests hold us to are text too (the
 * canonical request, the string to sign), which is why both are kept.
 */
#include "fs/store/s3sign.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define V4_ALGO	 "AWS4-HMAC-SHA256"
#define V4_TERM	 "aws4_request"
#define SHA256_N 32
#define SHA1_N	 20

/* ---- a growing string ------------------------------------------------ */

/* NUL-terminated once anything was added; err is sticky (ENOMEM) */
struct sbuf {
	char *p;
	size_t len, cap;
	int err;
};

static int sb_reserve(struct sbuf *b, size_t n)
{
	size_t want = b->len + n + 1;
	char *p;

	if (b->err)
		return b->err;
	if (want <= b->cap)
		return 0;
	if (want < 2 * b->cap)
		want = 2 * b->cap;
	if (want < 64)
		want = 64;
	p = realloc(b->p, want);
	if (!p)
		return b->err = ENOMEM;
	b->p = p;
	b->cap = want;
	return 0;
}

static void sb_add(struct sbuf *b, const char *s, size_t n)
{
	if (sb_reserve(b, n))
		return;
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void sb_puts(struct sbuf *b, const char *s)
{
	sb_add(b, s, strlen(s));
}

static void sb_putc(struct sbuf *b, char c)
{
	sb_add(b, &c, 1);
}

/* s3sign_uri_encode of n bytes of s, appended */
static void sb_encode(struct sbuf *b, const char *s, size_t n, int keep_slash)
{
	size_t len;

	if (sb_reserve(b, 3 * n))
		return;
	len =
	    s3sign_uri_encode(s, n, keep_slash, b->p + b->len, b->cap - b->len);
	b->len += len;
}

/* the text, handed over (NULL on error); the buffer is left empty */
static char *sb_take(struct sbuf *b)
{
	char *p = b->p;

	if (!b->err && !p)
		p = strdup("");
	else if (b->err) {
		free(p);
		p = NULL;
	}
	memset(b, 0, sizeof *b);
	return p;
}

static void sb_release(struct sbuf *b)
{
	free(b->p);
	memset(b, 0, sizeof *b);
}

/* ---- hashing --------------------------------------------------------- */

static void hex(const unsigned char *md, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	size_t i;

	for (i = 0; i < n; i++) {
		out[2 * i] = digits[md[i] >> 4];
		out[2 * i + 1] = digits[md[i] & 15];
	}
	out[2 * n] = '\0';
}

static int sha256_hex(const void *p, size_t n, char out[65])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;

	/* OpenSSL fails here only when it cannot allocate */
	if (!EVP_Digest(p, n, md, &mdlen, EVP_sha256(), NULL) ||
	    mdlen != SHA256_N) {
		out[0] = '\0';
		return ENOMEM;
	}
	hex(md, SHA256_N, out);
	return 0;
}

void s3sign_sha256_hex(const void *p, size_t n, char out[65])
{
	(void)sha256_hex(p, n, out);
}

static int hmac(const EVP_MD *md, const void *key, size_t klen, const char *msg,
		size_t n, unsigned char *out, size_t outlen)
{
	unsigned int len = 0;

	if (!HMAC(md, key, (int)klen, (const unsigned char *)msg, n, out,
		  &len) ||
	    len != outlen)
		return ENOMEM;
	return 0;
}

/* ---- percent-encoding ------------------------------------------------ */

static int unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	       (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' ||
	       c == '~';
}

size_t s3sign_uri_encode(const char *s, size_t n, int keep_slash, char *out,
			 size_t cap)
{
	static const char digits[] = "0123456789ABCDEF";
	size_t i, len = 0;

	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		int keep = unreserved(c) || (keep_slash && c == '/');
		size_t w = keep ? 1 : 3;

		/* whole characters only: a cut never leaves half an escape */
		if (len + w < cap) {
			if (keep) {
				out[len] = (char)c;
			} else {
				out[len] = '%';
				out[len + 1] = digits[c >> 4];
				out[len + 2] = digits[c & 15];
			}
		} else if (len < cap) {
			out[len] = '\0';
			cap = len; /* nothing more is written */
		}
		len += w;
	}
	if (len < cap)
		out[len] = '\0';
	return len;
}

/* n bytes of s with each %XX made its byte; a '%' not followed by two hex
 * digits stays itself (and is encoded again, as %25) */
static void sb_decode(struct sbuf *b, const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		int hi, lo;

		if (s[i] == '%' && i + 2 < n &&
		    (hi = OPENSSL_hexchar2int((unsigned char)s[i + 1])) >= 0 &&
		    (lo = OPENSSL_hexchar2int((unsigned char)s[i + 2])) >= 0) {
			sb_putc(b, (char)(hi << 4 | lo));
			i += 2;
		} else {
			sb_putc(b, s[i]);
		}
	}
}

/* ---- the parts of a request ------------------------------------------ */

/* one query parameter or header, in the form it is signed in */
struct item {
	char *name, *value;
	size_t seq; /* its place in the request: ties keep their order */
};

static void items_free(struct item *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		free(v[i].name);
		free(v[i].value);
	}
	free(v);
}

static int item_cmp_name(const void *a, const void *b)
{
	const struct item *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	if (c)
		return c;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int item_cmp_name_value(const void *a, const void *b)
{
	const struct item *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	return c ? c : strcmp(x->value, y->value);
}

static int valid_name(const char *s)
{
	if (!s || !*s)
		return 0;
	return !strpbrk(s, ":\r\n");
}

static int has_line_break(const char *s)
{
	return s && strpbrk(s, "\r\n");
}

/* n bytes of a query's name or value, decoded, and encoded again when
 * encode; NULL when out of memory */
static char *query_part(const char *s, size_t n, int encode)
{
	struct sbuf raw = {0}, enc = {0};

	sb_decode(&raw, s, n);
	if (!encode || raw.err)
		return sb_take(&raw);
	sb_encode(&enc, raw.p ? raw.p : "", raw.len, 0);
	sb_release(&raw);
	return sb_take(&enc);
}

/*
 * The query's parameters, name and value each decoded and, when encode,
 * encoded again as V4 wants them (V2 signs the decoded values). A name
 * without '=' gets an empty value; empty pieces ("a&&b") are no parameter.
 */
static int parse_query(const char *q, int encode, struct item **out,
		       size_t *nout)
{
	struct item *v = NULL;
	size_t n = 0, cap = 0;
	const char *p = q ? q : "";

	for (; *p; p += *p == '&') {
		size_t len = strcspn(p, "&");
		const char *eq = memchr(p, '=', len);
		size_t nlen = eq ? (size_t)(eq - p) : len;

		if (len == 0)
			continue;
		if (n == cap) {
			struct item *nv;

			cap = cap ? 2 * cap : 8;
			nv = realloc(v, cap * sizeof *v);
			if (!nv)
				goto fail_nomem;
			v = nv;
		}
		v[n].name = query_part(p, nlen, encode);
		v[n].value = eq ? query_part(eq + 1, len - nlen - 1, encode)
				: strdup("");
		v[n].seq = n;
		n++;
		if (!v[n - 1].name || !v[n - 1].value)
			goto fail_nomem;
		p += len;
	}
	*out = v;
	*nout = n;
	return 0;

fail_nomem:
	items_free(v, n);
	return ENOMEM;
}

static int is_space(char c)
{
	return c == ' ' || c == '\t';
}

/* s without the blanks around it; fold: inner runs of blanks as one space */
static void sb_trimmed(struct sbuf *b, const char *s, int fold)
{
	const char *end;

	while (is_space(*s))
		s++;
	end = s + strlen(s);
	while (end > s && is_space(end[-1]))
		end--;
	while (s < end) {
		if (fold && is_space(*s)) {
			while (is_space(*s))
				s++;
			sb_putc(b, ' ');
			continue;
		}
		sb_putc(b, *s++);
	}
	if (!b->p)
		sb_add(b, "", 0);
}

/*
 * The headers that keep (names lower-cased; all of them when prefix is
 * NULL, else those whose name starts with it), values trimmed (and folded
 * when fold), sorted by name, same names in their order. EINVAL for a name
 * with ':' or a line break, or a value with a line break.
 */
static int collect_headers(const struct s3sign_req *r, const char *prefix,
			   int fold, struct item **out, size_t *nout)
{
	struct item *v;
	size_t i, j, n = 0;

	*out = NULL;
	*nout = 0;
	if (r->nheaders && !r->headers)
		return EINVAL;
	for (i = 0; i < r->nheaders; i++)
		if (!valid_name(r->headers[i].name) ||
		    has_line_break(r->headers[i].value))
			return EINVAL;
	v = calloc(r->nheaders ? r->nheaders : 1, sizeof *v);
	if (!v)
		return ENOMEM;
	for (i = 0; i < r->nheaders; i++) {
		const struct s3sign_header *h = &r->headers[i];
		struct sbuf value = {0};

		if (prefix && strncasecmp(h->name, prefix, strlen(prefix)))
			continue;
		v[n].name = strdup(h->name);
		sb_trimmed(&value, h->value ? h->value : "", fold);
		v[n].value = sb_take(&value);
		v[n].seq = n;
		n++;
		if (!v[n - 1].name || !v[n - 1].value) {
			items_free(v, n);
			return ENOMEM;
		}
		for (j = 0; v[n - 1].name[j]; j++)
			if (v[n - 1].name[j] >= 'A' && v[n - 1].name[j] <= 'Z')
				v[n - 1].name[j] += 'a' - 'A';
	}
	qsort(v, n, sizeof *v, item_cmp_name);
	*out = v;
	*nout = n;
	return 0;
}

/* "name:v1,v2\n" a name, in v's order (sorted by name) */
static void sb_header_lines(struct sbuf *b, const struct item *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (i && !strcmp(v[i].name, v[i - 1].name)) {
			sb_putc(b, ',');
		} else {
			if (i)
				sb_putc(b, '\n');
			sb_puts(b, v[i].name);
			sb_putc(b, ':');
		}
		sb_puts(b, v[i].value);
	}
	if (n)
		sb_putc(b, '\n');
}

/* ---- Signature Version 4 --------------------------------------------- */

/*
 * The canonical URI of the services other than S3: "." and ".." segments
 * and empty ones (repeated slashes) removed, each segment encoded again.
 * The path keeps a trailing slash when it had one.
 */
static void sb_v4_normalized_path(struct sbuf *b, const char *path)
{
	const char **seg;
	size_t *segn, n = 0, i, max = 1;
	const char *p, *last;
	int trailing;

	for (p = path; *p; p++)
		max += *p == '/';
	seg = malloc(max * sizeof *seg);
	segn = malloc(max * sizeof *segn);
	if (!seg || !segn) {
		b->err = ENOMEM;
		goto out;
	}
	for (p = path; *p;) {
		size_t len = strcspn(p, "/");

		/* "" (a repeated slash) and "." name the folder they are in */
		if (len == 2 && p[0] == '.' && p[1] == '.') {
			if (n)
				n--;
		} else if (len && !(len == 1 && p[0] == '.')) {
			seg[n] = p;
			segn[n++] = len;
		}
		p += len;
		if (*p == '/')
			p++;
	}
	last = strrchr(path, '/');
	last = last ? last + 1 : path;
	trailing = !*last || !strcmp(last, ".") || !strcmp(last, "..");
	sb_putc(b, '/');
	for (i = 0; i < n; i++) {
		if (i)
			sb_putc(b, '/');
		sb_encode(b, seg[i], segn[i], 0);
	}
	if (n && trailing)
		sb_putc(b, '/');
out:
	free(seg);
	free(segn);
}

static int v4_canonical(const struct s3sign_v4 *k, const struct s3sign_req *r,
			struct sbuf *creq, struct sbuf *signed_names)
{
	struct item *q = NULL, *h = NULL;
	size_t nq = 0, nh = 0, i;
	const char *path = r->path && *r->path ? r->path : "/";
	int err;

	sb_puts(creq, r->method);
	sb_putc(creq, '\n');
	if (k->s3)
		sb_puts(creq, path);
	else
		sb_v4_normalized_path(creq, path);
	sb_putc(creq, '\n');

	err = parse_query(r->query, 1, &q, &nq);
	if (err)
		return err;
	if (nq) /* qsort wants an array, even of none */
		qsort(q, nq, sizeof *q, item_cmp_name_value);
	for (i = 0; i < nq; i++) {
		if (i)
			sb_putc(creq, '&');
		sb_puts(creq, q[i].name);
		sb_putc(creq, '=');
		sb_puts(creq, q[i].value);
	}
	sb_putc(creq, '\n');
	items_free(q, nq);

	err = collect_headers(r, NULL, 1, &h, &nh);
	if (err)
		return err;
	sb_header_lines(creq, h, nh);
	sb_putc(creq, '\n');
	for (i = 0; i < nh; i++) {
		if (i && !strcmp(h[i].name, h[i - 1].name))
			continue;
		if (i)
			sb_putc(signed_names, ';');
		sb_puts(signed_names, h[i].name);
	}
	items_free(h, nh);
	if (!signed_names->p)
		sb_add(signed_names, "", 0);
	sb_add(creq, signed_names->p ? signed_names->p : "", signed_names->len);
	sb_putc(creq, '\n');
	sb_puts(creq, r->payload_hash);
	return creq->err ? creq->err : signed_names->err;
}

/* the signing key: HMAC chain over the scope from "AWS4" + secret */
static int v4_signing_key(const struct s3sign_v4 *k,
			  unsigned char key[SHA256_N])
{
	const char *parts[] = {NULL, k->region, k->service, V4_TERM};
	struct sbuf seed = {0};
	size_t i;
	int err = 0;

	sb_puts(&seed, "AWS4");
	sb_puts(&seed, k->secret_key);
	if (seed.err)
		return seed.err;
	err = hmac(EVP_sha256(), seed.p, seed.len, k->date, 8, key, SHA256_N);
	for (i = 1; !err && i < sizeof parts / sizeof *parts; i++)
		err = hmac(EVP_sha256(), key, SHA256_N, parts[i],
			   strlen(parts[i]), key, SHA256_N);
	OPENSSL_cleanse(seed.p, seed.len);
	sb_release(&seed);
	return err;
}

static int v4_args_ok(const struct s3sign_v4 *k, const struct s3sign_req *r)
{
	size_t i;

	if (!k || !r || !k->access_key || !k->secret_key || !k->region ||
	    !*k->region || !k->service || !*k->service || !k->date ||
	    !r->payload_hash || !*r->payload_hash)
		return 0;
	if (!r->method || !*r->method || strpbrk(r->method, " \t\r\n"))
		return 0;
	for (i = 0; i < 8; i++)
		if (k->date[i] < '0' || k->date[i] > '9')
			return 0;
	return 1;
}

int s3sign_v4(const struct s3sign_v4 *k, const struct s3sign_req *r, char *out,
	      size_t cap, char **creq, char **sts)
{
	struct sbuf c = {0}, names = {0}, s = {0};
	char chash[65], sig[65];
	unsigned char key[SHA256_N], mac[SHA256_N];
	int err, len;

	if (creq)
		*creq = NULL;
	if (sts)
		*sts = NULL;
	if (!v4_args_ok(k, r))
		return EINVAL;
	err = v4_canonical(k, r, &c, &names);
	if (err)
		goto out;
	err = sha256_hex(c.p, c.len, chash);
	if (err)
		goto out;

	sb_puts(&s, V4_ALGO "\n");
	sb_puts(&s, k->date);
	sb_putc(&s, '\n');
	sb_add(&s, k->date, 8);
	sb_putc(&s, '/');
	sb_puts(&s, k->region);
	sb_putc(&s, '/');
	sb_puts(&s, k->service);
	sb_puts(&s, "/" V4_TERM "\n");
	sb_puts(&s, chash);
	if ((err = s.err))
		goto out;

	err = v4_signing_key(k, key);
	if (!err)
		err = hmac(EVP_sha256(), key, SHA256_N, s.p, s.len, mac,
			   SHA256_N);
	OPENSSL_cleanse(key, sizeof key);
	if (err)
		goto out;
	hex(mac, SHA256_N, sig);

	len = snprintf(out, cap,
		       V4_ALGO " Credential=%s/%.8s/%s/%s/" V4_TERM
			       ", SignedHeaders=%s, Signature=%s",
		       k->access_key, k->date, k->region, k->service, names.p,
		       sig);
	if (len < 0 || (size_t)len >= cap) {
		err = ENOSPC;
		goto out;
	}
	if (creq && !(*creq = sb_take(&c)))
		err = ENOMEM;
	if (!err && sts && !(*sts = sb_take(&s)))
		err = ENOMEM;
	if (err && creq) {
		free(*creq);
		*creq = NULL;
	}
out:
	sb_release(&c);
	sb_release(&names);
	sb_release(&s);
	return err;
}

/* ---- Signature Version 2 --------------------------------------------- */

/*
 * The query parameters V2 signs as part of the resource: the
 * subresources of S3's documentation, and the response-* overrides.
 * Sorted (strcmp), for bsearch.
 */
static const char *const v2_subresources[] = {
    "accelerate",
    "acl",
    "cors",
    "delete",
    "encryption",
    "legal-hold",
    "lifecycle",
    "location",
    "logging",
    "notification",
    "object-lock",
    "partNumber",
    "policy",
    "replication",
    "requestPayment",
    "response-cache-control",
    "response-content-disposition",
    "response-content-encoding",
    "response-content-language",
    "response-content-type",
    "response-expires",
    "restore",
    "retention",
    "tagging",
    "torrent",
    "uploadId",
    "uploads",
    "versionId",
    "versioning",
    "versions",
    "website",
};

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int v2_signed_param(const char *name)
{
	return bsearch(&name, v2_subresources,
		       sizeof v2_subresources / sizeof *v2_subresources,
		       sizeof *v2_subresources, cmp_str) != NULL;
}

/* the first header named name (any case), trimmed, or "" */
static void sb_v2_positional(struct sbuf *b, const struct s3sign_req *r,
			     const char *name)
{
	size_t i;

	for (i = 0; i < r->nheaders; i++)
		if (!strcasecmp(r->headers[i].name, name)) {
			sb_trimmed(
			    b, r->headers[i].value ? r->headers[i].value : "",
			    0);
			break;
		}
	sb_putc(b, '\n');
}

static int v2_string_to_sign(const struct s3sign_req *r, struct sbuf *s)
{
	struct item *h = NULL, *q = NULL;
	size_t nh = 0, nq = 0, i, k;
	int err;

	sb_puts(s, r->method);
	sb_putc(s, '\n');
	sb_v2_positional(s, r, "content-md5");
	sb_v2_positional(s, r, "content-type");

	err = collect_headers(r, "x-amz-", 0, &h, &nh);
	if (err)
		return err;
	/* x-amz-date signs as an x-amz-* header, and the Date line is
	 * empty: S3 ignores the Date header then */
	for (i = 0; i < nh; i++)
		if (!strcmp(h[i].name, "x-amz-date"))
			break;
	if (i == nh)
		sb_v2_positional(s, r, "date");
	else
		sb_putc(s, '\n');
	sb_header_lines(s, h, nh);
	items_free(h, nh);

	sb_puts(s, r->path && *r->path ? r->path : "/");
	err = parse_query(r->query, 0, &q, &nq);
	if (err)
		return err;
	if (nq) /* qsort wants an array, even of none */
		qsort(q, nq, sizeof *q, item_cmp_name);
	for (i = 0, k = 0; i < nq; i++) {
		if (!v2_signed_param(q[i].name))
			continue;
		sb_putc(s, k++ ? '&' : '?');
		sb_puts(s, q[i].name);
		if (*q[i].value) {
			sb_putc(s, '=');
			sb_puts(s, q[i].value);
		}
	}
	items_free(q, nq);
	return s->err;
}

int s3sign_v2(const char *access_key, const char *secret_key,
	      const struct s3sign_req *r, char *out, size_t cap, char **sts)
{
	struct sbuf s = {0};
	unsigned char mac[SHA1_N];
	char b64[4 * ((SHA1_N + 2) / 3) + 1];
	int err, len;

	if (sts)
		*sts = NULL;
	if (!access_key || !secret_key || !r || !r->method || !*r->method ||
	    strpbrk(r->method, " \t\r\n"))
		return EINVAL;
	err = v2_string_to_sign(r, &s);
	if (!err)
		err = hmac(EVP_sha1(), secret_key, strlen(secret_key), s.p,
			   s.len, mac, SHA1_N);
	if (err)
		goto out;
	EVP_EncodeBlock((unsigned char *)b64, mac, SHA1_N);
	len = snprintf(out, cap, "AWS %s:%s", access_key, b64);
	if (len < 0 || (size_t)len >= cap) {
		err = ENOSPC;
		goto out;
	}
	if (sts && !(*sts = sb_take(&s)))
		err = ENOMEM;
out:
	sb_release(&s);
	return err;
}
