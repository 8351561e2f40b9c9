// s3rver.js - s3rver (.deps) as the tests run it: its command line, with a
// PUT that stores all of its body or nothing, as S3 does.
//
// s3rver 3.7.1 streams a PUT's body straight into the object's file and
// checks neither Content-Length nor Content-MD5 nor x-amz-content-sha256:
// when the client dies in the middle of the body (a test's SIGKILL), the
// bytes that came stay as the object and GET serves them (200). S3 stores
// nothing then (the request never completed). Here the body goes to a
// temporary file beside the object's ("<object file>.tmp-PID-N": no
// "._S3rver_object" ending, so listings skip it) that is renamed over the
// object's only once the whole body came (Node's HTTP parser ends a
// request at its Content-Length, and errors one cut before), and removed
// when the request fails. A GET meanwhile sees the old object whole, not
// a rewrite under way.
//
// usage: node s3rver.js S3RVER-ARGS... (those of s3rver's own command)
'use strict';
const crypto = require('crypto');
const fs = require('fs');
const path = require('path');
const { Readable, Transform, pipeline } = require('stream');

const s3rverDir = path.join(__dirname, '../../.deps/node_modules/s3rver');
const FilesystemStore = require(path.join(s3rverDir, 'lib/stores/filesystem'));

let tmpSeq = 0;

FilesystemStore.prototype.putObject = async function putObject(object) {
	const objectPath = this.getResourcePath(object.bucket, object.key, 'object');
	const tmp = `${objectPath}.tmp-${process.pid}-${++tmpSeq}`;
	const md5 = crypto.createHash('md5');
	let size = 0;

	await fs.promises.mkdir(path.dirname(objectPath), { recursive: true });
	const count = new Transform({
		transform(chunk, encoding, done) {
			md5.update(chunk);
			size += chunk.length;
			done(null, chunk);
		},
	});
	const body = Buffer.isBuffer(object.content) ?
		Readable.from([object.content]) : object.content;
	try {
		await new Promise((resolve, reject) => {
			pipeline(body, count,
				fs.createWriteStream(tmp),
				(err) => (err ? reject(err) : resolve()));
		});
		await fs.promises.rename(tmp, objectPath);
	} catch (err) {
		await fs.promises.unlink(tmp).catch(() => {});
		throw err;
	}
	const digest = md5.digest('hex');
	await this.putMetadata(object.bucket, object.key, object.metadata, digest);
	return { size, md5: digest };
};

// s3rver's own command line, over process.argv
require(path.join(s3rverDir, 'bin/s3rver.js'));
