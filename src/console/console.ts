/**
 * The operators' web console at /console (docs/console.md): one HTML page with no inline script or
 * style, its script and stylesheet (src/console/bundle.ts), and the session endpoints under
 * /console/api (sign in, who am I, sign out, change my password). Every other read and change goes
 * to the admin API (/api/admin/v1) with the session cookie and the session's CSRF token, where each
 * route's role rule is the one check (src/backoffice-http/operator-auth.ts).
 *
 *   GET    /console                   the page (the console routes by the URL's fragment)
 *   GET    /console/assets/console.js the page's one script;  GET /console/assets/console.css
 *   GET    /console/api/session       the signed-in operator, its permissions and CSRF token; 401 otherwise
 *   POST   /console/api/session       sign in {name, password}: a new session cookie (never one offered)
 *   DELETE /console/api/session       sign out (CSRF token)
 *   POST   /console/api/password      {currentPassword, newPassword} (CSRF token); the other sessions end
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { installBackOffice, bodyOf } from '../backoffice-http/common.ts';
import { AdminError } from '../backoffice-http/errors.ts';
import { type Actor, PERMISSIONS, can } from '../domain/operators.ts';
import {
  cookieSession,
  crossSite,
  requestIdOf,
  sessionActor,
  sessionCookieOf,
  setSessionCookie,
  sourceIpOf,
} from '../backoffice-http/operator-auth.ts';
import { changePasswordSchema, signInSchema } from '../backoffice-http/schemas.ts';
import type { Services } from '../services.ts';
import { SignInRefused, changeOwnPassword, sessionHash, sessionOf, signIn, signOut } from '../usecases/operators.ts';
import { consoleAssets } from './bundle.ts';

const SECURITY_HEADERS: Record<string, string> = {
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

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Operator console · Merchant Payment Service</title>
<link rel="stylesheet" href="/console/assets/console.css">
<script type="module" src="/console/assets/console.js"></script>
</head>
<body>
<div id="app"><p class="boot">Loading the console…</p></div>
<noscript><p class="boot">The console needs JavaScript.</p></noscript>
</body>
</html>
`;

function sessionView(s: { operatorId: string; operatorName: string; role: Actor['role']; csrfToken: string; expiresAt: Date }) {
  return {
    operator: { operatorId: s.operatorId, name: s.operatorName, role: s.role },
    permissions: PERMISSIONS.filter((p) => can(s.role, p)),
    csrfToken: s.csrfToken,
    expiresAt: s.expiresAt.toISOString(),
  };
}

const unauthorized = () => new AdminError('ADMIN_UNAUTHORIZED', 'sign in first');

/** A state-changing console request: JSON (a cross-site form cannot send it) from this site. */
function sameSiteJson(req: FastifyRequest, svc: Services): void {
  if (crossSite(req, svc)) throw new AdminError('ADMIN_FORBIDDEN', 'a request from another site is refused');
  const type = req.headers['content-type'];
  if (req.body !== undefined && (typeof type !== 'string' || !/^application\/json\s*(;|$)/i.test(type))) {
    throw new AdminError('ADMIN_VALIDATION_FAILED', 'Content-Type must be application/json');
  }
}

export async function consolePlugin(scope: FastifyInstance, opts: { svc: Services }): Promise<void> {
  const { svc } = opts;
  scope.addHook('onSend', async (_req, reply) => {
    reply.headers(SECURITY_HEADERS);
  });

  const page = async (_req: FastifyRequest, reply: FastifyReply) => reply.type('text/html; charset=utf-8').send(PAGE);
  scope.get('/', page);
  scope.get('/assets/console.js', async (_req, reply) => reply.type('text/javascript; charset=utf-8').send((await consoleAssets()).script));
  scope.get('/assets/console.css', async (_req, reply) => reply.type('text/css; charset=utf-8').send((await consoleAssets()).css));

  await scope.register(
    async (api) => {
      // Each endpoint checks its session itself (signing in needs none).
      installBackOffice(api, null, 'console request failed');

      /** The request's live session, checked like the admin API checks it (CSRF on a change). */
      const session = async (req: FastifyRequest, change: boolean) => {
        // On a change, the console's own checks (this site, JSON) come before the CSRF token's.
        const { id, s } = await cookieSession(req, svc, { change, unauthorized, beforeCsrf: () => sameSiteJson(req, svc) });
        const actor = sessionActor(s, { sourceIp: sourceIpOf(req, svc), requestId: requestIdOf(req) });
        return { id, s, actor };
      };

      api.get('/session', async (req) => sessionView((await session(req, false)).s));

      api.post('/session', async (req, reply) => {
        sameSiteJson(req, svc);
        const b = bodyOf(req, signInSchema);
        const requestId = requestIdOf(req);
        const sourceIp = sourceIpOf(req, svc);
        // Whatever session the browser holds, signing in starts a new one (and ends that one).
        const previous = sessionCookieOf(req, svc);
        let created;
        try {
          created = await signIn(svc, {
            name: b.name as string,
            password: b.password as string,
            sourceIp,
            userAgent: typeof req.headers['user-agent'] === 'string' ? req.headers['user-agent'] : null,
            requestId,
          });
        } catch (err) {
          if (!(err instanceof SignInRefused)) throw err;
          if (err.kind === 'THROTTLED') {
            return reply
              .code(429)
              .header('retry-after', String(err.retryAfterSeconds))
              .send({ code: 'ADMIN_RATE_LIMITED', message: err.message });
          }
          return reply.code(401).send({ code: 'ADMIN_UNAUTHORIZED', message: err.message });
        }
        if (previous !== null) {
          const old = await sessionOf(svc, previous);
          if (old) {
            await signOut(svc, sessionActor(old, { sourceIp, requestId }), previous);
          }
        }
        setSessionCookie(reply, svc, created.sessionId);
        return sessionView({
          operatorId: created.operator.id,
          operatorName: created.operator.name,
          role: created.operator.role,
          csrfToken: created.csrfToken,
          expiresAt: created.expiresAt,
        });
      });

      api.delete('/session', async (req, reply) => {
        const { id, actor } = await session(req, true);
        await signOut(svc, actor, id);
        setSessionCookie(reply, svc, null);
        return reply.code(204).send();
      });

      api.post('/password', async (req, reply) => {
        const { id, actor } = await session(req, true);
        const b = bodyOf(req, changePasswordSchema);
        // A refusal (VALIDATION_FAILED: 400 ADMIN_VALIDATION_FAILED with its explanation) is the error handler's.
        await changeOwnPassword(svc, actor, sessionHash(id), b.currentPassword as string, b.newPassword as string);
        return reply.code(204).send();
      });
    },
    { prefix: '/api' },
  );
}
