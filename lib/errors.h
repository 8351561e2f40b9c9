/*
 * errors.h - the project's error codes and their one strerror. Functions
 * return 0, a positive errno, or one of the negative codes below, each
 * range owned by one module (the module's header says which of its calls
 * return which). gr_strerror() turns any of them into a message that says
 * what to do next where that is known.
 */
#ifndef GRANARY_ERRORS_H
#define GRANARY_ERRORS_H

/* block codec (fs/store/codec.h) */
#define CODEC_ECORRUPT (-101) /* bad magic, length, or checksum */
#define CODEC_EVERSION (-102) /* written by a newer granary */

/* object stores (fs/store/objstore.h) */
#define OBJSTORE_EURL	   (-201) /* malformed or unsupported URL */
#define OBJSTORE_ENOBUCKET (-202) /* bucket does not exist */
#define OBJSTORE_EAUTH	   (-203) /* access key or signature refused */
#define OBJSTORE_EUNREACH  (-204) /* cannot connect / resolve / timed out */
#define OBJSTORE_ESERVER   (-205) /* server error after all retries */
#define OBJSTORE_ENOCREDS  (-206) /* s3 URL but no access key/secret */
#define OBJSTORE_ETLS	   (-207) /* TLS handshake failed (transient) */
#define OBJSTORE_ECERT	   (-208) /* server certificate not trusted */
#define OBJSTORE_EPLAIN	   (-209) /* s3:// (TLS) URL, server speaks HTTP */
#define OBJSTORE_EDNS	   (-210) /* host name not found (transient) */
#define OBJSTORE_EREFUSED  (-211) /* connection refused (transient) */
#define OBJSTORE_ETIMEDOUT (-212) /* no answer in time (transient) */

/* encryption at rest (fs/store/crypt.h) */
#define CRYPT_EKEY   (-221) /* the key given does not open this volume */
#define CRYPT_ENOKEY (-222) /* the volume is encrypted and no key was given */
#define CRYPT_EAUTH  (-223) /* an object failed its authentication tag */
#define CRYPT_EPLAIN (-224) /* a key was given for a volume not encrypted */

/* the transport between members of a cache group (fs/store/peer.h) */
#define PEER_EDOWN  (-241) /* the member did not answer (refused, timed out) */
#define PEER_EAUTH  (-242) /* the member refused our signature */
#define PEER_EPROTO (-243) /* the member's answer is not the protocol's */

/* metadata engine (meta/meta.h) */
#define META_ENOVOLUME (-301) /* the database holds no granary volume */
#define META_EEXIST    (-302) /* a volume already exists (format w/o force) */
#define META_EUNREACH  (-303) /* cannot reach the metadata server */
#define META_EURL      (-304) /* malformed metadata URL */
#define META_EVERSION  (-305) /* volume of another format version */
#define META_EAUTH     (-306) /* password refused */
#define META_EPROTO    (-307) /* unexpected reply (corrupt record, bug) */
#define META_ESENTINEL (-308) /* no sentinel of a sentinel URL answered */
#define META_ENOMASTER (-309) /* the sentinels know no master of that name */
#define META_ELOCKLOST (-310) /* a lock this client held was taken from it */
#define META_EGONE                                                             \
	(-311) /* the volume mounted is not in its database                    \
		  any more (restored, emptied, replaced) */

/* Message for 0, a positive errno or any code above; never NULL. */
const char *gr_strerror(int err);

#endif
