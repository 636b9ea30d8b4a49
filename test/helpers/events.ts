/**
 * Event-notification test helpers: a fake clock that only moves forward from real time, a real
 * webhook receiver (node:http on 127.0.0.1, port 0) with per-path behaviour, and a second service
 * instance on the database of a test app (restart / crash tests).
 */
import http, { type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type BuiltApp, buildApp } from '../../src/app.ts';
import type { Clock } from '../../src/services.ts';
import type { TestApp } from './app.ts';

/**
 * Real time plus an offset that tests advance. Never behind real time: rows whose timestamps
 * the database fills in with now() are due for it too.
 */
export class FakeClock implements Clock {
  offsetMs = 0;
  now(): number {
    return Date.now() + this.offsetMs;
  }
  advance(ms: number): void {
    this.offsetMs += ms;
  }
  /** Moves to `atMs` (never backwards). */
  advanceTo(atMs: number): void {
    const d = atMs - this.now();
    if (d > 0) this.offsetMs += d;
  }
}

export interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  /** The raw body exactly as received. */
  body: string;
  at: number;
}

/** Answers one request; `n` counts the requests received on this path so far (1-based). */
export type Behavior = (res: ServerResponse, n: number, req: IncomingMessage) => void;

export class Receiver {
  readonly received: Received[] = [];
  readonly #behaviors = new Map<string, Behavior>();
  readonly #held: ServerResponse[] = [];
  readonly #server: http.Server;
  port = 0;

  private constructor() {
    this.#server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const path = req.url ?? '';
        this.received.push({ path, headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), at: Date.now() });
        const behavior = this.#behaviors.get(path) ?? ((r) => r.writeHead(200).end('ok'));
        behavior(res, this.at(path).length, req);
      });
    });
  }

  static async start(): Promise<Receiver> {
    const r = new Receiver();
    await new Promise<void>((resolve) => r.#server.listen(0, '127.0.0.1', resolve));
    r.port = (r.#server.address() as AddressInfo).port;
    return r;
  }

  url(path: string): string {
    return `http://127.0.0.1:${this.port}${path}`;
  }

  on(path: string, behavior: Behavior): void {
    this.#behaviors.set(path, behavior);
  }

  /** Requests on this path never get an answer until release(). */
  hold(path: string): void {
    this.on(path, (res) => this.#held.push(res));
  }

  get heldCount(): number {
    return this.#held.filter((r) => !r.writableEnded && !r.destroyed).length;
  }

  release(status = 200): void {
    for (const res of this.#held.splice(0)) if (!res.writableEnded && !res.destroyed) res.writeHead(status).end();
  }

  at(path: string): Received[] {
    return this.received.filter((r) => r.path === path);
  }

  async close(): Promise<void> {
    this.release(503);
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}

/** A second service instance on the same database and DATA_DIR (same platform key), as after a restart. */
export function reopenApp(t: TestApp, clock: Clock): Promise<BuiltApp> {
  return buildApp(t.config, { clock });
}

export async function waitFor<T>(what: string, fn: () => Promise<T | undefined | null | false>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
