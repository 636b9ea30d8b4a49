/**
 * The back-office (admin) API under /api/admin/v1, bearer ADMIN_TOKEN (decisions.md section 8).
 * Errors are {code, message}. Every body is validated strictly; a rejected request changes nothing.
 */
import { createPublicKey } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AdminError } from '../domain/errors.ts';
import { newId } from '../domain/ids.ts';
import type { ObjectSchema } from '../domain/schema.ts';
import { validate } from '../domain/schema.ts';
import { CidrList } from '../net/ip.ts';
import type { Services } from '../services.ts';
import { withTx } from '../store/db.ts';
import { getAllocation, getApp, getAppKey, getFeeRule, getMerchant, listAccounts, listApps } from '../store/merchants.ts';
import { checkNotifyUrl } from '../events/notify-url.ts';
import { rescheduleAppEvents } from '../events/dispatcher.ts';
import {
  addKeySchema,
  allocationSchema,
  createAccountSchema,
  createAppSchema,
  createMerchantSchema,
  feeRuleSchema,
  ipPolicySchema,
  patchAppSchema,
  patchKeySchema,
  rotateKeySchema,
} from './admin-schemas.ts';
import { BODY_LIMIT_BYTES } from '../gate/gate.ts';
import { BodyError, type ParsedBody, hasAdminToken, installRawJsonParser } from './common.ts';
import { registerAdminOperations } from './admin-operations.ts';

type Body = Record<string, unknown>;

/** A rotated platform key signs this long after it is published, unless the rotation says otherwise. */
export const DEFAULT_KEY_ACTIVATION_SECONDS = 86_400;

/**
 * Re-reads a (guard-checked) body marking every number literal written with a fraction or an
 * exponent, at any depth, as a boxed Number: integer fields then refuse `5000.0` as a decimal.
 */
function markDecimals(raw: Buffer): unknown {
  const reviver = (_k: string, v: unknown, ctx?: { source?: string }) =>
    typeof v === 'number' && ctx?.source !== undefined && /[.eE]/.test(ctx.source) ? new Number(v) : v;
  return JSON.parse(raw.toString('utf8'), reviver as (k: string, v: unknown) => unknown);
}

export function bodyOf(req: FastifyRequest, schema: ObjectSchema): Body {
  const parsed = req.body as ParsedBody | undefined;
  if (parsed?.value === undefined) throw new AdminError('ADMIN_VALIDATION_FAILED', 'a JSON body is required');
  const value = markDecimals(parsed.raw);
  const v = validate(schema, value, '', parsed?.decimalLiterals);
  if (v) throw new AdminError('ADMIN_VALIDATION_FAILED', v.message);
  return value as Body;
}

/** bodyOf for an operation whose fields are all optional: no body at all is `{}`. */
export function optionalBodyOf(req: FastifyRequest, schema: ObjectSchema): Body {
  return (req.body as ParsedBody | undefined)?.value === undefined ? {} : bodyOf(req, schema);
}

function notFound(what: string): AdminError {
  return new AdminError('ADMIN_NOT_FOUND', `${what} not found`);
}

/** A PEM public key only (a pasted private key is refused, never "derived from"), RSA 2048-4096. */
export function checkPublicKeyPem(pem: string): string {
  const t = pem.trim();
  if (/PRIVATE KEY/.test(t))
    throw new AdminError('ADMIN_VALIDATION_FAILED', 'publicKeyPem holds a private key; register only the public key');
  if (!/^-----BEGIN (RSA )?PUBLIC KEY-----[\s\S]+-----END (RSA )?PUBLIC KEY-----$/.test(t) || t.split('-----BEGIN ').length !== 2) {
    throw new AdminError('ADMIN_VALIDATION_FAILED', 'publicKeyPem must be one PEM public key (-----BEGIN PUBLIC KEY-----)');
  }
  let key: ReturnType<typeof createPublicKey>;
  try {
    key = createPublicKey(t);
  } catch {
    throw new AdminError('ADMIN_VALIDATION_FAILED', 'publicKeyPem cannot be parsed');
  }
  const bits = key.asymmetricKeyDetails?.modulusLength ?? 0;
  if (key.asymmetricKeyType !== 'rsa' || bits < 2048 || bits > 4096) {
    throw new AdminError('ADMIN_VALIDATION_FAILED', `publicKeyPem must be an RSA key of 2048 to 4096 bits`);
  }
  return key.export({ type: 'spki', format: 'pem' }).toString();
}

function checkCidrs(field: string, entries: unknown): string[] {
  try {
    return CidrList.parse(entries as string[]).toJSON();
  } catch (err) {
    throw new AdminError('ADMIN_VALIDATION_FAILED', `${field}: ${(err as Error).message}`);
  }
}

function appView(a: Awaited<ReturnType<typeof getApp>> & {}) {
  return {
    appId: a.id,
    merchantId: a.merchantId,
    status: a.status,
    notifyUrl: a.notifyUrl,
    channels: a.channels,
    tradeScopes: a.tradeScopes,
    voidedLinks: a.voidedLinks,
    ipAllowlist: a.ipAllowlist,
    paymentWindowSeconds: a.paymentWindowSeconds,
    dailyAmountCeilingFen: a.dailyAmountCeilingFen,
    rateLimitPerSecond: a.rateLimitPerSecond,
    createdAt: a.createdAt.toISOString(),
    updatedAt: a.updatedAt.toISOString(),
  };
}

/**
 * Errors of the back-office surfaces (admin and sandbox helpers) as `{code, message}`: a refused
 * body is 400 (413 when too large), any other fault 503, never a 500.
 */
export function adminErrorHandler(logMessage: string) {
  return (err: Error & { statusCode?: number; code?: string }, req: FastifyRequest, reply: FastifyReply) => {
    if (err instanceof AdminError) return reply.code(err.status).send({ code: err.code, message: err.message });
    if (err instanceof BodyError) {
      return err.kind === 'TOO_LARGE'
        ? reply.code(413).send({ code: 'ADMIN_VALIDATION_FAILED', message: err.message })
        : reply.code(400).send({ code: 'ADMIN_VALIDATION_FAILED', message: err.message });
    }
    if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE')
      return reply.code(413).send({ code: 'ADMIN_VALIDATION_FAILED', message: 'body too large' });
    if (typeof err.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 500) {
      return reply.code(400).send({ code: 'ADMIN_VALIDATION_FAILED', message: err.message });
    }
    // A value PostgreSQL cannot store (U+0000) that got past the checks above: bad input, not a fault.
    if (err.code === '22021' || err.code === '22P05') {
      return reply
        .code(400)
        .send({ code: 'ADMIN_VALIDATION_FAILED', message: 'a value contains a character that cannot be stored (U+0000)' });
    }
    req.log.error({ err }, logMessage);
    return reply.code(503).send({ code: 'ADMIN_UNAVAILABLE', message: 'the service is temporarily unavailable' });
  };
}

/**
 * A back-office scope (the admin API, the sandbox helpers): strict JSON bodies with the open API's
 * 64 KB limit, the admin bearer token first, `{code, message}` for every error, an unknown path
 * included (404 after the token check).
 */
export function installBackOffice(scope: FastifyInstance, adminToken: string, logMessage: string): void {
  installRawJsonParser(scope, BODY_LIMIT_BYTES);
  scope.addHook('onRequest', async (req) => {
    if (!hasAdminToken(req.headers.authorization, adminToken))
      throw new AdminError('ADMIN_UNAUTHORIZED', 'a valid admin bearer token is required');
    // PostgreSQL text cannot hold U+0000, and no id or filter of ours contains it: such a path
    // parameter names nothing (404) and such a query value is refused (400), before any lookup.
    for (const [name, v] of Object.entries((req.params ?? {}) as Record<string, unknown>)) {
      if (typeof v === 'string' && v.includes('\u0000')) throw notFound(name.replace(/Id$/, ''));
    }
    for (const [name, v] of Object.entries((req.query ?? {}) as Record<string, unknown>)) {
      const values = Array.isArray(v) ? v : [v];
      if (values.some((x) => typeof x === 'string' && x.includes('\u0000'))) {
        throw new AdminError('ADMIN_VALIDATION_FAILED', `${name} must not contain the NUL character (U+0000)`);
      }
    }
  });
  scope.setErrorHandler(adminErrorHandler(logMessage));
  scope.setNotFoundHandler((req, reply) =>
    reply.code(404).send({ code: 'ADMIN_NOT_FOUND', message: `no route ${req.method} ${req.url.split('?')[0]}` }),
  );
}

export async function adminPlugin(scope: FastifyInstance, opts: { svc: Services; adminToken: string }): Promise<void> {
  const { svc, adminToken } = opts;
  const db = svc.db;
  installBackOffice(scope, adminToken, 'admin request failed');

  // --- merchants ---
  scope.post('/merchants', async (req, reply) => {
    const b = bodyOf(req, createMerchantSchema);
    const id = newId.merchant();
    const r = await db.query('INSERT INTO merchants(id, name, entity_type) VALUES ($1, $2, $3) RETURNING created_at', [
      id,
      b.name,
      b.entityType,
    ]);
    return reply.code(201).send({ merchantId: id, name: b.name, entityType: b.entityType, createdAt: r.rows[0].created_at.toISOString() });
  });

  scope.get('/merchants', async () => {
    const r = await db.query(
      'SELECT id AS "merchantId", name, entity_type AS "entityType", created_at AS "createdAt" FROM merchants ORDER BY created_at DESC LIMIT 500',
    );
    return { merchants: r.rows };
  });

  scope.get<{ Params: { merchantId: string } }>('/merchants/:merchantId', async (req) => {
    const m = await getMerchant(db, req.params.merchantId);
    if (!m) throw notFound('merchant');
    const [apps, accounts, allocation, feeRule] = await Promise.all([
      listApps(db, m.id),
      listAccounts(db, m.id),
      getAllocation(db, m.id),
      getFeeRule(db, m.id),
    ]);
    return {
      merchantId: m.id,
      name: m.name,
      entityType: m.entityType,
      createdAt: m.createdAt.toISOString(),
      apps: apps.map(appView),
      settlementAccounts: accounts.map(accountView),
      allocation,
      feeRule,
    };
  });

  // --- apps ---
  scope.post<{ Params: { merchantId: string } }>('/merchants/:merchantId/apps', async (req, reply) => {
    const b = optionalBodyOf(req, createAppSchema);
    if (!(await getMerchant(db, req.params.merchantId))) throw notFound('merchant');
    const notifyUrl = b.notifyUrl == null ? null : checkNotify(svc, b.notifyUrl as string);
    const id = newId.app();
    await db.query(
      `INSERT INTO apps(id, merchant_id, notify_url, channels, trade_scopes, voided_links, ip_allowlist, payment_window_seconds,
                        daily_amount_ceiling_fen, rate_limit_per_second)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
      [
        id,
        req.params.merchantId,
        notifyUrl,
        b.channels ?? ['ALIPAY_H5', 'WECHAT_H5'],
        b.tradeScopes ?? ['PHYSICAL_FACE_TO_FACE', 'CARD_VIRTUAL'],
        b.voidedLinks ?? [],
        b.ipAllowlist === undefined ? [] : checkCidrs('ipAllowlist', b.ipAllowlist),
        b.paymentWindowSeconds ?? 900,
        b.dailyAmountCeilingFen ?? null,
        b.rateLimitPerSecond ?? 1000,
      ],
    );
    const app = await getApp(db, id);
    return reply.code(201).send(appView(app!));
  });

  scope.get<{ Params: { appId: string } }>('/apps/:appId', async (req) => {
    const a = await getApp(db, req.params.appId);
    if (!a) throw notFound('app');
    return appView(a);
  });

  scope.patch<{ Params: { appId: string } }>('/apps/:appId', async (req) => {
    const b = bodyOf(req, patchAppSchema);
    const cols: Record<string, unknown> = {};
    if ('notifyUrl' in b) cols.notify_url = b.notifyUrl === null ? null : checkNotify(svc, b.notifyUrl as string);
    if ('channels' in b) cols.channels = b.channels;
    if ('tradeScopes' in b) cols.trade_scopes = b.tradeScopes;
    if ('voidedLinks' in b) cols.voided_links = b.voidedLinks;
    if ('ipAllowlist' in b) cols.ip_allowlist = checkCidrs('ipAllowlist', b.ipAllowlist);
    if ('paymentWindowSeconds' in b) cols.payment_window_seconds = b.paymentWindowSeconds;
    if ('dailyAmountCeilingFen' in b) cols.daily_amount_ceiling_fen = b.dailyAmountCeilingFen;
    if ('rateLimitPerSecond' in b) cols.rate_limit_per_second = b.rateLimitPerSecond;
    if ('status' in b) cols.status = b.status;
    const names = Object.keys(cols);
    const sets = names.map((n, i) => `${n} = $${i + 2}`).join(', ');
    const r = await db.query(`UPDATE apps SET ${sets}, updated_at = now() WHERE id = $1`, [req.params.appId, ...names.map((n) => cols[n])]);
    if (r.rowCount === 0) throw notFound('app');
    svc.authCache.invalidateApp(req.params.appId);
    // The daily counter is kept only while a ceiling is set: recount from the orders when it changes.
    if ('daily_amount_ceiling_fen' in cols) await db.query('DELETE FROM app_daily_amounts WHERE app_id = $1', [req.params.appId]);
    if (typeof cols.notify_url === 'string') {
      // Events that waited for a notify URL go out now rather than at their next retry.
      await rescheduleAppEvents(db, req.params.appId, svc.clock.now());
      svc.wakeWorkers?.();
    }
    return appView((await getApp(db, req.params.appId))!);
  });

  // --- merchant public keys ---
  scope.post<{ Params: { appId: string } }>('/apps/:appId/keys', async (req, reply) => {
    const b = bodyOf(req, addKeySchema);
    const pem = checkPublicKeyPem(b.publicKeyPem as string);
    if (!(await getApp(db, req.params.appId))) throw notFound('app');
    const r = await db.query(
      'INSERT INTO app_keys(app_id, key_id, public_key_pem) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING RETURNING created_at',
      [req.params.appId, b.keyId, pem],
    );
    if (r.rowCount === 0) throw new AdminError('ADMIN_CONFLICT', `key ${String(b.keyId)} already exists for this app`);
    svc.authCache.invalidateApp(req.params.appId);
    return reply.code(201).send({ appId: req.params.appId, keyId: b.keyId, status: 'ACTIVE', publicKeyPem: pem });
  });

  scope.get<{ Params: { appId: string } }>('/apps/:appId/keys', async (req) => {
    if (!(await getApp(db, req.params.appId))) throw notFound('app');
    const r = await db.query(
      'SELECT key_id AS "keyId", status, public_key_pem AS "publicKeyPem", created_at AS "createdAt" FROM app_keys WHERE app_id = $1 ORDER BY created_at',
      [req.params.appId],
    );
    return { keys: r.rows };
  });

  scope.patch<{ Params: { appId: string; keyId: string } }>('/apps/:appId/keys/:keyId', async (req) => {
    const b = bodyOf(req, patchKeySchema);
    const r = await db.query('UPDATE app_keys SET status = $3 WHERE app_id = $1 AND key_id = $2', [
      req.params.appId,
      req.params.keyId,
      b.status,
    ]);
    if (r.rowCount === 0) throw notFound('key');
    svc.authCache.invalidateApp(req.params.appId);
    const k = await getAppKey(db, req.params.appId, req.params.keyId);
    return { appId: k!.appId, keyId: k!.keyId, status: k!.status };
  });

  // --- platform keys (public parts only) ---
  scope.get('/platform-keys', async () => {
    const next = svc.keys.next;
    return {
      keys: svc.keys.list().map((k) => ({ keyId: k.keyId, publicKeyPem: k.publicKeyPem })),
      currentKeyId: svc.keys.current?.keyId ?? null,
      nextKey: next ? { keyId: next.keyId, activatesAt: next.activatesAt.toISOString() } : null,
    };
  });

  // Staged by default: merchants verify with the published keys they fetched, so a key that
  // signed at once would fail every verification until they fetch again.
  scope.post('/platform-keys/rotate', async (req, reply) => {
    const b = optionalBodyOf(req, rotateKeySchema);
    const seconds = (b.activateAfterSeconds as number | undefined) ?? DEFAULT_KEY_ACTIVATION_SECONDS;
    try {
      const k = await svc.keys.rotate(seconds * 1000);
      return reply.code(201).send({ keyId: k.keyId, publicKeyPem: k.publicKeyPem, activatesAt: k.activatesAt.toISOString() });
    } catch (err) {
      throw new AdminError('ADMIN_STATE_INVALID', (err as Error).message);
    }
  });

  // --- settlement accounts, allocation, fee rule ---
  scope.post<{ Params: { merchantId: string } }>('/merchants/:merchantId/settlement-accounts', async (req, reply) => {
    const b = bodyOf(req, createAccountSchema);
    if (!(await getMerchant(db, req.params.merchantId))) throw notFound('merchant');
    const id = newId.account();
    const card = b.cardNumber as string;
    // Only the last four digits are kept; the full number is never stored or logged.
    await db.query(
      `INSERT INTO settlement_accounts(id, merchant_id, entity_type, entity_name, merchant_no, card_last4, agreed_ceiling_fen)
       VALUES ($1, $2, $3, $4, $5, $6, $7)`,
      [id, req.params.merchantId, b.entityType, b.entityName, b.merchantNo, card.slice(-4), b.agreedCeilingFen ?? null],
    );
    svc.merchantConfig.invalidate(req.params.merchantId);
    const acc = (await listAccounts(db, req.params.merchantId)).find((a) => a.accountId === id)!;
    return reply.code(201).send(accountView(acc));
  });

  scope.get<{ Params: { merchantId: string } }>('/merchants/:merchantId/settlement-accounts', async (req) => {
    if (!(await getMerchant(db, req.params.merchantId))) throw notFound('merchant');
    return { accounts: (await listAccounts(db, req.params.merchantId)).map(accountView) };
  });

  scope.put<{ Params: { merchantId: string } }>('/merchants/:merchantId/allocation', async (req) => {
    const b = bodyOf(req, allocationSchema);
    const merchantId = req.params.merchantId;
    if (!(await getMerchant(db, merchantId))) throw notFound('merchant');
    const participants = b.participants as string[];
    const mode = b.mode as string;
    const ratios = (b.ratios as { accountId: string; shareBps: number }[] | undefined) ?? null;
    const owned = new Set((await listAccounts(db, merchantId)).map((a) => a.accountId));
    for (const p of participants) {
      if (!owned.has(p)) throw new AdminError('ADMIN_VALIDATION_FAILED', `participants: ${p} is not a settlement account of this merchant`);
    }
    if (mode === 'SINGLE' && participants.length !== 1)
      throw new AdminError('ADMIN_VALIDATION_FAILED', 'SINGLE takes exactly one participant');
    if (mode === 'RATIO') {
      if (ratios === null) throw new AdminError('ADMIN_VALIDATION_FAILED', 'RATIO requires ratios');
      if (participants.length < 2) throw new AdminError('ADMIN_VALIDATION_FAILED', 'RATIO takes 2 to 4 participants');
      const ids = ratios.map((r) => r.accountId);
      if (new Set(ids).size !== ids.length || ids.length !== participants.length || !ids.every((id) => participants.includes(id))) {
        throw new AdminError('ADMIN_VALIDATION_FAILED', 'ratios must name each participant exactly once');
      }
      const sum = ratios.reduce((s, r) => s + r.shareBps, 0);
      if (sum !== 10000) throw new AdminError('ADMIN_VALIDATION_FAILED', `ratios shareBps must sum to 10000 (got ${sum})`);
    } else if (ratios !== null) {
      throw new AdminError('ADMIN_VALIDATION_FAILED', 'ratios are allowed only with mode RATIO');
    }
    // Ratios are stored in participant order.
    const ordered =
      ratios === null ? null : participants.map((p) => ({ accountId: p, shareBps: ratios.find((r) => r.accountId === p)!.shareBps }));
    await db.query(
      `INSERT INTO allocations(merchant_id, mode, participants, ratios, unavailable_policy) VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT (merchant_id) DO UPDATE SET mode = $2, participants = $3, ratios = $4, unavailable_policy = $5, updated_at = now()`,
      [merchantId, mode, participants, ordered === null ? null : JSON.stringify(ordered), b.unavailablePolicy],
    );
    svc.merchantConfig.invalidate(merchantId);
    return allocationView((await getAllocation(db, merchantId))!);
  });

  scope.get<{ Params: { merchantId: string } }>('/merchants/:merchantId/allocation', async (req) => {
    if (!(await getMerchant(db, req.params.merchantId))) throw notFound('merchant');
    const a = await getAllocation(db, req.params.merchantId);
    if (!a) throw notFound('allocation');
    return allocationView(a);
  });

  scope.put<{ Params: { merchantId: string } }>('/merchants/:merchantId/fee-rule', async (req) => {
    const b = bodyOf(req, feeRuleSchema);
    if (!(await getMerchant(db, req.params.merchantId))) throw notFound('merchant');
    await withTx(db, async (tx) => {
      await tx.query(
        `INSERT INTO fee_rules(merchant_id, rule_version, standard_rate_bps, large_rate_bps, threshold_fen, merchant_rate_bps)
         VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (merchant_id) DO UPDATE SET rule_version = $2, standard_rate_bps = $3, large_rate_bps = $4,
           threshold_fen = $5, merchant_rate_bps = $6, updated_at = now()`,
        [req.params.merchantId, b.ruleVersion, b.standardRateBps, b.largeRateBps, b.thresholdFen, b.merchantRateBps],
      );
    });
    svc.merchantConfig.invalidate(req.params.merchantId);
    return getFeeRule(db, req.params.merchantId);
  });

  scope.get<{ Params: { merchantId: string } }>('/merchants/:merchantId/fee-rule', async (req) => {
    if (!(await getMerchant(db, req.params.merchantId))) throw notFound('merchant');
    const r = await getFeeRule(db, req.params.merchantId);
    if (!r) throw notFound('fee rule');
    return r;
  });

  // --- platform source-IP policy (overrides the environment's defaults at run time) ---
  scope.get('/platform/ip-policy', async () => svc.ipPolicy.view());
  scope.put('/platform/ip-policy', async (req) => {
    const b = bodyOf(req, ipPolicySchema);
    const next = {
      trustedProxies: b.trustedProxies === undefined ? undefined : checkCidrs('trustedProxies', b.trustedProxies),
      allowlist: b.allowlist === undefined ? undefined : b.allowlist === null ? null : checkCidrs('allowlist', b.allowlist),
      denylist: b.denylist === undefined ? undefined : checkCidrs('denylist', b.denylist),
      allowIpv4: b.allowIpv4 as boolean | undefined,
      allowIpv6: b.allowIpv6 as boolean | undefined,
    };
    await svc.ipPolicy.update(next);
    return svc.ipPolicy.view();
  });

  registerAdminOperations(scope, svc);
}

function checkNotify(svc: Services, url: string): string {
  const problem = checkNotifyUrl(url, { devMode: svc.config.devMode, allowPrivateTargets: svc.config.webhookAllowPrivateTargets });
  if (problem) throw new AdminError('ADMIN_VALIDATION_FAILED', `notifyUrl: ${problem}`);
  return url;
}

function accountView(a: Awaited<ReturnType<typeof listAccounts>>[number]) {
  return {
    accountId: a.accountId,
    entityType: a.entityType,
    entityName: a.entityName,
    merchantNo: a.merchantNo,
    cardLast4: a.cardLast4,
    agreedCeilingFen: a.agreedCeilingFen,
    createdAt: a.createdAt.toISOString(),
  };
}

function allocationView(a: NonNullable<Awaited<ReturnType<typeof getAllocation>>>) {
  return {
    mode: a.mode,
    participants: a.participants,
    ...(a.mode === 'RATIO' ? { ratios: (a.ratios ?? []).map((r) => ({ accountId: r.accountId, shareBps: r.shareBps })) } : {}),
    unavailablePolicy: a.unavailablePolicy,
    updatedAt: a.updatedAt.toISOString(),
  };
}
