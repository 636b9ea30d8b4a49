/**
 * The merchants' portal at /portal (docs/portal.md), its own surface: one HTML page with no inline
 * script or style (src/portal/ui, Preact), and its API under /portal/api, authenticated by the
 * portal's session cookie (`mps_portal`), with the console's rules: JSON from this site and the
 * session's CSRF token on every change, the sign-in throttle, idle and absolute timeouts
 * (src/http/session-surface.ts, src/usecases/sessions.ts). Answers are `{code, message}` with
 * `PORTAL_*` codes.
 *
 * Each route declares the permission it needs (`perm(...)`, the role table of
 * src/domain/merchant-users.ts), checked once after authentication; a route that declares none
 * refuses everyone. Everything is scoped to the session's merchant by the use cases
 * (src/usecases/portal.ts): another merchant's id is the neutral 404.
 */
import path from 'node:path';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import qrcode from 'qrcode';
import { AdminError } from '../backoffice-http/errors.ts';
import { DomainError } from '../domain/errors.ts';
import { type MerchantActor, type MerchantPermission, merchantCan } from '../domain/merchant-users.ts';
import { ORDER_STATUSES, REFUND_STATES } from '../domain/states.ts';
import { CHANNELS } from '../domain/open-schemas.ts';
import { statementCompression, statementFileName } from '../domain/statements.ts';
import { appView } from '../backoffice-http/views.ts';
import {
  appWithKeysView,
  auditPageView,
  eventDetailView,
  eventsView,
  keyView,
  orderDetailView,
  ordersPageView,
  refundsView,
  sessionView,
  settlementView,
} from './answers.ts';
import { bodyOf, installBackOffice } from '../backoffice-http/common.ts';
import { int, oneOf, orderSearchOf, queryOf, text, time } from '../backoffice-http/query.ts';
import {
  acceptInvitationSchema,
  addKeySchema,
  changePasswordSchema,
  currentPasswordSchema,
  inviteUserSchema,
  patchUserSchema,
  portalAppSchema,
  portalSignInSchema,
  retireKeySchema,
  totpCodeSchema,
} from '../backoffice-http/schemas.ts';
import { platformKeysBody, statementBody, statementContentType } from '../views/open.ts';
import {
  SAFE_METHODS,
  SessionCookie,
  refuseSignIn,
  requestIdOf,
  requireCsrf,
  sameSiteJson,
  servePages,
  sourceIpOf,
} from '../backoffice-http/session-surface.ts';
import { uiAssets } from '../lib/ui-bundle.ts';
import type { Services } from '../services.ts';
import * as mu from '../usecases/merchant-users.ts';
import { invitationView, userView } from '../backoffice-http/merchant-user-views.ts';
import * as portal from '../usecases/portal.ts';
import { SignInRefused } from '../usecases/sessions.ts';

const SRC = path.join(import.meta.dirname, '..');
/** The portal's front end: src/portal/ui (Preact), with the styles the UIs share (src/ui). */
export const portalAssets = uiAssets(path.join(SRC, 'portal/ui/main.tsx'), [path.join(SRC, 'ui/ui.css')]);

/** The portal's session cookie: `mps_portal` (`__Host-mps_portal` over TLS). */
export const portalCookie = new SessionCookie('mps_portal');

/** Every route of the portal's API, `METHOD /path` under /portal/api (test/http/portal-isolation.test.ts tries each). */
export const PORTAL_ROUTES = new Set<string>();

/** Who may call a route: nobody signed in (`public`), any signed-in user (`self`), or a permission of the role table. */
type Rule = 'public' | 'self' | MerchantPermission;
const perm = (rule: Rule) => ({ config: { portalRule: rule } });

interface Authenticated {
  actor: MerchantActor;
  sessionId: string;
  csrfToken: string;
  expiresAt: Date;
}
const sessions = new WeakMap<FastifyRequest, Authenticated>();

function authenticated(req: FastifyRequest): Authenticated {
  const a = sessions.get(req);
  if (!a) throw new Error('the request was not authenticated');
  return a;
}
const actorOf = (req: FastifyRequest) => authenticated(req).actor;

const unauthorized = () => new AdminError('ADMIN_UNAUTHORIZED', 'sign in first');

/**
 * Authenticates and authorizes a portal request, in this order: a state-changing request must be
 * JSON from this site (sign-in included); a route that is not public needs a live session (401),
 * and on a change its CSRF token (403); then the route's rule (403).
 */
async function authenticate(req: FastifyRequest, reply: FastifyReply, svc: Services): Promise<void> {
  const requestId = requestIdOf(req);
  reply.header('x-request-id', requestId);
  const change = !SAFE_METHODS.has(req.method);
  if (change) sameSiteJson(req, svc);
  const rule = (req.routeOptions.config as { portalRule?: Rule }).portalRule;
  if (rule === 'public') return;
  const id = portalCookie.read(req, svc);
  const s = id === null ? null : await mu.portalSessionOf(svc, id);
  if (!s || id === null) throw unauthorized();
  if (change) requireCsrf(req, svc, s.csrfToken);
  const actor = mu.merchantActorOf(
    { id: s.userId, login: s.login, role: s.role, merchantId: s.merchantId },
    { sourceIp: sourceIpOf(req, svc), requestId },
  );
  sessions.set(req, { actor, sessionId: id, csrfToken: s.csrfToken, expiresAt: s.expiresAt });
  if (req.is404) return;
  if (rule === undefined || (rule !== 'self' && !merchantCan(actor.role, rule))) {
    throw new AdminError('ADMIN_FORBIDDEN', `the role ${actor.role} does not allow this (${rule ?? 'no permission declared'})`);
  }
}

type P = { Params: Record<string, string> };

export async function portalPlugin(scope: FastifyInstance, opts: { svc: Services }): Promise<void> {
  const { svc } = opts;
  servePages(scope, { name: 'portal', title: 'Merchant portal · Merchant Payment Service', assets: portalAssets });

  await scope.register(
    async (api) => {
      installBackOffice(api, (req, reply) => authenticate(req, reply, svc), 'portal request failed', 'PORTAL');
      api.addHook('onRoute', (r) => {
        for (const m of [r.method].flat()) if (m !== 'HEAD') PORTAL_ROUTES.add(`${m} ${r.url.slice(api.prefix.length)}`);
      });
      for (const routes of [sessionRoutes, credentialRoutes, orderRoutes, eventRoutes, appRoutes, statementRoutes, merchantRoutes])
        routes(api, svc);
    },
    { prefix: '/api' },
  );
}

/** Signing in and out, and the password. */
function sessionRoutes(api: FastifyInstance, svc: Services): void {
  const d = svc.backOffice;
  api.post('/session', perm('public'), async (req, reply) => {
    const b = bodyOf(req, portalSignInSchema);
    const sourceIp = sourceIpOf(req, svc);
    const requestId = requestIdOf(req);
    const previous = portalCookie.read(req, svc);
    let created: mu.PortalSession;
    try {
      created = await mu.signInMerchantUser(svc, {
        login: b.login as string,
        password: b.password as string,
        totpCode: (b.totpCode as string | null | undefined) ?? null,
        sourceIp,
        userAgent: typeof req.headers['user-agent'] === 'string' ? req.headers['user-agent'] : null,
        requestId,
      });
    } catch (err) {
      if (!(err instanceof SignInRefused)) throw err;
      return refuseSignIn(reply, err, 'PORTAL');
    }
    // Whatever session the browser held, signing in starts a new one (and ends that one).
    if (previous !== null) {
      const old = await mu.portalSessionOf(svc, previous);
      if (old) {
        const actor = mu.merchantActorOf(
          { id: old.userId, login: old.login, role: old.role, merchantId: old.merchantId },
          { sourceIp, requestId },
        );
        await mu.signOutMerchantUser(svc, actor, previous);
      }
    }
    portalCookie.write(reply, svc, created.sessionId);
    const actor = mu.merchantActorOf(created.user, { sourceIp, requestId });
    const m = await portal.merchantOverview(d, actor);
    return sessionView({ actor, csrfToken: created.csrfToken, expiresAt: created.expiresAt }, m.merchant.name, created.user.totpEnabled);
  });

  api.get('/session', perm('self'), async (req) => {
    const a = authenticated(req);
    const [m, u] = await Promise.all([portal.merchantOverview(d, a.actor), mu.ownUser(svc, a.actor)]);
    return sessionView(a, m.merchant.name, u.totpEnabled);
  });

  api.delete('/session', perm('self'), async (req, reply) => {
    const a = authenticated(req);
    await mu.signOutMerchantUser(svc, a.actor, a.sessionId);
    portalCookie.write(reply, svc, null);
    return reply.code(204).send();
  });

  api.post('/password', perm('self'), async (req, reply) => {
    const a = authenticated(req);
    const b = bodyOf(req, changePasswordSchema);
    await mu.changeOwnPassword(svc, a.actor, a.sessionId, b.currentPassword as string, b.newPassword as string);
    return reply.code(204).send();
  });
}

/** Invitations (no session: the link is the credential) and the second factor (TOTP). */
function credentialRoutes(api: FastifyInstance, svc: Services): void {
  api.get<P>('/invitations/:token', perm('public'), async (req) => mu.invitationUser(svc, req.params.token!));

  api.post<P>('/invitations/:token/accept', perm('public'), async (req) => {
    const b = bodyOf(req, acceptInvitationSchema);
    const u = await mu.acceptInvitation(svc, {
      token: req.params.token!,
      password: b.password as string,
      sourceIp: sourceIpOf(req, svc),
      requestId: requestIdOf(req),
    });
    return { login: u.login, status: u.status };
  });

  api.post('/totp', perm('self'), async (req) => mu.startTotpSetup(svc, actorOf(req)));
  api.get('/totp/qr.svg', perm('self'), async (req, reply) => {
    const svg = await qrcode.toString(await mu.pendingTotpUri(svc, actorOf(req)), { type: 'svg', margin: 1 });
    return reply.type('image/svg+xml').send(svg);
  });
  api.post('/totp/confirm', perm('self'), async (req, reply) => {
    await mu.confirmTotp(svc, actorOf(req), bodyOf(req, totpCodeSchema).code as string);
    return reply.code(204).send();
  });
  api.post('/totp/disable', perm('self'), async (req, reply) => {
    await mu.disableTotp(svc, actorOf(req), bodyOf(req, currentPasswordSchema).currentPassword as string);
    return reply.code(204).send();
  });
}

/** The merchant's orders and refunds. */
function orderRoutes(api: FastifyInstance, svc: Services): void {
  const d = svc.backOffice;
  api.get('/orders', perm('orders.read'), async (req) => {
    const f = orderSearchOf(req, ORDER_STATUSES, CHANNELS);
    return ordersPageView(await portal.searchOrders(d, actorOf(req), f), f.limit);
  });

  api.get<P>('/orders/:openOrderId', perm('orders.read'), async (req) =>
    orderDetailView(await portal.orderDetail(d, actorOf(req), req.params.openOrderId!)),
  );

  api.get('/refunds', perm('orders.read'), async (req) => {
    const q = queryOf(req, { state: oneOf(REFUND_STATES), appId: text(64), limit: int(1, 500) });
    return refundsView(await portal.listRefunds(d, actorOf(req), { state: q.state, appId: q.appId, limit: q.limit ?? 100 }));
  });
}

/** The merchant's events, with their delivery log, and redelivery. */
function eventRoutes(api: FastifyInstance, svc: Services): void {
  const d = svc.backOffice;
  api.get('/events', perm('events.read'), async (req) => {
    const q = queryOf(req, { status: oneOf(['PENDING', 'DELIVERED', 'DEAD'] as const), appId: text(64), limit: int(1, 500) });
    return eventsView(await portal.listEvents(d, actorOf(req), { status: q.status, appId: q.appId, limit: q.limit ?? 100 }));
  });

  api.get<P>('/events/:eventId', perm('events.read'), async (req) => {
    return eventDetailView(await portal.eventDetail(d, actorOf(req), req.params.eventId!));
  });

  api.post<P>('/events/:eventId/redeliver', perm('events.redeliver'), async (req, reply) => {
    try {
      const r = await portal.redeliverEvent(d, actorOf(req), req.params.eventId!);
      return reply.code(202).send({ eventId: req.params.eventId, status: 'PENDING', nextAttemptAt: r.nextAttemptAt.toISOString() });
    } catch (err) {
      if (err instanceof DomainError && err.code === 'RATE_LIMITED') {
        return reply
          .code(429)
          .header('retry-after', String(err.retryAfterSeconds ?? 60))
          .send({ code: 'PORTAL_RATE_LIMITED', message: err.explanation ?? 'too many redeliveries' });
      }
      throw err;
    }
  });
}

/** The merchant's apps, their keys, and the platform's keys. */
function appRoutes(api: FastifyInstance, svc: Services): void {
  const d = svc.backOffice;
  api.get('/apps', perm('apps.read'), async (req) => {
    const actor = actorOf(req);
    const { apps } = await portal.merchantOverview(d, actor);
    const now = svc.clock.now();
    const withKeys = await Promise.all(apps.map((a) => portal.appWithKeys(d, actor, a.id)));
    return { apps: withKeys.map((a) => appWithKeysView(a, now)) };
  });

  api.get<P>('/apps/:appId', perm('apps.read'), async (req) => {
    return appWithKeysView(await portal.appWithKeys(d, actorOf(req), req.params.appId!), svc.clock.now());
  });

  api.patch<P>('/apps/:appId', perm('apps.write'), async (req) => {
    const b = bodyOf(req, portalAppSchema) as { notifyUrl?: string | null; ipAllowlist?: string[] };
    return appView(await portal.changeApp(d, actorOf(req), req.params.appId!, b));
  });

  api.post<P>('/apps/:appId/keys', perm('keys.write'), async (req, reply) => {
    const b = bodyOf(req, addKeySchema);
    const k = await portal.addKey(d, actorOf(req), req.params.appId!, b.keyId as string, b.publicKeyPem as string);
    return reply.code(201).send(keyView(k, svc.clock.now()));
  });

  api.post<P>('/apps/:appId/keys/:keyId/retire', perm('keys.write'), async (req) => {
    const b = bodyOf(req, retireKeySchema);
    const k = await portal.retireKey(d, actorOf(req), req.params.appId!, req.params.keyId!, b.afterSeconds as number | null);
    return keyView(k, svc.clock.now());
  });

  api.get('/platform-keys', perm('apps.read'), async () => platformKeysBody(await svc.keys.published()));
}

/** A day's statement of an app (its summary, its file) and the settlement accounts. */
function statementRoutes(api: FastifyInstance, svc: Services): void {
  const d = svc.backOffice;
  api.get<P>('/apps/:appId/statements/:day', perm('statements.read'), async (req, reply) => {
    try {
      const s = await portal.statement(d, actorOf(req), req.params.appId!, req.params.day!, compressionOf(req));
      return statementBody(s);
    } catch (err) {
      if (tooManyStatements(err, reply)) return reply;
      throw err;
    }
  });

  api.get<P>('/apps/:appId/statements/:day/file', perm('statements.read'), async (req, reply) => {
    let file;
    try {
      file = await portal.statementDownload(d, actorOf(req), req.params.appId!, req.params.day!, compressionOf(req));
    } catch (err) {
      if (tooManyStatements(err, reply)) return reply;
      throw err;
    }
    const { summary: s, body } = file;
    body.on('error', (err) => {
      req.log.error({ err }, 'statement download failed; connection cut');
      req.raw.socket?.destroy();
    });
    return reply
      .type(statementContentType(s.compression))
      .header('content-length', String(s.digest.sizeBytes))
      .header('x-content-sha256', s.digest.sha256)
      .header('content-disposition', `attachment; filename="${statementFileName(s.appId, s.day.day, s.compression)}"`)
      .send(body);
  });

  api.get('/settlement', perm('settlement.read'), async (req) => {
    return settlementView(await portal.settlement(d, actorOf(req)));
  });
}

/** The merchant's audit log and its users. */
function merchantRoutes(api: FastifyInstance, svc: Services): void {
  const d = svc.backOffice;
  api.get('/audit', perm('audit.read'), async (req) => {
    const q = queryOf(req, { action: text(64), from: time, to: time, before: int(1, 2 ** 53 - 1), limit: int(1, 500) });
    const limit = q.limit ?? 100;
    const rows = await portal.auditLog(d, actorOf(req), {
      action: q.action,
      from: q.from,
      to: q.to,
      beforeId: q.before === null ? null : String(q.before),
      limit,
    });
    return auditPageView(rows, limit);
  });

  // --- the merchant's users ---
  api.get('/users', perm('users.manage'), async (req) => ({ users: (await mu.listUsers(svc, actorOf(req).merchantId)).map(userView) }));

  api.post('/users', perm('users.manage'), async (req, reply) => {
    const b = bodyOf(req, inviteUserSchema) as { login: string; role: MerchantActor['role'] };
    const actor = actorOf(req);
    return reply.code(201).send(invitationView(svc, await mu.inviteUser(svc, actor, actor.merchantId, b)));
  });

  api.patch<P>('/users/:userId', perm('users.manage'), async (req) => {
    const b = bodyOf(req, patchUserSchema) as { role?: MerchantActor['role']; status?: 'ACTIVE' | 'DISABLED' };
    const actor = actorOf(req);
    return userView(await mu.updateUser(svc, actor, actor.merchantId, req.params.userId!, b));
  });

  api.post<P>('/users/:userId/invitation', perm('users.manage'), async (req) => {
    const actor = actorOf(req);
    return invitationView(svc, await mu.reissueInvitation(svc, actor, actor.merchantId, req.params.userId!));
  });
}

/** `?compression=gzip|none` (none by default), refused otherwise. */
/** Beyond the statement files made at once (docs/configuration.md, "Statement downloads"): 429 with Retry-After, as the open API answers. */
function tooManyStatements(err: unknown, reply: FastifyReply): boolean {
  if (!(err instanceof DomainError) || err.code !== 'RATE_LIMITED') return false;
  void reply
    .code(429)
    .header('retry-after', String(err.retryAfterSeconds ?? 5))
    .send({ code: 'PORTAL_RATE_LIMITED', message: err.explanation ?? 'too many statement files at once' });
  return true;
}

function compressionOf(req: FastifyRequest) {
  const q = req.raw.url?.split('?')[1] ?? '';
  try {
    return statementCompression(new URLSearchParams(q));
  } catch (err) {
    if (err instanceof DomainError) throw new AdminError('ADMIN_VALIDATION_FAILED', err.explanation ?? 'compression must be gzip or none');
    throw err;
  }
}
