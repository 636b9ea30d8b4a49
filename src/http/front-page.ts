/**
 * The front page at /: what this service is and where its surfaces are (the API reference, the
 * operators' console, the merchant portal, health). A link is shown only when its route is
 * mounted, so a surface that is not there is never linked. It shows nothing about this instance:
 * no token, no setting, no version.
 */
import type { FastifyInstance } from 'fastify';
import { escapeHtml } from '../lib/html.ts';
import { DOC_PAGE_HEADERS, htmlDocument } from './docs-pages.ts';

export interface FrontLink {
  /** Relative to the front page, so that it works under a path prefix. */
  path: string;
  label: string;
  what: string;
}

/** Every surface the front page may link to, in its order. */
export const FRONT_LINKS: readonly FrontLink[] = [
  {
    path: 'docs',
    label: 'API reference',
    what: 'the open API for merchants, rendered from its OpenAPI document, with authentication, errors, event notifications and statements',
  },
  { path: 'portal', label: 'Merchant portal', what: "a merchant's own orders, refunds and settings" },
  { path: 'console', label: "Operators' console", what: 'the back office: merchants, apps, keys, orders, events, reconciliation' },
  { path: 'healthz', label: 'Health', what: 'answers {"status":"ok"} while the service runs' },
];

/** The page, with the links whose route exists. */
export function frontPage(mounted: (path: string) => boolean): string {
  const items = FRONT_LINKS.filter((l) => mounted(l.path))
    .map((l) => `<li><a href="${escapeHtml(l.path)}">${escapeHtml(l.label)}</a>: ${escapeHtml(l.what)}</li>`)
    .join('\n');
  return htmlDocument(
    'Merchant Payment Service',
    `<style>body{font:16px/1.5 system-ui,sans-serif;margin:0;color:#1b1b1b}
main{max-width:50em;padding:1em 1.5em 3em}li{margin:.4em 0}</style>`,
    `<main>
<h1>Merchant Payment Service</h1>
<p>A server-to-server payment API: merchants create orders, refunds and read their settlement with
requests signed by their own key; every answer and every event notification is signed by the
platform.</p>
<ul>
${items}
</ul>
</main>`,
  );
}

/** GET / on the server: the page is made at its first request, when every surface is mounted. */
export function registerFrontPage(server: FastifyInstance): void {
  let html: string | null = null;
  const mounted = (path: string) =>
    server.hasRoute({ method: 'GET', url: `/${path}` }) || server.hasRoute({ method: 'GET', url: `/${path}/` });
  server.get('/', async (req, reply) => {
    // The router also hands this route the asterisk-form target (`GET *`), which names no page.
    if (!req.url.startsWith('/')) return reply.callNotFound();
    return reply.headers(DOC_PAGE_HEADERS).send((html ??= frontPage(mounted)));
  });
}
