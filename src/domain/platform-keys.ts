/** The platform's public keys as they are published to merchants (docs/authentication.md, "Platform keys"). */

/** A published platform key as the platform-keys read answers it. */
export interface PublishedPlatformKey {
  keyId: string;
  publicKeyPem: string;
  /** CURRENT signs now; NEXT is published ahead of signing (a staged rotation); PREVIOUS signed before. */
  state: 'CURRENT' | 'NEXT' | 'PREVIOUS';
  /** From when it signs (null: a key of PLATFORM_KEY_FILE, which signs from when it was read). */
  signsFrom: Date | null;
  /** Until when (the next key's start), or null. */
  signsUntil: Date | null;
  /** The signature of the key published before it over keyEndorsementSigningString (null for the first). */
  endorsement: { keyId: string; signature: string } | null;
}
