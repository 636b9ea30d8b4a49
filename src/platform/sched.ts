/**
 * Linux's SCHED_BATCH policy for threads and processes the service starts (libuv's pool, the
 * embedded PostgreSQL): the same share of the CPU as under the default policy, but a thread that
 * wakes does not preempt the one running in the middle of its time slice. On two cores the
 * service's main thread is the one serial stage of every request, and such preemptions are
 * otherwise most of its wait (docs/performance.md, "SCHED_BATCH for libuv's thread pool" and
 * "SCHED_BATCH for the embedded PostgreSQL").
 *
 * Node has no call for it: `chrt -b -p 0 ID` (util-linux) sets it from outside. Lowering one's own
 * threads' (or, as root, any process's) policy to SCHED_BATCH needs no privilege.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** Sets each thread or process id to SCHED_BATCH; rejects with chrt's first line of error. */
export async function setSchedBatch(ids: readonly (number | string)[]): Promise<void> {
  for (const id of ids) {
    try {
      await run('chrt', ['-b', '-p', '0', String(id)], { timeout: 5000 });
    } catch (err) {
      const e = err as Error & { code?: string; stderr?: string };
      throw new Error(e.code === 'ENOENT' ? 'chrt (util-linux) not found' : (e.stderr || e.message).trim().split('\n')[0], { cause: err });
    }
  }
}

/** The ids of the processes whose parent is `pid` (from /proc). */
export async function childPids(pid: number): Promise<number[]> {
  const out: number[] = [];
  for (const name of await fs.readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const stat = await fs.readFile(`/proc/${name}/stat`, 'utf8').catch(() => '');
    // Fields after the command (which may hold spaces and parentheses): state, ppid, ...
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (Number(rest[1]) === pid) out.push(Number(name));
  }
  return out;
}
