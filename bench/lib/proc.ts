/**
 * Linux /proc readers: CPU time (utime + stime, and what reaped children used) and memory
 * (VmRSS / VmHWM) of a process, and the processes of a PostgreSQL cluster (postmaster + children).
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';

let ticks = 100;
try {
  ticks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
} catch {
  // 100 on every common Linux build
}
export const CLK_TCK = ticks;

export interface CpuTimes {
  /** seconds in user mode */
  user: number;
  /** seconds in kernel mode */
  sys: number;
  /** seconds used by children this process has waited for (user + sys) */
  children: number;
}

interface Stat {
  ppid: number;
  cpu: CpuTimes;
}

function readStat(pid: number): Stat | null {
  let s: string;
  try {
    s = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null;
  }
  // comm (field 2) may hold blanks and parentheses: split after the last ')'.
  const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
  // f[0] = state (field 3), so field n is f[n - 3].
  const n = (field: number) => Number(f[field - 3]);
  return {
    ppid: n(4),
    cpu: { user: n(14) / CLK_TCK, sys: n(15) / CLK_TCK, children: (n(16) + n(17)) / CLK_TCK },
  };
}

export function cpuOf(pid: number): CpuTimes | null {
  return readStat(pid)?.cpu ?? null;
}

/** CPU time of this process (process.cpuUsage(), µs resolution) and of its waited-for children (/proc). */
export function selfCpu(): CpuTimes {
  const u = process.cpuUsage();
  // children: the load tool when it is a process of its own (wrk), counted once it has exited.
  return { user: u.user / 1e6, sys: u.system / 1e6, children: readStat(process.pid)?.cpu.children ?? 0 };
}

export interface Memory {
  rssMB: number;
  hwmMB: number;
}

export function memoryOf(pid: number): Memory | null {
  let s: string;
  try {
    s = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  } catch {
    return null;
  }
  const kb = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(s)?.[1] ?? NaN);
  return { rssMB: kb('VmRSS') / 1024, hwmMB: kb('VmHWM') / 1024 };
}

export function cmdlineOf(pid: number): string {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ').trim();
  } catch {
    return '';
  }
}

export function ppidOf(pid: number): number | null {
  return readStat(pid)?.ppid ?? null;
}

function allPids(): number[] {
  return fs
    .readdirSync('/proc')
    .filter((n) => /^\d+$/.test(n))
    .map(Number);
}

/** The postmaster whose command line names `-D <pgDir>` (embedded cluster), or null. */
export function findPostmasterByDataDir(pgDir: string): number | null {
  for (const pid of allPids()) {
    const c = cmdlineOf(pid);
    if (/(^|\/)postgres\s/.test(c) && c.includes(` -D ${pgDir}`)) return pid;
  }
  return null;
}

/** The postmaster and its children (backends and auxiliary processes). */
export function clusterPids(postmaster: number): number[] {
  const out = [postmaster];
  for (const pid of allPids()) if (pid !== postmaster && readStat(pid)?.ppid === postmaster) out.push(pid);
  return out;
}

/** CPU seconds of a set of processes, as a snapshot comparable with a later one. */
export interface GroupSnapshot {
  perPid: Map<number, number>;
  /** what each process is: 'backend', 'walwriter', 'checkpointer', 'autovacuum', ... */
  kind: Map<number, string>;
  /** the root's reaped children (backends that exited) */
  rootChildren: number;
  /** false: the CPU of processes that exit in between is not known (left out) */
  tracksExited: boolean;
}

export function snapshotGroup(root: number, filter: (pid: number) => boolean = () => true): GroupSnapshot {
  const perPid = new Map<number, number>();
  const kind = new Map<number, string>();
  let rootChildren = 0;
  for (const pid of clusterPids(root)) {
    if (pid !== root && !filter(pid)) continue;
    const c = cpuOf(pid);
    if (!c) continue;
    perPid.set(pid, c.user + c.sys);
    kind.set(pid, pid === root ? 'postmaster' : pgProcessKind(cmdlineOf(pid)));
    if (pid === root) rootChildren = c.children;
  }
  return { perPid, kind, rootChildren, tracksExited: true };
}

/** "postgres: [cluster: ]walwriter" -> 'walwriter'; a client connection -> 'backend'. */
export function pgProcessKind(cmdline: string): string {
  const c = cmdline.replace(/^postgres:\s+(\S+:\s+)?/, '');
  const t = c.split(/\s+/);
  if (t.length >= 3 && /^(\[local\]|.*\(\d+\))$/.test(t[2] ?? '')) return 'backend';
  if (c.startsWith('autovacuum')) return 'autovacuum';
  if (c.startsWith('io worker')) return 'io workers';
  return t.slice(0, 2).join(' ').replace(/ \d+$/, '') || 'other';
}

/** CPU seconds by process kind between two snapshots. */
export function groupDeltaByKind(a: GroupSnapshot, b: GroupSnapshot): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [pid, t] of b.perPid) {
    const k = b.kind.get(pid) ?? 'other';
    out[k] = (out[k] ?? 0) + t - (a.perPid.get(pid) ?? 0);
  }
  // A process that exited in between is in the root's reaped-children time with its whole life;
  // what it had used by the first snapshot was counted there already.
  if (a.tracksExited && b.tracksExited) {
    let exited = b.rootChildren - a.rootChildren;
    for (const [pid, t] of a.perPid) if (!b.perPid.has(pid)) exited -= t;
    if (Math.abs(exited) > 1e-9) out['exited processes'] = exited;
  }
  return out;
}

/** CPU seconds the group used between two snapshots (a process new in `b` counts from zero). */
export function groupDelta(a: GroupSnapshot, b: GroupSnapshot): number {
  return Object.values(groupDeltaByKind(a, b)).reduce((s, v) => s + v, 0);
}

/** Polls a process's memory while a phase runs; reports the largest VmRSS seen and the final VmHWM. */
export class MemoryPoller {
  #timer: NodeJS.Timeout | null = null;
  peakRssMB = 0;
  hwmMB = 0;
  readonly #pid: number;
  constructor(pid: number, intervalMs = 100) {
    this.#pid = pid;
    this.#sample();
    this.#timer = setInterval(() => this.#sample(), intervalMs);
    this.#timer.unref();
  }
  #sample(): void {
    const m = memoryOf(this.#pid);
    if (!m) return;
    if (m.rssMB > this.peakRssMB) this.peakRssMB = m.rssMB;
    this.hwmMB = m.hwmMB;
  }
  stop(): { peakRssMB: number; hwmMB: number } {
    this.#sample();
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    return { peakRssMB: this.peakRssMB, hwmMB: this.hwmMB };
  }
}

/**
 * CPU seconds of all cores of the machine since boot, from one read of /proc/stat: busy (user,
 * nice, system, irq, softirq, steal) and idle (idle, iowait).
 */
export function systemCpuSeconds(): { busy: number; idle: number } {
  const line = fs.readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!;
  const v = line.trim().split(/\s+/).slice(1).map(Number);
  const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = v;
  return { busy: (user + nice + system + irq + softirq + steal) / CLK_TCK, idle: (idle + iowait) / CLK_TCK };
}

/** CPU seconds all processes of the machine spent busy since boot. */
export function systemBusySeconds(): number {
  return systemCpuSeconds().busy;
}

/**
 * A process's main thread's scheduler times since it started (/proc/PID/schedstat, in ns): on a
 * CPU, and runnable but waiting in a run queue for one. Null where the kernel does not keep them.
 */
export interface SchedTimes {
  onCpuSec: number;
  runQueueSec: number;
}

export function schedOf(pid: number): SchedTimes | null {
  try {
    const [run, wait] = fs.readFileSync(`/proc/${pid}/schedstat`, 'utf8').trim().split(/\s+/).map(Number);
    if (!Number.isFinite(run) || !Number.isFinite(wait)) return null;
    return { onCpuSec: run! / 1e9, runQueueSec: wait! / 1e9 };
  } catch {
    return null;
  }
}

/** Between two readings over `seconds`: the shares of that time on a core, waiting for one, and asleep (the rest). */
export function schedShares(a: SchedTimes, b: SchedTimes, seconds: number): { onCpu: number; runQueue: number; asleep: number } {
  const onCpu = (b.onCpuSec - a.onCpuSec) / seconds;
  const runQueue = (b.runQueueSec - a.runQueueSec) / seconds;
  return { onCpu, runQueue, asleep: Math.max(0, 1 - onCpu - runQueue) };
}

/**
 * Proportional set size of a process in MB (/proc/PID/smaps_rollup): its private memory plus its
 * share of memory it shares (PostgreSQL's shared buffers are counted once across its processes).
 */
export function pssMB(pid: number): number | null {
  try {
    const s = fs.readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
    const kb = Number(/^Pss:\s+(\d+) kB/m.exec(s)?.[1] ?? NaN);
    return Number.isFinite(kb) ? kb / 1024 : null;
  } catch {
    return null;
  }
}

/** The PSS of a PostgreSQL cluster (the postmaster and its children), in MB. */
export function clusterPssMB(postmaster: number): number | null {
  let sum = 0;
  let any = false;
  for (const pid of clusterPids(postmaster)) {
    const p = pssMB(pid);
    if (p !== null) {
      sum += p;
      any = true;
    }
  }
  return any ? sum : null;
}
