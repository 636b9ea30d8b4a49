/** The platform source-IP policy in force: environment defaults, overridable from the back office. */
import type { Clock } from '../domain/clock.ts';
import { DomainError } from '../domain/errors.ts';
import type { IpPolicyView } from '../domain/ip-policy.ts';
import { CidrList } from '../net/ip.ts';
import type { SourceIpPolicy } from '../net/source-ip.ts';
import type { Db, Tx } from '../store/db.ts';
import { getSetting, updateSetting } from '../store/settings.ts';

function compile(v: IpPolicyView): SourceIpPolicy {
  return {
    trustedProxies: CidrList.parse(v.trustedProxies),
    allowlist: v.allowlist === null ? null : CidrList.parse(v.allowlist),
    denylist: CidrList.parse(v.denylist),
    allowIpv4: v.allowIpv4,
    allowIpv6: v.allowIpv6,
  };
}

const REFRESH_MS = 5000;

export class IpPolicyHolder {
  readonly #db: Db;
  readonly #clock: Clock;
  #view: IpPolicyView;
  #policy: SourceIpPolicy;
  readonly #defaults: IpPolicyView;
  #loadedAt = 0;
  /** The refresh in flight, shared by every request that finds the policy due (one query, not one per request). */
  #refreshing: Promise<void> | null = null;

  constructor(db: Db, clock: Clock, defaults: IpPolicyView) {
    this.#db = db;
    this.#clock = clock;
    this.#defaults = defaults;
    this.#view = defaults;
    this.#policy = compile(defaults);
  }

  /** The policy for a request; re-read from the database every few seconds (other instances' changes). */
  async current(): Promise<SourceIpPolicy> {
    if (this.#clock.now() - this.#loadedAt > REFRESH_MS) {
      this.#refreshing ??= this.refresh().finally(() => {
        this.#refreshing = null;
      });
      await this.#refreshing;
    }
    return this.#policy;
  }

  async refresh(): Promise<void> {
    const stored = (await getSetting<Partial<IpPolicyView>>(this.#db, 'ip_policy')) ?? {};
    const view = { ...this.#defaults, ...stored };
    this.#policy = compile(view);
    this.#view = view;
    this.#loadedAt = this.#clock.now();
  }

  view(): IpPolicyView {
    return this.#view;
  }

  /**
   * Applies a partial change to the stored policy. Read, merge and write are one transaction with
   * the row locked, so concurrent changes of different fields all land (none overwrites another
   * with the value it read before). A merged policy that does not compile changes nothing.
   */
  async update(
    patch: { [K in keyof IpPolicyView]?: IpPolicyView[K] | undefined },
    /** Runs in the change's transaction with the policy in force before and after (the back office's audit entry). */
    after?: (tx: Tx, before: IpPolicyView, next: IpPolicyView) => Promise<void>,
  ): Promise<void> {
    await updateSetting<Partial<IpPolicyView>>(
      this.#db,
      'ip_policy',
      new Date(this.#clock.now()),
      (stored) => {
        const next: Partial<IpPolicyView> = { ...(stored ?? {}) };
        for (const [k, v] of Object.entries(patch)) if (v !== undefined) (next as Record<string, unknown>)[k] = v;
        const merged = { ...this.#defaults, ...next };
        if (!merged.allowIpv4 && !merged.allowIpv6) {
          throw new DomainError('VALIDATION_FAILED', 'allowIpv4 and allowIpv6 cannot both be false: every source would be refused');
        }
        compile(merged);
        return next;
      },
      after && ((tx, stored, next) => after(tx, { ...this.#defaults, ...(stored ?? {}) }, { ...this.#defaults, ...next })),
    );
    await this.refresh();
  }
}
