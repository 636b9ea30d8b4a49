/** Prefixed, opaque, unguessable identifiers. */
import { randomBytes } from 'node:crypto';

const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/**
 * Random bytes drawn from one pooled buffer of node:crypto's CSPRNG output, refilled 4 KiB at a
 * time: each byte is used once. A create order draws ~100 random bytes in five pieces (order and
 * attempt ids, cashier token, response nonce); one native call per 40 requests instead of one per
 * piece (and 32 randomInt calls per response nonce) is what node:crypto's own randomUUID does too.
 */
const POOL_BYTES = 4096;
let pool = Buffer.alloc(0);
let poolAt = 0;
function random(n: number): Buffer {
  if (poolAt + n > pool.length) {
    pool = randomBytes(Math.max(POOL_BYTES, n));
    poolAt = 0;
  }
  const b = pool.subarray(poolAt, poolAt + n);
  poolAt += n;
  return b;
}

export function randomAlnum(length: number): string {
  // Uniform over 62 symbols: bytes of 248 and above (248 = 4 x 62) are rejected.
  let out = '';
  while (out.length < length) {
    for (const byte of random(length - out.length)) {
      if (byte < 248) out += ALNUM[byte % 62];
    }
  }
  return out;
}

function b32(bytes: number): string {
  // Crockford-like lower-case base32 of random bytes: URL-safe, case-insensitive friendly.
  const alphabet = '0123456789abcdefghjkmnpqrstvwxyz';
  const buf = random(bytes);
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
  /** A provider trade of an attempt beyond its own: the provider's out_trade_no (28 characters; WeChat Pay allows 32). */
  trade: () => `trd_${b32(15)}`,
  /** The cashier page's handle of a JSAPI trade (128 bits): its URL names this, never the buyer's openid. */
  tradeHandle: () => random(16).toString('base64url'),
  /** WeChat's OAuth `state`: letters and digits only (WeChat's rule), 190 bits. */
  oauthState: () => randomAlnum(32),
  refund: () => `rf_${b32(15)}`,
  event: () => `evt_${b32(15)}`,
  gateway: () => `gw_${b32(15)}`,
  /** Cashier token: 256 bits, not derived from any order data. */
  cashierToken: () => random(32).toString('base64url'),
  nonce32: () => randomAlnum(32),
};
