/**
 * The merchant's statement of a settlement day (docs/statements.md): its summary (totals and the
 * SHA-256 and size of its file), and the file itself, streamed.
 *
 * The rows of a closed day never change (src/domain/statements.ts), so the file is the same bytes
 * whenever it is made. It is made once, by the first summary: the rows are streamed through the
 * encoder into a hash, and the bytes, cut into chunks of a fixed size as they pass, are written to
 * statement_file_chunks (each insert awaited before the next rows are read: memory stays flat);
 * then the digest is kept (statement_files), saying how many chunks hold the bytes. A download
 * streams the kept chunks, one per query, as fast as its client takes them, and never reads the
 * rows again. Where the bytes are not kept (a digest made before they were, a day past
 * STATEMENT_FILES_KEPT_DAYS, bytes found damaged), the download makes the file again from the rows.
 * Either way its signature, which covers the body's SHA-256 (decisions.md section 3), is made from
 * the kept digest before the first byte leaves, and the bytes are checked against it as they pass.
 *
 * Making a file never holds up other requests: the rows are read a page at a time (keyset on
 * events_app_created), the first page small (the first rows leave at once), each page encoded in
 * slices, each slice taking its turn among those of every file being made
 * (StatementDownloads.turn: one slice per turn of the event loop in all). A client that takes
 * nothing for the stall timeout is cut (it holds at most a page or a chunk and the streams'
 * buffers meanwhile), and files are made and sent within the budget of StatementDownloads (per app
 * and in all; a first summary asked for by several callers at once is computed once).
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
  firstKeptDay,
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

/**
 * The size of a kept file's chunks (the last one shorter): the bytes are cut at the same places
 * whatever the encoder's chunking, so every making of a file writes the same rows.
 */
export const STATEMENT_CHUNK_BYTES = 256 * 1024;

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

/** Cuts a stream of buffers into pieces of exactly `size` bytes (the last one shorter), whatever its chunking. */
export async function* fixedChunks(source: AsyncIterable<Buffer>, size: number): AsyncGenerator<Buffer> {
  let parts: Buffer[] = [];
  let length = 0;
  for await (const b of source) {
    let rest = b;
    while (length + rest.length >= size) {
      const take = size - length;
      parts.push(rest.subarray(0, take));
      yield Buffer.concat(parts, size);
      parts = [];
      length = 0;
      rest = rest.subarray(take);
    }
    if (rest.length > 0) {
      parts.push(rest);
      length += rest.length;
    }
  }
  if (length > 0) yield Buffer.concat(parts, length);
}

/**
 * Makes the file once into a hash: its digest, size, rows and totals; with `keep`, its bytes are
 * also written as chunks as they pass (each insert awaited: the next rows wait for it), and the
 * digest says how many.
 */
async function digestOf(d: UseCaseDeps, sd: StatementDay, key: StatementFileKey, keep: boolean): Promise<StatementFileDigest> {
  const totals = emptyTotals();
  const hash = createHash('sha256');
  let sizeBytes = 0;
  let chunks = 0;
  for await (const chunk of fixedChunks(fileBytes(d, key.appId, sd, key.compression, totals), STATEMENT_CHUNK_BYTES)) {
    hash.update(chunk);
    sizeBytes += chunk.length;
    if (keep) await statements.saveStatementFileChunk(d.db, key, chunks, chunk);
    chunks++;
  }
  return { sha256: hash.digest('hex'), sizeBytes, rowCount: totals.rowCount, totals, chunks: keep && chunks > 0 ? chunks : null };
}

/**
 * What a download of kept bytes sends in one turn of statement work: a chunk is read in one turn
 * and sent in pieces, a piece per turn. Beside the open API's requests, turns are SLICE_GAP_MS
 * apart, so the downloads of an instance send about 5 MB/s in all there (full speed otherwise):
 * eight downloads admitted at once fill their clients' buffers (megabytes each, when a client does
 * not read) over seconds instead of in one burst of the kernel's copying on both ends.
 */
export const KEPT_PIECE_BYTES = 32 * 1024;

/**
 * The kept bytes of a file, a chunk per COPY, each read once the one before has been taken, in
 * its turn among the slices of statement work (reading a chunk takes the main thread ~0.3 ms, less than a
 * slice's time), sent a piece (KEPT_PIECE_BYTES) per turn. A chunk gone meanwhile (the purge, at
 * the end of the time bytes are kept): the kept bytes are dropped and the stream fails with
 * StatementChangedError.
 */
async function* keptBytes(
  d: UseCaseDeps,
  key: StatementFileKey,
  chunks: number,
  unkeep: (why: string) => Promise<void>,
): AsyncGenerator<Buffer> {
  for (let seq = 0; seq < chunks; seq++) {
    await d.statementDownloads.turn();
    const bytes = await statements.statementFileChunk(d.db, key, seq);
    if (bytes === null) {
      const why = `kept chunk ${seq} of ${chunks} is gone`;
      await unkeep(why);
      throw new StatementChangedError(`statement ${key.appId} ${key.day}: ${why}`);
    }
    for (let at = 0; at < bytes.length; at += KEPT_PIECE_BYTES) {
      if (at > 0) await d.statementDownloads.turn();
      yield bytes.subarray(at, at + KEPT_PIECE_BYTES);
    }
  }
}

/** What makes a file's bytes, the key of its digest and of its kept chunks. */
function fileKey(appId: string, day: string, compression: StatementCompression): StatementFileKey {
  return { appId, day, formatVersion: STATEMENT_FORMAT_VERSION, compression, encoder: encoderOf(compression) };
}

/** The statement's summary: the day checked, then its file's digest (made, and its bytes kept, the first time). */
export async function statementSummary(
  d: UseCaseDeps,
  caller: Caller,
  day: string,
  compression: StatementCompression,
): Promise<StatementSummary> {
  const sd = statementDay(day, d.clock.now());
  const key = fileKey(caller.app.id, sd.day, compression);
  let digest = await statements.findStatementFile(d.db, key);
  if (digest === null) {
    // Computed once however many ask at once (the others wait for it), within the budget; the
    // bytes kept unless the day is already past the time they are kept.
    const flight = `${key.appId} ${key.day} ${key.formatVersion} ${key.compression} ${key.encoder}`;
    const keep = sd.day >= firstKeptDay(d.clock.now(), d.statementFilesKeptDays);
    digest = await d.statementDownloads.once(flight, async () => {
      const release = await d.statementDownloads.acquire(caller.app.id);
      try {
        const made = await digestOf(d, sd, key, keep);
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
 * its bytes, checked as they pass: the kept chunks when its summary says they are kept (all of
 * them there: else they are dropped and the file is made from the rows), else the file made from
 * the rows. The last chunk is held back until the whole file has matched the digest; if it does
 * not (or a kept chunk is gone meanwhile), the stream fails with StatementChangedError before that
 * chunk, so a receiver never holds a complete file other than the one the summary describes, and
 * kept bytes that failed are dropped first (the next download makes the file from the rows). The
 * download holds a slot of the budget until its stream closes (sent, failed or cut), and is cut
 * with StatementStalledError when its client takes nothing for the stall timeout.
 */
export async function statementFile(
  d: UseCaseDeps,
  caller: Caller,
  day: string,
  compression: StatementCompression,
): Promise<{ summary: StatementSummary; body: Readable }> {
  const summary = await statementSummary(d, caller, day, compression);
  const expected = summary.digest;
  const key = fileKey(caller.app.id, summary.day.day, compression);
  let kept = expected.chunks;
  /** Drops kept bytes found damaged (the digest stays: the next download makes the file from the rows). */
  const unkeep = async (why: string) => {
    d.log.warn(
      { appId: key.appId, day: key.day, compression, why },
      'kept statement file damaged: dropped, made from the rows from now on',
    );
    await statements.dropStatementFileChunks(d.db, key).catch((err: unknown) => d.log.error({ err }, 'kept statement file not dropped'));
  };
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
        const why = `${kept === null ? 'made' : 'kept'} ${size} bytes ${sha256}, digest ${expected.sizeBytes} ${expected.sha256}`;
        const fail = () => cb(new StatementChangedError(`statement ${caller.app.id} ${summary.day.day}: ${why}`));
        if (kept === null) fail();
        else void unkeep(why).then(fail);
        return;
      }
      cb(null, held ?? undefined);
    },
  });
  const release = await d.statementDownloads.acquire(caller.app.id);
  let body: Readable;
  try {
    if (kept !== null) {
      const there = await statements.countStatementFileChunks(d.db, key, kept);
      if (there !== kept) {
        await unkeep(`${there} of ${kept} chunks kept`);
        kept = null;
      }
    }
    const source =
      kept === null
        ? fileBytes(d, caller.app.id, summary.day, compression, emptyTotals())
        : Readable.from(keptBytes(d, key, kept, unkeep), { objectMode: false });
    body = pipeline(source, check, () => {});
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
