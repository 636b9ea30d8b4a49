/** Back-office request schemas (decisions.md section 8): validated as strictly as the open API's. */
import { CHANNELS, TRADE_SCOPES } from '../domain/open-schemas.ts';
import { type ObjectSchema, nullable } from '../domain/schema.ts';
import { ratiosSchema } from '../domain/response-schemas.ts';

const LINKS = ['ALIPAY_AGGREGATION_NATIVE', 'WECHAT_JSAPI'] as const;
const ENTITY = { type: 'string', enum: ['INDIVIDUAL', 'CORPORATE'] } as const;

/** An operation that takes no fields: no body, or `{}`; any field is unknown (400), as any non-object. */
export const noFieldsSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {},
} as const satisfies ObjectSchema;

export const createMerchantSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['name', 'entityType'],
  properties: { name: { type: 'string', minLength: 1, maxLength: 128 }, entityType: ENTITY },
} as const satisfies ObjectSchema;

const appFields = {
  notifyUrl: nullable({ type: 'string', minLength: 1, maxLength: 512 }),
  channels: { type: 'array', items: { type: 'string', enum: CHANNELS }, uniqueItems: true, maxItems: 2 },
  tradeScopes: { type: 'array', items: { type: 'string', enum: TRADE_SCOPES }, uniqueItems: true, maxItems: 2 },
  voidedLinks: { type: 'array', items: { type: 'string', enum: LINKS }, uniqueItems: true, maxItems: 2 },
  ipAllowlist: { type: 'array', items: { type: 'string', minLength: 1, maxLength: 64 }, maxItems: 200 },
  paymentWindowSeconds: { type: 'integer', minimum: 60, maximum: 7200 },
  dailyAmountCeilingFen: nullable({ type: 'integer', minimum: 1, maximum: 1_000_000_000_000 }),
  rateLimitPerSecond: { type: 'integer', minimum: 1, maximum: 100_000 },
  statementDownloadsAtOnce: nullable({ type: 'integer', minimum: 1, maximum: 1000 }),
} as const;

export const createAppSchema = {
  type: 'object',
  additionalProperties: false,
  properties: appFields,
} as const satisfies ObjectSchema;

export const patchAppSchema = {
  type: 'object',
  additionalProperties: false,
  minProperties: 1,
  properties: { ...appFields, status: { type: 'string', enum: ['ACTIVE', 'DISABLED'] } },
} as const satisfies ObjectSchema;

export const addKeySchema = {
  type: 'object',
  additionalProperties: false,
  required: ['keyId', 'publicKeyPem'],
  properties: {
    keyId: { type: 'string', pattern: '^[\\x21-\\x7e]{1,128}$' },
    publicKeyPem: { type: 'string', minLength: 1, maxLength: 8192 },
  },
} as const satisfies ObjectSchema;

export const patchKeySchema = {
  type: 'object',
  additionalProperties: false,
  required: ['status'],
  properties: { status: { type: 'string', enum: ['ACTIVE', 'DISABLED'] } },
} as const satisfies ObjectSchema;

export const createAccountSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['entityType', 'entityName', 'merchantNo', 'cardNumber'],
  properties: {
    entityType: ENTITY,
    entityName: { type: 'string', minLength: 1, maxLength: 128 },
    merchantNo: { type: 'string', pattern: '^[A-Za-z0-9_-]{1,64}$' },
    cardNumber: { type: 'string', pattern: '^[0-9]{12,19}$', description: 'Digits only; only the last 4 are stored.' },
    agreedCeilingFen: nullable({ type: 'integer', minimum: 1, maximum: 10_000_000_000 }),
  },
} as const satisfies ObjectSchema;

export const allocationSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['mode', 'participants', 'unavailablePolicy'],
  properties: {
    mode: { type: 'string', enum: ['SINGLE', 'PRIORITY', 'RATIO'] },
    participants: { type: 'array', items: { type: 'string', minLength: 1, maxLength: 64 }, minItems: 1, maxItems: 4, uniqueItems: true },
    ratios: ratiosSchema,
    unavailablePolicy: { type: 'string', enum: ['FAIL', 'NEXT_AVAILABLE', 'REDISTRIBUTE'] },
  },
} as const satisfies ObjectSchema;

export const feeRuleSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['ruleVersion', 'standardRateBps', 'largeRateBps', 'thresholdFen', 'merchantRateBps'],
  properties: {
    ruleVersion: { type: 'integer', minimum: 0, maximum: 2_147_483_647 },
    standardRateBps: { type: 'integer', minimum: 0, maximum: 10000 },
    largeRateBps: { type: 'integer', minimum: 0, maximum: 10000 },
    thresholdFen: { type: 'integer', minimum: 0, maximum: 10_000_000_000 },
    merchantRateBps: { type: 'integer', minimum: 0, maximum: 10000 },
  },
} as const satisfies ObjectSchema;

export const ipPolicySchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    trustedProxies: { type: 'array', items: { type: 'string', minLength: 1, maxLength: 64 }, maxItems: 200 },
    allowlist: nullable({ type: 'array', items: { type: 'string', minLength: 1, maxLength: 64 }, maxItems: 1000 }),
    denylist: { type: 'array', items: { type: 'string', minLength: 1, maxLength: 64 }, maxItems: 1000 },
    allowIpv4: { type: 'boolean' },
    allowIpv6: { type: 'boolean' },
  },
} as const satisfies ObjectSchema;

export const faultSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['operation', 'outcome'],
  properties: {
    operation: { type: 'string', enum: ['CREATE_ATTEMPT', 'CLOSE', 'REFUND', 'PAY'] },
    outcome: { type: 'string', enum: ['REJECT', 'TIMEOUT', 'PAID', 'DELAY_MS', 'AMOUNT_DIFFERS', 'NOTICE_LOST', 'LOST'] },
    times: { type: 'integer', minimum: 1, maximum: 1000 },
    delayMs: { type: 'integer', minimum: 0, maximum: 60_000 },
  },
} as const satisfies ObjectSchema;

export const sandboxPaySchema = {
  type: 'object',
  additionalProperties: false,
  properties: { attemptId: { type: 'string', minLength: 1, maxLength: 64 } },
} as const satisfies ObjectSchema;

/** Staged rotation: the new key is published now and signs this many seconds later (default 24 h). */
export const rotateKeySchema = {
  type: 'object',
  additionalProperties: false,
  properties: { activateAfterSeconds: { type: 'integer', minimum: 0, maximum: 30 * 86_400 } },
} as const satisfies ObjectSchema;

// --- operators, tokens, the console --------------------------------------------------------------

const ROLE = { type: 'string', enum: ['admin', 'operations', 'finance', 'support'] } as const;
const PASSWORD = { type: 'string', minLength: 1, maxLength: 1024 } as const;

export const createOperatorSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['name', 'role', 'password'],
  properties: { name: { type: 'string', minLength: 1, maxLength: 64 }, role: ROLE, password: PASSWORD },
} as const satisfies ObjectSchema;

export const patchOperatorSchema = {
  type: 'object',
  additionalProperties: false,
  minProperties: 1,
  properties: { role: ROLE, status: { type: 'string', enum: ['ACTIVE', 'DISABLED'] }, password: PASSWORD },
} as const satisfies ObjectSchema;

export const createTokenSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['label'],
  properties: { label: { type: 'string', minLength: 1, maxLength: 128 } },
} as const satisfies ObjectSchema;

export const redeliverEventsSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['eventIds'],
  properties: {
    eventIds: { type: 'array', items: { type: 'string', minLength: 1, maxLength: 64 }, minItems: 1, maxItems: 100, uniqueItems: true },
  },
} as const satisfies ObjectSchema;

export const signInSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['name', 'password'],
  properties: { name: { type: 'string', minLength: 1, maxLength: 128 }, password: PASSWORD },
} as const satisfies ObjectSchema;

export const changePasswordSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['currentPassword', 'newPassword'],
  properties: { currentPassword: PASSWORD, newPassword: PASSWORD },
} as const satisfies ObjectSchema;

/** POST /reconciliation/runs: the day (Asia/Shanghai) and, optionally, one provider. */
export const reconciliationRequestSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['day'],
  properties: {
    day: { type: 'string', pattern: '^\\d{4}-\\d{2}-\\d{2}$', description: 'YYYY-MM-DD, Asia/Shanghai' },
    provider: { type: 'string', minLength: 1, maxLength: 32 },
  },
} as const satisfies ObjectSchema;

// --- merchant users and the portal (docs/portal.md) ---

const MERCHANT_ROLE = { type: 'string', enum: ['owner', 'developer', 'finance', 'readonly'] } as const;

export const inviteUserSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['login', 'role'],
  properties: { login: { type: 'string', minLength: 1, maxLength: 128 }, role: MERCHANT_ROLE },
} as const satisfies ObjectSchema;

export const patchUserSchema = {
  type: 'object',
  additionalProperties: false,
  minProperties: 1,
  properties: { role: MERCHANT_ROLE, status: { type: 'string', enum: ['ACTIVE', 'DISABLED'] } },
} as const satisfies ObjectSchema;

export const portalSignInSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['login', 'password'],
  properties: {
    login: { type: 'string', minLength: 1, maxLength: 128 },
    password: PASSWORD,
    totpCode: nullable({ type: 'string', maxLength: 16 }),
  },
} as const satisfies ObjectSchema;

export const acceptInvitationSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['password'],
  properties: { password: PASSWORD },
} as const satisfies ObjectSchema;

export const totpCodeSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['code'],
  properties: { code: { type: 'string', minLength: 1, maxLength: 16 } },
} as const satisfies ObjectSchema;

export const currentPasswordSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['currentPassword'],
  properties: { currentPassword: PASSWORD },
} as const satisfies ObjectSchema;

/** What a merchant changes of its app itself. */
export const portalAppSchema = {
  type: 'object',
  additionalProperties: false,
  minProperties: 1,
  properties: { notifyUrl: appFields.notifyUrl, ipAllowlist: appFields.ipAllowlist },
} as const satisfies ObjectSchema;

/** A key's retirement: after this many seconds (0: now; at most 30 days), or null to take a retirement back. */
export const retireKeySchema = {
  type: 'object',
  additionalProperties: false,
  required: ['afterSeconds'],
  properties: { afterSeconds: nullable({ type: 'integer', minimum: 0, maximum: 30 * 86_400 }) },
} as const satisfies ObjectSchema;
