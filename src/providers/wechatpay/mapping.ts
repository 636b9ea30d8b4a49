/**
 * What each WeChat Pay error answer means to the PaymentProvider interface, one table per call
 * (docs/providers-wechatpay.md explains every row). These rules hold whatever the table says:
 *
 * - an answer that cannot be verified (or none at all, or a timeout) is UNCERTAIN: client.ts;
 * - any 5xx, whatever its code (SYSTEM_ERROR, BANKERROR, ...), is UNCERTAIN: the documentation
 *   asks to call again with the same parameters, so the call may have been carried out;
 * - 429 FREQUENCY_LIMITED is UNCERTAIN: for refunds the documentation says the refund may be
 *   being accepted ("该笔退款为受理中"), and a throttled create or close is simply asked again;
 * - a 4xx code the table does not know is UNCERTAIN: the provider check's query then finds out what
 *   happened, which is safe where guessing REJECTED is not.
 *
 * The outcomes: REJECTED (nothing happened: ProviderRejectedError with the code as reason),
 * NOT_FOUND (the order or refund does not exist), CLOSED (closing: the order is already closed),
 * CHECK (the answer does not say whether the order is paid: query it and decide from its state).
 */

export type Outcome = 'REJECTED' | 'UNCERTAIN' | 'NOT_FOUND' | 'CLOSED' | 'CHECK';
export type ErrorTable = Readonly<Record<string, Outcome>>;

/** Codes that mean the request was refused before anything was done, common to every call. */
const REFUSED: ErrorTable = {
  PARAM_ERROR: 'REJECTED',
  INVALID_REQUEST: 'REJECTED',
  APPID_MCHID_NOT_MATCH: 'REJECTED',
  MCH_NOT_EXISTS: 'REJECTED',
  SIGN_ERROR: 'REJECTED',
  NO_AUTH: 'REJECTED',
  NOAUTH: 'REJECTED',
};

/** `POST /v3/pay/transactions/h5`. */
export const CREATE_ERRORS: ErrorTable = {
  ...REFUSED,
  ACCOUNT_ERROR: 'REJECTED',
  ACCOUNTERROR: 'REJECTED',
  RULE_LIMIT: 'REJECTED',
  RULELIMIT: 'REJECTED',
  TRADE_ERROR: 'REJECTED',
  NOTENOUGH: 'REJECTED',
  NOT_ENOUGH: 'REJECTED',
  // An order of this number exists already: paid (the money is real), closed, or open with other
  // parameters. Only a query tells which.
  ORDERPAID: 'CHECK',
  ORDER_PAID: 'CHECK',
  ORDER_CLOSED: 'CHECK',
  OUT_TRADE_NO_USED: 'CHECK',
};

/** `GET /v3/pay/transactions/out-trade-no/{out_trade_no}`. */
export const QUERY_ERRORS: ErrorTable = {
  ...REFUSED,
  ORDER_NOT_EXIST: 'NOT_FOUND',
  ORDERNOTEXIST: 'NOT_FOUND',
};

/**
 * `POST /v3/pay/transactions/out-trade-no/{out_trade_no}/close`. A refusal to close may be
 * because the order was paid meanwhile (ORDERPAID, whatever its status code): every refusal is
 * checked by a query, which reports PAID, CLOSED or, for an order still open, the refusal.
 */
export const CLOSE_ERRORS: ErrorTable = {
  ORDER_NOT_EXIST: 'CLOSED',
  ORDERNOTEXIST: 'CLOSED',
  ORDER_CLOSED: 'CLOSED',
  ORDERPAID: 'CHECK',
  ORDER_PAID: 'CHECK',
  ...Object.fromEntries(Object.keys(REFUSED).map((k) => [k, 'CHECK' as const])),
  TRADE_ERROR: 'CHECK',
  RULE_LIMIT: 'CHECK',
  RULELIMIT: 'CHECK',
};

/** `POST /v3/refund/domestic/refunds` (codes of the official refund best practices page). */
export const REFUND_ERRORS: ErrorTable = {
  ...REFUSED,
  NOT_ENOUGH: 'REJECTED',
  NOTENOUGH: 'REJECTED',
  USER_ACCOUNT_ABNORMAL: 'REJECTED',
  // The order does not exist or is not paid: no refund was created.
  RESOURCE_NOT_EXISTS: 'REJECTED',
  TRADE_OVERDUE: 'REJECTED',
};

/** `GET /v3/refund/domestic/refunds/{out_refund_no}`. */
export const REFUND_QUERY_ERRORS: ErrorTable = {
  ...REFUSED,
  RESOURCE_NOT_EXISTS: 'NOT_FOUND',
};

/**
 * `GET /v3/bill/tradebill`. NO_STATEMENT_EXIST: no bill, the day had no trade (an empty
 * statement). STATEMENT_CREATING (not made yet) is asked again later (wechatpay.ts).
 */
export const BILL_ERRORS: ErrorTable = {
  ...REFUSED,
  NO_STATEMENT_EXIST: 'NOT_FOUND',
};

/** The outcome of a verified error answer (a status outside 2xx) by the call's table. */
export function classify(table: ErrorTable, status: number, code: string | null): Outcome {
  if (status >= 500 || status === 429) return 'UNCERTAIN';
  if (status < 400 || code === null) return 'UNCERTAIN';
  return Object.hasOwn(table, code) ? table[code]! : 'UNCERTAIN';
}

/** `trade_state` of a queried order. */
export const TRADE_STATES = {
  SUCCESS: 'PAID',
  // Paid, then (partly) refunded.
  REFUND: 'PAID',
  NOTPAY: 'OPEN',
  USERPAYING: 'OPEN',
  CLOSED: 'CLOSED',
  // Revoked (a payment-code order): never paid, cannot be paid.
  REVOKED: 'CLOSED',
  PAYERROR: 'FAILED',
} as const;

/**
 * `status` of a refund. ABNORMAL is not a failure: the money has left the merchant's account and
 * waits in WeChat Pay's refund account until the merchant redirects it (merchant platform, or the
 * abnormal-refund API), so the refund keeps holding its amount (PENDING) until it settles.
 * CLOSED: nothing was refunded (pending over 7 days without funds).
 */
export const REFUND_STATES = {
  SUCCESS: 'SUCCEEDED',
  PROCESSING: 'PENDING',
  ABNORMAL: 'PENDING',
  CLOSED: 'FAILED',
} as const;
