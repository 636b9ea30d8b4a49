/**
 * What a merchant finds in a browser without the repository: the front page at /, the API
 * reference at /docs (Swagger UI from the npm package, served here), the pages beside it and the
 * files they link to. Nothing names a repository path, and nothing secret is shown. The rendering
 * itself is checked in a browser (test/browser/docs.test.ts).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { after, before, describe, test } from 'node:test';
import { DOC_FILES, DOC_PAGES } from '../../src/http/docs-pages.ts';
import { FRONT_LINKS, frontPage } from '../../src/http/front-page.ts';
import { ADMIN_TOKEN, type TestApp, startTestApp } from '../helpers/app.ts';

const root = path.resolve(import.meta.dirname, '../..');

/** A path of this repository as a reader would meet it in text (`packages/sdk/...`, `docs/x.md`, `../recipes/`). */
const REPOSITORY_PATH =
  /(?:^|[\s`'"([])(?:\.{1,2}\/)*(?:src|test|docs|packages|recipes|scripts|bench|simulators|migrations|node_modules)\/[\w.-]|\b[\w-]+\.md\b|\.\.\/shared\b/;

let t: TestApp;
before(async () => {
  t = await startTestApp();
});
after(() => t.stop());

const get = (url: string, headers: Record<string, string> = {}) => t.server.inject({ method: 'GET', url, headers });

/** The visible text of an HTML page (tags, scripts' sources and comments aside). */
function text(html: string): string {
  return html
    .replace(/<!--[\s\S]*?-->/g, '')
    .replace(/<[^>]+>/g, ' ')
    .replace(/&[a-z]+;|&#\d+;/g, ' ');
}

describe('the front page', () => {
  test('links the API reference, the console and health, relative to itself, and shows nothing secret', async () => {
    const r = await get('/');
    assert.equal(r.statusCode, 200);
    assert.equal(r.headers['content-type'], 'text/html; charset=utf-8');
    assert.match(String(r.headers['content-security-policy']), /default-src 'none'/);
    const hrefs = [...r.body.matchAll(/href="([^"]+)"/g)].map((m) => m[1]!).filter((h) => !h.startsWith('data:'));
    for (const href of ['docs', 'console', 'healthz']) assert.ok(hrefs.includes(href), `links ${href}`);
    for (const href of hrefs) {
      const a = await get(`/${href}`);
      assert.equal(a.statusCode, 200, `${href} answers`);
    }
    assert.ok(!r.body.includes(ADMIN_TOKEN), 'not the admin token');
    assert.doesNotMatch(r.body, /token|password|secret|DATABASE_URL|REDIS_URL/i);
  });

  test('a surface whose route is not mounted is not linked (the portal, on a service without one)', () => {
    const all = frontPage(() => true);
    for (const l of FRONT_LINKS) assert.ok(all.includes(`href="${l.path}"`), l.path);
    const some = frontPage((p) => p !== 'portal');
    assert.ok(!some.includes('href="portal"'));
    assert.ok(some.includes('href="docs"'));
  });

  test('the portal is linked exactly when the service mounts it', async () => {
    const mounted = t.server.hasRoute({ method: 'GET', url: '/portal' }) || t.server.hasRoute({ method: 'GET', url: '/portal/' });
    assert.equal((await get('/')).body.includes('href="portal"'), mounted);
  });
});

describe('the API reference at /docs', () => {
  test('a page that loads Swagger UI from this service onto /docs/openapi.json, with links to the pages beside it', async () => {
    const r = await get('/docs');
    assert.equal(r.statusCode, 200);
    assert.equal(r.headers['content-type'], 'text/html; charset=utf-8');
    const csp = String(r.headers['content-security-policy']);
    assert.match(csp, /default-src 'none'/);
    assert.match(csp, /script-src 'self'(;|$)/, 'scripts from this origin only');
    assert.match(csp, /connect-src 'self'(;|$)/, 'nothing fetched from elsewhere');
    const srcs = [...r.body.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!).filter((h) => !h.startsWith('data:'));
    for (const s of srcs) assert.doesNotMatch(s, /^(https?:)?\/\//, `${s} is relative`);
    for (const p of DOC_PAGES) assert.ok(srcs.includes(`docs/${p}`), `links docs/${p}`);
    assert.ok(srcs.includes('docs/openapi.json'));
    assert.match(r.body, /data-url="docs\/openapi\.json"/);
    for (const s of srcs) {
      const a = await get(new URL(s, 'http://x/docs').pathname);
      assert.equal(a.statusCode, 200, `${s} answers`);
    }
  });

  test('its script and stylesheet are the npm package’s, gzipped when the browser accepts it', async () => {
    const js = await get('/docs/assets/swagger-ui.js');
    assert.equal(js.statusCode, 200);
    assert.equal(js.headers['content-type'], 'text/javascript; charset=utf-8');
    const bundle = fs.readFileSync(path.join(root, 'node_modules/swagger-ui-dist/swagger-ui-bundle.js'));
    assert.deepEqual(js.rawPayload, bundle);
    const gz = await get('/docs/assets/swagger-ui.js', { 'accept-encoding': 'gzip, deflate, br' });
    assert.equal(gz.headers['content-encoding'], 'gzip');
    assert.equal(gz.headers.vary, 'accept-encoding');
    assert.deepEqual(gunzipSync(gz.rawPayload), bundle);
    assert.ok(gz.rawPayload.length < bundle.length / 2);
    const css = await get('/docs/assets/swagger-ui.css');
    assert.equal(css.headers['content-type'], 'text/css; charset=utf-8');
    assert.deepEqual(css.rawPayload, fs.readFileSync(path.join(root, 'node_modules/swagger-ui-dist/swagger-ui.css')));
    const starter = await get('/docs/assets/reference.js');
    assert.match(starter.body, /supportedSubmitMethods: \[\]/, 'no "Try it out": requests must be signed');
    assert.match(starter.body, /validatorUrl: null/, "no call to Swagger's online validator");
  });

  test('/docs/ sends the browser to /docs, where the relative links resolve', async () => {
    const r = await get('/docs/');
    assert.equal(r.statusCode, 301);
    assert.equal(new URL(String(r.headers.location), 'http://x/docs/').pathname, '/docs');
  });
});

describe('what a merchant reads names no repository path', () => {
  test('the pages under /docs link back to the reference and the front page; their text names no repository path', async () => {
    for (const p of DOC_PAGES) {
      const r = await get(`/docs/${p}`);
      assert.ok(r.body.includes('href="../docs"'), `${p} links the reference`);
      assert.ok(r.body.includes('href="../"'), `${p} links the front page`);
      const found = REPOSITORY_PATH.exec(text(r.body));
      assert.equal(found, null, `/docs/${p} reads "${found?.input.slice(Math.max(0, found.index - 60), found.index + 60)}"`);
      assert.doesNotMatch(r.body, /<!--/, `${p}: the maintainers' notes are left out`);
    }
  });

  test('nor does the OpenAPI document', async () => {
    const doc = (await get('/docs/openapi.json')).body;
    const found = REPOSITORY_PATH.exec(doc);
    assert.equal(found, null, `openapi.json reads "${found?.input.slice(Math.max(0, found.index - 60), found.index + 60)}"`);
  });

  test('the repository files the pages link to are served as they are', async () => {
    const auth = (await get('/docs/authentication')).body;
    for (const f of DOC_FILES) {
      assert.ok(auth.includes(`href="${f.served}"`), `authentication links ${f.served}`);
      const r = await get(`/docs/${f.served}`);
      assert.equal(r.statusCode, 200, f.served);
      assert.equal(r.headers['content-type'], f.type);
      assert.deepEqual(r.rawPayload, fs.readFileSync(path.join(root, f.repo)));
    }
  });

  test('the pattern finds what it is for', () => {
    for (const s of ['see packages/sdk/README.md', '(docs/performance.md)', '`test/e2e/x.test.ts`', 'in ../recipes/README', 'errors.md'])
      assert.match(s, REPOSITORY_PATH, s);
    for (const s of ['GET /docs/openapi.json', '/api/open/v1/payments', 'application/json', '@mps/sdk', 'text/csv'])
      assert.doesNotMatch(s, REPOSITORY_PATH, s);
  });
});
