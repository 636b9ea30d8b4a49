/**
 * The closed error table of the open API (seed "Errors", decisions.md section 4): each code's HTTP
 * status and message. The open surface's own (the gate answers with it, src/http/open-answers.ts
 * maps the use cases' refusals onto it); docs/errors.md lists the same rows and
 * test/unit/errors-doc.test.ts checks both ways.
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

/**
 * Answers that are not kept for X-SVC-Request-Id replay (decisions.md section 5): a rate limit or
 * a temporary unavailability says "try again", so a retry with the same request id executes afresh.
 */
export function keptForReplay(status: number): boolean {
  return status !== OPEN_API_ERRORS.OPEN_API_RATE_LIMITED.status && status !== OPEN_API_ERRORS.OPEN_API_GUARD_UNAVAILABLE.status;
}
