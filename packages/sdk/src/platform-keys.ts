/**
 * The platform's public keys as the SDK keeps them up to date by itself (the platform-keys read,
 * GET /api/open/v1/platform-keys), in the spirit of WeChat Pay's certificate download: the first
 * key is pinned (from the portal or the docs), and a key learnt later is trusted only when
 *
 *  1. it is endorsed by a key already trusted (each published key after the first carries the
 *     signature of the key published before it, over keyEndorsementSigningString), link by link,
 *     so a client that was away across several rotations catches up; and
 *  2. the answer that lists it carries a valid response signature, by a key trusted after step 1,
 *     for the request this client sent (an unsigned or foreign answer teaches nothing).
 *
 * A key already trusted is never replaced by a listing: a listing that gives another public key
 * under a trusted id is ignored for that id.
 */
import type { KeyObject } from 'node:crypto';
import type { PlatformKeysResponse } from './api-types.ts';
import { verifyBase64 } from './internal.ts';
import { loadPublicKey } from './keys.ts';
import { keyEndorsementSigningString } from './signing.ts';

/** The body of GET /api/open/v1/platform-keys (generated from the served schema, ./api-types.ts). */
export type { PlatformKeysResponse };

/** One key of the platform-keys read. */
export type PlatformKeyEntry = PlatformKeysResponse['keys'][number];

/** Whether a value has the shape of the platform-keys read (checked before anything in it is used). */
export function isPlatformKeysResponse(v: unknown): v is PlatformKeysResponse {
  const b = v as PlatformKeysResponse | null;
  if (typeof b !== 'object' || b === null || !Array.isArray(b.keys)) return false;
  return b.keys.every(
    (k) =>
      typeof k === 'object' &&
      k !== null &&
      typeof k.keyId === 'string' &&
      k.keyId !== '' &&
      typeof k.publicKeyPem === 'string' &&
      (k.endorsement === null ||
        (typeof k.endorsement === 'object' && typeof k.endorsement.keyId === 'string' && typeof k.endorsement.signature === 'string')),
  );
}

/**
 * The trusted keys extended by the listing's endorsements (step 1 above): a new map, the trusted
 * keys unchanged, plus every listed key whose endorsement verifies with a key trusted by then.
 */
export function extendTrust(trusted: ReadonlyMap<string, KeyObject>, listing: PlatformKeysResponse): Map<string, KeyObject> {
  const out = new Map(trusted);
  // In the order published; a pass per link in case a listing is not in order.
  for (let pass = 0; pass < listing.keys.length; pass++) {
    let learnt = false;
    for (const k of listing.keys) {
      if (out.has(k.keyId) || k.endorsement === null) continue;
      const by = out.get(k.endorsement.keyId);
      if (by === undefined) continue;
      let key: KeyObject;
      let text: string;
      try {
        key = loadPublicKey(k.publicKeyPem);
        text = keyEndorsementSigningString({ keyId: k.keyId, publicKeyPem: k.publicKeyPem });
      } catch {
        continue; // not a usable RSA public key: not trusted
      }
      if (!verifyBase64(text, k.endorsement.signature, by)) continue;
      out.set(k.keyId, key);
      learnt = true;
    }
    if (!learnt) break;
  }
  return out;
}

/** PEM text of KeyObjects, by key id (to keep the trusted keys across restarts). */
export function keysAsPem(keys: ReadonlyMap<string, KeyObject>): Record<string, string> {
  return Object.fromEntries([...keys].map(([id, k]) => [id, k.export({ type: 'spki', format: 'pem' }).toString()]));
}
