/** Step 1 of the gate for any scope that reads JSON: the strict JSON guard's verdict on a raw body. */
import { guardJson } from '../lib/json-guard.ts';

export class BodyError extends Error {
  readonly kind: 'INVALID' | 'TOO_LARGE';
  constructor(kind: 'INVALID' | 'TOO_LARGE', message: string) {
    super(message);
    this.kind = kind;
  }
}

export interface ParsedBody {
  raw: Buffer;
  /** undefined when the body was empty, or when `schemaRefusal` is set. */
  value: unknown;
  decimalLiterals: ReadonlySet<string>;
  /**
   * Valid JSON that no strict schema admits (a `__proto__` or `constructor.prototype` key, nesting
   * past 64 levels): refused at step 9 as a field outside the schema, by the endpoint that reads
   * it, with the merchant's request id, signed and kept for replay. The value is never built.
   */
  schemaRefusal?: string;
}

const EMPTY: ReadonlySet<string> = new Set();

/**
 * Step 1 refuses only what the seed names there: invalid JSON, duplicate keys (and the size, while
 * reading). `ignored`: the endpoint reads no body (seed: "a valid JSON body sent anyway is
 * ignored"), so a forbidden key or excessive depth is not even noted.
 */
export function parseJsonBody(raw: Buffer, opts: { ignored?: boolean } = {}): ParsedBody {
  const g = guardJson(raw);
  if (!g.ok && (g.reason === 'FORBIDDEN_KEY' || g.reason === 'TOO_DEEP')) {
    if (opts.ignored) return { raw, value: undefined, decimalLiterals: EMPTY };
    const schemaRefusal =
      g.reason === 'FORBIDDEN_KEY'
        ? 'the body has a key outside the schema (__proto__ or constructor.prototype)'
        : 'the body is nested deeper than any field of the schema (64 levels at most)';
    return { raw, value: undefined, decimalLiterals: EMPTY, schemaRefusal };
  }
  if (!g.ok) {
    throw new BodyError('INVALID', g.reason === 'DUPLICATE_KEY' ? 'the body has a duplicate key' : 'the body is not valid JSON');
  }
  if (g.empty) return { raw, value: undefined, decimalLiterals: EMPTY };
  return { raw, value: g.value, decimalLiterals: g.nonIntegerLiteralKeys };
}
