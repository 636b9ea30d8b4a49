/**
 * Recomputes every signing vector of vectors.json with signing.ts + node:crypto, and through the
 * SDK's public helpers, so the file stays a trustworthy reference for SDKs in other languages.
 */
import assert from 'node:assert/strict';
import { createHash, createPrivateKey, createPublicKey, sign, verify } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { signRequestHeaders, verifyNotification, verifyResponseSignature } from '../src/index.ts';
import { normalizeContentType, notificationSigningString, requestSigningString, responseSigningString } from '../src/signing.ts';

interface Expected {
  name: string;
  bodySha256: string;
  signingString: string;
  signingStringSha256: string;
  signature: string;
}
interface Vectors {
  key: { testOnly: boolean; bits: number; keyId: string; platformKeyId: string; publicKeyPem: string; privateKeyPem: string };
  contentTypeNormalization: { input: string | null; normalized: string }[];
  requests: (Expected & {
    normalizedContentType: string;
    input: {
      method: string;
      target: string;
      appId: string;
      keyId: string;
      timestamp: string;
      nonce: string;
      requestId: string;
      contentType: string | null;
      body: string;
    };
  })[];
  responses: (Expected & { input: { timestamp: string; nonce: string; requestId: string; status: number; body: string } })[];
  notifications: (Expected & { input: { timestamp: string; nonce: string; eventId: string; body: string } })[];
}

const vectors = JSON.parse(readFileSync(new URL('./vectors.json', import.meta.url), 'utf8')) as Vectors;
const privateKey = createPrivateKey(vectors.key.privateKeyPem);
const publicKey = createPublicKey(vectors.key.publicKeyPem);
const hex = (data: string): string => createHash('sha256').update(data, 'utf8').digest('hex');

/** Checks the parts every vector shares: hashes, the deterministic signature, and verification. */
function checkSignature(v: Expected, body: string, signingString: string): void {
  assert.equal(hex(body), v.bodySha256, 'body SHA-256');
  assert.equal(signingString, v.signingString, 'signing string');
  assert.equal(hex(signingString), v.signingStringSha256, 'signing string SHA-256');
  assert.equal(sign('sha256', Buffer.from(signingString, 'utf8'), privateKey).toString('base64'), v.signature, 'signature');
  assert.ok(verify('sha256', Buffer.from(signingString, 'utf8'), publicKey, Buffer.from(v.signature, 'base64')), 'verifies');
  assert.ok(signingString.endsWith('\n') && !signingString.includes('\r'), 'LF line endings, last line terminated');
}

describe('signing vectors', () => {
  it('uses a labelled test-only RSA-2048 key pair whose halves match', () => {
    assert.equal(vectors.key.testOnly, true);
    assert.equal(privateKey.asymmetricKeyDetails?.modulusLength, 2048);
    assert.equal(vectors.key.bits, 2048);
    assert.equal(createPublicKey(privateKey).export({ type: 'spki', format: 'pem' }), vectors.key.publicKeyPem);
    assert.match(vectors.key.privateKeyPem, /^-----BEGIN PRIVATE KEY-----\n/); // PKCS#8
  });

  it('normalizes Content-Type as pinned', () => {
    for (const c of vectors.contentTypeNormalization) assert.equal(normalizeContentType(c.input), c.normalized, JSON.stringify(c.input));
  });

  for (const v of vectors.requests) {
    it(`request: ${v.name}`, async () => {
      const i = v.input;
      const fromSigning = requestSigningString({ ...i, contentType: i.contentType ?? undefined });
      // The same nine lines written out from decisions.md section 1, independently of signing.ts.
      const byHand = [
        i.method.toUpperCase(),
        i.target,
        i.appId,
        i.keyId,
        i.timestamp,
        i.nonce,
        i.requestId,
        v.normalizedContentType,
        hex(i.body),
      ]
        .map((line) => `${line}\n`)
        .join('');
      assert.equal(fromSigning, byHand);
      assert.equal(normalizeContentType(i.contentType), v.normalizedContentType);
      checkSignature(v, i.body, fromSigning);

      const headers = await signRequestHeaders({
        ...i,
        contentType: i.contentType ?? undefined,
        body: Buffer.from(i.body, 'utf8'),
        privateKey: vectors.key.privateKeyPem,
      });
      assert.equal(headers['X-SVC-Sign'], v.signature);
      assert.equal(headers['Content-Type'], i.contentType ?? undefined);
    });
  }

  for (const v of vectors.responses) {
    it(`response: ${v.name}`, () => {
      const i = v.input;
      const s = responseSigningString(i);
      assert.equal(s, `${i.timestamp}\n${i.nonce}\n${i.requestId}\n${i.status}\n${hex(i.body)}\n`);
      checkSignature(v, i.body, s);
      const headers = {
        'x-svc-response-sign': v.signature,
        'x-svc-response-key-id': vectors.key.platformKeyId,
        'x-svc-response-timestamp': i.timestamp,
        'x-svc-response-nonce': i.nonce,
        'x-svc-request-id': i.requestId,
      };
      const keys = { [vectors.key.platformKeyId]: vectors.key.publicKeyPem };
      assert.deepEqual(
        verifyResponseSignature({ status: i.status, headers, body: i.body, platformPublicKeys: keys, expectedRequestId: i.requestId }),
        {
          signed: true,
          keyId: vectors.key.platformKeyId,
        },
      );
    });
  }

  for (const v of vectors.notifications) {
    it(`notification: ${v.name}`, () => {
      const i = v.input;
      const s = notificationSigningString(i);
      assert.equal(s, `${i.timestamp}\n${i.nonce}\n${i.eventId}\n${hex(i.body)}\n`);
      checkSignature(v, i.body, s);
      const payload = verifyNotification({
        headers: {
          'X-SVC-Event-Id': i.eventId,
          'X-SVC-Notify-Timestamp': i.timestamp,
          'X-SVC-Notify-Nonce': i.nonce,
          'X-SVC-Notify-Key-Id': vectors.key.platformKeyId,
          'X-SVC-Notify-Sign': v.signature,
        },
        rawBody: Buffer.from(i.body, 'utf8'),
        platformPublicKeys: { [vectors.key.platformKeyId]: vectors.key.publicKeyPem },
        now: () => Number(i.timestamp) * 1000,
      });
      assert.deepEqual(payload, JSON.parse(i.body));
    });
  }
});
