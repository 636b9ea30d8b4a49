/**
 * Response bodies of the open API, as schemas: published in the OpenAPI document and checked
 * against real responses in the tests (test/http/openapi.test.ts), so the document cannot drift.
 */
import { CLOSED_REASONS, ATTEMPT_STATES, ORDER_STATUSES, REFUND_STATES } from './states.ts';
import { type ArraySchema, type ObjectSchema, type Schema, nullable } from './schema.ts';

const ts = {
  type: 'string',
  format: 'date-time',
  pattern: '^\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z$',
  description: 'RFC 3339 UTC with milliseconds',
} as const;
const requestId = { type: 'string', minLength: 1, maxLength: 128, description: "The merchant's X-SVC-Request-Id." } as const;
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

const snapshotProps = {
  openOrderId: { type: 'string', pattern: '^ord_[0-9a-z]+$' },
  outTradeNo: { type: 'string' },
  status: { type: 'string', enum: ORDER_STATUSES },
  closedReason: nullable({ type: 'string', enum: CLOSED_REASONS }),
  channel: { type: 'string', enum: ['ALIPAY_H5', 'WECHAT_H5'] },
  tradeScope: nullable({ type: 'string', enum: ['PHYSICAL_FACE_TO_FACE', 'CARD_VIRTUAL'] }),
  links: { type: 'array', items: { type: 'string', enum: ['ALIPAY_AGGREGATION_NATIVE', 'WECHAT_JSAPI'] } },
  amountFen: { type: 'integer', minimum: 1 },
  currency: { type: 'string', const: 'CNY' },
  attach: nullable({ type: 'string' }),
  expireAt: ts,
  payUrl: nullable({ type: 'string', format: 'uri' }, 'Cashier page; only in create and re-create answers with a valid attempt.'),
  qrCode: nullable({ type: 'string' }, 'ALIPAY_H5 collection code; only in create and re-create answers; null in query and close.'),
  payUrlExpireHint: { type: 'integer', description: "UTC epoch seconds of the order's expireAt." },
  nextAction: { type: 'string', enum: ['CREATE_ATTEMPT'] },
  latestAttempt: nullable({
    type: 'object',
    additionalProperties: false,
    required: ['state', 'expireAt'],
    properties: { state: { type: 'string', enum: ATTEMPT_STATES }, expireAt: ts },
  }),
  feeProjection: feeProjectionSchema,
  replayed: { type: 'boolean' },
  unknown: { type: 'boolean', const: true } as unknown as Schema,
} as const;

const snapshotRequired = [
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
];

export const orderCreatedSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['requestId', ...snapshotRequired, 'replayed'],
  properties: { requestId, ...snapshotProps },
} as const satisfies ObjectSchema;

export const orderQuerySchema = {
  type: 'object',
  additionalProperties: false,
  required: ['requestId', ...snapshotRequired, 'qrCode', 'latestAttempt'],
  properties: { requestId, ...snapshotProps },
} as const satisfies ObjectSchema;

export const orderCloseSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['requestId', 'closeState', ...snapshotRequired, 'qrCode', 'latestAttempt'],
  properties: {
    requestId,
    closeState: { type: 'string', enum: ['CLOSE_REQUESTED', 'ALREADY_CLOSED', 'UNKNOWN_KEPT', 'PROVIDER_PAID_CONFLICT'] },
    ...snapshotProps,
  },
} as const satisfies ObjectSchema;

export const refundSchema = {
  type: 'object',
  additionalProperties: false,
  required: [
    'requestId',
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
    requestId,
    refundAttemptId: { type: 'string', pattern: '^rf_[0-9a-z]+$' },
    outRefundNo: { type: 'string' },
    outTradeNo: { type: 'string' },
    openOrderId: { type: 'string' },
    amountFen: { type: 'integer', minimum: 1 },
    state: { type: 'string', enum: REFUND_STATES },
    reason: nullable({ type: 'string' }),
    createdAt: ts,
    updatedAt: ts,
    replayed: { type: 'boolean', description: 'Always true in the refund query: a projection of an existing record.' },
    unknown: { type: 'boolean', description: 'true while the provider outcome is uncertain (state UNKNOWN); always present.' },
  },
} as const satisfies ObjectSchema;

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
} as const satisfies ArraySchema;

export const settlementSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['requestId', 'accounts', 'mode', 'participants', 'unavailablePolicy'],
  properties: {
    requestId,
    accounts: {
      type: 'array',
      items: {
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
      },
    },
    mode: nullable({ type: 'string', enum: ['SINGLE', 'PRIORITY', 'RATIO'] }, 'null while no allocation is configured'),
    participants: { type: 'array', items: { type: 'string' } },
    ratios: ratiosSchema,
    unavailablePolicy: nullable({ type: 'string', enum: ['FAIL', 'NEXT_AVAILABLE', 'REDISTRIBUTE'] }),
  },
} as const satisfies ObjectSchema;

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
    occurredAt: ts,
    outRefundNo: nullable({ type: 'string' }, 'null on payment events.'),
    outTradeNo: { type: 'string' },
    reason: nullable({ type: 'string' }, 'closedReason, failure reason or refund reason; else null.'),
    stateVersion: { type: 'integer', minimum: 1, description: 'One counter per order, shared with its refunds: order by it.' },
    status: { type: 'string', description: 'The order status or refund state after the change.' },
  },
} as const satisfies ObjectSchema;
