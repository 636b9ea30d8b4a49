/**
 * A DATABASE_URL of several nodes (src/store/primary.ts, docs/high-availability.md): the pool
 * connects to the first node that is a writable primary, skipping a dead one; a connection broken
 * under it is replaced by the next query with no restart; while no node answers, a query fails at
 * once with the reason (the request is answered 503). The nodes here are TCP relays to the test
 * server (TCP, or the embedded server's socket), so each can be cut or stopped; the failover itself is test/ha/failover.test.ts.
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config/config.ts';
import { type Db, createPool } from '../../src/store/db.ts';
import { parseNodes } from '../../src/store/primary.ts';
import { type TestDatabase, createTestDatabase } from '../helpers/db.ts';

/** A relay on a port of its own to the test server: `cut()` resets every connection, `close()` stops it. */
async function relay(to: { host: string; port: number } | { path: string }) {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((inbound) => {
    const outbound = 'path' in to ? net.connect(to.path) : net.connect(to.port, to.host);
    for (const s of [inbound, outbound]) {
      sockets.add(s);
      s.on('error', () => {});
      s.on('close', () => sockets.delete(s));
    }
    inbound.pipe(outbound).pipe(inbound);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  // A reset on TCP; a Unix socket (to the embedded server) can only be closed.
  const reset = (s: net.Socket) => (s.remoteAddress === undefined ? s.destroy() : s.resetAndDestroy());
  return {
    port: (server.address() as net.AddressInfo).port,
    cut: () => {
      for (const s of sockets) reset(s);
    },
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) reset(s);
        server.close(() => r());
      }),
  };
}

/** A port nothing listens on. */
async function deadPort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

describe('parsing a DATABASE_URL of several nodes', () => {
  test('nodes in order, default port 5432, IPv6 in brackets; target_session_attrs is applied by the pool, not passed on', () => {
    const p = parseNodes('postgres://u:pw@a.example:5433,[::1],b.example/db?target_session_attrs=read-write&sslmode=disable')!;
    assert.deepEqual(p.nodes, [
      { host: 'a.example', port: 5433 },
      { host: '::1', port: 5432 },
      { host: 'b.example', port: 5432 },
    ]);
    assert.equal(p.urlOf(p.nodes[1]!), 'postgres://u:pw@[::1]:5432/db?sslmode=disable');
    assert.equal(parseNodes('postgres://u@one:5432/db'), null, 'one node: the pool takes the URL as it is');
    assert.throws(() => parseNodes('postgres://u@a,b/db?target_session_attrs=read-only'), /read-only is not supported/);
    assert.throws(() => parseNodes('postgres://u@a,b/db?host=/run/postgresql'), /not in the query/);
  });

  test('the configuration accepts several nodes, checks each, and refuses a session kind the service cannot write on', () => {
    const url = 'postgres://svc@10.0.0.1:5432,10.0.0.2:5432/payments?target_session_attrs=read-write';
    assert.equal(loadConfig({ DATABASE_URL: url }).databaseUrl, url);
    assert.throws(() => loadConfig({ DATABASE_URL: 'postgres://svc@a,b/db?target_session_attrs=standby' }), ConfigError);
    assert.throws(() => loadConfig({ DATABASE_URL: 'postgres://svc@a:99999,b/db' }), ConfigError);
  });
});

describe('a pool following the primary', () => {
  let tdb: TestDatabase;
  /** The test server (over TCP, or the embedded one's socket) and the parts of its URL around the host. */
  let target: { host: string; port: number } | { path: string };
  let head: string;
  let rest: string;
  before(async () => {
    tdb = await createTestDatabase();
    const m = /^(postgres(?:ql)?:\/\/(?:[^@/]*@)?)([^/?]*)([^?]*)(?:\?(.*))?$/.exec(tdb.url)!;
    head = m[1]!;
    const params = new URLSearchParams(m[4] ?? '');
    const socketDir = params.get('host');
    const port = Number(params.get('port') ?? m[2]!.split(':')[1] ?? 5432);
    target = socketDir?.startsWith('/') ? { path: `${socketDir}/.s.PGSQL.${port}` } : { host: m[2]!.split(':')[0]!, port };
    params.delete('host');
    params.delete('port');
    rest = `${m[3]}${params.size > 0 ? `?${params}` : ''}`;
  });
  after(async () => {
    await tdb.drop();
  });

  test('skips a dead node, carries on over a broken connection with no restart, and fails at once while no node answers', async () => {
    const node = await relay(target);
    const dead = await deadPort();
    const db: Db = createPool(`${head}127.0.0.1:${dead},127.0.0.1:${node.port}${rest}`, 4);
    try {
      const port = async () => (await db.query<{ ok: number }>('SELECT 1 AS ok')).rows[0]!.ok;
      assert.equal(await port(), 1, 'the dead first node is skipped');
      node.cut(); // the primary's connections reset under the pool (its machine died, it restarted)
      let failed = 0;
      for (let i = 0; i < 5; i++) {
        try {
          assert.equal(await port(), 1);
          break;
        } catch {
          failed++;
        }
      }
      assert.ok(failed <= 1, 'at most the statement in flight on a broken connection fails; the next one reconnects');
      await node.close(); // no node answers
      // A statement on a connection that broke meanwhile fails with that break; the next ones find no node.
      const reasons: string[] = [];
      for (let i = 0; i < 3; i++) reasons.push(await port().then(String, (err: Error) => err.message));
      assert.match(reasons.at(-1)!, /no primary among the nodes of DATABASE_URL/, reasons.join('; '));
    } finally {
      await node.close();
      await db.end();
    }
  });
});
