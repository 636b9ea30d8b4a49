/**
 * What a gateway answer means, as one table (docs/providers-alipay.md, "Answers and outcomes").
 *
 * An answer first has to be an answer: received within the deadline, HTTP 200, JSON without
 * duplicate names, carrying the `<method>_response` member and a signature that verifies with
 * Alipay's key. Anything short of that is UNCERTAIN (the call may or may not have been carried
 * out), whatever it seems to say. A verified answer is then read by its `code` and `sub_code`
 * here, the first matching row winning; each call turns the meaning into its own outcome
 * (alipay.ts, `#resolve` and the calls).
 */

export type AnswerMeaning =
  /** code 10000: the call was carried out; its fields say the rest. */
  | 'SUCCESS'
  /** The trade (out_trade_no) is unknown to Alipay. */
  | 'NOT_FOUND'
  /** The trade has been paid already. */
  | 'PAID'
  /** The trade is not in a state that allows the call: which state, a query says. */
  | 'STATUS'
  /** A clear refusal: nothing was done. */
  | 'REJECTED'
  /** It may or may not have been done: ask again later. */
  | 'UNCERTAIN';

export interface AnswerRow {
  /** The answer's `code`, or '*' for any. */
  code: string;
  /** The answer's `sub_code`: exactly, by pattern, or null for any (including none). */
  subCode: string | RegExp | null;
  meaning: AnswerMeaning;
  why: string;
}

const GATEWAY_REFUSALS = [
  ['20001', 'insufficient authorisation (aop.*): the app may not make this call'],
  ['40001', 'a required argument is missing (isv.missing-*)'],
  ['40002', 'an argument is invalid (isv.invalid-*: a bad signature, app id, parameter)'],
  ['40003', 'insufficient ISV permissions'],
  ['40006', 'insufficient permissions (isv.insufficient-*)'],
] as const;

export const ANSWER_TABLE: readonly AnswerRow[] = [
  { code: '10000', subCode: null, meaning: 'SUCCESS', why: 'the call was carried out' },
  {
    code: '20000',
    subCode: null,
    meaning: 'UNCERTAIN',
    why: 'service currently unavailable (isp.unknow-error): not known to be done or not',
  },
  {
    code: '*',
    subCode: /^(aop\.)?(isp\.|ACQ\.SYSTEM_ERROR$)/,
    meaning: 'UNCERTAIN',
    why: 'a system error at Alipay: Alipay says to call again with the same parameters',
  },
  { code: '40004', subCode: 'ACQ.TRADE_NOT_EXIST', meaning: 'NOT_FOUND', why: 'the trade does not exist at Alipay' },
  { code: '40004', subCode: 'ACQ.TRADE_HAS_SUCCESS', meaning: 'PAID', why: 'the trade has been paid' },
  { code: '40004', subCode: 'ACQ.TRADE_STATUS_ERROR', meaning: 'STATUS', why: 'the trade is not in a state that allows the call' },
  { code: '40004', subCode: null, meaning: 'REJECTED', why: 'a business refusal (ACQ.*): nothing was done' },
  ...GATEWAY_REFUSALS.map(([code, why]): AnswerRow => ({ code, subCode: null, meaning: 'REJECTED', why })),
  { code: '*', subCode: null, meaning: 'UNCERTAIN', why: 'a code this table does not know: not known to be done or not' },
];

/** The first row of ANSWER_TABLE that matches (the last row matches everything). */
export function answerRow(code: string, subCode: string | null): AnswerRow {
  return ANSWER_TABLE.find((row) => (row.code === '*' || row.code === code) && subCodeMatches(row.subCode, subCode))!;
}

function subCodeMatches(pattern: AnswerRow['subCode'], subCode: string | null): boolean {
  if (pattern === null) return true;
  if (subCode === null) return false;
  return typeof pattern === 'string' ? pattern === subCode : pattern.test(subCode);
}
