/**
 * The merchant's notification receiver of the benchmark: the apps' notifyUrl points at it. It runs
 * in a worker thread of its own (receiver-worker.ts); this side starts it and reads its records.
 */
import { Worker } from 'node:worker_threads';
import type { Arrival } from './notifications.ts';

export interface ReceiverOptions {
  /** the platform's public keys by key id (PEM), as GET /api/admin/v1/platform-keys lists them */
  platformKeys: Record<string, string>;
  /** how long it takes to answer a verified notification, ms (a merchant's own work) */
  delayMs: number;
}

export interface ReceiverDump {
  type: 'dump';
  arrivals: Arrival[];
  /** notifications refused (answered 401), by the SDK's verification error code */
  rejected: Record<string, number>;
  /** every request received */
  requests: number;
}

export class Receiver {
  readonly #worker: Worker;
  readonly url: string;
  #waiter: ((d: ReceiverDump) => void) | null = null;

  private constructor(worker: Worker, port: number) {
    this.#worker = worker;
    this.url = `http://127.0.0.1:${port}/notify`;
    worker.on('message', (m: ReceiverDump) => {
      if (m.type === 'dump') this.#waiter?.(m);
    });
  }

  static start(opts: ReceiverOptions): Promise<Receiver> {
    const w = new Worker(new URL('./receiver-worker.ts', import.meta.url), { workerData: opts });
    return new Promise((resolve, reject) => {
      w.once('error', reject);
      w.once('message', (m: { type: string; port: number }) => resolve(new Receiver(w, m.port)));
    });
  }

  /** Everything received so far. */
  dump(): Promise<ReceiverDump> {
    return new Promise((resolve) => {
      this.#waiter = (d) => {
        this.#waiter = null;
        resolve(d);
      };
      this.#worker.postMessage({ type: 'dump' });
    });
  }

  async stop(): Promise<void> {
    await this.#worker.terminate();
  }
}
