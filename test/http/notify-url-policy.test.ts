/**
 * Loopback notify URLs are allowed by an explicit setting only (WEBHOOK_ALLOW_LOOPBACK; its default
 * follows PROVIDER, never NODE_ENV), and every instance on one database applies the same rule: an
 * instance started with another rule while one with the recorded rule runs is refused at start, so
 * it cannot deliver the others' events to its own host.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { buildApp } from '../../src/app.ts';
import { ConfigError } from '../../src/config/config.ts';
import { type Merchant, type TestApp, call, orderBody, provision, startTestApp } from '../helpers/app.ts';
import { Receiver } from '../helpers/events.ts';

let strict: TestApp;
let rx: Receiver;
let m: Merchant;
before(async () => {
  rx = await Receiver.start();
  // No NODE_ENV=production here: the setting alone decides.
  strict = await startTestApp({ WEBHOOK_ALLOW_LOOPBACK: 'false', NODE_ENV: '' });
  m = await provision(strict);
});
after(async () => {
  await rx.close();
  await strict.stop();
});

test('with WEBHOOK_ALLOW_LOOPBACK=false a loopback notifyUrl is refused, whatever NODE_ENV says', async () => {
  const r = await strict.admin('PATCH', `/apps/${m.appId}`, { notifyUrl: rx.url('/hook') });
  assert.equal(r.statusCode, 400, r.body);
  assert.match(r.body, /notifyUrl/);
  assert.equal(strict.config.webhookAllowLoopback, false);
});

test('an event of an app whose stored notifyUrl is loopback is not delivered there by an instance that refuses loopback', async () => {
  // As if stored by an instance with another rule.
  await strict.svc.db.query('UPDATE apps SET notify_url = $1 WHERE id = $2', [rx.url('/stored'), m.appId]);
  const body = orderBody();
  const c = await call(strict, m, 'POST', '/api/open/v1/payments', body);
  assert.equal(c.statusCode, 201, c.body);
  assert.equal((await strict.sandbox('POST', `/payments/${c.json().openOrderId as string}/pay`)).statusCode, 200);
  for (let i = 0; i < 3; i++) await strict.workers.tick();
  assert.equal(rx.at('/stored').length, 0, 'nothing reached the loopback receiver');
  const events = (await strict.admin('GET', `/orders/${c.json().openOrderId as string}`)).json().events as { eventId: string }[];
  assert.equal(events.length, 1);
  const v = (await strict.admin('GET', `/events/${events[0]!.eventId}`)).json();
  assert.ok(v.deliveries.length >= 1, 'a delivery was tried');
  assert.notEqual(v.status, 'DELIVERED');
  assert.ok(
    v.deliveries.every((d: { error: string | null }) => d.error !== null),
    JSON.stringify(v.deliveries),
  );
});

test('an instance with another rule is refused at start while one with the recorded rule runs; once none runs, it starts', async () => {
  const lax = { ...strict.config, webhookAllowLoopback: true };
  await assert.rejects(buildApp(lax), (err: unknown) => {
    assert.ok(err instanceof ConfigError, String(err));
    assert.match(err.message, /WEBHOOK_ALLOW_LOOPBACK/);
    return true;
  });
  // The same rule starts beside it.
  const twin = await buildApp(strict.config);
  await twin.close();

  await strict.close();
  const after = await buildApp(lax);
  try {
    const r = await after.server.inject({
      method: 'PATCH',
      url: `/api/admin/v1/apps/${m.appId}`,
      headers: { authorization: `Bearer ${after.adminToken}`, 'content-type': 'application/json' },
      payload: JSON.stringify({ notifyUrl: rx.url('/hook') }),
    });
    assert.equal(r.statusCode, 200, r.body);
  } finally {
    await after.close();
  }
});
