/**
 * The back office's refusals (decisions.md section 8): `{code, message}` with an HTTP status, the
 * same for every back-office surface (the admin API, the console's endpoints, the sandbox helpers).
 */
export const ADMIN_ERRORS = {
  ADMIN_UNAUTHORIZED: 401,
  /** An operator's role does not allow the action, or a console request without its CSRF token (docs/console.md). */
  ADMIN_FORBIDDEN: 403,
  /** Too many failed sign-ins of a name or from an address. */
  ADMIN_RATE_LIMITED: 429,
  ADMIN_VALIDATION_FAILED: 400,
  ADMIN_NOT_FOUND: 404,
  ADMIN_CONFLICT: 409,
  ADMIN_STATE_INVALID: 409,
  ADMIN_PROVIDER_REJECTED: 502,
  ADMIN_UNAVAILABLE: 503,
} as const;
export type AdminCode = keyof typeof ADMIN_ERRORS;

/**
 * The codes the portal API answers (docs/portal.md): the back office's under the portal's prefix
 * (PORTAL_NOT_FOUND, ...), and PORTAL_TOTP_REQUIRED, a sign-in that needs the user's second factor.
 * The pages show each in zh-CN by its code (src/ui/errors.ts; test/unit/ui-i18n.test.ts).
 */
export type PortalCode = `PORTAL_${AdminCode extends `ADMIN_${infer R}` ? R : never}` | 'PORTAL_TOTP_REQUIRED';
export const PORTAL_CODES: readonly PortalCode[] = [
  ...(Object.keys(ADMIN_ERRORS) as AdminCode[]).map((c) => c.replace(/^ADMIN_/, 'PORTAL_') as PortalCode),
  'PORTAL_TOTP_REQUIRED',
];

export class AdminError extends Error {
  readonly code: AdminCode;
  readonly status: number;
  constructor(code: AdminCode, message: string) {
    super(message);
    this.code = code;
    this.status = ADMIN_ERRORS[code];
  }
}
