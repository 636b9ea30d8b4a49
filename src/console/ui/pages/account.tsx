/** The signed-in operator's own account: API tokens and password. */
import { t } from '../../../ui/i18n.ts';
import { useContext, useState } from 'preact/hooks';
import type { Session } from '../session.ts';
import { del, get, post } from '../../../ui/api.ts';
import { ActionNote, Field, Loading, SessionContext, Table, formValues, useAction, useLoad, Section } from '../../../ui/components.tsx';
import { time } from '../../../ui/format.ts';

interface Token {
  tokenId: string;
  label: string;
  prefix: string;
  createdAt: string;
  lastUsedAt: string | null;
  revokedAt: string | null;
}

/** An operator's API tokens: create (the token is shown once), revoke. */
export function Tokens({ operatorId }: { operatorId: string }) {
  const loaded = useLoad(() => get<{ tokens: Token[] }>(`/operators/${operatorId}/tokens`), [operatorId]);
  const action = useAction();
  const [shown, setShown] = useState<string | null>(null);
  return (
    <>
      <Loading loaded={loaded}>
        {(d) => (
          <Table head={[t('Label'), t('Starts with'), t('Created'), t('Last used'), '']} empty={d.tokens.length === 0}>
            {d.tokens.map((tok) => (
              <tr key={tok.tokenId}>
                <td>{tok.label}</td>
                <td class="mono">{tok.prefix}…</td>
                <td class="when">{time(tok.createdAt)}</td>
                <td class="when">{time(tok.lastUsedAt)}</td>
                <td>
                  {tok.revokedAt ? (
                    t('revoked {at}', { at: time(tok.revokedAt) })
                  ) : (
                    <button
                      type="button"
                      class="danger"
                      onClick={() =>
                        void action.run(async () => {
                          await del(`/operators/${operatorId}/tokens/${tok.tokenId}`);
                          loaded.reload();
                        }, t('Token revoked.'))
                      }
                    >
                      {t('Revoke')}
                    </button>
                  )}
                </td>
              </tr>
            ))}
          </Table>
        )}
      </Loading>
      <form
        class="inline-form"
        aria-label={t('New API token')}
        onSubmit={(e) => {
          const v = formValues(e);
          void action.run(async () => {
            const r = await post<{ token: string }>(`/operators/${operatorId}/tokens`, { label: v.label });
            setShown(r.token);
            loaded.reload();
          });
        }}
      >
        <Field label={t('Label')}>
          <input name="label" required maxLength={128} placeholder={t('reporting script')} />
        </Field>
        <button type="submit" disabled={action.busy}>
          {t('Create token')}
        </button>
      </form>
      {shown ? (
        <p class="note ok" role="status">
          {t('The new token, shown only now (use it as Authorization: Bearer …):')} <code class="token">{shown}</code>
        </p>
      ) : null}
      <ActionNote action={action} />
    </>
  );
}

export function AccountPage() {
  const session = useContext(SessionContext) as Session;
  const change = useAction();
  return (
    <>
      <h1>{t('My account')}</h1>
      <p>
        {t('Signed in as {name} ({role}) until {until} at the latest.', {
          name: session.operator.name,
          role: session.operator.role,
          until: time(session.expiresAt),
        })}
      </p>
      <Section title={t('My API tokens (for the admin API, with my role)')}>
        <Tokens operatorId={session.operator.operatorId} />
      </Section>
      <Section title={t('Change my password')}>
        <form
          class="stack-form"
          aria-label={t('Change my password')}
          onSubmit={(e) => {
            const v = formValues(e);
            const form = e.currentTarget as HTMLFormElement;
            void change.run(async () => {
              await post('/console/api/password', { currentPassword: v.currentPassword, newPassword: v.newPassword });
              form.reset();
            }, t('Password changed; your other sessions have ended.'));
          }}
        >
          <Field label={t('Current password')}>
            <input name="currentPassword" type="password" autocomplete="current-password" required />
          </Field>
          <Field label={t('New password')} hint={t('at least 12 characters')}>
            <input name="newPassword" type="password" autocomplete="new-password" required minLength={12} />
          </Field>
          <button type="submit" class="primary" disabled={change.busy}>
            {t('Change password')}
          </button>
          <ActionNote action={change} />
        </form>
      </Section>
    </>
  );
}
