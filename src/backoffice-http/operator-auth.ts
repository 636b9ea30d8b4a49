/**
 * Who is calling the back office, and may they: the actor of a request to the admin API (the
 * ADMIN_TOKEN, an operator's bearer token, or a console session cookie with its CSRF token), and
 * the one authorization check of each route, from the role table of src/domain/operators.ts.
 * Also the request id and source address every audit entry carries, and the console's cookie.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { AdminError } from './errors.ts';
import { type Actor, type Permission, can } from '../domain/operators.ts';
import type { Services } from '../services.ts';
import { isOperatorToken, sessionOf, tokenOperator } from '../usecases/operators.ts';
import { secretEquals } from './basics.ts';
import { SAFE_METHODS, SessionCookie, requestIdOf, requireCsrf, sourceIpOf } from './session-surface.ts';

// --- the console's cookie ------------------------------------------------------------------------

/** The console's session cookie: `mps_console` (`__Host-mps_console` over TLS). */
export const consoleCookie = new SessionCookie('mps_console');

/** A live console session, as sessionOf answers it. */
export type ConsoleSession = NonNullable<Awaited<ReturnType<typeof sessionOf>>>;

/**
 * The console session a request's cookie names (`unauthorized()` is thrown when there is none or it
 * is over). On a request that changes something (`change`), `beforeCsrf` runs first (the caller's
 * own checks), then the session's CSRF token is required in `X-CSRF-Token`, and no foreign `Origin`:
 * 403 ADMIN_FORBIDDEN otherwise. Used by the admin API and the console's own endpoints.
 */
export async function cookieSession(
  req: FastifyRequest,
  svc: Services,
  o: { change: boolean; unauthorized: () => Error; beforeCsrf?: () => void },
): Promise<{ id: string; s: ConsoleSession }> {
  const id = consoleCookie.read(req, svc);
  const s = id === null ? null : await sessionOf(svc, id);
  if (!s || id === null) throw o.unauthorized();
  if (o.change) {
    o.beforeCsrf?.();
    requireCsrf(req, svc, s.csrfToken);
  }
  return { id, s };
}

// --- the actor ---------------------------------------------------------------------------------

/** The actor of a console session's request. */
export function sessionActor(
  s: { role: Actor['role']; operatorId: string; operatorName: string },
  at: { sourceIp: string; requestId: string },
): Actor {
  return {
    kind: 'SESSION',
    role: s.role,
    operatorId: s.operatorId,
    operatorName: s.operatorName,
    tokenId: null,
    channel: 'console',
    ...at,
  };
}

const actors = new WeakMap<FastifyRequest, Actor>();

/** The actor the authentication hook found (every back-office route runs after it). */
export function actorOf(req: FastifyRequest): Actor {
  const a = actors.get(req);
  if (!a) throw new Error('actorOf: the request was not authenticated');
  return a;
}

function channelOf(req: FastifyRequest): Actor['channel'] {
  const ua = req.headers['user-agent'];
  return typeof ua === 'string' && ua.startsWith('mps-ops/') ? 'cli' : 'api';
}

/**
 * Authenticates a back-office request, in this order: an `Authorization: Bearer` header (the
 * ADMIN_TOKEN, or an operator's `mpsop_` token) decides alone when present; otherwise the
 * console's session cookie, which on a state-changing method also needs the session's CSRF
 * token in `X-CSRF-Token` and no foreign `Origin`. Anything else is 401 ADMIN_UNAUTHORIZED.
 */
export async function authenticate(req: FastifyRequest, reply: FastifyReply, svc: Services, adminToken: string): Promise<Actor> {
  const requestId = requestIdOf(req);
  reply.header('x-request-id', requestId);
  const base = { sourceIp: sourceIpOf(req, svc), requestId };
  const authorization = req.headers.authorization;
  const unauthorized = () => new AdminError('ADMIN_UNAUTHORIZED', 'a valid admin bearer token is required');
  let actor: Actor;
  if (authorization !== undefined) {
    // The scheme name is case-insensitive (RFC 9110, section 11.1).
    const bearer = typeof authorization === 'string' && /^bearer /i.test(authorization) ? authorization.slice(7) : '';
    if (secretEquals(bearer, adminToken)) {
      actor = { kind: 'ADMIN_TOKEN', role: 'admin', operatorId: null, operatorName: null, tokenId: null, channel: channelOf(req), ...base };
    } else {
      const t = isOperatorToken(bearer) && bearer.length <= 128 ? await tokenOperator(svc, bearer) : null;
      if (!t) throw unauthorized();
      actor = {
        kind: 'TOKEN',
        role: t.role,
        operatorId: t.operatorId,
        operatorName: t.operatorName,
        tokenId: t.tokenId,
        channel: channelOf(req),
        ...base,
      };
    }
  } else {
    const { s } = await cookieSession(req, svc, { change: !SAFE_METHODS.has(req.method), unauthorized });
    actor = sessionActor(s, base);
  }
  actors.set(req, actor);
  return actor;
}

// --- authorization -------------------------------------------------------------------------------

/** A route's rule: who may call it, given the actor and the request (its path parameters). */
export type Authorize = (actor: Actor, req: FastifyRequest) => boolean;

/** Route options for a route that takes one permission of the role table. */
export function need(permission: Permission): { config: { authorize: Authorize; permission: string } } {
  return { config: { authorize: (a) => can(a.role, permission), permission } };
}

/** Route options with a rule of its own (an operator's own tokens). */
export function needRule(name: string, authorize: Authorize): { config: { authorize: Authorize; permission: string } } {
  return { config: { authorize, permission: name } };
}

/**
 * The authorization check of every back-office route: the route's rule, after authentication. A
 * route without a rule refuses every caller (a route added without one is never open by mistake);
 * an unknown path goes on to its 404.
 */
export function authorize(req: FastifyRequest): void {
  if (req.is404) return;
  const config = req.routeOptions.config as { authorize?: Authorize; permission?: string };
  const actor = actorOf(req);
  if (config.authorize === undefined || !config.authorize(actor, req)) {
    throw new AdminError(
      'ADMIN_FORBIDDEN',
      `the role ${actor.role} does not allow this (${config.permission ?? 'no permission declared'})`,
    );
  }
}
