/**
 * Test service: buildApp on a fresh database with a temporary DATA_DIR, plus merchant
 * provisioning through the admin API and signed open-API requests (decisions.md section 1).
 */
import type { JobKind } from '../../src/domain/jobs.ts';
import { generateKeyPairSync, randomBytes, sign } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { LightMyRequestResponse } from 'fastify';
import { requestSigningString } from '@mps/sdk/signing';
import { type AppOverrides, type BuiltApp, buildApp } from '../../src/app.ts';
import { type Config, loadConfig } from '../../src/config/config.ts';
import type { Clock } from '../../src/services.ts';
import { createTestDatabase } from './db.ts';

export const ADMIN_TOKEN = 'test-admin-token-0123456789';

let cachedKey: { privateKeyPem: string; publicKeyPem: string } | null = null;
export function merchantKeyPair(): { privateKeyPem: string; publicKeyPem: string } {
  if (!cachedKey) {
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    cachedKey = {
      privateKeyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
      publicKeyPem: publicKey.export({ type: 'spki', format: 'pem' }).toString(),
    };
  }
  return cachedKey;
}

export interface TestApp extends BuiltApp {
  config: Config;
  admin(method: string, url: string, body?: unknown): Promise<LightMyRequestResponse>;
  /** Sandbox helpers under /api/sandbox/v1 (admin token). */
  sandbox(method: string, url: string, body?: unknown): Promise<LightMyRequestResponse>;
  stop(): Promise<void>;
}

export async function startTestApp(
  env: Record<string, string> = {},
  opts: { clock?: Clock; connectionIdleTimeoutMs?: number; logger?: AppOverrides['logger'] } = {},
): Promise<TestApp> {
  const db = await createTestDatabase();
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'mps-test-'));
  const config = loadConfig({
    DATABASE_URL: db.url,
    DATA_DIR: dataDir,
    ADMIN_TOKEN,
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    PUBLIC_BASE_URL: 'https://pay.example.test',
    ...env,
  });
  const built = await buildApp(config, { clock: opts.clock, connectionIdleTimeoutMs: opts.connectionIdleTimeoutMs, logger: opts.logger });
  const privileged = (prefix: string) => (method: string, url: string, body?: unknown) =>
    built.server.inject({
      method: method as 'GET',
      url: `${prefix}${url}`,
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      payload: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    });
  return {
    ...built,
    config,
    admin: privileged('/api/admin/v1'),
    sandbox: privileged('/api/sandbox/v1'),
    async stop() {
      await built.close();
      await db.drop();
      await fs.rm(dataDir, { recursive: true, force: true });
    },
  };
}

export interface Merchant {
  merchantId: string;
  appId: string;
  keyId: string;
  privateKeyPem: string;
}

export async function provision(
  t: TestApp,
  o: { name?: string; entityType?: 'INDIVIDUAL' | 'CORPORATE'; app?: Record<string, unknown>; keyId?: string } = {},
): Promise<Merchant> {
  const m = await t.admin('POST', '/merchants', { name: o.name ?? 'Test Shop', entityType: o.entityType ?? 'CORPORATE' });
  if (m.statusCode !== 201) throw new Error(`merchant: ${m.body}`);
  const merchantId = m.json().merchantId as string;
  const a = await t.admin('POST', `/merchants/${merchantId}/apps`, o.app ?? {});
  if (a.statusCode !== 201) throw new Error(`app: ${a.body}`);
  const appId = a.json().appId as string;
  const keyId = o.keyId ?? 'key-1';
  const k = await t.admin('POST', `/apps/${appId}/keys`, { keyId, publicKeyPem: merchantKeyPair().publicKeyPem });
  if (k.statusCode !== 201) throw new Error(`key: ${k.body}`);
  return { merchantId, appId, keyId, privateKeyPem: merchantKeyPair().privateKeyPem };
}

export interface SignOptions {
  nonce?: string;
  timestamp?: string;
  requestId?: string;
  contentType?: string | null;
  headers?: Record<string, string>;
  omit?: string[];
  remoteAddress?: string;
  sign?: string;
  keyId?: string;
  appId?: string;
}

export function nonce(): string {
  return randomBytes(16).toString('hex');
}

export function requestId(): string {
  return `req_${randomBytes(8).toString('hex')}`;
}

/** Builds the six signed headers for a request. */
export function signedHeaders(
  mch: Merchant,
  method: string,
  url: string,
  rawBody: string | Buffer,
  o: SignOptions = {},
): Record<string, string> {
  const contentType = o.contentType === undefined ? (method === 'GET' ? null : 'application/json') : o.contentType;
  const h: Record<string, string> = {
    'X-SVC-App-Id': o.appId ?? mch.appId,
    'X-SVC-Key-Id': o.keyId ?? mch.keyId,
    'X-SVC-Timestamp': o.timestamp ?? String(Math.floor(Date.now() / 1000)),
    'X-SVC-Nonce': o.nonce ?? nonce(),
    'X-SVC-Request-Id': o.requestId ?? requestId(),
  };
  const s = requestSigningString({
    method,
    target: url,
    appId: h['X-SVC-App-Id']!,
    keyId: h['X-SVC-Key-Id']!,
    timestamp: h['X-SVC-Timestamp']!,
    nonce: h['X-SVC-Nonce']!,
    requestId: h['X-SVC-Request-Id']!,
    contentType: contentType ?? undefined,
    body: rawBody,
  });
  h['X-SVC-Sign'] = o.sign ?? sign('sha256', Buffer.from(s), mch.privateKeyPem).toString('base64');
  if (contentType !== null) h['Content-Type'] = contentType;
  for (const k of o.omit ?? []) delete h[k];
  return { ...h, ...(o.headers ?? {}) };
}

export function call(
  t: TestApp,
  mch: Merchant,
  method: string,
  url: string,
  body?: unknown,
  o: SignOptions = {},
): Promise<LightMyRequestResponse> {
  const raw = body === undefined ? '' : typeof body === 'string' ? body : JSON.stringify(body);
  return t.server.inject({
    method: method as 'GET',
    url,
    headers: signedHeaders(mch, method, url, raw, o),
    payload: raw === '' ? undefined : raw,
    remoteAddress: o.remoteAddress ?? '127.0.0.1',
  });
}

let seq = 0;
export function tradeNo(prefix = 'T'): string {
  return `${prefix}_${Date.now().toString(36)}_${(seq++).toString(36)}_${randomBytes(3).toString('hex')}`;
}

export function orderBody(o: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    outTradeNo: tradeNo(),
    channel: 'ALIPAY_H5',
    amountFen: 1000,
    currency: 'CNY',
    subject: 'Coffee',
    payerClientIp: '8.8.8.8',
    ...o,
  };
}

/**
 * Runs the background jobs the test's requests left (closing stray attempts, refunding duplicate
 * payments, ...) until none is due: what the workers would do on their next passes.
 */
export async function drainFollowUps(t: TestApp): Promise<void> {
  for (let i = 0; i < 20 && (await t.workers.jobs.run()) > 0; i++) await t.workers.jobs.idle();
}

/** Makes the job (kind, subject) due now (subject '' for a recurring kind): as if its time had come. */
export async function makeJobDue(t: TestApp, kind: JobKind, subjectId = ''): Promise<number> {
  const r = await t.svc.db.query(
    'UPDATE jobs SET run_at = $3, locked_by = NULL, holder_instance = NULL WHERE kind = $1 AND subject_id = $2',
    [kind, subjectId, new Date(t.svc.clock.now() - 1)],
  );
  return r.rowCount ?? 0;
}

/** FIND_DUE_WORK now (it finds orders past their window, stalled attempts and refunds), then every job due. */
export async function runDueWork(t: TestApp): Promise<void> {
  await t.workers.jobs.run();
  await makeJobDue(t, 'FIND_DUE_WORK');
  await drainFollowUps(t);
}
