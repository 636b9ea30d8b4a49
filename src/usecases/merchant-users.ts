/**
 * Merchant users of the portal (docs/portal.md): invitations (by an operator, or by the merchant's
 * owner), their acceptance (the user's own password), roles and status, signing in (the console's
 * throttle, password check and sessions: usecases/sessions.ts) with an optional TOTP second
 * factor, and a user's own password and second factor. Every change is audited in its own
 * transaction, with the merchant it concerns.
 *
 * Scoped: every function that names a user takes the merchant it must belong to; a user of
 * another merchant is the neutral NOT_FOUND, like one that does not exist.
 */
import { randomBytes } from 'node:crypto';
import { Secret, TOTP } from 'otpauth';
import { DomainError } from '../domain/errors.ts';
import {
  INVITATION_SECONDS,
  MERCHANT_LOGIN_RE,
  type MerchantActor,
  type MerchantRole,
  PORTAL_THROTTLE_PREFIX,
} from '../domain/merchant-users.ts';
import type { AuditActor } from '../domain/operators.ts';
import { hashPassword } from '../lib/password-hash.ts';
import * as merchants from '../store/merchants.ts';
import * as users from '../store/merchant-users.ts';
import type { MerchantUserRow } from '../store/merchant-users.ts';
import * as sessions from '../store/sessions.ts';
import { type Tx, withTx } from '../store/db.ts';
import { audited, recorder } from './audit.ts';
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
const invalid = (message: string) => new DomainError('VALIDATION_FAILED', message);

/** A user as it leaves the portal and the back office, and enters the audit log: never a secret. */
export function userFields(u: MerchantUserRow) {
  return {
    userId: u.id,
    merchantId: u.merchantId,
    login: u.login,
    role: u.role,
    status: u.status,
    totpEnabled: u.totpEnabled,
    invitationExpiresAt: u.invitationExpiresAt,
    passwordChangedAt: u.passwordChangedAt,
    createdAt: u.createdAt,
  };
}

function checkLogin(login: string): string {
  const l = login.trim().toLowerCase();
  if (!MERCHANT_LOGIN_RE.test(l)) {
    throw invalid(
      'login must be 3 to 128 characters: lower-case letters, digits, ".", "_", "+", "@" or "-", starting with a letter or digit',
    );
  }
  return l;
}

/** The user, when it belongs to the merchant (in a change's transaction, locked). */
async function userOf(d: Deps, merchantId: string, userId: string, tx?: Tx): Promise<MerchantUserRow> {
  const u = await users.getUser(tx ?? d.db, userId, tx !== undefined);
  if (!u || u.merchantId !== merchantId) throw notFound('user');
  return u;
}

/** A one-time invitation: the token for the link (shown once), its SHA-256 and expiry for the row. */
function newInvitation(d: Deps) {
  const token = randomBytes(32).toString('base64url');
  return { token, sha256: sha256(token), expiresAt: new Date(nowOf(d).getTime() + INVITATION_SECONDS * 1000) };
}

export interface Invitation {
  user: MerchantUserRow;
  /** For the link `/portal#/invitation/<token>`: shown once to whoever invited, stored as its SHA-256. */
  token: string;
  expiresAt: Date;
}

// --- users of a merchant -------------------------------------------------------------------------

export async function listUsers(d: Deps, merchantId: string): Promise<MerchantUserRow[]> {
  return users.listUsers(d.db, merchantId);
}

/** Invites a user to a merchant (an operator, or the merchant's owner): the user sets its password through the link. */
export async function inviteUser(
  d: Deps,
  actor: AuditActor,
  merchantId: string,
  b: { login: string; role: MerchantRole },
): Promise<Invitation> {
  const login = checkLogin(b.login);
  if (!(await merchants.getMerchant(d.db, merchantId))) throw notFound('merchant');
  const inv = newInvitation(d);
  return audited(d, actor, async (tx, record) => {
    const u = await users.insertUser(
      tx,
      {
        id: `mu_${randomBytes(10).toString('hex')}`,
        merchantId,
        login,
        role: b.role,
        invitationSha256: inv.sha256,
        invitationExpiresAt: inv.expiresAt,
      },
      nowOf(d),
    );
    if (!u) throw new DomainError('CONFLICT', `the login ${login} is taken`);
    await record({
      action: 'merchantUser.invite',
      entityType: 'merchantUser',
      entityId: u.id,
      before: null,
      after: userFields(u),
      merchantId,
    });
    return { user: u, token: inv.token, expiresAt: inv.expiresAt };
  });
}

/**
 * A new invitation link for a user (the previous one no longer works). For an active user it is a
 * password reset: its sessions end now and its password stops working (whoever may know it can no
 * longer sign in), and the link sets a new one.
 */
export async function reissueInvitation(d: Deps, actor: AuditActor, merchantId: string, userId: string): Promise<Invitation> {
  const inv = newInvitation(d);
  return audited(d, actor, async (tx, record) => {
    const before = await userOf(d, merchantId, userId, tx);
    if (before.status === 'DISABLED') throw new DomainError('STATE_INVALID', 'the user is disabled: enable it first');
    const now = nowOf(d);
    const reset = before.status === 'ACTIVE';
    const u = (await users.updateUser(
      tx,
      userId,
      { invitation: { sha256: inv.sha256, expiresAt: inv.expiresAt }, ...(reset ? { passwordHash: null } : {}) },
      now,
    ))!;
    const ended = await sessions.revokeOwnerSessions(tx, 'merchantUser', userId, now);
    await record({
      action: 'merchantUser.reissueInvitation',
      entityType: 'merchantUser',
      entityId: userId,
      before: { invitationExpiresAt: before.invitationExpiresAt },
      after: {
        invitationExpiresAt: u.invitationExpiresAt,
        ...(reset ? { passwordReset: true } : {}),
        ...(ended > 0 ? { sessionsEnded: ended } : {}),
      },
      merchantId,
    });
    return { user: u, token: inv.token, expiresAt: inv.expiresAt };
  });
}

/** Changes a user's role or status; a disabled user's sessions end. A merchant keeps at least one owner (active or invited). */
export async function updateUser(
  d: Deps,
  actor: AuditActor,
  merchantId: string,
  userId: string,
  b: { role?: MerchantRole; status?: 'ACTIVE' | 'DISABLED' },
): Promise<MerchantUserRow> {
  return audited(d, actor, async (tx, record) => {
    const before = await userOf(d, merchantId, userId, tx);
    const now = nowOf(d);
    // An invited user becomes active by accepting its invitation, not by a status change.
    const status = b.status === 'ACTIVE' && before.status !== 'DISABLED' ? undefined : b.status;
    if (b.status === 'ACTIVE' && before.status === 'DISABLED' && before.passwordChangedAt === null) {
      throw new DomainError('STATE_INVALID', 'the user never accepted its invitation: send a new invitation');
    }
    const after = (await users.updateUser(tx, userId, { role: b.role, status }, now))!;
    const wasOwner = before.role === 'owner' && before.status !== 'DISABLED';
    const isOwner = after.role === 'owner' && after.status !== 'DISABLED';
    if (wasOwner && !isOwner && (await users.countOwners(tx, merchantId, userId)) === 0) {
      throw new DomainError('STATE_INVALID', 'this is the merchant’s last owner: make another user owner first');
    }
    const ended = after.status === 'DISABLED' ? await sessions.revokeOwnerSessions(tx, 'merchantUser', userId, now) : 0;
    await record({
      action: 'merchantUser.update',
      entityType: 'merchantUser',
      entityId: userId,
      before: userFields(before),
      after: { ...userFields(after), ...(ended > 0 ? { sessionsEnded: ended } : {}) },
      merchantId,
    });
    return after;
  });
}

/** The user an invitation link names (for the acceptance page), or NOT_FOUND when it is unknown or expired. */
export async function invitationUser(d: Deps, token: string): Promise<{ login: string; merchantName: string }> {
  const u = await withTx(d.db, async (tx) => users.userByInvitation(tx, sha256(token), nowOf(d)));
  if (!u) throw notFound('invitation');
  const m = await merchants.getMerchant(d.db, u.merchantId);
  return { login: u.login, merchantName: m?.name ?? '' };
}

/** The invited user sets its password: active from now on, the link used up, any session it had ended. */
export async function acceptInvitation(
  d: Deps,
  c: { token: string; password: string; sourceIp: string; requestId: string },
): Promise<MerchantUserRow> {
  const password = checkNewPassword(c.password);
  const passwordHash = await withPasswordSlot(d, () => hashPassword(password));
  return withTx(d.db, async (tx) => {
    const now = nowOf(d);
    const before = await users.userByInvitation(tx, sha256(c.token), now);
    if (!before) throw notFound('invitation');
    const after = (await users.updateUser(tx, before.id, { passwordHash, status: 'ACTIVE', invitation: null }, now))!;
    await sessions.revokeOwnerSessions(tx, 'merchantUser', before.id, now);
    const actor = merchantActorOf(after, { sourceIp: c.sourceIp, requestId: c.requestId });
    await recorder(
      tx,
      actor,
      now,
    )({
      action: 'merchantUser.acceptInvitation',
      entityType: 'merchantUser',
      entityId: after.id,
      before: { status: before.status, password: before.passwordChangedAt === null ? null : 'old' },
      after: { status: after.status, password: 'new' },
    });
    return after;
  });
}

// --- signing in ------------------------------------------------------------------------------------

/** The actor of a merchant user's request. */
export function merchantActorOf(
  u: { id: string; login: string; role: MerchantRole; merchantId: string },
  at: { sourceIp: string; requestId: string },
): MerchantActor {
  return {
    kind: 'MERCHANT_USER',
    channel: 'portal',
    role: u.role,
    merchantId: u.merchantId,
    merchantUserId: u.id,
    merchantUserName: u.login,
    operatorId: null,
    operatorName: null,
    tokenId: null,
    ...at,
  };
}

export const TOTP_PERIOD_SECONDS = 30;
const TOTP_ISSUER = 'Merchant Payment Service';

function totpOf(secret: string, login: string): TOTP {
  return new TOTP({
    issuer: TOTP_ISSUER,
    label: login,
    algorithm: 'SHA1',
    digits: 6,
    period: TOTP_PERIOD_SECONDS,
    secret: Secret.fromBase32(secret),
  });
}

/**
 * The time step of a code that is right now (the step before and after are accepted too, for
 * clocks a little apart), or null.
 */
function totpStep(secret: string, login: string, code: string, nowMs: number): number | null {
  if (!/^[0-9]{6}$/.test(code)) return null;
  const delta = totpOf(secret, login).validate({ token: code, timestamp: nowMs, window: 1 });
  return delta === null ? null : Math.floor(nowMs / 1000 / TOTP_PERIOD_SECONDS) + delta;
}

export interface PortalSession extends NewSession {
  user: MerchantUserRow;
}

/**
 * Signs a merchant user in, under the console's throttle (its login counted apart from operators'
 * names): the password, then, when the user has turned TOTP on, a code from its authenticator app
 * (a code is good once). Without a code the answer is SECOND_FACTOR_REQUIRED (the password was
 * right; the page asks for the code and signs in again); a wrong code is a failed sign-in.
 */
export async function signInMerchantUser(
  d: SignInDeps,
  c: { login: string; password: string; totpCode: string | null; sourceIp: string; userAgent: string | null; requestId: string },
): Promise<PortalSession> {
  const login = c.login.trim().toLowerCase();
  const key = `${PORTAL_THROTTLE_PREFIX}${login.slice(0, 128)}`;
  const user = await underThrottle(d, key, c.sourceIp, async () => {
    const row = MERCHANT_LOGIN_RE.test(login) ? await users.userForSignIn(d.db, { login }) : null;
    const ok = await passwordMatches(c.password, row?.passwordHash ?? null);
    if (!row || !ok || row.status !== 'ACTIVE') throw new SignInRefused('INVALID');
    if (row.totpSecret !== null) {
      if (c.totpCode === null || c.totpCode === '') throw new SignInRefused('SECOND_FACTOR_REQUIRED');
      await useTotpCode(d, row.id, c.totpCode, () => new SignInRefused('INVALID', 0, 'the code is not right'));
    }
    const { passwordHash: _h, totpSecret: _s, totpPendingSecret: _p, totpLastStep: _l, ...u } = row;
    return u;
  });
  const actor = merchantActorOf(user, { sourceIp: c.sourceIp, requestId: c.requestId });
  const session = await startSession(d, 'merchantUser', actor, {
    ownerId: user.id,
    throttleKey: key,
    sourceIp: c.sourceIp,
    userAgent: c.userAgent,
    entityType: 'merchantUser',
  });
  return { ...session, user };
}

/** Checks a TOTP code of the user's enabled secret and records its step (a code is good once); `refusal` otherwise. */
async function useTotpCode(d: Deps, userId: string, code: string, refusal: () => Error): Promise<void> {
  await withTx(d.db, async (tx) => {
    const row = await users.userForSignIn(tx, { id: userId }, true);
    const step = row?.totpSecret ? totpStep(row.totpSecret, row.login, code, d.clock.now()) : null;
    if (step === null || (row!.totpLastStep !== null && step <= row!.totpLastStep)) throw refusal();
    await users.updateUser(tx, userId, { totpLastStep: step }, nowOf(d));
  });
}

/** The live portal session of a cookie's id (its idle time refreshed), or null. */
export async function portalSessionOf(d: Deps, sessionId: string) {
  const s = await liveSessionOf(d, 'merchantUser', sessionId);
  if (!s) return null;
  return {
    userId: s.ownerId,
    login: s.ownerName,
    role: s.role as MerchantRole,
    merchantId: s.merchantId!,
    csrfToken: s.csrfToken,
    expiresAt: s.expiresAt,
  };
}

export async function signOutMerchantUser(d: Deps, actor: MerchantActor, sessionId: string): Promise<void> {
  await endSession(d, 'merchantUser', actor, sessionId, { type: 'merchantUser', id: actor.merchantUserId });
}

// --- a user's own password and second factor ----------------------------------------------------------

/** The current password, asked again before a change of the user's own credentials. */
async function checkCurrentPassword(d: Deps, actor: MerchantActor, current: string) {
  const row = await users.userForSignIn(d.db, { id: actor.merchantUserId });
  if (!row || !(await withPasswordSlot(d, () => passwordMatches(current, row.passwordHash))))
    throw invalid('the current password is not right');
  return row;
}

/** A user changes its own password (the current one is asked again); its other sessions end. */
export async function changeOwnPassword(d: Deps, actor: MerchantActor, sessionId: string, current: string, next: string): Promise<void> {
  await checkCurrentPassword(d, actor, current);
  const password = checkNewPassword(next);
  const passwordHash = await withPasswordSlot(d, () => hashPassword(password));
  await audited(d, actor, async (tx, record) => {
    const now = nowOf(d);
    await users.updateUser(tx, actor.merchantUserId, { passwordHash }, now);
    const ended = await sessions.revokeOwnerSessions(tx, 'merchantUser', actor.merchantUserId, now, sha256(sessionId));
    await record({
      action: 'merchantUser.changePassword',
      entityType: 'merchantUser',
      entityId: actor.merchantUserId,
      before: { password: 'old' },
      after: { password: 'new', otherSessionsEnded: ended },
    });
  });
}

const TOTP_ALREADY_ON = () => new DomainError('STATE_INVALID', 'TOTP is on: turn it off first (with your password) to set up another');

/**
 * The first step of turning TOTP on: a new secret, kept aside until a code of it is confirmed
 * (answered as the `otpauth://` URI an authenticator app reads, and its base32 text).
 */
export async function startTotpSetup(d: Deps, actor: MerchantActor): Promise<{ secret: string; uri: string }> {
  // A second factor already on is replaced only by turning it off first, which asks the password:
  // a session alone must not be enough to take the factor over.
  if ((await users.userForSignIn(d.db, { id: actor.merchantUserId }))?.totpSecret) throw TOTP_ALREADY_ON();
  const secret = new Secret({ size: 20 }).base32;
  await users.updateUser(d.db, actor.merchantUserId, { totpPendingSecret: secret }, nowOf(d));
  return { secret, uri: totpOf(secret, actor.merchantUserName).toString() };
}

/** The `otpauth://` URI of the secret being set up (for the page's QR code), or NOT_FOUND. */
export async function pendingTotpUri(d: Deps, actor: MerchantActor): Promise<string> {
  const row = await users.userForSignIn(d.db, { id: actor.merchantUserId });
  if (!row?.totpPendingSecret) throw notFound('TOTP setup');
  return totpOf(row.totpPendingSecret, row.login).toString();
}

/** Turns TOTP on with a code of the secret being set up: from the next sign-in on, a code is asked. */
export async function confirmTotp(d: Deps, actor: MerchantActor, code: string): Promise<void> {
  await audited(d, actor, async (tx, record) => {
    const row = await users.userForSignIn(tx, { id: actor.merchantUserId }, true);
    if (row?.totpSecret) throw TOTP_ALREADY_ON();
    if (!row?.totpPendingSecret) throw new DomainError('STATE_INVALID', 'start the setup first');
    const step = totpStep(row.totpPendingSecret, row.login, code, d.clock.now());
    if (step === null) throw invalid('the code is not right: check the time of the device');
    await users.updateUser(tx, row.id, { totpSecret: row.totpPendingSecret, totpPendingSecret: null, totpLastStep: step }, nowOf(d));
    await record({
      action: 'merchantUser.enableTotp',
      entityType: 'merchantUser',
      entityId: row.id,
      before: { totpEnabled: row.totpSecret !== null },
      after: { totpEnabled: true },
    });
  });
}

/** Turns TOTP off (the current password is asked again). */
export async function disableTotp(d: Deps, actor: MerchantActor, currentPassword: string): Promise<void> {
  const row = await checkCurrentPassword(d, actor, currentPassword);
  if (row.totpSecret === null) throw new DomainError('STATE_INVALID', 'TOTP is not on');
  await audited(d, actor, async (tx, record) => {
    await users.updateUser(tx, row.id, { totpSecret: null, totpPendingSecret: null }, nowOf(d));
    await record({
      action: 'merchantUser.disableTotp',
      entityType: 'merchantUser',
      entityId: row.id,
      before: { totpEnabled: true },
      after: { totpEnabled: false },
    });
  });
}

/** The signed-in user itself (its TOTP state included). */
export async function ownUser(d: Deps, actor: MerchantActor): Promise<MerchantUserRow> {
  const u = await users.getUser(d.db, actor.merchantUserId);
  if (!u) throw notFound('user');
  return u;
}
