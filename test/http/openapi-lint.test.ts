/**
 * An outside linter on the served OpenAPI document: the service listens, the document is fetched
 * from GET /docs/openapi.json, written to a file and linted by @redocly/cli with its recommended
 * rules (redocly.yaml): no error and no warning. The linter runs offline: its telemetry and update
 * check are off (redocly.yaml and the environment below).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { promisify } from 'node:util';
import { type TestApp, startTestApp } from '../helpers/app.ts';

const root = path.resolve(import.meta.dirname, '../..');
const redocly = path.join(root, 'node_modules/@redocly/cli/bin/cli.js');

let t: TestApp;
let dir: string;
before(async () => {
  t = await startTestApp();
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'mps-openapi-lint-'));
});
after(async () => {
  await t.stop();
  await fs.rm(dir, { recursive: true, force: true });
});

interface LintReport {
  totals: { errors: number; warnings: number; ignored: number };
  problems: { ruleId: string; severity: string; message: string; location: { pointer?: string }[] }[];
}

test('@redocly/cli lint (recommended) finds no error and no warning in the served document', async () => {
  const base = await t.server.listen({ host: '127.0.0.1', port: 0 });
  const r = await fetch(`${base}/docs/openapi.json`);
  assert.equal(r.status, 200);
  const file = path.join(dir, 'openapi.json');
  await fs.writeFile(file, await r.text());
  const run = await promisify(execFile)(
    process.execPath,
    [redocly, 'lint', '--config', path.join(root, 'redocly.yaml'), '--format=json', file],
    {
      cwd: dir,
      env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', REDOCLY_SUPPRESS_NOTIFICATIONS: 'true' },
      maxBuffer: 16 * 1024 * 1024,
    },
  ).catch((err: { stdout?: string; stderr?: string; code?: number }) => ({
    stdout: err.stdout ?? '',
    stderr: err.stderr ?? '',
    code: err.code,
  }));
  const report = JSON.parse(run.stdout) as LintReport;
  const problems = report.problems.map((p) => `${p.severity} ${p.ruleId} at ${p.location[0]?.pointer}: ${p.message}`);
  assert.deepEqual(problems, []);
  assert.deepEqual(report.totals, { errors: 0, warnings: 0, ignored: 0 });
});
