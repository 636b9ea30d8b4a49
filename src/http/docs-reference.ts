/**
 * The API reference at /docs: the served OpenAPI document (/docs/openapi.json) rendered in the
 * browser by Swagger UI, from the `swagger-ui-dist` package, served by the service itself (its
 * script and stylesheet under /docs/assets/; nothing is fetched from anywhere else, and the page's
 * Content-Security-Policy would refuse it). "Try it out" is off: every request must be signed with
 * the merchant's key, which a browser page does not hold. The page's header links to the pages
 * served beside it (authentication, errors, events, statements) and each of them links back here.
 *
 *   GET /docs                           the reference page (/docs/ redirects to it)
 *   GET /docs/assets/swagger-ui.js      Swagger UI's bundle (gzip when accepted)
 *   GET /docs/assets/swagger-ui.css     its stylesheet
 *   GET /docs/assets/reference.js       the few lines that start it on /docs/openapi.json
 *
 * Every link is relative (`docs/errors` from /docs), so the site works under a path prefix too.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { gzipSync } from 'node:zlib';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { NAV_STYLE, docsNav, htmlDocument } from './docs-pages.ts';

const resolve = createRequire(import.meta.url).resolve;

/** An asset held in memory once asked for (read on first use: a test app never reads 1.9 MB it does not serve). */
interface Asset {
  type: string;
  body: Buffer;
  gzip: Buffer;
}

function lazyAsset(type: string, read: () => string | Buffer): () => Asset {
  let asset: Asset | null = null;
  return () => {
    if (asset === null) {
      const body = Buffer.from(read());
      asset = { type, body, gzip: gzipSync(body) };
    }
    return asset;
  };
}

/** Starts Swagger UI on the document named by the container's data-url (relative to the page). */
const STARTER = `"use strict";
(function () {
  var el = document.getElementById("reference");
  window.ui = SwaggerUIBundle({
    url: new URL(el.getAttribute("data-url"), document.baseURI).href,
    domNode: el,
    deepLinking: true,
    docExpansion: "list",
    defaultModelsExpandDepth: 0,
    supportedSubmitMethods: [],
    validatorUrl: null,
    presets: [SwaggerUIBundle.presets.apis],
    layout: "BaseLayout"
  });
})();
`;

const ASSETS: Record<string, () => Asset> = {
  'swagger-ui.js': lazyAsset('text/javascript; charset=utf-8', () => readFileSync(resolve('swagger-ui-dist/swagger-ui-bundle.js'))),
  'swagger-ui.css': lazyAsset('text/css; charset=utf-8', () => readFileSync(resolve('swagger-ui-dist/swagger-ui.css'))),
  'reference.js': lazyAsset('text/javascript; charset=utf-8', () => STARTER),
};

/** The header of the reference page: the pages beside it, the document itself, the front page. */
export function referencePage(): string {
  return htmlDocument(
    'API reference - Merchant Payment Service',
    `<link rel="stylesheet" href="docs/assets/swagger-ui.css">\n<style>${NAV_STYLE}</style>`,
    `<nav>${docsNav('reference', true)}</nav>
<div id="reference" data-url="docs/openapi.json"><noscript><p>The rendered reference needs JavaScript: the same content is the <a href="docs/openapi.json">OpenAPI document</a>.</p></noscript></div>
<script src="docs/assets/swagger-ui.js"></script>
<script src="docs/assets/reference.js"></script>`,
  );
}

/** The reference's scripts come from this origin only; Swagger UI sets inline styles and draws data: images. */
export const REFERENCE_HEADERS = {
  'content-type': 'text/html; charset=utf-8',
  'content-security-policy': [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data:",
    "connect-src 'self'",
    "frame-ancestors 'none'",
    "base-uri 'none'",
    "form-action 'none'",
  ].join('; '),
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-cache',
} as const;

function sendAsset(req: FastifyRequest, reply: FastifyReply, asset: Asset): FastifyReply {
  reply.headers({
    'content-type': asset.type,
    'x-content-type-options': 'nosniff',
    'cache-control': 'public, max-age=3600',
    vary: 'accept-encoding',
  });
  const accepts = req.headers['accept-encoding'];
  if (typeof accepts === 'string' && /\bgzip\b/.test(accepts)) return reply.header('content-encoding', 'gzip').send(asset.gzip);
  return reply.send(asset.body);
}

/** The reference page and its assets, in the /docs scope. */
export function registerReference(scope: FastifyInstance): void {
  const html = referencePage();
  scope.get('/', async (req, reply) => {
    // /docs/ would resolve the page's relative links one level too deep.
    if (req.url.split('?')[0]!.endsWith('/')) return reply.code(301).header('location', '../docs').send();
    return reply.headers(REFERENCE_HEADERS).send(html);
  });
  for (const [name, asset] of Object.entries(ASSETS)) scope.get(`/assets/${name}`, async (req, reply) => sendAsset(req, reply, asset()));
}
