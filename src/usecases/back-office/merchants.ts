/** The back office's merchants: a merchant, its settlement accounts, its collection allocation and its fee rule. */
import { DomainError } from '../../domain/errors.ts';
import { newId } from '../../domain/ids.ts';
import type { Allocation, EntityType, FeeRule } from '../../domain/money.ts';
import type { Actor } from '../../domain/operators.ts';
import * as merchants from '../../store/merchants.ts';
import { audited } from '../audit.ts';
import { nowOf } from '../deps.ts';
import { type BackOfficeDeps, merchantOf, notFound } from './common.ts';

export function createMerchant(d: BackOfficeDeps, actor: Actor, m: { name: string; entityType: EntityType }) {
  return audited(d, actor, async (tx, record) => {
    const row = await merchants.insertMerchant(tx, { id: newId.merchant(), ...m }, nowOf(d));
    await record({ action: 'merchant.create', entityType: 'merchant', entityId: row.id, before: null, after: row, merchantId: row.id });
    return row;
  });
}

export function listMerchants(d: BackOfficeDeps) {
  return merchants.listMerchants(d.db, 500);
}

export async function merchantDetail(d: BackOfficeDeps, merchantId: string) {
  const m = await merchantOf(d, merchantId);
  const [apps, accounts, allocation, feeRule] = await Promise.all([
    merchants.listApps(d.db, m.id),
    merchants.listAccounts(d.db, m.id),
    merchants.getAllocation(d.db, m.id),
    merchants.getFeeRule(d.db, m.id),
  ]);
  return { merchant: m, apps, accounts, allocation, feeRule };
}

// --- settlement accounts, allocation, fee rule -------------------------------------------------

export async function addSettlementAccount(
  d: BackOfficeDeps,
  actor: Actor,
  merchantId: string,
  b: { entityType: EntityType; entityName: string; merchantNo: string; cardNumber: string; agreedCeilingFen?: number | null },
) {
  const id = newId.account();
  const account = await audited(d, actor, async (tx, record) => {
    await merchantOf(d, merchantId, tx);
    // Only the last four digits are kept; the full number is never stored, logged or audited.
    await merchants.insertAccount(
      tx,
      {
        id,
        merchantId,
        entityType: b.entityType,
        entityName: b.entityName,
        merchantNo: b.merchantNo,
        cardLast4: b.cardNumber.slice(-4),
        agreedCeilingFen: b.agreedCeilingFen ?? null,
      },
      nowOf(d),
    );
    const row = (await merchants.listAccounts(tx, merchantId)).find((a) => a.accountId === id)!;
    await record({
      action: 'settlementAccount.create',
      entityType: 'settlementAccount',
      entityId: id,
      before: null,
      after: row,
      merchantId,
    });
    return row;
  });
  d.merchantConfigChanged(merchantId);
  return account;
}

export async function listSettlementAccounts(d: BackOfficeDeps, merchantId: string) {
  await merchantOf(d, merchantId);
  return merchants.listAccounts(d.db, merchantId);
}

export async function setAllocation(
  d: BackOfficeDeps,
  actor: Actor,
  merchantId: string,
  b: {
    mode: Allocation['mode'];
    participants: string[];
    ratios?: { accountId: string; shareBps: number }[];
    unavailablePolicy: Allocation['unavailablePolicy'];
  },
) {
  await merchantOf(d, merchantId);
  const { mode, participants } = b;
  const ratios = b.ratios ?? null;
  const owned = new Set((await merchants.listAccounts(d.db, merchantId)).map((a) => a.accountId));
  for (const p of participants) {
    if (!owned.has(p)) throw new DomainError('VALIDATION_FAILED', `participants: ${p} is not a settlement account of this merchant`);
  }
  if (mode === 'SINGLE' && participants.length !== 1) throw new DomainError('VALIDATION_FAILED', 'SINGLE takes exactly one participant');
  if (mode === 'RATIO') {
    if (ratios === null) throw new DomainError('VALIDATION_FAILED', 'RATIO requires ratios');
    if (participants.length < 2) throw new DomainError('VALIDATION_FAILED', 'RATIO takes 2 to 4 participants');
    const ids = ratios.map((r) => r.accountId);
    if (new Set(ids).size !== ids.length || ids.length !== participants.length || !ids.every((id) => participants.includes(id))) {
      throw new DomainError('VALIDATION_FAILED', 'ratios must name each participant exactly once');
    }
    const sum = ratios.reduce((s, r) => s + r.shareBps, 0);
    if (sum !== 10000) throw new DomainError('VALIDATION_FAILED', `ratios shareBps must sum to 10000 (got ${sum})`);
  } else if (ratios !== null) {
    throw new DomainError('VALIDATION_FAILED', 'ratios are allowed only with mode RATIO');
  }
  // Ratios are stored in participant order.
  const ordered =
    ratios === null ? null : participants.map((p) => ({ accountId: p, shareBps: ratios.find((r) => r.accountId === p)!.shareBps }));
  const allocation = await audited(d, actor, async (tx, record) => {
    await merchantOf(d, merchantId, tx);
    const before = await merchants.getAllocation(tx, merchantId);
    await merchants.upsertAllocation(
      tx,
      merchantId,
      { mode, participants, ratios: ordered, unavailablePolicy: b.unavailablePolicy },
      nowOf(d),
    );
    const after = (await merchants.getAllocation(tx, merchantId))!;
    await record({ action: 'allocation.set', entityType: 'allocation', entityId: merchantId, before, after, merchantId });
    return after;
  });
  d.merchantConfigChanged(merchantId);
  return allocation;
}

export async function getAllocation(d: BackOfficeDeps, merchantId: string) {
  await merchantOf(d, merchantId);
  const a = await merchants.getAllocation(d.db, merchantId);
  if (!a) throw notFound('allocation');
  return a;
}

export async function setFeeRule(d: BackOfficeDeps, actor: Actor, merchantId: string, rule: FeeRule) {
  const fee = await audited(d, actor, async (tx, record) => {
    await merchantOf(d, merchantId, tx);
    const before = await merchants.getFeeRule(tx, merchantId);
    await merchants.upsertFeeRule(tx, merchantId, rule, nowOf(d));
    const after = await merchants.getFeeRule(tx, merchantId);
    await record({ action: 'feeRule.set', entityType: 'feeRule', entityId: merchantId, before, after: { ...after }, merchantId });
    return after;
  });
  d.merchantConfigChanged(merchantId);
  return fee;
}

export async function getFeeRule(d: BackOfficeDeps, merchantId: string) {
  await merchantOf(d, merchantId);
  const r = await merchants.getFeeRule(d.db, merchantId);
  if (!r) throw notFound('fee rule');
  return r;
}
