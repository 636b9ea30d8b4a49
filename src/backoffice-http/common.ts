/**
 * What the back-office surfaces (the admin API, the sandbox helpers, the console's endpoints) share: the admin bearer token
 * first, strict JSON bodies with the open API's 64 KB limit, and one mapping of every refusal to
 * `{code, message}` (decisions.md section 8): a refused body is 400 (413 when too large), a
 * use case's DomainError its admin code, any other fault 503, never a 500.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { DomainError, type DomainCode } from '../domain/errors.ts';
import { isUnstorableText } from '../store/errors.ts';
import { type AdminCode, AdminError } from './errors.ts';
import type { ObjectSchema } from '../domain/schema.ts';
import { validate } from '../domain/schema.ts';
import { BODY_LIMIT_BYTES } from '../gate/gate.ts';
import { BodyError, type ParsedBody, hasAdminToken, installRawJsonParser } from './basics.ts';

type Body = Record<string, unknown>;

/**
 * Re-reads a (guard-checked) body marking every number literal written with a fraction or an
 * exponent, at any depth, as a boxed Number: integer fields then refuse `5000.0` as a decimal.
 */
function markDecimals(raw: Buffer): unknown {
  const reviver = (_k: string, v: unknown, ctx?: { source?: string }) =>
    typeof v === 'number' && ctx?.source !== undefined && /[.eE]/.test(ctx.source) ? new Number(v) : v;
  return JSON.parse(raw.toString('utf8'), reviver as (k: string, v: unknown) => unknown);
}

export function bodyOf(req: FastifyRequest, schema: ObjectSchema): Body {
  const parsed = req.body as ParsedBody | undefined;
  if (parsed?.value === undefined) throw new AdminError('ADMIN_VALIDATION_FAILED', 'a JSON body is required');
  const value = markDecimals(parsed.raw);
  const v = validate(schema, value, '', parsed?.decimalLiterals);
  if (v) throw new AdminError('ADMIN_VALIDATION_FAILED', v.message);
  return value as Body;
}

/** bodyOf for an operation whose fields are all optional: no body at all is `{}`. */
export function optionalBodyOf(req: FastifyRequest, schema: ObjectSchema): Body {
  return (req.body as ParsedBody | undefined)?.value === undefined ? {} : bodyOf(req, schema);
}

/**
 * Errors of the back-office surfaces (admin and sandbox helpers) as `{code, message}`: a refused
 * body is 400 (413 when too large), any other fault 503, never a 500.
 */
export function adminErrorHandler(logMessage: string, codePrefix: 'ADMIN' | 'PORTAL' = 'ADMIN') {
  // The portal answers the same codes under its own prefix (PORTAL_NOT_FOUND, ...).
  const renamed =
    codePrefix === 'ADMIN'
      ? (reply: FastifyReply) => reply
      : (reply: FastifyReply) =>
          // A serializer of its own sets no media type: said here, as the default one says it.
          reply.type('application/json; charset=utf-8').serializer((b: unknown) => {
            const body = b as { code?: unknown };
            return JSON.stringify(typeof body.code === 'string' ? { ...body, code: body.code.replace(/^ADMIN_/, `${codePrefix}_`) } : b);
          });
  return (err: Error & { statusCode?: number; code?: string }, req: FastifyRequest, raw: FastifyReply) => {
    const reply = renamed(raw);
    if (err instanceof AdminError) return reply.code(err.status).send({ code: err.code, message: err.message });
    if (err instanceof DomainError) {
      const a = adminErrorOf(err);
      if (err.retryAfterSeconds !== undefined) reply.header('retry-after', String(err.retryAfterSeconds));
      return reply.code(a.status).send({ code: a.code, message: a.message });
    }
    if (err instanceof BodyError) {
      return err.kind === 'TOO_LARGE'
        ? reply.code(413).send({ code: 'ADMIN_VALIDATION_FAILED', message: err.message })
        : reply.code(400).send({ code: 'ADMIN_VALIDATION_FAILED', message: err.message });
    }
    if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE')
      return reply.code(413).send({ code: 'ADMIN_VALIDATION_FAILED', message: 'body too large' });
    if (typeof err.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 500) {
      return reply.code(400).send({ code: 'ADMIN_VALIDATION_FAILED', message: err.message });
    }
    // A value PostgreSQL cannot store (U+0000) that got past the checks above: bad input, not a fault.
    if (isUnstorableText(err)) {
      return reply
        .code(400)
        .send({ code: 'ADMIN_VALIDATION_FAILED', message: 'a value contains a character that cannot be stored (U+0000)' });
    }
    req.log.error({ err }, logMessage);
    return reply.code(503).send({ code: 'ADMIN_UNAVAILABLE', message: 'the service is temporarily unavailable' });
  };
}

/**
 * A back-office scope (the admin API, the sandbox helpers, the console's endpoints): strict JSON
 * bodies with the open API's 64 KB limit, authentication first (the admin bearer token, or the
 * admin API's own check of operators' tokens and sessions; null: each route checks its caller
 * itself, as the console's endpoints do), `{code, message}` for every error, an unknown path
 * included (404 after authentication).
 */
export function installBackOffice(
  scope: FastifyInstance,
  auth: string | ((req: FastifyRequest, reply: FastifyReply) => Promise<unknown>) | null,
  logMessage: string,
  codePrefix: 'ADMIN' | 'PORTAL' = 'ADMIN',
): void {
  installRawJsonParser(scope, BODY_LIMIT_BYTES);
  scope.addHook('onRequest', async (req, reply) => {
    if (auth === null) {
      // the route's own check
    } else if (typeof auth !== 'string') await auth(req, reply);
    else if (!hasAdminToken(req.headers.authorization, auth))
      throw new AdminError('ADMIN_UNAUTHORIZED', 'a valid admin bearer token is required');
    // PostgreSQL text cannot hold U+0000, and no id or filter of ours contains it: such a path
    // parameter names nothing (404) and such a query value is refused (400), before any lookup.
    for (const [name, v] of Object.entries((req.params ?? {}) as Record<string, unknown>)) {
      if (typeof v === 'string' && v.includes('\u0000')) throw new AdminError('ADMIN_NOT_FOUND', `${name.replace(/Id$/, '')} not found`);
    }
    for (const [name, v] of Object.entries((req.query ?? {}) as Record<string, unknown>)) {
      const values = Array.isArray(v) ? v : [v];
      if (values.some((x) => typeof x === 'string' && x.includes('\u0000'))) {
        throw new AdminError('ADMIN_VALIDATION_FAILED', `${name} must not contain the NUL character (U+0000)`);
      }
    }
  });
  scope.setErrorHandler(adminErrorHandler(logMessage, codePrefix));
  scope.setNotFoundHandler((req, reply) =>
    reply.code(404).send({ code: `${codePrefix}_NOT_FOUND`, message: `no route ${req.method} ${req.url.split('?')[0]}` }),
  );
}

const ADMIN_CODE_OF: Record<DomainCode, AdminCode> = {
  NOT_FOUND: 'ADMIN_NOT_FOUND',
  VALIDATION_FAILED: 'ADMIN_VALIDATION_FAILED',
  IDEMPOTENCY_CONFLICT: 'ADMIN_CONFLICT',
  CONFLICT: 'ADMIN_CONFLICT',
  STATE_INVALID: 'ADMIN_STATE_INVALID',
  CHANNEL_UNAVAILABLE: 'ADMIN_STATE_INVALID',
  TRADE_SCOPE_UNAVAILABLE: 'ADMIN_STATE_INVALID',
  LIMIT_EXCEEDED: 'ADMIN_STATE_INVALID',
  PROVIDER_REJECTED: 'ADMIN_PROVIDER_REJECTED',
  RATE_LIMITED: 'ADMIN_CONFLICT',
  UNAVAILABLE: 'ADMIN_UNAVAILABLE',
};

/** A use case's refusal as the back office answers it: `<entity> not found`, or the refusal's own explanation. */
export function adminErrorOf(err: DomainError): AdminError {
  const code = ADMIN_CODE_OF[err.code];
  if (err.code === 'NOT_FOUND') return new AdminError(code, `${err.entity ?? 'resource'} not found`);
  return new AdminError(
    code,
    err.explanation ?? (err.code === 'PROVIDER_REJECTED' ? 'the provider rejected the operation' : err.code.toLowerCase()),
  );
}
