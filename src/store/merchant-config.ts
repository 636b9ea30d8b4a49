/**
 * A merchant's receiving configuration (allocation, settlement accounts, fee rule), read on every
 * create order. Cached a few seconds; this instance's admin writes clear it at once, other
 * instances see a change within TTL_MS.
 */
import type { Clock } from '../domain/clock.ts';
import { type Allocation, type FeeRule, type ReceivingAccount } from '../domain/money.ts';
import type { Db } from './db.ts';
import { getAllocation, getFeeRule, listAccounts } from './merchants.ts';

export interface MerchantConfig {
  allocation: Allocation | null;
  accounts: ReadonlyMap<string, ReceivingAccount>;
  feeRule: FeeRule | null;
}

const TTL_MS = 3000;
const MAX_ENTRIES = 10_000;

export class MerchantConfigCache {
  readonly #db: Db;
  readonly #clock: Clock;
  readonly #entries = new Map<string, { value: Promise<MerchantConfig>; expires: number }>();

  constructor(db: Db, clock: Clock) {
    this.#db = db;
    this.#clock = clock;
  }

  get(merchantId: string): Promise<MerchantConfig> {
    const hit = this.#entries.get(merchantId);
    if (hit && hit.expires > this.#clock.now()) return hit.value;
    const value = this.#load(merchantId);
    if (this.#entries.size >= MAX_ENTRIES) this.#entries.delete(this.#entries.keys().next().value as string);
    this.#entries.set(merchantId, { value, expires: this.#clock.now() + TTL_MS });
    value.catch(() => this.#entries.delete(merchantId));
    return value;
  }

  invalidate(merchantId: string): void {
    this.#entries.delete(merchantId);
  }

  async #load(merchantId: string): Promise<MerchantConfig> {
    const [allocation, accounts, feeRule] = await Promise.all([
      getAllocation(this.#db, merchantId),
      listAccounts(this.#db, merchantId),
      getFeeRule(this.#db, merchantId),
    ]);
    return {
      allocation,
      accounts: new Map(
        accounts.map((a) => [a.accountId, { accountId: a.accountId, entityType: a.entityType, agreedCeilingFen: a.agreedCeilingFen }]),
      ),
      feeRule,
    };
  }
}
