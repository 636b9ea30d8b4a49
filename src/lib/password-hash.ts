/**
 * Password hashes with node:crypto's scrypt, a memory-hard function. Parameters are OWASP's
 * Password Storage Cheat Sheet's (N=2^15, r=8, p=3: 32 MiB and ~0.3 s here per hash) and are
 * written into each hash, `scrypt$N$r$p$salt$key` (base64url), so they can be raised later
 * without invalidating the hashes already stored.
 */
import { randomBytes, scrypt, timingSafeEqual } from 'node:crypto';

const N = 2 ** 15;
const R = 8;
const P = 3;
const KEY_BYTES = 32;
const SALT_BYTES = 16;

function derive(password: string, salt: Buffer, n: number, r: number, p: number): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    scrypt(password.normalize('NFC'), salt, KEY_BYTES, { N: n, r, p, maxmem: 256 * n * r + 1024 * 1024 }, (err, key) =>
      err ? reject(err) : resolve(key),
    ),
  );
}

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(SALT_BYTES);
  const key = await derive(password, salt, N, R, P);
  return `scrypt$${N}$${R}$${P}$${salt.toString('base64url')}$${key.toString('base64url')}`;
}

/** True when `password` matches `stored`; false for a wrong password or a hash this module did not write. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const m = /^scrypt\$(\d+)\$(\d+)\$(\d+)\$([A-Za-z0-9_-]+)\$([A-Za-z0-9_-]+)$/.exec(stored);
  if (!m) return false;
  const [n, r, p] = [Number(m[1]), Number(m[2]), Number(m[3])];
  // Parameters outside what this module writes are refused rather than computed (a stored hash with a huge N would hang a sign-in).
  if (n < 2 ** 14 || n > 2 ** 20 || r < 1 || r > 16 || p < 1 || p > 16) return false;
  const expected = Buffer.from(m[5]!, 'base64url');
  const key = await derive(password, Buffer.from(m[4]!, 'base64url'), n, r, p);
  return key.length === expected.length && timingSafeEqual(key, expected);
}

/**
 * A hash of no one's password, verified when the name signing in does not exist, so that an
 * unknown name takes as long to refuse as a wrong password.
 */
let dummy: Promise<string> | null = null;
export function dummyHash(): Promise<string> {
  dummy ??= hashPassword(randomBytes(16).toString('base64url'));
  return dummy;
}
