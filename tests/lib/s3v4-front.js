// s3v4-front.js - a test front for s3rver that verifies AWS Signature V4.
//
// s3rver checks V2 signatures but takes any V4 one, so a test against it
// proves nothing about a V4 signer. This front sits on a loopback port
// before s3rver, recomputes the signature of every request with the aws4
// package (npm, the signer many clients use: an independent
// implementation, not granary's) and answers as S3 does, in S3's XML error
// format, when it does not match; else it forwards the request to s3rver
// with its Authorization header removed (s3rver serves anonymous requests,
// so it cannot second-guess a signature made with a key it does not know).
//
// What it checks, as S3 does:
// - header auth only: "AWS4-HMAC-SHA256 Credential=AK/DATE/REGION/s3/
//   aws4_request, SignedHeaders=..., Signature=..."; no auth -> 403
//   AccessDenied; V2 ("AWS AK:sig") or query auth -> 400 InvalidRequest;
// - a known access key, the region and service of the scope, the scope's
//   date equal to x-amz-date's, x-amz-date within 15 minutes of now;
// - host, x-amz-date and x-amz-content-sha256 signed, and every x-amz-*
//   header present signed;
// - temporary credentials (STS), when started with a second key pair and
//   its session token: a request signed with that key must carry the
//   token in x-amz-security-token, signed as every x-amz-* header is;
//   without it -> 403 InvalidAccessKeyId, another token -> 400
//   InvalidToken; a token with the long-term key -> 400 InvalidToken;
// - x-amz-content-sha256: UNSIGNED-PAYLOAD (body streamed through) or the
//   hex SHA-256 of the body (the body is held until it is checked, so a
//   mismatch never reaches s3rver: 400 XAmzContentSHA256Mismatch);
//   streaming (chunked-signature) payloads -> 501 NotImplemented.
//
// usage: node s3v4-front.js LISTEN_PORT UPSTREAM_PORT ACCESS_KEY SECRET REGION
//            [TEMP_ACCESS_KEY TEMP_SECRET SESSION_TOKEN]
'use strict';
const http = require('http');
const crypto = require('crypto');
const path = require('path');
const aws4 = require(path.join(__dirname, '../../.deps/node_modules/aws4'));

const [listenPort, upstreamPort, accessKey, secretKey, region,
	tempKey, tempSecret, sessionToken] = process.argv.slice(2);
if (!region || (tempKey && !sessionToken)) {
	console.error('usage: node s3v4-front.js LISTEN_PORT UPSTREAM_PORT ACCESS_KEY SECRET REGION [TEMP_ACCESS_KEY TEMP_SECRET SESSION_TOKEN]');
	process.exit(2);
}
const MAX_HELD_BODY = 512 << 20; // bodies with a hash are held until checked
const MAX_SKEW_MS = 15 * 60 * 1000;
const upstreamAgent = new http.Agent({ keepAlive: true });

class S3Error extends Error {
	constructor(status, code, message) {
		super(message);
		this.status = status;
		this.code = code;
	}
}

const xmlEscape = (s) => String(s).replace(/[<>&'"]/g,
	(c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', "'": '&apos;', '"': '&quot;' }[c]));

function sendError(req, res, err) {
	const body = '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>' +
		xmlEscape(err.code) + '</Code><Message>' + xmlEscape(err.message) +
		'</Message><Resource>' + xmlEscape(req.url) + '</Resource><RequestId>' +
		crypto.randomBytes(8).toString('hex') + '</RequestId></Error>\n';
	res.writeHead(err.status, {
		'Content-Type': 'application/xml',
		'Content-Length': req.method === 'HEAD' ? 0 : Buffer.byteLength(body),
		Connection: 'close',
	});
	res.end(req.method === 'HEAD' ? undefined : body);
	req.resume(); // drain what is left of the body
}

const AUTH_RE = new RegExp('^AWS4-HMAC-SHA256 +Credential=([^/,]+)/(\\d{8})/([^/,]+)/([^/,]+)/aws4_request' +
	' *, *SignedHeaders=([a-z0-9;._-]+) *, *Signature=([0-9a-f]{64})$');

// parseAuth: the parts of a V4 Authorization header, or an S3Error.
function parseAuth(req) {
	const auth = req.headers.authorization;
	const url = new URL(req.url, 'http://x');
	if (url.searchParams.has('X-Amz-Algorithm') || url.searchParams.has('Signature'))
		throw new S3Error(400, 'InvalidRequest', 'query-string (presigned) authentication is not supported by this test server');
	if (auth === undefined)
		throw new S3Error(403, 'AccessDenied', 'Access Denied: the request is not signed');
	if (!auth.startsWith('AWS4-HMAC-SHA256 '))
		throw new S3Error(400, 'InvalidRequest', 'The authorization mechanism you have provided is not supported. Please use AWS4-HMAC-SHA256.');
	const m = AUTH_RE.exec(auth);
	if (!m)
		throw new S3Error(400, 'AuthorizationHeaderMalformed', 'The authorization header is malformed');
	const [, ak, date, scopeRegion, service, signedHeaders, signature] = m;
	return { ak, date, scopeRegion, service, signed: signedHeaders.split(';'), signedHeaders, signature };
}

// checkKey: the secret of a known access key, and its session token as S3
// checks it for temporary credentials.
function checkKey(req, a) {
	const token = req.headers['x-amz-security-token'];
	if (a.ak === accessKey) {
		if (token !== undefined)
			throw new S3Error(400, 'InvalidToken', 'The provided token is malformed or otherwise invalid. (this access key is no temporary one)');
		return secretKey;
	}
	if (tempKey && a.ak === tempKey) {
		if (token === undefined)
			throw new S3Error(403, 'InvalidAccessKeyId', 'The AWS Access Key Id you provided does not exist in our records. (a temporary key without its x-amz-security-token)');
		if (token !== sessionToken)
			throw new S3Error(400, 'InvalidToken', 'The provided token is malformed or otherwise invalid.');
		return tempSecret;
	}
	throw new S3Error(403, 'InvalidAccessKeyId', 'The AWS Access Key Id you provided does not exist in our records.');
}

// checkScope: the scope and time of a parsed header, as S3 checks them.
function checkScope(req, a) {
	if (a.service !== 's3')
		throw new S3Error(400, 'AuthorizationHeaderMalformed', `the credential scope names service '${a.service}'; expecting 's3'`);
	if (a.scopeRegion !== region)
		throw new S3Error(400, 'AuthorizationHeaderMalformed', `the region '${a.scopeRegion}' is wrong; expecting '${region}'`);
	for (const h of ['host', 'x-amz-date', 'x-amz-content-sha256']) {
		if (req.headers[h] === undefined)
			throw new S3Error(400, 'InvalidRequest', `Missing required header for this request: ${h}`);
		if (!a.signed.includes(h))
			throw new S3Error(403, 'AccessDenied', `the header '${h}' must be signed`);
	}
	for (const h of Object.keys(req.headers))
		if (h.startsWith('x-amz-') && !a.signed.includes(h))
			throw new S3Error(403, 'AccessDenied', `There were headers present in the request which were not signed: ${h}`);
	for (const h of a.signed)
		if (req.headers[h] === undefined)
			throw new S3Error(403, 'AccessDenied', `the signed header '${h}' is not in the request`);
	const amzDate = req.headers['x-amz-date'];
	const t = /^(\d{4})(\d\d)(\d\d)T(\d\d)(\d\d)(\d\d)Z$/.exec(amzDate);
	if (!t)
		throw new S3Error(403, 'AccessDenied', `x-amz-date '${amzDate}' is not of the form YYYYMMDDTHHMMSSZ`);
	if (amzDate.slice(0, 8) !== a.date)
		throw new S3Error(400, 'AuthorizationHeaderMalformed', 'the credential scope date is not the date of x-amz-date');
	const when = Date.UTC(+t[1], t[2] - 1, +t[3], +t[4], +t[5], +t[6]);
	if (Math.abs(Date.now() - when) > MAX_SKEW_MS)
		throw new S3Error(403, 'RequestTimeTooSkewed', 'The difference between the request time and the current time is too large.');
	const sha = req.headers['x-amz-content-sha256'];
	if (sha.startsWith('STREAMING-'))
		throw new S3Error(501, 'NotImplemented', 'streaming (chunk-signed) payloads are not supported by this test server');
	if (sha !== 'UNSIGNED-PAYLOAD' && !/^[0-9a-f]{64}$/.test(sha))
		throw new S3Error(400, 'InvalidArgument', 'x-amz-content-sha256 must be UNSIGNED-PAYLOAD or the SHA-256 of the payload in lower-case hex');
}

// checkSignature: aws4 recomputes the signature over exactly the headers
// the client signed (aws4 leaves out some, e.g. range, unless told).
function checkSignature(req, a, secret) {
	const headers = {};
	const include = {};
	for (const h of a.signed) {
		headers[h] = req.headers[h];
		include[h] = true;
	}
	const signer = new aws4.RequestSigner({
		service: 's3', region, method: req.method, path: req.url, headers,
		doNotModifyHeaders: true, extraHeadersToInclude: include,
	}, { accessKeyId: a.ak, secretAccessKey: secret });
	signer.datetime = req.headers['x-amz-date'];
	const want = Buffer.from(signer.signature());
	const got = Buffer.from(a.signature);
	if (signer.signedHeaders() !== a.signedHeaders || !crypto.timingSafeEqual(want, got))
		throw new S3Error(403, 'SignatureDoesNotMatch', 'The request signature we calculated does not match the signature you provided. Check your key and signing method.');
}

function forward(req, res, body) {
	const headers = Object.assign({}, req.headers);
	delete headers.authorization;
	if (body !== undefined) {
		delete headers['transfer-encoding'];
		headers['content-length'] = String(body.length);
	}
	const up = http.request({
		host: '127.0.0.1', port: upstreamPort, method: req.method, path: req.url,
		headers, agent: upstreamAgent,
	}, (ures) => {
		res.writeHead(ures.statusCode, ures.headers);
		ures.pipe(res);
	});
	up.on('error', (e) => {
		if (!res.headersSent)
			sendError(req, res, new S3Error(502, 'InternalError', `s3rver behind the front: ${e.message}`));
		else
			res.destroy();
	});
	if (body !== undefined)
		up.end(body);
	else
		req.pipe(up);
}

// holdBody: the whole body, then its SHA-256 checked against the header.
function holdBody(req, res, want) {
	const hash = crypto.createHash('sha256');
	const parts = [];
	let size = 0;
	req.on('data', (c) => {
		size += c.length;
		if (size > MAX_HELD_BODY) {
			if (!res.headersSent)
				sendError(req, res, new S3Error(400, 'EntityTooLarge', 'a body with a payload hash is held in memory: at most 512 MiB'));
			return;
		}
		hash.update(c);
		parts.push(c);
	});
	req.on('end', () => {
		if (size > MAX_HELD_BODY)
			return;
		if (hash.digest('hex') !== want)
			return sendError(req, res, new S3Error(400, 'XAmzContentSHA256Mismatch', "The provided 'x-amz-content-sha256' header does not match what was computed."));
		forward(req, res, Buffer.concat(parts));
	});
}

const server = http.createServer((req, res) => {
	try {
		const a = parseAuth(req);
		const secret = checkKey(req, a);
		checkScope(req, a);
		checkSignature(req, a, secret);
	} catch (e) {
		if (!(e instanceof S3Error))
			e = new S3Error(500, 'InternalError', e.message);
		return sendError(req, res, e);
	}
	const sha = req.headers['x-amz-content-sha256'];
	if (sha === 'UNSIGNED-PAYLOAD')
		forward(req, res);
	else
		holdBody(req, res, sha);
});
server.listen(+listenPort, '127.0.0.1');
process.on('SIGTERM', () => process.exit(0));
