import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config/config.ts';

test('defaults', () => {
  const c = loadConfig({});
  assert.equal(c.port, 8080);
  assert.equal(c.host, '127.0.0.1');
  assert.equal(c.databaseUrl, null);
  assert.equal(c.publicBaseUrl, 'http://127.0.0.1:8080');
  assert.equal(c.provider, 'sandbox');
  assert.equal(c.webhookAllowLoopback, true);
});

test('DATABASE_URL accepts host URLs and the unix-socket form', () => {
  for (const u of [
    'postgres://u@127.0.0.1:5432/db',
    'postgresql://postgres@/postgres?host=%2Ftmp%2Fx%2Frun&port=5432',
    'postgresql:///db?host=/var/run/postgresql',
  ]) {
    assert.equal(loadConfig({ DATABASE_URL: u }).databaseUrl, u);
  }
  assert.throws(() => loadConfig({ DATABASE_URL: 'mysql://x' }), ConfigError);
  assert.throws(() => loadConfig({ DATABASE_URL: 'not a url' }), /DATABASE_URL/);
});

test('ADMIN_TOKEN: any visible ASCII is accepted (a short one is warned about at start); spaces are refused', () => {
  assert.equal(loadConfig({ ADMIN_TOKEN: 'admin' }).adminToken, 'admin');
  assert.equal(loadConfig({ ADMIN_TOKEN: 'test-admin-token-0123456789' }).adminToken, 'test-admin-token-0123456789');
  assert.throws(
    () => loadConfig({ ADMIN_TOKEN: 'two words' }),
    (e: Error) => e instanceof ConfigError && e.message.startsWith('ADMIN_TOKEN '),
  );
});

test('every wrong value names its variable', () => {
  for (const [k, v] of [
    ['PORT', '70000'],
    ['LOG_LEVEL', 'loud'],
    ['SOURCE_IP_FAMILIES', 'ipv5'],
    ['SOURCE_IP_FAMILIES', ','],
    ['WEBHOOK_ALLOW_PRIVATE_TARGETS', 'yes'],
    ['REDIS_URL', 'http://x'],
    ['REDIS_URL', 'redis://127.0.0.1:6379/abc'],
    ['REDIS_URL', 'redis://127.0.0.1:6379/1/2'],
    ['AUTH_FAILURE_LIMIT', '0'],
    ['HOST', '999.1.1.1'],
    ['HOST', 'fe80::zz'],
    ['TRUSTED_PROXIES', 'garbage'],
    ['PLATFORM_IP_ALLOWLIST', '10.0.0.0/33'],
    ['PLATFORM_IP_DENYLIST', '1.2.3.4,nope'],
  ]) {
    assert.throws(
      () => loadConfig({ [k!]: v }),
      (e: Error) => e instanceof ConfigError && e.message.startsWith(`${k} `),
    );
  }
});

test('a wrong URL is quoted without its password', () => {
  for (const [k, v] of [
    ['DATABASE_URL', 'postgres://postgres:S3CRET-pw@bad host/x'],
    ['DATABASE_URL', 'mysql://app:S3CRET-pw@db/x'],
    ['REDIS_URL', 'http://:S3CRET-pw@cache:6379'],
  ] as const) {
    assert.throws(
      () => loadConfig({ [k]: v }),
      (e: Error) =>
        e instanceof ConfigError && e.message.startsWith(`${k} `) && !e.message.includes('S3CRET') && e.message.includes('***@'),
    );
  }
});

test('booleans: true / false / 1 / 0, and the message says so', () => {
  assert.equal(loadConfig({ WORKERS_ENABLED: '0' }).workersEnabled, false);
  assert.equal(loadConfig({ WORKERS_ENABLED: 'true' }).workersEnabled, true);
  assert.throws(
    () => loadConfig({ WORKERS_ENABLED: 'yes' }),
    (e: Error) => e instanceof ConfigError && e.message === "WORKERS_ENABLED must be true or false (or 1 or 0) (got 'yes')",
  );
});

test('STATEMENT_FILES_KEPT_DAYS: 62 by default, 0 (never kept) to 366; anything else refused', () => {
  assert.equal(loadConfig({}).statementFilesKeptDays, 62);
  assert.equal(loadConfig({ STATEMENT_FILES_KEPT_DAYS: '0' }).statementFilesKeptDays, 0);
  assert.equal(loadConfig({ STATEMENT_FILES_KEPT_DAYS: '366' }).statementFilesKeptDays, 366);
  for (const v of ['-1', '367', '1.5', 'a month']) {
    assert.throws(() => loadConfig({ STATEMENT_FILES_KEPT_DAYS: v }), /STATEMENT_FILES_KEPT_DAYS/);
  }
});
