/**
 * The merchant's pages of docs/ (authentication, events, statements, errors, license), rendered to HTML from
 * the repository's markdown when the service starts and served under /docs, so the OpenAPI
 * document links to them with absolute URLs its reader can follow. Headings get GitHub's anchor
 * ids, so `errors.md#the-closed-table` and `/docs/errors#the-closed-table` name the same place;
 * a link between two served pages is rewritten to the served page.
 */
import { readFileSync } from 'node:fs';
import { Marked, type Token } from 'marked';
import { escapeHtml } from '../lib/html.ts';

/** Served at /docs/{name}, from docs/{name}.md. */
export const DOC_PAGES = ['authentication', 'events', 'statements', 'errors', 'license'] as const;
export type DocPage = (typeof DOC_PAGES)[number];

const DOCS_DIR = new URL('../../docs/', import.meta.url);

/** The text a reader sees in inline tokens (code spans without their backticks, links without their targets). */
function plainText(tokens: readonly Token[]): string {
  return tokens.map((t) => ('tokens' in t && t.tokens ? plainText(t.tokens) : 'text' in t ? String(t.text) : '')).join('');
}

/** GitHub's heading anchor: lower case, punctuation other than `-` and `_` dropped, each space a `-`. */
export function headingSlug(text: string): string {
  return text
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\p{M} _-]/gu, '')
    .replace(/ /g, '-');
}

/**
 * A relative link to another served page's markdown (`errors.md#x`) becomes that page (`errors#x`).
 * Any other relative link names a file of the repository that the service does not serve: null
 * (its text is kept, without a link). Absolute links and anchors stay.
 */
function servedHref(href: string): string | null {
  const m = /^([a-z0-9-]+)\.md(#.*)?$/.exec(href);
  if (m && (DOC_PAGES as readonly string[]).includes(m[1]!)) return `${m[1]}${m[2] ?? ''}`;
  return /^([a-z][a-z0-9+.-]*:|#)/i.test(href) ? href : null;
}

const STYLE = `body{font:16px/1.5 system-ui,sans-serif;margin:0;color:#1b1b1b}
nav{padding:.6em 1.5em;background:#f3f4f6;border-bottom:1px solid #ddd}nav a{margin-right:1.2em}
main{max-width:60em;padding:1em 1.5em 3em}
code,pre{font:14px/1.4 ui-monospace,monospace;background:#f3f4f6}pre{padding:.8em;overflow-x:auto}
table{border-collapse:collapse;margin:1em 0}th,td{border:1px solid #ccc;padding:.3em .6em;vertical-align:top;text-align:left}`;

/** Renders one page: its title (the first heading) and the whole HTML document. */
export function renderDocPage(markdown: string): { title: string; html: string } {
  const seen = new Map<string, number>();
  let title = '';
  const marked = new Marked({
    gfm: true,
    renderer: {
      link({ href, tokens }) {
        const served = servedHref(href);
        const text = this.parser.parseInline(tokens);
        return served === null ? text : `<a href="${escapeHtml(served)}">${text}</a>`;
      },
      heading({ tokens, depth }) {
        const text = plainText(tokens);
        if (title === '') title = text;
        const base = headingSlug(text);
        const n = seen.get(base) ?? 0;
        seen.set(base, n + 1);
        const id = n === 0 ? base : `${base}-${n}`;
        return `<h${depth} id="${escapeHtml(id)}">${this.parser.parseInline(tokens)}</h${depth}>\n`;
      },
    },
  });
  const body = marked.parse(markdown, { async: false });
  const nav = DOC_PAGES.map((p) => `<a href="${p}">${p[0]!.toUpperCase()}${p.slice(1)}</a>`).join('');
  const html = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)} - Merchant Payment Service</title>
<style>${STYLE}</style>
</head>
<body>
<nav>${nav}<a href="openapi.json">OpenAPI document</a></nav>
<main>
${body}</main>
</body>
</html>
`;
  return { title, html };
}

/** Every served page, rendered from docs/ (read once, at start: a missing file stops the start). */
export function loadDocPages(): Map<DocPage, string> {
  return new Map(DOC_PAGES.map((p) => [p, renderDocPage(readFileSync(new URL(`${p}.md`, DOCS_DIR), 'utf8')).html]));
}

/** Pages are static and hold no script: nothing may load, run or frame them. */
export const DOC_PAGE_HEADERS = {
  'content-type': 'text/html; charset=utf-8',
  'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-cache',
} as const;
