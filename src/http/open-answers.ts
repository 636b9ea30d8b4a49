/**
 * The open API's one mapper from use-case outcomes to answers: results to status codes and bodies,
 * DomainErrors to the contract's failure envelope (decisions.md section 4) and its headers.
 */
import type { DomainCode, DomainError } from '../domain/errors.ts';
import type { OpenApiCode } from '../gate/open-errors.ts';
import { type OpenAnswer, failureAnswer } from '../gate/gate.ts';
import type { OpenResult } from '../usecases/results.ts';
import {
  eventDetailBody,
  eventPageBody,
  orderSnapshot,
  platformKeysBody,
  refundProjection,
  settlementBody,
  statementBody,
} from '../views/open.ts';

/** What the rendering of a result needs from the request and the deployment. */
export interface RenderContext {
  requestId: string;
  nowMs: number;
  publicBaseUrl: string;
  voidedLinks: readonly string[];
}

export function renderResult(r: OpenResult, c: RenderContext): OpenAnswer {
  const ok = (status: number, fields: Record<string, unknown>): OpenAnswer => ({ status, body: { requestId: c.requestId, ...fields } });
  const snap = { nowMs: c.nowMs, publicBaseUrl: c.publicBaseUrl, voidedLinks: c.voidedLinks };
  switch (r.kind) {
    case 'order':
      return ok(r.replayed ? 200 : 201, orderSnapshot(r.order, r.attempt, { ...snap, view: 'create', replayed: r.replayed }));
    case 'order-query':
      return ok(200, orderSnapshot(r.order, r.attempt, { ...snap, view: 'query' }));
    case 'order-close':
      return ok(200, { closeState: r.closeState, ...orderSnapshot(r.order, r.latest, { ...snap, view: 'close' }) });
    case 'refund':
      return ok(r.replayed ? 200 : 201, refundProjection(r.refund, r.order, r.replayed));
    case 'refund-query':
      return ok(200, refundProjection(r.refund, r.order, true));
    case 'settlement':
      return ok(200, settlementBody(r));
    case 'statement':
      return ok(200, statementBody(r));
    case 'event-page':
      return ok(200, eventPageBody(r));
    case 'event':
      return ok(200, eventDetailBody(r));
    case 'event-redelivery':
      return ok(202, { eventId: r.eventId, status: 'PENDING', nextAttemptAt: r.nextAttemptAt.toISOString() });
    case 'platform-keys':
      return ok(200, platformKeysBody(r.keys));
  }
}

const CODE_OF: Record<DomainCode, OpenApiCode> = {
  NOT_FOUND: 'OPEN_API_NOT_FOUND',
  VALIDATION_FAILED: 'OPEN_API_BODY_INVALID',
  IDEMPOTENCY_CONFLICT: 'OPEN_API_IDEMPOTENCY_CONFLICT',
  CONFLICT: 'OPEN_API_STATE_INVALID',
  STATE_INVALID: 'OPEN_API_STATE_INVALID',
  CHANNEL_UNAVAILABLE: 'OPEN_API_CHANNEL_UNAVAILABLE',
  TRADE_SCOPE_UNAVAILABLE: 'OPEN_API_TRADE_SCOPE_UNAVAILABLE',
  LIMIT_EXCEEDED: 'OPEN_API_LIMIT_EXCEEDED',
  PROVIDER_REJECTED: 'OPEN_API_PROVIDER_REJECTED',
  RATE_LIMITED: 'OPEN_API_RATE_LIMITED',
  UNAVAILABLE: 'OPEN_API_GUARD_UNAVAILABLE',
};

/**
 * A refusal of a use case. The neutral not-found never explains itself (existence must not be
 * inferred from it); the other refusals carry their own explanation when they have one.
 */
export function renderRefusal(err: DomainError, requestId: string): OpenAnswer {
  const code = CODE_OF[err.code];
  const a = failureAnswer(code, requestId, code === 'OPEN_API_NOT_FOUND' ? undefined : err.explanation, err.details);
  if (err.retryAfterSeconds !== undefined) a.headers = { 'Retry-After': String(err.retryAfterSeconds) };
  return a;
}
