/**
 * Operators, their API tokens, the caller itself (`/me`) and the audit log, under the admin scope
 * of src/http/admin.ts (docs/console.md). Operators are the admin role's; an operator's own
 * tokens are its own too; the audit log is read by the roles that may (`audit.read`) and never
 * changed through any route.
 */
import { Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { PERMISSIONS, ROLES, type Role, actorLabel, can, mayManageTokensOf } from '../domain/operators.ts';
import type { Services } from '../services.ts';
import type { AuditRow } from '../store/audit.ts';
import type { TokenRow } from '../store/operator-tokens.ts';
import { AUDIT_PAGE_MAX, exportAudit, listAudit } from '../usecases/audit.ts';
import * as ops from '../usecases/operators.ts';
import { bodyOf, optionalBodyOf } from '../backoffice-http/common.ts';
import { int, queryOf, text, time } from '../backoffice-http/query.ts';
import { createOperatorSchema, createTokenSchema, noFieldsSchema, patchOperatorSchema } from '../backoffice-http/schemas.ts';
import { actorOf, need, needRule } from '../backoffice-http/operator-auth.ts';

type Op = { Params: { operatorId: string } };
type Tok = { Params: { operatorId: string; tokenId: string } };

function operatorView(o: Awaited<ReturnType<typeof ops.getOperator>>) {
  return { ...ops.operatorFields(o), updatedAt: o.updatedAt };
}

function tokenView(t: TokenRow) {
  return { tokenId: t.tokenId, label: t.label, prefix: t.prefix, createdAt: t.createdAt, lastUsedAt: t.lastUsedAt, revokedAt: t.revokedAt };
}

function auditView(e: AuditRow) {
  return {
    id: e.id,
    at: e.at,
    actor: actorLabel({ ...e, kind: e.actorKind }),
    actorKind: e.actorKind,
    operatorId: e.operatorId,
    operatorName: e.operatorName,
    tokenId: e.tokenId,
    channel: e.channel,
    sourceIp: e.sourceIp,
    requestId: e.requestId,
    action: e.action,
    entityType: e.entityType,
    entityId: e.entityId,
    before: e.before,
    after: e.after,
    merchantId: e.merchantId,
    merchantUserName: e.merchantUserName,
  };
}

/** An operator's own tokens: the operator, or whoever manages operators. */
const ownTokens = needRule('tokens (own, or operators.manage)', (actor, req) =>
  mayManageTokensOf(actor, (req.params as { operatorId: string }).operatorId),
);

const AUDIT_FILTERS = {
  operator: text(64),
  action: text(64),
  entityType: text(64),
  entityId: text(200),
  requestId: text(128),
  from: time,
  to: time,
};

/** The audit filters of a query string (AUDIT_FILTERS) as the repository takes them. */
function auditFilterOf(q: { [K in keyof typeof AUDIT_FILTERS]: ReturnType<(typeof AUDIT_FILTERS)[K]> | null }) {
  return {
    operatorName: q.operator,
    action: q.action,
    entityType: q.entityType,
    entityId: q.entityId,
    requestId: q.requestId,
    from: q.from,
    to: q.to,
  };
}

/** A CSV cell: quoted when needed; a leading `=`, `+`, `-`, `@`, tab or CR is neutralised so that no spreadsheet runs it as a formula. */
function csvCell(v: unknown): string {
  let s = v === null || v === undefined ? '' : v instanceof Date ? v.toISOString() : typeof v === 'object' ? JSON.stringify(v) : String(v);
  if (/^[=+\-@\t\r]/.test(s)) s = `'${s}`;
  return /[",\r\n]/.test(s) ? `"${s.replaceAll('"', '""')}"` : s;
}

const CSV_COLUMNS = [
  'id',
  'at',
  'actor',
  'actorKind',
  'operatorName',
  'tokenId',
  'channel',
  'sourceIp',
  'requestId',
  'action',
  'entityType',
  'entityId',
  'before',
  'after',
] as const;

export function registerAdminOperators(scope: FastifyInstance, svc: Services): void {
  // The caller.
  scope.get('/me', need('read'), async (req) => {
    const a = actorOf(req);
    return {
      kind: a.kind,
      operatorId: a.operatorId,
      name: a.operatorName,
      role: a.role,
      tokenId: a.tokenId,
      permissions: PERMISSIONS.filter((p) => can(a.role, p)),
    };
  });

  // The role table as the server applies it (the console shows it on the operators page).
  scope.get('/roles', need('read'), async () => ({
    roles: ROLES.map((role) => ({ role, permissions: PERMISSIONS.filter((p) => can(role, p)) })),
  }));

  registerOperators(scope, svc);
  registerTokens(scope, svc);
  registerAudit(scope, svc);
}

function registerOperators(scope: FastifyInstance, svc: Services): void {
  scope.get('/operators', need('operators.manage'), async () => ({ operators: (await ops.listOperators(svc)).map(operatorView) }));

  scope.post('/operators', need('operators.manage'), async (req, reply) => {
    const b = bodyOf(req, createOperatorSchema);
    const o = await ops.createOperator(svc, actorOf(req), { name: b.name as string, role: b.role as Role, password: b.password as string });
    return reply.code(201).send(operatorView(o));
  });

  scope.get<Op>('/operators/:operatorId', need('operators.manage'), async (req) =>
    operatorView(await ops.getOperator(svc, req.params.operatorId)),
  );

  scope.patch<Op>('/operators/:operatorId', need('operators.manage'), async (req) => {
    const b = bodyOf(req, patchOperatorSchema) as { role?: Role; status?: 'ACTIVE' | 'DISABLED'; password?: string };
    return operatorView(await ops.updateOperator(svc, actorOf(req), req.params.operatorId, b));
  });

  scope.post<Op>('/operators/:operatorId/sessions/revoke', need('operators.manage'), async (req) => {
    optionalBodyOf(req, noFieldsSchema);
    return { sessionsEnded: await ops.revokeSessions(svc, actorOf(req), req.params.operatorId) };
  });
}

/** An operator's API tokens. */
function registerTokens(scope: FastifyInstance, svc: Services): void {
  scope.get<Op>('/operators/:operatorId/tokens', ownTokens, async (req) => ({
    tokens: (await ops.listTokens(svc, req.params.operatorId)).map(tokenView),
  }));

  scope.post<Op>('/operators/:operatorId/tokens', ownTokens, async (req, reply) => {
    const b = bodyOf(req, createTokenSchema);
    const { token, row } = await ops.createToken(svc, actorOf(req), req.params.operatorId, b.label as string);
    // The only time the token is shown: it is stored as its SHA-256.
    return reply.code(201).send({ ...tokenView(row), token });
  });

  scope.delete<Tok>('/operators/:operatorId/tokens/:tokenId', ownTokens, async (req) =>
    tokenView(await ops.revokeToken(svc, actorOf(req), req.params.operatorId, req.params.tokenId)),
  );
}

/** The audit log (read only): a page at a time, or all of it as CSV. */
function registerAudit(scope: FastifyInstance, svc: Services): void {
  scope.get('/audit', need('audit.read'), async (req) => {
    const q = queryOf(req, { ...AUDIT_FILTERS, before: int(1, 999_999_999_999), limit: int(1, AUDIT_PAGE_MAX) });
    const limit = q.limit ?? 100;
    const rows = await listAudit(svc, { ...auditFilterOf(q), beforeId: q.before === null ? null : String(q.before), limit });
    return { entries: rows.map(auditView), nextBefore: rows.length === limit ? rows.at(-1)!.id : null };
  });

  scope.get('/audit/export.csv', need('audit.read'), async (req, reply) => {
    const q = queryOf(req, AUDIT_FILTERS);
    const rows = exportAudit(svc, auditFilterOf(q));
    async function* lines() {
      yield `${CSV_COLUMNS.join(',')}\r\n`;
      for await (const row of rows) {
        const v = auditView(row);
        yield `${CSV_COLUMNS.map((c) => csvCell(v[c])).join(',')}\r\n`;
      }
    }
    return reply
      .type('text/csv; charset=utf-8')
      .header('content-disposition', `attachment; filename="audit-${new Date(svc.clock.now()).toISOString().slice(0, 10)}.csv"`)
      .send(Readable.from(lines()));
  });
}
