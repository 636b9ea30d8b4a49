/**
 * Request signing (decisions.md section 1) and response-signature verification (section 3),
 * usable without PaymentClient by merchants who bring their own HTTP client.
 */
import type { KeyObject } from 'node:crypto';
import { ResponseSignatureError } from './errors.ts';
import {
  type HeadersInput,
  isTimestampText,
  lookupHeader,
  randomAlphanumeric,
  signBase64,
  toTimestampText,
  verifyBase64,
} from './internal.ts';
import { type KeyInput, loadPrivateKey, loadPublicKeys, type PlatformPublicKeys } from './keys.ts';
import { requestSigningString, responseSigningString } from './signing.ts';

/** Header names, spelled as the seed spells them (HTTP header names are case-insensitive). */
export const HEADERS = {
  appId: 'X-SVC-App-Id',
  keyId: 'X-SVC-Key-Id',
  timestamp: 'X-SVC-Timestamp',
  nonce: 'X-SVC-Nonce',
  requestId: 'X-SVC-Request-Id',
  sign: 'X-SVC-Sign',
  responseSign: 'X-SVC-Response-Sign',
  responseKeyId: 'X-SVC-Response-Key-Id',
  responseTimestamp: 'X-SVC-Response-Timestamp',
  responseNonce: 'X-SVC-Response-Nonce',
  eventId: 'X-SVC-Event-Id',
  notifyTimestamp: 'X-SVC-Notify-Timestamp',
  notifyNonce: 'X-SVC-Notify-Nonce',
  notifyKeyId: 'X-SVC-Notify-Key-Id',
  notifySign: 'X-SVC-Notify-Sign',
} as const;

/** Literal header forms (seed "Authentication"); checked before sending, the platform checks them too. */
export const APP_ID_PATTERN = /^svcop_[A-Za-z0-9]{16}$/;
export const KEY_ID_PATTERN = /^[!-~]{1,128}$/;
export const NONCE_PATTERN = /^[!-~]{16,64}$/;
export const REQUEST_ID_PATTERN = /^[A-Za-z0-9._:-]{8,128}$/;
const TARGET_PATTERN = /^\/[!-~]*$/;

/** A fresh nonce: 32 random characters from A-Za-z0-9. */
export function generateNonce(): string {
  return randomAlphanumeric(32);
}

/** A fresh request id: `req_` followed by 24 random characters from A-Za-z0-9. */
export function generateRequestId(): string {
  return `req_${randomAlphanumeric(24)}`;
}

export function assertAppId(appId: string): void {
  if (!APP_ID_PATTERN.test(appId))
    throw new TypeError(`appId must be "svcop_" followed by 16 letters or digits, got ${JSON.stringify(appId)}`);
}
export function assertKeyId(keyId: string): void {
  if (!KEY_ID_PATTERN.test(keyId)) throw new TypeError('keyId must be 1-128 visible ASCII characters');
}
export function assertRequestId(requestId: string): void {
  if (!REQUEST_ID_PATTERN.test(requestId)) {
    throw new TypeError(`requestId must be 8-128 characters from A-Z a-z 0-9 . _ : -, got ${JSON.stringify(requestId)}`);
  }
}

export interface SignRequestInput {
  /** HTTP method; signed upper-cased. */
  method: string;
  /** Path plus query exactly as the HTTP client will send it, e.g. `/api/open/v1/payments/T_123456`. */
  target: string;
  appId: string;
  keyId: string;
  /** The merchant's private key: PEM, or a KeyObject from loadPrivateKey() (faster when reused). */
  privateKey: KeyInput;
  /** The exact body bytes that will be sent; omit for no body. */
  body?: string | Uint8Array;
  /** The Content-Type header that will be sent; omit for none (GET). Returned in the headers. */
  contentType?: string;
  /** X-SVC-Request-Id; generated (`req_...`) when omitted. Reuse it when retrying. */
  requestId?: string;
  /** Epoch seconds; `now()` when omitted. */
  timestamp?: number | string;
  /** X-SVC-Nonce; 32 random A-Za-z0-9 characters when omitted. Never reuse one. */
  nonce?: string;
  /** Clock in epoch milliseconds (Date.now by default). */
  now?: () => number;
}

/**
 * Builds the six authentication headers (plus Content-Type when given) for one request.
 * Send exactly these header values, the same body bytes and the same target.
 */
export async function signRequestHeaders(input: SignRequestInput): Promise<Record<string, string>> {
  assertAppId(input.appId);
  assertKeyId(input.keyId);
  if (!TARGET_PATTERN.test(input.target)) throw new TypeError('target must be the path plus query, starting with "/", in visible ASCII');
  const requestId = input.requestId ?? generateRequestId();
  assertRequestId(requestId);
  const nonce = input.nonce ?? generateNonce();
  if (!NONCE_PATTERN.test(nonce)) throw new TypeError('nonce must be 16-64 visible ASCII characters');
  const timestamp = toTimestampText(input.timestamp, input.now ?? Date.now);
  const key: KeyObject = loadPrivateKey(input.privateKey);
  const signingString = requestSigningString({
    method: input.method,
    target: input.target,
    appId: input.appId,
    keyId: input.keyId,
    timestamp,
    nonce,
    requestId,
    contentType: input.contentType,
    body: input.body ?? '',
  });
  const headers: Record<string, string> = {
    [HEADERS.appId]: input.appId,
    [HEADERS.keyId]: input.keyId,
    [HEADERS.timestamp]: timestamp,
    [HEADERS.nonce]: nonce,
    [HEADERS.requestId]: requestId,
    [HEADERS.sign]: await signBase64(signingString, key),
  };
  if (input.contentType !== undefined) headers['Content-Type'] = input.contentType;
  return headers;
}

export interface VerifyResponseInput {
  status: number;
  headers: HeadersInput;
  /** The raw response body bytes, as received; or, for a body streamed to a file (a statement), its hex SHA-256 in `bodySha256`. */
  body?: string | Uint8Array;
  bodySha256?: string;
  /** The platform's public keys by key id (PEM or KeyObject, or the Map from loadPublicKeys()). */
  platformPublicKeys: PlatformPublicKeys;
  /**
   * The X-SVC-Request-Id that was sent. When given, a signed response must echo it; this binds the
   * signed answer to this request, so a signed answer to another request cannot be substituted.
   */
  expectedRequestId?: string;
}

export type ResponseVerification = { signed: true; keyId: string } | { signed: false };

const RESPONSE_SIGNATURE_HEADERS = [HEADERS.responseSign, HEADERS.responseKeyId, HEADERS.responseTimestamp, HEADERS.responseNonce] as const;

/** Plain object of header values, names lower-cased (for error reports). */
export function headersToRecord(headers: HeadersInput): Record<string, string> {
  const out: Record<string, string> = {};
  if (typeof Headers !== 'undefined' && headers instanceof Headers) {
    headers.forEach((value, key) => {
      out[key] = value;
    });
    return out;
  }
  for (const [key, value] of Object.entries(headers as Record<string, string | readonly string[] | undefined>)) {
    if (value !== undefined) out[key.toLowerCase()] = typeof value === 'string' ? value : value.join(', ');
  }
  return out;
}

/**
 * Verifies the response signature (decisions.md section 3). Seed "Authentication" rule 4: it is
 * enforced only when the four X-SVC-Response-* headers are present; with all four absent the
 * answer is unsigned (early rejections, signing key unavailable) and `{signed: false}` is
 * returned. Only some of them present, an unknown key id, a request id other than the expected
 * one, or a bad signature throw ResponseSignatureError.
 */
export function verifyResponseSignature(input: VerifyResponseInput): ResponseVerification {
  const fail = (reason: ConstructorParameters<typeof ResponseSignatureError>[0], message: string): never => {
    throw new ResponseSignatureError(reason, message, {
      status: input.status,
      requestId: input.expectedRequestId ?? '',
      headers: headersToRecord(input.headers),
    });
  };
  const values: (string | undefined)[] = [];
  for (const name of [...RESPONSE_SIGNATURE_HEADERS, HEADERS.requestId]) {
    const found = lookupHeader(input.headers, name);
    if (!found.ok) return fail('MALFORMED_HEADER', `${name} appears more than once`);
    values.push(found.value);
  }
  const [sign, keyId, timestamp, nonce, echoedRequestId] = values;
  const present = [sign, keyId, timestamp, nonce].filter((v) => v !== undefined).length;
  if (present === 0) return { signed: false };
  if (sign === undefined || keyId === undefined || timestamp === undefined || nonce === undefined) {
    return fail('PARTIAL_HEADERS', `only ${present} of the 4 X-SVC-Response-* headers are present`);
  }
  if (echoedRequestId === undefined) return fail('MALFORMED_HEADER', 'a signed response must echo X-SVC-Request-Id');
  if (!isTimestampText(timestamp)) return fail('MALFORMED_HEADER', 'X-SVC-Response-Timestamp is not epoch seconds');
  if (input.expectedRequestId !== undefined && echoedRequestId !== input.expectedRequestId) {
    return fail(
      'REQUEST_ID_MISMATCH',
      `the response echoes request id ${JSON.stringify(echoedRequestId)}, not ${JSON.stringify(input.expectedRequestId)}`,
    );
  }
  const keys = input.platformPublicKeys instanceof Map ? input.platformPublicKeys : loadPublicKeys(input.platformPublicKeys);
  const key = keys.get(keyId);
  if (key === undefined) {
    return fail(
      'UNKNOWN_KEY_ID',
      `no platform public key with id ${JSON.stringify(keyId)}: after a platform key rotation, refresh your copy of the keys ` +
        '(PaymentClient learns them by itself from GET /api/open/v1/platform-keys; or GET /api/admin/v1/platform-keys) and check again. A POST may have run: resending it with ' +
        'the same X-SVC-Request-Id returns its answer, signed again, without running it twice',
    );
  }
  const signingString = responseSigningString({
    timestamp,
    nonce,
    requestId: echoedRequestId,
    status: input.status,
    ...(input.bodySha256 !== undefined ? { bodySha256: input.bodySha256 } : { body: input.body ?? '' }),
  });
  if (!verifyBase64(signingString, sign, key)) return fail('BAD_SIGNATURE', 'the signature does not match status, request id and body');
  return { signed: true, keyId };
}
