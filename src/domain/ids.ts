/** Prefixed, opaque, unguessable identifiers. */
import { randomBytes, randomInt } from 'node:crypto';

const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

export function randomAlnum(length: number): string {
  // Rejection-free: 62 symbols via randomInt (uniform).
  let out = '';
  for (let i = 0; i < length; i++) out += ALNUM[randomInt(62)];
  return out;
}

function b32(bytes: number): string {
  // Crockford-like lower-case base32 of random bytes: URL-safe, case-insensitive friendly.
  const alphabet = '0123456789abcdefghjkmnpqrstvwxyz';
  const buf = randomBytes(bytes);
  let bits = 0;
  let value = 0;
  let out = '';
  for (const byte of buf) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += alphabet[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += alphabet[(value << (5 - bits)) & 31];
  return out;
}

export const newId = {
  merchant: () => `mch_${b32(10)}`,
  app: () => `svcop_${randomAlnum(16)}`,
  account: () => `sa_${b32(10)}`,
  order: () => `ord_${b32(15)}`,
  attempt: () => `att_${b32(15)}`,
  refund: () => `rf_${b32(15)}`,
  event: () => `evt_${b32(15)}`,
  gateway: () => `gw_${b32(15)}`,
  /** Cashier token: 256 bits, not derived from any order data. */
  cashierToken: () => randomBytes(32).toString('base64url'),
  nonce32: () => randomAlnum(32),
};
