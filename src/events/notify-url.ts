/**
 * Notify-URL policy (issue: event notifications, safety): https only; plain http only to a
 * loopback host in development mode; no userinfo; literal private/link-local targets refused
 * unless explicitly allowed. Resolved addresses are checked again at delivery (DNS rebinding).
 */
import { isIP } from 'node:net';
import { parseIpStrict } from '../net/ip.ts';

export interface NotifyUrlPolicy {
  devMode: boolean;
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
    if (!(policy.devMode && loopback)) return 'must use https (plain http is allowed only to a loopback host in development mode)';
  } else if (u.protocol !== 'https:') {
    return 'must use https';
  }
  const host = u.hostname.replace(/^\[|\]$/g, '');
  if (isIP(host) !== 0 && !loopback && !policy.allowPrivateTargets) {
    const ip = parseIpStrict(host);
    if (ip === null || ip.range() !== 'unicast') return 'must not point at a private, link-local or reserved address';
  }
  if (loopback && !policy.devMode && !policy.allowPrivateTargets) return 'must not point at a loopback address';
  return null;
}
