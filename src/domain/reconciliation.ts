/**
 * Reconciliation with a provider's statement (docs/reconciliation.md): a statement's line in our
 * terms, and what a reconciliation makes of each line. Pure: no I/O.
 */

/**
 * A line of a provider's statement of a day (its bill), in our terms: what the provider says it
 * did, to be matched against the ledger.
 */
export interface StatementLine {
  kind: 'PAYMENT' | 'REFUND';
  /** PAYMENT: our attempt id (the provider's out_trade_no); REFUND: our refund id (its refund request number). */
  subjectId: string;
  /** The provider's own trade or refund number, when the statement gives it. */
  providerRef: string | null;
  /** In fen, positive. */
  amountFen: number;
  /**
   * PAYMENT: PAID, or REVOKED (paid, then revoked). REFUND: SUCCEEDED, PENDING (accepted, not
   * settled when the statement was made), FAILED. Anything else is the provider's own word, kept as is.
   */
  state: string;
  /** When it happened at the provider (paid, refund accepted or settled, as the statement gives it). */
  at: Date | null;
}

/**
 * The findings kept open for the operator (provider_discrepancies, source STATEMENT, kind):
 * a payment or refund the ledger never recorded, one the ledger has that the provider lacks, an
 * amount or a state that differs, a payment held by another provider.
 */
export const FLAGGED_OUTCOMES = [
  'PAYMENT_NOT_RECORDED',
  'REFUND_NOT_RECORDED',
  'MISSING_AT_PROVIDER',
  'REFUND_MISSING_AT_PROVIDER',
  'AMOUNT_MISMATCH',
  'STATE_MISMATCH',
  'PROVIDER_MISMATCH',
] as const;
export type FlaggedOutcome = (typeof FLAGGED_OUTCOMES)[number];

/**
 * What a line became: MATCHED; CONVERGED (the provider's word applied through the notice path,
 * kept as a finding resolved at once: PAID_NOT_NOTIFIED, REFUND_NOT_NOTIFIED); UNCHECKED (a
 * ledger line the provider could not be asked about); a flagged outcome; or, while the run
 * works, TO_CONVERGE and TO_CHECK.
 */
export type LineOutcome = 'MATCHED' | 'CONVERGED' | 'UNCHECKED' | 'TO_CONVERGE' | 'TO_CHECK' | FlaggedOutcome;

/** Every outcome a completed run's line can have. */
export const RUN_OUTCOMES = ['MATCHED', 'CONVERGED', 'UNCHECKED', ...FLAGGED_OUTCOMES] as const;
