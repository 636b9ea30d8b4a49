/**
 * Repository: the rows of a merchant's statement (the app's final state changes of a day, read from
 * the events written with them), the digests of statement files already made (statement_files,
 * migrations/0014) and their kept bytes (statement_file_chunks, migrations/0140).
 */
import type { EventType } from '../domain/events.ts';
import type { StatementCompression, StatementRow, StatementTotals } from '../domain/statements.ts';
import { to as copyTo } from 'pg-copy-streams';
import { type Db, type Queryable, withClient, withTx } from './db.ts';

/** Where a page of rows ends: the next page starts after it (events_app_created keyset). */
export interface StatementCursor {
  at: Date;
  eventId: string;
}

type RawRow = [
  string, // id
  Date, // created_at
  EventType,
  string, // order id
  string, // out_trade_no
  string | null, // refund id
  string | null, // out_refund_no
  string, // channel
  number, // order amount
  number | null, // refund amount
  number | null, // fee
  number | null, // fee rate
  number | null, // settlement
  number | null, // rule version
  string | null, // tier
];

/**
 * One page of the app's statement rows in [start, end), in (time, event id) order, after `after`.
 * Every value comes from a row that never changes once written (the event, the order's identity,
 * amount and fee projection, the refund's identity and amount), so a closed day reads the same
 * every time. Rows as arrays: a statement may be a million of them.
 */
export async function statementPage(
  db: Queryable,
  o: { appId: string; start: Date; end: Date; after: StatementCursor | null; limit: number },
): Promise<StatementRow[]> {
  const r = await db.query<RawRow>({
    name: 'statement_page',
    rowMode: 'array',
    text: `SELECT e.id, e.created_at, e.event_type, e.order_id, o.out_trade_no, e.refund_id, r.out_refund_no, o.channel,
             o.amount_fen, r.amount_fen,
             CASE WHEN e.event_type = 'PAYMENT_SUCCEEDED' THEN (o.fee_projection->>'companyServiceFeeFen')::bigint END,
             CASE WHEN e.event_type = 'PAYMENT_SUCCEEDED' THEN (o.fee_projection->>'companyServiceFeeRateBps')::integer END,
             CASE WHEN e.event_type = 'PAYMENT_SUCCEEDED' THEN (o.fee_projection->>'merchantSettlementFen')::bigint END,
             CASE WHEN e.event_type = 'PAYMENT_SUCCEEDED' THEN (o.fee_projection->>'ruleVersion')::integer END,
             CASE WHEN e.event_type = 'PAYMENT_SUCCEEDED' THEN o.fee_projection->>'tier' END
        FROM events e
        JOIN orders o ON o.id = e.order_id
        LEFT JOIN refunds r ON r.id = e.refund_id
       WHERE e.app_id = $1 AND e.created_at >= $2 AND e.created_at < $3 AND (e.created_at > $2 OR e.id > $4)
       ORDER BY e.created_at, e.id
       LIMIT $5`,
    // The page starts at the cursor's time (an index range from there, however far into the day),
    // and only the rows of that very instant are told apart by id.
    values: [o.appId, o.after?.at ?? o.start, o.end, o.after?.eventId ?? '', o.limit],
  });
  return r.rows.map((x) => ({
    eventId: x[0],
    at: x[1],
    eventType: x[2],
    openOrderId: x[3],
    outTradeNo: x[4],
    refundId: x[5],
    outRefundNo: x[6],
    channel: x[7],
    orderAmountFen: x[8],
    refundAmountFen: x[9],
    fee:
      x[10] === null
        ? null
        : {
            companyServiceFeeFen: x[10],
            companyServiceFeeRateBps: x[11]!,
            merchantSettlementFen: x[12]!,
            ruleVersion: x[13]!,
            tier: x[14]!,
          },
  }));
}

/** What makes a statement file's bytes: the app, the day, the format, the compression and its encoder. */
export interface StatementFileKey {
  appId: string;
  day: string;
  formatVersion: number;
  compression: StatementCompression;
  encoder: string;
}

export interface StatementFileDigest {
  sha256: string;
  sizeBytes: number;
  rowCount: number;
  totals: StatementTotals;
  /** How many chunks its bytes are kept in (statement_file_chunks), or null when they are not kept. */
  chunks: number | null;
}

export async function findStatementFile(db: Queryable, k: StatementFileKey): Promise<StatementFileDigest | null> {
  const r = await db.query<StatementFileDigest>({
    name: 'statement_file_find',
    text: `SELECT sha256, size_bytes AS "sizeBytes", row_count AS "rowCount", totals, chunks FROM statement_files
            WHERE app_id = $1 AND day = $2 AND format_version = $3 AND compression = $4 AND encoder = $5`,
    values: [k.appId, k.day, k.formatVersion, k.compression, k.encoder],
  });
  return r.rows[0] ?? null;
}

/**
 * Keeps the digest, and how many chunks the bytes are kept in once every one is written (the first
 * row made stays: every making gives the same bytes, and so the same chunks).
 */
export async function saveStatementFile(db: Queryable, k: StatementFileKey, f: StatementFileDigest, now: Date): Promise<void> {
  await db.query(
    `INSERT INTO statement_files(app_id, day, format_version, compression, encoder, sha256, size_bytes, row_count, totals, computed_at, chunks)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT DO NOTHING`,
    [k.appId, k.day, k.formatVersion, k.compression, k.encoder, f.sha256, f.sizeBytes, f.rowCount, JSON.stringify(f.totals), now, f.chunks],
  );
}

/** Keeps chunk `seq` of a file's bytes (one written already, by another making of the same file, stays: the same bytes). */
export async function saveStatementFileChunk(db: Queryable, k: StatementFileKey, seq: number, bytes: Buffer): Promise<void> {
  await db.query({
    name: 'statement_file_chunk_save',
    text: `INSERT INTO statement_file_chunks(app_id, day, format_version, compression, encoder, seq, bytes)
           VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING`,
    values: [k.appId, k.day, k.formatVersion, k.compression, k.encoder, seq, bytes],
  });
}

/** How many of a file's chunks 0 to `chunks - 1` are kept (their keys are read, never their bytes). */
export async function countStatementFileChunks(db: Queryable, k: StatementFileKey, chunks: number): Promise<number> {
  const r = await db.query<{ n: number }>({
    name: 'statement_file_chunks_count',
    text: `SELECT count(*)::int AS n FROM statement_file_chunks
            WHERE app_id = $1 AND day = $2 AND format_version = $3 AND compression = $4 AND encoder = $5 AND seq >= 0 AND seq < $6`,
    values: [k.appId, k.day, k.formatVersion, k.compression, k.encoder, chunks],
  });
  return r.rows[0]!.n;
}

/**
 * Chunk `seq` of a file's kept bytes, or null when it is not kept. The bytes come as they are kept,
 * in a binary COPY: node-postgres reads every column of a query's rows as text, so a query would
 * have PostgreSQL encode them (base64) and the driver decode them again, through a string of a
 * third more than their size on V8's heap; a COPY's data arrives as the socket's buffers.
 * Measured per 256 KiB chunk on this machine: 0.3-0.4 ms of the service's CPU and 0.1-0.3 ms of
 * PostgreSQL's, against 1.0-1.1 ms and 1.0-1.1 ms through a query (docs/performance.md, "Kept
 * statement chunks read by COPY"). A COPY takes no parameters: the key is written into the
 * statement as literals, each escaped by the driver (numbers checked to be integers).
 */
export async function statementFileChunk(db: Db, k: StatementFileKey, seq: number): Promise<Buffer | null> {
  if (!Number.isSafeInteger(k.formatVersion) || !Number.isSafeInteger(seq)) throw new TypeError('statement chunk key: integers expected');
  return withClient(db, async (c) => {
    const text = `COPY (SELECT bytes FROM statement_file_chunks
        WHERE app_id = ${c.escapeLiteral(k.appId)} AND day = ${c.escapeLiteral(k.day)} AND format_version = ${k.formatVersion}
          AND compression = ${c.escapeLiteral(k.compression)} AND encoder = ${c.escapeLiteral(k.encoder)} AND seq = ${seq})
      TO STDOUT (FORMAT binary)`;
    const parts: Buffer[] = [];
    for await (const part of c.query(copyTo(text))) parts.push(part as Buffer);
    return fieldOfBinaryCopy(parts.length === 1 ? parts[0]! : Buffer.concat(parts));
  });
}

const COPY_SIGNATURE = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1');

/**
 * The field of a binary COPY of at most one row of one non-null column (PostgreSQL's docs, COPY,
 * "Binary Format": the 11-byte signature, a 32-bit flags field, a header extension of a 32-bit
 * length and that many bytes; each row a 16-bit field count and each field a 32-bit length and its
 * bytes; the trailer a field count of -1), or null when there is no row. Anything else throws.
 */
export function fieldOfBinaryCopy(out: Buffer): Buffer | null {
  const bad = (why: string) => new Error(`binary COPY: ${why}`);
  if (out.length < 19 || !out.subarray(0, 11).equals(COPY_SIGNATURE)) throw bad('no signature');
  let at = 19 + out.readUInt32BE(15);
  if (out.length < at + 2) throw bad('cut short');
  const fields = out.readInt16BE(at);
  at += 2;
  if (fields === -1) {
    if (out.length !== at) throw bad('bytes after the trailer');
    return null;
  }
  if (fields !== 1 || out.length < at + 4) throw bad(`a row of ${fields} fields`);
  const length = out.readInt32BE(at);
  at += 4;
  if (length < 0 || out.length < at + length + 2) throw bad('a null or cut short field');
  if (out.readInt16BE(at + length) !== -1 || out.length !== at + length + 2) throw bad('more than one row');
  return out.subarray(at, at + length);
}

/** Drops a file's kept bytes and marks them not kept, in one statement (the digest stays). */
export async function dropStatementFileChunks(db: Queryable, k: StatementFileKey): Promise<void> {
  await db.query(
    `WITH unkept AS (
       UPDATE statement_files SET chunks = NULL
        WHERE app_id = $1 AND day = $2 AND format_version = $3 AND compression = $4 AND encoder = $5)
     DELETE FROM statement_file_chunks
      WHERE app_id = $1 AND day = $2 AND format_version = $3 AND compression = $4 AND encoder = $5`,
    [k.appId, k.day, k.formatVersion, k.compression, k.encoder],
  );
}

/**
 * One batch of the purge of kept bytes: up to `limit` chunks of days before `beforeDay`, dropped,
 * and the files they belong to marked not kept, in the same statement (a download that starts
 * afterwards makes the file from the rows; the digest stays). Chunks that no complete file counts
 * (a making cut short) go the same way. Answers how many chunks were dropped.
 */
export async function purgeStatementFileChunks(db: Queryable, beforeDay: string, limit: number): Promise<number> {
  const r = await db.query<{ n: number }>(
    `WITH doomed AS (
       SELECT app_id, day, format_version, compression, encoder, seq FROM statement_file_chunks
        WHERE day < $1 ORDER BY day LIMIT $2),
     unkept AS (
       UPDATE statement_files f SET chunks = NULL
         FROM (SELECT DISTINCT app_id, day, format_version, compression, encoder FROM doomed) d
        WHERE f.app_id = d.app_id AND f.day = d.day AND f.format_version = d.format_version
          AND f.compression = d.compression AND f.encoder = d.encoder AND f.chunks IS NOT NULL),
     gone AS (
       DELETE FROM statement_file_chunks c USING doomed d
        WHERE c.app_id = d.app_id AND c.day = d.day AND c.format_version = d.format_version
          AND c.compression = d.compression AND c.encoder = d.encoder AND c.seq = d.seq
       RETURNING 1)
     SELECT count(*)::int AS n FROM gone`,
    [beforeDay, limit],
  );
  return r.rows[0]!.n;
}

// --- download leases (migration 0110) ------------------------------------------------------------

export interface DownloadLeaseAsk {
  leaseId: string;
  appId: string;
  instanceId: string;
  /** The limit when the app has none of its own (STATEMENT_DOWNLOADS_PER_APP). */
  defaultLimit: number;
  now: Date;
  /** A lease counts while its instance has beaten since then. */
  aliveSince: Date;
}

/**
 * Takes one of the app's statement download slots across instances: the app's leases held by live
 * instances are counted under a per-app transaction lock (acquisitions of one app are serialized,
 * nothing else waits on it), those of gone instances dropped, and a lease written when fewer than
 * the app's limit are held. Answers the limit that applied and whether the lease was taken.
 */
export async function takeDownloadLease(db: Db, a: DownloadLeaseAsk): Promise<{ taken: boolean; limit: number }> {
  return withTx(db, async (tx) => {
    await tx.query(`SELECT pg_advisory_xact_lock(hashtext('statement_download_leases'), hashtext($1))`, [a.appId]);
    await tx.query(
      `DELETE FROM statement_download_leases l WHERE l.app_id = $1
          AND NOT EXISTS (SELECT 1 FROM service_instances s WHERE s.id = l.instance_id AND s.heartbeat_at > $2)`,
      [a.appId, a.aliveSince],
    );
    const r = await tx.query<{ limit: number; taken: number }>(
      `WITH lim AS (SELECT COALESCE(statement_downloads_at_once, $2::int) AS n FROM apps WHERE id = $1),
            held AS (SELECT count(*)::int AS n FROM statement_download_leases WHERE app_id = $1),
            ins AS (INSERT INTO statement_download_leases(lease_id, app_id, instance_id, taken_at)
                    SELECT $3, $1, $4, $5 FROM lim, held WHERE held.n < lim.n RETURNING 1)
       SELECT COALESCE((SELECT n FROM lim), $2::int) AS "limit", (SELECT count(*)::int FROM ins) AS taken`,
      [a.appId, a.defaultLimit, a.leaseId, a.instanceId, a.now],
    );
    return { taken: r.rows[0]!.taken === 1, limit: r.rows[0]!.limit };
  });
}

/** Gives a download lease back. */
export async function dropDownloadLease(db: Queryable, leaseId: string): Promise<void> {
  await db.query('DELETE FROM statement_download_leases WHERE lease_id = $1', [leaseId]);
}
