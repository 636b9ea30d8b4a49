/**
 * A closed day's statement file is made once, kept, and served from what is kept
 * (docs/statements.md, "How a file is made, kept and served"), through the signed open API and a
 * listening service: the first summary writes the file's bytes as chunks (statement_file_chunks)
 * and its digest says how many; every download streams those bytes, the same as the file made
 * from the rows, signed; a download does not read the day's rows (an event deleted after the
 * summary changes nothing it sends, while the file made from the rows would differ and be cut);
 * kept bytes found damaged (a chunk removed: the file is made from the rows; a chunk altered: the
 * download is cut before its last bytes) are dropped and the next download makes the file from
 * the rows; two instances making the file at once leave one complete set of chunks; the purge
 * drops the bytes of days past STATEMENT_FILES_KEPT_DAYS (their digests stay, a download makes the
 * file from the rows) and keeps the others. Both compressions.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { gunzipSync } from 'node:zlib';
import pg from 'pg';
import { verifyResponseSignature } from '@mps/sdk';
import { type BuiltApp, buildApp } from '../../src/app.ts';
import type { StatementCompression } from '../../src/domain/statements.ts';
import type { Caller } from '../../src/usecases/deps.ts';
import { STATEMENT_CHUNK_BYTES, StatementChangedError, statementFile } from '../../src/usecases/statements.ts';
import { type Merchant, type TestApp, call, provision, signedHeaders, startTestApp } from '../helpers/app.ts';
import { FakeClock } from '../helpers/events.ts';
import { insertPaidDay } from '../helpers/rows.ts';

const clock = new FakeClock();
const DAY_MS = 86_400_000;
/** Rows of a day: a file of several chunks in both compressions. */
const ROWS = 15_000;
/** Days whose bytes are kept: DAY is 3 days old now, 6 once the clock has moved 3 days on (purged); DAY2 stays within. */
const KEPT_DAYS = 5;
const shanghaiDay = (ms: number) => new Date(ms + 8 * 3600_000).toISOString().slice(0, 10);
const DAY = shanghaiDay(Date.now() - 3 * DAY_MS);
const DAY2 = shanghaiDay(Date.now() - 2 * DAY_MS);
const COMPRESSIONS: StatementCompression[] = ['NONE', 'GZIP'];

let t: TestApp;
let base: string;
let db: pg.Client;
let platformKeys: Record<string, string>;

const query = (c: StatementCompression) => (c === 'GZIP' ? '?compression=gzip' : '');
const summaryPath = (day: string, c: StatementCompression) => `/api/open/v1/statements/${day}${query(c)}`;
const filePath = (day: string, c: StatementCompression) => `/api/open/v1/statements/${day}/file${query(c)}`;
const timestamp = () => String(Math.floor(clock.now() / 1000));
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

interface Summary {
  sha256: string;
  sizeBytes: number;
  rowCount: number;
}

before(async () => {
  t = await startTestApp({ STATEMENT_FILES_KEPT_DAYS: String(KEPT_DAYS) }, { clock });
  base = await t.server.listen({ port: 0, host: '127.0.0.1' });
  const k = await t.admin('GET', '/platform-keys');
  platformKeys = Object.fromEntries((k.json().keys as { keyId: string; publicKeyPem: string }[]).map((x) => [x.keyId, x.publicKeyPem]));
  db = new pg.Client({ connectionString: t.config.databaseUrl! });
  await db.connect();
});
after(async () => {
  await db.end();
  await t.stop();
});

let shops = 0;
/** A new app with `ROWS` paid orders in `day`, each with its PAYMENT_SUCCEEDED event, as the service writes them. */
async function shopWithDay(day: string, app: TestApp = t): Promise<Merchant> {
  const m = await provision(app, { name: `Kept Files Shop ${++shops}` });
  await insertPaidDay(db, { key: `kf${shops}_`, appId: m.appId, merchantId: m.merchantId, day, n: ROWS, hashedEventIds: true });
  return m;
}

/** The day's summary through `app` (this instance unless told). */
async function summary(m: Merchant, day: string, c: StatementCompression, app: { server: TestApp['server'] } = t): Promise<Summary> {
  const r = await call(app as TestApp, m, 'GET', summaryPath(day, c), undefined, { timestamp: timestamp() });
  assert.equal(r.statusCode, 200, r.body);
  const j = r.json() as Summary;
  return { sha256: j.sha256, sizeBytes: j.sizeBytes, rowCount: j.rowCount };
}

/** A download through the listening service: what arrived, and whether the answer ended whole or was cut. */
async function download(m: Merchant, day: string, c: StatementCompression) {
  const path = filePath(day, c);
  const res = await fetch(`${base}${path}`, { headers: signedHeaders(m, 'GET', path, '', { timestamp: timestamp() }) });
  const parts: Buffer[] = [];
  let complete = true;
  try {
    for await (const chunk of res.body!) parts.push(Buffer.from(chunk));
  } catch {
    complete = false;
  }
  return { status: res.status, headers: Object.fromEntries(res.headers.entries()), body: Buffer.concat(parts), complete };
}

/** A download that must be the file the summary describes, whole, and signed over it. */
async function goodDownload(m: Merchant, day: string, c: StatementCompression, s: Summary): Promise<Buffer> {
  const f = await download(m, day, c);
  assert.equal(f.status, 200);
  assert.ok(f.complete, 'the answer ends whole');
  assert.equal(Number(f.headers['content-length']), s.sizeBytes);
  assert.equal(f.body.length, s.sizeBytes);
  assert.equal(sha256(f.body), s.sha256);
  const v = verifyResponseSignature({ status: f.status, headers: f.headers, body: f.body, platformPublicKeys: platformKeys });
  assert.equal(v.signed, true, 'the answer is signed');
  return f.body;
}

/** The kept state of a file: its digest row's chunk count, and the chunks there (seq, bytes). */
async function kept(m: Merchant, day: string, c: StatementCompression) {
  const f = await db.query<{ chunks: number | null; sha256: string }>(
    `SELECT chunks, sha256 FROM statement_files WHERE app_id = $1 AND day = $2 AND compression = $3`,
    [m.appId, day, c],
  );
  const rows = await db.query<{ seq: number; bytes: Buffer }>(
    `SELECT seq, bytes FROM statement_file_chunks WHERE app_id = $1 AND day = $2 AND compression = $3 ORDER BY seq`,
    [m.appId, day, c],
  );
  return { digestRows: f.rows.length, chunks: f.rows[0]?.chunks ?? null, sha256: f.rows[0]?.sha256, rows: rows.rows };
}

/** Marks a file's bytes as not kept, as a digest made before they were kept is. */
const unkeep = (m: Merchant, day: string, c: StatementCompression) =>
  db.query(`UPDATE statement_files SET chunks = NULL WHERE app_id = $1 AND day = $2 AND compression = $3`, [m.appId, day, c]);

describe('made once, kept, served from what is kept', () => {
  for (const c of COMPRESSIONS) {
    test(`${c}: the first summary keeps the bytes in chunks; two downloads are the bytes of the file made from the rows, signed`, async () => {
      const m = await shopWithDay(DAY);
      const s = await summary(m, DAY, c);
      assert.equal(s.rowCount, ROWS);
      const k = await kept(m, DAY, c);
      assert.ok(k.chunks !== null && k.chunks >= 2, `several chunks (${k.chunks})`);
      assert.deepEqual(
        k.rows.map((r) => r.seq),
        Array.from({ length: k.chunks }, (_, i) => i),
      );
      for (const r of k.rows.slice(0, -1)) assert.equal(r.bytes.length, STATEMENT_CHUNK_BYTES);
      assert.equal(sha256(Buffer.concat(k.rows.map((r) => r.bytes))), s.sha256, 'the chunks, in order, are the file');

      const first = await goodDownload(m, DAY, c, s);
      const second = await goodDownload(m, DAY, c, s);
      assert.deepEqual(second, first);
      // The file made from the rows (the digest row as one made before bytes were kept): the same bytes.
      await unkeep(m, DAY, c);
      const fromRows = await goodDownload(m, DAY, c, s);
      assert.deepEqual(fromRows, first);
      const csv = c === 'GZIP' ? gunzipSync(first).toString() : first.toString();
      assert.equal(csv.split('\r\n').length, ROWS + 2, 'the header, every row, the last line end');
    });
  }

  for (const c of COMPRESSIONS) {
    test(`${c}: a download reads the kept bytes, not the rows: an event deleted after the summary changes nothing it sends`, async () => {
      const m = await shopWithDay(DAY);
      const s = await summary(m, DAY, c);
      // The rows of a closed day never change; here one is removed behind the service's back, so
      // that a file made from the rows now would differ from the digest.
      const gone = await db.query<{ id: string }>(
        `DELETE FROM events WHERE id = (SELECT id FROM events WHERE app_id = $1 ORDER BY created_at, id LIMIT 1 OFFSET 1000) RETURNING id`,
        [m.appId],
      );
      assert.equal(gone.rowCount, 1);
      const body = await goodDownload(m, DAY, c, s);
      const csv = c === 'GZIP' ? gunzipSync(body).toString() : body.toString();
      assert.ok(csv.includes(gone.rows[0]!.id), 'the deleted row is in the file: it was not read');
      // Made from the rows instead, the file no longer matches its digest: the download is cut before its end.
      await unkeep(m, DAY, c);
      const cut = await download(m, DAY, c);
      assert.equal(cut.status, 200);
      assert.equal(cut.complete, false, 'the answer was cut');
      assert.ok(cut.body.length < s.sizeBytes);
    });
  }
});

describe('kept bytes found damaged', () => {
  for (const c of COMPRESSIONS) {
    test(`${c}: a chunk removed: the download is the file made from the rows, whole; the kept bytes are dropped`, async () => {
      const m = await shopWithDay(DAY);
      const s = await summary(m, DAY, c);
      const before = await kept(m, DAY, c);
      await db.query(`DELETE FROM statement_file_chunks WHERE app_id = $1 AND day = $2 AND compression = $3 AND seq = 1`, [
        m.appId,
        DAY,
        c,
      ]);
      const body = await goodDownload(m, DAY, c, s);
      assert.deepEqual(body, Buffer.concat(before.rows.map((r) => r.bytes)));
      const after = await kept(m, DAY, c);
      assert.equal(after.digestRows, 1, 'the digest stays');
      assert.equal(after.sha256, s.sha256);
      assert.equal(after.chunks, null);
      assert.equal(after.rows.length, 0);
      await goodDownload(m, DAY, c, s);
    });

    test(`${c}: a chunk altered: the download is cut before its last bytes, never a whole wrong file; the next one is made from the rows`, async () => {
      const m = await shopWithDay(DAY);
      const s = await summary(m, DAY, c);
      const altered = await db.query(
        `UPDATE statement_file_chunks SET bytes = overlay(bytes PLACING '\\x00'::bytea FROM 100 FOR 1)
          WHERE app_id = $1 AND day = $2 AND compression = $3 AND seq = 0 AND get_byte(bytes, 99) <> 0`,
        [m.appId, DAY, c],
      );
      assert.equal(altered.rowCount, 1);
      const cut = await download(m, DAY, c);
      assert.equal(cut.status, 200);
      assert.equal(cut.complete, false, 'the answer was cut');
      assert.ok(cut.body.length < s.sizeBytes, 'short of the file');
      const after = await kept(m, DAY, c);
      assert.equal(after.chunks, null, 'dropped before the cut');
      assert.equal(after.rows.length, 0);
      await goodDownload(m, DAY, c, s);
    });
  }

  test('a chunk gone while the file is being sent (the purge at the end of its time): the stream fails before the end, the kept bytes dropped', async () => {
    const m = await shopWithDay(DAY);
    const s = await summary(m, DAY, 'NONE');
    const chunks = (await kept(m, DAY, 'NONE')).chunks!;
    assert.ok(chunks >= 8, `chunks ${chunks}: more than the streams read ahead`);
    const caller = { app: { id: m.appId }, merchantEntityType: 'CORPORATE', requestId: 'req_kept_gone', receivedAtMs: clock.now() };
    const { body } = await statementFile(t.svc, caller as unknown as Caller, DAY, 'NONE');
    const it = body[Symbol.asyncIterator]();
    let received = ((await it.next()).value as Buffer).length;
    await db.query(`DELETE FROM statement_file_chunks WHERE app_id = $1 AND day = $2 AND compression = 'NONE' AND seq = $3`, [
      m.appId,
      DAY,
      chunks - 1,
    ]);
    await assert.rejects(async () => {
      for (;;) {
        const n = await it.next();
        if (n.done === true) break;
        received += (n.value as Buffer).length;
      }
    }, StatementChangedError);
    assert.ok(received < s.sizeBytes);
    assert.equal((await kept(m, DAY, 'NONE')).chunks, null);
  });
});

describe('two instances make the same file at once', () => {
  let b: BuiltApp;
  before(async () => {
    b = await buildApp(t.config, { clock });
  });
  after(async () => {
    await b.close();
  });

  for (const c of COMPRESSIONS) {
    test(`${c}: both first summaries give the same digest; one complete set of chunks is kept`, async () => {
      const m = await shopWithDay(DAY);
      const [sa, sb] = await Promise.all([summary(m, DAY, c), summary(m, DAY, c, b)]);
      assert.deepEqual(sa, sb);
      const k = await kept(m, DAY, c);
      assert.equal(k.digestRows, 1);
      assert.ok(k.chunks !== null);
      assert.deepEqual(
        k.rows.map((r) => r.seq),
        Array.from({ length: k.chunks }, (_, i) => i),
      );
      assert.equal(sha256(Buffer.concat(k.rows.map((r) => r.bytes))), sa.sha256);
      await goodDownload(m, DAY, c, sa);
    });
  }
});

describe('retention', () => {
  test(`the purge drops the bytes of days more than ${KEPT_DAYS} days old, keeps the digests and the later days; downloads go on, from the rows`, async () => {
    const m = await shopWithDay(DAY);
    const recent = await shopWithDay(DAY2);
    const summaries = new Map<string, Summary>();
    for (const c of COMPRESSIONS) {
      summaries.set(c, await summary(m, DAY, c));
      assert.notEqual((await kept(m, DAY, c)).chunks, null);
      await summary(recent, DAY2, c);
    }
    const recentBefore = await kept(recent, DAY2, 'NONE');

    clock.advance(3 * DAY_MS);
    assert.ok((await t.svc.purgeHistory()) > 0);
    const left = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM statement_file_chunks WHERE day <= $1`, [DAY]);
    assert.equal(left.rows[0]!.n, 0, 'no chunk of DAY or before is left, of any app');
    for (const c of COMPRESSIONS) {
      const k = await kept(m, DAY, c);
      assert.equal(k.digestRows, 1, 'the digest stays');
      assert.equal(k.sha256, summaries.get(c)!.sha256);
      assert.equal(k.chunks, null);
      assert.deepEqual(await summary(m, DAY, c), summaries.get(c), 'the same summary');
      await goodDownload(m, DAY, c, summaries.get(c)!);
    }
    const recentAfter = await kept(recent, DAY2, 'NONE');
    assert.equal(recentAfter.chunks, recentBefore.chunks, 'a day within its time keeps its bytes');
    assert.equal(recentAfter.rows.length, recentBefore.rows.length);

    // A first summary of a day already past its time keeps no bytes.
    const late = await shopWithDay(DAY);
    const s = await summary(late, DAY, 'NONE');
    const k = await kept(late, DAY, 'NONE');
    assert.equal(k.digestRows, 1);
    assert.equal(k.chunks, null);
    assert.equal(k.rows.length, 0);
    await goodDownload(late, DAY, 'NONE', s);
    assert.equal(await t.svc.purgeHistory(), 0, 'nothing more to drop');
  });
});
