/**
 * Exclusive lock on a service DATA_DIR, so two service instances never share one embedded PostgreSQL
 * cluster. The lock is the file DATA_DIR/service.lock holding {pid, startedAt, hostname} (plus the
 * kernel boot id and the holder's process start time on Linux, which tell a live holder from a recycled
 * pid). A lock whose holder is gone (kill -9, OOM, reboot) is taken over.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

export class InstanceLockedError extends Error {
  override name = 'InstanceLockedError';
  /** pid of the instance holding the lock */
  pid: number | undefined;
  /** absolute DATA_DIR */
  dataDir: string | undefined;
  constructor(message: string, details?: { pid: number; dataDir: string }) {
    super(message);
    this.pid = details?.pid;
    this.dataDir = details?.dataDir;
  }
}

interface LockInfo {
  pid: number;
  startedAt: string;
  hostname: string;
  /** /proc/sys/kernel/random/boot_id of the holder (Linux) */
  bootId?: string;
  /** field 22 of /proc/<pid>/stat of the holder: start time in clock ticks since boot (Linux) */
  procStart?: string;
}

const LOCK_FILE = 'service.lock';
/** A takeover mutex older than this belongs to a process that died mid-takeover. */
const TAKEOVER_STALE_MS = 10_000;
/** An unparseable lock younger than this may be in the middle of being written (O_EXCL fallback). */
const YOUNG_GARBAGE_MS = 2_000;
/** Give up if the lock keeps changing under us for this long (longer than a stale takeover mutex lives). */
const ACQUIRE_DEADLINE_MS = 15_000;

/** Lock files held by this process (absolute paths): a lock naming our own pid is only live if listed here. */
const held = new Set<string>();

/**
 * Exclusive lock on a service DATA_DIR: creates DATA_DIR (recursive) and DATA_DIR/service.lock
 * atomically (exclusive create) holding {pid, startedAt, hostname}. If the file exists and its holder is
 * alive -> throws InstanceLockedError ("another instance (pid N) is already using DATA_DIR <abs path>;
 * ..."). If the holder is dead (e.g. after kill -9) -> takes the stale lock over (logged).
 * release() removes the file only if it still holds our lock; it is idempotent.
 */
export async function acquireInstanceLock(dataDir: string, log: (msg: string) => void): Promise<{ release(): Promise<void> }> {
  const absDir = path.resolve(dataDir);
  await fs.mkdir(absDir, { recursive: true });
  const lockPath = path.join(absDir, LOCK_FILE);

  const mine: LockInfo = {
    pid: process.pid,
    startedAt: new Date().toISOString(),
    hostname: os.hostname(),
  };
  const bootId = await readBootId();
  const procStart = bootId === undefined ? undefined : await readProcStart(process.pid);
  if (bootId !== undefined && procStart !== undefined) {
    mine.bootId = bootId;
    mine.procStart = procStart;
  }
  const content = `${JSON.stringify(mine)}\n`;

  const deadline = Date.now() + ACQUIRE_DEADLINE_MS;
  while (Date.now() < deadline) {
    if (await createExclusive(lockPath, content)) {
      held.add(lockPath);
      return makeHandle(lockPath, mine);
    }
    const existing = await readLock(lockPath);
    if (existing === 'missing') continue; // released meanwhile: try again
    if (existing === 'garbage') {
      const age = await ageMs(lockPath);
      if (age !== undefined && age < YOUNG_GARBAGE_MS) {
        await sleep(50); // probably being written by another process right now
        continue;
      }
      if (await takeOver(lockPath, existing, () => log(`taking over unreadable stale lock ${lockPath}`))) continue;
      await sleep(50);
      continue;
    }
    const verdict = await holderState(lockPath, existing.info, bootId);
    if (verdict.alive) {
      throw new InstanceLockedError(
        `another instance (pid ${existing.info.pid}) is already using DATA_DIR ${absDir}; stop it or choose another DATA_DIR`,
        { pid: existing.info.pid, dataDir: absDir },
      );
    }
    const taken = await takeOver(lockPath, existing, () =>
      log(
        `taking over stale lock ${lockPath} of pid ${existing.info.pid} on ${existing.info.hostname} ` +
          `(started ${existing.info.startedAt}): ${verdict.reason}`,
      ),
    );
    if (!taken) await sleep(50);
  }
  throw new Error(`could not acquire ${lockPath}: it keeps changing (several instances starting at once?)`);
}

function makeHandle(lockPath: string, mine: LockInfo): { release(): Promise<void> } {
  let released = false;
  return {
    async release(): Promise<void> {
      if (released) return;
      released = true;
      held.delete(lockPath);
      const current = await readLock(lockPath);
      if (typeof current === 'string') return; // gone or unreadable: not ours to remove
      if (current.info.pid !== mine.pid || current.info.startedAt !== mine.startedAt) return;
      await fs.rm(lockPath, { force: true });
    },
  };
}

/** Creates lockPath with the full content, atomically; false if it already exists. */
async function createExclusive(lockPath: string, content: string): Promise<boolean> {
  // Write a private temp file and hard-link it into place: link() fails with EEXIST like O_EXCL does,
  // and the lock never exists half-written.
  const tmp = `${lockPath}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  await fs.writeFile(tmp, content, { flag: 'wx', mode: 0o644 });
  try {
    await fs.link(tmp, lockPath);
    return true;
  } catch (err) {
    const code = errCode(err);
    if (code === 'EEXIST') return false;
    if (code !== 'EPERM' && code !== 'ENOTSUP' && code !== 'EOPNOTSUPP' && code !== 'ENOSYS') throw err;
  } finally {
    await fs.rm(tmp, { force: true });
  }
  // File system without hard links: plain O_CREAT|O_EXCL.
  let fh: fs.FileHandle;
  try {
    fh = await fs.open(lockPath, 'wx', 0o644);
  } catch (err) {
    if (errCode(err) === 'EEXIST') return false;
    throw err;
  }
  try {
    await fh.writeFile(content);
    await fh.sync();
  } finally {
    await fh.close();
  }
  return true;
}

type ReadResult = 'missing' | 'garbage' | { raw: string; info: LockInfo };

async function readLock(lockPath: string): Promise<ReadResult> {
  let raw: string;
  try {
    raw = await fs.readFile(lockPath, 'utf8');
  } catch (err) {
    if (errCode(err) === 'ENOENT') return 'missing';
    throw err;
  }
  try {
    const v: unknown = JSON.parse(raw);
    if (typeof v !== 'object' || v === null) return 'garbage';
    const o = v as Record<string, unknown>;
    if (typeof o.pid !== 'number' || !Number.isInteger(o.pid) || o.pid <= 0) return 'garbage';
    const info: LockInfo = {
      pid: o.pid,
      startedAt: typeof o.startedAt === 'string' ? o.startedAt : '?',
      hostname: typeof o.hostname === 'string' ? o.hostname : '?',
    };
    if (typeof o.bootId === 'string') info.bootId = o.bootId;
    if (typeof o.procStart === 'string') info.procStart = o.procStart;
    return { raw, info };
  } catch {
    return 'garbage';
  }
}

async function holderState(
  lockPath: string,
  info: LockInfo,
  ourBootId: string | undefined,
): Promise<{ alive: true } | { alive: false; reason: string }> {
  if (info.pid === process.pid) {
    // Same pid as ours: either this process holds it, or a previous incarnation that had the same pid
    // (typical in containers, where the service is pid 1 or another small fixed pid after a restart).
    if (held.has(lockPath)) return { alive: true };
    return { alive: false, reason: 'it names our own pid but this process does not hold it (restarted with the same pid)' };
  }
  if (!isAlive(info.pid)) return { alive: false, reason: 'that process is gone' };
  // A process killed (kill -9) stays a zombie until its parent reaps it: it still answers signal 0,
  // but it is gone, and a supervisor that restarts at once must not be refused by it.
  if (await isZombie(info.pid)) return { alive: false, reason: 'that process has exited (a zombie its parent has not reaped yet)' };
  if (info.bootId !== undefined && ourBootId !== undefined && info.bootId !== ourBootId) {
    return { alive: false, reason: `it was taken before a reboot; pid ${info.pid} is now another process` };
  }
  if (info.procStart !== undefined && info.bootId !== undefined && info.bootId === ourBootId) {
    const start = await readProcStart(info.pid);
    if (start !== undefined && start !== info.procStart) {
      return { alive: false, reason: `pid ${info.pid} has been reused by another process` };
    }
  }
  return { alive: true };
}

/**
 * Removes the stale lock `seen` unless it changed meanwhile. A short-lived mutex file serializes
 * takeovers, so two instances finding the same stale lock cannot both remove-and-create.
 */
async function takeOver(lockPath: string, seen: ReadResult, announce: () => void): Promise<boolean> {
  const mutex = `${lockPath}.takeover`;
  try {
    await fs.writeFile(mutex, `${process.pid}\n`, { flag: 'wx', mode: 0o644 });
  } catch (err) {
    if (errCode(err) !== 'EEXIST') throw err;
    const age = await ageMs(mutex);
    if (age !== undefined && age > TAKEOVER_STALE_MS) await fs.rm(mutex, { force: true });
    return false;
  }
  try {
    const now = await readLock(lockPath);
    const same = typeof seen === 'string' ? now === seen : typeof now !== 'string' && now.raw === seen.raw;
    if (!same) return false;
    announce();
    await fs.rm(lockPath, { force: true });
    return true;
  } finally {
    await fs.rm(mutex, { force: true });
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return errCode(err) === 'EPERM'; // exists, but belongs to another user
  }
}

/** The process has exited and waits to be reaped (state Z or X in /proc/<pid>/stat), Linux only. */
async function isZombie(pid: number): Promise<boolean> {
  try {
    const stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state === 'Z' || state === 'X';
  } catch {
    return false;
  }
}

async function readBootId(): Promise<string | undefined> {
  try {
    return (await fs.readFile('/proc/sys/kernel/random/boot_id', 'utf8')).trim() || undefined;
  } catch {
    return undefined;
  }
}

/** Start time of a process in clock ticks since boot (field 22 of /proc/<pid>/stat), Linux only. */
async function readProcStart(pid: number): Promise<string | undefined> {
  try {
    const stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) is in parentheses and may contain anything; fields resume after the last ')'.
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const v = rest[19]; // field 22; rest[0] is field 3
    return v !== undefined && /^\d+$/.test(v) ? v : undefined;
  } catch {
    return undefined;
  }
}

async function ageMs(file: string): Promise<number | undefined> {
  try {
    return Date.now() - (await fs.stat(file)).mtimeMs;
  } catch {
    return undefined;
  }
}

function errCode(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null && 'code' in err ? String(err.code) : undefined;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
