/**
 * docs/errors.md and OPEN_API_ERRORS (src/gate/open-errors.ts) describe the same closed table, both
 * ways: every code of the doc's table is in the code with the same status, and vice versa; the
 * table follows decisions.md section 4; the platform envelopes and the seven source-IP reasons are
 * documented.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { OPEN_API_ERRORS } from '../../src/gate/open-errors.ts';

const root = path.resolve(import.meta.dirname, '..', '..');
const doc = fs.readFileSync(path.join(root, 'docs', 'errors.md'), 'utf8');

/** Rows `| 400 | `OPEN_API_X` | ... |` of the section "The closed table". */
function closedTable(): Map<string, number> {
  const start = doc.indexOf('## The closed table');
  assert.ok(start >= 0, 'docs/errors.md has a "The closed table" section');
  const end = doc.indexOf('\n## ', start + 1);
  const section = doc.slice(start, end < 0 ? undefined : end);
  const rows = new Map<string, number>();
  for (const line of section.split('\n')) {
    const m = /^\|\s*(\d{3})\s*\|\s*`(OPEN_API_[A-Z_]+)`\s*\|/.exec(line);
    if (!m) continue;
    assert.ok(!rows.has(m[2]!), `${m[2]} listed twice`);
    rows.set(m[2]!, Number(m[1]));
  }
  return rows;
}

test('every code of the doc is in OPEN_API_ERRORS with the same status', () => {
  const rows = closedTable();
  assert.ok(rows.size > 0);
  for (const [code, status] of rows) {
    assert.ok(code in OPEN_API_ERRORS, `${code} (docs/errors.md) is not in OPEN_API_ERRORS`);
    assert.equal(OPEN_API_ERRORS[code as keyof typeof OPEN_API_ERRORS].status, status, `${code}: status in the doc`);
  }
});

test('every code of OPEN_API_ERRORS is in the doc with the same status', () => {
  const rows = closedTable();
  for (const [code, { status }] of Object.entries(OPEN_API_ERRORS)) {
    assert.equal(rows.get(code), status, `${code} ${status} is missing from docs/errors.md or has another status`);
  }
});

test('the table is the one of decisions.md section 4', () => {
  const expected: Record<string, number> = {
    OPEN_API_HEADER_INVALID: 400,
    OPEN_API_BODY_INVALID: 400,
    OPEN_API_CONTENT_TYPE_INVALID: 400,
    OPEN_API_AUTH_FAILED: 401,
    OPEN_API_SOURCE_IP_REJECTED: 403,
    OPEN_API_NOT_FOUND: 404,
    OPEN_API_NONCE_REPLAYED: 409,
    OPEN_API_IDEMPOTENCY_CONFLICT: 409,
    OPEN_API_REQUEST_ID_CONFLICT: 409,
    OPEN_API_STATE_INVALID: 409,
    OPEN_API_BODY_TOO_LARGE: 413,
    OPEN_API_CHANNEL_UNAVAILABLE: 422,
    OPEN_API_TRADE_SCOPE_UNAVAILABLE: 422,
    OPEN_API_LIMIT_EXCEEDED: 422,
    OPEN_API_RATE_LIMITED: 429,
    OPEN_API_PROVIDER_REJECTED: 502,
    OPEN_API_GUARD_UNAVAILABLE: 503,
  };
  assert.deepEqual(Object.fromEntries(Object.entries(OPEN_API_ERRORS).map(([c, v]) => [c, v.status])), expected);
  assert.deepEqual(Object.fromEntries(closedTable()), expected);
});

test('default messages are plain text that leaks nothing internal', () => {
  for (const [code, { message }] of Object.entries(OPEN_API_ERRORS)) {
    assert.ok(message.length > 0 && message.length <= 200, code);
    assert.ok(!/OPEN_API_|Error:|at .*\(|SQL|postgres|redis|stack/i.test(message), `${code}: ${message}`);
  }
});

test('the doc lists the platform envelopes and the seven source-IP reasons', () => {
  for (const s of ['ROUTE_NOT_FOUND', 'METHOD_NOT_ALLOWED', '"status": 404']) assert.ok(doc.includes(s), s);
  assert.match(doc, /\|\s*404\s*\|\s*`ROUTE_NOT_FOUND`/);
  assert.match(doc, /\|\s*405\s*\|\s*`METHOD_NOT_ALLOWED`/);
  for (const reason of [
    'SOURCE_ADDRESS_MISSING',
    'SOURCE_ADDRESS_MALFORMED',
    'FORWARDER_UNTRUSTED',
    'ADDRESS_FAMILY_DISABLED',
    'PLATFORM_DENYLISTED',
    'NOT_IN_PLATFORM_ALLOWLIST',
    'TEMPORARILY_BLOCKED',
  ]) {
    assert.match(doc, new RegExp(`\\|\\s*\`${reason}\`\\s*\\|`), reason);
  }
});
