/**
 * The OpenAPI 3.1 document of the open API, generated from the schemas the routes validate with
 * (src/domain/open-schemas.ts), the response schemas the tests check responses against
 * (src/domain/response-schemas.ts), the gate's header rules and the closed error table. Each named
 * schema object is published once under components.schemas and referenced by identity wherever
 * it occurs, so nothing is written twice. Served at GET /docs/openapi.json, next to the pages it
 * links to (authentication, events, errors, license: src/http/docs-pages.ts), all under
 * PUBLIC_BASE_URL.
 */
import type { FastifyInstance } from 'fastify';
import { OPEN_API_ERRORS, type OpenApiCode } from '../gate/open-errors.ts';
import { MERCHANT_NO_PATTERN, channelSchema, createOrderSchema, createRefundSchema, tradeScopeSchema } from '../domain/open-schemas.ts';
import {
  deliveryAttemptSchema,
  eventDetailSchema,
  eventListSchema,
  eventLogEntrySchema,
  failureSchema,
  feeProjectionSchema,
  latestAttemptSchema,
  orderCloseSchema,
  orderCreatedSchema,
  orderQuerySchema,
  orderSnapshotSchema,
  ratiosSchema,
  refundProjectionSchema,
  platformKeysSchema,
  redeliverySchema,
  refundSchema,
  settlementAccountSchema,
  settlementSchema,
  settlementViewSchema,
  statementSchema,
  statementTotalsSchema,
  timestampSchema,
  webhookEventSchema,
} from '../domain/response-schemas.ts';
import { EVENT_PAGE_DEFAULT, EVENT_PAGE_MAX } from '../domain/event-log.ts';
import { STATEMENT_CLOSE_DELAY_MS, STATEMENT_MAX_AGE_DAYS } from '../domain/statements.ts';
import { extensionOf } from '../domain/schema.ts';
import type { NotificationHeaders } from '../events/signer.ts';
import { SIGNED_HEADERS } from '../gate/headers.ts';
import { DOC_PAGES, DOC_PAGE_HEADERS, type DocPage, loadDocFiles, loadDocPages } from './docs-pages.ts';
import { registerReference } from './docs-reference.ts';

/** The schemas published under components.schemas, by name: the objects the routes and the tests validate with. */
export const COMPONENT_SCHEMAS: Record<string, object> = {
  CreateOrderRequest: createOrderSchema,
  CreateRefundRequest: createRefundSchema,
  Channel: channelSchema,
  TradeScope: tradeScopeSchema,
  Timestamp: timestampSchema,
  OrderSnapshot: orderSnapshotSchema,
  LatestAttempt: latestAttemptSchema,
  FeeProjection: feeProjectionSchema,
  OrderCreateResponse: orderCreatedSchema,
  OrderQueryResponse: orderQuerySchema,
  OrderCloseResponse: orderCloseSchema,
  RefundProjection: refundProjectionSchema,
  RefundResponse: refundSchema,
  SettlementView: settlementViewSchema,
  SettlementAccount: settlementAccountSchema,
  SettlementRatios: ratiosSchema,
  SettlementResponse: settlementSchema,
  StatementResponse: statementSchema,
  StatementTotals: statementTotalsSchema,
  EventLogEntry: eventLogEntrySchema,
  DeliveryAttempt: deliveryAttemptSchema,
  EventListResponse: eventListSchema,
  EventResponse: eventDetailSchema,
  RedeliveryResponse: redeliverySchema,
  PlatformKeysResponse: platformKeysSchema,
  FailureEnvelope: failureSchema,
  WebhookEventPayload: webhookEventSchema,
};
const SCHEMA_NAME = new Map(Object.entries(COMPONENT_SCHEMAS).map(([name, s]) => [s, name]));

/** The schemas other schemas extend (extendObject). */
const BASES = new Set<object>(Object.values(COMPONENT_SCHEMAS).flatMap((s) => extensionOf(s)?.base ?? []));

const ref = (section: string, name: string) => ({ $ref: `#/components/${section}/${name}` });

/**
 * `value` with every named schema object in it replaced by a `$ref` to its component (`self`, the
 * component being written, excepted). A schema made by extendObject is written as `allOf` its
 * base plus the additions, closed by `unevaluatedProperties: false`; a base is written open, since
 * every schema that includes it closes it.
 */
function withRefs(value: unknown, self?: object): unknown {
  if (Array.isArray(value)) return value.map((v) => withRefs(v));
  if (value === null || typeof value !== 'object') return value;
  const name = value === self ? undefined : SCHEMA_NAME.get(value);
  if (name !== undefined) return ref('schemas', name);
  const ext = extensionOf(value);
  if (ext) {
    const { description } = value as { description?: string };
    return {
      ...(description === undefined ? {} : { description }),
      allOf: [withRefs(ext.base)],
      type: 'object',
      required: ext.required,
      properties: withRefs(ext.properties),
      unevaluatedProperties: false,
    };
  }
  const entries = Object.entries(value).filter(([k]) => !(k === 'additionalProperties' && BASES.has(value)));
  return Object.fromEntries(entries.map(([k, v]) => [k, withRefs(v)]));
}

/** Which response headers a rejection with each code can carry: how far the request got through the gate (docs/authentication.md, "The gate, in order"). */
const REJECTION_HEADERS: Record<OpenApiCode, 'none' | 'request-id' | 'signed'> = {
  OPEN_API_HEADER_INVALID: 'none',
  OPEN_API_BODY_INVALID: 'signed', // at step 9; at step 1 it has none
  OPEN_API_CONTENT_TYPE_INVALID: 'signed',
  OPEN_API_AUTH_FAILED: 'request-id',
  OPEN_API_SOURCE_IP_REJECTED: 'request-id', // at step 6; at step 2 it has none
  OPEN_API_NOT_FOUND: 'signed',
  OPEN_API_NONCE_REPLAYED: 'request-id',
  OPEN_API_IDEMPOTENCY_CONFLICT: 'signed',
  OPEN_API_REQUEST_ID_CONFLICT: 'signed',
  OPEN_API_STATE_INVALID: 'signed',
  OPEN_API_BODY_TOO_LARGE: 'none',
  OPEN_API_CHANNEL_UNAVAILABLE: 'signed',
  OPEN_API_TRADE_SCOPE_UNAVAILABLE: 'signed',
  OPEN_API_LIMIT_EXCEEDED: 'signed',
  OPEN_API_RATE_LIMITED: 'signed',
  OPEN_API_PROVIDER_REJECTED: 'signed',
  OPEN_API_GUARD_UNAVAILABLE: 'signed', // as the step where it happened; unsigned when the signing key is unavailable
};

/** Every operation can be refused with these (seed: 413 and 503 on any endpoint; the gate's steps 1-6 and 8). */
const GATE_CODES: OpenApiCode[] = [
  'OPEN_API_BODY_INVALID',
  'OPEN_API_BODY_TOO_LARGE',
  'OPEN_API_SOURCE_IP_REJECTED',
  'OPEN_API_HEADER_INVALID',
  'OPEN_API_AUTH_FAILED',
  'OPEN_API_NONCE_REPLAYED',
  'OPEN_API_RATE_LIMITED',
  'OPEN_API_GUARD_UNAVAILABLE',
];
/** Step 7 and the request-id replay of step 9, on the four POSTs. */
const POST_CODES: OpenApiCode[] = ['OPEN_API_CONTENT_TYPE_INVALID', 'OPEN_API_REQUEST_ID_CONFLICT'];

type Tag = 'Orders' | 'Refunds' | 'Settlement' | 'Statements' | 'Event log' | 'Platform keys';

type PathParam = 'outTradeNo' | 'outRefundNo' | 'settlementDate' | 'eventId';
type QueryParam = 'compression' | 'type' | 'status' | 'from' | 'to' | 'limit' | 'cursor';

interface Op {
  method: 'get' | 'post';
  path: string;
  operationId: string;
  tag: Tag;
  summary: string;
  description: string;
  body?: object;
  /** A success's body: a JSON schema, or (a file) its media types. */
  success: Record<string, { description: string; schema?: object; media?: Record<string, object> }>;
  codes: OpenApiCode[];
  pathParam?: PathParam;
  query?: QueryParam[];
}

const CLOSED_AFTER_MINUTES = STATEMENT_CLOSE_DELAY_MS / 60_000;

const OPS: Op[] = [
  {
    method: 'post',
    path: '/payments',
    operationId: 'createOrder',
    tag: 'Orders',
    summary: 'Create order',
    description:
      'Creates an order and its first payment attempt; the answer carries the cashier page (payUrl) and, for ALIPAY_H5, the collection code (qrCode). outTradeNo is the idempotency identity of the order: the same number with the same business digest (channel, tradeScope, amountFen, currency, subject, description, returnUrl, attach; not payerClientIp) answers 200 with replayed=true and the current snapshot; with a different digest, 409 OPEN_API_IDEMPOTENCY_CONFLICT. A field outside its constraint or outside the schema is 400 OPEN_API_BODY_INVALID, never 422; 422 is for the channel, the declared trade form and platform limits. A repeat with the same X-SVC-Request-Id returns the first answer, not the current state.',
    body: createOrderSchema,
    success: {
      '201': {
        description: 'Created: requestId and the order snapshot, with payUrl (and qrCode for ALIPAY_H5).',
        schema: orderCreatedSchema,
      },
      '200': {
        description:
          'Idempotent replay (replayed=true): the current snapshot; payUrl is null and nextAction is CREATE_ATTEMPT when the attempt is final or expired.',
        schema: orderCreatedSchema,
      },
    },
    codes: [
      'OPEN_API_IDEMPOTENCY_CONFLICT',
      'OPEN_API_CHANNEL_UNAVAILABLE',
      'OPEN_API_TRADE_SCOPE_UNAVAILABLE',
      'OPEN_API_LIMIT_EXCEEDED',
      'OPEN_API_PROVIDER_REJECTED',
    ],
  },
  {
    method: 'post',
    path: '/payments/{outTradeNo}/attempts',
    operationId: 'recreateAttempt',
    tag: 'Orders',
    summary: 'Re-create payment attempt',
    description:
      'Closes the attempt in progress and creates a new one: payUrl and qrCode are replaced together, and the old ones must not be reused. The only way to get fresh payment material (never call create order again for it). No body; a valid JSON body is ignored. An order that is not payable is 409 OPEN_API_STATE_INVALID; the channel, trade form and amount ceilings are checked again like a new order (422).',
    pathParam: 'outTradeNo',
    success: {
      '201': { description: 'New attempt: the order snapshot with the new payUrl (and qrCode).', schema: orderCreatedSchema },
      '200': { description: 'Projection of a concurrent winner: another re-create of the same order won.', schema: orderCreatedSchema },
    },
    codes: [
      'OPEN_API_NOT_FOUND',
      'OPEN_API_STATE_INVALID',
      'OPEN_API_CHANNEL_UNAVAILABLE',
      'OPEN_API_TRADE_SCOPE_UNAVAILABLE',
      'OPEN_API_LIMIT_EXCEEDED',
      'OPEN_API_PROVIDER_REJECTED',
    ],
  },
  {
    method: 'get',
    path: '/payments/{outTradeNo}',
    operationId: 'queryOrder',
    tag: 'Orders',
    summary: 'Query order (local ledger only)',
    description:
      'Reads the order from the local authoritative ledger: no call to the provider, no change, no new payment material (payUrl and qrCode are null). latestAttempt gives the state and expiry of the latest attempt. A missing, cross-application, cross-merchant or malformed reference is the same neutral 404. The only 409 is a replayed nonce.',
    pathParam: 'outTradeNo',
    success: { '200': { description: 'The order snapshot with latestAttempt.', schema: orderQuerySchema } },
    codes: ['OPEN_API_NOT_FOUND'],
  },
  {
    method: 'post',
    path: '/payments/{outTradeNo}/close',
    operationId: 'closeOrder',
    tag: 'Orders',
    summary: 'Close order (the provider confirms unpaid first)',
    description:
      'Closes an unpaid order after the provider has confirmed it unpaid; a paid order is never closed blindly. closeState tells the outcome: CLOSE_REQUESTED (closed), ALREADY_CLOSED, UNKNOWN_KEPT (outcome uncertain: the order is kept as it was and completed later) or PROVIDER_PAID_CONFLICT (the provider reports it paid: query the order). An order the platform already knew paid (or failed) is 409 OPEN_API_STATE_INVALID with no closeState: query the order, do not retry the close. No body; a valid JSON body is ignored.',
    pathParam: 'outTradeNo',
    success: { '200': { description: 'closeState and the order snapshot (payUrl and latestAttempt null).', schema: orderCloseSchema } },
    codes: ['OPEN_API_NOT_FOUND', 'OPEN_API_STATE_INVALID', 'OPEN_API_PROVIDER_REJECTED'],
  },
  {
    method: 'post',
    path: '/refunds',
    operationId: 'createRefund',
    tag: 'Refunds',
    summary: 'Create refund',
    description:
      'Refunds part or all of a SUCCEEDED order. outRefundNo is the idempotency identity of the refund: the same number with the same content answers 200 with the refund as it is now; with different content, 409 OPEN_API_IDEMPOTENCY_CONFLICT. Refunds of one order never add up to more than the amount paid (failed refunds do not count): beyond that, 422 OPEN_API_LIMIT_EXCEEDED with details.scope=REFUND_CUMULATIVE. A refund the provider rejects after acceptance is 502. An uncertain outcome is state UNKNOWN (unknown=true), converged through an event or a refund query.',
    body: createRefundSchema,
    success: {
      '201': {
        description: 'Accepted: the refund projection (state PENDING, or SUCCEEDED when the provider settled at once).',
        schema: refundSchema,
      },
      '200': { description: 'Idempotent replay: the same outRefundNo with the same content.', schema: refundSchema },
    },
    codes: [
      'OPEN_API_NOT_FOUND',
      'OPEN_API_IDEMPOTENCY_CONFLICT',
      'OPEN_API_STATE_INVALID',
      'OPEN_API_LIMIT_EXCEEDED',
      'OPEN_API_PROVIDER_REJECTED',
    ],
  },
  {
    method: 'get',
    path: '/refunds/{outRefundNo}',
    operationId: 'queryRefund',
    tag: 'Refunds',
    summary: 'Query refund (local state)',
    description:
      'Reads the refund from the local authoritative state, with no call to the provider. replayed is always true here: it marks a projection of an existing record. The only 409 is a replayed nonce.',
    pathParam: 'outRefundNo',
    success: { '200': { description: 'The refund projection (replayed is always true).', schema: refundSchema } },
    codes: ['OPEN_API_NOT_FOUND'],
  },
  {
    method: 'get',
    path: '/settlement/accounts',
    operationId: 'readSettlement',
    tag: 'Settlement',
    summary: 'Read settlement accounts',
    description:
      "Lists the merchant's settlement accounts (entity, merchant number, last four digits of the card) and the current collection allocation (mode, participants in order, ratios when RATIO, unavailablePolicy): a configuration snapshot, read-only.",
    success: { '200': { description: 'The settlement view.', schema: settlementSchema } },
    codes: [],
  },
  {
    method: 'get',
    path: '/statements/{settlementDate}',
    operationId: 'getStatement',
    tag: 'Statements',
    summary: "Statement of a settlement day: totals, and the file's SHA-256 and size",
    description: `The statement of the calling app for one Asia/Shanghai calendar day: every payment and refund of the app that reached a final state that day (payments SUCCEEDED, CLOSED or FAILED; refunds SUCCEEDED or FAILED), one row each. This answer gives the day's totals and the SHA-256, size and row count of its CSV file, and the path to fetch the file with (GET, signed like this request); its signature binds them. A day is closed, and its statement given, from ${CLOSED_AFTER_MINUTES} minutes after it ends (00:${CLOSED_AFTER_MINUTES} Asia/Shanghai the next day); before that, 409 OPEN_API_STATE_INVALID saying from when. Days up to ${STATEMENT_MAX_AGE_DAYS} days back are given; an older day, or a date that is not a real YYYY-MM-DD, is the neutral 404. The rows of a closed day never change, so the file (and its SHA-256) is the same every time. The only query parameter is compression. The first summary of a day makes its file once; at most 2 files of an app (and 8 in all, by configuration) are made at once, beyond that 429 OPEN_API_RATE_LIMITED with Retry-After.`,
    pathParam: 'settlementDate',
    query: ['compression'],
    success: { '200': { description: 'The summary of the statement.', schema: statementSchema } },
    codes: ['OPEN_API_NOT_FOUND', 'OPEN_API_STATE_INVALID'],
  },
  {
    method: 'get',
    path: '/statements/{settlementDate}/file',
    operationId: 'downloadStatement',
    tag: 'Statements',
    summary: 'Statement file of a settlement day (CSV, or gzip of it)',
    description:
      "The day's statement file, streamed: CSV (RFC 4180: comma-separated, CRLF line ends, UTF-8 without BOM) with the header of format version 1 (type,occurredAt,eventId,openOrderId,outTradeNo,refundAttemptId,outRefundNo,channel,state,amountFen,orderAmountFen,companyServiceFeeFen,companyServiceFeeRateBps,merchantSettlementFen,feeRuleVersion,feeTier), one row per final state change, ordered by occurredAt then eventId; with compression=gzip, the gzip of that CSV. Content-Length is the summary's sizeBytes; the response signature is made over the file's SHA-256 (the summary's sha256), as over any body: hash the bytes received and verify. Refusals are those of the summary (a download counts among the files made at once until its last byte). A download whose client takes nothing for 30 s is cut.",
    pathParam: 'settlementDate',
    query: ['compression'],
    success: {
      '200': {
        description: 'The file: text/csv; charset=utf-8, or application/gzip with compression=gzip.',
        media: {
          'text/csv': { schema: { type: 'string', description: 'CSV, format version 1 ("The file" of the Statements page).' } },
          'application/gzip': { schema: { type: 'string', contentEncoding: 'binary', description: 'gzip of the CSV.' } },
        },
      },
    },
    codes: ['OPEN_API_NOT_FOUND', 'OPEN_API_STATE_INVALID'],
  },
  {
    method: 'get',
    path: '/events',
    operationId: 'listEvents',
    tag: 'Event log',
    summary: "List the app's events, newest first",
    description: `The events of the calling app (the notifications the service sends, whatever became of them), newest first, each with its payload exactly as delivered and how its delivery went. Filters: type (event type), status (delivery status), from (inclusive) and to (exclusive) on occurredAt; limit 1-${EVENT_PAGE_MAX} (default ${EVENT_PAGE_DEFAULT}); pass nextCursor as cursor for the next page. A parameter outside its form, given twice, or unknown is 400 OPEN_API_BODY_INVALID with details.field naming it. Answered from current state.`,
    query: ['type', 'status', 'from', 'to', 'limit', 'cursor'],
    success: { '200': { description: 'A page of events.', schema: eventListSchema } },
    codes: [],
  },
  {
    method: 'get',
    path: '/events/{eventId}',
    operationId: 'getEvent',
    tag: 'Event log',
    summary: 'One event with its delivery attempts',
    description:
      "An event of the calling app with its payload as delivered and its delivery attempts (time, your endpoint's HTTP status or the error, duration, the first 200 characters of its answer). Another app's event, or a malformed id, is the neutral 404.",
    pathParam: 'eventId',
    success: { '200': { description: 'The event and its delivery attempts.', schema: eventDetailSchema } },
    codes: ['OPEN_API_NOT_FOUND'],
  },
  {
    method: 'post',
    path: '/events/{eventId}/redeliveries',
    operationId: 'redeliverEvent',
    tag: 'Event log',
    summary: 'Deliver an event again',
    description:
      "Queues the event for delivery again to the app's notifyUrl: the same eventId and body, signed afresh as every delivery is. A delivered or dead event gets a fresh retry schedule; a pending one is sent now (one being sent at this moment, as soon as that attempt ends, unless it succeeded). Limited to one request per event a minute and 20 a minute per app: beyond that 429 OPEN_API_RATE_LIMITED with Retry-After. No body; a valid JSON body is ignored. A repeat with the same X-SVC-Request-Id returns the first answer and queues nothing.",
    pathParam: 'eventId',
    success: { '202': { description: 'Queued: the event is sent again at nextAttemptAt.', schema: redeliverySchema } },
    codes: ['OPEN_API_NOT_FOUND'],
  },
  {
    method: 'get',
    path: '/platform-keys',
    operationId: 'listPlatformKeys',
    tag: 'Platform keys',
    summary: "The platform's public keys, with their validity",
    description:
      "Every public key the platform publishes, in the order they sign: the one that signs now (CURRENT, also named by currentKeyId), one staged to sign later (NEXT, nextKeyId: published ahead of a rotation), and the earlier ones (PREVIOUS), each with from when and until when it signs. Each key after the first carries its endorsement: the signature of the key published before it over the endorsement string. Pin the first key you take from the portal or the docs; trust a later key only when a key you already trust endorses it and this answer's response signature verifies with a trusted key (the SDK does both by itself, and reads this again when an answer or a notification names a key it does not know). Answered from the service's keys; no body, no query.",
    success: { '200': { description: 'The published keys.', schema: platformKeysSchema } },
    codes: [],
  },
];

const TAGS: Record<Tag | 'Events', string> = {
  Events: "Signed event notifications the service POSTs to the app's notifyUrl.",
  Orders: 'Orders and their payment attempts: create, re-create the attempt, query, close.',
  Refunds: 'Refunds of paid orders: create and query.',
  Settlement: "The merchant's settlement accounts and collection allocation.",
  Statements: "The app's statement of a settlement day: its summary and its file.",
  'Event log': "The app's events and their deliveries; asking for one to be delivered again.",
  'Platform keys': "The platform's public keys that sign answers and notifications, each endorsed by the one before.",
};

/** The six signed request headers (their forms are the gate's, SIGNED_HEADERS). */
const SIGNED_HEADER_TEXT: Record<keyof typeof SIGNED_HEADERS, string> = {
  appId: 'The application: `svcop_` followed by 16 characters A-Z a-z 0-9.',
  timestamp: "Unix time in seconds (1-10 digits); within 300 s of the server's clock.",
  nonce:
    'A fresh random value for every request (16-64 visible ASCII characters), remembered per application for 610 s: a reuse is 409 OPEN_API_NONCE_REPLAYED.',
  keyId: "The id under which the merchant's public key was registered for the application (1-128 visible ASCII characters).",
  requestId:
    'The request identity (8-128 characters of A-Z a-z 0-9 . _ : -): echoed in the answer; a POST repeated with it returns its first answer, so a retry reuses it (with a new nonce, timestamp and signature).',
  sign: 'Standard Base64 (with padding) of the RSASSA-PKCS1-v1_5 / SHA-256 signature of the nine-line signing string, made with the merchant\'s private key (see the "merchantSignature" security scheme).',
};

/** The headers of a notification (src/events/signer.ts). */
const NOTIFICATION_HEADER_TEXT: Record<Exclude<keyof NotificationHeaders, 'Content-Type'>, string> = {
  'X-SVC-Event-Id': "The event's eventId, equal to the body's; the same on every delivery attempt.",
  'X-SVC-Notify-Timestamp': 'When this delivery attempt was signed, Unix time in seconds.',
  'X-SVC-Notify-Nonce': '32 random characters A-Za-z0-9, new on every attempt.',
  'X-SVC-Notify-Key-Id': 'The id of the platform key that signed (GET /api/admin/v1/platform-keys publishes the keys).',
  'X-SVC-Notify-Sign':
    'Standard Base64 RSASSA-PKCS1-v1_5 / SHA-256 signature of the four-line string (see the "notificationSignature" security scheme).',
};

const SIGNED_FROM_STEP_7 = 'Present on every 2xx, and on the rejections of gate steps 7-9 (absent from the earlier ones).';

function responseHeaders(): Record<string, object> {
  return {
    'X-SVC-Request-Id': {
      description:
        "Echoes the request's X-SVC-Request-Id on every answer from gate step 4 on (every 2xx included); absent on the rejections of steps 1-3 (body guard, source IP, header form), whose body carries a generated gw_ requestId instead.",
      schema: { type: 'string' },
    },
    'X-SVC-Response-Sign': {
      description: `Standard Base64 RSASSA-PKCS1-v1_5 / SHA-256 signature, with the platform key, of five lines each ending in LF: X-SVC-Response-Timestamp, X-SVC-Response-Nonce, X-SVC-Request-Id, the HTTP status, the lower-case hex SHA-256 of the body bytes. ${SIGNED_FROM_STEP_7} Verify it when all four response-signature headers are present.`,
      schema: { type: 'string' },
    },
    'X-SVC-Response-Key-Id': {
      description: `The id of the platform key that signed (pk_...), among those GET /api/admin/v1/platform-keys publishes. ${SIGNED_FROM_STEP_7}`,
      schema: { type: 'string' },
    },
    'X-SVC-Response-Timestamp': {
      description: `When the response was signed, Unix time in seconds. ${SIGNED_FROM_STEP_7}`,
      schema: { type: 'string', pattern: '^[0-9]+$' },
    },
    'X-SVC-Response-Nonce': {
      description: `32 random characters A-Za-z0-9, new on every response. ${SIGNED_FROM_STEP_7}`,
      schema: { type: 'string', pattern: '^[A-Za-z0-9]{32}$' },
    },
    'Retry-After': {
      description:
        'Seconds to wait before retrying (an integer, at least 1): always on a 429; on a 503 when an attempt of the order is still being created at the provider.',
      schema: { type: 'integer', minimum: 1 },
    },
  };
}
const SIGNATURE_HEADERS = ['X-SVC-Response-Sign', 'X-SVC-Response-Key-Id', 'X-SVC-Response-Timestamp', 'X-SVC-Response-Nonce'];

function headerRefs(names: readonly string[]): Record<string, object> {
  return Object.fromEntries(names.map((n) => [n, ref('headers', n)]));
}

function parameters(): Record<string, object> {
  const signed = Object.entries(SIGNED_HEADERS).map(([field, h]) => [
    h.name,
    {
      name: h.name,
      in: 'header',
      required: true,
      description: SIGNED_HEADER_TEXT[field as keyof typeof SIGNED_HEADERS],
      schema: { type: 'string', pattern: h.re.source },
    },
  ]);
  const queryParam = (name: QueryParam, description: string, schema: object) => ({
    name,
    in: 'query',
    required: false,
    description,
    schema,
  });
  const queries: Record<QueryParam, object> = {
    compression: queryParam('compression', 'gzip: the file gzip-compressed; none (the default): plain CSV.', {
      type: 'string',
      enum: ['gzip', 'none'],
    }),
    type: queryParam('type', 'Only events of this type.', {
      type: 'string',
      enum: ['PAYMENT_SUCCEEDED', 'PAYMENT_CLOSED', 'PAYMENT_FAILED', 'REFUND_SUCCEEDED', 'REFUND_FAILED'],
    }),
    status: queryParam('status', 'Only events in this delivery status.', { type: 'string', enum: ['PENDING', 'DELIVERED', 'DEAD'] }),
    from: queryParam('from', 'Only events that occurred at or after this RFC 3339 time.', { type: 'string', format: 'date-time' }),
    to: queryParam('to', 'Only events that occurred before this RFC 3339 time.', { type: 'string', format: 'date-time' }),
    limit: queryParam('limit', `Events per page, 1-${EVENT_PAGE_MAX} (default ${EVENT_PAGE_DEFAULT}).`, {
      type: 'integer',
      minimum: 1,
      maximum: EVENT_PAGE_MAX,
    }),
    cursor: queryParam('cursor', "The previous page's nextCursor, as given.", { type: 'string' }),
  };
  const pathParam = (name: string, what: string) => ({
    name,
    in: 'path',
    required: true,
    description: `The merchant's ${what} number, as given at creation (6-64 characters of A-Z a-z 0-9 _ -). A number that does not exist, belongs to another application or merchant, or is malformed is the same neutral 404.`,
    schema: { type: 'string', pattern: MERCHANT_NO_PATTERN },
  });
  return {
    ...Object.fromEntries(signed),
    'Content-Type': {
      name: 'Content-Type',
      in: 'header',
      required: true,
      description:
        'application/json on every POST, the bodyless ones included (a charset or other parameter is allowed: the media type is compared lower-cased, parameters removed); otherwise 400 OPEN_API_CONTENT_TYPE_INVALID. The normalized value is the eighth line of the signing string.',
      schema: { type: 'string' },
    },
    outTradeNo: pathParam('outTradeNo', 'order'),
    outRefundNo: pathParam('outRefundNo', 'refund'),
    settlementDate: {
      name: 'settlementDate',
      in: 'path',
      required: true,
      description: 'The settlement day, an Asia/Shanghai calendar day as YYYY-MM-DD.',
      schema: { type: 'string', pattern: '^\\d{4}-\\d{2}-\\d{2}$' },
    },
    eventId: {
      name: 'eventId',
      in: 'path',
      required: true,
      description: "The event's eventId (evt_...). Another app's event, or a malformed id, is the neutral 404.",
      schema: { type: 'string', pattern: '^evt_[0-9a-z]{10,40}$' },
    },
    ...queries,
  };
}

function failureResponse(codes: readonly OpenApiCode[]): object {
  const carried = new Set(codes.map((c) => REJECTION_HEADERS[c]));
  const headers = [
    ...(carried.has('request-id') || carried.has('signed') ? ['X-SVC-Request-Id'] : []),
    ...(carried.has('signed') ? SIGNATURE_HEADERS : []),
    ...(codes.includes('OPEN_API_RATE_LIMITED') || codes.includes('OPEN_API_GUARD_UNAVAILABLE') ? ['Retry-After'] : []),
  ];
  return {
    description: codes.map((c) => `${c}: ${OPEN_API_ERRORS[c].message}`).join(' | '),
    ...(headers.length ? { headers: headerRefs(headers) } : {}),
    content: {
      'application/json': {
        schema: { allOf: [failureSchema], properties: { code: { type: 'string', enum: codes } } },
      },
    },
  };
}

function operation(op: Op): object {
  const codes = [...GATE_CODES, ...(op.method === 'post' ? POST_CODES : []), ...op.codes];
  const byStatus = new Map<number, OpenApiCode[]>();
  for (const c of codes) byStatus.set(OPEN_API_ERRORS[c].status, [...(byStatus.get(OPEN_API_ERRORS[c].status) ?? []), c]);
  const responses: Record<string, unknown> = {};
  for (const [status, s] of Object.entries(op.success)) {
    responses[status] = {
      description: s.description,
      headers: headerRefs(['X-SVC-Request-Id', ...SIGNATURE_HEADERS]),
      content: s.media ?? { 'application/json': { schema: s.schema } },
    };
  }
  for (const [status, cs] of [...byStatus].sort((a, b) => a[0] - b[0])) responses[String(status)] = failureResponse(cs);
  const params = [
    ...Object.values(SIGNED_HEADERS).map((h) => ref('parameters', h.name)),
    ...(op.method === 'post' ? [ref('parameters', 'Content-Type')] : []),
    ...(op.pathParam ? [ref('parameters', op.pathParam)] : []),
    ...(op.query ?? []).map((q) => ref('parameters', q)),
  ];
  return {
    operationId: op.operationId,
    tags: [op.tag],
    summary: op.summary,
    description: op.description,
    security: [{ merchantSignature: [] }],
    parameters: params,
    ...(op.body ? { requestBody: { required: true, content: { 'application/json': { schema: op.body } } } } : {}),
    responses,
  };
}

export function openApiDocument(publicBaseUrl: string): Record<string, unknown> {
  const page = (p: DocPage, anchor = '') => `${publicBaseUrl}/docs/${p}${anchor}`;
  const tagPages: Record<string, string> = {
    Events: page('events'),
    Statements: page('statements'),
    'Event log': page('events', '#your-event-log'),
    'Platform keys': page('authentication', '#platform-keys'),
  };
  const paths: Record<string, Record<string, unknown>> = {};
  for (const op of OPS) paths[op.path] = { ...(paths[op.path] ?? {}), [op.method]: operation(op) };
  const schemas = Object.fromEntries(Object.entries(COMPONENT_SCHEMAS).map(([name, s]) => [name, withRefs(s, s)]));
  return {
    openapi: '3.1.0',
    info: {
      title: 'Merchant Payment Service open API',
      version: '1.0.0',
      description: [
        "Server-to-server payment API: orders and their payment attempts, refunds, a read-only view of the settlement accounts, the daily statement and the app's event log. Amounts are integer fen (1/100 of the currency unit).",
        `Every request is signed with the merchant's RSA key (the "merchantSignature" security scheme; [Authentication](${page('authentication')})); every answer that got past authentication carries the platform's response signature. Failures use one envelope, {code, message, requestId}, with codes from a closed table ([Errors](${page('errors')})). Payment and refund outcomes are POSTed to the app's notifyUrl as signed events (the "event" webhook; [Event notifications](${page('events')})).`,
        'A path or method not mounted here is answered with the platform envelope {status, error, message} (404 ROUTE_NOT_FOUND, 405 METHOD_NOT_ALLOWED), not the failure envelope.',
      ].join('\n\n'),
      license: { name: 'Proprietary (UNLICENSED)', url: page('license') },
    },
    externalDocs: { description: 'Authentication: signed requests, signed responses, the gate', url: page('authentication') },
    servers: [{ url: `${publicBaseUrl}/api/open/v1`, description: 'The open API of this service.' }],
    tags: Object.entries(TAGS).map(([name, description]) => ({
      name,
      description,
      ...(tagPages[name] ? { externalDocs: { url: tagPages[name] } } : {}),
    })),
    paths: withRefs(paths),
    webhooks: {
      event: {
        post: {
          operationId: 'eventNotification',
          tags: ['Events'],
          summary: "Event notification, POSTed to the app's notifyUrl",
          description:
            'Sent on every payment and refund outcome, in the same transaction as the change it reports. The body is stored once and every attempt sends the same bytes. Delivery is at least once: de-duplicate by eventId, order by stateVersion. Any 2xx within 10 s acknowledges; anything else (or no answer) is retried after 15 s, 30 s, 1 min, 3 min, 10 min, 20 min, 30 min, 1 h, 3 h, 6 h, 12 h, 24 h, then the event is marked dead (redeliverable from the back office).',
          security: [{ notificationSignature: [] }],
          parameters: Object.entries(NOTIFICATION_HEADER_TEXT).map(([name, description]) => ({
            name,
            in: 'header',
            required: true,
            description,
            schema: { type: 'string' },
          })),
          requestBody: { required: true, content: { 'application/json': { schema: withRefs(webhookEventSchema) } } },
          responses: {
            '2XX': { description: 'Acknowledged: the event is not sent again.' },
            '4XX': { description: 'Not acknowledged (for example a notification the receiver could not verify): retried on the schedule.' },
            '5XX': { description: 'Not acknowledged: retried on the schedule.' },
          },
        },
      },
    },
    components: {
      schemas,
      parameters: parameters(),
      headers: responseHeaders(),
      securitySchemes: {
        merchantSignature: {
          type: 'apiKey',
          in: 'header',
          name: 'X-SVC-Sign',
          description: `RSA request signature. Every request carries six headers, each exactly once: X-SVC-App-Id, X-SVC-Timestamp, X-SVC-Nonce, X-SVC-Key-Id, X-SVC-Request-Id and X-SVC-Sign. X-SVC-Sign is the standard Base64 (with padding) of RSASSA-PKCS1-v1_5 / SHA-256, with the merchant's private key (RSA 2048-4096 bits, its public key registered for the app and key id), over a nine-line signing string, each line ending in LF, UTF-8: the method, the request target as sent (path and query), X-SVC-App-Id, X-SVC-Key-Id, X-SVC-Timestamp, X-SVC-Nonce, X-SVC-Request-Id, the normalized Content-Type (empty when absent), the lower-case hex SHA-256 of the body bytes. The exact rules and a worked example: [Signing a request](${page('authentication', '#signing-a-request')}); verifying the response signature: [Verifying a response](${page('authentication', '#verifying-a-response')}).`,
        },
        notificationSignature: {
          type: 'apiKey',
          in: 'header',
          name: 'X-SVC-Notify-Sign',
          description: `Platform signature of an event notification, for the receiver to verify. X-SVC-Notify-Sign is the standard Base64 RSASSA-PKCS1-v1_5 / SHA-256 signature, with the platform key named by X-SVC-Notify-Key-Id, of four lines each ending in LF: X-SVC-Notify-Timestamp, X-SVC-Notify-Nonce, X-SVC-Event-Id, the lower-case hex SHA-256 of the raw body bytes. Step by step: [Verifying a notification](${page('events', '#verifying-a-notification-step-by-step')}).`,
        },
      },
    },
  };
}

/**
 * /docs: the rendered API reference (src/http/docs-reference.ts), the OpenAPI document it renders,
 * the pages beside it (src/http/docs-pages.ts) and the files they link to (signing vectors, recipes).
 */
export async function docsPlugin(scope: FastifyInstance, opts: { publicBaseUrl: string }): Promise<void> {
  const doc = JSON.stringify(openApiDocument(opts.publicBaseUrl));
  scope.get('/openapi.json', async (_req, reply) => reply.type('application/json; charset=utf-8').send(doc));
  registerReference(scope);
  const pages = loadDocPages();
  for (const p of DOC_PAGES) {
    const html = pages.get(p)!;
    scope.get(`/${p}`, async (_req, reply) => reply.headers(DOC_PAGE_HEADERS).send(html));
  }
  for (const [served, file] of loadDocFiles()) {
    scope.get(`/${served}`, async (_req, reply) =>
      reply.headers({ 'content-type': file.type, 'x-content-type-options': 'nosniff', 'cache-control': 'no-cache' }).send(file.body),
    );
  }
}
