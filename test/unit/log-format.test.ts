/**
 * The logs as a person reads them (src/platform/log.ts): LOG_FORMAT, pretty on a terminal and JSON
 * elsewhere; one readable line per event with a request's method and path or its status and time;
 * the banner `npm start` prints once with the line to export for the CLIs.
 */
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { describe, test } from 'node:test';
import pino from 'pino';
import { ConfigError, loadConfig } from '../../src/config/config.ts';
import { cliBanner, effectiveLogFormat, loggedUrl, prettyStream } from '../../src/platform/log.ts';

/** The lines a pretty logger writes for what `log` does. */
async function prettyLines(log: (l: pino.Logger) => void): Promise<string[]> {
  const out = new PassThrough();
  let text = '';
  out.on('data', (d: Buffer) => (text += d.toString()));
  const logger = pino({ level: 'info' }, prettyStream(out));
  log(logger);
  await new Promise((r) => setImmediate(r));
  return text.split('\n').filter((l) => l !== '');
}

describe('LOG_FORMAT', () => {
  test('pretty on a terminal, JSON elsewhere, unless set', () => {
    assert.equal(effectiveLogFormat(null, true), 'pretty');
    assert.equal(effectiveLogFormat(null, false), 'json');
    assert.equal(effectiveLogFormat('json', true), 'json');
    assert.equal(effectiveLogFormat('pretty', false), 'pretty');
  });

  test('json or pretty; anything else is a configuration error naming the variable', () => {
    assert.equal(loadConfig({}).logFormat, null);
    assert.equal(loadConfig({ LOG_FORMAT: 'pretty' }).logFormat, 'pretty');
    assert.equal(loadConfig({ LOG_FORMAT: 'json' }).logFormat, 'json');
    assert.throws(
      () => loadConfig({ LOG_FORMAT: 'yaml' }),
      (e: unknown) => e instanceof ConfigError && /^LOG_FORMAT must be json or pretty/.test(e.message),
    );
  });
});

describe('the pretty format', () => {
  test('one line per event: time, level, message, and the other fields on the same line', async () => {
    const lines = await prettyLines((l) => {
      l.info('starting embedded PostgreSQL in /srv/data');
      l.warn({ task: 'deliver events' }, 'background task failed; will retry');
    });
    assert.equal(lines.length, 2);
    assert.match(lines[0]!, /^\[?\d\d:\d\d:\d\d\.\d{3}\]? INFO.*: starting embedded PostgreSQL in \/srv\/data$/);
    assert.match(lines[1]!, /WARN.*: background task failed; will retry \{"task":"deliver events"\}$/);
    for (const l of lines) assert.doesNotMatch(l, /"pid"|"hostname"/);
  });

  test("a request's lines: its method and path, then its status and time, with the merchant's request id", async () => {
    const lines = await prettyLines((l) => {
      const r = l.child({ reqId: 'req-1' });
      r.info({ req: { method: 'POST', url: '/api/open/v1/payments', remoteAddress: '127.0.0.1' } }, 'incoming request');
      r.info({ res: { statusCode: 201 }, responseTime: 12.345, requestId: 'req_0001' }, 'request completed');
    });
    assert.equal(lines.length, 2);
    assert.match(lines[0]!, /INFO.*: incoming request POST \/api\/open\/v1\/payments \{"reqId":"req-1"\}$/);
    assert.match(lines[1]!, /INFO.*: request completed 201 in 12\.3 ms \{"reqId":"req-1","requestId":"req_0001"\}$/);
  });
});

describe('the banner of npm start', () => {
  test('the line to export for the CLIs, with a generated token once', () => {
    const b = cliBanner({ host: '127.0.0.1', port: 18080 }, 'tok_generated_123');
    assert.match(b, /^ {4}export MPS_ADMIN_URL=http:\/\/127\.0\.0\.1:18080 ADMIN_TOKEN=tok_generated_123$/m);
    assert.equal(b.split('tok_generated_123').length - 1, 1);
    assert.match(b, /generated for this run/);
  });

  test('without a generated token, the address only; a wildcard address is reached on loopback', () => {
    assert.match(cliBanner({ host: '0.0.0.0', port: 8081 }, null), /^ {4}export MPS_ADMIN_URL=http:\/\/127\.0\.0\.1:8081$/m);
    assert.match(cliBanner({ host: '::', port: 8081 }, null), /^ {4}export MPS_ADMIN_URL=http:\/\/\[::1\]:8081$/m);
    assert.doesNotMatch(cliBanner({ host: '127.0.0.1', port: 8080 }, null), /ADMIN_TOKEN=/);
  });
});

describe('a cashier token is never logged', () => {
  test('loggedUrl replaces the token only', () => {
    assert.equal(loggedUrl('/cashier/abc/wechat/callback?code=1'), '/cashier/[token]/wechat/callback?code=1');
    assert.equal(loggedUrl('/cashier/abc'), '/cashier/[token]');
    assert.equal(loggedUrl('/api/open/v1/payments/T_1'), '/api/open/v1/payments/T_1');
  });
});
