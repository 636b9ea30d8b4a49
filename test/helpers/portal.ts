/** Merchant users for tests: invited through the admin API, their invitation accepted, signed in to the portal. */
import assert from 'node:assert/strict';
import type { LightMyRequestResponse } from 'fastify';
import { TOTP, Secret } from 'otpauth';
import type { TestApp } from './app.ts';
import { PASSWORD } from './operators.ts';

export interface PortalUser {
  userId: string;
  login: string;
  role: string;
  merchantId: string;
}

export interface PortalSession {
  cookie: string;
  csrfToken: string;
}

/** The token of an invitation link (`.../portal#/invitation/<token>`). */
export function invitationToken(url: string): string {
  const m = /#\/invitation\/([A-Za-z0-9_-]+)$/.exec(url);
  assert.ok(m, url);
  return m[1]!;
}

/** A user invited by the ADMIN_TOKEN, its invitation accepted with PASSWORD. */
export async function createPortalUser(
  t: TestApp,
  merchantId: string,
  login: string,
  role: string,
  password = PASSWORD,
): Promise<PortalUser> {
  const r = await t.admin('POST', `/merchants/${merchantId}/users`, { login, role });
  assert.equal(r.statusCode, 201, r.body);
  const a = await portalCall(t, null, 'POST', `/invitations/${invitationToken(r.json().invitationUrl)}/accept`, { password });
  assert.equal(a.statusCode, 200, a.body);
  return { userId: r.json().userId, login, role, merchantId };
}

export async function portalSignIn(t: TestApp, login: string, o: { password?: string; totpCode?: string } = {}): Promise<PortalSession> {
  const r = await portalCall(t, null, 'POST', '/session', {
    login,
    password: o.password ?? PASSWORD,
    ...(o.totpCode !== undefined ? { totpCode: o.totpCode } : {}),
  });
  assert.equal(r.statusCode, 200, r.body);
  return { cookie: String(r.headers['set-cookie']).split(';')[0]!, csrfToken: r.json().csrfToken as string };
}

/** A call of the portal's API (`/portal/api` + path) with a session (the CSRF token on a change unless `csrf: false`), or none. */
export function portalCall(
  t: TestApp,
  s: PortalSession | null,
  method: string,
  path: string,
  body?: unknown,
  o: { csrf?: boolean; headers?: Record<string, string> } = {},
): Promise<LightMyRequestResponse> {
  return t.server.inject({
    method: method as 'GET',
    url: `/portal/api${path}`,
    headers: {
      ...(s ? { cookie: s.cookie } : {}),
      ...(s && o.csrf !== false && method !== 'GET' ? { 'x-csrf-token': s.csrfToken } : {}),
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      ...o.headers,
    },
    payload: body === undefined ? undefined : JSON.stringify(body),
  });
}

/** The current code of a TOTP secret (base32), at `nowMs`. */
export function totpCode(secret: string, nowMs = Date.now()): string {
  return new TOTP({ algorithm: 'SHA1', digits: 6, period: 30, secret: Secret.fromBase32(secret) }).generate({ timestamp: nowMs });
}
