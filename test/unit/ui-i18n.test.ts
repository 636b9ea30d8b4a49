/**
 * The console's and the portal's texts in both languages (src/ui/i18n.ts): every `t('...')` of a
 * surface's pages has its zh-CN text (in the surface's dictionary or the shared one), every
 * `{name}` of a text is kept by its translation, and no translation is left that no page uses.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { CONSOLE_ZH } from '../../src/console/ui/zh.ts';
import { PORTAL_ZH } from '../../src/portal/ui/zh.ts';
import { SHARED_ZH } from '../../src/ui/zh.ts';

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
