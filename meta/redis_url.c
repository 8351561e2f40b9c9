/*
 * redis_url.c - where the password of a metadata URL is, by the parser's
 * own rule (redis_conn.c: the user information runs to the last '@'), so
 * that every message, ps and the mount helper hide the same bytes.
 */
#include <stdio.h>
#include <string.h>

#include "meta/meta.h"

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
