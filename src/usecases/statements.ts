/**
 * The merchant's statement of a settlement day (docs/statements.md): its summary (totals and the
 * SHA-256 and size of its file), and the file itself, streamed.
 *
 * The rows of a closed day never change (src/domain/statements.ts), so the file is the same bytes
 * whenever it is made: its digest is computed once, by streaming the rows through the encoder into
 * a hash, and kept (statement_files). The file is then made again for each download and streamed;
 * its signature, which covers the body's SHA-256 (decisions.md section 3), is made from the kept
 * digest before the first byte leaves. Memory stays flat: the rows are read a page at a time
 * (keyset on events_app_created), each page encoded and handed on before the next is read, with
 * the consumer's backpressure.
 *
 * Making a file never holds up other requests: the first page is small (the first rows leave at
 * once), each page is read and encoded in slices, each slice taking its turn among those of every
 * file being made (StatementDownloads.turn: one slice per turn of the event loop in all),
 * a client that takes nothing for the stall timeout is cut (it holds at most a page and the
 * streams' buffers meanwhile), and files are made within the budget of StatementDownloads (per
 * app and in all; a first summary asked for by several callers at once is computed once).
 */
import { createHash } from 'node:crypto';
import { Readable, Transform, pipeline } from 'node:stream';
import { createGzip } from 'node:zlib';
import {
  STATEMENT_FORMAT_VERSION,
  STATEMENT_HEADER,
  type StatementCompression,
  type StatementDay,
  type StatementTotals,
  addToTotals,
  emptyTotals,
  statementDay,
  statementLine,
} from '../domain/statements.ts';
import * as statements from '../store/statements.ts';
import type { StatementFileDigest, StatementFileKey } from '../store/statements.ts';
import { type Caller, type UseCaseDeps, nowOf } from './deps.ts';
import type { StatementSummary } from './results.ts';

/** Rows read per statement after the first page (~0.1 MB of CSV; the driver parses a page in one go on the main thread). */
export const STATEMENT_PAGE_ROWS = 500;
/** Rows of the first page: the first bytes leave without waiting for a full page. */
const FIRST_PAGE_ROWS = 100;
/** Rows encoded in one slice (~30 µs a row: about 2 ms). */
const SLICE_ROWS = 64;
/** gzip level of compressed statements (zlib's default): part of what makes the bytes. */
const GZIP_LEVEL = 6;

/** The encoder's identity: the same rows give the same bytes only through the same encoder. */
function encoderOf(compression: StatementCompression): string {
  return compression === 'GZIP' ? `zlib-${process.versions.zlib}-level${GZIP_LEVEL}` : 'plain';
}

/**
 * The CSV text of the day's rows, a page at a time, each page in slices with a turn of the event
 * loop between them; the totals are added up as the rows pass.
 */
async function* csvChunks(d: UseCaseDeps, appId: string, sd: StatementDay, totals: StatementTotals): AsyncGenerator<Buffer> {
  yield Buffer.from(STATEMENT_HEADER);
  let after: statements.StatementCursor | null = null;
  let limit = FIRST_PAGE_ROWS;
  for (;;) {
    const rows = await statements.statementPage(d.db, { appId, start: sd.start, end: sd.end, after, limit });
    if (rows.length === 0) return;
    for (let i = 0; i < rows.length; i += SLICE_ROWS) {
      await d.statementDownloads.turn();
      let text = '';
      for (const r of rows.slice(i, i + SLICE_ROWS)) {
        text += statementLine(r);
        addToTotals(totals, r);
      }
      yield Buffer.from(text);
    }
    if (rows.length < limit) return;
    const last = rows[rows.length - 1]!;
    after = { at: last.at, eventId: last.eventId };
    limit = STATEMENT_PAGE_ROWS;
    await d.statementDownloads.turn();
  }
}

/** The file's bytes, as a stream (gzip when asked: deterministic, mtime 0, whatever the chunking). */
function fileBytes(d: UseCaseDeps, appId: string, sd: StatementDay, compression: StatementCompression, totals: StatementTotals): Readable {
  const csv = Readable.from(csvChunks(d, appId, sd, totals), { objectMode: false });
  if (compression === 'NONE') return csv;
  return pipeline(csv, createGzip({ level: GZIP_LEVEL }), () => {});
}

/** Makes the file once into a hash: its digest, size, rows and totals. */
async function digestOf(d: UseCaseDeps, appId: string, sd: StatementDay, compression: StatementCompression): Promise<StatementFileDigest> {
  const totals = emptyTotals();
  const hash = createHash('sha256');
  let sizeBytes = 0;
  for await (const chunk of fileBytes(d, appId, sd, compression, totals)) {
    hash.update(chunk as Buffer);
    sizeBytes += (chunk as Buffer).length;
  }
  return { sha256: hash.digest('hex'), sizeBytes, rowCount: totals.rowCount, totals };
}

/** The statement's summary: the day checked, then its file's digest (made and kept the first time). */
export async function statementSummary(
  d: UseCaseDeps,
  caller: Caller,
  day: string,
  compression: StatementCompression,
): Promise<StatementSummary> {
  const sd = statementDay(day, d.clock.now());
  const key: StatementFileKey = {
    appId: caller.app.id,
    day: sd.day,
    formatVersion: STATEMENT_FORMAT_VERSION,
    compression,
    encoder: encoderOf(compression),
  };
  let digest = await statements.findStatementFile(d.db, key);
  if (digest === null) {
    // Computed once however many ask at once (the others wait for it), within the budget.
    const flight = `${key.appId} ${key.day} ${key.formatVersion} ${key.compression} ${key.encoder}`;
    digest = await d.statementDownloads.once(flight, async () => {
      const release = await d.statementDownloads.acquire(caller.app.id);
      try {
        const made = await digestOf(d, caller.app.id, sd, compression);
        await statements.saveStatementFile(d.db, key, made, nowOf(d));
        return made;
      } finally {
        release();
      }
    });
  }
  return { kind: 'statement', appId: caller.app.id, day: sd, compression, formatVersion: STATEMENT_FORMAT_VERSION, digest };
}

/** The client of a download took nothing for the stall timeout: the download is cut. */
export class StatementStalledError extends Error {
  override name = 'StatementStalledError';
}

/** The made file did not come out as its kept digest says (it never should: the rows of a closed day do not change). */
export class StatementChangedError extends Error {
  override name = 'StatementChangedError';
}

/**
 * The file of a statement, to stream: its summary (whose digest the answer is signed with) and
 * its bytes, checked as they pass. The last chunk is held back until the whole file has matched
 * the digest; if it does not, the stream fails with StatementChangedError before that chunk, so a
 * receiver never holds a complete file other than the one the summary describes. The download
 * holds a slot of the budget until its stream closes (sent, failed or cut), and is cut with
 * StatementStalledError when its client takes nothing for the stall timeout.
 */
export async function statementFile(
  d: UseCaseDeps,
  caller: Caller,
  day: string,
  compression: StatementCompression,
): Promise<{ summary: StatementSummary; body: Readable }> {
  const summary = await statementSummary(d, caller, day, compression);
  const expected = summary.digest;
  const hash = createHash('sha256');
  let size = 0;
  let held: Buffer | null = null;
  let lastProgress = Date.now();
  const check = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      // Progress: the check takes a chunk only once the client has taken what came before (the
      // streams' buffers are full otherwise). A real wait on a socket: the wall clock.
      lastProgress = Date.now();
      hash.update(chunk);
      size += chunk.length;
      const previous = held;
      held = chunk;
      cb(null, previous ?? undefined);
    },
    flush(cb) {
      const sha256 = hash.digest('hex');
      if (sha256 !== expected.sha256 || size !== expected.sizeBytes) {
        cb(
          new StatementChangedError(
            `statement ${caller.app.id} ${summary.day.day}: made ${size} bytes ${sha256}, kept ${expected.sizeBytes} ${expected.sha256}`,
          ),
        );
        return;
      }
      cb(null, held ?? undefined);
    },
  });
  const release = await d.statementDownloads.acquire(caller.app.id);
  let body: Readable;
  try {
    body = pipeline(fileBytes(d, caller.app.id, summary.day, compression, emptyTotals()), check, () => {});
  } catch (err) {
    release();
    throw err;
  }
  const stallMs = d.statementDownloads.limits.stallTimeoutMs;
  const watch = setInterval(
    () => {
      if (Date.now() - lastProgress < stallMs) return;
      body.destroy(new StatementStalledError(`statement ${caller.app.id} ${summary.day.day}: nothing taken for ${stallMs} ms`));
    },
    Math.min(1000, Math.max(50, Math.floor(stallMs / 4))),
  );
  watch.unref();
  body.once('close', () => {
    clearInterval(watch);
    release();
  });
  return { summary, body };
}
