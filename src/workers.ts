/**
 * The background work: each job kind (src/domain/jobs.ts, where they are listed) and its handler.
 * The job runner (src/usecases/jobs.ts) claims due jobs from the one queue and runs them here; the
 * worker loop (src/usecases/worker-loop.ts) runs the job runner, the event dispatcher and any
 * extra task every second and when woken.
 */
import { closeStrayAttempt, closeTrade, checkDuplicateRefund, refundDuplicate } from './usecases/follow-ups.ts';
import type { UseCaseDeps } from './usecases/deps.ts';
import { JobRunner, type JobHandlers } from './usecases/jobs.ts';
import { checkAttempt, checkRefund, expireOrder, findDueWork, finishClose } from './usecases/provider-checks.ts';
import { reconcileStatement, scheduleReconciliation } from './usecases/reconciliation.ts';
import { WorkerLoop, type WorkerTask } from './usecases/worker-loop.ts';

export type { WorkerTask } from './usecases/worker-loop.ts';

/** What the workers run with: the use cases' dependencies, and what is purged. */
export interface WorkerDeps extends UseCaseDeps {
  /** Drops expired nonces, request-id answers, console sessions and the like; answers how many. */
  purge(): Promise<number>;
}

/** Each kind's handler. */
export const HANDLERS: JobHandlers<WorkerDeps> = {
  CHECK_ATTEMPT: checkAttempt,
  CHECK_REFUND: checkRefund,
  EXPIRE_ORDER: expireOrder,
  FINISH_CLOSE: finishClose,
  CLOSE_STRAY_ATTEMPT: closeStrayAttempt,
  CLOSE_TRADE: closeTrade,
  REFUND_DUPLICATE: refundDuplicate,
  CHECK_DUPLICATE_REFUND: checkDuplicateRefund,
  RECONCILE_STATEMENT: reconcileStatement,
  SCHEDULE_RECONCILIATION: scheduleReconciliation,
  FIND_DUE_WORK: findDueWork,
  PURGE: async (d) => {
    await d.purge();
  },
};

/** The worker loop of an instance: the job runner first, then `extra` (the event dispatcher, the sandbox's notices). */
export class Workers extends WorkerLoop {
  readonly jobs: JobRunner<WorkerDeps>;

  constructor(svc: WorkerDeps, extra: WorkerTask[] = []) {
    const jobs = new JobRunner(svc, HANDLERS);
    super(svc.log, [jobs, ...extra]);
    this.jobs = jobs;
  }

  /** No more passes, and the jobs still running (a long reconciliation) have ended. */
  override async stop(): Promise<void> {
    await super.stop();
    await this.jobs.idle();
  }
}
