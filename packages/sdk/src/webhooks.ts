/**
 * Event notifications (decisions.md section 7): verification on the merchant's receiver, and a
 * generator of validly signed test notifications for the merchant's own tests.
 */
import { HEADERS, KEY_ID_PATTERN } from './auth.ts';
import { NotificationVerificationError } from './errors.ts';
import {
  type HeadersInput,
  isTimestampText,
  lookupHeader,
  randomAlphanumeric,
  signBase64Sync,
  toTimestampText,
  verifyBase64,
} from './internal.ts';
import { type KeyInput, loadPrivateKey, loadPublicKeys, type PlatformPublicKeys } from './keys.ts';
import { notificationSigningString } from './signing.ts';
import type { WebhookEventPayload } from './types.ts';

export const DEFAULT_NOTIFICATION_TOLERANCE_SECONDS = 300;
const VISIBLE_ASCII = /^[!-~]{1,128}$/;

export interface VerifyNotificationInput {
  /** The request headers as received (Node's req.headers, a plain object, or fetch Headers). */
  headers: HeadersInput;
  /** The raw body bytes exactly as received; do not parse and re-serialize before verifying. */
  rawBody: string | Uint8Array;
  /** The platform's public keys by key id (PEM or KeyObject, or the Map from loadPublicKeys()). */
  platformPublicKeys: PlatformPublicKeys;
  /** Largest accepted |now - X-SVC-Notify-Timestamp|, in seconds (300 by default). */
  toleranceSeconds?: number;
  /** Clock in epoch milliseconds (Date.now by default). */
  now?: () => number;
}

const NOTIFY_HEADERS = [HEADERS.eventId, HEADERS.notifyTimestamp, HEADERS.notifyNonce, HEADERS.notifyKeyId, HEADERS.notifySign] as const;

/**
 * Verifies an event notification and returns its parsed payload, or throws
 * NotificationVerificationError (answer the platform with a non-2xx then; it will retry).
 * De-duplicating by eventId and ordering by stateVersion remain the receiver's job.
 */
export function verifyNotification(input: VerifyNotificationInput): WebhookEventPayload {
  const tolerance = input.toleranceSeconds ?? DEFAULT_NOTIFICATION_TOLERANCE_SECONDS;
  if (!(tolerance >= 0)) throw new RangeError('toleranceSeconds must be a non-negative number');
  const values: string[] = [];
  for (const name of NOTIFY_HEADERS) {
    const found = lookupHeader(input.headers, name);
    if (!found.ok) throw new NotificationVerificationError('DUPLICATE_HEADER', `${name} appears more than once`);
    if (found.value === undefined || found.value === '') throw new NotificationVerificationError('MISSING_HEADER', `${name} is missing`);
    values.push(found.value);
  }
  const [eventId, timestamp, nonce, keyId, sign] = values as [string, string, string, string, string];
  if (!isTimestampText(timestamp))
    throw new NotificationVerificationError('MALFORMED_HEADER', `${HEADERS.notifyTimestamp} is not epoch seconds`);
  // Section 7 does not pin the nonce's form; only visible ASCII keeps the signing string's lines intact.
  if (!VISIBLE_ASCII.test(nonce) || !VISIBLE_ASCII.test(eventId)) {
    throw new NotificationVerificationError(
      'MALFORMED_HEADER',
      `${HEADERS.notifyNonce} and ${HEADERS.eventId} must be 1-128 visible ASCII characters`,
    );
  }

  const keys = input.platformPublicKeys instanceof Map ? input.platformPublicKeys : loadPublicKeys(input.platformPublicKeys);
  const key = keys.get(keyId);
  if (key === undefined)
    throw new NotificationVerificationError(
      'UNKNOWN_KEY_ID',
      `no platform public key with id ${JSON.stringify(keyId)}: after a platform key rotation, refresh your copy of the keys ` +
        '(PaymentClient learns them by itself from GET /api/open/v1/platform-keys; or GET /api/admin/v1/platform-keys); answer non-2xx meanwhile and the notification is retried',
    );

  // Signature first: the timestamp is only worth comparing once it is known to be the platform's.
  const signingString = notificationSigningString({ timestamp, nonce, eventId, body: input.rawBody });
  if (!verifyBase64(signingString, sign, key)) throw new NotificationVerificationError('BAD_SIGNATURE', 'the signature does not match');

  const skew = Math.abs(Math.floor((input.now ?? Date.now)() / 1000) - Number(timestamp));
  if (skew > tolerance) {
    throw new NotificationVerificationError(
      'TIMESTAMP_OUT_OF_TOLERANCE',
      `timestamp is ${skew} s away from now (tolerance ${tolerance} s)`,
    );
  }

  let payload: unknown;
  try {
    payload = JSON.parse(typeof input.rawBody === 'string' ? input.rawBody : Buffer.from(input.rawBody).toString('utf8'));
  } catch {
    throw new NotificationVerificationError('BODY_NOT_JSON', 'the body is not valid JSON');
  }
  if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) {
    throw new NotificationVerificationError('BODY_NOT_JSON', 'the body is not a JSON object');
  }
  if ((payload as { eventId?: unknown }).eventId !== eventId) {
    throw new NotificationVerificationError('EVENT_ID_MISMATCH', `the body's eventId differs from ${HEADERS.eventId}`);
  }
  return payload as WebhookEventPayload;
}

export interface GenerateTestNotificationInput {
  /** The payload to send; serialized with JSON.stringify. Give this or rawBody. */
  payload?: WebhookEventPayload | Record<string, unknown>;
  /** The exact body to send. Give this or payload. */
  rawBody?: string | Uint8Array;
  /** X-SVC-Event-Id; the body's eventId by default. */
  eventId?: string;
  keyId: string;
  /** The (test) platform private key that signs: PEM or KeyObject. */
  privateKeyPem: KeyInput;
  /** Epoch seconds; now by default. */
  timestamp?: number | string;
  /** 32 random A-Za-z0-9 characters by default. */
  nonce?: string;
  /** Clock in epoch milliseconds (Date.now by default). */
  now?: () => number;
}

export interface TestNotification {
  /** Content-Type plus the five X-SVC-Event-Id / X-SVC-Notify-* headers. */
  headers: Record<string, string>;
  /** The body the headers were computed over; send exactly these bytes. */
  rawBody: string | Uint8Array;
}

/**
 * Builds a notification signed like the platform's, so a merchant can test its receiver with a
 * test key pair (register the test public key in the receiver's platformPublicKeys).
 */
export function generateTestNotificationHeaders(input: GenerateTestNotificationInput): TestNotification {
  if ((input.payload === undefined) === (input.rawBody === undefined)) throw new TypeError('give exactly one of payload and rawBody');
  const rawBody = input.rawBody ?? JSON.stringify(input.payload);
  let eventId = input.eventId;
  if (eventId === undefined) {
    let parsed: unknown;
    try {
      parsed = input.payload ?? JSON.parse(typeof rawBody === 'string' ? rawBody : Buffer.from(rawBody).toString('utf8'));
    } catch {
      parsed = undefined;
    }
    const fromBody = (parsed as { eventId?: unknown } | undefined)?.eventId;
    if (typeof fromBody !== 'string') throw new TypeError('eventId is required when the body has no string eventId');
    eventId = fromBody;
  }
  if (!KEY_ID_PATTERN.test(input.keyId)) throw new TypeError('keyId must be 1-128 visible ASCII characters');
  const timestamp = toTimestampText(input.timestamp, input.now ?? Date.now);
  const nonce = input.nonce ?? randomAlphanumeric(32);
  const signingString = notificationSigningString({ timestamp, nonce, eventId, body: rawBody });
  return {
    headers: {
      'Content-Type': 'application/json',
      [HEADERS.eventId]: eventId,
      [HEADERS.notifyTimestamp]: timestamp,
      [HEADERS.notifyNonce]: nonce,
      [HEADERS.notifyKeyId]: input.keyId,
      [HEADERS.notifySign]: signBase64Sync(signingString, loadPrivateKey(input.privateKeyPem)),
    },
    rawBody,
  };
}
