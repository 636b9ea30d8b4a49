/**
 * What some suites need from the machine beyond `npm ci`: a browser, a CJK font, a JDK, Python's
 * `cryptography`, a system Node, Redis. A suite whose prerequisite is missing reports itself
 * skipped, and its reason names the missing piece and the line that installs it (the totals at the
 * end of `npm test` list them), so `npm test` passes on a fresh machine or says exactly why not.
 *
 * CI must not skip them: `.ci/run` sets MPS_TEST_REQUIRE_ALL=1, and then a missing prerequisite
 * fails its suite (the file stops with the same reason) instead of skipping it.
 *
 * Usage: `describe(name, { skip: skipUnless(CHROMIUM) }, ...)`.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

/** The variable CI sets: a missing prerequisite is a failure, not a skip. */
export const REQUIRE_ALL = 'MPS_TEST_REQUIRE_ALL';

export interface Prerequisite {
  /** What is missing, as the reason says it. */
  what: string;
  /** The line that installs it (Debian's packages; the project's other tools come with `npm ci`). */
  install: string;
  present(): boolean;
}

const works = (cmd: string, args: string[]): boolean => spawnSync(cmd, args, { stdio: 'ignore', timeout: 30_000 }).status === 0;

const once = (check: () => boolean): (() => boolean) => {
  let known: boolean | undefined;
  return () => (known ??= check());
};

export const CHROMIUM_PATH = '/usr/bin/chromium';

export const CHROMIUM: Prerequisite = {
  what: `a browser at ${CHROMIUM_PATH}`,
  install: 'apt-get install chromium fonts-noto-cjk',
  present: () => fs.existsSync(CHROMIUM_PATH),
};

/**
 * A font for Chinese, as the browser finds fonts: fontconfig's `fc-list :lang=zh` (it comes with
 * chromium); without fc-list, a font file of a CJK family in the system's font folders.
 */
function hasCjkFont(): boolean {
  const fc = spawnSync('fc-list', [':lang=zh', 'family'], { encoding: 'utf8', timeout: 30_000 });
  if (fc.status === 0) return fc.stdout.trim() !== '';
  const CJK = /(NotoSansCJK|NotoSerifCJK|NotoSansSC|SourceHan|wqy|DroidSansFallback)/i;
  for (const dir of ['/usr/share/fonts', '/usr/local/share/fonts']) {
    let names: string[];
    try {
      names = fs.readdirSync(dir, { recursive: true }).map(String);
    } catch {
      continue;
    }
    if (names.some((n) => CJK.test(path.basename(n)))) return true;
  }
  return false;
}

export const CJK_FONT: Prerequisite = {
  what: 'a Chinese font (the cashier page is drawn in Chinese)',
  install: 'apt-get install fonts-noto-cjk',
  present: once(hasCjkFont),
};

export const JDK: Prerequisite = {
  what: 'a JDK (javac and java on PATH)',
  install: 'apt-get install default-jdk-headless',
  present: once(() => works('javac', ['-version']) && works('java', ['-version'])),
};

let python: string | null | undefined;
/** A python3 that imports cryptography: RECIPE_PYTHON, then Debian's (python3-cryptography), then python3 on PATH (pyenv's may lack it). */
export function pythonWithCryptography(): string | null {
  python ??=
    [process.env.RECIPE_PYTHON, '/usr/bin/python3', 'python3'].find((p): p is string => !!p && works(p, ['-c', 'import cryptography'])) ??
    null;
  return python;
}

export const PYTHON_CRYPTOGRAPHY: Prerequisite = {
  what: 'a python3 with the cryptography package (RECIPE_PYTHON, /usr/bin/python3 or python3 on PATH)',
  install: 'apt-get install python3-cryptography',
  present: () => pythonWithCryptography() !== null,
};

/** The machine's own Node, older than the project's (the packed SDK promises Node 18+). */
export const SYSTEM_NODE_PATH = process.env.SYSTEM_NODE || '/usr/bin/node';

export const SYSTEM_NODE: Prerequisite = {
  what: `a system Node at ${SYSTEM_NODE_PATH} (or SYSTEM_NODE)`,
  install: 'apt-get install nodejs',
  present: () => fs.existsSync(SYSTEM_NODE_PATH),
};

/** The Redis the Redis suites run on. */
export const TEST_REDIS_URL = process.env.TEST_REDIS_URL || undefined;

export const REDIS: Prerequisite = {
  what: 'a Redis (TEST_REDIS_URL is not set)',
  install: 'apt-get install redis-server, then TEST_REDIS_URL=redis://127.0.0.1:6379 npm test',
  present: () => TEST_REDIS_URL !== undefined,
};

export const REDIS_SERVER: Prerequisite = {
  what: 'the redis-server program (the suite starts and stops its own)',
  install: 'apt-get install redis-server',
  present: once(() => works('redis-server', ['--version'])),
};

/** pg_auto_failover and the PostgreSQL 15 it runs (the high-availability drill: scripts/ha/cluster.ts). */
export const PG_AUTO_FAILOVER: Prerequisite = {
  what: 'pg_auto_failover (pg_autoctl and its PostgreSQL 15 extension)',
  install: 'apt-get install pg-auto-failover-cli postgresql-15-auto-failover',
  present: () =>
    fs.existsSync('/usr/bin/pg_autoctl') &&
    fs.existsSync('/usr/lib/postgresql/15/bin/pg_ctl') &&
    fs.existsSync('/usr/share/postgresql/15/extension/pgautofailover.control'),
};

/** The missing prerequisites, one reason line each. */
export function missing(...prerequisites: Prerequisite[]): string[] {
  return prerequisites.filter((p) => !p.present()).map((p) => `needs ${p.what}: ${p.install}`);
}

/**
 * The `skip` option of a suite or test that needs these: false when all are present; otherwise
 * the reason, with each install line; under MPS_TEST_REQUIRE_ALL=1 (CI) it throws that reason.
 */
export function skipUnless(...prerequisites: Prerequisite[]): string | false {
  const lines = missing(...prerequisites);
  if (lines.length === 0) return false;
  const reason = lines.join('; ');
  if (process.env[REQUIRE_ALL] === '1') throw new Error(`${REQUIRE_ALL}=1 (CI): ${reason}`);
  return reason;
}
