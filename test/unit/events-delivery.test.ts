/**
 * Notification delivery without a database: the SSRF guard (with an injected resolver), the
 * pinned connection, redirects, response cap and deadline of the HTTP client, the retry
 * schedule, and the signature headers.
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync, verify } from 'node:crypto';
import fs from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { notificationSigningString } from '@mps/sdk/signing';
import { MAX_ATTEMPTS, RETRY_DELAYS_MS, attemptResult, retryDelayMs } from '../../src/events/dispatcher.ts';
import {
  EXCERPT_CHARS,
  type Resolver,
  cacheResolver,
  isAllowedTarget,
  limitResolver,
  postNotification,
  resolveTarget,
} from '../../src/events/safe-http.ts';
import { signNotification } from '../../src/events/signer.ts';
import { PlatformKeyRing } from '../../src/platform/keys.ts';

const STRICT = { allowLoopback: false, allowPrivateTargets: false };
const DEV = { allowLoopback: true, allowPrivateTargets: false };
const PRIVATE_OK = { allowLoopback: false, allowPrivateTargets: true };

describe('SSRF guard', () => {
  test('only public unicast addresses by default', () => {
    for (const a of ['8.8.8.8', '1.1.1.1', '2001:4860:4860::8888', '::ffff:8.8.8.8']) assert.ok(isAllowedTarget(a, STRICT), a);
    const refused = [
      '127.0.0.1',
      '127.1.2.3',
      '::1',
      '10.0.0.1',
      '172.16.5.4',
      '192.168.1.1',
      '169.254.169.254', // cloud metadata
      '100.64.0.1', // CGNAT
      '192.0.2.1', // documentation
      '198.18.0.1', // benchmarking
      'fc00::1',
      'fd12:3456::1',
      'fe80::1',
      '::ffff:10.0.0.1',
      '::ffff:127.0.0.1',
      '::a00:1', // IPv4-compatible
      '0.0.0.0',
      '::',
      '224.0.0.1',
      '255.255.255.255',
      'fe80::1%eth0',
      'not-an-ip',
    ];
    for (const a of refused) assert.equal(isAllowedTarget(a, STRICT), false, a);
  });

  test('loopback only where allowed; private ranges only when allowed; unspecified and multicast never', () => {
    assert.ok(isAllowedTarget('127.0.0.1', DEV));
    assert.ok(isAllowedTarget('::1', DEV));
    assert.equal(isAllowedTarget('10.0.0.1', DEV), false);
    assert.equal(isAllowedTarget('169.254.169.254', DEV), false);
    for (const a of ['10.0.0.1', '192.168.1.1', '169.254.169.254', 'fd00::1', '127.0.0.1']) assert.ok(isAllowedTarget(a, PRIVATE_OK), a);
    for (const a of ['0.0.0.0', '::', '224.0.0.1', 'ff02::1', '255.255.255.255']) {
      assert.equal(isAllowedTarget(a, { allowLoopback: true, allowPrivateTargets: true }), false, a);
    }
  });

  test('every resolved address must be allowed; literals are not resolved', async () => {
    const calls: string[] = [];
    const resolver =
      (answer: string[]): Resolver =>
      async (host) => {
        calls.push(host);
        return answer.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
      };
    assert.deepEqual(await resolveTarget('hooks.shop.example', STRICT, resolver(['93.184.216.34', '2606:2800:220:1::1'])), {
      address: '93.184.216.34',
      family: 4,
    });
    await assert.rejects(
      resolveTarget('hooks.shop.example', STRICT, resolver(['93.184.216.34', '10.0.0.8'])),
      /10\.0\.0\.8 is not an allowed/,
    );
    await assert.rejects(resolveTarget('hooks.shop.example', STRICT, resolver(['169.254.169.254'])), /not an allowed target/);
    await assert.rejects(resolveTarget('hooks.shop.example', STRICT, resolver([])), /no address/);
    calls.length = 0;
    await assert.rejects(resolveTarget('10.1.1.1', STRICT, resolver(['8.8.8.8'])), /10\.1\.1\.1/);
    assert.deepEqual(calls, [], 'an IP literal is checked as written');
  });

  test('lookups run at most max at a time (getaddrinfo holds a pool thread that signing needs), the others in order', async () => {
    let running = 0;
    let most = 0;
    const started: string[] = [];
    const gates = new Map<string, () => void>();
    const slow: Resolver = (host) => {
      started.push(host);
      running++;
      most = Math.max(most, running);
      return new Promise((resolve) => {
        gates.set(host, () => {
          running--;
          resolve([{ address: '93.184.216.34', family: 4 }]);
        });
      });
    };
    const limited = limitResolver(slow, 1);
    const a = limited('a.example');
    const b = limited('b.example');
    const c = limited('c.example');
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(started, ['a.example']);
    gates.get('a.example')!();
    assert.equal((await a)[0]!.address, '93.184.216.34');
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(started, ['a.example', 'b.example'], 'the next one starts when a slot frees');
    gates.get('b.example')!();
    await b;
    await new Promise((r) => setImmediate(r));
    gates.get('c.example')!();
    await c;
    assert.equal(most, 1);
  });
});

describe('resolver cache', () => {
  test('answers are reused for the TTL and failures for 10 s; one lookup per name for concurrent callers; the oldest name goes first', async () => {
    let t = 0;
    const asked: string[] = [];
    let fail = false;
    const base: Resolver = async (host) => {
      asked.push(host);
      await new Promise((r) => setImmediate(r));
      if (fail) throw Object.assign(new Error('no'), { code: 'ENOTFOUND' });
      return [{ address: '93.184.216.34', family: 4 }];
    };
    const r = cacheResolver(base, 30_000, 2, () => t);
    await Promise.all([r('a.example'), r('a.example'), r('a.example')]);
    await r('a.example');
    assert.deepEqual(asked, ['a.example'], 'one lookup shared, then the kept answer');
    t = 30_000;
    await r('a.example');
    assert.deepEqual(asked, ['a.example', 'a.example'], 'asked again after the TTL');
    fail = true;
    await assert.rejects(r('b.example'));
    await assert.rejects(r('b.example'));
    assert.deepEqual(asked.slice(2), ['b.example'], 'a failure is kept for a while');
    fail = false;
    t += 10_000;
    await r('b.example');
    assert.deepEqual(asked.slice(2), ['b.example', 'b.example'], 'and asked again after 10 s');
    await r('c.example');
    await r('a.example');
    assert.equal(asked.at(-1), 'a.example', 'a was the oldest of three names with room for two');
  });

  test('a name server that does not answer holds one of two slots: other names still resolve', async () => {
    const hang: Resolver = (host) =>
      host === 'dead.example' ? new Promise(() => {}) : Promise.resolve([{ address: '93.184.216.34', family: 4 }]);
    const r = cacheResolver(limitResolver(hang, 2), 30_000, 100);
    void r('dead.example');
    void r('dead.example'); // shares the first lookup: still one slot
    const other = await Promise.race([r('live.example'), new Promise((res) => setTimeout(() => res('blocked'), 200))]);
    assert.notEqual(other, 'blocked');
  });
});

describe('HTTP client', () => {
  let server: http.Server;
  let port = 0;
  const seen: { url: string; host: string | undefined }[] = [];
  const OPTS = { timeoutMs: 2000, maxResponseBytes: 65_536, policy: DEV };

  before(async () => {
    server = http.createServer((req, res) => {
      seen.push({ url: req.url ?? '', host: req.headers.host });
      req.resume();
      req.on('end', () => {
        if (req.url === '/ok') res.writeHead(204).end();
        else if (req.url === '/redirect') res.writeHead(307, { location: '/ok' }).end();
        else if (req.url === '/huge') {
          // 200 at once, then an endless body: the cap ends the exchange long before the deadline.
          res.writeHead(200);
          const chunk = Buffer.alloc(16_384, 'x');
          const pump = () => {
            while (res.write(chunk));
            res.once('drain', pump);
          };
          pump();
        } else if (req.url === '/hang') {
          /* never answers */
        } else res.writeHead(500).end();
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  const post = (url: string, o: Partial<typeof OPTS> & { resolver?: Resolver } = {}) =>
    postNotification(url, Buffer.from('{"eventId":"evt_1"}'), { 'Content-Type': 'application/json' }, { ...OPTS, ...o });

  test('connects to the checked address, resolving once (no second lookup to rebind)', async () => {
    let lookups = 0;
    const resolver: Resolver = async () => {
      lookups += 1;
      return lookups === 1 ? [{ address: '127.0.0.1', family: 4 }] : [{ address: '10.9.9.9', family: 4 }];
    };
    const out = await post(`http://rebind.localhost:${port}/ok`, { resolver });
    assert.deepEqual(out, { statusCode: 204, error: null, excerpt: null });
    assert.equal(lookups, 1);
    assert.equal(seen.at(-1)!.host, `rebind.localhost:${port}`, 'the Host header keeps the name');
  });

  test('a private answer is refused before any connection', async () => {
    const before = seen.length;
    const out = await post(`https://hooks.shop.example:${port}/ok`, {
      policy: STRICT,
      resolver: async () => [{ address: '192.168.0.10', family: 4 }],
    });
    assert.equal(out.statusCode, null);
    assert.match(out.error!, /^ADDRESS_NOT_ALLOWED: address 192\.168\.0\.10/);
    assert.equal(seen.length, before);
  });

  test('URL policy is applied again at delivery', async () => {
    assert.match((await post(`http://127.0.0.1:${port}/ok`, { policy: STRICT })).error!, /^URL_NOT_ALLOWED: must use https/);
    assert.match((await post(`http://user:pw@127.0.0.1:${port}/ok`)).error!, /^URL_NOT_ALLOWED: must not contain user info/);
    assert.match((await post(`ftp://127.0.0.1:${port}/ok`)).error!, /^URL_NOT_ALLOWED/);
  });

  test('a redirect is reported, not followed', async () => {
    const before = seen.length;
    assert.deepEqual(await post(`http://127.0.0.1:${port}/redirect`), { statusCode: 307, error: 'REDIRECT_NOT_FOLLOWED', excerpt: null });
    assert.deepEqual(
      seen.slice(before).map((s) => s.url),
      ['/redirect'],
    );
  });

  test('the response body is capped: the status counts, the connection is closed', async () => {
    // The body never ends: a 200 without error (not a TIMEOUT) means the cap ended the exchange.
    // The start of the answer is kept as its excerpt (EXCERPT_CHARS characters), nothing more.
    assert.deepEqual(await post(`http://127.0.0.1:${port}/huge`, { timeoutMs: 5000 }), {
      statusCode: 200,
      error: null,
      excerpt: 'x'.repeat(EXCERPT_CHARS),
    });
  });

  test('no answer within the deadline is a TIMEOUT', async () => {
    // /hang never answers: only the deadline ends the call.
    assert.deepEqual(await post(`http://127.0.0.1:${port}/hang`, { timeoutMs: 300 }), {
      statusCode: null,
      error: 'TIMEOUT',
      excerpt: null,
    });
  });

  test('the deadline covers name resolution too', async () => {
    const out = await post(`http://slow-dns.localhost:${port}/ok`, { timeoutMs: 200, resolver: () => new Promise(() => {}) });
    assert.deepEqual(out, { statusCode: null, error: 'TIMEOUT' });
  });

  test('https:// to a server that speaks plain HTTP is a TLS failure', async () => {
    const out = await post(`https://127.0.0.1:${port}/ok`);
    assert.equal(out.statusCode, null);
    assert.match(out.error!, /^TLS_FAILED: /);
  });

  test('a send on a kept connection the receiver reset after reading it goes again at once on a new one, signed afresh', async () => {
    const got: { nonce: string; socket: number }[] = [];
    const numbers = new WeakMap<object, number>();
    let connections = 0;
    const receiver = http.createServer((req, res) => {
      if (!numbers.has(req.socket)) numbers.set(req.socket, ++connections);
      req.resume();
      req.on('end', () => {
        got.push({ nonce: String(req.headers['x-nonce']), socket: numbers.get(req.socket)! });
        // The second request is read, then its connection reset before any answer.
        if (got.length === 2) req.socket.destroy();
        else res.writeHead(200).end();
      });
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    try {
      const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
      let signed = 1;
      const o = { ...OPTS, keepAlive: true, resign: async () => ({ 'x-nonce': `n${++signed}-again` }) };
      const body = Buffer.from('{"eventId":"evt_1"}');
      assert.equal((await postNotification(url, body, { 'x-nonce': 'n1' }, o)).statusCode, 200);
      const second = await postNotification(url, body, { 'x-nonce': 'n2' }, o);
      assert.equal(second.statusCode, 200, JSON.stringify(second));
      assert.deepEqual(
        got.map((g) => g.nonce),
        ['n1', 'n2', 'n2-again'],
        'the send again carries a new nonce',
      );
      assert.equal(got[0]!.socket, got[1]!.socket, 'the second went on the kept connection');
      assert.notEqual(got[2]!.socket, got[1]!.socket, 'the send again on a new one');
    } finally {
      receiver.closeAllConnections();
      await new Promise((r) => receiver.close(r));
    }
  });

  test('a refused connection is a failure without status', async () => {
    const closed = http.createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const p = (closed.address() as AddressInfo).port;
    await new Promise((r) => closed.close(r));
    assert.deepEqual(await post(`http://127.0.0.1:${p}/ok`), { statusCode: null, error: 'CONNECTION_REFUSED', excerpt: null });
  });
});

describe('schedule and signature', () => {
  test('retry schedule of decisions.md section 7, exactly (no jitter), then no more attempts', () => {
    assert.deepEqual(
      RETRY_DELAYS_MS.map((ms) => ms / 1000),
      [15, 30, 60, 180, 600, 1200, 1800, 3600, 10_800, 21_600, 43_200, 86_400],
    );
    assert.equal(MAX_ATTEMPTS, 13);
    assert.deepEqual(
      Array.from({ length: 13 }, (_, i) => retryDelayMs(i + 1)),
      [...RETRY_DELAYS_MS, null],
    );
  });

  test("an attempt's outcome: any 2xx delivers; anything else waits the schedule's next step, and the last makes it dead", () => {
    const now = 1_700_000_000_000;
    for (const statusCode of [200, 204, 299]) {
      assert.deepEqual(attemptResult(3, { statusCode, error: null }, now), {
        ok: true,
        attempts: 4,
        status: 'DELIVERED',
        nextAttemptAt: null,
        lastError: null,
      });
    }
    assert.deepEqual(attemptResult(0, { statusCode: 500, error: null }, now), {
      ok: false,
      attempts: 1,
      status: 'PENDING',
      nextAttemptAt: new Date(now + 15_000),
      lastError: 'HTTP 500',
    });
    assert.deepEqual(
      attemptResult(1, { statusCode: 302, error: 'REDIRECT_NOT_FOLLOWED' }, now).lastError,
      'HTTP 302 REDIRECT_NOT_FOLLOWED',
    );
    assert.deepEqual(attemptResult(2, { statusCode: null, error: 'TIMEOUT' }, now), {
      ok: false,
      attempts: 3,
      status: 'PENDING',
      nextAttemptAt: new Date(now + 60_000),
      lastError: 'TIMEOUT',
    });
    const last = attemptResult(MAX_ATTEMPTS - 1, { statusCode: 503, error: null }, now);
    assert.equal(last.status, 'DEAD');
    assert.equal(last.nextAttemptAt, null);
  });

  test('signed headers verify over the exact body bytes', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'mps-signer-'));
    try {
      const file = path.join(dir, 'key.pem');
      const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
      await fs.writeFile(file, privateKey.export({ type: 'pkcs8', format: 'pem' }));
      const ring = await PlatformKeyRing.load({ keyFile: file, dataDir: dir, log: () => {} });
      const body = Buffer.from('{"eventId":"evt_x","attach":"\u4e2d\u6587"}');
      const h = await signNotification(ring, 'evt_x', body, 1_700_000_000_999);
      assert.equal(h['X-SVC-Notify-Timestamp'], '1700000000');
      assert.match(h['X-SVC-Notify-Nonce'], /^[A-Za-z0-9]{32}$/);
      assert.equal(h['X-SVC-Notify-Key-Id'], ring.list()[0]!.keyId);
      const s = notificationSigningString({
        timestamp: h['X-SVC-Notify-Timestamp'],
        nonce: h['X-SVC-Notify-Nonce'],
        eventId: 'evt_x',
        body,
      });
      assert.ok(verify('sha256', Buffer.from(s), ring.list()[0]!.publicKeyPem, Buffer.from(h['X-SVC-Notify-Sign'], 'base64')));
      ring.unavailable = true;
      await assert.rejects(signNotification(ring, 'evt_x', body, Date.now()), { name: 'SigningKeyUnavailableError' });
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });
});
