/**
 * Signing strings of the merchant payment service (contract decisions.md sections 1, 3 and 7).
 * Pure functions over strings and bytes; both the server and the SDK use them, and
 * test vectors in packages/sdk/test/vectors.json pin their output.
 */
import { createHash, createPublicKey } from 'node:crypto';

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

export interface KeyEndorsementInput {
  /** The endorsed platform key's id. */
  keyId: string;
  /** Its public key, as the SPKI PEM published (the DER inside is what is hashed). */
  publicKeyPem: string;
}

/**
 * The platform-keys read (GET /api/open/v1/platform-keys, docs/authentication.md): each published
 * key after the first is endorsed by the key published before it, with this string signed
 * (RSASSA-PKCS1-v1_5 / SHA-256): three lines, each ending in LF: a fixed label, the key id, the
 * lower-case hex SHA-256 of the key's SPKI DER. A holder of any earlier key verifies the later
 * ones link by link.
 */
export function keyEndorsementSigningString(i: KeyEndorsementInput): string {
  const der = createPublicKey(i.publicKeyPem).export({ type: 'spki', format: 'der' });
  return `mps-platform-key-endorsement/v1\n${i.keyId}\n${sha256Hex(der)}\n`;
}
