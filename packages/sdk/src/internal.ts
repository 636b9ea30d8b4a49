/** Small helpers shared by the SDK modules; not part of the public API. */
import { randomBytes, sign, verify, type KeyObject } from 'node:crypto';

const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/** `length` characters from A-Za-z0-9, uniformly (rejection sampling of random bytes). */
export function randomAlphanumeric(length: number): string {
  let out = '';
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      // 248 = 4 * 62: bytes above it would bias the first characters.
      if (byte < 248) out += ALNUM[byte % 62];
      if (out.length === length) break;
    }
  }
  return out;
}

/** Header collections accepted from callers: Node's IncomingHttpHeaders, plain objects, fetch Headers. */
export type HeadersInput = Headers | Readonly<Record<string, string | readonly string[] | undefined>>;

export type HeaderLookup = { ok: true; value: string | undefined } | { ok: false; reason: 'DUPLICATE' };

/** Case-insensitive lookup; a header given twice (array, or two spellings) is reported. */
export function lookupHeader(headers: HeadersInput, name: string): HeaderLookup {
  if (typeof Headers !== 'undefined' && headers instanceof Headers) {
    return { ok: true, value: headers.get(name) ?? undefined };
  }
  const wanted = name.toLowerCase();
  let found: string | undefined;
  let count = 0;
  for (const [key, value] of Object.entries(headers as Record<string, string | readonly string[] | undefined>)) {
    if (key.toLowerCase() !== wanted || value === undefined) continue;
    if (typeof value === 'string') {
      count += 1;
      found = value;
    } else {
      count += value.length;
      found = value[0];
    }
  }
  if (count > 1) return { ok: false, reason: 'DUPLICATE' };
  return { ok: true, value: found };
}

/** Standard Base64 with padding, nothing else (Buffer.from(..., 'base64') alone is lenient). */
export function isStrictBase64(value: string): boolean {
  return value.length > 0 && value.length % 4 === 0 && /^[A-Za-z0-9+/]+={0,2}$/.test(value);
}

/** RSASSA-PKCS1-v1_5 / SHA-256, standard Base64. Runs on libuv's thread pool. */
export function signBase64(data: string, key: KeyObject): Promise<string> {
  return new Promise((resolve, reject) => {
    sign('sha256', Buffer.from(data, 'utf8'), key, (err, signature) => {
      if (err) reject(err);
      else resolve(signature.toString('base64'));
    });
  });
}

/** Synchronous form of signBase64, for helpers used in tests and scripts. */
export function signBase64Sync(data: string, key: KeyObject): string {
  return sign('sha256', Buffer.from(data, 'utf8'), key).toString('base64');
}

/** Verifies a standard-Base64 RSASSA-PKCS1-v1_5 / SHA-256 signature; false on malformed input. */
export function verifyBase64(data: string, signatureBase64: string, key: KeyObject): boolean {
  if (!isStrictBase64(signatureBase64)) return false;
  try {
    return verify('sha256', Buffer.from(data, 'utf8'), key, Buffer.from(signatureBase64, 'base64'));
  } catch {
    return false;
  }
}

/** A 10-digit-at-most decimal seconds timestamp, as the headers carry it. */
export function isTimestampText(value: string): boolean {
  return /^[0-9]{1,10}$/.test(value);
}

export function toTimestampText(value: number | string | undefined, now: () => number): string {
  if (value === undefined) return String(Math.floor(now() / 1000));
  const text = String(value);
  if (!isTimestampText(text)) throw new TypeError(`timestamp must be integer epoch seconds (at most 10 digits), got ${text}`);
  return text;
}
