/**
 * The operators' web console at /console (docs/console.md): one HTML page with no inline script or
 * style, its script and stylesheet (built by src/lib/ui-bundle.ts), and the session endpoints under
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
import path from 'node:path';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { bodyOf, installBackOffice } from '../backoffice-http/common.ts';
import { AdminError } from '../backoffice-http/errors.ts';
import { consoleCookie, cookieSession, sessionActor } from '../backoffice-http/operator-auth.ts';
import { changePasswordSchema, signInSchema } from '../backoffice-http/schemas.ts';
import { refuseSignIn, requestIdOf, sameSiteJson, servePages, sourceIpOf } from '../backoffice-http/session-surface.ts';
import { type Actor, PERMISSIONS, can } from '../domain/operators.ts';
import { uiAssets } from '../lib/ui-bundle.ts';
import type { Services } from '../services.ts';
import { changeOwnPassword, sessionHash, sessionOf, signIn, signOut } from '../usecases/operators.ts';
import { SignInRefused } from '../usecases/sessions.ts';

const SRC = path.join(import.meta.dirname, '..');
/** The console's front end: src/console/ui (Preact), with the styles the UIs share (src/ui). */
export const consoleAssets = uiAssets(path.join(SRC, 'console/ui/main.tsx'), [path.join(SRC, 'ui/ui.css')]);

function sessionView(s: { operatorId: string; operatorName: string; role: Actor['role']; csrfToken: string; expiresAt: Date }) {
  return {
    operator: { operatorId: s.operatorId, name: s.operatorName, role: s.role },
    permissions: PERMISSIONS.filter((p) => can(s.role, p)),
    csrfToken: s.csrfToken,
    expiresAt: s.expiresAt.toISOString(),
  };
}

const unauthorized = () => new AdminError('ADMIN_UNAUTHORIZED', 'sign in first');

export async function consolePlugin(scope: FastifyInstance, opts: { svc: Services }): Promise<void> {
  const { svc } = opts;
  servePages(scope, { name: 'console', title: 'Operator console · Merchant Payment Service', assets: consoleAssets });

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
        const previous = consoleCookie.read(req, svc);
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
          return refuseSignIn(reply, err, 'ADMIN');
        }
        if (previous !== null) {
          const old = await sessionOf(svc, previous);
          if (old) {
            await signOut(svc, sessionActor(old, { sourceIp, requestId }), previous);
          }
        }
        consoleCookie.write(reply, svc, created.sessionId);
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
        consoleCookie.write(reply, svc, null);
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
