/**
 * The adapter's WeChat Pay primitives against fixed vectors published by WeChat Pay (its official
 * SDKs' test data and its documentation): test/providers/vectors/wechatpay/ (README.md names each
 * source; each vector carries its own `source`).
 */
import assert from 'node:assert/strict';
import {
  createCipheriv,
  createPrivateKey,
  createPublicKey,
  createSecretKey,
  generateKeyPairSync,
  randomBytes,
  sign,
  X509Certificate,
} from 'node:crypto';
import fs from 'node:fs';
import { describe, test } from 'node:test';
import { ProviderNotificationError } from '../../src/providers/provider.ts';
import { parseWechatPayNotification } from '../../src/providers/wechatpay/notifications.ts';
import { type PlatformKeys, PublicKeyPlatform, decryptCertificateList } from '../../src/providers/wechatpay/platform-keys.ts';
import {
  answerMessage,
  authorizationHeader,
  decryptAesGcm,
  jsapiPayMessage,
  requestMessage,
  rfc3339Beijing,
  signMessage,
  verifyMessage,
} from '../../src/providers/wechatpay/protocol.ts';

const V = JSON.parse(fs.readFileSync(new URL('./vectors/wechatpay/vectors.json', import.meta.url), 'utf8'));

describe('WeChat Pay fixed vectors', () => {
  test('request signing string and Authorization header (wechatpay-go credentials test)', () => {
    const r = V.requestMessage;
    for (const c of r.cases) {
      const message = requestMessage(c.method, c.url, r.timestamp, r.nonce, c.body);
      assert.equal(message, c.message);
      const header = authorizationHeader({
        mchId: r.mchId,
        nonce: r.nonce,
        timestamp: r.timestamp,
        serialNo: r.serialNo,
        signature: `Sign:${message}`,
      });
      // The Go test signs with a mock whose scheme is WECHATPAY2-Mock; ours is WECHATPAY2-SHA256-RSA2048.
      assert.equal(header.replace('WECHATPAY2-SHA256-RSA2048 ', 'WECHATPAY2-Mock '), c.authorization);
    }
  });

  test('SHA256-with-RSA signature, byte for byte, and its verification with the published public key', async () => {
    const r = V.rsaSignature;
    const privateKey = createPrivateKey(r.privateKeyPem);
    assert.equal(signMessage(r.message, privateKey), r.signature);
    const publicKey = createPublicKey(r.publicKeyPem);
    assert.equal(verifyMessage(r.message, r.signature, publicKey), true);
    assert.equal(verifyMessage('wrong source', r.signature, publicKey), false);
    assert.equal(verifyMessage(r.message, `WECHATPAY/SIGNTEST/${r.signature}`, publicKey), false, 'a probe signature never verifies');
    // Public-key mode: the key is found by its id, and only by it.
    const keys = new PublicKeyPlatform(r.publicKeyId, publicKey);
    assert.equal(await keys.keyFor(r.publicKeyId), publicKey);
    assert.equal(await keys.keyFor('PUB_KEY_ID_OTHER'), null);
  });

  test("JSAPI paySign: the documentation's signing string, signed as the documentation's openssl command signs it", () => {
    const j = V.jsapiPaySign;
    const message = jsapiPayMessage(j.appId, j.timeStamp, j.nonceStr, j.package);
    assert.equal(message, j.message);
    const privateKey = createPrivateKey(V.rsaSignature.privateKeyPem);
    assert.equal(signMessage(message, privateKey), j.paySign);
    assert.equal(verifyMessage(j.message, j.paySign, createPublicKey(V.rsaSignature.publicKeyPem)), true);
    // signType is not signed; a line ending or field order other than the documented one is another signature.
    assert.notEqual(signMessage(message.slice(0, -1), privateKey), j.paySign);
  });

  describe('a notification as WeChat Pay sends it (wechatpay-go notify test)', () => {
    const n = V.notification;
    const cert = new X509Certificate(n.certificatePem);
    const keys: PlatformKeys = { acceptSerial: () => null, keyFor: async (s) => (s === cert.serialNumber ? cert.publicKey : null) };
    const parsed = JSON.parse(n.body);
    const ctx = (o: { nowMs?: number; mchId?: string } = {}) => ({
      mchId: o.mchId ?? JSON.parse(n.plaintext).mchid,
      appId: JSON.parse(n.plaintext).appid,
      apiV3Key: createSecretKey(Buffer.from(n.apiV3Key)),
      keys,
      nowMs: o.nowMs ?? n.nowSeconds * 1000,
    });

    test('the certificate is the one named by Wechatpay-Serial; the signature verifies; the resource decrypts', () => {
      assert.equal(cert.serialNumber, n.certificateSerial);
      assert.equal(n.headers['Wechatpay-Serial'], n.certificateSerial);
      const h = n.headers;
      assert.equal(
        verifyMessage(answerMessage(h['Wechatpay-Timestamp'], h['Wechatpay-Nonce'], n.body), h['Wechatpay-Signature'], cert.publicKey),
        true,
      );
      const r = parsed.resource;
      const plain = decryptAesGcm(createSecretKey(Buffer.from(n.apiV3Key)), r.nonce, r.associated_data, r.ciphertext).toString('utf8');
      assert.equal(plain, n.plaintext);
    });

    test('verified and decrypted, then refused for its event type (PAYSCORE.USER_OPEN_SERVICE is not ours)', async () => {
      await assert.rejects(
        parseWechatPayNotification(Buffer.from(n.body), n.headers, ctx()),
        (e: unknown) => e instanceof ProviderNotificationError && /unknown event_type PAYSCORE\.USER_OPEN_SERVICE/.test(e.message),
      );
    });

    test('refused as stale more than 5 minutes after its timestamp, and for another merchant number', async () => {
      const stale = (n.nowSeconds + 301) * 1000;
      await assert.rejects(parseWechatPayNotification(Buffer.from(n.body), n.headers, ctx({ nowMs: stale })), /5 minutes/);
      await assert.rejects(parseWechatPayNotification(Buffer.from(n.body), n.headers, ctx({ mchId: '1900000001' })), /mchid/);
    });

    test('refused with one byte of the body changed', async () => {
      const tampered = Buffer.from(n.body.replace('签约成功', '签约失败'));
      await assert.rejects(parseWechatPayNotification(tampered, n.headers, ctx()), /bad signature/);
    });
  });

  test('AEAD_AES_GCM decryption (wechatpay-java AeadAesCipherTest, wechatpay-go aes_test)', () => {
    for (const a of V.aesGcm) {
      const key = createSecretKey(Buffer.from(a.key));
      assert.equal(decryptAesGcm(key, a.nonce, a.associatedData, a.ciphertext).toString('utf8'), a.plaintext, a.source);
      assert.throws(() => decryptAesGcm(key, a.nonce, `bad-${a.associatedData}`, a.ciphertext));
      assert.throws(() => decryptAesGcm(key, `x${a.nonce.slice(1)}`, a.associatedData, a.ciphertext));
    }
  });

  test('a GET /v3/certificates answer body decrypted with the APIv3 key (wechatpay-java TestConfig)', () => {
    const c = V.certificateDownload;
    const key = createSecretKey(Buffer.from(c.apiV3Key));
    const [only, ...rest] = decryptCertificateList(c.body, key, Date.parse('2026-01-01T00:00:00Z'));
    assert.equal(rest.length, 0);
    assert.equal(only!.serial, c.serial);
    assert.equal(Date.parse(only!.certificate.validFrom), Date.parse(c.validFrom));
    assert.equal(Date.parse(only!.certificate.validTo), Date.parse(c.validTo));
    // Expired: not used.
    assert.equal(decryptCertificateList(c.body, key, Date.parse('2029-01-01T00:00:00Z')).length, 0);
    // Another APIv3 key: the list is not WeChat Pay's.
    assert.throws(() => decryptCertificateList(c.body, createSecretKey(Buffer.from('b'.repeat(32))), Date.now()));
  });

  test('time_expire in RFC 3339 at +08:00 (the H5 order documentation example)', () => {
    assert.equal(rfc3339Beijing(new Date(V.timeExpire.epochSeconds * 1000)), V.timeExpire.value);
    assert.equal(rfc3339Beijing(new Date(V.timeExpire.epochSeconds * 1000 + 999)), V.timeExpire.value, 'rounded down to the second');
  });

  test('amount handling of the documentation example payment resource: total in fen, currency', async () => {
    const t = V.transactionResource;
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const apiV3Key = randomBytes(16).toString('hex');
    const nonce = 'a1b2c3d4e5f6';
    const cipher = createCipheriv('aes-256-gcm', Buffer.from(apiV3Key), Buffer.from(nonce));
    cipher.setAAD(Buffer.from('transaction'));
    const ciphertext = Buffer.concat([cipher.update(JSON.stringify(t.plaintext)), cipher.final(), cipher.getAuthTag()]).toString('base64');
    const body = Buffer.from(
      JSON.stringify({
        id: 'EV-2018022511223320873',
        create_time: '2015-05-20T13:29:35+08:00',
        resource_type: 'encrypt-resource',
        event_type: 'TRANSACTION.SUCCESS',
        summary: '支付成功',
        resource: { original_type: 'transaction', algorithm: 'AEAD_AES_256_GCM', ciphertext, associated_data: 'transaction', nonce },
      }),
    );
    const ts = String(Math.floor(Date.now() / 1000));
    const headers = {
      'wechatpay-timestamp': ts,
      'wechatpay-nonce': 'n0nce',
      'wechatpay-serial': 'PUB_KEY_ID_0112345678',
      'wechatpay-signature': sign('sha256', answerMessage(ts, 'n0nce', body), privateKey).toString('base64'),
    };
    const got = await parseWechatPayNotification(body, headers, {
      mchId: t.plaintext.mchid,
      appId: t.plaintext.appid,
      apiV3Key: createSecretKey(Buffer.from(apiV3Key)),
      keys: new PublicKeyPlatform('PUB_KEY_ID_0112345678', publicKey),
      nowMs: Date.now(),
    });
    assert.deepEqual(got, { kind: 'PAYMENT', state: 'PAID', reason: null, ...t.expected });
  });
});
