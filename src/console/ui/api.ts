/** The console's calls: the admin API with the session cookie and its CSRF token, and the session endpoints. */

export class ApiError extends Error {
  status: number;
  code: string;
  constructor(status: number, code: string, message: string) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export interface Session {
  operator: { operatorId: string; name: string; role: string };
  permissions: string[];
  csrfToken: string;
  expiresAt: string;
}

let csrfToken = '';
let signedOut: () => void = () => {};

export function rememberSession(s: Session | null): void {
  csrfToken = s?.csrfToken ?? '';
}

/** What to do when a call finds the session over (idle, expired, revoked elsewhere). */
export function onSignedOut(f: () => void): void {
  signedOut = f;
}

/** A path under /console/api is the console's own; any other is the admin API's (`/merchants` is /api/admin/v1/merchants). */
export function urlOf(path: string): string {
  return path.startsWith('/console/') ? path : `/api/admin/v1${path}`;
}

export async function call<T>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (method !== 'GET') headers['x-csrf-token'] = csrfToken;
  const res = await fetch(urlOf(path), {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: 'same-origin',
  });
  if (res.status === 204) return undefined as T;
  const text = await res.text();
  let json: Record<string, unknown>;
  try {
    json = text ? (JSON.parse(text) as Record<string, unknown>) : {};
  } catch {
    json = { message: text };
  }
  if (!res.ok) {
    if (res.status === 401 && path !== '/console/api/session') signedOut();
    throw new ApiError(res.status, String(json.code ?? res.status), String(json.message ?? res.statusText));
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
