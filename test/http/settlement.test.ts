/**
 * Read settlement (seed "Settlement view", "Read settlement"; decisions.md section 6 "Settlement
 * view body") over signed HTTP, and the back-office validation of accounts and allocations that
 * feeds it (seed "Limits": 2-4 ratio accounts, 0 < shareBps < 10000, total 10000).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import { type Merchant, type TestApp, call, provision, startTestApp } from '../helpers/app.ts';

const URL = '/api/open/v1/settlement/accounts';
const ACCOUNT_KEYS = ['accountId', 'cardLast4', 'entityName', 'entityType', 'merchantNo'];

let t: TestApp;
before(async () => {
  t = await startTestApp();
});
after(() => t.stop());

let cardSeq = 0;
/** A distinct 19-digit card number whose digits do not otherwise appear in a response. */
function cardNumber(): string {
  cardSeq++;
  return `62220${String(Date.now()).slice(-8)}${String(cardSeq).padStart(2, '0')}7391`.slice(0, 19);
}

async function addAccount(
  mch: Merchant,
  o: { entityType?: string; entityName?: string; merchantNo?: string; cardNumber?: string; agreedCeilingFen?: number } = {},
): Promise<{ accountId: string; cardNumber: string; body: Record<string, unknown> }> {
  const body = {
    entityType: o.entityType ?? 'CORPORATE',
    entityName: o.entityName ?? 'Acme Trading Co., Ltd.',
    merchantNo: o.merchantNo ?? `MN${cardSeq}${Date.now().toString(36)}`,
    cardNumber: o.cardNumber ?? cardNumber(),
    ...(o.agreedCeilingFen !== undefined ? { agreedCeilingFen: o.agreedCeilingFen } : {}),
  };
  const r = await t.admin('POST', `/merchants/${mch.merchantId}/settlement-accounts`, body);
  assert.equal(r.statusCode, 201, r.body);
  assert.ok(!r.body.includes(body.cardNumber), 'the admin answer never echoes the full card number');
  return { accountId: r.json().accountId, cardNumber: body.cardNumber, body };
}

function putAllocation(mch: Merchant, body: unknown): Promise<LightMyRequestResponse> {
  return t.admin('PUT', `/merchants/${mch.merchantId}/allocation`, body);
}

async function read(mch: Merchant, query = '', o: Parameters<typeof call>[5] = {}, body?: unknown): Promise<LightMyRequestResponse> {
  const r = await call(t, mch, 'GET', `${URL}${query}`, body, o);
  assert.equal(r.statusCode, 200, r.body);
  assert.equal(r.json().requestId, r.headers['x-svc-request-id']);
  assert.ok(r.headers['x-svc-response-sign'], 'the settlement view is a signed response');
  return r;
}

function withoutRequestId(r: LightMyRequestResponse): Record<string, unknown> {
  const { requestId: _omit, ...rest } = r.json() as Record<string, unknown>;
  return rest;
}

describe('settlement view', () => {
  test('no accounts and no allocation: empty accounts, mode null, no participants, no ratios, policy null', async () => {
    const m = await provision(t);
    const r = await read(m);
    assert.deepEqual(withoutRequestId(r), { accounts: [], mode: null, participants: [], unavailablePolicy: null });
  });

  test('accounts without an allocation: listed, allocation fields stay empty', async () => {
    const m = await provision(t, { entityType: 'INDIVIDUAL' });
    const a = await addAccount(m, { entityType: 'INDIVIDUAL', entityName: '张三', merchantNo: 'MNO_zhangsan_01' });
    const r = await read(m);
    const b = r.json();
    assert.deepEqual(b.accounts, [
      {
        accountId: a.accountId,
        entityType: 'INDIVIDUAL',
        entityName: '张三',
        merchantNo: 'MNO_zhangsan_01',
        cardLast4: a.cardNumber.slice(-4),
      },
    ]);
    assert.equal(b.mode, null);
    assert.deepEqual(b.participants, []);
    assert.equal(b.unavailablePolicy, null);
    assert.ok(!('ratios' in b));
  });

  test('SINGLE: accounts with the five fields only, the last 4 card digits, never the full number', async () => {
    const m = await provision(t);
    const a = await addAccount(m, { entityType: 'CORPORATE', entityName: 'Acme Ltd', merchantNo: 'MN-0001' });
    const b2 = await addAccount(m, { entityType: 'INDIVIDUAL', entityName: 'Li Si', merchantNo: 'MN-0002', agreedCeilingFen: 800_000 });
    const put = await putAllocation(m, { mode: 'SINGLE', participants: [a.accountId], unavailablePolicy: 'FAIL' });
    assert.equal(put.statusCode, 200, put.body);
    const r = await read(m);
    const b = r.json();
    assert.deepEqual(Object.keys(b).sort(), ['accounts', 'mode', 'participants', 'requestId', 'unavailablePolicy']);
    assert.equal(b.mode, 'SINGLE');
    assert.deepEqual(b.participants, [a.accountId]);
    assert.equal(b.unavailablePolicy, 'FAIL');
    assert.equal(b.accounts.length, 2);
    for (const acc of b.accounts) assert.deepEqual(Object.keys(acc).sort(), ACCOUNT_KEYS);
    const byId = new Map(b.accounts.map((x: { accountId: string }) => [x.accountId, x]));
    assert.deepEqual(byId.get(a.accountId), {
      accountId: a.accountId,
      entityType: 'CORPORATE',
      entityName: 'Acme Ltd',
      merchantNo: 'MN-0001',
      cardLast4: a.cardNumber.slice(-4),
    });
    assert.equal((byId.get(b2.accountId) as { cardLast4: string }).cardLast4, b2.cardNumber.slice(-4));
    // No full card number anywhere in the raw bytes, nor its first 12 digits, nor any agreed ceiling.
    for (const card of [a.cardNumber, b2.cardNumber]) {
      assert.ok(!r.body.includes(card), 'full card number leaked');
      assert.ok(!r.body.includes(card.slice(0, 12)), 'card prefix leaked');
    }
    assert.ok(!r.body.includes('800000'));
    assert.ok(!/cardNumber|agreedCeiling/i.test(r.body));
  });

  test('PRIORITY keeps the participants in their configured order', async () => {
    const m = await provision(t);
    const a = await addAccount(m);
    const b = await addAccount(m);
    const c = await addAccount(m);
    const order = [c.accountId, a.accountId, b.accountId];
    const put = await putAllocation(m, { mode: 'PRIORITY', participants: order, unavailablePolicy: 'NEXT_AVAILABLE' });
    assert.equal(put.statusCode, 200, put.body);
    const r = (await read(m)).json();
    assert.equal(r.mode, 'PRIORITY');
    assert.deepEqual(r.participants, order);
    assert.equal(r.unavailablePolicy, 'NEXT_AVAILABLE');
    assert.ok(!('ratios' in r), 'ratios only with RATIO');
  });

  test('RATIO: ratios [{accountId, shareBps}] in participant order, summing to 10000', async () => {
    const m = await provision(t);
    const accs = [await addAccount(m), await addAccount(m), await addAccount(m), await addAccount(m)];
    const participants = [accs[2]!.accountId, accs[0]!.accountId, accs[3]!.accountId, accs[1]!.accountId];
    // Ratios sent in another order than the participants.
    const shares = new Map([
      [accs[0]!.accountId, 2500],
      [accs[1]!.accountId, 1],
      [accs[2]!.accountId, 7000],
      [accs[3]!.accountId, 499],
    ]);
    const put = await putAllocation(m, {
      mode: 'RATIO',
      participants,
      ratios: [...shares].map(([accountId, shareBps]) => ({ accountId, shareBps })),
      unavailablePolicy: 'REDISTRIBUTE',
    });
    assert.equal(put.statusCode, 200, put.body);
    const r = await read(m);
    const b = r.json();
    assert.deepEqual(Object.keys(b).sort(), ['accounts', 'mode', 'participants', 'ratios', 'requestId', 'unavailablePolicy']);
    assert.equal(b.mode, 'RATIO');
    assert.deepEqual(b.participants, participants);
    assert.deepEqual(
      b.ratios,
      participants.map((p) => ({ accountId: p, shareBps: shares.get(p) })),
    );
    for (const x of b.ratios) assert.deepEqual(Object.keys(x), ['accountId', 'shareBps']);
    assert.equal(
      b.ratios.reduce((s: number, x: { shareBps: number }) => s + x.shareBps, 0),
      10000,
    );
    assert.equal(b.unavailablePolicy, 'REDISTRIBUTE');
    // Switching back to SINGLE removes the ratios from the view.
    assert.equal(
      (await putAllocation(m, { mode: 'SINGLE', participants: [accs[0]!.accountId], unavailablePolicy: 'FAIL' })).statusCode,
      200,
    );
    assert.ok(!('ratios' in (await read(m)).json()));
  });

  test('another merchant sees only its own accounts and allocation', async () => {
    const m1 = await provision(t);
    const m2 = await provision(t);
    const a = await addAccount(m1);
    assert.equal((await putAllocation(m1, { mode: 'SINGLE', participants: [a.accountId], unavailablePolicy: 'FAIL' })).statusCode, 200);
    const r = await read(m2);
    assert.deepEqual(withoutRequestId(r), { accounts: [], mode: null, participants: [], unavailablePolicy: null });
    assert.ok(!r.body.includes(a.accountId));
  });

  test('read-only: query parameters and a JSON body change nothing and are answered normally', async () => {
    const m = await provision(t);
    const a = await addAccount(m);
    const b = await addAccount(m);
    const put = await putAllocation(m, {
      mode: 'RATIO',
      participants: [a.accountId, b.accountId],
      ratios: [
        { accountId: a.accountId, shareBps: 6000 },
        { accountId: b.accountId, shareBps: 4000 },
      ],
      unavailablePolicy: 'FAIL',
    });
    assert.equal(put.statusCode, 200, put.body);
    const baseline = withoutRequestId(await read(m));
    const allocationBefore = (await t.admin('GET', `/merchants/${m.merchantId}/allocation`)).json();
    const queries = [
      '?mode=SINGLE',
      `?mode=SINGLE&participants=${b.accountId}&unavailablePolicy=NEXT_AVAILABLE`,
      `?ratios=${encodeURIComponent(JSON.stringify([{ accountId: a.accountId, shareBps: 10000 }]))}`,
      '?cardNumber=6222020000000000000&accountId=x',
      '?mode=RATIO&mode=SINGLE&write=true',
    ];
    for (const q of queries) assert.deepEqual(withoutRequestId(await read(m, q)), baseline, q);
    // A valid JSON body sent anyway is ignored.
    assert.deepEqual(
      withoutRequestId(await read(m, '', { contentType: 'application/json' }, { mode: 'SINGLE', participants: [b.accountId] })),
      baseline,
    );
    assert.deepEqual((await t.admin('GET', `/merchants/${m.merchantId}/allocation`)).json(), allocationBefore);
  });

  test('no write method on the settlement path: 405 in the platform envelope', async () => {
    const m = await provision(t);
    for (const method of ['POST', 'PUT', 'PATCH', 'DELETE']) {
      const r = await call(t, m, method, URL, { mode: 'SINGLE' });
      assert.equal(r.statusCode, 405, `${method}: ${r.body}`);
      assert.equal(r.json().error, 'METHOD_NOT_ALLOWED');
      assert.ok(!('code' in r.json()));
    }
    assert.deepEqual(withoutRequestId(await read(m)), { accounts: [], mode: null, participants: [], unavailablePolicy: null });
  });
});

describe('back-office validation feeding the view (a rejected request changes nothing)', () => {
  let m: Merchant;
  let stranger: Merchant;
  let ids: string[];
  let baseline: Record<string, unknown>;
  before(async () => {
    m = await provision(t);
    stranger = await provision(t);
    ids = [];
    for (let i = 0; i < 5; i++) ids.push((await addAccount(m)).accountId);
    const ok = await putAllocation(m, {
      mode: 'RATIO',
      participants: [ids[0], ids[1]],
      ratios: [
        { accountId: ids[0], shareBps: 5000 },
        { accountId: ids[1], shareBps: 5000 },
      ],
      unavailablePolicy: 'FAIL',
    });
    assert.equal(ok.statusCode, 200, ok.body);
    baseline = withoutRequestId(await read(m));
  });

  function ratio(shares: number[], participants = ids.slice(0, shares.length)): Record<string, unknown> {
    return {
      mode: 'RATIO',
      participants,
      ratios: shares.map((shareBps, i) => ({ accountId: participants[i], shareBps })),
      unavailablePolicy: 'FAIL',
    };
  }

  test('allocations refused with 400: sums, share bounds, counts, foreign accounts, shape', async () => {
    const foreign = (await addAccount(stranger)).accountId;
    const cases: [string, unknown][] = [
      ['sum 9999', ratio([5000, 4999])],
      ['sum 10001', ratio([5000, 5001])],
      ['a share of 10000 (and one of 0)', ratio([10000, 0])],
      ['a share of 0', ratio([0, 5000, 5000])],
      ['a negative share', ratio([-1, 10001])],
      ['a decimal share', ratio([5000.5, 4999.5])],
      [
        'a share as a string',
        {
          ...ratio([5000, 5000]),
          ratios: [
            { accountId: ids[0], shareBps: '5000' },
            { accountId: ids[1], shareBps: 5000 },
          ],
        },
      ],
      ['5 accounts', ratio([2000, 2000, 2000, 2000, 2000])],
      ['1 account', ratio([10000])],
      ['RATIO without ratios', { mode: 'RATIO', participants: [ids[0], ids[1]], unavailablePolicy: 'FAIL' }],
      ['ratios not matching the participants', { ...ratio([5000, 5000]), participants: [ids[0], ids[2]] }],
      [
        'an account repeated in ratios',
        {
          ...ratio([5000, 5000]),
          ratios: [
            { accountId: ids[0], shareBps: 5000 },
            { accountId: ids[0], shareBps: 5000 },
          ],
        },
      ],
      ['an account of another merchant', ratio([5000, 5000], [ids[0]!, foreign])],
      ['an unknown account', ratio([5000, 5000], [ids[0]!, 'sa_doesnotexist'])],
      ['SINGLE with an account of another merchant', { mode: 'SINGLE', participants: [foreign], unavailablePolicy: 'FAIL' }],
      ['SINGLE with two accounts', { mode: 'SINGLE', participants: [ids[0], ids[1]], unavailablePolicy: 'FAIL' }],
      ['ratios with SINGLE', { ...ratio([5000, 5000]), mode: 'SINGLE' }],
      ['unknown mode', { ...ratio([5000, 5000]), mode: 'EQUAL' }],
      ['unknown policy', { ...ratio([5000, 5000]), unavailablePolicy: 'RETRY' }],
      ['no participants', { mode: 'PRIORITY', participants: [], unavailablePolicy: 'FAIL' }],
      ['unknown field', { ...ratio([5000, 5000]), note: 'x' }],
      ['missing unavailablePolicy', { mode: 'SINGLE', participants: [ids[0]] }],
    ];
    for (const [name, body] of cases) {
      const r = await putAllocation(m, body);
      assert.equal(r.statusCode, 400, `${name}: ${r.body}`);
      assert.equal(r.json().code, 'ADMIN_VALIDATION_FAILED', name);
      assert.deepEqual(Object.keys(r.json()).sort(), ['code', 'message'], name);
    }
    assert.deepEqual(withoutRequestId(await read(m)), baseline, 'no rejected allocation reached the view');
  });

  test('the boundaries that are allowed: 1/9999, and four accounts', async () => {
    assert.equal((await putAllocation(m, ratio([1, 9999]))).statusCode, 200);
    assert.deepEqual(
      (await read(m)).json().ratios.map((x: { shareBps: number }) => x.shareBps),
      [1, 9999],
    );
    assert.equal((await putAllocation(m, ratio([2500, 2500, 2500, 2500]))).statusCode, 200);
    assert.equal((await read(m)).json().ratios.length, 4);
    // Back to the baseline for the other tests.
    assert.equal((await putAllocation(m, ratio([5000, 5000]))).statusCode, 200);
    assert.deepEqual(withoutRequestId(await read(m)), baseline);
  });

  test('settlement accounts refused with 400: card numbers with letters or of the wrong length, bad fields', async () => {
    const good = { entityType: 'CORPORATE', entityName: 'Acme', merchantNo: 'MN_1', cardNumber: '6222021234567890123' };
    const cases: [string, unknown][] = [
      ['card with letters', { ...good, cardNumber: '62220212345678901AB' }],
      ['card with spaces', { ...good, cardNumber: '6222 0212 3456 7890' }],
      ['card with dashes', { ...good, cardNumber: '6222-0212-3456-7890' }],
      ['card of 11 digits', { ...good, cardNumber: '62220212345' }],
      ['card of 20 digits', { ...good, cardNumber: '62220212345678901234' }],
      ['card as a number', { ...good, cardNumber: 6222021234567890 }],
      ['unknown entity type', { ...good, entityType: 'PARTNERSHIP' }],
      ['empty entity name', { ...good, entityName: '' }],
      ['missing merchantNo', { entityType: 'CORPORATE', entityName: 'Acme', cardNumber: '6222021234567890123' }],
      ['unknown field', { ...good, cardLast4: '0123' }],
      ['ceiling 0', { ...good, agreedCeilingFen: 0 }],
    ];
    for (const [name, body] of cases) {
      const r = await t.admin('POST', `/merchants/${m.merchantId}/settlement-accounts`, body);
      assert.equal(r.statusCode, 400, `${name}: ${r.body}`);
      assert.equal(r.json().code, 'ADMIN_VALIDATION_FAILED');
      assert.ok(!r.body.includes('6222021234567890123'), `${name}: the card number is not echoed in the error`);
    }
    const view = await read(m);
    assert.deepEqual(withoutRequestId(view), baseline, 'no rejected account reached the view');
  });
});
