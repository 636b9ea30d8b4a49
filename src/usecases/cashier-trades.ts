/**
 * The cashier's provider trades (docs/cashier.md): an attempt is paid through its own provider
 * order (WeChat Pay's H5, Alipay's collection code and page) or, where that cannot be paid, through
 * a trade of it made when the page first needs it: a JSAPI order inside WeChat (for the buyer's
 * openid, from WeChat's silent web authorization), a Native order (a code to scan) on a computer.
 * Each trade has its own provider order number (migrations/0020); one paid pays the attempt, the
 * others are closed, a second payment is refunded (src/domain/payment-decisions.ts, confirmPaid).
 *
 * Only a PAYABLE attempt gets a trade (the caller checks: the page's state), and the provider is
 * called outside any transaction; its material is recorded by decide, then apply
 * (src/domain/attempt-decisions.ts, decideTradeMade), in one statement. A trade whose
 * answer was lost, or that the provider refused, stays NEW: the identical order is sent again the
 * next time the page needs it, which the provider answers with the same material.
 */
import { decideTradeMade } from '../domain/attempt-decisions.ts';
import { newId } from '../domain/ids.ts';
import { type JsapiPayment, ProviderRejectedError, type CreateTradeResult } from '../providers/provider.ts';
import * as attempts from '../store/attempts.ts';
import type { AttemptRow } from '../store/attempts.ts';
import type { OrderRow } from '../store/orders.ts';
import * as trades from '../store/trades.ts';
import type { TradeProduct, TradeRow } from '../store/trades.ts';
import { callProvider } from './attempts.ts';
import { type UseCaseDeps, nowOf } from './deps.ts';
import { applyNotification } from './notifications.ts';
import { decideAndApply } from './payment-state.ts';

/** JSAPI trades of one attempt at most (one per WeChat user who opens the link): a link passed around makes no orders without end. */
export const MAX_JSAPI_TRADES = 5;

/** Why a trade has no material to show: refused, an answer lost (ask again), too many, or not a product of this provider. */
export type TradeProblem = 'REJECTED' | 'UNCERTAIN' | 'LIMIT' | 'UNAVAILABLE';

export interface TradeForPage {
  trade: TradeRow | null;
  problem: TradeProblem | null;
}

/** Whether the attempt's provider makes trades of this product (and, for JSAPI, authorizes WeChat users). */
export function offersProduct(d: UseCaseDeps, attempt: AttemptRow, product: TradeProduct): boolean {
  let p;
  try {
    p = d.providers.byName(attempt.provider);
  } catch {
    return false;
  }
  if (!p.createTrade || !p.tradeProducts?.includes(product)) return false;
  return product !== 'JSAPI' || (p.buyerIdentity != null && p.jsapiPayment !== undefined);
}

/**
 * The attempt's trade of `product` (JSAPI: the one of the WeChat user `payer`) with its material:
 * recorded and made at the provider the first time, asked again (identically) while it has none.
 */
export async function tradeForPage(
  d: UseCaseDeps,
  order: OrderRow,
  attempt: AttemptRow,
  product: TradeProduct,
  payer = '',
): Promise<TradeForPage> {
  if (!offersProduct(d, attempt, product)) return { trade: null, problem: 'UNAVAILABLE' };
  const row = await recordTrade(d, order, attempt, product, payer);
  if (!row) return { trade: null, problem: 'LIMIT' };
  return row.state === 'NEW' ? makeTrade(d, order, attempt, row) : { trade: row, problem: null };
}

/** The attempt's trade of (product, payer) as recorded, NEW if it is new; null at the cap. */
function recordTrade(d: UseCaseDeps, order: OrderRow, attempt: AttemptRow, product: TradeProduct, payer: string): Promise<TradeRow | null> {
  return trades.ensureTradeRow(
    d.db,
    {
      id: newId.trade(),
      attemptId: attempt.id,
      orderId: order.id,
      provider: attempt.provider,
      product,
      payer,
      handle: product === 'JSAPI' ? newId.tradeHandle() : null,
    },
    product === 'JSAPI' ? MAX_JSAPI_TRADES : 1,
    nowOf(d),
  );
}

/** The trade's order sent to the provider (again, identically, for a trade whose answer was lost), and its outcome recorded. */
async function makeTrade(d: UseCaseDeps, order: OrderRow, attempt: AttemptRow, row: TradeRow): Promise<TradeForPage> {
  let result: CreateTradeResult;
  try {
    result = await d.providers.byName(row.provider).createTrade!({
      tradeNo: row.id,
      product: row.product,
      payerOpenId: row.product === 'JSAPI' ? row.payer : null,
      openOrderId: order.id,
      amountFen: order.amountFen,
      currency: 'CNY',
      subject: order.subject,
      expireAt: order.expireAt,
      payerClientIp: order.payerClientIp,
    });
  } catch (err) {
    const problem = err instanceof ProviderRejectedError ? 'REJECTED' : 'UNCERTAIN';
    d.log.warn({ tradeNo: row.id, product: row.product, problem, reason: (err as Error).message }, 'provider trade not made');
    return { trade: row, problem };
  }
  if (result.outcome === 'PAID') {
    // Paid already (an earlier request of this trade reached the provider and the buyer paid it).
    await applyNotification(d, { kind: 'PAYMENT', attemptId: row.id, state: 'PAID', reason: null, providerRef: result.providerRef });
    return { trade: await trades.getTrade(d.db, row.id), problem: null };
  }
  // Recorded by decide, then apply (decideTradeMade): applied only if the order's records are still as read.
  const material = result.material;
  const out = (await decideAndApply(
    d,
    () => d.records.read('order', order.id),
    (rec, now) => {
      const { change, state } = decideTradeMade(rec, row.id, material, attempt.expireAt, now);
      return { change, verdict: state };
    },
  ))!;
  const state = out.verdict;
  return { trade: { ...row, state, material: state === 'OPEN' ? material : row.material }, problem: null };
}

/**
 * The attempt's provider page (WeChat Pay's h5_url) while it is still valid: one that is older than
 * its provider's page life less a minute is asked again with the identical order, which answers a
 * page (the same order at WeChat Pay). Asked in vain (refused, or no answer): the page it had.
 */
export async function freshProviderPage(d: UseCaseDeps, order: OrderRow, attempt: AttemptRow): Promise<string | null> {
  let ttl: number | undefined;
  try {
    ttl = d.providers.byName(attempt.provider).pageTtlMs;
  } catch {
    return attempt.redirectUrl;
  }
  if (attempt.redirectUrl === null || ttl === undefined || nowOf(d).getTime() - attempt.updatedAt.getTime() < ttl - 60_000) {
    return attempt.redirectUrl;
  }
  const again = await callProvider(d, order, attempt);
  if (typeof again !== 'object') return attempt.redirectUrl;
  if (again.outcome === 'PAID') {
    await applyNotification(d, { kind: 'PAYMENT', attemptId: attempt.id, state: 'PAID', reason: null, providerRef: again.providerRef });
    return null;
  }
  if (again.material.redirectUrl === null) return attempt.redirectUrl;
  await attempts.noteAttemptPage(d.db, attempt.id, again.material.redirectUrl, nowOf(d));
  return again.material.redirectUrl;
}

/** The signed parameters of WeChat's payment call for an open JSAPI trade. */
export function jsapiPaymentOf(d: UseCaseDeps, trade: TradeRow): JsapiPayment | null {
  const p = d.providers.byName(trade.provider);
  return trade.state === 'OPEN' && trade.material && p.jsapiPayment ? p.jsapiPayment(trade.material) : null;
}

// --- WeChat's web authorization ------------------------------------------------------------------

/**
 * Starts WeChat's silent authorization for the page of an attempt: a `state` bound to that attempt
 * (valid 10 minutes, single-use) and the authorize address the buyer's browser is sent to, which
 * comes back to `redirectUri`. Null when the provider has no authorization configured.
 */
export async function beginAuthorization(d: UseCaseDeps, attempt: AttemptRow, redirectUri: string): Promise<string | null> {
  if (!offersProduct(d, attempt, 'JSAPI')) return null;
  const identity = d.providers.byName(attempt.provider).buyerIdentity!;
  const state = newId.oauthState();
  await trades.insertOAuthState(d.db, state, attempt.id, nowOf(d));
  return identity.authorizeUrl(redirectUri, state);
}

/** Why an authorization did not give a payer: the state (unknown, of another page, used, expired), the code, or too many payers. */
export type AuthorizationProblem = 'STATE' | 'CODE' | 'LIMIT' | 'UNAVAILABLE';

/**
 * Finishes it: the state used once (it must be this attempt's), the code exchanged on the server
 * for the buyer's openid, and the attempt's JSAPI trade for that buyer recorded. Answers the
 * trade's handle, which the page's address carries (never the openid).
 */
export async function finishAuthorization(
  d: UseCaseDeps,
  order: OrderRow,
  attempt: AttemptRow,
  state: string,
  code: string,
): Promise<{ handle: string } | { problem: AuthorizationProblem }> {
  if (!offersProduct(d, attempt, 'JSAPI')) return { problem: 'UNAVAILABLE' };
  if (!(await trades.consumeOAuthState(d.db, state, attempt.id, nowOf(d)))) return { problem: 'STATE' };
  let openid: string;
  try {
    openid = await d.providers.byName(attempt.provider).buyerIdentity!.openIdOf(code);
  } catch (err) {
    d.log.warn({ attemptId: attempt.id, reason: (err as Error).message }, 'WeChat authorization code not exchanged');
    return { problem: 'CODE' };
  }
  const row = await recordTrade(d, order, attempt, 'JSAPI', openid);
  return row?.handle ? { handle: row.handle } : { problem: 'LIMIT' };
}

/** The attempt's JSAPI trade the page's handle names, with its material (made or asked again when it has none). */
export async function jsapiTradeForPage(
  d: UseCaseDeps,
  order: OrderRow,
  attempt: AttemptRow,
  handle: string,
): Promise<TradeForPage | null> {
  const row = await trades.tradeByHandle(d.db, attempt.id, handle);
  if (!row || row.product !== 'JSAPI') return null;
  return tradeForPage(d, order, attempt, 'JSAPI', row.payer);
}

/** The provider order a sandbox buyer's action on the page pays: the trade of the way shown, else the attempt's own. */
export async function tradeNoOfWay(d: UseCaseDeps, attempt: AttemptRow, way: string, handle: string | null): Promise<string> {
  const row =
    way === 'native'
      ? await trades.findTrade(d.db, attempt.id, 'NATIVE', '')
      : way === 'jsapi' && handle
        ? await trades.tradeByHandle(d.db, attempt.id, handle)
        : null;
  return row?.state === 'OPEN' ? row.id : attempt.id;
}
