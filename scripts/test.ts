/**
 * The test command (`npm test`). Chooses the PostgreSQL server the suites run on:
 *  - TEST_DATABASE_URL (an external server; each suite creates and drops its own database), or
 *  - an embedded PostgreSQL started here in a temporary DATA_DIR (a machine without PostgreSQL).
 * Suites that need Redis run when TEST_REDIS_URL is set and are reported as skipped otherwise.
 * Then runs node's test runner over test/, packages/*\/test and bench/test (the benchmark's own
 * code), and ends with what was skipped and why: node's own "skipped" counts tests only, and a suite
 * skipped as a whole registers none.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { startEmbeddedPostgres } from '../src/store/embedded.ts';
import { skipSummary } from './test-skips-reporter.ts';

const root = path.resolve(import.meta.dirname, '..');
const args = process.argv.slice(2);

async function listTests(): Promise<string[]> {
  const out: string[] = [];
  for (const dir of ['test', 'bench/test', ...(await fs.readdir(path.join(root, 'packages'))).map((p) => `packages/${p}/test`)]) {
    for await (const f of fs.glob(`${dir}/**/*.test.ts`, { cwd: root })) out.push(f);
  }
  return out.sort();
}

async function main(): Promise<number> {
  const env = { ...process.env };
  let stop: (() => Promise<void>) | null = null;
  let tmp: string | null = null;
  if (env.TEST_DATABASE_URL) {
    console.log(`# tests run on the PostgreSQL at TEST_DATABASE_URL`);
  } else {
    tmp = await fs.mkdtemp(path.join(os.tmpdir(), 'mps-test-pg-'));
    const t0 = Date.now();
    const pg = await startEmbeddedPostgres({ dataDir: tmp, log: () => {} });
    stop = () => pg.stop();
    env.TEST_DATABASE_URL = pg.connectionString;
    console.log(`# tests run on an embedded PostgreSQL (started in ${Date.now() - t0} ms); set TEST_DATABASE_URL to use another server`);
  }
  if (!env.TEST_REDIS_URL) {
    console.log('# TEST_REDIS_URL is not set: the Redis suites (nonce store, rate limit on Redis) are skipped');
  }
  const files = args.filter((a) => !a.startsWith('-')).length > 0 ? args.filter((a) => !a.startsWith('-')) : await listTests();
  const flags = args.filter((a) => a.startsWith('-'));
  // node's spec reporter on the terminal, and the skips reporter into a file for the totals below
  // (left out when the caller chooses reporters).
  const skipsDir = await fs.mkdtemp(path.join(os.tmpdir(), 'mps-test-skips-'));
  const skipsFile = path.join(skipsDir, 'skipped.jsonl');
  const reporters = flags.some((f) => f.startsWith('--test-reporter'))
    ? []
    : [
        '--test-reporter=spec',
        '--test-reporter-destination=stdout',
        '--test-reporter=./scripts/test-skips-reporter.ts',
        `--test-reporter-destination=${skipsFile}`,
      ];
  // Two files at a time, unless the caller says otherwise (--test-concurrency=N). The suites that
  // start, kill and stop real processes (test/startup, test/embedded) run afterwards, one at a
  // time: pids wrap at 32,768 here, and a pid one of them signals must never name a process of a
  // suite running alongside.
  const chosen = flags.some((f) => f.startsWith('--test-concurrency'));
  const alone = chosen ? [] : files.filter((f) => /^test\/(startup|embedded)\//.test(f));
  const together = files.filter((f) => !alone.includes(f));
  const run = (batch: string[], concurrency: string[], skips: string): Promise<number> =>
    new Promise<number>((resolve) => {
      const reps = reporters.length === 0 ? [] : [...reporters.slice(0, 3), `--test-reporter-destination=${skips}`];
      const child = spawn(process.execPath, ['--test', ...concurrency, '--test-timeout=180000', ...reps, ...flags, ...batch], {
        cwd: root,
        env,
        stdio: 'inherit',
      });
      child.on('exit', (c, sig) => resolve(c ?? (sig ? 1 : 0)));
    });
  let code = together.length > 0 ? await run(together, chosen ? [] : ['--test-concurrency=2'], skipsFile) : 0;
  if (alone.length > 0) {
    console.log(`# the suites that start and kill processes, one at a time: ${alone.join(' ')}`);
    code = Math.max(code, await run(alone, ['--test-concurrency=1'], `${skipsFile}.alone`));
  }
  if (stop) await stop();
  if (tmp) await fs.rm(tmp, { recursive: true, force: true });
  if (reporters.length > 0) {
    const parts = await Promise.all([skipsFile, `${skipsFile}.alone`].map((f) => fs.readFile(f, 'utf8').catch(() => null)));
    const text = parts.every((p) => p === null) ? null : parts.map((p) => p ?? '').join('');
    for (const line of text === null ? ['# skipped: unknown (the skips reporter wrote nothing)'] : skipSummary(text)) console.log(line);
  }
  await fs.rm(skipsDir, { recursive: true, force: true });
  return code;
}

process.exitCode = await main();
