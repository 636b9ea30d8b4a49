/**
 * The merchant's pages of docs/ (authentication, events, statements, errors, license), rendered to
 * HTML from the repository's markdown (once per process) and served under /docs beside the API
 * reference (src/http/docs-reference.ts), so the OpenAPI document links to them with absolute URLs
 * its reader can follow. Headings get GitHub's anchor ids, so `errors.md#the-closed-table` and
 * `/docs/errors#the-closed-table` name the same place; a link between two served pages is rewritten
 * to the served page, a link to a repository file the service also serves (the signing vectors, the
 * signing recipes) to its served copy, and any other link to the repository is dropped (its text
 * kept). HTML comments (the maintainers' notes: where a rule comes from, where it is measured) are
 * left out.
 */
import { readFileSync } from 'node:fs';
import { Marked, type Token } from 'marked';
import { escapeHtml } from '../lib/html.ts';

/** Served at /docs/{name}, from docs/{name}.md. */
export const DOC_PAGES = ['authentication', 'events', 'statements', 'errors', 'license'] as const;
export type DocPage = (typeof DOC_PAGES)[number];

/** Each page's name in the navigation. */
export const DOC_PAGE_LABELS: Record<DocPage, string> = {
  authentication: 'Authentication',
  events: 'Event notifications',
  statements: 'Statements',
  errors: 'Errors',
  license: 'License',
};

/**
 * Files of the repository served under /docs as they are (for merchants outside Node): the path
 * a page's markdown links to, the path served, its content type.
 */
export const DOC_FILES: readonly { repo: string; served: string; type: string }[] = [
  { repo: 'packages/sdk/test/vectors.json', served: 'signing-vectors.json', type: 'application/json; charset=utf-8' },
  { repo: 'recipes/java/MpsSigning.java', served: 'recipes/MpsSigning.java', type: 'text/plain; charset=utf-8' },
  { repo: 'recipes/python/mps_signing.py', served: 'recipes/mps_signing.py', type: 'text/plain; charset=utf-8' },
];

const DOCS_DIR = new URL('../../docs/', import.meta.url);
const ROOT_DIR = new URL('../../', import.meta.url);

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
 * A relative link to another served page's markdown (`errors.md#x`) becomes that page (`errors#x`),
 * one to a served file (`../recipes/java/MpsSigning.java`) its served copy. Any other relative link
 * names a file of the repository that the service does not serve: null (its text is kept, without
 * a link). Absolute links and anchors stay.
 */
function servedHref(href: string): string | null {
  const m = /^([a-z0-9-]+)\.md(#.*)?$/.exec(href);
  if (m && (DOC_PAGES as readonly string[]).includes(m[1]!)) return `${m[1]}${m[2] ?? ''}`;
  const file = DOC_FILES.find((f) => href === `../${f.repo}`);
  if (file) return file.served;
  return /^([a-z][a-z0-9+.-]*:|#)/i.test(href) ? href : null;
}

/** The bar above every page of /docs, the reference's included. */
export const NAV_STYLE = `nav{font:15px/1.5 system-ui,sans-serif;padding:.6em 1.5em;background:#f3f4f6;border-bottom:1px solid #ddd}
nav a,nav strong{margin-right:1.2em;white-space:nowrap}`;

/** The navigation of a page under /docs (`../docs` is the reference, `../` the front page). */
export function docsNav(current: DocPage | 'reference', fromReference = false): string {
  const at = fromReference ? 'docs/' : '';
  const link = (href: string, label: string, here: boolean) =>
    here ? `<strong aria-current="page">${escapeHtml(label)}</strong>` : `<a href="${href}">${escapeHtml(label)}</a>`;
  return [
    link(fromReference ? './' : '../', 'Home', false),
    link(fromReference ? 'docs' : '../docs', 'API reference', current === 'reference'),
    ...DOC_PAGES.map((p) => link(`${at}${p}`, DOC_PAGE_LABELS[p], current === p)),
    link(`${at}openapi.json`, 'OpenAPI document (JSON)', false),
  ].join('');
}

const STYLE = `body{font:16px/1.5 system-ui,sans-serif;margin:0;color:#1b1b1b}
${NAV_STYLE}
main{max-width:60em;padding:1em 1.5em 3em}
code,pre{font:14px/1.4 ui-monospace,monospace;background:#f3f4f6}pre{padding:.8em;overflow-x:auto}
table{border-collapse:collapse;margin:1em 0}th,td{border:1px solid #ccc;padding:.3em .6em;vertical-align:top;text-align:left}`;

/** An HTML document of this site: its head (title, what goes after it) and its body. */
export function htmlDocument(title: string, head: string, body: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>${escapeHtml(title)}</title>
${head}
</head>
<body>
${body}
</body>
</html>
`;
}

/** Renders one page: its title (the first heading) and the whole HTML document. */
export function renderDocPage(markdown: string, page: DocPage): { title: string; html: string } {
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
      // A maintainers' note (<!-- ... -->) is not for the page's reader.
      html({ text }) {
        return /^\s*<!--[\s\S]*?-->\s*$/.test(text) ? '' : text;
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
  const html = htmlDocument(
    `${title} - Merchant Payment Service`,
    `<style>${STYLE}</style>`,
    `<nav>${docsNav(page)}</nav>\n<main>\n${body}</main>`,
  );
  return { title, html };
}

let rendered: Map<DocPage, string> | null = null;

/** Every served page, rendered from docs/ (read once per process, at the first start: a missing file stops it). */
export function loadDocPages(): Map<DocPage, string> {
  rendered ??= new Map(DOC_PAGES.map((p) => [p, renderDocPage(readFileSync(new URL(`${p}.md`, DOCS_DIR), 'utf8'), p).html]));
  return rendered;
}

/** The served files' bytes, by served path (read once per process). */
let files: Map<string, { type: string; body: Buffer }> | null = null;
export function loadDocFiles(): Map<string, { type: string; body: Buffer }> {
  files ??= new Map(DOC_FILES.map((f) => [f.served, { type: f.type, body: readFileSync(new URL(f.repo, ROOT_DIR)) }]));
  return files;
}

/** Pages are static and hold no script: nothing may load, run or frame them. */
export const DOC_PAGE_HEADERS = {
  'content-type': 'text/html; charset=utf-8',
  'content-security-policy':
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-cache',
} as const;
