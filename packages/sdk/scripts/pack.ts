/**
 * `npm pack` / `npm publish` of @mps/sdk (the package's prepack and postpack scripts).
 *
 * In this repository the package is a workspace whose manifest points at the TypeScript sources
 * (`exports` -> ./src/*.ts), so that the service imports `@mps/sdk/signing` and runs it directly,
 * with no build step and no flag. A published package must point at JavaScript instead:
 *
 *   prepack   compiles src/ into dist/ (ESM and declarations; CommonJS in dist/cjs) for Node 18+,
 *             then stages the publish manifest over package.json (the workspace one kept aside);
 *   postpack  puts the workspace manifest back.
 *
 * npm reads the files to pack, package.json included, after prepack, so the tarball carries the
 * staged manifest. A pack cut short between the two steps leaves the staged manifest in place;
 * the next prepack (or `node scripts/pack.ts postpack`) restores the workspace one first.
 * dist/ is kept after a pack (git-ignored, rebuilt from scratch by every prepack): a process that
 * resolved the package while the staged manifest was in place goes on finding its files.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

const dir = path.resolve(import.meta.dirname, '..');
const manifestFile = path.join(dir, 'package.json');
const workspaceCopy = path.join(dir, '.package.workspace.json');

type Manifest = Record<string, unknown> & { exports: Record<string, string>; bin: Record<string, string> };

/** `./src/x.ts` -> `./dist/x.js` (or `./dist/cjs/x.d.ts` ...). */
function built(source: string, sub: '' | 'cjs/', ext: '.js' | '.d.ts'): string {
  const m = /^\.\/src\/(.+)\.ts$/.exec(source);
  if (!m) throw new Error(`package.json points at ${source}; expected ./src/NAME.ts`);
  return `./dist/${sub}${m[1]}${ext}`;
}

/** The manifest of the packed package: the workspace one, pointed at dist/. */
function publishManifest(ws: Manifest): Record<string, unknown> {
  const exports: Record<string, unknown> = {};
  for (const [subpath, source] of Object.entries(ws.exports)) {
    exports[subpath] = {
      import: { types: built(source, '', '.d.ts'), default: built(source, '', '.js') },
      require: { types: built(source, 'cjs/', '.d.ts'), default: built(source, 'cjs/', '.js') },
    };
  }
  exports['./package.json'] = './package.json';
  const root = ws.exports['.'];
  if (root === undefined) throw new Error('package.json has no "." export');
  const { scripts: _scripts, exports: _exports, bin, ...rest } = ws;
  return {
    ...rest,
    engines: { node: '>=18' },
    main: built(root, 'cjs/', '.js'),
    types: built(root, '', '.d.ts'),
    exports,
    bin: Object.fromEntries(Object.entries(bin).map(([name, source]) => [name, built(source, '', '.js')])),
  };
}

function writeAtomically(file: string, text: string): void {
  fs.writeFileSync(`${file}.tmp`, text);
  fs.renameSync(`${file}.tmp`, file);
}

function restoreWorkspaceManifest(): void {
  if (fs.existsSync(workspaceCopy)) fs.renameSync(workspaceCopy, manifestFile);
}

function tsc(project: string): void {
  const bin = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  const r = spawnSync(process.execPath, [bin, '-p', project], { cwd: dir, stdio: 'inherit' });
  if (r.status !== 0) throw new Error(`tsc -p ${project} failed`);
}

/**
 * Declarations keep the sources' `./x.ts` specifiers (tsc rewrites them in JavaScript only);
 * consumers resolve `./x.js` to `./x.d.ts` with any TypeScript version.
 */
function rewriteDeclarationSpecifiers(folder: string): void {
  for (const entry of fs.readdirSync(folder, { withFileTypes: true, recursive: true })) {
    if (!entry.isFile() || !entry.name.endsWith('.d.ts')) continue;
    const file = path.join(entry.parentPath, entry.name);
    const text = fs.readFileSync(file, 'utf8');
    fs.writeFileSync(file, text.replace(/((?:from|import\()\s*['"]\.{1,2}\/[^'"]+)\.ts(['"])/g, '$1.js$2'));
  }
}

function prepack(): void {
  restoreWorkspaceManifest();
  const dist = path.join(dir, 'dist');
  fs.rmSync(dist, { recursive: true, force: true });
  tsc('tsconfig.build.json');
  tsc('tsconfig.cjs.json');
  // package.json is "type": "module"; dist/cjs holds CommonJS .js files.
  fs.writeFileSync(path.join(dist, 'cjs', 'package.json'), '{ "type": "commonjs" }\n');
  rewriteDeclarationSpecifiers(dist);
  const text = fs.readFileSync(manifestFile, 'utf8');
  const staged = publishManifest(JSON.parse(text) as Manifest);
  fs.writeFileSync(workspaceCopy, text);
  writeAtomically(manifestFile, `${JSON.stringify(staged, null, 2)}\n`);
}

const step = process.argv[2];
if (step === 'prepack') prepack();
else if (step === 'postpack') restoreWorkspaceManifest();
else {
  process.stderr.write('usage: node scripts/pack.ts prepack|postpack\n');
  process.exitCode = 2;
}
