/** Operators for tests: created through the admin API with the ADMIN_TOKEN, with a bearer token or a console session. */
import assert from 'node:assert/strict';
import type { LightMyRequestResponse } from 'fastify';
import type { TestApp } from './app.ts';

export const PASSWORD = 'correct horse battery staple';

export interface TestOperator {
  operatorId: string;
  name: string;
  role: string;
  /** An API token of the operator's (Authorization: Bearer). */
  token: string;
}

export async function createOperator(t: TestApp, name: string, role: string, password = PASSWORD): Promise<TestOperator> {
  const r = await t.admin('POST', '/operators', { name, role, password });
  assert.equal(r.statusCode, 201, r.body);
  const operatorId = r.json().operatorId as string;
  const k = await t.admin('POST', `/operators/${operatorId}/tokens`, { label: `${name}'s test token` });
  assert.equal(k.statusCode, 201, k.body);
  return { operatorId, name, role, token: k.json().token as string };
}

/** A call to the admin API with an operator's bearer token. */
export function asOperator(t: TestApp, o: { token: string }, method: string, url: string, body?: unknown): Promise<LightMyRequestResponse> {
  return t.server.inject({
    method: method as 'GET',
    url: `/api/admin/v1${url}`,
    headers: { authorization: `Bearer ${o.token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    payload: body === undefined ? undefined : JSON.stringify(body),
  });
}

export interface TestSession {
  /** The `Cookie` header value. */
  cookie: string;
  csrfToken: string;
  setCookie: string;
}

export async function signIn(t: TestApp, name: string, password = PASSWORD, headers: Record<string, string> = {}): Promise<TestSession> {
  const r = await t.server.inject({
    method: 'POST',
    url: '/console/api/session',
    headers: { 'content-type': 'application/json', ...headers },
    payload: JSON.stringify({ name, password }),
  });
  assert.equal(r.statusCode, 200, r.body);
  const setCookie = String(r.headers['set-cookie']);
  return { cookie: setCookie.split(';')[0]!, csrfToken: r.json().csrfToken as string, setCookie };
}

/** A call to the admin API with a console session (the CSRF token on a change unless `csrf: false`). */
export function asSession(
  t: TestApp,
  s: TestSession,
  method: string,
  url: string,
  body?: unknown,
  o: { csrf?: boolean | string; headers?: Record<string, string> } = {},
): Promise<LightMyRequestResponse> {
  const csrf = o.csrf === undefined || o.csrf === true ? s.csrfToken : o.csrf === false ? undefined : o.csrf;
  return t.server.inject({
    method: method as 'GET',
    url: url.startsWith('/console/') ? url : `/api/admin/v1${url}`,
    headers: {
      cookie: s.cookie,
      ...(csrf !== undefined && method !== 'GET' ? { 'x-csrf-token': csrf } : {}),
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      ...o.headers,
    },
    payload: body === undefined ? undefined : JSON.stringify(body),
  });
}
