/**
 * Notify-URL policy (docs/events.md): https only; plain http only to a loopback host, and a
 * loopback host at all, only where the deployment allows it (WEBHOOK_ALLOW_LOOPBACK: by default
 * with the sandbox provider, never by default with live providers); no user info; literal
 * private/link-local targets refused unless explicitly allowed (WEBHOOK_ALLOW_PRIVATE_TARGETS).
 * Resolved addresses are checked again at delivery (DNS rebinding). Every instance sharing a
 * database applies the same policy (src/usecases/deployment.ts).
 */
import { isIP } from 'node:net';
import { parseIpStrict } from '../net/ip.ts';

export interface NotifyUrlPolicy {
  /** Loopback receivers (over plain http too): a development or test deployment. */
  allowLoopback: boolean;
  /** Private and link-local receivers (over https). */
  allowPrivateTargets: boolean;
}

export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  if (h === 'localhost' || h.endsWith('.localhost')) return true;
  const ip = parseIpStrict(h);
  return ip !== null && ip.range() === 'loopback';
}

/** Returns a problem description, or null when the URL is acceptable. */
export function checkNotifyUrl(raw: string, policy: NotifyUrlPolicy): string | null {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return 'must be an absolute URL';
  }
  if (u.username !== '' || u.password !== '') return 'must not contain user info';
  if (u.hash !== '') return 'must not contain a fragment';
  const loopback = isLoopbackHost(u.hostname);
  if (u.protocol === 'http:') {
    if (!(policy.allowLoopback && loopback))
      return 'must use https (plain http is allowed only to a loopback host where WEBHOOK_ALLOW_LOOPBACK is on)';
  } else if (u.protocol !== 'https:') {
    return 'must use https';
  }
  const host = u.hostname.replace(/^\[|\]$/g, '');
  if (isIP(host) !== 0 && !loopback && !policy.allowPrivateTargets) {
    const ip = parseIpStrict(host);
    if (ip === null || ip.range() !== 'unicast') return 'must not point at a private, link-local or reserved address';
  }
  if (loopback && !policy.allowLoopback && !policy.allowPrivateTargets) return 'must not point at a loopback address';
  return null;
}
