/**
 * The skip totals at the end of `npm test` (scripts/test-skips-reporter.ts): node's own "skipped"
 * counts tests only, so a suite skipped whole must be counted here, with its reason and where.
 * The summary function on sample input, then the whole path: scripts/test.ts run on a fixture
 * (test/unit/fixtures/skips.fixture.ts, not named *.test.ts so `npm test` never runs it itself).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, test } from 'node:test';
import { type Skipped, skipSummary } from '../../scripts/test-skips-reporter.ts';
import { type Prerequisite, REQUIRE_ALL, missing, skipUnless } from '../helpers/prerequisites.ts';

const root = path.resolve(import.meta.dirname, '../..');
const FIXTURE = 'test/unit/fixtures/skips.fixture.ts';
const HEADLINE = `(node's "skipped" above counts tests only; the tests of a skipped suite neither run nor count)`;

function lines(...skipped: Skipped[]): string {
  return skipped.map((s) => `${JSON.stringify(s)}\n`).join('');
}

describe('skipSummary', () => {
  test('nothing skipped: one line that says so', () => {
    assert.deepEqual(skipSummary(''), ['# skipped: none, every suite and test ran']);
    assert.deepEqual(skipSummary('\n  \n'), ['# skipped: none, every suite and test ran']);
  });

  test('suites and tests counted apart, grouped by reason, each with where it is', () => {
    const redis = path.join(process.cwd(), 'test/http/gate-nonce.test.ts');
    const flood = path.join(process.cwd(), 'test/http/flood.test.ts');
    const browser = path.join(process.cwd(), 'test/browser/console.test.ts');
    const input = lines(
      { kind: 'suite', name: 'nonce store on Redis', file: redis, reason: 'TEST_REDIS_URL is not set' },
      { kind: 'test', name: 'one case', file: browser, reason: 'no chromium' },
      { kind: 'suite', name: 'rate limit on Redis', file: flood, reason: 'TEST_REDIS_URL is not set' },
      { kind: 'suite', name: 'the console', file: browser, reason: 'no chromium' },
      { kind: 'test', name: 'a case', file: undefined, reason: '(no reason given)' },
      { kind: 'test', name: 'another case', file: redis, reason: 'TEST_REDIS_URL is not set' },
    );
    assert.deepEqual(skipSummary(input), [
      `# skipped: 3 suites and 3 tests ${HEADLINE}`,
      // The reasons come in the order of their first skip, by file and name; a skip without a file reads '?'.
      `#   1 suite and 1 test: no chromium [test/browser/console.test.ts: one case; test/browser/console.test.ts: the console]`,
      `#   2 suites and 1 test: TEST_REDIS_URL is not set [test/http/flood.test.ts: rate limit on Redis; test/http/gate-nonce.test.ts: another case; test/http/gate-nonce.test.ts: nonce store on Redis]`,
      `#   1 test: (no reason given) [?: a case]`,
    ]);
  });

  test('one of a kind is singular, and a kind with none is left out', () => {
    const file = path.join(process.cwd(), 'test/x.test.ts');
    assert.deepEqual(skipSummary(lines({ kind: 'suite', name: 's', file, reason: 'r' })), [
      `# skipped: 1 suite ${HEADLINE}`,
      '#   1 suite: r [test/x.test.ts: s]',
    ]);
    assert.deepEqual(skipSummary(lines({ kind: 'test', name: 'a', file, reason: 'r' }, { kind: 'test', name: 'b', file, reason: 'r' })), [
      `# skipped: 2 tests ${HEADLINE}`,
      '#   2 tests: r [test/x.test.ts: a; test/x.test.ts: b]',
    ]);
  });
});

describe('npm test (scripts/test.ts) ends with the skip totals', () => {
  test('a suite skipped whole, tests skipped with and without a reason, and one skipped from inside', () => {
    const env: NodeJS.ProcessEnv = { ...process.env, TEST_DATABASE_URL: 'postgres://unused@127.0.0.1:1/none' };
    delete env.NODE_TEST_CONTEXT; // a test runner of its own, not a child of this one
    delete env.TEST_REDIS_URL;
    const r = spawnSync(process.execPath, ['scripts/test.ts', FIXTURE], { cwd: root, env, encoding: 'utf8', timeout: 60_000 });
    assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
    assert.match(r.stdout, /^ℹ skipped 3$/m, "node's own count: tests only");
    const summary = r.stdout.split('\n').filter((l) => l.startsWith('# skipped') || l.startsWith('#   '));
    assert.deepEqual(summary, [
      `# skipped: 1 suite and 3 tests ${HEADLINE}`,
      `#   1 suite and 1 test: TEST_REDIS_URL is not set [${FIXTURE}: a suite skipped whole; ${FIXTURE}: skips itself]`,
      `#   1 test: no chromium here [${FIXTURE}: skipped with a reason]`,
      `#   1 test: (no reason given) [${FIXTURE}: skipped without a reason]`,
    ]);
    assert.ok(!r.stdout.includes('never registered'), 'the tests of a skipped suite are not run');
    assert.match(r.stdout, new RegExp(`^# slowest files: ${FIXTURE} \\d+\\.\\d s$`, 'm'), 'how long each file took');
    assert.match(r.stdout, /^# npm test took \d+\.\d s \(1 file\)$/m);
  });
});

describe('a missing prerequisite (test/helpers/prerequisites.ts)', () => {
  const absent: Prerequisite = { what: 'the frobnicator', install: 'apt-get install frobnicator', present: () => false };
  const present: Prerequisite = { what: 'a clock', install: 'none', present: () => true };
  const PREREQUISITES = 'test/unit/fixtures/prerequisites.fixture.ts';
  const runFixture = (extra: NodeJS.ProcessEnv) => {
    const env: NodeJS.ProcessEnv = { ...process.env, TEST_DATABASE_URL: 'postgres://unused@127.0.0.1:1/none', ...extra };
    delete env.NODE_TEST_CONTEXT;
    if (extra[REQUIRE_ALL] === undefined) delete env[REQUIRE_ALL];
    return spawnSync(process.execPath, ['scripts/test.ts', PREREQUISITES], { cwd: root, env, encoding: 'utf8', timeout: 60_000 });
  };

  test('is a skip whose reason names it and its install line; nothing missing is no skip', () => {
    const saved = process.env[REQUIRE_ALL];
    delete process.env[REQUIRE_ALL];
    try {
      assert.equal(skipUnless(present), false);
      assert.equal(skipUnless(present, absent), 'needs the frobnicator: apt-get install frobnicator');
      assert.deepEqual(missing(absent, present, absent), [
        'needs the frobnicator: apt-get install frobnicator',
        'needs the frobnicator: apt-get install frobnicator',
      ]);
    } finally {
      if (saved !== undefined) process.env[REQUIRE_ALL] = saved;
    }
  });

  test(`with ${REQUIRE_ALL}=1 (CI) it is an error with the same reason`, () => {
    const saved = process.env[REQUIRE_ALL];
    process.env[REQUIRE_ALL] = '1';
    try {
      assert.equal(skipUnless(present), false);
      assert.throws(() => skipUnless(absent), /MPS_TEST_REQUIRE_ALL=1 \(CI\): needs the frobnicator: apt-get install frobnicator/);
    } finally {
      if (saved === undefined) delete process.env[REQUIRE_ALL];
      else process.env[REQUIRE_ALL] = saved;
    }
  });

  test('npm test names the skipped suite with its install line and passes; under CI the same file fails', () => {
    const r = runFixture({});
    assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
    assert.ok(
      r.stdout.includes(
        `#   1 suite: needs the frobnicator: apt-get install frobnicator [${PREREQUISITES}: a suite that needs the frobnicator]`,
      ),
      r.stdout,
    );
    const ci = runFixture({ [REQUIRE_ALL]: '1' });
    assert.notEqual(ci.status, 0, 'CI fails');
    assert.match(ci.stdout + ci.stderr, /MPS_TEST_REQUIRE_ALL=1 \(CI\): needs the frobnicator: apt-get install frobnicator/);
  });
});
