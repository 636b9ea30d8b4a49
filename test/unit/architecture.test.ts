/**
 * The service's dependency graph (docs/architecture.md): no import circle anywhere in src/ (type
 * imports included), and each layer imports only the layers below it: HTTP surfaces -> use cases ->
 * domain, store, providers. Read from the source text, so it needs nothing running.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { formatted, generateTypes } from '../../scripts/gen-types.ts';

const root = path.resolve(import.meta.dirname, '../..');
const src = path.join(root, 'src');

function files(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? files(p) : e.name.endsWith('.ts') ? [p] : [];
  });
}

/** Every module specifier of a file: static imports and re-exports (type-only included) and dynamic import(). */
function specifiers(text: string): string[] {
  const out: string[] = [];
  const re =
    /(?:^|\n)\s*(?:import|export)\s[^'"`;]*?from\s*['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)|(?:^|\n)\s*import\s*['"]([^'"]+)['"]/g;
  for (const m of text.matchAll(re)) out.push((m[1] ?? m[2] ?? m[3])!);
  return out;
}

const graph = new Map<string, string[]>();
const external = new Map<string, string[]>();
for (const f of files(src)) {
  const rel = path.relative(root, f);
  const deps: string[] = [];
  const ext: string[] = [];
  for (const s of specifiers(fs.readFileSync(f, 'utf8'))) {
    if (s.startsWith('.')) deps.push(path.relative(root, path.resolve(path.dirname(f), s)));
    else ext.push(s);
  }
  graph.set(rel, deps);
  external.set(rel, ext);
}

/** Strongly connected components with more than one module (or a module importing itself): the circles. */
function circles(): string[][] {
  let index = 0;
  const idx = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const on = new Set<string>();
  const out: string[][] = [];
  const visit = (v: string): void => {
    idx.set(v, index);
    low.set(v, index++);
    stack.push(v);
    on.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!idx.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (on.has(w)) low.set(v, Math.min(low.get(v)!, idx.get(w)!));
    }
    if (low.get(v) === idx.get(v)) {
      const comp: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        on.delete(w);
        comp.push(w);
      } while (w !== v);
      if (comp.length > 1 || (graph.get(v) ?? []).includes(v)) out.push(comp.sort());
    }
  };
  for (const v of graph.keys()) if (!idx.has(v)) visit(v);
  return out;
}

const layerOf = (file: string): string => {
  const parts = file.split(path.sep);
  return parts.length > 2 ? parts[1]! : parts[1]!.replace(/\.ts$/, '');
};

/**
 * Every layer, from the top, with the layers it may import (itself always). An arrow always points
 * down this list: the composition root, then the surfaces side by side (no surface imports
 * another; what the back-office surfaces share is backoffice-http), the wiring of services, the open
 * API's gate, the use cases, and what they stand on.
 */
const LAYERS: [string, string[]][] = [
  ['main', ['app', 'config', 'domain', 'store', 'platform', 'lib']],
  [
    'app',
    [
      'workers',
      'http',
      'console',
      'portal',
      'cashier',
      'services',
      'gate',
      'usecases',
      'events',
      'providers',
      'store',
      'platform',
      'config',
      'domain',
      'lib',
    ],
  ],
  ['cli', []],
  ['workers', ['usecases', 'events', 'providers', 'store', 'domain', 'lib']],
  [
    'http',
    [
      'backoffice-http',
      'views',
      'services',
      'gate',
      'usecases',
      'events',
      'providers',
      'store',
      'platform',
      'config',
      'domain',
      'net',
      'lib',
    ],
  ],
  ['console', ['backoffice-http', 'services', 'usecases', 'domain', 'lib', 'ui']],
  ['portal', ['backoffice-http', 'views', 'services', 'usecases', 'store', 'domain', 'lib', 'ui']],
  ['cashier', ['services', 'usecases', 'providers', 'store', 'domain', 'lib']],
  ['backoffice-http', ['services', 'gate', 'usecases', 'store', 'domain', 'net', 'lib']],
  ['views', ['usecases', 'store', 'domain']],
  ['services', ['gate', 'usecases', 'events', 'providers', 'store', 'platform', 'config', 'domain', 'net', 'lib']],
  ['gate', ['store', 'platform', 'domain', 'net', 'lib']],
  ['usecases', ['events', 'providers', 'store', 'config', 'domain', 'net', 'lib']],
  ['events', ['store', 'platform', 'domain', 'net', 'lib']],
  ['providers', ['store', 'config', 'domain', 'lib']],
  ['store', ['platform', 'domain', 'lib']],
  ['platform', ['domain', 'lib']],
  ['config', ['domain', 'net', 'lib']],
  ['domain', ['net', 'lib']],
  ['net', ['lib']],
  ['lib', []],
  // The browser's side of the console and the portal (Preact, bundled by esbuild): imports nothing of the server.
  ['ui', []],
];
const ALLOWED = new Map(LAYERS);
const RANK = new Map(LAYERS.map(([l], i) => [l, i]));

/** Layers below the surfaces that must not know HTTP statuses (providers and events are HTTP clients of the outside). */
const NO_HTTP_STATUS = ['usecases', 'store', 'domain', 'platform', 'config', 'net', 'lib', 'services'];
/** A status compared with, or written as, an HTTP status number. */
const HTTP_STATUS_RE = [
  /\bstatus(?:Code)?\s*(?:===|!==|==|!=|<=|>=|<|>|:)\s*[1-5]\d\d\b/,
  /\b[1-5]\d\d\s*(?:===|!==|==|!=|<=|>=|<|>)\s*[\w.]*status/i,
];
/** A PostgreSQL error recognised by its SQLSTATE (code === '23505'): only src/store/ may (src/store/errors.ts names them). */
const SQLSTATE_RE = /\bcode\s*(?:===|!==|==|!=)\s*['"]\d{2}[0-9A-Z]{3}['"]|\bSQLSTATE\b/;

/** A file's text with its comments removed (a comment may name a status or a code). */
function codeOf(file: string): string {
  return fs
    .readFileSync(path.join(root, file), 'utf8')
    .replace(/\/\*[\s\S]*?\*\//g, '')
    .replace(/(^|[^:'"`])\/\/.*$/gm, '$1');
}

describe('architecture', () => {
  test('src has modules in every layer (the graph was read)', () => {
    for (const layer of ['domain', 'store', 'usecases', 'http', 'gate', 'providers']) {
      assert.ok(
        [...graph.keys()].some((f) => layerOf(f) === layer),
        layer,
      );
    }
  });

  test('no import circle', () => {
    assert.deepEqual(circles(), []);
  });

  test('every module belongs to a declared layer', () => {
    const unknown = [...graph.keys()].filter((f) => !ALLOWED.has(layerOf(f)));
    assert.deepEqual(unknown, []);
  });

  test('the layer table itself only points down', () => {
    const up = LAYERS.flatMap(([l, below]) => below.filter((b) => !(RANK.get(b)! > RANK.get(l)!)).map((b) => `${l} -> ${b}`));
    assert.deepEqual(up, []);
  });

  test('each layer imports only the layers below it: no upward arrow, no exemption', () => {
    const wrong: string[] = [];
    for (const [file, deps] of graph) {
      const from = layerOf(file);
      const allowed = ALLOWED.get(from) ?? [];
      for (const d of deps) {
        const to = layerOf(d);
        if (to !== from && !allowed.includes(to)) wrong.push(`${file} -> ${d}`);
      }
    }
    assert.deepEqual(wrong, []);
  });

  test('no HTTP status below the surfaces', () => {
    const wrong = [...graph.keys()]
      .filter((f) => NO_HTTP_STATUS.includes(layerOf(f)))
      .flatMap((f) => {
        const text = codeOf(f);
        return HTTP_STATUS_RE.flatMap((re) => (re.test(text) ? [`${f}: ${re.exec(text)![0]}`] : []));
      });
    assert.deepEqual(wrong, []);
  });

  test('no SQLSTATE above the store', () => {
    const wrong = [...graph.keys()]
      .filter((f) => layerOf(f) !== 'store')
      .flatMap((f) => {
        const m = SQLSTATE_RE.exec(codeOf(f));
        return m ? [`${f}: ${m[0]}`] : [];
      });
    assert.deepEqual(wrong, []);
  });

  test('the checks of statuses and SQLSTATEs catch what they are for', () => {
    assert.ok(HTTP_STATUS_RE.some((re) => re.test('if (a.status === 429 || a.status === 503)')));
    assert.ok(HTTP_STATUS_RE.some((re) => re.test("{ status: 400, message: 'x' }")));
    assert.ok(!HTTP_STATUS_RE.some((re) => re.test('const LIMIT = 500; status = s;')));
    assert.ok(SQLSTATE_RE.test("return e?.code === '23505' && e.table === 'refunds'"));
    assert.ok(SQLSTATE_RE.test("if (err.code === '22P05')"));
    assert.ok(!SQLSTATE_RE.test("if (code === 'ECONNRESET')"));
  });

  test('nothing below the surfaces knows HTTP or the database driver', () => {
    const wrong: string[] = [];
    for (const [file, ext] of external) {
      const layer = layerOf(file);
      if (['domain', 'store', 'usecases', 'providers'].includes(layer) && ext.includes('fastify')) wrong.push(`${file} -> fastify`);
      if (layer !== 'store' && ext.includes('pg')) wrong.push(`${file} -> pg`);
    }
    assert.deepEqual(wrong, []);
  });

  test('the server imports the SDK as its workspace package, never by a path into packages/', () => {
    const wrong = [...graph].flatMap(([file, deps]) => deps.filter((d) => d.startsWith('packages')).map((d) => `${file} -> ${d}`));
    assert.deepEqual(wrong, []);
  });

  test("the SDK's and the pages' API types cannot drift from the served schemas (npm run gen:types)", async () => {
    const files = await formatted(generateTypes());
    const stale = Object.entries(files)
      .filter(([rel, text]) => fs.readFileSync(path.join(root, rel), 'utf8') !== text)
      .map(([rel]) => rel);
    assert.deepEqual(stale, [], 'regenerate with npm run gen:types');
  });
});
