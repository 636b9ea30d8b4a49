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
  const code = await new Promise<number>((resolve) => {
    // Two files at a time, unless the caller says otherwise (--test-concurrency=N).
    const concurrency = flags.some((f) => f.startsWith('--test-concurrency')) ? [] : ['--test-concurrency=2'];
    const child = spawn(process.execPath, ['--test', ...concurrency, '--test-timeout=180000', ...reporters, ...flags, ...files], {
      cwd: root,
      env,
      stdio: 'inherit',
    });
    child.on('exit', (c, sig) => resolve(c ?? (sig ? 1 : 0)));
  });
  if (stop) await stop();
  if (tmp) await fs.rm(tmp, { recursive: true, force: true });
  if (reporters.length > 0) {
    const text = await fs.readFile(skipsFile, 'utf8').catch(() => null);
    for (const line of text === null ? ['# skipped: unknown (the skips reporter wrote nothing)'] : skipSummary(text)) console.log(line);
  }
  await fs.rm(skipsDir, { recursive: true, force: true });
  return code;
}

process.exitCode = await main();
