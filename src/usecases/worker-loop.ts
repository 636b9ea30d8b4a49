/**
 * The background worker loop, safe with several instances (its work is claimed from the database):
 * a pass runs every task in turn (the job runner, the event dispatcher, any extra task), every
 * second, and at once (at most every WAKE_MIN_GAP_MS) when something asks for it.
 */
import type { Log } from '../lib/log.ts';

const TICK_MS = 1000;
/**
 * A wake (an event came due, a delivery ended, a job was written) runs a pass at once, but passes
 * start at least this far apart: each pass runs every task's claim, and a steady stream of
 * deliveries would otherwise wake ~40 passes a second under load.
 */
const WAKE_MIN_GAP_MS = 100;

export interface WorkerTask {
  name: string;
  /** Returns how many items it handled (0 = idle). */
  run(): Promise<number>;
}

export class WorkerLoop {
  readonly #log: Log;
  readonly #tasks: WorkerTask[];
  #timer: NodeJS.Timeout | null = null;
  #running: Promise<void> | null = null;
  #stopped = true;
  #wake = false;
  #halt = false;
  #lastPassAt = 0;

  constructor(log: Log, tasks: WorkerTask[]) {
    this.#log = log;
    this.#tasks = tasks;
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
        this.#log.warn({ err, task: t.name }, 'background task failed; will retry');
      }
    }
  }

  /** No more passes; resolves when the pass running has ended. */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#halt = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    await this.#running;
  }
}
