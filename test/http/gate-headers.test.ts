/**
 * Step 3 of the gate: the six headers, literally (seed "Authentication"; decisions.md sections 1-2).
 * Every boundary: shortest, longest, one past each end, each invalid character class, repeats
 * (same and different case), absence; the time window at exactly +-300 s and +-301 s.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type Merchant, type SignOptions, type TestApp, merchantKeyPair, provision, signedHeaders, startTestApp } from '../helpers/app.ts';
import { OPEN, expectRejection, expectSuccess, listen, rawHead, rawRequest, send } from './gate-kit.test.ts';

let t: TestApp;
let m: Merchant;
/** When set, the service's clock (seconds window of step 4). */
let frozenMs: number | null = null;

const SETTLEMENT = `${OPEN}/settlement/accounts`;
const VISIBLE = Array.from({ length: 0x7e - 0x21 + 1 }, (_, i) => String.fromCharCode(0x21 + i)).join(''); // '!'..'~'

before(async () => {
  t = await startTestApp({ AUTH_FAILURE_LIMIT: '100000' }, { clock: { now: () => frozenMs ?? Date.now() } });
  m = await provision(t);
});
after(() => t.stop());

const ok = async (o: SignOptions, label: string) => {
  const s = await send(t, m, 'GET', SETTLEMENT, undefined, o);
  assert.equal(s.r.statusCode, 200, `${label}: ${s.r.body}`);
  await expectSuccess(t, s.r, s.requestId, 200);
};
const headerInvalid = async (o: SignOptions, label: string) => {
  const s = await send(t, m, 'GET', SETTLEMENT, undefined, o);
  assert.equal(s.r.statusCode, 400, `${label}: ${s.r.body}`);
  const b = await expectRejection(t, s.r, { status: 400, code: 'OPEN_API_HEADER_INVALID', step: 3, sentRequestId: s.requestId });
  return b;
};
const authFailed = async (o: SignOptions, label: string) => {
  const s = await send(t, m, 'GET', SETTLEMENT, undefined, o);
  assert.equal(s.r.statusCode, 401, `${label}: ${s.r.body}`);
  await expectRejection(t, s.r, { status: 401, code: 'OPEN_API_AUTH_FAILED', step: 4, sentRequestId: s.requestId });
};

/** Overrides one header after signing (the value is then what the server sees). */
const withHeader = (name: string, value: string): SignOptions => ({ headers: { [name]: value } });

const ALL = ['X-SVC-App-Id', 'X-SVC-Timestamp', 'X-SVC-Nonce', 'X-SVC-Key-Id', 'X-SVC-Request-Id', 'X-SVC-Sign'];

describe('presence', () => {
  test('each of the six headers missing -> 400 with one message that names no header', async () => {
    const messages = new Set<string>();
    for (const h of ALL) {
      const b = await headerInvalid({ omit: [h] }, `without ${h}`);
      messages.add(String(b.message));
      for (const name of ALL) assert.ok(!String(b.message).toLowerCase().includes(name.toLowerCase()), `${b.message} names ${name}`);
    }
    assert.equal(messages.size, 1, 'the same message whichever header is missing');
    const none = await t.server.inject({ method: 'GET', url: SETTLEMENT });
    await expectRejection(t, none, { status: 400, code: 'OPEN_API_HEADER_INVALID', step: 3 });
  });

  test('each header present but empty -> 400', async () => {
    for (const h of ALL) await headerInvalid(withHeader(h, ''), `empty ${h}`);
  });

  test('a malformed header gives the same message as a missing one', async () => {
    const missing = await headerInvalid({ omit: ['X-SVC-Nonce'] }, 'missing');
    const bad = await headerInvalid(withHeader('X-SVC-Timestamp', 'abc'), 'malformed');
    assert.equal(bad.message, missing.message);
  });
});

describe('repeated headers', () => {
  test('each header sent twice (same case, same or different value) -> 400 naming it', async () => {
    for (const h of ALL) {
      for (const same of [true, false]) {
        const hs = signedHeaders(m, 'GET', SETTLEMENT, '');
        const v = hs[h]!;
        const r = await t.server.inject({
          method: 'GET',
          url: SETTLEMENT,
          headers: { ...hs, [h]: [v, same ? v : `${v}x`] },
          remoteAddress: '127.0.0.1',
        });
        const b = await expectRejection(t, r, {
          status: 400,
          code: 'OPEN_API_HEADER_INVALID',
          step: 3,
          sentRequestId: hs['X-SVC-Request-Id'],
        });
        assert.match(String(b.message), new RegExp(h.replace(/-/g, '\\-'), 'i'), `the message names ${h}: ${b.message}`);
      }
    }
  });

  test('a repeat in a different letter case, on a real socket -> 400 naming it', async () => {
    const port = await listen(t);
    for (const h of ALL) {
      const hs = signedHeaders(m, 'GET', SETTLEMENT, '');
      const list: [string, string][] = Object.entries(hs);
      list.push([h.toLowerCase(), hs[h]!]);
      const r = await rawRequest(port, rawHead('GET', SETTLEMENT, list));
      const b = await expectRejection(t, r, {
        status: 400,
        code: 'OPEN_API_HEADER_INVALID',
        step: 3,
        sentRequestId: hs['X-SVC-Request-Id'],
      });
      assert.ok(String(b.message).includes(h), `the message names ${h}: ${b.message}`);
    }
  });

  test('header names are case-insensitive on a real socket (one occurrence each)', async () => {
    const port = await listen(t);
    const hs = signedHeaders(m, 'GET', SETTLEMENT, '');
    const list: [string, string][] = Object.entries(hs).map(([k, v], i) => [i % 2 ? k.toUpperCase() : k.toLowerCase(), v]);
    const r = await rawRequest(port, rawHead('GET', SETTLEMENT, list));
    await expectSuccess(t, r, hs['X-SVC-Request-Id']!, 200);
  });
});

describe('X-SVC-App-Id: svcop_ + 16 alphanumerics', () => {
  test('the provisioned id passes; form-valid unknown ids are 401', async () => {
    assert.match(m.appId, /^svcop_[A-Za-z0-9]{16}$/);
    await authFailed({ appId: 'svcop_' + 'A'.repeat(16) }, 'unknown upper');
    await authFailed({ appId: 'svcop_' + '0'.repeat(16) }, 'unknown digits');
    await authFailed({ appId: 'svcop_' + 'z'.repeat(16) }, 'unknown lower');
  });

  test('one short, one long, prefix case, other characters -> 400', async () => {
    const tail = m.appId.slice(6);
    for (const [label, v] of [
      ['15', 'svcop_' + tail.slice(1)],
      ['17', m.appId + 'a'],
      ['prefix upper', 'SVCOP_' + tail],
      ['prefix mixed', 'Svcop_' + tail],
      ['no prefix', tail],
      ['other prefix', 'svcap_' + tail],
      ['underscore', 'svcop_' + tail.slice(1) + '_'],
      ['hyphen', 'svcop_' + tail.slice(1) + '-'],
      ['space', 'svcop_' + tail.slice(1) + ' '],
      ['non-ASCII', 'svcop_' + tail.slice(1) + 'é'],
      ['fullwidth digit', 'svcop_' + tail.slice(1) + '\uff11'],
      ['leading space', ' ' + m.appId],
    ] as const) {
      await headerInvalid({ appId: v }, label);
    }
  });
});

describe('X-SVC-Timestamp: at most 10 digits, within 300 s', () => {
  test('10 digits pass; 11 digits (a leading zero) are 400 even though in the window', async () => {
    const now = String(Math.floor(Date.now() / 1000));
    assert.equal(now.length, 10);
    await ok({ timestamp: now }, '10 digits');
    await headerInvalid({ timestamp: `0${now}` }, '11 digits');
    await headerInvalid({ timestamp: '1'.repeat(11) }, '11 ones');
  });

  test('other forms -> 400; short forms are form-valid and fail the window (401)', async () => {
    const now = Math.floor(Date.now() / 1000);
    for (const v of ['', '-1', `+${now}`, `${now}.0`, `${now}ms`, `0x${now.toString(16)}`, ` ${now}`, `${now}e0`, '１２３']) {
      await headerInvalid({ timestamp: v }, `timestamp ${JSON.stringify(v)}`);
    }
    await authFailed({ timestamp: '1' }, '1 digit');
    await authFailed({ timestamp: '0000000000' }, 'ten zeros');
    await authFailed({ timestamp: '9999999999' }, 'far future');
  });

  test('exactly 300 s either side passes; 301 s either side is 401', async () => {
    // The middle of a second still to come: never before the platform key the app generated at its
    // start (a key signs from its activation time on the service's clock).
    const base = Math.ceil(Date.now() / 1000) * 1000 + 500;
    frozenMs = base;
    try {
      const sec = base / 1000 - 0.5;
      await ok({ timestamp: String(sec - 300) }, '-300');
      await ok({ timestamp: String(sec + 300) }, '+300');
      await authFailed({ timestamp: String(sec - 301) }, '-301');
      await authFailed({ timestamp: String(sec + 301) }, '+301');
      // The service's clock is authoritative, also at the edge of a second.
      frozenMs = base + 499;
      await ok({ timestamp: String(sec - 300) }, '-300 late in the second');
    } finally {
      frozenMs = null;
    }
  });
});

describe('X-SVC-Nonce: 16-64 visible ASCII', () => {
  test('16 and 64 characters, and every visible character, pass', async () => {
    await ok({ nonce: 'n'.repeat(15) + '1' }, '16');
    await ok({ nonce: 'N'.repeat(63) + '2' }, '64');
    await ok({ nonce: VISIBLE.slice(0, 64) }, 'visible 1');
    await ok({ nonce: VISIBLE.slice(30) }, 'visible 2');
  });

  test('15 and 65 characters, whitespace, control, DEL and non-ASCII -> 400', async () => {
    for (const [label, v] of [
      ['15', 'a'.repeat(15)],
      ['65', 'b'.repeat(65)],
      ['space inside', 'abcdefgh ijklmnopq'],
      ['tab inside', 'abcdefgh\tijklmnopq'],
      ['control', 'abcdefgh\u0001ijklmnopq'],
      ['DEL', 'abcdefgh\u007fijklmnopq'],
      ['non-ASCII', 'abcdefghéijklmnopq'],
      ['latin-1 byte', 'abcdefgh\u00a0ijklmnopq'],
      ['emoji', 'abcdefgh\u{1F600}ijklmnop'],
      ['trailing space', 'abcdefghijklmnopq '],
    ] as const) {
      await headerInvalid({ nonce: v }, label);
    }
  });

  test('a non-ASCII byte in the nonce on a real socket -> 400', async () => {
    const port = await listen(t);
    const hs = signedHeaders(m, 'GET', SETTLEMENT, '');
    const head = Buffer.concat([
      Buffer.from(
        rawHead(
          'GET',
          SETTLEMENT,
          Object.entries(hs).filter(([k]) => k !== 'X-SVC-Nonce'),
        ).slice(0, -2),
        'latin1',
      ),
      Buffer.from('X-SVC-Nonce: abcdefgh'),
      Buffer.from([0xc3, 0xa9]),
      Buffer.from('ijklmnop\r\n\r\n'),
    ]);
    const r = await rawRequest(port, head.toString('latin1'));
    await expectRejection(t, r, { status: 400, code: 'OPEN_API_HEADER_INVALID', step: 3, sentRequestId: hs['X-SVC-Request-Id'] });
  });
});

describe('X-SVC-Key-Id: 1-128 visible ASCII', () => {
  test('1 and 128 characters and punctuation pass when registered', async () => {
    for (const keyId of ['k', 'K'.repeat(127) + '9', VISIBLE.slice(0, 40)]) {
      const r = await t.admin('POST', `/apps/${m.appId}/keys`, { keyId, publicKeyPem: merchantKeyPair().publicKeyPem });
      assert.equal(r.statusCode, 201, r.body);
      await ok({ keyId }, `key id of ${keyId.length}`);
    }
  });

  test('empty, 129 characters, space, non-ASCII -> 400; a form-valid unknown key id -> 401', async () => {
    await headerInvalid({ keyId: '' }, 'empty');
    await headerInvalid({ keyId: 'K'.repeat(129) }, '129');
    await headerInvalid({ keyId: 'key 1' }, 'space');
    await headerInvalid({ keyId: 'kéy-1' }, 'non-ASCII');
    await authFailed({ keyId: 'no-such-key' }, 'unknown');
  });
});

describe('X-SVC-Request-Id: 8-128 of A-Z a-z 0-9 . _ : -', () => {
  test('8 and 128 characters and every allowed class pass', async () => {
    await ok({ requestId: 'abcd1234' }, '8');
    await ok({ requestId: 'R'.repeat(127) + '1' }, '128');
    await ok({ requestId: 'aZ09._:-aZ09._:-' }, 'all classes');
  });

  test('7 and 129 characters and each other character class -> 400', async () => {
    await headerInvalid({ requestId: 'abc1234' }, '7');
    await headerInvalid({ requestId: 'R'.repeat(129) }, '129');
    for (const c of ['/', '+', '=', '!', '~', '@', ' ', '#', '%', 'é', '\u0001']) {
      await headerInvalid({ requestId: `req_1234${c}5678` }, `request id with ${JSON.stringify(c)}`);
    }
  });
});

describe('X-SVC-Sign: 64-1024 visible ASCII, Base64 checked by step 4', () => {
  test('63 and 1025 characters, space, non-ASCII -> 400', async () => {
    await headerInvalid({ sign: 'A'.repeat(63) }, '63');
    await headerInvalid({ sign: 'A'.repeat(1025) }, '1025');
    await headerInvalid({ sign: 'A'.repeat(100) + ' ' + 'A'.repeat(100) }, 'space');
    await headerInvalid({ sign: 'A'.repeat(100) + 'é' + 'A'.repeat(100) }, 'non-ASCII');
  });

  test('64 and 1024 characters and non-Base64 visible ASCII are form-valid -> 401', async () => {
    await authFailed({ sign: 'A'.repeat(64) }, '64');
    await authFailed({ sign: 'A'.repeat(1024) }, '1024');
    await authFailed({ sign: '!'.repeat(344) }, 'not Base64');
    await authFailed({ sign: VISIBLE.slice(0, 80) }, 'punctuation');
    const good = signedHeaders(m, 'GET', SETTLEMENT, '')['X-SVC-Sign']!;
    await authFailed({ sign: good.replace(/=+$/, '') }, 'padding removed');
    await authFailed(
      { sign: good.replace(/\+/g, '-').replace(/\//g, '_') + (good.includes('+') || good.includes('/') ? '' : 'AAAA') },
      'base64url',
    );
  });
});
