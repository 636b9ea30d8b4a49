import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { guardJson, MAX_JSON_DEPTH } from '../../src/lib/json-guard.ts';
import type { JsonGuardFailure, JsonGuardResult } from '../../src/lib/json-guard.ts';

const enc = new TextEncoder();
const utf8 = (s: string): Uint8Array => enc.encode(s);
const bytes = (...parts: (string | number[])[]): Uint8Array => {
  const chunks = parts.map((p) => (typeof p === 'string' ? utf8(p) : Uint8Array.from(p)));
  const out = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
  let off = 0;
  for (const c of chunks) {
    out.set(c, off);
    off += c.length;
  }
  return out;
};

type Expected = 'EMPTY' | 'OK' | JsonGuardFailure;

function outcome(r: JsonGuardResult): Expected {
  if (!r.ok) return r.reason;
  return r.empty ? 'EMPTY' : 'OK';
}

// ---------------------------------------------------------------------------
// Reference: fatal TextDecoder + JSON.parse, plus an independent check (on the
// already-valid text) for duplicate keys, forbidden keys and depth.
// ---------------------------------------------------------------------------

const refDecoder = new TextDecoder('utf-8', { fatal: true });

type Refusal = Exclude<JsonGuardFailure, 'INVALID_JSON'>;
type Reference = { valid: false } | { valid: true; value: unknown; bom: boolean; refusals: Set<Refusal> };

// Tokens of a text already known to be valid JSON.
const TOKEN = /"(?:[^"\\]|\\.)*"|[[\]{}:]/gs;

function reference(body: Uint8Array): Reference {
  let text: string;
  let value: unknown;
  try {
    text = refDecoder.decode(body);
    value = JSON.parse(text);
  } catch {
    return { valid: false };
  }
  const bom = body.length >= 3 && body[0] === 0xef && body[1] === 0xbb && body[2] === 0xbf;
  const refusals = new Set<Refusal>();

  // From the token stream: key count, depth and forbidden keys. The text is
  // valid JSON here, so a string token followed by ':' is always a key.
  let keyTokens = 0;
  let depth = 0;
  let prev = '';
  let prevPrev = '';
  const ctorObject: boolean[] = []; // per open container: object value of a "constructor" key?
  for (const m of text.matchAll(TOKEN)) {
    const t = m[0];
    if (t === '[' || t === '{') {
      depth++;
      if (depth > MAX_JSON_DEPTH) refusals.add('TOO_DEEP');
      ctorObject.push(t === '{' && prev === ':' && JSON.parse(prevPrev) === 'constructor');
    } else if (t === ']' || t === '}') {
      depth--;
      ctorObject.pop();
    } else if (t === ':') {
      keyTokens++;
      const key = JSON.parse(prev) as string;
      if (key === '__proto__') refusals.add('FORBIDDEN_KEY');
      if (key === 'prototype' && ctorObject.at(-1) === true) refusals.add('FORBIDDEN_KEY');
    }
    prevPrev = prev;
    prev = t;
  }

  // Count the keys that survive JSON.parse (iterative walk).
  let parsedKeys = 0;
  const todo: unknown[] = [value];
  while (todo.length > 0) {
    const v = todo.pop();
    if (Array.isArray(v)) {
      todo.push(...v);
    } else if (typeof v === 'object' && v !== null) {
      for (const child of Object.values(v)) {
        parsedKeys++;
        todo.push(child);
      }
    }
  }
  // JSON.parse keeps only the last of duplicated keys, so fewer keys survive.
  if (parsedKeys < keyTokens) refusals.add('DUPLICATE_KEY');
  return { valid: true, value, bom, refusals };
}

/** Asserts guardJson agrees with the reference on `body`. */
function checkAgainstReference(body: Uint8Array): void {
  const got = guardJson(body);
  if (body.length === 0) {
    assert.deepEqual(got, { ok: true, empty: true });
    return;
  }
  const ref = reference(body);
  if (!ref.valid || ref.bom) {
    assert.deepEqual(got, { ok: false, reason: 'INVALID_JSON' });
    return;
  }
  if (ref.refusals.size === 0) {
    assert.ok(got.ok && !got.empty, `expected acceptance, got ${JSON.stringify(got)}`);
    assert.deepStrictEqual(got.value, ref.value);
    return;
  }
  assert.ok(!got.ok, 'expected a refusal');
  // A duplicate key wins wherever it is (the gate's step 1); of the others, the first in document
  // order wins, and any of them is fine here.
  if (ref.refusals.has('DUPLICATE_KEY')) assert.equal(got.reason, 'DUPLICATE_KEY');
  else assert.ok((ref.refusals as Set<string>).has(got.reason), `reason ${got.reason} not in ${[...ref.refusals].join(',')}`);
}

// ---------------------------------------------------------------------------
// Explicit cases
// ---------------------------------------------------------------------------

const deep = (d: number, open = '[', close = ']'): string => open.repeat(d) + close.repeat(d);
const deepObj = (d: number): string => '{"a":'.repeat(d - 1) + '{}' + '}'.repeat(d - 1);

const cases: [name: string, body: string | Uint8Array, expected: Expected][] = [
  // empty / top-level values
  ['zero bytes', new Uint8Array(0), 'EMPTY'],
  ['empty object', '{}', 'OK'],
  ['empty array', '[]', 'OK'],
  ['top-level string', '"x"', 'OK'],
  ['top-level number', '1', 'OK'],
  ['top-level negative zero float', '-0.0', 'OK'],
  ['top-level true', 'true', 'OK'],
  ['top-level false', 'false', 'OK'],
  ['top-level null', 'null', 'OK'],
  ['surrounding whitespace', ' \t\r\n{"a":[1, 2 ,3]}\n ', 'OK'],
  ['whitespace only', '   ', 'INVALID_JSON'],
  ['single newline', '\n', 'INVALID_JSON'],
  ['two values', '1 2', 'INVALID_JSON'],
  ['trailing garbage', '{"a":1}x', 'INVALID_JSON'],
  ['trailing NUL', bytes('{}', [0]), 'INVALID_JSON'],
  ['second object', '{}{}', 'INVALID_JSON'],
  ['non-JSON whitespace (NBSP)', '\u00a0{}', 'INVALID_JSON'],
  ['non-JSON whitespace (form feed)', '\f{}', 'INVALID_JSON'],
  // BOM / UTF-8
  ['UTF-8 BOM', bytes([0xef, 0xbb, 0xbf], '{}'), 'INVALID_JSON'],
  ['BOM alone', bytes([0xef, 0xbb, 0xbf]), 'INVALID_JSON'],
  ['BOM inside string is fine', '"\ufeff"', 'OK'],
  ['valid multibyte UTF-8', '{"名":"値 é 😀"}', 'OK'],
  ['invalid UTF-8 continuation byte', bytes('"', [0x80], '"'), 'INVALID_JSON'],
  ['invalid UTF-8 byte 0xff', bytes('"', [0xff], '"'), 'INVALID_JSON'],
  ['truncated UTF-8 sequence', bytes('"', [0xe6, 0x97], '"'), 'INVALID_JSON'],
  ['overlong "/" (C0 AF)', bytes('"', [0xc0, 0xaf], '"'), 'INVALID_JSON'],
  ['overlong NUL (C0 80)', bytes('"', [0xc0, 0x80], '"'), 'INVALID_JSON'],
  ['overlong 3-byte (E0 80 AF)', bytes('"', [0xe0, 0x80, 0xaf], '"'), 'INVALID_JSON'],
  ['overlong quote outside string', bytes('{', [0xc0, 0xa2], 'a":1}'), 'INVALID_JSON'],
  ['UTF-8 encoded lone surrogate (ED A0 80)', bytes('"', [0xed, 0xa0, 0x80], '"'), 'INVALID_JSON'],
  ['CESU-8 surrogate pair', bytes('"', [0xed, 0xa0, 0xbd, 0xed, 0xb8, 0x80], '"'), 'INVALID_JSON'],
  ['code point above U+10FFFF', bytes('"', [0xf4, 0x90, 0x80, 0x80], '"'), 'INVALID_JSON'],
  ['escaped lone surrogate is valid JSON', '"\\ud800"', 'OK'],
  // strings
  ['raw control char in string', '"a\u0001b"', 'INVALID_JSON'],
  ['raw NUL in string', '"\u0000"', 'INVALID_JSON'],
  ['raw newline in string', '"a\nb"', 'INVALID_JSON'],
  ['raw tab in string', '"a\tb"', 'INVALID_JSON'],
  ['raw tab in key', '{"a\tb":1}', 'INVALID_JSON'],
  ['DEL is allowed', '"\u007f"', 'OK'],
  ['U+2028 is allowed', '"\u2028"', 'OK'],
  ['all valid escapes', '"\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u00e9 \\uD83D\\uDE00"', 'OK'],
  ['bad escape \\x', '"\\x41"', 'INVALID_JSON'],
  ['bad escape \\a', '"\\a"', 'INVALID_JSON'],
  ["bad escape \\'", '"\\\'"', 'INVALID_JSON'],
  ['short \\u escape', '"\\u12"', 'INVALID_JSON'],
  ['non-hex \\u escape', '"\\u12g4"', 'INVALID_JSON'],
  ['bad escape in key', '{"\\q":1}', 'INVALID_JSON'],
  ['unterminated string', '"abc', 'INVALID_JSON'],
  ['unterminated escape', '"abc\\', 'INVALID_JSON'],
  ['single quotes', "{'a':1}", 'INVALID_JSON'],
  ['single-quoted string', "'a'", 'INVALID_JSON'],
  // numbers
  ['leading zero', '01', 'INVALID_JSON'],
  ['leading zero in array', '[00]', 'INVALID_JSON'],
  ['negative leading zero', '-01', 'INVALID_JSON'],
  ['plus sign', '+1', 'INVALID_JSON'],
  ['leading dot', '.5', 'INVALID_JSON'],
  ['trailing dot', '1.', 'INVALID_JSON'],
  ['trailing dot before exponent', '1.e5', 'INVALID_JSON'],
  ['bare minus', '-', 'INVALID_JSON'],
  ['empty exponent', '1e', 'INVALID_JSON'],
  ['signed empty exponent', '1e+', 'INVALID_JSON'],
  ['hex number', '0x10', 'INVALID_JSON'],
  ['NaN', 'NaN', 'INVALID_JSON'],
  ['Infinity', 'Infinity', 'INVALID_JSON'],
  ['-Infinity', '-Infinity', 'INVALID_JSON'],
  ['valid number forms', '[0,-0,1.5,-1.5e10,1E-5,1e+5,0.0,123456789012345678901234567890]', 'OK'],
  ['huge exponent is valid', '1e999', 'OK'],
  // literals
  ['capitalised True', 'True', 'INVALID_JSON'],
  ['truncated literal', 'nul', 'INVALID_JSON'],
  ['literal with suffix', 'truex', 'INVALID_JSON'],
  ['undefined', 'undefined', 'INVALID_JSON'],
  // structure
  ['trailing comma in object', '{"a":1,}', 'INVALID_JSON'],
  ['trailing comma in array', '[1,]', 'INVALID_JSON'],
  ['leading comma', '[,1]', 'INVALID_JSON'],
  ['double comma', '[1,,2]', 'INVALID_JSON'],
  ['missing comma', '[1 2]', 'INVALID_JSON'],
  ['missing colon', '{"a" 1}', 'INVALID_JSON'],
  ['missing value', '{"a":}', 'INVALID_JSON'],
  ['unquoted key', '{a:1}', 'INVALID_JSON'],
  ['numeric key', '{1:1}', 'INVALID_JSON'],
  ['mismatched brackets', '[}', 'INVALID_JSON'],
  ['mismatched braces', '{"a":1]', 'INVALID_JSON'],
  ['unclosed array', '[1', 'INVALID_JSON'],
  ['unclosed object', '{"a":1', 'INVALID_JSON'],
  ['extra closer', '[]]', 'INVALID_JSON'],
  ['line comment', '{"a":1 // c\n}', 'INVALID_JSON'],
  ['block comment', '/* c */ {}', 'INVALID_JSON'],
  // duplicate keys
  ['duplicate key', '{"a":1,"a":2}', 'DUPLICATE_KEY'],
  ['duplicate key, same value', '{"a":1,"b":0,"a":1}', 'DUPLICATE_KEY'],
  ['duplicate via \\u escape', '{"ab":1,"a\\u0062":2}', 'DUPLICATE_KEY'],
  ['duplicate via escaped é vs raw é', '{"\\u00e9":1,"é":2}', 'DUPLICATE_KEY'],
  ['duplicate via \\/ escape', '{"a/b":1,"a\\/b":2}', 'DUPLICATE_KEY'],
  ['duplicate via surrogate-pair escape', '{"😀":1,"\\ud83d\\ude00":2}', 'DUPLICATE_KEY'],
  ['duplicate empty key', '{"":1,"":2}', 'DUPLICATE_KEY'],
  ['duplicate nested in object', '{"a":{"b":1,"b":2}}', 'DUPLICATE_KEY'],
  ['duplicate in array of objects', '{"items":[{"sku":"a"},{"sku":"b","qty":1,"qty":2}]}', 'DUPLICATE_KEY'],
  ['duplicate in deep array', '[[[{"x":[{"k":1,"k":1}]}]]]', 'DUPLICATE_KEY'],
  ['duplicate among many keys', `{${Array.from({ length: 40 }, (_, k) => `"k${k}":${k}`).join(',')},"k7":0}`, 'DUPLICATE_KEY'],
  ['same key in sibling objects is fine', '[{"a":1},{"a":2}]', 'OK'],
  ['same key at different depths is fine', '{"a":{"a":{"a":1}}}', 'OK'],
  ['keys differing only by case are fine', '{"a":1,"A":2}', 'OK'],
  ['40 distinct keys are fine', `{${Array.from({ length: 40 }, (_, k) => `"k${k}":${k}`).join(',')}}`, 'OK'],
  ['duplicate then syntax error is INVALID_JSON', '{"a":1,"a":2', 'INVALID_JSON'],
  // forbidden keys
  ['__proto__ key', '{"__proto__":{"admin":true}}', 'FORBIDDEN_KEY'],
  ['__proto__ key with null', '{"__proto__":null}', 'FORBIDDEN_KEY'],
  ['__proto__ escaped', '{"__pro\\u0074o__":{}}', 'FORBIDDEN_KEY'],
  ['__proto__ fully escaped', '{"\\u005f\\u005fproto\\u005f\\u005f":1}', 'FORBIDDEN_KEY'],
  ['nested __proto__', '{"a":[{"b":{"__proto__":1}}]}', 'FORBIDDEN_KEY'],
  ['constructor.prototype', '{"constructor":{"prototype":{"x":1}}}', 'FORBIDDEN_KEY'],
  ['constructor.prototype (escaped)', '{"constructo\\u0072":{"prot\\u006ftype":null}}', 'FORBIDDEN_KEY'],
  ['nested constructor.prototype', '[{"a":{"constructor":{"x":1,"prototype":1}}}]', 'FORBIDDEN_KEY'],
  ['constructor with scalar value is fine', '{"constructor":1}', 'OK'],
  ['constructor with other keys is fine', '{"constructor":{"name":"x"}}', 'OK'],
  ['constructor with array value is fine', '{"constructor":[{"prototype":1}]}', 'OK'],
  ['constructor.x.prototype is fine', '{"constructor":{"x":{"prototype":1}}}', 'OK'],
  ['prototype alone is fine', '{"prototype":{"constructor":1}}', 'OK'],
  ['"__proto__" as a value is fine', '{"a":"__proto__"}', 'OK'],
  ['"__proto__" in an array is fine', '["__proto__"]', 'OK'],
  ['__proto__ then syntax error is INVALID_JSON', '{"__proto__":1,}', 'INVALID_JSON'],
  // depth
  [`arrays nested ${MAX_JSON_DEPTH} deep`, deep(MAX_JSON_DEPTH), 'OK'],
  [`arrays nested ${MAX_JSON_DEPTH + 1} deep`, deep(MAX_JSON_DEPTH + 1), 'TOO_DEEP'],
  [`objects nested ${MAX_JSON_DEPTH} deep`, deepObj(MAX_JSON_DEPTH), 'OK'],
  [`objects nested ${MAX_JSON_DEPTH + 1} deep`, deepObj(MAX_JSON_DEPTH + 1), 'TOO_DEEP'],
  [`mixed nesting ${MAX_JSON_DEPTH + 1} deep`, '[{"a":'.repeat(32) + '[1]' + '}]'.repeat(32), 'TOO_DEEP'],
  ['32,768 [ then 32,768 ] (valid JSON, too deep)', deep(32768), 'TOO_DEEP'],
  ['60,000 [ (unclosed)', '['.repeat(60000), 'INVALID_JSON'],
  ['60,000 { (unclosed)', '{'.repeat(60000), 'INVALID_JSON'],
  ['13,000 {"a": (unclosed)', '{"a":'.repeat(13000), 'INVALID_JSON'],
  ['too deep then syntax error is INVALID_JSON', `${deep(MAX_JSON_DEPTH + 1)},`, 'INVALID_JSON'],
  // runs of brackets past the depth limit (taken a run at a time)
  ['70 [ then 69 ] (one unclosed)', '['.repeat(70) + ']'.repeat(69), 'INVALID_JSON'],
  ['70 [ then 71 ]', '['.repeat(70) + ']'.repeat(71), 'INVALID_JSON'],
  ['70 [ closed by } at the end', '['.repeat(70) + ']'.repeat(69) + '}', 'INVALID_JSON'],
  ['70 [ with blanks between', '[ '.repeat(70) + ' ]'.repeat(70), 'TOO_DEEP'],
  ['70 [ around an object holding arrays', '['.repeat(70) + '{"a":[[1],[2]]}' + ']'.repeat(70), 'TOO_DEEP'],
  ['70 [ around an object closed by ]', '['.repeat(70) + '{"a":1]' + ']'.repeat(70), 'INVALID_JSON'],
  ['70 [ then a value and more arrays', '['.repeat(70) + '1,[[2]],[]' + ']'.repeat(70), 'TOO_DEEP'],
  ['70 [ then a comma', '['.repeat(70) + ',' + ']'.repeat(70), 'INVALID_JSON'],
  ['objects past the limit, then a run of [', '{"a":'.repeat(70) + '[[[1]]]' + '}'.repeat(70), 'TOO_DEEP'],
  ['a run of [ closed by } past the limit', '{"a":'.repeat(70) + '[[[1]]}' + '}'.repeat(70), 'INVALID_JSON'],
  // a duplicate key (the gate's step 1) wins wherever it is; else the first refusal in document order
  ['duplicate before too deep', `[{"a":1,"a":2},${deep(MAX_JSON_DEPTH)}]`, 'DUPLICATE_KEY'],
  ['too deep before duplicate', `[${deep(MAX_JSON_DEPTH)},{"a":1,"a":2}]`, 'DUPLICATE_KEY'],
  ['a duplicate inside what is too deep', `${'['.repeat(MAX_JSON_DEPTH)}{"a":1,"a":2}${']'.repeat(MAX_JSON_DEPTH)}`, 'DUPLICATE_KEY'],
  ['a duplicate in objects nested past the limit', `${'{"a":'.repeat(70)}{"b":1,"c":2,"b":3}${'}'.repeat(70)}`, 'DUPLICATE_KEY'],
  ['distinct keys in objects nested past the limit', `${'{"a":1,"b":'.repeat(70)}{"b":1,"c":2}${'}'.repeat(70)}`, 'TOO_DEEP'],
  ['a duplicate past a run of brackets over the limit', `${'['.repeat(100)}{"a":1,"b":2,"a":3}${']'.repeat(100)}`, 'DUPLICATE_KEY'],
  [
    'sibling objects past the limit have keys of their own',
    `${'['.repeat(70)}{"a":1,"b":2},{"a":1,"b":2},{"b":1}${']'.repeat(70)}`,
    'TOO_DEEP',
  ],
  ['a nested duplicate whose first key is escaped', '{"x":{"\\u0061":1,"a":2}}', 'DUPLICATE_KEY'],
  ['a nested duplicate whose second key is escaped', '{"x":{"y":0,"a":1,"\\u0061":2}}', 'DUPLICATE_KEY'],
  ['forbidden before duplicate', '{"__proto__":1,"a":1,"a":2}', 'DUPLICATE_KEY'],
  ['duplicate before forbidden', '{"a":1,"a":2,"__proto__":1}', 'DUPLICATE_KEY'],
  ['__proto__ twice', '{"__proto__":1,"__proto__":2}', 'DUPLICATE_KEY'],
  ['__proto__ twice, nested', '{"x":{"__proto__":{},"__proto__":{}}}', 'DUPLICATE_KEY'],
  ['__proto__ twice, one escaped', '{"__proto__":1,"\\u005f_proto__":2}', 'DUPLICATE_KEY'],
  ['constructor.prototype twice', '{"constructor":{"prototype":1,"prototype":2}}', 'DUPLICATE_KEY'],
  ['forbidden before too deep', `[{"__proto__":1},${deep(MAX_JSON_DEPTH)}]`, 'FORBIDDEN_KEY'],
  ['too deep before forbidden', `[${deep(MAX_JSON_DEPTH)},{"__proto__":1}]`, 'TOO_DEEP'],
];

describe('guardJson explicit cases', () => {
  for (const [name, body, expected] of cases) {
    it(name, () => {
      const input = typeof body === 'string' ? utf8(body) : body;
      assert.equal(outcome(guardJson(input)), expected);
      // Every explicit case must also agree with the reference model.
      checkAgainstReference(input);
    });
  }

  it('returns the parsed value', () => {
    const text = '{"amountFen":100,"a":[1,"x",null,true,{"b":-0.5}],"s":"\\u00e9\\n"}';
    const r = guardJson(utf8(text));
    assert.ok(r.ok && !r.empty);
    assert.deepStrictEqual(r.value, JSON.parse(text));
  });

  it('exports MAX_JSON_DEPTH = 64', () => {
    assert.equal(MAX_JSON_DEPTH, 64);
  });

  it('zero-byte body is exactly {ok:true, empty:true}', () => {
    assert.deepEqual(guardJson(new Uint8Array(0)), { ok: true, empty: true });
  });

  it('accepts a subarray view (non-zero byteOffset)', () => {
    const buf = utf8('xx{"a":1}yy');
    const r = guardJson(buf.subarray(2, 9));
    assert.ok(r.ok && !r.empty);
    assert.deepEqual(r.value, { a: 1 });
  });

  it('accepts a Node Buffer', () => {
    const r = guardJson(Buffer.from('{"a":[1]}'));
    assert.ok(r.ok && !r.empty);
    assert.deepEqual(r.value, { a: [1] });
  });
});

describe('nonIntegerLiteralKeys', () => {
  const keysOf = (text: string): string[] => {
    const r = guardJson(utf8(text));
    assert.ok(r.ok && !r.empty, `expected acceptance of ${text}`);
    return [...r.nonIntegerLiteralKeys].sort();
  };

  it('lists top-level keys whose number literal has a fraction or exponent', () => {
    assert.deepEqual(keysOf('{"amountFen":1.0,"b":1e2,"c":2.5,"d":-0.0,"e":1E+2,"f":5e-1,"g":100,"h":-0,"i":"1.0"}'), [
      'amountFen',
      'b',
      'c',
      'd',
      'e',
      'f',
    ]);
  });

  it('uses the decoded key', () => {
    assert.deepEqual(keysOf('{"amount\\u0046en":1.0}'), ['amountFen']);
  });

  it('ignores nested values', () => {
    assert.deepEqual(keysOf('{"a":{"b":1.5},"c":[2.5],"d":1}'), []);
  });

  it('is empty for non-object top-level values', () => {
    assert.deepEqual(keysOf('1.5'), []);
    assert.deepEqual(keysOf('[1.5,{"a":1.5}]'), []);
    assert.deepEqual(keysOf('"x"'), []);
  });

  it('value still carries the JSON.parse number', () => {
    const r = guardJson(utf8('{"amountFen":1.0}'));
    assert.ok(r.ok && !r.empty);
    assert.deepEqual(r.value, { amountFen: 1 });
    assert.ok(r.nonIntegerLiteralKeys.has('amountFen'));
  });
});

// ---------------------------------------------------------------------------
// Property tests
// ---------------------------------------------------------------------------

/** Expected nonIntegerLiteralKeys for a JSON.stringify-produced text. */
function expectedNonInteger(value: unknown): string[] {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return [];
  return Object.entries(value)
    .filter(([, v]) => typeof v === 'number' && /[.eE]/.test(JSON.stringify(v)))
    .map(([k]) => k)
    .sort();
}

// Characters that matter to JSON syntax, for mutations and random texts.
const jsonishChar = fc.constantFrom(
  '{',
  '}',
  '[',
  ']',
  ':',
  ',',
  '"',
  '\\',
  'u',
  '0',
  '1',
  '9',
  '-',
  '+',
  '.',
  'e',
  'E',
  ' ',
  '\n',
  '\t',
  '\r',
  '\f',
  'a',
  't',
  'r',
  'f',
  'n',
  'l',
  's',
  '/',
  '*',
  "'",
  '\u0000',
  '\u001f',
  '\u007f',
  'é',
  '\u2028',
  '\ufeff',
  '😀',
  '\ud800',
);

type Mutation = { op: 'delete' | 'insert' | 'replace'; at: number; ch: string };
const mutation: fc.Arbitrary<Mutation> = fc.record({
  op: fc.constantFrom('delete', 'insert', 'replace'),
  at: fc.nat(),
  ch: jsonishChar,
});

function mutate(text: string, muts: Mutation[]): string {
  let s = text;
  for (const { op, at, ch } of muts) {
    const i = s.length === 0 ? 0 : at % (s.length + (op === 'insert' ? 1 : 0));
    if (op === 'delete') s = s.slice(0, i) + s.slice(i + 1);
    else if (op === 'insert') s = s.slice(0, i) + ch + s.slice(i);
    else s = s.slice(0, i) + ch + s.slice(i + 1);
  }
  return s;
}

// JSON texts built token by token, with a small key alphabet so that duplicate,
// forbidden and non-integer cases are common.
const keyToken = fc.constantFrom(
  '"a"',
  '"b"',
  '"a\\u0062"',
  '"ab"',
  '"\\u0061"',
  '"__proto__"',
  '"__pro\\u0074o__"',
  '"constructor"',
  '"prototype"',
  '"\\u00e9"',
  '"é"',
  '""',
);
const numberToken = fc.constantFrom('0', '-0', '1', '1.0', '-0.0', '1e2', '2.5', '1E-3', '01', '1.', '.5', '+1');
const { text: jsonishText } = fc.letrec<{ text: string; obj: string; arr: string; scalar: string }>((tie) => ({
  text: fc.oneof({ depthSize: 'small', withCrossShrink: true }, tie('scalar'), tie('obj'), tie('arr')),
  scalar: fc.oneof(numberToken, fc.constantFrom('true', 'null', '"s"', '"\\q"', '"x\\u00e9"')),
  obj: fc.array(fc.tuple(keyToken, tie('text')), { maxLength: 4 }).map((kvs) => `{${kvs.map(([k, v]) => `${k}:${v}`).join(',')}}`),
  arr: fc.array(tie('text'), { maxLength: 4 }).map((vs) => `[${vs.join(',')}]`),
}));

const runs = (n: number): fc.Parameters<unknown> => ({ numRuns: n });

describe('guardJson properties', () => {
  it('accepts JSON.stringify(jsonValue) and returns the same value', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.boolean(), (v, pretty) => {
        const text = pretty ? JSON.stringify(v, null, 2) : JSON.stringify(v);
        const body = utf8(text);
        const ref = reference(body);
        assert.ok(ref.valid);
        fc.pre(ref.refusals.size === 0); // e.g. fast-check likes "__proto__" keys
        const r = guardJson(body);
        assert.ok(r.ok && !r.empty, `rejected ${text}: ${JSON.stringify(r)}`);
        assert.deepStrictEqual(r.value, JSON.parse(text));
        assert.deepEqual([...r.nonIntegerLiteralKeys].sort(), expectedNonInteger(v));
      }),
      runs(3000),
    );
  });

  it('accepts unicode JSON values too', () => {
    fc.assert(
      fc.property(fc.jsonValue({ stringUnit: 'binary' }), (v) => {
        checkAgainstReference(utf8(JSON.stringify(v)));
      }),
      runs(1000),
    );
  });

  it('agrees with the reference on mutated JSON texts', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 3 }), fc.array(mutation, { minLength: 1, maxLength: 3 }), (v, muts) => {
        checkAgainstReference(utf8(mutate(JSON.stringify(v), muts)));
      }),
      runs(3000),
    );
  });

  it('agrees with the reference on token-built texts (duplicates, forbidden keys, numbers)', () => {
    fc.assert(
      fc.property(jsonishText, fc.array(mutation, { maxLength: 2 }), (text, muts) => {
        checkAgainstReference(utf8(mutate(text, muts)));
      }),
      runs(4000),
    );
  });

  it('agrees with the reference on random JSON-ish strings', () => {
    fc.assert(
      fc.property(fc.array(jsonishChar, { maxLength: 30 }), (chars) => {
        checkAgainstReference(utf8(chars.join('')));
      }),
      runs(3000),
    );
  });

  it('agrees with the reference on byte-level mutations (invalid UTF-8)', () => {
    fc.assert(
      fc.property(
        fc.jsonValue({ maxDepth: 3, stringUnit: 'binary' }),
        fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 }), fc.boolean()), { minLength: 1, maxLength: 3 }),
        (v, edits) => {
          const b = Array.from(utf8(JSON.stringify(v)));
          for (const [at, byte, insert] of edits) {
            const i = at % (b.length + 1);
            if (insert) b.splice(i, 0, byte);
            else b[i] = byte;
          }
          checkAgainstReference(Uint8Array.from(b));
        },
      ),
      runs(3000),
    );
  });

  it('never throws on arbitrary bytes up to 2 KB, and agrees with the reference', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 2048 }), (body) => {
        checkAgainstReference(body);
      }),
      runs(3000),
    );
  });

  it('never throws on arbitrary strings', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 200 }), (s) => {
        checkAgainstReference(utf8(s));
      }),
      runs(2000),
    );
  });
});
