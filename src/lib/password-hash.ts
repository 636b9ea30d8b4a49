/**
 * Password hashes with node:crypto's scrypt, a memory-hard function. Parameters are OWASP's
 * Password Storage Cheat Sheet's (N=2^15, r=8, p=3: 32 MiB per hash) and are written into each
 * hash, `scrypt$N$r$p$salt$key` (base64url), so they can be raised later without invalidating the
 * hashes already stored.
 *
 * Hashing runs on threads of its own (src/lib/scrypt-worker.ts, `PASSWORD_HASH_THREADS`, one by
 * default), at the lowest priority, never on libuv's thread pool: that pool signs and verifies the
 * open API's requests, and a flood of sign-ins on it would make every signed request wait behind
 * 32 MiB hashes (docs/performance.md, "Sign-ins beside the open API"). Jobs beyond the threads wait
 * in this module's queue, in order; the sign-ins that may wait there at once are capped by the
 * caller (usecases/sessions.ts).
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { Worker } from 'node:worker_threads';
import type { ScryptJob } from './scrypt-worker.ts';

const N = 2 ** 15;
const R = 8;
const P = 3;
const KEY_BYTES = 32;
const SALT_BYTES = 16;

type Pending = { job: ScryptJob; resolve: (key: Buffer) => void; reject: (err: Error) => void; startedAt: number };

/**
 * How long a hashing thread rests after a hash that kept it busy `busyMs`, so that it is busy at
 * most `percent` of the time (`PASSWORD_HASH_BUSY_PERCENT`): a flood of sign-ins then takes at most
 * that share of a core from the open API's threads and the database, whatever its nice value.
 */
export function restAfterHash(busyMs: number, percent: number): number {
  if (percent >= 100 || !(busyMs > 0)) return 0;
  return (busyMs * (100 - percent)) / percent;
}

/** A fixed number of hashing threads and a queue in front of them. Idle threads do not keep the process alive. */
class ScryptPool {
  size: number;
  busyPercent = 100;
  readonly #idle: Worker[] = [];
  readonly #busy = new Map<Worker, Pending>();
  readonly #queue: Pending[] = [];
  readonly #live = new Set<Worker>();
  #nextId = 1;

  constructor(size: number) {
    this.size = size;
  }

  derive(password: string, salt: Buffer, n: number, r: number, p: number): Promise<Buffer> {
    return new Promise((resolve, reject) => {
      this.#queue.push({
        job: { id: this.#nextId++, password: password.normalize('NFC'), salt, keyBytes: KEY_BYTES, n, r, p },
        resolve,
        reject,
        startedAt: 0,
      });
      this.#pump();
    });
  }

  /** Hashes waiting for a thread. */
  get queued(): number {
    return this.#queue.length;
  }

  #pump(): void {
    while (this.#queue.length > 0) {
      let w = this.#idle.pop();
      if (!w && this.#live.size < this.size) w = this.#spawn();
      if (!w) return;
      const next = this.#queue.shift()!;
      next.startedAt = performance.now();
      this.#busy.set(w, next);
      w.ref();
      w.postMessage(next.job);
    }
  }

  #spawn(): Worker {
    const w = new Worker(new URL('./scrypt-worker.ts', import.meta.url));
    this.#live.add(w);
    w.on('message', (m: { id: number; key?: Uint8Array; error?: string }) => {
      const pending = this.#busy.get(w);
      this.#busy.delete(w);
      if (pending) {
        if (m.key) pending.resolve(Buffer.from(m.key));
        else pending.reject(new Error(`scrypt failed: ${m.error}`));
      }
      const rest = pending ? restAfterHash(performance.now() - pending.startedAt, this.busyPercent) : 0;
      const ready = () => {
        if (!this.#live.has(w)) return;
        w.unref();
        this.#idle.push(w);
        this.#pump();
      };
      // The thread stays referenced while it rests, so a queued hash is not dropped by an exit.
      if (rest > 0) setTimeout(ready, rest);
      else ready();
    });
    w.on('error', (err) => this.#lost(w, err));
    w.on('exit', (code) => this.#lost(w, new Error(`the hashing thread ended (${code})`)));
    return w;
  }

  /** A thread that failed or ended: its job is refused, and another thread is started when work waits. */
  #lost(w: Worker, err: Error): void {
    if (!this.#live.delete(w)) return; // 'exit' after 'error'
    const i = this.#idle.indexOf(w);
    if (i >= 0) this.#idle.splice(i, 1);
    const pending = this.#busy.get(w);
    this.#busy.delete(w);
    pending?.reject(err);
    this.#pump();
  }
}

let pool: ScryptPool | null = null;
let poolSize = 1;
let poolBusyPercent = 100;

/** The most of its time a hashing thread may be busy (`PASSWORD_HASH_BUSY_PERCENT`), set at start. */
export function setPasswordHashBusyPercent(percent: number): void {
  if (!Number.isInteger(percent) || percent < 1 || percent > 100) throw new Error('password hash busy percent must be 1 to 100');
  poolBusyPercent = percent;
  if (pool) pool.busyPercent = percent;
}

/**
 * The number of hashing threads of this process (`PASSWORD_HASH_THREADS`), set at start. Threads
 * are started as work needs them, up to this number; one already running stays.
 */
export function setPasswordHashThreads(threads: number): void {
  if (!Number.isInteger(threads) || threads < 1) throw new Error('password hash threads must be a positive integer');
  poolSize = threads;
  if (pool) pool.size = threads;
}

function derive(password: string, salt: Buffer, n: number, r: number, p: number): Promise<Buffer> {
  if (!pool) {
    pool = new ScryptPool(poolSize);
    pool.busyPercent = poolBusyPercent;
  }
  return pool.derive(password, salt, n, r, p);
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
