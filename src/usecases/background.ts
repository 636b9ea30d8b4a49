/**
 * Follow-up work started by a request or notification that must not delay its answer (closing
 * stray attempts, refunding duplicate payments). Tracked so shutdown can wait for it; anything
 * lost in a crash is picked up again by the reconciler.
 */
import type { Services } from '../services.ts';
import { withTx } from '../store/db.ts';
import { attemptsOf, getAttempt, getOrder } from '../store/orders.ts';
import { reopenIfNoLiveAttempt, setAttempt } from './payment-state.ts';
import { ProviderRejectedError } from '../providers/provider.ts';

const STRAY_CLOSE_RETRIES = 5;

export class BackgroundTasks {
  #svc: Services | null = null;
  /** Drains in progress (a count: two at once must not end each other's). */
  #draining = 0;
  readonly #waking = new Set<() => void>();
  readonly #inFlight = new Set<Promise<unknown>>();

  bind(svc: Services): void {
    this.#svc = svc;
  }

  #run(name: string, fn: (svc: Services) => Promise<void>): void {
    const svc = this.#svc!;
    const p = fn(svc)
      .catch((err) => svc.log.warn({ err, task: name }, 'background task failed; the reconciler will retry'))
      .finally(() => this.#inFlight.delete(p));
    this.#inFlight.add(p);
  }

  /** A wait between retries that ends at once when the tasks are drained (shutdown, tests). */
  #pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.#waking.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.#waking.add(done);
    });
  }

  get #stopping(): boolean {
    return this.#draining > 0;
  }

  async drainBackground(): Promise<void> {
    this.#draining++;
    for (const wake of [...this.#waking]) wake();
    try {
      while (this.#inFlight.size > 0) await Promise.allSettled([...this.#inFlight]);
    } finally {
      this.#draining--;
    }
  }

  /**
   * An attempt accepted by the provider for an order that can no longer use it: close it there.
   * A close that fails (uncertain, refused) is tried again after 2, 4, 8, 16 and 32 s.
   */
  closeStrayAttempt(attemptId: string): void {
    this.#run('close stray attempt', async (svc) => {
      let out;
      for (let i = 0; ; i++) {
        try {
          out = await svc.provider.closePayment(attemptId, { background: true });
          break;
        } catch (err) {
          if (i >= STRAY_CLOSE_RETRIES || this.#stopping) return this.#handOver(svc, attemptId, err);
          await this.#pause(2000 * 2 ** i);
          if (this.#stopping) return this.#handOver(svc, attemptId, err);
        }
      }
      if (out.outcome === 'PAID') {
        const { applyNotification } = await import('./notifications.ts');
        await applyNotification(svc, { kind: 'PAYMENT', attemptId, state: 'PAID', reason: null });
        return;
      }
      await withTx(svc.db, async (tx) => {
        const a = await getAttempt(tx, attemptId);
        if (!a) return;
        const order = (await getOrder(tx, a.orderId, true))!;
        const fresh = (await getAttempt(tx, attemptId))!;
        if (fresh.state !== 'ACCEPTED' && fresh.state !== 'UNKNOWN') return;
        await setAttempt(tx, 'close stray attempt', fresh, 'CLOSED');
        // An order left PAYING without any live attempt (a re-create cut off before closing the
        // old ones) is payable again.
        await reopenIfNoLiveAttempt(tx, 'close stray attempt', order, new Date(svc.clock.now()));
      });
    });
  }

  /**
   * A stray close given up (retries spent, or shutting down): an attempt still ACCEPTED is marked
   * UNKNOWN, due in 30 s, so the reconciler asks the provider and, finding it open, closes it again.
   */
  async #handOver(svc: Services, attemptId: string, err: unknown): Promise<void> {
    const r = await svc.db.query(
      `UPDATE attempts SET state = 'UNKNOWN', next_check_at = now() + interval '30 seconds', updated_at = now()
        WHERE id = $1 AND state = 'ACCEPTED'`,
      [attemptId],
    );
    svc.log.warn({ err, attemptId, handedToReconciler: r.rowCount === 1 }, 'stray attempt not closed yet');
  }

  /** After a payment, the order's other live attempts are closed at the provider. */
  closeSiblingAttempts(orderId: string, paidAttemptId: string): void {
    this.#run('close sibling attempts', async (svc) => {
      for (const a of await attemptsOf(svc.db, orderId)) {
        if (a.id !== paidAttemptId && a.state === 'ACCEPTED') this.closeStrayAttempt(a.id);
      }
    });
  }

  /** A second payment of an order is refunded automatically and stays visible in the back office. */
  refundDuplicate(duplicateId: string): void {
    this.#run('refund duplicate payment', async (svc) => {
      const r = await svc.db.query<{ attempt_id: string; amount_fen: number; refund_state: string }>(
        'SELECT attempt_id, amount_fen, refund_state FROM duplicate_payments WHERE id = $1',
        [duplicateId],
      );
      const d = r.rows[0];
      if (!d || d.refund_state === 'REFUNDED') return;
      let state: 'REFUNDED' | 'FAILED' | 'UNKNOWN' | 'PENDING';
      let ref: string | null = null;
      try {
        const out = await svc.provider.refund(
          {
            refundId: duplicateId,
            paidAttemptId: d.attempt_id,
            amountFen: d.amount_fen,
            paymentAmountFen: d.amount_fen,
            reason: 'DUPLICATE_PAYMENT',
          },
          { background: true },
        );
        ref = out.providerRef;
        state = out.outcome === 'SUCCEEDED' ? 'REFUNDED' : 'PENDING';
      } catch (err) {
        state = err instanceof ProviderRejectedError ? 'FAILED' : 'UNKNOWN';
      }
      await svc.db.query(
        'UPDATE duplicate_payments SET refund_state = $2, provider_ref = COALESCE($3, provider_ref), updated_at = now() WHERE id = $1',
        [duplicateId, state, ref],
      );
      svc.log.warn({ duplicateId, state }, 'duplicate payment recorded and refunded automatically');
    });
  }
}
