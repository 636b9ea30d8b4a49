/**
 * Signature of an event notification (decisions.md section 7): four lines — timestamp, nonce,
 * event id, lower-case hex SHA-256 of the body — each ending in LF, RSA-SHA256 with the platform
 * key, standard Base64. The body given here must be the exact bytes that are sent.
 */
import { notificationSigningString } from '@mps/sdk/signing';
import { newId } from '../domain/ids.ts';
import type { PlatformKeyRing } from '../platform/keys.ts';

export interface NotificationHeaders {
  'Content-Type': 'application/json';
  'X-SVC-Event-Id': string;
  'X-SVC-Notify-Timestamp': string;
  'X-SVC-Notify-Nonce': string;
  'X-SVC-Notify-Key-Id': string;
  'X-SVC-Notify-Sign': string;
}

/** Rejects with SigningKeyUnavailableError when the platform key cannot sign. */
export async function signNotification(
  keys: PlatformKeyRing,
  eventId: string,
  body: Uint8Array,
  nowMs: number,
): Promise<NotificationHeaders> {
  const timestamp = String(Math.floor(nowMs / 1000));
  const nonce = newId.nonce32();
  const { keyId, signature } = await keys.sign(notificationSigningString({ timestamp, nonce, eventId, body }));
  return {
    'Content-Type': 'application/json',
    'X-SVC-Event-Id': eventId,
    'X-SVC-Notify-Timestamp': timestamp,
    'X-SVC-Notify-Nonce': nonce,
    'X-SVC-Notify-Key-Id': keyId,
    'X-SVC-Notify-Sign': signature,
  };
}
