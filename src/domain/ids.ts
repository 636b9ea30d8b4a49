/** Prefixed, opaque, unguessable identifiers; those of the large tables lead with their minute (minutePrefix). */
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

const B32 = '0123456789abcdefghjkmnpqrstvwxyz';

function b32(bytes: number): string {
  // Crockford-like lower-case base32 of random bytes: URL-safe, case-insensitive friendly.
  const alphabet = B32;
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

/**
 * The minute of the wall clock since the Unix epoch, as 6 base32 characters (30 bits: until the
 * year 4011), in the symbols' order so that later minutes sort later. It leads the ids of the rows
 * written on the hot path (orders, attempts, trades, refunds, events, provider notices) and the
 * cashier tokens: the rows of one minute are neighbours in their primary keys and in the indexes
 * that follow them (an attempt's order, an event's order), so each insert lands in the few pages
 * that the last minute's inserts already brought into PostgreSQL's buffers, however large the
 * table, instead of in a random page of an index of millions of keys (docs/performance.md, "A year
 * of data"). A locality hint only: nothing reads it back or decides anything by it, so a clock
 * that is off only moves where the rows land; the rest of the id stays random (90 bits).
 */
function minutePrefix(): string {
  let m = Math.floor(Date.now() / 60_000);
  let out = '';
  for (let i = 0; i < 6; i++) {
    out = B32[m & 31] + out;
    m = Math.floor(m / 32);
  }
  return out;
}

/** 24 characters: the minute (6), then 18 random base32 characters (90 bits). */
function timeOrdered(): string {
  return minutePrefix() + b32(12).slice(0, 18);
}

export const newId = {
  merchant: () => `mch_${b32(10)}`,
  app: () => `svcop_${randomAlnum(16)}`,
  account: () => `sa_${b32(10)}`,
  order: () => `ord_${timeOrdered()}`,
  attempt: () => `att_${timeOrdered()}`,
  /** A provider trade of an attempt beyond its own: the provider's out_trade_no (28 characters; WeChat Pay allows 32). */
  trade: () => `trd_${timeOrdered()}`,
  /** The cashier page's handle of a JSAPI trade (128 bits): its URL names this, never the buyer's openid. */
  tradeHandle: () => random(16).toString('base64url'),
  /** WeChat's OAuth `state`: letters and digits only (WeChat's rule), 190 bits. */
  oauthState: () => randomAlnum(32),
  refund: () => `rf_${timeOrdered()}`,
  event: () => `evt_${timeOrdered()}`,
  gateway: () => `gw_${timeOrdered()}`,
  /** Cashier token: the minute it was made (6 characters, the attempts' cashier_token index stays local), then 222 random bits; no order data. */
  cashierToken: () => minutePrefix() + random(28).toString('base64url').slice(0, 37),
  nonce32: () => randomAlnum(32),
};
