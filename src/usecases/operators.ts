/**
 * Operators, their API tokens and console sessions (docs/console.md): creating and changing
 * operators, signing in (throttled per login name and per address), resolving a session cookie or
 * a bearer token to the actor of a request. Every change is audited in its own transaction.
 */
import { randomBytes } from 'node:crypto';
import { DomainError } from '../domain/errors.ts';
import { type Actor, OPERATOR_NAME_RE, type Role, SESSION_TOUCH_SECONDS } from '../domain/operators.ts';
import { hashPassword } from '../lib/password-hash.ts';
import * as tokens from '../store/operator-tokens.ts';
import * as sessions from '../store/sessions.ts';
import * as operators from '../store/operators.ts';
import type { OperatorRow } from '../store/operators.ts';
import { audited } from './audit.ts';
import { type UseCaseDeps, nowOf } from './deps.ts';
import {
  type NewSession,
  SignInRefused,
  checkNewPassword,
  endSession,
  liveSessionOf,
  passwordMatches,
  withPasswordSlot,
  sha256,
  startSession,
  underThrottle,
  type SignInDeps,
} from './sessions.ts';

type Deps = Pick<UseCaseDeps, 'db' | 'clock' | 'signIns'>;

const notFound = (entity: string) => new DomainError('NOT_FOUND', undefined, { entity });

/** An operator as it leaves the back office and enters the audit log: never the hash. */
export function operatorFields(o: OperatorRow) {
  return { operatorId: o.id, name: o.name, role: o.role, status: o.status, passwordChangedAt: o.passwordChangedAt, createdAt: o.createdAt };
}

function checkName(name: string): string {
  if (!OPERATOR_NAME_RE.test(name)) {
    throw new DomainError(
      'VALIDATION_FAILED',
      'name must be 2 to 64 characters: lower-case letters, digits, ".", "_" or "-", starting with a letter or digit',
    );
  }
  return name;
}

async function operatorOf(d: Deps, id: string): Promise<OperatorRow> {
  const o = await operators.getOperator(d.db, id);
  if (!o) throw notFound('operator');
  return o;
}

// --- operators -----------------------------------------------------------------------------------

export async function createOperator(d: Deps, actor: Actor, b: { name: string; role: Role; password: string }): Promise<OperatorRow> {
  const name = checkName(b.name);
  const password = checkNewPassword(b.password);
  const passwordHash = await withPasswordSlot(d, () => hashPassword(password));
  return audited(d, actor, async (tx, record) => {
    const o = await operators.insertOperator(
      tx,
      { id: `op_${randomBytes(10).toString('hex')}`, name, role: b.role, passwordHash },
      nowOf(d),
    );
    if (!o) throw new DomainError('CONFLICT', `an operator named ${name} already exists`);
    await record({ action: 'operator.create', entityType: 'operator', entityId: o.id, before: null, after: operatorFields(o) });
    return o;
  });
}

export function listOperators(d: Deps): Promise<OperatorRow[]> {
  return operators.listOperators(d.db);
}

export async function getOperator(d: Deps, id: string): Promise<OperatorRow> {
  return operatorOf(d, id);
}

export async function findOperatorByName(d: Deps, name: string): Promise<OperatorRow> {
  const o = await operators.findOperatorByName(d.db, name);
  if (!o) throw notFound('operator');
  return o;
}

/**
 * Changes an operator's role, status or password. A new password or a disabled account ends the
 * operator's sessions; the last active admin cannot be demoted or disabled (the console would have
 * no one to manage operators but the ADMIN_TOKEN).
 */
export async function updateOperator(
  d: Deps,
  actor: Actor,
  id: string,
  b: { role?: Role; status?: 'ACTIVE' | 'DISABLED'; password?: string },
): Promise<OperatorRow> {
  const password = b.password === undefined ? undefined : checkNewPassword(b.password);
  const passwordHash = password === undefined ? undefined : await withPasswordSlot(d, () => hashPassword(password));
  return audited(d, actor, async (tx, record) => {
    const now = nowOf(d);
    const before = await operators.getOperator(tx, id, true);
    if (!before) throw notFound('operator');
    const after = (await operators.updateOperator(tx, id, { role: b.role, status: b.status, passwordHash }, now))!;
    if (before.role === 'admin' && before.status === 'ACTIVE' && (after.role !== 'admin' || after.status !== 'ACTIVE')) {
      if ((await operators.countActiveAdmins(tx)) === 0) {
        throw new DomainError('STATE_INVALID', 'this is the last active admin: make another operator admin first');
      }
    }
    const ended =
      passwordHash !== undefined || after.status === 'DISABLED' ? await sessions.revokeOwnerSessions(tx, 'operator', id, now) : 0;
    // Disabled: its API tokens are revoked for good, so that enabling it again does not bring them back.
    const tokensRevoked = after.status === 'DISABLED' ? await tokens.revokeAllTokens(tx, id, now) : 0;
    await record({
      action: 'operator.update',
      entityType: 'operator',
      entityId: id,
      before: { ...operatorFields(before), ...(passwordHash !== undefined ? { password: 'old' } : {}) },
      after: {
        ...operatorFields(after),
        ...(passwordHash !== undefined ? { password: 'new' } : {}),
        ...(ended > 0 ? { sessionsEnded: ended } : {}),
        ...(tokensRevoked > 0 ? { tokensRevoked } : {}),
      },
    });
    return after;
  });
}

/** Ends every console session of an operator (a lost laptop, a departure). */
export async function revokeSessions(d: Deps, actor: Actor, id: string): Promise<number> {
  await operatorOf(d, id);
  return audited(d, actor, async (tx, record) => {
    const n = await sessions.revokeOwnerSessions(tx, 'operator', id, nowOf(d));
    await record({ action: 'operator.revokeSessions', entityType: 'operator', entityId: id, before: null, after: { sessionsEnded: n } });
    return n;
  });
}

/** An operator changes its own password (the current one is asked again); its other sessions end. */
export async function changeOwnPassword(
  d: Deps,
  actor: Actor,
  sessionIdSha256: string | null,
  current: string,
  next: string,
): Promise<void> {
  if (actor.operatorId === null) throw new DomainError('STATE_INVALID', 'the ADMIN_TOKEN has no password');
  const o = await operatorOf(d, actor.operatorId);
  const row = await operators.operatorForSignIn(d.db, o.name);
  const passwordHash = await withPasswordSlot(d, async () => {
    if (!row || !(await passwordMatches(current, row.passwordHash)))
      throw new DomainError('VALIDATION_FAILED', 'the current password is not right');
    return hashPassword(checkNewPassword(next));
  });
  await audited(d, actor, async (tx, record) => {
    const now = nowOf(d);
    await operators.updateOperator(tx, o.id, { passwordHash }, now);
    const ended = await sessions.revokeOwnerSessions(tx, 'operator', o.id, now, sessionIdSha256);
    await record({
      action: 'operator.changePassword',
      entityType: 'operator',
      entityId: o.id,
      before: { password: 'old' },
      after: { password: 'new', otherSessionsEnded: ended },
    });
  });
}

// --- API tokens ----------------------------------------------------------------------------------

const TOKEN_PREFIX = 'mpsop_';

export function isOperatorToken(bearer: string): boolean {
  return bearer.startsWith(TOKEN_PREFIX);
}

/** A new token for the operator: answered once with its secret, stored as its SHA-256 only. */
export async function createToken(d: Deps, actor: Actor, operatorId: string, label: string) {
  const o = await operatorOf(d, operatorId);
  if (o.status !== 'ACTIVE') throw new DomainError('STATE_INVALID', 'the operator is disabled');
  const secret = `${TOKEN_PREFIX}${randomBytes(32).toString('base64url')}`;
  return audited(d, actor, async (tx, record) => {
    const row = await tokens.insertToken(
      tx,
      { id: `tok_${randomBytes(8).toString('hex')}`, operatorId, label, tokenSha256: sha256(secret), prefix: secret.slice(0, 10) },
      nowOf(d),
    );
    await record({
      action: 'token.create',
      entityType: 'token',
      entityId: row.tokenId,
      before: null,
      after: { operatorId, label, prefix: row.prefix },
    });
    return { token: secret, row };
  });
}

export async function listTokens(d: Deps, operatorId: string) {
  await operatorOf(d, operatorId);
  return tokens.listTokens(d.db, operatorId);
}

export async function revokeToken(d: Deps, actor: Actor, operatorId: string, tokenId: string) {
  return audited(d, actor, async (tx, record) => {
    const row = await tokens.revokeToken(tx, operatorId, tokenId, nowOf(d));
    if (!row) throw notFound('token');
    await record({
      action: 'token.revoke',
      entityType: 'token',
      entityId: tokenId,
      before: { revokedAt: null },
      after: { revokedAt: row.revokedAt },
    });
    return row;
  });
}

/** The operator behind a bearer token, or null (unknown, revoked, or its operator disabled). */
export async function tokenOperator(d: Deps, bearer: string) {
  const t = await tokens.liveToken(d.db, sha256(bearer));
  if (!t) return null;
  const now = nowOf(d);
  if (t.lastUsedAt === null || now.getTime() - t.lastUsedAt.getTime() > SESSION_TOUCH_SECONDS * 1000)
    await tokens.touchToken(d.db, t.tokenId, now);
  return t;
}

// --- sessions and sign-in ------------------------------------------------------------------------

export interface OperatorSession extends NewSession {
  operator: OperatorRow;
}

/**
 * Signs an operator in, under the sign-in throttle (usecases/sessions.ts): an unknown name costs a
 * hash like a wrong password, and both get the same answer.
 */
export async function signIn(
  d: SignInDeps,
  c: { name: string; password: string; sourceIp: string; userAgent: string | null; requestId: string },
): Promise<OperatorSession> {
  const name = c.name.toLowerCase();
  const key = name.slice(0, 128); // what the throttle counts the name by
  const operator = await underThrottle(d, key, c.sourceIp, async () => {
    const row = OPERATOR_NAME_RE.test(name) ? await operators.operatorForSignIn(d.db, name) : null;
    const ok = await passwordMatches(c.password, row?.passwordHash ?? null);
    if (!row || !ok || row.status !== 'ACTIVE') throw new SignInRefused('INVALID');
    const { passwordHash: _h, ...o } = row;
    return o;
  });
  const actor: Actor = {
    kind: 'SESSION',
    role: operator.role,
    operatorId: operator.id,
    operatorName: operator.name,
    tokenId: null,
    channel: 'console',
    sourceIp: c.sourceIp,
    requestId: c.requestId,
  };
  const session = await startSession(d, 'operator', actor, {
    ownerId: operator.id,
    throttleKey: key,
    sourceIp: c.sourceIp,
    userAgent: c.userAgent,
    entityType: 'operator',
  });
  return { ...session, operator };
}

/** The live console session of a cookie's id (its idle time refreshed), or null. */
export async function sessionOf(d: Deps, sessionId: string) {
  const s = await liveSessionOf(d, 'operator', sessionId);
  if (!s) return null;
  return {
    operatorId: s.ownerId,
    operatorName: s.ownerName,
    role: s.role as Role,
    csrfToken: s.csrfToken,
    createdAt: s.createdAt,
    lastSeenAt: s.lastSeenAt,
    expiresAt: s.expiresAt,
  };
}

export function sessionHash(sessionId: string): string {
  return sha256(sessionId);
}

export async function signOut(d: Deps, actor: Actor, sessionId: string): Promise<void> {
  await endSession(d, 'operator', actor, sessionId, { type: 'operator', id: actor.operatorId ?? '' });
}
