/**
 * Operators of the back office: their roles, what each role may do (the one table every surface
 * asks, tested directly), who made a change (the actor an audit entry names), and the rules of
 * names, passwords, sessions and the sign-in throttle (docs/console.md).
 */

export const ROLES = ['admin', 'operations', 'finance', 'support'] as const;
export type Role = (typeof ROLES)[number];

/**
 * Every action of the back office that a role may or may not take. Reads are one permission:
 * every role reads the operational data (merchants, apps, keys, orders, refunds, events, the
 * platform keys and IP policy, the dashboard).
 */
export const PERMISSIONS = [
  'read',
  'audit.read',
  'merchants.write',
  'settlement.write',
  'feeRules.write',
  'reconciliation.write',
  'orders.close',
  'events.redeliver',
  'ipPolicy.write',
  'platformKeys.rotate',
  'operators.manage',
] as const;
export type Permission = (typeof PERMISSIONS)[number];

/**
 * The role -> permissions table.
 * - admin: everything, operators and platform keys included.
 * - operations: merchants, apps and their keys, the IP policy, closing orders, redelivering events.
 * - finance: reads everything (the audit log too); settlement accounts and allocation, fee rules,
 *   reconciliation (provider discrepancies).
 * - support: reads the operational data, and redelivers an event.
 * An operator's own API tokens and password are the operator's to manage whatever the role
 * (`mayManageTokensOf`).
 */
export const ROLE_PERMISSIONS: Record<Role, readonly Permission[]> = {
  admin: PERMISSIONS,
  operations: ['read', 'audit.read', 'merchants.write', 'orders.close', 'events.redeliver', 'ipPolicy.write'],
  finance: ['read', 'audit.read', 'settlement.write', 'feeRules.write', 'reconciliation.write'],
  support: ['read', 'events.redeliver'],
};

export function can(role: Role, permission: Permission): boolean {
  return ROLE_PERMISSIONS[role].includes(permission);
}

/** Who makes a back-office request: an operator (a console session, an API token) or the ADMIN_TOKEN; in the portal, a merchant user. */
export type ActorKind = 'SESSION' | 'TOKEN' | 'ADMIN_TOKEN' | 'MERCHANT_USER';
/** Where it came through: the console (a session), the admin API, the operator CLI (over the admin API), or the merchant portal. */
export type Channel = 'console' | 'api' | 'cli' | 'portal';

/** What an audit entry says of who made a change (an operator's Actor, or a merchant user's, src/domain/merchant-users.ts). */
export interface AuditActor {
  kind: ActorKind;
  /** null for the ADMIN_TOKEN (the bootstrap super-admin, no operator) and for merchant users. */
  operatorId: string | null;
  operatorName: string | null;
  /** The operator token's id (kind TOKEN). */
  tokenId: string | null;
  channel: Channel;
  sourceIp: string | null;
  requestId: string;
  /** A merchant user's merchant, id and login (kind MERCHANT_USER). */
  merchantId?: string;
  merchantUserId?: string;
  merchantUserName?: string;
}

/** The actor of a back-office request: an operator, or the ADMIN_TOKEN. */
export interface Actor extends AuditActor {
  kind: 'SESSION' | 'TOKEN' | 'ADMIN_TOKEN';
  channel: 'console' | 'api' | 'cli';
  role: Role;
}

/** An operator's own tokens: the operator, or whoever manages operators. */
export function mayManageTokensOf(actor: Actor, operatorId: string): boolean {
  return can(actor.role, 'operators.manage') || actor.operatorId === operatorId;
}

/** How an actor is named in lists and the audit export. */
export function actorLabel(a: {
  kind: ActorKind;
  operatorName: string | null;
  tokenId: string | null;
  merchantUserName?: string | null;
  merchantId?: string | null;
}): string {
  if (a.kind === 'ADMIN_TOKEN') return 'ADMIN_TOKEN';
  if (a.kind === 'MERCHANT_USER') return `${a.merchantUserName ?? '?'} (merchant ${a.merchantId ?? '?'})`;
  return a.kind === 'TOKEN' ? `${a.operatorName} (token ${a.tokenId})` : (a.operatorName ?? '?');
}

// --- names, passwords ----------------------------------------------------------------------------

/** Login names: lower-case letters, digits, `.`, `_`, `-`; 2 to 64 characters. */
export const OPERATOR_NAME_RE = /^[a-z0-9][a-z0-9._-]{1,63}$/;
export const PASSWORD_MIN_LENGTH = 12;
export const PASSWORD_MAX_LENGTH = 256;

/** A password's problem in plain words, or null. Length is what matters (NIST SP 800-63B); no composition rules. */
export function passwordProblem(p: string): string | null {
  const n = [...p].length;
  if (n < PASSWORD_MIN_LENGTH) return `the password must have at least ${PASSWORD_MIN_LENGTH} characters`;
  if (n > PASSWORD_MAX_LENGTH) return `the password must have at most ${PASSWORD_MAX_LENGTH} characters`;
  if (p.trim() !== p) return 'the password must not start or end with a space';
  return null;
}

// --- sessions and the sign-in throttle -----------------------------------------------------------

/** A session unused this long is over (sign in again). */
export const SESSION_IDLE_SECONDS = 30 * 60;
/** A session is over this long after sign-in, however active. */
export const SESSION_ABSOLUTE_SECONDS = 12 * 3600;
/** last_seen_at is written at most this often (a write per console request is not needed for a 30-minute idle timeout). */
export const SESSION_TOUCH_SECONDS = 60;

/** Failed sign-ins are counted over this window. */
export const SIGN_IN_WINDOW_SECONDS = 15 * 60;
/** Failed sign-ins of one login name within the window before it is refused (whatever the address). */
export const SIGN_IN_MAX_FAILURES_PER_NAME = 5;
/** Failed sign-ins from one address within the window before it is refused (whatever the name). */
export const SIGN_IN_MAX_FAILURES_PER_ADDRESS = 20;

// --- audit entries -------------------------------------------------------------------------------

/** Fields whose values never enter an audit entry (they are replaced by `[redacted]`). */
const SECRET_FIELDS = new Set([
  'password',
  'passwordHash',
  'cardNumber',
  'token',
  'tokenSha256',
  'csrfToken',
  'sessionId',
  'privateKeyPem',
]);

function clean(v: unknown): unknown {
  if (v instanceof Date) return v.toISOString();
  if (Array.isArray(v)) return v.map(clean);
  if (v !== null && typeof v === 'object') {
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, SECRET_FIELDS.has(k) ? '[redacted]' : clean(x)]));
  }
  return v;
}

type Fields = Record<string, unknown>;

/**
 * The before and after of an audit entry: only the fields that changed (all of them for a
 * creation, `before` null), dates as ISO text, secret fields redacted.
 */
export function auditDiff(before: object | null, after: object | null): { before: Fields | null; after: Fields | null } {
  const b = before === null ? null : (clean(before) as Fields);
  const a = after === null ? null : (clean(after) as Fields);
  if (b === null || a === null) return { before: b, after: a };
  const keys = [...new Set([...Object.keys(b), ...Object.keys(a)])].filter(
    (k) => JSON.stringify(b[k] ?? null) !== JSON.stringify(a[k] ?? null),
  );
  return { before: Object.fromEntries(keys.map((k) => [k, b[k] ?? null])), after: Object.fromEntries(keys.map((k) => [k, a[k] ?? null])) };
}
