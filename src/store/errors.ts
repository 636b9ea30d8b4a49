/**
 * The store's named errors: what the layers above may catch or recognise, instead of PostgreSQL's
 * SQLSTATE codes (which never leave src/store/; test/unit/architecture.test.ts checks).
 */

/** SQLSTATE codes the store recognises. */
const UNIQUE_VIOLATION = '23505';
/** A byte sequence invalid in the database's encoding, and a value no text may hold (U+0000). */
const UNSTORABLE_TEXT = new Set(['22021', '22P05']);

interface PgError {
  code?: string;
  table?: string;
  constraint?: string;
}

/** A unique violation of `table` (on a constraint other than `except`, when given). */
export function isUniqueViolation(err: unknown, table: string, except?: string): boolean {
  const e = err as PgError | null;
  return e?.code === UNIQUE_VIOLATION && e.table === table && (except === undefined || e.constraint !== except);
}

/** A value PostgreSQL cannot store as text (U+0000): bad input that got past the checks, not a fault. */
export function isUnstorableText(err: unknown): boolean {
  const code = (err as PgError | null)?.code;
  return code !== undefined && UNSTORABLE_TEXT.has(code);
}

/** The refund number is already another refund's of the app (two orders raced one number). */
export class RefundNumberTaken extends Error {
  override name = 'RefundNumberTaken';
  constructor(options?: ErrorOptions) {
    super('the refund number is already used', options);
  }
}
