/**
 * The service's dependency graph (docs/architecture.md): no import circle anywhere in src/ (type
 * imports included), and each layer imports only the layers below it: HTTP surfaces -> use cases ->
 * domain, store, providers. Read from the source text, so it needs nothing running.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';

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

/** Which layers each layer may import (itself always). */
const ALLOWED: Record<string, string[]> = {
  lib: [],
  domain: ['net', 'lib'],
  config: ['domain', 'net', 'lib'],
  net: ['lib'],
  store: ['domain', 'platform', 'lib'],
  platform: ['domain', 'lib'],
  providers: ['domain', 'store', 'config', 'lib'],
  events: ['domain', 'store', 'platform', 'net', 'lib'],
  usecases: ['domain', 'store', 'providers', 'events', 'net', 'lib', 'config'],
  gate: ['domain', 'store', 'net', 'platform', 'lib'],
};

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

  test('each layer imports only the layers below it', () => {
    const wrong: string[] = [];
    for (const [file, deps] of graph) {
      const allowed = ALLOWED[layerOf(file)];
      if (allowed === undefined) continue; // the surfaces and the composition root may import any layer below them
      for (const d of deps) {
        const to = layerOf(d);
        // The worker runner's task shape is a type the dispatcher implements.
        if (to === layerOf(file) || allowed.includes(to) || (file === 'src/events/dispatcher.ts' && d === 'src/workers.ts')) continue;
        if (file.startsWith('src/events/') && d === 'src/usecases/deps.ts') continue; // the logger's shape
        wrong.push(`${file} -> ${d}`);
      }
    }
    assert.deepEqual(wrong, []);
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
});
