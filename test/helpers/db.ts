/** A fresh database per suite on the test server (scripts/test.ts sets TEST_DATABASE_URL). */
import { randomBytes } from 'node:crypto';
import pg from 'pg';

export interface TestDatabase {
  url: string;
  drop(): Promise<void>;
}

function serverUrl(): string {
  const u = process.env.TEST_DATABASE_URL;
  if (!u) throw new Error('TEST_DATABASE_URL is not set: run the tests with `npm test`');
  return u;
}

function withDatabase(url: string, name: string): string {
  // Works for both postgres://host:port/db and socket URLs (postgresql://user@/db?host=/dir).
  const q = url.indexOf('?');
  const base = q === -1 ? url : url.slice(0, q);
  const query = q === -1 ? '' : url.slice(q);
  const slash = base.lastIndexOf('/');
  return `${base.slice(0, slash + 1)}${name}${query}`;
}

export async function createTestDatabase(): Promise<TestDatabase> {
  const name = `mps_t_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: serverUrl() });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = withDatabase(serverUrl(), name);
  return {
    url,
    async drop() {
      const c = new pg.Client({ connectionString: serverUrl() });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    },
  };
}
