/**
 * What the console's and the portal's sign-ins share (docs/console.md, docs/portal.md): the
 * password check, the sign-in throttle (per login and per address, across instances), browser
 * sessions (a random id in the cookie, its SHA-256 in the table, idle and absolute timeouts) and
 * their purge. Operators (usecases/operators.ts) and merchant users (usecases/merchant-users.ts)
 * sign in through these functions, so both get the same rules and the same password-hashing path.
 */
import { createHash, randomBytes } from 'node:crypto';
import { DomainError } from '../domain/errors.ts';
import {
  type AuditActor,
  SESSION_ABSOLUTE_SECONDS,
  SESSION_IDLE_SECONDS,
  SESSION_TOUCH_SECONDS,
  SIGN_IN_MAX_FAILURES_PER_ADDRESS,
  SIGN_IN_MAX_FAILURES_PER_NAME,
  SIGN_IN_WINDOW_SECONDS,
  passwordProblem,
} from '../domain/operators.ts';
import { dummyHash, verifyPassword } from '../lib/password-hash.ts';
import * as sessions from '../store/sessions.ts';
import type { SessionRealm, SessionRow } from '../store/sessions.ts';
import { audited } from './audit.ts';
import { type UseCaseDeps, nowOf } from './deps.ts';

type Deps = Pick<UseCaseDeps, 'db' | 'clock'>;
/** What a sign-in needs: the database, the clock and this instance's sign-in slots. */
export type SignInDeps = Pick<UseCaseDeps, 'db' | 'clock' | 'signIns'>;

export const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

/**
 * Why a sign-in was refused: INVALID (wrong credentials), THROTTLED (too many failures of the name
 * or from the address), SECOND_FACTOR_REQUIRED, or BUSY (as many sign-ins as this instance admits at
 * once are in progress: SIGN_IN_MAX_CONCURRENT; judged before anything is read or counted).
 */
export type SignInRefusal = 'INVALID' | 'THROTTLED' | 'SECOND_FACTOR_REQUIRED' | 'BUSY';

const REFUSAL_MESSAGES: Record<SignInRefusal, string> = {
  INVALID: 'the name or the password is not right',
  THROTTLED: 'too many failed sign-ins: try again later',
  SECOND_FACTOR_REQUIRED: 'enter the code of your authenticator app',
  BUSY: 'too many sign-ins at once: try again in a moment',
};

/** When a sign-in refused as BUSY may try again: a sign-in takes about 0.2-0.5 s of a hashing thread. */
export const SIGN_IN_BUSY_RETRY_SECONDS = 1;

/**
 * A refused sign-in: wrong credentials (one answer whatever was wrong), too many failures, or a
 * right password whose account asks for its second factor (the portal's TOTP) that was not given.
 */
export class SignInRefused extends Error {
  readonly kind: SignInRefusal;
  readonly retryAfterSeconds: number;
  constructor(kind: SignInRefusal, retryAfterSeconds = 0, message?: string) {
    super(message ?? REFUSAL_MESSAGES[kind]);
    this.kind = kind;
    this.retryAfterSeconds = retryAfterSeconds;
  }
}

/** A new password, as every account's rules want it (length only: domain/operators.ts passwordProblem). */
export function checkNewPassword(p: string): string {
  const problem = passwordProblem(p);
  if (problem) throw new DomainError('VALIDATION_FAILED', problem);
  return p;
}

/**
 * The password check of every sign-in and password change: a stored hash, or, for an account that
 * does not exist (or has no password yet), a dummy hash, so that both take the same time.
 */
export async function passwordMatches(password: string, stored: string | null): Promise<boolean> {
  const ok = await verifyPassword(password, stored ?? (await dummyHash()));
  return ok && stored !== null;
}

/**
 * Runs `work` (a password hashed for a new account or a new password, or the current password
 * checked again before a change) holding one of this instance's sign-in slots
 * (SIGN_IN_MAX_CONCURRENT), the capacity sign-ins take: with all taken it is refused at once,
 * UNAVAILABLE with Retry-After, before anything is hashed or written.
 */
export async function withPasswordSlot<T>(d: Pick<UseCaseDeps, 'signIns'>, work: () => Promise<T>): Promise<T> {
  const release = d.signIns.tryTake();
  if (!release) {
    throw new DomainError('UNAVAILABLE', 'too many passwords are being checked at once; try again in a moment', {
      retryAfterSeconds: SIGN_IN_BUSY_RETRY_SECONDS,
    });
  }
  try {
    return await work();
  } finally {
    release();
  }
}

/**
 * Runs a sign-in's checks under the throttle, holding one of this instance's sign-in slots
 * (SIGN_IN_MAX_CONCURRENT) throughout: with all taken the sign-in is refused at once as BUSY, before
 * any row is written or password hashed, so a flood from any number of addresses costs the
 * instance no more than that many hashes at a time (the hashes run on threads of their own:
 * lib/password-hash.ts). The attempt is written first and the counts read
 * after it, in a statement of their own: of attempts racing on any number of instances, the k-th
 * written sees at least k, so no more than the limits (SIGN_IN_MAX_FAILURES_PER_NAME of a login,
 * SIGN_IN_MAX_FAILURES_PER_ADDRESS from an address, within SIGN_IN_WINDOW_SECONDS) have their
 * password checked. `check` throws SignInRefused: INVALID keeps the attempt counted as a failure,
 * SECOND_FACTOR_REQUIRED drops it (neither a failure nor a success). A success leaves the attempt
 * for `startSession`, which clears the login's failures with the session it writes.
 */
export async function underThrottle<T>(d: SignInDeps, key: string, sourceIp: string, check: () => Promise<T>): Promise<T> {
  const release = d.signIns.tryTake();
  if (!release) throw new SignInRefused('BUSY', SIGN_IN_BUSY_RETRY_SECONDS);
  try {
    return await throttled(d, key, sourceIp, check);
  } finally {
    release();
  }
}

async function throttled<T>(d: Deps, key: string, sourceIp: string, check: () => Promise<T>): Promise<T> {
  const now = nowOf(d);
  const since = new Date(now.getTime() - SIGN_IN_WINDOW_SECONDS * 1000);
  const attemptId = await sessions.recordSignInAttempt(d.db, key, sourceIp, now);
  const f = await sessions.signInFailures(d.db, key, sourceIp, since); // this attempt included
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
  try {
    return await check();
  } catch (err) {
    if (err instanceof SignInRefused && err.kind === 'SECOND_FACTOR_REQUIRED') await sessions.dropSignInAttempt(d.db, attemptId);
    throw err; // INVALID: its attempt stays counted
  }
}

export interface NewSession {
  /** The cookie's value: shown to the browser only, stored as its SHA-256. */
  sessionId: string;
  csrfToken: string;
  expiresAt: Date;
}

/**
 * A new session for an account that passed its checks: the id is always new (never one the browser
 * offered: no session fixation); written with the `session.signIn` audit entry, and the login's
 * throttle failures cleared (the attempt of this sign-in included).
 */
export async function startSession(
  d: Deps,
  realm: SessionRealm,
  actor: AuditActor,
  c: { ownerId: string; throttleKey: string; sourceIp: string; userAgent: string | null; entityType: string },
): Promise<NewSession> {
  const now = nowOf(d);
  const sessionId = randomBytes(32).toString('base64url');
  const csrfToken = randomBytes(32).toString('base64url');
  const expiresAt = new Date(now.getTime() + SESSION_ABSOLUTE_SECONDS * 1000);
  await audited(d, actor, async (tx, record) => {
    await sessions.insertSession(
      tx,
      realm,
      {
        idSha256: sha256(sessionId),
        ownerId: c.ownerId,
        csrfToken,
        sourceIp: c.sourceIp,
        userAgent: c.userAgent?.slice(0, 256) ?? null,
        expiresAt,
      },
      now,
    );
    await sessions.clearSignInFailures(tx, c.throttleKey);
    await record({ action: 'session.signIn', entityType: c.entityType, entityId: c.ownerId, before: null, after: { expiresAt } });
  });
  return { sessionId, csrfToken, expiresAt };
}

/** The live session of a cookie's id (its idle time refreshed), or null. */
export async function liveSessionOf(d: Deps, realm: SessionRealm, sessionId: string): Promise<SessionRow | null> {
  const now = nowOf(d);
  const idSha256 = sha256(sessionId);
  const s = await sessions.liveSession(d.db, realm, idSha256, now, SESSION_IDLE_SECONDS);
  if (!s) return null;
  if (now.getTime() - s.lastSeenAt.getTime() > SESSION_TOUCH_SECONDS * 1000) await sessions.touchSession(d.db, realm, idSha256, now);
  return s;
}

/** Ends a session (sign-out), with its audit entry when it was live. */
export async function endSession(
  d: Deps,
  realm: SessionRealm,
  actor: AuditActor,
  sessionId: string,
  entity: { type: string; id: string },
): Promise<void> {
  const now = nowOf(d);
  await audited(d, actor, async (tx, record) => {
    if (await sessions.revokeSession(tx, realm, sha256(sessionId), now)) {
      await record({ action: 'session.signOut', entityType: entity.type, entityId: entity.id, before: null, after: null });
    }
  });
}

/** Drops ended sessions of both realms and failed sign-ins out of the throttle's window (the workers' purge). */
export async function purgeSessionRows(d: Deps): Promise<number> {
  const now = nowOf(d).getTime();
  const dayAgo = new Date(now - 86_400_000);
  return (
    (await sessions.purgeSessions(d.db, 'operator', dayAgo)) +
    (await sessions.purgeSessions(d.db, 'merchantUser', dayAgo)) +
    (await sessions.purgeSignInFailures(d.db, new Date(now - SIGN_IN_WINDOW_SECONDS * 1000)))
  );
}
