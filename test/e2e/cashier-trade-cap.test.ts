/**
 * The cap of JSAPI trades per attempt (MAX_JSAPI_TRADES, one per WeChat user who opens the link)
 * holds when WeChat users come back from WeChat's authorization at the same moment: real requests
 * to two instances of the service in live mode on one database, the WeChat Pay simulator's
 * authorization (a user per `sim_wechat_user` cookie).
 *
 * To make the moment the same for every request, the test holds the attempt's row (FOR UPDATE, in
 * a connection of its own) while the callbacks arrive: each request then waits at the database
 * with its count taken or to be taken (an insert into provider_trades waits there for its foreign
 * key's check), and all go on together when the row is released. Counted without the attempt's
 * lock, every one of them would see the trades of before and record its own.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import type { BuiltApp } from '../../src/app.ts';
import { MAX_JSAPI_TRADES } from '../../src/usecases/cashier-trades.ts';
import { call, orderBody } from '../helpers/app.ts';
import { FakeClock, reopenApp, waitFor } from '../helpers/events.ts';
import { type LiveService, startLiveService } from '../helpers/live.ts';

const WECHAT_UA =
  'Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 MicroMessenger/8.0.47 NetType/WIFI';

describe('the cap of JSAPI trades per attempt under concurrent WeChat users (live mode, simulator)', () => {
  const clock = new FakeClock();
  let live: LiveService;
  let base: string;
  /** A second instance on the same database (and the same simulators). */
  let other: BuiltApp;
  let otherBase: string;

  before(async () => {
    live = await startLiveService(clock, '/hooks/cap');
    base = live.t.config.publicBaseUrl;
    other = await reopenApp(live.t, clock);
    await other.server.listen({ port: 0, host: '127.0.0.1' });
    otherBase = `http://127.0.0.1:${(other.server.server.address() as AddressInfo).port}`;
  });
  after(async () => {
    await other?.close();
    await live?.stop();
  });

  const redirect = async (url: string, headers: Record<string, string> = {}) => {
    const res = await fetch(url, { redirect: 'manual', headers: { 'user-agent': WECHAT_UA, ...headers } });
    await res.arrayBuffer();
    return { status: res.status, location: res.headers.get('location') };
  };

  /** WeChat user `user` opens the page's authorization: the callback WeChat sends the browser back to (not yet followed). */
  async function authorized(token: string, user: string): Promise<string> {
    const start = await redirect(`${base}/cashier/${token}/wechat/authorize`);
    assert.equal(start.status, 302, 'to WeChat (the simulator)');
    const back = await redirect(start.location!.replace(/#.*$/, ''), { cookie: `sim_wechat_user=${user}` });
    assert.equal(back.status, 302, 'back to the cashier with a code');
    assert.match(back.location!, /\/wechat\/callback\?code=\w+&state=\w+$/);
    return back.location!;
  }

  test(`${MAX_JSAPI_TRADES + 4} WeChat users come back at once, through two instances: ${MAX_JSAPI_TRADES} JSAPI trades, the others refused`, async () => {
    const { t, m } = live;
    const created = await call(t, m, 'POST', '/api/open/v1/payments', orderBody({ channel: 'WECHAT_H5', amountFen: 1500 }), {
      timestamp: String(Math.floor(clock.now() / 1000)),
    });
    assert.equal(created.statusCode, 201, created.body);
    const order = created.json() as { openOrderId: string; payUrl: string };
    const token = new URL(order.payUrl).pathname.split('/').at(-1)!;
    const attemptId = (await t.admin('GET', `/orders/${order.openOrderId}`)).json().attempts[0].attemptId as string;

    // One user first, so that the race is for the places left, then the others all at once.
    const users = Array.from({ length: MAX_JSAPI_TRADES + 4 }, (_, i) => `buyer-${i}`);
    const callbacks = await Promise.all(users.map((u) => authorized(token, u)));
    const first = await redirect(callbacks[0]!);
    assert.match(first.location!, /[?&]payer=[\w-]{22}(&|$)/);

    const holder = new pg.Client({ connectionString: t.config.databaseUrl! });
    await holder.connect();
    let answers: { status: number; location: string | null }[];
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM attempts WHERE id = $1 FOR UPDATE', [attemptId]);
      // Every other one through the second instance.
      const racing = callbacks.slice(1).map((url, i) => redirect(i % 2 === 0 ? url : url.replace(base, otherBase)));
      await waitFor('every request waiting for the attempt at the database', async () => {
        // (The activity is read afresh: within a transaction it is otherwise the first read's snapshot.)
        await holder.query('SELECT pg_stat_clear_snapshot()');
        const r = await holder.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity
            WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()`,
        );
        return r.rows[0]!.n >= racing.length;
      });
      await holder.query('COMMIT');
      answers = await Promise.all(racing);
    } finally {
      await holder.end();
    }

    const payers = answers.filter((a) => /[?&]payer=[\w-]{22}(&|$)/.test(a.location ?? ''));
    const refused = answers.filter((a) => /[?&]oauth=failed(&|$)/.test(a.location ?? ''));
    assert.ok(
      answers.every((a) => a.status === 303),
      JSON.stringify(answers.map((a) => a.status)),
    );
    assert.equal(payers.length, MAX_JSAPI_TRADES - 1, 'the places left after the first user');
    assert.equal(refused.length, users.length - MAX_JSAPI_TRADES);
    const trades = (await t.admin('GET', `/orders/${order.openOrderId}`)).json().attempts[0].trades as { product: string }[];
    assert.equal(trades.filter((x) => x.product === 'JSAPI').length, MAX_JSAPI_TRADES);
    // The users with a place each have their own trade; one of them coming back again takes no new place.
    const again = await redirect(await authorized(token, 'buyer-0'));
    assert.match(again.location!, /[?&]payer=[\w-]{22}(&|$)/);
    assert.equal((await t.admin('GET', `/orders/${order.openOrderId}`)).json().attempts[0].trades.length, MAX_JSAPI_TRADES);
  });
});
