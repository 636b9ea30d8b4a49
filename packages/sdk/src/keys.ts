/**
 * RSA keys of the merchant (request signing) and of the platform (response and notification
 * signatures). decisions.md section 1: RSA keys of 2048 to 4096 bits are accepted.
 *
 * PEMs are parsed once into KeyObjects: signing with a cached KeyObject is about twice as fast as
 * parsing the PEM on every call.
 */
import { createPrivateKey, createPublicKey, generateKeyPair, type KeyObject } from 'node:crypto';
import { promisify } from 'node:util';

export const MIN_RSA_BITS = 2048;
export const MAX_RSA_BITS = 4096;
export const DEFAULT_RSA_BITS = 2048;

/** A PEM text or an already parsed KeyObject. */
export type KeyInput = string | KeyObject;

export interface RsaKeyPairPem {
  /** SPKI ("BEGIN PUBLIC KEY"): register this one with the platform back office. */
  publicKeyPem: string;
  /** PKCS#8 ("BEGIN PRIVATE KEY"): keep it secret, it signs your requests. */
  privateKeyPem: string;
}

const generateKeyPairAsync = promisify(generateKeyPair);

function checkBits(bits: number): void {
  if (!Number.isInteger(bits) || bits < MIN_RSA_BITS || bits > MAX_RSA_BITS || bits % 8 !== 0) {
    throw new RangeError(`RSA key size must be a multiple of 8 from ${MIN_RSA_BITS} to ${MAX_RSA_BITS} bits, got ${bits}`);
  }
}

/** Generates an RSA key pair (2048 bits by default) as PEM: SPKI public key, PKCS#8 private key. */
export async function generateRsaKeyPair(options: { bits?: number } = {}): Promise<RsaKeyPairPem> {
  const bits = options.bits ?? DEFAULT_RSA_BITS;
  checkBits(bits);
  const { publicKey, privateKey } = await generateKeyPairAsync('rsa', {
    modulusLength: bits,
    publicExponent: 0x10001,
    publicKeyEncoding: { type: 'spki', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
  return { publicKeyPem: publicKey, privateKeyPem: privateKey };
}

function checkRsa(key: KeyObject, what: string): KeyObject {
  if (key.asymmetricKeyType !== 'rsa') {
    throw new TypeError(`${what} must be an RSA key, got ${key.asymmetricKeyType ?? key.type}`);
  }
  const bits = key.asymmetricKeyDetails?.modulusLength;
  if (bits === undefined || bits < MIN_RSA_BITS || bits > MAX_RSA_BITS) {
    throw new RangeError(`${what} must have ${MIN_RSA_BITS} to ${MAX_RSA_BITS} bits, got ${bits}`);
  }
  return key;
}

/** Parses (once) and checks an RSA private key: PKCS#8 or PKCS#1 PEM, or a KeyObject. */
export function loadPrivateKey(key: KeyInput): KeyObject {
  if (typeof key !== 'string') {
    if (key.type !== 'private') throw new TypeError('the merchant signing key must be a private key');
    return checkRsa(key, 'the merchant signing key');
  }
  let parsed: KeyObject;
  try {
    parsed = createPrivateKey(key);
  } catch (err) {
    // Not a PEM private key (e.g. the public key given by mistake): a wrong argument, like the others.
    throw new TypeError(`the merchant signing key is not a PEM private key (${(err as Error).message})`, { cause: err });
  }
  return checkRsa(parsed, 'the merchant signing key');
}

/** Parses (once) and checks an RSA public key: SPKI or PKCS#1 PEM, or a KeyObject. */
export function loadPublicKey(key: KeyInput): KeyObject {
  if (typeof key !== 'string') {
    if (key.type !== 'public') throw new TypeError('a verification key must be a public key');
    return checkRsa(key, 'a verification key');
  }
  // createPublicKey would derive the public half of a private key: a private key given here is a
  // mistake (a platform key is always public), refused rather than used.
  if (key.includes('PRIVATE KEY-----')) throw new TypeError('a verification key must be a public key, not a private key');
  let parsed: KeyObject;
  try {
    parsed = createPublicKey(key);
  } catch (err) {
    throw new TypeError(`a verification key is not a PEM public key (${(err as Error).message})`, { cause: err });
  }
  return checkRsa(parsed, 'a verification key');
}

/** Platform public keys by key id, as given by the caller or already loaded. */
export type PlatformPublicKeys = Readonly<Record<string, KeyInput>> | ReadonlyMap<string, KeyObject>;

/** Parses every platform public key once; the result is what the verifiers use. */
export function loadPublicKeys(keys: PlatformPublicKeys): ReadonlyMap<string, KeyObject> {
  const out = new Map<string, KeyObject>();
  const entries = keys instanceof Map ? keys.entries() : Object.entries(keys);
  for (const [keyId, key] of entries) {
    if (keyId.length === 0) throw new TypeError('a platform key id must not be empty');
    out.set(keyId, loadPublicKey(key));
  }
  return out;
}

/**
 * Reads the platform key list exactly as the back office returns it
 * (GET /api/admin/v1/platform-keys -> {"keys": [{"keyId", "publicKeyPem"}]}).
 */
export function parsePlatformKeysJson(text: string): Record<string, string> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new TypeError(`platform keys file is not JSON: ${(err as Error).message}`, { cause: err });
  }
  const list = (parsed as { keys?: unknown } | null)?.keys;
  if (!Array.isArray(list)) throw new TypeError('platform keys file must look like {"keys": [{"keyId": "...", "publicKeyPem": "..."}]}');
  const out: Record<string, string> = {};
  for (const entry of list as unknown[]) {
    const { keyId, publicKeyPem } = (entry ?? {}) as { keyId?: unknown; publicKeyPem?: unknown };
    if (typeof keyId !== 'string' || keyId === '' || typeof publicKeyPem !== 'string') {
      throw new TypeError('each platform key needs a non-empty string keyId and a string publicKeyPem');
    }
    out[keyId] = publicKeyPem;
  }
  return out;
}
