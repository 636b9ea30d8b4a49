/**
 * The front ends of the browser surfaces (the console, the portal), built from their TSX by esbuild
 * when first asked for, once per process: no build step beside `npm ci`, nothing built committed,
 * and a change to a UI is live at the next start. Each is one ES module (Preact and the pages,
 * minified) and one stylesheet (its CSS files, joined).
 */
import fs from 'node:fs/promises';
import { build } from 'esbuild';

export interface UiAssets {
  script: string;
  css: string;
}

async function bundle(entry: string, cssFiles: readonly string[]): Promise<UiAssets> {
  const r = await build({
    entryPoints: [entry],
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
  const css = (await Promise.all(cssFiles.map((f) => fs.readFile(f, 'utf8')))).join('\n');
  return { script: r.outputFiles[0]!.text, css };
}

/** A surface's assets, built at the first call (a failed build is tried again at the next one). */
export function uiAssets(entry: string, cssFiles: readonly string[]): () => Promise<UiAssets> {
  let assets: Promise<UiAssets> | null = null;
  return () => {
    assets ??= bundle(entry, cssFiles).catch((err: unknown) => {
      assets = null;
      throw err;
    });
    return assets;
  };
}
