/** The platform's signing keys (rotation) and source-IP policy. */
import { t } from '../../../ui/i18n.ts';
import { get, post, put } from '../../../ui/api.ts';
import { ActionNote, Field, Loading, Pre, Section, Table, formValues, useAction, useCan, useLoad } from '../../../ui/components.tsx';
import { time } from '../../../ui/format.ts';

interface PlatformKeys {
  keys: { keyId: string; publicKeyPem: string }[];
  currentKeyId: string | null;
  nextKey: { keyId: string; activatesAt: string } | null;
}

interface IpPolicy {
  trustedProxies: string[];
  allowlist: string[] | null;
  denylist: string[];
  allowIpv4: boolean;
  allowIpv6: boolean;
}

const lines = (v: string | undefined) => (v ?? '').split(/[\s,]+/).filter(Boolean);

export function PlatformPage() {
  return (
    <>
      <h1>{t('Platform')}</h1>
      <SigningKeys />
      <IpPolicySection />
    </>
  );
}

/** The published keys, which signs now and which next; the rotation. */
function SigningKeys() {
  const can = useCan();
  const keys = useLoad(() => get<PlatformKeys>('/platform-keys'), []);
  const rotate = useAction();
  return (
    <Section title={t('Platform signing keys')}>
      <Loading loaded={keys}>
        {(k) => (
          <>
            <Table head={[t('Key id'), t('Role'), t('Public key')]}>
              {k.keys.map((x) => (
                <tr key={x.keyId}>
                  <td class="mono">{x.keyId}</td>
                  <td>
                    {x.keyId === k.currentKeyId
                      ? t('signing now')
                      : k.nextKey?.keyId === x.keyId
                        ? t('signs from {at}', { at: time(k.nextKey.activatesAt) })
                        : t('published')}
                  </td>
                  <td>
                    <details>
                      <summary>PEM</summary>
                      <Pre value={x.publicKeyPem} />
                    </details>
                  </td>
                </tr>
              ))}
            </Table>
          </>
        )}
      </Loading>
      {can('platformKeys.rotate') ? (
        <form
          class="inline-form"
          aria-label={t('Rotate the platform key')}
          onSubmit={(e) => {
            const v = formValues(e);
            if (
              v.after === '0' &&
              !window.confirm(t('Sign with a new key at once? Merchants that have not fetched it will fail to verify.'))
            )
              return;
            void rotate.run(async () => {
              await post('/platform-keys/rotate', { activateAfterSeconds: Number(v.after) });
              keys.reload();
            }, t('A new key is published.'));
          }}
        >
          <Field label={t('The new key signs')}>
            <select name="after" defaultValue="86400">
              <option value="86400">{t('in 24 hours (merchants fetch it first)')}</option>
              <option value="604800">{t('in 7 days')}</option>
              <option value="0">{t('at once (a compromised key)')}</option>
            </select>
          </Field>
          <button type="submit" class="primary" disabled={rotate.busy}>
            {t('Rotate')}
          </button>
        </form>
      ) : null}
      <ActionNote action={rotate} />
    </Section>
  );
}

function IpPolicySection() {
  const can = useCan();
  const policy = useLoad(() => get<IpPolicy>('/platform/ip-policy'), []);
  const save = useAction();
  return (
    <Section title={t('Source-IP policy of the open API')}>
      <Loading loaded={policy}>
        {(p) =>
          can('ipPolicy.write') ? (
            <form
              class="stack-form"
              aria-label={t('IP policy')}
              onSubmit={(e) => {
                const v = formValues(e);
                void save.run(async () => {
                  await put('/platform/ip-policy', {
                    trustedProxies: lines(v.trustedProxies),
                    allowlist: v.noAllowlist === 'on' ? null : lines(v.allowlist),
                    denylist: lines(v.denylist),
                    allowIpv4: v.allowIpv4 === 'on',
                    allowIpv6: v.allowIpv6 === 'on',
                  });
                  policy.reload();
                }, t('Policy saved (other instances apply it within 5 s).'));
              }}
            >
              <Field label={t('Trusted proxies (CIDRs, one per line)')}>
                <textarea name="trustedProxies" rows={3} defaultValue={p.trustedProxies.join('\n')} />
              </Field>
              <label class="check">
                <input type="checkbox" name="noAllowlist" defaultChecked={p.allowlist === null} /> No platform allowlist (every address not
                denied)
              </label>
              <Field label={t('Allowlist (CIDRs, one per line)')}>
                <textarea name="allowlist" rows={3} defaultValue={(p.allowlist ?? []).join('\n')} />
              </Field>
              <Field label={t('Denylist (CIDRs, one per line)')}>
                <textarea name="denylist" rows={3} defaultValue={p.denylist.join('\n')} />
              </Field>
              <label class="check">
                <input type="checkbox" name="allowIpv4" defaultChecked={p.allowIpv4} /> IPv4
              </label>
              <label class="check">
                <input type="checkbox" name="allowIpv6" defaultChecked={p.allowIpv6} /> IPv6
              </label>
              <button type="submit" class="primary" disabled={save.busy}>
                {t('Save policy')}
              </button>
              <ActionNote action={save} />
            </form>
          ) : (
            <Pre value={p} />
          )
        }
      </Loading>
    </Section>
  );
}
