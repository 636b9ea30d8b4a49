/**
 * @mps/sdk: merchant SDK of the merchant payment service.
 * Typed client, request signing, response and notification verification, key helpers.
 */
export {
  APP_ID_PATTERN,
  generateNonce,
  generateRequestId,
  HEADERS,
  headersToRecord,
  KEY_ID_PATTERN,
  NONCE_PATTERN,
  REQUEST_ID_PATTERN,
  type ResponseVerification,
  type SignRequestInput,
  signRequestHeaders,
  type VerifyResponseInput,
  verifyResponseSignature,
} from './auth.ts';
export {
  type ApiResult,
  createFetchTransport,
  DEFAULT_MAX_RESPONSE_BYTES,
  PaymentClient,
  type PaymentClientOptions,
  parseRetryAfter,
  type RequestOptions,
  type StatementDownload,
  type Transport,
  type TransportRequest,
  type TransportResponse,
} from './client.ts';
export {
  type ApiErrorCode,
  AuthenticationError,
  ConflictError,
  InvalidRequestError,
  MpsError,
  NetworkError,
  NotFoundError,
  type NotificationFailure,
  NotificationVerificationError,
  PaymentApiError,
  PermissionDeniedError,
  ProviderRejectedError,
  RateLimitedError,
  ResponseSignatureError,
  type ResponseSignatureFailure,
  ServiceUnavailableError,
  UnexpectedResponseError,
  UnprocessableError,
} from './errors.ts';
export type { HeadersInput } from './internal.ts';
export {
  DEFAULT_RSA_BITS,
  generateRsaKeyPair,
  type KeyInput,
  loadPrivateKey,
  loadPublicKey,
  loadPublicKeys,
  MAX_RSA_BITS,
  MIN_RSA_BITS,
  type PlatformPublicKeys,
  parsePlatformKeysJson,
  type RsaKeyPairPem,
} from './keys.ts';
export { extendTrust, isPlatformKeysResponse, keysAsPem, type PlatformKeyEntry, type PlatformKeysResponse } from './platform-keys.ts';
export {
  keyEndorsementSigningString,
  normalizeContentType,
  notificationSigningString,
  requestSigningString,
  responseSigningString,
  sha256Hex,
} from './signing.ts';
export type * from './types.ts';
export {
  DEFAULT_NOTIFICATION_TOLERANCE_SECONDS,
  type GenerateTestNotificationInput,
  generateTestNotificationHeaders,
  type TestNotification,
  type VerifyNotificationInput,
  verifyNotification,
} from './webhooks.ts';
