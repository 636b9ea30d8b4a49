/** Outbox delivery of event notifications (decisions.md section 7). Stub: filled in by the events issue. */
import type { Services } from '../services.ts';
import type { WorkerTask } from '../workers.ts';

export function createDispatcher(_svc: Services): WorkerTask {
  return { name: 'deliver events', run: async () => 0 };
}
