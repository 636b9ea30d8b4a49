/**
 * The test command (`npm test`). Chooses the PostgreSQL server the suites run on:
 *  - TEST_DATABASE_URL (an external server; each suite creates and drops its own database), or
 *  - an embedded PostgreSQL started here in a temporary DATA_DIR (a machine without PostgreSQL).
 * Suites that need Redis run when TEST_REDIS_URL is set and are reported as skipped otherwise.
 * Then runs node's test runner over test/, packages/*\/test and bench/test (the benchmark's own
 * code), the longest files first (as long as they took last time: node_modules/.cache/mps-test/),
 * and ends with what was skipped and why (node's own "skipped" counts tests only, and a suite
 * skipped as a whole registers none; a suite whose prerequisite is missing names the line that
 * installs it: test/helpers/prerequisites.ts), the slowest files and the time it all took.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { startEmbeddedPostgres } from '../src/store/embedded.ts';
import type { FileDuration } from './test-durations-reporter.ts';
import { skipSummary } from './test-skips-reporter.ts';

const root = path.resolve(import.meta.dirname, '..');
const args = process.argv.slice(2);
/** How long each file took when it last ran (relative path -> ms), to start the longest first. */
const DURATIONS_CACHE = path.join(root, 'node_modules/.cache/mps-test/durations.json');

async function readDurations(): Promise<Record<string, number>> {
  return fs.readFile(DURATIONS_CACHE, 'utf8').then(
    (t) => JSON.parse(t) as Record<string, number>,
    () => ({}),
  );
}

async function listTests(): Promise<string[]> {
  const out: string[] = [];
  for (const dir of ['test', 'bench/test', ...(await fs.readdir(path.join(root, 'packages'))).map((p) => `packages/${p}/test`)]) {
    for await (const f of fs.glob(`${dir}/**/*.test.ts`, { cwd: root })) out.push(f);
  }
  return out.sort();
}

async function main(): Promise<number> {
  const startedAt = Date.now();
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
    console.log(
      '# TEST_REDIS_URL is not set: the Redis suites (nonce store, rate limit on Redis) are skipped (apt-get install redis-server, then TEST_REDIS_URL=redis://127.0.0.1:6379 npm test)',
    );
  }
  const files = args.filter((a) => !a.startsWith('-')).length > 0 ? args.filter((a) => !a.startsWith('-')) : await listTests();
  const flags = args.filter((a) => a.startsWith('-'));
  // node's spec reporter on the terminal, and the skips and durations reporters into files for the
  // lines at the end (left out when the caller chooses reporters).
  const reportsDir = await fs.mkdtemp(path.join(os.tmpdir(), 'mps-test-reports-'));
  const ownReporters = !flags.some((f) => f.startsWith('--test-reporter'));
  const reportersFor = (batch: string): string[] =>
    ownReporters
      ? [
          '--test-reporter=spec',
          '--test-reporter-destination=stdout',
          '--test-reporter=./scripts/test-skips-reporter.ts',
          `--test-reporter-destination=${path.join(reportsDir, `skipped.${batch}.jsonl`)}`,
          '--test-reporter=./scripts/test-durations-reporter.ts',
          `--test-reporter-destination=${path.join(reportsDir, `durations.${batch}.jsonl`)}`,
        ]
      : [];
  // Two files at a time, unless the caller says otherwise (--test-concurrency=N). The suites that
  // start, kill and stop real processes (test/startup, test/embedded, test/ha) run afterwards, one at a
  // time: pids wrap at 32,768 here, and a pid one of them signals must never name a process of a
  // suite running alongside.
  const chosen = flags.some((f) => f.startsWith('--test-concurrency'));
  const alone = chosen ? [] : files.filter((f) => /^test\/(startup|embedded|ha)\//.test(f));
  // The longest files first, so that the last to finish are short ones (new files, not timed yet, last).
  const took = await readDurations();
  const together = files.filter((f) => !alone.includes(f)).sort((a, b) => (took[b] ?? 0) - (took[a] ?? 0));
  const run = (batch: string[], concurrency: string[], name: string): Promise<number> =>
    new Promise<number>((resolve) => {
      const reps = reportersFor(name);
      // node's runner adds an 'end' listener per file to its own TestsStream when several reporters
      // are set, and warns past ten: the warning says nothing about the code under test.
      const quiet = ['--disable-warning=MaxListenersExceededWarning'];
      const child = spawn(process.execPath, [...quiet, '--test', ...concurrency, '--test-timeout=180000', ...reps, ...flags, ...batch], {
        cwd: root,
        env,
        stdio: 'inherit',
      });
      child.on('exit', (c, sig) => resolve(c ?? (sig ? 1 : 0)));
    });
  let code = together.length > 0 ? await run(together, chosen ? [] : ['--test-concurrency=2'], 'together') : 0;
  if (alone.length > 0) {
    console.log(`# the suites that start and kill processes, one at a time: ${alone.join(' ')}`);
    code = Math.max(code, await run(alone, ['--test-concurrency=1'], 'alone'));
  }
  if (stop) await stop();
  if (tmp) await fs.rm(tmp, { recursive: true, force: true });
  if (ownReporters) {
    const read = (kind: string) =>
      Promise.all(['together', 'alone'].map((b) => fs.readFile(path.join(reportsDir, `${kind}.${b}.jsonl`), 'utf8').catch(() => null)));
    const parts = await read('skipped');
    const text = parts.every((p) => p === null) ? null : parts.map((p) => p ?? '').join('');
    for (const line of text === null ? ['# skipped: unknown (the skips reporter wrote nothing)'] : skipSummary(text)) console.log(line);
    const durations = (await read('durations'))
      .join('')
      .split('\n')
      .filter((l) => l.trim() !== '')
      .map((l) => JSON.parse(l) as FileDuration)
      .map((d) => ({ file: path.relative(root, d.file), ms: d.ms }))
      .sort((a, b) => b.ms - a.ms);
    if (durations.length > 0) {
      const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
      console.log(
        `# slowest files: ${durations
          .slice(0, 5)
          .map((d) => `${d.file} ${s(d.ms)}`)
          .join(', ')}`,
      );
      await fs.mkdir(path.dirname(DURATIONS_CACHE), { recursive: true });
      const known = await readDurations();
      for (const d of durations) if (d.file.endsWith('.test.ts')) known[d.file] = d.ms;
      const next = `${DURATIONS_CACHE}.${process.pid}`;
      await fs
        .writeFile(next, `${JSON.stringify(known, null, 1)}\n`)
        .then(() => fs.rename(next, DURATIONS_CACHE))
        .catch(() => {});
      console.log(`# npm test took ${s(Date.now() - startedAt)} (${files.length} file${files.length === 1 ? '' : 's'})`);
    }
  }
  await fs.rm(reportsDir, { recursive: true, force: true });
  return code;
}

process.exitCode = await main();
