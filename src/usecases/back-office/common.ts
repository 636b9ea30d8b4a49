/**
 * What the back office's use cases share (src/usecases/back-office/*.ts, one module per aggregate):
 * their dependencies, the neutral not-found, the merchant read (locked in a change's
 * transaction), and the checks of what an operator pastes (public keys, CIDR lists, notify URLs).
 * Input is already parsed by the surface (its schema); the rules that span fields and rows are
 * checked by the use cases. Refusals are DomainErrors that the admin surface maps to its
 * `{code, message}` answers. Every change takes the actor who makes it (built by the surface: the
 * admin API, the console, the CLI) and writes its audit entry in the change's own transaction
 * (usecases/audit.ts); who may make it was decided by the surface from the role table
 * (src/domain/operators.ts).
 */
import { createHash, createPublicKey } from 'node:crypto';
import { DomainError } from '../../domain/errors.ts';
import type { IpPolicyView } from '../../domain/ip-policy.ts';
import { checkNotifyUrl, type NotifyUrlPolicy } from '../../events/notify-url.ts';
import { CidrList } from '../../net/ip.ts';
import type { Tx } from '../../store/db.ts';
import * as merchants from '../../store/merchants.ts';
import type { UseCaseDeps } from '../deps.ts';

export interface BackOfficeDeps extends UseCaseDeps {
  notifyUrlPolicy: NotifyUrlPolicy;
  ipPolicy: {
    view(): IpPolicyView;
    update(patch: Partial<IpPolicyView>, after?: (tx: Tx, before: IpPolicyView, next: IpPolicyView) => Promise<void>): Promise<void>;
  };
  /** The platform signing keys (src/platform/keys.ts): a rotation writes a key file. */
  keys: { rotate(activateAfterMs?: number): Promise<{ keyId: string; publicKeyPem: string; activatesAt: Date }> };
  /** An app, its keys or its allowlist changed: caches drop it. */
  appChanged(appId: string): void;
  /** A merchant's receiving configuration (accounts, allocation, fee rule) changed. */
  merchantConfigChanged(merchantId: string): void;
}

export const notFound = (entity: string) => new DomainError('NOT_FOUND', undefined, { entity });

export async function merchantOf(d: BackOfficeDeps, merchantId: string, tx?: Tx) {
  // In a change's transaction the merchant's row is locked: its configuration changes one at a time.
  const m = await merchants.getMerchant(tx ?? d.db, merchantId, tx !== undefined);
  if (!m) throw notFound('merchant');
  return m;
}

/** What an audit entry keeps of a public key: its SHA-256 fingerprint (of the SPKI DER), not the PEM. */
export function keyFingerprint(pem: string): string {
  const der = createPublicKey(pem).export({ type: 'spki', format: 'der' });
  return `SHA256:${createHash('sha256').update(der).digest('base64')}`;
}

/** A PEM public key only (a pasted private key is refused, never "derived from"), RSA 2048-4096; answers its SPKI PEM. */
export function checkPublicKeyPem(pem: string): string {
  const t = pem.trim();
  if (/PRIVATE KEY/.test(t)) throw new DomainError('VALIDATION_FAILED', 'publicKeyPem holds a private key; register only the public key');
  if (!/^-----BEGIN (RSA )?PUBLIC KEY-----[\s\S]+-----END (RSA )?PUBLIC KEY-----$/.test(t) || t.split('-----BEGIN ').length !== 2) {
    throw new DomainError('VALIDATION_FAILED', 'publicKeyPem must be one PEM public key (-----BEGIN PUBLIC KEY-----)');
  }
  let key: ReturnType<typeof createPublicKey>;
  try {
    key = createPublicKey(t);
  } catch {
    throw new DomainError('VALIDATION_FAILED', 'publicKeyPem cannot be parsed');
  }
  const bits = key.asymmetricKeyDetails?.modulusLength ?? 0;
  if (key.asymmetricKeyType !== 'rsa' || bits < 2048 || bits > 4096) {
    throw new DomainError('VALIDATION_FAILED', `publicKeyPem must be an RSA key of 2048 to 4096 bits`);
  }
  return key.export({ type: 'spki', format: 'pem' }).toString();
}

/** CIDR entries in their canonical form; refused with the field's name. */
export function checkCidrs(field: string, entries: string[]): string[] {
  try {
    return CidrList.parse(entries).toJSON();
  } catch (err) {
    throw new DomainError('VALIDATION_FAILED', `${field}: ${(err as Error).message}`);
  }
}

export function checkNotify(d: BackOfficeDeps, url: string): string {
  const problem = checkNotifyUrl(url, d.notifyUrlPolicy);
  if (problem) throw new DomainError('VALIDATION_FAILED', `notifyUrl: ${problem}`);
  return url;
}
