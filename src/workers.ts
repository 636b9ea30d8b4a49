/**
 * Background work, safe with several instances (work is claimed with row locks and leases):
 * expiry of orders at expireAt (the provider confirms unpaid first), the reconciler converging
 * UNKNOWN attempts, refunds, pending closes and duplicate-payment refunds by asking the provider
 * again with backoff, the event dispatcher, and purging of expired nonces and replays.
 */
import type { Services } from './services.ts';
import { withTx } from './store/db.ts';
import { attemptsOf, getAttempt, getOrder, getRefund, latestAttempt } from './store/orders.ts';
import { closeOrderById } from './usecases/orders.ts';
import { applyNotification } from './usecases/notifications.ts';
import { nextCheckAt, reopenIfNoLiveAttempt, setAttempt, setOrderStatus } from './usecases/payment-state.ts';
import { setRefundState } from './usecases/refunds.ts';
import { ProviderRejectedError } from './providers/provider.ts';
import { REFUND_NOT_RECEIVED } from './domain/states.ts';

const TICK_MS = 1000;
/**
 * A wake (an event came due, a delivery ended, an operator asked) runs a pass at once, but passes
 * start at least this far apart: each pass runs every task's claim, and a steady stream of
 * deliveries used to wake ~40 passes a second under load (docs/performance.md, ninth session).
 */
const WAKE_MIN_GAP_MS = 100;
const BATCH = 20;

export interface WorkerTask {
  name: string;
  /** Returns how many items it handled (0 = idle). */
  run(): Promise<number>;
}

export class Workers {
  readonly #svc: Services;
  readonly #tasks: WorkerTask[];
  #timer: NodeJS.Timeout | null = null;
  #running: Promise<void> | null = null;
  #stopped = true;
  #wake = false;
  #halt = false;
  #lastPassAt = 0;

  constructor(svc: Services, extra: WorkerTask[] = []) {
    this.#svc = svc;
    this.#tasks = [
      { name: 'expiry', run: () => expireDueOrders(svc) },
      { name: 'reconcile attempts', run: () => reconcileAttempts(svc) },
      { name: 'reconcile refunds', run: () => reconcileRefunds(svc) },
      { name: 'reconcile closes', run: () => reconcileCloses(svc) },
      { name: 'reconcile duplicates', run: () => reconcileDuplicates(svc) },
      ...extra,
      { name: 'purge', run: () => this.#purge() },
    ];
    svc.wakeWorkers = () => this.wake();
  }

  #lastPurge = 0;
  /** Expired nonces and replays, at most once a minute. */
  async #purge(): Promise<number> {
    if (Date.now() - this.#lastPurge < 60_000) return 0;
    this.#lastPurge = Date.now();
    return (await this.#svc.nonces.purge()) + (await this.#svc.replays.purge());
  }

  add(task: WorkerTask): void {
    this.#tasks.splice(this.#tasks.length - 1, 0, task);
  }

  start(): void {
    if (!this.#stopped) return;
    this.#stopped = false;
    this.#schedule(50);
  }

  wake(): void {
    if (this.#stopped) return;
    if (this.#running) {
      this.#wake = true;
      return;
    }
    this.#schedule(this.#untilWakeAllowed());
  }

  #untilWakeAllowed(): number {
    return Math.max(0, this.#lastPassAt + WAKE_MIN_GAP_MS - Date.now());
  }

  #schedule(ms: number): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = setTimeout(() => {
      this.#timer = null;
      this.#lastPassAt = Date.now();
      this.#running = this.tick().finally(() => {
        this.#running = null;
        if (!this.#stopped) this.#schedule(this.#wake ? this.#untilWakeAllowed() : TICK_MS);
        this.#wake = false;
      });
    }, ms);
    this.#timer.unref();
  }

  /** One pass over every task (exported for tests that drive time themselves). */
  async tick(): Promise<void> {
    for (const t of this.#tasks) {
      if (this.#halt) break;
      try {
        await t.run();
      } catch (err) {
        this.#svc.log.warn({ err, task: t.name }, 'background task failed; will retry');
      }
    }
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#halt = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    await this.#running;
  }
}

/**
 * Claims due orders by setting a lease; two instances never work on the same order at once. Each
 * claim walks the small partial index of its candidates whatever the statistics say
 * (migrations/0011).
 */
async function claimOrders(svc: Services, fn: 'mps_claim_expired_orders' | 'mps_claim_pending_closes'): Promise<string[]> {
  const r = await svc.db.query<{ id: string }>({ name: fn, text: `SELECT id FROM ${fn}($1) AS id`, values: [BATCH] });
  return r.rows.map((x) => x.id);
}

export async function expireDueOrders(svc: Services): Promise<number> {
  const ids = await claimOrders(svc, 'mps_claim_expired_orders');
  for (const id of ids) {
    try {
      await closeOrderById(svc, id, 'EXPIRED', { background: true });
    } catch (err) {
      svc.log.warn({ err, orderId: id }, 'expiry could not close the order yet');
    }
  }
  return ids.length;
}

export async function reconcileCloses(svc: Services): Promise<number> {
  const ids = await claimOrders(svc, 'mps_claim_pending_closes');
  for (const id of ids) {
    const o = await getOrder(svc.db, id);
    if (!o?.closePending) continue;
    try {
      await closeOrderById(svc, id, o.closePending, { background: true });
    } catch (err) {
      svc.log.warn({ err, orderId: id }, 'pending close not converged yet');
    }
  }
  return ids.length;
}

/** UNKNOWN attempts, and PENDING ones whose creating request died, are settled by asking the provider. */
export async function reconcileAttempts(svc: Services): Promise<number> {
  const r = await svc.db.query<{ id: string; check_count: number }>(
    `UPDATE attempts SET next_check_at = now() + interval '30 seconds', check_count = check_count + 1
      WHERE id IN (SELECT id FROM attempts WHERE state IN ('UNKNOWN', 'PENDING') AND next_check_at <= now()
                    ORDER BY next_check_at LIMIT ${BATCH} FOR UPDATE SKIP LOCKED)
      RETURNING id, check_count`,
  );
  for (const { id, check_count } of r.rows) {
    let q;
    try {
      q = await svc.provider.queryPayment(id);
    } catch (err) {
      svc.log.warn({ err, attemptId: id }, 'provider query failed; will retry');
      await svc.db.query('UPDATE attempts SET next_check_at = $2 WHERE id = $1', [id, nextCheckAt(new Date(svc.clock.now()), check_count)]);
      continue;
    }
    if (q.state === 'PAID') {
      await applyNotification(svc, { kind: 'PAYMENT', attemptId: id, state: 'PAID', reason: null });
      continue;
    }
    /** Attempts open at the provider that the order can no longer use: closed there afterwards. */
    const strays = await withTx(svc.db, async (tx): Promise<string[]> => {
      const a0 = await getAttempt(tx, id);
      if (!a0) return [];
      const o = (await getOrder(tx, a0.orderId, true))!;
      const a = (await getAttempt(tx, id))!;
      if (a.state !== 'UNKNOWN' && a.state !== 'PENDING') return [];
      const flow = 'reconcile attempt';
      const now = new Date(svc.clock.now());
      const latest = await latestAttempt(tx, o.id);
      const isLatest = latest?.id === a.id;
      if (q.state === 'OPEN') {
        await setAttempt(tx, flow, a, 'ACCEPTED', { providerRef: q.providerRef, material: q.material });
        if (isLatest && (o.status === 'UNKNOWN' || o.status === 'CREATED')) {
          await setOrderStatus(tx, flow, o, 'PAYING', {}, now);
          return [];
        }
        return !isLatest || o.status !== 'PAYING' ? [a.id] : [];
      }
      if (q.state === 'FAILED') {
        await setAttempt(tx, flow, a, 'FAILED');
        if (isLatest && o.status === 'UNKNOWN') await setOrderStatus(tx, flow, o, 'FAILED', { failureReason: 'PAYMENT_FAILED' }, now);
        return [];
      }
      // NOT_FOUND (never created) or CLOSED: the attempt is over; the order becomes payable again.
      await setAttempt(tx, flow, a, q.state === 'CLOSED' ? 'CLOSED' : 'FAILED');
      if (isLatest && o.status === 'UNKNOWN') await setOrderStatus(tx, flow, o, 'CREATED', {}, now);
      else if (isLatest && o.status === 'PAYING') {
        // A re-create cut off (a crash) during the new attempt's provider call. If it had closed
        // the old attempts, none is live: the order is payable again (CREATED) now. If it was cut
        // off before closing them, they are closed now, finishing what the merchant asked for (the
        // order would otherwise read PAYING with no payable attempt while an old link still paid);
        // the stray close then reopens the order the same way (src/usecases/background.ts).
        await reopenIfNoLiveAttempt(tx, flow, o, now);
        return (await attemptsOf(tx, o.id)).filter((x) => x.state === 'ACCEPTED').map((x) => x.id);
      }
      return [];
    });
    for (const stray of strays) svc.tasks.closeStrayAttempt(stray);
  }
  return r.rows.length;
}

export async function reconcileRefunds(svc: Services): Promise<number> {
  const r = await svc.db.query<{ id: string; check_count: number; paid_attempt_id: string }>(
    `UPDATE refunds SET next_check_at = now() + interval '30 seconds', check_count = check_count + 1
      WHERE id IN (SELECT id FROM refunds WHERE state IN ('REQUESTED', 'PENDING', 'UNKNOWN') AND next_check_at <= now()
                    ORDER BY next_check_at LIMIT ${BATCH} FOR UPDATE SKIP LOCKED)
      RETURNING id, check_count, (SELECT paid_attempt_id FROM orders WHERE orders.id = refunds.order_id) AS paid_attempt_id`,
  );
  for (const { id, check_count, paid_attempt_id } of r.rows) {
    let state;
    try {
      state = (await svc.provider.queryRefund({ refundId: id, paidAttemptId: paid_attempt_id })).state;
    } catch (err) {
      svc.log.warn({ err, refundId: id }, 'provider refund query failed; will retry');
      continue;
    }
    await withTx(svc.db, async (tx) => {
      const r0 = await getRefund(tx, id);
      if (!r0) return;
      await tx.query('SELECT 1 FROM orders WHERE id = $1 FOR UPDATE', [r0.orderId]);
      const rf = (await getRefund(tx, id))!;
      const now = new Date(svc.clock.now());
      const flow = 'reconcile refund';
      if (rf.state === 'SUCCEEDED' || rf.state === 'FAILED') return;
      if (state === 'SUCCEEDED' || state === 'FAILED') {
        await setRefundState(tx, flow, rf, state, { failureReason: state === 'FAILED' ? 'PROVIDER_FAILED' : null }, now);
      } else if (state === 'PENDING') {
        if (rf.state !== 'PENDING') await setRefundState(tx, flow, rf, 'PENDING', { nextCheckAt: nextCheckAt(now, check_count) }, now);
        else await tx.query('UPDATE refunds SET next_check_at = $2 WHERE id = $1', [id, nextCheckAt(now, check_count)]);
      } else if (now.getTime() - rf.createdAt.getTime() > 300_000) {
        // NOT_FOUND for 5 minutes (longer than any provider call may take): the provider never
        // received it; nothing was refunded, and the amount is released.
        await setRefundState(tx, flow, rf, 'FAILED', { failureReason: REFUND_NOT_RECEIVED }, now);
      }
    });
  }
  return r.rows.length;
}

export async function reconcileDuplicates(svc: Services): Promise<number> {
  const r = await svc.db.query<{ id: string; refund_state: string; attempt_id: string }>(
    `UPDATE duplicate_payments SET updated_at = now()
      WHERE id IN (SELECT id FROM duplicate_payments WHERE refund_state IN ('PENDING', 'UNKNOWN') AND updated_at < now() - interval '3 seconds'
                    LIMIT ${BATCH} FOR UPDATE SKIP LOCKED) RETURNING id, refund_state, attempt_id`,
  );
  for (const d of r.rows) {
    try {
      const state = (await svc.provider.queryRefund({ refundId: d.id, paidAttemptId: d.attempt_id })).state;
      if (state === 'SUCCEEDED') await svc.db.query(`UPDATE duplicate_payments SET refund_state = 'REFUNDED' WHERE id = $1`, [d.id]);
      else if (state === 'NOT_FOUND' || state === 'FAILED') svc.tasks.refundDuplicate(d.id);
    } catch (err) {
      if (!(err instanceof ProviderRejectedError)) svc.log.warn({ err, duplicateId: d.id }, 'duplicate refund check failed');
    }
  }
  return r.rows.length;
}
