/**
 * App and merchant-key lookups for authentication, with parsed public keys cached (parsing a PEM
 * costs as much as a verification). Entries live a few seconds so changes made on another
 * instance take effect quickly; changes made through this instance's admin API invalidate at once.
 */
import { type KeyObject, createPublicKey } from 'node:crypto';
import type { Clock } from '../domain/clock.ts';
import type { Db } from '../store/db.ts';
import { type AppRow, getApp, getAppKey, getMerchant } from '../store/merchants.ts';

export interface AuthApp {
  app: AppRow;
  merchantEntityType: 'INDIVIDUAL' | 'CORPORATE';
}

interface Entry<T> {
  value: T;
  expires: number;
}

const TTL_MS = 3000;
const MAX_ENTRIES = 10_000;

/** A merchant key as the gate checks it: parsed, with the end of its validity (epoch ms, or null). */
export interface AuthKey {
  key: KeyObject;
  validUntilMs: number | null;
}

export class AuthCache {
  readonly #db: Db;
  readonly #clock: Clock;
  readonly #apps = new Map<string, Entry<AuthApp | null>>();
  readonly #keys = new Map<string, Entry<AuthKey>>();

  constructor(db: Db, clock: Clock) {
    this.#db = db;
    this.#clock = clock;
  }

  /**
   * Concurrent misses of one entry share one load (an entry's expiry under load would otherwise
   * send every request in flight to the database at once). A load started before an
   * invalidation is not kept.
   */
  readonly #loads = new Map<string, Promise<unknown>>();
  #generation = 0;

  #shared<T>(k: string, load: () => Promise<T>, keep: (value: T) => void): Promise<T> {
    const inFlight = this.#loads.get(k) as Promise<T> | undefined;
    if (inFlight) return inFlight;
    const generation = this.#generation;
    const p = load().then((value) => {
      if (generation === this.#generation) keep(value);
      return value;
    });
    const done = () => {
      if (this.#loads.get(k) === p) this.#loads.delete(k);
    };
    p.then(done, done);
    this.#loads.set(k, p);
    return p;
  }

  async app(appId: string): Promise<AuthApp | null> {
    const hit = this.#apps.get(appId);
    if (hit && hit.expires > this.#clock.now()) return hit.value;
    return this.#shared(
      `a\u0000${appId}`,
      async () => {
        const app = await getApp(this.#db, appId);
        const merchant = app ? await getMerchant(this.#db, app.merchantId) : null;
        return app && merchant ? { app, merchantEntityType: merchant.entityType } : null;
      },
      (value) => this.#put(this.#apps, appId, value),
    );
  }

  /**
   * The active public key registered for (appId, keyId) with the end of its validity, or null. A
   * key that is not there is not remembered: a key just added (on any instance) is accepted at once,
   * so a rotation never refuses a request signed with a key that is valid.
   */
  async key(appId: string, keyId: string): Promise<AuthKey | null> {
    const k = `${appId}\u0000${keyId}`;
    const hit = this.#keys.get(k);
    if (hit && hit.expires > this.#clock.now()) return hit.value;
    return this.#shared(
      `k\u0000${k}`,
      async () => {
        const row = await getAppKey(this.#db, appId, keyId);
        if (!row || row.status !== 'ACTIVE') return null;
        try {
          return { key: createPublicKey(row.publicKeyPem), validUntilMs: row.validUntil?.getTime() ?? null };
        } catch {
          return null;
        }
      },
      (value) => {
        if (value) this.#put(this.#keys, k, value);
      },
    );
  }

  invalidateApp(appId: string): void {
    this.#generation++;
    this.#loads.clear();
    this.#apps.delete(appId);
    for (const k of this.#keys.keys()) if (k.startsWith(`${appId}\u0000`)) this.#keys.delete(k);
  }

  #put<T>(m: Map<string, Entry<T>>, k: string, value: T): void {
    if (m.size >= MAX_ENTRIES) m.delete(m.keys().next().value as string);
    m.set(k, { value, expires: this.#clock.now() + TTL_MS });
  }
}
