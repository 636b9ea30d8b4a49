/** Helpers of the back-office surfaces: constant-time secret comparison, the admin token, the strict JSON body parser. */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { BodyError, parseJsonBody } from '../gate/body.ts';

export { BodyError, type ParsedBody, parseJsonBody } from '../gate/body.ts';

/** Constant-time comparison of secrets of any length (hash both, compare digests). */
export function secretEquals(a: string, b: string): boolean {
  const ha = createHash('sha256').update(a).digest();
  const hb = createHash('sha256').update(b).digest();
  return timingSafeEqual(ha, hb);
}

/** True when the request carries `Authorization: Bearer <adminToken>` (constant-time). */
export function hasAdminToken(authorization: string | undefined, adminToken: string): boolean {
  // The scheme name is case-insensitive (RFC 9110, section 11.1).
  const token = typeof authorization === 'string' && /^bearer /i.test(authorization) ? authorization.slice(7) : '';
  return secretEquals(token, adminToken);
}

/**
 * Replaces Fastify's parsers in a scope with one that accepts any (or no) Content-Type, counts
 * the body while streaming against `limitBytes`, and runs the strict JSON guard. The media type
 * itself is judged later (the open gate's step 7), not here.
 */
export function installRawJsonParser(scope: FastifyInstance, limitBytes: number): void {
  scope.removeAllContentTypeParsers();
  scope.addContentTypeParser('*', { bodyLimit: limitBytes, parseAs: 'buffer' }, (_req, body, done) => {
    try {
      const parsed = parseJsonBody(body as Buffer);
      // No replay or signature here: a body no schema admits is refused with the rest.
      if (parsed.schemaRefusal !== undefined) throw new BodyError('INVALID', parsed.schemaRefusal);
      done(null, parsed);
    } catch (err) {
      done(err as Error, undefined);
    }
  });
}
