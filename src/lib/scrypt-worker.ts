/**
 * A password-hashing thread of src/lib/password-hash.ts: derives one scrypt key at a time, on this
 * thread (scryptSync), never on libuv's pool that the open API's signatures use. It lowers its own
 * priority at start (Linux: a thread's nice value is its own; lowering needs no privilege), so a
 * hash uses the CPU the requests leave idle rather than competing with them.
 */
import { scryptSync } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import { parentPort } from 'node:worker_threads';

export interface ScryptJob {
  id: number;
  password: string;
  salt: Uint8Array;
  keyBytes: number;
  n: number;
  r: number;
  p: number;
}

/** The lowest priority (19): the hashing thread yields the CPU to every other thread of the machine that wants it. */
const NICE = 19;

try {
  // /proc/thread-self -> PID/task/TID; setpriority(PRIO_PROCESS, TID) sets this thread alone.
  const tid = Number(fs.readlinkSync('/proc/thread-self').split('/').pop());
  if (Number.isInteger(tid) && tid > 0) os.setPriority(tid, NICE);
} catch {
  // Not Linux, or refused: the thread keeps the process's priority.
}

parentPort!.on('message', (job: ScryptJob) => {
  try {
    const key = scryptSync(job.password, job.salt, job.keyBytes, {
      N: job.n,
      r: job.r,
      p: job.p,
      maxmem: 256 * job.n * job.r + 1024 * 1024,
    });
    parentPort!.postMessage({ id: job.id, key });
  } catch (err) {
    parentPort!.postMessage({ id: job.id, error: (err as Error).message });
  }
});
