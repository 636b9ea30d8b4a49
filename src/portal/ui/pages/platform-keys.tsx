/** The platform's public keys (they sign answers and notifications): pin the first one; the SDK learns the next ones itself. */
import { get } from '../../../ui/api.ts';
import type { PlatformKeysResponse } from '../../../ui/api-types.ts';
import { Loading, Pre, Section, Status, useLoad } from '../../../ui/components.tsx';
import { time } from '../../../ui/format.ts';
import { t } from '../../../ui/i18n.ts';

/** The listing the portal answers: the open API's platform-keys read (generated from its schema), without requestId. */
type Listing = Omit<PlatformKeysResponse, 'requestId'>;

/** The SHA-256 fingerprint of a PEM's SPKI DER, as `SHA256:` + base64. */
async function fingerprint(pem: string): Promise<string> {
  const b64 = pem.replace(/-----[^-]+-----/g, '').replace(/\s+/g, '');
  const der = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', der));
  return `SHA256:${btoa(String.fromCharCode(...digest))}`;
}

export function PlatformKeysPage() {
  const loaded = useLoad(async () => {
    const l = await get<Listing>('/platform-keys');
    return { ...l, prints: await Promise.all(l.keys.map((k) => fingerprint(k.publicKeyPem))) };
  }, []);
  return (
    <>
      <h1>{t('Platform keys')}</h1>
      <p class="muted">
        {t(
          'The platform signs its answers and notifications with these keys. Pin the current one in your systems; each later key is endorsed by the one before, and the SDK learns it by itself from GET /api/open/v1/platform-keys.',
        )}
      </p>
      <Loading loaded={loaded}>
        {(d) => (
          <>
            {d.keys.map((k, i) => (
              <Section key={k.keyId} title={k.keyId}>
                <dl class="facts" data-platform-key={k.keyId}>
                  <dt>{t('State')}</dt>
                  <dd>
                    <Status value={k.state} />
                  </dd>
                  <dt>{t('Signs from')}</dt>
                  <dd>{time(k.signsFrom)}</dd>
                  <dt>{t('Signs until')}</dt>
                  <dd>{time(k.signsUntil)}</dd>
                  <dt>{t('Fingerprint')}</dt>
                  <dd class="mono small wrap">{d.prints[i]}</dd>
                  <dt>{t('Endorsed by')}</dt>
                  <dd class="mono">{k.endorsement?.keyId ?? '—'}</dd>
                </dl>
                <Pre value={k.publicKeyPem} />
              </Section>
            ))}
          </>
        )}
      </Loading>
    </>
  );
}
