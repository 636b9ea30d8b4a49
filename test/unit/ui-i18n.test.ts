/**
 * The console's and the portal's texts in both languages (src/ui/i18n.ts): every `t('...')` of a
 * surface's pages has its zh-CN text (in the surface's dictionary or the shared one), every
 * `{name}` of a text is kept by its translation, and no translation is left that no page uses.
 * And the APIs' refusals as the zh-CN pages show them (src/ui/errors.ts): every code the portal API
 * and the admin API can answer has its text, found in the server's code; every template is still a
 * message the server gives; every body field and entity has its name; the shared checks' messages
 * are translated themselves.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { ADMIN_ERRORS, PORTAL_CODES } from '../../src/backoffice-http/errors.ts';
import * as backOfficeSchemas from '../../src/backoffice-http/schemas.ts';
import { CONSOLE_ZH } from '../../src/console/ui/zh.ts';
import { passwordProblem } from '../../src/domain/operators.ts';
import { type ObjectSchema, validate } from '../../src/domain/schema.ts';
import { statementDay } from '../../src/domain/statements.ts';
import { checkNotifyUrl } from '../../src/events/notify-url.ts';
import { PORTAL_ZH } from '../../src/portal/ui/zh.ts';
import { ENTITIES_ZH, ERROR_CODES_ZH, ERROR_MESSAGES_ZH, FIELDS_ZH, codeTextZh, refusalZh, templateOf } from '../../src/ui/errors.ts';
import { SHARED_ZH } from '../../src/ui/zh.ts';
import { checkCidrs } from '../../src/usecases/back-office/common.ts';
import { SignInRefused } from '../../src/usecases/sessions.ts';

const root = path.resolve(import.meta.dirname, '../..');

function files(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? files(p) : /\.tsx?$/.test(e.name) && e.name !== 'zh.ts' && e.name !== 'i18n.ts' ? [p] : [];
  });
}

/** The first argument of every t(...) call written as a string literal; a t( call with anything else is refused. */
export function textsOf(dir: string): Set<string> {
  const out = new Set<string>();
  for (const f of files(path.join(root, dir))) {
    const src = fs.readFileSync(f, 'utf8');
    for (const m of src.matchAll(/\bt\(\s*(?:'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)"|([^'"\s)]))/g)) {
      assert.ok(m[3] === undefined, `${path.relative(root, f)}: t( takes a string literal (the English text), not ${m[3]}…`);
      out.add((m[1] ?? m[2]!).replace(/\\(.)/g, '$1'));
    }
  }
  return out;
}

const shared = textsOf('src/ui');
const consoleTexts = textsOf('src/console/ui');
const portalTexts = textsOf('src/portal/ui');

const vars = (s: string) => [...s.matchAll(/\{(\w+)\}/g)].map((m) => m[1]).sort();

for (const [name, texts, dict] of [
  ['the shared pieces', shared, SHARED_ZH],
  ['the console', consoleTexts, { ...SHARED_ZH, ...CONSOLE_ZH }],
  ['the portal', portalTexts, { ...SHARED_ZH, ...PORTAL_ZH }],
] as const) {
  test(`${name}: every text has its zh-CN translation, with the same {names}`, () => {
    const missing = [...texts].filter((x) => !(x in dict));
    assert.deepEqual(missing, [], `texts without a zh-CN translation in ${name}`);
    for (const x of texts) assert.deepEqual(vars(dict[x]!), vars(x), `"${x}" -> "${dict[x]}"`);
  });
}

test('no translation is left unused', () => {
  assert.deepEqual(
    Object.keys(SHARED_ZH).filter((k) => !shared.has(k)),
    [],
  );
  assert.deepEqual(
    Object.keys(CONSOLE_ZH).filter((k) => !consoleTexts.has(k)),
    [],
  );
  assert.deepEqual(
    Object.keys(PORTAL_ZH).filter((k) => !portalTexts.has(k)),
    [],
  );
});

// --- the APIs' refusals in zh-CN (src/ui/errors.ts) ----------------------------------------------

/** The server's code: src/ except the pages (src/ui and each surface's ui/). */
function serverFiles(dir = path.join(root, 'src')): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return e.name === 'ui' ? [] : serverFiles(p);
    return e.name.endsWith('.ts') ? [p] : [];
  });
}
const serverSource = serverFiles()
  .map((f) => fs.readFileSync(f, 'utf8'))
  .join('\n');
const CJK = /[\u4e00-\u9fff]/;

/**
 * Every code the portal API and the admin API can answer: the back office's table, the portal's,
 * and any code written in the server's code (`AdminError('X'`, `code: 'X'`, `${prefix}_X`), so that
 * a new code without its text fails; with the pages' own codes (src/ui/api.ts).
 */
function answerableCodes(): Set<string> {
  const codes = new Set<string>([...Object.keys(ADMIN_ERRORS), ...PORTAL_CODES]);
  for (const m of serverSource.matchAll(/(?:AdminError\(\s*|code:\s*)['"`]((?:ADMIN|PORTAL)_[A-Z_]+)['"`]/g)) codes.add(m[1]!);
  for (const m of serverSource.matchAll(/\$\{(?:prefix|codePrefix)\}_([A-Z_]+)/g)) {
    codes.add(`ADMIN_${m[1]}`);
    codes.add(`PORTAL_${m[1]}`);
  }
  const api = fs.readFileSync(path.join(root, 'src/ui/api.ts'), 'utf8');
  for (const m of api.matchAll(/new ApiError\([^,]+,\s*'([A-Z_]+)'/g)) codes.add(m[1]!);
  return codes;
}

test('every error code the portal API and the admin API can answer has its zh-CN text', () => {
  const codes = answerableCodes();
  for (const c of ['PORTAL_TOTP_REQUIRED', 'PORTAL_RATE_LIMITED', 'ADMIN_UNAUTHORIZED', 'NETWORK_FAILED', 'HTTP_ERROR']) {
    assert.ok(codes.has(c), `${c} found in the code`);
  }
  const missing = [...codes].filter((c) => codeTextZh(c) === undefined);
  assert.deepEqual(missing, [], 'codes without a zh-CN text in ERROR_CODES_ZH (src/ui/errors.ts)');
  for (const c of codes) assert.match(codeTextZh(c)!, CJK, c);
  assert.deepEqual(
    Object.keys(ERROR_CODES_ZH).filter((k) => ![...codes].some((c) => c.replace(/^(ADMIN|PORTAL)_/, '') === k)),
    [],
    'no code text is left that no answer has',
  );
});

test("every message template is one the server still gives, and its translation is Chinese with only the template's {names}", () => {
  for (const [en, zh] of Object.entries(ERROR_MESSAGES_ZH)) {
    // Each literal piece, split where the server composes a message of parts (`notifyUrl: ${problem}`).
    const pieces = en
      .split(/\{\w+\}/)
      .flatMap((p) => p.split(/[():;,."“”]+/))
      .map((p) => p.trim())
      .filter((p) => p.length >= 4);
    for (const p of pieces) assert.ok(serverSource.includes(p), `"${p}" (of "${en}") is no longer in the server's code`);
    assert.match(zh, CJK, en);
    const names = new Set(vars(en));
    for (const n of vars(zh)) assert.ok(names.has(n), `"${zh}" uses {${n}}, which "${en}" does not have`);
  }
});

test("every field of the back office's bodies and every entity the APIs name has its zh-CN name", () => {
  const fields = new Set<string>();
  const walk = (s: unknown): void => {
    if (typeof s !== 'object' || s === null) return;
    const o = s as { properties?: Record<string, unknown>; items?: unknown; anyOf?: unknown[] };
    for (const [k, v] of Object.entries(o.properties ?? {})) {
      fields.add(k);
      walk(v);
    }
    walk(o.items);
    for (const a of o.anyOf ?? []) walk(a);
  };
  for (const s of Object.values(backOfficeSchemas)) walk(s);
  assert.ok(fields.has('notifyUrl') && fields.has('password'));
  assert.deepEqual(
    [...fields].filter((f) => !(f in FIELDS_ZH)),
    [],
    'body fields without a zh-CN name in FIELDS_ZH',
  );
  const entities = new Set<string>(['resource']);
  for (const m of serverSource.matchAll(/\bnotFound\('([^']+)'\)|\bentity: '([^']+)'/g)) entities.add((m[1] ?? m[2])!);
  // A path parameter holding U+0000 is `<name without Id> not found` (src/backoffice-http/common.ts).
  for (const m of serverSource.matchAll(/'\/[^']*:(\w+)Id\b/g)) entities.add(m[1]!);
  assert.ok(entities.has('order') && entities.has('reconciliation run') && entities.has('openOrder'));
  assert.deepEqual(
    [...entities].filter((e) => !(e in ENTITIES_ZH)),
    [],
    'entities without a zh-CN name in ENTITIES_ZH',
  );
});

test("the shared checks' refusals are translated by their message, not only by their code", async () => {
  const messages: string[] = [];
  const schema = {
    type: 'object',
    additionalProperties: false,
    required: ['name'],
    minProperties: 1,
    properties: {
      name: { type: 'string', minLength: 2, maxLength: 3 },
      one: { type: 'string', minLength: 1, maxLength: 1 },
      keyId: { type: 'string', pattern: '^[\\x21-\\x7e]{1,128}$' },
      other: { type: 'string', pattern: '^a|b$' },
      kind: { type: 'string', enum: ['A', 'B'] },
      exact: { type: 'string', const: 'X' },
      n: { type: 'integer', minimum: 1, maximum: 9 },
      flag: { type: 'boolean' },
      list: { type: 'array', items: { type: 'string' }, minItems: 1, maxItems: 2, uniqueItems: true },
      inner: { type: 'object', additionalProperties: false, minProperties: 1, properties: {} },
    },
  } as const satisfies ObjectSchema;
  for (const v of [
    [],
    {},
    { name: 'ok', extra: 1 },
    { name: 5 },
    { name: 'a\u0000b' },
    { name: 'a\ud800' },
    { name: 'a' },
    { name: 'abcd' },
    { name: 'ok', one: '' },
    { name: 'ok', one: 'ab' },
    { name: 'ok', keyId: 'a b' },
    { name: 'ok', other: 'c' },
    { name: 'ok', kind: 'C' },
    { name: 'ok', exact: 'Y' },
    { name: 'ok', n: 1.5 },
    { name: 'ok', n: 0 },
    { name: 'ok', n: 10 },
    { name: 'ok', flag: 'yes' },
    { name: 'ok', list: 'x' },
    { name: 'ok', list: [] },
    { name: 'ok', list: ['a', 'b', 'c'] },
    { name: 'ok', list: ['a', 'a'] },
    { name: 'ok', inner: {} },
  ]) {
    messages.push(validate(schema, v)!.message);
  }
  for (const p of ['short', 'x'.repeat(300), ' a padded password ']) messages.push(passwordProblem(p)!);
  for (const kind of ['INVALID', 'THROTTLED', 'SECOND_FACTOR_REQUIRED', 'BUSY'] as const) messages.push(new SignInRefused(kind).message);
  const policy = { allowLoopback: false, allowPrivateTargets: false };
  for (const url of [
    'not a url',
    'https://u:p@shop.example/x',
    'https://shop.example/x#y',
    'http://shop.example/x',
    'ftp://shop.example/x',
    'https://10.0.0.1/x',
    'https://127.0.0.1/x',
  ]) {
    messages.push(`notifyUrl: ${checkNotifyUrl(url, policy)}`);
  }
  for (const entry of ['nope', '10.0.0.1/33']) {
    try {
      checkCidrs('ipAllowlist', [entry]);
    } catch (err) {
      messages.push((err as Error).message);
    }
  }
  const tomorrow = new Date(Date.now() + 86_400_000 + 8 * 3600_000).toISOString().slice(0, 10);
  try {
    statementDay(tomorrow, Date.now());
  } catch (err) {
    messages.push((err as Error).message);
  }
  assert.equal(messages.length, 23 + 3 + 4 + 7 + 2 + 1);
  for (const m of messages) {
    assert.ok(templateOf(m) !== null, `"${m}" has no template in ERROR_MESSAGES_ZH`);
    const zh = refusalZh('ADMIN_VALIDATION_FAILED', m);
    assert.notEqual(zh, codeTextZh('ADMIN_VALIDATION_FAILED'), `"${m}" is translated by itself`);
    assert.match(zh, CJK, m);
    assert.doesNotMatch(zh, /\b(must|not|the|is|of|characters)\b/, `"${m}" -> "${zh}" keeps no English words`);
  }
});

test('a refusal in zh-CN: its message translated (its field and entity named), else its code, else the message', () => {
  assert.equal(refusalZh('ADMIN_UNAUTHORIZED', 'the name or the password is not right'), '用户名或密码不正确。');
  assert.equal(refusalZh('PORTAL_UNAUTHORIZED', 'the name or the password is not right'), '用户名或密码不正确。');
  assert.equal(refusalZh('PORTAL_NOT_FOUND', 'order not found'), '未找到订单。');
  assert.equal(refusalZh('ADMIN_VALIDATION_FAILED', 'notifyUrl is required'), '请填写通知地址。');
  assert.equal(
    refusalZh('ADMIN_VALIDATION_FAILED', 'keyId has an invalid format (1-128 characters of visible ASCII)'),
    '密钥 ID格式不正确（须为 1 至 128 个可见 ASCII 字符）。',
  );
  assert.equal(
    refusalZh('ADMIN_STATE_INVALID', 'The statement of 2025-01-31 is not closed yet: it is available from 2025-01-31T18:00:00.000Z.'),
    '2025-01-31 的对账单尚未结束，2025-02-01 02:00:00\u00a0UTC+8 起可下载。',
  );
  // The longer template wins over the general one it is an instance of.
  assert.equal(refusalZh('ADMIN_VALIDATION_FAILED', 'afterSeconds must be 0 to 604800'), '过渡时长须为 0 至 604800 秒。');
  // An entity without a name, a message without a template: the code's text.
  assert.equal(refusalZh('ADMIN_NOT_FOUND', 'gizmo not found'), '未找到要查看的内容。');
  assert.equal(refusalZh('ADMIN_CONFLICT', 'something new went wrong'), '与已有数据冲突。');
  // A code without a text: the server's own message.
  assert.equal(refusalZh('SOMETHING_ELSE', 'as the server said'), 'as the server said');
});
