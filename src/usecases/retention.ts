/**
 * Retention: what only matters for a while is dropped once it no longer does, in small batches
 * (docs/configuration.md, "What is kept, for how long"). Each batch is one short statement over a
 * bounded number of rows that no request reads or writes any more (expired, past their window), so
 * a purge never waits for the hot path nor holds it up; a purge that finds more than a batch goes on
 * batch after batch, up to a bound per run, so that it keeps up with the peak rate of the writes.
 */
import { firstKeptDay } from '../domain/statements.ts';
import * as events from '../store/events.ts';
import * as statements from '../store/statements.ts';
import { type UseCaseDeps, nowOf } from './deps.ts';

/** Rows per purge statement. */
export const PURGE_BATCH = 5000;
/** Statements per table and run of a purge at most (a run every minute: up to 1,000,000 rows a minute). */
export const PURGE_MAX_BATCHES = 200;
/** A delivered event's failed delivery attempts are kept this long (its successful one, as long as the event). */
export const DELIVERY_LOG_RETENTION_DAYS = 30;

/**
 * Runs `step` (one batch: answers how many rows it dropped) again while it drops a full batch,
 * at most `maxBatches` times; answers the total.
 */
export async function inBatches(step: () => Promise<number>, batch = PURGE_BATCH, maxBatches = PURGE_MAX_BATCHES): Promise<number> {
  let total = 0;
  for (let i = 0; i < maxBatches; i++) {
    const n = await step();
    total += n;
    if (n < batch) break;
  }
  return total;
}

/** Chunks of kept statement files per purge statement (256 KiB each: 25 MiB a statement). */
export const STATEMENT_CHUNKS_PURGE_BATCH = 100;

/**
 * The history past its retention: the failed delivery attempts of events delivered more than 30
 * days ago, and the kept bytes of statement files STATEMENT_FILES_KEPT_DAYS after their day (their
 * digests stay: a later download makes the file from the rows).
 */
export async function purgeHistory(d: UseCaseDeps): Promise<number> {
  const before = new Date(nowOf(d).getTime() - DELIVERY_LOG_RETENTION_DAYS * 86_400_000);
  const keptFrom = firstKeptDay(d.clock.now(), d.statementFilesKeptDays);
  return (
    (await inBatches(() => events.purgeDeliveryLog(d.db, before, PURGE_BATCH))) +
    (await inBatches(() => statements.purgeStatementFileChunks(d.db, keptFrom, STATEMENT_CHUNKS_PURGE_BATCH), STATEMENT_CHUNKS_PURGE_BATCH))
  );
}
