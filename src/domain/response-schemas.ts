/**
 * Response bodies of the open API, as schemas: published in the OpenAPI document and checked
 * against real responses in the tests (test/http/openapi.test.ts), so the document cannot drift.
 * The seed's named resources (order snapshot, refund projection, settlement view) are schemas of
 * their own, and each answer is one of them plus `requestId` (extendObject).
 */
import { CLOSED_REASONS, ATTEMPT_STATES, ORDER_STATUSES, REFUND_STATES } from './states.ts';
import { channelSchema, tradeScopeSchema } from './open-schemas.ts';
import { type ArraySchema, type ObjectSchema, type Schema, extendObject, nullable } from './schema.ts';

export const timestampSchema = {
  type: 'string',
  format: 'date-time',
  pattern: '^\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z$',
  description: 'RFC 3339 UTC with milliseconds',
} as const;
const requestId = { type: 'string', minLength: 1, maxLength: 128, description: "The merchant's X-SVC-Request-Id." } as const;
const withRequestId = { properties: { requestId }, required: ['requestId'] } as const;
const fen = { type: 'integer', minimum: 0 } as const;

export const feeProjectionSchema = {
  type: 'object',
  additionalProperties: false,
  required: [
    'companyServiceFeeFen',
    'companyServiceFeeRateBps',
    'merchantRateBps',
    'merchantSettlementFen',
    'ruleVersion',
    'thresholdFen',
    'tier',
  ],
  properties: {
    companyServiceFeeFen: { ...fen, description: 'floor((amountFen * rateBps + 5000) / 10000)' },
    companyServiceFeeRateBps: {
      type: 'integer',
      minimum: 0,
      maximum: 10000,
      description: 'The standard rate below thresholdFen, the large rate from it.',
    },
    merchantRateBps: { type: 'integer', minimum: 0, maximum: 10000 },
    merchantSettlementFen: { ...fen, description: 'amountFen - companyServiceFeeFen' },
    ruleVersion: { type: 'integer', minimum: 0 },
    thresholdFen: fen,
    tier: { type: 'string', enum: ['STANDARD', 'LARGE'] },
  },
} as const satisfies ObjectSchema;

export const latestAttemptSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['state', 'expireAt'],
  properties: { state: { type: 'string', enum: ATTEMPT_STATES }, expireAt: timestampSchema },
  description: 'State and expiry of the latest payment attempt; never any payment material.',
} as const satisfies ObjectSchema;

/** The seed's OrderSnapshot: every field an order answer may have; each answer says which it requires. */
export const orderSnapshotSchema = {
  type: 'object',
  additionalProperties: false,
  required: [
    'openOrderId',
    'outTradeNo',
    'status',
    'closedReason',
    'channel',
    'tradeScope',
    'links',
    'amountFen',
    'currency',
    'attach',
    'expireAt',
    'payUrl',
    'payUrlExpireHint',
    'feeProjection',
  ],
  properties: {
    openOrderId: { type: 'string', pattern: '^ord_[0-9a-z]+$' },
    outTradeNo: { type: 'string' },
    status: { type: 'string', enum: ORDER_STATUSES },
    closedReason: nullable({ type: 'string', enum: CLOSED_REASONS }),
    channel: channelSchema,
    tradeScope: nullable(tradeScopeSchema),
    links: { type: 'array', items: { type: 'string', enum: ['ALIPAY_AGGREGATION_NATIVE', 'WECHAT_JSAPI'] } },
    amountFen: { type: 'integer', minimum: 1 },
    currency: { type: 'string', const: 'CNY' },
    attach: nullable({ type: 'string' }),
    expireAt: timestampSchema,
    payUrl: nullable({ type: 'string', format: 'uri' }, 'Cashier page; only in create and re-create answers with a valid attempt.'),
    qrCode: nullable({ type: 'string' }, 'ALIPAY_H5 collection code; only in create and re-create answers; null in query and close.'),
    payUrlExpireHint: { type: 'integer', description: "UTC epoch seconds of the order's expireAt." },
    nextAction: { type: 'string', enum: ['CREATE_ATTEMPT'] },
    latestAttempt: nullable(latestAttemptSchema),
    feeProjection: feeProjectionSchema,
    replayed: { type: 'boolean' },
    unknown: { type: 'boolean', const: true } as unknown as Schema,
  },
  description: 'An order and its payment state (seed "OrderSnapshot").',
} as const satisfies ObjectSchema;

/** Create order and re-create attempt. */
export const orderCreatedSchema = extendObject(orderSnapshotSchema, {
  properties: withRequestId.properties,
  required: [...withRequestId.required, 'replayed'],
  description: 'requestId plus the order snapshot, with replayed (and unknown, only when true).',
});

export const orderQuerySchema = extendObject(orderSnapshotSchema, {
  properties: withRequestId.properties,
  required: [...withRequestId.required, 'qrCode', 'latestAttempt'],
  description: 'requestId plus the order snapshot with latestAttempt; payUrl and qrCode are null.',
});

export const orderCloseSchema = extendObject(orderSnapshotSchema, {
  properties: {
    ...withRequestId.properties,
    closeState: { type: 'string', enum: ['CLOSE_REQUESTED', 'ALREADY_CLOSED', 'UNKNOWN_KEPT', 'PROVIDER_PAID_CONFLICT'] },
  },
  required: [...withRequestId.required, 'closeState', 'qrCode', 'latestAttempt'],
  description: 'requestId, closeState and the order snapshot; payUrl and latestAttempt are null.',
});

/** The seed's RefundProjection. */
export const refundProjectionSchema = {
  type: 'object',
  additionalProperties: false,
  required: [
    'refundAttemptId',
    'outRefundNo',
    'outTradeNo',
    'openOrderId',
    'amountFen',
    'state',
    'reason',
    'createdAt',
    'updatedAt',
    'replayed',
    'unknown',
  ],
  properties: {
    refundAttemptId: { type: 'string', pattern: '^rf_[0-9a-z]+$' },
    outRefundNo: { type: 'string' },
    outTradeNo: { type: 'string' },
    openOrderId: { type: 'string' },
    amountFen: { type: 'integer', minimum: 1 },
    state: { type: 'string', enum: REFUND_STATES },
    reason: nullable({ type: 'string' }),
    createdAt: timestampSchema,
    updatedAt: timestampSchema,
    replayed: { type: 'boolean', description: 'Always true in the refund query: a projection of an existing record.' },
    unknown: { type: 'boolean', description: 'true while the provider outcome is uncertain (state UNKNOWN); always present.' },
  },
  description: 'A refund and its state (seed "RefundProjection").',
} as const satisfies ObjectSchema;

export const refundSchema = extendObject(refundProjectionSchema, {
  ...withRequestId,
  description: 'requestId plus the refund projection.',
});

/** RATIO shares: 2-4 accounts, each 0 < shareBps < 10000 (the sum of 10000 is checked in code). */
export const ratiosSchema = {
  type: 'array',
  minItems: 2,
  maxItems: 4,
  items: {
    type: 'object',
    additionalProperties: false,
    required: ['accountId', 'shareBps'],
    properties: {
      accountId: { type: 'string', minLength: 1, maxLength: 64 },
      shareBps: { type: 'integer', minimum: 1, maximum: 9999 },
    },
  },
  description: 'Only when mode is RATIO: each participating account and its share in basis points (the shares add up to 10000).',
} as const satisfies ArraySchema;

export const settlementAccountSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['accountId', 'entityType', 'entityName', 'merchantNo', 'cardLast4'],
  properties: {
    accountId: { type: 'string' },
    entityType: { type: 'string', enum: ['INDIVIDUAL', 'CORPORATE'] },
    entityName: { type: 'string' },
    merchantNo: { type: 'string' },
    cardLast4: { type: 'string', pattern: '^[0-9]{4}$' },
  },
  description: 'A settlement account of the merchant; never the full card number.',
} as const satisfies ObjectSchema;

/** The seed's settlement view. */
export const settlementViewSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['accounts', 'mode', 'participants', 'unavailablePolicy'],
  properties: {
    accounts: { type: 'array', items: settlementAccountSchema },
    mode: nullable({ type: 'string', enum: ['SINGLE', 'PRIORITY', 'RATIO'] }, 'null while no allocation is configured'),
    participants: { type: 'array', items: { type: 'string' } },
    ratios: ratiosSchema,
    unavailablePolicy: nullable({ type: 'string', enum: ['FAIL', 'NEXT_AVAILABLE', 'REDISTRIBUTE'] }),
  },
  description: 'The settlement accounts and the current collection allocation: a configuration snapshot.',
} as const satisfies ObjectSchema;

export const settlementSchema = extendObject(settlementViewSchema, {
  ...withRequestId,
  description: 'requestId plus the settlement view.',
});

export const failureSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['code', 'message', 'requestId'],
  properties: {
    code: { type: 'string', pattern: '^OPEN_API_[A-Z_]+$' },
    message: { type: 'string' },
    requestId: {
      type: 'string',
      description: 'gw_... before the headers passed, else the X-SVC-Request-Id; "" when the signing key is unavailable',
    },
    details: {
      type: 'object',
      additionalProperties: false,
      properties: {
        field: { type: 'string' },
        reason: { type: 'string' },
        scopes: { type: 'array', items: { type: 'string', enum: ['SINGLE_AMOUNT', 'DAILY_AMOUNT'] } },
        scope: { type: 'string', const: 'REFUND_CUMULATIVE' },
        outRefundNo: { type: 'string' },
      },
    },
  },
} as const satisfies ObjectSchema;

/** Body of an event notification (seed "Events", decisions.md section 7; src/events/outbox.ts). */
export const webhookEventSchema = {
  type: 'object',
  additionalProperties: false,
  required: [
    'appId',
    'attach',
    'eventAmountFen',
    'eventId',
    'eventType',
    'feeProjection',
    'grossAmountFen',
    'occurredAt',
    'outRefundNo',
    'outTradeNo',
    'reason',
    'stateVersion',
    'status',
  ],
  properties: {
    appId: { type: 'string' },
    attach: nullable({ type: 'string' }),
    eventAmountFen: { ...fen, description: 'The amount this event moves: the payment amount, or the refund amount.' },
    eventId: { type: 'string', description: 'De-duplicate by this: delivery is at least once.' },
    eventType: { type: 'string', enum: ['PAYMENT_SUCCEEDED', 'PAYMENT_CLOSED', 'PAYMENT_FAILED', 'REFUND_SUCCEEDED', 'REFUND_FAILED'] },
    feeProjection: nullable(feeProjectionSchema, 'Present on PAYMENT_SUCCEEDED, null otherwise.'),
    grossAmountFen: { ...fen, description: "The order's amount." },
    occurredAt: timestampSchema,
    outRefundNo: nullable({ type: 'string' }, 'null on payment events.'),
    outTradeNo: { type: 'string' },
    reason: nullable({ type: 'string' }, 'closedReason, failure reason or refund reason; else null.'),
    stateVersion: { type: 'integer', minimum: 1, description: 'One counter per order, shared with its refunds: order by it.' },
    status: { type: 'string', description: 'The order status or refund state after the change.' },
  },
} as const satisfies ObjectSchema;

const countAndAmount = {
  type: 'object',
  additionalProperties: false,
  required: ['count', 'amountFen'],
  properties: { count: { type: 'integer', minimum: 0 }, amountFen: fen },
} as const satisfies ObjectSchema;

/** A statement's totals (docs/statements.md, "Totals"). */
export const statementTotalsSchema = {
  type: 'object',
  additionalProperties: false,
  required: [
    'rowCount',
    'paymentsSucceeded',
    'paymentsClosed',
    'paymentsFailed',
    'refundsSucceeded',
    'refundsFailed',
    'companyServiceFeeFen',
    'merchantSettlementFen',
    'netAmountFen',
  ],
  properties: {
    rowCount: { type: 'integer', minimum: 0 },
    paymentsSucceeded: countAndAmount,
    paymentsClosed: countAndAmount,
    paymentsFailed: countAndAmount,
    refundsSucceeded: countAndAmount,
    refundsFailed: countAndAmount,
    companyServiceFeeFen: { ...fen, description: "Sum of the fee projections' fees of the payments that succeeded." },
    merchantSettlementFen: { ...fen, description: "Sum of the fee projections' settlements of the payments that succeeded." },
    netAmountFen: { type: 'integer', description: 'paymentsSucceeded.amountFen - refundsSucceeded.amountFen (may be negative).' },
  },
  description: "The statement's rows added up, by kind and state, in fen.",
} as const satisfies ObjectSchema;

/** GET /statements/{settlementDate}: the summary of a day's statement. */
export const statementSchema = {
  type: 'object',
  additionalProperties: false,
  required: [
    'requestId',
    'appId',
    'settlementDate',
    'timeZone',
    'periodStart',
    'periodEnd',
    'format',
    'formatVersion',
    'compression',
    'contentType',
    'fileName',
    'rowCount',
    'sizeBytes',
    'sha256',
    'totals',
    'filePath',
  ],
  properties: {
    requestId,
    appId: { type: 'string' },
    settlementDate: { type: 'string', pattern: '^\\d{4}-\\d{2}-\\d{2}$', description: 'The Asia/Shanghai calendar day (YYYY-MM-DD).' },
    timeZone: { type: 'string', const: 'Asia/Shanghai' },
    periodStart: { ...timestampSchema, description: "The day's first instant (00:00 Asia/Shanghai), inclusive." },
    periodEnd: { ...timestampSchema, description: "The next day's first instant, exclusive." },
    format: { type: 'string', const: 'CSV' },
    formatVersion: {
      type: 'integer',
      minimum: 1,
      description: 'The columns of the file; version 1 is described in "The file" of the Statements page.',
    },
    compression: { type: 'string', enum: ['NONE', 'GZIP'] },
    contentType: { type: 'string', enum: ['text/csv; charset=utf-8', 'application/gzip'] },
    fileName: { type: 'string' },
    rowCount: { type: 'integer', minimum: 0 },
    sizeBytes: { type: 'integer', minimum: 1, description: "The file's size in bytes (compressed, for GZIP)." },
    sha256: {
      type: 'string',
      pattern: '^[0-9a-f]{64}$',
      description: "Lower-case hex SHA-256 of the file's bytes as served (compressed, for GZIP).",
    },
    totals: statementTotalsSchema,
    filePath: { type: 'string', description: 'The path (and query) to GET the file with, signed like any request.' },
  },
  description: "requestId plus the summary of the day's statement: its totals and its file's size and SHA-256.",
} as const satisfies ObjectSchema;

/** One delivery attempt of an event, as the merchant sees it. */
export const deliveryAttemptSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['attemptNo', 'attemptedAt', 'httpStatus', 'error', 'durationMs', 'responseExcerpt'],
  properties: {
    attemptNo: { type: 'integer', minimum: 1 },
    attemptedAt: timestampSchema,
    httpStatus: nullable({ type: 'integer' }, 'The status your endpoint answered; null when it gave none.'),
    error: nullable(
      { type: 'string' },
      'Why no status came back (TIMEOUT, CONNECTION_REFUSED, DNS_FAILED: ..., NO_NOTIFY_URL, ...), or REDIRECT_NOT_FOLLOWED; null when your endpoint answered.',
    ),
    durationMs: { type: 'integer', minimum: 0 },
    responseExcerpt: nullable(
      { type: 'string', maxLength: 200 },
      "The first 200 characters of your endpoint's answer (control characters as spaces); nothing more is kept.",
    ),
  },
  description: 'One delivery attempt of an event.',
} as const satisfies ObjectSchema;

/** An event of the app's log: its payload as delivered and how its delivery went. */
export const eventLogEntrySchema = {
  type: 'object',
  additionalProperties: false,
  required: [
    'eventId',
    'eventType',
    'occurredAt',
    'stateVersion',
    'status',
    'deliveryAttempts',
    'lastAttempt',
    'nextAttemptAt',
    'deliveredAt',
    'payload',
  ],
  properties: {
    eventId: { type: 'string', pattern: '^evt_[0-9a-z]+$' },
    eventType: { type: 'string', enum: ['PAYMENT_SUCCEEDED', 'PAYMENT_CLOSED', 'PAYMENT_FAILED', 'REFUND_SUCCEEDED', 'REFUND_FAILED'] },
    occurredAt: timestampSchema,
    stateVersion: { type: 'integer', minimum: 1 },
    status: {
      type: 'string',
      enum: ['PENDING', 'DELIVERED', 'DEAD'],
      description: 'Delivery status: PENDING (queued or retrying), DELIVERED (acknowledged), DEAD (every retry failed).',
    },
    deliveryAttempts: { type: 'integer', minimum: 0 },
    lastAttempt: nullable(deliveryAttemptSchema),
    nextAttemptAt: nullable(timestampSchema, 'When it is sent next (PENDING only).'),
    deliveredAt: nullable(timestampSchema),
    payload: webhookEventSchema,
  },
  description: 'An event of the app: the payload exactly as delivered, and its delivery.',
} as const satisfies ObjectSchema;

export const eventListSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['requestId', 'events', 'nextCursor'],
  properties: {
    requestId,
    events: { type: 'array', items: eventLogEntrySchema },
    nextCursor: nullable({ type: 'string' }, 'Pass as cursor for the next (older) page; null on the last page.'),
  },
  description: "requestId plus a page of the app's events, newest first.",
} as const satisfies ObjectSchema;

/** The event's own fields spread, not extended: the log's entries stay closed where they are listed. */
export const eventDetailSchema = {
  type: 'object',
  additionalProperties: false,
  required: [...withRequestId.required, ...eventLogEntrySchema.required, 'deliveries'],
  properties: {
    ...withRequestId.properties,
    ...eventLogEntrySchema.properties,
    deliveries: { type: 'array', items: deliveryAttemptSchema },
  },
  description: 'requestId plus the event and its delivery attempts (the latest 50, oldest first).',
} as const satisfies ObjectSchema;

export const redeliverySchema = {
  type: 'object',
  additionalProperties: false,
  required: ['requestId', 'eventId', 'status', 'nextAttemptAt'],
  properties: {
    requestId,
    eventId: { type: 'string' },
    status: { type: 'string', const: 'PENDING' },
    nextAttemptAt: timestampSchema,
  },
  description: 'requestId plus the event queued for delivery again.',
} as const satisfies ObjectSchema;

/** One published platform key (the platform-keys read). */
export const platformKeySchema = {
  type: 'object',
  additionalProperties: false,
  required: ['keyId', 'publicKeyPem', 'state', 'signsFrom', 'signsUntil', 'endorsement'],
  properties: {
    keyId: { type: 'string', minLength: 1, maxLength: 128 },
    publicKeyPem: { type: 'string', description: 'SPKI PEM of an RSA key, 2048 to 4096 bits.' },
    state: {
      type: 'string',
      enum: ['CURRENT', 'NEXT', 'PREVIOUS'],
      description: 'CURRENT signs now; NEXT is published ahead of signing; PREVIOUS signed before.',
    },
    signsFrom: nullable(timestampSchema, 'From when the key signs (null: from when the platform read it).'),
    signsUntil: nullable(timestampSchema, 'Until when (the next key signs from then), or null.'),
    endorsement: nullable(
      {
        type: 'object',
        additionalProperties: false,
        required: ['keyId', 'signature'],
        properties: {
          keyId: { type: 'string', minLength: 1, maxLength: 128, description: 'The key published before this one, which signed it.' },
          signature: { type: 'string', description: 'Standard Base64 RSASSA-PKCS1-v1_5 / SHA-256 over the endorsement string.' },
        },
      },
      'The signature of the key published before it over "mps-platform-key-endorsement/v1\\n{keyId}\\n{hex SHA-256 of the SPKI DER}\\n"; null for the first key.',
    ),
  },
} as const satisfies ObjectSchema;

export const platformKeysSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['requestId', 'currentKeyId', 'nextKeyId', 'keys'],
  properties: {
    requestId,
    currentKeyId: nullable({ type: 'string' }, 'The key that signs now.'),
    nextKeyId: nullable({ type: 'string' }, 'The key staged to sign next, if any.'),
    keys: { type: 'array', items: platformKeySchema, maxItems: 1000, description: 'Every published key, in the order they sign.' },
  },
  description: "requestId plus the platform's published public keys.",
} as const satisfies ObjectSchema;
