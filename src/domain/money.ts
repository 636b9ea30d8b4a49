/** Money is integer fen end to end. Fee projection and amount ceilings (decisions.md section 6). */

export interface FeeRule {
  ruleVersion: number;
  standardRateBps: number;
  largeRateBps: number;
  thresholdFen: number;
  merchantRateBps: number;
}

/** Used when a merchant has no fee rule of its own yet (documented in docs/fees.md). */
export const DEFAULT_FEE_RULE: FeeRule = {
  ruleVersion: 0,
  standardRateBps: 60,
  largeRateBps: 38,
  thresholdFen: 10_000_000,
  merchantRateBps: 60,
};

export interface FeeProjection {
  companyServiceFeeFen: number;
  companyServiceFeeRateBps: number;
  merchantRateBps: number;
  merchantSettlementFen: number;
  ruleVersion: number;
  thresholdFen: number;
  tier: 'STANDARD' | 'LARGE';
}

export function feeProjection(amountFen: number, rule: FeeRule): FeeProjection {
  const large = amountFen >= rule.thresholdFen;
  const rateBps = large ? rule.largeRateBps : rule.standardRateBps;
  // floor((amount * rate + 5000) / 10000): round half up, in integers. amount <= 1e10 and
  // rate <= 10000 keep the product below 2^53.
  const fee = Math.floor((amountFen * rateBps + 5000) / 10000);
  return {
    companyServiceFeeFen: fee,
    companyServiceFeeRateBps: rateBps,
    merchantRateBps: rule.merchantRateBps,
    merchantSettlementFen: amountFen - fee,
    ruleVersion: rule.ruleVersion,
    thresholdFen: rule.thresholdFen,
    tier: large ? 'LARGE' : 'STANDARD',
  };
}

export type EntityType = 'INDIVIDUAL' | 'CORPORATE';
export const INDIVIDUAL_DEFAULT_CEILING_FEN = 500_000;

export interface ReceivingAccount {
  accountId: string;
  entityType: EntityType;
  agreedCeilingFen: number | null;
}

export function ceilingOf(entityType: EntityType, agreedCeilingFen: number | null): number | null {
  if (entityType === 'CORPORATE') return null;
  return agreedCeilingFen ?? INDIVIDUAL_DEFAULT_CEILING_FEN;
}

export interface Allocation {
  mode: 'SINGLE' | 'PRIORITY' | 'RATIO';
  participants: string[];
  ratios: { accountId: string; shareBps: number }[] | null;
  unavailablePolicy: 'FAIL' | 'NEXT_AVAILABLE' | 'REDISTRIBUTE';
}

/**
 * Each receiving leg's share of an order, in basis points: RATIO, each participant's `shareBps`;
 * SINGLE and PRIORITY, the whole amount (10000) to the first participant.
 */
export function legShares(allocation: Allocation): { accountId: string; shareBps: number }[] {
  if (allocation.mode === 'RATIO' && allocation.ratios !== null) return allocation.ratios;
  const first = allocation.participants[0];
  return first === undefined ? [] : [{ accountId: first, shareBps: 10000 }];
}

/**
 * True when the order cannot be received within its accounts' ceilings (scope SINGLE_AMOUNT). A
 * participant is available for an order when its ceiling admits the leg it would receive; the
 * allocation's `unavailablePolicy` says where the leg of one that is not goes (docs/fees.md):
 * - FAIL: nowhere; every leg must fit (SINGLE's one participant, PRIORITY's first, each RATIO share).
 * - NEXT_AVAILABLE: on to the next participant in order (PRIORITY: the whole amount to the first
 *   participant that can take it; RATIO: a share its account cannot take is added to the next
 *   participant's, passed further if that one cannot take both).
 * - REDISTRIBUTE: RATIO: over the other participants in proportion to their shares, until every
 *   remaining leg fits; PRIORITY as NEXT_AVAILABLE (a whole amount is not split).
 * Refused when a leg is left with no participant to take it. A leg is judged on its exact share
 * (amount x shares, compared without rounding: at most 1e10 x 10000, exact in a double), not on a
 * rounded split that would carry remainder fen.
 */
export function exceedsSingleCeiling(
  amountFen: number,
  merchantEntityType: EntityType,
  allocation: Allocation | null,
  accounts: ReadonlyMap<string, ReceivingAccount>,
): boolean {
  if (allocation === null || allocation.participants.length === 0) {
    const c = ceilingOf(merchantEntityType, null);
    return c !== null && amountFen > c;
  }
  const ceiling = (accountId: string): number | null => {
    const acc = accounts.get(accountId);
    return acc ? ceilingOf(acc.entityType, acc.agreedCeilingFen) : null;
  };
  /** Whether the account takes `bps` of `total` basis points of the amount. */
  const takes = (accountId: string, bps: number, total = 10000): boolean => {
    const c = ceiling(accountId);
    return c === null || amountFen * bps <= c * total;
  };
  const legs = legShares(allocation);
  const policy = allocation.unavailablePolicy;
  if (policy === 'FAIL' || allocation.mode === 'SINGLE') return !legs.every((l) => takes(l.accountId, l.shareBps));
  if (allocation.mode === 'PRIORITY') return !allocation.participants.some((id) => takes(id, 10000));
  if (policy === 'NEXT_AVAILABLE') {
    let carried = 0;
    for (const l of legs) {
      if (takes(l.accountId, l.shareBps + carried)) carried = 0;
      else if (!takes(l.accountId, l.shareBps)) carried += l.shareBps;
    }
    return carried > 0;
  }
  // REDISTRIBUTE: drop the participants that cannot take their share of what the others leave.
  let left = legs;
  for (;;) {
    const total = left.reduce((n, l) => n + l.shareBps, 0);
    const fit = left.filter((l) => takes(l.accountId, l.shareBps, total));
    if (fit.length === 0) return true;
    if (fit.length === left.length) return false;
    left = fit;
  }
}

/** The Asia/Shanghai calendar day (UTC+8, no DST) of an instant, as YYYY-MM-DD. */
export function shanghaiDay(at: Date): string {
  return new Date(at.getTime() + 8 * 3600_000).toISOString().slice(0, 10);
}

/**
 * A yuan amount as the acquirers write it (Alipay's total_amount, the bills' amounts) as integer
 * fen, or null when it is not exactly that form: digits, a point, two digits; no sign, no
 * exponent, no blanks, no leading zero before another digit. Computed on the digits, never
 * through a float.
 */
export function yuanToFen(yuan: string): number | null {
  const m = /^(0|[1-9][0-9]{0,13})\.([0-9]{2})$/.exec(yuan);
  if (!m) return null;
  const fen = Number(m[1]) * 100 + Number(m[2]);
  return Number.isSafeInteger(fen) ? fen : null;
}
