/**
 * Error classes of the SDK. Every error the client throws on purpose is an MpsError; API failures
 * (a non-2xx answer carrying the failure envelope {code, message, requestId}) are PaymentApiError,
 * with one subclass per HTTP status family so callers can use instanceof.
 */

/** The closed table of open-API error codes (seed "Errors", decisions.md section 4). */
export type ApiErrorCode =
  | 'OPEN_API_HEADER_INVALID'
  | 'OPEN_API_BODY_INVALID'
  | 'OPEN_API_CONTENT_TYPE_INVALID'
  | 'OPEN_API_AUTH_FAILED'
  | 'OPEN_API_SOURCE_IP_REJECTED'
  | 'OPEN_API_NOT_FOUND'
  | 'OPEN_API_NONCE_REPLAYED'
  | 'OPEN_API_IDEMPOTENCY_CONFLICT'
  | 'OPEN_API_REQUEST_ID_CONFLICT'
  | 'OPEN_API_STATE_INVALID'
  | 'OPEN_API_BODY_TOO_LARGE'
  | 'OPEN_API_CHANNEL_UNAVAILABLE'
  | 'OPEN_API_TRADE_SCOPE_UNAVAILABLE'
  | 'OPEN_API_LIMIT_EXCEEDED'
  | 'OPEN_API_RATE_LIMITED'
  | 'OPEN_API_PROVIDER_REJECTED'
  | 'OPEN_API_GUARD_UNAVAILABLE';

/** Base class of every error the SDK throws on purpose. */
export class MpsError extends Error {
  override name = 'MpsError';
}

export interface PaymentApiErrorInit {
  status: number;
  /** The failure envelope's `code` (a code outside the closed table is passed through). */
  code: ApiErrorCode | (string & {});
  message: string;
  /** The request id the platform reports (see PaymentApiError.requestId). */
  requestId: string;
  /** The X-SVC-Request-Id this client sent. */
  clientRequestId: string;
  details: Record<string, unknown> | undefined;
  headers: Record<string, string>;
  body: unknown;
}

/** A non-2xx answer whose JSON body carries a `code`: the platform's failure envelope. */
export class PaymentApiError extends MpsError {
  override name = 'PaymentApiError';
  readonly status: number;
  readonly code: ApiErrorCode | (string & {});
  /**
   * The request id the platform reports: the body's `requestId`, or the X-SVC-Request-Id response
   * header when the body's is empty (503 with an unavailable signing key). For the earliest
   * rejections (body guard, source IP, header form) it is a platform-generated `gw_...` id.
   */
  readonly requestId: string;
  /** The X-SVC-Request-Id this client sent; retry with it to get an idempotent replay. */
  readonly clientRequestId: string;
  readonly details: Record<string, unknown> | undefined;
  /** Response headers, names lower-cased. */
  readonly headers: Record<string, string>;
  /** The whole parsed failure envelope. */
  readonly body: unknown;
  constructor(init: PaymentApiErrorInit) {
    super(`${init.code}: ${init.message} (HTTP ${init.status}, requestId ${init.requestId || init.clientRequestId})`);
    this.status = init.status;
    this.code = init.code;
    this.requestId = init.requestId;
    this.clientRequestId = init.clientRequestId;
    this.details = init.details;
    this.headers = init.headers;
    this.body = init.body;
  }
}

/** 400 (header, body or Content-Type invalid) and 413 (body too large). */
export class InvalidRequestError extends PaymentApiError {
  override name = 'InvalidRequestError';
}
/** 401 OPEN_API_AUTH_FAILED: clock skew over 300 s, unknown or disabled app/key, bad signature. */
export class AuthenticationError extends PaymentApiError {
  override name = 'AuthenticationError';
}
/** 403 OPEN_API_SOURCE_IP_REJECTED; `details.reason` says why when the platform policy refused. */
export class PermissionDeniedError extends PaymentApiError {
  override name = 'PermissionDeniedError';
}
/** 404 OPEN_API_NOT_FOUND: neutral, says nothing about existence. */
export class NotFoundError extends PaymentApiError {
  override name = 'NotFoundError';
}
/** 409: nonce replay, idempotency conflict, request-id conflict, state invalid. */
export class ConflictError extends PaymentApiError {
  override name = 'ConflictError';
}
/** 422: channel, trade scope or platform limit. */
export class UnprocessableError extends PaymentApiError {
  override name = 'UnprocessableError';
}
/** 429 OPEN_API_RATE_LIMITED, after the client's own retries were used up. */
export class RateLimitedError extends PaymentApiError {
  override name = 'RateLimitedError';
  /** The Retry-After header in seconds, when the platform sent one. */
  readonly retryAfterSeconds: number | undefined;
  constructor(init: PaymentApiErrorInit & { retryAfterSeconds: number | undefined }) {
    super(init);
    this.retryAfterSeconds = init.retryAfterSeconds;
  }
}
/** 502 OPEN_API_PROVIDER_REJECTED. */
export class ProviderRejectedError extends PaymentApiError {
  override name = 'ProviderRejectedError';
}
/** 503 OPEN_API_GUARD_UNAVAILABLE, after the client's own retries were used up. */
export class ServiceUnavailableError extends PaymentApiError {
  override name = 'ServiceUnavailableError';
  /** The Retry-After header in seconds, when the platform sent one. */
  readonly retryAfterSeconds: number | undefined;
  constructor(init: PaymentApiErrorInit & { retryAfterSeconds: number | undefined }) {
    super(init);
    this.retryAfterSeconds = init.retryAfterSeconds;
  }
}

/** Builds the PaymentApiError subclass matching the HTTP status. */
export function apiErrorFor(init: PaymentApiErrorInit & { retryAfterSeconds: number | undefined }): PaymentApiError {
  switch (init.status) {
    case 400:
    case 413:
      return new InvalidRequestError(init);
    case 401:
      return new AuthenticationError(init);
    case 403:
      return new PermissionDeniedError(init);
    case 404:
      return new NotFoundError(init);
    case 409:
      return new ConflictError(init);
    case 422:
      return new UnprocessableError(init);
    case 429:
      return new RateLimitedError(init);
    case 502:
      return new ProviderRejectedError(init);
    case 503:
      return new ServiceUnavailableError(init);
    default:
      return new PaymentApiError(init);
  }
}

export type ResponseSignatureFailure =
  'MISSING_SIGNATURE' | 'PARTIAL_HEADERS' | 'MALFORMED_HEADER' | 'UNKNOWN_KEY_ID' | 'REQUEST_ID_MISMATCH' | 'BAD_SIGNATURE';

/**
 * The response carried response-signature headers that did not verify (or only some of them):
 * treat the answer as forged or tampered with. Its body is NOT trusted and not parsed.
 */
export class ResponseSignatureError extends MpsError {
  override name = 'ResponseSignatureError';
  readonly reason: ResponseSignatureFailure;
  readonly status: number;
  /** The X-SVC-Request-Id this client sent. */
  readonly requestId: string;
  readonly headers: Record<string, string>;
  constructor(
    reason: ResponseSignatureFailure,
    message: string,
    init: { status: number; requestId: string; headers: Record<string, string> },
  ) {
    super(`response signature check failed (${reason}): ${message}`);
    this.reason = reason;
    this.status = init.status;
    this.requestId = init.requestId;
    this.headers = init.headers;
  }
}

/**
 * No HTTP answer: connection refused or reset, DNS failure, timeout. The request may or may not
 * have reached the platform; retrying with the same `requestId` is safe (idempotent replay).
 */
export class NetworkError extends MpsError {
  override name = 'NetworkError';
  /** The X-SVC-Request-Id this client sent. */
  readonly requestId: string;
  /** True when the client's timeout (timeoutMs) fired. */
  readonly timedOut: boolean;
  /** How many times the request was sent. */
  readonly attempts: number;
  constructor(message: string, init: { requestId: string; timedOut: boolean; attempts: number; cause: unknown }) {
    super(message, { cause: init.cause });
    this.requestId = init.requestId;
    this.timedOut = init.timedOut;
    this.attempts = init.attempts;
  }
}

/**
 * An answer that is neither a success with a JSON body nor a failure envelope: a 2xx body that is
 * not a JSON object, a non-2xx without `code` (a route not mounted, a proxy page, a redirect), or
 * a body over the transport's size limit.
 */
export class UnexpectedResponseError extends MpsError {
  override name = 'UnexpectedResponseError';
  readonly status: number;
  /** The X-SVC-Request-Id this client sent. */
  readonly requestId: string;
  readonly headers: Record<string, string>;
  /** The body as text (at most 2,000 characters). */
  readonly bodyText: string;
  constructor(message: string, init: { status: number; requestId: string; headers: Record<string, string>; bodyText: string }) {
    super(message);
    this.status = init.status;
    this.requestId = init.requestId;
    this.headers = init.headers;
    this.bodyText = init.bodyText.slice(0, 2000);
  }
}

export type NotificationFailure =
  | 'MISSING_HEADER'
  | 'DUPLICATE_HEADER'
  | 'MALFORMED_HEADER'
  | 'UNKNOWN_KEY_ID'
  | 'TIMESTAMP_OUT_OF_TOLERANCE'
  | 'BAD_SIGNATURE'
  | 'BODY_NOT_JSON'
  | 'EVENT_ID_MISMATCH';

/** An event notification that must be rejected (answer it with a non-2xx, e.g. 400). */
export class NotificationVerificationError extends MpsError {
  override name = 'NotificationVerificationError';
  readonly reason: NotificationFailure;
  constructor(reason: NotificationFailure, message: string) {
    super(`notification rejected (${reason}): ${message}`);
    this.reason = reason;
  }
}
