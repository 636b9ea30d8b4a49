/**
 * Request schemas of the open API (seed "Create order: request body", "Create refund: request
 * body"; decisions.md section 6). Routes validate with these objects and the OpenAPI document
 * publishes them.
 */
import type { ObjectSchema } from './schema.ts';

export const MERCHANT_NO_PATTERN = '^[A-Za-z0-9_-]{6,64}$';
export const AMOUNT_MAX_FEN = 10_000_000_000;

export const channelSchema = { type: 'string', enum: ['ALIPAY_H5', 'WECHAT_H5'], description: 'The payment channel.' } as const;
export const tradeScopeSchema = {
  type: 'string',
  enum: ['PHYSICAL_FACE_TO_FACE', 'CARD_VIRTUAL'],
  description: 'The declared trade form.',
} as const;

export const createOrderSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['outTradeNo', 'channel', 'amountFen', 'currency', 'subject', 'payerClientIp'],
  properties: {
    outTradeNo: { type: 'string', pattern: MERCHANT_NO_PATTERN, description: "The merchant's order number (6-64 of A-Z a-z 0-9 _ -)." },
    channel: channelSchema,
    tradeScope: tradeScopeSchema,
    amountFen: { type: 'integer', minimum: 1, maximum: AMOUNT_MAX_FEN, description: 'Integer fen; 1.0 counts as a decimal.' },
    currency: { type: 'string', const: 'CNY' },
    subject: { type: 'string', minLength: 1, maxLength: 128 },
    description: { type: 'string', maxLength: 256 },
    attach: { type: 'string', maxLength: 256, description: 'Trimmed, then measured; returned unchanged in events.' },
    returnUrl: { type: 'string', maxLength: 512, format: 'uri', description: 'Absolute https URL without user info, query or fragment.' },
    payerClientIp: { type: 'string', maxLength: 45, description: "Public IPv4 or IPv6 address of the buyer's client." },
  },
} as const satisfies ObjectSchema;

export const createRefundSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['outTradeNo', 'outRefundNo', 'refundAmountFen'],
  properties: {
    outTradeNo: { type: 'string', pattern: MERCHANT_NO_PATTERN },
    outRefundNo: { type: 'string', pattern: MERCHANT_NO_PATTERN },
    // No ceiling of its own (the seed sets only "greater than 0"): any amount above what is left
    // of the payment is 422 REFUND_CUMULATIVE, however large.
    refundAmountFen: { type: 'integer', minimum: 1 },
    reason: { type: 'string', maxLength: 256 },
  },
} as const satisfies ObjectSchema;

export type Channel = 'ALIPAY_H5' | 'WECHAT_H5';
export type TradeScope = 'PHYSICAL_FACE_TO_FACE' | 'CARD_VIRTUAL';
export const CHANNELS: readonly Channel[] = channelSchema.enum;
export const TRADE_SCOPES: readonly TradeScope[] = tradeScopeSchema.enum;
export const LINK_OF_CHANNEL: Record<Channel, string> = { ALIPAY_H5: 'ALIPAY_AGGREGATION_NATIVE', WECHAT_H5: 'WECHAT_JSAPI' };

export interface CreateOrderInput {
  outTradeNo: string;
  channel: Channel;
  tradeScope: TradeScope | null;
  amountFen: number;
  currency: 'CNY';
  subject: string;
  description: string | null;
  attach: string | null;
  returnUrl: string | null;
  payerClientIp: string;
}

export interface CreateRefundInput {
  outTradeNo: string;
  outRefundNo: string;
  refundAmountFen: number;
  reason: string | null;
}
