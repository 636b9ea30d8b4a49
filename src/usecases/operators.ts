/**
 * Operators, their API tokens and console sessions (docs/console.md): creating and changing
 * operators, signing in (throttled per login name and per address), resolving a session cookie or
 * a bearer token to the actor of a request. Every change is audited in its own transaction.
 */
import { createHash, randomBytes } from 'node:crypto';
import { DomainError } from '../domain/errors.ts';
import {
  type Actor,
  OPERATOR_NAME_RE,
  type Role,
  SESSION_ABSOLUTE_SECONDS,
  SESSION_IDLE_SECONDS,
  SESSION_TOUCH_SECONDS,
  SIGN_IN_MAX_FAILURES_PER_ADDRESS,
  SIGN_IN_MAX_FAILURES_PER_NAME,
  SIGN_IN_WINDOW_SECONDS,
  passwordProblem,
} from '../domain/operators.ts';
import { dummyHash, hashPassword, verifyPassword } from '../lib/password-hash.ts';
import * as tokens from '../store/operator-tokens.ts';
import * as sessions from '../store/operator-sessions.ts';
import * as operators from '../store/operators.ts';
import type { OperatorRow } from '../store/operators.ts';
import { audited } from './audit.ts';
import { type UseCaseDeps, nowOf } from './deps.ts';

type Deps = Pick<UseCaseDeps, 'db' | 'clock'>;

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');
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

function checkPassword(p: string): string {
  const problem = passwordProblem(p);
  if (problem) throw new DomainError('VALIDATION_FAILED', problem);
  return p;
}

async function operatorOf(d: Deps, id: string): Promise<OperatorRow> {
  const o = await operators.getOperator(d.db, id);
  if (!o) throw notFound('operator');
  return o;
}

// --- operators -----------------------------------------------------------------------------------

export async function createOperator(d: Deps, actor: Actor, b: { name: string; role: Role; password: string }): Promise<OperatorRow> {
  const name = checkName(b.name);
  const passwordHash = await hashPassword(checkPassword(b.password));
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
  const passwordHash = b.password === undefined ? undefined : await hashPassword(checkPassword(b.password));
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
    const ended = passwordHash !== undefined || after.status === 'DISABLED' ? await sessions.revokeOperatorSessions(tx, id, now) : 0;
    await record({
      action: 'operator.update',
      entityType: 'operator',
      entityId: id,
      before: { ...operatorFields(before), ...(passwordHash !== undefined ? { password: 'old' } : {}) },
      after: {
        ...operatorFields(after),
        ...(passwordHash !== undefined ? { password: 'new' } : {}),
        ...(ended > 0 ? { sessionsEnded: ended } : {}),
      },
    });
    return after;
  });
}

/** Ends every console session of an operator (a lost laptop, a departure). */
export async function revokeSessions(d: Deps, actor: Actor, id: string): Promise<number> {
  await operatorOf(d, id);
  return audited(d, actor, async (tx, record) => {
    const n = await sessions.revokeOperatorSessions(tx, id, nowOf(d));
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
  if (!row || !(await verifyPassword(current, row.passwordHash)))
    throw new DomainError('VALIDATION_FAILED', 'the current password is not right');
  const passwordHash = await hashPassword(checkPassword(next));
  await audited(d, actor, async (tx, record) => {
    const now = nowOf(d);
    await operators.updateOperator(tx, o.id, { passwordHash }, now);
    const ended = await sessions.revokeOperatorSessions(tx, o.id, now, sessionIdSha256);
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

/** A refused sign-in: wrong credentials (one answer whatever was wrong), or too many failures. */
export class SignInRefused extends Error {
  readonly kind: 'INVALID' | 'THROTTLED';
  readonly retryAfterSeconds: number;
  constructor(kind: 'INVALID' | 'THROTTLED', retryAfterSeconds = 0) {
    super(kind === 'INVALID' ? 'the name or the password is not right' : 'too many failed sign-ins: try again later');
    this.kind = kind;
    this.retryAfterSeconds = retryAfterSeconds;
  }
}

export interface NewSession {
  /** The cookie's value: shown to the browser only, stored as its SHA-256. */
  sessionId: string;
  csrfToken: string;
  operator: OperatorRow;
  expiresAt: Date;
}

/**
 * Signs an operator in. Throttled before the password is checked: more than
 * SIGN_IN_MAX_FAILURES_PER_NAME failures of the name, or SIGN_IN_MAX_FAILURES_PER_ADDRESS from the
 * address, within SIGN_IN_WINDOW_SECONDS refuse every attempt until the window frees a place. The
 * attempt is written first and the counts read after it, in a statement of their own: of attempts
 * racing on any number of instances, the k-th written sees at least k, so no more than the limit
 * have a password checked in a window. An unknown name costs a hash like a wrong password, and
 * both get the same answer. A session id is always new (never one the browser offered: no session
 * fixation).
 */
export async function signIn(
  d: Deps,
  c: { name: string; password: string; sourceIp: string; userAgent: string | null; requestId: string },
): Promise<NewSession> {
  const now = nowOf(d);
  const name = c.name.toLowerCase();
  const key = name.slice(0, 128); // what the throttle counts the name by
  const since = new Date(now.getTime() - SIGN_IN_WINDOW_SECONDS * 1000);
  const attemptId = await sessions.recordSignInAttempt(d.db, key, c.sourceIp, now);
  const f = await sessions.signInFailures(d.db, key, c.sourceIp, since); // this attempt included
  if (f.byName > SIGN_IN_MAX_FAILURES_PER_NAME || f.byAddress > SIGN_IN_MAX_FAILURES_PER_ADDRESS) {
    await sessions.dropSignInAttempt(d.db, attemptId); // refused unjudged: not a failure
    const oldest = [
      f.byName > SIGN_IN_MAX_FAILURES_PER_NAME ? f.oldestByName : null,
      f.byAddress > SIGN_IN_MAX_FAILURES_PER_ADDRESS ? f.oldestByAddress : null,
    ]
      .filter((x): x is Date => x !== null)
      .map((x) => x.getTime() + SIGN_IN_WINDOW_SECONDS * 1000 - now.getTime());
    throw new SignInRefused('THROTTLED', Math.max(1, Math.ceil(Math.max(...oldest) / 1000)));
  }
  const row = OPERATOR_NAME_RE.test(name) ? await operators.operatorForSignIn(d.db, name) : null;
  const ok = await verifyPassword(c.password, row?.passwordHash ?? (await dummyHash()));
  if (!row || !ok || row.status !== 'ACTIVE') throw new SignInRefused('INVALID'); // its attempt stays counted
  const { passwordHash: _h, ...operator } = row;
  const sessionId = randomBytes(32).toString('base64url');
  const csrfToken = randomBytes(32).toString('base64url');
  const expiresAt = new Date(now.getTime() + SESSION_ABSOLUTE_SECONDS * 1000);
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
  await audited(d, actor, async (tx, record) => {
    await sessions.insertSession(
      tx,
      {
        idSha256: sha256(sessionId),
        operatorId: operator.id,
        csrfToken,
        sourceIp: c.sourceIp,
        userAgent: c.userAgent?.slice(0, 256) ?? null,
        expiresAt,
      },
      now,
    );
    await sessions.clearSignInFailures(tx, key); // this attempt's row too
    await record({ action: 'session.signIn', entityType: 'operator', entityId: operator.id, before: null, after: { expiresAt } });
  });
  return { sessionId, csrfToken, operator, expiresAt };
}

/** The live session of a cookie's id (its idle time refreshed), or null. */
export async function sessionOf(d: Deps, sessionId: string) {
  const now = nowOf(d);
  const idSha256 = sha256(sessionId);
  const s = await sessions.liveSession(d.db, idSha256, now, SESSION_IDLE_SECONDS);
  if (!s) return null;
  if (now.getTime() - s.lastSeenAt.getTime() > SESSION_TOUCH_SECONDS * 1000) await sessions.touchSession(d.db, idSha256, now);
  return s;
}

export function sessionHash(sessionId: string): string {
  return sha256(sessionId);
}

export async function signOut(d: Deps, actor: Actor, sessionId: string): Promise<void> {
  const now = nowOf(d);
  await audited(d, actor, async (tx, record) => {
    if (await sessions.revokeSession(tx, sha256(sessionId), now)) {
      await record({ action: 'session.signOut', entityType: 'operator', entityId: actor.operatorId ?? '', before: null, after: null });
    }
  });
}

/** Drops ended sessions and failed sign-ins out of the throttle's window (the workers' purge). */
export async function purgeOperatorRows(d: Deps): Promise<number> {
  const now = nowOf(d).getTime();
  return (
    (await sessions.purgeSessions(d.db, new Date(now - 86_400_000))) +
    (await sessions.purgeSignInFailures(d.db, new Date(now - SIGN_IN_WINDOW_SECONDS * 1000)))
  );
}
