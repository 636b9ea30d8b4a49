/**
 * The calls of a browser surface's page (the console, the portal): JSON with the session cookie and,
 * on a change, the session's CSRF token. Each page says where its paths go (configureApi).
 */

export class ApiError extends Error {
  status: number;
  code: string;
  retryAfter: string | null = null;
  constructor(status: number, code: string, message: string) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** What every surface's session answer carries. */
export interface BaseSession {
  permissions: string[];
  csrfToken: string;
  expiresAt: string;
}

let csrfToken = '';
let signedOut: () => void = () => {};
let config = { ownPrefix: '/console/', base: '/api/admin/v1', sessionPath: '/console/api/session' };

/**
 * Where the page's paths go: one under `ownPrefix` as it is, any other under `base`
 * (the console: `/merchants` is /api/admin/v1/merchants); `sessionPath` is the session endpoint
 * (its 401 is an answer, not a session that ended).
 */
export function configureApi(c: { ownPrefix: string; base: string; sessionPath: string }): void {
  config = c;
}

export function rememberSession(s: { csrfToken: string } | null): void {
  csrfToken = s?.csrfToken ?? '';
}

/** What to do when a call finds the session over (idle, expired, revoked elsewhere). */
export function onSignedOut(f: () => void): void {
  signedOut = f;
}

/** The URL of a page's path (configureApi). */
export function urlOf(path: string): string {
  return path.startsWith(config.ownPrefix) ? path : `${config.base}${path}`;
}

export async function call<T>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (method !== 'GET') headers['x-csrf-token'] = csrfToken;
  let res: Response;
  try {
    res = await fetch(urlOf(path), {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'same-origin',
    });
  } catch (err) {
    // No answer reached the page (the network, the service down): the page's own code (src/ui/errors.ts).
    throw new ApiError(0, 'NETWORK_FAILED', `the service could not be reached (${(err as Error).message})`);
  }
  if (res.status === 204) return undefined as T;
  const text = await res.text();
  let json: Record<string, unknown>;
  try {
    json = text ? (JSON.parse(text) as Record<string, unknown>) : {};
  } catch {
    json = {};
  }
  if (!res.ok) {
    if (res.status === 401 && path !== config.sessionPath) signedOut();
    // An answer without the API's {code, message} (a proxy's error page): the page's own code.
    const e =
      typeof json.code === 'string' && typeof json.message === 'string'
        ? new ApiError(res.status, json.code, json.message)
        : new ApiError(res.status, 'HTTP_ERROR', `HTTP ${res.status} ${res.statusText}`.trim());
    e.retryAfter = res.headers.get('retry-after');
    throw e;
  }
  return json as T;
}

export const get = <T>(path: string) => call<T>('GET', path);
export const post = <T>(path: string, body?: unknown) => call<T>('POST', path, body ?? {});
export const put = <T>(path: string, body: unknown) => call<T>('PUT', path, body);
export const patch = <T>(path: string, body: unknown) => call<T>('PATCH', path, body);
export const del = <T>(path: string) => call<T>('DELETE', path);

/** A query string of the non-empty values. */
export function query(values: Record<string, string | number | null | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(values)) if (v !== null && v !== undefined && v !== '') q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : '';
}
