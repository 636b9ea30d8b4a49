/**
 * The console's front end, built from src/console/ui/ by esbuild when first asked for, once per
 * process: no build step beside `npm ci`, nothing built committed, and a change to the UI is live
 * at the next start. One ES module (Preact and the pages, minified, ~40 KB) and one stylesheet.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { build } from 'esbuild';

const UI_DIR = path.join(import.meta.dirname, 'ui');

export interface ConsoleAssets {
  script: string;
  css: string;
}

let assets: Promise<ConsoleAssets> | null = null;

async function bundle(): Promise<ConsoleAssets> {
  const r = await build({
    entryPoints: [path.join(UI_DIR, 'main.tsx')],
    bundle: true,
    write: false,
    format: 'esm',
    target: 'es2022',
    platform: 'browser',
    jsx: 'automatic',
    jsxImportSource: 'preact',
    minify: true,
    legalComments: 'none',
    logLevel: 'silent',
  });
  const css = await fs.readFile(path.join(UI_DIR, 'console.css'), 'utf8');
  return { script: r.outputFiles[0]!.text, css };
}

/** The built assets (a failed build is tried again at the next request). */
export function consoleAssets(): Promise<ConsoleAssets> {
  assets ??= bundle().catch((err: unknown) => {
    assets = null;
    throw err;
  });
  return assets;
}
