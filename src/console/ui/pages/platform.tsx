/** The platform's signing keys (rotation) and source-IP policy. */
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
  const can = useCan();
  const keys = useLoad(() => get<PlatformKeys>('/platform-keys'), []);
  const policy = useLoad(() => get<IpPolicy>('/platform/ip-policy'), []);
  const rotate = useAction();
  const save = useAction();
  return (
    <>
      <h1>Platform</h1>
      <Section title="Platform signing keys">
        <Loading loaded={keys}>
          {(k) => (
            <>
              <Table head={['Key id', 'Role', 'Public key']}>
                {k.keys.map((x) => (
                  <tr key={x.keyId}>
                    <td class="mono">{x.keyId}</td>
                    <td>
                      {x.keyId === k.currentKeyId
                        ? 'signing now'
                        : k.nextKey?.keyId === x.keyId
                          ? `signs from ${time(k.nextKey.activatesAt)}`
                          : 'published'}
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
            aria-label="Rotate the platform key"
            onSubmit={(e) => {
              const v = formValues(e);
              if (
                v.after === '0' &&
                !window.confirm('Sign with a new key at once? Merchants that have not fetched it will fail to verify.')
              )
                return;
              void rotate.run(async () => {
                await post('/platform-keys/rotate', { activateAfterSeconds: Number(v.after) });
                keys.reload();
              }, 'A new key is published.');
            }}
          >
            <Field label="The new key signs">
              <select name="after" defaultValue="86400">
                <option value="86400">in 24 hours (merchants fetch it first)</option>
                <option value="604800">in 7 days</option>
                <option value="0">at once (a compromised key)</option>
              </select>
            </Field>
            <button type="submit" class="primary" disabled={rotate.busy}>
              Rotate
            </button>
          </form>
        ) : null}
        <ActionNote action={rotate} />
      </Section>
      <Section title="Source-IP policy of the open API">
        <Loading loaded={policy}>
          {(p) =>
            can('ipPolicy.write') ? (
              <form
                class="stack-form"
                aria-label="IP policy"
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
                  }, 'Policy saved (other instances apply it within 5 s).');
                }}
              >
                <Field label="Trusted proxies (CIDRs, one per line)">
                  <textarea name="trustedProxies" rows={3} defaultValue={p.trustedProxies.join('\n')} />
                </Field>
                <label class="check">
                  <input type="checkbox" name="noAllowlist" defaultChecked={p.allowlist === null} /> No platform allowlist (every address
                  not denied)
                </label>
                <Field label="Allowlist (CIDRs, one per line)">
                  <textarea name="allowlist" rows={3} defaultValue={(p.allowlist ?? []).join('\n')} />
                </Field>
                <Field label="Denylist (CIDRs, one per line)">
                  <textarea name="denylist" rows={3} defaultValue={p.denylist.join('\n')} />
                </Field>
                <label class="check">
                  <input type="checkbox" name="allowIpv4" defaultChecked={p.allowIpv4} /> IPv4
                </label>
                <label class="check">
                  <input type="checkbox" name="allowIpv6" defaultChecked={p.allowIpv6} /> IPv6
                </label>
                <button type="submit" class="primary" disabled={save.busy}>
                  Save policy
                </button>
                <ActionNote action={save} />
              </form>
            ) : (
              <Pre value={p} />
            )
          }
        </Loading>
      </Section>
    </>
  );
}
