/** PostgreSQL access: one pool, a transaction helper, and the migration runner. */
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { PrimaryFinder, followingClient, parseNodes } from './primary.ts';

// bigint (int8) columns hold fen amounts; they fit in a JS number (schema caps at 1e10 per order
// and sums stay far below 2^53), so parse them as numbers.
pg.types.setTypeParser(20, (v) => Number(v));

export type Db = pg.Pool;
export type Tx = pg.PoolClient;
export type Queryable = pg.Pool | pg.PoolClient;

/**
 * The pool of a DATABASE_URL. An address of several nodes (`host1:port,host2:port`) gives a pool
 * that follows their primary (src/store/primary.ts, docs/high-availability.md).
 */
export function createPool(connectionString: string, max = 20): pg.Pool {
  const ha = parseNodes(connectionString);
  const options: pg.PoolConfig = { connectionString, max, idleTimeoutMillis: 30_000, connectionTimeoutMillis: 10_000 };
  if (ha !== null) {
    const finder = new PrimaryFinder(ha.nodes, ha.urlOf);
    // keepAlive: a primary whose machine is gone (no reset sent) is noticed on an idle connection too.
    Object.assign(options, { connectionString: ha.urlOf(ha.nodes[0]!), Client: followingClient(finder), keepAlive: true });
  }
  const pool = new pg.Pool(options);
  // An idle client's error (e.g. the server restarted) must not crash the process.
  pool.on('error', () => {});
  return pool;
}

/**
 * A FROM item that makes the statement it appears in commit asynchronously: `set_config(...,
 * true)` is SET LOCAL for that statement's own (implicit) transaction, so the statement is
 * committed and visible to everyone at once, but its caller does not wait for the WAL flush, and
 * the connection's own setting is untouched for whatever runs on it next. Only for writes whose
 * loss in a crash of PostgreSQL itself (the last ~0.6 s, 3 x wal_writer_delay) is harmless, each
 * use saying why; never inside an explicit transaction (it would make that whole commit
 * asynchronous). A later synchronous commit flushes it too: WAL is flushed in order.
 */
export const ASYNC_COMMIT = `(SELECT set_config('synchronous_commit', 'off', true)) async_commit`;

/**
 * A client taken from the pool for several statements. While it is checked out, the pool does not
 * listen for its connection's errors (it does only for idle clients and inside pool.query), and an
 * 'error' event nobody listens for ends the process: a connection terminated mid-transaction (a
 * PostgreSQL restart or failover, pg_terminate_backend, a network cut) would crash the service.
 * The error is caught here (the statement in flight is rejected with it as well), and the broken
 * client is destroyed on release instead of going back to the pool.
 */
async function checkout(db: Db): Promise<{ client: Tx; release: () => void }> {
  const client = await db.connect();
  let broken: Error | null = null;
  const onError = (err: Error) => {
    broken = err;
  };
  client.on('error', onError);
  return {
    client,
    release() {
      client.removeListener('error', onError);
      client.release(broken ?? undefined);
    },
  };
}

/** A client of the pool for `fn`'s statements (no transaction), given back when it ends. */
export async function withClient<T>(db: Db, fn: (client: Tx) => Promise<T>): Promise<T> {
  const { client, release } = await checkout(db);
  try {
    return await fn(client);
  } finally {
    release();
  }
}

export async function withTx<T>(db: Db, fn: (tx: Tx) => Promise<T>): Promise<T> {
  const { client, release } = await checkout(db);
  try {
    await client.query('BEGIN');
    const result = await fn(client);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    release();
  }
}

const MIGRATIONS_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../migrations');
// Any constant: serializes migration runs of instances starting at the same time.
const MIGRATION_LOCK = 727_001;

/** Applies committed migrations in order, each in its own transaction, recorded in schema_migrations. */
export async function migrate(db: Db, log: (msg: string) => void = () => {}): Promise<string[]> {
  const files = (await fs.readdir(MIGRATIONS_DIR)).filter((f) => /^\d{4}_[a-z0-9_]+\.sql$/.test(f)).sort();
  const { client, release } = await checkout(db);
  const applied: string[] = [];
  try {
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
    await client.query(
      'CREATE TABLE IF NOT EXISTS schema_migrations (version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())',
    );
    const done = new Set((await client.query<{ version: string }>('SELECT version FROM schema_migrations')).rows.map((r) => r.version));
    for (const file of files) {
      const version = file.slice(0, -4);
      if (done.has(version)) continue;
      const sql = await fs.readFile(path.join(MIGRATIONS_DIR, file), 'utf8');
      await client.query('BEGIN');
      try {
        await client.query(sql);
        await client.query('INSERT INTO schema_migrations(version) VALUES ($1)', [version]);
        await client.query('COMMIT');
      } catch (err) {
        await client.query('ROLLBACK').catch(() => {});
        throw new Error(`migration ${file} failed: ${(err as Error).message}`, { cause: err });
      }
      applied.push(version);
      log(`applied migration ${version}`);
    }
  } finally {
    await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => {});
    release();
  }
  return applied;
}
