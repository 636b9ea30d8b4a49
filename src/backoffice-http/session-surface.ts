/**
 * What the browser surfaces (the operators' console, the merchants' portal) and the admin API
 * share: the request id and source address an audit entry carries; the session cookie (one per
 * surface, same attributes); the checks of a state-changing browser request (JSON from this
 * site, the session's CSRF token); the pages' security headers and their one HTML page.
 */
import { randomBytes } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { type AdminCode, AdminError, type PortalCode } from './errors.ts';
import { SESSION_ABSOLUTE_SECONDS } from '../domain/operators.ts';
import { forwardingHeaders } from '../gate/gate.ts';
import type { UiAssets } from '../lib/ui-bundle.ts';
import { CidrList } from '../net/ip.ts';
import { type SourceIpPolicy, resolveSource } from '../net/source-ip.ts';
import type { Services } from '../services.ts';
import type { SignInRefused } from '../usecases/sessions.ts';
import { secretEquals } from './basics.ts';

// --- the request's id and source -----------------------------------------------------------------

const REQUEST_ID_RE = /^[\x21-\x7e]{1,128}$/;

/** The caller's `X-Request-Id` when it is one (visible ASCII, at most 128), else a new `bo_` id. */
export function requestIdOf(req: FastifyRequest): string {
  const given = req.headers['x-request-id'];
  return typeof given === 'string' && REQUEST_ID_RE.test(given) ? given : `bo_${randomBytes(12).toString('base64url')}`;
}

/**
 * The client's address as the open API resolves it (forwarding headers honoured from
 * TRUSTED_PROXIES only), without the open API's allow and deny lists: the TCP peer when the chain
 * cannot be read.
 */
export function sourceIpOf(req: FastifyRequest, svc: Services): string {
  const peer = req.raw.socket.remoteAddress;
  const r = resolveSource(peer, forwardingHeaders(req.raw.rawHeaders), policyOf(svc.ipPolicy.view().trustedProxies));
  return r.ok ? r.key : (peer ?? 'unknown');
}

/** The source policy of back-office requests: the platform's trusted proxies, every address accepted. */
let compiled: { text: string; policy: SourceIpPolicy } | null = null;
function policyOf(trustedProxies: string[]): SourceIpPolicy {
  const text = trustedProxies.join(',');
  if (compiled?.text !== text) {
    compiled = {
      text,
      policy: {
        trustedProxies: CidrList.parse(trustedProxies),
        allowlist: null,
        denylist: CidrList.parse([]),
        allowIpv4: true,
        allowIpv6: true,
      },
    };
  }
  return compiled.policy;
}

// --- the session cookie ----------------------------------------------------------------------------

/**
 * A surface's session cookie: `HttpOnly`, `SameSite=Strict`, `Path=/`; `Secure` (and the
 * `__Host-` name, which browsers accept only so) when the service is reached over TLS, as
 * PUBLIC_BASE_URL says. Its value is a session id: 43 base64url characters.
 */
export class SessionCookie {
  readonly #base: string;
  constructor(base: string) {
    this.#base = base;
  }

  name(svc: Services): string {
    return secureCookies(svc) ? `__Host-${this.#base}` : this.#base;
  }

  read(req: FastifyRequest, svc: Services): string | null {
    const header = req.headers.cookie;
    if (typeof header !== 'string') return null;
    const name = this.name(svc);
    for (const part of header.split(';')) {
      const i = part.indexOf('=');
      if (i > 0 && part.slice(0, i).trim() === name) {
        const v = part.slice(i + 1).trim();
        return /^[A-Za-z0-9_-]{43}$/.test(v) ? v : null;
      }
    }
    return null;
  }

  /** Sets the cookie to a session id, or clears it (null). */
  write(reply: FastifyReply, svc: Services, sessionId: string | null): void {
    const attrs = ['Path=/', 'HttpOnly', 'SameSite=Strict', ...(secureCookies(svc) ? ['Secure'] : [])];
    const value = sessionId === null ? `=; Max-Age=0` : `=${sessionId}; Max-Age=${SESSION_ABSOLUTE_SECONDS}`;
    reply.header('set-cookie', `${this.name(svc)}${value}; ${attrs.join('; ')}`);
  }
}

function secureCookies(svc: Services): boolean {
  return svc.config.publicBaseUrl.startsWith('https://');
}

// --- state-changing browser requests --------------------------------------------------------------

/**
 * A browser's request from another site: its `Origin` (sent with every cross-origin request and
 * every POST) names another host than the one it was sent to and than PUBLIC_BASE_URL's.
 */
export function crossSite(req: FastifyRequest, svc: Services): boolean {
  const origin = req.headers.origin;
  if (origin === undefined) return false;
  let host: string;
  try {
    host = new URL(origin).host;
  } catch {
    return true;
  }
  return host !== req.headers.host && host !== new URL(svc.config.publicBaseUrl).host;
}

/**
 * A state-changing request of a browser surface's own endpoints: JSON (a cross-site form cannot send
 * it) from this site. A body is known by its headers too (a length, or chunks), so the check holds
 * before the body is read (the portal's onRequest hook) as after (the console's handlers).
 */
export function sameSiteJson(req: FastifyRequest, svc: Services): void {
  if (crossSite(req, svc)) throw new AdminError('ADMIN_FORBIDDEN', 'a request from another site is refused');
  const type = req.headers['content-type'];
  const length = req.headers['content-length'];
  const hasBody = req.body !== undefined || (length !== undefined && length !== '0') || req.headers['transfer-encoding'] !== undefined;
  if (hasBody && (typeof type !== 'string' || !/^application\/json\s*(;|$)/i.test(type))) {
    throw new AdminError('ADMIN_VALIDATION_FAILED', 'Content-Type must be application/json');
  }
}

/** The session's CSRF token in `X-CSRF-Token`, and no foreign `Origin`: 403 ADMIN_FORBIDDEN otherwise. */
export function requireCsrf(req: FastifyRequest, svc: Services, csrfToken: string): void {
  if (crossSite(req, svc)) throw new AdminError('ADMIN_FORBIDDEN', 'a request from another site is refused');
  const csrf = req.headers['x-csrf-token'];
  if (typeof csrf !== 'string' || !secretEquals(csrf, csrfToken)) {
    throw new AdminError('ADMIN_FORBIDDEN', 'a request that changes something needs its session CSRF token (X-CSRF-Token)');
  }
}

export const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * A refused sign-in as a surface answers it, under its codes' prefix: 429 `_RATE_LIMITED` with
 * Retry-After when throttled, 503 `_UNAVAILABLE` with Retry-After when as many sign-ins as the
 * instance admits at once are in progress (SIGN_IN_MAX_CONCURRENT), else 401 (`PORTAL_TOTP_REQUIRED` when the portal's second factor is
 * asked for, `_UNAUTHORIZED` otherwise).
 */
export function refuseSignIn(reply: FastifyReply, err: SignInRefused, prefix: 'ADMIN' | 'PORTAL'): FastifyReply {
  if (err.kind === 'THROTTLED') {
    return reply
      .code(429)
      .header('retry-after', String(err.retryAfterSeconds))
      .send({ code: `${prefix}_RATE_LIMITED` satisfies AdminCode | PortalCode, message: err.message });
  }
  if (err.kind === 'BUSY') {
    return reply
      .code(503)
      .header('retry-after', String(err.retryAfterSeconds))
      .send({ code: `${prefix}_UNAVAILABLE` satisfies AdminCode | PortalCode, message: err.message });
  }
  const code: AdminCode | PortalCode =
    err.kind === 'SECOND_FACTOR_REQUIRED' && prefix === 'PORTAL' ? 'PORTAL_TOTP_REQUIRED' : `${prefix}_UNAUTHORIZED`;
  return reply.code(401).send({ code, message: err.message });
}

// --- the pages ------------------------------------------------------------------------------------

/** The headers of every answer of a browser surface: no inline script or style, no framing, nothing cached. */
export const SECURITY_HEADERS: Record<string, string> = {
  'content-security-policy': [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self'",
    "connect-src 'self'",
    "form-action 'self'",
    "frame-ancestors 'none'",
    "base-uri 'none'",
  ].join('; '),
  'x-frame-options': 'DENY',
  'referrer-policy': 'same-origin',
  'x-content-type-options': 'nosniff',
  'cache-control': 'no-store',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
  'permissions-policy': 'camera=(), microphone=(), geolocation=(), payment=()',
  'x-robots-tag': 'noindex, nofollow',
};

const ICON =
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" fill="#1f5fbf"/><path d="M4 11V5l4 3 4-3v6" fill="none" stroke="#fff" stroke-width="1.6"/></svg>';

/**
 * A browser surface's page, script and stylesheet at `/`, `/assets/<name>.js` and `.css` of its
 * scope (the page routes by the URL's fragment), with the security headers on every answer.
 */
export function servePages(scope: FastifyInstance, o: { name: string; title: string; assets: () => Promise<UiAssets> }): void {
  const prefix = scope.prefix;
  const page = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${o.title}</title>
<link rel="icon" href="${prefix}/assets/icon.svg" type="image/svg+xml">
<link rel="stylesheet" href="${prefix}/assets/${o.name}.css">
<script type="module" src="${prefix}/assets/${o.name}.js"></script>
</head>
<body>
<div id="app"><p class="boot">Loading… 加载中…</p></div>
<noscript><p class="boot">This page needs JavaScript. 此页面需要 JavaScript。</p></noscript>
</body>
</html>
`;
  scope.addHook('onSend', async (_req, reply) => {
    reply.headers(SECURITY_HEADERS);
  });
  scope.get('/', async (_req, reply) => reply.type('text/html; charset=utf-8').send(page));
  scope.get(`/assets/${o.name}.js`, async (_req, reply) => reply.type('text/javascript; charset=utf-8').send((await o.assets()).script));
  scope.get(`/assets/${o.name}.css`, async (_req, reply) => reply.type('text/css; charset=utf-8').send((await o.assets()).css));
  // The tab's icon (without one, browsers ask for /favicon.ico and log its 404).
  scope.get('/assets/icon.svg', async (_req, reply) => reply.type('image/svg+xml').send(ICON));
}
