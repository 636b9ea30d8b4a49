/** The platform source-IP policy in force: environment defaults, overridable from the back office. */
import { AdminError } from '../domain/errors.ts';
import { CidrList } from '../net/ip.ts';
import type { SourceIpPolicy } from '../net/source-ip.ts';
import { type Db, withTx } from '../store/db.ts';

export interface IpPolicyView {
  trustedProxies: string[];
  allowlist: string[] | null;
  denylist: string[];
  allowIpv4: boolean;
  allowIpv6: boolean;
}

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
  #view: IpPolicyView;
  #policy: SourceIpPolicy;
  readonly #defaults: IpPolicyView;
  #loadedAt = 0;
  /** The refresh in flight, shared by every request that finds the policy due (one query, not one per request). */
  #refreshing: Promise<void> | null = null;

  constructor(db: Db, defaults: IpPolicyView) {
    this.#db = db;
    this.#defaults = defaults;
    this.#view = defaults;
    this.#policy = compile(defaults);
  }

  /** The policy for a request; re-read from the database every few seconds (other instances' changes). */
  async current(): Promise<SourceIpPolicy> {
    if (Date.now() - this.#loadedAt > REFRESH_MS) {
      this.#refreshing ??= this.refresh().finally(() => {
        this.#refreshing = null;
      });
      await this.#refreshing;
    }
    return this.#policy;
  }

  async refresh(): Promise<void> {
    const r = await this.#db.query<{ value: Partial<IpPolicyView> }>(`SELECT value FROM platform_settings WHERE name = 'ip_policy'`);
    const stored = r.rows[0]?.value ?? {};
    const view = { ...this.#defaults, ...stored };
    this.#policy = compile(view);
    this.#view = view;
    this.#loadedAt = Date.now();
  }

  view(): IpPolicyView {
    return this.#view;
  }

  /**
   * Applies a partial change to the stored policy. Read, merge and write are one transaction with
   * the row locked, so concurrent changes of different fields all land (none overwrites another
   * with the value it read before). A merged policy that does not compile changes nothing.
   */
  async update(patch: { [K in keyof IpPolicyView]?: IpPolicyView[K] | undefined }): Promise<void> {
    await withTx(this.#db, async (tx) => {
      await tx.query(`INSERT INTO platform_settings(name, value) VALUES ('ip_policy', '{}'::jsonb) ON CONFLICT (name) DO NOTHING`);
      const r = await tx.query<{ value: Partial<IpPolicyView> }>(`SELECT value FROM platform_settings WHERE name = 'ip_policy' FOR UPDATE`);
      const next: Partial<IpPolicyView> = { ...(r.rows[0]?.value ?? {}) };
      for (const [k, v] of Object.entries(patch)) if (v !== undefined) (next as Record<string, unknown>)[k] = v;
      const merged = { ...this.#defaults, ...next };
      if (!merged.allowIpv4 && !merged.allowIpv6) {
        throw new AdminError('ADMIN_VALIDATION_FAILED', 'allowIpv4 and allowIpv6 cannot both be false: every source would be refused');
      }
      compile(merged);
      await tx.query(`UPDATE platform_settings SET value = $1, updated_at = now() WHERE name = 'ip_policy'`, [JSON.stringify(next)]);
    });
    await this.refresh();
  }
}
