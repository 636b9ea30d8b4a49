/**
 * Prometheus metrics at GET /metrics (admin bearer token): process metrics, HTTP requests by
 * surface and status, open-API failures by code, the outbox backlog, provider discrepancies (found,
 * open, resolved), reconciliation runs and the refusals held past their address's budget.
 */
import type { FastifyInstance } from 'fastify';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Db } from '../store/db.ts';
import { countDiscrepancies } from '../store/discrepancies.ts';
import { latestCompletedRuns } from '../store/reconciliation.ts';
import { countEventsByStatus } from '../store/events.ts';
import { hasAdminToken } from '../backoffice-http/basics.ts';

export interface Metrics {
  registry: Registry;
  requests: Counter<'surface' | 'status'>;
  duration: Histogram<'surface'>;
  failures: Counter<'code'>;
}

/**
 * One read shared by the gauges that show it: a scrape collects every gauge at once, so the first
 * gauge's collect starts the query and the others join it (one query per scrape).
 */
function shared<T>(read: () => Promise<T>): () => Promise<T> {
  let pending: Promise<T> | null = null;
  return () => {
    pending ??= read().finally(() => {
      pending = null;
    });
    return pending;
  };
}

export function createMetrics(svc: { db: Db; refusals: { held: number; heldTotal: number } }): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'mps_' });
  const m: Metrics = {
    registry,
    requests: new Counter({
      name: 'mps_http_requests_total',
      help: 'HTTP requests by surface and status',
      labelNames: ['surface', 'status'],
      registers: [registry],
    }),
    duration: new Histogram({
      name: 'mps_http_request_duration_seconds',
      help: 'HTTP request duration by surface',
      labelNames: ['surface'],
      buckets: [0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10],
      registers: [registry],
    }),
    failures: new Counter({
      name: 'mps_open_api_failures_total',
      help: 'Open-API failure answers by code',
      labelNames: ['code'],
      registers: [registry],
    }),
  };
  registerStateGauges(registry, svc.db);
  // The refusals held past their address's budget (gate/refusal-pacer.ts).
  new Gauge({
    name: 'mps_refusals_held',
    help: 'Refusals before authentication being held now, their source address past its budget',
    registers: [registry],
    collect() {
      this.set(svc.refusals.held);
    },
  });
  new Counter({
    name: 'mps_refusals_held_total',
    help: 'Refusals before authentication held since the start, their source address past its budget',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(svc.refusals.heldTotal);
    },
  });
  return m;
}

/**
 * Gauges of the service's state, read from the database when scraped: the outbox by delivery
 * status, provider discrepancies, and each provider's latest reconciliation run (the two gauges of
 * discrepancies, and the two of runs, share one read per scrape).
 */
function registerStateGauges(registry: Registry, db: Db): void {
  const discrepancies = shared(() => countDiscrepancies(db));
  const latestRuns = shared(() => latestCompletedRuns(db));
  new Gauge({
    name: 'mps_outbox_events',
    help: 'Event notifications by delivery status',
    labelNames: ['status'],
    registers: [registry],
    async collect() {
      const rows = await countEventsByStatus(db);
      this.reset();
      for (const row of rows) this.set({ status: row.status }, row.n);
    },
  });
  new Gauge({
    name: 'mps_provider_discrepancies_open',
    help: 'Provider reports kept for the operator (not applied: amount, currency or provider mismatch, or a notice that needs an operator)',
    labelNames: ['provider', 'kind'],
    registers: [registry],
    async collect() {
      const rows = await discrepancies();
      this.reset();
      // The open ones of every source, by provider and kind.
      for (const row of rows) if (row.status === 'OPEN') this.inc({ provider: row.provider, kind: row.kind }, row.n);
    },
  });
  new Gauge({
    name: 'mps_provider_discrepancies',
    help: 'Provider discrepancies by provider, source, kind and status: found = OPEN + RESOLVED (reconciliation findings have source STATEMENT)',
    labelNames: ['provider', 'source', 'kind', 'status'],
    registers: [registry],
    async collect() {
      const rows = await discrepancies();
      this.reset();
      for (const row of rows) this.set({ provider: row.provider, source: row.source, kind: row.kind, status: row.status }, row.n);
    },
  });
  new Gauge({
    name: 'mps_reconciliation_last_completed_seconds',
    help: "When each provider's latest reconciliation run completed (Unix time): alert when it falls more than a day behind",
    labelNames: ['provider'],
    registers: [registry],
    async collect() {
      const rows = await latestRuns();
      this.reset();
      for (const row of rows) this.set({ provider: row.provider }, Math.floor(row.finishedAt.getTime() / 1000));
    },
  });
  new Gauge({
    name: 'mps_reconciliation_last_discrepancies',
    help: "Discrepancies found by each provider's latest completed reconciliation run",
    labelNames: ['provider'],
    registers: [registry],
    async collect() {
      const rows = await latestRuns();
      this.reset();
      for (const row of rows) this.set({ provider: row.provider }, row.discrepancies);
    },
  });
}

function surfaceOf(url: string): string {
  if (url.startsWith('/api/open/')) return 'open';
  if (url.startsWith('/api/admin/')) return 'admin';
  if (url.startsWith('/api/sandbox/')) return 'sandbox';
  if (url.startsWith('/cashier/')) return 'cashier';
  return 'other';
}

export function installMetrics(server: FastifyInstance, m: Metrics, adminToken: string): void {
  server.addHook('onResponse', async (req, reply) => {
    const surface = surfaceOf(req.url);
    m.requests.inc({ surface, status: String(reply.statusCode) });
    m.duration.observe({ surface }, reply.elapsedTime / 1000);
    if (surface === 'open' && reply.statusCode >= 400) {
      const code = (req as { openFailureCode?: string }).openFailureCode;
      if (code) m.failures.inc({ code });
    }
  });
  server.get('/metrics', async (req, reply) => {
    if (!hasAdminToken(req.headers.authorization, adminToken))
      return reply.code(401).send({ code: 'ADMIN_UNAUTHORIZED', message: 'a valid admin bearer token is required' });
    return reply.type(m.registry.contentType).send(await m.registry.metrics());
  });
}
