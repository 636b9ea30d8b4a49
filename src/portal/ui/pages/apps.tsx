/**
 * The merchant's apps: where events go (notify URL), from where requests may come (IP allowlist),
 * and the app's public keys: add a new key (pasted or from a file), then retire the old one after
 * an overlap chosen here; both are accepted until then.
 */
import { get, patch, post } from '../../../ui/api.ts';
import { ActionNote, Field, Loading, Section, Status, Table, formValues, useAction, useCan, useLoad } from '../../../ui/components.tsx';
import { time } from '../../../ui/format.ts';
import { PublicKeyForm } from '../../../ui/merchant-views.tsx';
import { t } from '../../../ui/i18n.ts';
import type { App } from '../rows.ts';

const OVERLAPS: { seconds: number; label: () => string }[] = [
  { seconds: 3600, label: () => t('in 1 hour') },
  { seconds: 86_400, label: () => t('in 24 hours') },
  { seconds: 7 * 86_400, label: () => t('in 7 days') },
  { seconds: 30 * 86_400, label: () => t('in 30 days') },
  { seconds: 0, label: () => t('now') },
];

export function AppsPage() {
  const loaded = useLoad(() => get<{ apps: App[] }>('/apps'), []);
  return (
    <>
      <h1>{t('Apps and keys')}</h1>
      <Loading loaded={loaded}>
        {(d) => (
          <>
            {d.apps.length === 0 ? <p class="muted">{t('No app yet.')}</p> : null}
            {d.apps.map((a) => (
              <AppCard key={a.appId} app={a} reload={loaded.reload} />
            ))}
          </>
        )}
      </Loading>
    </>
  );
}

function AppCard({ app, reload }: { app: App; reload: () => void }) {
  const can = useCan();
  const change = useAction();
  return (
    <Section title={`${t('App')} ${app.appId}`}>
      <article class="app" data-app={app.appId}>
        <dl class="facts">
          <dt>{t('Status')}</dt>
          <dd>
            <Status value={app.status} />
          </dd>
          <dt>{t('Notify URL')}</dt>
          <dd class="mono wrap">{app.notifyUrl ?? '—'}</dd>
          <dt>{t('Channels')}</dt>
          <dd>{app.channels.join(', ')}</dd>
          <dt>{t('IP allowlist')}</dt>
          <dd class="mono">{app.ipAllowlist.length ? app.ipAllowlist.join(', ') : t('any')}</dd>
        </dl>
        {can('apps.write') ? (
          <form
            class="inline-form"
            aria-label={t('Change app {app}', { app: app.appId })}
            onSubmit={(e) => {
              const v = formValues(e);
              void change.run(async () => {
                await patch(`/apps/${app.appId}`, {
                  notifyUrl: v.notifyUrl ? v.notifyUrl : null,
                  ipAllowlist: v.ipAllowlist ? v.ipAllowlist.split(/[\s,]+/).filter(Boolean) : [],
                });
                reload();
              }, t('App changed.'));
            }}
          >
            <Field label={t('Notify URL')} hint={t('https://… where you receive signed events')}>
              <input name="notifyUrl" type="url" maxLength={512} defaultValue={app.notifyUrl ?? ''} />
            </Field>
            <Field label={t('IP allowlist (CIDRs, empty = any)')}>
              <input name="ipAllowlist" defaultValue={app.ipAllowlist.join(' ')} />
            </Field>
            <button type="submit" disabled={change.busy}>
              {t('Save')}
            </button>
          </form>
        ) : null}
        <ActionNote action={change} />
        <Keys app={app} reload={reload} />
      </article>
    </Section>
  );
}

function Keys({ app, reload }: { app: App; reload: () => void }) {
  const can = useCan();
  const retire = useAction();
  const write = can('keys.write');
  return (
    <>
      <h3>{t('Public keys')}</h3>
      <Table head={[t('Key id'), t('Status'), t('Accepted until'), t('Registered'), '']} empty={app.keys.length === 0}>
        {app.keys.map((k) => (
          <tr key={k.keyId} data-key={k.keyId}>
            <td class="mono">{k.keyId}</td>
            <td>
              <Status value={k.valid ? 'VALID' : k.status === 'ACTIVE' ? 'RETIRED' : k.status} />
            </td>
            <td class="when">{k.validUntil ? time(k.validUntil) : t('until retired')}</td>
            <td class="when">{time(k.createdAt)}</td>
            <td>
              {write && k.valid ? (
                <form
                  class="inline-form compact"
                  aria-label={t('Retire key {key}', { key: k.keyId })}
                  onSubmit={(e) => {
                    const v = formValues(e);
                    void retire.run(async () => {
                      await post(`/apps/${app.appId}/keys/${encodeURIComponent(k.keyId)}/retire`, {
                        afterSeconds: v.after === 'keep' ? null : Number(v.after),
                      });
                      reload();
                    }, t('Key retirement set.'));
                  }}
                >
                  <select name="after" aria-label={t('Retire')}>
                    {OVERLAPS.map((o) => (
                      <option key={o.seconds} value={String(o.seconds)}>
                        {o.label()}
                      </option>
                    ))}
                    {k.validUntil ? <option value="keep">{t('keep (take the retirement back)')}</option> : null}
                  </select>
                  <button type="submit" disabled={retire.busy}>
                    {t('Retire')}
                  </button>
                </form>
              ) : null}
            </td>
          </tr>
        ))}
      </Table>
      <ActionNote action={retire} />
      {write ? (
        <PublicKeyForm
          path={`/apps/${app.appId}/keys`}
          label={t('Add a key to {app}', { app: app.appId })}
          title={t('Add a public key')}
          submit={t('Add key')}
          done={t('Key added: requests signed with it are accepted now, beside the others.')}
          intro={
            <p class="muted">
              {t(
                'Rotate without a gap: add the new key, switch your systems to it, then retire the old key after an overlap. Both are accepted until then.',
              )}
            </p>
          }
          onAdded={reload}
        />
      ) : null}
    </>
  );
}
