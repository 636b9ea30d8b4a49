/**
 * Repository: nonces in PostgreSQL (decisions.md section 1: remembered per app at least the time
 * window plus a margin). The Redis store is src/gate/nonce-store.ts; both implement NonceStore.
 */
import type { Clock } from '../domain/clock.ts';
import { TurnBatcher } from './batcher.ts';
import { ASYNC_COMMIT, type Db } from './db.ts';

/** Claims sent in one statement at most (a larger backlog is split into several). */
const MAX_BATCH = 256;

const keyOf = (c: { appId: string; nonce: string }): string => `${c.appId}\u0000${c.nonce}`;

/**
 * PostgreSQL store. The claims that arrive in the same event-loop turn are sent as one statement
 * (src/store/batcher.ts: one round trip and one commit for all of them): under load a nonce costs
 * a fraction of a statement, alone it costs one. The guarantees are those of one claim per
 * statement: a claim is answered only after its row is committed (asynchronously, see below); two claims of one (app, nonce),
 * in one batch or in concurrent ones, never both win. Of the claims of one key in one turn the
 * first is batched and wins, the others follow on their own and lose; keys are sent sorted so
 * concurrent batches lock index entries in one order (no deadlock).
 */
export class PgNonceStore {
  readonly #db: Db;
  readonly #clock: Clock;
  readonly #claims: TurnBatcher<{ appId: string; nonce: string }, boolean>;
  constructor(db: Db, clock: Clock, ttlSeconds: number) {
    this.#db = db;
    this.#clock = clock;
    const send = async (batch: { appId: string; nonce: string }[]): Promise<boolean[]> => {
      // Insert, or take over a row whose memory has expired; a live row wins and nothing returns.
      // Committed asynchronously (ASYNC_COMMIT): visible to every other claim and answered as
      // before, without waiting for the WAL flush. A crash of PostgreSQL itself can lose the
      // claims of its last ~0.6 s; a request replayed after that with such a nonce meets the
      // durable request-id record (every POST) or is a read. docs/decisions.md ("Nonce
      // durability"); docs/performance.md.
      const r = await db.query<{ a: string; n: string }>({
        name: 'nonce_claim_batch',
        text: `INSERT INTO nonces(app_id, nonce, expires_at)
         SELECT a, n, $3::timestamptz + make_interval(secs => $4) FROM unnest($1::text[], $2::text[]) AS t(a, n), ${ASYNC_COMMIT}
         ON CONFLICT (app_id, nonce) DO UPDATE SET expires_at = excluded.expires_at WHERE nonces.expires_at < $3
         RETURNING app_id AS a, nonce AS n`,
        values: [batch.map((c) => c.appId), batch.map((c) => c.nonce), new Date(clock.now()), ttlSeconds],
      });
      const won = new Set(r.rows.map((row) => keyOf({ appId: row.a, nonce: row.n })));
      return batch.map((c) => won.has(keyOf(c)));
    };
    this.#claims = new TurnBatcher({
      one: async (c) => (await send([c]))[0]!,
      many: send,
      key: keyOf,
      compare: (a, b) => {
        const ka = keyOf(a);
        const kb = keyOf(b);
        return ka < kb ? -1 : ka > kb ? 1 : 0;
      },
      maxBatch: MAX_BATCH,
    });
  }

  claim(appId: string, nonce: string): Promise<boolean> {
    return this.#claims.run({ appId, nonce });
  }

  async purge(): Promise<number> {
    const r = await this.#db.query('DELETE FROM nonces WHERE ctid IN (SELECT ctid FROM nonces WHERE expires_at < $1 LIMIT 5000)', [
      new Date(this.#clock.now()),
    ]);
    return r.rowCount ?? 0;
  }
}
