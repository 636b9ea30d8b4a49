/**
 * Merchant users of the portal (docs/portal.md): their roles and what each role may do (the one
 * table the portal asks, tested directly), the actor of a portal request, and the rules of logins,
 * invitations and key rotation overlaps. Sessions, passwords and the sign-in throttle follow the
 * console's rules (src/domain/operators.ts).
 */
import type { AuditActor } from './operators.ts';

export const MERCHANT_ROLES = ['owner', 'developer', 'finance', 'readonly'] as const;
export type MerchantRole = (typeof MERCHANT_ROLES)[number];

/** Every action of the portal that a role may or may not take. */
export const MERCHANT_PERMISSIONS = [
  'orders.read',
  'events.read',
  'events.redeliver',
  'apps.read',
  'apps.write',
  'keys.write',
  'statements.read',
  'settlement.read',
  'audit.read',
  'users.manage',
] as const;
export type MerchantPermission = (typeof MERCHANT_PERMISSIONS)[number];

/**
 * The role -> permissions table.
 * - owner: everything, the merchant's users included.
 * - developer: the integration: apps (notify URL, IP allowlist), keys, events and redelivery.
 * - finance: the money: statements and settlement accounts.
 * - readonly: orders, refunds, events and apps, nothing changed.
 * Every user reads orders, refunds, events and apps, and manages its own password and second factor.
 */
export const MERCHANT_ROLE_PERMISSIONS: Record<MerchantRole, readonly MerchantPermission[]> = {
  owner: MERCHANT_PERMISSIONS,
  developer: ['orders.read', 'events.read', 'events.redeliver', 'apps.read', 'apps.write', 'keys.write', 'audit.read'],
  finance: ['orders.read', 'events.read', 'apps.read', 'statements.read', 'settlement.read', 'audit.read'],
  readonly: ['orders.read', 'events.read', 'apps.read'],
};

export function merchantCan(role: MerchantRole, permission: MerchantPermission): boolean {
  return MERCHANT_ROLE_PERMISSIONS[role].includes(permission);
}

/** The actor of a portal request: a merchant user, acting for its one merchant. */
export interface MerchantActor extends AuditActor {
  kind: 'MERCHANT_USER';
  channel: 'portal';
  role: MerchantRole;
  merchantId: string;
  merchantUserId: string;
  merchantUserName: string;
}

/**
 * Logins: an e-mail address or a name, lower-case letters, digits and `. _ - + @`, 3 to 128
 * characters, starting with a letter or digit. One namespace for every merchant (a sign-in names
 * no merchant).
 */
export const MERCHANT_LOGIN_RE = /^[a-z0-9][a-z0-9._+@-]{2,127}$/;

/** An invitation (or a password reset link) is good for this long. */
export const INVITATION_SECONDS = 7 * 86_400;

/** The sign-in throttle counts a portal login apart from an operator's name of the same spelling. */
export const PORTAL_THROTTLE_PREFIX = 'portal:';

// --- key rotation --------------------------------------------------------------------------------

/** The longest overlap a merchant may give two keys of an app. */
export const MAX_KEY_OVERLAP_SECONDS = 30 * 86_400;
