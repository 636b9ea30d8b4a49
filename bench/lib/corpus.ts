/**
 * Request corpora of the scenarios, signed before the measured phase by a pool of worker threads
 * (one per core). Every request gets its own nonce, timestamp and signature; replayed requests keep
 * their X-SVC-Request-Id and body, as a merchant's retry does.
 */
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import { Worker } from 'node:worker_threads';

export type Kind = 'create' | 'query' | 'close' | 'replay' | 'pay' | 'refund';

/** Kinds sent to the open API: signed by the merchant, answered signed. `pay` is a sandbox helper (admin token). */
export function isOpenApi(kind: string): boolean {
  return kind !== 'pay';
}

export interface Spec {
  method: 'GET' | 'POST';
  path: string;
  body: string;
  requestId: string;
  /** the app whose key signs it (one of the pool's credentials); the pool's first when absent */
  appId?: string;
}

export interface Item extends Spec {
  kind: Kind;
  /** the status a correct answer has */
  expect: number;
  headers: Record<string, string>;
  /** create: the order number it creates; close, pay, refund: the order it acts on */
  tradeNo?: string;
  /** create: the order's amount; refund: the amount refunded */
  amountFen?: number;
  /** replay scenario: the request-id group (all its members must get the same bytes back) */
  group?: number;
}

export interface SignBatch {
  id: number;
  specs: Spec[];
}

export interface SignedBatch {
  id: number;
  headers: Record<string, string>[];
  minTs: number;
}

const OPEN = '/api/open/v1';
const runTag = randomBytes(3).toString('hex');
let seq = 0;

function nextId(): string {
  return (seq++).toString(36);
}

function requestId(): string {
  return `bench-${runTag}-${nextId()}`;
}

export function createSpec(amountFen = 1000 + (seq % 997)): Spec & { tradeNo: string; amountFen: number } {
  const tradeNo = `B${runTag}_${nextId()}`;
  const body = JSON.stringify({
    outTradeNo: tradeNo,
    channel: seq % 2 === 0 ? 'ALIPAY_H5' : 'WECHAT_H5',
    amountFen,
    currency: 'CNY',
    subject: 'Bench order',
    description: 'Load test order',
    payerClientIp: '8.8.8.8',
  });
  return { method: 'POST', path: `${OPEN}/payments`, body, requestId: requestId(), tradeNo, amountFen };
}

function unsigned(s: Spec, kind: Kind, expect: number, extra: Partial<Item> = {}): Item {
  return { ...s, kind, expect, headers: {}, ...extra };
}

function pick<T>(a: readonly T[]): T {
  return a[Math.floor(Math.random() * a.length)]!;
}

function shuffle<T>(a: T[]): T[] {
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [a[i], a[j]] = [a[j]!, a[i]!];
  }
  return a;
}

export function createItems(n: number): Item[] {
  return Array.from({ length: n }, () => {
    const s = createSpec();
    return unsigned(s, 'create', 201, { tradeNo: s.tradeNo, amountFen: s.amountFen });
  });
}

export function queryItems(n: number, orders: readonly string[]): Item[] {
  if (orders.length === 0) throw new Error('no orders to query');
  return Array.from({ length: n }, () =>
    unsigned({ method: 'GET', path: `${OPEN}/payments/${pick(orders)}`, body: '', requestId: requestId() }, 'query', 200),
  );
}

export function closeItem(tradeNo: string): Item {
  return unsigned({ method: 'POST', path: `${OPEN}/payments/${tradeNo}/close`, body: '', requestId: requestId() }, 'close', 200, {
    tradeNo,
  });
}

/** The buyer pays the order (sandbox helper, admin bearer token; not signed). */
export function payItem(tradeNo: string, openOrderId: string, adminToken: string): Item {
  return {
    kind: 'pay',
    expect: 200,
    method: 'POST',
    path: `/api/sandbox/v1/payments/${openOrderId}/pay`,
    body: '{}',
    requestId: requestId(),
    headers: { Authorization: `Bearer ${adminToken}`, 'Content-Type': 'application/json' },
    tradeNo,
  };
}

/** A full refund of a paid order (the sandbox settles it about a second later: REFUND_SUCCEEDED). */
export function refundItem(tradeNo: string, amountFen: number): Item {
  const body = JSON.stringify({
    outTradeNo: tradeNo,
    outRefundNo: `R${runTag}_${nextId()}`,
    refundAmountFen: amountFen,
    reason: 'Bench refund',
  });
  return unsigned({ method: 'POST', path: `${OPEN}/refunds`, body, requestId: requestId() }, 'refund', 201, { tradeNo, amountFen });
}

export const MIX = { query: 0.7, create: 0.25, close: 0.05 };

/** 70% query / 25% create / 5% close (exact counts, shuffled); closes take distinct open orders. */
export function mixedItems(n: number, orders: readonly string[], closable: string[]): Item[] {
  const nClose = Math.round(n * MIX.close);
  const nCreate = Math.round(n * MIX.create);
  if (closable.length < nClose) throw new Error(`mixed: ${nClose} closes need as many open orders (have ${closable.length})`);
  const items = [...queryItems(n - nClose - nCreate, orders), ...createItems(nCreate), ...closable.splice(0, nClose).map(closeItem)];
  return shuffle(items);
}

/** Orders the realistic mix acts on, taken (spliced) from the run's order book. */
export interface RealisticPools {
  /** any order of the app (queries) */
  orders: readonly string[];
  /** n open orders to close */
  takeClosable(n: number): string[];
  /** n open orders whose openOrderId is known (the buyer pays them) */
  takePayable(n: number): { tradeNo: string; openOrderId: string }[];
  /** n paid orders not refunded yet */
  takePaid(n: number): { tradeNo: string; amountFen: number }[];
}

export const REALISTIC = { create: 0.5, query: 0.3, pay: 0.1, refund: 0.05, close: 0.05 };

/** create 50% / query 30% / pay 10% / refund 5% / close 5% (exact counts, shuffled). */
export function realisticItems(n: number, pools: RealisticPools, adminToken: string): Item[] {
  const count = (share: number) => Math.round(n * share);
  const nPay = count(REALISTIC.pay);
  const nRefund = count(REALISTIC.refund);
  const nClose = count(REALISTIC.close);
  const nQuery = count(REALISTIC.query);
  const pay = pools.takePayable(nPay);
  const refund = pools.takePaid(nRefund);
  const close = pools.takeClosable(nClose);
  if (pay.length < nPay || refund.length < nRefund || close.length < nClose)
    throw new Error(
      `realistic: too few orders (pay ${pay.length}/${nPay}, refund ${refund.length}/${nRefund}, close ${close.length}/${nClose})`,
    );
  return shuffle([
    ...createItems(n - nPay - nRefund - nClose - nQuery),
    ...queryItems(nQuery, pools.orders),
    ...pay.map((p) => payItem(p.tradeNo, p.openOrderId, adminToken)),
    ...refund.map((r) => refundItem(r.tradeNo, r.amountFen)),
    ...close.map(closeItem),
  ]);
}

/**
 * Replay-heavy: ceil(n / repeats) create requests, each sent `repeats` times under one
 * X-SVC-Request-Id (same body), each time with a fresh nonce, timestamp and signature. Sent in
 * blocks of `window` ids: a block's first round executes, the next rounds replay.
 */
export function replayItems(n: number, repeats: number, window = 200): Item[] {
  const groups = Math.ceil(n / repeats);
  const out: Item[] = [];
  for (let b = 0; b < groups; b += window) {
    const block = Array.from({ length: Math.min(window, groups - b) }, (_, i) => ({ spec: createSpec(), group: b + i }));
    for (let r = 0; r < repeats; r++) {
      for (const { spec, group } of block) {
        if (out.length === n) break;
        out.push(unsigned(spec, 'replay', 201, { tradeNo: spec.tradeNo, group }));
      }
    }
  }
  return out;
}

export interface Credentials {
  privateKeyPem: string;
  appId: string;
  keyId: string;
}

/** A pool of signing worker threads (one per core), holding the keys of every app of the run. */
export class SignPool {
  readonly #workers: Worker[];
  #next = 0;
  readonly #waiting = new Map<number, { done: (b: SignedBatch) => void; fail: (err: Error) => void }>();

  constructor(creds: Credentials[], size = os.availableParallelism()) {
    this.#workers = Array.from({ length: size }, () => {
      const w = new Worker(new URL('./sign-worker.ts', import.meta.url), { workerData: creds });
      w.on('message', (b: SignedBatch) => {
        const job = this.#waiting.get(b.id);
        this.#waiting.delete(b.id);
        job?.done(b);
      });
      w.on('error', (err) => {
        // a worker that fails fails every batch still waiting
        for (const job of this.#waiting.values()) job.fail(err);
        this.#waiting.clear();
      });
      return w;
    });
  }

  /** Signs every item in place; returns the earliest timestamp used (epoch seconds) and the time taken. */
  async sign(items: Item[], batchSize = 250): Promise<{ minTs: number; seconds: number }> {
    const t0 = performance.now();
    const jobs: Promise<void>[] = [];
    let minTs = Infinity;
    const open = items.filter((it) => isOpenApi(it.kind));
    for (let off = 0; off < open.length; off += batchSize) {
      const slice = open.slice(off, off + batchSize);
      const id = this.#next++;
      const w = this.#workers[id % this.#workers.length]!;
      jobs.push(
        new Promise<void>((resolve, reject) => {
          this.#waiting.set(id, {
            done: (b) => {
              b.headers.forEach((h, i) => (slice[i]!.headers = h));
              minTs = Math.min(minTs, b.minTs);
              resolve();
            },
            fail: reject,
          });
          w.postMessage({ id, specs: slice.map(({ method, path, body, requestId, appId }) => ({ method, path, body, requestId, appId })) });
        }),
      );
    }
    await Promise.all(jobs);
    if (minTs === Infinity) minTs = Math.floor(Date.now() / 1000);
    return { minTs, seconds: (performance.now() - t0) / 1000 };
  }

  async close(): Promise<void> {
    await Promise.all(this.#workers.map((w) => w.terminate()));
  }
}
