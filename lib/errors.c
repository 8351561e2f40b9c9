/*
 * errors.c - the one table of the project's error messages (errors.h).
 */
#include <string.h>

#include "lib/errors.h"

static const struct {
	int code;
	const char *msg;
} messages[] = {
    {CODEC_ECORRUPT, "block is corrupt (bad magic, length or checksum)"},
    {CODEC_EVERSION, "block was written by a newer granary (unknown format "
		     "version); upgrade granary"},
    {OBJSTORE_EURL,
     "malformed or unsupported storage URL (expected file:///DIR[:/DIR2...], "
     "s3://HOST[:PORT]/BUCKET[/PREFIX], s3+http://HOST[:PORT]/BUCKET[/PREFIX] "
     "or mem://[NAME])"},
    {OBJSTORE_ENOBUCKET, "bucket does not exist (create it first, or check "
			 "the bucket name in the storage URL)"},
    {OBJSTORE_EAUTH, "access key or secret refused by the store (check "
		     "GRANARY_S3_ACCESS_KEY / GRANARY_S3_SECRET_KEY, and the "
		     "session token of temporary keys)"},
    {OBJSTORE_EUNREACH, "cannot reach the object store (check host, port and "
			"network; the request failed or timed out after "
			"retries)"},
    {OBJSTORE_ESERVER, "object store kept failing with server errors after "
		       "all retries"},
    {OBJSTORE_ENOCREDS, "no S3 credentials (set GRANARY_S3_ACCESS_KEY and "
			"GRANARY_S3_SECRET_KEY, or AWS_ACCESS_KEY_ID and "
			"AWS_SECRET_ACCESS_KEY)"},
    {OBJSTORE_ETLS, "TLS handshake with the object store failed (see the "
		    "log line before this one for the cause)"},
    {OBJSTORE_ECERT, "the object store's certificate is not trusted (give "
		     "its CA with GRANARY_S3_CA_BUNDLE=FILE, or check the "
		     "host name in the storage URL)"},
    {OBJSTORE_EPLAIN, "the object store speaks plain HTTP, not TLS (use an "
		      "s3+http:// URL for it)"},
    {OBJSTORE_EDNS, "the object store's host name was not found (check the "
		    "host in the storage URL, and DNS)"},
    {OBJSTORE_EREFUSED, "the object store refused the connection (is it "
			"running, on that host and port?)"},
    {OBJSTORE_ETIMEDOUT, "the object store did not answer in time (check "
			 "host, port and network; GRANARY_S3_TIMEOUT sets the "
			 "limit)"},
    {CRYPT_EKEY, "the key given does not open this volume (wrong key file "
		 "or passphrase)"},
    {CRYPT_ENOKEY, "the volume is encrypted and no key was given (set "
		   "GRANARY_ENCRYPT_KEY_FILE, or GRANARY_ENCRYPT_PASSPHRASE)"},
    {CRYPT_EAUTH, "an object failed its authentication check: it was "
		  "altered, damaged or swapped in the store"},
    {CRYPT_EPLAIN, "a key was given, but the volume is not encrypted "
		   "(refused: its writes would not be)"},
    {PEER_EDOWN, "the cache group member did not answer (down, or its "
		 "address not reachable from here: see --group-addr)"},
    {PEER_EAUTH, "the cache group member refused the request's signature "
		 "(the members do not share the volume's group secret)"},
    {PEER_EPROTO, "the cache group member's answer is not granary's "
		  "protocol (another program at that address?)"},
    {META_ENOVOLUME,
     "no granary volume in this database (run 'granary format' first)"},
    {META_EEXIST, "the database already holds a granary volume or other "
		  "data (format with --force to wipe it)"},
    {META_EUNREACH, "cannot reach the metadata server (is redis running, and "
		    "is the URL right?)"},
    {META_EURL, "malformed metadata URL (expected "
		"redis://[:PASSWORD@]HOST[:PORT]/DB, "
		"redis://[:PASSWORD@]MASTER,SENTINEL[:PORT],.../DB or "
		"unix:///PATH/redis.sock?db=N)"},
    {META_EVERSION, "the volume has another format version than this "
		    "granary's (a newer granary wrote it, or it needs "
		    "`granary upgrade`)"},
    {META_EAUTH, "the metadata server refused the password (set "
		 "GRANARY_META_PASSWORD or put it in the URL)"},
    {META_EPROTO, "unexpected reply from the metadata server (corrupt "
		  "record or a granary bug)"},
    {META_ESENTINEL, "no sentinel of the metadata URL answered (are "
		     "redis-sentinel running, and the hosts and ports "
		     "right? 26379 is the default port)"},
    {META_ENOMASTER, "the sentinels know no master of the name in the "
		     "metadata URL (see SENTINEL MASTERS on a sentinel)"},
    {META_ELOCKLOST, "a file lock held through this client was lost: its "
		     "session went without heartbeat for the session TTL, "
		     "and other clients may have taken the lock (unlock or "
		     "close the file, then lock it again)"},
    {META_EGONE, "the volume mounted here is not in its database any more "
		 "(restored from a dump, emptied or replaced while mounted): "
		 "unmount and mount again"},
};

const char *gr_strerror(int err)
{
	if (err == 0)
		return "success";
	if (err > 0)
		return strerror(err);
	for (size_t i = 0; i < sizeof(messages) / sizeof(messages[0]); i++)
		if (messages[i].code == err)
			return messages[i].msg;
	return "unknown error";
}
