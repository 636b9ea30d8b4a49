/**
 * The closed error table of the open API (seed "Errors", decisions.md section 4).
 * docs/errors.md lists the same rows; test/unit/errors-doc.test.ts checks both ways.
 */
export const OPEN_API_ERRORS = {
  OPEN_API_HEADER_INVALID: { status: 400, message: 'A required request header is missing or malformed.' },
  OPEN_API_BODY_INVALID: { status: 400, message: 'The request body is invalid.' },
  OPEN_API_CONTENT_TYPE_INVALID: { status: 400, message: 'Content-Type must be application/json.' },
  OPEN_API_AUTH_FAILED: { status: 401, message: 'Authentication failed.' },
  OPEN_API_SOURCE_IP_REJECTED: { status: 403, message: 'The source address is not allowed.' },
  OPEN_API_NOT_FOUND: { status: 404, message: 'Not found.' },
  OPEN_API_NONCE_REPLAYED: { status: 409, message: 'The nonce has already been used.' },
  OPEN_API_IDEMPOTENCY_CONFLICT: { status: 409, message: 'The same merchant number was used with different content.' },
  OPEN_API_REQUEST_ID_CONFLICT: { status: 409, message: 'The request id was already used for a different request.' },
  OPEN_API_STATE_INVALID: { status: 409, message: 'The operation is not allowed in the current state.' },
  OPEN_API_BODY_TOO_LARGE: { status: 413, message: 'The request body is larger than 65536 bytes.' },
  OPEN_API_CHANNEL_UNAVAILABLE: { status: 422, message: 'The channel is not available for this application.' },
  OPEN_API_TRADE_SCOPE_UNAVAILABLE: { status: 422, message: 'The declared trade form is not available for this application.' },
  OPEN_API_LIMIT_EXCEEDED: { status: 422, message: 'A platform limit was exceeded.' },
  OPEN_API_RATE_LIMITED: { status: 429, message: 'Too many requests.' },
  OPEN_API_PROVIDER_REJECTED: { status: 502, message: 'The payment provider rejected the operation.' },
  OPEN_API_GUARD_UNAVAILABLE: { status: 503, message: 'The service is temporarily unavailable.' },
} as const satisfies Record<string, { status: number; message: string }>;

export type OpenApiCode = keyof typeof OPEN_API_ERRORS;

export type ErrorDetails = Record<string, unknown>;

/** A contract failure: becomes the failure envelope {code, message, requestId[, details]}. */
export class ApiError extends Error {
  readonly code: OpenApiCode;
  readonly status: number;
  readonly details: ErrorDetails | undefined;
  readonly headers: Record<string, string> | undefined;
  constructor(code: OpenApiCode, message?: string, details?: ErrorDetails, headers?: Record<string, string>) {
    super(message ?? OPEN_API_ERRORS[code].message);
    this.code = code;
    this.status = OPEN_API_ERRORS[code].status;
    this.details = details;
    this.headers = headers;
  }
}

/** Back-office errors: {code, message}. */
export const ADMIN_ERRORS = {
  ADMIN_UNAUTHORIZED: 401,
  /** An operator's role does not allow the action, or a console request without its CSRF token (docs/console.md). */
  ADMIN_FORBIDDEN: 403,
  /** Too many failed sign-ins of a name or from an address. */
  ADMIN_RATE_LIMITED: 429,
  ADMIN_VALIDATION_FAILED: 400,
  ADMIN_NOT_FOUND: 404,
  ADMIN_CONFLICT: 409,
  ADMIN_STATE_INVALID: 409,
  ADMIN_PROVIDER_REJECTED: 502,
  ADMIN_UNAVAILABLE: 503,
} as const;
export type AdminCode = keyof typeof ADMIN_ERRORS;

export class AdminError extends Error {
  readonly code: AdminCode;
  readonly status: number;
  constructor(code: AdminCode, message: string) {
    super(message);
    this.code = code;
    this.status = ADMIN_ERRORS[code];
  }
}

/**
 * What a use case can refuse, independent of any surface: each surface (open API, back office,
 * cashier, provider notifications) maps these once to its own status codes and envelopes
 * (src/http/open-answers.ts, src/http/admin.ts). `message`, when given, explains this refusal;
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
