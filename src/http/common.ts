/** Helpers shared by the HTTP surfaces. */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { guardJson } from '../gate/json-guard.ts';

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

export class BodyError extends Error {
  readonly kind: 'INVALID' | 'TOO_LARGE';
  constructor(kind: 'INVALID' | 'TOO_LARGE', message: string) {
    super(message);
    this.kind = kind;
  }
}

export interface ParsedBody {
  raw: Buffer;
  /** undefined when the body was empty. */
  value: unknown;
  decimalLiterals: ReadonlySet<string>;
}

const EMPTY: ReadonlySet<string> = new Set();

/**
 * `ignored`: the endpoint reads no body (seed: "a valid JSON body sent anyway is ignored"), so a
 * valid body is refused only for what the seed names: invalid JSON and duplicate keys. Forbidden
 * keys and excessive depth matter only where the body is read.
 */
export function parseJsonBody(raw: Buffer, opts: { ignored?: boolean } = {}): ParsedBody {
  const g = guardJson(raw);
  if (!g.ok && opts.ignored && (g.reason === 'FORBIDDEN_KEY' || g.reason === 'TOO_DEEP')) {
    return { raw, value: undefined, decimalLiterals: EMPTY };
  }
  if (!g.ok) {
    const why =
      g.reason === 'DUPLICATE_KEY'
        ? 'the body has a duplicate key'
        : g.reason === 'FORBIDDEN_KEY'
          ? 'the body has a forbidden key'
          : g.reason === 'TOO_DEEP'
            ? 'the body is nested too deeply'
            : 'the body is not valid JSON';
    throw new BodyError('INVALID', why);
  }
  if (g.empty) return { raw, value: undefined, decimalLiterals: EMPTY };
  return { raw, value: g.value, decimalLiterals: g.nonIntegerLiteralKeys };
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
      done(null, parseJsonBody(body as Buffer));
    } catch (err) {
      done(err as Error, undefined);
    }
  });
}
