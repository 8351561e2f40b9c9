/*
 * redis_url.c - metadata URLs: redis://, Sentinel and unix:// URLs parsed
 * into the addresses and options a connection needs (SCHEMA.md,
 * "Connections"), and where the password of one is, by the parser's own
 * rule (the user information runs to the last '@'), so that every
 * message, ps and the mount helper hide the same bytes.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "meta/meta.h"
#include "meta/redis_int.h"

#define FAILOVER_TIMEOUT_S 60 /* ?failover_timeout= default (sentinels) */
#define WAIT_TIMEOUT_S	   10 /* ?wait_timeout= default */
#define SENTINEL_PORT	   26379

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Percent-decode src[0..n) into dst; -1 if malformed or too long. */
static int pct_decode(const char *src, size_t n, char *dst, size_t cap)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		int c = (unsigned char)src[i];
		if (c == '%') {
			int hi, lo;
			if (i + 2 >= n)
				return -1;
			hi = hexval(src[i + 1]);
			lo = hexval(src[i + 2]);
			if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
				return -1;
			c = hi * 16 + lo;
			i += 2;
		}
		if (o + 1 >= cap)
			return -1;
		dst[o++] = (char)c;
	}
	dst[o] = '\0';
	return 0;
}

/* Digits only, non-empty, at most max. */
static int parse_num(const char *s, size_t n, long max, long *out)
{
	long v = 0;
	if (n == 0 || n > 9)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	if (v > max)
		return -1;
	*out = v;
	return 0;
}

/* A host name (or a master's name at the sentinels): letters, digits,
 * '.', '-', '_'. */
static int name_ok(const char *p, size_t n, size_t cap)
{
	if (n == 0 || n >= cap)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = p[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '.' || c == '-' ||
		      c == '_'))
			return 0;
	}
	return 1;
}

/* HOST[:PORT] or [IPV6][:PORT] at *pp, up to one of ",/?#" or the end;
 * *pp is moved past it. The port is left as it was when not given. */
static int parse_hostport(const char **pp, char *host, size_t cap, int *port)
{
	const char *p = *pp, *q;
	long v;

	if (*p == '[') {
		const char *end = strchr(p, ']');
		if (!end || end == p + 1 || (size_t)(end - p - 1) >= cap)
			return META_EURL;
		for (q = p + 1; q < end; q++)
			if (hexval(*q) < 0 && *q != ':' && *q != '.')
				return META_EURL;
		memcpy(host, p + 1, (size_t)(end - p - 1));
		host[end - p - 1] = '\0';
		q = end + 1;
	} else {
		size_t n = strcspn(p, ":,/?#");
		if (!name_ok(p, n, cap))
			return META_EURL;
		memcpy(host, p, n);
		host[n] = '\0';
		q = p + n;
	}
	if (*q == ':') {
		size_t n = strcspn(q + 1, ",/?#");
		if (parse_num(q + 1, n, 65535, &v) || v == 0)
			return META_EURL;
		*port = (int)v;
		q += 1 + n;
	}
	*pp = q;
	return 0;
}

/* The query of a URL: KEY=VALUE pairs joined by '&' (db only where
 * db_ok: unix:// URLs); every value a number. */
static int url_params(const char *p, struct addr *a, int db_ok)
{
	while (*p) {
		size_t len = strcspn(p, "&");
		const char *eq = memchr(p, '=', len);
		size_t klen = eq ? (size_t)(eq - p) : 0;
		long v;

		if (!eq || parse_num(eq + 1, len - klen - 1, 1000000, &v))
			return META_EURL;
#define KEY(k) (klen == sizeof(k) - 1 && memcmp(p, k, klen) == 0)
		if (KEY("db") && db_ok)
			a->db = (int)v;
		else if (KEY("wait") && v <= 64)
			a->wait = (int)v;
		else if (KEY("wait_timeout") && v > 0 && v <= 3600)
			a->wait_timeout = (int)v;
		else if (KEY("failover_timeout") && v <= 86400) {
			a->failover_timeout = (int)v;
			a->failover_named = 1;
		} else
			return META_EURL;
#undef KEY
		p += len;
		if (*p == '&' && *++p == '\0')
			return META_EURL;
	}
	return 0;
}

/*
 * redis://[[USER]:PASSWORD@]HOST[:PORT][/DB][?PARAMS], or with Redis
 * Sentinel the form other Redis clients know:
 * redis://[[USER]:PASSWORD@]MASTER,SENTINEL[:PORT][,SENTINEL[:PORT]...]
 * [/DB][?PARAMS]: what comes before the first comma is the master's name,
 * the rest the sentinels (port 26379 unless given). The password is the
 * master's; the sentinels' comes from the environment.
 */
static int url_parse_redis(const char *p, struct addr *a)
{
	const char *at = strrchr(p, '@');
	long v;

	if (at) {
		const char *colon = memchr(p, ':', (size_t)(at - p));
		if (!colon) /* a bare "secret@" is too easily a typo */
			return META_EURL;
		if (pct_decode(p, (size_t)(colon - p), a->user,
			       sizeof a->user) ||
		    pct_decode(colon + 1, (size_t)(at - colon - 1), a->pass,
			       sizeof a->pass))
			return META_EURL;
		p = at + 1;
	}
	if (p[strcspn(p, ",/?#")] == ',') {
		size_t n = strcspn(p, ",");
		if (!name_ok(p, n, sizeof a->master))
			return META_EURL;
		memcpy(a->master, p, n);
		p += n;
		while (*p == ',') {
			struct hostport *s = &a->sentinel[a->nsentinel];
			p++;
			if (a->nsentinel++ == SENTINELS_MAX)
				return META_EURL;
			s->port = SENTINEL_PORT;
			if (parse_hostport(&p, s->host, sizeof s->host,
					   &s->port))
				return META_EURL;
		}
	} else if (parse_hostport(&p, a->host, sizeof a->host, &a->port)) {
		return META_EURL;
	}
	if (*p == '/') {
		size_t n = strcspn(++p, "?#");
		if (n) {
			if (parse_num(p, n, 1000000, &v))
				return META_EURL;
			a->db = (int)v;
			p += n;
		}
	}
	if (*p == '?')
		return url_params(p + 1, a, 0);
	return *p ? META_EURL : 0;
}

static int url_parse_unix(const char *p, struct addr *a)
{
	size_t n = strcspn(p, "?#");

	if (n == 0 || p[0] != '/' || n >= sizeof a->path)
		return META_EURL;
	memcpy(a->path, p, n);
	p += n;
	if (*p == '#')
		return META_EURL;
	return *p == '?' ? url_params(p + 1, a, 1) : 0;
}

int redis_url_parse(const char *url, struct addr *a)
{
	int err;

	memset(a, 0, sizeof *a);
	a->port = 6379;
	a->wait_timeout = WAIT_TIMEOUT_S;
	a->failover_timeout = -1;
	if (!url)
		return META_EURL;
	if (strncmp(url, "redis://", 8) == 0)
		err = url_parse_redis(url + 8, a);
	else if (strncmp(url, "unix://", 7) == 0)
		err = url_parse_unix(url + 7, a);
	else
		err = META_EURL;
	if (a->failover_timeout < 0)
		a->failover_timeout = a->master[0] ? FAILOVER_TIMEOUT_S : 0;
	if (a->master[0])
		a->host[0] = '\0'; /* none found yet */
	return err;
}

/* ---- passwords ---- */

int meta_url_password(const char *url, size_t *off, size_t *len)
{
	const char *ui, *at, *colon, *scheme;

	if (!url || !strncmp(url, "unix://", 7))
		return 0; /* a socket path may hold '@': no password there */
	/* redis://, and any other scheme's (rediss://, a typo): a password
	 * is hidden whether or not the URL parses */
	scheme = strstr(url, "://");
	ui = scheme ? scheme + 3 : url;
	at = strrchr(ui, '@');
	if (!at)
		return 0;
	colon = memchr(ui, ':', (size_t)(at - ui));
	ui = colon ? colon + 1 : ui; /* "secret@host": all of it */
	*off = (size_t)(ui - url);
	*len = (size_t)(at - ui);
	return 1;
}

void meta_url_redact(const char *url, char *buf, size_t cap)
{
	size_t off, len;

	if (!cap)
		return;
	if (!url)
		snprintf(buf, cap, "(none)");
	else if (meta_url_password(url, &off, &len))
		snprintf(buf, cap, "%.*s****%s", (int)off, url,
			 url + off + len);
	else
		snprintf(buf, cap, "%s", url);
}
