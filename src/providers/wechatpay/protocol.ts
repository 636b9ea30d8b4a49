/**
 * WeChat Pay API v3 wire primitives, on node:crypto alone: the strings that are signed, the
 * SHA256-with-RSA signature (PKCS#1 v1.5) of requests and answers, and the AEAD_AES_256_GCM
 * decryption of notification resources and platform certificates. Pure functions with no I/O;
 * the fixed vectors in test/providers/vectors/wechatpay/ check them against the official SDKs'
 * test data.
 */
import { type KeyObject, createDecipheriv, randomBytes, sign, verify } from 'node:crypto';

/** The only signature scheme of API v3 (the `Authorization` scheme and `Wechatpay-Signature-Type`). */
const SIGNATURE_SCHEME = 'WECHATPAY2-SHA256-RSA2048';

/** WeChat Pay sends deliberately wrong signatures with this prefix to probe that merchants verify. */
const PROBE_PREFIX = 'WECHATPAY/SIGNTEST/';

/** The request signing string: `METHOD\nURL\nTIMESTAMP\nNONCE\nBODY\n` (URL: path and query). */
export function requestMessage(method: string, url: string, timestamp: number, nonce: string, body: string): string {
  return `${method}\n${url}\n${timestamp}\n${nonce}\n${body}\n`;
}

/** The answer and notification signing string: `TIMESTAMP\nNONCE\nBODY\n`, over the body's exact bytes. */
export function answerMessage(timestamp: string, nonce: string, body: string | Buffer): Buffer {
  return Buffer.concat([
    Buffer.from(`${timestamp}\n${nonce}\n`, 'utf8'),
    typeof body === 'string' ? Buffer.from(body, 'utf8') : body,
    Buffer.from('\n'),
  ]);
}

/**
 * The string `paySign` signs for WeChat's in-browser payment call (JSAPI调起支付): four lines, each
 * ending in `\n`: appId, timeStamp, nonceStr, package (`prepay_id=...`). signType is not signed.
 */
export function jsapiPayMessage(appId: string, timeStamp: string, nonceStr: string, pkg: string): string {
  return `${appId}\n${timeStamp}\n${nonceStr}\n${pkg}\n`;
}

/** SHA256-with-RSA over the message (a string is taken as UTF-8), base64. */
export function signMessage(message: string | Buffer, privateKey: KeyObject): string {
  return sign('sha256', typeof message === 'string' ? Buffer.from(message, 'utf8') : message, privateKey).toString('base64');
}

/** True when `signature` (base64) is a SHA256-with-RSA signature of the message under `publicKey`. */
export function verifyMessage(message: string | Buffer, signature: string, publicKey: KeyObject): boolean {
  if (signature.startsWith(PROBE_PREFIX) || !/^[A-Za-z0-9+/]+={0,2}$/.test(signature)) return false;
  try {
    return verify(
      'sha256',
      typeof message === 'string' ? Buffer.from(message, 'utf8') : message,
      publicKey,
      Buffer.from(signature, 'base64'),
    );
  } catch {
    return false;
  }
}

/** A 32-character nonce from [0-9A-Za-z]. */
export function newNonce(): string {
  const ALNUM = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
  let out = '';
  while (out.length < 32) {
    for (const b of randomBytes(40)) if (b < 248 && out.length < 32) out += ALNUM[b % 62];
  }
  return out;
}

/**
 * The `Authorization` header of a request. The parameters' order is free; this is the order of
 * the official Go SDK (core/consts/const.go, HeaderAuthorizationFormat).
 */
export function authorizationHeader(p: { mchId: string; nonce: string; timestamp: number; serialNo: string; signature: string }): string {
  return (
    `${SIGNATURE_SCHEME} mchid="${p.mchId}",nonce_str="${p.nonce}",timestamp="${p.timestamp}",` +
    `serial_no="${p.serialNo}",signature="${p.signature}"`
  );
}

/**
 * Decrypts an AEAD_AES_GCM ciphertext (base64: the ciphertext with its 16-byte tag appended) with
 * a 12-byte nonce and associated data, as the official SDKs do. The key's length chooses AES-128,
 * -192 or -256 (API v3 itself always uses the 32-byte APIv3 key: AES-256); throws on a bad tag.
 */
export function decryptAesGcm(key: KeyObject, nonce: string, associatedData: string, ciphertext: string): Buffer {
  const data = Buffer.from(ciphertext, 'base64');
  if (data.length < 17) throw new Error('ciphertext too short');
  const size = key.symmetricKeySize ?? 0;
  if (size !== 16 && size !== 24 && size !== 32) throw new Error('AES key of a wrong size');
  const algorithm = size === 16 ? 'aes-128-gcm' : size === 24 ? 'aes-192-gcm' : 'aes-256-gcm';
  const decipher = createDecipheriv(algorithm, key, Buffer.from(nonce, 'utf8'), { authTagLength: 16 });
  decipher.setAAD(Buffer.from(associatedData, 'utf8'));
  decipher.setAuthTag(data.subarray(data.length - 16));
  return Buffer.concat([decipher.update(data.subarray(0, data.length - 16)), decipher.final()]);
}

/**
 * `time_expire`: RFC 3339 at China Standard Time (UTC+08:00, no daylight saving), to the second,
 * as the documentation's example `2018-06-08T10:34:56+08:00`. Rounded down: the payment window
 * never ends later than asked.
 */
export function rfc3339Beijing(d: Date): string {
  const t = new Date(Math.floor(d.getTime() / 1000) * 1000 + 8 * 3600_000);
  return t.toISOString().replace(/\.\d{3}Z$/, '+08:00');
}
