/** Parsing of the strict open-API bodies into typed inputs, and the business digests. */
import { createHash } from 'node:crypto';
import { isPublicIp } from '../net/ip.ts';
import { DomainError } from './errors.ts';
import { type CreateOrderInput, type CreateRefundInput, createOrderSchema, createRefundSchema } from './open-schemas.ts';
import { type ObjectSchema, codePointLength, validate } from './schema.ts';

function bodyInvalid(field: string, message: string): DomainError {
  return new DomainError('VALIDATION_FAILED', message, field ? { details: { field } } : {});
}

function check(schema: ObjectSchema, body: unknown, decimalLiterals: ReadonlySet<string>): Record<string, unknown> {
  const v = validate(schema, body, '', decimalLiterals);
  if (v) throw bodyInvalid(v.field, v.message);
  return body as Record<string, unknown>;
}

/** Absolute https URL, no user info, no query, no fragment (seed, create order `returnUrl`). */
export function isAcceptableReturnUrl(raw: string): boolean {
  if (!/^https:\/\//i.test(raw) || /[\s\x00-\x1f\x7f?#\\]/.test(raw)) return false;
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return false;
  }
  const authority = raw.slice('https://'.length).split('/')[0] ?? '';
  // The host as written: `https:///x` has none (the URL parser would take `x` for it).
  return (
    u.protocol === 'https:' && authority !== '' && u.hostname !== '' && !authority.includes('@') && u.username === '' && u.password === ''
  );
}

export function parseCreateOrder(body: unknown, decimalLiterals: ReadonlySet<string>): CreateOrderInput {
  // attach is trimmed first, then measured (decisions.md section 6).
  if (typeof body === 'object' && body !== null && !Array.isArray(body)) {
    const b = body as Record<string, unknown>;
    if (typeof b.attach === 'string') b.attach = b.attach.trim();
  }
  const b = check(createOrderSchema, body, decimalLiterals);
  const returnUrl = (b.returnUrl as string | undefined) ?? null;
  if (returnUrl !== null && !isAcceptableReturnUrl(returnUrl)) {
    throw bodyInvalid('returnUrl', 'returnUrl must be an absolute https URL without user info, query or fragment');
  }
  if (!isPublicIp(b.payerClientIp as string)) {
    throw bodyInvalid('payerClientIp', 'payerClientIp must be a valid public IPv4 or IPv6 address');
  }
  return {
    outTradeNo: b.outTradeNo as string,
    channel: b.channel as CreateOrderInput['channel'],
    tradeScope: (b.tradeScope as CreateOrderInput['tradeScope'] | undefined) ?? null,
    amountFen: b.amountFen as number,
    currency: 'CNY',
    subject: b.subject as string,
    description: (b.description as string | undefined) ?? null,
    attach: (b.attach as string | undefined) ?? null,
    returnUrl,
    payerClientIp: b.payerClientIp as string,
  };
}

export function parseCreateRefund(body: unknown, decimalLiterals: ReadonlySet<string>): CreateRefundInput {
  const b = check(createRefundSchema, body, decimalLiterals);
  return {
    outTradeNo: b.outTradeNo as string,
    outRefundNo: b.outRefundNo as string,
    refundAmountFen: b.refundAmountFen as number,
    reason: (b.reason as string | undefined) ?? null,
  };
}

function canonicalDigest(fields: Record<string, unknown>): string {
  const sorted = Object.keys(fields)
    .sort()
    .map((k) => `${JSON.stringify(k)}:${JSON.stringify(fields[k])}`)
    .join(',');
  return createHash('sha256').update(`{${sorted}}`).digest('hex');
}

/** decisions.md section 5: the eight digest fields as sent, attach trimmed, absent as null. */
export function orderDigest(i: CreateOrderInput): string {
  return canonicalDigest({
    channel: i.channel,
    tradeScope: i.tradeScope,
    amountFen: i.amountFen,
    currency: i.currency,
    subject: i.subject,
    description: i.description,
    returnUrl: i.returnUrl,
    attach: i.attach,
  });
}

export function refundDigest(i: CreateRefundInput): string {
  return canonicalDigest({ outTradeNo: i.outTradeNo, refundAmountFen: i.refundAmountFen, reason: i.reason });
}

export const MERCHANT_NO_RE = /^[A-Za-z0-9_-]{6,64}$/;
export { codePointLength };
