/** The back office's platform settings: the source-IP policy and the platform signing keys. */
import { DomainError } from '../../domain/errors.ts';
import type { IpPolicyView } from '../../domain/ip-policy.ts';
import type { Actor } from '../../domain/operators.ts';
import { audited, recorder } from '../audit.ts';
import { nowOf } from '../deps.ts';
import { type BackOfficeDeps, checkCidrs, keyFingerprint } from './common.ts';

/** A partial change of the platform source-IP policy; the fields given replace the stored ones. */
export async function setIpPolicy(
  d: BackOfficeDeps,
  actor: Actor,
  b: { trustedProxies?: string[]; allowlist?: string[] | null; denylist?: string[]; allowIpv4?: boolean; allowIpv6?: boolean },
): Promise<IpPolicyView> {
  const now = nowOf(d);
  await d.ipPolicy.update(
    {
      trustedProxies: b.trustedProxies === undefined ? undefined : checkCidrs('trustedProxies', b.trustedProxies),
      allowlist: b.allowlist === undefined ? undefined : b.allowlist === null ? null : checkCidrs('allowlist', b.allowlist),
      denylist: b.denylist === undefined ? undefined : checkCidrs('denylist', b.denylist),
      allowIpv4: b.allowIpv4,
      allowIpv6: b.allowIpv6,
    },
    (tx, before, after) =>
      recorder(
        tx,
        actor,
        now,
      )({ action: 'ipPolicy.set', entityType: 'ipPolicy', entityId: 'platform', before: { ...before }, after: { ...after } }),
  );
  return d.ipPolicy.view();
}

/**
 * A new platform signing key, published now and signing `activateAfterMs` later. The key is a
 * file (src/platform/keys.ts), not a row: it is written inside the audit entry's transaction, so
 * a rotation that fails leaves no entry; the one case left is a commit that fails after the file
 * was written (the database lost mid-rotation), where the key exists without its entry.
 */
export function rotatePlatformKey(d: BackOfficeDeps, actor: Actor, activateAfterMs: number) {
  return audited(d, actor, async (_tx, record) => {
    let k: { keyId: string; publicKeyPem: string; activatesAt: Date };
    try {
      k = await d.keys.rotate(activateAfterMs);
    } catch (err) {
      throw new DomainError('STATE_INVALID', (err as Error).message);
    }
    await record({
      action: 'platformKey.rotate',
      entityType: 'platformKey',
      entityId: k.keyId,
      before: null,
      after: { keyId: k.keyId, activatesAt: k.activatesAt, fingerprint: keyFingerprint(k.publicKeyPem) },
    });
    return k;
  });
}
