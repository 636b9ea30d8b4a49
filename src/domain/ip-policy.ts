/** The platform source-IP policy as it is stored, shown and changed (src/gate/ip-policy.ts holds the one in force). */
export interface IpPolicyView {
  trustedProxies: string[];
  /** null = no platform allowlist. */
  allowlist: string[] | null;
  denylist: string[];
  allowIpv4: boolean;
  allowIpv6: boolean;
}
