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
import { JOB_KINDS } from '../../src/domain/jobs.ts';

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

/**
 * Layers below the surfaces that must not know HTTP statuses. Providers and events are HTTP clients
 * of the outside (a provider's answer, a notify URL's answer, a provider notification's
 * acknowledgement by the provider's protocol): they read statuses, but never the service's own.
 */
const NO_HTTP_STATUS = ['usecases', 'store', 'domain', 'platform', 'config', 'net', 'lib', 'services'];
/** Layers where not even the name of an HTTP status appears: a use case's answer is a result or a DomainError. */
const NO_STATUS_CODE = ['usecases', 'domain'];
/** An answer's HTTP status by name. */
const STATUS_CODE_RE = /\bstatusCode\b|\breply\.code\(/;
/** A status compared with, or written as, an HTTP status number. */
const HTTP_STATUS_RE = [
  /\bstatus(?:Code)?\s*(?:===|!==|==|!=|<=|>=|<|>|:)\s*[1-5]\d\d\b/,
  /\b[1-5]\d\d\s*(?:===|!==|==|!=|<=|>=|<|>)\s*[\w.]*status/i,
];
/** A PostgreSQL error recognised by its SQLSTATE (code === '23505'): only src/store/ may (src/store/errors.ts names them). */
const SQLSTATE_RE =
  /\bcode\s*(?:===|!==|==|!=)\s*['"]\d{2}[0-9A-Z]{3}['"]|\bSQLSTATE\b|['"](?:08|22|23|25|40|42|53|55|57)[0-9A-Z]{3}['"][^;\n]{0,60}\.code\b/;

/** The tables of the state machines (src/domain/states.ts), each with its state column. */
const MACHINE_COLUMNS: Record<string, string> = {
  orders: 'status',
  attempts: 'state',
  refunds: 'state',
  provider_trades: 'state',
  duplicate_payments: 'refund_state',
  events: 'status',
  reconciliation_runs: 'status',
  request_replays: 'state',
};

/**
 * The UPDATE statements of a store module that set a machine's state column without a WHERE
 * condition on that column (`state = $n`, `state = 'X'`, `state IN (...)`, `state = i."from"`): a change applied
 * whatever the row's state, as `setDuplicateRefundState` once overwrote a REFUNDED duplicate.
 */
function unguardedStateWrites(text: string): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(/\bUPDATE\s+(\w+)\b/g)) {
    const col = MACHINE_COLUMNS[m[1]!];
    if (!col) continue;
    const rest = text.slice(m.index + m[0].length);
    const ends = ['`', '.query', 'UPDATE '].map((e) => rest.indexOf(e)).filter((i) => i >= 0);
    const stmt = rest.slice(0, Math.min(rest.length, ...ends));
    const where = stmt.search(/\bWHERE\b/);
    const set = where < 0 ? stmt : stmt.slice(0, where);
    if (!new RegExp(`(?:\\bSET|,)\\s*${col}\\s*=`).test(set)) continue;
    // `= $n`, `= 'X'`, `IN (...)`, or a batch's own source state (`= i."from"`, a transition per row).
    const guard = new RegExp(`\\b(?:\\w+\\.)?${col}\\s*(?:=\\s*(?:\\$\\d+|'[A-Z_]+'|\\w+\\."from")|IN\\b)`);
    if (where < 0 || !guard.test(stmt.slice(where))) out.push(`${m[0]} ${stmt.trim().split('\n')[0]!.slice(0, 80)}`);
  }
  return out;
}

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

  test('no answer status by name in use cases and the domain', () => {
    const wrong = [...graph.keys()]
      .filter((f) => NO_STATUS_CODE.includes(layerOf(f)))
      .flatMap((f) => {
        const m = STATUS_CODE_RE.exec(codeOf(f));
        return m ? [`${f}: ${m[0]}`] : [];
      });
    assert.deepEqual(wrong, []);
  });

  test("the service's answer statuses are the surfaces': none is written below them, providers and events included", () => {
    const writes = /\b(?:reply|res)\.(?:code|status)\(\s*[1-5]\d\d\b|\bstatusCode\s*=\s*[1-5]\d\d\b/;
    const wrong = [...graph.keys()]
      .filter((f) => [...NO_HTTP_STATUS, 'providers', 'events'].includes(layerOf(f)))
      .flatMap((f) => {
        const m = writes.exec(codeOf(f));
        return m ? [`${f}: ${m[0]}`] : [];
      });
    assert.deepEqual(wrong, []);
  });

  test('the job kinds are listed in one place (src/domain/jobs.ts; src/workers.ts maps each to its handler)', () => {
    const kinds = Object.keys(JOB_KINDS);
    assert.ok(kinds.length > 5, 'the kinds were read');
    const alt = kinds.join('|');
    const wrong = [...graph.keys()]
      .filter((f) => f !== path.join('src', 'domain', 'jobs.ts') && f !== path.join('src', 'workers.ts'))
      .filter((f) => {
        const text = codeOf(f);
        // An array of three kinds or more, or an object keyed by three kinds or more.
        const inArray = [...text.matchAll(/\[[^[\]]*\]/g)].some((m) => (m[0].match(new RegExp(`'(?:${alt})'`, 'g')) ?? []).length >= 3);
        const keys = (text.match(new RegExp(`^\\s*(?:${alt}):`, 'gm')) ?? []).length;
        return inArray || keys >= 3;
      });
    assert.deepEqual(wrong, []);
  });

  test('every state change the store writes is guarded by its source states (the transition tables)', () => {
    const wrong = [...graph.keys()]
      .filter((f) => layerOf(f) === 'store')
      .flatMap((f) => unguardedStateWrites(fs.readFileSync(path.join(root, f), 'utf8')).map((w) => `${f}: ${w}`));
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
    assert.ok(SQLSTATE_RE.test("if (['40001', '40P01'].includes(err.code)) retry();"), 'a list of SQLSTATEs');
    assert.ok(!SQLSTATE_RE.test("['40001', 'a required argument is missing (isv.missing-*)'],"), "a provider's own code");
    assert.ok(STATUS_CODE_RE.test('return { statusCode: 409 }'));
    assert.deepEqual(
      unguardedStateWrites("db.query('UPDATE duplicate_payments SET refund_state = $2, provider_ref = $3 WHERE id = $1', [id]);").length,
      1,
      'the unguarded duplicate refund write is found',
    );
    assert.deepEqual(unguardedStateWrites('q(`UPDATE refunds SET state = $3 WHERE id = $1 AND state = $2`)'), []);
    assert.deepEqual(unguardedStateWrites('q(`UPDATE events SET status = i.status FROM i WHERE events.status IN ${X}`)'), []);
    assert.deepEqual(unguardedStateWrites('q(`UPDATE events SET status = i."to" FROM i WHERE events.status = i."from"`)'), []);
    assert.equal(unguardedStateWrites('q(`UPDATE events SET status = i."to" FROM i WHERE events.id = i.event_id`)').length, 1);
    assert.deepEqual(unguardedStateWrites('q(`UPDATE orders SET close_pending = NULL WHERE id = $1`)'), [], 'not a state change');
    assert.ok(!STATUS_CODE_RE.test('const status = order.status;'));
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
