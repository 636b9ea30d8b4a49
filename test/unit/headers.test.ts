/**
 * checkSignedHeaders / isStrictBase64 (src/gate/headers.ts): step 3 of the gate on raw header
 * lists, against an independent reading of the seed's header table.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { SIGNED_HEADERS, checkSignedHeaders, isStrictBase64 } from '../../src/gate/headers.ts';

const VALID: Record<string, string> = {
  'X-SVC-App-Id': 'svcop_AbCdEfGh01234567',
  'X-SVC-Timestamp': '1795320000',
  'X-SVC-Nonce': '0123456789abcdef',
  'X-SVC-Key-Id': 'key-1',
  'X-SVC-Request-Id': 'req_0001',
  'X-SVC-Sign': 'A'.repeat(344),
};

const raw = (h: Record<string, string>, extra: [string, string][] = []): string[] => [...Object.entries(h).flat(), ...extra.flat()];

/** The seed's table, written independently of the module's regular expressions. */
const isVisible = (s: string) => [...s].every((c) => c.charCodeAt(0) >= 0x21 && c.charCodeAt(0) <= 0x7e && c.length === 1);
const SPEC: Record<string, (v: string) => boolean> = {
  'X-SVC-App-Id': (v) => v.length === 22 && v.startsWith('svcop_') && [...v.slice(6)].every((c) => /[A-Za-z0-9]/.test(c) && c.length === 1),
  'X-SVC-Timestamp': (v) => v.length >= 1 && v.length <= 10 && [...v].every((c) => c >= '0' && c <= '9'),
  'X-SVC-Nonce': (v) => v.length >= 16 && v.length <= 64 && isVisible(v),
  'X-SVC-Key-Id': (v) => v.length >= 1 && v.length <= 128 && isVisible(v),
  'X-SVC-Request-Id': (v) =>
    v.length >= 8 &&
    v.length <= 128 &&
    [...v].every((c) => 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-'.includes(c)),
  'X-SVC-Sign': (v) => v.length >= 64 && v.length <= 1024 && isVisible(v),
};

describe('checkSignedHeaders', () => {
  test('six valid headers, in any order and letter case, among others', () => {
    const r = checkSignedHeaders([
      'Host',
      'x',
      ...raw(VALID).map((s, i) => (i % 2 === 0 ? (i % 4 === 0 ? s.toLowerCase() : s.toUpperCase()) : s)),
      'Accept',
      '*/*',
    ]);
    assert.ok(r.ok);
    assert.deepEqual(r.headers, {
      appId: VALID['X-SVC-App-Id'],
      timestamp: VALID['X-SVC-Timestamp'],
      nonce: VALID['X-SVC-Nonce'],
      keyId: VALID['X-SVC-Key-Id'],
      requestId: VALID['X-SVC-Request-Id'],
      sign: VALID['X-SVC-Sign'],
    });
  });

  test('each one missing -> not ok, no name', () => {
    for (const name of Object.keys(VALID)) {
      const h = { ...VALID };
      delete h[name];
      assert.deepEqual(checkSignedHeaders(raw(h)), { ok: false, repeated: null });
    }
  });

  test('each one repeated (same value, other value, other case) -> the canonical name', () => {
    for (const name of Object.keys(VALID)) {
      for (const [n2, v2] of [
        [name, VALID[name]!],
        [name, 'other'],
        [name.toLowerCase(), VALID[name]!],
        [name.toUpperCase(), ''],
      ]) {
        assert.deepEqual(checkSignedHeaders(raw(VALID, [[n2!, v2!]])), { ok: false, repeated: name });
      }
    }
  });

  test('a repeat is named even when another header is malformed or missing', () => {
    const h: Record<string, string> = { ...VALID, 'X-SVC-Timestamp': 'bad' };
    delete h['X-SVC-Sign'];
    assert.deepEqual(checkSignedHeaders(raw(h, [['x-svc-nonce', VALID['X-SVC-Nonce']!]])), { ok: false, repeated: 'X-SVC-Nonce' });
  });

  test('look-alike names are other headers', () => {
    assert.equal(
      checkSignedHeaders(
        raw(VALID, [
          ['X-SVC-Nonce2', 'x'],
          ['X-SVC-Nonce ', 'x'],
          ['X_SVC_NONCE', 'x'],
        ]),
      ).ok,
      true,
    );
  });

  test('boundaries of every header', () => {
    const cases: [string, string, boolean][] = [
      ['X-SVC-App-Id', 'svcop_' + 'a'.repeat(16), true],
      ['X-SVC-App-Id', 'svcop_' + 'a'.repeat(15), false],
      ['X-SVC-App-Id', 'svcop_' + 'a'.repeat(17), false],
      ['X-SVC-App-Id', 'SVCOP_' + 'a'.repeat(16), false],
      ['X-SVC-App-Id', 'svcop_' + 'a'.repeat(15) + '_', false],
      ['X-SVC-Timestamp', '1', true],
      ['X-SVC-Timestamp', '9'.repeat(10), true],
      ['X-SVC-Timestamp', '9'.repeat(11), false],
      ['X-SVC-Timestamp', '', false],
      ['X-SVC-Timestamp', '-1', false],
      ['X-SVC-Nonce', '!'.repeat(16), true],
      ['X-SVC-Nonce', '~'.repeat(64), true],
      ['X-SVC-Nonce', 'a'.repeat(15), false],
      ['X-SVC-Nonce', 'a'.repeat(65), false],
      ['X-SVC-Nonce', 'a'.repeat(15) + ' ', false],
      ['X-SVC-Nonce', 'a'.repeat(15) + '\u00e9', false],
      ['X-SVC-Nonce', 'a'.repeat(15) + '\u007f', false],
      ['X-SVC-Key-Id', 'k', true],
      ['X-SVC-Key-Id', 'k'.repeat(128), true],
      ['X-SVC-Key-Id', '', false],
      ['X-SVC-Key-Id', 'k'.repeat(129), false],
      ['X-SVC-Request-Id', 'a.b_c:d-', true],
      ['X-SVC-Request-Id', 'r'.repeat(128), true],
      ['X-SVC-Request-Id', 'r'.repeat(7), false],
      ['X-SVC-Request-Id', 'r'.repeat(129), false],
      ['X-SVC-Request-Id', 'req_000/', false],
      ['X-SVC-Sign', '!'.repeat(64), true],
      ['X-SVC-Sign', 'A'.repeat(1024), true],
      ['X-SVC-Sign', 'A'.repeat(63), false],
      ['X-SVC-Sign', 'A'.repeat(1025), false],
    ];
    for (const [name, value, ok] of cases) {
      assert.equal(checkSignedHeaders(raw({ ...VALID, [name]: value })).ok, ok, `${name}=${JSON.stringify(value)}`);
      assert.equal(SPEC[name]!(value), ok, `spec of ${name}=${JSON.stringify(value)}`);
    }
  });

  test('property: the module agrees with the seed table for any value of any header', () => {
    const chars = fc.oneof(
      fc.integer({ min: 0x20, max: 0x7f }).map((c) => String.fromCharCode(c)),
      fc.constantFrom('\t', '\u00e9', '\u0000', '\u3000', '\ud83d\ude00', 's', 'v', 'c', 'o', 'p', '_'),
    );
    const value = fc.oneof(
      fc.string({ unit: chars, maxLength: 140 }),
      fc.string({ unit: chars, minLength: 1000, maxLength: 1030 }),
      fc.string({ unit: fc.constantFrom('a', 'Z', '0'), minLength: 14, maxLength: 18 }).map((s) => `svcop_${s}`),
    );
    fc.assert(
      fc.property(fc.constantFrom(...Object.keys(VALID)), value, (name, v) => {
        assert.equal(checkSignedHeaders(raw({ ...VALID, [name]: v })).ok, SPEC[name]!(v), `${name}=${JSON.stringify(v)}`);
      }),
      { numRuns: 5000 },
    );
  });

  test('the header table names exactly the six headers of the seed', () => {
    assert.deepEqual(
      Object.values(SIGNED_HEADERS)
        .map((h) => h.name)
        .sort(),
      Object.keys(VALID).sort(),
    );
  });
});

describe('isStrictBase64', () => {
  test('standard Base64 with padding only', () => {
    for (const [s, ok] of [
      ['QUJD', true],
      ['QUI=', true],
      ['QQ==', true],
      ['a+/9', true],
      ['QUI', false],
      ['QQ=', false],
      ['Q===', false],
      ['QU=D', false],
      ['a-_9', false],
      ['QU JD', false],
      ['', false],
    ] as const) {
      assert.equal(isStrictBase64(s), ok, s);
    }
  });

  test('property: true exactly for what Buffer encodes', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 1, maxLength: 300 }), (bytes) => {
        const b64 = Buffer.from(bytes).toString('base64');
        assert.ok(isStrictBase64(b64));
        assert.ok(!isStrictBase64(`${b64}=`), 'one padding character too many');
        assert.ok(!isStrictBase64(b64.slice(0, -1)), 'one character short');
      }),
      { numRuns: 500 },
    );
  });
});
