/**
 * libuv's worker threads (response and notification signing, file and DNS work) run under Linux's
 * SCHED_BATCH policy (src/platform/sched.ts): a worker that wakes (a signature handed to the pool)
 * does not preempt the main thread in the middle of its turn: create +4-32% at peak and the
 * half-load create p99 37-42 ms against 40-54 ms in alternating A/B pairs (docs/performance.md,
 * "SCHED_BATCH for libuv's thread pool"). Where that is not possible (another OS, no chrt) the
 * threads are left as they are and the reason is answered.
 */
import { pbkdf2 } from 'node:crypto';
import fs from 'node:fs/promises';
import { setSchedBatch } from './sched.ts';

/** The thread ids of libuv's pool in this process (it starts all its threads at its first job). */
export async function threadPoolTids(): Promise<string[]> {
  await new Promise((res) => pbkdf2('', '', 1, 1, 'sha256', res));
  const out: string[] = [];
  for (const tid of await fs.readdir('/proc/self/task')) {
    const comm = await fs.readFile(`/proc/self/task/${tid}/comm`, 'utf8').catch(() => '');
    if (comm.trim() === 'libuv-worker') out.push(tid);
  }
  return out;
}

/** Sets the pool's threads to SCHED_BATCH. Answers what was done, for the start-up log. */
export async function batchThreadPool(): Promise<string> {
  if (process.platform !== 'linux') return 'thread pool left as is: SCHED_BATCH is Linux only';
  let tids: string[];
  try {
    tids = await threadPoolTids();
  } catch (err) {
    return `thread pool left as is: ${(err as Error).message}`;
  }
  if (tids.length === 0) return 'thread pool left as is: no libuv-worker thread found';
  try {
    await setSchedBatch(tids);
  } catch (err) {
    return `thread pool left as is: chrt failed (${(err as Error).message})`;
  }
  return `thread pool: ${tids.length} libuv threads set to SCHED_BATCH`;
}
