/**
 * What the use cases work with: the database (through the repositories of src/store), the
 * providers, the clock, a logger, and the work queues that batch the hot statements. No HTTP:
 * use cases take domain input and return domain results or throw DomainError.
 */
import type { Clock } from '../domain/clock.ts';
import type { Log } from '../lib/log.ts';
import type { Slots } from '../lib/slots.ts';
import type { ProviderRouter } from '../providers/router.ts';
import type { Db } from '../store/db.ts';
import type { MerchantConfigCache } from '../store/merchant-config.ts';
import type { AttemptAcceptor } from '../store/attempt-acceptance.ts';
import type { ChangeApplier, RecordsReader } from '../store/changes.ts';
import type { OrderInserter } from '../store/order-inserts.ts';
import type { OrderReader } from '../store/order-reads.ts';

import type { StatementDownloads } from './statement-downloads.ts';
import type { WorkTurns } from './work-turns.ts';

export type { Log } from '../lib/log.ts';

export interface UseCaseDeps {
  /** This instance's id (service_instances): recorded with the work its requests start. */
  instanceId: string;
  db: Db;
  clock: Clock;
  log: Log;
  providers: ProviderRouter;
  merchantConfig: MerchantConfigCache;
  /** New orders of concurrent creates, one statement per event-loop turn. */
  orderInserts: OrderInserter;
  /** The query-order reads of concurrent requests, one statement per event-loop turn. */
  orderReads: OrderReader;
  /** Accepted outcomes of concurrent creates, one statement per event-loop turn. */
  acceptor: AttemptAcceptor;
  /** The budget of statement files made at once by this instance, and the first summaries being computed. */
  statementDownloads: StatementDownloads;
  /** A statement file's bytes are kept this many days after its day (STATEMENT_FILES_KEPT_DAYS; 0: never). */
  statementFilesKeptDays: number;
  /** The main thread's share of expensive work: statement and reconciliation slices take turns in it. */
  workTurns: WorkTurns;
  /** Decided changes of concurrent requests (provider notices, refund outcomes, closes), one statement per event-loop turn. */
  changes: ChangeApplier;
  /** The records those changes are decided from, read for concurrent requests in one statement per event-loop turn. */
  records: RecordsReader;
  /** Console and portal sign-ins in progress on this instance (SIGN_IN_MAX_CONCURRENT): one more is refused at once. */
  signIns: Slots;
  /** Asks the background workers to look for due work now (follow-ups written, events queued). */
  wakeWorkers(): void;
}

/** The caller of an open-API operation: the authenticated app, resolved by the gate. */
export interface Caller {
  app: import('../store/merchants.ts').AppRow;
  merchantEntityType: 'INDIVIDUAL' | 'CORPORATE';
  requestId: string;
  /** The service's clock when the request arrived; decides which re-creates overlapped. */
  receivedAtMs: number;
}

export function nowOf(d: { clock: Clock }): Date {
  return new Date(d.clock.now());
}
