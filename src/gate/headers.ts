/**
 * Step 3 of the gate: the six headers, checked literally (seed "Authentication";
 * decisions.md section 2). Read from the raw header list so a repeated header is seen even where
 * Node would join the values.
 */
export const SIGNED_HEADERS = {
  appId: { name: 'X-SVC-App-Id', re: /^svcop_[A-Za-z0-9]{16}$/ },
  timestamp: { name: 'X-SVC-Timestamp', re: /^[0-9]{1,10}$/ },
  nonce: { name: 'X-SVC-Nonce', re: /^[\x21-\x7e]{16,64}$/ },
  keyId: { name: 'X-SVC-Key-Id', re: /^[\x21-\x7e]{1,128}$/ },
  requestId: { name: 'X-SVC-Request-Id', re: /^[A-Za-z0-9._:-]{8,128}$/ },
  sign: { name: 'X-SVC-Sign', re: /^[\x21-\x7e]{64,1024}$/ },
} as const;

export type SignedHeaders = { [K in keyof typeof SIGNED_HEADERS]: string };

const BY_LOWER = new Map(Object.entries(SIGNED_HEADERS).map(([field, h]) => [h.name.toLowerCase(), field as keyof typeof SIGNED_HEADERS]));

export type HeaderCheck = { ok: true; headers: SignedHeaders } | { ok: false; repeated: string | null };

export function checkSignedHeaders(rawHeaders: readonly string[]): HeaderCheck {
  const seen: Partial<Record<keyof typeof SIGNED_HEADERS, string>> = {};
  let malformed = false;
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const field = BY_LOWER.get(rawHeaders[i]!.toLowerCase());
    if (field === undefined) continue;
    if (seen[field] !== undefined) return { ok: false, repeated: SIGNED_HEADERS[field].name };
    const value = rawHeaders[i + 1]!;
    seen[field] = value;
    if (!SIGNED_HEADERS[field].re.test(value)) malformed = true;
  }
  if (malformed) return { ok: false, repeated: null };
  for (const field of Object.keys(SIGNED_HEADERS) as (keyof typeof SIGNED_HEADERS)[]) {
    if (seen[field] === undefined) return { ok: false, repeated: null };
  }
  return { ok: true, headers: seen as SignedHeaders };
}

/** Standard Base64 with padding, as X-SVC-Sign must be. */
export function isStrictBase64(s: string): boolean {
  return s.length % 4 === 0 && /^[A-Za-z0-9+/]+={0,2}$/.test(s);
}
