/**
 * The back-office (admin) API under /api/admin/v1 (decisions.md section 8): bearer ADMIN_TOKEN,
 * an operator's bearer token, or the console's session (src/backoffice-http/operator-auth.ts). Each route
 * declares who may call it (`need(permission)`, the role table of src/domain/operators.ts).
 * Errors are {code, message}. Every body is validated strictly; a refused request changes nothing.
 * Thin routes: the body's schema, one back-office use case with the request's actor, one view.
 */
import type { FastifyInstance } from 'fastify';
import type { EntityType, FeeRule } from '../domain/money.ts';
import type { Services } from '../services.ts';
import type { BackOfficeDeps } from '../usecases/back-office/common.ts';
import * as apps from '../usecases/back-office/apps.ts';
import * as merchants from '../usecases/back-office/merchants.ts';
import * as platform from '../usecases/back-office/platform.ts';
import * as mu from '../usecases/merchant-users.ts';
import type { MerchantRole } from '../domain/merchant-users.ts';
import { invitationView, userView } from '../backoffice-http/merchant-user-views.ts';
import {
  addKeySchema,
  allocationSchema,
  createAccountSchema,
  createAppSchema,
  createMerchantSchema,
  feeRuleSchema,
  inviteUserSchema,
  ipPolicySchema,
  noFieldsSchema,
  patchAppSchema,
  patchKeySchema,
  patchUserSchema,
  rotateKeySchema,
} from '../backoffice-http/schemas.ts';
import { bodyOf, installBackOffice, optionalBodyOf } from '../backoffice-http/common.ts';
import { accountView, allocationView, appView } from '../backoffice-http/views.ts';
import { registerAdminOperations } from './admin-operations.ts';
import { registerAdminOperators } from './admin-operators.ts';
import { registerReconciliation } from './admin-reconciliation.ts';
import { actorOf, authenticate, authorize, need } from '../backoffice-http/operator-auth.ts';

/** A rotated platform key signs this long after it is published, unless the rotation says otherwise. */
export const DEFAULT_KEY_ACTIVATION_SECONDS = 86_400;

type M = { Params: { merchantId: string } };
type A = { Params: { appId: string } };

export async function adminPlugin(scope: FastifyInstance, opts: { svc: Services; adminToken: string }): Promise<void> {
  const { svc, adminToken } = opts;
  installBackOffice(scope, (req, reply) => authenticate(req, reply, svc, adminToken), 'admin request failed');
  // After authentication and the path and query checks: the route's own rule.
  scope.addHook('onRequest', async (req) => authorize(req));
  // Nothing the back office answers is kept by a cache.
  scope.addHook('onSend', async (_req, reply) => {
    reply.header('cache-control', 'no-store');
  });
  registerMerchants(scope, svc.backOffice);
  registerApps(scope, svc.backOffice);
  registerSettlement(scope, svc.backOffice);
  registerPlatform(scope, svc);
  registerMerchantUsers(scope, svc);
  registerAdminOperations(scope, svc);
  registerAdminOperators(scope, svc);
  registerReconciliation(scope, svc);
}

function registerMerchants(scope: FastifyInstance, d: BackOfficeDeps): void {
  scope.post('/merchants', need('merchants.write'), async (req, reply) => {
    const b = bodyOf(req, createMerchantSchema);
    const m = await merchants.createMerchant(d, actorOf(req), { name: b.name as string, entityType: b.entityType as EntityType });
    return reply.code(201).send({ merchantId: m.id, name: m.name, entityType: m.entityType, createdAt: m.createdAt.toISOString() });
  });

  scope.get('/merchants', need('read'), async () => {
    const rows = await merchants.listMerchants(d);
    return { merchants: rows.map((m) => ({ merchantId: m.id, name: m.name, entityType: m.entityType, createdAt: m.createdAt })) };
  });

  scope.get<M>('/merchants/:merchantId', need('read'), async (req) =>
    merchantDetailView(await merchants.merchantDetail(d, req.params.merchantId)),
  );
}

/** A merchant with its apps, settlement accounts, allocation and fee rule. */
export function merchantDetailView({
  merchant: m,
  apps,
  accounts,
  allocation,
  feeRule,
}: Awaited<ReturnType<typeof merchants.merchantDetail>>) {
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
}

/** Apps and their public keys. */
function registerApps(scope: FastifyInstance, d: BackOfficeDeps): void {
  scope.post<M>('/merchants/:merchantId/apps', need('merchants.write'), async (req, reply) => {
    const b = optionalBodyOf(req, createAppSchema) as apps.AppInput;
    return reply.code(201).send(appView(await apps.createApp(d, actorOf(req), req.params.merchantId, b)));
  });

  scope.get<A>('/apps/:appId', need('read'), async (req) => appView(await apps.getApp(d, req.params.appId)));

  scope.patch<A>('/apps/:appId', need('merchants.write'), async (req) => {
    const b = bodyOf(req, patchAppSchema) as apps.AppInput & { status?: 'ACTIVE' | 'DISABLED' };
    return appView(await apps.updateApp(d, actorOf(req), req.params.appId, b));
  });

  scope.post<A>('/apps/:appId/keys', need('merchants.write'), async (req, reply) => {
    const b = bodyOf(req, addKeySchema);
    const k = await apps.addAppKey(d, actorOf(req), req.params.appId, b.keyId as string, b.publicKeyPem as string);
    return reply.code(201).send({ appId: k.appId, keyId: k.keyId, status: 'ACTIVE', publicKeyPem: k.publicKeyPem });
  });

  scope.get<A>('/apps/:appId/keys', need('read'), async (req) => {
    const keys = await apps.listAppKeys(d, req.params.appId);
    return {
      keys: keys.map((k) => ({
        keyId: k.keyId,
        status: k.status,
        validUntil: k.validUntil,
        publicKeyPem: k.publicKeyPem,
        createdAt: k.createdAt,
      })),
    };
  });

  scope.patch<{ Params: { appId: string; keyId: string } }>('/apps/:appId/keys/:keyId', need('merchants.write'), async (req) => {
    const b = bodyOf(req, patchKeySchema);
    const k = await apps.setAppKeyStatus(d, actorOf(req), req.params.appId, req.params.keyId, b.status as 'ACTIVE' | 'DISABLED');
    return { appId: k.appId, keyId: k.keyId, status: k.status };
  });
}

/** Settlement accounts, allocation, fee rule. */
function registerSettlement(scope: FastifyInstance, d: BackOfficeDeps): void {
  scope.post<M>('/merchants/:merchantId/settlement-accounts', need('settlement.write'), async (req, reply) => {
    const b = bodyOf(req, createAccountSchema) as Parameters<typeof merchants.addSettlementAccount>[3];
    return reply.code(201).send(accountView(await merchants.addSettlementAccount(d, actorOf(req), req.params.merchantId, b)));
  });

  scope.get<M>('/merchants/:merchantId/settlement-accounts', need('read'), async (req) => ({
    accounts: (await merchants.listSettlementAccounts(d, req.params.merchantId)).map(accountView),
  }));

  scope.put<M>('/merchants/:merchantId/allocation', need('settlement.write'), async (req) => {
    const b = bodyOf(req, allocationSchema) as Parameters<typeof merchants.setAllocation>[3];
    return allocationView(await merchants.setAllocation(d, actorOf(req), req.params.merchantId, b));
  });

  scope.get<M>('/merchants/:merchantId/allocation', need('read'), async (req) =>
    allocationView(await merchants.getAllocation(d, req.params.merchantId)),
  );

  scope.put<M>('/merchants/:merchantId/fee-rule', need('feeRules.write'), async (req) => {
    const b = bodyOf(req, feeRuleSchema) as unknown as FeeRule;
    const { ruleVersion, standardRateBps, largeRateBps, thresholdFen, merchantRateBps } = b;
    return merchants.setFeeRule(d, actorOf(req), req.params.merchantId, {
      ruleVersion,
      standardRateBps,
      largeRateBps,
      thresholdFen,
      merchantRateBps,
    });
  });

  scope.get<M>('/merchants/:merchantId/fee-rule', need('read'), async (req) => merchants.getFeeRule(d, req.params.merchantId));
}

/** The platform's keys (public parts only) and its source-IP policy (overrides the environment's defaults at run time). */
function registerPlatform(scope: FastifyInstance, svc: Services): void {
  const d = svc.backOffice;
  scope.get('/platform-keys', need('read'), async () => {
    const next = svc.keys.next;
    return {
      keys: svc.keys.list().map((k) => ({ keyId: k.keyId, publicKeyPem: k.publicKeyPem })),
      currentKeyId: svc.keys.current?.keyId ?? null,
      nextKey: next ? { keyId: next.keyId, activatesAt: next.activatesAt.toISOString() } : null,
    };
  });

  // Staged by default: merchants verify with the published keys they fetched, so a key that
  // signed at once would fail every verification until they fetch again.
  scope.post('/platform-keys/rotate', need('platformKeys.rotate'), async (req, reply) => {
    const b = optionalBodyOf(req, rotateKeySchema);
    const seconds = (b.activateAfterSeconds as number | undefined) ?? DEFAULT_KEY_ACTIVATION_SECONDS;
    const k = await platform.rotatePlatformKey(d, actorOf(req), seconds * 1000);
    return reply.code(201).send({ keyId: k.keyId, publicKeyPem: k.publicKeyPem, activatesAt: k.activatesAt.toISOString() });
  });

  scope.get('/platform/ip-policy', need('read'), async () => svc.ipPolicy.view());
  scope.put('/platform/ip-policy', need('ipPolicy.write'), async (req) => {
    const b = bodyOf(req, ipPolicySchema) as Parameters<typeof platform.setIpPolicy>[2];
    return platform.setIpPolicy(d, actorOf(req), b);
  });
}

/** The merchant's portal users (docs/portal.md): invited from the console. */
function registerMerchantUsers(scope: FastifyInstance, svc: Services): void {
  const d = svc.backOffice;
  type U = { Params: { merchantId: string; userId: string } };
  scope.get<M>('/merchants/:merchantId/users', need('read'), async (req) => {
    await merchants.merchantDetail(d, req.params.merchantId);
    return { users: (await mu.listUsers(svc, req.params.merchantId)).map(userView) };
  });

  scope.post<M>('/merchants/:merchantId/users', need('merchants.write'), async (req, reply) => {
    const b = bodyOf(req, inviteUserSchema) as { login: string; role: MerchantRole };
    return reply.code(201).send(invitationView(svc, await mu.inviteUser(svc, actorOf(req), req.params.merchantId, b)));
  });

  scope.patch<U>('/merchants/:merchantId/users/:userId', need('merchants.write'), async (req) => {
    const b = bodyOf(req, patchUserSchema) as { role?: MerchantRole; status?: 'ACTIVE' | 'DISABLED' };
    return userView(await mu.updateUser(svc, actorOf(req), req.params.merchantId, req.params.userId, b));
  });

  scope.post<U>('/merchants/:merchantId/users/:userId/invitation', need('merchants.write'), async (req) => {
    optionalBodyOf(req, noFieldsSchema);
    return invitationView(svc, await mu.reissueInvitation(svc, actorOf(req), req.params.merchantId, req.params.userId));
  });
}
