/**
 * Signing strings of the merchant payment service (contract decisions.md sections 1, 3 and 7).
 * Pure functions over strings and bytes; both the server and the SDK use them, and
 * test vectors in packages/sdk/test/vectors.json pin their output.
 */
import { createHash } from 'node:crypto';

export function sha256Hex(data: string | Uint8Array): string {
  return createHash('sha256').update(data).digest('hex');
}

/** Media type only, lower-cased, parameters and surrounding blanks removed; '' when absent. */
export function normalizeContentType(value: string | undefined | null): string {
  if (value === undefined || value === null) return '';
  const semi = value.indexOf(';');
  return (semi === -1 ? value : value.slice(0, semi)).trim().toLowerCase();
}

export interface RequestSigningInput {
  method: string;
  /** Path plus query exactly as sent. */
  target: string;
  appId: string;
  keyId: string;
  timestamp: string;
  nonce: string;
  requestId: string;
  /** The Content-Type header actually sent (normalized here), or undefined when absent. */
  contentType: string | undefined;
  /** Raw body bytes (empty when there is no body). */
  body: Uint8Array | string;
}

/** decisions.md section 1: nine lines, each ending in LF. */
export function requestSigningString(i: RequestSigningInput): string {
  return (
    `${i.method.toUpperCase()}\n${i.target}\n${i.appId}\n${i.keyId}\n${i.timestamp}\n` +
    `${i.nonce}\n${i.requestId}\n${normalizeContentType(i.contentType)}\n${sha256Hex(i.body)}\n`
  );
}

export interface ResponseSigningInput {
  timestamp: string;
  nonce: string;
  requestId: string;
  status: number;
  /** The raw body bytes; or, for a body streamed (a statement file), its hex SHA-256 in `bodySha256`. */
  body?: Uint8Array | string;
  bodySha256?: string;
}

/** decisions.md section 3: five lines, each ending in LF. */
export function responseSigningString(i: ResponseSigningInput): string {
  const digest = i.bodySha256 ?? sha256Hex(i.body ?? '');
  return `${i.timestamp}\n${i.nonce}\n${i.requestId}\n${i.status}\n${digest.toLowerCase()}\n`;
}

export interface NotificationSigningInput {
  timestamp: string;
  nonce: string;
  eventId: string;
  body: Uint8Array | string;
}

/** decisions.md section 7: four lines, each ending in LF. */
export function notificationSigningString(i: NotificationSigningInput): string {
  return `${i.timestamp}\n${i.nonce}\n${i.eventId}\n${sha256Hex(i.body)}\n`;
}
