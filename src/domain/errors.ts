/**
 * The use cases' refusals, independent of any surface (no HTTP here: each surface maps them to its
 * own statuses and envelopes).
 */
export type ErrorDetails = Record<string, unknown>;

/**
 * What a use case can refuse, independent of any surface: each surface (open API, back office,
 * cashier, provider notifications) maps these once to its own status codes and envelopes
 * (src/http/open-answers.ts, src/backoffice-http/common.ts). `message`, when given, explains this refusal;
 * otherwise the surface's own text for the code is used.
 */
export const DOMAIN_CODES = [
  'NOT_FOUND',
  'VALIDATION_FAILED',
  'IDEMPOTENCY_CONFLICT',
  'CONFLICT',
  'STATE_INVALID',
  'CHANNEL_UNAVAILABLE',
  'TRADE_SCOPE_UNAVAILABLE',
  'LIMIT_EXCEEDED',
  'PROVIDER_REJECTED',
  'RATE_LIMITED',
  'UNAVAILABLE',
] as const;
export type DomainCode = (typeof DOMAIN_CODES)[number];

export class DomainError extends Error {
  override name = 'DomainError';
  readonly code: DomainCode;
  /** The refusal's own explanation, or undefined for the surface's text for the code. */
  readonly explanation: string | undefined;
  readonly details: ErrorDetails | undefined;
  /** What was not found or refused (`order`, `app`, `key`, ...), for the surfaces that name it. */
  readonly entity: string | undefined;
  /** UNAVAILABLE, RATE_LIMITED: when a retry may succeed. */
  readonly retryAfterSeconds: number | undefined;
  constructor(code: DomainCode, message?: string, o: { details?: ErrorDetails; entity?: string; retryAfterSeconds?: number } = {}) {
    super(message ?? code);
    this.code = code;
    this.explanation = message;
    this.details = o.details;
    this.entity = o.entity;
    this.retryAfterSeconds = o.retryAfterSeconds;
  }
}

/**
 * A query parameter outside its constraint: 400 OPEN_API_BODY_INVALID with `details.field` naming
 * it (the closed table's one code for input that breaks a constraint; docs/decisions.md).
 */
export function invalidQuery(field: string, message: string): DomainError {
  return new DomainError('VALIDATION_FAILED', message, { details: { field } });
}
